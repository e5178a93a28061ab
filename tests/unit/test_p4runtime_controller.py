"""switches.controller: the same calls over P4Runtime and over the CLI verbs
(the soft switch's control port), checked against the switch's behaviour."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest

pytest.importorskip("p4.v1.p4runtime_pb2", reason="P4Runtime tests need the optional "
                    "'p4runtime' extra (pip install -e '.[p4runtime]')")

from test_p4runtime_support import (  # noqa: E402
    L3_ROUTER,
    Rig,
    eth_frame,
    ipv4_frame,
    write_cpu_program,
)

from switches.controller.api import ControllerError, to_int  # noqa: E402
from switches.controller.p4runtime import P4RuntimeController  # noqa: E402
from switches.soft.control.server import CommandFailed, ControlServer  # noqa: E402
from switches.soft.control.verbs import (
    CommandError,  # noqa: E402
    ControlPlane,
)
from switches.targets import SOFT  # noqa: E402


def control_server(rig: Rig) -> ControlServer:
    def execute(line: str) -> str:
        with rig.sw.lock:
            try:
                return ControlPlane(rig.sw).execute(line)
            except CommandError as e:
                raise CommandFailed(str(e)) from e

    srv = ControlServer(execute, port=0)
    srv.start()
    return srv


@pytest.fixture
def l3() -> Iterator[tuple[Rig, ControlServer]]:
    rig = Rig(L3_ROUTER)
    srv = control_server(rig)
    yield rig, srv
    srv.close()
    rig.close()


@pytest.fixture
def cpu(tmp_path: Path) -> Iterator[tuple[Rig, ControlServer]]:
    rig = Rig(write_cpu_program(tmp_path))
    srv = control_server(rig)
    yield rig, srv
    srv.close()
    rig.close()


def p4rt(rig: Rig, srv: ControlServer | None = None) -> P4RuntimeController:
    return P4RuntimeController(rig.handle.address, None, device_id=rig.device_id,
                               cli=SOFT.cli_controller(srv.port) if srv else None)


def test_values() -> None:
    assert to_int("10.0.1.2") == 0x0A000102
    assert to_int("00:00:00:00:01:0a") == 0x10A
    assert to_int("0x1f") == 31 and to_int(b"\x01\x00") == 256 and to_int(7) == 7
    assert to_int("::1") == 1
    with pytest.raises(ControllerError):
        to_int(512, 9)


@pytest.mark.parametrize("kind", ["p4runtime", "cli"])
def test_router_entries_over_either_backend(l3: tuple[Rig, ControlServer], kind: str) -> None:
    rig, srv = l3
    ctl = p4rt(rig, srv) if kind == "p4runtime" else SOFT.cli_controller(srv.port)
    with ctl:
        ctl.table_add("ipv4_lpm", {"hdr.ipv4.dstAddr": ("10.0.1.0", 24)}, "set_nhop",
                      {"dmac": "00:00:00:00:01:01", "port": 1})
        ctl.table_add("MyIngress.ipv4_lpm", {"dstAddr": "10.0.0.0/8"}, "set_nhop",
                      {"dmac": "00:00:00:00:00:fe", "port": 3})
        assert [p for p, _ in rig.send(2, ipv4_frame("10.0.1.5"))] == [1]
        assert [p for p, _ in rig.send(2, ipv4_frame("10.7.0.1"))] == [3]
        entries = sorted(ctl.table_entries("ipv4_lpm"), key=lambda e: e.match["hdr.ipv4.dstAddr"])
        assert [(e.match["hdr.ipv4.dstAddr"], e.action, e.params) for e in entries] == [
            ((0x0A000000, 8), "MyIngress.set_nhop", {"dmac": 0xFE, "port": 3}),
            ((0x0A000100, 24), "MyIngress.set_nhop", {"dmac": 0x101, "port": 1}),
        ]
        ctl.table_modify("ipv4_lpm", {"hdr.ipv4.dstAddr": ("10.0.0.0", 8)}, "set_nhop",
                         {"dmac": "00:00:00:00:00:fe", "port": 4})
        assert [p for p, _ in rig.send(2, ipv4_frame("10.7.0.1"))] == [4]
        ctl.table_delete("ipv4_lpm", {"hdr.ipv4.dstAddr": ("10.0.0.0", 8)})
        assert rig.send(2, ipv4_frame("10.7.0.1")) == []
        ctl.table_set_default("ipv4_lpm", "set_nhop", {"dmac": 1, "port": 6})
        assert [p for p, _ in rig.send(2, ipv4_frame("10.7.0.1"))] == [6]
        with pytest.raises(ControllerError):
            ctl.table_add("ipv4_lpm", {"hdr.ipv4.dstAddr": ("10.0.1.0", 24)}, "set_nhop",
                          {"dmac": 1, "port": 1})  # duplicate
        with pytest.raises(ControllerError):
            ctl.table_add("nosuch", {}, "set_nhop")
        # queue settings go through the CLI in both cases
        ctl.set_queue_depth(7, port=1)
        ctl.set_queue_rate(100, port=1)
        ctl.set_port_rate_bps(10_000_000, port=1)
    with rig.sw.lock:
        q = rig.sw.tm.stats()["1"]
    assert q["queues"][0]["capacity"] == 7 and q["queues"][0]["rate_pps"] == 100
    assert q["rate_bps"] == 10_000_000


@pytest.mark.parametrize("kind", ["p4runtime", "cli"])
def test_ternary_priorities_registers_counters_multicast(cpu: tuple[Rig, ControlServer],
                                                        kind: str) -> None:
    rig, srv = cpu
    ctl = p4rt(rig, srv) if kind == "p4runtime" else SOFT.cli_controller(srv.port)
    with ctl:
        ctl.table_add("l2", {"hdr.ethernet.dstAddr": "02:00:00:00:00:22"}, "fwd", {"port": 2})
        ctl.table_add("acl", {"etherType": (0x88B5, 0xFFFF), "ingress_port": (1, 3)}, "drop",
                      priority=10)
        ctl.table_add("acl", {"etherType": (0x88B5, 0xFFFF), "ingress_port": (1, 1)},
                      "acl_permit", priority=20)
        frame = eth_frame("02:00:00:00:00:22")
        assert [p for p, _ in rig.send(1, frame)] == [2]  # priority 20 wins
        assert rig.send(3, frame) == []
        got = {e.priority: e.action for e in ctl.table_entries("acl")}
        assert got == {10: "Ing.drop", 20: "Ing.acl_permit"}
        ctl.table_delete("acl", {"etherType": (0x88B5, 0xFFFF), "ingress_port": (1, 1)},
                         priority=20)
        assert rig.send(1, frame) == []

        assert ctl.register_read("last_len", 3) == len(frame)
        ctl.register_write("last_len", 5, 1234)
        assert ctl.register_read("Ing.last_len", 5) == 1234
        assert len(ctl.register_read("last_len")) == 16
        assert ctl.counter_read("port_pkts", 1) == (2, 2 * len(frame))

        ctl.mc_group_set(3, [4, 5])
        ctl.table_add("l2", {"hdr.ethernet.dstAddr": "ff:ff:ff:ff:ff:ff"}, "flood", {"grp": 3})
        assert sorted(p for p, _ in rig.send(9, eth_frame("ff:ff:ff:ff:ff:ff"))) == [4, 5]
        ctl.mc_group_set(3, [6])  # replaces the group
        assert [p for p, _ in rig.send(9, eth_frame("ff:ff:ff:ff:ff:ff"))] == [6]
        ctl.clone_session_set(9, 7)
        ctl.clone_session_set(9, 8)
        with rig.sw.lock:
            assert rig.sw.mirrors.get(9).port == 8
        ctl.set_priority_weights(1, None)


def test_p4runtime_packet_io_digests_and_pipeline(cpu: tuple[Rig, ControlServer],
                                                  tmp_path: Path) -> None:
    rig, _ = cpu
    with p4rt(rig) as ctl:
        ctl.table_add("l2", {"hdr.ethernet.dstAddr": "02:00:00:00:00:cc"}, "to_cpu")
        frame = eth_frame("02:00:00:00:00:cc")
        rig.send(4, frame)
        payload, meta = ctl.packet_in(timeout=5)
        assert payload == frame and meta["ingress_port"] == 4
        ctl.packet_out(eth_frame("02:00:00:00:00:01"), egress_port=2)
        for _ in range(100):
            if rig.tx:
                break
            time.sleep(0.02)
        assert rig.tx == [(2, eth_frame("02:00:00:00:00:01"))]

        ctl.digest_enable("learn_t")
        rig.send(3, eth_frame("02:00:00:00:00:cc", src="02:00:00:00:00:0b"))
        name, lists = ctl.digest_list(timeout=5)
        assert name == "learn_t" and lists == [[0x02000000000B, 3]]

        with pytest.raises(ControllerError, match="needs a CLI"):
            ctl.set_queue_rate(10)

        ctl.set_forwarding_pipeline(str(L3_ROUTER))
        ctl.table_add("ipv4_lpm", {"hdr.ipv4.dstAddr": ("10.0.1.0", 24)}, "set_nhop",
                      {"dmac": 1, "port": 1})
        assert [p for p, _ in rig.send(2, ipv4_frame("10.0.1.5"))] == [1]


def test_second_controller_is_not_primary(l3: tuple[Rig, ControlServer]) -> None:
    rig, _ = l3
    with P4RuntimeController(rig.handle.address, None, device_id=rig.device_id, election_id=5):
        with pytest.raises(ControllerError) as ei:
            P4RuntimeController(rig.handle.address, None, device_id=rig.device_id,
                                election_id=4)
        assert ei.value.code == "PERMISSION_DENIED"


def test_pipeline_config_with_a_device_config_and_an_unknown_action(
        l3: tuple[Rig, ControlServer]) -> None:
    import json

    from switches.soft.p4info import p4info_for_program

    rig, _ = l3
    with p4rt(rig) as ctl:
        p4info = p4info_for_program(str(L3_ROUTER), ())
        cfg = json.dumps({"program": str(L3_ROUTER)}).encode()
        with pytest.raises(ControllerError, match="unknown pipeline action 'INSTALL'"):
            ctl.set_pipeline_config(p4info, cfg, action="INSTALL")
        ctl.set_pipeline_config(p4info, cfg)
        ctl.table_add("ipv4_lpm", {"hdr.ipv4.dstAddr": ("10.0.1.0", 24)}, "set_nhop",
                      {"dmac": 1, "port": 1})
        assert [p for p, _ in rig.send(2, ipv4_frame("10.0.1.5"))] == [1]
