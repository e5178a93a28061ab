"""RoCEv2 wire constants shared by the hosts and the P4 programs.

The formats themselves (header layouts, lengths, opcodes, the RoCE UDP port)
are declared once in ground.wire and named here as the hosts use them;
switches/p4/include/headers.p4 holds the P4 copy and
tests/unit/test_roce_constants.py checks that both agree. An opcode named
``X`` here is ``BTH_OP_X`` in the P4 include.
"""

from __future__ import annotations

from ground.wire.ethernet import ETH_HLEN, ETHERTYPE_IPV4
from ground.wire.icrc import ICRC_LEN
from ground.wire.ipv4 import IP_PROTO_UDP, IPV4_HLEN
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
    ROCE_UDP_PORT,
    Opcode,
)
from ground.wire.udp import UDP_HLEN

__all__ = ["ROCE_UDP_PORT", "ETHERTYPE_IPV4", "IP_PROTO_UDP", "Opcode", "OPS_WITH_RETH",
           "OPS_WITH_IMM", "BTH_DEFAULT_PKEY", "CNP_BTH_BYTE4", "CNP_RESERVED_BYTES",
           "ICRC_LEN"]

# IPv4 ECN codepoints (RFC 3168); RoCEv2 data packets carry ECT(0).
ECN_NOT_ECT = 0
ECN_ECT1 = 1
ECN_ECT0 = 2
ECN_CE = 3
ECN_MASK = 0x3


# Opcode classes used by the transport (sets of ints, for fast membership tests;
# which headers an opcode carries, OPS_WITH_RETH and OPS_WITH_IMM, are ground.wire's).
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


# Header sizes (bytes), from the declarations.
BTH_LEN = BTH.size
RETH_LEN = RETH.size
AETH_LEN = AETH.size
IMMDT_LEN = IMMDT.size
IPV4_HDR_LEN = IPV4_HLEN
UDP_HDR_LEN = UDP_HLEN
ETH_HDR_LEN = ETH_HLEN
# Bytes a RoCE packet adds on the wire around the BTH..ICRC part.
FRAME_OVERHEAD = ETH_HDR_LEN + IPV4_HDR_LEN + UDP_HDR_LEN

# Path MTUs (IBA values); the payload per packet.
PATH_MTUS = (256, 512, 1024, 2048, 4096)
DEFAULT_PATH_MTU = 1024

# retry_cnt and rnr_retry are 3-bit fields; 7 means "retry forever" for both
# (InfiniBand's rule for rnr_retry, applied by rdma_rxe and NICs to retry_cnt too).
RETRY_FOREVER = 7
