"""The soft switch node with its P4Runtime server (``grpc_port``): routes,
queue settings and registers through the one controller API, real traffic
through Mininet."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from testbed.net import P4_DIR, HostAddr, host_addr, running

from .helpers import host_result, host_run, host_start


def _daemon_has_grpc() -> bool:
    from switches.soft.daemon import build_arg_parser

    return any("--grpc-port" in a.option_strings for a in build_arg_parser()._actions)


pytestmark = [
    pytest.mark.root, pytest.mark.usefixtures("no_leftovers"),
    pytest.mark.skipif(not _daemon_has_grpc(), reason="the soft daemon has no --grpc-port"),
]
pytest.importorskip("p4.v1.p4runtime_pb2", reason="needs the 'p4runtime' extra")


def soft_star(program: Path, tmp_path: Path, **params: Any
              ) -> tuple[Any, Any, list[Any], list[HostAddr]]:
    from mininet.link import Link
    from mininet.net import Mininet

    from switches.soft.node import P4Host, SoftP4Switch

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


def test_routes_queues_and_registers_over_p4runtime(tmp_path: Path) -> None:
    from testbed.controller import P4RuntimeController

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


def test_without_grpc_port_the_controller_speaks_cli(tmp_path: Path) -> None:
    from testbed.controller import CliController

    net, sw, _hosts, (a1, _a2) = soft_star(P4_DIR / "l3_router.p4", tmp_path)
    with running(net):
        assert sw.grpc_port is None
        ctl = sw.controller()
        assert isinstance(ctl, CliController)
        ctl.table_add("ipv4_lpm", {"hdr.ipv4.dstAddr": (a1.ip, 32)}, "set_nhop",
                      {"dmac": a1.mac, "port": 1})
        assert len(ctl.table_entries("ipv4_lpm")) == 1
