"""The one driver of a simulated run (testbed.sim.driver.run_phases): the
runner's process and the PyPy child get the same outcome from it, word for
word, and the runner raises what stopped the run as it was raised."""

from __future__ import annotations

import dataclasses
import sys
from pathlib import Path
from typing import Any

import pytest

from switches.soft.backends import write_generated
from testbed.experiment import RunPlan, load, make_params
from testbed.runner import RunError
from testbed.sim.driver import FAULT, SimOutcome, run_phases
from testbed.sim.network import compile_plan_program
from testbed.sim.pypy import run_in_child


def _plan(**phase: Any) -> RunPlan:
    mod = load("ring-allreduce")
    plan: RunPlan = mod.plan(make_params(mod, quick=True))
    return dataclasses.replace(plan, phases=[dataclasses.replace(plan.phases[0], **phase)])


def _both(plan: RunPlan, tmp_path: Path) -> tuple[SimOutcome, SimOutcome]:
    """The outcome in this process and in a child (on this CPython, so that
    the records name the same interpreter)."""
    program = compile_plan_program(plan)
    here = run_phases(plan, tmp_path / "here", seed=1, host_links="wire",
                      packet_bytes=plan.topology.packet_bytes, load_program=lambda: program,
                      line=lambda _m: None)
    child = run_in_child(sys.executable, plan, tmp_path / "child", seed=1, host_links="wire",
                         packet_bytes=plan.topology.packet_bytes,
                         program_path=write_generated(program, str(tmp_path / "gen")),
                         line=lambda _m: None)
    return here, child


def test_a_failed_phase_is_the_same_outcome_in_both_processes(tmp_path: Path) -> None:
    here, child = _both(_plan(timeout_s=0.01), tmp_path)
    assert here.error is not None and "timed out after" in here.error
    assert here.record is not None and here.fidelity is not None
    assert any(a["where"] == "topology" for a in here.applied)
    assert here.report() == child.report()
    assert child.exception is None and isinstance(here.exception, RunError)
    with pytest.raises(RunError) as raised:
        here.reraise()
    assert raised.value is here.exception          # as it was raised, with its traceback
    with pytest.raises(RunError, match="timed out after"):
        child.reraise()


def test_a_run_that_cannot_be_built_is_refused_alike_in_both(tmp_path: Path) -> None:
    """SimRun refuses hosts of different line rates (the runner checks this
    before, so only a direct caller meets it here)."""
    plan = _plan()
    phase = plan.phases[0]
    host, job = next(iter(phase.jobs.items()))
    slower = dataclasses.replace(job.transport, scale={
        **job.transport.scale, "slowdown": 2 * job.transport.scale.get("slowdown", 1000.0)})
    plan = dataclasses.replace(plan, phases=[dataclasses.replace(phase, jobs={
        **phase.jobs, host: dataclasses.replace(job, transport=slower)})])
    here, child = _both(plan, tmp_path)
    assert here.error is not None and here.error.startswith("--engine sim: the hosts' line rates")
    assert here.report() == child.report()
    assert here.record is None and here.fidelity is None and not here.applied
    with pytest.raises(RunError, match="^--engine sim: the hosts' line rates") as raised:
        here.reraise()
    assert raised.value.__cause__ is not None


def test_a_fault_is_worded_as_one_and_raised_as_it_was(tmp_path: Path) -> None:
    def missing() -> Any:
        raise FileNotFoundError("no program")

    plan = _plan()
    out = run_phases(plan, tmp_path, seed=1, host_links="wire",
                     packet_bytes=plan.topology.packet_bytes, load_program=missing,
                     line=lambda _m: None)
    assert out.error == f"{FAULT}: FileNotFoundError: no program"
    assert out.record is None and not out.interrupted
    with pytest.raises(FileNotFoundError, match="no program"):
        out.reraise()
