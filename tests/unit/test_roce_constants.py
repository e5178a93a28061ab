"""The Python RoCE constants and the P4 include (headers.p4) must agree."""

from pathlib import Path

import pytest

from hosts.roce import constants as C
from switches.soft.frontend import ir, parse_file, parse_string

HEADERS = Path(__file__).resolve().parents[2] / "switches/p4/include/headers.p4"

# P4 name -> Python value (the shared constants)
SHARED = {
    "ETHERTYPE_IPV4": C.ETHERTYPE_IPV4,
    "IP_PROTO_UDP": C.IP_PROTO_UDP,
    "ROCE_UDP_PORT": C.ROCE_UDP_PORT,
    "ECN_NOT_ECT": C.ECN_NOT_ECT,
    "ECN_ECT1": C.ECN_ECT1,
    "ECN_ECT0": C.ECN_ECT0,
    "ECN_CE": C.ECN_CE,
    "AETH_SYNDROME_ACK": C.AETH_SYNDROME_ACK,
    "AETH_SYNDROME_NAK_PSN_SEQ": C.AETH_SYNDROME_NAK_PSN_SEQ,
    "TAG_SPORT_FIXED": C.TAG_SPORT_FIXED,
    "TAG_SPORT_FIXED_MASK": C.TAG_SPORT_FIXED_MASK,
    "TAG_STEP_MASK": C.TAG_STEP_MASK,
    "TAG_STEP_BITS": C.TAG_STEP_BITS,
    "JOB_ID_NONE": C.JOB_ID_NONE,
}


# A minimal complete program, so the checker can fold constant expressions.
_MINI = """#include <core.p4>
#include <v1model.p4>
#include "headers.p4"
struct meta_t {}
parser P(packet_in pkt, out headers_t h, inout meta_t m, inout standard_metadata_t sm) {
    state start { transition accept; }
}
control NoCk(inout headers_t h, inout meta_t m) { apply {} }
control Ing(inout headers_t h, inout meta_t m, inout standard_metadata_t sm) { apply {} }
control Egr(inout headers_t h, inout meta_t m, inout standard_metadata_t sm) { apply {} }
control Dep(packet_out pkt, in headers_t h) { apply {} }
V1Switch(P(), NoCk(), Ing(), Egr(), NoCk(), Dep()) main;
"""


def _checked_consts() -> dict[str, int]:
    """Header constants after the checker folded them (values may be expressions)."""
    from switches.soft.midend import check
    prog = parse_string(_MINI, include_dirs=(str(HEADERS.parent),))
    check(prog)
    out = {}
    for d in prog.decls:
        if isinstance(d, ir.ConstDecl) and d.loc.file.endswith("headers.p4"):
            assert isinstance(d.value, ir.IntLit), f"{d.name} did not fold to a literal"
            out[d.name] = d.value.value
    return out


def _p4_consts() -> dict[str, int]:
    prog = parse_file(str(HEADERS))
    decls = [d for d in prog.decls if isinstance(d, ir.ConstDecl)]
    if not all(isinstance(d.value, ir.IntLit) for d in decls):
        return _checked_consts()
    return {d.name: d.value.value for d in decls}


@pytest.fixture(scope="module")
def p4() -> dict[str, int]:
    return _p4_consts()


@pytest.mark.parametrize("name", sorted(SHARED))
def test_shared_constant_agrees(p4, name):
    assert name in p4, f"{name} missing from headers.p4"
    assert p4[name] == SHARED[name]


def test_every_p4_opcode_matches_python(p4):
    ops = {k[len("BTH_OP_"):]: v for k, v in p4.items() if k.startswith("BTH_OP_")}
    assert ops, "no BTH_OP_ constants in headers.p4"
    for name, value in ops.items():
        assert C.Opcode[name] == value, name
    # and every Python opcode is known to the P4 programs
    assert set(ops) == {op.name for op in C.Opcode}


def test_every_p4_constant_is_checked(p4):
    known = set(SHARED) | {k for k in p4 if k.startswith("BTH_OP_")}
    assert set(p4) <= known, f"unchecked P4 constants: {sorted(set(p4) - known)}"


def test_tag_layout_round_trip():
    for step in (0, 1, 5000, C.TAG_STEP_MASK):
        sport = C.tag_sport(step)
        assert sport & C.TAG_SPORT_FIXED_MASK == C.TAG_SPORT_FIXED
        assert C.sport_step(sport) == step
    assert C.tag_sport(C.TAG_STEP_MASK + 1) == C.tag_sport(0)
    assert C.TAG_STEP_MASK == (1 << C.TAG_STEP_BITS) - 1


def test_checker_folds_header_constants_to_the_same_values(p4):
    assert _checked_consts() == p4


def test_psn_delta_is_serial_number_arithmetic_over_24_bits() -> None:
    psn_delta = C.psn_delta
    assert [psn_delta(d) for d in (0, 5, -1, 0xFFFFFF, (1 << 23) - 1, 1 << 23)] == [
        0, 5, -1, -1, (1 << 23) - 1, -(1 << 23)]
    assert psn_delta(2 - 0xFFFFFE) == 4          # 2 is 4 after 0xFFFFFE, across the wrap
    assert psn_delta(0xFFFFFE - 2) == -4
