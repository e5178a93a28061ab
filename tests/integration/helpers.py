"""Helpers of the integration tests: running traffic.py inside Mininet hosts,
and running an experiment end to end and judging its fidelity verdict."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import pytest

TRAFFIC = str(Path(__file__).with_name("traffic.py"))
REPO = Path(__file__).resolve().parents[2]


def as_foreground_job() -> None:
    """``preexec_fn`` for a child that a test interrupts as Ctrl-C would: a
    terminal's foreground job has SIGINT at its default, but a test suite
    started in the background by a non-interactive shell inherits it ignored
    (and so would the child, which then never sees the Ctrl-C)."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def host_run(host: Any, *args: object) -> dict[str, Any]:
    """Run traffic.py in ``host`` and return its JSON line."""
    out = host.cmd(" ".join([sys.executable, TRAFFIC, *map(str, args)]))
    for line in reversed(out.strip().splitlines()):
        if line.startswith("{"):
            result: dict[str, Any] = json.loads(line)
            return result
    raise AssertionError(f"{host.name}: traffic.py {args} printed no result:\n{out}")


def host_start(host: Any, *args: object) -> Any:
    """Start traffic.py in ``host`` in the background; wait until it listens."""
    proc = host.popen([sys.executable, TRAFFIC, *map(str, args)], text=True)
    line = proc.stdout.readline()
    if '"listening"' not in line:
        proc.kill()
        raise AssertionError(f"{host.name}: {args} did not start: {line}{proc.stderr.read()}")
    return proc


def host_result(proc: Any, timeout: float = 30) -> dict[str, Any]:
    out, err = proc.communicate(timeout=timeout)
    for line in reversed(out.strip().splitlines()):
        if line.startswith("{"):
            result: dict[str, Any] = json.loads(line)
            return result
    raise AssertionError(f"no result: {out}{err}")


def wait_for(cond: Callable[[], bool], timeout: float, interval: float = 0.1) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if cond():
            return True
        time.sleep(interval)
    return cond()


# The opening of every not-faithful failure; the integration conftest reruns
# tests that fail with it (and only those).
OVERLOADED = "the machine was overloaded"


def assert_faithful(summary: dict[str, Any]) -> None:
    """Fail first, and say so, when a run was not faithful: its figures then
    measure an overloaded machine, not the code under test."""
    if not summary.get("fidelity_ok"):
        raise AssertionError(
            f"{OVERLOADED}: the run was not faithful, so its figures say "
            "nothing about the code (check `uptime` and rerun). Verdict: "
            + str(summary.get("fidelity_verdict", summary.get("fidelity"))))


def run_experiment(name: str, out: Path, *params: str, quick: bool = True,
                   timeout: float = 1500, options: Sequence[str] = ()) -> dict[str, Any]:
    """``testbed run NAME [--quick] [OPTION ...] [-p PARAM ...] --out OUT`` in
    a fresh interpreter; fails unless it succeeded, and returns its
    summary.json."""
    cmd = [sys.executable, "-m", "testbed.cli", "run", name, *(["--quick"] if quick else []),
           *options, *(a for p in params for a in ("-p", p)), "--out", str(out)]
    r = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, timeout=timeout)
    assert r.returncode == 0, r.stdout + r.stderr
    summary: dict[str, Any] = json.loads((out / "summary.json").read_text())
    return summary


def skip_without_rxe_hosts() -> None:
    """Skip the test where Mininet rdma_rxe hosts cannot run (no rdma_rxe on
    this machine's kernel; the guest VM runs it: vm/guest-tests.sh)."""
    from testbed.rxe_host import rxe_in_mininet_reason

    reason = rxe_in_mininet_reason()
    if reason is not None:
        pytest.skip(reason)


def run_on_rxe_hosts(name: str, out: Path, *params: str, quick: bool = False,
                     pcap: bool = False) -> dict[str, Any]:
    """:func:`run_experiment` with rdma_rxe hosts (``--hosts rxe``; ``pcap``:
    the switch's ports captured, ``--pcap``), after
    :func:`skip_without_rxe_hosts`; fails unless the run succeeded on rxe
    hosts, and returns its summary.json."""
    skip_without_rxe_hosts()
    summary = run_experiment(name, out, *params, quick=quick,
                             options=("--hosts", "rxe", *(["--pcap"] if pcap else [])))
    assert summary["ok"] and summary["hosts"] == "rxe"
    return summary


def xfail_unless_faithful(summary: dict[str, Any], name: str) -> None:
    """End the test as an expected failure, naming the verdict, when the
    fidelity verdict rejected the run: the timing figures checked after this
    call would measure the loaded machine, not the code. What must hold
    whatever the load (bit-exact results, keys, plots) is checked before it."""
    if not summary.get("fidelity_ok"):
        pytest.xfail(f"{name} was not faithful on this machine (see experiments/README.md): "
                     f"{summary.get('fidelity_verdict', summary.get('fidelity'))}")
