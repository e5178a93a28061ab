"""The simulator bench's speed reference: a UDP flood down a chain in ns-3.

:func:`udp_flood` builds ``hops + 1`` nodes in a line joined by point-to-point
links, a full IPv4 stack on each (global routing), a UDP client at one end
paced at the link rate and a UDP server at the other; it times
``Simulator.Run()`` alone and reports packet-hops per wall second, the figure
the virtual-time engine is held against.

ns-3 comes from PyPI (``pip install ns3``: cppyy bindings, ~520 MB installed,
some seconds to import). Its Simulator and cppyy's interpreter are
per-process state, so figures meant to be compared are taken one process each
with :func:`udp_flood_subprocess` (``python -m testbed.sim.ns3_reference``).
"""

from __future__ import annotations

import argparse
import dataclasses
import importlib
import importlib.metadata
import importlib.util
import inspect
import json
import math
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

__all__ = [
    "Ns3Figure",
    "Ns3Unavailable",
    "main",
    "ns3_available",
    "udp_flood",
    "udp_flood_subprocess",
]

INSTALL_HINT = "pip install ns3"
PROG = "ns3_reference"
PORT = 9
# UDP 8 + IPv4 20 + PPP 2: what each datagram adds on the wire.
OVERHEAD_BYTES = 30
# UdpClient puts a 12-byte sequence/timestamp header inside each payload.
MIN_PACKET_BYTES = 12
MAX_PACKET_BYTES = 65535 - 28
PROJECT_ROOT = Path(__file__).resolve().parents[2]


class Ns3Unavailable(RuntimeError):
    """ns-3's Python bindings are not installed (or do not load)."""


@dataclass(frozen=True)
class Ns3Figure:
    packets: int  # packets sent by the source
    hops: int  # links each packet crosses
    packet_hops: int  # packets delivered at the sink x hops
    wall_s: float  # wall time of Simulator.Run() only
    packet_hops_per_s: float
    sim_s: float  # simulated seconds covered
    ns3_version: str

    @property
    def delivered(self) -> int:
        return self.packet_hops // self.hops if self.hops else 0

    def line(self) -> str:
        return (
            f"ns-3 {self.ns3_version}: {self.delivered}/{self.packets} packets over "
            f"{self.hops} hops in {self.sim_s:.6f} s simulated; Run() took {self.wall_s:.3f} s "
            f"wall: {self.packet_hops_per_s:,.0f} packet-hops/s"
        )


def ns3_available() -> bool:
    """Whether the ns3 wheel is installed; looks, does not import (importing takes seconds)."""
    try:
        return (
            importlib.util.find_spec("ns") is not None
            and importlib.util.find_spec("ns3") is not None
        )
    except (ImportError, ValueError):
        return False


def ns3_version() -> str:
    try:
        return importlib.metadata.version("ns3")
    except importlib.metadata.PackageNotFoundError:
        return "unknown"


def _load_ns() -> Any:
    if not ns3_available():
        raise Ns3Unavailable(f"ns-3's Python bindings are not installed: {INSTALL_HINT}")
    # The wheel's stub calls exit() when its bindings are missing, and its loader
    # raises bare Exceptions when it cannot find the ns-3 libraries.
    try:
        module = importlib.import_module("ns")
    except (Exception, SystemExit) as e:
        raise Ns3Unavailable(
            f"ns-3's Python bindings do not load ({e!r}); try {INSTALL_HINT}"
        ) from e
    return module.ns


def _check(hops: int, rate_bps: float, packet_bytes: int, packets: int, delay_ns: int) -> None:
    if hops < 1:
        raise ValueError(f"hops must be at least 1, not {hops}")
    if not rate_bps > 0:
        raise ValueError(f"rate_bps must be positive, not {rate_bps}")
    if not MIN_PACKET_BYTES <= packet_bytes <= MAX_PACKET_BYTES:
        raise ValueError(
            f"packet_bytes must be in {MIN_PACKET_BYTES}..{MAX_PACKET_BYTES}, not {packet_bytes}"
        )
    if packets < 1:
        raise ValueError(f"packets must be at least 1, not {packets}")
    if delay_ns < 0:
        raise ValueError(f"delay_ns must not be negative, not {delay_ns}")


def udp_flood(
    *,
    hops: int = 3,
    rate_bps: float = 10e9,
    packet_bytes: int = 1024,
    packets: int = 200_000,
    delay_ns: int = 1000,
) -> Ns3Figure:
    """Send ``packets`` UDP datagrams down a ``hops``-link chain and time ``Simulator.Run()``.

    Sets up ns-3's Simulator in this process and destroys it afterwards; for
    more than one figure per process use :func:`udp_flood_subprocess`.
    """
    _check(hops, rate_bps, packet_bytes, packets, delay_ns)
    ns = _load_ns()

    wire_bits = (packet_bytes + OVERHEAD_BYTES) * 8
    # Rounded up to whole ns (ns-3's default resolution) so the source never
    # outruns the first link: its queue stays at one packet, nothing drops.
    interval_ns = max(1, math.ceil(wire_bits * 1e9 / rate_bps))

    nodes = ns.NodeContainer()
    nodes.Create(hops + 1)

    p2p = ns.PointToPointHelper()
    p2p.SetDeviceAttribute("DataRate", ns.DataRateValue(ns.DataRate(round(rate_bps))))
    # Larger datagrams would be fragmented, changing the packet count per hop.
    p2p.SetDeviceAttribute("Mtu", ns.UintegerValue(max(1500, packet_bytes + 28)))
    p2p.SetChannelAttribute("Delay", ns.TimeValue(ns.NanoSeconds(delay_ns)))

    ns.InternetStackHelper().Install(nodes)

    addresses = ns.Ipv4AddressHelper()
    addresses.SetBase(ns.Ipv4Address("10.0.0.0"), ns.Ipv4Mask("255.255.255.0"))
    last_link = None
    for i in range(hops):
        devices = p2p.Install(nodes.Get(i), nodes.Get(i + 1))
        last_link = addresses.Assign(devices)
        addresses.NewNetwork()
    assert last_link is not None
    ns.Ipv4GlobalRoutingHelper.PopulateRoutingTables()

    sink = ns.UdpServerHelper(PORT).Install(nodes.Get(hops))
    server = ns.DynamicCast[ns.UdpServer](sink.Get(0))

    client = ns.UdpClientHelper(last_link.GetAddress(1).ConvertTo(), PORT)
    client.SetAttribute("MaxPackets", ns.UintegerValue(packets))
    client.SetAttribute("Interval", ns.TimeValue(ns.NanoSeconds(interval_ns)))
    client.SetAttribute("PacketSize", ns.UintegerValue(packet_bytes))
    client.Install(nodes.Get(0))

    try:
        # No stop time: the client stops after MaxPackets and nothing else
        # schedules events, so Run() returns once the last packet is in.
        start = time.perf_counter()
        ns.Simulator.Run()
        wall_s = time.perf_counter() - start
        sim_s = float(ns.Simulator.Now().GetSeconds())
        delivered = int(server.GetReceived())
    finally:
        ns.Simulator.Destroy()

    packet_hops = delivered * hops
    return Ns3Figure(
        packets=packets,
        hops=hops,
        packet_hops=packet_hops,
        wall_s=wall_s,
        packet_hops_per_s=packet_hops / wall_s if wall_s > 0 else 0.0,
        sim_s=sim_s,
        ns3_version=ns3_version(),
    )


def _flood_argv(kw: dict[str, Any]) -> list[str]:
    defaults = {
        name: param.default for name, param in inspect.signature(udp_flood).parameters.items()
    }
    unknown = sorted(set(kw) - set(defaults))
    if unknown:
        raise TypeError(f"udp_flood_subprocess() got unexpected arguments: {', '.join(unknown)}")
    params = {**defaults, **kw}
    # Checked here so that a bad argument is a ValueError, not a child's usage error.
    _check(**params)
    return [
        "--hops", str(int(params["hops"])),
        "--rate-gbps", repr(float(params["rate_bps"]) / 1e9),
        "--packet-bytes", str(int(params["packet_bytes"])),
        "--packets", str(int(params["packets"])),
        "--delay-ns", str(int(params["delay_ns"])),
    ]  # fmt: skip


def udp_flood_subprocess(*, timeout_s: float | None = 900.0, **kw: Any) -> Ns3Figure:
    """:func:`udp_flood` in a child process of this interpreter (fresh Simulator and cppyy).

    ``kw`` are udp_flood's arguments. The child's import of ns-3 (seconds) is
    not in the figure: only its ``Simulator.Run()`` is timed.
    """
    argv = _flood_argv(kw)
    if not ns3_available():
        raise Ns3Unavailable(f"ns-3's Python bindings are not installed: {INSTALL_HINT}")
    cmd = [sys.executable, "-m", "testbed.sim.ns3_reference", "--json", *argv]
    # The project root as cwd puts the package on the child's path even when it
    # is not installed, and bounds the library search ns-3's loader does in cwd.
    proc = subprocess.run(
        cmd, cwd=PROJECT_ROOT, capture_output=True, text=True, timeout=timeout_s, check=False
    )
    last = proc.stderr.strip().splitlines()[-1:] or [""]
    if proc.returncode == 2 and last[0].startswith(f"{PROG}:"):
        raise Ns3Unavailable(last[0].removeprefix(f"{PROG}:").strip())
    if proc.returncode != 0:
        tail = "\n".join(proc.stderr.strip().splitlines()[-10:])
        raise RuntimeError(f"{' '.join(cmd)} exited {proc.returncode}:\n{tail}")
    # cppyy may print to stdout as well: the figure is the last JSON line.
    for out in reversed(proc.stdout.splitlines()):
        if out.startswith("{"):
            return _figure_from_json(out)
    raise RuntimeError(f"no JSON figure in the output of {' '.join(cmd)}:\n{proc.stdout[-2000:]}")


def _figure_from_json(text: str) -> Ns3Figure:
    data = json.loads(text)
    names = [f.name for f in dataclasses.fields(Ns3Figure)]
    return Ns3Figure(**{name: data[name] for name in names})


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m testbed.sim.ns3_reference",
        description="ns-3 UDP flood down a chain of point-to-point links: packet-hops/s of Run().",
    )
    parser.add_argument("--hops", type=int, default=3, help="links in the chain (default 3)")
    parser.add_argument("--rate-gbps", type=float, default=10.0, help="link rate (default 10)")
    parser.add_argument(
        "--packet-bytes", type=int, default=1024, help="UDP payload bytes (default 1024)"
    )
    parser.add_argument(
        "--packets", type=int, default=200_000, help="datagrams to send (default 200000)"
    )
    parser.add_argument(
        "--delay-ns", type=int, default=1000, help="propagation delay per link (default 1000)"
    )
    parser.add_argument("--json", action="store_true", help="print the figure as one JSON line")
    args = parser.parse_args(argv)
    try:
        figure = udp_flood(
            hops=args.hops,
            rate_bps=args.rate_gbps * 1e9,
            packet_bytes=args.packet_bytes,
            packets=args.packets,
            delay_ns=args.delay_ns,
        )
    except Ns3Unavailable as e:
        print(f"{PROG}: {e}", file=sys.stderr)
        return 2
    except ValueError as e:
        parser.error(str(e))
    if args.json:
        print(json.dumps(dataclasses.asdict(figure)), flush=True)
    else:
        print(figure.line(), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
