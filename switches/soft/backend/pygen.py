"""Python code generation for checked v1model programs.

``generate(checked)`` returns the source of a module defining ``INFO``
(contract.ProgramInfo) and ``make_program(rt) -> CompiledProgram``.

The generated code is specialized to the program: one class per header /
struct / union type, and one Python function per pipeline block in which
every action, function, table dispatch and nested control/parser is inlined,
so a packet runs straight-line code with no tree walking.  Values are Python
ints masked to their width after each operation that can overflow.

What one packet costs is kept small where it is paid per packet:
- scalar fields start as class attributes (creating a header or struct object
  stores nothing; an instance holds only what was written);
- a header whose fields fall into whole-byte units of at most 8 bytes is
  extracted and emitted with one precompiled ``struct`` format (shifts and
  masks only inside a unit), others through one big integer;
- csum16 over fixed-width data (verify/update_checksum, Checksum16) is
  computed inline as a sum of small integers reduced modulo 0xFFFF
  (``rtlib.csum16_int``), without building a list or bytes.
"""

from __future__ import annotations

import keyword
import re
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from ..frontend import ir
from ..frontend.source import UNKNOWN, Location, P4Error, P4Unsupported
from ..midend import types as T
from ..runtime.contract import (
    ActionInfo,
    CounterInfo,
    DigestInfo,
    EntryInfo,
    KeyInfo,
    MeterInfo,
    ParamInfo,
    ProgramInfo,
    RegisterInfo,
    TableInfo,
)

CORE_ERRORS = ["NoError", "PacketTooShort", "NoMatch", "StackOutOfBounds",
               "HeaderTooShort", "ParserTimeout", "ParserInvalidArgument"]
ERR_PACKET_TOO_SHORT = 1
ERR_NO_MATCH = 2
ERR_STACK_OOB = 3
ERR_HEADER_TOO_SHORT = 4
ERR_INVALID_ARG = 6


# ---------------------------------------------------------------------------
# Type helpers


def base_t(t: Any) -> Any:
    """Representation type: new-types and serializable enums become bits."""
    while True:
        if isinstance(t, T.NewType):
            t = t.base
        elif isinstance(t, T.Enum) and t.underlying is not None:
            t = t.underlying
        else:
            return t


def is_composite(t: Any) -> bool:
    return isinstance(base_t(t), (T.StructLike, T.Stack))


def scalar_width(t: Any, loc: Location = UNKNOWN) -> int:
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


def wrap(code: str, t: Any) -> str:
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


def unsigned(code: str, t: Any) -> str:
    """Bit pattern (non-negative int) of a scalar value of type ``t``."""
    b = base_t(t)
    if isinstance(b, T.Bits) and b.signed:
        return f"(({code}) & {mask_of(b.width):#x})"
    if isinstance(b, T.Bool):
        return f"(1 if {code} else 0)"
    return code


def from_unsigned(code: str, t: Any) -> str:
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
_BYTE_CODES = {1: "B", 2: "H", 3: "HB", 4: "I", 5: "IB", 6: "IH", 7: "IHB", 8: "Q"}
_CODE_BYTES = {"B": 1, "H": 2, "I": 4, "Q": 8}


def _struct_units(fields: list[tuple[str, str, Any]]
                  ) -> list[tuple[int, list[tuple[str, Any, int, int]]]] | None:
    """Split a fixed-width header's fields into units of 1..8 whole bytes
    (a unit ends where the fields so far end on a byte boundary), each with
    its fields as (attribute, type, width, shift within the unit); None if
    some unit would exceed 8 bytes (e.g. a 128-bit field)."""
    units: list[tuple[int, list[tuple[str, Any, int, int]]]] = []
    cur: list[tuple[str, Any, int]] = []
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


def _walk(node: Any) -> Iterator[Any]:
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
    return any(isinstance(n, ir.ReturnStmt) for n in _walk(body))


# ---------------------------------------------------------------------------
# The generator


class Gen:
    def __init__(self, checked: Any) -> None:
        self.checked = checked
        self.program: ir.Program = checked.program
        self.buf: list[str] = []
        self.ind = 0
        self.n = 0
        self.env: dict[int, str] = {}
        self.classes: dict[str, str] = {}  # struct-like type name -> class name
        self.class_decls: dict[str, Any] = {}
        self.class_src: list[str] = []
        self.bindings: list[str] = []  # make_program lines binding runtime objects
        self.bound: dict[tuple[str, str], str] = {}
        self.prefix = ""
        # return targets: [result var, 'break'|'return', loop-exit flag, loop depth]
        self.ret: list[list[Any]] = []
        self.pkt: str | None = None  # parser packet variable names active
        self.out_var: str | None = None  # deparser output list
        self.toplevel_actions: set[int] = set()
        self.action_prefix: dict[int, str] = {}
        self.direct_meter_table: dict[str, str] = {}
        self.field_lists: dict[int, list[tuple[str, str, Any]]] = {}
        name = self.program.files[0] if self.program.files else "program"
        stem = name.rsplit("/", 1)[-1]
        if stem.endswith(".p4"):
            stem = stem[:-3]
        self.info = ProgramInfo(name=stem)
        self.errors = self._collect_errors()
        self.info.errors = list(self.errors)
        self.decl_by_name: dict[str, Any] = {}
        self.top_params: dict[str, str] = {}
        self.override: dict[int, str] = {}
        self.inst_alias: dict[int, tuple[Any, str]] = {}
        self.anon: dict[tuple[int, str], ir.InstantiationDecl] = {}
        self.toplevel_ids = {id(d) for d in self.program.decls}
        for d in self.program.decls:
            if isinstance(d, ir.ActionDecl):
                self.toplevel_actions.add(id(d))
            if isinstance(d, ir.Decl):
                self.decl_by_name.setdefault(d.name, d)

    # -- output helpers ------------------------------------------------------

    def w(self, line: str) -> None:
        self.buf.append("    " * self.ind + line)

    def fresh(self, base: str = "t") -> str:
        self.n += 1
        return f"{ident(base)}_{self.n}"

    @contextmanager
    def indent(self) -> Iterator[None]:
        self.ind += 1
        n0 = len(self.buf)
        try:
            yield
        finally:
            if not self.code_since(n0):
                self.w("pass")
            self.ind -= 1

    def code_since(self, n0: int) -> bool:
        return any(not ln.lstrip().startswith("#") for ln in self.buf[n0:])

    @contextmanager
    def capture(self) -> Iterator[list[str]]:
        saved = self.buf
        self.buf = []
        out = self.buf
        try:
            yield out
        finally:
            self.buf = saved

    def splice(self, lines: list[str], extra: int = 0) -> None:
        pad = "    " * extra
        self.buf.extend(pad + ln for ln in lines)

    def comment(self, node: ir.Node, what: str = "") -> None:
        loc = node.loc
        if loc is not None and loc.line:
            self.w(f"# {what}{' ' if what else ''}{loc.file.rsplit('/', 1)[-1]}:{loc.line}")

    # -- program-wide facts --------------------------------------------------

    def _collect_errors(self) -> list[str]:
        errs: list[str] = []
        for d in self.program.decls:
            if isinstance(d, ir.ErrorDecl):
                for m in d.members:
                    if m not in errs:
                        errs.append(m)
        rest = [e for e in errs if e not in CORE_ERRORS]
        return CORE_ERRORS + rest

    def error_value(self, name: str, loc: Location) -> int:
        try:
            return self.errors.index(name)
        except ValueError:
            raise P4Error(loc, f"unknown error '{name}'") from None

    # -- classes -------------------------------------------------------------

    def class_of(self, t: Any, loc: Location = UNKNOWN) -> str:
        t = base_t(t)
        if not isinstance(t, T.StructLike):
            raise P4Unsupported(loc, f"type {t} as a composite value")
        c = self.classes.get(t.name)
        if c is None:
            self.gen_class(t, loc)
            c = self.classes[t.name]
        return c

    def default(self, t: Any, loc: Location = UNKNOWN) -> str:
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

    def gen_class(self, t: Any, loc: Location) -> None:
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
        def cp(src: str, p: str, ft: Any) -> str:
            return f"{src}.{p}._copy()" if is_composite(ft) else f"{src}.{p}"
        a("    def _copy(self):")
        a(f"        o = {cls}.__new__({cls})")
        for s in slots:
            ft = next((ft for _, p, ft in fields if p == s), None)
            a(f"        o.{s} = {cp('self', s, ft)}")
        a("        return o")
        a("")
        a("    def _set(self, s):")
        for s in slots:
            ft = next((ft for _, p, ft in fields if p == s), None)
            if is_composite(ft):
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
            self._gen_header_io(t, cls, fields, L)
        self.class_src.append("\n".join(L))
        self.class_decls[t.name] = t

    def _gen_header_io(self, t: Any, cls: str, fields: list[tuple[str, str, Any]],
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
        units = _struct_units(fields) if var is None else None
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
                              units: list[tuple[int, list[tuple[str, Any, int, int]]]],
                              L: list[str]) -> None:
        """_ext/_emit through one precompiled struct format (see _struct_units)."""
        a = L.append
        fmt = ">" + "".join(c for n, _ in units for c in _BYTE_CODES[n])
        a(f"    _nbytes = {nbytes}")
        a("")
        a("    def _ext(self, pkt, off):")
        names: list[str] = []
        for i, (n, _) in enumerate(units):
            names += [f"u{i}_{j}" for j in range(len(_BYTE_CODES[n]))]
        a(f"        {', '.join(names)}{',' if len(names) == 1 else ''} = _U_{cls}(pkt, off)")
        k = 0
        for i, (n, flds) in enumerate(units):
            parts = _BYTE_CODES[n]
            if len(parts) == 1:
                u = names[k]
            else:
                u = f"u{i}"
                sh = n * 8
                terms = []
                for j, c in enumerate(parts):
                    sh -= _CODE_BYTES[c] * 8
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
            parts = _BYTE_CODES[n]
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
                w = _CODE_BYTES[c] * 8
                sh -= w
                part = f"({val} >> {sh})" if sh else val
                args.append(f"({part} & {mask_of(w):#x})" if sh + w < n * 8 else part)
        a(f"        return _P_{cls}({', '.join(args)})")
        a("")
        a("")
        a(f"_S_{cls} = _Struct({fmt!r})")
        a(f"_U_{cls} = _S_{cls}.unpack_from")
        a(f"_P_{cls} = _S_{cls}.pack")

    def leaves(self, fields: list[tuple[str, str, Any]]) -> list[tuple[str, str, Any]]:
        """Scalar leaves of a field list, structs flattened (``row.a``)."""
        out: list[tuple[str, str, Any]] = []
        for n, p, ft in fields:
            b = base_t(ft)
            if isinstance(b, T.Struct):
                sub = [(f.name, fname(f.name), f.type) for f in b.fields]
                out += [(n + "." + n2, p + "." + p2, t2) for n2, p2, t2 in self.leaves(sub)]
            else:
                out.append((n, p, ft))
        return out

    # -- naming --------------------------------------------------------------

    def cp_name(self, decl: Any, prefix: str | None = None) -> str:
        """Control-plane name of a declaration inside the current control."""
        prefix = self.prefix if prefix is None else prefix
        n = annotation_str(getattr(decl, "annotations", []), "name")
        if n is not None:
            if n.startswith("."):
                return n[1:]
            return f"{prefix}.{n}" if prefix else n
        return f"{prefix}.{decl.name}" if prefix else decl.name

    def action_name(self, decl: ir.ActionDecl) -> str:
        if id(decl) in self.toplevel_actions:
            n = annotation_str(decl.annotations, "name")
            return (n[1:] if n and n.startswith(".") else n) if n else decl.name
        p = self.action_prefix.get(id(decl), self.prefix)
        return self.cp_name(decl, p)

    def inst_name(self, d: Any) -> str:
        """Control-plane name of an instance (top-level ones have no prefix)."""
        return self.cp_name(d, "" if id(d) in self.toplevel_ids else None)

    def bind_runtime(self, kind: str, name: str) -> str:
        key = (kind, name)
        v = self.bound.get(key)
        if v is None:
            v = self.fresh(f"{kind}_{name.rsplit('.', 1)[-1]}")
            self.bindings.append(f"{v} = rt.{kind}({name!r})")
            self.bound[key] = v
        return v

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

    def _const_wrap(self, v: int, t: Any) -> int:
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
        if isinstance(base, ir.CallExpr) and self._is_table_apply(base):
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
            bits = sum(scalar_width(f.type) if not isinstance(base_t(f.type), T.Varbit) else
                       (0 if e.member.startswith("min") else base_t(f.type).max_width)
                       for f in st.fields)
            return str(bits if e.member.endswith("Bits") else (bits + 7) // 8)
        raise P4Unsupported(e.loc, f"member '{e.member}' of {base.type}")

    def ex_IndexExpr(self, e: ir.IndexExpr) -> str:
        b = self.ex(e.expr)
        if isinstance(base_t(e.expr.type), T.Tuple):
            return f"{b}[{self.const(e.index)}]"
        if isinstance(e.index, ir.IntLit):
            size = base_t(e.expr.type).size
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

    def _seq2(self, a: ir.Expr, b: ir.Expr) -> tuple[str, str]:
        """Evaluate two operands left to right, keeping the left value if the
        right one runs statements."""
        A = self.ex(a)
        with self.capture() as cb:
            B = self.ex(b)
        if cb and not _is_simple_const(A):
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
        A, B = self._seq2(e.left, e.right)
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
            if _is_simple_const(B) and int(B, 0) != 0:
                return f"({A} {pyop} {B})"
            return f"(({A} {pyop} {B}) if {B} else 0)"
        if op == "<<":
            return f"({wrap(f'{A} << {B}', b)} if {B} < {W} else 0)" if not _is_simple_const(B) \
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

    def cast(self, x: str, frm: Any, to: Any, loc: Location) -> str:
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
            vals = self._seqn(e.elems, [f.type for f in t.fields])
            return f"{self.class_of(t, e.loc)}._mk({', '.join(vals)})"
        vals = self._seqn(e.elems, None)
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
        vals = self._seqn(exprs, [f.type for f in t.fields])
        return f"{self.class_of(t, e.loc)}._mk({', '.join(vals)})"

    def _seqn(self, exprs: list[ir.Expr], types: list[Any] | None) -> list[str]:
        vals: list[str] = []
        for i, x in enumerate(exprs):
            with self.capture() as c:
                v = self.ex(x)
            if types is not None and isinstance(base_t(types[i]), T.Bits) \
                    and isinstance(base_t(x.type), T.Bool):
                v = f"(1 if {v} else 0)"
            if c:
                for j in range(len(vals)):
                    if not _is_simple_const(vals[j]):
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
            if isinstance(e.index, ir.IntLit) and 0 <= e.index.value < base_t(e.expr.type).size:
                return f"{b}.e[{e.index.value}]"
            ix = self.ex(e.index)
            if not _is_simple_name(ix):
                t = self.fresh("ix")
                self.w(f"{t} = {ix}")
                ix = t
            return f"{self.sidx}({b}, {ix})"
        raise P4Unsupported(e.loc, f"assignment to a {type(e).__name__}")

    def assign(self, lhs: ir.Expr, val: str, vt: Any, loc: Location, L: str | None = None) -> None:
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
            self._union_fixup(lhs, L)
            return
        if isinstance(base_t(lt), T.Bits) and isinstance(base_t(vt), T.Bool):
            val = f"(1 if {val} else 0)"
        self.w(f"{L} = {val}")

    def _union_fixup(self, lhs: ir.Expr, L: str) -> None:
        """A header that became valid inside a union invalidates its siblings."""
        if isinstance(lhs, ir.MemberExpr) and isinstance(base_t(lhs.expr.type), T.HeaderUnion):
            u = base_t(lhs.expr.type)
            others = [f.name for f in u.fields if f.name != lhs.member]
            if others:
                ub = L.rsplit(".", 1)[0]
                self.w(f"if {L}._valid:")
                for o in others:
                    self.w(f"    {ub}.{fname(o)}._valid = False")

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
        if not isinstance(s.lhs, ir.SliceExpr) and any(isinstance(n, ir.CallExpr) for n in _walk(s.lhs)):
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
        if not self._is_table_apply(s.call):
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
            lo, hi = self._seq2(c.left, c.right)
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
        if not _is_simple_name(x):
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

    def _is_table_apply(self, ce: ir.CallExpr) -> bool:
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
            if self._is_table_apply(ce):
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
                return self.extern_function(f.name, ce, want)
        raise P4Unsupported(ce.loc, f"call of {type(f).__name__}")

    def header_method(self, base: ir.Expr, bt: Any, m: str, loc: Location) -> str | None:
        if m == "isValid":
            b = self.ex(base)
            if isinstance(bt, T.HeaderUnion):
                return f"{b}.isValid()"
            return f"{b}._valid"
        b = self.lv(base)
        if isinstance(bt, T.HeaderUnion):
            raise P4Unsupported(loc, f"{m}() on a header union")
        if m == "setValid":
            self.w(f"{b}._valid = True")
            self._union_fixup(base, b)
        else:
            self.w(f"{b}._valid = False")
        return None

    # -- inlining of actions / functions / controls -------------------------

    def bind_params(self, params: list[ir.Param], args: list[ir.Expr | None],
                    loc: Location) -> list[tuple[ir.Expr, str, Any]]:
        """Copy-in: evaluate arguments left to right into fresh locals bound to
        the parameters. Returns the copy-out list (lvalue, local, type)."""
        outs: list[tuple[ir.Expr, str, Any]] = []
        binds: list[tuple[int, str]] = []
        for p, a in zip(params, args, strict=False):
            t = p.type.resolved
            bt = base_t(t)
            if isinstance(bt, T.Extern) or (a is not None and isinstance(base_t(a.type), T.Extern)):
                binds.append((id(p), self.ex(a) if a is not None else "None"))
                continue
            name = self.fresh(p.name)
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

    def copy_out(self, outs: list[tuple[ir.Expr, str, Any]], loc: Location) -> None:
        for a, name, t in outs:
            self.assign(a, name, t, loc)

    def inline_body(self, body: ir.BlockStmt, outs: list[tuple[ir.Expr, str, Any]],
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
            argv = self._ordered_args(d.params, args)
            outs = self.bind_params(d.params, argv, loc)
        else:
            dir_params = [p for p in d.params if p.direction]
            dl_params = [p for p in d.params if not p.direction]
            argv = self._ordered_args(dir_params, bound or [])
            outs = self.bind_params(dir_params, argv, loc)
            for i, p in enumerate(dl_params):
                name = self.fresh(p.name)
                self.w(f"{name} = {from_unsigned(f'{data}[{i}]', p.type.resolved)}")
                self.env[id(p)] = name
        self.inline_body(d.body, outs, None, loc)
        self.env = saved

    def _ordered_args(self, params: list[ir.Param], args: list[ir.Argument]) -> list[ir.Expr | None]:
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
        outs = self.bind_params(d.params, self._ordered_args(d.params, ce.args), ce.loc)
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
            outs = self.bind_params(d.params, self._ordered_args(d.params, ce.args), ce.loc)
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
            outs = self.bind_params(d.params, self._ordered_args(d.params, ce.args), ce.loc)
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
        argv = self._ordered_args(d.ctor_params, inst.args)
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
        raise P4Unsupported(d.loc, f"extern '{ename}'")

    def extern_method(self, base: ir.Expr, bt: Any, m: str, ce: ir.CallExpr,
                      want: bool) -> str | None:
        en = bt.name
        args = [a.value for a in ce.args]
        if en == "packet_in":
            return self.packet_in_method(m, ce)
        if en == "packet_out":
            if m != "emit":
                raise P4Unsupported(ce.loc, f"packet_out.{m}")
            self.emit_value(args[0], self.ex(base))
            return None
        obj = self.ex(base)
        sm = "st.sm"
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
            self.w(f"{obj}.count({self.ex(args[0])}, {sm}.packet_length)")
            return None
        if en == "meter" and m == "execute_meter":
            ix = self.ex(args[0])
            self.assign(args[1], f"{obj}.execute({ix}, {sm}.packet_length)", args[1].type, ce.loc)
            return None
        if en == "direct_counter" and m == "count":
            return None
        if en == "direct_meter" and m == "read":
            mname = eval(obj)
            table = self.direct_meter_table.get(mname)
            if table is None:
                raise P4Error(ce.loc, f"direct meter '{mname}' is not attached to a table")
            self.assign(args[0], f"rt.direct_meter_read({table!r}, {sm}.packet_length)",
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

    def _flatten_obj(self, code: str, t: Any, items: list[tuple[str, str]],
                     loc: Location) -> None:
        for f in t.fields:
            ft = base_t(f.type)
            c = f"{code}.{fname(f.name)}"
            if isinstance(ft, T.StructLike):
                self._flatten_obj(c, ft, items, loc)
            elif isinstance(ft, T.Stack):
                for i in range(ft.size):
                    self._flatten_obj(f"{c}.e[{i}]", base_t(ft.elem), items, loc)
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
        if name == "verify":
            if self.pkt is None:
                raise P4Unsupported(loc, "verify() outside a parser")
            c = self.ex(args[0])
            err = self.ex(args[1])
            self.w(f"if not {c}:")
            self.w(f"    raise ParserError({err})")
            return None
        if name in ("hash",):
            algo = self.enum_member(args[1])
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
                self.w(f"st.digests.append(({recv}, {tname!r}, {{{', '.join(items)}}}))")
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
            self.w(f"st.truncate_len = {self.ex(args[0])}")
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

    def checksum_call(self, name: str, algo: str, data: ir.Expr) -> str:
        """The checksum a (verify|update)_checksum[_with_payload] call computes over ``data``
        (and, for the payload forms, the packet's unparsed payload)."""
        if name.endswith("payload"):
            fields = self.flatten_data(data)
            fields = f"{fields} + [(int.from_bytes(st.payload, 'big'), 8 * len(st.payload))]"
            return f"rt.checksum({algo!r}, {fields})"
        return self.checksum_expr(algo, data, hoist=True)

    def legacy_field_list(self, e: ir.Expr) -> int:
        """Old-style resubmit/recirculate/clone3 data: a synthetic field list
        of the metadata lvalues named in ``e`` (numbered from 1000)."""
        paths: list[tuple[str, str, Any]] = []

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
            utype = base_t(target.expr.type)
            target = target.expr
        self.class_of(t, loc)  # the header's class must exist
        hdr = self.class_decls[t.name]
        fixed = sum(scalar_width(f.type) for f in hdr.fields
                    if not isinstance(base_t(f.type), T.Varbit))
        has_var = any(isinstance(base_t(f.type), T.Varbit) for f in hdr.fields)
        if stack_next:
            assert isinstance(target, ir.MemberExpr)  # stack.next
            s = self.lv(target.expr)
            size = base_t(target.expr.type).size
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
            maxw = next(base_t(f.type).max_width for f in hdr.fields
                        if isinstance(base_t(f.type), T.Varbit))
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
        if union_member is not None:
            for f in utype.fields:
                if f.name != union_member:
                    self.w(f"{U}.{fname(f.name)}._valid = False")
        if stack_next:
            self.w(f"{sv}.nextIndex += 1")
        else:
            self._union_fixup(target, L)

    def lookahead(self, t: Any, loc: Location) -> str:
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

    def emit_value(self, e: ir.Expr, out: str) -> None:
        t = base_t(e.type)
        code = self.ex(e)
        self._emit_obj(code, t, out, e.loc)

    def _emit_obj(self, code: str, t: Any, out: str, loc: Location) -> None:
        if isinstance(t, T.Header):
            self.class_of(t, loc)
            self.w(f"if {code}._valid:")
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

    # ======================================================================
    # Tables

    def register_table(self, d: ir.TableDecl) -> TableInfo:
        name = self.cp_name(d)
        ti = self.info.tables.get(name)
        if ti is not None:
            return ti
        if "implementation" in d.properties:
            raise P4Unsupported(d.property_locs.get("implementation", d.loc),
                                "table implementation (action_profile/action_selector)")
        keys = []
        for k in d.keys:
            kn = annotation_str(k.annotations, "name") or expr_text(k.expr)
            if k.match_kind == "selector":
                raise P4Unsupported(k.loc, "selector match kind")
            keys.append(KeyInfo(kn, k.match_kind, scalar_width(k.expr.type, k.loc)
                                if not _is_isvalid(k.expr) else 1))
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
        if any(ir.find_annotation(en.annotations, "priority") for en in d.entries):
            ti.largest_priority_wins = False  # BMv2's @priority: smaller wins
        lpw = d.properties.get("largest_priority_wins")
        if lpw is not None:
            ti.largest_priority_wins = bool(self.const(lpw))
        ctr = d.properties.get("counters")
        if ctr is not None:
            cd = getattr(ctr, "decl", None)
            if isinstance(cd, ir.InstantiationDecl):
                cname = self.inst_name(cd)
                kind = self.enum_member(cd.args[0].value)
                self.info.counters[cname] = CounterInfo(cname, 0, kind, direct_table=name)
                ti.direct_counter = cname
        mtr = d.properties.get("meters")
        if mtr is not None:
            md = getattr(mtr, "decl", None)
            if isinstance(md, ir.InstantiationDecl):
                mname = self.inst_name(md)
                kind = self.enum_member(md.args[0].value)
                self.info.meters[mname] = MeterInfo(mname, 0, kind, direct_table=name)
                ti.direct_meter = mname
                self.direct_meter_table[mname] = name
        self.info.tables[name] = ti
        return ti

    def _data_args(self, ad: ir.ActionDecl, args: list[ir.Argument], loc: Location) -> list[int]:
        dl = [p for p in ad.params if not p.direction]
        vals = self._ordered_args(dl, args)
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

    def key_value(self, k: ir.KeyElement) -> str:
        x = k.expr
        code = self.ex(x)
        t = base_t(x.type)
        if isinstance(t, T.Bool):
            return f"(1 if {code} else 0)"
        return unsigned(code, t)

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
        keys = self._seqn([k.expr for k in d.keys], None)
        kv = []
        for k, code in zip(d.keys, keys, strict=False):
            t = base_t(k.expr.type)
            kv.append(f"(1 if {code} else 0)" if isinstance(t, T.Bool) else unsigned(code, t))
        a, dd, h = self.fresh("act"), self.fresh("data"), self.fresh("hit")
        key = "(" + "".join(x + ", " for x in kv) + ")"
        self.w(f"{a}, {dd}, {h} = {tv}.apply({key})")
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
            keys = self._seqn(tr.exprs, None)
            kt = [x.type for x in tr.exprs]
            kv = []
            for code, _t in zip(keys, kt, strict=False):
                if _is_simple_name(code) or _is_simple_const(code):
                    kv.append(code)
                else:
                    tmp = self.fresh("k")
                    self.w(f"{tmp} = {code}")
                    kv.append(tmp)
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

    def keyset_cond(self, ks: ir.Expr, kv: list[str], kt: list[Any]) -> str:
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

    def keyset_elem(self, x: ir.Expr, k: str, t: Any) -> str:
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
        a("    ActionInfo, CounterInfo, DigestInfo, EntryInfo, KeyInfo, MeterInfo, ParamInfo,")
        a("    ProgramInfo, RegisterInfo, TableInfo, PacketState)")
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
            items = ", ".join(f"{k!r}: {_copy_expr('st.' + p, t)}" for k, p, t in paths)
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

    def collect_field_lists(self, meta_t: Any, sm_t: Any) -> dict[int, list[tuple[str, str, Any]]]:
        fl: dict[int, list[tuple[str, str, Any]]] = {}

        def go(t: Any, path: str, key: str) -> None:
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


def _copy_expr(code: str, t: Any) -> str:
    return f"{code}._copy()" if is_composite(t) else code


def _is_simple_const(code: str) -> bool:
    return bool(re.fullmatch(r"-?(0x[0-9a-fA-F]+|\d+)|True|False|'[^']*'", code))


def _is_simple_name(code: str) -> bool:
    return bool(re.fullmatch(r"[A-Za-z_]\w*", code))


def _is_isvalid(e: ir.Expr) -> bool:
    return (isinstance(e, ir.CallExpr) and isinstance(e.func, ir.MemberExpr)
            and e.func.member == "isValid")


def generate(checked: Any) -> str:
    """Python source of the module for a checked program (see module doc)."""
    return Gen(checked).generate()


__all__ = ["generate", "Gen"]
