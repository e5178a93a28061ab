"""The switch targets: what runs the P4 program, what the switch offers beyond
simple_switch_CLI's verbs, and how its Mininet node and controllers are made.

    target = target_of("bmv2")          # BMV2; ValueError naming the known targets
    cls = target.switch_class()         # BMv2Switch, or TargetUnavailable saying why
    net.addSwitch("s1", cls=cls, program="switches/p4/l3_router.p4")
    ctl = BMV2.cli_controller(9090)     # simple_switch_CLI --thrift-port 9090

Code that differs by target asks the target (``target.has_verb("set_pfc")``,
``target.reports_stats``, ...) instead of comparing names. The command line
takes the names (``--target soft|bmv2``); :data:`TARGETS` maps them to targets.

The soft target is always there; BMv2 needs simple_switch_grpc,
simple_switch_CLI and a P4 compiler for it (p4c, or p4c-bm2-ss) on PATH.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from switches.bmv2.control import ThriftCli
from switches.controller.api import Controller, ControllerError
from switches.controller.cli import CliController
from switches.controller.p4runtime import P4RuntimeController
from switches.soft.control.client import SwitchClient

if TYPE_CHECKING:
    from switches.node import P4SwitchNode

BMV2_TOOLS = ("simple_switch_grpc", "simple_switch_CLI", "p4c")
BMV2_HINT = ("BMv2 runs in the Vagrant VM (vagrant up), or install p4lang's packages "
             "p4lang-bmv2 and p4lang-p4c")


class TargetUnavailable(RuntimeError):
    """The requested target cannot run on this machine."""


@dataclass
class Availability:
    """Whether a target or provider can run here, and why not."""

    name: str
    available: bool
    reason: str = ""  # what is missing, when not available
    versions: dict[str, str] = field(default_factory=dict)  # tool -> version or path


def tool_version(exe: str, timeout: float = 5.0) -> str:
    """The first line of ``exe --version`` mentioning a version, else its path."""
    path = shutil.which(exe)
    if path is None:
        return ""
    try:
        p = subprocess.run([path, "--version"], capture_output=True, text=True,
                           timeout=timeout, stdin=subprocess.DEVNULL)
        for line in (p.stdout + p.stderr).splitlines():
            if re.search(r"\d+\.\d+", line):
                return line.strip()
    except (OSError, subprocess.SubprocessError):
        pass
    return path


@dataclass(frozen=True)
class Target(ABC):
    """One switch target. The flags say what differs between targets."""

    name: str
    runs: str  # what runs the program, as `testbed doctor` shows it
    # Verbs the switch's CLI takes beyond simple_switch_CLI's that the
    # controller and the runner send (set_port_rate_bps, set_priority_weights,
    # set_pfc, set_port_delay_us); other targets get a substitute or a refusal.
    extensions: frozenset[str]
    # The switch reports its daemon's statistics (switch_stats, switch_sample,
    # switch_lag_max_reset): the runner samples them and fidelity judges the
    # switch's processing lag, kernel drops and arrival order.
    reports_stats: bool
    # The runner raises the daemon's priority: a switch whose processing lag is
    # judged must not be starved by the hosts' agents.
    prioritised: bool
    # Its data path's interpreter can be chosen (switches.soft.backends).
    backends: bool
    # The virtual-time engine (testbed.sim) can run its pipeline.
    virtual_time: bool

    def has_verb(self, verb: str) -> bool:
        """Whether the switch's CLI takes ``verb``, one of its extensions."""
        return verb in self.extensions

    @abstractmethod
    def availability(self) -> Availability:
        """Whether the target can run on this machine (with the tools' versions)."""

    @abstractmethod
    def node_class(self) -> type[P4SwitchNode]:
        """The Mininet switch class (imports Mininet)."""

    def switch_class(self) -> type[P4SwitchNode]:
        """The Mininet switch class; raises TargetUnavailable (with what is
        missing) when the target cannot run here."""
        avail = self.availability()
        if not avail.available:
            raise TargetUnavailable(f"target {self.name}: {avail.reason}")
        return self.node_class()

    @abstractmethod
    def cli_controller(self, port: int | None = None, *, host: str = "127.0.0.1",
                       execute: Callable[[str], str] | None = None) -> CliController:
        """The controller API over the switch's simple_switch_CLI verbs at
        ``port``, or over ``execute(line) -> str`` (an in-process control plane)."""

    def p4runtime_controller(self, grpc_port: int, p4info: Any, device_id: int = 0,
                             cli_port: int | None = None, *, election_id: int = 1,
                             timeout: float = 10.0,
                             host: str = "127.0.0.1") -> P4RuntimeController:
        """A P4Runtime client of the switch (``p4info``: a P4Info message, a path
        or None to read it from the switch), with its CLI at ``cli_port``
        attached when given (queue settings, registers BMv2 has no P4Runtime for)."""
        cli = self.cli_controller(cli_port, host=host) if cli_port is not None else None
        try:
            return P4RuntimeController(f"{host}:{grpc_port}", p4info, device_id=device_id,
                                       election_id=election_id, cli=cli, timeout=timeout)
        except BaseException:
            if cli is not None:
                cli.close()
            raise

    def controller(self, cli_port: int | None, grpc_port: int | None = None, *,
                   device_id: int = 0, p4info: Any = None,
                   host: str = "127.0.0.1") -> Controller:
        """The switch's controller API: P4Runtime (primary, election id 1) when
        it serves ``grpc_port``, with the CLI attached; else the CLI alone."""
        if grpc_port is not None:
            return self.p4runtime_controller(grpc_port, p4info, device_id, cli_port, host=host)
        if cli_port is None:
            raise ControllerError(f"a {self.name} switch with neither a CLI nor a "
                                  "P4Runtime port has no controller")
        return self.cli_controller(cli_port, host=host)


@dataclass(frozen=True)
class SoftTarget(Target):
    """The project's soft switch (``python -m switches.soft.daemon``)."""

    def availability(self) -> Availability:
        return Availability(self.name, True, versions={self.name: self.runs})

    def node_class(self) -> type[P4SwitchNode]:
        # Here, not at the top: Mininet is optional (the virtual-time engine,
        # under PyPy, uses this module without it).
        from switches.soft.node import SoftP4Switch

        return SoftP4Switch

    def cli_controller(self, port: int | None = None, *, host: str = "127.0.0.1",
                       execute: Callable[[str], str] | None = None) -> CliController:
        if execute is not None:
            return CliController(execute, extensions=self.extensions)
        if port is None:
            raise ControllerError("the soft switch's CLI needs its control port")
        client = SwitchClient(port, host)
        return CliController(client.execute, extensions=self.extensions, on_close=client.close)


@dataclass(frozen=True)
class Bmv2Target(Target):
    """BMv2's simple_switch_grpc, programmed with p4c's bmv2 JSON over P4Runtime."""

    def availability(self) -> Availability:
        found = {t: shutil.which(t) for t in BMV2_TOOLS}
        if found["p4c"] is None and shutil.which("p4c-bm2-ss") is not None:
            found["p4c"] = shutil.which("p4c-bm2-ss")
        missing = [t for t, p in found.items() if p is None]
        if missing:
            return Availability(self.name, False,
                                f"{', '.join(missing)} not on PATH: {BMV2_HINT}")
        versions = {t: (tool_version(t) if t != "simple_switch_CLI" else str(p))
                    for t, p in found.items() if p is not None}
        if not shutil.which("p4c"):
            versions["p4c"] = tool_version("p4c-bm2-ss")
        return Availability(self.name, True, versions=versions)

    def node_class(self) -> type[P4SwitchNode]:
        # Here, not at the top: Mininet is optional (see SoftTarget.node_class).
        from switches.bmv2.node import BMv2Switch

        return BMv2Switch

    def cli_controller(self, port: int | None = None, *, host: str = "127.0.0.1",
                       execute: Callable[[str], str] | None = None) -> CliController:
        if execute is not None:
            return CliController(execute, extensions=self.extensions)
        if port is None:
            raise ControllerError("BMv2's CLI needs its thrift port")
        return CliController(ThriftCli(port, host).execute, extensions=self.extensions)


SOFT = SoftTarget(
    "soft", "built in",
    extensions=frozenset({"set_port_rate_bps", "set_priority_weights", "set_pfc",
                          "set_port_delay_us"}),
    reports_stats=True, prioritised=True, backends=True, virtual_time=True)
BMV2 = Bmv2Target(
    "bmv2", "simple_switch_grpc + p4c", extensions=frozenset(),
    reports_stats=False, prioritised=False, backends=False, virtual_time=False)

TARGETS: dict[str, Target] = {t.name: t for t in (SOFT, BMV2)}


def target_of(name: str) -> Target:
    """The target called ``name``; ValueError naming the known ones otherwise."""
    try:
        return TARGETS[name]
    except KeyError:
        raise ValueError(f"unknown target {name!r} (known: {', '.join(TARGETS)})") from None


def available_targets() -> dict[str, Availability]:
    """Every switch target, available or not (with the reason)."""
    return {name: t.availability() for name, t in TARGETS.items()}


__all__ = ["BMV2", "SOFT", "TARGETS", "Availability", "Bmv2Target", "SoftTarget", "Target",
           "TargetUnavailable", "available_targets", "target_of", "tool_version"]
