"""The v1model soft switch: BMv2 simple_switch semantics around a compiled program.

API (what the daemon, the control server and the STF runner use)::

    sw = SoftSwitch(program_module, priority_queues=1, now_us=None, log=None,
                    drop_port=511, max_loops=32, seed=None, digest_handler=None,
                    trace=False)
                                      # digest_handler(receiver, type name, values);
                                      # trace: the per-packet debug log (runtime/trace.py;
                                      # full with a module compiled with trace=True)
    sw.receive(port, data)            # ingress (+ resubmit/clone/replication), enqueue in the TM
    sw.dequeue_ready() -> [(port, frame), ...]
                                      # egress for every packet the TM releases now
    sw.next_release_us() -> int|None  # when the TM next has a packet to release
                                      # (same time base as now_us; may be <= now)
    sw.forward(port, data) -> [(port, frame), ...]
                                      # receive() then dequeue_ready() in one call (what a
                                      # data path transmitting after every frame does); an
                                      # idle, unpaced traffic manager is passed through
    sw.forward_at(port, data, arrived_us) -> [(port, frame), ...]
                                      # forward() in modelled time: as if processed at
                                      # the frame's arrival (the kernel's receive
                                      # timestamp), after what would have left before it
    sw.process_sync(port, data) -> [(port, frame), ...]
                                      # STF mode: ingress, then drain the TM ignoring
                                      # rates; outputs in order
    sw.lock                           # threading.Lock; hold it around every call above
                                      # and around control verbs
    sw.stats() -> dict                # JSON-serialisable counters: rx, rx_bytes, tx,
                                      # tx_bytes (per port, keys are strings), drops by
                                      # reason (drop_port, egress_drop_port, tm_full,
                                      # priority_out_of_range, mcast_no_replica,
                                      # loop_limit, exception), events (clone_i2e,
                                      # clone_e2e, clone_no_session, resubmit,
                                      # recirculate, replicas, digests), queued, queues
    sw.digests                        # recent digests: (receiver, type name, values)
    sw.load_program(program_module)   # replace the P4 program at run time (clean state)
    sw.set_port_handler(port, fn)     # frames leaving ``port`` go to fn(frame) instead of
                                      # the output list (a CPU port); fn=None undoes it

``program_module`` has ``INFO`` (contract.ProgramInfo) and
``make_program(rt)``; the switch is the ``rt`` (contract.Services).
``now_us`` returns microseconds on any monotonic base (default
CLOCK_MONOTONIC); global timestamps in standard_metadata count from the
switch's creation.

Pipeline, as BMv2 simple_switch:
parser -> verify checksum -> ingress -> end of ingress: I2E clone (the
packet as it entered ingress, re-parsed; metadata reset except the
preserved field list), digests, resubmit (the original bytes re-enter the
parser with instance_type RESUBMIT and the preserved fields; nothing else
happens to the packet), else mcast_grp != 0 -> one replica per PRE output
(instance_type REPLICATION, egress_rid), else drop if egress_spec is the
drop port, else unicast to egress_spec -> traffic manager (queue =
standard_metadata.priority; a priority with no queue drops the packet) ->
egress (egress_port, queue metadata, egress_spec preset to a non-drop
value) -> end of egress: E2E clone (state at end of egress), drop if
egress_spec is the drop port, compute checksum + deparse, recirculate
(deparsed bytes re-enter the parser with instance_type RECIRC and the
preserved fields), else transmit. As in BMv2, resubmitted and recirculated
packets and clones keep only their preserved fields (so ingress_port is 0
unless preserved). Resubmit/recirculate/clone chains are cut after
``max_loops`` generations (BMv2 has no limit; a runaway loop here is
dropped and counted). An exception in per-packet code is logged, counted
(drop reason ``exception``) and drops only that packet.
"""

from __future__ import annotations

import logging
import random as _random
import threading
import time
from collections import Counter, deque
from collections.abc import Callable
from typing import Any

from ground.wire.pause import PauseFormatError, is_pause, parse_pause, pfc_frame
from switches.soft.runtime.action_profiles import ActionProfile, ActionProfileError
from switches.soft.runtime.contract import (
    ActionProfileInfo,
    CounterRuntime,
    MeterRuntime,
    PacketState,
    ProgramInfo,
    ProgramModule,
    StandardMetadata,
)
from switches.soft.runtime.externs import (
    CounterArray,
    HashEngine,
    MeterArray,
    RegisterArray,
    format_log_msg,
)
from switches.soft.runtime.pre import MirroringSessions, MirrorSession, ReplicationEngine
from switches.soft.runtime.tables import Table
from switches.soft.runtime.tm import QueueMeta, TrafficManager
from switches.soft.runtime.trace import PacketTracer

NORMAL, INGRESS_CLONE, EGRESS_CLONE, COALESCED, RECIRC, REPLICATION, RESUBMIT = range(7)
# The source address of the PFC frames the switch sends (locally administered;
# a PFC receiver does not look at it).
_PFC_SRC_MAC = bytes.fromhex("02000000fc01")

_M32 = (1 << 32) - 1
# what one port may release at once: everything that is due
_NO_LIMIT = 1 << 62
_M48 = (1 << 48) - 1
_M19 = (1 << 19) - 1


class _DirectCounterView:
    """A direct counter is updated by its table; explicit counts are no-ops."""

    def count(self, index: int, packet_length: int) -> None:
        pass


class _DirectMeterView:
    """A direct meter reads the entry its table hit last."""

    def __init__(self, table: Table) -> None:
        self.table = table

    def execute(self, index: int, packet_length: int) -> int:
        return self.table.direct_meter_color(packet_length)


def _monotonic_us() -> int:
    return time.monotonic_ns() // 1000


class SoftSwitch:
    def __init__(self, program_module: ProgramModule, *, priority_queues: int = 1,
                 now_us: Callable[[], float] | None = None,
                 log: logging.Logger | None = None, drop_port: int = 511,
                 max_loops: int = 32, seed: int | None = None,
                 digest_handler: Callable[[int, str, dict[str, int]], None] | None = None,
                 trace: bool = False,
                 ) -> None:
        self.module = program_module
        self.info: ProgramInfo = program_module.INFO
        self._wall = now_us or _monotonic_us
        self._t0 = int(self._wall())
        # Modelled time (see forward_at): the arrival time of the frame being
        # processed, else the clock; never earlier than any time used before.
        self._at: float | None = None
        self._floor: float = self._t0
        self.log = log or logging.getLogger("softswitch")
        self.drop_port = drop_port
        self.max_loops = max_loops
        self.lock = threading.Lock()
        self.priority_queues = priority_queues
        self.rng = _random.Random(seed)
        self.hashes = HashEngine(self.rng)
        self.digest_handler = digest_handler
        self.tracer = PacketTracer(self.log, drop_port) if trace else None
        self.digests: deque[tuple[int, str, dict[str, int]]] = deque(maxlen=1024)

        self.pre = ReplicationEngine()
        self.mirrors = MirroringSessions()
        self.tm = TrafficManager(priority_queues, self._clock)

        self.rx: Counter[int] = Counter()
        self.rx_bytes: Counter[int] = Counter()
        self.tx: Counter[int] = Counter()
        self.tx_bytes: Counter[int] = Counter()
        self.drops: Counter[str] = Counter()
        self.events: Counter[str] = Counter()
        # Frames given to forward_at with an arrival time the queues' clock had
        # already passed by more than the frame's own time on the ingress link
        # (so they enter the queues later than the wire delivered them, and
        # bunched), per ingress port, with the largest such shift (us).
        self.rx_behind_clock: Counter[int] = Counter()
        self.rx_behind_clock_max_us: dict[int, int] = {}
        self.last_error: str | None = None  # the latest per-packet exception, for tests/logs
        # port -> callable taking the frame: frames egressing that port go there
        self.port_handlers: dict[int, Callable[[bytes], None]] = {}
        # set during forward(): where a packet that passes through the idle
        # traffic manager leaves egress
        self._direct_out: list[tuple[int, bytes]] | None = None

        self._install_program(program_module)

    def _install_program(self, program_module: ProgramModule) -> None:
        """Build the program's stateful objects, then the program around them."""
        info: ProgramInfo = program_module.INFO
        meter_kind_of_table = {m.direct_table: m.kind for m in info.meters.values()
                               if m.direct_table}
        profiles = {
            name: ActionProfile(p, self._profile_action_check(info, p), self.hashes.compute)
            for name, p in info.action_profiles.items()
        }
        tables: dict[str, Table] = {
            name: Table(t, info.actions, meter_kind_of_table.get(name), self.now_us,
                        profiles.get(t.implementation) if t.implementation else None)
            for name, t in info.tables.items()
        }
        old: tuple[Any, ...] = (self.__dict__.get("module"), self.__dict__.get("info"),
               self.__dict__.get("tables"), self.__dict__.get("registers"),
               self.__dict__.get("counters"), self.__dict__.get("meters"))
        self.module = program_module
        self.info = info
        self.tables = tables
        self.action_profiles = profiles
        self.registers = {n: RegisterArray(n, r.width, r.size) for n, r in info.registers.items()}
        self.counters = {n: CounterArray(n, c.size, c.kind) for n, c in info.counters.items()
                         if not c.direct_table}
        self.meters = {n: MeterArray(n, m.size, m.kind, self.now_us)
                       for n, m in info.meters.items() if not m.direct_table}
        try:
            program = program_module.make_program(self)
        except Exception:
            if "program" in self.__dict__:  # keep the running program
                (self.module, self.info, self.tables, self.registers, self.counters,
                 self.meters) = old
            raise
        if self.tracer is not None:
            self.tracer.wrap(program)
        self.program = program
        self.hashes.set_calculations(info.calculations)
        self._counted_tables = [t for t in tables.values() if t.has_counter]
        self._metered_tables = [t for t in tables.values() if t.meter_kind is not None]
        # whether tables need per-packet context (direct counters or meters)
        self._table_context = bool(self._counted_tables or self._metered_tables)

    @staticmethod
    def _profile_action_check(info: ProgramInfo, prof: ActionProfileInfo
                              ) -> Callable[[str, tuple[int, ...]], tuple[int, ...]]:
        """Validates a member's action (one of the profile's tables' actions,
        not @defaultonly in them) and masks its data to the parameter widths."""
        def check(action: str, args: tuple[int, ...]) -> tuple[int, ...]:
            if action not in prof.actions:
                raise ActionProfileError("INVALID_ACTION_NAME", f"action profile {prof.name} "
                                         f"has no action {action}")
            params = info.actions[action].params
            if len(args) != len(params):
                raise ActionProfileError("BAD_ACTION_DATA", f"action {action} needs "
                                         f"{len(params)} parameters, got {len(args)}")
            return tuple(int(a) & ((1 << p.width) - 1) for a, p in zip(args, params, strict=True))
        return check

    def load_program(self, program_module: ProgramModule) -> None:
        """Replace the P4 program at run time, as if the switch had started with it.

        Table entries, registers, counters, meters, multicast groups and
        mirroring sessions start empty (they belong to the old program);
        packets waiting in the traffic manager are dropped (counted as drop
        reason ``program_change``); custom-CRC calculations start from their
        defaults. Queue settings, port rates, port counters and handlers stay.
        Hold ``lock``.
        If the new program fails to build, the old one keeps running."""
        self._install_program(program_module)
        self.pre.reset()
        self.mirrors.reset()
        queued = self.tm.total
        if queued:
            self.tm.clear()
            self.drops["program_change"] += queued
        self.digests.clear()
        self.events["program_loads"] += 1

    def set_port_handler(self, port: int, handler: Callable[[bytes], None] | None) -> None:
        """Hand frames egressing ``port`` to ``handler(frame)`` (called with
        ``lock`` held) instead of returning them from dequeue_ready/process_sync;
        they are still counted in tx. ``None`` removes the handler."""
        if handler is None:
            self.port_handlers.pop(port, None)
        else:
            self.port_handlers[port] = handler

    # ------------------------------------------------------------------
    # contract.Services
    def table(self, name: str) -> Table:
        return self.tables[name]

    def register(self, name: str) -> RegisterArray:
        return self.registers[name]

    def counter(self, name: str) -> CounterRuntime:
        c = self.counters.get(name)
        if c is not None:
            return c
        cinfo = self.info.counters.get(name)
        if cinfo is not None and cinfo.direct_table:
            return _DirectCounterView()  # counted by the table on a hit
        raise KeyError(f"program has no counter {name!r}")

    def meter(self, name: str) -> MeterRuntime:
        m = self.meters.get(name)
        if m is not None:
            return m
        minfo = self.info.meters.get(name)
        if minfo is not None and minfo.direct_table:
            return _DirectMeterView(self.tables[minfo.direct_table])
        raise KeyError(f"program has no meter {name!r}")

    def direct_meter_read(self, table: str, packet_length: int) -> int:
        return self.tables[table].direct_meter_color(packet_length)

    def hash(self, algo: str, base: int, data: list[tuple[int, int]], max_: int) -> int:
        return self.hashes.hash(algo, base, data, max_)

    def checksum(self, algo: str, data: list[tuple[int, int]]) -> int:
        return self.hashes.compute(algo, data)

    def random(self, lo: int, hi: int) -> int:
        if hi <= lo:
            return lo
        return self.rng.randint(lo, hi)

    def reseed(self, seed: int) -> None:
        """Restart the switch's random stream (the P4 ``random`` extern, RED's
        and the program's coin flips) from ``seed``, in place: whatever holds
        the stream keeps it."""
        self.rng.seed(seed)

    def _clock(self) -> float:
        """The switch's time on the ``now_us`` base: while ``forward_at``
        runs, the frame's arrival time; otherwise the clock, but never
        earlier than a time already used (queues are scheduled in it)."""
        at = self._at
        if at is not None:
            return at
        t = self._wall()
        if t < self._floor:
            return self._floor
        self._floor = t
        return t

    def now_us(self) -> int:
        return int(self._clock() - self._t0)

    def trace(self, st: PacketState, msg: str) -> None:
        """A debug-log line of a traced program (compiled with trace=True)."""
        if self.tracer is not None:
            self.tracer.line(st, msg)

    def trace_table(self, st: PacketState, table: Table, action: str, data: tuple[int, ...],
                    hit: bool) -> None:
        if self.tracer is not None:
            self.tracer.table(st, table, action, data, hit)

    def log_msg(self, fmt: str, args: list[Any]) -> None:
        self.log.info("log_msg: %s", format_log_msg(fmt, args))

    def mark_to_drop(self, sm: StandardMetadata) -> None:
        sm.egress_spec = self.drop_port
        sm.mcast_grp = 0

    # ------------------------------------------------------------------
    # public data-path API
    def receive(self, port: int, data: bytes) -> None:
        self.rx[port] += 1
        self.rx_bytes[port] += len(data)
        if self.tm.pfc is not None and is_pause(data):
            self._pause_received(port, data)
            return
        try:
            more = self._ingress_one(port, data, NORMAL, None, 0)
        except Exception as e:
            self._ingress_failed(e, port, data)
            return
        if more is not None:  # a resubmitted packet
            self._run_ingress(*more)

    def dequeue_ready(self, limit: int = 4096) -> list[tuple[int, bytes]]:
        tm = self.tm
        return self._egress_from(tm.pop_unpaced if tm.unpaced else tm.pop_ready, limit)

    def _egress_from(self, pop: Callable[[], tuple[int, int, Any, QueueMeta] | None],
                     limit: int) -> list[tuple[int, bytes]]:
        """Egress of what ``pop`` releases (up to ``limit`` packets), with the
        PFC frames the traffic manager asks for meanwhile, ahead of them."""
        out: list[tuple[int, bytes]] = []
        tm = self.tm
        if tm.pfc_out:
            self._pfc_frames(out)
        for _ in range(limit):
            if not tm.total:
                break
            item = pop()
            if item is None:
                break
            port, _prio, (st, length, gen), meta = item
            try:
                self._egress_one(port, st, length, gen, meta, out)
            except Exception as e:
                self._egress_failed(e, port)
            if tm.pfc_out:
                self._pfc_frames(out)
        return out

    # -- priority flow control (runtime/pfc.py, the frame ground/wire/pause.py) --
    def set_pfc(self, xoff: int | None, xon: int = 0) -> None:
        """PFC on every port: pause an ingress port's priority upstream once
        ``xoff`` of its packets wait in egress queues, resume at ``xon``;
        obey the PFC frames that arrive. ``xoff`` None turns it off."""
        self.tm.set_pfc(xoff, xon)

    def _pause_received(self, port: int, data: bytes) -> None:
        try:
            quanta = parse_pause(data)
        except PauseFormatError as e:
            self._drop("pfc_malformed")
            if self._should_log_error():
                self.log.error("port %d: %s", port, e)
            return
        self.tm.pause(port, quanta)

    def _pfc_frames(self, out: list[tuple[int, bytes]]) -> None:
        """The TM's pause requests as PFC frames, ahead of any queued packet
        (a MAC sends its control frames first)."""
        for port, prio, quanta in self.tm.pfc_out:
            out.append((port, pfc_frame(_PFC_SRC_MAC, {prio: quanta})))
            self.events["pfc_xoff" if quanta else "pfc_xon"] += 1
        self.tm.pfc_out.clear()

    def forward(self, port: int, data: bytes) -> list[tuple[int, bytes]]:
        """``receive(port, data)`` then ``dequeue_ready()``. A unicast packet
        that finds every queue empty and no rate or weight set would be the
        next one out, so it goes from ingress straight to egress (counted in
        its queue's statistics, queue metadata as if it had passed through)."""
        out: list[tuple[int, bytes]] = []
        self._direct_out = out
        try:
            self.receive(port, data)
        finally:
            self._direct_out = None
        if self.tm.total or self.tm.pfc_out:
            out += self.dequeue_ready()
        return out

    def forward_at(self, port: int, data: bytes, arrived_us: float) -> list[tuple[int, bytes]]:
        """``forward(port, data)`` in modelled time: as if the frame were
        processed when it arrived (``arrived_us``, on the ``now_us`` base,
        e.g. the kernel's receive timestamp). Packets the traffic manager
        would have released before then leave first, the frame is enqueued
        at its arrival time and its queue depth is the one the wire would
        have built then. A data path that reads a backlog of frames late
        (a busy machine) so does not model a queue the links never had;
        fed in arrival order, the result does not depend on when the
        frames were read. A time earlier than one already used is taken as
        that one (time never runs backwards in the queues)."""
        behind = int(self._floor - arrived_us)
        if behind > 0:
            self._note_behind(port, len(data), behind)
        self._at = self._advance_to(arrived_us)
        try:
            out = self.dequeue_ready() if self.tm.total else []
            out += self.forward(port, data)
        finally:
            self._at = None
        return out

    def receive_at(self, port: int, data: bytes, t_us: float) -> list[tuple[int, bytes]]:
        """Ingress of a frame that arrived at ``t_us``, into the traffic manager
        (nothing is released: see ``release_port``); the PFC frames the
        traffic manager asks for meanwhile. The virtual-time engine's way in."""
        self._at = self._advance_to(t_us)
        try:
            self.receive(port, data)
            out: list[tuple[int, bytes]] = []
            if self.tm.pfc_out:
                self._pfc_frames(out)
            return out
        finally:
            self._at = None

    def release_port(self, port: int, t_us: float) -> list[tuple[int, bytes]]:
        """Egress of what ``port`` releases by ``t_us`` (TrafficManager.pop_port),
        and the PFC frames asked for meanwhile; the port's next release is
        ``tm.port_next_release(port)``."""
        self._at = self._advance_to(t_us)
        try:
            return self._egress_from(lambda: self.tm.pop_port(port), _NO_LIMIT)
        finally:
            self._at = None

    def _note_behind(self, port: int, length: int, behind_us: int) -> None:
        p = self.tm.ports.get(port)
        rate = p.rate_bps if p is not None and p.rate_bps > 0 else self.tm.default_port_bps
        # Within a frame time the shift is the replay's own granularity; on
        # links without a rate any shift counts.
        if rate > 0 and behind_us * rate <= length * 8e6:
            return
        self.rx_behind_clock[port] += 1
        if behind_us > self.rx_behind_clock_max_us.get(port, 0):
            self.rx_behind_clock_max_us[port] = behind_us

    def release_until(self, t_us: float) -> list[tuple[int, bytes]]:
        """``dequeue_ready()`` as of ``t_us`` (the ``now_us`` base): what
        the traffic manager releases by then. A data path that has read every
        frame that arrived before ``t_us`` releases by that time, not by a
        later clock reading, so frames arriving meanwhile keep their times."""
        self._at = self._advance_to(t_us)
        try:
            return self.dequeue_ready() if self.tm.total else []
        finally:
            self._at = None

    def _advance_to(self, t_us: float) -> float:
        at = t_us
        if at < self._floor:
            at = self._floor
        self._floor = at
        return at

    def next_release_us(self) -> int | None:
        return self.tm.next_release_us()

    def next_release(self) -> float | None:
        """``next_release_us`` on the clock's own scale, not rounded up (a
        float clock's nanoseconds)."""
        return self.tm.next_release()

    def process_sync(self, port: int, data: bytes) -> list[tuple[int, bytes]]:
        self.receive(port, data)
        out: list[tuple[int, bytes]] = []
        tm = self.tm
        while True:
            item = tm.pop_any()
            if item is None:
                break
            self._run_egress(item, out)
        return out

    def stats(self) -> dict[str, Any]:
        return {
            "rx": {str(p): n for p, n in sorted(self.rx.items())},
            "rx_bytes": {str(p): n for p, n in sorted(self.rx_bytes.items())},
            "tx": {str(p): n for p, n in sorted(self.tx.items())},
            "tx_bytes": {str(p): n for p, n in sorted(self.tx_bytes.items())},
            "drops": dict(sorted(self.drops.items())),
            "events": dict(sorted(self.events.items())),
            "rx_behind_clock": {str(p): n for p, n in sorted(self.rx_behind_clock.items())},
            "rx_behind_clock_max_us": {str(p): n for p, n in
                                       sorted(self.rx_behind_clock_max_us.items())},
            "queued": self.tm.total,
            **({"pfc": {**self.tm.pfc.stats(),
                        "rx": {str(n): p.pauses_rx for n, p in sorted(self.tm.ports.items())
                               if p.pauses_rx}}}
               if self.tm.pfc is not None else {}),
            "queues": self.tm.stats(),
        }

    def reset_state(self) -> None:
        """Forget runtime table entries, registers, counters, meters, PRE and
        mirroring state (the program's const entries and defaults stay)."""
        for t in self.tables.values():
            t.clear()
            t.reset_default()
            t.reset_counters()
        for p in self.action_profiles.values():
            p.reset()
        for r in self.registers.values():
            r.reset()
        for c in self.counters.values():
            c.reset()
        for m in self.meters.values():
            m.reset()
        self.pre.reset()
        self.mirrors.reset()

    # ------------------------------------------------------------------
    # pipeline internals
    def _drop(self, reason: str) -> None:
        self.drops[reason] += 1

    def _should_log_error(self) -> bool:
        """Full tracebacks for the first errors, then one per thousand (a flood
        of bad packets must not flood the log)."""
        n = self.drops["exception"]
        return n <= 10 or n % 1000 == 0

    def _fresh_meta(self, st: PacketState) -> None:
        """Reset user and standard metadata, as BMv2's reset_metadata does."""
        fresh = self.program.new_state()
        st.meta = fresh.meta
        st.sm = fresh.sm

    def _start_packet(self, length: int) -> None:
        """Per-packet table context: the length direct counters add, and no
        entry hit yet for direct meters."""
        for t in self._counted_tables:
            t.current_length = length
        for t in self._metered_tables:
            t.last_hit = None

    def _run_ingress(self, port: int, data: bytes, itype: int,
                     preserved: dict[str, Any] | None, gen: int) -> None:
        work = [(port, data, itype, preserved, gen)]
        while work:
            args = work.pop()
            try:
                more = self._ingress_one(*args)
            except Exception as e:
                self._ingress_failed(e, args[0], args[1])
                continue
            if more is not None:
                work.append(more)

    def _ingress_failed(self, e: Exception, port: int, data: bytes) -> None:
        self._drop("exception")
        self.last_error = f"ingress: {type(e).__name__}: {e}"
        if self._should_log_error():
            self.log.exception("ingress failed on a %d-byte packet from port %d",
                               len(data), port)

    def _ingress_one(self, port: int, data: bytes, itype: int,
                     preserved: dict[str, Any] | None, gen: int) -> tuple | None:
        prog = self.program
        st = prog.new_state()
        sm = st.sm
        length = len(data)
        st.ingress_length = length
        if itype == NORMAL:
            sm.ingress_port = port
            sm.ingress_global_timestamp = int(self._clock() - self._t0) & _M48
        sm.packet_length = length
        sm.instance_type = itype
        if preserved:
            prog.restore_field_list(st, preserved)
        if self._table_context:
            self._start_packet(length)
        prog.parse(st, data)
        prog.verify_checksum(st)
        prog.ingress(st)

        egress_spec = sm.egress_spec
        mgid = sm.mcast_grp

        # I2E clone: the packet as it entered ingress, re-parsed
        if st.clone_session is not None:
            def reparsed() -> PacketState:
                c = prog.new_state()
                c.sm.ingress_port = port
                prog.parse(c, data)
                return c

            self._clone(st, gen, length, reparsed, INGRESS_CLONE, "clone_i2e")

        d = st.digest
        if d is not None:
            st.digest = None
            self.digests.append(d)
            self.events["digests"] += 1
            if self.digest_handler is not None:
                try:
                    self.digest_handler(*d)
                except Exception:
                    self.log.exception("digest handler failed")

        if st.resubmit_field_list is not None:
            fl = st.resubmit_field_list
            st.resubmit_field_list = None
            if gen + 1 > self.max_loops:
                self._drop("loop_limit")
                return None
            self.events["resubmit"] += 1
            return (port, data, RESUBMIT, prog.field_list(st, fl), gen + 1)

        # the packet length register: headers added/removed by ingress count
        length += st.length_change
        if mgid != 0:
            sm.instance_type = REPLICATION
            self._multicast(st, mgid, length, gen)
            return None

        if egress_spec == self.drop_port:
            self._drop("drop_port")
            return None
        sm.instance_type = NORMAL
        if self._direct_out is not None and gen == 0:
            meta = self.tm.pass_through(egress_spec, sm.priority)
            if meta is not None:
                try:
                    self._egress_one(egress_spec, st, length, gen, meta, self._direct_out)
                except Exception as e:
                    self._egress_failed(e, egress_spec)
                return None
        self._enqueue(egress_spec, st, length, gen)
        return None

    def _clone(self, st: PacketState, gen: int, length: int,
               make_copy: Callable[[], PacketState], instance_type: int, event: str) -> None:
        """Act on the program's clone request (I2E or E2E, which differ only in
        the copy ``make_copy`` makes): the copy, with the requested field list
        preserved, goes to the mirroring session's port."""
        prog = self.program
        sid = st.clone_session & 0x7FFF  # type: ignore[operator]
        fl = st.clone_field_list
        st.clone_session = None
        sess = self.mirrors.get(sid)
        if sess is None:
            self.events["clone_no_session"] += 1
            return
        if gen + 1 > self.max_loops:
            self._drop("loop_limit")
            return
        c = make_copy()
        self._fresh_meta(c)
        if fl is not None:
            prog.restore_field_list(c, prog.field_list(st, fl))
        c.sm.instance_type = instance_type
        c.ingress_length = st.ingress_length
        self.events[event] += 1
        self._send_clone(c, sess, length, gen + 1)

    def _send_clone(self, c: PacketState, sess: MirrorSession, length: int, gen: int) -> None:
        if sess.mgid is not None:
            self._multicast(c, sess.mgid, length, gen)
        if sess.port is not None:
            self._enqueue(sess.port, c, length, gen)

    def _multicast(self, st: PacketState, mgid: int, length: int, gen: int) -> None:
        reps = self.pre.replicate(mgid)
        if not reps:
            self.events["mcast_empty_group"] += 1
            self._drop("mcast_no_replica")
            return
        prog = self.program
        for port, rid in reps:
            st.sm.egress_rid = rid
            r = prog.copy_state(st)
            r.ingress_length = st.ingress_length
            r.length_change = st.length_change
            self.events["replicas"] += 1
            self._enqueue(port, r, length, gen)

    def _enqueue(self, port: int, st: PacketState, length: int, gen: int) -> None:
        prio = st.sm.priority
        if not 0 <= prio < self.priority_queues:
            self._drop("priority_out_of_range")
            n = self.drops["priority_out_of_range"]
            if n <= 10 or n % 1000 == 0:
                self.log.error("priority %d out of range (%d queue(s) per port), dropping "
                               "packet (%d so far)", prio, self.priority_queues, n)
            return
        # PFC counts a packet against the port it came in on (a resubmitted or
        # recirculated one no longer has it)
        ingress = st.sm.ingress_port if st.sm.instance_type not in (RECIRC, RESUBMIT) else -1
        if not self.tm.enqueue(port, prio, (st, length, gen), length, ingress):
            self._drop("tm_full")

    def _run_egress(self, item: tuple, out: list[tuple[int, bytes]]) -> None:
        port, prio, (st, length, gen), meta = item
        try:
            self._egress_one(port, st, length, gen, meta, out)
        except Exception as e:
            self._egress_failed(e, port)

    def _egress_failed(self, e: Exception, port: int) -> None:
        self._drop("exception")
        self.last_error = f"egress: {type(e).__name__}: {e}"
        if self._should_log_error():
            self.log.exception("egress failed on a packet to port %d", port)

    def _egress_one(self, port: int, st: PacketState, length: int, gen: int, meta: QueueMeta,
                    out: list[tuple[int, bytes]]) -> None:
        prog = self.program
        sm = st.sm
        t0 = self._t0
        # egress starts when the packet leaves its queue
        sm.egress_global_timestamp = (meta.deq_us - t0) & _M48
        sm.enq_timestamp = (meta.enq_timestamp - t0) & _M32
        sm.enq_qdepth = meta.enq_qdepth & _M19
        sm.deq_timedelta = meta.deq_timedelta & _M32
        sm.deq_qdepth = meta.deq_qdepth & _M19
        sm.egress_port = port
        sm.egress_spec = (self.drop_port + 1) & 0x1FF
        sm.packet_length = length
        if self._table_context:
            self._start_packet(st.ingress_length)
        prog.egress(st)

        # E2E clone: the state at the end of egress, with the length register
        # as egress left it (BMv2 simple_switch.cpp egress_thread)
        if st.clone_session is not None:
            def e2e_copy() -> PacketState:
                c = prog.copy_state(st)
                c.length_change = st.length_change
                return c

            self._clone(st, gen, st.ingress_length + st.length_change, e2e_copy,
                        EGRESS_CLONE, "clone_e2e")

        if sm.egress_spec == self.drop_port:
            self._drop("egress_drop_port")
            return

        prog.compute_checksum(st)
        frame = prog.deparse(st)
        if st.truncate_len is not None and st.truncate_len < len(frame):
            frame = frame[:st.truncate_len]

        if st.recirculate_field_list is not None:
            fl = st.recirculate_field_list
            st.recirculate_field_list = None
            if gen + 1 > self.max_loops:
                self._drop("loop_limit")
                return
            self.events["recirculate"] += 1
            self._run_ingress(0, frame, RECIRC, prog.field_list(st, fl), gen + 1)
            return

        self.tx[port] += 1
        self.tx_bytes[port] += len(frame)
        handler = self.port_handlers.get(port) if self.port_handlers else None
        if handler is not None:
            try:
                handler(frame)
            except Exception:
                self.log.exception("handler of port %d failed", port)
            return
        out.append((port, frame))
