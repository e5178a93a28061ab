"""One scale setting from which every transport time constant is derived.

The emulated links run ``slowdown`` times slower than the NIC being modelled
(e.g. 100 Gb/s NIC, slowdown 1000 -> 100 Mb/s). Time constants are stretched by
the same factor so that bandwidth-delay products and packets per timer period
stay like the real network's; packet and byte counts are not scaled. ``floor_ms``
keeps timers above what a Python host can resolve reliably. DCQCN's settings
(including the notification point's CNP interval) come from its preset
(hosts/roce/dcqcn.py), scaled with the same slowdown.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass


@dataclass(frozen=True)
class Scale:
    slowdown: float = 1000.0          # emulated time = real time * slowdown
    nic_rate_bps: float = 100e9       # rate of the NIC being modelled
    rto_us: float = 100.0             # real-NIC retransmission timeout
    ack_delay_us: float = 2.0         # max time a received packet waits for its ACK
    rnr_delay_us: float = 10.0        # wait after an RNR NAK before retrying
    ack_every_pkts: int = 16          # responder ACKs at least every N packets
    max_inflight_pkts: int = 512      # unacknowledged packets per QP
    floor_ms: float = 1.0             # lower bound for every derived timer
    # The NIC's per-message latency: a posted send work request's first packet
    # leaves no sooner than this after the post (doorbell, WQE and payload
    # fetch). A latency, not a timer: scaled without the floor; 0: none.
    nic_latency_us: float = 0.0

    def __post_init__(self) -> None:
        if self.slowdown <= 0 or self.nic_rate_bps <= 0:
            raise ValueError("slowdown and nic_rate_bps must be positive")
        if self.ack_every_pkts < 1 or self.max_inflight_pkts < 1:
            raise ValueError("packet counts must be >= 1")
        if not self.nic_latency_us >= 0:
            raise ValueError("nic_latency_us must be >= 0")

    def ns(self, real_us: float) -> int:
        """Emulated duration (ns) of a real-NIC duration given in µs (with the floor)."""
        return max(int(real_us * 1000.0 * self.slowdown), int(self.floor_ms * 1e6))

    @property
    def line_rate_bps(self) -> float:
        return self.nic_rate_bps / self.slowdown

    def latency_ns(self, real_us: float) -> int:
        """Emulated duration (ns) of a real latency in us, without the timers' floor."""
        return int(real_us * 1000.0 * self.slowdown)

    @property
    def nic_latency_ns(self) -> int:
        return self.latency_ns(self.nic_latency_us)

    @property
    def rto_ns(self) -> int:
        return self.ns(self.rto_us)

    @property
    def ack_delay_ns(self) -> int:
        return self.ns(self.ack_delay_us)

    @property
    def rnr_delay_ns(self) -> int:
        return self.ns(self.rnr_delay_us)

    def timers(self) -> dict[str, float | int]:
        """Settings and derived values, for a run's saved outputs."""
        out: dict[str, float | int] = dict(asdict(self))
        out.update(line_rate_bps=self.line_rate_bps, rto_ns=self.rto_ns,
                   ack_delay_ns=self.ack_delay_ns,
                   rnr_delay_ns=self.rnr_delay_ns, nic_latency_ns=self.nic_latency_ns)
        return out
