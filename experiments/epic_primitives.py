"""EPIC-II Reduce, Broadcast, ReduceScatter, AllGather and Barrier against the host's (EPIC, the primitives at 1 GB).

Topology and scale as ``epic-allreduce``: ``ranks`` hosts around one soft
switch running ``switches/p4/epic.p4``, every port and NIC at ``link_mbps``,
the transport's timers those of the paper's 100 Gb/s NIC (slowdown =
nic_gbps / link_mbps). Two measured phases run the same sequence of
collectives on one communicator (each ``iterations`` times in a row), every
result checked bit for bit by the ranks that receive one:

- Reduce to ``root`` and Broadcast from ``root`` of ``size_kib`` KiB;
- ReduceScatter of ``size_kib`` KiB (each rank ends with 1/N of the sum);
- AllGather to ``size_kib`` KiB (each rank contributes 1/N);
- ``barriers`` Barriers.

``epic`` runs them through the switch (hosts/commlib/epic.py: Reduce and
Broadcast on their own groups, ReduceScatter and AllGather as the paper's
sequences of N Reduces and N Broadcasts, Barrier as an announcement alone);
``ring`` runs CommLib's host equivalents at the default path MTU, 1024 B:
Reduce and Broadcast as pipelined chains around the ring (NCCL's ring
algorithms for them; ``hosts.commlib.schedule``), ReduceScatter and
AllGather as rings, Barrier as an AllReduce of one element (as NCCL's). A
``warmup`` phase (one EPIC AllReduce, not measured) comes first, as in
epic-allreduce. As there, the switch's window is ``2**window_log2`` packets
per rank (epic.p4 compiled with ``EPIC_WINDOW_LOG2``, every group's; the
ranks keep to it), and the hosts may have a NIC latency per message and a
library overhead per step (``nic_latency_us``, ``step_overhead_us``: each
ring or chain step, each EPIC round). Payloads are always real: EPIC's
phantom collectives are int32 AllReduce and Barrier only
(hosts.agent_spec.CollectiveSpec), and this phase runs Reduce and Broadcast.

Algorithm throughput = message bytes (the whole buffer: the input of
Reduce, Broadcast and ReduceScatter, the output of AllGather) / completion
time (the slowest rank's). Barrier latency = the time from the last rank
entering a Barrier to the last rank leaving it, in real time: latency is
not scaled by the time dilation, so it is reported as measured (ms) and as
the host/EPIC ratio.

Keys (top level of summary.json): ``size`` (bytes), ``algbw`` (Mb/s per
primitive and scheme), ``algbw_paper_gbps`` (scaled to nic_gbps),
``link_fraction`` (algbw / link rate), ``ratio_reduce``,
``ratio_broadcast``, ``ratio_reduce_scatter``, ``ratio_all_gather`` (EPIC /
host), ``barrier_ms`` (mean per scheme), ``barrier_ratio`` (host / EPIC),
``bit_exact``; ``model`` holds this testbed's ideal fractions of the link
with its header overheads, ``paper`` the paper's values (PAPER below).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from experiments import epic_allreduce
from experiments.epic_allreduce import (
    ENDPOINT,
    MAX_RANKS,
    check_window_log2,
    frame_bytes,
    warmup_phase,
)
from hosts.agent_spec import EPIC_WINDOW, CollectiveSpec, JobSpec, TransportSpec
from hosts.commlib.epic import PACKET_BYTES
from hosts.commlib.schedule import pipeline_pieces
from testbed.claims import Claim
from testbed.epic import window_defines
from testbed.experiment import FidelityLimits, PhasePlan, RunPlan, ScaledDown, Topology, param
from testbed.net import host_addr
from testbed.summary import Summary
from testbed.timeline import load_phase

NAME = "epic-primitives"
# rxe: unmodified rdma_rxe ranks run every primitive through epic.p4, RNR NAKs
# of the Broadcast groups included (switches/p4/EPIC.md, "rdma_rxe ranks")
HOST_PROVIDERS = ("udp", "rxe")
PROGRAM = "switches/p4/epic.p4"
SCHEMES = ("epic", "ring")
PRIMITIVES = ("reduce", "broadcast", "reduce_scatter", "all_gather")
RING_MTU = 1024
HEADLINE = ("ratio_reduce", "ratio_broadcast", "ratio_reduce_scatter", "ratio_all_gather",
            "barrier_ratio", "bit_exact")

# The paper's values for this experiment's keys (Yuan et al., SIGCOMM 2026,
# the primitives on the Tofino testbed: 8 ranks, one switch, 100 Gb/s NICs,
# 1 GB messages, against NCCL). Reduce "tied" with NCCL: no Gb/s given.
PAPER: dict[str, Any] = {
    "ranks": 8,
    "nic_gbps": 100.0,
    "size": "1 GB",
    "message_bytes": 1 << 30,
    "algbw_gbps": {
        "broadcast": {"epic": 89.0, "ring": 66.6},
        "reduce_scatter": {"epic": 66.3, "ring": 95.6},
        "all_gather": {"epic": 90.6, "ring": 95.6},
    },
    "ratio_reduce": 1.0,                               # "Reduce tied"
    "ratio_broadcast": round(89.0 / 66.6, 3),          # 1.336
    "ratio_reduce_scatter": round(66.3 / 95.6, 3),     # 0.694
    "ratio_all_gather": round(90.6 / 95.6, 3),         # 0.948
    "barrier_us": {"epic": 5.0, "ring": 2000.0},
    "barrier_ratio": 400.0,                            # about 2 ms / about 5 us
}

# The paper profile's message (the paper's is 1 GB), and why it is cut: real
# payloads cost each rank about 16 bytes of memory per byte of message (the
# run's largest process: 2.6 GB at 16 MiB, 7.2 GB at 64 MiB), and a 64 MiB run
# took 4 min 40 s on 2 shared cores (docs/experiments/analysis/epic-primitives.md).
PAPER_SIZE_KIB = 64 * 1024
PAPER_CUT = ("1 GB of real payloads (EPIC's Reduce and Broadcast have no phantom form) "
             "would take about 100 GB of memory for the eight ranks and about 75 min of "
             "wall time; 64 MiB takes 7.2 GB and 5 min")

_PLOTS = ("primitives.png",)
REFERENCE = PAPER   # the values CLAIMS take
CLAIMS = (
    Claim("Primitives, 1 GB", "at 1 GB, EPIC's Reduce ties with NCCL's", key="ratio_reduce",
          paper=PAPER["ratio_reduce"], abs_tol=0.10, plots=_PLOTS),
    Claim("Primitives, 1 GB", "at 1 GB, EPIC's Broadcast beats NCCL's (89.0 against 66.6 Gb/s)",
          key="ratio_broadcast", paper=PAPER["ratio_broadcast"], direction="above",
          versus=1.0, rel_tol=0.10, plots=_PLOTS),
    Claim("Primitives, 1 GB", "at 1 GB, EPIC's ReduceScatter (a sequence of Reduces) loses to "
          "NCCL's ring (66.3 against 95.6 Gb/s)", key="ratio_reduce_scatter",
          paper=PAPER["ratio_reduce_scatter"], direction="below", versus=1.0, rel_tol=0.10,
          plots=_PLOTS),
    Claim("Primitives, 1 GB", "at 1 GB, EPIC's AllGather (a sequence of Broadcasts) loses to "
          "NCCL's ring (90.6 against 95.6 Gb/s)", key="ratio_all_gather",
          paper=PAPER["ratio_all_gather"], direction="below", versus=1.0, rel_tol=0.10,
          plots=_PLOTS),
    Claim("Primitives, 1 GB", "a Barrier takes about 5 us with EPIC, about 2 ms with NCCL",
          key="barrier_ratio", paper=PAPER["barrier_ratio"], direction="above", versus=1.0,
          rel_tol=0.10, plots=_PLOTS),
)


@dataclass(frozen=True)
class Params(epic_allreduce.EpicRates):
    ranks: int = param(8, "hosts in the communicator, one rank each", "ranks")
    size_kib: int = param(1024, "each primitive's message (the whole buffer; int32 split "
                                "evenly over the ranks)", "KiB")
    iterations: int = param(2, "runs of each primitive in a row, per scheme", "collectives")
    barriers: int = param(10, "Barriers per scheme, after the other primitives", "barriers")
    root: int = param(0, "the rank Reduce reduces to and Broadcast sends from", "rank")
    link_mbps: float = epic_allreduce.link_mbps_param()
    warmup_kib: int = param(256, "one EPIC AllReduce of this size before measuring (0: none)",
                            "KiB")
    nic_gbps: float = epic_allreduce.nic_gbps_param()
    backend: str = epic_allreduce.backend_param()
    seed: int = epic_allreduce.seed_param()
    nic_latency_us: float = epic_allreduce.nic_latency_param()
    step_overhead_us: float = epic_allreduce.step_overhead_param(
        "step (ring or chain step, EPIC round) before it posts the step's send")
    window_log2: int = epic_allreduce.window_log2_param(
        " (epic.p4's EPIC_WINDOW_LOG2, every group's; the ranks keep to it)")

    @classmethod
    def quick(cls) -> Params:
        return cls(size_kib=64, iterations=1, barriers=5)

    @classmethod
    def paper(cls) -> Params:
        """The primitives on the paper's testbed: 8 ranks on one switch, every
        port and NIC at 100 Gb/s (slowdown 1), one run of each primitive (the
        simulation is deterministic) of PAPER_SIZE_KIB (the paper's 1 GB, cut:
        scaled_down_from), real payloads (EPIC's Reduce and Broadcast have no
        phantom form), epic-allreduce's HOST_LATENCY and its window sized to
        the path (bdp_window_log2: W = 128 packets per rank). A Reduce's or a
        Broadcast's round trip is an AllReduce's: data up and down one link,
        the ACK up and down (the root's multicast to the ranks, or the
        children's, aggregated, to the root)."""
        return cls(ranks=PAPER["ranks"], link_mbps=PAPER["nic_gbps"] * 1000.0,
                   nic_gbps=PAPER["nic_gbps"], size_kib=PAPER_SIZE_KIB, iterations=1,
                   **epic_allreduce.paper_hosts(PAPER["nic_gbps"]))

    @classmethod
    def scaled_down_from(cls) -> dict[str, ScaledDown]:
        return {"size_kib": ScaledDown(PAPER["message_bytes"] // 1024, PAPER_CUT)}

    def __post_init__(self) -> None:
        if not 2 <= self.ranks <= MAX_RANKS:
            raise ValueError(f"ranks must be 2..{MAX_RANKS} (2N+1 switch groups for the "
                             "measured communicator and as many for the warm-up)")
        if not 0 <= self.root < self.ranks:
            raise ValueError(f"root {self.root} is not a rank of {self.ranks}")
        words = self.size_kib * 256
        if self.size_kib < 1 or words % self.ranks:
            raise ValueError(f"size_kib must be >= 1 and its {words} int32 split evenly "
                             f"over {self.ranks} ranks (AllGather's contributions)")
        if self.warmup_kib < 0 or self.barriers < 0:
            raise ValueError("warmup_kib and barriers must be >= 0")
        if self.link_mbps <= 0 or self.nic_gbps <= 0 or self.iterations < 1:
            raise ValueError("link_mbps, nic_gbps and iterations must be positive")
        if self.nic_latency_us < 0 or self.step_overhead_us < 0:
            raise ValueError("nic_latency_us and step_overhead_us must be >= 0")
        check_window_log2(self.window_log2)

    def sequence(self) -> tuple[tuple[str, int], ...]:
        """(op, int32 per rank) of the collectives each phase runs, once each;
        CollectiveSpec repeats each ``iterations`` times."""
        words = self.size_kib * 256
        return (("reduce", words), ("broadcast", words), ("reduce_scatter", words),
                ("all_gather", words // self.ranks)) + (("barrier", 1),) * self.barriers


def ideal_fraction(primitive: str, scheme: str, ranks: int) -> float:
    """This testbed's ideal algorithm throughput for large messages, as a
    fraction of the link: payload per frame byte, times the message bytes per
    byte the busiest link carries. EPIC: every rank (or the root) sends each
    byte once. Host: rings send (N-1)/N of the message per rank; a chain of
    P pieces takes P + N - 2 piece times."""
    if scheme == "epic":
        return PACKET_BYTES / frame_bytes(PACKET_BYTES)
    eff = RING_MTU / frame_bytes(RING_MTU)
    if primitive in ("reduce", "broadcast"):
        pieces = pipeline_pieces(ranks)
        return eff * pieces / (pieces + ranks - 2)
    return eff * ranks / (ranks - 1)


def plan(p: Params) -> RunPlan:
    scale = p.transport_scale()
    link_bps = p.link_mbps * 1e6
    seq = p.sequence()
    phases = []
    if p.warmup_kib:
        ideal = p.warmup_kib * 8192 / (link_bps * ideal_fraction("reduce", "epic", p.ranks))
        phases.append(warmup_phase(p.ranks, p.warmup_kib, p.seed, scale, 3 * ideal + 60,
                                   step_overhead_us=p.step_overhead_us, window=p.window))
    for scheme in SCHEMES:
        mtu = PACKET_BYTES if scheme == "epic" else RING_MTU
        t = TransportSpec(scale=scale, path_mtu=mtu)
        timeout = _timeout(p, scheme, link_bps)
        jobs = {}
        for r in range(p.ranks):
            h = host_addr(r + 1)
            coll = CollectiveSpec(
                rank=r, size=p.ranks, job_id=1, dtype="int32", ops=tuple(op for op, _ in seq),
                counts=tuple(c for _, c in seq), iterations=p.iterations, root=p.root,
                seed=p.seed, scheme="epic" if scheme == "epic" else "ring",
                epic=ENDPOINT if scheme == "epic" else None,
                epic_window=p.window if scheme == "epic" else EPIC_WINDOW,
                step_overhead_us=p.step_overhead_us)
            jobs[h.name] = JobSpec(host=h.name, ip=h.ip, transport=t, collective=coll,
                                   timeout_s=timeout)
        phases.append(PhasePlan(
            scheme, jobs, timeout_s=timeout, epic_group=ENDPOINT if scheme == "epic" else None,
            notes=f"{p.ranks} ranks: Reduce, Broadcast, ReduceScatter, AllGather of "
                  f"{p.size_kib} KiB and {p.barriers} Barriers, {p.iterations} each"))
    topo = Topology(n_hosts=p.ranks, program=PROGRAM, backend=p.backend,
                    commands=(f"set_port_rate_bps {int(link_bps)}",),
                    packet_bytes=frame_bytes(PACKET_BYTES),
                    defines=window_defines(p.window_log2))
    return RunPlan(topology=topo, phases=tuple(phases), fidelity=FidelityLimits(),
                   info={"link_bps": link_bps, "paper": PAPER, "size": p.size_kib * 1024,
                         "sequence": [list(x) for x in seq], "epic_window_pkts": p.window})


def _timeout(p: Params, scheme: str, link_bps: float) -> float:
    """Three times the ideal time of the phase, plus set-up and the barriers."""
    ideal = sum(p.size_kib * 8192 / (link_bps * ideal_fraction(op, scheme, p.ranks))
                for op in PRIMITIVES) * p.iterations
    return 3 * ideal + 60 + 5 * (len(PRIMITIVES) + p.barriers) * p.iterations


@dataclass(frozen=True)
class SchemeResult:
    """One scheme's phase: per primitive the mean time and throughput, the Barriers."""

    algbw: dict[str, float]          # primitive -> Mb/s
    time_s: dict[str, float]
    bit_exact: bool
    collectives: int
    barrier_ms: list[float]
    retransmissions: int | None


@dataclass(frozen=True)
class Results(Summary):
    size: int
    algbw: dict[str, dict[str, float]]             # primitive -> scheme -> Mb/s
    algbw_paper_gbps: dict[str, dict[str, float]]
    link_fraction: dict[str, dict[str, float]]
    ratio_reduce: float | None                     # EPIC-II / ring, per primitive
    ratio_broadcast: float | None
    ratio_reduce_scatter: float | None
    ratio_all_gather: float | None
    barrier_ms: dict[str, float | None]
    barrier_ratio: float | None                    # ring / EPIC-II latency
    bit_exact: bool
    schemes: dict[str, SchemeResult]
    model: dict[str, object]         # primitive -> scheme -> ideal fraction; the ideal ratios
    paper: Mapping[str, object]


def _phase_results(run_dir: Path, scheme: str, p: Params) -> SchemeResult:
    data = load_phase(run_dir, scheme)
    seq = [op for op, _ in p.sequence() for _ in range(p.iterations)]
    checks = data.all_events("collective_check")
    bit_exact = (len(checks) == p.ranks * len(seq) and all(e["ok"] for e in checks)
                 and all(e["op"] == seq[e["iteration"]] for e in checks))
    starts: dict[int, list[int]] = {}
    ends: dict[int, list[int]] = {}
    for e in data.all_events("collective_end"):
        starts.setdefault(e["seq"], []).append(e["t_start_ns"])
        ends.setdefault(e["seq"], []).append(e["t_ns"])
    size = p.size_kib * 1024
    algbw: dict[str, float] = {}
    times: dict[str, float] = {}
    for op in PRIMITIVES:
        # the slowest rank's completion time of each run of this primitive
        ds = [max(e - s for s, e in zip(starts[i], ends[i], strict=True)) / 1e9
              for i, o in enumerate(seq) if o == op and len(ends.get(i, ())) == p.ranks]
        mean = sum(ds) / len(ds) if ds else 0.0
        times[op] = round(mean, 9)
        algbw[op] = round(size * 8 / mean / 1e6, 5) if mean else 0.0
    # a Barrier: from the last rank entering to the last rank leaving
    lat = [(max(ends[i]) - max(starts[i])) / 1e6 for i, o in enumerate(seq)
           if o == "barrier" and len(ends.get(i, ())) == p.ranks]
    reports = data.all_events("pacer_report")
    return SchemeResult(algbw=algbw, time_s=times, bit_exact=bit_exact,
                        collectives=sum(1 for i in ends if len(ends[i]) == p.ranks),
                        barrier_ms=[round(v, 4) for v in lat],
                        retransmissions=epic_allreduce.retransmissions(reports))


def analyze(run_dir: Path) -> Results:
    saved = json.loads((Path(run_dir) / "plan.json").read_text())
    p = Params(**saved["params"])
    res = {s: _phase_results(Path(run_dir), s, p) for s in SCHEMES}
    scale = p.nic_gbps / p.link_mbps       # Mb/s here -> Gb/s at the paper's NIC

    def ratio(a: float | None, b: float | None) -> float | None:
        return round(a / b, 4) if a and b else None

    def mean(v: list[float]) -> float | None:
        return round(sum(v) / len(v), 4) if v else None

    algbw = {op: {s: res[s].algbw[op] for s in SCHEMES} for op in PRIMITIVES}
    barrier = {s: mean(res[s].barrier_ms) for s in SCHEMES}
    model = {op: {s: round(ideal_fraction(op, s, p.ranks), 4) for s in SCHEMES}
             for op in PRIMITIVES}
    ratios = {op: ratio(algbw[op]["epic"], algbw[op]["ring"]) for op in PRIMITIVES}
    model_ratios = {f"ratio_{op}": round(model[op]["epic"] / model[op]["ring"], 4)
                    for op in PRIMITIVES}
    return Results(
        size=p.size_kib * 1024,
        algbw=algbw,
        algbw_paper_gbps={op: {s: round(v * scale, 3) for s, v in d.items()}
                          for op, d in algbw.items()},
        link_fraction={op: {s: round(v / p.link_mbps, 4) for s, v in d.items()}
                       for op, d in algbw.items()},
        ratio_reduce=ratios["reduce"],
        ratio_broadcast=ratios["broadcast"],
        ratio_reduce_scatter=ratios["reduce_scatter"],
        ratio_all_gather=ratios["all_gather"],
        barrier_ms=barrier,
        barrier_ratio=ratio(barrier["ring"], barrier["epic"]),
        bit_exact=all(res[s].bit_exact for s in SCHEMES),
        schemes=res,
        model={**model, **model_ratios},
        paper=PAPER,
    )


def plot(run_dir: Path) -> list[Path]:
    from testbed.plotting import measured_beside_reference, run_plots, save_figure

    plt, params, out = run_plots(run_dir)
    p = Params(**params)
    r = analyze(run_dir)
    names = {"reduce": "Reduce", "broadcast": "Broadcast", "reduce_scatter": "ReduceScatter",
             "all_gather": "AllGather"}
    fig, (ax, bx) = plt.subplots(1, 2, figsize=(12, 4.5), gridspec_kw={"width_ratios": [3, 2]})
    xs = range(len(PRIMITIVES))
    model = {op: {s: round(ideal_fraction(op, s, p.ranks), 4) for s in SCHEMES}
             for op in PRIMITIVES}
    for k, (s, label) in enumerate((("epic", "EPIC-II"), ("ring", "host, MTU 1024"))):
        vals = [r.link_fraction[op][s] for op in PRIMITIVES]
        bars = ax.bar([x + (k - 0.5) * 0.38 for x in xs], vals, 0.38, label=label)
        for x, op in zip(xs, PRIMITIVES, strict=True):
            ax.hlines(model[op][s], x + (k - 1) * 0.38, x + k * 0.38,
                      color=bars.patches[0].get_facecolor(), linestyle=":", linewidth=1.2)
    ax.set_xticks(list(xs), [names[op] for op in PRIMITIVES])
    ax.set_ylabel("algorithm throughput / link rate")
    ax.set_title(f"{p.ranks} ranks, {p.size_kib} KiB, links at {p.link_mbps:g} Mb/s "
                 "(dotted: ideal)")
    ax.grid(True, axis="y", alpha=0.3)
    ax.legend(fontsize=8, loc="lower left")
    keys = [f"ratio_{op}" for op in PRIMITIVES] + ["barrier_ratio"]
    labels = [names[op] for op in PRIMITIVES] + ["Barrier\n(host/EPIC\nlatency)"]
    meas = [v or 0.0 for v in (r.ratio_reduce, r.ratio_broadcast, r.ratio_reduce_scatter,
                               r.ratio_all_gather, r.barrier_ratio)]
    paper = [PAPER[k] for k in keys]
    measured_beside_reference(bx, labels, meas, paper, measured_label="measured",
                              reference_label="paper (1 GB, Tofino)",
                              title="EPIC against the host")
    bx.axhline(1.0, color="grey", linewidth=0.8)
    bx.set_yscale("log")
    bx.set_xticks(range(len(keys)), labels, fontsize=7)
    bx.set_ylabel("EPIC / host (throughput; Barrier: latency host / EPIC)")
    bx.legend(fontsize=8)
    return [save_figure(fig, out / "primitives.png")]
