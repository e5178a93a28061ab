"""What the Symphony experiments share: the paper's network (§4.1: 10 Gb/s
links with DCQCN, RED after HPCC in KB of queue) on ``link_mbps`` links, and
Symphony's parameters in the modelled network's time (defaults: the paper's,
from testbed.symphony.SymphonyParams) (``SymphonyNetwork``); ring jobs on a
leaf-spine (``SymphonyFabric``), AllReduce jobs that share its hosts equally
(``SymphonyRing``); the paper's simulated network, declared once
for every paper profile (``PAPER_NETWORK``), laid out on the testbed's
leaf-spine (``paper_fabric``) and as ``SymphonyRing`` parameters
(``paper_ring_kwargs``); a run's parameters read back (``load_params``)."""

from __future__ import annotations

import dataclasses
import json
import statistics
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar, TypedDict, TypeVar

from hosts.agent_spec import TransportSpec, message_wire_bytes
from testbed.experiment import Topology, param
from testbed.modelled import (
    Conversion,
    ModelledNetwork,
    Pfc,
    Red,
    ScaledLinks,
    full_frame_bytes,
    kbytes,
    packets,
)
from testbed.net import LeafSpine
from testbed.symphony import SymphonyParams, config_command

PROGRAM = "switches/p4/symphony.p4"
QDEPTH_REGISTER = "MyEgress.qdepth_max"
# Read from every switch after each phase, per job id: the packets Symphony
# itself decided to mark, and its alpha when the job's last packet passed.
OBSERVED_REGISTERS = ("MyEgress.symphony.marks", "MyEgress.symphony.alpha")
RED_COMMAND = ("table_set_default MyEgress.ecn_config MyEgress.set_ecn_params "
               "{kmin} {kmax} {pmax_percent}")

_PAPER = SymphonyParams()

# The paper's simulation (§4.1, Table 1), in its units: a two-tier
# leaf-spine of 4 ToRs and 4 spines with 10 Gb/s links, one spine group (no
# oversubscription up to 128 nodes), 32 nodes by default, 8 MB chunks, ECMP on
# the 5-tuple; the collective a 2D ring of 8 x 4; HPCC's RDMA configuration
# (a lossless fabric with PFC, DCQCN); RED Kmin 50 KB, Kmax 100 KB, Pmax 0.2;
# Symphony's tau 0.25, T_win 100 us,
# k 0.01 (testbed.symphony.SymphonyParams' defaults); every figure over at
# least 20 seeds (Fig. 4b and 7b: 50 runs, Fig. 5: 100).
class MarkingFields(TypedDict):
    """RED's and Symphony's settings, as the paper gives them and as a paper
    profile sets them (PaperNetwork, RingFields)."""

    red_kmin_kb: float
    red_kmax_kb: float
    red_pmax: float
    k: float
    tau: float
    t_win_us: float


class PaperNetwork(MarkingFields):
    link_gbps: float
    tors: int
    spines: int
    nodes: int
    max_nodes: int
    ring_dims: str
    chunk_mb: int
    runs: int
    ecmp: str
    ecmp_hash: str
    dcqcn_preset: str
    pfc: bool


PAPER_NETWORK: PaperNetwork = {
    "link_gbps": 10.0, "tors": 4, "spines": 4, "nodes": 32, "max_nodes": 128,
    "ring_dims": "8x4",
    "chunk_mb": 8, "runs": 20, "ecmp": "5-tuple", "ecmp_hash": "crc32",
    "dcqcn_preset": "hpcc", "pfc": True,
    "red_kmin_kb": 50.0, "red_kmax_kb": 100.0, "red_pmax": 0.2,
    "k": _PAPER.k, "tau": _PAPER.tau, "t_win_us": _PAPER.t_win_us,
}
# HPCC's simulator (run.py, the configuration the paper follows): a switch's
# shared buffer is 16 MB per 50 Gb/s of NIC rate, each ingress port pauses once
# its share of the buffer passes (free buffer) >> 3, and resumes 3 KB below.
HPCC_BUFFER_MB_PER_50G = 16.0
ECMP_HASHES = ("crc16", "crc32")
HPCC_PFC_SHIFT = 3
HPCC_RESUME_KB = 3.0

# The quick profiles' fabric (SymphonyRing's defaults are the full
# profiles'): 4 Mb/s links, lossy. Their 256 KiB steps, shorter than a DCQCN
# period, seldom fill a queue; the runs take under a minute and run on rxe
# hosts, which obey no PFC pause.
class QuickFabric(TypedDict):
    link_mbps: float
    pfc: bool


QUICK_FABRIC: QuickFabric = {"link_mbps": 4.0, "pfc": False}


@dataclass(frozen=True)
class SymphonyNetwork(ScaledLinks):
    """Every switch port and host NIC at ``link_mbps``, modelling the paper's
    ``nic_gbps`` NICs: the slowdown is nic_gbps / link_mbps, and every timer
    of the model (DCQCN's, Symphony's windows, the transport's) is that many
    times longer; bytes are not scaled."""

    link_mbps: float = param(20.0, "rate of every switch port and host NIC", "Mb/s")
    nic_gbps: float = param(10.0, "the paper's NICs: slowdown = nic_gbps / link_mbps", "Gb/s")
    # Symphony (paper §4.1), modelled time
    k: float = param(_PAPER.k, "Symphony's marking factor: a packet of an outpacing step is "
                               "marked with probability min(1, k x alpha x psn / psn_rec)")
    tau: float = param(_PAPER.tau, "Symphony: alpha grows after a T_win window in which at "
                                   "least this share of the packets outpaced, else shrinks")
    t_win_us: float = param(_PAPER.t_win_us, "Symphony's alpha window T_win, in modelled time",
                            "us")
    psn_window_us: float = param(_PAPER.psn_window_us, "Symphony resets the lagging step's "
                                 "PSN record this often, in modelled time", "us")
    n_warmup: int = param(_PAPER.n_warmup, "Symphony marks nothing until the lagging step's "
                                           "PSN record passes this", "packets")
    n_sample: int = param(_PAPER.n_sample, "Symphony changes alpha only after a T_win window "
                                           "of more than this many packets", "packets")
    # RED (paper §4.1, after HPCC), modelled bytes of queue
    red_kmin_kb: float = param(PAPER_NETWORK["red_kmin_kb"], "RED Kmin: queue where ECN "
                               "marking starts (1 KB = 1000 bytes)", "KB")
    red_kmax_kb: float = param(PAPER_NETWORK["red_kmax_kb"], "RED Kmax: queue where the "
                               "marking probability reaches red_pmax", "KB")
    red_pmax: float = param(PAPER_NETWORK["red_pmax"], "RED marking probability at Kmax")
    queue_pkts: int = param(256, "capacity of each port's queue (above Kmax, with room for "
                                 "bursts)", "packets")
    # PFC (a lossless fabric, as HPCC's RDMA configuration runs, which the
    # paper's simulations follow). HPCC's switches size XOFF dynamically from
    # a shared buffer; the paper gives no figure. Here XOFF lies above RED's
    # Kmax, so that a queue fed by one ingress is fully marked before it
    # pauses (ECN acts first, as the paper intends), and two ingress ports at
    # XOFF plus what their senders still have in flight fit the 256-packet
    # queue; XON is XOFF less two full frames. Off here (symphony-two-flows:
    # the prototype's one port); on for the ring experiments (SymphonyRing).
    pfc: bool = param(False, "PFC: every switch port pauses the hop before it (a lossless "
                             "fabric; the udp hosts obey)")
    pfc_xoff_kb: float = param(110.0, "PFC XOFF: an ingress port pauses the hop before it once "
                                      "this much of its traffic waits in the egress queues",
                               "KB")
    pfc_xon_kb: float = param(108.0, "PFC XON: the pause ends once no more than this waits",
                              "KB")
    path_mtu: int = param(1024, "RoCE path MTU: payload per packet", "bytes")
    dcqcn_preset: str = param("connectx", "DCQCN parameters: connectx (mlx5 NIC defaults; "
                                          "ConnectX-6 in the prototype), hpcc (HPCC's simulator, "
                                          "which the paper's simulations follow) or zhu2015")
    # A full queue of queue_pkts holds 256 x 0.87 = 222 us at 10 Gb/s, and a
    # fabric path crosses three: a timer below that retransmits packets that
    # are only queued (go-back-N: the whole window again).
    rto_us: float | None = param(None, "RoCE's retransmission timeout, in modelled time "
                                       "(none: the transport's 100 us)", "us")
    # Four ranks of ten QPs each and four switch daemons share two cores; with
    # the switches first the ranks were late for 15-25 % of their packets,
    # with the agents first 1.2 % at most.
    realtime: bool = param(True, "the host agents and the switches run at real-time priority "
                                 "(SCHED_FIFO)")
    realtime_agents_first: bool = param(True, "with realtime: the agents above the switches "
                                              "instead of below")
    # hosts/roce/shaping.py. Off here: with it a ring stalled once DCQCN had cut
    # its QPs to the preset's floor (docs/architecture.md, "On a small machine").
    host_qdisc_ahead_packets: float = param(
        0.0, "> 0: each host's interface serialises at the line rate and each sending QP at "
             "its DCQCN rate in a qdisc, a rank keeping up to this many full-size packets "
             "queued there (0: no qdisc, the pacer alone spaces the frames)", "packets")

    def __post_init__(self) -> None:
        if self.link_mbps <= 0 or self.nic_gbps <= 0:
            raise ValueError("link_mbps and nic_gbps must be positive")
        if self.path_mtu > 1024:
            raise ValueError("path_mtu above 1024 does not fit the links' 1500-byte frames")
        if not 0 < self.red_kmin_kb < self.red_kmax_kb or not 0 < self.red_pmax <= 1:
            raise ValueError("need 0 < red_kmin_kb < red_kmax_kb and red_pmax in (0, 1]")
        _ = self.conversion   # the modelled network must convert (queue above Kmax)
        if self.rto_us is not None and self.rto_us <= 0:
            raise ValueError("rto_us must be positive")
        _ = self.symphony     # SymphonyParams raises on bad values

    @property
    def symphony(self) -> SymphonyParams:
        return SymphonyParams(k=self.k, tau=self.tau, t_win_us=self.t_win_us,
                              psn_window_us=self.psn_window_us, n_warmup=self.n_warmup,
                              n_sample=self.n_sample)

    def transport_scale(self) -> dict[str, float]:
        """The hosts' time scale (TransportSpec.scale): the paper's NICs,
        dilated by the slowdown, with ``rto_us`` where set."""
        scale = {"slowdown": self.slowdown, "nic_rate_bps": self.nic_gbps * 1e9}
        if self.rto_us is not None:
            scale["rto_us"] = self.rto_us
        return scale

    def network(self) -> ModelledNetwork:
        """The paper's network in its units: ``nic_gbps`` links, RED in KB of
        queue (§4.1), the per-port buffer in packets."""
        return ModelledNetwork(
            link_gbps=self.nic_gbps, slowdown=self.slowdown, buffer=packets(self.queue_pkts),
            red=Red(kmin=kbytes(self.red_kmin_kb), kmax=kbytes(self.red_kmax_kb),
                    pmax=self.red_pmax, command=RED_COMMAND),
            pfc=Pfc(xoff=kbytes(self.pfc_xoff_kb), xon=kbytes(self.pfc_xon_kb))
            if self.pfc else None)

    @property
    def conversion(self) -> Conversion:
        """The network converted for this run's frames (raises ValueError when
        it cannot be, e.g. a queue not deeper than Kmax)."""
        return self.network().convert(self.path_mtu)


@dataclass(frozen=True)
class SymphonyFabric(SymphonyNetwork):
    """CommLib ring jobs (``channels`` parallel rings each) over the hosts of
    a ``leaves`` x ``spines`` leaf-spine of switches running symphony.p4: the
    fabric, the hosts' transport and what every ring job shares."""

    # Slowdown 3333. The runs' switches and agents all run at real-time
    # priority; at 4 Mb/s the full profile kept the machine 71-85% busy and
    # 3-7 of its 12 phases had a switch lagging past 50 ms; at 3 none passed
    # 38 ms (docs/experiments/analysis/symphony-ring.md). The quick profiles'
    # shorter steps run at 4.
    link_mbps: float = 3.0
    # above three full queues (see SymphonyNetwork.rto_us); a ConnectX's
    # local ACK timeout is 4.096 us x 2^k, milliseconds in common setups
    rto_us: float | None = 1000.0
    leaves: int = param(2, "leaf switches (at least 2: the rings cross the spines)",
                        "switches")
    spines: int = param(2, "spine switches", "switches")
    # 2 hosts per leaf over 2 spines keeps the fabric 1:1, as the paper's
    # (one spine group, no oversubscription up to 128 nodes): with 4 per
    # leaf every leaf's uplinks would carry twice their rate, and no ring
    # could run at the line rate its theoretical CCT assumes
    hosts_per_leaf: int = param(2, "hosts on each leaf, one rank each", "hosts")
    channels: int = param(2, "parallel rings per job", "rings")
    # The leaves' ECMP hash (ECMP_HASH of switches/p4/include/l3_ingress.p4).
    # A ring's 5-tuples differ only in the step tag's low bits, and crc16's
    # two low bits then take only a few values: at 32 nodes over 4 spines,
    # three of the 8 leaves send every step over 2 of their 4 uplinks and the
    # rest 3:1 (symphony-ring's page). crc32 spreads the same flows evenly, as
    # the paper's simulator's 5-tuple hash does.
    ecmp_hash: str = param("crc16", "the leaves' ECMP hash over the 5-tuple: crc16 or crc32")
    seeds: int = param(3, "runs of every scheme; each seed starts the steps at other tags "
                          "(under ECMP: other paths)", "runs")
    # PyPy forwards a packet for a third of CPython's CPU
    # (results/reference/forwarding-bench.json, testbed bench forwarding),
    # but its JIT compiles for the first seconds of traffic and stops the
    # data path meanwhile: symphony-ring --quick with the agents first lagged
    # 63-90 ms at most on PyPy (three runs, one with a 256 KiB warm-up)
    # against 51-56 ms on CPython (two runs, load average about 5 from the
    # run itself).
    backend: str = param("python", "the soft switches' data path: python or pypy")
    # The paper's simulations follow HPCC's RDMA configuration, a lossless
    # fabric; steps long enough for DCQCN to act (1 MiB: ~3 of its periods)
    # overflow lossy queues, and a retransmission timeout then outweighs
    # anything Symphony changes (docs/experiments/analysis/symphony-ring.md)
    pfc: bool = True
    # The ranks' and switches' first packets (and a PyPy JIT's first
    # compilations) fall in the warm-up.
    warmup_kb: int = param(64, "chunk of one untracked AllReduce before measuring, outside the "
                               "verdict (0: none)", "KiB")
    # 32 ranks' 8 MiB chunks are 256 MiB of input per rank: real buffers
    # would not fit in memory
    payload: str = param("real", "real (every result checked bit for bit) or phantom (the "
                                 "same packets and timing without the data)")

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.backend not in ("python", "pypy"):
            raise ValueError(f"backend {self.backend!r}: python or pypy")
        if self.payload not in ("real", "phantom"):
            raise ValueError(f"payload {self.payload!r}: real or phantom")
        if self.channels < 1:
            raise ValueError("channels must be >= 1")
        if self.ecmp_hash not in ECMP_HASHES:
            raise ValueError(f"ecmp_hash {self.ecmp_hash!r}: one of {', '.join(ECMP_HASHES)}")
        if self.warmup_kb < 0 or (self.warmup_kb * 1024) % (8 * self.channels):
            raise ValueError("warmup_kb must be >= 0 and split into int64 elements per channel")
        if self.leaves < 2:
            raise ValueError("leaves must be >= 2 (the rings cross the spines)")
        _ = self.fabric    # LeafSpine checks the sizes
        if self.seeds < 1:
            raise ValueError("seeds must be >= 1")

    @property
    def defines(self) -> tuple[tuple[str, str], ...]:
        """The program's preprocessor defines (Topology.defines): none at the
        default hash, so that runs at it compile what they always did."""
        return () if self.ecmp_hash == "crc16" else (("ECMP_HASH", self.ecmp_hash),)

    @property
    def ecmp(self) -> bool:
        return True

    @property
    def fabric(self) -> LeafSpine:
        return LeafSpine(leaves=self.leaves, spines=self.spines,
                         hosts_per_leaf=self.hosts_per_leaf, ecmp=self.ecmp)

    def topology(self, *, fabric: LeafSpine | None = None,
                 switch_commands: dict[str, tuple[str, ...]] | None = None,
                 priority_queues: int = 1) -> Topology:
        """The run's fabric (``fabric``, else this one's): every switch running
        symphony.p4 with this network's RED, PFC and Symphony configuration,
        plus a switch's own ``switch_commands`` and ``priority_queues`` per
        port."""
        fab = fabric or self.fabric
        return Topology(
            n_hosts=fab.n_hosts, program=PROGRAM, qdepth_register=QDEPTH_REGISTER,
            observed_registers=OBSERVED_REGISTERS,
            packet_bytes=full_frame_bytes(self.path_mtu), network=self.network(),
            commands=(config_command(self.symphony, self.slowdown),), fabric=fab,
            backend=self.backend, defines=self.defines,
            realtime=self.realtime,
            realtime_agents_first=self.realtime_agents_first,
            host_line_qdisc=self.host_qdisc_ahead_packets > 0,
            switch_commands=switch_commands or {},
            priority_queues=priority_queues)

    def transport(self) -> TransportSpec:
        return TransportSpec(scale=self.transport_scale(), dcqcn={"preset": self.dcqcn_preset},
                             path_mtu=self.path_mtu,
                             qdisc_ahead_packets=self.host_qdisc_ahead_packets, pfc=self.pfc)


@dataclass(frozen=True)
class SymphonyRing(SymphonyFabric):
    """Ring AllReduce jobs on a SymphonyFabric, ``JOBS_PER_FABRIC`` jobs
    sharing its hosts equally; each step of each channel is one RDMA WRITE of
    the channel's share of a ``chunk_kb`` chunk."""

    JOBS_PER_FABRIC: ClassVar[int] = 1

    chunk_kb: int = param(1024, "chunk per rank and step, split over the channels (paper: "
                                "8 MB)", "KiB")
    iterations: int = param(3, "AllReduces per job and phase", "collectives")

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.hosts_per_leaf % self.JOBS_PER_FABRIC:
            raise ValueError(f"hosts_per_leaf must split among {self.JOBS_PER_FABRIC} job(s)")
        if self.iterations < 1:
            raise ValueError("iterations must be >= 1")
        if self.chunk_kb < 1 or (self.chunk_kb * 1024) % (8 * self.channels):
            raise ValueError("chunk_kb must split into whole int64 elements per channel")

    @property
    def ranks(self) -> int:
        """Ranks per job."""
        return self.leaves * self.hosts_per_leaf // self.JOBS_PER_FABRIC

    @property
    def count(self) -> int:
        """int64 elements per rank: N chunks."""
        return self.chunk_kb * 1024 * self.ranks // 8

    @property
    def step_wire_s(self) -> float:
        """One ring step at line rate: every channel's share of the chunk."""
        per_channel = self.chunk_kb * 1024 // self.channels
        return self.channels * message_wire_bytes(per_channel, self.path_mtu) * 8 / self.link_bps

    @property
    def theoretical_cct_s(self) -> float:
        """One collective at line rate: 2 (N - 1) chunks per rank (a 2D
        ring moves the same bytes per rank, in fewer, larger steps)."""
        return 2 * (self.ranks - 1) * self.step_wire_s


@dataclass(frozen=True)
class PaperFabric:
    """The paper's nodes on ``testbed.net.LeafSpine``: ``leaves`` leaves of
    ``hosts_per_leaf`` nodes under ``spines`` spines."""

    leaves: int
    hosts_per_leaf: int
    spines: int

    @property
    def nodes(self) -> int:
        return self.leaves * self.hosts_per_leaf

    @property
    def ports(self) -> int:
        """A leaf's ports: its hosts and its uplinks."""
        return self.hosts_per_leaf + self.spines


def paper_fabric(nodes: int) -> PaperFabric:
    """``nodes`` of the paper's one spine group (§4.1: not oversubscribed up
    to 128 nodes) on the testbed's leaf-spine. LeafSpine has one link per
    leaf-spine pair, so a leaf carries its hosts' rate over the paper's 4
    spines only with 4 hosts: the paper's 4 ToRs of 8 nodes become 8 leaves
    of 4, its 128 nodes 32 leaves of 4 (1:1, ECMP over 4 uplinks)."""
    spines = PAPER_NETWORK["spines"]
    if not 2 * spines <= nodes <= PAPER_NETWORK["max_nodes"] or nodes % spines:
        raise ValueError(f"paper_fabric: {nodes} nodes: the paper's spine group lays out a "
                         f"multiple of {spines} nodes (leaves of {spines} under {spines} "
                         f"spines), from {2 * spines} to {PAPER_NETWORK['max_nodes']}")
    return PaperFabric(leaves=nodes // spines, hosts_per_leaf=spines, spines=spines)


class RingFields(MarkingFields):
    """The SymphonyRing fields a paper profile sets (paper_ring_kwargs)."""

    link_mbps: float
    nic_gbps: float
    leaves: int
    spines: int
    hosts_per_leaf: int
    dcqcn_preset: str
    pfc: bool
    ecmp_hash: str
    queue_pkts: int
    pfc_xoff_kb: float
    pfc_xon_kb: float


def paper_ring_kwargs(nodes: int) -> RingFields:
    """``SymphonyRing``'s parameters for §4.1's network over ``nodes`` nodes
    at its own rate (slowdown 1): 10 Gb/s, RED and Symphony as the paper
    sets them, DCQCN as HPCC's simulator configures it, a lossless fabric.

    Buffers: a static per-port model of HPCC's shared buffer (16 MB per
    50 Gb/s: 3.2 MB per switch at 10 Gb/s). One egress queue may use all of
    it; an ingress pauses at (free buffer) >> 3, which with all of a leaf's
    ports congested settles at buffer / (8 + ports)."""
    fab = paper_fabric(nodes)
    link = PAPER_NETWORK["link_gbps"]
    buffer_kb = HPCC_BUFFER_MB_PER_50G * link / 50 * 1000
    xoff_kb = buffer_kb / (2 ** HPCC_PFC_SHIFT + fab.ports)
    return {"link_mbps": link * 1000, "nic_gbps": link, "leaves": fab.leaves,
            "spines": fab.spines, "hosts_per_leaf": fab.hosts_per_leaf,
            "dcqcn_preset": PAPER_NETWORK["dcqcn_preset"], "pfc": PAPER_NETWORK["pfc"],
            "ecmp_hash": PAPER_NETWORK["ecmp_hash"],
            "queue_pkts": int(buffer_kb * 1000 // full_frame_bytes(1024)),
            "pfc_xoff_kb": xoff_kb, "pfc_xon_kb": xoff_kb - HPCC_RESUME_KB,
            "red_kmin_kb": PAPER_NETWORK["red_kmin_kb"],
            "red_kmax_kb": PAPER_NETWORK["red_kmax_kb"], "red_pmax": PAPER_NETWORK["red_pmax"],
            "k": PAPER_NETWORK["k"], "tau": PAPER_NETWORK["tau"],
            "t_win_us": PAPER_NETWORK["t_win_us"]}


@dataclass(frozen=True)
class Stats:
    """A figure over the seeds: mean, sample sd (0 for one seed), each seed's."""

    mean: float
    sd: float
    runs: list[float]


def stats(xs: Sequence[float], digits: int = 4) -> Stats:
    """``xs`` (one per seed) as :class:`Stats`, each figure rounded to
    ``digits`` (an int stays an int)."""
    return Stats(mean=round(statistics.mean(xs), digits),
                 sd=round(statistics.stdev(xs), digits) if len(xs) > 1 else 0.0,
                 runs=[round(x, digits) for x in xs])


P = TypeVar("P")


def load_params(cls: type[P], run_dir: Path, **defaults: object) -> P:
    """The parameters a run was made with (its plan.json), ``defaults`` for
    the ones runs from before a parameter existed lack."""
    d = json.loads((Path(run_dir) / "plan.json").read_text())["params"]
    known = {f.name for f in dataclasses.fields(cls)}  # type: ignore[arg-type]
    return cls(**{**defaults, **{k: v for k, v in d.items() if k in known}})
