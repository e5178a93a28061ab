"""Action profiles and selectors over P4Runtime (ActionProfileMember,
ActionProfileGroup, one-shot action sets) and through switches.controller on
both of its backends, on tests/stf/programs/ecmp_selector.p4. The scenarios
follow behavioral-model's targets/simple_switch_grpc/tests/test_action_profile.cpp."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

pytest.importorskip("p4.v1.p4runtime_pb2", reason="P4Runtime tests need the optional "
                    "'p4runtime' extra (pip install -e '.[p4runtime]')")

import grpc  # noqa: E402
from p4.v1 import p4runtime_pb2 as pb  # noqa: E402
from test_p4runtime_controller import control_server  # noqa: E402
from test_p4runtime_support import Rig, write_errors  # noqa: E402

from switches.controller.api import ControllerError  # noqa: E402
from switches.controller.p4runtime import P4RuntimeController  # noqa: E402
from switches.soft.control.server import ControlServer  # noqa: E402
from switches.targets import SOFT  # noqa: E402

P4 = Path(__file__).resolve().parents[1] / "stf" / "programs" / "ecmp_selector.p4"
INSERT, MODIFY, DELETE = pb.Update.INSERT, pb.Update.MODIFY, pb.Update.DELETE


def crc16_arc(data: bytes) -> int:
    crc = 0
    for b in data:
        crc ^= b
        for _ in range(8):
            crc = (crc >> 1) ^ 0xA001 if crc & 1 else crc >> 1
    return crc


def pkt(tag: int, entropy: int) -> bytes:
    return bytes([tag]) + entropy.to_bytes(4, "big") + b"\x00"


def update(kind: int, entity: pb.Entity) -> pb.Update:
    return pb.Update(type=kind, entity=entity)


def error_code(rig: Rig, *updates: pb.Update) -> grpc.StatusCode:
    with pytest.raises(grpc.RpcError) as ei:
        rig.write(*updates)
    code = write_errors(ei.value)[0][0]
    return next(c for c in grpc.StatusCode if c.value[0] == code)


@pytest.fixture
def rig() -> Iterator[Rig]:
    r = Rig(P4, cpu_port=None)
    yield r
    r.close()


def member(rig: Rig, mid: int, port: int) -> pb.Entity:
    m = pb.ActionProfileMember(action_profile_id=rig.id("action_profiles", "FlowIngress.ecmp_sel"),
                               member_id=mid)
    m.action.action_id = rig.id("actions", "FlowIngress.send")
    m.action.params.add(param_id=1, value=port.to_bytes(2, "big"))
    return pb.Entity(action_profile_member=m)


def group(rig: Rig, gid: int, mids: list[int], weight: int = 1) -> pb.Entity:
    g = pb.ActionProfileGroup(action_profile_id=rig.id("action_profiles", "FlowIngress.ecmp_sel"),
                              group_id=gid)
    for m in mids:
        g.members.add(member_id=m, weight=weight)
    return pb.Entity(action_profile_group=g)


def entry(rig: Rig, tag: int) -> pb.TableEntry:
    te = pb.TableEntry(table_id=rig.id("tables", "FlowIngress.ecmp"))
    te.match.add(field_id=1).exact.value = bytes([tag])
    return te


def test_p4info_has_the_profiles(rig: Rig) -> None:
    aps = {a.preamble.name: a for a in rig.p4info.action_profiles}
    assert aps["FlowIngress.ecmp_sel"].with_selector and aps["FlowIngress.ecmp_sel"].size == 128
    assert not aps["FlowIngress.marks"].with_selector
    t = next(t for t in rig.p4info.tables if t.preamble.name == "FlowIngress.ecmp")
    assert t.implementation_id == aps["FlowIngress.ecmp_sel"].preamble.id
    assert [m.name for m in t.match_fields] == ["h.flow.tag"]


def test_members_groups_and_entries(rig: Rig) -> None:
    rig.stream()
    rig.write(update(INSERT, member(rig, 10, 1)), update(INSERT, member(rig, 11, 2)),
            update(INSERT, group(rig, 5, [10, 11])))
    te = entry(rig, 0xAB)
    te.action.action_profile_group_id = 5
    rig.write(update(INSERT, pb.Entity(table_entry=te)))
    for e in (0x01020304, 0x12345678, 0xDEADBEEF, 7):
        want = [1, 2][crc16_arc(e.to_bytes(4, "big")) % 2]
        assert [p for p, _ in rig.send(0, pkt(0xAB, e))] == [want]
    # reads give back the controller's ids
    got = rig.read(pb.Entity(table_entry=pb.TableEntry(table_id=te.table_id)))
    assert [x.table_entry.action.action_profile_group_id for x in got] == [5]
    grp = rig.read(group(rig, 5, []))
    assert sorted(m.member_id for m in grp[0].action_profile_group.members) == [10, 11]
    # a member in use cannot go; the group can't either while an entry names it
    assert error_code(rig, update(DELETE, member(rig, 10, 1))) == grpc.StatusCode.FAILED_PRECONDITION
    # MODIFY the group to one member: every flow takes it
    rig.write(update(MODIFY, group(rig, 5, [11])))
    assert [p for p, _ in rig.send(0, pkt(0xAB, 0x01020304))] == [2]
    # the entry to a member
    te2 = entry(rig, 0xAB)
    te2.action.action_profile_member_id = 10
    rig.write(update(MODIFY, pb.Entity(table_entry=te2)))
    assert [p for p, _ in rig.send(0, pkt(0xAB, 0x12345678))] == [1]


def test_delete_group_with_members(rig: Rig) -> None:
    # test_action_profile.cpp DeleteGroupWithMembers
    rig.stream()
    rig.write(update(INSERT, member(rig, 1, 1)), update(INSERT, member(rig, 2, 2)),
            update(INSERT, group(rig, 1, [1, 2])))
    rig.write(update(DELETE, group(rig, 1, [])))
    rig.write(update(DELETE, member(rig, 1, 1)), update(DELETE, member(rig, 2, 2)))
    rig.write(update(INSERT, member(rig, 1, 1)), update(INSERT, group(rig, 1, [1])))
    te = entry(rig, 0xAB)
    te.action.action_profile_group_id = 1
    rig.write(update(INSERT, pb.Entity(table_entry=te)))
    for i in range(32):
        assert [p for p, _ in rig.send(0, pkt(0xAB, 0x01020300 | i))] == [1]


def test_one_shot_action_set(rig: Rig) -> None:
    # test_action_profile.cpp WatchPort's one-shot programming (ports never
    # go down on the soft target, so the watch port changes nothing)
    rig.stream()
    te = entry(rig, 0xAB)
    for port in (1, 2):
        a = te.action.action_profile_action_set.action_profile_actions.add(weight=1, watch=port)
        a.action.action_id = rig.id("actions", "FlowIngress.send")
        a.action.params.add(param_id=1, value=port.to_bytes(2, "big"))
    rig.write(update(INSERT, pb.Entity(table_entry=te)))
    e = 0x01020304
    first = [p for p, _ in rig.send(0, pkt(0xAB, e))]
    assert first == [[1, 2][crc16_arc(e.to_bytes(4, "big")) % 2]]
    assert [p for p, _ in rig.send(0, pkt(0xAB, e))] == first  # the same flow, the same port
    got = rig.read(pb.Entity(table_entry=pb.TableEntry(table_id=te.table_id)))
    assert got[0].table_entry.action.action_profile_action_set == \
        te.action.action_profile_action_set
    rig.write(update(DELETE, pb.Entity(table_entry=entry(rig, 0xAB))))
    prof = rig.sw.action_profiles["FlowIngress.ecmp_sel"]
    assert prof.members == {} and prof.groups == {}  # the hidden group and members went too


def test_errors(rig: Rig) -> None:
    rig.stream()
    rig.write(update(INSERT, member(rig, 1, 1)))
    assert error_code(rig, update(INSERT, member(rig, 1, 1))) == grpc.StatusCode.ALREADY_EXISTS
    assert error_code(rig, update(INSERT, group(rig, 1, [9]))) == grpc.StatusCode.NOT_FOUND
    assert error_code(rig, update(INSERT, group(rig, 1, [1], weight=3))) == \
        grpc.StatusCode.UNIMPLEMENTED
    te = entry(rig, 0xAB)
    te.action.action.action_id = rig.id("actions", "FlowIngress.send")
    assert error_code(rig, update(INSERT, pb.Entity(table_entry=te))) == \
        grpc.StatusCode.INVALID_ARGUMENT


@pytest.mark.parametrize("kind", ["p4runtime", "cli"])
def test_controller_ecmp_on_either_backend(rig: Rig, kind: str) -> None:
    srv: ControlServer = control_server(rig)
    try:
        ctl = (P4RuntimeController(rig.handle.address, None, device_id=rig.device_id)
               if kind == "p4runtime" else SOFT.cli_controller(srv.port))
        with ctl:
            for mid, port in ((1, 1), (2, 2), (3, 3)):
                ctl.profile_member_set("ecmp_sel", mid, "send", {"port": port})
            ctl.profile_group_set("ecmp_sel", 7, [1, 2, 3])
            ctl.table_add_indirect("ecmp", {"h.flow.tag": 0xAB}, group=7)
            ctl.profile_member_set("marks", 1, "mark", {"v": 0x42})
            ctl.table_add_indirect("marker", {"tag": 0xAB}, member=1)
            e = 0x12345678
            out = rig.send(0, pkt(0xAB, e))
            assert [p for p, _ in out] == [[1, 2, 3][crc16_arc(e.to_bytes(4, "big")) % 3]]
            assert out[0][1][-1] == 0x42
            # replace the group's members; re-point a member
            ctl.profile_group_set("ecmp_sel", 7, [3])
            assert [p for p, _ in rig.send(0, pkt(0xAB, e))] == [3]
            ctl.profile_member_set("ecmp_sel", 3, "send", {"port": 4})
            assert [p for p, _ in rig.send(0, pkt(0xAB, e))] == [4]
            with pytest.raises(ControllerError):
                ctl.profile_member_delete("ecmp_sel", 3)  # in the group
            with pytest.raises(ControllerError):
                ctl.table_add_indirect("ecmp", {"h.flow.tag": 1}, group=99)
            ctl.table_delete("ecmp", {"h.flow.tag": 0xAB})
            ctl.profile_group_delete("ecmp_sel", 7)
            ctl.profile_member_delete("ecmp_sel", 3)
            assert [p for p, _ in rig.send(0, pkt(0xAB, e))] == [9]
    finally:
        srv.close()
