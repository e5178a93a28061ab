"""symphony-ring: the plan models the paper's ring on a leaf-spine, and the
overlap and CCT come from the ranks' step events."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest
from plot_checks import assert_plots
from ring_runs import write_plan, write_ring_phase

from experiments import symphony_ring as exp
from testbed.timeline import PhaseData


def test_plan_is_a_fabric_with_the_papers_parameters() -> None:
    p = exp.Params.quick()
    plan = exp.plan(p)
    assert plan.topology.fabric is not None and plan.topology.fabric.ecmp
    assert exp.ring_order(p) == [1, 3, 2, 4]          # every ring hop crosses a spine
    # leaf by leaf: only the hops from one leaf to the next cross a spine
    local = dataclasses.replace(p, ring_layout="local")
    assert exp.ring_order(local) == [1, 2, 3, 4]
    ranks = exp.ring_order(dataclasses.replace(exp.Params.paper(), ring_layout="local"))
    crossing = sum((a - 1) // 4 != (b - 1) // 4 for a, b in
                   zip(ranks, ranks[1:] + ranks[:1], strict=True))
    assert (len(ranks), crossing) == (32, 8)
    with pytest.raises(ValueError, match="ring_layout 'ring': one of across, local"):
        dataclasses.replace(p, ring_layout="ring")
    net = plan.topology.network
    assert net is not None and net.red is not None and net.red.pmax == 0.2
    assert (net.red.kmin.bytes, net.red.kmax.bytes, net.link_gbps) == (50_000, 100_000, 10)
    warm, *measured = plan.phases
    # the warm-up: every host, job id 0 (untracked), outside the verdict
    assert warm.warmup and not warm.commands and len(warm.jobs) == 4
    assert {s.collective.job_id for s in warm.jobs.values()} == {0}  # type: ignore[union-attr]
    sym = {ph.name: any(c.startswith("table_add MyEgress.symphony.jobs") for c in ph.commands)
           for ph in measured}
    # every measured phase starts with no job registered, then registers its own
    from testbed.symphony import tracking_cleared
    assert all(ph.commands[:2] == tuple(tracking_cleared()) for ph in measured)
    assert sym == {"baseline-s0": False, "symphony-s0": True, "symphony_late-s0": False,
                   "pq-s0": False}
    phases = {ph.name: ph for ph in plan.phases}
    # late start: Symphony registered a third of the phase's line-rate time in
    late = phases["symphony_late-s0"].late_commands
    assert late and all(t == pytest.approx(0.33 * 2 * p.theoretical_cct_s) for t, _ in late)
    assert any("MyEgress.symphony.jobs" in line for _t, line in late)
    # PQ: the job in the ingress's lagging-step priority, two queues per port
    assert any(c.startswith("table_add MyIngress.lag_priority.jobs")
               for c in phases["pq-s0"].commands)
    assert plan.topology.priority_queues == 2
    two = exp.plan(exp.Params(hosts_per_leaf=2, seeds=1, schemes="baseline,symphony"))
    assert [ph.name for ph in two.phases] == ["warmup", "baseline-s0", "symphony-s0"]
    assert two.topology.priority_queues == 1
    imb = exp.plan(exp.Params(variant="imbalance", seeds=2))
    assert imb.topology.fabric is not None and not imb.topology.fabric.ecmp
    # the full profile's 3 Mb/s links, leaf1's uplink to spine1 at 1 / 1.13 of that
    assert imb.topology.switch_commands == {"leaf1": ("set_port_rate_bps 2654867 3",)}
    # the full profile: the paper's 1:1 fabric (4 ranks over 2 spines) and
    # its lossless RDMA configuration; the quick one is lossy and faster
    full, quick = exp.Params(), exp.Params.quick()
    assert (full.ranks, full.spines, full.pfc, full.chunk_kb) == (4, 2, True, 1024)
    assert (quick.ranks, quick.pfc, quick.link_mbps) == (4, False, 4.0)
    assert any(c.startswith("set_pfc ") for c in exp.plan(full).network_commands())
    assert not any(c.startswith("set_pfc ") for c in plan.network_commands())
    bases = {ph.jobs["h1"].collective.step_base for ph in imb.phases}   # type: ignore[union-attr]
    assert len(bases) == 2                            # each seed: other step tags


@pytest.mark.parametrize("kw", [{"variant": "x"}, {"leaves": 1}, {"chunk_kb": 0},
                                {"queue_pkts": 50}, {"k": 3.0}, {"schemes": "symphony"},
                                {"schemes": "baseline,fast"}, {"late_start": 1.0},
                                {"ring_dims": "4x1"}, {"ring_dims": "3x2"}, {"ring_dims": "2x"}])
def test_bad_params_are_refused(kw) -> None:
    with pytest.raises(ValueError):
        exp.Params(**kw)


def test_overlap_counts_the_steps_in_flight() -> None:
    def ev(kind: str, rank: int, step: int, t: int) -> dict:
        return {"event": kind, "rank": rank, "channel": 0, "step": step, "t_ns": t}
    data = PhaseData(name="x", dir=Path("."), events={"h1": [
        ev("step_start", 0, 0, 0), ev("step_start", 1, 0, 0),
        ev("step_end", 0, 0, 10), ev("step_start", 0, 1, 10),
        ev("step_end", 0, 1, 20), ev("step_start", 0, 2, 20),
        ev("step_end", 1, 0, 30), ev("step_start", 1, 1, 30)]})
    series = exp.overlap_series(data)
    assert max(o for _t, o in series) == 3            # rank 0 at step 2 while rank 1 is at 0
    assert series[-1][1] == 2


def test_overlap_counts_steps_across_collectives() -> None:
    """A rank in the next collective's first step (its ``step`` is 0 again)
    is one step ahead of a rank in this collective's last step, not behind."""
    def ev(kind: str, rank: int, seq: int, step: int, t: int) -> dict:
        return {"event": kind, "rank": rank, "channel": 0, "seq": seq, "step": step, "t_ns": t}
    evs = []
    for rank, t in ((0, 0), (1, 5)):
        for k, (seq, step) in enumerate([(0, 0), (0, 1), (0, 2), (1, 0), (1, 1), (1, 2)]):
            evs += [ev("step_start", rank, seq, step, t + 10 * k),
                    ev("step_end", rank, seq, step, t + 10 * k + 9)]
    series = exp.overlap_series(PhaseData(name="x", dir=Path("."), events={"h1": evs}))
    assert max(o for _t, o in series) == 2            # never more than one step apart


def test_plots_of_a_made_up_run(tmp_path: Path) -> None:
    p = exp.Params.quick()
    write_plan(tmp_path, exp, p)
    for i, scheme in enumerate(p.scheme_list):
        for seed in range(p.seeds):
            write_ring_phase(tmp_path, exp.phase_name(scheme, seed), exp.ring_order(p),
                             iterations=p.iterations, channels=p.channels,
                             step_s=0.2 - 0.01 * i)
    paths = exp.plot(tmp_path)
    assert_plots(paths, tmp_path, ["overlap.png", "cct_cdf.png"])


def test_congestion_variant_adds_background_hosts_and_traffic() -> None:
    p = exp.Params(variant="congestion", hosts_per_leaf=2, chunk_kb=256, iterations=2,
                   seeds=2, schemes="baseline,symphony", background_load=0.2)
    plan = exp.plan(p)
    fab = plan.topology.fabric
    assert fab is not None and not fab.ecmp and fab.hosts_per_leaf == 3
    assert plan.topology.n_hosts == 6
    assert exp.ring_order(p) == [1, 4, 2, 5]           # h3 and h6 are not ranks
    assert exp.background_hosts(p) == (3, 6)
    # static routes: h6 is reached over spine2, which also carries h1 -> h4
    assert exp.background_hop(p) == "leaf1->spine2" == f"leaf1->spine{fab.static_spine(4)}"
    assert not plan.topology.switch_commands            # no slowed hop
    warm = plan.phases[0]
    assert warm.warmup and sorted(warm.jobs) == ["h1", "h2", "h4", "h5"]
    for seed in range(2):
        arr = exp.background_arrivals(p, seed)
        for scheme in ("baseline", "symphony"):
            jobs = {ph.name: ph for ph in plan.phases}[exp.phase_name(scheme, seed)].jobs
            snd, rcv = jobs["h3"].flows[0], jobs["h6"].flows[0]
            assert (snd.role, rcv.role) == ("sender", "receiver")
            assert snd.peer_ip == jobs["h6"].ip and snd.job_id == 0   # untracked
            assert snd.arrivals_s == rcv.arrivals_s == arr   # same draw for every scheme
            assert jobs["h3"].collective is None and jobs["h1"].collective is not None
    # the draw's mean load is background_load of a link, over the span
    span = p.background_span * p.theoretical_cct_s * p.iterations
    many = [len(exp.background_arrivals(p, s)) for s in range(200)]
    mean_load = sum(many) / len(many) * p.background_kb * 1024 * 8 / (span * p.link_bps)
    assert mean_load == pytest.approx(0.2, rel=0.05)
    assert plan.info["background"]["hop"] == "leaf1->spine2"


@pytest.mark.parametrize("kw", [{"background_load": 0.0}, {"background_load": 1.0},
                                {"background_kb": 0}, {"background_span": 0}])
def test_bad_background_params_are_refused(kw) -> None:
    with pytest.raises(ValueError):
        exp.Params(variant="congestion", **kw)


def test_background_bursts_run_from_arrival_to_delivery() -> None:
    """A background message spans its planned arrival (after the agents'
    start) to the receiver's completion, in s since the first ring step."""
    s = 1_000_000_000
    data = PhaseData(name="x", dir=Path("."), events={
        "h1": [{"event": "start", "t_ns": 10 * s},
               {"event": "step_start", "rank": 0, "channel": 0, "step": 0, "t_ns": 10 * s + s // 10}],
        "h6": [{"event": "start", "t_ns": 10 * s},
               {"event": "completion", "flow": exp.BACKGROUND_FLOW, "role": "receiver",
                "index": 1, "t_ns": 13 * s},
               {"event": "completion", "flow": exp.BACKGROUND_FLOW, "role": "receiver",
                "index": 0, "t_ns": 11 * s}]})
    assert exp.background_bursts(data, (0.5, 2.5)) == [[0.4, 0.9], [2.4, 2.9]]


def test_the_paper_profile_runs_table_1s_2d_ring_leaf_by_leaf() -> None:
    p = exp.Params.paper()
    assert (p.ranks, p.dims, p.ring_layout, p.steps_per_collective) == (32, (8, 4), "local", 20)
    plan = exp.plan(p)
    ph = plan.phases[0]
    specs = {h: j.collective for h, j in ph.jobs.items()}
    assert {c.dims for c in specs.values() if c is not None} == {(8, 4)}
    # ranks leaf by leaf: a group of 8 is two leaves of 4
    assert exp.ring_order(p)[:8] == list(range(1, 9))
    assert plan.info["ring_dims"] == [8, 4]
