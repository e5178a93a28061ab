"""RoCEv2 over kernel UDP sockets (the default provider inside Mininet hosts).

One receive socket bound to UDP 4791 for the whole host (the engine demultiplexes
by destination QPN); per source port in use (a QP's flow tag) one send socket
bound to it, so each flow's tag is exact on the wire. Send sockets set
IP_PMTUDISC_DO, which makes Linux send DF with IP identification 0 - the IPv4
header the ICRC pseudo-header assumes (hosts/roce/wire.py). Data leaves with
ECT(0) (the socket's IP_TOS); ACKs and CNPs override it per datagram to Not-ECT.
The ECN bits and destination address of each received datagram come from
recvmsg (IP_RECVTOS, IP_PKTINFO).
"""

from __future__ import annotations

import errno
import select
import socket
import struct
import time
from collections.abc import Sequence

from hosts.roce.constants import ECN_ECT0, ECN_MASK, ROCE_UDP_PORT

IP_TOS = getattr(socket, "IP_TOS", 1)
IP_RECVTOS = getattr(socket, "IP_RECVTOS", 13)
IP_PKTINFO = getattr(socket, "IP_PKTINFO", 8)
IP_MTU_DISCOVER = getattr(socket, "IP_MTU_DISCOVER", 10)
IP_PMTUDISC_DO = getattr(socket, "IP_PMTUDISC_DO", 2)
_SOL_IP = socket.IPPROTO_IP
_ANC_SPACE = socket.CMSG_SPACE(4) + socket.CMSG_SPACE(12) + 64
_TOS_CMSG = [[(_SOL_IP, IP_TOS, struct.pack("i", tos))] for tos in range(256)]


class UdpProvider:
    """Kernel UDP sockets of one host address.

    ``port`` is the local RoCE port (4791; tests on one address use others, 0 picks
    a free one: see ``.port``).
    ``data_ecn`` is what data packets (ECT(0) by default) carry instead: Not-ECT
    turns ECN off, CE marks everything (tests). ``timer_slack_ns`` sets the
    process's timer slack (Linux defaults to 50 µs, which would show up as pacing
    lateness); None leaves it alone.
    """

    def __init__(self, local_ip: str, *, port: int = ROCE_UDP_PORT, rcvbuf: int = 8 << 20,
                 sndbuf: int = 4 << 20, data_ecn: int = ECN_ECT0,
                 timer_slack_ns: int | None = 1000) -> None:
        self.local_ip = local_ip
        self.port = port
        self.data_ecn = data_ecn
        self._sndbuf = sndbuf
        self.send_errors = 0
        self.send_eagain = 0
        rx = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        _set_buf(rx, socket.SO_RCVBUF, rcvbuf)
        rx.setsockopt(_SOL_IP, IP_RECVTOS, 1)
        rx.setsockopt(_SOL_IP, IP_PKTINFO, 1)
        rx.bind((local_ip, port))
        rx.setblocking(False)
        self.port = rx.getsockname()[1]
        self._rx = rx
        self._tx: dict[int, socket.socket] = {}
        self._refs: dict[int, int] = {}
        if timer_slack_ns is not None:
            _set_timer_slack(timer_slack_ns)

    def fileno(self) -> int:
        return self._rx.fileno()

    @staticmethod
    def now_ns() -> int:
        return time.monotonic_ns()

    def open_port(self, sport: int) -> None:
        n = self._refs.get(sport, 0)
        if n == 0:
            s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
            s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
            s.setsockopt(_SOL_IP, IP_TOS, self.data_ecn)
            s.setsockopt(_SOL_IP, IP_MTU_DISCOVER, IP_PMTUDISC_DO)
            _set_buf(s, socket.SO_SNDBUF, self._sndbuf)
            s.bind((self.local_ip, sport))
            s.setblocking(False)
            self._tx[sport] = s
        self._refs[sport] = n + 1

    def close_port(self, sport: int) -> None:
        n = self._refs.get(sport, 0) - 1
        if n > 0:
            self._refs[sport] = n
            return
        self._refs.pop(sport, None)
        s = self._tx.pop(sport, None)
        if s is not None:
            s.close()

    def send(self, sport: int, dst_ip: str, dst_port: int,
             parts: Sequence[bytes | memoryview], ecn: int, dscp: int = 0) -> bool:
        s = self._tx[sport]
        if ecn == ECN_ECT0:
            ecn = self.data_ecn
        tos = ((dscp & 0x3F) << 2) | (ecn & ECN_MASK)
        anc = () if tos == self.data_ecn else _TOS_CMSG[tos]
        try:
            s.sendmsg(parts, anc, 0, (dst_ip, dst_port))
            return True
        except BlockingIOError:
            self.send_eagain += 1
        except OSError as e:
            if e.errno not in (errno.ENOBUFS, errno.ENETUNREACH, errno.EHOSTUNREACH,
                               errno.ECONNREFUSED, errno.EMSGSIZE):
                raise
            self.send_errors += 1
        return False

    def recv(self, max_pkts: int) -> list:
        out = []
        rx = self._rx
        local = self.local_ip
        port = self.port
        for _ in range(max_pkts):
            try:
                data, anc, _flags, addr = rx.recvmsg(65536, _ANC_SPACE)
            except (BlockingIOError, InterruptedError):
                break
            ecn = 0
            dst = local
            for level, typ, cdata in anc:
                if level == _SOL_IP:
                    if typ == IP_TOS:
                        ecn = cdata[0] & ECN_MASK
                    elif typ == IP_PKTINFO and len(cdata) >= 12:
                        dst = socket.inet_ntoa(cdata[8:12])
            out.append((data, addr[0], addr[1], dst, port, ecn))
        return out

    def wait(self, deadline_ns: int | None) -> None:
        if deadline_ns is None:
            timeout = None
        else:
            timeout = (deadline_ns - time.monotonic_ns()) / 1e9
            if timeout <= 0:
                return
        try:
            select.select((self._rx,), (), (), timeout)
        except InterruptedError:
            pass

    def close(self) -> None:
        for s in self._tx.values():
            s.close()
        self._tx.clear()
        self._refs.clear()
        self._rx.close()


def _set_buf(s: socket.socket, opt: int, size: int) -> None:
    force = {socket.SO_RCVBUF: 33, socket.SO_SNDBUF: 32}[opt]   # SO_*BUFFORCE (root)
    try:
        s.setsockopt(socket.SOL_SOCKET, force, size)
    except OSError:
        s.setsockopt(socket.SOL_SOCKET, opt, size)


def _set_timer_slack(ns: int) -> None:
    try:
        import ctypes
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(29, ctypes.c_ulong(ns), 0, 0, 0)      # PR_SET_TIMERSLACK
    except (OSError, AttributeError):
        pass
