"""What every part of the checker builds on: program-wide state (errors,
match kinds, declared types, signatures), resolving type references, and
the entry points (abstract here) through which a part calls a later one."""

from __future__ import annotations

from abc import ABCMeta, abstractmethod

from ...frontend import ir
from ...frontend.source import Location, P4Error, P4Unsupported
from .. import types as T
from .common import (
    CORE_ERRORS,
    MAX_WIDTH,
    Ctx,
    Scope,
    Sig,
    TypeVar,
    is_type_decl,
)


class CheckBase(metaclass=ABCMeta):
    """Program-wide state and type resolution."""

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

    # -- entry points into later parts (declarations, expressions) --------------

    @abstractmethod
    def local_decl(self, d: ir.Decl, s: Scope, ctx: Ctx) -> None:
        ...

    @abstractmethod
    def fold_ctor_args(self, args: list[ir.Argument]) -> None:
        ...

    @abstractmethod
    def expr(self, e: ir.Expr, s: Scope, expected: T.P4Type | None) -> ir.Expr:
        ...
