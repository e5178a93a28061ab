"""AF_PACKET switch ports on a veth pair (root, no Mininet needed)."""

from __future__ import annotations

import subprocess
import time
from collections.abc import Iterator

import pytest

from switches.soft.ports import PACKET_IGNORE_OUTGOING, SOL_PACKET, Port, PortError

pytestmark = pytest.mark.root

A, B = "tbtestp0a", "tbtestp0b"


@pytest.fixture
def veth() -> Iterator[tuple[str, str]]:
    subprocess.run(["ip", "link", "del", A], capture_output=True)
    subprocess.run(["ip", "link", "add", A, "type", "veth", "peer", "name", B], check=True)
    for name in (A, B):
        subprocess.run(["ip", "link", "set", name, "up"], check=True)
    yield A, B
    subprocess.run(["ip", "link", "del", A], capture_output=True)


def _recv_all(port: Port, want: int, timeout: float = 2.0) -> list[bytes]:
    got: list[bytes] = []
    deadline = time.monotonic() + timeout
    while len(got) < want and time.monotonic() < deadline:
        got += port.recv_batch(64)
        time.sleep(0.01)
    return got


@pytest.mark.parametrize("kernel_filter", [True, False], ids=["ignore-outgoing", "pkttype"])
def test_frames_cross_and_own_transmissions_are_not_received(
        veth: tuple[str, str], kernel_filter: bool) -> None:
    a, b = Port(1, veth[0]), Port(2, veth[1])
    if not kernel_filter:  # the path for kernels without PACKET_IGNORE_OUTGOING
        for p in (a, b):
            p.sock.setsockopt(SOL_PACKET, PACKET_IGNORE_OUTGOING, 0)
            p.kernel_ignores_outgoing = False
    try:
        # A unicast frame to a MAC neither side owns: only promiscuous mode lets it in.
        frames = [bytes.fromhex("0200000000aa" "0200000000bb" "88b5") + bytes([i]) * 50
                  for i in range(100)]
        for f in frames:
            assert a.send(f)
        got = [f for f in _recv_all(b, 100) if f[12:14] == b"\x88\xb5"]
        assert got == frames
        # The sender's own socket does not see its transmissions looped back.
        assert [f for f in a.recv_batch(1000) if f[12:14] == b"\x88\xb5"] == []
        assert a.stats.tx_frames == 100 and b.stats.rx_frames >= 100
        # Frames above the MTU are refused and counted, not fatal.
        assert not a.send(bytes(9000))
        assert a.stats.tx_errors == 1
    finally:
        a.close()
        b.close()


def test_missing_interface_is_a_port_error() -> None:
    with pytest.raises(PortError, match="no interface named 'tbnosuch0'"):
        Port(3, "tbnosuch0")

