"""Traffic manager: egress queues per (port, priority), BMv2 semantics plus
two named extensions.

BMv2 behaviour reproduced:
- one FIFO per (egress port, priority); depth limit in packets (default 64),
  a full queue tail-drops; ``set_queue_depth`` / ``set_queue_rate`` apply to
  every queue, to all priorities of a port, or to one (port, priority);
  settings without a port also become the default for queues created later;
- rate limit in packets per second per queue (0 = unlimited, the default):
  a queue releases packet i no earlier than its arrival and no earlier than
  ``1/rate`` after the *scheduled* release of packet i-1, so a late I/O loop
  catches up instead of losing rate;
- with several priorities, strict priority: the highest-numbered queue whose
  head may leave goes first (a rate-limited head lets lower ones pass);
- ``enq_qdepth`` is the queue's length just before the packet joined it,
  ``deq_qdepth`` its length just after the packet left.

Soft-target extensions (not in BMv2):
- ``set_port_rate_bps``: a per-port line rate in bits/s; each packet keeps
  the port busy for ``length*8/rate`` seconds (serialization pacing, with the
  length the packet had when queued), and no packet of that port leaves
  while it is busy;
- ``set_priority_weights``: deficit round robin among the priorities of a
  port with the given weights (quantum = weight x 1500 bytes per round),
  instead of strict priority;
- ``set_port_delay_us``: a per-port propagation delay: a packet that leaves
  its queue (at its scheduled release) is handed over ``delay`` later. It
  waits in a delay line behind the queue, so it no longer counts in the
  queue's depth (``enq_qdepth``, the depth limit): a link holds packets in
  flight, a buffer does not.
- ``set_pfc``: priority flow control (runtime/pfc.py). Packets are counted
  per (ingress port, priority) while they wait in any egress queue; at
  ``xoff`` the TM asks for a pause of that priority on the ingress port, at
  ``xon`` for its end (``pfc_out``: (port, priority, quanta) for the caller
  to send as PFC frames). ``pause`` is the other direction: a PFC frame that
  arrived on a port holds that port's queues of the paused priorities until
  the timer runs out (quanta of 512 bit times at the port's rate) or an XON
  comes. A full queue still tail-drops: thresholds that leave too little
  headroom for what is in flight lose packets, as on a switch.

Time is whatever ``now_us()`` returns (microseconds); it is injected so
tests can drive a fake clock. An integer clock (the daemon's) keeps every
time an integer; a float one (the virtual-time engine's, in ns / 1000) keeps
the queues' schedule to the nanosecond. What egress sees (QueueMeta's
times) is whole microseconds either way, as in BMv2.

While no rate, port rate or weight is set anywhere, every head may leave at
once: ``pop_ready`` then takes a short path with the same result, and
``pass_through`` lets a caller that runs egress right away skip the queue
entirely when nothing is queued (the packet would be next out anyway).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from ground.wire.pause import pause_us
from switches.soft.runtime.pfc import PfcIngress

DEFAULT_DEPTH = 64
DRR_QUANTUM_BYTES = 1500


class QueueMeta(NamedTuple):
    """What egress sees about the queue a packet went through."""

    enq_timestamp: int  # now_us() at enqueue
    enq_qdepth: int
    deq_qdepth: int
    deq_timedelta: int
    qid: int
    deq_us: int = 0  # now_us() at dequeue


_new_tuple = tuple.__new__  # QueueMeta without the Python-level constructor


# A queued packet is a tuple (obj, length, enq_us, enq_qdepth, seq, ingress):
# cheaper to make than an object, and one is made per packet.
_OBJ, _LEN, _ENQ_US, _ENQ_QDEPTH, _SEQ, _INGRESS = range(6)
_NEVER = float("-inf")


@dataclass
class _Queue:
    capacity: int
    rate_pps: int = 0
    items: deque = field(default_factory=deque)
    last_sched: float | None = None  # scheduled release time of the previous packet
    deficit: int = 0
    drops: int = 0
    enqueued: int = 0
    dequeued: int = 0

    def head_eligible(self, port_free: float) -> float:
        head = self.items[0]
        t = float(head[_ENQ_US])
        if self.rate_pps > 0 and self.last_sched is not None:
            t = max(t, self.last_sched + 1e6 / self.rate_pps)
        return max(t, port_free)


@dataclass
class _Port:
    queues: list[_Queue]
    rate_bps: int = 0
    free_at: float = float("-inf")
    weights: list[int] | None = None
    drr_index: int = 0
    drr_fresh: bool = True  # the current DRR queue has not had its quantum this turn
    count: int = 0
    delay_us: int = 0
    # packets in flight on the link: (release time, prio, obj, meta), in order
    line: deque = field(default_factory=deque)
    # per priority: held by a PFC pause from the next hop until then (us)
    paused_until: list[float] = field(default_factory=list)
    pauses_rx: int = 0


class TrafficManager:
    def __init__(self, priority_queues: int = 1, now_us: Callable[[], float] | None = None,
                 default_depth: int = DEFAULT_DEPTH) -> None:
        if priority_queues < 1 or priority_queues > 8:
            raise ValueError("priority_queues must be between 1 and 8")
        self.nq = priority_queues
        self.now_us: Callable[[], float] = now_us or (lambda: 0)
        self.default_depth = default_depth
        self.default_rate = 0
        self.default_port_bps = 0
        self.default_delay_us = 0
        self.in_flight = 0  # packets in the ports' delay lines (counted in total)
        self.ports: dict[int, _Port] = {}
        self._seq = 0
        self.total = 0
        self._busy: dict[int, _Port] = {}  # ports with queued packets
        # Ports whose next release may have moved since the caller last
        # looked (a packet queued, a pause frame): for a caller that releases
        # port by port (pop_port), as the virtual-time engine does.
        self.touched: set[int] = set()
        self.pfc: PfcIngress | None = None
        self.pfc_out: list[tuple[int, int, int]] = []  # (port, priority, quanta) to send
        # No rate, port rate or weights anywhere: every queued head may leave
        # at once, so pop_ready takes the short path (pop_unpaced; read-only outside).
        self.unpaced = True

    def _update_unpaced(self) -> None:
        self.unpaced = (self.default_rate == 0 and self.default_port_bps == 0
                        and self.default_delay_us == 0 and self.pfc is None and all(
            p.rate_bps == 0 and p.weights is None and p.delay_us == 0
            and all(q.rate_pps == 0 for q in p.queues) for p in self.ports.values()))

    # -- configuration ----------------------------------------------------------
    def _port(self, port: int) -> _Port:
        p = self.ports.get(port)
        if p is None:
            p = _Port([_Queue(self.default_depth, self.default_rate) for _ in range(self.nq)],
                      rate_bps=self.default_port_bps, delay_us=self.default_delay_us,
                      paused_until=[_NEVER] * self.nq)
            self.ports[port] = p
            if not self.unpaced:
                self._update_unpaced()
        return p

    def _check_prio(self, prio: int) -> None:
        if not 0 <= prio < self.nq:
            raise ValueError(f"priority {prio} out of range (the switch has {self.nq} "
                             "priority queue(s) per port)")

    def _queues(self, port: int | None, prio: int | None) -> list[_Queue]:
        """The queues a setting addresses: every queue (no port), a port's, or one."""
        if port is None:
            return [q for p in self.ports.values() for q in p.queues]
        if prio is None:
            return list(self._port(port).queues)
        self._check_prio(prio)
        return [self._port(port).queues[prio]]

    def set_depth(self, depth: int, port: int | None = None, prio: int | None = None) -> None:
        if depth < 0:
            raise ValueError("queue depth must be >= 0")
        if port is None:
            self.default_depth = depth
        for q in self._queues(port, prio):
            q.capacity = depth

    def set_rate(self, pps: int, port: int | None = None, prio: int | None = None) -> None:
        if pps < 0:
            raise ValueError("queue rate must be >= 0")
        if port is None:
            self.default_rate = pps
        for q in self._queues(port, prio):
            q.rate_pps = pps
        self._update_unpaced()

    def set_port_rate_bps(self, bps: int, port: int | None = None) -> None:
        if bps < 0:
            raise ValueError("port rate must be >= 0")
        if port is None:
            self.default_port_bps = bps
            for p in self.ports.values():
                p.rate_bps = bps
        else:
            self._port(port).rate_bps = bps
        self._update_unpaced()

    def set_port_delay_us(self, us: int, port: int | None = None) -> None:
        """Propagation delay of a port's link (all ports without ``port``)."""
        if us < 0:
            raise ValueError("port delay must be >= 0")
        if port is None:
            self.default_delay_us = us
            for p in self.ports.values():
                p.delay_us = us
        else:
            self._port(port).delay_us = us
        self._update_unpaced()

    def set_pfc(self, xoff: int | None, xon: int = 0) -> None:
        """Priority flow control with these thresholds (packets held per
        ingress port and priority); ``xoff`` None turns it off. Only while
        nothing is queued: the counts start from empty queues."""
        if self.total:
            raise ValueError("set_pfc needs empty queues (the held counts start at zero)")
        self.pfc = None if xoff is None else PfcIngress(xoff, xon)
        if self.pfc is None:
            for p in self.ports.values():
                p.paused_until = [_NEVER] * self.nq
        self._update_unpaced()

    def _line_bps(self, port: int) -> int:
        p = self.ports.get(port)
        return p.rate_bps if p is not None and p.rate_bps > 0 else self.default_port_bps

    def pause(self, port: int, quanta: dict[int, int]) -> None:
        """A PFC frame arrived on ``port``: hold its queues of the priorities
        in ``quanta`` (priority -> timer; 0 ends a pause) from now on.
        Priorities the switch has no queue for are ignored. Without a port
        rate a timer has no length: a pause then lasts until its XON."""
        p = self.ports.get(port) or self._port(port)
        p.pauses_rx += 1
        self.touched.add(port)
        now = float(self.now_us())
        bps = self._line_bps(port)
        for prio, q in quanta.items():
            if prio < self.nq:
                p.paused_until[prio] = (_NEVER if q == 0 else
                                        now + pause_us(q, bps) if bps > 0 else float("inf"))

    def set_priority_weights(self, port: int, weights: list[int] | None) -> None:
        p = self._port(port)
        if weights is None:
            p.weights = None
            self._update_unpaced()
            return
        if len(weights) != self.nq:
            raise ValueError(f"expected {self.nq} weights (one per priority), got {len(weights)}")
        if any(w < 1 for w in weights):
            raise ValueError("weights must be positive integers")
        p.weights = [int(w) for w in weights]
        p.drr_index = self.nq - 1
        p.drr_fresh = True
        for q in p.queues:
            q.deficit = 0
        self._update_unpaced()

    # -- data path ----------------------------------------------------------------
    def depth(self, port: int, prio: int = 0) -> int:
        p = self.ports.get(port)
        return len(p.queues[prio].items) if p is not None else 0

    def enqueue(self, port: int, prio: int, obj: Any, length: int, ingress: int = -1) -> bool:
        """Queue ``obj`` (from ``ingress``, the port it came in on, for PFC;
        -1 for none); False if the queue is full (tail drop)."""
        if not 0 <= prio < self.nq:
            self._check_prio(prio)
        p = self.ports.get(port) or self._port(port)
        q = p.queues[prio]
        n = len(q.items)
        if n >= q.capacity:
            q.drops += 1
            return False
        self._seq += 1
        now = self.now_us()
        q.items.append((obj, length, now, n, self._seq, ingress))
        if self.pfc is not None and ingress >= 0:
            quanta = self.pfc.held_one(ingress, prio, now, self._line_bps(ingress))
            if quanta is not None:
                self.pfc_out.append((ingress, prio, quanta))
        q.enqueued += 1
        if not p.count:
            self._busy[port] = p
        p.count += 1
        self.total += 1
        self.touched.add(port)
        return True

    def pass_through(self, port: int, prio: int) -> QueueMeta | None:
        """A packet that enters queue (port, prio) and leaves it at once, for a
        caller that runs egress right away: possible when nothing is queued
        anywhere and no rate or weight is set (it would be next out of
        pop_ready). Counts it in the queue's statistics and returns its
        metadata (depths and time in the queue 0); None if the packet must be
        enqueued normally."""
        if not self.unpaced or self.total or not 0 <= prio < self.nq:
            return None
        p = self.ports.get(port) or self._port(port)
        q = p.queues[prio]
        if q.capacity <= 0 or not self.unpaced:
            return None
        now = self.now_us()  # enqueued and dequeued at once
        q.enqueued += 1
        q.dequeued += 1
        q.last_sched = now
        us = int(now)
        return _new_tuple(QueueMeta, (us, 0, 0, 0, prio, us))

    def _select(self, p: _Port, now: float) -> tuple[int, float] | None:
        """The priority to serve on port ``p`` at ``now`` and the head's
        scheduled time, or None."""
        if p.count == 0:
            return None
        free = p.free_at if p.rate_bps > 0 else float("-inf")
        paused = p.paused_until
        if p.weights is None:
            for prio in range(self.nq - 1, -1, -1):
                q = p.queues[prio]
                if q.items:
                    t = q.head_eligible(free)
                    if paused[prio] > t:
                        t = paused[prio]
                    if t <= now:
                        return prio, t
            return None
        # deficit round robin among eligible queues
        elig = {}
        for prio, q in enumerate(p.queues):
            if not q.items:
                q.deficit = 0
            else:
                t = max(q.head_eligible(free), paused[prio])
                if t <= now:
                    elig[prio] = t
        if not elig:
            return None
        while True:
            prio = p.drr_index
            q = p.queues[prio]
            if prio in elig:
                if p.drr_fresh:
                    q.deficit += p.weights[prio] * DRR_QUANTUM_BYTES
                    p.drr_fresh = False
                if q.items[0][_LEN] <= q.deficit:
                    return prio, elig[prio]
            p.drr_index = (prio - 1) % self.nq  # next turn, highest first
            p.drr_fresh = True

    def _pop(self, port: int, p: _Port, prio: int, sched: float, now: float) -> tuple:
        q = p.queues[prio]
        it = q.items.popleft()
        q.dequeued += 1
        p.count -= 1
        if not p.count:
            del self._busy[port]
        self.total -= 1
        q.last_sched = sched
        if self.pfc is not None and it[_INGRESS] >= 0:
            quanta = self.pfc.released_one(it[_INGRESS], prio)
            if quanta is not None:
                self.pfc_out.append((it[_INGRESS], prio, quanta))
        if p.weights is not None:
            q.deficit -= it[_LEN]
            if not q.items:
                q.deficit = 0
        if p.rate_bps > 0:
            p.free_at = max(sched, p.free_at) + it[_LEN] * 8e6 / p.rate_bps
        enq_us = it[_ENQ_US]
        # On a rate-limited port or queue, the time in the queue is the
        # modelled one: until its scheduled departure, not until the data path
        # got round to it (which only says how busy the machine was). Without
        # a rate there is no schedule: the time it waited for the data path.
        deq = sched if p.rate_bps > 0 or q.rate_pps > 0 else now
        meta = QueueMeta(enq_timestamp=int(enq_us), enq_qdepth=it[_ENQ_QDEPTH],
                         deq_qdepth=len(q.items), deq_timedelta=max(0, int(deq - enq_us)),
                         qid=prio, deq_us=int(now))
        return port, prio, it[_OBJ], meta

    def pop_ready(self) -> tuple[int, int, Any, QueueMeta] | None:
        """One packet that may leave now: (port, priority, obj, meta), or None.
        Among ports, the earliest-scheduled head goes first."""
        if self.total == 0:
            return None
        if self.unpaced:
            return self.pop_unpaced()
        now = float(self.now_us())
        busy = self._busy
        while True:
            best = None
            for port, p in busy.items():     # (a switch's idle ports: no call)
                sel = self._select(p, now)
                if sel is not None:
                    prio, t = sel
                    key = (t, p.queues[prio].items[0][_SEQ])
                    if best is None or key < best[0]:
                        best = (key, port, p, prio, t)
            if best is None:
                break
            _, port, p, prio, t = best
            item = self._pop(port, p, prio, t, now)
            if not p.delay_us:
                return item
            # onto the link: the queue is free for the next packet already
            p.line.append((t + p.delay_us, item))
            self.in_flight += 1
            self.total += 1
        return self._pop_line(now) if self.in_flight else None

    def pop_port(self, port: int) -> tuple[int, int, Any, QueueMeta] | None:
        """``pop_ready`` for one port: its next packet that may leave now (from
        its queues, through its delay line), or None. For a caller that keeps a
        release time per port instead of asking across every port each time."""
        p = self.ports.get(port)
        if p is None:
            return None
        now = float(self.now_us())
        while p.count:
            sel = self._select(p, now)
            if sel is None:
                break
            prio, t = sel
            item = self._pop(port, p, prio, t, now)
            if not p.delay_us:
                return item
            p.line.append((t + p.delay_us, item))
            self.in_flight += 1
            self.total += 1
        if p.line and p.line[0][0] <= now:
            return self._take_line(p)
        return None

    def port_next_release(self, port: int) -> float | None:
        """When ``port`` may next release a packet (may be <= now), on the
        clock's own scale; None if it holds none (or only queues paused until
        an XON)."""
        p = self.ports.get(port)
        best = None if p is None else self._port_release(p)
        if best is None or best == float("inf"):
            return None
        return float(best)

    @staticmethod
    def _port_release(p: _Port) -> float | None:
        """The earliest time a packet of ``p`` may leave (its delay line's head
        or a queue's head), inf for queues paused until an XON, None if empty."""
        best = p.line[0][0] if p.line else None
        if p.count:
            free = p.free_at if p.rate_bps > 0 else float("-inf")
            for prio, q in enumerate(p.queues):
                if q.items:
                    t = max(q.head_eligible(free), p.paused_until[prio])
                    if best is None or t < best:
                        best = t
        return best

    def _take_line(self, p: _Port) -> tuple[int, int, Any, QueueMeta]:
        """The head of ``p``'s delay line, off the link."""
        self.in_flight -= 1
        self.total -= 1
        item: tuple[int, int, Any, QueueMeta] = p.line.popleft()[1]
        return item

    def _pop_line(self, now: float | None) -> tuple[int, int, Any, QueueMeta] | None:
        """The earliest packet whose delay has passed (any, with ``now`` None)."""
        best = None
        for p in self.ports.values():
            if p.line and (now is None or p.line[0][0] <= now):
                if best is None or p.line[0][0] < best.line[0][0]:
                    best = p
        if best is None:
            return None
        return self._take_line(best)

    def pop_unpaced(self) -> tuple[int, int, Any, QueueMeta] | None:
        """pop_ready when no queue or port is rate limited and no weights are
        set: per port the highest non-empty priority, across ports the oldest
        head (by enqueue time, then arrival order)."""
        now = self.now_us()
        busy = self._busy
        if len(busy) == 1 and self.nq == 1:  # the usual case: nothing to choose
            port, p = next(iter(busy.items()))
            prio = 0
            q = p.queues[0]
            if q.items[0][_ENQ_US] > now:
                return None
        else:
            best = None
            bkey = None
            for port, p in busy.items():
                for prio in range(self.nq - 1, -1, -1):
                    items = p.queues[prio].items
                    if items:
                        head = items[0]
                        if head[_ENQ_US] <= now:
                            key = (head[_ENQ_US], head[_SEQ])
                            if bkey is None or key < bkey:
                                bkey = key
                                best = (port, p, prio)
                            break
            if best is None:
                return None
            port, p, prio = best
            q = p.queues[prio]
        obj, _, enq_us, enq_qdepth, _, _ = q.items.popleft()  # (no PFC: unpaced)
        q.dequeued += 1
        p.count -= 1
        if not p.count:
            del busy[port]
        self.total -= 1
        q.last_sched = enq_us
        return port, prio, obj, _new_tuple(QueueMeta, (int(enq_us), enq_qdepth, len(q.items),
                                                       max(0, int(now - enq_us)), prio,
                                                       int(now)))

    def pop_any(self) -> tuple[int, int, Any, QueueMeta] | None:
        """Next packet ignoring rates (strict priority per port; across ports
        the oldest head first). For synchronous test runs."""
        if self.total == 0:
            return None
        if self.in_flight:
            return self._pop_line(None)
        now = float(self.now_us())
        best = None
        for port, p in self.ports.items():
            if p.count == 0:
                continue
            for prio in range(self.nq - 1, -1, -1):
                q = p.queues[prio]
                if q.items:
                    key = q.items[0][_SEQ]
                    if best is None or key < best[0]:
                        best = (key, port, p, prio)
                    break
        if best is None:
            return None
        _, port, p, prio = best
        return self._pop(port, p, prio, now, now)

    def next_release_us(self) -> int | None:
        """Earliest time a queued packet may leave (may be <= now), or None."""
        best = self.next_release()
        return None if best is None else int(-(-best // 1))  # ceil

    def next_release(self) -> float | None:
        """``next_release_us`` on the clock's own scale (not rounded up)."""
        if self.total == 0:
            return None
        best = None
        for p in self.ports.values():
            t = self._port_release(p)
            if t is not None and (best is None or t < best):
                best = t
        if best is None or best == float("inf"):
            return None     # (only queues paused until an XON)
        return float(best)

    def clear(self) -> None:
        for p in self.ports.values():
            for q in p.queues:
                q.items.clear()
            p.count = 0
            p.line.clear()
        if self.pfc is not None:
            self.pfc_out.extend((port, prio, 0) for port, prio in self.pfc.release_all())
        self._busy.clear()
        self.total = 0
        self.in_flight = 0

    def stats(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for port, p in sorted(self.ports.items()):
            out[str(port)] = {
                "rate_bps": p.rate_bps,
                "delay_us": p.delay_us,
                "in_flight": len(p.line),
                "weights": p.weights,
                **({"pauses_rx": p.pauses_rx} if self.pfc is not None else {}),
                "queues": [{"depth": len(q.items), "capacity": q.capacity, "rate_pps": q.rate_pps,
                            "enqueued": q.enqueued, "dequeued": q.dequeued, "drops": q.drops}
                           for q in p.queues],
            }
        return out
