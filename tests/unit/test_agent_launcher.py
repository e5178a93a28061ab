"""The agent launcher forks agents on request and reports how each ended; the
runner's handle behaves as a Popen of the agent; nothing outlives the
launcher."""

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

from testbed.agent_launcher import AgentLauncher, LauncherError
from testbed.runner import REPO_ROOT
from testbed.runner.agents import _agent_env


class LocalNode:
    """A Mininet host's popen, without a namespace."""

    name = "hX"

    def popen(self, cmd: list[str], **kw: Any) -> subprocess.Popen[bytes]:
        return subprocess.Popen(cmd, start_new_session=True, **kw)


@pytest.fixture
def launcher(tmp_path: Path) -> Any:
    la = AgentLauncher(LocalNode(), tmp_path / "launcher.log", _agent_env(), REPO_ROOT)
    yield la
    la.close()


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def test_a_forked_agent_reports_its_exit_code_and_output(launcher: AgentLauncher,
                                                          tmp_path: Path) -> None:
    log = tmp_path / "a.log"
    a = launcher.spawn(["--spec", str(tmp_path / "missing.json"),
                        "--events", str(tmp_path / "ev.jsonl")], log)
    assert a.wait(20) == 2                                  # the agent's "spec unreadable"
    assert a.poll() == 2 and a.returncode == 2
    assert "cannot read spec" in log.read_text()
    spec = tmp_path / "bad.json"
    spec.write_text("{}")
    b = launcher.spawn(["--spec", str(spec), "--events", str(tmp_path / "ev.jsonl")],
                       tmp_path / "b.log")
    assert b.pid != a.pid and b.wait(20) == 2
    assert "invalid spec" in (tmp_path / "b.log").read_text()


def test_an_agent_killed_by_a_signal_reads_as_minus_the_signal(
        launcher: AgentLauncher, tmp_path: Path) -> None:
    fifo = tmp_path / "spec.fifo"
    os.mkfifo(fifo)                  # the agent blocks reading its spec
    a = launcher.spawn(["--spec", str(fifo), "--events", str(tmp_path / "ev.jsonl")],
                       tmp_path / "a.log")
    with pytest.raises(subprocess.TimeoutExpired):
        a.wait(0.3)
    assert a.poll() is None and _alive(a.pid)
    a.kill()
    assert a.wait(10) == -signal.SIGKILL
    a.terminate()                    # already ended: nothing to signal, no error


def test_closing_the_launcher_stops_its_agents(tmp_path: Path) -> None:
    la = AgentLauncher(LocalNode(), tmp_path / "launcher.log", _agent_env(), REPO_ROOT)
    fifo = tmp_path / "spec.fifo"
    os.mkfifo(fifo)
    a = la.spawn(["--spec", str(fifo), "--events", str(tmp_path / "ev.jsonl")],
                 tmp_path / "a.log")
    pid = a.pid
    la.close()
    assert la.proc.returncode == 0
    deadline = time.monotonic() + 5
    while _alive(pid) and time.monotonic() < deadline:
        time.sleep(0.02)
    assert not _alive(pid)
    with pytest.raises(LauncherError, match="agent launcher of hX: it is gone"):
        la.spawn(["--spec", "x", "--events", "y"], tmp_path / "c.log")


def test_bad_requests_get_an_error_not_a_crash(tmp_path: Path) -> None:
    reqs = [b"not json\n", b'{"argv": 3}\n',
            json.dumps({"argv": ["--spec", str(tmp_path / "none"), "--events",
                                 str(tmp_path / "ev")], "log": str(tmp_path / "a.log")}).encode()
            + b"\n"]
    env = _agent_env()
    out = subprocess.run([sys.executable, "-m", "hosts.agent_launcher"], input=b"".join(reqs),
                         capture_output=True, cwd=REPO_ROOT, env=env, timeout=30)
    lines = [json.loads(x) for x in out.stdout.splitlines()]
    assert out.returncode == 0
    assert "ready" in lines[0]
    assert lines[1]["error"].startswith("not JSON")
    assert "needs argv" in lines[2]["error"]
    assert "pid" in lines[3]
    # end of input straight after the request: the agent was stopped or ended
    assert lines[4]["exit"] == lines[3]["pid"] and lines[4]["rc"] in (2, -signal.SIGTERM)
