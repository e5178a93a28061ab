"""A RoCE host on the simulated clock: its NIC and the driver of its agent.

- ``SimNic`` is the host's packet provider (hosts.roce.provider.Provider),
  what the udp provider is in a Mininet host: the QPs' datagrams leave as the
  Ethernet/IPv4/UDP frames Linux would send (identification 0, DF, TTL 64, a
  valid header checksum, no UDP checksum) on the host's line at the NIC's rate;
  frames from the switch become IPv4 packets in its receive queue.
- ``SimHost`` drives one hosts.agent.agent.Agent: it polls the agent when the time
  the agent asked for comes or a datagram arrives, as the agent's own loop
  does after each wait in a Mininet host.
- ``MemoryDoneBarrier``: the phase's done barrier, shared in memory.
"""

from __future__ import annotations

import socket
from collections import deque
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from ground.wire.ethernet import (
    ETH_HLEN,
    ETHERNET,
    ETHERTYPE_IPV4,
    ETHERTYPE_MAC_CONTROL,
    mac_bytes,
)
from ground.wire.ipv4 import FLAG_DF, IP_PROTO_UDP, IPV4, IPV4_HLEN, with_checksum
from ground.wire.layout import Header
from ground.wire.udp import UDP, UDP_HLEN
from hosts.roce.constants import ECN_ECT0, ECN_MASK, ROCE_UDP_PORT
from testbed.sim.link import TxLine
from testbed.sim.loop import EventLoop, SimError

if TYPE_CHECKING:
    from hosts.agent import Agent

__all__ = ["SimNic", "SimHost", "SimPauseSocket", "MemoryDoneBarrier"]


def _at(base: int, header: Header, name: str) -> slice:
    """Where a whole-word field of ``header`` (at ``base`` in a frame) is."""
    p = header.position(name)
    return slice(base + p.offset, base + p.offset + p.size)


# what deliver looks at, as slices and indexes of a frame (from the declarations)
_TYPE = _at(0, ETHERNET, "ethertype")
_ETH_IPV4 = ETHERTYPE_IPV4.to_bytes(2, "big")
_ETH_MAC_CONTROL = ETHERTYPE_MAC_CONTROL.to_bytes(2, "big")      # PFC pause frames
_PROTO = ETH_HLEN + IPV4.offset("proto")
_DST_IP = _at(ETH_HLEN, IPV4, "dst")
_DPORT = _at(ETH_HLEN + IPV4_HLEN, UDP, "dport")
# polls of one host at one instant before the run counts as a livelock
MAX_POLLS_PER_INSTANT = 10_000


class SimNic:
    """The provider of a simulated host (hosts.roce.provider.Provider)."""

    simulated = True          # no JIT warm-up, nothing to be late for
    receive_lag = None        # the kernel's receive lag: none here

    def __init__(self, loop: EventLoop, ip: str, mac: str, gateway_mac: str,
                 data_ecn: int = ECN_ECT0) -> None:
        self.loop = loop
        self.local_ip = ip
        self.port = ROCE_UDP_PORT
        self.data_ecn = data_ecn
        self._ip_b = socket.inet_aton(ip)
        self._eth = ETHERNET.pack(mac_bytes(gateway_mac), mac_bytes(mac), ETHERTYPE_IPV4)
        self.line: TxLine | None = None
        self._pause: SimPauseSocket | None = None
        self._inbox: deque[bytes] = deque()
        self._ports: dict[int, int] = {}
        self._hdr_cache: dict[tuple[int, str, int, int, int], bytes] = {}
        self.on_receive: Callable[[], None] | None = None   # the host driver's wake-up
        self.counters = dict.fromkeys(("tx_frames", "rx_frames", "rx_not_for_me",
                                       "rx_no_agent"), 0)

    def now_ns(self) -> int:
        return self.loop.now

    def open_port(self, sport: int) -> None:
        self._ports[sport] = self._ports.get(sport, 0) + 1

    def close_port(self, sport: int) -> None:
        n = self._ports.get(sport, 0) - 1
        if n <= 0:
            self._ports.pop(sport, None)
        else:
            self._ports[sport] = n

    def _header(self, sport: int, dst_ip: str, dst_port: int, tos: int, n: int) -> bytes:
        key = (sport, dst_ip, dst_port, tos, n)
        h = self._hdr_cache.get(key)
        if h is None:
            ip = IPV4.pack(dscp=tos >> 2, ecn=tos & ECN_MASK,
                           total_length=IPV4_HLEN + UDP_HLEN + n, flags=FLAG_DF,
                           proto=IP_PROTO_UDP, src=self._ip_b, dst=socket.inet_aton(dst_ip))
            h = self._eth + with_checksum(ip) + UDP.pack(sport, dst_port, UDP_HLEN + n, 0)
            if len(self._hdr_cache) > 4096:
                self._hdr_cache.clear()
            self._hdr_cache[key] = h
        return h

    def send(self, sport: int, dst_ip: str, dst_port: int,
             parts: Sequence[bytes | memoryview], ecn: int, dscp: int = 0,
             priority: int = 0) -> bool:
        # ``priority`` picks a QP's HTB class on a shaped Mininet host; a
        # simulated NIC sends in order at its rate, its QPs paced by DCQCN.
        if self.line is None:
            raise SimError(f"host {self.local_ip}: its NIC has no link")
        if ecn == ECN_ECT0:
            ecn = self.data_ecn
        n = 0
        for part in parts:
            n += len(part)
        tos = ((dscp & 0x3F) << 2) | (ecn & ECN_MASK)
        self.counters["tx_frames"] += 1
        # one copy: headers and parts joined at once
        self.line.send(b"".join((self._header(sport, dst_ip, dst_port, tos, n), *parts)))
        return True

    def deliver(self, frame: bytes) -> None:
        """A frame from the host's link."""
        self.counters["rx_frames"] += 1
        if frame[_TYPE] == _ETH_MAC_CONTROL:
            if self._pause is None or self.on_receive is None:
                self.counters["rx_not_for_me"] += 1     # the host obeys no PFC
                return
            self._pause.frames.append(frame)
            self.on_receive()                  # a pause frame wakes the agent at once
            return
        # IPv4 to this address and the RoCE port (what the udp provider's
        # socket filter lets through)
        if (frame[_TYPE] != _ETH_IPV4 or frame[_DST_IP] != self._ip_b
                or frame[_PROTO] != IP_PROTO_UDP or int.from_bytes(frame[_DPORT], "big") != self.port):
            self.counters["rx_not_for_me"] += 1
            return
        if self.on_receive is None:
            self.counters["rx_no_agent"] += 1   # between phases: nobody listens
            return
        self._inbox.append(frame[ETH_HLEN:])
        self.on_receive()

    def pending(self) -> bool:
        return bool(self._inbox)

    def recv(self, max_pkts: int) -> list[bytes]:
        q = self._inbox
        if len(q) <= max_pkts:
            out = list(q)
            q.clear()
            return out
        return [q.popleft() for _ in range(max_pkts)]

    def wait(self, deadline_ns: int | None, exact: bool = True) -> None:
        raise SimError("a simulated host never blocks: its driver polls it")

    def pause_socket(self) -> SimPauseSocket:
        """Where the NIC puts the PFC frames it receives, for hosts.roce.pfc.HostPause
        (in place of its AF_PACKET socket)."""
        if self._pause is None:
            self._pause = SimPauseSocket()
        return self._pause

    def watch(self, source: Any) -> None:
        # (the host's pause frames already wake its driver: deliver)
        pass

    def close(self) -> None:
        self._inbox.clear()
        self.on_receive = None
        self._pause = None


class SimPauseSocket:
    """The PFC frames a simulated NIC received, read as from a socket; a frame
    takes effect when read, which on the simulated clock is when it arrived."""

    def __init__(self) -> None:
        self.frames: deque[bytes] = deque()

    def recvmsg(self, _bufsize: int, _ancbufsize: int = 0
                ) -> tuple[bytes, list[tuple[int, int, bytes]], int, None]:
        if not self.frames:
            raise BlockingIOError
        return self.frames.popleft(), [], 0, None

    def setblocking(self, _flag: bool) -> None:
        pass

    def setsockopt(self, *_args: int | bytes) -> None:
        raise OSError("no receive timestamps: the frame's time is the simulated clock's")

    def fileno(self) -> int:
        return -1

    def close(self) -> None:
        self.frames.clear()


class MemoryDoneBarrier:
    """The phase's done barrier (hosts.agent.agent.DoneBarrier), one per agent."""

    def __init__(self, shared: set[int], rank: int, size: int) -> None:
        self.shared, self.rank, self.size = shared, rank, size
        self.arrived = False

    def arrive(self) -> None:
        self.shared.add(self.rank)
        self.arrived = True

    def complete(self) -> bool:
        return len(self.shared) == self.size


class SimHost:
    """Polls one agent on the simulated clock. ``on_finished(host)`` once the
    agent's ``poll`` says the phase is over for it (after ``finish``);
    ``on_error(host, exception)`` if it raised. Exceptions of the
    ``passthrough`` types (the runner's SIGTERM, say) are not the agent's
    failure: they end the run."""

    def __init__(self, name: str, loop: EventLoop, nic: SimNic, agent: Agent,
                 on_finished: Callable[[SimHost], None],
                 on_error: Callable[[SimHost, BaseException], None],
                 passthrough: tuple[type[BaseException], ...] = ()) -> None:
        self.name = name
        self.loop = loop
        self.nic = nic
        self.agent = agent
        self.on_finished = on_finished
        self.on_error = on_error
        self.passthrough = passthrough
        self.finished = False
        self.polls = 0
        self._poll_at: int | None = None
        self._same_instant = 0
        self._last_poll_ns = -1
        nic.on_receive = self._datagram

    def begin(self, t0: int, barrier: MemoryDoneBarrier) -> None:
        """Schedule the agent's start at ``t0``."""
        def start(_: None) -> None:
            try:
                self.agent.begin(t0, barrier)
            except self.passthrough:
                raise
            except Exception as e:
                self._fail(e)
                return
            self._poll(t0)
        self.loop.at(t0, start)

    def _datagram(self) -> None:
        now = self.loop.now
        if self.finished or self.agent._done_barrier is None:
            return              # before the start the engine reads its queue then
        if self._poll_at is None or self._poll_at > now:
            self._poll_at = now
            self.loop.at(now, self._poll, now)

    def _poll(self, t: int) -> None:
        if self.finished or (self._poll_at is not None and t != self._poll_at):
            return              # a stale wake-up: an earlier one replaced it
        self._poll_at = None
        now = self.loop.now
        if now == self._last_poll_ns:
            self._same_instant += 1
            if self._same_instant > MAX_POLLS_PER_INSTANT:
                self._fail(SimError(f"host {self.name}: its agent asked to run again at the "
                                    f"same instant {MAX_POLLS_PER_INSTANT} times ({now} ns)"))
                return
        else:
            self._same_instant = 0
            self._last_poll_ns = now
        self.polls += 1
        try:
            wake = self.agent.poll()
            if wake is None:
                self.finished = True
                self.agent.finish()
                self.nic.on_receive = None
                self.on_finished(self)
                return
        except self.passthrough:
            raise
        except Exception as e:
            self._fail(e)
            return
        if wake < now:
            wake = now
        if self._poll_at is None or wake < self._poll_at:
            self._poll_at = wake
            self.loop.at(wake, self._poll, wake)

    def _fail(self, e: BaseException) -> None:
        self.finished = True
        self.nic.on_receive = None
        self.on_error(self, e)
