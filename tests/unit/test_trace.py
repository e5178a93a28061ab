"""The per-packet debug trace (--log-level debug): parser states, tables with
hit/miss and action, egress port and queue, in the order of BMv2's -L debug
log (behavioral-model: src/bm_sim/parser.cpp, match_tables.cpp,
pipeline.cpp, deparser.cpp and targets/simple_switch/simple_switch.cpp
write the same messages). Off, the program has no trace calls."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from switches.soft.compiler import compile_program
from switches.soft.control.verbs import ControlPlane
from switches.soft.runtime.externs import csum16
from switches.soft.runtime.switch import SoftSwitch

ROOT = Path(__file__).resolve().parents[2]
ROUTER = ROOT / "switches" / "p4" / "l3_router.p4"
SELECTOR = ROOT / "tests" / "stf" / "programs" / "ecmp_selector.p4"


@pytest.fixture(autouse=True)
def _cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))


def ipv4(dst: str, ttl: int = 64) -> bytes:
    ip = bytearray(bytes.fromhex("45000020000100004011000000000000") + bytes(4))
    ip[8] = ttl
    ip[12:16] = bytes([10, 0, 3, 1])
    ip[16:20] = bytes(int(x) for x in dst.split("."))
    ip[10:12] = csum16(bytes(ip)).to_bytes(2, "big")
    return bytes(12) + b"\x08\x00" + bytes(ip) + bytes(12)


def traced(path: Path, caplog: pytest.LogCaptureFixture, *commands: str) -> SoftSwitch:
    log = logging.getLogger("test.trace")
    caplog.set_level(logging.DEBUG, logger="test.trace")
    sw = SoftSwitch(compile_program(path, trace=True), now_us=lambda: 1000, log=log, trace=True)
    for c in commands:
        ControlPlane(sw).execute(c)
    return sw


def lines(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name == "test.trace"]


def test_router_packet_in_bmv2_order(caplog: pytest.LogCaptureFixture) -> None:
    sw = traced(ROUTER, caplog,
                "table_add MyIngress.ipv4_lpm MyIngress.set_nhop 10.0.1.0/24 => 00:00:00:00:01:01 1")
    assert [p for p, _ in sw.process_sync(2, ipv4("10.0.1.7"))] == [1]
    got = lines(caplog)
    assert all(ln.startswith("[0.0] [cxt 0] ") for ln in got)
    msgs = [ln[len("[0.0] [cxt 0] "):] for ln in got]
    want = [
        "Processing packet received on port 2",
        "Parser 'parser': start",
        "Parser 'parser' entering state 'start'",
        "Parser 'parser' entering state 'parse_ethernet'",
        "Extracting header 'ethernet'",
        "Parser state 'parse_ethernet': key is 0800",
        "Parser 'parser' entering state 'parse_ipv4'",
        "Extracting header 'ipv4'",
        "Parser 'parser': end",
        "Pipeline 'ingress': start",
        "Applying table 'MyIngress.ipv4_lpm'",
        "Table 'MyIngress.ipv4_lpm': hit with handle 0",
        "Action entry is MyIngress.set_nhop - 101,1,",
        "Applying table 'MyIngress.port_smac'",
        "Table 'MyIngress.port_smac': miss",
        "Action entry is NoAction - ",
        "Pipeline 'ingress': end",
        "Egress port is 1",
        "Priority queue is 0",
        "Pipeline 'egress': start",
        "Pipeline 'egress': end",
        "Deparser 'deparser': start",
        "Deparsing header 'ethernet'",
        "Deparsing header 'ipv4'",
        "Deparser 'deparser': end",
        "Transmitting packet of size 46 out of port 1",
    ]
    # the router's own extra states (key lines of later states) may come in
    # between; what is listed must appear in this order
    it = iter(msgs)
    for w in want:
        assert any(m == w for m in it), f"missing or out of order: {w!r}\n" + "\n".join(msgs)


def test_drop_and_numbering(caplog: pytest.LogCaptureFixture) -> None:
    sw = traced(ROUTER, caplog)
    sw.process_sync(2, ipv4("10.9.9.9"))  # no route: the default drop
    sw.process_sync(2, ipv4("10.9.9.8"))
    got = lines(caplog)
    assert "[0.0] [cxt 0] Table 'MyIngress.ipv4_lpm': miss" in got
    assert "[0.0] [cxt 0] Dropping packet at the end of ingress" in got
    assert any(ln.startswith("[1.0] ") for ln in got)
    assert not any("Transmitting" in ln for ln in got)


def test_selector_member_shows_as_the_action(caplog: pytest.LogCaptureFixture) -> None:
    sw = traced(SELECTOR, caplog, "act_prof_create_member ecmp_sel send 3",
                "table_indirect_add ecmp 0xab => 0")
    sw.process_sync(0, bytes([0xAB, 1, 2, 3, 4, 0]))
    got = lines(caplog)
    assert "[0.0] [cxt 0] Action entry is FlowIngress.send - 3," in got


def test_off_means_no_trace_calls_in_the_code() -> None:
    plain = compile_program(ROUTER).SOURCE
    assert "_trace" not in plain
    assert "_trace(st" in compile_program(ROUTER, trace=True).SOURCE
    # without the code's calls the switch still logs the pipeline boundaries
    sw = SoftSwitch(compile_program(ROUTER), now_us=lambda: 1000)
    assert sw.tracer is None


@pytest.mark.parametrize("level", ["debug", "info"])
def test_daemon_log_level(level: str) -> None:
    from switches.soft.daemon import build_arg_parser, load_switch

    args = build_arg_parser().parse_args(["--program", str(ROUTER), "--log-level", level])
    sw = load_switch(args)
    assert (sw.tracer is not None) == (level == "debug")
    assert ("_trace(st" in sw.module.SOURCE) == (level == "debug")
