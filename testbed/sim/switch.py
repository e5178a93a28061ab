"""A soft switch on the simulated clock: the same compiled P4 program, runtime and
traffic manager as the Mininet engine's daemon, without sockets or threads.

A frame that arrives on a port goes through ingress and into the traffic
manager at its arrival time (``SoftSwitch.receive_at``). Each port is woken
when its queues next release a packet (a paced port, a delay line, a PFC
pause running out), to the nanosecond (the traffic manager's clock is the
simulated one in microseconds as a float); what it releases goes through
egress (``SoftSwitch.release_port``) and leaves on the port's line
(testbed.sim.link.TxLine) at the port's rate.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import TYPE_CHECKING

from switches.controller.cli import CliController
from switches.soft.control.verbs import ControlPlane
from switches.soft.runtime.switch import SoftSwitch
from switches.targets import SOFT
from testbed.sim.link import TxLine
from testbed.sim.loop import EventLoop, SimError

if TYPE_CHECKING:
    from switches.soft.runtime.contract import ProgramModule
    from testbed.timeline import SwitchCounters, SwitchSample

__all__ = ["SimSwitch"]

_log = logging.getLogger("testbed.sim.switch")


class SimSwitch:
    def __init__(self, name: str, loop: EventLoop, program_module: ProgramModule, *,
                 priority_queues: int = 1, seed: int = 1, default_bps: float) -> None:
        self.name = name
        self.loop = loop
        self.default_bps = default_bps       # a port whose rate the plan does not set
        self.sw = SoftSwitch(program_module, priority_queues=priority_queues,
                             now_us=self._now_us, seed=seed,
                             log=logging.getLogger(f"testbed.sim.{name}"))
        self.control = ControlPlane(self.sw)
        self.ports: dict[int, TxLine] = {}
        self._controller: CliController | None = None
        self._wakes: dict[int, int] = {}     # port -> its pending release wake-up (ns)
        self.unconnected_tx = 0             # frames sent to a port with no link
        self.hops = 0                       # frames received (packet-hops into this switch)

    def reseed(self, seed: int) -> None:
        """Restart the switch's random stream from ``seed`` (each phase does)."""
        self.sw.reseed(seed)

    def _now_us(self) -> float:
        return self.loop.now / 1000.0

    def connect(self, port: int, line: TxLine) -> None:
        """Frames leaving ``port`` go on ``line``. A port whose rate nothing set
        drains at the line's: its queue then builds in the traffic manager,
        where the program sees it (enq_qdepth, RED), not behind it on the line.
        The plan's own ``set_port_rate_bps`` lines come later and prevail."""
        if port in self.ports:
            raise SimError(f"switch {self.name}: port {port} connected twice")
        self.ports[port] = line
        tm = self.sw.tm
        if not tm.default_port_bps and not (port in tm.ports and tm.ports[port].rate_bps):
            tm.set_port_rate_bps(int(line.rate_bps), port)

    def receiver(self, port: int) -> Callable[[bytes], None]:
        """What a link delivers to: frames arriving on ``port``."""
        def receive(frame: bytes) -> None:
            self.hops += 1
            self._send(self.sw.receive_at(port, frame, self.loop.now / 1000.0))
        return receive

    def controller(self) -> CliController:
        """The switch's controller API over its control plane, as a Mininet
        switch node's ``controller()`` (one per switch: it keeps the tables'
        schema once read)."""
        if self._controller is None:
            self._controller = SOFT.cli_controller(execute=self.execute)
        return self._controller

    def execute(self, line: str) -> str:
        """A control-plane line (simple_switch_CLI syntax); rates and queue
        settings take effect at once, so every port looks at its queues again."""
        out = str(self.control.execute(line))
        self.sw.tm.touched.update(self.sw.tm.ports)
        self._schedule()
        return out

    def _send(self, out: list[tuple[int, bytes]], schedule: bool = True) -> None:
        ports = self.ports
        tm_ports = self.sw.tm.ports
        for port, frame in out:
            line = ports.get(port)
            if line is None:
                self.unconnected_tx += 1
                continue
            p = tm_ports.get(port)
            line.send(frame, p.rate_bps if p is not None and p.rate_bps > 0 else None)
        if schedule:
            self._schedule()

    def _schedule(self) -> None:
        """A wake-up for each port whose next release may have moved, at that
        time (each port is released on its own: the traffic manager need not
        look at every port for every packet)."""
        tm = self.sw.tm
        now = self.loop.now
        now_us = now / 1000.0
        while tm.touched:
            batch = sorted(tm.touched)      # (a release may touch other ports)
            tm.touched.clear()
            for port in batch:
                self._schedule_port(port, now, now_us)

    def _schedule_port(self, port: int, now: int, now_us: float) -> None:
        tm = self.sw.tm
        nxt = tm.port_next_release(port)
        if nxt is None:
            return
        if nxt <= now_us:
            # due now (on the traffic manager's own clock, no rounding):
            # released in this event, as the frame that made it due arrived
            self._wakes.pop(port, None)
            self._send(self.sw.release_port(port, now_us), schedule=False)
            nxt = tm.port_next_release(port)     # its next packet, if any
            if nxt is None:
                return
        t = int(nxt * 1000.0)
        if t < nxt * 1000.0:
            t += 1
        if t <= now:
            # due already (a setting just changed) or a rounding step short:
            # the next nanosecond, so that a wake always moves time on
            t = now + 1
        w = self._wakes.get(port)
        if w is not None and now <= w <= t:
            return                          # already due no later than that
        self._wakes[port] = t
        self.loop.at(t, self._release, (port, t))

    def _release(self, arg: tuple[int, int]) -> None:
        port, t = arg
        if self._wakes.get(port) != t:
            return                          # superseded by an earlier wake
        del self._wakes[port]
        self.sw.tm.touched.add(port)        # its next packet, if any
        self._send(self.sw.release_port(port, t / 1000.0))

    # -- what the runner reads -------------------------------------------------
    def sample(self) -> SwitchSample:
        """The daemon's ``switch_sample`` (queues, drops, bytes per port)."""
        sw = self.sw
        queues: dict[str, int] = {}
        queue_drops: dict[str, int] = {}
        for number, tm_port in sw.tm.ports.items():
            queues[str(number)] = sum(len(q.items) for q in tm_port.queues)
            queue_drops[str(number)] = sum(q.drops for q in tm_port.queues)
        return {"queues": queues, "queue_drops": queue_drops,
                "tx_bytes": {str(n): b for n, b in sw.tx_bytes.items()},
                "rx_bytes": {str(n): b for n, b in sw.rx_bytes.items()},
                "drops": dict(sw.drops), "kernel_drops": 0,
                "lag_us": {"max": 0, "samples": 0, "mean": 0}}

    def stats(self) -> SwitchCounters:
        """The daemon's ``switch_stats``: the pipeline's statistics; a simulated
        switch has no kernel, so no kernel drops and no processing lag."""
        return {"switch": self.sw.stats(),
                "ports": {str(n): {"frames": ln.frames, "bytes": ln.bytes}
                          for n, ln in sorted(self.ports.items())},
                "lag_us": {"max": 0, "samples": 0, "mean": 0}, "kernel_drops": 0,
                "unconnected_tx": self.unconnected_tx}
