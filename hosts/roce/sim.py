"""A deterministic in-process wire between engines, for tests and what-if runs.

All attached engines share the wire's fake clock. Impairments are drawn from a
seeded RNG (loss, duplication, reordering, CE marking, corruption) or decided
per packet by ``hook`` (sees the decoded packet; returns None or one of "drop",
"dup", "ce", "corrupt", an int: extra delay in ns, or a list of extra
delays: one copy delivered after each).

Receivers get whole IPv4 packets, as from the udp provider's raw socket: the
header is the one Linux puts on the udp provider's datagrams (identification 0,
DF, TTL 64) with the ECN bits the wire decided.
"""

from __future__ import annotations

import heapq
import itertools
import random
import socket
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from ground.wire.ipv4 import FLAG_DF, IPV4, IPV4_HLEN
from ground.wire.udp import UDP, UDP_HLEN
from hosts.roce import wire
from hosts.roce.constants import ECN_CE, ECN_MASK, ECN_NOT_ECT, IP_PROTO_UDP

_ipv4_pack = IPV4.pack
_udp_pack = UDP.pack
_ipv4_unpack = IPV4.unpack
_udp_unpack = UDP.unpack


def ipv4_udp_packet(src_ip: str, sport: int, dst_ip: str, dport: int, ecn: int,
                    payload: bytes, ident: int = 0) -> bytes:
    """The IPv4/UDP packet Linux sends for ``payload`` from an unconnected UDP
    socket with DF (identification 0 unless given; header checksum left 0)."""
    n = UDP_HLEN + len(payload)
    return (_ipv4_pack(ecn=ecn & ECN_MASK, total_length=IPV4_HLEN + n, ident=ident,
                       flags=FLAG_DF, src=socket.inet_aton(src_ip),
                       dst=socket.inet_aton(dst_ip))
            + _udp_pack(sport, dport, n, 0) + payload)


class SimStall(RuntimeError):
    """Nothing is scheduled and the stop condition is not met."""


@dataclass(frozen=True)
class SimRecord:
    """One datagram as it was put on the wire (before impairments)."""

    time_ns: int
    src_ip: str
    sport: int
    dst_ip: str
    dport: int
    ecn: int
    data: bytes


class SimWire:
    def __init__(self, *, latency_ns: int = 10_000, seed: int = 1, loss: float = 0.0,
                 dup: float = 0.0, reorder: float = 0.0, reorder_delay_ns: int = 50_000,
                 ce: float = 0.0, corrupt: float = 0.0, start_ns: int = 1_000_000_000,
                 record: bool = False) -> None:
        self.clock = start_ns
        self.latency_ns = latency_ns
        self.loss, self.dup, self.reorder, self.ce, self.corrupt = loss, dup, reorder, ce, corrupt
        self.reorder_delay_ns = reorder_delay_ns
        self.rng = random.Random(seed)
        self.hook: Callable[[wire.Packet, str, str], object] | None = None
        self.records: list[SimRecord] | None = [] if record else None
        self.counters = dict.fromkeys(("sent", "delivered", "dropped", "duplicated",
                                       "reordered", "ce_marked", "corrupted"), 0)
        self._providers: dict[str, SimProvider] = {}
        # other nodes (an in-process switch): ip -> handler(IPv4 packet), called
        # when a packet to ip is delivered
        self._nodes: dict[str, Callable[..., None]] = {}
        self._engines: list = []
        self._heap: list[tuple[int, int, str, bytes]] = []
        self._seq = itertools.count()

    def provider(self, ip: str) -> SimProvider:
        if ip in self._providers or ip in self._nodes:
            raise ValueError(f"{ip} already attached")
        p = SimProvider(self, ip)
        self._providers[ip] = p
        return p

    def attach(self, ip: str, handler: Callable[[bytes], None]) -> None:
        """Deliver packets for ``ip`` to ``handler(ipv4_packet)`` (a node that is not
        an engine, e.g. a switch answering at ``ip``)."""
        if ip in self._providers or ip in self._nodes:
            raise ValueError(f"{ip} already attached")
        self._nodes[ip] = handler

    def inject(self, ip_packet: bytes) -> None:
        """Put an IPv4/UDP packet (20-byte header) on the wire as its source sent it;
        impairments apply. The identification is kept, flags are DF, TTL 64."""
        b = bytes(ip_packet)
        if len(b) < IPV4_HLEN + UDP_HLEN:
            raise ValueError("inject needs an IPv4/UDP packet without IP options")
        (version, ihl, _dscp, ecn, _len, ident, _flags, _frag, _ttl, proto, _csum, src,
         dst) = _ipv4_unpack(b)
        if (version, ihl, proto) != (4, 5, IP_PROTO_UDP):
            raise ValueError("inject needs an IPv4/UDP packet without IP options")
        sport, dport, _ulen, _ucsum = _udp_unpack(b, IPV4_HLEN)
        self._send(socket.inet_ntoa(src), sport, socket.inet_ntoa(dst), dport,
                   b[IPV4_HLEN + UDP_HLEN:], ecn, ident=ident)

    # -- transmission ----------------------------------------------------------
    def _send(self, src_ip: str, sport: int, dst_ip: str, dport: int, data: bytes,
              ecn: int, ident: int = 0) -> None:
        c = self.counters
        c["sent"] += 1
        if self.records is not None:
            self.records.append(SimRecord(self.clock, src_ip, sport, dst_ip, dport, ecn, data))
        rng = self.rng
        delay = self.latency_ns
        copies = 1
        action = None
        if self.hook is not None:
            try:
                action = self.hook(wire.decode(data), src_ip, dst_ip)
            except wire.WireError:
                action = None
        if action == "drop" or (self.loss and rng.random() < self.loss):
            c["dropped"] += 1
            return
        if action == "dup" or (self.dup and rng.random() < self.dup):
            c["duplicated"] += 1
            copies = 2
        if action == "ce" or (self.ce and ecn != ECN_NOT_ECT and rng.random() < self.ce):
            c["ce_marked"] += 1
            ecn = ECN_CE
        if action == "corrupt" or (self.corrupt and rng.random() < self.corrupt):
            c["corrupted"] += 1
            b = bytearray(data)
            b[len(b) // 2] ^= 0x5A
            data = bytes(b)
        if isinstance(action, int) and not isinstance(action, bool):
            delay += action
        elif self.reorder and rng.random() < self.reorder:
            c["reordered"] += 1
            delay += self.reorder_delay_ns
        extra = list(range(copies))
        if isinstance(action, (list, tuple)):     # one copy per extra delay given
            extra = list(action)
            c["duplicated"] += len(extra) - 1
        pkt = ipv4_udp_packet(src_ip, sport, dst_ip, dport, ecn, data, ident)
        for d in extra:
            heapq.heappush(self._heap, (self.clock + delay + d, next(self._seq), dst_ip, pkt))

    def _deliver_due(self) -> None:
        h = self._heap
        while h and h[0][0] <= self.clock:
            _, _, dst, pkt = heapq.heappop(h)
            p = self._providers.get(dst)
            if p is None and dst in self._nodes:
                self.counters["delivered"] += 1
                self._nodes[dst](pkt)
            elif p is None:
                self.counters["dropped"] += 1
            else:
                self.counters["delivered"] += 1
                p._inbox.append(pkt)

    def write_pcap(self, path: str) -> int:
        """Write the recorded datagrams as Ethernet/IPv4/UDP frames (timestamps from the
        simulated clock); returns the number of frames."""
        from scapy.layers.inet import IP, UDP
        from scapy.layers.l2 import Ether
        from scapy.packet import Raw
        from scapy.utils import wrpcap

        if self.records is None:
            raise ValueError("the wire was created with record=False")
        frames = []
        for r in self.records:
            f = (Ether() / IP(src=r.src_ip, dst=r.dst_ip, tos=r.ecn, id=0, flags="DF")
                 / UDP(sport=r.sport, dport=r.dport) / Raw(r.data))
            f.time = r.time_ns / 1e9
            frames.append(f)
        wrpcap(path, frames)
        return len(frames)

    # -- time ------------------------------------------------------------------
    def _next_event(self) -> int | None:
        t = self._heap[0][0] if self._heap else None
        for e in self._engines:
            d = e.next_deadline()
            if d is not None and (t is None or d < t):
                t = d
        return t

    def _advance(self, deadline: int | None) -> None:
        t = self._next_event()
        if deadline is not None and (t is None or deadline < t):
            t = deadline
        if t is None:
            raise SimStall("simulated wire has nothing scheduled")
        if t > self.clock:
            self.clock = t
        self._deliver_due()
        for e in self._engines:
            e.progress()

    def run(self, until: Callable[[], bool] | None = None, timeout: float = 10.0) -> bool:
        """Advance simulated time until ``until()`` holds (True) or ``timeout`` simulated
        seconds pass (False)."""
        end = self.clock + int(timeout * 1e9)
        same = 0
        while True:
            self._deliver_due()
            for e in self._engines:
                e.progress()
            if until is not None and until():
                return True
            t = self._next_event()
            if t is None or t > end:
                self.clock = max(self.clock, end)
                return False
            if t > self.clock:
                self.clock = t
                same = 0
            else:
                same += 1
                if same > 10_000:   # something keeps asking to run now: let time move
                    self.clock += 1_000
                    same = 0


class SimProvider:
    """The simulated wire as seen by one host (one IP address)."""

    def __init__(self, wire_: SimWire, local_ip: str) -> None:
        self.wire = wire_
        self.local_ip = local_ip
        self._inbox: deque = deque()
        self.ports: dict[int, int] = {}

    def bind_engine(self, engine) -> None:
        self.wire._engines.append(engine)

    def now_ns(self) -> int:
        return self.wire.clock

    def open_port(self, sport: int) -> None:
        self.ports[sport] = self.ports.get(sport, 0) + 1

    def close_port(self, sport: int) -> None:
        n = self.ports.get(sport, 0) - 1
        if n <= 0:
            self.ports.pop(sport, None)
        else:
            self.ports[sport] = n

    def send(self, sport: int, dst_ip: str, dst_port: int,
             parts: Sequence[bytes | memoryview], ecn: int, dscp: int = 0,
             priority: int = 0) -> bool:
        # The simulated wire has no switch queues and no qdisc: the DSCP and
        # the priority have nothing to select.
        self.wire._send(self.local_ip, sport, dst_ip, dst_port, b"".join(parts), ecn)
        return True

    def recv(self, max_pkts: int) -> list:
        self.wire._deliver_due()
        q = self._inbox
        return [q.popleft() for _ in range(min(max_pkts, len(q)))]

    def wait(self, deadline_ns: int | None, exact: bool = True) -> None:
        self.wire._advance(deadline_ns)

    def close(self) -> None:
        self._inbox.clear()
