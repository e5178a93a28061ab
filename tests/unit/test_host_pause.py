"""A host obeying PFC (hosts/roce/pfc.py): pause frames read from the
host's interface hold its paced senders (hosts/roce/pacing.py) without
counting the pause as lateness."""

from __future__ import annotations

import socket

import pytest

from hosts.roce.pacing import DEFAULT_BURST_BYTES, Pacer
from hosts.roce.pfc import HostPause, PauseError
from switches.soft.runtime.pfc import MAX_QUANTA, pfc_frame

SRC = bytes.fromhex("020000000099")
LINE = 8_000_000          # 8 Mb/s: a quantum is 64 us


class _Wire:
    """A socketpair standing in for the AF_PACKET socket: what the switch sends."""

    def __init__(self) -> None:
        self.switch, self.host = socket.socketpair(socket.AF_UNIX, socket.SOCK_DGRAM)

    def send(self, frame: bytes) -> None:
        self.switch.send(frame)

    def close(self) -> None:
        self.switch.close()


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
        # paused until an XON: it looks again a full-size packet time later
        assert t == 10_000 + round(DEFAULT_BURST_BYTES * 8e9 / LINE)
        assert pacer.next_send_ns(1082, t) > t                  # still paused
        wire.send(pfc_frame(SRC, {0: 0}))
        resume = 50_000_000
        assert pacer.next_send_ns(1082, resume) == resume       # the bucket refilled meanwhile
        pacer.on_sent(1082, resume)
        assert pacer.lateness.late_sends == 0
    finally:
        hp.close()


def test_watching_a_missing_interface_is_a_clear_error() -> None:
    with pytest.raises(PauseError, match="no-such-if0"):
        HostPause("no-such-if0", LINE)
