"""A plan's preprocessor defines (Topology.defines) reach the compiled program
on every target and engine, and EPIC's window is one of them: the switch's
slots, the ranks' window and the experiment's parameter agree, bad values
are refused with a message saying why."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import pytest

from experiments import epic_allreduce as ex
from hosts.agent_spec import EPIC_WINDOW, CollectiveSpec, SpecError
from hosts.commlib.epic import MAX_GROUPS, WINDOW
from testbed.epic import EPIC_P4, program_window, window_defines
from testbed.experiment import ExperimentError, RunPlan, Topology

REPO = Path(__file__).resolve().parents[2]
W7 = (("EPIC_WINDOW_LOG2", "7"),)


def quick(**kw: Any) -> ex.Params:
    return dataclasses.replace(ex.Params.quick(), **kw)


def slot_count(module: Any) -> int:
    from switches.soft.runtime.switch import SoftSwitch

    return SoftSwitch(module).registers["MyIngress.slot_psn"].size


# ---------------------------------------------------------------------------
# Topology.defines


def test_topology_defines_are_checked() -> None:
    ok = Topology(n_hosts=2, program=ex.PROGRAM, defines=W7 + (("DEBUG", "1"),))
    assert ok.defines_dict() == {"EPIC_WINDOW_LOG2": "7", "DEBUG": "1"}
    assert ok.program_label() == "epic.p4 -D EPIC_WINDOW_LOG2=7 -D DEBUG=1"
    assert Topology(n_hosts=2, program=ex.PROGRAM).program_label() == "epic.p4"
    bad: list[tuple[Any, str]] = [
        ({"EPIC_WINDOW_LOG2": "7"}, "tuple of"),
        ((("EPIC_WINDOW_LOG2", 7),), "pair of strings"),
        ((("EPIC_WINDOW_LOG2",),), "pair of strings"),
        ((("7UP", "1"),), "not an identifier"),
        ((("A-B", "1"),), "not an identifier"),
        (W7 + (("EPIC_WINDOW_LOG2", "6"),), "given twice"),
        ((("X", ""),), "not a plain"),
        ((("X", "1\n#define Y 2"),), "not a plain"),
        ((("X", "1 // c"),), "not a plain"),
    ]
    for defines, match in bad:
        with pytest.raises(ExperimentError, match=match):
            Topology(n_hosts=2, program=ex.PROGRAM, defines=defines)


def test_the_sim_engine_compiles_the_program_with_the_defines() -> None:
    from testbed.sim.network import compile_plan_program

    default = compile_plan_program(ex.plan(ex.Params.quick()))
    wide = compile_plan_program(ex.plan(quick(window_log2=7)))
    # 2W slots per group, 128 groups
    assert slot_count(default) == 2 * 32 * MAX_GROUPS
    assert slot_count(wide) == 2 * 128 * MAX_GROUPS


def test_the_mininet_engine_hands_the_defines_to_the_switches(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The runner gives star_router (and leaf_spine) the topology's defines."""
    import testbed.net
    from switches.targets import TargetUnavailable
    from testbed.runner import RunError, RunOptions
    from testbed.runner.mininet_engine import _bring_up_and_run
    from testbed.runner.progress import Progress

    seen: dict[str, Any] = {}

    def star_router(*_a: Any, **kw: Any) -> Any:
        seen.update(kw)
        raise TargetUnavailable("stopped here by the test")

    monkeypatch.setattr(testbed.net, "star_router", star_router)
    plan = ex.plan(quick(window_log2=7))
    prog = Progress(lambda _m: None, tmp_path / "progress.log")
    with pytest.raises(RunError, match="stopped here"):
        _bring_up_and_run(plan, tmp_path, RunOptions(), prog)
    assert seen["defines"] == {"EPIC_WINDOW_LOG2": "7"}


class _FakeNet:
    """What star_router and leaf_spine call on a Mininet network, recorded."""

    switches: list[dict[str, Any]] = []

    def __init__(self, **_kw: Any) -> None:
        _FakeNet.switches = []

    def addSwitch(self, name: str, **kw: Any) -> str:   # noqa: N802 (Mininet's name)
        _FakeNet.switches.append(kw | {"name": name})
        return name

    def addHost(self, name: str, **_kw: Any) -> str:     # noqa: N802
        return name

    def addLink(self, *_a: Any, **_kw: Any) -> None:     # noqa: N802
        pass


@pytest.mark.parametrize("target", ["soft", "bmv2"])
def test_star_router_and_leaf_spine_pass_the_defines_to_either_target(
        target: str, monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("mininet.net")
    import mininet.net

    import testbed.net
    from switches.targets import target_of
    from testbed.net import LeafSpine, leaf_spine, star_router

    tgt = target_of(target)
    monkeypatch.setattr(mininet.net, "Mininet", _FakeNet)
    monkeypatch.setattr(type(tgt), "switch_class", lambda _self: object)
    monkeypatch.setattr(testbed.net, "_build", lambda *_a: None)
    star_router(2, EPIC_P4, target=tgt, defines={"EPIC_WINDOW_LOG2": "7"})
    assert [s["defines"] for s in _FakeNet.switches] == [{"EPIC_WINDOW_LOG2": "7"}]
    leaf_spine(LeafSpine(leaves=2, spines=1, hosts_per_leaf=1), EPIC_P4, target=tgt,
               defines={"EPIC_WINDOW_LOG2": "7"})
    assert [s["defines"] for s in _FakeNet.switches] == [{"EPIC_WINDOW_LOG2": "7"}] * 3
    star_router(2, EPIC_P4, target=tgt)
    assert "defines" not in _FakeNet.switches[0]      # none: the program's own


def test_the_soft_switch_daemon_compiles_with_the_defines(tmp_path: Path) -> None:
    """SoftP4Switch turns its defines into the daemon's -D options, and the
    daemon builds the switch from the program compiled with them."""
    pytest.importorskip("mininet.node")
    from switches.soft.daemon import build_arg_parser, load_switch
    from switches.soft.node import SoftP4Switch

    sw = SoftP4Switch.__new__(SoftP4Switch)   # its command line, without a Mininet node
    sw.name, sw.program = "s1", str(EPIC_P4)
    sw.requested_control_port, sw.ready_path = None, str(tmp_path / "s1.ready")
    sw.priority_queues, sw.log_level, sw.log_dir = 1, "info", str(tmp_path)
    sw.include_dirs, sw.defines, sw.pcap, sw.backend = [], {"EPIC_WINDOW_LOG2": "7"}, False, \
        "python"
    sw.requested_grpc_port, sw.cpu_port, sw.daemon_args, sw.cli_commands = None, None, [], []
    sw.port_interfaces = lambda: []             # type: ignore[method-assign]
    cmd = sw.daemon_command()
    assert cmd[cmd.index("-D") + 1] == "EPIC_WINDOW_LOG2=7"
    args = build_arg_parser().parse_args(cmd[cmd.index("--program"):])
    assert load_switch(args).registers["MyIngress.slot_psn"].size == 2 * 128 * MAX_GROUPS


def test_bmv2_compiles_with_the_defines(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """BMv2Switch hands its defines to p4c's compile (p4c's -D: test_bmv2)."""
    pytest.importorskip("mininet.node")
    import switches.bmv2.node as node

    bindir = tmp_path / "bin"
    bindir.mkdir()
    (bindir / "simple_switch_grpc").write_text("#!/bin/sh\n")
    (bindir / "simple_switch_grpc").chmod(0o755)
    monkeypatch.setenv("PATH", str(bindir))
    seen: list[Any] = []

    class Compiled(Exception):
        pass

    def compile_bmv2(program: str, build_dir: str, include_dirs: Any, defines: Any) -> Any:
        seen.append(defines)
        raise Compiled

    monkeypatch.setattr(node, "compile_bmv2", compile_bmv2)
    with pytest.raises(Compiled):
        node.BMv2Switch("s1", program=str(EPIC_P4), defines={"EPIC_WINDOW_LOG2": "7"},
                        build_dir=tmp_path / "build")
    assert seen == [{"EPIC_WINDOW_LOG2": "7"}]


# ---------------------------------------------------------------------------
# the EPIC window: switch, ranks and plan agree


def test_program_window_reads_the_define_or_the_programs_default() -> None:
    assert program_window(EPIC_P4) == WINDOW == EPIC_WINDOW
    assert program_window(EPIC_P4, {"EPIC_WINDOW_LOG2": "7"}) == 128
    assert program_window(REPO / "switches" / "p4" / "l3_router.p4") is None
    with pytest.raises(ValueError, match="plain integer"):
        program_window(EPIC_P4, {"EPIC_WINDOW_LOG2": "3+4"})
    assert window_defines(7) == W7
    for bad in (0, -1, 24, True):
        with pytest.raises(ValueError):
            window_defines(bad)


def test_a_plan_whose_ranks_and_switch_disagree_on_the_window_is_refused() -> None:
    plan = ex.plan(quick(window_log2=7))
    spec = plan.phases[1].jobs["h1"].collective
    assert spec is not None and spec.epic_window == 128
    assert all(s.collective is not None and s.collective.epic_window == 128
               for ph in plan.phases if ph.epic_group for s in ph.jobs.values())
    # the ring phases keep the default (no EPIC switch on their path)
    assert all(s.collective is not None and s.collective.epic_window == EPIC_WINDOW
               for ph in plan.phases if not ph.epic_group for s in ph.jobs.values())
    for defines in ((), (("EPIC_WINDOW_LOG2", "6"),)):
        topo = dataclasses.replace(plan.topology, defines=defines)
        with pytest.raises(ExperimentError, match=r"window \[128\] differs from the switch's"):
            RunPlan(topology=topo, phases=plan.phases)
    with pytest.raises(ExperimentError, match="plain integer"):
        RunPlan(topology=dataclasses.replace(plan.topology,
                                             defines=(("EPIC_WINDOW_LOG2", "3+4"),)),
                phases=plan.phases)


def test_bad_windows_are_refused_with_the_reason() -> None:
    ep = dict(ex.ENDPOINT)
    for bad in (0, 1, 48, 1 << 24, True):
        with pytest.raises(SpecError, match="epic_window .* power of two"):
            CollectiveSpec(rank=0, size=2, scheme="epic", dtype="int32", epic=ep,
                           epic_window=bad)
    with pytest.raises(SpecError, match="needs scheme 'epic'"):
        CollectiveSpec(rank=0, size=2, dtype="int32", epic_window=128)
    for log2 in (0, ex.MAX_WINDOW_LOG2 + 1):
        with pytest.raises(ValueError, match="window_log2 must be 1..10"):
            ex.Params(window_log2=log2)


def test_the_paper_profile_sizes_the_window_to_the_path() -> None:
    # 2 x 0.6 us + 2 x 25.1 ns + 2 x 5.0 ns = 1.260 us at 100 Gb/s: 50.2 frames,
    # twice that (refilled in halves) rounded up: 128
    assert ex.bdp_window_log2(100.0, 0.6) == 7
    assert ex.Params.paper().window == 128
    assert ex.plan(ex.Params.paper()).topology.defines == W7
    # without the NIC's latency a round trip is 60 ns: 2.4 frames, a window of 8
    assert ex.bdp_window_log2(100.0, 0.0) == 3
    # the quick and full profiles keep the program's own window
    for p in (ex.Params(), ex.Params.quick()):
        assert p.window == WINDOW
        assert ex.plan(p).topology.defines == (("EPIC_WINDOW_LOG2", "5"),)


def test_epic_allreduce_is_bit_exact_with_a_wider_window(tmp_path: Path) -> None:
    from testbed.runner import RunOptions, run

    s = run("epic-allreduce", RunOptions(
        quick=True, out=tmp_path / "e", engine="sim", echo=lambda _s: None,
        interpreter="cpython",
        overrides={"window_log2": "7", "max_kib": "16", "warmup_kib": "16"}))
    assert s["bit_exact"] is True and s["fidelity_ok"]
    assert s["params"]["window_log2"] == 7
    import json

    saved = json.loads((tmp_path / "e" / "plan.json").read_text())
    assert saved["topology"]["defines"] == [["EPIC_WINDOW_LOG2", "7"]]
