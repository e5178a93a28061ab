"""RoCEv2 packet encoding/decoding and the ICRC.

A "RoCE packet" here is the UDP payload: BTH [RETH|AETH] [ImmDt] payload pad ICRC.

ICRC (RoCEv2 invariant CRC): CRC-32 (the Ethernet/zlib polynomial) over
8 bytes of 0xFF standing in for the InfiniBand LRH, then the IPv4 header, the
UDP header and the RoCE packet up to the ICRC, with the fields routers may
change set to all ones: IPv4 TOS, TTL and header checksum, the UDP checksum and
BTH byte 4 (Resv8a; the testbed's job id). It is stored least significant byte
first.

Receivers check the ICRC over the IPv4 and UDP headers exactly as they arrived
(``icrc_ok_ipv4``): real RoCE NICs and rdma_rxe fill in an IPv4 identification
and the ICRC covers it, so a rebuilt header would reject their packets. Senders
compute it over ``pseudo_header``, which assumes IHL 5, identification 0 and DF:
what Linux sends from an unconnected UDP socket with IP_PMTUDISC_DO (the udp
provider sets it).
"""

from __future__ import annotations

import socket
import struct
import zlib

from hosts.roce.constants import (
    AETH_LEN,
    BTH_DEFAULT_PKEY,
    BTH_LEN,
    CNP_BTH_BYTE4,
    CNP_RESERVED_BYTES,
    ICRC_LEN,
    IMMDT_LEN,
    IP_PROTO_UDP,
    IPV4_HDR_LEN,
    OPS_WITH_IMM,
    OPS_WITH_RETH,
    RETH_LEN,
    ROCE_UDP_PORT,
    UDP_HDR_LEN,
    Opcode,
)

BTH = struct.Struct("!BBHII")       # opcode, se|mig|pad|tver, pkey, byte4|dqpn, ackreq|psn
RETH = struct.Struct("!QII")        # va, rkey, dma_len
AETH = struct.Struct("!I")          # syndrome << 24 | msn
IMMDT = struct.Struct("!I")
ICRC = struct.Struct("<I")
# 8 x 0xFF (LRH), IPv4 header, UDP header: the ICRC pseudo-header prefix.
_PSEUDO = struct.Struct("!8sBBHHHBBH4s4sHHHH")
_LRH_ONES = b"\xff" * 8
_FF = b"\xff"
IP_FLAG_DF = 0x4000


class WireError(ValueError):
    """A malformed RoCE packet."""


def ip_bytes(ip: str | bytes) -> bytes:
    return ip if isinstance(ip, bytes) else socket.inet_aton(ip)


def pseudo_header(src_ip: str | bytes, dst_ip: str | bytes, sport: int,
                  roce_len: int, dport: int = ROCE_UDP_PORT) -> bytes:
    """ICRC pseudo-header (LRH ones + masked IPv4 + masked UDP) for a RoCE packet of
    ``roce_len`` bytes (BTH..ICRC inclusive) sent from ``src_ip:sport``."""
    return _PSEUDO.pack(_LRH_ONES, 0x45, 0xFF, IPV4_HDR_LEN + UDP_HDR_LEN + roce_len, 0,
                        IP_FLAG_DF, 0xFF, IP_PROTO_UDP, 0xFFFF, ip_bytes(src_ip),
                        ip_bytes(dst_ip), sport, dport, UDP_HDR_LEN + roce_len, 0xFFFF)


def icrc(pseudo: bytes, roce: bytes | bytearray | memoryview) -> int:
    """ICRC of a RoCE packet (``roce`` = BTH .. last byte before the ICRC)."""
    crc = zlib.crc32(pseudo)
    crc = zlib.crc32(roce[:4], crc)
    crc = zlib.crc32(_FF, crc)
    return zlib.crc32(roce[5:], crc)


def icrc_parts(pseudo: bytes, hdr: bytes, *rest: bytes | memoryview) -> int:
    """ICRC over ``hdr`` (starting with the BTH) followed by ``rest``, without joining."""
    crc = zlib.crc32(hdr[:4] + _FF + hdr[5:], zlib.crc32(pseudo))
    for part in rest:
        crc = zlib.crc32(part, crc)
    return crc


def icrc_after(pseudo_crc: int, hdr: bytes, payload: bytes | memoryview, pad: bytes) -> int:
    """``icrc_parts(pseudo, hdr, payload, pad)`` from ``zlib.crc32(pseudo)``
    (a sender's pseudo-header is the same for every packet of one length):
    three CRC calls per packet instead of six."""
    crc = zlib.crc32(payload, zlib.crc32(hdr[:4] + _FF + hdr[5:], pseudo_crc))
    return zlib.crc32(pad, crc) if pad else crc


_LRH_CRC = zlib.crc32(_LRH_ONES)


def icrc_of_ipv4(ip_packet: bytes | bytearray | memoryview) -> int:
    """ICRC of a whole IPv4/UDP/RoCE packet as it is on the wire (any IPv4 header,
    options included). The packet's last 4 bytes are where its ICRC is stored."""
    ihl = (ip_packet[0] & 0x0F) * 4
    roce = ihl + UDP_HDR_LEN
    # The headers and the first BTH word with the variant fields set to ones:
    # TOS, TTL, IPv4 checksum, UDP checksum, BTH byte 4.
    hdr = bytearray(ip_packet[: roce + 5])
    hdr[1] = 0xFF
    hdr[8] = 0xFF
    hdr[10] = hdr[11] = 0xFF
    hdr[ihl + 6] = hdr[ihl + 7] = 0xFF
    hdr[roce + 4] = 0xFF
    mv = ip_packet if isinstance(ip_packet, memoryview) else memoryview(ip_packet)
    return zlib.crc32(mv[roce + 5: len(mv) - ICRC_LEN], zlib.crc32(hdr, _LRH_CRC))


def icrc_ok_ipv4(ip_packet: bytes | bytearray | memoryview) -> bool:
    """True if a received IPv4/UDP/RoCE packet (as it arrived: identification,
    flags, TOS and checksums untouched) ends in its correct ICRC."""
    n = len(ip_packet)
    if n < (ip_packet[0] & 0x0F) * 4 + UDP_HDR_LEN + BTH_LEN + ICRC_LEN:
        return False
    return icrc_of_ipv4(ip_packet) == ICRC.unpack_from(ip_packet, n - ICRC_LEN)[0]


def bth(opcode: int, dqpn: int, psn: int, *, job_id: int = 0, ackreq: bool = False,
        se: bool = False, padcnt: int = 0, pkey: int = BTH_DEFAULT_PKEY,
        migreq: bool = False, tver: int = 0) -> bytes:
    flags = (se << 7) | (migreq << 6) | ((padcnt & 3) << 4) | (tver & 0xF)
    return BTH.pack(opcode, flags, pkey, ((job_id & 0xFF) << 24) | (dqpn & 0xFFFFFF),
                    (ackreq << 31) | (psn & 0xFFFFFF))


def encode_packet(pseudo_fn, opcode: int, dqpn: int, psn: int, *, job_id: int = 0,
                  ackreq: bool = False, se: bool = False, pkey: int = BTH_DEFAULT_PKEY,
                  reth: tuple[int, int, int] | None = None,
                  aeth: tuple[int, int] | None = None, imm: int | None = None,
                  payload: bytes | memoryview = b"") -> bytes:
    """A complete RoCE packet with its ICRC.

    ``pseudo_fn(roce_len) -> bytes`` gives the ICRC pseudo-header (see
    ``pseudo_header``); ``reth`` = (va, rkey, dma_len), ``aeth`` = (syndrome, msn).
    """
    pad = -len(payload) & 3
    parts = [bth(opcode, dqpn, psn, job_id=job_id, ackreq=ackreq, se=se, padcnt=pad,
                 pkey=pkey)]
    if reth is not None:
        parts.append(RETH.pack(*reth))
    if aeth is not None:
        parts.append(AETH.pack(((aeth[0] & 0xFF) << 24) | (aeth[1] & 0xFFFFFF)))
    if imm is not None:
        parts.append(IMMDT.pack(imm & 0xFFFFFFFF))
    parts.append(bytes(payload))
    parts.append(b"\x00" * pad)
    body = b"".join(parts)
    crc = icrc(pseudo_fn(len(body) + ICRC_LEN), body)
    return body + ICRC.pack(crc)


def encode_cnp(pseudo_fn, dqpn: int, pkey: int = BTH_DEFAULT_PKEY) -> bytes:
    """A CNP (RoCEv2 annex): BTH opcode 0x81 with BECN set, PSN 0, 16 reserved bytes."""
    body = BTH.pack(Opcode.CNP, 0, pkey, (CNP_BTH_BYTE4 << 24) | (dqpn & 0xFFFFFF), 0) + (
        b"\x00" * CNP_RESERVED_BYTES)
    return body + ICRC.pack(icrc(pseudo_fn(len(body) + ICRC_LEN), body))


class Packet:
    """A decoded RoCE packet; ``payload`` is a memoryview into the received buffer."""

    __slots__ = ("opcode", "se", "migreq", "padcnt", "tver", "pkey", "job_id", "dqpn",
                 "ackreq", "psn", "reth", "aeth", "imm", "payload", "icrc")
    opcode: int
    se: bool
    migreq: bool
    padcnt: int
    tver: int
    pkey: int
    job_id: int
    dqpn: int
    ackreq: bool
    psn: int
    reth: tuple[int, int, int] | None     # va, rkey, dma_len
    aeth: tuple[int, int] | None          # syndrome, msn
    imm: int | None
    payload: memoryview
    icrc: int

    def __repr__(self) -> str:
        try:
            op = Opcode(self.opcode).name
        except ValueError:
            op = hex(self.opcode)
        return (f"Packet({op} dqpn={self.dqpn} psn={self.psn} job={self.job_id} "
                f"ackreq={int(self.ackreq)} reth={self.reth} aeth={self.aeth} "
                f"imm={self.imm} len={len(self.payload)})")


def decode(data: bytes | bytearray | memoryview) -> Packet:
    """Parse a RoCE packet (UDP payload). Does not check the ICRC (see ``icrc``)."""
    n = len(data)
    if n < BTH_LEN + ICRC_LEN:
        raise WireError(f"packet of {n} bytes is shorter than BTH + ICRC")
    mv = data if isinstance(data, memoryview) else memoryview(data)
    op, flags, pkey, w1, w2 = BTH.unpack_from(mv, 0)
    p = Packet()
    p.opcode = op
    p.se = bool(flags & 0x80)
    p.migreq = bool(flags & 0x40)
    p.padcnt = (flags >> 4) & 3
    p.tver = flags & 0xF
    p.pkey = pkey
    p.job_id = w1 >> 24
    p.dqpn = w1 & 0xFFFFFF
    p.ackreq = bool(w2 >> 31)
    p.psn = w2 & 0xFFFFFF
    p.reth = p.aeth = p.imm = None
    off = BTH_LEN
    end = n - ICRC_LEN
    if op == Opcode.CNP:
        off += CNP_RESERVED_BYTES
    else:
        if op in OPS_WITH_RETH:
            if off + RETH_LEN > end:
                raise WireError("truncated RETH")
            p.reth = RETH.unpack_from(mv, off)
            off += RETH_LEN
        elif op == Opcode.ACK:
            if off + AETH_LEN > end:
                raise WireError("truncated AETH")
            (a,) = AETH.unpack_from(mv, off)
            p.aeth = (a >> 24, a & 0xFFFFFF)
            off += AETH_LEN
        if op in OPS_WITH_IMM:
            if off + IMMDT_LEN > end:
                raise WireError("truncated ImmDt")
            (p.imm,) = IMMDT.unpack_from(mv, off)
            off += IMMDT_LEN
    if off > end - p.padcnt:
        raise WireError("headers and padding longer than the packet")
    p.payload = mv[off:end - p.padcnt]
    (p.icrc,) = ICRC.unpack_from(mv, end)
    return p


def check_icrc(pseudo: bytes, data: bytes | bytearray | memoryview) -> bool:
    """True if the last 4 bytes of ``data`` are its correct ICRC."""
    n = len(data)
    if n < BTH_LEN + ICRC_LEN:
        return False
    mv = data if isinstance(data, memoryview) else memoryview(data)
    return icrc(pseudo, mv[: n - ICRC_LEN]) == ICRC.unpack_from(mv, n - ICRC_LEN)[0]
