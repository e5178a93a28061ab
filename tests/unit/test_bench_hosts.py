"""The host benchmark's search over link rates and its per-trial judgement."""

from __future__ import annotations

import pytest

from testbed.bench_hosts import judge, search_max_rate


def _threshold(limit: float):
    return lambda rate: rate <= limit


@pytest.mark.parametrize("limit", [1.0, 3.3, 24.9, 25.0, 61.0, 199.0, 420.0, 799.0])
def test_search_finds_the_threshold_within_resolution(limit: float) -> None:
    best, tried = search_max_rate(_threshold(limit), start=25, floor=1, ceiling=800,
                                  resolution=0.1)
    assert best is not None
    assert best <= limit < best * 1.1 or best == 800
    # every verdict it recorded agrees with the predicate, and no rate twice
    assert all(ok == (r <= limit) for r, ok in tried)
    assert len({r for r, _ in tried}) == len(tried)
    assert len(tried) <= 12          # a log-time search, not a sweep


def test_search_edges() -> None:
    best, tried = search_max_rate(lambda r: True, start=25, floor=1, ceiling=800)
    assert best == 800 and [r for r, _ in tried] == [25, 50, 100, 200, 400, 800]
    best, tried = search_max_rate(lambda r: False, start=25, floor=1, ceiling=800)
    assert best is None and tried[-1] == (1, False)
    best, _ = search_max_rate(_threshold(0.5), start=1, floor=1, ceiling=10)
    assert best is None
    with pytest.raises(ValueError, match="floor <= start <= ceiling"):
        search_max_rate(lambda r: True, start=1000, floor=1, ceiling=800)
    with pytest.raises(ValueError, match="resolution"):
        search_max_rate(lambda r: True, start=2, floor=1, ceiling=8, resolution=0)


def test_search_stops_at_a_failure_above_a_pass() -> None:
    """Non-monotone noise: it trusts each verdict once, and the answer is a rate
    that passed with a failure just above it."""
    verdicts = {25: True, 50: False}
    best, tried = search_max_rate(lambda r: verdicts.get(r, r < 40), start=25, floor=1,
                                  ceiling=800, resolution=0.1)
    assert best is not None and 25 <= best < 50
    passed = {r for r, ok in tried if ok}
    failed = {r for r, ok in tried if not ok}
    assert best in passed and min(r for r in failed if r > best) <= best * 1.1


def _summary(**kw):
    base = {"ok": True, "fidelity_ok": True, "single.goodput_fraction": 0.97,
            "single.ce_marked_pkts": 0, "pair.bytes_ok": True}
    base.update(kw)
    return base


def test_judge_lone_qp() -> None:
    assert judge("lone_qp", _summary()) == (True, [])
    ok, why = judge("lone_qp", _summary(**{"single.goodput_fraction": 0.9}))
    assert not ok and "goodput 0.9" in why[0]
    ok, why = judge("lone_qp", _summary(**{"single.ce_marked_pkts": 3}))
    assert not ok and "3 CE-marked" in why[0]
    ok, why = judge("lone_qp", _summary(fidelity_ok=False,
                                        fidelity_verdict="not faithful - failed: x"))
    assert not ok and why == ["fidelity: not faithful - failed: x"]
    ok, why = judge("lone_qp", {"ok": False, "error": "host h1: agent exited\nlog ..."})
    assert not ok and why == ["the run failed: host h1: agent exited"]


def test_judge_pair() -> None:
    assert judge("pair", _summary(**{"single.goodput_fraction": None})) == (True, [])
    ok, why = judge("pair", _summary(**{"pair.bytes_ok": False}))
    assert not ok and "bytes differ" in why[0]
    with pytest.raises(ValueError, match="unknown trial kind"):
        judge("trio", _summary())


def test_roce_basics_runs_a_subset_of_its_phases() -> None:
    from experiments import roce_basics
    from testbed.experiment import ExperimentError, make_params

    p = make_params(roce_basics, overrides={"phases": "pair", "bottleneck_mbps": "100"})
    plan = roce_basics.plan(p)
    assert [ph.name for ph in plan.phases] == ["pair"]
    assert [ph.name for ph in roce_basics.plan(make_params(roce_basics)).phases] == [
        "single", "pair", "loss"]
    with pytest.raises(ExperimentError, match="phases must be distinct names"):
        make_params(roce_basics, overrides={"phases": "single,single"})
    with pytest.raises(ExperimentError, match="phases must be distinct names"):
        make_params(roce_basics, overrides={"phases": "solo"})


def test_a_warmup_phase_runs_both_senders_first_outside_the_verdict() -> None:
    from experiments import roce_basics
    from testbed.experiment import ExperimentError, make_params

    p = make_params(roce_basics, overrides={"phases": "single", "warmup_msgs": "50"})
    phases = roce_basics.plan(p).phases
    assert [ph.name for ph in phases] == ["warmup", "single"]
    warm = phases[0]
    assert warm.warmup and not phases[1].warmup
    senders = sorted(f.flow for spec in warm.jobs.values() for f in spec.flows
                     if f.role == "sender")
    assert senders == ["warmup-a", "warmup-b"]
    assert {f.count for spec in warm.jobs.values() for f in spec.flows} == {50}
    with pytest.raises(ExperimentError, match="warmup_msgs must be >= 0"):
        make_params(roce_basics, overrides={"warmup_msgs": "-1"})


def test_trials_warm_up_only_where_a_jit_runs() -> None:
    from testbed.bench_hosts import WARMUP_PACKETS, warmup_msgs

    assert warmup_msgs("python", "python") == 0
    # 64 packets per 64 KiB message at MTU 1024, split over two senders
    assert warmup_msgs("pypy", "python") == warmup_msgs("python", "pypy") == \
        -(-WARMUP_PACKETS // 128)
    assert warmup_msgs("python", "auto") > 0
    assert warmup_msgs("python", "python", packets=1000) == 8
    assert warmup_msgs("pypy", "pypy", packets=0) == 0
    with pytest.raises(ValueError, match="warm-up packets"):
        warmup_msgs("pypy", "pypy", packets=-1)
