"""RoCEv2 over kernel UDP sockets (the default provider inside Mininet hosts).

Sending: per source port in use (a QP's flow tag) one UDP socket bound to it,
so each flow's tag is exact on the wire. Send sockets set IP_PMTUDISC_DO, which
makes Linux send DF with IP identification 0 - the IPv4 header the sender's
ICRC assumes (hosts/roce/wire.py). Data leaves with ECT(0) (the socket's
IP_TOS); ACKs and CNPs override it per datagram to Not-ECT.

Receiving: the ICRC covers the IPv4 identification and flags, which other RoCE
senders (rdma_rxe, NICs) set as they like, and a UDP socket does not show them
(IP_RECVTOS and IP_PKTINFO give the TOS and addresses, nothing gives the id).
So datagrams are read from a raw IPv4 socket (IPPROTO_UDP), which returns each
one with its IPv4 and UDP headers as they arrived; a classic BPF filter on it
keeps only this host's address and RoCE port. The UDP socket stays bound to the
port, so the kernel does not answer with ICMP port unreachable, but a filter
that drops everything keeps it empty. Same number of system calls per packet
as a UDP socket (measured on loopback: about 1 µs more per packet, the
kernel's second delivery). Needs CAP_NET_RAW (root; Mininet hosts are).
"""

from __future__ import annotations

import errno
import select
import socket
import struct
import time
from collections.abc import Sequence
from typing import Any

from ground.wire.ipv4 import IPV4
from ground.wire.udp import UDP
from hosts.roce.constants import ECN_ECT0, ECN_MASK, ROCE_UDP_PORT
from hosts.roce.provider import MAX_WAKE_LEAD_NS, Datagram
from hosts.roce.receive_lag import ReceiveLag
from hosts.roce.sockets import (
    SO_TIMESTAMPNS,
    TIMESTAMP_CMSG_SPACE,
    attach_filter,
    kernel_time_ns,
    set_buffer,
)

IP_TOS = getattr(socket, "IP_TOS", 1)
# Linux value; PyPy 3.9's socket module does not define it.
SO_PRIORITY = getattr(socket, "SO_PRIORITY", 12)
IP_MTU_DISCOVER = getattr(socket, "IP_MTU_DISCOVER", 10)
IP_PMTUDISC_DO = getattr(socket, "IP_PMTUDISC_DO", 2)
_SOL_IP = socket.IPPROTO_IP
_TOS_CMSG = [[(_SOL_IP, IP_TOS, struct.pack("i", tos))] for tos in range(256)]
_MAX_DATAGRAM = 65536

# Classic BPF (linux/filter.h): struct sock_filter {u16 code; u8 jt; u8 jf; u32 k}.
_BPF_LD_W_ABS = 0x20
_BPF_LDX_B_MSH = 0xB1       # X <- 4 * (pkt[k] & 0xf): the IPv4 header length
_BPF_LD_H_IND = 0x48
_BPF_JEQ_K = 0x15
_BPF_RET_K = 0x06

def roce_port_filter(local_ip: str, port: int) -> list[tuple[int, int, int, int]]:
    """BPF program for a raw IPv4 socket: accept UDP datagrams to local_ip:port."""
    ip = struct.unpack("!I", socket.inet_aton(local_ip))[0]
    return [
        (_BPF_LD_W_ABS, 0, 0, IPV4.offset("dst")),
        (_BPF_JEQ_K, 0, 4, ip),
        (_BPF_LDX_B_MSH, 0, 0, IPV4.offset("ihl")),
        (_BPF_LD_H_IND, 0, 0, UDP.offset("dport")),
        (_BPF_JEQ_K, 0, 1, port),
        (_BPF_RET_K, 0, 0, 0xFFFFFFFF),     # accept the whole packet
        (_BPF_RET_K, 0, 0, 0),
    ]


_DROP_ALL = [(_BPF_RET_K, 0, 0, 0)]
# Early wake-up (see UdpProvider.wait): where the lead starts and its steps
# for tracking the 90th percentile; its bound (the most a wait polls) is
# hosts.roce.provider.MAX_WAKE_LEAD_NS.
INITIAL_WAKE_LEAD_NS = 30_000
_LEAD_STEP_UP_NS = 900
_LEAD_STEP_DOWN_NS = 100


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
        self.wake_lead_ns = INITIAL_WAKE_LEAD_NS
        # how long the oldest frame of each batch read had waited (fidelity)
        self.receive_lag = ReceiveLag()
        # what a wait selects on: the socket, then what watch() added
        self._wait_on: tuple[Any, ...] = ()
        # The receive holdoff (see wait), ns: 0 is off, every datagram wakes
        self.rx_holdoff_ns = 0
        self._woke_ns = 0           # when the last wait ended
        try:
            rx = socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_UDP)
        except PermissionError as e:
            raise PermissionError(
                f"UdpProvider({local_ip}): opening a raw IPv4 socket needs CAP_NET_RAW "
                "(run as root): the ICRC check needs each datagram's IPv4 header as it "
                "arrived") from e
        udp = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        try:
            attach_filter(udp, _DROP_ALL)
            udp.bind((local_ip, port))
            self.port = udp.getsockname()[1]
            attach_filter(rx, roce_port_filter(local_ip, self.port))
            set_buffer(rx, socket.SO_RCVBUF, rcvbuf)
            # each frame's kernel receive time (CLOCK_REALTIME), for receive_lag
            rx.setsockopt(socket.SOL_SOCKET, SO_TIMESTAMPNS, 1)
            rx.setblocking(False)
        except BaseException:
            rx.close()
            udp.close()
            raise
        self._port_holder = udp     # keeps the port taken (no ICMP unreachable)
        self._rx = rx
        self._wait_on = (rx,)
        self._tx: dict[int, socket.socket] = {}
        self._tx_prio: dict[tuple[int, int], socket.socket] = {}   # (sport, priority)
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
            self._tx[sport] = self._tx_socket(sport)
        self._refs[sport] = n + 1

    def _tx_socket(self, sport: int) -> socket.socket:
        s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        try:
            s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
            s.setsockopt(_SOL_IP, IP_TOS, self.data_ecn)
            s.setsockopt(_SOL_IP, IP_MTU_DISCOVER, IP_PMTUDISC_DO)
            set_buffer(s, socket.SO_SNDBUF, self._sndbuf)
            s.bind((self.local_ip, sport))
            s.setblocking(False)
        except BaseException:
            s.close()
            raise
        return s

    def _open_prio(self, sport: int, priority: int) -> socket.socket:
        """A socket on ``sport`` whose datagrams carry the kernel packet
        priority ``priority`` (a shaped QP's HTB class, hosts/roce/shaping.py).
        Per socket rather than per datagram: the SO_PRIORITY control message
        exists only in recent kernels. Priorities above 6 need CAP_NET_ADMIN."""
        s = self._tx_socket(sport)
        try:
            s.setsockopt(socket.SOL_SOCKET, SO_PRIORITY, priority)
        except OSError as e:
            s.close()
            raise OSError(e.errno, f"UdpProvider({self.local_ip}): setting packet priority "
                          f"{priority:#x} on port {sport} (a QP's HTB class) needs "
                          f"CAP_NET_ADMIN: {e.strerror}") from e
        self._tx_prio[(sport, priority)] = s
        return s

    def close_port(self, sport: int) -> None:
        n = self._refs.get(sport, 0) - 1
        if n > 0:
            self._refs[sport] = n
            return
        self._refs.pop(sport, None)
        s = self._tx.pop(sport, None)
        if s is not None:
            s.close()
        for key in [k for k in self._tx_prio if k[0] == sport]:
            self._tx_prio.pop(key).close()

    def send(self, sport: int, dst_ip: str, dst_port: int,
             parts: Sequence[bytes | memoryview], ecn: int, dscp: int = 0,
             priority: int = 0) -> bool:
        s = self._tx[sport]
        if ecn == ECN_ECT0:
            ecn = self.data_ecn
        tos = ((dscp & 0x3F) << 2) | (ecn & ECN_MASK)
        if priority:
            s = self._tx_prio.get((sport, priority)) or self._open_prio(sport, priority)
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

    def recv(self, max_pkts: int) -> list[Datagram]:
        out: list[Datagram] = []
        if max_pkts <= 0:
            return out
        # The first frame, the oldest waiting, with its kernel receive time;
        # the rest without (a recvmsg costs several us more in CPython).
        try:
            data, anc, _flags, _addr = self._rx.recvmsg(_MAX_DATAGRAM, TIMESTAMP_CMSG_SPACE)
        except (BlockingIOError, InterruptedError):
            return out
        out.append(data)
        arrived = kernel_time_ns(anc)
        if arrived is not None:
            self.receive_lag.record(time.time_ns() - arrived, time.monotonic_ns())
        recv = self._rx.recv
        for _ in range(max_pkts - 1):
            try:
                out.append(recv(_MAX_DATAGRAM))
            except (BlockingIOError, InterruptedError):
                break
        return out

    def watch(self, source: Any) -> None:
        """End every wait also when ``source`` (``fileno()`` and ``drain()``,
        e.g. a host's PFC pause socket, hosts/roce/pfc.py) has frames; the
        wait drains it, so a frame nobody asks for does not end the next one."""
        self._wait_on = (*self._wait_on, source)

    def _woken(self, ready: list[Any]) -> bool:
        for s in ready:
            if s is not self._rx:
                s.drain()
        return bool(ready)

    def wait(self, deadline_ns: int | None, exact: bool = True) -> None:
        """Block until a datagram arrives or ``deadline_ns``. For an ``exact``
        deadline (a paced send) a timed sleep ends ``wake_lead_ns`` early and
        the rest is spent polling the socket: the kernel's timer wake-ups
        overshoot by tens of µs (about 30 on a KVM guest), a packet time at a
        few hundred Mb/s. The lead follows the 90th percentile of the
        overshoots seen, so most paced sends leave on time at the cost of a
        few µs of polling each. Any other deadline (ACK, retransmission and
        DCQCN timers, milliseconds once scaled) is a plain sleep: polling for
        those took a tenth of a receiver's CPU.

        With ``rx_holdoff_ns`` set, a datagram ends a wait no sooner than
        that after the previous wait ended: frames arriving meanwhile are
        read together at the end of the holdoff, one wake-up for many (a
        wake-up costs far more than a frame's handling, hosts/roce/README.md,
        "Speed"), and their ACKs and CNPs leave up to that late. Deadlines and
        watched sources (PFC pauses) still end the wait on time."""
        hold = self.rx_holdoff_ns
        if not hold:
            self._wait(deadline_ns, exact, self._wait_on)
            return
        try:
            hold_end = self._woke_ns + hold
            if deadline_ns is not None and deadline_ns <= hold_end:
                self._wait(deadline_ns, exact, self._wait_on[1:])
            elif (hold_end <= time.monotonic_ns()
                    or not self._wait(hold_end, False, self._wait_on[1:])):
                self._wait(deadline_ns, exact, self._wait_on)
        finally:
            self._woke_ns = time.monotonic_ns()

    def _wait(self, deadline_ns: int | None, exact: bool, on: tuple[Any, ...]) -> bool:
        """:meth:`wait` on the sources ``on``; True if one of them ended it."""
        try:
            if deadline_ns is None:
                return self._woken(select.select(on, (), (), None)[0])
            now = time.monotonic_ns()
            remaining = deadline_ns - now
            if remaining <= 0:
                return False
            if not exact:
                return self._woken(select.select(on, (), (), remaining / 1e9)[0])
            lead = self.wake_lead_ns
            if remaining > lead:
                sleep_ns = remaining - lead
                if self._woken(select.select(on, (), (), sleep_ns / 1e9)[0]):
                    return True
                self._track_overshoot(time.monotonic_ns() - now - sleep_ns)
            while time.monotonic_ns() < deadline_ns:
                if self._woken(select.select(on, (), (), 0)[0]):
                    return True
        except InterruptedError:
            pass
        return False

    def _track_overshoot(self, over_ns: int) -> None:
        # Stochastic quantile tracking: up by 0.9 step when above, down by 0.1
        # step when below, settles where 90 % of overshoots are below it.
        lead = self.wake_lead_ns
        lead += _LEAD_STEP_UP_NS if over_ns > lead else -_LEAD_STEP_DOWN_NS
        self.wake_lead_ns = min(max(lead, 0), MAX_WAKE_LEAD_NS)

    def close(self) -> None:
        for s in (*self._tx.values(), *self._tx_prio.values()):
            s.close()
        self._tx.clear()
        self._tx_prio.clear()
        self._refs.clear()
        self._rx.close()
        self._port_holder.close()


def _set_timer_slack(ns: int) -> None:
    try:
        import ctypes
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(29, ctypes.c_ulong(ns), 0, 0, 0)      # PR_SET_TIMERSLACK
    except (OSError, AttributeError):
        pass
