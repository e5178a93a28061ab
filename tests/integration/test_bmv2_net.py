"""BMv2 (simple_switch_grpc + p4c) as a Mininet node, driven through the one
controller API. Runs where BMv2 is installed (the Vagrant VM) and as root."""

from __future__ import annotations

import os
import re
import shutil
import textwrap
from pathlib import Path
from typing import Any

import pytest

from switches.controller.api import Controller
from testbed.net import P4_DIR, HostAddr, host_addr, running

from .helpers import host_result, host_run, host_start

BMV2_MISSING = "BMv2 not installed (simple_switch_grpc/p4c not on PATH)"


def _bmv2_missing() -> bool:
    return not (shutil.which("simple_switch_grpc") and shutil.which("simple_switch_CLI")
                and (shutil.which("p4c") or shutil.which("p4c-bm2-ss")))


pytestmark = [pytest.mark.root, pytest.mark.usefixtures("no_leftovers"),
              pytest.mark.skipif(_bmv2_missing(), reason=BMV2_MISSING)]


def bmv2_star(n: int, program: Path, tmp_path: Path, **switch_params: Any
              ) -> tuple[Any, Any, list[Any], list[HostAddr]]:
    """N hosts around one BMv2 switch, addressed as testbed.net.star_router does."""
    from mininet.link import Link
    from mininet.net import Mininet

    from switches.bmv2.node import BMv2Switch
    from switches.node import P4Host

    addrs = [host_addr(i) for i in range(1, n + 1)]
    net = Mininet(controller=None, switch=BMv2Switch, host=P4Host, link=Link,
                  autoSetMacs=False, build=False)
    sw = net.addSwitch("s1", program=str(program), log_dir=str(tmp_path / "logs"),
                       build_dir=str(tmp_path / "build"), **switch_params)
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


def install_routes(ctl: Controller, addrs: list[HostAddr]) -> None:
    for a in addrs:
        ctl.table_add("MyIngress.ipv4_lpm", {"hdr.ipv4.dstAddr": (a.ip, 32)},
                      "MyIngress.set_nhop", {"dmac": a.mac, "port": a.port})
        ctl.table_add("MyIngress.port_smac", {"standard_metadata.egress_spec": a.port},
                      "MyIngress.set_smac", {"smac": a.gateway_mac})


def test_l3_router_routes_with_entries_from_p4runtime(tmp_path: Path) -> None:
    net, sw, (h1, h2), (a1, a2) = bmv2_star(2, P4_DIR / "l3_router.p4", tmp_path, pcap=True)
    with running(net):
        pid = sw.pid_of_daemon
        assert pid is not None
        # The pipeline is in, but no routes: the router drops everything.
        assert " 100% packet loss" in h1.cmd(f"ping -c 1 -W 1 {a2.ip}")
        ctl = sw.controller()
        install_routes(ctl, [a1, a2])
        ping = h1.cmd(f"ping -c 3 -i 0.2 -W 2 {a2.ip}")
        assert " 0% packet loss" in ping, ping
        assert "ttl=63" in ping, ping  # routed, not bridged
        sink = host_start(h2, "tcp-sink", 5001)
        try:
            sent = host_run(h1, "tcp-source", a2.ip, 5001, 1_000_000)
            got = host_result(sink)
        finally:
            sink.kill()
            sink.wait()
        assert got == {"bytes": 1_000_000, "sha256": sent["sha256"]}
        # Read back over P4Runtime, and seen by simple_switch_CLI too.
        entries = {e.match["hdr.ipv4.dstAddr"]: e for e in ctl.table_entries("ipv4_lpm")}
        assert set(entries) == {(0x0A000101, 32), (0x0A000201, 32)}
        assert entries[(0x0A000201, 32)].params == {"dmac": 0x000000000002, "port": 2}
        assert "0a000201/32" in sw.cmd_cli("table_dump MyIngress.ipv4_lpm")
    # Stopped and reaped; pcaps written for both ports.
    assert sw.proc is None and not os.path.exists(f"/proc/{pid}")
    pcaps = {p.name for p in (tmp_path / "logs").glob("*.pcap")}
    assert {"s1-eth1_in.pcap", "s1-eth2_out.pcap"} <= pcaps, pcaps


def test_cli_commands_and_register_fallback(tmp_path: Path) -> None:
    addrs = [host_addr(1), host_addr(2)]
    from testbed.net import router_commands

    net, sw, (h1, h2), (_a1, a2) = bmv2_star(2, P4_DIR / "l3_ecn.p4", tmp_path,
                                             cli_commands=router_commands(addrs))
    with running(net):
        ctl = sw.controller()
        assert ctl.register_read("qdepth_max", 2) == 0
        # Queue settings go through the CLI the controller carries.
        ctl.set_queue_depth(1000, port=2)
        ctl.set_queue_rate(200, port=2)
        sink = host_start(h2, "udp-sink", 6000, 1.0)
        try:
            host_run(h1, "udp-source", a2.ip, 6000, 300, 500, "0x02")
            got = host_result(sink)
        finally:
            sink.kill()
            sink.wait()
        assert got["received"] > 0, got
        # BMv2's P4Runtime has no registers: read through simple_switch_CLI.
        assert ctl.register_read("qdepth_max", 2) > 5
        ctl.register_write("qdepth_max", 2, 0)
        assert ctl.register_read("qdepth_max", 2) == 0


def test_p4c_error_stops_before_any_node(tmp_path: Path) -> None:
    from switches.bmv2.compile import P4cError

    bad = tmp_path / "broken.p4"
    bad.write_text(textwrap.dedent("""\
        #include <core.p4>
        #include <v1model.p4>
        control C(inout bit<8> x) {
            apply { x = y + 1; }
        }
        """))
    with pytest.raises(P4cError) as e:
        bmv2_star(2, bad, tmp_path)
    assert re.match(rf"{re.escape(str(bad.resolve()))}:4:\d+: error: ", str(e.value)), str(e.value)


def test_failing_cli_command_fails_start_naming_it(tmp_path: Path) -> None:
    from switches.bmv2.launch import Bmv2StartError

    net, sw, _hosts, _addrs = bmv2_star(
        2, P4_DIR / "l3_router.p4", tmp_path,
        cli_commands=["table_add MyIngress.no_such_table NoAction 1 =>"])
    with pytest.raises(Bmv2StartError, match="no_such_table"):
        with running(net):
            pass
    assert sw.proc is None


STF_FILES = sorted((P4_DIR / "tests").glob("*.stf"))


@pytest.mark.parametrize("stf", STF_FILES, ids=[s.name for s in STF_FILES])
def test_project_stf_passes_on_bmv2(tmp_path: Path, stf: Path) -> None:
    """The STF files the soft target passes (tests/stf/test_project_stf.py)."""
    from switches.bmv2.stf import run_stf_bmv2

    program = P4_DIR / (stf.name.split(".", 1)[0] + ".p4")
    result = run_stf_bmv2(program, stf, log_dir=str(tmp_path), build_dir=str(tmp_path / "b"))
    assert result.passed, "\n".join(result.mismatches)


def test_action_selector_stf_passes_on_bmv2(tmp_path: Path) -> None:
    """tests/stf/programs/ecmp_selector.stf, which the soft target passes
    (tests/stf/test_action_selector_stf.py): members, groups and the crc16
    selection through simple_switch_CLI's verbs."""
    from switches.bmv2.stf import run_stf_bmv2

    programs = Path(__file__).resolve().parents[1] / "stf" / "programs"
    result = run_stf_bmv2(programs / "ecmp_selector.p4", programs / "ecmp_selector.stf",
                          log_dir=str(tmp_path), build_dir=str(tmp_path / "b"))
    assert result.passed, "\n".join(result.mismatches)


def test_runner_quick_roce_basics_on_bmv2(tmp_path: Path) -> None:
    """`testbed run roce-basics --quick --target bmv2`: the port rate becomes
    BMv2's set_queue_rate (recorded), the data arrives intact, and the queue
    watermark comes from the P4 register."""
    from testbed.runner import RunOptions, run

    summary = run("roce-basics", RunOptions(quick=True, target="bmv2", out=tmp_path / "run",
                                            echo=lambda _line: None))
    assert summary["ok"] and summary["target"] == "bmv2"
    rate = summary["switch_config"]["port_rate"]
    assert rate["via"] == "set_queue_rate" and rate["pps"] == 462
    assert summary["single.bytes_ok"] and summary["pair.bytes_ok"] and summary["loss.bytes_ok"]
    assert summary["pair.max_enq_qdepth_pkts"] > 0
