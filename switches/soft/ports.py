"""Switch ports as AF_PACKET raw sockets, one per network interface.

Each port socket is bound to one interface for every protocol (ETH_P_ALL),
puts the interface in promiscuous mode (frames for any MAC must reach the
P4 parser), and skips the copies of frames this process itself transmits,
which the kernel loops back to every packet socket as PACKET_OUTGOING
(dropped in the kernel with PACKET_IGNORE_OUTGOING where available, else
recognised by the packet type recvfrom reports).
"""

from __future__ import annotations

import errno
import fcntl
import socket
import struct
from dataclasses import dataclass

ETH_P_ALL = 0x0003
SOL_PACKET = 263
PACKET_ADD_MEMBERSHIP = 1
PACKET_DROP_MEMBERSHIP = 2
PACKET_MR_PROMISC = 1
PACKET_OUTGOING = 4
PACKET_STATISTICS = 6
PACKET_IGNORE_OUTGOING = 23  # Linux >= 4.20
SIOCGSTAMP = 0x8906
SO_TIMESTAMPNS = 35          # SCM_TIMESTAMPNS: struct timespec, CLOCK_REALTIME
_TIMESPEC = struct.Struct("qq")
_CMSG_SPACE = socket.CMSG_SPACE(_TIMESPEC.size)
# Big enough for a jumbo frame; offloads are turned off on the links so
# frames never exceed the MTU in practice.
MAX_FRAME = 65535
SOCKET_BUFFER = 4 * 1024 * 1024


def if_index(ifname: str) -> int:
    """Interface index of ``ifname`` (OSError if there is none). PyPy's socket
    module has no if_nametoindex; sysfs has the same number."""
    nametoindex = getattr(socket, "if_nametoindex", None)
    if nametoindex is not None:
        return int(nametoindex(ifname))
    if "/" in ifname or ifname in ("", ".", ".."):
        raise OSError(errno.ENODEV, f"no interface {ifname!r}")
    try:
        with open(f"/sys/class/net/{ifname}/ifindex") as f:
            return int(f.read())
    except (OSError, ValueError) as e:
        raise OSError(errno.ENODEV, f"no interface {ifname!r}") from e


class PortError(OSError):
    """An interface could not be opened as a switch port."""


@dataclass
class PortStats:
    rx_frames: int = 0
    rx_bytes: int = 0
    tx_frames: int = 0
    tx_bytes: int = 0
    tx_errors: int = 0
    # Frames the kernel dropped because the socket buffer was full: the
    # switch did not keep up with the offered load.
    kernel_drops: int = 0
    # Frames whose kernel receive time is earlier than that of a frame read
    # before them: the kernel delivered the link's frames out of order (a
    # wire never does; e.g. per-CPU backlogs overtaking each other).
    rx_out_of_order: int = 0


class Port:
    """One switch port: a nonblocking raw socket on ``ifname``."""

    def __init__(self, number: int, ifname: str, *, buffer_bytes: int = SOCKET_BUFFER) -> None:
        self.number = number
        self.ifname = ifname
        self.stats = PortStats()
        try:
            ifindex = if_index(ifname)
        except OSError as e:
            raise PortError(errno.ENODEV, f"port {number}: no interface named {ifname!r}") from e
        self.ifindex = ifindex
        sock = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(ETH_P_ALL))
        try:
            for opt in (socket.SO_RCVBUF, socket.SO_SNDBUF):
                sock.setsockopt(socket.SOL_SOCKET, opt, buffer_bytes)
                # SO_*BUFFORCE lifts the rmem_max/wmem_max cap when we are root.
                force = {socket.SO_RCVBUF: 33, socket.SO_SNDBUF: 32}[opt]
                try:
                    sock.setsockopt(socket.SOL_SOCKET, force, buffer_bytes)
                except OSError:
                    pass
            sock.bind((ifname, ETH_P_ALL))
            mreq = struct.pack("iHH8s", ifindex, PACKET_MR_PROMISC, 0, b"")
            sock.setsockopt(SOL_PACKET, PACKET_ADD_MEMBERSHIP, mreq)
            sock.setblocking(False)
            try:
                # Cheapest: the kernel does not even queue our own frames.
                sock.setsockopt(SOL_PACKET, PACKET_IGNORE_OUTGOING, 1)
                self.kernel_ignores_outgoing = True
            except OSError:
                self.kernel_ignores_outgoing = False
        except OSError as e:
            sock.close()
            raise PortError(e.errno or errno.EIO, f"port {number} ({ifname}): {e.strerror or e}") from e
        self.sock = sock
        # Each frame's kernel receive time (recv_stamped): when it came off
        # the wire, whenever the switch gets to read it.
        try:
            sock.setsockopt(socket.SOL_SOCKET, SO_TIMESTAMPNS, 1)
            self.stamped = True
        except OSError:
            self.stamped = False
        self._last_rx_ns = 0     # latest kernel receive time read (rx_out_of_order)

    def fileno(self) -> int:
        return self.sock.fileno()

    def recv_batch(self, limit: int) -> list[bytes]:
        """Up to ``limit`` received frames that are waiting now (never blocks)."""
        frames: list[bytes] = []
        sock = self.sock
        st = self.stats
        if self.kernel_ignores_outgoing:
            recv = sock.recv
            while len(frames) < limit:
                try:
                    data = recv(MAX_FRAME)
                except (BlockingIOError, InterruptedError):
                    break
                st.rx_frames += 1
                st.rx_bytes += len(data)
                frames.append(data)
            return frames
        while len(frames) < limit:
            try:
                data, addr = sock.recvfrom(MAX_FRAME)
            except (BlockingIOError, InterruptedError):
                break
            if addr[2] == PACKET_OUTGOING:
                continue
            st.rx_frames += 1
            st.rx_bytes += len(data)
            frames.append(data)
        return frames

    def recv_stamped(self, limit: int) -> list[tuple[int, bytes]]:
        """Up to ``limit`` waiting frames (never blocks), each with the
        kernel's receive time in CLOCK_REALTIME nanoseconds (0 where the
        kernel gave none)."""
        frames: list[tuple[int, bytes]] = []
        recvmsg = self.sock.recvmsg
        st = self.stats
        ignore = self.kernel_ignores_outgoing
        unpack = _TIMESPEC.unpack_from
        last = self._last_rx_ns
        while len(frames) < limit:
            try:
                data, anc, _flags, addr = recvmsg(MAX_FRAME, _CMSG_SPACE)
            except (BlockingIOError, InterruptedError):
                break
            if not ignore and addr[2] == PACKET_OUTGOING:
                continue
            ts = 0
            for level, kind, raw in anc:
                if level == socket.SOL_SOCKET and kind == SO_TIMESTAMPNS:
                    sec, nsec = unpack(raw)
                    ts = sec * 1_000_000_000 + nsec
                    if ts < last:
                        st.rx_out_of_order += 1
                    else:
                        last = ts
            st.rx_frames += 1
            st.rx_bytes += len(data)
            frames.append((ts, data))
        self._last_rx_ns = last
        return frames

    def send(self, frame: bytes) -> bool:
        """Transmit one frame; False (and counted) if the kernel refused it."""
        try:
            self.sock.send(frame)
        except OSError:
            self.stats.tx_errors += 1
            return False
        self.stats.tx_frames += 1
        self.stats.tx_bytes += len(frame)
        return True

    def last_rx_wallclock(self) -> float | None:
        """Kernel receive time (CLOCK_REALTIME seconds) of the last frame read."""
        try:
            raw = fcntl.ioctl(self.sock.fileno(), SIOCGSTAMP, bytes(16))
        except OSError:
            return None
        sec, usec = struct.unpack("qq", raw)
        return sec + usec / 1e6

    def update_kernel_drops(self) -> int:
        """Add the kernel's drop count since the last call (reading resets it)."""
        try:
            raw = self.sock.getsockopt(SOL_PACKET, PACKET_STATISTICS, 8)
        except OSError:
            return self.stats.kernel_drops
        _packets, drops = struct.unpack("II", raw)
        self.stats.kernel_drops += drops
        return self.stats.kernel_drops

    def close(self) -> None:
        if self.sock.fileno() < 0:
            return
        try:
            mreq = struct.pack("iHH8s", self.ifindex, PACKET_MR_PROMISC, 0, b"")
            self.sock.setsockopt(SOL_PACKET, PACKET_DROP_MEMBERSHIP, mreq)
        except OSError:
            pass  # the interface may already be gone
        self.sock.close()


def parse_interface_spec(spec: str) -> tuple[int, str]:
    """``"1@s1-eth1"`` -> (1, "s1-eth1"), as simple_switch's ``-i``."""
    num, sep, ifname = spec.partition("@")
    if not sep or not ifname:
        raise ValueError(f"bad interface spec {spec!r}: expected PORT@IFNAME")
    try:
        port = int(num)
    except ValueError:
        raise ValueError(f"bad interface spec {spec!r}: port {num!r} is not a number") from None
    if not 0 <= port < 511:
        raise ValueError(f"bad interface spec {spec!r}: port must be in 0..510")
    return port, ifname
