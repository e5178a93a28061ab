"""Tables: their control-plane description (INFO) and the apply dispatch."""

from __future__ import annotations

from typing import Any

from ..frontend import ir
from ..frontend.source import Location, P4Error, P4Unsupported
from ..midend import types as T
from ..runtime.contract import (
    ActionInfo,
    CounterInfo,
    EntryInfo,
    KeyInfo,
    MeterInfo,
    ParamInfo,
    TableInfo,
)
from .common import (
    annotation_str,
    base_t,
    expr_text,
    is_isvalid,
    mask_of,
    scalar_width,
    unsigned,
)
from .parsers import ParserGen


class TableGen(ParserGen):
    """Tables: INFO for the control plane and the generated apply dispatch."""

    # ======================================================================
    # Tables

    def register_table(self, d: ir.TableDecl) -> TableInfo:
        name = self.cp_name(d)
        ti = self.info.tables.get(name)
        if ti is not None:
            return ti
        impl = d.properties.get("implementation")
        profile = self.table_implementation(impl, d, name) if impl is not None else None
        keys: list[KeyInfo] = []
        selector_keys: list[KeyInfo] = []
        for k in d.keys:
            kn = annotation_str(k.annotations, "name") or expr_text(k.expr)
            ki = KeyInfo(kn, k.match_kind, scalar_width(k.expr.type, k.loc)
                         if not is_isvalid(k.expr) else 1)
            # selector fields take no part in matching: the selector hashes them
            (selector_keys if k.match_kind == "selector" else keys).append(ki)
        if selector_keys and (profile is None or profile.selector_algo is None):
            raise P4Error(d.loc, f"table {name} has selector keys but no action_selector "
                          "implementation")
        actions = []
        default_only, table_only = [], []
        for ref in d.actions:
            ad = self.action_decl(ref)
            if not isinstance(ad, ir.ActionDecl):
                raise P4Error(ref.loc, f"unknown action '{ref.name}'")
            an = self.action_name(ad)
            actions.append(an)
            if ir.find_annotation(ref.annotations, "defaultonly"):
                default_only.append(an)
            if ir.find_annotation(ref.annotations, "tableonly"):
                table_only.append(an)
            self.action_info(ad)
        da = d.default_action
        if da is not None:
            dd = self.action_decl(da)
            dname = self.action_name(dd)
            self.action_info(dd)
            nd = len([p for p in dd.params if p.direction])
            dargs = self._data_args(dd, da.args[nd:], da.loc)
        else:
            dname = "NoAction"
            dargs = []
            self.info.actions.setdefault("NoAction", ActionInfo("NoAction", []))
        entries = []
        for en in d.entries:
            entries.append(self.entry_info(d, en, keys))
        size = int(self.const(d.size)) if d.size is not None else 1024
        ti = TableInfo(name=name, keys=keys, actions=actions, default_action=dname,
                       default_args=dargs, default_const=d.default_action_const,
                       entries=entries, entries_const=d.entries_const, size=size,
                       default_only_actions=default_only, table_only_actions=table_only)
        if profile is not None:
            ti.implementation = profile.name
            ti.selector_keys = selector_keys
            profile.tables.append(name)
            profile.actions += [a for a in actions if a not in profile.actions
                                and a not in default_only]
        if any(ir.find_annotation(en.annotations, "priority") for en in d.entries):
            ti.largest_priority_wins = False  # BMv2's @priority: smaller wins
        lpw = d.properties.get("largest_priority_wins")
        if lpw is not None:
            ti.largest_priority_wins = bool(self.const(lpw))
        ctr = self._direct_instance(d, "counters")
        if ctr is not None:
            cname, kind = ctr
            self.info.counters[cname] = CounterInfo(cname, 0, kind, direct_table=name)
            ti.direct_counter = cname
        mtr = self._direct_instance(d, "meters")
        if mtr is not None:
            mname, kind = mtr
            self.info.meters[mname] = MeterInfo(mname, 0, kind, direct_table=name)
            ti.direct_meter = mname
            self.direct_meter_table[mname] = name
        self.info.tables[name] = ti
        return ti

    def _direct_instance(self, d: ir.TableDecl, prop: str) -> tuple[str, str] | None:
        """The direct counter or meter (``prop``: "counters" or "meters") of
        table ``d``, as (its control-plane name, its kind); None if it has none."""
        value = d.properties.get(prop)
        decl = getattr(value, "decl", None) if value is not None else None
        if not isinstance(decl, ir.InstantiationDecl):
            return None
        return self.inst_name(decl), self.enum_member(decl.args[0].value)

    def _data_args(self, ad: ir.ActionDecl, args: list[ir.Argument], loc: Location) -> list[int]:
        dl = [p for p in ad.params if not p.direction]
        vals = self.ordered_args(dl, args)
        out = []
        for p, v in zip(dl, vals, strict=False):
            if v is None:
                raise P4Error(loc, f"missing argument for action parameter '{p.name}'")
            c = self.const(v)
            out.append(int(c) & mask_of(scalar_width(p.type.resolved, loc)))
        return out

    def action_info(self, ad: ir.ActionDecl) -> None:
        an = self.action_name(ad)
        if an in self.info.actions:
            return
        self.info.actions[an] = ActionInfo(an, [
            ParamInfo(p.name, scalar_width(p.type.resolved, p.loc))
            for p in ad.params if not p.direction])

    def entry_info(self, d: ir.TableDecl, en: ir.TableEntry, keys: list[KeyInfo]) -> EntryInfo:
        kexprs = en.keys
        if len(kexprs) == 1 and isinstance(kexprs[0], ir.ListExpr) and len(keys) != 1:
            kexprs = kexprs[0].elems
        if len(kexprs) == 1 and isinstance(kexprs[0], ir.ListExpr) and len(keys) == 1 \
                and len(kexprs[0].elems) == 1:
            kexprs = kexprs[0].elems
        if len(kexprs) != len(keys) and not (len(keys) == 0):
            if len(kexprs) == 1 and isinstance(kexprs[0], (ir.DefaultExpr, ir.DontCareExpr)):
                kexprs = kexprs * len(keys)
            else:
                raise P4Error(en.loc, f"entry has {len(kexprs)} keys, table has {len(keys)}")
        matches: list[Any] = []
        for k, x in zip(keys, kexprs, strict=False):
            full = mask_of(k.width)
            wild = isinstance(x, (ir.DefaultExpr, ir.DontCareExpr))
            mk = k.match_kind
            if mk == "exact":
                if wild:
                    raise P4Error(x.loc, "an exact key cannot be a wildcard")
                matches.append(int(self.const(x)) & full)
            elif mk in ("ternary", "optional"):
                if wild:
                    matches.append((0, 0))
                elif isinstance(x, ir.BinaryExpr) and x.op == "&&&":
                    v, m = int(self.const(x.left)) & full, int(self.const(x.right)) & full
                    matches.append((v & m, m))
                else:
                    matches.append((int(self.const(x)) & full, full))
            elif mk == "lpm":
                if wild:
                    matches.append((0, 0))
                elif isinstance(x, ir.BinaryExpr) and x.op == "&&&":
                    v, m = int(self.const(x.left)) & full, int(self.const(x.right)) & full
                    plen = bin(m).count("1")
                    if m != (full ^ mask_of(k.width - plen)):
                        raise P4Error(x.loc, "lpm mask is not a prefix")
                    matches.append((v & m, plen))
                else:
                    matches.append((int(self.const(x)) & full, k.width))
            elif mk == "range":
                if wild:
                    matches.append((0, full))
                elif isinstance(x, ir.BinaryExpr) and x.op == "..":
                    matches.append((int(self.const(x.left)) & full, int(self.const(x.right)) & full))
                else:
                    v = int(self.const(x)) & full
                    matches.append((v, v))
            else:
                raise P4Unsupported(x.loc, f"entries for match kind {mk}")
        ref = en.action
        ad = self.action_decl(ref)
        nd = len([p for p in ad.params if p.direction])
        prio = None
        if en.priority is not None:
            prio = int(self.const(en.priority))
        else:
            pa = ir.find_annotation(en.annotations, "priority")
            if pa is not None and pa.args:
                prio = int(self.const(pa.args[0]))
        return EntryInfo(matches, self.action_name(ad),
                         self._data_args(ad, ref.args[nd:], ref.loc), prio)

    def action_decl(self, ref: Any) -> Any:
        """The action a table's action reference names."""
        ad = ref.decl if ref.decl is not None else self.decl_by_name.get(ref.name)
        if ad is None:
            raise P4Error(ref.loc, f"no action named '{ref.name}'")
        return ad

    def table_apply_call(self, ce: ir.CallExpr) -> tuple[str, str]:
        d: Any = getattr(getattr(ce.func, "expr", None), "decl", None)  # t in t.apply()
        ti = self.register_table(d)
        tv = self.bind_runtime("table", ti.name)
        self.comment(ce, f"apply table {ti.name}")
        keys = self.seq_values([k.expr for k in d.keys], None)
        kv, sel = [], []
        for k, code in zip(d.keys, keys, strict=False):
            t = base_t(k.expr.type)
            v = f"(1 if {code} else 0)" if isinstance(t, T.Bool) else unsigned(code, t)
            if k.match_kind == "selector":
                sel.append(f"({v}, {scalar_width(t, k.loc)})")
            else:
                kv.append(v)
        a, dd, h = self.fresh("act"), self.fresh("data"), self.fresh("hit")
        key = "(" + "".join(x + ", " for x in kv) + ")"
        if sel:
            self.w(f"{a}, {dd}, {h} = {tv}.apply({key}, [{', '.join(sel)}])")
        else:
            self.w(f"{a}, {dd}, {h} = {tv}.apply({key})")
        if self.trace:
            self.w(f"_trace_table(st, {tv}, {a}, {dd}, {h})")
        first = True
        for ref in d.actions:
            ad = self.action_decl(ref)
            if not ad.body.stmts and not any(p.direction for p in ad.params):
                continue
            an = self.action_name(ad)
            self.w(f"{'if' if first else 'elif'} {a} == {an!r}:")
            first = False
            with self.indent():
                self.inline_action(ad, [], dd, ref.loc, bound=ref.args)
        return a, h

