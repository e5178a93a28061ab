"""symphony.p4's strict priority for lagging steps (include/symphony_pq.p4) on
the soft switch: a registered job's data of steps at or behind step_min goes
to the high queue and leaves first, steps ahead wait in the low one; step
ends, older steps and duplicates move step_min as Symphony's tracking does.

A frozen clock and a rate-limited port let the queues build (STF runs drain
after every packet, so queue choice would not show there).
"""

from __future__ import annotations

import struct
from pathlib import Path

import pytest
from scapy.layers.inet import IP, UDP
from scapy.layers.l2 import Ether
from scapy.packet import Raw

from switches.soft.compiler import compile_program
from switches.soft.control.verbs import ControlPlane
from switches.soft.runtime.switch import SoftSwitch

P4 = Path(__file__).resolve().parents[2] / "switches" / "p4" / "symphony.p4"
JOB = 7
WRITE_MIDDLE, WRITE_LAST_IMM, ACK = 0x07, 0x09, 0x11
PORT = 1


@pytest.fixture(scope="module")
def program():
    return compile_program(P4)


class Rig:
    def __init__(self, program, register: bool = True) -> None:
        self.now = 0
        self.sw = SoftSwitch(program, now_us=lambda: self.now, priority_queues=2, seed=1)
        self.control = ControlPlane(self.sw)
        lines = ["table_add MyIngress.ipv4_lpm MyIngress.set_nhop 10.0.0.0/8 => "
                 f"00:00:00:00:0a:01 {PORT}",
                 f"set_port_rate_bps 1000000 {PORT}"]
        if register:
            lines.append(f"table_add MyIngress.lag_priority.jobs MyIngress.lag_priority.track "
                         f"{JOB} =>")
        for line in lines:
            self.control.execute(line)
        self.tag = 0

    def send(self, step: int, psn: int, opcode: int = WRITE_MIDDLE, job: int = JOB) -> int:
        """Enqueue one packet (nothing leaves: the clock is frozen); its tag."""
        self.tag += 1
        bth = struct.pack("!BBHB", opcode, 0, 0xFFFF, job) + (0x11).to_bytes(3, "big") \
            + b"\0" + psn.to_bytes(3, "big")
        frame = bytes(Ether(dst="02:00:00:00:00:00", src="00:00:00:00:00:01")
                      / IP(src="10.0.0.1", dst="10.1.2.3", tos=0x02, id=self.tag)
                      / UDP(sport=0xC000 | step, dport=4791, chksum=0)
                      / Raw(bth + b"x" * 16 + b"\0" * 4))
        self.sw.receive(0, frame)
        return self.tag

    def depths(self) -> tuple[int, int]:
        return self.sw.tm.depth(PORT, 0), self.sw.tm.depth(PORT, 1)

    def drain(self) -> list[int]:
        """The tags in the order the port sends them."""
        out: list[tuple[int, bytes]] = []
        for _ in range(10_000):
            if not self.sw.tm.total:
                break
            self.now += 100
            out += self.sw.dequeue_ready()
        return [Ether(d)[IP].id for _p, d in out]

    def step_min(self) -> int:
        return int(self.control.execute(f"register_read MyIngress.lag_priority.step_min {JOB}")
                   .split("=")[-1])


def test_lagging_step_goes_first_and_steps_ahead_wait(program) -> None:
    r = Rig(program)
    first = r.send(3, 0)                     # first packet: step_min 3 (high)
    ahead = [r.send(4, p) for p in range(3)]  # step 4: ahead of step_min (low)
    lag = [r.send(3, p) for p in range(1, 4)]  # step 3: the slowest step (high)
    assert r.depths() == (3, 4)
    # the high queue empties first, although step 4's packets came earlier
    assert r.drain() == [first, *lag, *ahead]
    assert r.step_min() == 3


def test_step_end_advances_and_an_older_step_pulls_back(program) -> None:
    r = Rig(program)
    r.send(3, 0)
    r.send(3, 5, WRITE_LAST_IMM)             # step 3 ends: step_min 4, the end goes high
    assert r.depths() == (0, 2) and r.step_min() == 4
    r.send(4, 0)                             # now the slowest step: high
    r.send(5, 0)                             # ahead: low
    assert r.depths() == (1, 3)
    r.send(3, 5, WRITE_LAST_IMM)             # a retransmitted end of step 3: high, no change
    assert r.step_min() == 4 and r.depths() == (1, 4)
    r.send(2, 7)                             # an older step: step_min 2, high
    assert r.step_min() == 2 and r.depths() == (1, 5)
    r.send(4, 1)                             # step 4 is now ahead of step_min: low
    assert r.depths() == (2, 5)


def test_wrap_around_and_acks_of_the_job(program) -> None:
    r = Rig(program)
    r.send(0x3FFF, 0)                        # step 16383
    r.send(0, 0)                             # step 0 follows 16383: ahead, low
    assert r.depths() == (1, 1)
    r.send(0x3FFF, 1, WRITE_LAST_IMM)        # 16383 ends: step_min 0
    assert r.step_min() == 0
    r.send(0, 1)                             # the slowest step now: high
    r.send(9, 0, ACK)                        # the job's ACKs never wait behind its data
    assert r.depths() == (1, 4)


def test_untracked_traffic_stays_in_queue_0(program) -> None:
    r = Rig(program, register=False)
    r.send(3, 0)
    r.send(4, 0)
    r.send(3, 1, job=0)
    assert r.depths() == (3, 0)
    r = Rig(program)
    r.send(3, 0, job=9)                      # another job, not registered
    r.send(3, 0, job=0)                      # untagged
    assert r.depths() == (2, 0)
