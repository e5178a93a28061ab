"""Hash/checksum known answers, data packing, registers, counters, meters, log_msg."""

from __future__ import annotations

import logging

import pytest

from switches.soft.runtime.externs import (
    CounterArray,
    HashEngine,
    Meter,
    MeterArray,
    MeterError,
    RegisterArray,
    crc16,
    crc32,
    csum16,
    format_log_msg,
    identity,
    pack_bits,
    xor16,
)

IPV4_HDR = bytes.fromhex("450000730000400040110000c0a80001c0a800c7")  # checksum zeroed


def test_crc32_check_value() -> None:
    assert crc32(b"123456789") == 0xCBF43926


def test_crc16_is_arc() -> None:
    assert crc16(b"123456789") == 0xBB3D
    assert crc16(b"") == 0


def test_csum16_of_ipv4_header() -> None:
    assert csum16(IPV4_HDR) == 0xB861
    full = IPV4_HDR[:10] + b"\xb8\x61" + IPV4_HDR[12:]
    assert csum16(full) == 0


def test_csum16_odd_length_pads_at_end() -> None:
    assert csum16(b"\x01") == (~0x0100) & 0xFFFF


def test_xor16_and_identity() -> None:
    assert xor16(b"\x12\x34\x56\x78") == 0x1234 ^ 0x5678
    assert xor16(b"\x12\x34\x56") == 0x1234 ^ 0x5600
    assert identity(b"\x01\x02") == 0x0102
    assert identity(bytes(range(1, 11))) == 0x0102030405060708


def test_pack_bits_msb_first_with_tail_padding() -> None:
    assert pack_bits([(1, 1), (3, 2)]) == b"\xe0"
    assert pack_bits([(0xABC, 12), (0xD, 4)]) == b"\xab\xcd"
    assert pack_bits([(0x1FF, 9)]) == b"\xff\x80"
    assert pack_bits([(-1, 4), (0, 4)]) == b"\xf0"  # signed values in two's complement


def test_hash_engine_base_and_max() -> None:
    h = HashEngine()
    data = [(0x0A000001, 32), (0x0A000002, 32), (6, 8)]
    raw = crc32(pack_bits(data))
    assert h.hash("crc32", 0, data, 1 << 16) == raw % (1 << 16)
    assert h.hash("crc32", 100, data, 10) == 100 + raw % 10
    assert h.hash("crc16", 7, data, 0) == 7
    assert h.compute("crc16_custom", data) == h.compute("crc16", data)
    assert h.compute("crc32_custom", data) == raw
    assert h.compute("csum16", [(0x4500, 16)]) == (~0x4500) & 0xFFFF
    with pytest.raises(ValueError):
        h.compute("md5", data)


def test_register_masking_and_bounds(caplog: pytest.LogCaptureFixture) -> None:
    r = RegisterArray("r", 8, 4)
    r.write(1, 0x1FF)
    assert r.read(1) == 0xFF
    with caplog.at_level(logging.ERROR):
        assert r.read(4) == 0
        r.write(-1, 5)
    assert "out of bounds" in caplog.text
    assert r.values == [0, 0xFF, 0, 0]


def test_counter_packets_and_bytes() -> None:
    c = CounterArray("c", 2, "packets_and_bytes")
    c.count(1, 64)
    c.count(1, 100)
    c.count(5, 1)  # ignored
    assert c.read(1) == (164, 2)
    c.reset()
    assert c.read(1) == (0, 0)


def test_meter_unconfigured_is_green_and_trtcm_colors() -> None:
    m = Meter("packets")
    assert m.execute(64, 0) == 0
    # committed 1 pkt/s burst 2, peak 2 pkt/s burst 3
    m.set_rates([(1e-6, 2), (2e-6, 3)])
    colors = [m.execute(64, 0) for _ in range(4)]
    assert colors == [0, 0, 1, 2]
    # after 1 s: +1 committed token, +2 peak tokens
    assert m.execute(64, 1_000_000) == 0
    assert m.execute(64, 1_000_000) == 1


def test_meter_bytes_and_rate_order_check() -> None:
    m = Meter("bytes")
    m.set_rates([(0.0, 100), (0.0, 1000)])
    assert m.execute(100, 0) == 0
    assert m.execute(100, 0) == 1
    with pytest.raises(MeterError):
        m.set_rates([(2.0, 10), (1.0, 10)])


def test_meter_array_uses_clock() -> None:
    t = [0]
    a = MeterArray("m", 2, "packets", lambda: t[0])
    a.set_rates(0, [(1e-6, 1), (1e-6, 1)])
    assert [a.execute(0, 10), a.execute(0, 10)] == [0, 2]
    t[0] = 1_000_000
    assert a.execute(0, 10) == 0
    assert a.execute(1, 10) == 0  # unconfigured cell
    assert a.get_rates(0) == [(1e-6, 1), (1e-6, 1)]


def test_log_msg_format() -> None:
    assert format_log_msg("x={} y={}", [5, True]) == "x=5 y=1"
    assert format_log_msg("no args", []) == "no args"
    assert format_log_msg("{} {}", [1]) == "1 {}"
    assert format_log_msg("a={a} b={}", [1, 2]) == "a=1 b=2"
    assert format_log_msg("set \\{x\\} = {}", [7]) == "set {x} = 7"


def test_hashes_of_stateless_algorithms_are_memoized_and_the_others_not() -> None:
    h = HashEngine()
    data = [(0x0A000001, 32), (0x0A000002, 32), (6, 8), (4791, 16)]
    first = h.compute("crc16", data)
    assert h.compute("crc16", list(data)) == first == crc16(pack_bits(data))
    assert ("crc16", tuple(data)) in h._memo
    # random draws anew; a custom CRC's parameters may change between packets
    assert len({h.compute("random", data) for _ in range(8)}) > 1
    before = h.compute("crc16_custom", data)
    h.crc16_custom.init = 0xFFFF
    assert h.compute("crc16_custom", data) != before
    assert not any(k[0] in ("random", "crc16_custom") for k in h._memo)
    # a program's calculation may take a stateless algorithm's name: then it is not
    h.set_calculations({"crc16": "crc16_custom"})
    h.custom["crc16"].init = 0x1234
    assert h.compute("crc16", data) != first
