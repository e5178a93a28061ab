"""ReFlex probing (Fig. 8-10): a D_exploit sweep, the budget a flexible flow must accumulate and the regular flows' FCTs.

The ReFlex paper's §6.4: the probing cycle (warmup : measure : exploit of
T_int = 5 ms each, 1:1:3 by default) bounds what ReFlex can give regular
flows. The longer the exploit phase, the larger the share of time a
flexible flow can spend at low priority (at D_exploit = 3, 60%), so regular
flows finish sooner (Fig. 8), but the more budget a flexible flow must hold
before it may go low: with alpha = 0.9 it needs alpha x R_fair x D_exploit x
T_int, which at D_exploit = 3 it accumulates in 175 ms (Fig. 9). In a
two-flow competition a flexible flow at D_exploit = 3 spends 48% of its fair
share (Fig. 10(a): 60% of the time at 10% of the link instead of 50%).

Setup: the network of reflex-cases (experiments/_reflex_net.py: 10 Gb/s
modelled on ``link_mbps`` links, DRR 90/10, RED hard threshold 65 of 466
packets, T_int = 5 ms x slowdown, RoCEv2/DCQCN instead of DCTCP). One phase
per D_exploit value (``exploits``) and seed: the flexible flow (h1, alpha)
starts alone; once it has had time to accumulate its budget by the paper's
rule (``budget_intervals``, plus one cycle for synchronization) the regular
flows (h2) arrive, one at a time: ``n_regular`` short flows of
``regular_intervals`` intervals of line-rate volume, at arrival phases
spread evenly over the probing cycle (each one cycle and a 1/n_regular-th
later than the previous, jittered by the seed), so that their FCTs sample
every part of the cycle; then, after the flexible flow was alone long
enough to hold, by the same rule, the budget for the whole competition
(``refill_intervals``), one long regular flow that competes for
``long_cycles`` whole cycles or more (the two-flow competition of Fig. 10(a));
the flexible flow stops once the long flow has been received
(``FlowSpec.stop_after``), as nothing is measured after it.

The paper does not give the sizes or arrivals of Fig. 8's regular flows in
its text; these (one at a time against one flexible flow, each arrival
phase equally likely) isolate the effect Fig. 8 is about: where in the cycle
a regular flow runs.

Results per D_exploit (key ``d3`` for D_exploit = 3, ...; with several seeds
each figure is the mean, with ``_sd``, ``_min``, ``_max``, ``_n``, the
seeds' values as a list (``_seeds``) and every seed's figures under
``runs``):
- ``budget_time_ms``: modelled ms from the flexible flow's first packet to
  its first switch to low priority (it is alone then, so that is when its
  budget first covered an exploit phase); ``budget_time_calc_ms`` the
  paper's rule (``budget_intervals``) for a flow that starts on a cycle
  boundary (up to one cycle more otherwise);
- ``regular_fct_p50``, ``_p90``, ``_p99``, ``_mean``: the short regular
  flows' FCT over their FCT alone at line rate (with few flows the p99 is
  the largest); ``regular_fct_ms_p50`` in modelled ms;
- ``spent_fraction``: over the whole cycles of the long regular flow's
  competition in which the flexible flow had the budget to be low for its
  exploit phase (``budgeted_cycles`` of ``whole_cycles``), 1 - its delivered
  rate / its fair share (half the link's payload capacity): what a flow with
  budget spends, Fig. 10(a)'s quantity; ``spent_fraction_all`` over every
  whole cycle (less, where the budget ran out); ``spent_fraction_calc``:
  D_exploit / cycle x (1 - 0.1 / 0.5), the paper's reasoning;
- ``low_share``: the share of the whole cycles the flexible flow spent low;
  ``long_rate_fraction`` the long regular flow's rate in them.
``paper`` holds the paper's values (REFERENCE).

The paper profile (``--profile paper``, virtual time) runs the paper's
network at its own rates (10 Gb/s, slowdown 1); what the paper does not
give (the D_exploit values, the regular flows, the runs) stays the full
profile's.
"""

from __future__ import annotations

import math
import random
import statistics
from dataclasses import dataclass, field
from pathlib import Path

from experiments._reflex_net import (
    BOTTLENECK_PORT,
    QUICK_LINK_MBPS,
    FlowShared,
    ReflexNetwork,
    SeededRuns,
    SenderOnly,
    add_flow,
    delivered,
    flexible_spec,
    host_jobs,
    messages,
    paper_network,
    phase_timelines,
    saved_params,
    seed_spread,
    topology,
)
from hosts.agent_spec import FlowSpec
from hosts.reflex.schemes import SCHEMES
from testbed.claims import Claim
from testbed.experiment import FidelityLimits, PhasePlan, RunPlan, param
from testbed.summary import INLINE, Spread, Summary
from testbed.timeline import PhaseData, load_phase, value_at

NAME = "reflex-probing"
# rxe: a flexible flow's QP moves between the priority queues by the DSCP the
# host's DCQCN shim writes on its packets (hosts.roce.rxe.dcqcn_shim, set_dscp).
HOST_PROVIDERS = ("udp", "rxe")
HEADLINE = ("d3.budget_time_ms", "d3.spent_fraction", "d3.regular_fct_p50")

# The paper's values for this experiment's keys (§6.4: Fig. 9, time to
# accumulate budget for alpha = 0.9 at D_exploit = 3; Fig. 10(a), the share
# of its fair share a flexible flow spends in a two-flow competition).
REFERENCE: dict[str, float] = {
    "d3.budget_time_ms": 175.0,
    "d3.spent_fraction": 0.48,
}

# What the paper shows with those values, and how close a run must come
# (testbed report). The budget time of a flow that starts at a random point of
# the cycle lies within one 25 ms cycle of the rule's 160 ms.
CLAIMS = (
    Claim("Fig. 9", "with alpha = 0.9 and D_exploit = 3 a flexible flow accumulates the "
          "budget for its first exploit phase in 175 ms",
          key="d3.budget_time_ms", paper=REFERENCE["d3.budget_time_ms"], abs_tol=15.0,
          per_seed="d3.budget_time_ms_seeds", plots=("probing.png", "d3-s*.png")),
    Claim("Fig. 10(a)", "at D_exploit = 3 a flexible flow with budget spends 48% of its fair "
          "share in a two-flow competition",
          key="d3.spent_fraction", paper=REFERENCE["d3.spent_fraction"], direction="above",
          versus=0.0, rel_tol=0.10, per_seed="d3.spent_fraction_seeds",
          plots=("probing.png", "d3-s*.png")),
)

LOW_SHARE = 0.1    # the low queue's DRR share (90/10)

# The paper's §6.4 setup beyond its network (_reflex_net.PAPER_NETWORK), in
# its units: Params.paper() converts it.
PAPER_PROBING: dict[str, float] = {
    "alpha": 0.9,               # Fig. 9's budget for alpha = 0.9
}


@dataclass(frozen=True)
class Params(ReflexNetwork, SeededRuns):
    alpha: float = param(0.9, "ReFlex aggressiveness: the share of its fair-share rate the "
                              "flexible flow must keep (Fig. 9: 0.9)")
    exploits: str = param("1,2,3,4,5", "D_exploit values swept, one phase each per seed "
                          "(warmup:measure stay 1:1), comma-separated", "T_int")
    n_regular: int = param(8, "short regular flows per phase, one at a time", "flows")
    regular_intervals: float = param(1.0, "each short regular flow's volume in probing "
                                          "intervals at line rate", "T_int")
    long_cycles: int = param(2, "whole probing cycles the long regular flow must compete for",
                             "cycles")
    seeds: int = param(3, "runs of each D_exploit; the seed jitters the regular flows' "
                          "arrivals", "runs")
    first_seed: int = param(0, "the first run's seed (seeds first_seed .. first_seed + "
                               "seeds - 1)")

    @classmethod
    def quick(cls) -> Params:
        # D_exploit = 3, the point the paper's claims are about (Fig. 9, 10(a)).
        return cls(link_mbps=QUICK_LINK_MBPS, exploits="3", n_regular=3, long_cycles=1,
                   seeds=1)

    @classmethod
    def paper(cls) -> Params:
        """Fig. 8-10 at the paper's scale: every port and NIC at 10 Gb/s
        (slowdown 1), T_int 5 ms, warmup and measure of one interval each,
        alpha 0.9 (Fig. 9). The paper gives neither the D_exploit values of
        Fig. 8-10 (its text names 3 and "longer"), nor the sizes and arrivals
        of Fig. 8's regular flows, nor a number of runs: those stay the full
        profile's (D_exploit 1 to 5, eight short flows and a long one, three
        seeds of arrivals). Phantom payloads: the flows' bytes are not kept."""
        return cls(**paper_network(), alpha=PAPER_PROBING["alpha"], payload="phantom")

    def __post_init__(self) -> None:
        super().__post_init__()
        if not 0 < self.alpha < 1:
            raise ValueError("alpha must be in (0, 1): at 1 a flow never gains budget")
        try:
            es = self.exploit_list
        except ValueError:
            raise ValueError(f"exploits: {self.exploits!r} is not a comma-separated list "
                             "of integers") from None
        if not es or any(e < 1 for e in es) or len(set(es)) != len(es):
            raise ValueError("exploits: distinct integers >= 1")
        if self.n_regular < 1 or self.long_cycles < 1 or self.seeds < 1:
            raise ValueError("n_regular, long_cycles and seeds must be >= 1")
        if self.first_seed < 0:
            raise ValueError("first_seed must be >= 0")
        if self.regular_intervals <= 0:
            raise ValueError("regular_intervals must be positive")


    @property
    def exploit_list(self) -> list[int]:
        return [int(v) for v in self.exploits.split(",") if v.strip()]


def d_key(exploit: int) -> str:
    return f"d{exploit}"


def phase_name(exploit: int, seed: int) -> str:
    return f"{d_key(exploit)}-s{seed}"


def budget_intervals(alpha: float, warmup: int, measure: int, exploit: int) -> int:
    """Intervals from a cycle boundary until a lone flexible flow first goes low,
    by the paper's rule: its first estimate comes at the end of the first
    measure phase; from then it gains (1 - alpha) of its rate per interval and
    needs alpha x D_exploit intervals of it, and it can only go low at the start
    of an exploit phase (alpha 0.9, 1:1:3: 2 + 6 x 5 = 32 intervals, 160 ms;
    the paper's 175 ms includes the wait for the first cycle)."""
    cycle = warmup + measure + exploit
    need = alpha * exploit / (1 - alpha)
    return warmup + measure + math.ceil(need / cycle - 1e-9) * cycle


def spent_fraction_calc(warmup: int, measure: int, exploit: int) -> float:
    """The paper's reasoning for Fig. 10(a): low in every exploit phase, at
    10% of the link instead of its 50% fair share."""
    return exploit / (warmup + measure + exploit) * (1 - LOW_SHARE / 0.5)


@dataclass(frozen=True)
class _Layout:
    head_intervals: float
    arrivals: list[float]        # short regular flows' arrivals, intervals since start
    long_start: float


def layout(p: Params, exploit: int, seed: int) -> _Layout:
    """When the regular flows arrive (in intervals since the common start)."""
    cycle = p.warmup + p.measure + exploit
    # One cycle to synchronize, the paper's budget rule, one interval for DCQCN
    # to settle after the first switch.
    head = cycle + budget_intervals(p.alpha, p.warmup, p.measure, exploit) + 1
    rng = random.Random(1000 * seed + exploit)
    step = cycle * (1 + 1 / p.n_regular)
    jitter = cycle / p.n_regular
    arrivals = [head + i * step + rng.uniform(0, jitter) for i in range(p.n_regular)]
    # Alone again before the long flow, for as long as the rule says it takes
    # to hold the budget for being low in every exploit phase of its
    # competition (whatever is left from before is not counted).
    long_start = (head + p.n_regular * step
                  + max(cycle, refill_intervals(p.alpha, p.warmup, p.measure, exploit,
                                                p.long_cycles + 1)))
    return _Layout(head, arrivals, long_start)


def refill_intervals(alpha: float, warmup: int, measure: int, exploit: int,
                     cycles: int) -> float:
    """Intervals a lone flexible flow needs, at (1 - alpha) of its rate, to hold
    the budget to be low in the exploit phases of ``cycles`` cycles beside one
    regular flow (fair share half the link, 10% of it while low): the first
    exploit phase needs alpha/2 x D_exploit in hand, and each cycle costs
    D_exploit x (alpha/2 - 0.1) and earns back (warmup + measure) x (1 - alpha)/2
    (in units of the link's rate x T_int)."""
    per_cycle = exploit * (alpha / 2 - LOW_SHARE) - (warmup + measure) * (1 - alpha) / 2
    need = alpha / 2 * exploit + max(0, cycles - 1) * per_cycle
    return need / (1 - alpha)


def _long_intervals(p: Params, exploit: int) -> float:
    """The long regular flow's volume: at most 0.9 of the link, it still covers
    ``long_cycles`` whole cycles after its start."""
    cycle = p.warmup + p.measure + exploit
    return 0.9 * (p.long_cycles + 1) * cycle


def _phase(p: Params, exploit: int, seed: int) -> tuple[PhasePlan, float]:
    lay = layout(p, exploit, seed)
    cycle = p.warmup + p.measure + exploit
    reg_count = messages(p, p.regular_intervals)
    long_count = messages(p, _long_intervals(p, exploit))
    # The flexible flow has the link to itself except for what the regular flows
    # take, and should end with the long one: beside it, low in every exploit
    # phase, it gets 10% of the link there and half elsewhere. (What it has left
    # when the long flow ends it sends alone, time that measures nothing, so
    # there is no margin beyond the calculation.)
    long_iv = _long_intervals(p, exploit)
    flex_share = (exploit * LOW_SHARE + (p.warmup + p.measure) * 0.5) / cycle
    flex_iv = (lay.long_start - p.n_regular * p.regular_intervals
               + long_iv * flex_share / (1 - flex_share))
    flex_count = messages(p, flex_iv)
    end = lay.long_start + long_iv / (1 - flex_share) + cycle
    flows: list[tuple[str, int, int, float, dict[str, float] | None]] = [
        ("flex", 1, flex_count, 0.0, flexible_spec(p, p.alpha) | {"exploit": exploit})]
    for i, a in enumerate(lay.arrivals):
        flows.append((f"reg{i}", 2, reg_count, a * p.t_int_s, None))
    flows.append(("long", 2, long_count, lay.long_start * p.t_int_s, None))
    per_host: dict[int, list[FlowSpec]] = {}
    for k, (flow, snd, count, delay, flex) in enumerate(flows):
        common: FlowShared = {"flow": flow, "msg_bytes": p.msg_bytes, "count": count,
                              "window": p.window, "seed": 500 + 50 * seed + k}
        extra: SenderOnly = {"start_delay_s": delay}
        if flex is not None:
            # Nothing is measured once the long regular flow has finished.
            extra["flexible"] = flex
            extra["stop_after"] = "long"
        add_flow(per_host, snd, 3, common, extra)
    expected = (end + 2) * p.t_int_s
    timeout = 1.5 * expected + 60
    return PhasePlan(phase_name(exploit, seed), host_jobs(p, per_host, timeout),
                     commands=(SCHEMES["reflex"].switch_line(BOTTLENECK_PORT),),
                     timeout_s=timeout, watch_ports=(BOTTLENECK_PORT,),
                     notes=f"D_exploit = {exploit} (1:1:{exploit}), seed {seed}: a flexible "
                           f"flow (alpha {p.alpha:g}) alone for {lay.head_intervals:g} "
                           f"intervals, then {p.n_regular} short regular flows and a long "
                           "one"), expected


def plan(p: Params) -> RunPlan:
    phases = []
    total = 0.0
    for exploit in p.exploit_list:
        for seed in p.seed_list:
            ph, expected = _phase(p, exploit, seed)
            phases.append(ph)
            total += expected
    return RunPlan(topology=topology(p), phases=tuple(phases), fidelity=FidelityLimits(),
                   info={"bottleneck_port": BOTTLENECK_PORT, "link_bps": p.link_bps,
                         "slowdown": p.slowdown, "t_int_s": p.t_int_s,
                         "expected_traffic_s": round(total),
                         "budget_intervals": {d_key(e): budget_intervals(
                             p.alpha, p.warmup, p.measure, e) for e in p.exploit_list},
                         "reference": REFERENCE})


# ---------------------------------------------------------------------------
# analysis


def _params(run_dir: Path) -> Params:
    return saved_params(Params, run_dir)


@dataclass(frozen=True)
class ProbingRun:
    """One seed of one D_exploit (the module doc says what each figure is)."""

    budget_time_ms: float | None
    regular_fct_p50: float
    regular_fct_p90: float
    regular_fct_p99: float
    regular_fct_mean: float
    regular_fct_ms_p50: float
    whole_cycles: int
    budgeted_cycles: int
    spent_fraction: float | None
    spent_fraction_all: float | None
    long_rate_fraction: float | None
    low_share: float | None
    flexible_low_s: float | None
    fair_share_estimate_min: float | None


@dataclass(frozen=True)
class ProbingResult:
    """The seeds of one D_exploit: each figure's mean over them, with its
    spread, and the paper's rules' values."""

    budget_time_ms: Spread
    regular_fct_p50: Spread
    regular_fct_p90: Spread
    regular_fct_p99: Spread
    regular_fct_mean: Spread
    regular_fct_ms_p50: Spread
    spent_fraction: Spread
    spent_fraction_all: Spread
    long_rate_fraction: Spread
    low_share: Spread
    runs: list[ProbingRun]
    budget_time_calc_ms: float
    spent_fraction_calc: float


@dataclass(frozen=True)
class Results(Summary):
    points: dict[str, ProbingResult] = field(metadata=INLINE)    # d_key(exploit) -> its seeds
    paper: dict[str, float]


def percentile(xs: list[float], q: float) -> float:
    """The q-th percentile (0-100), linear between order statistics."""
    if not xs:
        raise ValueError("percentile of no values")
    s = sorted(xs)
    k = (len(s) - 1) * q / 100
    lo = math.floor(k)
    hi = min(lo + 1, len(s) - 1)
    return s[lo] + (s[hi] - s[lo]) * (k - lo)


def _post_s(data: PhaseData, flow: str) -> float:
    """When the sender could post its first message (testbed seconds)."""
    start = data.flow_start(flow, "sender")
    delay = 0.0
    for job in data.plan.get("jobs", {}).values():
        for f in job.get("flows", ()):
            if f["flow"] == flow and f["role"] == "sender":
                delay = float(f.get("start_delay_s", 0.0))
    return int(start["t_ns"]) / 1e9 + delay


def _done_s(data: PhaseData, flow: str) -> float:
    comps = data.flow_events(flow, "completion", role="receiver")
    if not comps:
        raise ValueError(f"phase {data.name}: flow {flow} delivered nothing")
    return max(int(e["t_ns"]) for e in comps) / 1e9


def phase_result(data: PhaseData, p: Params, exploit: int) -> ProbingRun:
    cycle_iv = p.warmup + p.measure + exploit
    cycle_s = cycle_iv * p.t_int_s
    ms_per_s = 1000 / p.slowdown
    t_flex = _post_s(data, "flex")
    lows = [e for e in data.flow_events("flex", "priority") if e.get("low")]
    budget_time_ms = (round((int(lows[0]["t_ns"]) / 1e9 - t_flex) * ms_per_s, 2)
                      if lows else None)
    reg_line_s = messages(p, p.regular_intervals) * p.msg_bytes * 8 / p.payload_bps
    fcts = []
    for i in range(p.n_regular):
        f = f"reg{i}"
        fcts.append(_done_s(data, f) - _post_s(data, f))
    norm = [f / reg_line_s for f in fcts]
    # The long regular flow's competition, cut to whole cycles of the shared clock.
    a, b = _post_s(data, "long"), min(_done_s(data, "long"), _done_s(data, "flex"))
    c0, c1 = math.ceil(a / cycle_s) * cycle_s, math.floor(b / cycle_s) * cycle_s
    cycles = round((c1 - c0) / cycle_s)
    flex_pts, reg_pts = delivered(data, "flex"), delivered(data, "long")
    fair = p.payload_bps / 2
    exploit_s = exploit * p.t_int_s
    spent, spent_budgeted, long_rates, low_times = [], [], [], []
    for k in range(cycles):
        t0, t1 = c0 + k * cycle_s, c0 + (k + 1) * cycle_s
        share = 1 - (value_at(flex_pts, t1) - value_at(flex_pts, t0)) * 8 / cycle_s / fair
        spent.append(share)
        long_rates.append((value_at(reg_pts, t1) - value_at(reg_pts, t0)) * 8 / cycle_s
                          / p.payload_bps)
        low_times.append(_low_time(data, t0, t1))
        # A cycle with budget: low for (nearly) its whole exploit phase.
        if _low_time(data, t1 - exploit_s, t1) >= 0.9 * exploit_s:
            spent_budgeted.append(share)
    end = data.flow_end("flex", "sender").get("flexible") or {}
    fairs = [e["fair_share_bps"] for e in data.flow_events("flex", "priority")
             if e.get("fair_share_bps") and e.get("low")]
    return ProbingRun(
        budget_time_ms=budget_time_ms,
        regular_fct_p50=round(percentile(norm, 50), 4),
        regular_fct_p90=round(percentile(norm, 90), 4),
        regular_fct_p99=round(percentile(norm, 99), 4),
        regular_fct_mean=round(statistics.fmean(norm), 4),
        regular_fct_ms_p50=round(percentile(fcts, 50) * ms_per_s, 3),
        whole_cycles=cycles,
        budgeted_cycles=len(spent_budgeted),
        spent_fraction=(round(statistics.fmean(spent_budgeted), 4)
                        if spent_budgeted else None),
        spent_fraction_all=round(statistics.fmean(spent), 4) if spent else None,
        long_rate_fraction=round(statistics.fmean(long_rates), 4) if spent else None,
        low_share=round(sum(low_times) / (cycles * cycle_s), 4) if spent else None,
        flexible_low_s=end.get("low_s"),
        fair_share_estimate_min=(round(min(fairs) / p.payload_bps, 4) if fairs else None))


def _low_time(data: PhaseData, t0: float, t1: float) -> float:
    """Seconds of [t0, t1] the flexible flow sent at low priority."""
    evs = sorted(data.flow_events("flex", "priority"), key=lambda e: e["t_ns"])
    low, since, total = False, t0, 0.0
    for e in evs:
        t = int(e["t_ns"]) / 1e9
        if t >= t1:
            break
        if t > t0 and low:
            total += t - max(since, t0)
        low, since = bool(e.get("low")), max(t, t0)
    if low:
        total += t1 - since
    return total


def aggregate(runs: list[ProbingRun], budget_time_calc_ms: float,
              spent_fraction_calc: float) -> ProbingResult:
    """Mean, sample standard deviation, min and max over seeds, per figure (a
    seed that could not measure one is left out of its figures)."""
    return ProbingResult(
        budget_time_ms=seed_spread(r.budget_time_ms for r in runs),
        regular_fct_p50=seed_spread(r.regular_fct_p50 for r in runs),
        regular_fct_p90=seed_spread(r.regular_fct_p90 for r in runs),
        regular_fct_p99=seed_spread(r.regular_fct_p99 for r in runs),
        regular_fct_mean=seed_spread(r.regular_fct_mean for r in runs),
        regular_fct_ms_p50=seed_spread(r.regular_fct_ms_p50 for r in runs),
        spent_fraction=seed_spread(r.spent_fraction for r in runs),
        spent_fraction_all=seed_spread(r.spent_fraction_all for r in runs),
        long_rate_fraction=seed_spread(r.long_rate_fraction for r in runs),
        low_share=seed_spread(r.low_share for r in runs),
        runs=runs, budget_time_calc_ms=budget_time_calc_ms,
        spent_fraction_calc=spent_fraction_calc)


def analyze(run_dir: Path) -> Results:
    p = _params(run_dir)
    points: dict[str, ProbingResult] = {}
    for exploit in p.exploit_list:
        runs = [phase_result(load_phase(run_dir, phase_name(exploit, s)), p, exploit)
                for s in p.seed_list]
        points[d_key(exploit)] = aggregate(
            runs,
            budget_time_calc_ms=round(budget_intervals(p.alpha, p.warmup, p.measure, exploit)
                                      * p.t_int_us / 1000, 2),
            spent_fraction_calc=round(spent_fraction_calc(p.warmup, p.measure, exploit), 4))
    return Results(points=points, paper=dict(REFERENCE))


def plot(run_dir: Path) -> list[Path]:
    import matplotlib.pyplot as plt

    from testbed.plotting import save_figure

    p = _params(run_dir)
    outs = phase_timelines(
        p, run_dir, ((phase_name(exploit, s), f"{NAME} - D_exploit {exploit}, seed {s} "
                                              f"({p.rate_label})")
                     for exploit in p.exploit_list for s in p.seed_list))
    res = analyze(run_dir)
    es = p.exploit_list
    rows = [res.points[d_key(e)] for e in es]

    def series(key: str) -> tuple[list[int], list[float], list[list[float]]]:
        xs: list[int] = []
        ys: list[float] = []
        err: list[list[float]] = [[], []]
        for e, r in zip(es, rows, strict=True):
            s: Spread = getattr(r, key)
            if s.mean is None or s.min is None or s.max is None:
                continue
            xs.append(e)
            ys.append(s.mean)
            err[0].append(s.mean - s.min)
            err[1].append(s.max - s.mean)
        return xs, ys, err

    fig, (ax_f, ax_b, ax_s) = plt.subplots(1, 3, figsize=(15, 4))
    for key, label in (("regular_fct_p50", "median"), ("regular_fct_p90", "p90"),
                       ("regular_fct_p99", "p99 (largest)"), ("regular_fct_mean", "mean")):
        xs, ys, err = series(key)
        ax_f.errorbar(xs, ys, yerr=err, marker="o", capsize=3, label=label)
    ax_f.set_xlabel("D_exploit (intervals)")
    ax_f.set_ylabel("regular FCT / FCT alone at line rate")
    ax_f.set_title("Fig. 8: regular flows' FCT")
    ax_f.legend(fontsize=8)
    xs, ys, err = series("budget_time_ms")
    ax_b.errorbar(xs, ys, yerr=err, marker="o", capsize=3, label="measured")
    ax_b.plot(es, [r.budget_time_calc_ms for r in rows], "x--",
              label="paper's rule, from a cycle boundary")
    if 3 in es:
        ax_b.plot([3], [REFERENCE["d3.budget_time_ms"]], "s", label="paper")
    ax_b.set_xlabel("D_exploit (intervals)")
    ax_b.set_ylabel("modelled ms")
    ax_b.set_title(f"Fig. 9: time to accumulate budget (alpha {p.alpha:g})")
    ax_b.legend(fontsize=8)
    xs, ys, err = series("spent_fraction")
    ax_s.errorbar(xs, ys, yerr=err, marker="o", capsize=3, label="measured")
    ax_s.plot(es, [r.spent_fraction_calc for r in rows], "x--", label="calculated")
    if 3 in es:
        ax_s.plot([3], [REFERENCE["d3.spent_fraction"]], "s", label="paper")
    ax_s.set_xlabel("D_exploit (intervals)")
    ax_s.set_ylabel("share of the fair share spent")
    ax_s.set_title("Fig. 10(a): fair share spent, two flows")
    ax_s.legend(fontsize=8)
    fig.suptitle(f"{NAME}: {p.seeds} seed(s) per point, bars min-max")
    out = save_figure(fig, Path(run_dir) / "plots" / "probing.png")
    outs.append(out)
    return outs
