"""``simple_switch_grpc``'s command line and the wait until its ports open (no
Mininet here: :mod:`switches.bmv2.node` puts it in a Mininet node; the
process is started and stopped by :mod:`switches.process`)."""

from __future__ import annotations

import os
import socket
import subprocess
import time
from collections.abc import Mapping, Sequence
from pathlib import Path

from switches.process import tail

# Set in the environment of every simple_switch_grpc the BMv2 node starts, so
# that the testbed's cleanup (testbed.net.leftovers) finds exactly those.
BMV2_NODE_ENV = "P4_TESTBED_BMV2_NODE"

SWITCH_EXE = "simple_switch_grpc"
SWITCH_MISSING = ("simple_switch_grpc not found: BMv2 runs in the Vagrant VM (vagrant up), "
                  "or install p4lang's packages")
NO_THRIFT_MARK = "without Thrift support"


class Bmv2StartError(RuntimeError):
    """simple_switch_grpc exited or did not become ready; the message has its log."""


def default_build_dir() -> str:
    """Where compiled programs are cached between runs."""
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "p4-collectives-testbed", "bmv2")


def free_port(host: str = "127.0.0.1") -> int:
    """A TCP port nothing listens on now (the kernel's pick)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((host, 0))
        return int(s.getsockname()[1])


def port_open(port: int, host: str = "127.0.0.1", timeout: float = 0.2) -> bool:
    try:
        with socket.create_connection((host, port), timeout=timeout):
            return True
    except OSError:
        return False


def switch_command(exe: str, interfaces: Sequence[tuple[int, str]], *, device_id: int,
                   thrift_port: int, grpc_port: int, log_file: str, log_level: str = "info",
                   pcap_dir: str | None = None, cpu_port: int | None = None,
                   priority_queues: int = 1, json_path: str | None = None) -> list[str]:
    """The simple_switch_grpc command line.

    Without ``json_path`` the switch starts empty (``--no-p4``) and waits for
    a P4Runtime pipeline. Options after ``--`` are simple_switch_grpc's own;
    ``--priority-queues`` is passed only when above 1, so that builds older
    than the option still start with the default.
    """
    if cpu_port is not None and any(p == cpu_port for p, _ in interfaces):
        raise ValueError(f"cpu_port {cpu_port} is also a data port")
    if priority_queues < 1:
        raise ValueError("priority_queues must be at least 1")
    cmd = [exe, "--device-id", str(device_id), "--thrift-port", str(thrift_port),
           "--log-file", log_file, "--log-flush", "--log-level", log_level]
    if pcap_dir is not None:
        # the directory is an optional value: it must be attached with '='
        cmd.append(f"--pcap={pcap_dir}")
    for port, ifname in interfaces:
        cmd += ["-i", f"{port}@{ifname}"]
    cmd.append(json_path if json_path is not None else "--no-p4")
    cmd += ["--", "--grpc-server-addr", f"127.0.0.1:{grpc_port}"]
    if cpu_port is not None:
        cmd += ["--cpu-port", str(cpu_port)]
    if priority_queues > 1:
        cmd += ["--priority-queues", str(priority_queues)]
    return cmd


def wait_listening(proc: subprocess.Popen[bytes], ports: Mapping[str, int], timeout: float,
                   what: str, logs: Sequence[str], optional: Mapping[str, str] | None = None
                   ) -> set[str]:
    """Wait until every port in ``ports`` (name -> port) accepts connections.

    ``optional`` maps a port name to a text that, once it appears in one of
    ``logs``, says the port will never open (then it is left out of the
    result). Returns the names of the open ports. Raises Bmv2StartError
    with the logs' last lines if the process exits or time runs out."""
    deadline = time.monotonic() + timeout
    pending = dict(ports)
    opened: set[str] = set()
    while True:
        code = proc.poll()
        if code is not None:
            raise Bmv2StartError(f"{what} exited with code {code} during start-up:\n"
                                 f"{tail(logs)}")
        for name, port in list(pending.items()):
            if port_open(port):
                opened.add(name)
                del pending[name]
        for name, mark in (optional or {}).items():
            if name in pending and any(mark in _read(p) for p in logs):
                del pending[name]
        if not pending:
            return opened
        if time.monotonic() >= deadline:
            waiting = ", ".join(f"{n} port {p}" for n, p in pending.items())
            raise Bmv2StartError(f"{what}: {waiting} not open after {timeout:.0f} s:\n"
                                 f"{tail(logs)}")
        time.sleep(0.05)


def _read(path: str) -> str:
    try:
        return Path(path).read_text(errors="replace")
    except OSError:
        return ""


__all__ = ["Bmv2StartError", "NO_THRIFT_MARK", "SWITCH_EXE", "SWITCH_MISSING",
           "default_build_dir", "free_port", "port_open", "switch_command", "wait_listening"]
