"""`testbed run reflex-workload --quick` end to end in Mininet: every flow of
the Poisson workload completes under every scheme, and weighted 9:1 speeds
the regular flows up at the flexible flows' cost, on a faithful run."""

from __future__ import annotations

from pathlib import Path

import pytest

from experiments import reflex_workload as rw

from .helpers import run_experiment, xfail_unless_faithful

pytestmark = [pytest.mark.root, pytest.mark.usefixtures("no_leftovers")]


def test_quick_workload_run(tmp_path: Path) -> None:
    out = tmp_path / "run"
    s = run_experiment("reflex-workload", out)
    assert s["ok"] is True
    p = rw.Params.quick()
    schemes = rw.scheme_list(p)
    assert s["schemes"] == schemes
    for scheme in schemes:
        cell = s["w1"][scheme]
        assert cell["regular"]["n"] + cell["flexible"]["n"] == p.flows
        # r = 1 everywhere in the quick profile: every byte arrives
        assert cell["flexible"]["delivered_fraction"] == 1.0
        assert len(cell["runs"][0]["fct_s"]) == p.flows
    for name in ("speedups", *(rw.phase_name(x, 0) for x in schemes)):
        png = out / "plots" / f"{name}.png"
        assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    xfail_unless_faithful(s, "reflex-workload")
    # What the fixed scheme does whatever the draw: the regular flows gain
    # from the flexible ones' 10% queue, the flexible ones lose.
    w = s["w1"]["weighted-9:1"]
    assert w["regular"]["mean_speedup"] > 1.0 > w["flexible"]["mean_speedup"], w
