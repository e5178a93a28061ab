"""The runner's side of a host's agent launcher (``hosts.agent_launcher``).

:class:`AgentLauncher` starts the launcher in a Mininet host when the network
comes up; :meth:`AgentLauncher.spawn` has it fork an agent and returns a
:class:`LaunchedAgent`, which the runner polls, waits for and signals as it
would a ``subprocess.Popen`` of ``python -m hosts.agent``.
"""

from __future__ import annotations

import json
import os
import select
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from testbed.owned import this_process_record

if TYPE_CHECKING:
    from mininet.node import Host

__all__ = ["AgentLauncher", "LaunchedAgent", "LauncherError"]

LAUNCHER_MODULE = "hosts.agent_launcher"
# The launcher imports the agent before it reads its first request: on a busy
# 2-CPU machine (other hosts' launchers, the switch) that takes up to seconds.
READY_TIMEOUT_S = 30.0


class LauncherError(RuntimeError):
    pass


class LaunchedAgent:
    """An agent the launcher forked: ``pid``, ``returncode``, ``poll``,
    ``wait``, ``terminate`` and ``kill``, as ``subprocess.Popen``."""

    def __init__(self, launcher: AgentLauncher, pid: int) -> None:
        self.launcher, self.pid = launcher, pid
        self.returncode: int | None = None

    def poll(self) -> int | None:
        if self.returncode is None:
            self.launcher.pump()
            self.returncode = self.launcher.exits.pop(self.pid, None)
            if self.returncode is None and self.launcher.gone():
                # The launcher died and its agents with it (PR_SET_PDEATHSIG):
                # nobody is left to report how this one ended.
                self.returncode = -signal.SIGKILL
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        deadline = None if timeout is None else time.monotonic() + timeout
        while self.poll() is None:
            left = None if deadline is None else deadline - time.monotonic()
            if left is not None and left <= 0:
                raise subprocess.TimeoutExpired(f"agent {self.pid}", timeout or 0.0)
            self.launcher.wait_readable(0.05 if left is None else min(0.05, left))
        assert self.returncode is not None
        return self.returncode

    def _signal(self, sig: int) -> None:
        if self.poll() is None:
            try:
                os.kill(self.pid, sig)
            except ProcessLookupError:
                pass

    def terminate(self) -> None:
        self._signal(signal.SIGTERM)

    def kill(self) -> None:
        self._signal(signal.SIGKILL)


class AgentLauncher:
    """A launcher process in ``node`` (a Mininet host), running ``python``
    (this interpreter) with ``env``; its own errors go to ``log_path``;
    ``run`` (the run directory) is on its command line and its agents'."""

    def __init__(self, node: Host, log_path: Path, env: dict[str, str], cwd: Path,
                 run: str = "") -> None:
        self.name = getattr(node, "name", "?")
        self.exits: dict[int, int] = {}
        self._buf = b""
        self._ready = False
        self._replies: list[dict[str, Any]] = []
        with open(log_path, "ab") as logf:
            self.proc: subprocess.Popen[bytes] = node.popen(
                [sys.executable, "-m", LAUNCHER_MODULE, "--run", run], stdin=subprocess.PIPE,
                stdout=subprocess.PIPE, stderr=logf, cwd=str(cwd), env=env)
        self.log_path = log_path
        this_process_record().add_process(self.proc.pid, f"agent launcher {self.name}")
        assert self.proc.stdout is not None
        self._out = self.proc.stdout.fileno()
        os.set_blocking(self._out, False)

    def gone(self) -> bool:
        return self.proc.poll() is not None

    def wait_readable(self, timeout: float) -> None:
        if not self.gone():
            select.select([self._out], [], [], max(0.0, timeout))

    def pump(self) -> None:
        """Read what the launcher wrote: exits, replies, its ready line."""
        while True:
            try:
                data = os.read(self._out, 65536)
            except BlockingIOError:
                break
            except OSError:
                data = b""
            if not data:
                break
            self._buf += data
        while b"\n" in self._buf:
            line, self._buf = self._buf.split(b"\n", 1)
            try:
                msg = json.loads(line)
            except json.JSONDecodeError:
                continue
            if "exit" in msg:
                self.exits[int(msg["exit"])] = int(msg["rc"])
            elif "ready" in msg:
                self._ready = True
            else:
                self._replies.append(msg)

    def _failure(self, what: str) -> LauncherError:
        try:
            tail = self.log_path.read_text(errors="replace")[-2000:]
        except OSError:
            tail = ""
        return LauncherError(f"agent launcher of {self.name}: {what}; log {self.log_path}"
                             + (f":\n{tail}" if tail else ""))

    def spawn(self, argv: list[str], log: Path) -> LaunchedAgent:
        """Fork an agent running ``hosts.agent.process.main(argv)``, output to ``log``."""
        assert self.proc.stdin is not None
        try:
            self.proc.stdin.write((json.dumps({"argv": argv, "log": str(log)}) + "\n").encode())
            self.proc.stdin.flush()
        except (BrokenPipeError, ValueError) as e:
            raise self._failure(f"it is gone ({e})") from None
        deadline = time.monotonic() + READY_TIMEOUT_S
        while True:
            self.pump()
            if self._replies:
                reply = self._replies.pop(0)
                if "pid" in reply:
                    return LaunchedAgent(self, int(reply["pid"]))
                raise self._failure(str(reply.get("error", reply)))
            if self.gone():
                raise self._failure(f"it exited with code {self.proc.returncode}")
            if time.monotonic() >= deadline:
                raise self._failure(f"no answer in {READY_TIMEOUT_S:.0f} s")
            self.wait_readable(0.05)

    def close(self, grace_s: float = 5.0) -> None:
        """End of input: the launcher stops its agents and exits; killed if it
        does not within ``grace_s``."""
        if self.proc.stdin is not None:
            try:
                self.proc.stdin.close()
            except OSError:
                pass
        try:
            self.proc.wait(grace_s)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        if self.proc.stdout is not None:
            self.proc.stdout.close()
        this_process_record().forget([self.proc.pid])
