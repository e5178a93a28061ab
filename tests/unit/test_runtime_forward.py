"""SoftSwitch.forward (receive + dequeue_ready in one call, passing an idle
traffic manager through) gives the same frames, counters and queue
statistics as the two calls."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from switches.soft.compiler import compile_program
from switches.soft.control.verbs import ControlPlane
from switches.soft.runtime.externs import csum16
from switches.soft.runtime.switch import SoftSwitch

P4 = Path(__file__).resolve().parents[2] / "switches" / "p4"
ROUTES = ["table_add MyIngress.ipv4_lpm MyIngress.set_nhop 10.0.1.0/24 => 00:00:00:00:01:01 1",
          "table_add MyIngress.ipv4_lpm MyIngress.set_nhop 10.0.2.0/24 => 00:00:00:00:02:01 2",
          "table_add MyIngress.port_smac MyIngress.set_smac 2 => 02:00:00:00:00:02"]


def frame(rng: random.Random) -> bytes:
    ip = bytearray(bytes.fromhex("45000020000100004011000000000000") + bytes(4))
    ip[8] = rng.choice([64, 1, 2])  # TTL 1 is dropped
    ip[12:16] = bytes([10, 0, 3, 1])
    ip[16:20] = bytes([10, 0, rng.choice([1, 2, 9]), 7])  # 10.0.9.x has no route
    ip[10:12] = csum16(bytes(ip)).to_bytes(2, "big")
    if rng.random() < 0.1:
        ip[10] ^= 0xFF  # bad checksum: dropped
    return bytes(6) + bytes(6) + b"\x08\x00" + bytes(ip) + bytes(12)


def _pair(program: str, *commands: str) -> tuple[SoftSwitch, SoftSwitch]:
    mod = compile_program(P4 / program)
    sws = []
    for _ in range(2):
        sw = SoftSwitch(mod, now_us=lambda: 1000, seed=1)
        for c in (*ROUTES, *commands):
            ControlPlane(sw).execute(c)
        sws.append(sw)
    return sws[0], sws[1]


@pytest.mark.parametrize("program,commands,short", [
    ("l3_router.p4", (), True),
    ("l3_ecn.p4", (), True),
    ("l3_router.p4", ("set_queue_rate 1000000 2",), False),  # paced: queued as usual
    ("l3_router.p4", ("set_queue_depth 0 1",), True),  # port 1 holds nothing: drops
])
def test_forward_equals_receive_then_dequeue(program: str, commands: tuple[str, ...],
                                             short: bool) -> None:
    two_calls, one_call = _pair(program, *commands)
    passed = []
    real = one_call.tm.pass_through

    def counting(port: int, prio: int):  # noqa: ANN202
        meta = real(port, prio)
        passed.append(meta is not None)
        return meta

    one_call.tm.pass_through = counting  # type: ignore[method-assign]
    rng = random.Random(3)
    for i in range(300):
        f, port = frame(rng), rng.choice([1, 2, 3])
        if i % 50 == 7:  # sometimes a packet waits in a queue first
            two_calls.receive(port, f)
            one_call.receive(port, f)
            continue
        two_calls.receive(port, f)
        assert one_call.forward(port, f) == two_calls.dequeue_ready()
    assert one_call.stats() == two_calls.stats()
    assert one_call.stats()["tx"], "nothing was forwarded"
    # the short path is taken unless something is paced
    assert (sum(passed) > 50) == short and (short or not any(passed))
