"""Priority flow control in the soft switch: the PFC frame (checked against
scapy's MAC control layer, built independently), the traffic manager's
per-ingress XOFF/XON and its obeying of pauses, and the switch around it."""

from __future__ import annotations

from pathlib import Path

import pytest
import test_runtime_support as prog
from test_runtime_support import FakeClock, l2_frame

from ground.wire.pause import MAX_QUANTA, PauseFormatError, parse_pause, pause_us, pfc_frame
from switches.soft.control.verbs import CommandError, ControlPlane
from switches.soft.runtime.pfc import PfcIngress
from switches.soft.runtime.switch import SoftSwitch
from switches.soft.runtime.tm import TrafficManager

SRC = bytes.fromhex("020000000001")


# -- the frame ----------------------------------------------------------------

def test_pfc_frame_matches_scapy_mac_control() -> None:
    mac_control = pytest.importorskip("scapy.contrib.mac_control")
    from scapy.layers.l2 import Ether

    ours = pfc_frame(SRC, {3: 0x1234, 0: 0})
    theirs = Ether(ours)
    pfc = theirs[mac_control.MACControlClassBasedFlowControl]
    assert theirs.dst == "01:80:c2:00:00:01" and theirs.type == 0x8808
    assert [c for c in range(8) if getattr(pfc, f"c{c}_enabled")] == [0, 3]
    assert pfc.c3_pause_time == 0x1234 and pfc.c0_pause_time == 0
    assert len(ours) == 60
    # and a frame scapy builds parses here
    built = bytes(Ether(src="02:00:00:00:00:02") / mac_control.MACControlClassBasedFlowControl(
        c5_enabled=1, c5_pause_time=77))
    assert parse_pause(built) == {5: 77}


def test_legacy_pause_applies_to_every_class_and_junk_is_refused() -> None:
    pause = (bytes.fromhex("0180c2000001") + SRC + b"\x88\x08\x00\x01\x00\x40").ljust(60, b"\0")
    assert parse_pause(pause) == dict.fromkeys(range(8), 0x40)
    with pytest.raises(PauseFormatError, match="opcode 0x0002"):
        parse_pause(pause[:14] + b"\x00\x02" + pause[16:])
    with pytest.raises(PauseFormatError, match="not a MAC control frame"):
        parse_pause(l2_frame(0x0A0B0C0D0E0F))
    with pytest.raises(ValueError, match="class 8"):
        pfc_frame(SRC, {8: 1})


def test_pause_time_is_512_bit_times_per_quantum() -> None:
    assert pause_us(MAX_QUANTA, 10e9) == pytest.approx(3355.392)   # 10 Gb/s: 3.36 ms
    assert pause_us(1, 4e6) == 128.0


# -- the traffic manager ------------------------------------------------------

def test_xoff_at_threshold_and_xon_when_drained() -> None:
    clock = FakeClock(0)
    tm = TrafficManager(now_us=clock)
    tm.set_pfc(3, 1)
    for i in range(2):
        assert tm.enqueue(9, 0, i, 100, ingress=1)
    assert tm.pfc_out == []
    tm.enqueue(9, 0, 2, 100, ingress=1)
    assert tm.pfc_out == [(1, 0, MAX_QUANTA)]          # the third packet: pause port 1
    tm.pfc_out.clear()
    tm.enqueue(9, 0, 3, 100, ingress=2)                 # another ingress: counted apart
    assert tm.pfc_out == []
    got = [tm.pop_ready()[2] for _ in range(2)]
    assert got == [0, 1] and tm.pfc_out == [(1, 0, 0)]  # 1 of port 1's left: XON
    assert tm.pfc.xoff_sent == {1: 1} and tm.pfc.xon_sent == {1: 1}


def test_a_pause_still_needed_is_asked_again_after_half_its_timer() -> None:
    clock = FakeClock(0)
    tm = TrafficManager(now_us=clock)
    tm.set_port_rate_bps(10_000_000)                    # 0xFFFF quanta: 3.36 s
    tm.set_pfc(2, 0)
    tm.enqueue(9, 0, "a", 100, ingress=1)
    tm.enqueue(9, 0, "b", 100, ingress=1)
    assert tm.pfc_out == [(1, 0, MAX_QUANTA)]
    tm.pfc_out.clear()
    tm.set_depth(100)
    tm.enqueue(9, 0, "c", 100, ingress=1)               # in flight when paused: no repeat
    assert tm.pfc_out == []
    clock.advance(1_700_000)                            # past half the timer
    tm.enqueue(9, 0, "d", 100, ingress=1)               # the hop before sends again
    assert tm.pfc_out == [(1, 0, MAX_QUANTA)]


def test_a_paused_port_holds_its_queue_until_the_timer_or_xon() -> None:
    clock = FakeClock(0)
    tm = TrafficManager(now_us=clock)
    tm.set_port_rate_bps(8_000_000)                     # 100-byte frames: 100 us each
    tm.set_pfc(100, 50)
    tm.pause(4, {0: 10})                                # 10 quanta = 640 us at 8 Mb/s
    tm.enqueue(4, 0, "x", 100)
    tm.enqueue(5, 0, "y", 100)                          # another port is not held
    assert tm.pop_ready()[2] == "y"
    assert tm.pop_ready() is None
    assert tm.next_release_us() == 640
    clock.advance(640)
    assert tm.pop_ready()[2] == "x"
    # pause with the largest timer, then XON
    tm.pause(4, {0: MAX_QUANTA})
    tm.enqueue(4, 0, "z", 100)
    clock.advance(1000)
    assert tm.pop_ready() is None
    tm.pause(4, {0: 0})
    assert tm.pop_ready()[2] == "z"
    assert tm.stats()["4"]["pauses_rx"] == 3


def test_pause_of_one_priority_lets_the_other_pass() -> None:
    clock = FakeClock(0)
    tm = TrafficManager(2, now_us=clock)
    tm.set_pfc(10, 5)
    tm.pause(1, {1: MAX_QUANTA})                        # no port rate: until XON
    tm.enqueue(1, 1, "high", 100)
    tm.enqueue(1, 0, "low", 100)
    assert tm.pop_ready()[2] == "low"
    assert tm.pop_ready() is None and tm.next_release_us() is None
    tm.pause(1, {1: 0})
    assert tm.pop_ready()[2] == "high"


def test_clearing_the_queues_ends_the_pauses_and_thresholds_are_checked() -> None:
    tm = TrafficManager(now_us=FakeClock(0))
    tm.set_pfc(1, 0)
    tm.enqueue(3, 0, "a", 100, ingress=7)
    tm.pfc_out.clear()
    with pytest.raises(ValueError, match="empty queues"):
        tm.set_pfc(4, 2)
    tm.clear()
    assert tm.pfc_out == [(7, 0, 0)]
    with pytest.raises(ValueError, match="xon < xoff"):
        PfcIngress(4, 4)


# -- the switch ---------------------------------------------------------------

def _switch() -> tuple[SoftSwitch, ControlPlane, FakeClock]:
    clock = FakeClock(0)
    sw = SoftSwitch(prog, now_us=clock)
    cp = ControlPlane(sw)
    cp.execute("table_add dmac forward 0x0a0b0c0d0e0f => 3")
    return sw, cp, clock


def test_switch_pauses_the_ingress_port_that_fills_a_queue() -> None:
    sw, cp, clock = _switch()
    frame = l2_frame(0x0A0B0C0D0E0F)
    cp.execute(f"set_port_rate_bps {len(frame) * 8 * 1000}")    # 1 ms per frame
    cp.execute("set_pfc 4 2")
    sent: list[tuple[int, bytes]] = []
    for _ in range(5):                  # five back to back from port 1
        sent += sw.forward(1, frame)
    pauses = [(p, parse_pause(f)) for p, f in sent if p == 1]
    assert pauses == [(1, {0: MAX_QUANTA})]
    # the queue drains one frame per ms; at 2 held the XON goes out
    out: list[tuple[int, bytes]] = []
    for _ in range(4):
        clock.advance(1000)
        out += sw.dequeue_ready()
    assert [parse_pause(f) for p, f in out if p == 1] == [{0: 0}]
    st = sw.stats()
    assert st["pfc"]["xoff_sent"] == {"1": 1} and st["pfc"]["xon_sent"] == {"1": 1}
    assert st["events"]["pfc_xoff"] == 1 and st["events"]["pfc_xon"] == 1


def test_switch_obeys_a_pause_and_keeps_it_out_of_the_pipeline() -> None:
    sw, cp, clock = _switch()
    cp.execute("set_pfc 64 32")
    sw.forward(3, pfc_frame(SRC, {0: MAX_QUANTA}))      # the next hop on port 3 pauses
    assert sw.program.ingress_log == []                 # the MAC consumed it
    assert sw.forward(1, l2_frame(0x0A0B0C0D0E0F)) == []
    out = sw.forward(3, pfc_frame(SRC, {0: 0}))         # XON
    assert [p for p, _ in out] == [3]
    assert sw.stats()["pfc"]["rx"] == {"3": 2}
    # malformed MAC control: counted, dropped, nothing raised
    sw.forward(3, pfc_frame(SRC, {})[:14] + b"\x00\x09" + bytes(44))
    assert sw.stats()["drops"]["pfc_malformed"] == 1


def test_without_pfc_mac_control_frames_go_through_the_pipeline() -> None:
    sw, cp, _ = _switch()
    sw.forward(3, pfc_frame(SRC, {0: MAX_QUANTA}))
    assert len(sw.program.ingress_log) == 1 and "pfc" not in sw.stats()


def test_set_pfc_verb_errors_name_the_problem() -> None:
    _, cp, _ = _switch()
    with pytest.raises(CommandError, match="usage"):
        cp.execute("set_pfc 4")
    with pytest.raises(CommandError, match="xon < xoff"):
        cp.execute("set_pfc 4 9")
    cp.execute("set_pfc 4 2")
    cp.execute("set_pfc off")


# -- what a phase lost --------------------------------------------------------

def test_phase_losses_sum_every_switch_and_the_hosts_pauses() -> None:
    from testbed.timeline import PhaseData, phase_losses

    def side(tm_full: int, xoff: dict[str, int]) -> dict:
        return {"switch": {"drops": {"tm_full": tm_full}, "pfc": {"xoff_sent": xoff}}}

    fabric = {"switches": {
        "leaf1": {"before": side(2, {"1": 1}), "after": side(7, {"1": 4, "2": 3})},
        "spine1": {"before": {}, "after": side(1, {})}}}
    events = {
        "h1": [{"event": "pacer_report", "t_ns": 1, "flow": "rank0-ch0",
                "qp": {"tx_pkts": 90, "retransmits": 9, "rto": 1}},
               {"event": "qp_report", "t_ns": 1, "flow": "rank0-left0",
                "qp": {"tx_pkts": 0, "retransmits": 0, "rto": 0}},
               {"event": "agent_end", "t_ns": 2,
                "pfc": {"frames": 6, "xoffs": 3, "malformed": 0, "paused_s": 0.25}}],
        "h2": [{"event": "flow_end", "t_ns": 1, "flow": "f", "role": "sender",
                "qp": {"tx_pkts": 10, "retransmits": 0, "rto": 0}},
               {"event": "pacer_report", "t_ns": 1, "flow": "pool.q0",
                "qp": {"tx_pkts": 5, "retransmits": 0, "rto": 0}},
               {"event": "flow_end", "t_ns": 2, "flow": "pool", "role": "sender",
                "qp": {"tx_pkts": 5, "retransmits": 0, "rto": 0}},   # reported above
               {"event": "agent_end", "t_ns": 2,
                "pfc": {"frames": 0, "xoffs": 0, "malformed": 0, "paused_s": 0.0}}]}
    lost = phase_losses(PhaseData("p", Path("."), events=events, stats=fabric))
    assert lost == {"tm_full": 6, "pfc_xoff": 6, "pfc_xon": 0, "tx_pkts": 105,
                    "retransmits": 9, "rto": 1, "pfc_hosts": {"h1": {"xoffs": 3, "paused_s": 0.25}}}
    # one switch, no PFC
    star = {"before": {"switch": {"drops": {}}}, "after": {"switch": {"drops": {"tm_full": 3}}}}
    lost = phase_losses(PhaseData("p", Path("."), stats=star))
    assert (lost["tm_full"], lost["pfc_xoff"], lost["pfc_hosts"]) == (3, 0, {})
