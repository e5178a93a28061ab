"""Made-up phases of ring AllReduce jobs as the host agents record them (ring
steps, collective ends, result checks, QP reports), for the tests of the
Symphony ring experiments' analyses and plots; and any experiment's saved
plan (``write_plan``)."""

from __future__ import annotations

import json
from collections.abc import Collection, Sequence
from pathlib import Path
from types import ModuleType
from typing import Any

from testbed.experiment import params_to_dict, plan_to_dict

T0 = 10**12  # CLOCK_MONOTONIC ns of the phase's start


def write_plan(run_dir: Path, experiment: ModuleType, params: Any,
               omit: Collection[str] = ()) -> None:
    """The run's plan.json: the experiment's plan for ``params`` (any
    experiment's), saved without the parameters named in ``omit`` (as runs
    saved before those parameters existed)."""
    run_dir.mkdir(parents=True, exist_ok=True)
    saved = {k: v for k, v in params_to_dict(params).items() if k not in omit}
    (run_dir / "plan.json").write_text(json.dumps(
        {"experiment": experiment.NAME, "params": saved,
         **plan_to_dict(experiment.plan(params))}))


def write_ring_phase(run_dir: Path, phase: str, hosts: Sequence[int], *, iterations: int,
                     channels: int = 1, step_s: float = 0.2, lag_s: float = 0.05,
                     start_s: float = 0.0, step_bytes: int = 131072,
                     ce_pkts: int = 10) -> None:
    """One ring job in ``phase``: host ``hosts[r]`` is rank r; each of its
    ``iterations`` collectives runs 2(R-1) steps of ``step_s`` per channel,
    rank r ``r * lag_s`` behind rank 0 (so steps overlap), the first from
    ``start_s``. Every result checks out. Adds to the phase's other jobs."""
    d = run_dir / "phases" / phase
    d.mkdir(parents=True, exist_ok=True)
    ranks = len(hosts)
    steps = 2 * (ranks - 1)
    span_s = steps * step_s + ranks * lag_s

    def ns(s: float) -> int:
        return T0 + int(round(s * 1e9))

    for rank, host in enumerate(hosts):
        evs: list[dict[str, Any]] = []
        for seq in range(iterations):
            begin = start_s + seq * span_s + rank * lag_s
            for step in range(steps):
                t = begin + step * step_s
                for ch in range(channels):
                    tag = {"rank": rank, "size": ranks, "seq": seq, "channel": ch,
                           "step": step, "phase": "RS" if step < ranks - 1 else "AG"}
                    evs.append({"event": "step_start", "t_ns": ns(t), "bytes": step_bytes,
                                **tag})
                    evs.append({"event": "step_end", "t_ns": ns(t + step_s),
                                "t_start_ns": ns(t), **tag})
            end = begin + steps * step_s
            evs.append({"event": "collective_end", "t_ns": ns(end), "t_start_ns": ns(begin),
                        "rank": rank, "size": ranks, "seq": seq})
            evs.append({"event": "collective_check", "t_ns": ns(end), "iteration": seq,
                        "rank": rank, "ok": True})
        evs.append({"event": "qp_report", "t_ns": evs[-1]["t_ns"], "flow": f"rank{rank}",
                    "qp": {"ce_pkts": ce_pkts}})
        path = d / f"h{host}.events.jsonl"
        with path.open("a") as f:
            f.writelines(json.dumps(dict(e, host=f"h{host}")) + "\n" for e in evs)
