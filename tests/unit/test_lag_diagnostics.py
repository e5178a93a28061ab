"""scripts/explain_lags.py and stall_watchdog.py: a switch's lag set beside
the CPUs' stops and where the CPU time went in its window."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
MS = 1_000_000


def _script(name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(name, ROOT / "scripts" / f"{name}.py")
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _jsonl(path: Path, rows: list[dict[str, Any]]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def _explain(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, str(ROOT / "scripts" / "explain_lags.py"), *args],
                          capture_output=True, text=True, timeout=60)


def test_a_lag_is_set_beside_the_stop_and_the_trace_of_its_window(tmp_path: Path) -> None:
    """leaf1's worst lag rises to 48 ms in the sample at 1.1 s (the previous
    at 1.0 s): its window is 0.952-1.1 s. A watcher of cpu1 late by 55 ms at
    1.08 s falls in it, one at 3 s does not; the trace rows inside are summed."""
    t0 = 1000 * MS
    phase = tmp_path / "phases" / "baseline-s0"
    _jsonl(phase / "switch-leaf1.jsonl", [
        {"t_ns": t0 - 100 * MS, "lag_us": {"max": 5000}},
        {"t_ns": t0, "lag_us": {"max": 5000}},
        {"t_ns": t0 + 100 * MS, "lag_us": {"max": 48000}},
        {"t_ns": t0 + 200 * MS, "lag_us": {"max": 48000}},   # no rise: nothing to explain
    ])
    _jsonl(phase / "switch-spine1.jsonl", [{"t_ns": t0, "lag_us": {"max": 1000}},
                                           {"t_ns": t0 + 100 * MS, "lag_us": {"max": 9000}}])
    stalls = _jsonl(tmp_path / "stalls.jsonl", [
        {"t_ns": t0 + 80 * MS, "cpu": 1, "late_ms": 55.0, "stolen_ms": {"cpu0": 0.0, "cpu1": 0.0}},
        {"t_ns": 3000 * MS, "cpu": 0, "late_ms": 20.0, "stolen_ms": {"cpu0": 0.0, "cpu1": 0.0}},
    ])
    # every 10 ms: cpu1 stolen whole, cpu0 running the agents and leaf1
    row = {"cpu": {"cpu0": [0.0, 0.0, 0.0], "cpu1": [10.0, 0.0, 0.0]},
           "ran_waited_ms": {"leaf1": [1.0, 9.0], "agents": [9.0, 0.0]}}
    trace = _jsonl(tmp_path / "sched.jsonl",
                   [{"t_ns": t0 + k * 10 * MS, **row} for k in range(-10, 20)])
    r = _explain(str(tmp_path), "--stalls", str(stalls), "--trace", str(trace))
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert lines[0] == ("phases/baseline-s0 leaf1: lag 48.0 ms, window 148 ms "
                        "ending at 1.100 s")
    assert lines[1] == "  watchers late: cpu1 55.0 ms at 1.080 s (stolen 0 ms)"
    # trace rows at 0.96 .. 1.10 s: 15 of them
    assert lines[2] == "  ran, waited ms: {'agents': [135, 0], 'leaf1': [15, 135]}"
    assert lines[3] == "  per CPU stolen, softirq, idle ms: {'cpu0': [0, 0, 0], 'cpu1': [150, 0, 0]}"
    # 0.95-1.10 s on two CPUs, all of it accounted for
    assert lines[4] == ("  the CPUs had 300 ms: the traced processes ran, time was stolen, "
                        "in softirq or idle for 300, the rest (other processes, the kernel) 0")
    assert "spine1" not in r.stdout        # 9 ms: under the 30 ms asked for
    assert "spine1" in _explain(str(tmp_path), "--min-ms", "5").stdout


def test_bad_inputs_are_named(tmp_path: Path) -> None:
    r = _explain(str(tmp_path))
    assert r.returncode == 2 and "no phases/ directory" in r.stderr
    phase = tmp_path / "phases" / "p"
    phase.mkdir(parents=True)
    (phase / "switch-leaf1.jsonl").write_text('{"t_ns": 1, "lag_us": {"max": 1}}\nnot json\n')
    r = _explain(str(tmp_path), "--stalls", str(tmp_path / "missing.jsonl"))
    assert r.returncode == 2 and "missing.jsonl: no such file" in r.stderr
    r = _explain(str(tmp_path))
    assert r.returncode != 0 and "switch-leaf1.jsonl:2: not JSON" in r.stderr


def test_the_watchdog_names_switches_and_counts_only_threads_seen_twice() -> None:
    wd = _script("stall_watchdog")
    argv = ["python", "-m", "switches.soft.daemon", "--program", "x.p4",
            "-i", "leaf2-eth1", "-i", "leaf2-eth2"]
    assert wd._switch_name(argv) == "leaf2"
    assert wd._switch_name(["python", "-m", "hosts.agent"]) is None
    groups = {"leaf2": ["/a", "/b"], "agents": ["/c"]}
    prev = {"/a": (10.0, 1.0), "/b": (5.0, 0.0)}
    cur = {"/a": (12.5, 4.0), "/c": (7.0, 7.0)}    # /b ended, /c is new
    assert wd.group_delta(groups, cur, prev) == {"leaf2": [2.5, 3.0], "agents": [0.0, 0.0]}
