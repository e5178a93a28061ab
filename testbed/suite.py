"""Several runs with one progress display (``testbed run all``,
``testbed report``): one after the other, in parallel processes, or on a
Dask distributed cluster.

Each run is an ordinary run (testbed.runner.run) into ``<root>/<name>/``
(``<name>-<k>`` for the k-th repeat), so its directory is a normal run
directory. :func:`execute` runs one :class:`RunSpec` and returns its
record; :func:`run_suite` calls it in this process, one run after the
other (the default), in ``jobs`` processes at a time (each run in a
process of its own, forked from this one), or on the workers of a Dask
distributed scheduler (``client``, from :func:`connect`). Whichever
process runs it, a run writes the same files into the same directory.

Failures: a run that fails on its own terms (the runner's RunError or
ExperimentError; its summary.json says why) is a result: it is recorded
and the suite goes on. A run whose execution fails otherwise (another
exception, a process that dies, a Dask worker lost) is run once more
(:data:`RETRIES`), then recorded as failed, with a summary.json that says
so: the report lists it, never leaves it out.

Ctrl-C and SIGTERM (RunTerminated) stop the suite. In this process the
interrupted run tears its network down first; in parallel every running
run is interrupted as by Ctrl-C (it records so, and stops its PyPy child,
if any) and waited for, so that no process is left behind; on Dask the
runs not yet finished are cancelled (a run a worker has started finishes
there: Dask cannot interrupt it).

The display: on a terminal, one status line rewritten in place (which run of
how many, its elapsed time, the suite's, and the run's latest line), plus a
permanent line per finished run; elsewhere (a log, CI) the run's lines with
the same prefix. Runs on Dask show their finished line only. Every run's
own lines are in its ``progress.log``.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import sys
import threading
import time
import uuid
from collections import deque
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, replace
from pathlib import Path
from typing import IO, TYPE_CHECKING, TypedDict

from testbed.experiment import ExperimentError
from testbed.runner import RunError, RunOptions, RunTerminated, run

if TYPE_CHECKING:
    from multiprocessing.connection import Connection
    from multiprocessing.process import BaseProcess

    from distributed import Client, Future

    from testbed.bench_hosts import MachineInfo

__all__ = ["SuiteRun", "SuiteProgress", "SuiteError", "RunSpec", "plan_runs", "execute",
           "run_suite", "connect", "format_table", "write_record", "RETRIES"]

# A run whose execution failed (not the run itself: see the module doc) is
# run this many times more before it is recorded as failed.
RETRIES = 1
# How long connect() tries to reach a Dask scheduler.
CONNECT_TIMEOUT_S = 10.0
# How long a stopped parallel run has to record why and stop its children.
STOP_GRACE_S = 30.0

Runner = Callable[[str, RunOptions], dict]


class SuiteError(ValueError):
    """A suite that cannot start: its run directories exist, or its Dask
    scheduler cannot be reached (the message says which)."""


@dataclass
class SuiteRun:
    name: str
    run_dir: Path
    ok: bool
    duration_s: float
    fidelity_ok: bool | None = None
    verdict: str = ""
    error: str = ""
    attempts: int = 1


@dataclass(frozen=True)
class RunSpec:
    """One run of a suite: the experiment, its options (``out`` and ``seed``
    set) and its place in the suite."""

    index: int          # 1, 2, ... in the suite's order
    name: str           # the experiment
    label: str          # the name, with " #k" for the k-th repeat
    run_dir: Path
    opts: RunOptions


class SuiteProgress:
    """One progress display for a sequence of runs (or several at a time)."""

    def __init__(self, total: int, stream: IO[str] | None = None,
                 live: bool | None = None) -> None:
        self.total = total
        self.stream = stream or sys.stdout
        self.live = self.stream.isatty() if live is None else live
        self.t0 = time.monotonic()
        self.index = 0
        self.name = ""
        self.t_run = self.t0
        self._runs: dict[int, tuple[str, float]] = {}    # started, not done: name, start
        self._dirty = False

    def start(self, index: int, name: str) -> None:
        self.index, self.name, self.t_run = index, name, time.monotonic()
        self._runs[index] = (name, self.t_run)
        self.line(f"starting {name}", index)

    def prefix(self, index: int | None = None) -> str:
        i = self.index if index is None else index
        name, t_run = self._runs.get(i, (self.name, self.t_run))
        now = time.monotonic()
        return f"[{i}/{self.total} {name} {_mmss(now - t_run)} | all {_mmss(now - self.t0)}]"

    def line(self, text: str, index: int | None = None) -> None:
        """A line of run ``index`` (default: the one started last): in place on
        a terminal, appended elsewhere."""
        self._write(f"{self.prefix(index)} {text.strip()}")

    def _write(self, msg: str) -> None:
        if self.live:
            width = shutil.get_terminal_size((120, 20)).columns
            self.stream.write("\r\x1b[K" + msg[:width - 1])
            self._dirty = True
        else:
            self.stream.write(msg + "\n")
        self.stream.flush()

    def note(self, text: str) -> None:
        """A permanent line."""
        if self._dirty:
            self.stream.write("\r\x1b[K")
            self._dirty = False
        self.stream.write(text + "\n")
        self.stream.flush()

    def done(self, r: SuiteRun, index: int | None = None) -> None:
        """A permanent line for a finished run (``index``: its place in the suite)."""
        i = self.index if index is None else index
        self._runs.pop(i, None)
        state = ("FAILED: " + r.error.splitlines()[0]) if not r.ok else (
            "faithful" if r.fidelity_ok else "NOT faithful")
        self.note(f"[{i}/{self.total}] {r.name}: {_mmss(r.duration_s)}, {state}")

    def waiting(self, finished: int) -> None:
        """On a terminal: the runs under way, while none of them says anything."""
        if self.live and self._runs:
            self._write(f"[{finished}/{self.total} done | all {_mmss(self.elapsed)}] running "
                        + ", ".join(f"{n} {_mmss(time.monotonic() - t)}"
                                    for n, t in self._runs.values()))

    @property
    def elapsed(self) -> float:
        return time.monotonic() - self.t0


def _mmss(seconds: float) -> str:
    m, s = divmod(int(round(seconds)), 60)
    return f"{m}:{s:02d}"


# ---------------------------------------------------------------------------
# one run


def plan_runs(names: list[str], root: Path, opts: RunOptions, repeat: int = 1) -> list[RunSpec]:
    """Every experiment of ``names`` ``repeat`` times, each into its directory
    under ``root`` (a simulated run repeats exactly with its seed: each repeat
    takes the next)."""
    if repeat < 1:
        raise ValueError("repeat must be >= 1")
    pairs = [(n, k) for n in names for k in range(1, repeat + 1)]
    specs = []
    for i, (name, k) in enumerate(pairs, 1):
        run_dir = root / (name if repeat == 1 else f"{name}-{k}")
        specs.append(RunSpec(i, name, name if repeat == 1 else f"{name} #{k}", run_dir,
                             replace(opts, out=run_dir, seed=opts.seed + k - 1)))
    return specs


# One run at a time in a process: a run plots with matplotlib's pyplot and
# sets signal handlers, neither of which is for several threads (a Dask
# worker with more than one thread runs its runs in turn).
_ONE_RUN = threading.Lock()


def execute(spec: RunSpec, runner: Runner = run) -> SuiteRun:
    """Run ``spec`` in this process and return its record: the one function
    that runs a suite's run, here, in a forked process or on a Dask worker.

    The run directory is the spec's own: what an earlier attempt of the run
    left there is removed first. The run's own failure (RunError,
    ExperimentError) is a failed record; anything else raises, and the suite
    runs it again (see the module doc); RunTerminated stops the suite."""
    with _ONE_RUN:
        if spec.run_dir.exists():
            shutil.rmtree(spec.run_dir)
        t0 = time.monotonic()
        try:
            summary = runner(spec.name, spec.opts)
        except RunTerminated:
            raise
        except (RunError, ExperimentError) as e:
            return failed(spec, str(e), time.monotonic() - t0)
        return SuiteRun(spec.name, spec.run_dir, True, time.monotonic() - t0,
                        fidelity_ok=bool(summary.get("fidelity_ok")),
                        verdict=str(summary.get("fidelity_verdict", "")))


def failed(spec: RunSpec, error: str, duration_s: float, attempts: int = 1) -> SuiteRun:
    """The record of a run that did not finish. Its summary.json says so: the
    runner's, if it wrote one with the error, or one written here (so that the
    report lists the run as failed)."""
    f = spec.run_dir / "summary.json"
    try:
        summary = json.loads(f.read_text())
    except (OSError, ValueError):
        summary = None
    if not (isinstance(summary, dict) and not summary.get("ok") and summary.get("error")):
        o = spec.opts
        if not isinstance(summary, dict):
            summary = {"experiment": spec.name, "quick": o.quick, "engine": o.engine,
                       "target": o.target, "hosts": o.hosts, "run_dir": str(spec.run_dir),
                       "overrides": dict(o.overrides), "seed": o.seed}
        summary["ok"] = False
        summary["error"] = error
        try:
            spec.run_dir.mkdir(parents=True, exist_ok=True)
            f.write_text(json.dumps(summary, indent=2, default=str))
        except OSError:
            pass            # the suite's record (suite.json) still has it
    return SuiteRun(spec.name, spec.run_dir, False, duration_s, error=error, attempts=attempts)


def _describe(e: BaseException) -> str:
    text = str(e).strip()
    return f"{type(e).__name__}: {text}" if text else type(e).__name__


def _again(spec: RunSpec, attempt: int, error: str, duration_s: float,
           prog: SuiteProgress) -> SuiteRun | None:
    """After attempt ``attempt`` of ``spec`` failed with ``error``: None if it
    is to run again, else its failed record."""
    if attempt <= RETRIES:
        prog.note(f"[{spec.index}/{prog.total}] {spec.label}: {error.splitlines()[0]}; "
                  "running it again")
        return None
    return failed(spec, f"{error} (tried {attempt} times)", duration_s, attempt)


# ---------------------------------------------------------------------------
# the suite


def run_suite(names: list[str], root: Path, opts: RunOptions, *, repeat: int = 1,
              progress: SuiteProgress | None = None, runner: Runner = run, jobs: int = 1,
              client: Client | None = None) -> list[SuiteRun]:
    """Run every experiment of ``names`` ``repeat`` times into ``root``: in
    this process one after the other, ``jobs`` at a time in processes of
    their own, or on the Dask cluster of ``client``. Returns the records in
    the suite's order; a failed run is recorded, not raised (Ctrl-C and
    SIGTERM, RunTerminated, stop the suite)."""
    specs = plan_runs(names, root, opts, repeat)
    if jobs < 1:
        raise ValueError("jobs must be >= 1")
    for s in specs:
        if s.run_dir.is_dir() and any(s.run_dir.iterdir()):
            raise SuiteError(f"{s.run_dir} exists and is not empty: a suite's runs go to "
                             "new directories")
    prog = progress or SuiteProgress(len(specs))
    root.mkdir(parents=True, exist_ok=True)
    if client is not None:
        return _on_dask(specs, client, runner, prog)
    if jobs > 1 and len(specs) > 1:
        return _in_processes(specs, min(jobs, len(specs)), runner, prog)
    return _in_turn(specs, runner, prog)


def _in_turn(specs: list[RunSpec], runner: Runner, prog: SuiteProgress) -> list[SuiteRun]:
    out: list[SuiteRun] = []
    for spec in specs:
        prog.start(spec.index, spec.label)
        here = replace(spec, opts=replace(spec.opts, echo=prog.line))
        attempt = 1
        while True:
            t0 = time.monotonic()
            try:
                r: SuiteRun | None = replace(execute(here, runner), attempts=attempt)
            except RunTerminated:
                raise
            except Exception as e:
                r = _again(spec, attempt, _describe(e), time.monotonic() - t0, prog)
            if r is not None:
                break
            attempt += 1
        out.append(r)
        prog.done(r, spec.index)
    return out


@contextmanager
def _stopping(stop: Callable[[], None]) -> Iterator[None]:
    """SIGTERM raises here; on any way out but the normal one (Ctrl-C, SIGTERM,
    a fault), ``stop()`` first; SIGTERM then becomes RunTerminated."""
    from testbed.net import SoftSignal, sigterm_raises

    try:
        with sigterm_raises():
            yield
    except BaseException as e:
        old = signal.signal(signal.SIGINT, signal.SIG_IGN)   # a second Ctrl-C waits
        try:
            stop()
        finally:
            signal.signal(signal.SIGINT, old)
        if isinstance(e, SoftSignal):
            raise RunTerminated(f"runs terminated by {e}") from e
        raise


# ---------------------------------------------------------------------------
# in parallel: a process per run


@dataclass
class _Slot:
    spec: RunSpec
    attempt: int
    proc: BaseProcess
    conn: Connection    # the end of its pipe that this process reads
    t0: float


def _in_processes(specs: list[RunSpec], jobs: int, runner: Runner,
                  prog: SuiteProgress) -> list[SuiteRun]:
    import multiprocessing
    from multiprocessing.connection import Connection, wait

    # fork: the run starts at once with what this process has imported,
    # and so does a runner a caller (a test) passes in
    ctx = multiprocessing.get_context("fork")
    todo: deque[tuple[RunSpec, int]] = deque((s, 1) for s in specs)
    running: dict[Connection, _Slot] = {}
    out: dict[int, SuiteRun] = {}
    with _stopping(lambda: _stop([s.proc for s in running.values()])):
        while todo or running:
            while todo and len(running) < jobs:
                spec, attempt = todo.popleft()
                recv, send = ctx.Pipe(duplex=False)
                for stream in (sys.stdout, sys.stderr):   # (or the child writes it again)
                    stream.flush()
                proc = ctx.Process(target=_child, args=(spec, runner, send, os.getpid()),
                                   name=f"testbed-run {spec.label}")
                proc.start()
                send.close()
                running[recv] = _Slot(spec, attempt, proc, recv, time.monotonic())
                if attempt == 1:
                    prog.start(spec.index, spec.label)
            ready = [c for c in wait(list(running), timeout=1.0) if isinstance(c, Connection)]
            if not ready:
                prog.waiting(len(out))
            for ready_conn in ready:
                slot = running[ready_conn]
                kind: str
                payload: str | SuiteRun     # ("done", its record), else a line or why
                try:
                    kind, payload = slot.conn.recv()
                except EOFError:                       # it died before it reported
                    slot.proc.join()
                    kind, payload = "lost", _exit_text(slot.proc.exitcode)
                if kind == "line":
                    prog.line(str(payload), slot.spec.index)
                    continue
                del running[ready_conn]
                slot.conn.close()
                slot.proc.join()
                if isinstance(payload, SuiteRun):      # kind "done"
                    r: SuiteRun | None = replace(payload, attempts=slot.attempt)
                else:
                    r = _again(slot.spec, slot.attempt, payload, time.monotonic() - slot.t0,
                               prog)
                    if r is None:
                        todo.appendleft((slot.spec, slot.attempt + 1))
                        continue
                assert r is not None
                out[slot.spec.index] = r
                prog.done(r, slot.spec.index)
    return [out[s.index] for s in specs]


def _exit_text(code: int | None) -> str:
    if code is not None and code < 0:
        try:
            return f"its process was killed by {signal.Signals(-code).name}"
        except ValueError:
            return f"its process was killed by signal {-code}"
    return f"its process exited (status {code}) without a result"


def _child(spec: RunSpec, runner: Runner, conn: Connection, parent: int) -> None:
    """A forked process's one run; it reports on ``conn``: its lines, then
    ("done", record) or ("raised", what)."""
    # A process group of its own: a Ctrl-C on the terminal reaches the suite's
    # process alone, which passes it on once to each run (_stop), and _stop
    # can kill what a run started if the run outlasts its grace.
    os.setpgrp()
    # _stop ends a run with SIGINT: honour it even where the suite's process
    # was started with SIGINT ignored (a shell's background job, `cmd &`)
    signal.signal(signal.SIGINT, signal.default_int_handler)
    _die_with_parent(parent)
    try:
        r = execute(replace(spec, opts=replace(spec.opts,
                                               echo=lambda s: conn.send(("line", s)))), runner)
        msg: tuple[str, SuiteRun | str] = ("done", r)
    except BaseException as e:
        msg = ("raised", _describe(e))
    try:
        conn.send(msg)
        conn.close()
    except OSError:              # the suite's process is gone
        pass


def _die_with_parent(parent: int) -> None:
    """Linux: SIGINT to this process when the suite's process dies, however
    it dies, so that no run outlives its suite."""
    try:
        import ctypes

        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGINT)   # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass
    if os.getppid() != parent:                  # it died before the line above
        os._exit(1)


def _stop(procs: list[BaseProcess]) -> None:
    """Interrupt every run still going (SIGINT, as Ctrl-C: the run records
    it and stops its own children), then wait for them; kill the process
    group of one that outlasts STOP_GRACE_S."""
    for p in procs:
        if p.is_alive() and p.pid is not None:     # (a started process has its pid)
            os.kill(p.pid, signal.SIGINT)
    deadline = time.monotonic() + STOP_GRACE_S
    for p in procs:
        p.join(max(0.0, deadline - time.monotonic()))
        if p.is_alive() and p.pid is not None:
            os.killpg(p.pid, signal.SIGKILL)
            p.join()


# ---------------------------------------------------------------------------
# on a Dask distributed cluster


def connect(address: str, timeout_s: float | None = None) -> Client:
    """A ``distributed.Client`` of the scheduler at ``address``; SuiteError
    (one line) if the package is missing or no scheduler answers there
    within ``timeout_s`` (default CONNECT_TIMEOUT_S)."""
    try:
        from distributed import Client
        from distributed.comm.addressing import get_address_host_port, parse_address
    except ImportError:
        raise SuiteError("Dask's distributed package is not installed "
                         "(pip install -e '.[cluster]')") from None
    try:
        if parse_address(address)[0] != "inproc":   # (in this process: no host or port)
            get_address_host_port(address)
    except ValueError as e:
        raise SuiteError(f"{address} is not a scheduler's address ({e})") from None
    try:
        return Client(address, timeout=CONNECT_TIMEOUT_S if timeout_s is None else timeout_s,
                      set_as_default=False)
    except Exception as e:
        why = (str(e).strip().splitlines() or [type(e).__name__])[0]
        raise SuiteError(f"no Dask scheduler reachable at {address} ({why})") from None


def _quiet(_line: str) -> None:
    """A run's echo on a worker: its lines are in its progress.log."""


def _on_dask(specs: list[RunSpec], client: Client, runner: Runner,
             prog: SuiteProgress) -> list[SuiteRun]:
    from distributed import as_completed

    submitted: dict[Future[SuiteRun], tuple[RunSpec, int, float]] = {}

    def submit(spec: RunSpec, attempt: int) -> Future[SuiteRun]:
        portable = replace(spec, opts=replace(spec.opts, echo=_quiet))
        f = client.submit(execute, portable, runner, pure=False,
                          key=f"testbed-run-{spec.run_dir.name}-{attempt}-{uuid.uuid4().hex[:8]}")
        submitted[f] = (spec, attempt, time.monotonic())
        return f

    out: dict[int, SuiteRun] = {}
    with _stopping(lambda: client.cancel(list(submitted))):
        pending = as_completed([submit(s, 1) for s in specs], loop=client.loop)
        for f in pending:
            spec, attempt, t0 = submitted.pop(f)
            try:
                r: SuiteRun | None = replace(f.result(), attempts=attempt)
            except Exception as e:    # the run raised, its worker was lost, ...
                r = _again(spec, attempt, _describe(e), time.monotonic() - t0, prog)
                if r is None:
                    pending.add(submit(spec, attempt + 1))
                    continue
            assert r is not None
            if not (spec.run_dir / "summary.json").is_file():
                r = failed(spec, (f"{r.error}; " if not r.ok else "")
                           + f"the worker wrote {spec.run_dir} where this machine does not see "
                           "it: the workers need the report's directory at the same path",
                           r.duration_s, r.attempts)
            out[spec.index] = r
            prog.done(r, spec.index)
    return [out[s.index] for s in specs]


# ---------------------------------------------------------------------------
# the suite's end


def format_table(runs: list[SuiteRun], total_s: float) -> str:
    """The suite's end: one line per run and the total wall time."""
    w = max([len(r.name) for r in runs] + [10])
    lines = [f"{'experiment':<{w}}  time   result"]
    for r in runs:
        res = ("FAILED: " + r.error.splitlines()[0]) if not r.ok else (
            "faithful" if r.fidelity_ok else "NOT faithful: " + r.verdict)
        if r.ok and r.attempts > 1:
            res += f" (at attempt {r.attempts})"
        lines.append(f"{r.name:<{w}}  {_mmss(r.duration_s):>5}  {res}")
    lines.append(f"{'total':<{w}}  {_mmss(total_s):>5}  (wall time, bring-up and analysis "
                 "included)")
    return "\n".join(lines)


class SuiteRunRecord(TypedDict):
    """One run of ``suite.json``."""
    experiment: str
    run_dir: str
    ok: bool
    seconds: float
    fidelity_ok: bool | None
    verdict: str
    error: str
    attempts: int


class SuiteRecord(TypedDict):
    """``suite.json`` (:func:`write_record`)."""
    command: str
    commit: str | None
    dirty: bool | None
    machine: MachineInfo
    total_s: float
    results: list[SuiteRunRecord]


def write_record(path: Path, runs: list[SuiteRun], total_s: float, command: str,
                 load_start: tuple[float, ...] | None = None) -> SuiteRecord:
    """``suite.json``: the command, the commit and machine (with the load
    average at the start, if given, and at the end), each run's time,
    verdict and attempts, and the total wall time (results/reference/run-all-quick.json
    is one; the docs' reference measurements page shows it)."""
    from testbed.bench_hosts import machine_info

    m = machine_info()
    m.pop("load_avg_start", None)   # machine_info's is now, i.e. the end
    rec: SuiteRecord = {
        "command": command,
        "commit": m.pop("commit"), "dirty": m.pop("dirty"),
        "machine": m | {"load_avg_start": [round(x, 2) for x in load_start] if load_start
                        else None,
                        "load_avg_end": [round(x, 2) for x in os.getloadavg()]},
        "total_s": round(total_s, 1),
        "results": [{"experiment": r.name, "run_dir": str(r.run_dir), "ok": r.ok,
                     "seconds": round(r.duration_s, 1), "fidelity_ok": r.fidelity_ok,
                     "verdict": r.verdict, "error": r.error, "attempts": r.attempts}
                    for r in runs],
    }
    path.write_text(json.dumps(rec, indent=1) + "\n")
    return rec
