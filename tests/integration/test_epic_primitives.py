"""epic-primitives --quick in Mininet: Reduce, Broadcast, ReduceScatter,
AllGather and Barriers through epic.p4 and through the host ring; every
rank's result recomputed here from the inputs, the keys, the plot."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import numpy as np
import pytest

from experiments.epic_primitives import Params
from hosts.agent.expectations import collective_input
from hosts.agent_spec import CollectiveSpec

from .helpers import run_experiment, xfail_unless_faithful

pytestmark = [pytest.mark.root, pytest.mark.usefixtures("no_leftovers")]


def expected(spec: CollectiveSpec, op: str, rank: int, it: int) -> str | None:
    """sha256 of what ``rank`` must hold after collective ``it`` (None: nothing)."""
    xs = [collective_input(spec, r, it) for r in range(spec.size)]
    total = np.sum(xs, axis=0, dtype=np.int32)
    if op == "barrier" or (op == "reduce" and rank != spec.root):
        return None
    out = {"reduce": total, "broadcast": xs[spec.root], "all_gather": np.concatenate(xs),
           "reduce_scatter": np.array_split(total, spec.size)[rank]}[op]
    return hashlib.sha256(out.tobytes()).hexdigest()


def test_epic_primitives_quick(tmp_path: Path) -> None:
    out = tmp_path / "run"
    s = run_experiment("epic-primitives", out, timeout=900)
    p = s["params"]
    once = Params(**p).sequence()
    spec = CollectiveSpec(rank=0, size=p["ranks"], dtype="int32", root=p["root"],
                          seed=p["seed"], iterations=p["iterations"],
                          ops=tuple(op for op, _ in once), counts=tuple(c for _, c in once))
    seq = spec.sequence()
    for scheme in ("epic", "ring"):
        got = {}
        for h in range(1, p["ranks"] + 1):
            for line in (out / "phases" / scheme / f"h{h}.events.jsonl").read_text().splitlines():
                e = json.loads(line)
                if e["event"] == "collective_check":
                    got[(h - 1, e["iteration"])] = (e["op"], e["sha256"])
        assert len(got) == p["ranks"] * len(seq), scheme
        for (rank, it), (op, sha) in got.items():
            assert op == seq[it][0]
            assert sha == expected(spec, op, rank, it), (scheme, rank, it, op)
        assert s["schemes"][scheme]["bit_exact"] is True
    assert s["bit_exact"] is True
    for op in ("reduce", "broadcast", "reduce_scatter", "all_gather"):
        assert all(v > 0 for v in s["algbw"][op].values()), op
        assert s[f"ratio_{op}"] == pytest.approx(
            s["algbw"][op]["epic"] / s["algbw"][op]["ring"], rel=1e-3)
    assert s["barrier_ms"]["epic"] > 0 and s["barrier_ms"]["ring"] > 0
    assert s["paper"]["ratio_broadcast"] == pytest.approx(89.0 / 66.6, abs=1e-3)
    assert (out / "plots" / "primitives.png").stat().st_size > 5000
    xfail_unless_faithful(s, "epic-primitives")
    # one announcement through the switch against 2(N-1) dependent ring steps
    assert s["barrier_ratio"] > 1.0
