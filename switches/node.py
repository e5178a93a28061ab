"""The Mininet switch node every P4 target's node derives from, and the host
the switches' networks use.

:class:`P4SwitchNode` holds what a switch node does whatever runs its program:
the program with its include directories and defines, the logs, the data
interfaces (offloads and IPv6 off, up in the initial namespace, where
switches live), the daemon process (started by the target's node, stopped
here) and the switch's controller, which the node owns and closes when it
stops. A target's node (:class:`switches.soft.node.SoftP4Switch`,
:class:`switches.bmv2.node.BMv2Switch`) starts and programs its daemon.

:class:`P4Host` is a host whose link carries only whole, checksummed frames:
a userspace switch reading veth frames through packet sockets would
otherwise see 64 KB TSO super-frames and TCP segments with unfinished
checksums, which it can neither forward nor fix.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from abc import ABCMeta, abstractmethod
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, ClassVar

from mininet.log import warn
from mininet.node import Host, Switch

from ground.netlink import set_link_up
from switches.controller.api import Controller
from switches.process import stop_process, tail
from switches.targets import Target

OFFLOADS = ("rx", "tx", "sg", "tso", "gso", "gro")

_warned_no_ethtool = False


def offload_off_command(intf: str) -> str:
    """Shell command turning off the offloads that break userspace forwarding."""
    global _warned_no_ethtool
    if shutil.which("ethtool") is None:
        if not _warned_no_ethtool:
            _warned_no_ethtool = True
            warn("*** ethtool not found: offloads stay on and TCP through soft switches "
                 "will stall (apt-get install ethtool)\n")
        return "true"
    return f"ethtool -K {intf} {' '.join(f'{o} off' for o in OFFLOADS)} >/dev/null 2>&1"


class P4Host(Host):
    """A Mininet host with offloads and IPv6 off on its interfaces."""

    def config(self, **params: Any) -> dict[str, Any]:
        r = super().config(**params)
        for intf in self.intfList():
            self.cmd(offload_off_command(intf.name))
        self.cmd("sysctl -qw net.ipv6.conf.all.disable_ipv6=1 net.ipv6.conf.default.disable_ipv6=1")
        return r


class P4SwitchNode(Switch, metaclass=ABCMeta):
    """A Mininet switch running the P4 program ``program`` on :attr:`target`.

    ``cli_commands`` (simple_switch_CLI lines) are applied before any traffic.
    Logs (and pcaps with ``pcap=True``) go to ``log_dir``, a fresh temporary
    directory by default. ``include_dirs`` and ``defines`` (name -> value,
    ``-D NAME=VALUE``) go to the target's compiler.

    A target's node implements :meth:`_start_daemon` (start the process in
    :attr:`proc`, wait until it is ready, program it) and
    :meth:`_open_controller`, and may extend :meth:`stop_daemon`.
    """

    target: ClassVar[Target]
    log_dir_prefix: ClassVar[str] = "p4switch-"

    def __init__(
        self,
        name: str,
        program: str | os.PathLike[str] | None,
        *,
        log_dir: str | os.PathLike[str] | None,
        pcap: bool,
        priority_queues: int,
        cli_commands: Iterable[str] | None,
        ready_timeout: float,
        include_dirs: Sequence[str],
        defines: Mapping[str, str] | None,
        log_level: str,
        **params: Any,
    ) -> None:
        if program is None:
            raise ValueError(f"{name}: {type(self).__name__} needs program=PATH.p4")
        self.program = os.path.abspath(program)
        self.include_dirs = list(include_dirs)
        self.defines = dict(defines or {})
        # Before Mininet makes the node: what fails here leaves nothing behind.
        self._before_mininet()
        super().__init__(name, **params)
        self.log_dir = os.path.abspath(log_dir) if log_dir else tempfile.mkdtemp(
            prefix=self.log_dir_prefix)
        self.pcap = pcap
        self.priority_queues = priority_queues
        self.cli_commands = list(cli_commands or [])
        self.ready_timeout = ready_timeout
        self.log_level = log_level
        self.log_path = os.path.join(self.log_dir, f"{name}.log")
        self.proc: subprocess.Popen[bytes] | None = None
        self._controller: Controller | None = None

    def _before_mininet(self) -> None:  # noqa: B027 - only some targets prepare anything
        """Work that must succeed before the Mininet node exists (a compile)."""

    # -- Mininet hooks -------------------------------------------------------
    def port_interfaces(self) -> list[tuple[int, str]]:
        """(port number, interface name) of every data interface."""
        return sorted(
            (self.ports[intf], intf.name) for intf in self.intfList() if intf.name != "lo"
        )

    def start(self, controllers: list[Any]) -> None:
        if self.proc is not None and self.proc.poll() is None:
            return
        os.makedirs(self.log_dir, exist_ok=True)
        for _port, ifname in self.port_interfaces():
            self.cmd(offload_off_command(ifname))
            self.cmd(f"sysctl -qw net.ipv6.conf.{ifname.replace('.', '/')}.disable_ipv6=1")
            set_link_up(ifname)            # switches live in the initial namespace
        try:
            self._start_daemon()
        except BaseException:
            self.stop_daemon()
            raise

    @abstractmethod
    def _start_daemon(self) -> None:
        """Start the switch process (:attr:`proc`), wait until it is ready and
        program it; raise with its log's last lines if it fails."""

    def stop_daemon(self) -> None:
        """Close the controller and stop the switch process; the Mininet node
        (shell, interfaces) stays."""
        ctl, self._controller = self._controller, None
        if ctl is not None:
            try:
                ctl.close()
            except Exception:
                pass            # a broken connection must not keep the daemon running
        proc, self.proc = self.proc, None
        stop_process(proc)

    def stop(self, deleteIntfs: bool = True) -> None:  # noqa: N803 - Mininet's name
        self.stop_daemon()
        super().stop(deleteIntfs)

    def terminate(self) -> None:
        self.stop_daemon()
        super().terminate()

    # -- logs ----------------------------------------------------------------
    @property
    def log_files(self) -> list[str]:
        """The switch's log files (the daemon's own and its output)."""
        return [self.log_path]

    def log_tail(self, lines: int = 20) -> str:
        """The last lines of each log file, headed by its name."""
        return tail(self.log_files, lines)

    # -- control -------------------------------------------------------------
    @property
    def pid_of_daemon(self) -> int | None:
        return self.proc.pid if self.proc is not None else None

    def controller(self) -> Controller:
        """The switch's controller API (:mod:`switches.controller`), owned by
        the switch: closed when it stops."""
        if self._controller is None:
            self._controller = self._open_controller()
        return self._controller

    @abstractmethod
    def _open_controller(self) -> Controller:
        """The controller of the running switch; RuntimeError if it is not running."""

    @abstractmethod
    def cmd_cli(self, line: str) -> str:
        """Run one simple_switch_CLI command on this switch."""


__all__ = ["OFFLOADS", "P4Host", "P4SwitchNode", "offload_off_command"]
