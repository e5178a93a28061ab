"""reflex-probing: the paper's budget rule, the sweep's plan (regular flows at
every part of the cycle, after the flexible flow had time for its budget) and
the analysis of made-up timelines against hand-computed figures, and the
plots drawn from them."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from plot_checks import assert_plots
from ring_runs import write_plan

from experiments import reflex_probing as rpb
from testbed.experiment import plan_to_dict
from testbed.summary import results_json

T0 = 10**12


def test_budget_rule_gives_the_papers_175_ms() -> None:
    # alpha 0.9, 1:1:3: first estimate after 2 intervals, 27 intervals of 10%
    # surplus buy a 3-interval exploit phase at 90%, the next exploit start is
    # at 2 + 6 x 5 = 32 intervals = 160 ms from a cycle boundary; a flow that
    # starts mid-cycle waits up to one 25 ms cycle more (the paper: 175 ms).
    assert rpb.budget_intervals(0.9, 1, 1, 3) == 32
    assert 160 <= 175 <= 160 + 25
    assert rpb.budget_intervals(0.9, 1, 1, 1) == 2 + 3 * 3   # needs 9 intervals
    assert rpb.budget_intervals(0.5, 1, 1, 3) == 2 + 5        # needs 3: the first exploit
    assert rpb.spent_fraction_calc(1, 1, 3) == pytest.approx(0.48)   # Fig. 10(a)
    assert rpb.spent_fraction_calc(1, 1, 1) == pytest.approx(0.8 / 3)
    # Case 1 of reflex-cases at 1:1:3: 1.35 in hand, each cycle costs 1.05 - 0.1
    assert rpb.refill_intervals(0.9, 1, 1, 3, 1) == pytest.approx(13.5)
    assert rpb.refill_intervals(0.9, 1, 1, 3, 3) == pytest.approx(13.5 + 2 * 9.5)


def test_plan_spreads_regular_arrivals_over_the_cycle() -> None:
    p = rpb.Params(exploits="1,3", n_regular=6, seeds=2)
    plan = rpb.plan(p)
    assert [ph.name for ph in plan.phases] == ["d1-s0", "d1-s1", "d3-s0", "d3-s1"]
    for ph in plan.phases:
        exploit = int(ph.name[1])
        senders = {f.flow: f for j in ph.jobs.values() for f in j.flows if f.role == "sender"}
        flex = senders["flex"]
        assert flex.flexible is not None and flex.flexible["exploit"] == exploit
        assert flex.flexible["alpha"] == 0.9 and flex.start_delay_s == 0
        cycle_s = (2 + exploit) * p.t_int_s
        lay = rpb.layout(p, exploit, int(ph.name[-1]))
        # the regular flows come only after the flexible flow could have budget
        budget_s = (rpb.budget_intervals(0.9, 1, 1, exploit) + 2 + exploit) * p.t_int_s
        regs = [senders[f"reg{i}"] for i in range(6)]
        assert min(r.start_delay_s for r in regs) >= budget_s
        assert all(r.flexible is None and r.dscp == 0 for r in regs)
        # one arrival in each sixth of the cycle
        slots = sorted(int(((r.start_delay_s - lay.head_intervals * p.t_int_s) % cycle_s)
                           / (cycle_s / 6)) for r in regs)
        assert slots == list(range(6))
        # before the long flow, alone long enough for the budget of every
        # exploit phase of its competition
        gap = senders["long"].start_delay_s - max(r.start_delay_s for r in regs)
        assert gap >= rpb.refill_intervals(0.9, 1, 1, exploit, p.long_cycles + 1) * p.t_int_s
        assert ph.commands == ("set_priority_weights 3 10 90",)
    # seeds can be split over runs: the next run goes on from first_seed
    later = rpb.plan(rpb.Params(exploits="3", seeds=2, first_seed=2))
    assert [ph.name for ph in later.phases] == ["d3-s2", "d3-s3"]
    with pytest.raises(ValueError, match="exploits"):
        rpb.Params(exploits="0,3")
    with pytest.raises(ValueError, match="exploits"):
        rpb.Params(exploits="three")
    with pytest.raises(ValueError, match="alpha"):
        rpb.Params(alpha=1.0)


def _write_run(tmp: Path, p: rpb.Params, phase: str, *, fcts: list[float], low_at: float,
               flex_rate: float, budget_out: bool = False) -> None:
    """One phase's events: the flexible flow goes low ``low_at`` s after its
    start; regular flow i takes fcts[i] x its line-rate time; during the long
    flow the flexible flow delivers ``flex_rate`` of the link's payload rate."""
    plan = rpb.plan(p)
    ph = next(x for x in plan.phases if x.name == phase)
    pdict = next(x for x in plan_to_dict(plan)["phases"] if x["name"] == phase)
    senders = {f.flow: f for j in ph.jobs.values() for f in j.flows if f.role == "sender"}
    reg_line_s = senders["reg0"].total_bytes * 8 / p.payload_bps
    d = tmp / "phases" / phase
    d.mkdir(parents=True)
    evs: list[dict[str, Any]] = [{"event": "start", "t_ns": T0, "host": "h1"}]
    ns = lambda s: T0 + int(s * 1e9)   # noqa: E731
    for f in senders.values():
        evs.append({"event": "flow_start", "t_ns": T0, "flow": f.flow, "role": "sender"})
    for i, fct in enumerate(fcts):
        t = senders[f"reg{i}"].start_delay_s + fct * reg_line_s
        evs.append({"event": "completion", "t_ns": ns(t), "flow": f"reg{i}",
                    "role": "receiver", "index": 0})
    cycle_s = 5 * p.t_int_s
    long_start = senders["long"].start_delay_s
    long_end = long_start + 3 * cycle_s + 0.1
    evs.append({"event": "completion", "t_ns": ns(long_end), "flow": "long",
                "role": "receiver", "index": 0})
    evs.append({"event": "completion", "t_ns": ns(long_end + 10), "flow": "flex",
                "role": "receiver", "index": 0})
    evs.append({"event": "priority", "t_ns": ns(low_at), "flow": "flex", "low": True,
                "fair_share_bps": p.payload_bps})
    if budget_out:   # high from the long flow's start on: no cycle with budget
        evs.append({"event": "priority", "t_ns": ns(long_start), "flow": "flex", "low": False,
                    "fair_share_bps": p.payload_bps})
    # flexible receiver samples: line rate before the long flow, flex_rate during it
    rate = p.payload_bps / 8
    t, got = 0.0, 0.0
    while t <= long_end + 1:
        evs.append({"event": "rx", "t_ns": ns(t), "flow": "flex", "rx_bytes": got})
        evs.append({"event": "rx", "t_ns": ns(t), "flow": "long",
                    "rx_bytes": max(0.0, t - long_start) * rate * (1 - flex_rate)})
        t += 0.5
        got += 0.5 * rate * (flex_rate if long_start <= t <= long_end else 1.0)
    evs.append({"event": "flow_end", "t_ns": ns(long_end + 10), "flow": "flex",
                "role": "sender", "flexible": {"low_s": 1.0}})
    (d / "h3.events.jsonl").write_text("".join(json.dumps(e) + "\n" for e in evs))
    write_plan(tmp, rpb, p)
    assert pdict["name"] == phase


def _write_two_seed_run(tmp: Path) -> None:
    """D_exploit 3, two seeds: the flexible flow low after 60 intervals
    (seed 0) and after 30, then out of budget (seed 1)."""
    p = rpb.Params(exploits="3", n_regular=5, seeds=2)
    low_at = 60 * p.t_int_s             # 60 intervals = 300 modelled ms
    _write_run(tmp, p, "d3-s0", fcts=[1.1, 1.2, 2.0, 2.1, 1.15], low_at=low_at,
               flex_rate=0.26)
    _write_run(tmp, p, "d3-s1", fcts=[1.3, 1.3, 1.3, 1.3, 1.3], low_at=low_at / 2,
               flex_rate=0.5, budget_out=True)


def test_analysis_reports_budget_time_percentiles_and_spent_share(tmp_path: Path) -> None:
    _write_two_seed_run(tmp_path)
    r = results_json(rpb.analyze(tmp_path))["d3"]
    s0, s1 = r["runs"]
    assert s0["budget_time_ms"] == pytest.approx(300, abs=0.1)
    assert s1["budget_time_ms"] == pytest.approx(150, abs=0.1)
    assert r["budget_time_ms"] == pytest.approx(225, abs=0.1)
    assert r["budget_time_ms_min"] == pytest.approx(150, abs=0.1)
    assert r["budget_time_ms_seeds"] == [s0["budget_time_ms"], s1["budget_time_ms"]]
    assert r["budget_time_ms_sd"] == pytest.approx(106.07, abs=0.1)
    assert s0["regular_fct_p50"] == pytest.approx(1.2, abs=1e-3)
    assert s0["regular_fct_p99"] == pytest.approx(2.1 - 0.04 * 0.1, abs=1e-3)
    assert s0["regular_fct_mean"] == pytest.approx(1.51, abs=1e-3)
    # half of 0.26 kept -> 48% of the fair share spent; at 0.5, none
    assert s0["whole_cycles"] >= 2 and s0["budgeted_cycles"] == s0["whole_cycles"]
    assert s0["spent_fraction"] == pytest.approx(0.48, abs=0.02)
    assert s0["low_share"] == 1.0
    # out of budget: nothing spent, and no cycle to judge Fig. 10(a) by
    assert s1["budgeted_cycles"] == 0 and s1["spent_fraction"] is None
    assert s1["spent_fraction_all"] == pytest.approx(0.0, abs=0.02)
    assert s1["low_share"] == 0.0
    assert r["spent_fraction"] == s0["spent_fraction"] and r["spent_fraction_n"] == 1
    assert r["budget_time_calc_ms"] == 160.0
    assert r["spent_fraction_calc"] == pytest.approx(0.48)
    assert rpb.analyze(tmp_path).paper["d3.budget_time_ms"] == 175.0


def test_plots_draw_every_phase_and_the_figures(tmp_path: Path) -> None:
    _write_two_seed_run(tmp_path)
    paths = rpb.plot(tmp_path)
    assert_plots(paths, tmp_path, ["d3-s0.png", "d3-s1.png", "probing.png"])


def test_low_time_counts_only_the_window() -> None:
    from testbed.timeline import PhaseData

    data = PhaseData("d3-s0", Path("."))
    evs = [(1.0, True), (3.0, False), (5.0, True), (9.0, False), (11.0, True)]
    data.events["h1"] = [{"event": "priority", "t_ns": int(t * 1e9), "flow": "flex", "low": low}
                         for t, low in evs]
    # [2, 10]: low 2-3, 5-9 -> 5 s; [0, 12]: 1-3, 5-9, 11-12 -> 7 s
    assert rpb._low_time(data, 2.0, 10.0) == pytest.approx(5.0)
    assert rpb._low_time(data, 0.0, 12.0) == pytest.approx(7.0)
    assert rpb._low_time(data, 3.5, 4.5) == 0.0
    assert rpb._low_time(data, 6.0, 7.0) == pytest.approx(1.0)
