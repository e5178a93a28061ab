"""The ReFlex experiments' paper profiles: the paper's network and flows in
its units (§5, §6.3, §6.5), a plan that builds, what they cut declared with
the paper's value, phantom payloads, and the mechanism of the other profiles
untouched."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest
from test_reflex_quick_profiles import MECHANISM

from experiments import reflex_cases as rc
from experiments import reflex_partial as rp
from experiments import reflex_probing as rpr
from experiments import reflex_workload as rw
from experiments._reflex_net import ReflexNetwork, messages
from hosts.agent_spec import MAX_FLOW_BYTES
from testbed.experiment import has_profile, profile_params, scale_record, scaled_down_from
from testbed.runner import RunError
from testbed.runner.environment import plan_for_hosts
from testbed.timeline import payload_efficiency


def _senders(plan: object) -> dict[tuple[str, str], object]:
    return {(ph.name, f.flow): f for ph in plan.phases  # type: ignore[attr-defined]
            for j in ph.jobs.values() for f in j.flows if f.role == "sender"}


def _gbit_of_line_rate(p: rc.ReflexNetwork, nbytes: int) -> float:
    """A flow's bytes as the line-rate volume they take (payload / efficiency)."""
    return nbytes * 8 / payload_efficiency(p.msg_bytes, p.path_mtu) / 1e9


def _assert_the_papers_network(p: rc.ReflexNetwork, sample_us: int = 100) -> None:
    # one 10 Gb/s link, every port and NIC at its rate: no slowdown
    assert p.link_mbps == 10_000 and p.nic_gbps == 10 and p.slowdown == 1
    # T_int 5 ms, 1:1:3: a 25 ms cycle on the run's own clock
    assert p.t_int_s == pytest.approx(0.005) and (p.warmup, p.measure, p.exploit) == (1, 1, 3)
    assert p.cycle_s == pytest.approx(0.025)
    full = type(p)()
    for f in MECHANISM:
        assert getattr(p, f) == getattr(full, f), f
    # samples every 100 us of the run's clock, a fiftieth of T_int
    assert p.sample_interval_us == sample_us


def test_reflex_cases_paper_profile_is_the_papers_use_cases() -> None:
    assert has_profile(rc, "paper")
    p = rc.Params.paper()
    assert profile_params(rc, "paper") == p
    _assert_the_papers_network(p)
    assert p.alpha == 0.9 and p.seeds == 1
    assert p.scheme_list == rc.Params().scheme_list
    plan = rc.plan(p)
    assert len(plan.phases) == 12
    s = _senders(plan)
    for scheme in p.scheme_list:
        later = {1: s[(rc.phase_name(scheme, 1), "regular")],
                 2: s[(rc.phase_name(scheme, 2), "flex")]}
        first = {1: s[(rc.phase_name(scheme, 1), "flex")],
                 2: s[(rc.phase_name(scheme, 2), "regular")]}
        for case in (1, 2):
            # the later flow: the paper's 2 Gbit of line-rate volume, 1 s in
            assert _gbit_of_line_rate(p, later[case].total_bytes) == pytest.approx(2.0, rel=1e-3)
            assert later[case].start_delay_s == pytest.approx(rc.PAPER_PROFILE_HEAD_S)
            # the first flow outlasts it within what a flow may carry; it
            # stops once the later one is received, short of the paper's 40 Gbit
            assert first[case].stop_after == later[case].flow
            assert first[case].total_bytes <= MAX_FLOW_BYTES
            assert _gbit_of_line_rate(p, first[case].total_bytes) < rc.PAPER_CASES["long_gbit"]
            assert (first[case].total_bytes
                    > messages(p, 200) * p.msg_bytes + later[case].total_bytes)
    assert s[("case1-reflex", "flex")].flexible["alpha"] == 0.9
    assert s[("case1-reflex", "flex")].flexible["t_int_us"] == pytest.approx(5000)
    assert plan.info["case1_head_intervals"] == pytest.approx(200)
    # what the paper profile cuts, with the paper's own values (2 s)
    cuts = scaled_down_from(rc)
    assert {k: v.paper for k, v in cuts.items()} == {
        "case1_head_cycles": pytest.approx(80), "case2_head_cycles": pytest.approx(80),
        "scheme_head_intervals": pytest.approx(400)}
    assert all("2 GiB" in v.reason for v in cuts.values())
    # case 1's 1 s covers what the paper's budget rule needs (0.74 s)
    assert rc.case1_head_intervals(p) * p.t_int_s == pytest.approx(0.7375)
    assert rc.case1_head_intervals(p) < p.case1_head_cycles * p.cycle_intervals
    rec = scale_record(rc, "paper", p)
    assert rec is not None and rec["case2_head_cycles"]["run"] == pytest.approx(40)


def test_reflex_cases_quick_and_full_keep_the_derived_head_start() -> None:
    # case1_head_cycles = 0: the head start the paper's budget rule needs
    for p in (rc.Params(), rc.Params.quick()):
        assert p.case1_head_cycles == 0
        assert rc.plan(p).info["case1_head_intervals"] == pytest.approx(
            rc.case1_head_intervals(p))
    with pytest.raises(ValueError, match="case1_head_cycles"):
        rc.Params(case1_head_cycles=-1)


def test_reflex_partial_paper_profile_is_fig6s_setup() -> None:
    assert has_profile(rp, "paper")
    p = rp.Params.paper()
    _assert_the_papers_network(p)
    assert p.alpha == 1.0 and p.seeds == 1
    assert p.r_list == [round(0.1 * i, 1) for i in range(11)]
    assert p.flow_cycles == pytest.approx(32)        # 8 Gbit at 10 Gb/s: 0.8 s
    plan = rp.plan(p)
    assert [ph.name for ph in plan.phases] == [rp.r_key(r) for r in p.r_list]
    assert plan.info["line_rate_s"] == pytest.approx(0.8, rel=1e-3)
    s = _senders(plan)
    for r in p.r_list:
        flex, reg = s[(rp.r_key(r), "flex")], s[(rp.r_key(r), "regular")]
        assert flex.total_bytes == reg.total_bytes <= MAX_FLOW_BYTES
        assert _gbit_of_line_rate(p, flex.total_bytes) == pytest.approx(8.0, rel=1e-3)
        assert flex.start_delay_s == reg.start_delay_s == 0
        assert flex.flexible["r"] == r and flex.flexible["alpha"] == 1.0
    assert scaled_down_from(rp) == {}                # nothing cut


def test_reflex_probing_paper_profile_runs_the_full_sweep_at_10_gbps() -> None:
    assert has_profile(rpr, "paper")
    p = rpr.Params.paper()
    _assert_the_papers_network(p)
    assert p.alpha == 0.9                            # Fig. 9
    full = rpr.Params()
    # what the paper does not give stays the full profile's
    for f in ("exploits", "n_regular", "regular_intervals", "long_cycles", "seeds"):
        assert getattr(p, f) == getattr(full, f), f
    plan = rpr.plan(p)
    assert len(plan.phases) == 15
    # the same phases as the full profile's, 500 times faster: T_int 5 ms
    fplan = rpr.plan(full)
    for ph, fph in zip(plan.phases, fplan.phases, strict=True):
        assert ph.name == fph.name
        s, fs = _senders_of(ph), _senders_of(fph)
        assert {k: v.total_bytes for k, v in s.items()} == {
            k: v.total_bytes for k, v in fs.items()}
        for k, v in s.items():
            assert v.start_delay_s == pytest.approx(fs[k].start_delay_s / 500)
    assert plan.info["budget_intervals"]["d3"] * p.t_int_s == pytest.approx(0.160)
    assert scaled_down_from(rpr) == {}


def _senders_of(phase: object) -> dict[str, object]:
    return {f.flow: f for j in phase.jobs.values()  # type: ignore[attr-defined]
            for f in j.flows if f.role == "sender"}


# ---------------------------------------------------------------------------
# every ReFlex paper profile: phantom payloads, refused on rxe hosts


@pytest.mark.parametrize("mod", [rc, rp, rpr, rw], ids=lambda m: m.NAME)
def test_every_reflex_paper_profile_runs_phantom_payloads(mod: object) -> None:
    paper = mod.Params.paper()  # type: ignore[attr-defined]
    assert paper.payload == "phantom"
    assert mod.Params().payload == mod.Params.quick().payload == "real"  # type: ignore[attr-defined]
    small = dataclasses.replace(paper, seeds=1) if mod is rw else paper
    plan = mod.plan(small)  # type: ignore[attr-defined]
    flows = [f for ph in plan.phases for j in ph.jobs.values() for f in j.flows]
    assert flows and {f.payload for f in flows} == {"phantom"}
    with pytest.raises(RunError, match=r"phantom payloads need udp-provider hosts.*real "
                                       "payloads$"):
        plan_for_hosts(plan, "rxe")


def test_a_reflex_network_takes_real_or_phantom_payloads() -> None:
    assert ReflexNetwork(payload="phantom").payload == "phantom"
    with pytest.raises(ValueError, match=r"^payload 'ghost': one of real, phantom$"):
        ReflexNetwork(payload="ghost")


# ---------------------------------------------------------------------------
# reflex-workload (§6.5)


def test_reflex_workload_paper_profile_is_section_6_5() -> None:
    assert has_profile(rw, "paper")
    p = rw.Params.paper()
    assert profile_params(rw, "paper") == p
    # samples every 1 ms, not 100 us: 16 s phases
    _assert_the_papers_network(p, sample_us=1000)
    w = rw.PAPER_WORKLOAD
    # one ToR of 20 servers: 19 send to the receiver whose downlink is modelled
    assert w["servers"] == 20 and p.senders == 19 and p.receiver == 20
    assert rw.plan(dataclasses.replace(p, seeds=1)).topology.n_hosts == 20
    # 250 MB flows: 2 Gbit, 8 cycles of the 10 Gb/s link
    assert w["flexible_mb"] == 250 and p.flexible_cycles == pytest.approx(8.0)
    assert _gbit_of_line_rate(p, rw.flow_count(p) * p.msg_bytes) == pytest.approx(2.0,
                                                                                 rel=1e-3)
    assert (p.load, p.flexible_share) == (0.4, 0.5)
    # 16 s: 1 s warm-up, 10 s measured, 5 s cool-down; three seeds
    assert (p.run_warmup_ms, p.run_measure_ms, p.run_cooldown_ms) == (1000, 10_000, 5000)
    assert p.run_s == pytest.approx(16.0) and p.measure_window_s == (1.0, 11.0)
    assert p.seeds == 3 and p.exploit == 3
    assert p.payload == "phantom"
    # the sweeps cut to the baselines and alpha 0.8, what the claims judge
    assert rw.scheme_list(p) == ["none", "weighted-9:1", "reflex-a080"]
    per_scheme = [c for c in rw.CLAIMS if not c.key.startswith("w1_exploit.")]
    assert {c.key.split(".")[1] for c in per_scheme} <= set(rw.scheme_list(p))
    # Fig. 8: workload 1 also runs ReFlex at alpha 0.8 with D_exploit 1 and 5
    assert rw.exploit_sweep(p) == [(1, "reflex-a080-e1"), (3, "reflex-a080"),
                                   (5, "reflex-a080-e5")]
    assert rw.w1_scheme_list(p) == ["none", "weighted-9:1", "reflex-a080", "reflex-a080-e1",
                                    "reflex-a080-e5"]
    cuts = scaled_down_from(rw)
    assert set(cuts) == {"alphas", "rs"}
    sweep = "0,0.1,0.2,0.3,0.4,0.5,0.6,0.7,0.8,0.9,1"
    assert cuts["alphas"].paper == cuts["rs"].paper == sweep
    assert all("216 phases" in v.reason and "alpha 0.8" in v.reason for v in cuts.values())
    rec = scale_record(rw, "paper", p)
    assert rec is not None and rec["alphas"] == {"paper": sweep, "run": "0.8",
                                                 "reason": cuts["alphas"].reason}
    assert rec["rs"]["run"] == ""


def test_reflex_workload_paper_arrivals_load_one_downlink_over_16_s() -> None:
    p = dataclasses.replace(rw.Params.paper(), run_measure_ms=400_000.0)
    a = rw.arrivals(p, 0)
    # each class its own Poisson process at 20% of the link: a 250 MB flow
    # (0.2 s at line rate) per second, the paper's 20 flows/s over 20 links
    span = p.run_s
    for kind in ("regular", "flexible"):
        n = sum(x.kind == kind for x in a)
        assert n / span == pytest.approx(1.0, rel=0.1), kind
    assert [x.start_s for x in a] == sorted(x.start_s for x in a) and a[-1].start_s < span
    assert {x.sender for x in a} == set(range(1, 20))
    # only the arrivals in the measure window count
    q = rw.Params.paper()
    a = rw.arrivals(q, 0)
    m = rw.measured(q, a)
    assert m and all(1.0 <= x.start_s < 11.0 for x in m)
    assert len(m) < len(a) and any(x.start_s >= 11.0 for x in a)
    # workload 2: 100 kB flows at 20% of the link, over the whole run
    d = rw.w2_arrivals(q, 0)
    _flex, reg_rate = rw.w2_rates(q)
    assert d.window_s == pytest.approx(16.0)
    assert len(d.regular) / 16.0 == pytest.approx(reg_rate, rel=0.02)
    assert reg_rate * q.w2_msg_bytes * 8 / q.payload_bps == pytest.approx(0.2)
    assert all(x.start_s < 16.0 for x in d.flexible + d.regular)


@pytest.mark.parametrize("kw, msg", [
    ({"senders": 20}, r"^senders must be 1\.\.19 \(the paper's ToR has 20 servers"),
    ({"run_measure_ms": -1.0}, "must be >= 0"),
    ({"run_warmup_ms": 1000.0}, "need run_measure_ms > 0"),
    ({"run_cooldown_ms": 5000.0}, "need run_measure_ms > 0"),
])
def test_reflex_workload_refuses_bad_runs(kw: dict[str, Any], msg: str) -> None:
    with pytest.raises(ValueError, match=msg):
        rw.Params(**kw)
    rw.Params(senders=19)
    rw.Params(run_measure_ms=1000.0)


def test_reflex_workload_refuses_a_window_no_flow_arrives_in() -> None:
    p = dataclasses.replace(rw.Params.paper(), run_warmup_ms=0.0, run_measure_ms=1.0,
                            run_cooldown_ms=0.0, seeds=1)
    with pytest.raises(ValueError, match=r"^workload 1, seed 0: no \w+ flow arrives in the "
                                         r"measure window \(lengthen run_measure_ms\)$"):
        rw.plan(p)
