"""Shared helpers for the backend/compiler tests: a tiny dict-backed fake of
contract.Services and a driver that runs one packet through a compiled program."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from switches.soft.compiler import compile_program

SKELETON = """
#include <core.p4>
#include <v1model.p4>
header h_t { bit<8> a; bit<8> b; bit<8> c; bit<8> d; }
@@DECLS@@
struct headers { h_t h; @@HFIELDS@@ }
struct meta_t { @@MFIELDS@@ }
parser P(packet_in pk, out headers hdr, inout meta_t m, inout standard_metadata_t sm) {
    @@PARSER@@
}
control V(inout headers hdr, inout meta_t m) { apply {} }
control I(inout headers hdr, inout meta_t m, inout standard_metadata_t sm) {
    @@ILOCALS@@
    apply { @@INGRESS@@ }
}
control E(inout headers hdr, inout meta_t m, inout standard_metadata_t sm) { apply {} }
control C(inout headers hdr, inout meta_t m) { apply {} }
control D(packet_out pk, in headers hdr) { apply { @@DEPARSER@@ } }
V1Switch(P(), V(), I(), E(), C(), D()) main;
"""

DEFAULT_PARSER = "state start { pk.extract(hdr.h); transition accept; }"


def program(ingress: str = "", *, decls: str = "", hfields: str = "", mfields: str = "",
            parser: str = DEFAULT_PARSER, ilocals: str = "", deparser: str = "pk.emit(hdr);") -> str:
    src = SKELETON
    for k, v in (("DECLS", decls), ("HFIELDS", hfields), ("MFIELDS", mfields), ("PARSER", parser),
                 ("ILOCALS", ilocals), ("INGRESS", ingress), ("DEPARSER", deparser)):
        src = src.replace(f"@@{k}@@", v)
    return src


class FakeTable:
    def __init__(self, info: Any) -> None:
        self.info = info
        self.entries: dict[tuple[int, ...], tuple[str, tuple[int, ...]]] = {}
        self.lookups: list[tuple[int, ...]] = []
        for e in info.entries:  # exact const entries only
            self.entries[tuple(e.matches)] = (e.action, tuple(e.args))

    def apply(self, key: tuple[int, ...]) -> tuple[str, tuple[int, ...], bool]:
        self.lookups.append(key)
        if key in self.entries:
            a, d = self.entries[key]
            return a, d, True
        return self.info.default_action, tuple(self.info.default_args), False


class FakeRegister:
    def __init__(self, size: int) -> None:
        self.cells = [0] * size

    def read(self, index: int) -> int:
        return self.cells[index]

    def write(self, index: int, value: int) -> None:
        self.cells[index] = value


class FakeCounter:
    def __init__(self) -> None:
        self.counts: dict[int, int] = {}

    def count(self, index: int, packet_length: int) -> None:
        self.counts[index] = self.counts.get(index, 0) + 1


class FakeServices:
    def __init__(self, info: Any) -> None:
        self.tables = {n: FakeTable(t) for n, t in info.tables.items()}
        self.registers = {n: FakeRegister(r.size) for n, r in info.registers.items()}
        self.counters = {n: FakeCounter() for n in info.counters}
        self.logs: list[tuple[str, list[Any]]] = []

    def table(self, name: str) -> FakeTable:
        return self.tables[name]

    def register(self, name: str) -> FakeRegister:
        return self.registers[name]

    def counter(self, name: str) -> FakeCounter:
        return self.counters[name]

    def meter(self, name: str) -> Any:
        raise KeyError(name)

    def direct_meter_read(self, table: str, packet_length: int) -> int:
        return 0

    def hash(self, algo: str, base: int, data: list[tuple[int, int]], max_: int) -> int:
        h = sum(v for v, _ in data)
        return base + (h % max_) if max_ else base

    def checksum(self, algo: str, data: list[tuple[int, int]]) -> int:
        # ones' complement sum of 16-bit words (csum16)
        v, n = 0, 0
        for val, w in data:
            v = (v << w) | val
            n += w
        if n % 16:
            v <<= 16 - n % 16
            n += 16 - n % 16
        s = 0
        for i in range(n // 16):
            s += (v >> (16 * i)) & 0xFFFF
        while s >> 16:
            s = (s & 0xFFFF) + (s >> 16)
        return ~s & 0xFFFF

    def random(self, lo: int, hi: int) -> int:
        return lo

    def now_us(self) -> int:
        return 0

    def log_msg(self, fmt: str, args: list[Any]) -> None:
        self.logs.append((fmt, args))

    def mark_to_drop(self, sm: Any) -> None:
        sm.egress_spec = 511
        sm.mcast_grp = 0


class Harness:
    """A compiled program plus fake services; ``run`` sends one packet."""

    def __init__(self, src: str, tmp_path: Path, name: str = "prog") -> None:
        p = tmp_path / f"{name}.p4"
        p.write_text(src)
        self.module = compile_program(p)
        self.info = self.module.INFO
        self.rt = FakeServices(self.info)
        self.prog = self.module.make_program(self.rt)

    def run(self, packet: bytes, port: int = 1) -> tuple[bytes, Any]:
        prog = self.prog
        st = prog.new_state()
        st.sm.ingress_port = port
        st.sm.packet_length = len(packet)
        prog.parse(st, packet)
        prog.verify_checksum(st)
        prog.ingress(st)
        prog.egress(st)
        prog.compute_checksum(st)
        return prog.deparse(st), st
