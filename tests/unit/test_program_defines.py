"""A plan's preprocessor defines (Topology.defines) reach the compiled program
on every target and engine, and EPIC's window is one of them: the switch's
slots, the ranks' window and the plan agree, bad values are refused with a
message saying why."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from experiments import epic_allreduce as ex
from hosts.agent_spec import EPIC_WINDOW, CollectiveSpec, SpecError
from hosts.commlib.epic import MAX_GROUPS, WINDOW
from testbed.epic import EPIC_P4, program_window, window_defines
from testbed.experiment import ExperimentError, Topology

REPO = Path(__file__).resolve().parents[2]
W7 = (("EPIC_WINDOW_LOG2", "7"),)


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
    import testbed.targets
    from testbed.net import LeafSpine, leaf_spine, star_router

    monkeypatch.setattr(mininet.net, "Mininet", _FakeNet)
    monkeypatch.setattr(testbed.targets, "switch_class", lambda _t: object)
    monkeypatch.setattr(testbed.net, "_build", lambda *_a: None)
    star_router(2, EPIC_P4, target=target, defines={"EPIC_WINDOW_LOG2": "7"})
    assert [s["defines"] for s in _FakeNet.switches] == [{"EPIC_WINDOW_LOG2": "7"}]
    leaf_spine(LeafSpine(leaves=2, spines=1, hosts_per_leaf=1), EPIC_P4, target=target,
               defines={"EPIC_WINDOW_LOG2": "7"})
    assert [s["defines"] for s in _FakeNet.switches] == [{"EPIC_WINDOW_LOG2": "7"}] * 3
    star_router(2, EPIC_P4, target=target)
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


def test_bad_windows_are_refused_with_the_reason() -> None:
    ep = dict(ex.ENDPOINT)
    for bad in (0, 1, 48, 1 << 24, True):
        with pytest.raises(SpecError, match="epic_window .* power of two"):
            CollectiveSpec(rank=0, size=2, scheme="epic", dtype="int32", epic=ep,
                           epic_window=bad)
    with pytest.raises(SpecError, match="needs scheme 'epic'"):
        CollectiveSpec(rank=0, size=2, dtype="int32", epic_window=128)
