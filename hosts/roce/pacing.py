"""Token-bucket pacer for one sender, with a lateness metric.

The bucket fills at the rate the congestion controller allows and holds about
one MTU-sized packet, so the sender can never burst more than a packet above
its rate. `next_send_time(nbytes, now)` says when a packet may leave;
`consume(nbytes, now)` records that it left. The gap between the scheduled and
the actual send time is the lateness: how far the emulation fell behind the
schedule (a busy CPU, a slow event loop). Runs report it so a run that did not
keep up is flagged.

Run-ahead mode (``ahead_bytes`` > 0, for a host whose interface serialises
at the line rate itself, an HTB qdisc: testbed/net.py): while the controller
allows the full line rate, the wire's spacing is the kernel's job, so the
pacer lets the sender keep up to ``ahead_bytes`` in the qdisc, modelled as a
queue draining at the line rate. It wakes the sender when that queue is down
to half, so one wake-up sends several packets and a wake-up late by less
than the queue's remaining time costs nothing. Lateness is then what the
sender cost the wire: how long the modelled queue stood empty while the
packet was waiting. Below the line rate (a DCQCN cut) the token bucket paces
as usual, one packet at a time.

Shaped mode (``shaped``, a QP class of hosts/roce/shaping.py): the kernel
spaces the QP's frames at its DCQCN rate too (an HTB class per QP whose
rate the pacer sets as the controller's rate changes), so the run-ahead
holds at every rate: the modelled queue drains at the QP's rate, and a cut
applies at once to what is queued there, as in a NIC's rate limiter. The
QPs of one host share its line (``host_line``, the NIC's serialiser): none
runs ahead while the line already holds ``ahead_bytes`` of the host's frames.

Rates in bit/s, sizes in bytes (Ethernet frame lengths, as the transport
counts them), times in CLOCK_MONOTONIC nanoseconds.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

from hosts.roce.constants import (
    BTH_LEN,
    DEFAULT_PATH_MTU,
    FRAME_OVERHEAD,
    ICRC_LEN,
    IMMDT_LEN,
    RETH_LEN,
)

if TYPE_CHECKING:
    from hosts.roce.pfc import HostPause

__all__ = ["Pacer", "LatenessStats", "DEFAULT_BURST_BYTES", "HostLine", "ShapedClass"]

# One full-size frame at the default path MTU with every header a data packet
# can carry: the bucket holds about one packet.
DEFAULT_BURST_BYTES = DEFAULT_PATH_MTU + BTH_LEN + RETH_LEN + IMMDT_LEN + ICRC_LEN + FRAME_OVERHEAD


class ShapedClass(Protocol):
    """The kernel's rate limiter of one QP (hosts.roce.shaping.QpClass)."""

    skb_priority: int

    def set_rate(self, rate_bps: float) -> None: ...


class HostLine:
    """A host's NIC serialiser as its QPs' pacers model it: when the frames
    handed to the kernel so far will all have left at ``line_bps``."""

    def __init__(self, line_bps: float, now_ns: int = 0) -> None:
        if not line_bps > 0 or line_bps == float("inf"):
            raise ValueError("a host line needs a finite positive rate")
        self.line_bps = float(line_bps)
        self.free_at = float(now_ns)

    def queued_bytes(self, now: float) -> float:
        return max(0.0, self.free_at - now) * self.line_bps / 8e9

    def add(self, nbytes: int, now: float) -> None:
        self.free_at = max(self.free_at, now) + nbytes * 8e9 / self.line_bps


@dataclass
class LatenessStats:
    """How late sends were relative to when the pacer allowed them."""

    # Sends later than this many packet times count as "late" (noise below it).
    late_threshold_s: float = 0.0
    sends: int = 0
    late_sends: int = 0
    total_s: float = 0.0
    max_s: float = 0.0
    _hist: dict[int, int] = field(default_factory=dict)  # log2(us) bucket -> count

    last_s: float = 0.0

    def record(self, lateness_s: float) -> None:
        lateness_s = max(0.0, lateness_s)
        self.last_s = lateness_s
        self.sends += 1
        self.total_s += lateness_s
        self.max_s = max(self.max_s, lateness_s)
        if lateness_s > self.late_threshold_s:
            self.late_sends += 1
        us = lateness_s * 1e6
        b = 0 if us < 1 else int(math.log2(us)) + 1
        self._hist[b] = self._hist.get(b, 0) + 1

    @property
    def mean_s(self) -> float:
        return self.total_s / self.sends if self.sends else 0.0

    def quantile_s(self, q: float) -> float:
        """Upper bound of the histogram bucket holding quantile q (coarse, x2)."""
        if not self.sends:
            return 0.0
        need = q * self.sends
        seen = 0
        for b in sorted(self._hist):
            seen += self._hist[b]
            if seen >= need:
                return 0.0 if b == 0 else (2**b) * 1e-6
        return self.max_s

    def as_dict(self) -> dict[str, Any]:
        return {
            "sends": self.sends,
            "late_sends": self.late_sends,
            "late_fraction": self.late_sends / self.sends if self.sends else 0.0,
            "late_threshold_s": self.late_threshold_s,
            "mean_s": self.mean_s,
            "p99_s": self.quantile_s(0.99),
            "max_s": self.max_s,
        }


class Pacer:
    """Token bucket of `burst_bytes` (~one frame) filled at the controller's rate.

    Implements the transport's Pacer protocol (`next_send_ns`, `on_sent`, with
    CLOCK_MONOTONIC nanoseconds and the current rate passed in each call);
    `next_send_time`/`consume` are the same in seconds with the pacer's own rate.

    A packet's schedule is the later of when it was first asked about and when
    the bucket held enough tokens for it; asking again (an event loop waking up)
    does not move the schedule, so lateness = actual send time - schedule.

    ``line_bps`` and ``ahead_bytes``: the run-ahead mode of the module
    docstring (``ahead_bytes`` 0, the default, turns it off).
    """

    def __init__(
        self,
        rate_bps: float = float("inf"),
        burst_bytes: int = DEFAULT_BURST_BYTES,
        now_ns: int = 0,
        late_threshold_packets: float = 1.0,
        line_bps: float | None = None,
        ahead_bytes: int = 0,
        shaped: ShapedClass | None = None,
        host_line: HostLine | None = None,
        pause: HostPause | None = None,
    ) -> None:
        if rate_bps <= 0 or burst_bytes <= 0:
            raise ValueError("rate and burst must be positive")
        if ahead_bytes < 0 or (ahead_bytes and not (line_bps and line_bps > 0)):
            raise ValueError("run-ahead needs ahead_bytes >= 0 and a positive line_bps")
        if ahead_bytes and ahead_bytes < burst_bytes:
            raise ValueError(f"ahead_bytes ({ahead_bytes}) must hold a full bucket "
                             f"({burst_bytes} bytes)")
        if shaped is not None and not ahead_bytes:
            raise ValueError("a shaped pacer runs ahead: it needs ahead_bytes")
        self.line_bps = float(line_bps) if line_bps else float("inf")
        # PFC (hosts/roce/pfc.py): while the host's link is paused no packet
        # is released. The agent wakes when a pause frame arrives (an XON)
        # or at the pause's end; how late it read the frame is its receive
        # lag (HostPause), not this sender's lateness.
        self.pause = pause
        self.ahead_bytes = int(ahead_bytes)
        self.shaped = shaped
        self.skb_priority = shaped.skb_priority if shaped is not None else 0
        # The host's line, and when this QP's own modelled queue drains.
        self._line = host_line if host_line is not None else (
            HostLine(self.line_bps, now_ns) if ahead_bytes else None)
        self._q_free = float(now_ns)
        self.ahead_sends = 0
        self._rate = float(rate_bps)
        self.burst_bytes = int(burst_bytes)
        # Bucket level at time _t; between events it grows linearly up to the burst.
        self._tokens = float(burst_bytes)  # may go negative after a big packet
        self._t = float(now_ns)
        self._ask: float | None = None  # when the next packet was first asked about
        self._ask_bytes = 0
        # The waiting packet's schedule, kept when the rate changed after the
        # bucket already held enough for it at the old rate.
        self._due: float | None = None
        # whether the time next_send_ns last returned must be met to the us
        # (transport Pacer protocol, hosts/roce/rate.py)
        self.exact = True
        self._late_packets = late_threshold_packets
        self.lateness = LatenessStats(self._late_threshold_s())
        self.bytes_sent = 0
        self.first_send_ns: int | None = None
        self.last_send_ns: int | None = None
        self._bytes_after_first = 0

    def _late_threshold_s(self) -> float:
        if self._rate == float("inf"):
            return 0.0
        return self._late_packets * self.burst_bytes * 8 / self._rate

    @property
    def rate_bps(self) -> float:
        return self._rate

    def set_rate(self, rate_bps: float, now_ns: int) -> None:
        """Change the fill rate; tokens earned until now are kept at the old rate."""
        if rate_bps <= 0:
            raise ValueError("rate must be positive")
        if rate_bps == self._rate:
            return
        if self._ask is not None and self._due is None:
            # A packet that was already sendable at the old rate keeps its
            # schedule: refilled to now, the bucket would hold enough and the
            # schedule would fall back to when the packet was first asked
            # about, a whole packet time early at a low rate (a DCQCN rate
            # increase while the sender slept counted its next packet late).
            due = self._schedule(self._ask_bytes)
            if due <= now_ns:
                self._due = due
        self._refill(float(now_ns))
        old_q = self._queue_rate()
        self._rate = float(rate_bps)
        if self.shaped is not None:
            # What waits in the QP's class drains at the new rate from now on.
            if self._q_free > now_ns:
                self._q_free = now_ns + (self._q_free - now_ns) * old_q / self._queue_rate()
            self.shaped.set_rate(self._queue_rate())
        if self.lateness.sends == 0:
            self.lateness.late_threshold_s = self._late_threshold_s()

    def _refill(self, now: float) -> None:
        if now > self._t:
            if self._rate == float("inf"):
                self._tokens = float(self.burst_bytes)
            else:
                self._tokens = min(
                    float(self.burst_bytes), self._tokens + (now - self._t) * self._rate / 8e9
                )
            self._t = now

    def _schedule(self, nbytes: int) -> float:
        assert self._ask is not None
        if self._due is not None:
            return self._due
        # A packet larger than the bucket waits for a full bucket and then goes
        # into debt, so the long-run rate still holds.
        deficit = min(nbytes, self.burst_bytes) - self._tokens
        if deficit <= 0 or self._rate == float("inf"):
            return self._ask
        return max(self._ask, self._t + deficit * 8e9 / self._rate)

    def _ahead(self) -> bool:
        # (a controller back at line rate may differ from it in the last bits)
        return self.ahead_bytes > 0 and (self.shaped is not None
                                         or self._rate >= self.line_bps * (1 - 1e-9))

    def _queue_rate(self) -> float:
        """The rate this QP's queue in the kernel drains at."""
        return min(self._rate, self.line_bps) if self.shaped is not None else self.line_bps

    # ---- transport Pacer protocol (ns) ----
    def next_send_ns(self, nbytes: int, now_ns: int, rate_bps: float | None = None) -> int:
        """Time (ns) the next packet, of `nbytes`, may leave; <= now_ns means now."""
        if rate_bps is not None:
            self.set_rate(rate_bps, now_ns)
        if self.pause is not None:
            until = self.pause.until_ns(now_ns)
            if until > now_ns:
                # The pause is not lateness: the packet is asked about afresh
                # once it ends (an XON's arrival wakes the agent).
                self._ask = None
                self._due = None
                self.exact = True
                return until
        if self._ask is None:
            self._ask = float(now_ns)
            self._ask_bytes = nbytes
        ahead = self._ahead()
        # A run-ahead refill point leaves half a queue to drain: a late wake-up
        # costs nothing, so the host need not poll for it.
        self.exact = not ahead
        if ahead:
            line = self._line
            assert line is not None
            rate = self._queue_rate()
            own = max(0.0, self._q_free - now_ns) * rate / 8e9
            if (own + nbytes <= self.ahead_bytes
                    and line.queued_bytes(now_ns) + nbytes <= self.ahead_bytes):
                return now_ns
            # Full: come back when the fuller of the two has drained to half.
            return math.ceil(max(self._q_free - self.ahead_bytes * 4e9 / rate,
                                 line.free_at - self.ahead_bytes * 4e9 / line.line_bps))
        return math.ceil(self._schedule(nbytes))

    def on_sent(self, nbytes: int, now_ns: int, rate_bps: float | None = None) -> None:
        """A packet of `nbytes` left at `now_ns`."""
        if rate_bps is not None:
            self.set_rate(rate_bps, now_ns)
        now = float(now_ns)
        ahead = self._ahead()
        if self._ask is None:
            late = 0.0  # sent without asking: nothing to be late against
        elif ahead:
            # The wire stood idle from when the queues drained (or the packet
            # was first asked about, if later) until now.
            assert self._line is not None
            late = max(0.0, now - max(self._ask, self._q_free, self._line.free_at))
        else:
            late = max(0.0, now - math.ceil(self._schedule(nbytes)))
        self._ask = None
        self._due = None
        self._refill(now)
        self.lateness.record(late / 1e9)
        self._tokens -= nbytes
        if ahead:
            # What waits in the qdisc is owed to the bucket, should the rate drop.
            self._tokens = max(self._tokens, -float(self.ahead_bytes))
            self.ahead_sends += 1
        if self._line is not None:
            self._line.add(nbytes, now)
            self._q_free = max(self._q_free, now) + nbytes * 8e9 / self._queue_rate()
        if self.first_send_ns is None:
            self.first_send_ns = now_ns
        else:
            self._bytes_after_first += nbytes
        self.bytes_sent += nbytes
        self.last_send_ns = now_ns

    def departure_ns(self) -> int:
        """When the frames handed to the kernel so far will have left it (the
        modelled queues in run-ahead mode; 0 without them: at once)."""
        if self._line is None:
            return 0
        return math.ceil(max(self._q_free, self._line.free_at))

    # ---- the same in seconds ----
    def next_send_time(self, nbytes: int, now: float) -> float:
        return self.next_send_ns(nbytes, round(now * 1e9)) / 1e9

    def consume(self, nbytes: int, now: float) -> float:
        """Record a send at `now` (s); returns its lateness in seconds."""
        self.on_sent(nbytes, round(now * 1e9))
        return self.lateness.last_s

    def achieved_rate_bps(self) -> float:
        """Rate over the sends so far: bytes after the first send / elapsed time."""
        if self.first_send_ns is None or self.last_send_ns is None:
            return 0.0
        if self.last_send_ns <= self.first_send_ns:
            return 0.0
        return self._bytes_after_first * 8e9 / (self.last_send_ns - self.first_send_ns)

    def report(self) -> dict[str, Any]:
        return {
            "rate_bps": self._rate,
            "burst_bytes": self.burst_bytes,
            "ahead_bytes": self.ahead_bytes,
            "ahead_sends": self.ahead_sends,
            "bytes_sent": self.bytes_sent,
            "achieved_rate_bps": self.achieved_rate_bps(),
            "lateness": self.lateness.as_dict(),
            **({"shaped": self.shaped.report()} if self.shaped is not None
               and hasattr(self.shaped, "report") else {}),
        }
