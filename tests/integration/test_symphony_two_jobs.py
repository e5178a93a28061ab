"""symphony-two-jobs --quick in Mininet: both jobs' collectives complete over
the leaf-spine under both schemes and are bit-exact, the summary's keys
(final-step spans, job times, throughput series) and the paper's values
beside them, the plots, and, on a faithful run, job times a ring at line
rate can have. A run that is not faithful ends as an expected failure after
the checks that hold whatever the load."""

from __future__ import annotations

from pathlib import Path

import pytest

from .helpers import run_experiment, xfail_unless_faithful

pytestmark = [pytest.mark.root, pytest.mark.usefixtures("no_leftovers")]

SCHEMES = ("baseline", "symphony")
JOBS = ("a", "b")


def test_symphony_two_jobs_quick(tmp_path: Path) -> None:
    out = tmp_path / "run"
    s = run_experiment("symphony-two-jobs", out, timeout=900)
    assert s["ok"] is True and s["bit_exact"] is True
    seeds = s["params"]["seeds"]
    for scheme in SCHEMES:
        for job in JOBS:
            span = s["final_step_span"][scheme][job]
            assert len(span["runs"]) == seeds and all(x >= 0 for x in span["runs"])
            assert len(s["job_time"][scheme][job]["runs"]) == seeds
            series = s["throughput"][scheme][job]
            assert series and all(t >= 0 and mbps >= 0 for t, mbps in series)
    for job in JOBS:
        assert isinstance(s["span_change"][job], float)
        assert isinstance(s["job_time_change"][job], float)
    # job b starts later by the offset, a fraction of one job's line-rate time
    assert 0 < s["delay_b_s"] < s["job_wire_s"]
    assert "span_change" in s["paper"] and "throughput" in s["paper"]
    for png in ("throughput.png", "final_span.png"):
        assert (out / "plots" / png).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    xfail_unless_faithful(s, "symphony-two-jobs")
    # A job cannot beat its collectives at line rate, nor (without losses)
    # take many times that while sharing the bottleneck with one other job.
    for scheme in SCHEMES:
        for job in JOBS:
            for t in s["job_time"][scheme][job]["runs"]:
                assert 0.95 * s["job_wire_s"] < t < 6 * s["job_wire_s"], (scheme, job)
