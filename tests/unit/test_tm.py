"""Traffic manager with a fake clock: depth and tail drop, pps pacing, strict
priority, weighted DRR and per-port bit rate (extensions), queue metadata."""

from __future__ import annotations

from collections import Counter

import pytest

from switches.soft.runtime.tm import TrafficManager


class Clock:
    def __init__(self) -> None:
        self.t = 0

    def __call__(self) -> int:
        return self.t


def drain_now(tm: TrafficManager) -> list:
    out = []
    while (x := tm.pop_ready()) is not None:
        out.append(x)
    return out


def test_fifo_depth_and_tail_drop() -> None:
    c = Clock()
    tm = TrafficManager(now_us=c)
    tm.set_depth(3)
    ok = [tm.enqueue(1, 0, i, 100) for i in range(5)]
    assert ok == [True, True, True, False, False]
    assert [x[2] for x in drain_now(tm)] == [0, 1, 2]
    assert tm.stats()["1"]["queues"][0]["drops"] == 2


def test_default_depth_is_64() -> None:
    tm = TrafficManager(now_us=Clock())
    assert sum(tm.enqueue(2, 0, i, 60) for i in range(70)) == 64


def test_depth_per_port_and_priority_and_default_for_new_queues() -> None:
    tm = TrafficManager(priority_queues=2, now_us=Clock())
    tm.set_depth(1, 5, 1)
    assert tm.enqueue(5, 1, "a", 1) and not tm.enqueue(5, 1, "b", 1)
    assert tm.enqueue(5, 0, "c", 1) and tm.enqueue(5, 0, "d", 1)  # other priority untouched
    tm.set_depth(2)  # every queue, and queues created later
    assert tm.enqueue(5, 1, "e", 1)
    assert tm.enqueue(9, 0, "f", 1) and tm.enqueue(9, 0, "g", 1) and not tm.enqueue(9, 0, "h", 1)
    with pytest.raises(ValueError):
        tm.set_depth(4, 5, 2)


def test_queue_metadata() -> None:
    c = Clock()
    tm = TrafficManager(now_us=c)
    for i in range(3):
        c.t = 100 * i
        tm.enqueue(1, 0, i, 64)
    c.t = 1000
    metas = [x[3] for x in drain_now(tm)]
    assert [m.enq_qdepth for m in metas] == [0, 1, 2]
    assert [m.deq_qdepth for m in metas] == [2, 1, 0]
    assert [m.enq_timestamp for m in metas] == [0, 100, 200]
    assert [m.deq_timedelta for m in metas] == [1000, 900, 800]


def test_pps_rate_paces_releases() -> None:
    c = Clock()
    tm = TrafficManager(now_us=c)
    tm.set_rate(100)  # 10 ms between packets
    for i in range(5):
        tm.enqueue(1, 0, i, 64)
    released = []
    for t in range(0, 50_000, 1000):
        c.t = t
        released += [(t, x[2]) for x in drain_now(tm)]
    assert released == [(0, 0), (10_000, 1), (20_000, 2), (30_000, 3), (40_000, 4)]


def test_pps_rate_catches_up_after_a_late_poll() -> None:
    c = Clock()
    tm = TrafficManager(now_us=c)
    tm.set_rate(1000, 1)
    for i in range(4):
        tm.enqueue(1, 0, i, 64)
    assert len(drain_now(tm)) == 1
    assert tm.next_release_us() == 1000
    c.t = 2500  # the I/O loop woke up late
    assert len(drain_now(tm)) == 2  # packets scheduled at 1000 and 2000
    assert tm.next_release_us() == 3000


def test_rate_is_per_queue() -> None:
    c = Clock()
    tm = TrafficManager(now_us=c)
    tm.set_rate(10, 1)
    for i in range(3):
        tm.enqueue(1, 0, ("slow", i), 64)
        tm.enqueue(2, 0, ("fast", i), 64)
    out = drain_now(tm)
    assert Counter(x[0] for x in out) == {1: 1, 2: 3}


def test_strict_priority_highest_first() -> None:
    tm = TrafficManager(priority_queues=3, now_us=Clock())
    for i in range(2):
        tm.enqueue(1, 0, f"lo{i}", 64)
        tm.enqueue(1, 2, f"hi{i}", 64)
        tm.enqueue(1, 1, f"mid{i}", 64)
    assert [x[2] for x in drain_now(tm)] == ["hi0", "hi1", "mid0", "mid1", "lo0", "lo1"]
    assert tm.next_release_us() is None


def test_rate_limited_high_priority_lets_lower_pass() -> None:
    c = Clock()
    tm = TrafficManager(priority_queues=2, now_us=c)
    tm.set_rate(1000, 1, 1)
    for i in range(3):
        tm.enqueue(1, 1, f"hi{i}", 64)
        tm.enqueue(1, 0, f"lo{i}", 64)
    assert [x[2] for x in drain_now(tm)] == ["hi0", "lo0", "lo1", "lo2"]
    c.t = 1000
    assert [x[2] for x in drain_now(tm)] == ["hi1"]


def test_port_bps_serialization_pacing() -> None:
    c = Clock()
    tm = TrafficManager(priority_queues=2, now_us=c)
    tm.set_port_rate_bps(8_000_000, 1)  # 1 byte per us
    tm.enqueue(1, 0, "a", 1000)
    tm.enqueue(1, 0, "b", 500)
    tm.enqueue(1, 1, "c", 100)
    tm.enqueue(2, 0, "other", 1000)  # other port unaffected
    first = drain_now(tm)
    assert sorted(x[2] for x in first) == ["c", "other"]
    assert tm.next_release_us() == 100
    c.t = 100
    assert [x[2] for x in drain_now(tm)] == ["a"]
    c.t = 1099
    assert drain_now(tm) == []
    c.t = 1100
    assert [x[2] for x in drain_now(tm)] == ["b"]


def test_port_bps_long_run_rate() -> None:
    c = Clock()
    tm = TrafficManager(now_us=c)
    tm.set_port_rate_bps(1_000_000)  # 1 Mb/s: a 125-byte packet per ms
    tm.set_depth(1000)
    for i in range(200):
        tm.enqueue(3, 0, i, 125)
    n = 0
    for t in range(0, 100_000, 250):
        c.t = t
        n += len(drain_now(tm))
    assert n == 100  # 100 ms at 1 Mb/s


def test_drr_weights_share_bandwidth() -> None:
    c = Clock()
    tm = TrafficManager(priority_queues=2, now_us=c)
    tm.set_depth(1000)
    tm.set_priority_weights(1, [1, 3])
    for i in range(400):
        tm.enqueue(1, 0, ("p0", i), 1500)
        tm.enqueue(1, 1, ("p1", i), 1500)
    first = [x[2][0] for x in drain_now(tm)[:400]]
    share = Counter(first)
    assert share["p1"] == 300 and share["p0"] == 100


def test_drr_byte_fairness_with_different_sizes() -> None:
    tm = TrafficManager(priority_queues=2, now_us=Clock())
    tm.set_depth(1000)
    tm.set_priority_weights(7, [1, 1])
    for _i in range(300):
        tm.enqueue(7, 0, 1500, 1500)
        tm.enqueue(7, 1, 500, 500)
    sent = Counter()
    for x in drain_now(tm)[:300]:
        sent[x[1]] += x[2]
    assert abs(sent[0] - sent[1]) <= 3000


def test_drr_work_conserving_and_back_to_strict() -> None:
    tm = TrafficManager(priority_queues=2, now_us=Clock())
    tm.set_priority_weights(1, [5, 1])
    tm.enqueue(1, 0, "only", 64)
    assert [x[2] for x in drain_now(tm)] == ["only"]
    with pytest.raises(ValueError):
        tm.set_priority_weights(1, [1])
    with pytest.raises(ValueError):
        tm.set_priority_weights(1, [0, 1])
    tm.set_priority_weights(1, None)
    tm.enqueue(1, 0, "lo", 64)
    tm.enqueue(1, 1, "hi", 64)
    assert [x[2] for x in drain_now(tm)] == ["hi", "lo"]


def test_pop_any_ignores_rates_in_arrival_order() -> None:
    c = Clock()
    tm = TrafficManager(priority_queues=2, now_us=c)
    tm.set_rate(1)
    tm.enqueue(2, 0, "a", 64)
    tm.enqueue(1, 0, "b", 64)
    tm.enqueue(2, 0, "c", 64)
    out = []
    while (x := tm.pop_any()) is not None:
        out.append(x[2])
    assert out == ["a", "b", "c"]


def test_invalid_configuration() -> None:
    with pytest.raises(ValueError):
        TrafficManager(priority_queues=0)
    tm = TrafficManager(now_us=Clock())
    with pytest.raises(ValueError):
        tm.set_rate(-1)
    with pytest.raises(ValueError):
        tm.enqueue(1, 1, "x", 1)


def test_port_delay_hands_packets_over_later_without_queueing_them() -> None:
    c = Clock()
    tm = TrafficManager(now_us=c)
    tm.set_port_rate_bps(8_000_000, 1)  # 1 byte per us
    tm.set_port_delay_us(5000, 1)
    for name in "abc":
        assert tm.enqueue(1, 0, name, 1000)
    tm.enqueue(2, 0, "other", 100)  # a port without delay is not held back
    assert [x[2] for x in drain_now(tm)] == ["other"]
    # "a" left its queue at t=0 and is on the link: the queue holds b and c only
    assert tm.depth(1) == 2 and tm.total == 3
    assert tm.next_release_us() == 1000  # "b" may leave the queue at 1000 ...
    c.t = 1000
    assert drain_now(tm) == [] and tm.depth(1) == 1
    assert tm.next_release_us() == 2000
    c.t = 4999
    tm.pop_ready()
    assert tm.next_release_us() == 5000  # ... "a" arrives after its 5 ms delay
    c.t = 5000
    out = drain_now(tm)
    assert [x[2] for x in out] == ["a"] and out[0][3].enq_qdepth == 0
    c.t = 7000
    assert [x[2] for x in drain_now(tm)] == ["b", "c"]
    assert tm.total == 0 and tm.stats()["1"]["delay_us"] == 5000


def test_port_delay_default_applies_to_new_ports_and_pop_any_flushes() -> None:
    c = Clock()
    tm = TrafficManager(now_us=c)
    tm.set_port_delay_us(300)
    tm.enqueue(4, 0, "x", 100)
    assert tm.pass_through(4, 0) is None  # a delayed port never skips the queue
    assert drain_now(tm) == [] and tm.next_release_us() == 300
    tm.enqueue(4, 0, "y", 100)
    assert [x[2] for x in (tm.pop_any(), tm.pop_any())] == ["x", "y"]
    tm.set_port_delay_us(0)
    tm.enqueue(4, 0, "z", 100)
    assert [x[2] for x in drain_now(tm)] == ["z"]
    with pytest.raises(ValueError):
        tm.set_port_delay_us(-1)
