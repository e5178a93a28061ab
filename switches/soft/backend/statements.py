"""Statements, calls, and inlining of actions, functions and nested blocks."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from ..frontend import ir
from ..frontend.source import Location, P4Error, P4Unsupported
from ..midend import types as T
from .common import (
    base_t,
    contains_return,
    expr_text,
    from_unsigned,
    is_composite,
    is_simple_name,
    walk,
)
from .expressions import ExpressionGen


class StatementGen(ExpressionGen):
    """Statements and calls; actions, functions and nested blocks are inlined."""

    # ======================================================================
    # Statements

    def stmt(self, s: ir.Stmt) -> None:
        m = getattr(self, "st_" + type(s).__name__, None)
        if m is None:
            raise P4Unsupported(s.loc, f"statement {type(s).__name__}")
        m(s)

    def stmts(self, ss: list[ir.Stmt]) -> None:
        for s in ss:
            self.stmt(s)

    def st_BlockStmt(self, s: ir.BlockStmt) -> None:
        self.stmts(s.stmts)

    def st_EmptyStmt(self, s: ir.EmptyStmt) -> None:
        pass

    def st_AssignStmt(self, s: ir.AssignStmt) -> None:
        self.comment(s)
        L = None
        if not isinstance(s.lhs, ir.SliceExpr) and any(isinstance(n, ir.CallExpr) for n in walk(s.lhs)):
            # the left side is evaluated first (its index may have side effects),
            # and only once for ``a op= b``
            L = self.lv(s.lhs)
            r = s.rhs
            while isinstance(r, ir.CastExpr):
                r = r.expr
            if isinstance(r, ir.BinaryExpr):
                left = r.left
                while isinstance(left, ir.CastExpr):
                    left = left.expr
                if expr_text(left) == expr_text(s.lhs):
                    self.override[id(left)] = L
        v = self.ex_val(s.rhs) if is_composite(s.lhs.type) else self.ex(s.rhs)
        self.assign(s.lhs, v, s.rhs.type, s.loc, L)

    def st_CallStmt(self, s: ir.CallStmt) -> None:
        if not self.is_table_apply(s.call):
            self.comment(s)
        self.call(s.call, want=False)

    def st_VarDecl(self, s: ir.VarDecl) -> None:
        t = s.type.resolved
        name = self.fresh(s.name)
        if s.init is not None:
            v = self.ex_val(s.init)
            if isinstance(base_t(t), T.Bits) and isinstance(base_t(s.init.type), T.Bool):
                v = f"(1 if {v} else 0)"
            self.w(f"{name} = {v}")
        else:
            self.w(f"{name} = {self.default(t, s.loc)}")
        self.env[id(s)] = name

    def st_ConstDecl(self, s: ir.ConstDecl) -> None:
        name = self.fresh(s.name)
        self.w(f"{name} = {self.ex(s.value)}")
        self.env[id(s)] = name

    def st_IfStmt(self, s: ir.IfStmt) -> None:
        self.comment(s, "if")
        c = self.ex(s.cond)
        self.w(f"if {c}:")
        with self.indent():
            self.stmt(s.then)
        e = s.else_
        while e is not None:
            if isinstance(e, ir.IfStmt):
                with self.capture() as cc:
                    c2 = self.ex(e.cond)
                if not cc:
                    self.w(f"elif {c2}:")
                    with self.indent():
                        self.stmt(e.then)
                    e = e.else_
                    continue
            self.w("else:")
            with self.indent():
                self.stmt(e)
            break

    @contextmanager
    def loop(self) -> Iterator[None]:
        """A P4 loop: a ``return`` inside it must also leave the return wrapper."""
        fr = self.ret[-1] if self.ret else None
        if fr is not None and fr[1] == "break" and fr[3] == 0:
            self.w(f"{fr[2]} = False")
        if fr is not None:
            fr[3] += 1
        try:
            yield
        finally:
            if fr is not None:
                fr[3] -= 1
                if fr[1] == "break":
                    self.w(f"if {fr[2]}:")
                    self.w("    break")

    def st_ForStmt(self, s: ir.ForStmt) -> None:
        self.comment(s, "for")
        saved = dict(self.env)
        self.stmts(s.init)
        first = self.fresh("first")
        self.w(f"{first} = True")
        with self.loop():
            self.w("while True:")
            with self.indent():
                if s.update:
                    self.w(f"if not {first}:")
                    with self.indent():
                        self.stmts(s.update)
                self.w(f"{first} = False")
                if s.cond is not None:
                    c = self.ex(s.cond)
                    self.w(f"if not {c}:")
                    self.w("    break")
                self.stmt(s.body)
        self.env = saved

    def st_ForInStmt(self, s: ir.ForInStmt) -> None:
        self.comment(s, "for")
        saved = dict(self.env)
        d = s.decl
        if isinstance(d, ir.VarDecl) and id(d) not in self.env:
            self.st_VarDecl(d)
        var = self.env.get(id(d)) if d is not None else None
        if var is None:
            raise P4Unsupported(s.loc, "for-in loop variable")
        c = s.collection
        ct = base_t(c.type)
        if isinstance(c, ir.BinaryExpr) and c.op == "..":
            lo, hi = self.seq_pair(c.left, c.right)
            it = f"range({lo}, ({hi}) + 1)"
        elif isinstance(ct, T.Stack):
            it = f"{self.ex(c)}.e"
        elif isinstance(c, ir.ListExpr):
            it = "(" + "".join(self.ex(x) + ", " for x in c.elems) + ")"
        else:
            it = self.ex(c)
        with self.loop():
            self.w(f"for {var} in {it}:")
            with self.indent():
                self.stmt(s.body)
        self.env = saved

    def st_BreakStmt(self, s: ir.BreakStmt) -> None:
        self.w("break")

    def st_ContinueStmt(self, s: ir.ContinueStmt) -> None:
        self.w("continue")

    def st_ExitStmt(self, s: ir.ExitStmt) -> None:
        self.w("raise EXIT")

    def st_ReturnStmt(self, s: ir.ReturnStmt) -> None:
        if not self.ret:
            raise P4Unsupported(s.loc, "return here")
        var, mode, flag, depth = self.ret[-1]
        if s.value is not None and var is not None:
            self.w(f"{var} = {self.ex_val(s.value)}")
        if mode == "break" and depth:
            self.w(f"{flag} = True")
        self.w("return" if mode == "return" else "break")

    def st_SwitchStmt(self, s: ir.SwitchStmt) -> None:
        self.comment(s, "switch")
        x = self.ex(s.expr)
        if not is_simple_name(x):
            t = self.fresh("sw")
            self.w(f"{t} = {x}")
            x = t
        is_action = isinstance(s.expr.type, T.ActionEnum) or (
            isinstance(s.expr, ir.MemberExpr) and s.expr.member == "action_run")
        pending: list[str] = []
        first = True
        default_body: ir.BlockStmt | None = None
        for c in s.cases:
            if isinstance(c.label, ir.DefaultExpr):
                if c.body is None:
                    continue
                default_body = c.body
                pending = []
                continue
            if is_action:
                d = getattr(c.label, "decl", None)
                if isinstance(d, ir.ActionDecl):
                    lab = repr(self.action_name(d))
                else:
                    lab = repr(self._action_label(c.label))
            else:
                lab = self.ex(c.label)
            pending.append(lab)
            if c.body is None:
                continue
            cond = " or ".join(f"{x} == {p}" for p in pending)
            self.w(f"{'if' if first else 'elif'} {cond}:")
            first = False
            with self.indent():
                self.stmt(c.body)
            pending = []
        if default_body is not None:
            if first:
                self.stmt(default_body)
            else:
                self.w("else:")
                with self.indent():
                    self.stmt(default_body)

    def _action_label(self, e: ir.Expr) -> str:
        if isinstance(e, ir.PathExpr):
            d = self.decl_by_name.get(e.name)
            if isinstance(d, ir.ActionDecl):
                return self.action_name(d)
            return f"{self.prefix}.{e.name}" if self.prefix else e.name
        raise P4Unsupported(e.loc, "switch label")

    # ======================================================================
    # Calls

    def is_table_apply(self, ce: ir.CallExpr) -> bool:
        f = ce.func
        return (isinstance(f, ir.MemberExpr) and f.member == "apply" and
                (isinstance(base_t(f.expr.type), T.TableType) or
                 isinstance(getattr(f.expr, "decl", None), ir.TableDecl)))

    def call(self, ce: ir.CallExpr, want: bool) -> str | None:
        f = ce.func
        args = [a.value for a in ce.args]
        if isinstance(f, ir.MemberExpr):
            base = f.expr
            m = f.member
            bt = base_t(base.type)
            if self.is_table_apply(ce):
                act, hit = self.table_apply_call(ce)
                return hit
            if isinstance(bt, (T.Header, T.HeaderUnion)) and m in ("isValid", "setValid", "setInvalid"):
                return self.header_method(base, bt, m, ce.loc)
            if isinstance(bt, T.Stack) and m in ("push_front", "pop_front"):
                n = self.ex(args[0])
                self.w(f"{self.lv(base)}.{m}({n})")
                return None
            if m == "apply":
                d = getattr(base, "decl", None)
                if isinstance(d, ir.InstantiationDecl):
                    return self.apply_instance(d, ce)
                if isinstance(d, ir.Param) and id(d) in self.inst_alias:
                    inst, pfx = self.inst_alias[id(d)]
                    return self.apply_instance(inst, ce, pfx)
                if isinstance(d, (ir.ControlDecl, ir.ParserDecl)):
                    return self.apply_instance(self.anon_instance(d, d.name), ce)
                raise P4Unsupported(ce.loc, f"apply of {base.type}")
            if isinstance(bt, T.Extern) and bt.name == "packet_in":
                return self.packet_in_method(m, ce)
            if isinstance(bt, T.Extern) and bt.name == "packet_out":
                self.packet_out_method(base, m, ce)
                return None
            if isinstance(bt, T.Extern):
                return self.extern_method(base, bt, m, ce, want)
            raise P4Unsupported(ce.loc, f"method '{m}' of {base.type}")
        if isinstance(f, ir.PathExpr):
            d = f.decl
            if isinstance(d, ir.ActionDecl):
                self.inline_action(d, ce.args, None, ce.loc)
                return None
            if isinstance(d, ir.FunctionDecl):
                return self.inline_function(d, ce)
            if isinstance(d, (ir.ExternFunctionDecl, ir.MethodDecl)) or d is None or isinstance(d, list):
                if f.name == "verify":
                    self.verify_call(ce)
                    return None
                return self.extern_function(f.name, ce, want)
        raise P4Unsupported(ce.loc, f"call of {type(f).__name__}")

    def header_method(self, base: ir.Expr, bt: T.Header | T.HeaderUnion, m: str, loc: Location
                      ) -> str | None:
        if m == "isValid":
            b = self.ex(base)
            if isinstance(bt, T.HeaderUnion):
                return f"{b}.isValid()"
            return f"{b}._valid"
        b = self.lv(base)
        if isinstance(bt, T.HeaderUnion):
            raise P4Unsupported(loc, f"{m}() on a header union")
        # p4c compiles these to add_header/remove_header; as BMv2's primitives
        # (targets/simple_switch/primitives.cpp), a header that becomes valid
        # is zeroed, and the packet length register follows (egress reads it)
        path = b
        if not is_simple_name(b):
            b = self.fresh("h")
            self.w(f"{b} = {path}")
        nbytes = self.header_bytes(bt, b)
        if m == "setValid":
            self.w(f"if not {b}._valid:")
            self.w(f"    {b}._add()")
            self.w(f"    st.length_change += {nbytes}")
            self.union_fixup(base, path)
        else:
            self.w(f"if {b}._valid:")
            self.w(f"    st.length_change -= {nbytes}")
            self.w(f"    {b}._valid = False")
        return None

    # -- inlining of actions / functions / controls -------------------------

    def bind_params(self, params: list[ir.Param], args: list[ir.Expr | None],
                    loc: Location, callee: ir.ControlDecl | None = None
                    ) -> list[tuple[ir.Expr, str, T.P4Type]]:
        """Copy-in: evaluate arguments left to right into fresh locals bound to
        the parameters. Returns the copy-out list (lvalue, local, type).
        ``callee``: a control being applied, whose header and struct
        arguments are passed by reference where no copy can be told apart
        (by_reference)."""
        outs: list[tuple[ir.Expr, str, T.P4Type]] = []
        binds: list[tuple[int, str]] = []
        by_ref = by_reference(callee, params, args) if callee is not None else set()
        for i, (p, a) in enumerate(zip(params, args, strict=False)):
            t = p.type.resolved
            bt = base_t(t)
            if isinstance(bt, T.Extern) or (a is not None and isinstance(base_t(a.type), T.Extern)):
                binds.append((id(p), self.ex(a) if a is not None else "None"))
                continue
            name = self.fresh(p.name)
            if i in by_ref and a is not None:
                self.w(f"{name} = {self.ex(a)}  # by reference")
                binds.append((id(p), name))
                continue
            if p.direction == "out":
                self.w(f"{name} = {self.default(t, loc)}")
            elif a is None:
                if p.default is not None:
                    self.w(f"{name} = {self.ex_val(p.default)}")
                else:
                    self.w(f"{name} = {self.default(t, loc)}")
            else:
                v = self.ex_val(a) if is_composite(t) else self.ex(a)
                if isinstance(bt, T.Bits) and isinstance(base_t(a.type), T.Bool):
                    v = f"(1 if {v} else 0)"
                self.w(f"{name} = {v}")
            if p.direction in ("out", "inout") and a is not None and not isinstance(a, ir.DontCareExpr):
                outs.append((a, name, t))
            binds.append((id(p), name))
        for k, v in binds:
            self.env[k] = v
        return outs

    def copy_out(self, outs: list[tuple[ir.Expr, str, T.P4Type]], loc: Location) -> None:
        for a, name, t in outs:
            self.assign(a, name, t, loc)

    def inline_body(self, body: ir.BlockStmt, outs: list[tuple[ir.Expr, str, T.P4Type]],
                    ret_var: str | None, loc: Location, pre: list[ir.Decl] | None = None) -> None:
        wrapped = contains_return(body)
        guard = bool(outs)
        if guard:
            self.w("try:")
            self.ind += 1
        n0 = len(self.buf)
        if pre:
            self.locals_init(pre)
        if wrapped:
            self.w("while True:")
            self.ind += 1
            self.ret.append([ret_var, "break", self.fresh("ret"), 0])
            self.stmt(body)
            self.w("break")
            self.ret.pop()
            self.ind -= 1
        else:
            self.stmt(body)
        if not self.code_since(n0):
            self.w("pass")
        if guard:
            self.ind -= 1
            self.w("finally:")
            with self.indent():
                self.copy_out(outs, loc)

    def inline_action(self, d: ir.ActionDecl, args: list[ir.Argument], data: str | None,
                      loc: Location, bound: list[ir.Argument] | None = None) -> None:
        """Inline action ``d``: directional params from ``args`` (or ``bound``),
        directionless ones from ``args`` or from table data ``data``."""
        saved = dict(self.env)
        self.w(f"# action {self.action_name(d)}")
        if data is None:
            argv = self.ordered_args(d.params, args)
            outs = self.bind_params(d.params, argv, loc)
        else:
            dir_params = [p for p in d.params if p.direction]
            dl_params = [p for p in d.params if not p.direction]
            argv = self.ordered_args(dir_params, bound or [])
            outs = self.bind_params(dir_params, argv, loc)
            for i, p in enumerate(dl_params):
                name = self.fresh(p.name)
                self.w(f"{name} = {from_unsigned(f'{data}[{i}]', p.type.resolved)}")
                self.env[id(p)] = name
        self.inline_body(d.body, outs, None, loc)
        self.env = saved

    def ordered_args(self, params: list[ir.Param], args: list[ir.Argument]) -> list[ir.Expr | None]:
        """Arguments in parameter order (named arguments allowed)."""
        out: list[ir.Expr | None] = [None] * len(params)
        pos = 0
        for a in args:
            if a.name is not None:
                for i, p in enumerate(params):
                    if p.name == a.name:
                        out[i] = a.value
                        break
            else:
                if pos < len(out):
                    out[pos] = a.value
                pos += 1
        return out

    def inline_function(self, d: ir.FunctionDecl, ce: ir.CallExpr) -> str | None:
        saved = dict(self.env)
        self.w(f"# function {d.name}")
        outs = self.bind_params(d.params, self.ordered_args(d.params, ce.args), ce.loc)
        rt_ = d.return_type.resolved if d.return_type is not None else None
        ret_var = None
        if rt_ is not None and not isinstance(rt_, T.Void):
            ret_var = self.fresh(f"r_{d.name}")
            self.w(f"{ret_var} = {self.default(rt_, ce.loc)}")
        self.inline_body(d.body, outs, ret_var, ce.loc)
        self.env = saved
        return ret_var

    def block_decl_of(self, inst: ir.InstantiationDecl) -> Any:
        r = inst.type.resolved
        d = getattr(r, "decl", None)
        if isinstance(d, (ir.ControlDecl, ir.ParserDecl)):
            return d
        tn = inst.type.base if isinstance(inst.type, ir.TypeSpecialized) else inst.type
        d = self.decl_by_name.get(getattr(tn, "name", ""))
        return d

    def anon_instance(self, d: Any, name: str) -> ir.InstantiationDecl:
        """The implicit instance of ``Ctrl.apply()`` / a ``Ctrl()`` argument."""
        key = (id(d), name)
        inst = self.anon.get(key)
        if inst is None:
            inst = ir.InstantiationDecl(loc=d.loc, name=name, type=ir.TypeName(loc=d.loc, name=d.name))
            inst.type.resolved = T.Block("control" if isinstance(d, ir.ControlDecl) else "parser",
                                         d.name, d)
            self.anon[key] = inst
        return inst

    def apply_instance(self, inst: ir.InstantiationDecl, ce: ir.CallExpr,
                       decl_prefix: str | None = None) -> str | None:
        d = self.block_decl_of(inst)
        if isinstance(d, ir.ControlDecl):
            saved_env = dict(self.env)
            saved_prefix = self.prefix
            saved_ret = self.ret
            prefix = self.cp_name(inst, decl_prefix)
            self.w(f"# control {prefix} ({d.name})")
            outs = self.bind_params(d.params, self.ordered_args(d.params, ce.args), ce.loc,
                                    callee=d)
            self.bind_ctor(d, inst)
            self.prefix = prefix
            self.ret = []
            self.register_locals(d.locals)
            self.inline_body(d.body, outs, None, ce.loc, pre=d.locals)
            self.prefix = saved_prefix
            self.ret = saved_ret
            self.env = saved_env
            return None
        if isinstance(d, ir.ParserDecl):
            if self.pkt is None:
                raise P4Unsupported(ce.loc, "a parser applied outside a parser")
            saved_env = dict(self.env)
            saved_prefix = self.prefix
            prefix = self.cp_name(inst, decl_prefix)
            self.w(f"# parser {prefix} ({d.name})")
            outs = self.bind_params(d.params, self.ordered_args(d.params, ce.args), ce.loc)
            self.bind_ctor(d, inst)
            self.prefix = prefix
            if outs:
                self.w("try:")
                self.ind += 1
            self.register_locals(d.locals)
            self.locals_init(d.locals)
            self.state_machine(d)
            if outs:
                self.ind -= 1
                self.w("finally:")
                with self.indent():
                    self.copy_out(outs, ce.loc)
            self.prefix = saved_prefix
            self.env = saved_env
            return None
        raise P4Unsupported(ce.loc, f"apply of instance '{inst.name}'")

    def bind_ctor(self, d: Any, inst: ir.InstantiationDecl) -> None:
        argv = self.ordered_args(d.ctor_params, inst.args)
        for p, a in zip(d.ctor_params, argv, strict=False):
            if a is None:
                if p.default is None:
                    raise P4Error(inst.loc, f"missing constructor argument '{p.name}'")
                a = p.default
            if isinstance(a, ir.PathExpr) and isinstance(a.decl, ir.InstantiationDecl):
                if isinstance(self.block_decl_of(a.decl), (ir.ControlDecl, ir.ParserDecl)):
                    self.inst_alias[id(p)] = (a.decl, self.prefix)
                else:
                    self.env[id(p)] = self.bind_instance(a.decl)
                continue
            if isinstance(a, ir.PathExpr) and isinstance(a.decl, ir.Param) and id(a.decl) in self.inst_alias:
                self.inst_alias[id(p)] = self.inst_alias[id(a.decl)]
                continue
            fdecl = getattr(a.func, "decl", None) if isinstance(a, ir.CallExpr) else None
            if isinstance(a, ir.CallExpr) and isinstance(fdecl, (ir.ControlDecl, ir.ParserDecl)):
                sub = self.anon_instance(fdecl, p.name)
                sub.args = a.args
                self.inst_alias[id(p)] = (sub, f"{self.prefix}.{inst.name}" if self.prefix else inst.name)
                continue
            if isinstance(a, ir.CallExpr) or isinstance(base_t(a.type), (T.Extern, T.Block)):
                raise P4Unsupported(inst.loc, "constructor arguments that are objects")
            self.env[id(p)] = "(" + self.ex(a) + ")"

    def register_locals(self, locals_: list[ir.Decl]) -> None:
        """Tables and extern instances of the current control instance."""
        for d in locals_:
            if isinstance(d, ir.ActionDecl):
                self.action_prefix[id(d)] = self.prefix
        for d in locals_:
            if isinstance(d, ir.InstantiationDecl):
                bd = self.block_decl_of(d)
                if not isinstance(bd, (ir.ControlDecl, ir.ParserDecl)):
                    self.env[id(d)] = self.bind_instance(d)
            elif isinstance(d, ir.TableDecl):
                self.register_table(d)

    def locals_init(self, locals_: list[ir.Decl]) -> None:
        for d in locals_:
            if isinstance(d, ir.VarDecl):
                self.st_VarDecl(d)
            elif isinstance(d, ir.ConstDecl):
                self.env[id(d)] = "(" + self.ex(d.value) + ")"
            elif isinstance(d, ir.ValueSetDecl):
                self.env[id(d)] = self.bind_value_set(d)

    def bind_value_set(self, d: ir.ValueSetDecl) -> str:
        name = self.cp_name(d)
        key = ("value_set", name)
        v = self.bound.get(key)
        if v is None:
            v = self.fresh(f"vs_{d.name}")
            self.bindings.append(
                f"{v} = rt.value_set({name!r}) if hasattr(rt, 'value_set') else frozenset()")
            self.bound[key] = v
        return v



# Methods of a header that only read it.
_READING_METHODS = frozenset({"isValid", "minSizeInBits", "minSizeInBytes", "maxSizeInBits",
                              "maxSizeInBytes"})


def _stable_path(e: ir.Expr) -> Any | None:
    """The declaration at the root of ``e`` if ``e`` names the same object
    whenever it is evaluated (``x``, ``x.f.g``: no index, no ``.next``)."""
    while isinstance(e, ir.MemberExpr) and e.member not in ("next", "last"):
        e = e.expr
    return e.decl if isinstance(e, ir.PathExpr) and e.decl is not None else None


def _root(e: ir.Expr) -> Any | None:
    while isinstance(e, (ir.MemberExpr, ir.IndexExpr, ir.SliceExpr)):
        e = e.expr
    return e.decl if isinstance(e, ir.PathExpr) else None


def _only_read(p: ir.Param, callee: ir.ControlDecl) -> bool:
    """True if nothing in ``callee`` can write ``p``: it is never assigned to
    and never handed to a call (an argument, or a method other than a
    reading one). The checker refuses an assignment to an ``in`` parameter
    but lets a method call such as ``setInvalid()`` on one pass, so every
    call that reaches it counts as a write."""
    for n in walk([callee.body, callee.locals]):
        if isinstance(n, ir.AssignStmt) and _root(n.lhs) is p:
            return False
        if isinstance(n, ir.CallExpr):
            f = n.func
            if (isinstance(f, ir.MemberExpr) and f.member not in _READING_METHODS
                    and _root(f.expr) is p):
                return False
            if any(a.value is not None and _root(a.value) is p for a in n.args):
                return False
    return True


def by_reference(callee: ir.ControlDecl, params: list[ir.Param],
                 args: list[ir.Expr | None]) -> set[int]:
    """The positions of a control's arguments that can be passed by reference
    instead of copied in (and out): copy-in/copy-out (P4_16 6.8) cannot be told
    apart from a reference when the argument is a header or struct that the
    call reaches by no other name. A control is declared at the top level, so
    it sees its caller only through its parameters; the argument must share
    its root with no other argument, be a stable path, and be ``inout`` (its
    copy would be copied back at every exit anyway) or an ``in`` that the
    control only reads. Saves copying every header per packet per call."""
    roots = [_root(a) if a is not None else None for a in args]
    out: set[int] = set()
    for i, (p, a) in enumerate(zip(params, args, strict=False)):
        if a is None or p.direction not in ("in", "inout") or not is_composite(p.type.resolved):
            continue
        root = _stable_path(a)
        if root is None or sum(r is root for r in roots) > 1:
            continue
        if p.direction == "inout" or _only_read(p, callee):
            out.add(i)
    return out
