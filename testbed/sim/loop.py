"""The simulated clock: the instants that have events (a heap of integer ns),
and per instant its events in the order they were scheduled.

Events at the same nanosecond run in the order they were scheduled, so a
run is a pure function of its plan and seed. One heap entry per instant, not
per event, and a plain int as its key: events that fall in one instant (a
frame's arrival and the polls it wakes) cost no heap operation, and the heap
compares no tuples (PyPy runs heapq as Python: sifting tuples was a fifth of
a run). Nothing here reads a wall clock.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable
from typing import Any

__all__ = ["EventLoop", "SimError"]


class SimError(RuntimeError):
    """The simulation cannot go on (an event in the past, a livelock, a plan it
    cannot honour); the message says what and where."""


class EventLoop:
    """``at(t, fn, arg)`` schedules ``fn(arg)`` at ``t`` ns; ``run`` executes
    events in time order until a condition holds or nothing is left."""

    __slots__ = ("now", "events", "_times", "_at", "_stopping")

    def __init__(self, start_ns: int = 0) -> None:
        self.now = start_ns
        self.events = 0         # events executed so far
        self._times: list[int] = []   # heap of the instants in _at
        # instant -> [fn, arg, fn, arg, ...] in the order scheduled (flat: no
        # tuple per event)
        self._at: dict[int, list[Any]] = {}
        self._stopping = False

    def at(self, t: int, fn: Callable[[Any], None], arg: Any = None) -> None:
        if t < self.now:
            raise SimError(f"an event was scheduled at {t} ns, in the past of the "
                           f"simulated clock ({self.now} ns): {getattr(fn, '__qualname__', fn)}")
        events = self._at.get(t)
        if events is None:
            self._at[t] = [fn, arg]
            heapq.heappush(self._times, t)
        else:
            events.append(fn)
            events.append(arg)

    def stop(self) -> None:
        """End ``run`` after the current event."""
        self._stopping = True

    def discard(self, drop: Callable[[Callable[[Any], None]], bool]) -> int:
        """Remove the scheduled events whose callback ``drop`` selects (wake-ups
        of agents that are gone); how many."""
        n = 0
        for t in list(self._at):
            events = self._at[t]
            keep: list[Any] = []
            for i in range(0, len(events), 2):
                if drop(events[i]):
                    n += 1
                else:
                    keep += events[i:i + 2]
            if not keep:
                del self._at[t]
            elif len(keep) < len(events):
                self._at[t] = keep
        if n:
            self._times[:] = sorted(self._at)   # a sorted list is a heap
        return n

    def pending(self) -> int:
        return sum(len(e) for e in self._at.values()) // 2

    def next_time(self) -> int | None:
        return self._times[0] if self._times else None

    def run(self, until_ns: int | None = None, on_batch: Callable[[], None] | None = None,
            batch_events: int = 1 << 16) -> bool:
        """Execute events in time order. True once an event called ``stop()``;
        False when nothing is left or the next event lies beyond ``until_ns``
        (the clock then stands at ``until_ns``). ``on_batch`` is called every
        ``batch_events`` events (progress reports)."""
        times = self._times
        at = self._at
        pop = heapq.heappop
        self._stopping = False
        next_batch = self.events + batch_events
        while times:
            t = times[0]
            if until_ns is not None and t > until_ns:
                self.now = until_ns
                return False
            self.now = t
            events = at[t]
            i = 0
            # events scheduled at t while these run are appended: run them too
            try:
                while i < len(events):
                    fn = events[i]
                    arg = events[i + 1]
                    i += 2
                    fn(arg)
                    self.events += 1
                    if self._stopping:
                        return True
                    if on_batch is not None and self.events >= next_batch:
                        on_batch()
                        next_batch = self.events + batch_events
            finally:  # (also when an event raised) what ran is gone
                del events[:i]
                if not events:
                    pop(times)
                    del at[t]
        if until_ns is not None and until_ns > self.now:
            self.now = until_ns
        return False
