"""Helpers shared by the code generator's parts: how P4 values are represented
in Python (bit patterns, wrapping, attribute names) and walks over the IR."""

from __future__ import annotations

import keyword
import re
from collections.abc import Iterator
from typing import Any

from ..frontend import ir
from ..frontend.source import UNKNOWN, Location, P4Unsupported
from ..midend import types as T

CORE_ERRORS = ["NoError", "PacketTooShort", "NoMatch", "StackOutOfBounds",
               "HeaderTooShort", "ParserTimeout", "ParserInvalidArgument"]
ERR_PACKET_TOO_SHORT = 1
ERR_NO_MATCH = 2
ERR_STACK_OOB = 3
ERR_HEADER_TOO_SHORT = 4
ERR_INVALID_ARG = 6


# ---------------------------------------------------------------------------
# Type helpers


def base_t(t: T.P4Type) -> T.P4Type:
    """Representation type: new-types and serializable enums become bits."""
    while True:
        if isinstance(t, T.NewType):
            t = t.base
        elif isinstance(t, T.Enum) and t.underlying is not None:
            t = t.underlying
        else:
            return t


def is_composite(t: T.P4Type | None) -> bool:
    return t is not None and isinstance(base_t(t), (T.StructLike, T.Stack))


def scalar_width(t: T.P4Type, loc: Location = UNKNOWN) -> int:
    b = base_t(t)
    if isinstance(b, T.Bits):
        return b.width
    if isinstance(b, T.Bool):
        return 1
    if isinstance(b, T.Varbit):
        return b.max_width
    if isinstance(b, (T.ErrorType, T.Enum)):
        return 32
    if isinstance(b, T.StructLike):
        return b.bit_width()
    raise P4Unsupported(loc, f"a value of type {t} where a bit width is needed")


def mask_of(w: int) -> int:
    return (1 << w) - 1


def wrap(code: str, t: T.P4Type) -> str:
    """Bring an int expression back into the value range of type ``t``."""
    b = base_t(t)
    if isinstance(b, T.Bits):
        if b.width == 0:
            return "0"
        m = mask_of(b.width)
        if b.signed:
            h = 1 << (b.width - 1)
            return f"((({code}) + {h:#x} & {m:#x}) - {h:#x})"
        return f"(({code}) & {m:#x})"
    return code


def unsigned(code: str, t: T.P4Type) -> str:
    """Bit pattern (non-negative int) of a scalar value of type ``t``."""
    b = base_t(t)
    if isinstance(b, T.Bits) and b.signed:
        return f"(({code}) & {mask_of(b.width):#x})"
    if isinstance(b, T.Bool):
        return f"(1 if {code} else 0)"
    return code


def from_unsigned(code: str, t: T.P4Type) -> str:
    """Value of type ``t`` from its bit pattern."""
    b = base_t(t)
    if isinstance(b, T.Bits) and b.signed:
        return wrap(code, b)
    if isinstance(b, T.Bool):
        return f"({code} != 0)"
    return code


def ident(s: str) -> str:
    s = re.sub(r"\W", "_", s)
    return s or "x"


def fname(n: str) -> str:
    """Python attribute name of a P4 field."""
    if keyword.iskeyword(n) or n.startswith("_") or n in (
            "e", "nextIndex", "size", "isValid", "setValid", "setInvalid"):
        return "f_" + n
    return n


def annotation_str(anns: list[ir.Annotation], name: str) -> str | None:
    a = ir.find_annotation(anns, name)
    if a is None:
        return None
    if a.args and isinstance(a.args[0], ir.StringLit):
        return a.args[0].value
    raw = a.raw.strip()
    if raw.startswith('"') and raw.endswith('"'):
        return raw[1:-1]
    return raw or None


def expr_text(e: ir.Expr) -> str:
    """Source-like text of a key expression (its control-plane name)."""
    if isinstance(e, ir.PathExpr):
        return ("." if e.absolute else "") + e.name
    if isinstance(e, ir.MemberExpr):
        return f"{expr_text(e.expr)}.{e.member}"
    if isinstance(e, ir.IndexExpr):
        return f"{expr_text(e.expr)}[{expr_text(e.index)}]"
    if isinstance(e, ir.SliceExpr):
        return f"{expr_text(e.expr)}[{expr_text(e.hi)}:{expr_text(e.lo)}]"
    if isinstance(e, ir.CallExpr):
        return f"{expr_text(e.func)}({', '.join(expr_text(a.value) for a in e.args)})"
    if isinstance(e, ir.IntLit):
        return str(e.value)
    if isinstance(e, ir.CastExpr):
        return expr_text(e.expr)
    if isinstance(e, ir.BinaryExpr):
        return f"{expr_text(e.left)} {e.op} {expr_text(e.right)}"
    return type(e).__name__


# struct codes (big-endian) making up an n-byte unsigned unit, most significant first
BYTE_CODES = {1: "B", 2: "H", 3: "HB", 4: "I", 5: "IB", 6: "IH", 7: "IHB", 8: "Q"}
CODE_BYTES = {"B": 1, "H": 2, "I": 4, "Q": 8}


def struct_units(fields: list[tuple[str, str, T.P4Type]]
                  ) -> list[tuple[int, list[tuple[str, T.P4Type, int, int]]]] | None:
    """Split a fixed-width header's fields into units of 1..8 whole bytes
    (a unit ends where the fields so far end on a byte boundary), each with
    its fields as (attribute, type, width, shift within the unit); None if
    some unit would exceed 8 bytes (e.g. a 128-bit field)."""
    units: list[tuple[int, list[tuple[str, T.P4Type, int, int]]]] = []
    cur: list[tuple[str, T.P4Type, int]] = []
    bits = 0
    for _, p, ft in fields:
        b = base_t(ft)
        if not isinstance(b, (T.Bits, T.Bool)):
            return None
        w = scalar_width(b)
        cur.append((p, ft, w))
        bits += w
        if bits > 64:
            return None
        if bits % 8 == 0 and bits:
            sh = bits
            flds = []
            for p2, ft2, w2 in cur:
                sh -= w2
                flds.append((p2, ft2, w2, sh))
            units.append((bits // 8, flds))
            cur = []
            bits = 0
    if cur or not units:
        return None
    return units


# ---------------------------------------------------------------------------
# Static analyses over the IR


def walk(node: Any) -> Iterator[Any]:
    """All IR nodes below ``node`` (not following decl references)."""
    stack = [node]
    while stack:
        n = stack.pop()
        if isinstance(n, list):
            stack.extend(n)
            continue
        if isinstance(n, tuple):
            stack.extend(n)
            continue
        if not isinstance(n, ir.Node):
            continue
        yield n
        for k, v in vars(n).items():
            if k in ("decl", "type", "resolved", "loc"):
                continue
            if isinstance(v, (ir.Node, list, tuple)):
                stack.append(v)
            elif isinstance(v, dict):
                stack.extend(v.values())


def contains_return(body: Any) -> bool:
    return any(isinstance(n, ir.ReturnStmt) for n in walk(body))



def copy_expr(code: str, t: T.P4Type) -> str:
    return f"{code}._copy()" if is_composite(t) else code


def is_simple_const(code: str) -> bool:
    return bool(re.fullmatch(r"-?(0x[0-9a-fA-F]+|\d+)|True|False|'[^']*'", code))


def is_simple_name(code: str) -> bool:
    return bool(re.fullmatch(r"[A-Za-z_]\w*", code))


def is_isvalid(e: ir.Expr) -> bool:
    return (isinstance(e, ir.CallExpr) and isinstance(e.func, ir.MemberExpr)
            and e.func.member == "isValid")
