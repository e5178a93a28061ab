"""symphony-job-stream (Fig. 7c): the round of jobs a seed draws, the plan that
runs it under both schemes, the JCT analysis against hand-computed figures,
the paper profile, bad parameters, and the quick profile end to end on the
sim engine."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest
from ring_runs import write_plan, write_ring_phase

from experiments import symphony_job_stream as js
from experiments._symphony_net import OBSERVED_REGISTERS, paper_ring_kwargs
from testbed.claims import RunValues, evaluate, lookup, sample_values
from testbed.experiment import PhasePlan, scaled_down_from
from testbed.summary import results_json


def test_a_seed_draws_the_same_round_every_time_and_another_seed_another() -> None:
    p = js.Params.paper()
    a, b = js.stream(p, 0), js.stream(p, 0)
    assert a == b
    assert a != js.stream(p, 1)


@pytest.mark.parametrize("seed", [0, 1, 2, 7])
def test_the_jobs_take_disjoint_hosts_in_the_declared_sizes(seed: int) -> None:
    p = js.Params.paper()
    jobs = js.stream(p, seed)
    assert [j.ranks for j in jobs] == [64, 32, 16, 16]
    hosts = [h for j in jobs for h in j.hosts]
    assert len(hosts) == len(set(hosts)) == 128
    assert all(1 <= h <= p.fabric.n_hosts for h in hosts)
    for j in jobs:
        assert j.hosts == sorted(j.hosts) and len(j.hosts) == j.ranks
        assert j.workload_kb in (4096, 16384, 32768) and j.passes == 1
        # a job's ideal duration: 2 (N - 1) steps of workload / N at line rate
        assert j.ideal_s == pytest.approx(p.collective_wire_s(j.ranks, j.workload_kb))
    # the first arrival at 0, the others later; each job's steps tagged apart
    assert min(j.arrival_s for j in jobs) == 0 and len({j.arrival_s for j in jobs}) == 4
    assert len({j.step_base for j in jobs}) == 4


def test_the_arrival_gap_scales_the_arrivals() -> None:
    p = js.Params.paper()
    near = js.stream(dataclasses.replace(p, arrival_gap=0.1), 3)
    far = js.stream(dataclasses.replace(p, arrival_gap=1.0), 3)
    assert max(j.arrival_s for j in far) == pytest.approx(
        10 * max(j.arrival_s for j in near), rel=1e-3)
    together = js.stream(dataclasses.replace(p, arrival_gap=0.0), 3)
    assert {j.arrival_s for j in together} == {0.0}


def _assert_same_jobs(a: PhasePlan, b: PhasePlan) -> None:
    """Both phases run the same collectives on the same hosts at the same
    times; only the job ids differ."""
    assert a.jobs.keys() == b.jobs.keys()
    for host, spec in a.jobs.items():
        twin = b.jobs[host]
        assert spec.collective is not None and twin.collective is not None
        assert spec.start_delay_s == twin.start_delay_s
        assert dataclasses.replace(spec.collective, job_id=0) == dataclasses.replace(
            twin.collective, job_id=0)


def test_both_schemes_of_a_seed_run_the_same_jobs_and_only_symphony_tracks_them() -> None:
    p = js.Params.quick()
    p = dataclasses.replace(p, seeds=2)
    plan = js.plan(p)
    by_name = {ph.name: ph for ph in plan.phases}
    ids_seen: set[int] = set()
    for seed in range(p.seeds):
        base, sym = by_name[js.phase_name("baseline", seed)], by_name[js.phase_name("symphony", seed)]
        _assert_same_jobs(base, sym)
        ids = {s.collective.job_id for ph in (base, sym) for s in ph.jobs.values()
               if s.collective is not None}
        assert not ids & ids_seen           # a job id per job and phase
        ids_seen |= ids
        assert not any("symphony.track" in c for c in base.commands)
        tracked = {int(c.split()[3]) for c in sym.commands if "symphony.track" in c}
        assert tracked == {s.collective.job_id for s in sym.jobs.values()
                           if s.collective is not None}


def _write_run(run_dir: Path, p: js.Params, jct_s: dict[str, dict[int, float]]) -> None:
    """Every job of seed 0 under both schemes, each rank's one collective
    lasting ``jct_s[scheme][job]`` from the job's arrival."""
    write_plan(run_dir, js, p)
    for scheme in js.SCHEMES:
        for j in js.stream(p, 0):
            steps = 2 * (j.ranks - 1)
            write_ring_phase(run_dir, js.phase_name(scheme, 0), j.hosts, iterations=j.passes,
                             step_s=jct_s[scheme][j.index] / steps, lag_s=0.0,
                             start_s=j.arrival_s)


def test_the_analysis_compares_each_job_with_itself_by_size(tmp_path: Path) -> None:
    p = dataclasses.replace(js.Params(), payload="phantom", seeds=1)
    jobs = js.stream(p, 0)
    assert [j.ranks for j in jobs] == [4, 2, 2]
    base = {0: 10.0, 1: 4.0, 2: 5.0}
    sym = {0: 8.0, 1: 4.2, 2: 5.0}          # the 4-rank job 20% faster; 2-rank +5%, 0%
    _write_run(tmp_path, p, {"baseline": base, "symphony": sym})
    res = js.analyze(tmp_path)
    assert [(r.index, r.change) for r in res.jobs] == [(0, -0.2), (1, 0.05), (2, 0.0)]
    assert res.by_size["4"].median_change == -0.2 and res.by_size["4"].jobs == 1
    assert res.by_size["2"].median_change == 0.025 and sorted(res.by_size["2"].changes) == [0.0,
                                                                                           0.05]
    assert res.jct_change.largest.ranks == 4 and res.jct_change.smallest.ranks == 2
    assert res.jct_change.growth == pytest.approx(-0.225)
    assert res.jct_change.largest.seeds == [-0.2]
    # the jobs' windows overlap as their arrivals and JCTs say
    windows = sorted((j.arrival_s, j.arrival_s + base[j.index]) for j in jobs)
    want = js.most_at_once([(int(a * 1e9), int(b * 1e9)) for a, b in windows])
    assert res.concurrency["baseline"] == want
    assert res.bit_exact is None             # phantom payloads
    # each rank's report counts 10 marked packets (ring_runs); no registers read
    assert all(r.ce_marked_baseline == r.ce_marked_symphony == 10 * r.ranks for r in res.jobs)
    assert all(r.symphony_marks is None and r.symphony_alpha is None for r in res.jobs)
    s = results_json(res)
    assert lookup(s, "jct_change.largest.median") == -0.2
    verdicts = {c.key: evaluate(c, [RunValues("run", True, sample_values(s, c))]).status
                for c in js.CLAIMS}
    assert verdicts["jct_change.largest.median"] == "reproduced"       # -20% vs -17% +- 10
    assert verdicts["jct_change.smallest.median"] == "reproduced"      # +2.5% vs -1.5% +- 5
    assert verdicts["jct_change.growth"] == "reproduced"


def test_a_job_that_did_not_finish_every_pass_is_an_error(tmp_path: Path) -> None:
    p = dataclasses.replace(js.Params(), payload="phantom", seeds=1)
    _write_run(tmp_path, p, {"baseline": {0: 1.0, 1: 1.0, 2: 1.0},
                             "symphony": {0: 1.0, 1: 1.0, 2: 1.0}})
    j = js.stream(p, 0)[1]
    victim = tmp_path / "phases" / js.phase_name("symphony", 0) / f"h{j.hosts[0]}.events.jsonl"
    lines = [ln for ln in victim.read_text().splitlines()
             if json.loads(ln)["event"] != "collective_end"]
    victim.write_text("\n".join(lines) + "\n")
    with pytest.raises(ValueError, match=rf"job 1, h\d+ completed 0 of {j.passes} collectives"):
        js.analyze(tmp_path)


def test_most_at_once_counts_open_intervals() -> None:
    assert js.most_at_once([(0, 10), (5, 15), (12, 20)]) == 2
    assert js.most_at_once([(0, 10), (10, 20)]) == 1      # one ends as the next starts
    assert js.most_at_once([(0, 30), (1, 2), (3, 4), (1, 29)]) == 3


def test_the_paper_profile_is_section_4_5_on_section_4_1s_network() -> None:
    p = js.Params.paper()
    net = paper_ring_kwargs(128)
    assert all(getattr(p, k) == v for k, v in net.items())
    assert p.fabric.n_hosts == 128 and p.link_bps == 10e9 and p.slowdown == 1
    assert p.size_list == [64, 32, 16, 16] and sorted(set(p.size_list)) == js.REFERENCE[
        "job_sizes"]
    assert p.workload_list == [mb * 1024 for mb in js.REFERENCE["workloads_mb"]]
    assert p.payload == "phantom"
    cuts = scaled_down_from(js)
    assert set(cuts) == {"passes", "seeds"}
    assert cuts["passes"].paper == "16,128" and cuts["seeds"].paper == 50
    assert js.REFERENCE["jct_change.growth"] == pytest.approx(-0.17 + 0.0153)


@pytest.mark.parametrize(("bad", "match"), [
    ({"job_sizes": "4,4,4"}, "more than the fabric's 8 hosts"),
    ({"job_sizes": "4,1"}, "every job needs >= 2 ranks"),
    ({"job_sizes": "4,x"}, "comma-separated integers"),
    ({"job_sizes": "3,2", "workloads_kb": "1"}, "workloads_kb 1: must split"),
    ({"passes": "3,2"}, "min,max with 1 <= min <= max"),
    ({"passes": "3"}, "two values"),
    ({"arrival_gap": -1.0}, "arrival_gap -1.0: must be >= 0"),
    ({"seeds": 50}, "at most 250 job ids"),
])
def test_bad_parameters_are_refused(bad: dict[str, object], match: str) -> None:
    with pytest.raises(ValueError, match=match):
        js.Params(**bad)  # type: ignore[arg-type]


def test_the_quick_profile_on_the_sim_engine(tmp_path: Path) -> None:
    """Every job of both schemes completes bit-exact; each job's JCT is at
    least its line-rate time, and the summary holds what the claims judge."""
    from testbed.runner import RunOptions, run

    s = run(js.NAME, RunOptions(quick=True, out=tmp_path / "q", engine="sim",
                                echo=lambda _s: None, interpreter="cpython"))
    assert s["fidelity_ok"] and s["bit_exact"] is True
    p = js.Params.quick()
    jobs = s["jobs"]
    assert [j["ranks"] for j in jobs] == p.size_list
    for j in jobs:
        assert j["jct_baseline"] >= j["ideal_s"] and j["jct_symphony"] >= j["ideal_s"]
    for c in js.CLAIMS:
        assert lookup(s, c.key) is not None
    assert set(s["by_size"]) == {"2", "4"}
    # every switch's Symphony registers were read after each phase: each
    # tracked job's alpha starts at 1 with its first packet
    for j in jobs:
        assert j["symphony_alpha"] >= 1 and j["symphony_marks"] >= 0
    regs = json.loads((tmp_path / "q" / "phases" / js.phase_name("baseline", 0)
                       / "switch_stats.json").read_text())["registers"]
    assert set(regs) == {"leaf1", "leaf2", "spine1"}
    assert all(set(r) == set(OBSERVED_REGISTERS) for r in regs.values())
    # the baseline registers no job: Symphony tracked nothing
    assert not any(v for r in regs.values() for v in r.values())


def test_a_run_of_later_seeds_is_the_same_rounds_as_one_long_run() -> None:
    p = js.Params.paper()
    long_run = js.plan(dataclasses.replace(p, seeds=3))
    tail = js.plan(dataclasses.replace(p, seeds=2, first_seed=1))
    assert [ph.name for ph in tail.phases] == [js.phase_name(s, seed) for seed in (1, 2)
                                               for s in js.SCHEMES]
    by_name = {ph.name: ph for ph in long_run.phases}
    for ph in tail.phases:
        _assert_same_jobs(ph, by_name[ph.name])
    with pytest.raises(ValueError, match="first_seed -1"):
        dataclasses.replace(p, first_seed=-1)


def test_a_seed_run_alone_gives_what_it_gives_inside_a_longer_run(tmp_path: Path) -> None:
    """Each phase restarts the switches' random streams from the run's seed
    and its own name, so seed 1 run by itself (first_seed 1) gives the JCTs
    it gives as the second seed of a run: the seeds of a paper profile can
    run as separate runs."""
    from testbed.runner import RunOptions, run

    def go(out: str, **over: str) -> dict:
        return run(js.NAME, RunOptions(quick=True, out=tmp_path / out, engine="sim",
                                       echo=lambda _s: None, interpreter="cpython",
                                       overrides={"passes": "1,2", **over}))

    both = go("both", seeds="2")
    alone = go("alone", seeds="1", first_seed="1")
    assert alone["jobs"] and [j for j in both["jobs"] if j["seed"] == 1] == alone["jobs"]
    assert all(j["ce_marked_baseline"] > 0 for j in alone["jobs"])   # RED drew its coins
