"""RoCEv2's transport headers (InfiniBand Architecture, and its RoCEv2 annex).

A RoCEv2 packet is UDP to port 4791 whose payload is the BTH, the extension
headers its opcode calls for (RETH for the first or only packet of an RDMA
WRITE, AETH for an acknowledgement, ImmDt for the last or only packet of an
operation with immediate data), the payload, 0-3 pad bytes (the BTH's pad
count) and the ICRC (ground.wire.icrc). A CNP (congestion notification,
opcode 0x81) carries 16 reserved bytes where the payload would be.

BTH byte 4 is IBA's Resv8a; RoCEv2 puts FECN and BECN in its top bits (a CNP
sets BECN: 0x40). The testbed carries a job id there (``job_id``), which is
why the ICRC masks that byte as it does the fields routers may change.
"""

from __future__ import annotations

from enum import IntEnum

from ground.wire.layout import Field, Header

__all__ = ["ROCE_UDP_PORT", "BTH", "RETH", "AETH", "IMMDT", "Opcode", "OPS_WITH_RETH",
           "OPS_WITH_IMM", "CNP_BTH_BYTE4", "CNP_RESERVED_BYTES", "BTH_DEFAULT_PKEY"]

ROCE_UDP_PORT = 4791
BTH_DEFAULT_PKEY = 0xFFFF


class Opcode(IntEnum):
    """BTH opcodes of the Reliable Connection transport (bits 7:5 = 000) and CNP."""

    SEND_FIRST = 0x00
    SEND_MIDDLE = 0x01
    SEND_LAST = 0x02
    SEND_LAST_IMM = 0x03
    SEND_ONLY = 0x04
    SEND_ONLY_IMM = 0x05
    RDMA_WRITE_FIRST = 0x06
    RDMA_WRITE_MIDDLE = 0x07
    RDMA_WRITE_LAST = 0x08
    RDMA_WRITE_LAST_IMM = 0x09
    RDMA_WRITE_ONLY = 0x0A
    RDMA_WRITE_ONLY_IMM = 0x0B
    ACK = 0x11
    CNP = 0x81


# Which extension headers follow the BTH (frozensets of ints: fast membership tests).
OPS_WITH_RETH = frozenset({Opcode.RDMA_WRITE_FIRST, Opcode.RDMA_WRITE_ONLY,
                           Opcode.RDMA_WRITE_ONLY_IMM})
OPS_WITH_IMM = frozenset({Opcode.SEND_LAST_IMM, Opcode.SEND_ONLY_IMM,
                          Opcode.RDMA_WRITE_LAST_IMM, Opcode.RDMA_WRITE_ONLY_IMM})
# (an ACK carries an AETH; a CNP its reserved bytes)

CNP_BTH_BYTE4 = 0x40                  # BECN set; a CNP therefore carries no job id
CNP_RESERVED_BYTES = 16

BTH = Header(
    "BTH",
    Field("opcode", 8),
    Field("se", 1), Field("migreq", 1), Field("padcnt", 2), Field("tver", 4),
    Field("pkey", 16, BTH_DEFAULT_PKEY),
    Field("job_id", 8),               # Resv8a (FECN, BECN, resv6a in RoCEv2)
    Field("dqpn", 24),
    Field("ackreq", 1), Field("resv7", 7),
    Field("psn", 24),
)
RETH = Header("RETH", Field("va", 64), Field("rkey", 32), Field("dma_len", 32))
AETH = Header("AETH", Field("syndrome", 8), Field("msn", 24))
IMMDT = Header("ImmDt", Field("imm", 32))
