"""RoCE packets as the transport sends and reads them: encoding, decoding.

A "RoCE packet" here is the UDP payload: BTH [RETH|AETH] [ImmDt] payload pad ICRC.
The headers' layouts, the opcodes and the ICRC are ground.wire's
(ground/wire/roce.py, ground/wire/icrc.py); this module puts them together
in the order an opcode calls for.
"""

from __future__ import annotations

from collections.abc import Callable

from ground.wire.icrc import ICRC, ICRC_LEN, append_icrc
from ground.wire.roce import (
    AETH,
    BTH,
    BTH_DEFAULT_PKEY,
    CNP_BTH_BYTE4,
    CNP_RESERVED_BYTES,
    IMMDT,
    OPS_WITH_IMM,
    OPS_WITH_RETH,
    RETH,
    Opcode,
)

__all__ = ["WireError", "Packet", "encode_packet", "encode_cnp", "decode"]

_BTH_LEN, _RETH_LEN, _AETH_LEN, _IMMDT_LEN = BTH.size, RETH.size, AETH.size, IMMDT.size
_bth_unpack = BTH.unpacker("opcode", "se", "migreq", "padcnt", "tver", "pkey", "job_id",
                           "dqpn", "ackreq", "psn")
_bth_pack = BTH.packer("opcode", "se", "padcnt", "pkey", "job_id", "dqpn", "ackreq", "psn")
_reth_unpack = RETH.unpacker("va", "rkey", "dma_len")
_aeth_unpack = AETH.unpacker("syndrome", "msn")
_imm_unpack = IMMDT.unpacker("imm")
_icrc_unpack = ICRC.unpacker("icrc")
_ACK = int(Opcode.ACK)
_CNP = int(Opcode.CNP)

PseudoFn = Callable[[int], bytes]


class WireError(ValueError):
    """A malformed RoCE packet."""


def encode_packet(pseudo_fn: PseudoFn, opcode: int, dqpn: int, psn: int, *, job_id: int = 0,
                  ackreq: bool = False, se: bool = False, pkey: int = BTH_DEFAULT_PKEY,
                  reth: tuple[int, int, int] | None = None,
                  aeth: tuple[int, int] | None = None, imm: int | None = None,
                  payload: bytes | memoryview = b"") -> bytes:
    """A complete RoCE packet with its ICRC.

    ``pseudo_fn(roce_len) -> bytes`` gives the ICRC pseudo-header
    (ground.wire.icrc.pseudo_header); ``reth`` = (va, rkey, dma_len), ``aeth`` =
    (syndrome, msn).
    """
    pad = -len(payload) & 3
    parts = [_bth_pack(opcode, se, pad, pkey, job_id, dqpn, ackreq, psn)]
    if reth is not None:
        parts.append(RETH.pack(*reth))
    if aeth is not None:
        parts.append(AETH.pack(*aeth))
    if imm is not None:
        parts.append(IMMDT.pack(imm & 0xFFFFFFFF))
    parts.append(bytes(payload))
    parts.append(b"\x00" * pad)
    body = b"".join(parts)
    return append_icrc(pseudo_fn(len(body) + ICRC_LEN), body)


def encode_cnp(pseudo_fn: PseudoFn, dqpn: int, pkey: int = BTH_DEFAULT_PKEY) -> bytes:
    """A CNP (RoCEv2 annex): BTH opcode 0x81 with BECN set, PSN 0, 16 reserved bytes."""
    body = BTH.pack(opcode=Opcode.CNP, pkey=pkey, job_id=CNP_BTH_BYTE4, dqpn=dqpn) + (
        b"\x00" * CNP_RESERVED_BYTES)
    return append_icrc(pseudo_fn(len(body) + ICRC_LEN), body)


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
    """Parse a RoCE packet (UDP payload). Does not check the ICRC
    (ground.wire.icrc.check_icrc)."""
    n = len(data)
    if n < _BTH_LEN + ICRC_LEN:
        raise WireError(f"packet of {n} bytes is shorter than BTH + ICRC")
    mv = data if isinstance(data, memoryview) else memoryview(data)
    p = Packet()
    op, se, migreq, p.padcnt, p.tver, p.pkey, p.job_id, p.dqpn, ackreq, p.psn = _bth_unpack(mv)
    p.opcode = op
    p.se = bool(se)
    p.migreq = bool(migreq)
    p.ackreq = bool(ackreq)
    p.reth = p.aeth = p.imm = None
    off = _BTH_LEN
    end = n - ICRC_LEN
    if op == _CNP:
        off += CNP_RESERVED_BYTES
    else:
        if op in OPS_WITH_RETH:
            if off + _RETH_LEN > end:
                raise WireError("truncated RETH")
            p.reth = _reth_unpack(mv, off)
            off += _RETH_LEN
        elif op == _ACK:
            if off + _AETH_LEN > end:
                raise WireError("truncated AETH")
            p.aeth = _aeth_unpack(mv, off)
            off += _AETH_LEN
        if op in OPS_WITH_IMM:
            if off + _IMMDT_LEN > end:
                raise WireError("truncated ImmDt")
            (p.imm,) = _imm_unpack(mv, off)
            off += _IMMDT_LEN
    if off > end - p.padcnt:
        raise WireError("headers and padding longer than the packet")
    p.payload = mv[off:end - p.padcnt]
    (p.icrc,) = _icrc_unpack(mv, end)
    return p
