"""A phase run again while its own fidelity verdict fails (``--phase-retries``),
the unfaithful tries set aside, never analysed."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from pathlib import Path

from testbed.experiment import PhasePlan, RunPlan
from testbed.fidelity import evaluate_fidelity
from testbed.runner.options import RunOptions
from testbed.runner.progress import Progress
from testbed.runner.records import PhaseRetry

UNFAITHFUL_TRIES_DIR = "phases-unfaithful"


def phase_retriable(phase: PhasePlan) -> bool:
    """Whether a phase can simply be run again: not a warm-up (outside the
    verdict anyway) and not an EPIC group, whose install numbers its nodes
    after the earlier phases' and is not undone."""
    return not phase.warmup and phase.epic_group is None


def run_phase_until_faithful(phase: PhasePlan, plan: RunPlan, run_dir: Path, prog: Progress,
                             opts: RunOptions,
                             run_once: Callable[[PhasePlan], object]) -> list[PhaseRetry]:
    """Run ``phase``; while its own fidelity verdict fails and
    ``opts.phase_retries`` allows, set that try aside (in
    ``phases-unfaithful/NAME.tryK``, never analysed) and run the phase again.
    On a shared machine a phase fails mostly when the hypervisor holds the
    CPUs for a while (the verdict names the stolen time); its next try
    measures the same configuration. Returns one record per set-aside try.

    What a reader must weigh: a retried phase is the first faithful of its
    tries, so a configuration that by itself makes the emulator fall behind
    is measured in its luckier tries; summary.json lists every retry, and the
    tries set aside keep their data."""
    run_once(phase)
    out: list[PhaseRetry] = []
    if opts.phase_retries <= 0 or not phase_retriable(phase):
        return out
    one = dataclasses.replace(plan, phases=(phase,))
    for k in range(1, opts.phase_retries + 2):
        fid = evaluate_fidelity(run_dir, one, opts.switch_target(), opts.hosts)
        if fid["ok"]:
            if k > 1:
                prog.line(f"phase {phase.name}: try {k} faithful")
            break
        if k > opts.phase_retries:
            prog.line(f"phase {phase.name}: try {k} {fid['text']}; no retry left, it stands")
            break
        kept = run_dir / UNFAITHFUL_TRIES_DIR / f"{phase.name}.try{k}"
        kept.parent.mkdir(exist_ok=True)
        (run_dir / "phases" / phase.name).rename(kept)
        out.append({"phase": phase.name, "try": k, "verdict": fid["text"],
                    "kept": str(kept.relative_to(run_dir))})
        prog.line(f"phase {phase.name}: try {k} {fid['text']}; set aside in "
                  f"{kept.relative_to(run_dir)}, running the phase again "
                  f"(retry {k} of {opts.phase_retries})")
        run_once(phase)
    return out
