"""The traffic manager's short path (no rates, no weights anywhere) releases
packets exactly as the general scheduler does, and is left as soon as any
rate or weight is configured."""

from __future__ import annotations

import random

from switches.soft.runtime.tm import TrafficManager


class Clock:
    def __init__(self) -> None:
        self.t = 0

    def __call__(self) -> int:
        return self.t


def _schedule(tm: TrafficManager, clock: Clock, seed: int) -> list[tuple]:
    """Random arrivals on 3 ports x 3 priorities, polled now and then."""
    rng = random.Random(seed)
    out = []
    for i in range(400):
        clock.t += rng.choice([0, 0, 1, 5])
        if rng.random() < 0.6:
            tm.enqueue(rng.randrange(1, 4), rng.randrange(3), i, 100)
        if rng.random() < 0.5:
            x = tm.pop_ready()
            if x is not None:
                port, prio, obj, m = x
                out.append((clock.t, port, prio, obj, m.enq_timestamp, m.enq_qdepth,
                            m.deq_qdepth, m.deq_timedelta, m.qid, m.deq_us))
    return out


def test_short_path_matches_the_general_scheduler() -> None:
    for seed in range(5):
        c1, c2 = Clock(), Clock()
        plain = TrafficManager(3, c1, default_depth=8)
        general = TrafficManager(3, c2, default_depth=8)
        general.unpaced = False  # force the general path, and keep it forced
        general._update_unpaced = lambda: None  # type: ignore[method-assign]
        assert plain.unpaced
        got, want = _schedule(plain, c1, seed), _schedule(general, c2, seed)
        assert got == want and len(got) > 100
        assert plain.stats() == general.stats()


def test_rates_and_weights_leave_the_short_path() -> None:
    tm = TrafficManager(2, Clock())
    assert tm.unpaced
    tm.set_rate(10, 1)
    assert not tm.unpaced
    tm.set_rate(0, 1)
    assert tm.unpaced
    tm.set_port_rate_bps(1_000_000)
    assert not tm.unpaced
    tm.set_port_rate_bps(0)
    tm.set_priority_weights(3, [1, 2])
    assert not tm.unpaced
    tm.set_priority_weights(3, None)
    assert tm.unpaced
    tm.set_rate(5)  # a default rate also applies to queues created later
    tm.enqueue(7, 0, "x", 10)
    assert not tm.unpaced and tm.pop_ready() is not None
