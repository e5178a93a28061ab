"""Action profiles and selectors on the soft target: the compiler's INFO,
simple_switch_CLI's act_prof_* / table_indirect_* verbs and their errors
(as BMv2's runtime_CLI.py and action_profile.cpp give them)."""

from __future__ import annotations

from pathlib import Path

import pytest

from switches.soft.compiler import compile_program
from switches.soft.control.verbs import CommandError, ControlPlane
from switches.soft.runtime.switch import SoftSwitch

P4 = Path(__file__).resolve().parents[1] / "stf" / "programs" / "ecmp_selector.p4"
SHARED = r"""
#include <core.p4>
#include <v1model.p4>
header h_t { bit<8> a; bit<8> b; bit<16> sel; }
struct H { h_t h; }
struct M { }
parser P(packet_in pkt, out H hdr, inout M m, inout standard_metadata_t sm) {
    state start { pkt.extract(hdr.h); transition accept; }
}
control VC(inout H hdr, inout M m) { apply { } }
control I(inout H hdr, inout M m, inout standard_metadata_t sm) {
    action_selector(HashAlgorithm.identity, 32w64, 32w16) sel;
    action fwd(bit<9> p) { sm.egress_spec = p; }
    table t1 { key = { hdr.h.a : exact; hdr.h.sel : selector; } actions = { fwd; }
               implementation = sel; }
    table t2 { key = { hdr.h.b : exact; hdr.h.sel : selector; } actions = { fwd; }
               implementation = sel; }
    table t3 { key = { hdr.h.a : ternary; } actions = { fwd; NoAction; }
               @name("inline_prof") implementation = action_profile(32w8); }
    apply { t1.apply(); t2.apply(); t3.apply(); }
}
control E(inout H hdr, inout M m, inout standard_metadata_t sm) { apply { } }
control CC(inout H hdr, inout M m) { apply { } }
control D(packet_out pkt, in H hdr) { apply { pkt.emit(hdr.h); } }
V1Switch(P(), VC(), I(), E(), CC(), D()) main;
"""


@pytest.fixture(autouse=True)
def _cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))


def make(path: Path) -> tuple[SoftSwitch, ControlPlane]:
    sw = SoftSwitch(compile_program(path), now_us=lambda: 1000, seed=1)
    return sw, ControlPlane(sw)


def test_info_describes_profiles_and_selector_keys() -> None:
    info = compile_program(P4).INFO
    sel = info.action_profiles["FlowIngress.ecmp_sel"]
    assert (sel.size, sel.selector_algo, sel.selector_output_width) == (128, "crc16", 16)
    assert sel.tables == ["FlowIngress.ecmp"] and sel.actions == ["FlowIngress.send"]
    assert info.action_profiles["FlowIngress.marks"].selector_algo is None
    t = info.tables["FlowIngress.ecmp"]
    assert t.implementation == "FlowIngress.ecmp_sel"
    assert [k.name for k in t.keys] == ["h.flow.tag"]  # the selector key does not match
    assert [(k.name, k.width) for k in t.selector_keys] == [("h.flow.entropy", 32)]


def test_cli_messages_and_handles_as_bmv2() -> None:
    sw, cp = make(P4)
    ex = cp.execute
    assert ex("act_prof_create_member ecmp_sel send 1") == "Member has been created with handle 0"
    assert ex("act_prof_create_member ecmp_sel send 2") == "Member has been created with handle 1"
    assert ex("act_prof_create_group ecmp_sel") == "Group has been created with handle 0"
    ex("act_prof_add_member_to_group ecmp_sel 0 0")
    assert ex("table_indirect_add_with_group ecmp 7 => 0") == \
        "Adding entry to indirect match table FlowIngress.ecmp\nEntry has been added with handle 0"
    assert ex("table_dump_entry ecmp 0").splitlines()[-1] == "Index: group(0)"
    # BMv2 reuses the smallest free handle
    ex("act_prof_delete_member ecmp_sel 1")
    assert ex("act_prof_create_member ecmp_sel send 5") == "Member has been created with handle 1"
    assert "Members: [0]" in ex("act_prof_dump_group ecmp_sel 0")


def test_errors_name_what_is_wrong() -> None:
    sw, cp = make(P4)
    ex = cp.execute
    ex("act_prof_create_member ecmp_sel send 1")
    ex("act_prof_create_group ecmp_sel")
    with pytest.raises(CommandError, match="EMPTY_GRP"):
        ex("table_indirect_add_with_group ecmp 7 => 0")
    ex("act_prof_add_member_to_group ecmp_sel 0 0")
    with pytest.raises(CommandError, match="MBR_ALREADY_IN_GRP"):
        ex("act_prof_add_member_to_group ecmp_sel 0 0")
    ex("table_indirect_add ecmp 8 => 0")
    with pytest.raises(CommandError, match="MBR_STILL_USED"):
        ex("act_prof_delete_member ecmp_sel 0")
    with pytest.raises(CommandError, match="INVALID_MBR_HANDLE"):
        ex("table_indirect_add ecmp 9 => 5")
    with pytest.raises(CommandError, match="WRONG_TABLE_TYPE"):
        ex("table_add ecmp send 9 => 1")
    with pytest.raises(CommandError, match="without selector"):
        ex("act_prof_create_group marks")
    with pytest.raises(CommandError, match="no selector"):
        ex("table_indirect_add_with_group marker 1 => 0")
    with pytest.raises(CommandError, match="has no action 'mark'"):
        ex("act_prof_create_member ecmp_sel mark 1")
    # the table-based forms name a table, not a profile
    with pytest.raises(CommandError, match=r"Invalid table name \(ecmp_sel\)"):
        ex("table_indirect_create_group ecmp_sel")
    assert ex("table_indirect_create_group ecmp") == "Group has been created with handle 1"


def test_group_delete_keeps_members_and_defaults_use_members() -> None:
    # BMv2's DeleteGroupWithMembers (test_action_profile.cpp): a group with
    # members can be deleted, then its members
    sw, cp = make(P4)
    ex = cp.execute
    for port in (1, 2):
        ex(f"act_prof_create_member ecmp_sel send {port}")
    ex("act_prof_create_group ecmp_sel")
    ex("act_prof_add_member_to_group ecmp_sel 0 0")
    ex("act_prof_add_member_to_group ecmp_sel 1 0")
    ex("act_prof_delete_group ecmp_sel 0")
    ex("act_prof_delete_member ecmp_sel 0")
    ex("act_prof_delete_member ecmp_sel 1")
    # a miss uses the default member once set
    ex("act_prof_create_member ecmp_sel send 4")
    ex("table_indirect_set_default ecmp 0")
    out = sw.process_sync(0, bytes([0x55, 0, 0, 0, 1, 0]))
    assert [p for p, _ in out] == [4]
    ex("table_indirect_reset_default ecmp")
    assert [p for p, _ in sw.process_sync(0, bytes([0x55, 0, 0, 0, 1, 0]))] == [9]


def test_shared_selector_and_inline_profile(tmp_path: Path) -> None:
    p = tmp_path / "shared.p4"
    p.write_text(SHARED)
    sw, cp = make(p)
    info = sw.info
    assert info.action_profiles["I.sel"].tables == ["I.t1", "I.t2"]
    assert info.tables["I.t3"].implementation == "I.inline_prof"
    ex = cp.execute
    for port in (1, 2, 3, 4):
        ex(f"act_prof_create_member sel fwd {port}")
    ex("act_prof_create_group sel")
    for m in range(4):
        ex(f"act_prof_add_member_to_group sel {m} 0")
    ex("table_indirect_add_with_group t1 1 => 0")
    ex("act_prof_create_member inline_prof fwd 7")
    ex("table_indirect_add t3 2&&&0xff => 0 1")  # ternary: a priority
    # identity hash: the 16-bit selector value picks member (value % 4)
    for sel in range(8):
        out = sw.process_sync(0, bytes([1, 0]) + sel.to_bytes(2, "big"))
        assert [p for p, _ in out] == [1 + sel % 4]
    assert [p for p, _ in sw.process_sync(0, bytes([2, 0, 0, 0]))] == [7]
    # both tables share the selector's members and groups
    ex("table_indirect_add_with_group t2 5 => 0")
    assert [p for p, _ in sw.process_sync(0, bytes([9, 5, 0, 3]))] == [4]
    ex("reset_state")
    assert sw.action_profiles["I.sel"].members == {}
