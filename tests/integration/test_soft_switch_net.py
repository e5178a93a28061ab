"""The soft switch as a Mininet node forwarding real traffic."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from switches.soft.pcap import read_pcap
from testbed.net import P4_DIR, REPO_ROOT, leftovers, router_commands, running, star_router

from .helpers import as_foreground_job, host_result, host_run, host_start, wait_for

pytestmark = [pytest.mark.root, pytest.mark.usefixtures("no_leftovers")]


def test_l3_router_ping_and_tcp_transfer(tmp_path: Path) -> None:
    net, sw, (h1, h2), (a1, a2) = star_router(2, P4_DIR / "l3_router.p4", log_dir=tmp_path,
                                              pcap=True, install_routes=False)
    with running(net):
        # No routes yet: the router drops everything.
        assert " 100% packet loss" in h1.cmd(f"ping -c 1 -W 1 {a2.ip}")
        for line in router_commands([a1, a2]):
            assert "Entry has been added" in sw.cmd_cli(line)
        ping = h1.cmd(f"ping -c 3 -i 0.2 -W 2 {a2.ip}")
        assert " 0% packet loss" in ping, ping
        # TTL went down by one: the switch routed rather than bridged.
        assert "ttl=63" in ping, ping
        sink = host_start(h2, "tcp-sink", 5001)
        try:
            sent = host_run(h1, "tcp-source", a2.ip, 5001, 2_000_000)
            got = host_result(sink)
        finally:
            sink.kill()
            sink.wait()
        assert got == {"bytes": 2_000_000, "sha256": sent["sha256"]}
        # The entries went in through the control server: they are there to dump.
        dump = sw.cmd_cli("table_dump MyIngress.ipv4_lpm")
        for a in (a1, a2):
            assert a.mac.replace(":", "") in dump
        assert "0a000201/32" in dump
        stats = sw.stats()
        assert stats["ports"]["2"]["tx_frames"] > 1000
        assert stats["lag_us"]["samples"] > 0 and stats["lag_us"]["max"] >= stats["lag_us"]["mean"]
    # pcaps are complete once the switch has stopped: what h1 sent and what went to h2.
    into = read_pcap(tmp_path / "s1-eth1_in.pcap")
    out = read_pcap(tmp_path / "s1-eth2_out.pcap")
    # (>=: the stats were read a moment before the switch stopped)
    assert len(into) >= stats["ports"]["1"]["rx_frames"] > 1000
    assert len(out) >= stats["ports"]["2"]["tx_frames"]
    # Routed: destination MAC is h2's, source MAC the switch port's, TTL one less.
    first_ip_out = next(f for _t, f in out if f[12:14] == b"\x08\x00")
    assert first_ip_out[0:6].hex(":") == a2.mac and first_ip_out[6:12].hex(":") == a2.gateway_mac


def _udp_burst(h1, h2, dst_ip: str, count: int) -> dict:
    sink = host_start(h2, "udp-sink", 6000, 1.0)
    try:
        host_run(h1, "udp-source", dst_ip, 6000, count, 1000, "0x02")
        return host_result(sink)
    finally:
        sink.kill()
        sink.wait()


def test_ecn_marking_under_congestion_only(tmp_path: Path) -> None:
    net, sw, (h1, h2), (_a1, a2) = star_router(2, P4_DIR / "l3_ecn.p4", log_dir=tmp_path)
    with running(net):
        calm = _udp_burst(h1, h2, a2.ip, 300)
        assert calm["received"] >= 250, calm
        assert calm["ecn"]["3"] == 0, f"marked without congestion: {calm}"
        assert calm["ecn"]["2"] == calm["received"]
        # Egress port 2 now drains 300 packets/s, far below the offered burst.
        sw.cmd_cli("set_queue_rate 300 2")
        congested = _udp_burst(h1, h2, a2.ip, 400)
        assert congested["received"] > 0, congested
        assert congested["ecn"]["3"] > 0, f"no CE under congestion: {congested}"
        assert congested["ecn"]["3"] + congested["ecn"]["2"] == congested["received"]


def test_queue_rate_paces_the_egress_port(tmp_path: Path) -> None:
    net, sw, (h1, h2), (_a1, a2) = star_router(2, P4_DIR / "l3_router.p4", log_dir=tmp_path)
    with running(net):
        sw.cmd_cli("set_queue_depth 5000 2")
        sw.cmd_cli("set_queue_rate 2000 2")
        sink = host_start(h2, "udp-sink", 6000, 1.0)
        try:
            host_run(h1, "udp-source", a2.ip, 6000, 3000, 200, "0", 3000)
            got = host_result(sink)
        finally:
            sink.kill()
            sink.wait()
        assert got["received"] == 3000, got
        rate = (got["received"] - 1) / got["span_s"]
        assert 1900 < rate < 2100, f"{rate:.0f} packets/s instead of 2000"


def test_garbage_frames_do_not_break_forwarding(tmp_path: Path) -> None:
    net, sw, (h1, h2), (_a1, a2) = star_router(2, P4_DIR / "l3_router.p4", log_dir=tmp_path)
    with running(net):
        before = sw.stats()["ports"]["1"]["rx_frames"]
        sent = host_run(h1, "garbage", h1.defaultIntf().name, 4000, 7)
        # The kernel refuses frames shorter than an Ethernet header; the rest go out.
        assert sent["sent"] >= 3500, sent
        assert wait_for(lambda: sw.stats()["ports"]["1"]["rx_frames"] - before >= sent["sent"], 15)
        assert sw.proc is not None and sw.proc.poll() is None, "switch process died"
        stats = sw.stats()
        # The pipeline saw every frame, and none made per-packet code raise.
        assert stats["switch"]["rx"]["1"] >= sent["sent"]
        assert stats["switch"]["drops"].get("exception", 0) == 0, sw.log_path
        assert stats["rx_errors"] == 0, sw.log_path
        ping = h1.cmd(f"ping -c 2 -i 0.2 -W 2 {a2.ip}")
        assert " 0% packet loss" in ping, ping


def test_debug_log_level_traces_each_packet(tmp_path: Path) -> None:
    """SoftP4Switch(log_level="debug"): the switch's log has BMv2's -L debug
    lines per packet (runtime/trace.py)."""
    net, sw, (h1, _h2), (_a1, a2) = star_router(2, P4_DIR / "l3_router.p4", log_dir=tmp_path,
                                                log_level="debug")
    with running(net):
        ping = h1.cmd(f"ping -c 2 -i 0.2 -W 2 {a2.ip}")
        assert " 0% packet loss" in ping, ping
    text = Path(sw.log_path).read_text()
    for msg in ("Parser 'parser' entering state 'parse_ipv4'",
                "Table 'MyIngress.ipv4_lpm': hit with handle",
                "Egress port is 2", "Priority queue is 0",
                "Transmitting packet of size"):
        assert msg in text, msg


def test_failing_setup_command_fails_startup_naming_it(tmp_path: Path) -> None:
    from switches.soft.node import SoftSwitchStartError

    net, _sw, _hosts, _addrs = star_router(
        2, P4_DIR / "l3_router.p4", log_dir=tmp_path,
        extra_commands=["table_add MyIngress.no_such_table NoAction 1 =>"])
    with pytest.raises(SoftSwitchStartError) as exc:
        with running(net):
            pass
    msg = str(exc.value)
    assert "exited with code 5" in msg and "no_such_table" in msg, msg
    assert "s1-commands.txt:5" in msg, msg


def test_compile_error_fails_startup_with_location_and_log(tmp_path: Path) -> None:
    bad = tmp_path / "broken.p4"
    bad.write_text(textwrap.dedent("""\
        #include <core.p4>
        #include <v1model.p4>
        control C(inout bit<8> x) {
            apply { x = y + 1; }
        }
        """))
    from switches.soft.node import SoftSwitchStartError

    net, _sw, _hosts, _addrs = star_router(2, bad, log_dir=tmp_path / "logs", install_routes=False)
    with pytest.raises(SoftSwitchStartError) as exc:
        with running(net):
            pass
    msg = str(exc.value)
    assert re.search(r"broken\.p4:\d+:\d+:", msg), msg
    assert str(tmp_path / "logs" / "s1.log") in msg


def test_sigint_during_a_run_leaves_nothing(tmp_path: Path) -> None:
    script = tmp_path / "run.py"
    script.write_text(textwrap.dedent(f"""\
        import sys, time
        sys.path.insert(0, {str(REPO_ROOT)!r})
        from testbed.net import running, star_router
        net, sw, hosts, _ = star_router(2, {str(P4_DIR / "l3_router.p4")!r},
                                        log_dir={str(tmp_path)!r})
        with running(net):
            print("UP", sw.proc.pid, flush=True)
            time.sleep(60)
        """))
    err = tmp_path / "stderr.txt"
    before = set(leftovers())
    with open(err, "w") as errf:
        proc = subprocess.Popen([sys.executable, str(script)], stdout=subprocess.PIPE,
                                stderr=errf, text=True, cwd=str(REPO_ROOT),
                                preexec_fn=as_foreground_job)
    assert proc.stdout is not None
    try:
        line = proc.stdout.readline()
        if not line.startswith("UP"):
            proc.wait(timeout=30)
            pytest.fail(f"the network did not come up:\n{err.read_text()[-3000:]}")
        daemon_pid = int(line.split()[1])
        assert set(leftovers()) - before, "the network should be up"
        proc.send_signal(signal.SIGINT)
        proc.wait(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert not os.path.exists(f"/proc/{daemon_pid}")
    assert wait_for(lambda: not set(leftovers()) - before, 5), set(leftovers()) - before


def test_two_soft_switches_in_a_line_route_end_to_end(tmp_path: Path) -> None:
    """h1 - s1 - s2 - h2: two daemons, each with its own automatic control port."""
    from mininet.link import Link
    from mininet.net import Mininet

    from switches.node import P4Host
    from switches.soft.node import SoftP4Switch
    from testbed.net import host_addr

    a1, a2 = host_addr(1), host_addr(2)
    prog = str(P4_DIR / "l3_router.p4")
    net = Mininet(controller=None, switch=SoftP4Switch, host=P4Host, link=Link, build=False)
    s1 = net.addSwitch("s1", program=prog, log_dir=tmp_path, cli_commands=[
        f"table_add MyIngress.ipv4_lpm MyIngress.set_nhop {a1.ip}/32 => {a1.mac} 1",
        f"table_add MyIngress.ipv4_lpm MyIngress.set_nhop {a2.ip}/32 => 02:00:00:00:02:02 2",
    ])
    s2 = net.addSwitch("s2", program=prog, log_dir=tmp_path, cli_commands=[
        f"table_add MyIngress.ipv4_lpm MyIngress.set_nhop {a2.ip}/32 => {a2.mac} 1",
        f"table_add MyIngress.ipv4_lpm MyIngress.set_nhop {a1.ip}/32 => 02:00:00:00:01:02 2",
        f"table_add MyIngress.port_smac MyIngress.set_smac 1 => {a2.gateway_mac}",
    ])
    h1 = net.addHost("h1", ip=f"{a1.ip}/24", mac=a1.mac, defaultRoute=f"via {a1.gateway_ip}")
    h2 = net.addHost("h2", ip=f"{a2.ip}/24", mac=a2.mac, defaultRoute=f"via {a2.gateway_ip}")
    net.addLink(h1, s1, port2=1)
    net.addLink(s1, s2, port1=2, port2=2)
    net.addLink(h2, s2, port2=1)
    net.build()
    h1.cmd(f"ip neigh replace {a1.gateway_ip} lladdr {a1.gateway_mac} dev h1-eth0 nud permanent")
    h2.cmd(f"ip neigh replace {a2.gateway_ip} lladdr {a2.gateway_mac} dev h2-eth0 nud permanent")
    with running(net):
        assert s1.control_port != s2.control_port
        ping = h1.cmd(f"ping -c 2 -i 0.2 -W 2 {a2.ip}")
        assert " 0% packet loss" in ping and "ttl=62" in ping, ping
        assert s1.stats()["ports"]["2"]["tx_frames"] >= 2
        assert s2.stats()["ports"]["2"]["tx_frames"] >= 2


def test_link_delay_shows_in_the_round_trip(tmp_path: Path) -> None:
    """5 ms per link: a ping between two hosts crosses four links."""
    from testbed.runner import measure_base_rtt

    net, sw, (h1, h2), _ = star_router(2, P4_DIR / "l3_router.p4", log_dir=tmp_path,
                                       link_delay_us=5000)
    with running(net):
        rtt = measure_base_rtt(h1, h2)
        assert sw.stats()["switch"]["queues"]["1"]["delay_us"] == 10_000  # both links folded
    assert rtt["min_ms"] is not None, "no ping reply"
    assert 20.0 <= rtt["min_ms"] < 35.0, rtt


def test_forwarding_benchmark_measures_and_leaves_no_log_dir(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from testbed.bench import forwarding_run

    monkeypatch.setenv("TMPDIR", str(tmp_path))     # where its switch log would go
    import tempfile

    monkeypatch.setattr(tempfile, "tempdir", None)  # re-read TMPDIR
    r = forwarding_run(seconds=1.0, tool="python", warmup=0.2)
    assert r["packets"] > 0 and r["mbps"] > 0 and r["cpu_s_per_mpkt"]
    assert "log_dir" not in r
    assert list(tmp_path.iterdir()) == []
