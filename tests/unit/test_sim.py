"""The virtual-time engine's parts: the event loop, links, the switch on the simulated clock."""

from __future__ import annotations

import pytest

from switches.soft.compiler import compile_program
from testbed.experiment import repo_path
from testbed.net import host_addr, router_commands
from testbed.sim.host import SimNic
from testbed.sim.link import TxLine
from testbed.sim.loop import EventLoop, SimError
from testbed.sim.switch import SimSwitch


def test_events_run_in_time_then_schedule_order() -> None:
    loop = EventLoop()
    seen: list[tuple[int, str]] = []
    for t, tag in ((30, "c"), (10, "a"), (30, "d"), (20, "b")):
        loop.at(t, lambda tag: seen.append((loop.now, tag)), tag)
    assert loop.run() is False
    assert seen == [(10, "a"), (20, "b"), (30, "c"), (30, "d")]
    assert loop.events == 4


def test_an_event_in_the_past_is_refused() -> None:
    loop = EventLoop()
    loop.at(100, lambda _: loop.at(99, lambda _: None))
    with pytest.raises(SimError, match="in the past"):
        loop.run()


def test_run_stops_at_until_and_on_stop() -> None:
    loop = EventLoop()
    loop.at(50, lambda _: None)
    loop.at(500, lambda _: loop.stop())
    loop.at(600, lambda _: None)
    assert loop.run(until_ns=200) is False and loop.now == 200
    assert loop.run() is True and loop.now == 500
    assert loop.pending() == 1


def test_discard_drops_selected_callbacks() -> None:
    loop = EventLoop()
    kept: list[int] = []

    def stale(_: object) -> None:
        raise AssertionError("discarded event ran")

    loop.at(10, stale)
    loop.at(20, kept.append, 20)
    assert loop.discard(lambda fn: fn is stale) == 1
    loop.run()
    assert kept == [20] and loop.now == 20


def test_a_line_serialises_in_order_then_propagates() -> None:
    loop = EventLoop()
    got: list[tuple[int, int]] = []
    line = TxLine(loop, 10e9, lambda f: got.append((loop.now, len(f))), delay_ns=500)
    loop.at(0, lambda _: [line.send(bytes(1250)), line.send(bytes(125))] and None)
    loop.run()
    # 1250 B at 10 Gb/s: 1000 ns; the second frame waits for the first
    assert got == [(1500, 1250), (1600, 125)]
    assert line.frames == 2 and line.bytes == 1375 and line.queued_max_ns == 1000


def test_a_veth_like_line_hands_a_frame_over_at_its_first_bit() -> None:
    loop = EventLoop()
    got: list[int] = []
    line = TxLine(loop, 10e9, lambda f: got.append(loop.now), first_bit=True)
    loop.at(0, lambda _: [line.send(bytes(1250)), line.send(bytes(1250))] and None)
    loop.run()
    assert got == [0, 1000]          # spaced by the line, each there at once


def test_a_line_rounds_arrival_up_to_the_whole_nanosecond() -> None:
    loop = EventLoop()
    got: list[int] = []
    line = TxLine(loop, 100e9, lambda f: got.append(loop.now))
    loop.at(0, lambda _: line.send(bytes(64)))      # 5.12 ns
    loop.run()
    assert got == [6]


def _star(loop: EventLoop, rate_bps: float, n: int = 2) -> tuple[SimSwitch, dict[str, SimNic]]:
    module = compile_program(repo_path("switches/p4/l3_router.p4"))
    sw = SimSwitch("s1", loop, module, default_bps=rate_bps)
    nics = {}
    for i in range(1, n + 1):
        a = host_addr(i)
        nic = SimNic(loop, a.ip, a.mac, a.gateway_mac)
        nic.line = TxLine(loop, rate_bps, sw.receiver(a.port))
        sw.connect(a.port, TxLine(loop, rate_bps, nic.deliver))
        nics[a.name] = nic
    for line in router_commands([host_addr(i) for i in range(1, n + 1)]):
        sw.execute(line)
    return sw, nics


def test_a_datagram_crosses_the_p4_switch_at_the_port_rate() -> None:
    loop = EventLoop()
    sw, nics = _star(loop, 10e9)
    sw.execute("set_port_rate_bps 1000000000 2")       # port 2 at 1 Gb/s
    got: list[tuple[int, bytes]] = []
    nics["h2"].on_receive = lambda: got.extend((loop.now, p) for p in nics["h2"].recv(8))
    payload = bytes(range(100)) * 10                    # 1000 B of RoCE payload
    loop.at(0, lambda _: nics["h1"].send(50000, "10.0.2.1", 4791, [payload], 2))
    loop.run()
    assert len(got) == 1
    t, pkt = got[0]
    frame = 14 + 20 + 8 + len(payload)
    # host link at 10 Gb/s, then the switch's port 2 at 1 Gb/s
    assert t == -(-frame * 8 // 10) + frame * 8
    assert pkt[28:] == payload and pkt[8] == 63        # routed: TTL decremented
    assert pkt[1] & 3 == 2                               # ECT(0) kept
    assert sw.sw.stats()["tx"] == {"2": 1}


def test_a_full_queue_drops_at_the_port_rate_and_the_rest_drain() -> None:
    loop = EventLoop()
    sw, nics = _star(loop, 10e9)
    sw.execute("set_port_rate_bps 100000000 2")        # 100 Mb/s: the bottleneck
    sw.execute("set_queue_depth 8")
    got: list[int] = []
    nics["h2"].on_receive = lambda: got.extend(loop.now for _ in nics["h2"].recv(64))

    def burst(_: object) -> None:
        for _i in range(20):
            nics["h1"].send(50000, "10.0.2.1", 4791, [bytes(958)], 2)
    loop.at(0, burst)
    loop.run()
    drops = sw.sw.stats()["queues"]["2"]["queues"][0]["drops"]
    assert len(got) + drops == 20 and drops > 0
    gaps = {b - a for a, b in zip(got, got[1:], strict=False)}
    assert gaps == {80_000}                              # 1000 B at 100 Mb/s each
    assert sw.sw.tm.total == 0


def test_a_port_without_a_set_rate_queues_in_the_traffic_manager() -> None:
    loop = EventLoop()
    sw, nics = _star(loop, 1e9, n=3)       # nothing sets a port rate
    nics["h3"].on_receive = lambda: nics["h3"].recv(64) and None
    depths: list[int] = []

    def burst(_: object) -> None:          # two senders at line rate into one port
        for h in ("h1", "h2"):
            for _i in range(10):
                nics[h].send(50000, "10.0.3.1", 4791, [bytes(958)], 2)
    loop.at(0, burst)
    loop.at(80_000, lambda _: depths.append(sw.sw.tm.depth(3)))
    loop.run()
    assert sw.sw.tm.ports[3].rate_bps == 1_000_000_000
    # half of what arrived by then still waits in the switch's queue
    assert 8 <= depths[0] <= 10 and sw.sw.stats()["tx"] == {"3": 20}


def test_ports_release_on_their_own_at_their_own_rates() -> None:
    """Each port is woken for its own next packet: two ports at different
    rates drain side by side, each at its rate, whatever the other holds."""
    loop = EventLoop()
    sw, nics = _star(loop, 10e9, n=3)
    sw.execute("set_port_rate_bps 100000000 2")     # 100 Mb/s
    sw.execute("set_port_rate_bps 50000000 3")      # 50 Mb/s
    got: dict[str, list[int]] = {"h2": [], "h3": []}
    for h in got:
        nics[h].on_receive = lambda h=h: got[h].extend(loop.now for _ in nics[h].recv(64))

    def burst(_: object) -> None:
        for _i in range(5):
            for dst in ("10.0.2.1", "10.0.3.1"):
                nics["h1"].send(50000, dst, 4791, [bytes(958)], 2)
    loop.at(0, burst)
    loop.run()
    gaps = {h: {b - a for a, b in zip(t, t[1:], strict=False)} for h, t in got.items()}
    assert gaps == {"h2": {80_000}, "h3": {160_000}}
    assert sw.sw.tm.total == 0 and not sw._wakes


def test_a_second_pass_at_one_instant_looks_only_if_something_changed() -> None:
    """An agent's poll passes its engine twice (its own pass, then its CQ's);
    on a simulated host the second reads nothing unless a frame came or a QP
    was touched in between, and any later instant passes again."""
    from hosts.roce import Context, QPState, Scale

    loop = EventLoop()
    nic = SimNic(loop, "10.0.0.1", "02:00:00:00:00:01", "02:00:00:00:00:fe")
    nic.line = TxLine(loop, 10e9, lambda _f: None)
    ctx = Context(nic, Scale())
    reads: list[int] = []
    recv = nic.recv

    def counting_recv(n: int) -> list[bytes]:
        reads.append(loop.now)
        return recv(n)

    nic.recv = counting_recv  # type: ignore[method-assign]
    engine = ctx.engine
    qp = ctx.alloc_pd().create_qp(ctx.create_cq())   # touched: the next pass looks
    engine.progress()
    engine.progress()
    assert len(reads) == 1
    qp.modify(state=QPState.INIT)                    # touched again
    engine.progress()
    engine.progress()
    assert len(reads) == 2
    nic._inbox.append(b"\x45" + bytes(40))            # a frame came (malformed: dropped)
    engine.progress()
    assert len(reads) == 3 and engine.stats["malformed_drops"] == 1
    loop.at(5, lambda _: None)
    loop.run()
    engine.progress()                                # another instant
    assert reads == [0, 0, 0, 5]


def test_a_real_time_provider_never_skips_a_pass() -> None:
    from hosts.roce import Context, Scale, SimWire

    wire = SimWire()
    ctx = Context(wire.provider("10.0.0.2"), Scale())
    assert not ctx.engine._can_settle


def test_a_simulation_child_gets_a_large_nursery_unless_one_is_chosen(
        monkeypatch: pytest.MonkeyPatch) -> None:
    from testbed.sim.pypy import GC_NURSERY, child_env

    monkeypatch.delenv("PYPY_GC_NURSERY", raising=False)
    assert child_env()["PYPY_GC_NURSERY"] == GC_NURSERY
    monkeypatch.setenv("PYPY_GC_NURSERY", "8MB")
    env = child_env()
    assert env["PYPY_GC_NURSERY"] == "8MB"
    assert env["PYTHONPATH"].split(":")[0] == str(repo_path("."))


def test_sigterm_in_the_switchs_data_path_ends_the_run() -> None:
    """The switch counts a packet whose pipeline fails as dropped and goes
    on; SIGTERM's exception, raised wherever the signal lands, must not be
    one of those failures."""
    from testbed.net import SoftSignal

    loop = EventLoop()
    sw, nics = _star(loop, 10e9)

    def ingress(_st: object) -> None:
        raise SoftSignal("signal SIGTERM")

    sw.sw.program.ingress = ingress
    loop.at(0, lambda _: nics["h1"].send(50000, "10.0.2.1", 4791, [b"x" * 64], 2))
    with pytest.raises(SoftSignal):
        loop.run()
    assert sw.sw.drops.get("exception", 0) == 0
