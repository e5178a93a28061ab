"""reflex.p4 on the soft switch: DSCP picks the queue, DRR 10/90 shares the
port, and ECN marks each queue on its own depth (hard threshold K).

A frozen clock advanced by hand lets bursts build real queues (STF runs drain
the queue after every packet, so they only see depth 0).
"""

from __future__ import annotations

from pathlib import Path

import pytest
from scapy.layers.inet import IP, UDP
from scapy.layers.l2 import Ether

from switches.soft.compiler import compile_program
from switches.soft.control.verbs import ControlPlane
from switches.soft.runtime.switch import SoftSwitch

P4 = Path(__file__).resolve().parents[2] / "switches" / "p4" / "reflex.p4"
LOW_DSCP = 8
PAYLOAD = 1400


@pytest.fixture(scope="module")
def program():
    return compile_program(P4)


def make_switch(program, now: list[int], *lines: str) -> SoftSwitch:
    sw = SoftSwitch(program, priority_queues=2, now_us=lambda: now[0], seed=3)
    for line in ("table_add MyIngress.ipv4_lpm MyIngress.set_nhop 10.0.0.0/8 => "
                 "00:00:00:00:0a:01 1",
                 f"table_add MyIngress.dscp_priority MyIngress.set_priority {LOW_DSCP} => 0",
                 *lines):
        ControlPlane(sw).execute(line)
    return sw


def frame(dscp: int, ecn: int = 2, tag: int = 0) -> bytes:
    return bytes(Ether(dst="02:00:00:00:00:00", src="00:00:00:00:00:01")
                 / IP(src="10.0.0.1", dst="10.1.2.3", tos=(dscp << 2) | ecn)
                 / UDP(sport=1000 + tag, dport=2) / (b"x" * PAYLOAD))


def drain(sw: SoftSwitch, now: list[int], n: int, step_us: int) -> list[IP]:
    out: list[tuple[int, bytes]] = []
    for _ in range(100 * n):
        if len(out) >= n:
            break
        now[0] += step_us
        out += sw.dequeue_ready()
    assert len(out) == n
    return [Ether(d)[IP] for _, d in out]


def test_dscp_selects_queue_and_high_goes_first_under_strict_priority(program) -> None:
    now = [0]
    sw = make_switch(program, now, "set_port_rate_bps 10000000 1")
    for i in range(5):
        sw.receive(0, frame(LOW_DSCP, tag=i))
    for i in range(5):
        sw.receive(0, frame(46, tag=10 + i))  # any other DSCP: high priority
    assert sw.tm.depth(1, 0) == 5 and sw.tm.depth(1, 1) == 5
    got = drain(sw, now, 10, 100)
    order = [ip[UDP].sport - 1000 for ip in got]
    # Nothing left before the high packets arrived: the high queue empties
    # first, although its packets came later.
    assert order == [10, 11, 12, 13, 14, 0, 1, 2, 3, 4]
    assert all(ip.tos >> 2 in (LOW_DSCP, 46) for ip in got)


def test_drr_gives_the_high_queue_nine_tenths(program) -> None:
    now = [0]
    sw = make_switch(program, now, "set_queue_depth 466 1", "set_port_rate_bps 10000000 1",
                     "set_priority_weights 1 10 90", "table_set_default MyEgress.ecn_config "
                     "MyEgress.set_ecn_threshold 1000")
    for _ in range(400):
        sw.receive(0, frame(LOW_DSCP, tag=0))
        sw.receive(0, frame(0, tag=1))
    got = drain(sw, now, 400, 100)
    high = sum(ip[UDP].sport == 1001 for ip in got)
    assert 0.87 <= high / len(got) <= 0.93


def test_drr_is_work_conserving_for_a_lone_low_queue(program) -> None:
    now = [0]
    sw = make_switch(program, now, "set_queue_depth 466 1", "set_port_rate_bps 10000000 1",
                     "set_priority_weights 1 10 90")
    for _ in range(50):
        sw.receive(0, frame(LOW_DSCP))
    t0 = now[0]
    drain(sw, now, 50, 100)
    wire_s = 50 * len(frame(LOW_DSCP)) * 8 / 10e6
    assert (now[0] - t0) / 1e6 <= wire_s * 1.05   # the full line rate, not 10%


def test_ecn_hard_threshold_per_queue(program) -> None:
    now = [0]
    sw = make_switch(program, now, "set_queue_depth 466 1", "set_queue_rate 1 1")
    for _ in range(100):
        sw.receive(0, frame(LOW_DSCP))          # the low queue grows to 99 behind the first
    for _ in range(10):
        sw.receive(0, frame(0))                 # the high queue stays short
    got = drain(sw, now, 110, 1_000_000)
    high = [ip for ip in got if ip.tos >> 2 == 0]
    low = [ip for ip in got if ip.tos >> 2 == LOW_DSCP]
    assert len(high) == 10 and all(ip.tos & 3 == 2 for ip in high)
    # Low packet i joined a queue of i packets: marked from depth 65 on.
    assert [ip.tos & 3 for ip in low] == [2] * 65 + [3] * 35


def test_ecn_threshold_is_configurable_and_spares_not_ect(program) -> None:
    now = [0]
    sw = make_switch(program, now, "set_queue_rate 1 1", "set_queue_depth 466 1",
                     "table_set_default MyEgress.ecn_config MyEgress.set_ecn_threshold 3")
    for i in range(6):
        sw.receive(0, frame(0, ecn=2 if i % 2 else 0))
    got = drain(sw, now, 6, 1_000_000)
    assert [ip.tos & 3 for ip in got] == [0, 2, 0, 3, 0, 3]
