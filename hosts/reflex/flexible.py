"""ReFlex's flexible-flow logic, as pure functions of time and delivered bytes.

A flexible flow has an aggressiveness ``alpha`` (the share of its fair-share
rate it must keep) and a reliability factor ``r`` (the share of its ``size``
bytes it must deliver). It follows a network-wide cycle of ``warmup``,
``measure`` and ``exploit`` intervals of ``t_int`` each (default 5 ms, 1:1:3);
every flow finds its place in the cycle from the shared clock with one modulo,
so flows need no coordination.

- A flow starts at high priority and does nothing else until the first cycle
  boundary after its start (the first partial cycle only synchronizes).
- In every measure phase it measures its rate: the fair-share estimate
  ``R_fair``, used from the end of that phase until the next one.
- Once it has an estimate, every update adds ``delivered - alpha*R_fair*dt``
  to its budget: a surplus grows ``B_alpha``; a deficit drains ``B_alpha``
  while it is positive, then ``B_r`` (which starts at ``(1-r)*size``), and what
  is left makes ``B_alpha`` negative. Bytes taken from ``B_r`` are bytes the
  flow will not deliver (``skipped``).
- At the start of an exploit phase it goes to low priority only if its budget
  ``B_alpha + B_r`` covers ``alpha * R_fair * D_exploit * T_int``, the expense
  of delivering nothing for the whole phase; it returns to high priority when
  the budget is exhausted, and at the end of the phase in any case.
- The flow is complete when ``delivered + skipped >= size``: with ``r < 1`` it
  ends early by what ``B_r`` gave up, having delivered at least ``r * size``.

Times are integer nanoseconds of the shared clock, sizes bytes, rates
bytes/ns internally (``fair_share_bps`` reports bits/s).
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

__all__ = ["Phase", "Cycle", "FlexibleParams", "FlexibleFlow", "Decision"]


class Phase(enum.Enum):
    WARMUP = "warmup"
    MEASURE = "measure"
    EXPLOIT = "exploit"


@dataclass(frozen=True)
class Cycle:
    """The network-wide probing cycle: ``warmup``:``measure``:``exploit``
    intervals of ``t_int_ns``, starting at multiples of its length on the
    shared clock."""

    t_int_ns: int
    warmup: int = 1
    measure: int = 1
    exploit: int = 3

    def __post_init__(self) -> None:
        if self.t_int_ns <= 0:
            raise ValueError("Cycle.t_int_ns must be positive")
        if self.warmup < 0 or self.measure < 1 or self.exploit < 1:
            raise ValueError("Cycle needs warmup >= 0, measure >= 1 and exploit >= 1 intervals")

    @property
    def length_ns(self) -> int:
        return self.t_int_ns * (self.warmup + self.measure + self.exploit)

    def cycle_start(self, t_ns: int) -> int:
        """Start of the cycle that contains ``t_ns``."""
        return t_ns - t_ns % self.length_ns

    def phase(self, t_ns: int) -> Phase:
        """The phase at ``t_ns``: one modulo of the shared clock."""
        k = (t_ns % self.length_ns) // self.t_int_ns
        if k < self.warmup:
            return Phase.WARMUP
        if k < self.warmup + self.measure:
            return Phase.MEASURE
        return Phase.EXPLOIT

    def boundaries(self, t_ns: int) -> tuple[int, int, int]:
        """(measure start, exploit start, next cycle start) of ``t_ns``'s cycle."""
        c = self.cycle_start(t_ns)
        return (c + self.warmup * self.t_int_ns,
                c + (self.warmup + self.measure) * self.t_int_ns, c + self.length_ns)

    def next_boundary(self, t_ns: int) -> int:
        """The first phase boundary strictly after ``t_ns``."""
        return min(b for b in self.boundaries(t_ns) if b > t_ns)


@dataclass(frozen=True)
class FlexibleParams:
    alpha: float          # share of the fair-share rate the flow must keep
    r: float = 1.0        # share of the bytes it must deliver
    size: int = 0         # flow size in bytes (needed when r < 1)

    def __post_init__(self) -> None:
        if not self.alpha >= 0:
            raise ValueError("FlexibleParams.alpha must be >= 0")
        if not 0.0 <= self.r <= 1.0:
            raise ValueError("FlexibleParams.r must be in [0, 1]")
        if self.size < 0 or (self.r < 1.0 and self.size <= 0):
            raise ValueError("FlexibleParams.size must be positive when r < 1 "
                             "(partial delivery needs the flow size in advance)")


@dataclass(frozen=True)
class Decision:
    low: bool             # send at low priority now
    done: bool            # delivered + skipped covers the flow size


class FlexibleFlow:
    """One flexible flow's budgets and priority; feed it the shared clock and the
    bytes delivered so far (monotonic) with :meth:`update`."""

    def __init__(self, params: FlexibleParams, cycle: Cycle, start_ns: int) -> None:
        self.params = params
        self.cycle = cycle
        self.start_ns = start_ns
        # Budgets and estimates start at the first cycle boundary after the start.
        self.sync_ns = cycle.cycle_start(start_ns) + (
            0 if start_ns % cycle.length_ns == 0 else cycle.length_ns)
        self.b_alpha = 0.0
        self.b_r = (1.0 - params.r) * params.size
        self.skipped = 0.0
        self.r_fair: float | None = None      # bytes/ns, from the last measure phase
        self.low = False
        self.low_ns = 0                       # time spent at low priority
        self._last_t = start_ns
        self._last_bytes = 0
        self._measure_bytes = 0.0
        self._decided_for = -1                # exploit phase (its start) already decided

    # -- views -------------------------------------------------------------------
    @property
    def budget(self) -> float:
        return self.b_alpha + self.b_r

    @property
    def fair_share_bps(self) -> float | None:
        return None if self.r_fair is None else self.r_fair * 8e9

    def expense(self) -> float:
        """Bytes of budget an exploit phase at zero rate would cost."""
        assert self.r_fair is not None
        return (self.params.alpha * self.r_fair * self.cycle.exploit * self.cycle.t_int_ns)

    def done(self, delivered: int) -> bool:
        size = self.params.size
        return size > 0 and delivered + self.skipped >= size

    # -- the algorithm -----------------------------------------------------------
    def update(self, now_ns: int, delivered: int) -> Decision:
        """Account for the bytes delivered since the last update, then decide the
        priority for what is sent next."""
        if now_ns < self._last_t:
            raise ValueError("FlexibleFlow.update: time went backwards")
        if delivered < self._last_bytes:
            raise ValueError("FlexibleFlow.update: delivered bytes went backwards")
        t, d_total = self._last_t, delivered - self._last_bytes
        span = now_ns - t
        # Split the update at phase boundaries, bytes in proportion to time, so
        # a coarse update rate gives the same budget as a fine one.
        while t < now_ns:
            end = min(now_ns, self.cycle.next_boundary(t))
            part = d_total * (end - t) / span if span else float(d_total)
            self._segment(t, end, part)
            t = end
        self._last_t, self._last_bytes = now_ns, delivered
        self._decide(now_ns)
        return Decision(low=self.low, done=self.done(delivered))

    def _segment(self, t0: int, t1: int, nbytes: float) -> None:
        """[t0, t1) lies in one phase."""
        if self.low:
            self.low_ns += t1 - t0
        if t0 < self.sync_ns:
            return
        cyc = self.cycle
        phase = cyc.phase(t0)
        if self.r_fair is not None:
            self._account(nbytes - self.params.alpha * self.r_fair * (t1 - t0))
        if phase is Phase.MEASURE:
            self._measure_bytes += nbytes
            m0, e0, _ = cyc.boundaries(t0)
            if t1 == e0:   # the measure phase is complete: a new estimate
                self.r_fair = self._measure_bytes / (e0 - m0)
                self._measure_bytes = 0.0
        if t1 == cyc.cycle_start(t0) + cyc.length_ns:
            self.low = False   # the exploit phase is over

    def _account(self, gain: float) -> None:
        if gain >= 0:
            self.b_alpha += gain
            return
        deficit = -gain
        if self.b_alpha > 0:
            take = min(self.b_alpha, deficit)
            self.b_alpha -= take
            deficit -= take
        if deficit > 0 and self.b_r > 0:
            take = min(self.b_r, deficit)
            self.b_r -= take
            self.skipped += take
            deficit -= take
        self.b_alpha -= deficit

    def _decide(self, now_ns: int) -> None:
        cyc = self.cycle
        if now_ns < self.sync_ns or self.r_fair is None:
            self.low = False
            return
        if cyc.phase(now_ns) is not Phase.EXPLOIT:
            self.low = False
            return
        _, e0, _ = cyc.boundaries(now_ns)
        if self._decided_for != e0:
            self._decided_for = e0
            self.low = self.budget >= self.expense() and self.budget > 0
        elif self.low and self.budget <= 0:
            self.low = False
