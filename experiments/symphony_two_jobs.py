"""Symphony with two identical ring jobs on a leaf-spine (Fig. 7a/b): the second starts later; span of each job's final step, DCQCN+RED vs Symphony.

The Symphony paper's §4.5, two-job scenario: two identical jobs of parallel
1D rings (Ring AllReduce), job B started 500 ms after job A, compete for the
same bottleneck links. Fig. 7a: aggregate throughput over time (Symphony
keeps it higher and removes job A's "heavy tail" of lagging flows); Fig. 7b:
the span of the final collective step (fastest to slowest flow's completion)
over 50 runs, which Symphony keeps shorter. The paper gives no numbers for
either; ``REFERENCE`` states the directions, and ``CLAIMS`` judges Fig. 7b's
(each job's span change below 0) in ``testbed report``.

Topology: ``leaves`` x ``spines`` soft switches running symphony.p4 (ECMP),
``hosts_per_leaf`` hosts per leaf; job A gets the first half of every leaf's
hosts, job B the second half, each a CommLib job of ``channels`` rings with
ranks alternating between the leaves, so every ring hop crosses a spine and
the two jobs share the leaves' uplinks (the hosts of a leaf offer twice what
its uplinks carry). Steps are tagged and start at PSN 0 as in symphony-ring
(experiments/symphony_ring.py, which also states the scale).

Job B starts ``offset`` x job A's line-rate duration later (the paper's
500 ms: job B joins a job already running). Schemes per seed, one phase
each: ``baseline`` (neither job registered: RED only) and ``symphony`` (both
registered, each with its own job id and state on every switch).

Profiles: the full one runs two jobs of 4 ranks at 2 Mb/s, the quick one two
of 2 over one spine. The paper profile is §4.5 on §4.1's network at 10 Gb/s
(experiments/_symphony_net.py): 128 nodes as 32 leaves of 4 under 4 spines,
two jobs of 64 ranks, one AllReduce each, job B joining where the paper's
does; cut to 256 KiB chunks and one seed (``scaled_down_from``).

Results (summary.json): per scheme and job ``final_step_span`` (s: the last
step of the last collective, first to last (rank, channel) completion; mean,
spread and the runs over seeds) and ``job_time`` (first step start to last
step end, s), ``span_change`` per job (Symphony's mean against the
baseline's), ``throughput`` (seed 0: per job, bytes delivered per bin, Mb/s)
and ``bit_exact``. ``paper`` (REFERENCE) holds what the paper shows.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from pathlib import Path
from typing import TypedDict

from experiments import symphony_ring
from experiments._symphony_net import (
    PAPER_NETWORK,
    QUICK_FABRIC,
    Stats,
    SymphonyRing,
    load_params,
    paper_ring_kwargs,
    stats,
)
from hosts.agent_spec import CollectiveSpec, JobSpec
from testbed.claims import Claim
from testbed.experiment import (
    FidelityLimits,
    PhasePlan,
    RunPlan,
    ScaledDown,
    param,
)
from testbed.net import host_addr
from testbed.summary import OMIT_IF_NONE, Summary
from testbed.symphony import (
    job_commands,
    source_job_commands,
    tracking_cleared,
)
from testbed.timeline import PhaseData, load_phase

NAME = "symphony-two-jobs"
HOST_PROVIDERS = symphony_ring.HOST_PROVIDERS
SCHEMES = ("baseline", "symphony")
JOBS = ("a", "b")
HEADLINE = ("span_change.a", "span_change.b", "final_step_span.baseline.a.mean",
            "final_step_span.symphony.a.mean")

# The paper's Fig. 7 (128 nodes, 32 rings of which 16 per job, job B 500 ms
# after job A): no numbers in the text, only directions. Symphony's final-step
# span is shorter than the baseline's for the co-located jobs (Fig. 7b), and
# its aggregate throughput higher while they overlap (Fig. 7a).
Reference = TypedDict("Reference", {
    "job_b_delay_ms": int,
    "span_change": str,
    "span_change.a": None,
    "span_change.b": None,
    "throughput": str,
})
REFERENCE: Reference = {
    "job_b_delay_ms": 500,
    "span_change": "below 0 (Fig. 7b: Symphony minimises the final step's span)",
    # per job: a direction, no value (the CLAIMS below)
    "span_change.a": None,
    "span_change.b": None,
    "throughput": "Symphony above the baseline while the jobs overlap (Fig. 7a)",
}
# The paper's two-job scenario (§4.5): 128 nodes, job B 500 ms after job A,
# Fig. 7b over 50 runs. The paper profile cuts the chunk and the seeds.
PAPER_NODES = 128
PAPER_RUNS = 50
PAPER_CHUNK_KB = 256

CLAIMS = tuple(
    Claim("Fig. 7b", f"Symphony shortens the final step's span of job {job.upper()} "
          f"({'running first' if job == 'a' else 'joining later'})",
          # REFERENCE: a direction, no value
          key=f"span_change.{job}", paper=None, direction="below",
          versus=0.0, percent=True, plots=("final_span.png", "throughput.png"))
    for job in JOBS)


@dataclass(frozen=True)
class Params(SymphonyRing):
    JOBS_PER_FABRIC = 2              # half of every leaf's hosts each

    # each leaf's hosts offer twice what its uplinks carry: the bottleneck
    # the two jobs share
    hosts_per_leaf: int = 4
    # slowdown 5000: four switches and eight agents on two CPUs at 3 Mb/s
    # kept the machine 83-86% busy and the switches lagged 121-218 ms (runs
    # of one seed); at 2 Mb/s 68-72% busy, 42 ms at most, faithful
    # (docs/experiments/analysis/symphony-two-jobs.md)
    link_mbps: float = 2.0
    chunk_kb: int = 512
    offset: float = param(0.25, "job B's start after job A's, in job A's line-rate durations "
                                "(0..2)")

    @classmethod
    def quick(cls) -> Params:
        # 4 hosts, 2 ranks per job, one spine: each leaf's two hosts share its
        # one uplink (the bottleneck both jobs compete for)
        return cls(**QUICK_FABRIC, hosts_per_leaf=2, spines=1, chunk_kb=256, iterations=3,
                   seeds=1)

    @classmethod
    def paper(cls) -> Params:
        """§4.5's two jobs on §4.1's network at its own rate
        (experiments/_symphony_net.py): 128 nodes at 10 Gb/s as 32 leaves of 4
        under 4 spines, two jobs of 64 ranks (half of every leaf each), one
        AllReduce per job, phantom payloads. Job B starts where the paper's
        does in job A's collective: 500 ms into one AllReduce of the paper's
        8 MB chunks at line rate (0.89 s), so ``offset`` is 0.56 of job A's
        line-rate duration at any chunk."""
        at_paper_chunk = cls(**paper_ring_kwargs(PAPER_NODES), iterations=1, seeds=1,
                             warmup_kb=0, payload="phantom",
                             chunk_kb=PAPER_NETWORK["chunk_mb"] * 1024)
        offset = REFERENCE["job_b_delay_ms"] / 1000 / at_paper_chunk.job_wire_s
        return dataclasses.replace(at_paper_chunk, chunk_kb=PAPER_CHUNK_KB, offset=offset)

    @staticmethod
    def scaled_down_from() -> dict[str, ScaledDown]:
        return {
            "chunk_kb": ScaledDown(PAPER_NETWORK["chunk_mb"] * 1024, "two 64-rank jobs of "
                                   "8 MB chunks send 132 million data packets per scheme, 32 "
                                   "times 256 KiB's 4.1 million; symphony-ring's 16 million "
                                   "took 46-50 min per scheme here"),
            "seeds": ScaledDown(PAPER_RUNS, "each seed is another run of both schemes"),
        }

    def __post_init__(self) -> None:
        super().__post_init__()
        if not 0 <= self.offset <= 2:
            raise ValueError(f"offset {self.offset}: job B's start must be 0..2 job durations")
        if self.seeds * len(SCHEMES) * len(JOBS) > 250:
            raise ValueError("at most 250 job ids")

    @property
    def job_wire_s(self) -> float:
        """One job's collectives alone at line rate."""
        return self.theoretical_cct_s * self.iterations

    @property
    def delay_b_s(self) -> float:
        return self.offset * self.job_wire_s


def job_hosts(p: Params, job: str) -> list[int]:
    """A job's hosts by rank: its half of every leaf, alternating leaves."""
    f = p.fabric
    half = f.hosts_per_leaf // 2
    first = 0 if job == "a" else half
    return [(leaf - 1) * f.hosts_per_leaf + first + j + 1
            for j in range(half) for leaf in range(1, f.leaves + 1)]


def phase_name(scheme: str, seed: int) -> str:
    return f"{scheme}-s{seed}"


def _jobs(p: Params, ids: dict[str, int], seed: int) -> dict[str, JobSpec]:
    t = p.transport()
    timeout = 6 * p.job_wire_s + p.delay_b_s + 60
    steps = 2 * (p.ranks - 1) * p.iterations
    out = {}
    for job in JOBS:
        for rank, host in enumerate(job_hosts(p, job)):
            a = host_addr(host)
            out[a.name] = JobSpec(
                host=a.name, ip=a.ip, transport=t, timeout_s=timeout,
                start_delay_s=0.05 + (p.delay_b_s if job == "b" else 0.0),
                collective=CollectiveSpec(
                    rank=rank, size=p.ranks, job_id=ids[job], op="all_reduce", dtype="int64",
                    count=p.count, iterations=p.iterations, channels=p.channels, seed=seed,
                    step_psn_origin=True, payload=p.payload,
                    # each seed and job tags its steps from its own range (other ECMP paths)
                    step_base=((2 * seed + JOBS.index(job)) * steps) % 0x4000))
    return out


def plan(p: Params) -> RunPlan:
    topo = p.topology()
    phases = [symphony_ring.warmup_phase(p)] if p.warmup_kb else []
    next_id = 0
    for seed in range(p.seeds):
        for scheme in SCHEMES:
            ids = {}
            for job in JOBS:
                next_id += 1
                ids[job] = next_id
            cmds = (tuple(c for job in JOBS for c in job_commands(ids[job]))
                    if scheme == "symphony" else ())
            jobs = _jobs(p, ids, seed)
            phases.append(PhasePlan(
                phase_name(scheme, seed), jobs,
                commands=(*tracking_cleared(), *cmds, *source_job_commands(jobs)),
                timeout_s=6 * p.job_wire_s + p.delay_b_s + 90,
                notes=f"{scheme}: jobs a (id {ids['a']}) and b (id {ids['b']}, "
                      f"{p.delay_b_s:.3g} s later), {p.ranks} ranks x {p.channels} rings, "
                      f"{p.iterations} x AllReduce of {p.chunk_kb} KiB chunks"
                      + ("" if scheme == "symphony" else " (not tracked)")))
    return RunPlan(topology=topo, phases=tuple(phases), fidelity=FidelityLimits(),
                   info={"slowdown": p.slowdown, "link_bps": p.link_bps,
                         "job_hosts": {j: job_hosts(p, j) for j in JOBS},
                         "job_wire_s": p.job_wire_s, "delay_b_s": p.delay_b_s,
                         "symphony": p.symphony.switch_values(p.slowdown),
                         "reference": REFERENCE})


# ---------------------------------------------------------------------------
# analysis


def _params(run_dir: Path) -> Params:
    return load_params(Params, run_dir)


def job_data(data: PhaseData, p: Params, job: str) -> PhaseData:
    """The phase's events of one job's hosts."""
    names = {host_addr(h).name for h in job_hosts(p, job)}
    return PhaseData(name=f"{data.name}/{job}", dir=data.dir,
                     events={h: e for h, e in data.events.items() if h in names})


def final_step_span(data: PhaseData) -> float:
    """The last step of the job's last collective: its first to its last
    (rank, channel) completion, s."""
    ends = data.all_events("step_end")
    if not ends:
        raise ValueError(f"phase {data.name}: no ring steps recorded")
    last = max((e["seq"], e["step"]) for e in ends)
    ts = [e["t_ns"] for e in ends if (e["seq"], e["step"]) == last]
    return (max(ts) - min(ts)) / 1e9


def job_time(data: PhaseData) -> float:
    starts = [e["t_ns"] for e in data.all_events("step_start")]
    ends = [e["t_ns"] for e in data.all_events("step_end")]
    return (max(ends) - min(starts)) / 1e9


def throughput(data: PhaseData, t0_ns: int, bin_s: float) -> list[list[float]]:
    """(bin start s after t0, Mb/s) of the step data the job's ranks completed."""
    size: dict[tuple[int, int, int, int], int] = {}
    for e in data.all_events("step_start"):
        size[(e["seq"], e["rank"], e["channel"], e["step"])] = e["bytes"]
    bins: dict[int, int] = {}
    for e in data.all_events("step_end"):
        b = int((e["t_ns"] - t0_ns) / 1e9 // bin_s)
        bins[b] = bins.get(b, 0) + size.get((e["seq"], e["rank"], e["channel"], e["step"]), 0)
    if not bins:
        return []
    return [[round(b * bin_s, 3), round(bins.get(b, 0) * 8 / bin_s / 1e6, 3)]
            for b in range(min(bins), max(bins) + 1)]


@dataclass(frozen=True)
class Results(Summary):
    ranks_per_job: int
    final_step_span: dict[str, dict[str, Stats]]     # scheme -> job -> s
    job_time: dict[str, dict[str, Stats]]
    span_change: dict[str, float | None]             # job -> Symphony against the baseline
    job_time_change: dict[str, float]
    job_wire_s: float
    delay_b_s: float
    throughput_bin_s: float
    throughput: dict[str, dict[str, list[list[float]]]]   # seed 0: [s, Mb/s] per bin
    paper: Reference
    bit_exact: bool | None = field(default=None, metadata=OMIT_IF_NONE)  # real payloads only


def analyze(run_dir: Path) -> Results:
    p = _params(run_dir)
    span: dict[str, dict[str, Stats]] = {}
    jtime: dict[str, dict[str, Stats]] = {}
    thr: dict[str, dict[str, list[list[float]]]] = {}
    bit_exact = True
    bin_s = max(0.1, p.step_wire_s / 2)
    for scheme in SCHEMES:
        spans: dict[str, list[float]] = {j: [] for j in JOBS}
        times: dict[str, list[float]] = {j: [] for j in JOBS}
        for seed in range(p.seeds):
            data = load_phase(run_dir, phase_name(scheme, seed))
            bit_exact &= symphony_ring.collectives_checked(data, 2 * p.ranks * p.iterations)
            starts = [e["t_ns"] for e in data.all_events("step_start")]
            if not starts:
                raise ValueError(f"phase {data.name}: no ring steps recorded")
            for job in JOBS:
                jd = job_data(data, p, job)
                done = {e["seq"] for e in jd.all_events("collective_end")}
                if len(done) != p.iterations:
                    raise ValueError(f"phase {data.name}: job {job} completed {len(done)} of "
                                     f"{p.iterations} collectives")
                spans[job].append(final_step_span(jd))
                times[job].append(job_time(jd))
                if seed == 0:
                    thr.setdefault(scheme, {})[job] = throughput(jd, min(starts), bin_s)
        span[scheme] = {j: stats(spans[j]) for j in JOBS}
        jtime[scheme] = {j: stats(times[j]) for j in JOBS}
    return Results(
        ranks_per_job=p.ranks,
        final_step_span=span,
        job_time=jtime,
        span_change={j: round(span["symphony"][j].mean / span["baseline"][j].mean - 1, 4)
                     if span["baseline"][j].mean else None for j in JOBS},
        job_time_change={j: round(jtime["symphony"][j].mean
                                  / jtime["baseline"][j].mean - 1, 4) for j in JOBS},
        job_wire_s=round(p.job_wire_s, 4),
        delay_b_s=round(p.delay_b_s, 4),
        throughput_bin_s=bin_s,
        throughput=thr,
        paper=REFERENCE.copy(),
        # phantom payloads carry nothing to check
        bit_exact=bit_exact if p.payload == "real" else None,
    )


def plot(run_dir: Path) -> list[Path]:
    from testbed.plotting import save_figure, typed_run_plots

    plt, p, out_dir = typed_run_plots(run_dir, _params)
    res = analyze(run_dir)
    outs = []
    fig, axes = plt.subplots(len(SCHEMES), 1, figsize=(9, 5), sharex=True, sharey=True)
    for ax, scheme in zip(axes, SCHEMES, strict=True):
        total: dict[float, float] = {}
        for job in JOBS:
            pts = res.throughput[scheme][job]
            ax.step([t for t, _r in pts], [r for _t, r in pts], where="post", label=f"job {job}")
            for t, r in pts:
                total[t] = total.get(t, 0.0) + r
        ts = sorted(total)
        ax.step(ts, [total[t] for t in ts], where="post", color="black", linewidth=0.8,
                label="both")
        ax.set_ylabel("Mb/s")
        ax.set_title(f"{scheme}")
        ax.legend(fontsize=8)
    axes[-1].set_xlabel("s since the first step (testbed clock)")
    fig.suptitle(f"{NAME}: step data delivered per {res.throughput_bin_s:g} s, seed 0 "
                 "(Fig. 7a)")
    path = save_figure(fig, out_dir / "throughput.png")
    outs.append(path)

    fig, ax = plt.subplots(figsize=(6, 4))
    for scheme in SCHEMES:
        for job in JOBS:
            xs = sorted(res.final_step_span[scheme][job].runs)
            ax.step(xs, [(i + 1) / len(xs) for i in range(len(xs))], where="post",
                    label=f"{scheme}, job {job}")
    ax.set_xlabel("span of the final step (s, testbed clock)")
    ax.set_ylabel("CDF over seeds")
    ax.set_title(f"{NAME}: final-step span ({p.seeds} seed(s), Fig. 7b)")
    ax.legend(fontsize=8)
    path = save_figure(fig, out_dir / "final_span.png")
    outs.append(path)
    return outs
