"""The v1model pipeline around the hand-written L2/L3 program: forwarding,
end-of-ingress/egress order (clone, resubmit, recirculate, multicast, drop),
standard_metadata values, stats, and robustness."""

from __future__ import annotations

import json

import pytest
import test_runtime_support as prog
from test_runtime_support import FakeClock, ipv4_frame, l2_frame

from switches.soft.control.verbs import ControlPlane
from switches.soft.runtime.switch import SoftSwitch

RID_SRC = 0x020000000000


def make(**kw) -> tuple[SoftSwitch, FakeClock]:
    clock = kw.pop("clock", None) or FakeClock()
    module = kw.pop("module", prog)
    return SoftSwitch(module, now_us=clock, **kw), clock


def ctl(sw: SoftSwitch, *lines: str) -> None:
    for line in lines:
        ControlPlane(sw).execute(line)


def src(special: int, byte5: int = 0) -> int:
    return RID_SRC | (byte5 << 8) | special


def itype_of(frame: bytes) -> int:
    return frame[10]  # egress writes instance_type into byte 5 of the source MAC


def test_ipv4_forwarding_rewrites_and_updates_checksum() -> None:
    sw, _ = make()
    ctl(sw, "table_add ipv4_lpm ipv4_forward 10.0.1.0/24 => 00:00:00:00:01:01 3")
    out = sw.process_sync(1, ipv4_frame("10.0.1.7", ttl=64))
    assert len(out) == 1
    port, frame = out[0]
    assert port == 3
    assert frame[:6] == bytes.fromhex("000000000101")
    assert frame[22] == 63  # ttl decremented
    from switches.soft.runtime.externs import csum16
    assert csum16(frame[14:34]) == 0  # compute_checksum ran before deparse
    assert sw.stats()["tx"] == {"3": 1}


def test_default_drop_and_mark_to_drop_counted() -> None:
    sw, _ = make()
    assert sw.process_sync(1, ipv4_frame("192.168.0.1")) == []  # default action drop
    assert sw.stats()["drops"] == {"drop_port": 1}


def test_untouched_egress_spec_goes_to_port_0() -> None:
    sw, _ = make()
    out = sw.process_sync(2, l2_frame(0x0A0B0C0D0E0F))  # dmac miss -> NoAction
    assert [p for p, _ in out] == [0]


def test_parser_error_is_not_a_drop() -> None:
    sw, _ = make()
    ctl(sw, "table_add dmac forward 0x0a0b0c0d0e0f => 4")
    frame = l2_frame(0x0A0B0C0D0E0F, ethertype=0x0800, payload=b"\x45\x00")  # truncated ipv4
    out = sw.process_sync(1, frame)
    assert [p for p, _ in out] == [4]
    assert sw.program.ingress_log[0]["parser_error"] == 1


def test_standard_metadata_in_ingress_and_egress() -> None:
    sw, clock = make()
    ctl(sw, "table_add dmac forward 0x0a0b0c0d0e0f => 4")
    clock.advance(250)
    frame = l2_frame(0x0A0B0C0D0E0F)
    sw.process_sync(7, frame)
    ing = sw.program.ingress_log[0]
    assert ing["ingress_port"] == 7
    assert ing["packet_length"] == len(frame)
    assert ing["instance_type"] == 0
    assert ing["ingress_global_timestamp"] == 250
    eg = sw.program.egress_log[0]
    assert eg["egress_port"] == 4
    assert eg["egress_spec"] != 511
    assert eg["egress_global_timestamp"] == 250
    assert eg["enq_timestamp"] == 250
    assert eg["enq_qdepth"] == 0 and eg["deq_qdepth"] == 0 and eg["deq_timedelta"] == 0


def test_multicast_replicas_in_pre_order_with_rid() -> None:
    sw, _ = make()
    ctl(sw, "mc_mgrp_create 1", "mc_node_create 10 3 1", "mc_node_create 20 2",
        "mc_node_associate 1 1", "mc_node_associate 1 0",
        "table_add dmac set_mcast 0xffffffffffff => 1")
    out = sw.process_sync(5, l2_frame(0xFFFFFFFFFFFF))
    assert [p for p, _ in out] == [2, 1, 3]
    log = sw.program.egress_log
    assert [(e["egress_port"], e["egress_rid"], e["instance_type"]) for e in log] == [
        (2, 20, 5), (1, 10, 5), (3, 10, 5)]
    assert all(itype_of(f) == 5 for _, f in out)


def test_multicast_unknown_group_drops() -> None:
    sw, _ = make()
    ctl(sw, "table_add dmac set_mcast 0xffffffffffff => 9")
    assert sw.process_sync(5, l2_frame(0xFFFFFFFFFFFF)) == []
    assert sw.stats()["drops"]["mcast_no_replica"] == 1


def test_i2e_clone_is_packet_as_it_entered_with_preserved_field() -> None:
    sw, _ = make()
    ctl(sw, "table_add ipv4_lpm ipv4_forward 10.0.0.0/8 => 00:00:00:00:00:aa 2",
        "mirroring_add 5 9")
    frame = ipv4_frame("10.1.2.3", src_mac=src(0x01), ttl=64)
    out = sw.process_sync(1, frame)
    by_port = dict(out)
    assert set(by_port) == {2, 9}
    clone = by_port[9]
    assert clone[:6] == frame[:6]  # dst MAC as received, not rewritten
    assert clone[22] == 64  # ttl as received
    assert itype_of(clone) == 1
    clone_eg = [e for e in sw.program.egress_log if e["instance_type"] == 1][0]
    assert clone_eg["tag"] == 0x11  # preserved by field list 0
    assert clone_eg["ingress_port"] == 0  # BMv2 resets unpreserved metadata
    assert itype_of(by_port[2]) == 0


def test_clone_without_session_is_ignored() -> None:
    sw, _ = make()
    ctl(sw, "table_add ipv4_lpm ipv4_forward 10.0.0.0/8 => 00:00:00:00:00:aa 2")
    out = sw.process_sync(1, ipv4_frame("10.1.2.3", src_mac=src(0x01)))
    assert [p for p, _ in out] == [2]


def test_clone_to_multicast_session() -> None:
    sw, _ = make()
    ctl(sw, "table_add ipv4_lpm ipv4_forward 10.0.0.0/8 => 00:00:00:00:00:aa 2",
        "mc_mgrp_create 3", "mc_node_create 7 4 5", "mc_node_associate 3 0",
        "mirroring_add_mc 5 3")
    out = sw.process_sync(1, ipv4_frame("10.1.2.3", src_mac=src(0x01)))
    assert sorted(p for p, _ in out) == [2, 4, 5]
    rids = sorted(e["egress_rid"] for e in sw.program.egress_log if e["instance_type"] == 1)
    assert rids == [7, 7]


def test_resubmit_reenters_with_original_bytes_and_field_list() -> None:
    sw, _ = make()
    ctl(sw, "table_add ipv4_lpm ipv4_forward 10.0.0.0/8 => 00:00:00:00:00:aa 2")
    frame = ipv4_frame("10.1.2.3", src_mac=src(0x02), ttl=64)
    out = sw.process_sync(1, frame)
    assert len(out) == 1
    ing = sw.program.ingress_log
    assert [e["instance_type"] for e in ing] == [0, 6]
    assert ing[1]["tag"] == 0x22
    assert ing[1]["packet_length"] == len(frame)
    assert out[0][1][22] == 63  # decremented once: the resubmitted copy started from the original
    assert sw.stats()["events"]["resubmit"] == 1


def test_recirculate_reparses_deparsed_bytes() -> None:
    sw, _ = make()
    ctl(sw, "table_add ipv4_lpm ipv4_forward 10.0.0.0/8 => 00:00:00:00:00:aa 2")
    out = sw.process_sync(1, ipv4_frame("10.1.2.3", src_mac=src(0x03), ttl=64))
    assert len(out) == 1
    assert out[0][1][22] == 62  # went through ingress twice
    ing = sw.program.ingress_log
    assert [e["instance_type"] for e in ing] == [0, 4]
    assert ing[1]["tag"] == 0x33
    # as in BMv2, unicast resets instance_type to NORMAL at the end of ingress
    assert itype_of(out[0][1]) == 0


def test_e2e_clone_carries_egress_state() -> None:
    sw, _ = make()
    ctl(sw, "table_add ipv4_lpm ipv4_forward 10.0.0.0/8 => 00:00:00:00:00:aa 2",
        "mirroring_add 6 8")
    out = dict(sw.process_sync(1, ipv4_frame("10.1.2.3", src_mac=src(0x04), ttl=64)))
    assert set(out) == {2, 8}
    assert out[8][:6] == bytes.fromhex("0000000000aa")  # rewritten headers of the original
    assert out[8][22] == 63
    assert itype_of(out[8]) == 2
    eg = [e for e in sw.program.egress_log if e["instance_type"] == 2][0]
    assert eg["tag"] == 0x44


def test_mark_to_drop_in_egress() -> None:
    sw, _ = make()
    ctl(sw, "table_add ipv4_lpm ipv4_forward 10.0.0.0/8 => 00:00:00:00:00:aa 2")
    assert sw.process_sync(1, ipv4_frame("10.1.2.3", src_mac=src(0x05))) == []
    assert sw.stats()["drops"] == {"egress_drop_port": 1}


def test_acl_drop_after_forwarding_decision() -> None:
    sw, _ = make()
    ctl(sw, "table_add dmac forward 0x0a0b0c0d0e0f => 4",
        "table_add acl drop 0x88b5&&&0xffff 1->3 0&&&0 10")
    assert sw.process_sync(2, l2_frame(0x0A0B0C0D0E0F)) == []
    assert len(sw.process_sync(4, l2_frame(0x0A0B0C0D0E0F))) == 1  # port outside range


def test_digest_delivered() -> None:
    got = []
    sw, _ = make(digest_handler=lambda *d: got.append(d))
    sw.process_sync(3, l2_frame(0x0A0B0C0D0E0F, src_mac=src(0x07)))
    assert got == [(1, "learn_t", {"srcAddr": src(0x07), "port": 3})]
    assert list(sw.digests) == got


def test_priority_out_of_range_drops_like_bmv2() -> None:
    sw, _ = make()
    assert sw.process_sync(1, l2_frame(0x0A0B0C0D0E0F, src_mac=src(0x06, 3))) == []
    assert sw.stats()["drops"] == {"priority_out_of_range": 1}
    sw2, _ = make(priority_queues=4)
    assert len(sw2.process_sync(1, l2_frame(0x0A0B0C0D0E0F, src_mac=src(0x06, 3)))) == 1


def test_exception_in_program_drops_only_that_packet() -> None:
    sw, _ = make()
    sw.program.raise_in_ingress = True
    assert sw.process_sync(1, l2_frame(1)) == []
    sw.program.raise_in_ingress = False
    assert len(sw.process_sync(1, l2_frame(1))) == 1
    st = sw.stats()
    assert st["drops"] == {"exception": 1}
    assert st["rx"] == {"1": 2}
    json.dumps(st, sort_keys=True)


def test_recirculation_loop_is_cut() -> None:
    sw, _ = make(max_loops=3)

    orig = sw.program.egress

    def always_recirculate(st):  # noqa: ANN001
        orig(st)
        st.recirculate_field_list = 0

    sw.program.egress = always_recirculate
    assert sw.process_sync(1, l2_frame(1)) == []
    st = sw.stats()
    assert st["drops"]["loop_limit"] == 1
    assert st["events"]["recirculate"] == 3


def test_counters_registers_meters_from_program() -> None:
    sw, _ = make()
    frame = l2_frame(1)
    sw.process_sync(2, frame)
    sw.process_sync(2, frame)
    assert ControlPlane(sw).execute("counter_read rx_count 2") == \
        f"rx_count[2]= ({2 * len(frame)} bytes, 2 packets)"
    assert ControlPlane(sw).execute("register_read last_len 2") == f"last_len[2]= {len(frame)}"
    ctl(sw, "meter_set_rates port_meter 2 0.000001:1 0.000001:1")
    sw.program.colors.clear()
    sw.process_sync(2, frame)
    sw.process_sync(2, frame)
    assert sw.program.colors == [0, 2]


def test_direct_counter_and_direct_meter() -> None:
    sw, _ = make()
    ctl(sw, "table_add ipv4_lpm ipv4_forward 10.0.0.0/8 => 00:00:00:00:00:aa 2")
    frame = ipv4_frame("10.1.2.3")
    sw.process_sync(1, frame)
    assert ControlPlane(sw).execute("counter_read lpm_hits 0").splitlines()[-1] == \
        f"lpm_hits[0]= ({len(frame)} bytes, 1 packets)"
    ctl(sw, f"meter_set_rates lpm_meter 0 0:{len(frame)} 0:{2 * len(frame)}")
    sw.program.colors.clear()
    for _ in range(3):
        sw.process_sync(1, frame)
    # per packet: port meter colour (unconfigured), then the direct meter's
    assert sw.program.colors[1::2] == [0, 1, 2]


def test_receive_and_dequeue_ready_real_time_path() -> None:
    sw, clock = make()
    ctl(sw, "table_add dmac forward 0x0a0b0c0d0e0f => 4", "set_queue_rate 1000 4")
    with sw.lock:
        for _ in range(3):
            sw.receive(1, l2_frame(0x0A0B0C0D0E0F))
        assert len(sw.dequeue_ready()) == 1
        assert sw.next_release_us() == clock.t + 1000
        clock.advance(1000)
        assert len(sw.dequeue_ready()) == 1
        clock.advance(5000)
        assert len(sw.dequeue_ready()) == 1
        assert sw.next_release_us() is None
    eg = sw.program.egress_log
    assert [e["enq_qdepth"] for e in eg] == [0, 1, 2]
    assert [e["deq_qdepth"] for e in eg] == [2, 1, 0]
    # time in the queue as modelled (until the scheduled departure at 2000),
    # not until the late dequeue at 7000
    assert [e["deq_timedelta"] for e in eg] == [0, 1000, 2000]


def test_tail_drop_counted() -> None:
    sw, _ = make()
    ctl(sw, "table_add dmac forward 0x0a0b0c0d0e0f => 4", "set_queue_depth 2 4")
    for _ in range(5):
        sw.receive(1, l2_frame(0x0A0B0C0D0E0F))
    assert len(sw.dequeue_ready()) == 2
    assert sw.stats()["drops"] == {"tm_full": 3}


def test_random_and_hash_services() -> None:
    sw, _ = make(seed=1)
    vals = {sw.random(3, 5) for _ in range(200)}
    assert vals == {3, 4, 5}
    assert sw.hash("crc16", 0, [(0x31, 8)], 0) == 0
    assert sw.hash("identity", 10, [(0x1234, 16)], 0x100) == 10 + 0x34


def test_log_msg_goes_to_logger(caplog: pytest.LogCaptureFixture) -> None:
    import logging
    sw, _ = make()
    with caplog.at_level(logging.INFO, logger="softswitch"):
        sw.log_msg("port={}", [3])
    assert "port=3" in caplog.text


def test_now_us_counts_from_switch_start() -> None:
    sw, clock = make()
    assert sw.now_us() == 0
    clock.advance(42)
    assert ControlPlane(sw).execute("get_time_elapsed") == "42"


def test_truncate_applies_to_transmitted_frame() -> None:
    sw, _ = make()
    ctl(sw, "table_add dmac forward 0x0a0b0c0d0e0f => 4")
    orig = sw.program.egress

    def truncating(st):  # noqa: ANN001
        orig(st)
        st.truncate_len = 20

    sw.program.egress = truncating
    out = sw.process_sync(1, l2_frame(0x0A0B0C0D0E0F))
    assert len(out[0][1]) == 20


def test_clone_and_resubmit_both_happen_clone_first() -> None:
    sw, _ = make()
    ctl(sw, "table_add ipv4_lpm ipv4_forward 10.0.0.0/8 => 00:00:00:00:00:aa 2",
        "mirroring_add 5 9")
    orig = sw.program.ingress

    def clone_and_resubmit(st):  # noqa: ANN001
        orig(st)
        if st.sm.instance_type == 0:
            st.clone_session = 5
            st.clone_field_list = 0
            st.resubmit_field_list = 0
            st.meta.tag = 0x55

    sw.program.ingress = clone_and_resubmit
    out = sw.process_sync(1, ipv4_frame("10.1.2.3"))
    assert sorted(p for p, _ in out) == [2, 9]
    assert [e["instance_type"] for e in sw.program.ingress_log] == [0, 6]
    assert sw.stats()["events"] == {"clone_i2e": 1, "resubmit": 1}


def test_recirculate_requested_in_ingress_acts_at_end_of_egress() -> None:
    sw, _ = make()
    ctl(sw, "table_add dmac forward 0x0a0b0c0d0e0f => 4")
    orig = sw.program.ingress

    def recirc_once(st):  # noqa: ANN001
        orig(st)
        if st.sm.instance_type == 0:
            st.recirculate_field_list = 0

    sw.program.ingress = recirc_once
    out = sw.process_sync(1, l2_frame(0x0A0B0C0D0E0F))
    assert [p for p, _ in out] == [4]
    assert [e["instance_type"] for e in sw.program.ingress_log] == [0, 4]
    assert [e["ingress_port"] for e in sw.program.ingress_log] == [1, 0]


# -- modelled time: frames scheduled at their arrival, not when they were read --

FRAME = l2_frame(0x0A0B0C0D0E0F)          # 60 bytes
PKT_US = 100                              # its time on a 4.8 Mb/s egress link


def _rated_switch() -> tuple[SoftSwitch, FakeClock]:
    sw, clock = make()
    ctl(sw, "table_add dmac forward 0x0a0b0c0d0e0f => 4",
        f"set_port_rate_bps {len(FRAME) * 8 * 1_000_000 // PKT_US} 4")
    return sw, clock


def test_frames_read_late_at_line_rate_model_no_queue() -> None:
    # Five frames arrived one packet time apart (line rate: no queue on the
    # wire) but the switch read them all at once, 1 ms later.
    sw, clock = _rated_switch()
    t0 = clock.t
    clock.advance(1000)
    with sw.lock:
        out = [len(sw.forward_at(1, FRAME, t0 + k * PKT_US)) for k in range(5)]
        out.append(len(sw.dequeue_ready()))
    eg = sw.program.egress_log
    assert [e["enq_qdepth"] for e in eg] == [0] * 5
    assert [e["deq_timedelta"] for e in eg] == [0] * 5
    # each frame leaves before the next arrives: the first on its own, then one per arrival
    assert out == [1, 1, 1, 1, 1, 0]
    # the read-late path of the past (every frame timed when read) queued them
    sw2, clock2 = _rated_switch()
    with sw2.lock:
        for _ in range(5):
            sw2.forward(1, FRAME)
        clock2.advance(1000)
        sw2.dequeue_ready()
    assert [e["enq_qdepth"] for e in sw2.program.egress_log] == [0, 0, 1, 2, 3]


def test_frames_arriving_faster_than_the_link_still_queue() -> None:
    sw, clock = _rated_switch()
    t0 = clock.t
    clock.advance(5000)
    with sw.lock:
        for k in range(4):
            sw.forward_at(1, FRAME, t0 + k * PKT_US // 4)   # four times the line rate
        sw.dequeue_ready()
    eg = sw.program.egress_log
    # (the first is on the wire at once: not in the queue the next ones find)
    assert [e["enq_qdepth"] for e in eg] == [0, 0, 1, 2]
    # each waited for the ones before it: departures one packet time apart
    assert [e["enq_timestamp"] + e["deq_timedelta"] for e in eg] == [
        t0 - sw._t0 + k * PKT_US for k in range(4)]


def test_modelled_time_never_runs_backwards() -> None:
    sw, clock = _rated_switch()
    t0 = clock.t
    with sw.lock:
        sw.forward_at(1, FRAME, t0 + 500)
        sw.forward_at(1, FRAME, t0 + 200)     # read after a later one: taken at t0 + 500
        clock.advance(1000)
        sw.dequeue_ready()
    assert sw.now_us() >= 500
    eg = sw.program.egress_log
    assert [e["enq_timestamp"] for e in eg] == [500, 500]
    assert [e["enq_qdepth"] for e in eg] == [0, 0]
    assert [e["deq_timedelta"] for e in eg] == [0, PKT_US]


def test_frames_the_clock_has_passed_are_counted_per_ingress_port() -> None:
    # A frame read after a later-stamped one (another CPU delivered it late)
    # enters the queues at the later time: counted once its shift exceeds its
    # own time on the ingress link, with the largest shift.
    sw, clock = _rated_switch()
    ctl(sw, f"set_port_rate_bps {len(FRAME) * 8 * 1_000_000 // PKT_US} 1")
    t0 = clock.t
    with sw.lock:
        sw.forward_at(1, FRAME, t0 + 1000)
        sw.forward_at(1, FRAME, t0 + 1000 - PKT_US // 2)    # within a frame time: not counted
        sw.forward_at(1, FRAME, t0 + 700)
        sw.forward_at(2, FRAME, t0 + 400)                   # no rate on port 2: any shift counts
        sw.forward_at(1, FRAME, t0 + 1200)
    stats = sw.stats()
    assert stats["rx_behind_clock"] == {"1": 1, "2": 1}
    assert stats["rx_behind_clock_max_us"] == {"1": 300, "2": 600}


def test_release_until_a_past_time_keeps_later_arrivals_unqueued() -> None:
    # The data path last looked at the sockets at t0 + 100 and was then
    # descheduled until t0 + 5000; a frame arrived at t0 + 300.
    sw, clock = _rated_switch()
    t0 = clock.t
    with sw.lock:
        assert sw.forward_at(1, FRAME, t0) != []     # on the wire at once
        sw.forward_at(1, FRAME, t0 + 10)             # waits for it until t0 + 100
        clock.advance(5000)
        assert len(sw.release_until(t0 + 100)) == 1
        sw.forward_at(1, FRAME, t0 + 300)
    eg = sw.program.egress_log
    # the link was idle again at t0 + 200: the late frame found no queue
    assert [e["enq_qdepth"] for e in eg] == [0, 0, 0]
    assert [e["deq_timedelta"] for e in eg] == [0, 90, 0]
