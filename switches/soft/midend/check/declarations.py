"""Declarations: headers/structs/enums/typedefs, externs and signatures,
local declarations, actions and functions, parsers (states, select,
keysets), controls, tables (keys, actions, entries) and instantiations."""

from __future__ import annotations

from typing import Any

from ...frontend import ir
from ...frontend.source import Location, P4Error, P4Unsupported
from .. import types as T
from .common import (
    Ctx,
    Scope,
    Sig,
    SigParam,
    TypeVar,
    always_returns,
    same_expr,
    show,
    start,
    subst,
    type_eq,
)
from .statements import StatementChecker


class DeclarationChecker(StatementChecker):
    """Declarations: types, externs, actions, functions, parsers, controls, tables, instances."""

    def run(self) -> None:
        for d in self.program.decls:
            self.top_decl(d)

    def top_decl(self, d: ir.Decl) -> None:
        s = self.top
        if isinstance(d, (ir.ErrorDecl, ir.MatchKindDecl)):
            return
        if isinstance(d, (ir.HeaderDecl, ir.HeaderUnionDecl, ir.StructDecl)):
            self.struct_decl(d, s)
        elif isinstance(d, ir.EnumDecl):
            self.enum_decl(d, s)
        elif isinstance(d, ir.TypedefDecl):
            self.typedef_decl(d, s)
        elif isinstance(d, ir.ExternDecl):
            s.declare(d.name, d, d.loc)
            self.extern_decl(d)
        elif isinstance(d, ir.ExternFunctionDecl):
            self.sigs[id(d)] = self.signature(d.params, d.return_type, d.type_params, s, d, "extern_function")
            s.declare(d.name, d, d.loc)
        elif isinstance(d, (ir.ParserTypeDecl, ir.ControlTypeDecl, ir.PackageTypeDecl)):
            kind = "package" if isinstance(d, ir.PackageTypeDecl) else "apply"
            self.sigs[id(d)] = self.signature(d.params, None, d.type_params, s, d, kind)
            s.declare(d.name, d, d.loc)
        else:
            self.local_decl(d, s, Ctx("toplevel"))

    def struct_decl(self, d: ir.HeaderDecl | ir.HeaderUnionDecl | ir.StructDecl, s: Scope) -> None:
        cls = {ir.HeaderDecl: T.Header, ir.HeaderUnionDecl: T.HeaderUnion, ir.StructDecl: T.Struct}[type(d)]
        fields: list[T.Field] = []
        seen: set[str] = set()
        for f in d.fields:
            ft = self.resolve(f.type, s)
            if f.name in seen:
                raise P4Error(f.loc, f"duplicate field '{f.name}' in {d.name}")
            seen.add(f.name)
            if cls is T.Header and not isinstance(ft, (T.Bits, T.Varbit, T.Bool)) and not (
                    isinstance(ft, (T.Enum, T.NewType)) and self._has_width(ft)) and not isinstance(ft, T.Struct):
                raise P4Error(f.loc, f"header field '{f.name}' has type {ft}, which is not allowed in a header")
            if isinstance(ft, (T.String, T.InfInt, T.Extern, T.Block, T.MatchKind)):
                raise P4Error(f.loc, f"field '{f.name}' cannot have type {ft}")
            if cls is T.Header and isinstance(ft, T.Varbit) and any(isinstance(x.type, T.Varbit) for x in fields):
                raise P4Error(f.loc, f"header {d.name} has more than one varbit field")
            if cls is T.HeaderUnion and not isinstance(ft, T.Header):
                raise P4Error(f.loc, f"header union field '{f.name}' must be a header, not {ft}")
            fields.append(T.Field(f.name, ft, f.annotations))
        t = cls(d.name, fields, d)
        self.decl_types[id(d)] = t
        s.declare(d.name, d, d.loc)

    @staticmethod
    def _has_width(t: T.P4Type) -> bool:
        try:
            t.bit_width()
            return True
        except TypeError:
            return False

    def typedef_decl(self, d: ir.TypedefDecl, s: Scope) -> None:
        base = self.resolve(d.type, s)
        if d.is_newtype and not isinstance(base, (T.Bits, T.Bool, T.NewType)):
            raise P4Error(d.loc, f"'type' can only name bit<W>, int<W>, bool or another 'type', not {show(base)}")
        self.decl_types[id(d)] = T.NewType(d.name, base) if d.is_newtype else base
        s.declare(d.name, d, d.loc)

    def enum_decl(self, d: ir.EnumDecl, s: Scope) -> None:
        if len(set(d.members)) != len(d.members):
            raise P4Error(d.loc, f"duplicate member in enum {d.name}")
        if d.underlying is None:
            t = T.Enum(d.name, list(d.members), None, list(range(len(d.members))), d)
        else:
            ut = self.resolve(d.underlying, s)
            if not isinstance(ut, T.Bits):
                raise P4Error(d.underlying.loc, f"enum underlying type must be bit<W> or int<W>, not {ut}")
            values: list[int] = []
            for i, v in enumerate(d.values):
                if v is None:
                    raise P4Error(d.loc, f"member {d.members[i]} of serializable enum {d.name} needs a value")
                e = self.convert(self.expr(v, s, ut), ut, "in enum value")
                if not isinstance(e, ir.IntLit):
                    raise P4Error(v.loc, "enum value must be a compile-time constant")
                d.values[i] = e
                values.append(e.value)
            t = T.Enum(d.name, list(d.members), ut, values, d)
        self.decl_types[id(d)] = t
        self.enums[d.name] = t
        s.declare(d.name, d, d.loc)

    def extern_decl(self, d: ir.ExternDecl) -> None:
        es = Scope(self.top)
        tvs = []
        for tp in d.type_params:
            tv = TypeVar(tp)
            tvs.append(tv)
            es.declare(tp, tv, d.loc)
        self.decl_types[id(d)] = T.Extern(d.name, list(tvs), d)
        meths: dict[str, list[Sig]] = {}
        ctors: list[Sig] = []
        for m in d.methods:
            if m.is_constructor or m.name == d.name:
                sig = self.signature(m.params, None, m.type_params, es, m, "constructor")
                sig.ret = T.Extern(d.name, list(tvs), d)
                ctors.append(sig)
            else:
                sig = self.signature(m.params, m.return_type, m.type_params, es, m, "method")
                meths.setdefault(m.name, []).append(sig)
        self.methods[id(d)] = meths
        self.ctors[id(d)] = ctors

    def signature(self, params: list[ir.Param], ret: ir.TypeRef | None, type_params: list[str],
                  scope: Scope, decl: Any, kind: str) -> Sig:
        ss = Scope(scope)
        tvs = []
        for tp in type_params:
            tv = TypeVar(tp)
            tvs.append(tv)
            ss.declare(tp, tv, getattr(decl, "loc", None) or Location("<unknown>", 0, 0))
        sps = []
        names: set[str] = set()
        for p in params:
            if p.name in names:
                raise P4Error(p.loc, f"duplicate parameter '{p.name}'")
            names.add(p.name)
            pt = self.resolve(p.type, ss)
            self.check_param(p, pt, kind)
            default = None
            if p.default is not None:
                p.default = self.convert(self.expr(p.default, ss, pt), pt, "in default value")
                default = p.default
            opt = ir.find_annotation(p.annotations, "optional") is not None
            sps.append(SigParam(p.direction, p.name, pt, default, opt, p))
        rt = self.resolve(ret, ss) if ret is not None else T.Void()
        sig = Sig(sps, rt, tvs, decl, kind)
        return sig

    def check_param(self, p: ir.Param, pt: T.P4Type, kind: str) -> None:
        """Parameter rules that do not depend on the call sites."""
        if p.default is not None and p.direction in ("out", "inout"):
            raise P4Error(p.loc, f"{p.direction} parameter '{p.name}' cannot have a default value")
        if p.direction and isinstance(pt, (T.Extern, T.String, T.InfInt, T.Block)):
            raise P4Error(p.loc, f"parameter '{p.name}' of type {show(pt)} cannot have a direction")
        if kind in ("action", "function", "apply") and isinstance(pt, T.Block):
            raise P4Error(p.loc, f"parameter '{p.name}' cannot have type {pt}")
        if isinstance(pt, T.Block) and isinstance(pt.decl, (ir.ParserDecl, ir.ControlDecl)):
            raise P4Error(p.loc, f"parameter '{p.name}' cannot have type {pt}: use a {pt.kind} type "
                          f"declaration (a prototype) instead")
        if kind == "action" and isinstance(pt, (T.Extern, T.InfInt)):
            raise P4Error(p.loc, f"action parameter '{p.name}' cannot have type {pt}")
        if kind == "action" and p.direction == "" and not (
                isinstance(pt, (T.Bits, T.Bool, T.NewType)) or (isinstance(pt, T.Enum) and pt.underlying)):
            raise P4Error(p.loc, f"directionless action parameter '{p.name}' has type {show(pt)}; control-plane "
                          f"values must be bit<W>, int<W>, bool, a 'type' or a serializable enum")

    def local_decl(self, d: ir.Decl, s: Scope, ctx: Ctx) -> None:
        if isinstance(d, ir.ConstDecl):
            t = self.resolve(d.type, s)
            v = self.convert(self.expr(d.value, s, t), t, f"in initializer of constant '{d.name}'")
            if not self.is_compile_time(v):
                raise P4Error(d.value.loc, f"initializer of constant '{d.name}' is not a compile-time constant")
            d.value = v
            s.declare(d.name, d, d.loc)
        elif isinstance(d, ir.VarDecl):
            t = self.resolve(d.type, s)
            if isinstance(t, (T.InfInt, T.Block, T.Extern, T.String, T.MatchKind)):
                raise P4Error(d.loc, f"variable '{d.name}' cannot have type {show(t)}")
            if d.init is not None:
                d.init = self.convert(self.expr(d.init, s, t), t, f"in initializer of '{d.name}'")
            s.declare(d.name, d, d.loc)
        elif isinstance(d, ir.ActionDecl):
            self.action_decl(d, s)
        elif isinstance(d, ir.FunctionDecl):
            self.function_decl(d, s)
        elif isinstance(d, ir.TableDecl):
            self.table_decl(d, s)
        elif isinstance(d, ir.InstantiationDecl):
            self.instantiation(d, s)
        elif isinstance(d, ir.ValueSetDecl):
            t = self.resolve(d.type, s)
            d.size = self.const_int(d.size, s, "value_set size")
            self.decl_types[id(d)] = t
            s.declare(d.name, d, d.loc)
        elif isinstance(d, ir.ParserDecl):
            self.parser_decl(d, s)
        elif isinstance(d, ir.ControlDecl):
            self.control_decl(d, s)
        elif isinstance(d, (ir.HeaderDecl, ir.HeaderUnionDecl, ir.StructDecl)):
            self.struct_decl(d, s)
        elif isinstance(d, ir.EnumDecl):
            self.enum_decl(d, s)
        elif isinstance(d, ir.TypedefDecl):
            self.typedef_decl(d, s)
        else:
            raise P4Unsupported(d.loc, f"declaration {type(d).__name__} here")

    def declare_params(self, params: list[ir.Param], s: Scope, tvscope: Scope | None = None) -> None:
        for p in params:
            if p.type.resolved is None:
                self.resolve(p.type, tvscope or s)
            s.declare(p.name, p, p.loc)

    def action_decl(self, d: ir.ActionDecl, s: Scope) -> None:
        seen_directionless = None
        for p in d.params:
            if p.direction == "":
                seen_directionless = p
            elif seen_directionless is not None:
                raise P4Error(seen_directionless.loc, f"directionless parameter '{seen_directionless.name}' of "
                              f"action {d.name} must come after all parameters with a direction")
        sig = self.signature(d.params, None, [], s, d, "action")
        self.sigs[id(d)] = sig
        body = Scope(s)
        self.declare_params(d.params, body)
        self.block(d.body, body, Ctx("action", T.Void(), d.name))
        s.declare(d.name, d, d.loc)

    def function_decl(self, d: ir.FunctionDecl, s: Scope) -> None:
        if d.type_params:
            raise P4Unsupported(d.loc, f"generic function {d.name}")
        sig = self.signature(d.params, d.return_type, [], s, d, "function")
        self.sigs[id(d)] = sig
        body = Scope(s)
        self.declare_params(d.params, body)
        self.block(d.body, body, Ctx("function", sig.ret, d.name))
        if not isinstance(sig.ret, T.Void) and not always_returns(d.body):
            raise P4Error(d.loc, f"function {d.name} does not return a value on every path")
        s.declare(d.name, d, d.loc)

    def block_scope(self, d: ir.ParserDecl | ir.ControlDecl, s: Scope) -> Scope:
        if d.type_params:
            raise P4Unsupported(d.loc, f"generic {type(d).__name__[:-4].lower()} {d.name}")
        bs = Scope(s)
        kind = "apply"
        self.sigs[id(d)] = self.signature(d.params, None, [], s, d, kind)
        ctor = self.signature(d.ctor_params, None, [], s, d, "constructor")
        self.ctors[id(d)] = [ctor]
        names = set()
        for p in d.ctor_params + d.params:
            if p.name in names:
                raise P4Error(p.loc, f"duplicate parameter '{p.name}'")
            names.add(p.name)
        self.declare_params(d.ctor_params, bs)
        self.declare_params(d.params, bs)
        return bs

    def parser_decl(self, d: ir.ParserDecl, s: Scope) -> None:
        ps = self.block_scope(d, s)
        ctx = Ctx("parser", None, d.name)
        outer, self.ctx = self.ctx, ctx
        try:
            self.parser_body(d, ps, ctx)
        finally:
            self.ctx = outer
        s.declare(d.name, d, d.loc)

    def parser_body(self, d: ir.ParserDecl, ps: Scope, ctx: Ctx) -> None:
        for ld in d.locals:
            self.local_decl(ld, ps, ctx)
        states: dict[str, ir.ParserState] = {}
        for st in d.states:
            if st.name in states or st.name in ("accept", "reject"):
                raise P4Error(st.loc, f"duplicate parser state '{st.name}'")
            states[st.name] = st
        if "start" not in states:
            raise P4Error(d.loc, f"parser {d.name} has no 'start' state")
        for st in d.states:
            ss = Scope(ps)
            st.stmts = [self.stmt(x, ss, ctx) for x in st.stmts]
            tr = st.transition
            if isinstance(tr, ir.DirectTransition):
                self.check_state(tr.state, states, tr.loc)
            elif isinstance(tr, ir.SelectTransition):
                self.select(tr, ss, states)

    def check_state(self, name: str, states: dict[str, ir.ParserState], loc: Location) -> None:
        if name not in states and name not in ("accept", "reject"):
            raise P4Error(loc, f"unknown parser state '{name}'")

    def select(self, tr: ir.SelectTransition, s: Scope, states: dict[str, ir.ParserState]) -> None:
        exprs = []
        for e in tr.exprs:
            e = self.expr(e, s, None)
            self.runtime_value(e)
            if not isinstance(e.type, (T.Bits, T.Bool, T.Enum, T.ErrorType, T.NewType)):
                raise P4Error(start(e), f"cannot select on a value of type {show(e.type)}")
            exprs.append(e)
        tr.exprs = exprs
        ktypes = [e.type for e in exprs]
        for c in tr.cases:
            self.check_state(c.state, states, c.loc)
            c.keyset = self.keyset_tuple(c.keyset, ktypes, s, c.loc)

    def keyset_tuple(self, ks: ir.Expr, ktypes: list[T.P4Type], s: Scope, loc: Location) -> ir.Expr:
        if isinstance(ks, (ir.DefaultExpr, ir.DontCareExpr)):
            ks.type = T.DontCare()
            return ks
        if len(ktypes) == 1:
            if isinstance(ks, ir.ListExpr):
                if len(ks.elems) != 1:
                    raise P4Error(ks.loc, f"keyset has {len(ks.elems)} elements but select has 1 expression")
                ks.elems[0] = self.keyset(ks.elems[0], ktypes[0], s)
                ks.type = ktypes[0]
                return ks
            return self.keyset(ks, ktypes[0], s)
        if isinstance(ks, ir.ListExpr):
            if len(ks.elems) != len(ktypes):
                raise P4Error(ks.loc, f"keyset has {len(ks.elems)} elements but select has {len(ktypes)} expressions")
            ks.elems = [self.keyset(k, t, s) for k, t in zip(ks.elems, ktypes, strict=False)]
            ks.type = T.Tuple(tuple(ktypes))
            return ks
        e = self.expr(ks, s, None)
        if isinstance(e, ir.PathExpr) and isinstance(e.decl, ir.ValueSetDecl):
            vt = e.type
            n = len(vt.fields) if isinstance(vt, T.Struct) else 1
            if n != len(ktypes):
                raise P4Error(ks.loc, f"value set has {n} fields but select has {len(ktypes)} expressions")
            return e
        raise P4Error(ks.loc, f"keyset has 1 element but select has {len(ktypes)} expressions")

    def keyset(self, k: ir.Expr, kt: T.P4Type, s: Scope) -> ir.Expr:
        """One keyset element against key type ``kt``; sets ``.type = kt``."""
        if isinstance(k, (ir.DefaultExpr, ir.DontCareExpr)):
            k.type = T.DontCare()
            return k
        if isinstance(k, ir.BinaryExpr) and k.op in ("&&&", ".."):
            k.left = self.convert(self.expr(k.left, s, kt), kt, "in keyset")
            mt = kt.underlying if k.op == "&&&" and isinstance(kt, T.Enum) and kt.underlying else kt
            k.right = self.convert(self.expr(k.right, s, mt), mt, "in keyset")
            for part in (k.left, k.right):
                if not self.is_compile_time(part):
                    raise P4Error(start(part), "keyset must be a compile-time constant")
            k.type = kt
            return k
        e = self.expr(k, s, kt)
        if isinstance(e, ir.PathExpr) and isinstance(e.decl, ir.ValueSetDecl):
            if not type_eq(e.type, kt) and not (isinstance(e.type, T.Struct) and len(e.type.fields) == 1):
                raise P4Error(k.loc, f"value set {e.decl.name} of type {e.type} does not match key type {kt}")
            return e
        e = self.convert(e, kt, "in keyset")
        if not self.is_compile_time(e):
            raise P4Error(start(e), "keyset must be a compile-time constant")
        return e

    def control_decl(self, d: ir.ControlDecl, s: Scope) -> None:
        cs = self.block_scope(d, s)
        ctx = Ctx("control", T.Void(), d.name)
        outer, self.ctx = self.ctx, ctx
        try:
            for ld in d.locals:
                self.local_decl(ld, cs, ctx)
        finally:
            self.ctx = outer
        self.block(d.body, Scope(cs), ctx)
        s.declare(d.name, d, d.loc)

    def instantiation(self, d: ir.InstantiationDecl, s: Scope) -> None:
        t = self.resolve(d.type, s)
        if isinstance(t, T.Extern):
            sigs = self.ctors.get(id(t.decl), [])
            if not sigs:
                raise P4Error(d.loc, f"extern {t.name} has no constructor")
            explicit = t.type_args
            sig, args, m = self.match_call(sigs, d.args, s, f"constructor of {t.name}", d.loc,
                                           explicit_outer=explicit)
            if not explicit and isinstance(sig.ret, T.Extern) and sig.ret.type_args:
                ta = [subst(a, m) for a in sig.ret.type_args]
                if any(isinstance(a, TypeVar) for a in ta):
                    raise P4Error(d.loc, f"cannot infer the type arguments of {t.name}")
                t = T.Extern(t.name, ta, t.decl)
                d.type.resolved = t
            d.args = args
            self.fold_ctor_args(d.args)
        elif isinstance(t, T.Block) and isinstance(t.decl, (ir.ParserDecl, ir.ControlDecl)):
            where = self.ctx.kind
            if where not in ("parser", "control") or (where == "control") != (t.kind == "control"):
                place = "at top level" if where == "toplevel" else f"in a {where}"
                raise P4Error(d.loc, f"a {t.kind} cannot be instantiated {place}")
            sig, args, _ = self.match_call(self.ctors[id(t.decl)], d.args, s, f"constructor of {t.name}", d.loc)
            d.args = args
            self.fold_ctor_args(d.args)
        elif isinstance(t, T.Block) and t.kind == "package":
            self.package_args(d, t, s)
        else:
            raise P4Error(d.loc, f"cannot instantiate {t}")
        self.decl_types[id(d)] = t
        self.instances.append(d)
        s.declare(d.name, d, d.loc)

    def fold_ctor_args(self, args: list[ir.Argument]) -> None:
        for a in args:
            v = a.value
            if not (self.is_compile_time(v) or isinstance(v, (ir.DontCareExpr, ir.CallExpr)) or
                    (isinstance(v, ir.PathExpr) and isinstance(v.decl, (ir.Param, ir.InstantiationDecl)))):
                raise P4Error(v.loc, "constructor argument must be a compile-time constant")

    def package_args(self, d: ir.InstantiationDecl, t: T.Block, s: Scope) -> None:
        """Arguments of a package instantiation are parser/control instances."""
        psig = self.sigs[id(t.decl)]
        if len(d.args) != len(psig.params):
            raise P4Error(d.loc, f"package {t.name} expects {len(psig.params)} arguments, got {len(d.args)}")
        bindings: dict[int, T.P4Type] = {}
        tv = {v.id: v for v in psig.tvars}
        for tvar, ta in zip(psig.tvars, t.type_args, strict=False):
            bindings[tvar.id] = ta
        ordered: list[ir.Argument | None] = [None] * len(psig.params)
        pos = 0
        for a in d.args:
            if a.name is not None:
                idx = next((i for i, p in enumerate(psig.params) if p.name == a.name), None)
                if idx is None:
                    raise P4Error(a.loc, f"package {t.name} has no parameter '{a.name}'")
            else:
                idx = pos
                pos += 1
            ordered[idx] = a
        for p, arg in zip(psig.params, ordered, strict=False):
            assert arg is not None
            v = arg.value
            if isinstance(v, ir.CallExpr):
                f = v.func
                ds = s.lookup(f.name) if isinstance(f, ir.PathExpr) else None
                if not isinstance(f, ir.PathExpr) or not ds or not isinstance(ds[0], (ir.ParserDecl, ir.ControlDecl)):
                    raise P4Error(v.loc, f"argument for '{p.name}' must be a parser or control instance")
                blk = ds[0]
                f.decl = blk
                f.type = T.TypeOfType(T.Block("parser" if isinstance(blk, ir.ParserDecl) else "control", blk.name, blk))
                _, args, _ = self.match_call(self.ctors[id(blk)], v.args, s, f"constructor of {blk.name}", v.loc)
                v.args = args
                self.fold_ctor_args(args)
                v.type = T.Block(f.type.of.kind, blk.name, blk)
            elif isinstance(v, ir.PathExpr):
                ds = s.lookup(v.name)
                if not ds or not isinstance(ds[0], ir.InstantiationDecl) or not isinstance(
                        self.decl_types.get(id(ds[0])), T.Block):
                    raise P4Error(v.loc, f"argument for '{p.name}' must be a parser or control instance")
                v.decl = ds[0]
                v.type = self.decl_types[id(ds[0])]
                blk = v.type.decl
            else:
                raise P4Error(v.loc, f"argument for '{p.name}' must be a parser or control instance")
            pt = p.type
            if not isinstance(pt, T.Block) or not isinstance(pt.decl, (ir.ParserTypeDecl, ir.ControlTypeDecl)):
                raise P4Unsupported(v.loc, f"package parameter of type {pt}")
            want_kind = "parser" if isinstance(pt.decl, ir.ParserTypeDecl) else "control"
            have_kind = "parser" if isinstance(blk, ir.ParserDecl) else "control"
            if want_kind != have_kind:
                raise P4Error(v.loc, f"argument for '{p.name}' must be a {want_kind}, not {have_kind} {blk.name}")
            proto = self.sigs[id(pt.decl)]
            inner = {tv_.id: subst(ta, bindings) for tv_, ta in zip(proto.tvars, pt.type_args, strict=False)}
            bsig = self.sigs[id(blk)]
            if len(bsig.params) != len(proto.params):
                raise P4Error(v.loc, f"{have_kind} {blk.name} has {len(bsig.params)} parameters but "
                              f"{pt.decl.name} expects {len(proto.params)}")
            for bp, pp in zip(bsig.params, proto.params, strict=False):
                want = subst(pp.type, inner)
                if bp.direction != pp.direction:
                    raise P4Error(bp.node.loc, f"parameter '{bp.name}' of {blk.name} must have direction "
                                  f"'{pp.direction or 'none'}' as in {pt.decl.name}")
                if isinstance(want, TypeVar) and want.id in tv:
                    if want.id in bindings:
                        if not type_eq(bindings[want.id], bp.type):
                            raise P4Error(bp.node.loc, f"parameter '{bp.name}' of {blk.name} has type {bp.type} "
                                          f"but {want.name} is {bindings[want.id]}")
                    else:
                        bindings[want.id] = bp.type
                elif not isinstance(want, TypeVar) and not type_eq(want, bp.type):
                    raise P4Error(bp.node.loc, f"parameter '{bp.name}' of {blk.name} has type {bp.type}, "
                                  f"expected {want}")
        d.args = [ir.Argument(loc=a.loc, value=a.value, name=p.name)
                  for p, a in zip(psig.params, ordered, strict=True) if a is not None]
        t.type_args = [bindings.get(v.id, v) for v in psig.tvars]

    def table_decl(self, d: ir.TableDecl, s: Scope) -> None:
        locs = d.property_locs
        if locs and "actions" not in locs:
            raise P4Error(d.loc, f"table {d.name} has no 'actions' property")
        for later, earlier in (("default_action", "actions"), ("entries", "actions"), ("entries", "key")):
            if later in locs and earlier in locs and \
                    (locs[later].line, locs[later].col) < (locs[earlier].line, locs[earlier].col):
                raise P4Error(locs[later], f"table property '{later}' must come after '{earlier}'")
        ktypes = []
        for k in d.keys:
            k.expr = self.expr(k.expr, s, None)
            self.runtime_value(k.expr)
            if k.match_kind not in self.match_kinds:
                raise P4Error(k.loc, f"unknown match kind '{k.match_kind}'")
            kt = k.expr.type
            if not isinstance(kt, (T.Bits, T.Bool, T.Enum, T.ErrorType, T.NewType)):
                raise P4Error(k.expr.loc, f"table key of type {kt} is not allowed")
            ktypes.append(kt)
        listed: list[ir.ActionDecl] = []
        for ar in d.actions:
            self.action_ref(ar, s, partial=True)
            if any(ar.decl is x for x in listed):
                raise P4Error(ar.loc, f"action {ar.name} listed twice in table {d.name}")
            listed.append(ar.decl)
        if d.default_action is not None:
            self.action_ref(d.default_action, s, partial=False)
            self.require_listed(d.default_action, listed, d, "default_action")
        for e in d.entries:
            if len(ktypes) == 1 and len(e.keys) == 1 and isinstance(e.keys[0], ir.ListExpr) and \
                    len(e.keys[0].elems) == 1:
                e.keys = list(e.keys[0].elems)
            if len(e.keys) != len(ktypes):
                if len(e.keys) == 1 and isinstance(e.keys[0], ir.ListExpr) and len(e.keys[0].elems) == len(ktypes):
                    e.keys = list(e.keys[0].elems)
                else:
                    raise P4Error(e.loc, f"entry has {len(e.keys)} keys but table {d.name} has {len(ktypes)}")
            e.keys = [self.entry_key(k, kt, ke.match_kind, s) for k, kt, ke in zip(e.keys, ktypes, d.keys, strict=False)]
            self.action_ref(e.action, s, partial=False)
            self.require_listed(e.action, listed, d, "entry")
            if e.priority is not None:
                e.priority = self.const_int(e.priority, s, "entry priority")
        if d.size is not None:
            d.size = self.const_int(d.size, s, "table size")
            if d.size.value < 0:
                raise P4Error(d.size.loc, "table size must be non-negative")
        for name, pe in list(d.properties.items()):
            d.properties[name] = self.expr(pe, s, None)
        self.decl_types[id(d)] = T.TableType(d)
        s.declare(d.name, d, d.loc)

    def require_listed(self, ar: ir.ActionRef, listed: list[ir.ActionDecl], t: ir.TableDecl, what: str) -> None:
        if not any(ar.decl is x for x in listed):
            raise P4Error(ar.loc, f"{what} action '{ar.name}' is not listed in the actions of table {t.name}")
        # arguments bound in the actions list must be repeated unchanged
        listed_ref = next(r for r in t.actions if r.decl is ar.decl)
        if listed_ref.args:
            bound = {a.name: a.value for a in listed_ref.args}
            for a in ar.args:
                if a.name in bound and not same_expr(a.value, bound[a.name]):
                    raise P4Error(start(a.value), f"argument '{a.name}' of {what} action {ar.name} does not match "
                                  f"the one bound in the actions list of table {t.name}")

    def action_ref(self, ar: ir.ActionRef, s: Scope, partial: bool) -> None:
        ds = self.top.lookup(ar.name[1:]) if ar.name.startswith(".") else s.lookup(ar.name)
        if not ds:
            raise P4Error(ar.loc, f"undeclared action '{ar.name}'")
        a = ds[0]
        if not isinstance(a, ir.ActionDecl):
            raise P4Error(ar.loc, f"'{ar.name}' is not an action")
        ar.decl = a
        sig = self.sigs[id(a)]
        if partial:
            # actions list: arguments only for the data-plane (directional) params
            params = [p for p in sig.params if p.direction != ""]
            if ar.args and len(ar.args) != len(params):
                raise P4Error(ar.loc, f"action {a.name} takes {len(params)} data-plane arguments, "
                              f"got {len(ar.args)}")
            if not ar.args:
                return
            sig = Sig(params, sig.ret, [], a, "action")
        _, ar.args, _ = self.match_call([sig], ar.args, s, f"action {a.name}", ar.loc)
        if not partial:
            for p, arg in zip(sig.params, ar.args, strict=True):
                if p.direction == "" and not self.is_compile_time(arg.value):
                    raise P4Error(start(arg.value), f"argument '{p.name}' of action {a.name} must be a "
                                  f"compile-time constant")

    def entry_key(self, k: ir.Expr, kt: T.P4Type, mk: str, s: Scope) -> ir.Expr:
        if isinstance(k, (ir.DefaultExpr, ir.DontCareExpr)):
            k.type = T.DontCare()
            return k
        if isinstance(k, ir.BinaryExpr) and k.op == "&&&":
            if mk not in ("ternary", "lpm"):
                raise P4Error(k.loc, f"mask '&&&' is not allowed for a key matched by '{mk}'")
        elif isinstance(k, ir.BinaryExpr) and k.op == "..":
            if mk != "range":
                raise P4Error(k.loc, f"range '..' is not allowed for a key matched by '{mk}'")
        k = self.keyset(k, kt, s)
        parts = [k.left, k.right] if isinstance(k, ir.BinaryExpr) and k.op in ("&&&", "..") else [k]
        for p in parts:
            if not self.is_compile_time(p):
                raise P4Error(p.loc, "table entry keys must be compile-time constants")
        if mk == "lpm" and isinstance(k, ir.BinaryExpr) and k.op == "&&&" and isinstance(k.right, ir.IntLit) \
                and isinstance(kt, T.Bits):
            mask = k.right.value & ((1 << kt.width) - 1)
            inv = ~mask & ((1 << kt.width) - 1)
            if inv & (inv + 1):
                raise P4Error(start(k), f"invalid mask {k.right.value:#x} for an lpm key: it must be a prefix")
        return k
