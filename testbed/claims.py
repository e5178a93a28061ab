"""The papers' claims an experiment reproduces, and how runs are judged against them.

An experiment declares ``CLAIMS``, a tuple of :class:`Claim`, next to its
paper values (``REFERENCE`` or ``PAPER`` in its module), taking each claim's
``paper`` value from there so the paper's numbers stay in one place::

    CLAIMS = (
        Claim("Fig. 9", "the lagging step A finishes sooner", key="fct_a_change",
              paper=REFERENCE["fct_a_change"], direction="below", versus=0.0, abs_tol=0.10,
              percent=True, plots=("timelines.png",)),
    )

A claim names the figure (or table) it comes from, says in words what the
paper shows, names the dotted ``summary.json`` key that measures it, and
declares how close a run must come:

- ``direction``/``versus``: the effect's direction. ``"below"`` (``"above"``)
  means the measured value must lie below (above) ``versus``, as the paper's
  does: a change below 0, a ratio above 1, a share above the fair 0.5;
- ``rel_tol``/``abs_tol``: the size. The measured value agrees if it is
  within ``abs_tol + rel_tol x |paper|`` of the paper's.

Where the paper shows an effect without a number (a CDF with no value in the
text), ``paper`` is None: the claim then declares its direction, and the
direction alone is judged (the report shows the paper's value as that
direction).

:func:`evaluate` judges a claim over the runs of its experiment: only
finished runs count; if some were faithful, only those are judged, and the
others are listed; if none was, the claim is ``not faithful`` (the values are
shown as indications, not results). The judged value is the mean over every
sample: each run's value, or, where the claim names ``per_seed`` (a key
holding one value per seed of that run), each seed's value. The verdict is
``reproduced`` when the mean's direction and size both agree, ``not
reproduced`` otherwise, and ``not measured`` when no finished run has the key.
"""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass, field
from typing import Any, Literal

__all__ = ["Claim", "ClaimError", "ClaimResult", "RunValues", "evaluate",
           "lookup", "sample_values", "REPRODUCED", "NOT_REPRODUCED", "NOT_FAITHFUL", "NOT_MEASURED", "STATUSES"]

REPRODUCED = "reproduced"
NOT_REPRODUCED = "not reproduced"
NOT_FAITHFUL = "not faithful"
NOT_MEASURED = "not measured"
STATUSES = (REPRODUCED, NOT_REPRODUCED, NOT_FAITHFUL, NOT_MEASURED)


class ClaimError(ValueError):
    """A claim declared inconsistently (the message names the claim)."""


@dataclass(frozen=True)
class Claim:
    figure: str                   # where the paper shows it: "Fig. 9", "Table 9"
    says: str                     # the claim in words
    key: str                      # dotted summary.json key of the measured value
    paper: float | None           # the paper's value, in the key's units (None: direction only)
    rel_tol: float = 0.0          # agreement: |measured - paper| <= abs_tol + rel_tol |paper|
    abs_tol: float = 0.0
    direction: Literal["above", "below"] | None = None  # measured vs ``versus``, as the paper's
    versus: float = 0.0
    per_seed: str | None = None   # key of the per-seed values ``key`` is the mean of
    plots: tuple[str, ...] = ()   # names (globs) under the run's plots/ shown with the figure
    percent: bool = False         # a relative change: shown as a signed percentage, abs_tol in points

    def __post_init__(self) -> None:
        where = f"claim {self.figure!r} on {self.key!r}"
        if not self.figure.strip() or not self.says.strip() or not self.key.strip():
            raise ClaimError(f"{where}: figure, says and key must be non-empty")
        for name in ("paper", "rel_tol", "abs_tol", "versus"):
            v = getattr(self, name)
            if name == "paper" and v is None:
                continue
            if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v):
                raise ClaimError(f"{where}: {name} must be a finite number, not {v!r}")
        if self.rel_tol < 0 or self.abs_tol < 0:
            raise ClaimError(f"{where}: tolerances must be >= 0")
        if self.direction not in (None, "above", "below"):
            raise ClaimError(f"{where}: direction must be 'above', 'below' or None, "
                             f"not {self.direction!r}")
        if self.paper is None:
            if self.direction is None:
                raise ClaimError(f"{where}: with no paper value, declare the direction")
            if self.rel_tol or self.abs_tol:
                raise ClaimError(f"{where}: a tolerance needs the paper's value")
            return
        if self.rel_tol == 0 and self.abs_tol == 0:
            raise ClaimError(f"{where}: declare a tolerance (rel_tol or abs_tol)")
        if self.direction is not None and not self.direction_holds(self.paper):
            raise ClaimError(f"{where}: the paper's value {self.paper:g} is not "
                             f"{self.direction} {self.versus:g}")

    @property
    def tolerance(self) -> float:
        """How far from the paper's value a measured value may lie."""
        return self.abs_tol + self.rel_tol * abs(self.paper or 0.0)

    def direction_holds(self, value: float) -> bool:
        if self.direction == "above":
            return value > self.versus
        if self.direction == "below":
            return value < self.versus
        return True

    def size_holds(self, value: float) -> bool:
        if self.paper is None:
            return True                 # direction only
        return abs(value - self.paper) <= self.tolerance + 1e-12

    def _direction_text(self) -> str:
        versus = f"{self.versus * 100:g}%" if self.percent else self.fmt(self.versus)
        return f"{'>' if self.direction == 'above' else '<'} {versus}"

    def paper_text(self) -> str:
        """The paper's value as the report shows it: the number, or the
        direction where the paper gives none."""
        if self.paper is None:
            return f"{self._direction_text()} (no value given)"
        return self.fmt(self.paper)

    def fmt(self, value: float | None) -> str:
        """A value in the claim's units (percent: a change as a signed percentage)."""
        if value is None:
            return "-"
        if self.percent:
            return f"{value * 100:+.1f}%"
        return f"{value:.3g}" if abs(value) < 1000 else f"{value:.0f}"

    def fmt_spread(self, value: float) -> str:
        return f"{value * 100:.1f} points" if self.percent else f"{value:.2g}"

    def describe_rule(self) -> str:
        """The declared agreement rule in words: '< 0, within ±10 points'."""
        parts = []
        if self.direction is not None:
            parts.append(self._direction_text())
        if self.paper is None:
            return f"{parts[0]} (direction only)"
        tol = []
        if self.rel_tol:
            tol.append(f"{self.rel_tol * 100:g}% of the paper's value")
        if self.abs_tol:
            tol.append(self.fmt_spread(self.abs_tol))
        parts.append("within " + " + ".join(tol))
        return ", ".join(parts)


@dataclass(frozen=True)
class RunValues:
    """What one finished run says about a claim: its label (for the report),
    whether it was faithful, and its samples (empty: the run lacks the key)."""

    label: str
    faithful: bool
    samples: tuple[float, ...]
    verdict: str = ""


@dataclass
class ClaimResult:
    claim: Claim
    status: str
    samples: list[float] = field(default_factory=list)   # the values judged
    mean: float | None = None
    sd: float | None = None           # sample standard deviation (None below 2 samples)
    low: float | None = None
    high: float | None = None
    direction_ok: bool | None = None  # None: no direction declared, or nothing measured
    size_ok: bool | None = None
    judged: list[str] = field(default_factory=list)       # labels of the runs judged
    unfaithful: list[RunValues] = field(default_factory=list)
    why: str = ""

    @property
    def n(self) -> int:
        return len(self.samples)

    def measured_text(self) -> str:
        """'-25.0% ± 3.1% (n=3, -28.1%..-22.0%)' or '0.80 (n=1)'."""
        c = self.claim
        if self.mean is None:
            return "-"
        text = c.fmt(self.mean)
        if self.sd is not None:
            text += f" ± {c.fmt_spread(self.sd)} (n={self.n}, {c.fmt(self.low)}..{c.fmt(self.high)})"
        else:
            text += f" (n={self.n})"
        return text


def sample_values(summary: dict[str, Any], claim: Claim) -> tuple[float, ...]:
    """The samples a run's summary holds for ``claim``: the per-seed list if
    declared and present, else the key's value; empty if the run lacks it."""
    if claim.per_seed is not None:
        seeds = lookup(summary, claim.per_seed)
        if isinstance(seeds, list) and seeds and all(_is_number(x) for x in seeds):
            return tuple(float(x) for x in seeds)
    v = lookup(summary, claim.key)
    return (float(v),) if _is_number(v) else ()


def lookup(summary: dict[str, Any], key: str) -> Any:
    """``summary[key]`` for a flat dotted key (the runner writes scalars so),
    else the nested value along the key's dotted path (lists are only there);
    None if absent."""
    if key in summary:
        return summary[key]
    node: Any = summary
    for part in key.split("."):
        if not isinstance(node, dict) or part not in node:
            return None
        node = node[part]
    return node


def _is_number(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


def evaluate(claim: Claim, runs: list[RunValues]) -> ClaimResult:
    """Judge ``claim`` over the finished runs of its experiment (see the module doc)."""
    measured = [r for r in runs if r.samples]
    if not measured:
        why = ("no finished run" if not runs else
               f"no finished run has {claim.key!r} ({', '.join(r.label for r in runs)})")
        return ClaimResult(claim, NOT_MEASURED, why=why)
    faithful = [r for r in measured if r.faithful]
    unfaithful = [r for r in measured if not r.faithful]
    judged = faithful or unfaithful
    samples = [x for r in judged for x in r.samples]
    mean = statistics.fmean(samples)
    res = ClaimResult(
        claim, NOT_FAITHFUL, samples=samples, mean=mean,
        sd=statistics.stdev(samples) if len(samples) > 1 else None,
        low=min(samples), high=max(samples),
        direction_ok=claim.direction_holds(mean) if claim.direction else None,
        size_ok=claim.size_holds(mean), judged=[r.label for r in judged],
        unfaithful=unfaithful)
    if not faithful:
        res.why = ("no run behind it was faithful: its values are indications, not results")
        return res
    agree = res.size_ok and res.direction_ok is not False
    res.status = REPRODUCED if agree else NOT_REPRODUCED
    if not agree:
        wrong = []
        if res.direction_ok is False:
            versus = f"{claim.versus * 100:g}%" if claim.percent else claim.fmt(claim.versus)
            wrong.append(f"direction: {claim.fmt(mean)} is not {claim.direction} {versus}")
        if not res.size_ok and claim.paper is not None:
            wrong.append(f"size: {claim.fmt(mean)} is {claim.fmt_spread(abs(mean - claim.paper))} "
                         f"from the paper's {claim.fmt(claim.paper)} (tolerance "
                         f"{claim.fmt_spread(claim.tolerance)})")
        res.why = "; ".join(wrong)
    return res
