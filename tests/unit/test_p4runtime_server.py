"""The soft switch's P4Runtime server, driven by a plain p4runtime_pb2 gRPC
client: arbitration, table entries (LPM, ternary/range, defaults), error
codes as PI reports them, counters, registers, meters, multicast, clone
sessions, packet-in/out, digests and replacing the program at run time."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

pytest.importorskip("p4.v1.p4runtime_pb2", reason="P4Runtime tests need the optional "
                    "'p4runtime' extra (pip install -e '.[p4runtime]')")

import grpc  # noqa: E402
from p4.v1 import p4runtime_pb2 as pb  # noqa: E402
from test_p4runtime_support import (  # noqa: E402
    CPU_P4,
    L3_ROUTER,
    Rig,
    eth_frame,
    ipv4_frame,
    mac,
    update,
    write_cpu_program,
    write_errors,
)

from switches.soft.p4info import p4info_for_program  # noqa: E402

INSERT, MODIFY, DELETE = pb.Update.INSERT, pb.Update.MODIFY, pb.Update.DELETE


@pytest.fixture
def l3() -> Rig:
    rig = Rig(L3_ROUTER)
    yield rig
    rig.close()


@pytest.fixture
def cpu(tmp_path: Path) -> Rig:
    rig = Rig(write_cpu_program(tmp_path))
    yield rig
    rig.close()


def lpm_entry(rig: Rig, prefix: str, plen: int, dmac: str, port: int) -> pb.TableEntry:
    te = pb.TableEntry(table_id=rig.id("tables", "MyIngress.ipv4_lpm"))
    fm = te.match.add(field_id=rig.field_id("ipv4_lpm", "hdr.ipv4.dstAddr"))
    fm.lpm.value = bytes(int(x) for x in prefix.split("."))
    fm.lpm.prefix_len = plen
    a = te.action.action
    a.action_id = rig.id("actions", "MyIngress.set_nhop")
    a.params.add(param_id=rig.param_id("set_nhop", "dmac"), value=mac(dmac))
    a.params.add(param_id=rig.param_id("set_nhop", "port"), value=port.to_bytes(2, "big"))
    return te


def l2_entry(rig: Rig, dst: str, action: str, **params: int) -> pb.TableEntry:
    te = pb.TableEntry(table_id=rig.id("tables", "Ing.l2"))
    te.match.add(field_id=1).exact.value = mac(dst)
    a = te.action.action
    a.action_id = rig.id("actions", action)
    for name, v in params.items():
        a.params.add(param_id=rig.param_id(action, name), value=v.to_bytes(2, "big"))
    return te


def code_of(excinfo: pytest.ExceptionInfo) -> grpc.StatusCode:
    return excinfo.value.code()


# ---------------------------------------------------------------------------
# arbitration


def test_arbitration_primary_backup_and_write_permission(l3: Rig) -> None:
    a = l3.stream(election_id=10)
    b = l3.stream(election_id=5, expect_primary=False)
    upd = update(INSERT, table_entry=lpm_entry(l3, "10.0.1.0", 24, "00:00:00:00:01:01", 1))
    with pytest.raises(grpc.RpcError) as ei:
        l3.write(upd, election_id=5)
    assert code_of(ei) == grpc.StatusCode.PERMISSION_DENIED
    with pytest.raises(grpc.RpcError) as ei:
        l3.write(upd, election_id=11)  # nobody with that id is primary
    assert code_of(ei) == grpc.StatusCode.PERMISSION_DENIED
    l3.write(upd, election_id=10)

    # the primary leaves: the backup is told there is no primary
    a.close()
    r = b.next("arbitration")
    assert r.arbitration.status.code == 5  # NOT_FOUND
    assert r.arbitration.election_id.low == 10
    # a higher election id makes it primary
    b.arbitrate(l3.device_id, 12)
    assert b.next("arbitration").arbitration.status.code == 0
    upd2 = update(INSERT, table_entry=lpm_entry(l3, "10.0.2.0", 24, "00:00:00:00:02:02", 2))
    l3.write(upd2, election_id=12)


def test_arbitration_new_primary_demotes_old_and_bad_requests_end_stream(l3: Rig) -> None:
    a = l3.stream(election_id=3)
    b = l3.stream(election_id=4)
    r = a.next("arbitration")
    assert r.arbitration.status.code == 6  # ALREADY_EXISTS: a is a backup now
    assert r.arbitration.election_id.low == 4
    dup = l3.stream(election_id=4, expect_primary=None)
    with pytest.raises(AssertionError):
        dup.next("arbitration", timeout=5)
    assert dup.error is not None and dup.error.code() == grpc.StatusCode.INVALID_ARGUMENT
    wrong = l3.stream(election_id=None, expect_primary=None)
    wrong.arbitrate(99, 1)  # second message with another device id
    r = wrong.next("arbitration")
    assert r.arbitration.status.code == 6
    with pytest.raises(AssertionError):
        wrong.next("arbitration", timeout=5)
    assert wrong.error.code() == grpc.StatusCode.FAILED_PRECONDITION
    del b


def test_unknown_device_is_not_found(l3: Rig) -> None:
    s = l3.stream(election_id=1, expect_primary=None, device_id=7)
    with pytest.raises(AssertionError):
        s.next("arbitration")
    assert s.error.code() == grpc.StatusCode.NOT_FOUND
    with pytest.raises(grpc.RpcError) as ei:
        l3.stub.Read(pb.ReadRequest(device_id=7, entities=[pb.Entity(
            table_entry=pb.TableEntry())])).next()
    assert code_of(ei) == grpc.StatusCode.NOT_FOUND


# ---------------------------------------------------------------------------
# tables


def test_lpm_entries_forward_and_read_back(l3: Rig) -> None:
    l3.stream()
    l3.write(update(INSERT, table_entry=lpm_entry(l3, "10.0.1.0", 24, "00:00:00:00:01:01", 1)),
             update(INSERT, table_entry=lpm_entry(l3, "10.0.0.0", 8, "00:00:00:00:00:fe", 3)))
    out = l3.send(2, ipv4_frame("10.0.1.9"))
    assert [p for p, _ in out] == [1]
    assert out[0][1][:6] == mac("00:00:00:00:01:01")
    assert [p for p, _ in l3.send(2, ipv4_frame("10.9.9.9"))] == [3]
    assert l3.send(2, ipv4_frame("192.168.1.1")) == []  # default drop

    got = l3.read(pb.Entity(table_entry=pb.TableEntry(table_id=l3.id("tables", "ipv4_lpm"))))
    keys = sorted((e.table_entry.match[0].lpm.value, e.table_entry.match[0].lpm.prefix_len)
                  for e in got)
    assert keys == [(bytes([10, 0, 0, 0]), 8), (bytes([10, 0, 1, 0]), 24)]
    one = [e.table_entry for e in got if e.table_entry.match[0].lpm.prefix_len == 24][0]
    params = {p.param_id: p.value for p in one.action.action.params}
    assert params[l3.param_id("set_nhop", "port")] == b"\x01"  # canonical: no leading zeros
    assert params[l3.param_id("set_nhop", "dmac")] == b"\x01\x01"

    # read all tables, then one entry by key
    assert len(l3.read(pb.Entity(table_entry=pb.TableEntry()))) == 2
    key_only = lpm_entry(l3, "10.0.0.0", 8, "00:00:00:00:00:00", 0)
    key_only.ClearField("action")
    got = l3.read(pb.Entity(table_entry=key_only))
    assert len(got) == 1 and got[0].table_entry.match[0].lpm.prefix_len == 8

    # modify and delete
    l3.write(update(MODIFY, table_entry=lpm_entry(l3, "10.0.0.0", 8, "00:00:00:00:00:fe", 4)))
    assert [p for p, _ in l3.send(2, ipv4_frame("10.9.9.9"))] == [4]
    l3.write(update(DELETE, table_entry=key_only))
    assert l3.send(2, ipv4_frame("10.9.9.9")) == []


def test_write_errors_are_reported_per_update_like_pi(l3: Rig) -> None:
    l3.stream()
    good = lpm_entry(l3, "10.0.1.0", 24, "00:00:00:00:01:01", 1)
    l3.write(update(INSERT, table_entry=good))

    bad_table = pb.TableEntry()
    bad_table.CopyFrom(good)
    bad_table.table_id = 0x02ABCDEF
    wide = lpm_entry(l3, "10.0.2.0", 24, "00:00:00:00:01:01", 1)
    wide.action.action.params[1].value = b"\x02\x00"  # 512 does not fit bit<9>
    trailing = lpm_entry(l3, "10.0.3.1", 24, "00:00:00:00:01:01", 1)  # host bits set
    missing = lpm_entry(l3, "10.7.0.0", 16, "00:00:00:00:01:01", 1)
    ok = lpm_entry(l3, "10.0.9.0", 24, "00:00:00:00:09:09", 2)
    with pytest.raises(grpc.RpcError) as ei:
        l3.write(update(INSERT, table_entry=good),  # duplicate
                 update(INSERT, table_entry=bad_table),
                 update(INSERT, table_entry=wide),
                 update(INSERT, table_entry=trailing),
                 update(MODIFY, table_entry=missing),
                 update(DELETE, table_entry=missing),
                 update(INSERT, table_entry=ok))
    assert code_of(ei) == grpc.StatusCode.UNKNOWN
    codes = [c for c, _ in write_errors(ei.value)]
    S = grpc.StatusCode
    assert codes == [S.ALREADY_EXISTS.value[0], S.INVALID_ARGUMENT.value[0],
                     S.INVALID_ARGUMENT.value[0], S.INVALID_ARGUMENT.value[0],
                     S.NOT_FOUND.value[0], S.NOT_FOUND.value[0], 0]
    # the good update of the batch was applied
    assert [p for p, _ in l3.send(1, ipv4_frame("10.0.9.1"))] == [2]


def test_unknown_ids_and_missing_fields(l3: Rig) -> None:
    l3.stream()
    te = lpm_entry(l3, "10.0.1.0", 24, "00:00:00:00:01:01", 1)
    cases = []
    t = pb.TableEntry()
    t.CopyFrom(te)
    t.match[0].field_id = 9
    cases.append(t)
    t = pb.TableEntry()
    t.CopyFrom(te)
    t.action.action.action_id = l3.id("actions", "MyIngress.set_smac")  # not in this table
    cases.append(t)
    t = pb.TableEntry()
    t.CopyFrom(te)
    del t.action.action.params[1]
    cases.append(t)
    t = pb.TableEntry()
    t.CopyFrom(te)
    t.priority = 5  # an LPM table takes no priority
    cases.append(t)
    for c in cases:
        with pytest.raises(grpc.RpcError) as ei:
            l3.write(update(INSERT, table_entry=c))
        assert write_errors(ei.value)[0][0] == grpc.StatusCode.INVALID_ARGUMENT.value[0], c
    with pytest.raises(grpc.RpcError) as ei:
        l3.read(pb.Entity(table_entry=pb.TableEntry(table_id=0x02000001)))
    assert code_of(ei) == grpc.StatusCode.INVALID_ARGUMENT  # PI: "Invalid P4 id"


def test_default_entry_modify_reset_and_scopes(cpu: Rig) -> None:
    cpu.stream()
    l2 = cpu.id("tables", "Ing.l2")
    frame = eth_frame("02:00:00:00:00:99")
    assert [p for p, _ in cpu.send(1, frame)] == [0]  # NoAction: egress_spec 0

    default = pb.TableEntry(table_id=l2, is_default_action=True)
    default.action.action.action_id = cpu.id("actions", "Ing.fwd")
    default.action.action.params.add(param_id=1, value=b"\x05")
    cpu.write(update(MODIFY, table_entry=default))
    assert [p for p, _ in cpu.send(1, frame)] == [5]
    got = cpu.read(pb.Entity(table_entry=pb.TableEntry(table_id=l2, is_default_action=True)))
    assert got[0].table_entry.action.action.action_id == cpu.id("actions", "Ing.fwd")
    reset = pb.TableEntry(table_id=l2, is_default_action=True)
    cpu.write(update(MODIFY, table_entry=reset))
    assert [p for p, _ in cpu.send(1, frame)] == [0]

    S = grpc.StatusCode
    # INSERT of the default entry, @defaultonly in an entry, @tableonly as default
    noaction = l2_entry(cpu, "02:00:00:00:00:01", "NoAction")
    acl_default = pb.TableEntry(table_id=cpu.id("tables", "acl"), is_default_action=True)
    acl_default.action.action.action_id = cpu.id("actions", "Ing.drop")
    for upd, code in [(update(INSERT, table_entry=default), S.INVALID_ARGUMENT),
                      (update(INSERT, table_entry=noaction), S.PERMISSION_DENIED),
                      (update(MODIFY, table_entry=acl_default), S.PERMISSION_DENIED)]:
        with pytest.raises(grpc.RpcError) as ei:
            cpu.write(upd)
        assert write_errors(ei.value)[0][0] == code.value[0]


def test_ternary_range_priorities_and_direct_counter(cpu: Rig) -> None:
    cpu.stream()
    acl = cpu.id("tables", "acl")

    def acl_entry(ethertype: int, mask: int, lo: int, hi: int, prio: int, action: str) -> pb.TableEntry:
        te = pb.TableEntry(table_id=acl, priority=prio)
        fm = te.match.add(field_id=cpu.field_id("acl", "hdr.ethernet.etherType"))
        fm.ternary.value = ethertype.to_bytes(2, "big")
        fm.ternary.mask = mask.to_bytes(2, "big")
        fr = te.match.add(field_id=cpu.field_id("acl", "sm.ingress_port"))
        fr.range.low = lo.to_bytes(2, "big")
        fr.range.high = hi.to_bytes(2, "big")
        te.action.action.action_id = cpu.id("actions", action)
        return te

    cpu.write(update(INSERT, table_entry=l2_entry(cpu, "02:00:00:00:00:22", "Ing.fwd", port=2)))
    # the higher P4Runtime priority wins
    cpu.write(update(INSERT, table_entry=acl_entry(0x88B5, 0xFFFF, 1, 3, 10, "Ing.drop")),
              update(INSERT, table_entry=acl_entry(0x88B5, 0xFFFF, 1, 1, 20, "Ing.acl_permit")))
    frame = eth_frame("02:00:00:00:00:22")
    assert [p for p, _ in cpu.send(1, frame)] == [2]  # prio 20 permits port 1
    assert cpu.send(3, frame) == []  # prio 10 drops port 3
    assert [p for p, _ in cpu.send(4, frame)] == [2]  # outside the range: default permit

    no_prio = acl_entry(0x0800, 0xFFFF, 1, 3, 0, "Ing.drop")
    with pytest.raises(grpc.RpcError) as ei:
        cpu.write(update(INSERT, table_entry=no_prio))
    assert write_errors(ei.value)[0][0] == grpc.StatusCode.INVALID_ARGUMENT.value[0]
    dup = acl_entry(0x88B5, 0xFFFF, 1, 3, 10, "Ing.drop")
    with pytest.raises(grpc.RpcError) as ei:
        cpu.write(update(INSERT, table_entry=dup))
    assert write_errors(ei.value)[0][0] == grpc.StatusCode.ALREADY_EXISTS.value[0]

    want = pb.TableEntry(table_id=acl)
    want.counter_data.SetInParent()
    got = {e.table_entry.priority: e.table_entry for e in cpu.read(pb.Entity(table_entry=want))}
    assert set(got) == {10, 20}
    assert got[20].counter_data.packet_count == 1
    assert got[20].counter_data.byte_count == len(frame)
    assert got[10].match[1].range.low == b"\x01" and got[10].match[1].range.high == b"\x03"

    dce = pb.DirectCounterEntry()
    dce.table_entry.CopyFrom(acl_entry(0x88B5, 0xFFFF, 1, 3, 10, "Ing.drop"))
    dce.table_entry.ClearField("action")
    got = cpu.read(pb.Entity(direct_counter_entry=dce))
    assert got[0].direct_counter_entry.data.packet_count == 1
    dce.data.packet_count = 100
    cpu.write(update(MODIFY, direct_counter_entry=dce))
    got = cpu.read(pb.Entity(direct_counter_entry=dce))
    assert got[0].direct_counter_entry.data.packet_count == 100


# ---------------------------------------------------------------------------
# externs and PRE


def test_registers_write_and_read_back(cpu: Rig) -> None:
    cpu.stream()
    rid = cpu.id("registers", "Ing.last_len")
    frame = eth_frame("02:00:00:00:00:22")
    cpu.send(3, frame)
    re_ = pb.RegisterEntry(register_id=rid)
    re_.index.index = 3
    got = cpu.read(pb.Entity(register_entry=re_))
    assert int.from_bytes(got[0].register_entry.data.bitstring, "big") == len(frame)

    re_.data.bitstring = (0xDEADBEEF).to_bytes(4, "big")
    cpu.write(update(MODIFY, register_entry=re_))
    got = cpu.read(pb.Entity(register_entry=re_))
    assert got[0].register_entry.data.bitstring == bytes.fromhex("deadbeef")
    with cpu.sw.lock:
        assert cpu.sw.registers["Ing.last_len"].values[3] == 0xDEADBEEF
    everything = cpu.read(pb.Entity(register_entry=pb.RegisterEntry(register_id=rid)))
    assert len(everything) == 16

    S = grpc.StatusCode
    re_.index.index = 16
    with pytest.raises(grpc.RpcError) as ei:
        cpu.write(update(MODIFY, register_entry=re_))
    assert write_errors(ei.value)[0][0] == S.OUT_OF_RANGE.value[0]
    re_.index.index = 1
    re_.data.bitstring = b"\x01" + bytes(4)  # 33 bits
    with pytest.raises(grpc.RpcError) as ei:
        cpu.write(update(MODIFY, register_entry=re_))
    assert write_errors(ei.value)[0][0] == S.INVALID_ARGUMENT.value[0]
    with pytest.raises(grpc.RpcError) as ei:
        cpu.write(update(INSERT, register_entry=re_))
    assert write_errors(ei.value)[0][0] == S.INVALID_ARGUMENT.value[0]


def test_counters_and_meters(cpu: Rig) -> None:
    cpu.stream()
    frame = eth_frame("02:00:00:00:00:22")
    for _ in range(3):
        cpu.send(2, frame)
    cid = cpu.id("counters", "port_pkts")
    ce = pb.CounterEntry(counter_id=cid)
    ce.index.index = 2
    got = cpu.read(pb.Entity(counter_entry=ce))
    assert got[0].counter_entry.data.packet_count == 3
    assert got[0].counter_entry.data.byte_count == 3 * len(frame)
    assert len(cpu.read(pb.Entity(counter_entry=pb.CounterEntry()))) == 8  # all counters
    ce.data.packet_count = 0
    ce.data.byte_count = 0
    cpu.write(update(MODIFY, counter_entry=ce))
    assert cpu.read(pb.Entity(counter_entry=ce))[0].counter_entry.data.packet_count == 0

    me = pb.MeterEntry(meter_id=cpu.id("meters", "port_meter"))
    me.index.index = 1
    me.config.cir, me.config.cburst, me.config.pir, me.config.pburst = 1000, 10, 2000, 20
    cpu.write(update(MODIFY, meter_entry=me))
    got = cpu.read(pb.Entity(meter_entry=me))[0].meter_entry.config
    assert (got.cir, got.cburst, got.pir, got.pburst) == (1000, 10, 2000, 20)
    me.config.cir = 5000  # committed above peak
    with pytest.raises(grpc.RpcError) as ei:
        cpu.write(update(MODIFY, meter_entry=me))
    assert write_errors(ei.value)[0][0] == grpc.StatusCode.INVALID_ARGUMENT.value[0]


def test_multicast_group_replicates(cpu: Rig) -> None:
    cpu.stream()
    g = pb.PacketReplicationEngineEntry()
    g.multicast_group_entry.multicast_group_id = 7
    for port in (2, 3, 5):
        g.multicast_group_entry.replicas.add(egress_port=port, instance=1)
    cpu.write(update(INSERT, packet_replication_engine_entry=g),
              update(INSERT, table_entry=l2_entry(cpu, "ff:ff:ff:ff:ff:ff", "Ing.flood", grp=7)))
    out = cpu.send(1, eth_frame("ff:ff:ff:ff:ff:ff"))
    assert sorted(p for p, _ in out) == [2, 3, 5]
    got = cpu.read(pb.Entity(packet_replication_engine_entry=pb.PacketReplicationEngineEntry(
        multicast_group_entry=pb.MulticastGroupEntry())))
    reps = got[0].packet_replication_engine_entry.multicast_group_entry.replicas
    assert sorted((r.egress_port, r.instance) for r in reps) == [(2, 1), (3, 1), (5, 1)]

    del g.multicast_group_entry.replicas[2]
    cpu.write(update(MODIFY, packet_replication_engine_entry=g))
    assert sorted(p for p, _ in cpu.send(1, eth_frame("ff:ff:ff:ff:ff:ff"))) == [2, 3]
    S = grpc.StatusCode
    for upd, code in [(update(INSERT, packet_replication_engine_entry=g), S.ALREADY_EXISTS)]:
        with pytest.raises(grpc.RpcError) as ei:
            cpu.write(upd)
        assert write_errors(ei.value)[0][0] == code.value[0]
    cpu.write(update(DELETE, packet_replication_engine_entry=g))
    with pytest.raises(grpc.RpcError) as ei:
        cpu.write(update(DELETE, packet_replication_engine_entry=g))
    assert write_errors(ei.value)[0][0] == S.NOT_FOUND.value[0]

    cs = pb.PacketReplicationEngineEntry()
    cs.clone_session_entry.session_id = 5
    cs.clone_session_entry.replicas.add(egress_port=4)
    cpu.write(update(INSERT, packet_replication_engine_entry=cs))
    with cpu.sw.lock:
        assert cpu.sw.mirrors.get(5).port == 4
    got = cpu.read(pb.Entity(packet_replication_engine_entry=pb.PacketReplicationEngineEntry(
        clone_session_entry=pb.CloneSessionEntry())))
    assert got[0].packet_replication_engine_entry.clone_session_entry.replicas[0].egress_port == 4


# ---------------------------------------------------------------------------
# stream: packet I/O and digests


def test_packet_in_and_packet_out(cpu: Rig) -> None:
    s = cpu.stream()
    cpu.write(update(INSERT, table_entry=l2_entry(cpu, "02:00:00:00:00:cc", "Ing.to_cpu")))
    frame = eth_frame("02:00:00:00:00:cc")
    assert cpu.send(6, frame) == []  # goes to the controller, not to a port
    pin = s.next("packet").packet
    assert pin.payload == frame
    assert [(m.metadata_id, m.value) for m in pin.metadata] == [(1, b"\x06"), (2, b"\x00")]

    po = pb.StreamMessageRequest()
    po.packet.payload = eth_frame("02:00:00:00:00:dd")
    po.packet.metadata.add(metadata_id=1, value=b"\x03")
    po.packet.metadata.add(metadata_id=2, value=b"\x00")
    s.send(po)
    for _ in range(100):
        if cpu.tx:
            break
        time.sleep(0.02)
    assert cpu.tx == [(3, eth_frame("02:00:00:00:00:dd"))]  # packet_out header removed

    bad = pb.StreamMessageRequest()
    bad.packet.payload = b"x" * 20
    bad.packet.metadata.add(metadata_id=9, value=b"\x01")
    s.send(bad)
    err = s.next("error").error
    assert err.canonical_code == grpc.StatusCode.INVALID_ARGUMENT.value[0]
    assert err.packet_out.packet_out.payload == b"x" * 20


def test_backup_gets_no_packet_in_and_cannot_send(cpu: Rig) -> None:
    primary = cpu.stream(election_id=2)
    backup = cpu.stream(election_id=1, expect_primary=False)
    cpu.write(update(INSERT, table_entry=l2_entry(cpu, "02:00:00:00:00:cc", "Ing.to_cpu")),
              election_id=2)
    cpu.send(1, eth_frame("02:00:00:00:00:cc"))
    assert primary.next("packet").packet.payload[:6] == mac("02:00:00:00:00:cc")
    po = pb.StreamMessageRequest()
    po.packet.payload = eth_frame("02:00:00:00:00:dd")
    backup.send(po)
    assert backup.next("error").error.canonical_code == \
        grpc.StatusCode.PERMISSION_DENIED.value[0]
    assert backup.responses.empty()


def test_digest_list_delivered_and_deduplicated(cpu: Rig) -> None:
    s = cpu.stream()
    did = cpu.id("digests", "learn_t")
    de = pb.DigestEntry(digest_id=did)
    de.config.max_timeout_ns = 0
    de.config.max_list_size = 1
    de.config.ack_timeout_ns = 10 * 10**9
    cpu.write(update(INSERT, digest_entry=de))
    assert cpu.read(pb.Entity(digest_entry=pb.DigestEntry()))[0].digest_entry.digest_id == did

    cpu.send(4, eth_frame("02:00:00:00:00:22", src="02:00:00:00:00:07"))
    dl = s.next("digest").digest
    assert dl.digest_id == did
    members = [m.bitstring for m in dl.data[0].struct.members]
    assert members == [mac("02:00:00:00:00:07").lstrip(b"\x00"), b"\x04"]
    # the same data again before the ack: held back; after the ack: sent again
    cpu.send(4, eth_frame("02:00:00:00:00:22", src="02:00:00:00:00:07"))
    cpu.send(4, eth_frame("02:00:00:00:00:22", src="02:00:00:00:00:08"))
    second = s.next("digest").digest
    assert second.data[0].struct.members[0].bitstring[-1] == 0x08
    ack = pb.StreamMessageRequest()
    ack.digest_ack.digest_id = did
    ack.digest_ack.list_id = dl.list_id
    s.send(ack)
    time.sleep(0.2)
    cpu.send(4, eth_frame("02:00:00:00:00:22", src="02:00:00:00:00:07"))
    assert s.next("digest").digest.data[0].struct.members[0].bitstring[-1] == 0x07

    cpu.write(update(DELETE, digest_entry=de))
    with pytest.raises(grpc.RpcError) as ei:
        cpu.write(update(DELETE, digest_entry=de))
    assert write_errors(ei.value)[0][0] == grpc.StatusCode.NOT_FOUND.value[0]


# ---------------------------------------------------------------------------
# pipeline config


def test_set_pipeline_replaces_program_at_run_time(l3: Rig, tmp_path: Path) -> None:
    l3.stream()
    l3.write(update(INSERT, table_entry=lpm_entry(l3, "10.0.1.0", 24, "00:00:00:00:01:01", 1)))
    assert [p for p, _ in l3.send(2, ipv4_frame("10.0.1.9"))] == [1]

    prog = write_cpu_program(tmp_path)
    req = pb.SetForwardingPipelineConfigRequest(
        device_id=l3.device_id, action=pb.SetForwardingPipelineConfigRequest.VERIFY_AND_COMMIT)
    req.election_id.low = 1
    req.config.p4info.CopyFrom(p4info_for_program(prog))
    req.config.p4_device_config = CPU_P4.encode()
    req.config.cookie.cookie = 42
    l3.stub.SetForwardingPipelineConfig(req)

    got = l3.stub.GetForwardingPipelineConfig(pb.GetForwardingPipelineConfigRequest(
        device_id=l3.device_id)).config
    assert got.cookie.cookie == 42 and got.p4_device_config == CPU_P4.encode()
    l3.p4info = got.p4info
    # the old program's state is gone, the new one forwards by MAC
    assert [p for p, _ in l3.send(2, ipv4_frame("10.0.1.9"))] == [0]  # l2 miss: port 0
    l3.write(update(INSERT, table_entry=l2_entry(l3, "02:00:00:00:00:22", "Ing.fwd", port=6)))
    assert [p for p, _ in l3.send(1, eth_frame("02:00:00:00:00:22"))] == [6]
    with pytest.raises(grpc.RpcError) as ei:  # old ids are gone
        l3.read(pb.Entity(table_entry=pb.TableEntry(table_id=l3.id("tables", "Ing.l2") ^ 1)))
    assert code_of(ei) == grpc.StatusCode.INVALID_ARGUMENT

    # back to the router, named by path (JSON device config); VERIFY changes nothing
    back = pb.SetForwardingPipelineConfigRequest(device_id=l3.device_id)
    back.election_id.low = 1
    back.config.p4_device_config = json.dumps({"program": str(L3_ROUTER)}).encode()
    back.action = pb.SetForwardingPipelineConfigRequest.VERIFY
    l3.stub.SetForwardingPipelineConfig(back)
    assert [p for p, _ in l3.send(1, eth_frame("02:00:00:00:00:22"))] == [6]
    back.action = pb.SetForwardingPipelineConfigRequest.VERIFY_AND_COMMIT
    l3.stub.SetForwardingPipelineConfig(back)
    l3.p4info = l3.stub.GetForwardingPipelineConfig(pb.GetForwardingPipelineConfigRequest(
        device_id=l3.device_id)).config.p4info
    l3.write(update(INSERT, table_entry=lpm_entry(l3, "10.0.1.0", 24, "00:00:00:00:01:01", 5)))
    assert [p for p, _ in l3.send(2, ipv4_frame("10.0.1.9"))] == [5]


def test_set_pipeline_errors(l3: Rig) -> None:
    l3.stream(election_id=3)
    A = pb.SetForwardingPipelineConfigRequest
    req = A(device_id=l3.device_id, action=A.VERIFY_AND_COMMIT)
    req.election_id.low = 3
    req.config.p4_device_config = b"control broken {"
    with pytest.raises(grpc.RpcError) as ei:
        l3.stub.SetForwardingPipelineConfig(req)
    assert code_of(ei) == grpc.StatusCode.INVALID_ARGUMENT
    assert "does not compile" in ei.value.details()
    req.config.p4_device_config = CPU_P4.encode()
    req.config.p4info.CopyFrom(l3.p4info)  # the router's P4Info does not fit this program
    with pytest.raises(grpc.RpcError) as ei:
        l3.stub.SetForwardingPipelineConfig(req)
    assert code_of(ei) == grpc.StatusCode.INVALID_ARGUMENT
    req.election_id.low = 2
    with pytest.raises(grpc.RpcError) as ei:
        l3.stub.SetForwardingPipelineConfig(req)
    assert code_of(ei) == grpc.StatusCode.PERMISSION_DENIED
    commit = A(device_id=l3.device_id, action=A.COMMIT)
    commit.election_id.low = 3
    with pytest.raises(grpc.RpcError) as ei:
        l3.stub.SetForwardingPipelineConfig(commit)
    assert code_of(ei) == grpc.StatusCode.NOT_FOUND  # nothing saved
    # the router still runs
    l3.write(update(INSERT, table_entry=lpm_entry(l3, "10.0.1.0", 24, "00:00:00:00:01:01", 1)),
             election_id=3)
    assert [p for p, _ in l3.send(2, ipv4_frame("10.0.1.9"))] == [1]


def test_reconcile_and_commit_keeps_entries(l3: Rig, tmp_path: Path) -> None:
    l3.stream()
    g = pb.PacketReplicationEngineEntry()
    g.multicast_group_entry.multicast_group_id = 4
    g.multicast_group_entry.replicas.add(egress_port=2)
    l3.write(update(INSERT, table_entry=lpm_entry(l3, "10.0.1.0", 24, "00:00:00:00:01:01", 1)),
             update(INSERT, packet_replication_engine_entry=g))
    # the same program under another file name and an extra comment: entries carry over
    src = L3_ROUTER.read_text()
    A = pb.SetForwardingPipelineConfigRequest
    req = A(device_id=l3.device_id, action=A.RECONCILE_AND_COMMIT)
    req.election_id.low = 1
    req.config.p4_device_config = ("// reconciled\n" + src).encode()
    l3.stub.SetForwardingPipelineConfig(req)
    assert [p for p, _ in l3.send(2, ipv4_frame("10.0.1.9"))] == [1]
    with l3.sw.lock:
        assert l3.sw.pre.replicate(4) == [(2, 0)]
        assert l3.sw.events["program_loads"] == 1
    # a program without that table cannot keep the entry
    req.config.p4_device_config = CPU_P4.encode()
    with pytest.raises(grpc.RpcError) as ei:
        l3.stub.SetForwardingPipelineConfig(req)
    assert code_of(ei) == grpc.StatusCode.INVALID_ARGUMENT
    assert [p for p, _ in l3.send(2, ipv4_frame("10.0.1.9"))] == [1]


def test_write_before_primary_and_capabilities(l3: Rig) -> None:
    with pytest.raises(grpc.RpcError) as ei:
        l3.write(update(INSERT, table_entry=lpm_entry(l3, "10.0.1.0", 24, "00:00:00:00:01:01", 1)))
    assert code_of(ei) == grpc.StatusCode.PERMISSION_DENIED
    caps = l3.stub.Capabilities(pb.CapabilitiesRequest())
    assert caps.p4runtime_api_version.startswith("1.")
    # malformed requests get errors, and the server keeps serving
    l3.stream()
    with pytest.raises(grpc.RpcError) as ei:
        l3.write(pb.Update(type=INSERT))
    assert write_errors(ei.value)[0][0] == grpc.StatusCode.INVALID_ARGUMENT.value[0]
    with pytest.raises(grpc.RpcError) as ei:
        l3.read(pb.Entity())
    assert code_of(ei) == grpc.StatusCode.INVALID_ARGUMENT
    assert l3.read(pb.Entity(table_entry=pb.TableEntry())) == []


def test_without_initial_pipeline_reads_and_writes_wait_for_a_config() -> None:
    rig = Rig(L3_ROUTER, initial_pipeline=False)
    try:
        assert len(rig.p4info.tables) == 0  # GetForwardingPipelineConfig: no config yet
        rig.stream()
        rig.p4info = p4info_for_program(L3_ROUTER)
        upd = update(INSERT, table_entry=lpm_entry(rig, "10.0.1.0", 24, "00:00:00:00:01:01", 1))
        with pytest.raises(grpc.RpcError) as ei:
            rig.write(upd)
        assert code_of(ei) == grpc.StatusCode.FAILED_PRECONDITION
        with pytest.raises(grpc.RpcError) as ei:
            rig.read(pb.Entity(table_entry=pb.TableEntry()))
        assert code_of(ei) == grpc.StatusCode.FAILED_PRECONDITION
        A = pb.SetForwardingPipelineConfigRequest
        req = A(device_id=rig.device_id, action=A.VERIFY_AND_SAVE)
        req.election_id.low = 1
        req.config.p4info.CopyFrom(rig.p4info)
        req.config.p4_device_config = json.dumps({"program": str(L3_ROUTER)}).encode()
        rig.stub.SetForwardingPipelineConfig(req)
        commit = A(device_id=rig.device_id, action=A.COMMIT)
        commit.election_id.low = 1
        rig.stub.SetForwardingPipelineConfig(commit)
        rig.write(upd)
        assert [p for p, _ in rig.send(2, ipv4_frame("10.0.1.9"))] == [1]
    finally:
        rig.close()


def test_digests_are_batched_by_list_size_and_timeout(cpu: Rig) -> None:
    s = cpu.stream()
    did = cpu.id("digests", "learn_t")
    de = pb.DigestEntry(digest_id=did)
    de.config.max_list_size = 3
    de.config.max_timeout_ns = 10 * 10**9
    cpu.write(update(INSERT, digest_entry=de))
    for last in (1, 2, 2, 3):  # the repeated one is not added twice
        cpu.send(1, eth_frame("02:00:00:00:00:22", src=f"02:00:00:00:00:0{last}"))
    dl = s.next("digest").digest
    assert [d.struct.members[0].bitstring[-1] for d in dl.data] == [1, 2, 3]

    de.config.max_list_size = 0  # no size limit: the timeout sends the list
    de.config.max_timeout_ns = 50 * 10**6
    cpu.write(update(MODIFY, digest_entry=de))
    t0 = time.monotonic()
    cpu.send(1, eth_frame("02:00:00:00:00:22", src="02:00:00:00:00:09"))
    dl = s.next("digest").digest
    assert time.monotonic() - t0 >= 0.04
    assert [d.struct.members[0].bitstring[-1] for d in dl.data] == [9]
