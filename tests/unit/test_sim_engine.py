"""Whole runs on the virtual-time engine: the same files as the Mininet engine,
byte-identical for the same seed, no wall clock on the simulated path, no root."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from testbed.experiment import load, make_params
from testbed.runner import RunError, RunOptions, run
from testbed.sim.engine import SimRun, SimUnsupported, check_plan

REPO = Path(__file__).resolve().parents[2]


def _opts(out: Path, **kw: Any) -> RunOptions:
    # in this process unless a test asks for PyPy (tests/unit/test_sim_pypy.py)
    kw.setdefault("interpreter", "cpython")
    return RunOptions(quick=True, out=out, engine="sim", echo=lambda _s: None, **kw)


def _timelines(run_dir: Path) -> dict[str, bytes]:
    return {str(p.relative_to(run_dir)): p.read_bytes()
            for p in sorted((run_dir / "phases").rglob("*")) if p.is_file()}


def test_roce_basics_runs_and_writes_what_the_analysis_reads(tmp_path: Path) -> None:
    s = run("roce-basics", _opts(tmp_path / "r"))
    assert s["ok"] and s["engine"] == "sim" and s["fidelity_ok"]
    assert s["fidelity"]["checks"]["frames_accounted"]["value"] == 0
    assert s["single"]["goodput_fraction"] > 0.95
    assert s["pair"]["cnps"] > 0                 # two senders into one port: ECN at work
    assert s["loss"]["bytes_ok"] and s["loss"]["retransmissions"] > 0
    assert s["sim"]["packet_hops"] > 1000 and s["sim"]["sim_s"] > 1
    d = tmp_path / "r"
    for ph in ("single", "pair", "loss"):
        assert (d / "phases" / ph / "switch.jsonl").stat().st_size > 0
        stats = json.loads((d / "phases" / ph / "switch_stats.json").read_text())
        assert stats["engine"] == "sim" and stats["after"]["switch"]["queued"] == 0
    assert len(s["plots"]) == 3


def test_same_seed_same_bytes_other_seed_still_valid(tmp_path: Path) -> None:
    a = run("roce-basics", _opts(tmp_path / "a"))
    b = run("roce-basics", _opts(tmp_path / "b"))
    assert _timelines(tmp_path / "a") == _timelines(tmp_path / "b")
    wall = ("duration_s", "run_dir", "started", "sim")
    assert {k: v for k, v in a.items() if k not in wall} == \
        {k: v for k, v in b.items() if k not in wall}
    assert a["sim"]["events"] == b["sim"]["events"]


def test_a_collective_is_bit_exact(tmp_path: Path) -> None:
    s = run("ring-allreduce", _opts(tmp_path / "r"))
    assert s["allreduce"]["bit_exact"] is True and s["fidelity_ok"]


def test_a_2d_ring_is_bit_exact_and_counts_its_steps_as_one_job(tmp_path: Path) -> None:
    """symphony-ring's 2D ring (2 x 2, a group per leaf): every collective
    exact, each rank's steps one sequence of 2 (2 - 1) + 2 (2 - 1) per
    AllReduce (group, cross, cross, group), tagged on from one base."""
    s = run("symphony-ring", _opts(tmp_path / "r", overrides={
        "ring_layout": "local", "ring_dims": "2x2", "schemes": "baseline,symphony",
        "chunk_kb": "64", "warmup_kb": "0"}))
    assert s["bit_exact"] is True and s["fidelity_ok"]
    phase = tmp_path / "r" / "phases" / "symphony-s0"
    steps = [json.loads(line) for line in (phase / "h1.events.jsonl").read_text().splitlines()
             if '"step_start"' in line]
    per_channel = [(e["seq"], e["step"], e["dim"], e["tag_step"] - e["step"]) for e in steps
                   if e["channel"] == 0]
    assert [(q, st, d) for q, st, d, _ in per_channel] == [
        (q, st, "cross" if st in (1, 2) else "group") for q in range(2) for st in range(4)]
    base = per_channel[0][3]
    assert [b for *_, b in per_channel] == [base, base, base, base] + [base + 4] * 4
    assert s["max_overlap"]["symphony"]["mean"] >= 1


_CLOCKS = ("time", "time_ns", "monotonic", "monotonic_ns", "perf_counter", "perf_counter_ns",
           "sleep", "process_time", "thread_time", "clock_gettime", "clock_gettime_ns")


def test_no_wall_clock_is_read_on_the_simulated_path(tmp_path: Path,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    mod = load("roce-basics")
    plan = mod.plan(make_params(mod, quick=True))
    from switches.targets import SOFT
    from testbed.runner.switch_commands import _apply_commands

    def apply(sw: Any, lines: list[str], where: str) -> None:
        _apply_commands(sw.controller(), lines, SOFT,
                        plan.topology.packet_bytes, where, [])

    sim = SimRun(plan, tmp_path, apply=apply)     # compiling may read the clock
    reads: list[str] = []

    def forbidden(name: str) -> Callable[..., Any]:
        def f(*_a: Any, **_k: Any) -> Any:
            reads.append(name)
            raise AssertionError(f"time.{name} read during a simulated run")
        return f

    for name in _CLOCKS:
        if hasattr(time, name):
            monkeypatch.setattr(time, name, forbidden(name))
    sim.run()
    monkeypatch.undo()
    assert reads == []
    assert sim.record()["packet_hops"] > 1000


def test_plans_it_cannot_honour_are_refused_before_the_run(tmp_path: Path) -> None:
    mod = load("roce-basics")
    plan = mod.plan(make_params(mod, quick=True))
    with pytest.raises(SimUnsupported, match="rxe hosts need the Mininet engine"):
        check_plan(plan, "rxe")
    with pytest.raises(RunError, match="rxe hosts need the Mininet engine"):
        run("roce-basics", _opts(tmp_path / "x", hosts="rxe"))
    with pytest.raises(RunError, match="--target bmv2"):
        run("roce-basics", _opts(tmp_path / "y", target="bmv2"))
    with pytest.raises(RunError, match="--pcap"):
        run("roce-basics", _opts(tmp_path / "z", pcap=True))
    assert not any((tmp_path / d).exists() for d in "xyz")


def test_epic_aggregates_in_the_p4_switch_bit_exactly(tmp_path: Path) -> None:
    s = run("epic-allreduce", _opts(tmp_path / "e"))
    assert s["bit_exact"] is True and s["fidelity_ok"]
    applied = [r["where"] for r in s["switch_config"]["applied"]]
    assert any("(EPIC group)" in w for w in applied)


def test_hosts_obey_the_switchs_pfc_pauses(tmp_path: Path) -> None:
    s = run("roce-basics", _opts(tmp_path / "p", overrides={
        "pfc_xoff_pkts": "6", "pfc_xon_pkts": "3", "phases": "pair"}))
    assert s["fidelity_ok"]
    stats = json.loads((tmp_path / "p" / "phases" / "pair" / "switch_stats.json").read_text())
    pfc = stats["after"]["switch"]["pfc"]
    assert pfc["xoff_sent"] and pfc["xon_sent"]
    assert stats["after"]["switch"]["drops"] == {}
    paused = []
    for h in ("h1", "h2"):
        for line in (tmp_path / "p" / "phases" / "pair" / f"{h}.events.jsonl").open():
            e = json.loads(line)
            if e["event"] == "agent_end":
                paused.append(e["pfc"]["paused_s"])
    assert len(paused) == 2 and all(p > 0 for p in paused)
    # the queue stays near XOFF plus what was in flight, far below its 64 packets
    assert s["pair"]["max_queue_pkts"] < 20


def test_timelines_do_not_depend_on_the_process(tmp_path: Path) -> None:
    """Two processes with different string hashing give the same bytes."""
    outs = []
    for seed in ("1", "2"):
        out = tmp_path / f"h{seed}"
        env = dict(os.environ, PYTHONHASHSEED=seed, PYTHONPATH=str(REPO),
                   XDG_CACHE_HOME=str(tmp_path / "cache"), MPLCONFIGDIR=str(tmp_path / "mpl"))
        r = subprocess.run([sys.executable, "-m", "testbed.cli", "run", "ring-allreduce",
                            "--quick", "--engine", "sim", "--out", str(out)],
                           env=env, capture_output=True, text=True, timeout=600, cwd=tmp_path)
        assert r.returncode == 0, r.stderr
        outs.append(_timelines(out))
    assert outs[0] == outs[1] and len(outs[0]) >= 5


_SETPRIV = shutil.which("setpriv")
# As user nobody; or, where nobody cannot read this checkout or its
# packages (a clone under /root), as root without a single capability
# (no raw sockets, namespaces or interfaces: what the Mininet engine needs).
_AS_NOBODY = [str(_SETPRIV), "--reuid=65534", "--regid=65534", "--clear-groups"]
_NO_CAPS = [str(_SETPRIV), "--bounding-set", "-all", "--inh-caps", "-all", "--no-new-privs"]


def _unprivileged(env: dict[str, str], cwd: Path) -> tuple[list[str], str] | None:
    """A command prefix that runs without privileges, and what it is; None
    if there is none."""
    if os.geteuid() != 0:
        return [], "an unprivileged user"
    if _SETPRIV is None:
        return None
    probe = subprocess.run([*_AS_NOBODY, sys.executable, "-c", "import numpy, click, testbed"],
                           env=env, cwd=cwd, capture_output=True, text=True, timeout=120)
    if probe.returncode == 0:
        return _AS_NOBODY, "user nobody"
    return _NO_CAPS, "root without capabilities"


def test_runs_unprivileged_without_mininet() -> None:
    # pytest's own temporary directories are private to root: one of the
    # test's own that the unprivileged user may enter, removed after
    base = Path(tempfile.mkdtemp(prefix="p4tb-sim-unprivileged-"))
    try:
        base.chmod(0o777)
        env = {"PATH": os.environ.get("PATH", ""), "HOME": str(base),
               "XDG_CACHE_HOME": str(base / "cache"), "PYTHONPATH": str(REPO),
               "P4TB_STATE_DIR": str(base / "state"), "MPLCONFIGDIR": str(base / "mpl")}
        how = _unprivileged(env, base)
        if how is None:
            pytest.skip("no setpriv to drop root's privileges")
        prefix, who = how
        out = base / "run"
        script = ("import os, socket, sys\n"
                  "try:\n"
                  "    socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_UDP)\n"
                  "    sys.exit('a raw socket could be opened: not unprivileged')\n"
                  "except PermissionError:\n"
                  "    pass\n"
                  "from testbed.cli import main\n"
                  "try:\n"
                  "    main(['run', 'ring-allreduce', '--quick', '--engine', 'sim', "
                  f"'--out', {str(out)!r}])\n"
                  "except SystemExit as e:\n"
                  "    assert not e.code, e.code\n"
                  "assert not any(m.split('.')[0] == 'mininet' for m in sys.modules), 'mininet'\n"
                  "print('unprivileged ok')\n")
        r = subprocess.run([*prefix, sys.executable, "-c", script], cwd=base, env=env,
                           capture_output=True, text=True, timeout=600)
        assert r.returncode == 0, f"as {who}: {r.stdout}{r.stderr}"
        assert "unprivileged ok" in r.stdout
        assert json.loads((out / "summary.json").read_text())["fidelity_ok"]
    finally:
        shutil.rmtree(base, ignore_errors=True)


def test_the_slowdown_is_a_pure_time_scaling(tmp_path: Path) -> None:
    """The same plan 50 times faster (links, NIC, every timer, the samples)
    gives the same normalized figures and 1/50 of the durations."""
    slow = run("roce-basics", _opts(tmp_path / "slow", overrides={"phases": "pair,loss"}))
    fast = run("roce-basics", _opts(tmp_path / "fast", overrides={
        "phases": "pair,loss", "bottleneck_mbps": "200", "sample_interval_us": "100"}))
    assert slow["params"]["sample_interval_us"] == 5000        # 50 x 100 at 4 Mb/s
    for key in ("jain_index", "utilization", "ce_marked_pkts", "cnps", "max_enq_qdepth_pkts"):
        assert slow["pair"][key] == fast["pair"][key], key
    for key in ("goodput_fraction", "retransmissions", "naks", "data_packets_sent"):
        assert slow["loss"][key] == fast["loss"][key], key
    assert fast["loss"]["duration_s"] == pytest.approx(slow["loss"]["duration_s"] / 50, rel=1e-3)


def _step_times(run_dir: Path) -> list[tuple[str, str, int]]:
    out = []
    for p in sorted((run_dir / "phases" / "allreduce").glob("h*.events.jsonl")):
        for line in p.open():
            e = json.loads(line)
            if e["event"] in ("step_start", "step_end", "collective_end"):
                out.append((e["host"], e["event"], e["t_ns"]))
    return out


def test_phantom_payloads_keep_the_timing_without_the_data(tmp_path: Path) -> None:
    real = run("ring-allreduce", _opts(tmp_path / "real"))
    ghost = run("ring-allreduce", _opts(tmp_path / "ghost", overrides={"payload": "phantom"}))
    assert real["allreduce"]["bit_exact"] is True
    assert ghost["allreduce"]["bit_exact"] is None          # not checked, not claimed
    assert _step_times(tmp_path / "real") == _step_times(tmp_path / "ghost")
    assert ghost["sim"]["packet_hops"] == real["sim"]["packet_hops"]


def test_sigterm_ends_a_simulated_run_as_terminated(tmp_path: Path) -> None:
    """SIGTERM is the run's end, not an agent's failure: a suite stops on it."""
    import signal

    out = tmp_path / "run"
    env = dict(os.environ, PYTHONPATH=str(REPO), XDG_CACHE_HOME=str(tmp_path / "cache"),
               MPLCONFIGDIR=str(tmp_path / "mpl"))
    proc = subprocess.Popen([sys.executable, "-m", "testbed.cli", "run", "reflex-probing",
                             "--quick", "--engine", "sim", "--out", str(out)], env=env,
                            cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)
    deadline = time.monotonic() + 120
    while not any(out.glob("phases/*/h1.events.jsonl")):
        assert time.monotonic() < deadline and proc.poll() is None, "the run never started"
        time.sleep(0.2)
    time.sleep(1.0)
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 1, err
    assert "run terminated by signal SIGTERM" in err and "network" not in err
    summary = json.loads((out / "summary.json").read_text())
    assert summary["error"] == "terminated (signal SIGTERM)" and not summary["ok"]


def test_a_program_that_does_not_compile_is_refused_with_its_place(tmp_path: Path) -> None:
    import dataclasses

    bad = tmp_path / "bad.p4"
    bad.write_text("#include <v1model.p4>\ncontrol C() { apply { no_such_extern(); } }\n")
    mod = load("roce-basics")
    plan = mod.plan(make_params(mod, quick=True))
    plan = dataclasses.replace(plan, topology=dataclasses.replace(plan.topology,
                                                                   program=str(bad)))
    with pytest.raises(ValueError, match=r"bad\.p4 does not compile for the soft switch: .*bad\.p4:"):
        SimRun(plan, tmp_path, apply=lambda *_a: None)
