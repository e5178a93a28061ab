"""The one driver of a simulated run: build the :class:`SimRun`, run its
phases, take its record and fidelity verdict, and say what stopped it.

The runner calls :func:`run_phases` in its own process (``--interpreter
cpython``) and ``python -m testbed.sim.pypy`` calls it in the PyPy child, so
both build the run, apply the switch commands and word their errors the
same way. What differs is only what each does with the :class:`SimOutcome`:
the runner raises the exception it holds, the child reports the rest of it
on its pipe (:meth:`SimOutcome.report`).

This module imports nothing of the simulator at its top: the PyPy child
imports it before it installs the backports that the hosts need.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from switches.soft.runtime.contract import ProgramModule
    from testbed.experiment import RunPlan
    from testbed.fidelity import Verdict
    from testbed.runner.records import AppliedCommand, SimRecord
    from testbed.sim.switch import SimSwitch

FAULT = "the simulation failed"  # how an error that is the simulator's own fault begins


@dataclass
class SimOutcome:
    """What a run of the phases left, whether it finished or not.

    ``record`` and ``fidelity`` are there once the run was built (also when a
    phase failed); ``applied`` lists every switch command as the runner
    records it; ``error`` words what stopped the run (a ``RunError``'s text,
    ``--engine sim: ...`` where the run could not be built, or ``the
    simulation failed: ...`` for a fault of the simulator); ``interrupted``:
    Ctrl-C. ``exception`` is what was raised, for a caller in the same
    process to raise again (it does not cross to the parent)."""

    record: SimRecord | None = None
    fidelity: Verdict | None = None
    applied: list[AppliedCommand] = field(default_factory=list)
    error: str | None = None
    interrupted: bool = False
    exception: BaseException | None = field(default=None, repr=False, compare=False)

    def report(self) -> dict[str, Any]:
        """The fields that go from the child to the parent (JSON)."""
        return {"record": self.record, "fidelity": self.fidelity, "applied": self.applied,
                "error": self.error, "interrupted": self.interrupted}

    def reraise(self) -> None:
        """Raise what stopped the run, as the runner does: the exception
        itself where it was raised in this process, otherwise Ctrl-C as
        KeyboardInterrupt and an error as RunError."""
        from testbed.runner import RunError

        if self.exception is not None:
            raise self.exception
        if self.interrupted:
            raise KeyboardInterrupt
        if self.error:
            raise RunError(self.error)


def run_phases(plan: RunPlan, run_dir: Path, *, seed: int, host_links: str, packet_bytes: int,
               load_program: Callable[[], ProgramModule], line: Callable[[str], None],
               applied: list[AppliedCommand] | None = None) -> SimOutcome:
    """Run every phase of ``plan`` (a RunPlan) into ``run_dir``; never raises.

    ``load_program()`` gives the plan's compiled P4 module; it is called
    while the run is built, so its failure is the run's. Switch commands are
    applied by the runner's own code and appended to ``applied`` (a new list
    if None). Progress goes to ``line``; the wall clock is read for progress
    only."""
    import time

    from switches.targets import SOFT
    from testbed.runner import RunError
    from testbed.runner.switch_commands import _apply_commands
    from testbed.sim.engine import SimRun, SimUnsupported, sim_fidelity

    out = SimOutcome(applied=[] if applied is None else applied)

    def apply(sw: SimSwitch, lines: list[str], where: str) -> None:
        _apply_commands(sw.controller(), lines, SOFT, packet_bytes, where, out.applied)

    sim: SimRun | None = None
    try:
        try:
            sim = SimRun(plan, run_dir, seed=seed, host_links=host_links, apply=apply,
                         line=line, wall=time.monotonic, program=load_program())
        except (SimUnsupported, ValueError) as e:
            raise RunError(f"--engine sim: {e}") from e
        sim.run()
    except RunError as e:
        out.error, out.exception = str(e), e
    except KeyboardInterrupt as e:
        out.interrupted, out.exception = True, e
    except Exception as e:  # a fault of the simulator
        out.error, out.exception = f"{FAULT}: {type(e).__name__}: {e}", e
    except BaseException as e:  # SIGTERM's SoftSignal, SystemExit: the caller raises it again
        out.exception = e
    finally:
        if sim is not None:
            out.record = sim.record()
            out.fidelity = sim_fidelity(sim)
    return out
