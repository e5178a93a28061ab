"""Cross-validation: the same plans on both engines, figure by figure.

A simulated result means something once the virtual-time engine and the
Mininet engine agree on the same plan. :func:`validate` runs each
experiment of :data:`FIGURES` on both (the Mininet engine ``mininet_runs``
times, the virtual-time engine once per seed) and compares the figures each
declares:

- ``exact``: a collective's bit-exactness: every run of both engines True;
- a tolerance (e.g. 0.05): the engines' means within that fraction of the
  Mininet mean;
- ``spread``: a count that varies with where marks or losses fall (CE marks,
  CNPs, retransmissions): the simulated mean within the range of the
  Mininet runs (meaningful from about four of them).

Only faithful Mininet runs count; one that was not faithful is listed and
left out. The result is ``validation.json`` and ``validation.md`` in the
output directory, every run's directory beside them.
"""

from __future__ import annotations

import json
import statistics
from collections.abc import Callable
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any, TypedDict

from testbed.runner import RunError, RunOptions, flatten_keys, run

__all__ = ["FIGURES", "Comparison", "RunRecord", "validate", "compare", "markdown"]

EXACT, SPREAD = "exact", "spread"

# one run's value of a figure: a bit-exactness flag or a number
FigureValue = bool | float

# experiment -> (result key, how the engines must agree)
FIGURES: dict[str, tuple[tuple[str, float | str], ...]] = {
    "ring-allreduce": (("allreduce.bit_exact", EXACT), ("allreduce.mean_s", 0.05)),
    "epic-allreduce": (("bit_exact", EXACT), ("ratio_large", 0.05), ("link_fraction", 0.05)),
    "epic-primitives": (("bit_exact", EXACT), ("ratio_reduce", 0.05),
                        ("ratio_broadcast", 0.05)),
    "roce-basics": (("single.goodput_fraction", 0.05), ("pair.utilization", 0.05),
                    ("pair.jain_index", 0.05), ("loss.goodput_fraction", 0.05),
                    ("pair.ce_marked_pkts", SPREAD), ("pair.cnps", SPREAD),
                    ("loss.retransmissions", SPREAD)),
    # the flows' FCT changes vary with where the marks fall, on both engines
    "symphony-two-flows": (("standalone_fct_s", 0.05), ("fct_a_change", SPREAD),
                           ("fct_b_change", SPREAD)),
    "reflex-cases": (("case1.regular_rate_fraction", 0.05),
                     ("case2.flexible_rate_fraction", 0.05)),
}


@dataclass
class Comparison:
    experiment: str
    key: str
    rule: float | str
    mininet: list[FigureValue]
    sim: list[FigureValue]
    verdict: str            # "agrees", "differs", "not measured"
    difference: float | None = None   # (sim mean - Mininet mean) / |Mininet mean|
    why: str = ""


class _RunKeys(TypedDict):
    experiment: str
    engine: str         # "mininet" or "sim"
    run: int            # 1, 2, ... per engine
    dir: str


class RunRecord(_RunKeys, total=False):
    """One run of a validation, as validation.json lists it."""
    ok: bool            # it produced a summary
    error: str          # why not
    faithful: bool
    verdict: str | None  # the run's fidelity verdict
    wall_s: float | None


@dataclass
class Validation:
    comparisons: list[Comparison] = field(default_factory=list)
    runs: list[RunRecord] = field(default_factory=list)


def _mean(xs: list[FigureValue]) -> float:
    return statistics.fmean(float(x) for x in xs)


def compare(experiment: str, key: str, rule: float | str, mininet: list[FigureValue],
            sim: list[FigureValue]) -> Comparison:
    """Judge one figure from the faithful runs' values."""
    c = Comparison(experiment, key, rule, mininet, sim, "not measured")
    if not mininet or not sim:
        c.why = "no faithful Mininet run" if not mininet else "no simulated run"
        return c
    if rule == EXACT:
        ok = all(v is True for v in mininet + sim)
        c.verdict = "agrees" if ok else "differs"
        return c
    m, s = _mean(mininet), _mean(sim)
    c.difference = (s - m) / abs(m) if m else None
    if rule == SPREAD:
        lo, hi = min(float(x) for x in mininet), max(float(x) for x in mininet)
        c.verdict = "agrees" if lo <= s <= hi else "differs"
        if len(mininet) < 4:
            c.why = f"{len(mininet)} Mininet run(s): too few for a spread"
        return c
    if c.difference is None:
        c.verdict = "agrees" if s == m else "differs"
    else:
        c.verdict = "agrees" if abs(c.difference) <= float(rule) else "differs"
    return c


def _reused(reuse: Path, name: str, k: int) -> dict[str, Any]:
    """A Mininet run of an earlier validation (its summary)."""
    path = reuse / "runs" / f"{name}-mininet-{k + 1}" / "summary.json"
    try:
        summary: dict[str, Any] = json.loads(path.read_text())
    except (OSError, ValueError) as e:
        raise RunError(f"no Mininet run to reuse at {path}: {e}") from e
    if summary.get("error"):
        raise RunError(str(summary["error"]))
    return summary


def validate(names: list[str], out: Path, *, mininet_runs: int = 1, sim_seeds: int = 4,
             quick: bool = True, host_links: str = "wire", echo: Callable[[str], None] = print,
             runner: Callable[[str, RunOptions], dict[str, Any]] = run,
             reuse_mininet: Path | None = None) -> Validation:
    """``reuse_mininet``: take the Mininet runs from an earlier validation's
    directory instead of running them (their plans must be this code's)."""
    unknown = [n for n in names if n not in FIGURES]
    if unknown:
        raise ValueError(f"no figures to compare for {', '.join(unknown)} "
                         f"(known: {', '.join(FIGURES)})")
    if mininet_runs < 1 or sim_seeds < 1:
        raise ValueError("mininet_runs and sim_seeds must be >= 1")
    out.mkdir(parents=True, exist_ok=True)
    val = Validation()
    base = RunOptions(quick=quick, echo=lambda _s: None, host_links=host_links)
    for name in names:
        values: dict[str, dict[str, list[FigureValue]]] = {"mininet": {}, "sim": {}}
        tries = ([("mininet", k, replace(base, engine="mininet")) for k in range(mininet_runs)]
                 + [("sim", k, replace(base, engine="sim", seed=k + 1))
                    for k in range(sim_seeds)])
        for engine, k, opts in tries:
            run_dir = out / "runs" / f"{name}-{engine}-{k + 1}"
            echo(f"{name}: {engine} run {k + 1}")
            rec: RunRecord = {"experiment": name, "engine": engine, "run": k + 1,
                              "dir": str(run_dir)}
            if engine == "mininet" and reuse_mininet is not None:
                rec["dir"] = str(reuse_mininet / "runs" / f"{name}-mininet-{k + 1}")
            try:
                if engine == "mininet" and reuse_mininet is not None:
                    summary = _reused(reuse_mininet, name, k)
                else:
                    summary = runner(name, replace(opts, out=run_dir))
            except RunError as e:
                rec["ok"], rec["error"] = False, str(e)
                val.runs.append(rec)
                echo(f"{name}: {engine} run {k + 1} failed: {e}")
                continue
            faithful = bool(summary.get("fidelity_ok"))
            rec["ok"], rec["faithful"] = True, faithful
            rec["verdict"] = summary.get("fidelity_verdict")
            rec["wall_s"] = summary.get("duration_s")
            val.runs.append(rec)
            if not faithful:
                echo(f"{name}: {engine} run {k + 1} not faithful: left out")
                continue
            flat = flatten_keys(summary)
            for key, _rule in FIGURES[name]:
                if key in flat:
                    values[engine].setdefault(key, []).append(flat[key])
        for key, rule in FIGURES[name]:
            c = compare(name, key, rule, values["mininet"].get(key, []),
                        values["sim"].get(key, []))
            val.comparisons.append(c)
            echo(f"{name}: {key}: {c.verdict}"
                 + (f" ({c.difference:+.1%})" if c.difference is not None else ""))
    (out / "validation.json").write_text(json.dumps(
        {"comparisons": [asdict(c) for c in val.comparisons], "runs": val.runs,
         "mininet_runs": mininet_runs, "sim_seeds": sim_seeds, "quick": quick,
         "host_links": host_links,
         "reused_mininet": str(reuse_mininet) if reuse_mininet else None}, indent=1))
    (out / "validation.md").write_text(markdown(val))
    return val


def _fmt(xs: list[FigureValue]) -> str:
    if not xs:
        return "-"
    if all(isinstance(x, bool) for x in xs):
        return ", ".join(sorted({str(x) for x in xs}))
    m = _mean(xs)
    if len(xs) == 1:
        return f"{m:.4g}"
    return f"{m:.4g} ({min(float(x) for x in xs):.4g}-{max(float(x) for x in xs):.4g})"


def markdown(val: Validation) -> str:
    rows = ["| experiment | figure | rule | Mininet | sim | difference | verdict |",
            "| --- | --- | --- | --- | --- | --- | --- |"]
    for c in val.comparisons:
        rule = c.rule if isinstance(c.rule, str) else f"within {float(c.rule):.0%}"
        diff = f"{c.difference:+.1%}" if c.difference is not None else "-"
        rows.append(f"| {c.experiment} | {c.key} | {rule} | {_fmt(c.mininet)} | {_fmt(c.sim)} "
                    f"| {diff} | {c.verdict}{' (' + c.why + ')' if c.why else ''} |")
    left = [r for r in val.runs if not r.get("ok") or not r.get("faithful")]
    if left:
        rows += ["", "Runs left out:", ""]
        rows += [f"- {r['experiment']} {r['engine']} run {r['run']}: "
                 f"{r.get('error') or r.get('verdict')}" for r in left]
    return "\n".join(rows) + "\n"
