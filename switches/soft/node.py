"""Mininet nodes for the soft target.

:class:`SoftP4Switch` runs ``python -m switches.soft.daemon`` in the root
namespace (as BMv2's Mininet switch does) on the switch's interfaces, with
port numbers from Mininet's port map. :class:`P4Host` is a host whose link
carries only whole, checksummed frames: a userspace switch reading veth
frames through packet sockets would otherwise see 64 KB TSO super-frames and
TCP segments with unfinished checksums, which it can neither forward nor
fix.
"""

from __future__ import annotations

import ctypes
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from mininet.log import warn
from mininet.node import Host, Switch

from switches.soft.control.client import SwitchClient

REPO_ROOT = Path(__file__).resolve().parents[2]
DAEMON_MODULE = "switches.soft.daemon"
OFFLOADS = ("rx", "tx", "sg", "tso", "gso", "gro")
PR_SET_PDEATHSIG = 1


class SoftSwitchStartError(RuntimeError):
    """The switch process exited or did not become ready; the message has its log."""


def _tail(path: str | os.PathLike[str], lines: int = 20) -> str:
    try:
        text = Path(path).read_text(errors="replace")
    except OSError:
        return "(no log written)"
    return "\n".join(text.splitlines()[-lines:]) or "(log is empty)"


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


def _die_with_parent() -> None:
    # The daemon must not outlive the process that started it, even if that
    # one is killed without a chance to clean up.
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(PR_SET_PDEATHSIG, signal.SIGTERM)
    except (OSError, AttributeError):
        pass
    os.setpgrp()  # a Ctrl-C in the terminal goes to the test, which stops us in order


class P4Host(Host):
    """A Mininet host with offloads and IPv6 off on its interfaces."""

    def config(self, **params: Any) -> dict[str, Any]:
        r = super().config(**params)
        for intf in self.intfList():
            self.cmd(offload_off_command(intf.name))
        self.cmd("sysctl -qw net.ipv6.conf.all.disable_ipv6=1 net.ipv6.conf.default.disable_ipv6=1")
        return r


class SoftP4Switch(Switch):
    """A Mininet switch running a P4 program on the soft target.

    ``control_port=None`` lets the daemon pick a free port (read back from
    its ready file into :attr:`control_port`). ``cli_commands`` are applied
    before any traffic. Logs (and pcaps with ``pcap=True``) go to
    ``log_dir`` (a fresh temporary directory by default). ``daemon_args``
    are passed on to ``python -m switches.soft.daemon`` (e.g.
    ``["--socket-buffer", "262144"]``). ``backend`` picks the interpreter of
    the data path (``switches.soft.backends``: ``python``, the default, or
    ``pypy``). ``defines`` (name -> value) go to the daemon's compiler as
    ``-D NAME=VALUE``.

    ``grpc_port`` (off when None; 0 picks a free port, read back into
    :attr:`grpc_port`) also serves P4Runtime for ``device_id``, with
    packet-in/out on ``cpu_port``; :meth:`controller` then speaks P4Runtime.
    """

    def __init__(
        self,
        name: str,
        program: str | os.PathLike[str] | None = None,
        control_port: int | None = None,
        log_dir: str | os.PathLike[str] | None = None,
        pcap: bool = False,
        priority_queues: int = 1,
        cli_commands: Iterable[str] | None = None,
        ready_timeout: float = 120.0,
        include_dirs: Sequence[str] = (),
        log_level: str = "info",
        daemon_args: Sequence[str] = (),
        backend: str = "python",
        grpc_port: int | None = None,
        device_id: int = 0,
        cpu_port: int | None = None,
        defines: Mapping[str, str] | None = None,
        **params: Any,
    ) -> None:
        super().__init__(name, **params)
        if program is None:
            raise ValueError(f"{name}: SoftP4Switch needs program=PATH.p4")
        self.program = os.path.abspath(program)
        self.defines = dict(defines or {})
        self.requested_control_port = control_port
        self.control_port: int | None = control_port
        self.log_dir = os.path.abspath(log_dir) if log_dir else tempfile.mkdtemp(prefix="softswitch-")
        self.pcap = pcap
        self.priority_queues = priority_queues
        self.cli_commands = list(cli_commands or [])
        self.ready_timeout = ready_timeout
        self.include_dirs = list(include_dirs)
        self.log_level = log_level
        self.daemon_args = list(daemon_args)
        from switches.soft.backends import check_backend
        self.backend = check_backend(backend)
        self.log_path = os.path.join(self.log_dir, f"{name}.log")
        self.ready_path = os.path.join(self.log_dir, f"{name}.ready")
        self.proc: subprocess.Popen[bytes] | None = None
        self._client: SwitchClient | None = None
        self.requested_grpc_port = grpc_port
        self.grpc_port: int | None = grpc_port
        self.device_id = device_id
        self.cpu_port = cpu_port
        self._controller: Any = None

    # -- Mininet hooks -------------------------------------------------------
    def port_interfaces(self) -> list[tuple[int, str]]:
        """(port number, interface name) of every data interface."""
        return sorted(
            (self.ports[intf], intf.name) for intf in self.intfList() if intf.name != "lo"
        )

    def daemon_command(self) -> list[str]:
        cmd = [sys.executable, "-m", DAEMON_MODULE, "--program", self.program,
               "--control-port", str(self.requested_control_port or 0),
               "--ready-file", self.ready_path, "--priority-queues", str(self.priority_queues),
               "--log-level", self.log_level]
        for d in self.include_dirs:
            cmd += ["-I", d]
        for name, value in self.defines.items():
            cmd += ["-D", f"{name}={value}"]
        for port, ifname in self.port_interfaces():
            cmd += ["-i", f"{port}@{ifname}"]
        if self.pcap:
            cmd += ["--pcap-dir", self.log_dir]
        if self.backend != "python":
            cmd += ["--backend", self.backend]
        if self.requested_grpc_port is not None:
            cmd += ["--grpc-port", str(self.requested_grpc_port),
                    "--device-id", str(self.device_id)]
        if self.cpu_port is not None:
            cmd += ["--cpu-port", str(self.cpu_port)]
        cmd += self.daemon_args
        if self.cli_commands:
            cli_file = os.path.join(self.log_dir, f"{self.name}-commands.txt")
            Path(cli_file).write_text("\n".join(self.cli_commands) + "\n")
            cmd += ["--cli-file", cli_file]
        return cmd

    def start(self, controllers: list[Any]) -> None:
        if self.proc is not None and self.proc.poll() is None:
            return
        from testbed.netlink import set_link_up

        os.makedirs(self.log_dir, exist_ok=True)
        for _port, ifname in self.port_interfaces():
            self.cmd(offload_off_command(ifname))
            self.cmd(f"sysctl -qw net.ipv6.conf.{ifname.replace('.', '/')}.disable_ipv6=1")
            set_link_up(ifname)            # switches live in the initial namespace
        try:
            os.unlink(self.ready_path)
        except FileNotFoundError:
            pass
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join(
            p for p in (str(REPO_ROOT), env.get("PYTHONPATH", "")) if p)
        env["PYTHONUNBUFFERED"] = "1"
        with open(self.log_path, "ab") as logf:
            self.proc = subprocess.Popen(
                self.daemon_command(), stdin=subprocess.DEVNULL, stdout=logf,
                stderr=subprocess.STDOUT, env=env, cwd=str(REPO_ROOT),
                preexec_fn=_die_with_parent,
            )
        self._wait_ready()

    def _wait_ready(self) -> None:
        assert self.proc is not None
        deadline = time.monotonic() + self.ready_timeout
        while True:
            code = self.proc.poll()
            if code is not None:
                self.proc = None
                raise SoftSwitchStartError(
                    f"{self.name}: soft switch exited with code {code} during startup "
                    f"(program {self.program}, log {self.log_path}):\n{_tail(self.log_path)}")
            if os.path.exists(self.ready_path):
                try:
                    info = json.loads(Path(self.ready_path).read_text())
                    self.control_port = int(info["control_port"])
                    if info.get("grpc_port") is not None:
                        self.grpc_port = int(info["grpc_port"])
                    return
                except (ValueError, KeyError, OSError):
                    pass  # renamed into place atomically; retry on a partial read
            if time.monotonic() >= deadline:
                self._terminate_proc()
                raise SoftSwitchStartError(
                    f"{self.name}: soft switch not ready after {self.ready_timeout:.0f} s "
                    f"(program {self.program}, log {self.log_path}):\n{_tail(self.log_path)}")
            time.sleep(0.05)

    def _terminate_proc(self, timeout: float = 5.0) -> int | None:
        proc, self.proc = self.proc, None
        if proc is None:
            return None
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(timeout)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        return proc.returncode

    def stop(self, deleteIntfs: bool = True) -> None:  # noqa: N803 - Mininet's name
        if self._controller is not None:
            self._controller.close()
            self._controller = None
        if self._client is not None:
            self._client.close()
            self._client = None
        self._terminate_proc()
        try:
            os.unlink(self.ready_path)
        except FileNotFoundError:
            pass
        super().stop(deleteIntfs)

    def terminate(self) -> None:
        self._terminate_proc()
        super().terminate()

    # -- control -------------------------------------------------------------
    @property
    def pid_of_daemon(self) -> int | None:
        return self.proc.pid if self.proc is not None else None

    def client(self) -> SwitchClient:
        if self.control_port is None:
            raise RuntimeError(f"{self.name}: switch is not running")
        if self._client is None:
            self._client = SwitchClient(self.control_port)
        return self._client

    def controller(self) -> Any:
        """The switch's :mod:`testbed.controller` API, owned by the switch
        (closed when it stops): a P4RuntimeController (primary, election id 1,
        P4Info read from the switch, the control port attached for queue
        settings) when started with ``grpc_port``, else a CliController."""
        if self.control_port is None:
            raise RuntimeError(f"{self.name}: switch is not running")
        if self._controller is None:
            from testbed.controller import CliController, P4RuntimeController

            cli = CliController(self.control_port)
            if self.grpc_port is None:
                self._controller = cli
            else:
                try:
                    self._controller = P4RuntimeController(
                        f"127.0.0.1:{self.grpc_port}", None, device_id=self.device_id, cli=cli)
                except BaseException:
                    cli.close()
                    raise
        return self._controller

    def cmd_cli(self, line: str) -> str:
        """Run one simple_switch_CLI command on this switch; raises SwitchError."""
        return self.client().execute(line)

    def stats(self) -> dict[str, Any]:
        """Daemon and pipeline statistics (see ``switch_stats``)."""
        result: dict[str, Any] = json.loads(self.cmd_cli("switch_stats"))
        return result
