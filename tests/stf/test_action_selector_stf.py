"""Action profiles and selectors through STF (simple_switch_CLI verbs passed
through): tests/stf/programs/ecmp_selector.stf. Its expected ports were
computed with a CRC-16/ARC written independently (below), not by the switch.
The same file runs on BMv2 in tests/integration/test_bmv2_net.py."""

from __future__ import annotations

from pathlib import Path

from switches.soft.stf import run_stf

PROGRAMS = Path(__file__).resolve().parent / "programs"
P4 = PROGRAMS / "ecmp_selector.p4"
STF = PROGRAMS / "ecmp_selector.stf"


def crc16_arc(data: bytes) -> int:
    """BMv2's crc16 (CRC-16/ARC: reflected 0x8005, init 0), bit by bit."""
    crc = 0
    for b in data:
        crc ^= b
        for _ in range(8):
            crc = (crc >> 1) ^ 0xA001 if crc & 1 else crc >> 1
    return crc


def test_crc_reference_check_value() -> None:
    assert crc16_arc(b"123456789") == 0xBB3D


def test_expected_ports_follow_bmv2_selection() -> None:
    """BMv2 (action_profile.cpp, ras.h): member = sorted members[hash % size]."""
    members = {0: 1, 1: 2, 2: 3}  # member handle -> port
    text = STF.read_text()
    checked = 0
    lines = [ln.split() for ln in text.splitlines() if ln.strip() and not ln.startswith("#")]
    group = [0, 1, 2]
    for i, words in enumerate(lines):
        if words[0] == "act_prof_remove_member_from_group":
            group.remove(int(words[2]))
        if words[0] == "packet" and words[2] == "AB":
            port = int(lines[i + 1][1])
            h = crc16_arc(bytes.fromhex(words[3]))
            assert port == members[sorted(group)[h % len(group)]], words
            checked += 1
    assert checked == 6


def test_selector_stf_passes() -> None:
    result = run_stf(P4, STF)
    assert result.passed, "\n".join(str(m) for m in result.mismatches)
    assert result.packets == 9


def test_wrong_member_expectation_fails(tmp_path: Path) -> None:
    bad = tmp_path / "bad.stf"
    bad.write_text(STF.read_text().replace("expect 3 AB 01020304 77", "expect 2 AB 01020304 77"))
    result = run_stf(P4, bad)
    assert not result.passed and result.mismatches


def test_stf_add_on_an_indirect_table_is_an_error(tmp_path: Path) -> None:
    # p4c's STF runner turns 'add' into table_add, which BMv2 refuses for an
    # indirect table; so does the soft target
    bad = tmp_path / "add.stf"
    bad.write_text("add FlowIngress.ecmp h.flow.tag:0xab FlowIngress.send(port:1)\n"
                   "packet 0 AB 01020304 00\nexpect 1 AB 01020304 00\n")
    result = run_stf(P4, bad)
    assert not result.passed
    assert any("WRONG_TABLE_TYPE" in str(m) for m in result.mismatches)
