"""Frames pinned byte for byte: every path that builds a frame (the RoCE
codec, the transport's own header building, the rxe shim's CNP, the switch's
PFC frames, the simulated wire and NIC) must keep producing exactly these
bytes. The hex was taken from the code before the wire formats moved to
ground/wire; a change here is a change on the wire."""

from __future__ import annotations

from ground.wire.icrc import check_icrc, pseudo_header
from ground.wire.pause import parse_pause, pfc_frame
from hosts.roce import (
    Access,
    Context,
    FixedRate,
    RecvWR,
    Scale,
    SendWR,
    SimWire,
    WROpcode,
    connect_pair,
    wire,
)
from hosts.roce.constants import AETH_SYNDROME_ACK, Opcode
from hosts.roce.rxe.frames import cnp_frame, parse_bth
from hosts.roce.sim import ipv4_udp_packet
from testbed.sim.host import SimNic
from testbed.sim.loop import EventLoop

SRC, DST, SPORT = "10.0.1.1", "10.0.2.2", 0xC007


def pseudo(n: int) -> bytes:
    return pseudo_header(SRC, DST, SPORT, n)


# BTH (opcode 0x06, ackreq, job 9, dqpn 0x123, PSN 0xABCDEF, pad 3), RETH, 5 bytes, pad, ICRC
WRITE_FIRST = ("0630ffff0900012380abcdef00001000200030000000007700001000"
               "68656c6c6f0000003e4f11eb")
ACK = "1100ffff03000456000001021f00002a6f8bf5c1"
SEND_ONLY_IMM = "0580ffff0000078900000007deadbeef01020304050607087c4d037e"
CNP = "8100ffff400abcde" "00000000" + "00" * 16 + "b71ad8a8"


def test_the_codec_builds_the_pinned_packets() -> None:
    assert wire.encode_packet(pseudo, Opcode.RDMA_WRITE_FIRST, 0x123, 0xABCDEF, job_id=9,
                              ackreq=True, reth=(0x1000_2000_3000, 0x77, 4096),
                              payload=b"hello").hex() == WRITE_FIRST
    assert wire.encode_packet(pseudo, Opcode.ACK, 0x456, 0x000102, job_id=3,
                              aeth=(AETH_SYNDROME_ACK, 0x2A)).hex() == ACK
    assert wire.encode_packet(pseudo, Opcode.SEND_ONLY_IMM, 0x789, 7, se=True, imm=0xDEADBEEF,
                              payload=bytes(range(1, 9))).hex() == SEND_ONLY_IMM
    assert wire.encode_cnp(pseudo, 0xABCDE).hex() == CNP


def test_the_codec_reads_the_pinned_packets() -> None:
    p = wire.decode(bytes.fromhex(WRITE_FIRST))
    assert (p.opcode, p.se, p.padcnt, p.pkey, p.job_id, p.dqpn, p.ackreq, p.psn) == (
        Opcode.RDMA_WRITE_FIRST, False, 3, 0xFFFF, 9, 0x123, True, 0xABCDEF)
    assert p.reth == (0x1000_2000_3000, 0x77, 4096) and bytes(p.payload) == b"hello"
    assert p.icrc == 0xEB114F3E          # stored least significant byte first
    p = wire.decode(bytes.fromhex(ACK))
    assert (p.opcode, p.job_id, p.dqpn, p.psn, p.aeth) == (Opcode.ACK, 3, 0x456, 0x102,
                                                           (AETH_SYNDROME_ACK, 0x2A))
    p = wire.decode(bytes.fromhex(SEND_ONLY_IMM))
    assert (p.se, p.imm, bytes(p.payload)) == (True, 0xDEADBEEF, bytes(range(1, 9)))
    p = wire.decode(bytes.fromhex(CNP))
    assert (p.opcode, p.job_id, p.dqpn, len(p.payload)) == (Opcode.CNP, 0x40, 0xABCDE, 0)
    for golden in (WRITE_FIRST, ACK, SEND_ONLY_IMM, CNP):
        raw = bytes.fromhex(golden)
        assert check_icrc(pseudo(len(raw)), raw)


def test_the_transport_sends_the_pinned_packets() -> None:
    """The transport builds its headers itself (the hot path): a WRITE of two
    packets at path MTU 256, a WRITE_WITH_IMM of one, and the ACKs."""
    w = SimWire(record=True)
    a = Context(w.provider("10.0.0.1"), Scale(), rate_controller_factory=lambda: FixedRate(1e9))
    b = Context(w.provider("10.0.0.2"), Scale(), rate_controller_factory=lambda: FixedRate(1e9))
    pa, pb = a.alloc_pd(), b.alloc_pd()
    src = bytearray((i * 7 + 3) % 251 for i in range(300))
    ma = pa.reg_mr(src, Access.LOCAL_WRITE)
    mb = pb.reg_mr(bytearray(1024), Access.LOCAL_WRITE | Access.REMOTE_WRITE)
    ca, cb = a.create_cq(), b.create_cq()
    qa, qb = pa.create_qp(ca, job_id=4), pb.create_qp(cb, job_id=4)
    connect_pair(qa, qb, psn_a=0x123456, psn_b=0x10, path_mtu=256)
    assert (qa.qp_num, qb.qp_num, mb.addr, mb.rkey) == (17, 17, 0x10000000, 256)
    qb.post_recv(RecvWR(9, None))
    qa.post_send(SendWR(1, WROpcode.RDMA_WRITE, ma.sge(0, 300), remote_addr=mb.addr + 8,
                        rkey=mb.rkey))
    qa.post_send(SendWR(2, WROpcode.RDMA_WRITE_WITH_IMM, ma.sge(0, 10), remote_addr=mb.addr,
                        rkey=mb.rkey, imm_data=0x01020304))
    assert w.run(lambda: len(ca) >= 2, 5)
    qb._send_cnp()
    recs = w.records
    assert recs is not None
    assert [(r.src_ip, r.sport, r.dport, r.ecn) for r in recs] == (
        [("10.0.0.1", 0xC000, 4791, 2)] * 3 + [("10.0.0.2", 0xC000, 4791, 0)] * 3)
    first = recs[0].data
    assert len(first) == 28 + 256 + 4
    assert first[:28].hex() == "0600ffff04000011001234560000000010000008000001000000012c"
    assert first[28:-4] == src[:256] and first[-4:].hex() == "6ffdda45"
    assert recs[1].data.hex() == (
        "0800ffff0400001180123457262d343b424950575e656c737a81888f969da4abb2b9c0c7ced5dce3"
        "eaf1f8040b121920272e353c434a5158c21c0bda")
    assert recs[2].data.hex() == (
        "0b20ffff04000011801234580000000010000000000001000000000a01020304030a11181f262d34"
        "3b4200006403854a")
    assert recs[3].data.hex() == "1100ffff04000011001234571f0000012f0a2245"
    assert recs[4].data.hex() == "1100ffff04000011001234581f00000244cc7b5e"
    assert recs[5].data.hex() == ("8100ffff40000011" "00000000" + "00" * 16 + "5b65ef9f")


CNP_FRAME = ("0200000000fe020000000001" "0800"
             "4500003c00004000401123af0a0001010a000202"      # IPv4: DF, TTL 64, checksum
             "c12312b700280000"                              # UDP: checksum 0
             "8100ffff40000011" "00000000" + "00" * 16 + "e8f6c9c6")


def test_the_rxe_shim_builds_the_pinned_cnp_frame_and_reads_it() -> None:
    frame = cnp_frame(src_mac="02:00:00:00:00:01", dst_mac="02:00:00:00:00:fe", src_ip=SRC,
                      dst_ip=DST, dqpn=0x11, sport=0xC123)
    assert frame.hex() == CNP_FRAME
    b = parse_bth(frame)
    assert b is not None
    assert (b.src_ip, b.dst_ip, b.tos, b.opcode, b.dqpn, b.psn, b.syndrome, b.sport) == (
        SRC, DST, 0, Opcode.CNP, 0x11, 0, None, 0xC123)


PFC = ("0180c2000001020000000001" "8808" "0101" "0028"
       "0000" "0000" "0000" "ffff" "0000" "0007" "0000" "0000" + "00" * 26)
PFC_XON = ("0180c2000001020000000001" "8808" "0101" "0001" + "00" * 16 + "00" * 26)


def test_the_switch_builds_the_pinned_pfc_frames_and_reads_them() -> None:
    mac = bytes.fromhex("020000000001")
    assert pfc_frame(mac, {3: 0xFFFF, 5: 7}).hex() == PFC
    assert pfc_frame(mac, {0: 0}).hex() == PFC_XON
    assert parse_pause(bytes.fromhex(PFC)) == {3: 0xFFFF, 5: 7}
    assert parse_pause(bytes.fromhex(PFC_XON)) == {0: 0}
    # 802.3x PAUSE: one timer for every class
    pause = bytes.fromhex("0180c2000001020000000001" "8808" "0001" "0102") + bytes(42)
    assert parse_pause(pause) == dict.fromkeys(range(8), 0x0102)


def test_the_simulated_wire_and_nic_build_the_pinned_headers() -> None:
    assert ipv4_udp_packet(SRC, SPORT, DST, 4791, 2, b"\xaa\xbb\xcc", ident=0x1234).hex() == (
        "4502001f12344000401100000a0001010a000202" "c00712b7000b0000" "aabbcc")
    sent: list[bytes] = []

    class Line:
        def send(self, frame: bytes, rate_bps: float | None = None) -> None:
            sent.append(frame)

    nic = SimNic(EventLoop(), SRC, "02:00:00:00:00:01", "02:00:00:00:00:fe")
    nic.line = Line()  # type: ignore[assignment]
    nic.send(SPORT, DST, 4791, (b"\x0a" * 12, b"\x01\x02"), 2, dscp=26)
    assert [f.hex() for f in sent] == [
        "0200000000fe020000000001" "0800"
        "456a002a00004000401123570a0001010a000202"     # TOS: DSCP 26, ECT(0)
        "c00712b700160000" + "0a" * 12 + "0102"]


def test_the_filters_match_the_pinned_offsets() -> None:
    """Socket filters and tc keys find fields by their offsets: the programs
    and keys as they were before the formats moved."""
    from hosts.roce.rxe.frames import roce_filter
    from hosts.roce.shaping import qp_match_keys
    from hosts.roce.udp_provider import roce_port_filter

    assert qp_match_keys("10.0.2.5", 0x123456) == [
        "0x00110000/0x00ff0000+8", "0x0a000205/0xffffffff+16", "0x000012b7/0x0000ffff+20",
        "0x00123456/0x00ffffff+32"]
    assert roce_port_filter("10.0.0.1", 4791) == [
        (32, 0, 0, 16), (21, 0, 4, 0x0A000001), (177, 0, 0, 0), (72, 0, 0, 2), (21, 0, 1, 4791),
        (6, 0, 0, 0xFFFFFFFF), (6, 0, 0, 0)]
    assert roce_filter() == [
        (40, 0, 0, 12), (21, 0, 13, 0x0800), (48, 0, 0, 23), (21, 0, 11, 17), (40, 0, 0, 20),
        (69, 9, 0, 0x1FFF), (177, 0, 0, 14), (72, 0, 0, 16), (21, 0, 6, 4791), (48, 0, 0, 15),
        (84, 0, 0, 3), (21, 2, 0, 3), (80, 0, 0, 22), (21, 0, 1, 0x81), (6, 0, 0, 128),
        (6, 0, 0, 0)]
    assert roce_filter(every_roce_frame=True) == [
        (40, 0, 0, 12), (21, 0, 8, 0x0800), (48, 0, 0, 23), (21, 0, 6, 17), (40, 0, 0, 20),
        (69, 4, 0, 0x1FFF), (177, 0, 0, 14), (72, 0, 0, 16), (21, 0, 1, 4791), (6, 0, 0, 128),
        (6, 0, 0, 0)]
