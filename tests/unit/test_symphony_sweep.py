"""symphony-sweep: one baseline and one Symphony phase per point (one baseline
per seed for k), the point's k, imbalance or chunk in its phases, and the
normalized CCT from the phases' collectives."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest
from plot_checks import assert_plots
from ring_runs import write_plan, write_ring_phase

from experiments import symphony_ring as ring
from experiments import symphony_sweep as exp


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
