"""An experiment's results as typed records, and their JSON form.

``analyze(run_dir)`` returns a :class:`Summary`: a frozen dataclass whose
fields are the results, in the order ``summary.json`` lists them (the
``HEADLINE`` keys among them), with nested frozen dataclasses for the
records inside (a phase's, a scheme's); a field whose keys are open (a
scheme or a size by name, a sweep's points) is a ``dict`` of them::

    @dataclass(frozen=True)
    class FlowResult:
        fct_s: float
        bytes_ok: bool

    @dataclass(frozen=True)
    class Results(Summary):
        flows: dict[str, FlowResult]
        speedup: float
        pfc: PfcRecord | None = field(default=None, metadata=OMIT_IF_NONE)

:func:`results_json` turns it into the JSON object the runner merges into
``summary.json`` (and ``testbed report`` re-analyses into), in one place:
each dataclass becomes an object of its fields in declaration order (a
field's key is its name, or ``metadata["key"]`` where the key is no Python
name, e.g. ``"d3.budget_time_ms"``; a field with ``OMIT_IF_NONE`` is left
out while None), a dict an object with the same keys, a tuple or list an
array. Claims, the report and the results line read that JSON form only
(dotted keys, testbed.claims.lookup). An ``analyze`` that still returns a
plain dict is taken as it is.

Two records write flat keys into the object around them instead of an
object of their own: a :class:`Spread` (a figure over several runs) in a
field ``key`` writes ``key`` (its mean) and beside it ``key_sd``,
``key_min``, ``key_max``, ``key_n`` and ``key_seeds``, each only while set;
a dict field with ``INLINE`` writes its items in its place (open keys beside
fixed ones at one level, e.g. a sweep's ``d1``, ``d3`` beside ``paper``).

This module runs on Python 3.9 too (no newer syntax at run time).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any, Union

__all__ = ["Summary", "Results", "Spread", "OMIT_IF_NONE", "INLINE", "json_key",
           "results_json", "to_json"]


@dataclasses.dataclass(frozen=True)
class Summary:
    """The base of an experiment's results record (the module doc says how
    its fields become ``summary.json``'s keys)."""


# What ``analyze`` returns: a typed record, or (not yet typed) the JSON object itself.
Results = Union[Summary, Mapping[str, Any]]  # noqa: UP007 (run on Python 3.9 too)

# Field metadata: the key is left out of the JSON object while the field is None
# (a section of a phase that did not run, a record only some settings have).
OMIT_IF_NONE: Mapping[str, object] = {"omit_if_none": True}


# Field metadata: a dict field whose items stand in the enclosing object in
# the field's place (its own key is not written).
INLINE: Mapping[str, object] = {"inline": True}


@dataclasses.dataclass(frozen=True)
class Spread:
    """A figure over several runs (seeds), written flat beside its field's key
    ``k``: ``k`` the mean, then ``k_sd``, ``k_min``, ``k_max``, ``k_n`` and
    ``k_seeds`` (each run's value), in that order, each left out while None
    (an experiment sets those it reports; a figure no run measured is
    ``Spread(None)``: ``k`` null alone). Values are written as they are (an
    int stays an int)."""

    mean: float | None
    sd: float | None = None
    min: float | None = None
    max: float | None = None
    n: int | None = None
    seeds: list[float] | None = None

    def flat_json(self, key: str) -> dict[str, object]:
        """The keys this figure writes in field ``key``'s place."""
        out: dict[str, object] = {key: self.mean}
        for suffix in ("sd", "min", "max", "n", "seeds"):
            v = getattr(self, suffix)
            if v is not None:
                out[f"{key}_{suffix}"] = to_json(v)
        return out


def json_key(key: str, *, omit_if_none: bool = False) -> dict[str, object]:
    """Field metadata for a key that is no Python name (``"d3.budget_time_ms"``)."""
    return {"key": key, "omit_if_none": omit_if_none}


def to_json(value: object) -> Any:
    """``value`` as JSON data: dataclasses as objects of their fields in order,
    mappings with their keys, tuples and lists as lists, scalars as they are."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        out: dict[str, Any] = {}
        for f in dataclasses.fields(value):
            v = getattr(value, f.name)
            if v is None and f.metadata.get("omit_if_none"):
                continue
            key = f.metadata.get("key", f.name)
            if isinstance(v, Spread):
                out.update(v.flat_json(key))
            elif f.metadata.get("inline"):
                out.update(to_json(v))
            else:
                out[key] = to_json(v)
        return out
    if isinstance(value, Mapping):
        return {k: to_json(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [to_json(v) for v in value]
    return value


def results_json(results: Results) -> dict[str, Any]:
    """What ``analyze`` returned as the JSON object of ``summary.json``'s results."""
    out = to_json(results)
    if not isinstance(out, dict):
        raise TypeError(f"analyze returned {type(results).__name__}, not a Summary or a dict")
    return out
