"""Expressions, constants, lvalues and assignment."""

from __future__ import annotations

from typing import Any

from ..frontend import ir
from ..frontend.source import Location, P4Error, P4Unsupported
from ..midend import types as T
from .common import (
    base_t,
    fname,
    from_unsigned,
    is_composite,
    is_simple_const,
    is_simple_name,
    mask_of,
    scalar_width,
    unsigned,
    wrap,
)
from .headers import HeaderGen


class ExpressionGen(HeaderGen):
    """Expressions, compile-time constants, lvalues and assignment."""

    # -- constant evaluation (entries, constructor args) --------------------

    def const(self, e: ir.Expr) -> Any:
        if isinstance(e, ir.IntLit):
            return e.value
        if isinstance(e, ir.BoolLit):
            return e.value
        if isinstance(e, ir.StringLit):
            return e.value
        if isinstance(e, ir.CastExpr):
            v = self.const(e.expr)
            t = e.to.resolved if e.to is not None and e.to.resolved is not None else e.type
            b = base_t(t)
            if isinstance(b, T.Bits):
                v = int(v) & mask_of(b.width)
                if b.signed and v >> (b.width - 1):
                    v -= 1 << b.width
            elif isinstance(b, T.Bool):
                v = bool(v)
            return v
        if isinstance(e, ir.UnaryExpr):
            v = self.const(e.expr)
            if e.op == "-":
                return self._const_wrap(-v, e.type)
            if e.op == "~":
                return self._const_wrap(~v, e.type)
            if e.op == "!":
                return not v
            return v
        if isinstance(e, ir.PathExpr) and isinstance(e.decl, ir.ConstDecl):
            return self.const(e.decl.value)
        if isinstance(e, ir.MemberExpr):
            t = e.type
            if isinstance(t, T.ErrorType) or (isinstance(e.expr, ir.PathExpr) and e.expr.name == "error"):
                return self.error_value(e.member, e.loc)
            if isinstance(t, T.Enum):
                i = t.members.index(e.member)
                return t.values[i] if t.underlying is not None and t.values else i
        if isinstance(e, ir.BinaryExpr):
            a, b = self.const(e.left), self.const(e.right)
            ops = {"+": lambda: a + b, "-": lambda: a - b, "*": lambda: a * b,
                   "<<": lambda: a << b, ">>": lambda: a >> b, "&": lambda: a & b,
                   "|": lambda: a | b, "^": lambda: a ^ b, "/": lambda: a // b,
                   "%": lambda: a % b}
            if e.op in ops:
                return self._const_wrap(ops[e.op](), e.type)
        raise P4Unsupported(e.loc, f"a non-constant expression here ({type(e).__name__})")

    def _const_wrap(self, v: int, t: T.P4Type) -> int:
        b = base_t(t)
        if isinstance(b, T.Bits):
            v &= mask_of(b.width)
            if b.signed and b.width and v >> (b.width - 1):
                v -= 1 << b.width
        return v

    def enum_member(self, e: ir.Expr) -> str:
        if isinstance(e, ir.MemberExpr):
            return e.member
        if isinstance(e, ir.PathExpr) and isinstance(e.decl, ir.ConstDecl):
            return self.enum_member(e.decl.value)
        raise P4Unsupported(e.loc, "an enum argument that is not a constant member")

    # ======================================================================
    # Expressions

    def ex(self, e: ir.Expr) -> str:
        o = self.override.get(id(e))
        if o is not None:
            return o
        m = getattr(self, "ex_" + type(e).__name__, None)
        if m is None:
            raise P4Unsupported(e.loc, f"expression {type(e).__name__}")
        return m(e)

    def ex_val(self, e: ir.Expr) -> str:
        """Value of ``e`` as an independent copy (for composite values)."""
        code = self.ex(e)
        if is_composite(e.type) and not isinstance(e, (ir.ListExpr, ir.StructExpr)) \
                and not (isinstance(e, ir.CallExpr)):
            return f"{code}._copy()"
        return code

    @property
    def sidx(self) -> str:
        """Run-time stack indexing helper: parsers fault on a bad index."""
        return "stack_index_p" if self.pkt is not None else "stack_index"

    def ex_IntLit(self, e: ir.IntLit) -> str:
        v = e.value
        b = base_t(e.type)
        if isinstance(b, T.Bits):
            v = self._const_wrap(v, b)
        elif isinstance(b, T.Bool):
            return "True" if v else "False"
        return hex(v) if abs(v) > 255 else str(v)

    def ex_BoolLit(self, e: ir.BoolLit) -> str:
        return "True" if e.value else "False"

    def ex_StringLit(self, e: ir.StringLit) -> str:
        return repr(e.value)

    def ex_PathExpr(self, e: ir.PathExpr) -> str:
        d = e.decl
        if d is not None and id(d) in self.env:
            return self.env[id(d)]
        if isinstance(d, ir.ConstDecl):
            return "(" + self.ex(d.value) + ")"
        if isinstance(d, ir.InstantiationDecl):
            return self.bind_instance(d)
        if d is None and e.name in ("true", "false"):
            return "True" if e.name == "true" else "False"
        raise P4Unsupported(e.loc, f"reference to '{e.name}' ({type(d).__name__}) here")

    def ex_DefaultExpr(self, e: ir.Expr) -> str:
        raise P4Unsupported(e.loc, "'default' outside a keyset")

    def ex_DontCareExpr(self, e: ir.Expr) -> str:
        raise P4Unsupported(e.loc, "'_' outside a keyset or argument")

    def _enum_or_error(self, e: ir.MemberExpr) -> str | None:
        t = e.type
        base = e.expr
        is_type_ref = isinstance(getattr(base, "type", None), T.TypeOfType) or (
            isinstance(base, ir.PathExpr) and (
                base.name == "error" or isinstance(base.decl, (ir.EnumDecl, ir.ErrorDecl))
                or (base.decl is not None and isinstance(base.decl, ir.TypedefDecl))))
        if not is_type_ref:
            return None
        if isinstance(t, T.ErrorType) or (isinstance(base, ir.PathExpr) and base.name == "error"):
            return str(self.error_value(e.member, e.loc))
        if isinstance(t, T.Enum):
            i = t.members.index(e.member)
            v = t.values[i] if t.underlying is not None and t.values else i
            return str(v)
        return None

    def ex_MemberExpr(self, e: ir.MemberExpr) -> str:
        c = self._enum_or_error(e)
        if c is not None:
            return c
        base = e.expr
        bt = base_t(base.type)
        if isinstance(base, ir.CallExpr) and self.is_table_apply(base):
            act, hit = self.table_apply_call(base)
            if e.member == "hit":
                return hit
            if e.member == "miss":
                return f"(not {hit})"
            if e.member == "action_run":
                return act
            raise P4Unsupported(e.loc, f"table apply result member '{e.member}'")
        if isinstance(bt, T.Stack):
            b = self.ex(base)
            m = e.member
            if m == "size":
                return str(bt.size)
            if m == "nextIndex":
                return f"{b}.nextIndex"
            if m == "lastIndex":
                return f"(({b}.nextIndex - 1) & 0xffffffff)"
            if m == "last":
                return f"{self.sidx}({b}, {b}.nextIndex - 1)"
            if m == "next":
                return f"{self.sidx}({b}, {b}.nextIndex)"
            raise P4Unsupported(e.loc, f"header stack member '{m}'")
        if isinstance(bt, T.StructLike):
            return f"{self.ex(base)}.{fname(e.member)}"
        if e.member in ("minSizeInBits", "minSizeInBytes", "maxSizeInBits", "maxSizeInBytes"):
            st = base_t(bt.of if isinstance(bt, T.TypeOfType) else bt)
            assert isinstance(st, T.StructLike)
            bits = sum(scalar_width(f.type) if not isinstance(vb := base_t(f.type), T.Varbit) else
                       (0 if e.member.startswith("min") else vb.max_width)
                       for f in st.fields)
            return str(bits if e.member.endswith("Bits") else (bits + 7) // 8)
        raise P4Unsupported(e.loc, f"member '{e.member}' of {base.type}")

    def ex_IndexExpr(self, e: ir.IndexExpr) -> str:
        b = self.ex(e.expr)
        if isinstance(base_t(e.expr.type), T.Tuple):
            return f"{b}[{self.const(e.index)}]"
        if isinstance(e.index, ir.IntLit):
            stack_t = base_t(e.expr.type)
            assert isinstance(stack_t, T.Stack)
            size = stack_t.size
            if 0 <= e.index.value < size:
                return f"{b}.e[{e.index.value}]"
        return f"{self.sidx}({b}, {self.ex(e.index)})"

    def ex_SliceExpr(self, e: ir.SliceExpr) -> str:
        hi, lo = int(self.const(e.hi)), int(self.const(e.lo))
        x = self.ex(e.expr)
        m = mask_of(hi - lo + 1)
        if lo:
            return f"(({x} >> {lo}) & {m:#x})"
        return f"({x} & {m:#x})"

    def ex_UnaryExpr(self, e: ir.UnaryExpr) -> str:
        x = self.ex(e.expr)
        t = e.type
        if e.op == "!":
            return f"(not {x})"
        if e.op == "+":
            return x
        b = base_t(t)
        if e.op == "-":
            return wrap(f"-{x}", b) if isinstance(b, T.Bits) else f"(-{x})"
        if e.op == "~":
            if isinstance(b, T.Bits) and not b.signed:
                return f"(~{x} & {mask_of(b.width):#x})"
            return f"(~{x})"
        raise P4Unsupported(e.loc, f"unary operator {e.op}")

    def seq_pair(self, a: ir.Expr, b: ir.Expr) -> tuple[str, str]:
        """Evaluate two operands left to right, keeping the left value if the
        right one runs statements."""
        A = self.ex(a)
        with self.capture() as cb:
            B = self.ex(b)
        if cb and not is_simple_const(A):
            t = self.fresh("l")
            self.w(f"{t} = {A}")
            A = t
        self.splice(cb)
        return A, B

    def ex_BinaryExpr(self, e: ir.BinaryExpr) -> str:
        op = e.op
        if op in ("&&", "||"):
            A = self.ex(e.left)
            with self.capture() as cb:
                B = self.ex(e.right)
            if not cb:
                return f"({A} {'and' if op == '&&' else 'or'} {B})"
            t = self.fresh("c")
            self.w(f"{t} = {A}")
            self.w(f"if {'' if op == '&&' else 'not '}{t}:")
            self.splice(cb, 1)
            self.w(f"    {t} = {B}")
            return t
        if op in ("&&&", ".."):
            raise P4Unsupported(e.loc, f"'{op}' outside a keyset")
        A, B = self.seq_pair(e.left, e.right)
        lt = e.left.type
        rt_ = e.type
        b = base_t(rt_)
        if op in ("==", "!="):
            if is_composite(lt):
                c = f"{A}._eq({B})"
                return c if op == "==" else f"(not {c})"
            if isinstance(base_t(lt), T.Varbit):
                pass
            return f"({A} {op} {B})"
        if op in ("<", ">", "<=", ">="):
            return f"({A} {op} {B})"
        if op == "++":
            rw = scalar_width(e.right.type, e.loc)
            lu = unsigned(A, e.left.type)
            ru = unsigned(B, e.right.type)
            return from_unsigned(f"(({lu} << {rw}) | {ru})", rt_) if isinstance(b, T.Bits) and b.signed \
                else f"(({lu} << {rw}) | {ru})"
        if not isinstance(b, T.Bits):
            pyop = {"/": "//"}.get(op, op)
            if op in ("|+|", "|-|"):
                pyop = op[1]
            return f"({A} {pyop} {B})"
        W = b.width
        m = mask_of(W)
        if op in ("+", "-", "*"):
            return wrap(f"{A} {op} {B}", b)
        if op in ("&", "|", "^"):
            return f"({A} {op} {B})"
        if op in ("/", "%"):
            pyop = "//" if op == "/" else "%"
            if is_simple_const(B) and int(B, 0) != 0:
                return f"({A} {pyop} {B})"
            return f"(({A} {pyop} {B}) if {B} else 0)"
        if op == "<<":
            return f"({wrap(f'{A} << {B}', b)} if {B} < {W} else 0)" if not is_simple_const(B) \
                else (wrap(f"{A} << {B}", b) if int(B, 0) < W else "0")
        if op == ">>":
            if b.signed:
                return f"({A} >> {B})"
            return f"({A} >> {B})"
        if op == "|+|":
            if b.signed:
                h = 1 << (W - 1)
                return f"max({-h}, min({h - 1}, {A} + {B}))"
            return f"min({m:#x}, {A} + {B})"
        if op == "|-|":
            if b.signed:
                h = 1 << (W - 1)
                return f"max({-h}, min({h - 1}, {A} - {B}))"
            return f"max(0, {A} - {B})"
        raise P4Unsupported(e.loc, f"binary operator {op}")

    def ex_TernaryExpr(self, e: ir.TernaryExpr) -> str:
        C = self.ex(e.cond)
        with self.capture() as c1:
            A = self.ex_val(e.then)
        with self.capture() as c2:
            B = self.ex_val(e.else_)
        if not c1 and not c2:
            return f"({A} if {C} else {B})"
        t = self.fresh("m")
        self.w(f"if {C}:")
        self.splice(c1, 1)
        self.w(f"    {t} = {A}")
        self.w("else:")
        self.splice(c2, 1)
        self.w(f"    {t} = {B}")
        return t

    def ex_CastExpr(self, e: ir.CastExpr) -> str:
        x = self.ex(e.expr)
        to = e.to.resolved if e.to is not None and e.to.resolved is not None else e.type
        return self.cast(x, e.expr.type, to, e.loc)

    def cast(self, x: str, frm: T.P4Type, to: T.P4Type, loc: Location) -> str:
        f = base_t(frm)
        t = base_t(to)
        if isinstance(t, T.Bits):
            if isinstance(f, T.Bool):
                return f"(1 if {x} else 0)"
            if isinstance(f, T.Bits):
                if f.signed == t.signed and f.width == t.width:
                    return x
                if not f.signed and not t.signed and f.width <= t.width:
                    return x
                if not f.signed and t.signed and f.width < t.width:
                    return x
                if f.signed and t.signed and f.width <= t.width:
                    return x
                return wrap(x, t)
            return wrap(x, t)
        if isinstance(t, T.Bool):
            if isinstance(f, T.Bool):
                return x
            return f"({x} != 0)"
        if isinstance(t, T.InfInt):
            return x
        return x

    def ex_ListExpr(self, e: ir.ListExpr) -> str:
        t = base_t(e.type)
        if isinstance(t, T.StructLike):
            vals = self.seq_values(e.elems, [f.type for f in t.fields])
            return f"{self.class_of(t, e.loc)}._mk({', '.join(vals)})"
        vals = self.seq_values(e.elems, None)
        return "(" + "".join(v + ", " for v in vals) + ")"

    def ex_StructExpr(self, e: ir.StructExpr) -> str:
        t = base_t(e.type)
        if not isinstance(t, T.StructLike):
            raise P4Unsupported(e.loc, f"structure expression of type {e.type}")
        by = dict(e.fields)
        exprs = []
        for f in t.fields:
            if f.name not in by:
                raise P4Error(e.loc, f"structure expression lacks field '{f.name}'")
            exprs.append(by[f.name])
        vals = self.seq_values(exprs, [f.type for f in t.fields])
        return f"{self.class_of(t, e.loc)}._mk({', '.join(vals)})"

    def seq_values(self, exprs: list[ir.Expr], types: list[T.P4Type] | None) -> list[str]:
        vals: list[str] = []
        for i, x in enumerate(exprs):
            with self.capture() as c:
                v = self.ex(x)
            if types is not None and isinstance(base_t(types[i]), T.Bits) \
                    and isinstance(base_t(x.type), T.Bool):
                v = f"(1 if {v} else 0)"
            if c:
                for j in range(len(vals)):
                    if not is_simple_const(vals[j]):
                        tmp = self.fresh("a")
                        self.w(f"{tmp} = {vals[j]}")
                        vals[j] = tmp
            self.splice(c)
            vals.append(v)
        return vals

    def ex_CallExpr(self, e: ir.CallExpr) -> str:
        r = self.call(e, want=True)
        if r is None:
            raise P4Unsupported(e.loc, "a call without a value used as an expression")
        return r

    # ======================================================================
    # Lvalues and assignment

    def lv(self, e: ir.Expr) -> str:
        if isinstance(e, ir.PathExpr):
            d = e.decl
            if d is not None and id(d) in self.env:
                return self.env[id(d)]
            raise P4Unsupported(e.loc, f"assignment to '{e.name}'")
        if isinstance(e, ir.MemberExpr):
            bt = base_t(e.expr.type)
            if isinstance(bt, T.Stack):
                b = self.lv(e.expr)
                if e.member == "next":
                    return f"{self.sidx}({b}, {b}.nextIndex)"
                if e.member == "last":
                    return f"{self.sidx}({b}, {b}.nextIndex - 1)"
                raise P4Unsupported(e.loc, f"assignment to stack member '{e.member}'")
            return f"{self.lv(e.expr)}.{fname(e.member)}"
        if isinstance(e, ir.IndexExpr):
            b = self.lv(e.expr)
            if isinstance(base_t(e.expr.type), T.Tuple):
                return f"{b}[{self.const(e.index)}]"
            if (isinstance(e.index, ir.IntLit) and isinstance(stack_t := base_t(e.expr.type), T.Stack)
                    and 0 <= e.index.value < stack_t.size):
                return f"{b}.e[{e.index.value}]"
            ix = self.ex(e.index)
            if not is_simple_name(ix):
                t = self.fresh("ix")
                self.w(f"{t} = {ix}")
                ix = t
            return f"{self.sidx}({b}, {ix})"
        raise P4Unsupported(e.loc, f"assignment to a {type(e).__name__}")

    def assign(self, lhs: ir.Expr, val: str, vt: T.P4Type, loc: Location, L: str | None = None) -> None:
        """``lhs = val`` where ``val`` is Python code of a value of type ``vt``."""
        if isinstance(lhs, ir.DontCareExpr):
            return
        if isinstance(lhs, ir.SliceExpr):
            base, hi, lo = lhs.expr, int(self.const(lhs.hi)), int(self.const(lhs.lo))
            while isinstance(base, ir.SliceExpr):
                blo = int(self.const(base.lo))
                hi, lo = hi + blo, lo + blo
                base = base.expr
            L = self.lv(base)
            bt = base.type
            m = mask_of(hi - lo + 1)
            W = scalar_width(bt, loc)
            keep = mask_of(W) & ~(m << lo)
            new = f"(({unsigned(L, bt)} & {keep:#x}) | ((({val}) & {m:#x}) << {lo}))"
            self.w(f"{L} = {from_unsigned(new, bt)}")
            return
        if L is None:
            L = self.lv(lhs)
        lt = lhs.type
        if is_composite(lt):
            self.w(f"{L}._set({val})")
            self.union_fixup(lhs, L)
            return
        if isinstance(base_t(lt), T.Bits) and isinstance(base_t(vt), T.Bool):
            val = f"(1 if {val} else 0)"
        self.w(f"{L} = {val}")

    def union_fixup(self, lhs: ir.Expr, L: str) -> None:
        """A header that became valid inside a union invalidates its siblings."""
        if isinstance(lhs, ir.MemberExpr) and isinstance(u := base_t(lhs.expr.type), T.HeaderUnion):
            others = [f.name for f in u.fields if f.name != lhs.member]
            if others:
                ub = L.rsplit(".", 1)[0]
                self.w(f"if {L}._valid:")
                for o in others:
                    self.w(f"    {ub}.{fname(o)}._valid = False")

