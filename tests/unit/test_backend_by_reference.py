"""A control's header and struct arguments are passed by reference where
copy-in/copy-out cannot be told apart from it, and copied where it can."""

from __future__ import annotations

from pathlib import Path

from switches.soft.compiler import generate_source

_PROGRAM = """
#include <core.p4>
#include <v1model.p4>
header h_t { bit<8> a; bit<8> b; }
struct headers_t { h_t h; h_t g; }
struct meta_t { bit<8> x; }
control Sub(inout h_t p, in h_t q) {
    apply { p.a = q.b; }
}
control Valid(inout h_t p, in h_t q) {
    apply { if (q.isValid()) { p.b = 3; } q.setInvalid(); }
}
parser P(packet_in pk, out headers_t hdr, inout meta_t m, inout standard_metadata_t sm) {
    state start { pk.extract(hdr.h); pk.extract(hdr.g); transition accept; }
}
control VC(inout headers_t hdr, inout meta_t m) { apply { } }
control I(inout headers_t hdr, inout meta_t m, inout standard_metadata_t sm) {
    Sub() s1; Sub() s2; Valid() v;
    apply {
        s1.apply(hdr.h, hdr.g);    /* distinct roots? no: both under hdr */
        s2.apply(hdr.h, hdr.h);    /* the same header twice */
        CASE
    }
}
control E(inout headers_t hdr, inout meta_t m, inout standard_metadata_t sm) { apply { } }
control CC(inout headers_t hdr, inout meta_t m) { apply { } }
control D(packet_out pk, in headers_t hdr) { apply { pk.emit(hdr); } }
V1Switch(P(), VC(), I(), E(), CC(), D()) main;
"""


def _source(tmp_path: Path, case: str) -> str:
    p = tmp_path / "prog.p4"
    p.write_text(_PROGRAM.replace("CASE", case))
    return generate_source(p)[0]


def test_arguments_sharing_a_root_are_copied(tmp_path: Path) -> None:
    src = _source(tmp_path, "")
    assert "by reference" not in src
    assert src.count("._copy()") >= 4


def test_a_unique_inout_and_a_read_only_in_go_by_reference(tmp_path: Path) -> None:
    src = _source(tmp_path, "h_t a = hdr.h; h_t b = hdr.g; s1.apply(a, b);")
    refs = [ln.strip() for ln in src.splitlines() if "by reference" in ln]
    assert len(refs) == 2, refs


def test_an_in_parameter_handed_to_a_method_is_copied(tmp_path: Path) -> None:
    """(The checker refuses an assignment to an ``in`` parameter; a method
    call on it is not refused, so it is taken as a write.)"""
    src = _source(tmp_path, "h_t a = hdr.h; h_t b = hdr.g; v.apply(a, b);")
    refs = [ln.strip() for ln in src.splitlines() if "by reference" in ln]
    assert len(refs) == 1, refs       # p (inout) only
