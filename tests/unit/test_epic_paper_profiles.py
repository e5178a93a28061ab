"""The paper profiles of epic-tree, epic-loss and epic-primitives: each builds
a valid plan at the paper's rates, with epic-allreduce's host latencies and
the window sized to the path on the switches (every switch of the tree) and
on every EPIC rank; what each cuts is declared and recorded; the quick and
full profiles keep the program's own window. One short run checks that the
three switches of the tree honour a wider window."""

from __future__ import annotations

import dataclasses
import json
import types
from pathlib import Path

import pytest

from experiments import epic_allreduce, epic_loss, epic_primitives, epic_tree
from hosts.agent_spec import EPIC_WINDOW, CollectiveSpec
from hosts.commlib.epic import MAX_GROUPS, WINDOW
from testbed.experiment import (
    RunPlan,
    has_profile,
    make_params,
    plan_to_dict,
    scale_record,
    scaled_down_from,
)

MODULES = (epic_tree, epic_loss, epic_primitives)
W7 = (("EPIC_WINDOW_LOG2", "7"),)
W5 = (("EPIC_WINDOW_LOG2", "5"),)


def _collectives(plan: RunPlan, *, epic: bool) -> list[tuple[str, str, CollectiveSpec]]:
    """(phase, host, CollectiveSpec) of the plan's EPIC (or host ring) ranks."""
    return [(ph.name, h, s.collective) for ph in plan.phases for h, s in ph.jobs.items()
            if s.collective is not None and (s.collective.scheme == "epic") == epic]


@pytest.mark.parametrize("mod", MODULES, ids=lambda m: m.NAME)
def test_the_paper_profile_builds_a_plan_at_the_papers_rates(mod: types.ModuleType) -> None:
    assert has_profile(mod, "paper")
    p = make_params(mod, profile="paper")
    assert p == mod.Params.paper()
    assert (p.link_mbps, p.nic_gbps, p.slowdown) == (100_000.0, 100.0, 1.0)
    assert p.nic_latency_us == epic_allreduce.HOST_LATENCY["nic_latency_us"] == 0.6
    assert p.step_overhead_us == epic_allreduce.HOST_LATENCY["step_overhead_us"] == 14.0
    plan = mod.plan(p)                  # RunPlan's checks ran: the plan is valid
    json.dumps(plan_to_dict(plan))      # and plain data
    assert plan.topology.commands[0] == "set_port_rate_bps 100000000000"
    for ph in plan.phases:
        for s in ph.jobs.values():
            assert s.transport.scale["slowdown"] == 1.0
            assert s.transport.scale["nic_latency_us"] == 0.6
            assert s.collective is not None and s.collective.step_overhead_us == 14.0


@pytest.mark.parametrize("mod", MODULES, ids=lambda m: m.NAME)
def test_the_window_is_the_paths_on_the_switches_and_every_epic_rank(
        mod: types.ModuleType) -> None:
    plan = mod.plan(mod.Params.paper())
    assert mod.Params.paper().window_log2 == 7 and plan.topology.defines == W7
    assert plan.info["epic_window_pkts"] == 128
    epic = _collectives(plan, epic=True)
    assert epic and {c.epic_window for _, _, c in epic} == {128}
    # the warm-up's ranks too, wherever there is one
    assert {ph for ph, _, _ in epic} >= {"warmup"}
    # the host rings keep the default: no EPIC switch on their path
    assert all(c.epic_window == EPIC_WINDOW for _, _, c in _collectives(plan, epic=False))
    # a switch compiled with another window is refused
    with pytest.raises(ValueError, match=r"window \[128\] differs from the switch's 32"):
        RunPlan(topology=dataclasses.replace(plan.topology, defines=W5), phases=plan.phases)


@pytest.mark.parametrize("mod", MODULES, ids=lambda m: m.NAME)
def test_the_quick_and_full_profiles_keep_the_programs_window(mod: types.ModuleType) -> None:
    for p in (mod.Params(), mod.Params.quick()):
        assert p.window == WINDOW and (p.nic_latency_us, p.step_overhead_us) == (0.0, 0.0)
        plan = mod.plan(p)
        assert plan.topology.defines == W5
        assert all(c.epic_window == WINDOW for _, _, c in _collectives(plan, epic=True))
        assert all("nic_latency_us" not in s.transport.scale
                   for ph in plan.phases for s in ph.jobs.values())


def test_epic_tree_paper_profile() -> None:
    p = epic_tree.Params.paper()
    # Tree-3-2: a root and two leaves, two ranks each
    assert (p.leaves, p.hosts_per_leaf, p.ranks) == (2, 2, 4)
    # sizes from Fig. 13's 4 KB, phantom integer phases, the float phase real
    assert p.min_kib == 4 and p.payload == "phantom" and p.iterations == 1
    plan = epic_tree.plan(p)
    assert plan.topology.fabric is not None
    payloads: dict[str, set[str]] = {}
    for ph, _, c in _collectives(plan, epic=True) + _collectives(plan, epic=False):
        payloads.setdefault(ph, set()).add(c.payload)
    assert payloads == {"warmup": {"phantom"}, "epic": {"phantom"}, "epic_float": {"real"},
                        "ring": {"phantom"}, "ring256": {"phantom"}}
    # the window of the tree's path (H = 3): 2 x 0.6 us + 4 data frames + 2 ACKs
    assert epic_allreduce.bdp_window_log2(100.0, 0.6, depth=3) == 7
    assert epic_allreduce.bdp_window_log2(100.0, 0.0, depth=3) == 4     # 120 ns: 4.8 frames
    with pytest.raises(ValueError, match="depth >= 2"):
        epic_allreduce.bdp_window_log2(100.0, 0.6, depth=1)
    # the sweep of Fig. 13 up to 1 GB: nothing cut
    assert p.max_kib == 1 << 20 and scaled_down_from(epic_tree) == {}
    assert scale_record(epic_tree, "paper", p) == {}


def test_epic_tree_switches_all_get_the_window() -> None:
    """The sim engine builds the tree's three switches from the program
    compiled with the plan's defines: 2W slots per group on each."""
    from switches.soft.runtime.switch import SoftSwitch
    from testbed.sim.loop import EventLoop
    from testbed.sim.network import SimNetwork, compile_plan_program

    plan = epic_tree.plan(epic_tree.Params.paper())
    module = compile_plan_program(plan)
    assert SoftSwitch(module).registers["MyIngress.slot_psn"].size == 2 * 128 * MAX_GROUPS
    net = SimNetwork.build(plan, EventLoop(), 100e9, 1, module)
    assert sorted(net.switches) == ["leaf1", "leaf2", "spine1"]
    assert {sw.sw.registers["MyIngress.slot_psn"].size for sw in net.switches.values()} == {
        2 * 128 * MAX_GROUPS}


def test_epic_loss_paper_profile() -> None:
    p = epic_loss.Params.paper()
    assert p.ranks == 8 and p.payload == "real"
    assert 0.01 in p.loss_list() and 0.0 in p.loss_list()
    plan = epic_loss.plan(p)
    # the paper's 100 us timeout at slowdown 1 (no timer floor on the sim engine)
    assert plan.info["rto_s"] == pytest.approx(100e-6)
    assert plan.phases[-1].commands == epic_loss.loss_commands(0.01)
    # the model's size is not given: nothing is cut
    assert scaled_down_from(epic_loss) == {}
    # the emulation's timeout is unchanged: 100 us x slowdown
    assert epic_loss.plan(epic_loss.Params()).info["rto_s"] == pytest.approx(20.0)


def test_epic_primitives_paper_profile() -> None:
    p = epic_primitives.Params.paper()
    assert p.ranks == 8 and p.iterations == 1
    plan = epic_primitives.plan(p)
    ops = {op for _, _, c in _collectives(plan, epic=True) for op in c.ops}
    assert ops >= {"reduce", "broadcast", "reduce_scatter", "all_gather", "barrier"}
    # EPIC's Reduce and Broadcast have no phantom form: real payloads throughout
    assert {c.payload for _, _, c in _collectives(plan, epic=True)} == {"real"}
    cuts = scaled_down_from(epic_primitives)
    assert list(cuts) == ["size_kib"] and cuts["size_kib"].paper == 1 << 20
    assert p.size_kib < 1 << 20
    rec = scale_record(epic_primitives, "paper", p)
    assert rec is not None and rec["size_kib"]["run"] == p.size_kib


def test_params_are_checked() -> None:
    for mod in MODULES:
        with pytest.raises(ValueError, match="window_log2 must be 1..10"):
            mod.Params(window_log2=11)
        with pytest.raises(ValueError, match="nic_latency_us and step_overhead_us"):
            mod.Params(step_overhead_us=-1.0)
    for mod in (epic_tree, epic_loss):
        with pytest.raises(ValueError, match="payload must be real or phantom"):
            mod.Params(payload="ghost")


def test_the_tree_switches_honour_a_wider_window(tmp_path: Path) -> None:
    """epic-tree on the sim engine with W = 128 on all three switches: 256
    packets per rank, 128 in flight, every result exact and nothing resent
    (a switch with fewer slots would drop what runs ahead of them)."""
    from testbed.runner import RunOptions, run

    s = run("epic-tree", RunOptions(
        quick=True, out=tmp_path / "t", engine="sim", echo=lambda _s: None,
        interpreter="cpython",
        overrides={"window_log2": "7", "min_kib": "64", "max_kib": "64", "warmup_kib": "16",
                   "float_kib": "64", "barriers": "1"}))
    assert s["bit_exact"] is True and s["float_within_bound"] is True and s["fidelity_ok"]
    assert s["schemes"]["epic"]["retransmissions"] == 0
    saved = json.loads((tmp_path / "t" / "plan.json").read_text())
    assert saved["topology"]["defines"] == [["EPIC_WINDOW_LOG2", "7"]]
