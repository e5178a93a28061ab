"""symphony-sweep --quick in Mininet (k at its two quick values): every
collective of the baseline and of Symphony at each value completes and is
bit-exact, the summary's points and normalized CCTs, the paper's values
beside them, the plot, and, on a faithful run, CCTs a ring at line rate can
have. A run that is not faithful ends as an expected failure after the
checks that hold whatever the load."""

from __future__ import annotations

from pathlib import Path

import pytest

from .helpers import run_experiment, xfail_unless_faithful

pytestmark = [pytest.mark.root, pytest.mark.usefixtures("no_leftovers")]


def test_symphony_sweep_quick(tmp_path: Path) -> None:
    out = tmp_path / "run"
    s = run_experiment("symphony-sweep", out, timeout=900)
    assert s["ok"] is True and s["bit_exact"] is True
    assert s["sweep"] == "k" and s["values"] == [0.001, 0.1]
    assert [pt["value"] for pt in s["points"]] == s["values"]
    runs = s["params"]["iterations"] * s["params"]["seeds"]
    for pt, norm in zip(s["points"], s["normalized_cct"], strict=True):
        for scheme in ("baseline", "symphony"):
            assert len(pt[scheme]["runs"]) == runs and pt[scheme]["median"] > 0
        # Symphony's median CCT over the baseline's, as the paper's Fig. 8
        assert norm == pytest.approx(pt["symphony"]["median"] / pt["baseline"]["median"],
                                     abs=1e-3)
    assert s["normalized_cct_min"] == min(s["normalized_cct"])
    assert s["best_value"] in s["values"]
    assert s["paper"]
    assert (out / "plots" / "normalized_cct.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    xfail_unless_faithful(s, "symphony-sweep")
    for pt in s["points"]:
        for scheme in ("baseline", "symphony"):
            assert min(pt[scheme]["runs"]) > 0.95 * pt["theoretical_cct"], scheme
            assert pt[scheme]["median"] < 3 * pt["theoretical_cct"], scheme
