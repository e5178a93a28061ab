"""The l3_ecn.p4 features roce-basics relies on, on the soft target: the lossy
link (MyEgress.link_loss) and the queue watermark register (MyEgress.qdepth_max)."""

from __future__ import annotations

from pathlib import Path

import pytest
from scapy.layers.inet import IP, UDP
from scapy.layers.l2 import Ether

from switches.soft.compiler import compile_program
from switches.soft.control.verbs import ControlPlane
from switches.soft.runtime.switch import SoftSwitch

P4 = Path(__file__).resolve().parents[2] / "switches" / "p4" / "l3_ecn.p4"


def _switch(seed: int = 1) -> SoftSwitch:
    module = compile_program(str(P4), include_dirs=[str(P4.parent)])
    sw = SoftSwitch(module, seed=seed)
    for line in ("table_add MyIngress.ipv4_lpm MyIngress.set_nhop 10.0.2.1/32 => "
                 "00:00:00:00:00:02 2",
                 "table_add MyIngress.port_smac MyIngress.set_smac 2 => 02:00:00:00:00:02"):
        ControlPlane(sw).execute(line)
    return sw


def _frame(tos: int = 0x02) -> bytes:
    return bytes(Ether(dst="02:00:00:00:00:01", src="00:00:00:00:00:01")
                 / IP(src="10.0.1.1", dst="10.0.2.1", tos=tos, ttl=64)
                 / UDP(sport=0xC000, dport=4791) / (b"\x00" * 64))


def test_no_loss_by_default() -> None:
    sw = _switch()
    out = [o for _ in range(300) for o in sw.process_sync(1, _frame())]
    assert len(out) == 300 and all(p == 2 for p, _ in out)


def test_link_loss_drops_the_configured_fraction() -> None:
    sw = _switch(seed=7)
    ControlPlane(sw).execute("table_set_default MyEgress.link_loss MyEgress.set_loss 10000")
    assert [o for _ in range(50) for o in sw.process_sync(1, _frame())] == []
    assert sw.stats()["drops"].get("egress_drop_port") == 50
    ControlPlane(sw).execute("table_set_default MyEgress.link_loss MyEgress.set_loss 1000")  # 10%
    n = 2000
    got = sum(len(sw.process_sync(1, _frame())) for _ in range(n))
    assert got == pytest.approx(0.9 * n, abs=4 * (0.09 * n) ** 0.5)  # within 4 sigma
    ControlPlane(sw).execute("table_set_default MyEgress.link_loss MyEgress.set_loss 0")
    assert sum(len(sw.process_sync(1, _frame())) for _ in range(100)) == 100


def test_queue_watermark_keeps_the_largest_enqueue_depth() -> None:
    sw = _switch()
    # Ingress only: the traffic manager builds a queue of 5 packets on port 2.
    for _ in range(5):
        sw.receive(1, _frame())
    out = sw.dequeue_ready()
    assert len(out) == 5
    assert "qdepth_max[2]= 4" in ControlPlane(sw).execute("register_read MyEgress.qdepth_max 2")
    ControlPlane(sw).execute("register_reset MyEgress.qdepth_max")
    sw.process_sync(1, _frame())
    assert "qdepth_max[2]= 0" in ControlPlane(sw).execute("register_read MyEgress.qdepth_max 2")
