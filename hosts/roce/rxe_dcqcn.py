"""DCQCN for rdma_rxe hosts: a notification point and a reaction point beside the kernel.

rxe ignores ECN: a CE-marked packet makes no CNP and a CNP slows nothing. This
shim does, per host, what a RoCE NIC's DCQCN does, with the same code and
presets as the udp provider (hosts/roce/dcqcn.py):

- **Notification point.** An AF_PACKET socket on the host's interface, with a
  classic BPF filter that passes only arriving RoCEv2 packets (IPv4, UDP to
  4791) that are CE-marked or are CNPs. For a CE-marked packet to one of the
  host's QPs it sends a CNP to the QP's peer (at most one per QP per the
  preset's CNP interval, as the udp provider's responder does): a whole frame
  (Ethernet to the gateway, IPv4 with identification 0 and DF, UDP, BTH
  opcode 0x81 and the ICRC) written to the same socket.
- **Reaction point.** A CNP to one of the host's QPs goes to that QP's rate
  controller (``Dcqcn``), whose timers the agent drives. The rate is enforced
  on the host's egress by tc HTB (netlink, pyroute2): a root class at the
  NIC's line rate, a default class for everything else (ACKs, CNPs) and one
  class per sending QP whose rate and ceiling are the QP's DCQCN rate, chosen
  by a u32 filter on the QP's peer: the destination address and the BTH's
  destination QP of its requests (a QP's UDP source port is its step tag,
  which a Symphony ring changes per step).
  rxe holds at most a bounded number of its skbs in flight per QP, so a QP
  slowed by its class waits instead of losing packets in the qdisc.

- **Byte counter.** rxe reports no per-QP transmit bytes, but each sending
  QP's HTB class counts exactly the bytes that QP sent (every frame it
  dequeued, Ethernet header to ICRC, retransmissions too, as the udp
  provider counts them). :class:`ClassByteCounter` reads all classes in one
  netlink dump and gives each controller its class's increase since the
  previous read. It reads before a CNP or a due timer reaches the
  controllers (the bytes sent before a cut never count after it), and
  otherwise only when a QP's byte counter may have reached its next event:
  its remaining bytes at the class's rate after the previous read, but at
  least ``CLASS_READ_MIN_NS`` (10 ms) after it. A QP at line rate runs no
  byte counter and costs no reads. A dump of a host's four classes takes
  5-10 ms in the guest VM under TCG (measured), hence the floor. With the
  agent's poll interval (5 ms, ``hosts.agent.agent.RXE_POLL_NS``) an event is seen
  at most about 15 ms after the packet that crosses it, 7.5 kB at 4 Mb/s,
  1.5 us of modelled time at slowdown 10000 (roce-basics' quick profile),
  where a completed 64 KiB message is 69 kB and 14 us; its bytes are never
  lost, only late. That holds while the agent keeps up: an agent that
  stalls (under TCG its loop sometimes stops for 0.1-0.3 s) sees the
  events of the stall at once. If the classes cannot be read, the agent
  counts the wire bytes of completed messages instead
  (``byte_counter_report`` says which), so an event then comes at a
  message's completion.

- **DSCP per QP, changed as it runs** (:meth:`RxeDcqcnShim.set_dscp`). rxe
  puts the QP's traffic class (set at RTR) in every packet's TOS byte; a
  NIC marks per packet. The QP's u32 filter then also carries tc's pedit
  (the TOS byte's DSCP bits, ECN kept) and csum (the IPv4 header checksum)
  actions, swapped whole by one netlink request when the DSCP changes.
  The ICRC masks the TOS byte, so the receiver accepts the packets. ReFlex's
  flexible flows move between the switch's priority queues this way.

- **Per-QP packet counts from the wire** (``count_wire``). rxe counts
  retransmissions, NAKs and retries per device, and no counter counts timer
  expiries, so a host with several busy QPs (an EPIC rank) cannot tell which
  QP lost what. With ``count_wire`` the filter passes every RoCEv2 frame,
  arriving and leaving, and :class:`WireCounts` counts per QP what the udp
  provider counts in ``hosts.roce.verbs``: ``retransmits`` (requests sent
  with a PSN below the highest sent), ``naks_rcvd`` (PSN-sequence NAKs that
  arrived) and ``rto`` (go-backs that no NAK explains: the retransmission
  timer's). Every frame of the host then goes through Python, with its
  kernel time (a NAK's go-back follows it at once, the timer's a timeout
  after the last progress).

:class:`NotificationPoint`, :class:`ReactionPoint`, :class:`ClassByteCounter`,
:class:`WireCounts`, :class:`HostWireCounter`, :func:`cnp_frame`,
:func:`classify_frame`, :func:`parse_bth`, :func:`arrival_of`, :func:`roce_filter` and
:func:`htb_rate_bytes` are pure logic (no rxe, no root); :class:`HtbShaper` and
:class:`RxeDcqcnShim` touch the host's interface.
"""

from __future__ import annotations

import socket
import time
from dataclasses import dataclass, field
from typing import Any, Protocol

from ground.wire.ethernet import ETH_HLEN, ETHERNET, ETHERTYPE_IPV4, mac_bytes
from ground.wire.icrc import pseudo_header
from ground.wire.ipv4 import FLAG_DF, IP_PROTO_UDP, IPV4, IPV4_HLEN, ip_bytes, with_checksum
from ground.wire.roce import AETH, BTH
from ground.wire.udp import UDP, UDP_HLEN
from hosts.roce.constants import (
    AETH_KIND_MASK,
    AETH_KIND_NAK,
    AETH_KIND_RNR,
    AETH_SYNDROME_NAK_PSN_SEQ,
    ECN_CE,
    OPS_DATA,
    PSN_MASK,
    ROCE_UDP_PORT,
    Opcode,
    psn_delta,
)
from hosts.roce.shaping import (
    HtbShaper,
    ShapingError,
    htb_rate_bytes,
    qp_class_id,
    qp_match_keys,
)
from hosts.roce.sockets import (
    SO_TIMESTAMPNS,
    TIMESTAMP_CMSG_SPACE,
    attach_filter,
    kernel_time_ns,
    set_buffer,
)
from hosts.roce.wire import encode_cnp

__all__ = ["NotificationPoint", "ReactionPoint", "ClassByteCounter", "HtbShaper", "RxeDcqcnShim",
           "Arrival", "Bth", "WireCounts", "HostWireCounter", "parse_bth", "arrival_of",
           "CLASS_READ_MIN_NS",
           "cnp_frame", "classify_frame", "roce_filter", "htb_rate_bytes", "ShimError",
           "qp_class_id", "qp_match_keys"]

ETH_P_ALL = 0x0003
PACKET_OUTGOING = 4
CNP_TTL = 64
SNAP_BYTES = 128            # headers are all the shim reads
WIRE_RCVBUF = 8 << 20       # the socket's buffer when it counts every frame
# How long, at the end, the shim waits for the host's qdisc to send what it holds:
# a few frames at DCQCN's floor (80 kb/s at slowdown 500: 0.1 s a frame).
SETTLE_S = 2.0
EARLIER_CONNECTIONS = 4     # a reset QP's earlier connections whose leftovers are told apart


# The shim's errors are the shaper's: one exception class for the host's egress.
ShimError = ShapingError


# ---------------------------------------------------------------------------
# frames


@dataclass(frozen=True)
class Arrival:
    """A RoCEv2 packet the filter passed: a CE-marked packet or a CNP."""

    kind: str               # "ce" or "cnp"
    src_ip: str
    dst_ip: str
    dqpn: int


@dataclass(frozen=True)
class Bth:
    """What :class:`WireCounts` needs of a RoCEv2 frame's headers."""

    src_ip: str
    dst_ip: str
    tos: int
    opcode: int
    dqpn: int
    psn: int
    syndrome: int | None      # the AETH's, for an ACK (None if cut off); else None
    sport: int                # the UDP source port (rxe's flow label; a Symphony step tag)


_ethertype = ETHERNET.getter("ethertype")
_ipv4 = IPV4.unpack
_udp = UDP.unpack
_bth = BTH.unpack
_syndrome = AETH.getter("syndrome")
_BTH_LEN = BTH.size


def parse_bth(frame: bytes | bytearray | memoryview) -> Bth | None:
    """The IPv4 addresses and TOS, the UDP source port, the BTH and an ACK's AETH
    syndrome of a RoCEv2 frame, or None (anything else, or cut off before the end of the BTH)."""
    n = len(frame)
    if n < ETH_HLEN + IPV4_HLEN or _ethertype(frame) != ETHERTYPE_IPV4:
        return None
    (version, ihl, dscp, ecn, _len, _ident, _flags, frag_offset, _ttl, proto, _csum, src,
     dst) = _ipv4(frame, ETH_HLEN)
    if version != 4 or ihl * 4 < IPV4_HLEN or proto != IP_PROTO_UDP:
        return None
    if frag_offset:
        return None         # a later fragment: no UDP header
    udp = ETH_HLEN + ihl * 4
    bth = udp + UDP_HLEN
    if n < bth + _BTH_LEN:
        return None
    sport, dport, _ulen, _ucsum = _udp(frame, udp)
    if dport != ROCE_UDP_PORT:
        return None
    opcode, _se, _mig, _pad, _tver, _pkey, _job, dqpn, _ackreq, _resv7, psn = _bth(frame, bth)
    syndrome = (_syndrome(frame, bth + _BTH_LEN) if opcode == Opcode.ACK and n > bth + _BTH_LEN
                else None)
    return Bth(socket.inet_ntoa(src), socket.inet_ntoa(dst), dscp << 2 | ecn, opcode, dqpn, psn,
               syndrome, sport)


def arrival_of(b: Bth) -> Arrival | None:
    """What a parsed RoCEv2 frame is to the shim: a CNP, a CE-marked packet, or
    None."""
    if b.opcode == Opcode.CNP:
        return Arrival("cnp", b.src_ip, b.dst_ip, b.dqpn)
    if b.tos & 3 == ECN_CE:
        return Arrival("ce", b.src_ip, b.dst_ip, b.dqpn)
    return None


def classify_frame(frame: bytes | bytearray | memoryview) -> Arrival | None:
    """What an Ethernet frame is to the shim: a CE-marked RoCEv2 packet, a CNP, or
    None (anything else, or truncated)."""
    b = parse_bth(frame)
    return None if b is None else arrival_of(b)


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


def cnp_frame(*, src_mac: str, dst_mac: str, src_ip: str, dst_ip: str, dqpn: int,
              sport: int = ROCE_UDP_PORT) -> bytes:
    """A whole Ethernet frame carrying a CNP to QP ``dqpn`` at ``dst_ip``: IPv4 with
    identification 0 and DF (what the ICRC's pseudo-header assumes), not ECN-capable,
    UDP checksum 0 (RoCEv2 allows it), the CNP body and its ICRC."""
    roce = encode_cnp(lambda n: pseudo_header(src_ip, dst_ip, sport, n), dqpn)
    udp_len = UDP_HLEN + len(roce)
    ip = with_checksum(IPV4.pack(total_length=IPV4_HLEN + udp_len, flags=FLAG_DF, ttl=CNP_TTL,
                                 proto=IP_PROTO_UDP, src=ip_bytes(src_ip),
                                 dst=ip_bytes(dst_ip)))
    return (ETHERNET.pack(mac_bytes(dst_mac), mac_bytes(src_mac), ETHERTYPE_IPV4) + ip
            + UDP.pack(sport, ROCE_UDP_PORT, udp_len, 0) + roce)


# Classic BPF (linux/filter.h) opcodes the filter uses.
_LD_H_ABS, _LD_B_ABS, _LDX_B_MSH = 0x28, 0x30, 0xB1
_LD_H_IND, _LD_B_IND, _ALU_AND_K = 0x48, 0x50, 0x54
_JEQ_K, _JSET_K, _RET_K = 0x15, 0x45, 0x06


def roce_filter(every_roce_frame: bool = False) -> list[tuple[int, int, int, int]]:
    """Classic BPF (code, jt, jf, k) passing an Ethernet frame with IPv4, UDP to
    4791, not a later fragment, and either ECN CE in the TOS byte or BTH opcode
    CNP (with ``every_roce_frame``: any BTH); ``SNAP_BYTES`` of it (the headers)."""
    acc, rej = "accept", "reject"
    frag = IPV4.position("frag_offset")
    frag = frag.within(frag.byte, 2)                        # a halfword load
    ecn = IPV4.position("ecn")
    ecn = ecn.within(ecn.byte, 1)                           # a byte load
    # the UDP and BTH fields, after the IPv4 header: at X + these
    dport = ETH_HLEN + UDP.offset("dport")
    opcode = ETH_HLEN + UDP_HLEN + BTH.offset("opcode")
    prog: list[tuple[int, Any, Any, int]] = [
        (_LD_H_ABS, 0, 0, ETHERNET.offset("ethertype")), (_JEQ_K, 0, rej, ETHERTYPE_IPV4),
        (_LD_B_ABS, 0, 0, ETH_HLEN + IPV4.offset("proto")), (_JEQ_K, 0, rej, IP_PROTO_UDP),
        (_LD_H_ABS, 0, 0, ETH_HLEN + frag.offset), (_JSET_K, rej, 0, frag.mask << frag.shift),
        (_LDX_B_MSH, 0, 0, ETH_HLEN + IPV4.offset("ihl")),  # X = IP header length
    ]
    if every_roce_frame:
        prog += [(_LD_H_IND, 0, 0, dport), (_JEQ_K, acc, rej, ROCE_UDP_PORT)]
    else:
        prog += [
            (_LD_H_IND, 0, 0, dport), (_JEQ_K, 0, rej, ROCE_UDP_PORT),
            (_LD_B_ABS, 0, 0, ETH_HLEN + ecn.offset), (_ALU_AND_K, 0, 0, ecn.mask << ecn.shift),
            (_JEQ_K, acc, 0, ECN_CE << ecn.shift),
            (_LD_B_IND, 0, 0, opcode), (_JEQ_K, acc, rej, int(Opcode.CNP)),
        ]
    labels = {acc: len(prog), rej: len(prog) + 1}
    prog += [(_RET_K, 0, 0, SNAP_BYTES), (_RET_K, 0, 0, 0)]
    out = []
    for i, (code, jt, jf, k) in enumerate(prog):
        def off(j: Any, i: int = i) -> int:
            return labels[j] - i - 1 if isinstance(j, str) else int(j)
        out.append((code, off(jt), off(jf), k))
    return out


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


# ---------------------------------------------------------------------------
# the host's egress


class RxeDcqcnShim:
    """The per-host shim: the socket (notification and reaction point) and the
    HTB shaper on ``ifname``. Register the host's QPs once they are connected
    (:meth:`register_qp`), then call :meth:`poll` often and :meth:`close` at the end."""

    def __init__(self, *, ifname: str, local_ip: str, local_mac: str, gateway_mac: str,
                 line_rate_bps: float, cnp_interval_ns: int, burst_bytes: int,
                 count_wire: bool = False, nak_window_ns: int = 0) -> None:
        self.ifname, self.local_ip = ifname, local_ip
        self.local_mac, self.gateway_mac = local_mac, gateway_mac
        self.np = NotificationPoint(cnp_interval_ns)
        self.rp = ReactionPoint()
        self.wire = HostWireCounter(local_ip, nak_window_ns) if count_wire else None
        self.sock = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(ETH_P_ALL))
        try:
            attach_filter(self.sock, roce_filter(every_roce_frame=count_wire))
            if count_wire:
                # every frame of the host queues here between two polls, and an
                # agent under TCG sometimes stops for 0.1-0.3 s: a lost frame
                # would be a miscount
                set_buffer(self.sock, socket.SO_RCVBUF, WIRE_RCVBUF)
                # each frame's kernel time: a NAK's go-back is told from the
                # timer's by how soon it follows, whenever the agent polls
                self.sock.setsockopt(socket.SOL_SOCKET, SO_TIMESTAMPNS, 1)
            self.sock.bind((ifname, 0))
            self.sock.setblocking(False)
            self.shaper = HtbShaper(ifname, line_rate_bps, burst_bytes)
        except OSError as e:
            self.sock.close()
            raise ShimError(f"packet socket on {ifname}: {e}") from e
        except BaseException:
            self.sock.close()
            raise
        self.frames = 0
        self.cnp_tx_errors = 0
        self.byte_counter = ClassByteCounter(self.rp, self.shaper)
        self._arrived: list[Bth] = []      # read, not yet polled
        self._dscp: dict[int, int | None] = {}     # local QPN -> the DSCP its requests get

    def fileno(self) -> int:
        return self.sock.fileno()

    def register_qp(self, local_qpn: int, remote_ip: str, remote_qpn: int,
                    rc: RateController | None) -> None:
        """A connected QP: its CE-marked arrivals make CNPs to (remote_ip, remote_qpn);
        with a rate controller, its requests to that peer run at the controller's
        rate, whatever UDP source port (step tag) they carry."""
        self.np.register(local_qpn, remote_ip, remote_qpn)
        if self.wire is not None:
            self.wire.register(local_qpn, remote_ip, remote_qpn)
        if rc is not None:
            cid = self.rp.register(local_qpn, remote_ip, remote_qpn, rc)
            self.shaper.add_qp(cid, remote_ip, remote_qpn, htb_rate_bytes(rc.rate_bps))
            self.rp.qps[local_qpn].applied_bytes = htb_rate_bytes(rc.rate_bps)
            if self._dscp.get(local_qpn) is not None:
                self.shaper.set_qp_dscp(cid, self._dscp[local_qpn])

    def set_dscp(self, local_qpn: int, dscp: int | None) -> None:
        """Send the requests of QP ``local_qpn`` with DSCP ``dscp`` from now on
        (None: the traffic class the QP itself puts in them). rxe sets one
        traffic class per QP; the QP's filter on the host's egress rewrites
        it (hosts.roce.shaping.HtbShaper.set_qp_dscp). Before the QP is
        registered this is remembered and applied when it is."""
        if dscp is not None and not 0 <= dscp <= 63:
            raise ShimError(f"QP {local_qpn:#x}: DSCP {dscp} out of range (6 bits)")
        if self._dscp.get(local_qpn) == dscp:
            return
        self._dscp[local_qpn] = dscp
        q = self.rp.qps.get(local_qpn)
        if q is not None:
            self.shaper.set_qp_dscp(q.class_id, dscp)

    def poll(self, now_ns: int) -> None:
        """Read what arrived, send CNPs, feed the byte counters, run the
        controllers' timers, apply rates."""
        self._drain()
        got, self._arrived = self._arrived, []
        arrivals = [a for a in map(arrival_of, got)
                    if a is not None and a.dst_ip == self.local_ip]
        td = self.rp.next_deadline()
        self.byte_counter.read_if_due(now_ns, events=(td is not None and td <= now_ns) or any(
            a.kind == "cnp" and a.dqpn in self.rp.qps for a in arrivals))
        for a in arrivals:
            if a.kind == "ce":
                to = self.np.on_ce(a, now_ns)
                if to is not None:
                    self._send_cnp(*to)
            else:
                self.rp.on_cnp(a, now_ns)
        self.rp.on_timers(now_ns)
        for cid, b in self.rp.changed():
            self.shaper.set_rate(cid, b)

    @property
    def bytes_from_completions(self) -> bool:
        """Whether the caller must feed the byte counters from completed messages
        (the class counters could not be read: ``byte_counter.fallback`` says why)."""
        return self.byte_counter.fallback is not None

    def byte_counter_report(self) -> dict[str, Any]:
        """Where DCQCN's byte counters came from: ``source`` "htb_class" or
        "completions" (with ``fallback``, why), the class-counter reads and the
        bytes they fed."""
        bc = self.byte_counter
        return {"source": "completions" if bc.fallback is not None else "htb_class",
                "fallback": bc.fallback, "reads": bc.reads, "bytes": bc.bytes_fed}

    def next_deadline(self) -> int | None:
        ds = [d for d in (self.rp.next_deadline(), self.byte_counter.next_read_ns())
              if d is not None]
        return min(ds) if ds else None

    def qp_restarted(self, local_qpn: int) -> None:
        """QP ``local_qpn`` was reset to be connected again: its wire counts take
        the frames read so far as its previous connection's, the next ones as
        the new one's (its PSNs start over)."""
        if self.wire is not None:
            self._drain()
            self.wire.restart(local_qpn)

    def settle(self, timeout_s: float = SETTLE_S) -> bool:
        """Wait until the QPs' classes on the host's egress hold no packet (at
        most ``timeout_s``), then read what the socket holds, so that the wire
        counts include the requests that left after the work's last completion
        (retransmissions the timer queued before a late ACK). Whether the
        classes emptied; with no wire counts, nothing to wait for (True)."""
        from pyroute2.netlink.exceptions import NetlinkError

        if self.wire is None:
            return True
        try:
            empty = self.shaper.wait_until_sent(self.shaper.qp_classes, timeout_s)
        except (NetlinkError, OSError) as e:
            raise ShimError(f"tc class backlog on {self.ifname}: {e}") from e
        self._drain()
        return empty

    def _drain(self) -> None:
        """Read the RoCEv2 frames the socket holds, each parsed once: arrivals are
        kept for :meth:`poll`; with ``count_wire`` every frame, the host's own
        too, goes to the wire counts at once."""
        wire = self.wire
        while True:
            try:
                if wire is None:
                    data, addr = self.sock.recvfrom(SNAP_BYTES)
                else:
                    data, anc, _flags, addr = self.sock.recvmsg(SNAP_BYTES, TIMESTAMP_CMSG_SPACE)
            except BlockingIOError:
                return
            outgoing = addr[2] == PACKET_OUTGOING
            if not outgoing:
                self.frames += 1
            elif wire is None:
                continue        # this host's own CNPs
            b = parse_bth(data)
            if b is None:
                continue
            if wire is not None:
                t = kernel_time_ns(anc)
                wire.on_bth(b, outgoing, time.time_ns() if t is None else t)
            if not outgoing:
                self._arrived.append(b)

    def _send_cnp(self, remote_ip: str, remote_qpn: int) -> None:
        frame = cnp_frame(src_mac=self.local_mac, dst_mac=self.gateway_mac, src_ip=self.local_ip,
                          dst_ip=remote_ip, dqpn=remote_qpn)
        try:
            self.sock.send(frame)
        except OSError:
            self.cnp_tx_errors += 1

    def qp_counters(self, local_qpn: int) -> dict[str, int]:
        """ce_pkts and cnps_sent (notification point), cnps_rcvd (reaction point);
        with ``count_wire`` also the QP's WireCounts (retransmits, naks_rcvd, rto,
        wire_tx_pkts)."""
        n = self.np.qps.get(local_qpn)
        r = self.rp.qps.get(local_qpn)
        out = {"ce_pkts": n.ce_pkts if n else 0, "cnps_sent": n.cnps_sent if n else 0,
               "cnps_rcvd": r.cnps if r else 0}
        w = self.wire.qps.get(local_qpn) if self.wire is not None else None
        if w is not None:
            out.update(w.counters())
        return out

    def close(self) -> None:
        try:
            self.shaper.close()
        finally:
            self.sock.close()

