"""What the ReFlex experiments share: the paper's network (§5) scaled to the
testbed, the switch configuration, the flexible flows' transport, and the
timeline readers, the figures over seeds."""

from __future__ import annotations

import dataclasses
import json
import math
import statistics
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, TypedDict, TypeVar

from hosts.agent_spec import INTERPRETERS, PAYLOADS, FlowSpec, JobSpec, TransportSpec
from hosts.reflex.schemes import DSCP_LOW, PRIO_LOW
from testbed.experiment import Topology, param
from testbed.modelled import ModelledNetwork, ScaledLinks, packets
from testbed.net import host_addr
from testbed.summary import Spread
from testbed.timeline import PhaseData, counter_points, payload_efficiency

PROGRAM = "switches/p4/reflex.p4"
BOTTLENECK_PORT = 3
QDEPTH_REGISTER = "MyEgress.qdepth_max"


# The quick profiles' links. The modelled network stays the paper's (10 Gb/s,
# T_int 5 ms, the same budgets, queues and RED); only its clock runs three
# times as fast as the full profiles' (slowdown 166.7: T_int 0.83 s, a 1:1:3
# cycle 4.17 s), which cuts the wall time the paper's budget rule costs to a
# third. Not 70 or 80 Mb/s: there the agent receiving a line-rate flow on a
# 2-core machine, lowest in real-time priority, was behind a 50 us feedback
# interval for more than 5% of some phases (the verdict's host_receive_lag;
# docs/experiments/analysis/reflex-cases.md).
QUICK_LINK_MBPS = 60.0



class PaperNetwork(TypedDict):
    link_gbps: float
    t_int_ms: float
    cycle: tuple[int, int, int]


# The paper's network (§5, its default setup), in its units: what the paper
# profiles run (paper_network() converts it). The queues' 466 packets, the
# RED hard threshold of 65 and the 90/10 DRR weights are ReflexNetwork's and
# the reflex scheme's defaults already.
PAPER_NETWORK: PaperNetwork = {
    "link_gbps": 10.0,          # "10 Gbit/s links"
    "t_int_ms": 5.0,            # "T_int = 5 ms"
    "cycle": (1, 1, 3),         # D_warmup : D_measure : D_exploit
}
# A flow's rate and receive samples at the paper's scale, in its time: the
# agents' shortest interval (TransportSpec refuses less), a fiftieth of T_int
# (the full profile's 20 ms at slowdown 500 are 40 us of modelled time, the
# quick one's 120 us).
PAPER_SAMPLE_INTERVAL_US = 100


class NetworkFields(TypedDict):
    """The ReflexNetwork fields a paper profile sets (paper_network)."""

    link_mbps: float
    nic_gbps: float
    t_int_us: float
    warmup: int
    measure: int
    exploit: int
    sample_interval_us: int


def paper_network(sample_interval_us: int = PAPER_SAMPLE_INTERVAL_US) -> NetworkFields:
    """ReflexNetwork's fields at the paper's own scale: every switch port and
    host NIC at its 10 Gb/s (slowdown 1), its T_int and probing cycle, and
    samples every ``sample_interval_us``. For ``Params.paper()``."""
    warmup, measure, exploit = PAPER_NETWORK["cycle"]
    return {"link_mbps": PAPER_NETWORK["link_gbps"] * 1000.0,
            "nic_gbps": PAPER_NETWORK["link_gbps"],
            "t_int_us": PAPER_NETWORK["t_int_ms"] * 1000.0,
            "warmup": warmup, "measure": measure, "exploit": exploit,
            "sample_interval_us": sample_interval_us}


def paper_cycles(gbit: float) -> float:
    """A volume the paper gives in Gbit, in probing cycles of its link at line
    rate (2 Gbit: 8 cycles of 10 Gb/s x 25 ms)."""
    warmup, measure, exploit = PAPER_NETWORK["cycle"]
    cycle_s = PAPER_NETWORK["t_int_ms"] * 1e-3 * (warmup + measure + exploit)
    return gbit / (PAPER_NETWORK["link_gbps"] * cycle_s)


@dataclass(frozen=True)
class ReflexNetwork(ScaledLinks):
    """The paper's network (10 Gb/s links, two DRR queues per port, RED hard
    threshold 65 of 466 packets, T_int 5 ms at 1:1:3) on ``link_mbps`` links."""

    # The full profiles' rate (the quick ones run at QUICK_LINK_MBPS). At 40
    # Mb/s a lone Python sender once delivered only 22-30 of 37.8 Mb/s of
    # payload on a loaded 2-core machine; at 20 Mb/s 17.5 of 18.9.
    link_mbps: float = param(20.0, "rate of every switch port and host NIC", "Mb/s")
    nic_gbps: float = param(10.0, "the paper's links: slowdown = nic_gbps / link_mbps", "Gb/s")
    t_int_us: float = param(5000.0, "probing interval T_int of the modelled network (paper: "
                                    "5 ms)", "us")
    warmup: int = param(1, "warmup phase of the probing cycle (paper: 1 of 1:1:3)", "T_int")
    measure: int = param(1, "measure phase of the probing cycle (paper: 1 of 1:1:3)", "T_int")
    exploit: int = param(3, "exploit phase of the probing cycle (paper: 3 of 1:1:3)", "T_int")
    queue_pkts: int = param(466, "capacity of each queue (paper)", "packets")
    ecn_k_pkts: int = param(65, "RED hard threshold: a queue marks ECN from this depth (paper)",
                            "packets")
    msg_bytes: int = param(65536, "size of each RDMA WRITE message of a flow (a multiple of "
                                  "path_mtu)", "bytes")
    window: int = param(8, "outstanding messages per QP", "messages")
    path_mtu: int = param(1024, "RoCE path MTU: payload per packet (at most 1024: the links "
                                "carry 1500-byte frames)", "bytes")
    # DCQCN's parameters from the DCQCN paper: a flow reacts at most once per
    # 50 us CNP interval, on the time scale of DCTCP's once-per-RTT reaction in
    # the ReFlex paper's network (65 queued packets are ~80 us at 10 Gb/s).
    # connectx reacts every 4 us; against the paper's hard marking threshold
    # its flows swing between line rate and near zero (measured: two flows in
    # one queue used 68% of the link).
    dcqcn_preset: str = param("zhu2015", "DCQCN parameters: zhu2015 (the DCQCN paper's) or "
                                         "connectx (mlx5 NIC defaults)")
    dcqcn_overrides: str = param("", "DCQCN values replacing the preset's, in its own names "
                                     "and units, comma-separated NAME=VALUE (zhu2015: "
                                     "B_bytes=32767); empty: the preset's")
    # The low queue drains at 10% of the link: 466 packets wait ~4 ms there,
    # and RoCE's go-back-N timer does not back off as TCP's does (the paper's
    # DCTCP: min RTO 1 ms, exponential backoff), so a shorter timer
    # retransmits packets that are only queued, and 7 unanswered timeouts end
    # the connection (absolute priority starves the flexible flow for ~5 ms
    # of modelled time).
    rto_us: float = param(4000.0, "RoCE's retransmission timeout, in modelled time", "us")
    sample_interval_us: int = param(20000, "interval of each flow's rate and receive samples "
                                           "(testbed clock)", "us")
    agent_interpreter: str = param("python", "what runs the host agents: python, pypy or auto")
    # hosts/roce/shaping.py; docs/architecture.md, "On a small machine".
    # Measured with reflex-cases --quick (40 Mb/s, realtime, one run each):
    # senders late for 5.6% of their sends with 0, 0.2% with 16. 16 full-size packets are 14 us of the modelled 10 Gb/s
    # link, against T_int = 5 ms.
    host_qdisc_ahead_packets: float = param(
        16.0, "> 0: each host's interface serialises at the line rate and each sending QP at "
              "its DCQCN rate in a qdisc, the pacer keeping up to this many full-size packets "
              "queued there (0: no qdisc, the pacer alone spaces the frames)", "packets")
    switch_backend: str = param("python", "the soft switch's data path: python or pypy")
    # Without it the senders waited on the run queue behind the switch and
    # the receiver and were late for 5-14% of their packets at 40 Mb/s on 2
    # cores.
    realtime: bool = param(True, "the host agents and the switch run at real-time priority "
                                 "(SCHED_FIFO)")
    # The paper profiles' flows of hundreds of MB would hold their bytes at
    # both ends (a run of reflex-cases at 9.4 GB with real payloads, 0.37 GB
    # with phantom ones); nothing in the ReFlex analyses reads the bytes.
    payload: str = param("real", "real (every flow's bytes checked at its receiver) or "
                                 "phantom (the same packets and timing without the data; "
                                 "udp hosts only)")

    def __post_init__(self) -> None:
        if self.link_mbps <= 0 or self.nic_gbps <= 0 or self.t_int_us <= 0:
            raise ValueError("link_mbps, nic_gbps and t_int_us must be positive")
        if self.warmup < 0 or self.measure < 1 or self.exploit < 1:
            raise ValueError("the probing cycle needs warmup >= 0, measure >= 1 and "
                             "exploit >= 1 intervals")
        if self.msg_bytes < 1 or self.path_mtu < 1 or self.window < 1:
            raise ValueError("msg_bytes, path_mtu and window must be >= 1")
        if self.payload not in PAYLOADS:
            raise ValueError(f"payload {self.payload!r}: one of {', '.join(PAYLOADS)}")
        if self.agent_interpreter not in INTERPRETERS:
            raise ValueError(f"agent_interpreter must be one of {', '.join(INTERPRETERS)}")
        if self.host_qdisc_ahead_packets and self.host_qdisc_ahead_packets < 2:
            raise ValueError("host_qdisc_ahead_packets must be 0 (no qdisc) or at least 2 "
                             "(the pacer's bucket)")
        from switches.soft.backends import BACKENDS

        if self.switch_backend not in BACKENDS:
            raise ValueError(f"switch_backend must be one of {', '.join(BACKENDS)}")
        if not 0 < self.ecn_k_pkts < self.queue_pkts:
            raise ValueError("need 0 < ecn_k_pkts < queue_pkts")
        if self.path_mtu > 1024:
            raise ValueError("path_mtu above 1024 does not fit the links' 1500-byte frames")
        if self.msg_bytes % self.path_mtu:
            raise ValueError("msg_bytes must be a multiple of path_mtu (whole packets)")
        from hosts.roce.dcqcn import DcqcnParams

        overrides = self.dcqcn_override_values
        try:
            DcqcnParams.scaled(self.link_bps, self.slowdown, self.dcqcn_preset, **overrides)
        except (TypeError, ValueError) as e:
            raise ValueError(f"dcqcn_preset / dcqcn_overrides: {e}") from None

    @property
    def dcqcn_override_values(self) -> dict[str, float]:
        """``dcqcn_overrides`` as a dict (NAME=VALUE, comma-separated)."""
        out: dict[str, float] = {}
        for item in filter(None, (x.strip() for x in self.dcqcn_overrides.split(","))):
            name, sep, value = item.partition("=")
            try:
                if not sep:
                    raise ValueError
                out[name.strip()] = float(value)
            except ValueError:
                raise ValueError(f"dcqcn_overrides: {item!r} is not NAME=VALUE") from None
        return out

    @property
    def t_int_s(self) -> float:
        """One probing interval on the testbed's clock."""
        return self.t_int_us * 1e-6 * self.slowdown

    @property
    def cycle_intervals(self) -> int:
        return self.warmup + self.measure + self.exploit

    @property
    def cycle_s(self) -> float:
        return self.t_int_s * self.cycle_intervals

    @property
    def payload_bps(self) -> float:
        return self.link_bps * payload_efficiency(self.msg_bytes, self.path_mtu)

    @property
    def modelled_link(self) -> str:
        """The modelled link's rate, for plot labels (``10 Gb/s``)."""
        return f"{self.nic_gbps:g} Gb/s"

    @property
    def rate_label(self) -> str:
        """The testbed's link rate and the modelled one it stands for, for plot
        titles (``40 Mb/s = 10 Gb/s``)."""
        return f"{self.link_mbps:g} Mb/s = {self.modelled_link}"


def messages(p: ReflexNetwork, intervals: float) -> int:
    """Whole messages of payload the link carries in ``intervals`` at line rate."""
    b = p.payload_bps / 8 * intervals * p.t_int_s
    return max(1, math.ceil(b / p.msg_bytes))


def transport(p: ReflexNetwork) -> TransportSpec:
    return TransportSpec(scale={"slowdown": p.slowdown, "nic_rate_bps": p.nic_gbps * 1e9,
                                "rto_us": p.rto_us},
                         dcqcn={"preset": p.dcqcn_preset}
                         | ({"overrides": p.dcqcn_override_values} if p.dcqcn_overrides else {}),
                         path_mtu=p.path_mtu,
                         sample_interval_us=p.sample_interval_us,
                         qdisc_ahead_packets=p.host_qdisc_ahead_packets)


def host_jobs(p: ReflexNetwork, per_host: dict[int, list[FlowSpec]],
         timeout_s: float) -> dict[str, JobSpec]:
    """One agent per host index with its flows, on the network's transport,
    each flow with the network's ``payload``."""
    t = transport(p)
    return {f"h{i}": JobSpec(host=f"h{i}", ip=host_addr(i).ip, transport=t,
                             flows=tuple(dataclasses.replace(f, payload=p.payload) for f in fl),
                             timeout_s=timeout_s, interpreter=p.agent_interpreter)
            for i, fl in sorted(per_host.items())}


def flexible_spec(p: ReflexNetwork, alpha: float, r: float = 1.0) -> dict[str, float]:
    """``FlowSpec.flexible`` for the paper's cycle on the testbed's clock."""
    return {"alpha": alpha, "r": r, "t_int_us": p.t_int_us * p.slowdown, "warmup": p.warmup,
            "measure": p.measure, "exploit": p.exploit, "low_dscp": DSCP_LOW}


class FlowCommon(TypedDict):
    """What both ends of a flow are given (FlowSpec's fields)."""

    flow: str
    msg_bytes: int
    count: int
    seed: int


class FlowShared(FlowCommon, total=False):
    window: int
    qps: int
    arrivals_s: tuple[float, ...]
    msg_sizes: tuple[int, ...]


class SenderOnly(TypedDict, total=False):
    """What only a flow's sender is given (FlowSpec's fields)."""

    start_delay_s: float
    dscp: int
    flexible: dict[str, float]
    stop_after: str


def add_flow(per_host: dict[int, list[FlowSpec]], sender: int, receiver: int,
             common: FlowShared, extra: SenderOnly | None = None) -> None:
    """A flow from host index ``sender`` to ``receiver``: its sender's spec
    (with ``extra``) on the one, its receiver's on the other, each appended
    to that host's flows."""
    per_host.setdefault(sender, []).append(FlowSpec(
        role="sender", peer_ip=host_addr(receiver).ip, **common, **(extra or {})))
    per_host.setdefault(receiver, []).append(FlowSpec(
        role="receiver", peer_ip=host_addr(sender).ip, **common))


def network(p: ReflexNetwork) -> ModelledNetwork:
    """The paper's links and queues in its units (the marking threshold is the
    program's own single-threshold line, in ``topology``)."""
    return ModelledNetwork(link_gbps=p.nic_gbps, slowdown=p.slowdown,
                           buffer=packets(p.queue_pkts))


def topology(p: ReflexNetwork, n_hosts: int = 3) -> Topology:
    """Hosts h1 .. h<n> around one reflex.p4 switch (h1, h2 senders and h3
    receiver in the two-flow experiments)."""
    return Topology(
        n_hosts=n_hosts, program=PROGRAM, priority_queues=2, qdepth_register=QDEPTH_REGISTER,
        packet_bytes=p.path_mtu + 58, network=network(p),
        host_line_qdisc=p.host_qdisc_ahead_packets > 0, backend=p.switch_backend,
        realtime=p.realtime,
        commands=(
            f"table_set_default MyEgress.ecn_config MyEgress.set_ecn_threshold {p.ecn_k_pkts}",
            f"table_add MyIngress.dscp_priority MyIngress.set_priority {DSCP_LOW} => {PRIO_LOW}",
        ))


def phase_timelines(p: ReflexNetwork, run_dir: Path, phases: Iterable[tuple[str, str]],
                    port: int = BOTTLENECK_PORT) -> list[Path]:
    """:func:`testbed.plotting.phase_timelines` of a run's phases (name,
    title) at the switch's ``port``: the link's rate, the RED marking
    threshold, the queue limit, and rates over windows of a fifth of a
    probing interval."""
    from testbed.plotting import phase_timelines as timelines

    return timelines(run_dir, phases, port=port, line_rate_bps=p.link_bps,
                     thresholds=(p.ecn_k_pkts,), queue_limit=p.queue_pkts,
                     rate_window_s=p.t_int_s / 5)


def delivered(data: PhaseData, flow: str) -> list[tuple[float, float]]:
    """(seconds, payload bytes delivered in order) at the flow's receiver."""
    return counter_points(data.flow_events(flow, "rx"), "rx_bytes")


def first_rx_s(pts: list[tuple[float, float]]) -> float:
    """The last sample before the first delivered byte."""
    for i, (_t, v) in enumerate(pts):
        if v > 0:
            return pts[max(0, i - 1)][0]
    raise ValueError("flow delivered nothing")


def last_rx_s(pts: list[tuple[float, float]]) -> float:
    """The first sample with everything the flow delivered."""
    last = pts[-1][1]
    return next(t for t, v in pts if v >= last)


def _rounded(x: float) -> float:
    """Four decimals, or below 1 four significant digits: reflex-workload's
    FCTs at the paper's scale are of 100 us, which four decimals of a second
    would round to 0.0001."""
    return round(x, 4) if abs(x) >= 1 else float(f"{x:.4g}")


def seed_spread(values: Iterable[float | None]) -> Spread:
    """The runs' values of one figure: their mean with its sample standard
    deviation (0 for one run), min, max, count (``_n``) and the values
    themselves (``_seeds``, what the report's claims judge); a run that could
    not measure it (None) is left out, and a figure no run measured is
    ``Spread(None)``."""
    xs = [x for x in values if x is not None]
    if not xs:
        return Spread(None)
    return Spread(_rounded(statistics.fmean(xs)),
                  sd=_rounded(statistics.stdev(xs)) if len(xs) > 1 else 0.0,
                  min=min(xs), max=max(xs), n=len(xs), seeds=xs)


N = TypeVar("N", bound=ReflexNetwork)


def saved_params(cls: type[N], run_dir: Path, *, seeds: int | None = None) -> N:
    """The run's parameters (plan.json ``params``) as ``cls``, those it does
    not know left out; ``seeds`` what a run saved before its experiment had
    seeds ran (each phase once)."""
    d = json.loads((Path(run_dir) / "plan.json").read_text())["params"]
    known = {f.name for f in dataclasses.fields(cls)}
    older = {} if seeds is None else {"seeds": seeds}
    return cls(**(older | {k: v for k, v in d.items() if k in known}))


def seed_range(first_seed: int, seeds: int) -> list[int]:
    """Seeds first_seed .. first_seed + seeds - 1."""
    return list(range(first_seed, first_seed + seeds))


class SeededRuns:
    """A ReFlex experiment's Params' ``seed_list``, from its ``first_seed`` and
    ``seeds``. A plain class, not a dataclass: it adds no field, so each
    experiment keeps its parameters' order."""

    if TYPE_CHECKING:
        first_seed: int
        seeds: int

    @property
    def seed_list(self) -> list[int]:
        """Seeds first_seed .. first_seed + seeds - 1."""
        return seed_range(self.first_seed, self.seeds)
