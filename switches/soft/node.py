"""Mininet node for the soft target.

:class:`SoftP4Switch` runs ``python -m switches.soft.daemon`` in the root
namespace (as BMv2's Mininet switch does) on the switch's interfaces, with
port numbers from Mininet's port map. The lifecycle both targets share
(interfaces, logs, stopping, the controller) is :class:`switches.node.P4SwitchNode`'s.
"""

from __future__ import annotations

import json
import os
import sys
import time
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from switches.controller.api import Controller
from switches.node import P4SwitchNode
from switches.process import launch, stop_process
from switches.soft.backends import check_backend
from switches.soft.control.client import SwitchClient
from switches.targets import SOFT

REPO_ROOT = Path(__file__).resolve().parents[2]
DAEMON_MODULE = "switches.soft.daemon"


class SoftSwitchStartError(RuntimeError):
    """The switch process exited or did not become ready; the message has its log."""


class SoftP4Switch(P4SwitchNode):
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

    target = SOFT
    log_dir_prefix = "softswitch-"

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
        super().__init__(name, program, log_dir=log_dir, pcap=pcap,
                         priority_queues=priority_queues, cli_commands=cli_commands,
                         ready_timeout=ready_timeout, include_dirs=include_dirs,
                         defines=defines, log_level=log_level, **params)
        self.requested_control_port = control_port
        self.control_port: int | None = control_port
        self.daemon_args = list(daemon_args)
        self.backend = check_backend(backend)
        self.ready_path = os.path.join(self.log_dir, f"{name}.ready")
        self._client: SwitchClient | None = None
        self.requested_grpc_port = grpc_port
        self.grpc_port: int | None = grpc_port
        self.device_id = device_id
        self.cpu_port = cpu_port

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

    def _start_daemon(self) -> None:
        try:
            os.unlink(self.ready_path)
        except FileNotFoundError:
            pass
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join(
            p for p in (str(REPO_ROOT), env.get("PYTHONPATH", "")) if p)
        env["PYTHONUNBUFFERED"] = "1"
        self.proc = launch(self.daemon_command(), self.log_path, env=env, cwd=REPO_ROOT)
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
                    f"(program {self.program}, log {self.log_path}):\n{self.log_tail()}")
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
                proc, self.proc = self.proc, None
                stop_process(proc)
                raise SoftSwitchStartError(
                    f"{self.name}: soft switch not ready after {self.ready_timeout:.0f} s "
                    f"(program {self.program}, log {self.log_path}):\n{self.log_tail()}")
            time.sleep(0.05)

    def stop_daemon(self) -> None:
        super().stop_daemon()
        if self._client is not None:
            self._client.close()
            self._client = None
        try:
            os.unlink(self.ready_path)
        except FileNotFoundError:
            pass

    # -- control -------------------------------------------------------------
    def client(self) -> SwitchClient:
        if self.control_port is None:
            raise RuntimeError(f"{self.name}: switch is not running")
        if self._client is None:
            self._client = SwitchClient(self.control_port)
        return self._client

    def _open_controller(self) -> Controller:
        """A P4RuntimeController (primary, election id 1, P4Info read from the
        switch, the control port attached for queue settings) when started with
        ``grpc_port``, else a CliController."""
        if self.control_port is None:
            raise RuntimeError(f"{self.name}: switch is not running")
        return self.target.controller(self.control_port, self.grpc_port,
                                      device_id=self.device_id)

    def cmd_cli(self, line: str) -> str:
        """Run one simple_switch_CLI command on this switch; raises SwitchError."""
        return self.client().execute(line)

    def stats(self) -> dict[str, Any]:
        """Daemon and pipeline statistics (see ``switch_stats``)."""
        result: dict[str, Any] = json.loads(self.cmd_cli("switch_stats"))
        return result


__all__ = ["DAEMON_MODULE", "SoftP4Switch", "SoftSwitchStartError"]
