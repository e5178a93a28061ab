"""A host NIC obeying priority flow control: the pause frames the switch
sends to the host's interface stop its senders until the pause ends.

The switch (switches/soft/runtime/pfc.py; the frame format is
ground/wire/pause.py's) pauses an ingress port once too many of its packets
wait in egress queues and sends an XON once they have drained. A NIC stops its
transmitter within a frame; here every paced sender of the host
(hosts/roce/pacing.py) asks :meth:`HostPause.until_ns` before it releases a
packet, and a paused sender waits. What a sender already handed to the
kernel (at most the pacer's bucket, or its run-ahead in a host qdisc) still
leaves: that is the headroom the switch's thresholds must leave.

A pause takes effect from the frame's kernel receive time
(``SO_TIMESTAMPNS``), not from when the agent read it: a pause timer runs
from its frame's arrival, and an XON ends the pause when it arrived. The
agent's wait ends when a pause frame comes (the udp provider watches this
socket, :meth:`HostPause.drain`), so an XON releases the senders at once.
How long each pause frame waited before the agent read it goes into the
agent's receive lag (hosts/roce/receive_lag.py): an agent that reads an XON
late (waiting for a CPU) resumes late, and the fidelity verdict's
``host_receive_lag`` sees it as it sees a late ACK or CNP.

The host has one traffic class: a pause of any class stops all of it.
Timers are in quanta of 512 bit times at the host's line rate, which the
testbed's slowdown already dilates like every other time.
"""

from __future__ import annotations

import socket
import time
from collections.abc import Callable
from typing import Any

from ground.wire.ethernet import ETHERTYPE_MAC_CONTROL
from ground.wire.pause import QUANTUM_BITS, PauseFormatError, parse_pause
from hosts.roce.receive_lag import ReceiveLag
from hosts.roce.sockets import SO_TIMESTAMPNS, TIMESTAMP_CMSG_SPACE, kernel_time_ns

_RECV_BYTES = 128


def _realtime_offset_ns() -> int:
    """CLOCK_REALTIME less CLOCK_MONOTONIC, now (kernel stamps are realtime)."""
    return time.time_ns() - time.monotonic_ns()


class PauseError(RuntimeError):
    """The host's interface cannot be watched for pause frames."""


class HostPause:
    """Until when the host's link is paused, from the pause frames that
    reached ``ifname`` (read on an AF_PACKET socket for MAC control)."""

    def __init__(self, ifname: str, line_bps: float, sock: Any = None,
                 receive_lag: ReceiveLag | None = None,
                 clock: Callable[[], int] = time.monotonic_ns) -> None:
        if not line_bps > 0:
            raise ValueError("a paused link needs a positive line rate")
        self.ifname = ifname
        # CLOCK_MONOTONIC, or a simulated host's clock (testbed.sim)
        self.clock = clock
        self.ns_per_quantum = QUANTUM_BITS * 1e9 / line_bps
        if sock is None:
            try:
                sock = socket.socket(socket.AF_PACKET, socket.SOCK_RAW,
                                     socket.htons(ETHERTYPE_MAC_CONTROL))
                sock.bind((ifname, ETHERTYPE_MAC_CONTROL))
            except OSError as e:
                raise PauseError(f"cannot watch {ifname} for PFC pause frames: {e}") from e
        sock.setblocking(False)
        try:
            sock.setsockopt(socket.SOL_SOCKET, SO_TIMESTAMPNS, 1)
        except OSError:
            pass        # (a test's stand-in socket) frames then take effect when read
        self._sock = sock
        self.receive_lag = receive_lag
        self.until = 0                 # CLOCK_MONOTONIC ns
        self.frames = 0                # pause frames read (XOFF and XON)
        self.xoffs = 0
        self.malformed = 0
        self.paused_ns = 0             # time spent paused, as far as known
        self._since: int | None = None

    def fileno(self) -> int:
        return int(self._sock.fileno())

    def drain(self) -> None:
        """Take the pause frames that arrived (the agent's wait ended on them)."""
        self.until_ns(self.clock())

    def until_ns(self, now_ns: int) -> int:
        """Read the pause frames that arrived; the time the host may send
        again (<= now_ns: not paused)."""
        while True:
            try:
                frame, anc, _flags, _addr = self._sock.recvmsg(_RECV_BYTES, TIMESTAMP_CMSG_SPACE)
            except (BlockingIOError, InterruptedError):
                break
            rx = kernel_time_ns(anc)
            # its arrival on the monotonic clock (never after now)
            at = now_ns if rx is None else min(now_ns, rx - _realtime_offset_ns())
            if rx is not None and self.receive_lag is not None:
                self.receive_lag.record(now_ns - at, now_ns)
            self._take(frame, at)
        if self._since is not None and self.until <= now_ns:
            self.paused_ns += max(self.until, self._since) - self._since
            self._since = None
        return self.until

    def _take(self, frame: bytes, at_ns: int) -> None:
        try:
            quanta = parse_pause(frame)
        except PauseFormatError:
            self.malformed += 1
            return
        if not quanta:
            return
        self.frames += 1
        q = max(quanta.values())
        if q:
            self.xoffs += 1
            if self._since is None:
                self._since = at_ns
        elif self._since is not None:
            self.paused_ns += max(0, at_ns - self._since)
            self._since = None
        self.until = at_ns + round(q * self.ns_per_quantum)

    def report(self) -> dict[str, Any]:
        now = self.clock()
        still = now - self._since if self._since is not None else 0
        return {"frames": self.frames, "xoffs": self.xoffs, "malformed": self.malformed,
                "paused_s": (self.paused_ns + still) / 1e9}

    def close(self) -> None:
        self._sock.close()
