"""Judging a paper claim: direction, size within the declared tolerance,
faithful and unfaithful runs, per-seed samples, and declarations that are
refused because they contradict themselves."""

from __future__ import annotations

from typing import Any

import pytest

from testbed.claims import (
    NOT_FAITHFUL,
    NOT_MEASURED,
    NOT_REPRODUCED,
    REPRODUCED,
    Claim,
    ClaimError,
    RunValues,
    evaluate,
    lookup,
    sample_values,
)
from testbed.experiment import discover

# Symphony's Fig. 9 shape: a change of -12% that must stay negative, 10 points.
FASTER = Claim("Fig. 9", "A finishes sooner", key="fct_a_change", paper=-0.12,
               direction="below", versus=0.0, abs_tol=0.10, percent=True,
               per_seed="fct_a_change_seeds")
# A level: 0.74 of the link, above the fair half, within 10%.
SHARE = Claim("Fig. 4", "regular flow share", key="case1.regular_rate_fraction", paper=0.74,
              direction="above", versus=0.5, rel_tol=0.10)


def run(label: str, *samples: float, faithful: bool = True) -> RunValues:
    return RunValues(label, faithful, tuple(samples))


def test_a_value_in_direction_and_within_tolerance_is_reproduced() -> None:
    res = evaluate(SHARE, [run("r1", 0.70)])
    assert res.status == REPRODUCED
    assert res.direction_ok is True and res.size_ok is True
    assert res.mean == pytest.approx(0.70) and res.sd is None and res.n == 1


def test_the_tolerance_edge_is_relative_to_the_papers_value() -> None:
    # 10% of 0.74 is 0.074: 0.666 is inside, 0.66 is not
    assert evaluate(SHARE, [run("r1", 0.6661)]).status == REPRODUCED
    res = evaluate(SHARE, [run("r1", 0.66)])
    assert res.status == NOT_REPRODUCED
    assert res.direction_ok is True and res.size_ok is False
    assert "size" in res.why and "0.074" in res.why


def test_the_wrong_direction_is_not_reproduced_even_within_tolerance() -> None:
    # +5% is 17 points from -12%: inside a 30-point tolerance, on the wrong side of 0
    wide = Claim("Fig. 9", "A finishes sooner", key="fct_a_change", paper=-0.12,
                 direction="below", abs_tol=0.30, percent=True)
    res = evaluate(wide, [run("r1", 0.05)])
    assert res.size_ok is True and res.direction_ok is False
    assert res.status == NOT_REPRODUCED
    assert "direction" in res.why and "not below 0%" in res.why


def test_an_absolute_tolerance_in_points() -> None:
    assert evaluate(FASTER, [run("r1", -0.21)]).status == REPRODUCED
    res = evaluate(FASTER, [run("r1", -0.25)])
    assert res.status == NOT_REPRODUCED
    assert "13.0 points" in res.why and "10.0 points" in res.why


def test_mean_and_spread_over_seeds_and_runs() -> None:
    res = evaluate(FASTER, [run("r1", -0.10, -0.14), run("r2", -0.18)])
    assert res.n == 3
    assert res.mean == pytest.approx(-0.14)
    assert res.sd == pytest.approx(0.04)
    assert (res.low, res.high) == (pytest.approx(-0.18), pytest.approx(-0.10))
    assert res.judged == ["r1", "r2"]
    assert "n=3" in res.measured_text() and "-14.0%" in res.measured_text()


def test_the_verdict_is_on_the_mean_not_on_single_seeds() -> None:
    # one seed outside, the mean inside
    assert evaluate(SHARE, [run("r1", 0.60, 0.80, 0.80)]).status == REPRODUCED


def test_only_faithful_runs_are_judged_and_the_others_are_listed() -> None:
    res = evaluate(SHARE, [run("good", 0.72), run("busy", 0.10, faithful=False)])
    assert res.status == REPRODUCED
    assert res.judged == ["good"] and res.samples == [0.72]
    assert [r.label for r in res.unfaithful] == ["busy"]


def test_without_a_faithful_run_the_claim_is_not_faithful_whatever_the_values() -> None:
    res = evaluate(SHARE, [run("busy", 0.74, faithful=False)])
    assert res.status == NOT_FAITHFUL
    assert res.mean == pytest.approx(0.74)     # shown, as an indication
    assert [r.label for r in res.unfaithful] == ["busy"]
    assert "indications" in res.why


def test_no_run_or_no_key_is_not_measured() -> None:
    assert evaluate(SHARE, []).status == NOT_MEASURED
    res = evaluate(SHARE, [run("r1")])
    assert res.status == NOT_MEASURED and "r1" in res.why and res.mean is None


def test_samples_come_from_flat_keys_nested_paths_and_per_seed_lists() -> None:
    summary = {"case1.regular_rate_fraction": 0.7, "fct_a_change": -0.2,
               "fct_a_change_seeds": [-0.1, -0.3], "nested": {"x": [1, 2]}}
    assert sample_values(summary, SHARE) == (0.7,)
    assert sample_values(summary, FASTER) == (-0.1, -0.3)
    assert sample_values({"fct_a_change": -0.2}, FASTER) == (-0.2,)
    assert lookup(summary, "nested.x") == [1, 2]
    assert lookup(summary, "nested.y") is None
    # booleans, None and NaN are not measurements
    for bad in (True, None, float("nan"), "0.7"):
        assert sample_values({"case1.regular_rate_fraction": bad}, SHARE) == ()


def test_a_claim_the_paper_gives_no_value_for_is_judged_by_its_direction() -> None:
    # Symphony's Fig. 7b: a CDF, no number in the text; the span must shrink
    shorter = Claim("Fig. 7b", "span shrinks", key="span_change.a", paper=None,
                    direction="below", versus=0.0, percent=True)
    assert evaluate(shorter, [run("r1", -0.40)]).status == REPRODUCED
    res = evaluate(shorter, [run("r1", 0.05)])
    assert res.status == NOT_REPRODUCED and res.why.startswith("direction: +5.0% is not below")
    assert "size" not in res.why
    assert shorter.paper_text() == "< 0% (no value given)"
    assert shorter.describe_rule() == "< 0% (direction only)"
    assert evaluate(shorter, [run("r1", -0.4, faithful=False)]).status == NOT_FAITHFUL
    with pytest.raises(ClaimError, match="declare the direction"):
        Claim("Fig. 7b", "s", key="k", paper=None)
    with pytest.raises(ClaimError, match="a tolerance needs the paper's value"):
        Claim("Fig. 7b", "s", key="k", paper=None, direction="below", abs_tol=0.1)


@pytest.mark.parametrize("kw, msg", [
    ({"direction": "below"}, "is not below"),          # the paper's 0.74 is above 0
    ({"rel_tol": 0.0}, "declare a tolerance"),
    ({"rel_tol": -0.1}, "tolerances must be >= 0"),
    ({"direction": "up"}, "direction must be"),
    ({"paper": float("inf")}, "paper must be a finite number"),
    ({"key": " "}, "must be non-empty"),
])
def test_inconsistent_declarations_are_refused_naming_the_claim(kw: dict, msg: str) -> None:
    args = {"figure": "Fig. 4", "says": "s", "key": "k", "paper": 0.74, "rel_tol": 0.1} | kw
    with pytest.raises(ClaimError, match=msg) as e:
        Claim(**args)
    assert "Fig. 4" in str(e.value)


def test_every_experiment_with_paper_values_declares_claims_from_them() -> None:
    exps = discover()
    for name in ("symphony-two-flows", "symphony-ring", "symphony-sweep", "symphony-two-jobs",
                 "epic-allreduce", "reflex-cases", "reflex-partial", "reflex-probing"):
        assert exps[name].CLAIMS, name
    # every claim, of these and of experiments that join later, takes its
    # number from its module's paper values: one place per experiment
    for name, mod in exps.items():
        ref = mod.REFERENCE
        assert not mod.CLAIMS or ref, f"{name}: CLAIMS without REFERENCE"
        for c in mod.CLAIMS:
            # the paper's value lives in one place, flat or along the key's dotted path
            value = _reference_value(ref, c.key)
            assert value is not _ABSENT, (name, c.key)
            if c.paper is None:                  # the paper gives a direction only
                assert value is None and c.direction, (name, c.key)
            else:
                assert c.paper == pytest.approx(value), (name, c.key)
            assert c.plots, (name, c.key)


_ABSENT = object()


def _reference_value(node: Any, key: str) -> Any:
    """The value at ``key`` flat or nested; a nested name may itself hold
    dots (a model called llama-3.2-1b)."""
    if not isinstance(node, dict):
        return _ABSENT
    if key in node:
        return node[key]
    for name, child in node.items():
        if key.startswith(f"{name}."):
            found = _reference_value(child, key[len(name) + 1:])
            if found is not _ABSENT:
                return found
    return _ABSENT
