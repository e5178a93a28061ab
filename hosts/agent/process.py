"""The agent as a process: ``python -m hosts.agent --spec job.json --events
out.jsonl`` (hosts/agent/__main__.py), or forked by a host's agent launcher
(hosts.agent_launcher), which calls main.

main reads the spec, dies with its parent (the runner), turns SIGTERM into
an AgentError, runs the Agent (under cProfile if PROFILE_ENV asks) and
reports a failure on stderr and in the timeline.

Events:

- ``agent_start`` (pid, spec, interpreter), ``error`` (message)
- ``profiling`` (path): the agent runs under cProfile, as ``P4TB_AGENT_PROFILE``
  asks (see PROFILE_ENV)

Exit status: 0 success; 1 the job failed (a work request failed, a timeout,
data did not verify; the reason is on stderr and in an ``error`` event); 2 the
spec is invalid or unreadable; 3 the agent's parent (the runner) is gone."""

from __future__ import annotations

import argparse
import contextlib
import ctypes
import gc
import os
import platform
import signal
import sys
import traceback
from pathlib import Path
from types import FrameType

from hosts.agent.agent import Agent
from hosts.agent.errors import AgentError
from hosts.agent.events import EventLog
from hosts.agent_spec import JobSpec, SpecError

PR_SET_PDEATHSIG = 1
PR_SET_TIMERSLACK = 29


def die_with_parent() -> bool:
    """Ask for SIGTERM when the runner dies; False if it is already gone. Also
    asks for exact timer wake-ups: the default 50 us slack would make every
    paced packet late."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(PR_SET_PDEATHSIG, signal.SIGTERM)
        libc.prctl(PR_SET_TIMERSLACK, 1)
    except (OSError, AttributeError):
        pass
    return os.getppid() != 1


def _on_sigterm(signum: int, _frame: FrameType | None) -> None:
    raise AgentError(f"stopped by signal {signal.Signals(signum).name}")


def _fail(log: EventLog, host: str, msg: str) -> int:
    log.emit("error", message=msg)
    print(f"agent {host}: error: {msg}", file=sys.stderr)
    return 1


def _freeze_heap() -> None:
    """Leave what start-up made (modules, numpy, the spec, the agent's
    buffers: most of the heap) out of the cyclic GC's full collections. Each
    of those scanned it all and stopped the agent for 5 to 16 ms, several
    packet times of a paced sender at a few Mb/s (symphony-ring: 1 to 2 % of
    every flow's sends late from them alone)."""
    freeze = getattr(gc, "freeze", None)     # CPython 3.7+; PyPy has none
    if freeze is not None:
        gc.collect()
        freeze()


# Set to a directory: every agent runs under cProfile and writes
# <phase>-<host>.pstats there (``python -m pstats`` reads it). For finding
# where an agent's time goes, not for results: the profiler costs each call
# several times its own time, so such a run rarely keeps up with its clock.
PROFILE_ENV = "P4TB_AGENT_PROFILE"


def _run_profiled(agent: Agent, spec: JobSpec, log: EventLog) -> None:
    import cProfile

    out = Path(os.environ[PROFILE_ENV]) / f"{spec.phase}-{spec.host}.pstats"
    log.emit("profiling", path=str(out))
    prof = cProfile.Profile()
    try:
        prof.runcall(agent.run)
    finally:
        with contextlib.suppress(OSError):
            out.parent.mkdir(parents=True, exist_ok=True)
            prof.dump_stats(str(out))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m hosts.agent",
                                 description="Run a job spec in this host; write JSONL events.")
    ap.add_argument("--spec", required=True, help="job spec (JSON, hosts.agent_spec.JobSpec)")
    ap.add_argument("--events", required=True, help="write events here (JSON lines, appended)")
    args = ap.parse_args(argv)
    if not die_with_parent():
        print("agent: the process that started this agent is gone", file=sys.stderr)
        return 3
    signal.signal(signal.SIGTERM, _on_sigterm)
    try:
        spec = JobSpec.from_json(Path(args.spec).read_text())
    except OSError as e:
        print(f"agent: cannot read spec {args.spec}: {e.strerror}", file=sys.stderr)
        return 2
    except SpecError as e:
        print(f"agent: invalid spec {args.spec}: {e}", file=sys.stderr)
        return 2
    log = EventLog(args.events, spec.host)
    log.emit("agent_start", pid=os.getpid(), phase=spec.phase, spec=spec.to_dict(),
             interpreter=f"{platform.python_implementation()} {platform.python_version()}")
    agent: Agent | None = None
    try:
        agent = Agent(spec, log)
        _freeze_heap()
        if os.environ.get(PROFILE_ENV):
            _run_profiled(agent, spec, log)
        else:
            agent.run()
        return 0
    except AgentError as e:
        return _fail(log, spec.host, str(e))
    except KeyboardInterrupt:
        return _fail(log, spec.host, "interrupted")
    except Exception as e:  # a bug or an OS error: keep the traceback in the log
        traceback.print_exc(file=sys.stderr)
        return _fail(log, spec.host, f"{type(e).__name__}: {e}")
    finally:
        if agent is not None:
            agent.close()
        log.close()
