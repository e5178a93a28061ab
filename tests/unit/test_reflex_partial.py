"""reflex-partial: one phase per r, both flows of equal size from the common
start; the analysis reports delivered fraction and FCTs (made-up timelines,
also plotted)."""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from plot_checks import assert_plots
from ring_runs import write_plan

from experiments import reflex_partial as rp
from testbed.summary import Summary, results_json

T0 = 10**12


def test_plan_sweeps_r_with_equal_flows() -> None:
    p = rp.Params.quick()
    plan = rp.plan(p)
    assert [ph.name for ph in plan.phases] == ["r000", "r100"]
    for ph, r in zip(plan.phases, (0.0, 1.0), strict=True):
        senders = {f.flow: f for j in ph.jobs.values() for f in j.flows if f.role == "sender"}
        assert senders["flex"].flexible is not None
        assert senders["flex"].flexible["r"] == r and senders["flex"].flexible["alpha"] == 1.0
        assert senders["regular"].flexible is None
        assert senders["flex"].count == senders["regular"].count
        assert senders["flex"].start_delay_s == senders["regular"].start_delay_s == 0
        assert ph.commands == ("set_priority_weights 3 10 90",)
    # several runs per r: seed 0 keeps the plain name, the others are named by seed
    full = rp.plan(rp.Params(r_values="0,1", seeds=2))
    assert [ph.name for ph in full.phases] == ["r000", "r000-s1", "r100", "r100-s1"]
    later = rp.plan(rp.Params(r_values="0", seeds=2, first_seed=2))
    assert [ph.name for ph in later.phases] == ["r000-s2", "r000-s3"]
    with pytest.raises(ValueError, match="seeds"):
        rp.Params(seeds=0)
    with pytest.raises(ValueError, match="r_values"):
        rp.Params(r_values="0,1.5")
    with pytest.raises(ValueError, match="r_values"):
        rp.Params(r_values="zero")


def _write_two_r_run(tmp_path: Path) -> int:
    """r = 0 and r = 1, one run each, saved without the seed parameters; the
    flows' size."""
    p = rp.Params(r_values="0,1", flow_cycles=1.0, seeds=1)
    plan = rp.plan(p)
    write_plan(tmp_path, rp, p, omit=("seeds", "first_seed"))   # as before seeds existed
    size = plan.info["flow_bytes"]
    line_s = plan.info["line_rate_s"]
    for key, frac, fct_flex, fct_reg in (("r000", 0.65, 1.7, 1.4), ("r100", 1.0, 2.0, 2.0)):
        d = tmp_path / "phases" / key
        d.mkdir(parents=True)
        evs: list[dict[str, Any]] = [{"event": "start", "t_ns": T0, "host": "h3"}]
        for flow, fct in (("flex", fct_flex), ("regular", fct_reg)):
            evs.append({"event": "completion", "t_ns": T0 + int(fct * line_s * 1e9),
                        "host": "h3", "flow": flow, "role": "receiver", "index": 0})
            evs.append({"event": "flow_end", "t_ns": T0 + 10**11, "host": "h3", "flow": flow,
                        "role": "receiver", "bytes": int(size * frac) if flow == "flex"
                        else size, "bytes_ok": True})
        evs.append({"event": "flow_end", "t_ns": T0 + 10**11, "host": "h1", "flow": "flex",
                    "role": "sender", "flexible": {"low_s": 3.0, "b_r": 0.0}})
        (d / "h3.events.jsonl").write_text("".join(json.dumps(e) + "\n" for e in evs))
    return int(size)


def test_analysis_reports_delivery_and_fcts(tmp_path: Path) -> None:
    size = _write_two_r_run(tmp_path)
    r = results_json(rp.analyze(tmp_path))
    assert r["r000"]["delivered_fraction"] == pytest.approx(0.65, abs=1e-3)
    assert r["r000"]["regular_fct_norm"] == pytest.approx(1.4, abs=1e-3)
    assert r["r000"]["flexible_fct_norm"] == pytest.approx(1.7, abs=1e-3)
    assert r["r000"]["skipped_bytes"] == size        # B_r = size at r = 0, all spent
    assert r["r100"]["delivered_fraction"] == 1.0 and r["r100"]["skipped_bytes"] == 0
    assert r["paper"]["r000.delivered_fraction"] == 0.65


def test_plots_draw_every_phase_and_the_sweep(tmp_path: Path) -> None:
    _write_two_r_run(tmp_path)
    paths = rp.plot(tmp_path)
    assert_plots(paths, tmp_path, ["r000.png", "r100.png", "partial.png"])


def test_runs_of_one_r_give_mean_and_spread() -> None:
    runs = [rp.PartialRun(r=0.0, flexible_fct_s=2.0, flexible_fct_norm=1.7, regular_fct_s=1.0,
                          regular_fct_norm=1.30, delivered_fraction=0.80, low_s=None,
                          skipped_bytes=10, bytes_ok=True),
            rp.PartialRun(r=0.0, flexible_fct_s=2.0, flexible_fct_norm=1.7, regular_fct_s=1.0,
                          regular_fct_norm=1.50, delivered_fraction=0.90, low_s=None,
                          skipped_bytes=20, bytes_ok=True)]
    a = results_json(_One(rp.aggregate(0.0, runs)))["one"]
    assert a["delivered_fraction"] == pytest.approx(0.85)
    assert a["delivered_fraction_sd"] == pytest.approx(0.0707, abs=1e-4)
    assert (a["delivered_fraction_min"], a["delivered_fraction_max"]) == (0.80, 0.90)
    assert a["regular_fct_norm_seeds"] == [1.30, 1.50]
    assert a["skipped_bytes"] == 15 and a["low_s"] is None and a["bytes_ok"]
    assert not rp.aggregate(0.0, [dataclasses.replace(runs[0], bytes_ok=False), runs[1]]).bytes_ok


@dataclass(frozen=True)
class _One(Summary):
    one: rp.PartialResult
