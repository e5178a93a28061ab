"""Frontend: lexer, expressions, declarations, statements, tables, parsers."""

from __future__ import annotations

import pytest

from switches.soft.frontend import P4Error, P4Unsupported, ir, parse_string
from switches.soft.frontend.lexer import tokenize

# -- helpers -----------------------------------------------------------------


def show(e: ir.Expr) -> str:
    """Fully parenthesized rendering of an expression, to assert tree shape."""
    if isinstance(e, ir.IntLit):
        if e.width is None:
            return str(e.value)
        return f"{e.width}{'s' if e.signed else 'w'}{e.value}"
    if isinstance(e, ir.BoolLit):
        return str(e.value).lower()
    if isinstance(e, ir.StringLit):
        return repr(e.value)
    if isinstance(e, ir.PathExpr):
        return ("." if e.absolute else "") + e.name
    if isinstance(e, ir.MemberExpr):
        return f"{show(e.expr)}.{e.member}"
    if isinstance(e, ir.BinaryExpr):
        return f"({show(e.left)} {e.op} {show(e.right)})"
    if isinstance(e, ir.UnaryExpr):
        return f"({e.op}{show(e.expr)})"
    if isinstance(e, ir.TernaryExpr):
        return f"({show(e.cond)} ? {show(e.then)} : {show(e.else_)})"
    if isinstance(e, ir.CastExpr):
        return f"(({show_type(e.to)}) {show(e.expr)})"
    if isinstance(e, ir.SliceExpr):
        return f"{show(e.expr)}[{show(e.hi)}:{show(e.lo)}]"
    if isinstance(e, ir.IndexExpr):
        return f"{show(e.expr)}[{show(e.index)}]"
    if isinstance(e, ir.CallExpr):
        targs = "<" + ", ".join(map(show_type, e.type_args)) + ">" if e.type_args else ""
        args = ", ".join((a.name + "=" if a.name else "") + show(a.value) for a in e.args)
        return f"{show(e.func)}{targs}({args})"
    if isinstance(e, ir.ListExpr):
        return "{" + ", ".join(map(show, e.elems)) + "}"
    if isinstance(e, ir.StructExpr):
        prefix = show_type(e.type_name) + " " if e.type_name else ""
        return prefix + "{" + ", ".join(f"{k} = {show(v)}" for k, v in e.fields) + "}"
    if isinstance(e, ir.DefaultExpr):
        return "default"
    if isinstance(e, ir.DontCareExpr):
        return "_"
    raise AssertionError(f"unexpected node {e!r}")


def show_type(t: ir.TypeRef) -> str:
    if isinstance(t, ir.TypeBits):
        return f"{'int' if t.signed else 'bit'}<{show(t.width)}>"
    if isinstance(t, ir.TypeName):
        return ("." if t.absolute else "") + t.name
    if isinstance(t, ir.TypeSpecialized):
        return show_type(t.base) + "<" + ", ".join(map(show_type, t.args)) + ">"
    if isinstance(t, ir.TypeStack):
        return f"{show_type(t.elem)}[{show(t.size)}]"
    if isinstance(t, ir.TypeTuple):
        return "tuple<" + ", ".join(map(show_type, t.elems)) + ">"
    names = {ir.TypeBool: "bool", ir.TypeInfInt: "int", ir.TypeVoid: "void",
             ir.TypeString: "string", ir.TypeError_: "error", ir.TypeDontCare: "_",
             ir.TypeMatchKind: "match_kind"}
    if type(t) in names:
        return names[type(t)]
    if isinstance(t, ir.TypeVarbit):
        return f"varbit<{show(t.max_width)}>"
    raise AssertionError(f"unexpected type {t!r}")


PRELUDE = "typedef bit<8> T; enum E { A, B } header h_t { bit<8> f; }\n"


def expr(text: str, prelude: str = PRELUDE) -> str:
    prog = parse_string(prelude + "action a() { x = " + text + "; }")
    stmt = prog.decls[-1].body.stmts[0]
    assert isinstance(stmt, ir.AssignStmt)
    return show(stmt.rhs)


def decls(text: str) -> dict[str, ir.Decl]:
    return {d.name: d for d in parse_string(text).decls}


def body(text: str) -> list[ir.Stmt]:
    """Statements of an action body."""
    prog = parse_string(PRELUDE + "action a() {\n" + text + "\n}")
    return prog.decls[-1].body.stmts


# -- lexer --------------------------------------------------------------------


@pytest.mark.parametrize("text,value,width,signed,base", [
    ("42", 42, None, False, 10),
    ("8w255", 255, 8, False, 10),
    ("4s3", 3, 4, True, 10),
    ("8w0xFF", 255, 8, False, 16),
    ("0xdead_beef", 0xDEADBEEF, None, False, 16),
    ("0b1010", 10, None, False, 2),
    ("16w0b1111_0000", 0xF0, 16, False, 2),
    ("0o17", 15, None, False, 8),
    ("0d99", 99, None, False, 10),
    ("1_000", 1000, None, False, 10),
    ("32s0x10", 16, 32, True, 16),
])
def test_integer_literals(text: str, value: int, width: int | None, signed: bool,
                          base: int) -> None:
    (tok,) = tokenize(text, "f.p4")
    assert tok.kind == "INT"
    assert tok.value == (value, width, signed, base)


def test_operators_are_single_tokens() -> None:
    toks = tokenize("a &&& b .. c ++ d |+| e |-| f << g <= h != i && j || k", "f.p4")
    ops = [t.text for t in toks if t.kind != "ID"]
    assert ops == ["&&&", "..", "++", "|+|", "|-|", "<<", "<=", "!=", "&&", "||"]


def test_right_shift_is_two_adjacent_angles() -> None:
    toks = tokenize("a >> b > > c", "f.p4")
    angles = [(t.kind, t.ws) for t in toks if t.kind == ">"]
    # the second '>' of '>>' follows without whitespace; '> >' has whitespace
    assert angles == [(">", True), (">", False), (">", True), (">", True)]


def test_keywords_soft_keywords_and_strings() -> None:
    toks = tokenize('table key apply state "a\\"b\\n" _', "f.p4")
    assert [t.kind for t in toks] == ["table", "ID", "ID", "ID", "STR", "ID"]
    assert toks[4].value == 'a"b\n'


def test_token_locations_survive_comments() -> None:
    text = "a /* one\ntwo */ b // c\n  /* x */ cc"
    toks = tokenize(text, "f.p4")
    assert [(t.text, t.line, t.col) for t in toks] == [("a", 1, 1), ("b", 2, 8), ("cc", 3, 11)]


# -- expressions ----------------------------------------------------------------


@pytest.mark.parametrize("src,tree", [
    ("a + b * c", "(a + (b * c))"),
    ("a - b - c", "((a - b) - c)"),
    ("a << 2 + 1", "(a << (2 + 1))"),
    ("a >> 1 > b", "((a >> 1) > b)"),
    # P4 (unlike C): & ^ | bind tighter than comparisons
    ("a & 0xF0 != 0", "((a & 240) != 0)"),
    ("a == b & c", "(a == (b & c))"),
    ("a | b ^ c & d", "(a | (b ^ (c & d)))"),
    ("a < b | c", "(a < (b | c))"),
    ("a & b << 2", "(a & (b << 2))"),
    ("a && b || c && d", "((a && b) || (c && d))"),
    ("a == b == c", "((a == b) == c)"),
    ("e == a < b", "(e == (a < b))"),
    ("!a && b", "((!a) && b)"),
    ("-a * b", "((-a) * b)"),
    ("~a & b", "((~a) & b)"),
    ("a ++ b + c", "((a ++ b) + c)"),
    ("a |+| b |-| c * d", "((a |+| b) |-| (c * d))"),
    ("a % b / c", "((a % b) / c)"),
    ("a ? b : c ? d : e", "(a ? b : (c ? d : e))"),
    ("a || b ? c + 1 : d", "((a || b) ? (c + 1) : d)"),
    ("x[7:0]", "x[7:0]"),
    ("s[2].f[3:1]", "s[2].f[3:1]"),
    ("x[0+:8]", "x[(0 + (8 - 1)):0]"),
    ("f<bit<8>>(x)", "f<bit<8>>(x)"),
    ("p.lookahead<bit<16>>()[7:0]", "p.lookahead<bit<16>>()[7:0]"),
    ("a < b", "(a < b)"),
    ("a < b && c > d", "((a < b) && (c > d))"),
    ("a < b > (c)", "((a < b) > c)"),  # b is not a type: comparisons
    ("g<T>(c)", "g<T>(c)"),
    ("g<E, _>(c)", "g<E, _>(c)"),
    ("f(a, y = 2, _)", "f(a, y=2, _)"),
    ("t.apply().hit", "t.apply().hit"),
    ("error.NoMatch", "error.NoMatch"),
    (".g", ".g"),
    ("this", "this"),
    ("{1, {2, 3}}", "{1, {2, 3}}"),
    ("{}", "{}"),
    ("{a = 1, b = 2}", "{a = 1, b = 2}"),
    ("8w255 + 4s7 + true", "((8w255 + 4s7) + true)"),
    ('"s"', "'s'"),
])
def test_expression_precedence(src: str, tree: str) -> None:
    assert expr(src) == tree


@pytest.mark.parametrize("src,tree", [
    ("(bit<8>)x + 1", "(((bit<8>) x) + 1)"),
    ("(bit<8>)(x >> 2)", "((bit<8>) (x >> 2))"),
    ("(int<4>)-x", "((int<4>) (-x))"),
    ("(bool)b", "((bool) b)"),
    ("(T) x", "((T) x)"),
    ("(T)-1", "((T) (-1))"),
    ("(T)x.y[3:0]", "((T) x.y[3:0])"),
    ("(bit<32>)(bit<16>)x", "((bit<32>) ((bit<16>) x))"),
    # not casts: 'a' is not a type, E.A is a value
    ("(a) + b", "(a + b)"),
    ("(a) - b", "(a - b)"),
    ("(E.A)", "E.A"),
    ("(T)", "T"),
    ("(x + 1) * 2", "((x + 1) * 2)"),
    ("h_t {f = 1}", "h_t {f = 1}"),
])
def test_casts_versus_parentheses(src: str, tree: str) -> None:
    assert expr(src) == tree


def test_expression_locations() -> None:
    prog = parse_string("action a() {\n  x = y.f + 2;\n}", filename="loc.p4")
    rhs = prog.decls[0].body.stmts[0].rhs
    assert str(rhs.loc) == "loc.p4:2:7"  # the whole expression starts at 'y'
    assert str(rhs.left.loc) == "loc.p4:2:9"  # a member points at its name
    assert str(rhs.right.loc) == "loc.p4:2:13"


# -- declarations ---------------------------------------------------------------


def test_every_declaration_kind() -> None:
    src = """
const bit<16> ETH = 16w0x800;
typedef bit<48> mac_t;
type bit<9> port_t;
header eth_t { mac_t dst; @name("s") mac_t src; bit<16> type; }
header_union u_t { eth_t e; }
struct meta_t { bit<1> b; eth_t[2] stack; varbit<32> v; int<4> i; bool ok; error err; }
enum Color { RED, GREEN, }
enum bit<8> Op { ADD = 1, SUB = 2 }
error { MyError }
match_kind { my_kind }
extern Reg<T> {
    Reg(bit<32> size);
    T read(in bit<32> idx);
    void write<I>(in I idx, in T v);
    abstract void cb(inout T v);
}
extern void my_fn<X>(in X x, out bit<8> y);
extern bit<8> getter();
bit<8> add1(in bit<8> x) { return x + 1; }
T ident<T>(in T x) { return (T)x; }
action drop(bit<9> p) { }
parser P<H>(packet_in b, out H h);
control C<H>(inout H h);
package Pkg<H>(P<H> p, C<H> c);
parser MyP(packet_in b, out eth_t h)(bit<8> k) {
    value_set<bit<16>>(4) pvs;
    bit<8> tmp = 3;
    state start { transition accept; }
}
control MyC(inout eth_t h) {
    Reg<bit<8>>(32) r;
    apply { }
}
Pkg(MyP(1), MyC()) main;
"""
    d = decls(src)
    assert isinstance(d["ETH"], ir.ConstDecl) and show(d["ETH"].value) == "16w2048"
    assert not d["mac_t"].is_newtype and d["port_t"].is_newtype
    eth = d["eth_t"]
    assert isinstance(eth, ir.HeaderDecl)
    assert [(f.name, show_type(f.type)) for f in eth.fields] == [
        ("dst", "mac_t"), ("src", "mac_t"), ("type", "bit<16>")]
    assert eth.fields[1].annotations[0].name == "name"
    assert isinstance(d["u_t"], ir.HeaderUnionDecl)
    assert [show_type(f.type) for f in d["meta_t"].fields] == [
        "bit<1>", "eth_t[2]", "varbit<32>", "int<4>", "bool", "error"]
    assert d["Color"].members == ["RED", "GREEN"] and d["Color"].underlying is None
    op = d["Op"]
    assert show_type(op.underlying) == "bit<8>"
    assert op.members == ["ADD", "SUB"] and [show(v) for v in op.values] == ["1", "2"]
    assert d["error"].members == ["MyError"]
    assert d["match_kind"].members == ["my_kind"]
    reg = d["Reg"]
    assert isinstance(reg, ir.ExternDecl) and reg.type_params == ["T"]
    ctor, read, write, cb = reg.methods
    assert ctor.is_constructor and ctor.return_type is None
    assert show_type(read.return_type) == "T" and read.params[0].direction == "in"
    assert write.type_params == ["I"]
    assert cb.is_abstract and cb.params[0].direction == "inout"
    fn = d["my_fn"]
    assert isinstance(fn, ir.ExternFunctionDecl) and fn.type_params == ["X"]
    assert [p.direction for p in fn.params] == ["in", "out"]
    assert isinstance(d["getter"], ir.ExternFunctionDecl)
    assert isinstance(d["add1"], ir.FunctionDecl)
    assert show(d["ident"].body.stmts[0].value) == "((T) x)"  # T is a type parameter
    assert isinstance(d["drop"], ir.ActionDecl) and d["drop"].params[0].direction == ""
    assert isinstance(d["P"], ir.ParserTypeDecl) and d["P"].type_params == ["H"]
    assert isinstance(d["C"], ir.ControlTypeDecl)
    assert isinstance(d["Pkg"], ir.PackageTypeDecl)
    myp = d["MyP"]
    assert isinstance(myp, ir.ParserDecl) and myp.ctor_params[0].name == "k"
    pvs, tmp = myp.locals
    assert isinstance(pvs, ir.ValueSetDecl) and show(pvs.size) == "4"
    assert isinstance(tmp, ir.VarDecl) and show(tmp.init) == "3"
    (r,) = d["MyC"].locals
    assert isinstance(r, ir.InstantiationDecl) and show_type(r.type) == "Reg<bit<8>>"
    main = d["main"]
    assert isinstance(main, ir.InstantiationDecl)
    assert [show(a.value) for a in main.args] == ["MyP(1)", "MyC()"]


def test_declaration_locations_point_at_names() -> None:
    prog = parse_string("\n  header  h_t {\n bit<8> f;\n}", filename="x.p4")
    h = prog.decls[0]
    assert str(h.loc) == "x.p4:2:11"
    assert str(h.fields[0].loc) == "x.p4:3:9"


def test_annotations() -> None:
    src = """
@name("top.a") @hidden action a() {}
struct m_t { @field_list(1, 2) bit<8> f; }
@pkginfo(name = "x", version = "1") @x[k = 1, j = "s"] const bit<8> c = 1;
@pragma my_pragma some tokens here
const bit<8> d = 2;
"""
    d = decls(src)
    name, hidden = d["a"].annotations
    assert (name.name, [show(x) for x in name.args], name.raw) == ("name", ["'top.a'"], '"top.a"')
    assert hidden.name == "hidden" and hidden.args == []
    fl = d["m_t"].fields[0].annotations[0]
    assert fl.name == "field_list" and [show(x) for x in fl.args] == ["1", "2"]
    pkg, structured = d["c"].annotations
    assert pkg.name == "pkginfo" and pkg.args == [] and "version" in pkg.raw
    assert structured.name == "x" and structured.args == [] and structured.raw.startswith("k =")
    (pragma,) = d["d"].annotations
    assert pragma.name == "my_pragma" and pragma.raw == "some tokens here"


# -- statements ---------------------------------------------------------------------


def test_statements() -> None:
    stmts = body("""
    bit<8> v = 1;
    const bit<8> k = 2;
    T w;
    h_t[4] stack;
    x = v;
    f(v);
    stack[0].f = 3;
    if (v == 1) { exit; } else if (v == 2) return; else ;
    { v = 2; }
    v += 3;
    v >>= 1;
    """)
    kinds = [type(s).__name__ for s in stmts]
    assert kinds == ["VarDecl", "ConstDecl", "VarDecl", "VarDecl", "AssignStmt", "CallStmt",
                     "AssignStmt", "IfStmt", "BlockStmt", "AssignStmt", "AssignStmt"]
    assert show_type(stmts[3].type) == "h_t[4]"
    assert show(stmts[6].lhs) == "stack[0].f"
    iff = stmts[7]
    assert isinstance(iff.then.stmts[0], ir.ExitStmt)
    assert isinstance(iff.else_, ir.IfStmt) and isinstance(iff.else_.then, ir.ReturnStmt)
    assert isinstance(iff.else_.else_, ir.EmptyStmt)
    assert show(stmts[9].rhs) == "(v + 3)" and show(stmts[10].rhs) == "(v >> 1)"


def test_switch_statements() -> None:
    src = """
control c() {
    action a1() {} action a2() {} action a3() {}
    table t { actions = { a1; a2; a3; } }
    apply {
        switch (t.apply().action_run) {
            a1:
            a2: { exit; }
            default: {}
        }
        switch (x) { 1: {} 2: {} }
    }
}
"""
    (c,) = parse_string(src).decls
    s1, s2 = c.body.stmts
    assert show(s1.expr) == "t.apply().action_run"
    assert [(show(k.label), k.body is None) for k in s1.cases] == [
        ("a1", True), ("a2", False), ("default", False)]
    assert [show(k.label) for k in s2.cases] == ["1", "2"]


def test_for_loops() -> None:
    stmts = body("""
    for (bit<8> i = 0; i < 4; i = i + 1) { if (i == 2) { continue; } break; }
    for (bit<8> j in 1 .. 3) { }
    """)
    f, fi = stmts
    assert isinstance(f, ir.ForStmt) and isinstance(f.init[0], ir.VarDecl)
    assert show(f.cond) == "(i < 4)" and show(f.update[0].rhs) == "(i + 1)"
    assert isinstance(f.body.stmts[0].then.stmts[0], ir.ContinueStmt)
    assert isinstance(f.body.stmts[1], ir.BreakStmt)
    assert isinstance(fi, ir.ForInStmt) and fi.var == "j" and show(fi.collection) == "(1 .. 3)"


# -- parsers ---------------------------------------------------------------------------


def test_parser_states_and_select_keysets() -> None:
    src = """
parser p(packet_in b, out h_t h) {
    value_set<bit<8>>(4) pvs;
    state start {
        b.extract(h);
        transition select(h.f, h.f) {
            (1, 2): s1;
            (0x10 &&& 0xF0, _): s1;
            (1 .. 5, default): accept;
            (pvs, 3): reject;
            default: s1;
        }
    }
    state s1 {
        transition select(h.f) { 8w1: accept; 2 &&& 3: reject; _: accept; }
    }
    state s2 { }
}
"""
    p = parse_string(PRELUDE + src).decls[-1]
    start, s1, s2 = p.states
    assert isinstance(start.stmts[0], ir.CallStmt)
    tr = start.transition
    assert isinstance(tr, ir.SelectTransition) and len(tr.exprs) == 2
    assert [(show(c.keyset), c.state) for c in tr.cases] == [
        ("{1, 2}", "s1"), ("{(16 &&& 240), _}", "s1"), ("{(1 .. 5), default}", "accept"),
        ("{pvs, 3}", "reject"), ("default", "s1")]
    assert [show(c.keyset) for c in s1.transition.cases] == ["8w1", "(2 &&& 3)", "_"]
    assert s2.transition is None


# -- tables ------------------------------------------------------------------------------


def test_table_properties() -> None:
    src = """
control c(inout h_t h) {
    action set(bit<8> v) { h.f = v; }
    direct_counter(CounterType.packets) cnt;
    @name("c.tbl") table t {
        key = { h.f: exact @name("f"); h.f & 0xF: ternary; }
        actions = { set; @defaultonly NoAction; @tableonly .set; }
        const default_action = set(8w1);
        const entries = {
            (1, _): set(2);
            priority = 10: (2, 0x3 &&& 0xF): NoAction();
            @priority(3) (3, default): set(4) @name("e");
        }
        size = 1024;
        counters = cnt;
        implementation = action_profile(32);
        support_timeout = true;
    }
    apply { t.apply(); }
}
"""
    c = parse_string(PRELUDE + src).decls[-1]
    t = c.locals[-1]
    assert isinstance(t, ir.TableDecl) and t.annotations[0].name == "name"
    assert [(show(k.expr), k.match_kind) for k in t.keys] == [
        ("h.f", "exact"), ("(h.f & 15)", "ternary")]
    assert t.keys[0].annotations[0].name == "name"
    assert [(a.name, [x.name for x in a.annotations]) for a in t.actions] == [
        ("set", []), ("NoAction", ["defaultonly"]), ("set", ["tableonly"])]
    assert t.default_action.name == "set" and t.default_action_const
    assert [show(a.value) for a in t.default_action.args] == ["8w1"]
    assert t.entries_const and len(t.entries) == 3
    e0, e1, e2 = t.entries
    assert [show(k) for k in e0.keys] == ["1", "_"] and e0.action.name == "set"
    assert show(e1.priority) == "10" and [show(k) for k in e1.keys] == ["2", "(3 &&& 15)"]
    assert e2.annotations[0].name == "priority" and e2.annotations[1].name == "name"
    assert [show(k) for k in e2.keys] == ["3", "default"]
    assert show(t.size) == "1024"
    assert {k: show(v) for k, v in t.properties.items()} == {
        "counters": "cnt", "implementation": "action_profile(32)", "support_timeout": "true"}
    assert set(t.property_locs) == {"key", "actions", "default_action", "entries", "size",
                                    "counters", "implementation", "support_timeout"}


def test_single_key_entries_and_mutable_entries() -> None:
    src = """
control c(inout h_t h) {
    action a() {}
    table t {
        key = { h.f: lpm; }
        actions = { a; }
        entries = { 0x0A &&& 0xFF: a(); const 0x0B: a(); }
    }
    apply { }
}
"""
    t = parse_string(PRELUDE + src).decls[-1].locals[-1]
    assert not t.entries_const
    assert [([show(k) for k in e.keys], e.is_const) for e in t.entries] == [
        (["(10 &&& 255)"], False), (["11"], True)]


def test_duplicate_table_property_is_an_error() -> None:
    src = "control c() { table t { size = 1; size = 2; } apply {} }"
    with pytest.raises(P4Error) as ei:
        parse_string(src, filename="d.p4")
    assert str(ei.value).startswith("d.p4:1:35:")
    assert "more than one 'size'" in str(ei.value)


def test_unsupported_constructs_say_so() -> None:
    with pytest.raises(P4Unsupported) as ei:
        parse_string("struct S<T> { T f; }", filename="g.p4")
    assert str(ei.value) == "g.p4:1:9: unsupported by the soft target: generic struct declarations"
