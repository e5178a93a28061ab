"""ReFlex under Poisson workloads (§6.5, workloads 1 to 3): FCT speed-ups of regular and flexible flows for alpha and r sweeps.

The ReFlex paper's §6.5: a ToR with 20 servers on 10 Gb/s links; flows
between random pairs arrive as Poisson processes at 40% average
utilization, half of it from regular flows, half from flexible flows of
250 MB (8 probing cycles of line-rate volume). Each scheme runs the same
arrivals; a flow's speed-up is its FCT without prioritization over its FCT
under the scheme, for the mean and the 99th percentile of each class. The
paper sweeps ReFlex's alpha (r = 1) and r (alpha = 1) and compares with no
prioritization and weighted 9:1.

- Workload 1 (Fig. 13): the regular flows are as large and arrive as
  often. 9:1 speeds regular flows up (mean 1.35x, p99 1.64x) and slows
  flexible ones (0.80x, 0.67x); ReFlex at alpha = 0.8 gives less on both
  sides (regular 1.04x / 1.04x, flexible 0.91x / 0.88x). Per flow (Fig.
  14), against the same flow without prioritization: 24% of the regular
  flows have a worse FCT under 9:1, 45% under ReFlex; 32.5% of the flexible
  flows are slower than 0.8x under 9:1, 14.5% under ReFlex.
- Workload 2 (Fig. 15): many short regular flows, 100 kB at 5000 flows/s,
  "similarly ... around 40%", with the flexible flows of workload 1. 9:1
  speeds the short flows up a lot (mean 2.10x, p99 6.82x) and even the
  flexible ones a little (1.04x, 1.04x): separating short flows from large
  ones shortens both's queues. ReFlex at alpha = 0.8: regular 1.19x /
  1.25x, flexible 0.99x / 0.95x.
- Workload 3 (Fig. 16, 17): regular flows of the web-search sizes of DCTCP
  and pFabric (WEBSEARCH_CDF, mean 1.71 MB) at 20% utilization, with the
  flexible flows of workload 1; statistics per size class, tiny (0, 10 kB],
  small (10, 100 kB], medium (100 kB, 10 MB], large (10 MB, inf). p99
  speed-ups at alpha = 0.8 1.00, 1.11, 1.33, 1.44x, under 9:1 1.07, 1.78,
  2.02, 2.53x; 1.7% of the flexible flows slower than 0.8x under ReFlex,
  2.2% under 9:1.

Setup: the network of reflex-cases (experiments/_reflex_net.py: 10 Gb/s
modelled on ``link_mbps`` links, DRR 90/10, RED hard threshold 65 of 466
packets, T_int = 5 ms x slowdown, RoCEv2/DCQCN instead of DCTCP). The
testbed models one of the ToR's downlinks: with random pairs every downlink
of the paper's ToR sees Poisson arrivals at the 40% load, and the
downlink's queues are where regular and flexible flows meet. ``senders``
hosts (h1 .. h<senders>) send to one receiver; flows go to the senders in
turn, so a host's NIC carries one flow at a time unless more flows overlap
than there are senders (``sender_overlap_s`` records how long that
happened: the paper's NICs then share their rate, here each QP paces at its
own DCQCN rate).

Workload 2's load: the testbed keeps the paper's stated utilization (40%,
half from regular flows, as in workload 1) and the 100 kB size, so a
downlink sees 100 kB flows at 0.2 x 10 Gb/s / 800 kb = 2500 flows/s of
modelled time (slowdown times fewer on the testbed's clock). The paper's
5000 flows/s of 100 kB carry 4 Gb/s: 40% of one 10 Gb/s link, 2% of the
ToR's twenty; its own flexible rate (20 flows/s of 250 MB, 40 Gb/s) is 20%
of the twenty links, so the stated 40% and the stated rate do not both hold
for one ToR. Regular flows are messages (``w2_msg_bytes``: 100 kB rounded
up to whole packets) over ``w2_qps`` long-lived connections per sender, as
RDMA applications reuse connections: a flow is posted at its arrival on a
free connection (idle longest) and waits only when every connection of its
sender is busy (``w2.<scheme>.pool_waited`` counts those; with 4
connections per sender at this load it is rare). Its FCT runs from its
arrival to the receiver's completion, as the paper's from a flow's start to
its last byte. One QP per flow would need hundreds to thousands of
connections per phase (set up before the phase starts); the flexible flows
are the same QPs, budgets and DSCP switching as in workload 1.

Workload 3's load: the paper's 2921 flows/s of 1.7 MB carry 40 Gb/s,
the stated 20% of its ToR's twenty links, not of one. The testbed keeps the
20% on its one downlink (``w3_rates``: 138 flows/s of the modelled 10 Gb/s,
the paper's rate over 20 but for the headers). Each flow's size is drawn
from the run's seeded RNG; the flows are messages of their own sizes
(``FlowSpec.msg_sizes``) on the same connection pools as workload 2's,
``w2_flexible`` and ``w2_qps`` serving both workloads. ``share_below_080``:
the share of flexible flows whose FCT against the same flow without
prioritization is a speed-up below 0.8.

Differences from the paper, besides DCQCN: the flows' size keeps its ratio
to the probing cycle only in the full profile's direction (``flexible_cycles``:
the paper's 8 cycles would make a run of tens of flows hours long; full 2,
quick 0.1, half an interval: flows that short end before ReFlex has a
fair-share estimate, so the quick profile shows the workload and the fixed
schemes, and ReFlex there stays near no prioritization). The quick profile's
workload 3 has a handful of web-search flows (seed 0: 8, no tiny one).

The paper profile (``--profile paper``, virtual time) runs §6.5's own
setup: 19 senders and the receiver (the ToR's 20 servers) at 10 Gb/s, 250
MB flows (8 cycles), both classes arriving over 16 s, of which the flows
arriving in the 10 s after the first count (``run_warmup_ms``,
``run_measure_ms``, ``run_cooldown_ms``; every flow runs to its end), three
seeds, phantom payloads, samples every 1 ms. Of the paper's alpha and r
sweeps it runs ReFlex at alpha 0.8 beside the two baselines
(``Params.scaled_down_from``), and in workload 1 the same ReFlex at D_exploit
1, 3 and 5 (Fig. 8, ``w1_exploits``; the flows keep their 250 MB).

Results (summary.json), per scheme under ``w1.<scheme>``,
``w2.<scheme>`` and ``w3.<scheme>``: ``regular`` and ``flexible`` each with ``n`` (flows),
``mean_fct_s``, ``p99_fct_s`` (testbed seconds; the p99 of a few flows is
their largest), and, except for ``none``, ``mean_speedup`` and
``p99_speedup`` (the scheme's FCT against no prioritization's for the same
arrivals); ``delivered_fraction`` of the flexible bytes. Workload 2 adds
``pool_waited`` (regular flows that waited for a connection) and
``post_late_max_s`` (the largest delay of a sender posting a flow that had a
free connection: the agent's own lateness). Workload 3 adds the classes
``tiny``, ``small``, ``medium`` and ``large`` (``n`` 0 and no figures when no
flow fell in one) and ``flexible.share_below_080``. Workload 1 adds, per
flow against the same flow without prioritization (Fig. 14),
``flexible.share_below_080`` and ``regular.share_below_100`` (the share of
the measured regular flows with a speed-up below 1: a worse FCT; a flow
with the same FCT is not counted), and each run's ``fct_s`` holds every
flow's FCT by name (``plots/w1_speedup_cdf.png``: their CDFs). With
``w1_exploits`` (Fig. 8: "The longer the exploit phase, the better higher
percentiles perform"), ``w1_exploit``: per D_exploit the regular flows'
mean and p99 FCT under ReFlex at alpha 0.8 (``w1_exploit_alpha``; schemes
``reflex-a080-e<D>`` beside ``reflex-a080`` at the network's own), and per
seed their change
from the shortest exploit phase to the longest, ``regular_p99_change`` and
``regular_mean_change`` (``plots/w1_exploit.png``). Schemes: ``none``,
``weighted-9:1``, ``reflex-a080`` (alpha 0.8, r 1), ``reflex-r050`` (alpha
1, r 0.5), ... With several seeds (each a different draw of arrivals)
every figure is the mean over seeds, with ``_sd``, ``_min``, ``_max``,
``_n`` and ``_seeds``. ``paper`` holds the paper's values (REFERENCE);
``measure_window_s`` the measured arrivals' window (None: every flow counts).
"""

from __future__ import annotations

import dataclasses
import math
import random
import statistics
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal, TypedDict

from experiments._reflex_net import (
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
from hosts.reflex.schemes import DSCP_HIGH, DSCP_LOW, SCHEMES
from testbed.claims import Claim
from testbed.experiment import FidelityLimits, PhasePlan, RunPlan, ScaledDown, param
from testbed.summary import INLINE, OMIT_IF_NONE, Spread, Summary, json_key
from testbed.timeline import PhaseData, load_phase

NAME = "reflex-workload"
# rxe: flexible flows' DSCP written by the host's DCQCN shim (hosts.roce.rxe.dcqcn_shim,
# set_dscp); workload 2's connection pools register every connection with it.
HOST_PROVIDERS = ("udp", "rxe")
HEADLINE = ("w1.weighted-9:1.regular.mean_speedup", "w1.weighted-9:1.flexible.mean_speedup",
            "w1.reflex-a080.regular.mean_speedup", "w1.reflex-a080.flexible.mean_speedup",
            "w2.weighted-9:1.regular.mean_speedup", "w2.reflex-a080.regular.mean_speedup",
            "w3.weighted-9:1.large.p99_speedup", "w3.reflex-a080.large.p99_speedup")

# The paper's values (§6.5, Fig. 13 for workload 1, Fig. 15 for workload 2):
# speed-ups against no prioritization, FCT(none) / FCT(scheme), of the mean
# and the 99th percentile.
PAPER_VALUES: dict[str, float] = {
    "w1.weighted-9:1.regular.mean_speedup": 1.35,
    "w1.weighted-9:1.regular.p99_speedup": 1.64,
    "w1.weighted-9:1.flexible.mean_speedup": 0.80,
    "w1.weighted-9:1.flexible.p99_speedup": 0.67,
    # alpha = 0.8: regular 441 ms (mean) and 1178 ms (p99) against 460 and 1215
    # without prioritization; flexible 513 and 1390 ms against 465 and 1227.
    "w1.reflex-a080.regular.mean_speedup": 1.04,
    "w1.reflex-a080.regular.p99_speedup": 1.04,
    "w1.reflex-a080.flexible.mean_speedup": 0.91,
    "w1.reflex-a080.flexible.p99_speedup": 0.88,
    # Workload 2: 100 kB regular flows. "Even for the flexible flows a
    # speed-up is achieved in both the mean and 99th of around 1.04x".
    "w2.weighted-9:1.regular.mean_speedup": 2.10,
    "w2.weighted-9:1.regular.p99_speedup": 6.82,
    "w2.weighted-9:1.flexible.mean_speedup": 1.04,
    "w2.weighted-9:1.flexible.p99_speedup": 1.04,
    "w2.reflex-a080.regular.mean_speedup": 1.19,
    "w2.reflex-a080.regular.p99_speedup": 1.25,
    "w2.reflex-a080.flexible.mean_speedup": 0.99,
    "w2.reflex-a080.flexible.p99_speedup": 0.95,
    # Workload 3 (Fig. 16 and 17, stated in the text for alpha = 0.8): the
    # p99 FCT speed-up of the regular tiny, small, medium and large flows,
    # and the share of flexible flows with a speed-up below 0.8x.
    "w3.reflex-a080.tiny.p99_speedup": 1.00,
    "w3.reflex-a080.small.p99_speedup": 1.11,
    "w3.reflex-a080.medium.p99_speedup": 1.33,
    "w3.reflex-a080.large.p99_speedup": 1.44,
    "w3.weighted-9:1.tiny.p99_speedup": 1.07,
    "w3.weighted-9:1.small.p99_speedup": 1.78,
    "w3.weighted-9:1.medium.p99_speedup": 2.02,
    "w3.weighted-9:1.large.p99_speedup": 2.53,
    "w3.reflex-a080.flexible.share_below_080": 0.017,
    "w3.weighted-9:1.flexible.share_below_080": 0.022,
    # Workload 1 per flow (Fig. 14, the speed-up of each flow against the same
    # flow without prioritization): the regular flows with a worse FCT,
    # "around 24%" under 9:1 and "45%" under ReFlex at alpha 0.8 (Fig.
    # 14a), and the flexible flows with a speed-up below 0.8, "around 14.5%"
    # under ReFlex and 32.5% under 9:1 (Fig. 14b).
    "w1.weighted-9:1.regular.share_below_100": 0.24,
    "w1.reflex-a080.regular.share_below_100": 0.45,
    "w1.weighted-9:1.flexible.share_below_080": 0.325,
    "w1.reflex-a080.flexible.share_below_080": 0.145,
}
# The paper's values and, with no value (None), the effects it states only in
# words: Fig. 8's "The longer the exploit phase, the better higher
# percentiles perform" (its claim judges the direction alone).
REFERENCE: dict[str, float | None] = {**PAPER_VALUES, "w1_exploit.regular_p99_change": None}
# Workload 2 as the paper states it (§6.5): the regular flows' size and
# arrival rate on its ToR (see the module docstring for the load the testbed keeps).
PAPER_W2 = {"regular_bytes": 100_000, "regular_flows_per_s": 5000}


class PaperWorkload(TypedDict):
    servers: int
    flexible_mb: float
    load: float
    flexible_share: float
    run_s: tuple[float, float, float]
    seeds: int
    alphas: tuple[float, ...]
    rs: tuple[float, ...]
    baselines: tuple[str, ...]


# The paper's workload setup (§6.5), in its units; Params.paper() converts
# it (the links, T_int and the 1:1:3 cycle are _reflex_net.PAPER_NETWORK).
PAPER_WORKLOAD: PaperWorkload = {
    "servers": 20,              # "a single ToR network with 20 servers"
    "flexible_mb": 250,         # "The large flexible flows are set to 250 MB"
    "load": 0.4,                # "we aim for 40% average utilization"
    "flexible_share": 0.5,      # "Half of the target utilization ... from regular flows"
    "run_s": (1, 10, 5),        # "run for 16 s (1 s warm-up, 10 s measure, 5 s cool-down)"
    "seeds": 3,                 # "repeated three times with different random seeds"
    # "alpha in [0, 0.1, ..., 1]" with r = 1, "r in [0, 0.1, ..., 1]" with alpha = 1
    "alphas": tuple(i / 10 for i in range(11)),
    "rs": tuple(i / 10 for i in range(11)),
    "baselines": ("none", "weighted-9:1"),
}
# Fig. 8's D_exploit values in the paper profile. The paper does not state
# the points of its sweep; these are the shortest exploit phase the cycle
# allows, its default 3 and as much longer again.
PAPER_EXPLOITS = (1, 3, 5)
# What the paper profile runs of the sweeps (Params.scaled_down_from says why).
PAPER_PROFILE_ALPHAS = (0.8,)
PAPER_PROFILE_RS: tuple[float, ...] = ()
# A flow's rate and receive samples in the paper profile: every 1 ms, a fifth
# of T_int, not the other ReFlex paper profiles' 100 us: a 16 s phase's
# samples of every flow end (workload 2's connection pools sample all the
# run) would be ten times as many events, all read into memory by the analysis.
PAPER_PROFILE_SAMPLE_INTERVAL_US = 1000
# Wall time of one phase of the paper profile on the sim engine under PyPy
# (docs/experiments/analysis/reflex-workload.md, "At the paper's scale").
PAPER_PHASE_WALL_MIN = 3

# 20 hosts on the switch: the paper's ToR of 20 servers.
MAX_SENDERS = 19

# The paper's FCTs without prioritization (ms of the 10 Gb/s network), for the
# record: they depend on its 250 MB flows, which only the paper profile runs.
REFERENCE_FCT_MS = {"none.regular.mean": 460, "none.flexible.mean": 465,
                    "none.regular.p99": 1215, "none.flexible.p99": 1227}

# The paper's regular size classes (after HULL), upper bounds in bytes, inclusive.
SIZE_CLASSES: tuple[tuple[str, float], ...] = (
    ("tiny", 10_000), ("small", 100_000), ("medium", 10_000_000), ("large", math.inf))
# A flexible flow "slowed down" in the paper's count: speed-up below this.
SLOW_SPEEDUP = 0.8
# A regular flow with "a worse FCT" (Fig. 14a): speed-up below this.
WORSE_SPEEDUP = 1.0
# Fig. 8's exploit sweep runs ReFlex at this alpha (r = 1) unless told
# otherwise (w1_exploit_alpha): the point the paper states its workload
# figures for.
EXPLOIT_ALPHA = 0.8
# A scheme of the sweep: ReFlex at its alpha with its own D_exploit.
EXPLOIT_TAG = "-e"


# What the report checks against Fig. 13 (workload 1) and Fig. 15 (workload
# 2): the direction of every speed-up (above or below 1) and its size within
# 10% of the paper's.
CLAIMS = tuple(
    Claim(fig, f"workload {w}, {label}: {kind} flows' {stat} FCT speed-up "
          f"{PAPER_VALUES[key]:.2f}x", key=key, paper=PAPER_VALUES[key],
          per_seed=f"{key}_seeds", direction="above" if PAPER_VALUES[key] > 1 else "below",
          versus=1.0, rel_tol=0.10, plots=(plot,))
    for w, fig, plot in ((1, "Fig. 13", "speedups.png"), (2, "Fig. 15", "w2_speedups.png"))
    for scheme, label in (("weighted-9:1", "weighted 9:1"), ("reflex-a080", "ReFlex alpha 0.8"))
    for kind in ("regular", "flexible") for stat in ("mean", "p99")
    for key in [f"w{w}.{scheme}.{kind}.{stat}_speedup"])
# Workload 3 (Fig. 16, 17): the same 10% on the paper's values; a speed-up's
# direction against 1 where the paper's differs from 1 (ReFlex's tiny flows'
# 1.00 is no effect: its size alone is judged), the shares' size alone.
CLAIMS += tuple(
    Claim("Fig. 16", f"workload 3, {label}: regular {cls} flows' p99 FCT speed-up "
          f"{PAPER_VALUES[key]:.2f}x", key=key, paper=PAPER_VALUES[key], per_seed=f"{key}_seeds",
          direction=None if PAPER_VALUES[key] == 1 else
          ("above" if PAPER_VALUES[key] > 1 else "below"),
          versus=1.0, rel_tol=0.10, plots=("w3_speedups.png",))
    for scheme, label in (("weighted-9:1", "weighted 9:1"), ("reflex-a080", "ReFlex alpha 0.8"))
    for cls, _top in SIZE_CLASSES
    for key in [f"w3.{scheme}.{cls}.p99_speedup"])
CLAIMS += tuple(
    Claim("Fig. 17", f"workload 3, {label}: {PAPER_VALUES[key] * 100:.1f}% of flexible flows "
          f"with a speed-up below {SLOW_SPEEDUP}x", key=key, paper=PAPER_VALUES[key],
          per_seed=f"{key}_seeds", rel_tol=0.10, plots=("w3_speedups.png",))
    for scheme, label in (("weighted-9:1", "weighted 9:1"), ("reflex-a080", "ReFlex alpha 0.8"))
    for key in [f"w3.{scheme}.flexible.share_below_080"])
# Fig. 8 (§6.4): "The longer the exploit phase, the better higher
# percentiles perform", with no value: the direction alone, the regular
# flows' p99 FCT shorter at the longest D_exploit run than at the shortest.
CLAIMS += (Claim("Fig. 8", f"workload 1, ReFlex alpha {EXPLOIT_ALPHA:g}: the longer the "
                 "exploit phase, the shorter the regular flows' p99 FCT",
                 key="w1_exploit.regular_p99_change", paper=None, direction="below",
                 versus=0.0, per_seed="w1_exploit.regular_p99_change_seeds", percent=True,
                 plots=("w1_exploit.png",)),)
# Workload 1 per flow (Fig. 14): the shares' size alone, within the same 10%
# of the paper's values as Fig. 17's shares (a share has no side of 1 to judge).
CLAIMS += tuple(
    Claim("Fig. 14", f"workload 1, {label}: {PAPER_VALUES[key] * 100:.1f}% of {kind} flows "
          f"{what}", key=key, paper=PAPER_VALUES[key],
          per_seed=f"{key}_seeds", rel_tol=0.10, plots=("w1_speedup_cdf.png",))
    for scheme, label in (("weighted-9:1", "weighted 9:1"), ("reflex-a080", "ReFlex alpha 0.8"))
    for kind, stat, what in (
        ("regular", "share_below_100", "with a worse FCT than without prioritization "
                                       f"(a speed-up below {WORSE_SPEEDUP:g}x)"),
        ("flexible", "share_below_080", f"with a speed-up below {SLOW_SPEEDUP}x"))
    for key in [f"w1.{scheme}.{kind}.{stat}"])
# The report lists the figures in the paper's order.
CLAIMS = tuple(sorted(CLAIMS, key=lambda c: int(c.figure.split()[-1])))


@dataclass(frozen=True)
class Params(ReflexNetwork, SeededRuns):
    # The full profile runs on the quick profiles' clock too (the modelled
    # network is the same): at 20 Mb/s its 14 phases per seed pair took about
    # 6 hours; at 60 Mb/s about 2.6, and a run of its claims' schemes with
    # both seeds was faithful (docs/experiments/analysis/reflex-workload.md).
    link_mbps: float = QUICK_LINK_MBPS
    senders: int = param(4, "sending hosts; one more host receives", "hosts")
    load: float = param(0.4, "average utilization of the receiver's downlink (paper: 0.4)")
    flexible_share: float = param(0.5, "part of the load (and of workload 1's flows) from "
                                       "flexible flows (paper: half)")
    # The paper's 250 MB on 10 Gb/s is 8 cycles of 25 ms.
    flexible_cycles: float = param(2.0, "each flow's volume in probing cycles at line rate "
                                        "(workload 1's regular flows are as large)", "cycles")
    flows: int = param(24, "workload 1: flow arrivals per draw", "flows")
    alphas: str = param("0.5,0.8,1", "ReFlex schemes with r = 1: their alphas, "
                        "comma-separated")
    rs: str = param("0.5,0.8", "ReFlex schemes with alpha = 1: their reliability factors r, "
                    "comma-separated (empty: none)")
    baselines: str = param("none,weighted-9:1", "fixed schemes run, comma-separated (none is "
                           "the speed-ups' reference)")
    seeds: int = param(2, "draws of the arrivals; every scheme runs each draw", "draws")
    first_seed: int = param(0, "the first draw's seed (seeds first_seed .. first_seed + "
                               "seeds - 1)")
    workloads: str = param("1,2,3", "which of the paper's workloads run, comma-separated")
    # Fig. 8 (§6.4): the regular flows' FCT as the exploit phase lengthens.
    w1_exploits: str = param("", "workload 1: D_exploit values ReFlex at alpha "
                                 "w1_exploit_alpha also runs at (Fig. 8), comma-separated; "
                                 "the flows keep their size (empty: none)", "T_int")
    w1_exploit_alpha: float = param(EXPLOIT_ALPHA, "workload 1: the alpha (r = 1) of the "
                                                   "exploit sweep's ReFlex (Fig. 8)")
    # Workload 2's regular flows are messages over w2_qps connections per
    # sender; a draw has w2_flexible flexible arrivals and the regular ones
    # until the next flexible arrival would come.
    w2_regular_bytes: int = param(100_000, "workload 2: each regular flow's size (the paper's "
                                           "100 kB, rounded up to whole packets)", "bytes")
    w2_flexible: int = param(4, "workloads 2 and 3: flexible flow arrivals per draw", "flows")
    w2_qps: int = param(4, "workloads 2 and 3: connections per sender the regular flows are "
                           "posted on", "QPs")
    # The paper's run (§6.5): arrivals over a warm-up, a measured window and a
    # cool-down, in ms of the modelled network; every flow runs to its end.
    run_measure_ms: float = param(0.0, "> 0: flows arrive over run_warmup_ms + run_measure_ms "
                                       "+ run_cooldown_ms and those arriving in the measure "
                                       "window count (flows and w2_flexible unused); 0: a draw "
                                       "is flows (workload 1) or w2_flexible (workload 2) "
                                       "arrivals, all counted", "ms")
    run_warmup_ms: float = param(0.0, "with run_measure_ms: arrivals before the measured ones",
                                 "ms")
    run_cooldown_ms: float = param(0.0, "with run_measure_ms: arrivals after the measured ones",
                                   "ms")

    @classmethod
    def quick(cls) -> Params:
        # A run that shows the workloads and the fixed schemes in about two
        # minutes: twelve flows of half an interval each (too short for ReFlex
        # to have a fair-share estimate, see the module docstring), and for
        # workload 2 five such flexible flows among ~150 100 kB flows (seed
        # 0: 152 over 16.9 s).
        return cls(link_mbps=QUICK_LINK_MBPS, senders=3, flexible_cycles=0.1, flows=12,
                   alphas="0.8", rs="", seeds=1, w2_flexible=5)

    @classmethod
    def paper(cls) -> Params:
        """§6.5 at the paper's scale: the downlink of one of its ToR's 20
        servers (19 senders, one receiver) at 10 Gb/s (slowdown 1), T_int 5 ms
        at 1:1:3, 250 MB flows (8 cycles of line-rate volume) arriving as
        Poisson processes at 40% load, half of it flexible, over 16 s (1 s
        warm-up, 10 s measured, 5 s cool-down), three seeds, phantom
        payloads, samples every PAPER_PROFILE_SAMPLE_INTERVAL_US. The alpha
        and r sweeps are cut to alpha 0.8 (scaled_down_from); workload 1
        also runs it at D_exploit PAPER_EXPLOITS (Fig. 8)."""
        w = PAPER_WORKLOAD
        warmup_s, measure_s, cooldown_s = w["run_s"]
        return cls(**paper_network(sample_interval_us=PAPER_PROFILE_SAMPLE_INTERVAL_US),
                   senders=w["servers"] - 1, load=w["load"],
                   flexible_share=w["flexible_share"],
                   flexible_cycles=paper_cycles(w["flexible_mb"] * 8 / 1000),
                   alphas=_csv(PAPER_PROFILE_ALPHAS), rs=_csv(PAPER_PROFILE_RS),
                   baselines=",".join(w["baselines"]), seeds=w["seeds"],
                   run_warmup_ms=warmup_s * 1000.0, run_measure_ms=measure_s * 1000.0,
                   run_cooldown_ms=cooldown_s * 1000.0, payload="phantom",
                   w1_exploits=_csv(PAPER_EXPLOITS))

    @classmethod
    def scaled_down_from(cls) -> dict[str, ScaledDown]:
        w = PAPER_WORKLOAD
        n_paper = len(w["baselines"]) + len(w["alphas"]) + len(w["rs"])
        n_run = len(w["baselines"]) + len(PAPER_PROFILE_ALPHAS) + len(PAPER_PROFILE_RS)
        phases = 3 * w["seeds"]       # the three workloads
        # Fig. 8: workload 1 at the other D_exploit values (3 is alpha 0.8's own)
        exploits = (len(PAPER_EXPLOITS) - 1) * w["seeds"]
        why = (f"one phase (a scheme on one workload and seed) takes about "
               f"{PAPER_PHASE_WALL_MIN} min here: the paper's {n_paper} schemes are "
               f"{n_paper * phases} phases, about {n_paper * phases * PAPER_PHASE_WALL_MIN / 60:.0f}"
               f" h; the profile runs {n_run} ({n_run * phases} phases, plus {exploits} of "
               "Fig. 8's D_exploit sweep), the baselines and alpha 0.8, the one ReFlex point "
               "the paper states figures for")
        return {"alphas": ScaledDown(_csv(w["alphas"]), why),
                "rs": ScaledDown(_csv(w["rs"]), why)}

    def __post_init__(self) -> None:
        super().__post_init__()
        if not 1 <= self.senders <= MAX_SENDERS:
            raise ValueError(f"senders must be 1..{MAX_SENDERS} (the paper's ToR has 20 "
                             "servers: 19 send to one)")
        if not 0 < self.load < 1 or not 0 < self.flexible_share < 1:
            raise ValueError("load and flexible_share must be in (0, 1)")
        if self.flexible_cycles <= 0:
            raise ValueError("flexible_cycles must be positive")
        if self.flows < 2 or not 1 <= round(self.flows * self.flexible_share) < self.flows:
            raise ValueError("flows must give at least one flow of each class")
        try:
            alphas, rs = self.alpha_list, self.r_list
        except ValueError:
            raise ValueError(f"alphas {self.alphas!r} and rs {self.rs!r} must be "
                             "comma-separated numbers") from None
        if any(not 0 <= a <= 1 for a in alphas) or any(not 0 <= r <= 1 for r in rs):
            raise ValueError("alphas and rs must be in [0, 1]")
        base = self.baseline_list
        if "none" not in base or set(base) - {"none", "absolute", "weighted-9:1",
                                              "weighted-2:1", "weighted-10:9"}:
            raise ValueError("baselines: 'none' (the speed-ups' reference) and any of "
                             "absolute, weighted-9:1, weighted-2:1, weighted-10:9")
        if self.seeds < 1 or self.first_seed < 0:
            raise ValueError("seeds must be >= 1 and first_seed >= 0")
        try:
            wl = self.workload_list
        except ValueError:
            wl = []
        if not wl or set(wl) - {1, 2, 3} or len(set(wl)) != len(wl):
            raise ValueError(f"workloads {self.workloads!r}: a comma-separated subset of 1,2,3")
        if self.w2_regular_bytes < 1 or self.w2_flexible < 1 or not 1 <= self.w2_qps <= 64:
            raise ValueError("w2_regular_bytes and w2_flexible must be >= 1, w2_qps 1..64")
        if self.run_measure_ms < 0 or self.run_warmup_ms < 0 or self.run_cooldown_ms < 0:
            raise ValueError("run_measure_ms, run_warmup_ms and run_cooldown_ms must be >= 0")
        try:
            ex = self.exploit_list
        except ValueError:
            ex = [0]
        if ex and (len(ex) < 2 or len(set(ex)) != len(ex) or min(ex) < 1
                   or 1 not in wl or not 0 <= self.w1_exploit_alpha <= 1):
            raise ValueError(f"w1_exploits {self.w1_exploits!r}: two or more distinct whole "
                             "numbers >= 1, with workload 1 and w1_exploit_alpha in [0, 1]")
        if not self.run_measure_ms and (self.run_warmup_ms or self.run_cooldown_ms):
            raise ValueError("run_warmup_ms and run_cooldown_ms need run_measure_ms > 0 (the "
                             "measured window)")

    @property
    def alpha_list(self) -> list[float]:
        return [float(v) for v in self.alphas.split(",") if v.strip()]

    @property
    def r_list(self) -> list[float]:
        return [float(v) for v in self.rs.split(",") if v.strip()]

    @property
    def baseline_list(self) -> list[str]:
        return [s.strip() for s in self.baselines.split(",") if s.strip()]


    @property
    def exploit_list(self) -> list[int]:
        """``w1_exploits`` as numbers, in increasing order."""
        return sorted(int(v) for v in self.w1_exploits.split(",") if v.strip())

    @property
    def receiver(self) -> int:
        return self.senders + 1

    @property
    def workload_list(self) -> list[int]:
        return [int(v) for v in self.workloads.split(",") if v.strip()]

    @property
    def w2_msg_bytes(self) -> int:
        """A workload-2 regular flow: the paper's size in whole packets."""
        return -(-self.w2_regular_bytes // self.path_mtu) * self.path_mtu

    @property
    def flexible_line_s(self) -> float:
        """A flexible flow's time at line rate (testbed seconds)."""
        return self.flexible_cycles * self.cycle_s

    @property
    def measure_window_s(self) -> tuple[float, float] | None:
        """(start, end) of the measured arrivals after a phase's start
        (testbed seconds), or None when a draw is a count of arrivals."""
        if not self.run_measure_ms:
            return None
        start = self.run_warmup_ms * 1e-3 * self.slowdown
        return start, start + self.run_measure_ms * 1e-3 * self.slowdown

    @property
    def run_s(self) -> float:
        """How long flows arrive with a measure window (testbed seconds)."""
        return (self.run_warmup_ms + self.run_measure_ms + self.run_cooldown_ms) \
            * 1e-3 * self.slowdown


def _csv(xs: tuple[float, ...]) -> str:
    return ",".join(f"{x:g}" for x in xs)


def _pct(v: float) -> str:
    return f"{round(v * 100):03d}"


def scheme_list(p: Params) -> list[str]:
    """Baselines, then ReFlex per alpha (r = 1), then per r (alpha = 1)."""
    return (p.baseline_list + [f"reflex-a{_pct(a)}" for a in p.alpha_list]
            + [f"reflex-r{_pct(r)}" for r in p.r_list])


def exploit_sweep(p: Params) -> list[tuple[int, str]]:
    """Fig. 8's points: (D_exploit, scheme) per ``w1_exploits`` value, ReFlex
    at ``w1_exploit_alpha``; at the network's own D_exploit the scheme as
    scheme_list names it."""
    alpha = f"reflex-a{_pct(p.w1_exploit_alpha)}"
    own = alpha in scheme_list(p)
    return [(e, alpha if e == p.exploit and own else f"{alpha}{EXPLOIT_TAG}{e}")
            for e in p.exploit_list]


def w1_scheme_list(p: Params) -> list[str]:
    """Workload 1's schemes: scheme_list, then the exploit sweep's others."""
    base = scheme_list(p)
    return base + [s for _, s in exploit_sweep(p) if s not in base]


def scheme_exploit(scheme: str) -> int | None:
    """The D_exploit a sweep's scheme name sets (None: the network's)."""
    head, sep, tail = scheme.rpartition(EXPLOIT_TAG)
    return int(tail) if sep and head.startswith("reflex-") and tail.isdigit() else None


def reflex_params(scheme: str) -> tuple[float, float] | None:
    """(alpha, r) of a ReFlex scheme name, None for a fixed scheme."""
    if scheme_exploit(scheme) is not None:
        scheme = scheme.rpartition(EXPLOIT_TAG)[0]
    if scheme.startswith("reflex-a"):
        return int(scheme[8:]) / 100, 1.0
    if scheme.startswith("reflex-r"):
        return 1.0, int(scheme[8:]) / 100
    return None


@dataclass(frozen=True)
class Arrival:
    name: str
    kind: Literal["regular", "flexible"]
    start_s: float                     # after the phase's start
    sender: int                        # host index
    size: int = 0                      # bytes of a workload-3 regular flow (0: the workload's own)


def arrivals(p: Params, seed: int) -> list[Arrival]:
    """One draw of the workload: ``flows`` Poisson arrivals at the rate that
    loads the downlink to ``load`` (every flow the same size), a random
    ``flexible_share`` of them flexible, given to the senders in turn. With a
    measure window: each class its own Poisson process at its share of the
    load (as the paper's), over ``run_s``."""
    rng = random.Random(7919 + seed)
    rate = p.load / (p.flexible_cycles * p.cycle_s)    # flows per testbed second
    if p.measure_window_s is not None:
        return _arrivals_over_run(p, rng, rate)
    n_flex = round(p.flows * p.flexible_share)
    flex: list[Literal["regular", "flexible"]] = ["flexible"] * n_flex
    reg: list[Literal["regular", "flexible"]] = ["regular"] * (p.flows - n_flex)
    kinds = flex + reg
    rng.shuffle(kinds)
    out, t = [], 0.0
    for i, kind in enumerate(kinds):
        t += rng.expovariate(rate)
        out.append(Arrival(f"{kind[:4]}{i:03d}", kind, round(t, 6), 1 + i % p.senders))
    return out


def _arrivals_over_run(p: Params, rng: random.Random, rate: float) -> list[Arrival]:
    timed: list[tuple[float, Literal["regular", "flexible"]]] = []
    shares: tuple[tuple[Literal["regular", "flexible"], float], ...] = (
        ("flexible", p.flexible_share), ("regular", 1 - p.flexible_share))
    for kind, share in shares:
        t = rng.expovariate(rate * share)
        while t < p.run_s:
            timed.append((round(t, 6), kind))
            t += rng.expovariate(rate * share)
    timed.sort()
    return [Arrival(f"{kind[:4]}{i:03d}", kind, t, 1 + i % p.senders)
            for i, (t, kind) in enumerate(timed)]


def measured(p: Params, flows: list[Arrival]) -> list[Arrival]:
    """The flows whose FCTs count: all, or those arriving in the measure window."""
    window = p.measure_window_s
    if window is None:
        return flows
    return [a for a in flows if window[0] <= a.start_s < window[1]]


def flow_count(p: Params) -> int:
    return messages(p, p.flexible_cycles * p.cycle_intervals)


@dataclass(frozen=True)
class W2Draw:
    """One draw of workload 2: the flexible flows, the short regular flows (each
    a message of its sender's connection pool) and the window they arrive in."""

    flexible: list[Arrival]
    regular: list[Arrival]
    window_s: float

    def regular_of(self, sender: int) -> list[Arrival]:
        """A sender's regular flows in arrival order: message i of its pool."""
        return [a for a in self.regular if a.sender == sender]


def w2_rates(p: Params) -> tuple[float, float]:
    """(flexible, regular) arrivals per testbed second: each class carries its
    share of ``load`` of the link's payload rate."""
    flex = p.load * p.flexible_share / p.flexible_line_s
    reg = p.load * (1 - p.flexible_share) * p.payload_bps / 8 / p.w2_msg_bytes
    return flex, reg


def _flexible_arrivals(p: Params, rng: random.Random,
                       rate: float) -> tuple[list[Arrival], float]:
    """Workloads 2 and 3: ``w2_flexible`` Poisson arrivals of flexible flows
    and the window ending where the next would arrive, or with a measure
    window those arriving over ``run_s``."""
    flex: list[Arrival] = []
    counted = p.measure_window_s is None
    t = rng.expovariate(rate)
    while len(flex) < p.w2_flexible if counted else t < p.run_s:
        flex.append(Arrival(f"flex{len(flex):03d}", "flexible", round(t, 6),
                            1 + len(flex) % p.senders))
        t += rng.expovariate(rate)
    return flex, (t if counted else p.run_s)


def _regular_arrivals(p: Params, rng: random.Random, rate: float, window: float, prefix: str,
                      size_of: Callable[[random.Random], int] | None = None) -> list[Arrival]:
    """Workloads 2 and 3: regular flows as a Poisson process over ``window``,
    given to the senders in turn, each sized by ``size_of`` (drawn right after
    its arrival) or, without it, of the workload's own size."""
    reg: list[Arrival] = []
    t = rng.expovariate(rate)
    while t < window:
        size = size_of(rng) if size_of is not None else 0
        reg.append(Arrival(f"{prefix}{len(reg):05d}", "regular", round(t, 6),
                           1 + len(reg) % p.senders, size))
        t += rng.expovariate(rate)
    return reg


def w2_arrivals(p: Params, seed: int) -> W2Draw:
    """Workload 2: ``w2_flexible`` Poisson arrivals of flexible flows (given
    to the senders in turn); the window ends where the next one would arrive
    (with a measure window: flexible arrivals over ``run_s``); regular flows
    arrive as their own Poisson process over that window, also given to the
    senders in turn."""
    rng = random.Random(104729 + seed)
    flex_rate, reg_rate = w2_rates(p)
    flex, window = _flexible_arrivals(p, rng, flex_rate)
    return W2Draw(flex, _regular_arrivals(p, rng, reg_rate, window, "reg"), round(window, 6))


# Workload 3's regular flow sizes: the web-search distribution of DCTCP and
# pFabric as HPCC's simulator ships it (alibaba-edu/High-Precision-Congestion-Control,
# traffic_gen/WebSearch_distribution.txt),
# (bytes, cumulative probability), sampled with linear interpolation between points.
WEBSEARCH_CDF: tuple[tuple[int, float], ...] = (
    (0, 0.0), (10_000, 0.15), (20_000, 0.20), (30_000, 0.30), (50_000, 0.40), (80_000, 0.53),
    (200_000, 0.60), (1_000_000, 0.70), (2_000_000, 0.80), (5_000_000, 0.90),
    (10_000_000, 0.97), (30_000_000, 1.00))
# Workload 3 as the paper states it (§6.5): mean size, arrival rate and the
# regular flows' utilization; see w3_rates for the rate the testbed derives.
PAPER_W3 = {"mean_bytes": 1_700_000, "regular_flows_per_s": 2921, "regular_load": 0.2}
def websearch_mean(cdf: tuple[tuple[int, float], ...] = WEBSEARCH_CDF) -> float:
    """The mean size (bytes) of the piecewise-linear distribution: each
    segment's midpoint weighted by its probability (1 711 250 B)."""
    return sum((c1 - c0) * (x0 + x1) / 2 for (x0, c0), (x1, c1) in zip(cdf, cdf[1:], strict=False))


def websearch_size(rng: random.Random, cdf: tuple[tuple[int, float], ...] = WEBSEARCH_CDF) -> int:
    """One flow size (bytes, at least 1) drawn from ``cdf`` with ``rng``: the
    inverse CDF, linear between the points."""
    u = rng.random()
    for (x0, c0), (x1, c1) in zip(cdf, cdf[1:], strict=False):
        if u <= c1 and c1 > c0:
            return max(1, math.ceil(x0 + (u - c0) / (c1 - c0) * (x1 - x0)))
    return cdf[-1][0]


def size_class(size: int) -> str:
    """The paper's class of a regular flow of ``size`` bytes."""
    if size <= 0:
        raise ValueError(f"flow size {size}: must be positive")
    return next(name for name, top in SIZE_CLASSES if size <= top)


def w3_rates(p: Params) -> tuple[float, float]:
    """(flexible, regular) arrivals per testbed second for workload 3. The
    paper's 2921 flows/s of 1.7 MB are 40 Gb/s, 20% of its ToR's twenty 10
    Gb/s links; the testbed keeps the stated 20% on its one downlink (the
    regular share of ``load``, as in workloads 1 and 2), so the regular rate
    is that share of the payload rate over the distribution's mean size:
    138 flows/s of the modelled 10 Gb/s (the paper's rate over its 20 links
    is 146; the rest is the packets' headers)."""
    flex, _ = w2_rates(p)
    reg = p.load * (1 - p.flexible_share) * p.payload_bps / 8 / websearch_mean()
    return flex, reg


def w3_arrivals(p: Params, seed: int) -> W2Draw:
    """Workload 3: flexible arrivals as workload 2's (their own draw),
    web-search regular flows as their own Poisson process over that
    window, each with a size from WEBSEARCH_CDF, given to the senders in turn."""
    rng = random.Random(15485863 + seed)
    flex_rate, reg_rate = w3_rates(p)
    flex, window = _flexible_arrivals(p, rng, flex_rate)
    reg = _regular_arrivals(p, rng, reg_rate, window, "ws", websearch_size)
    return W2Draw(flex, reg, round(window, 6))


def pool_name(sender: int) -> str:
    """The flow (connection pool) that carries a sender's regular flows."""
    return f"regular-h{sender}"


def phase_name(scheme: str, seed: int, workload: int = 1) -> str:
    return f"w{workload}-{scheme}" + (f"-s{seed}" if seed else "")


def _add_flow(per_host: dict[int, list[FlowSpec]], p: Params, a: Arrival, count: int,
              seed: int, k: int, scheme: str) -> None:
    """One flow of workload 1, or a flexible flow of 2, to the receiver."""
    rp = reflex_params(scheme)
    fixed = SCHEMES["reflex" if rp else scheme]
    common: FlowShared = {"flow": a.name, "msg_bytes": p.msg_bytes, "count": count,
                          "window": p.window, "seed": 700 + 1000 * seed + k}
    extra: SenderOnly = {"start_delay_s": a.start_s}
    if a.kind == "flexible":
        extra["dscp"] = DSCP_LOW if fixed.flexible == "low" else DSCP_HIGH
        if rp is not None:
            extra["flexible"] = flexible_spec(p, *rp)
            exploit = scheme_exploit(scheme)
            if exploit is not None:
                extra["flexible"]["exploit"] = exploit
    add_flow(per_host, a.sender, p.receiver, common, extra)


def _switch_line(p: Params, scheme: str) -> str:
    return SCHEMES["reflex" if reflex_params(scheme) else scheme].switch_line(p.receiver)


def _check_measured(p: Params, flows: list[Arrival], seed: int, workload: int) -> None:
    kinds = {a.kind for a in measured(p, flows)}
    for kind in ("regular", "flexible"):
        if kind not in kinds:
            raise ValueError(f"workload {workload}, seed {seed}: no {kind} flow arrives in the "
                             "measure window (lengthen run_measure_ms)")


def _phase(p: Params, scheme: str, seed: int) -> PhasePlan:
    flows = arrivals(p, seed)
    _check_measured(p, flows, seed, 1)
    count = flow_count(p)
    per_host: dict[int, list[FlowSpec]] = {}
    for k, a in enumerate(flows):
        _add_flow(per_host, p, a, count, seed, k, scheme)
    # Every flow starved to the end of the window and then sent at line rate.
    line_s = count * p.msg_bytes * 8 / p.payload_bps
    timeout = 2 * (flows[-1].start_s + len(flows) * line_s) + 60
    return PhasePlan(phase_name(scheme, seed), host_jobs(p, per_host, timeout),
                     commands=(_switch_line(p, scheme),), timeout_s=timeout,
                     watch_ports=(p.receiver,),
                     notes=f"workload 1, {scheme}: {len(flows)} flows (seed {seed})")


def _phase_w2(p: Params, scheme: str, seed: int, workload: int = 2) -> PhasePlan:
    """Workload 2 (or 3, the regular messages of their own sizes)."""
    draw = w2_arrivals(p, seed) if workload == 2 else w3_arrivals(p, seed)
    _check_measured(p, draw.flexible + draw.regular, seed, workload)
    count = flow_count(p)
    rx = p.receiver
    per_host: dict[int, list[FlowSpec]] = {}
    for k, a in enumerate(draw.flexible):
        _add_flow(per_host, p, a, count, seed, k, scheme)
    for s in range(1, p.senders + 1):
        mine = draw.regular_of(s)
        if not mine:
            continue
        # Regular flows stay plain RoCE at high priority under every scheme.
        common: FlowShared = {
            "flow": pool_name(s), "msg_bytes": p.w2_msg_bytes, "count": len(mine),
            "seed": 500 + 1000 * seed + s, "qps": p.w2_qps,
            "arrivals_s": tuple(a.start_s for a in mine)}
        if workload == 3:
            common["msg_sizes"] = tuple(a.size for a in mine)
            common["msg_bytes"] = max(common["msg_sizes"])
        add_flow(per_host, s, rx, common, {"dscp": DSCP_HIGH})
    reg_bytes = (sum(a.size for a in draw.regular) if workload == 3
                 else len(draw.regular) * p.w2_msg_bytes)
    total = len(draw.flexible) * count * p.msg_bytes + reg_bytes
    timeout = 2 * (draw.window_s + total * 8 / p.payload_bps) + 60
    what = "web-search" if workload == 3 else f"{p.w2_msg_bytes} B"
    return PhasePlan(phase_name(scheme, seed, workload), host_jobs(p, per_host, timeout),
                     commands=(_switch_line(p, scheme),), timeout_s=timeout, watch_ports=(rx,),
                     notes=f"workload {workload}, {scheme}: {len(draw.flexible)} flexible and "
                           f"{len(draw.regular)} {what} regular flows over "
                           f"{draw.window_s:.1f} s (seed {seed})")


def plan(p: Params) -> RunPlan:
    wl = p.workload_list
    phases = tuple([_phase(p, s, seed) for s in w1_scheme_list(p) for seed in p.seed_list]
                   if 1 in wl else [])
    if 2 in wl:
        phases += tuple(_phase_w2(p, s, seed) for s in scheme_list(p) for seed in p.seed_list)
    if 3 in wl:
        phases += tuple(_phase_w2(p, s, seed, 3) for s in scheme_list(p)
                        for seed in p.seed_list)
    info: dict[str, object] = {
        "bottleneck_port": p.receiver, "link_bps": p.link_bps, "slowdown": p.slowdown,
        "t_int_s": p.t_int_s, "cycle_s": p.cycle_s, "flow_bytes": flow_count(p) * p.msg_bytes,
        "measure_window_s": p.measure_window_s, "reference": REFERENCE}
    if 1 in wl:
        info["arrivals_s"] = {s: [a.start_s for a in arrivals(p, s)] for s in p.seed_list}
    if 2 in wl:
        flex_rate, reg_rate = w2_rates(p)
        draws = {s: w2_arrivals(p, s) for s in p.seed_list}
        info["w2"] = {
            "regular_bytes": p.w2_msg_bytes, "qps_per_sender": p.w2_qps,
            "flexible_per_s": flex_rate, "regular_per_s": reg_rate,
            "regular_per_s_modelled": reg_rate * p.slowdown, "paper": PAPER_W2,
            "draws": {s: {"window_s": d.window_s, "regular": len(d.regular),
                          "flexible_s": [a.start_s for a in d.flexible]}
                      for s, d in draws.items()}}
    if 3 in wl:
        flex_rate, reg_rate = w3_rates(p)
        d3 = {s: w3_arrivals(p, s) for s in p.seed_list}
        info["w3"] = {
            "mean_bytes": websearch_mean(), "flexible_per_s": flex_rate,
            "regular_per_s": reg_rate, "regular_per_s_modelled": reg_rate * p.slowdown,
            "paper": PAPER_W3,
            "draws": {s: {"window_s": d.window_s, "regular": len(d.regular),
                          "regular_bytes": sum(a.size for a in d.regular),
                          "flexible_s": [a.start_s for a in d.flexible]}
                      for s, d in d3.items()}}
    return RunPlan(topology=topology(p, n_hosts=p.senders + 1), phases=phases,
                   fidelity=FidelityLimits(), info=info)


# ---------------------------------------------------------------------------
# analysis


def _params(run_dir: Path) -> Params:
    return saved_params(Params, run_dir)


def p99(xs: list[float]) -> float:
    """The 99th percentile, nearest rank (of a few flows: the largest)."""
    s = sorted(xs)
    return s[max(0, math.ceil(0.99 * len(s)) - 1)]


def flow_fcts(data: PhaseData, flows: list[Arrival]) -> dict[str, float]:
    """FCT (s) per flow: from when its sender could post its first message to
    the receiver's last completion."""
    out = {}
    for a in flows:
        comps = data.flow_events(a.name, "completion", role="receiver")
        if not comps:
            raise ValueError(f"phase {data.name}: flow {a.name} delivered nothing")
        start = data.flow_end(a.name, "sender")["t_start_ns"] / 1e9 + a.start_s
        out[a.name] = max(int(e["t_ns"]) for e in comps) / 1e9 - start
    return out


def sender_overlap_s(data: PhaseData, flows: list[Arrival]) -> float:
    """Seconds in which some sender had two or more flows active."""
    spans: dict[int, list[tuple[float, float]]] = {}
    for a in flows:
        end = data.flow_end(a.name, "sender")
        t0 = end["t_start_ns"] / 1e9 + a.start_s
        spans.setdefault(a.sender, []).append((t0, float(end["t_ns"]) / 1e9))
    total = 0.0
    for iv in spans.values():
        iv.sort()
        for (_, e0), (s1, e1) in zip(iv, iv[1:], strict=False):
            total += max(0.0, min(e0, e1) - s1)
    return total


def _fct(seconds: float) -> float:
    """An FCT to six significant digits: at the paper's scale a 100 kB flow
    takes about 100 us, which rounding to a fixed number of decimals of a
    second would make as coarse as its own size."""
    return float(f"{seconds:.6g}")


@dataclass(frozen=True)
class ClassFigures:
    """One class of flows in one phase: how many, and (when any) their mean
    and p99 FCT (testbed seconds); the flexible flows' delivered fraction."""

    n: int
    mean_fct_s: float | None = field(default=None, metadata=OMIT_IF_NONE)
    p99_fct_s: float | None = field(default=None, metadata=OMIT_IF_NONE)
    delivered_fraction: float | None = field(default=None, metadata=OMIT_IF_NONE)


@dataclass(frozen=True)
class WorkloadRun:
    """One phase's figures (workload 1; workload 2 adds its connection pools'
    ``pool_waited``, ``post_late_max_s`` and ``regular_fct_s``); ``fct_s``
    every counted flexible flow's FCT by name."""

    regular: ClassFigures
    flexible: ClassFigures
    sender_overlap_s: float
    pool_waited: int | None = field(metadata=OMIT_IF_NONE)
    post_late_max_s: float | None = field(metadata=OMIT_IF_NONE)
    fct_s: dict[str, float]
    regular_fct_s: list[float] | dict[str, float] | None = field(metadata=OMIT_IF_NONE)

    def figures(self, kind: str) -> ClassFigures:
        """A class's figures by name (W3_KINDS)."""
        got: ClassFigures = getattr(self, kind)
        return got


@dataclass(frozen=True)
class W1Run(WorkloadRun):
    """Workload 1's phase: ``fct_s`` every flow's FCT by name (both classes,
    counted or not), and against ``none`` on the same draw (None there) the
    counted flexible flows' share slowed below SLOW_SPEEDUP and the counted
    regular flows' share slowed below WORSE_SPEEDUP (a worse FCT; Fig. 14)."""

    share_below_080: float | None = field(default=None,
                                          metadata=json_key("flexible.share_below_080"))
    share_below_100: float | None = field(default=None,
                                          metadata=json_key("regular.share_below_100"))


@dataclass(frozen=True)
class W3Run(WorkloadRun):
    """Workload 3's phase: workload 2's figures (``regular_fct_s`` by flow
    name), the regular flows per size class (SIZE_CLASSES) and the flexible
    flows' share slowed below SLOW_SPEEDUP against ``none`` (None there)."""

    tiny: ClassFigures
    small: ClassFigures
    medium: ClassFigures
    large: ClassFigures
    share_below_080: float | None = field(default=None,
                                          metadata=json_key("flexible.share_below_080"))


def _class_stats(kind: str, xs: list[float], phase: str,
                 delivered_fraction: float | None = None) -> ClassFigures:
    if not xs:
        raise ValueError(f"phase {phase}: no {kind} flow to measure (none arrived in the "
                         "measure window)")
    return ClassFigures(n=len(xs), mean_fct_s=_fct(statistics.fmean(xs)),
                        p99_fct_s=_fct(p99(xs)), delivered_fraction=delivered_fraction)


def phase_result(data: PhaseData, flows: list[Arrival], size: int,
                 counted: list[Arrival] | None = None) -> W1Run:
    """Workload 1's figures of one phase: every flow's FCT (``fct_s``), the
    statistics of the ``counted`` ones (default: all)."""
    fct = flow_fcts(data, flows)
    counted = flows if counted is None else counted
    flex = [fct[a.name] for a in counted if a.kind == "flexible"]
    regular = _class_stats("regular", [fct[a.name] for a in counted if a.kind == "regular"],
                           data.name)
    if not flex:
        _class_stats("flexible", flex, data.name)
    got = sum(data.flow_end(a.name, "receiver")["bytes"] for a in counted
              if a.kind == "flexible")
    return W1Run(
        regular=regular,
        flexible=_class_stats("flexible", flex, data.name,
                              round(got / (size * len(flex)), 4)),
        sender_overlap_s=round(sender_overlap_s(data, flows), 3),
        pool_waited=None, post_late_max_s=None,
        fct_s={k: _fct(v) for k, v in fct.items()}, regular_fct_s=None)


def regular_fcts(data: PhaseData, draw: W2Draw) -> dict[str, float]:
    """Workload 2: FCT (s) per regular flow, from its arrival to the
    receiver's completion of its message (waiting for a connection included)."""
    out: dict[str, float] = {}
    for s in sorted({a.sender for a in draw.regular}):
        mine = draw.regular_of(s)
        pool = pool_name(s)
        t0 = data.flow_end(pool, "sender")["t_start_ns"] / 1e9
        done = {int(e["index"]): int(e["t_ns"]) / 1e9
                for e in data.flow_events(pool, "completion", role="receiver")}
        for i, a in enumerate(mine):
            if i not in done:
                raise ValueError(f"phase {data.name}: regular flow {a.name} (message {i} of "
                                 f"{pool}) was not delivered")
            out[a.name] = done[i] - (t0 + a.start_s)
    return out


def w2_phase_result(data: PhaseData, draw: W2Draw, size: int,
                    counted: set[str] | None = None) -> WorkloadRun:
    """Workload 2's figures of one phase, the statistics over the flows named
    in ``counted`` (default: all); ``fct_s`` and ``regular_fct_s`` those
    flows' FCTs."""
    flex = flow_fcts(data, draw.flexible)
    reg = regular_fcts(data, draw)
    if counted is not None:
        flex = {k: v for k, v in flex.items() if k in counted}
        reg = {k: v for k, v in reg.items() if k in counted}
    regular = _class_stats("regular", list(reg.values()), data.name)
    if not flex:
        _class_stats("flexible", [], data.name)
    got = sum(data.flow_end(name, "receiver")["bytes"] for name in flex)
    pools = [data.flow_end(pool_name(s), "sender")["pool"]
             for s in sorted({a.sender for a in draw.regular})]
    return WorkloadRun(
        regular=regular,
        flexible=_class_stats("flexible", list(flex.values()), data.name,
                              round(got / (size * len(flex)), 4)),
        sender_overlap_s=round(sender_overlap_s(data, draw.flexible), 3),
        pool_waited=sum(int(x["waited"]) for x in pools),
        post_late_max_s=round(max(float(x["post_late_max_s"]) for x in pools), 4),
        fct_s={k: _fct(v) for k, v in flex.items()},
        regular_fct_s=[_fct(v) for v in reg.values()])


@dataclass(frozen=True)
class ClassSpread:
    """One class of flows under one scheme over the draws (``seed_spread``):
    FCTs, speed-ups against ``none`` on the same draw (not for ``none``), the
    flow count; the flexible flows' delivered fraction and, in workloads 1
    and 3, their share slowed below SLOW_SPEEDUP; in workload 1 the regular
    flows' share slowed below WORSE_SPEEDUP."""

    share_below_080: Spread | None = field(metadata=OMIT_IF_NONE)
    share_below_100: Spread | None = field(metadata=OMIT_IF_NONE)
    mean_fct_s: Spread
    mean_speedup: Spread | None = field(metadata=OMIT_IF_NONE)
    p99_fct_s: Spread
    p99_speedup: Spread | None = field(metadata=OMIT_IF_NONE)
    n: Spread
    delivered_fraction: Spread | None = field(metadata=OMIT_IF_NONE)


@dataclass(frozen=True)
class SchemeResult:
    """A scheme's figures over the draws, with each draw's under ``runs``."""

    sender_overlap_s: Spread
    pool_waited: Spread | None = field(metadata=OMIT_IF_NONE)        # workloads 2 and 3
    post_late_max_s: Spread | None = field(metadata=OMIT_IF_NONE)
    classes: dict[str, ClassSpread] = field(metadata=INLINE)        # kind -> its figures
    runs: list[WorkloadRun]


def _speedup(got: float | None, was: float | None) -> float | None:
    return None if got is None or was is None else round(was / got, 4)


def _class_spread(runs: list[WorkloadRun], base: list[WorkloadRun], kind: str,
                  against_none: bool) -> ClassSpread:
    pairs = [(run.figures(kind), ref.figures(kind)) for run, ref in zip(runs, base, strict=True)]
    below_080 = [r.share_below_080 for r in runs if isinstance(r, (W1Run, W3Run))]
    below_100 = [r.share_below_100 for r in runs if isinstance(r, W1Run)]

    def speedup(stat: Callable[[ClassFigures], float | None]) -> Spread | None:
        return (seed_spread(_speedup(stat(f), stat(ref)) for f, ref in pairs)
                if against_none else None)

    return ClassSpread(
        share_below_080=seed_spread(below_080) if kind == "flexible" and below_080 else None,
        share_below_100=seed_spread(below_100) if kind == "regular" and below_100 else None,
        mean_fct_s=seed_spread(f.mean_fct_s for f, _ in pairs),
        mean_speedup=speedup(lambda f: f.mean_fct_s),
        p99_fct_s=seed_spread(f.p99_fct_s for f, _ in pairs),
        p99_speedup=speedup(lambda f: f.p99_fct_s),
        n=seed_spread(f.n for f, _ in pairs),
        delivered_fraction=(seed_spread(f.delivered_fraction for f, _ in pairs)
                            if kind == "flexible" else None))


def _optional(values: Iterable[float | None]) -> Spread | None:
    """seed_spread of a figure only some workloads' runs have (None: not these)."""
    xs = list(values)
    return None if all(x is None for x in xs) else seed_spread(xs)


def speedups(per_seed: dict[str, list[WorkloadRun]],
             kinds: tuple[str, ...] = ("regular", "flexible")) -> dict[str, SchemeResult]:
    """Per scheme: each class's FCTs and their speed-ups against ``none`` on
    the same draw, as the mean and spread over draws (``seed_spread``), with
    the per-draw results under ``runs``; a run's pool figures (workloads 2
    and 3) are carried over the same way. A class with no flow in a draw (n
    0) has no figures from it. (Workload 3's flexible flows come first, as
    their share_below_080 is their first figure.)"""
    base = per_seed["none"]
    w3 = any(isinstance(r, W3Run) for runs in per_seed.values() for r in runs)
    order = (("flexible", *(k for k in kinds if k != "flexible")) if w3 else kinds)
    return {scheme: SchemeResult(
        sender_overlap_s=seed_spread(r.sender_overlap_s for r in runs),
        pool_waited=_optional(r.pool_waited for r in runs),
        post_late_max_s=_optional(r.post_late_max_s for r in runs),
        classes={kind: _class_spread(runs, base, kind, scheme != "none") for kind in order},
        runs=runs) for scheme, runs in per_seed.items()}


@dataclass(frozen=True)
class ExploitSweep:
    """Fig. 8: workload 1 under ReFlex at ``alpha`` (r = 1) per D_exploit
    (``exploits``, increasing; ``schemes`` their phases' names), the regular
    flows' mean and p99 FCT (testbed seconds, mean over seeds) at each, and
    per seed the change from the shortest exploit phase to the longest of
    the p99 and the mean (relative: -0.1 is 10% shorter)."""

    alpha: float
    exploits: list[int]
    schemes: list[str]
    regular_mean_fct_s: list[float | None]
    regular_p99_fct_s: list[float | None]
    regular_p99_change: Spread
    regular_mean_change: Spread


def exploit_result(p: Params, w1: dict[str, SchemeResult]) -> ExploitSweep:
    """Fig. 8's figures from workload 1's schemes (exploit_sweep)."""
    sweep = exploit_sweep(p)
    cells = [w1[scheme].classes["regular"] for _, scheme in sweep]
    first, last = w1[sweep[0][1]].runs, w1[sweep[-1][1]].runs

    def change(stat: Callable[[ClassFigures], float | None]) -> Spread:
        def one(a: WorkloadRun, b: WorkloadRun) -> float | None:
            x, y = stat(a.regular), stat(b.regular)
            return None if x is None or y is None else round(y / x - 1, 4)
        return seed_spread(one(a, b) for a, b in zip(first, last, strict=True))

    return ExploitSweep(
        alpha=p.w1_exploit_alpha, exploits=[e for e, _ in sweep], schemes=[s for _, s in sweep],
        regular_mean_fct_s=[c.mean_fct_s.mean for c in cells],
        regular_p99_fct_s=[c.p99_fct_s.mean for c in cells],
        regular_p99_change=change(lambda f: f.p99_fct_s),
        regular_mean_change=change(lambda f: f.mean_fct_s))


@dataclass(frozen=True)
class Results(Summary):
    schemes: list[str]
    workloads: list[int]
    paper: dict[str, float | None]
    paper_fct_ms: dict[str, int]
    flow_bytes: int
    measure_window_s: tuple[float, float] | None
    w1: dict[str, SchemeResult] | None = field(default=None, metadata=OMIT_IF_NONE)
    w1_exploit: ExploitSweep | None = field(default=None, metadata=OMIT_IF_NONE)
    w2: dict[str, SchemeResult] | None = field(default=None, metadata=OMIT_IF_NONE)
    w2_regular_bytes: int | None = field(default=None, metadata=OMIT_IF_NONE)
    paper_w2: dict[str, int] | None = field(default=None, metadata=OMIT_IF_NONE)
    w3: dict[str, SchemeResult] | None = field(default=None, metadata=OMIT_IF_NONE)
    paper_w3: dict[str, float] | None = field(default=None, metadata=OMIT_IF_NONE)


def analyze(run_dir: Path) -> Results:
    p = _params(run_dir)
    size = flow_count(p) * p.msg_bytes
    w1 = w2 = w3 = None
    w1_exploit = None
    if 1 in p.workload_list:
        draws = {s: arrivals(p, s) for s in p.seed_list}
        w1_runs = {scheme: [
            phase_result(load_phase(run_dir, phase_name(scheme, s)), draws[s], size,
                         measured(p, draws[s]))
            for s in p.seed_list] for scheme in w1_scheme_list(p)}
        # Fig. 14: each scheme's per-flow shares against none on the same draw
        w1_shared: dict[str, list[WorkloadRun]] = {scheme: list(runs) if scheme == "none" else [
            w1_shares(run, ref, measured(p, draws[s]))
            for run, ref, s in zip(runs, w1_runs["none"], p.seed_list, strict=True)]
            for scheme, runs in w1_runs.items()}
        w1 = speedups(w1_shared)
        w1_exploit = exploit_result(p, w1) if p.exploit_list else None
    if 2 in p.workload_list:
        w2d = {s: w2_arrivals(p, s) for s in p.seed_list}
        counted = {s: {a.name for a in measured(p, d.flexible) + measured(p, d.regular)}
                   for s, d in w2d.items()}
        w2 = speedups({scheme: [
            w2_phase_result(load_phase(run_dir, phase_name(scheme, s, 2)), w2d[s], size,
                            counted[s]) for s in p.seed_list] for scheme in scheme_list(p)})
    if 3 in p.workload_list:
        w3d = {s: w3_arrivals(p, s) for s in p.seed_list}
        counted = {s: {a.name for a in measured(p, d.flexible) + measured(p, d.regular)}
                   for s, d in w3d.items()}
        per = {scheme: [w3_phase_result(load_phase(run_dir, phase_name(scheme, s, 3)), w3d[s],
                                        size, counted[s]) for s in p.seed_list]
               for scheme in scheme_list(p)}
        w3 = speedups({scheme: [
            dataclasses.replace(run, share_below_080=None if scheme == "none"
                                else share_below(run, ref))
            for run, ref in zip(runs, per["none"], strict=True)]
            for scheme, runs in per.items()}, kinds=W3_KINDS)
    return Results(
        schemes=scheme_list(p), workloads=p.workload_list, paper=dict(REFERENCE),
        paper_fct_ms=dict(REFERENCE_FCT_MS), flow_bytes=size,
        measure_window_s=p.measure_window_s,
        w1=w1, w1_exploit=w1_exploit, w2=w2, w2_regular_bytes=p.w2_msg_bytes if w2 is not None else None,
        paper_w2=dict(PAPER_W2) if w2 is not None else None,
        w3=w3, paper_w3=dict(PAPER_W3) if w3 is not None else None)


def w3_phase_result(data: PhaseData, draw: W2Draw, size: int,
                    counted: set[str] | None = None) -> W3Run:
    """Workload 3's figures of one phase: workload 2's, with the regular flows'
    statistics per size class (SIZE_CLASSES; a class no counted flow falls in
    has ``n`` 0 and no FCTs) and ``regular_fct_s`` per flow name."""
    res = w2_phase_result(data, draw, size, counted)
    reg = regular_fcts(data, draw)
    sizes = {a.name: a.size for a in draw.regular}
    if counted is not None:
        reg = {k: v for k, v in reg.items() if k in counted}
    classes: dict[str, ClassFigures] = {}
    for name, _top in SIZE_CLASSES:
        xs = [v for k, v in reg.items() if size_class(sizes[k]) == name]
        classes[name] = _class_stats(name, xs, data.name) if xs else ClassFigures(n=0)
    return W3Run(**{f.name: getattr(res, f.name) for f in dataclasses.fields(WorkloadRun)
                    if f.name != "regular_fct_s"},
                 regular_fct_s={k: _fct(v) for k, v in reg.items()},
                 tiny=classes["tiny"], small=classes["small"], medium=classes["medium"],
                 large=classes["large"])


def share_below(run: WorkloadRun, ref: WorkloadRun, limit: float = SLOW_SPEEDUP) -> float:
    """The share of the flexible flows (``fct_s``, by name) whose speed-up
    against the same flow in ``ref`` is below ``limit``."""
    names = sorted(ref.fct_s)
    if not names or set(names) != set(run.fct_s):
        raise ValueError("share_below: the runs measure different flexible flows")
    return slowed_share(run.fct_s, ref.fct_s, names, limit)


def slowed_share(fct: dict[str, float], ref: dict[str, float], names: Iterable[str],
                 limit: float) -> float:
    """The share of the flows ``names`` whose speed-up, ``ref``'s FCT over
    ``fct``'s (the same flow without prioritization and under a scheme), is
    below ``limit``; a flow with the same FCT in both has speed-up 1."""
    flows = list(names)
    if not flows:
        raise ValueError("slowed_share: no flow to count")
    missing = [k for k in flows if k not in fct or k not in ref]
    if missing:
        raise ValueError(f"slowed_share: no FCT of {', '.join(missing)} in both runs")
    return round(sum(ref[k] / fct[k] < limit for k in flows) / len(flows), 4)


def w1_shares(run: W1Run, ref: W1Run, counted: list[Arrival]) -> W1Run:
    """Workload 1's run with its per-flow shares against ``ref`` (``none`` on
    the same draw) over the ``counted`` flows: the flexible ones slowed below
    SLOW_SPEEDUP, the regular ones below WORSE_SPEEDUP (Fig. 14)."""
    def names(kind: str) -> list[str]:
        return [a.name for a in counted if a.kind == kind]

    return dataclasses.replace(
        run, share_below_080=slowed_share(run.fct_s, ref.fct_s, names("flexible"), SLOW_SPEEDUP),
        share_below_100=slowed_share(run.fct_s, ref.fct_s, names("regular"), WORSE_SPEEDUP))


def flow_speedups(run: WorkloadRun, ref: WorkloadRun, names: Iterable[str]) -> list[float]:
    """The speed-up of each of the flows ``names``: its FCT in ``ref`` over
    its FCT in ``run``."""
    return [ref.fct_s[k] / run.fct_s[k] for k in names]


W3_KINDS = ("regular", "flexible", *(name for name, _ in SIZE_CLASSES))


def _speedup_plot(res: dict[str, SchemeResult], p: Params, workload: int, out: Path) -> Path:
    import matplotlib.pyplot as plt

    from testbed.plotting import save_figure

    key_w = f"w{workload}"
    others = [s for s in scheme_list(p) if s != "none"]
    fig, axes = plt.subplots(1, 2, figsize=(12, 4.5), sharey=workload == 1)
    for ax, kind in zip(axes, ("regular", "flexible"), strict=True):
        x = range(len(others))
        for off, stat in ((-0.2, "mean"), (0.2, "p99")):
            key = f"{stat}_speedup"
            cells: list[Spread] = [getattr(res[s].classes[kind], key) for s in others]
            got = [c.mean for c in cells]
            err = [[_sub(c.mean, c.min) for c in cells], [_sub(c.max, c.mean) for c in cells]]
            ax.bar([i + off for i in x], got, 0.4, yerr=err, capsize=3, label=f"{stat}")
            ref = [(i + off, PAPER_VALUES[f"{key_w}.{s}.{kind}.{key}"])
                   for i, s in enumerate(others) if f"{key_w}.{s}.{kind}.{key}" in PAPER_VALUES]
            if ref:
                ax.plot([a for a, _ in ref], [b for _, b in ref], "k*", markersize=10,
                        label=f"paper {stat}")
        ax.axhline(1.0, color="grey", lw=0.8)
        ax.set_xticks(list(x), others, rotation=30, ha="right")
        size = (f"{p.w2_msg_bytes / 1000:g} kB " if workload == 2 and kind == "regular" else "")
        ax.set_title(f"{size}{kind} flows: FCT speed-up against no prioritization")
        ax.set_ylabel("FCT(none) / FCT(scheme)")
        ax.legend(fontsize=8)
    fig.suptitle(f"{NAME}: workload {workload}, load {p.load:g}, {p.seeds} draw(s), "
                 "bars min-max")
    return save_figure(fig, out)


def _sub(a: float | None, b: float | None) -> float:
    """a - b for an error bar (0 where either is missing)."""
    return 0.0 if a is None or b is None else a - b


def _regular_fcts(run: WorkloadRun) -> list[float]:
    """A workload-2 or -3 run's regular flows' FCTs."""
    fcts = run.regular_fct_s
    return list(fcts.values()) if isinstance(fcts, dict) else list(fcts or ())


def _cdf(xs: list[float]) -> tuple[list[float], list[float]]:
    """Points of the empirical CDF of sorted ``xs`` for a post-step line, from
    0 at the first value."""
    return [xs[0], *xs], [0.0, *((i + 1) / len(xs) for i in range(len(xs)))]


def _w1_cdf_plot(res: dict[str, SchemeResult], p: Params, out: Path) -> Path:
    """Workload 1 per flow (Fig. 14): the CDFs of the counted flows' speed-ups
    against the same flow without prioritization (top: regular, flexible)
    and of their FCTs (bottom), every draw's flows together; the paper's
    shares are marked at their speed-ups (1 for regular, 0.8 for flexible)."""
    import matplotlib.pyplot as plt

    from testbed.plotting import save_figure

    counted = {s: measured(p, arrivals(p, s)) for s in p.seed_list}
    base = res["none"].runs
    fig, axes = plt.subplots(2, 2, figsize=(12, 8))
    for col, (kind, limit, stat) in enumerate((("regular", WORSE_SPEEDUP, "share_below_100"),
                                              ("flexible", SLOW_SPEEDUP, "share_below_080"))):
        top, bottom = axes[0][col], axes[1][col]
        for scheme in scheme_list(p):
            runs = res[scheme].runs
            fcts = sorted(run.fct_s[a.name] * 1e3 / p.slowdown
                          for run, s in zip(runs, p.seed_list, strict=True)
                          for a in counted[s] if a.kind == kind)
            line = bottom.step(*_cdf(fcts), where="post", label=scheme)
            if scheme == "none":
                continue
            ups = sorted(x for run, ref, s in zip(runs, base, p.seed_list, strict=True)
                         for x in flow_speedups(run, ref, [a.name for a in counted[s]
                                                           if a.kind == kind]))
            got = getattr(res[scheme].classes[kind], stat)
            share = f", {got.mean * 100:.1f}% < {limit:g}x" if got and got.mean is not None else ""
            top.step(*_cdf(ups), where="post", color=line[0].get_color(),
                     label=f"{scheme}{share}")
            paper = PAPER_VALUES.get(f"w1.{scheme}.{kind}.{stat}")
            if paper is not None:
                top.plot([limit], [paper], "*", color=line[0].get_color(), markersize=12,
                         markeredgecolor="k", label=f"paper {scheme}: {paper * 100:g}%")
        top.axvline(limit, color="grey", lw=0.8, ls="--")
        top.set_xlabel("speed-up: FCT(none) / FCT(scheme), per flow")
        top.set_ylabel(f"fraction of {kind} flows")
        top.set_title(f"{kind} flows: speed-up (share below {limit:g}x)")
        top.legend(fontsize=8)
        bottom.set_xlabel(f"FCT (ms of the modelled {p.modelled_link} network)")
        bottom.set_ylabel(f"fraction of {kind} flows")
        bottom.set_title(f"{kind} flows: FCT")
        bottom.legend(fontsize=8)
    fig.suptitle(f"{NAME}: workload 1 per flow (Fig. 14), {p.seeds} draw(s), "
                 f"{sum(len(c) for c in counted.values())} flows counted")
    return save_figure(fig, out)


def _exploit_plot(w1: dict[str, SchemeResult], sweep: ExploitSweep, p: Params,
                  out: Path) -> Path:
    """Fig. 8: the measured regular flows' FCT under ReFlex at w1_exploit_alpha
    per D_exploit (mean, median, p90, p99 of every draw's flows together),
    no prioritization's dashed."""
    import matplotlib.pyplot as plt

    from testbed.plotting import save_figure

    counted = {s: [a.name for a in measured(p, arrivals(p, s)) if a.kind == "regular"]
               for s in p.seed_list}

    def fcts(scheme: str) -> list[float]:
        return sorted(run.fct_s[k] * 1e3 / p.slowdown
                      for run, s in zip(w1[scheme].runs, p.seed_list, strict=True)
                      for k in counted[s])

    stats: tuple[tuple[str, Callable[[list[float]], float]], ...] = (
        ("mean", statistics.fmean), ("median", statistics.median),
        ("p90", lambda xs: xs[max(0, math.ceil(0.9 * len(xs)) - 1)]), ("p99", p99))
    fig, ax = plt.subplots(figsize=(7, 4.5))
    base = fcts("none")
    for name, stat in stats:
        line = ax.plot(sweep.exploits, [stat(fcts(s)) for s in sweep.schemes], "o-",
                       label=name)
        ax.axhline(stat(base), color=line[0].get_color(), ls="--", lw=0.8)
    ax.set_xticks(sweep.exploits)
    ax.set_xlabel("D_exploit (T_int), with D_warmup = D_measure = 1")
    ax.set_ylabel(f"regular flows' FCT (ms of the modelled {p.modelled_link} network)")
    change = sweep.regular_p99_change.mean
    ax.set_title(f"workload 1, ReFlex alpha {sweep.alpha:g} (dashed: no prioritization)"
                 + (f"; p99 {change * 100:+.1f}% from D_exploit {sweep.exploits[0]} to "
                    f"{sweep.exploits[-1]}" if change is not None else ""), fontsize=9)
    ax.legend(fontsize=8)
    fig.suptitle(f"{NAME}: Fig. 8, {p.seeds} draw(s), "
                 f"{sum(len(c) for c in counted.values())} regular flows")
    return save_figure(fig, out)


def _fct_cdf_plot(res: dict[str, SchemeResult], p: Params, out: Path) -> Path:
    """Workload 2: the regular flows' FCT distribution per scheme (all draws)."""
    import matplotlib.pyplot as plt

    from testbed.plotting import save_figure

    fig, ax = plt.subplots(figsize=(7, 4.5))
    for scheme in scheme_list(p):
        xs = sorted(v * 1e3 / p.slowdown for run in res[scheme].runs
                    for v in _regular_fcts(run))
        ax.step(xs, [(i + 1) / len(xs) for i in range(len(xs))], where="post", label=scheme)
    ax.set_xscale("log")
    ax.set_xlabel(f"FCT (ms of the modelled {p.modelled_link} network)")
    ax.set_ylabel("fraction of regular flows")
    ax.set_title(f"{NAME}: workload 2, {p.w2_msg_bytes / 1000:g} kB regular flows")
    ax.legend(fontsize=8)
    return save_figure(fig, out)


def _w3_plot(res: dict[str, SchemeResult], p: Params, out: Path) -> Path:
    """Workload 3: per scheme, the mean and p99 FCT speed-up of each regular
    size class and of the flexible flows, the paper's p99 marked."""
    import matplotlib.pyplot as plt

    from testbed.plotting import save_figure

    others = [s for s in scheme_list(p) if s != "none"]
    kinds = [name for name, _ in SIZE_CLASSES] + ["flexible"]
    fig, axes = plt.subplots(1, len(others), figsize=(5.5 * len(others), 4.5), squeeze=False)
    for ax, scheme in zip(axes[0], others, strict=True):
        cell = res[scheme].classes
        for off, stat in ((-0.2, "mean"), (0.2, "p99")):
            key = f"{stat}_speedup"
            got: list[Spread | None] = [getattr(cell[k], key) for k in kinds]
            xs = [(i + off, g.mean) for i, g in enumerate(got)
                  if g is not None and g.mean is not None]
            ax.bar([x for x, _ in xs], [v for _, v in xs], 0.4, label=stat)
        ref = [(i + 0.2, PAPER_VALUES[f"w3.{scheme}.{k}.p99_speedup"])
               for i, k in enumerate(kinds) if f"w3.{scheme}.{k}.p99_speedup" in PAPER_VALUES]
        if ref:
            ax.plot([a for a, _ in ref], [b for _, b in ref], "k*", markersize=10,
                    label="paper p99")
        ax.axhline(1.0, color="grey", lw=0.8)
        ns = [cell[k].n.mean for k in kinds]
        ax.set_xticks(range(len(kinds)), [f"{k}\n(n {n:g})" if n is not None else k
                                          for k, n in zip(kinds, ns, strict=True)])
        below = cell["flexible"].share_below_080
        share = below.mean if below is not None else None
        paper = PAPER_VALUES.get(f"w3.{scheme}.flexible.share_below_080")
        title = scheme
        if share is not None:
            title += f": flexible < {SLOW_SPEEDUP}x {share * 100:.1f}%"
            if paper is not None:
                title += f" (paper {paper * 100:.1f}%)"
        ax.set_title(title, fontsize=10)
        ax.set_ylabel("FCT(none) / FCT(scheme)")
        ax.legend(fontsize=8)
    fig.suptitle(f"{NAME}: workload 3 (web-search sizes), FCT speed-up by size class, "
                 f"{p.seeds} draw(s)")
    return save_figure(fig, out)


def plot(run_dir: Path) -> list[Path]:
    p = _params(run_dir)
    res = analyze(run_dir)
    outs = phase_timelines(
        p, run_dir, ((phase_name(scheme, seed, w), f"{NAME} - workload {w}, {scheme}, "
                                                   f"seed {seed} ({p.rate_label})")
                     for w in p.workload_list
                     for scheme in (w1_scheme_list(p) if w == 1 else scheme_list(p))
                     for seed in p.seed_list),
        port=p.receiver)
    plots = Path(run_dir) / "plots"
    if res.w1 is not None:
        outs.append(_speedup_plot(res.w1, p, 1, plots / "speedups.png"))
        outs.append(_w1_cdf_plot(res.w1, p, plots / "w1_speedup_cdf.png"))
    if res.w1_exploit is not None and res.w1 is not None:
        outs.append(_exploit_plot(res.w1, res.w1_exploit, p, plots / "w1_exploit.png"))
    if res.w2 is not None:
        outs.append(_speedup_plot(res.w2, p, 2, plots / "w2_speedups.png"))
        outs.append(_fct_cdf_plot(res.w2, p, plots / "w2_fct_cdf.png"))
    if res.w3 is not None:
        outs.append(_w3_plot(res.w3, p, plots / "w3_speedups.png"))
    return outs
