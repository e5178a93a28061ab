"""The generated code's fast paths give the same bytes and checksums as the
general ones: struct-based header extract/emit, inline csum16."""

from __future__ import annotations

import random

import pytest
from test_backend_support import Harness, program

from switches.soft.backend.rtlib import csum16_int
from switches.soft.runtime.externs import csum16


@pytest.fixture(autouse=True)
def _cache(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))


def test_csum16_int_equals_the_internet_checksum() -> None:
    rng = random.Random(5)
    for _ in range(2000):
        n = rng.choice([1, 2, 3, 18, 20, 21])
        data = bytes(rng.choice([0, 0xFF, rng.randrange(256)]) for _ in range(n))
        bits = 8 * n
        v = int.from_bytes(data, "big") << (-bits % 16)  # zero-padded to whole words
        assert csum16_int(v) == csum16(data), data.hex()
    assert csum16_int(0) == 0xFFFF  # all-zero data
    assert csum16_int(0xFFFF) == 0  # sums to "negative zero"


ODD = """
header o_t { bit<3> f; bit<13> off; bit<48> mac; int<8> s; bool b; bit<7> r;
             bit<24> t; bit<40> u; bit<8> z; }
"""


def test_unaligned_fields_roundtrip_and_rewrite(tmp_path) -> None:
    # fields that straddle struct units, a signed and a bool field
    src = program("hdr.o.s = hdr.o.s - 8s1; hdr.o.t = hdr.o.t + 1; hdr.o.mac = ~hdr.o.mac;",
                  decls=ODD, hfields="o_t o;",
                  parser="state start { pk.extract(hdr.h); pk.extract(hdr.o); "
                         "transition accept; }")
    h = Harness(src, tmp_path)
    assert "_Struct('>HIHBBHBIBB')" in h.module.SOURCE  # one struct format for o_t
    rng = random.Random(1)
    for _ in range(50):
        body = bytes(rng.randrange(256) for _ in range(4 + 19))
        out, st = h.run(body + b"tail")
        o = st.hdr.o
        raw = int.from_bytes(body[4:], "big")
        assert o.z == raw & 0xFF and o.f == raw >> 149
        assert isinstance(o.b, bool)
        expect = bytearray(body)
        s = body[4 + 8]
        expect[4 + 8] = (s - 1) & 0xFF
        t = int.from_bytes(body[4 + 10:4 + 13], "big")
        expect[4 + 10:4 + 13] = ((t + 1) & 0xFFFFFF).to_bytes(3, "big")
        expect[4 + 2:4 + 8] = bytes(~x & 0xFF for x in body[4 + 2:4 + 8])
        assert out == bytes(expect) + b"tail"


CK = """
header ip_t { bit<4> v; bit<4> ihl; bit<8> tos; bit<16> len; bit<16> id; bit<3> fl;
              bit<13> fo; bit<8> ttl; bit<8> p; bit<16> ck; bit<32> s; bit<32> d; }
"""


def test_update_checksum_matches_the_general_algorithm(tmp_path) -> None:
    src = program("hdr.ip.ttl = hdr.ip.ttl - 1;", decls=CK, hfields="ip_t ip;",
                  parser="state start { pk.extract(hdr.h); pk.extract(hdr.ip); "
                         "transition accept; }")
    src = src.replace(
        "control C(inout headers hdr, inout meta_t m) { apply {} }",
        "control C(inout headers hdr, inout meta_t m) { apply { update_checksum(true, "
        "{ hdr.ip.v, hdr.ip.ihl, hdr.ip.tos, hdr.ip.len, hdr.ip.id, hdr.ip.fl, hdr.ip.fo, "
        "hdr.ip.ttl, hdr.ip.p, hdr.ip.s, hdr.ip.d }, hdr.ip.ck, HashAlgorithm.csum16); } }")
    h = Harness(src, tmp_path)
    assert "rt.checksum" not in h.module.SOURCE  # the inline path was taken
    rng = random.Random(2)
    for _ in range(100):
        ip = bytearray(rng.randrange(256) for _ in range(20))
        out, _ = h.run(bytes(4) + bytes(ip))
        ip[8] = (ip[8] - 1) & 0xFF
        ip[10:12] = b"\0\0"
        assert out[4 + 10:4 + 12] == csum16(bytes(ip)).to_bytes(2, "big")
        assert out[4:4 + 10] == ip[:10] and out[4 + 12:] == ip[12:]
