"""The simulated clock: one heap of (time in integer ns, sequence number, callback, argument).

Events at the same nanosecond run in the order they were scheduled (the
sequence number breaks ties), so a run is a pure function of its plan and
seed. Nothing here reads a wall clock.
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

    __slots__ = ("now", "events", "_heap", "_seq", "_stopping")

    def __init__(self, start_ns: int = 0) -> None:
        self.now = start_ns
        self.events = 0         # events executed so far
        self._heap: list[tuple[int, int, Callable[[Any], None], Any]] = []
        self._seq = 0
        self._stopping = False

    def at(self, t: int, fn: Callable[[Any], None], arg: Any = None) -> None:
        if t < self.now:
            raise SimError(f"an event was scheduled at {t} ns, in the past of the "
                           f"simulated clock ({self.now} ns): {getattr(fn, '__qualname__', fn)}")
        self._seq += 1
        heapq.heappush(self._heap, (t, self._seq, fn, arg))

    def stop(self) -> None:
        """End ``run`` after the current event."""
        self._stopping = True

    def discard(self, drop: Callable[[Callable[[Any], None]], bool]) -> int:
        """Remove the scheduled events whose callback ``drop`` selects (wake-ups
        of agents that are gone); how many."""
        keep = [e for e in self._heap if not drop(e[2])]
        n = len(self._heap) - len(keep)
        if n:
            heapq.heapify(keep)
            self._heap[:] = keep
        return n

    def pending(self) -> int:
        return len(self._heap)

    def next_time(self) -> int | None:
        return self._heap[0][0] if self._heap else None

    def run(self, until_ns: int | None = None, on_batch: Callable[[], None] | None = None,
            batch_events: int = 1 << 16) -> bool:
        """Execute events in time order. True once an event called ``stop()``;
        False when nothing is left or the next event lies beyond ``until_ns``
        (the clock then stands at ``until_ns``). ``on_batch`` is called every
        ``batch_events`` events (progress reports)."""
        heap = self._heap
        pop = heapq.heappop
        self._stopping = False
        next_batch = self.events + batch_events
        while heap:
            t = heap[0][0]
            if until_ns is not None and t > until_ns:
                self.now = until_ns
                return False
            t, _, fn, arg = pop(heap)
            self.now = t
            fn(arg)
            self.events += 1
            if self._stopping:
                return True
            if on_batch is not None and self.events >= next_batch:
                on_batch()
                next_batch = self.events + batch_events
        if until_ns is not None and until_ns > self.now:
            self.now = until_ns
        return False
