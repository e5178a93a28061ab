"""The modelled network in the papers' units, converted once for the testbed.

An experiment states the network it reproduces as the paper does: link rate,
propagation delay per link, switch buffer and RED/ECN thresholds in bytes
(or in packets where the paper counts packets), and the time scale::

    from testbed.modelled import ModelledNetwork, Red, kbytes, packets

    # Symphony follows HPCC: 10 Gb/s links, 1 us per hop, Kmin 50 KB, Kmax 100 KB, Pmax 0.2
    net = ModelledNetwork(link_gbps=10, slowdown=1000, link_delay_us=1,
                          red=Red(kmin=kbytes(50), kmax=kbytes(100), pmax=0.2,
                                  command="table_set_default MyEgress.ecn_config "
                                          "MyEgress.set_ecn_params {kmin} {kmax} {pmax_percent}"))
    # ReFlex: a 65-packet threshold in a 466-packet queue
    net = ModelledNetwork(link_gbps=25, slowdown=2500, buffer=packets(466), ...)

    Topology(n_hosts=..., program=..., network=net)

The runner converts it for the path MTU the hosts use (:meth:`ModelledNetwork.convert`):

- rate: every switch egress port runs at ``link_gbps / slowdown``
  (``set_port_rate_bps``);
- delay: every link's one-way delay is ``link_delay_us x slowdown``. On the
  soft target both links of a host-to-host path (host to switch, switch to
  host) are folded into the switch's egress port (``set_port_delay_us`` of
  twice that); on BMv2 Mininet's links delay each direction (netem);
- buffer and thresholds: bytes become packets of a full-size frame at the
  path MTU (Ethernet + IPv4 + UDP + BTH + payload + ICRC), rounded to the
  nearest packet, at least 1; packet counts stay as they are (they do not
  scale with rate: a queue of k packets is k packet times at any rate).
  The egress queues are made as deep as the buffer, or, without one, as
  deep as RED needs (Kmax + 1 packets, at least the switch's default 64);
- PFC (soft target): the XOFF and XON thresholds per ingress port, in the
  same units, become ``set_pfc XOFF XON`` (switches/soft/runtime/pfc.py);
  XOFF must lie below the queue depth, or queues drop before they pause.

The conversion (every input, every result, the frame size used) goes into
``summary.json`` under ``network``.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any

from hosts.roce.constants import BTH_LEN, FRAME_OVERHEAD, ICRC_LEN

__all__ = ["KB", "NetworkError", "Size", "kbytes", "packets", "Red", "Pfc", "ModelledNetwork",
           "ScaledLinks", "Conversion", "full_frame_bytes", "DEFAULT_QUEUE_PKTS"]

KB = 1000  # the papers' KB (HPCC, DCQCN) are 1000 bytes
DEFAULT_QUEUE_PKTS = 64  # BMv2's and the soft switch's default queue depth


class NetworkError(ValueError):
    """A modelled network that cannot be converted; the message says why."""


def full_frame_bytes(path_mtu: int) -> int:
    """A full-size RoCEv2 data frame at ``path_mtu``: Ethernet + IPv4 + UDP +
    BTH + payload + ICRC (what a switch queue holds and its rate limiter counts)."""
    return FRAME_OVERHEAD + BTH_LEN + path_mtu + ICRC_LEN


@dataclass(frozen=True)
class Size:
    """A queue depth or threshold in the modelled network: bytes or packets."""

    bytes: float | None = None
    packets: int | None = None

    def __post_init__(self) -> None:
        if (self.bytes is None) == (self.packets is None):
            raise NetworkError("a Size is bytes or packets (exactly one)")
        if (self.bytes is not None and self.bytes <= 0) or (
                self.packets is not None and self.packets <= 0):
            raise NetworkError(f"{self.text()}: a size must be positive")

    def to_packets(self, frame_bytes: int) -> int:
        if self.packets is not None:
            return self.packets
        assert self.bytes is not None
        return max(1, round(self.bytes / frame_bytes))

    def text(self) -> str:
        return f"{self.packets} packets" if self.packets is not None else f"{self.bytes:g} B"


def kbytes(n: float) -> Size:
    """``n`` KB (1000 bytes, as the papers count)."""
    return Size(bytes=n * KB)


def packets(n: int) -> Size:
    return Size(packets=n)


@dataclass(frozen=True)
class Red:
    """RED/ECN marking on the egress queue's depth: none below ``kmin``,
    probability rising linearly to ``pmax`` at ``kmax``. ``command`` is the
    switch line that configures the program's marker, with ``{kmin}`` and
    ``{kmax}`` (packets), ``{pmax}`` (0..1) and ``{pmax_percent}`` (integer percent)."""

    kmin: Size
    kmax: Size
    pmax: float
    command: str

    def __post_init__(self) -> None:
        if not 0 < self.pmax <= 1:
            raise NetworkError(f"RED pmax {self.pmax} must be in (0, 1]")
        if "{kmin}" not in self.command or "{kmax}" not in self.command:
            raise NetworkError("Red.command needs {kmin} and {kmax} placeholders")


@dataclass(frozen=True)
class Pfc:
    """Priority flow control: an ingress port pauses the hop before it once
    ``xoff`` of its bytes (or packets) wait in the switch's egress queues,
    and resumes it at ``xon``."""

    xoff: Size
    xon: Size


@dataclass(frozen=True)
class Conversion:
    """What the runner sets for a :class:`ModelledNetwork`, and from what."""

    path_mtu: int
    frame_bytes: int
    link_bps: float                # testbed rate of every switch egress port
    link_delay_us: float           # testbed one-way delay of every link
    port_delay_us: int             # soft target: both links of a path on the egress port
    queue_depth_pkts: int
    kmin_pkts: int | None
    kmax_pkts: int | None
    pmax: float | None
    packet_time_us: float          # a full frame on a testbed link
    commands: tuple[str, ...] = field(default=())
    pfc_xoff_pkts: int | None = None
    pfc_xon_pkts: int | None = None

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


class ScaledLinks:
    """An experiment's parameters with every switch port and host NIC at
    ``link_mbps``, modelling NICs of ``nic_gbps``: the links' rate in b/s and
    the slowdown, nic_gbps / link_mbps (every modelled time runs that many
    times longer). A plain class, not a dataclass: it adds no field, so each
    experiment's Params keep their parameters' order."""

    if TYPE_CHECKING:
        link_mbps: float
        nic_gbps: float

    @property
    def link_bps(self) -> float:
        return self.link_mbps * 1e6

    @property
    def slowdown(self) -> float:
        return self.nic_gbps * 1e9 / self.link_bps


@dataclass(frozen=True)
class ModelledNetwork:
    """The network a paper ran on, in its units (see the module docstring)."""

    link_gbps: float
    slowdown: float
    link_delay_us: float = 0.0     # one-way propagation delay of each link
    buffer: Size | None = None     # egress queue per port; None: as deep as RED needs
    red: Red | None = None
    pfc: Pfc | None = None         # None: a lossy fabric (full queues drop)

    def __post_init__(self) -> None:
        if self.link_gbps <= 0 or self.slowdown <= 0:
            raise NetworkError("link_gbps and slowdown must be positive")
        if self.link_delay_us < 0:
            raise NetworkError("link_delay_us must be >= 0")

    @property
    def link_bps(self) -> float:
        """The testbed's link rate."""
        return self.link_gbps * 1e9 / self.slowdown

    def packet_time_us(self, path_mtu: int) -> float:
        """A full frame's time on a modelled link."""
        return full_frame_bytes(path_mtu) * 8 / (self.link_gbps * 1e3)

    def base_rtt_us(self) -> float:
        """Modelled propagation round trip between two hosts of a one-switch
        topology (two links each way)."""
        return 4 * self.link_delay_us

    def convert(self, path_mtu: int) -> Conversion:
        frame = full_frame_bytes(path_mtu)
        kmin = self.red.kmin.to_packets(frame) if self.red else None
        kmax = self.red.kmax.to_packets(frame) if self.red else None
        if kmin is not None and kmax is not None and kmin > kmax:
            raise NetworkError(f"RED kmin ({kmin} packets) is above kmax ({kmax} packets) "
                               f"for {frame}-byte frames")
        if self.buffer is not None:
            depth = self.buffer.to_packets(frame)
            if kmax is not None and depth <= kmax:
                raise NetworkError(
                    f"buffer {self.buffer.text()} = {depth} packets of {frame} B cannot hold "
                    f"RED's kmax {kmax} packets: marking would never reach pmax")
        else:
            depth = max(DEFAULT_QUEUE_PKTS, (kmax or 0) + 1)
        delay = self.link_delay_us * self.slowdown
        cmds = [f"set_port_rate_bps {int(round(self.link_bps))}", f"set_queue_depth {depth}"]
        if self.red is not None:
            cmds.append(self.red.command.format(
                kmin=kmin, kmax=kmax, pmax=self.red.pmax,
                pmax_percent=int(round(self.red.pmax * 100))))
        xoff = xon = None
        if self.pfc is not None:
            xoff = self.pfc.xoff.to_packets(frame)
            xon = self.pfc.xon.to_packets(frame)
            if not xon < xoff < depth:
                raise NetworkError(
                    f"PFC XON {self.pfc.xon.text()} = {xon} and XOFF {self.pfc.xoff.text()} = "
                    f"{xoff} packets of {frame} B need XON < XOFF < the queue depth {depth}")
            cmds.append(f"set_pfc {xoff} {xon}")
        return Conversion(
            path_mtu=path_mtu, frame_bytes=frame, link_bps=self.link_bps, link_delay_us=delay,
            port_delay_us=int(round(2 * delay)), queue_depth_pkts=depth, kmin_pkts=kmin,
            kmax_pkts=kmax, pmax=self.red.pmax if self.red else None,
            packet_time_us=frame * 8 / self.link_bps * 1e6, commands=tuple(cmds),
            pfc_xoff_pkts=xoff, pfc_xon_pkts=xon)

    def record(self, path_mtu: int) -> dict[str, Any]:
        """The modelled values and their conversion, for summary.json."""
        conv = self.convert(path_mtu)
        pkt_us = self.packet_time_us(path_mtu)
        return {
            "modelled": {
                "link_gbps": self.link_gbps, "slowdown": self.slowdown,
                "link_delay_us": self.link_delay_us,
                "buffer": self.buffer.text() if self.buffer else None,
                "red": None if self.red is None else {
                    "kmin": self.red.kmin.text(), "kmax": self.red.kmax.text(),
                    "pmax": self.red.pmax},
                "pfc": None if self.pfc is None else {
                    "xoff": self.pfc.xoff.text(), "xon": self.pfc.xon.text()},
                "packet_time_us": pkt_us,
                "base_rtt_us": self.base_rtt_us(),
                "base_rtt_pkts": self.base_rtt_us() / pkt_us,
            },
            "testbed": conv.as_dict(),
        }

