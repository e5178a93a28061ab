"""Token-bucket pacer on a fake clock: long-run rate, burst limit, rate
changes, and the lateness report."""

from __future__ import annotations

import pytest

from hosts.roce.pacing import HostLine, Pacer


def drive(p: Pacer, n: int, size: int, t: float = 0.0, delay=lambda i: 0.0) -> float:
    for i in range(n):
        t = p.next_send_time(size, t) + delay(i)
        p.consume(size, t)
    return t


@pytest.mark.parametrize("rate", [2e6, 10e6, 40e6])
def test_achieves_configured_rate_within_one_percent(rate: float) -> None:
    p = Pacer(rate, burst_bytes=1100)
    drive(p, 5000, 1060)
    assert p.achieved_rate_bps() == pytest.approx(rate, rel=0.01)
    assert p.lateness.max_s == 0.0


def test_packets_bigger_than_the_bucket_still_hold_the_rate() -> None:
    p = Pacer(10e6, burst_bytes=500)
    drive(p, 2000, 1500)
    assert p.achieved_rate_bps() == pytest.approx(10e6, rel=0.01)


def test_burst_is_at_most_one_bucket_after_idle() -> None:
    p = Pacer(10e6, burst_bytes=1100)
    drive(p, 10, 1000)
    t = 10.0  # long idle: the bucket holds at most one packet
    assert p.next_send_time(1000, t) == t
    p.consume(1000, t)
    nxt = p.next_send_time(1000, t)
    assert nxt > t
    assert nxt - t == pytest.approx((1000 - 100) * 8 / 10e6)


def test_rate_change_takes_effect() -> None:
    p = Pacer(10e6, burst_bytes=1100)
    t = drive(p, 1000, 1000)
    p.set_rate(2.5e6, t)
    start = p.next_send_time(1000, t)
    p2_first = start
    p.consume(1000, start)
    t2 = drive(p, 1000, 1000, start)
    assert 1000 * 1000 * 8 / (t2 - p2_first) == pytest.approx(2.5e6, rel=0.01)


def test_lateness_is_measured_against_the_schedule() -> None:
    rate = 10e6
    p = Pacer(rate, burst_bytes=1100)
    # Every 10th send leaves 2 ms after its scheduled time (a stalled loop).
    drive(p, 1000, 1000, delay=lambda i: 2e-3 if i % 10 == 9 else 0.0)
    lat = p.lateness.as_dict()
    assert lat["sends"] == 1000
    assert lat["late_sends"] == 100  # threshold = one bucket time = 0.88 ms
    assert lat["max_s"] == pytest.approx(2e-3)
    assert lat["mean_s"] == pytest.approx(2e-4)
    assert lat["p99_s"] >= 2e-3
    # The pacer never lets the sender exceed its rate to catch up beyond one packet.
    assert p.achieved_rate_bps() < rate
    assert p.report()["lateness"]["late_fraction"] == pytest.approx(0.1)


def test_unscheduled_send_counts_as_on_time() -> None:
    p = Pacer(10e6)
    p.consume(100, 5.0)
    assert p.lateness.sends == 1 and p.lateness.max_s == 0.0


def test_transport_protocol_with_rate_from_the_controller() -> None:
    from hosts.roce.rate import Pacer as PacerProtocol

    p = Pacer(burst_bytes=1100)
    assert isinstance(p, PacerProtocol)
    t = 1_000_000_000
    rate = 5e6
    for i in range(3000):
        if i == 1500:
            rate = 1e6  # the controller cut the rate
        t = max(t, p.next_send_ns(1000, t, rate))
        p.on_sent(1000, t, rate)
        if i == 1499:
            t_cut = t
    assert isinstance(p.next_send_ns(1000, t, rate), int)
    assert 1499 * 1000 * 8e9 / (t_cut - p.first_send_ns) == pytest.approx(5e6, rel=0.01)
    assert 1500 * 1000 * 8e9 / (t - t_cut) == pytest.approx(1e6, rel=0.01)
    # An infinite rate means unpaced.
    q = Pacer()
    assert q.next_send_ns(1000, 7, float("inf")) == 7


def test_asking_again_does_not_move_the_schedule() -> None:
    # The transport's loop asks, sleeps until the answer, wakes 3 ms late and
    # asks again: the lateness is against the first answer, not the second.
    p = Pacer(burst_bytes=1000)
    rate = 8e6  # 1000 bytes per ms
    p.next_send_ns(1000, 0, rate)
    p.on_sent(1000, 0, rate)
    s = p.next_send_ns(1000, 100_000, rate)
    assert s == 1_000_000
    wake = s + 3_000_000
    assert p.next_send_ns(1000, wake, rate) == s
    p.on_sent(1000, wake, rate)
    assert p.lateness.max_s == pytest.approx(3e-3)
    # After an idle second a new packet is due the moment it is asked about.
    t = wake + 1_000_000_000
    assert p.next_send_ns(1000, t, rate) == t
    p.on_sent(1000, t, rate)
    assert p.lateness.sends == 3 and p.lateness.late_sends == 1


def test_a_rate_increase_while_waiting_keeps_the_packets_schedule() -> None:
    # DCQCN raises the rate (1000 -> 1100 bytes per ms) while the sender
    # sleeps until its next packet is due at the old rate: woken exactly then,
    # the packet is on time, not late by the whole millisecond since it was
    # first asked about.
    p = Pacer(burst_bytes=1000, late_threshold_packets=0.5)
    p.next_send_ns(1000, 0, 8e6)
    p.on_sent(1000, 0, 8e6)
    s = p.next_send_ns(1000, 0, 8e6)
    assert s == 1_000_000
    assert p.next_send_ns(1000, s, 8.8e6) == s
    p.on_sent(1000, s, 8.8e6)
    assert p.lateness.max_s == 0.0 and p.lateness.late_sends == 0
    # Woken 0.3 ms late, it is 0.3 ms late whatever the rate did meanwhile.
    s2 = p.next_send_ns(1000, s, 8.8e6)
    assert s2 == s + 909_091           # the next packet at the new rate
    p.on_sent(1000, s2 + 300_000, 9.6e6)
    assert p.lateness.max_s == pytest.approx(3e-4)
    # A rate change before the packet is due still moves its schedule.
    t = s2 + 300_000
    due = p.next_send_ns(1000, t, 9.6e6)
    assert due == t + 833_334
    assert p.next_send_ns(1000, t + 100_000, 4.8e6) > due


# ---- run-ahead mode: the host's qdisc serialises at the line rate ----
LINE = 200e6
FRAME = 1100
PKT_S = FRAME * 8 / LINE


def drive_counting_wakes(p: Pacer, n: int) -> int:
    """Send ``n`` frames as soon as the pacer allows; how many times the sender
    had to wait."""
    t, wakes = 0.0, 0
    for _ in range(n):
        nxt = p.next_send_time(FRAME, t)
        if nxt > t:
            t, wakes = nxt, wakes + 1
        p.consume(FRAME, t)
    return wakes


def ahead_pacer(packets: int = 4) -> Pacer:
    return Pacer(LINE, burst_bytes=FRAME, line_bps=LINE, ahead_bytes=packets * FRAME,
                 late_threshold_packets=1.0)


def test_run_ahead_fills_the_qdisc_then_waits_until_half_has_drained() -> None:
    p = ahead_pacer(4)
    t = 1.0
    sent = 0
    while p.next_send_time(FRAME, t) <= t:
        p.consume(FRAME, t)
        sent += 1
    assert sent == 4                                   # one wake-up, four packets
    assert p.next_send_time(FRAME, t) == pytest.approx(t + 2 * PKT_S, abs=1e-9)
    assert p.lateness.late_sends == 0


def test_only_a_bucket_s_send_time_must_be_met_exactly() -> None:
    """A run-ahead refill point tolerates a late wake-up (half the queue is
    still draining), so the host need not poll for it; a token bucket's send
    time, below the line rate, is a packet due on the wire."""
    p = ahead_pacer(4)
    t = 1.0
    while p.next_send_time(FRAME, t) <= t:
        p.consume(FRAME, t)
    assert p.next_send_time(FRAME, t) > t and p.exact is False
    p.set_rate(LINE / 2, round(t * 1e9))                # below the line: the bucket paces
    t += 10 * PKT_S
    assert p.next_send_time(FRAME, t) <= t
    p.consume(FRAME, t)
    assert p.next_send_time(FRAME, t) > t and p.exact is True


def test_run_ahead_holds_the_line_rate_and_wakes_once_per_half_queue() -> None:
    p = ahead_pacer(4)
    wakes = drive_counting_wakes(p, 4000)
    assert p.achieved_rate_bps() == pytest.approx(LINE, rel=0.01)
    assert wakes == pytest.approx(4000 / 2, rel=0.01)
    assert p.lateness.late_sends == 0


def test_run_ahead_lateness_is_the_time_the_wire_stood_idle() -> None:
    p = ahead_pacer(4)
    t = 0.0
    for _ in range(4):
        p.consume(FRAME, p.next_send_time(FRAME, t))
    wake = p.next_send_time(FRAME, t)                 # two packets still queued then
    # Late by one packet time: the queue still held one, the wire never idled.
    p.consume(FRAME, wake + PKT_S)
    assert p.lateness.last_s == 0.0
    # The queue now drains at 5 packet times; the sender comes back 3 after.
    p.next_send_time(FRAME, wake + PKT_S)
    p.consume(FRAME, 8 * PKT_S)
    assert p.lateness.last_s == pytest.approx(3 * PKT_S)
    assert p.lateness.late_sends == 1


def test_below_the_line_rate_the_bucket_paces_one_packet_at_a_time() -> None:
    p = ahead_pacer(8)
    t = 0.0
    p.set_rate(LINE / 2, 0)
    p.consume(FRAME, p.next_send_time(FRAME, t))
    nxt = p.next_send_time(FRAME, t)
    assert nxt == pytest.approx(FRAME * 8 / (LINE / 2))    # no run-ahead at a DCQCN rate
    drive(p, 2000, FRAME, nxt)
    assert p.achieved_rate_bps() == pytest.approx(LINE / 2, rel=0.01)


def test_what_was_queued_ahead_delays_the_first_packet_after_a_cut() -> None:
    p = ahead_pacer(4)
    for _ in range(4):
        p.consume(FRAME, 0.0)                           # four packets in the qdisc
    p.set_rate(LINE / 2, 0)
    # The bucket owes the queued bytes (less its own one packet) at the new rate.
    assert p.next_send_time(FRAME, 0.0) == pytest.approx(4 * FRAME * 8 / (LINE / 2), rel=0.01)


def test_run_ahead_settings_are_checked() -> None:
    with pytest.raises(ValueError, match="line_bps"):
        Pacer(LINE, burst_bytes=FRAME, ahead_bytes=4 * FRAME)
    with pytest.raises(ValueError, match="full bucket"):
        Pacer(LINE, burst_bytes=2 * FRAME, line_bps=LINE, ahead_bytes=FRAME)


# ---- shaped mode: the kernel paces each QP at its DCQCN rate (an HTB class) ----
class FakeClass:
    """A QP's HTB class: records the rates the pacer gives it."""

    skb_priority = 0x10010

    def __init__(self) -> None:
        self.rates: list[float] = []

    def set_rate(self, rate_bps: float) -> None:
        self.rates.append(rate_bps)


def shaped_pacer(packets: int = 4, line: HostLine | None = None) -> tuple[Pacer, FakeClass]:
    cls = FakeClass()
    return Pacer(LINE, burst_bytes=FRAME, line_bps=LINE, ahead_bytes=packets * FRAME,
                 late_threshold_packets=1.0, shaped=cls, host_line=line), cls


def test_shaped_pacer_runs_ahead_below_the_line_rate_and_sets_the_class_rate() -> None:
    p, cls = shaped_pacer(4)
    assert p.skb_priority == 0x10010
    p.set_rate(LINE / 4, 0)
    assert cls.rates == [LINE / 4]
    wakes = drive_counting_wakes(p, 4000)
    # The kernel spaces the frames at the QP's rate; the sender wakes once per
    # half queue (two packets), not once per packet.
    assert p.achieved_rate_bps() == pytest.approx(LINE / 4, rel=0.01)
    assert wakes == pytest.approx(4000 / 2, rel=0.01)
    assert p.lateness.late_sends == 0


def test_a_cut_slows_what_is_queued_in_the_class_at_once() -> None:
    p, cls = shaped_pacer(4)
    for _ in range(4):
        p.consume(FRAME, 0.0)                       # four line-rate packets queued
    assert p.departure_ns() == round(4 * PKT_S * 1e9)
    p.next_send_ns(FRAME, round(PKT_S * 1e9), LINE / 2)   # a cut after one has left
    assert cls.rates == [LINE / 2]
    # The three still queued now drain at half the rate: six line packet times.
    assert p.departure_ns() == pytest.approx((PKT_S + 6 * PKT_S) * 1e9, abs=2)
    # A rate back at the line is given to the class once, not at every call.
    p.next_send_ns(FRAME, round(2 * PKT_S * 1e9), LINE)
    p.next_send_ns(FRAME, round(2 * PKT_S * 1e9), LINE)
    assert cls.rates == [LINE / 2, LINE]


def test_the_qps_of_a_host_share_its_line() -> None:
    line = HostLine(LINE)
    a, _ = shaped_pacer(4, line)
    b, _ = shaped_pacer(4, line)
    for _ in range(2):
        a.consume(FRAME, 0.0)
        b.consume(FRAME, 0.0)
    # Each QP's own queue holds two packets, but the line holds four: the
    # host's frames leave one after another, so neither runs further ahead.
    assert a.next_send_time(FRAME, 0.0) > 0.0 and b.next_send_time(FRAME, 0.0) > 0.0
    assert a.departure_ns() == b.departure_ns() == round(4 * PKT_S * 1e9)


def test_shaped_lateness_is_the_time_the_class_stood_empty() -> None:
    p, _ = shaped_pacer(4)
    p.set_rate(LINE / 2, 0)
    slow = 2 * PKT_S                                # one packet time at half the rate
    for _ in range(4):
        p.consume(FRAME, p.next_send_time(FRAME, 0.0))
    p.next_send_time(FRAME, 0.0)
    # The queue empties at four half-rate packet times; the sender comes back
    # one later.
    p.consume(FRAME, 5 * slow)
    assert p.lateness.last_s == pytest.approx(slow)
    assert p.lateness.late_sends == 0               # at most one packet time: not late


def test_a_shaped_pacer_needs_run_ahead() -> None:
    with pytest.raises(ValueError, match="ahead_bytes"):
        Pacer(LINE, burst_bytes=FRAME, line_bps=LINE, shaped=FakeClass())
