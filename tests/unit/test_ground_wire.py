"""ground/wire: each declaration's build, parse, getters and positions agree
with one another and with known bytes (who may import ground and whom it
imports: tests/unit/test_import_direction.py)."""

from __future__ import annotations

import random
import struct

import pytest

from ground.wire import ethernet, icrc, ipv4, pause, roce, udp
from ground.wire.layout import Bytes, Field, FieldPos, Header

HEADERS = [ethernet.ETHERNET, pause.MAC_CONTROL, pause.PAUSE, pause.PFC, ipv4.IPV4, udp.UDP,
           roce.BTH, roce.RETH, roce.AETH, roce.IMMDT, icrc.ICRC]


def random_values(h: Header, rng: random.Random) -> dict[str, object]:
    return {f.name: rng.randbytes(f.size) if isinstance(f, Bytes) else rng.getrandbits(f.bits)
            for f in h.fields}


def test_the_words_are_the_formats_natural_ones() -> None:
    # the layouts the code had spelled by hand before (BTH "!BBHII", IPv4 ...)
    assert roce.BTH.struct.format == "!BBHII" and roce.BTH.size == 12
    assert roce.RETH.struct.format == "!QII" and roce.RETH.size == 16
    assert roce.AETH.struct.format == "!I" and roce.IMMDT.struct.format == "!I"
    assert ipv4.IPV4.struct.format == "!HHHHBBH4s4s" and ipv4.IPV4.size == 20
    assert udp.UDP.struct.format == "!HHHH"
    assert ethernet.ETHERNET.struct.format == "!6s6sH"
    assert pause.PFC.size == 20 and pause.PAUSE.size == 4
    assert icrc.ICRC.struct.format == "<I"


@pytest.mark.parametrize("h", HEADERS, ids=lambda h: h.name)
def test_build_and_parse_agree_field_for_field(h: Header) -> None:
    rng = random.Random(h.name)
    for _ in range(50):
        vals = random_values(h, rng)
        raw = h.pack(**vals)
        assert len(raw) == h.size
        assert h.parse(raw) == vals
        assert h.unpack(b"\xee" * 3 + raw, 3) == tuple(vals.values())
        buf = bytearray(h.size + 2)
        h.pack_into(buf, 2, **vals)
        assert bytes(buf[2:]) == raw
        for name in h.names:
            assert h.getter(name)(b"\x00" + raw, 1) == vals[name], name
        # the fast paths: positional packers with the rest defaulted, subsets unpacked
        given = [n for n in h.names if rng.random() < 0.5]
        packed = h.packer(*given)(*(vals[n] for n in given))
        assert packed == h.pack(**{n: vals[n] for n in given})
        assert h.parse(packed) == {**h.defaults(), **{n: vals[n] for n in given}}
        assert h.unpacker(*reversed(h.names))(raw) == tuple(reversed(vals.values()))


@pytest.mark.parametrize("h", HEADERS, ids=lambda h: h.name)
def test_a_fields_position_is_where_its_bits_land(h: Header) -> None:
    zero = {f.name: bytes(f.size) if isinstance(f, Bytes) else 0 for f in h.fields}
    for f in h.fields:
        ones = b"\xff" * f.size if isinstance(f, Bytes) else (1 << f.bits) - 1
        raw = h.pack(**{**zero, f.name: ones})
        p = h.position(f.name)
        order = "little" if h.order == "<" else "big"
        word = int.from_bytes(raw[p.offset:p.offset + p.size], order)
        assert word == p.mask << p.shift, f.name
        assert not any(raw[:p.offset]) and not any(raw[p.offset + p.size:]), f.name
        assert raw[p.byte] != 0 and not any(raw[:p.byte]), f.name
        assert h.offset(f.name) == p.byte


def test_a_field_seen_in_a_narrower_or_wider_word() -> None:
    ecn = ipv4.IPV4.position("ecn")        # in the first halfword, with version, IHL, DSCP
    assert ecn == FieldPos(0, 2, 0, 3) and ecn.byte == 1
    assert ecn.within(1, 1) == FieldPos(1, 1, 0, 3)
    assert ecn.within(0, 4) == FieldPos(0, 4, 16, 3)
    dqpn = roce.BTH.position("dqpn")
    assert dqpn.within(5, 3) == FieldPos(5, 3, 0, 0xFFFFFF)
    with pytest.raises(ValueError, match="not in"):
        dqpn.within(6, 2)


def test_known_bytes() -> None:
    # a RoCE WRITE_FIRST's BTH: opcode 6, pad 3, job 9, QPN 0x123, ackreq, PSN 0xABCDEF
    assert roce.BTH.pack(opcode=6, padcnt=3, job_id=9, dqpn=0x123, ackreq=1,
                         psn=0xABCDEF).hex() == "0630ffff0900012380abcdef"
    assert roce.AETH.pack(syndrome=0x60, msn=0x10203).hex() == "60010203"
    # a known header (DF, TTL 64, UDP, 192.168.0.1 -> 192.168.0.199) and its checksum
    hdr = bytes.fromhex("450000730000400040110000c0a80001c0a800c7")
    assert ipv4.checksum(hdr) == 0xB861
    assert ipv4.with_checksum(hdr).hex() == "45000073000040004011b861c0a80001c0a800c7"
    assert ipv4.checksum(ipv4.with_checksum(hdr)) == 0
    # with options (IHL 6): the sum covers them
    assert ipv4.checksum(bytes.fromhex("46000077000040004011" "0000" "c0a80001c0a800c7"
                                       "01010000")) == 0xB65C
    assert ipv4.IPV4.parse(hdr)["flags"] == ipv4.FLAG_DF
    assert ethernet.mac_bytes("02:00:00:00:00:0a") == bytes.fromhex("02000000000a")
    with pytest.raises(ValueError, match="not a MAC"):
        ethernet.mac_bytes("02:00")


def test_fields_sharing_a_word_wrap_and_a_whole_word_is_range_checked() -> None:
    raw = roce.BTH.pack(opcode=4, psn=(1 << 24) + 5, dqpn=-1)
    assert roce.BTH.parse(raw)["psn"] == 5 and roce.BTH.parse(raw)["dqpn"] == 0xFFFFFF
    assert roce.BTH.parse(raw)["job_id"] == 0           # its neighbour untouched
    with pytest.raises(struct.error):
        roce.BTH.pack(opcode=256)
    with pytest.raises(struct.error):
        roce.RETH.packer("va", "rkey", "dma_len")(0, 0, 1 << 32)


def test_declarations_that_cannot_be_words_are_refused() -> None:
    with pytest.raises(ValueError, match="cannot be cut"):
        Header("odd", Field("a", 3), Field("b", 4))
    with pytest.raises(ValueError, match="cannot be cut"):
        Header("split", Field("a", 4), Bytes("b", 2), Field("c", 4))
    with pytest.raises(ValueError, match="two fields"):
        Header("twice", Field("a", 8), Field("a", 8))
    with pytest.raises(ValueError, match="identifier"):
        Header("kw", Field("from", 8))
    with pytest.raises(ValueError, match="little-endian"):
        Header("le", Field("a", 4), Field("b", 4), order="<")
    with pytest.raises(ValueError, match="does not fit"):
        Field("a", 4, 16)
    with pytest.raises(KeyError, match="no field"):
        roce.BTH.position("qpn")
    with pytest.raises(KeyError, match="no field"):
        roce.BTH.unpacker("opcode", "qpn")


def test_a_64_bit_word_holds_one_field_only() -> None:
    # two 32-bit fields stay two words: PyPy's JIT would make a shared
    # 64-bit word a big integer
    h = Header("pair", Field("a", 8), Field("b", 24), Field("c", 32))
    assert h.struct.format == "!II"
    assert Header("wide", Field("x", 64)).struct.format == "!Q"


def test_the_icrc_masks_the_variant_fields_by_their_declared_places() -> None:
    from hosts.roce.sim import ipv4_udp_packet
    from hosts.roce.wire import encode_packet

    def ps(n: int) -> bytes:
        return icrc.pseudo_header("10.0.0.1", "10.0.0.2", 0xC001, n)

    roce_pkt = encode_packet(ps, roce.Opcode.SEND_ONLY, 7, 1, payload=b"data")
    ip = bytearray(ipv4_udp_packet("10.0.0.1", 0xC001, "10.0.0.2", 4791, 2, roce_pkt))
    assert icrc.icrc_ok_ipv4(ip)
    variant = {ipv4.IPV4.offset("dscp"), ipv4.IPV4.offset("ttl"), ipv4.IPV4.offset("checksum"),
               ipv4.IPV4.offset("checksum") + 1, 20 + udp.UDP.offset("checksum"),
               20 + udp.UDP.offset("checksum") + 1, 28 + roce.BTH.offset("job_id")}
    assert variant == {1, 8, 10, 11, 26, 27, 32}
    for i in range(len(ip) - icrc.ICRC_LEN):
        bad = bytearray(ip)
        bad[i] ^= 0x20
        assert icrc.icrc_ok_ipv4(bad) == (i in variant), i
