"""The virtual-time engine in a child process (testbed.sim.pypy): under PyPy
the same run as under CPython; a child's failure, Ctrl-C and SIGTERM end the
run cleanly, leaving no process behind."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from proc_tree import children_of

from testbed.experiment import load, make_params
from testbed.runner import RunOptions, run
from testbed.sim.pypy import InterpreterError, choose, find_pypy, run_in_child

REPO = Path(__file__).resolve().parents[2]
needs_pypy = pytest.mark.skipif(find_pypy() is None,
                                reason="no PyPy with numpy (./setup.sh makes .venv-pypy)")


def _opts(out: Path, interpreter: str, **kw: Any) -> RunOptions:
    return RunOptions(quick=True, out=out, engine="sim", echo=lambda _s: None,
                      interpreter=interpreter, **kw)


def _timelines(run_dir: Path) -> dict[str, Any]:
    """Every phase file, with the one field that names the interpreter taken out."""
    out: dict[str, Any] = {}
    for p in sorted((run_dir / "phases").rglob("*")):
        if not p.is_file():
            continue
        data = p.read_bytes()
        if p.name.endswith(".events.jsonl"):
            first, _, rest = data.partition(b"\n")
            head = json.loads(first)
            assert head["event"] == "agent_start"
            head.pop("interpreter")
            out[str(p.relative_to(run_dir))] = (head, rest)
        else:
            out[str(p.relative_to(run_dir))] = data
    return out


@needs_pypy
@pytest.mark.parametrize("name", ["ring-allreduce", "roce-basics", "epic-allreduce"])
def test_pypy_runs_the_same_simulation_as_cpython(tmp_path: Path, name: str) -> None:
    a = run(name, _opts(tmp_path / "cpython", "cpython"))
    b = run(name, _opts(tmp_path / "pypy", "pypy"))
    assert a["sim"]["interpreter"].startswith("CPython")
    assert b["sim"]["interpreter"].startswith("PyPy")
    assert _timelines(tmp_path / "cpython") == _timelines(tmp_path / "pypy")
    wall = ("duration_s", "run_dir", "started", "sim")
    assert {k: v for k, v in a.items() if k not in wall} == \
        {k: v for k, v in b.items() if k not in wall}
    for k in ("events", "packet_hops", "sim_s", "phases"):
        assert a["sim"][k] == b["sim"][k], k
    assert b["fidelity_ok"] and b["switch_config"] == a["switch_config"]


def test_the_interpreter_is_checked() -> None:
    assert choose("cpython") is None
    with pytest.raises(InterpreterError, match="unknown interpreter 'jython'"):
        choose("jython")
    if find_pypy() is None:
        with pytest.raises(InterpreterError, match="no PyPy with numpy found"):
            choose("pypy")
        assert choose("auto") is None
    else:
        assert choose("auto") == choose("pypy") == find_pypy()


def test_a_child_that_fails_reports_why(tmp_path: Path) -> None:
    """A fault in the child (here: no generated program at that path) comes
    back as the run's error, with the child's traceback on stderr; the child
    runs on this CPython, so this holds where PyPy is absent too."""
    mod = load("ring-allreduce")
    plan = mod.plan(make_params(mod, quick=True))
    out = run_in_child(sys.executable, plan, tmp_path, seed=1, host_links="wire",
                       packet_bytes=plan.topology.packet_bytes,
                       program_path=str(tmp_path / "missing.py"), line=lambda _m: None)
    assert out.error and out.error.startswith("the simulation failed: FileNotFoundError")
    assert out.record is None and not out.interrupted


def test_a_run_error_in_the_child_comes_back_as_it_was_raised(tmp_path: Path) -> None:
    """A phase that times out inside the child is the run's error, word for
    word as on CPython."""
    import dataclasses

    from switches.soft.backends import write_generated
    from testbed.sim.network import compile_plan_program

    mod = load("ring-allreduce")
    plan = mod.plan(make_params(mod, quick=True))
    plan = dataclasses.replace(plan, phases=[dataclasses.replace(plan.phases[0],
                                                                 timeout_s=0.01)])
    exe = find_pypy() or sys.executable
    out = run_in_child(exe, plan, tmp_path, seed=1, host_links="wire",
                       packet_bytes=plan.topology.packet_bytes,
                       program_path=write_generated(compile_plan_program(plan),
                                                    str(tmp_path / "gen")),
                       line=lambda _m: None)
    assert out.error is not None and "timed out after" in out.error
    assert out.record is not None and out.fidelity is not None
    assert any(a["where"] == "topology" for a in out.applied)


@needs_pypy
def test_sigterm_stops_the_pypy_child_too(tmp_path: Path) -> None:
    out = tmp_path / "run"
    env = dict(os.environ, PYTHONPATH=str(REPO), MPLCONFIGDIR=str(tmp_path / "mpl"))
    proc = subprocess.Popen([sys.executable, "-m", "testbed.cli", "run", "reflex-probing",
                             "--quick", "--engine", "sim", "--interpreter", "pypy",
                             "--out", str(out)], env=env, cwd=tmp_path,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 120
    while not any(out.glob("phases/*/h1.events.jsonl")):
        assert time.monotonic() < deadline and proc.poll() is None, "the run never started"
        time.sleep(0.2)
    kids = children_of(proc.pid)
    assert kids, "no child process runs the simulation"
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 1, err
    assert "run terminated by signal SIGTERM" in err
    summary = json.loads((out / "summary.json").read_text())
    assert summary["error"] == "terminated (signal SIGTERM)"
    for k in kids:
        assert not Path(f"/proc/{k}").exists() or \
            "Z" == (Path(f"/proc/{k}/stat").read_text().rsplit(")", 1)[1].split()[0]), k
