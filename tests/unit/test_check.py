"""Checker diagnostics: every error points at file:line:col of the offending node."""

from __future__ import annotations

import pytest
from check_helpers import check_prog, check_text, expect_error, position, program_text

from switches.soft.frontend import parse_file
from switches.soft.frontend.source import P4Error
from switches.soft.midend import check

# -- names -------------------------------------------------------------------


def test_undeclared_name() -> None:
    expect_error("nosuch", "undeclared name 'nosuch'", apply="meta.m = nosuch;")


def test_undeclared_type() -> None:
    expect_error("missing_t", "undeclared type 'missing_t'", apply="missing_t v;")


def test_duplicate_local_declaration() -> None:
    msg = expect_error("x = 2", "duplicate declaration of 'x'", apply="bit<8> x = 1; bit<8> x = 2;")
    assert "previous declaration at prog.p4:" in msg


def test_duplicate_top_level_declaration() -> None:
    expect_error("h_t { bit<1> z; }", "duplicate declaration of 'h_t'", decls="header h_t { bit<1> z; }")


def test_shadowing_in_inner_block_is_allowed() -> None:
    check_prog(apply="bit<8> x = 1; { bit<16> x = 2; meta.x = x; } meta.m = x;")


def test_unknown_field() -> None:
    expect_error("nofield", "header h_t has no field 'nofield'", apply="meta.m = hdr.h.nofield;")


def test_unknown_struct_field() -> None:
    expect_error("zz", "struct meta_t has no field 'zz'", apply="meta.zz = 1;")


def test_unknown_extern_method() -> None:
    expect_error("bump", "extern register<bit<8>> has no method 'bump'",
                 locals_="register<bit<8>>(4) r;", apply="r.bump(0);")


def test_unknown_error_member() -> None:
    expect_error("Bogus", "unknown error member 'error.Bogus'",
                 apply="if (sm.parser_error == error.Bogus) { meta.m = 1; }")


def test_unknown_enum_member() -> None:
    expect_error("C)", "enum E has no member 'C'", decls="enum E { A, B }",
                 apply="meta.m = (E.A == E.C) ? 8w1 : 8w0;")


# -- types ---------------------------------------------------------------------


def test_assignment_width_mismatch() -> None:
    expect_error("hdr.h.b;", "type mismatch in assignment", "expected bit<8>", "got bit<16>",
                 apply="meta.m = hdr.h.b;")


def test_bool_is_not_bit1() -> None:
    expect_error("true;", "type mismatch in assignment", "expected bit<1>", "got bool",
                 apply="bit<1> flag; flag = true;")


def test_argument_type_mismatch() -> None:
    expect_error("hdr.h.c);", "type mismatch in argument 'v' of action set", "expected bit<8>", "got bit<32>",
                 locals_="action set(bit<8> v) { meta.m = v; }", apply="set(hdr.h.c);")


def test_wrong_number_of_arguments() -> None:
    expect_error("set(1, 2)", "wrong number of arguments to action set", "expected 1", "got 2",
                 locals_="action set(bit<8> v) { meta.m = v; }", apply="set(1, 2);")


def test_missing_argument() -> None:
    expect_error("set()", "missing argument for parameter 'v'",
                 locals_="action set(bit<8> v) { meta.m = v; }", apply="set();")


def test_out_argument_must_be_lvalue() -> None:
    expect_error("hdr.h.a + 1, 0)", "pass as out argument 'result'", "not an lvalue",
                 locals_="register<bit<8>>(4) r;", apply="r.read(hdr.h.a + 1, 0);")


def test_calling_a_non_callable() -> None:
    expect_error("m()", "'m' is not a method", apply="meta.m();")


def test_calling_a_variable() -> None:
    expect_error("v()", "'v' is not callable", apply="bit<8> v = 0; v();")


def test_literal_does_not_fit() -> None:
    expect_error("8w256", "integer literal 256 does not fit in bit<8>", apply="meta.m = 8w256;")


def test_invalid_cast() -> None:
    expect_error("(bool)hdr.h.a", "invalid cast from bit<8> to bool", apply="meta.f = (bool)hdr.h.a;")


def test_invalid_cast_struct() -> None:
    expect_error("(bit<8>)meta", "invalid cast from meta_t to bit<8>", apply="meta.m = (bit<8>)meta;")


def test_non_bool_condition() -> None:
    expect_error("hdr.h.a) {", "condition of if must be bool, not bit<8>",
                 apply="if (hdr.h.a) { meta.m = 1; }")


def test_non_bool_ternary_condition() -> None:
    expect_error("meta.m ?", "condition of '?:' must be bool", apply="meta.x = meta.m ? 16w1 : 16w2;")


def test_slice_out_of_range() -> None:
    expect_error("hdr.h.a[8:1]", "slice [8:1] is out of range for bit<8>", apply="meta.m = (bit<8>)hdr.h.a[8:1];")


def test_slice_bounds_not_constant() -> None:
    expect_error("meta.m:0]", "slice bounds must be compile-time constants",
                 apply="meta.m = (bit<8>)hdr.h.c[meta.m:0];")


def test_unknown_match_kind() -> None:
    expect_error("hdr.h.a: fuzzy", "unknown match kind 'fuzzy'",
                 locals_="table t { key = { hdr.h.a: fuzzy; } actions = { NoAction; } }", apply="t.apply();")


def test_default_action_not_listed() -> None:
    expect_error("drop();", "default_action action 'drop' is not listed in the actions of table t",
                 locals_="action drop() { mark_to_drop(sm); }\n"
                         "table t { key = { hdr.h.a: exact; } actions = { NoAction; } default_action = drop(); }",
                 apply="t.apply();")


def test_entry_action_not_listed() -> None:
    expect_error("drop();", "entry action 'drop' is not listed",
                 locals_="action drop() { mark_to_drop(sm); }\n"
                         "table t { key = { hdr.h.a: exact; } actions = { NoAction; }\n"
                         "  const entries = { 1: drop(); } }",
                 apply="t.apply();")


def test_return_value_in_action() -> None:
    expect_error("1; }", "cannot return a value from action a",
                 locals_="action a() { return 1; }", apply="a();")


def test_missing_return_value_in_function() -> None:
    expect_error("return; }", "function f must return a value of type bit<8>",
                 decls="bit<8> f(in bit<8> x) { return; }")


def test_exit_in_function() -> None:
    expect_error("exit;", "'exit' is not allowed in a function",
                 decls="bit<8> f(in bit<8> x) { exit; return x; }")


def test_exit_in_parser() -> None:
    expect_error("exit;", "'exit' is not allowed in a parser",
                 parser="    state start { exit; transition accept; }")


def test_select_keyset_arity() -> None:
    expect_error("(1, 2, 3)", "keyset has 3 elements but select has 2 expressions",
                 parser="    state start { pk.extract(hdr.h);\n"
                        "      transition select(hdr.h.a, hdr.h.b) { (1, 2, 3): accept; default: reject; } }")


def test_unknown_parser_state() -> None:
    expect_error("nowhere", "unknown parser state 'nowhere'",
                 parser="    state start { transition nowhere; }")


def test_arithmetic_width_mismatch() -> None:
    expect_error("hdr.h.a + hdr.h.b", "mismatched widths", "bit<8> + bit<16>",
                 apply="meta.x = hdr.h.a + hdr.h.b;")


def test_negative_shift() -> None:
    expect_error("-1;", "shift by a negative amount", apply="meta.m = hdr.h.a << -1;")


def test_assign_to_constant() -> None:
    expect_error("LIMIT = 3", "cannot assign to constant 'LIMIT'", decls="const bit<8> LIMIT = 4;",
                 apply="LIMIT = 3;")


def test_assign_to_in_parameter() -> None:
    text = program_text()
    text = text.replace("control D(packet_out pk, in headers hdr) { apply { pk.emit(hdr.h); } }",
                        "control D(packet_out pk, in headers hdr) { apply { hdr.h.a = 1; pk.emit(hdr.h); } }")
    with pytest.raises(P4Error) as ei:
        check_text(text)
    assert str(ei.value).startswith(position(text, "hdr.h.a = 1") + ": ")
    assert "cannot assign to 'in' parameter 'hdr'" in str(ei.value)


def test_assign_to_directionless_action_parameter() -> None:
    expect_error("v = 1", "cannot assign to directionless parameter 'v'",
                 locals_="action a(bit<8> v) { v = 1; }", apply="a(2);")


def test_missing_main() -> None:
    text = program_text(main="")
    with pytest.raises(P4Error) as ei:
        check_text(text)
    assert "no 'main' declaration" in str(ei.value)


def test_main_must_be_v1switch() -> None:
    expect_error("main;", "'main' must be a V1Switch",
                 decls="package Other(); ", main="Other() main;")


def test_v1switch_argument_kind() -> None:
    expect_error("VC(), P()", "must be a parser", main="V1Switch(VC(), P(), I(), E(), CC(), D()) main;")


def test_int_without_width_in_runtime_context() -> None:
    expect_error("meta.f ? 1", "'?:' with int operands needs a width",
                 apply="if ((meta.f ? 1 : 2) == 2) { meta.m = 1; }")


def test_switch_label_not_an_action_of_the_table() -> None:
    expect_error("other:", "'other' is not an action of table t",
                 locals_="action other() {}\ntable t { key = { hdr.h.a: exact; } actions = { NoAction; } }",
                 apply="switch (t.apply().action_run) { other: {} }")


def test_mask_not_allowed_for_exact() -> None:
    expect_error("1 &&& 3", "mask '&&&' is not allowed for a key matched by 'exact'",
                 locals_="table t { key = { hdr.h.a: exact; } actions = { NoAction; }\n"
                         "  const entries = { 1 &&& 3: NoAction(); } }",
                 apply="t.apply();")


def test_stack_index_out_of_bounds() -> None:
    expect_error("4].a", "index 4 out of bounds for stack of size 4", apply="hdr.st[4].a = 1;")


def test_break_outside_loop() -> None:
    expect_error("break;", "'break' outside of a loop", apply="break;")


def test_error_in_an_included_file_names_that_file(tmp_path) -> None:
    (tmp_path / "defs.p4").write_text("const bit<4> BAD = 8w1;\n")
    main = tmp_path / "main.p4"
    main.write_text(program_text(decls='#include "defs.p4"'))
    with pytest.raises(P4Error) as ei:
        check(parse_file(str(main)))
    assert str(ei.value).startswith(f"{tmp_path / 'defs.p4'}:1:20: ")
    assert "expected bit<4>, got bit<8>" in str(ei.value)


def test_select_keyset_must_be_constant() -> None:
    expect_error("hdr.h.b: accept", "keyset must be a compile-time constant",
                 parser="    state start { pk.extract(hdr.h);\n"
                        "      transition select(hdr.h.b) { hdr.h.b: accept; default: reject; } }")


def test_extract_needs_a_header() -> None:
    expect_error("hdr.h.a);", "argument of extract must be a header, not bit<8>",
                 parser="    state start { pk.extract(hdr.h.a); transition accept; }")


def test_generic_argument_needs_a_width() -> None:
    expect_error("{hdr.h.a, 5}", "cannot infer a width for argument 'data' of function digest",
                 apply="digest(1, {hdr.h.a, 5});")


def test_control_called_like_a_function() -> None:
    expect_error("VC();", "control VC is instantiated here but never used", apply="VC();")


def test_out_argument_type_must_match_exactly() -> None:
    expect_error("meta.m, 0)", "type mismatch in argument 'result' of method register.read",
                 "expected bit<32>", "got bit<8>",
                 locals_="register<bit<32>>(4) r;", apply="r.read(meta.m, 0);")


def test_signedness_mismatch() -> None:
    expect_error("hdr.h.a + hdr.h.s", "mismatched signedness", apply="meta.m = hdr.h.a + hdr.h.s;")


def test_function_must_return_on_every_path() -> None:
    expect_error("f(in bit<8> x)", "function f does not return a value on every path",
                 decls="bit<8> f(in bit<8> x) { if (x == 0) { return 1; } }")


def test_function_returning_on_both_branches_is_fine() -> None:
    check_prog(decls="bit<8> f(in bit<8> x) { if (x == 0) { return 1; } else { return x; } }",
               apply="meta.m = f(hdr.h.a);")


def test_duplicate_switch_label() -> None:
    expect_error("1: { meta.m = 2; }", "duplicate switch label",
                 apply="switch (hdr.h.a) { 1: { meta.m = 1; } 1: { meta.m = 2; } }")


def test_table_apply_only_in_control_body() -> None:
    expect_error("apply(); }", "table t can only be applied in a control's apply block, not in action a",
                 locals_="table t { key = { hdr.h.a: exact; } actions = { NoAction; } }\n"
                         "action a() { t.apply(); }",
                 apply="a();")


def test_cast_cannot_change_width_and_signedness_at_once() -> None:
    expect_error("(bit<16>)hdr.h.s", "invalid cast from int<8> to bit<16>", apply="meta.x = (bit<16>)hdr.h.s;")


def test_new_type_casts_only_to_its_base() -> None:
    expect_error("(port_t)hdr.h.a", "invalid cast from bit<8> to port_t",
                 decls="type bit<16> port_t;", apply="port_t p = (port_t)hdr.h.a;")


def test_stack_last_outside_parser() -> None:
    expect_error("last.a", "'last' of a header stack can only be used in a parser",
                 apply="meta.m = hdr.st.last.a;")


def test_action_run_outside_switch() -> None:
    expect_error("action_run ==", "'action_run' can only be used as the expression of a switch",
                 locals_="table t { key = { hdr.h.a: exact; } actions = { NoAction; } }",
                 apply="if (t.apply().action_run == t.apply().action_run) { meta.m = 1; }")


def test_default_label_must_be_last() -> None:
    expect_error("2: { meta.m = 2; }", "switch label follows the 'default' label",
                 apply="switch (hdr.h.a) { default: { meta.m = 1; } 2: { meta.m = 2; } }")


def test_division_by_zero_literal() -> None:
    expect_error("hdr.h.a / 0", "division by zero", apply="meta.m = hdr.h.a / 0;")


def test_function_cannot_call_action() -> None:
    expect_error("a(); return", "action a cannot be called from a function",
                 decls="action a() {}\nbit<8> f(in bit<8> x) { a(); return x; }")


def test_verify_only_in_parsers() -> None:
    expect_error("verify(", "verify can only be called in a parser",
                 apply="verify(true, error.NoMatch);")


def test_parser_instantiated_in_control() -> None:
    expect_error("p;", "a parser cannot be instantiated in a control",
                 decls="parser Sub(packet_in pk) { state start { transition accept; } }",
                 locals_="Sub() p;")


def test_variable_of_type_int() -> None:
    expect_error("v = 1", "variable 'v' cannot have type int", apply="int v = 1;")


def test_directionless_action_parameters_come_last() -> None:
    expect_error("x, in bit<8> y", "directionless parameter 'x' of action a must come after",
                 locals_="action a(bit<8> x, in bit<8> y) { meta.m = x + y; }")


def test_out_parameter_with_default() -> None:
    expect_error("x = 1", "out parameter 'x' cannot have a default value",
                 decls="action a(out bit<8> x = 1) { x = 2; }")


def test_duplicate_error_member() -> None:
    text = program_text(decls="error { Oops }\nerror { Oops }")
    with pytest.raises(P4Error) as ei:
        check_text(text)
    assert str(ei.value).startswith(position(text, "error { Oops }", 2) + ": ")
    assert "duplicate declaration of error.Oops" in str(ei.value)


def test_lpm_mask_must_be_a_prefix() -> None:
    expect_error("0x11 &&& 0xe1", "invalid mask 0xe1 for an lpm key",
                 locals_="table t { key = { hdr.h.a: lpm; } actions = { NoAction; }\n"
                         "  const entries = { 0x11 &&& 0xe1: NoAction(); } }",
                 apply="t.apply();")


def test_default_action_argument_must_be_constant() -> None:
    expect_error("hdr.h.a); }", "argument 'v' of action set must be a compile-time constant",
                 locals_="action set(bit<8> v) { meta.m = v; }\n"
                         "table t { key = { hdr.h.a: exact; } actions = { set; } default_action = set(hdr.h.a); }",
                 apply="t.apply();")


def test_extract_of_varbit_header_needs_length() -> None:
    expect_error("hdr2.v);", "has a varbit field: extract it with a length argument",
                 decls="header v_t { varbit<32> opt; }\nstruct h2_t { v_t v; }",
                 parser="    h2_t hdr2;\n    state start { pk.extract(hdr2.v); transition accept; }")


def test_table_without_actions() -> None:
    expect_error("t { key", "table t has no 'actions' property",
                 locals_="table t { key = { hdr.h.a: exact; } }", apply="t.apply();")


def test_select_on_a_struct() -> None:
    expect_error("meta) {", "cannot select on a value of type meta_t",
                 parser="    state start { transition select(meta) { default: accept; } }")


def test_default_action_must_repeat_bound_arguments() -> None:
    expect_error("meta.x, 0)", "argument 'b' of default_action action a does not match",
                 locals_="action a(inout bit<16> b, bit<16> d) { b = d; }\n"
                         "table t { key = { hdr.h.a: exact; } actions = { a(hdr.h.b); } default_action = a(meta.x, 0); }",
                 apply="t.apply();")


def test_control_plane_parameter_type() -> None:
    expect_error("h) {", "directionless action parameter 'h' has type h_t",
                 locals_="action a(in bit<8> x, h_t h) { meta.m = x; }")


def test_signed_literal_does_not_fit() -> None:
    expect_error("8s128", "integer literal 128 does not fit in int<8>", apply="hdr.h.s = 8s128;")
