"""testbed validate: figures of both engines compared by their rules."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from testbed.runner import RunError, RunOptions
from testbed.validate import EXACT, SPREAD, compare, validate


def test_a_tolerance_compares_the_means() -> None:
    c = compare("x", "k", 0.05, [1.0, 1.02], [1.04])
    assert c.verdict == "agrees" and c.difference == pytest.approx(0.03 / 1.01)
    assert compare("x", "k", 0.05, [1.0], [1.07]).verdict == "differs"


def test_exact_needs_every_run_true() -> None:
    assert compare("x", "k", EXACT, [True], [True, True]).verdict == "agrees"
    assert compare("x", "k", EXACT, [True], [True, False]).verdict == "differs"


def test_a_spread_holds_the_sim_mean_within_the_emulation_range() -> None:
    c = compare("x", "k", SPREAD, [250, 280, 260, 270], [252, 277])
    assert c.verdict == "agrees" and not c.why
    c = compare("x", "k", SPREAD, [250], [300])
    assert c.verdict == "differs" and "too few" in c.why


def test_nothing_faithful_is_not_measured() -> None:
    c = compare("x", "k", 0.05, [], [1.0])
    assert c.verdict == "not measured" and "no faithful Mininet run" in c.why


def test_unfaithful_and_failed_runs_are_left_out(tmp_path: Path) -> None:
    calls: list[tuple[str, int]] = []

    def runner(name: str, opts: RunOptions) -> dict[str, Any]:
        calls.append((opts.engine, opts.seed))
        if opts.engine == "mininet" and len([c for c in calls if c[0] == "mininet"]) == 2:
            return {"fidelity_ok": False, "fidelity_verdict": "not faithful - switch lag"}
        if opts.engine == "mininet" and len([c for c in calls if c[0] == "mininet"]) == 3:
            raise RunError("boom")
        mean = 0.45 if opts.engine == "mininet" else 0.46
        return {"fidelity_ok": True, "fidelity_verdict": "faithful",
                "allreduce": {"bit_exact": True, "mean_s": mean}}

    val = validate(["ring-allreduce"], tmp_path, mininet_runs=3, sim_seeds=2,
                   echo=lambda _s: None, runner=runner)
    assert [s for e, s in calls if e == "sim"] == [1, 2]
    by = {c.key: c for c in val.comparisons}
    assert by["allreduce.bit_exact"].verdict == "agrees"
    assert by["allreduce.mean_s"].mininet == [0.45] and by["allreduce.mean_s"].sim == [0.46, 0.46]
    assert by["allreduce.mean_s"].verdict == "agrees"
    rec = json.loads((tmp_path / "validation.json").read_text())
    assert len(rec["runs"]) == 5
    md = (tmp_path / "validation.md").read_text()
    assert "not faithful - switch lag" in md and "boom" in md


def test_unknown_experiments_are_refused(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="no figures to compare for nope"):
        validate(["nope"], tmp_path, echo=lambda _s: None)


def test_mininet_runs_of_an_earlier_validation_are_reused(tmp_path: Path) -> None:
    before = tmp_path / "before"
    for k, mean in ((1, 0.44), (2, 0.46)):
        d = before / "runs" / f"ring-allreduce-mininet-{k}"
        d.mkdir(parents=True)
        (d / "summary.json").write_text(json.dumps({
            "fidelity_ok": True, "fidelity_verdict": "faithful",
            "allreduce": {"bit_exact": True, "mean_s": mean}}))
    engines: list[str] = []

    def runner(name: str, opts: RunOptions) -> dict[str, Any]:
        engines.append(opts.engine)
        return {"fidelity_ok": True, "allreduce": {"bit_exact": True, "mean_s": 0.45}}

    val = validate(["ring-allreduce"], tmp_path / "now", mininet_runs=2, sim_seeds=1,
                   echo=lambda _s: None, runner=runner, reuse_mininet=before)
    assert engines == ["sim"]
    by = {c.key: c for c in val.comparisons}
    assert by["allreduce.mean_s"].mininet == [0.44, 0.46]
    again = validate(["ring-allreduce"], tmp_path / "again", mininet_runs=3, sim_seeds=1,
                     echo=lambda _s: None, runner=runner, reuse_mininet=before)
    missing = [r for r in again.runs if not r["ok"]]
    assert len(missing) == 1 and "no Mininet run to reuse" in missing[0]["error"]
