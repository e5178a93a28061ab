"""BMv2Switch's Mininet plumbing end to end where BMv2 is not installed.

Stand-ins on a private PATH take BMv2's command lines and hand them to the
soft target, which speaks the same protocols: ``p4c`` writes the P4Info
(the soft target's ids are p4c's) and, as "bmv2 JSON", the device config the
soft P4Runtime server loads; ``simple_switch_grpc`` runs the soft switch
daemon with the Thrift port as its control port and the gRPC address as its
P4Runtime server; ``simple_switch_CLI`` sends stdin's lines to that control
port. So the node's real code runs: compile, ports, start-up wait, pipeline
push over P4Runtime, CLI batch, controller(), stop and reap. (On the VM the
same node runs the real BMv2: tests/integration/test_bmv2_net.py.)
"""

from __future__ import annotations

import os
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

from testbed.net import P4_DIR, REPO_ROOT, host_addr, router_commands, running


def _daemon_has_grpc() -> bool:
    from switches.soft.daemon import build_arg_parser

    return any("--grpc-port" in a.option_strings for a in build_arg_parser()._actions)


pytestmark = [
    pytest.mark.root, pytest.mark.usefixtures("no_leftovers"),
    pytest.mark.skipif(not _daemon_has_grpc(), reason="the soft daemon has no --grpc-port"),
]
pytest.importorskip("p4.v1.p4runtime_pb2", reason="needs the 'p4runtime' extra")

# The program the soft daemon starts with, as simple_switch_grpc --no-p4
# starts empty: it forwards nothing until the pipeline push.
EMPTY_P4 = """\
#include <core.p4>
#include <v1model.p4>
struct h_t {}
struct m_t {}
parser P(packet_in p, out h_t h, inout m_t m, inout standard_metadata_t s) {
    state start { transition accept; }
}
control V(inout h_t h, inout m_t m) { apply {} }
control I(inout h_t h, inout m_t m, inout standard_metadata_t s) {
    apply { mark_to_drop(s); }
}
control E(inout h_t h, inout m_t m, inout standard_metadata_t s) { apply {} }
control C(inout h_t h, inout m_t m) { apply {} }
control D(packet_out p, in h_t h) { apply {} }
V1Switch(P(), V(), I(), E(), C(), D()) main;
"""

P4C = """
import json, os, subprocess, sys
args = sys.argv[1:]
def opt(name, many=False):
    vals = [args[i + 1] for i, a in enumerate(args) if a == name]
    return vals if many else vals[0]
prog, out_dir, p4info = args[-1], opt("-o"), opt("--p4runtime-files")
incs = opt("-I", many=True)
stem = os.path.basename(prog).rsplit(".", 1)[0]
cmd = [PYTHON, "-m", "switches.soft.p4info", prog, "-o", p4info]
for d in incs:
    cmd += ["-I", d]
r = subprocess.run(cmd, capture_output=True, text=True, cwd=REPO)
if r.returncode:
    sys.stderr.write(r.stdout + r.stderr)
    sys.exit(1)
with open(os.path.join(out_dir, stem + ".json"), "w") as f:
    json.dump({"program": prog, "include_dirs": incs}, f)
"""

SWITCH = """
import os, sys
args = sys.argv[1:]
sep = args.index("--")
core, target = args[:sep], args[sep + 1:]
def opt(lst, name):
    return lst[lst.index(name) + 1] if name in lst else None
cmd = [PYTHON, "-m", "switches.soft.daemon", "--program", EMPTY,
       "--control-port", opt(core, "--thrift-port"),
       "--grpc-port", opt(target, "--grpc-server-addr").rsplit(":", 1)[1],
       "--device-id", opt(core, "--device-id"), "--log", opt(core, "--log-file")]
for i, a in enumerate(core):
    if a == "-i":
        cmd += ["-i", core[i + 1]]
    elif a.startswith("--pcap="):
        cmd += ["--pcap-dir", a.split("=", 1)[1]]
if "--cpu-port" in target:
    cmd += ["--cpu-port", opt(target, "--cpu-port")]
if "--priority-queues" in target:
    cmd += ["--priority-queues", opt(target, "--priority-queues")]
os.chdir(REPO)
os.environ["PYTHONPATH"] = REPO
os.execv(PYTHON, cmd)
"""

CLI = """
import sys
sys.path.insert(0, REPO)
from switches.soft.control.client import SwitchClient, SwitchError
args = sys.argv[1:]
client = SwitchClient(int(args[args.index("--thrift-port") + 1]))
print("Control utility for runtime P4 table manipulation")
for line in sys.stdin:
    sys.stdout.write("RuntimeCmd: ")
    try:
        print(client.execute(line.strip()))
    except SwitchError as e:
        print("Error:", e.message)
sys.stdout.write("RuntimeCmd: ")
"""


@pytest.fixture
def standin_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    bindir = tmp_path / "bin"
    bindir.mkdir()
    empty = tmp_path / "empty.p4"
    empty.write_text(EMPTY_P4)
    head = (f"#!{sys.executable}\nPYTHON = {sys.executable!r}\nREPO = {str(REPO_ROOT)!r}\n"
            f"EMPTY = {str(empty)!r}\n")
    for name, body in (("p4c", P4C), ("simple_switch_grpc", SWITCH),
                       ("simple_switch_CLI", CLI)):
        (bindir / name).write_text(head + textwrap.dedent(body))
        (bindir / name).chmod(0o755)
    monkeypatch.setenv("PATH", f"{bindir}{os.pathsep}{os.environ.get('PATH', '')}")
    return bindir


def standin_star(tmp_path: Path, **params: Any) -> tuple[Any, Any, list[Any], list[Any]]:
    from mininet.link import Link
    from mininet.net import Mininet

    from switches.node import P4Host
    from switches.targets import BMV2

    addrs = [host_addr(1), host_addr(2)]
    net = Mininet(controller=None, switch=BMV2.switch_class(), host=P4Host, link=Link,
                  autoSetMacs=False, build=False)
    sw = net.addSwitch("s1", program=str(P4_DIR / "l3_router.p4"),
                       log_dir=str(tmp_path / "logs"), build_dir=str(tmp_path / "build"),
                       **params)
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


def test_node_pushes_pipeline_and_routes(tmp_path: Path, standin_path: Path) -> None:
    net, sw, (h1, _h2), (a1, a2) = standin_star(tmp_path)
    with running(net):
        pid = sw.pid_of_daemon
        # Before any route the pushed router drops; the empty start program did too.
        assert " 100% packet loss" in h1.cmd(f"ping -c 1 -W 1 {a2.ip}")
        ctl = sw.controller()
        for a in (a1, a2):
            ctl.table_add("ipv4_lpm", {"hdr.ipv4.dstAddr": (a.ip, 32)}, "set_nhop",
                          {"dmac": a.mac, "port": a.port})
            ctl.table_add("port_smac", {"standard_metadata.egress_spec": a.port}, "set_smac",
                          {"smac": a.gateway_mac})
        ping = h1.cmd(f"ping -c 3 -i 0.2 -W 2 {a2.ip}")
        assert " 0% packet loss" in ping and "ttl=63" in ping, ping
        assert len(ctl.table_entries("ipv4_lpm")) == 2
        assert "0a000201/32" in sw.cmd_cli("table_dump MyIngress.ipv4_lpm")
    assert sw.proc is None and pid is not None and not os.path.exists(f"/proc/{pid}")


def test_cli_commands_apply_before_traffic(tmp_path: Path, standin_path: Path) -> None:
    net, sw, (h1, _h2), (a1, a2) = standin_star(tmp_path, cli_commands=router_commands(
        [host_addr(1), host_addr(2)]), pcap=True)
    with running(net):
        ping = h1.cmd(f"ping -c 2 -i 0.2 -W 2 {a2.ip}")
        assert " 0% packet loss" in ping, ping
        assert {e.params["port"] for e in sw.controller().table_entries("ipv4_lpm")} == {1, 2}
    assert (tmp_path / "logs" / "s1-eth1_in.pcap").is_file()


def test_failing_cli_command_stops_the_switch(tmp_path: Path, standin_path: Path) -> None:
    from switches.bmv2.launch import Bmv2StartError

    net, sw, _hosts, _addrs = standin_star(
        tmp_path, cli_commands=["table_add MyIngress.no_such_table NoAction 1 =>"])
    with pytest.raises(Bmv2StartError, match="no_such_table"):
        with running(net):
            pass
    assert sw.proc is None


STF_DIR = P4_DIR / "tests"


@pytest.mark.parametrize("name", ["l3_router.stf", "l3_ecn.stf"])
def test_stf_runner_passes_the_project_stf(tmp_path: Path, standin_path: Path,
                                           name: str) -> None:
    from switches.bmv2.stf import run_stf_bmv2

    program = P4_DIR / (name.split(".", 1)[0] + ".p4")
    result = run_stf_bmv2(program, STF_DIR / name, log_dir=str(tmp_path))
    assert result.passed, "\n".join(result.mismatches)
    assert result.packets == (STF_DIR / name).read_text().count("\npacket ")


def test_stf_runner_passes_the_action_selector_stf(tmp_path: Path, standin_path: Path) -> None:
    """BMv2's STF executor passes act_prof_*/table_indirect_* lines to
    simple_switch_CLI (here the stand-in) as written."""
    from switches.bmv2.stf import run_stf_bmv2

    programs = Path(__file__).resolve().parents[1] / "stf" / "programs"
    result = run_stf_bmv2(programs / "ecmp_selector.p4", programs / "ecmp_selector.stf",
                          log_dir=str(tmp_path))
    assert result.passed, "\n".join(result.mismatches)
    assert result.packets == 9


def test_stf_runner_reports_mismatches(tmp_path: Path, standin_path: Path) -> None:
    from switches.bmv2.stf import run_stf_bmv2

    text = (STF_DIR / "l3_router.stf").read_text()
    # the /24 route's packet expected on port 3 instead of 2; a bad action name
    first = text.index("expect 2 ")
    bad = tmp_path / "bad.stf"
    bad.write_text(text[:first] + "expect 3 " + text[first + len("expect 2 "):]
                   + "\nadd MyIngress.ipv4_lpm hdr.ipv4.dstAddr:0x0b000000/8 no_such()\n")
    result = run_stf_bmv2(P4_DIR / "l3_router.p4", bad, log_dir=str(tmp_path / "logs"))
    assert not result.passed
    text_m = "\n".join(result.mismatches)
    assert "port 2: expected 1 packet(s), got 2" in text_m, text_m
    assert "port 3: expected 2 packet(s), got 1" in text_m, text_m
    assert "no_such" in text_m, text_m


def test_runner_drives_the_bmv2_target(tmp_path: Path, standin_path: Path,
                                       monkeypatch: pytest.MonkeyPatch) -> None:
    """`testbed run roce-basics --target bmv2` through the runner's own code path:
    BMv2 node bring-up, configuration over the controller API (the port rate as
    BMv2's set_queue_rate), phases, the queue register read, teardown."""
    import json

    from testbed.net import bmv2_switch_pids
    from testbed.runner import RunOptions, run

    # compiled stand-in "bmv2 JSON" must not land in the real compile cache
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    seen_pids: list[list[int]] = []

    def echo(line: str) -> None:
        if "network up" in line:
            seen_pids.append(bmv2_switch_pids())

    out = tmp_path / "run"
    summary = run("roce-basics", RunOptions(
        quick=True, target="bmv2", out=out, echo=echo,
        overrides={"single_msgs": "6", "pair_msgs": "6", "loss_msgs": "6"}))
    assert summary["ok"] and summary["target"] == "bmv2"
    assert seen_pids and len(seen_pids[0]) == 1  # the node's simple_switch_grpc, marked
    rate = summary["switch_config"]["port_rate"]
    # 4 Mb/s of the run's 1082-byte frames
    assert rate["via"] == "set_queue_rate" and rate["pps"] == 462 and rate["packet_bytes"] == 1082
    applied = summary["switch_config"]["applied"]
    assert {"set_queue_depth", "table_set_default", "cli"} <= {a["via"] for a in applied}
    assert not any(a["via"] == "set_port_rate_bps" for a in applied)
    assert summary["single.bytes_ok"] and summary["loss.bytes_ok"]
    # the queue watermark comes from the P4 register (no soft statistics on BMv2)
    stats = json.loads((out / "phases" / "pair" / "switch_stats.json").read_text())
    assert stats["poller_samples"] == 0 and stats["after"] == {}
    assert summary["pair"]["max_enq_qdepth_pkts"] > 0
    assert json.loads((out / "summary.json").read_text())["switch_config"]["port_rate"] == rate
