"""symphony-sweep: one baseline and one Symphony phase per point (one baseline
per seed for k), the point's k, imbalance or chunk in its phases, several
axes in one run, the normalized CCT from the phases' collectives, and each
figure's claim judged from its axis's key."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest
from plot_checks import assert_plots
from ring_runs import write_plan, write_ring_phase

from experiments import symphony_ring as ring
from experiments import symphony_sweep as exp
from testbed.claims import (
    NOT_MEASURED,
    NOT_REPRODUCED,
    REPRODUCED,
    Claim,
    RunValues,
    evaluate,
    sample_values,
)
from testbed.summary import results_json


def test_k_points_share_one_baseline_and_set_their_own_k() -> None:
    p = exp.Params.quick()
    plan = exp.plan(p)
    assert p.value_list == [0.001, 0.1]
    assert [ph.name for ph in plan.phases] == ["warmup", "baseline-p0-s0", "symphony-p0-s0",
                                               "symphony-p1-s0"]
    configs = [next(c for c in ph.commands if "symphony.config" in c)
               for ph in plan.phases[2:]]
    # k in parts per million: 1e-3 -> 1000, 0.1 -> 100000
    assert [c.split()[3] for c in configs] == ["1000", "100000"]
    baseline = plan.phases[1].commands
    assert not any(c.startswith(("table_add MyEgress.symphony", "table_set_default"))
                   for c in baseline)
    assert plan.topology.fabric.ecmp  # type: ignore[union-attr]


def test_imbalance_and_chunk_points() -> None:
    p = exp.Params(sweep="imbalance", values="1.25,1.6", seeds=1, link_mbps=4.0)
    plan = exp.plan(p)
    assert plan.topology.fabric is not None and not plan.topology.fabric.ecmp
    rates = {ph.name: ph.switch_commands["leaf1"] for ph in plan.phases if not ph.warmup}
    assert rates["baseline-p0-s0"] == rates["symphony-p0-s0"] == ("set_port_rate_bps 3200000 3",)
    assert rates["symphony-p1-s0"] == ("set_port_rate_bps 2500000 3",)
    c = exp.Params(sweep="chunk", values="128,512", seeds=1, hosts_per_leaf=2)
    counts = [ph.jobs["h1"].collective.count  # type: ignore[union-attr]
              for ph in exp.plan(c).phases if not ph.warmup]
    assert counts == [128 * 1024 * 4 // 8] * 2 + [512 * 1024 * 4 // 8] * 2


@pytest.mark.parametrize("kw", [{"sweep": "tau"}, {"values": "x"}, {"values": "0.01,2"},
                                {"sweep": "chunk", "values": "0"}])
def test_bad_sweeps_are_refused(kw) -> None:
    with pytest.raises(ValueError):
        exp.Params(**kw)


def test_plot_of_a_made_up_k_sweep(tmp_path: Path) -> None:
    """Two seeds, Symphony's steps 10% and 20% shorter than their seed's
    baseline at the first point: each seed is judged against its own baseline."""
    p = dataclasses.replace(exp.Params.quick(), seeds=2)
    assert p.sweep == "k"
    write_plan(tmp_path, exp, p)
    for i, v in enumerate(p.value_list):
        pt = p.point(v)
        for seed in range(p.seeds):
            base_s = 0.2 * (1 + seed)
            # k sweeps share the first point's baseline
            for scheme, step_s in (("baseline", base_s),
                                   ("symphony", base_s * (0.9 - 0.1 * seed + 0.05 * i))):
                name = exp.phase_name(scheme, i, seed)
                if not (tmp_path / "phases" / name).exists():
                    write_ring_phase(tmp_path, name, ring.ring_order(pt),
                                     iterations=pt.iterations, channels=pt.channels,
                                     step_s=step_s)
    res = exp.analyze(tmp_path)
    by_seed = [pt.normalized_cct_by_seed for pt in res.points]
    assert by_seed[0] == pytest.approx([0.9, 0.8], abs=0.02)
    assert by_seed[1] == pytest.approx([0.95, 0.85], abs=0.02)
    assert_plots(exp.plot(tmp_path), tmp_path, ["normalized_cct.png"])


def _made_up_run(run_dir: Path, p: exp.Params, norm: dict[str, list[float]]) -> None:
    """Every phase of ``p`` as made-up ring steps: the baseline's steps 0.2 s,
    Symphony's at point i of an axis ``norm[axis][i]`` times as long."""
    write_plan(run_dir, exp, p)
    for axis in p.axes:
        for i, v in enumerate(p.values_of(axis)):
            pt = p.point(v, axis)
            for seed in range(p.seeds):
                for scheme, step_s in (("baseline", 0.2), ("symphony", 0.2 * norm[axis][i])):
                    name = p.phase(scheme, axis, 0 if scheme == "baseline" and axis == "k"
                                   else i, seed)
                    if not (run_dir / "phases" / name).exists():
                        write_ring_phase(run_dir, name, ring.ring_order(pt),
                                         iterations=pt.iterations, channels=pt.channels,
                                         step_s=step_s, lag_s=0.0)


def _quick(**kw) -> exp.Params:
    return dataclasses.replace(exp.Params.quick(), **{"values": "", **kw})


CLAIM_KEYS = ("best_log10_k", "chunk_best_change", "imbalance_gain_growth")


@pytest.mark.parametrize(("sweep", "keys"), [
    ("k", {"best_log10_k"}),
    ("chunk", {"chunk_best_change"}),
    ("imbalance", {"imbalance_gain_growth"}),
    ("imbalance,chunk,k", set(CLAIM_KEYS)),
])
def test_each_claims_key_only_where_its_axis_ran(tmp_path: Path, sweep: str,
                                                 keys: set[str]) -> None:
    p = _quick(sweep=sweep)
    norm = {"k": [1.0, 0.9, 0.95, 1.1], "chunk": [1.0, 0.97, 0.9, 0.85],
            "imbalance": [0.98, 0.95, 0.9, 0.88]}
    _made_up_run(tmp_path, p, norm)
    s = results_json(exp.analyze(tmp_path))
    assert {k for k in CLAIM_KEYS if k in s} == keys
    # a run of one axis keeps its points at the top level, one of several per axis
    if "," in sweep:
        assert set(s["axes"]) == {"k", "chunk", "imbalance"} and "points" not in s
        axes = s["axes"]
    else:
        assert "axes" not in s and s["sweep"] == sweep
        axes = {sweep: s}
    for axis, ax in axes.items():
        assert ax["normalized_cct"] == pytest.approx(norm[axis], abs=2e-3)
        # the made-up ranks run in lockstep, one step at a time; 10 marks per rank
        pt = ax["points"][1]
        assert pt["max_overlap"] == {"baseline": [1], "symphony": [1]}
        ranks = len(ring.ring_order(p.point(pt["value"], axis)))
        assert pt["ce_marked_packets"] == {"baseline": [10 * ranks], "symphony": [10 * ranks]}
    if "k" in keys:
        assert s["best_log10_k"] == pytest.approx(-3.0)          # 0.9 at k = 1e-3
    if "chunk" in sweep:
        assert s["chunk_best_change"] == pytest.approx(-0.15, abs=2e-3)  # at 1024 KiB
    if "imbalance" in sweep:
        assert s["imbalance_gain_growth"] == pytest.approx(0.10, abs=3e-3)
        assert s["imbalance_gain_growth_by_seed"] == [s["imbalance_gain_growth"]]
    # a claim whose key the run lacks is not measured, not judged
    for c in exp.CLAIMS:
        verdict = evaluate(c, [RunValues("r", True, sample_values(s, c))]).status
        assert (verdict == NOT_MEASURED) == (c.key not in keys), c.key
    assert_plots(exp.plot(tmp_path), tmp_path, ["normalized_cct.png"])


def test_the_chunk_claim_reads_only_chunks_of_512_kib_and_more(tmp_path: Path) -> None:
    """Symphony's best point at 256 KiB does not count: Fig. 8c's ~20% is
    from 512 kB on."""
    p = _quick(sweep="chunk")
    _made_up_run(tmp_path, p, {"chunk": [1.0, 0.7, 0.95, 1.02]})
    s = results_json(exp.analyze(tmp_path))
    assert s["best_value"] == 256 and s["normalized_cct_min"] == pytest.approx(0.7, abs=2e-3)
    assert s["chunk_best_change"] == pytest.approx(-0.05, abs=2e-3)
    small = _quick(sweep="chunk", values="128,256")
    _made_up_run(tmp_path / "small", small, {"chunk": [0.8, 0.7]})
    assert "chunk_best_change" not in results_json(exp.analyze(tmp_path / "small"))


def _claim(key: str) -> Claim:
    return next(c for c in exp.CLAIMS if c.key == key)


@pytest.mark.parametrize(("value", "status"), [
    (-0.20, REPRODUCED), (-0.11, REPRODUCED), (-0.29, REPRODUCED),
    (-0.05, NOT_REPRODUCED),      # a gain, but a quarter of the paper's
    (-0.35, NOT_REPRODUCED), (0.02, NOT_REPRODUCED),
])
def test_fig_8c_claim_is_up_to_20_percent_within_10_points(value: float, status: str) -> None:
    c = _claim("chunk_best_change")
    assert c.figure == "Fig. 8c" and c.paper == exp.REFERENCE["chunk_best_change"] == -0.20
    assert evaluate(c, [RunValues("r", True, (value,))]).status == status


@pytest.mark.parametrize(("value", "status"), [
    (0.04, REPRODUCED), (0.0, NOT_REPRODUCED), (-0.03, NOT_REPRODUCED),
])
def test_fig_8a_claim_is_the_trend_alone(value: float, status: str) -> None:
    c = _claim("imbalance_gain_growth")
    assert c.figure == "Fig. 8a" and c.paper is None and c.direction == "above"
    assert evaluate(c, [RunValues("r", True, (value,))]).status == status


def test_a_k_run_judges_fig_8b_alone() -> None:
    """The full and quick profiles sweep k only: Fig. 8a and 8c are not measured."""
    for p in (exp.Params(), exp.Params.quick()):
        assert p.axes == ["k"] and p.one_axis
    assert {c.figure for c in exp.CLAIMS} == {"Fig. 8a", "Fig. 8b", "Fig. 8c"}


def test_several_axes_run_k_chunk_imbalance_and_clear_ecmp_for_the_imbalance() -> None:
    p = _quick(sweep="imbalance,k")
    assert p.axes == ["k", "imbalance"] and not p.one_axis
    plan = exp.plan(p)
    names = [ph.name for ph in plan.phases if not ph.warmup]
    assert names == (["k-baseline-p0-s0"] + [f"k-symphony-p{i}-s0" for i in range(4)]
                     + [f"imbalance-{s}-p{i}-s0" for i in range(4)
                        for s in ("baseline", "symphony")])
    assert plan.topology.fabric is not None and plan.topology.fabric.ecmp
    cmds = {ph.name: ph.switch_commands for ph in plan.phases}
    assert cmds["imbalance-baseline-p1-s0"] == {
        "leaf1": ("table_clear MyIngress.ecmp", "set_port_rate_bps 3076923 3"),
        "leaf2": ("table_clear MyIngress.ecmp",)}
    assert not cmds["k-symphony-p3-s0"]
    # a run of the imbalance alone has static routes from the start
    alone = exp.plan(_quick(sweep="imbalance"))
    assert alone.topology.fabric is not None and not alone.topology.fabric.ecmp
    assert all(ph.switch_commands == {"leaf1": (ph.switch_commands["leaf1"][0],)}
               and ph.switch_commands["leaf1"][0].startswith("set_port_rate_bps")
               for ph in alone.phases if not ph.warmup)


@pytest.mark.parametrize("kw", [{"sweep": "k,k"}, {"sweep": "k,chunk", "values": "0.01"},
                                {"sweep": ""}, {"sweep": "k,tau"}])
def test_bad_axis_lists_are_refused(kw) -> None:
    with pytest.raises(ValueError):
        exp.Params(**kw)
