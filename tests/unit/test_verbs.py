"""simple_switch_CLI verbs: parsing, printed output, errors naming the bad token."""

from __future__ import annotations

import pytest
import test_runtime_support as prog
from test_runtime_support import FakeClock, l2_frame

from switches.soft.control.verbs import CommandError, ControlPlane, parse_value
from switches.soft.runtime.switch import SoftSwitch


@pytest.fixture
def sw() -> SoftSwitch:
    return SoftSwitch(prog, now_us=FakeClock(), priority_queues=2)


def ex(sw: SoftSwitch, line: str) -> str:
    return ControlPlane(sw).execute(line)


def test_parse_value_formats() -> None:
    assert parse_value("10.0.1.1", 32) == 0x0A000101
    assert parse_value("aa:bb:cc:dd:ee:ff", 48) == 0xAABBCCDDEEFF
    assert parse_value("0x1f", 9) == 0x1F
    assert parse_value("300", 9) == 300
    assert parse_value("::1", 128) == 1
    with pytest.raises(CommandError, match="'256'"):
        parse_value("256", 8)
    with pytest.raises(CommandError, match="'1.2.3.999'"):
        parse_value("1.2.3.999", 32)
    with pytest.raises(CommandError, match="'zz'"):
        parse_value("zz", 8)


def test_table_add_output_like_bmv2(sw: SoftSwitch) -> None:
    out = ex(sw, "table_add MyIngress.ipv4_lpm MyIngress.ipv4_forward 10.0.1.0/24 => "
                 "00:00:00:00:01:01 2")
    assert out.splitlines() == [
        "Adding entry to lpm match table MyIngress.ipv4_lpm",
        "match key:           LPM-0a:00:01:00/24",
        "action:              MyIngress.ipv4_forward",
        "runtime data:        00:00:00:00:01:01\t00:02",
        "Entry has been added with handle 0",
    ]
    assert ex(sw, "table_num_entries ipv4_lpm") == "1"


def test_table_add_ternary_range_optional_with_priority(sw: SoftSwitch) -> None:
    out = ex(sw, "table_add acl set_tag 0x0800&&&0xff00 1->4 1 => 7 5")
    assert "TERNARY-08:00 &&& ff:00\tRANGE-00:01 -> 00:04\tTERNARY-01 &&& 01" in out
    dump = ex(sw, "table_dump acl")
    assert "Priority: 5" in dump
    assert "* standard_metadata.ingress_port: RANGE     0001 -> 0004" in dump
    assert "Action entry: MyIngress.set_tag - 07" in dump
    with pytest.raises(CommandError, match="priority"):
        ex(sw, "table_add acl drop 0x0800&&&0xff00 1->4 1 =>")
    with pytest.raises(CommandError, match="'x'"):
        ex(sw, "table_add acl drop 0x0800&&&0xff00 1->4 1 => x")
    with pytest.raises(CommandError, match="'&&&'"):
        ex(sw, "table_add acl set_tag 0x0800 1->4 1 => 7 5")
    with pytest.raises(CommandError, match="'->'"):
        ex(sw, "table_add acl set_tag 0x0800&&&0xffff 4 1 => 7 5")


def test_table_dump_and_default(sw: SoftSwitch) -> None:
    ex(sw, "table_add dmac forward 0x0a0b0c0d0e0f => 4")
    out = ex(sw, "table_set_default dmac forward 9")
    assert out.splitlines() == ["Setting default action of dmac",
                                "action:              forward",
                                "runtime data:        00:09"]
    dump = ex(sw, "table_dump MyIngress.dmac").splitlines()
    assert dump[:4] == ["==========", "TABLE ENTRIES", "**********", "Dumping entry 0x0"]
    assert "* hdr.ethernet.dstAddr: EXACT     0a0b0c0d0e0f" in dump
    assert dump[-3:] == ["Dumping default entry", "Action entry: MyIngress.forward - 0009",
                         "=========="]
    assert sw.process_sync(1, l2_frame(0x111111111111))[0][0] == 9
    ex(sw, "table_reset_default dmac")
    assert sw.process_sync(1, l2_frame(0x111111111111))[0][0] == 0


def test_table_modify_delete_clear(sw: SoftSwitch) -> None:
    ex(sw, "table_add dmac forward 0x0a0b0c0d0e0f => 4")
    assert ex(sw, "table_modify dmac forward 0 5") == \
        "Modifying entry 0 for exact match table dmac"
    assert sw.process_sync(1, l2_frame(0x0A0B0C0D0E0F))[0][0] == 5
    assert ex(sw, "table_delete dmac 0") == "Deleting entry 0 from dmac"
    with pytest.raises(CommandError, match="INVALID_HANDLE"):
        ex(sw, "table_delete dmac 0")
    ex(sw, "table_add dmac forward 1 => 4")
    ex(sw, "table_clear dmac")
    assert ex(sw, "table_num_entries dmac") == "0"


def test_table_errors_name_the_token(sw: SoftSwitch) -> None:
    with pytest.raises(CommandError, match=r"Invalid table name \(nosuch\)"):
        ex(sw, "table_add nosuch forward 1 => 2")
    with pytest.raises(CommandError, match="has no action bogus"):
        ex(sw, "table_add dmac bogus 1 => 2")
    with pytest.raises(CommandError, match="needs 1 parameters"):
        ex(sw, "table_add dmac forward 1 => 2 3")
    with pytest.raises(CommandError, match="needs 1 key fields"):
        ex(sw, "table_add dmac forward 1 2 => 3")
    with pytest.raises(CommandError, match="'/'"):
        ex(sw, "table_add ipv4_lpm drop 10.0.0.1")
    with pytest.raises(CommandError, match="DUPLICATE_ENTRY"):
        ex(sw, "table_add dmac forward 1 => 2")
        ex(sw, "table_add dmac forward 1 => 3")
    with pytest.raises(CommandError, match="DEFAULT_ACTION_IS_CONST"):
        ex(sw, "table_set_default const_def set_tag 1")
    with pytest.raises(CommandError, match="Unknown command 'tabel_add'"):
        ex(sw, "tabel_add dmac forward 1 => 2")


def test_table_full(sw: SoftSwitch) -> None:
    sw2 = SoftSwitch(prog.Module(prog.make_info(lpm_size=1)), now_us=FakeClock())
    ex(sw2, "table_add ipv4_lpm drop 10.0.0.0/8 =>")
    with pytest.raises(CommandError, match="TABLE_FULL"):
        ex(sw2, "table_add ipv4_lpm drop 11.0.0.0/8 =>")


def test_ambiguous_suffix() -> None:
    info = prog.make_info()
    from dataclasses import replace
    t = info.tables["MyIngress.dmac"]
    info.tables["MyEgress.dmac"] = replace(t, name="MyEgress.dmac")
    sw = SoftSwitch(prog.Module(info), now_us=FakeClock())
    with pytest.raises(CommandError, match="Ambiguous table name 'dmac'"):
        ex(sw, "table_num_entries dmac")
    assert ex(sw, "table_num_entries MyEgress.dmac") == "0"


def test_counters_and_registers(sw: SoftSwitch) -> None:
    sw.process_sync(3, l2_frame(1))
    assert ex(sw, "counter_read MyIngress.rx_count 3") == \
        "MyIngress.rx_count[3]= (60 bytes, 1 packets)"
    assert ex(sw, "counter_write rx_count 3 5 500") == "rx_count[3] has been updated"
    assert ex(sw, "counter_read rx_count 3") == "rx_count[3]= (500 bytes, 5 packets)"
    ex(sw, "counter_reset rx_count")
    assert ex(sw, "counter_read rx_count 3") == "rx_count[3]= (0 bytes, 0 packets)"
    with pytest.raises(CommandError, match="index 8"):
        ex(sw, "counter_read rx_count 8")
    ex(sw, "register_write last_len 1 0x1ffff")
    assert ex(sw, "register_read last_len 1") == "last_len[1]= 65535"
    assert ex(sw, "register_read last_len") == "last_len= 0, 65535, 0, 60, 0, 0, 0, 0"
    ex(sw, "register_reset last_len")
    assert ex(sw, "register_read last_len 1") == "last_len[1]= 0"
    with pytest.raises(CommandError, match="index 9"):
        ex(sw, "register_write last_len 9 1")
    with pytest.raises(CommandError, match=r"Invalid register name \(nope\)"):
        ex(sw, "register_read nope 0")


def test_direct_counter_read_by_handle(sw: SoftSwitch) -> None:
    ex(sw, "table_add ipv4_lpm drop 10.0.0.0/8 =>")
    out = ex(sw, "counter_read lpm_hits 0")
    assert out.splitlines() == ["this is the direct counter for table MyIngress.ipv4_lpm",
                                "lpm_hits[0]= (0 bytes, 0 packets)"]
    with pytest.raises(CommandError, match="no entry 3"):
        ex(sw, "counter_read lpm_hits 3")


def test_meters(sw: SoftSwitch) -> None:
    ex(sw, "meter_set_rates port_meter 1 0.5:10 1:20")
    assert ex(sw, "meter_get_rates port_meter 1").splitlines() == [
        "0: info rate = 0.5, burst size = 10", "1: info rate = 1.0, burst size = 20"]
    ex(sw, "meter_array_set_rates port_meter 0.1:1 0.2:2")
    assert ex(sw, "meter_get_rates port_meter 7").startswith("0: info rate = 0.1")
    with pytest.raises(CommandError, match="expected 2"):
        ex(sw, "meter_set_rates port_meter 1 0.5:10")
    with pytest.raises(CommandError, match="'x:1'"):
        ex(sw, "meter_set_rates port_meter 1 x:1 1:1")
    with pytest.raises(CommandError, match="INVALID_INFO_RATE"):
        ex(sw, "meter_set_rates port_meter 1 2:1 1:1")


def test_multicast_verbs_and_dump(sw: SoftSwitch) -> None:
    assert ex(sw, "mc_mgrp_create 1") == "Creating multicast group 1"
    assert ex(sw, "mc_node_create 5 1 3") == \
        "Creating node with rid 5 , port map 1010 and lag map \nnode was created with handle 0"
    assert ex(sw, "mc_node_associate 1 0") == "Associating node 0 to multicast group 1"
    assert ex(sw, "mc_node_update 0 2") == "Updating node 0 with port map 100 and lag map "
    dump = ex(sw, "mc_dump").splitlines()
    assert "mgrp(1)" in dump
    assert "  -> (L1h=0, rid=5) -> (ports=[2], lags=[])" in dump
    with pytest.raises(CommandError, match="INVALID_MGRP_HANDLE"):
        ex(sw, "mc_node_associate 9 0")
    with pytest.raises(CommandError, match="INVALID_L1_HANDLE"):
        ex(sw, "mc_node_associate 1 7")
    with pytest.raises(CommandError, match="'x'"):
        ex(sw, "mc_node_create 1 x")
    assert ex(sw, "mc_node_dissociate 1 0") == "Dissociating node 0 from multicast group 1"
    assert ex(sw, "mc_node_destroy 0") == "Destroying node 0"
    assert ex(sw, "mc_mgrp_destroy 1") == "Destroying multicast group 1"


def test_mirroring_verbs(sw: SoftSwitch) -> None:
    ex(sw, "mirroring_add 3 7")
    assert ex(sw, "mirroring_get 3") == "MirroringSessionConfig(port=7, mgid=None)"
    ex(sw, "mirroring_add_mc 4 2")
    assert ex(sw, "mirroring_get 4") == "MirroringSessionConfig(port=None, mgid=2)"
    ex(sw, "mirroring_delete 3")
    with pytest.raises(CommandError, match="SESSION_NOT_FOUND"):
        ex(sw, "mirroring_get 3")
    with pytest.raises(CommandError, match="out of range"):
        ex(sw, "mirroring_add 40000 1")


def test_queue_verbs(sw: SoftSwitch) -> None:
    ex(sw, "set_queue_depth 2 4 1")
    ex(sw, "set_queue_rate 100 4")
    ex(sw, "set_port_rate_bps 1000000 4")
    ex(sw, "set_priority_weights 4 1 3")
    q = sw.tm.stats()["4"]
    assert [x["capacity"] for x in q["queues"]] == [64, 2]
    assert [x["rate_pps"] for x in q["queues"]] == [100, 100]
    assert q["rate_bps"] == 1_000_000 and q["weights"] == [1, 3]
    ex(sw, "set_priority_weights 4 strict")
    assert sw.tm.stats()["4"]["weights"] is None
    with pytest.raises(CommandError, match="'2'"):
        ex(sw, "set_queue_depth 2 4 2")  # only priorities 0 and 1 exist
    with pytest.raises(CommandError, match="'-3'"):
        ex(sw, "set_queue_rate -3")
    with pytest.raises(CommandError, match="Expected 2 weights"):
        ex(sw, "set_priority_weights 4 1 2 3")
    with pytest.raises(CommandError, match="'0'"):
        ex(sw, "set_priority_weights 4 0 1")


def test_script_comments_and_help(sw: SoftSwitch) -> None:
    outs = ControlPlane(sw).run_script("# setup\n\nmc_mgrp_create 2  # group\nget_time_elapsed\n")
    assert outs == ["Creating multicast group 2", "0"]
    with pytest.raises(CommandError, match="line 2"):
        ControlPlane(sw).run_script("mc_mgrp_create 3\nmc_node_associate 3 99\n")
    h = ex(sw, "help")
    assert "set_port_rate_bps" in h and "soft-target extension" in h
    assert ex(sw, "help table_add").startswith("table_add <table>")
    assert ex(sw, "   ") == ""


def test_port_delay_verb(sw: SoftSwitch) -> None:
    ex(sw, "set_port_delay_us 2500 4")
    assert sw.tm.stats()["4"]["delay_us"] == 2500
    ex(sw, "set_port_delay_us 70")
    assert sw.tm.stats()["4"]["delay_us"] == 70 and sw.tm.default_delay_us == 70
    with pytest.raises(CommandError, match="'-1'"):
        ex(sw, "set_port_delay_us -1 4")
    with pytest.raises(CommandError, match="usage: set_port_delay_us"):
        ex(sw, "set_port_delay_us 1 2 3")
    assert "propagation delay" in ex(sw, "help set_port_delay_us")


def test_wrong_arg_counts(sw: SoftSwitch) -> None:
    with pytest.raises(CommandError, match="usage: table_delete"):
        ex(sw, "table_delete dmac")
    with pytest.raises(CommandError, match="usage: mirroring_add"):
        ex(sw, "mirroring_add 1")


def test_custom_crc_parameters(sw: SoftSwitch) -> None:
    # (per-calculation behaviour: test_bmv2_semantics.py)
    sw.hashes.set_calculations({"calc": "crc16_custom"})
    data = [(0x31323334, 32)]
    before = sw.hashes.compute("calc", data)
    assert before == sw.hashes.compute("crc16", data)
    # CRC-16/CCITT-FALSE: poly 0x1021, init 0xffff, no reflection; check value 0x29B1
    ex(sw, "set_crc16_parameters calc 0x1021 0xffff 0x0000 false false")
    assert sw.hashes.compute("calc", [(int.from_bytes(b"123456789", "big"), 72)]) == 0x29B1
    assert sw.hashes.compute("crc16", data) == before  # the fixed algorithm is untouched
    with pytest.raises(CommandError, match="'maybe'"):
        ex(sw, "set_crc32_parameters calc 0x04c11db7 0 0 maybe true")
