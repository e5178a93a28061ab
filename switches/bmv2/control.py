"""Control of a running simple_switch_grpc: the P4Runtime pipeline push and
batches of simple_switch_CLI commands.

BMv2 takes its program over P4Runtime: SetForwardingPipelineConfig with the
P4Info and, as the opaque device config, the bmv2 JSON p4c wrote. The rest
goes through the controller API (:mod:`switches.controller`: tables, PRE,
registers with the Thrift fallback, queues); :class:`ThriftCli` is how its
``CliController`` reaches the switch (``switches.targets.BMV2.cli_controller``).
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from collections.abc import Sequence
from typing import Any

from switches.controller.api import ControllerError
from switches.controller.p4runtime import P4RuntimeController

CLI_MISSING = ("simple_switch_CLI not found: BMv2 runs in the Vagrant VM (vagrant up), "
               "or install p4lang's packages")
_CLI_ERROR = re.compile(r"^(Error|Invalid|.*Exception|.*error:)", re.M)


def load_p4c_p4info(path: str | os.PathLike[str]) -> Any:
    """The text P4Info p4c wrote. Fields newer than the installed p4runtime
    protos are skipped: a newer p4c must not make the testbed unusable."""
    from google.protobuf import text_format
    from p4.config.v1 import p4info_pb2

    p4i = p4info_pb2.P4Info()
    with open(path) as f:
        text_format.Parse(f.read(), p4i, allow_unknown_field=True)
    return p4i


def push_pipeline(ctl: P4RuntimeController, p4info_path: str | os.PathLike[str],
                  json_path: str | os.PathLike[str]) -> None:
    """Install the program: VERIFY_AND_COMMIT of ``p4info_path`` (text P4Info)
    with the bmv2 JSON as device config; ``ctl`` then uses that P4Info."""
    p4info = load_p4c_p4info(p4info_path)
    with open(json_path, "rb") as f:
        device_config = f.read()
    ctl.set_pipeline_config(p4info, device_config)


def cli_command(thrift_port: int, host: str = "127.0.0.1") -> list[str]:
    """The simple_switch_CLI command line for the switch at ``thrift_port``."""
    exe = shutil.which("simple_switch_CLI")
    if exe is None:
        raise ControllerError(CLI_MISSING)
    return [exe, "--thrift-port", str(thrift_port), "--thrift-ip", host]


def split_cli_replies(stdout: str, n: int) -> list[str]:
    """One reply per command from simple_switch_CLI's output for ``n`` commands
    fed on stdin (its prompt ``RuntimeCmd:`` precedes each)."""
    chunks = stdout.split("RuntimeCmd:")
    replies = [c.strip() for c in chunks[1:n + 1]]
    return replies + [""] * (n - len(replies))


def run_cli_batch(thrift_port: int, lines: Sequence[str], host: str = "127.0.0.1",
                  timeout: float = 120.0) -> list[str]:
    """Run ``lines`` in one simple_switch_CLI process (one start-up for all);
    their replies in order. Raises ControllerError naming the first failing
    line (the lines before it took effect)."""
    cmds = [ln.strip() for ln in lines if ln.strip() and not ln.strip().startswith("#")]
    if not cmds:
        return []
    try:
        p = subprocess.run(cli_command(thrift_port, host), input="\n".join(cmds) + "\n",
                           capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        raise ControllerError(f"simple_switch_CLI on thrift port {thrift_port} did not "
                              f"finish {len(cmds)} commands in {timeout:.0f} s", "CLI") from None
    replies = split_cli_replies(p.stdout, len(cmds))
    for line, reply in zip(cmds, replies, strict=True):
        if _CLI_ERROR.search(reply):
            raise ControllerError(f"{line}: {reply}", "CLI")
    if p.returncode != 0:
        raise ControllerError(f"simple_switch_CLI exited with code {p.returncode}: "
                              f"{(p.stderr or p.stdout).strip()[-2000:]}", "CLI")
    return replies


class ThriftCli:
    """simple_switch_CLI --thrift-port, one process per command (the
    ``execute`` of BMv2's CliController)."""

    def __init__(self, port: int, host: str = "127.0.0.1") -> None:
        self.command = cli_command(port, host)

    def execute(self, line: str) -> str:
        p = subprocess.run(self.command, input=line + "\n", capture_output=True, text=True,
                           timeout=60)
        out = p.stdout.replace("RuntimeCmd: ", "").strip()
        lines = [ln for ln in out.splitlines() if not ln.startswith("Obtaining JSON")
                 and not ln.startswith("Control utility for runtime P4 table manipulation")]
        text = "\n".join(lines).strip()
        if p.returncode != 0 or re.search(r"^(Error|Invalid|.*Exception)", text, re.M):
            raise ControllerError(text or p.stderr.strip(), "CLI")
        return text


__all__ = ["CLI_MISSING", "ThriftCli", "cli_command", "load_p4c_p4info", "push_pipeline",
           "run_cli_batch", "split_cli_replies"]
