"""Parser state machines, select keysets and packet_in."""

from __future__ import annotations

from ..frontend import ir
from ..frontend.source import P4Error, P4Unsupported
from ..midend import types as T
from .common import (
    ERR_NO_MATCH,
    ERR_PACKET_TOO_SHORT,
    base_t,
    is_simple_const,
    is_simple_name,
    scalar_width,
    unsigned,
)
from .statements import StatementGen


class ParserGen(StatementGen):
    """Parser state machines (straight-line where a state has one predecessor)."""

    def verify_call(self, ce: ir.CallExpr) -> None:
        """core.p4's ``verify(cond, err)``: a parser error when ``cond`` is false."""
        args = [a.value for a in ce.args]
        if self.pkt is None:
            raise P4Unsupported(ce.loc, "verify() outside a parser")
        c = self.ex(args[0])
        err = self.ex(args[1])
        self.w(f"if not {c}:")
        self.w(f"    raise ParserError({err})")

    # -- packet_in -----------------------------------------------------------

    def packet_in_method(self, m: str, ce: ir.CallExpr) -> str | None:
        if self.pkt is None:
            raise P4Unsupported(ce.loc, f"packet_in.{m} outside a parser")
        args = [a.value for a in ce.args]
        if m == "extract":
            self.extract(args[0], args[1] if len(args) > 1 else None, ce.loc)
            return None
        if m == "lookahead":
            t = ce.type_args[0].resolved if ce.type_args else ce.type
            return self.lookahead(t, ce.loc)
        if m == "advance":
            n = self.ex(args[0])
            self.w(f"off_n = off + (({n}) >> 3)")
            self.w("if off_n > len(pkt):")
            self.w(f"    raise ParserError({ERR_PACKET_TOO_SHORT})")
            self.w("off = off_n")
            return None
        if m == "length":
            return "len(pkt)"
        raise P4Unsupported(ce.loc, f"packet_in.{m}")

    # ======================================================================
    # Parsers

    def state_machine(self, d: ir.ParserDecl) -> None:
        states = {s.name: s for s in d.states}
        refs: dict[str, int] = {s.name: 0 for s in d.states}
        for s in d.states:
            tr = s.transition
            if isinstance(tr, ir.DirectTransition):
                targets = [tr.state]
            elif isinstance(tr, ir.SelectTransition):
                targets = [c.state for c in tr.cases]
            else:
                targets = []
            for t in targets:
                if t in refs:
                    refs[t] += 1
        if "start" not in states:
            raise P4Error(d.loc, f"parser {d.name} has no start state")
        ids = {n: i for i, n in enumerate(states)}
        sv = self.fresh("state")
        inline_ok = {n for n, c in refs.items() if c == 1 and n != "start"}
        looped = [n for n in states if n not in inline_ok]
        self.w(f"{sv} = {ids['start']}")
        self.w("while True:")
        with self.indent():
            first = True
            for n in looped:
                self.w(f"{'if' if first else 'elif'} {sv} == {ids[n]}:")
                first = False
                with self.indent():
                    self.gen_state(states[n], states, ids, sv, inline_ok, set())
            if not first:
                self.w("else:")
                self.w("    break")

    def gen_state(self, s: ir.ParserState, states: dict[str, ir.ParserState],
                  ids: dict[str, int], sv: str, inline_ok: set[str], active: set[str]) -> None:
        self.w(f"# state {s.name} ({s.loc.file.rsplit('/', 1)[-1]}:{s.loc.line})")
        self.trace_line(repr(f"Parser '{self.trace_parser}' entering state '{s.name}'"))
        active = active | {s.name}
        saved = dict(self.env)
        self.stmts(s.stmts)

        def goto(target: str) -> None:
            if target == "accept":
                self.w("break")
            elif target == "reject":
                self.w("raise ParserError(st.sm.parser_error or 0)" if False else "raise ParserError(None)")
            elif target in inline_ok and target not in active:
                self.gen_state(states[target], states, ids, sv, inline_ok, active)
            else:
                if target not in ids:
                    raise P4Error(s.loc, f"unknown state '{target}'")
                self.w(f"{sv} = {ids[target]}")
                self.w("continue")

        tr = s.transition
        if tr is None:
            goto("reject")
        elif isinstance(tr, ir.DirectTransition):
            goto(tr.state)
        elif isinstance(tr, ir.SelectTransition):
            keys = self.seq_values(tr.exprs, None)
            kt = [x.type for x in tr.exprs]
            kv = []
            for code, _t in zip(keys, kt, strict=False):
                if is_simple_name(code) or is_simple_const(code):
                    kv.append(code)
                else:
                    tmp = self.fresh("k")
                    self.w(f"{tmp} = {code}")
                    kv.append(tmp)
            if self.trace:
                # BMv2: the key's bytes in hex
                parts = " + ".join(
                    f"format({unsigned(k, t)}, '0{(scalar_width(t, s.loc) + 7) // 8 * 2}x')"
                    for k, t in zip(kv, kt, strict=False))
                self.trace_line(f"{f'Parser state {s.name!r}: key is '!r} + {parts or repr('')}")
            first = True
            has_default = False
            for c in tr.cases:
                cond = self.keyset_cond(c.keyset, kv, kt)
                if cond == "True":
                    if first:
                        goto(c.state)
                    else:
                        self.w("else:")
                        with self.indent():
                            goto(c.state)
                    has_default = True
                    break
                self.w(f"{'if' if first else 'elif'} {cond}:")
                first = False
                with self.indent():
                    goto(c.state)
            if not has_default:
                if first:
                    self.w(f"raise ParserError({ERR_NO_MATCH})")
                else:
                    self.w("else:")
                    self.w(f"    raise ParserError({ERR_NO_MATCH})")
        else:
            raise P4Unsupported(tr.loc, "transition")
        self.env = saved

    def keyset_cond(self, ks: ir.Expr, kv: list[str], kt: list[T.P4Type]) -> str:
        if isinstance(ks, (ir.DefaultExpr, ir.DontCareExpr)):
            return "True"
        if isinstance(ks, ir.PathExpr) and isinstance(ks.decl, ir.ValueSetDecl):
            vs = self.env.get(id(ks.decl)) or self.bind_value_set(ks.decl)
            key = kv[0] if len(kv) == 1 else "(" + ", ".join(kv) + ")"
            return f"({key} in {vs})"
        if isinstance(ks, ir.ListExpr) and (len(kv) > 1 or (len(ks.elems) == 1)):
            elems = ks.elems
        else:
            elems = [ks]
        if len(elems) != len(kv):
            raise P4Error(ks.loc, f"keyset has {len(elems)} components, select has {len(kv)}")
        conds = []
        for x, k, t in zip(elems, kv, kt, strict=False):
            c = self.keyset_elem(x, k, t)
            if c != "True":
                conds.append(c)
        return " and ".join(conds) if conds else "True"

    def keyset_elem(self, x: ir.Expr, k: str, t: T.P4Type) -> str:
        if isinstance(x, (ir.DefaultExpr, ir.DontCareExpr)):
            return "True"
        if isinstance(x, ir.BinaryExpr) and x.op == "&&&":
            v, m = self.ex(x.left), self.ex(x.right)
            return f"({unsigned(k, t)} & {m}) == ({v} & {m})"
        if isinstance(x, ir.BinaryExpr) and x.op == "..":
            return f"{self.ex(x.left)} <= {k} <= {self.ex(x.right)}"
        if isinstance(x, ir.PathExpr) and isinstance(x.decl, ir.ValueSetDecl):
            vs = self.env.get(id(x.decl)) or self.bind_value_set(x.decl)
            return f"({k} in {vs})"
        v = self.ex(x)
        if isinstance(base_t(t), T.Bool) and not isinstance(base_t(x.type), T.Bool):
            return f"(1 if {k} else 0) == {v}"
        return f"{k} == {v}"

