"""CommLib Ring AllReduce through host agents in Mininet hosts and one soft switch:
integer sums are bit-exact on every rank, and the plot is drawn, whatever the
load; a run the fidelity verdict rejects then ends as an expected failure."""

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


@pytest.mark.parametrize("ranks", [4, 8])
def test_ring_allreduce_is_bit_exact(tmp_path: Path, ranks: int) -> None:
    out = tmp_path / "run"
    s = run_experiment("ring-allreduce", out, f"ranks={ranks}", timeout=120)
    ar = s["allreduce"]
    assert ar["bit_exact"] is True and ar["ranks"] == ranks
    iterations = s["params"]["iterations"]
    assert ar["checks"] == ranks * iterations
    # Independently of the agents' own check: the SHA-256 every rank reported is
    # that of the sum computed here from the same inputs.
    checks = []
    for h in range(1, ranks + 1):
        for line in (out / "phases" / "allreduce" / f"h{h}.events.jsonl").read_text().splitlines():
            e = json.loads(line)
            if e["event"] == "collective_check":
                checks.append(e)
    spec = CollectiveSpec(rank=0, size=ranks, dtype=s["params"]["dtype"], count=s["params"]["count"],
                          iterations=iterations, seed=s["params"]["seed"])
    for it in range(iterations):
        total = np.zeros(spec.count, dtype=spec.dtype)
        for rank in range(ranks):
            total += collective_input(spec, rank, it)
        want = hashlib.sha256(total.tobytes()).hexdigest()
        got = {e["sha256"] for e in checks if e["iteration"] == it}
        assert got == {want}
    # Every ring step of every rank was recorded with the flow tag it used.
    steps = [json.loads(ln) for h in range(1, ranks + 1)
             for ln in (out / "phases" / "allreduce" / f"h{h}.events.jsonl").read_text().splitlines()
             if '"step_end"' in ln]
    assert len(steps) == ranks * iterations * 2 * (ranks - 1)
    assert (out / "plots" / "allreduce.png").stat().st_size > 5000
    # No timing figure is judged here; the verdict only says whether the run
    # measured the code or a loaded machine.
    xfail_unless_faithful(s, f"ring-allreduce with {ranks} ranks")
