"""DCQCN reaction point (the sender side of Zhu et al., SIGCOMM 2015).

State: current rate Rc, target rate Rt, congestion estimate alpha.

- CNP: Rt <- Rc, Rc <- Rc * (1 - alpha/2), alpha <- (1-g) alpha + g; the rate
  increase timer, the byte counter and both stage counters restart.
- Alpha timer: every K without a CNP, alpha <- (1-g) alpha.
- Rate increase events come from a timer (every T) and a byte counter (every B
  bytes sent); each one bumps its own stage counter and then
    * fast recovery while both counters are at most F (F steps after a cut):
      Rc <- (Rt+Rc)/2
    * hyper increase once both exceed F:  Rt += i*R_HAI, i = min(counters) - F
    * additive increase otherwise:  Rt += R_AI
  followed (for AI/HI) by Rc <- (Rt+Rc)/2.
- Rc never drops below the minimum rate; Rt and Rc never exceed line rate.

Parameters are in seconds, bit/s and bytes; the controller is called with
CLOCK_MONOTONIC nanoseconds (the transport's RateController protocol). It is
lazy: every call first replays the timer expiries up to `now` in order, so a
late `on_timer` only shifts when the rate takes effect, never what the rate is. At line rate the increase timer is idle (nothing to recover) and
the alpha decay is replayed on the next event, so an idle flow costs no wakeups.

Reduced-scale emulation: `DcqcnParams.scaled(line_rate_bps, scale)` dilates
time by `scale` (a number, or the transport's `Scale` whose `slowdown` is used;
the testbed emulates a link of line_rate_bps * scale): timers
are multiplied by `scale`, rate steps divided by it, byte thresholds kept. So a
testbed link sees the same number of packets per timer period and per
byte-counter period, and the same rate steps relative to its line rate, as a
NIC on the emulated link. (Byte thresholds are not divided by the slowdown:
that would make the byte counter fire `scale` times more often per timer period.)
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from typing import Any

__all__ = [
    "DcqcnParams",
    "Dcqcn",
    "PAPER_DEFAULTS",
    "NIC_DEFAULTS",
    "MLX5_NAMES",
]

# Reaction-point parameters as unscaled absolute values (a NIC on a real link).
# Paper: DCQCN (SIGCOMM 2015) defaults: g = 1/256, K = 55 us, timer T = 55 us,
# byte counter B = 10 MB, F = 5, R_AI = 40 Mb/s; the NP sends at most one CNP
# per 50 us per flow. R_HAI = 10 * R_AI and the floor R_AI are the ratios the NIC
# defaults below use.
PAPER_DEFAULTS: dict[str, Any] = {
    "g": 1.0 / 256,
    "initial_alpha": 1.0,
    "alpha_update_period_s": 55e-6,
    "rate_increase_period_s": 55e-6,
    "byte_counter_bytes": 10_000_000,
    "fast_recovery_stages": 5,
    "rai_bps": 40e6,
    "rhai_bps": 400e6,
    "min_rate_bps": 40e6,
    "rate_reduce_monitor_period_s": 0.0,
    "cnp_interval_s": 50e-6,
}

# ConnectX (mlx5) firmware defaults for the parameters that have them
# (rpg_time_reset, rpg_byte_reset, rpg_threshold, rpg_ai_rate, rpg_hai_rate,
# rpg_min_rate, rate_reduce_monitor_period, min_time_between_cnps); g and K
# stay at the paper's values.
NIC_DEFAULTS: dict[str, Any] = {
    **PAPER_DEFAULTS,
    "rate_increase_period_s": 300e-6,
    "byte_counter_bytes": 32767,
    "fast_recovery_stages": 1,
    "rai_bps": 5e6,
    "rhai_bps": 50e6,
    "min_rate_bps": 1e6,
    "rate_reduce_monitor_period_s": 4e-6,
    "cnp_interval_s": 4e-6,
}

PRESETS: dict[str, dict[str, Any]] = {"paper": PAPER_DEFAULTS, "nic": NIC_DEFAULTS}

# Our parameter name -> the mlx5 congestion-control parameter it corresponds to.
MLX5_NAMES: dict[str, str] = {
    "rate_increase_period_s": "rpg_time_reset",
    "byte_counter_bytes": "rpg_byte_reset",
    "fast_recovery_stages": "rpg_threshold",
    "rai_bps": "rpg_ai_rate",
    "rhai_bps": "rpg_hai_rate",
    "min_rate_bps": "rpg_min_rate",
    "line_rate_bps": "rpg_max_rate",
    "g": "dce_tcp_g",
    "alpha_update_period_s": "dce_tcp_rtt",
    "initial_alpha": "initial_alpha_value",
    "rate_reduce_monitor_period_s": "rate_reduce_monitor_period",
    "cnp_interval_s": "min_time_between_cnps",
}

_TIME_FIELDS = (
    "alpha_update_period_s",
    "rate_increase_period_s",
    "rate_reduce_monitor_period_s",
    "cnp_interval_s",
)
_RATE_FIELDS = ("rai_bps", "rhai_bps", "min_rate_bps")


def _scale_factor(scale: Any) -> float:
    """Accept a plain number or a scale-setting object carrying the factor."""
    for attr in ("slowdown", "time_factor", "time_scale", "factor"):
        v = getattr(scale, attr, None)
        if isinstance(v, (int, float)):
            return float(v)
    return float(scale)


@dataclass(frozen=True)
class DcqcnParams:
    """Reaction-point parameters, already in testbed units (seconds, bit/s, bytes)."""

    line_rate_bps: float
    g: float = PAPER_DEFAULTS["g"]
    initial_alpha: float = PAPER_DEFAULTS["initial_alpha"]
    alpha_update_period_s: float = PAPER_DEFAULTS["alpha_update_period_s"]
    rate_increase_period_s: float = PAPER_DEFAULTS["rate_increase_period_s"]
    byte_counter_bytes: int = PAPER_DEFAULTS["byte_counter_bytes"]
    fast_recovery_stages: int = PAPER_DEFAULTS["fast_recovery_stages"]
    rai_bps: float = PAPER_DEFAULTS["rai_bps"]
    rhai_bps: float = PAPER_DEFAULTS["rhai_bps"]
    min_rate_bps: float = PAPER_DEFAULTS["min_rate_bps"]
    # A CNP within this long of the previous cut is counted but does not cut again.
    rate_reduce_monitor_period_s: float = PAPER_DEFAULTS["rate_reduce_monitor_period_s"]
    # Notification-point side: at most one CNP per flow per this interval.
    cnp_interval_s: float = PAPER_DEFAULTS["cnp_interval_s"]
    # Time dilation these values were derived with (1 = a real NIC).
    scale: float = 1.0
    preset: str = "paper"

    def __post_init__(self) -> None:
        if self.line_rate_bps <= 0:
            raise ValueError("line_rate_bps must be positive")
        if not 0 < self.g < 1:
            raise ValueError("g must be in (0, 1)")
        if not 0 <= self.initial_alpha <= 1:
            raise ValueError("initial_alpha must be in [0, 1]")
        if self.alpha_update_period_s <= 0 or self.rate_increase_period_s <= 0:
            raise ValueError("timer periods must be positive")
        if self.byte_counter_bytes <= 0 or self.fast_recovery_stages < 0:
            raise ValueError("byte counter must be positive, F non-negative")
        if not 0 < self.min_rate_bps <= self.line_rate_bps:
            raise ValueError("min_rate_bps must be in (0, line_rate_bps]")

    @classmethod
    def scaled(
        cls, line_rate_bps: float, scale: Any = 1.0, preset: str = "paper", **overrides: Any
    ) -> DcqcnParams:
        """Parameters for a testbed link of `line_rate_bps` emulating a link
        `scale` times faster: times x scale, rates / scale, bytes unchanged.
        `overrides` are unscaled (NIC) values replacing the preset's."""
        if preset not in PRESETS:
            raise ValueError(f"unknown DCQCN preset {preset!r} (known: {sorted(PRESETS)})")
        s = _scale_factor(scale)
        if s <= 0:
            raise ValueError("scale must be positive")
        base = {**PRESETS[preset], **overrides}
        unknown = set(base) - {f.name for f in dataclasses.fields(cls)}
        if unknown:
            raise TypeError(f"unknown DCQCN parameters: {sorted(unknown)}")
        for k in _TIME_FIELDS:
            base[k] = base[k] * s
        for k in _RATE_FIELDS:
            base[k] = base[k] / s
        base["min_rate_bps"] = min(base["min_rate_bps"], line_rate_bps)
        np_interval = getattr(scale, "cnp_interval_ns", None)
        if isinstance(np_interval, int) and "cnp_interval_s" not in overrides:
            base["cnp_interval_s"] = np_interval / 1e9  # the transport's NP setting
        return cls(line_rate_bps=line_rate_bps, scale=s, preset=preset, **base)

    @classmethod
    def for_scale(cls, scale: Any, preset: str = "paper", **overrides: Any) -> DcqcnParams:
        """Parameters for the transport's `Scale` (its line rate and slowdown)."""
        return cls.scaled(scale.line_rate_bps, scale, preset=preset, **overrides)

    @property
    def emulated_line_rate_bps(self) -> float:
        return self.line_rate_bps * self.scale

    def packets_per_timer_period(self, packet_bytes: int) -> float:
        """Full-rate packets sent per rate-increase timer period."""
        return self.line_rate_bps * self.rate_increase_period_s / 8 / packet_bytes

    def packets_per_byte_counter(self, packet_bytes: int) -> float:
        return self.byte_counter_bytes / packet_bytes

    def as_dict(self) -> dict[str, Any]:
        """Plain data for run outputs, including the mlx5 name of each field."""
        d = dataclasses.asdict(self)
        d["emulated_line_rate_bps"] = self.emulated_line_rate_bps
        d["mlx5_names"] = dict(MLX5_NAMES)
        return d


@dataclass
class DcqcnStats:
    cnps: int = 0
    rate_cuts: int = 0
    fast_recovery: int = 0
    additive_increase: int = 0
    hyper_increase: int = 0
    timer_events: int = 0
    byte_counter_events: int = 0
    alpha_decays: int = 0


class Dcqcn:
    """DCQCN reaction point for one flow (one QP); a transport RateController.

    The transport calls it with CLOCK_MONOTONIC nanoseconds (ints)."""

    def __init__(self, params: DcqcnParams, now_ns: int = 0) -> None:
        self.params = params
        self.rc = float(params.line_rate_bps)  # current rate
        self.rt = float(params.line_rate_bps)  # target rate
        self.alpha = float(params.initial_alpha)
        self.timer_stage = 0  # T: rate-increase timer expiries since the last cut
        self.byte_stage = 0  # BC: byte-counter expiries since the last cut
        self._bytes = 0  # bytes sent since the last byte-counter expiry
        self._k_ns = params.alpha_update_period_s * 1e9
        self._t_ns = params.rate_increase_period_s * 1e9
        self._monitor_ns = params.rate_reduce_monitor_period_s * 1e9
        self._alpha_due = float(now_ns) + self._k_ns
        self._increase_due: float | None = None  # None while at line rate
        self._last_cut: float | None = None
        self._now = float(now_ns)
        self.stats = DcqcnStats()

    # ---- RateController protocol ----
    @property
    def rate_bps(self) -> float:
        return self.rc

    def on_cnp(self, now_ns: int) -> None:
        self._advance(now_ns)
        now = self._now
        p = self.params
        self.stats.cnps += 1
        if (
            self._last_cut is not None
            and self._monitor_ns > 0
            and now - self._last_cut < self._monitor_ns
        ):
            return
        self._last_cut = now
        self.stats.rate_cuts += 1
        self.rt = self.rc
        self.rc = max(p.min_rate_bps, self.rc * (1 - self.alpha / 2))
        self.alpha = (1 - p.g) * self.alpha + p.g
        self.timer_stage = 0
        self.byte_stage = 0
        self._bytes = 0
        self._alpha_due = now + self._k_ns
        self._increase_due = now + self._t_ns

    def on_bytes_sent(self, nbytes: int, now_ns: int) -> None:
        self._advance(now_ns)
        if self._increase_due is None:
            return  # at line rate: nothing to recover
        self._bytes += nbytes
        while self._bytes >= self.params.byte_counter_bytes and self._increase_due is not None:
            self._bytes -= self.params.byte_counter_bytes
            self.byte_stage += 1
            self.stats.byte_counter_events += 1
            self._increase()

    def next_deadline(self) -> int | None:
        """When on_timer should next run (ns), or None if no timer is pending.
        Alpha decay alone is not a deadline: it is replayed lazily."""
        if self._increase_due is None:
            return None
        return math.ceil(min(self._increase_due, self._alpha_due))

    def on_timer(self, now_ns: int) -> None:
        self._advance(now_ns)

    # ---- internals ----
    def _advance(self, now_ns: int) -> None:
        """Replay every timer expiry up to now, in time order."""
        now = float(now_ns)
        if now < self._now:
            now = self._now  # clocks never run backwards here
        self._now = now
        while True:
            inc = self._increase_due
            if inc is not None and inc <= now and inc <= self._alpha_due:
                self._increase_due = inc + self._t_ns
                self.timer_stage += 1
                self.stats.timer_events += 1
                self._increase()
            elif self._alpha_due <= now:
                if self._increase_due is None:
                    # Idle at line rate: apply all remaining decays at once.
                    k = int((now - self._alpha_due) // self._k_ns) + 1
                    self.alpha *= (1 - self.params.g) ** k
                    self.stats.alpha_decays += k
                    self._alpha_due += k * self._k_ns
                else:
                    self.alpha *= 1 - self.params.g
                    self.stats.alpha_decays += 1
                    self._alpha_due += self._k_ns
            else:
                return

    def _increase(self) -> None:
        p = self.params
        f = p.fast_recovery_stages
        lo = min(self.timer_stage, self.byte_stage)
        hi = max(self.timer_stage, self.byte_stage)
        if hi <= f:
            self.stats.fast_recovery += 1
        elif lo > f:
            self.stats.hyper_increase += 1
            self.rt = min(p.line_rate_bps, self.rt + (lo - f) * p.rhai_bps)
        else:
            self.stats.additive_increase += 1
            self.rt = min(p.line_rate_bps, self.rt + p.rai_bps)
        self.rc = min(p.line_rate_bps, (self.rt + self.rc) / 2)
        if self.rc >= p.line_rate_bps * (1 - 1e-6) and self.rt >= self.rc:
            # Recovered (within a NIC rate-register granularity): stop the increase
            # timer until the next CNP.
            self.rc = p.line_rate_bps
            self._increase_due = None

    def state(self) -> dict[str, Any]:
        """Snapshot for timelines."""
        return {
            "rc_bps": self.rc,
            "rt_bps": self.rt,
            "alpha": self.alpha,
            "timer_stage": self.timer_stage,
            "byte_stage": self.byte_stage,
            **dataclasses.asdict(self.stats),
        }
