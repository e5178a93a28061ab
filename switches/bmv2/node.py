"""Mininet node for the BMv2 target: ``simple_switch_grpc`` on the switch's
interfaces, programmed over P4Runtime.

:class:`BMv2Switch` mirrors :class:`switches.soft.node.SoftP4Switch`: same
``program=``, ``log_dir``, ``pcap``, ``priority_queues``, ``cli_commands``
and the same :meth:`BMv2Switch.controller` API (both derive from
:class:`switches.node.P4SwitchNode`). At construction it compiles
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
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from switches.bmv2.compile import ToolMissing, compile_bmv2
from switches.bmv2.control import load_p4c_p4info, push_pipeline, run_cli_batch
from switches.bmv2.launch import (
    BMV2_NODE_ENV,
    NO_THRIFT_MARK,
    SWITCH_EXE,
    SWITCH_MISSING,
    Bmv2StartError,
    default_build_dir,
    free_port,
    switch_command,
    wait_listening,
)
from switches.controller.api import Controller, ControllerError
from switches.controller.p4runtime import P4RuntimeController
from switches.node import P4SwitchNode
from switches.process import launch
from switches.targets import BMV2

_device_ids = itertools.count(1)


class BMv2Switch(P4SwitchNode):
    """A Mininet switch running a P4 program on BMv2 (simple_switch_grpc).

    ``grpc_port``/``thrift_port`` None pick free ports; ``device_id`` None
    takes the next of a process-wide counter. ``cli_commands`` are
    simple_switch_CLI lines applied after the pipeline push, before any
    traffic. ``cpu_port`` enables P4Runtime packet-in/out (a port number no
    interface uses). ``include_dirs``/``defines`` go to p4c; ``build_dir``
    holds the compiled program (cached, see :func:`default_build_dir`).
    """

    target = BMV2
    log_dir_prefix = "bmv2-"

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
        self.build_dir = os.path.abspath(build_dir) if build_dir else default_build_dir()
        super().__init__(name, program, log_dir=log_dir, pcap=pcap,
                         priority_queues=priority_queues, cli_commands=cli_commands,
                         ready_timeout=ready_timeout, include_dirs=include_dirs,
                         defines=defines, log_level=log_level, **params)
        self.requested_grpc_port = grpc_port
        self.requested_thrift_port = thrift_port
        self.grpc_port: int | None = grpc_port
        self.thrift_port: int | None = thrift_port
        self.device_id = next(_device_ids) if device_id is None else device_id
        self.cpu_port = cpu_port
        self.out_path = os.path.join(self.log_dir, f"{name}.out")
        self.has_thrift = False

    def _before_mininet(self) -> None:
        exe = shutil.which(SWITCH_EXE)
        if exe is None:
            raise ToolMissing(SWITCH_MISSING)
        self.exe = exe
        self.include_dirs = [os.path.abspath(d) for d in self.include_dirs]
        # A P4 error (p4c's) comes before any node or link exists.
        self.json_path, self.p4info_path = compile_bmv2(
            self.program, self.build_dir, self.include_dirs, self.defines)

    @property
    def log_files(self) -> list[str]:
        return [self.log_path, self.log_path + ".txt", self.out_path]

    @property
    def control_port(self) -> int | None:
        """The port simple_switch_CLI talks to (``--thrift-port``)."""
        return self.thrift_port

    def switch_command(self) -> list[str]:
        assert self.thrift_port is not None and self.grpc_port is not None
        return switch_command(
            self.exe, self.port_interfaces(), device_id=self.device_id,
            thrift_port=self.thrift_port, grpc_port=self.grpc_port, log_file=self.log_path,
            log_level=self.log_level, pcap_dir=self.log_dir if self.pcap else None,
            cpu_port=self.cpu_port, priority_queues=self.priority_queues)

    def _start_daemon(self) -> None:
        self.thrift_port = self.requested_thrift_port or free_port()
        self.grpc_port = self.requested_grpc_port or free_port()
        for stale in self.log_files:
            Path(stale).unlink(missing_ok=True)
        # the mark lets testbed.net.leftovers() and `testbed clean` find it
        env = {**os.environ, BMV2_NODE_ENV: self.name}
        self.proc = launch(self.switch_command(), self.out_path, env=env)
        self._wait_and_program()

    def _wait_and_program(self) -> None:
        assert self.proc is not None and self.grpc_port is not None
        assert self.thrift_port is not None
        what = f"{self.name}: simple_switch_grpc (program {self.program})"
        opened = wait_listening(
            self.proc, {"grpc": self.grpc_port, "thrift": self.thrift_port},
            self.ready_timeout, what, self.log_files, optional={"thrift": NO_THRIFT_MARK})
        self.has_thrift = "thrift" in opened
        try:
            ctl = self.target.p4runtime_controller(
                self.grpc_port, load_p4c_p4info(self.p4info_path), self.device_id,
                self.thrift_port if self.has_thrift else None)
            self._controller = ctl
            push_pipeline(ctl, self.p4info_path, self.json_path)
        except ControllerError as e:
            raise Bmv2StartError(f"{what}: installing the pipeline over P4Runtime "
                                 f"failed: {e}\n{self.log_tail()}") from None
        if self.cli_commands:
            if not self.has_thrift:
                raise Bmv2StartError(f"{what}: cli_commands need simple_switch_CLI, but this "
                                     "BMv2 build has no Thrift server")
            try:
                run_cli_batch(self.thrift_port, self.cli_commands)
            except ControllerError as e:
                raise Bmv2StartError(f"{self.name}: cli_commands failed: {e}") from None

    # -- control -------------------------------------------------------------
    def _open_controller(self) -> Controller:
        # The switch's P4RuntimeController (primary, election id 1, with
        # simple_switch_CLI attached for queue settings and registers) is made
        # when it starts, since it installs the pipeline: none before that.
        raise RuntimeError(f"{self.name}: switch is not running")

    def cmd_cli(self, line: str) -> str:
        """Run one simple_switch_CLI command; raises ControllerError on an error reply."""
        ctl = self.controller()
        if not isinstance(ctl, P4RuntimeController) or ctl.cli is None:
            raise RuntimeError(f"{self.name}: this BMv2 build has no Thrift server")
        return ctl.cli.execute(line)


__all__ = ["BMv2Switch", "Bmv2StartError"]
