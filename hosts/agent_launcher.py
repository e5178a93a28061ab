"""Agent launcher: one per host, started with the network, forks its agents.

    python -m hosts.agent_launcher [--run RUN_DIR]   (stdin/stdout: the runner's pipes)

``--run`` only names the run, so that ``ps`` (and a test) can tell whose
launcher, and whose agents, a process is: forked agents keep its command line.

An agent's interpreter start-up and imports cost about 0.2 s of CPU; a phase
starts three to eight agents on a 2-CPU machine, and a run has dozens of
phases. The launcher imports the agent once, in the host's network
namespace, and forks a ready process per agent (a few milliseconds).

Protocol, one JSON object per line:

- runner -> launcher: ``{"argv": [...], "log": path}``: fork an agent that
  runs ``hosts.agent.process.main(argv)`` with its stdout and stderr appended to
  ``log``; the answer is ``{"pid": N}`` or ``{"error": text}``.
- launcher -> runner, unasked: ``{"exit": pid, "rc": code}`` when an agent
  ends: its exit status, or minus the signal that killed it (as
  ``subprocess.Popen.returncode``).

At the end of its input (the runner closed the pipe or died) or on SIGTERM,
the launcher sends SIGTERM to its agents still running, SIGKILL to what is
left after ``STOP_GRACE_S``, and exits. It dies with the runner
(PR_SET_PDEATHSIG), and each agent with it (hosts.agent.process sets the same).
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import io
import json
import os
import select
import signal
import sys
import time
import traceback
from typing import Any, NoReturn

import hosts.roce.udp_provider  # noqa: F401  (what every agent on these hosts loads)
from hosts.agent import process as agent_process

STOP_GRACE_S = 3.0
# held back across a fork, so that the child never runs the launcher's handlers
_FORK_BLOCKED = {signal.SIGTERM, signal.SIGINT, signal.SIGCHLD}


def _status(code: int) -> int:
    """A waitpid status as Popen's returncode."""
    if os.WIFSIGNALED(code):
        return -os.WTERMSIG(code)
    return os.WEXITSTATUS(code)


def _run_agent(argv: list[str], log: str, keep_closed: list[int]) -> NoReturn:
    """In the forked child: become the agent; never returns."""
    rc = 1
    try:
        # the launcher's handlers are not the agent's (signals are blocked
        # from before the fork until here)
        for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGCHLD):
            signal.signal(sig, signal.SIG_DFL)
        signal.set_wakeup_fd(-1)
        signal.pthread_sigmask(signal.SIG_UNBLOCK, _FORK_BLOCKED)
        for fd in keep_closed:
            if fd > 2:                  # 0-2 are replaced below
                os.close(fd)
        out = os.open(log, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        nul = os.open(os.devnull, os.O_RDONLY)
        os.dup2(nul, 0)
        os.dup2(out, 1)
        os.dup2(out, 2)
        os.close(out)
        os.close(nul)
        sys.stdin = open(0, closefd=False)  # noqa: SIM115 (fd 0 stays open)
        sys.stdout = io.TextIOWrapper(open(1, "wb", buffering=0, closefd=False),  # noqa: SIM115
                                      write_through=True)
        sys.stderr = io.TextIOWrapper(open(2, "wb", buffering=0, closefd=False),  # noqa: SIM115
                                      write_through=True)
        sys.argv = ["python -m hosts.agent", *argv]
        rc = agent_process.main(argv)
    except SystemExit as e:
        rc = e.code if isinstance(e.code, int) else 1
    except BaseException:
        traceback.print_exc()
        rc = 1
    finally:
        with contextlib.suppress(Exception):
            sys.stdout.flush()
            sys.stderr.flush()
        os._exit(rc)


class Launcher:
    def __init__(self, inp: int, out: int) -> None:
        self.inp, self.out = inp, out
        self.children: set[int] = set()
        self.wake_r, self.wake_w = os.pipe()
        os.set_blocking(self.wake_w, False)
        os.set_blocking(self.wake_r, False)
        signal.set_wakeup_fd(self.wake_w)
        signal.signal(signal.SIGCHLD, lambda *_: None)     # wakes select via the fd
        signal.signal(signal.SIGTERM, self._stop_signal)
        self.stopping = False

    def _stop_signal(self, *_: Any) -> None:
        self.stopping = True

    def send(self, obj: dict[str, Any]) -> None:
        data = (json.dumps(obj) + "\n").encode()
        while data:
            data = data[os.write(self.out, data):]

    def reap(self) -> None:
        while self.children:
            try:
                pid, code = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                self.children.clear()
                return
            if pid == 0:
                return
            self.children.discard(pid)
            with contextlib.suppress(OSError):     # the runner is gone: nobody to tell
                self.send({"exit": pid, "rc": _status(code)})

    def spawn(self, req: dict[str, Any]) -> None:
        argv, log = req.get("argv"), req.get("log")
        if not isinstance(argv, list) or not all(isinstance(a, str) for a in argv) \
                or not isinstance(log, str):
            self.send({"error": f"bad request {req!r}: needs argv (strings) and log (a path)"})
            return
        signal.pthread_sigmask(signal.SIG_BLOCK, _FORK_BLOCKED)
        try:
            pid = os.fork()
        except OSError as e:
            signal.pthread_sigmask(signal.SIG_UNBLOCK, _FORK_BLOCKED)
            self.send({"error": f"fork: {e}"})
            return
        if pid == 0:
            _run_agent(argv, log, [self.inp, self.out, self.wake_r, self.wake_w])
        signal.pthread_sigmask(signal.SIG_UNBLOCK, _FORK_BLOCKED)
        self.children.add(pid)
        self.send({"pid": pid})

    def serve(self) -> None:
        buf = b""
        while not self.stopping:
            try:
                ready, _, _ = select.select([self.inp, self.wake_r], [], [])
            except InterruptedError:
                continue
            if self.wake_r in ready:
                with contextlib.suppress(BlockingIOError):
                    os.read(self.wake_r, 4096)
            self.reap()
            if self.inp in ready:
                data = os.read(self.inp, 65536)
                if not data:
                    return
                buf += data
                while b"\n" in buf:
                    line, buf = buf.split(b"\n", 1)
                    try:
                        req = json.loads(line)
                    except json.JSONDecodeError as e:
                        self.send({"error": f"not JSON: {e}"})
                        continue
                    self.spawn(req if isinstance(req, dict) else {})

    def stop(self) -> None:
        """SIGTERM the agents still running, SIGKILL what is left after the grace."""
        for pid in self.children:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGTERM)
        deadline = time.monotonic() + STOP_GRACE_S
        while self.children and time.monotonic() < deadline:
            self.reap()
            time.sleep(0.02)
        for pid in self.children:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        while self.children:
            try:
                pid, _code = os.waitpid(-1, 0)
            except ChildProcessError:
                break
            self.children.discard(pid)


def _preload_collectives() -> None:
    """Import what a collective rank imports (numpy, the CommLib), 0.1 s of
    CPU per agent otherwise: without BLAS threads, so that the launcher
    stays one thread and forks safely (the agents add and compare arrays;
    no BLAS call is made)."""
    for var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
        os.environ.setdefault(var, "1")
    try:
        import hosts.commlib.communicator  # noqa: F401
        import hosts.commlib.epic  # noqa: F401
    except ImportError as e:          # no numpy: flows only, as before
        print(f"agent launcher: collectives not preloaded: {e}", file=sys.stderr)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m hosts.agent_launcher",
                                 description="Fork host agents on request (JSON lines on stdin).")
    ap.add_argument("--run", default="", help="the run this launcher serves (a label)")
    ap.parse_args(argv)
    if not agent_process.die_with_parent():    # the agent's own: PDEATHSIG, exact timers
        return 3                     # the runner is already gone
    _preload_collectives()
    threads = len(os.listdir("/proc/self/task"))
    if threads > 1:
        print(f"agent launcher: {threads} threads after start-up; forking anyway",
              file=sys.stderr)
    # what start-up made stays out of the GC's work (and its pages shared)
    gc.collect()
    gc.freeze()
    launcher = Launcher(sys.stdin.fileno(), sys.stdout.fileno())
    launcher.send({"ready": os.getpid()})
    try:
        launcher.serve()
    except KeyboardInterrupt:
        pass
    finally:
        launcher.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
