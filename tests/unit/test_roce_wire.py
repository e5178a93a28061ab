"""RoCE wire format: encode/decode round trips, the ICRC, scapy dissection."""

import random

import pytest
from scapy.contrib import roce as scapy_roce
from scapy.layers.inet import IP, UDP
from scapy.packet import Raw

from ground.wire import icrc as I
from ground.wire import roce
from hosts.roce import scapy_layers as L
from hosts.roce import wire
from hosts.roce.constants import (
    AETH_SYNDROME_ACK,
    AETH_SYNDROME_NAK_PSN_SEQ,
    CNP_BTH_BYTE4,
    OPS_WITH_IMM,
    OPS_WITH_RETH,
    Opcode,
)

SRC, DST, SPORT = "10.0.1.1", "10.0.2.2", 0xC007


def pseudo(n):
    return I.pseudo_header(SRC, DST, SPORT, n)


def build(op, payload=b"", **kw):
    """A packet of kind ``op`` with the headers that opcode carries."""
    if op == Opcode.CNP:
        return wire.encode_cnp(pseudo, dqpn=0x123)
    if op in OPS_WITH_RETH:
        kw.setdefault("reth", (0x1000_2000_3000, 0x77, 4096))
    if op in OPS_WITH_IMM:
        kw.setdefault("imm", 0xDEADBEEF)
    if op == Opcode.ACK:
        kw.setdefault("aeth", (AETH_SYNDROME_ACK, 42))
    return wire.encode_packet(pseudo, op, 0x123, 0xABCDEF, job_id=9, ackreq=True,
                              payload=payload, **kw)


def ip_packet(roce: bytes, **ip_kw) -> bytes:
    ip_kw.setdefault("id", 0)
    ip_kw.setdefault("flags", "DF")
    return bytes(IP(src=SRC, dst=DST, **ip_kw) / UDP(sport=SPORT, dport=4791) / Raw(roce))


@pytest.mark.parametrize("op", list(Opcode), ids=lambda o: o.name)
def test_round_trip_every_kind(op):
    payload = b"" if op in (Opcode.ACK, Opcode.CNP) else bytes(range(37))
    raw = build(op, payload)
    assert len(raw) % 4 == 0
    p = wire.decode(raw)
    assert p.opcode == op
    assert p.dqpn == 0x123
    if op == Opcode.CNP:
        assert p.job_id == CNP_BTH_BYTE4 and p.psn == 0 and len(raw) == 12 + 16 + 4
        return
    assert (p.job_id, p.psn, p.ackreq) == (9, 0xABCDEF, True)
    assert bytes(p.payload) == payload
    assert p.padcnt == (-len(payload) & 3)
    assert p.reth == ((0x1000_2000_3000, 0x77, 4096) if op in OPS_WITH_RETH else None)
    assert p.imm == (0xDEADBEEF if op in OPS_WITH_IMM else None)
    assert p.aeth == ((AETH_SYNDROME_ACK, 42) if op == Opcode.ACK else None)
    assert I.check_icrc(pseudo(len(raw)), raw)


@pytest.mark.parametrize("op", [Opcode.SEND_ONLY, Opcode.RDMA_WRITE_FIRST, Opcode.ACK,
                                Opcode.CNP, Opcode.RDMA_WRITE_ONLY_IMM])
def test_icrc_agrees_with_scapy_contrib(op):
    roce = build(op, b"\x11" * 64)
    ip = ip_packet(roce)
    # scapy.contrib.roce computes the ICRC itself over the same IP/UDP/BTH/rest
    p = wire.decode(roce)
    ref = (IP(src=SRC, dst=DST, id=0, flags="DF") / UDP(sport=SPORT, dport=4791)
           / scapy_roce.BTH(opcode=p.opcode, padcount=p.padcnt, pkey=p.pkey,
                            fecn=p.job_id >> 7, becn=(p.job_id >> 6) & 1, resv6=p.job_id & 0x3F,
                            dqpn=p.dqpn, ackreq=p.ackreq, psn=p.psn)
           / Raw(roce[12:-4]))
    assert bytes(ref) == ip
    assert I.icrc_of_ipv4(ip) == I.ICRC.unpack(roce[-4:])[0]


def test_icrc_ignores_masked_fields_only():
    roce = bytearray(build(Opcode.SEND_ONLY, b"abcd" * 8))
    good = I.ICRC.unpack(roce[-4:])[0]
    # TOS (ECN!), TTL and job id are masked: switches may rewrite them
    assert I.icrc_of_ipv4(ip_packet(bytes(roce), tos=3, ttl=7)) == good
    roce[4] = 0xEE
    assert I.check_icrc(pseudo(len(roce)), roce)
    # the PSN, the payload and the addresses are covered
    for i in (9, 30):
        bad = bytearray(roce)
        bad[i] ^= 1
        assert not I.check_icrc(pseudo(len(bad)), bad)
    assert not I.check_icrc(I.pseudo_header(SRC, "10.0.2.3", SPORT, len(roce)), roce)


def test_decode_rejects_truncated_packets():
    with pytest.raises(wire.WireError):
        wire.decode(b"\x00" * 15)
    raw = build(Opcode.RDMA_WRITE_FIRST, b"")
    with pytest.raises(wire.WireError):
        wire.decode(raw[:12] + raw[-4:])


@pytest.mark.parametrize("op", list(Opcode), ids=lambda o: o.name)
def test_scapy_dissects_every_kind(op):
    payload = b"" if op in (Opcode.ACK, Opcode.CNP) else b"\x42" * 8
    pkt = IP(ip_packet(build(op, payload)))
    bth = pkt[L.BTH]
    assert bth.opcode == op and bth.dqpn == 0x123
    assert L.icrc_ok(pkt)
    if op == Opcode.CNP:
        assert pkt.haslayer(L.CNP) and bth.job_id == CNP_BTH_BYTE4
        return
    assert bth.job_id == 9 and bth.psn == 0xABCDEF and bth.ackreq == 1
    if op in OPS_WITH_RETH:
        assert pkt[L.RETH].va == 0x1000_2000_3000 and pkt[L.RETH].dma_len == 4096
    else:
        assert not pkt.haslayer(L.RETH)
    if op in OPS_WITH_IMM:
        assert pkt[L.ImmDt].imm == 0xDEADBEEF
    else:
        assert not pkt.haslayer(L.ImmDt)
    if op == Opcode.ACK:
        assert pkt[L.AETH].syndrome == AETH_SYNDROME_ACK and pkt[L.AETH].msn == 42
    else:
        assert bytes(pkt[Raw].load) == payload


def test_scapy_built_packet_decodes_with_wire():
    pkt = (IP(src=SRC, dst=DST, id=0, flags="DF") / UDP(sport=SPORT, dport=4791)
           / L.BTH(opcode=Opcode.ACK, job_id=3, dqpn=5, psn=99)
           / L.AETH(syndrome=AETH_SYNDROME_NAK_PSN_SEQ, msn=1))
    raw = bytes(pkt)
    roce = raw[28:]
    p = wire.decode(roce)
    assert (p.opcode, p.job_id, p.dqpn, p.psn, p.aeth) == (
        Opcode.ACK, 3, 5, 99, (AETH_SYNDROME_NAK_PSN_SEQ, 1))
    assert I.check_icrc(pseudo(len(roce)), roce)
    cnp = bytes(IP(src=SRC, dst=DST, id=0, flags="DF") / UDP(sport=SPORT, dport=4791)
                / L.cnp(0x77))
    assert cnp[28:] == wire.encode_cnp(pseudo, 0x77)


@pytest.mark.parametrize("payload, pad", [(b"\x5a" * 1024, b""), (b"xyz", b"\x00"), (b"", b"")])
def test_a_senders_icrc_from_its_pseudo_header_crc_is_the_packets(payload, pad):
    import zlib

    hdr = build(Opcode.RDMA_WRITE_FIRST, b"")[:28]        # BTH + RETH, job id in byte 4
    roce_len = len(hdr) + len(payload) + len(pad) + 4
    ph = pseudo(roce_len)
    crc = I.icrc_after(zlib.crc32(ph), hdr, memoryview(payload), pad)
    assert crc == I.icrc_parts(ph, hdr, payload, pad)
    assert I.check_icrc(ph, hdr + payload + pad + I.ICRC.pack(crc))


@pytest.mark.parametrize("layer, decl", [(L.BTH, roce.BTH), (L.RETH, roce.RETH),
                                         (L.AETH, roce.AETH), (L.ImmDt, roce.IMMDT)],
                         ids=["BTH", "RETH", "AETH", "ImmDt"])
def test_the_scapy_layers_are_the_ground_declarations(layer, decl):
    """Same fields, same names, same bytes both ways."""
    assert [f.name for f in layer.fields_desc if f.name != "icrc"] == list(decl.names)
    rng = random.Random(decl.name)
    trailer = bytes(4) if layer is L.BTH else b""          # the BTH layer ends in the ICRC
    for _ in range(20):
        vals = {f.name: rng.getrandbits(f.bits) for f in decl.fields}
        raw = decl.pack(**vals)
        got = layer(raw + trailer)
        assert {n: getattr(got, n) for n in decl.names} == vals
        built = bytes(layer(**vals, **({"icrc": 0} if layer is L.BTH else {})))
        assert built == raw + trailer


def test_scapy_builds_the_frame_the_codec_builds():
    """A WRITE_FIRST with RETH and a padded payload, and an ACK, built by the
    scapy layers (their ICRC computed by scapy's build) and by hosts.roce.wire:
    the same IPv4 packet byte for byte."""
    roce = build(Opcode.RDMA_WRITE_FIRST, b"hello")
    pkt = (IP(src=SRC, dst=DST, id=0, flags="DF") / UDP(sport=SPORT, dport=4791, chksum=0)
           / L.BTH(opcode=Opcode.RDMA_WRITE_FIRST, padcnt=3, job_id=9, dqpn=0x123, ackreq=1,
                   psn=0xABCDEF)
           / L.RETH(va=0x1000_2000_3000, rkey=0x77, dma_len=4096) / Raw(b"hello\0\0\0"))
    assert bytes(pkt) == bytes(IP(src=SRC, dst=DST, id=0, flags="DF")
                               / UDP(sport=SPORT, dport=4791, chksum=0) / Raw(roce))
    ack = build(Opcode.ACK)
    pkt = (IP(src=SRC, dst=DST, id=0, flags="DF") / UDP(sport=SPORT, dport=4791)
           / L.BTH(opcode=Opcode.ACK, job_id=9, dqpn=0x123, ackreq=1, psn=0xABCDEF)
           / L.AETH(syndrome=AETH_SYNDROME_ACK, msn=42))
    assert bytes(pkt)[28:] == ack
