"""l3_ecn's RED ramp against a real queue on the soft switch.

STF runs drain the queue after every packet, so they only see depth 0. Here a
1 packet/s egress rate on a frozen clock lets a burst build the queue: the
n-th packet of a burst is enqueued behind the n-1 before it.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from scapy.layers.inet import IP, UDP
from scapy.layers.l2 import Ether

from switches.soft.compiler import compile_program
from switches.soft.control.verbs import ControlPlane
from switches.soft.runtime.switch import SoftSwitch

P4 = Path(__file__).resolve().parents[2] / "switches" / "p4" / "l3_ecn.p4"
BURST = 30


@pytest.fixture(scope="module")
def program():
    return compile_program(P4)


def burst_ecn(program, ecn_params: str, tos: int, rounds: int) -> list[list[int]]:
    """ECN bits of each packet of `rounds` bursts of BURST packets, by position."""
    now = [0]
    sw = SoftSwitch(program, now_us=lambda: now[0], seed=7)
    for line in ("table_add MyIngress.ipv4_lpm MyIngress.set_nhop 10.0.0.0/8 => "
                 "00:00:00:00:0a:01 1",
                 f"table_set_default MyEgress.ecn_config MyEgress.set_ecn_params {ecn_params}",
                 "set_queue_depth 100 1",
                 "set_queue_rate 1 1"):
        ControlPlane(sw).execute(line)
    frame = bytes(Ether(dst="02:00:00:00:00:00", src="00:00:00:00:00:01")
                  / IP(src="10.0.0.1", dst="10.1.2.3", tos=tos) / UDP(sport=1, dport=2)
                  / (b"x" * 16))
    by_position: list[list[int]] = [[] for _ in range(BURST)]
    for _ in range(rounds):
        for _ in range(BURST):
            sw.receive(0, frame)
        out: list[tuple[int, bytes]] = []
        for _ in range(10 * BURST):
            if len(out) == BURST:
                break
            now[0] += 1_000_000
            out += sw.dequeue_ready()
        assert len(out) == BURST and all(port == 1 for port, _ in out)
        for i, (_, data) in enumerate(out):
            ip = Ether(data)[IP]
            assert ip.ttl == 63
            by_position[i].append(ip.tos & 3)
    return by_position


def marked_fraction(samples: list[list[int]]) -> float:
    flat = [e for pos in samples for e in pos]
    return sum(e == 3 for e in flat) / len(flat)


def test_red_ramp_between_kmin_and_kmax(program) -> None:
    ecn = burst_ecn(program, "5 20 50", tos=0x02, rounds=20)  # Kmin 5, Kmax 20, Pmax 50%
    assert marked_fraction(ecn[:4]) == 0.0       # depth < Kmin: never
    assert marked_fraction(ecn[21:]) == 1.0      # depth > Kmax: always
    low, high = marked_fraction(ecn[6:12]), marked_fraction(ecn[13:19])
    # Expected about 0.12 and 0.35 (Pmax * (q - Kmin) / (Kmax - Kmin)).
    assert 0.0 < low < high < 0.5
    assert 0.03 < low < 0.25 and 0.2 < high < 0.5


def test_pmax_zero_marks_only_at_kmax(program) -> None:
    ecn = burst_ecn(program, "5 20 0", tos=0x01, rounds=3)
    assert marked_fraction(ecn[:19]) == 0.0
    assert marked_fraction(ecn[21:]) == 1.0


@pytest.mark.parametrize("tos", [0x00, 0xB8, 0x03], ids=["not-ect", "dscp46-not-ect", "ce"])
def test_deep_queue_leaves_non_ect_alone(program, tos: int) -> None:
    ecn = burst_ecn(program, "0 0 100", tos=tos, rounds=1)
    assert all(e == tos & 3 for pos in ecn for e in pos)
