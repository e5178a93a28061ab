"""symphony-ring --quick in Mininet: every collective of both schemes completes
over the leaf-spine and is bit-exact (a ring that stalls times out here), the
summary's keys and the paper's values beside them, the plots, and, on a
faithful run, CCTs and overlaps a ring at line rate can have. Four switch
daemons and four agents on two cores are often not faithful even on an idle
machine (docs/experiments/analysis/symphony-ring.md): such a run ends as an
expected failure after the checks that hold whatever the load."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from .helpers import run_experiment, xfail_unless_faithful

pytestmark = [pytest.mark.root, pytest.mark.usefixtures("no_leftovers")]


def test_symphony_ring_quick(tmp_path: Path) -> None:
    out = tmp_path / "run"
    s = run_experiment("symphony-ring", out, timeout=900)
    assert s["ok"] is True and s["bit_exact"] is True
    schemes = list(s["cct"])
    assert schemes == ["baseline", "symphony", "symphony_late", "pq"]
    # the late start switched Symphony on after the first step, before the end
    (late,) = s["late_start_s"]
    assert 0 < late < sum(s["cct"]["symphony_late"]["runs"])
    p = s["params"]
    for scheme in schemes:
        runs = s["cct"][scheme]["runs"]
        assert len(runs) == p["iterations"] * p["seeds"]
        assert s["cct"][scheme]["median"] > 0 and s["cct"][scheme]["p90"] >= min(runs)
        assert len(s["max_overlap"][scheme]["runs"]) == p["seeds"]
        assert s["overlap_series"][scheme]
    # only tracked jobs are marked by Symphony; RED marks both
    assert s["ce_marked_packets"]["symphony"] > 0
    for k in ("cct_change", "cct_change_late", "cct_change_pq", "cct_change_vs_pq",
              "theoretical_cct"):
        assert isinstance(s[k], float)
    assert "cct_change" in s["paper"] and "max_overlap.baseline" in s["paper"]
    for png in ("overlap.png", "cct_cdf.png"):
        assert (out / "plots" / png).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    xfail_unless_faithful(s, "symphony-ring")
    # A collective cannot beat the line rate, and a ring of 4 ranks without
    # losses finishes within a few times it (2 ECMP paths, 2 rings).
    for scheme in schemes:
        assert min(s["cct"][scheme]["runs"]) > 0.95 * s["theoretical_cct"], scheme
        assert s["cct"][scheme]["median"] < 3 * s["theoretical_cct"], scheme
        # steps in flight: at least one, at most every step of the phase
        steps = 2 * (s["ranks"] - 1) * p["iterations"]
        assert all(1 <= m <= steps for m in s["max_overlap"][scheme]["runs"]), scheme


def test_a_2d_ring_runs_on_mininet_hosts_bit_exactly(tmp_path: Path) -> None:
    """Table 1's collective on the emulation: a 2 x 2 ring (a group per
    leaf), every AllReduce exact, each rank's steps tagged group, cross,
    cross, group as one job's sequence."""
    out = tmp_path / "run"
    s = run_experiment("symphony-ring", out, "ring_layout=local", "ring_dims=2x2",
                       "schemes=baseline,symphony", timeout=900)
    assert s["ok"] is True and s["bit_exact"] is True
    for phase in ("baseline-s0", "symphony-s0"):
        events = [json.loads(line) for line in
                  (out / "phases" / phase / "h1.events.jsonl").read_text().splitlines()]
        steps = [(e["seq"], e["step"], e["dim"]) for e in events
                 if e["event"] == "step_start" and e["channel"] == 0]
        assert steps == [(q, st, "cross" if st in (1, 2) else "group")
                         for q in range(2) for st in range(4)], phase
