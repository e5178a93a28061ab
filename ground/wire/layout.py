"""A header declared once: its fields in wire order, and from them the
building, the parsing, each field's position and the fast paths.

A :class:`Header` is a list of fields, unsigned big-endian integers of any
bit width (:class:`Field`) or fixed runs of bytes (:class:`Bytes`, for
addresses). From that one list it derives:

- ``struct``: a precompiled ``struct.Struct`` of the header's words. Fields
  narrower than a byte or not a struct size (BTH's 24-bit QPN and PSN) share
  a word of 8, 16 or 32 bits with their neighbours;
- ``pack(**fields) -> bytes`` and ``pack_into(buf, off, **fields)``: unnamed
  fields take their declared defaults; a field sharing a word is cut to its
  width, a field that is a whole word is range-checked by ``struct``;
- ``unpack(buf, off=0) -> tuple``: every field's value in declared order;
- ``getter(name)``: a function ``(buf, off=0) -> value`` reading one field;
- ``packer(*names)`` and ``unpacker(*names)``: the hot loops' fast paths, a
  build taking just the fields a caller sets (positionally, the others'
  defaults folded into constants) and a parse returning just the fields it
  reads;
- ``position(name)``: where a field sits (its word's offset and size, the
  shift and mask in that word), for code that matches fields in place
  (socket filters, tc u32 keys, the ICRC's masked bytes).

These functions are straight-line Python generated once per header (or
per set of names) from the word layout, so a packet costs one ``struct``
call and a few shifts, with no per-packet loop over fields and no object
besides the result; where every field is a whole word the fast paths are
the struct's own methods. The virtual-time engine moves millions of packets
through them, under CPython and PyPy.
"""

from __future__ import annotations

import keyword
import struct
import types
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

__all__ = ["Field", "Bytes", "Header", "FieldPos", "Value"]

Value = Any        # int for a Field, bytes for a Bytes

# struct codes of the word sizes (bits) a run of integer fields may fill
_WORD_CODES = {8: "B", 16: "H", 32: "I", 64: "Q"}


@dataclass(frozen=True)
class Field:
    """An unsigned integer of ``bits`` bits, most significant bit first."""

    name: str
    bits: int
    default: int = 0

    def __post_init__(self) -> None:
        if not 1 <= self.bits <= 64:
            raise ValueError(f"field {self.name}: {self.bits} bits (1..64)")
        if not 0 <= self.default < 1 << self.bits:
            raise ValueError(f"field {self.name}: default {self.default} does not fit "
                             f"{self.bits} bits")


@dataclass(frozen=True)
class Bytes:
    """``size`` bytes taken as they are (a MAC or IPv4 address)."""

    name: str
    size: int
    default: bytes = b""

    def __post_init__(self) -> None:
        if self.size < 1:
            raise ValueError(f"field {self.name}: {self.size} bytes")
        if self.default and len(self.default) != self.size:
            raise ValueError(f"field {self.name}: default of {len(self.default)} bytes, "
                             f"not {self.size}")

    @property
    def bits(self) -> int:
        return self.size * 8


@dataclass(frozen=True)
class FieldPos:
    """Where a field sits: in the ``size``-byte word at byte ``offset`` of the
    header, ``(word >> shift) & mask``."""

    offset: int
    size: int
    shift: int
    mask: int

    @property
    def bits(self) -> int:
        return self.mask.bit_length()

    @property
    def byte(self) -> int:
        """The offset of the byte that holds the field's most significant bit."""
        return self.offset + (self.size * 8 - self.shift - self.bits) // 8

    def within(self, offset: int, size: int) -> FieldPos:
        """The same field seen in the ``size``-byte word at ``offset`` (a filter's
        load of 1, 2 or 4 bytes); ValueError if the field is not all in it."""
        end = self.offset * 8 + self.size * 8 - self.shift       # bit after the field
        if not (offset * 8 <= end - self.bits and end <= (offset + size) * 8):
            raise ValueError(f"a field at bits {end - self.bits}..{end - 1} is not in the "
                             f"{size}-byte word at byte {offset}")
        return FieldPos(offset, size, (offset + size) * 8 - end, self.mask)


@dataclass(frozen=True)
class _Word:
    code: str
    offset: int
    fields: tuple[Field | Bytes, ...]


def _words(fields: tuple[Field | Bytes, ...]) -> list[tuple[Field | Bytes, ...]]:
    """The fields cut into words. Each word is a Bytes field alone, an integer
    field of 8, 16, 32 or 64 bits alone, or a run of integer fields filling 8,
    16 or 32 bits; of the cuts that work, the one with the fewest fields
    needing a shift (a field alone in its word needs none), then the fewest
    words."""
    n = len(fields)
    best: list[tuple[int, int, int] | None] = [None] * (n + 1)   # cost, words, next cut
    best[n] = (0, 0, n)
    for i in range(n - 1, -1, -1):
        if isinstance(fields[i], Bytes):
            nxt = best[i + 1]
            if nxt is not None:
                best[i] = (nxt[0], nxt[1] + 1, i + 1)
            continue
        bits = 0
        for j in range(i + 1, n + 1):
            f = fields[j - 1]
            if isinstance(f, Bytes):
                break
            bits += f.bits
            if bits > 64:
                break
            nxt = best[j]
            # fields sharing a word share at most 32 bits: a 64-bit word of
            # several would make PyPy's JIT fall back to big integers
            if bits in _WORD_CODES and nxt is not None and (j - i == 1 or bits <= 32):
                cand = (nxt[0] + (0 if j - i == 1 else j - i), nxt[1] + 1, j)
                cur = best[i]
                if cur is None or cand[:2] < cur[:2]:
                    best[i] = cand
    if best[0] is None:
        raise ValueError("the fields cannot be cut into 8/16/32/64-bit words: "
                         + ", ".join(f"{f.name}:{f.bits}" for f in fields))
    out = []
    i = 0
    while i < n:
        step = best[i]
        assert step is not None
        out.append(fields[i:step[2]])
        i = step[2]
    return out


def _namespace(name: str) -> dict[str, Any]:
    """The globals of generated code: a module's dictionary, whose entries
    PyPy's JIT treats as constants (a plain dict's it looks up on every
    call, and a struct it does not know cannot be specialised)."""
    return types.ModuleType(f"ground.wire.layout<{name}>").__dict__


def _default(f: Field | Bytes) -> Value:
    return f.default if isinstance(f, Field) else (f.default or bytes(f.size))


class Header:
    """A header's one declaration (see the module's docstring).

    ``order`` is the struct byte order of its words: "!" (network order) but
    for a little-endian trailer such as RoCE's ICRC."""

    # (the generated functions are set in __init__; their types are these)
    pack: Callable[..., bytes]
    pack_into: Callable[..., None]
    unpack: Callable[..., tuple[Value, ...]]

    def __init__(self, name: str, *fields: Field | Bytes, order: str = "!") -> None:
        if len({f.name for f in fields}) != len(fields):
            raise ValueError(f"{name}: two fields of one name")
        for f in fields:
            # (the names become the generated functions' parameters)
            if not f.name.isidentifier() or keyword.iskeyword(f.name) or f.name[0] == "_":
                raise ValueError(f"{name}: field name {f.name!r} is not a plain identifier")
        if order not in ("!", "<"):
            raise ValueError(f"{name}: byte order {order!r} (! or <)")
        self.name = name
        self.fields = tuple(fields)
        self.names = tuple(f.name for f in fields)
        self.order = order
        words: list[_Word] = []
        off = 0
        for group in _words(self.fields):
            f0 = group[0]
            code = f"{f0.size}s" if isinstance(f0, Bytes) else _WORD_CODES[
                sum(f.bits for f in group)]
            words.append(_Word(code, off, group))
            off += struct.calcsize("!" + code)
        self.size = off
        self.struct = struct.Struct(order + "".join(w.code for w in words))
        self._words = tuple(words)
        if order == "<" and any(len(w.fields) > 1 for w in words):
            # a shift within a little-endian word would not say which bytes hold it
            raise ValueError(f"{name}: a little-endian header has one field per word")
        self._pos: dict[str, FieldPos] = {}
        for w in words:
            size = struct.calcsize("!" + w.code)
            left = size * 8
            for f in w.fields:
                left -= f.bits
                self._pos[f.name] = FieldPos(w.offset, size, left, (1 << f.bits) - 1)
        self._getters: dict[str, Callable[..., Value]] = {}
        self._made: dict[tuple[str, ...], Callable[..., Any]] = {}
        # every field a word of its own: the struct's own methods are the fast paths
        self._plain = all(len(w.fields) == 1 for w in words)
        self._generate()

    def __repr__(self) -> str:
        return f"Header({self.name}: {self.size} bytes, {', '.join(self.names)})"

    def position(self, name: str) -> FieldPos:
        """Where field ``name`` sits in the header."""
        try:
            return self._pos[name]
        except KeyError:
            raise KeyError(f"{self.name} has no field {name!r}") from None

    def offset(self, name: str) -> int:
        """The byte offset of field ``name``'s first byte."""
        return self.position(name).byte

    def defaults(self) -> dict[str, Value]:
        """Each field's value when ``pack`` is not given it."""
        return {f.name: _default(f) for f in self.fields}

    def parse(self, buf: Any, off: int = 0) -> dict[str, Value]:
        """The fields at ``buf[off:]`` by name (for tests and tools; hot paths
        take ``unpack``'s tuple or a getter)."""
        values = self.unpack(buf, off)
        return {name: values[i] for i, name in enumerate(self.names)}

    def getter(self, name: str) -> Callable[..., Value]:
        """``get(buf, off=0)``: field ``name`` of the header at ``buf[off:]``."""
        g = self._getters.get(name)
        if g is None:
            g = self._getter(name)
            self._getters[name] = g
        return g

    def packer(self, *names: str) -> Callable[..., bytes]:
        """``pack(v1, v2, ...)``: the header with fields ``names`` given in that
        order, positionally, and every other field its default, folded in as
        a constant. The fastest build, for a hot loop that always sets the
        same fields (for all the fields of a header whose fields are whole
        words, the struct's own ``pack``)."""
        key = ("pack",) + names
        fn = self._made.get(key)
        if fn is None and names == self.names and self._plain:
            fn = self._made[key] = self.struct.pack     # (no Python frame at all)
        if fn is None:
            for n in names:
                self.position(n)        # (an unknown name fails here)
            args = ", ".join(names)
            fn = self._make(f"def pack({args}):\n"
                            f"    return _s.pack({self._values(set(names))})\n", "pack")
            self._made[key] = fn
        return fn

    def unpacker(self, *names: str) -> Callable[..., tuple[Value, ...]]:
        """``unpack(buf, off=0)``: the values of fields ``names`` only, in that
        order (for all the fields of a header whose fields are whole words, the
        struct's own ``unpack_from``)."""
        key = ("unpack",) + names
        fn = self._made.get(key)
        if fn is None and names == self.names and self._plain:
            fn = self._made[key] = self.struct.unpack_from
        if fn is None:
            exprs = self._field_exprs()
            try:
                values = [exprs[n] for n in names]
            except KeyError as e:
                raise KeyError(f"{self.name} has no field {e.args[0]!r}") from None
            fn = self._make(self._unpack_src(values), "unpack")
            self._made[key] = fn
        return fn

    # -- code generation ---------------------------------------------------
    # Each function is generated once, as source, from the word layout: a
    # packet then runs a single struct call and plain integer operations.

    def _values(self, given: set[str]) -> str:
        """The words to pack, as expressions of the ``given`` fields' argument
        names; the other fields' defaults are folded into constants."""
        out = []
        for w in self._words:
            if len(w.fields) == 1:
                f = w.fields[0]
                out.append(f.name if f.name in given else repr(_default(f)))
                continue
            terms = []
            const = 0
            left = sum(f.bits for f in w.fields)
            for f in w.fields:
                left -= f.bits
                if f.name in given:
                    term = f"({f.name} & {(1 << f.bits) - 1:#x})"
                    terms.append(f"{term} << {left}" if left else term)
                else:
                    const |= _default(f) << left
            if const or not terms:
                terms.append(f"{const:#x}")
            out.append("(" + " | ".join(terms) + ")" if len(terms) > 1 else terms[0])
        return ", ".join(out)

    def _field_exprs(self) -> dict[str, str]:
        """Each field as an expression of the unpacked words w0, w1, ..."""
        out = {}
        for i, w in enumerate(self._words):
            var = f"w{i}"
            if len(w.fields) == 1:
                out[w.fields[0].name] = var
                continue
            left = sum(f.bits for f in w.fields)
            for k, f in enumerate(w.fields):
                left -= f.bits
                shifted = f"{var} >> {left}" if left else var
                out[f.name] = shifted if k == 0 else f"{shifted} & {(1 << f.bits) - 1:#x}"
        return out

    def _unpack_src(self, values: list[str]) -> str:
        words = ", ".join(f"w{i}" for i in range(len(self._words)))
        return (f"def unpack(buf, off=0):\n"
                f"    {words}{',' if len(self._words) == 1 else ''} = _s.unpack_from(buf, off)\n"
                f"    return ({', '.join(values)}{',' if len(values) == 1 else ''})\n")

    def _make(self, src: str, name: str, **env: Any) -> Callable[..., Any]:
        ns = _namespace(self.name)
        ns["_s"] = self.struct
        ns.update(env)
        exec(compile(src, f"<{self.name} {name}>", "exec"), ns)
        fn: Callable[..., Any] = ns[name]
        return fn

    def _generate(self) -> None:
        defaults = {f"_d_{f.name}": _default(f) for f in self.fields}
        signature = ", ".join(f"{f.name}=_d_{f.name}" for f in self.fields)
        values = self._values(set(self.names))
        exprs = self._field_exprs()
        self.pack = self._make(f"def pack({signature}):\n"
                               f"    return _s.pack({values})\n", "pack", **defaults)
        self.pack_into = self._make(f"def pack_into(buf, off, {signature}):\n"
                                    f"    _s.pack_into(buf, off, {values})\n", "pack_into",
                                    **defaults)
        self.unpack = self._make(self._unpack_src([exprs[n] for n in self.names]), "unpack")

    def _getter(self, name: str) -> Callable[..., Value]:
        p = self.position(name)
        f = self.fields[self.names.index(name)]
        env: dict[str, Any] = {}
        if isinstance(f, Bytes):
            body = f"bytes(buf[off + {p.offset}:off + {p.offset + p.size}])"
        elif self.order == "!" and p.shift % 8 + f.bits <= 8:
            # inside one byte: index it (no struct call)
            sh = p.shift % 8
            body = f"buf[off + {p.byte}]" + (f" >> {sh}" if sh else "")
            if sh + f.bits < 8:
                body = f"({body}) & {p.mask:#x}"
        else:
            env["_w"] = struct.Struct(self.order + _WORD_CODES[p.size * 8])
            body = f"_w.unpack_from(buf, off + {p.offset})[0]"
            if p.shift:
                body = f"({body} >> {p.shift})"
            if p.shift + f.bits < p.size * 8:
                body = f"{body} & {p.mask:#x}"
        return self._make(f"def get(buf, off=0):\n    return {body}\n", "get", **env)
