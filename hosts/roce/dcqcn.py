"""DCQCN: the reaction point (sender) and the notification point's CNP interval.

Three presets, named after what they model (table and references:
hosts/roce/README.md, "DCQCN presets"):

- ``zhu2015``: the algorithm and parameters of the DCQCN paper (Zhu et al.,
  SIGCOMM 2015), in the paper's symbols.
- ``connectx``: NVIDIA ConnectX (mlx5) NICs, with the NIC's parameter names and
  firmware defaults (``/sys/class/net/<if>/ecn/roce_rp|roce_np``), and the
  behaviour of the ns-3 "Mlx" model (rdma-hw.cc in HPCC's simulator) where the
  paper and the NIC differ.
- ``hpcc``: the DCQCN configuration of HPCC's simulator (``run.py --cc dcqcn``
  in alibaba-edu/High-Precision-Congestion-Control), which Symphony's
  simulations follow: its "Mlx" model with timer-driven increases only (no
  byte counter) and a 1 Gb/s rate floor.

The reaction point keeps the current rate Rc, the target rate Rt and the
congestion estimate alpha, and follows these rules (``DcqcnParams`` names):

- Before the first CNP alpha is held at ``initial_alpha``: no alpha timer runs
  (a QP that was quiet for a long time cuts by about half at its first CNP).
  The first CNP starts the alpha timer (period ``alpha_update_period_s``).
- Alpha, ``alpha_rule="per_cnp"`` (paper): every CNP sets alpha <- (1-g) alpha + g
  (after the cut it causes, which uses the old alpha) and restarts the alpha
  timer; every period without a CNP, alpha <- (1-g) alpha.
  ``alpha_rule="per_period"`` (NIC, ns-3 UpdateAlphaMlx): at the end of every
  period, alpha <- (1-g) alpha + g if a CNP arrived in it, else (1-g) alpha;
  the first CNP only sets alpha to ``initial_alpha``.
- Cut: Rc <- max(Rc (1 - alpha * decrease_gain), Rc * min_decrease_factor,
  min_rate); the increase timer, byte counter and both stage counters restart.
  Rt <- Rc before the cut depends on ``clamp``: ``"always"`` (paper,
  mlx5 clamp_tgt_rate=1); ``"after_timer_increase"`` (mlx5 clamp_tgt_rate=0,
  clamp_tgt_rate_after_time_inc=1; ns-3 CheckRateDecreaseMlx): only if a
  timer increase event happened since the last cut; ``"never"`` (both 0).
  So under steady CNPs the NIC keeps Rt and cuts only Rc.
- Rate-reduce monitor period (``rate_reduce_monitor_period_s``, 0 = none): a
  CNP within that time of the previous cut does not cut at once; one cut
  happens at the end of the period (previous cut + period) for all CNPs that
  came in it. Each such CNP still counts for alpha.
- Increase events come from a timer (every ``rate_increase_period_s`` after a
  cut) and a byte counter (every ``byte_counter_bytes`` sent; 0: none, the
  timer alone, as ns-3's Mlx model: the i-th timer event after a cut, i from
  0, is fast recovery while i < F, additive at i = F, hyper above); each
  bumps its own stage counter, then with F = ``fast_recovery_stages``:
    * fast recovery while both counters are <= F: Rc <- (Rt + Rc) / 2;
    * hyper increase once both are > F: Rt += (min(counters) - F) R_HAI
      (``hyper_increase="linear"``, the paper) or Rt += R_HAI
      (``"constant"``, ns-3 HyperIncreaseMlx), then Rc <- (Rt + Rc) / 2;
    * additive increase otherwise: Rt += R_AI, then Rc <- (Rt + Rc) / 2.
  At line rate both stop until the next cut (the NIC releases the rate
  limiter); the alpha timer keeps running.

Units: seconds, bit/s, bytes; the controller is called with CLOCK_MONOTONIC
nanoseconds (the transport's RateController protocol). It is lazy: every call
first replays the timer expiries up to ``now`` in time order (alpha updates
before a cut due at the same time, as in ns-3), so a late ``on_timer`` only
shifts when a rate takes effect, never what it is. Alpha updates alone never
need a wake-up: they are replayed on the next event.

``on_event`` (optional) receives one dict per cut and per increase event:
the trajectory (Rc, Rt, alpha, stage) that agents write to their timelines.

Reduced-scale emulation: ``DcqcnParams.scaled(line_rate_bps, scale)`` dilates
time by ``scale`` (a number or the transport's ``Scale``, whose ``slowdown`` is
used; the testbed link of line_rate_bps emulates one ``scale`` times faster):
timers x scale, rate steps / scale, byte thresholds unchanged. So a testbed
link sees the same number of packets per timer period and per byte-counter
period, and the same rate steps relative to its line rate, as the NIC.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Literal, TypedDict, Union

from hosts.roce.scale import Scale

__all__ = [
    "DcqcnParams",
    "Dcqcn",
    "PRESETS",
    "DEFAULT_PRESET",
    "ZHU2015",
    "CONNECTX",
    "preset_name",
]

# The DCQCN paper (Zhu et al., SIGCOMM 2015), in its symbols and units:
# g, alpha timer K, rate-increase timer T, byte counter B, fast-recovery steps F,
# R_AI; the notification point sends at most one CNP per flow per 50 us. The
# paper gives no R_HAI or minimum rate: R_HAI = 10 R_AI (QCN's ratio, as the
# NIC's 5/50 Mb/s) and the minimum rate = R_AI.
ZHU2015: dict[str, float] = {
    "g": 1.0 / 256,
    "initial_alpha": 1.0,
    "K_us": 55.0,
    "T_us": 55.0,
    "B_bytes": 10_000_000,
    "F": 5,
    "R_AI_Mbps": 40.0,
    "R_HAI_Mbps": 400.0,
    "R_min_Mbps": 40.0,
    "cnp_interval_us": 50.0,
}

# ConnectX (mlx5) congestion-control parameters with their firmware defaults
# (mlxconfig / sysfs names and units: us, bytes, Mb/s, 1/1024 fractions).
# min_time_between_cnps is 4 us on ConnectX-5/6 firmware (some releases show 2).
CONNECTX: dict[str, float] = {
    "rpg_time_reset": 300,               # us between timer increase events
    "rpg_byte_reset": 32767,             # bytes between byte-counter events
    "rpg_threshold": 1,                  # F
    "rpg_ai_rate": 5,                    # Mb/s
    "rpg_hai_rate": 50,                  # Mb/s
    "rpg_gd": 11,                        # cut = alpha_fixed / 2^rpg_gd (alpha_fixed in 1/1024)
    "rpg_min_dec_fac": 50,               # %: one cut leaves at least this much of Rc
    "rpg_min_rate": 1,                   # Mb/s
    "rate_reduce_monitor_period": 4,     # us
    "initial_alpha_value": 1023,         # /1024
    "dce_tcp_g": 1019,                   # /1024, weight of the old alpha
    "dce_tcp_rtt": 1,                    # us between alpha updates
    "clamp_tgt_rate": 0,
    "clamp_tgt_rate_after_time_inc": 1,
    "min_time_between_cnps": 4,          # us (notification point)
}

# HPCC's simulator with its DCQCN configuration (run.py, --cc dcqcn; config
# names and units: us, Mb/s) at Symphony's 10 Gb/s NICs. run.py scales the
# rate steps with the NIC's rate, 5 x bw/25 and 50 x bw/25 Mb/s (bw in Gb/s),
# and writes MIN_RATE 1000 Mb/s for every rate. Its receiver echoes ECN on
# every packet's ACK and the sender looks for one each alpha period
# (ALPHA_RESUME_INTERVAL) and each decrease check (RATE_DECREASE_INTERVAL):
# one CNP per alpha period carries the same information, so the notification
# point's interval is that period.
HPCC: dict[str, float] = {
    "RP_TIMER": 300,                     # us between timer increase events
    "ALPHA_RESUME_INTERVAL": 1,          # us between alpha updates
    "RATE_DECREASE_INTERVAL": 4,         # us between rate-decrease checks
    "EWMA_GAIN": 1.0 / 256,
    "FAST_RECOVERY_TIMES": 1,            # F
    "RATE_AI": 5 * 10 / 25,              # Mb/s at 10 Gb/s
    "RATE_HAI": 50 * 10 / 25,            # Mb/s at 10 Gb/s
    "MIN_RATE": 1000,                    # Mb/s
    "CLAMP_TARGET_RATE": 0,
}

PRESETS: dict[str, dict[str, float]] = {"zhu2015": ZHU2015, "connectx": CONNECTX,
                                        "hpcc": HPCC}
# ConnectX: the Symphony prototype ran ConnectX-6 NICs with DCQCN on, and the
# experiments model what such a NIC does.
DEFAULT_PRESET = "connectx"
# Names earlier runs saved in their specs.
_ALIASES = {"paper": "zhu2015", "nic": "connectx"}


def preset_name(name: str) -> str:
    """The preset's name (accepting the older names "paper" and "nic")."""
    name = _ALIASES.get(name, name)
    if name not in PRESETS:
        raise ValueError(f"unknown DCQCN preset {name!r} (known: {', '.join(sorted(PRESETS))})")
    return name


# A reaction point's cut or increase, for timelines: its kind, time and rates.
DcqcnEvent = dict[str, Union[float, str]]  # noqa: UP007 (runs on Python 3.9)


class _Derived(TypedDict):
    """A preset's values as DcqcnParams' fields (before scaling)."""

    g: float
    initial_alpha: float
    alpha_update_period_s: float
    rate_increase_period_s: float
    byte_counter_bytes: int
    fast_recovery_stages: int
    rai_bps: float
    rhai_bps: float
    min_rate_bps: float
    rate_reduce_monitor_period_s: float
    cnp_interval_s: float
    decrease_gain: float
    min_decrease_factor: float
    alpha_rule: Literal["per_cnp", "per_period"]
    clamp: Literal["always", "after_timer_increase", "never"]
    hyper_increase: Literal["linear", "constant"]


def _preset_values(preset: str, overrides: Mapping[str, float]) -> dict[str, float]:
    base = PRESETS[preset]
    unknown = sorted(set(overrides) - set(base))
    if unknown:
        raise ValueError(f"DCQCN preset {preset}: unknown parameter(s) {unknown} "
                         f"(known: {', '.join(base)})")
    return {**base, **{k: float(v) for k, v in overrides.items()}}


def _zhu2015_fields(v: Mapping[str, float]) -> _Derived:
    return {
        "g": v["g"], "initial_alpha": v["initial_alpha"],
        "alpha_update_period_s": v["K_us"] * 1e-6,
        "rate_increase_period_s": v["T_us"] * 1e-6,
        "byte_counter_bytes": int(v["B_bytes"]),
        "fast_recovery_stages": int(v["F"]),
        "rai_bps": v["R_AI_Mbps"] * 1e6, "rhai_bps": v["R_HAI_Mbps"] * 1e6,
        "min_rate_bps": v["R_min_Mbps"] * 1e6,
        "rate_reduce_monitor_period_s": 0.0,
        "cnp_interval_s": v["cnp_interval_us"] * 1e-6,
        "decrease_gain": 0.5, "min_decrease_factor": 0.0,
        "alpha_rule": "per_cnp", "clamp": "always", "hyper_increase": "linear",
    }


def _connectx_fields(v: Mapping[str, float]) -> _Derived:
    clamp: Literal["always", "after_timer_increase", "never"]
    if v["clamp_tgt_rate"]:
        clamp = "always"
    elif v["clamp_tgt_rate_after_time_inc"]:
        clamp = "after_timer_increase"
    else:
        clamp = "never"
    return {
        "g": (1024 - v["dce_tcp_g"]) / 1024,
        "initial_alpha": v["initial_alpha_value"] / 1024,
        "alpha_update_period_s": v["dce_tcp_rtt"] * 1e-6,
        "rate_increase_period_s": v["rpg_time_reset"] * 1e-6,
        "byte_counter_bytes": int(v["rpg_byte_reset"]),
        "fast_recovery_stages": int(v["rpg_threshold"]),
        "rai_bps": v["rpg_ai_rate"] * 1e6, "rhai_bps": v["rpg_hai_rate"] * 1e6,
        "min_rate_bps": v["rpg_min_rate"] * 1e6,
        "rate_reduce_monitor_period_s": v["rate_reduce_monitor_period"] * 1e-6,
        "cnp_interval_s": v["min_time_between_cnps"] * 1e-6,
        "decrease_gain": 2.0 ** (10 - v["rpg_gd"]),
        "min_decrease_factor": v["rpg_min_dec_fac"] / 100,
        "alpha_rule": "per_period", "clamp": clamp, "hyper_increase": "constant",
    }


def _hpcc_fields(v: Mapping[str, float]) -> _Derived:
    return {
        "g": v["EWMA_GAIN"], "initial_alpha": 1.0,
        "alpha_update_period_s": v["ALPHA_RESUME_INTERVAL"] * 1e-6,
        "rate_increase_period_s": v["RP_TIMER"] * 1e-6,
        "byte_counter_bytes": 0,
        "fast_recovery_stages": int(v["FAST_RECOVERY_TIMES"]),
        "rai_bps": v["RATE_AI"] * 1e6, "rhai_bps": v["RATE_HAI"] * 1e6,
        "min_rate_bps": v["MIN_RATE"] * 1e6,
        "rate_reduce_monitor_period_s": v["RATE_DECREASE_INTERVAL"] * 1e-6,
        "cnp_interval_s": v["ALPHA_RESUME_INTERVAL"] * 1e-6,
        "decrease_gain": 0.5, "min_decrease_factor": 0.0,
        "alpha_rule": "per_period",
        "clamp": "always" if v["CLAMP_TARGET_RATE"] else "after_timer_increase",
        "hyper_increase": "constant",
    }


_FIELDS_OF = {"zhu2015": _zhu2015_fields, "connectx": _connectx_fields, "hpcc": _hpcc_fields}
_TIME_FIELDS: tuple[Literal["alpha_update_period_s", "rate_increase_period_s",
                            "rate_reduce_monitor_period_s", "cnp_interval_s"], ...] = (
    "alpha_update_period_s", "rate_increase_period_s", "rate_reduce_monitor_period_s",
    "cnp_interval_s")
_RATE_FIELDS: tuple[Literal["rai_bps", "rhai_bps", "min_rate_bps"], ...] = (
    "rai_bps", "rhai_bps", "min_rate_bps")


def _scale_factor(scale: float | Scale) -> float:
    """A plain number, or the transport's Scale (its slowdown)."""
    return float(scale.slowdown if isinstance(scale, Scale) else scale)


@dataclass(frozen=True)
class DcqcnParams:
    """Reaction- and notification-point settings in testbed units (s, bit/s, bytes).
    Build them from a preset with ``scaled`` / ``for_scale``."""

    line_rate_bps: float
    g: float
    initial_alpha: float
    alpha_update_period_s: float
    rate_increase_period_s: float
    byte_counter_bytes: int
    fast_recovery_stages: int
    rai_bps: float
    rhai_bps: float
    min_rate_bps: float
    rate_reduce_monitor_period_s: float
    cnp_interval_s: float                       # notification point
    decrease_gain: float = 0.5                  # cut = alpha * decrease_gain
    min_decrease_factor: float = 0.0            # a cut leaves at least this share of Rc
    alpha_rule: Literal["per_cnp", "per_period"] = "per_cnp"
    clamp: Literal["always", "after_timer_increase", "never"] = "always"
    hyper_increase: Literal["linear", "constant"] = "linear"
    scale: float = 1.0                          # time dilation these were derived with
    preset: str = "zhu2015"
    preset_values: tuple[tuple[str, float], ...] = ()   # the preset's own names, unscaled

    def __post_init__(self) -> None:
        checks = (
            (self.line_rate_bps > 0, "line_rate_bps must be positive"),
            (0 < self.g < 1, "g must be in (0, 1)"),
            (0 <= self.initial_alpha <= 1, "initial alpha must be in [0, 1]"),
            (self.alpha_update_period_s > 0 and self.rate_increase_period_s > 0,
             "the alpha and rate-increase periods must be positive"),
            (self.byte_counter_bytes >= 0, "the byte counter must be >= 0 (0: none)"),
            (self.fast_recovery_stages >= 0, "F must be >= 0"),
            (self.rai_bps >= 0 and self.rhai_bps >= 0, "rate steps must be >= 0"),
            (0 < self.min_rate_bps <= self.line_rate_bps,
             "the minimum rate must be in (0, line rate]"),
            (self.rate_reduce_monitor_period_s >= 0 and self.cnp_interval_s >= 0,
             "the monitor period and CNP interval must be >= 0"),
            (0 < self.decrease_gain <= 1, "decrease gain must be in (0, 1] (rpg_gd >= 10)"),
            (0 <= self.min_decrease_factor <= 1, "min decrease factor must be in [0, 1]"),
            (self.alpha_rule in ("per_cnp", "per_period"), "alpha_rule: per_cnp|per_period"),
            (self.clamp in ("always", "after_timer_increase", "never"),
             "clamp: always|after_timer_increase|never"),
            (self.hyper_increase in ("linear", "constant"), "hyper_increase: linear|constant"),
        )
        for ok, msg in checks:
            if not ok:
                raise ValueError(f"DCQCN ({self.preset}): {msg}")

    @classmethod
    def scaled(cls, line_rate_bps: float, scale: float | Scale = 1.0,
               preset: str = DEFAULT_PRESET, **overrides: float) -> DcqcnParams:
        """Parameters for a testbed link of ``line_rate_bps`` emulating a link
        ``scale`` times faster. ``overrides`` replace preset values and use the
        preset's own names and units (e.g. ``rpg_ai_rate=10`` for connectx,
        ``R_AI_Mbps=20`` for zhu2015)."""
        name = preset_name(preset)
        s = _scale_factor(scale)
        if not s > 0:
            raise ValueError(f"DCQCN: scale must be positive, got {s}")
        values = _preset_values(name, overrides)
        f = _FIELDS_OF[name](values)
        for k in _TIME_FIELDS:
            f[k] *= s
        for r in _RATE_FIELDS:
            f[r] /= s
        f["min_rate_bps"] = min(f["min_rate_bps"], line_rate_bps)
        return cls(line_rate_bps=line_rate_bps, scale=s, preset=name,
                   preset_values=tuple(values.items()), **f)

    @classmethod
    def for_scale(cls, scale: Scale, preset: str = DEFAULT_PRESET,
                  **overrides: float) -> DcqcnParams:
        """Parameters for the transport's ``Scale`` (its line rate and slowdown)."""
        return cls.scaled(scale.line_rate_bps, scale, preset, **overrides)

    @property
    def cnp_interval_ns(self) -> int:
        return round(self.cnp_interval_s * 1e9)

    @property
    def emulated_line_rate_bps(self) -> float:
        return self.line_rate_bps * self.scale

    def packets_per_timer_period(self, packet_bytes: int) -> float:
        """Full-rate packets sent per rate-increase timer period."""
        return self.line_rate_bps * self.rate_increase_period_s / 8 / packet_bytes

    def packets_per_byte_counter(self, packet_bytes: int) -> float:
        return self.byte_counter_bytes / packet_bytes

    def as_dict(self) -> dict[str, Any]:
        """Plain data for run outputs: the derived values and the preset's own."""
        d = dataclasses.asdict(self)
        d["preset_values"] = dict(self.preset_values)
        d["emulated_line_rate_bps"] = self.emulated_line_rate_bps
        return d


@dataclass
class DcqcnStats:
    cnps: int = 0
    rate_cuts: int = 0
    deferred_cnps: int = 0      # CNPs inside a monitor period (cut at its end)
    fast_recovery: int = 0
    additive_increase: int = 0
    hyper_increase: int = 0
    timer_events: int = 0
    byte_counter_events: int = 0
    alpha_updates: int = 0


_STAGE_NAMES = ("fast_recovery", "additive", "hyper")


class Dcqcn:
    """DCQCN reaction point for one flow (one QP); a transport RateController."""

    def __init__(self, params: DcqcnParams, now_ns: int = 0,
                 on_event: Callable[[DcqcnEvent], None] | None = None) -> None:
        self.params = params
        self.on_event = on_event
        self.rc = float(params.line_rate_bps)   # current rate
        self.rt = float(params.line_rate_bps)   # target rate
        self.alpha = float(params.initial_alpha)
        self.timer_stage = 0    # rate-increase timer expiries since the last cut
        self.byte_stage = 0     # byte-counter expiries since the last cut
        self.stats = DcqcnStats()
        self._bytes = 0
        self._k = params.alpha_update_period_s * 1e9
        self._t = params.rate_increase_period_s * 1e9
        self._monitor = params.rate_reduce_monitor_period_s * 1e9
        self._per_period = params.alpha_rule == "per_period"
        self._alpha_due: float | None = None      # None until the first CNP
        self._cnp_in_period = False               # per_period rule: a CNP since the last update
        self._increase_due: float | None = None   # None at line rate
        self._cut_due: float | None = None        # a cut deferred by the monitor period
        self._last_cut: float | None = None
        self._now = float(now_ns)

    # ---- RateController protocol ----
    @property
    def rate_bps(self) -> float:
        return self.rc

    def on_cnp(self, now_ns: int) -> None:
        self._advance(now_ns)
        now = self._now
        self.stats.cnps += 1
        if self._alpha_due is None:
            # First CNP: alpha (held until now) starts from its initial value.
            self.alpha = self.params.initial_alpha
            self._alpha_due = now + self._k
        elif self._per_period:
            self._cnp_in_period = True
        if self._cut_due is not None or (
                self._last_cut is not None and now - self._last_cut < self._monitor):
            self.stats.deferred_cnps += 1
            if self._cut_due is None:
                assert self._last_cut is not None
                self._cut_due = self._last_cut + self._monitor
            if not self._per_period:
                self._alpha_on_cnp(now)
            return
        self._cut(now)
        if not self._per_period:
            self._alpha_on_cnp(now)

    def on_bytes_sent(self, nbytes: int, now_ns: int) -> None:
        self._advance(now_ns)
        if self._increase_due is None:
            return  # at line rate: nothing to recover
        b = self.params.byte_counter_bytes
        if not b:
            return  # no byte counter: the timer alone
        self._bytes += nbytes
        while self._bytes >= b and self._increase_due is not None:
            self._bytes -= b
            self.byte_stage += 1
            self.stats.byte_counter_events += 1
            self._increase("bytes", self._now)

    def bytes_to_increase(self) -> int | None:
        """Bytes still to send before the byte counter's next increase event;
        None while the counter does not run (at line rate: before the first cut
        and once recovered), when bytes sent are not counted at all."""
        if self._increase_due is None or not self.params.byte_counter_bytes:
            return None
        return self.params.byte_counter_bytes - self._bytes

    def next_deadline(self) -> int | None:
        """When on_timer should next run (ns): a rate increase or a deferred cut.
        Alpha updates alone are replayed lazily."""
        due = [d for d in (self._increase_due, self._cut_due) if d is not None]
        return math.ceil(min(due)) if due else None

    def on_timer(self, now_ns: int) -> None:
        self._advance(now_ns)

    # ---- internals ----
    def _alpha_on_cnp(self, now: float) -> None:
        g = self.params.g
        self.alpha = (1 - g) * self.alpha + g
        self.stats.alpha_updates += 1
        self._alpha_due = now + self._k

    def _advance(self, now_ns: int) -> None:
        """Replay every timer expiry up to now in time order (alpha, then cut,
        then increase when due at the same time)."""
        now = float(now_ns)
        if now < self._now:
            now = self._now  # clocks never run backwards here
        g = self.params.g
        while True:
            a, c, i = self._alpha_due, self._cut_due, self._increase_due
            if a is not None and a <= now and (c is None or a <= c) and (i is None or a <= i):
                if c is None and i is None and not self._cnp_in_period:
                    # Nothing else pending: apply all remaining decays at once.
                    k = int((now - a) // self._k) + 1
                    self.alpha *= (1 - g) ** k
                    self.stats.alpha_updates += k
                    self._alpha_due = a + k * self._k
                else:
                    self.alpha = (1 - g) * self.alpha + (g if self._cnp_in_period else 0.0)
                    self._cnp_in_period = False
                    self.stats.alpha_updates += 1
                    self._alpha_due = a + self._k
            elif c is not None and c <= now and (i is None or c <= i):
                self._cut(c)
            elif i is not None and i <= now:
                self._increase_due = i + self._t
                self.timer_stage += 1
                self.stats.timer_events += 1
                self._increase("timer", i)
            else:
                break
        self._now = now

    def _cut(self, t: float) -> None:
        p = self.params
        deferred = self._cut_due is not None
        if p.clamp == "always" or (p.clamp == "after_timer_increase" and self.timer_stage > 0):
            self.rt = self.rc
        before = self.rc
        self.rc = max(before * (1 - self.alpha * p.decrease_gain),
                      before * p.min_decrease_factor, p.min_rate_bps)
        self.stats.rate_cuts += 1
        self.timer_stage = self.byte_stage = 0
        self._bytes = 0
        self._last_cut = t
        self._cut_due = None
        self._increase_due = t + self._t
        if self.on_event is not None:
            self.on_event({"kind": "cut", "t_ns": round(t), "rc_bps": self.rc, "rt_bps": self.rt,
                           "alpha": self.alpha, "rc_before_bps": before, "deferred": deferred})

    def _increase(self, source: str, t: float) -> None:
        p = self.params
        f = p.fast_recovery_stages
        if p.byte_counter_bytes:
            lo = min(self.timer_stage, self.byte_stage)
            hi = max(self.timer_stage, self.byte_stage)
            stage = 0 if hi <= f else 2 if lo > f else 1
            beyond = lo - f
        else:
            # the timer alone (ns-3 Mlx): the i-th event after the cut, i from 0
            i = self.timer_stage - 1
            stage = 0 if i < f else 1 if i == f else 2
            beyond = i - f
        if stage == 0:
            self.stats.fast_recovery += 1
        elif stage == 2:
            self.stats.hyper_increase += 1
            step = p.rhai_bps * (beyond if p.hyper_increase == "linear" else 1)
            self.rt = min(p.line_rate_bps, self.rt + step)
        else:
            self.stats.additive_increase += 1
            self.rt = min(p.line_rate_bps, self.rt + p.rai_bps)
        self.rc = min(p.line_rate_bps, (self.rt + self.rc) / 2)
        if self.rc >= p.line_rate_bps * (1 - 1e-6) and self.rt >= self.rc:
            # Recovered (within a NIC rate register's granularity): the rate
            # limiter is released until the next cut.
            self.rc = p.line_rate_bps
            self._increase_due = None
        if self.on_event is not None:
            self.on_event({"kind": "increase", "t_ns": round(t), "rc_bps": self.rc,
                           "rt_bps": self.rt, "alpha": self.alpha, "stage": _STAGE_NAMES[stage],
                           "source": source, "timer_stage": self.timer_stage,
                           "byte_stage": self.byte_stage})

    def state(self) -> dict[str, float]:
        """Snapshot for timelines."""
        return {
            "rc_bps": self.rc,
            "rt_bps": self.rt,
            "alpha": self.alpha,
            "timer_stage": self.timer_stage,
            "byte_stage": self.byte_stage,
            **dataclasses.asdict(self.stats),
        }
