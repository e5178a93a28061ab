"""Shared helpers for the checker tests: a small v1model program template."""

from __future__ import annotations

import pytest

from switches.soft.frontend import ir, parse_string
from switches.soft.frontend.source import P4Error
from switches.soft.midend import CheckedProgram, check

TEMPLATE = """\
#include <core.p4>
#include <v1model.p4>
header h_t { bit<8> a; bit<16> b; bit<32> c; int<8> s; }
struct headers { h_t h; h_t[4] st; }
struct meta_t { bit<8> m; bit<16> x; bool f; }
@@DECLS@@
parser P(packet_in pk, out headers hdr, inout meta_t meta, inout standard_metadata_t sm) {
@@PARSER@@
}
control VC(inout headers hdr, inout meta_t meta) { apply {} }
control I(inout headers hdr, inout meta_t meta, inout standard_metadata_t sm) {
@@LOCALS@@
    apply {
@@APPLY@@
    }
}
control E(inout headers hdr, inout meta_t meta, inout standard_metadata_t sm) { apply {} }
control CC(inout headers hdr, inout meta_t meta) { apply {} }
control D(packet_out pk, in headers hdr) { apply { pk.emit(hdr.h); } }
@@MAIN@@
"""

DEFAULT_PARSER = "    state start { pk.extract(hdr.h); transition accept; }"
DEFAULT_MAIN = "V1Switch(P(), VC(), I(), E(), CC(), D()) main;"
FILE = "prog.p4"


def program_text(decls: str = "", locals_: str = "", apply: str = "", parser: str = DEFAULT_PARSER,
                 main: str = DEFAULT_MAIN) -> str:
    return (TEMPLATE.replace("@@DECLS@@", decls).replace("@@PARSER@@", parser)
            .replace("@@LOCALS@@", locals_).replace("@@APPLY@@", apply).replace("@@MAIN@@", main))


def check_text(text: str) -> CheckedProgram:
    return check(parse_string(text, FILE))


def check_prog(**parts: str) -> CheckedProgram:
    return check_text(program_text(**parts))


def position(text: str, needle: str, occurrence: int = 1) -> str:
    """``file:line:col`` of the first character of the n-th ``needle``."""
    idx = -1
    for _ in range(occurrence):
        idx = text.index(needle, idx + 1)
    line = text.count("\n", 0, idx) + 1
    col = idx - (text.rfind("\n", 0, idx) + 1) + 1
    return f"{FILE}:{line}:{col}"


def expect_error(needle: str, *words: str, occurrence: int = 1, **parts: str) -> str:
    """Check the program and assert the error is at ``needle`` and mentions ``words``."""
    text = program_text(**parts)
    with pytest.raises(P4Error) as ei:
        check_text(text)
    msg = str(ei.value)
    where = position(text, needle, occurrence)
    assert msg.startswith(where + ": "), f"expected error at {where}, got: {msg}"
    for w in words:
        assert w in msg, f"{w!r} not in {msg!r}"
    return msg


def find_control(cp: CheckedProgram, name: str) -> ir.ControlDecl:
    for d in cp.program.decls:
        if isinstance(d, ir.ControlDecl) and d.name == name:
            return d
    raise AssertionError(name)


def apply_stmts(cp: CheckedProgram) -> list[ir.Stmt]:
    return find_control(cp, "I").body.stmts


def local(cp: CheckedProgram, name: str) -> ir.Decl:
    for d in find_control(cp, "I").locals:
        if d.name == name:
            return d
    raise AssertionError(name)
