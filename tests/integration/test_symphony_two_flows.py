"""symphony-two-flows --quick in Mininet: both flows delivered intact in every
phase, the summary's keys and the paper's values beside them, Symphony letting
the lagging step finish first, the plots, the fidelity verdict."""

from __future__ import annotations

from pathlib import Path

import pytest

from .helpers import run_experiment, xfail_unless_faithful

pytestmark = [pytest.mark.root, pytest.mark.usefixtures("no_leftovers")]


def test_symphony_two_flows_quick(tmp_path: Path) -> None:
    out = tmp_path / "run"
    s = run_experiment("symphony-two-flows", out, timeout=900)
    assert s["ok"] is True
    offs = s["offsets"]
    assert [o["offset_fraction"] for o in offs] == [0.0, 0.3333, 0.6667, 1.0]
    for o in offs:
        for scheme in ("baseline", "symphony"):
            row = o[scheme]
            assert row["bytes_ok"] is True
            assert row["fct_a"] > 0 and row["fct_b"] > 0 and row["overlap"] >= 0
    for k in ("fct_a_change", "fct_b_change", "overlap_change"):
        assert isinstance(s[k], float) and k in s["paper"]
    for png in ("timelines.png", "offsets.png"):
        assert (out / "plots" / png).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    # Known gap: on a 2-core machine this experiment's senders are often late
    # by more than a packet time at every link rate tried (5-20 Mb/s), so the
    # verdict rejects the run; its timing figures are then not judged here.
    xfail_unless_faithful(s, "symphony-two-flows")
    # The alone phase is one flow at line rate: close to the computed FCT.
    assert s["standalone_fct_s"] == pytest.approx(s["standalone_fct_model_s"], rel=0.15)
    # Full overlap: both flows share the port for most of the run in the baseline.
    assert offs[0]["baseline"]["overlap"] > 0.5 * s["standalone_fct_s"]
    # Started together, the flows share the port in the baseline; Symphony
    # throttles B (step k+1) so that A (step k) finishes well before it.
    b0, y0 = offs[0]["baseline"], offs[0]["symphony"]
    assert 0.8 < b0["fct_a"] / b0["fct_b"] < 1.25, b0
    assert y0["fct_a"] < 0.8 * y0["fct_b"], y0
    assert y0["fct_a"] < b0["fct_a"], (y0, b0)
