"""ReFlex use cases (Fig. 4/5): a flexible and a regular flow on one link, ReFlex vs fixed priorities.

The ReFlex paper's §5 example: one 10 Gb/s link, two flows, alpha = 0.9.
- Case 1: a long flexible flow starts first, a short regular flow later. With
  budget built while alone, the flexible flow is at low priority in every
  exploit phase (60% of the time at 1:1:3), so the regular flow gets
  0.6 x 9 + 0.4 x 5 = 7.4 Gb/s.
- Case 2: a long regular flow first, a short flexible flow later. The flexible
  flow arrives without budget and keeps alpha of its fair share: 4.5 Gb/s.
The comparison schemes put the flexible flow in the low queue all the time:
absolute (strict) priority, and weighted priority (DRR) with the regular
queue's weight 9x, 2x and 10/9x the flexible one's; "none" puts both flows in
the high queue.

Setup: h1 (flexible sender) and h2 (regular sender) send to h3 through one
soft switch running ``switches/p4/reflex.p4``: DSCP picks one of two queues
per port, the queues share a port by DRR (weights per scheme; ReFlex 90/10),
and each queue marks ECN when its depth reaches K = 65 packets (466-packet
queues), the paper's RED hard threshold. Every link and host NIC runs at
``link_mbps``; the modelled network is the paper's, 10 Gb/s
(``nic_gbps``), so the slowdown is nic_gbps / link_mbps and the probing
interval T_int = 5 ms becomes 5 ms x slowdown (2.5 s at 20 Mb/s); DCQCN's
timers stretch by the same factor. Queue sizes and thresholds are in packets
(unscaled).

Differences from the paper (the conclusions on this experiment's docs page,
docs/experiments/analysis/reflex-cases.md, explain what they do):
- Transport: RoCEv2 with DCQCN instead of DCTCP (the hosts are RoCE hosts and
  the kernel has no DCTCP). DCQCN reacts to CNPs per 50 us interval and
  recovers by timer-driven rate increases, so a flow returning from low
  priority regains its fair share more slowly than DCTCP's per-RTT window
  growth; the warmup phase (one T_int) absorbs part of that.
- Path MTU 1024 (RoCE MTUs are powers of two and the testbed's links carry
  1500-byte frames): packets are 1082 bytes on the wire against the paper's
  1500, so a 65-packet queue holds 70 KB instead of 97 KB.
- Flow sizes and head starts: the paper's 40 Gbit / 2 Gbit flows and 2 s head
  start span 160 probing cycles, hours at this scale. The short flow keeps
  the paper's size relative to a cycle (``short_cycles``: its volume in
  cycles at line rate; 2 Gbit = 8 cycles of 10 Gb/s x 25 ms), the head start
  of Case 1 is what budget the paper's rule needs for the short flow
  (derived, not tuned; ``case1_head_cycles`` sets it instead), the long flow
  outlasts the short one and stops once the short one has been received
  (``FlowSpec.stop_after``): after that nothing is measured.
- The fixed schemes do not depend on the cycle, so their flows are shorter
  (``scheme_short_intervals``) to keep the run short.

The paper profile (``--profile paper``, virtual time) runs the paper's scale:
10 Gb/s links and NICs (slowdown 1), the 2 Gbit later flow under every
scheme, one run per phase; its later flows start after 1 s instead of 2 s
(``Params.scaled_down_from``: a flow holds its bytes in memory and carries
at most 2 GiB).

Results (summary.json): ``case1.regular_rate_fraction`` and
``case2.flexible_rate_fraction`` for ReFlex, and the same under
``schemes.<name>`` for every scheme: the measured flow's delivered payload
rate while both flows were active, as a fraction of the link's payload
capacity (link rate x payload efficiency, i.e. barring header overhead as the
paper's calculation does). For ReFlex the window is cut to whole probing
cycles (a partial cycle would weigh high or low priority unevenly).
``paper`` holds the paper's values (REFERENCE).
"""

from __future__ import annotations

import json
import math
import statistics
from dataclasses import dataclass, field
from pathlib import Path
from typing import TypedDict

from experiments._reflex_net import (
    BOTTLENECK_PORT,
    PAPER_NETWORK,
    QUICK_LINK_MBPS,
    FlowShared,
    ReflexNetwork,
    SeededRuns,
    SenderOnly,
    add_flow,
    delivered,
    first_rx_s,
    flexible_spec,
    host_jobs,
    last_rx_s,
    messages,
    paper_cycles,
    paper_network,
    phase_timelines,
    saved_params,
    topology,
)
from hosts.agent_spec import FlowSpec, JobSpec
from hosts.reflex.schemes import DSCP_HIGH, DSCP_LOW, SCHEMES
from testbed.claims import Claim
from testbed.experiment import FidelityLimits, PhasePlan, RunPlan, ScaledDown, param
from testbed.summary import OMIT_IF_NONE, Spread, Summary, results_json
from testbed.timeline import PhaseData, load_phase, value_at

NAME = "reflex-cases"
# rxe: a flexible flow's QP moves between the priority queues by the DSCP the
# host's DCQCN shim writes on its packets (hosts.roce.rxe.dcqcn_shim, set_dscp).
HOST_PROVIDERS = ("udp", "rxe")
HEADLINE = ("case1.regular_rate_fraction", "case2.flexible_rate_fraction")

# The paper's values for this experiment's keys (§5, Fig. 3/4: rates while both
# flows are active, as fractions of the 10 Gb/s link).
REFERENCE: dict[str, float] = {
    "case1.regular_rate_fraction": 0.74,
    "case2.flexible_rate_fraction": 0.45,
    "schemes.none.case1.regular_rate_fraction": 0.5,
    "schemes.none.case2.flexible_rate_fraction": 0.5,
    "schemes.absolute.case1.regular_rate_fraction": 1.0,
    "schemes.absolute.case2.flexible_rate_fraction": 0.0,
    "schemes.weighted-9:1.case1.regular_rate_fraction": 0.9,
    "schemes.weighted-9:1.case2.flexible_rate_fraction": 0.1,
    "schemes.weighted-2:1.case1.regular_rate_fraction": 2 / 3,
    "schemes.weighted-2:1.case2.flexible_rate_fraction": 1 / 3,
    "schemes.weighted-10:9.case1.regular_rate_fraction": 10 / 19,
    "schemes.weighted-10:9.case2.flexible_rate_fraction": 9 / 19,
}
ACCEPT_REL = 0.10   # ReFlex's two fractions must be within 10% of the paper's


class PaperCases(TypedDict):
    alpha: float
    long_gbit: float
    short_gbit: float
    later_start_s: float


# The paper's two cases (§5), in its units: Params.paper() converts them.
PAPER_CASES: PaperCases = {
    "alpha": 0.9,
    "long_gbit": 40.0,          # the flow that starts at T = 0
    "short_gbit": 2.0,          # the flow that starts later
    "later_start_s": 2.0,       # when the later flow starts
}
# The head start the paper profile runs instead of the paper's 2 s (see
# Params.scaled_down_from).
PAPER_PROFILE_HEAD_S = 1.0

# What the report (testbed report) checks against Fig. 3/4: ReFlex's two
# fractions within ACCEPT_REL, on the paper's side of the fair half; the fixed
# schemes' shares (the paper's calculation) within 5% of the link.
_SCHEME_LABELS = {"none": "no priority", "absolute": "absolute priority",
                  "weighted-9:1": "weighted 9:1", "weighted-2:1": "weighted 2:1",
                  "weighted-10:9": "weighted 10:9"}
_CASE_KEYS = {1: ("regular", "regular_rate_fraction"), 2: ("flexible", "flexible_rate_fraction")}
CLAIMS = (
    Claim("Fig. 3/4", "Case 1: ReFlex gives the regular flow 0.74 of the link",
          key="case1.regular_rate_fraction", paper=REFERENCE["case1.regular_rate_fraction"],
          per_seed="case1.regular_rate_fraction_seeds",
          direction="above", versus=0.5, rel_tol=ACCEPT_REL,
          plots=("rates.png", "case1-reflex.png")),
    Claim("Fig. 3/4", "Case 2: ReFlex keeps the flexible flow at alpha of its fair half, 0.45",
          key="case2.flexible_rate_fraction", paper=REFERENCE["case2.flexible_rate_fraction"],
          per_seed="case2.flexible_rate_fraction_seeds",
          direction="below", versus=0.5, rel_tol=ACCEPT_REL,
          plots=("rates.png", "case2-reflex.png")),
    *(Claim("Fig. 3/4", f"Case {case}, {label}: the {flow} flow gets "
            f"{REFERENCE[key]:.2f} of the link", key=key, paper=REFERENCE[key], abs_tol=0.05,
            plots=("rates.png",))
      for scheme, label in _SCHEME_LABELS.items() for case, (flow, fraction) in _CASE_KEYS.items()
      for key in [f"schemes.{scheme}.case{case}.{fraction}"]),
)


@dataclass(frozen=True)
class Params(ReflexNetwork, SeededRuns):
    alpha: float = param(0.9, "ReFlex aggressiveness: the share of its fair-share rate a "
                              "flexible flow must keep (paper: 0.9)")
    # Short flows' volumes: the paper's 2 Gbit is 8 cycles of 10 Gb/s x 25 ms.
    case1_short_cycles: float = param(8.0, "case 1: the later, regular flow's volume in "
                                           "probing cycles at line rate", "cycles")
    case2_short_cycles: float = param(8.0, "case 2: the later, flexible flow's volume in "
                                           "probing cycles at line rate", "cycles")
    case2_head_cycles: float = param(1.0, "case 2: how long the regular flow runs alone before "
                                          "the flexible one starts", "cycles")
    case1_head_cycles: float = param(0.0, "case 1: how long the flexible flow runs alone before "
                                          "the regular one starts (0: the budget the paper's "
                                          "rule needs, case1_head_intervals)", "cycles")
    # Long enough that the ~4 ms (modelled) of DCQCN recovery after the later
    # flow's arrival weighs little in its fraction
    # (docs/experiments/analysis/reflex-cases.md, "The fixed schemes"; its
    # table by interval count): 8 intervals put 6 of the 8 shares within
    # 0.05 of the paper's, 1 interval one.
    scheme_short_intervals: float = param(8.0, "fixed schemes: the later flow's volume in "
                                               "probing intervals at line rate", "T_int")
    scheme_head_intervals: float = param(1.0, "fixed schemes: how long the first flow runs "
                                              "alone", "T_int")
    schemes: str = param("reflex,none,absolute,weighted-9:1,weighted-2:1,weighted-10:9",
                         "which schemes run, comma-separated")
    # Runs differ by the machine's timing; each key is their mean, with its spread.
    seeds: int = param(3, "runs of every phase", "runs")
    first_seed: int = param(0, "the first run's seed (seeds first_seed .. first_seed + "
                               "seeds - 1)")

    @classmethod
    def quick(cls) -> Params:
        # Case 2 needs the flexible flow long enough to spend budget at least
        # once (about 27 intervals of surplus at alpha 0.9): 4 cycles. The
        # fixed schemes' shares are set by the switch's DRR weights, so one
        # interval of the short flow shows them.
        # Every scheme runs, so that each of the paper's claims is judged
        # (at 60 Mb/s the four fixed-scheme phases of 2:1 and 10:9 add
        # about 16 s).
        return cls(link_mbps=QUICK_LINK_MBPS, case1_short_cycles=2.0, case2_short_cycles=4.0,
                   scheme_short_intervals=1.0, seeds=1)

    @classmethod
    def paper(cls) -> Params:
        """§5's use cases at the paper's scale: one 10 Gb/s link (every port
        and NIC at 10 Gb/s, slowdown 1), alpha 0.9, T_int 5 ms at 1:1:3, the
        later flow of 2 Gbit (8 cycles of line-rate volume) under every
        scheme, one run per phase as the paper's one simulation per case. The
        later flow starts after PAPER_PROFILE_HEAD_S rather than the paper's
        2 s (scaled_down_from). The first flow, the paper's 40 Gbit, runs
        until the later one has been received and stops (as in every
        profile): nothing after that is measured. Phantom payloads: the
        flows' bytes are not kept."""
        intervals_per_cycle = sum(PAPER_NETWORK["cycle"])
        head_cycles = paper_cycles(PAPER_PROFILE_HEAD_S * PAPER_NETWORK["link_gbps"])
        short_cycles = paper_cycles(PAPER_CASES["short_gbit"])
        return cls(**paper_network(), alpha=PAPER_CASES["alpha"],
                   case1_short_cycles=short_cycles, case2_short_cycles=short_cycles,
                   case1_head_cycles=head_cycles, case2_head_cycles=head_cycles,
                   scheme_short_intervals=short_cycles * intervals_per_cycle,
                   scheme_head_intervals=head_cycles * intervals_per_cycle, seeds=1,
                   payload="phantom")

    @classmethod
    def scaled_down_from(cls) -> dict[str, ScaledDown]:
        head = paper_cycles(PAPER_CASES["later_start_s"] * PAPER_NETWORK["link_gbps"])
        why = (f"the later flow starts after {PAPER_PROFILE_HEAD_S:g} s, not the paper's "
               f"{PAPER_CASES['later_start_s']:g} s: a flow carries at most 2 GiB (its "
               "messages' indexes are 31-bit), and 2 s of the first flow alone at 10 Gb/s "
               "are 2.4 GB of payload; "
               "nothing before the later flow's start is measured")
        need_s = case1_head_intervals(cls.paper()) * PAPER_NETWORK["t_int_ms"] / 1000
        return {
            "case1_head_cycles": ScaledDown(head, why + f"; {PAPER_PROFILE_HEAD_S:g} s is more "
                                            f"than the {need_s:.2f} s the paper's budget rule "
                                            "needs (case1_head_intervals)"),
            "case2_head_cycles": ScaledDown(head, why),
            "scheme_head_intervals": ScaledDown(head * sum(PAPER_NETWORK["cycle"]), why),
        }

    def __post_init__(self) -> None:
        super().__post_init__()
        if not 0 < self.alpha <= 1:
            raise ValueError("alpha must be in (0, 1]")
        unknown = set(self.scheme_list) - set(SCHEMES)
        if unknown or not self.scheme_list:
            raise ValueError(f"schemes: unknown {sorted(unknown)}; known: {', '.join(SCHEMES)}")
        if self.seeds < 1 or self.first_seed < 0:
            raise ValueError("seeds must be >= 1 and first_seed >= 0")
        if min(self.case1_short_cycles, self.case2_short_cycles,
               self.scheme_short_intervals) <= 0:
            raise ValueError("flow sizes must be positive")
        if self.case1_head_cycles < 0:
            raise ValueError("case1_head_cycles must be >= 0 (0: the paper's budget rule)")


    @property
    def scheme_list(self) -> list[str]:
        return [s.strip() for s in self.schemes.split(",") if s.strip()]


# ---------------------------------------------------------------------------
# sizes, from the paper's rules


def case1_head_intervals(p: Params) -> float:
    """Intervals the flexible flow must run alone so that, by the paper's rule,
    it can be low in every exploit phase while the short regular flow runs.

    In units of the link's volume per interval (R x T_int), with the DRR
    shares of the reflex scheme (high 0.9, low 0.1 of the link):

    - Alone it gains (1 - alpha) per interval once it has its first estimate
      (after up to one cycle to synchronize, then warmup + measure).
    - The regular flow, at the paper's 0.6 x 0.9 + 0.4 x 0.5 = 0.74 of the
      link, lasts D = short volume / 0.74 cycles, and a span of D cycles
      touches at most n = ceil(D) + 1 exploit phases, wherever it begins.
    - The first of them costs most when the regular flow arrives as it
      begins: the flexible flow decided it, and is charged for it, by the
      estimate it measured alone, the whole link. That phase needs alpha x
      exploit in hand and costs exploit x (alpha - 0.1) (2.4 at 1:1:3); the
      warmup and measure after it are still charged at alpha of the whole
      link while the flow gets its half: (warmup + measure) x (alpha - 0.5)
      (0.8). Only the measure phase beside the regular flow gives the
      fair-share estimate R/2.
    - Every later exploit phase is priced at R/2: it needs alpha/2 x exploit
      in hand (1.35), and a cycle costs exploit x (alpha/2 - 0.1) -
      (warmup + measure) x (1 - alpha)/2 (0.95).

    So the budget at the first exploit phase beside the regular flow is the
    first cycle's cost, then alpha/2 x exploit in hand for the last phase and
    a cycle's cost for each of the n - 2 between. The worst arrival phase and
    the longest synchronization are both counted, though one head start
    never meets both, so this bounds what every start needs."""
    a, w, m, e = p.alpha, p.warmup, p.measure, p.exploit
    cycle = p.cycle_intervals
    low_w, high_w = SCHEMES["reflex"].weights or (0, 1)
    low, high = low_w / (low_w + high_w), high_w / (low_w + high_w)
    short_rate = (e * high + (w + m) * 0.5) / cycle
    n = math.ceil(p.case1_short_cycles / short_rate) + 1   # exploit phases to cover (>= 2)
    first = e * (a - low) + (w + m) * (a - 0.5)           # decided and charged alone
    per_cycle = e * (a / 2 - low) - (w + m) * (1 - a) / 2
    need = max(a * e, first + a / 2 * e + (n - 2) * per_cycle)
    gain = max(1e-9, 1 - a)
    return need / gain + (w + m) + cycle   # + first estimate + synchronization


def _head_and_short(p: Params, scheme: str, case: int) -> tuple[float, float]:
    """The later flow's start and the short flow's length, in probing intervals."""
    if SCHEMES[scheme].flexible == "reflex":
        head = ((p.case1_head_cycles * p.cycle_intervals or case1_head_intervals(p))
                if case == 1 else p.case2_head_cycles * p.cycle_intervals)
        short = (p.case1_short_cycles if case == 1 else p.case2_short_cycles) * p.cycle_intervals
        return head, short
    return p.scheme_head_intervals, p.scheme_short_intervals


def _later_start_s(p: Params, scheme: str, case: int) -> float:
    """When the later flow of a case starts, after its agent's start."""
    return _head_and_short(p, scheme, case)[0] * p.t_int_s


def _case(p: Params, scheme: str, case: int) -> tuple[dict[str, JobSpec], float]:
    """Jobs of one case under one scheme, and the expected duration (s)."""
    s = SCHEMES[scheme]
    head, short = _head_and_short(p, scheme, case)
    # The long flow outlasts the short one under every scheme that lets the
    # short one finish: in Case 1 the flexible flow sends at most as much as
    # the regular one while both are active, in Case 2 the regular flow at
    # most 1.2x the flexible one under ReFlex (it may end first under the
    # schemes that starve the flexible flow: the window then ends with it).
    long_iv = head + (1.0 if case == 1 else 1.5) * short + 1
    first, later = ("flex", "regular") if case == 1 else ("regular", "flex")
    counts = {first: messages(p, long_iv), later: messages(p, short)}
    delay = {first: 0.0, later: _later_start_s(p, scheme, case)}
    hosts = {"flex": 1, "regular": 2}
    per_host: dict[int, list[FlowSpec]] = {}
    for k, flow in enumerate(("flex", "regular")):
        snd = hosts[flow]
        extra: SenderOnly = {"start_delay_s": delay[flow]}
        if flow == first:
            # Nothing is measured once the later flow has finished.
            extra["stop_after"] = later
        if flow == "flex":
            extra["dscp"] = DSCP_LOW if s.flexible == "low" else DSCP_HIGH
            if s.flexible == "reflex":
                extra["flexible"] = flexible_spec(p, p.alpha)
        common: FlowShared = {"flow": flow, "msg_bytes": p.msg_bytes, "count": counts[flow],
                              "window": p.window, "seed": 100 + 10 * case + k}
        add_flow(per_host, snd, 3, common, extra)
    # Worst case: the later flow starved until the first one ends, both at line rate.
    expected = (head + (counts["flex"] + counts["regular"]) * p.msg_bytes * 8
                / p.payload_bps / p.t_int_s) * p.t_int_s
    return host_jobs(p, per_host, 2 * expected + 60), expected


def phase_name(scheme: str, case: int, seed: int = 0) -> str:
    """Seed 0 keeps the plain name (``case1-reflex``), so runs made before seeds
    existed still analyse; later seeds are ``case1-reflex-s1``, ..."""
    return f"case{case}-{scheme}" + (f"-s{seed}" if seed else "")


def plan(p: Params) -> RunPlan:
    topo = topology(p)
    phases = []
    for scheme in p.scheme_list:
        for case, seed in ((c, s) for c in (1, 2) for s in p.seed_list):
            jobs, expected = _case(p, scheme, case)
            phases.append(PhasePlan(
                phase_name(scheme, case, seed), jobs,
                commands=(SCHEMES[scheme].switch_line(BOTTLENECK_PORT),),
                timeout_s=2 * expected + 60, watch_ports=(BOTTLENECK_PORT,),
                notes=f"{SCHEMES[scheme].description}; case {case}: "
                      + ("long flexible first, short regular later" if case == 1
                         else "long regular first, short flexible later")
                      + (f" (seed {seed})" if seed else "")))
    return RunPlan(topology=topo, phases=tuple(phases), fidelity=FidelityLimits(),
                   info={"bottleneck_port": BOTTLENECK_PORT, "link_bps": p.link_bps,
                         "slowdown": p.slowdown, "t_int_s": p.t_int_s,
                         "cycle_s": p.t_int_s * p.cycle_intervals,
                         "case1_head_intervals": _head_and_short(p, "reflex", 1)[0],
                         "reference": REFERENCE})


# ---------------------------------------------------------------------------
# analysis


def _params(run_dir: Path) -> Params:
    # Runs saved before seeds existed ran each phase once.
    return saved_params(Params, run_dir, seeds=1)


@dataclass(frozen=True)
class CaseRun:
    """One run of a case: the measured flow's rate (case 1 the regular flow's,
    case 2 the flexible flow's; the other key is left out) and the other
    flow's while both were active, as fractions of the link's payload
    capacity, over ``window_s`` (seconds since the phase's start)."""

    regular_rate_fraction: float | None = field(metadata=OMIT_IF_NONE)
    flexible_rate_fraction: float | None = field(metadata=OMIT_IF_NONE)
    other_rate_fraction: float
    window_s: list[float]
    whole_cycles: int
    flexible_low_s: float | None = field(metadata=OMIT_IF_NONE)   # a ReFlex flow's only
    cnps: int


@dataclass(frozen=True)
class CaseResult:
    """The runs of a case: per figure the mean, with (over several runs)
    sample sd, min and max, and always the list (``_seeds``); the windows as
    they are for one run, listed for several, and the runs for several."""

    regular_rate_fraction: Spread | None = field(metadata=OMIT_IF_NONE)
    flexible_rate_fraction: Spread | None = field(metadata=OMIT_IF_NONE)
    other_rate_fraction: Spread
    window_s: list[float] | list[list[float]]
    whole_cycles: Spread
    flexible_low_s: Spread | None = field(metadata=OMIT_IF_NONE)
    cnps: Spread
    runs: list[CaseRun] | None = field(default=None, metadata=OMIT_IF_NONE)


@dataclass(frozen=True)
class Results(Summary):
    schemes: dict[str, dict[str, CaseResult]]    # scheme -> case1, case2
    # ReFlex's cases again, where the claims read them (when reflex runs)
    case1: CaseResult | None = field(metadata=OMIT_IF_NONE)
    case2: CaseResult | None = field(metadata=OMIT_IF_NONE)
    paper: dict[str, float]
    within_10pct_of_paper: bool | None = field(default=None, metadata=OMIT_IF_NONE)


def case_result(data: PhaseData, p: Params, case: int, whole_cycles: bool,
                later_start_s: float = 0.0) -> CaseRun:
    """The measured flow's rate while both were active, as a fraction of the
    link's payload capacity: from the later flow's first delivered byte to
    the end of either. A later flow that delivered nothing until the first
    one ended (a strict low queue starves it) was active from its start,
    ``later_start_s`` after its agent's start: its rate is 0 over that.
    "Nothing" is what its receiver's samples show: none taken by the first
    flow's last byte counted one (that last byte may arrive between two of
    the later flow's samples, as a flow's final sample is taken at its end)."""
    measured = "regular" if case == 1 else "flex"
    pts = {f: delivered(data, f) for f in ("flex", "regular")}
    later = "regular" if case == 1 else "flex"
    t_a = first_rx_s(pts[later])
    t_b = min(last_rx_s(pts["flex"]), last_rx_s(pts["regular"]))
    if t_b <= t_a or not any(v > 0 for t, v in pts[later] if t <= t_b):  # starved till then
        t_a = data.flow_start(later, "sender")["t_ns"] / 1e9 + later_start_s
    if t_b <= t_a:
        raise ValueError(f"phase {data.name}: the first flow ended before the later one "
                         "started")
    window = (t_a, t_b)
    cycles = 0
    if whole_cycles:
        cyc = p.t_int_s * p.cycle_intervals
        c0, c1 = math.ceil(t_a / cyc) * cyc, math.floor(t_b / cyc) * cyc
        cycles = round((c1 - c0) / cyc)
        if cycles >= 1:
            window = (c0, c1)
    a, b = window
    rate = (value_at(pts[measured], b) - value_at(pts[measured], a)) * 8 / (b - a)
    other = "flex" if measured == "regular" else "regular"
    orate = (value_at(pts[other], b) - value_at(pts[other], a)) * 8 / (b - a)
    t0 = data.start_ns() / 1e9
    fraction = round(rate / p.payload_bps, 4)
    flex = data.flow_end("flex", "sender").get("flexible")
    return CaseRun(
        regular_rate_fraction=fraction if case == 1 else None,
        flexible_rate_fraction=None if case == 1 else fraction,
        other_rate_fraction=round(orate / p.payload_bps, 4),
        window_s=[round(a - t0, 3), round(b - t0, 3)],
        whole_cycles=cycles,
        flexible_low_s=round(flex["low_s"], 3) if flex else None,
        cnps=sum(data.flow_end(f, "sender").get("cnps_rcvd", 0) for f in ("flex", "regular")))


def _spread(vals: list[float], several: bool) -> Spread:
    """One figure of a case's runs: the mean, with sd, min and max over
    ``several`` runs, and the list."""
    if not several:
        return Spread(round(statistics.fmean(vals), 4), seeds=vals)
    return Spread(round(statistics.fmean(vals), 4),
                  sd=round(statistics.stdev(vals), 4) if len(vals) > 1 else 0.0,
                  min=min(vals), max=max(vals), seeds=vals)


def _spread_of(vals: list[float | None], several: bool) -> Spread | None:
    """:func:`_spread` of a figure the first run has (None if it has not)
    over the runs that have it."""
    if vals[0] is None:
        return None
    return _spread([v for v in vals if v is not None], several)


def aggregate(runs: list[CaseRun]) -> CaseResult:
    """The runs of one case: per figure the mean, with (over several runs)
    sample sd, min and max, and always the list (``_seeds``); the windows as
    they are for one run, listed for several."""
    several = len(runs) > 1
    return CaseResult(
        regular_rate_fraction=_spread_of([r.regular_rate_fraction for r in runs], several),
        flexible_rate_fraction=_spread_of([r.flexible_rate_fraction for r in runs], several),
        other_rate_fraction=_spread([r.other_rate_fraction for r in runs], several),
        window_s=[r.window_s for r in runs] if several else runs[0].window_s,
        whole_cycles=_spread([r.whole_cycles for r in runs], several),
        flexible_low_s=_spread_of([r.flexible_low_s for r in runs], several),
        cnps=_spread([r.cnps for r in runs], several),
        runs=runs if several else None)


def analyze(run_dir: Path) -> Results:
    p = _params(run_dir)
    schemes: dict[str, dict[str, CaseResult]] = {}
    for scheme in p.scheme_list:
        schemes[scheme] = {f"case{case}": aggregate([
            case_result(load_phase(run_dir, phase_name(scheme, case, seed)), p, case,
                        whole_cycles=scheme == "reflex",
                        later_start_s=_later_start_s(p, scheme, case))
            for seed in p.seed_list]) for case in (1, 2)}
    reflex = schemes.get("reflex")
    within = None
    if reflex is not None:
        got = {"case1.regular_rate_fraction": reflex["case1"].regular_rate_fraction,
               "case2.flexible_rate_fraction": reflex["case2"].flexible_rate_fraction}
        within = all(v is not None and v.mean is not None
                     and abs(v.mean - REFERENCE[k]) <= ACCEPT_REL * REFERENCE[k]
                     for k, v in got.items())
    return Results(schemes=schemes,
                   case1=reflex["case1"] if reflex else None,
                   case2=reflex["case2"] if reflex else None,
                   paper=dict(REFERENCE), within_10pct_of_paper=within)


def plot(run_dir: Path) -> list[Path]:
    import matplotlib.pyplot as plt

    from testbed.plotting import save_figure

    p = _params(run_dir)
    outs = phase_timelines(
        p, run_dir, ((phase_name(scheme, case, seed), f"{NAME} - case {case}, "
                      f"{SCHEMES[scheme].description} ({p.rate_label})")
                     for scheme in p.scheme_list for case in (1, 2) for seed in p.seed_list))
    summary = Path(run_dir) / "summary.json"
    res = json.loads(summary.read_text()) if summary.exists() else {}
    if "schemes" not in res:
        res = results_json(analyze(run_dir))
    names = [s for s in p.scheme_list if s in res["schemes"]]
    fig, axes = plt.subplots(1, 2, figsize=(11, 4))
    for ax, case, key in ((axes[0], 1, "regular_rate_fraction"),
                          (axes[1], 2, "flexible_rate_fraction")):
        cells = [res["schemes"][s][f"case{case}"] for s in names]
        got = [c[key] * p.nic_gbps for c in cells]
        err = [[(c[key] - c.get(f"{key}_min", c[key])) * p.nic_gbps for c in cells],
               [(c.get(f"{key}_max", c[key]) - c[key]) * p.nic_gbps for c in cells]]
        ref = [REFERENCE[(f"case{case}.{key}" if s == "reflex"
                          else f"schemes.{s}.case{case}.{key}")] * p.nic_gbps for s in names]
        x = range(len(names))
        ax.bar([i - 0.2 for i in x], got, 0.4, yerr=err, capsize=3,
               label=f"measured ({p.seeds} run(s), min-max)")
        ax.bar([i + 0.2 for i in x], ref, 0.4, label="paper", alpha=0.6)
        ax.set_xticks(list(x), names, rotation=30, ha="right")
        ax.set_ylabel(f"Gb/s (modelled {p.modelled_link} link)")
        ax.set_title(f"case {case}: {'regular' if case == 1 else 'flexible'} flow rate "
                     "while both are active")
        ax.legend()
    out = save_figure(fig, Path(run_dir) / "plots" / "rates.png")
    outs.append(out)
    return outs
