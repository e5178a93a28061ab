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

This module runs on Python 3.9 too (no newer syntax at run time).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any, Union

__all__ = ["Summary", "Results", "OMIT_IF_NONE", "json_key", "results_json", "to_json"]


@dataclasses.dataclass(frozen=True)
class Summary:
    """The base of an experiment's results record (the module doc says how
    its fields become ``summary.json``'s keys)."""


# What ``analyze`` returns: a typed record, or (not yet typed) the JSON object itself.
Results = Union[Summary, Mapping[str, Any]]  # noqa: UP007 (run on Python 3.9 too)

# Field metadata: the key is left out of the JSON object while the field is None
# (a section of a phase that did not run, a record only some settings have).
OMIT_IF_NONE: Mapping[str, object] = {"omit_if_none": True}


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
            out[f.metadata.get("key", f.name)] = to_json(v)
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
