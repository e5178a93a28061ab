"""A host obeying PFC (hosts/roce/pfc.py): pause frames read from the
host's interface hold its paced senders (hosts/roce/pacing.py) without
counting the pause as lateness."""

from __future__ import annotations

import socket

import pytest

from ground.wire.pause import MAX_QUANTA, pfc_frame
from hosts.roce.pacing import Pacer
from hosts.roce.pfc import HostPause, PauseError

SRC = bytes.fromhex("020000000099")
LINE = 8_000_000          # 8 Mb/s: a quantum is 64 us


class _Unstamped:
    """The host's end without kernel receive times: a frame takes effect when
    read, so the tests' own clocks hold."""

    def __init__(self, sock: socket.socket) -> None:
        self._sock = sock

    def setsockopt(self, *_args: object) -> None:
        raise OSError("no timestamps here")

    def recvmsg(self, size: int, _anc: int) -> tuple[bytes, list, int, object]:
        return self._sock.recv(size), [], 0, None

    def __getattr__(self, name: str) -> object:
        return getattr(self._sock, name)


class _Wire:
    """A socketpair standing in for the AF_PACKET socket: what the switch sends."""

    def __init__(self) -> None:
        self.switch, self.stamped = socket.socketpair(socket.AF_UNIX, socket.SOCK_DGRAM)
        self.host = _Unstamped(self.stamped)

    def send(self, frame: bytes) -> None:
        self.switch.send(frame)

    def close(self) -> None:
        self.switch.close()
        self.stamped.close()


@pytest.fixture
def wire():
    w = _Wire()
    yield w
    w.close()


def test_a_pause_lasts_its_quanta_at_the_line_rate_and_xon_ends_it(wire: _Wire) -> None:
    hp = HostPause("h1-eth0", LINE, sock=wire.host)
    try:
        assert hp.until_ns(1_000) == 0
        wire.send(pfc_frame(SRC, {0: 10}))
        assert hp.until_ns(1_000) == 1_000 + 640_000              # 10 x 512 bits at 8 Mb/s
        wire.send(pfc_frame(SRC, {3: MAX_QUANTA}))              # any class pauses the host
        assert hp.until_ns(2_000) > 4e9
        wire.send(pfc_frame(SRC, {3: 0}))                       # XON
        assert hp.until_ns(52_000) == 52_000
        wire.send(b"\x00" * 20)                                  # junk: counted, ignored
        hp.until_ns(60_000)
        rep = hp.report()
        assert (rep["frames"], rep["xoffs"], rep["malformed"]) == (3, 2, 1)
        assert rep["paused_s"] == pytest.approx(51_000 / 1e9)
    finally:
        hp.close()


def test_a_paused_pacer_waits_and_the_pause_is_not_lateness(wire: _Wire) -> None:
    hp = HostPause("h1-eth0", LINE, sock=wire.host)
    pacer = Pacer(rate_bps=LINE, burst_bytes=1100, now_ns=0, line_bps=LINE, pause=hp)
    try:
        assert pacer.next_send_ns(1082, 0) == 0
        pacer.on_sent(1082, 0)
        wire.send(pfc_frame(SRC, {0: MAX_QUANTA}))
        t = pacer.next_send_ns(1082, 10_000)
        # paused until its timer ends (an XON would wake the agent sooner)
        assert t == 10_000 + round(MAX_QUANTA * 512 * 1e9 / LINE) and pacer.exact
        assert pacer.next_send_ns(1082, 20_000) == t                # still paused
        wire.send(pfc_frame(SRC, {0: 0}))
        resume = 50_000_000
        assert pacer.next_send_ns(1082, resume) == resume       # the bucket refilled meanwhile
        pacer.on_sent(1082, resume)
        assert pacer.lateness.late_sends == 0
    finally:
        hp.close()


def test_a_pause_frame_read_late_counts_in_the_agents_receive_lag(wire: _Wire) -> None:
    """A NIC resumes when the XON arrives; an agent that reads it late (waiting
    for a CPU) resumes late: the frame's wait counts in the receive lag the
    fidelity verdict judges, as a late-read ACK or CNP does."""
    import time

    from hosts.roce.receive_lag import ReceiveLag

    lag = ReceiveLag()
    lag.reset(time.monotonic_ns(), 10_000_000)             # behind after 10 ms
    hp = HostPause("h1-eth0", LINE, sock=wire.stamped, receive_lag=lag)
    try:
        wire.send(pfc_frame(SRC, {0: MAX_QUANTA}))
        hp.until_ns(time.monotonic_ns())                       # read at once: not behind
        wire.send(pfc_frame(SRC, {0: 0}))                      # the XON waits 40 ms
        time.sleep(0.04)
        now = time.monotonic_ns()
        assert hp.until_ns(now) <= now - 35_000_000           # the pause ended on arrival
        d = lag.as_dict(now)
        assert d["batches"] == 2 and 35_000_000 <= d["max_ns"] < 1_000_000_000
        assert 25_000_000 <= d["behind_ns"] <= 35_000_000     # 40 ms old, 10 allowed
    finally:
        hp.close()


def test_a_pause_frame_ends_the_providers_wait_and_is_drained(wire: _Wire) -> None:
    """The udp provider watches the pause socket: an XON wakes a paused agent
    at once, and the frame is read on that wake-up, not left to end the
    next wait too."""
    import time

    from hosts.roce.udp_provider import UdpProvider

    hp = HostPause("h1-eth0", LINE, sock=wire.host)
    prov = UdpProvider("127.0.0.1", port=0)
    prov.watch(hp)
    try:
        wire.send(pfc_frame(SRC, {0: MAX_QUANTA}))
        t0 = time.monotonic_ns()
        prov.wait(t0 + 2_000_000_000, exact=False)
        assert time.monotonic_ns() - t0 < 1_000_000_000        # woken by the frame
        assert hp.frames == 1 and hp.until_ns(time.monotonic_ns()) > t0
        t1 = time.monotonic_ns()
        prov.wait(t1 + 50_000_000, exact=False)                 # nothing new: sleeps it out
        assert time.monotonic_ns() - t1 >= 45_000_000
    finally:
        prov.close()
        hp.close()


def test_a_pause_runs_from_its_frames_arrival_not_from_its_reading(wire: _Wire) -> None:
    """The pause timer starts when the frame reached the host (its kernel
    receive time), however late the agent reads it."""
    import time

    hp = HostPause("h1-eth0", LINE, sock=wire.stamped)
    try:
        sent = time.monotonic_ns()
        wire.send(pfc_frame(SRC, {0: 1000}))                   # 64 ms at 8 Mb/s
        time.sleep(0.03)
        now = time.monotonic_ns()
        until = hp.until_ns(now)
        assert sent <= until - 64_000_000 <= sent + 10_000_000 < now
    finally:
        hp.close()


def test_watching_a_missing_interface_is_a_clear_error() -> None:
    with pytest.raises(PauseError, match="no-such-if0"):
        HostPause("no-such-if0", LINE)
