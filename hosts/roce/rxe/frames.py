"""The RoCEv2 frames the rxe hosts' DCQCN shim reads and writes.

- **Reading.** ``parse_bth`` takes what the shim needs of a RoCEv2 frame's
  headers (IPv4 addresses and TOS, UDP source port, BTH, an ACK's AETH
  syndrome); ``arrival_of`` / ``classify_frame`` tell a CE-marked packet or a
  CNP from anything else.
- **The packet filter.** ``roce_filter`` is the classic BPF program the shim's
  AF_PACKET socket runs: it passes only RoCEv2 packets (IPv4, UDP to 4791)
  that are CE-marked or are CNPs (with ``every_roce_frame``, every RoCEv2
  frame), ``SNAP_BYTES`` of each.
- **Writing.** ``cnp_frame`` is the CNP the notification point sends: a whole
  frame (Ethernet to the gateway, IPv4 with identification 0 and DF, UDP, BTH
  opcode 0x81 and the ICRC).

Pure logic: no rxe, no root.
"""

from __future__ import annotations

import socket
from dataclasses import dataclass
from typing import Any

from ground.wire.ethernet import ETH_HLEN, ETHERNET, ETHERTYPE_IPV4, mac_bytes
from ground.wire.icrc import pseudo_header
from ground.wire.ipv4 import FLAG_DF, IP_PROTO_UDP, IPV4, IPV4_HLEN, ip_bytes, with_checksum
from ground.wire.roce import AETH, BTH
from ground.wire.udp import UDP, UDP_HLEN
from hosts.roce.constants import ECN_CE, ROCE_UDP_PORT, Opcode
from hosts.roce.wire import encode_cnp

__all__ = ["Arrival", "Bth", "parse_bth", "arrival_of", "classify_frame", "cnp_frame",
           "roce_filter", "SNAP_BYTES", "CNP_TTL"]

CNP_TTL = 64
SNAP_BYTES = 128            # headers are all the shim reads


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

