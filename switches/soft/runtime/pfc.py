"""Priority flow control (IEEE 802.1Qbb): the per-ingress accounting a
switch port uses to pause the hop before it.

The frame (PAUSE and PFC, read and built) is ground.wire.pause's, shared with
the hosts' side (hosts/roce/pfc.py, a NIC that obeys pauses). A switch pauses
with the largest timer and ends the pause with an XON once its buffer has
drained, rather than relying on the timer.

:class:`PfcIngress` counts, per (ingress port, class), the packets held in
the egress queues, and says when to send XOFF (the count reached ``xoff``)
and XON (it fell to ``xon``). The class of a held packet is the egress queue
priority the pipeline gave it.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ground.wire.pause import MAX_QUANTA, pause_us


@dataclass
class PfcIngress:
    """Per (ingress port, class) counts of held packets and the pause each
    has asked of the hop before it.

    ``xoff``: held packets at which the ingress pauses its class upstream;
    ``xon``: held packets at or below which it ends the pause. A pause still
    on is asked for again when a packet of that ingress and class arrives
    half a largest timer or more (on the ingress link's rate) after the last
    request: the hop before then was no longer paused (its timer ran out)."""

    xoff: int
    xon: int
    held: dict[tuple[int, int], int] = field(default_factory=dict)
    paused_at: dict[tuple[int, int], float] = field(default_factory=dict)  # last XOFF sent
    xoff_sent: dict[int, int] = field(default_factory=dict)   # per ingress port
    xon_sent: dict[int, int] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.xoff < 1 or not 0 <= self.xon < self.xoff:
            raise ValueError(f"PFC thresholds need xoff >= 1 and 0 <= xon < xoff "
                             f"(got xoff {self.xoff}, xon {self.xon})")

    def held_one(self, ingress: int, cls: int, now_us: float,
                 ingress_bps: float) -> int | None:
        """A packet of (ingress, cls) is held; the quanta to send to ingress
        (MAX_QUANTA: pause), or None. ``ingress_bps``: the ingress link's
        rate (0: unknown, a pause is then never asked for again)."""
        key = (ingress, cls)
        n = self.held.get(key, 0) + 1
        self.held[key] = n
        at = self.paused_at.get(key)
        if at is None:
            if n < self.xoff:
                return None
        elif ingress_bps <= 0 or now_us - at < pause_us(MAX_QUANTA, ingress_bps) / 2:
            return None
        self.paused_at[key] = now_us
        self.xoff_sent[ingress] = self.xoff_sent.get(ingress, 0) + 1
        return MAX_QUANTA

    def released_one(self, ingress: int, cls: int) -> int | None:
        """A packet of (ingress, cls) left its queue; 0 (XON) to send to
        ingress when that ends its pause, else None."""
        key = (ingress, cls)
        n = self.held.get(key, 0) - 1
        self.held[key] = max(0, n)
        if n <= self.xon and key in self.paused_at:
            del self.paused_at[key]
            self.xon_sent[ingress] = self.xon_sent.get(ingress, 0) + 1
            return 0
        return None

    def release_all(self) -> list[tuple[int, int]]:
        """Forget every held packet (queues cleared); the (ingress, class)
        pauses to end."""
        ended = sorted(self.paused_at)
        for ingress, _cls in ended:
            self.xon_sent[ingress] = self.xon_sent.get(ingress, 0) + 1
        self.held.clear()
        self.paused_at.clear()
        return ended

    def stats(self) -> dict[str, object]:
        return {"xoff": self.xoff, "xon": self.xon,
                "xoff_sent": {str(p): n for p, n in sorted(self.xoff_sent.items())},
                "xon_sent": {str(p): n for p, n in sorted(self.xon_sent.items())},
                "paused": sorted(f"{p}/{c}" for p, c in self.paused_at)}
