"""EPIC-II AllReduce through one P4 switch against the host ring (EPIC Fig. 13 / Table 9).

Topology: ``ranks`` hosts around one soft switch running
``switches/p4/epic.p4`` (EPIC Mode-II aggregation + IPv4 routing); every
switch port and every host NIC runs at ``link_mbps``. Three phases, one per
scheme, each sweeping the message sizes (``min_kib`` .. ``max_kib``, powers
of 4) with ``iterations`` AllReduces of int32 per size:

- ``epic``: CommLib's EPIC collectives (hosts/commlib/epic.py): one RC QP
  per rank to the switch endpoint, data in packets of 64 int32 (256 B),
  summed in the switch, multicast back, at most ``2**window_log2`` packets
  per rank in flight (the switch's window: epic.p4 is compiled with
  ``EPIC_WINDOW_LOG2``). The runner installs the group once the ranks
  reported their QPNs (the controller's job in the paper);
- ``ring``: CommLib's Ring AllReduce (one ring) at the default path MTU,
  1024 B (the paper's NCCL "1 KB");
- ``ring256``: the same ring with a 256 B path MTU, the payload EPIC is held
  to (the paper's NCCL forced to 256 B).

A ``warmup`` phase first runs one EPIC AllReduce of ``warmup_kib`` on another
group, so that the first measured phase does not pay for the ranks' and the
switch's first packets (and, with ``backend=pypy``, for the JIT's first
compilations). It is recorded but is not a measurement and is outside the
fidelity verdict (summary.json ``fidelity.warmup`` has its numbers). The
switch runs the CPython data path (``DATA_PATH``): see there why.

Every rank checks every result bit for bit. Scale: the paper's NICs run at
100 Gb/s (``nic_gbps``); the slowdown is nic_gbps / link_mbps, so the
transport's timers keep the paper's values in units of packet times.
Algorithm throughput = message bytes / completion time (the slowest rank's
collective time), reported in Mb/s and scaled to the paper's 100 Gb/s NIC.

Keys (top level of summary.json): ``sizes`` (bytes), ``algbw`` (Mb/s per
scheme, per size), ``algbw_paper_gbps`` (the same scaled to nic_gbps),
``ratio_large`` (EPIC / ring at the largest size), ``ratio_large_256`` (EPIC /
ring256), ``ideal_ratio`` (2(N-1)/N), ``link_fraction`` (EPIC algbw / link
rate at the largest size), ``bit_exact``; ``paper`` holds the paper's values
(PAPER below) and ``model`` this testbed's ideal values with its header
overheads.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, TypedDict

from hosts.agent_spec import EPIC_WINDOW, CollectiveSpec, JobSpec, TransportSpec
from hosts.commlib.epic import ELEMS, PACKET_BYTES, WINDOW
from hosts.roce.constants import AETH_LEN, BTH_LEN, FRAME_OVERHEAD, ICRC_LEN
from testbed.claims import Claim
from testbed.epic import window_defines
from testbed.experiment import FidelityLimits, PhasePlan, RunPlan, Topology, param
from testbed.modelled import ScaledLinks
from testbed.net import host_addr
from testbed.summary import Summary
from testbed.timeline import load_phase

NAME = "epic-allreduce"
# rxe: unmodified rdma_rxe ranks accept the switch's sums and reflected ACKs
# (switches/p4/EPIC.md, "rdma_rxe ranks"); tests/integration/test_rxe_epic.py
HOST_PROVIDERS = ("udp", "rxe")
PROGRAM = "switches/p4/epic.p4"
SCHEMES = ("epic", "ring", "ring256")
HEADLINE = ("ratio_large", "ratio_large_256", "ideal_ratio", "link_fraction", "bit_exact")

# The paper's values for this experiment's keys (Yuan et al., SIGCOMM 2026,
# Table 9 and Fig. 13: 8 ranks, one Tofino switch, 100 Gb/s ports, AllReduce
# algorithm throughput in Gb/s).
class Paper(TypedDict):
    """The paper's values (Table 9, Fig. 13)."""

    ranks: int
    nic_gbps: float
    message_bytes: list[int]
    algbw_gbps: dict[str, dict[str, float]]     # size -> scheme -> Gb/s
    ratio_large: float
    ratio_large_256: float
    ideal_ratio: float
    link_fraction: float
    ratio_small: float


PAPER: Paper = {
    "ranks": 8,
    "nic_gbps": 100.0,
    "message_bytes": [4 * 1024, 1 << 30],       # Fig. 13's sizes: 4 KB .. 1 GB
    "algbw_gbps": {
        "4KiB": {"epic": 5.42, "ring": 0.015, "ring256": 0.015},
        "1GiB": {"epic": 65.3, "ring": 48.0, "ring256": 41.1},
    },
    "ratio_large": round(65.3 / 48.0, 3),        # 1.36
    "ratio_large_256": round(65.3 / 41.1, 3),    # 1.59
    "ideal_ratio": 1.75,                         # 2(N-1)/N at N = 8
    "link_fraction": 0.653,                      # 65.3 of 100 Gb/s
    "ratio_small": round(5.42 / 0.015),          # 361: EPIC-II / ring at 4 KB
}

# The hosts' per-message latencies the paper profile models (the paper does not
# give them; each value is a public figure, docs/experiments/analysis/epic-allreduce.md):
# - nic_latency_us: the NIC's latency per message, NVIDIA's for ConnectX-6
#   ("sub-600ns latency", ConnectX-6 EN user manual, Introduction), the
#   100 GbE adapter family of the paper's servers (an assumption: the paper
#   names no model);
# - step_overhead_us: the host library's time per step, NCCL's own model of a
#   ring step across the network with its Simple protocol, the one this
#   testbed's ring follows (a whole chunk per step, a completion before the
#   next): hwLat[NET][Ring][Simple] = 14 us in NVIDIA/nccl src/graph/tuning.cc
#   (from 2.18.1, April 2023, to the current release). EPIC pays it once per
#   round, the ring once per step.
HOST_LATENCY: dict[str, float] = {"nic_latency_us": 0.6, "step_overhead_us": 14.0}

# What the report (testbed report) checks against Table 9 and Fig. 13: ratios
# and link fractions within 10% of the paper's, EPIC ahead of the ring.
_FIG13_PLOTS = ("allreduce_algbw.png",)
REFERENCE = PAPER   # the values CLAIMS take
CLAIMS = (
    Claim("Table 9", "at 1 GB, EPIC-II is 1.36x the host ring at 1 KB packets",
          key="ratio_large", paper=PAPER["ratio_large"], direction="above", versus=1.0,
          rel_tol=0.10, plots=_FIG13_PLOTS),
    Claim("Table 9", "at 1 GB, EPIC-II is 1.59x the host ring forced to 256-byte packets",
          key="ratio_large_256", paper=PAPER["ratio_large_256"], direction="above", versus=1.0,
          rel_tol=0.10, plots=_FIG13_PLOTS),
    Claim("Table 9", "at 1 GB, EPIC-II reaches 65% of the 100 Gb/s link",
          key="link_fraction", paper=PAPER["link_fraction"], rel_tol=0.10, plots=_FIG13_PLOTS),
    Claim("Fig. 13", "at 4 KB, EPIC-II is more than a hundred times the ring (361x; "
          "latency-bound)", key="ratio_small", paper=PAPER["ratio_small"], direction="above",
          versus=100.0, rel_tol=0.10, plots=_FIG13_PLOTS),
)

# A communicator of N ranks takes 2N+1 consecutive groups (gids, QPNs) and twice
# as many multicast groups from these bases (testbed.epic.communicator_span).
ENDPOINT = {"switch_ip": "10.255.0.1", "qpn": 0x100, "gid": 0, "mgid": 1, "start_psn": 0}
# The warm-up phase's groups, from gid 32: the measured communicator's 2N+1 fit below.
WARMUP_ENDPOINT = {"switch_ip": "10.255.0.1", "qpn": 0x200, "gid": 32, "mgid": 0x100,
                   "start_psn": 0}
MAX_RANKS = 15      # 2N+1 groups below the warm-up's gid 32
# The soft switches' data path in every EPIC experiment. At 0.5 Mb/s links a
# switch forwards a few hundred to a few thousand packets a second, which
# CPython does at a fraction of a core with no pause. PyPy's JIT went on
# compiling traces for the first ~20 s of EPIC traffic and stopped the data
# path for 50-150 ms at a time (PYPYLOG: 702 traces in an epic-allreduce
# --quick run, the longest 153 ms, some 10 s in), so no quick run was
# faithful; with CPython, epic-allreduce --quick lagged at most 6.5 ms and
# epic-tree --quick 3 ms, both faithful (docs/experiments/analysis/epic-allreduce.md).
DATA_PATH = "python"
# The EPIC switch's window W = 2**window_log2 packets per rank in flight
# (EPIC_WINDOW_LOG2 of epic.p4: its 2W slots per group). The default is the
# program's own, 32 packets. The soft switch keeps 2W x 128 groups slots in 67
# registers (64 sums, the PSN tag, the bitmap, the counter), one 8-byte list
# entry each: 2.2 million entries, 18 MB, at W = 128 (the paper profile's);
# 17.6 million, 140 MB, at the largest, W = 1024 (building that switch grew
# the process by 126 MB).
DEFAULT_WINDOW_LOG2 = WINDOW.bit_length() - 1          # 5: W = 32
MAX_WINDOW_LOG2 = 10


def check_window_log2(window_log2: int) -> None:
    """ValueError unless ``window_log2`` is an experiment's window: 1..MAX_WINDOW_LOG2
    (the soft switches' slot registers grow with it)."""
    if not 1 <= window_log2 <= MAX_WINDOW_LOG2:
        raise ValueError(f"window_log2 must be 1..{MAX_WINDOW_LOG2} (a window of 2 to "
                         f"{1 << MAX_WINDOW_LOG2} packets per rank; each soft switch keeps "
                         f"2W slots per group), not {window_log2}")


def check_epic_ranks(payload: str, nic_latency_us: float, step_overhead_us: float,
                     window_log2: int) -> None:
    """ValueError unless the EPIC experiments' host model is: real or phantom
    payloads, no negative latency or per-step overhead, a window of
    ``check_window_log2``."""
    if payload not in ("real", "phantom"):
        raise ValueError(f"payload must be real or phantom, not {payload!r}")
    if nic_latency_us < 0 or step_overhead_us < 0:
        raise ValueError("nic_latency_us and step_overhead_us must be >= 0")
    check_window_log2(window_log2)


def bdp_window_log2(link_gbps: float, nic_latency_us: float, depth: int = 2) -> int:
    """log2 of the smallest power-of-two window (packets per rank) that keeps a
    rank's link busy: the bandwidth-delay product of its round trip through
    the tree, doubled because CommLib refills the window in halves. ``depth``
    is the paper's H, the tree's levels counting the ranks: 2 for one switch,
    3 for Tree-3-2 (ranks, leaf switches, root).

    EPIC sizes Mode-II's buffers to the whole path's bandwidth-delay product:
    4(H-1)BL for a tree of depth H, links of rate B and latency L (Yuan et
    al., SIGCOMM 2026, section 5), held as 2W slots (section 4.3: two windows
    of W messages of M packets), i.e. a window W of one round trip's BDP,
    2(H-1)BL. A rank's round trip is its upload's frame up the H-1 links to
    the root and the sum's back down them (every switch stores and forwards
    a frame: one frame time per link), the ACK of the sum up to the first
    switch and its reflection down (only the first switch sees ACKs), and the
    NIC's per-message latency at both ends (the sender's before its upload
    leaves, the receiver's before its ACK). CommLib keeps two SENDs of W/2
    packets outstanding and posts the next only when one is acknowledged in
    full, so only W/2 are sure to be in flight: W/2 must cover the BDP."""
    if depth < 2:
        raise ValueError(f"a tree has depth >= 2 (ranks and a switch), not {depth}")
    bits_per_ns = link_gbps
    rtt_ns = (2 * nic_latency_us * 1000
              + 2 * (depth - 1) * frame_bytes(PACKET_BYTES) * 8 / bits_per_ns
              + 2 * (BTH_LEN + AETH_LEN + ICRC_LEN + FRAME_OVERHEAD) * 8 / bits_per_ns)
    bdp_pkts = rtt_ns * bits_per_ns / 8 / frame_bytes(PACKET_BYTES)
    return max(1, math.ceil(math.log2(2 * bdp_pkts)))


class PaperHosts(TypedDict):
    """A paper profile's host model: HOST_LATENCY's NIC and host library, and
    the window sized to the paper's links (bdp_window_log2)."""

    nic_latency_us: float
    step_overhead_us: float
    window_log2: int


def paper_hosts(nic_gbps: float, depth: int = 2) -> PaperHosts:
    """The EPIC experiments' paper profiles' ``nic_latency_us``,
    ``step_overhead_us`` and ``window_log2`` (``cls(..., **paper_hosts(...))``):
    HOST_LATENCY, and a window for links of ``nic_gbps`` through a tree of
    ``depth`` (bdp_window_log2)."""
    return PaperHosts(nic_latency_us=HOST_LATENCY["nic_latency_us"],
                      step_overhead_us=HOST_LATENCY["step_overhead_us"],
                      window_log2=bdp_window_log2(nic_gbps, HOST_LATENCY["nic_latency_us"],
                                                  depth=depth))


# The parameters every EPIC experiment declares, one declaration each: each
# experiment's Params calls these where it lists the parameter (a shared
# dataclass base would put its fields first and so reorder each experiment's
# `testbed run NAME --help`). The arguments are the parts of a meaning that
# differ from one experiment to another.
def link_mbps_param() -> float:
    return param(0.5, "rate of every switch port and host NIC", "Mb/s")


def nic_gbps_param(default: float = 100.0) -> float:
    return param(default, "the paper's NIC: slowdown = nic_gbps / link_mbps", "Gb/s")


def backend_param(switches: str = "switch's") -> str:
    return param(DATA_PATH, f"the soft {switches} data path: python or pypy")


def seed_param() -> int:
    return param(1, "seed of the ranks' input data")


def payload_param(phantom: str = "the same packets and timing without the data") -> str:
    return param("real", f"real (every result checked bit for bit) or phantom ({phantom})")


def nic_latency_param() -> float:
    return param(0.0, "the NIC's per-message latency: a posted send leaves no sooner (in the "
                      "paper NIC's time, x slowdown)", "us")


def step_overhead_param(per: str = "step (ring step, EPIC round) before it posts the step's "
                                   "send") -> float:
    return param(0.0, f"the host library's time per {per} (in the paper NIC's time, "
                      "x slowdown)", "us")


def window_log2_param(detail: str, switches: str = "the EPIC switch's") -> int:
    """``detail``: what follows "packets per rank in flight" in the meaning."""
    return param(DEFAULT_WINDOW_LOG2, f"{switches} window: 2**window_log2 packets per rank "
                                      f"in flight{detail}", "log2 packets")


class EpicRates(ScaledLinks):
    """An EPIC experiment's Params' ``slowdown`` (ScaledLinks) and ``window``,
    from its ``nic_gbps``, ``link_mbps`` and ``window_log2``. A plain class, not a
    dataclass: it adds no field, so each experiment keeps its parameters'
    order."""

    if TYPE_CHECKING:
        nic_latency_us: float
        window_log2: int

    @property
    def window(self) -> int:
        """The EPIC switch's window W in packets per rank."""
        return 1 << self.window_log2

    def transport_scale(self) -> dict[str, float]:
        """The ranks' transport scale (TransportSpec.scale): the slowdown, the
        paper's NIC rate and its per-message latency, if any."""
        scale = {"slowdown": self.slowdown, "nic_rate_bps": self.nic_gbps * 1e9}
        if self.nic_latency_us:
            scale["nic_latency_us"] = self.nic_latency_us
        return scale


@dataclass(frozen=True)
class Params(EpicRates):
    ranks: int = param(8, "hosts in the AllReduce, one rank each", "ranks")
    min_kib: int = param(4, "smallest message of the size sweep (sizes x4 up to max_kib)",
                         "KiB")
    max_kib: int = param(1024, "largest message of the size sweep", "KiB")
    iterations: int = param(2, "AllReduces per message size and scheme", "collectives")
    link_mbps: float = link_mbps_param()
    warmup_kib: int = param(256, "one EPIC AllReduce of this size before measuring (0: none)",
                            "KiB")
    nic_gbps: float = nic_gbps_param()
    backend: str = backend_param()
    seed: int = seed_param()
    payload: str = payload_param("the same packets and timing without the data, for sizes "
                                 "whose buffers would not fit in memory")
    nic_latency_us: float = nic_latency_param()
    step_overhead_us: float = step_overhead_param()
    window_log2: int = window_log2_param(" (epic.p4's EPIC_WINDOW_LOG2, 2W slots per group; "
                                         "the ranks keep to it)")

    @classmethod
    def quick(cls) -> Params:
        return cls(max_kib=64, iterations=1)

    @classmethod
    def paper(cls) -> Params:
        """Table 9 and Fig. 13's testbed: 8 ranks on one switch, every port and
        NIC at 100 Gb/s (slowdown 1), AllReduce from 4 KB to 1 GB (phantom
        payloads: eight ranks' 1 GB buffers would not fit in memory), the rings
        at 1 KB and 256 B packets as in the plan, HOST_LATENCY's NIC and host
        library, and EPIC's window sized to that network (bdp_window_log2):

            round trip = 2 x 0.6 us          NIC latency, sender and receiver
                       + 2 x 314 B / 100 Gb/s   data frame up, sum down: 2 x 25.1 ns
                       + 2 x 62 B / 100 Gb/s    ACK up, reflected down: 2 x 5.0 ns
                       = 1.260 us
            BDP        = 100 Gb/s x 1.260 us = 15.75 kB = 50.2 frames of 314 B
            W          >= 2 x 50.2 (refilled in halves) = 100.3 -> 128 = 2**7
        """
        lo, hi = PAPER["message_bytes"]
        return cls(ranks=PAPER["ranks"], link_mbps=PAPER["nic_gbps"] * 1000.0,
                   nic_gbps=PAPER["nic_gbps"], min_kib=lo // 1024, max_kib=hi // 1024,
                   iterations=1, payload="phantom", **paper_hosts(PAPER["nic_gbps"]))

    def __post_init__(self) -> None:
        if not 2 <= self.ranks <= MAX_RANKS:
            raise ValueError(f"ranks must be 2..{MAX_RANKS} (2N+1 switch groups for the "
                             "measured communicator and as many for the warm-up)")
        if not 0 < self.min_kib <= self.max_kib:
            raise ValueError("need 0 < min_kib <= max_kib")
        if self.warmup_kib < 0:
            raise ValueError("warmup_kib must be >= 0")
        if self.link_mbps <= 0 or self.nic_gbps <= 0 or self.iterations < 1:
            raise ValueError("link_mbps, nic_gbps and iterations must be positive")
        check_epic_ranks(self.payload, self.nic_latency_us, self.step_overhead_us,
                         self.window_log2)

    def sizes(self) -> list[int]:
        """Message sizes in bytes: min_kib, x4, ... up to max_kib (always included)."""
        out, k = [], self.min_kib
        while k < self.max_kib:
            out.append(k * 1024)
            k *= 4
        out.append(self.max_kib * 1024)
        return out


def frame_bytes(payload: int) -> int:
    """Bytes a RoCE SEND packet of ``payload`` bytes occupies on the link."""
    return payload + BTH_LEN + ICRC_LEN + FRAME_OVERHEAD


def ideal_algbw_fraction(scheme: str, ranks: int) -> float:
    """This testbed's ideal algorithm throughput for large messages, as a fraction
    of the link rate: payload per frame byte, times the bytes each rank sends
    per message byte (1 with the switch adding, 2(N-1)/N for the ring)."""
    if scheme == "epic":
        return PACKET_BYTES / frame_bytes(PACKET_BYTES)
    mtu = 1024 if scheme == "ring" else 256
    return mtu / frame_bytes(mtu) * ranks / (2 * (ranks - 1))


def plan(p: Params) -> RunPlan:
    sizes = p.sizes()
    return sweep_plan(p, SCHEMES,
                      notes=f"{p.ranks} ranks, AllReduce of {sizes[0]}..{sizes[-1]} B, "
                            f"{p.iterations} per size",
                      paper=PAPER, info={"elems_per_packet": ELEMS})


# The path MTU each scheme's ranks run: EPIC's switch packets, the ring at
# 1 KB, or forced to 256 B (the paper's second ring of Table 9)
SCHEME_MTU = {"epic": PACKET_BYTES, "ring": 1024, "ring256": 256}


def sweep_plan(p: AllReduceSweep, schemes: tuple[str, ...], notes: str,
               paper: Mapping[str, object], info: dict[str, object]) -> RunPlan:
    """One phase per scheme of ``p.iterations`` AllReduces of each of
    ``p.sizes()`` on one EPIC switch (after the warm-up, if any); ``notes``
    describe each phase; the experiment's ``paper`` values and ``info`` join
    the plan's record."""
    sizes = p.sizes()
    counts = tuple(s // 4 for s in sizes)
    scale = p.transport_scale()
    link_bps = p.link_mbps * 1e6
    phases = []
    if p.warmup_kib:
        phases.append(warmup_phase(p.ranks, p.warmup_kib, p.seed, scale,
                                   phase_timeout(p, "epic", [p.warmup_kib * 1024], link_bps),
                                   p.payload, p.step_overhead_us, p.window))
    for scheme in schemes:
        epic = scheme == "epic"
        t = TransportSpec(scale=scale, path_mtu=SCHEME_MTU[scheme])
        timeout = phase_timeout(p, scheme, sizes, link_bps)
        jobs = {}
        for r in range(p.ranks):
            h = host_addr(r + 1)
            coll = CollectiveSpec(
                rank=r, size=p.ranks, job_id=1, op="all_reduce", dtype="int32",
                count=counts[0], counts=counts, iterations=p.iterations, seed=p.seed,
                scheme="epic" if epic else "ring", epic=ENDPOINT if epic else None,
                payload=p.payload, step_overhead_us=p.step_overhead_us,
                epic_window=p.window if epic else EPIC_WINDOW)
            jobs[h.name] = JobSpec(host=h.name, ip=h.ip, transport=t, collective=coll,
                                   timeout_s=timeout)
        phases.append(PhasePlan(scheme, jobs, timeout_s=timeout,
                                epic_group=ENDPOINT if epic else None, notes=notes))
    topo = Topology(n_hosts=p.ranks, program=PROGRAM, backend=p.backend,
                    commands=(f"set_port_rate_bps {int(link_bps)}",),
                    packet_bytes=frame_bytes(PACKET_BYTES),
                    defines=window_defines(p.window_log2))
    return RunPlan(topology=topo, phases=tuple(phases), fidelity=FidelityLimits(),
                   info={"link_bps": link_bps, "paper": paper, "sizes": sizes,
                         **info, "epic_window_pkts": p.window})


def warmup_phase(ranks: int, kib: int, seed: int, scale: dict[str, float],
                 timeout_s: float, payload: str = "real",
                 step_overhead_us: float = 0.0, window: int = WINDOW) -> PhasePlan:
    """One EPIC AllReduce of ``kib`` KiB on the warm-up groups (WARMUP_ENDPOINT)
    before any measured phase (not measured, outside the fidelity verdict);
    ``window``: the switch's (packets per rank in flight)."""
    t = TransportSpec(scale=scale, path_mtu=PACKET_BYTES)
    jobs = {}
    for r in range(ranks):
        h = host_addr(r + 1)
        coll = CollectiveSpec(rank=r, size=ranks, job_id=2, op="all_reduce", dtype="int32",
                              count=kib * 256, seed=seed, scheme="epic", epic=WARMUP_ENDPOINT,
                              payload=payload, step_overhead_us=step_overhead_us,
                              epic_window=window)
        jobs[h.name] = JobSpec(host=h.name, ip=h.ip, transport=t, collective=coll,
                               timeout_s=timeout_s)
    return PhasePlan(
        "warmup", jobs, timeout_s=timeout_s, epic_group=WARMUP_ENDPOINT, warmup=True,
        notes=f"one EPIC AllReduce of {kib} KiB before measuring "
              "(not measured, outside the fidelity verdict)")


def phase_timeout(p: AllReduceSweep, scheme: str, sizes: list[int], link_bps: float) -> float:
    """Three times the ideal time of a phase of ``p.iterations`` AllReduces of
    each of ``sizes`` (bytes), plus set-up."""
    frac = ideal_algbw_fraction(scheme, p.ranks)
    ideal = sum(s * 8 / (link_bps * frac) for s in sizes) * p.iterations
    return 3 * ideal + 60 + 5 * len(sizes) * p.iterations


class AllReduceSweep(Protocol):
    """What a phase of AllReduces over message sizes is planned and read from
    (this module's Params, epic-training's)."""

    @property
    def ranks(self) -> int: ...
    @property
    def iterations(self) -> int: ...
    @property
    def payload(self) -> str: ...
    @property
    def seed(self) -> int: ...
    @property
    def link_mbps(self) -> float: ...
    @property
    def nic_gbps(self) -> float: ...
    @property
    def nic_latency_us(self) -> float: ...
    @property
    def step_overhead_us(self) -> float: ...
    @property
    def warmup_kib(self) -> int: ...
    @property
    def window_log2(self) -> int: ...
    @property
    def backend(self) -> str: ...
    @property
    def slowdown(self) -> float: ...
    @property
    def window(self) -> int: ...
    def transport_scale(self) -> dict[str, float]: ...
    def sizes(self) -> list[int]: ...


@dataclass(frozen=True)
class SchemeResult:
    """One scheme's phase of AllReduces: per size (``sizes``), the mean time
    and the algorithm throughput."""

    algbw: list[float]               # Mb/s
    time_s: list[float]
    bit_exact: bool | None           # None for phantom payloads (not checked)
    collectives: int
    retransmissions: int | None


@dataclass(frozen=True)
class Results(Summary):
    sizes: list[int]
    algbw: dict[str, list[float]]               # scheme -> per size, Mb/s
    algbw_paper_gbps: dict[str, list[float]]    # the same at the paper's NIC rate
    ratio_large: float | None
    ratio_large_256: float | None
    ideal_ratio: float
    link_fraction: float
    ratio_small: float | None
    bit_exact: bool | None
    schemes: dict[str, SchemeResult]
    model: dict[str, float]          # ideal fractions of the link, and the ideal ratios
    paper: Paper


def scheme_results(run_dir: Path, scheme: str, p: AllReduceSweep) -> SchemeResult:
    """One phase's AllReduces (``p.iterations`` of each of ``p.sizes()``, in
    turn): per size the mean completion time (the slowest rank's, s of the
    run's clock) and algorithm throughput (Mb/s), the bit-exact verdict and
    the QPs' retransmissions."""
    data = load_phase(run_dir, scheme)
    checks = data.all_events("collective_check")
    sizes = p.sizes()
    n_coll = len(sizes) * p.iterations
    by_iter: dict[int, set[str | None]] = {}
    for e in checks:
        by_iter.setdefault(e["iteration"], set()).add(e.get("sha256"))
    # phantom payloads are not checked: no verdict either way
    bit_exact = None if p.payload == "phantom" else (
        len(checks) == p.ranks * n_coll and all(e["ok"] for e in checks)
        and all(len(v) == 1 for v in by_iter.values()))
    durations: dict[int, float] = {}
    for e in data.all_events("collective_end"):
        d = (e["t_ns"] - e["t_start_ns"]) / 1e9
        durations[e["seq"]] = max(durations.get(e["seq"], 0.0), d)
    algbw = []
    times = []
    for i, size in enumerate(sizes):
        ds = [durations[s] for s in range(i * p.iterations, (i + 1) * p.iterations)
              if s in durations]
        mean = sum(ds) / len(ds) if ds else 0.0
        times.append(round(mean, 9))
        algbw.append(round(size * 8 / mean / 1e6, 5) if mean else 0.0)
    reports = data.all_events("pacer_report")
    return SchemeResult(algbw=algbw, time_s=times, bit_exact=bit_exact,
                        collectives=len(durations), retransmissions=retransmissions(reports))


def retransmissions(reports: list[dict[str, Any]]) -> int | None:
    """Packets the ranks' QPs resent, from their ``pacer_report`` events (on rxe
    hosts, the count each rank's DCQCN shim takes from the wire:
    hosts.roce.rxe.wire_counts.WireCounts); None for runs saved before rxe ranks
    counted them."""
    if not all("retransmits" in e["qp"] for e in reports):
        return None
    return sum(e["qp"]["retransmits"] for e in reports)


def analyze(run_dir: Path) -> Results:
    saved = json.loads((Path(run_dir) / "plan.json").read_text())
    p = Params(**saved["params"])
    sizes = p.sizes()
    res = {s: scheme_results(Path(run_dir), s, p) for s in SCHEMES}
    link = p.link_mbps
    algbw = {s: res[s].algbw for s in SCHEMES}
    scale = p.nic_gbps / p.link_mbps       # Mb/s here -> Gb/s at the paper's NIC (x slowdown)

    def ratio(a: float, b: float) -> float | None:
        return round(a / b, 4) if b else None

    return Results(
        sizes=sizes,
        algbw=algbw,
        algbw_paper_gbps={s: [round(v * scale, 3) for v in algbw[s]] for s in SCHEMES},
        ratio_large=ratio(algbw["epic"][-1], algbw["ring"][-1]),
        ratio_large_256=ratio(algbw["epic"][-1], algbw["ring256"][-1]),
        ideal_ratio=round(2 * (p.ranks - 1) / p.ranks, 4),
        link_fraction=round(algbw["epic"][-1] / link, 4),
        ratio_small=ratio(algbw["epic"][0], algbw["ring"][0]),
        bit_exact=None if p.payload == "phantom" else all(
            res[s].bit_exact for s in SCHEMES),
        schemes=res,
        model={s: round(ideal_algbw_fraction(s, p.ranks), 4) for s in SCHEMES}
        | {"ratio_large": round(ideal_algbw_fraction("epic", p.ranks)
                                / ideal_algbw_fraction("ring", p.ranks), 4),
           "ratio_large_256": round(ideal_algbw_fraction("epic", p.ranks)
                                    / ideal_algbw_fraction("ring256", p.ranks), 4)},
        paper=PAPER,
    )


def plot(run_dir: Path) -> list[Path]:
    from testbed.plotting import algbw_panel, measured_beside_reference, run_plots, save_figure

    plt, params, out = run_plots(run_dir)
    p = Params(**params)
    r = analyze(run_dir)
    labels = {"epic": "EPIC-II (in-network)", "ring": "host ring, MTU 1024",
              "ring256": "host ring, MTU 256"}
    fig, (ax, bx) = plt.subplots(1, 2, figsize=(12, 4.5))
    algbw_panel(ax, r.sizes, r.algbw, r.model, {s: labels[s] for s in SCHEMES},
                p.link_mbps, title=f"{p.ranks} ranks, links at {p.link_mbps:g} Mb/s "
                "(dotted: ideal)")
    ax.legend()
    # measured at the largest size vs the paper at 1 GiB, both as a fraction of the link
    measured_beside_reference(
        bx, [labels[s] for s in SCHEMES], [r.algbw[s][-1] / p.link_mbps for s in SCHEMES],
        [PAPER["algbw_gbps"]["1GiB"][s] / PAPER["nic_gbps"] for s in SCHEMES],
        measured_label=f"measured, {r.sizes[-1] // 1024} KiB",
        reference_label="paper, 1 GiB (Tofino, 100 Gb/s)",
        title="large messages: measured vs paper")
    bx.set_xticks(range(len(SCHEMES)), [labels[s] for s in SCHEMES], fontsize=8)
    bx.set_ylabel("algorithm throughput / link rate")
    bx.legend(fontsize=8)
    return [save_figure(fig, out / "allreduce_algbw.png")]
