"""The ``testbed`` command line: compile, stf, doctor (no root needed), clean (root)."""

from __future__ import annotations

import json
import subprocess
import textwrap
import time
from pathlib import Path

import pytest
from click.testing import CliRunner

from testbed.cli import main as cli_main

REPO = Path(__file__).resolve().parents[2]
P4 = REPO / "switches" / "p4"


def test_compile_reports_file_line_col_and_exits_1(tmp_path: Path) -> None:
    bad = tmp_path / "bad.p4"
    bad.write_text(textwrap.dedent("""\
        #include <core.p4>
        #include <v1model.p4>
        control C(inout bit<8> x) {
            apply { x = undefined_name + 1; }
        }
        """))
    r = CliRunner().invoke(cli_main, ["compile", str(bad)])
    assert r.exit_code == 1
    assert f"{bad}:4:" in r.output, r.output


def test_compile_a_good_program_and_write_the_python(tmp_path: Path) -> None:
    out = tmp_path / "l3.py"
    r = CliRunner().invoke(cli_main, ["compile", str(P4 / "l3_router.p4"), "-o", str(out)])
    assert r.exit_code == 0, r.output
    assert "l3_router.p4: ok (2 tables" in r.output
    assert "def make_program" in out.read_text()


def test_compile_to_an_unwritable_path_is_one_line(tmp_path: Path) -> None:
    out = tmp_path / "no-such-dir" / "l3.py"
    r = CliRunner().invoke(cli_main, ["compile", str(P4 / "l3_router.p4"), "-o", str(out)])
    assert r.exit_code == 1
    assert r.output == f"error: cannot write {out}: No such file or directory\n"


def test_compile_missing_file_is_a_clear_error() -> None:
    r = CliRunner().invoke(cli_main, ["compile", "/nonexistent/x.p4"])
    assert r.exit_code == 2 and "does not exist" in r.output


def test_stf_pass_and_fail(tmp_path: Path) -> None:
    prog = P4 / "l3_router.p4"
    # Ethernet to 00:..:02 from 00:..:01, IPv4 10.0.1.1 -> 10.0.2.1, TTL 64, valid checksum.
    ipv4 = "000000000002000000000001" "0800" "45000014000100004000" "63e8" "0a0001010a000201"
    good = tmp_path / "good.stf"
    good.write_text(textwrap.dedent(f"""\
        add MyIngress.ipv4_lpm hdr.ipv4.dstAddr:0x0a000201/32 MyIngress.set_nhop(dmac:0x000000000002, port:2)
        packet 1 {ipv4}
        expect 2 000000000002000000000001080045000014000100003f0064e80a0001010a000201 $
        """))
    r = CliRunner().invoke(cli_main, ["stf", str(prog), str(good)])
    assert r.exit_code == 0, r.output
    bad = tmp_path / "bad.stf"
    bad.write_text(good.read_text().replace("expect 2", "expect 3"))
    r = CliRunner().invoke(cli_main, ["stf", str(prog), str(bad)])
    assert r.exit_code == 1, r.output
    assert "FAIL" in r.output
    r = CliRunner().invoke(cli_main, ["stf", "--json", str(prog), str(bad)])
    assert r.exit_code == 1
    json.loads(r.output)


def test_stf_syntax_error_exits_2_naming_file_and_line(tmp_path: Path) -> None:
    bad = tmp_path / "typo.stf"
    bad.write_text("packet 0 00\nexpct 1 00\n")
    r = CliRunner().invoke(cli_main, ["stf", str(P4 / "l3_router.p4"), str(bad)])
    assert r.exit_code == 2
    assert r.output.strip() == f"error: {bad}:2: unknown command 'expct'"


def test_doctor_json_lists_targets_and_providers() -> None:
    r = CliRunner().invoke(cli_main, ["doctor", "--json"])
    assert r.exit_code == 0
    d = json.loads(r.output)
    assert d["targets"]["soft"] is True
    assert set(d["providers"]) == {"udp", "rxe"}
    assert isinstance(d["root"], bool) and isinstance(d["mininet"], bool)


def _marked_process() -> subprocess.Popen[bytes]:
    """A stand-in for a simple_switch_grpc the BMv2 node started (it carries the mark)."""
    import os

    from switches.bmv2.launch import BMV2_NODE_ENV

    proc = subprocess.Popen(["sleep", "60"], env={**os.environ, BMV2_NODE_ENV: "s1"})
    # Popen returns once the exec has begun, before the kernel has set up the
    # new program's environment: /proc/<pid>/environ reads empty for a moment
    mark = f"{BMV2_NODE_ENV}=".encode()
    deadline = time.monotonic() + 5
    while mark not in Path(f"/proc/{proc.pid}/environ").read_bytes():
        assert time.monotonic() < deadline, "the marked process never showed its environment"
        time.sleep(0.01)
    return proc


def test_leftovers_list_bmv2_switches_started_by_the_node() -> None:
    from testbed.net import bmv2_switch_pids, leftovers

    unmarked = subprocess.Popen(["sleep", "60"])
    proc = _marked_process()
    try:
        assert proc.pid in bmv2_switch_pids() and unmarked.pid not in bmv2_switch_pids()
        assert any(f"process {proc.pid}: sleep 60" == x for x in leftovers())
    finally:
        for p in (proc, unmarked):
            p.kill()
            p.wait()
    assert proc.pid not in bmv2_switch_pids()


def test_an_unfaithful_run_fails_as_an_overloaded_machine_quoting_the_verdict() -> None:
    from .helpers import assert_faithful

    verdict = ("not faithful - failed: congestion_without_overload: phase single port 3: "
               "7 CE marks, queue up to 14 packets")
    with pytest.raises(AssertionError) as exc:
        assert_faithful({"fidelity_ok": False, "fidelity_verdict": verdict,
                         "single": {"goodput_fraction": 0.88}})
    assert "the machine was overloaded" in str(exc.value) and verdict in str(exc.value)
    assert_faithful({"fidelity_ok": True, "fidelity_verdict": "faithful"})
