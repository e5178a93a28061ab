"""DCQCN reaction point on a fake clock: rate cuts, alpha dynamics, the
FR/AI/HI recovery stages, the rate floor, and how parameters scale."""

from __future__ import annotations

import json
import math

import pytest

from hosts.roce.dcqcn import NIC_DEFAULTS, PAPER_DEFAULTS, Dcqcn, DcqcnParams

R = 10e6  # testbed line rate, bit/s
G = 1 / 256


def ns(t: float) -> int:
    return round(t * 1e9)


def params(**kw) -> DcqcnParams:
    # scale 1 keeps the paper's absolute timers; the rate steps are relative to R.
    base = dict(
        line_rate_bps=R,
        rai_bps=R / 1000,
        rhai_bps=R / 100,
        min_rate_bps=R / 1000,
        alpha_update_period_s=55e-6,
        rate_increase_period_s=55e-6,
        byte_counter_bytes=10_000,
    )
    base.update(kw)
    return DcqcnParams(**base)


def test_cnp_cuts_rate_by_half_alpha() -> None:
    cc = Dcqcn(params(initial_alpha=0.5))
    assert cc.rate_bps == R
    cc.on_cnp(ns(0.0))
    assert cc.rate_bps == pytest.approx(R * (1 - 0.25))
    assert cc.rt == R
    assert cc.alpha == pytest.approx((1 - G) * 0.5 + G)
    a = cc.alpha
    cc.on_cnp(ns(1e-6))
    assert cc.rate_bps == pytest.approx(R * 0.75 * (1 - a / 2))
    assert cc.rt == pytest.approx(R * 0.75)  # Rt <- Rc before the cut


def test_repeated_cnps_drive_alpha_up_and_silence_decays_it() -> None:
    p = params(initial_alpha=0.0, min_rate_bps=1.0)
    cc = Dcqcn(p)
    for i in range(20):
        cc.on_cnp(ns(i * 1e-6))
    assert cc.alpha == pytest.approx(1 - (1 - G) ** 20)
    a20 = cc.alpha
    t_last = 19e-6
    K = p.alpha_update_period_s
    # Just before one period of silence: no decay yet.
    cc.on_timer(ns(t_last + K * 0.99))
    assert cc.alpha == pytest.approx(a20)
    # After 7 silent periods: seven decays.
    cc.on_timer(ns(t_last + K * 7.5))
    assert cc.alpha == pytest.approx(a20 * (1 - G) ** 7)


def test_cnp_restarts_the_alpha_period() -> None:
    p = params(initial_alpha=0.5)
    K = p.alpha_update_period_s
    cc = Dcqcn(p)
    cc.on_cnp(ns(0.0))
    a = cc.alpha
    cc.on_cnp(ns(0.9 * K))  # inside the period: the period restarts here
    a2 = (1 - G) * a + G
    cc.on_timer(ns(1.5 * K))
    assert cc.alpha == pytest.approx(a2)  # no decay at K: a CNP came in that period
    cc.on_timer(ns(1.95 * K))
    assert cc.alpha == pytest.approx(a2 * (1 - G))


def test_idle_flow_decays_alpha_lazily_without_deadlines() -> None:
    p = params(initial_alpha=1.0)
    cc = Dcqcn(p)
    assert cc.next_deadline() is None  # at line rate nothing is pending
    cc.on_cnp(ns(1000 * p.alpha_update_period_s + 1e-9))
    # 1000 silent periods decayed alpha before the cut used it.
    a = (1 - G) ** 1000
    assert cc.rate_bps == pytest.approx(R * (1 - a / 2))


def run_timer_only(cc: Dcqcn, limit: int = 1000) -> list[tuple[str, float, float]]:
    """Fire the rate-increase timer until recovered; (stage, Rt, Rc) per event."""
    seq = []
    for _ in range(limit):
        d = cc.next_deadline()
        if d is None:
            break
        before = (cc.stats.fast_recovery, cc.stats.additive_increase, cc.stats.hyper_increase)
        cc.on_timer(d)
        after = (cc.stats.fast_recovery, cc.stats.additive_increase, cc.stats.hyper_increase)
        if after != before:
            stage = ("FR", "AI", "HI")[
                [a != b for a, b in zip(after, before, strict=True)].index(True)
            ]
            seq.append((stage, cc.rt, cc.rate_bps))
    return seq


def test_timer_recovery_is_five_fast_recovery_steps_then_additive() -> None:
    p = params()
    cc = Dcqcn(p)
    cc.on_cnp(ns(0.0))  # alpha 1: Rc = R/2, Rt = R
    cc.on_cnp(ns(1e-6))  # Rc = R/4, Rt = R/2
    assert (cc.rt, cc.rate_bps) == (pytest.approx(R / 2), pytest.approx(R / 4))
    seq = run_timer_only(cc)
    stages = [s for s, _, _ in seq]
    assert stages[:5] == ["FR"] * 5
    assert "HI" not in stages  # the byte counter never fired
    # Fast recovery halves the gap to Rt, Rt unchanged.
    for k, (_, rt, rc) in enumerate(seq[:5], start=1):
        assert rt == pytest.approx(R / 2)
        assert rc == pytest.approx(R / 2 - (R / 4) / 2**k)
    # Additive increase: Rt += R_AI each step until the line rate caps it.
    _, rt6, rc6 = seq[5]
    assert rt6 == pytest.approx(R / 2 + p.rai_bps)
    assert rc6 == pytest.approx((rt6 + seq[4][2]) / 2)
    n_ai_uncapped = math.ceil((R / 2) / p.rai_bps)
    assert seq[5 + n_ai_uncapped - 1][1] == pytest.approx(R)
    assert cc.rate_bps == R and cc.next_deadline() is None


def test_byte_counter_enables_hyper_increase() -> None:
    p = params(rhai_bps=R / 50)
    cc = Dcqcn(p)
    cc.on_cnp(ns(0.0))
    cc.on_cnp(ns(0.0))
    cc.on_cnp(ns(0.0))  # Rc = R/8, Rt = R/4
    T = p.rate_increase_period_s
    B = p.byte_counter_bytes
    stages = []
    t = 0.0
    for _ in range(6):
        # One byte-counter expiry just before each timer expiry.
        t += T
        s0 = dict(vars(cc.stats))
        cc.on_bytes_sent(B, ns(t - T / 2))
        cc.on_timer(ns(t))
        for name in ("fast_recovery", "additive_increase", "hyper_increase"):
            stages += [name] * (getattr(cc.stats, name) - s0[name])
    # Counters advance together: (BC,T) = (1,0),(1,1),...,(5,5): FR while max <= F = 5.
    assert stages[:10] == ["fast_recovery"] * 10
    assert stages[10] == "additive_increase"  # (6,5): one counter past F
    assert stages[11] == "hyper_increase"  # (6,6): both past F, i = 1
    rt_before = cc.rt
    t += T
    cc.on_bytes_sent(B, ns(t - T / 2))  # (7,6): i = 1
    assert cc.rt == pytest.approx(min(R, rt_before + 1 * p.rhai_bps))
    rt_before = cc.rt
    cc.on_timer(ns(t))  # (7,7): i = 2
    assert cc.rt == pytest.approx(min(R, rt_before + 2 * p.rhai_bps))
    assert cc.stats.hyper_increase == 3


def test_recovery_converges_to_line_rate_and_rate_never_exceeds_it() -> None:
    # Byte counter of about one timer period at line rate, so both counters run.
    p = params(byte_counter_bytes=70)
    cc = Dcqcn(p)
    for i in range(6):
        cc.on_cnp(ns(i * 1e-6))
    t = 1e-5
    dt = 5e-6
    rates = []
    while cc.next_deadline() is not None and t < 1.0:
        cc.on_bytes_sent(int(cc.rate_bps * dt / 8), ns(t))
        cc.on_timer(ns(t))
        rates.append(cc.rate_bps)
        t += dt
    assert cc.rate_bps == R
    assert max(rates) <= R
    assert cc.stats.hyper_increase > 0
    assert all(b >= a for a, b in zip(rates, rates[1:], strict=False))  # no CNP: monotone


def test_min_rate_floor() -> None:
    p = params(min_rate_bps=R / 100)
    cc = Dcqcn(p)
    for i in range(50):
        cc.on_cnp(ns(i * 1e-6))
    assert cc.rate_bps == pytest.approx(R / 100)


def test_rate_reduce_monitor_period_limits_cuts() -> None:
    cc = Dcqcn(params(rate_reduce_monitor_period_s=4e-6))
    cc.on_cnp(ns(0.0))
    cc.on_cnp(ns(2e-6))  # within 4 us of the last cut: counted, no cut
    assert cc.rate_bps == pytest.approx(R / 2)
    assert (cc.stats.cnps, cc.stats.rate_cuts) == (2, 1)
    cc.on_cnp(ns(5e-6))
    assert cc.rate_bps == pytest.approx(R / 4)


def test_late_timer_call_gives_same_rate_as_punctual_calls() -> None:
    p = params()
    a, b = Dcqcn(p), Dcqcn(p)
    for cc in (a, b):
        cc.on_cnp(ns(0.0))
    while (d := a.next_deadline()) is not None and d < ns(20 * p.rate_increase_period_s):
        a.on_timer(d)
    b.on_timer(ns(20 * p.rate_increase_period_s - 1e-9))
    a.on_timer(ns(20 * p.rate_increase_period_s - 1e-9))
    assert (b.rate_bps, b.rt, b.alpha) == pytest.approx((a.rate_bps, a.rt, a.alpha))


def test_scaled_parameters_dilate_time_and_keep_packets_per_period() -> None:
    line = 10e6
    s = 4000.0  # the testbed link emulates 40 Gb/s
    p = DcqcnParams.scaled(line, s)
    assert p.emulated_line_rate_bps == pytest.approx(40e9)
    assert p.alpha_update_period_s == pytest.approx(55e-6 * s)
    assert p.rate_increase_period_s == pytest.approx(PAPER_DEFAULTS["rate_increase_period_s"] * s)
    assert p.cnp_interval_s == pytest.approx(50e-6 * s)
    assert p.byte_counter_bytes == PAPER_DEFAULTS["byte_counter_bytes"]
    assert p.rai_bps == pytest.approx(40e6 / s)
    assert p.rhai_bps / p.rai_bps == pytest.approx(10)
    assert p.min_rate_bps == pytest.approx(PAPER_DEFAULTS["min_rate_bps"] / s)
    assert p.g == G
    # A full-rate sender sees as many packets per timer period as on the 40G NIC.
    pkt = 1024
    assert p.packets_per_timer_period(pkt) == pytest.approx(40e9 * 55e-6 / 8 / pkt)
    assert p.packets_per_byte_counter(pkt) == pytest.approx(10_000_000 / pkt)
    # Rate steps relative to line rate match the NIC's.
    assert p.rai_bps / p.line_rate_bps == pytest.approx(40e6 / 40e9)


def test_scaled_accepts_a_scale_object_presets_and_overrides() -> None:
    class Scale:
        time_factor = 1000.0

    p = DcqcnParams.scaled(10e6, Scale(), preset="nic", rai_bps=10e6)
    assert p.scale == 1000.0
    assert p.rate_increase_period_s == pytest.approx(NIC_DEFAULTS["rate_increase_period_s"] * 1000)
    assert p.byte_counter_bytes == NIC_DEFAULTS["byte_counter_bytes"]
    assert p.rai_bps == pytest.approx(10e6 / 1000)
    with pytest.raises(ValueError):
        DcqcnParams.scaled(10e6, 1000, preset="nope")
    with pytest.raises(TypeError):
        DcqcnParams.scaled(10e6, 1000, bogus=1)


def test_as_dict_is_plain_json_with_mlx5_names() -> None:
    d = DcqcnParams.scaled(10e6, 1000).as_dict()
    back = json.loads(json.dumps(d))
    assert back["rate_increase_period_s"] == pytest.approx(55e-3)
    assert back["mlx5_names"]["rate_increase_period_s"] == "rpg_time_reset"
    assert back["preset"] == "paper" and back["scale"] == 1000.0


def test_plugs_into_the_transport_as_a_rate_controller() -> None:
    from hosts.roce.rate import RateController
    from hosts.roce.scale import Scale

    sc = Scale(slowdown=1000.0, nic_rate_bps=10e9)
    p = DcqcnParams.for_scale(sc)
    assert p.line_rate_bps == pytest.approx(10e6)
    assert p.rate_increase_period_s == pytest.approx(55e-3)
    assert p.cnp_interval_s == pytest.approx(sc.cnp_interval_ns / 1e9)
    cc = Dcqcn(p, now_ns=5_000_000_000)
    assert isinstance(cc, RateController)
    cc.on_cnp(5_000_000_000)
    d = cc.next_deadline()
    assert isinstance(d, int) and d == 5_000_000_000 + 55_000_000
