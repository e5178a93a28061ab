"""The daemon's record of frames that arrived closer together than their
port's link could have carried them (what a NIC never sends)."""

from __future__ import annotations

import pytest
import test_runtime_support as prog
from test_runtime_support import FakeClock, l2_frame

from switches.soft.control.verbs import ControlPlane
from switches.soft.daemon import SwitchDaemon
from switches.soft.runtime.switch import SoftSwitch

FRAME = l2_frame(0x0A0B0C0D0E0F)          # 60 bytes: 100 us at 4.8 Mb/s


def test_bunched_arrivals_are_counted_per_port() -> None:
    sw = SoftSwitch(prog, now_us=FakeClock())
    ControlPlane(sw).execute(f"set_port_rate_bps {len(FRAME) * 8 * 10_000} 1")
    d = SwitchDaemon(sw, [])
    try:
        us = 1000
        # port 1: one packet time apart, then 10 us (bunched), then 60 us (fine)
        d._note_gaps([(t * us, 1, FRAME) for t in (0, 100, 200, 210, 270)])
        # port 2 has no rate: gaps recorded, nothing judged
        d._note_gaps([(t * us, 2, FRAME) for t in (0, 1)])
        st = d.stats()
        assert st["ingress_bunched"] == {"1": 1}
        assert st["ingress_min_gap_ns"] == {"1": 10 * us, "2": 1 * us}
    finally:
        d.close()


class _Backlog:
    """A port whose socket holds ``stamps`` (wall-clock ns), read in batches."""

    def __init__(self, number: int, stamps: list[int]) -> None:
        self.number = number
        self.waiting = [(ts, FRAME) for ts in stamps]

    def recv_stamped(self, limit: int) -> list[tuple[int, bytes]]:
        got, self.waiting = self.waiting[:limit], self.waiting[limit:]
        return got


def test_a_port_with_more_than_a_batch_waiting_keeps_its_frames_times(monkeypatch) -> None:
    """Port 1 holds two batches of frames, port 2 one frame that arrived
    between them: the switch must see every frame at its own arrival time,
    in order. Replaying port 2's frame with the first batch would move the
    queues' clock past port 1's unread frames, which would then all enter
    the queues at that one later time (a burst the wire never carried)."""
    from switches.soft import daemon as daemon_mod

    sw = SoftSwitch(prog, now_us=FakeClock())
    d = SwitchDaemon(sw, [])
    seen: list[tuple[int, int]] = []
    monkeypatch.setattr(sw, "forward_at",
                        lambda port, data, arrived_us: seen.append((port, arrived_us)) or [])
    try:
        batch = daemon_mod.RECV_BATCH
        us = 1000
        t0 = 10**9              # (a stamp of 0 means none)
        p1 = _Backlog(1, [t0 + t * 100 * us for t in range(2 * batch)])
        p2 = _Backlog(2, [t0 + (batch + 10) * 100 * us + 50 * us])
        d._replay([p1, p2])
        d._replay([p1])
        d._replay([])
        times = [t for _port, t in seen]
        assert len(seen) == 2 * batch + 1
        assert times == sorted(times)
        t2 = next(t for port, t in seen if port == 2)
        assert abs(t2 - times[0] - ((batch + 10) * 100 + 50)) <= 1
        assert abs(times[-1] - times[0] - (2 * batch - 1) * 100) <= 1
    finally:
        d.close()


class _StampedSocket:
    """What a port's AF_PACKET socket returns: frames with their kernel
    receive times (SCM_TIMESTAMPNS), then EAGAIN."""

    def __init__(self, stamps_ns: list[int]) -> None:
        import socket

        from switches.soft import ports

        self.waiting = [
            (FRAME, [(socket.SOL_SOCKET, ports.SO_TIMESTAMPNS,
                      ports._TIMESPEC.pack(ts // 10**9, ts % 10**9))], 0,
             ("veth", 0x0800, 0, 1, b""))
            for ts in stamps_ns]

    def recvmsg(self, _size: int, _anc: int) -> tuple[bytes, list, int, tuple]:
        if not self.waiting:
            raise BlockingIOError
        return self.waiting.pop(0)


def test_frames_the_kernel_delivered_out_of_order_are_counted() -> None:
    """A frame stamped earlier than one read before it overtook nothing on a
    wire: the kernel reordered the link's frames (e.g. two CPUs' receive
    backlogs), which the fidelity verdict must see, also across reads."""
    from switches.soft.ports import Port, PortStats

    port = Port.__new__(Port)          # no interface: only the read path is exercised
    port.number, port.ifname, port.stats = 1, "test", PortStats()
    port.kernel_ignores_outgoing, port._last_rx_ns = True, 0
    t0 = 10**18
    port.sock = _StampedSocket([t0 + d for d in (0, 10, 30, 20, 40, 25)])
    got = port.recv_stamped(4)
    assert [ts - t0 for ts, _ in got] == [0, 10, 30, 20]
    assert port.stats.rx_out_of_order == 1
    port.recv_stamped(4)                # 40 is in order, 25 is behind 40 (read earlier)
    assert port.stats.rx_out_of_order == 2 and port.stats.rx_frames == 6


def test_the_timeline_sample_agrees_with_the_full_statistics() -> None:
    """``switch_sample``, what the runner polls 50 times a second, carries the
    queue depths, drops and byte counters that ``switch_stats`` reports."""
    import json

    clock = FakeClock()
    sw = SoftSwitch(prog, now_us=clock)
    ctl = ControlPlane(sw)
    for line in ("table_add dmac forward 0x0a0b0c0d0e0f => 4", "set_queue_depth 3 4",
                 f"set_port_rate_bps {len(FRAME) * 8 * 1000} 4"):   # a frame per ms
        ctl.execute(line)
    d = SwitchDaemon(sw, [])
    try:
        for _ in range(5):                  # 1 leaves at once, 3 wait, 1 is dropped
            sw.forward(2, FRAME)
        sample = json.loads(d.execute("switch_sample"))
        full = json.loads(d.execute("switch_stats"))
        assert sample["queues"]["4"] == 3
        assert sample["queue_drops"]["4"] == 1
        assert sample["queues"]["4"] == sum(q["depth"] for q in full["switch"]["queues"]["4"]["queues"])
        for key in ("tx_bytes", "rx_bytes", "drops"):
            assert sample[key] == full["switch"][key], key
        assert sample["rx_bytes"] == {"2": 5 * len(FRAME)}
        assert sample["lag_us"] == full["lag_us"] and sample["kernel_drops"] == 0
    finally:
        d.close()


def test_the_release_margin_keeps_a_late_read_frame_at_its_own_time() -> None:
    """A frame stamped before the switch's last look at its sockets but read
    after it (it waited in a receive backlog): with the queues released by
    the clock a margin earlier it enters them at its own arrival time; released
    by the look's time, the clock has passed it and it enters late."""
    from switches.soft.daemon import build_arg_parser

    for margin, behind in ((1000, 0), (0, 1)):
        clock = FakeClock(10_000_000)
        sw = SoftSwitch(prog, now_us=clock)
        ControlPlane(sw).execute(f"set_port_rate_bps {len(FRAME) * 8 * 10_000} 1")  # 100 us
        d = SwitchDaemon(sw, [], release_margin_us=margin)
        try:
            clock.advance(5000)
            look = clock.t
            d.release_by_clock(look)
            sw.forward_at(1, FRAME, look - 500)     # stamped 500 us before the look
            assert sw.rx_behind_clock[1] == behind
        finally:
            d.close()
    with pytest.raises(ValueError, match="release_margin_us"):
        SwitchDaemon(SoftSwitch(prog, now_us=FakeClock()), [], release_margin_us=-1)
    args = build_arg_parser().parse_args(["--program", "x.p4"])
    assert args.release_margin_us == 1000
