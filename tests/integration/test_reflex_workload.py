"""`testbed run reflex-workload --quick` end to end in Mininet: every flow of
the three Poisson workloads completes under every scheme (workload 2's short
regular flows and workload 3's web-search ones as messages over each
sender's connections), and weighted 9:1
speeds the regular flows up, at the flexible flows' cost in workload 1, on a
faithful run."""

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
    assert s["schemes"] == schemes and s["workloads"] == [1, 2, 3]
    draw = rw.w2_arrivals(p, 0)
    draw3 = rw.w3_arrivals(p, 0)
    for scheme in schemes:
        cell = s["w1"][scheme]
        assert cell["regular"]["n"] + cell["flexible"]["n"] == p.flows
        # r = 1 everywhere in the quick profile: every byte arrives
        assert cell["flexible"]["delivered_fraction"] == 1.0
        assert len(cell["runs"][0]["fct_s"]) == p.flows
        w2 = s["w2"][scheme]
        assert w2["regular"]["n"] == len(draw.regular) > 100
        assert w2["flexible"]["n"] == p.w2_flexible
        assert w2["flexible"]["delivered_fraction"] == 1.0
        # a 100 kB flow takes its line-rate time from its arrival, at least,
        # less a 2-packet burst and what the switch's lag can compress: frames
        # it held back then leave back to back (12 ms at most in a run where
        # the shortest flow took 0.91 of its line-rate time)
        line_s = p.w2_msg_bytes * 8 / p.payload_bps
        lag_s = s["fidelity"]["checks"]["switch_lag_max_us"]["value"] / 1e6
        assert min(w2["runs"][0]["regular_fct_s"]) >= 0.95 * line_s - lag_s
        # workload 3: every web-search flow delivered, each in its size class
        w3 = s["w3"][scheme]
        assert len(w3["runs"][0]["regular_fct_s"]) == len(draw3.regular) >= 5
        assert sum(w3[c]["n"] for c, _ in rw.SIZE_CLASSES) == len(draw3.regular)
        assert w3["flexible"]["delivered_fraction"] == 1.0
    names = ("speedups", "w1_speedup_cdf", "w2_speedups", "w2_fct_cdf", "w3_speedups",
             *(rw.phase_name(x, 0, w) for x in schemes for w in (1, 2, 3)))
    for name in names:
        png = out / "plots" / f"{name}.png"
        assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    xfail_unless_faithful(s, "reflex-workload")
    # The paper's direction for the fixed scheme: the regular flows gain from
    # the flexible ones' 10% queue; in workload 1 the flexible ones lose. A
    # faithful run against it is a known gap, reported as an expected failure
    # with its figures (docs/experiments/analysis/reflex-workload.md): workload
    # 2's regular flows had a mean speed-up of 0.86 in one faithful CI run
    # (1.14 and 1.24 in two others; paper 2.10): under DCQCN the shared queue
    # is mostly empty, so without priority they already take only 1.7-1.8
    # times their line-rate time, which bounds what 9:1 can gain.
    w1, w2 = s["w1"]["weighted-9:1"], s["w2"]["weighted-9:1"]
    got = {"w1.regular": w1["regular"]["mean_speedup"],
           "w1.flexible": w1["flexible"]["mean_speedup"],
           "w2.regular": w2["regular"]["mean_speedup"]}
    if not got["w1.regular"] > 1.0 > got["w1.flexible"] or not got["w2.regular"] > 1.0:
        pytest.xfail(f"faithful run against the paper's direction for weighted 9:1: {got}")
