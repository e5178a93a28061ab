"""Checker annotations the backend relies on: types, folded constants, explicit
conversions, resolved declarations, call arguments and inferred type arguments."""

from __future__ import annotations

from check_helpers import apply_stmts, check_prog, check_text, find_control, local, program_text

from switches.soft.frontend import ir
from switches.soft.midend import types as T
from switches.soft.midend.verify import annotation_problems


def assigns(cp) -> list[ir.AssignStmt]:
    return [s for s in apply_stmts(cp) if isinstance(s, ir.AssignStmt)]


def rhs(apply: str, **parts: str) -> ir.Expr:
    """The right-hand side of the last assignment in the ingress apply block."""
    return assigns(check_prog(apply=apply, **parts))[-1].rhs


def is_lit(e: ir.Expr, value: int, width: int | None, signed: bool = False) -> bool:
    return (isinstance(e, ir.IntLit) and e.value == value and e.width == width and e.signed == signed
            and (e.type == T.Bits(width, signed) if width is not None else e.type == T.InfInt()))


# -- literals and implicit conversions -------------------------------------------


def test_unsized_literal_takes_the_assigned_type() -> None:
    assert is_lit(rhs("meta.m = 5;"), 5, 8)


def test_unsized_literal_in_binary_op_takes_the_other_operand_type() -> None:
    e = rhs("meta.m = hdr.h.a + 1;")
    assert isinstance(e, ir.BinaryExpr) and e.type == T.Bits(8)
    assert is_lit(e.right, 1, 8)
    assert e.left.type == T.Bits(8)


def test_implicit_conversion_wraps_into_range() -> None:
    assert is_lit(rhs("meta.m = 300;"), 44, 8)
    assert is_lit(rhs("hdr.h.s = -1;"), -1, 8, signed=True)
    assert is_lit(rhs("hdr.h.s = 8s127 + 1;"), -128, 8, signed=True)


def test_unsigned_arithmetic_wraps_when_folded() -> None:
    assert is_lit(rhs("meta.m = 8w250 + 8w10;"), 4, 8)
    assert is_lit(rhs("meta.m = 8w3 - 8w5;"), 254, 8)
    assert is_lit(rhs("meta.m = 8w1 << 9;"), 0, 8)


def test_saturating_arithmetic_folds() -> None:
    assert is_lit(rhs("meta.m = 8w250 |+| 8w10;"), 255, 8)
    assert is_lit(rhs("meta.m = 8w3 |-| 8w5;"), 0, 8)


def test_int_constructor_parameter_gets_an_explicit_cast() -> None:
    text = program_text(apply="meta.x = n;", main="V1Switch(P(), VC(), I(7), E(), CC(), D()) main;")
    text = text.replace("control I(inout headers hdr, inout meta_t meta, inout standard_metadata_t sm) {",
                        "control I(inout headers hdr, inout meta_t meta, inout standard_metadata_t sm)(int n) {")
    cp = check_text(text)
    e = [s for s in find_control(cp, "I").body.stmts if isinstance(s, ir.AssignStmt)][-1].rhs
    assert isinstance(e, ir.CastExpr) and e.type == T.Bits(16) and e.to.resolved == T.Bits(16)
    assert isinstance(e.expr, ir.PathExpr) and isinstance(e.expr.decl, ir.Param) and e.expr.type == T.InfInt()
    assert is_lit(cp.block_args["ingress"]["n"], 7, None)


def test_serializable_enum_compared_with_bits_becomes_its_value() -> None:
    e = rhs("meta.f = meta.m == Col.B;", decls="enum bit<8> Col { A = 1, B = 2 }")
    assert isinstance(e, ir.BinaryExpr) and e.type == T.Bool()
    assert is_lit(e.right, 2, 8)


def test_serializable_enum_variable_assigned_to_bits_is_cast() -> None:
    e = rhs("Col v = Col.A; meta.m = v;", decls="enum bit<8> Col { A = 1, B = 2 }")
    assert isinstance(e, ir.CastExpr) and e.type == T.Bits(8)
    assert isinstance(e.expr.type, T.Enum) and e.expr.type.name == "Col"


# -- constant folding ------------------------------------------------------------------


def test_const_references_fold() -> None:
    assert is_lit(rhs("meta.m = K + 2;", decls="const bit<8> K = 3;"), 5, 8)
    assert is_lit(rhs("meta.x = W * 2;", decls="const int W = 1000;"), 2000, 16)
    e = rhs("meta.f = FLAG && true;", decls="const bool FLAG = true;")
    assert isinstance(e, ir.BoolLit) and e.value is True and e.type == T.Bool()


def test_enum_member_cast_folds_to_its_value() -> None:
    assert is_lit(rhs("meta.m = (bit<8>)Col.B;", decls="enum bit<8> Col { A = 1, B = 2 }"), 2, 8)


def test_size_methods_fold() -> None:
    assert is_lit(rhs("meta.m = hdr.h.minSizeInBits();"), 64, 8)
    assert is_lit(rhs("meta.m = hdr.h.minSizeInBytes();"), 8, 8)
    assert is_lit(rhs("hdr.h.c = hdr.st.size;"), 4, 32)


def test_width_from_constant_expression() -> None:
    cp = check_prog(decls="const int W = 4;", apply="bit<(W * 2)> v = 1; meta.m = v;")
    decl = apply_stmts(cp)[0]
    assert isinstance(decl, ir.VarDecl) and decl.type.resolved == T.Bits(8)
    assert is_lit(decl.type.width, 8, None)


def test_ternary_with_constant_condition_folds() -> None:
    e = rhs("meta.m = (2 > 1) ? hdr.h.a : 8w0;")
    assert isinstance(e, ir.MemberExpr) and e.member == "a"
    assert is_lit(rhs("meta.m = (K < 1) ? 8w7 : 8w0;", decls="const bit<8> K = 3;"), 0, 8)


def test_casts_fold() -> None:
    assert is_lit(rhs("meta.m = (bit<8>)16w0x1234;"), 0x34, 8)
    assert is_lit(rhs("hdr.h.s = (int<8>)8w255;"), -1, 8, signed=True)
    e = rhs("meta.f = (bool)1w1;")
    assert isinstance(e, ir.BoolLit) and e.value is True


# -- operator typing ------------------------------------------------------------------


def test_concatenation_width_and_signedness() -> None:
    decl = apply_stmts(check_prog(apply="bit<24> v = hdr.h.a ++ hdr.h.b;"))[0]
    assert decl.init.type == T.Bits(24)
    decl = apply_stmts(check_prog(apply="int<24> w = hdr.h.s ++ hdr.h.b;"))[0]
    assert decl.init.type == T.Bits(24, True)
    assert is_lit(rhs("meta.x = 8w0xAB ++ 8w0xCD;"), 0xABCD, 16)


def test_slice_is_unsigned_with_width_hi_minus_lo_plus_one() -> None:
    e = rhs("meta.m = (bit<8>)hdr.h.s[6:3];")
    assert isinstance(e, ir.CastExpr) and e.expr.type == T.Bits(4)
    assert is_lit(e.expr.hi, 6, None) and is_lit(e.expr.lo, 3, None)


def test_shift_has_the_left_operand_type() -> None:
    e = rhs("meta.x = hdr.h.b >> hdr.h.a;")
    assert e.type == T.Bits(16) and e.right.type == T.Bits(8)
    e = rhs("meta.x = hdr.h.b << 3;")
    assert e.type == T.Bits(16) and isinstance(e.right, ir.IntLit) and e.right.type != T.InfInt()


def test_comparison_and_logic_are_bool() -> None:
    e = rhs("meta.f = hdr.h.isValid() && hdr.h.a < 3;")
    assert e.type == T.Bool() and e.right.type == T.Bool() and is_lit(e.right.right, 3, 8)
    call = e.left
    assert isinstance(call, ir.CallExpr) and call.type == T.Bool()
    assert isinstance(call.func.type, T.Callable) and call.func.type.ret == T.Bool()


def test_error_and_enum_equality() -> None:
    e = rhs("meta.f = sm.parser_error == error.PacketTooShort;")
    assert e.type == T.Bool()
    assert isinstance(e.right, ir.MemberExpr) and isinstance(e.right.type, T.ErrorType)
    assert isinstance(e.right.expr, ir.PathExpr) and isinstance(e.right.expr.type, T.TypeOfType)


def test_list_and_struct_initializers_get_the_target_type() -> None:
    cp = check_prog(apply="hdr.h = {1, 2, 3, -4}; meta = {m = 1, f = true, x = 2};")
    a, b = assigns(cp)
    assert isinstance(a.rhs, ir.ListExpr) and a.rhs.type is a.lhs.type
    assert [x.type for x in a.rhs.elems] == [T.Bits(8), T.Bits(16), T.Bits(32), T.Bits(8, True)]
    assert is_lit(a.rhs.elems[3], -4, 8, signed=True)
    assert isinstance(b.rhs, ir.StructExpr) and b.rhs.type is b.lhs.type
    assert dict(b.rhs.fields)["x"].type == T.Bits(16)


# -- names ------------------------------------------------------------------------------


def test_shadowing_and_absolute_names() -> None:
    cp = check_prog(decls="action a() {}",
                    locals_="action a() { meta.m = 1; }",
                    apply="bit<8> x = 1; { bit<16> x = 2; meta.x = x; } meta.m = x; a(); .a();")
    stmts = apply_stmts(cp)
    outer_x = stmts[0]
    inner_block = stmts[1]
    inner_x = inner_block.stmts[0]
    assert inner_block.stmts[1].rhs.decl is inner_x
    assert stmts[2].rhs.decl is outer_x
    local_a = local(cp, "a")
    top_a = next(d for d in cp.program.decls if isinstance(d, ir.ActionDecl) and d.name == "a")
    assert stmts[3].call.func.decl is local_a
    assert stmts[4].call.func.decl is top_a


def test_parameters_resolve_to_params() -> None:
    e = rhs("meta.m = hdr.h.a;")
    base = e.expr.expr
    assert isinstance(base, ir.PathExpr) and isinstance(base.decl, ir.Param) and base.decl.name == "hdr"
    assert base.type.name == "headers"


# -- calls ------------------------------------------------------------------------------


def test_named_arguments_are_reordered_and_defaults_filled() -> None:
    cp = check_prog(locals_="action a(in bit<8> x, in bit<8> y = 7) { meta.m = x + y; }",
                    apply="a(y = 1, x = 2); a(x = 3);")
    c1, c2 = [s.call for s in apply_stmts(cp)]
    assert [a.name for a in c1.args] == ["x", "y"]
    assert is_lit(c1.args[0].value, 2, 8) and is_lit(c1.args[1].value, 1, 8)
    assert is_lit(c2.args[0].value, 3, 8) and is_lit(c2.args[1].value, 7, 8)


def test_overload_chosen_by_argument_count() -> None:
    cp = check_prog(apply="mark_to_drop(sm); mark_to_drop();")
    c1, c2 = [s.call for s in apply_stmts(cp)]
    assert len(c1.func.decl.params) == 1 and len(c2.func.decl.params) == 0


def test_generic_type_arguments_are_inferred() -> None:
    cp = check_prog(locals_="register<bit<32>>(16) r;",
                    apply="bit<32> v; r.read(v, 2);\n"
                          "hash(meta.x, HashAlgorithm.crc16, 16w0, {hdr.h.a, hdr.h.c}, 32w1024);\n"
                          "random(meta.m, 0, 100);")
    read, h, rnd = [s.call for s in apply_stmts(cp)[1:]]
    assert [t.resolved for t in read.type_args] == [T.Bits(32)]
    assert is_lit(read.args[1].value, 2, 32)
    assert isinstance(read.func.type, T.Callable) and read.func.type.params[0][1] == T.Bits(32)
    assert [t.resolved for t in h.type_args] == [T.Bits(16), T.Bits(16), T.Tuple((T.Bits(8), T.Bits(32))),
                                                  T.Bits(32)]
    assert h.args[3].value.type == T.Tuple((T.Bits(8), T.Bits(32)))
    assert [t.resolved for t in rnd.type_args] == [T.Bits(8)]
    assert is_lit(rnd.args[1].value, 0, 8) and is_lit(rnd.args[2].value, 100, 8)


def test_extract_lookahead_and_varbit() -> None:
    text = program_text(decls="header v_t { bit<8> len; varbit<64> opt; }\nstruct extra_t { v_t v; }",
                        parser="    state start { bit<16> la = pk.lookahead<bit<16>>();\n"
                               "      pk.extract(hdr.st.next); transition accept; }")
    cp = check_text(text)
    p = next(d for d in cp.program.decls if isinstance(d, ir.ParserDecl) and d.name == "P")
    la, ext = p.states[0].stmts
    assert la.init.type == T.Bits(16) and [t.resolved for t in la.init.type_args] == [T.Bits(16)]
    arg = ext.call.args[0].value
    assert isinstance(arg, ir.MemberExpr) and arg.member == "next" and isinstance(arg.type, T.Header)
    assert ext.call.type_args[0].resolved is arg.type


def test_struct_digest_with_explicit_type_argument() -> None:
    cp = check_prog(decls="struct d_t { bit<8> a; bit<16> b; }",
                    apply="digest<d_t>(1, {hdr.h.a, hdr.h.b});")
    call = apply_stmts(cp)[0].call
    assert call.type_args[0].resolved.name == "d_t"
    assert call.args[1].value.type is call.type_args[0].resolved
    assert is_lit(call.args[0].value, 1, 32)


# -- tables and switch -------------------------------------------------------------------


TABLE = """
    action set(bit<9> port, bit<8> v) { sm.egress_spec = port; meta.m = v; }
    table t {
        key = { hdr.h.a: exact; hdr.h.b: ternary; }
        actions = { set; NoAction; }
        default_action = set(1, 2);
        const entries = { (1, 0x10 &&& 0xf0): set(3, 4); (K, _): NoAction(); }
        size = SIZE * 2;
    }
"""


def test_table_annotations() -> None:
    cp = check_prog(decls="const bit<8> K = 9; const int SIZE = 512;", locals_=TABLE, apply="t.apply();")
    t = local(cp, "t")
    assert isinstance(t, ir.TableDecl)
    assert is_lit(t.size, 1024, None)
    assert t.actions[0].decl is local(cp, "set")
    assert t.default_action.decl is local(cp, "set")
    assert is_lit(t.default_action.args[0].value, 1, 9) and is_lit(t.default_action.args[1].value, 2, 8)
    e1, e2 = t.entries
    assert is_lit(e1.keys[0], 1, 8)
    mask = e1.keys[1]
    assert isinstance(mask, ir.BinaryExpr) and mask.op == "&&&" and mask.type == T.Bits(16)
    assert is_lit(mask.left, 0x10, 16) and is_lit(mask.right, 0xF0, 16)
    assert is_lit(e2.keys[0], 9, 8) and isinstance(e2.keys[1], ir.DontCareExpr)
    assert [a.value.type for a in e1.action.args] == [T.Bits(9), T.Bits(8)]
    assert e2.action.decl.name == "NoAction"
    assert cp.tables == [t]


def test_apply_result_members_and_action_run_switch() -> None:
    cp = check_prog(decls="const bit<8> K = 9; const int SIZE = 512;", locals_=TABLE,
                    apply="if (t.apply().hit) { meta.m = 1; }\n"
                          "switch (t.apply().action_run) { set: { meta.m = 2; } NoAction: {} }")
    if_, sw = apply_stmts(cp)
    assert if_.cond.type == T.Bool() and if_.cond.expr.type == T.ApplyResult("t")
    assert sw.expr.type == T.ActionEnum("t")
    assert sw.cases[0].label.decl is local(cp, "set")
    assert sw.cases[1].label.decl.name == "NoAction"


def test_switch_on_bits_converts_labels() -> None:
    cp = check_prog(apply="switch (hdr.h.a) { 1: { meta.m = 1; } 2: { meta.m = 2; } default: {} }")
    sw = apply_stmts(cp)[0]
    assert is_lit(sw.cases[0].label, 1, 8) and is_lit(sw.cases[1].label, 2, 8)
    assert isinstance(sw.cases[2].label, ir.DefaultExpr)


def test_select_keysets_are_typed_by_the_select_expressions() -> None:
    text = program_text(parser="    value_set<bit<8>>(4) pvs;\n"
                               "    state start { pk.extract(hdr.h);\n"
                               "      transition select(hdr.h.a, hdr.h.b) {\n"
                               "        (1, 0x800 &&& 0xff00): accept; (2, 5 .. 9): accept;\n"
                               "        (_, 7): reject; default: accept; } }\n"
                               "    state s2 { transition select(hdr.h.a) { pvs: accept; 3: reject; } }")
    cp = check_text(text)
    p = next(d for d in cp.program.decls if isinstance(d, ir.ParserDecl) and d.name == "P")
    cases = p.states[0].transition.cases
    k0 = cases[0].keyset
    assert isinstance(k0, ir.ListExpr) and k0.type == T.Tuple((T.Bits(8), T.Bits(16)))
    assert is_lit(k0.elems[0], 1, 8) and k0.elems[1].type == T.Bits(16)
    rng = cases[1].keyset.elems[1]
    assert rng.op == ".." and is_lit(rng.left, 5, 16) and is_lit(rng.right, 9, 16)
    assert cases[2].keyset.elems[0].type == T.DontCare()
    vs = p.states[1].transition.cases[0].keyset
    assert isinstance(vs, ir.PathExpr) and isinstance(vs.decl, ir.ValueSetDecl) and vs.type == T.Bits(8)
    assert is_lit(vs.decl.size, 4, None)


# -- program-level results --------------------------------------------------------------


def test_checked_program_summary() -> None:
    cp = check_prog(decls="error { BadThing, OtherThing }\nenum bit<4> Color { Red = 1, Blue = 2 }")
    assert cp.errors[:7] == ["NoError", "PacketTooShort", "NoMatch", "StackOutOfBounds",
                             "HeaderTooShort", "ParserTimeout", "ParserInvalidArgument"]
    assert cp.errors[7:] == ["BadThing", "OtherThing"]
    assert cp.enums["Color"].values == [1, 2] and cp.enums["Color"].underlying == T.Bits(4)
    assert [cp.blocks[r].name for r in ("parser", "verify_checksum", "ingress", "egress",
                                        "compute_checksum", "deparser")] == ["P", "VC", "I", "E", "CC", "D"]
    assert cp.hdr_type.name == "headers" and cp.meta_type.name == "meta_t"
    assert cp.main.name == "main"
    assert {"exact", "ternary", "lpm"} <= set(cp.match_kinds)


def test_for_in_loop_declares_its_variable() -> None:
    cp = check_prog(apply="for (bit<8> i in 1 .. 4) { meta.m = meta.m + i; }")
    loop = apply_stmts(cp)[0]
    assert isinstance(loop, ir.ForInStmt) and isinstance(loop.decl, ir.VarDecl)
    body = loop.body.stmts[0]
    assert body.rhs.right.decl is loop.decl
    assert is_lit(loop.collection.left, 1, 8)


def test_whole_program_meets_the_annotation_contract() -> None:
    cp = check_prog(decls="const bit<8> K = 9; const int SIZE = 512;", locals_=TABLE,
                    apply="if (t.apply().hit) { meta.m = K; } hdr.h.c = hdr.h.c << 2;\n"
                          "meta.x = ((bit<8>)hdr.h.a ++ 8w0) + 1;")
    assert annotation_problems(cp.program) == []


# -- more declarations -------------------------------------------------------------------


def test_header_union_members_and_validity() -> None:
    cp = check_prog(decls="header a_t { bit<8> x; } header b_t { bit<16> y; }\n"
                          "header_union u_t { a_t a; b_t b; }",
                    apply="u_t u; u.a.setValid(); u.a.x = 1; meta.f = u.isValid() && u.b.isValid();")
    stmts = apply_stmts(cp)
    assert isinstance(stmts[0].type.resolved, T.HeaderUnion)
    assert stmts[2].lhs.type == T.Bits(8) and is_lit(stmts[2].rhs, 1, 8)
    assert stmts[3].rhs.left.type == T.Bool()


def test_tuples_typedefs_and_newtypes() -> None:
    cp = check_prog(decls="typedef bit<8> byte_t; type bit<16> port_t;",
                    apply="tuple<byte_t, bool> tp = {1, true}; byte_t b = tp[0];\n"
                          "port_t p = (port_t)hdr.h.b; meta.x = (bit<16>)p; meta.m = b;")
    tp, b, p, x, m = apply_stmts(cp)
    assert tp.type.resolved == T.Tuple((T.Bits(8), T.Bool()))
    assert is_lit(tp.init.elems[0], 1, 8) and tp.init.type == tp.type.resolved
    assert b.type.resolved == T.Bits(8) and b.init.type == T.Bits(8)
    assert isinstance(p.type.resolved, T.NewType) and p.type.resolved.base == T.Bits(16)
    assert isinstance(p.init, ir.CastExpr) and p.init.type is p.type.resolved
    assert isinstance(x.rhs, ir.CastExpr) and x.rhs.type == T.Bits(16)
    assert m.rhs.type == T.Bits(8)


def test_bool_bit_and_signed_casts() -> None:
    e = rhs("bit<1> v = (bit<1>)meta.f; meta.f = (bool)v;")
    assert isinstance(e, ir.CastExpr) and e.type == T.Bool() and e.expr.type == T.Bits(1)
    e = rhs("meta.m = (bit<8>)hdr.h.s;")
    assert isinstance(e, ir.CastExpr) and e.type == T.Bits(8) and e.expr.type == T.Bits(8, True)


def test_extern_instances_and_table_properties() -> None:
    cp = check_prog(locals_="direct_counter(CounterType.packets) dc;\n"
                            "meter(32w16, MeterType.bytes) mt;\n"
                            "action a() { dc.count(); }\n"
                            "table t { key = { hdr.h.a: exact; } actions = { a; } counters = dc;\n"
                            "  implementation = action_profile(32w64); support_timeout = true; }",
                    apply="bit<2> color; mt.execute_meter(3, color); t.apply();")
    t = local(cp, "t")
    assert isinstance(t.properties["counters"], ir.PathExpr) and t.properties["counters"].decl is local(cp, "dc")
    impl = t.properties["implementation"]
    assert isinstance(impl, ir.CallExpr) and isinstance(impl.type, T.Extern) and impl.type.name == "action_profile"
    assert isinstance(t.properties["support_timeout"], ir.BoolLit)
    mt = local(cp, "mt")
    assert isinstance(mt.type.resolved, T.Extern) and mt.type.resolved.name == "meter"
    assert is_lit(mt.args[0].value, 16, 32)
    call = apply_stmts(cp)[1].call
    assert [x.resolved for x in call.type_args] == [T.Bits(2)]
    assert is_lit(call.args[0].value, 3, 32)
    assert [d for d in cp.instances if d.name in ("dc", "mt")] == [local(cp, "dc"), mt]
    assert cp.instances[-1] is cp.main


def test_sub_control_with_constructor_arguments() -> None:
    cp = check_prog(decls="control Sub(inout bit<8> v)(bit<8> step) { apply { v = v + step; } }",
                    locals_="Sub(8w3) sub;", apply="sub.apply(meta.m);")
    inst = local(cp, "sub")
    assert isinstance(inst.type.resolved, T.Block) and inst.type.resolved.decl.name == "Sub"
    assert is_lit(inst.args[0].value, 3, 8)
    call = apply_stmts(cp)[0].call
    assert isinstance(call.func.type, T.Callable) and call.func.type.kind == "apply"
    assert call.func.expr.decl is inst and call.type == T.Void()


def test_serializable_enum_compared_with_a_literal_uses_the_underlying_type() -> None:
    e = rhs("Col v = Col.A; meta.f = v == 2;", decls="enum bit<8> Col { A = 1, B = 2 }")
    assert isinstance(e, ir.BinaryExpr) and e.type == T.Bool()
    assert isinstance(e.left, ir.CastExpr) and e.left.type == T.Bits(8)
    assert is_lit(e.right, 2, 8)
