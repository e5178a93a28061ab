"""testbed.summary: typed results records and their JSON form."""

from __future__ import annotations

import json
from dataclasses import dataclass, field

import pytest

from testbed.runner import flatten_keys
from testbed.summary import INLINE, OMIT_IF_NONE, Spread, Summary, json_key, results_json


@dataclass(frozen=True)
class _Flow:
    fct_s: float
    sizes: tuple[int, ...] = ()


@dataclass(frozen=True)
class _Results(Summary):
    zeta: float
    flows: dict[str, _Flow]
    alpha: bool
    budget: float = field(metadata=json_key("d3.budget_ms"))
    pfc: _Flow | None = field(default=None, metadata=OMIT_IF_NONE)
    note: str | None = None


def test_fields_in_order_nested_and_renamed() -> None:
    r = _Results(zeta=1.5, flows={"b": _Flow(2.0, (1, 2)), "a": _Flow(3.0)}, alpha=True,
                 budget=175.0)
    j = results_json(r)
    assert list(j) == ["zeta", "flows", "alpha", "d3.budget_ms", "note"]
    assert j["flows"] == {"b": {"fct_s": 2.0, "sizes": [1, 2]}, "a": {"fct_s": 3.0, "sizes": []}}
    assert j["note"] is None                      # None is kept unless OMIT_IF_NONE
    assert json.dumps(j) == json.dumps({"zeta": 1.5, "flows": {
        "b": {"fct_s": 2.0, "sizes": [1, 2]}, "a": {"fct_s": 3.0, "sizes": []}},
        "alpha": True, "d3.budget_ms": 175.0, "note": None})
    assert flatten_keys(j)["flows.b.fct_s"] == 2.0


def test_omitted_while_none_present_otherwise() -> None:
    r = _Results(1.0, {}, False, 0.0, pfc=_Flow(1.0))
    assert results_json(r)["pfc"] == {"fct_s": 1.0, "sizes": []}


def test_a_plain_dict_is_taken_as_it_is() -> None:
    d = {"a": {"b": 1, "c": (1, 2)}, "z": None}
    assert json.dumps(results_json(d)) == json.dumps(d)


def test_not_a_record() -> None:
    with pytest.raises(TypeError):
        results_json(3)  # type: ignore[arg-type]


@dataclass(frozen=True)
class _Point:
    rate: Spread
    low_s: Spread | None = field(default=None, metadata=OMIT_IF_NONE)
    note: str = ""


@dataclass(frozen=True)
class _Sweep(Summary):
    points: dict[str, _Point] = field(metadata=INLINE)
    paper: dict[str, float]


def test_a_spread_writes_flat_keys_beside_its_own_only_those_set() -> None:
    r = _Sweep(points={
        "d3": _Point(Spread(0.5, sd=0.1, min=0.4, max=0.6, n=2, seeds=[0.4, 0.6]),
                     low_s=Spread(None)),
        "d1": _Point(Spread(3.0, min=2, max=4, seeds=[2, 4]))}, paper={"d3.rate": 0.48})
    j = results_json(r)
    assert json.dumps(j) == json.dumps({
        "d3": {"rate": 0.5, "rate_sd": 0.1, "rate_min": 0.4, "rate_max": 0.6, "rate_n": 2,
               "rate_seeds": [0.4, 0.6], "low_s": None, "note": ""},
        "d1": {"rate": 3.0, "rate_min": 2, "rate_max": 4, "rate_seeds": [2, 4], "note": ""},
        "paper": {"d3.rate": 0.48}})
