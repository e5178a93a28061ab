"""Header, struct and union classes, and extracting/emitting headers."""

from __future__ import annotations

from ..frontend import ir
from ..frontend.source import UNKNOWN, Location, P4Error, P4Unsupported
from ..midend import types as T
from .base import GenBase
from .common import (
    BYTE_CODES,
    CODE_BYTES,
    ERR_HEADER_TOO_SHORT,
    ERR_INVALID_ARG,
    ERR_PACKET_TOO_SHORT,
    ERR_STACK_OOB,
    base_t,
    expr_text,
    fname,
    from_unsigned,
    ident,
    is_composite,
    mask_of,
    scalar_width,
    struct_units,
    unsigned,
)


class HeaderGen(GenBase):
    """Classes of struct-like types; extract, lookahead and emit of headers."""

    # -- classes -------------------------------------------------------------

    def class_of(self, t: T.P4Type, loc: Location = UNKNOWN) -> str:
        t = base_t(t)
        if not isinstance(t, T.StructLike):
            raise P4Unsupported(loc, f"type {t} as a composite value")
        c = self.classes.get(t.name)
        if c is None:
            self.gen_class(t, loc)
            c = self.classes[t.name]
        return c

    def default(self, t: T.P4Type, loc: Location = UNKNOWN) -> str:
        b = base_t(t)
        if isinstance(b, T.Bool):
            return "False"
        if isinstance(b, (T.Bits, T.Varbit, T.InfInt, T.ErrorType, T.Enum)):
            return "0"
        if isinstance(b, T.String):
            return "''"
        if isinstance(b, T.StructLike):
            return f"{self.class_of(b, loc)}()"
        if isinstance(b, T.Stack):
            return f"HeaderStack([{self.class_of(b.elem, loc)}() for _ in range({b.size})])"
        if isinstance(b, T.Tuple):
            return "(" + "".join(self.default(x, loc) + ", " for x in b.elems) + ")"
        raise P4Unsupported(loc, f"a variable of type {t}")

    def gen_class(self, t: T.StructLike, loc: Location) -> None:
        kind = "H" if isinstance(t, T.Header) else "U" if isinstance(t, T.HeaderUnion) else "S"
        cls = f"{kind}_{ident(t.name)}"
        while cls in self.classes.values():
            cls += "_"
        self.classes[t.name] = cls
        fields = [(f.name, fname(f.name), f.type) for f in t.fields]
        for _, _, ft in fields:  # nested classes first
            b = base_t(ft)
            if isinstance(b, T.StructLike):
                self.class_of(b, loc)
            elif isinstance(b, T.Stack):
                self.class_of(b.elem, loc)
        L: list[str] = []
        a = L.append
        a(f"class {cls}:")
        a(f"    \"\"\"{'header' if kind == 'H' else 'header_union' if kind == 'U' else 'struct'} {t.name}\"\"\"")
        slots = ([] if kind != "H" else ["_valid"]) + [p for _, p, _ in fields]
        varbits = [p for _, p, ft in fields if isinstance(base_t(ft), T.Varbit)]
        slots += [p + "__w" for p in varbits]
        a(f"    _names = {tuple(n for n, _, _ in fields)!r}")
        # Scalars start as class attributes (an instance stores only what is
        # written, so creating a header or struct costs next to nothing);
        # nested headers/structs/stacks are created per instance.
        if kind == "H":
            a("    _valid = False")
        for _, p, ft in fields:
            if not is_composite(ft):
                a(f"    {p} = {self.default(ft, loc)}")
        for p in varbits:
            a(f"    {p}__w = 0")
        a("")
        composite = [(p, ft) for _, p, ft in fields if is_composite(ft)]
        if composite:
            a("    def __init__(self):")
            for p, ft in composite:
                a(f"        self.{p} = {self.default(ft, loc)}")
            a("")
        # copy / set / eq
        def cp(src: str, p: str, ft: T.P4Type | None) -> str:
            return f"{src}.{p}._copy()" if is_composite(ft) else f"{src}.{p}"
        a("    def _copy(self):")
        a(f"        o = {cls}.__new__({cls})")
        for s in slots:
            slot_t = next((ft for _, p, ft in fields if p == s), None)
            a(f"        o.{s} = {cp('self', s, slot_t)}")
        a("        return o")
        a("")
        a("    def _set(self, s):")
        for s in slots:
            slot_t = next((ft for _, p, ft in fields if p == s), None)
            if is_composite(slot_t):
                a(f"        self.{s}._set(s.{s})")
            else:
                a(f"        self.{s} = s.{s}")
        if not slots:
            a("        pass")
        a("")
        a("    def _eq(self, o):")
        conds = []
        for _, p, ft in fields:
            if is_composite(ft):
                conds.append(f"self.{p}._eq(o.{p})")
            else:
                conds.append(f"self.{p} == o.{p}")
        conds += [f"self.{p}__w == o.{p}__w" for p in varbits]
        body = " and ".join(conds) or "True"
        if kind == "H":
            a("        if self._valid != o._valid:")
            a("            return False")
            a(f"        return not self._valid or ({body})")
        else:
            a(f"        return {body}")
        a("")
        a("    def __repr__(self):")
        inner = ", ".join(f"{n}={{self.{p}!r}}" for n, p, _ in fields)
        valid = "{'' if self._valid else 'invalid '}" if kind == "H" else ""
        a(f"        return f\"{valid}{t.name}({inner})\"")
        a("")
        if kind in ("H", "U"):
            if kind == "H":
                a("    def isValid(self):")
                a("        return self._valid")
                a("")
                a("    def setValid(self):")
                a("        self._valid = True")
                a("")
                a("    def setInvalid(self):")
                a("        self._valid = False")
                a("")
            else:
                a("    def isValid(self):")
                a("        return " + (" or ".join(f"self.{p}._valid" for _, p, _ in fields) or "False"))
                a("")
                a("    def setInvalid(self):")
                for _, p, _ in fields:
                    a(f"        self.{p}._valid = False")
                a("        pass")
                a("")
        # positional constructor (list/struct expressions)
        params = ", ".join(p for _, p, _ in fields)
        a("    @staticmethod")
        a(f"    def _mk({params}):")
        a(f"        o = {cls}()")
        for _, p, ft in fields:
            a(f"        o.{p} = {p}._copy()" if is_composite(ft) else f"        o.{p} = {p}")
        if kind == "H":
            a("        o._valid = True")
        a("        return o")
        a("")
        if kind == "H":
            # add_header: a header that becomes valid is zeroed
            a("    def _add(self):")
            for _, p, ft in fields:
                a(f"        self.{p} = {self.default(ft, loc)}")
            a("        self._valid = True")
            a("")
            self._gen_header_io(t, cls, fields, L)
        self.class_src.append("\n".join(L))
        self.class_decls[t.name] = t

    def _gen_header_io(self, t: T.StructLike, cls: str, fields: list[tuple[str, str, T.P4Type]],
                       L: list[str]) -> None:
        a = L.append
        fields = self.leaves(fields)
        fixed = 0
        var = None
        for _, p, ft in fields:
            b = base_t(ft)
            if isinstance(b, T.Varbit):
                var = (p, b.max_width)
            elif isinstance(b, (T.Bits, T.Bool)):
                fixed += scalar_width(b)
            else:
                return  # header with unsupported field types: no I/O
        a(f"    _fixed_bits = {fixed}")
        units = struct_units(fields) if var is None else None
        if units is not None:
            self._gen_header_struct_io(cls, fixed // 8, units, L)
        elif var is None:
            nbytes = (fixed + 7) // 8
            a(f"    _nbytes = {nbytes}")
            a("")
            a("    def _ext(self, pkt, off):")
            pad = nbytes * 8 - fixed
            a(f"        v = int.from_bytes(pkt[off:off + {nbytes}], 'big')")
            if pad:
                a(f"        v >>= {pad}")
            sh = fixed
            for _, p, ft in fields:
                wdt = scalar_width(ft)
                sh -= wdt
                raw = f"(v >> {sh})" if sh else "v"
                raw = f"({raw} & {mask_of(wdt):#x})" if sh + wdt < fixed else raw
                a(f"        self.{p} = {from_unsigned(raw, ft)}")
            a("        self._valid = True")
            a("")
            a("    def _emit(self):")
            parts = []
            sh = fixed
            for _, p, ft in fields:
                wdt = scalar_width(ft)
                sh -= wdt
                val = unsigned(f"self.{p}", ft)
                parts.append(f"({val} << {sh})" if sh else val)
            val = " | ".join(parts) or "0"
            if pad:
                val = f"(({val}) << {pad})"
            a(f"        return ({val}).to_bytes({nbytes}, 'big')")
            a("")
        else:
            vp, vmax = var
            a(f"    _var_max = {vmax}")
            a("")
            a("    def _extv(self, pkt, off, vl):")
            a(f"        nb = ({fixed} + vl) >> 3")
            a("        v = int.from_bytes(pkt[off:off + nb], 'big')")
            a(f"        sh = {fixed} + vl")
            for _, p, ft in fields:
                if p == vp:
                    a("        sh -= vl")
                    a(f"        self.{p} = (v >> sh) & ((1 << vl) - 1)")
                    a(f"        self.{p}__w = vl")
                else:
                    wdt = scalar_width(ft)
                    a(f"        sh -= {wdt}")
                    a(f"        self.{p} = {from_unsigned(f'((v >> sh) & {mask_of(wdt):#x})', ft)}")
            a("        self._valid = True")
            a("        return nb")
            a("")
            a("    def _emit(self):")
            a("        v = 0")
            a("        n = 0")
            for _, p, ft in fields:
                if p == vp:
                    a(f"        v = (v << self.{p}__w) | self.{p}")
                    a(f"        n += self.{p}__w")
                else:
                    wdt = scalar_width(ft)
                    a(f"        v = (v << {wdt}) | {unsigned(f'self.{p}', ft)}")
                    a(f"        n += {wdt}")
            a("        return v.to_bytes(n >> 3, 'big')")
            a("")

    def _gen_header_struct_io(self, cls: str, nbytes: int,
                              units: list[tuple[int, list[tuple[str, T.P4Type, int, int]]]],
                              L: list[str]) -> None:
        """_ext/_emit through one precompiled struct format (see struct_units)."""
        a = L.append
        fmt = ">" + "".join(c for n, _ in units for c in BYTE_CODES[n])
        a(f"    _nbytes = {nbytes}")
        a("")
        a("    def _ext(self, pkt, off):")
        names: list[str] = []
        for i, (n, _) in enumerate(units):
            names += [f"u{i}_{j}" for j in range(len(BYTE_CODES[n]))]
        a(f"        {', '.join(names)}{',' if len(names) == 1 else ''} = _U_{cls}(pkt, off)")
        k = 0
        for i, (n, flds) in enumerate(units):
            parts = BYTE_CODES[n]
            if len(parts) == 1:
                u = names[k]
            else:
                u = f"u{i}"
                sh = n * 8
                terms = []
                for j, c in enumerate(parts):
                    sh -= CODE_BYTES[c] * 8
                    terms.append(f"({names[k + j]} << {sh})" if sh else names[k + j])
                a(f"        {u} = {' | '.join(terms)}")
            k += len(parts)
            for p, ft, wdt, sh in flds:
                raw = f"({u} >> {sh})" if sh else u
                raw = f"({raw} & {mask_of(wdt):#x})" if sh + wdt < n * 8 else raw
                a(f"        self.{p} = {from_unsigned(raw, ft)}")
        a("        self._valid = True")
        a("")
        a("    def _emit(self):")
        args: list[str] = []
        for i, (n, flds) in enumerate(units):
            parts = BYTE_CODES[n]
            terms = [f"({unsigned(f'self.{p}', ft)} << {sh})" if sh
                     else unsigned(f"self.{p}", ft) for p, ft, _, sh in flds]
            val = " | ".join(terms)
            if len(parts) == 1:
                args.append(val)
                continue
            if len(terms) > 1:
                a(f"        u{i} = {val}")
                val = f"u{i}"
            sh = n * 8
            for c in parts:
                w = CODE_BYTES[c] * 8
                sh -= w
                part = f"({val} >> {sh})" if sh else val
                args.append(f"({part} & {mask_of(w):#x})" if sh + w < n * 8 else part)
        a(f"        return _P_{cls}({', '.join(args)})")
        a("")
        a("")
        a(f"_S_{cls} = _Struct({fmt!r})")
        a(f"_U_{cls} = _S_{cls}.unpack_from")
        a(f"_P_{cls} = _S_{cls}.pack")

    @staticmethod
    def instance_name(target: ir.Expr, member: str | None = None) -> str:
        """BMv2's name of a header instance: the path below the headers
        parameter (``hdr.ipv4`` -> ``ipv4``)."""
        text = expr_text(target) + (f".{member}" if member else "")
        return text.split(".", 1)[1] if "." in text else text

    @staticmethod
    def code_instance(code: str) -> str:
        """The same for generated code (``hdr_3.ipv4`` -> ``ipv4``)."""
        return code.split(".", 1)[1].replace(".e[", "[") if "." in code else code

    def header_bytes(self, t: T.StructLike, code: str) -> str:
        """Code of the size in bytes of header ``code`` of type ``t`` on the wire."""
        fixed = 0
        var = None
        for f in t.fields:
            b = base_t(f.type)
            if isinstance(b, T.Varbit):
                var = fname(f.name)
            else:
                fixed += scalar_width(b)
        if var is None:
            return str(fixed // 8)
        return f"(({fixed} + {code}.{var}__w) >> 3)"

    def leaves(self, fields: list[tuple[str, str, T.P4Type]]) -> list[tuple[str, str, T.P4Type]]:
        """Scalar leaves of a field list, structs flattened (``row.a``)."""
        out: list[tuple[str, str, T.P4Type]] = []
        for n, p, ft in fields:
            b = base_t(ft)
            if isinstance(b, T.Struct):
                sub = [(f.name, fname(f.name), f.type) for f in b.fields]
                out += [(n + "." + n2, p + "." + p2, t2) for n2, p2, t2 in self.leaves(sub)]
            else:
                out.append((n, p, ft))
        return out

    # -- extract and lookahead (parsers) -------------------------------------

    def extract(self, target: ir.Expr, vlen: ir.Expr | None, loc: Location) -> None:
        t = base_t(target.type)
        if not isinstance(t, T.Header):
            raise P4Unsupported(loc, f"extract into {target.type}")
        if isinstance(target, ir.DontCareExpr):
            nb = t.bit_width() // 8
            self.w(f"if off + {nb} > len(pkt):")
            self.w(f"    raise ParserError({ERR_PACKET_TOO_SHORT})")
            self.w(f"off += {nb}")
            return
        stack_next = (isinstance(target, ir.MemberExpr) and target.member in ("next",)
                      and isinstance(base_t(target.expr.type), T.Stack))
        union_member = None
        if (isinstance(target, ir.MemberExpr) and isinstance(target.expr, ir.MemberExpr)
                and target.expr.member == "next"
                and isinstance(base_t(target.expr.expr.type), T.Stack)):
            # hdr.u.next.member: a stack of header unions
            union_member = target.member
            stack_next = True
            u = base_t(target.expr.type)
            assert isinstance(u, T.HeaderUnion)
            utype = u
            target = target.expr
        self.class_of(t, loc)  # the header's class must exist
        hdr = self.class_decls[t.name]
        fixed = sum(scalar_width(f.type) for f in hdr.fields
                    if not isinstance(base_t(f.type), T.Varbit))
        has_var = any(isinstance(base_t(f.type), T.Varbit) for f in hdr.fields)
        if stack_next:
            assert isinstance(target, ir.MemberExpr)  # stack.next
            s = self.lv(target.expr)
            stack_t = base_t(target.expr.type)
            assert isinstance(stack_t, T.Stack)
            size = stack_t.size
            sv = self.fresh("stk")
            self.w(f"{sv} = {s}")
            self.w(f"if {sv}.nextIndex >= {size}:")
            self.w(f"    raise ParserError({ERR_STACK_OOB})")
            L = f"{sv}.e[{sv}.nextIndex]"
            if union_member is not None:
                U = L
                L = f"{U}.{fname(union_member)}"
        else:
            L = self.lv(target)
        if has_var:
            if vlen is None:
                raise P4Error(loc, "extract of a header with a varbit field needs a length")
            vl = self.fresh("vl")
            self.w(f"{vl} = {self.ex(vlen)}")
            maxw = next(vb.max_width for f in hdr.fields
                        if isinstance(vb := base_t(f.type), T.Varbit))
            self.w(f"if ({fixed} + {vl}) & 7:")
            self.w(f"    raise ParserError({ERR_INVALID_ARG})")
            self.w(f"if {vl} > {maxw}:")
            self.w(f"    raise ParserError({ERR_HEADER_TOO_SHORT})")
            self.w(f"if off + (({fixed} + {vl}) >> 3) > len(pkt):")
            self.w(f"    raise ParserError({ERR_PACKET_TOO_SHORT})")
            self.w(f"off += {L}._extv(pkt, off, {vl})")
        else:
            if fixed % 8:
                raise P4Unsupported(loc, f"header {t.name} of {fixed} bits (not a whole number of bytes)")
            nb = fixed // 8
            self.w(f"if off + {nb} > len(pkt):")
            self.w(f"    raise ParserError({ERR_PACKET_TOO_SHORT})")
            self.w(f"{L}._ext(pkt, off)")
            self.w(f"off += {nb}")
        if self.trace:
            self.trace_line(repr(f"Extracting header '{self.instance_name(target, union_member)}'"))
        if union_member is not None:
            for f in utype.fields:
                if f.name != union_member:
                    self.w(f"{U}.{fname(f.name)}._valid = False")
        if stack_next:
            self.w(f"{sv}.nextIndex += 1")
        else:
            self.union_fixup(target, L)

    def lookahead(self, t: T.P4Type, loc: Location) -> str:
        b = base_t(t)
        tmp = self.fresh("la")
        if isinstance(b, (T.Bits, T.Bool)):
            W = scalar_width(b)
            nb = (W + 7) // 8
            self.w(f"if off + {nb} > len(pkt):")
            self.w(f"    raise ParserError({ERR_PACKET_TOO_SHORT})")
            raw = f"(int.from_bytes(pkt[off:off + {nb}], 'big') >> {nb * 8 - W})"
            self.w(f"{tmp} = {from_unsigned(raw, b)}")
            return tmp
        if isinstance(b, T.Struct):
            cls = self.class_of(b, loc)
            leaves = self.leaves([(f.name, fname(f.name), f.type) for f in b.fields])
            W = sum(scalar_width(ft, loc) for _, _, ft in leaves)
            nb = (W + 7) // 8
            self.w(f"if off + {nb} > len(pkt):")
            self.w(f"    raise ParserError({ERR_PACKET_TOO_SHORT})")
            v = self.fresh("v")
            self.w(f"{v} = int.from_bytes(pkt[off:off + {nb}], 'big') >> {nb * 8 - W}")
            self.w(f"{tmp} = {cls}()")
            sh = W
            for _, p, ft in leaves:
                wd = scalar_width(ft, loc)
                sh -= wd
                self.w(f"{tmp}.{p} = {from_unsigned(f'(({v} >> {sh}) & {mask_of(wd):#x})', ft)}")
            return tmp
        if isinstance(b, T.Header):
            cls = self.class_of(b, loc)
            fixed = b.bit_width()
            nb = (fixed + 7) // 8
            self.w(f"if off + {nb} > len(pkt):")
            self.w(f"    raise ParserError({ERR_PACKET_TOO_SHORT})")
            self.w(f"{tmp} = {cls}()")
            self.w(f"{tmp}._ext(pkt, off)")
            return tmp
        raise P4Unsupported(loc, f"lookahead of {t}")

    # -- deparser ------------------------------------------------------------

    def packet_out_method(self, base: ir.Expr, m: str, ce: ir.CallExpr) -> None:
        """core.p4's ``packet_out.emit(hdr)`` in a deparser."""
        if m != "emit":
            raise P4Unsupported(ce.loc, f"packet_out.{m}")
        self.emit_value(ce.args[0].value, self.ex(base))

    def emit_value(self, e: ir.Expr, out: str) -> None:
        t = base_t(e.type)
        code = self.ex(e)
        self._emit_obj(code, t, out, e.loc)

    def _emit_obj(self, code: str, t: T.P4Type, out: str, loc: Location) -> None:
        if isinstance(t, T.Header):
            self.class_of(t, loc)
            self.w(f"if {code}._valid:")
            if self.trace:
                self.w(f"    _trace(st, {repr(f'Deparsing header {self.code_instance(code)!r}')})")
            self.w(f"    {out}.append({code}._emit())")
        elif isinstance(t, T.HeaderUnion):
            for f in t.fields:
                self._emit_obj(f"{code}.{fname(f.name)}", base_t(f.type), out, loc)
        elif isinstance(t, T.Struct):
            for f in t.fields:
                self._emit_obj(f"{code}.{fname(f.name)}", base_t(f.type), out, loc)
        elif isinstance(t, T.Stack):
            for i in range(t.size):
                self._emit_obj(f"{code}.e[{i}]", base_t(t.elem), out, loc)
        else:
            raise P4Unsupported(loc, f"emit of {t}")

