"""Running an experiment: bring-up, host agents, timelines, analysis, cleanup.

:func:`run` takes an experiment (testbed.experiment) by name and:

1. checks the machine can run it (root, Mininet; ``--target bmv2`` and
   ``--hosts rxe`` fail with a clear message where ``testbed doctor`` says
   they are missing);
2. saves the parameters and the whole plan (``plan.json``: topology, switch
   commands, every job spec);
3. hands the plan to an engine (``--engine``). The Mininet engine builds the
   topology (testbed.net.star_router with the switch of ``--target``: soft or
   BMv2; links delayed as the plan's modelled network says,
   testbed.modelled), applies the modelled network's converted lines (rate,
   queue depth, RED) and then the topology's, through its controller API
   (switches.controller; ``apply_switch_command``: queue settings, default
   actions and register reads as controller calls, other lines as
   simple_switch_CLI commands both targets accept; the soft target's
   ``set_port_rate_bps`` becomes BMv2's ``set_queue_rate``, see
   ``bps_to_pps``), measures the base RTT by ping (``measure_base_rtt``) and
   runs the phases one after the other: switch commands, then one host agent
   (``python -m hosts.agent``) per job, started together, while a thread
   polls the soft switch's statistics into ``phases/<phase>/switch.jsonl``
   (BMv2 has no such statistics: its runs have the P4 queue register only);
   a progress line per phase and a status line (per host) every few seconds;
4. always tears everything down (try/finally around testbed.net.running, also
   on Ctrl-C and SIGTERM): agents are stopped before the network, so no
   process, namespace or veth is left; what the run made is recorded
   (testbed.owned) until it is gone, for ``testbed clean``. An agent that exits non-zero, or is
   killed, fails the run with a message naming the host, its exit status and
   the tail of its log. A teardown that hangs (Mininet waits forever on a node
   shell that something else killed) is cut after ``teardown_timeout_s`` and
   what is left is removed by hand;
5. analyses (``experiment.analyze``), judges fidelity (testbed.fidelity:
   pass / fail / not measured per check), plots (``experiment.plot``) and
   writes ``summary.json``.

Run directory layout::

    plan.json  summary.json  progress.log
    switch/    s1.log (BMv2: also s1.out), s1-commands.txt (soft: the routes),
               pcaps (--pcap: <ifname>_in.pcap, _out.pcap)
    phases/<phase>/<host>.spec.json, <host>.events.jsonl, <host>.log,
                   switch.jsonl, switch_stats.json, rendezvous/
    plots/*.png

A plan whose topology has a ``fabric`` (testbed.net.LeafSpine) brings up a
leaf-spine of switches (``leaf1``..., ``spine1``...) instead of ``s1``: the
network's and the phases' lines go to every switch, each switch is sampled
into ``switch-<name>.jsonl``, and ``switch_stats.json`` has every switch's
figures under ``switches`` beside their pooled lag and kernel drops (what the
fidelity checks read).

The modules, each importing only those listed before it:

- ``errors``: RunError, RunTerminated;
- ``progress``: the progress lines and log, the tails of an agent's log;
- ``records``: summary.json's records of the network, the transport and the
  port rate, flat result keys, the results line;
- ``priorities``: the switch's nice level, the SCHED_FIFO priorities;
- ``teardown``: the watchdog of a hung teardown, removal by hand;
- ``switch_stats``: the switch poller, the statistics read around a phase,
  a fabric's pooled;
- ``environment``: what this machine, the hosts and the profile allow;
  software versions;
- ``options``: RunOptions;
- ``switch_commands``: plan lines applied through the controller API;
- ``agents``: starting, watching and stopping a phase's host agents;
- ``phase``: one phase on the Mininet engine;
- ``phase_retries``: a phase run again while its verdict fails;
- ``mininet_engine``, ``sim_engine``: the two engines; ``engines``: the
  Engine protocol and the engines by name;
- this module: :func:`run` and :func:`replot`.
"""

from __future__ import annotations

import datetime as _dt
import json
from pathlib import Path
from typing import Any

from testbed.experiment import (
    Experiment,
    ExperimentError,
    RunPlan,
    load,
    make_params,
    params_to_dict,
    plan_to_dict,
    scale_record,
)
from testbed.fidelity import Verdict, evaluate_fidelity, verdict_text
from testbed.runner.engines import engine_of
from testbed.runner.environment import (
    REPO_ROOT,
    check_environment,
    check_hosts_supported,
    check_profile,
    default_out_dir,
    plan_for_hosts,
    pypy_version,
    software_versions,
)
from testbed.runner.errors import RunError, RunTerminated
from testbed.runner.mininet_engine import measure_base_rtt
from testbed.runner.options import RunOptions
from testbed.runner.phase_retries import UNFAITHFUL_TRIES_DIR
from testbed.runner.progress import Progress
from testbed.runner.records import (
    AppliedCommand,
    Measured,
    _network_record,
    _port_rate_record,
    _transport_record,
    _verdict_line,
    _write_json,
    flatten_keys,
)
from testbed.runner.switch_commands import apply_switch_command, bps_to_pps
from testbed.summary import results_json

# What the rest of the project uses of the runner; the other names live in
# their modules (see above).
__all__ = ["RunError", "RunTerminated", "RunOptions", "run", "replot", "check_environment",
           "default_out_dir", "software_versions", "pypy_version", "flatten_keys", "REPO_ROOT",
           "evaluate_fidelity", "apply_switch_command", "bps_to_pps", "measure_base_rtt"]


def run(name: str, opts: RunOptions | None = None) -> dict[str, Any]:
    """Run experiment ``name``; returns the summary (also in DIR/summary.json).
    Raises RunError (the run failed: summary.json says why) or ExperimentError."""
    opts = opts or RunOptions()
    mod = load(name)
    profile = opts.profile_name()
    check_profile(mod, profile, opts.engine)
    params = make_params(mod, overrides=opts.overrides, profile=profile)
    plan: RunPlan = mod.plan(params)
    check_hosts_supported(mod, opts.hosts)
    plan = plan_for_hosts(plan, opts.hosts)
    engine = engine_of(opts)
    engine.check(plan, opts)
    run_dir = Path(opts.out) if opts.out else default_out_dir(mod.NAME)
    if run_dir.exists() and any(run_dir.iterdir()):
        raise RunError(f"output directory {run_dir} exists and is not empty")
    run_dir.mkdir(parents=True, exist_ok=True)
    run_dir = run_dir.resolve()
    started = _dt.datetime.now(_dt.UTC).isoformat(timespec="seconds")
    summary: dict[str, Any] = {
        "experiment": mod.NAME, "ok": False, "quick": profile == "quick", "profile": profile,
        "scaled_down_from": scale_record(mod, profile, params), "engine": engine.name,
        "target": opts.target,
        "hosts": opts.hosts, "pcap": opts.pcap, "run_dir": str(run_dir), "started": started,
        "params": params_to_dict(params), "overrides": dict(opts.overrides),
        "versions": software_versions(), "transport": _transport_record(plan),
    }
    _write_json(run_dir / "plan.json", {"experiment": mod.NAME, "params": summary["params"],
                                        **plan_to_dict(plan)})
    prog = Progress(opts.echo, run_dir / "progress.log")
    prog.line(f"{mod.NAME}{f' ({profile})' if profile != 'full' else ''}: output {run_dir}")
    from testbed.net import SoftSignal, sigterm_raises

    applied: list[AppliedCommand] = []
    measured: Measured = {}
    summary["switch_config"] = {"target": opts.target, "applied": applied}
    try:
        try:
            with sigterm_raises():
                engine.execute(plan, run_dir, opts, prog, applied, measured)
        except KeyboardInterrupt:
            summary["error"] = "interrupted (Ctrl-C)"
            raise
        except SoftSignal as e:
            summary["error"] = f"terminated ({e})"
            raise RunTerminated(f"run terminated by {e}"
                                + ("; network torn down" if engine.name == "mininet" else "")
                                ) from e
        except RunError as e:
            summary["error"] = str(e)
            raise
        except Exception as e:
            summary["error"] = f"{type(e).__name__}: {e}"
            raise RunError(f"run failed: {type(e).__name__}: {e}") from e
        retries = measured.get("phase_retries", [])
        if retries:
            names = sorted({r["phase"] for r in retries})
            prog.line(f"{len(retries)} unfaithful phase tries set aside in "
                      f"{UNFAITHFUL_TRIES_DIR}/ and run again ({', '.join(names)}); "
                      "summary.json's phase_retries says why each failed")
        prog.line("analysing")
        results = _finish(mod, plan, run_dir, summary,
                          engine.fidelity(run_dir, plan, opts, measured))
        prog.line(_verdict_line(summary, results, tuple(mod.HEADLINE)))
        return summary
    finally:
        summary["switch_config"]["port_rate"] = _port_rate_record(applied)
        summary["network"] = _network_record(plan, measured)
        summary["phase_retries"] = measured.get("phase_retries", [])
        if "sim" in measured:
            summary["sim"] = measured["sim"]
        summary["duration_s"] = round(prog.elapsed, 2)
        _write_json(run_dir / "summary.json", summary)
        prog.close()


def _finish(mod: Experiment, plan: RunPlan, run_dir: Path,
            summary: dict[str, Any], fid: Verdict) -> dict[str, Any]:
    summary["fidelity"] = fid
    try:
        results = results_json(mod.analyze(run_dir))
    except Exception as e:
        summary["error"] = f"analysis failed: {type(e).__name__}: {e}"
        raise RunError(summary["error"]) from e
    summary.update(results)
    summary.update(flatten_keys(results))
    # An experiment may add its own fidelity conditions (results["fidelity_ok"]).
    if not results.get("fidelity_ok", True):
        fid.update({"ok": False, "verdict": "not faithful"})
        fid["failed"].append("experiment")
        fid["text"] = verdict_text(fid) + " (the experiment's own fidelity conditions failed)"
    summary["fidelity_ok"] = bool(fid["ok"])
    summary["fidelity_verdict"] = fid["text"]
    try:
        summary["plots"] = [str(Path(p).relative_to(run_dir)) for p in mod.plot(run_dir)]
    except Exception as e:
        summary["error"] = f"plotting failed: {type(e).__name__}: {e}"
        raise RunError(summary["error"]) from e
    summary["ok"] = True
    return results


def replot(run_dir: Path) -> list[Path]:
    """Re-draw a finished run's figures from what it saved."""
    run_dir = Path(run_dir)
    plan = run_dir / "plan.json"
    if not plan.exists():
        raise RunError(f"{run_dir}: no plan.json (not a run directory)")
    name = json.loads(plan.read_text())["experiment"]
    try:
        mod = load(name)
    except ExperimentError as e:
        raise RunError(str(e)) from e
    return [Path(p) for p in mod.plot(run_dir)]
