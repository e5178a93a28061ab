"""RoCEv2 wire constants shared by the hosts and the P4 programs.

This is the Python copy; switches/p4/include/headers.p4 holds the P4 copy and
tests/unit/test_roce_constants.py checks that both agree. An opcode named
``X`` here is ``BTH_OP_X`` in the P4 include.
"""

from __future__ import annotations

from enum import IntEnum

ROCE_UDP_PORT = 4791
ETHERTYPE_IPV4 = 0x0800
IP_PROTO_UDP = 17

# IPv4 ECN codepoints (RFC 3168); RoCEv2 data packets carry ECT(0).
ECN_NOT_ECT = 0
ECN_ECT1 = 1
ECN_ECT0 = 2
ECN_CE = 3
ECN_MASK = 0x3


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


# Opcode classes used by the transport (sets of ints, for fast membership tests).
OPS_WITH_RETH = frozenset({Opcode.RDMA_WRITE_FIRST, Opcode.RDMA_WRITE_ONLY,
                           Opcode.RDMA_WRITE_ONLY_IMM})
OPS_WITH_IMM = frozenset({Opcode.SEND_LAST_IMM, Opcode.SEND_ONLY_IMM,
                          Opcode.RDMA_WRITE_LAST_IMM, Opcode.RDMA_WRITE_ONLY_IMM})
OPS_FIRST = frozenset({Opcode.SEND_FIRST, Opcode.RDMA_WRITE_FIRST})
OPS_MIDDLE = frozenset({Opcode.SEND_MIDDLE, Opcode.RDMA_WRITE_MIDDLE})
OPS_LAST = frozenset({Opcode.SEND_LAST, Opcode.SEND_LAST_IMM,
                      Opcode.RDMA_WRITE_LAST, Opcode.RDMA_WRITE_LAST_IMM})
OPS_ONLY = frozenset({Opcode.SEND_ONLY, Opcode.SEND_ONLY_IMM, Opcode.RDMA_WRITE_ONLY,
                      Opcode.RDMA_WRITE_ONLY_IMM})
OPS_SEND = frozenset({Opcode.SEND_FIRST, Opcode.SEND_MIDDLE, Opcode.SEND_LAST,
                      Opcode.SEND_LAST_IMM, Opcode.SEND_ONLY, Opcode.SEND_ONLY_IMM})
OPS_WRITE = frozenset({Opcode.RDMA_WRITE_FIRST, Opcode.RDMA_WRITE_MIDDLE,
                       Opcode.RDMA_WRITE_LAST, Opcode.RDMA_WRITE_LAST_IMM,
                       Opcode.RDMA_WRITE_ONLY, Opcode.RDMA_WRITE_ONLY_IMM})
OPS_DATA = OPS_SEND | OPS_WRITE

# AETH syndromes. Bits 7:5 say ACK (000), RNR NAK (001) or NAK (011); for an ACK
# the low 5 bits are the credit count, 0x1F meaning "no credit information".
AETH_SYNDROME_ACK = 0x1F
AETH_SYNDROME_RNR_NAK = 0x20        # | 5-bit RNR timer code
AETH_SYNDROME_NAK_PSN_SEQ = 0x60
AETH_SYNDROME_NAK_INV_REQ = 0x61
AETH_SYNDROME_NAK_REM_ACCESS = 0x62
AETH_SYNDROME_NAK_REM_OP = 0x63
AETH_KIND_MASK = 0xE0
AETH_KIND_ACK = 0x00
AETH_KIND_RNR = 0x20
AETH_KIND_NAK = 0x60

# BTH fields.
BTH_DEFAULT_PKEY = 0xFFFF
BTH_TVER = 0
PSN_BITS = 24
PSN_MASK = (1 << PSN_BITS) - 1


_PSN_SPAN = 1 << PSN_BITS
_PSN_HALF = 1 << (PSN_BITS - 1)


def psn_delta(d: int) -> int:
    """A difference of two PSNs in serial-number arithmetic: -2^23 .. 2^23 - 1."""
    d &= PSN_MASK
    return d - _PSN_SPAN if d >= _PSN_HALF else d


QPN_MASK = 0xFFFFFF
# CNP (RoCEv2 annex): BTH byte 4 has BECN set; a CNP therefore carries no job id.
CNP_BTH_BYTE4 = 0x40
CNP_RESERVED_BYTES = 16

# Tag layout: job id in BTH byte 4 (IBA Resv8a), step in the UDP source port.
JOB_ID_NONE = 0
JOB_ID_MAX = 0xFF
TAG_SPORT_FIXED = 0xC000
TAG_SPORT_FIXED_MASK = 0xC000
TAG_STEP_MASK = 0x3FFF
TAG_STEP_BITS = 14


def tag_sport(step: int) -> int:
    """UDP source port that carries ``step`` (taken modulo 2**14)."""
    return TAG_SPORT_FIXED | (step & TAG_STEP_MASK)


def sport_step(sport: int) -> int:
    """Step carried by a tagged UDP source port."""
    return sport & TAG_STEP_MASK


# Header sizes (bytes).
BTH_LEN = 12
RETH_LEN = 16
AETH_LEN = 4
IMMDT_LEN = 4
ICRC_LEN = 4
IPV4_HDR_LEN = 20
UDP_HDR_LEN = 8
ETH_HDR_LEN = 14
# Bytes a RoCE packet adds on the wire around the BTH..ICRC part.
FRAME_OVERHEAD = ETH_HDR_LEN + IPV4_HDR_LEN + UDP_HDR_LEN

# Path MTUs (IBA values); the payload per packet.
PATH_MTUS = (256, 512, 1024, 2048, 4096)
DEFAULT_PATH_MTU = 1024

# retry_cnt and rnr_retry are 3-bit fields; 7 means "retry forever" for both
# (InfiniBand's rule for rnr_retry, applied by rdma_rxe and NICs to retry_cnt too).
RETRY_FOREVER = 7
