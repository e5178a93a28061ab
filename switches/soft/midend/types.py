"""Semantic types: what the checker attaches to IR nodes (``Expr.type``,
``TypeRef.resolved``) and what the backend reads.

Typedefs are resolved away (a ``typedef bit<32> ip4Addr_t`` field has type
``Bits(32)``); ``type`` new-types stay distinct as ``NewType``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ..frontend import ir


class P4Type:
    """Base of all semantic types."""

    def bit_width(self) -> int:
        """Width in bits where the type has one (bits, bool, headers, ...)."""
        raise TypeError(f"{self} has no fixed bit width")


@dataclass(frozen=True)
class Bits(P4Type):
    width: int
    signed: bool = False

    def bit_width(self) -> int:
        return self.width

    def __str__(self) -> str:
        return f"{'int' if self.signed else 'bit'}<{self.width}>"


@dataclass(frozen=True)
class Varbit(P4Type):
    max_width: int

    def __str__(self) -> str:
        return f"varbit<{self.max_width}>"


@dataclass(frozen=True)
class InfInt(P4Type):
    """Type of unsized integer literals and ``int`` compile-time values."""

    def __str__(self) -> str:
        return "int"


@dataclass(frozen=True)
class Bool(P4Type):
    def bit_width(self) -> int:
        return 1

    def __str__(self) -> str:
        return "bool"


@dataclass(frozen=True)
class String(P4Type):
    def __str__(self) -> str:
        return "string"


@dataclass(frozen=True)
class Void(P4Type):
    def __str__(self) -> str:
        return "void"


@dataclass(frozen=True)
class DontCare(P4Type):
    def __str__(self) -> str:
        return "_"


@dataclass(frozen=True)
class ErrorType(P4Type):
    """``error``: values are ints, ``members[i]`` is the name of value i."""

    members: tuple[str, ...] = ()

    def __str__(self) -> str:
        return "error"


@dataclass(frozen=True)
class MatchKind(P4Type):
    def __str__(self) -> str:
        return "match_kind"


@dataclass(eq=False)
class Field:
    name: str
    type: P4Type
    annotations: list[ir.Annotation] = field(default_factory=list)


@dataclass(eq=False)
class StructLike(P4Type):
    """Header, header union or struct. ``decl`` is the IR declaration."""

    name: str
    fields: list[Field]
    decl: ir.Decl | None = None

    def field_type(self, name: str) -> P4Type | None:
        for f in self.fields:
            if f.name == name:
                return f.type
        return None

    def bit_width(self) -> int:
        return sum(f.type.bit_width() for f in self.fields)

    def __str__(self) -> str:
        return self.name


class Header(StructLike):
    pass


class HeaderUnion(StructLike):
    def bit_width(self) -> int:
        return max((f.type.bit_width() for f in self.fields), default=0)


class Struct(StructLike):
    pass


@dataclass(frozen=True)
class Stack(P4Type):
    elem: P4Type
    size: int

    def __str__(self) -> str:
        return f"{self.elem}[{self.size}]"


@dataclass(eq=False)
class Enum(P4Type):
    """Plain enum (underlying None, values = index) or serializable enum."""

    name: str
    members: list[str]
    underlying: Bits | None = None
    values: list[int] = field(default_factory=list)  # value of members[i]
    decl: ir.Decl | None = None

    def bit_width(self) -> int:
        if self.underlying is None:
            raise TypeError(f"enum {self.name} has no bit width")
        return self.underlying.width

    def __str__(self) -> str:
        return self.name


@dataclass(eq=False)
class NewType(P4Type):
    """``type bit<32> T;`` - same representation as ``base``, distinct type."""

    name: str
    base: P4Type

    def bit_width(self) -> int:
        return self.base.bit_width()

    def __str__(self) -> str:
        return self.name


@dataclass(frozen=True)
class Tuple(P4Type):
    elems: tuple[P4Type, ...]

    def __str__(self) -> str:
        return "tuple<" + ", ".join(map(str, self.elems)) + ">"


@dataclass(eq=False)
class Extern(P4Type):
    """An extern object type, specialized: ``register<bit<32>>`` ->
    Extern('register', [Bits(32)], decl)."""

    name: str
    type_args: list[P4Type] = field(default_factory=list)
    decl: ir.Decl | None = None

    def __str__(self) -> str:
        if self.type_args:
            return f"{self.name}<{', '.join(map(str, self.type_args))}>"
        return self.name


@dataclass(eq=False)
class Callable(P4Type):
    """Actions, functions, extern functions and methods, parser/control
    ``apply``. ``params`` are (direction, type, name)."""

    kind: str  # 'action', 'function', 'extern_function', 'method', 'apply'
    params: list[tuple[str, P4Type, str]]
    ret: P4Type
    decl: ir.Decl | None = None


@dataclass(eq=False)
class TableType(P4Type):
    decl: ir.TableDecl

    def __str__(self) -> str:
        return f"table {self.decl.name}"


@dataclass(frozen=True)
class ApplyResult(P4Type):
    """Result of ``t.apply()``: members ``hit``, ``miss``, ``action_run``."""

    table: str


@dataclass(frozen=True)
class ActionEnum(P4Type):
    """Type of ``t.apply().action_run``."""

    table: str


@dataclass(eq=False)
class Block(P4Type):
    """Parser, control or package types (declared or instantiated)."""

    kind: str  # 'parser', 'control', 'package'
    name: str
    decl: ir.Decl | None = None
    type_args: list[P4Type] = field(default_factory=list)

    def __str__(self) -> str:
        return f"{self.kind} {self.name}"


@dataclass(frozen=True)
class TypeOfType(P4Type):
    """The 'type' of an expression that names a type (``error``, ``E`` in ``E.A``,
    ``h.minSizeInBits`` receiver, ...)."""

    of: P4Type
