"""A phase's host agents: one process per host, forked by its host's
launcher or started as a new interpreter, their state read from their
timelines, put at real-time priority, stopped, and described when one fails."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from testbed.agent_launcher import AgentLauncher, LaunchedAgent, LauncherError
from testbed.owned import this_process_record
from testbed.runner.environment import REPO_ROOT
from testbed.runner.errors import RunError
from testbed.runner.priorities import SWITCH_FIRST, RtPriorities
from testbed.runner.progress import _last_events, _tail

if TYPE_CHECKING:
    from mininet.node import Host

AGENT_MODULE = "hosts.agent"


@dataclass
class _Agent:
    host: str
    node: Host
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
