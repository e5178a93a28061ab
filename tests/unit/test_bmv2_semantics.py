"""Behaviours where the soft switch follows BMv2 simple_switch's sources
(behavioral-model, targets/simple_switch and src/bm_sim), each test naming
the code it follows: add_header/remove_header for setValid/setInvalid,
counters and meters on the ingress length, one digest per packet, the
smallest truncate, and custom CRC parameters per named calculation."""

from __future__ import annotations

import pytest

from switches.soft.compiler import compile_program
from switches.soft.control.verbs import CommandError, ControlPlane
from switches.soft.runtime.switch import SoftSwitch

PROGRAM = r"""
#include <core.p4>
#include <v1model.p4>

header h_t { bit<8> op; bit<8> a; bit<16> b; bit<16> c; }
header extra_t { bit<16> v; }
struct headers { h_t h; extra_t extra; }
struct meta_t { bit<16> c1; }
struct learn_t { bit<8> v; }

parser P(packet_in pkt, out headers hdr, inout meta_t m, inout standard_metadata_t sm) {
    state start {
        pkt.extract(hdr.h);
        transition select(hdr.h.op) { 2: ext; 3: ext; default: accept; }
    }
    state ext { pkt.extract(hdr.extra); transition accept; }
}
control VC(inout headers hdr, inout meta_t m) { apply { } }
control I(inout headers hdr, inout meta_t m, inout standard_metadata_t sm) {
    counter(1, CounterType.bytes) ctr;
    meter(1, MeterType.bytes) mtr;
    apply {
        sm.egress_spec = 1;
        if (hdr.h.op == 1) {
            hdr.extra.v = 0xabcd;        // written while invalid
            hdr.extra.setValid();        // add_header: zeroed, +2 bytes
        } else if (hdr.h.op == 2) {
            hdr.extra.setInvalid();      // remove_header: -2 bytes
        } else if (hdr.h.op == 3) {
            hdr.extra.setValid();        // already valid: unchanged
        } else if (hdr.h.op == 4) {
            sm.packet_length = 1000;     // must not change what is counted
            bit<8> color;
            mtr.execute_meter(0, color);
            hdr.h.a = color;
        } else if (hdr.h.op == 6) {
            digest<learn_t>(1, {1});
            digest<learn_t>(1, {2});
        } else if (hdr.h.op == 7) {
            truncate(30);
            truncate(10);
            truncate(20);
        } else if (hdr.h.op == 8) {
            hash(hdr.h.b, HashAlgorithm.crc16_custom, 16w0, {hdr.h.a}, 32w65536);
            hash(m.c1, HashAlgorithm.crc16_custom, 16w0, {hdr.h.a}, 32w65536);
            hdr.h.c = m.c1;
        }
        ctr.count(0);
    }
}
control E(inout headers hdr, inout meta_t m, inout standard_metadata_t sm) {
    apply {
        if (hdr.h.op != 8 && hdr.h.op != 4) { hdr.h.b = (bit<16>)sm.packet_length; }
    }
}
control CC(inout headers hdr, inout meta_t m) { apply { } }
control D(packet_out pkt, in headers hdr) { apply { pkt.emit(hdr.h); pkt.emit(hdr.extra); } }
V1Switch(P(), VC(), I(), E(), CC(), D()) main;
"""


@pytest.fixture(scope="module")
def module(tmp_path_factory: pytest.TempPathFactory):  # noqa: ANN201
    d = tmp_path_factory.mktemp("sem")
    p = d / "sem.p4"
    p.write_text(PROGRAM)
    import os
    old = os.environ.get("XDG_CACHE_HOME")
    os.environ["XDG_CACHE_HOME"] = str(d / "cache")
    try:
        return compile_program(p)
    finally:
        if old is None:
            del os.environ["XDG_CACHE_HOME"]
        else:
            os.environ["XDG_CACHE_HOME"] = old


def switch(module) -> SoftSwitch:  # noqa: ANN001
    return SoftSwitch(module, now_us=lambda: 1000, seed=1)


def pkt(op: int, extra: bytes = b"", payload: bytes = bytes(10)) -> bytes:
    return bytes([op, 0x11, 0, 0, 0, 0]) + extra + payload


def one(sw: SoftSwitch, data: bytes) -> bytes:
    out = sw.process_sync(0, data)
    assert len(out) == 1, sw.stats()
    return out[0][1]


def test_set_valid_zeroes_the_header_and_adds_its_length(module) -> None:  # noqa: ANN001
    # primitives.cpp add_header: hdr.reset() (every field 0, headers.cpp) and
    # the packet length register grows by the header's size; egress reads
    # standard_metadata.packet_length from that register (simple_switch.cpp)
    frame = one(switch(module), pkt(1))
    assert len(frame) == 6 + 2 + 10
    assert frame[6:8] == b"\x00\x00"  # not the 0xabcd written while invalid
    assert int.from_bytes(frame[2:4], "big") == 16 + 2


def test_set_invalid_removes_its_length(module) -> None:  # noqa: ANN001
    # primitives.cpp remove_header: the register shrinks by the header's size
    frame = one(switch(module), pkt(2, b"\x12\x34"))
    assert len(frame) == 16
    assert int.from_bytes(frame[2:4], "big") == 18 - 2


def test_set_valid_on_a_valid_header_changes_nothing(module) -> None:  # noqa: ANN001
    frame = one(switch(module), pkt(3, b"\x12\x34"))
    assert frame[6:8] == b"\x12\x34"
    assert int.from_bytes(frame[2:4], "big") == 18


def test_counters_and_meters_count_the_ingress_length(module) -> None:  # noqa: ANN001
    # counters.h Counter::increment_counter and meters.cpp Meter::execute use
    # pkt.get_ingress_length(), not standard_metadata.packet_length
    sw = switch(module)
    ControlPlane(sw).execute("meter_set_rates I.mtr 0 0.000001:20 0.000001:20")
    frame = one(sw, pkt(4))  # 16 bytes fit the 20-byte buckets
    assert frame[1] == 0  # GREEN: metered 16 bytes, not the 1000 written
    assert ControlPlane(sw).execute("counter_read I.ctr 0") == "I.ctr[0]= (16 bytes, 1 packets)"


def test_one_digest_per_packet_last_call_wins(module) -> None:  # noqa: ANN001
    # primitives.cpp generate_digest sets the packet's one learn id register;
    # simple_switch.cpp learns once at the end of ingress
    sw = switch(module)
    one(sw, pkt(6))
    assert list(sw.digests) == [(1, "learn_t", {"v": 2})]


def test_truncate_smallest_length_wins(module) -> None:  # noqa: ANN001
    # packet.h Packet::truncate: truncated_length = min(length, truncated_length)
    assert len(one(switch(module), pkt(7))) == 10


def test_crc_parameters_configure_the_named_calculation_only(module) -> None:  # noqa: ANN001
    # runtime_CLI.py set_crc_parameters_common: the name must be a custom CRC
    # calculation of that width; only that calculation changes
    assert module.INFO.calculations == {"calc": "crc16_custom", "calc_0": "crc16_custom"}
    sw = switch(module)
    before = one(sw, pkt(8))
    assert before[2:4] == before[4:6]  # both start as BMv2's crc16
    ControlPlane(sw).execute("set_crc16_parameters calc_0 0x1021 0xffff 0x0000 false false")
    after = one(sw, pkt(8))
    assert after[2:4] == before[2:4]  # calc untouched
    # calc_0 is now CRC-16/CCITT-FALSE of the one byte 0x11
    crc = 0xFFFF
    crc ^= 0x11 << 8
    for _ in range(8):
        crc = ((crc << 1) ^ 0x1021) & 0xFFFF if crc & 0x8000 else (crc << 1) & 0xFFFF
    assert int.from_bytes(after[4:6], "big") == crc
    with pytest.raises(CommandError, match=r"Invalid crc16_custom name \(nosuch\)"):
        ControlPlane(sw).execute("set_crc16_parameters nosuch 0x1021 0xffff 0 false false")
    with pytest.raises(CommandError, match=r"Invalid crc32_custom name \(calc\)"):
        ControlPlane(sw).execute("set_crc32_parameters calc 0x04c11db7 0 0 true true")
