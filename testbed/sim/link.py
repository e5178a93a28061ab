"""One direction of a link: frames leave in order at the line rate, then propagate.

A frame of L bytes that starts at t occupies the line until t + 8L/rate and is
whole at the far end ``delay_ns`` later (store and forward: the next node sees
it when its last bit arrived). With ``first_bit`` the far end has it at
t + delay instead, as a Mininet veth hands a frame over at once while the
sender's pacer or qdisc only spaces the frames (testbed/sim/README.md,
"Cross-validation"). The rate counts the frame's bytes as the soft
switch's traffic manager does (Ethernet header to the end of the payload), so
a switch port paced by its traffic manager and the line behind it agree.
"""

from __future__ import annotations

from collections.abc import Callable

from testbed.sim.loop import EventLoop

__all__ = ["TxLine"]


class TxLine:
    __slots__ = ("loop", "rate_bps", "delay_ns", "deliver", "name", "first_bit", "_free_at",
                 "frames", "bytes", "queued_max_ns")

    def __init__(self, loop: EventLoop, rate_bps: float, deliver: Callable[[bytes], None],
                 delay_ns: int = 0, name: str = "", first_bit: bool = False) -> None:
        if rate_bps <= 0:
            raise ValueError(f"link {name}: rate must be positive, not {rate_bps}")
        if delay_ns < 0:
            raise ValueError(f"link {name}: delay must be >= 0, not {delay_ns}")
        self.loop = loop
        self.rate_bps = float(rate_bps)
        self.delay_ns = delay_ns
        self.deliver = deliver
        self.name = name
        self.first_bit = first_bit
        self._free_at = 0.0        # ns, when the line has sent what it was given
        self.frames = 0
        self.bytes = 0
        self.queued_max_ns = 0.0   # longest a frame waited behind earlier ones

    def send(self, frame: bytes, rate_bps: float | None = None) -> None:
        """Put ``frame`` on the line now (behind what it is still sending), at
        ``rate_bps`` if given (a switch port's current rate) or the line's."""
        now = self.loop.now
        start = self._free_at
        if start < now:
            start = now
        elif start - now > self.queued_max_ns:
            self.queued_max_ns = start - now
        n = len(frame)
        end = start + n * 8e9 / (rate_bps or self.rate_bps)
        self._free_at = end
        self.frames += 1
        self.bytes += n
        at = start if self.first_bit else end
        arrive = int(at) + self.delay_ns
        if arrive < at + self.delay_ns:
            arrive += 1          # the frame is there at the next whole ns
        self.loop.at(arrive, self.deliver, frame)

    @property
    def idle(self) -> bool:
        return self._free_at <= self.loop.now
