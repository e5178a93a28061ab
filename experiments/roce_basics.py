"""RoCEv2 + DCQCN through one P4 switch with a bottleneck: one QP, two QPs, 1% loss.

Topology: h1, h2 (senders) and h3 (receiver) around one soft switch running
``switches/p4/l3_ecn.p4`` (L3 routing + RED ECN marking + optional random
loss). Every switch egress port runs at ``bottleneck_mbps`` (the soft
target's ``set_port_rate_bps``; on BMv2 ``set_queue_rate`` in packets/s for
this run's average frame size, an approximation): every link has the same rate, and the hosts'
NICs (the DCQCN line rate and the pacer) run at that rate too, as in the DCQCN
paper's testbed (NIC rate = link rate). So one QP alone is limited by its NIC
and fills the link toward h3; two QPs into h3 offer twice that link's rate and
the switch queue toward h3 (port 3) is the congestion point where ECN marks.

Time is scaled (hosts.roce.Scale) so that the testbed link carries the same
number of packets per DCQCN period as the DCQCN paper's 40 Gb/s testbed:
the emulated NIC runs at ``nic_gbps`` (40), so the slowdown is
nic_gbps / bottleneck_mbps (10000 at 4 Mb/s, 5000 at 8 Mb/s); every DCQCN /
transport timer is ``slowdown`` times longer and DCQCN's rate steps
``slowdown`` times smaller (DcqcnParams.scaled). Then, as in the paper, a
flow sends ~250 packets per 55 us rate-increase period (here 550 ms at
4 Mb/s) and ~115 per 50 us CNP interval at a fair share, R_AI is 0.1% of
the line rate, and the 10 MB byte counter fires every ~36 timer periods.
Why not a smaller slowdown: with 1000 at 4 Mb/s (a 4 Gb/s NIC under the
paper's 40 Gb/s parameters) a flow sends only ~12 packets per CNP interval,
so whether it gets a CNP in an interval hangs on one or two RED marks;
alpha (time constant 1/g = 256 periods, 14 s) is still 0.6-1 throughout
the pair phase, so every CNP cuts 30-50%, and the second-half rates depend
on how many of ~10 cuts each flow happened to draw: Jain's index fell below
0.95 in about one quick run in five. At the paper's packets per interval
the first overload marks both flows within one CNP interval, so they cut
together; later a marked packet costs one flow about half its rate until
fast recovery (a few 550 ms periods) restores it, and a flow gets at most
one CNP per 500 ms, so a few such cuts leave the two flows' second-half
rates within a few percent.
DCQCN preset (``dcqcn_preset``, hosts/roce/README.md "DCQCN presets"): the
numbers above are the paper's (``zhu2015``). With ``connectx`` (mlx5
defaults) at the same scale the rate-increase timer is 300 us -> 3 s, the byte
counter 32767 B (~30 packets, every ~65 ms at 4 Mb/s: it, not the timer,
drives recovery), the CNP interval and the rate-reduce monitor period
4 us -> 40 ms, the alpha period 1 us -> 10 ms and the additive step
5 Mb/s -> 500 b/s; a flow under marks gets a CNP and a cut every 40 ms, and
since the target rate is kept unless a timer increase came between cuts,
both flows keep recovering toward the line rate and meet near the fair share.
The RED thresholds are in packets of enqueue depth, which is what scales with the
link (a queue of k packets is the same number of packet times at any rate).
Kmin is 4 packets (the DCQCN paper's 5 KB); the paper's Kmax (200 KB) does
not fit a 64-packet queue, so Kmax is 16 and Pmax 20% (just below Kmax a
fair-share flow has ~20 marked packets per CNP interval: it gets its CNP). A
millisecond-scale hiccup of the Python switch or hosts queues a few packets
without any congestion (about 2 at 4 Mb/s, up to 5 at 8 Mb/s), so at the
higher rate a lone flow may see an occasional mark; its CNPs are in the
results.

Phases, run one after the other in the same network (after a ``warmup``
phase of ``warmup_msgs`` messages per sender, both at once, if that is not 0:
not measured and outside the fidelity verdict; it lets a PyPy switch's JIT
compile the paths before the measured traffic):
- ``single``: h1 -> h3, one QP alone;
- ``pair``: h1 -> h3 and h2 -> h3 at the same time, sharing port 3;
- ``loss``: h1 -> h3 with ``loss_per_10k`` / 10000 of the packets on every
  switch port dropped by the P4 program (MyEgress.link_loss).
``phases`` picks a subset (e.g. ``-p phases=single``: what ``testbed bench
hosts`` runs); results have a section per phase that ran.
Each flow is ``msgs`` RDMA WRITE_WITH_IMM messages of ``msg_bytes`` with at
most ``window`` outstanding; the receiver checks the bytes.

Results (``Results``; in summary.json nested objects, and the same scalars
under flat dotted keys such as ``"single.goodput_fraction"``):
- ``single.goodput_fraction``: payload delivered / (duration x bottleneck rate
  x payload efficiency), where duration runs from the sender's first post to
  the receiver's last completion and the efficiency is payload bytes per
  frame byte of these messages (Ethernet+IPv4+UDP+BTH/RETH/ImmDt+ICRC counted;
  no preamble/gap/FCS, as the switch's rate limiter counts): 1.0 = the link
  carried payload all the time (it can exceed 1 by one packet time over the
  run, ~0.05%: the switch hands a packet over when it starts sending it);
- ``pair.jain_index``: Jain's index of the two flows' delivered rates over the
  second half of the time both were active; ``pair.max_queue_pkts``: the
  largest port-3 queue depth (the P4 watermark register of enqueue depths and
  the sampled depths, whichever is larger), ``pair.queue_limit_pkts`` its
  limit, ``pair.queue_drops`` tail drops there; with PFC (``pfc_xoff_pkts``
  > 0) ``pair.pfc``: the switch's XOFF and XON frames and, per host that
  read pauses, its XOFFs and time paused;
- ``loss.bytes_ok``: the receiver's buffer equals what was sent (checked by
  the receiver against the seed, and sender/receiver SHA-256 equal);
  ``loss.retransmissions``: data packets the sender sent again (go-back-N).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from pathlib import Path

from hosts.agent_spec import (
    INTERPRETERS,
    FlowSpec,
    JobSpec,
    TransportSpec,
    message_wire_bytes,
)
from hosts.roce.dcqcn import preset_name
from testbed.experiment import FidelityLimits, PhasePlan, RunPlan, Topology, param
from testbed.modelled import ModelledNetwork, Pfc, Red, packets
from testbed.net import host_addr
from testbed.summary import OMIT_IF_NONE, Summary
from testbed.timeline import (
    HostPauses,
    PhaseData,
    counter_points,
    goodput_fraction,
    jain_index,
    load_phase,
    payload_efficiency,
    phase_losses,
    window_rate,
)

NAME = "roce-basics"
HOST_PROVIDERS = ("udp", "rxe")   # rxe: hosts.roce.rxe.dcqcn_shim paces and runs DCQCN
PROGRAM = "switches/p4/l3_ecn.p4"
BOTTLENECK_PORT = 3  # toward h3, the receiver
QDEPTH_REGISTER = "MyEgress.qdepth_max"
PHASES = ("single", "pair", "loss")
HEADLINE = ("single.goodput_fraction", "pair.jain_index", "pair.max_queue_pkts",
            "pair.queue_limit_pkts", "pair.cnps", "loss.bytes_ok", "loss.retransmissions")
# a check of the testbed itself: no paper claim
CLAIMS = ()
REFERENCE: dict[str, float] = {}


@dataclass(frozen=True)
class Params:
    bottleneck_mbps: float = param(8.0, "rate of every link (switch egress port) and every "
                                        "host NIC", "Mb/s")
    nic_gbps: float = param(40.0, "the emulated NIC (the DCQCN paper's): slowdown = "
                                  "nic_gbps / bottleneck_mbps", "Gb/s")
    link_delay_us: float = param(0.0, "modelled one-way delay per link (x slowdown on the "
                                      "testbed)", "us")
    msg_bytes: int = param(65536, "size of each RDMA WRITE message", "bytes")
    window: int = param(4, "outstanding messages per QP", "messages")
    single_msgs: int = param(120, "messages of the single phase's flow", "messages")
    pair_msgs: int = param(120, "messages of each of the pair phase's two flows", "messages")
    loss_msgs: int = param(40, "messages of the loss phase's flow", "messages")
    loss_per_10k: int = param(100, "loss phase: packets dropped at every switch port, per "
                                   "10000 (100: 1%)", "1/10000")
    queue_depth: int = param(64, "capacity of each egress queue (BMv2's default)", "packets")
    ecn_kmin: int = param(4, "RED Kmin: enqueue depth where ECN marking starts", "packets")
    ecn_kmax: int = param(16, "RED Kmax: enqueue depth where the marking probability reaches "
                              "ecn_pmax", "packets")
    ecn_pmax: int = param(20, "RED marking probability at Kmax", "%")
    # PFC on the soft target; the hosts obey the pauses (hosts/roce/pfc.py).
    pfc_xoff_pkts: int = param(0, "PFC XOFF: an ingress port is paused once this many of its "
                                  "packets wait in the egress queues (0: no PFC, a lossy "
                                  "switch as in the paper)", "packets")
    pfc_xon_pkts: int = param(0, "PFC XON: the paused port resumes once no more than this many "
                                 "of its packets wait", "packets")
    # hosts/roce/README.md, "DCQCN presets"
    dcqcn_preset: str = param("zhu2015", "DCQCN parameters: zhu2015 (the DCQCN paper's, whose "
                                         "40 Gb/s testbed this run scales) or connectx (mlx5 "
                                         "NIC defaults)")
    path_mtu: int = param(1024, "RoCE path MTU: payload per packet", "bytes")
    sample_interval_us: int = param(5000, "interval of each flow's rate and receive samples "
                                          "(testbed clock)", "us")
    agent_interpreter: str = param("python", "what runs the host agents: python, pypy or auto")
    pacer_burst_packets: float = param(2.0, "host pacer's token bucket, in full-size packets",
                                       "packets")
    # HTB, hosts/roce/shaping.py
    host_qdisc_ahead_packets: float = param(
        0.0, "> 0: each host's interface serialises at the line rate and each sending QP at "
             "its DCQCN rate in a qdisc, the pacer keeping up to this many packets queued "
             "there (0: no qdisc, the pacer alone spaces the frames)", "packets")
    # hosts.agent_spec.TransportSpec.rx_holdoff_us
    host_rx_holdoff_us: float = param(0.0, "a received frame wakes a host's agent no sooner "
                                           "than this after its last wake-up, in modelled "
                                           "time (0: every frame wakes it)", "us")
    switch_backend: str = param("python", "the soft switch's data path: python or pypy")
    phases: str = param("single,pair,loss", "which phases run, comma-separated, in this order")
    # The warm-up lets a PyPy switch or PyPy agents compile their per-packet
    # code before measuring, and is outside the fidelity verdict.
    warmup_msgs: int = param(0, "messages per flow of a warm-up phase before the measured "
                                "ones, both senders at once (0: none)", "messages")

    @classmethod
    def quick(cls) -> Params:
        return cls(bottleneck_mbps=4.0, single_msgs=30, pair_msgs=30, loss_msgs=16)

    def __post_init__(self) -> None:
        if self.bottleneck_mbps <= 0 or self.nic_gbps <= 0:
            raise ValueError("bottleneck_mbps and nic_gbps must be positive")
        small = [n for n in ("msg_bytes", "window", "single_msgs", "pair_msgs", "loss_msgs",
                             "path_mtu") if getattr(self, n) < 1]
        if small:
            raise ValueError(f"{', '.join(small)} must be >= 1")
        if not 0 <= self.loss_per_10k <= 10000:
            raise ValueError("loss_per_10k must be 0..10000")
        if not 0 < self.ecn_kmin < self.ecn_kmax < self.queue_depth:
            raise ValueError("need 0 < ecn_kmin < ecn_kmax < queue_depth")
        if not 0 < self.ecn_pmax <= 100:
            raise ValueError("ecn_pmax must be 1..100 (percent)")
        if self.pfc_xoff_pkts and not 0 <= self.pfc_xon_pkts < self.pfc_xoff_pkts < self.queue_depth:
            raise ValueError("need 0 <= pfc_xon_pkts < pfc_xoff_pkts < queue_depth "
                             "(or pfc_xoff_pkts 0: no PFC)")
        if not self.pfc_xoff_pkts and self.pfc_xon_pkts:
            raise ValueError("pfc_xon_pkts needs pfc_xoff_pkts (PFC is off at 0)")
        wanted = self.phase_names
        if not wanted or any(w not in PHASES for w in wanted) or len(set(wanted)) != len(wanted):
            raise ValueError(f"phases must be distinct names among {', '.join(PHASES)}, "
                             f"comma-separated (got {self.phases!r})")
        if self.agent_interpreter not in INTERPRETERS:
            raise ValueError(f"agent_interpreter must be one of {', '.join(INTERPRETERS)}")
        if self.link_delay_us < 0:
            raise ValueError("link_delay_us must be >= 0")
        if self.warmup_msgs < 0:
            raise ValueError("warmup_msgs must be >= 0")
        if self.host_qdisc_ahead_packets and self.host_qdisc_ahead_packets < self.pacer_burst_packets:
            raise ValueError("host_qdisc_ahead_packets must be 0 (no qdisc) or at least "
                             "pacer_burst_packets")
        from switches.soft.backends import BACKENDS

        if self.switch_backend not in BACKENDS:
            raise ValueError(f"switch_backend must be one of {', '.join(BACKENDS)}")
        object.__setattr__(self, "dcqcn_preset", preset_name(self.dcqcn_preset))

    @property
    def phase_names(self) -> tuple[str, ...]:
        return tuple(w.strip() for w in self.phases.split(",") if w.strip())

    @property
    def bottleneck_bps(self) -> float:
        return self.bottleneck_mbps * 1e6

    @property
    def slowdown(self) -> float:
        """Time dilation: emulated NIC rate / testbed link rate."""
        return self.nic_gbps * 1e9 / self.bottleneck_bps


def _transport(p: Params) -> TransportSpec:
    return TransportSpec(
        scale={"slowdown": p.slowdown, "nic_rate_bps": p.nic_gbps * 1e9},
        dcqcn={"preset": p.dcqcn_preset}, path_mtu=p.path_mtu,
        sample_interval_us=p.sample_interval_us, pacer_burst_packets=p.pacer_burst_packets,
        qdisc_ahead_packets=p.host_qdisc_ahead_packets, pfc=p.pfc_xoff_pkts > 0,
        rx_holdoff_us=p.host_rx_holdoff_us)


def _flow_jobs(p: Params, flows: list[tuple[str, int, int, int]]) -> dict[str, JobSpec]:
    """(name, sender host index, receiver host index, messages) -> job per host."""
    per_host: dict[int, list[FlowSpec]] = {}
    for k, (name, s, r, n) in enumerate(flows):
        for host, role, peer in ((s, "sender", r), (r, "receiver", s)):
            per_host.setdefault(host, []).append(FlowSpec(
                flow=name, role=role, peer_ip=host_addr(peer).ip,  # type: ignore[arg-type]
                msg_bytes=p.msg_bytes, count=n, window=p.window, seed=1000 + k))
    t = _transport(p)
    return {f"h{i}": JobSpec(host=f"h{i}", ip=host_addr(i).ip, transport=t, flows=tuple(fl),
                             interpreter=p.agent_interpreter)
            for i, fl in sorted(per_host.items())}


def _expected_s(p: Params, msgs: int) -> float:
    wire = msgs * p.msg_bytes / payload_efficiency(p.msg_bytes, p.path_mtu)
    return wire * 8 / p.bottleneck_bps


def _mean_frame_bytes(p: Params) -> int:
    """Average frame size of this run's messages (what BMv2's packet-rate
    limit is converted with)."""
    packets = max(1, -(-p.msg_bytes // p.path_mtu))
    return round(message_wire_bytes(p.msg_bytes, p.path_mtu) / packets)


def network(p: Params) -> ModelledNetwork:
    """The modelled network: the paper's NIC rate on every link, RED in
    packets of enqueue depth (see the module docstring)."""
    return ModelledNetwork(
        link_gbps=p.nic_gbps, slowdown=p.slowdown, link_delay_us=p.link_delay_us,
        buffer=packets(p.queue_depth),
        red=Red(kmin=packets(p.ecn_kmin), kmax=packets(p.ecn_kmax), pmax=p.ecn_pmax / 100,
                command="table_set_default MyEgress.ecn_config MyEgress.set_ecn_params "
                        "{kmin} {kmax} {pmax_percent}"),
        pfc=Pfc(xoff=packets(p.pfc_xoff_pkts), xon=packets(p.pfc_xon_pkts))
        if p.pfc_xoff_pkts else None)


def plan(p: Params) -> RunPlan:
    topo = Topology(
        n_hosts=3, program=PROGRAM, qdepth_register=QDEPTH_REGISTER,
        packet_bytes=_mean_frame_bytes(p), network=network(p),
        host_line_qdisc=p.host_qdisc_ahead_packets > 0, backend=p.switch_backend)
    no_loss = "table_set_default MyEgress.link_loss MyEgress.set_loss 0"

    def timeout(msgs: int) -> float:
        return 3 * _expected_s(p, msgs) + 20

    every = (
        PhasePlan("single", _flow_jobs(p, [("single", 1, 3, p.single_msgs)]),
                  commands=(no_loss,), timeout_s=timeout(p.single_msgs),
                  watch_ports=(BOTTLENECK_PORT,), notes="h1 -> h3, one QP alone"),
        PhasePlan("pair", _flow_jobs(p, [("pair-a", 1, 3, p.pair_msgs),
                                         ("pair-b", 2, 3, p.pair_msgs)]),
                  commands=(no_loss,), timeout_s=timeout(2 * p.pair_msgs),
                  watch_ports=(BOTTLENECK_PORT,), notes="h1 -> h3 and h2 -> h3 sharing port 3"),
        PhasePlan("loss", _flow_jobs(p, [("loss", 1, 3, p.loss_msgs)]),
                  commands=(f"table_set_default MyEgress.link_loss MyEgress.set_loss "
                            f"{p.loss_per_10k}",),
                  timeout_s=timeout(p.loss_msgs) + 30, watch_ports=(BOTTLENECK_PORT,),
                  notes=f"h1 -> h3, {p.loss_per_10k / 100:g}% random loss on every port"),
    )
    phases = tuple(ph for ph in every if ph.name in p.phase_names)
    if p.warmup_msgs:
        phases = (PhasePlan(
            "warmup", _flow_jobs(p, [("warmup-a", 1, 3, p.warmup_msgs),
                                     ("warmup-b", 2, 3, p.warmup_msgs)]),
            commands=(no_loss,), timeout_s=timeout(2 * p.warmup_msgs) + 30,
            watch_ports=(BOTTLENECK_PORT,), warmup=True,
            notes="h1 -> h3 and h2 -> h3 before measuring (not measured, outside the "
                  "fidelity verdict)"),) + phases
    # A lone sender offers at most the link rate: a queue deeper than Kmin
    # there (where RED may mark) was built by the emulator, not the model.
    return RunPlan(topology=topo, phases=phases,
                   fidelity=FidelityLimits(uncongested_queue_pkts=p.ecn_kmin + 1),
                   info={"bottleneck_port": BOTTLENECK_PORT, "bottleneck_bps": p.bottleneck_bps,
                         "ecn": {"kmin": p.ecn_kmin, "kmax": p.ecn_kmax, "pmax": p.ecn_pmax},
                         "queue_depth": p.queue_depth})


# ---------------------------------------------------------------------------
# analysis


def _params(run_dir: Path) -> Params:
    import json

    d = json.loads((Path(run_dir) / "plan.json").read_text())["params"]
    known = {f.name for f in dataclasses.fields(Params)}
    return Params(**{k: v for k, v in d.items() if k in known})  # older runs had `slowdown`


def _last_completion_ns(data: PhaseData, flow: str) -> int:
    comps = data.flow_events(flow, "completion", role="receiver")
    if not comps:
        raise ValueError(f"phase {data.name}: flow {flow} delivered nothing")
    return int(max(e["t_ns"] for e in comps))


@dataclass(frozen=True)
class QueueFigures:
    """A port's queue: None where the target measured nothing (BMv2 has no
    queue samples or drop counters, a program may lack the register)."""

    max_queue_pkts: int | None
    max_queue_sampled_pkts: int | None
    max_enq_qdepth_pkts: int | None
    queue_drops: int | None


@dataclass(frozen=True)
class FlowResult:
    """One flow: what it delivered, how fast, and what congestion it saw."""

    payload_bytes: int
    duration_s: float
    goodput_mbps: float
    goodput_fraction: float
    cnps: int
    ce_marked_pkts: int
    retransmissions: int
    bytes_ok: bool


@dataclass(frozen=True)
class SingleResult(FlowResult):
    """Phase ``single``: the flow and the bottleneck's queue."""

    max_queue_pkts: int | None
    max_queue_sampled_pkts: int | None
    max_enq_qdepth_pkts: int | None
    queue_drops: int | None


@dataclass(frozen=True)
class PfcRecord:
    xoff_sent: int
    xon_sent: int
    hosts: dict[str, HostPauses]


@dataclass(frozen=True)
class PairResult:
    """Phase ``pair``: fairness over the second half, the queue, the two flows' sums."""

    jain_index: float
    window_s: list[float]
    rates_mbps: list[float]
    utilization: float
    queue_limit_pkts: int
    max_queue_pkts: int | None
    max_queue_sampled_pkts: int | None
    max_enq_qdepth_pkts: int | None
    queue_drops: int | None
    cnps: int
    ce_marked_pkts: int
    retransmissions: int
    bytes_ok: bool
    bounded_queue: bool | None
    pfc: PfcRecord | None = field(default=None, metadata=OMIT_IF_NONE)   # with PFC only


@dataclass(frozen=True)
class LossResult(FlowResult):
    """Phase ``loss``: the flow and how it recovered."""

    naks: int
    timeouts: int
    loss_per_10k: int
    data_packets_sent: int
    switch_drops: dict[str, int]


@dataclass(frozen=True)
class Results(Summary):
    """A section per phase that ran."""

    single: SingleResult | None = field(default=None, metadata=OMIT_IF_NONE)
    pair: PairResult | None = field(default=None, metadata=OMIT_IF_NONE)
    loss: LossResult | None = field(default=None, metadata=OMIT_IF_NONE)


def _queue(data: PhaseData, port: int) -> QueueFigures:
    """Queue figures of ``port``."""
    samples = [s["queues"][str(port)] for s in data.switch if str(port) in s.get("queues", {})]
    sampled = max(samples) if samples else None
    reg = data.stats.get("qdepth_max")
    wm = None if reg is None else reg.get(str(port), 0)  # read: absent = never queued
    b = data.stats.get("before", {}).get("switch", {}).get("queues", {}).get(str(port))
    a = data.stats.get("after", {}).get("switch", {}).get("queues", {}).get(str(port))
    drops = None
    if a:
        drops = sum(q["drops"] for q in a["queues"]) - (
            sum(q["drops"] for q in b["queues"]) if b else 0)
    elif data.stats.get("after", {}).get("switch") is not None:
        drops = 0  # counters were read; the port's queue never existed
    known = [v for v in (sampled, wm) if v is not None]
    return QueueFigures(max(known) if known else None, sampled, wm, drops)


def _flow_result(data: PhaseData, p: Params, flow: str) -> FlowResult:
    start = int(data.flow_start(flow, "sender")["t_ns"])
    end = _last_completion_ns(data, flow)
    rx = data.flow_end(flow, "receiver")
    tx = data.flow_end(flow, "sender")
    dur = (end - start) / 1e9
    return FlowResult(
        payload_bytes=rx["bytes"],
        duration_s=round(dur, 4),
        goodput_mbps=round(rx["bytes"] * 8 / dur / 1e6, 4),
        goodput_fraction=round(goodput_fraction(rx["bytes"], dur, p.bottleneck_bps,
                                                p.msg_bytes, p.path_mtu), 4),
        cnps=tx.get("cnps_rcvd", 0),
        ce_marked_pkts=rx["qp"]["ce_pkts"],
        retransmissions=tx["qp"]["retransmits"],
        bytes_ok=bool(rx.get("bytes_ok")) and rx["sha256"] == tx["sha256"],
    )


def analyze(run_dir: Path) -> Results:
    p = _params(run_dir)
    single = None
    if "single" in p.phase_names:
        data = load_phase(run_dir, "single")
        single = SingleResult(**dataclasses.asdict(_flow_result(data, p, "single")),
                              **dataclasses.asdict(_queue(data, BOTTLENECK_PORT)))
    return Results(
        single=single,
        pair=_pair_result(run_dir, p) if "pair" in p.phase_names else None,
        loss=_loss_result(run_dir, p) if "loss" in p.phase_names else None)


def _pair_result(run_dir: Path, p: Params) -> PairResult:
    eff = payload_efficiency(p.msg_bytes, p.path_mtu)
    pair = load_phase(run_dir, "pair")
    flows = ["pair-a", "pair-b"]
    t_a = max(int(pair.flow_start(f, "sender")["t_ns"]) for f in flows)
    t_b = min(_last_completion_ns(pair, f) for f in flows)
    if t_b <= t_a:
        raise ValueError("pair: the two flows were never active at the same time")
    mid = (t_a + t_b) / 2
    rates = []
    for f in flows:
        pts = counter_points(pair.flow_events(f, "rx"), "rx_bytes")
        rates.append(window_rate(pts, mid / 1e9, t_b / 1e9) * 8)
    q = _queue(pair, BOTTLENECK_PORT)
    per = [_flow_result(pair, p, f) for f in flows]
    pfc = None
    if p.pfc_xoff_pkts:
        losses = phase_losses(pair)
        pfc = PfcRecord(losses["pfc_xoff"], losses["pfc_xon"], losses["pfc_hosts"])
    return PairResult(
        jain_index=round(jain_index(rates), 4),
        window_s=[round((mid - pair.start_ns()) / 1e9, 3), round((t_b - pair.start_ns()) / 1e9, 3)],
        rates_mbps=[round(r / 1e6, 4) for r in rates],
        utilization=round(sum(rates) / (p.bottleneck_bps * eff), 4),
        queue_limit_pkts=p.queue_depth,
        max_queue_pkts=q.max_queue_pkts, max_queue_sampled_pkts=q.max_queue_sampled_pkts,
        max_enq_qdepth_pkts=q.max_enq_qdepth_pkts, queue_drops=q.queue_drops,
        cnps=sum(v.cnps for v in per),
        ce_marked_pkts=sum(v.ce_marked_pkts for v in per),
        retransmissions=sum(v.retransmissions for v in per),
        bytes_ok=all(v.bytes_ok for v in per),
        bounded_queue=(None if q.max_queue_pkts is None or q.queue_drops is None
                       else q.max_queue_pkts < p.queue_depth and q.queue_drops == 0),
        pfc=pfc)


def _loss_result(run_dir: Path, p: Params) -> LossResult:
    loss = load_phase(run_dir, "loss")
    tx = loss.flow_end("loss", "sender")["qp"]
    b = loss.stats.get("before", {}).get("switch", {}).get("drops", {})
    a = loss.stats.get("after", {}).get("switch", {}).get("drops", {})
    return LossResult(
        **dataclasses.asdict(_flow_result(loss, p, "loss")),
        naks=tx["naks_rcvd"], timeouts=tx["rto"], loss_per_10k=p.loss_per_10k,
        data_packets_sent=tx["tx_pkts"],
        switch_drops={k: v - b.get(k, 0) for k, v in a.items() if v - b.get(k, 0)})


def plot(run_dir: Path) -> list[Path]:
    from testbed.plotting import phase_timelines

    p = _params(run_dir)
    titles = {"single": "single: one QP alone", "pair": "pair: two QPs sharing the bottleneck",
              "loss": f"loss: one QP, {p.loss_per_10k / 100:g}% random loss"}
    return phase_timelines(
        run_dir, ((phase, f"{NAME} - {title} ({p.bottleneck_mbps:g} Mb/s links)")
                  for phase, title in titles.items() if phase in p.phase_names),
        port=BOTTLENECK_PORT, line_rate_bps=p.bottleneck_bps,
        thresholds=(p.ecn_kmin, p.ecn_kmax), queue_limit=p.queue_depth)
