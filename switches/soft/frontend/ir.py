"""The one IR of the soft target's compiler.

The parser builds these nodes; the type checker (``switches.soft.midend``)
annotates them in place (``Expr.type``, ``PathExpr.decl``, ``TypeRef.resolved``);
the backend (``switches.soft.backend``) reads the annotated tree and emits
Python.  Nodes mirror P4_16 syntax closely so every diagnostic can point at the
source (``node.loc``).

Conventions:
- Names are plain strings; a leading ``.`` (top-level scope) is kept in
  ``PathExpr.absolute`` / ``TypeName.absolute``.
- Fields filled by later passes default to ``None`` and are typed ``Any`` so the
  IR does not import the checker's type classes.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from .source import UNKNOWN, Location


@dataclass(kw_only=True)
class Node:
    loc: Location = UNKNOWN


# --------------------------------------------------------------------------
# Annotations


@dataclass(kw_only=True)
class Annotation(Node):
    """``@name`` or ``@name(expr, ...)`` or ``@name[k=v, ...]``.

    ``args`` holds the parsed expressions when the body parses as an
    expression list (``@name("x")`` -> [StringLit]); ``raw`` always holds the
    unparsed body text.
    """

    name: str
    args: list[Expr] = field(default_factory=list)
    raw: str = ""


def find_annotation(annotations: list[Annotation], name: str) -> Annotation | None:
    for a in annotations:
        if a.name == name:
            return a
    return None


# --------------------------------------------------------------------------
# Types as written in the source


@dataclass(kw_only=True)
class TypeRef(Node):
    resolved: Any = None  # semantic type, set by the checker


@dataclass(kw_only=True)
class TypeBits(TypeRef):
    """``bit<W>`` (signed=False) or ``int<W>`` (signed=True); ``bit`` alone is bit<1>."""

    width: Expr
    signed: bool = False


@dataclass(kw_only=True)
class TypeVarbit(TypeRef):
    max_width: Expr


@dataclass(kw_only=True)
class TypeInfInt(TypeRef):
    """Arbitrary-precision ``int``."""


@dataclass(kw_only=True)
class TypeBool(TypeRef):
    pass


@dataclass(kw_only=True)
class TypeString(TypeRef):
    pass


@dataclass(kw_only=True)
class TypeVoid(TypeRef):
    pass


@dataclass(kw_only=True)
class TypeError_(TypeRef):
    """The built-in ``error`` type."""


@dataclass(kw_only=True)
class TypeMatchKind(TypeRef):
    pass


@dataclass(kw_only=True)
class TypeDontCare(TypeRef):
    """``_`` in a type-argument position."""


@dataclass(kw_only=True)
class TypeName(TypeRef):
    name: str
    absolute: bool = False


@dataclass(kw_only=True)
class TypeSpecialized(TypeRef):
    """``Base<T1, T2>`` e.g. ``register<bit<32>>`` or ``Checksum16<...>``."""

    base: TypeName
    args: list[TypeRef]


@dataclass(kw_only=True)
class TypeStack(TypeRef):
    """Header stack ``elem[size]``."""

    elem: TypeRef
    size: Expr


@dataclass(kw_only=True)
class TypeTuple(TypeRef):
    elems: list[TypeRef]


# --------------------------------------------------------------------------
# Expressions


@dataclass(kw_only=True)
class Expr(Node):
    type: Any = None  # semantic type, set by the checker


@dataclass(kw_only=True)
class IntLit(Expr):
    """Integer literal. ``width`` is None for unsized literals (``5``)."""

    value: int
    width: int | None = None
    signed: bool = False
    base: int = 10  # as written, for messages


@dataclass(kw_only=True)
class BoolLit(Expr):
    value: bool


@dataclass(kw_only=True)
class StringLit(Expr):
    value: str


@dataclass(kw_only=True)
class PathExpr(Expr):
    name: str
    absolute: bool = False
    decl: Any = None  # declaration node it refers to, set by the checker


@dataclass(kw_only=True)
class MemberExpr(Expr):
    """``expr.member`` (fields, methods, ``error.X``, enum members, ``.next``, ...)."""

    expr: Expr
    member: str


@dataclass(kw_only=True)
class IndexExpr(Expr):
    """``stack[index]``."""

    expr: Expr
    index: Expr


@dataclass(kw_only=True)
class SliceExpr(Expr):
    """``expr[hi:lo]``."""

    expr: Expr
    hi: Expr
    lo: Expr


@dataclass(kw_only=True)
class UnaryExpr(Expr):
    op: str  # '!', '~', '-', '+'
    expr: Expr


@dataclass(kw_only=True)
class BinaryExpr(Expr):
    """Binary operators, including ``++`` (concat), ``|+|``/``|-|`` (saturating),
    ``&&&`` (mask) and ``..`` (range) which only appear in keysets/entries."""

    op: str
    left: Expr
    right: Expr


@dataclass(kw_only=True)
class TernaryExpr(Expr):
    cond: Expr
    then: Expr
    else_: Expr


@dataclass(kw_only=True)
class CastExpr(Expr):
    to: TypeRef
    expr: Expr


@dataclass(kw_only=True)
class Argument(Node):
    value: Expr  # DontCareExpr for ``_``
    name: str | None = None  # named argument ``name = value``


@dataclass(kw_only=True)
class CallExpr(Expr):
    """Any call: method, function, action, extern method, or a constructor
    call inside an instantiation argument (``MyParser()``)."""

    func: Expr
    type_args: list[TypeRef] = field(default_factory=list)
    args: list[Argument] = field(default_factory=list)


@dataclass(kw_only=True)
class ListExpr(Expr):
    """``{a, b, c}`` (tuple / list / header initializer by position)."""

    elems: list[Expr]


@dataclass(kw_only=True)
class StructExpr(Expr):
    """``{a = 1, b = 2}``; ``type_name`` set for ``(T){...}``-free typed form ``T {..}``."""

    fields: list[tuple[str, Expr]]
    type_name: TypeRef | None = None


@dataclass(kw_only=True)
class DefaultExpr(Expr):
    """``default`` in a select case / entry key."""


@dataclass(kw_only=True)
class DontCareExpr(Expr):
    """``_``."""


# --------------------------------------------------------------------------
# Statements


@dataclass(kw_only=True)
class Stmt(Node):
    pass


@dataclass(kw_only=True)
class BlockStmt(Stmt):
    stmts: list[Stmt] = field(default_factory=list)
    annotations: list[Annotation] = field(default_factory=list)


@dataclass(kw_only=True)
class AssignStmt(Stmt):
    lhs: Expr
    rhs: Expr


@dataclass(kw_only=True)
class CallStmt(Stmt):
    call: CallExpr


@dataclass(kw_only=True)
class IfStmt(Stmt):
    cond: Expr
    then: Stmt
    else_: Stmt | None = None


@dataclass(kw_only=True)
class SwitchCase(Node):
    """One ``label: body`` or fall-through ``label:`` (body None).

    ``label`` is a DefaultExpr, an action name (PathExpr) for
    ``switch (t.apply().action_run)``, or a constant expression."""

    label: Expr
    body: BlockStmt | None = None


@dataclass(kw_only=True)
class SwitchStmt(Stmt):
    expr: Expr
    cases: list[SwitchCase]


@dataclass(kw_only=True)
class ExitStmt(Stmt):
    pass


@dataclass(kw_only=True)
class ReturnStmt(Stmt):
    value: Expr | None = None


@dataclass(kw_only=True)
class EmptyStmt(Stmt):
    pass


@dataclass(kw_only=True)
class ForStmt(Stmt):
    """``for (init; cond; update) body`` (P4_16 1.2.5).  ``init``/``update`` are
    statements (VarDecl, AssignStmt, CallStmt); ``cond`` None means true."""

    init: list[Stmt] = field(default_factory=list)
    cond: Expr | None = None
    update: list[Stmt] = field(default_factory=list)
    body: Stmt = field(default_factory=lambda: EmptyStmt())


@dataclass(kw_only=True)
class ForInStmt(Stmt):
    """``for (T v in collection) body``; ``type`` None when ``v`` is an existing
    variable.  ``collection`` is a ``lo .. hi`` BinaryExpr, a list or a stack."""

    var: str
    type: TypeRef | None = None
    collection: Expr
    body: Stmt = field(default_factory=lambda: EmptyStmt())
    decl: Any = None  # the loop variable (VarDecl, synthesized when declared here), set by the checker


@dataclass(kw_only=True)
class BreakStmt(Stmt):
    pass


@dataclass(kw_only=True)
class ContinueStmt(Stmt):
    pass


# --------------------------------------------------------------------------
# Declarations (some are also statements: VarDecl, ConstDecl)


@dataclass(kw_only=True)
class Decl(Stmt):
    name: str
    annotations: list[Annotation] = field(default_factory=list)


@dataclass(kw_only=True)
class Param(Node):
    direction: str  # '', 'in', 'out', 'inout'
    type: TypeRef
    name: str
    default: Expr | None = None
    annotations: list[Annotation] = field(default_factory=list)


@dataclass(kw_only=True)
class ConstDecl(Decl):
    type: TypeRef
    value: Expr


@dataclass(kw_only=True)
class VarDecl(Decl):
    type: TypeRef
    init: Expr | None = None


@dataclass(kw_only=True)
class TypedefDecl(Decl):
    """``typedef T name;`` (alias) or ``type T name;`` (new type, is_newtype)."""

    type: TypeRef
    is_newtype: bool = False


@dataclass(kw_only=True)
class StructField(Node):
    name: str
    type: TypeRef
    annotations: list[Annotation] = field(default_factory=list)


@dataclass(kw_only=True)
class HeaderDecl(Decl):
    fields: list[StructField]


@dataclass(kw_only=True)
class HeaderUnionDecl(Decl):
    fields: list[StructField]


@dataclass(kw_only=True)
class StructDecl(Decl):
    fields: list[StructField]


@dataclass(kw_only=True)
class EnumDecl(Decl):
    """``enum E { A, B }`` or serializable ``enum bit<8> E { A = 1, B = 2 }``."""

    members: list[str]
    underlying: TypeRef | None = None
    values: list[Expr | None] = field(default_factory=list)


@dataclass(kw_only=True)
class ErrorDecl(Decl):
    """``error { A, B }`` (name is 'error'; declarations accumulate)."""

    members: list[str]


@dataclass(kw_only=True)
class MatchKindDecl(Decl):
    """``match_kind { exact, lpm }`` (name is 'match_kind')."""

    members: list[str]


@dataclass(kw_only=True)
class MethodDecl(Decl):
    """A method prototype inside an extern (``abstract`` for user-implemented)."""

    return_type: TypeRef | None  # None for constructors
    type_params: list[str] = field(default_factory=list)
    params: list[Param] = field(default_factory=list)
    is_abstract: bool = False
    is_constructor: bool = False


@dataclass(kw_only=True)
class ExternDecl(Decl):
    type_params: list[str] = field(default_factory=list)
    methods: list[MethodDecl] = field(default_factory=list)


@dataclass(kw_only=True)
class ExternFunctionDecl(Decl):
    return_type: TypeRef
    type_params: list[str] = field(default_factory=list)
    params: list[Param] = field(default_factory=list)


@dataclass(kw_only=True)
class FunctionDecl(Decl):
    return_type: TypeRef
    type_params: list[str] = field(default_factory=list)
    params: list[Param] = field(default_factory=list)
    body: BlockStmt = field(default_factory=BlockStmt)


@dataclass(kw_only=True)
class ActionDecl(Decl):
    params: list[Param] = field(default_factory=list)
    body: BlockStmt = field(default_factory=BlockStmt)


@dataclass(kw_only=True)
class ParserTypeDecl(Decl):
    """``parser P<H>(packet_in b, out H h);`` (a prototype, e.g. in v1model.p4)."""

    type_params: list[str] = field(default_factory=list)
    params: list[Param] = field(default_factory=list)


@dataclass(kw_only=True)
class ControlTypeDecl(Decl):
    type_params: list[str] = field(default_factory=list)
    params: list[Param] = field(default_factory=list)


@dataclass(kw_only=True)
class PackageTypeDecl(Decl):
    type_params: list[str] = field(default_factory=list)
    params: list[Param] = field(default_factory=list)


@dataclass(kw_only=True)
class SelectCase(Node):
    """``keyset: state;`` - ``keyset`` is an Expr (value, ``a &&& m``,
    ``lo .. hi``, DefaultExpr, DontCareExpr) or a ListExpr for tuples."""

    keyset: Expr
    state: str


@dataclass(kw_only=True)
class Transition(Node):
    pass


@dataclass(kw_only=True)
class DirectTransition(Transition):
    state: str  # 'accept', 'reject' or a state name


@dataclass(kw_only=True)
class SelectTransition(Transition):
    exprs: list[Expr]
    cases: list[SelectCase]


@dataclass(kw_only=True)
class ParserState(Decl):
    stmts: list[Stmt] = field(default_factory=list)
    transition: Transition | None = None  # None means 'transition reject'


@dataclass(kw_only=True)
class ValueSetDecl(Decl):
    """``value_set<T>(size) name;``"""

    type: TypeRef
    size: Expr


@dataclass(kw_only=True)
class ParserDecl(Decl):
    type_params: list[str] = field(default_factory=list)
    params: list[Param] = field(default_factory=list)
    ctor_params: list[Param] = field(default_factory=list)
    locals: list[Decl] = field(default_factory=list)
    states: list[ParserState] = field(default_factory=list)


@dataclass(kw_only=True)
class KeyElement(Node):
    expr: Expr
    match_kind: str
    annotations: list[Annotation] = field(default_factory=list)


@dataclass(kw_only=True)
class ActionRef(Node):
    """An action named in a table: ``a``, ``a(1, 2)`` (bound arguments)."""

    name: str
    args: list[Argument] = field(default_factory=list)
    annotations: list[Annotation] = field(default_factory=list)
    decl: Any = None  # ActionDecl, set by the checker


@dataclass(kw_only=True)
class TableEntry(Node):
    """One entry of an ``entries`` list. ``keys`` has one Expr per key element
    (or a single ListExpr-free list when the key has one element)."""

    keys: list[Expr]
    action: ActionRef
    priority: Expr | None = None
    is_const: bool = False
    annotations: list[Annotation] = field(default_factory=list)


@dataclass(kw_only=True)
class TableDecl(Decl):
    keys: list[KeyElement] = field(default_factory=list)
    actions: list[ActionRef] = field(default_factory=list)
    default_action: ActionRef | None = None
    default_action_const: bool = False
    entries: list[TableEntry] = field(default_factory=list)
    entries_const: bool = False
    size: Expr | None = None
    # Other properties as written: name -> expression (e.g. counters, meters,
    # implementation, support_timeout, largest_priority_wins, priority_delta).
    properties: dict[str, Expr] = field(default_factory=dict)
    property_locs: dict[str, Location] = field(default_factory=dict)
    # annotations written before a property (e.g. @name on an implementation)
    property_annotations: dict[str, list[Annotation]] = field(default_factory=dict)


@dataclass(kw_only=True)
class InstantiationDecl(Decl):
    """``Type(args) name;`` - externs, parsers/controls inside others, main."""

    type: TypeRef
    args: list[Argument] = field(default_factory=list)


@dataclass(kw_only=True)
class ControlDecl(Decl):
    type_params: list[str] = field(default_factory=list)
    params: list[Param] = field(default_factory=list)
    ctor_params: list[Param] = field(default_factory=list)
    locals: list[Decl] = field(default_factory=list)
    body: BlockStmt = field(default_factory=BlockStmt)


@dataclass(kw_only=True)
class Program(Node):
    decls: list[Decl]
    files: list[str] = field(default_factory=list)  # every file read, in order
