"""ReFlex's budget and cycle logic against hand-computed cases, including the
paper's worked numbers (10 Gb/s link, DRR 90/10, T_int 5 ms, 1:1:3).

A fluid model of one link drives the logic: both flows in the high queue
share it equally; a low-priority flexible flow gets 10% beside a backlogged
regular flow; a flow alone gets the whole link (DRR is work-conserving).
"""

from __future__ import annotations

import pytest

from hosts.reflex import SCHEMES, Cycle, FlexibleFlow, FlexibleParams, Phase

MS = 1_000_000
LINK = 10e9 / 8 / 1e9          # 10 Gb/s in bytes per ns
CYCLE = Cycle(t_int_ns=5 * MS)


def gbps(nbytes: float, ns: float) -> float:
    return nbytes * 8 / ns


def fluid(flex: FlexibleFlow, *, t0: int, t1: int, step: int, regular: tuple[int, int] | None,
          flex_bytes: float = 0.0, regular_size: float | None = None,
          ) -> tuple[float, list[tuple[int, float, float, bool]]]:
    """Run the link from t0 to t1; ``regular`` = (start, end) of a backlogged
    regular flow (or it ends after ``regular_size`` bytes). Returns the
    flexible flow's delivered bytes and a trace (t, flex bytes, regular bytes, low)."""
    reg = 0.0
    trace = []
    t = t0
    low = flex.update(t, int(flex_bytes)).low
    while t < t1:
        active = regular is not None and regular[0] <= t < regular[1] and (
            regular_size is None or reg < regular_size)
        if not active:
            f, g = LINK, 0.0
        elif low:
            f, g = 0.1 * LINK, 0.9 * LINK
        else:
            f, g = 0.5 * LINK, 0.5 * LINK
        flex_bytes += f * step
        reg += g * step
        t += step
        trace.append((t, flex_bytes, reg, low))
        d = flex.update(t, int(flex_bytes))
        low = d.low
        if d.done:
            break
    return flex_bytes, trace


def test_one_modulo_of_the_shared_clock_gives_the_phase() -> None:
    assert CYCLE.length_ns == 25 * MS
    expect = [(0, Phase.WARMUP), (5 * MS - 1, Phase.WARMUP), (5 * MS, Phase.MEASURE),
              (10 * MS, Phase.EXPLOIT), (25 * MS - 1, Phase.EXPLOIT), (25 * MS, Phase.WARMUP),
              (1_000 * 25 * MS + 7 * MS, Phase.MEASURE)]
    assert [CYCLE.phase(t) for t, _ in expect] == [p for _, p in expect]
    assert CYCLE.boundaries(37 * MS) == (30 * MS, 35 * MS, 50 * MS)
    assert CYCLE.next_boundary(35 * MS) == 50 * MS
    with pytest.raises(ValueError, match="measure >= 1"):
        Cycle(t_int_ns=MS, measure=0)


def test_the_first_partial_cycle_only_synchronizes() -> None:
    flow = FlexibleFlow(FlexibleParams(alpha=0.5), CYCLE, start_ns=12 * MS)
    assert flow.sync_ns == 25 * MS
    d = flow.update(24 * MS, int(LINK * 12 * MS))      # alone at line rate, before the sync
    assert not d.low and flow.budget == 0 and flow.r_fair is None
    flow.update(35 * MS, int(LINK * 23 * MS))
    assert flow.fair_share_bps == pytest.approx(10e9)  # the measure phase 30..35 ms


def test_budget_accrues_at_the_surplus_over_alpha_fair_share() -> None:
    # Case 1's head start: alone for 2 s, the flexible flow sends at 10 Gb/s
    # against alpha * R_fair = 9 Gb/s from the end of its first measure phase
    # (10 ms): budget = 1 Gb/s x 1.99 s = 248.75 MB, whatever the priority.
    # The expense of an exploit phase is 0.9 x 10 Gb/s x 15 ms = 135 Mbit, 135 ms
    # of surplus: from the exploit phase at 160 ms on, it is low in every one
    # (74 cycles x 15 ms).
    flow = FlexibleFlow(FlexibleParams(alpha=0.9), CYCLE, start_ns=0)
    fluid(flow, t0=0, t1=2000 * MS, step=MS, regular=None)
    assert flow.b_alpha == pytest.approx(0.1 * LINK * 1990 * MS, rel=1e-9)
    assert flow.low_ns == 74 * 15 * MS


def test_case1_regular_flow_gets_7_4_gbps() -> None:
    """Paper, Case 1: with budget the flexible flow is low in every exploit phase;
    60% of the time the regular flow gets 9 Gb/s, 40% it shares: 7.4 Gb/s."""
    flow = FlexibleFlow(FlexibleParams(alpha=0.9), CYCLE, start_ns=0)
    start, end = 2000 * MS, 2000 * MS + 20 * CYCLE.length_ns
    _, trace = fluid(flow, t0=0, t1=end, step=MS // 10, regular=(start, end))
    reg_bytes = trace[-1][2]
    assert gbps(reg_bytes, end - start) == pytest.approx(7.4, abs=1e-6)
    assert flow.b_alpha > 0


def test_case2_flexible_flow_keeps_alpha_of_its_fair_share() -> None:
    """Paper, Case 2: a flexible flow arriving without budget beside a regular flow.
    Hand computation (R_fair 5 Gb/s from 10 ms on, surplus 0.5 Gb/s, expense
    0.9 x 5 Gb/s x 15 ms = 67.5 Mbit): first low phase 160-175 ms (budget 75
    Mbit there), second 285-300 ms; over every whole cycle the cumulative
    delivery stays >= alpha x R_fair x elapsed, and the 2 Gbit flow averages
    between 4.5 and 5 Gb/s."""
    t0 = 2000 * MS
    flow = FlexibleFlow(FlexibleParams(alpha=0.9, size=2_000_000_000 // 8), CYCLE, start_ns=t0)
    _, trace = fluid(flow, t0=t0, t1=t0 + 2000 * MS, step=MS // 10, regular=(0, 10**12))
    lows = []
    for (t, _, _, low), (_, _, _, prev) in zip(trace[1:], trace, strict=False):
        if low and not prev:
            lows.append((t - t0) // MS)
    assert lows[:2] == [160, 285]
    fct = trace[-1][0] - t0
    rate = gbps(2e9 / 8, fct)
    assert 4.5 <= rate <= 4.7
    # Never below alpha of the measured fair share, at any cycle boundary after
    # the first estimate (10 ms).
    for t, fb, _, _ in trace:
        if (t - t0) % CYCLE.length_ns == 0 and t - t0 > 10 * MS:
            assert fb >= 0.9 * 0.5 * LINK * (t - t0 - 10 * MS) - 1


def test_a_flow_without_budget_never_goes_low() -> None:
    flow = FlexibleFlow(FlexibleParams(alpha=1.0), CYCLE, start_ns=0)
    _, trace = fluid(flow, t0=0, t1=500 * MS, step=MS // 10, regular=(0, 10**12))
    assert not any(low for *_, low in trace)
    assert flow.budget == pytest.approx(0.0, abs=1.0)


def test_partial_delivery_r0_against_an_equal_regular_flow() -> None:
    """Fig. 6 at r = 0, alpha = 1: the flexible flow is low in every exploit phase,
    draining B_r at 5 - 1 = 4 Gb/s, while the regular flow gets 185 Mbit per
    cycle (8 Gbit in 43.24 cycles). Delivered then: 43 x 65 Mbit + 30 Mbit
    (6 ms at 5 Gb/s), skipped 43 x 60 Mbit; the rest at 10 Gb/s alone:
    8000 - 2580 = 5420 Mbit delivered, 67.75%."""
    size = 8_000_000_000 // 8
    flow = FlexibleFlow(FlexibleParams(alpha=1.0, r=0.0, size=size), CYCLE, start_ns=0)
    delivered, trace = fluid(flow, t0=0, t1=5000 * MS, step=MS // 10, regular=(0, 10**12),
                             regular_size=size)
    assert flow.skipped == pytest.approx(43 * 60e6 / 8, rel=0.01)
    assert delivered / size == pytest.approx(0.6775, abs=0.005)
    assert delivered + flow.skipped >= size


def test_partial_delivery_never_below_r() -> None:
    size = 8_000_000_000 // 8
    flow = FlexibleFlow(FlexibleParams(alpha=1.0, r=0.8, size=size), CYCLE, start_ns=0)
    delivered, _ = fluid(flow, t0=0, t1=5000 * MS, step=MS // 10, regular=(0, 10**12),
                         regular_size=size)
    assert 0.15 * size < flow.skipped <= 0.2 * size
    assert delivered >= 0.8 * size and delivered + flow.skipped >= size


def test_deficits_drain_b_alpha_then_b_r_then_go_negative() -> None:
    cyc = Cycle(t_int_ns=MS, warmup=0, measure=1, exploit=1)
    flow = FlexibleFlow(FlexibleParams(alpha=1.0, r=0.9, size=1000), cyc, start_ns=0)
    flow.update(MS, 500)                 # measure: R_fair = 500 bytes/ms
    assert flow.r_fair == pytest.approx(500 / MS)
    flow.update(2 * MS, 500 + 560)       # exploit: surplus 60 -> B_alpha 60
    assert (flow.b_alpha, flow.b_r) == (pytest.approx(60), pytest.approx(100))
    flow.update(3 * MS, 1060 + 400)      # measure, deficit 100: B_alpha 60 -> 0, B_r 100 -> 60
    assert (flow.b_alpha, flow.b_r, flow.skipped) == (pytest.approx(0), pytest.approx(60),
                                                       pytest.approx(40))
    assert flow.r_fair == pytest.approx(400 / MS)    # the new estimate
    flow.update(4 * MS, 1460 + 300)      # deficit 100: B_r 60 -> 0, B_alpha -> -40
    assert (flow.b_alpha, flow.b_r) == (pytest.approx(-40), pytest.approx(0))


def test_bad_parameters_are_refused() -> None:
    with pytest.raises(ValueError, match="size must be positive"):
        FlexibleParams(alpha=0.9, r=0.5)
    with pytest.raises(ValueError, match="r must be in"):
        FlexibleParams(alpha=0.9, r=1.5)
    flow = FlexibleFlow(FlexibleParams(alpha=0.9), CYCLE, start_ns=0)
    flow.update(10, 100)
    with pytest.raises(ValueError, match="backwards"):
        flow.update(5, 100)


def test_schemes_are_the_papers() -> None:
    assert set(SCHEMES) == {"reflex", "none", "absolute", "weighted-9:1", "weighted-2:1",
                            "weighted-10:9"}
    w = {n: s.weights for n, s in SCHEMES.items()}
    assert w["weighted-9:1"] == (10, 90) and w["reflex"] == (10, 90)
    assert w["weighted-10:9"] is not None and w["weighted-10:9"][1] * 9 == w["weighted-10:9"][0] * 10
    assert SCHEMES["absolute"].switch_line(3) == "set_priority_weights 3 strict"
