"""RoCEv2's invariant CRC (ICRC), the 4 bytes that end every RoCEv2 packet.

CRC-32 (the Ethernet/zlib polynomial) over 8 bytes of 0xFF standing in for
the InfiniBand LRH, then the IPv4 header, the UDP header and the RoCE packet
(BTH .. the byte before the ICRC), with the fields routers may change set to
all ones: IPv4 TOS, TTL and header checksum, the UDP checksum and BTH byte 4.
It is stored least significant byte first.

A receiver checks it over the IPv4 and UDP headers exactly as they arrived
(``icrc_ok_ipv4``, any header length): real RoCE NICs and rdma_rxe fill in an
IPv4 identification and the ICRC covers it. A sender computes it over
``pseudo_header``, which by default assumes IHL 5, identification 0 and DF:
what Linux sends from an unconnected UDP socket with IP_PMTUDISC_DO.
"""

from __future__ import annotations

import zlib

from ground.wire.ipv4 import FLAG_DF, IP_PROTO_UDP, IPV4, IPV4_HLEN, ip_bytes
from ground.wire.layout import Bytes, Field, Header
from ground.wire.roce import BTH, ROCE_UDP_PORT
from ground.wire.udp import UDP, UDP_HLEN

__all__ = ["ICRC", "ICRC_LEN", "pseudo_header", "icrc", "icrc_parts", "icrc_after",
           "icrc_of_ipv4", "icrc_ok_ipv4", "check_icrc", "append_icrc"]

ICRC = Header("ICRC", Field("icrc", 32), order="<")
ICRC_LEN = ICRC.size

_LRH = Header("LRH stand-in", Bytes("ones", 8, b"\xff" * 8))
_FF = b"\xff"
_LRH_CRC = zlib.crc32(_LRH.pack())
_icrc_pack = ICRC.packer("icrc")
_icrc_unpack = ICRC.unpacker("icrc")

# the masked bytes, from the declarations
_IP_TOS = IPV4.offset("dscp")                 # DSCP and ECN: the TOS byte
_IP_TTL = IPV4.offset("ttl")
_IP_CSUM = IPV4.offset("checksum")
_UDP_CSUM = UDP.offset("checksum")
_BTH_VARIANT = BTH.offset("job_id")
_ihl = IPV4.position("ihl").within(IPV4.offset("ihl"), 1)
_IHL_AT, _IHL_SHIFT, _IHL_MASK = _ihl.offset, _ihl.shift, _ihl.mask
assert IPV4.position("dscp").byte == IPV4.position("ecn").byte
# the pseudo-header's variant fields, all ones
_IP_ONES = {n: IPV4.position(n).mask for n in ("dscp", "ecn", "ttl", "checksum")}
_UDP_ONES = {"checksum": UDP.position("checksum").mask}


def pseudo_header(src_ip: str | bytes, dst_ip: str | bytes, sport: int, roce_len: int,
                  dport: int = ROCE_UDP_PORT, *, ident: int = 0, flags: int = FLAG_DF,
                  frag_offset: int = 0, proto: int = IP_PROTO_UDP) -> bytes:
    """The ICRC's pseudo-header (LRH ones + masked IPv4 + masked UDP) for a RoCE
    packet of ``roce_len`` bytes (BTH..ICRC inclusive) from ``src_ip:sport``, in
    an IPv4 header without options."""
    n = UDP_HLEN + roce_len
    return (_LRH.pack()
            + IPV4.pack(total_length=IPV4_HLEN + n, ident=ident, flags=flags,
                        frag_offset=frag_offset, proto=proto, src=ip_bytes(src_ip),
                        dst=ip_bytes(dst_ip), **_IP_ONES)
            + UDP.pack(sport, dport, n, **_UDP_ONES))


def icrc(pseudo: bytes, roce: bytes | bytearray | memoryview) -> int:
    """ICRC of a RoCE packet (``roce`` = BTH .. last byte before the ICRC)."""
    crc = zlib.crc32(pseudo)
    crc = zlib.crc32(roce[:_BTH_VARIANT], crc)
    crc = zlib.crc32(_FF, crc)
    return zlib.crc32(roce[_BTH_VARIANT + 1:], crc)


def icrc_parts(pseudo: bytes, hdr: bytes, *rest: bytes | memoryview) -> int:
    """ICRC over ``hdr`` (starting with the BTH) followed by ``rest``, without joining."""
    crc = zlib.crc32(hdr[:_BTH_VARIANT] + _FF + hdr[_BTH_VARIANT + 1:], zlib.crc32(pseudo))
    for part in rest:
        crc = zlib.crc32(part, crc)
    return crc


def icrc_after(pseudo_crc: int, hdr: bytes, payload: bytes | memoryview, pad: bytes) -> int:
    """``icrc_parts(pseudo, hdr, payload, pad)`` from ``zlib.crc32(pseudo)``
    (a sender's pseudo-header is the same for every packet of one length):
    three CRC calls per packet instead of six."""
    crc = zlib.crc32(payload,
                     zlib.crc32(hdr[:_BTH_VARIANT] + _FF + hdr[_BTH_VARIANT + 1:], pseudo_crc))
    return zlib.crc32(pad, crc) if pad else crc


def icrc_of_ipv4(ip_packet: bytes | bytearray | memoryview) -> int:
    """ICRC of a whole IPv4/UDP/RoCE packet as it is on the wire (any IPv4 header,
    options included). The packet's last 4 bytes are where its ICRC is stored."""
    ihl = (ip_packet[_IHL_AT] >> _IHL_SHIFT & _IHL_MASK) * 4
    roce = ihl + UDP_HLEN
    # the headers and the BTH up to its variant byte, with the variant fields set to ones
    hdr = bytearray(ip_packet[: roce + _BTH_VARIANT + 1])
    hdr[_IP_TOS] = 0xFF
    hdr[_IP_TTL] = 0xFF
    hdr[_IP_CSUM] = hdr[_IP_CSUM + 1] = 0xFF
    hdr[ihl + _UDP_CSUM] = hdr[ihl + _UDP_CSUM + 1] = 0xFF
    hdr[roce + _BTH_VARIANT] = 0xFF
    mv = ip_packet if isinstance(ip_packet, memoryview) else memoryview(ip_packet)
    return zlib.crc32(mv[roce + _BTH_VARIANT + 1: len(mv) - ICRC_LEN],
                      zlib.crc32(hdr, _LRH_CRC))


def icrc_ok_ipv4(ip_packet: bytes | bytearray | memoryview) -> bool:
    """True if a received IPv4/UDP/RoCE packet (as it arrived: identification,
    flags, TOS and checksums untouched) ends in its correct ICRC."""
    n = len(ip_packet)
    if n < (ip_packet[_IHL_AT] >> _IHL_SHIFT & _IHL_MASK) * 4 + UDP_HLEN + BTH.size + ICRC_LEN:
        return False
    return icrc_of_ipv4(ip_packet) == _icrc_unpack(ip_packet, n - ICRC_LEN)[0]


def check_icrc(pseudo: bytes, roce: bytes | bytearray | memoryview) -> bool:
    """True if the last 4 bytes of the RoCE packet ``roce`` are its correct ICRC."""
    n = len(roce)
    if n < BTH.size + ICRC_LEN:
        return False
    mv = roce if isinstance(roce, memoryview) else memoryview(roce)
    return icrc(pseudo, mv[: n - ICRC_LEN]) == _icrc_unpack(mv, n - ICRC_LEN)[0]


def append_icrc(pseudo: bytes, body: bytes) -> bytes:
    """``body`` (BTH .. the byte before the ICRC) with its ICRC."""
    return body + _icrc_pack(icrc(pseudo, body))
