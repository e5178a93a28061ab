"""P4Info built for soft-target programs: content, ids (p4c's rule), aliases,
text output, and agreement with p4c's own P4Info files where available."""

from __future__ import annotations

from pathlib import Path

import pytest

pytest.importorskip("p4.config.v1.p4info_pb2", reason="P4Info needs the optional 'p4runtime' "
                    "extra (pip install -e '.[p4runtime]')")

from google.protobuf import text_format  # noqa: E402
from p4.config.v1 import p4info_pb2  # noqa: E402
from test_p4runtime_support import CPU_P4  # noqa: E402

from switches.p4c_corpus import missing_reason, outputs_dir, samples_dir  # noqa: E402
from switches.soft import p4info as P  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
L3_ROUTER = ROOT / "switches" / "p4" / "l3_router.p4"

EXACT, LPM, TERNARY, RANGE = 2, 3, 4, 5


def by_name(entries, name: str):  # noqa: ANN001, ANN201
    for e in entries:
        if e.preamble.name == name:
            return e
    raise KeyError(name)


def test_l3_router_tables_fields_actions_and_widths() -> None:
    p = P.p4info_for_program(L3_ROUTER)
    assert p.pkg_info.arch == "v1model"
    lpm = by_name(p.tables, "MyIngress.ipv4_lpm")
    assert lpm.preamble.alias == "ipv4_lpm"
    assert [(m.id, m.name, m.bitwidth, m.match_type) for m in lpm.match_fields] == \
        [(1, "hdr.ipv4.dstAddr", 32, LPM)]
    assert lpm.size == 1024
    action_ids = {a.preamble.name: a.preamble.id for a in p.actions}
    assert {r.id for r in lpm.action_refs} == {action_ids["MyIngress.set_nhop"],
                                               action_ids["MyIngress.drop"]}
    assert lpm.initial_default_action.action_id == action_ids["MyIngress.drop"]
    assert lpm.const_default_action_id == 0
    nhop = by_name(p.actions, "MyIngress.set_nhop")
    assert [(x.id, x.name, x.bitwidth) for x in nhop.params] == [(1, "dmac", 48), (2, "port", 9)]
    smac = by_name(p.tables, "MyIngress.port_smac")
    assert [(m.name, m.bitwidth, m.match_type) for m in smac.match_fields] == \
        [("standard_metadata.egress_spec", 9, EXACT)]


def test_ids_follow_p4c_rule_and_are_unique_and_stable() -> None:
    p = P.p4info_for_program(L3_ROUTER)
    ids = [e.preamble.id for e in [*p.tables, *p.actions]]
    assert len(set(ids)) == len(ids)
    assert all(e.preamble.id >> 24 == P.TABLE for e in p.tables)
    assert all(e.preamble.id >> 24 == P.ACTION for e in p.actions)
    # p4c's id for NoAction in every v1model program (its testdata outputs)
    assert by_name(p.actions, "NoAction").preamble.id == 21257015
    again = P.p4info_for_program(L3_ROUTER)
    assert again == p
    # collisions move on to the next free id
    taken = {(P.TABLE << 24) | (P.jenkins_one_at_a_time(b"t") & 0xFFFFFF)}
    got = P.assign_ids(["t"], P.TABLE, taken)
    assert got["t"] == ((P.TABLE << 24) | ((P.jenkins_one_at_a_time(b"t") + 1) & 0xFFFFFF))


def test_aliases_are_shortest_unique_suffixes() -> None:
    got = P.shortest_unique_suffixes(["a.b.c", "d.e.c", "x.y", "c2"])
    assert got == {"a.b.c": "b.c", "d.e.c": "e.c", "x.y": "y", "c2": "c2"}


def test_every_entity_kind(tmp_path: Path) -> None:
    prog = tmp_path / "cpu.p4"
    prog.write_text(CPU_P4)
    p = P.p4info_for_program(prog)
    acl = by_name(p.tables, "Ing.acl")
    assert [(m.name, m.match_type) for m in acl.match_fields] == \
        [("hdr.ethernet.etherType", TERNARY), ("sm.ingress_port", RANGE)]
    drop_id = by_name(p.actions, "Ing.drop").preamble.id
    scopes = {r.id: (r.scope, list(r.annotations)) for r in acl.action_refs}
    assert scopes[drop_id] == (p4info_pb2.ActionRef.TABLE_ONLY, ["@tableonly"])
    l2 = by_name(p.tables, "Ing.l2")
    noaction = by_name(p.actions, "NoAction").preamble.id
    assert {r.id: r.scope for r in l2.action_refs}[noaction] == p4info_pb2.ActionRef.DEFAULT_ONLY
    dc = by_name(p.direct_counters, "Ing.acl_hits")
    assert dc.preamble.id >> 24 == P.DIRECT_COUNTER
    assert dc.direct_table_id == acl.preamble.id and list(acl.direct_resource_ids) == [dc.preamble.id]
    c = by_name(p.counters, "Ing.port_pkts")
    assert (c.size, c.spec.unit, c.preamble.id >> 24) == (8, p4info_pb2.CounterSpec.BOTH, P.COUNTER)
    m = by_name(p.meters, "Ing.port_meter")
    assert (m.size, m.spec.unit, m.preamble.id >> 24) == (4, p4info_pb2.MeterSpec.PACKETS, P.METER)
    r = by_name(p.registers, "Ing.last_len")
    assert (r.size, r.type_spec.bitstring.bit.bitwidth, r.preamble.id >> 24) == (16, 32, P.REGISTER)
    d = by_name(p.digests, "learn_t")
    assert d.preamble.id >> 24 == P.DIGEST and d.type_spec.struct.name == "learn_t"
    members = p.type_info.structs["learn_t"].members
    assert [(x.name, x.type_spec.bitstring.bit.bitwidth) for x in members] == \
        [("srcAddr", 48), ("port", 9)]
    pin = by_name(p.controller_packet_metadata, "packet_in")
    assert pin.preamble.id >> 24 == P.CONTROLLER_HEADER
    assert list(pin.preamble.annotations) == ['@controller_header("packet_in")']
    assert [(x.id, x.name, x.bitwidth) for x in pin.metadata] == \
        [(1, "ingress_port", 9), (2, "_pad", 7)]


def test_text_file_round_trip(tmp_path: Path) -> None:
    out = tmp_path / "l3.p4info.txt"
    p = P.write_program_p4info(L3_ROUTER, out)
    text = out.read_text()
    assert 'name: "MyIngress.ipv4_lpm"' in text and "match_type: LPM" in text
    assert P.load_p4info(out) == p
    binary = tmp_path / "l3.p4info.bin"
    binary.write_bytes(p.SerializeToString())
    assert P.load_p4info(binary) == p
    assert P.main([str(L3_ROUTER), "-o", str(tmp_path / "cli.txt")]) == 0
    assert P.load_p4info(tmp_path / "cli.txt") == p


def _summary(p):  # noqa: ANN001, ANN202
    """Structure and ids of tables, actions and externs (names as keys)."""
    out = {}
    for t in p.tables:
        out["table " + t.preamble.name] = (
            t.preamble.id, t.preamble.alias,
            [(m.id, m.name, m.bitwidth, m.match_type) for m in t.match_fields],
            sorted((a.id, a.scope) for a in t.action_refs), t.const_default_action_id, t.size,
            t.is_const_table, sorted(t.direct_resource_ids))
    for a in p.actions:
        out["action " + a.preamble.name] = (a.preamble.id, a.preamble.alias,
                                            [(x.id, x.name, x.bitwidth) for x in a.params])
    for kind in ("counters", "direct_counters", "meters", "direct_meters", "registers"):
        for e in getattr(p, kind):
            out[kind + " " + e.preamble.name] = (e.preamble.id, e.preamble.alias)
    return out


@pytest.mark.parametrize("name", ["basic_routing-bmv2.p4", "named_meter_bmv2.p4",
                                  "flowlet_switching-bmv2.p4", "table-entries-range-bmv2.p4",
                                  "table-entries-priority-bmv2.p4", "ternary2-bmv2.p4",
                                  "issue1352-bmv2.p4", "issue3329-bmv2.p4"])
def test_matches_p4c_reference_p4info(name: str) -> None:
    """p4c's P4Info for corpus programs: same tables, match fields, action refs
    and scopes, parameters, externs, sizes and the same ids."""
    src = samples_dir() / name
    ref_path = outputs_dir() / f"{name}.p4info.txtpb"
    if not src.exists() or not ref_path.exists():
        pytest.skip(missing_reason())
    ref = p4info_pb2.P4Info()
    text_format.Parse(ref_path.read_text(), ref)
    mine = P.p4info_for_program(src, [str(src.parent)])
    a, b = _summary(ref), _summary(mine)
    # p4c also lists actions that no table uses (ProgramInfo lists table actions)
    a = {k: v for k, v in a.items() if not k.startswith("action ") or k in b}
    assert a == b
    for kind in ("digests", "controller_packet_metadata"):
        assert [(e.preamble.id, e.preamble.name) for e in getattr(ref, kind)] == \
            [(e.preamble.id, e.preamble.name) for e in getattr(mine, kind)]
