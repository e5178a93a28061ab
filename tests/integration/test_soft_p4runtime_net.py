"""The soft switch with its P4Runtime server: the daemon's ``--grpc-port``
(no root needed), and the Mininet node's ``grpc_port`` with routes, queue
settings and registers through the one controller API and real traffic."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from testbed.net import P4_DIR, REPO_ROOT, HostAddr, host_addr, running

from .helpers import host_result, host_run, host_start


def _daemon_has_grpc() -> bool:
    from switches.soft.daemon import build_arg_parser

    return any("--grpc-port" in a.option_strings for a in build_arg_parser()._actions)


pytestmark = [
    pytest.mark.skipif(not _daemon_has_grpc(), reason="the soft daemon has no --grpc-port"),
]
pytest.importorskip("p4.v1.p4runtime_pb2", reason="needs the 'p4runtime' extra")


def run_daemon(*args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "switches.soft.daemon", *args],
                          capture_output=True, text=True, timeout=timeout, cwd=str(REPO_ROOT))


def test_daemon_serves_p4runtime_on_a_free_port(tmp_path: Path) -> None:
    from switches.controller.p4runtime import P4RuntimeController

    ready = tmp_path / "ready.json"
    proc = subprocess.Popen(
        [sys.executable, "-m", "switches.soft.daemon", "--program",
         str(P4_DIR / "l3_router.p4"), "--control-port", "0", "--grpc-port", "0",
         "--device-id", "5", "--ready-file", str(ready), "--log", str(tmp_path / "log")],
        cwd=str(REPO_ROOT))
    try:
        deadline = time.monotonic() + 60
        while not ready.exists():
            assert proc.poll() is None, (tmp_path / "log").read_text()
            assert time.monotonic() < deadline, "daemon not ready"
            time.sleep(0.05)
        info = json.loads(ready.read_text())
        assert info["grpc_port"] > 0 and info["grpc_port"] != info["control_port"]
        # the P4Info comes from the switch itself
        ctl = P4RuntimeController(f"127.0.0.1:{info['grpc_port']}", None, device_id=5)
        try:
            ctl.table_add("ipv4_lpm", {"hdr.ipv4.dstAddr": "10.0.1.1/32"}, "set_nhop",
                          {"dmac": "00:00:00:00:01:01", "port": 1})
            assert [e.params for e in ctl.table_entries("ipv4_lpm")] == [
                {"dmac": 0x0101, "port": 1}]
        finally:
            ctl.close()
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(30) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def test_daemon_rejects_grpc_with_another_backend_and_cpu_port_clash() -> None:
    prog = str(P4_DIR / "l3_router.p4")
    r = run_daemon("--program", prog, "--grpc-port", "0", "--backend", "pypy")
    assert r.returncode == 2 and "--grpc-port needs --backend python" in r.stderr + r.stdout
    r = run_daemon("--program", prog, "--grpc-port", "0", "--cpu-port", "1", "-i", "1@lo")
    assert r.returncode == 2 and "--cpu-port 1 is also" in r.stderr + r.stdout


def soft_star(program: Path, tmp_path: Path, **params: Any
              ) -> tuple[Any, Any, list[Any], list[HostAddr]]:
    from mininet.link import Link
    from mininet.net import Mininet

    from switches.node import P4Host
    from switches.soft.node import SoftP4Switch

    addrs = [host_addr(1), host_addr(2)]
    net = Mininet(controller=None, switch=SoftP4Switch, host=P4Host, link=Link,
                  autoSetMacs=False, build=False)
    sw = net.addSwitch("s1", program=str(program), log_dir=str(tmp_path), **params)
    hosts = []
    for a in addrs:
        h = net.addHost(a.name, ip=f"{a.ip}/24", mac=a.mac, defaultRoute=f"via {a.gateway_ip}")
        net.addLink(h, sw, port2=a.port)
        hosts.append(h)
    net.build()
    for h, a in zip(hosts, addrs, strict=True):
        h.cmd(f"ip neigh replace {a.gateway_ip} lladdr {a.gateway_mac} dev {h.defaultIntf()}"
              " nud permanent")
    return net, sw, hosts, addrs


@pytest.mark.root
@pytest.mark.usefixtures("no_leftovers")
def test_routes_queues_and_registers_over_p4runtime(tmp_path: Path) -> None:
    from switches.controller.p4runtime import P4RuntimeController

    net, sw, (h1, h2), (a1, a2) = soft_star(P4_DIR / "l3_ecn.p4", tmp_path, grpc_port=0,
                                            device_id=3)
    with running(net):
        assert sw.grpc_port and sw.grpc_port > 0  # the free port the daemon took
        ctl = sw.controller()
        assert isinstance(ctl, P4RuntimeController) and ctl.device_id == 3
        assert sw.controller() is ctl
        assert " 100% packet loss" in h1.cmd(f"ping -c 1 -W 1 {a2.ip}")
        for a in (a1, a2):
            ctl.table_add("ipv4_lpm", {"hdr.ipv4.dstAddr": (a.ip, 32)}, "set_nhop",
                          {"dmac": a.mac, "port": a.port})
            ctl.table_add("port_smac", {"standard_metadata.egress_spec": a.port}, "set_smac",
                          {"smac": a.gateway_mac})
        ping = h1.cmd(f"ping -c 3 -i 0.2 -W 2 {a2.ip}")
        assert " 0% packet loss" in ping and "ttl=63" in ping, ping
        sink = host_start(h2, "tcp-sink", 5001)
        try:
            sent = host_run(h1, "tcp-source", a2.ip, 5001, 1_000_000)
            got = host_result(sink)
        finally:
            sink.kill()
            sink.wait()
        assert got == {"bytes": 1_000_000, "sha256": sent["sha256"]}
        assert {e.params["port"] for e in ctl.table_entries("ipv4_lpm")} == {1, 2}
        # Queue settings through the control port the controller carries;
        # the queue watermark register read back over P4Runtime.
        ctl.register_write("qdepth_max", 2, 0)
        ctl.set_queue_depth(1000, port=2)
        ctl.set_queue_rate(200, port=2)
        sink = host_start(h2, "udp-sink", 6000, 1.0)
        try:
            host_run(h1, "udp-source", a2.ip, 6000, 300, 500, "0x02")
            burst = host_result(sink)
        finally:
            sink.kill()
            sink.wait()
        assert burst["received"] > 0, burst
        assert ctl.register_read("qdepth_max", 2) > 5
        assert len(ctl.register_read("qdepth_max")) == 512
        ctl.register_write("qdepth_max", 2, 0)
        assert ctl.register_read("qdepth_max", 2) == 0
        pid = sw.pid_of_daemon
    assert pid is not None and not os.path.exists(f"/proc/{pid}")


@pytest.mark.root
@pytest.mark.usefixtures("no_leftovers")
def test_without_grpc_port_the_controller_speaks_cli(tmp_path: Path) -> None:
    from switches.controller.cli import CliController

    net, sw, _hosts, (a1, _a2) = soft_star(P4_DIR / "l3_router.p4", tmp_path)
    with running(net):
        assert sw.grpc_port is None
        ctl = sw.controller()
        assert isinstance(ctl, CliController)
        ctl.table_add("ipv4_lpm", {"hdr.ipv4.dstAddr": (a1.ip, 32)}, "set_nhop",
                      {"dmac": a1.mac, "port": 1})
        assert len(ctl.table_entries("ipv4_lpm")) == 1


def test_daemon_without_the_p4runtime_extra_says_how_to_install(tmp_path: Path) -> None:
    # a grpc package that cannot be imported, ahead of the real one
    (tmp_path / "grpc").mkdir()
    (tmp_path / "grpc" / "__init__.py").write_text("raise ImportError('no grpc here')\n")
    env = dict(os.environ, PYTHONPATH=f"{tmp_path}{os.pathsep}{REPO_ROOT}")
    r = subprocess.run([sys.executable, "-m", "switches.soft.daemon", "--program",
                        str(P4_DIR / "l3_router.p4"), "--grpc-port", "0"],
                       capture_output=True, text=True, timeout=60, cwd=str(REPO_ROOT), env=env)
    assert r.returncode == 2, r.stderr
    assert "needs pip install -e '.[p4runtime]'" in r.stderr
