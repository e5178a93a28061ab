"""DCQCN's notification and reaction points for rxe hosts, and the byte counter
that feeds the reaction point: the logic of the DCQCN shim, without its socket
or qdisc.

- **Notification point** (:class:`NotificationPoint`). For a CE-marked packet
  to one of the host's QPs it says to send a CNP to the QP's peer (at most one
  per QP per the preset's CNP interval, as the udp provider's responder does).
- **Reaction point** (:class:`ReactionPoint`). A CNP to one of the host's QPs
  goes to that QP's rate controller (``Dcqcn``, hosts/roce/dcqcn.py, the same
  code and presets as the udp provider), whose timers the agent drives; the
  rates the QPs should run at come out as HTB class rates, one class per
  sending QP, told apart by the QP's peer (the destination address and the
  BTH's destination QP of its requests: a QP's UDP source port is its step
  tag, which a Symphony ring changes per step).
- **Byte counter** (:class:`ClassByteCounter`). rxe reports no per-QP transmit
  bytes, but each sending QP's HTB class counts exactly the bytes that QP sent
  (every frame it dequeued, Ethernet header to ICRC, retransmissions too, as
  the udp provider counts them). :class:`ClassByteCounter` reads all classes
  in one netlink dump and gives each controller its class's increase since the
  previous read. It reads before a CNP or a due timer reaches the controllers
  (the bytes sent before a cut never count after it), and otherwise only when
  a QP's byte counter may have reached its next event: its remaining bytes at
  the class's rate after the previous read, but at least
  ``CLASS_READ_MIN_NS`` (10 ms) after it. A QP at line rate runs no byte
  counter and costs no reads. A dump of a host's four classes takes 5-10 ms
  in the guest VM under TCG (measured), hence the floor. With the agent's
  poll interval (5 ms, ``hosts.agent.agent.RXE_POLL_NS``) an event is seen at
  most about 15 ms after the packet that crosses it, 7.5 kB at 4 Mb/s, 1.5 us
  of modelled time at slowdown 10000 (roce-basics' quick profile), where a
  completed 64 KiB message is 69 kB and 14 us; its bytes are never lost, only
  late. That holds while the agent keeps up: an agent that stalls (under TCG
  its loop sometimes stops for 0.1-0.3 s) sees the events of the stall at
  once. If the classes cannot be read, the agent counts the wire bytes of
  completed messages instead (``byte_counter_report`` says which), so an
  event then comes at a message's completion.

Pure logic (no rxe, no root): the class counters are read through a
``ClassCounters`` (the shaper, hosts.roce.shaping.HtbShaper, or a test's fake).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Protocol

from hosts.roce.rxe.frames import Arrival
from hosts.roce.shaping import ShapingError, htb_rate_bytes, qp_class_id

__all__ = ["NotificationPoint", "ReactionPoint", "RateController", "ClassCounters",
           "ClassByteCounter", "CLASS_READ_MIN_NS", "ShimError"]

# The shim's errors are the shaper's: one exception class for the host's egress.
ShimError = ShapingError


# ---------------------------------------------------------------------------
# notification point


@dataclass
class _NpQp:
    remote_ip: str
    remote_qpn: int
    last_cnp_ns: int | None = None
    ce_pkts: int = 0
    cnps_sent: int = 0


class NotificationPoint:
    """CE-marked arrivals per local QP -> CNPs to the peer QP, at most one per QP
    per ``cnp_interval_ns`` (the udp provider's responder rule)."""

    def __init__(self, cnp_interval_ns: int) -> None:
        if cnp_interval_ns < 0:
            raise ValueError(f"cnp_interval_ns must be >= 0, got {cnp_interval_ns}")
        self.cnp_interval_ns = cnp_interval_ns
        self.qps: dict[int, _NpQp] = {}
        self.unknown_qp = 0          # CE-marked packets to no QP of this host

    def register(self, local_qpn: int, remote_ip: str, remote_qpn: int) -> None:
        self.qps[local_qpn] = _NpQp(remote_ip, remote_qpn)

    def on_ce(self, a: Arrival, now_ns: int) -> tuple[str, int] | None:
        """(peer ip, peer QPN) to send a CNP to now, or None."""
        q = self.qps.get(a.dqpn)
        if q is None or q.remote_ip != a.src_ip:
            self.unknown_qp += 1
            return None
        q.ce_pkts += 1
        if q.last_cnp_ns is not None and now_ns - q.last_cnp_ns < self.cnp_interval_ns:
            return None
        q.last_cnp_ns = now_ns
        q.cnps_sent += 1
        return q.remote_ip, q.remote_qpn


# ---------------------------------------------------------------------------
# reaction point


class RateController(Protocol):
    @property
    def rate_bps(self) -> float: ...

    def on_cnp(self, now: int) -> None: ...

    def on_bytes_sent(self, nbytes: int, now: int) -> None: ...

    def next_deadline(self) -> int | None: ...

    def on_timer(self, now: int) -> None: ...


@dataclass
class _RpQp:
    rc: RateController
    class_id: int
    peer: tuple[str, int]     # the remote address and QPN its requests go to
    applied_bytes: int = 0
    cnps: int = 0


@dataclass
class ReactionPoint:
    """CNPs per local QP -> that QP's rate controller; the rates it should run at,
    as HTB class rates, whenever one changes."""

    qps: dict[int, _RpQp] = field(default_factory=dict)
    unknown_qp: int = 0

    def register(self, local_qpn: int, remote_ip: str, remote_qpn: int,
                 rc: RateController) -> int:
        """Track a sending QP connected to ``remote_qpn`` at ``remote_ip``; returns
        its HTB class handle. The u32 filter tells QPs apart by that peer, so a
        second QP with the same peer (a misconfiguration) is refused: it would
        run at the first one's rate."""
        peer = (remote_ip, remote_qpn)
        same = [q for q, r in self.qps.items() if r.peer == peer]
        if same:
            raise ShimError(f"QPs {same[0]:#x} and {local_qpn:#x} both send to QP "
                            f"{remote_qpn:#x} at {remote_ip}: the shim shapes each sending QP "
                            "by its peer")
        cid = qp_class_id(len(self.qps))
        self.qps[local_qpn] = _RpQp(rc, cid, peer)
        return cid

    def on_cnp(self, a: Arrival, now_ns: int) -> None:
        q = self.qps.get(a.dqpn)
        if q is None:
            self.unknown_qp += 1
            return
        q.cnps += 1
        q.rc.on_cnp(now_ns)

    def on_timers(self, now_ns: int) -> None:
        for q in self.qps.values():
            d = q.rc.next_deadline()
            if d is not None and d <= now_ns:
                q.rc.on_timer(now_ns)

    def next_deadline(self) -> int | None:
        ds = [d for d in (q.rc.next_deadline() for q in self.qps.values()) if d is not None]
        return min(ds) if ds else None

    def changed(self) -> list[tuple[int, int]]:
        """(class handle, rate bytes/s) for every QP whose rate differs from what
        was last applied; marks them applied."""
        out = []
        for q in self.qps.values():
            b = htb_rate_bytes(q.rc.rate_bps)
            if b != q.applied_bytes:
                q.applied_bytes = b
                out.append((q.class_id, b))
        return out


# ---------------------------------------------------------------------------
# the byte counter, from the QPs' HTB classes

# The fewest nanoseconds between two reads of the class counters: one netlink
# dump of the interface's classes takes 5-10 ms of emulated CPU under TCG.
CLASS_READ_MIN_NS = 10_000_000


class ClassCounters(Protocol):
    def class_bytes(self) -> dict[int, int]: ...


class ClassByteCounter:
    """DCQCN's byte counter fed by the kernel: each sending QP's HTB class counts
    exactly the bytes that QP sent (every frame, retransmissions too), so the
    increase in its counter between two reads goes to the QP's rate controller.

    Reads (one dump for all of the host's QPs) happen before a CNP or a due
    timer reaches the controllers, so the bytes sent before a cut never count
    after it and increase events keep their order, and otherwise only when a
    QP's byte counter may have reached its next event: ``bytes_to_increase``
    at the class's rate after the previous read, but no sooner than
    ``min_interval_ns`` after it. A QP at line rate (no byte counter running)
    costs no reads.

    When the counters cannot be read (the dump fails or a QP's class is
    missing), ``fallback`` says why and the caller counts completed messages
    instead, from then on."""

    def __init__(self, rp: ReactionPoint, counters: ClassCounters,
                 min_interval_ns: int = CLASS_READ_MIN_NS) -> None:
        if min_interval_ns < 0:
            raise ValueError(f"min_interval_ns must be >= 0, got {min_interval_ns}")
        self.rp = rp
        self.counters = counters
        self.min_interval_ns = min_interval_ns
        self.fallback: str | None = None
        self.reads = 0
        self.bytes_fed = 0
        self._last: dict[int, int] = {}      # class handle -> its counter at the last read
        self._last_read_ns: int | None = None

    @property
    def active(self) -> bool:
        return self.fallback is None and bool(self.rp.qps)

    def next_read_ns(self) -> int | None:
        """When a byte-counter event may next be due (None: no QP's counter runs)."""
        if not self.active:
            return None
        due = None
        for q in self.rp.qps.values():
            left = _bytes_to_increase(q.rc)
            if left is None:
                continue
            if self._last_read_ns is None or q.class_id not in self._last:
                return 0          # no baseline yet
            rate = max(1, q.applied_bytes)
            t = self._last_read_ns + max(self.min_interval_ns,
                                         int(max(0, left) * 1_000_000_000 / rate))
            due = t if due is None else min(due, t)
        return due

    def read_if_due(self, now_ns: int, events: bool) -> None:
        """Read now if a CNP or a timer is about to reach a controller (``events``:
        the bytes sent so far count before its cut or increase) or a byte-counter
        event may be due."""
        if not self.active:
            return
        due = self.next_read_ns()
        if events or (due is not None and due <= now_ns):
            self.read(now_ns)

    def read(self, now_ns: int) -> None:
        """Read the counters and give each QP's controller the bytes its class
        sent since the previous read (the first read only sets the baseline)."""
        if not self.active:
            return
        try:
            counts = self.counters.class_bytes()
        except ShapingError as e:
            self.fallback = str(e)
            return
        missing = [q.class_id for q in self.rp.qps.values() if q.class_id not in counts]
        if missing:
            c = missing[0]
            self.fallback = f"no counter for HTB class {c >> 16:x}:{c & 0xFFFF:x}"
            return
        self.reads += 1
        self._last_read_ns = now_ns
        for q in self.rp.qps.values():
            now_bytes = counts[q.class_id]
            before = self._last.get(q.class_id)
            self._last[q.class_id] = now_bytes
            # a counter that went back (the class was made again) restarts the count
            if before is not None and now_bytes > before:
                self.bytes_fed += now_bytes - before
                q.rc.on_bytes_sent(now_bytes - before, now_ns)


def _bytes_to_increase(rc: RateController) -> int | None:
    left = getattr(rc, "bytes_to_increase", None)
    return left() if callable(left) else None

