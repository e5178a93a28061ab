"""Name resolution, type checking/inference and constant folding.

The checker walks the IR once, in declaration order (P4 requires declaration
before use), and rewrites it into the annotated form described in
``switches.soft.midend`` (the annotation contract).  Expression visitors
return a possibly new node which the caller stores back in place.

Diagnostics (each a ``P4Error`` at the offending node): undeclared names and
types; duplicate declarations (scopes, fields, parameters, states, error and
match_kind members, switch labels); unknown fields, methods, enum/error
members; type mismatches in assignments, initializers, arguments, returns,
keysets, switch labels and operands (widths, signedness, bool vs bit<1>);
argument count/name errors and uninferable generic arguments; out/inout
arguments and assignment targets that are not writable (constants, ``in``
and directionless parameters, non-lvalues); calls of non-callables; sized
literals that do not fit; invalid casts (width and signedness change at once,
new types other than to/from their base, non-serializable enums); non-bool
conditions; slice bounds; constant-only positions (widths, sizes, keysets,
entry keys, control-plane action arguments, constant initializers, switch
labels); table rules (match kinds, key types, actions listed for
default_action/entries, mask/range per match kind, lpm prefix masks,
property order); return/exit/break placement; parser states and select
arity; where tables, sub-blocks, actions, ``verify`` and stack
``next``/``last``/``lastIndex`` may be used; instantiation placement;
parameter and variable types; ``main`` being a well-formed V1Switch.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable as Fn
from dataclasses import dataclass, field, replace
from typing import Any

from ..frontend import ir
from ..frontend.source import Location, P4Error, P4Unsupported
from . import consteval as CE
from . import types as T

CORE_ERRORS = ("NoError", "PacketTooShort", "NoMatch", "StackOutOfBounds",
               "HeaderTooShort", "ParserTimeout", "ParserInvalidArgument")

V1SWITCH_ROLES = ("parser", "verify_checksum", "ingress", "egress",
                  "compute_checksum", "deparser")

MAX_WIDTH = 2048  # widest bit<W>/int<W>/varbit<W> accepted, as in p4c

SIZE_METHODS = ("minSizeInBits", "minSizeInBytes", "maxSizeInBits", "maxSizeInBytes")

_tv_ids = itertools.count()


class TypeVar(T.P4Type):
    """A type parameter of a generic declaration; never escapes the checker."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.id = next(_tv_ids)

    def __repr__(self) -> str:
        return f"TypeVar({self.name}#{self.id})"

    def __str__(self) -> str:
        return self.name


@dataclass
class SigParam:
    direction: str
    name: str
    type: T.P4Type
    default: ir.Expr | None = None
    optional: bool = False
    node: Any = None


@dataclass
class Sig:
    """A callable's signature with its own type variables."""

    params: list[SigParam]
    ret: T.P4Type
    tvars: list[TypeVar] = field(default_factory=list)
    decl: Any = None
    kind: str = "function"


TYPE_DECLS = (ir.HeaderDecl, ir.HeaderUnionDecl, ir.StructDecl, ir.EnumDecl, ir.TypedefDecl,
              ir.ExternDecl, ir.ParserTypeDecl, ir.ControlTypeDecl, ir.PackageTypeDecl,
              ir.ParserDecl, ir.ControlDecl)
OVERLOADABLE = (ir.ExternFunctionDecl, ir.FunctionDecl, ir.MethodDecl)


def is_type_decl(d: Any) -> bool:
    return isinstance(d, TYPE_DECLS) or isinstance(d, TypeVar)


class Scope:
    def __init__(self, parent: Scope | None = None) -> None:
        self.parent = parent
        self.names: dict[str, list[Any]] = {}

    def declare(self, name: str, decl: Any, loc: Location) -> None:
        prev = self.names.get(name)
        if prev:
            if not (isinstance(decl, OVERLOADABLE) and all(isinstance(p, OVERLOADABLE) for p in prev)):
                ploc = getattr(prev[0], "loc", None)
                where = f" (previous declaration at {ploc})" if ploc else ""
                raise P4Error(loc, f"duplicate declaration of '{name}'{where}")
            prev.append(decl)
        else:
            self.names[name] = [decl]

    def lookup(self, name: str, pred: Fn[[Any], bool] | None = None) -> list[Any] | None:
        s: Scope | None = self
        while s is not None:
            ds = s.names.get(name)
            if ds:
                if pred is None:
                    return ds
                sel = [d for d in ds if pred(d)]
                if sel:
                    return sel
            s = s.parent
        return None


@dataclass
class Ctx:
    """Where a statement is: kind is 'action', 'function', 'control', 'parser'."""

    kind: str
    ret: T.P4Type | None = None
    name: str = ""
    loop: bool = False


def type_eq(a: T.P4Type, b: T.P4Type) -> bool:
    if a is b:
        return True
    if isinstance(a, T.Extern) and isinstance(b, T.Extern):
        return a.decl is b.decl and len(a.type_args) == len(b.type_args) and all(
            type_eq(x, y) for x, y in zip(a.type_args, b.type_args, strict=False))
    if isinstance(a, T.Block) and isinstance(b, T.Block):
        return a.decl is b.decl
    if isinstance(a, T.Tuple) and isinstance(b, T.Tuple):
        return len(a.elems) == len(b.elems) and all(type_eq(x, y) for x, y in zip(a.elems, b.elems, strict=False))
    if isinstance(a, T.Stack) and isinstance(b, T.Stack):
        return a.size == b.size and type_eq(a.elem, b.elem)
    if isinstance(a, (T.StructLike, T.Enum, T.NewType)) or isinstance(b, (T.StructLike, T.Enum, T.NewType)):
        if isinstance(a, T.StructLike) and isinstance(b, T.StructLike) and a.decl is not None:
            return a.decl is b.decl
        if isinstance(a, T.Enum) and isinstance(b, T.Enum) and a.decl is not None:
            return a.decl is b.decl
        return False
    if isinstance(a, TypeVar) or isinstance(b, TypeVar):
        return False
    return a == b


def subst(t: T.P4Type, m: dict[int, T.P4Type]) -> T.P4Type:
    if not m:
        return t
    if isinstance(t, TypeVar):
        return m.get(t.id, t)
    if isinstance(t, T.Tuple):
        return T.Tuple(tuple(subst(e, m) for e in t.elems))
    if isinstance(t, T.Stack):
        return T.Stack(subst(t.elem, m), t.size)
    if isinstance(t, T.Extern) and t.type_args:
        return T.Extern(t.name, [subst(a, m) for a in t.type_args], t.decl)
    if isinstance(t, T.Block) and t.type_args:
        return T.Block(t.kind, t.name, t.decl, [subst(a, m) for a in t.type_args])
    return t


def free_vars(t: T.P4Type, vs: dict[int, TypeVar]) -> bool:
    if isinstance(t, TypeVar):
        return t.id in vs
    if isinstance(t, T.Tuple):
        return any(free_vars(e, vs) for e in t.elems)
    if isinstance(t, T.Stack):
        return free_vars(t.elem, vs)
    if isinstance(t, (T.Extern, T.Block)):
        return any(free_vars(a, vs) for a in t.type_args)
    return False


def start(e: ir.Expr) -> Location:
    """Where an expression starts in the source (member/call nodes sit on the name)."""
    while True:
        if isinstance(e, (ir.MemberExpr, ir.IndexExpr, ir.SliceExpr)):
            e = e.expr
        elif isinstance(e, ir.CallExpr):
            e = e.func
        elif isinstance(e, ir.BinaryExpr):
            e = e.left
        elif isinstance(e, ir.TernaryExpr):
            e = e.cond
        else:
            return e.loc


def show(t: Any) -> str:
    """A type as written in messages."""
    if isinstance(t, T.Callable):
        name = getattr(t.decl, "name", None)
        kind = {"extern_function": "extern function", "apply": "apply method"}.get(t.kind, t.kind)
        return f"{kind} {name}" if name else kind
    if isinstance(t, T.TypeOfType):
        return f"the type name {show(t.of)}"
    if isinstance(t, T.ApplyResult):
        return f"the result of {t.table}.apply()"
    if isinstance(t, T.ActionEnum):
        return f"{t.table}.apply().action_run"
    return str(t)


def same_expr(a: ir.Expr, b: ir.Expr) -> bool:
    """Structural equality of two checked expressions (same value or same location)."""
    if type(a) is not type(b):
        return False
    b_: Any = b  # same class as ``a``
    if isinstance(a, (ir.IntLit, ir.BoolLit, ir.StringLit)):
        return a.value == b_.value and type_eq(a.type, b_.type)
    if isinstance(a, ir.PathExpr):
        return a.decl is b_.decl
    if isinstance(a, ir.MemberExpr):
        return a.member == b_.member and same_expr(a.expr, b_.expr)
    if isinstance(a, ir.IndexExpr):
        return same_expr(a.expr, b_.expr) and same_expr(a.index, b_.index)
    if isinstance(a, ir.SliceExpr):
        return same_expr(a.expr, b_.expr) and same_expr(a.hi, b_.hi) and same_expr(a.lo, b_.lo)
    if isinstance(a, ir.CastExpr):
        return type_eq(a.type, b_.type) and same_expr(a.expr, b_.expr)
    if isinstance(a, ir.UnaryExpr):
        return a.op == b_.op and same_expr(a.expr, b_.expr)
    if isinstance(a, ir.BinaryExpr):
        return a.op == b_.op and same_expr(a.left, b_.left) and same_expr(a.right, b_.right)
    return False


def always_returns(st: ir.Stmt | None) -> bool:
    """Whether every path through ``st`` ends in a return (or exit)."""
    if isinstance(st, (ir.ReturnStmt, ir.ExitStmt)):
        return True
    if isinstance(st, ir.BlockStmt):
        return any(always_returns(x) for x in st.stmts)
    if isinstance(st, ir.IfStmt):
        return always_returns(st.then) and always_returns(st.else_)
    if isinstance(st, ir.SwitchStmt):
        has_default = any(isinstance(c.label, ir.DefaultExpr) for c in st.cases)
        return has_default and all(c.body is None or always_returns(c.body) for c in st.cases)
    return False


def contains_infint(t: T.P4Type) -> bool:
    if isinstance(t, T.InfInt):
        return True
    if isinstance(t, T.Tuple):
        return any(contains_infint(e) for e in t.elems)
    if isinstance(t, T.Struct) and t.decl is None:  # an untyped {a = ..} initializer
        return any(contains_infint(f.type) for f in t.fields)
    return False


def clone_literal(e: ir.Expr) -> ir.Expr:
    """A fresh copy of a literal (so call sites do not share default-value nodes)."""
    if isinstance(e, ir.IntLit):
        return ir.IntLit(loc=e.loc, value=e.value, width=e.width, signed=e.signed, base=e.base, type=e.type)
    if isinstance(e, ir.BoolLit):
        return ir.BoolLit(loc=e.loc, value=e.value, type=e.type)
    if isinstance(e, ir.StringLit):
        return ir.StringLit(loc=e.loc, value=e.value, type=e.type)
    return e


def type_ref(t: T.P4Type, loc: Location) -> ir.TypeRef:
    return ir.TypeRef(loc=loc, resolved=t)


def header_like(t: T.P4Type) -> bool:
    return isinstance(t, (T.Header, T.HeaderUnion))


def size_in_bits(t: T.P4Type, loc: Location, maximum: bool) -> int:
    if isinstance(t, T.Varbit):
        return t.max_width if maximum else 0
    if isinstance(t, (T.Bits, T.Bool)):
        return t.bit_width()
    if isinstance(t, (T.Enum, T.NewType)):
        try:
            return t.bit_width()
        except TypeError:
            pass
    if isinstance(t, T.HeaderUnion):
        return max((size_in_bits(f.type, loc, maximum) for f in t.fields), default=0)
    if isinstance(t, T.StructLike):
        return sum(size_in_bits(f.type, loc, maximum) for f in t.fields)
    if isinstance(t, T.Stack):
        return t.size * size_in_bits(t.elem, loc, maximum)
    if isinstance(t, T.Tuple):
        return sum(size_in_bits(e, loc, maximum) for e in t.elems)
    raise P4Error(loc, f"type {t} has no size in bits")


class Checker:
    def __init__(self, program: ir.Program) -> None:
        self.program = program
        self.top = Scope()
        self.errors: list[str] = list(CORE_ERRORS)
        self.match_kinds: list[str] = []
        self.error_decl: ir.ErrorDecl | None = None
        declared_errors: set[str] = set()
        for d in program.decls:
            if isinstance(d, ir.ErrorDecl):
                self.error_decl = self.error_decl or d
                for m in d.members:
                    if m in declared_errors:
                        raise P4Error(d.loc, f"duplicate declaration of error.{m}")
                    declared_errors.add(m)
                    if m not in self.errors:
                        self.errors.append(m)
            elif isinstance(d, ir.MatchKindDecl):
                for m in d.members:
                    if m in self.match_kinds:
                        raise P4Error(d.loc, f"duplicate declaration of match_kind {m}")
                    self.match_kinds.append(m)
        self.error_type = T.ErrorType(tuple(self.errors))
        self.decl_types: dict[int, T.P4Type] = {}  # id(decl) -> type it declares / has
        self.sigs: dict[int, Sig] = {}  # id(callable decl) -> signature
        self.ctors: dict[int, list[Sig]] = {}  # id(ExternDecl) -> constructor signatures
        self.methods: dict[int, dict[str, list[Sig]]] = {}  # id(ExternDecl) -> name -> sigs
        self.enums: dict[str, T.Enum] = {}
        self.instances: list[ir.InstantiationDecl] = []
        self.ctx = Ctx("toplevel")  # the statement context being checked
        self.switch_head = False  # typing the expression of a switch statement

    # ------------------------------------------------------------------ types

    def resolve(self, tr: ir.TypeRef, scope: Scope) -> T.P4Type:
        t = self._resolve(tr, scope)
        tr.resolved = t
        return t

    def _resolve(self, tr: ir.TypeRef, scope: Scope) -> T.P4Type:
        if isinstance(tr, ir.TypeBits):
            w = self.const_int(tr.width, scope, "width")
            tr.width = w
            if w.value <= 0 and not (w.value == 0 and not tr.signed) or w.value > MAX_WIDTH:
                raise P4Error(tr.loc, f"invalid width {w.value} for {'int' if tr.signed else 'bit'}<>"
                              + (f" (at most {MAX_WIDTH})" if w.value > MAX_WIDTH else ""))
            return T.Bits(w.value, tr.signed)
        if isinstance(tr, ir.TypeVarbit):
            w = self.const_int(tr.max_width, scope, "varbit width")
            tr.max_width = w
            if not 0 < w.value <= MAX_WIDTH:
                raise P4Error(tr.loc, f"invalid width {w.value} for varbit<>")
            return T.Varbit(w.value)
        if isinstance(tr, ir.TypeInfInt):
            return T.InfInt()
        if isinstance(tr, ir.TypeBool):
            return T.Bool()
        if isinstance(tr, ir.TypeString):
            return T.String()
        if isinstance(tr, ir.TypeVoid):
            return T.Void()
        if isinstance(tr, ir.TypeError_):
            return self.error_type
        if isinstance(tr, ir.TypeMatchKind):
            return T.MatchKind()
        if isinstance(tr, ir.TypeDontCare):
            return T.DontCare()
        if isinstance(tr, ir.TypeName):
            return self.named_type(tr.name, tr.absolute, scope, tr.loc, [])
        if isinstance(tr, ir.TypeSpecialized):
            args = [self.resolve(a, scope) for a in tr.args]
            t = self.named_type(tr.base.name, tr.base.absolute, scope, tr.loc, args)
            tr.base.resolved = t
            return t
        if isinstance(tr, ir.TypeStack):
            elem = self.resolve(tr.elem, scope)
            n = self.const_int(tr.size, scope, "stack size")
            tr.size = n
            if n.value <= 0:
                raise P4Error(tr.size.loc, f"header stack size must be positive, not {n.value}")
            return T.Stack(elem, n.value)
        if isinstance(tr, ir.TypeTuple):
            return T.Tuple(tuple(self.resolve(e, scope) for e in tr.elems))
        if tr.resolved is not None:
            return tr.resolved
        raise P4Unsupported(tr.loc, f"type {type(tr).__name__}")

    def named_type(self, name: str, absolute: bool, scope: Scope, loc: Location,
                   args: list[T.P4Type]) -> T.P4Type:
        if name == "error":
            return self.error_type
        ds = (self.top if absolute else scope).lookup(name, is_type_decl)
        if not ds:
            raise P4Error(loc, f"undeclared type '{name}'")
        d = ds[0]
        if isinstance(d, TypeVar):
            return d
        if isinstance(d, ir.ExternDecl):
            if args and len(args) != len(d.type_params):
                raise P4Error(loc, f"extern {name} expects {len(d.type_params)} type arguments, got {len(args)}")
            return T.Extern(name, list(args), d)
        if isinstance(d, (ir.ParserTypeDecl, ir.ControlTypeDecl, ir.PackageTypeDecl, ir.ParserDecl, ir.ControlDecl)):
            kind = "parser" if isinstance(d, (ir.ParserTypeDecl, ir.ParserDecl)) else (
                "control" if isinstance(d, (ir.ControlTypeDecl, ir.ControlDecl)) else "package")
            return T.Block(kind, name, d, list(args))
        if args:
            raise P4Error(loc, f"type {name} is not generic")
        t = self.decl_types.get(id(d))
        if t is None:
            raise P4Error(loc, f"type '{name}' is used before it is fully declared")
        return t

    def const_int(self, e: ir.Expr, scope: Scope, what: str) -> ir.IntLit:
        v = self.expr(e, scope, None)
        if isinstance(v, ir.CastExpr) and isinstance(v.expr, ir.IntLit):
            v = v.expr
        if not isinstance(v, ir.IntLit):
            raise P4Error(e.loc, f"{what} must be a compile-time integer constant")
        return v

    # ------------------------------------------------------------ top level

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

    # ------------------------------------------------------------ declarations

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

    def is_compile_time(self, e: ir.Expr) -> bool:
        if CE.is_const(e):
            return True
        if isinstance(e, ir.MemberExpr) and isinstance(e.type, (T.ErrorType, T.Enum)):
            return True
        if isinstance(e, (ir.ListExpr,)):
            return all(self.is_compile_time(x) for x in e.elems)
        if isinstance(e, ir.StructExpr):
            return all(self.is_compile_time(x) for _, x in e.fields)
        if isinstance(e, ir.CastExpr):
            return self.is_compile_time(e.expr)
        if isinstance(e, ir.PathExpr) and isinstance(e.decl, ir.ConstDecl):
            return True
        return False

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

    # --------------------------------------------------------------- tables

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

    # ------------------------------------------------------------ statements

    def block(self, b: ir.BlockStmt, s: Scope, ctx: Ctx) -> ir.BlockStmt:
        b.stmts = [self.stmt(x, s, ctx) for x in b.stmts]
        return b

    def stmt(self, st: ir.Stmt, s: Scope, ctx: Ctx) -> ir.Stmt:
        outer, self.ctx = self.ctx, ctx
        try:
            return self._stmt(st, s, ctx)
        finally:
            self.ctx = outer

    def _stmt(self, st: ir.Stmt, s: Scope, ctx: Ctx) -> ir.Stmt:
        if isinstance(st, ir.BlockStmt):
            return self.block(st, Scope(s), ctx)
        if isinstance(st, ir.AssignStmt):
            self.pre_lvalue(st.lhs, s, "assign to")
            lhs = self.expr(st.lhs, s, None)
            self.check_lvalue(lhs, "assign to")
            st.lhs = lhs
            st.rhs = self.convert(self.expr(st.rhs, s, lhs.type), lhs.type, "in assignment")
            return st
        if isinstance(st, ir.CallStmt):
            c = self.expr(st.call, s, None)
            if not isinstance(c, ir.CallExpr):
                return ir.EmptyStmt(loc=st.loc)
            if isinstance(c.type, (T.Block, T.Extern)):
                raise P4Error(start(c), f"{show(c.type)} is instantiated here but never used; "
                              f"declare an instance and call its apply method")
            st.call = c
            return st
        if isinstance(st, ir.IfStmt):
            st.cond = self.condition(st.cond, s, "if")
            st.then = self.stmt(st.then, Scope(s), ctx)
            if st.else_ is not None:
                st.else_ = self.stmt(st.else_, Scope(s), ctx)
            return st
        if isinstance(st, ir.SwitchStmt):
            return self.switch(st, s, ctx)
        if isinstance(st, ir.ExitStmt):
            if ctx.kind in ("function", "parser"):
                raise P4Error(st.loc, f"'exit' is not allowed in a {ctx.kind}")
            return st
        if isinstance(st, ir.ReturnStmt):
            if ctx.kind == "parser":
                raise P4Error(st.loc, "'return' is not allowed in a parser")
            if ctx.kind == "function" and not isinstance(ctx.ret, T.Void):
                if st.value is None:
                    raise P4Error(st.loc, f"function {ctx.name} must return a value of type {ctx.ret}")
                ret = ctx.ret or T.Void()
                st.value = self.convert(self.expr(st.value, s, ret), ret, "in return value")
            elif st.value is not None:
                raise P4Error(st.value.loc, f"cannot return a value from {ctx.kind} {ctx.name} "
                              f"(its return type is void)")
            return st
        if isinstance(st, ir.EmptyStmt):
            return st
        if isinstance(st, (ir.BreakStmt, ir.ContinueStmt)):
            if not ctx.loop:
                word = "break" if isinstance(st, ir.BreakStmt) else "continue"
                raise P4Error(st.loc, f"'{word}' outside of a loop")
            return st
        if isinstance(st, ir.ForStmt):
            fs = Scope(s)
            st.init = [self.stmt(x, fs, ctx) for x in st.init]
            if st.cond is not None:
                st.cond = self.condition(st.cond, fs, "for")
            st.update = [self.stmt(x, fs, ctx) for x in st.update]
            st.body = self.stmt(st.body, Scope(fs), replace(ctx, loop=True))
            return st
        if isinstance(st, ir.ForInStmt):
            return self.for_in(st, s, ctx)
        if isinstance(st, (ir.VarDecl, ir.ConstDecl)):
            self.local_decl(st, s, ctx)
            return st
        if isinstance(st, ir.Decl):
            self.local_decl(st, s, ctx)
            return st
        raise P4Unsupported(st.loc, f"statement {type(st).__name__}")

    def for_in(self, st: ir.ForInStmt, s: Scope, ctx: Ctx) -> ir.Stmt:
        fs = Scope(s)
        vt: T.P4Type | None = None
        if st.type is not None:
            vt = self.resolve(st.type, s)
        else:
            ds = s.lookup(st.var)
            if not ds or not isinstance(ds[0], (ir.VarDecl, ir.Param)):
                raise P4Error(st.loc, f"undeclared variable '{st.var}'")
            st.decl = ds[0]
            self.check_lvalue(ir.PathExpr(loc=st.loc, name=st.var, decl=ds[0]), "assign to")
            vt = ds[0].type.resolved
        c = st.collection
        if isinstance(c, ir.BinaryExpr) and c.op == "..":
            lo = self.expr(c.left, s, vt)
            hi = self.expr(c.right, s, vt)
            et = vt
            if et is None:
                lo, hi, et = self.unify_operands("..", lo, hi, c.loc)
            c.left = self.convert(lo, et, "in loop range")
            c.right = self.convert(hi, et, "in loop range")
            self.runtime_value(c.left)
            c.type = et
        else:
            c = self.expr(c, s, None)
            if isinstance(c.type, T.Stack):
                et = c.type.elem
            elif isinstance(c.type, T.Tuple) and c.type.elems:
                et = c.type.elems[0]
                if vt is not None:
                    c = self.convert(c, T.Tuple(tuple(vt for _ in c.type.elems)), "in loop list")
            else:
                raise P4Error(c.loc, f"cannot iterate over a value of type {c.type}")
            st.collection = c
        if vt is None:
            vt = et
        elif not type_eq(vt, et):
            raise P4Error(st.loc, f"loop variable of type {vt} cannot range over {et}")
        if st.type is not None:
            d = ir.VarDecl(loc=st.loc, name=st.var, type=st.type)
            fs.declare(st.var, d, st.loc)
            st.decl = d
        st.body = self.stmt(st.body, Scope(fs), replace(ctx, loop=True))
        return st

    def condition(self, e: ir.Expr, s: Scope, what: str) -> ir.Expr:
        e = self.expr(e, s, T.Bool())
        if not isinstance(e.type, T.Bool):
            raise P4Error(start(e), f"condition of {what} must be bool, not {e.type}")
        return e

    def switch(self, st: ir.SwitchStmt, s: Scope, ctx: Ctx) -> ir.Stmt:
        defaults = [i for i, c in enumerate(st.cases) if isinstance(c.label, ir.DefaultExpr)]
        if len(defaults) > 1:
            raise P4Error(st.cases[defaults[1]].label.loc, "switch has more than one 'default' label")
        if defaults and defaults[0] != len(st.cases) - 1:
            raise P4Error(st.cases[defaults[0] + 1].label.loc, "switch label follows the 'default' label")
        self.switch_head = True
        try:
            e = self.expr(st.expr, s, None)
        finally:
            self.switch_head = False
        st.expr = e
        if isinstance(e.type, T.ActionEnum):
            table = self.table_of_action_run(e)
            names = {ar.decl.name: ar.decl for ar in table.actions}
            seen: set[int] = set()
            for c in st.cases:
                lab = c.label
                if isinstance(lab, ir.DefaultExpr):
                    lab.type = T.DontCare()
                elif isinstance(lab, ir.PathExpr):
                    dn = lab.name
                    ds = s.lookup(dn)
                    decl = ds[0] if ds else None
                    if not isinstance(decl, ir.ActionDecl) or all(decl is not x for x in names.values()):
                        raise P4Error(lab.loc, f"'{dn}' is not an action of table {table.name}")
                    if id(decl) in seen:
                        raise P4Error(lab.loc, f"duplicate switch label '{dn}'")
                    seen.add(id(decl))
                    lab.decl = decl
                    lab.type = e.type
                else:
                    raise P4Error(lab.loc, "switch label must be an action name of the table")
                if c.body is not None:
                    c.body = self.block(c.body, Scope(s), ctx)
            return st
        if not isinstance(e.type, (T.Bits, T.Enum, T.ErrorType, T.NewType)):
            raise P4Error(e.loc, f"cannot switch on a value of type {e.type}")
        self.runtime_value(e)
        values: set[Any] = set()
        for c in st.cases:
            if isinstance(c.label, ir.DefaultExpr):
                c.label.type = T.DontCare()
            else:
                lab = self.convert(self.expr(c.label, s, e.type), e.type, "in switch label")
                if not self.is_compile_time(lab):
                    raise P4Error(start(lab), "switch label must be a compile-time constant")
                key = lab.value if isinstance(lab, ir.IntLit) else (
                    lab.member if isinstance(lab, ir.MemberExpr) else None)
                if key is not None:
                    if key in values:
                        raise P4Error(start(lab), "duplicate switch label")
                    values.add(key)
                c.label = lab
            if c.body is not None:
                c.body = self.block(c.body, Scope(s), ctx)
        return st

    def table_of_action_run(self, e: ir.Expr) -> ir.TableDecl:
        if isinstance(e, ir.MemberExpr) and isinstance(e.expr, ir.CallExpr):
            f = e.expr.func
            if isinstance(f, ir.MemberExpr) and isinstance(f.expr.type, T.TableType):
                return f.expr.type.decl
        raise P4Error(e.loc, "switch on action_run must be on 'table.apply().action_run'")

    # ---------------------------------------------------------- lvalues

    def check_lvalue(self, e: ir.Expr, what: str) -> None:
        root = e
        while True:
            if isinstance(root, ir.MemberExpr):
                if isinstance(root.expr.type, T.Stack) and root.member not in ("next", "last"):
                    raise P4Error(start(e), f"cannot {what} '{root.member}' of a header stack")
                if isinstance(root.type, (T.Callable, T.ErrorType, T.Enum)) and isinstance(
                        root.expr.type, T.TypeOfType):
                    raise P4Error(start(e), f"cannot {what} a constant")
                root = root.expr
            elif isinstance(root, (ir.IndexExpr, ir.SliceExpr)):
                root = root.expr
            else:
                break
        if isinstance(root, ir.PathExpr):
            d = root.decl
            if isinstance(d, ir.VarDecl):
                return
            if isinstance(d, ir.Param):
                if d.direction in ("out", "inout"):
                    return
                kind = f"'{d.direction}' parameter" if d.direction else "directionless parameter"
                raise P4Error(start(e), f"cannot {what} {kind} '{d.name}'")
            if isinstance(d, ir.ConstDecl):
                raise P4Error(start(e), f"cannot {what} constant '{d.name}'")
            raise P4Error(start(e), f"cannot {what} '{root.name}': not a variable")
        if isinstance(root, (ir.IntLit, ir.BoolLit)) and isinstance(e, ir.Expr):
            raise P4Error(start(e), f"cannot {what} a constant")
        raise P4Error(start(e), f"cannot {what} this expression: it is not an lvalue")

    def pre_lvalue(self, e: ir.Expr, s: Scope, what: str) -> None:
        """Reject writes to constants before folding replaces their name by the value."""
        root = e
        while isinstance(root, (ir.MemberExpr, ir.IndexExpr, ir.SliceExpr)):
            root = root.expr
        if isinstance(root, ir.PathExpr):
            ds = (self.top if root.absolute else s).lookup(root.name)
            if ds and isinstance(ds[0], ir.ConstDecl):
                raise P4Error(start(e), f"cannot {what} constant '{root.name}'")

    def runtime_value(self, e: ir.Expr) -> None:
        if isinstance(e.type, T.InfInt):
            raise P4Error(e.loc, "cannot infer a width for this integer; use a cast or a sized literal")

    # ---------------------------------------------------------- conversions

    def convert(self, e: ir.Expr, t: T.P4Type, what: str) -> ir.Expr:
        """Make ``e`` (already typed) have type ``t``, inserting the implicit
        conversions P4 allows; raise a type mismatch otherwise."""
        s = e.type
        if s is None:
            raise P4Error(e.loc, "internal: untyped expression")
        if isinstance(t, (T.DontCare, TypeVar)):
            return e
        if isinstance(e, ir.DontCareExpr):
            e.type = t
            return e
        if type_eq(s, t):
            return e
        if isinstance(e, ir.ListExpr) and isinstance(t, (T.StructLike, T.Tuple)):
            n = len(t.fields) if isinstance(t, T.StructLike) else len(t.elems)
            if isinstance(t, T.HeaderUnion):
                raise P4Error(e.loc, f"cannot initialize header union {t} from a list")
            if len(e.elems) != n:
                raise P4Error(start(e), f"type mismatch {what}: {n} values expected for {t}, got {len(e.elems)}")
            tys = [f.type for f in t.fields] if isinstance(t, T.StructLike) else list(t.elems)
            e.elems = [self.convert(x, ft, what) for x, ft in zip(e.elems, tys, strict=False)]
            e.type = t
            return e
        if isinstance(e, ir.StructExpr) and isinstance(t, T.StructLike) and e.type_name is None:
            names = [n for n, _ in e.fields]
            want = [f.name for f in t.fields]
            if sorted(names) != sorted(want):
                missing = set(want) - set(names)
                extra = set(names) - set(want)
                detail = (f"missing {', '.join(sorted(missing))}" if missing else "") + \
                    (f"unknown field {', '.join(sorted(extra))}" if extra else "")
                raise P4Error(start(e), f"type mismatch {what}: initializer does not match {t} ({detail})")
            e.fields = [(n, self.convert(x, t.field_type(n) or T.DontCare(), what)) for n, x in e.fields]
            e.type = t
            return e
        if isinstance(s, T.InfInt):
            base = t.base if isinstance(t, T.NewType) else t
            if isinstance(base, T.Bits):
                if isinstance(e, ir.IntLit):
                    lit = CE.int_lit(e.value, base, e.loc)
                    if isinstance(t, T.NewType):
                        return ir.CastExpr(loc=e.loc, to=type_ref(t, e.loc), expr=lit, type=t)
                    return lit
                return ir.CastExpr(loc=e.loc, to=type_ref(t, e.loc), expr=e, type=t)
            if isinstance(base, T.InfInt):
                return e
        if isinstance(s, T.Enum) and s.underlying is not None and type_eq(s.underlying, t):
            return self.make_cast(e, t)
        if isinstance(s, T.Block) and isinstance(t, T.Block) and s.kind == t.kind and \
                isinstance(t.decl, (ir.ParserTypeDecl, ir.ControlTypeDecl)):
            self.block_matches(e, s, t)
            return e
        raise P4Error(start(e), f"type mismatch {what}: expected {show(t)}, got {show(s)}")

    def block_matches(self, e: ir.Expr, s: T.Block, t: T.Block) -> None:
        have = self.sigs[id(s.decl)]
        proto = self.sigs[id(t.decl)]
        m = {tv.id: a for tv, a in zip(proto.tvars, t.type_args, strict=False)}
        if len(have.params) != len(proto.params) or any(
                a.direction != b.direction or not type_eq(a.type, subst(b.type, m))
                for a, b in zip(have.params, proto.params, strict=False)):
            raise P4Error(e.loc, f"{s} does not match the type {t.decl.name}")

    def make_cast(self, e: ir.Expr, t: T.P4Type) -> ir.Expr:
        folded = self.fold_cast(e, t)
        if folded is not None:
            return folded
        return ir.CastExpr(loc=e.loc, to=type_ref(t, e.loc), expr=e, type=t)

    def fold_cast(self, e: ir.Expr, t: T.P4Type) -> ir.Expr | None:
        if isinstance(e, ir.IntLit):
            if isinstance(t, T.Bits):
                return CE.int_lit(e.value, t, e.loc)
            if isinstance(t, T.Bool):
                if e.value not in (0, 1):
                    raise P4Error(e.loc, f"cannot cast {e.value} to bool")
                return CE.bool_lit(bool(e.value), e.loc)
            if isinstance(t, T.InfInt):
                return CE.int_lit(e.value, t, e.loc)
        if isinstance(e, ir.BoolLit) and isinstance(t, T.Bits):
            return CE.int_lit(int(e.value), t, e.loc)
        if isinstance(e, ir.MemberExpr) and isinstance(e.type, T.Enum) and e.type.underlying is not None \
                and isinstance(t, T.Bits) and isinstance(e.expr.type, T.TypeOfType):
            v = e.type.values[e.type.members.index(e.member)]
            return CE.int_lit(v, t, e.loc)
        return None

    def cast_ok(self, s: T.P4Type, t: T.P4Type) -> bool:
        if type_eq(s, t):
            return True
        sb = s.base if isinstance(s, T.NewType) else s
        tb = t.base if isinstance(t, T.NewType) else t
        if isinstance(s, T.NewType) or isinstance(t, T.NewType):
            # a new type converts only to and from its own base type
            if isinstance(t, T.NewType) and (type_eq(s, tb) or isinstance(s, T.InfInt)):
                return True
            return (isinstance(s, T.NewType) and type_eq(sb, t)) or type_eq(sb, tb)
        if isinstance(s, T.Enum):
            return s.underlying is not None and (isinstance(tb, T.Bits) or type_eq(s.underlying, tb))
        if isinstance(t, T.Enum):
            return t.underlying is not None and isinstance(sb, (T.Bits, T.InfInt))
        if isinstance(tb, T.Bits):
            if isinstance(sb, T.Bits):
                # change the width or the signedness, not both at once
                return sb.signed == tb.signed or sb.width == tb.width
            if isinstance(sb, T.InfInt):
                return True
            if isinstance(sb, T.Bool):
                return tb.width == 1 and not tb.signed
            return False
        if isinstance(tb, T.Bool):
            return (isinstance(sb, T.Bits) and sb.width == 1 and not sb.signed) or isinstance(sb, T.InfInt)
        if isinstance(tb, T.InfInt):
            return isinstance(sb, T.InfInt)
        return False

    # ---------------------------------------------------------- expressions

    def expr(self, e: ir.Expr, s: Scope, expected: T.P4Type | None) -> ir.Expr:
        m = getattr(self, "e_" + type(e).__name__, None)
        if m is None:
            raise P4Unsupported(e.loc, f"expression {type(e).__name__}")
        r = m(e, s, expected)
        assert r.type is not None, e
        return r

    def e_IntLit(self, e: ir.IntLit, s: Scope, exp: Any) -> ir.Expr:
        if e.width is None:
            e.type = T.InfInt()
            return e
        if e.width <= 0 and not (e.width == 0 and not e.signed) or e.width > MAX_WIDTH:
            raise P4Error(e.loc, f"invalid width {e.width} for an integer literal")
        limit = 1 << e.width
        if e.signed:
            ok = -(limit >> 1) <= e.value < (limit >> 1)
        else:
            ok = 0 <= e.value < limit
        if not ok:
            kind = "int" if e.signed else "bit"
            raise P4Error(e.loc, f"integer literal {e.value} does not fit in {kind}<{e.width}>")
        e.value = CE.wrap(e.value, e.width, e.signed)
        e.type = T.Bits(e.width, e.signed)
        return e

    def e_BoolLit(self, e: ir.BoolLit, s: Scope, exp: Any) -> ir.Expr:
        e.type = T.Bool()
        return e

    def e_StringLit(self, e: ir.StringLit, s: Scope, exp: Any) -> ir.Expr:
        e.type = T.String()
        return e

    def e_DefaultExpr(self, e: ir.DefaultExpr, s: Scope, exp: Any) -> ir.Expr:
        e.type = T.DontCare()
        return e

    def e_DontCareExpr(self, e: ir.DontCareExpr, s: Scope, exp: Any) -> ir.Expr:
        e.type = exp if exp is not None else T.DontCare()
        return e

    def e_PathExpr(self, e: ir.PathExpr, s: Scope, exp: Any) -> ir.Expr:
        if e.name == "error" and not e.absolute:
            e.decl = self.error_decl
            e.type = T.TypeOfType(self.error_type)
            return e
        ds = (self.top if e.absolute else s).lookup(e.name)
        if not ds:
            raise P4Error(e.loc, f"undeclared name '{e.name}'")
        vals = [d for d in ds if not is_type_decl(d)]
        d = (vals or ds)[0]
        e.decl = d
        if isinstance(d, ir.ConstDecl):
            v = d.value
            if isinstance(v, ir.IntLit):
                return ir.IntLit(loc=e.loc, value=v.value, width=v.width, signed=v.signed, base=v.base, type=v.type)
            if isinstance(v, ir.BoolLit):
                return CE.bool_lit(v.value, e.loc)
            if isinstance(v, ir.StringLit):
                return ir.StringLit(loc=e.loc, value=v.value, type=v.type)
            if isinstance(v, ir.MemberExpr) and isinstance(v.type, (T.ErrorType, T.Enum)):
                base = ir.PathExpr(loc=e.loc, name=v.expr.name, absolute=True, decl=v.expr.decl,
                                   type=v.expr.type) if isinstance(v.expr, ir.PathExpr) else v.expr
                return ir.MemberExpr(loc=e.loc, expr=base, member=v.member, type=v.type)
            e.type = d.type.resolved
            return e
        if isinstance(d, ir.Param):
            e.type = d.type.resolved
        elif isinstance(d, ir.VarDecl):
            e.type = d.type.resolved
        elif isinstance(d, (ir.ActionDecl, ir.FunctionDecl, ir.ExternFunctionDecl)):
            sig = self.sigs[id(d)]
            e.type = self.callable_type(sig, {})
        elif isinstance(d, (ir.TableDecl, ir.InstantiationDecl, ir.ValueSetDecl)):
            e.type = self.decl_types[id(d)]
        elif isinstance(d, TypeVar):
            e.type = T.TypeOfType(d)
        elif isinstance(d, (ir.ParserDecl, ir.ControlDecl, ir.ParserTypeDecl, ir.ControlTypeDecl, ir.PackageTypeDecl)):
            e.type = T.TypeOfType(self.named_type(d.name, False, s, e.loc, []) if not isinstance(
                d, (ir.ParserDecl, ir.ControlDecl)) else T.Block(
                "parser" if isinstance(d, ir.ParserDecl) else "control", d.name, d))
        elif isinstance(d, ir.ExternDecl):
            e.type = T.TypeOfType(T.Extern(d.name, [], d))
        elif isinstance(d, TYPE_DECLS):
            e.type = T.TypeOfType(self.decl_types[id(d)])
        else:
            raise P4Error(e.loc, f"'{e.name}' cannot be used in an expression")
        return e

    def callable_type(self, sig: Sig, m: dict[int, T.P4Type]) -> T.Callable:
        return T.Callable(sig.kind, [(p.direction, subst(p.type, m), p.name) for p in sig.params],
                          subst(sig.ret, m), sig.decl)

    def e_MemberExpr(self, e: ir.MemberExpr, s: Scope, exp: Any) -> ir.Expr:
        base = self.expr(e.expr, s, None)
        e.expr = base
        bt = base.type
        name = e.member
        if isinstance(bt, T.TypeOfType):
            of = bt.of
            if isinstance(of, T.ErrorType):
                if name not in self.errors:
                    raise P4Error(e.loc, f"unknown error member 'error.{name}'")
                e.type = self.error_type
                return e
            if isinstance(of, T.Enum):
                if name not in of.members:
                    raise P4Error(e.loc, f"enum {of.name} has no member '{name}'")
                e.type = of
                return e
            if name in SIZE_METHODS:
                e.type = T.Callable("method", [], T.InfInt(), None)
                return e
            if name == "apply" and isinstance(of, T.Block) and isinstance(of.decl, (ir.ControlDecl, ir.ParserDecl)):
                e.type = self.callable_type(self.sigs[id(of.decl)], {})
                return e
            raise P4Error(e.loc, f"type {of} has no member '{name}'")
        if name in SIZE_METHODS and not isinstance(bt, (T.Extern,)):
            e.type = T.Callable("method", [], T.InfInt(), None)
            return e
        if isinstance(bt, T.StructLike):
            ft = bt.field_type(name)
            if ft is not None:
                e.type = ft
                return e
            if header_like(bt):
                if name == "isValid":
                    e.type = T.Callable("method", [], T.Bool(), None)
                    return e
                if name in ("setValid", "setInvalid") and isinstance(bt, T.Header):
                    e.type = T.Callable("method", [], T.Void(), None)
                    return e
            kind = "header" if isinstance(bt, T.Header) else (
                "header union" if isinstance(bt, T.HeaderUnion) else "struct")
            raise P4Error(e.loc, f"{kind} {bt.name} has no field '{name}'")
        if isinstance(bt, T.Stack):
            if name in ("next", "last", "lastIndex") and self.ctx.kind != "parser":
                raise P4Error(e.loc, f"'{name}' of a header stack can only be used in a parser")
            if name in ("next", "last"):
                e.type = bt.elem
                return e
            if name in ("lastIndex", "nextIndex"):
                e.type = T.Bits(32)
                return e
            if name == "size":
                return CE.int_lit(bt.size, T.Bits(32), e.loc)
            if name in ("push_front", "pop_front"):
                e.type = T.Callable("method", [("in", T.InfInt(), "count")], T.Void(), None)
                return e
            raise P4Error(e.loc, f"header stack has no member '{name}'")
        if isinstance(bt, T.Extern):
            sigs = self.methods.get(id(bt.decl), {}).get(name)
            if not sigs:
                raise P4Error(e.loc, f"extern {bt} has no method '{name}'")
            e.type = self.callable_type(sigs[0], self.extern_bindings(bt))
            return e
        if isinstance(bt, T.TableType):
            if name != "apply":
                raise P4Error(e.loc, f"table {bt.decl.name} has no member '{name}'")
            if self.ctx.kind in ("action", "function", "parser"):
                raise P4Error(e.loc, f"table {bt.decl.name} can only be applied in a control's apply block, "
                              f"not in {self.ctx.kind} {self.ctx.name}")
            e.type = T.Callable("apply", [], T.ApplyResult(bt.decl.name), bt.decl)
            return e
        if isinstance(bt, T.Block):
            if name != "apply" or bt.kind == "package":
                raise P4Error(e.loc, f"{bt} has no member '{name}'")
            sig = self.sigs[id(bt.decl)]
            e.type = self.callable_type(sig, {tv.id: a for tv, a in zip(sig.tvars, bt.type_args, strict=False)})
            return e
        if isinstance(bt, T.ApplyResult):
            if name in ("hit", "miss"):
                e.type = T.Bool()
                return e
            if name == "action_run":
                if not self.switch_head:
                    raise P4Error(e.loc, "'action_run' can only be used as the expression of a switch statement")
                e.type = T.ActionEnum(bt.table)
                return e
            raise P4Error(e.loc, f"table apply result has no member '{name}' (use hit, miss or action_run)")
        raise P4Error(e.loc, f"value of type {show(bt)} has no member '{name}'")

    def extern_bindings(self, t: T.Extern) -> dict[int, T.P4Type]:
        et = self.decl_types.get(id(t.decl))
        if not isinstance(et, T.Extern):
            return {}
        return {tv.id: a for tv, a in zip(et.type_args, t.type_args, strict=False) if isinstance(tv, TypeVar)}

    def e_IndexExpr(self, e: ir.IndexExpr, s: Scope, exp: Any) -> ir.Expr:
        base = self.expr(e.expr, s, None)
        e.expr = base
        idx = self.expr(e.index, s, None)
        if isinstance(base.type, T.Stack):
            if isinstance(idx, ir.IntLit):
                if not 0 <= idx.value < base.type.size:
                    raise P4Error(idx.loc, f"index {idx.value} out of bounds for stack of size {base.type.size}")
                idx = CE.int_lit(idx.value, T.Bits(32), idx.loc)
            elif isinstance(idx.type, T.InfInt):
                idx = self.convert(idx, T.Bits(32), "in index")
            elif isinstance(idx.type, T.Enum) and idx.type.underlying is not None:
                idx = self.make_cast(idx, idx.type.underlying)
            elif not isinstance(idx.type, T.Bits) and not (
                    isinstance(idx.type, T.NewType) and isinstance(idx.type.base, T.Bits)):
                raise P4Error(idx.loc, f"stack index must be an integer, not {idx.type}")
            e.index = idx
            e.type = base.type.elem
            return e
        if isinstance(base.type, T.Tuple):
            if not isinstance(idx, ir.IntLit):
                raise P4Error(idx.loc, "tuple index must be a compile-time constant")
            if not 0 <= idx.value < len(base.type.elems):
                raise P4Error(idx.loc, f"index {idx.value} out of bounds for {base.type}")
            e.index = CE.int_lit(idx.value, T.Bits(32), idx.loc)
            e.type = base.type.elems[idx.value]
            return e
        raise P4Error(e.loc, f"cannot index a value of type {base.type}")

    def e_SliceExpr(self, e: ir.SliceExpr, s: Scope, exp: Any) -> ir.Expr:
        base = self.expr(e.expr, s, None)
        e.expr = base
        bt = base.type
        bounds = [self.expr(e.hi, s, None), self.expr(e.lo, s, None)]
        for b in bounds:
            if not isinstance(b, ir.IntLit):
                raise P4Error(start(b), "slice bounds must be compile-time constants")
        hi, lo = (b for b in bounds if isinstance(b, ir.IntLit))
        e.hi = CE.int_lit(hi.value, T.InfInt(), hi.loc)
        e.lo = CE.int_lit(lo.value, T.InfInt(), lo.loc)
        if isinstance(bt, T.InfInt) and isinstance(base, ir.IntLit):
            if not 0 <= lo.value <= hi.value:
                raise P4Error(e.loc, f"slice [{hi.value}:{lo.value}] is out of range")
            w = hi.value - lo.value + 1
            return CE.int_lit(base.value >> lo.value, T.Bits(w), e.loc)
        if not isinstance(bt, T.Bits):
            raise P4Error(e.loc, f"cannot slice a value of type {bt}")
        if not 0 <= lo.value <= hi.value < bt.width:
            raise P4Error(e.loc, f"slice [{hi.value}:{lo.value}] is out of range for {bt}")
        w = hi.value - lo.value + 1
        e.type = T.Bits(w)
        if isinstance(base, ir.IntLit):
            return CE.int_lit((base.value & ((1 << bt.width) - 1)) >> lo.value, e.type, e.loc)
        return e

    def e_UnaryExpr(self, e: ir.UnaryExpr, s: Scope, exp: Any) -> ir.Expr:
        x = self.expr(e.expr, s, exp if e.op in ("-", "+", "~") else T.Bool())
        e.expr = x
        t = x.type
        if e.op == "!":
            if not isinstance(t, T.Bool):
                raise P4Error(e.loc, f"operator '!' needs a bool operand, not {t}")
        elif e.op == "~":
            if isinstance(t, T.InfInt) and isinstance(exp, T.Bits):
                x = self.convert(x, exp, "in operand of '~'")
                e.expr = x
                t = x.type
            if not isinstance(t, T.Bits):
                raise P4Error(e.loc, f"operator '~' needs a bit<W> or int<W> operand, not {t}")
        elif e.op in ("-", "+"):
            if not isinstance(t, (T.Bits, T.InfInt)):
                raise P4Error(e.loc, f"operator '{e.op}' needs an integer operand, not {t}")
        else:
            raise P4Unsupported(e.loc, f"unary operator {e.op}")
        e.type = t
        f = CE.fold_unary(e.op, x, t, e.loc)
        return f if f is not None else e

    ARITH = ("+", "-", "*", "/", "%", "&", "|", "^", "|+|", "|-|")
    CMP = ("==", "!=", "<", "<=", ">", ">=")

    def e_BinaryExpr(self, e: ir.BinaryExpr, s: Scope, exp: Any) -> ir.Expr:
        op = e.op
        if op in ("&&&", ".."):
            raise P4Error(e.loc, f"operator '{op}' is only allowed in keysets and table entries")
        if op in ("&&", "||"):
            e.left = self.condition_operand(e.left, s, op)
            if isinstance(e.left, ir.BoolLit) and (e.left.value == (op == "||")):
                # short-circuit: the right side is still checked
                self.condition_operand(e.right, s, op)
                return CE.bool_lit(e.left.value, e.loc)
            e.right = self.condition_operand(e.right, s, op)
            e.type = T.Bool()
            f = CE.fold_binary(op, e.left, e.right, e.type, e.loc)
            return f or e
        hint = exp if op in self.ARITH else None
        lhs = self.expr(e.left, s, hint)
        r = self.expr(e.right, s, hint if op in self.ARITH else None)
        if op in ("<<", ">>"):
            return self.shift(e, lhs, r)
        if op == "++":
            lt, rt = lhs.type, r.type
            lt = lt.underlying if isinstance(lt, T.Enum) and lt.underlying else lt
            rt = rt.underlying if isinstance(rt, T.Enum) and rt.underlying else rt
            if isinstance(lhs.type, T.Enum):
                lhs = self.make_cast(lhs, lt)
            if isinstance(r.type, T.Enum):
                r = self.make_cast(r, rt)
            if isinstance(lt, T.Bool):
                lhs, lt = self.make_cast(lhs, T.Bits(1)), T.Bits(1)
            if isinstance(rt, T.Bool):
                r, rt = self.make_cast(r, T.Bits(1)), T.Bits(1)
            if not isinstance(lt, T.Bits) or not isinstance(rt, T.Bits):
                raise P4Error(e.loc, f"operator '++' needs bit<W> or int<W> operands of known width, "
                              f"not {lt} and {rt}")
            e.left, e.right = lhs, r
            e.type = T.Bits(lt.width + rt.width, lt.signed)
            return CE.fold_binary(op, lhs, r, e.type, e.loc) or e
        lhs, r, t = self.unify_operands(op, lhs, r, e.loc)
        e.left, e.right = lhs, r
        if op in self.CMP:
            if op not in ("==", "!=") and not isinstance(t, (T.Bits, T.InfInt)):
                raise P4Error(e.loc, f"operator '{op}' needs integer operands, not {t}")
            if op in ("==", "!=") and isinstance(t, (T.Extern, T.TableType, T.Block, T.String, T.Void,
                                                     T.Callable, T.TypeOfType, T.ApplyResult, T.ActionEnum)):
                raise P4Error(e.loc, f"values of type {t} cannot be compared")
            e.type = T.Bool()
            return CE.fold_binary(op, lhs, r, e.type, e.loc) or e
        if op in self.ARITH:
            if not isinstance(t, (T.Bits, T.InfInt)):
                raise P4Error(e.loc, f"operator '{op}' needs integer operands, not {t}")
            if op in ("|+|", "|-|") and not isinstance(t, T.Bits):
                raise P4Error(e.loc, f"saturating operator '{op}' needs bit<W> or int<W> operands")
            if op in ("/", "%") and isinstance(t, T.Bits) and t.signed:
                raise P4Error(e.loc, f"operator '{op}' is not allowed on signed values ({t})")
            if op in ("/", "%") and isinstance(r, ir.IntLit) and r.value == 0:
                raise P4Error(e.loc, "division by zero")
            e.type = t
            return CE.fold_binary(op, lhs, r, t, e.loc) or e
        raise P4Unsupported(e.loc, f"binary operator {op}")

    def condition_operand(self, x: ir.Expr, s: Scope, op: str) -> ir.Expr:
        x = self.expr(x, s, T.Bool())
        if not isinstance(x.type, T.Bool):
            raise P4Error(x.loc, f"operand of '{op}' must be bool, not {x.type}")
        return x

    def shift(self, e: ir.BinaryExpr, lhs: ir.Expr, r: ir.Expr) -> ir.Expr:
        lt, rt = lhs.type, r.type
        if not isinstance(lt, (T.Bits, T.InfInt)):
            raise P4Error(e.left.loc, f"left operand of '{e.op}' must be an integer, not {lt}")
        if isinstance(r, ir.IntLit) and r.value < 0:
            raise P4Error(r.loc, f"shift by a negative amount ({r.value})")
        if isinstance(rt, T.Bits):
            if rt.signed:
                raise P4Error(r.loc, f"shift amount must be unsigned, not {rt}")
        elif isinstance(rt, T.InfInt):
            if not isinstance(r, ir.IntLit):
                raise P4Error(r.loc, "shift amount of type int must be a compile-time constant")
        else:
            raise P4Error(r.loc, f"shift amount must be an unsigned integer, not {rt}")
        if isinstance(lt, T.InfInt) and not isinstance(r, ir.IntLit):
            raise P4Error(e.loc, "shifting an int constant by a run-time amount needs a width; cast the left operand")
        e.type = lt
        folded = CE.fold_binary(e.op, lhs, r, lt, e.loc)
        if folded is not None:
            return folded
        if isinstance(rt, T.InfInt) and isinstance(r, ir.IntLit):
            r = CE.int_lit(r.value, T.Bits(max(r.value.bit_length(), 1)), r.loc)
        e.left, e.right = lhs, r
        return e

    def unify_operands(self, op: str, lhs: ir.Expr, r: ir.Expr, loc: Location) -> tuple[ir.Expr, ir.Expr, T.P4Type]:
        lt, rt = lhs.type, r.type
        if type_eq(lt, rt):
            return lhs, r, lt
        if isinstance(rt, T.Enum) and rt.underlying is not None and isinstance(lt, T.InfInt):
            u = rt.underlying
            return self.convert(lhs, u, f"in operand of '{op}'"), self.make_cast(r, u), u
        if isinstance(lt, T.Enum) and lt.underlying is not None and isinstance(rt, T.InfInt):
            u = lt.underlying
            return self.make_cast(lhs, u), self.convert(r, u, f"in operand of '{op}'"), u
        if isinstance(lt, T.InfInt) and not isinstance(rt, T.InfInt):
            return self.convert_operand(op, lhs, rt, lt, rt, loc), r, rt
        if isinstance(rt, T.InfInt):
            return lhs, self.convert_operand(op, r, lt, lt, rt, loc), lt
        if isinstance(r, (ir.ListExpr, ir.StructExpr)):
            return lhs, self.convert(r, lt, f"in operand of '{op}'"), lt
        if isinstance(lhs, (ir.ListExpr, ir.StructExpr)):
            return self.convert(lhs, rt, f"in operand of '{op}'"), r, rt
        if isinstance(lt, T.Enum) and lt.underlying is not None and type_eq(lt.underlying, rt):
            return self.make_cast(lhs, rt), r, rt
        if isinstance(rt, T.Enum) and rt.underlying is not None and type_eq(rt.underlying, lt):
            return lhs, self.make_cast(r, lt), lt
        if isinstance(lt, T.Bits) and isinstance(rt, T.Bits):
            if lt.signed == rt.signed:
                raise P4Error(loc, f"operands of '{op}' have mismatched widths: {lt} {op} {rt}; cast one of them")
            raise P4Error(loc, f"operands of '{op}' have mismatched signedness: {lt} {op} {rt}; cast one of them")
        raise P4Error(loc, f"operands of '{op}' have mismatched types: {show(lt)} and {show(rt)}")

    def convert_operand(self, op: str, x: ir.Expr, t: T.P4Type, lt: T.P4Type, rt: T.P4Type,
                        loc: Location) -> ir.Expr:
        """Convert the ``int`` operand ``x`` to the other operand's type ``t``."""
        if not isinstance(t, (T.Bits, T.NewType)):
            raise P4Error(loc, f"operands of '{op}' have mismatched types: {show(lt)} and {show(rt)}")
        return self.convert(x, t, f"in operand of '{op}'")

    def e_TernaryExpr(self, e: ir.TernaryExpr, s: Scope, exp: Any) -> ir.Expr:
        e.cond = self.condition(e.cond, s, "'?:'")
        a = self.expr(e.then, s, exp)
        b = self.expr(e.else_, s, exp)
        if isinstance(a.type, T.InfInt) and isinstance(b.type, T.InfInt):
            if isinstance(e.cond, ir.BoolLit):
                return a if e.cond.value else b
            if isinstance(exp, T.Bits):
                a, b = self.convert(a, exp, "in '?:'"), self.convert(b, exp, "in '?:'")
            else:
                raise P4Error(e.loc, "'?:' with int operands needs a width; cast one branch")
        elif not type_eq(a.type, b.type):
            a, b, _ = self.unify_operands("?:", a, b, e.loc)
        e.then, e.else_ = a, b
        e.type = a.type
        if isinstance(e.cond, ir.BoolLit):
            return a if e.cond.value else b
        return e

    def e_CastExpr(self, e: ir.CastExpr, s: Scope, exp: Any) -> ir.Expr:
        t = self.resolve(e.to, s) if e.to.resolved is None else e.to.resolved
        x = self.expr(e.expr, s, t)
        if isinstance(x, (ir.ListExpr, ir.StructExpr)) and isinstance(t, (T.StructLike, T.Tuple)):
            return self.convert(x, t, "in cast")
        if not self.cast_ok(x.type, t):
            raise P4Error(e.loc, f"invalid cast from {x.type} to {t}")
        if isinstance(x.type, T.InfInt) and isinstance(t, T.Enum) and isinstance(x, ir.IntLit) and t.underlying:
            x = CE.int_lit(x.value, t.underlying, x.loc)
        if isinstance(x.type, T.InfInt) and isinstance(t, T.NewType) and isinstance(x, ir.IntLit):
            base: T.P4Type = t
            while isinstance(base, T.NewType):
                base = base.base
            if isinstance(base, T.Bits):
                x = CE.int_lit(x.value, base, x.loc)
        e.expr = x
        e.type = t
        folded = self.fold_cast(x, t)
        if folded is not None:
            return folded
        if type_eq(x.type, t):
            return x
        return e

    def e_ListExpr(self, e: ir.ListExpr, s: Scope, exp: Any) -> ir.Expr:
        hints: list[Any] = [None] * len(e.elems)
        if isinstance(exp, T.StructLike) and len(exp.fields) == len(e.elems):
            hints = [f.type for f in exp.fields]
        elif isinstance(exp, T.Tuple) and len(exp.elems) == len(e.elems):
            hints = list(exp.elems)
        e.elems = [self.expr(x, s, h) for x, h in zip(e.elems, hints, strict=False)]
        e.type = T.Tuple(tuple(x.type for x in e.elems))
        if exp is not None and isinstance(exp, (T.StructLike, T.Tuple)):
            return self.convert(e, exp, "in initializer")
        return e

    def e_StructExpr(self, e: ir.StructExpr, s: Scope, exp: Any) -> ir.Expr:
        target = exp
        if e.type_name is not None:
            target = self.resolve(e.type_name, s)
            if not isinstance(target, T.StructLike):
                raise P4Error(e.loc, f"{target} is not a struct or header type")
        seen = set()
        fields = []
        for n, x in e.fields:
            if n in seen:
                raise P4Error(x.loc, f"field '{n}' initialized twice")
            seen.add(n)
            h = target.field_type(n) if isinstance(target, T.StructLike) else None
            fields.append((n, self.expr(x, s, h)))
        e.fields = fields
        if isinstance(target, T.StructLike):
            tn, e.type_name = e.type_name, None
            e.type = T.Struct("<anonymous>", [T.Field(n, x.type) for n, x in fields])
            r = self.convert(e, target, "in initializer")
            e.type_name = tn
            return r
        e.type = T.Struct("<anonymous>", [T.Field(n, x.type) for n, x in fields])
        return e

    # ---------------------------------------------------------------- calls

    def e_CallExpr(self, e: ir.CallExpr, s: Scope, exp: Any) -> ir.Expr:
        f = e.func
        explicit = [self.resolve(t, s) for t in e.type_args]
        for tr, t in zip(e.type_args, explicit, strict=True):
            if isinstance(t, (T.Void, T.String, T.InfInt)):
                raise P4Error(tr.loc, f"{t} cannot be used as a type argument")
        if isinstance(f, ir.MemberExpr):
            fm = self.expr(f, s, None)
            if not isinstance(fm, ir.MemberExpr):
                raise P4Error(f.loc, "this expression is not callable")
            e.func = fm
            bt = fm.expr.type
            name = fm.member
            if name in SIZE_METHODS and not isinstance(bt, T.Extern):
                if e.args:
                    raise P4Error(e.loc, f"{name}() takes no arguments")
                of = bt.of if isinstance(bt, T.TypeOfType) else bt
                bits = size_in_bits(of, e.loc, name.startswith("max"))
                v = (bits + 7) // 8 if name.endswith("Bytes") else bits
                return CE.int_lit(v, T.InfInt(), e.loc)
            if isinstance(bt, T.Extern):
                sigs = self.methods[id(bt.decl)][name]
                outer = self.extern_bindings(bt)
                sig, args, m = self.match_call(sigs, e.args, s, f"method {bt.name}.{name}", e.loc,
                                               explicit=explicit, outer=outer)
                e.args = args
                if bt.name in ("packet_in", "packet_out") and name in ("extract", "emit") and args:
                    self.check_packet_arg(name, args[0].value, len(args))
                fm.type = self.callable_type(sig, {**outer, **m})
                e.type = fm.type.ret
                own = [m[tv.id] for tv in sig.tvars]
                e.type_args = [type_ref(t, e.loc) for t in list(bt.type_args) + own]
                return e
            ct = fm.type
            if not isinstance(ct, T.Callable):
                raise P4Error(e.loc, f"'{name}' is not a method and cannot be called")
            if ct.kind == "apply" and isinstance(ct.decl, (ir.ParserDecl, ir.ControlDecl, ir.ParserTypeDecl,
                                                           ir.ControlTypeDecl)):
                if self.ctx.kind in ("action", "function"):
                    raise P4Error(e.loc, f"{ct.decl.name}.apply cannot be called from a{'n' * (self.ctx.kind == 'action')} "
                                  f"{self.ctx.kind}")
                sig = self.sigs[id(ct.decl)]
                bt2 = bt.of if isinstance(bt, T.TypeOfType) else bt
                outer = {tv.id: a for tv, a in zip(sig.tvars, getattr(bt2, "type_args", []), strict=False)}
                _, e.args, _ = self.match_call([sig], e.args, s, f"{ct.decl.name}.apply", e.loc, outer=outer)
                e.type = T.Void()
                return e
            # built-in methods (headers, stacks, tables)
            sig = Sig([SigParam(d, n, t) for d, t, n in ct.params], ct.ret, [], ct.decl, "method")
            _, e.args, _ = self.match_call([sig], e.args, s, f"method {name}", e.loc)
            if name in ("push_front", "pop_front"):
                a = e.args[0].value
                if not isinstance(a, ir.IntLit) or a.value < 0:
                    raise P4Error(a.loc, f"argument of {name} must be a non-negative constant")
            e.type = ct.ret
            return e
        if isinstance(f, ir.PathExpr):
            if f.name in ("sizeInBits", "sizeInBytes") and not s.lookup(f.name):
                return self.size_function(e, s)
            ds = (self.top if f.absolute else s).lookup(f.name)
            if not ds:
                raise P4Error(f.loc, f"undeclared name '{f.name}'")
            d = ds[0]
            if isinstance(d, (ir.ActionDecl, ir.FunctionDecl, ir.ExternFunctionDecl)):
                sigs = [self.sigs[id(x)] for x in ds if id(x) in self.sigs]
                kind = "action" if isinstance(d, ir.ActionDecl) else "function"
                if isinstance(d, ir.ActionDecl) and self.ctx.kind in ("function", "parser"):
                    raise P4Error(e.loc, f"action {d.name} cannot be called from a {self.ctx.kind}")
                if isinstance(d, ir.ExternFunctionDecl) and d.name == "verify" and \
                        self.ctx.kind in ("control", "action", "function"):
                    raise P4Error(e.loc, "verify can only be called in a parser")
                sig, args, m = self.match_call(sigs, e.args, s, f"{kind} {d.name}", e.loc, explicit=explicit)
                if isinstance(d, ir.ExternFunctionDecl) and d.name == "static_assert":
                    return self.static_assert(e, args)
                f.decl = sig.decl
                f.type = self.callable_type(sig, m)
                e.args = args
                e.type = f.type.ret
                e.type_args = [type_ref(m[tv.id], e.loc) for tv in sig.tvars]
                return e
            if isinstance(d, ir.ExternDecl):
                # constructor call in an expression (e.g. table implementation)
                t = T.Extern(d.name, list(explicit), d)
                sig, args, m = self.match_call(self.ctors.get(id(d), []), e.args, s, f"constructor of {d.name}",
                                               e.loc, explicit_outer=explicit)
                if not explicit and isinstance(sig.ret, T.Extern) and sig.ret.type_args:
                    t = T.Extern(d.name, [subst(a, m) for a in sig.ret.type_args], d)
                f.decl = d
                f.type = T.TypeOfType(t)
                e.args = args
                self.fold_ctor_args(args)
                e.type = t
                return e
            if isinstance(d, (ir.ParserDecl, ir.ControlDecl)):
                _, args, _ = self.match_call(self.ctors[id(d)], e.args, s, f"constructor of {d.name}", e.loc)
                f.decl = d
                kind = "parser" if isinstance(d, ir.ParserDecl) else "control"
                f.type = T.TypeOfType(T.Block(kind, d.name, d))
                e.args = args
                self.fold_ctor_args(args)
                e.type = T.Block(kind, d.name, d)
                return e
            self.expr(f, s, None)
            raise P4Error(e.loc, f"'{f.name}' is not callable")
        fx = self.expr(f, s, None)
        raise P4Error(e.loc, f"expression of type {show(fx.type)} is not callable")

    def check_packet_arg(self, method: str, v: ir.Expr, nargs: int) -> None:
        t = v.type
        ok = isinstance(t, T.Header) if method == "extract" else \
            isinstance(t, (T.Header, T.HeaderUnion, T.Stack, T.Struct))
        if not ok:
            want = "a header" if method == "extract" else "a header, header stack, header union or struct"
            raise P4Error(start(v), f"argument of {method} must be {want}, not {show(t)}")
        if method == "extract" and isinstance(t, T.Header):
            has_varbit = any(isinstance(f.type, T.Varbit) for f in t.fields)
            if nargs == 1 and has_varbit:
                raise P4Error(start(v), f"header {t} has a varbit field: extract it with a length argument")
            if nargs == 2 and not has_varbit:
                raise P4Error(start(v), f"extract with a length needs a header with a varbit field, not {t}")

    def static_assert(self, e: ir.CallExpr, args: list[ir.Argument]) -> ir.Expr:
        cond = args[0].value
        if not isinstance(cond, ir.BoolLit):
            raise P4Error(cond.loc, "static_assert needs a compile-time condition")
        if not cond.value:
            msg = args[1].value.value if len(args) > 1 and isinstance(args[1].value, ir.StringLit) \
                else "static assertion failed"
            raise P4Error(e.loc, msg)
        return CE.bool_lit(True, e.loc)

    def size_function(self, e: ir.CallExpr, s: Scope) -> ir.Expr:
        f = e.func
        assert isinstance(f, ir.PathExpr)
        if len(e.args) != 1 and not e.type_args:
            raise P4Error(e.loc, f"{f.name} takes one argument")
        if e.type_args:
            t = self.resolve(e.type_args[0], s)
        else:
            a = self.expr(e.args[0].value, s, None)
            t = a.type.of if isinstance(a.type, T.TypeOfType) else a.type
        bits = size_in_bits(t, e.loc, True)
        return CE.int_lit((bits + 7) // 8 if f.name.endswith("Bytes") else bits, T.InfInt(), e.loc)

    def match_call(self, sigs: list[Sig], args: list[ir.Argument], s: Scope, what: str, loc: Location,
                   explicit: list[T.P4Type] | None = None, outer: dict[int, T.P4Type] | None = None,
                   explicit_outer: list[T.P4Type] | None = None
                   ) -> tuple[Sig, list[ir.Argument], dict[int, T.P4Type]]:
        """Choose the overload matching ``args`` and check the call."""
        n = len(args)
        named = {a.name for a in args if a.name is not None}

        positional = sum(1 for a in args if a.name is None)

        def fits_arity(sig: Sig) -> bool:
            if n > len(sig.params):
                return False
            pnames = [p.name for p in sig.params]
            if not named <= set(pnames):
                return False
            filled = set(pnames[:positional]) | named
            return all(p.name in filled or p.default is not None or p.optional for p in sig.params)

        cands = [g for g in sigs if fits_arity(g)]
        if explicit:
            cands = [g for g in cands if len(g.tvars) == len(explicit)] or cands
        if not cands and len(sigs) == 1:
            return self.check_args(sigs[0], args, s, what, loc, explicit, outer, explicit_outer)
        if not cands:
            if not sigs:
                raise P4Error(loc, f"{what} cannot be called")
            counts = sorted({len(g.params) for g in sigs})
            exp_s = " or ".join(str(c) for c in counts)
            bad = [x for x in named if all(x not in {p.name for p in g.params} for g in sigs)]
            if bad:
                raise P4Error(loc, f"{what} has no parameter named '{bad[0]}'")
            raise P4Error(loc, f"wrong number of arguments to {what}: expected {exp_s}, got {n}")
        if len(cands) == 1:
            return self.check_args(cands[0], args, s, what, loc, explicit, outer, explicit_outer)
        first: P4Error | None = None
        for g in cands:
            try:
                return self.check_args(g, args, s, what, loc, explicit, outer, explicit_outer)
            except P4Error as ex:
                first = first or ex
        assert first is not None
        raise first

    def check_args(self, sig: Sig, args: list[ir.Argument], s: Scope, what: str, loc: Location,
                   explicit: list[T.P4Type] | None, outer: dict[int, T.P4Type] | None,
                   explicit_outer: list[T.P4Type] | None
                   ) -> tuple[Sig, list[ir.Argument], dict[int, T.P4Type]]:
        m: dict[int, T.P4Type] = dict(outer or {})
        free: dict[int, TypeVar] = {tv.id: tv for tv in sig.tvars}
        if explicit:
            if len(explicit) != len(sig.tvars):
                raise P4Error(loc, f"{what} expects {len(sig.tvars)} type arguments, got {len(explicit)}")
            for tv, t in zip(sig.tvars, explicit, strict=False):
                if not isinstance(t, T.DontCare):
                    m[tv.id] = t
        if isinstance(sig.ret, T.Extern) and sig.kind == "constructor":
            for rv in sig.ret.type_args:
                if isinstance(rv, TypeVar):
                    free[rv.id] = rv
            if explicit_outer:
                for rv, t in zip(sig.ret.type_args, explicit_outer, strict=False):
                    if isinstance(rv, TypeVar) and not isinstance(t, T.DontCare):
                        m[rv.id] = t
        # extern type params not given (e.g. register<T, I> used as register<T>) are inferred
        for k, bound in list(m.items()):
            if isinstance(bound, TypeVar) and bound.id == k:
                del m[k]
                free[k] = bound
        slots: list[ir.Argument | None] = [None] * len(sig.params)
        pos = 0
        for a in args:
            if a.name is not None:
                idx = next((i for i, p in enumerate(sig.params) if p.name == a.name), None)
                if idx is None:
                    raise P4Error(a.loc, f"{what} has no parameter named '{a.name}'")
            else:
                if pos >= len(sig.params):
                    raise P4Error(loc, f"wrong number of arguments to {what}: expected "
                                  f"{len(sig.params)}, got {len(args)}")
                idx = pos
                pos += 1
            if slots[idx] is not None:
                raise P4Error(a.loc, f"parameter '{sig.params[idx].name}' of {what} given twice")
            slots[idx] = a
        out: list[ir.Argument] = []
        for p, slot in zip(sig.params, slots, strict=False):
            if slot is None:
                if p.default is not None:
                    out.append(ir.Argument(loc=loc, value=clone_literal(p.default), name=p.name))
                elif p.optional:
                    out.append(ir.Argument(loc=loc, value=ir.DontCareExpr(loc=loc, type=subst(p.type, m)),
                                           name=p.name))
                else:
                    raise P4Error(loc, f"wrong number of arguments to {what}: missing argument for "
                                  f"parameter '{p.name}'")
                continue
            pt = subst(p.type, m)
            v: ir.Expr = slot.value
            if p.direction in ("out", "inout"):
                self.pre_lvalue(v, s, f"pass as {p.direction} argument '{p.name}'")
            if isinstance(v, ir.DontCareExpr):
                if p.direction not in ("out",) and not p.optional:
                    if p.direction != "inout":
                        raise P4Error(v.loc, f"'_' can only be passed for an out parameter ('{p.name}')")
                v.type = pt
                out.append(ir.Argument(loc=slot.loc, value=v, name=p.name))
                continue
            if free_vars(pt, free):
                v = self.expr(v, s, None)
                self.unify(pt, v.type, m, free)
            else:
                v = self.expr(v, s, pt)
                v = self.convert(v, pt, f"in argument '{p.name}' of {what}")
            if p.direction in ("out", "inout"):
                self.check_lvalue(v, f"pass as {p.direction} argument '{p.name}'")
            out.append(ir.Argument(loc=slot.loc, value=v, name=p.name))
        # second pass: arguments whose parameter type needed inference
        for p, a in zip(sig.params, out, strict=False):
            generic = free_vars(p.type, free)
            pt = subst(p.type, m)
            if isinstance(a.value, ir.DontCareExpr):
                if free_vars(pt, free):
                    raise P4Error(a.value.loc, f"cannot infer the type of argument '{p.name}' of {what}")
                a.value.type = pt
                continue
            if generic and contains_infint(a.value.type):
                raise P4Error(start(a.value), f"cannot infer a width for argument '{p.name}' of {what}; "
                              f"use a cast or a sized literal")
            a.value = self.convert(a.value, pt, f"in argument '{p.name}' of {what}")
            if generic and p.direction and isinstance(pt, (T.String, T.Extern, T.TableType, T.Block)):
                raise P4Error(start(a.value), f"argument '{p.name}' of {what} cannot have type {show(pt)}")
        for tv in sig.tvars:
            if tv.id not in m:
                raise P4Error(loc, f"cannot infer type parameter {tv.name} of {what}")
        for k, tv in free.items():
            if k not in m and tv not in sig.tvars and sig.kind != "constructor":
                raise P4Error(loc, f"cannot infer type parameter {tv.name} of {what}")
        return sig, out, m

    def unify(self, pt: T.P4Type, at: T.P4Type, m: dict[int, T.P4Type], free: dict[int, TypeVar]) -> None:
        if isinstance(pt, TypeVar) and pt.id in free:
            if pt.id in m:
                return
            if isinstance(at, (T.InfInt, T.DontCare)) or isinstance(at, TypeVar):
                return
            m[pt.id] = at
            return
        if isinstance(pt, T.Tuple) and isinstance(at, T.Tuple) and len(pt.elems) == len(at.elems):
            for x, y in zip(pt.elems, at.elems, strict=False):
                self.unify(x, y, m, free)
        elif isinstance(pt, T.Stack) and isinstance(at, T.Stack):
            self.unify(pt.elem, at.elem, m, free)
        elif isinstance(pt, (T.Extern, T.Block)) and isinstance(at, type(pt)) and \
                len(pt.type_args) == len(at.type_args):
            for x, y in zip(pt.type_args, at.type_args, strict=False):
                self.unify(x, y, m, free)
