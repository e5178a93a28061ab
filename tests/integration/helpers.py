"""Helpers of the integration tests: running traffic.py inside Mininet hosts."""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

TRAFFIC = str(Path(__file__).with_name("traffic.py"))


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
