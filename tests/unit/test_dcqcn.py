"""DCQCN reaction point driven through scripted CNP sequences on a fake clock.

Each test compares the whole trajectory (Rc, Rt, alpha, stage) with values
computed by hand from the rules documented in hosts/roce/dcqcn.py, for the
preset that models a ConnectX NIC and for the DCQCN paper's. Presets are used
at scale 1: the NIC's own microseconds and a 40 Gb/s line rate.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from hosts.roce.dcqcn import CONNECTX, DEFAULT_PRESET, ZHU2015, Dcqcn, DcqcnParams

R = 40e9
US = 1000          # ns per microsecond
A0 = 1023 / 1024   # ConnectX initial_alpha_value
G_CX = 5 / 1024    # ConnectX dce_tcp_g = 1019: weight 1019/1024 on the old alpha
G_ZHU = 1 / 256


def connectx(**overrides: Any) -> DcqcnParams:
    return DcqcnParams.scaled(R, 1, "connectx", **overrides)


def zhu2015(**overrides: Any) -> DcqcnParams:
    return DcqcnParams.scaled(R, 1, "zhu2015", **overrides)


def traced(p: DcqcnParams, now_ns: int = 0) -> tuple[Dcqcn, list[dict[str, Any]]]:
    events: list[dict[str, Any]] = []
    return Dcqcn(p, now_ns, on_event=events.append), events


def run_timers(cc: Dcqcn, until_ns: float = float("inf")) -> None:
    while (d := cc.next_deadline()) is not None and d <= until_ns:
        cc.on_timer(d)


# ---------------------------------------------------------------------------
# presets


def test_connectx_preset_maps_the_mlx5_names_and_defaults() -> None:
    p = connectx()
    assert p.preset == "connectx" and DEFAULT_PRESET == "connectx"
    assert p.g == pytest.approx(G_CX)
    assert p.initial_alpha == pytest.approx(A0)
    assert p.alpha_update_period_s == pytest.approx(1e-6)          # dce_tcp_rtt
    assert p.rate_increase_period_s == pytest.approx(300e-6)       # rpg_time_reset
    assert p.byte_counter_bytes == 32767                            # rpg_byte_reset
    assert p.fast_recovery_stages == 1                              # rpg_threshold
    assert (p.rai_bps, p.rhai_bps, p.min_rate_bps) == (5e6, 50e6, 1e6)
    assert p.decrease_gain == 0.5                                   # rpg_gd 11: alpha/2
    assert p.min_decrease_factor == 0.5                             # rpg_min_dec_fac 50 %
    assert p.rate_reduce_monitor_period_s == pytest.approx(4e-6)
    assert p.cnp_interval_s == pytest.approx(4e-6)                  # min_time_between_cnps
    assert (p.alpha_rule, p.clamp, p.hyper_increase) == ("per_period", "after_timer_increase",
                                                         "constant")
    assert dict(p.preset_values) == {k: float(v) for k, v in CONNECTX.items()}
    assert connectx(clamp_tgt_rate=1).clamp == "always"
    assert connectx(clamp_tgt_rate_after_time_inc=0).clamp == "never"


def test_zhu2015_preset_is_the_paper() -> None:
    p = zhu2015()
    assert p.g == G_ZHU and p.initial_alpha == 1.0
    assert p.alpha_update_period_s == pytest.approx(55e-6)
    assert p.rate_increase_period_s == pytest.approx(55e-6)
    assert p.byte_counter_bytes == 10_000_000 and p.fast_recovery_stages == 5
    assert p.rai_bps == 40e6 and p.rate_reduce_monitor_period_s == 0
    assert p.cnp_interval_s == pytest.approx(50e-6)
    assert (p.alpha_rule, p.clamp, p.hyper_increase) == ("per_cnp", "always", "linear")
    assert dict(p.preset_values)["K_us"] == ZHU2015["K_us"]


def test_scaling_dilates_time_divides_rates_and_keeps_bytes() -> None:
    from hosts.roce.scale import Scale

    sc = Scale(slowdown=10_000, nic_rate_bps=40e9)
    p = DcqcnParams.for_scale(sc, "connectx", rpg_ai_rate=10)
    assert p.line_rate_bps == pytest.approx(4e6) and p.scale == 10_000
    assert p.emulated_line_rate_bps == pytest.approx(40e9)
    assert p.rate_increase_period_s == pytest.approx(3.0)
    assert p.cnp_interval_ns == 40_000_000
    assert p.byte_counter_bytes == 32767
    assert p.rai_bps == pytest.approx(10e6 / 10_000)
    assert p.packets_per_byte_counter(1024) == pytest.approx(32767 / 1024)
    back = json.loads(json.dumps(p.as_dict()))
    assert back["preset_values"]["rpg_ai_rate"] == 10 and back["preset"] == "connectx"


def test_bad_presets_and_parameters_are_named() -> None:
    with pytest.raises(ValueError, match="unknown DCQCN preset 'fast'"):
        DcqcnParams.scaled(R, 1, "fast")
    with pytest.raises(ValueError, match=r"connectx: unknown parameter\(s\) \['rai_bps'\]"):
        connectx(rai_bps=1)
    with pytest.raises(ValueError, match="decrease gain"):
        connectx(rpg_gd=9)
    assert DcqcnParams.scaled(R, 1, "paper").preset == "zhu2015"   # older runs' name
    assert DcqcnParams.scaled(R, 1, "nic").preset == "connectx"


# ---------------------------------------------------------------------------
# the first CNP after a long quiet period


@pytest.mark.parametrize("preset", ["connectx", "zhu2015"])
def test_alpha_is_held_until_the_first_cnp(preset: str) -> None:
    cc, events = traced(DcqcnParams.scaled(R, 1, preset))
    cc.on_timer(10 * 10**9)                     # ten quiet seconds
    assert cc.alpha == cc.params.initial_alpha and cc.next_deadline() is None
    cc.on_cnp(10 * 10**9)
    if preset == "connectx":
        # Cut with alpha = 1023/1024; Rt stays (nothing increased yet); the
        # CNP-arrived bit is not set by the first CNP.
        assert cc.rc == pytest.approx(R * (1 - A0 / 2))
        assert cc.alpha == pytest.approx(A0)
    else:
        assert cc.rc == pytest.approx(R / 2)
        assert cc.alpha == pytest.approx((1 - G_ZHU) * 1 + G_ZHU)
    assert cc.rt == R
    assert events == [{"kind": "cut", "t_ns": 10 * 10**9, "rc_bps": cc.rc, "rt_bps": R,
                       "alpha": cc.alpha, "rc_before_bps": R, "deferred": False}]


# ---------------------------------------------------------------------------
# steady CNPs


def test_connectx_steady_cnps_keep_rt_and_update_alpha_per_period() -> None:
    cc, events = traced(connectx())
    rc, a = R, A0
    expect = []
    for k in range(6):
        t = k * 50 * US
        cc.on_cnp(t)
        if k > 0:
            # 50 alpha updates (1 us apart) since the previous CNP: the first
            # counts that CNP (not the very first CNP, which only initialises),
            # the other 49 decay; the last is due with this CNP and comes first.
            a = a * (1 - G_CX) + (G_CX if k > 1 else 0.0)
            a *= (1 - G_CX) ** 49
        rc = max(rc * (1 - a / 2), rc / 2)
        expect.append((t, rc, R, a))
    got = [(e["t_ns"], e["rc_bps"], e["rt_bps"], e["alpha"]) for e in events]
    for g_, x in zip(got, expect, strict=True):
        assert g_ == pytest.approx(x, rel=1e-9)
    assert cc.stats.rate_cuts == 6 and cc.stats.deferred_cnps == 0


def test_zhu2015_steady_cnps_clamp_rt_and_halve_until_the_floor() -> None:
    cc, events = traced(zhu2015())
    for k in range(12):
        cc.on_cnp(k * 50 * US)          # 50 us apart: inside K = T = 55 us
    # alpha stays 1 ((1-g) 1 + g, never a quiet K): Rc halves, Rt = the previous
    # Rc, down to the 40 Mb/s floor (40G / 2^10 = 39 Mb/s).
    rcs = [max(R / 2 ** (k + 1), 40e6) for k in range(12)]
    rts = [R] + rcs[:-1]
    assert [e["rc_bps"] for e in events] == pytest.approx(rcs)
    assert [e["rt_bps"] for e in events] == pytest.approx(rts)
    assert [e["alpha"] for e in events] == pytest.approx([1.0] * 12)
    assert cc.stats.timer_events == 0


# ---------------------------------------------------------------------------
# rate-reduce monitor period


def test_monitor_period_defers_the_cut_and_still_counts_the_cnps() -> None:
    cc, events = traced(connectx())
    cc.on_cnp(0)
    rc1 = R * (1 - A0 / 2)
    cc.on_cnp(1 * US)                 # inside the 4 us period: no cut now
    cc.on_cnp(2500)
    assert cc.rc == pytest.approx(rc1) and cc.next_deadline() == 4 * US
    cc.on_timer(4 * US)
    # Alpha at 1 us (no CNP counted: the first only initialises), 2 us (the CNP
    # at 1 us), 3 us (the CNP at 2.5 us), 4 us (none); then the one cut.
    a = A0 * (1 - G_CX)
    a = a * (1 - G_CX) + G_CX
    a = a * (1 - G_CX) + G_CX
    a = a * (1 - G_CX)
    assert cc.alpha == pytest.approx(a)
    assert [(e["t_ns"], e["deferred"]) for e in events] == [(0, False), (4 * US, True)]
    assert events[1]["rc_bps"] == pytest.approx(rc1 * (1 - a / 2))
    assert events[1]["rt_bps"] == R            # no increase since the last cut
    assert (cc.stats.cnps, cc.stats.rate_cuts, cc.stats.deferred_cnps) == (3, 2, 2)
    cc.on_cnp(9 * US)                 # 5 us after the last cut: cuts at once
    assert cc.stats.rate_cuts == 3 and events[-1]["deferred"] is False


# ---------------------------------------------------------------------------
# recovery back to line rate


def test_connectx_timer_recovery_is_one_fast_recovery_then_additive() -> None:
    cc, events = traced(connectx())
    cc.on_cnp(0)
    run_timers(cc)
    inc = [e for e in events if e["kind"] == "increase"]
    # Gap to R: (A0/2) R, halved by every event; recovered once within 1e-6 of R:
    # 2^k >= A0/2 * 1e6 -> k = 19 timer events, 300 us apart.
    assert len(inc) == 19 and cc.rc == R and cc.next_deadline() is None
    assert [e["t_ns"] for e in inc] == [300 * US * (k + 1) for k in range(19)]
    assert [e["stage"] for e in inc] == ["fast_recovery"] + ["additive"] * 18
    assert all(e["source"] == "timer" and e["rt_bps"] == R for e in inc)
    gaps = [R - e["rc_bps"] for e in inc[:-1]]
    assert gaps == pytest.approx([R * A0 / 2 / 2 ** (k + 1) for k in range(18)])
    # Alpha decayed once per microsecond (no CNP counted) until the last event.
    assert inc[-1]["alpha"] == pytest.approx(A0 * (1 - G_CX) ** (19 * 300))


def test_zhu2015_timer_recovery_is_five_fast_recovery_steps_then_additive() -> None:
    cc, events = traced(zhu2015())
    cc.on_cnp(0)
    run_timers(cc)
    inc = [e for e in events if e["kind"] == "increase"]
    assert len(inc) == 19 and cc.rc == R
    assert [e["stage"] for e in inc] == ["fast_recovery"] * 5 + ["additive"] * 14
    assert [e["t_ns"] for e in inc] == [55 * US * (k + 1) for k in range(19)]
    assert [R - e["rc_bps"] for e in inc[:-1]] == pytest.approx(
        [R / 2 / 2 ** (k + 1) for k in range(18)])
    # Alpha: 1 after the cut, then (1-g) per quiet 55 us.
    assert [e["alpha"] for e in inc[:3]] == pytest.approx([(1 - G_ZHU) ** k for k in (1, 2, 3)])


@pytest.mark.parametrize(("rule", "rt_after"), [("linear", [5.11e5, 5.21e5, 5.41e5]),
                                                 ("constant", [5.11e5, 5.21e5, 5.31e5])])
def test_hyper_increase_linear_in_the_paper_constant_on_the_nic(rule, rt_after) -> None:
    p = DcqcnParams(line_rate_bps=1e6, g=0.5, initial_alpha=1.0, alpha_update_period_s=1.0,
                    rate_increase_period_s=1e-3, byte_counter_bytes=1000,
                    fast_recovery_stages=1, rai_bps=1e3, rhai_bps=1e4, min_rate_bps=1.0,
                    rate_reduce_monitor_period_s=0.0, cnp_interval_s=0.0,
                    hyper_increase=rule)
    cc, events = traced(p)
    cc.on_cnp(0)
    cc.on_cnp(1)                            # Rc = 2.5e5, Rt = 5e5 (clamped), alpha 1
    assert (cc.rc, cc.rt) == (2.5e5, 5e5)
    for k in range(3):                      # bytes mid-period, then the timer
        cc.on_bytes_sent(1000, 1 + (2 * k + 1) * 500 * US)
        cc.on_timer(1 + (k + 1) * 1000 * US)
    inc = [e for e in events if e["kind"] == "increase"]
    assert [(e["source"], e["timer_stage"], e["byte_stage"], e["stage"]) for e in inc] == [
        ("bytes", 0, 1, "fast_recovery"), ("timer", 1, 1, "fast_recovery"),
        ("bytes", 1, 2, "additive"), ("timer", 2, 2, "hyper"),
        ("bytes", 2, 3, "hyper"), ("timer", 3, 3, "hyper")]
    assert [e["rt_bps"] for e in inc] == pytest.approx([5e5, 5e5, 5.01e5] + rt_after)
    rc, rcs = 2.5e5, []
    for e in inc:
        rc = (e["rt_bps"] + rc) / 2
        rcs.append(rc)
    assert [e["rc_bps"] for e in inc] == pytest.approx(rcs)
    assert rcs[:3] == pytest.approx([3.75e5, 4.375e5, 4.6925e5])


def test_connectx_clamps_rt_only_after_a_timer_increase() -> None:
    cc, events = traced(connectx())
    cc.on_cnp(0)                        # Rt = R, Rc = R (1 - A0/2)
    cc.on_bytes_sent(32767, 100 * US)   # a byte-counter increase: fast recovery
    rc = cc.rc
    assert rc == pytest.approx((R + R * (1 - A0 / 2)) / 2)
    cc.on_cnp(200 * US)                 # no timer increase since the cut: Rt kept
    assert events[-1]["rt_bps"] == R and events[-1]["kind"] == "cut"
    cc.on_timer(500 * US)               # the timer fires (300 us after the cut)
    rc = cc.rc
    cc.on_cnp(510 * US)                 # a timer increase happened: Rt <- Rc, then cut
    assert events[-1]["rt_bps"] == pytest.approx(rc)
    cc.on_cnp(520 * US)                 # none since: Rt kept
    assert events[-1]["rt_bps"] == pytest.approx(rc)
    never, ev2 = traced(connectx(clamp_tgt_rate_after_time_inc=0))
    never.on_cnp(0)
    never.on_timer(300 * US)
    never.on_cnp(301 * US)
    assert ev2[-1]["rt_bps"] == R
    always, ev3 = traced(connectx(clamp_tgt_rate=1))
    always.on_cnp(0)
    always.on_cnp(10 * US)
    assert ev3[-1]["rt_bps"] == pytest.approx(R * (1 - A0 / 2))


def test_late_timer_calls_give_the_same_trajectory() -> None:
    a, ea = traced(connectx())
    b, eb = traced(connectx())
    for cc in (a, b):
        cc.on_cnp(0)
    run_timers(a, 3000 * US)
    b.on_timer(3000 * US)               # one late call replays everything in order
    assert eb == ea and (b.rc, b.rt, b.alpha) == (a.rc, a.rt, a.alpha)


def test_plugs_into_the_transport_and_the_np_interval_follows_the_preset() -> None:
    from hosts.roce import Context, SimWire
    from hosts.roce.rate import RateController
    from hosts.roce.scale import Scale

    sc = Scale(slowdown=1000)
    assert isinstance(Dcqcn(DcqcnParams.for_scale(sc)), RateController)
    w = SimWire()
    assert Context(w.provider("10.0.0.1"), sc).cnp_interval_ns == 4 * 1000 * US
    zhu = DcqcnParams.for_scale(sc, "zhu2015").cnp_interval_ns
    assert Context(w.provider("10.0.0.2"), sc, cnp_interval_ns=zhu).cnp_interval_ns == 50 * 1000 * US


def test_hpcc_preset_is_hpcc_simulators_dcqcn_at_10_gbps() -> None:
    p = DcqcnParams.scaled(10e9, 1, "hpcc")
    assert p.preset == "hpcc"
    assert p.g == pytest.approx(1 / 256)                            # EWMA_GAIN
    assert p.alpha_update_period_s == pytest.approx(1e-6)          # ALPHA_RESUME_INTERVAL
    assert p.rate_reduce_monitor_period_s == pytest.approx(4e-6)   # RATE_DECREASE_INTERVAL
    assert p.rate_increase_period_s == pytest.approx(300e-6)       # RP_TIMER
    assert p.byte_counter_bytes == 0 and p.fast_recovery_stages == 1
    # run.py's 5 x bw/25 and 50 x bw/25 Mb/s at 10 Gb/s; MIN_RATE 1000 Mb/s
    assert (p.rai_bps, p.rhai_bps, p.min_rate_bps) == (2e6, 20e6, 1e9)
    assert p.clamp == "after_timer_increase" and p.hyper_increase == "constant"
    with pytest.raises(ValueError, match="hpcc: unknown parameter"):
        DcqcnParams.scaled(10e9, 1, "hpcc", rpg_ai_rate=1)


def test_hpcc_timer_alone_is_fast_recovery_then_additive_then_hyper() -> None:
    line = 10e9
    cc, events = traced(DcqcnParams.scaled(line, 1, "hpcc"))
    cc.on_cnp(0)
    # The byte counter does not run: bytes sent bring no increase.
    cc.on_bytes_sent(10_000_000, 5 * US)
    assert cc.bytes_to_increase() is None
    run_timers(cc)
    inc = [e for e in events if e["kind"] == "increase"]
    assert inc and all(e["source"] == "timer" for e in inc)
    assert [e["stage"] for e in inc[:4]] == ["fast_recovery", "additive", "hyper", "hyper"]
    assert [e["t_ns"] for e in inc[:3]] == [300 * US, 600 * US, 900 * US]
    assert cc.rc == line and cc.next_deadline() is None


def test_hpcc_rate_floor_is_one_gbps() -> None:
    cc, _ = traced(DcqcnParams.scaled(10e9, 1, "hpcc"))
    for k in range(200):
        cc.on_cnp(k * 5 * US)
    assert cc.rc == pytest.approx(1e9)
