"""The rxe hosts' DCQCN shim, its logic without rxe: frames, the packet filter,
the notification and reaction points, the HTB class rates, the byte counter
fed by the QPs' class counters (a fake shaper's)."""

from __future__ import annotations

import socket
import struct

import pytest
from cbpf import run_cbpf

from ground.wire.icrc import icrc_ok_ipv4
from hosts.roce.constants import ECN_CE, ECN_ECT0, ROCE_UDP_PORT, Opcode
from hosts.roce.dcqcn import Dcqcn, DcqcnParams
from hosts.roce.rxe.dcqcn_points import (
    ClassByteCounter,
    NotificationPoint,
    ReactionPoint,
    ShimError,
)
from hosts.roce.rxe.frames import SNAP_BYTES, Arrival, classify_frame, cnp_frame, roce_filter
from hosts.roce.scale import Scale
from hosts.roce.shaping import ShapingError, htb_rate_bytes, qp_class_id, qp_match_keys
from hosts.roce.wire import decode

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
    ca = rp.register(0x77, "10.0.3.1", 0x101, a)
    cb = rp.register(0x78, "10.0.3.1", 0x102, b)
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
    with pytest.raises(ShimError, match="both send to QP 0x101 at 10.0.3.1"):
        rp.register(0x79, "10.0.3.1", 0x101, dcqcn())    # a's peer: its class would take both
    rp.on_cnp(Arrival("cnp", "10.0.3.1", "10.0.1.1", 0x55), 2_000_000)
    assert rp.unknown_qp == 1
    # the rate-increase timer brings the rate back up
    due = rp.next_deadline()
    assert due is not None and due > 1_000_000
    rp.on_timers(due)
    ch = rp.changed()
    assert [c for c, _ in ch] == [ca] and ch[0][1] > cut


class FakeShaper:
    """The class counters of an HTB shaper, as the test sets them."""

    def __init__(self, counts: dict[int, int]) -> None:
        self.counts = counts
        self.dumps = 0
        self.error: str | None = None

    def class_bytes(self) -> dict[int, int]:
        self.dumps += 1
        if self.error is not None:
            raise ShapingError(self.error)
        return dict(self.counts)


MS = 1_000_000


def test_byte_counter_follows_the_qps_class_counter() -> None:
    rp = ReactionPoint()
    a, b = dcqcn("connectx"), dcqcn("connectx")
    big = a.params.byte_counter_bytes
    assert big == 32767
    ca, cb = rp.register(0x77, "10.0.3.1", 0x101, a), rp.register(0x78, "10.0.3.1", 0x102, b)
    rp.changed()
    shaper = FakeShaper({ca: 1000, cb: 500, 0x10002: 99})
    bc = ClassByteCounter(rp, shaper, min_interval_ns=10 * MS)
    # at line rate no byte counter runs: nothing to read for
    assert bc.next_read_ns() is None
    bc.read_if_due(5 * MS, events=False)
    assert shaper.dumps == 0
    # a CNP: the bytes so far are read first (the baseline), then a's rate is cut
    bc.read_if_due(10 * MS, events=True)
    rp.on_cnp(Arrival("cnp", "10.0.3.1", "10.0.1.1", 0x77), 10 * MS)
    rate = dict(rp.changed())[ca]
    assert a.bytes_to_increase() == big and b.bytes_to_increase() is None
    # the next read: when a's class could have sent the byte counter's bytes
    assert bc.next_read_ns() == 10 * MS + big * 1_000_000_000 // rate
    shaper.counts[ca] += 20_000
    shaper.counts[cb] += 7_000                       # b is at line rate: not counted
    bc.read(40 * MS)
    assert a.stats.byte_counter_events == 0 and a.bytes_to_increase() == big - 20_000
    assert b.stats.byte_counter_events == 0 and b.bytes_to_increase() is None
    cut = a.rate_bps
    shaper.counts[ca] += 15_000                      # crosses the counter's 32767 bytes
    bc.read(70 * MS)
    assert a.stats.byte_counter_events == 1 and a.rate_bps > cut
    assert a.bytes_to_increase() == big - (35_000 - big)
    assert bc.bytes_fed == 42_000 and bc.reads == 3
    # nearly there: the reads stay min_interval_ns apart
    shaper.counts[ca] += a.bytes_to_increase() - 10
    bc.read(80 * MS)
    assert bc.next_read_ns() == 90 * MS
    bc.read_if_due(85 * MS, events=False)
    assert bc.reads == 4
    # a counter that went back (the class was made again) feeds nothing
    shaper.counts[ca] = 5
    bc.read(100 * MS)
    assert a.bytes_to_increase() == 10 and bc.bytes_fed == 42_000 + 30_524


def _one_qp_cut_at_1ms() -> tuple[ReactionPoint, Dcqcn, int, FakeShaper, ClassByteCounter]:
    """One connectx QP whose class counter a ClassByteCounter has read at 0
    (0 bytes), cut by a CNP at 1 ms: the reaction point, its controller, its
    class, the fake shaper and the counter."""
    rp = ReactionPoint()
    a = dcqcn("connectx")
    ca = rp.register(0x77, "10.0.3.1", 0x101, a)
    shaper = FakeShaper({ca: 0})
    bc = ClassByteCounter(rp, shaper)
    bc.read(0)
    rp.on_cnp(Arrival("cnp", "10.0.3.1", "10.0.1.1", 0x77), 1 * MS)
    return rp, a, ca, shaper, bc


def test_byte_counter_counts_bytes_before_a_cut_before_it() -> None:
    """Bytes the class sent before a CNP are read before the cut, so they do
    not count toward the recovery after it."""
    rp, a, ca, shaper, bc = _one_qp_cut_at_1ms()
    rp.changed()
    shaper.counts[ca] = 30_000                       # sent after the first cut
    # a second CNP, after the rate-reduce monitor period: a second cut
    t = 1 * MS + int(a.params.rate_reduce_monitor_period_s * 1e9) + 1
    bc.read_if_due(t, events=True)
    rp.on_cnp(Arrival("cnp", "10.0.3.1", "10.0.1.1", 0x77), t)
    assert a.stats.rate_cuts == 2
    assert a.bytes_to_increase() == a.params.byte_counter_bytes


def test_byte_counter_falls_back_when_the_classes_cannot_be_read() -> None:
    _rp, _a, _ca, shaper, bc = _one_qp_cut_at_1ms()
    shaper.error = "tc class counters on h1-eth0: No such device"
    bc.read(2 * MS)
    assert bc.fallback == shaper.error and not bc.active and bc.next_read_ns() is None
    bc.read_if_due(3 * MS, events=True)
    assert shaper.dumps == 2                         # no more reads once fallen back
    rp2 = ReactionPoint()
    rp2.register(0x77, "10.0.3.1", 0x101, dcqcn("connectx"))
    bc2 = ClassByteCounter(rp2, FakeShaper({}))
    bc2.read(0)
    assert bc2.fallback == "no counter for HTB class 1:10"


def test_htb_rates_and_qp_match() -> None:
    assert htb_rate_bytes(4e6) == 500_000
    assert htb_rate_bytes(1.0) == 16                              # the floor HTB can hold
    for bad in (0.0, -5.0, float("nan")):
        with pytest.raises(ShimError):
            htb_rate_bytes(bad)
    with pytest.raises(ShimError, match="32-bit"):
        htb_rate_bytes(400e9)
    # UDP, to 10.0.3.1, port 4791, BTH destination QP 0x1234
    assert qp_match_keys("10.0.3.1", 0x1234) == [
        "0x00110000/0x00ff0000+8", "0x0a000301/0xffffffff+16", "0x000012b7/0x0000ffff+20",
        "0x00001234/0x00ffffff+32"]
    with pytest.raises(ShimError, match="QPN"):
        qp_match_keys("10.0.3.1", 1 << 24)
    with pytest.raises(ShimError, match="IPv4"):
        qp_match_keys("10.0.3", 1)
    assert qp_class_id(0) == 0x10010
    with pytest.raises(ShimError, match="sending QPs"):
        qp_class_id(0xFFFF)


def _attrs(buf: bytes) -> list[tuple[int, bytes]]:
    """(type without flags, payload) of each netlink attribute in ``buf``."""
    out, off = [], 0
    while off + 4 <= len(buf):
        n, kind = struct.unpack_from("=HH", buf, off)
        out.append((kind & 0x3FFF, buf[off + 4:off + n]))
        off += (n + 3) & ~3
    return out


def test_a_qps_dscp_change_is_one_u32_filter_change_with_pedit_and_csum() -> None:
    from hosts.roce.shaping import ShapingError, u32_change_message, u32_handle_text

    msg = u32_change_message(7, 0x80000800, 0x10010, 8, seq=42)
    length, kind, flags, seq, _pid = struct.unpack_from("=IHHII", msg)
    assert (length, kind, flags & 0x5, seq) == (len(msg), 44, 0x5, 42)   # NEWTFILTER, ack
    assert not flags & 0x700            # no CREATE/EXCL/REPLACE: the filter must exist
    _fam, ifindex, handle, parent, info = struct.unpack_from("=BxxxiIII", msg, 16)
    assert (ifindex, handle, parent) == (7, 0x80000800, 0x10000)
    assert (info >> 16, socket.ntohs(info & 0xFFFF)) == (10, 0x0800)    # prio 10, IPv4
    top = dict(_attrs(msg[36:]))
    assert top[1] == b"u32\0"
    opts = dict(_attrs(top[2]))
    assert struct.unpack("=I", opts[1]) == (0x10010,)                    # the QP's class
    acts = _attrs(opts[7])
    assert [order for order, _ in acts] == [1, 2]
    pedit, csum = (dict(_attrs(body)) for _order, body in acts)
    assert (pedit[1], csum[1]) == (b"pedit\0", b"csum\0")
    parms = dict(_attrs(pedit[2]))[2]
    _i, _c, action, _r, _b, nkeys = struct.unpack_from("=IIiiiB", parms)
    assert (action, nkeys) == (3, 1)                                    # pipe, one key
    key = parms[24:48]
    # the first IPv4 word: all kept but the DSCP bits (TOS's six high), set to 8
    assert key[:4] == bytes((0xFF, 0x03, 0xFF, 0xFF)) and key[4:8] == bytes((0, 8 << 2, 0, 0))
    assert struct.unpack("=IIII", key[8:]) == (0, 0, 0, 0)              # offset 0 of IPv4
    cparms = dict(_attrs(csum[2]))[1]
    _i, _c, caction, _r, _b, update = struct.unpack("=IIiiiI", cparms)
    assert (caction, update) == (3, 1)                                  # pipe; IPv4 header
    # back to the QP's own DSCP: the class alone, no actions
    plain = dict(_attrs(dict(_attrs(u32_change_message(7, 0x80000800, 0x10010, None)[36:]))[2]))
    assert set(plain) == {1}
    with pytest.raises(ShapingError, match="DSCP 64 out of range"):
        u32_change_message(7, 0x80000800, 0x10010, 64)
    assert u32_handle_text(0x80000800) == "800::800"
    assert u32_handle_text(0x80001003) == "800:1:3"
