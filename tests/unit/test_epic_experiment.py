"""epic-allreduce as data: its plan, the EPIC job specs, the controller's group
installation from the ranks' reports, and the ideal-throughput model."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from experiments import epic_allreduce as ex
from hosts.agent_spec import CollectiveSpec, JobSpec, SpecError
from testbed.epic import communicator_nodes, install_from_rendezvous
from testbed.experiment import ExperimentError, PhasePlan, RunPlan


def test_plan_has_a_warmup_and_three_schemes() -> None:
    p = ex.Params.quick()
    plan = ex.plan(p)
    assert [ph.name for ph in plan.phases] == ["warmup", "epic", "ring", "ring256"]
    warm, epic, ring, ring256 = plan.phases
    assert warm.warmup and not any(ph.warmup for ph in plan.phases[1:])
    assert warm.epic_group and epic.epic_group
    assert warm.epic_group["gid"] != epic.epic_group["gid"]
    assert ring.epic_group is None and ring256.epic_group is None
    mtus = {ph.name: next(iter(ph.jobs.values())).transport.path_mtu for ph in plan.phases}
    assert mtus == {"warmup": 256, "epic": 256, "ring": 1024, "ring256": 256}
    spec = epic.jobs["h1"].collective
    assert spec is not None and spec.scheme == "epic"
    assert [4 * c for c in spec.schedule()] == [s for s in p.sizes() for _ in range(p.iterations)]
    assert plan.topology.program == ex.PROGRAM and plan.topology.n_hosts == p.ranks
    assert p.slowdown == pytest.approx(100e9 / 0.5e6)


def test_sizes_are_powers_of_four_up_to_the_maximum() -> None:
    assert ex.Params(min_kib=4, max_kib=1024).sizes() == [4096, 16384, 65536, 262144, 1048576]
    assert ex.Params(min_kib=4, max_kib=100).sizes() == [4096, 16384, 65536, 102400]
    with pytest.raises(ValueError):
        ex.Params(min_kib=8, max_kib=4)


def test_ideal_model() -> None:
    # same 256 B packets: the ratio is exactly the byte ratio 2(N-1)/N
    assert ex.ideal_algbw_fraction("epic", 8) / ex.ideal_algbw_fraction("ring256", 8) == \
        pytest.approx(1.75)
    assert ex.ideal_algbw_fraction("epic", 8) == pytest.approx(256 / 314)
    assert ex.ideal_algbw_fraction("ring", 8) == pytest.approx(1024 / 1082 * 8 / 14)


def test_epic_jobs_need_int32_and_an_endpoint() -> None:
    with pytest.raises(SpecError, match="int32"):
        CollectiveSpec(rank=0, size=2, scheme="epic", dtype="int64", epic=ex.ENDPOINT)
    with pytest.raises(SpecError, match="switch_ip"):
        CollectiveSpec(rank=0, size=2, scheme="epic", dtype="int32", epic={"qpn": 1})
    spec = JobSpec(host="h1", ip="10.0.1.1", collective=CollectiveSpec(
        rank=0, size=2, scheme="epic", dtype="int32", counts=(64, 128), epic=ex.ENDPOINT))
    again = JobSpec.from_json(spec.to_json())
    assert again == spec and again.collective is not None
    assert again.collective.schedule() == [64, 128]


def test_two_epic_phases_need_distinct_groups() -> None:
    plan = ex.plan(ex.Params.quick())
    epic = plan.phases[1]
    clash = PhasePlan("again", epic.jobs, epic_group=dict(epic.epic_group or {}))
    with pytest.raises(ExperimentError, match="distinct"):
        RunPlan(topology=plan.topology, phases=(epic, clash))


def test_group_is_installed_once_every_rank_reported(tmp_path: Path) -> None:
    jobs = ex.plan(ex.Params(ranks=3)).phases[1].jobs
    d = tmp_path / "epic"
    d.mkdir()
    assert install_from_rendezvous(ex.ENDPOINT, jobs, d) is None
    for r in range(3):
        (d / f"rank{r}.json").write_text(json.dumps(
            {"rank": r, "ip": f"10.0.{r + 1}.1", "qpn": 0x20 + r,
             "qpns": [0x20 + r + 0x10 * i for i in range(7)]}))
    lines = install_from_rendezvous(ex.ENDPOINT, jobs, d, node_base=8)
    assert lines is not None
    assert lines[0].startswith("register_reset MyIngress.slot_psn")
    assert "register_reset MyIngress.acks.acked" in lines
    # 2N+1 = 7 groups: AllReduce; Reduce to 0, 1, 2; Broadcast from 0, 1, 2
    sets = [ln.split("=> ")[1] for ln in lines if "MyIngress.set_group" in ln]
    assert sets == ["0 3 0 0 1 0", "1 3 1 0 3 4", "2 3 1 1 5 6", "3 3 1 2 7 8",
                    "4 3 2 0 9 10", "5 3 2 1 11 12", "6 3 2 2 13 14"]
    for r in range(3):
        for i in range(7):   # rank r's QPN of group i, in group i's address table
            assert any(ln.startswith(f"table_add MyEgress.epic_rank_addr "
                                     f"MyEgress.set_rank_addr {(i << 5) | r} ")
                       and ln.endswith(f"10.0.{r + 1}.1 {0x20 + r + 0x10 * i:#x}")
                       for ln in lines)
        assert f"mc_node_associate 1 {8 + r}" in lines
    # Reduce to rank 1: results to rank 1 alone, its ACKs to all three
    assert f"mc_node_create {(2 << 5) | 1} 2" in lines
    assert [ln for ln in lines if ln.startswith("mc_node_associate 5 ")] == [
        "mc_node_associate 5 15"]   # after 3 + 4 nodes from 8
    assert len([ln for ln in lines if ln.startswith("mc_node_associate 6 ")]) == 3
    assert sum(ln.startswith("mc_node_create") for ln in lines) == communicator_nodes(3)
    (d / "rank1.json").write_text(json.dumps({"rank": 1, "ip": "10.9.9.9", "qpn": 5}))
    with pytest.raises(ValueError, match="rank 1"):
        install_from_rendezvous(ex.ENDPOINT, jobs, d)


def test_epic_tree_plan_is_the_papers_tree_3_2() -> None:
    from experiments import epic_tree as tr

    p = tr.Params.quick()
    plan = tr.plan(p)
    assert [ph.name for ph in plan.phases] == ["warmup", "epic", "epic_float", "ring", "ring256"]
    fab = plan.topology.fabric
    assert fab is not None and (fab.leaves, fab.spines, fab.hosts_per_leaf) == (2, 1, 2)
    epic = plan.phases[1]
    assert epic.epic_group is not None
    assert epic.epic_group["tree"] == {
        "spine1": {"ip": "10.255.0.1", "parent": None},
        "leaf1": {"ip": "10.255.0.11", "parent": "spine1"},
        "leaf2": {"ip": "10.255.0.12", "parent": "spine1"}}
    # each rank addresses its own leaf's endpoint
    ips = [epic.jobs[f"h{r + 1}"].collective.epic["switch_ip"] for r in range(4)]  # type: ignore[union-attr]
    assert ips == ["10.255.0.11", "10.255.0.11", "10.255.0.12", "10.255.0.12"]
    assert plan.phases[2].jobs["h1"].collective.dtype == "float32"  # type: ignore[union-attr]
    assert plan.phases[3].epic_group is None
    with pytest.raises(ValueError, match="ranks"):
        tr.Params(leaves=8, hosts_per_leaf=2)


def test_a_tree_phase_runs_only_what_spans_switches() -> None:
    from experiments import epic_tree as tr

    plan = tr.plan(tr.Params.quick())
    epic = plan.phases[1]
    bad = {h: JobSpec(host=h, ip=s.ip, transport=s.transport, collective=CollectiveSpec(
        rank=s.collective.rank, size=4, dtype="int32", op="reduce", scheme="epic",  # type: ignore[union-attr]
        epic=s.collective.epic)) for h, s in epic.jobs.items()}  # type: ignore[union-attr]
    with pytest.raises(ExperimentError, match="only AllReduce and Barrier"):
        RunPlan(topology=plan.topology, phases=(PhasePlan("epic", bad, epic_group=epic.epic_group),))
    with pytest.raises(ExperimentError, match="needs a leaf-spine"):
        RunPlan(topology=ex.plan(ex.Params.quick()).topology,
                phases=(PhasePlan("epic", epic.jobs, epic_group=epic.epic_group),))
