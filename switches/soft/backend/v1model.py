"""The v1model architecture: its externs, the six-block pipeline and the
generated module's layout. Everything architecture-specific lives here;
the other parts translate the P4 language."""

from __future__ import annotations

import re
from typing import Any

from ..frontend import ir
from ..frontend.source import Location, P4Error, P4Unsupported
from ..midend import types as T
from ..runtime.contract import (
    ActionProfileInfo,
    CounterInfo,
    DigestInfo,
    MeterInfo,
    ParamInfo,
    RegisterInfo,
)
from .common import (
    annotation_str,
    base_t,
    contains_return,
    copy_expr,
    expr_text,
    fname,
    from_unsigned,
    is_composite,
    mask_of,
    scalar_width,
    unsigned,
    wrap,
)
from .tables import TableGen


class V1ModelGen(TableGen):
    """The v1model architecture; combines all parts into the generator."""

    # -- extern instances ----------------------------------------------------

    def bind_instance(self, d: ir.InstantiationDecl) -> str:
        """Runtime object of an extern instance, registering it in INFO."""
        if id(d) in self.env:
            return self.env[id(d)]
        r = d.type.resolved
        ename = getattr(r, "name", None) or getattr(getattr(d.type, "base", d.type), "name", "")
        name = self.inst_name(d)
        targs = list(getattr(r, "type_args", []) or [])
        argv = [a.value for a in d.args]
        if ename == "register":
            width = scalar_width(targs[0], d.loc) if targs else 32
            self.info.registers[name] = RegisterInfo(name, width, int(self.const(argv[0])))
            return self.bind_runtime("register", name)
        if ename == "counter":
            kind = self.enum_member(argv[1])
            self.info.counters[name] = CounterInfo(name, int(self.const(argv[0])), kind)
            return self.bind_runtime("counter", name)
        if ename == "meter":
            kind = self.enum_member(argv[1])
            self.info.meters[name] = MeterInfo(name, int(self.const(argv[0])), kind)
            return self.bind_runtime("meter", name)
        if ename == "direct_counter":
            kind = self.enum_member(argv[0])
            if name not in self.info.counters:
                self.info.counters[name] = CounterInfo(name, 0, kind)
            return repr(name)
        if ename == "direct_meter":
            kind = self.enum_member(argv[0])
            if name not in self.info.meters:
                self.info.meters[name] = MeterInfo(name, 0, kind)
            return repr(name)
        if ename in ("Checksum16",):
            return repr(name)
        if ename in ("action_profile", "action_selector"):
            self.action_profile(name, ename, argv, d.loc)
            return repr(name)
        raise P4Unsupported(d.loc, f"extern '{ename}'")

    def action_profile(self, name: str, ename: str, argv: list[ir.Expr],
                       loc: Location) -> ActionProfileInfo:
        """Register ``action_profile(size)`` / ``action_selector(algorithm,
        size, outputWidth)`` named ``name`` in INFO (once)."""
        prof = self.info.action_profiles.get(name)
        if prof is None:
            if ename == "action_profile":
                prof = ActionProfileInfo(name, int(self.const(argv[0])))
            else:
                prof = ActionProfileInfo(name, int(self.const(argv[1])),
                                         selector_algo=self.enum_member(argv[0]),
                                         selector_output_width=int(self.const(argv[2])))
            self.info.action_profiles[name] = prof
        return prof

    def table_implementation(self, impl: ir.Expr, table: ir.TableDecl,
                             table_name: str) -> ActionProfileInfo:
        loc = table.property_locs.get("implementation", table.loc)
        d = getattr(impl, "decl", None)
        if isinstance(impl, ir.PathExpr) and isinstance(d, ir.InstantiationDecl):
            self.bind_instance(d)
            prof = self.info.action_profiles.get(self.inst_name(d))
            if prof is not None:
                return prof
        elif isinstance(impl, ir.CallExpr):
            ename = getattr(impl.func, "name", "")
            if ename in ("action_profile", "action_selector"):
                # an instance of its own: named by @name on the property, else
                # after the table (as p4c names it in P4Info)
                n = annotation_str(table.property_annotations.get("implementation", []), "name")
                if n is None:
                    name = table_name
                elif n.startswith("."):
                    name = n[1:]
                else:
                    name = f"{self.prefix}.{n}" if self.prefix else n
                return self.action_profile(name, ename, [a.value for a in impl.args], loc)
        raise P4Unsupported(loc, "a table implementation other than an action_profile or "
                                 "action_selector")

    def extern_method(self, base: ir.Expr, bt: T.Extern, m: str, ce: ir.CallExpr,
                      want: bool) -> str | None:
        en = bt.name
        args = [a.value for a in ce.args]
        obj = self.ex(base)
        if en == "register":
            if m == "read":
                ix = self.ex(args[1])
                v = f"{obj}.read({ix})"
                self.assign(args[0], from_unsigned(v, args[0].type), args[0].type, ce.loc)
                return None
            if m == "write":
                ix = self.ex(args[0])
                val = self.ex(args[1])
                self.w(f"{obj}.write({ix}, {unsigned(val, args[1].type)})")
                return None
        if en == "counter" and m == "count":
            # BMv2 counts the packet's ingress length (counters.h increment_counter),
            # not standard_metadata.packet_length, which the program may change
            self.w(f"{obj}.count({self.ex(args[0])}, st.ingress_length)")
            return None
        if en == "meter" and m == "execute_meter":
            ix = self.ex(args[0])
            # as counters: the ingress length (BMv2 meters.cpp Meter::execute)
            self.assign(args[1], f"{obj}.execute({ix}, st.ingress_length)", args[1].type, ce.loc)
            return None
        if en == "direct_counter" and m == "count":
            return None
        if en == "direct_meter" and m == "read":
            mname = eval(obj)
            table = self.direct_meter_table.get(mname)
            if table is None:
                raise P4Error(ce.loc, f"direct meter '{mname}' is not attached to a table")
            self.assign(args[0], f"rt.direct_meter_read({table!r}, st.ingress_length)",
                        args[0].type, ce.loc)
            return None
        if en == "Checksum16" and m == "get":
            return f"({self.checksum_expr('csum16', args[0])} & 0xffff)"
        raise P4Unsupported(ce.loc, f"extern method {en}.{m}")

    # -- extern functions ----------------------------------------------------

    def flatten_data(self, e: ir.Expr) -> str:
        """A list of (value, width) pairs in P4 order for hash/checksum data."""
        return "[" + ", ".join(f"({v}, {w})" for v, w in self.flatten_pairs(e)) + "]"

    def flatten_pairs(self, e: ir.Expr) -> list[tuple[str, str]]:
        """(value code, width code) per leaf of hash/checksum data, in P4 order."""
        items: list[tuple[str, str]] = []

        def go(x: ir.Expr) -> None:
            t = base_t(x.type)
            if isinstance(x, ir.ListExpr) and not isinstance(t, T.StructLike):
                for y in x.elems:
                    go(y)
                return
            if isinstance(x, (ir.ListExpr, ir.StructExpr)) and isinstance(t, T.StructLike):
                elems = x.elems if isinstance(x, ir.ListExpr) else [v for _, v in x.fields]
                for y in elems:
                    go(y)
                return
            if isinstance(t, T.StructLike):
                code = self.ex(x)
                self._flatten_obj(code, t, items, x.loc)
                return
            code = self.ex(x)
            if isinstance(t, T.Varbit):
                items.append((code, f"{code}__w") if "." in code else (code, str(t.max_width)))
                return
            items.append((unsigned(code, t), str(scalar_width(t, x.loc))))

        go(e)
        return items

    def _flatten_obj(self, code: str, t: T.StructLike, items: list[tuple[str, str]],
                     loc: Location) -> None:
        for f in t.fields:
            ft = base_t(f.type)
            c = f"{code}.{fname(f.name)}"
            if isinstance(ft, T.StructLike):
                self._flatten_obj(c, ft, items, loc)
            elif isinstance(ft, T.Stack):
                elem = base_t(ft.elem)
                assert isinstance(elem, T.StructLike)  # a stack of headers or unions
                for i in range(ft.size):
                    self._flatten_obj(f"{c}.e[{i}]", elem, items, loc)
            elif isinstance(ft, T.Varbit):
                items.append((c, f"{c}__w"))
            else:
                items.append((unsigned(c, ft), str(scalar_width(ft, loc))))

    def checksum_expr(self, algo: str, e: ir.Expr, hoist: bool = False) -> str:
        """The checksum of data ``e``; csum16 over fixed-width data is computed
        inline on one packed integer (no list, no bytes). ``hoist``: a
        statement may be emitted first (binds a header read several times)."""
        pairs = self.flatten_pairs(e)
        if hoist:
            pairs = self._hoist_prefixes(pairs)
        if algo == "csum16" and pairs and all(w.isdigit() for _, w in pairs):
            # The data as one integer is sum(value << shift); since 2**16 is 1
            # modulo 0xFFFF, each shift can be taken modulo 16: small ints only.
            total = sum(int(w) for _, w in pairs)
            parts = []
            sh = total + (-total) % 16  # zero padding up to whole 16-bit words
            for v, w in pairs:
                sh -= int(w)
                if not re.fullmatch(r"[\w.]+", v):
                    v = f"({v} & {mask_of(int(w)):#x})"
                parts.append(f"({v} << {sh % 16})" if sh % 16 else v)
            return f"csum16_int({' + '.join(parts)})"
        return f"rt.checksum({algo!r}, [{', '.join(f'({v}, {w})' for v, w in pairs)}])"

    def _hoist_prefixes(self, pairs: list[tuple[str, str]]) -> list[tuple[str, str]]:
        """Bind ``a.b`` to a local when ``a.b.<field>`` is read three times or more."""
        counts: dict[str, int] = {}
        for v, _ in pairs:
            m = re.fullmatch(r"(\w+\.[\w.]+)\.\w+", v)
            if m:
                counts[m.group(1)] = counts.get(m.group(1), 0) + 1
        local: dict[str, str] = {}
        for prefix, n in counts.items():
            if n >= 3:
                local[prefix] = self.fresh("h")
                self.w(f"{local[prefix]} = {prefix}")
        out = []
        for v, w in pairs:
            m = re.fullmatch(r"(\w+\.[\w.]+)\.(\w+)", v)
            if m and m.group(1) in local:
                v = f"{local[m.group(1)]}.{m.group(2)}"
            out.append((v, w))
        return out

    def extern_function(self, name: str, ce: ir.CallExpr, want: bool) -> str | None:
        args = [a.value for a in ce.args]
        loc = ce.loc
        sm = "st.sm"
        if name == "mark_to_drop":
            target = self.lv(args[0]) if args else sm
            self.w(f"rt.mark_to_drop({target})")
            return None
        if name in ("hash",):
            algo = self.calculation(self.enum_member(args[1]))
            basev = self.ex(args[2])
            data = self.flatten_data(args[3])
            mx = self.ex(args[4])
            v = f"rt.hash({algo!r}, {unsigned(basev, args[2].type)}, {data}, {unsigned(mx, args[4].type)})"
            self.assign(args[0], wrap(v, args[0].type), args[0].type, loc)
            return None
        if name == "random":
            lo, hi = self.ex(args[1]), self.ex(args[2])
            self.assign(args[0], f"rt.random({lo}, {hi})", args[0].type, loc)
            return None
        if name in ("verify_checksum", "verify_checksum_with_payload"):
            cond = self.ex(args[0])
            algo = self.enum_member(args[3])
            value = self.checksum_call(name, algo, args[1])
            ck = self.ex(args[2])
            self.w(f"if {cond} and {value} != {unsigned(ck, args[2].type)}:")
            self.w(f"    {sm}.checksum_error = 1")
            return None
        if name in ("update_checksum", "update_checksum_with_payload"):
            cond = self.ex(args[0])
            algo = self.enum_member(args[3])
            value = self.checksum_call(name, algo, args[1])
            self.w(f"if {cond}:")
            with self.indent():
                self.assign(args[2], wrap(value, args[2].type),
                            args[2].type, loc)
            return None
        if name == "digest":
            recv = self.ex(args[0])
            t = base_t(args[1].type)
            if isinstance(t, T.StructLike):
                tname = t.name
                fields = []
                items: list[str] = []
                for f in t.fields:
                    fields.append(ParamInfo(f.name, scalar_width(f.type, loc)))
                code = self.ex(args[1])
                if isinstance(args[1], (ir.ListExpr, ir.StructExpr)):
                    tmp = self.fresh("dg")
                    self.w(f"{tmp} = {code}")
                    code = tmp
                for f in t.fields:
                    items.append(f"{f.name!r}: {unsigned(f'{code}.{fname(f.name)}', f.type)}")
                self.info.digests.setdefault(tname, DigestInfo(tname, fields))
                # one learn id per packet, the last call wins (BMv2 primitives.cpp
                # generate_digest sets the packet's single lf_field_list register)
                self.w(f"st.digest = ({recv}, {tname!r}, {{{', '.join(items)}}})")
                return None
            raise P4Unsupported(loc, "digest of a non-struct value")
        if name in ("clone", "clone_preserving_field_list", "clone3"):
            self.w(f"st.clone_type = {self.ex(args[0])}")
            self.w(f"st.clone_session = {self.ex(args[1])}")
            self.w(f"st.clone_field_list = {self.field_list_arg(name, args, 2)}")
            return None
        if name in ("resubmit", "resubmit_preserving_field_list",
                    "recirculate", "recirculate_preserving_field_list"):
            kind = name.split("_", 1)[0]
            self.w(f"st.{kind}_field_list = {self.field_list_arg(name, args, 0)}")
            return None
        if name == "truncate":
            # the smallest length wins (BMv2 packet.h Packet::truncate keeps the minimum)
            n = self.fresh("trunc")
            self.w(f"{n} = {self.ex(args[0])}")
            self.w(f"if st.truncate_len is None or {n} < st.truncate_len:")
            self.w(f"    st.truncate_len = {n}")
            return None
        if name in ("assert", "assume"):
            self.w(f"if not {self.ex(args[0])}:")
            self.w(f"    raise P4AssertionError({str(loc)!r})")
            return None
        if name == "log_msg":
            fmt = self.ex(args[0])
            vals = "[]"
            if len(args) > 1:
                a1 = args[1]
                if isinstance(a1, ir.ListExpr):
                    vals = "[" + ", ".join(self.ex(x) for x in a1.elems) + "]"
                else:
                    vals = f"[{self.ex(a1)}]"
            self.w(f"rt.log_msg({fmt}, {vals})")
            return None
        raise P4Unsupported(loc, f"extern function '{name}'")

    def field_list_arg(self, name: str, args: list[ir.Expr], i: int) -> str:
        """The field list a clone/resubmit/recirculate call preserves: none (plain
        ``clone``), an index (``*_preserving_field_list``) or a legacy list of lvalues."""
        if name == "clone":
            return "None"
        if name.endswith("_preserving_field_list"):
            return self.ex(args[i])
        return str(self.legacy_field_list(args[i]))

    def calculation(self, algo: str) -> str:
        """What the runtime computes for a call site using HashAlgorithm ``algo``.
        A custom CRC gets a calculation of its own, named as p4c names BMv2's
        calculations (calc, calc_0, calc_1, ... in order of the call sites), so
        that set_crc16/32_parameters configures that calculation only."""
        if algo not in ("crc16_custom", "crc32_custom"):
            return algo
        n = len(self.info.calculations)
        name = "calc" if n == 0 else f"calc_{n - 1}"
        self.info.calculations[name] = algo
        return name

    def checksum_call(self, name: str, algo: str, data: ir.Expr) -> str:
        """The checksum a (verify|update)_checksum[_with_payload] call computes over ``data``
        (and, for the payload forms, the packet's unparsed payload)."""
        algo = self.calculation(algo)
        if name.endswith("payload"):
            fields = self.flatten_data(data)
            fields = f"{fields} + [(int.from_bytes(st.payload, 'big'), 8 * len(st.payload))]"
            return f"rt.checksum({algo!r}, {fields})"
        return self.checksum_expr(algo, data, hoist=True)

    def legacy_field_list(self, e: ir.Expr) -> int:
        """Old-style resubmit/recirculate/clone3 data: a synthetic field list
        of the metadata lvalues named in ``e`` (numbered from 1000)."""
        paths: list[tuple[str, str, T.P4Type]] = []

        def go(x: ir.Expr) -> None:
            if isinstance(x, ir.ListExpr):
                for y in x.elems:
                    go(y)
                return
            if isinstance(x, ir.StructExpr):
                for _, y in x.fields:
                    go(y)
                return
            code = self.lv(x)
            root = code.split(".", 1)
            target = self.top_params.get(root[0])
            if target is None:
                raise P4Unsupported(x.loc, "preserved fields that are not pipeline metadata")
            path = target + ("." + root[1] if len(root) > 1 else "")
            paths.append((expr_text(x), path, x.type))

        go(e)
        idx = 1000 + len(self.field_lists)
        for k, v in self.field_lists.items():
            if v == paths:
                return k
        self.field_lists[idx] = paths
        return idx

    # ======================================================================
    # Top level

    def pipeline_fn(self, fname_: str, d: Any, kind: str, role: str = "") -> list[str]:
        """One generated function for a top-level parser/control block."""
        self.env = {}
        self.prefix = self.cp_name(d, "")
        self.ret = []
        if isinstance(d, ir.ParserDecl):
            self.pkt = "pkt"
        self.top_params = {}
        with self.capture() as out:
            self.w(f"def {fname_}(st{', packet' if kind == 'parser' else ''}):")
            self.ind += 1
            self.w(f'"""{kind} {d.name} ({d.loc.file.rsplit("/", 1)[-1]}:{d.loc.line})"""')
            # top-level params alias the packet state's objects (no copy)
            comp = [p for p in d.params if not isinstance(base_t(p.type.resolved), T.Extern)]
            targets = {"parser": ["hdr", "meta", "sm"],
                       "deparser": ["hdr"]}.get(kind, ["hdr", "meta", "sm"])
            for p, tgt in zip(comp, targets, strict=False):
                name = self.fresh(p.name)
                self.w(f"{name} = st.{tgt}")
                self.env[id(p)] = name
                self.top_params[name] = tgt
            bargs = getattr(self.checked, "block_args", {}).get(role, {})
            for p in d.ctor_params:
                v = bargs.get(p.name, p.default)
                if v is None:
                    raise P4Error(d.loc, f"no value for constructor parameter '{p.name}'")
                self.env[id(p)] = "(" + self.ex(v) + ")"
            for p in d.params:
                if isinstance(base_t(p.type.resolved), T.Extern):
                    self.env[id(p)] = "_out" if kind == "deparser" else "pkt"
            if kind == "parser":
                self.w("pkt = packet")
                self.w("off = 0")
                self.w("try:")
                self.ind += 1
                self.register_locals(d.locals)
                self.locals_init(d.locals)
                self.state_machine(d)
                self.ind -= 1
                self.w("except ParserError as e:")
                self.w("    if e.code is not None:")
                self.w("        st.sm.parser_error = e.code")
                self.w("st.payload = pkt[off:]")
            else:
                if kind == "deparser":
                    self.out_var = "_out"
                    self.w("_out = []")
                self.register_locals(d.locals)
                self.w("try:")
                self.ind += 1
                n0 = len(self.buf)
                self.locals_init(d.locals)
                self.ret.append([None, "return" if kind != "deparser" else "break", self.fresh("ret"), 0])
                if kind == "deparser" and contains_return(d.body):
                    self.w("while True:")
                    self.ind += 1
                    self.stmt(d.body)
                    self.w("break")
                    self.ind -= 1
                else:
                    self.stmt(d.body)
                self.ret.pop()
                if not self.code_since(n0):
                    self.w("pass")
                self.ind -= 1
                self.w("except P4Exit:")
                self.w("    pass")
                if kind == "deparser":
                    self.w("_out.append(st.payload)")
                    self.w("return b''.join(_out)")
                    self.out_var = None
            self.ind -= 1
        self.pkt = None
        return out

    def generate(self) -> str:
        ck = self.checked
        blocks = ck.blocks
        hdr_t, meta_t = base_t(ck.hdr_type), base_t(ck.meta_type)
        sm_t = None
        ing = blocks["ingress"]
        if len(ing.params) >= 3:
            sm_t = base_t(ing.params[2].type.resolved)
        fns = []
        order = [("parse", "parser"), ("verify_checksum", "verify_checksum"),
                 ("ingress", "ingress"), ("egress", "egress"),
                 ("compute_checksum", "compute_checksum"), ("deparse", "deparser")]
        for fn, key in order:
            kind = {"parser": "parser", "deparser": "deparser"}.get(key, "control")
            fns.append(self.pipeline_fn(fn, blocks[key], kind, key))
        hc = self.class_of(hdr_t)
        mc = self.class_of(meta_t)
        smc = self.class_of(sm_t) if sm_t is not None else None
        fl = self.collect_field_lists(meta_t, sm_t)

        L: list[str] = []
        a = L.append
        src = self.program.files[0] if self.program.files else "<string>"
        a(f"# Generated by the soft target's P4 compiler from {src}.")
        a("# Straight-line Python specialized to this program; see switches/soft/backend.")
        a("from switches.soft.runtime.contract import (")
        a("    ActionInfo, ActionProfileInfo, CounterInfo, DigestInfo, EntryInfo, KeyInfo,")
        a("    MeterInfo, ParamInfo, ProgramInfo, RegisterInfo, TableInfo, PacketState)")
        a("from switches.soft.backend.rtlib import (")
        a("    EXIT, HeaderStack, P4AssertionError, P4Exit, ParserError, Program, csum16_int,")
        a("    stack_index, stack_index_p)")
        a("from struct import Struct as _Struct")
        a("")
        a("")
        for c in self.class_src:
            a(c)
            a("")
        a(f"INFO = {self.info!r}")
        a("")
        a("")
        a("def make_program(rt):")
        if self.trace:
            a("    _trace = rt.trace")
            a("    _trace_table = rt.trace_table")
        for b in self.bindings:
            a("    " + b)
        a("")
        a("    def new_state():")
        a(f"        return PacketState({hc}(), {mc}(), {smc + '()' if smc else 'None'})")
        a("")
        for f in fns:
            for ln in f:
                a("    " + ln if ln else "")
            a("")
        a("    def copy_state(st):")
        a("        return PacketState(st.hdr._copy(), st.meta._copy(),")
        a("                           st.sm._copy() if st.sm is not None else None, st.payload)")
        a("")
        a("    def field_list(st, index):")
        for idx, paths in fl.items():
            a(f"        if index == {idx}:")
            items = ", ".join(f"{k!r}: {copy_expr('st.' + p, t)}" for k, p, t in paths)
            a(f"            return {{{items}}}")
        a("        return {}")
        a("")
        a("    def restore_field_list(st, values):")
        a("        for k, v in values.items():")
        a("            setter = _SETTERS.get(k)")
        a("            if setter is not None:")
        a("                setter(st, v)")
        a("")
        setters = {}
        for paths in fl.values():
            for k, p, t in paths:
                setters[k] = (p, t)
        a("    _SETTERS = {")
        for k, (p, t) in setters.items():
            obj, attr = ("st." + p).rsplit(".", 1)
            if is_composite(t):
                a(f"        {k!r}: lambda st, v: {obj}.{attr}._set(v),")
            else:
                a(f"        {k!r}: lambda st, v: setattr({obj}, {attr!r}, v),")
        a("    }")
        a("")
        a("    return Program(INFO, new_state=new_state, parse=parse,")
        a("                   verify_checksum=verify_checksum, ingress=ingress, egress=egress,")
        a("                   compute_checksum=compute_checksum, deparse=deparse,")
        a("                   copy_state=copy_state, field_list=field_list,")
        a("                   restore_field_list=restore_field_list)")
        a("")
        return "\n".join(L)

    def collect_field_lists(self, meta_t: T.P4Type, sm_t: T.P4Type | None) -> dict[int, list[tuple[str, str, T.P4Type]]]:
        fl: dict[int, list[tuple[str, str, T.P4Type]]] = {}

        def go(t: T.StructLike, path: str, key: str) -> None:
            for f in t.fields:
                p = f"{path}.{fname(f.name)}"
                k = f"{key}.{f.name}"
                for an in f.annotations:
                    if getattr(an, "name", None) == "field_list":
                        for x in an.args:
                            try:
                                idx = int(self.const(x))
                            except P4Error:
                                continue
                            fl.setdefault(idx, []).append((k, p, f.type))
                ft = base_t(f.type)
                if isinstance(ft, T.Struct):
                    go(ft, p, k)

        if isinstance(meta_t, T.StructLike):
            go(meta_t, "meta", "meta")
        if isinstance(sm_t, T.StructLike):
            go(sm_t, "sm", "standard_metadata")
        for idx, paths in self.field_lists.items():
            fl[idx] = paths
        return fl

