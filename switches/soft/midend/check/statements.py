"""Statements: blocks, assignments and calls, if/switch/for, where
return/exit/break may appear, and switch on a table's action_run."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from ...frontend import ir
from ...frontend.source import P4Error, P4Unsupported
from .. import types as T
from .common import (
    Ctx,
    Scope,
    show,
    start,
    type_eq,
)
from .expressions import ExpressionChecker


class StatementChecker(ExpressionChecker):
    """Statements: blocks, assignments, if/switch/for, return/exit placement."""

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
