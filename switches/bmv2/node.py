"""Mininet node for the BMv2 target: ``simple_switch_grpc`` on the switch's
interfaces, programmed over P4Runtime.

:class:`BMv2Switch` mirrors :class:`switches.soft.node.SoftP4Switch`: same
``program=``, ``log_dir``, ``pcap``, ``priority_queues``, ``cli_commands``
and the same :meth:`BMv2Switch.controller` API. At construction it compiles
the program with p4c (cached, so p4c's errors come before any link
exists); :meth:`start` runs ``simple_switch_grpc --no-p4`` in the root
namespace with ``-i <port>@<intf>`` per interface, waits until its Thrift
and gRPC ports accept connections, pushes the program with P4Runtime
SetForwardingPipelineConfig (P4Info + bmv2 JSON), then applies
``cli_commands`` through simple_switch_CLI.

BMv2's own log goes to ``<log_dir>/<name>.log`` (some BMv2 builds append
``.txt``); its stdout and stderr to ``<log_dir>/<name>.out``; pcaps, with
``pcap=True``, to ``<log_dir>`` as ``<intf>_in.pcap`` / ``<intf>_out.pcap``.
"""

from __future__ import annotations

import itertools
import os
import shutil
import subprocess
import tempfile
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from mininet.node import Switch

from switches.bmv2.compile import ToolMissing, compile_bmv2
from switches.bmv2.launch import (
    BMV2_NODE_ENV,
    NO_THRIFT_MARK,
    SWITCH_EXE,
    SWITCH_MISSING,
    Bmv2StartError,
    default_build_dir,
    free_port,
    launch,
    stop_process,
    switch_command,
    tail,
    wait_listening,
)

_device_ids = itertools.count(1)



class BMv2Switch(Switch):
    """A Mininet switch running a P4 program on BMv2 (simple_switch_grpc).

    ``grpc_port``/``thrift_port`` None pick free ports; ``device_id`` None
    takes the next of a process-wide counter. ``cli_commands`` are
    simple_switch_CLI lines applied after the pipeline push, before any
    traffic. ``cpu_port`` enables P4Runtime packet-in/out (a port number no
    interface uses). ``include_dirs``/``defines`` go to p4c; ``build_dir``
    holds the compiled program (cached, see :func:`default_build_dir`).
    """

    target = "bmv2"

    def __init__(
        self,
        name: str,
        program: str | os.PathLike[str] | None = None,
        grpc_port: int | None = None,
        thrift_port: int | None = None,
        device_id: int | None = None,
        log_dir: str | os.PathLike[str] | None = None,
        pcap: bool = False,
        priority_queues: int = 1,
        cpu_port: int | None = None,
        cli_commands: Iterable[str] | None = None,
        ready_timeout: float = 60.0,
        include_dirs: Sequence[str] = (),
        defines: Mapping[str, str] | None = None,
        log_level: str = "info",
        build_dir: str | os.PathLike[str] | None = None,
        **params: Any,
    ) -> None:
        if program is None:
            raise ValueError(f"{name}: BMv2Switch needs program=PATH.p4")
        self.exe = shutil.which(SWITCH_EXE)
        if self.exe is None:
            raise ToolMissing(SWITCH_MISSING)
        self.program = os.path.abspath(program)
        self.include_dirs = [os.path.abspath(d) for d in include_dirs]
        self.defines = dict(defines or {})
        self.build_dir = os.path.abspath(build_dir) if build_dir else default_build_dir()
        # Compile before Mininet creates anything: a P4 error leaves no node behind.
        self.json_path, self.p4info_path = compile_bmv2(
            self.program, self.build_dir, self.include_dirs, self.defines)
        super().__init__(name, **params)
        self.requested_grpc_port = grpc_port
        self.requested_thrift_port = thrift_port
        self.grpc_port: int | None = grpc_port
        self.thrift_port: int | None = thrift_port
        self.device_id = next(_device_ids) if device_id is None else device_id
        self.log_dir = os.path.abspath(log_dir) if log_dir else tempfile.mkdtemp(prefix="bmv2-")
        self.pcap = pcap
        self.priority_queues = priority_queues
        self.cpu_port = cpu_port
        self.cli_commands = list(cli_commands or [])
        self.ready_timeout = ready_timeout
        self.log_level = log_level
        self.log_path = os.path.join(self.log_dir, f"{name}.log")
        self.out_path = os.path.join(self.log_dir, f"{name}.out")
        self.proc: subprocess.Popen[bytes] | None = None
        self.has_thrift = False
        self._controller: Any = None

    # -- Mininet hooks -------------------------------------------------------
    def port_interfaces(self) -> list[tuple[int, str]]:
        """(port number, interface name) of every data interface."""
        return sorted(
            (self.ports[intf], intf.name) for intf in self.intfList() if intf.name != "lo"
        )

    @property
    def log_files(self) -> list[str]:
        return [self.log_path, self.log_path + ".txt", self.out_path]

    @property
    def control_port(self) -> int | None:
        """The port simple_switch_CLI talks to (``--thrift-port``)."""
        return self.thrift_port

    def switch_command(self) -> list[str]:
        assert self.exe is not None and self.thrift_port is not None
        assert self.grpc_port is not None
        return switch_command(
            self.exe, self.port_interfaces(), device_id=self.device_id,
            thrift_port=self.thrift_port, grpc_port=self.grpc_port, log_file=self.log_path,
            log_level=self.log_level, pcap_dir=self.log_dir if self.pcap else None,
            cpu_port=self.cpu_port, priority_queues=self.priority_queues)

    def start(self, controllers: list[Any]) -> None:
        if self.proc is not None and self.proc.poll() is None:
            return
        from switches.soft.node import offload_off_command
        from testbed.netlink import set_link_up

        os.makedirs(self.log_dir, exist_ok=True)
        for _port, ifname in self.port_interfaces():
            self.cmd(offload_off_command(ifname))
            self.cmd(f"sysctl -qw net.ipv6.conf.{ifname.replace('.', '/')}.disable_ipv6=1")
            set_link_up(ifname)            # switches live in the initial namespace
        self.thrift_port = self.requested_thrift_port or free_port()
        self.grpc_port = self.requested_grpc_port or free_port()
        for stale in self.log_files:
            Path(stale).unlink(missing_ok=True)
        # the mark lets testbed.net.leftovers() and `testbed clean` find it
        env = {**os.environ, BMV2_NODE_ENV: self.name}
        self.proc = launch(self.switch_command(), self.out_path, env=env)
        try:
            self._wait_and_program()
        except BaseException:
            self._shutdown()
            raise

    def _wait_and_program(self) -> None:
        assert self.proc is not None and self.grpc_port is not None
        assert self.thrift_port is not None
        what = f"{self.name}: simple_switch_grpc (program {self.program})"
        opened = wait_listening(
            self.proc, {"grpc": self.grpc_port, "thrift": self.thrift_port},
            self.ready_timeout, what, self.log_files, optional={"thrift": NO_THRIFT_MARK})
        self.has_thrift = "thrift" in opened
        from switches.bmv2.control import p4runtime_controller, push_pipeline, run_cli_batch
        from testbed.controller import ControllerError

        try:
            ctl = p4runtime_controller(self.grpc_port, self.p4info_path, self.device_id,
                                       self.thrift_port if self.has_thrift else None)
            self._controller = ctl
            push_pipeline(ctl, self.p4info_path, self.json_path)
        except ControllerError as e:
            raise Bmv2StartError(f"{what}: installing the pipeline over P4Runtime "
                                 f"failed: {e}\n{tail(self.log_files)}") from None
        if self.cli_commands:
            if not self.has_thrift:
                raise Bmv2StartError(f"{what}: cli_commands need simple_switch_CLI, but this "
                                     "BMv2 build has no Thrift server")
            try:
                run_cli_batch(self.thrift_port, self.cli_commands)
            except ControllerError as e:
                raise Bmv2StartError(f"{self.name}: cli_commands failed: {e}") from None

    def _shutdown(self) -> None:
        if self._controller is not None:
            try:
                self._controller.close()
            except Exception:
                pass
            self._controller = None
        stop_process(self.proc)
        self.proc = None

    def stop(self, deleteIntfs: bool = True) -> None:  # noqa: N803 - Mininet's name
        self._shutdown()
        super().stop(deleteIntfs)

    def terminate(self) -> None:
        self._shutdown()
        super().terminate()

    # -- control -------------------------------------------------------------
    @property
    def pid_of_daemon(self) -> int | None:
        return self.proc.pid if self.proc is not None else None

    def controller(self) -> Any:
        """The switch's :class:`testbed.controller.P4RuntimeController` (primary,
        election id 1), with simple_switch_CLI attached for queue settings and
        registers. The switch owns it: it is closed when the switch stops."""
        if self._controller is None:
            raise RuntimeError(f"{self.name}: switch is not running")
        return self._controller

    def cmd_cli(self, line: str) -> str:
        """Run one simple_switch_CLI command; raises ControllerError on an error reply."""
        ctl = self.controller()
        if ctl.cli is None:
            raise RuntimeError(f"{self.name}: this BMv2 build has no Thrift server")
        reply: str = ctl.cli.execute(line)
        return reply


__all__ = ["BMv2Switch", "Bmv2StartError"]
