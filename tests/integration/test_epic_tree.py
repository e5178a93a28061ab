"""epic-tree --quick in Mininet: the paper's Tree-3-2 as three soft switches
(a leaf-spine with one spine), each running epic.p4 with its part of the
controller's aggregation tree; unmodified RC ranks (udp provider) aggregate
through it, against the host ring on the same topology. Every integer
result bit-exact, every float result within the fixed-point bound, the
summary's keys, the figure, the fidelity verdict."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import numpy as np
import pytest

from hosts.agent.expectations import collective_input
from hosts.agent_spec import CollectiveSpec

from .helpers import run_experiment, xfail_unless_faithful

pytestmark = [pytest.mark.root, pytest.mark.usefixtures("no_leftovers")]


def test_epic_tree_quick(tmp_path: Path) -> None:
    out = tmp_path / "run"
    s = run_experiment("epic-tree", out, timeout=600)
    p = s["params"]
    ranks = p["leaves"] * p["hosts_per_leaf"]
    sizes = s["sizes"]
    assert sizes[0] == p["min_kib"] * 1024 and sizes[-1] == p["max_kib"] * 1024
    for scheme in ("epic", "ring", "ring256"):
        assert len(s["algbw"][scheme]) == len(sizes)
        assert all(v > 0 for v in s["algbw"][scheme])
        assert s["schemes"][scheme]["bit_exact"] is True
        assert len(s["schemes"][scheme]["barrier_ms"]) == p["barriers"] * p["iterations"]
    assert s["bit_exact"] is True
    assert s["float_within_bound"] is True and s["float_identical"] is True
    assert s["ideal_ratio"] == 1.5
    assert s["ratio_large_256"] == pytest.approx(
        s["algbw"]["epic"][-1] / s["algbw"]["ring256"][-1], rel=1e-3)
    assert 0 < s["link_fraction"] <= 1.0
    assert s["paper"]["model_fraction"] == 1.0
    # the partial sums went up and the results came down through all three
    # switches: each rank's results are the sums computed here from the same inputs
    seq = [("all_reduce", n // 4) for n in sizes] + [("barrier", 1)] * p["barriers"]
    spec = CollectiveSpec(rank=0, size=ranks, dtype="int32", ops=tuple(o for o, _ in seq),
                          counts=tuple(c for _, c in seq), iterations=p["iterations"],
                          seed=p["seed"])
    got: dict[int, set[str]] = {}
    for h in range(1, ranks + 1):
        for line in (out / "phases" / "epic" / f"h{h}.events.jsonl").read_text().splitlines():
            e = json.loads(line)
            if e["event"] == "collective_check" and e["op"] == "all_reduce":
                got.setdefault(e["iteration"], set()).add(e["sha256"])
    assert len(got) == len(sizes) * p["iterations"]
    for it in got:
        total = np.sum([collective_input(spec, r, it) for r in range(ranks)], axis=0,
                       dtype=np.int32)
        assert got[it] == {hashlib.sha256(total.tobytes()).hexdigest()}
    # the controller programmed each leaf with its parent and each switch with its children
    applied = s["switch_config"]["applied"]
    for leaf in ("leaf1", "leaf2"):
        assert any(a["where"] == f"phase epic (EPIC tree, {leaf})"
                   and a["line"].startswith("table_add MyIngress.epic_parent ") for a in applied)
    assert not any(a["where"] == "phase epic (EPIC tree, spine1)" and "epic_parent" in a["line"]
                   for a in applied)
    assert (out / "plots" / "tree_algbw.png").stat().st_size > 5000
    xfail_unless_faithful(s, "epic-tree")
