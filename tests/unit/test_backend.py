"""Backend tests: small P4 programs compiled to Python and run on one packet
against a dict-backed fake of the runtime services."""

from __future__ import annotations

import pytest
from test_backend_support import Harness, program

from switches.soft.frontend.source import P4Unsupported


@pytest.fixture(autouse=True)
def _cache(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))


def run(tmp_path, src: str, packet: bytes = bytes([1, 2, 3, 4]), **kw):
    h = Harness(src, tmp_path)
    return h.run(packet, **kw)


# -- arithmetic ------------------------------------------------------------


def test_bit_arithmetic_wraps(tmp_path):
    src = program("""
        hdr.h.a = hdr.h.a + 8w10;      // 250 + 10 -> 4
        hdr.h.b = hdr.h.b - 8w5;       // 3 - 5 -> 254
        hdr.h.c = hdr.h.c * 8w3;       // 100 * 3 -> 44
        hdr.h.d = hdr.h.d << 8w9;      // shift past the width -> 0
    """)
    out, _ = run(tmp_path, src, bytes([250, 3, 100, 0xFF]))
    assert out == bytes([4, 254, 44, 0])


def test_signed_arithmetic_wraps_and_compares(tmp_path):
    src = program("""
        int<8> x = (int<8>)hdr.h.a;    // 0x7f = 127
        x = x + 1;                      // -> -128
        hdr.h.a = (bit<8>)x;
        int<8> y = (int<8>)hdr.h.b;    // 0xfe = -2
        hdr.h.b = (bit<8>)(y >> 1);     // arithmetic shift: -1
        if (y < 0) { hdr.h.c = 1; } else { hdr.h.c = 2; }
        hdr.h.d = (bit<8>)(-y);         // 2
    """)
    out, _ = run(tmp_path, src, bytes([0x7F, 0xFE, 0, 0]))
    assert out == bytes([0x80, 0xFF, 1, 2])


def test_saturating_operators(tmp_path):
    src = program("""
        hdr.h.a = hdr.h.a |+| 8w10;
        hdr.h.b = hdr.h.b |-| 8w5;
        int<8> s = (int<8>)hdr.h.c;
        hdr.h.c = (bit<8>)(s |+| 100);
        int<8> t = (int<8>)hdr.h.d;
        hdr.h.d = (bit<8>)(t |-| 100);
    """)
    out, _ = run(tmp_path, src, bytes([250, 3, 100, 0x9C]))  # 0x9c = -100
    assert out == bytes([255, 0, 127, 0x80])


def test_casts_truncate_and_sign_extend(tmp_path):
    src = program("""
        bit<4> n = (bit<4>)hdr.h.a;                         // 0xab -> 0xb
        int<16> w = (int<16>)(int<8>)hdr.h.b;               // 0xf0 -> -16
        hdr.h.a = (bit<8>)n;
        hdr.h.b = (bit<8>)(bit<16>)(w >> 8);                 // high byte of sign extension
        bit<1> one = (bit<1>)(hdr.h.c == 7);
        bool t = (bool)one;
        hdr.h.c = t ? 8w0x11 : 8w0x22;
        hdr.h.d = (bit<8>)(bit<16>)(int<16>)-2;              // 0xfffe -> 0xfe
    """)
    out, _ = run(tmp_path, src, bytes([0xAB, 0xF0, 7, 0]))
    assert out == bytes([0x0B, 0xFF, 0x11, 0xFE])


def test_slices_and_concat(tmp_path):
    src = program("""
        bit<4> hi = hdr.h.a[7:4];
        bit<4> lo = hdr.h.a[3:0];
        hdr.h.a = lo ++ hi;                 // swap nibbles
        bit<16> both = hdr.h.b ++ hdr.h.c;
        hdr.h.b = both[11:4];
        hdr.h.c[3:0] = 4w0xF;              // slice assignment keeps the rest
        hdr.h.d[7:7] = 1;
    """)
    out, _ = run(tmp_path, src, bytes([0x12, 0x34, 0x56, 0x01]))
    assert out == bytes([0x21, 0x45, 0x5F, 0x81])


# -- parser -----------------------------------------------------------------

SELECT_PARSER = """
    state start {
        pk.extract(hdr.h);
        transition select(hdr.h.a, hdr.h.b) {
            (0x10 &&& 0xF0, _): masked;
            (_, 5 .. 9): ranged;
            (0x22, 0x22): exact;
            default: accept;
        }
    }
    state masked { m.tag = 1; transition accept; }
    state ranged { m.tag = 2; transition accept; }
    state exact { pk.extract(hdr.x); m.tag = 3; transition accept; }
"""


def _select_prog() -> str:
    return program("hdr.h.d = m.tag; if (sm.parser_error == error.PacketTooShort) { hdr.h.c = 0xEE; }",
                   decls="header x_t { bit<16> v; }", hfields="x_t x;", mfields="bit<8> tag;",
                   parser=SELECT_PARSER)


def test_select_masks_ranges_default(tmp_path):
    h = Harness(_select_prog(), tmp_path)
    assert h.run(bytes([0x1A, 0, 0, 0]))[0] == bytes([0x1A, 0, 0, 1])
    assert h.run(bytes([0x01, 7, 0, 0]))[0] == bytes([0x01, 7, 0, 2])
    assert h.run(bytes([0x01, 10, 0, 0]))[0] == bytes([0x01, 10, 0, 0])
    # exact case extracts a second header; the rest is payload
    out, st = h.run(bytes([0x22, 0x22, 0, 0, 0xAB, 0xCD, 0x99]))
    assert out == bytes([0x22, 0x22, 0, 3, 0xAB, 0xCD, 0x99])
    assert st.payload == bytes([0x99])


def test_packet_too_short_keeps_unparsed_bytes_as_payload(tmp_path):
    h = Harness(_select_prog(), tmp_path)
    # second extract fails: parser_error set, x invalid, its bytes stay payload
    out, st = h.run(bytes([0x22, 0x22, 0, 0, 0xAB]))
    assert st.sm.parser_error == 1
    assert not st.hdr.x.isValid()
    assert out == bytes([0x22, 0x22, 0xEE, 0, 0xAB])
    # first extract fails: nothing valid, the whole packet is payload
    out, st = h.run(bytes([0x22, 0x22]))
    assert st.sm.parser_error == 1
    assert out == bytes([0x22, 0x22])


def test_verify_and_no_match_errors(tmp_path):
    src = program(
        "if (sm.parser_error == error.Mine) { hdr.h.a = 0xE1; } "
        "else if (sm.parser_error == error.NoMatch) { hdr.h.a = 0xE2; }",
        decls="error { Mine }",
        parser="""state start { pk.extract(hdr.h); verify(hdr.h.b != 0, error.Mine);
                  transition select(hdr.h.c) { 1: accept; } }""")
    h = Harness(src, tmp_path)
    assert h.info.errors[:8] == ["NoError", "PacketTooShort", "NoMatch", "StackOutOfBounds",
                                 "HeaderTooShort", "ParserTimeout", "ParserInvalidArgument", "Mine"]
    assert h.run(bytes([0, 0, 1, 0]))[0][0] == 0xE1
    assert h.run(bytes([0, 1, 2, 0]))[0][0] == 0xE2
    assert h.run(bytes([0, 1, 1, 0]))[0][0] == 0


def test_header_stack_parse_loop_and_ops(tmp_path):
    src = program("""
        hdr.h.a = (bit<8>)(hdr.s.nextIndex - 1);   // lastIndex is parser-only
        hdr.s.pop_front(1);
        hdr.h.b = hdr.s[0].v;
        hdr.h.c = hdr.s.nextIndex == 2 ? 8w1 : 8w0;
        hdr.s.push_front(2);
        hdr.s[0].setValid();
        hdr.s[0].v = 0x77;
        hdr.s[0].more = 0;
    """, decls="header e_t { bit<8> v; bit<8> more; }", hfields="e_t[3] s;",
        parser="""state start { pk.extract(hdr.h); transition next; }
                  state next { pk.extract(hdr.s.next);
                      transition select(hdr.s.last.more) { 1: next; default: accept; } }""")
    h = Harness(src, tmp_path)
    out, st = h.run(bytes([0, 0, 0, 0, 0xA1, 1, 0xA2, 1, 0xA3, 0, 0xFF]))
    # nextIndex - 1 = 2; after pop the stack holds A2, A3; push_front(2) leaves
    # [77 (made valid), invalid, A2]; A3 falls off the end
    assert out == bytes([2, 0xA2, 1, 0, 0x77, 0, 0xA2, 1, 0xFF])
    # a fourth element does not fit: StackOutOfBounds
    _, st = h.run(bytes([0, 0, 0, 0, 1, 1, 2, 1, 3, 1, 4, 0]))
    assert st.sm.parser_error == 3


# -- controls ---------------------------------------------------------------


def test_copy_in_copy_out_with_inout(tmp_path):
    src = program("""
        bump(hdr.h.a);                 // copy-out overwrites the write to hdr.h.a
        hdr.h.b = twice(hdr.h.b, hdr.h.c);
        swap(hdr.h.c, hdr.h.d);
    """, ilocals="""
        action bump(inout bit<8> x) { x = x + 1; hdr.h.a = 0x55; }
        action swap(inout bit<8> p, inout bit<8> q) { bit<8> t = p; p = q; q = t; }
    """, decls="""
        bit<8> twice(in bit<8> v, out bit<8> o) { o = 9; return v + v; }
    """)
    out, _ = run(tmp_path, src, bytes([1, 20, 3, 4]))
    # twice() sets hdr.h.c to 9 through its out parameter, then swap runs
    assert out == bytes([2, 40, 4, 9])


def test_exit_stops_ingress_after_copy_out(tmp_path):
    src = program("""
        Sub.apply(hdr.h.a);
        hdr.h.b = 0xBB;                 // not reached
    """, decls="""
        control Sub(inout bit<8> v) {
            apply { v = 0x42; if (v == 0x42) { exit; } v = 0; }
        }
    """)
    out, _ = run(tmp_path, src, bytes([1, 2, 3, 4]))
    assert out == bytes([0x42, 2, 3, 4])


def test_tables_hit_miss_and_switch_action_run(tmp_path):
    src = program("""
        switch (t.apply().action_run) {
            set_b: { hdr.h.d = 1; }
            NoAction: { hdr.h.d = 2; }
        }
        if (t2.apply().hit) { hdr.h.c = 0x11; } else { hdr.h.c = 0x22; }
    """, ilocals="""
        action set_b(bit<8> v) { hdr.h.b = v; }
        action drop() { mark_to_drop(sm); }
        table t {
            key = { hdr.h.a: exact @name("first"); hdr.h.isValid(): exact; }
            actions = { set_b; drop; NoAction; }
            default_action = NoAction();
            size = 64;
        }
        table t2 { key = { hdr.h.b: exact; } actions = { NoAction; }
                   const entries = { 0x99: NoAction(); } }
    """)
    h = Harness(src, tmp_path)
    ti = h.info.tables["I.t"]
    assert [(k.name, k.match_kind, k.width) for k in ti.keys] == [
        ("first", "exact", 8), ("hdr.h.isValid()", "exact", 1)]
    assert ti.actions == ["I.set_b", "I.drop", "NoAction"] and ti.size == 64
    assert h.info.actions["I.set_b"].params[0].name == "v"
    assert h.info.tables["I.t2"].entries[0].matches == [0x99]
    h.rt.tables["I.t"].entries[(7, 1)] = ("I.set_b", (0x99,))
    out, _ = h.run(bytes([7, 0, 0, 0]))
    assert out == bytes([7, 0x99, 0x11, 1])
    out, _ = h.run(bytes([8, 0, 0, 0]))
    assert out == bytes([8, 0, 0x22, 2])
    h.rt.tables["I.t"].entries[(9, 1)] = ("I.drop", ())
    _, st = h.run(bytes([9, 0, 0, 0]))
    assert st.sm.egress_spec == 511


def test_header_validity_and_deparse_order(tmp_path):
    src = program("""
        hdr.y.setValid();
        hdr.y.v = 0xCAFE;
        hdr.h.setInvalid();
    """, decls="header y_t { bit<16> v; }", hfields="y_t y;",
        deparser="pk.emit(hdr.y); pk.emit(hdr.h);")
    out, st = run(tmp_path, src, bytes([1, 2, 3, 4, 5]))
    assert out == bytes([0xCA, 0xFE, 5])
    assert st.hdr.y.isValid() and not st.hdr.h.isValid()


def test_header_union_member_validity(tmp_path):
    src = program("""
        hdr.u.b.setValid();
        hdr.u.b.w = 0x0102;
        hdr.h.a = hdr.u.a.isValid() ? 8w1 : 8w0;
        hdr.h.b = hdr.u.isValid() ? 8w1 : 8w0;
    """, decls="header a_t { bit<8> v; } header b_t { bit<16> w; } header_union u_t { a_t a; b_t b; }",
        hfields="u_t u;",
        parser="state start { pk.extract(hdr.h); pk.extract(hdr.u.a); transition accept; }",
        deparser="pk.emit(hdr.h); pk.emit(hdr.u);")
    out, _ = run(tmp_path, src, bytes([0, 0, 0, 0, 0xAA]))
    assert out == bytes([0, 1, 0, 0, 1, 2])


def test_registers_and_counters(tmp_path):
    src = program("""
        bit<8> v;
        r.read(v, 2);
        r.write(2, v + 1);
        hdr.h.a = v;
        c.count(5);
    """, ilocals="register<bit<8>>(4) r; counter(8, CounterType.packets) c;")
    h = Harness(src, tmp_path)
    assert h.info.registers["I.r"].width == 8 and h.info.registers["I.r"].size == 4
    assert h.run(bytes(4))[0][0] == 0
    assert h.run(bytes(4))[0][0] == 1
    assert h.rt.counters["I.c"].counts == {5: 2}


def test_unsupported_construct_reports_location(tmp_path):
    src = program("my_ext(hdr.h.a);", decls="extern void my_ext(in bit<8> x);")
    with pytest.raises(P4Unsupported) as ei:
        Harness(src, tmp_path)
    assert ":" in str(ei.value) and "prog.p4" in str(ei.value)


def test_extern_requests_digest_and_field_lists(tmp_path):
    src = program("""
        m.x = hdr.h.a;
        m.y = 0x1234;
        clone(CloneType.E2E, 5);
        resubmit_preserving_field_list(1);
        truncate(32w60);
        digest<learn_t>(1, {hdr.h.b, m.x});
    """, decls="struct learn_t { bit<8> b; bit<8> x; }",
        mfields="@field_list(1) bit<8> x; bit<16> y;")
    h = Harness(src, tmp_path)
    assert [(f.name, f.width) for f in h.info.digests["learn_t"].fields] == [("b", 8), ("x", 8)]
    _, st = h.run(bytes([7, 9, 0, 0]))
    assert (st.clone_session, st.clone_type, st.clone_field_list) == (5, 1, None)
    assert st.resubmit_field_list == 1 and st.truncate_len == 60
    assert st.digest == (1, "learn_t", {"b": 9, "x": 7})
    saved = h.prog.field_list(st, 1)
    assert list(saved.values()) == [7]
    fresh = h.prog.new_state()
    h.prog.restore_field_list(fresh, saved)
    assert fresh.meta.x == 7 and fresh.meta.y == 0
    copy = h.prog.copy_state(st)
    copy.hdr.h.a = 0
    assert st.hdr.h.a == 7 and copy.digest is None and copy.clone_session is None


def test_control_plane_names_follow_p4c(tmp_path):
    src = program("""
        c1.apply(hdr.h.a);
        c2.apply(hdr.h.b);
        named.apply();
        top.apply();
    """, decls="""
        action set_top() {}
        control Sub(inout bit<8> v) {
            action inc(bit<8> d) { v = v + d; }
            table t { key = { v: exact; } actions = { inc; } }
            apply { t.apply(); }
        }
    """, ilocals="""
        Sub() c1;
        @name("c_two") Sub() c2;
        @name("renamed") table named { key = { hdr.h.c: ternary; } actions = { NoAction; } }
        @name(".global_t") table top { actions = { set_top; } default_action = set_top(); }
    """)
    h = Harness(src, tmp_path)
    assert set(h.info.tables) == {"I.c1.t", "I.c_two.t", "I.renamed", "global_t"}
    assert h.info.tables["I.c1.t"].actions == ["I.c1.inc"]
    assert h.info.tables["global_t"].default_action == "set_top"
    h.rt.tables["I.c1.t"].entries[(1,)] = ("I.c1.inc", (10,))
    h.rt.tables["I.c_two.t"].entries[(2,)] = ("I.c_two.inc", (20,))
    out, _ = h.run(bytes([1, 2, 0, 0]))
    assert out == bytes([11, 22, 0, 0])
