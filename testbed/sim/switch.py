"""A soft switch on the simulated clock: the same compiled P4 program, runtime and
traffic manager as the Mininet engine's daemon, without sockets or threads.

A frame that arrives on a port goes through ingress and into the traffic
manager at its arrival time (``SoftSwitch.forward_at``); what the traffic
manager releases leaves on the port's line (testbed.sim.link.TxLine) at the
port's rate. The switch asks to be woken when its queues next release a packet
(a paced port, a delay line, a PFC pause running out), to the nanosecond: the
traffic manager's clock is the simulated one in microseconds as a float.
"""

from __future__ import annotations

import logging
from typing import Any

from switches.soft.control.verbs import ControlPlane
from switches.soft.runtime.switch import SoftSwitch
from testbed.sim.link import TxLine
from testbed.sim.loop import EventLoop, SimError

__all__ = ["SimSwitch"]

_log = logging.getLogger("testbed.sim.switch")


class SimSwitch:
    def __init__(self, name: str, loop: EventLoop, program_module: Any, *,
                 priority_queues: int = 1, seed: int = 1, default_bps: float) -> None:
        self.name = name
        self.loop = loop
        self.default_bps = default_bps       # a port whose rate the plan does not set
        self.sw = SoftSwitch(program_module, priority_queues=priority_queues,
                             now_us=self._now_us, seed=seed,
                             log=logging.getLogger(f"testbed.sim.{name}"))
        self.control = ControlPlane(self.sw)
        self.ports: dict[int, TxLine] = {}
        self._wake_at: int | None = None
        self.unconnected_tx = 0             # frames sent to a port with no link
        self.hops = 0                       # frames received (packet-hops into this switch)

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

    def receiver(self, port: int) -> Any:
        """What a link delivers to: frames arriving on ``port``."""
        def receive(frame: bytes) -> None:
            self.hops += 1
            self._send(self.sw.forward_at(port, frame, self.loop.now / 1000.0))
        return receive

    def execute(self, line: str) -> str:
        """A control-plane line (simple_switch_CLI syntax); rates and queue
        settings take effect at once, so the switch looks at its queues again."""
        out = str(self.control.execute(line))
        self._schedule()
        return out

    def _send(self, out: list[tuple[int, bytes]]) -> None:
        ports = self.ports
        tm_ports = self.sw.tm.ports
        for port, frame in out:
            line = ports.get(port)
            if line is None:
                self.unconnected_tx += 1
                continue
            p = tm_ports.get(port)
            line.send(frame, p.rate_bps if p is not None and p.rate_bps > 0 else None)
        self._schedule()

    def _schedule(self) -> None:
        nxt = self.sw.next_release()
        if nxt is None:
            return
        t = int(nxt * 1000.0)
        if t < nxt * 1000.0:
            t += 1
        now = self.loop.now
        if t <= now:
            # due already (a setting just changed) or a rounding step short:
            # the next nanosecond, so that a wake always moves time on
            t = now + 1
        if self._wake_at is not None and now <= self._wake_at <= t:
            return                          # already due no later than that
        self._wake_at = t
        self.loop.at(t, self._release, t)

    def _release(self, t: int) -> None:
        if t != self._wake_at:
            return                          # superseded by an earlier wake
        self._wake_at = None
        self._send(self.sw.release_until(t / 1000.0))

    # -- what the runner reads -------------------------------------------------
    def sample(self) -> dict[str, Any]:
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

    def stats(self) -> dict[str, Any]:
        """The daemon's ``switch_stats``: the pipeline's statistics; a simulated
        switch has no kernel, so no kernel drops and no processing lag."""
        return {"switch": self.sw.stats(),
                "ports": {str(n): {"frames": ln.frames, "bytes": ln.bytes}
                          for n, ln in sorted(self.ports.items())},
                "lag_us": {"max": 0, "samples": 0, "mean": 0}, "kernel_drops": 0,
                "unconnected_tx": self.unconnected_tx}
