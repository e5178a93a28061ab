"""Expressions: name and member resolution, typing and inference, implicit
conversions and casts, constant folding, lvalues, calls and argument
matching (generic type variables included)."""

from __future__ import annotations

from ...frontend import ir
from ...frontend.source import Location, P4Error, P4Unsupported
from .. import consteval as CE
from .. import types as T
from .base import CheckBase
from .common import (
    MAX_WIDTH,
    SIZE_METHODS,
    TYPE_DECLS,
    Scope,
    Sig,
    SigParam,
    TypeVar,
    clone_literal,
    contains_infint,
    free_vars,
    header_like,
    is_type_decl,
    show,
    size_in_bits,
    start,
    subst,
    type_eq,
    type_ref,
)


class ExpressionChecker(CheckBase):
    """Expressions: typing, implicit conversions, casts, lvalues, calls."""

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

    def condition(self, e: ir.Expr, s: Scope, what: str) -> ir.Expr:
        e = self.expr(e, s, T.Bool())
        if not isinstance(e.type, T.Bool):
            raise P4Error(start(e), f"condition of {what} must be bool, not {e.type}")
        return e

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
            assert t.decl is not None  # a block type with a signature has its declaration
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

    def expr(self, e: ir.Expr, s: Scope, expected: T.P4Type | None) -> ir.Expr:
        m = getattr(self, "e_" + type(e).__name__, None)
        if m is None:
            raise P4Unsupported(e.loc, f"expression {type(e).__name__}")
        r = m(e, s, expected)
        assert r.type is not None, e
        return r

    def e_IntLit(self, e: ir.IntLit, s: Scope, exp: T.P4Type | None) -> ir.Expr:
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

    def e_BoolLit(self, e: ir.BoolLit, s: Scope, exp: T.P4Type | None) -> ir.Expr:
        e.type = T.Bool()
        return e

    def e_StringLit(self, e: ir.StringLit, s: Scope, exp: T.P4Type | None) -> ir.Expr:
        e.type = T.String()
        return e

    def e_DefaultExpr(self, e: ir.DefaultExpr, s: Scope, exp: T.P4Type | None) -> ir.Expr:
        e.type = T.DontCare()
        return e

    def e_DontCareExpr(self, e: ir.DontCareExpr, s: Scope, exp: T.P4Type | None) -> ir.Expr:
        e.type = exp if exp is not None else T.DontCare()
        return e

    def e_PathExpr(self, e: ir.PathExpr, s: Scope, exp: T.P4Type | None) -> ir.Expr:
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

    def e_MemberExpr(self, e: ir.MemberExpr, s: Scope, exp: T.P4Type | None) -> ir.Expr:
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

    def e_IndexExpr(self, e: ir.IndexExpr, s: Scope, exp: T.P4Type | None) -> ir.Expr:
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

    def e_SliceExpr(self, e: ir.SliceExpr, s: Scope, exp: T.P4Type | None) -> ir.Expr:
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

    def e_UnaryExpr(self, e: ir.UnaryExpr, s: Scope, exp: T.P4Type | None) -> ir.Expr:
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

    def e_BinaryExpr(self, e: ir.BinaryExpr, s: Scope, exp: T.P4Type | None) -> ir.Expr:
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

    def e_TernaryExpr(self, e: ir.TernaryExpr, s: Scope, exp: T.P4Type | None) -> ir.Expr:
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

    def e_CastExpr(self, e: ir.CastExpr, s: Scope, exp: T.P4Type | None) -> ir.Expr:
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

    def e_ListExpr(self, e: ir.ListExpr, s: Scope, exp: T.P4Type | None) -> ir.Expr:
        hints: list[T.P4Type | None] = [None] * len(e.elems)
        if isinstance(exp, T.StructLike) and len(exp.fields) == len(e.elems):
            hints = [f.type for f in exp.fields]
        elif isinstance(exp, T.Tuple) and len(exp.elems) == len(e.elems):
            hints = list(exp.elems)
        e.elems = [self.expr(x, s, h) for x, h in zip(e.elems, hints, strict=False)]
        e.type = T.Tuple(tuple(x.type for x in e.elems))
        if exp is not None and isinstance(exp, (T.StructLike, T.Tuple)):
            return self.convert(e, exp, "in initializer")
        return e

    def e_StructExpr(self, e: ir.StructExpr, s: Scope, exp: T.P4Type | None) -> ir.Expr:
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

    def e_CallExpr(self, e: ir.CallExpr, s: Scope, exp: T.P4Type | None) -> ir.Expr:
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
