"""P4Info for soft-target programs, with the content and ids p4c emits.

``build_p4info(info, controller_headers=())`` turns a compiled program's
``ProgramInfo`` into a ``p4.config.v1.P4Info`` message: pkg_info (arch
v1model), tables (match fields, action refs with @defaultonly/@tableonly
scopes, const default action, size, const-ness, direct resources), actions
(parameters), counters and direct counters, meters and direct meters,
registers, digests (with their struct in type_info) and the
``@controller_header`` packet metadata.

Ids follow p4c's rule, so a P4Info written here and one written by p4c for
the same program agree: the top byte is the entity kind's prefix from
p4info.proto (``P4Ids.Prefix``: action 0x01, table 0x02, controller header
0x04, counter 0x12, direct counter 0x13, meter 0x14, direct meter 0x15,
register 0x16, digest 0x17), the low 24 bits are the low bits of the Jenkins
one-at-a-time hash of the fully qualified name; names of one kind are taken
in sorted order and a taken id moves on to the next value (linear probing).
Controller headers hash the header type's name but are named after the
annotation's argument. ``@id`` annotations are not consulted (ProgramInfo
does not carry them). Aliases are the shortest dot-separated suffix that is
unique among all names.

Match fields and action parameters are numbered from 1 in declaration order.

Needs the optional ``p4runtime`` dependencies (``pip install -e '.[p4runtime]'``).

Command line: ``python -m switches.soft.p4info prog.p4 [-o prog.p4info.txt]
[--binary] [-I dir] [-D NAME[=VALUE]]``.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from switches.soft.runtime.contract import ParamInfo, ProgramInfo

try:
    from google.protobuf import text_format
    from p4.config.v1 import p4info_pb2
except ImportError as _e:  # pragma: no cover - exercised only without the extra
    _IMPORT_ERROR: ImportError | None = _e
else:
    _IMPORT_ERROR = None

if TYPE_CHECKING:
    from switches.soft.frontend import ir

# P4Ids.Prefix values (p4info.proto)
ACTION = 0x01
TABLE = 0x02
VALUE_SET = 0x03
CONTROLLER_HEADER = 0x04
ACTION_PROFILE = 0x11
COUNTER = 0x12
DIRECT_COUNTER = 0x13
METER = 0x14
DIRECT_METER = 0x15
REGISTER = 0x16
DIGEST = 0x17

_MATCH_TYPES = {"exact": 2, "lpm": 3, "ternary": 4, "range": 5, "optional": 6}
_COUNTER_UNITS = {"bytes": 1, "packets": 2, "packets_and_bytes": 3}
_METER_UNITS = {"bytes": 1, "packets": 2}
SCOPE_TABLE_ONLY = 1
SCOPE_DEFAULT_ONLY = 2

_TEXT_HEADER = "# proto-file: p4/config/v1/p4info.proto\n# proto-message: p4.config.v1.P4Info\n\n"


def require_p4runtime() -> None:
    """Raise ImportError with the install hint when the protobuf modules are missing."""
    if _IMPORT_ERROR is not None:
        raise ImportError("P4Runtime support needs the optional dependencies: "
                          "pip install -e '.[p4runtime]' "
                          f"({_IMPORT_ERROR})") from _IMPORT_ERROR


@dataclass
class ControllerHeaderInfo:
    """A header type annotated ``@controller_header("<name>")``."""

    name: str  # the annotation's argument, e.g. "packet_in"
    type_name: str  # the P4 header type
    fields: list[ParamInfo] = field(default_factory=list)

    @property
    def nbytes(self) -> int:
        return (sum(f.width for f in self.fields) + 7) // 8


# ---------------------------------------------------------------------------
# ids and aliases


def jenkins_one_at_a_time(data: bytes) -> int:
    """Bob Jenkins' one-at-a-time hash, 32 bits."""
    h = 0
    for b in data:
        h = (h + b) & 0xFFFFFFFF
        h = (h + (h << 10)) & 0xFFFFFFFF
        h ^= h >> 6
    h = (h + (h << 3)) & 0xFFFFFFFF
    h ^= h >> 11
    h = (h + (h << 15)) & 0xFFFFFFFF
    return h


def assign_ids(names: Iterable[str], prefix: int, taken: set[int] | None = None) -> dict[str, int]:
    """Ids for the names of one entity kind (p4c's rule, see the module docstring).
    ``taken`` is updated with the ids handed out."""
    used = taken if taken is not None else set()
    out: dict[str, int] = {}
    for name in sorted(set(names), key=lambda n: n.encode()):
        h = jenkins_one_at_a_time(name.encode())
        start = h & 0xFFFFFF
        low = start
        while True:
            cand = (prefix << 24) | low
            if cand not in used:
                break
            low = (low + 1) & 0xFFFFFF
            if low == start:
                raise ValueError(f"no free P4Runtime id left for {name}")
        used.add(cand)
        out[name] = cand
    return out


def shortest_unique_suffixes(names: Iterable[str]) -> dict[str, str]:
    """Alias per name: its shortest dot-separated suffix no other name ends with.
    A name listed twice (two kinds of entity) counts twice."""
    all_names = list(names)
    counts: Counter[tuple[str, ...]] = Counter()
    for n in all_names:
        parts = tuple(n.split("."))
        for k in range(1, len(parts) + 1):
            counts[parts[-k:]] += 1
    out: dict[str, str] = {}
    for n in all_names:
        parts = tuple(n.split("."))
        alias = n
        for k in range(1, len(parts) + 1):
            if counts[parts[-k:]] < 2:
                alias = ".".join(parts[-k:])
                break
        out[n] = alias
    return out


# ---------------------------------------------------------------------------
# controller headers from the P4 source


def controller_headers(program: ir.Program) -> list[ControllerHeaderInfo]:
    """The ``@controller_header`` header types of a checked program, in
    declaration order (field widths come from the checker's resolved types)."""
    from switches.soft.frontend import ir as _ir

    out: list[ControllerHeaderInfo] = []
    for d in program.decls:
        if not isinstance(d, _ir.HeaderDecl):
            continue
        ann = _ir.find_annotation(d.annotations, "controller_header")
        if ann is None:
            continue
        name = d.name
        if ann.args and isinstance(ann.args[0], _ir.StringLit):
            name = ann.args[0].value
        fields = []
        for f in d.fields:
            t = f.type.resolved
            width = t.bit_width() if t is not None else 0
            fields.append(ParamInfo(f.name, width))
        out.append(ControllerHeaderInfo(name, d.name, fields))
    return out


def program_controller_headers(path: str | os.PathLike[str],
                               include_dirs: Iterable[str | os.PathLike[str]] = (),
                               defines: Mapping[str, object] | None = None,
                               ) -> list[ControllerHeaderInfo]:
    """Parse and check the program at ``path`` and return its controller headers."""
    from switches.soft.frontend import parse_file
    from switches.soft.midend import check

    prog = parse_file(path, include_dirs, defines)
    check(prog)
    return controller_headers(prog)


# ---------------------------------------------------------------------------
# the P4Info message


def _preamble(pre: p4info_pb2.Preamble, pid: int, name: str, alias: str, annotations: Iterable[str] = ()) -> None:
    pre.id = pid
    pre.name = name
    pre.alias = alias
    for a in annotations:
        pre.annotations.append(a)


def _bitstring(spec: p4info_pb2.P4DataTypeSpec, width: int) -> None:
    spec.bitstring.bit.bitwidth = width


def build_p4info(info: ProgramInfo,
                 controller_headers: Iterable[ControllerHeaderInfo] = ()) -> p4info_pb2.P4Info:
    """The ``p4info_pb2.P4Info`` for ``info`` (see the module docstring)."""
    require_p4runtime()
    cheaders = list(controller_headers)
    direct_counters = {n: c for n, c in info.counters.items() if c.direct_table}
    counters = {n: c for n, c in info.counters.items() if not c.direct_table}
    direct_meters = {n: m for n, m in info.meters.items() if m.direct_table}
    meters = {n: m for n, m in info.meters.items() if not m.direct_table}

    taken: set[int] = set()
    ids: dict[int, dict[str, int]] = {
        ACTION: assign_ids(info.actions, ACTION, taken),
        TABLE: assign_ids(info.tables, TABLE, taken),
        CONTROLLER_HEADER: assign_ids((h.type_name for h in cheaders), CONTROLLER_HEADER, taken),
        COUNTER: assign_ids(counters, COUNTER, taken),
        DIRECT_COUNTER: assign_ids(direct_counters, DIRECT_COUNTER, taken),
        METER: assign_ids(meters, METER, taken),
        DIRECT_METER: assign_ids(direct_meters, DIRECT_METER, taken),
        REGISTER: assign_ids(info.registers, REGISTER, taken),
        DIGEST: assign_ids(info.digests, DIGEST, taken),
        ACTION_PROFILE: assign_ids(info.action_profiles, ACTION_PROFILE, taken),
    }
    aliases = shortest_unique_suffixes(
        [*info.actions, *info.tables, *(h.type_name for h in cheaders), *counters,
         *direct_counters, *meters, *direct_meters, *info.registers, *info.digests,
         *info.action_profiles])

    p4i = p4info_pb2.P4Info()
    p4i.pkg_info.arch = "v1model"

    for tname, t in info.tables.items():
        pt = p4i.tables.add()
        _preamble(pt.preamble, ids[TABLE][tname], tname, aliases[tname])
        fid = 0
        for k in t.keys:
            fid += 1
            if k.match_kind not in _MATCH_TYPES:
                continue  # 'selector' keys belong to an action selector, not the match key
            mf = pt.match_fields.add()
            mf.id = fid
            mf.name = p4info_key_name(k.name)
            mf.bitwidth = k.width
            mf.match_type = _MATCH_TYPES[k.match_kind]
        refs = list(t.actions)
        default_only = set(t.default_only_actions)
        if t.default_action not in refs and t.default_action in ids[ACTION]:
            # the implicit default (NoAction) is listed @defaultonly, as p4c does
            refs.append(t.default_action)
            default_only.add(t.default_action)
        for a in refs:
            ref = pt.action_refs.add()
            ref.id = ids[ACTION][a]
            if a in default_only:
                ref.scope = SCOPE_DEFAULT_ONLY
                ref.annotations.append("@defaultonly")
            elif a in t.table_only_actions:
                ref.scope = SCOPE_TABLE_ONLY
                ref.annotations.append("@tableonly")
        if t.default_action in ids[ACTION]:
            if t.default_const:
                pt.const_default_action_id = ids[ACTION][t.default_action]
            pt.initial_default_action.action_id = ids[ACTION][t.default_action]
            params = info.actions[t.default_action].params
            for i, (p, v) in enumerate(zip(params, t.default_args, strict=False), 1):
                arg = pt.initial_default_action.arguments.add()
                arg.param_id = i
                arg.value = _canonical(v, p.width)
        if t.direct_counter and t.direct_counter in ids[DIRECT_COUNTER]:
            pt.direct_resource_ids.append(ids[DIRECT_COUNTER][t.direct_counter])
        if t.direct_meter and t.direct_meter in ids[DIRECT_METER]:
            pt.direct_resource_ids.append(ids[DIRECT_METER][t.direct_meter])
        if t.implementation and t.implementation in ids[ACTION_PROFILE]:
            pt.implementation_id = ids[ACTION_PROFILE][t.implementation]
        pt.size = t.size
        if t.entries_const:
            pt.is_const_table = True
        if t.entries:
            pt.has_initial_entries = True

    for aname, ainfo in info.actions.items():
        pa = p4i.actions.add()
        _preamble(pa.preamble, ids[ACTION][aname], aname, aliases[aname])
        for i, p in enumerate(ainfo.params, 1):
            pp = pa.params.add()
            pp.id = i
            pp.name = p.name
            pp.bitwidth = p.width

    for cname, c in counters.items():
        pc = p4i.counters.add()
        _preamble(pc.preamble, ids[COUNTER][cname], cname, aliases[cname])
        pc.spec.unit = _COUNTER_UNITS.get(c.kind, 3)
        pc.size = c.size
    for cname, c in direct_counters.items():
        pd = p4i.direct_counters.add()
        _preamble(pd.preamble, ids[DIRECT_COUNTER][cname], cname, aliases[cname])
        pd.spec.unit = _COUNTER_UNITS.get(c.kind, 3)
        if c.direct_table in ids[TABLE]:
            pd.direct_table_id = ids[TABLE][c.direct_table]
    for mname, m in meters.items():
        pm = p4i.meters.add()
        _preamble(pm.preamble, ids[METER][mname], mname, aliases[mname])
        pm.spec.unit = _METER_UNITS.get(m.kind, 1)
        pm.size = m.size
    for mname, m in direct_meters.items():
        pdm = p4i.direct_meters.add()
        _preamble(pdm.preamble, ids[DIRECT_METER][mname], mname, aliases[mname])
        pdm.spec.unit = _METER_UNITS.get(m.kind, 1)
        if m.direct_table in ids[TABLE]:
            pdm.direct_table_id = ids[TABLE][m.direct_table]

    for pname, prof in info.action_profiles.items():
        pp = p4i.action_profiles.add()
        _preamble(pp.preamble, ids[ACTION_PROFILE][pname], pname, aliases[pname])
        pp.table_ids.extend(ids[TABLE][t] for t in prof.tables if t in ids[TABLE])
        pp.with_selector = prof.selector_algo is not None
        pp.size = prof.size
        if pp.with_selector:
            pp.max_group_size = prof.size  # a group holds at most every member

    for h in cheaders:
        ph = p4i.controller_packet_metadata.add()
        _preamble(ph.preamble, ids[CONTROLLER_HEADER][h.type_name], h.name, h.name,
                  [f'@controller_header("{h.name}")'])
        for i, f in enumerate(h.fields, 1):
            md = ph.metadata.add()
            md.id = i
            md.name = f.name
            md.bitwidth = f.width

    for rname, r in info.registers.items():
        pr = p4i.registers.add()
        _preamble(pr.preamble, ids[REGISTER][rname], rname, aliases[rname])
        _bitstring(pr.type_spec, r.width)
        pr.size = r.size

    for dname, d in info.digests.items():
        pdg = p4i.digests.add()
        _preamble(pdg.preamble, ids[DIGEST][dname], dname, aliases[dname])
        pdg.type_spec.struct.name = dname
        st = p4i.type_info.structs[dname]
        for f in d.fields:
            mem = st.members.add()
            mem.name = f.name
            _bitstring(mem.type_spec, f.width)
    p4i.type_info.SetInParent()
    return p4i


def p4info_key_name(name: str) -> str:
    """p4c names a header-validity key ``hdr.h.$valid$`` (ProgramInfo: ``hdr.h.isValid()``)."""
    if name.endswith(".isValid()"):
        return name[: -len("isValid()")] + "$valid$"
    return name


def _canonical(value: int, width: int) -> bytes:
    v = int(value) & ((1 << width) - 1) if width else int(value)
    return v.to_bytes(max(1, (v.bit_length() + 7) // 8), "big")


# ---------------------------------------------------------------------------
# text files


def p4info_text(p4i: p4info_pb2.P4Info) -> str:
    """Protobuf text format, as p4c's ``--p4runtime-files x.p4info.txtpb`` writes it."""
    require_p4runtime()
    return _TEXT_HEADER + text_format.MessageToString(p4i)


def write_p4info_text(p4i: p4info_pb2.P4Info, path: str | os.PathLike[str]) -> None:
    Path(path).write_text(p4info_text(p4i))


def parse_p4info(data: bytes | str) -> p4info_pb2.P4Info:
    """A P4Info from text format or binary protobuf."""
    require_p4runtime()
    p4i = p4info_pb2.P4Info()
    if isinstance(data, bytes):
        try:
            text = data.decode()
        except UnicodeDecodeError:
            p4i.ParseFromString(data)
            return p4i
    else:
        text = data
    try:
        text_format.Parse(text, p4i)
    except text_format.ParseError:
        if isinstance(data, str):
            raise
        p4i = p4info_pb2.P4Info()
        p4i.ParseFromString(data)
    return p4i


def load_p4info(path: str | os.PathLike[str]) -> p4info_pb2.P4Info:
    """Read a P4Info file (text format, or binary protobuf)."""
    return parse_p4info(Path(path).read_bytes())


def p4info_for_program(path: str | os.PathLike[str],
                       include_dirs: Iterable[str | os.PathLike[str]] = (),
                       defines: Mapping[str, object] | None = None) -> p4info_pb2.P4Info:
    """Compile the program at ``path`` and build its P4Info (raises P4Error)."""
    from switches.soft.compiler import compile_program

    module = compile_program(path, include_dirs, defines)
    return build_p4info(module.INFO, program_controller_headers(path, include_dirs, defines))


def write_program_p4info(program: str | os.PathLike[str], out: str | os.PathLike[str],
                         include_dirs: Iterable[str | os.PathLike[str]] = (),
                         defines: Mapping[str, object] | None = None) -> p4info_pb2.P4Info:
    """Write ``program``'s P4Info as text to ``out``; returns the message."""
    p4i = p4info_for_program(program, include_dirs, defines)
    write_p4info_text(p4i, out)
    return p4i


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m switches.soft.p4info",
                                 description="Write the P4Info of a P4_16 v1model program.")
    ap.add_argument("program")
    ap.add_argument("-o", "--output", help="output file (default: stdout)")
    ap.add_argument("--binary", action="store_true", help="binary protobuf instead of text")
    from switches.soft.compiler import add_preprocessor_options, option_defines
    from switches.soft.frontend.source import P4Error

    add_preprocessor_options(ap)
    a = ap.parse_args(argv)
    try:
        p4i = p4info_for_program(a.program, a.include, option_defines(a.define))
    except P4Error as e:
        print(str(e), file=sys.stderr)
        return 1
    except ImportError as e:
        print(str(e), file=sys.stderr)
        return 2
    if a.binary:
        data = p4i.SerializeToString()
        if a.output:
            Path(a.output).write_bytes(data)
        else:
            sys.stdout.buffer.write(data)
    elif a.output:
        write_p4info_text(p4i, a.output)
    else:
        sys.stdout.write(p4info_text(p4i))
    return 0


__all__ = ["build_p4info", "p4info_text", "write_p4info_text", "load_p4info", "parse_p4info",
           "p4info_for_program", "write_program_p4info", "controller_headers",
           "program_controller_headers", "ControllerHeaderInfo", "assign_ids",
           "jenkins_one_at_a_time", "shortest_unique_suffixes", "require_p4runtime"]

if __name__ == "__main__":
    sys.exit(main())
