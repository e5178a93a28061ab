"""Frontend: preprocessor, includes, syntax-error locations, the shipped
core.p4/v1model.p4."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from test_frontend import show  # same directory (pytest puts it on sys.path)

from switches.p4c_corpus import missing_reason, samples_dir
from switches.soft.frontend import P4Error, ir, parse_file, parse_string
from switches.soft.frontend.preprocess import P4INCLUDE_DIR

CORPUS = samples_dir()


def consts(prog: ir.Program) -> dict[str, int]:
    return {d.name: d.value.value for d in prog.decls
            if isinstance(d, ir.ConstDecl) and isinstance(d.value, ir.IntLit)}


# -- macros and conditionals ---------------------------------------------------


def test_object_and_function_like_macros() -> None:
    src = """
#define W 8
#define ADD(a, b) ((a) + (b))
#define STR(x) #x
#define LONG 1 + \\
             2
const bit<W> w = W;
const bit<8> s = ADD(W, 1);
const bit<8> l = LONG;
@name(STR(hello world)) const bit<8> n = 0;
"""
    prog = parse_string(src)
    w, s, cont, n = prog.decls
    assert isinstance(w.type, ir.TypeBits) and w.type.width.value == 8
    assert isinstance(s.value, ir.BinaryExpr) and s.value.op == "+"
    assert isinstance(cont.value, ir.BinaryExpr)
    assert n.annotations[0].args[0].value == "hello world"


def test_macro_expansion_rules() -> None:
    src = """
#define X X + 1
#define CAT(a, b) a ## b
#define TWICE(x) (x) * 2
#define ID(x) x
#define EMPTY()
#define VA(...) f(__VA_ARGS__)
const bit<8> v1 = X;
const bit<8> CAT(my, name) = TWICE(ID(3) + 1);
const bit<8> v3 = TWICE(TWICE(2));
const bit<8> v4 = 1 EMPTY();
const bit<8> v5 = VA(1, 2, 3);
const bit<8> v6 = ID;
"""
    got = {d.name: show(d.value) for d in parse_string(src).decls}
    assert got == {"v1": "(X + 1)",  # a macro does not expand inside itself
                   "myname": "((3 + 1) * 2)", "v3": "((2 * 2) * 2)", "v4": "1",
                   "v5": "f(1, 2, 3)",
                   "v6": "ID"}  # a function-like macro name without '(' stays


def test_macro_tokens_are_located_at_the_use_site() -> None:
    prog = parse_string("#define V 5\n\nconst bit<8> x =   V;", filename="m.p4")
    assert str(prog.decls[0].value.loc) == "m.p4:3:20"


def test_line_continuation_and_comments_keep_line_numbers() -> None:
    src = ("#define A \\\n   1\n/* a\n   multi-line\n   comment */\n"
           "const bit<8> x = A; // trailing\nconst bit<8> y = 2;")
    prog = parse_string(src, filename="c.p4")
    assert [str(d.loc) for d in prog.decls] == ["c.p4:6:14", "c.p4:7:14"]


def test_conditionals() -> None:
    src = """
#define ONE
#define VER 20200408
#ifdef ONE
const bit<8> a = 1;
#else
const bit<8> a = 2;
#endif
#ifndef ONE
const bit<8> b = 1;
#elif VER >= 20200408 && defined(ONE) && !defined TWO
const bit<8> b = 2;
#else
const bit<8> b = 3;
#endif
#if 0
#error not reached
#elif (VER >> 3) % 2 == 1 || UNDEFINED_NAME
const bit<8> c = 3;
#endif
#undef ONE
#if defined(ONE)
const bit<8> d = 4;
#endif
#pragma once
#line 40 "other.p4"
# 7 "x.p4"
"""
    assert consts(parse_string(src)) == {"a": 1, "b": 2, "c": 3}


def test_command_line_defines() -> None:
    src = "#if FLAG\nconst bit<8> x = N;\n#endif\n"
    assert consts(parse_string(src, defines={"FLAG": None, "N": 7})) == {"x": 7}
    assert consts(parse_string(src, defines={"N": 7})) == {}


# -- includes ---------------------------------------------------------------------------


def test_includes_guards_and_locations(tmp_path: Path) -> None:
    inc = tmp_path / "inc"
    inc.mkdir()
    (inc / "defs.p4").write_text(
        "#ifndef DEFS\n#define DEFS\n\nheader h_t {\n  bit<8> f;\n}\n#endif\n")
    (tmp_path / "local.p4").write_text("const bit<8> local = 1;\n")
    main = tmp_path / "main.p4"
    main.write_text('#include "local.p4"\n#include <defs.p4>\n#include "defs.p4"\n'
                    "const bit<8> m = 2;\n")
    prog = parse_file(main, include_dirs=[inc])
    local, h, m = prog.decls
    assert isinstance(h, ir.HeaderDecl)  # included once despite two #includes
    assert str(local.loc) == f"{tmp_path}/local.p4:1:14"
    assert str(h.loc) == f"{inc}/defs.p4:4:8"
    assert str(h.fields[0].loc) == f"{inc}/defs.p4:5:10"
    assert str(m.loc) == f"{main}:4:14"
    assert prog.files == [str(main), f"{tmp_path}/local.p4", f"{inc}/defs.p4"]


def test_angle_includes_do_not_search_the_current_dir(tmp_path: Path) -> None:
    (tmp_path / "x.p4").write_text("const bit<8> x = 1;\n")
    main = tmp_path / "main.p4"
    main.write_text("#include <x.p4>\n")
    with pytest.raises(P4Error) as ei:
        parse_file(main)
    assert str(ei.value) == f"{main}:1:2: cannot find include file 'x.p4'"
    assert parse_file(main, include_dirs=[tmp_path]).decls[0].name == "x"


def test_errors_inside_included_files_point_into_them(tmp_path: Path) -> None:
    (tmp_path / "bad.p4").write_text("\nconst bit<8> x = 1\n")
    main = tmp_path / "main.p4"
    main.write_text('#include "bad.p4"\nconst bit<8> y = 2;\n')
    with pytest.raises(P4Error) as ei:
        parse_file(main)
    assert str(ei.value) == (f"{main}:2:1: expected ';' after the declaration of constant 'x' "
                             "but found 'const'")


# -- syntax errors: exact location and message -------------------------------------------


@pytest.mark.parametrize("src,where,message", [
    # missing semicolon: reported at the token that follows
    ("header h {\n  bit<8> a\n  bit<8> b;\n}", "3:3",
     "expected ';' after field 'a' but found 'bit'"),
    ("action a() {\n  x = 1\n}", "3:1", "expected ';' after the assignment but found '}'"),
    # unbalanced braces
    ("control c() {\n  apply {\n    x = 1;\n  }\n", "5:1",
     "expected '}' to close the control 'c' opened at s.p4:1:13 but found end of file"),
    ("action a() { }\n}", "2:1", "unexpected '}' at top level (unbalanced braces?)"),
    ("action a() {\n  if (x) {\n    y = 1;\n}\n", "5:1",
     "expected '}' to close the block opened at s.p4:1:12 but found end of file"),
    # bad literals
    ("const bit<8> x = 8w12z;", "1:18", "invalid integer literal '8w12z'"),
    ("const bit<8> x = 0x;", "1:18", "invalid integer literal '0x'"),
    ("const bit<8> x = 0b102;", "1:18", "invalid integer literal '0b102'"),
    # unexpected tokens in expressions
    ("action a() {\n  x = (y + );\n}", "2:12", "expected an expression but found ')'"),
    ("action a() {\n  x = y +* 2;\n}", "2:10", "expected an expression but found '*'"),
    ("action a() {\n  x = f(1, 2;\n}", "2:13",
     "expected ')' to close the argument list opened at s.p4:2:8 but found ';'"),
    ("action a() {\n  x = 1 $ 2;\n}", "2:9", "unexpected character '$' (0x24)"),
    ("const bit<8> x = 1;\x01", "1:20", "unexpected byte 0x01"),
    ("const bit<8> x = 1; \u00e9", "1:21", "unexpected character '\u00e9' (U+00E9, bytes c3 a9)"),
    # a misspelt type name with type arguments
    ("header h_t { bitt<8> a; }", "1:14", "undeclared type 'bitt'"),
    ("struct s { Countr<bit<8>> c; }", "1:12", "undeclared type 'Countr'"),
    ("action a() {\n  x + 1;\n}", "2:3",
     "this expression is not a statement (expected an assignment or a call)"),
    # unterminated comment / string
    ("const bit<8> x = 1;\n/* never\n closed", "2:1", "unterminated comment"),
    ('@name("abc) const bit<8> x = 1;', "1:7", "unterminated string literal"),
    # declarations
    ("header { bit<8> a; }", "1:8", "expected a name after 'header' but found '{'"),
    ("const bit<8> if = 1;", "1:14",
     "'if' is a reserved keyword and cannot be used as a name for the constant"),
    ("struct s { bit<8 x; }", "1:18",
     "expected '>' to close the 'bit<' type opened at s.p4:1:15 but found 'x'"),
    ("parser p() { state start { transition select(x) { 1: accept } } }", "1:61",
     "expected ';' after select case 'accept' but found '}'"),
    ("control c() { apply { } apply { } }", "1:25",
     "expected '}' to close the control 'c' opened at s.p4:1:13 but found 'apply'"),
    ("control c() { table t { key = { x; } } apply {} }", "1:34",
     "expected ':' after a key expression (then the match kind) but found ';'"),
    ("control c() { }", "1:15", "control 'c' has no 'apply' block"),
    ("heder h_t { bit<8> f; }", "1:1",
     "'heder' is neither a declaration keyword nor a declared type"),
    # preprocessor
    ('#include "nope.p4"\n', "1:2", "cannot find include file 'nope.p4'"),
    ("#ifdef X\nconst bit<8> x = 1;\n", "1:2",
     "unterminated conditional directive (missing #endif)"),
    ("#endif\n", "1:2", "#endif without matching #if"),
    ("#error custom stop\n", "1:2", "#error custom stop"),
    ("#frob\n", "1:2", "unknown preprocessor directive '#frob'"),
    ("#define F(a) a\nconst bit<8> x = F(1, 2);", "2:18",
     "macro 'F' takes 1 argument(s) but 2 were given"),
])
def test_syntax_errors(src: str, where: str, message: str) -> None:
    with pytest.raises(P4Error) as ei:
        parse_string(src, filename="s.p4")
    assert str(ei.value) == f"s.p4:{where}: {message}"


def test_a_byte_that_is_not_utf8_is_reported_by_value(tmp_path: Path) -> None:
    for text in (b"header h_t { bit<8> a; } \xe9\n", b'@name("a\xe9") header h_t { bit<8> a; }\n'):
        src = tmp_path / "latin1.p4"
        src.write_bytes(text)
        with pytest.raises(P4Error) as ei:
            parse_file(src)
        assert ei.value.message == "unexpected byte 0xe9 (not UTF-8 text)"
    src.write_bytes(b"// caf\xe9 in a comment is fine\nheader h_t { bit<8> a; }\n")
    assert parse_file(src).decls


def test_absurd_nesting_is_a_p4_error() -> None:
    with pytest.raises(P4Error) as ei:
        parse_string("const bit<8> x = " + "(" * 3000 + "1" + ")" * 3000 + ";")
    assert ei.value.message == "expression or statement nested too deeply"


def test_missing_file() -> None:
    with pytest.raises(P4Error) as ei:
        parse_file("/nonexistent/prog.p4")
    assert "no such P4 source file" in str(ei.value)


# -- the shipped core.p4 / v1model.p4 ------------------------------------------------------


def test_v1model_declarations() -> None:
    prog = parse_string("#include <v1model.p4>\n")
    assert prog.files[1:] == [os.path.join(P4INCLUDE_DIR, "v1model.p4"),
                              os.path.join(P4INCLUDE_DIR, "core.p4")]
    by_name: dict[str, list[ir.Decl]] = {}
    for d in prog.decls:
        by_name.setdefault(d.name, []).append(d)
    (err,) = by_name["error"]
    assert err.members == ["NoError", "PacketTooShort", "NoMatch", "StackOutOfBounds",
                           "HeaderTooShort", "ParserTimeout", "ParserInvalidArgument"]
    assert [m for d in by_name["match_kind"] for m in d.members] == [
        "exact", "ternary", "lpm", "range", "optional", "selector"]
    (sm,) = by_name["standard_metadata_t"]
    fields = {f.name: f.type for f in sm.fields}
    widths = {n: t.width.value for n, t in fields.items() if isinstance(t, ir.TypeBits)}
    assert widths == {
        "ingress_port": 9, "egress_spec": 9, "egress_port": 9, "instance_type": 32,
        "packet_length": 32, "enq_timestamp": 32, "enq_qdepth": 19, "deq_timedelta": 32,
        "deq_qdepth": 19, "ingress_global_timestamp": 48, "egress_global_timestamp": 48,
        "mcast_grp": 16, "egress_rid": 16, "checksum_error": 1, "priority": 3}
    assert isinstance(fields["parser_error"], ir.TypeError_)
    assert len(by_name["mark_to_drop"]) == 2 and len(by_name["log_msg"]) == 2
    (pin,) = by_name["packet_in"]
    assert [m.name for m in pin.methods] == ["extract", "extract", "lookahead", "advance",
                                             "length"]
    (reg,) = by_name["register"]
    assert reg.type_params == ["T"]
    assert by_name["HashAlgorithm"][0].members == [
        "crc32", "crc32_custom", "crc16", "crc16_custom", "random", "identity", "csum16",
        "xor16"]
    for name in ("counter", "direct_counter", "meter", "direct_meter", "action_profile",
                 "action_selector", "random", "digest", "hash", "verify_checksum",
                 "update_checksum", "verify_checksum_with_payload",
                 "update_checksum_with_payload", "resubmit", "recirculate", "clone", "clone3",
                 "resubmit_preserving_field_list", "recirculate_preserving_field_list",
                 "clone_preserving_field_list", "truncate", "assert", "assume", "verify",
                 "NoAction", "Parser", "VerifyChecksum", "Ingress", "Egress",
                 "ComputeChecksum", "Deparser", "V1Switch", "__v1model_version"):
        assert name in by_name, name
    v1 = by_name["V1Switch"][0]
    assert [p.name for p in v1.params] == ["p", "vr", "ig", "eg", "ck", "dep"]


def test_v1model_newer_version_signatures() -> None:
    prog = parse_string("#define V1MODEL_VERSION 20200408\n#include <v1model.p4>\n")
    by_name = {d.name: d for d in prog.decls}
    assert by_name["register"].type_params == ["T", "I"]
    assert by_name["counter"].type_params == ["I"]
    port = {f.name: f.type for f in by_name["standard_metadata_t"].fields}["ingress_port"]
    assert isinstance(port, ir.TypeName) and port.name == "PortId_t"


@pytest.mark.skipif(not CORPUS.is_dir(), reason=missing_reason())
def test_typical_v1model_program() -> None:
    prog = parse_file(CORPUS / "basic_routing-bmv2.p4", include_dirs=[CORPUS])
    main = prog.decls[-1]
    assert isinstance(main, ir.InstantiationDecl) and main.name == "main"
    assert isinstance(main.type, ir.TypeName) and main.type.name == "V1Switch"
    kinds = {type(d).__name__ for d in prog.decls}
    assert {"ParserDecl", "ControlDecl", "HeaderDecl", "StructDecl"} <= kinds
