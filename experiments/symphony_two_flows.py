"""Symphony prototype (Fig. 9): a lagging and an outpacing step share one port, DCQCN+RED vs Symphony.

The Symphony paper's §4.7: two flows of equal size through one switch port,
ConnectX-6 NICs at 10 Gb/s with DCQCN. Flow B carries step k+1 and starts
first; flow A carries step k (the lagging step) and starts ``offset`` later.
The baseline switch marks by RED only; the Symphony switch also runs
Algorithm 1 for the job (switches/p4/symphony.p4), so B's packets - ahead of
step_min = k while A is active - are marked with P = min(1, k alpha psn_B /
psn_A) and DCQCN slows B, giving A bandwidth. The paper (1 GB flows): at an
offset of about a third of B's standalone FCT, A's FCT 1382 -> 1210 ms
(-12%), B's 1399 -> 1433 ms (+2%), the time both send 882 -> 710 ms.

Setup: h1 sends A, h2 sends B, both to h3 through one soft switch running
``switches/p4/symphony.p4``; the bottleneck is the port toward h3. Every link
and host NIC runs at ``link_mbps``; the modelled network is the prototype's
(``nic_gbps`` = 10), so the slowdown is nic_gbps / link_mbps (1000 at the
full profile's 10 Mb/s, 500 at the quick profile's 20 Mb/s) and every
timer of the model - DCQCN's (ConnectX preset), Symphony's T_win and psn
window (100 us each), the transport's - is that many times longer; packet
counts and bytes are not scaled. RED follows the paper's §4.1 (HPCC's
Kmin 50 KB, Kmax 100 KB, Pmax 0.2), stated in KB in ``Params.network()`` (a
testbed.modelled.ModelledNetwork) and converted by it, once, to packets of
enqueue depth at this run's frame size (1082 bytes at MTU 1024): 46 and 92.
The full profile is lossless, PFC on (XOFF 110 KB, XON 108 KB), as the
paper's simulations (HPCC's RDMA configuration), which §4.7 says the
prototype's setup is similar to; the quick profile is lossy. Symphony's
k, tau, T_win and psn window are the paper's; N_warmup = N_sample = 8 packets
(the paper gives none).

Each flow is one RDMA WRITE_WITH_IMM (one step's transfer, as the CommLib
sends a step): only its last packet ends the step. The job id and the step
(UDP source port) are on every packet, and each flow starts at PSN 0 so that
its PSN is its progress in the step (switches/p4/README.md). Every Symphony
phase registers a fresh job id (with cleared state), as the controller's
job-id allocator does; baseline phases use ids the switch does not track.

Flow size: the paper's 1 GB spans ~3000 DCQCN rate-increase periods (300 us)
while both flows send; at this scale a period is 150 ms of testbed time, so
the run affords ``flow_kb`` per flow (quick 2 MiB: ~8 periods of overlap at
the key offset; full 8 MiB: ~30). ``dcqcn_periods_in_overlap`` records it.

Phases: ``alone`` (B by itself: the standalone FCT S), then for each seed,
offset and scheme one phase ``<scheme>-o<i>-s<seed>``. Offsets are fractions
of the computed standalone FCT, from 0 (full overlap) to 1 (none).

Results (summary.json): ``standalone_fct_s``; per offset under ``offsets``,
for ``baseline`` and ``symphony``: ``fct_a``, ``fct_b``, ``overlap`` (s, mean
over seeds) with their spreads, CE marks and CNPs; at the key offset
(``key_offset`` x S, the paper's point) the top-level ``fct_a_change``,
``fct_b_change``, ``overlap_change`` (relative: (Symphony - baseline) /
baseline) and ``paper`` (REFERENCE) beside them.
"""

from __future__ import annotations

import dataclasses
import statistics
from dataclasses import dataclass
from pathlib import Path

from experiments._symphony_net import PROGRAM, QDEPTH_REGISTER, SymphonyNetwork, load_params
from hosts.agent_spec import FlowSpec, JobSpec, TransportSpec, message_wire_bytes
from hosts.roce.dcqcn import CONNECTX
from testbed.claims import Claim
from testbed.experiment import FidelityLimits, PhasePlan, RunPlan, Topology, param
from testbed.net import host_addr
from testbed.summary import Summary
from testbed.symphony import (
    config_command,
    job_commands,
    source_job_commands,
    tracking_cleared,
)
from testbed.timeline import PhaseData, counter_points, load_phase, rate_series

NAME = "symphony-two-flows"
# rxe: each flow's QP carries its step in the UDP source port from RTR on (its
# flow label, kernel >= 5.17); rxe sends no job id, so the switch writes the job
# of the packet's source (testbed.symphony.source_job_commands)
HOST_PROVIDERS = ("udp", "rxe")
BOTTLENECK_PORT = 3
SCHEMES = ("baseline", "symphony")
HEADLINE = ("fct_a_change", "fct_b_change", "overlap_change", "standalone_fct_s")
HOSTS = {"a": 1, "b": 2}
RECEIVER = 3

# The paper's values for this experiment's keys (§4.7, Fig. 9: A starts 500 ms
# "later than the baseline", about a third of B's standalone FCT into B;
# 1 GB flows at 10 Gb/s). FCTs and overlap in ms of the prototype.
REFERENCE: dict[str, float] = {
    "fct_a_change": (1210 - 1382) / 1382,     # -12%
    "fct_b_change": (1433 - 1399) / 1399,     # +2%
    "overlap_change": (710 - 882) / 882,      # -19%
    "baseline.fct_a_ms": 1382, "symphony.fct_a_ms": 1210,
    "baseline.fct_b_ms": 1399, "symphony.fct_b_ms": 1433,
    "baseline.overlap_ms": 882, "symphony.overlap_ms": 710,
}

# §4.7's prototype: NICs at 10 Gb/s, two flows of 1 GB (2^30 bytes: the
# largest one RDMA WRITE the flow spec takes).
PAPER_LINK_GBPS = 10.0
PAPER_FLOW_BYTES = 1 << 30

# What the report (testbed report) checks against Fig. 9: the relative changes
# at the key offset, each judged over the seeds (``*_change_seeds``). Changes
# agree within 10 points of the paper's, in the paper's direction.
_FIG9_PLOTS = ("timelines.png", "offsets.png")
CLAIMS = (
    Claim("Fig. 9", "the lagging step A finishes sooner with Symphony (-12%)",
          key="fct_a_change", paper=REFERENCE["fct_a_change"], direction="below",
          abs_tol=0.10, percent=True, per_seed="fct_a_change_seeds", plots=_FIG9_PLOTS),
    Claim("Fig. 9", "the outpacing step B finishes a little later (+2%)",
          key="fct_b_change", paper=REFERENCE["fct_b_change"], direction="above",
          abs_tol=0.10, percent=True, per_seed="fct_b_change_seeds", plots=_FIG9_PLOTS),
    Claim("Fig. 9", "the two steps overlap less (-19%)",
          key="overlap_change", paper=REFERENCE["overlap_change"], direction="below",
          abs_tol=0.10, percent=True, per_seed="overlap_change_seeds", plots=_FIG9_PLOTS),
)


@dataclass(frozen=True)
class Params(SymphonyNetwork):
    link_mbps: float = 10.0
    pfc: bool = True                 # lossless, as the paper's simulations
    flow_kb: int = param(8192, "each flow's size, one RDMA WRITE (paper: 1 GB)", "KiB")
    offsets: str = param("0,0.1667,0.3333,0.5,0.6667,0.8333,1", "A's start after B's, in "
                         "fractions of B's standalone FCT S, one phase per scheme each, "
                         "comma-separated")
    key_offset: float = param(0.3333, "the offset the headline figures are taken at (the "
                                      "paper's point), a fraction of S; one of offsets")
    seeds: int = param(3, "runs of every offset and scheme", "runs")
    step_a: int = param(10, "the step A carries (the lagging one); B carries step_a + 1")
    sample_interval_us: int = param(20000, "interval of each flow's rate and receive samples "
                                           "(testbed clock)", "us")

    @classmethod
    def quick(cls) -> Params:
        return cls(link_mbps=20.0, pfc=False, flow_kb=2048, offsets="0,0.3333,0.6667,1",
                   seeds=1)

    @classmethod
    def paper(cls) -> Params:
        """§4.7's prototype at its own rate (slowdown 1): ConnectX-6 NICs at
        10 Gb/s with DCQCN (the connectx preset), 1 GB flows, the same start
        offsets as the full profile. The paper shows one run per offset; the
        simulation is deterministic, so one seed is its exact value. Samples
        every 5 ms: a 1 GB flow lasts about 0.9 s at 10 Gb/s."""
        return cls(link_mbps=PAPER_LINK_GBPS * 1000, nic_gbps=PAPER_LINK_GBPS,
                   flow_kb=PAPER_FLOW_BYTES // 1024, seeds=1, sample_interval_us=5000)

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.flow_kb < 1 or self.flow_kb * 1024 > 1 << 30:
            raise ValueError("flow_kb must be 1..1048576 (1 GiB)")
        if (self.flow_kb * 1024) % self.path_mtu:
            raise ValueError("flow_kb must be a whole number of path_mtu packets")
        offs = self.offset_list
        if not offs or any(not 0 <= o <= 1 for o in offs):
            raise ValueError(f"offsets {self.offsets!r}: fractions in [0, 1], comma-separated")
        if not any(abs(o - self.key_offset) < 1e-9 for o in offs):
            raise ValueError(f"key_offset {self.key_offset} must be one of the offsets")
        if self.seeds < 1:
            raise ValueError("seeds must be >= 1")
        if len(offs) * self.seeds > 250:
            raise ValueError("at most 250 Symphony phases (one job id each)")
        if not 0 <= self.step_a < 0x3FFF:
            raise ValueError("step_a must be 0..16382 (B carries step_a + 1)")

    @property
    def offset_list(self) -> list[float]:
        try:
            return [float(x) for x in self.offsets.split(",") if x.strip()]
        except ValueError:
            raise ValueError(f"offsets {self.offsets!r}: not numbers") from None

    @property
    def flow_bytes(self) -> int:
        return self.flow_kb * 1024

    @property
    def frame_bytes(self) -> int:
        """Mean frame of a flow's packets (what queue depths in packets mean)."""
        pkts = -(-self.flow_bytes // self.path_mtu)
        return round(message_wire_bytes(self.flow_bytes, self.path_mtu) / pkts)

    @property
    def red_kmin_pkts(self) -> int:
        kmin = self.conversion.kmin_pkts
        assert kmin is not None
        return kmin

    @property
    def red_kmax_pkts(self) -> int:
        kmax = self.conversion.kmax_pkts
        assert kmax is not None
        return kmax

    @property
    def standalone_s(self) -> float:
        """One flow alone at line rate (testbed seconds)."""
        return message_wire_bytes(self.flow_bytes, self.path_mtu) * 8 / self.link_bps

    @property
    def dcqcn_period_s(self) -> float:
        """DCQCN's rate-increase timer on the testbed's clock."""
        return CONNECTX["rpg_time_reset"] * 1e-6 * self.slowdown


def phase_name(scheme: str, offset_index: int, seed: int) -> str:
    return f"{scheme}-o{offset_index}-s{seed}"


def _transport(p: Params) -> TransportSpec:
    return TransportSpec(scale=p.transport_scale(),
                         dcqcn={"preset": p.dcqcn_preset}, path_mtu=p.path_mtu,
                         sample_interval_us=p.sample_interval_us,
                         qdisc_ahead_packets=p.host_qdisc_ahead_packets, pfc=p.pfc)


def _jobs(p: Params, job_id: int, delays: dict[str, float], seed: int) -> dict[str, JobSpec]:
    per_host: dict[int, list[FlowSpec]] = {}
    for flow, delay in delays.items():
        step = p.step_a if flow == "a" else p.step_a + 1
        receiver = FlowSpec(flow=flow, role="receiver", peer_ip=host_addr(HOSTS[flow]).ip,
                            msg_bytes=p.flow_bytes, count=1, window=1,
                            seed=100 * seed + HOSTS[flow], job_id=job_id, step=step)
        per_host.setdefault(HOSTS[flow], []).append(dataclasses.replace(
            receiver, role="sender", peer_ip=host_addr(RECEIVER).ip, start_delay_s=delay,
            first_psn=0))
        per_host.setdefault(RECEIVER, []).append(receiver)
    t = _transport(p)
    worst = max(delays.values()) + len(delays) * p.standalone_s
    return {f"h{i}": JobSpec(host=f"h{i}", ip=host_addr(i).ip, transport=t, flows=tuple(fl),
                             timeout_s=3 * worst + 60)
            for i, fl in sorted(per_host.items())}


def plan(p: Params) -> RunPlan:
    topo = Topology(
        n_hosts=3, program=PROGRAM, qdepth_register=QDEPTH_REGISTER,
        packet_bytes=p.frame_bytes, network=p.network(),
        commands=(config_command(p.symphony, p.slowdown),), realtime=p.realtime,
        realtime_agents_first=p.realtime_agents_first,
        host_line_qdisc=p.host_qdisc_ahead_packets > 0)
    s = p.standalone_s
    alone = _jobs(p, 255, {"b": 0.0}, 0)
    phases = [PhasePlan("alone", alone, commands=(*tracking_cleared(),
                                                  *source_job_commands(alone)),
                        timeout_s=3 * s + 60,
                        watch_ports=(BOTTLENECK_PORT,), notes="B alone: the standalone FCT")]
    job = 0
    for seed in range(p.seeds):
        for i, off in enumerate(p.offset_list):
            for scheme in SCHEMES:
                job += 1
                delays = {"b": 0.0, "a": off * s}
                jobs = _jobs(p, job, delays, seed)
                phases.append(PhasePlan(
                    phase_name(scheme, i, seed), jobs,
                    commands=(*tracking_cleared(),
                              *(job_commands(job) if scheme == "symphony" else ()),
                              *source_job_commands(jobs)),
                    timeout_s=3 * (delays["a"] + 2 * s) + 60, watch_ports=(BOTTLENECK_PORT,),
                    notes=f"{scheme}: B (step {p.step_a + 1}) at 0, A (step {p.step_a}) "
                          f"{off:.3f} x S later; job id {job}"
                          + ("" if scheme == "symphony" else " (not tracked)")))
    return RunPlan(topology=topo, phases=tuple(phases), fidelity=FidelityLimits(),
                   info={"bottleneck_port": BOTTLENECK_PORT, "link_bps": p.link_bps,
                         "slowdown": p.slowdown, "standalone_s": s,
                         "red_pkts": {"kmin": p.red_kmin_pkts, "kmax": p.red_kmax_pkts,
                                      "pmax_pct": round(p.red_pmax * 100)},
                         "symphony": p.symphony.switch_values(p.slowdown),
                         "dcqcn_period_s": p.dcqcn_period_s, "reference": REFERENCE})


# ---------------------------------------------------------------------------
# analysis


def _params(run_dir: Path) -> Params:
    return load_params(Params, run_dir)


def _delay_s(data: PhaseData, flow: str) -> float:
    """The flow's start delay as the phase's plan gave it to its sender."""
    for job in data.plan.get("jobs", {}).values():
        for f in job.get("flows", []):
            if f["flow"] == flow and f["role"] == "sender":
                return float(f["start_delay_s"])
    raise ValueError(f"phase {data.name}: no sender of flow {flow} in the plan")


def flow_times(data: PhaseData, flow: str) -> tuple[float, float]:
    """(start, end) in seconds on the common clock: the sender's first post and
    the receiver's completion of the flow's one message."""
    start = data.flow_start(flow, "sender")["t_ns"] / 1e9 + _delay_s(data, flow)
    comps = data.flow_events(flow, "completion", role="receiver")
    if not comps:
        raise ValueError(f"phase {data.name}: flow {flow} was not delivered")
    end = max(e["t_ns"] for e in comps) / 1e9
    return start, end


@dataclass(frozen=True)
class PairResult:
    """One phase of the two flows: their FCTs and overlap (s), and per flow
    (by name) the CE-marked packets its receiver saw and the CNPs its sender
    got; ``bytes_ok``: both flows arrived whole."""

    fct_a: float
    fct_b: float
    overlap: float
    ce: dict[str, int]
    cnps: dict[str, int]
    bytes_ok: bool


def pair_result(data: PhaseData) -> PairResult:
    (sa, ea), (sb, eb) = flow_times(data, "a"), flow_times(data, "b")
    ce: dict[str, int] = {}
    cnps: dict[str, int] = {}
    bytes_ok = True
    for f in ("a", "b"):
        rx = data.flow_end(f, "receiver")
        tx = data.flow_end(f, "sender")
        ce[f] = rx["qp"]["ce_pkts"]
        cnps[f] = tx.get("cnps_rcvd", 0)
        bytes_ok = bytes_ok and bool(rx.get("bytes_ok")) and rx["sha256"] == tx["sha256"]
    return PairResult(fct_a=ea - sa, fct_b=eb - sb, overlap=max(0.0, min(ea, eb) - max(sa, sb)),
                      ce=ce, cnps=cnps, bytes_ok=bytes_ok)


@dataclass(frozen=True)
class SchemeStats:
    """One scheme at one offset over the seeds: each figure's mean, sample sd
    (0 for one seed) and per-seed values, the mean CE marks and CNPs per
    flow, and whether every flow arrived whole."""

    fct_a: float
    fct_a_sd: float
    fct_a_runs: list[float]
    fct_b: float
    fct_b_sd: float
    fct_b_runs: list[float]
    overlap: float
    overlap_sd: float
    overlap_runs: list[float]
    ce_a: float
    ce_b: float
    cnps_a: float
    cnps_b: float
    bytes_ok: bool


def _figure(xs: list[float]) -> tuple[float, float, list[float]]:
    """(mean, sample sd or 0 for one value, each value), rounded to 4 places."""
    return (round(statistics.mean(xs), 4),
            round(statistics.stdev(xs), 4) if len(xs) > 1 else 0.0,
            [round(x, 4) for x in xs])


def _stats(rows: list[PairResult]) -> SchemeStats:
    fct_a, fct_a_sd, fct_a_runs = _figure([r.fct_a for r in rows])
    fct_b, fct_b_sd, fct_b_runs = _figure([r.fct_b for r in rows])
    overlap, overlap_sd, overlap_runs = _figure([r.overlap for r in rows])

    def mean_count(counts: list[int]) -> float:
        return round(statistics.mean(counts), 1)

    return SchemeStats(
        fct_a=fct_a, fct_a_sd=fct_a_sd, fct_a_runs=fct_a_runs,
        fct_b=fct_b, fct_b_sd=fct_b_sd, fct_b_runs=fct_b_runs,
        overlap=overlap, overlap_sd=overlap_sd, overlap_runs=overlap_runs,
        ce_a=mean_count([r.ce["a"] for r in rows]), ce_b=mean_count([r.ce["b"] for r in rows]),
        cnps_a=mean_count([r.cnps["a"] for r in rows]),
        cnps_b=mean_count([r.cnps["b"] for r in rows]),
        bytes_ok=all(r.bytes_ok for r in rows))


def _change(new: float, old: float) -> float | None:
    return None if old == 0 else round((new - old) / old, 4)


def _seed_changes(new: list[float], old: list[float]) -> list[float | None]:
    """Seed i of Symphony against seed i of the baseline."""
    return [_change(x, y) for x, y in zip(new, old, strict=True)]


@dataclass(frozen=True)
class OffsetResult:
    """Both schemes at one of A's start offsets (a fraction of B's standalone
    FCT, and in s of the testbed's clock)."""

    offset_fraction: float
    offset_s: float
    baseline: SchemeStats
    symphony: SchemeStats


@dataclass(frozen=True)
class KeyOffset:
    """Both schemes at the key offset, the one the changes compare."""

    offset_fraction: float
    baseline: SchemeStats
    symphony: SchemeStats


@dataclass(frozen=True)
class Results(Summary):
    standalone_fct_s: float
    standalone_fct_model_s: float
    offsets: list[OffsetResult]
    key: KeyOffset
    fct_a_change: float | None          # Symphony against the baseline at the key offset
    fct_b_change: float | None
    overlap_change: float | None
    fct_a_change_seeds: list[float | None]     # the same per seed
    fct_b_change_seeds: list[float | None]
    overlap_change_seeds: list[float | None]
    dcqcn_periods_in_overlap: float
    symphony_windows_in_overlap: float
    paper: dict[str, float]


def analyze(run_dir: Path) -> Results:
    p = _params(run_dir)
    alone = load_phase(run_dir, "alone")
    sb, eb = flow_times(alone, "b")
    standalone = eb - sb
    offsets = []
    for i, off in enumerate(p.offset_list):
        stats = {scheme: _stats([pair_result(load_phase(run_dir, phase_name(scheme, i, s)))
                                 for s in range(p.seeds)])
                 for scheme in SCHEMES}
        offsets.append(OffsetResult(offset_fraction=off,
                                    offset_s=round(off * p.standalone_s, 4),
                                    baseline=stats["baseline"], symphony=stats["symphony"]))
    key = next(r for r in offsets if abs(r.offset_fraction - p.key_offset) < 1e-9)
    b, s = key.baseline, key.symphony
    return Results(
        standalone_fct_s=round(standalone, 4),
        standalone_fct_model_s=round(p.standalone_s, 4),
        offsets=offsets,
        key=KeyOffset(offset_fraction=p.key_offset, baseline=b, symphony=s),
        fct_a_change=_change(s.fct_a, b.fct_a),
        fct_b_change=_change(s.fct_b, b.fct_b),
        overlap_change=_change(s.overlap, b.overlap),
        fct_a_change_seeds=_seed_changes(s.fct_a_runs, b.fct_a_runs),
        fct_b_change_seeds=_seed_changes(s.fct_b_runs, b.fct_b_runs),
        overlap_change_seeds=_seed_changes(s.overlap_runs, b.overlap_runs),
        dcqcn_periods_in_overlap=round(b.overlap / p.dcqcn_period_s, 1),
        symphony_windows_in_overlap=round(b.overlap / (p.t_win_us * 1e-6 * p.slowdown), 1),
        paper=dict(REFERENCE),
    )


def plot(run_dir: Path) -> list[Path]:
    from testbed.plotting import save_figure, typed_run_plots

    plt, p, out_dir = typed_run_plots(run_dir, _params)
    res = analyze(run_dir)
    outs = []
    ki = next(i for i, o in enumerate(p.offset_list) if abs(o - p.key_offset) < 1e-9)
    window = max(p.standalone_s / 40, p.sample_interval_us * 2e-6)
    fig, axes = plt.subplots(3, 1, figsize=(9, 9), sharex=True)
    alone = load_phase(run_dir, "alone")
    panels = [("ideal: each flow alone", None)] + [
        (f"{scheme}: A starts {p.key_offset:.2f} x S after B", phase_name(scheme, ki, 0))
        for scheme in SCHEMES]
    for ax, (title, phase) in zip(axes, panels, strict=True):
        if phase is None:
            data = alone
            t0 = flow_times(alone, "b")[0]
            pts = counter_points(data.flow_events("b", "rx"), "rx_bytes")
            ts, rs = rate_series([(t - t0, v) for t, v in pts], window)
            ax.plot(ts, [r * 8 / 1e6 for r in rs], label="B alone")
            off = p.key_offset * p.standalone_s
            ax.plot([t + off for t in ts], [r * 8 / 1e6 for r in rs], label="A alone (shifted)")
        else:
            data = load_phase(run_dir, phase)
            t0 = flow_times(data, "b")[0]
            for f in ("b", "a"):
                pts = counter_points(data.flow_events(f, "rx"), "rx_bytes")
                ts, rs = rate_series([(t - t0, v) for t, v in pts], window)
                step = p.step_a + (f == "b")
                ax.plot(ts, [r * 8 / 1e6 for r in rs], label=f"{f.upper()} (step {step})")
                ax.axvline(flow_times(data, f)[1] - t0, linestyle=":", linewidth=0.8)
        ax.set_title(title)
        ax.set_ylabel(f"Mb/s (x{p.slowdown:g} = model)")
        ax.legend(loc="upper right")
    axes[-1].set_xlabel("s since B started (testbed clock)")
    fig.suptitle(f"{NAME}: rate timelines ({p.link_mbps:g} Mb/s links model "
                 f"{p.nic_gbps:g} Gb/s; {p.flow_kb} KiB per flow)")
    out = save_figure(fig, out_dir / "timelines.png")
    outs.append(out)

    fig, axes = plt.subplots(1, 3, figsize=(13, 4))
    xs = [r.offset_fraction for r in res.offsets]
    for ax, key in zip(axes, ("fct_a", "fct_b", "overlap"), strict=True):
        for scheme in SCHEMES:
            rows = [getattr(r, scheme) for r in res.offsets]
            ys = [getattr(st, key) / res.standalone_fct_s for st in rows]
            es = [getattr(st, f"{key}_sd") / res.standalone_fct_s for st in rows]
            ax.errorbar(xs, ys, yerr=es, marker="o", capsize=3, label=scheme)
        ax.set_xlabel("A's start offset / S")
        ax.set_ylabel(f"{key} / S")
        ax.set_title(key)
        ax.legend()
    out = save_figure(fig, out_dir / "offsets.png")
    outs.append(out)
    return outs
