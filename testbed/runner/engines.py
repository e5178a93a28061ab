"""What executes a plan: the :class:`Engine` protocol, and the engines by
their ``--engine`` name."""

from __future__ import annotations

from pathlib import Path
from typing import Protocol

from testbed.experiment import RunPlan
from testbed.fidelity import Verdict
from testbed.runner.errors import RunError
from testbed.runner.mininet_engine import MininetEngine
from testbed.runner.options import RunOptions
from testbed.runner.progress import Progress
from testbed.runner.records import AppliedCommand, Measured
from testbed.runner.sim_engine import SimEngine


class Engine(Protocol):
    """What executes a RunPlan: the runner keeps parameters, the plan record,
    progress, analysis, plots and the summary once for every engine."""

    name: str

    def check(self, plan: RunPlan, opts: RunOptions) -> None:
        """Raise RunError if this machine or engine cannot run ``plan``."""

    def execute(self, plan: RunPlan, run_dir: Path, opts: RunOptions, prog: Progress,
                applied: list[AppliedCommand], measured: Measured) -> None:
        """Run every phase, writing the run directory's timelines."""

    def fidelity(self, run_dir: Path, plan: RunPlan, opts: RunOptions,
                 measured: Measured) -> Verdict:
        """The run's fidelity verdict (testbed.fidelity's shape)."""


ENGINES: dict[str, Engine] = {"mininet": MininetEngine(), "sim": SimEngine()}


def engine_of(opts: RunOptions) -> Engine:
    e = ENGINES.get(opts.engine)
    if e is None:
        raise RunError(f"unknown engine {opts.engine!r} (known: {', '.join(ENGINES)})")
    return e
