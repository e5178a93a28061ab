"""The BMv2 target without BMv2: p4c and simple_switch_grpc command lines, the
compile cache and p4c's errors, start-up waits and failures, the pipeline
push over P4Runtime, simple_switch_CLI batches, target selection and
``testbed doctor``. Stand-in executables on a private PATH play p4c,
simple_switch_grpc and simple_switch_CLI."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from switches.bmv2.compile import (
    P4C_MISSING,
    P4cError,
    ToolMissing,
    compile_bmv2,
    p4c_command,
    parse_p4c_output,
)
from switches.bmv2.launch import (
    Bmv2StartError,
    free_port,
    port_open,
    switch_command,
    wait_listening,
)
from switches.controller.api import ControllerError
from switches.process import launch, stop_process
from switches.targets import BMV2, SOFT, TargetUnavailable

ROOT = Path(__file__).resolve().parents[2]
L3_ROUTER = ROOT / "switches" / "p4" / "l3_router.p4"


def fake_tool(bindir: Path, name: str, body: str) -> Path:
    """An executable Python script ``name`` in ``bindir``."""
    bindir.mkdir(parents=True, exist_ok=True)
    path = bindir / name
    path.write_text(f"#!{sys.executable}\n" + textwrap.dedent(body))
    path.chmod(0o755)
    return path


# A p4c that writes the outputs its command line asks for and logs each run.
FAKE_P4C = """
import json, sys
args = sys.argv[1:]
log = __file__ + ".calls"
with open(log, "a") as f:
    f.write(json.dumps(args) + "\\n")
out_dir = args[args.index("-o") + 1]
p4info = args[args.index("--p4runtime-files") + 1]
prog = args[-1]
stem = prog.rsplit("/", 1)[-1].rsplit(".", 1)[0]
with open(f"{out_dir}/{stem}.json", "w") as f:
    json.dump({"program": prog}, f)
with open(p4info, "w") as f:
    f.write("pkg_info { arch: \\"v1model\\" }\\n")
"""

P4C_ERROR_OUTPUT = """\
/src/prog.p4(7): [--Wwarn=unused] warning: 'x' is unused
    bit<8> x;
           ^
/src/prog.p4(12): [--Werror=not-found] error: nosuch: declaration not found
        nosuch(standard_metadata);
        ^^^^^^
"""


@pytest.fixture
def fake_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An empty directory as the whole PATH."""
    bindir = tmp_path / "bin"
    bindir.mkdir()
    monkeypatch.setenv("PATH", str(bindir))
    return bindir


def write_program(tmp_path: Path) -> Path:
    inc = tmp_path / "inc"
    inc.mkdir(exist_ok=True)
    (inc / "defs.p4").write_text("const bit<8> K = 1;\n")
    prog = tmp_path / "prog.p4"
    prog.write_text('#include <core.p4>\n#include "inc/defs.p4"\ncontrol C() { apply {} }\n')
    return prog


# ---------------------------------------------------------------------------
# p4c


def test_p4c_driver_command_line() -> None:
    cmd = p4c_command("/usr/bin/p4c", "p4c", "/p/prog.p4", "/out", "/out/prog.json",
                      "/out/prog.p4info.txt", ["/inc"], {"DEBUG": "1", "FLAG": ""})
    assert cmd[0] == "/usr/bin/p4c"
    assert cmd[cmd.index("--target") + 1] == "bmv2"
    assert cmd[cmd.index("--arch") + 1] == "v1model"
    assert cmd[cmd.index("--p4runtime-files") + 1] == "/out/prog.p4info.txt"
    assert cmd[cmd.index("-o") + 1] == "/out"  # the driver takes a directory
    assert cmd[cmd.index("-I") + 1] == "/inc"
    assert "DEBUG=1" in cmd and "FLAG" in cmd
    assert cmd[-1] == "/p/prog.p4"


def test_p4c_bm2_ss_command_line_names_the_json() -> None:
    cmd = p4c_command("p4c-bm2-ss", "p4c-bm2-ss", "/p/prog.p4", "/out", "/out/prog.json",
                      "/out/prog.p4info.txt")
    assert "--target" not in cmd
    assert cmd[cmd.index("-o") + 1] == "/out/prog.json"
    assert cmd[cmd.index("--arch") + 1] == "v1model"


def test_missing_p4c_says_where_bmv2_runs(tmp_path: Path, fake_path: Path) -> None:
    with pytest.raises(ToolMissing) as e:
        compile_bmv2(write_program(tmp_path), tmp_path / "out")
    assert str(e.value) == P4C_MISSING
    assert "vagrant up" in str(e.value)


def test_compile_outputs_and_cache(tmp_path: Path, fake_path: Path) -> None:
    p4c = fake_tool(fake_path, "p4c", FAKE_P4C)
    calls = Path(str(p4c) + ".calls")
    prog = write_program(tmp_path)
    out = tmp_path / "out"
    json_path, p4info = compile_bmv2(prog, out, include_dirs=[tmp_path / "inc"])
    assert json_path == str(out / "prog.json") and p4info == str(out / "prog.p4info.txt")
    assert Path(json_path).is_file() and "v1model" in Path(p4info).read_text()
    assert len(calls.read_text().splitlines()) == 1
    # unchanged sources: no second compile
    assert compile_bmv2(prog, out, include_dirs=[tmp_path / "inc"]) == (json_path, p4info)
    assert len(calls.read_text().splitlines()) == 1
    # an included file changed: compiled again
    (tmp_path / "inc" / "defs.p4").write_text("const bit<8> K = 2;\n")
    compile_bmv2(prog, out, include_dirs=[tmp_path / "inc"])
    assert len(calls.read_text().splitlines()) == 2
    # other defines: compiled again; a deleted output: compiled again
    compile_bmv2(prog, out, include_dirs=[tmp_path / "inc"], defines={"X": "1"})
    assert len(calls.read_text().splitlines()) == 3
    Path(json_path).unlink()
    compile_bmv2(prog, out, include_dirs=[tmp_path / "inc"], defines={"X": "1"})
    assert len(calls.read_text().splitlines()) == 4


def test_p4c_errors_become_file_line_col(tmp_path: Path, fake_path: Path) -> None:
    fake_tool(fake_path, "p4c", f"""
        import sys
        sys.stderr.write({P4C_ERROR_OUTPUT!r})
        sys.exit(1)
    """)
    prog = write_program(tmp_path)
    with pytest.raises(P4cError) as e:
        compile_bmv2(prog, tmp_path / "out")
    err = e.value
    assert str(err).splitlines()[0] == \
        "/src/prog.p4:12:9: error: nosuch: declaration not found"
    assert err.returncode == 1
    assert "nosuch(standard_metadata);" in str(err)  # p4c's own output is kept
    # a failed compile is not cached: the next call runs p4c again
    fake_tool(fake_path, "p4c", FAKE_P4C)
    assert Path(compile_bmv2(prog, tmp_path / "out")[0]).is_file()


def test_p4c_success_without_outputs_is_an_error(tmp_path: Path, fake_path: Path) -> None:
    fake_tool(fake_path, "p4c", "print('nothing written')\n")
    with pytest.raises(P4cError, match="p4c wrote no"):
        compile_bmv2(write_program(tmp_path), tmp_path / "out")


def test_falls_back_to_p4c_bm2_ss(tmp_path: Path, fake_path: Path) -> None:
    fake_tool(fake_path, "p4c-bm2-ss", """
        import json, sys
        args = sys.argv[1:]
        assert "--target" not in args
        with open(args[args.index("-o") + 1], "w") as f:
            json.dump({}, f)
        with open(args[args.index("--p4runtime-files") + 1], "w") as f:
            f.write("")
    """)
    json_path, _ = compile_bmv2(write_program(tmp_path), tmp_path / "out")
    assert json_path.endswith("prog.json") and Path(json_path).is_file()


def test_parse_p4c_output_severities_and_columns() -> None:
    diags = parse_p4c_output(P4C_ERROR_OUTPUT)
    assert [(d.severity, d.line, d.col) for d in diags] == [("warning", 7, 12), ("error", 12, 9)]
    assert diags[0].message == "'x' is unused"
    assert str(diags[1]) == "/src/prog.p4:12:9: error: nosuch: declaration not found"
    # source lines with parentheses are not taken for positions
    assert parse_p4c_output("f(3);\nfoo(12): x\n") == []


# ---------------------------------------------------------------------------
# simple_switch_grpc command line


def test_switch_command_line() -> None:
    cmd = switch_command("/usr/bin/simple_switch_grpc", [(1, "s1-eth1"), (2, "s1-eth2")],
                         device_id=3, thrift_port=9091, grpc_port=50052,
                         log_file="/logs/s1.log", pcap_dir="/logs", cpu_port=255,
                         priority_queues=8)
    assert cmd[0] == "/usr/bin/simple_switch_grpc"
    sep = cmd.index("--")
    core, target = cmd[:sep], cmd[sep + 1:]
    assert core[core.index("--device-id") + 1] == "3"
    assert core[core.index("--thrift-port") + 1] == "9091"
    assert core[core.index("--log-file") + 1] == "/logs/s1.log"
    assert "--log-flush" in core and "--pcap=/logs" in core
    assert [core[i + 1] for i, a in enumerate(core) if a == "-i"] == ["1@s1-eth1", "2@s1-eth2"]
    assert "--no-p4" in core  # the program comes over P4Runtime
    # simple_switch_grpc's own options come after "--"
    assert target[target.index("--grpc-server-addr") + 1] == "127.0.0.1:50052"
    assert target[target.index("--cpu-port") + 1] == "255"
    assert target[target.index("--priority-queues") + 1] == "8"


def test_switch_command_defaults_and_checks() -> None:
    cmd = switch_command("ssg", [(1, "a")], device_id=0, thrift_port=1, grpc_port=2,
                         log_file="l")
    target = cmd[cmd.index("--") + 1:]
    assert target == ["--grpc-server-addr", "127.0.0.1:2"]
    assert not any(a.startswith("--pcap") for a in cmd)
    json_cmd = switch_command("ssg", [], device_id=0, thrift_port=1, grpc_port=2,
                              log_file="l", json_path="/p.json")
    assert "/p.json" in json_cmd and "--no-p4" not in json_cmd
    with pytest.raises(ValueError, match="cpu_port"):
        switch_command("ssg", [(5, "a")], device_id=0, thrift_port=1, grpc_port=2,
                       log_file="l", cpu_port=5)
    with pytest.raises(ValueError):
        switch_command("ssg", [], device_id=0, thrift_port=1, grpc_port=2, log_file="l",
                       priority_queues=0)


# ---------------------------------------------------------------------------
# start-up wait, failure, stop

LISTENER = """
import socket, sys, time
socks = []
for p in sys.argv[1:]:
    s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.bind(("127.0.0.1", int(p))); s.listen(); socks.append(s)
time.sleep(60)
"""


def test_wait_listening_returns_when_ports_open(tmp_path: Path) -> None:
    exe = fake_tool(tmp_path, "listener", LISTENER)
    ports = {"grpc": free_port(), "thrift": free_port()}
    proc = launch([str(exe), *map(str, ports.values())], tmp_path / "out")
    try:
        assert wait_listening(proc, ports, 20, "sw", [str(tmp_path / "out")]) == {"grpc", "thrift"}
    finally:
        assert stop_process(proc) is not None
    assert proc.poll() is not None and not port_open(ports["grpc"])


def test_process_dying_at_start_reports_its_log(tmp_path: Path) -> None:
    exe = fake_tool(tmp_path, "dies", """
        import sys
        print("Error: interface s1-eth9 does not exist")
        sys.exit(3)
    """)
    out = tmp_path / "s1.out"
    proc = launch([str(exe)], out)
    with pytest.raises(Bmv2StartError) as e:
        wait_listening(proc, {"grpc": free_port()}, 20, "s1: simple_switch_grpc", [str(out)])
    msg = str(e.value)
    assert "exited with code 3" in msg and "s1-eth9 does not exist" in msg and str(out) in msg


def test_timeout_names_the_closed_port(tmp_path: Path) -> None:
    exe = fake_tool(tmp_path, "silent", "import time\nprint('starting')\ntime.sleep(60)\n")
    out = tmp_path / "s1.out"
    proc = launch([str(exe)], out)
    port = free_port()
    try:
        with pytest.raises(Bmv2StartError) as e:
            wait_listening(proc, {"grpc": port}, 0.5, "s1", [str(out)])
        assert f"grpc port {port} not open" in str(e.value) and "starting" in str(e.value)
    finally:
        stop_process(proc)


def test_thrift_left_out_when_the_build_has_none(tmp_path: Path) -> None:
    grpc_port = free_port()
    exe = fake_tool(tmp_path, "nothrift", LISTENER.replace(
        "time.sleep(60)", "print('compiled without Thrift support', flush=True)\ntime.sleep(60)"))
    out = tmp_path / "s1.out"
    proc = launch([str(exe), str(grpc_port)], out)
    try:
        got = wait_listening(proc, {"grpc": grpc_port, "thrift": free_port()}, 20, "s1",
                             [str(out)], optional={"thrift": "without Thrift support"})
        assert got == {"grpc"}
    finally:
        stop_process(proc)


def test_stop_kills_a_process_ignoring_sigterm(tmp_path: Path) -> None:
    exe = fake_tool(tmp_path, "stubborn", """
        import signal, time
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        print("ready", flush=True)
        time.sleep(60)
    """)
    out = tmp_path / "out"
    proc = launch([str(exe)], out)
    deadline = time.monotonic() + 10
    while "ready" not in out.read_text() and time.monotonic() < deadline:
        time.sleep(0.05)
    t0 = time.monotonic()
    assert stop_process(proc, timeout=0.3) == -signal.SIGKILL
    assert time.monotonic() - t0 < 5


# ---------------------------------------------------------------------------
# simple_switch_CLI batches

FAKE_CLI = """
import sys
args = sys.argv[1:]
assert args[args.index("--thrift-port") + 1] == "9090"
print("Obtaining JSON from switch...\\nDone\\nControl utility for runtime P4 table manipulation")
for line in sys.stdin:
    sys.stdout.write("RuntimeCmd: ")
    if "bad" in line:
        print("Error: Invalid table name (bad)")
    else:
        print("Entry has been added with handle 0")
sys.stdout.write("RuntimeCmd: \\n")
"""


def test_cli_batch_replies_in_order(fake_path: Path) -> None:
    from switches.bmv2.control import run_cli_batch

    fake_tool(fake_path, "simple_switch_CLI", FAKE_CLI)
    replies = run_cli_batch(9090, ["table_add a b 1 => 2", "# comment", "", "table_add c d 3 => 4"])
    assert replies == ["Entry has been added with handle 0"] * 2


def test_cli_batch_names_the_failing_line(fake_path: Path) -> None:
    from switches.bmv2.control import run_cli_batch

    fake_tool(fake_path, "simple_switch_CLI", FAKE_CLI)
    with pytest.raises(ControllerError) as e:
        run_cli_batch(9090, ["table_add ok x 1 => 2", "table_add bad x 1 => 2"])
    assert str(e.value).startswith("table_add bad x 1 => 2: Error: Invalid table name")


def test_cli_missing(fake_path: Path) -> None:
    from switches.bmv2.control import CLI_MISSING, run_cli_batch

    with pytest.raises(ControllerError, match="simple_switch_CLI not found"):
        run_cli_batch(9090, ["show_tables"])
    assert "vagrant up" in CLI_MISSING


# ---------------------------------------------------------------------------
# P4Runtime pipeline push, against a recording P4Runtime server


def test_pipeline_push_sends_p4info_and_bmv2_json(tmp_path: Path) -> None:
    pytest.importorskip("p4.v1.p4runtime_pb2", reason="needs the 'p4runtime' extra")
    from concurrent import futures

    import grpc
    from p4.v1 import p4runtime_pb2 as pb
    from p4.v1 import p4runtime_pb2_grpc

    from switches.bmv2.control import load_p4c_p4info, push_pipeline
    from switches.soft.p4info import write_program_p4info

    got: dict[str, object] = {}

    class Recorder(p4runtime_pb2_grpc.P4RuntimeServicer):  # type: ignore[misc]
        def StreamChannel(self, requests, context):  # noqa: N802 - gRPC's name
            for req in requests:
                if req.WhichOneof("update") == "arbitration":
                    resp = pb.StreamMessageResponse()
                    resp.arbitration.CopyFrom(req.arbitration)
                    resp.arbitration.status.code = 0
                    yield resp

        def SetForwardingPipelineConfig(self, request, context):  # noqa: N802
            got["request"] = request
            return pb.SetForwardingPipelineConfigResponse()

        def Write(self, request, context):  # noqa: N802
            got["write"] = request
            return pb.WriteResponse()

    server = grpc.server(futures.ThreadPoolExecutor(max_workers=4))
    p4runtime_pb2_grpc.add_P4RuntimeServicer_to_server(Recorder(), server)
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    try:
        p4info_path = tmp_path / "l3_router.p4info.txt"
        p4info = write_program_p4info(L3_ROUTER, p4info_path)
        json_path = tmp_path / "l3_router.json"
        json_path.write_bytes(b'{"header_types": [], "program": "l3_router.p4"}')
        ctl = BMV2.p4runtime_controller(port, load_p4c_p4info(p4info_path), device_id=7)
        try:
            push_pipeline(ctl, p4info_path, json_path)
            req = got["request"]
            assert isinstance(req, pb.SetForwardingPipelineConfigRequest)
            assert req.device_id == 7 and req.election_id.low == 1
            assert req.action == pb.SetForwardingPipelineConfigRequest.VERIFY_AND_COMMIT
            assert req.config.p4_device_config == json_path.read_bytes()
            assert req.config.p4info == p4info
            # the controller now speaks that program: names resolve to its ids
            ctl.table_add("ipv4_lpm", {"hdr.ipv4.dstAddr": ("10.0.1.1", 32)}, "set_nhop",
                          {"dmac": "00:00:00:00:01:01", "port": 1})
            w = got["write"]
            te = w.updates[0].entity.table_entry  # type: ignore[attr-defined]
            table = next(t for t in p4info.tables if t.preamble.name == "MyIngress.ipv4_lpm")
            assert te.table_id == table.preamble.id and te.match[0].lpm.prefix_len == 32
        finally:
            ctl.close()
    finally:
        server.stop(0)


# ---------------------------------------------------------------------------
# target selection and doctor

FAKE_VERSION = """
import sys
print("{name} 1.15.0-abc" if "--version" in sys.argv else "usage")
"""


def install_fake_bmv2(bindir: Path) -> None:
    for name in ("simple_switch_grpc", "simple_switch_CLI", "p4c"):
        fake_tool(bindir, name, FAKE_VERSION.replace("{name}", name))


def test_switch_class_needs_every_bmv2_tool(fake_path: Path) -> None:
    from testbed.targets import available_targets

    with pytest.raises(TargetUnavailable) as e:
        BMV2.switch_class()
    assert "simple_switch_grpc" in str(e.value) and "vagrant up" in str(e.value)
    fake_tool(fake_path, "simple_switch_grpc", FAKE_VERSION.replace("{name}", "ssg"))
    fake_tool(fake_path, "p4c", FAKE_VERSION.replace("{name}", "p4c"))
    t = available_targets()["bmv2"]
    assert not t.available and t.reason.startswith("simple_switch_CLI not on PATH")


def test_switch_class_soft_and_bmv2(fake_path: Path) -> None:
    pytest.importorskip("mininet.node")
    from switches.bmv2.node import BMv2Switch
    from switches.soft.node import SoftP4Switch
    from testbed.targets import available_targets

    assert SOFT.switch_class() is SoftP4Switch
    install_fake_bmv2(fake_path)
    assert BMV2.switch_class() is BMv2Switch
    t = available_targets()["bmv2"]
    assert t.available and t.versions["p4c"] == "p4c 1.15.0-abc"
    assert t.versions["simple_switch_grpc"] == "simple_switch_grpc 1.15.0-abc"


def test_bmv2_switch_without_bmv2_fails_before_mininet(fake_path: Path) -> None:
    pytest.importorskip("mininet.node")
    from switches.bmv2.node import BMv2Switch

    with pytest.raises(ToolMissing, match="simple_switch_grpc not found"):
        BMv2Switch("s1", program=str(L3_ROUTER))
    with pytest.raises(ValueError, match="program"):
        BMv2Switch("s1")


def test_doctor_reports_bmv2_with_versions(fake_path: Path) -> None:
    from click.testing import CliRunner

    from testbed.cli import main

    r = CliRunner().invoke(main, ["doctor"])
    assert r.exit_code == 0, r.output
    line = next(ln for ln in r.output.splitlines() if ln.startswith("target bmv2"))
    assert " no " in line and "not on PATH" in line
    assert any(ln.startswith("provider udp") and ln.rstrip().endswith("yes")
               for ln in r.output.splitlines())
    install_fake_bmv2(fake_path)
    r = CliRunner().invoke(main, ["doctor"])
    assert r.exit_code == 0, r.output
    lines = r.output.splitlines()
    i = next(i for i, ln in enumerate(lines) if ln.startswith("target bmv2"))
    assert lines[i].rstrip().endswith("yes")
    assert "p4c: p4c 1.15.0-abc" in "\n".join(lines[i + 1:i + 4])
    r = CliRunner().invoke(main, ["doctor", "--json"])
    import json

    d = json.loads(r.output)
    assert d["targets"] == {"soft": True, "bmv2": True}
    assert d["targets_detail"]["bmv2"]["versions"]["simple_switch_grpc"].endswith("1.15.0-abc")
    assert isinstance(d["p4runtime"], bool) and isinstance(d["p4runtime_shell"], bool)
    assert set(d["providers_detail"]) == {"udp", "rxe"}


def fake_rxe_sysfs(root: Path, ipv4_gid: bool = True) -> Path:
    """/sys/class/infiniband with one rxe device (rxe0 on eth0) and, if asked,
    a RoCE v2 GID for 10.0.2.15."""
    dev = root / "rxe0"
    (dev / "ports" / "1" / "gids").mkdir(parents=True)
    (dev / "ports" / "1" / "gid_attrs" / "types").mkdir(parents=True)
    (dev / "ports" / "1" / "gid_attrs" / "ndevs").mkdir(parents=True)
    (dev / "parent").write_text("eth0\n")
    if ipv4_gid:
        (dev / "ports" / "1" / "gids" / "1").write_text(
            "0000:0000:0000:0000:0000:ffff:0a00:020f\n")
        (dev / "ports" / "1" / "gid_attrs" / "types" / "1").write_text("RoCE v2\n")
        (dev / "ports" / "1" / "gid_attrs" / "ndevs" / "1").write_text("eth0\n")
    # a hardware RDMA device (no parent attribute) is not rxe
    (root / "mlx5_0").mkdir()
    return root


def test_rxe_provider_needs_a_device_and_pyverbs(tmp_path: Path) -> None:
    import importlib.util

    from testbed.targets import available_providers, rxe_devices

    empty = tmp_path / "none"
    rxe = available_providers(str(empty))["rxe"]
    assert not rxe.available and "rdma link add" in rxe.reason
    assert available_providers(str(empty))["udp"].available
    root = fake_rxe_sysfs(tmp_path / "ib")
    assert rxe_devices(str(root)) == ["rxe0"]
    rxe = available_providers(str(root))["rxe"]
    assert rxe.versions["devices"] == "rxe0"
    if importlib.util.find_spec("pyverbs") is None:
        assert not rxe.available and "pyverbs" in rxe.reason
    else:
        assert rxe.available, rxe.reason


def test_free_port_is_bindable() -> None:
    port = free_port()
    with socket.socket() as s:
        s.bind(("127.0.0.1", port))
    assert not port_open(port)


def test_launched_process_gets_its_own_process_group(tmp_path: Path) -> None:
    exe = fake_tool(tmp_path, "sleeper", "import time\ntime.sleep(60)\n")
    proc = launch([str(exe)], tmp_path / "out")
    try:
        assert os.getpgid(proc.pid) == proc.pid != os.getpgrp()
    finally:
        stop_process(proc)
    assert subprocess.run(["kill", "-0", str(proc.pid)], capture_output=True).returncode != 0


# ---------------------------------------------------------------------------
# STF on BMv2: what the runner sends to the controller


def test_stf_on_bmv2_sends_what_the_engine_resolved(tmp_path: Path) -> None:
    pytest.importorskip("p4.v1.p4runtime_pb2", reason="needs the 'p4runtime' extra")
    from switches.bmv2.stf import Bmv2StfTarget
    from switches.soft.p4info import p4info_for_program
    from switches.stf import parse_stf, run_commands
    from switches.stf.syntax import stf_ports

    text = ("packet 0 00\n# expect 9 00\nexpect 3 00 $\n"
            "add MyIngress.ipv4_lpm hdr.ipv4.dstAddr:0x0a0002ff/24 "
            "MyIngress.set_nhop(dmac:0x0000000002aa, port:2)\n"
            "add port_smac egress_spec:1 set_smac(smac:0x020000000001)\n"
            "setdefault ipv4_lpm drop()\n"
            "add ipv4_lpm hdr.ipv4.dstAddr:0x0b000000/8 no_such()\n")
    commands = parse_stf(text)
    assert stf_ports(commands) == [0, 3]

    class Recorder:
        p4info = p4info_for_program(L3_ROUTER)
        cli = None

        def __init__(self) -> None:
            self.calls: list[tuple[object, ...]] = []

        def table_add(self, *args: object, **kw: object) -> None:
            self.calls.append(("add", *args, kw.get("priority")))

        def table_set_default(self, *args: object) -> None:
            self.calls.append(("default", *args))

    class Wire:
        def __init__(self) -> None:
            self.events: list[str] = []

        def send(self, port: int, frame: bytes) -> None:
            self.events.append(f"send {port}")

        def settle(self) -> None:
            self.events.append("settle")

        def snapshot(self) -> dict[int, list[bytes]]:
            return {3: [b"\x00"]}

    rec, wire = Recorder(), Wire()
    result = run_commands(commands, Bmv2StfTarget(rec, wire))  # type: ignore[arg-type]
    assert rec.calls == [
        ("add", "MyIngress.ipv4_lpm", {"hdr.ipv4.dstAddr": (0x0A000200, 24)},
         "MyIngress.set_nhop", {"dmac": 0x2AA, "port": 2}, None),
        ("add", "MyIngress.port_smac", {"standard_metadata.egress_spec": 1},
         "MyIngress.set_smac", {"smac": 0x020000000001}, None),
        ("default", "MyIngress.ipv4_lpm", "MyIngress.drop", {}),
    ]
    # the packet settles before the first control command, and once at the end
    assert wire.events == ["send 0", "settle", "settle"]
    assert result.packets == 1
    assert len(result.mismatches) == 1
    assert result.mismatches[0].startswith("line 7: ") and "no action named 'no_such'" in \
        result.mismatches[0]


def test_p4info_from_a_newer_p4c_loads(tmp_path: Path) -> None:
    pytest.importorskip("p4.config.v1.p4info_pb2", reason="needs the 'p4runtime' extra")
    from switches.bmv2.control import load_p4c_p4info

    path = tmp_path / "prog.p4info.txt"
    path.write_text('pkg_info {\n  arch: "v1model"\n  a_field_from_the_future: 7\n}\n'
                    'tables {\n  preamble {\n    id: 33554433\n    name: "MyIngress.t"\n'
                    '    alias: "t"\n  }\n  size: 1024\n}\n')
    p4i = load_p4c_p4info(path)
    assert p4i.pkg_info.arch == "v1model"
    assert [t.preamble.name for t in p4i.tables] == ["MyIngress.t"]
