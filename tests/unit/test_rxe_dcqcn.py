"""The rxe hosts' DCQCN shim, its logic without rxe: frames, the packet filter,
the notification and reaction points, the HTB class rates."""

from __future__ import annotations

import socket
import struct

import pytest

from hosts.roce.constants import ECN_CE, ECN_ECT0, ROCE_UDP_PORT, Opcode
from hosts.roce.dcqcn import Dcqcn, DcqcnParams
from hosts.roce.rxe_dcqcn import (
    SNAP_BYTES,
    Arrival,
    NotificationPoint,
    ReactionPoint,
    ShimError,
    classify_frame,
    cnp_frame,
    htb_rate_bytes,
    qp_class_id,
    roce_filter,
    sport_match_keys,
)
from hosts.roce.scale import Scale
from hosts.roce.wire import decode, icrc_ok_ipv4

MAC_A, MAC_GW = "02:00:00:00:03:01", "02:00:00:00:00:03"


def roce_frame(*, tos: int = ECN_CE, dport: int = ROCE_UDP_PORT, opcode: int = 0x0A,
               dqpn: int = 0x12, proto: int = socket.IPPROTO_UDP, frag: int = 0,
               options: bytes = b"", src: str = "10.0.1.1", dst: str = "10.0.3.1",
               ethertype: int = 0x0800) -> bytes:
    ihl = 5 + len(options) // 4
    body = struct.pack("!BBHII", opcode, 0, 0xFFFF, dqpn, 7) + b"\x00" * 64
    udp = struct.pack("!HHHH", 0xC001, dport, 8 + len(body), 0)
    ip = struct.pack("!BBHHHBBH4s4s", 0x40 | ihl, tos, 4 * ihl + len(udp) + len(body), 0, frag,
                     64, proto, 0, socket.inet_aton(src), socket.inet_aton(dst)) + options
    return (bytes.fromhex("020000000301020000000003") + struct.pack("!H", ethertype) + ip
            + udp + body)


def run_cbpf(prog: list[tuple[int, int, int, int]], pkt: bytes) -> int:
    """A classic-BPF interpreter for the instructions the shim's filter uses:
    the bytes the kernel would pass to the socket (0 = dropped)."""
    a = x = 0
    pc = 0
    while True:
        code, jt, jf, k = prog[pc]
        pc += 1
        if code == 0x28:
            if k + 2 > len(pkt):
                return 0
            a = struct.unpack_from("!H", pkt, k)[0]
        elif code == 0x30:
            if k >= len(pkt):
                return 0
            a = pkt[k]
        elif code == 0xB1:
            x = (pkt[k] & 0x0F) * 4
        elif code == 0x48:
            if x + k + 2 > len(pkt):
                return 0
            a = struct.unpack_from("!H", pkt, x + k)[0]
        elif code == 0x50:
            if x + k >= len(pkt):
                return 0
            a = pkt[x + k]
        elif code == 0x54:
            a &= k
        elif code == 0x15:
            pc += jt if a == k else jf
        elif code == 0x45:
            pc += jt if a & k else jf
        elif code == 0x06:
            return min(k, len(pkt))
        else:
            raise AssertionError(f"unexpected BPF opcode {code:#x}")


# ---------------------------------------------------------------------------
# frames and the filter


def test_cnp_frame_is_a_valid_roce_cnp_to_the_peer_qp() -> None:
    f = cnp_frame(src_mac=MAC_A, dst_mac=MAC_GW, src_ip="10.0.3.1", dst_ip="10.0.1.1",
                  dqpn=0x000123)
    assert f[:6] == bytes.fromhex("020000000003") and f[6:12] == bytes.fromhex("020000000301")
    ip = f[14:]
    # IPv4 header checksum verifies; DF, identification 0, not ECN-capable
    assert sum(struct.unpack("!10H", ip[:20])) % 0xFFFF == 0
    assert struct.unpack_from("!HH", ip, 4) == (0, 0x4000) and ip[1] & 3 == 0
    assert struct.unpack_from("!H", ip, 22)[0] == ROCE_UDP_PORT
    assert icrc_ok_ipv4(ip)           # rxe and the udp provider check it
    p = decode(ip[28:])
    assert p.opcode == Opcode.CNP and p.dqpn == 0x123
    assert classify_frame(f) == Arrival("cnp", "10.0.3.1", "10.0.1.1", 0x123)


def test_classify_sees_ce_marked_roce_and_cnps_only() -> None:
    assert classify_frame(roce_frame()) == Arrival("ce", "10.0.1.1", "10.0.3.1", 0x12)
    assert classify_frame(roce_frame(options=b"\x01" * 4)) is not None   # IHL 6
    assert classify_frame(roce_frame(tos=ECN_ECT0)) is None       # not marked
    assert classify_frame(roce_frame(tos=ECN_ECT0, opcode=Opcode.CNP)).kind == "cnp"  # type: ignore[union-attr]
    assert classify_frame(roce_frame(dport=4792)) is None
    assert classify_frame(roce_frame(proto=socket.IPPROTO_TCP)) is None
    assert classify_frame(roce_frame(frag=5)) is None             # a later fragment
    assert classify_frame(roce_frame(ethertype=0x86DD)) is None
    assert classify_frame(roce_frame()[:40]) is None              # truncated


@pytest.mark.parametrize("frame,passes", [
    (roce_frame(), True),
    (roce_frame(options=b"\x01" * 8), True),
    (roce_frame(tos=ECN_ECT0, opcode=Opcode.CNP), True),
    (roce_frame(tos=ECN_ECT0), False),
    (roce_frame(tos=0x02 | (46 << 2)), False),      # DSCP set, ECT(0): not CE
    (roce_frame(dport=53), False),
    (roce_frame(proto=socket.IPPROTO_TCP), False),
    (roce_frame(frag=0x2001), False),
    (roce_frame(ethertype=0x0806), False),
])
def test_socket_filter_agrees_with_classify(frame: bytes, passes: bool) -> None:
    n = run_cbpf(roce_filter(), frame)
    assert (n > 0) == passes
    assert (classify_frame(frame) is not None) == passes
    if passes:
        assert n == min(SNAP_BYTES, len(frame))
        assert classify_frame(frame[:n]) == classify_frame(frame)   # the snap is enough


# ---------------------------------------------------------------------------
# notification point


def test_notification_point_one_cnp_per_qp_per_interval() -> None:
    np_ = NotificationPoint(cnp_interval_ns=50_000_000)
    np_.register(0x12, "10.0.1.1", 0x77)
    np_.register(0x13, "10.0.2.1", 0x88)
    ce12 = Arrival("ce", "10.0.1.1", "10.0.3.1", 0x12)
    ce13 = Arrival("ce", "10.0.2.1", "10.0.3.1", 0x13)
    assert np_.on_ce(ce12, 1_000) == ("10.0.1.1", 0x77)
    assert np_.on_ce(ce12, 40_000_000) is None                    # within the interval
    assert np_.on_ce(ce13, 40_000_000) == ("10.0.2.1", 0x88)      # per QP
    assert np_.on_ce(ce12, 50_001_000) == ("10.0.1.1", 0x77)
    assert (np_.qps[0x12].ce_pkts, np_.qps[0x12].cnps_sent) == (3, 2)
    # a QP of no flow here, or a packet from another host than the QP's peer
    assert np_.on_ce(Arrival("ce", "10.0.1.1", "10.0.3.1", 0x99), 10**9) is None
    assert np_.on_ce(Arrival("ce", "10.0.9.1", "10.0.3.1", 0x12), 10**9) is None
    assert np_.unknown_qp == 2
    with pytest.raises(ValueError):
        NotificationPoint(-1)


# ---------------------------------------------------------------------------
# reaction point and the HTB classes


def dcqcn(preset: str = "zhu2015") -> Dcqcn:
    scale = Scale(slowdown=10000, nic_rate_bps=40e9)            # 4 Mb/s links
    return Dcqcn(DcqcnParams.for_scale(scale, preset=preset), 0)


def test_reaction_point_cuts_the_qps_class_rate_on_a_cnp_and_recovers() -> None:
    rp = ReactionPoint()
    a, b = dcqcn(), dcqcn()
    ca = rp.register(0x77, 0xC001, a)
    cb = rp.register(0x78, 0xC002, b)
    assert ca != cb and {ca, cb} == {qp_class_id(0), qp_class_id(1)}
    line = htb_rate_bytes(4e6)
    assert rp.changed() == [(ca, line), (cb, line)]               # first: both at line rate
    assert rp.changed() == []
    rp.on_cnp(Arrival("cnp", "10.0.3.1", "10.0.1.1", 0x77), 1_000_000)
    ch = rp.changed()
    assert [c for c, _ in ch] == [ca]                             # only the QP it names
    cut = ch[0][1]
    assert cut == htb_rate_bytes(a.rate_bps) and cut < line
    assert a.stats.cnps == 1 and b.stats.cnps == 0
    with pytest.raises(ShimError, match="both send from UDP port 49153"):
        rp.register(0x79, 0xC001, dcqcn())          # a's port: its class would take both
    rp.on_cnp(Arrival("cnp", "10.0.3.1", "10.0.1.1", 0x55), 2_000_000)
    assert rp.unknown_qp == 1
    # the rate-increase timer brings the rate back up
    due = rp.next_deadline()
    assert due is not None and due > 1_000_000
    rp.on_timers(due)
    ch = rp.changed()
    assert [c for c, _ in ch] == [ca] and ch[0][1] > cut


def test_htb_rates_and_sport_match() -> None:
    assert htb_rate_bytes(4e6) == 500_000
    assert htb_rate_bytes(1.0) == 16                              # the floor HTB can hold
    for bad in (0.0, -5.0, float("nan")):
        with pytest.raises(ShimError):
            htb_rate_bytes(bad)
    with pytest.raises(ShimError, match="32-bit"):
        htb_rate_bytes(400e9)
    assert sport_match_keys(0xC001) == ["0x00110000/0x00ff0000+8", "0xc00112b7/0xffffffff+20"]
    with pytest.raises(ShimError):
        sport_match_keys(0)
    assert qp_class_id(0) == 0x10010
    with pytest.raises(ShimError, match="sending QPs"):
        qp_class_id(0xFFFF)
