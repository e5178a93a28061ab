"""symphony-two-jobs: two ring jobs on disjoint halves of every leaf, job B
started later, both tracked in the Symphony phases; the final step's span
and the throughput come from the ranks' step events."""

from __future__ import annotations

from pathlib import Path

import pytest
from plot_checks import assert_plots
from ring_runs import write_plan, write_ring_phase

from experiments import symphony_two_jobs as exp
from testbed.timeline import PhaseData


def test_plan_splits_the_leaves_between_two_jobs_and_delays_job_b() -> None:
    assert exp.job_hosts(exp.Params.quick(), "a") == [1, 3]
    p = exp.Params(seeds=1)
    plan = exp.plan(p)
    assert exp.job_hosts(p, "a") == [1, 5, 2, 6] and exp.job_hosts(p, "b") == [3, 7, 4, 8]
    assert plan.topology.fabric is not None and plan.topology.fabric.ecmp
    warm, base, sym = plan.phases
    assert warm.warmup and len(warm.jobs) == 8
    ids = {h: s.collective.job_id for h, s in sym.jobs.items()}  # type: ignore[union-attr]
    assert {ids[f"h{h}"] for h in (1, 2, 5, 6)} != {ids[f"h{h}"] for h in (3, 4, 7, 8)}
    assert len(set(ids.values())) == 2
    # both jobs registered with Symphony, none in the baseline
    assert not any(c.startswith("table_add MyEgress.symphony") for c in base.commands)
    assert base.commands[0] == "table_clear MyEgress.symphony.jobs"
    # each host's job, for hosts that send no job id (rdma_rxe)
    mapped = {c.split()[-3]: int(c.split()[-1]) for c in sym.commands if "set_job" in c}
    assert mapped == {s.ip: s.collective.job_id  # type: ignore[union-attr]
                      for s in sym.jobs.values()}
    assert sum(c.startswith("table_add MyEgress.symphony.jobs") for c in sym.commands) == 2
    delays = {h: s.start_delay_s for h, s in sym.jobs.items()}
    assert delays["h1"] == 0.05 and delays["h3"] == pytest.approx(0.05 + p.delay_b_s)
    assert p.delay_b_s == pytest.approx(0.25 * p.job_wire_s)


@pytest.mark.parametrize("kw", [{"hosts_per_leaf": 3}, {"offset": -1}, {"leaves": 1}])
def test_bad_params_are_refused(kw) -> None:
    with pytest.raises(ValueError):
        exp.Params(**kw)


def test_final_step_span_and_throughput_from_step_events() -> None:
    def ev(kind: str, rank: int, ch: int, step: int, t: int, seq: int = 1) -> dict:
        return {"event": kind, "rank": rank, "channel": ch, "step": step, "t_ns": t,
                "seq": seq, "bytes": 1_000_000}
    data = PhaseData(name="x", dir=Path("."), events={"h1": [
        ev("step_start", 0, 0, 5, 0), ev("step_start", 0, 1, 5, 0),
        ev("step_start", 1, 0, 5, 0),
        ev("step_end", 0, 0, 5, 2_000_000_000), ev("step_end", 0, 1, 5, 3_500_000_000),
        ev("step_end", 1, 0, 5, 2_500_000_000),
        ev("step_end", 1, 0, 4, 1_000_000_000, seq=0)]})
    # the last step of the last collective: 2.0 s .. 3.5 s
    assert exp.final_step_span(data) == pytest.approx(1.5)
    thr = exp.throughput(data, 0, 1.0)
    assert [t for t, _ in thr] == [1.0, 2.0, 3.0]
    assert thr[1][1] == pytest.approx(16.0)        # two 1 MB steps ended in [2, 3) s


def test_plots_of_a_made_up_run(tmp_path: Path) -> None:
    p = exp.Params.quick()
    write_plan(tmp_path, exp, p)
    for scheme in exp.SCHEMES:
        for seed in range(p.seeds):
            for job, start_s in zip(exp.JOBS, (0.0, 0.5), strict=True):
                write_ring_phase(tmp_path, exp.phase_name(scheme, seed), exp.job_hosts(p, job),
                                 iterations=p.iterations, channels=p.channels, start_s=start_s)
    paths = exp.plot(tmp_path)
    assert_plots(paths, tmp_path, ["throughput.png", "final_span.png"])
