"""A per-packet debug log, in the order and wording of BMv2's ``-L debug``.

With ``SoftSwitch(trace=True)`` (the daemon's ``--log-level debug``), each
packet writes, on the switch's logger at DEBUG level::

    [0.0] [cxt 0] Processing packet received on port 1
    [0.0] [cxt 0] Parser 'parser': start
    [0.0] [cxt 0] Parser 'parser' entering state 'start'
    [0.0] [cxt 0] Extracting header 'ethernet'
    [0.0] [cxt 0] Parser state 'start': key is 0800
    ...
    [0.0] [cxt 0] Parser 'parser': end
    [0.0] [cxt 0] Pipeline 'ingress': start
    [0.0] [cxt 0] Table 'MyIngress.ipv4_lpm': hit with handle 0
    [0.0] [cxt 0] Action entry is MyIngress.set_nhop - 101,1,
    [0.0] [cxt 0] Pipeline 'ingress': end
    [0.0] [cxt 0] Egress port is 1
    [0.0] [cxt 0] Priority queue is 0
    [0.0] [cxt 0] Pipeline 'egress': start
    ...
    [0.0] [cxt 0] Deparser 'deparser': end
    [0.0] [cxt 0] Transmitting packet of size 74 out of port 1

``[id.copy]`` numbers packets as BMv2 does (copies: clones and replicas).
The parser states, extracted and emitted headers and tables come from trace
calls the compiler generates only for a tracing switch
(``compile_program(..., trace=True)``); the pipeline boundaries and the
end-of-pipeline decisions come from wrapping the program's functions here.
A switch that does not trace runs the plain functions: no cost at all.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from switches.soft.runtime.contract import PacketState

_MAX_TRACKED = 4096  # packets in flight whose numbers are remembered


class PacketTracer:
    def __init__(self, log: logging.Logger, drop_port: int) -> None:
        self.log = log
        self.drop_port = drop_port
        self._tags: dict[int, str] = {}  # id(PacketState) -> "packet.copy"
        self._copies: dict[str, int] = {}
        self._next = 0

    # -- packet numbers --------------------------------------------------------
    def _remember(self, st: PacketState, tag: str) -> str:
        self._tags[id(st)] = tag
        if len(self._tags) > _MAX_TRACKED:
            self._tags.pop(next(iter(self._tags)))
        return tag

    def new_packet(self, st: PacketState) -> str:
        tag = f"{self._next}.0"
        self._next += 1
        return self._remember(st, tag)

    def copy_of(self, st: PacketState, parent: PacketState) -> str:
        base = self.tag(parent).split(".", 1)[0]
        n = self._copies.get(base, 0) + 1
        self._copies[base] = n
        if len(self._copies) > _MAX_TRACKED:
            self._copies.pop(next(iter(self._copies)))
        return self._remember(st, f"{base}.{n}")

    def tag(self, st: PacketState) -> str:
        t = self._tags.get(id(st))
        return t if t is not None else self.new_packet(st)

    # -- lines -------------------------------------------------------------------
    def line(self, st: PacketState, msg: str) -> None:
        self.log.debug("[%s] [cxt 0] %s", self.tag(st), msg)

    def table(self, st: PacketState, table: Any, action: str, data: tuple[int, ...],
              hit: bool) -> None:
        name = table.name
        self.line(st, f"Applying table '{name}'")
        e = table.last_hit
        if hit and e is not None:
            self.line(st, f"Table '{name}': hit with handle {e.handle}")
        else:
            self.line(st, f"Table '{name}': miss")
        self.line(st, f"Action entry is {action} - " + "".join(f"{v:x}," for v in data))

    # -- the program's functions, wrapped --------------------------------------------
    def wrap(self, program: Any) -> None:
        """Make ``program``'s pipeline functions log their boundaries and the
        decisions the switch takes after them."""
        line = self.line
        drop = self.drop_port
        parse: Callable[..., Any] = program.parse
        ingress: Callable[..., Any] = program.ingress
        egress: Callable[..., Any] = program.egress
        deparse: Callable[..., Any] = program.deparse
        copy_state: Callable[..., Any] = program.copy_state

        def traced_parse(st: PacketState, data: bytes) -> None:
            self.new_packet(st)
            line(st, f"Processing packet received on port {st.sm.ingress_port}")
            line(st, "Parser 'parser': start")
            parse(st, data)
            line(st, "Parser 'parser': end")

        def traced_ingress(st: PacketState) -> None:
            line(st, "Pipeline 'ingress': start")
            ingress(st)
            line(st, "Pipeline 'ingress': end")
            sm = st.sm
            # simple_switch.cpp's end of ingress, in its order
            if st.clone_session is not None:
                line(st, "Cloning packet at ingress")
            if st.resubmit_field_list is not None:
                line(st, "Resubmitting packet")
            elif sm.mcast_grp:
                line(st, "Multicast requested for packet")
            else:
                line(st, f"Egress port is {sm.egress_spec}")
                if sm.egress_spec == drop:
                    line(st, "Dropping packet at the end of ingress")
                else:
                    line(st, f"Priority queue is {sm.priority}")

        def traced_egress(st: PacketState) -> None:
            line(st, "Pipeline 'egress': start")
            egress(st)
            line(st, "Pipeline 'egress': end")
            if st.clone_session is not None:
                line(st, "Cloning packet at egress")
            if st.sm.egress_spec == drop:
                line(st, "Dropping packet at the end of egress")

        def traced_deparse(st: PacketState) -> bytes:
            line(st, "Deparser 'deparser': start")
            frame: bytes = deparse(st)
            line(st, "Deparser 'deparser': end")
            if st.recirculate_field_list is not None:
                line(st, "Recirculating packet")
            else:
                n = len(frame) if st.truncate_len is None else min(len(frame), st.truncate_len)
                line(st, f"Transmitting packet of size {n} out of port {st.sm.egress_port}")
            return frame

        def traced_copy(st: PacketState) -> PacketState:
            c: PacketState = copy_state(st)
            self.copy_of(c, st)
            return c

        program.parse = traced_parse
        program.ingress = traced_ingress
        program.egress = traced_egress
        program.deparse = traced_deparse
        program.copy_state = traced_copy
