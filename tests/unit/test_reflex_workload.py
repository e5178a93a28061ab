"""reflex-workload: the Poisson workload's draw, the plan per scheme, and the
FCT speed-ups computed from saved timelines, and their plots."""

from __future__ import annotations

import json
import statistics
from pathlib import Path
from typing import Any

import pytest

from experiments import reflex_workload as rw
from experiments._reflex_net import QUICK_LINK_MBPS
from hosts.reflex.schemes import DSCP_HIGH, DSCP_LOW
from testbed.experiment import params_to_dict, plan_to_dict

T0 = 10**12
# What the paper fixes (as in test_reflex_quick_profiles): the quick profile keeps it.
MECHANISM = ("nic_gbps", "t_int_us", "warmup", "measure", "exploit", "queue_pkts",
             "ecn_k_pkts", "msg_bytes", "window", "path_mtu", "dcqcn_preset", "rto_us")


def test_arrivals_load_the_downlink_to_40_percent_with_half_the_flows_flexible() -> None:
    p = rw.Params(flows=400)
    a = rw.arrivals(p, 0)
    assert len(a) == 400 and sum(x.kind == "flexible" for x in a) == 200
    assert [x.start_s for x in a] == sorted(x.start_s for x in a)
    # Poisson: mean gap = one flow's line-rate time / load; every flow is the
    # same size, so the offered load is the paper's 40%.
    gaps = [b.start_s - x.start_s for x, b in zip(a, a[1:], strict=False)]
    line_s = p.flexible_cycles * p.cycle_s
    assert line_s / statistics.fmean(gaps) == pytest.approx(0.4, rel=0.15)
    assert statistics.stdev(gaps) == pytest.approx(statistics.fmean(gaps), rel=0.2)
    # the senders take the flows in turn; a draw is a function of its seed
    assert [x.sender for x in a[:5]] == [1, 2, 3, 4, 1]
    assert rw.arrivals(p, 0) == a and rw.arrivals(p, 1) != a


def test_plan_runs_every_scheme_on_the_same_arrivals() -> None:
    p = rw.Params.quick()
    plan = rw.plan(p)
    assert [ph.name for ph in plan.phases] == ["w1-none", "w1-weighted-9:1", "w1-reflex-a080"]
    assert plan.topology.n_hosts == p.senders + 1 and p.link_mbps == QUICK_LINK_MBPS
    rx = f"h{p.receiver}"
    by = {ph.name: ph for ph in plan.phases}
    for ph in plan.phases:
        recv = {f.flow for f in ph.jobs[rx].flows}
        assert len(recv) == p.flows
        senders = [f for h, j in ph.jobs.items() if h != rx for f in j.flows]
        assert {f.flow for f in senders} == recv
        assert sorted(f.start_delay_s for f in senders) == [a.start_s for a in rw.arrivals(p, 0)]
    assert by["w1-none"].commands == (f"set_priority_weights {p.receiver} 10 90",)

    def flex(name: str) -> list[Any]:
        return [f for j in by[name].jobs.values() for f in j.flows
                if f.role == "sender" and f.flow.startswith("flex")]
    assert {f.dscp for f in flex("w1-none")} == {DSCP_HIGH}
    assert {f.dscp for f in flex("w1-weighted-9:1")} == {DSCP_LOW}
    ref = flex("w1-reflex-a080")
    assert {(f.flexible["alpha"], f.flexible["r"]) for f in ref} == {(0.8, 1.0)}
    assert all(f.flexible["t_int_us"] == p.t_int_us * p.slowdown for f in ref)
    assert not any(f.flexible for j in by["w1-reflex-a080"].jobs.values() for f in j.flows
                   if f.flow.startswith("regu"))


def test_sweeps_name_alpha_and_r_schemes() -> None:
    p = rw.Params(alphas="0.5,1", rs="0.2")
    assert rw.scheme_list(p) == ["none", "weighted-9:1", "reflex-a050", "reflex-a100",
                                 "reflex-r020"]
    assert rw.reflex_params("reflex-a050") == (0.5, 1.0)
    assert rw.reflex_params("reflex-r020") == (1.0, 0.2)
    assert rw.reflex_params("weighted-9:1") is None


@pytest.mark.parametrize("kw, msg", [
    ({"baselines": "weighted-9:1"}, "'none'"), ({"alphas": "1.5"}, r"\[0, 1\]"),
    ({"rs": "x"}, "comma-separated"), ({"flows": 1}, "each class"),
    ({"load": 1.0}, "load"), ({"senders": 0}, "senders")])
def test_bad_parameters_are_refused(kw: dict[str, Any], msg: str) -> None:
    with pytest.raises(ValueError, match=msg):
        rw.Params(**kw)


def test_p99_of_few_flows_is_the_largest() -> None:
    assert rw.p99([3.0, 1.0, 2.0]) == 3.0
    assert rw.p99([float(i) for i in range(1, 201)]) == 198.0


def _phase(run: Path, name: str, p: rw.Params, fct: dict[str, float]) -> None:
    d = run / "phases" / name
    d.mkdir(parents=True)
    size = rw.flow_count(p) * p.msg_bytes
    evs: list[dict[str, Any]] = [{"event": "start", "t_ns": T0, "host": "h1"}]
    for a in rw.arrivals(p, 0):
        start = T0 + int(a.start_s * 1e9)
        end = start + int(fct[a.kind] * 1e9)
        evs += [{"event": "completion", "t_ns": end, "host": "h4", "flow": a.name,
                 "role": "receiver", "index": 0},
                {"event": "flow_end", "t_ns": end, "host": "h4", "flow": a.name,
                 "role": "receiver", "bytes": size, "bytes_ok": True},
                {"event": "flow_end", "t_ns": end, "host": f"h{a.sender}", "flow": a.name,
                 "role": "sender", "t_start_ns": T0}]
    (d / "h1.events.jsonl").write_text("".join(json.dumps(e) + "\n" for e in evs))


def _write_quick_run(run: Path) -> rw.Params:
    """The quick profile's schemes, each with its own regular and flexible FCTs."""
    p = rw.Params.quick()
    (run / "plan.json").write_text(json.dumps(
        {"experiment": rw.NAME, "params": params_to_dict(p), **plan_to_dict(rw.plan(p))}))
    _phase(run, "w1-none", p, {"regular": 2.0, "flexible": 2.0})
    _phase(run, "w1-weighted-9:1", p, {"regular": 1.0, "flexible": 4.0})
    _phase(run, "w1-reflex-a080", p, {"regular": 1.6, "flexible": 2.5})
    return p


def test_speedups_are_fct_without_priority_over_fct_with_it(tmp_path: Path) -> None:
    p = _write_quick_run(tmp_path)
    r = rw.analyze(tmp_path)
    w = r["w1"]
    assert w["none"]["regular"]["mean_fct_s"] == pytest.approx(2.0, abs=1e-3)
    assert "mean_speedup" not in w["none"]["regular"]
    assert w["weighted-9:1"]["regular"]["mean_speedup"] == pytest.approx(2.0)
    assert w["weighted-9:1"]["flexible"]["p99_speedup"] == pytest.approx(0.5)
    assert w["reflex-a080"]["regular"]["p99_speedup"] == pytest.approx(1.25)
    assert w["reflex-a080"]["flexible"]["mean_speedup"] == pytest.approx(0.8)
    assert w["reflex-a080"]["flexible"]["mean_speedup_seeds"] == [0.8]
    assert w["none"]["flexible"]["delivered_fraction"] == 1.0
    assert w["none"]["regular"]["n"] == w["none"]["flexible"]["n"] == p.flows // 2
    assert r["paper"] == rw.REFERENCE
    # the claims judge exactly these keys
    for c in rw.CLAIMS:
        scheme, kind, stat = c.key.split(".")[1:]
        assert stat in w[scheme][kind]


def test_plots_draw_every_phase_and_the_speedups(tmp_path: Path) -> None:
    p = _write_quick_run(tmp_path)
    paths = rw.plot(tmp_path)
    assert [x.name for x in paths] == [f"{rw.phase_name(s, 0)}.png" for s in rw.scheme_list(p)
                                       ] + ["speedups.png"]
    assert len(paths) == 4
    for x in paths:
        assert x.parent == tmp_path / "plots"
        assert x.read_bytes()[:4] == b"\x89PNG" and x.stat().st_size > 10_000


def test_quick_keeps_the_papers_mechanism_and_the_claims_points() -> None:
    quick, full = rw.Params.quick(), rw.Params()
    for f in MECHANISM:
        assert getattr(quick, f) == getattr(full, f), f
    assert quick.load == full.load == 0.4 and quick.flexible_share == 0.5
    schemes = set(rw.scheme_list(quick))
    assert {c.key.split(".")[1] for c in rw.CLAIMS} <= schemes
