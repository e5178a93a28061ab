"""STF on the soft target: command translation, per-port comparison,
wildcards, diffs, p4c's meaning of bare ``expect`` and ``no_packet``,
syntax errors."""

from __future__ import annotations

import json

import pytest
import test_runtime_support as prog
from test_runtime_support import ipv4_frame, l2_frame

from switches.soft import stf
from switches.soft.stf import run_stf_text
from switches.stf.syntax import StfSyntaxError, parse_lpm, parse_stf, parse_ternary
from switches.stf.verdict import Mask, compare_packet

DMAC = "0a0b0c0d0e0f"


def hexs(b: bytes) -> str:
    return b.hex()


def l2(dst: str = DMAC, src_last: int = 0) -> bytes:
    return l2_frame(int(dst, 16), src_mac=0x020000000000 | src_last)


def test_compare_packet_rules() -> None:
    got = bytes.fromhex("aabbccdd")
    assert compare_packet("AABBCC", got) is None  # longer output is fine
    assert compare_packet("aa bb cc dd $", got) is None
    assert compare_packet("a*bb**dd", got) is None
    d = compare_packet("AABBCC $", got)
    assert d is not None and "too long" in d
    d = compare_packet("AABBCCDDEE", got)
    assert d is not None and "too short" in d
    d = compare_packet("AABBCEDD", got)
    assert d is not None and "first at byte 2" in d
    lines = d.splitlines()
    assert lines[1].strip() == "expected: AA BB CE DD"
    assert lines[2].strip() == "got:      AA BB CC DD"
    assert lines[3].strip() == "^^"


def test_exact_table_add_and_expect() -> None:
    text = f"""
# forward by destination MAC
add MyIngress.dmac hdr.ethernet.dstAddr:0x{DMAC} MyIngress.forward(port:3)
packet 1 {hexs(l2())}
expect 3 {hexs(l2())[:24]} ****
"""
    res = run_stf_text(prog, text)
    assert res.passed, res.mismatches
    assert res.packets == 1


def test_suffix_names_and_lpm_without_prefix_length() -> None:
    frame = ipv4_frame("10.0.1.9")
    text = f"""
add ipv4_lpm dstAddr:0x0a0001** ipv4_forward(dstAddr:0x0000000000aa, port:2)
packet 1 {hexs(frame)}
expect 2 0000000000aa ********** ****
"""
    res = run_stf_text(prog, text)
    assert res.passed, res.mismatches


def test_ternary_priority_higher_stf_number_wins() -> None:
    text = f"""
add dmac dstAddr:0x{DMAC} forward(port:3)
add acl 1 etherType:0x**** set_tag(tag:1)
add acl 100 etherType:0x88b5 drop()
packet 1 {hexs(l2())}
"""
    res = run_stf_text(prog, text)
    assert res.passed, res.mismatches  # dropped: no output and no expect
    text2 = text.replace("add acl 100", "add acl 0")
    res2 = run_stf_text(prog, text2)
    assert not res2.passed
    assert any("port 3" in m and "unexpected" in m for m in res2.mismatches)


def test_count_mismatch_and_missing_packets_reported() -> None:
    text = f"""
add dmac dstAddr:0x{DMAC} forward(port:3)
packet 1 {hexs(l2())}
expect 3 {hexs(l2())}
expect 3 {hexs(l2())}
expect 4 00
"""
    res = run_stf_text(prog, text)
    assert not res.passed
    joined = "\n".join(res.mismatches)
    assert "port 3: expected packet #1 not received" in joined
    assert "port 3: expected 2 packet(s), got 1" in joined
    assert "port 4: expected 1 packet(s), got 0" in joined


def test_expect_without_data_is_one_packet_of_any_content() -> None:
    # p4c (tools/stf/stf_parser.py, backends/bmv2/bmv2stf.py): a bare expect
    # adds one expected packet whose content does not matter
    head = f"add dmac dstAddr:0x{DMAC} forward(port:3)\n"
    two = head + f"packet 1 {hexs(l2())}\npacket 1 {hexs(l2(src_last=7))}\n"
    assert run_stf_text(prog, two + "expect 3\nexpect 3\n").passed
    res = run_stf_text(prog, two + "expect 3\n")
    assert not res.passed
    assert "port 3: unexpected packet #1" in "\n".join(res.mismatches)
    res = run_stf_text(prog, head + "expect 3\n")  # nothing arrives: fails
    assert not res.passed
    assert res.mismatches == ["port 3: expected packet #0 not received: (any content)",
                              "port 3: expected 1 packet(s), got 0"]


def test_no_packet_checks_the_output_so_far() -> None:
    head = f"add dmac dstAddr:0x{DMAC} forward(port:3)\n"
    sent = f"packet 1 {hexs(l2())}\n"
    res = run_stf_text(prog, head + sent + "no_packet\n")
    assert not res.passed
    assert res.mismatches[0] == ("line 3: no_packet: port 3 produced 1 packet(s) more than "
                                 "expected so far")
    assert run_stf_text(prog, head + sent + f"expect 3 {DMAC}\nno_packet\n").passed
    dropped = "add acl 100 etherType:0x88b5 drop()\n" + sent
    assert run_stf_text(prog, head + dropped + "no_packet\n").passed


def test_content_mismatch_has_readable_diff() -> None:
    text = f"""
add dmac dstAddr:0x{DMAC} forward(port:3)
packet 1 {hexs(l2())}
expect 3 {DMAC} 020000000001
"""
    res = run_stf_text(prog, text)
    assert not res.passed
    assert res.mismatches[0].startswith("port 3: packet #0 differs")
    assert "first at byte 11" in res.mismatches[0]


def test_setdefault_and_passthrough_multicast() -> None:
    text = f"""
setdefault dmac set_mcast(grp:1)
mc_mgrp_create 1
mc_node_create 0 2 3
mc_node_associate 1 0
packet 0 {hexs(l2())}
expect 2 {DMAC}
expect 3 {DMAC}
"""
    res = run_stf_text(prog, text)
    assert res.passed, res.mismatches


def test_mirroring_and_register_passthrough() -> None:
    frame = ipv4_frame("10.0.1.9", src_mac=0x020000000001)
    text = f"""
add ipv4_lpm dstAddr:0x0a000000/8 ipv4_forward(dstAddr:0x0000000000aa, port:2)
mirroring_add 5 9
register_write last_len 0 7
packet 1 {hexs(frame)}
expect 2 0000000000aa
expect 9 {hexs(frame)[:12]}
"""
    res = run_stf_text(prog, text)
    assert res.passed, res.mismatches


def test_check_counter() -> None:
    text = f"""
add ipv4_lpm dstAddr:0x0a000000/8 ipv4_forward(dstAddr:0x0000000000aa, port:2) = A
packet 1 {hexs(ipv4_frame("10.0.1.9"))}
packet 1 {hexs(ipv4_frame("10.0.1.9"))}
expect 2
expect 2
check_counter lpm_hits($A) packets == 2
check_counter rx_count(1) packets == 2
check_counter rx_count(1) bytes > 10000
"""
    res = run_stf_text(prog, text)
    assert not res.passed
    assert res.mismatches == ["check_counter rx_count(1): bytes is 84, expected > 10000"]


def test_bad_commands_are_reported_with_line_numbers() -> None:
    text = """
add dmac dstAddr:0x01 no_such_action()
add dmac dstAddr:0x01 forward(prt:1)
mc_node_associate 9 9
"""
    res = run_stf_text(prog, text)
    assert not res.passed
    assert res.mismatches[0].startswith("line 2:") and "no_such_action" in res.mismatches[0]
    assert "line 3:" in res.mismatches[1] and "prt" in res.mismatches[1]
    assert "line 4:" in res.mismatches[2] and "mc_node_associate" in res.mismatches[2]


@pytest.mark.parametrize("line", ["add nosuchtable k:1 a()", "setdefault nosuchtable a()"])
def test_an_unknown_table_stops_the_test_naming_file_and_line(line: str) -> None:
    from switches.soft.runtime.switch import SoftSwitch

    sent: list[object] = []

    def factory(module):  # noqa: ANN001, ANN202
        sw = SoftSwitch(module)
        sw.process_sync = lambda *a: sent.append(a) or []  # type: ignore[method-assign]
        return sw

    with pytest.raises(StfSyntaxError) as e:
        run_stf_text(prog, f"packet 1 {hexs(l2())}\n\n{line}\n", "t.stf",
                     switch_factory=factory)
    assert str(e.value).startswith("t.stf:3: unknown table nosuchtable (tables: ")
    assert "MyIngress.dmac" in str(e.value)
    assert sent == []          # the file does not fit the program: nothing ran


@pytest.mark.parametrize("line, message", [
    ("packet 1 zz", "t.stf:2: packet data is not hex: 'zz'"),
    ("frobnicate 3", "t.stf:2: unknown command 'frobnicate'"),
    ("expect x 00", "t.stf:2: port 'x' is not a number"),
    ("expect 1 00 QQ", "t.stf:2: expect data has 'Q'"),
    ("add dmac dstAddr:1", "t.stf:2: add needs an action call"),
    ("add dmac dstAddr:1 forward(port=3)", "t.stf:2: action argument 'port=3' is not"),
    ("check_counter c", "t.stf:2: check_counter <name>"),
    ("remove dmac", "t.stf:2: remove takes 'all'"),
])
def test_syntax_errors_name_file_and_line(line: str, message: str) -> None:
    with pytest.raises(StfSyntaxError) as e:
        parse_stf(f"wait\n{line}\n", "t.stf")
    assert str(e.value).startswith(message)
    with pytest.raises(StfSyntaxError):  # nothing runs when a line is not STF
        run_stf_text(prog, f"packet 1 {hexs(l2())}\n{line}\n")


def test_stf_ternary_value_helpers() -> None:
    assert parse_ternary("0x****0101", 32) == (0x0101, 0xFFFF)
    assert parse_ternary("0b1*0", 3) == (0b100, 0b101)
    assert parse_ternary("5", 8) == (5, 0xFF)
    assert parse_ternary("0x0f&&&0x03", 8) == (0x03, 0x03)  # value masked, as BMv2 stores it
    assert parse_lpm("0x0a00****", 32) == (0x0A000000, 16)
    assert parse_lpm("0x0a000000/8", 32) == (0x0A000000, 8)
    assert parse_lpm("0x0a0b0c0d/8", 32) == (0x0A000000, 8)


def test_main_json_and_exit_codes(tmp_path, monkeypatch, capsys) -> None:  # noqa: ANN001
    p4 = tmp_path / "p.p4"
    p4.write_text("// program")
    t = tmp_path / "p.stf"
    t.write_text(f"add dmac dstAddr:0x{DMAC} forward(port:3)\npacket 1 {hexs(l2())}\n"
                 f"expect 3 {DMAC}\n")

    def fake_run(p4_path, stf_path):  # noqa: ANN001
        return run_stf_text(prog, open(stf_path).read())

    monkeypatch.setattr(stf, "run_stf", fake_run)
    assert stf.main([str(p4), str(t), "--json"]) == 0
    assert json.loads(capsys.readouterr().out) == {"passed": True, "packets": 1, "mismatches": []}
    t.write_text(f"packet 1 {hexs(l2())}\n")
    assert stf.main([str(p4), str(t)]) == 1
    out = capsys.readouterr().out
    assert "FAIL" in out and "unexpected packet" in out

    def broken(p4_path, stf_path):  # noqa: ANN001
        raise RuntimeError("p.p4:1:1: syntax error")

    monkeypatch.setattr(stf, "run_stf", broken)
    assert stf.main([str(p4), str(t), "--json"]) == 2
    assert "syntax error" in capsys.readouterr().out


def test_main_stf_syntax_error_exits_2_with_file_and_line(tmp_path, capsys) -> None:  # noqa: ANN001
    p4 = tmp_path / "p.p4"
    p4.write_text("// not even compiled: the STF file is checked first")
    t = tmp_path / "p.stf"
    t.write_text("# a test\npacket 1 00\nexpect 1 0g\n")
    assert stf.main([str(p4), str(t)]) == 2
    err = capsys.readouterr().err
    assert err.strip() == f"error: {t}:3: expect data has 'G': only hex digits, '*' and a final '$'"


def test_run_stf_uses_compiler(tmp_path, monkeypatch) -> None:  # noqa: ANN001
    import sys
    import types
    calls = []
    fake = types.ModuleType("switches.soft.compiler")

    def compile_program(path, include_dirs=(), defines=None):  # noqa: ANN001
        calls.append((path, list(include_dirs)))
        return prog

    fake.compile_program = compile_program
    monkeypatch.setitem(sys.modules, "switches.soft.compiler", fake)
    p4 = tmp_path / "x.p4"
    p4.write_text("")
    t = tmp_path / "x.stf"
    t.write_text("")
    res = stf.run_stf(p4, t)
    assert res.passed and res.packets == 0
    assert calls == [(str(p4), [str(tmp_path)])]


@pytest.mark.parametrize("line", ["wait", "no_packet", "remove all", "# only a comment"])
def test_misc_commands_accepted(line: str) -> None:
    assert run_stf_text(prog, line).passed


def test_pipeline_exception_is_reported() -> None:
    from switches.soft.runtime.switch import SoftSwitch

    def factory(module):  # noqa: ANN001
        sw = SoftSwitch(module)
        sw.program.raise_in_ingress = True
        return sw

    res = run_stf_text(prog, f"packet 1 {hexs(l2())}\n", switch_factory=factory)
    assert not res.passed
    assert "RuntimeError: boom" in res.mismatches[0]


def test_mask_ignores_only_the_fields_marked_dont_care() -> None:
    sent = ipv4_frame("10.0.1.9")
    routed = bytearray(sent)
    routed[22] -= 1  # TTL
    routed[24:26] = b"\xab\xcd"  # checksum
    m = Mask(sent).dont_care(8 * 22, 8).dont_care(8 * 24, 16)
    assert m.compare(bytes(routed)) is None
    routed[23] ^= 0x01  # the protocol field is still cared about
    d = m.compare(bytes(routed))
    assert d is not None and "first at byte 23" in d
    assert Mask(sent).compare(sent + b"\x00") == f"{len(sent) + 1} bytes, expected {len(sent)}"
    half = Mask(b"\x12\x34").dont_care(4, 8)  # bits across two nibbles
    assert half.pattern() == "1**4$"
    assert half.compare(b"\x1f\xf4") is None and half.compare(b"\x2f\xf4") is not None
    with pytest.raises(ValueError, match="outside"):
        Mask(b"\x00").dont_care(4, 8)


def test_mask_pattern_is_an_stf_expectation() -> None:
    frame = l2()
    text = (f"add dmac dstAddr:0x{DMAC} forward(port:3)\npacket 1 {hexs(frame)}\n"
            f"expect 3 {Mask(frame).dont_care(48, 48).pattern()}\n")
    assert run_stf_text(prog, text).passed
