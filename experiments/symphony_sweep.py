"""Symphony's sensitivity (Fig. 8): normalized CCT of Ring AllReduce over k, the load imbalance or the chunk size, DCQCN+RED vs Symphony.

The Symphony paper's §4.6: Fig. 8a varies the load imbalance on one hop from
1.1x to 1.7x (Symphony's gain grows with it), Fig. 8b varies k from 1e-4 to
1e-1 (a broad sweet spot at 1e-3..1e-2, worse at k >= 0.1 and k <= 1e-4),
Fig. 8c the chunk size (gains up to ~20% from 512 kB, little at 128 kB).
The y axis is Symphony's CCT normalized by the baseline's.

The ring, fabric, scale and network are symphony-ring's
(experiments/symphony_ring.py: each point runs its ``baseline`` and
``symphony`` phases with that module's jobs). ``sweep`` picks the axis (one
per run, since ECMP or static routes are the fabric's): ``k`` (ECMP; the
baseline does not depend on k, so it runs once per seed), ``imbalance``
(static balanced routes, leaf1's uplink to spine1 at link / value in every
phase of the point) or ``chunk`` (ECMP, ``values`` in KiB). ``values``
overrides the axis's default points.

Profiles: the full and quick ones run on symphony-ring's 4-rank fabric. The
paper profile is Fig. 8b (the k axis) on §4.1's network at 10 Gb/s
(experiments/_symphony_net.py): 32 nodes as 8 leaves of 4 under 4 spines,
Table 1's 2D ring of 8 x 4 (``ring_dims``, as §4.6 runs the k axis), one
AllReduce per point; cut from §4.6's 128 nodes, from 8 MB chunks to
512 KiB and to one seed (``scaled_down_from``).

Results (summary.json): ``points`` (per value: the baseline's and
Symphony's median CCT over every collective of every seed,
``normalized_cct`` = Symphony / baseline, and ``normalized_cct_by_seed``,
each seed's median against its own baseline's: the point's spread),
``normalized_cct`` (the list, in the order of ``values``), ``normalized_cct_min`` and ``best_value`` (the
point where Symphony gained most; for k also ``best_log10_k``, which CLAIMS
judges against Fig. 8b's sweet spot), ``bit_exact``; ``paper`` (REFERENCE) holds what
Fig. 8 shows.
"""

from __future__ import annotations

import dataclasses
import math
import statistics
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypedDict

from experiments import symphony_ring as ring
from experiments._symphony_net import (
    PAPER_NETWORK,
    QUICK_FABRIC,
    SymphonyRing,
    load_params,
    paper_fabric,
    paper_ring_kwargs,
)
from testbed.claims import Claim
from testbed.experiment import (
    FidelityLimits,
    PhasePlan,
    RunPlan,
    ScaledDown,
    param,
)
from testbed.summary import OMIT_IF_NONE, Summary
from testbed.symphony import (
    config_command,
    job_commands,
    source_job_commands,
    tracking_cleared,
)
from testbed.timeline import load_phase

NAME = "symphony-sweep"
HOST_PROVIDERS = ring.HOST_PROVIDERS
SWEEPS = ("k", "imbalance", "chunk")
DEFAULT_VALUES = {"k": "0.0001,0.001,0.01,0.1", "imbalance": "1.1,1.3,1.5,1.7",
                  "chunk": "128,256,512,1024"}
HEADLINE = ("normalized_cct_min", "best_value")

# Fig. 8 (128 nodes; 2D rings for k and the chunk size): the paper's curves
# are not given as numbers in the text, only these.
Reference = TypedDict("Reference", {
    "k.sweet_spot": list[float],
    "chunk.best_change": float,
    "imbalance": str,
    "best_log10_k": float,
})
_SWEET_SPOT = [1e-3, 1e-2]                # k: normalized CCT lowest and flat here
# Fig. 8b as a claim: the k with the lowest normalized CCT lies in the sweet
# spot, in decades: its centre, within half its width. The k sweep (the
# default axis, and the quick profile's) measures it; the paper's other panels
# give a trend (8a) and a bound (8c), which the plots show beside the runs.
_SWEET = [math.log10(k) for k in _SWEET_SPOT]
REFERENCE: Reference = {
    "k.sweet_spot": _SWEET_SPOT,
    "chunk.best_change": -0.20,           # "up to ~20%" at >= 512 kB
    "imbalance": "Symphony's relative gain grows from 1.1x to 1.7x",
    "best_log10_k": sum(_SWEET) / 2,
}
# The paper profile: §4.6 runs Fig. 8 on a 128-node cluster (Table 1's 2D
# rings: 32 x 4 there, 8 x 4 at its default 32 nodes). Cut for the wall time:
# 32 nodes, 512 KiB chunks (Fig. 8c: the gains are most pronounced from 512 kB
# on) and one seed. Fig. 8b's axis is the k sweep's default.
PAPER_NODES = 128
PAPER_PROFILE_NODES = 32
PAPER_CHUNK_KB = 512

CLAIMS = (
    Claim("Fig. 8b", "the lowest normalized CCT is at a k in the sweet spot, 1e-3 to 1e-2",
          key="best_log10_k", paper=REFERENCE["best_log10_k"],
          abs_tol=(_SWEET[1] - _SWEET[0]) / 2, plots=("normalized_cct.png",)),
)


@dataclass(frozen=True)
class Params(SymphonyRing):
    sweep: str = param("k", "the axis swept: k (Symphony's marking factor, ECMP), imbalance "
                            "(one hop slowed, static routes) or chunk (chunk size, ECMP)")
    values: str = param("", "the axis's points, comma-separated (chunk in KiB; empty: the "
                            "axis's defaults: "
                        + "; ".join(f"{k} {v}" for k, v in DEFAULT_VALUES.items()) + ")")
    seeds: int = 2
    # §4.6 runs the k and chunk axes on 2D rings (symphony-ring's ring_dims)
    ring_layout: str = param("across", "ranks on the hosts, as symphony-ring's: across or local")
    ring_dims: str = param("", "the AllReduce as a 2D ring LOCALxGROUPS, as symphony-ring's "
                               "(paper: 8x4 at 32 nodes; empty: one ring of all ranks)")
    # slowdown 5000, as symphony-two-jobs: at symphony-ring's 3 Mb/s the
    # machine was 75-92% busy and the switches lagged 43-99 ms in 8 of 10
    # phases; at 2 Mb/s 48-72% busy: one run failed 5 of 6 tries (55-307
    # ms), another was faithful with none run again
    # (docs/experiments/analysis/symphony-sweep.md)
    link_mbps: float = 2.0

    @classmethod
    def quick(cls) -> Params:
        return cls(**QUICK_FABRIC, values="0.001,0.1", chunk_kb=256, iterations=2, seeds=1)

    @classmethod
    def paper(cls) -> Params:
        """Fig. 8b on §4.1's network at its own rate (experiments/_symphony_net.py:
        10 Gb/s, 4 spines, HPCC's DCQCN and buffers, PFC), 32 nodes as 8 leaves
        of 4, one AllReduce per point of k = 1e-4, 1e-3, 1e-2 and 0.1 (the
        k sweep's default values) on Table 1's 2D ring of 8 x 4 (§4.6: "For
        the impact of parameter k and chunk size, we utilize a 2D Ring
        AllReduce"), ranks leaf by leaf, phantom payloads."""
        return cls(**paper_ring_kwargs(PAPER_PROFILE_NODES), sweep="k",
                   ring_layout="local", ring_dims=PAPER_NETWORK["ring_dims"],
                   values=DEFAULT_VALUES["k"], chunk_kb=PAPER_CHUNK_KB, iterations=1,
                   seeds=1, warmup_kb=0, payload="phantom")

    @staticmethod
    def scaled_down_from() -> dict[str, ScaledDown]:
        return {
            "leaves": ScaledDown(paper_fabric(PAPER_NODES).leaves, "§4.6's 128-node cluster "
                                 "(32 leaves of 4 here) has 4 times the ranks and 4 times the "
                                 "steps of 32 nodes, about 16 times the packets: the 32-node "
                                 "run took 19 min here"),
            "chunk_kb": ScaledDown(PAPER_NETWORK["chunk_mb"] * 1024, "8 MB chunks are 16 "
                                   "times the packets of 512 KiB; Fig. 8c's gains are most "
                                   "pronounced from 512 kB on"),
            "seeds": ScaledDown(PAPER_NETWORK["runs"], "each seed is another run of every "
                                "point (5 AllReduces)"),
        }

    def __post_init__(self) -> None:
        if self.sweep not in SWEEPS:
            raise ValueError(f"sweep {self.sweep!r}: one of {', '.join(SWEEPS)}")
        super().__post_init__()
        vals = self.value_list
        if not vals:
            raise ValueError(f"values {self.values!r}: at least one point")
        for v in vals:        # every point must make valid ring parameters
            _ = self.point(v)
        if self.seeds * len(vals) * 2 > 250:
            raise ValueError("at most 250 phases (one job id each)")

    @property
    def value_list(self) -> list[float]:
        text = self.values or DEFAULT_VALUES[self.sweep]
        try:
            return [float(x) for x in text.split(",") if x.strip()]
        except ValueError:
            raise ValueError(f"values {text!r}: not numbers") from None

    def point(self, value: float) -> ring.Params:
        """symphony-ring's parameters at one point of the sweep."""
        kw: dict[str, Any] = {f.name: getattr(self, f.name)
                              for f in dataclasses.fields(SymphonyRing)}
        kw.update(schemes="baseline,symphony", ring_layout=self.ring_layout,
                  ring_dims=self.ring_dims,
                  variant="imbalance" if self.sweep == "imbalance" else "ecmp")
        if self.sweep == "k":
            kw["k"] = value
        elif self.sweep == "imbalance":
            kw["imbalance"] = value
        else:
            kw["chunk_kb"] = int(value)
        return ring.Params(**kw)


def phase_name(scheme: str, index: int, seed: int) -> str:
    return f"{scheme}-p{index}-s{seed}"


def plan(p: Params) -> RunPlan:
    first = p.point(p.value_list[0])
    fab = first.fabric
    # the first point's routing (ECMP, or static routes for the imbalance)
    topo = p.topology(fabric=fab)
    phases = [ring.warmup_phase(first)] if p.warmup_kb else []
    job = 0
    for seed in range(p.seeds):
        for i, v in enumerate(p.value_list):
            pt = p.point(v)
            per_switch: dict[str, tuple[str, ...]] = {}
            if p.sweep == "imbalance":
                per_switch["leaf1"] = (f"set_port_rate_bps {int(round(p.link_bps / v))} "
                                       f"{fab.uplink_port(1)}",)
            for scheme in ("baseline", "symphony"):
                if scheme == "baseline" and p.sweep == "k" and i > 0:
                    continue          # k does not change the baseline: one per seed
                job += 1
                cmds: tuple[str, ...] = ()
                if scheme == "symphony":
                    sym = dataclasses.replace(p.symphony, k=v) if p.sweep == "k" else p.symphony
                    cmds = (config_command(sym, p.slowdown), *job_commands(job))
                jobs = ring._jobs(pt, job, seed)
                phases.append(PhasePlan(
                    phase_name(scheme, i, seed), jobs,
                    commands=(*tracking_cleared(), *cmds, *source_job_commands(jobs)),
                    switch_commands=per_switch,
                    timeout_s=4 * pt.theoretical_cct_s * pt.iterations + 90,
                    notes=f"{scheme} at {p.sweep} = {v:g}: {pt.ranks} ranks x {pt.channels} "
                          "rings" + (f" (2D, {pt.ring_dims})" if pt.dims else "")
                          + f", {pt.iterations} x AllReduce of {pt.chunk_kb} KiB; job {job}"))
    return RunPlan(topology=topo, phases=tuple(phases), fidelity=FidelityLimits(),
                   info={"sweep": p.sweep, "values": p.value_list, "slowdown": p.slowdown,
                         "link_bps": p.link_bps,
                         "theoretical_cct_s": [p.point(v).theoretical_cct_s
                                               for v in p.value_list],
                         "reference": REFERENCE})


# ---------------------------------------------------------------------------
# analysis


def _params(run_dir: Path) -> Params:
    return load_params(Params, run_dir)


@dataclass(frozen=True)
class SchemeCcts:
    """One scheme's collectives at a point, over the seeds: the median CCT and
    each collective's (s)."""

    median: float
    runs: list[float]


@dataclass(frozen=True)
class Point:
    """One value of the swept axis: the ring's ideal CCT, each scheme's CCTs,
    Symphony's median against the baseline's, and each seed's against its
    own baseline (the spread of the point)."""

    value: float
    theoretical_cct: float
    baseline: SchemeCcts
    symphony: SchemeCcts
    normalized_cct: float
    normalized_cct_by_seed: list[float]


@dataclass(frozen=True)
class Results(Summary):
    sweep: str
    values: list[float]
    points: list[Point]
    normalized_cct: list[float]          # per point
    normalized_cct_min: float
    best_value: float
    paper: Reference
    bit_exact: bool | None = field(default=None, metadata=OMIT_IF_NONE)  # real payloads only
    best_log10_k: float | None = field(default=None, metadata=OMIT_IF_NONE)  # the k sweep


def analyze(run_dir: Path) -> Results:
    p = _params(run_dir)
    points = []
    bit_exact = True
    for i, v in enumerate(p.value_list):
        pt = p.point(v)
        ccts: dict[str, SchemeCcts] = {}
        by_seed: dict[str, list[float]] = {}
        for scheme in ("baseline", "symphony"):
            times_all: list[float] = []
            for seed in range(p.seeds):
                idx = 0 if scheme == "baseline" and p.sweep == "k" else i
                data = load_phase(run_dir, phase_name(scheme, idx, seed))
                bit_exact &= ring.collectives_checked(data, pt.ranks * pt.iterations)
                times = ring.completed_collective_times(data, pt.iterations)
                times_all += times
                by_seed.setdefault(scheme, []).append(statistics.median(times))
            ccts[scheme] = SchemeCcts(median=round(statistics.median(times_all), 4),
                                      runs=[round(x, 4) for x in times_all])
        points.append(Point(
            value=v, theoretical_cct=round(pt.theoretical_cct_s, 4),
            baseline=ccts["baseline"], symphony=ccts["symphony"],
            normalized_cct=round(ccts["symphony"].median / ccts["baseline"].median, 4),
            normalized_cct_by_seed=[round(sy / b, 4) for sy, b in
                                    zip(by_seed["symphony"], by_seed["baseline"], strict=True)]))
    best = min(points, key=lambda r: r.normalized_cct).value
    return Results(
        sweep=p.sweep,
        values=p.value_list,
        points=points,
        normalized_cct=[r.normalized_cct for r in points],
        normalized_cct_min=min(r.normalized_cct for r in points),
        best_value=best,
        paper=REFERENCE.copy(),
        # phantom payloads carry nothing to check
        bit_exact=bit_exact if p.payload == "real" else None,
        best_log10_k=round(math.log10(best), 4) if p.sweep == "k" else None,
    )


def plot(run_dir: Path) -> list[Path]:
    from testbed.plotting import save_figure, typed_run_plots

    plt, p, out_dir = typed_run_plots(run_dir, _params)
    res = analyze(run_dir)
    fig, ax = plt.subplots(figsize=(6, 4))
    xs = res.values
    ax.plot(xs, res.normalized_cct, marker="o", label="Symphony / baseline (median CCT)")
    if p.seeds > 1:
        seeds = [(x, y) for x, pt in zip(xs, res.points, strict=True)
                 for y in pt.normalized_cct_by_seed]
        ax.scatter([x for x, _ in seeds], [y for _, y in seeds], s=14, color="gray",
                   zorder=3, label="one seed (its own baseline)")
    ax.axhline(1.0, linestyle=":", color="gray")
    if p.sweep == "k":
        ax.set_xscale("log")
        lo, hi = REFERENCE["k.sweet_spot"]
        ax.axvspan(lo, hi, alpha=0.15, color="green", label="paper's sweet spot")
    ax.set_xlabel({"k": "k", "imbalance": "load imbalance (x)", "chunk": "chunk (KiB)"}[p.sweep])
    ax.set_ylabel("normalized CCT")
    ax.set_title(f"{NAME}: {p.sweep} ({p.seeds} seed(s), Fig. 8)")
    ax.legend(fontsize=8)
    return [save_figure(fig, out_dir / "normalized_cct.png")]
