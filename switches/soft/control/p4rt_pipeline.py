"""A forwarding pipeline as the P4Runtime server sees it: a compiled program
plus the P4Info whose ids the controller uses.

The P4Info a controller pushes is matched to the compiled program by name
(tables, actions, counters, meters, registers, digests; match fields and
parameters by name, else by position), so a P4Info from p4c works as well as
one from ``switches.soft.p4info`` even where ids differ (``@id``).

Device config (``ForwardingPipelineConfig.p4_device_config``) of the soft
target, one of:
- the P4_16 source text of the program (UTF-8); ``#include "..."`` lines
  are searched in the server's include directories (by default the
  directory of the program the switch started with and the project's
  ``switches/p4``);
- a JSON object ``{"program": "/path/prog.p4", "include_dirs": [...],
  "defines": {"NAME": "VALUE"}}`` naming a file on the switch's host.
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, TypeAlias

from switches.soft.control.p4rt_codec import P4RTError, invalid
from switches.soft.p4info import (
    ControllerHeaderInfo,
    build_p4info,
    controller_headers,
    p4info_key_name,
)
from switches.soft.runtime.contract import (
    CounterInfo,
    MeterInfo,
    ProgramInfo,
    ProgramModule,
    RegisterInfo,
    TableInfo,
)

if TYPE_CHECKING:
    from p4.config.v1 import p4info_pb2
    from p4.v1 import p4runtime_pb2 as pb

    # the P4Info messages of the indexed externs (each with a preamble)
    P4InfoExtern: TypeAlias = (p4info_pb2.Counter | p4info_pb2.DirectCounter | p4info_pb2.Meter
                    | p4info_pb2.DirectMeter | p4info_pb2.Register)

MATCH_KINDS = {2: "exact", 3: "lpm", 4: "ternary", 5: "range", 6: "optional"}
PRIORITY_KINDS = frozenset({"ternary", "range", "optional"})
SCOPE_TABLE_AND_DEFAULT, SCOPE_TABLE_ONLY, SCOPE_DEFAULT_ONLY = 0, 1, 2
PROJECT_P4_DIR = Path(__file__).resolve().parents[2] / "p4"


@dataclass
class FieldMeta:
    id: int
    name: str
    width: int
    kind: str
    key_index: int


@dataclass
class ParamMeta:
    id: int
    name: str
    width: int


@dataclass
class ActionMeta:
    id: int
    name: str
    params: list[ParamMeta]
    params_by_id: dict[int, tuple[int, ParamMeta]] = field(default_factory=dict)


@dataclass
class TableMeta:
    id: int
    name: str
    info: TableInfo
    fields: list[FieldMeta]
    fields_by_id: dict[int, FieldMeta]
    scopes: dict[int, int]  # action id -> scope
    needs_priority: bool
    is_const: bool
    const_default: bool
    direct_counter: str | None
    direct_meter: str | None


@dataclass
class OneShot:
    """A table entry's one-shot action set: the group and members made for it,
    and the set as the controller gave it (a read returns it unchanged)."""

    group: int
    members: list[int]
    actions: pb.ActionProfileActionSet


@dataclass
class ProfileMeta:
    """An action profile/selector and the controller's ids of its members and
    groups (P4Runtime ids are the controller's; the switch has handles)."""

    id: int
    name: str
    table_ids: list[int]
    members: dict[int, int] = field(default_factory=dict)  # member id -> handle
    groups: dict[int, int] = field(default_factory=dict)  # group id -> handle
    # one-shot action sets: (table, entry handle) -> its group, members and set
    oneshots: dict[tuple[str, int], OneShot] = field(default_factory=dict)

    def member_id(self, handle: int) -> int | None:
        return next((i for i, h in self.members.items() if h == handle), None)

    def group_id(self, handle: int) -> int | None:
        return next((i for i, h in self.groups.items() if h == handle), None)


@dataclass
class ExternMeta:
    id: int
    name: str
    size: int
    width: int = 0  # registers
    unit: str = ""
    direct_table: str | None = None


@dataclass
class DigestMeta:
    id: int
    name: str
    fields: list[tuple[str, int]]


@dataclass
class PacketMeta:
    name: str
    fields: list[tuple[int, str, int]]  # (metadata id, name, bitwidth) in header order

    @property
    def nbytes(self) -> int:
        return (sum(w for _, _, w in self.fields) + 7) // 8


def _key_names(name: str) -> set[str]:
    return {name, p4info_key_name(name)}


class Pipeline:
    """Id-indexed view of one committed (or candidate) program."""

    def __init__(self, p4info: p4info_pb2.P4Info, module: ProgramModule, device_config: bytes = b"",
                 cookie: int | None = None) -> None:
        self.p4info = p4info
        self.module = module
        self.info: ProgramInfo = module.INFO
        self.device_config = device_config
        self.cookie = cookie
        self.tables: dict[int, TableMeta] = {}
        self.table_by_name: dict[str, TableMeta] = {}
        self.actions: dict[int, ActionMeta] = {}
        self.action_by_name: dict[str, ActionMeta] = {}
        self.counters: dict[int, ExternMeta] = {}
        self.direct_counters: dict[int, ExternMeta] = {}
        self.meters: dict[int, ExternMeta] = {}
        self.direct_meters: dict[int, ExternMeta] = {}
        self.registers: dict[int, ExternMeta] = {}
        self.digests: dict[int, DigestMeta] = {}
        self.digest_by_name: dict[str, DigestMeta] = {}
        self.packet_in: PacketMeta | None = None
        self.packet_out: PacketMeta | None = None
        self.action_profiles: dict[int, ProfileMeta] = {}
        self._index()

    # ------------------------------------------------------------------
    def _index(self) -> None:
        p, info = self.p4info, self.info
        problems: list[str] = []
        for a in p.actions:
            name = a.preamble.name
            ainfo = info.actions.get(name)
            if ainfo is None:
                problems.append(f"action {name} is not in the program")
                continue
            by_name = {x.name: x for x in ainfo.params}
            params = []
            for pp in a.params:
                pi = by_name.get(pp.name)
                if pi is None or pi.width != pp.bitwidth:
                    problems.append(f"action {name}: parameter {pp.name} ({pp.bitwidth} bits) "
                                    "does not match the program")
                    continue
                params.append(ParamMeta(pp.id, pp.name, pp.bitwidth))
            if len(a.params) != len(ainfo.params):
                problems.append(f"action {name}: {len(a.params)} parameters in P4Info, "
                                f"{len(ainfo.params)} in the program")
            # the switch takes arguments in the program's order
            order = {x.name: i for i, x in enumerate(ainfo.params)}
            params.sort(key=lambda m: order.get(m.name, 0))
            meta = ActionMeta(a.preamble.id, name, params)
            meta.params_by_id = {pm.id: (i, pm) for i, pm in enumerate(params)}
            self.actions[meta.id] = meta
            self.action_by_name[name] = meta

        dcounters = {c.preamble.id: c.preamble.name for c in p.direct_counters}
        dmeters = {m.preamble.id: m.preamble.name for m in p.direct_meters}
        for t in p.tables:
            name = t.preamble.name
            tinfo = info.tables.get(name)
            if tinfo is None:
                problems.append(f"table {name} is not in the program")
                continue
            keys = [(i, k) for i, k in enumerate(tinfo.keys) if k.match_kind != "selector"]
            fields: list[FieldMeta] = []
            if len(t.match_fields) != len(keys):
                problems.append(f"table {name}: {len(t.match_fields)} match fields in P4Info, "
                                f"{len(keys)} in the program")
            else:
                for pos, mf in enumerate(t.match_fields):
                    found = [(i, k) for i, k in keys if mf.name in _key_names(k.name)]
                    i, k = found[0] if found else keys[pos]
                    kind = MATCH_KINDS.get(mf.match_type, "?")
                    if k.width != mf.bitwidth or k.match_kind != kind:
                        problems.append(f"table {name}: match field {mf.name} ({kind}, "
                                        f"{mf.bitwidth} bits) does not match the program's "
                                        f"{k.name} ({k.match_kind}, {k.width} bits)")
                        continue
                    fields.append(FieldMeta(mf.id, mf.name, mf.bitwidth, kind, i))
            scopes = {}
            for ref in t.action_refs:
                a = self.actions.get(ref.id)
                if a is None:
                    problems.append(f"table {name}: unknown action id {ref.id}")
                    continue
                if a.name not in tinfo.actions and a.name != tinfo.default_action:
                    problems.append(f"table {name}: action {a.name} is not an action of the "
                                    "table in the program")
                    continue
                scopes[ref.id] = ref.scope
            dc = next((dcounters[r] for r in t.direct_resource_ids if r in dcounters), None)
            dm = next((dmeters[r] for r in t.direct_resource_ids if r in dmeters), None)
            if tinfo.direct_counter and dc is None:
                problems.append(f"table {name}: the P4Info lacks its direct counter")
            if tinfo.direct_meter and dm is None:
                problems.append(f"table {name}: the P4Info lacks its direct meter")
            tmeta = TableMeta(
                id=t.preamble.id, name=name, info=tinfo, fields=fields,
                fields_by_id={f.id: f for f in fields}, scopes=scopes,
                needs_priority=any(f.kind in PRIORITY_KINDS for f in fields),
                is_const=tinfo.entries_const, const_default=tinfo.default_const,
                direct_counter=tinfo.direct_counter, direct_meter=tinfo.direct_meter)
            self.tables[tmeta.id] = tmeta
            self.table_by_name[name] = tmeta

        def extern(kind: str, entries: Iterable[P4InfoExtern],
                   known: Mapping[str, CounterInfo] | Mapping[str, MeterInfo]
                   | Mapping[str, RegisterInfo], direct: bool,
                   out: dict[int, ExternMeta]) -> None:
            for e in entries:
                name = e.preamble.name
                x = known.get(name)
                if x is None or bool(getattr(x, "direct_table", None)) != direct:
                    problems.append(f"{kind} {name} is not in the program")
                    continue
                out[e.preamble.id] = ExternMeta(e.preamble.id, name, getattr(x, "size", 0),
                                                getattr(x, "width", 0), getattr(x, "kind", ""),
                                                getattr(x, "direct_table", None))

        extern("counter", p.counters, info.counters, False, self.counters)
        extern("direct counter", p.direct_counters, info.counters, True, self.direct_counters)
        extern("meter", p.meters, info.meters, False, self.meters)
        extern("direct meter", p.direct_meters, info.meters, True, self.direct_meters)
        extern("register", p.registers, info.registers, False, self.registers)
        for r in p.registers:
            rmeta = self.registers.get(r.preamble.id)
            if rmeta is not None and r.type_spec.HasField("bitstring"):
                bs = r.type_spec.bitstring
                w = bs.bit.bitwidth or bs.int.bitwidth
                if w and w != rmeta.width:
                    problems.append(f"register {rmeta.name}: {w} bits in P4Info, {rmeta.width} "
                                    "in the program")
        for d in p.digests:
            name = d.preamble.name
            dinfo = info.digests.get(name)
            if dinfo is None:
                problems.append(f"digest {name} is not in the program")
                continue
            dm_ = DigestMeta(d.preamble.id, name, [(f.name, f.width) for f in dinfo.fields])
            self.digests[dm_.id] = dm_
            self.digest_by_name[name] = dm_
        for c in p.controller_packet_metadata:
            pm = PacketMeta(c.preamble.name, [(m.id, m.name, m.bitwidth) for m in c.metadata])
            if c.preamble.name == "packet_in":
                self.packet_in = pm
            elif c.preamble.name == "packet_out":
                self.packet_out = pm
        for ap in p.action_profiles:
            name = ap.preamble.name
            if name not in info.action_profiles:
                problems.append(f"action profile {name} is not in the program")
                continue
            self.action_profiles[ap.preamble.id] = ProfileMeta(ap.preamble.id, name,
                                                               list(ap.table_ids))
        if problems:
            more = f" (and {len(problems) - 5} more)" if len(problems) > 5 else ""
            raise invalid("P4Info does not match the P4 program: " + "; ".join(problems[:5])
                          + more)

    # ------------------------------------------------------------------
    def table(self, table_id: int) -> TableMeta:
        t = self.tables.get(table_id)
        if t is None:
            raise invalid(f"Invalid P4 id {table_id}: not a table")
        return t

    def profile(self, profile_id: int) -> ProfileMeta:
        ap = self.action_profiles.get(profile_id)
        if ap is None:
            raise invalid(f"Invalid P4 id {profile_id}: not an action profile")
        return ap

    def profile_of_table(self, tm: TableMeta) -> ProfileMeta | None:
        name = tm.info.implementation
        return next((ap for ap in self.action_profiles.values() if ap.name == name), None)

    def action(self, action_id: int) -> ActionMeta:
        a = self.actions.get(action_id)
        if a is None:
            raise invalid(f"Invalid P4 id {action_id}: not an action")
        return a


# ---------------------------------------------------------------------------
# programs from device configs


@dataclass
class LoadedProgram:
    module: ProgramModule
    headers: list[ControllerHeaderInfo]
    description: str  # for logs: the path compiled


def compile_with_headers(path: str, include_dirs: Iterable[str] = (),
                         defines: Mapping[str, object] | None = None,
                         trace: bool = False) -> LoadedProgram:
    """Compile ``path`` and find its controller headers (raises P4Error);
    ``trace``: with the per-packet trace calls (a switch logging at debug)."""
    from switches.soft.compiler import compile_program
    from switches.soft.frontend import parse_file
    from switches.soft.midend import check

    incs = tuple(include_dirs)
    module = compile_program(path, incs, defines, trace=trace)
    prog = parse_file(path, incs, defines)
    check(prog)
    return LoadedProgram(module, controller_headers(prog), path)


def load_device_config(data: bytes, include_dirs: Iterable[str], workdir: str,
                       trace: bool = False) -> LoadedProgram:
    """Compile the program a device config names or carries (see the module
    docstring). Raises P4RTError(INVALID_ARGUMENT) on anything unusable."""
    from switches.soft.frontend.source import P4Error

    if not data.strip():
        raise invalid("p4_device_config is empty: give the P4 program source, or JSON "
                      '{"program": "<path>"}')
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        raise invalid("p4_device_config is neither P4 source text nor JSON (not UTF-8)") from None
    incs = list(include_dirs)
    defines: dict[str, object] | None = None
    if text.lstrip().startswith("{"):
        try:
            cfg = json.loads(text)
        except ValueError as e:
            raise invalid(f"p4_device_config: bad JSON: {e}") from None
        if not isinstance(cfg, dict) or not isinstance(cfg.get("program"), str):
            raise invalid('p4_device_config JSON needs {"program": "<path to .p4>"}')
        path = cfg["program"]
        if not os.path.isfile(path):
            raise invalid(f"p4_device_config: no such P4 program on the switch host: {path}")
        extra = cfg.get("include_dirs", [])
        if not isinstance(extra, list) or not all(isinstance(d, str) for d in extra):
            raise invalid("p4_device_config: include_dirs must be a list of paths")
        incs = [*extra, *incs]
        d = cfg.get("defines")
        if d is not None:
            if not isinstance(d, dict):
                raise invalid("p4_device_config: defines must be an object")
            defines = {str(k): (None if v is None else str(v)) for k, v in d.items()}
    else:
        digest = hashlib.sha256(data).hexdigest()[:16]
        os.makedirs(workdir, exist_ok=True)
        path = os.path.join(workdir, f"pipeline_{digest}.p4")
        if not os.path.isfile(path):
            fd, tmp = tempfile.mkstemp(dir=workdir, suffix=".p4")
            with os.fdopen(fd, "wb") as f:
                f.write(data)
            os.replace(tmp, path)
    try:
        return compile_with_headers(path, incs, defines, trace)
    except P4Error as e:
        raise invalid(f"the P4 program does not compile: {e}") from None
    except P4RTError:
        raise
    except Exception as e:  # a compiler bug must not take the server down
        raise invalid(f"the P4 program could not be compiled: {type(e).__name__}: {e}") from None


def pipeline_for(p4info: p4info_pb2.P4Info | None, loaded: LoadedProgram, device_config: bytes = b"",
                 cookie: int | None = None) -> Pipeline:
    """A Pipeline for ``loaded``; ``p4info`` None (or empty) means the
    program's own P4Info."""
    if p4info is None or not (len(p4info.tables) or len(p4info.actions)):
        p4info = build_p4info(loaded.module.INFO, loaded.headers)
    return Pipeline(p4info, loaded.module, device_config, cookie)
