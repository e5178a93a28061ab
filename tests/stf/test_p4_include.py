"""The shared P4 include declares the RoCEv2 wire format the hosts use.

Parsed with the soft target's frontend, so a typo in a constant or a field
width in switches/p4/include/headers.p4 fails here, before any packet test.
"""

from __future__ import annotations

from pathlib import Path

from switches.soft.frontend import ir, parse_file

HEADERS = Path(__file__).resolve().parents[2] / "switches" / "p4" / "include" / "headers.p4"

# Values from the InfiniBand spec (RC opcodes, CNP), RFC 3168 (ECN) and the
# testbed's tag layout (step in the low 14 bits of the UDP source port).
EXPECTED_CONSTS = {
    "ETHERTYPE_IPV4": 0x0800, "IP_PROTO_UDP": 17, "ROCE_UDP_PORT": 4791,
    "ECN_NOT_ECT": 0, "ECN_ECT1": 1, "ECN_ECT0": 2, "ECN_CE": 3,
    "BTH_OP_SEND_FIRST": 0x00, "BTH_OP_SEND_MIDDLE": 0x01, "BTH_OP_SEND_LAST": 0x02,
    "BTH_OP_SEND_LAST_IMM": 0x03, "BTH_OP_SEND_ONLY": 0x04, "BTH_OP_SEND_ONLY_IMM": 0x05,
    "BTH_OP_RDMA_WRITE_FIRST": 0x06, "BTH_OP_RDMA_WRITE_MIDDLE": 0x07,
    "BTH_OP_RDMA_WRITE_LAST": 0x08, "BTH_OP_RDMA_WRITE_LAST_IMM": 0x09,
    "BTH_OP_RDMA_WRITE_ONLY": 0x0A, "BTH_OP_RDMA_WRITE_ONLY_IMM": 0x0B,
    "BTH_OP_ACK": 0x11, "BTH_OP_CNP": 0x81,
    "TAG_SPORT_FIXED": 0xC000, "TAG_SPORT_FIXED_MASK": 0xC000, "TAG_STEP_MASK": 0x3FFF,
    "TAG_STEP_BITS": 14, "JOB_ID_NONE": 0,
}

# Header sizes in bytes on the wire.
EXPECTED_BYTES = {"ethernet_t": 14, "ipv4_t": 20, "udp_t": 8, "bth_t": 12, "reth_t": 16,
                  "aeth_t": 4, "immdt_t": 4}


def _program() -> ir.Program:
    return parse_file(HEADERS)


def test_constants_have_the_wire_values() -> None:
    consts = {d.name: d.value for d in _program().decls if isinstance(d, ir.ConstDecl)}
    for name, value in EXPECTED_CONSTS.items():
        assert name in consts, f"{name} missing from {HEADERS.name}"
        assert isinstance(consts[name], ir.IntLit) and consts[name].value == value, name


def test_tag_layout_splits_the_source_port() -> None:
    """Fixed bits and step bits of the UDP source port partition its 16 bits."""
    c = {d.name: d.value.value for d in _program().decls
         if isinstance(d, ir.ConstDecl) and isinstance(d.value, ir.IntLit)}
    fixed, mask, step = c["TAG_SPORT_FIXED"], c["TAG_SPORT_FIXED_MASK"], c["TAG_STEP_MASK"]
    assert fixed & ~mask == 0 and mask & step == 0 and mask | step == 0xFFFF
    assert step == (1 << c["TAG_STEP_BITS"]) - 1


def test_header_sizes() -> None:
    headers = {d.name: d for d in _program().decls if isinstance(d, ir.HeaderDecl)}
    for name, nbytes in EXPECTED_BYTES.items():
        bits = sum(f.type.width.value for f in headers[name].fields)
        assert bits == 8 * nbytes, f"{name}: {bits} bits"


def test_bth_field_order() -> None:
    bth = next(d for d in _program().decls if isinstance(d, ir.HeaderDecl) and d.name == "bth_t")
    layout = [(f.name, f.type.width.value) for f in bth.fields]
    assert layout == [("opcode", 8), ("se", 1), ("migreq", 1), ("padcnt", 2), ("tver", 4),
                      ("pkey", 16), ("job_id", 8), ("dqpn", 24), ("ackreq", 1),
                      ("resv7", 7), ("psn", 24)]
