"""EPIC-II AllReduce over the paper's Tree-3-2 (three switches) against the host ring on the same topology.

Topology: the paper's Tree-3-2 (EPIC §3.1, Fig. 2): a root switch S0 with
two child switches S1 and S2, ``hosts_per_leaf`` ranks on each, built as a
leaf-spine fabric with one spine (``spine1`` = S0, ``leaf1`` = S1,
``leaf2`` = S2; testbed.net.LeafSpine, static routes). Every switch is a
soft switch running the same ``switches/p4/epic.p4`` (CPython data path,
epic_allreduce.DATA_PATH), and
every port and host NIC runs at ``link_mbps``. The controller's description
of the aggregation tree (``TREE``: each switch's endpoint IP and parent;
ranks hang on their hosts' leaves) becomes each switch's tables once the
ranks reported their QPNs (testbed.epic.install_tree_from_rendezvous):
each rank's QP connects to its leaf's endpoint, a leaf adds its ranks'
packets and sends the partial sum up to S0 as an ordinary RoCE packet, S0
adds the two partial sums and multicasts the result down, and each leaf
copies it to its ranks. ACKs are reflected by the leaf; losses are
repaired end to end by the ranks' go-back-N (Mode-II).

Phases (after a ``warmup``, one EPIC AllReduce of ``warmup_kib`` on other
groups; not measured, outside the fidelity verdict):

- ``epic``: AllReduce of int32 over the tree from ``min_kib`` to ``max_kib``
  (powers of 4), ``iterations`` per size, then ``barriers`` Barriers; every
  result checked bit for bit;
- ``epic_float``: ``iterations`` AllReduces of ``float_kib`` KiB of float32,
  as fixed point (the ranks agree on the factor in the network first);
  every result checked against the fixed-point error bound and identical at
  every rank;
- ``ring`` / ``ring256``: CommLib's host Ring AllReduce (and Barriers) on
  the same topology at path MTU 1024 and 256 (the ring crosses S0 twice).

Scale as in epic-allreduce: the paper's NICs run at ``nic_gbps``; slowdown
= nic_gbps / link_mbps. Algorithm throughput = message bytes / completion
time of the slowest rank. As there, every switch's window is
``2**window_log2`` packets per rank (epic.p4 compiled with
``EPIC_WINDOW_LOG2`` on all three switches, the ranks keep to it), the
hosts may have a NIC latency per message and a library overhead per step
(``nic_latency_us``, ``step_overhead_us``), and ``payload=phantom`` runs the
integer phases (and the warm-up) without their data; the float phase stays
real (EPIC's phantom collectives are int32).

Keys (top level of summary.json): ``sizes`` (bytes), ``algbw`` (Mb/s per
scheme, per size), ``algbw_paper_gbps``, ``ratio_large`` (EPIC / ring at the
largest size), ``ratio_large_256`` (EPIC / ring256), ``ideal_ratio``
(2(N-1)/N), ``link_fraction`` (EPIC algbw / link rate at the largest size),
``model_fraction`` (EPIC algbw / the pipelined ideal S/B, headers counted),
``barrier_ms`` (per scheme) and ``barrier_ratio`` (ring / EPIC),
``float_within_bound`` and ``float_identical`` (the float phase),
``bit_exact`` (the integer phases); ``paper`` holds the paper's values
(PAPER below) and ``model`` this testbed's ideal values.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from experiments import epic_allreduce
from experiments.epic_allreduce import (
    check_epic_ranks,
    frame_bytes,
    ideal_algbw_fraction,
    retransmissions,
)
from hosts.agent_spec import CollectiveSpec, JobSpec, TransportSpec
from hosts.commlib.epic import ELEMS, PACKET_BYTES
from testbed.claims import Claim
from testbed.epic import window_defines
from testbed.experiment import FidelityLimits, PhasePlan, RunPlan, Topology, param
from testbed.net import LeafSpine, host_addr
from testbed.summary import Summary, json_key
from testbed.timeline import load_phase

NAME = "epic-tree"
# rxe: unmodified rdma_rxe ranks, each in the initial namespace on its own
# link to its leaf (testbed.rxe_host), as in epic-allreduce --hosts rxe
HOST_PROVIDERS = ("udp", "rxe")
PROGRAM = "switches/p4/epic.p4"
SCHEMES = ("epic", "ring", "ring256")
HEADLINE = ("ratio_large", "ratio_large_256", "model_fraction", "barrier_ratio", "bit_exact",
            "float_within_bound")

# The paper's values for this experiment's keys (Yuan et al., SIGCOMM 2026).
# Its Tree-3-2 (§3.1, Fig. 2) is the IncTree of its design and of its TLA+
# model check (correct sums and termination with one loss at a time); its
# hardware results are on one switch, so the tree's values are its §5
# models: Mode-II pipelines packets, T_II = (2H-2)L + (2H-3)U/B + S/B, so a
# large message runs at the link rate B whatever the tree's depth H; and the
# switch adding saves the ring's 2(N-1)/N bytes per message byte.
PAPER: dict[str, Any] = {
    "topology": "Tree-3-2: root S0, child switches S1 and S2, two ranks each",
    "ranks": 4,
    "depth_H": 3,                 # ranks, leaf switches, root
    "degree_D": 2,
    "model_fraction": 1.0,        # §5: S/B at large S (pipelined through the tree)
    "ideal_ratio": 1.5,           # 2(N-1)/N at N = 4
    "ratio_large_256": 1.5,       # same 256 B packets: the byte ratio exactly
    # the paper's links (its testbed's 100 GbE NICs and ports) and the sizes of
    # its AllReduce sweep (Fig. 13: 4 KB .. 1 GB), which the paper profile runs
    # over the tree
    "nic_gbps": epic_allreduce.PAPER["nic_gbps"],
    "message_bytes": epic_allreduce.PAPER["message_bytes"],
    # for context, one switch with 8 ranks (Table 9, Fig. 13): 1 GB, 100 Gb/s
    "one_switch": {"ratio_large": 1.36, "ratio_large_256": 1.59, "link_fraction": 0.653},
}

_PLOTS = ("tree_algbw.png",)
REFERENCE = PAPER   # the values CLAIMS take
CLAIMS = (
    Claim("§5 delay model", "Mode-II pipelines packets through the tree: a large AllReduce "
          "over Tree-3-2 runs at the link rate (S/B), as on one switch", key="model_fraction",
          paper=PAPER["model_fraction"], rel_tol=0.10, plots=_PLOTS),
    Claim("§3.1, Tree-3-2", "adding in the switches sends each byte once: at the same 256 B "
          "packets, EPIC beats the host ring by 2(N-1)/N = 1.5 at N = 4",
          key="ratio_large_256", paper=PAPER["ratio_large_256"], direction="above", versus=1.0,
          rel_tol=0.10, plots=_PLOTS),
)

# The aggregation tree the controller installs: switch -> its endpoint IP and
# parent (the fabric's leaves hang below its one spine).
ROOT_IP = "10.255.0.1"


def tree(leaves: int) -> dict[str, dict[str, str | None]]:
    out: dict[str, dict[str, str | None]] = {"spine1": {"ip": ROOT_IP, "parent": None}}
    for li in range(1, leaves + 1):
        out[f"leaf{li}"] = {"ip": f"10.255.0.{10 + li}", "parent": "spine1"}
    return out


# Each phase's communicator takes its own gids, QPNs and multicast groups
# (2N+1 reserved each; over a tree only the AllReduce group is installed).
ENDPOINTS = {
    "epic": {"qpn": 0x100, "gid": 0, "mgid": 1, "start_psn": 0},
    "epic_float": {"qpn": 0x180, "gid": 32, "mgid": 0x100, "start_psn": 0},
    "warmup": {"qpn": 0x200, "gid": 64, "mgid": 0x200, "start_psn": 0},
}
MAX_RANKS = 15                     # 2N+1 groups inside each 32-gid block


@dataclass(frozen=True)
class Params(epic_allreduce.EpicRates):
    leaves: int = param(2, "child switches of the root switch (Tree-3-2: 2)", "switches")
    hosts_per_leaf: int = param(2, "ranks on each child switch (Tree-3-2: 2)", "ranks")
    min_kib: int = param(4, "smallest int32 AllReduce of the size sweep (sizes x4 up to "
                            "max_kib)", "KiB")
    max_kib: int = param(1024, "largest int32 AllReduce of the size sweep", "KiB")
    iterations: int = param(2, "AllReduces per size and scheme (and of the float phase)",
                            "collectives")
    float_kib: int = param(256, "the float32 AllReduce of the epic_float phase (0: no float "
                                "phase)", "KiB")
    barriers: int = param(5, "Barriers per scheme, after the AllReduces", "barriers")
    link_mbps: float = epic_allreduce.link_mbps_param()
    # With backend=pypy the three switch daemons keep compiling traces for
    # about 20 s of EPIC traffic (stalls of 100-140 ms), so that backend needs
    # 1024 here (21 s at 0.5 Mb/s) to keep them out of the measured phases;
    # the CPython data path (the default) has no such stalls.
    warmup_kib: int = param(64, "one EPIC AllReduce of this size before measuring (0: none)",
                            "KiB")
    nic_gbps: float = epic_allreduce.nic_gbps_param()
    backend: str = epic_allreduce.backend_param("switches'")
    seed: int = epic_allreduce.seed_param()
    payload: str = epic_allreduce.payload_param(
        "the integer phases' packets and timing without the data; the float phase stays real")
    nic_latency_us: float = epic_allreduce.nic_latency_param()
    step_overhead_us: float = epic_allreduce.step_overhead_param()
    window_log2: int = epic_allreduce.window_log2_param(
        " (epic.p4's EPIC_WINDOW_LOG2 on all three switches; the ranks keep to it)",
        switches="every EPIC switch's")

    @classmethod
    def quick(cls) -> Params:
        return cls(max_kib=64, iterations=1, float_kib=64, barriers=3)

    @classmethod
    def paper(cls) -> Params:
        """Tree-3-2 at the paper's rates: every port and NIC at 100 Gb/s
        (slowdown 1), the paper's AllReduce sweep (Fig. 13's sizes, 4 KB to
        1 GB: the paper gives none for the tree; about 50 min of wall time
        here), phantom payloads (the rings' and EPIC's 1 GB buffers would not
        fit in memory four times over), one AllReduce per size (the
        simulation is deterministic), epic-allreduce's HOST_LATENCY, and every
        switch's window sized to the tree's path (bdp_window_log2 at depth
        H = 3):

            round trip = 2 x 0.6 us            NIC latency, sender and receiver
                       + 4 x 314 B / 100 Gb/s  data up two links, sum down two: 4 x 25.1 ns
                       + 2 x 62 B / 100 Gb/s   ACK up to the leaf, reflected: 2 x 5.0 ns
                       = 1.310 us
            BDP        = 100 Gb/s x 1.310 us = 16.4 kB = 52.2 frames of 314 B
            W          >= 2 x 52.2 (refilled in halves) = 104.3 -> 128 = 2**7
        """
        lo, hi = PAPER["message_bytes"]
        return cls(leaves=2, hosts_per_leaf=2, link_mbps=PAPER["nic_gbps"] * 1000.0,
                   nic_gbps=PAPER["nic_gbps"], min_kib=lo // 1024, max_kib=hi // 1024,
                   iterations=1, payload="phantom",
                   **epic_allreduce.paper_hosts(PAPER["nic_gbps"], depth=PAPER["depth_H"]))

    def __post_init__(self) -> None:
        if not 1 <= self.leaves <= 8 or self.hosts_per_leaf < 1:
            raise ValueError("leaves must be 1..8 and hosts_per_leaf >= 1")
        if not 2 <= self.ranks <= MAX_RANKS:
            raise ValueError(f"leaves x hosts_per_leaf = {self.ranks} ranks; 2..{MAX_RANKS}")
        if not 0 < self.min_kib <= self.max_kib:
            raise ValueError("need 0 < min_kib <= max_kib")
        if self.warmup_kib < 0 or self.float_kib < 0 or self.barriers < 0:
            raise ValueError("warmup_kib, float_kib and barriers must be >= 0")
        if self.link_mbps <= 0 or self.nic_gbps <= 0 or self.iterations < 1:
            raise ValueError("link_mbps, nic_gbps and iterations must be positive")
        check_epic_ranks(self.payload, self.nic_latency_us, self.step_overhead_us,
                         self.window_log2)

    @property
    def ranks(self) -> int:
        return self.leaves * self.hosts_per_leaf

    def sizes(self) -> list[int]:
        """Message sizes in bytes: min_kib, x4, ... up to max_kib (always included)."""
        out, k = [], self.min_kib
        while k < self.max_kib:
            out.append(k * 1024)
            k *= 4
        out.append(self.max_kib * 1024)
        return out

    def sequence(self) -> tuple[tuple[str, int], ...]:
        """(op, int32 per rank) of the measured phases' collectives, each run
        ``iterations`` times in a row (CollectiveSpec), then the Barriers."""
        return (tuple(("all_reduce", s // 4) for s in self.sizes())
                + (("barrier", 1),) * self.barriers)

    def fabric(self) -> LeafSpine:
        return LeafSpine(leaves=self.leaves, spines=1, hosts_per_leaf=self.hosts_per_leaf,
                         ecmp=False)


def _group(name: str, p: Params) -> dict[str, object]:
    return {**ENDPOINTS[name], "switch_ip": ROOT_IP, "tree": tree(p.leaves)}


def _rank_endpoint(name: str, p: Params, rank: int) -> dict[str, object]:
    """Rank ``rank``'s endpoint: its leaf's IP, the group's QPN and gid."""
    leaf = f"leaf{p.fabric().leaf_of(rank + 1)}"
    return {**ENDPOINTS[name], "switch_ip": tree(p.leaves)[leaf]["ip"]}


def _epic_phase(name: str, p: Params, scale: dict[str, float], *, ops: tuple[str, ...],
                counts: tuple[int, ...], dtype: str, iterations: int, timeout_s: float,
                warmup: bool = False, notes: str = "") -> PhasePlan:
    t = TransportSpec(scale=scale, path_mtu=PACKET_BYTES)
    jobs = {}
    for r in range(p.ranks):
        h = host_addr(r + 1)
        coll = CollectiveSpec(rank=r, size=p.ranks, job_id=1, dtype=dtype, ops=ops,
                              counts=counts, iterations=iterations, seed=p.seed, scheme="epic",
                              epic=_rank_endpoint(name, p, r), epic_window=p.window,
                              payload=p.payload if dtype == "int32" else "real",
                              step_overhead_us=p.step_overhead_us)
        jobs[h.name] = JobSpec(host=h.name, ip=h.ip, transport=t, collective=coll,
                               timeout_s=timeout_s)
    return PhasePlan(name, jobs, timeout_s=timeout_s, epic_group=_group(name, p), warmup=warmup,
                     notes=notes)


def plan(p: Params) -> RunPlan:
    scale = p.transport_scale()
    link_bps = p.link_mbps * 1e6
    seq = p.sequence()
    ops, counts = tuple(op for op, _ in seq), tuple(c for _, c in seq)
    where = f"Tree-3-2 ({p.leaves} leaves x {p.hosts_per_leaf} ranks)"
    phases = []
    if p.warmup_kib:
        phases.append(_epic_phase(
            "warmup", p, scale, ops=("all_reduce",), counts=(p.warmup_kib * 256,),
            dtype="int32", iterations=1, timeout_s=_timeout(p, "epic", [p.warmup_kib * 1024]),
            warmup=True, notes=f"one EPIC AllReduce of {p.warmup_kib} KiB over the tree "
                               "before measuring (not measured)"))
    phases.append(_epic_phase(
        "epic", p, scale, ops=ops, counts=counts, dtype="int32", iterations=p.iterations,
        timeout_s=_timeout(p, "epic", p.sizes()),
        notes=f"{where}: EPIC AllReduce of {p.sizes()[0]}..{p.sizes()[-1]} B, "
              f"{p.iterations} per size, {p.barriers} Barriers"))
    if p.float_kib:
        phases.append(_epic_phase(
            "epic_float", p, scale, ops=("all_reduce",), counts=(p.float_kib * 256,),
            dtype="float32", iterations=p.iterations,
            timeout_s=_timeout(p, "epic", [p.float_kib * 1024]),
            notes=f"{where}: EPIC AllReduce of {p.float_kib} KiB of float32 (fixed point)"))
    for scheme in ("ring", "ring256"):
        mtu = 256 if scheme == "ring256" else 1024
        t = TransportSpec(scale=scale, path_mtu=mtu)
        timeout = _timeout(p, scheme, p.sizes())
        jobs = {}
        for r in range(p.ranks):
            h = host_addr(r + 1)
            coll = CollectiveSpec(rank=r, size=p.ranks, job_id=1, dtype="int32", ops=ops,
                                  counts=counts, iterations=p.iterations, seed=p.seed,
                                  payload=p.payload, step_overhead_us=p.step_overhead_us)
            jobs[h.name] = JobSpec(host=h.name, ip=h.ip, transport=t, collective=coll,
                                   timeout_s=timeout)
        phases.append(PhasePlan(scheme, jobs, timeout_s=timeout,
                                notes=f"{where}: host Ring AllReduce, path MTU {mtu}"))
    fab = p.fabric()
    # every switch of the tree runs epic.p4 compiled with the same window
    topo = Topology(n_hosts=p.ranks, program=PROGRAM, backend=p.backend, fabric=fab,
                    commands=(f"set_port_rate_bps {int(link_bps)}",),
                    packet_bytes=frame_bytes(PACKET_BYTES),
                    defines=window_defines(p.window_log2))
    return RunPlan(topology=topo, phases=tuple(phases), fidelity=FidelityLimits(),
                   info={"link_bps": link_bps, "paper": PAPER, "sizes": p.sizes(),
                         "tree": tree(p.leaves), "elems_per_packet": ELEMS,
                         "epic_window_pkts": p.window})


def _timeout(p: Params, scheme: str, sizes: list[int]) -> float:
    """Three times the ideal time of the phase, plus set-up and the Barriers."""
    frac = ideal_algbw_fraction(scheme, p.ranks)
    ideal = sum(s * 8 / (p.link_mbps * 1e6 * frac) for s in sizes) * p.iterations
    return 3 * ideal + 60 + 5 * (len(sizes) + p.barriers) * p.iterations


@dataclass(frozen=True)
class _PhaseTimes:
    ok: bool                     # every rank checked every collective, in order
    identical: bool              # and the ranks' results are the same
    time_s: dict[int, float]     # the slowest rank's time of each collective (s)
    barrier_ms: list[float]      # a Barrier's, from the last rank entering to the last leaving
    retransmissions: int | None


@dataclass(frozen=True)
class SchemeResult:
    algbw: list[float]           # per size, Mb/s
    time_s: list[float]
    bit_exact: bool | None       # None for phantom payloads (not checked)
    barrier_ms: list[float]
    collectives: int
    retransmissions: int | None


@dataclass(frozen=True)
class FloatResult:
    """The float AllReduces: within the quantisation bound, identical on every rank."""

    size: int
    within_bound: bool
    identical: bool
    algbw: list[float]


@dataclass(frozen=True)
class Results(Summary):
    sizes: list[int]
    ranks: int
    algbw: dict[str, list[float]]
    algbw_paper_gbps: dict[str, list[float]]
    ratio_large: float | None
    ratio_large_256: float | None
    ideal_ratio: float
    link_fraction: float
    model_fraction: float
    barrier_ms: dict[str, float | None]
    barrier_ratio: float | None
    bit_exact: bool | None
    float_within_bound: bool | None
    float_identical: bool | None
    float_: FloatResult | None = field(metadata=json_key("float", omit_if_none=True))
    schemes: dict[str, SchemeResult]
    model: dict[str, float]
    paper: Mapping[str, object]


def _phase(run_dir: Path, name: str, p: Params, seq: list[str]) -> _PhaseTimes:
    """Checks, per-collective times and retransmissions of one phase whose
    collectives are ``seq`` (one entry per collective, in order)."""
    data = load_phase(run_dir, name)
    checks = data.all_events("collective_check")
    same: dict[int, set[str]] = {}
    for e in checks:
        if e.get("sha256"):
            same.setdefault(e["iteration"], set()).add(e["sha256"])
    starts: dict[int, list[int]] = {}
    ends: dict[int, list[int]] = {}
    for e in data.all_events("collective_end"):
        starts.setdefault(e["seq"], []).append(e["t_start_ns"])
        ends.setdefault(e["seq"], []).append(e["t_ns"])
    reports = data.all_events("pacer_report")
    return _PhaseTimes(
        ok=(len(checks) == p.ranks * len(seq) and all(e["ok"] for e in checks)
            and all(e["op"] == seq[e["iteration"]] for e in checks)),
        identical=all(len(v) == 1 for v in same.values()) and bool(checks),
        time_s={i: max(e - s for s, e in zip(starts[i], ends[i], strict=True)) / 1e9
                for i in ends if len(ends[i]) == p.ranks},
        barrier_ms=[(max(ends[i]) - max(starts[i])) / 1e6 for i, op in enumerate(seq)
                    if op == "barrier" and len(ends.get(i, ())) == p.ranks],
        retransmissions=retransmissions(reports),
    )


def _scheme_results(run_dir: Path, scheme: str, p: Params) -> SchemeResult:
    seq = [op for op, _ in p.sequence() for _ in range(p.iterations)]
    ph = _phase(run_dir, scheme, p, seq)
    algbw, times = [], []
    for k, size in enumerate(p.sizes()):
        ds = [ph.time_s[i] for i in range(k * p.iterations, (k + 1) * p.iterations)
              if i in ph.time_s]
        mean = sum(ds) / len(ds) if ds else 0.0
        times.append(round(mean, 9))
        algbw.append(round(size * 8 / mean / 1e6, 5) if mean else 0.0)
    # phantom payloads are not checked: no verdict either way
    bit_exact = None if p.payload == "phantom" else ph.ok and ph.identical
    return SchemeResult(algbw=algbw, time_s=times, bit_exact=bit_exact,
                        barrier_ms=[round(v, 4) for v in ph.barrier_ms],
                        collectives=len(ph.time_s), retransmissions=ph.retransmissions)


def analyze(run_dir: Path) -> Results:
    saved = json.loads((Path(run_dir) / "plan.json").read_text())
    p = Params(**saved["params"])
    res = {s: _scheme_results(Path(run_dir), s, p) for s in SCHEMES}
    algbw = {s: res[s].algbw for s in SCHEMES}
    scale = p.nic_gbps / p.link_mbps       # Mb/s here -> Gb/s at the paper's NIC

    def ratio(a: float | None, b: float | None) -> float | None:
        return round(a / b, 4) if a and b else None

    def mean(v: list[float]) -> float | None:
        return round(sum(v) / len(v), 4) if v else None

    fl = None
    if p.float_kib:
        ph = _phase(Path(run_dir), "epic_float", p, ["all_reduce"] * p.iterations)
        fl = FloatResult(size=p.float_kib * 1024, within_bound=ph.ok, identical=ph.identical,
                         algbw=[round(p.float_kib * 8192 / t / 1e6, 5)
                                for t in ph.time_s.values() if t])
    epic_ideal = ideal_algbw_fraction("epic", p.ranks)
    barrier = {s: mean(res[s].barrier_ms) for s in SCHEMES}
    return Results(
        sizes=p.sizes(),
        ranks=p.ranks,
        algbw=algbw,
        algbw_paper_gbps={s: [round(v * scale, 3) for v in algbw[s]] for s in SCHEMES},
        ratio_large=ratio(algbw["epic"][-1], algbw["ring"][-1]),
        ratio_large_256=ratio(algbw["epic"][-1], algbw["ring256"][-1]),
        ideal_ratio=round(2 * (p.ranks - 1) / p.ranks, 4),
        link_fraction=round(algbw["epic"][-1] / p.link_mbps, 4),
        model_fraction=round(algbw["epic"][-1] / (p.link_mbps * epic_ideal), 4),
        barrier_ms=barrier,
        barrier_ratio=ratio(barrier["ring"], barrier["epic"]),
        bit_exact=None if p.payload == "phantom" else all(
            res[s].bit_exact for s in SCHEMES),
        float_within_bound=fl.within_bound if fl else None,
        float_identical=fl.identical if fl else None,
        float_=fl,
        schemes=res,
        model={s: round(ideal_algbw_fraction(s, p.ranks), 4) for s in SCHEMES}
        | {"ratio_large": round(epic_ideal / ideal_algbw_fraction("ring", p.ranks), 4),
           "ratio_large_256": round(epic_ideal / ideal_algbw_fraction("ring256", p.ranks), 4)},
        paper=PAPER,
    )


def plot(run_dir: Path) -> list[Path]:
    from testbed.plotting import algbw_panel, measured_beside_reference, run_plots, save_figure

    plt, params, out = run_plots(run_dir)
    p = Params(**params)
    r = analyze(run_dir)
    labels = {"epic": "EPIC-II over Tree-3-2", "ring": "host ring, MTU 1024",
              "ring256": "host ring, MTU 256"}
    fig, (ax, bx) = plt.subplots(1, 2, figsize=(12, 4.5))
    algbw_panel(ax, r.sizes, r.algbw, r.model, {s: labels[s] for s in SCHEMES},
                p.link_mbps, title=f"{p.ranks} ranks on {p.leaves} leaf switches under one "
                f"root, links at {p.link_mbps:g} Mb/s (dotted: ideal)", title_size=9)
    ax.legend(fontsize=8)
    keys = (r.model_fraction, r.ratio_large, r.ratio_large_256)
    names = ("EPIC / pipelined\nideal (S/B)", "EPIC / ring\nMTU 1024", "EPIC / ring\nMTU 256")
    measured_beside_reference(
        bx, names, [k or 0.0 for k in keys],
        [1.0, r.model["ratio_large"], r.model["ratio_large_256"]],
        measured_label=f"measured, {r.sizes[-1] // 1024} KiB",
        reference_label="model (paper's S/B; 2(N-1)/N with this testbed's headers)",
        title="large messages: measured against the model")
    bx.axhline(1.0, color="grey", linewidth=0.8)
    bx.set_xticks(range(len(keys)), names, fontsize=8)
    bx.legend(fontsize=7)
    return [save_figure(fig, out / "tree_algbw.png")]
