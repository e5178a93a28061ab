"""IPv4 (RFC 791): the header without options, and its checksum.

The TOS byte is declared as RFC 2474's DSCP and RFC 3168's ECN; the three
flag bits as one field (``FLAG_DF`` is its value for "don't fragment").
"""

from __future__ import annotations

import socket
import struct

from ground.wire.layout import Bytes, Field, Header

__all__ = ["IPV4", "IPV4_HLEN", "IP_PROTO_UDP", "FLAG_DF", "checksum", "with_checksum",
           "ip_bytes"]

IP_PROTO_UDP = 17
FLAG_DF = 0b010

IPV4 = Header(
    "IPv4",
    Field("version", 4, 4), Field("ihl", 4, 5),
    Field("dscp", 6), Field("ecn", 2),
    Field("total_length", 16),
    Field("ident", 16),
    Field("flags", 3), Field("frag_offset", 13),
    Field("ttl", 8, 64),
    Field("proto", 8, IP_PROTO_UDP),
    Field("checksum", 16),
    Bytes("src", 4), Bytes("dst", 4),
)
IPV4_HLEN = IPV4.size

_WORDS = struct.Struct("!10H")
_CSUM = IPV4.position("checksum")
assert _CSUM.size == 2 and _CSUM.shift == 0      # (with_checksum writes it whole)


def checksum(header: bytes | bytearray | memoryview) -> int:
    """The RFC 1071 checksum of a header (options included) whose checksum
    field is 0."""
    n = len(header)
    if n == IPV4_HLEN:
        s = sum(_WORDS.unpack(header))
    else:
        s = sum(struct.unpack(f"!{n // 2}H", header))
    while s >> 16:
        s = (s & 0xFFFF) + (s >> 16)
    return ~s & 0xFFFF


def with_checksum(header: bytes) -> bytes:
    """``header`` (its checksum field 0) with its checksum filled in."""
    o = _CSUM.offset
    return header[:o] + checksum(header).to_bytes(2, "big") + header[o + 2:]


def ip_bytes(ip: str | bytes) -> bytes:
    """An IPv4 address as its 4 bytes (dotted text, or the bytes themselves)."""
    return ip if isinstance(ip, bytes) else socket.inet_aton(ip)
