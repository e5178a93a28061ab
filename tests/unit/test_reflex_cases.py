"""reflex-cases: the plan follows the paper's setup and the analysis measures
the rates while both flows are active (made-up timelines, also plotted)."""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from plot_checks import assert_plots
from ring_runs import write_plan

from experiments import reflex_cases as rc
from hosts.agent_spec import MAX_FLOW_BYTES
from hosts.reflex.flexible import Cycle, FlexibleFlow, FlexibleParams, Phase
from testbed.summary import Summary, results_json

T0 = 10**12


def test_case1_head_start_follows_the_papers_budget_rule() -> None:
    # Quick: the short regular flow (2 cycles of volume at 0.74 of the link)
    # spans up to 3 cycles, plus one: 4 exploit phases. The first is decided
    # and charged by the estimate of the flow alone (the whole link): it
    # costs 3 x (0.9 - 0.1) = 2.4 intervals of link volume and the warmup and
    # measure after it 2 x (0.9 - 0.5) = 0.8. The last needs 0.9 x 0.5 x 3 =
    # 1.35 in hand, each of the two between 3 x (0.45 - 0.1) - 2 x 0.05 =
    # 0.95: 6.45; alone the flow gains 0.1 per interval: 64.5 intervals, + 2
    # for the first estimate + 5 to synchronize. (Pricing the first phase at
    # the fair half too gave 49.)
    assert rc.case1_head_intervals(rc.Params.quick()) == pytest.approx(71.5)
    # Full: 8 cycles of volume span up to 11 cycles, plus one: 12 phases.
    assert rc.case1_head_intervals(rc.Params()) == pytest.approx(
        (3.2 + 1.35 + 10 * 0.95) / 0.1 + 7)


def _low_in_every_exploit_phase(p: rc.Params, head: float, offset: float) -> bool:
    """The paper's algorithm (hosts.reflex.flexible) on an ideal fluid link:
    the flexible flow starts ``offset`` intervals into a cycle and has the
    link alone for ``head`` intervals; then the regular flow (Case 1's short
    volume) gets 0.9 of it while the flexible flow is low and half while it
    is high. Whether the flexible flow was low throughout every exploit
    phase the regular flow saw."""
    t_int = 1_000_000                       # ns; the link carries 1 byte/ns
    steps = 20                              # fluid steps per interval
    dt = t_int // steps
    cycle = Cycle(t_int_ns=t_int, warmup=p.warmup, measure=p.measure, exploit=p.exploit)
    start = 10 * cycle.length_ns + round(offset * steps) * dt
    flow = FlexibleFlow(FlexibleParams(alpha=p.alpha), cycle, start)
    arrive = start + round(head * steps) * dt
    left = p.case1_short_cycles * p.cycle_intervals * t_int   # the regular flow's bytes
    delivered, t = 0.0, start
    while left > 0:
        low = flow.update(t, int(delivered)).low
        if t >= arrive:
            if cycle.phase(t) is Phase.EXPLOIT and not low:
                return False
            share = 0.1 if low else 0.5
            left -= (1 - share) * dt
        else:
            share = 1.0                     # alone: the whole link in either queue
        delivered += share * dt
        t += dt
    return True


def test_case1_head_start_covers_the_regular_flow_on_an_ideal_link() -> None:
    # Wherever the flexible flow starts in the cycle (and so wherever the
    # regular flow arrives), the derived head start keeps it low in every
    # exploit phase the regular flow sees; pricing the first of them at the
    # fair half (49 intervals) does not.
    p = rc.Params.quick()
    head = rc.case1_head_intervals(p)
    offsets = [k / 2 for k in range(2 * p.cycle_intervals)]
    assert all(_low_in_every_exploit_phase(p, head, o) for o in offsets)
    assert not all(_low_in_every_exploit_phase(p, 49.0, o) for o in offsets)


def test_the_full_profiles_plan_builds_with_its_head_start() -> None:
    # The full profile's flexible flow in Case 1 (head start, the regular
    # flow's lifetime, one interval) carries more than 1 GiB.
    p = rc.Params()
    plan = rc.plan(p)
    flex = next(f for ph in plan.phases if ph.name == "case1-reflex"
                for j in ph.jobs.values() for f in j.flows
                if f.flow == "flex" and f.role == "sender")
    assert 1 << 30 < flex.total_bytes <= MAX_FLOW_BYTES
    assert plan.info["case1_head_intervals"] == pytest.approx(147.5)


def test_plan_configures_the_papers_switch_and_every_scheme() -> None:
    p = rc.Params.quick()
    plan = rc.plan(p)
    full = rc.plan(dataclasses.replace(p, schemes=rc.Params().schemes))
    assert plan.topology.program == "switches/p4/reflex.p4"
    assert plan.topology.priority_queues == 2
    # The hosts' kernel spaces each sender's frames at its DCQCN rate, with
    # 16 full-size packets queued ahead.
    assert plan.topology.realtime and plan.topology.host_line_qdisc
    assert all(j.transport.qdisc_ahead_packets == 16 for ph in plan.phases
               for j in ph.jobs.values())
    cmds = " | ".join(plan.network_commands())
    assert "set_queue_depth 466" in cmds and "set_ecn_threshold 65" in cmds
    # The quick profile runs the paper's network on 60 Mb/s links (the full
    # profile's clock, at 20 Mb/s, is three times as slow).
    assert "set_port_rate_bps 60000000" in cmds and "set_priority 8 => 0" in cmds
    assert p.slowdown == pytest.approx(10_000 / 60) and p.t_int_s == pytest.approx(0.005e4 / 60)
    assert rc.Params().slowdown == 500
    names = [ph.name for ph in plan.phases]
    # the quick profile runs every scheme: each of the paper's claims is judged
    assert names[:2] == ["case1-reflex", "case2-reflex"] and len(names) == 12
    assert names == [ph.name for ph in full.phases]
    by = {ph.name: ph for ph in full.phases}
    assert by["case1-reflex"].commands == ("set_priority_weights 3 10 90",)
    assert by["case2-absolute"].commands == ("set_priority_weights 3 strict",)
    assert by["case1-weighted-10:9"].commands == ("set_priority_weights 3 9 10",)

    def sender(phase: str, flow: str) -> Any:
        return next(f for j in by[phase].jobs.values() for f in j.flows
                    if f.flow == flow and f.role == "sender")

    flex = sender("case1-reflex", "flex")
    assert flex.flexible["alpha"] == 0.9 and flex.flexible["t_int_us"] == pytest.approx(p.t_int_s * 1e6)
    # head starts in intervals (the paper's rule), whatever the clock
    assert sender("case1-reflex", "regular").start_delay_s == pytest.approx(71.5 * p.t_int_s)
    assert sender("case2-reflex", "flex").start_delay_s == pytest.approx(5 * p.t_int_s)
    assert sender("case1-weighted-9:1", "flex").dscp == 8
    assert sender("case1-weighted-9:1", "flex").flexible is None
    assert sender("case1-none", "flex").dscp == 0
    assert sender("case1-none", "regular").dscp == 0


def test_unknown_schemes_and_oversized_packets_are_refused() -> None:
    with pytest.raises(ValueError, match="unknown"):
        rc.Params(schemes="reflex,fifo")
    with pytest.raises(ValueError, match="1500-byte"):
        rc.Params(path_mtu=2048, msg_bytes=65536)


def test_dcqcn_overrides_reach_every_hosts_transport() -> None:
    plain = rc.plan(rc.Params.quick())
    assert all(j.transport.dcqcn == {"preset": "zhu2015"} for ph in plain.phases
               for j in ph.jobs.values())
    p = dataclasses.replace(rc.Params.quick(), dcqcn_overrides="B_bytes=32767, T_us=27.5")
    assert p.dcqcn_override_values == {"B_bytes": 32767, "T_us": 27.5}
    assert all(j.transport.dcqcn == {"preset": "zhu2015",
                                     "overrides": {"B_bytes": 32767, "T_us": 27.5}}
               for ph in rc.plan(p).phases for j in ph.jobs.values())
    with pytest.raises(ValueError, match="not NAME=VALUE"):
        rc.Params(dcqcn_overrides="B_bytes")
    with pytest.raises(ValueError, match="unknown parameter"):
        rc.Params(dcqcn_overrides="rpg_ai_rate=5")          # a connectx name


def _rx(flow: str, host: str, segments: list[tuple[float, float]], step: float = 0.05,
        ) -> list[dict[str, Any]]:
    """rx samples of a receiver: (until_s, payload Mb/s) segments from t = 0."""
    out, t, total = [], 0.0, 0.0
    for until, mbps in segments:
        while t < until - 1e-9:
            t += step
            total += mbps * 1e6 / 8 * step
            out.append({"event": "rx", "t_ns": T0 + int(t * 1e9), "host": host, "flow": flow,
                        "rx_bytes": int(total)})
    return out


def _write_run(run_dir: Path, p: rc.Params,
               phases: dict[str, dict[str, list[tuple[float, float]]]]) -> None:
    write_plan(run_dir, rc, p)
    for name, flows in phases.items():
        d = run_dir / "phases" / name
        d.mkdir(parents=True)
        evs: list[dict[str, Any]] = [{"event": "start", "t_ns": T0, "host": "h3"}]
        for flow, segs in flows.items():
            evs += _rx(flow, "h3", segs)
            evs.append({"event": "flow_end", "t_ns": T0 + 10**11, "host": "h1", "flow": flow,
                        "role": "sender", "cnps_rcvd": 3,
                        **({"flexible": {"low_s": 4.0}} if flow == "flex" else {})})
        (d / "h3.events.jsonl").write_text("".join(
            json.dumps(e) + "\n" for e in sorted(evs, key=lambda e: e["t_ns"])))


def _write_two_scheme_run(run_dir: Path, nic_gbps: float = 10.0) -> rc.Params:
    """ReFlex at the paper's fractions, weighted-9:1 at its weights."""
    p = dataclasses.replace(rc.Params.quick(), schemes="reflex,weighted-9:1", link_mbps=40.0,
                            nic_gbps=nic_gbps)
    pay = p.payload_bps / 1e6
    # Case 1: the flexible flow alone until 11 s, then 0.5 each until the next
    # cycle (12.5 s), then four whole cycles at 0.74 / 0.26 until 37.5 s: the
    # partial cycle is left out.
    case1 = {"flex": [(11, pay), (12.5, 0.5 * pay), (37.5, 0.26 * pay), (40, pay)],
             "regular": [(11, 0.0), (12.5, 0.5 * pay), (37.5, 0.74 * pay)]}
    case2 = {"regular": [(5, pay), (6.25, 0.5 * pay), (31.25, 0.55 * pay), (40, pay)],
             "flex": [(5, 0.0), (6.25, 0.5 * pay), (31.25, 0.45 * pay)]}
    fixed1 = {"flex": [(2.0, pay), (6.0, 0.1 * pay), (9.0, pay)],
              "regular": [(2.0, 0.0), (6.0, 0.9 * pay)]}
    fixed2 = {"regular": [(2.0, pay), (6.0, 0.9 * pay), (9.0, pay)],
              "flex": [(2.0, 0.0), (6.0, 0.1 * pay)]}
    _write_run(run_dir, p, {"case1-reflex": case1, "case2-reflex": case2,
                            "case1-weighted-9:1": fixed1, "case2-weighted-9:1": fixed2})
    return p


def test_analysis_measures_rates_over_whole_cycles_while_both_are_active(tmp_path: Path) -> None:
    p = _write_two_scheme_run(tmp_path)
    cyc = p.t_int_s * p.cycle_intervals   # 6.25 s
    r = results_json(rc.analyze(tmp_path))
    assert r["case1"]["regular_rate_fraction"] == pytest.approx(0.74, abs=0.005)
    assert r["case1"]["whole_cycles"] == 4 and r["case1"]["window_s"] == [12.5, 37.5]
    assert r["case2"]["flexible_rate_fraction"] == pytest.approx(0.45, abs=0.01)
    assert r["within_10pct_of_paper"] is True
    w = r["schemes"]["weighted-9:1"]
    assert w["case1"]["regular_rate_fraction"] == pytest.approx(0.9, abs=0.02)
    assert w["case2"]["flexible_rate_fraction"] == pytest.approx(0.1, abs=0.02)
    assert r["paper"]["case1.regular_rate_fraction"] == 0.74
    assert cyc == pytest.approx(6.25)


def test_a_later_flow_starved_until_the_first_ends_measures_zero_from_its_start(
        tmp_path: Path) -> None:
    # Absolute priority, case 2: the flexible flow, started 1.25 s in (one
    # probing interval), delivers nothing in the strict low queue until the
    # regular flow ends at 6 s. Both were active from 1.25 s: its rate there is 0.
    p = dataclasses.replace(rc.Params.quick(), schemes="absolute", link_mbps=40.0)
    pay = p.payload_bps / 1e6
    _write_run(tmp_path, p, {
        "case1-absolute": {"flex": [(2.0, pay), (6.0, 0.0), (9.0, pay)],
                           "regular": [(2.0, 0.0), (6.0, pay)]},
        "case2-absolute": {"regular": [(6.0, pay)], "flex": [(6.0, 0.0), (9.0, pay)]}})
    for case in (1, 2):
        d = tmp_path / "phases" / f"case{case}-absolute"
        (d / "h1.events.jsonl").write_text("".join(
            json.dumps({"event": "flow_start", "t_ns": T0, "host": h, "flow": f,
                        "role": "sender"}) + "\n" for h, f in (("h1", "flex"), ("h2", "regular"))))
    r = results_json(rc.analyze(tmp_path))["schemes"]["absolute"]
    assert r["case2"]["flexible_rate_fraction"] == 0.0
    assert r["case2"]["other_rate_fraction"] == pytest.approx(1.0, abs=0.02)
    assert r["case2"]["window_s"] == [1.25, 6.0]
    # the regular flow, delivering from its first sample, is measured from there
    assert r["case1"]["regular_rate_fraction"] == pytest.approx(1.0, abs=0.02)
    assert r["case1"]["window_s"][0] == pytest.approx(2.0)


def test_plots_draw_every_phase_and_the_rates(tmp_path: Path) -> None:
    _write_two_scheme_run(tmp_path)
    paths = rc.plot(tmp_path)
    assert_plots(paths, tmp_path, ["case1-reflex.png", "case2-reflex.png",
                                   "case1-weighted-9:1.png", "case2-weighted-9:1.png",
                                   "rates.png"])


def test_plot_labels_name_the_runs_own_link_and_modelled_rates(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import matplotlib.figure

    _write_two_scheme_run(tmp_path, nic_gbps=25.0)
    titles: list[str] = []
    ylabels: list[str] = []

    def timelines(p: rc.Params, run_dir: Path, phases: Any) -> list[Path]:
        titles.extend(title for _name, title in phases)
        return []

    save = matplotlib.figure.Figure.savefig

    def savefig(fig: matplotlib.figure.Figure, *args: Any, **kw: Any) -> None:
        ylabels.extend(ax.get_ylabel() for ax in fig.axes)
        save(fig, *args, **kw)

    monkeypatch.setattr(rc, "phase_timelines", timelines)
    monkeypatch.setattr(matplotlib.figure.Figure, "savefig", savefig)
    rc.plot(tmp_path)
    assert len(titles) == 4
    assert all(t.endswith("(40 Mb/s = 25 Gb/s)") for t in titles), titles
    assert ylabels == ["Gb/s (modelled 25 Gb/s link)"] * 2


def test_several_runs_per_phase_give_mean_and_spread() -> None:
    p = dataclasses.replace(rc.Params.quick(), schemes="reflex,none", seeds=2)
    assert [ph.name for ph in rc.plan(p).phases] == [
        "case1-reflex", "case1-reflex-s1", "case2-reflex", "case2-reflex-s1",
        "case1-none", "case1-none-s1", "case2-none", "case2-none-s1"]
    runs = [rc.CaseRun(regular_rate_fraction=0.70, flexible_rate_fraction=None,
                       other_rate_fraction=0.3, window_s=[1.0, 2.0], whole_cycles=2,
                       flexible_low_s=None, cnps=0),
            rc.CaseRun(regular_rate_fraction=0.80, flexible_rate_fraction=None,
                       other_rate_fraction=0.2, window_s=[1.5, 2.5], whole_cycles=3,
                       flexible_low_s=None, cnps=0)]
    a = results_json(_Case(rc.aggregate(runs)))["case1"]
    assert a["regular_rate_fraction"] == pytest.approx(0.75)
    assert a["regular_rate_fraction_sd"] == pytest.approx(0.0707, abs=1e-4)
    assert a["regular_rate_fraction_seeds"] == [0.70, 0.80]
    assert "flexible_rate_fraction" not in a and "flexible_low_s" not in a
    assert a["window_s"] == [[1.0, 2.0], [1.5, 2.5]]
    assert [r["whole_cycles"] for r in a["runs"]] == [2, 3]
    one = results_json(_Case(rc.aggregate(runs[:1])))["case1"]
    assert one["regular_rate_fraction"] == 0.70 and one["window_s"] == [1.0, 2.0]
    assert "runs" not in one and "regular_rate_fraction_sd" not in one
    with pytest.raises(ValueError, match="seeds"):
        rc.Params(seeds=0)


@dataclass(frozen=True)
class _Case(Summary):
    case1: rc.CaseResult


def test_a_starved_later_flow_is_told_by_its_samples_not_their_grid(tmp_path: Path) -> None:
    """The first flow's last byte arrives between two of the later flow's
    samples (a flow's final sample is taken at its end, off the grid: the
    virtual-time engine's case2-absolute, regular flow's last byte 2.3 ms
    after the flexible flow's last empty sample). The later flow is starved
    all the same: its rate is 0 from its start, not a 2 ms window's."""
    p = dataclasses.replace(rc.Params.quick(), schemes="absolute", link_mbps=40.0)
    pay = p.payload_bps / 1e6
    _write_run(tmp_path, p, {
        "case1-absolute": {"flex": [(2.0, pay), (6.0, 0.0), (9.0, pay)],
                           "regular": [(2.0, 0.0), (6.0, pay)]},
        "case2-absolute": {"regular": [(6.0, pay)], "flex": [(6.0, 0.0), (9.0, pay)]}})
    d = tmp_path / "phases" / "case2-absolute"
    evs = [json.loads(line) for line in (d / "h3.events.jsonl").read_text().splitlines()]
    last = max(e["rx_bytes"] for e in evs if e["event"] == "rx" and e["flow"] == "regular")
    evs.append({"event": "rx", "t_ns": T0 + int(6.023e9), "host": "h3", "flow": "regular",
                "rx_bytes": last + int(pay * 1e6 / 8 * 0.023)})
    (d / "h3.events.jsonl").write_text("".join(
        json.dumps(e) + "\n" for e in sorted(evs, key=lambda e: e["t_ns"])))
    for case in (1, 2):
        (tmp_path / "phases" / f"case{case}-absolute" / "h1.events.jsonl").write_text("".join(
            json.dumps({"event": "flow_start", "t_ns": T0, "host": h, "flow": f,
                        "role": "sender"}) + "\n" for h, f in (("h1", "flex"), ("h2", "regular"))))
    r = results_json(rc.analyze(tmp_path))["schemes"]["absolute"]["case2"]
    assert r["window_s"] == [1.25, 6.023]
    assert r["flexible_rate_fraction"] < 0.01
    assert r["other_rate_fraction"] == pytest.approx(1.0, abs=0.02)
