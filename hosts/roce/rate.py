"""Sender-side rate control interfaces (DCQCN reaction point plugs in here).

The engine owns the clock; it calls a QP's RateController and Pacer with
CLOCK_MONOTONIC nanoseconds. ``nbytes`` is always the Ethernet frame length of a
packet (RoCE part + UDP/IPv4/Ethernet headers), the unit link rates count.
"""

from __future__ import annotations

from typing import Protocol, runtime_checkable


@runtime_checkable
class RateController(Protocol):
    """Decides a QP's sending rate (e.g. DCQCN's reaction point)."""

    @property
    def rate_bps(self) -> float:
        """Current rate in bit/s (``inf`` = unpaced)."""
        ...

    def on_cnp(self, now_ns: int) -> None:
        """A CNP for this QP arrived."""
        ...

    def on_bytes_sent(self, nbytes: int, now_ns: int) -> None:
        """A packet of ``nbytes`` left (new data and retransmissions)."""
        ...

    def next_deadline(self) -> int | None:
        """When ``on_timer`` wants to run next (ns), or None."""
        ...

    def on_timer(self, now_ns: int) -> None:
        """Called at or after ``next_deadline()``."""
        ...


@runtime_checkable
class Pacer(Protocol):
    """Spaces a QP's packets according to the rate controller's rate."""

    def next_send_ns(self, nbytes: int, now_ns: int, rate_bps: float) -> int:
        """Earliest time a packet of ``nbytes`` may leave; <= now_ns means now.
        A pacer may also have an attribute ``exact`` (default True): False when
        the time it last returned is a refill point that tolerates a late
        wake-up (run-ahead into a kernel queue), which the host then waits for
        without polling."""
        ...

    def on_sent(self, nbytes: int, now_ns: int, rate_bps: float) -> None:
        """A packet of ``nbytes`` left at ``now_ns``."""
        ...


class FixedRate:
    """A constant rate, ignoring CNPs (the default when no DCQCN is configured)."""

    def __init__(self, rate_bps: float = float("inf")) -> None:
        if rate_bps <= 0:
            raise ValueError("rate must be positive")
        self._rate = float(rate_bps)
        self.cnps = 0

    @property
    def rate_bps(self) -> float:
        return self._rate

    def on_cnp(self, now_ns: int) -> None:
        self.cnps += 1

    def on_bytes_sent(self, nbytes: int, now_ns: int) -> None:
        pass

    def next_deadline(self) -> int | None:
        return None

    def on_timer(self, now_ns: int) -> None:
        pass


class GapPacer:
    """Inter-packet gap pacing: each packet delays the next by nbytes*8/rate.

    A sender that falls behind does not bank credit (no bursts after a stall).
    """

    def __init__(self) -> None:
        self._next_ns = 0

    def next_send_ns(self, nbytes: int, now_ns: int, rate_bps: float) -> int:
        return self._next_ns

    def on_sent(self, nbytes: int, now_ns: int, rate_bps: float) -> None:
        if rate_bps == float("inf"):
            self._next_ns = now_ns
            return
        start = self._next_ns if self._next_ns > now_ns else now_ns
        self._next_ns = start + int(nbytes * 8e9 / rate_bps)
