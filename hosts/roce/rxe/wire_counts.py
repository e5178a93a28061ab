"""Per-QP requester counts an rxe host takes from the wire.

rxe counts retransmissions, NAKs and retries per device, and no counter counts
timer expiries, so a host with several busy QPs (an EPIC rank) cannot tell which
QP lost what. With the DCQCN shim's ``count_wire`` its filter passes every
RoCEv2 frame, arriving and leaving, and :class:`WireCounts` counts per QP what
the udp provider counts in ``hosts.roce.verbs``: ``retransmits`` (requests sent
with a PSN below the highest sent), ``naks_rcvd`` (PSN-sequence NAKs that
arrived) and ``rto`` (go-backs that no NAK explains: the retransmission
timer's). Every frame of the host then goes through Python, with its kernel
time (a NAK's go-back follows it at once, the timer's a timeout after the last
progress). :class:`HostWireCounter` keeps one per registered QP.

Pure logic: no rxe, no root.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from hosts.roce.constants import (
    AETH_KIND_MASK,
    AETH_KIND_NAK,
    AETH_KIND_RNR,
    AETH_SYNDROME_NAK_PSN_SEQ,
    OPS_DATA,
    PSN_MASK,
    psn_delta,
)
from hosts.roce.rxe.frames import Bth, parse_bth

__all__ = ["WireCounts", "HostWireCounter", "EARLIER_CONNECTIONS"]

EARLIER_CONNECTIONS = 4     # a reset QP's earlier connections whose leftovers are told apart


@dataclass
class WireCounts:
    """One QP's requester counts, from the frames it sent and the ACKs it got, as
    the udp provider counts them (hosts.roce.verbs): ``retransmits``, data packets
    sent with a PSN below the highest sent so far; ``naks_rcvd``, PSN-sequence
    NAKs received; ``rto``, go-backs (a request with a PSN below the one that
    would follow the last) that no NAK explains: the retransmission timer's, on
    a go-back-N requester.

    A NAK (sequence or RNR) naming an already sent PSN q explains one go-back to
    a PSN at or above q (an ACK taken after the NAK moves the requester's
    restart past q) that comes within ``nak_window_ns`` of it. A go-back to p
    uses up every NAK below p, and one NAK naming p: a requester rewinds on each
    NAK, so two NAKs of one PSN that both reach it before its first resend is
    seen make two go-backs. A requester acts on a NAK at once, while its timer
    fires a whole timeout after its last progress, so half the timeout tells
    them apart; a NAK whose go-back the wire cannot show (the requester was
    already resending past it) then explains nothing later. A
    request beyond the one that follows (an ACK moved the requester past what it
    was resending) is a skip, not a go-back. PSNs are compared in serial-number
    arithmetic, so the 2^24 wrap is no go-back. Times are any one clock's
    nanoseconds: the frames' arrival and departure times.

    A QP reset and connected again (:meth:`restart`) starts a new sequence.
    Requests of the earlier connection can still leave after the reset: a
    retransmission the timer queued in the host's qdisc just before the late
    ACK completed the work. Such a leftover carries the earlier connection's
    UDP source port (rxe fixes it at RTR; a Symphony ring's lane gets a new
    one per step) and continues its sequence, and counts in that sequence."""

    nak_window_ns: int
    tx_pkts: int = 0
    retransmits: int = 0
    naks_rcvd: int = 0
    rto: int = 0
    nak_gobacks: int = 0
    _snd_max: int | None = None        # one past the highest PSN sent
    _next: int | None = None           # the PSN that follows the last one sent
    # NAKed PSN -> when each NAK of it came, oldest first, not yet used
    _naked: dict[int, list[int]] = field(default_factory=dict)
    _sport: int | None = None          # the UDP source port of this connection's last request
    # earlier connections, by the source port of their last request: [snd_max, next]
    _earlier: dict[int, list[int]] = field(default_factory=dict)

    def on_request(self, psn: int, t_ns: int, sport: int | None = None) -> None:
        """A data packet the QP sent; ``sport``, its UDP source port (None: unknown,
        and no request is taken for an earlier connection's)."""
        self.tx_pkts += 1
        if sport is not None:
            if self._earlier and self._leftover(psn, sport):
                return
            self._sport = sport
        if self._snd_max is None or self._next is None:
            self._snd_max = self._next = (psn + 1) & PSN_MASK
            return
        if psn_delta(psn - self._snd_max) < 0:
            self.retransmits += 1
            if psn_delta(psn - self._next) < 0:     # a go-back: by a NAK, or by the timer
                self._forget_naks_before(t_ns - self.nak_window_ns)
                used = [q for q in self._naked if psn_delta(q - psn) <= 0]
                if used:
                    self.nak_gobacks += 1
                else:
                    self.rto += 1
                for q in used:
                    times = self._naked[q]
                    if q == psn and len(times) > 1:
                        times.pop(0)
                    else:
                        del self._naked[q]
        else:
            self._snd_max = (psn + 1) & PSN_MASK
        self._next = (psn + 1) & PSN_MASK

    def on_ack(self, psn: int, syndrome: int, t_ns: int) -> None:
        kind = syndrome & AETH_KIND_MASK
        if syndrome == AETH_SYNDROME_NAK_PSN_SEQ:
            self.naks_rcvd += 1
        if (kind in (AETH_KIND_NAK, AETH_KIND_RNR) and self._snd_max is not None
                and psn_delta(psn - self._snd_max) < 0):
            self._naked.setdefault(psn, []).append(t_ns)

    def _forget_naks_before(self, t_ns: int) -> None:
        """NAKs that came before ``t_ns`` explain no go-back any more."""
        for q in list(self._naked):
            times = [t for t in self._naked[q] if t >= t_ns]
            if times:
                self._naked[q] = times
            else:
                del self._naked[q]

    def _leftover(self, psn: int, sport: int) -> bool:
        """Whether request ``psn`` from ``sport`` is an earlier connection's, left
        in the qdisc over the reset; if so it is counted in that sequence. Not
        when this connection sends from that port too (once it has sent, a port
        both use is this one's), nor, before it has, when the PSN does not
        follow the earlier connection's last: then this connection begins."""
        seq = self._earlier.get(sport)
        if seq is None:
            return False
        if (self._snd_max is None and psn != seq[1]) or sport == self._sport:
            del self._earlier[sport]
            return False
        snd_max, nxt = seq
        if psn_delta(psn - snd_max) < 0:
            self.retransmits += 1
            if psn_delta(psn - nxt) < 0:
                self.rto += 1           # its NAKs are forgotten: the timer's, as it most likely is
        else:
            seq[0] = (psn + 1) & PSN_MASK
        seq[1] = (psn + 1) & PSN_MASK
        return True

    def restart(self) -> None:
        """The QP was reset and connected again (its PSNs start over, as a
        Symphony ring's lane does per step): the next request is no go-back.
        The counts carry on."""
        if self._sport is not None and self._snd_max is not None and self._next is not None:
            self._earlier.pop(self._sport, None)
            self._earlier[self._sport] = [self._snd_max, self._next]
            while len(self._earlier) > EARLIER_CONNECTIONS:
                del self._earlier[next(iter(self._earlier))]
        self._snd_max = self._next = self._sport = None
        self._naked.clear()

    def counters(self) -> dict[str, int]:
        return {"retransmits": self.retransmits, "naks_rcvd": self.naks_rcvd, "rto": self.rto,
                "wire_tx_pkts": self.tx_pkts}


class HostWireCounter:
    """A host's :class:`WireCounts`, one per registered QP: the host's requests are
    told apart by the peer they go to (its address and QPN), the ACKs and NAKs
    it receives by their destination QPN."""

    def __init__(self, local_ip: str, nak_window_ns: int) -> None:
        self.local_ip = local_ip
        self.nak_window_ns = nak_window_ns
        self.qps: dict[int, WireCounts] = {}
        self._by_peer: dict[tuple[str, int], int] = {}

    def register(self, local_qpn: int, remote_ip: str, remote_qpn: int) -> None:
        self.qps[local_qpn] = WireCounts(self.nak_window_ns)
        self._by_peer[(remote_ip, remote_qpn)] = local_qpn

    def on_frame(self, frame: bytes | bytearray | memoryview, outgoing: bool, t_ns: int) -> None:
        """A frame the host sent (``outgoing``) or received at ``t_ns``."""
        b = parse_bth(frame)
        if b is not None:
            self.on_bth(b, outgoing, t_ns)

    def restart(self, local_qpn: int) -> None:
        """QP ``local_qpn`` was reset (:meth:`WireCounts.restart`)."""
        w = self.qps.get(local_qpn)
        if w is not None:
            w.restart()

    def on_bth(self, b: Bth, outgoing: bool, t_ns: int) -> None:
        """:meth:`on_frame` for a frame already parsed."""
        if outgoing:
            if b.opcode in OPS_DATA and b.src_ip == self.local_ip:
                qpn = self._by_peer.get((b.dst_ip, b.dqpn))
                if qpn is not None:
                    self.qps[qpn].on_request(b.psn, t_ns, b.sport)
        elif b.syndrome is not None and b.dst_ip == self.local_ip:
            w = self.qps.get(b.dqpn)
            if w is not None:
                w.on_ack(b.psn, b.syndrome, t_ns)

