"""Compile-time arithmetic on P4 values: wrap-around, literal construction and
folding of operators on literals.  Kept apart from the checker so the rules
for ``bit<W>``/``int<W>``/``int`` arithmetic live in one place."""

from __future__ import annotations

from ..frontend import ir
from ..frontend.source import Location, P4Error
from . import types as T


def wrap(value: int, width: int, signed: bool) -> int:
    """Reduce ``value`` to the range of ``bit<width>`` / ``int<width>``."""
    value &= (1 << width) - 1
    if signed and width > 0 and value >= 1 << (width - 1):
        value -= 1 << width
    return value


def int_lit(value: int, typ: T.P4Type, loc: Location) -> ir.IntLit:
    """A literal of type ``typ`` (Bits -> sized and wrapped, InfInt -> unsized)."""
    if isinstance(typ, T.Bits):
        v = wrap(value, typ.width, typ.signed)
        return ir.IntLit(loc=loc, value=v, width=typ.width, signed=typ.signed, type=typ)
    return ir.IntLit(loc=loc, value=value, type=T.InfInt())


def bool_lit(value: bool, loc: Location) -> ir.BoolLit:
    return ir.BoolLit(loc=loc, value=value, type=T.Bool())


def is_const(e: ir.Expr) -> bool:
    return isinstance(e, (ir.IntLit, ir.BoolLit, ir.StringLit))


def fold_unary(op: str, e: ir.Expr, typ: T.P4Type, loc: Location) -> ir.Expr | None:
    if isinstance(e, ir.BoolLit) and op == "!":
        return bool_lit(not e.value, loc)
    if isinstance(e, ir.IntLit):
        if op == "-":
            return int_lit(-e.value, typ, loc)
        if op == "+":
            return int_lit(e.value, typ, loc)
        if op == "~" and isinstance(typ, T.Bits):
            return int_lit(~e.value, typ, loc)
    return None


def _shift_amount(r: int, loc: Location) -> int:
    if r < 0:
        raise P4Error(loc, f"shift by a negative amount ({r})")
    return r


def fold_binary(op: str, lhs: ir.Expr, r: ir.Expr, typ: T.P4Type, loc: Location) -> ir.Expr | None:
    """Fold ``lhs op r`` when both are literals; ``typ`` is the result type."""
    if isinstance(lhs, ir.BoolLit) and isinstance(r, ir.BoolLit):
        p, q = lhs.value, r.value
        table = {"&&": p and q, "||": p or q, "==": p == q, "!=": p != q}
        if op in table:
            return bool_lit(table[op], loc)
        return None
    if not (isinstance(lhs, ir.IntLit) and isinstance(r, ir.IntLit)):
        return None
    a, b = lhs.value, r.value
    if op in ("==", "!=", "<", "<=", ">", ">="):
        res = {"==": a == b, "!=": a != b, "<": a < b, "<=": a <= b,
               ">": a > b, ">=": a >= b}[op]
        return bool_lit(res, loc)
    if op == "++":
        assert isinstance(typ, T.Bits)
        rw = r.width or 0
        return int_lit((a << rw) | (b & ((1 << rw) - 1)), typ, loc)
    if op in ("/", "%"):
        if b == 0:
            raise P4Error(loc, "division by zero")
        if a < 0 or b < 0:
            raise P4Error(loc, "division or modulo of a negative value")
        return int_lit(a // b if op == "/" else a % b, typ, loc)
    if op in ("|+|", "|-|"):
        assert isinstance(typ, T.Bits)
        v = a + b if op == "|+|" else a - b
        if typ.signed:
            lo, hi = -(1 << (typ.width - 1)), (1 << (typ.width - 1)) - 1
        else:
            lo, hi = 0, (1 << typ.width) - 1
        return int_lit(min(max(v, lo), hi), typ, loc)
    if op == "<<":
        s = _shift_amount(b, loc)
        if isinstance(typ, T.Bits) and s >= typ.width:
            return int_lit(0, typ, loc)
        return int_lit(a << s, typ, loc)
    if op == ">>":
        s = _shift_amount(b, loc)
        return int_lit(a >> s, typ, loc)
    ops = {"+": lambda: a + b, "-": lambda: a - b, "*": lambda: a * b,
           "&": lambda: a & b, "|": lambda: a | b, "^": lambda: a ^ b}
    if op in ops:
        return int_lit(ops[op](), typ, loc)
    return None
