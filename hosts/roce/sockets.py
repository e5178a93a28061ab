"""Socket options the hosts' packet and UDP sockets share: a classic BPF filter,
buffers beyond the sysctl caps, and each frame's kernel receive time.

Linux values where PyPy 3.9's socket module lacks the names.
"""

from __future__ import annotations

import ctypes
import socket
import struct

__all__ = ["SO_ATTACH_FILTER", "SO_TIMESTAMPNS", "TIMESTAMP_CMSG_SPACE", "attach_filter",
           "kernel_time_ns", "set_buffer"]

SO_ATTACH_FILTER = getattr(socket, "SO_ATTACH_FILTER", 26)
SO_TIMESTAMPNS = getattr(socket, "SO_TIMESTAMPNS", 35)   # SCM_TIMESTAMPNS: CLOCK_REALTIME
_TIMESPEC = struct.Struct("qq")     # struct timespec on 64-bit Linux
TIMESTAMP_CMSG_SPACE = socket.CMSG_SPACE(_TIMESPEC.size)   # recvmsg's ancillary size
_BUFFORCE = {socket.SO_RCVBUF: 33, socket.SO_SNDBUF: 32}    # SO_*BUFFORCE (root)


def attach_filter(sock: socket.socket, program: list[tuple[int, int, int, int]]) -> None:
    """SO_ATTACH_FILTER with a classic BPF program (the kernel copies it)."""
    code = ctypes.create_string_buffer(b"".join(struct.pack("HBBI", *ins) for ins in program))
    fprog = struct.pack("HL", len(program), ctypes.addressof(code))   # struct sock_fprog
    sock.setsockopt(socket.SOL_SOCKET, SO_ATTACH_FILTER, fprog)


def set_buffer(sock: socket.socket, opt: int, size: int) -> None:
    """SO_RCVBUF or SO_SNDBUF of ``size`` bytes, beyond rmem_max/wmem_max where
    the process may (root), else as far as the cap allows."""
    try:
        sock.setsockopt(socket.SOL_SOCKET, _BUFFORCE[opt], size)
    except OSError:
        sock.setsockopt(socket.SOL_SOCKET, opt, size)


def kernel_time_ns(anc: list[tuple[int, int, bytes]]) -> int | None:
    """A frame's kernel receive time (CLOCK_REALTIME ns) from recvmsg's ancillary
    data, on a socket with SO_TIMESTAMPNS; None if it carries none."""
    for level, kind, raw in anc:
        if level == socket.SOL_SOCKET and kind == SO_TIMESTAMPNS and len(raw) >= _TIMESPEC.size:
            sec, nsec = _TIMESPEC.unpack_from(raw)
            return sec * 1_000_000_000 + nsec
    return None
