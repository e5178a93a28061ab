"""switches.targets: the targets by name, what each one offers, and the
controllers and node classes it makes."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from click.testing import CliRunner

from switches.controller.api import ControllerError
from switches.controller.cli import CliController
from switches.soft.control.server import ControlServer
from switches.soft.control.verbs import ControlPlane
from switches.targets import (
    BMV2,
    SOFT,
    TARGETS,
    Bmv2Target,
    SoftTarget,
    Target,
    TargetUnavailable,
    target_of,
)


def test_target_of_gives_the_target_of_each_name() -> None:
    assert target_of("soft") is SOFT and isinstance(SOFT, SoftTarget)
    assert target_of("bmv2") is BMV2 and isinstance(BMV2, Bmv2Target)
    assert list(TARGETS) == ["soft", "bmv2"]
    assert all(target_of(name).name == name for name in TARGETS)


@pytest.mark.parametrize("name", ["tofino", "", "SOFT", " soft"])
def test_an_unknown_name_is_a_value_error_listing_the_known_targets(name: str) -> None:
    with pytest.raises(ValueError, match=f"unknown target {name!r} \\(known: soft, bmv2\\)"):
        target_of(name)


def test_targets_are_frozen() -> None:
    with pytest.raises(AttributeError):
        SOFT.reports_stats = False  # type: ignore[misc]


def test_what_the_soft_target_offers_and_bmv2_lacks() -> None:
    # the soft switch: daemon statistics judged by fidelity, a raised
    # priority, a choice of data path, the virtual-time engine
    assert (SOFT.reports_stats, SOFT.prioritised, SOFT.backends, SOFT.virtual_time) == \
        (True, True, True, True)
    assert (BMV2.reports_stats, BMV2.prioritised, BMV2.backends, BMV2.virtual_time) == \
        (False, False, False, False)
    for verb in ("set_port_rate_bps", "set_priority_weights", "set_pfc", "set_port_delay_us"):
        assert SOFT.has_verb(verb) and not BMV2.has_verb(verb)
    assert not SOFT.has_verb("table_add")     # simple_switch_CLI's own: no extension


def test_the_soft_extensions_are_verbs_of_the_soft_control_plane() -> None:
    plane_verbs = {n[3:] for n in dir(ControlPlane) if n.startswith("do_")}
    assert SOFT.extensions <= plane_verbs


def _recorder() -> tuple[list[str], Callable[[str], str]]:
    sent: list[str] = []

    def execute(line: str) -> str:
        sent.append(line)
        return ""
    return sent, execute


def test_a_cli_controller_sends_only_the_extensions_its_target_has() -> None:
    sent, execute = _recorder()
    soft = SOFT.cli_controller(execute=execute)
    soft.set_port_rate_bps(4_000_000, 2)
    soft.set_priority_weights(3, [10, 90])
    assert sent == ["set_port_rate_bps 4000000 2", "set_priority_weights 3 10 90"]

    sent, execute = _recorder()
    bmv2 = BMV2.cli_controller(execute=execute)
    with pytest.raises(ControllerError, match="set_port_rate_bps is a soft-switch extension"):
        bmv2.set_port_rate_bps(4_000_000)
    with pytest.raises(ControllerError, match="set_priority_weights is a soft-switch extension"):
        bmv2.set_priority_weights(3, [10, 90])
    bmv2.set_queue_rate(462, 2)
    assert sent == ["set_queue_rate 462 2"]


@pytest.mark.parametrize("target", [SOFT, BMV2], ids=["soft", "bmv2"])
def test_a_cli_controller_needs_a_port_or_an_execute(target: Target) -> None:
    with pytest.raises(ControllerError, match="needs its"):
        target.cli_controller()
    with pytest.raises(ControllerError, match="neither a CLI nor a P4Runtime port"):
        target.controller(None)


def test_the_soft_cli_controller_speaks_to_the_control_port_and_closes() -> None:
    sw_lines: list[str] = []

    def execute(line: str) -> str:
        sw_lines.append(line)
        return f"did {line}"

    srv = ControlServer(execute, port=0)
    srv.start()
    try:
        ctl = SOFT.controller(srv.port)       # no gRPC port: the CLI alone
        assert isinstance(ctl, CliController)
        assert ctl.execute("switch_stats") == "did switch_stats"
        ctl.set_port_rate_bps(1000)
        ctl.close()
        assert sw_lines == ["switch_stats", "set_port_rate_bps 1000"]
        # closed: the next command opens a new connection, the old one is gone
        assert ctl.execute("help") == "did help"
        ctl.close()
    finally:
        srv.close()


def test_the_bmv2_cli_controller_runs_simple_switch_cli(tmp_path: Path,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    tool = tmp_path / "simple_switch_CLI"
    tool.write_text("#!/bin/sh\necho \"RuntimeCmd: args $*\"\n")
    tool.chmod(0o755)
    monkeypatch.setenv("PATH", str(tmp_path))
    ctl = BMV2.cli_controller(9091)
    assert ctl.execute("show_tables") == "args --thrift-port 9091 --thrift-ip 127.0.0.1"
    monkeypatch.setenv("PATH", str(tmp_path / "none"))
    with pytest.raises(ControllerError, match="simple_switch_CLI not found"):
        BMV2.cli_controller(9091)


def test_availability_and_switch_class(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    assert SOFT.availability().available
    assert SOFT.availability().versions == {"soft": "built in"}
    monkeypatch.setenv("PATH", str(tmp_path))      # no BMv2 tools
    avail = BMV2.availability()
    assert not avail.available and "simple_switch_grpc" in avail.reason
    with pytest.raises(TargetUnavailable, match="^target bmv2: simple_switch_grpc"):
        BMV2.switch_class()


def test_each_node_class_belongs_to_its_target() -> None:
    pytest.importorskip("mininet.node")
    from switches.node import P4SwitchNode

    for target in TARGETS.values():
        cls = target.node_class()
        assert issubclass(cls, P4SwitchNode) and cls.target is target


def test_the_runner_names_the_known_targets_for_an_unknown_one() -> None:
    from testbed.runner import RunError, RunOptions

    assert RunOptions(target="bmv2").switch_target() is BMV2
    with pytest.raises(RunError, match="unknown target 'tofino' \\(known: soft, bmv2\\)"):
        RunOptions(target="tofino").switch_target()


def test_the_command_line_takes_the_target_names() -> None:
    from testbed.cli import main

    r = CliRunner().invoke(main, ["run", "roce-basics", "--target", "tofino"])
    assert r.exit_code == 2
    assert "'tofino' is not one of 'soft', 'bmv2'" in r.output
