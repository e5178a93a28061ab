"""Several experiments in sequence with one progress display (``testbed run all``,
``testbed report``).

Each experiment is an ordinary run (testbed.runner.run) into
``<root>/<name>/`` (``<name>-<k>`` for the k-th repeat), so its directory is
a normal run directory. A run that fails is recorded and the suite goes on;
Ctrl-C stops the suite after the interrupted run has torn its network down.

The display: on a terminal, one status line rewritten in place (which run of
how many, its elapsed time, the suite's, and the run's latest line), plus a
permanent line per finished run; elsewhere (a log, CI) the run's lines with
the same prefix. Every run's own lines are in its ``progress.log``.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import IO, Any

from testbed.experiment import ExperimentError
from testbed.runner import RunError, RunOptions, RunTerminated, run

__all__ = ["SuiteRun", "SuiteProgress", "run_suite", "format_table", "write_record"]


@dataclass
class SuiteRun:
    name: str
    run_dir: Path
    ok: bool
    duration_s: float
    fidelity_ok: bool | None = None
    verdict: str = ""
    error: str = ""


class SuiteProgress:
    """One progress display for a sequence of runs."""

    def __init__(self, total: int, stream: IO[str] | None = None,
                 live: bool | None = None) -> None:
        self.total = total
        self.stream = stream or sys.stdout
        self.live = self.stream.isatty() if live is None else live
        self.t0 = time.monotonic()
        self.index = 0
        self.name = ""
        self.t_run = self.t0
        self._dirty = False

    def start(self, index: int, name: str) -> None:
        self.index, self.name, self.t_run = index, name, time.monotonic()
        self.line(f"starting {name}")

    def prefix(self) -> str:
        now = time.monotonic()
        return (f"[{self.index}/{self.total} {self.name} {_mmss(now - self.t_run)}"
                f" | all {_mmss(now - self.t0)}]")

    def line(self, text: str) -> None:
        """A line of the current run: in place on a terminal, appended elsewhere."""
        msg = f"{self.prefix()} {text.strip()}"
        if self.live:
            width = shutil.get_terminal_size((120, 20)).columns
            self.stream.write("\r\x1b[K" + msg[:width - 1])
            self._dirty = True
        else:
            self.stream.write(msg + "\n")
        self.stream.flush()

    def done(self, r: SuiteRun) -> None:
        """A permanent line for a finished run."""
        if self._dirty:
            self.stream.write("\r\x1b[K")
            self._dirty = False
        state = ("FAILED: " + r.error.splitlines()[0]) if not r.ok else (
            "faithful" if r.fidelity_ok else "NOT faithful")
        self.stream.write(f"[{self.index}/{self.total}] {r.name}: {_mmss(r.duration_s)}, "
                          f"{state}\n")
        self.stream.flush()

    @property
    def elapsed(self) -> float:
        return time.monotonic() - self.t0


def _mmss(seconds: float) -> str:
    m, s = divmod(int(round(seconds)), 60)
    return f"{m}:{s:02d}"


def run_suite(names: list[str], root: Path, opts: RunOptions, *, repeat: int = 1,
              progress: SuiteProgress | None = None,
              runner: Callable[[str, RunOptions], dict] = run) -> list[SuiteRun]:
    """Run every experiment of ``names`` ``repeat`` times, one after the other,
    into ``root``; a failed run is recorded, not raised (Ctrl-C and SIGTERM,
    RunTerminated, stop the suite)."""
    if repeat < 1:
        raise ValueError("repeat must be >= 1")
    jobs = [(n, k) for n in names for k in range(1, repeat + 1)]
    prog = progress or SuiteProgress(len(jobs))
    out: list[SuiteRun] = []
    root.mkdir(parents=True, exist_ok=True)
    for i, (name, k) in enumerate(jobs, 1):
        run_dir = root / (name if repeat == 1 else f"{name}-{k}")
        prog.start(i, name if repeat == 1 else f"{name} #{k}")
        t0 = time.monotonic()
        try:
            # (a simulated run repeats exactly with its seed: each repeat takes the next)
            summary = runner(name, replace(opts, out=run_dir, echo=prog.line,
                                           seed=opts.seed + k - 1))
        except RunTerminated:
            raise
        except (RunError, ExperimentError) as e:
            r = SuiteRun(name, run_dir, False, time.monotonic() - t0, error=str(e))
        else:
            r = SuiteRun(name, run_dir, True, time.monotonic() - t0,
                         fidelity_ok=bool(summary.get("fidelity_ok")),
                         verdict=str(summary.get("fidelity_verdict", "")))
        out.append(r)
        prog.done(r)
    return out


def format_table(runs: list[SuiteRun], total_s: float) -> str:
    """The suite's end: one line per run and the total wall time."""
    w = max([len(r.name) for r in runs] + [10])
    lines = [f"{'experiment':<{w}}  time   result"]
    for r in runs:
        res = ("FAILED: " + r.error.splitlines()[0]) if not r.ok else (
            "faithful" if r.fidelity_ok else "NOT faithful: " + r.verdict)
        lines.append(f"{r.name:<{w}}  {_mmss(r.duration_s):>5}  {res}")
    lines.append(f"{'total':<{w}}  {_mmss(total_s):>5}  (wall time, bring-up and analysis "
                 "included)")
    return "\n".join(lines)


def write_record(path: Path, runs: list[SuiteRun], total_s: float, command: str,
                 load_start: tuple[float, ...] | None = None) -> dict[str, Any]:
    """``suite.json``: the command, the commit and machine (with the load
    average at the start, if given, and at the end), each run's time and
    verdict and the total wall time (results/reference/run-all-quick.json is
    one; the docs' reference measurements page shows it)."""
    from testbed.bench_hosts import machine_info

    m = machine_info()
    m.pop("load_avg_start", None)   # machine_info's is now, i.e. the end
    rec: dict[str, Any] = {
        "command": command,
        "commit": m.pop("commit"), "dirty": m.pop("dirty"),
        "machine": m | {"load_avg_start": [round(x, 2) for x in load_start] if load_start
                        else None,
                        "load_avg_end": [round(x, 2) for x in os.getloadavg()]},
        "total_s": round(total_s, 1),
        "results": [{"experiment": r.name, "run_dir": str(r.run_dir), "ok": r.ok,
                     "seconds": round(r.duration_s, 1), "fidelity_ok": r.fidelity_ok,
                     "verdict": r.verdict, "error": r.error} for r in runs],
    }
    path.write_text(json.dumps(rec, indent=1) + "\n")
    return rec
