"""Running an experiment: bring-up, host agents, timelines, analysis, cleanup.

:func:`run` takes an experiment (testbed.experiment) by name and:

1. checks the machine can run it (root, Mininet; ``--target bmv2`` and
   ``--hosts rxe`` fail with a clear message where ``testbed doctor`` says
   they are missing);
2. saves the parameters and the whole plan (``plan.json``: topology, switch
   commands, every job spec);
3. builds the topology (testbed.net.star_router with the switch of
   ``--target``: soft or BMv2; links delayed as the plan's modelled network
   says, testbed.modelled), applies the modelled network's converted lines
   (rate, queue depth, RED) and then the topology's, through its
   controller API (switches.controller; :func:`apply_switch_command`: queue settings,
   default actions and register reads as controller calls, other lines as
   simple_switch_CLI commands both targets accept; the soft target's ``set_port_rate_bps``
   becomes BMv2's ``set_queue_rate``, see :func:`bps_to_pps`), measures the
   base RTT by ping (:func:`measure_base_rtt`) and runs the
   phases one after the other: switch commands, then one host agent
   (``python -m hosts.agent``) per job, started together, while a thread polls
   the soft switch's statistics into ``phases/<phase>/switch.jsonl`` (BMv2
   has no such statistics: its runs have the P4 queue register only); a progress
   line per phase and a status line (per host) every few seconds;
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

A plan whose topology has a ``fabric`` (testbed.net.LeafSpine) brings up a
leaf-spine of switches (``leaf1``..., ``spine1``...) instead of ``s1``: the
network's and the phases' lines go to every switch, each switch is sampled
into ``switch-<name>.jsonl``, and ``switch_stats.json`` has every switch's
figures under ``switches`` beside their pooled lag and kernel drops (what the
fidelity checks read).
    plots/*.png
"""

from __future__ import annotations

import dataclasses
import datetime as _dt
import importlib.metadata
import json
import os
import platform
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any, Protocol

from ground.netlink import NetlinkError, delete_link
from hosts.agent_spec import JobSpec, SpecError, agent_interpreter
from switches.controller.api import Controller, ControllerError
from switches.controller.cli import CliController
from switches.controller.p4runtime import P4RuntimeController
from switches.targets import Target, TargetUnavailable, target_of
from testbed.agent_launcher import AgentLauncher, LaunchedAgent, LauncherError
from testbed.cpu_usage import CpuSampler, format_cpu
from testbed.doctor import doctor_report
from testbed.experiment import (
    PROFILE_ENGINES,
    Experiment,
    ExperimentError,
    PhasePlan,
    RunPlan,
    Topology,
    load,
    make_params,
    params_to_dict,
    plan_to_dict,
    profile_params,
    repo_path,
    scale_record,
)
from testbed.fidelity import (
    arrivals_behind_clock,
    evaluate_fidelity,
    rx_out_of_order,
    verdict_text,
)
from testbed.owned import this_process_record

__all__ = ["RunError", "RunTerminated", "RunOptions", "run", "check_environment", "replot", "default_out_dir",
           "evaluate_fidelity", "software_versions", "apply_switch_command", "bps_to_pps"]

REPO_ROOT = Path(__file__).resolve().parents[1]
AGENT_MODULE = "hosts.agent"
# Set to 0: start every agent as a new interpreter, not forked by its host's
# launcher (hosts/agent_launcher.py), e.g. to compare the two.
LAUNCHER_ENV = "P4TB_AGENT_LAUNCHER"
# How often a phase reads its processes' CPU time (testbed.cpu_usage): a few
# file reads per process; the shares span the first to the last reading.
CPU_SAMPLE_S = 0.5


class RunError(RuntimeError):
    """The run could not be done or failed; the message says what and where."""


class RunTerminated(RunError):
    """The run was stopped by SIGTERM (its network torn down): whoever runs
    several runs (``testbed run all``, ``testbed bench hosts``) stops too."""


@dataclass
class RunOptions:
    quick: bool = False
    # "quick", "full" or "paper" (testbed.experiment.PROFILES); None: quick
    # or full by ``quick``. The paper profile runs on the sim engine only.
    profile: str | None = None
    target: str = "soft"
    hosts: str = "udp"
    out: Path | None = None
    pcap: bool = False
    overrides: dict[str, str] = field(default_factory=dict)
    echo: Callable[[str], None] = print
    status_interval_s: float = 2.0
    teardown_timeout_s: float = 60.0  # a longer teardown counts as hung (see _force_teardown)
    # Run a phase again, up to this many times, when its own fidelity verdict
    # fails (see run_phase_until_faithful); 0: every phase runs once.
    phase_retries: int = 0
    # "mininet" (real time: namespaces, processes) or "sim" (virtual time,
    # one process: testbed.sim); see ENGINES.
    engine: str = "mininet"
    # The virtual-time engine's seed (its switches' random streams); the
    # plan's own seeds (jobs, flows) are the plan's.
    seed: int = 1
    # The virtual-time engine's host links (testbed.sim.network.HOST_LINKS):
    # "wire" (a frame arrives with its last bit) or "veth" (with its first,
    # as on the Mininet engine).
    host_links: str = "wire"
    # The virtual-time engine's interpreter (testbed.sim.pypy.INTERPRETERS):
    # "auto" runs it under PyPy where set up, in this CPython otherwise.
    interpreter: str = "auto"

    def profile_name(self) -> str:
        """The run's profile: ``profile``, else quick or full by ``quick``."""
        return self.profile or ("quick" if self.quick else "full")

    def switch_target(self) -> Target:
        """The switch target ``target`` names; RunError naming the known ones."""
        return switch_target(self.target)


class Engine(Protocol):
    """What executes a RunPlan: the runner keeps parameters, the plan record,
    progress, analysis, plots and the summary once for every engine."""

    name: str

    def check(self, plan: RunPlan, opts: RunOptions) -> None:
        """Raise RunError if this machine or engine cannot run ``plan``."""

    def execute(self, plan: RunPlan, run_dir: Path, opts: RunOptions, prog: Progress,
                applied: list[dict[str, Any]], measured: dict[str, Any]) -> None:
        """Run every phase, writing the run directory's timelines."""

    def fidelity(self, run_dir: Path, plan: RunPlan, summary: dict[str, Any],
                 measured: dict[str, Any]) -> dict[str, Any]:
        """The run's fidelity verdict (testbed.fidelity's shape)."""


class MininetEngine:
    """Real time: namespaces, veths, switch daemons and agent processes."""

    name = "mininet"

    def check(self, plan: RunPlan, opts: RunOptions) -> None:
        check_environment(opts.target, opts.hosts)

    def execute(self, plan: RunPlan, run_dir: Path, opts: RunOptions, prog: Progress,
                applied: list[dict[str, Any]], measured: dict[str, Any]) -> None:
        _bring_up_and_run(plan, run_dir, opts, prog, applied, measured)

    def fidelity(self, run_dir: Path, plan: RunPlan, summary: dict[str, Any],
                 measured: dict[str, Any]) -> dict[str, Any]:
        return evaluate_fidelity(run_dir, plan, switch_target(summary.get("target", "soft")),
                                 summary.get("hosts", "udp"))


class SimEngine:
    """Virtual time: the plan on one simulated clock in this process (testbed.sim)."""

    name = "sim"

    def check(self, plan: RunPlan, opts: RunOptions) -> None:
        from testbed.sim.engine import SimUnsupported, check_plan

        if not opts.switch_target().virtual_time:
            raise RunError(f"--target {opts.target}: the virtual-time engine runs the soft "
                           "switch's runtime (BMv2 runs in real time: --engine mininet)")
        if opts.pcap:
            raise RunError("--pcap: the virtual-time engine writes no captures yet")
        try:
            check_plan(plan, opts.hosts)
        except SimUnsupported as e:
            raise RunError(f"--engine sim: {e}") from e

    def execute(self, plan: RunPlan, run_dir: Path, opts: RunOptions, prog: Progress,
                applied: list[dict[str, Any]], measured: dict[str, Any]) -> None:
        from testbed.sim.driver import run_phases
        from testbed.sim.engine import SimUnsupported, host_line_bps
        from testbed.sim.network import compile_plan_program
        from testbed.sim.pypy import InterpreterError, choose, run_in_child

        try:
            exe = choose(opts.interpreter)
            host_bps = host_line_bps(plan)
            program = compile_plan_program(plan)
        except (InterpreterError, SimUnsupported, ValueError) as e:
            raise RunError(f"--engine sim: {e}") from e
        topo = plan.topology
        fab = topo.fabric
        prog.line(f"network (simulated): {topo.n_hosts} hosts around "
                  + (f"a leaf-spine of {fab.leaves} leaves and {fab.spines} spines"
                     if fab else "switch s1")
                  + f" running {topo.program_label()}, NICs at "
                  f"{host_bps / 1e6:g} Mb/s, host links {opts.host_links}, seed {opts.seed}"
                  + (f", under PyPy ({exe})" if exe else ""))
        wall0 = time.monotonic()
        rec: dict[str, Any] | None = None
        try:
            if exe is None:  # in this process
                out = run_phases(plan, run_dir, seed=opts.seed, host_links=opts.host_links,
                                 packet_bytes=topo.packet_bytes, load_program=lambda: program,
                                 line=prog.line, applied=applied)
            else:
                from switches.soft.backends import write_generated

                out = run_in_child(exe, plan, run_dir, seed=opts.seed,
                                   host_links=opts.host_links, packet_bytes=topo.packet_bytes,
                                   program_path=write_generated(program), line=prog.line)
                applied.extend(out.applied)
            rec = out.record
            if out.fidelity is not None:
                measured["sim_fidelity"] = out.fidelity
            out.reraise()
        finally:
            if rec is not None:
                wall = time.monotonic() - wall0
                rec.update(wall_s=round(wall, 3),
                           packet_hops_per_s=round(rec["packet_hops"] / wall) if wall > 0 else None,
                           events_per_s=round(rec["events"] / wall) if wall > 0 else None)
                measured["sim"] = rec
        assert rec is not None  # (a run without a record raised above)
        prog.line(f"simulated {rec['sim_s']:.6f} s in {rec['wall_s']:.1f} s of wall time: "
                  f"{rec['events']} events, {rec['packet_hops']} packet-hops "
                  f"({rec['packet_hops_per_s']} per wall second, {rec['interpreter']})")

    def fidelity(self, run_dir: Path, plan: RunPlan, summary: dict[str, Any],
                 measured: dict[str, Any]) -> dict[str, Any]:
        fid: dict[str, Any] = measured["sim_fidelity"]
        return fid


ENGINES: dict[str, Engine] = {"mininet": MininetEngine(), "sim": SimEngine()}


def engine_of(opts: RunOptions) -> Engine:
    e = ENGINES.get(opts.engine)
    if e is None:
        raise RunError(f"unknown engine {opts.engine!r} (known: {', '.join(ENGINES)})")
    return e


# ---------------------------------------------------------------------------
# environment


def switch_target(name: str) -> Target:
    """The switch target called ``name``; RunError naming the known ones."""
    try:
        return target_of(name)
    except ValueError as e:
        raise RunError(str(e)) from None


def check_environment(target: str, hosts: str, *, need_network: bool = True) -> None:
    """Raise RunError unless this machine can run ``target`` with ``hosts``."""
    rep = doctor_report()
    tgt = switch_target(target)
    if hosts not in ("udp", "rxe"):
        raise RunError(f"unknown host provider {hosts!r} (udp or rxe)")
    if not rep["targets"][tgt.name]:
        why = rep.get("targets_detail", {}).get(tgt.name, {}).get("reason", "")
        raise RunError(f"target {tgt.name} is not installed here: "
                       + (why or "simple_switch_grpc and p4c not found")
                       + "; see `testbed doctor`, or use --target soft")
    if hosts == "rxe":
        if not rep.get("rxe_hosts"):
            why = rep.get("rxe_hosts_reason", "")
            raise RunError("hosts rxe is not available here: " + (why or "no rdma_rxe")
                           + "; see `testbed doctor`, or use --hosts udp")
    if need_network:
        if not rep["root"]:
            raise RunError("a run needs root (Mininet network namespaces)")
        if not rep["mininet"]:
            raise RunError("a run needs Mininet (apt-get install mininet)")


def check_hosts_supported(mod: Experiment, hosts: str) -> None:
    """Raise RunError unless experiment ``mod`` runs on ``hosts``: an experiment
    lists the providers it runs on in ``HOST_PROVIDERS``."""
    supported = tuple(mod.HOST_PROVIDERS)
    if hosts in supported:
        return
    raise RunError(f"{mod.NAME} does not run on {hosts} hosts; it runs with --hosts "
                   f"{' or '.join(supported)}")


def plan_for_hosts(plan: RunPlan, hosts: str) -> RunPlan:
    """The plan as hosts of provider ``hosts`` run it. An rxe host's DCQCN shim
    installs the host's line-rate HTB and its QPs' classes itself
    (hosts/roce/rxe_dcqcn.py), so the runner's line qdisc on the hosts
    (``host_line_qdisc``, for udp hosts' pacers) is left out. Every job is
    checked for the provider (JobSpec's own checks, e.g. rxe hosts obey no
    PFC pause) before any network comes up, not when its phase starts."""
    for phase in plan.phases:
        for job in phase.jobs.values():
            try:
                dataclasses.replace(job, provider=hosts)
            except SpecError as e:
                raise RunError(f"phase {phase.name}: {e}") from e
    if hosts != "rxe" or not plan.topology.host_line_qdisc:
        return plan
    return dataclasses.replace(plan, topology=dataclasses.replace(plan.topology,
                                                                  host_line_qdisc=False))


def default_out_dir(name: str) -> Path:
    stamp = _dt.datetime.now().strftime("%Y%m%d-%H%M%S")
    return REPO_ROOT / "results" / f"{name}-{stamp}"


def software_versions() -> dict[str, Any]:
    def git(*args: str) -> str | None:
        try:
            r = subprocess.run(["git", "-C", str(REPO_ROOT), *args], capture_output=True,
                               text=True, timeout=10)
        except (OSError, subprocess.TimeoutExpired):
            return None
        return r.stdout.strip() if r.returncode == 0 else None

    out: dict[str, Any] = {
        "python": platform.python_version(),
        "pypy": pypy_version(),
        "kernel": platform.release(),
        "machine": platform.machine(),
        "cpus": os.cpu_count(),
        "git_rev": git("rev-parse", "HEAD"),
        "git_dirty": bool(git("status", "--porcelain", "--untracked-files=no")),
    }
    for dist in ("numpy", "matplotlib", "click", "scapy"):
        try:
            out[dist] = importlib.metadata.version(dist)
        except importlib.metadata.PackageNotFoundError:
            out[dist] = None
    out["mininet"] = _mininet_version()
    return out


def _mininet_version() -> str | None:
    """Debian's mininet is not a pip distribution; it carries its own VERSION,
    read from its source so that recording it does not load Mininet (the
    virtual-time engine runs without it)."""
    import importlib.util
    import re

    spec = importlib.util.find_spec("mininet")    # (a submodule's would import the package)
    if spec is None or spec.origin is None:
        return None
    try:
        net = Path(spec.origin).parent / "net.py"
        m = re.search(r'^VERSION\s*=\s*"([^"]+)"', net.read_text(), re.M)
    except OSError:
        return None
    return m.group(1) if m else None


def pypy_version() -> str | None:
    """The version of the PyPy the pypy backends run ("7.3.11 (Python 3.9.16)"),
    None if none is installed."""
    from switches.soft.backends import interpreter

    try:
        exe = interpreter("pypy")
        r = subprocess.run([exe, "-c", "import sys, platform; print('%d.%d.%d' % "
                            "sys.pypy_version_info[:3], '(Python', platform.python_version()"
                            " + ')')"], capture_output=True, text=True, timeout=20)
    except (FileNotFoundError, OSError, subprocess.TimeoutExpired):
        return None
    return (r.stdout.strip() or None) if r.returncode == 0 else None


# ---------------------------------------------------------------------------
# progress


class Progress:
    def __init__(self, echo: Callable[[str], None], log_path: Path) -> None:
        self.t0 = time.monotonic()
        self.echo = echo
        self._log: IO[str] = open(log_path, "a", buffering=1)  # closed by close()

    def line(self, msg: str) -> None:
        text = f"[{time.monotonic() - self.t0:6.1f}s] {msg}"
        self._log.write(text + "\n")
        self.echo(text)

    @property
    def elapsed(self) -> float:
        return time.monotonic() - self.t0

    def close(self) -> None:
        self._log.close()


def _tail(path: Path, lines: int = 15) -> str:
    try:
        text = path.read_text(errors="replace")
    except OSError:
        return "(no log)"
    tail = text.splitlines()[-lines:]
    return "\n".join(tail) if tail else "(log is empty)"


def _last_events(path: Path, nbytes: int = 8192) -> list[dict[str, Any]]:
    try:
        with open(path, "rb") as f:
            f.seek(0, os.SEEK_END)
            size = f.tell()
            f.seek(max(0, size - nbytes))
            data = f.read().decode(errors="replace")
    except OSError:
        return []
    out = []
    for line in data.splitlines()[1 if size > nbytes else 0:]:
        try:
            out.append(json.loads(line))
        except json.JSONDecodeError:
            continue
    return out


# ---------------------------------------------------------------------------
# switch polling


class SwitchPoller(threading.Thread):
    """Samples the switch (``switch_sample``, switches/soft/daemon.py) every
    ``interval`` s into a JSONL file, each line with its time ``t_ns``."""

    def __init__(self, control_port: int, path: Path, interval: float) -> None:
        super().__init__(name="switch-poller", daemon=True)
        self.port = control_port
        self.path = path
        self.interval = interval
        self.stop_event = threading.Event()
        self.error: str | None = None
        self.samples = 0

    def run(self) -> None:
        from switches.soft.control.client import SwitchClient
        from switches.soft.daemon import SAMPLE_COMMAND

        client = SwitchClient(self.port, timeout=5.0)
        try:
            with open(self.path, "a", buffering=1) as f:
                while not self.stop_event.is_set():
                    t0 = time.monotonic_ns()
                    sample = json.loads(client.execute(SAMPLE_COMMAND))
                    t1 = time.monotonic_ns()
                    f.write(json.dumps({"t_ns": (t0 + t1) // 2, **sample},
                                       separators=(",", ":")) + "\n")
                    self.samples += 1
                    self.stop_event.wait(self.interval)
        except Exception as e:  # the switch went away: the main loop reports it
            self.error = f"{type(e).__name__}: {e}"
        finally:
            client.close()

    def stop(self) -> None:
        self.stop_event.set()
        self.join(timeout=5)


# ---------------------------------------------------------------------------
# switch configuration


BMV2_RATE_NOTE = ("approximation: BMv2 limits each egress queue in packets per second; "
                  "pps = bit rate / (8 x packet_bytes), exact only for frames of packet_bytes")


def bps_to_pps(bps: float, packet_bytes: int) -> int:
    """The packet rate BMv2's ``set_queue_rate`` needs for ``bps`` with frames
    of ``packet_bytes`` (at least 1 pps). An approximation: BMv2 counts
    packets, so smaller frames get less and larger ones more than ``bps``."""
    if packet_bytes <= 0:
        raise ValueError("packet_bytes must be positive")
    return max(1, round(bps / (8 * packet_bytes)))


def _cli_of(ctl: Controller) -> CliController:
    cli = ctl if isinstance(ctl, CliController) else (
        ctl.cli if isinstance(ctl, P4RuntimeController) else None)
    if cli is None:
        raise ControllerError("this switch has no simple_switch_CLI connection")
    return cli


def _port_prio(words: list[str], verb: str, first: int) -> tuple[int | None, int | None]:
    rest = words[first:]
    if len(rest) > 2:
        raise ControllerError(f"{verb}: too many arguments")
    try:
        vals = [int(w, 0) for w in rest] + [None, None]  # type: ignore[list-item]
    except ValueError:
        raise ControllerError(f"{verb}: port and priority must be numbers") from None
    return vals[0], vals[1]


BMV2_WEIGHTS_NOTE = ("approximation: BMv2 has strict priority only; the highest-weight queue "
                     "is capped at its weighted share of the port rate (packets/s), so the "
                     "others get at least their share, but that queue alone gets no more")


def _priority_weights(ctl: Controller, words: list[str], target: Target, packet_bytes: int,
                      port_rate_bps: float | None) -> dict[str, Any]:
    """``set_priority_weights PORT W0 W1 ...`` (or ``PORT strict``): DRR on a
    target that has the verb (the soft one); on BMv2 the closest setting, a
    packets/s cap on the queue with the largest weight at that weight's share
    of the port's rate."""
    if len(words) < 3:
        raise ControllerError("set_priority_weights <port> <w_prio0> <w_prio1> ... | strict")
    try:
        port = int(words[1], 0)
        weights = None if words[2:] == ["strict"] else [int(w) for w in words[2:]]
    except ValueError:
        raise ControllerError("set_priority_weights: port and weights must be numbers") from None
    if weights is not None and (len(weights) < 2 or min(weights) < 1):
        raise ControllerError("set_priority_weights: one positive weight per priority queue")
    rec: dict[str, Any] = {"line": " ".join(words)}
    if target.has_verb("set_priority_weights"):
        _cli_of(ctl).execute(rec["line"])
        rec["via"] = "cli"
        return rec
    if weights is None:
        rec["via"] = "none"   # BMv2 is strict priority already
        return rec
    if not port_rate_bps:
        raise ControllerError("set_priority_weights on BMv2 needs an earlier "
                              "set_port_rate_bps for the port (the cap is a share of it)")
    top = max(range(len(weights)), key=lambda i: (weights[i], i))
    bps = port_rate_bps * weights[top] / sum(weights)
    pps = bps_to_pps(bps, packet_bytes)
    ctl.set_queue_rate(pps, port, top)
    rec.update(via="set_queue_rate", port=port, priority=top, bps=bps, pps=pps,
               note=BMV2_WEIGHTS_NOTE)
    return rec


def _port_rate(applied: list[dict[str, Any]], port: int) -> float | None:
    """The last bit rate a plan line gave ``port`` (or every port)."""
    for rec in reversed(applied):
        if rec.get("line", "").split()[:1] == ["set_port_rate_bps"] and rec.get("port") in (
                None, port):
            return float(rec["bps"])
    return None


def apply_switch_command(ctl: Controller, line: str, target: Target, packet_bytes: int,
                         port_rate_bps: float | None = None) -> dict[str, Any]:
    """Apply one plan line (simple_switch_CLI syntax) through the switch's
    controller API (switches.controller); what was done, for summary.json.

    Queue settings and default actions (``table_set_default``, values by
    position as in the CLI) are controller calls (P4Runtime where the switch
    speaks it). ``set_port_rate_bps BPS [PORT]`` is the soft target's
    extension: on BMv2 it becomes ``set_queue_rate`` with :func:`bps_to_pps`
    (an approximation, recorded as such). Every other line (table_add,
    register_reset, ...) goes to the switch's simple_switch_CLI, whose
    syntax both targets accept. Raises ControllerError on a rejected
    command."""
    words = line.split()
    if not words:
        return {"line": line, "via": "none"}
    verb = words[0]
    rec: dict[str, Any] = {"line": line}
    if verb in ("set_port_rate_bps", "set_queue_rate", "set_queue_depth"):
        if len(words) < 2:
            raise ControllerError(f"{verb}: needs a value")
        try:
            value = int(float(words[1]))
        except ValueError:
            raise ControllerError(f"{verb}: {words[1]!r} is not a number") from None
        port, prio = _port_prio(words, verb, 2)
        if verb == "set_port_rate_bps":
            if prio is not None:
                raise ControllerError("set_port_rate_bps takes a rate and an optional port")
            if target.has_verb("set_port_rate_bps"):
                ctl.set_port_rate_bps(value, port)
                rec.update(via="set_port_rate_bps", bps=value, port=port)
            else:
                pps = bps_to_pps(value, packet_bytes)
                ctl.set_queue_rate(pps, port)
                rec.update(via="set_queue_rate", bps=value, pps=pps, port=port,
                           packet_bytes=packet_bytes, note=BMV2_RATE_NOTE)
        else:
            getattr(ctl, verb)(value, port, prio)
            rec.update(via=verb)
        return rec
    if verb == "set_priority_weights":
        return _priority_weights(ctl, words, target, packet_bytes, port_rate_bps)
    if verb == "set_pfc" and not target.has_verb("set_pfc"):
        raise ControllerError("set_pfc: priority flow control is a soft-switch extension "
                              "(BMv2's simple_switch has none); run this network on the soft "
                              "target or without PFC")
    if verb == "table_set_default":
        if len(words) < 3:
            raise ControllerError("table_set_default <table> <action> [<value> ...]")
        table, values = words[1], words[3:]
        aname, names = ctl.action_params(table, words[2])
        if len(values) != len(names):
            raise ControllerError(f"action {aname} takes {len(names)} value(s) "
                                  f"({', '.join(names) or 'none'}), got {len(values)}")
        ctl.table_set_default(table, aname, dict(zip(names, values, strict=True)))
        rec["via"] = "table_set_default"
        return rec
    _cli_of(ctl).execute(line)
    rec["via"] = "cli"
    return rec


def _apply_commands(ctl: Controller, lines: tuple[str, ...] | list[str], target: Target,
                    packet_bytes: int, where: str, applied: list[dict[str, Any]]) -> None:
    for line in lines:
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        try:
            words = line.split()
            rate = (_port_rate(applied, int(words[1], 0))
                    if words[0] == "set_priority_weights" and len(words) > 1
                    and words[1].isdigit() else None)
            rec = apply_switch_command(ctl, line.strip(), target, packet_bytes, rate)
        except ControllerError as e:
            raise RunError(f"{where}: switch command failed: {line.strip()}: {e}") from e
        applied.append({"where": where, **rec})


def _switch_stats(sw: Any, target: Target) -> dict[str, Any]:
    """The switch's statistics; a target that reports none (BMv2) gives {}."""
    if not target.reports_stats:
        return {}
    result: dict[str, Any] = sw.stats()
    return result


SWITCH_NICE = -10
# SCHED_FIFO priorities with Topology.realtime, all above every normal
# process: receiving agents lowest, sending agents above them (a sender
# waiting behind a receiver's batch of packets was late again: 2-7.5% of its
# packets against 0.7-3.1%), the soft switch above both, since real-time
# agents would otherwise starve it (measured: switch lag up to 119 ms in
# reflex-cases --quick).
RECEIVER_RT_PRIORITY = 1
SENDER_RT_PRIORITY = 2
SWITCH_RT_PRIORITY = 3


@dataclass(frozen=True)
class RtPriorities:
    """SCHED_FIFO priorities of a run's processes."""

    switch: int
    sender: int
    receiver: int


SWITCH_FIRST = RtPriorities(SWITCH_RT_PRIORITY, SENDER_RT_PRIORITY, RECEIVER_RT_PRIORITY)
# Topology.realtime_agents_first: senders, then receivers, then the switches.
AGENTS_FIRST = RtPriorities(switch=1, sender=3, receiver=2)


def rt_priorities(topo: Topology) -> RtPriorities:
    return AGENTS_FIRST if topo.realtime_agents_first else SWITCH_FIRST


def _prioritise_switch(sw: Any, target: Target, realtime: bool = False,
                       priority: int = SWITCH_RT_PRIORITY) -> None:
    """Run the switch daemon of a ``prioritised`` target (the soft one) at
    nice SWITCH_NICE: it stands for hardware, so the host agents and whatever
    else runs on the machine must not starve it (its processing lag is part of
    every run's fidelity verdict). With ``realtime``
    (Topology.realtime_switches) it runs at SCHED_FIFO ``priority``."""
    proc = getattr(sw, "proc", None)
    if not target.prioritised or proc is None:
        return
    try:
        os.setpriority(os.PRIO_PROCESS, proc.pid, SWITCH_NICE)
        if realtime:
            os.sched_setscheduler(proc.pid, os.SCHED_FIFO, os.sched_param(priority))
    except OSError:     # not root: the run goes on at normal priority
        pass


# ---------------------------------------------------------------------------
# agents


@dataclass
class _Agent:
    host: str
    node: Any
    spec_path: Path
    events_path: Path
    log_path: Path
    interpreter: str = sys.executable
    realtime: bool = False            # run at the sender or receiver priority of:
    priorities: RtPriorities = SWITCH_FIRST
    sends: bool = False
    realtime_error: str = ""
    proc: subprocess.Popen[bytes] | LaunchedAgent | None = None
    rc: int | None = None
    events_pos: int = 0
    kinds: set[str] = field(default_factory=set)
    last_progress: dict[str, Any] | None = None
    start_ns: int | None = None       # its start event: the barrier's time (CLOCK_MONOTONIC)

    def describe_exit(self) -> str:
        rc = self.rc
        if rc is None:
            return "is still running"
        if rc < 0:
            try:
                return f"was killed by {signal.Signals(-rc).name}"
            except ValueError:
                return f"was killed by signal {-rc}"
        return f"exited with code {rc}"

    def status(self) -> str:
        if self.rc is not None:
            return "done" if self.rc == 0 else "FAILED"
        self._read_new_events()
        if self.last_progress is not None:
            p = self.last_progress
            text = f"{p['done']}/{p['total']}"
            return text + " finishing" if "work_done" in self.kinds else text
        if "start" in self.kinds:
            return "running"
        if "setup_done" in self.kinds:
            return "waiting at start barrier"
        if self.kinds:
            return "setting up"
        return "starting"

    def _read_new_events(self) -> None:
        """Parse what the agent appended since the last call (whole lines only)."""
        try:
            with open(self.events_path, "rb") as f:
                f.seek(self.events_pos)
                data = f.read()
        except OSError:
            return
        end = data.rfind(b"\n")
        if end < 0:
            return
        self.events_pos += end + 1
        for line in data[: end + 1].splitlines():
            try:
                e = json.loads(line)
            except json.JSONDecodeError:
                continue
            kind = e.get("event")
            self.kinds.add(kind)
            if kind == "progress":
                self.last_progress = e
            elif kind == "start" and isinstance(e.get("t_ns"), int):
                self.start_ns = e["t_ns"]


def _agent_env() -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(REPO_ROOT), env.get("PYTHONPATH", "")) if p)
    env["PYTHONUNBUFFERED"] = "1"
    return env


def _start_agent(a: _Agent, launcher: AgentLauncher | None = None) -> None:
    """Start ``a``: forked by its host's launcher when it has one and the agent
    runs on this interpreter, else as a new process of its interpreter."""
    args = ["--spec", str(a.spec_path), "--events", str(a.events_path)]
    if launcher is not None and a.interpreter == sys.executable:
        try:
            a.proc = launcher.spawn(args, a.log_path)
        except LauncherError as e:
            raise RunError(str(e)) from e
    else:
        with open(a.log_path, "ab") as logf:
            a.proc = a.node.popen([a.interpreter, "-m", AGENT_MODULE, *args],
                                  stdin=subprocess.DEVNULL, stdout=logf,
                                  stderr=subprocess.STDOUT, cwd=str(REPO_ROOT),
                                  env=_agent_env())
    this_process_record().add_process(a.proc.pid, f"host agent {a.host}")


def _make_realtime(a: _Agent) -> None:
    """Put a started agent at its real-time priority, if it asks for one.
    Called once every agent of the phase is started: a real-time agent
    setting up (hundreds of MB of buffers) would otherwise hold a CPU
    from the runner before it starts the next one."""
    if a.realtime and a.proc is not None:
        # An agent stands for a NIC: a paced sender that wakes for its next
        # packet must run then, not after another process ends its time slice,
        # and a receiver must answer (ACK, CNP) as it receives (Topology.realtime).
        try:
            os.sched_setscheduler(a.proc.pid, os.SCHED_FIFO, os.sched_param(
                a.priorities.sender if a.sends else a.priorities.receiver))
        except OSError as e:     # not root, or no real-time budget: say so, go on
            a.realtime = False
            a.realtime_error = str(e)


def _stop_agents(agents: list[_Agent], grace_s: float = 3.0) -> None:
    """SIGTERM every agent still running, then SIGKILL what is left; reap all."""
    live = [a for a in agents if a.proc is not None and a.proc.poll() is None]
    for a in live:
        try:
            a.proc.terminate()  # type: ignore[union-attr]
        except ProcessLookupError:
            pass
    deadline = time.monotonic() + grace_s
    for a in live:
        assert a.proc is not None
        try:
            a.proc.wait(max(0.05, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            a.proc.kill()
            a.proc.wait()
    for a in agents:
        if a.proc is not None and a.rc is None:
            a.rc = a.proc.poll()
    this_process_record().forget(a.proc.pid for a in agents if a.proc is not None)


def _failure_message(a: _Agent, phase: str) -> str:
    evs = _last_events(a.events_path)
    err = [e.get("message") for e in evs if e.get("event") == "error"]
    lines = [f"host {a.host}: agent {a.describe_exit()} in phase {phase!r}"]
    if err:
        lines[0] += f": {err[-1]}"
    elif evs:
        last = evs[-1]
        prog = a.last_progress
        lines[0] += (f" (last event: {last.get('event')}"
                     + (f", progress {prog['done']}/{prog['total']}" if prog else "") + ")")
    tail = _tail(a.log_path).replace("\n", "\n    ")
    lines.append(f"  log {a.log_path} (last lines):\n    {tail}")
    return "\n".join(lines)


# ---------------------------------------------------------------------------
# the run


# rxe hosts run where rdma_rxe exists, here a guest VM, often on an emulated CPU
# (TCG): an agent takes about 20 s to start there and the switch runs several
# times slower, so a phase (and an agent) on rxe hosts gets this much more time
# before it counts as hung.
RXE_TIMEOUT_FACTOR = 3.0
RXE_SETUP_S = 60.0


def hang_timeout_s(timeout_s: float, provider: str) -> float:
    """A plan's phase or job timeout for hosts of ``provider``."""
    if provider == "rxe":
        return timeout_s * RXE_TIMEOUT_FACTOR + RXE_SETUP_S
    return timeout_s


def _phase_jobs(phase: PhasePlan, pdir: Path, provider: str = "udp") -> dict[str, JobSpec]:
    """The phase's specs with the run-time fields filled in (rendezvous, barrier,
    the hosts' provider)."""
    hosts = sorted(phase.jobs, key=lambda h: int(h[1:]) if h[1:].isdigit() else h)
    out = {}
    for rank, h in enumerate(hosts):
        job = phase.jobs[h]
        out[h] = dataclasses.replace(
            job, phase=phase.name, rendezvous_dir=str(pdir / "rendezvous"),
            barrier=(rank, len(hosts)),
            timeout_s=min(hang_timeout_s(job.timeout_s, provider),
                          hang_timeout_s(phase.timeout_s, provider)),
            provider=provider)
    return out


def merge_switch_stats(per_switch: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """The statistics of a fabric's switches as one switch's, for the fidelity
    checks: processing-lag samples pooled (count, weighted mean, maximum),
    kernel drops, frames received out of order and frames taken behind the
    queues' clock summed; per-port figures stay per switch."""
    n = sum(s.get("lag_us", {}).get("samples", 0) for s in per_switch.values())
    total = sum(s.get("lag_us", {}).get("mean", 0) * s.get("lag_us", {}).get("samples", 0)
                for s in per_switch.values())
    if not any(per_switch.values()):
        return {}
    merged: dict[str, Any] = {
        "lag_us": {"samples": n, "mean": total / n if n else 0.0,
                   "max": max((s.get("lag_us", {}).get("max", 0)
                               for s in per_switch.values()), default=0)},
        "kernel_drops": sum(s.get("kernel_drops", 0) for s in per_switch.values())}
    ooo = [rx_out_of_order(s) for s in per_switch.values()]
    if ooo and all(v is not None for v in ooo):
        merged["rx_out_of_order"] = sum(v for v in ooo if v is not None)
    behind = [arrivals_behind_clock(s) for s in per_switch.values()]
    if behind and all(b is not None for b in behind):
        known = [b for b in behind if b is not None]
        merged["rx_behind_clock"] = sum(b[0] for b in known)
        merged["rx_frames"] = sum(b[1] for b in known)
        merged["rx_behind_clock_max_us"] = max(b[2] for b in known)
    return merged


def poll_file(switch: str, fabric: bool) -> str:
    """A phase's statistics samples of ``switch``: ``switch.jsonl`` for the one
    switch of a star, ``switch-<name>.jsonl`` per switch of a fabric."""
    return f"switch-{switch}.jsonl" if fabric else "switch.jsonl"


# A host's line-rate qdisc may send this many full-size frames back to back
# after a late timer (testbed.net.shape_host): enough to keep the long-run rate
# through timer lateness of about a packet time, little enough that the switch
# sees no more than two frames bunched.
HOST_QDISC_BURST_FRAMES = 2
_QDISC_COUNTERS = ("sent_bytes", "sent_pkts", "dropped", "overlimits")


def _run_phase(phase: PhasePlan, plan: RunPlan, run_dir: Path, net: Any,
               switches: dict[str, Any], prog: Progress, opts: RunOptions,
               agents_out: list[_Agent], applied: list[dict[str, Any]],
               launchers: dict[str, AgentLauncher] | None = None) -> dict[str, Any]:
    pdir = run_dir / "phases" / phase.name
    pdir.mkdir(parents=True, exist_ok=True)
    prog.line(f"phase {phase.name}: {len(phase.jobs)} agent(s)"
              + (f" - {phase.notes}" if phase.notes else ""))
    fabric = plan.topology.fabric is not None
    reg = plan.topology.qdepth_register
    unknown = sorted(set(phase.switch_commands) - set(switches))
    if unknown:
        raise RunError(f"phase {phase.name}: switch_commands for unknown switch(es) "
                       f"{', '.join(unknown)}; the network has {', '.join(sorted(switches))}")
    target = opts.switch_target()
    for name, one in switches.items():
        where = f"phase {phase.name}" + (f" ({name})" if fabric else "")
        _apply_commands(one.controller(),
                        (*phase.commands, *phase.switch_commands.get(name, ())), target,
                        plan.topology.packet_bytes, where, applied)
        if reg:
            _apply_commands(one.controller(), [f"register_reset {reg}"], target,
                            plan.topology.packet_bytes, where, applied)
        if target.reports_stats:
            one.cmd_cli("switch_lag_max_reset")    # the lag maximum of this phase alone
    sw = next(iter(switches.values()))
    ctl = sw.controller()
    befores = {n: _switch_stats(one, target) for n, one in switches.items()}
    pollers: list[SwitchPoller] = []
    if target.reports_stats:
        pollers = [SwitchPoller(one.control_port, pdir / poll_file(n, fabric),
                                plan.switch_poll_interval_s) for n, one in switches.items()]
    try:
        jobs = _phase_jobs(phase, pdir, opts.hosts)
    except SpecError as e:
        raise RunError(f"phase {phase.name}: {e}") from e
    qdiscs_before: dict[str, dict[str, int]] = {}
    if plan.topology.host_line_qdisc:
        from testbed.net import host_qdisc_stats

        qdiscs_before = {h: host_qdisc_stats(net.get(h)) for h in jobs}
    agents = []
    for h, spec in jobs.items():
        sp = pdir / f"{h}.spec.json"
        sp.write_text(spec.to_json())
        try:
            interp = agent_interpreter(spec)
        except SpecError as e:
            raise RunError(f"phase {phase.name}: {e}") from e
        agents.append(_Agent(h, net.get(h), sp, pdir / f"{h}.events.jsonl", pdir / f"{h}.log",
                             interp, realtime=plan.topology.realtime,
                             priorities=rt_priorities(plan.topology),
                             sends=any(f.role == "sender" for f in spec.flows)
                             or spec.collective is not None))
    agents_out[:] = agents
    for poller in pollers:
        poller.start()
    t_start = time.monotonic()
    cpu = CpuSampler()
    for n, one in switches.items():
        if one.proc is not None:
            cpu.add(n, one.proc.pid)
    try:
        for a in agents:
            _start_agent(a, (launchers or {}).get(a.host))
            if a.proc is not None:
                cpu.add(a.host, a.proc.pid)
        for a in agents:
            _make_realtime(a)
        cpu.sample()
        next_cpu = time.monotonic() + CPU_SAMPLE_S
        next_status = t_start + opts.status_interval_s
        phase_timeout_s = hang_timeout_s(phase.timeout_s, opts.hosts)
        deadline = t_start + phase_timeout_s + 10.0
        epic_pending = phase.epic_group is not None
        late_due = sorted(phase.late_commands)
        late_done: list[dict[str, Any]] = []
        while True:
            if late_due:
                late_done += _apply_late(late_due, phase, plan, switches, agents, opts, applied, prog)
            if epic_pending and fabric:
                epic_pending = not _install_epic_tree(phase, plan, jobs, pdir, switches, opts,
                                                      applied, prog)
            elif epic_pending:
                from testbed.epic import communicator_nodes, install_from_rendezvous

                prior = sum(communicator_nodes(len(q.jobs))
                            for q in plan.phases[:plan.phases.index(phase)]
                            if q.epic_group is not None)
                lines = install_from_rendezvous(phase.epic_group or {}, jobs,
                                                pdir / "rendezvous" / "epic",
                                                node_base=prior)
                if lines is not None:
                    _apply_commands(ctl, lines, target, plan.topology.packet_bytes,
                                    f"phase {phase.name} (EPIC group)", applied)
                    (pdir / "rendezvous" / "epic" / "ready").write_text("ok\n")
                    prog.line(f"phase {phase.name}: EPIC group installed "
                              f"({len(jobs)} ranks)")
                    epic_pending = False
            for a in agents:
                if a.rc is None and a.proc is not None:
                    a.rc = a.proc.poll()
                    if a.rc is not None and a.rc != 0:
                        raise RunError(_failure_message(a, phase.name))
            if time.monotonic() >= next_cpu:
                cpu.sample()
                next_cpu = time.monotonic() + CPU_SAMPLE_S
            if all(a.rc == 0 for a in agents):
                cpu.sample()
                break
            for one in switches.values():
                if one.proc is None or one.proc.poll() is not None:
                    raise RunError(f"switch {one.name} exited during phase {phase.name!r}; "
                                   f"log {one.log_path}:\n{one.log_tail()}")
            now = time.monotonic()
            if now >= deadline:
                late = ", ".join(f"{a.host} ({a.status()})" for a in agents if a.rc is None)
                raise RunError(f"phase {phase.name!r} timed out after {phase_timeout_s:.0f} s; "
                               f"still running: {late}")
            if now >= next_status:
                prog.line(f"phase {phase.name}: " + ", ".join(f"{a.host} {a.status()}"
                                                              for a in agents))
                next_status = now + opts.status_interval_s
            time.sleep(0.05)
    finally:
        _stop_agents(agents)
        for poller in pollers:
            poller.stop()
    afters = {n: _switch_stats(one, target) for n, one in switches.items()}
    host_qdiscs: dict[str, Any] = {}
    if plan.topology.host_line_qdisc:
        from testbed.net import host_qdisc_stats

        for h, q0 in qdiscs_before.items():
            q1 = host_qdisc_stats(net.get(h))
            host_qdiscs[h] = {k: v - q0.get(k, 0) if k in _QDISC_COUNTERS else v
                              for k, v in q1.items()}
    qmaxes: dict[str, Any] = {}
    if reg:
        for n, one in switches.items():
            try:
                qmax = one.controller().register_read(reg)
            except ControllerError as e:
                raise RunError(f"phase {phase.name}: reading register {reg} of {n} "
                               f"failed: {e}") from e
            qmaxes[n] = {str(p): v for p, v in enumerate(qmax) if v}
    errors = [f"{n}: {p.error}" for n, p in zip(switches, pollers, strict=False) if p.error]
    stats: dict[str, Any] = {
        "late_commands": late_done,
        "poller_samples": sum(p.samples for p in pollers),
        "poller_error": "; ".join(errors) or None,
        "wall_s": time.monotonic() - t_start}
    if host_qdiscs:
        stats["host_qdiscs"] = host_qdiscs
    stats["cpu"] = cpu.result()
    if plan.topology.realtime:
        # which agents ran at real-time priority (or why one could not)
        stats["realtime_agents"] = {a.host: a.realtime or a.realtime_error for a in agents}
    if fabric:
        # pooled for the fidelity checks; every switch's own figures beside them
        stats.update(before=merge_switch_stats(befores), after=merge_switch_stats(afters),
                     qdepth_max=None,
                     switches={n: {"before": befores[n], "after": afters[n],
                                   "qdepth_max": qmaxes.get(n) if reg else None}
                               for n in switches})
    else:
        # None: the program has no watermark register (nothing measured)
        stats.update(before=befores[sw.name], after=afters[sw.name],
                     qdepth_max=qmaxes.get(sw.name) if reg else None)
    (pdir / "switch_stats.json").write_text(json.dumps(stats, indent=1, sort_keys=True))
    prog.line(f"phase {phase.name}: done in {stats['wall_s']:.1f} s ("
              + ", ".join(f"{a.host} ok" for a in agents) + ")")
    if stats["cpu"]["processes"]:
        prog.line(f"phase {phase.name}: CPU {format_cpu(stats['cpu'])}")
    return stats


def _install_epic_tree(phase: PhasePlan, plan: RunPlan, jobs: dict[str, Any], pdir: Path,
                       switches: dict[str, Any], opts: RunOptions,
                       applied: list[dict[str, Any]], prog: Progress) -> bool:
    """Install a fabric phase's EPIC aggregation tree (``epic_group["tree"]``) on
    every switch of it once the ranks reported their QPNs; False while some
    have not."""
    from testbed.epic import install_tree_from_rendezvous, tree_nodes

    fab = plan.topology.fabric
    assert fab is not None and phase.epic_group is not None
    prior: dict[str, int] = {}
    for q in plan.phases[:plan.phases.index(phase)]:
        if q.epic_group is not None:
            for n, k in tree_nodes(q.epic_group, fab, len(q.jobs)).items():
                prior[n] = prior.get(n, 0) + k
    try:
        lines = install_tree_from_rendezvous(phase.epic_group, jobs, pdir / "rendezvous" / "epic",
                                             fab, node_base=prior)
    except ValueError as e:
        raise RunError(f"phase {phase.name}: EPIC tree: {e}") from e
    if lines is None:
        return False
    for name, one in lines.items():
        _apply_commands(switches[name].controller(), one, opts.switch_target(),
                        plan.topology.packet_bytes, f"phase {phase.name} (EPIC tree, {name})",
                        applied)
    (pdir / "rendezvous" / "epic" / "ready").write_text("ok\n")
    prog.line(f"phase {phase.name}: EPIC tree installed on {', '.join(lines)} "
              f"({len(jobs)} ranks)")
    return True


def _apply_late(late: list[tuple[float, str]], phase: PhasePlan, plan: RunPlan,
                switches: dict[str, Any], agents: list[_Agent], opts: RunOptions,
                applied: list[dict[str, Any]], prog: Progress) -> list[dict[str, Any]]:
    """Apply (and remove from ``late``) the late commands that are due: their
    time counts from the agents' start barrier, once every agent passed it."""
    for a in agents:
        if a.start_ns is None:
            a._read_new_events()
    starts = [a.start_ns for a in agents]
    if any(t is None for t in starts):
        return []
    t0 = max(t for t in starts if t is not None)
    now = time.monotonic_ns()
    due = [(t, line) for t, line in late if now - t0 >= t * 1e9]
    if not due:
        return []
    del late[:len(due)]
    fabric = plan.topology.fabric is not None
    for name, one in switches.items():
        _apply_commands(one.controller(), [line for _t, line in due], opts.switch_target(),
                        plan.topology.packet_bytes,
                        f"phase {phase.name} +{due[-1][0]:g} s" + (f" ({name})" if fabric else ""),
                        applied)
    done = time.monotonic_ns()
    prog.line(f"phase {phase.name}: {len(due)} late command(s) applied "
              f"{(done - t0) / 1e9:.2f} s after the start")
    return [{"t_s": t, "line": line, "applied_ns": done, "start_ns": t0} for t, line in due]


class _TeardownTimeout(Exception):
    pass


def _bring_up_and_run(plan: RunPlan, run_dir: Path, opts: RunOptions, prog: Progress,
                      applied: list[dict[str, Any]] | None = None,
                      measured: dict[str, Any] | None = None) -> None:
    """Bring the network up, configure the switch, run the phases, tear down.
    ``applied`` collects every switch command and how it was applied."""
    from testbed.net import leaf_spine, running, star_router

    applied = [] if applied is None else applied
    topo = plan.topology
    fab = topo.fabric
    where = (f"a leaf-spine of {fab.leaves} leaves and {fab.spines} spines "
             f"({'ECMP' if fab.ecmp else 'static routes'}), {opts.target} switches"
             if fab else f"{opts.target} switch s1")
    prog.line(f"network: {topo.n_hosts} hosts around {where} running "
              f"{topo.program_label()}" + (" (pcap on)" if opts.pcap else ""))
    delay_us = 0.0
    if topo.network is not None:
        delay_us = topo.network.convert(plan.path_mtu()).link_delay_us
    target = opts.switch_target()
    backend = topo.backend if target.backends else "python"
    try:
        if fab is not None:
            net, switches, hosts, _addrs = leaf_spine(
                fab, repo_path(topo.program), log_dir=run_dir / "switch", pcap=opts.pcap,
                target=target, backend=backend, priority_queues=topo.priority_queues,
                host_provider=opts.hosts, defines=topo.defines_dict())
        else:
            net, sw, hosts, _addrs = star_router(
                topo.n_hosts, repo_path(topo.program), log_dir=run_dir / "switch",
                pcap=opts.pcap, priority_queues=topo.priority_queues, target=target,
                link_delay_us=delay_us, backend=backend, host_provider=opts.hosts,
                defines=topo.defines_dict())
            switches = {sw.name: sw}
    except TargetUnavailable as e:
        raise RunError(str(e)) from e
    agents: list[_Agent] = []
    launchers: dict[str, AgentLauncher] = {}
    failure: BaseException | None = None
    try:
        with _teardown_watchdog():
            with running(net):
                try:
                    prog.line("network up (switch control port" + (
                        "s " if fab else " ") + ", ".join(
                        f"{n} {one.control_port}" if fab else str(one.control_port)
                        for n, one in switches.items()) + ")")
                    if opts.hosts == "udp" and os.environ.get(LAUNCHER_ENV, "1") != "0":
                        # they import the agent while the switches are configured
                        (run_dir / "agents").mkdir(exist_ok=True)
                        for h in hosts:
                            launchers[h.name] = AgentLauncher(
                                h, run_dir / "agents" / f"{h.name}-launcher.log",
                                _agent_env(), REPO_ROOT, run=str(run_dir))
                    rt = rt_priorities(topo)
                    if topo.realtime:
                        prog.line(f"real-time priority (SCHED_FIFO): switch {rt.switch}, "
                                  f"sending agents {rt.sender}, receiving agents "
                                  f"{rt.receiver}")
                    elif topo.realtime_switches:
                        prog.line(f"real-time priority (SCHED_FIFO): switches {rt.switch}, "
                                  "agents normal")
                    for n, one in switches.items():
                        _prioritise_switch(one, target,
                                           topo.realtime or topo.realtime_switches, rt.switch)
                        _apply_commands(one.controller(),
                                        plan.network_commands() + topo.switch_commands.get(n, ()),
                                        target, topo.packet_bytes,
                                        f"topology ({n})" if fab else "topology", applied)
                    if topo.host_line_qdisc and topo.network is not None:
                        conv = topo.network.convert(plan.path_mtu())
                        from testbed.net import shape_host

                        burst = max(HOST_QDISC_BURST_FRAMES * conv.frame_bytes, 1514)
                        for h in hosts:
                            shape_host(h, conv.link_bps, burst)
                        prog.line(f"hosts: an HTB qdisc at {conv.link_bps / 1e6:g} Mb/s on "
                                  f"each host's interface (burst {burst} B)")
                    if (topo.host_line_qdisc and topo.network is not None) or opts.hosts == "rxe":
                        # The hosts' HTB qdisc (the runner's, or an rxe host's DCQCN
                        # shim's) and rxe's own tasks send from any CPU: keep each
                        # link's frames in order.
                        from testbed.net import keep_links_in_order

                        steered = keep_links_in_order(net)
                        prog.line(f"receive steering (RPS): each of {len(steered)} interfaces "
                                  f"to one CPU, so links keep their order")
                    if measured is not None and len(hosts) > 1:
                        measured["base_rtt"] = measure_base_rtt(hosts[0], hosts[-1])
                        prog.line(f"base RTT {hosts[0].name}-{hosts[-1].name}: "
                                  f"{measured['base_rtt']['min_ms']} ms (ping, minimum)")
                    retried = measured.setdefault("phase_retries", []) \
                        if measured is not None else []
                    for phase in plan.phases:
                        retried += run_phase_until_faithful(
                            phase, plan, run_dir, prog, opts,
                            lambda ph: _run_phase(ph, plan, run_dir, net, switches, prog, opts,
                                                  agents, applied, launchers))
                except BaseException as e:
                    failure = e
                    raise
                finally:
                    _stop_agents(agents)
                    for launcher in launchers.values():
                        launcher.close()
                    signal.setitimer(signal.ITIMER_REAL, opts.teardown_timeout_s)
    except _TeardownTimeout:
        # Mininet waits forever on a node shell that died under it (e.g. another
        # Mininet cleanup on this machine): remove what is left by hand.
        left = _force_teardown(net)
        msg = (f"network teardown hung for {opts.teardown_timeout_s:.0f} s (a Mininet node shell had "
               f"died: was another Mininet cleanup run on this machine?); removed by hand: "
               f"{', '.join(left) or 'nothing'}")
        if failure is not None and not isinstance(failure, _TeardownTimeout):
            raise RunError(f"{failure}\n{msg}") from failure
        raise RunError(msg) from None
    finally:
        _stop_agents(agents)  # normally done already; not if bring-up itself failed
        prog.line("network down")


UNFAITHFUL_TRIES_DIR = "phases-unfaithful"


def phase_retriable(phase: PhasePlan) -> bool:
    """Whether a phase can simply be run again: not a warm-up (outside the
    verdict anyway) and not an EPIC group, whose install numbers its nodes
    after the earlier phases' and is not undone."""
    return not phase.warmup and phase.epic_group is None


def run_phase_until_faithful(phase: PhasePlan, plan: RunPlan, run_dir: Path, prog: Progress,
                             opts: RunOptions,
                             run_once: Callable[[PhasePlan], Any]) -> list[dict[str, Any]]:
    """Run ``phase``; while its own fidelity verdict fails and
    ``opts.phase_retries`` allows, set that try aside (in
    ``phases-unfaithful/NAME.tryK``, never analysed) and run the phase again.
    On a shared machine a phase fails mostly when the hypervisor holds the
    CPUs for a while (the verdict names the stolen time); its next try
    measures the same configuration. Returns one record per set-aside try.

    What a reader must weigh: a retried phase is the first faithful of its
    tries, so a configuration that by itself makes the emulator fall behind
    is measured in its luckier tries; summary.json lists every retry, and the
    tries set aside keep their data."""
    run_once(phase)
    out: list[dict[str, Any]] = []
    if opts.phase_retries <= 0 or not phase_retriable(phase):
        return out
    one = dataclasses.replace(plan, phases=(phase,))
    for k in range(1, opts.phase_retries + 2):
        fid = evaluate_fidelity(run_dir, one, opts.switch_target(), opts.hosts)
        if fid["ok"]:
            if k > 1:
                prog.line(f"phase {phase.name}: try {k} faithful")
            break
        if k > opts.phase_retries:
            prog.line(f"phase {phase.name}: try {k} {fid['text']}; no retry left, it stands")
            break
        kept = run_dir / UNFAITHFUL_TRIES_DIR / f"{phase.name}.try{k}"
        kept.parent.mkdir(exist_ok=True)
        (run_dir / "phases" / phase.name).rename(kept)
        out.append({"phase": phase.name, "try": k, "verdict": fid["text"],
                    "kept": str(kept.relative_to(run_dir))})
        prog.line(f"phase {phase.name}: try {k} {fid['text']}; set aside in "
                  f"{kept.relative_to(run_dir)}, running the phase again "
                  f"(retry {k} of {opts.phase_retries})")
        run_once(phase)
    return out


def measure_base_rtt(a: Any, b: Any, count: int = 5) -> dict[str, Any]:
    """The smallest ping RTT from host ``a`` to host ``b`` (ms; None if no
    reply): propagation plus what the switch and the hosts add."""
    import re

    # rxe hosts share the initial namespace: the ping leaves by a's own link
    # (its policy route) only when bound to it; else it is answered locally.
    dev = f" -I {a.defaultIntf()}" if getattr(a, "rxe_device", None) else ""
    out = a.cmd(f"ping -n -q -c {count} -i 0.05 -W 5{dev} {b.IP()}")
    m = re.search(r"= ([\d.]+)/([\d.]+)/([\d.]+)/", out)
    return {"between": f"{a.name}-{b.name}", "pings": count,
            "min_ms": float(m.group(1)) if m else None,
            "avg_ms": float(m.group(2)) if m else None}


def _network_record(plan: RunPlan, measured: dict[str, Any]) -> dict[str, Any]:
    """The modelled network, its conversion, and the base RTT measured and
    modelled, both also in packet times (full frames at the path MTU)."""
    net = plan.topology.network
    rtt = dict(measured.get("base_rtt") or {})
    if net is None:
        return {"modelled": None, "base_rtt": rtt or None}
    rec = net.record(plan.path_mtu())
    pkt_us = rec["testbed"]["packet_time_us"]
    rtt.update(modelled_us=rec["modelled"]["base_rtt_us"],
               modelled_pkts=round(rec["modelled"]["base_rtt_pkts"], 2),
               measured_pkts=(round(rtt["min_ms"] * 1e3 / pkt_us, 2)
                              if rtt.get("min_ms") is not None else None),
               note="modelled: propagation only (4 links); measured: ping's minimum, which "
                    "adds the switch's and the hosts' processing and the pings' serialization")
    rec["base_rtt"] = rtt
    return rec


@contextmanager
def _teardown_watchdog() -> Iterator[None]:
    """SIGALRM (armed when the run leaves the network's block) raises
    _TeardownTimeout, so a hung teardown cannot hang the run."""
    def handler(_signum: int, _frame: Any) -> None:
        raise _TeardownTimeout()

    try:
        old = signal.signal(signal.SIGALRM, handler)
    except ValueError:  # not the main thread: no watchdog
        yield
        return
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)


def _force_teardown(net: Any) -> list[str]:
    """Stop the switch daemons, kill the node shells, delete the run's veths."""
    done = []
    for node in [*net.switches, *net.hosts]:
        stop = getattr(node, "stop_daemon", None)     # a switches.node.P4SwitchNode
        if callable(stop) and getattr(node, "proc", None) is not None:
            stop()
            done.append(f"{node.name} daemon")
        shell = getattr(node, "shell", None)
        if shell is not None and shell.poll() is None:
            shell.kill()
            done.append(f"{node.name} shell")
        if shell is not None:
            shell.wait()
    for node in net.switches:
        for intf in node.intfList():
            try:
                if intf.name != "lo" and delete_link(intf.name):
                    done.append(intf.name)
            except NetlinkError as e:
                done.append(f"not {intf.name} ({e})")
    return done


def _transport_record(plan: RunPlan) -> dict[str, Any]:
    from hosts.agent import dcqcn_params
    from hosts.roce import Scale

    seen: dict[str, dict[str, Any]] = {}
    for p in plan.phases:
        for spec in p.jobs.values():
            t = spec.transport
            rec = {"scale": Scale(**t.scale).timers(), "dcqcn": dcqcn_params(spec),
                   "path_mtu": t.path_mtu, "sample_interval_us": t.sample_interval_us,
                   "pacer_burst_packets": t.pacer_burst_packets,
                   "late_threshold_packets": t.late_threshold_packets}
            seen.setdefault(json.dumps(rec, sort_keys=True), rec)
    recs = list(seen.values())
    if len(recs) == 1:
        return recs[0]
    return {"per_spec": recs}


def flatten_keys(d: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    """Nested results as flat dotted keys of their scalars (lists are left out)."""
    out: dict[str, Any] = {}
    for k, v in d.items():
        key = f"{prefix}{k}"
        if isinstance(v, dict):
            out.update(flatten_keys(v, key + "."))
        elif isinstance(v, (int, float, str, bool)) or v is None:
            out[key] = v
    return out


def _write_json(path: Path, obj: Any) -> None:
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(obj, indent=2, sort_keys=False, default=str))
    os.replace(tmp, path)


def check_profile(mod: Experiment, profile: str, engine: str) -> None:
    """Raise ExperimentError unless experiment ``mod`` has ``profile`` and the
    profile runs on ``engine``."""
    profile_params(mod, profile)        # (raises for an unknown or missing profile)
    engines = PROFILE_ENGINES[profile]
    if engines is not None and engine not in engines:
        raise ExperimentError(f"the {profile} profile runs on the virtual-time engine only "
                              f"(--engine sim), not on {engine}: the paper's networks are "
                              "far beyond what this machine emulates in real time")


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

    applied: list[dict[str, Any]] = []
    measured: dict[str, Any] = {}
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
                          engine.fidelity(run_dir, plan, summary, measured))
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


def _port_rate_record(applied: list[dict[str, Any]]) -> dict[str, Any] | None:
    """How the plan's port rate was set (soft: set_port_rate_bps; BMv2:
    set_queue_rate in pps, an approximation), or None if it set none."""
    recs = [r for r in applied if r.get("line", "").startswith("set_port_rate_bps")]
    if not recs:
        return None
    keep = ("via", "bps", "pps", "port", "packet_bytes", "note")
    out = {k: recs[-1][k] for k in keep if k in recs[-1]}
    if len(recs) > 1:
        out["all"] = [{k: r[k] for k in keep if k in r} for r in recs]
    return out


def _finish(mod: Experiment, plan: RunPlan, run_dir: Path,
            summary: dict[str, Any], fid: dict[str, Any]) -> dict[str, Any]:
    summary["fidelity"] = fid
    try:
        results = mod.analyze(run_dir)
    except Exception as e:
        summary["error"] = f"analysis failed: {type(e).__name__}: {e}"
        raise RunError(summary["error"]) from e
    summary.update(results)
    summary.update(flatten_keys(results))
    # An experiment may add its own fidelity conditions (results["fidelity_ok"]).
    if not results.get("fidelity_ok", True):
        fid.update(ok=False, verdict="not faithful")
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


def _verdict_line(summary: dict[str, Any], results: dict[str, Any],
                  headline: tuple[str, ...] = ()) -> str:
    flat = flatten_keys({k: v for k, v in results.items() if k != "fidelity_ok"})
    keys = [k for k in headline if k in flat] or [k for k in flat if k.count(".") == 1]
    shown = ", ".join(f"{k}={_fmt(flat[k])}" for k in keys)
    return f"results: {shown}; fidelity: {summary['fidelity']['text']}"


def _fmt(v: Any) -> str:
    return f"{v:.4g}" if isinstance(v, float) else str(v)


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
