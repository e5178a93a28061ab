"""ReFlex partial delivery (Fig. 6): a flexible flow with reliability r against a regular flow of equal size.

The ReFlex paper's §6.3: one 10 Gb/s link, a flexible flow with alpha = 1
and reliability factor r from 0 to 1 starts together with a regular flow of
the same size. B_r = (1 - r) x size is drained whenever the flexible flow
delivers less than its fair share, i.e. in the exploit phases it spends at
low priority; the bytes drained are bytes it will not deliver. The paper
(8 Gbit flows) finds that the lower r the less is delivered down to r ~ 0.6,
and no further below: at r = 0 the flexible flow delivers 65%, because it
can only go low in exploit phases (60% of the time, 10% of the link) and the
competition ends with the regular flow, which then runs at ~7.1 Gb/s (FCT
1.12 s calculated, 1.17 s measured).

Setup: as reflex-cases (experiments/_reflex_net.py): h1 (flexible) and h2
(regular) send to h3 through reflex.p4, DRR 90/10, RED hard threshold 65 of
466 packets, T_int = 5 ms x slowdown, 1:1:3, RoCEv2/DCQCN instead of DCTCP.
The flows' size keeps its ratio to the probing cycle at ``flow_cycles``
cycles of line-rate volume (the paper's 8 Gbit is 32; the full profile uses 8,
the quick one 2, to stay within minutes). The quick profile runs r = 0 and 1
only, on ``QUICK_LINK_MBPS`` links. The paper profile (``--profile paper``,
virtual time) runs the paper's scale: 10 Gb/s links and NICs (slowdown 1),
8 Gbit flows, r from 0 to 1 in steps of 0.1, one run each.

Results per r (key ``r000`` for r = 0.0, ``r060`` for 0.6, ...):
``delivered_fraction`` (bytes the receiver got / flow size),
``flexible_fct_s`` / ``regular_fct_s`` (testbed seconds from the common start
to the receiver's last message), the same as ``*_fct_norm`` (FCT / the flow's
time at line rate, comparable with the paper's seconds / 0.8 s), and
``skipped_bytes`` (what B_r gave up). Each r runs ``seeds`` times; every
key is the mean over them, with ``_sd``, ``_min``, ``_max``, ``_seeds`` (the
list) and each run's figures under ``runs``. ``paper`` holds the paper's
values (REFERENCE).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TypedDict

from experiments._reflex_net import (
    BOTTLENECK_PORT,
    QUICK_LINK_MBPS,
    FlowShared,
    ReflexNetwork,
    SeededRuns,
    SenderOnly,
    add_flow,
    flexible_spec,
    host_jobs,
    messages,
    paper_cycles,
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
from testbed.timeline import PhaseData, load_phase

NAME = "reflex-partial"
# rxe: a flexible flow's QP moves between the priority queues by the DSCP the
# host's DCQCN shim writes on its packets (hosts.roce.rxe.dcqcn_shim, set_dscp).
HOST_PROVIDERS = ("udp", "rxe")
HEADLINE = ("r000.delivered_fraction", "r000.regular_fct_norm", "r100.delivered_fraction")

# The paper's values (§6.3, Fig. 6; 8 Gbit flows on 10 Gb/s: 0.8 s at line rate).
REFERENCE: dict[str, float] = {
    "r000.delivered_fraction": 0.65,
    "r000.regular_fct_norm": 1.17 / 0.8,     # measured 1.17 s (1.12 s calculated)
    "r100.delivered_fraction": 1.0,
}


class PaperPartial(TypedDict):
    flow_gbit: float
    alpha: float
    r_values: list[float]


# The paper's Fig. 6 setup (§6.3), in its units: Params.paper() converts it.
PAPER_PARTIAL: PaperPartial = {
    "flow_gbit": 8.0,           # each flow, the flexible and the regular one
    "alpha": 1.0,
    # "We vary the reliability factor r from 0 to 1": the text gives no step;
    # §6.5 sweeps r in steps of 0.1, and so does this.
    "r_values": [round(0.1 * i, 1) for i in range(11)],
}

# What the report (testbed report) checks against Fig. 6: levels within 10% of
# the paper's, on its side of what fair sharing gives (everything delivered,
# the regular flow at twice its line-rate time); full delivery at r = 1.
CLAIMS = (
    Claim("Fig. 6", "at r = 0 the flexible flow delivers 65% of its bytes",
          key="r000.delivered_fraction", paper=REFERENCE["r000.delivered_fraction"],
          direction="below", versus=1.0, rel_tol=0.10, per_seed="r000.delivered_fraction_seeds",
          plots=("partial.png", "r000*.png")),
    Claim("Fig. 6", "at r = 0 the regular flow finishes in 1.46 of its line-rate time "
          "(1.17 s for 8 Gbit at 10 Gb/s)",
          key="r000.regular_fct_norm", paper=REFERENCE["r000.regular_fct_norm"],
          direction="below", versus=2.0, rel_tol=0.10, per_seed="r000.regular_fct_norm_seeds",
          plots=("partial.png",)),
    Claim("Fig. 6", "at r = 1 the flexible flow delivers everything",
          key="r100.delivered_fraction", paper=REFERENCE["r100.delivered_fraction"],
          abs_tol=0.005, per_seed="r100.delivered_fraction_seeds",
          plots=("partial.png", "r100*.png")),
)


@dataclass(frozen=True)
class Params(ReflexNetwork, SeededRuns):
    alpha: float = param(1.0, "ReFlex aggressiveness: the share of its fair-share rate the "
                              "flexible flow must keep (1: the paper's r sweep)")
    r_values: str = param("0,0.2,0.4,0.6,0.8,1", "reliability factors r swept, one phase "
                          "each: the share of its size the flexible flow must deliver, "
                          "comma-separated")
    flow_cycles: float = param(8.0, "each flow's volume in probing cycles at line rate (the "
                                    "paper's 8 Gbit: 32)", "cycles")
    # Runs differ by the machine's timing, not by any parameter; each key is
    # their mean, with its spread.
    seeds: int = param(3, "runs of each r", "runs")
    first_seed: int = param(0, "the first run's seed (seeds first_seed .. first_seed + "
                               "seeds - 1)")

    @classmethod
    def quick(cls) -> Params:
        # The two ends of Fig. 6, which the paper's claims are about.
        return cls(link_mbps=QUICK_LINK_MBPS, r_values="0,1", flow_cycles=2.0, seeds=1)

    @classmethod
    def paper(cls) -> Params:
        """Fig. 6 at the paper's scale: one 10 Gb/s link (every port and NIC at
        10 Gb/s, slowdown 1), T_int 5 ms at 1:1:3, two flows of 8 Gbit (32
        cycles of line-rate volume) starting together, r from 0 to 1 in steps
        of 0.1, one run per r as the paper's one simulation, phantom payloads
        (the flows' bytes are not kept: no bytes_ok)."""
        return cls(**paper_network(), alpha=PAPER_PARTIAL["alpha"],
                   r_values=",".join(f"{r:g}" for r in PAPER_PARTIAL["r_values"]),
                   flow_cycles=paper_cycles(PAPER_PARTIAL["flow_gbit"]), seeds=1,
                   payload="phantom")

    def __post_init__(self) -> None:
        super().__post_init__()
        if not self.alpha >= 0:
            raise ValueError("alpha must be >= 0")
        try:
            rs = self.r_list
        except ValueError:
            raise ValueError(f"r_values: {self.r_values!r} is not a comma-separated list "
                             "of numbers") from None
        if not rs or any(not 0 <= r <= 1 for r in rs) or len(set(rs)) != len(rs):
            raise ValueError("r_values: distinct values in [0, 1]")
        if self.flow_cycles <= 0:
            raise ValueError("flow_cycles must be positive")
        if self.seeds < 1 or self.first_seed < 0:
            raise ValueError("seeds must be >= 1 and first_seed >= 0")


    @property
    def r_list(self) -> list[float]:
        return [float(v) for v in self.r_values.split(",") if v.strip()]


def r_key(r: float) -> str:
    return f"r{round(r * 100):03d}"


def phase_name(r: float, seed: int) -> str:
    """Seed 0 keeps the plain name (``r060``), so runs made before seeds existed
    still analyse; later seeds are ``r060-s1``, ..."""
    return r_key(r) if seed == 0 else f"{r_key(r)}-s{seed}"


def plan(p: Params) -> RunPlan:
    count = messages(p, p.flow_cycles * p.cycle_intervals)
    line_s = count * p.msg_bytes * 8 / p.payload_bps
    phases = []
    for r, seed in ((r, s) for r in p.r_list for s in p.seed_list):
        flows = {"flex": 1, "regular": 2}
        per_host: dict[int, list[FlowSpec]] = {}
        for k, (flow, snd) in enumerate(flows.items()):
            common: FlowShared = {"flow": flow, "msg_bytes": p.msg_bytes, "count": count,
                                  "window": p.window, "seed": 300 + 10 * seed + k}
            extra: SenderOnly = (
                {"flexible": flexible_spec(p, p.alpha, r)} if flow == "flex" else {})
            add_flow(per_host, snd, 3, common, extra)
        timeout = 3 * 2 * line_s + 60
        phases.append(PhasePlan(phase_name(r, seed), host_jobs(p, per_host, timeout),
                                commands=(SCHEMES["reflex"].switch_line(BOTTLENECK_PORT),),
                                timeout_s=timeout, watch_ports=(BOTTLENECK_PORT,),
                                notes=f"flexible flow with r = {r:g}, alpha = {p.alpha:g}, "
                                      f"against a regular flow of equal size (seed {seed})"))
    return RunPlan(topology=topology(p), phases=tuple(phases), fidelity=FidelityLimits(),
                   info={"bottleneck_port": BOTTLENECK_PORT, "link_bps": p.link_bps,
                         "slowdown": p.slowdown, "t_int_s": p.t_int_s, "cycle_s": p.cycle_s,
                         "flow_bytes": count * p.msg_bytes, "line_rate_s": line_s,
                         "reference": REFERENCE})


def _params(run_dir: Path) -> Params:
    # Runs saved before seeds existed ran each r once.
    return saved_params(Params, run_dir, seeds=1)


@dataclass(frozen=True)
class PartialRun:
    """One run of one r: FCTs from the common start, what was delivered."""

    r: float
    flexible_fct_s: float
    flexible_fct_norm: float
    regular_fct_s: float
    regular_fct_norm: float
    delivered_fraction: float
    low_s: float | None
    skipped_bytes: int | None
    bytes_ok: bool | None          # None: a phantom payload, not checked


@dataclass(frozen=True)
class PartialResult:
    """The runs of one r: each figure's mean over them, with its spread."""

    r: float
    bytes_ok: bool | None
    delivered_fraction: Spread
    flexible_fct_s: Spread
    flexible_fct_norm: Spread
    regular_fct_s: Spread
    regular_fct_norm: Spread
    low_s: Spread
    skipped_bytes: Spread
    runs: list[PartialRun]


@dataclass(frozen=True)
class Results(Summary):
    points: dict[str, PartialResult] = field(metadata=INLINE)    # r_key(r) -> its runs
    flow_bytes: int
    paper: dict[str, float]


def phase_result(data: PhaseData, r: float, size: int, line_s: float) -> PartialRun:
    """One run of one r: FCTs from the common start, what was delivered."""
    t0 = data.start_ns()
    fct: dict[str, float] = {}
    for flow in ("flex", "regular"):
        comps = data.flow_events(flow, "completion", role="receiver")
        if not comps:
            raise ValueError(f"phase {data.name}: flow {flow} delivered nothing")
        fct[flow] = (max(int(e["t_ns"]) for e in comps) - t0) / 1e9
    rx = data.flow_end("flex", "receiver")
    flex = data.flow_end("flex", "sender").get("flexible") or {}
    return PartialRun(
        r=r,
        flexible_fct_s=round(fct["flex"], 3),
        flexible_fct_norm=round(fct["flex"] / line_s, 4),
        regular_fct_s=round(fct["regular"], 3),
        regular_fct_norm=round(fct["regular"] / line_s, 4),
        delivered_fraction=round(rx["bytes"] / size, 4),
        low_s=flex.get("low_s"),
        skipped_bytes=None if "b_r" not in flex else round((1 - r) * size - flex["b_r"]),
        # a phantom payload is not checked: no verdict either way
        bytes_ok=None if rx.get("payload") == "phantom" else bool(rx.get("bytes_ok")))


def aggregate(r: float, runs: list[PartialRun]) -> PartialResult:
    """Per figure the mean over the runs, with sample sd, min, max and the list."""
    checked = [x.bytes_ok for x in runs if x.bytes_ok is not None]
    return PartialResult(
        r=r, bytes_ok=all(checked) if checked else None,
        delivered_fraction=seed_spread(x.delivered_fraction for x in runs),
        flexible_fct_s=seed_spread(x.flexible_fct_s for x in runs),
        flexible_fct_norm=seed_spread(x.flexible_fct_norm for x in runs),
        regular_fct_s=seed_spread(x.regular_fct_s for x in runs),
        regular_fct_norm=seed_spread(x.regular_fct_norm for x in runs),
        low_s=seed_spread(x.low_s for x in runs),
        skipped_bytes=seed_spread(x.skipped_bytes for x in runs),
        runs=runs)


def analyze(run_dir: Path) -> Results:
    p = _params(run_dir)
    count = messages(p, p.flow_cycles * p.cycle_intervals)
    size = count * p.msg_bytes
    line_s = size * 8 / p.payload_bps
    points: dict[str, PartialResult] = {}
    for r in p.r_list:
        runs = [phase_result(load_phase(run_dir, phase_name(r, s)), r, size, line_s)
                for s in p.seed_list]
        points[r_key(r)] = aggregate(r, runs)
    return Results(points=points, flow_bytes=size, paper=dict(REFERENCE))


def plot(run_dir: Path) -> list[Path]:
    import matplotlib.pyplot as plt

    from testbed.plotting import save_figure

    p = _params(run_dir)
    outs = phase_timelines(
        p, run_dir, ((phase_name(r, seed), f"{NAME} - r = {r:g}, alpha = {p.alpha:g}, "
                                           f"seed {seed} ({p.rate_label})")
                     for r in p.r_list for seed in p.seed_list))
    points = analyze(run_dir).points
    rs = p.r_list
    fig, (ax_d, ax_f) = plt.subplots(1, 2, figsize=(11, 4))

    def figure(key: str) -> tuple[list[float], list[list[float]]]:
        """A figure's means per r and its min-max bars."""
        xs: list[Spread] = [getattr(points[r_key(r)], key) for r in rs]
        return ([float(x.mean or 0) for x in xs],
                [[float((x.mean or 0) - (x.min or 0)) for x in xs],
                 [float((x.max or 0) - (x.mean or 0)) for x in xs]])

    ys, err = figure("delivered_fraction")
    ax_d.errorbar(rs, ys, yerr=err, fmt="o-", capsize=3, label="measured")
    ax_d.plot([0, 1], [REFERENCE["r000.delivered_fraction"], REFERENCE["r100.delivered_fraction"]],
              "s", label="paper")
    ax_d.plot([0, 1], [0, 1], ":", color="grey", label="r (the bound)")
    ax_d.set_xlabel("reliability factor r")
    ax_d.set_ylabel("delivered fraction")
    ax_d.legend()
    for name in ("flexible", "regular"):
        ys, err = figure(f"{name}_fct_norm")
        ax_f.errorbar(rs, ys, yerr=err, fmt="o-", capsize=3, label=name)
    ax_f.plot([0], [REFERENCE["r000.regular_fct_norm"]], "s", label="paper: regular at r = 0")
    ax_f.set_xlabel("reliability factor r")
    ax_f.set_ylabel("FCT / time at line rate")
    ax_f.legend()
    fig.suptitle(f"{NAME}: flexible (alpha = {p.alpha:g}) vs regular flow of equal size, "
                 f"{p.seeds} run(s) per r, bars min-max")
    out = save_figure(fig, Path(run_dir) / "plots" / "partial.png")
    outs.append(out)
    return outs
