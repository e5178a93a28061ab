"""A host's egress as a RoCE NIC's transmit side: tc HTB on the host's interface.

Layout (handles major:minor): root qdisc 1:, class 1:1 at the NIC's line rate,
1:2 the default class (ACKs, CNPs, anything no QP class claims), and one
class per sending QP from 1:10 on, whose rate is the QP's DCQCN rate. The
kernel's hrtimers then space each QP's frames at its rate, as a NIC's
per-QP rate limiter does, and the sender only has to keep a few frames
queued there (hosts/roce/pacing.py, run-ahead) instead of waking up for
every packet.

- **udp-provider hosts** (:meth:`HtbShaper.add_class`): a QP's class has the
  floor HTB allows as its own rate and the QP's DCQCN rate as its ceiling,
  borrowing from 1:1: the QPs of one host share the line round-robin (HTB's
  quantum), as a NIC's arbiter does, none above its DCQCN rate. A QP's data
  leaves from a socket whose ``SO_PRIORITY`` is the class handle, which HTB
  uses directly (no filter); its ACKs and CNPs leave from the port's plain
  socket and stay in 1:2 (hosts/roce/udp_provider.py). The runner installs the root and the two
  fixed classes (testbed.net.shape_host); an agent adds and removes its QPs'
  classes (``own_root=False``).
- **rxe hosts** (:meth:`HtbShaper.add_qp`): the shim owns the root, and a
  u32 filter on the QP's requests - UDP to 4791 for its peer's address and
  QPN (BTH) - picks its class, whose rate and ceiling are both the QP's
  DCQCN rate (hosts/roce/rxe/dcqcn_shim.py). Not the UDP source port: a QP that
  carries a step tag changes it per step (a new flow label at RTR), and the
  host's ACKs for another QP may leave from the same port. The same filter
  rewrites the DSCP of the QP's requests when asked
  (:meth:`HtbShaper.set_qp_dscp`: tc pedit and csum actions), since rxe
  sends one traffic class per QP.

A QP's rate changes whenever DCQCN moves it (tens of times a second per
flow under marks), so that one message is built here and sent on a raw
netlink socket (:class:`HtbClassSetter`); pyroute2 does the rest (adding and
deleting classes, counters); through it a class change cost 0.4 to 0.6 ms
of CPython, a third of a sender's CPU in reflex-cases.
"""

from __future__ import annotations

import errno
import ipaddress
import itertools
import os
import socket
import struct
from collections.abc import Iterable
from typing import Any

from ground.wire.ipv4 import IP_PROTO_UDP, IPV4, IPV4_HLEN
from ground.wire.layout import FieldPos
from ground.wire.roce import BTH, ROCE_UDP_PORT
from ground.wire.udp import UDP, UDP_HLEN

__all__ = ["HtbShaper", "ShapingError", "qp_class_id", "htb_rate_bytes", "ROOT_QDISC",
           "ROOT_CLASS", "DEFAULT_CLASS", "FIRST_QP_MINOR", "MAX_QP_CLASSES", "MIN_RATE_BYTES",
           "QUANTUM_BYTES", "qp_match_keys", "tc_commands", "QpClass", "HtbClassSetter",
           "htb_buffer_ticks", "dscp_actions", "u32_change_message", "u32_handle_text",
           "QP_FILTER_PRIO"]

ETH_P_IP = 0x0800
ROOT_QDISC = 0x10000        # 1:
ROOT_CLASS = 0x10001        # 1:1, the NIC's line rate
DEFAULT_CLASS = 0x10002     # 1:2, what no QP class claims
FIRST_QP_MINOR = 0x10
MAX_QP_CLASSES = 0xFFFF - FIRST_QP_MINOR
MIN_RATE_BYTES = 16         # HTB's tables need a positive rate; 128 b/s is far below any preset's floor
# HTB's round-robin share per turn: one full frame of the links' 1500-byte MTU.
QUANTUM_BYTES = 1600


class ShapingError(RuntimeError):
    """The host's egress cannot be set up or changed; the message names the object."""


# rtnetlink and HTB's attributes (linux/rtnetlink.h, linux/pkt_sched.h)
_RTM_NEWTCLASS = 40
_NLM_F_REQUEST, _NLM_F_ACK = 0x1, 0x4
_NLMSG_ERROR = 2
_TCA_KIND, _TCA_OPTIONS = 1, 2
_TCA_HTB_PARMS = 1
_TC_LINKLAYER_ETHERNET = 1     # the kernel then needs no rate table
_PSCHED_SHIFT = 6              # HTB's buffers are in 64 ns ticks (PSCHED_NS2TICKS)
_NLMSGHDR = struct.Struct("=IHHII")          # len, type, flags, seq, pid
_TCMSG = struct.Struct("=BxxxiIII")          # family, ifindex, handle, parent, info
_NLATTR = struct.Struct("=HH")               # len, type
_RATESPEC = struct.Struct("=BBHhHI")         # cell_log, linklayer, overhead, cell_align, mpu, rate
_HTB_TAIL = struct.Struct("=IIIII")          # buffer, cbuffer, quantum, level, prio
# a u32 filter's class and actions (linux/pkt_cls.h, tc_act/tc_pedit.h, tc_act/tc_csum.h)
_RTM_NEWTFILTER = 44
_NLA_F_NESTED = 0x8000
_TCA_U32_CLASSID, _TCA_U32_ACT = 1, 7
_TCA_ACT_KIND, _TCA_ACT_OPTIONS = 1, 2
_TCA_PEDIT_PARMS = 2
_TCA_CSUM_PARMS = 1
_TCA_CSUM_UPDATE_FLAG_IPV4HDR = 1
_TC_ACT_PIPE = 3
_TC_GEN = struct.Struct("=IIiii")            # index, capab, action, refcnt, bindcnt
_PEDIT_SEL_TAIL = struct.Struct("=BBxx")     # nkeys, flags (the keys start 4-aligned)
_PEDIT_KEY_TAIL = struct.Struct("=IIII")     # off, at, offmask, shift (after mask, val)
QP_FILTER_PRIO = 10          # the u32 filters that pick rxe QPs' classes


def htb_buffer_ticks(burst_bytes: int, rate_bytes: int) -> int:
    """HTB's ``buffer`` for a burst at a rate: the time the burst takes at the
    rate, in the kernel's 64 ns scheduler ticks (what ``tc`` computes from
    /proc/net/psched), capped to its u32 field."""
    return min(0xFFFFFFFF, (burst_bytes * 1_000_000_000 // max(1, rate_bytes)) >> _PSCHED_SHIFT)


def _attr(kind: int, payload: bytes) -> bytes:
    n = _NLATTR.size + len(payload)
    return _NLATTR.pack(n, kind) + payload + b"\0" * (-n & 3)


def _action(order: int, kind: str, parms_type: int, parms: bytes) -> bytes:
    """One tc action of a filter's action list, at position ``order``."""
    return _attr(order, _attr(_TCA_ACT_KIND, kind.encode() + b"\0")
                 + _attr(_TCA_ACT_OPTIONS | _NLA_F_NESTED, _attr(parms_type, parms)))


def dscp_actions(dscp: int) -> bytes:
    """The actions that make an IPv4 packet's DSCP ``dscp``, its ECN bits kept:
    pedit sets the TOS byte's six high bits (the first header word, with the
    other 26 bits masked to stay), then csum makes the header checksum right
    again. RoCEv2's ICRC masks the TOS byte, so the receiver still accepts."""
    if not 0 <= dscp <= 63:
        raise ShapingError(f"DSCP {dscp} out of range (6 bits)")
    pedit = (_TC_GEN.pack(0, 0, _TC_ACT_PIPE, 0, 0) + _PEDIT_SEL_TAIL.pack(1, 0)
             + b"\xff\x03\xff\xff" + bytes((0, dscp << 2, 0, 0))     # mask, value: wire order
             + _PEDIT_KEY_TAIL.pack(0, 0, 0, 0))
    csum = _TC_GEN.pack(0, 0, _TC_ACT_PIPE, 0, 0) + struct.pack("=I",
                                                               _TCA_CSUM_UPDATE_FLAG_IPV4HDR)
    return (_action(1, "pedit", _TCA_PEDIT_PARMS, pedit)
            + _action(2, "csum", _TCA_CSUM_PARMS, csum))


def u32_change_message(ifindex: int, handle: int, class_id: int, dscp: int | None,
                       seq: int = 0) -> bytes:
    """The request (RTM_NEWTFILTER, as ``tc filter change`` sends it) that gives
    the existing u32 filter ``handle`` on the root qdisc (prio
    :data:`QP_FILTER_PRIO`) class ``class_id`` and, unless ``dscp`` is None,
    the actions of :func:`dscp_actions`; its match keys stay. The kernel swaps
    the filter whole: no packet sees it half changed."""
    opts = _attr(_TCA_U32_CLASSID, struct.pack("=I", class_id))
    if dscp is not None:
        opts += _attr(_TCA_U32_ACT, dscp_actions(dscp))
    info = (QP_FILTER_PRIO << 16) | socket.htons(ETH_P_IP)
    body = (_TCMSG.pack(socket.AF_UNSPEC, ifindex, handle, ROOT_QDISC, info)
            + _attr(_TCA_KIND, b"u32\0") + _attr(_TCA_OPTIONS, opts))
    return _NLMSGHDR.pack(_NLMSGHDR.size + len(body), _RTM_NEWTFILTER,
                          _NLM_F_REQUEST | _NLM_F_ACK, seq, 0) + body


def u32_handle_text(handle: int) -> str:
    """A u32 filter handle as tc prints it: table:bucket:node, 800::800."""
    bucket = (handle >> 12) & 0xFF
    return f"{handle >> 20:x}:{bucket:x}:{handle & 0xFFF:x}" if bucket else \
        f"{handle >> 20:x}::{handle & 0xFFF:x}"


class _RtnlRequests:
    """A raw NETLINK_ROUTE socket: a request built by hand, the kernel's answer."""

    def __init__(self) -> None:
        self._seq = itertools.count(1)
        self._sock = socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, socket.NETLINK_ROUTE)
        try:
            self._sock.bind((0, 0))
            self._sock.settimeout(5.0)      # the kernel answers at once; never hang on it
        except OSError:
            self._sock.close()
            raise

    def next_seq(self) -> int:
        return next(self._seq) & 0xFFFFFFFF

    def request(self, message: bytes, seq: int, what: str) -> None:
        """Send ``message`` (sequence number ``seq``); the kernel's refusal
        raises ShapingError naming ``what``."""
        self._sock.send(message)
        while True:
            reply = self._sock.recv(4096)
            off = 0
            while off + _NLMSGHDR.size <= len(reply):
                length, kind, _flags, rseq, _pid = _NLMSGHDR.unpack_from(reply, off)
                if kind == _NLMSG_ERROR and rseq == seq:
                    (code,) = struct.unpack_from("=i", reply, off + _NLMSGHDR.size)
                    if code:
                        raise ShapingError(f"{what}: {os.strerror(-code)} "
                                           f"({errno.errorcode.get(-code, -code)})")
                    return
                off += max(_NLMSGHDR.size, (length + 3) & ~3)

    def close(self) -> None:
        self._sock.close()


class HtbClassSetter:
    """Changes an HTB class's rate and ceiling with one hand-built rtnetlink
    message (RTM_NEWTCLASS, as ``tc class change`` sends it) on a raw
    NETLINK_ROUTE socket, and reads the kernel's answer: about 9 us, where
    pyroute2 builds the same message in 0.4 to 0.6 ms of CPython. An rxe QP
    filter's DSCP rewrite changes the same way (:meth:`set_filter_dscp`)."""

    def __init__(self, ifindex: int, burst_bytes: int, quantum_bytes: int) -> None:
        self.ifindex = ifindex
        self.burst = int(burst_bytes)
        self.quantum = int(quantum_bytes)
        self._rtnl = _RtnlRequests()

    def message(self, class_id: int, parent: int, rate_bytes: int, ceil_bytes: int,
                seq: int = 0) -> bytes:
        """The request that sets class ``class_id`` (under ``parent``) to
        ``rate_bytes`` / ``ceil_bytes`` (bytes/s), with the burst of both."""
        opt = (_RATESPEC.pack(0, _TC_LINKLAYER_ETHERNET, 0, 0, 0, rate_bytes)
               + _RATESPEC.pack(0, _TC_LINKLAYER_ETHERNET, 0, 0, 0, ceil_bytes)
               + _HTB_TAIL.pack(htb_buffer_ticks(self.burst, rate_bytes),
                                htb_buffer_ticks(self.burst, ceil_bytes), self.quantum, 0, 0))
        body = (_TCMSG.pack(socket.AF_UNSPEC, self.ifindex, class_id, parent, 0)
                + _attr(_TCA_KIND, b"htb\0")
                + _attr(_TCA_OPTIONS, _attr(_TCA_HTB_PARMS, opt)))
        return _NLMSGHDR.pack(_NLMSGHDR.size + len(body), _RTM_NEWTCLASS,
                              _NLM_F_REQUEST | _NLM_F_ACK, seq, 0) + body

    def set(self, class_id: int, parent: int, rate_bytes: int, ceil_bytes: int) -> None:
        """Apply the change; the kernel's refusal raises ShapingError."""
        seq = self._rtnl.next_seq()
        self._rtnl.request(self.message(class_id, parent, rate_bytes, ceil_bytes, seq), seq,
                           f"htb class {class_id >> 16:x}:{class_id & 0xFFFF:x} at "
                           f"{ceil_bytes * 8} b/s (interface index {self.ifindex})")

    def set_filter_dscp(self, handle: int, class_id: int, dscp: int | None) -> None:
        """Give u32 filter ``handle`` (to class ``class_id``) the DSCP rewrite
        ``dscp`` (None: none); the kernel's refusal raises ShapingError."""
        seq = self._rtnl.next_seq()
        what = (f"u32 filter {u32_handle_text(handle)} (interface index "
                f"{self.ifindex}) " + ("without actions" if dscp is None else
                                        f"setting DSCP {dscp} (tc actions pedit and csum)"))
        try:
            self._rtnl.request(u32_change_message(self.ifindex, handle, class_id, dscp, seq),
                               seq, what)
        except ShapingError as e:
            if dscp is None or "ENOENT" not in str(e):
                raise
            raise ShapingError(f"{e}; the kernel needs tc's pedit and csum actions "
                               "(modules act_pedit, act_csum)") from None

    def close(self) -> None:
        self._rtnl.close()


def qp_class_id(slot: int) -> int:
    """HTB class handle of the ``slot``-th sending QP (0-based): 1:10, 1:11, ..."""
    if not 0 <= slot < MAX_QP_CLASSES:
        raise ShapingError(f"at most {MAX_QP_CLASSES} sending QPs per host (slot {slot})")
    return (ROOT_QDISC & 0xFFFF0000) | (FIRST_QP_MINOR + slot)


def htb_rate_bytes(rate_bps: float) -> int:
    """An HTB rate (bytes/s, what the kernel's u32 field holds) for ``rate_bps``."""
    if not rate_bps > 0:
        raise ShapingError(f"a class rate must be positive, got {rate_bps} b/s")
    b = round(rate_bps / 8)
    if b > 0xFFFFFFFF:
        raise ShapingError(f"{rate_bps:.4g} b/s exceeds HTB's 32-bit rate field")
    return max(MIN_RATE_BYTES, b)


def tc_commands(ifname: str, line_rate_bps: float, burst_bytes: int) -> list[str]:
    """The ``tc`` commands that install the root, 1:1 and 1:2 on ``ifname``
    (for a host the caller reaches through its shell)."""
    line = htb_rate_bytes(line_rate_bps) * 8
    fixed = f"burst {burst_bytes} cburst {burst_bytes} quantum {QUANTUM_BYTES}"
    return [f"tc qdisc replace dev {ifname} root handle 1: htb default "
            f"{DEFAULT_CLASS & 0xFFFF:x}",
            f"tc class add dev {ifname} parent 1: classid 1:1 htb rate {line}bit "
            f"ceil {line}bit {fixed}",
            f"tc class add dev {ifname} parent 1:1 classid 1:{DEFAULT_CLASS & 0xFFFF:x} htb "
            f"rate {MIN_RATE_BYTES * 8}bit ceil {line}bit {fixed}"]


def qp_match_keys(dst_ip: str, dst_qpn: int) -> list[str]:
    """u32 keys (value/mask+offset from the IPv4 header, which rxe sends with no
    options) matching RoCEv2 packets (UDP to 4791) to QP ``dst_qpn`` at
    ``dst_ip``: one QP's requests (its ACKs go to its peer's requester, another
    QPN). The BTH's destination QP is the low 24 bits of its second word."""
    try:
        ip = int(ipaddress.IPv4Address(dst_ip))
    except ValueError as e:
        raise ShapingError(f"not an IPv4 address: {dst_ip!r}") from e
    if not 0 <= dst_qpn <= 0xFFFFFF:
        raise ShapingError(f"QPN {dst_qpn:#x} out of range (24 bits)")
    udp = IPV4_HLEN
    bth = udp + UDP_HLEN
    return [_u32_key(0, IPV4.position("proto"), IP_PROTO_UDP),
            _u32_key(0, IPV4.position("dst"), ip),
            _u32_key(udp, UDP.position("dport"), ROCE_UDP_PORT),
            _u32_key(bth, BTH.position("dqpn"), dst_qpn)]


def _u32_key(base: int, pos: FieldPos, value: int) -> str:
    """A u32 key (a 32-bit word at a 4-aligned offset from the IPv4 header)
    matching ``value`` in the field at ``pos`` of a header ``base`` bytes in."""
    start = base + pos.byte
    word = start - start % 4
    p = pos.within(word - base, 4)
    mask = p.mask << p.shift
    return f"0x{value << p.shift & mask:08x}/0x{mask:08x}+{word}"


class HtbShaper:
    """tc HTB on ``ifname``. With ``own_root`` (rxe hosts) it installs the
    root, the line-rate class 1:1 and the default class, and :meth:`close`
    deletes the root; without it (udp hosts) it uses the root the runner
    installed and :meth:`close` deletes only the classes it added."""

    def __init__(self, ifname: str, line_rate_bps: float, burst_bytes: int,
                 mtu_bytes: int = QUANTUM_BYTES, *, own_root: bool = True) -> None:
        from pyroute2 import IPRoute

        self.ifname = ifname
        self.burst = int(burst_bytes)
        self.mtu = int(mtu_bytes)
        self.line = htb_rate_bytes(line_rate_bps)
        self.own_root = own_root
        self._added: dict[int, None] = {}   # priority-picked classes
        self._qp_filters: dict[int, int] = {}   # rxe QP class -> its u32 filter's handle
        self._next_slot = 0
        self._ipr = IPRoute()
        found = self._ipr.link_lookup(ifname=ifname)
        if not found:
            self._ipr.close()
            raise ShapingError(f"tc on {ifname}: no such interface")
        self.index = found[0]
        self._installed = False
        try:
            self._setter = HtbClassSetter(self.index, self.burst, self.mtu)
        except OSError as e:
            self._ipr.close()
            raise ShapingError(f"tc on {ifname}: netlink socket: {e}") from e
        if not own_root:
            kinds = [m.get_attr("TCA_KIND") for m in self._ipr.get_qdiscs(index=self.index)
                     if m["parent"] == 0xFFFFFFFF]
            if kinds != ["htb"]:
                self._ipr.close()
                self._setter.close()
                raise ShapingError(f"tc on {ifname}: the root qdisc is {kinds or 'none'}, not "
                                   "the HTB the runner installs (Topology.host_line_qdisc)")
            return
        self._do(f"root htb qdisc on {ifname}", "add", "htb", ROOT_QDISC,
                 default=DEFAULT_CLASS & 0xFFFF)
        self._installed = True
        self._class("add-class", ROOT_CLASS, self.line, parent=ROOT_QDISC)
        self._class("add-class", DEFAULT_CLASS, self.line, parent=ROOT_CLASS)

    def _do(self, what: str, command: str, kind: str | None, handle: int, **kw: Any) -> None:
        from pyroute2.netlink.exceptions import NetlinkError

        try:
            self._ipr.tc(command, kind, self.index, handle, **kw)
        except NetlinkError as e:
            raise ShapingError(f"tc {command} {what}: {e}") from e

    def _class(self, command: str, handle: int, ceil_bytes: int, *, parent: int,
               rate_bytes: int | None = None) -> None:
        rate = ceil_bytes if rate_bytes is None else rate_bytes
        self._do(f"htb class {handle >> 16:x}:{handle & 0xFFFF:x} at {ceil_bytes * 8} b/s on "
                 f"{self.ifname}", command, "htb", handle, parent=parent, rate=rate,
                 ceil=ceil_bytes, burst=self.burst, cburst=self.burst, quantum=self.mtu,
                 mtu=self.mtu)

    def add_qp(self, class_id: int, dst_ip: str, dst_qpn: int, rate_bytes: int) -> None:
        """A class for the rxe QP connected to QP ``dst_qpn`` at ``dst_ip``, at
        ``rate_bytes``, and the filter that sends its requests there."""
        keys = qp_match_keys(dst_ip, dst_qpn)
        self._class("add-class", class_id, min(rate_bytes, self.line), parent=ROOT_CLASS)
        what = (f"u32 filter to QP {dst_qpn:#x} at {dst_ip} -> class {class_id & 0xFFFF:x} on "
                f"{self.ifname}")
        self._do(what, "add-filter", "u32", 0, parent=ROOT_QDISC, prio=QP_FILTER_PRIO,
                 protocol=ETH_P_IP, target=class_id, keys=keys)
        self._qp_filters[class_id] = self._filter_to(class_id, what)

    def _filter_to(self, class_id: int, what: str) -> int:
        """The handle the kernel gave the u32 filter to class ``class_id``."""
        from pyroute2.netlink.exceptions import NetlinkError

        try:
            for msg in self._ipr.get_filters(index=self.index, parent=ROOT_QDISC):
                opts = msg.get_attr("TCA_OPTIONS")
                if (msg.get_attr("TCA_KIND") == "u32" and opts is not None
                        and opts.get_attr("TCA_U32_CLASSID") == class_id):
                    return int(msg["handle"])
        except (NetlinkError, OSError) as e:
            raise ShapingError(f"tc filter show (after adding the {what}): {e}") from e
        raise ShapingError(f"the {what} is not in the kernel's filter list")

    def set_qp_dscp(self, class_id: int, dscp: int | None) -> None:
        """Rewrite the DSCP of the packets the rxe QP of class ``class_id``
        sends (:meth:`add_qp`) to ``dscp``, or (None) leave them as the QP
        sends them. rxe puts one traffic class in every packet of a QP; a
        sender that moves its flow between priorities (ReFlex) does it here,
        on the host's egress, as a NIC's per-packet marking would."""
        handle = self._qp_filters.get(class_id)
        if handle is None:
            raise ShapingError(f"no rxe QP filter to class {class_id >> 16:x}:"
                               f"{class_id & 0xFFFF:x} on {self.ifname}")
        self._setter.set_filter_dscp(handle, class_id, dscp)

    def add_class(self, class_id: int, ceil_bytes: int) -> None:
        """A QP class picked by priority: the floor as its rate, ``ceil_bytes``
        as its ceiling, borrowing from the line. Replaces a class of the same
        handle left by an agent that did not close."""
        self._class("replace-class", class_id, min(ceil_bytes, self.line), parent=ROOT_CLASS,
                    rate_bytes=MIN_RATE_BYTES)
        self._added[class_id] = None

    def new_qp_class(self, rate_bps: float) -> QpClass:
        """The next priority-picked QP class (1:10, 1:11, ...), at ``rate_bps``."""
        cid = qp_class_id(self._next_slot)
        self._next_slot += 1
        self.add_class(cid, htb_rate_bytes(rate_bps))
        return QpClass(self, cid, rate_bps)

    def set_rate(self, class_id: int, rate_bytes: int) -> None:
        """The rate (rxe classes) or the ceiling (priority-picked classes) of a class."""
        ceil = min(rate_bytes, self.line)
        rate = MIN_RATE_BYTES if class_id in self._added else ceil
        try:
            self._setter.set(class_id, ROOT_CLASS, rate, ceil)
        except OSError as e:
            raise ShapingError(f"tc change htb class {class_id >> 16:x}:{class_id & 0xFFFF:x} "
                               f"on {self.ifname}: {e}") from e

    def class_bytes(self) -> dict[int, int]:
        """Bytes sent per class handle (the kernel's counters: every frame the
        class dequeued, Ethernet header to ICRC): one netlink dump of the
        interface's classes."""
        from pyroute2.netlink.exceptions import NetlinkError

        out = {}
        try:
            for msg in self._ipr.get_classes(index=self.index):
                st = msg.get_attr("TCA_STATS")
                if st is not None:
                    out[msg["handle"]] = int(st["bytes"])
        except (NetlinkError, OSError) as e:
            raise ShapingError(f"tc class counters on {self.ifname}: {e}") from e
        return out

    def queued_packets(self, classes: Iterable[int]) -> int:
        """Packets queued now in the classes of handles ``classes``."""
        want = set(classes)
        if not want:
            return 0
        total = 0
        for msg in self._ipr.get_classes(index=self.index):
            if msg["handle"] in want:
                st = msg.get_attr("TCA_STATS")
                total += int(st["qlen"]) if st is not None else 0
        return total

    @property
    def qp_classes(self) -> list[int]:
        """The handles of the rxe QPs' classes (:meth:`add_qp`)."""
        return list(self._qp_filters)

    def wait_until_sent(self, classes: Iterable[int], timeout_s: float) -> bool:
        """Wait, at most ``timeout_s``, until the classes of handles ``classes``
        hold no packet; whether they emptied."""
        import time

        want = list(classes)
        deadline = time.monotonic() + timeout_s
        while (left := self.queued_packets(want)) and time.monotonic() < deadline:
            time.sleep(0.005)
        return not left

    def close(self, drain_s: float = 1.0) -> None:
        """Remove what this shaper added. Classes it added are deleted once
        their queues have drained (at most ``drain_s``): deleting a class
        drops what it holds, which the runner would count as the host's
        drops."""
        from pyroute2.netlink.exceptions import NetlinkError

        try:
            if self._added and not self._installed:
                try:
                    self.wait_until_sent(self._added, drain_s)
                except NetlinkError:
                    pass        # the interface is gone: nothing to wait for
            if self._installed:
                self._installed = False
                try:
                    self._ipr.tc("del", None, self.index, ROOT_QDISC)
                except NetlinkError:
                    pass        # the interface is gone already
            for cid in reversed(list(self._added)):
                try:
                    self._ipr.tc("del-class", "htb", self.index, cid, parent=ROOT_CLASS)
                except NetlinkError:
                    pass        # the interface or the class is gone already
            self._added.clear()
        finally:
            self._ipr.close()
            self._setter.close()


class QpClass:
    """One QP's priority-picked class, as its pacer drives it (hosts.roce.pacing
    ShapedClass): the kernel packet priority that selects it, and its rate."""

    def __init__(self, shaper: HtbShaper, class_id: int, rate_bps: float) -> None:
        self.shaper = shaper
        self.class_id = class_id
        self.skb_priority = class_id
        self.applied_bytes = htb_rate_bytes(rate_bps)
        self.changes = 0

    def set_rate(self, rate_bps: float) -> None:
        b = htb_rate_bytes(rate_bps)
        if b != self.applied_bytes:
            self.shaper.set_rate(self.class_id, b)
            self.applied_bytes = b
            self.changes += 1

    def report(self) -> dict[str, Any]:
        """The class, the rate it was left at, its rate changes and the bytes
        the kernel sent through it."""
        c = self.class_id
        return {"class": f"{c >> 16:x}:{c & 0xFFFF:x}", "rate_bps": self.applied_bytes * 8,
                "rate_changes": self.changes,
                "sent_bytes": self.shaper.class_bytes().get(c, 0)}
