"""What the parts of the checker share: scopes, signatures, type variables,
and small functions over types and expressions."""

from __future__ import annotations

import itertools
from collections.abc import Callable as Fn
from dataclasses import dataclass, field
from typing import Any

from ...frontend import ir
from ...frontend.source import Location, P4Error
from .. import types as T

CORE_ERRORS = ("NoError", "PacketTooShort", "NoMatch", "StackOutOfBounds",
               "HeaderTooShort", "ParserTimeout", "ParserInvalidArgument")

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
