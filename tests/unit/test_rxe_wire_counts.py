"""Per-QP requester counts from the wire (hosts.roce.rxe.wire_counts.WireCounts), which
rxe hosts use where rxe counts per device only: retransmissions, NAKs received
and go-backs by the retransmission timer, as the udp provider counts them."""

from __future__ import annotations

import pytest
from cbpf import run_cbpf
from scapy.contrib.roce import AETH, BTH, GRH  # noqa: F401  (GRH: the layer bindings)
from scapy.layers.inet import IP, UDP
from scapy.layers.l2 import Ether

from hosts.roce.constants import AETH_SYNDROME_ACK, AETH_SYNDROME_NAK_PSN_SEQ, ECN_ECT0
from hosts.roce.rxe.frames import SNAP_BYTES, Bth, parse_bth, roce_filter
from hosts.roce.rxe.wire_counts import HostWireCounter, WireCounts

RANK, SWITCH = "10.0.1.1", "10.255.0.1"


def request(psn: int, *, dqpn: int = 0x100, src: str = RANK, dst: str = SWITCH,
            opcode: int = 0x0A, sport: int = 0xC123) -> bytes:
    """A RoCEv2 RDMA WRITE ONLY frame built by scapy (its BTH, its ICRC)."""
    return bytes(Ether() / IP(src=src, dst=dst, tos=ECN_ECT0, id=4321, flags="DF")
                 / UDP(sport=sport, dport=4791, chksum=0)
                 / BTH(opcode=opcode, dqpn=dqpn, psn=psn) / (b"\x00" * 16 + b"x" * 256))


def ack(psn: int, syndrome: int, *, dqpn: int = 0x11, src: str = SWITCH,
        dst: str = RANK) -> bytes:
    return bytes(Ether() / IP(src=src, dst=dst, id=77) / UDP(sport=0xC001, dport=4791, chksum=0)
                 / BTH(opcode=0x11, dqpn=dqpn, psn=psn) / AETH(syndrome=syndrome, msn=3))


def test_parse_bth_reads_scapys_frames() -> None:
    assert parse_bth(request(0xABCDEF, dqpn=0x123456)) == Bth(
        RANK, SWITCH, ECN_ECT0, 0x0A, 0x123456, 0xABCDEF, None, 0xC123)
    assert parse_bth(ack(42, AETH_SYNDROME_NAK_PSN_SEQ)) == Bth(
        SWITCH, RANK, 0, 0x11, 0x11, 42, AETH_SYNDROME_NAK_PSN_SEQ, 0xC001)
    # the socket's snap (the headers) is enough
    assert parse_bth(request(5)[:SNAP_BYTES]) == parse_bth(request(5))
    assert parse_bth(request(5)[:50]) is None                       # truncated
    assert parse_bth(bytes(Ether() / IP() / UDP(dport=53) / (b"\x00" * 40))) is None


def test_filter_with_every_roce_frame_passes_data_and_acks_not_other_udp() -> None:
    for frame in (request(1), ack(1, AETH_SYNDROME_ACK)):
        assert run_cbpf(roce_filter(), frame) == 0           # not CE, not a CNP
        assert run_cbpf(roce_filter(every_roce_frame=True), frame) == min(SNAP_BYTES, len(frame))
    other = bytes(Ether() / IP() / UDP(dport=4792) / (b"\x00" * 40))
    assert run_cbpf(roce_filter(every_roce_frame=True), other) == 0


WINDOW = 50_000          # ns: half the timeout of these scripts


def sends(w: WireCounts, psns: range | list[int], t: int) -> int:
    """Requests at ``t``, ``t`` + 1 us, ...; returns the time after the last."""
    for p in psns:
        w.on_request(p & 0xFFFFFF, t)
        t += 1000
    return t


def test_a_nak_go_back_counts_retransmissions_not_a_timeout() -> None:
    w = WireCounts(WINDOW)
    t = sends(w, range(10), 0)
    w.on_ack(5, AETH_SYNDROME_NAK_PSN_SEQ, t)
    sends(w, range(5, 12), t + 2000)       # 5-9 again, then 10 and 11 new
    assert w.counters() == {"retransmits": 5, "naks_rcvd": 1, "rto": 0, "wire_tx_pkts": 17}
    assert w.nak_gobacks == 1


def test_a_go_back_long_after_its_nak_or_without_one_is_the_timer() -> None:
    w = WireCounts(WINDOW)
    t = sends(w, range(8), 0)
    w.on_ack(5, AETH_SYNDROME_ACK, t)      # an ACK is no NAK
    t = sends(w, range(6, 8), t + 100_000)
    assert (w.retransmits, w.rto, w.nak_gobacks) == (2, 1, 0)
    # a NAK whose go-back the wire does not show (the requester had gone past
    # it) explains no go-back a timeout later
    w.on_ack(6, AETH_SYNDROME_NAK_PSN_SEQ, t)
    t = sends(w, [8, 9], t + 1000)
    sends(w, [6, 7, 8, 9, 10], t + 100_000)
    assert (w.retransmits, w.rto, w.nak_gobacks, w.naks_rcvd) == (6, 2, 0, 1)


def test_a_go_back_above_the_naks_psn_is_the_naks() -> None:
    # NAK 188, then an ACK of 192 taken before the go-back: it restarts at 193
    w = WireCounts(WINDOW)
    t = sends(w, range(180, 200), 0)
    w.on_ack(188, AETH_SYNDROME_NAK_PSN_SEQ, t)
    w.on_ack(192, AETH_SYNDROME_ACK, t + 10)
    sends(w, range(193, 201), t + 1000)
    assert (w.retransmits, w.rto, w.nak_gobacks) == (7, 0, 1)


def test_a_burst_of_naks_makes_a_go_back_each() -> None:
    # NAKs 122, 124, 125 taken one by one: go-backs to 124 and to 125, in turn
    w = WireCounts(WINDOW)
    t = sends(w, range(110, 145), 0)
    for q in (122, 124, 125):
        w.on_ack(q, AETH_SYNDROME_NAK_PSN_SEQ, t)
    t = sends(w, [124, 125, 126], t + 1000)
    sends(w, range(125, 130), t)
    assert (w.retransmits, w.naks_rcvd, w.nak_gobacks, w.rto) == (8, 3, 2, 0)


def test_two_naks_of_one_psn_before_the_first_resend_make_two_go_backs() -> None:
    # Seen at the switch: NAK 5 twice, then the requester's go-back to 5; it
    # took the second NAK after that resend and went back to 5 once more.
    w = WireCounts(WINDOW)
    t = sends(w, range(10), 0)
    w.on_ack(5, AETH_SYNDROME_NAK_PSN_SEQ, t)
    w.on_ack(5, AETH_SYNDROME_NAK_PSN_SEQ, t + 500)
    t = sends(w, [5, 6], t + 1000)
    sends(w, range(5, 10), t)
    assert (w.retransmits, w.naks_rcvd, w.nak_gobacks, w.rto) == (7, 2, 2, 0)
    # neither NAK is left to explain a third go-back
    sends(w, [5], t + 10_000)
    assert (w.nak_gobacks, w.rto) == (2, 1)


def test_a_qp_reset_and_connected_again_starts_its_psns_over_without_a_go_back() -> None:
    # a Symphony ring's lane: each step's write starts at PSN 0 on a reset QP
    c = HostWireCounter(RANK, WINDOW)
    c.register(0x11, SWITCH, 0x100)
    for p in range(6):
        c.on_frame(request(p), True, 1000 * p)
    c.restart(0x11)
    for p in range(4):
        c.on_frame(request(p), True, 10_000 + 1000 * p)
    c.on_frame(request(2), True, 200_000)           # a real go-back in the new connection
    assert c.qps[0x11].counters() == {"retransmits": 1, "naks_rcvd": 0, "rto": 1,
                                      "wire_tx_pkts": 11}
    c.restart(0x99)                                 # not a registered QP: nothing to do


def test_an_earlier_connections_requests_left_after_the_reset_count_in_its_sequence() -> None:
    # A Symphony lane: step 0 (port A) sends PSNs 0-7; the timer resends 4-7,
    # but a late ACK completes the step while 6 and 7 are still in the host's
    # qdisc; the lane is reset and connected for step 1 (port B), and 6 and 7
    # leave after that, before and among step 1's requests.
    a, b = 0xC000, 0xC001
    c = HostWireCounter(RANK, WINDOW)
    c.register(0x11, SWITCH, 0x100)
    t = 0
    for p in [*range(8), 4, 5]:
        c.on_frame(request(p, sport=a), True, t)
        t += 1000
    c.restart(0x11)
    c.on_frame(request(6, sport=a), True, t)            # before step 1 has sent
    for p in range(3):
        c.on_frame(request(p, sport=b), True, t + 1000 * (p + 1))
    c.on_frame(request(7, sport=a), True, t + 5000)     # among step 1's
    for p in range(3, 6):
        c.on_frame(request(p, sport=b), True, t + 1000 * (p + 3))
    # step 0's 4 resends are its retransmissions; step 1's 6 requests are new
    assert c.qps[0x11].counters() == {"retransmits": 4, "naks_rcvd": 0, "rto": 1,
                                      "wire_tx_pkts": 18}


def test_a_new_connection_from_the_earlier_port_is_not_taken_for_its_leftovers() -> None:
    # connected again from the same port, the first request does not continue
    # the earlier sequence: it begins the new connection, and so do the rest
    c = HostWireCounter(RANK, WINDOW)
    c.register(0x11, SWITCH, 0x100)
    for p in range(6):
        c.on_frame(request(p, sport=0xC000), True, 1000 * p)
    c.restart(0x11)
    for p in range(8):
        c.on_frame(request(p, sport=0xC000), True, 10_000 + 1000 * p)
    assert c.qps[0x11].counters() == {"retransmits": 0, "naks_rcvd": 0, "rto": 0,
                                      "wire_tx_pkts": 14}


def test_a_skip_forward_is_no_go_back_and_the_wrap_is_none_either() -> None:
    w = WireCounts(WINDOW)
    t = sends(w, range(0xFFFFFC, 0xFFFFFC + 8), 0)     # across 2^24
    assert (w.retransmits, w.rto) == (0, 0)
    t = sends(w, [0xFFFFFE], t + 100_000)               # back across the wrap: the timer's
    sends(w, [1, 2], t)                                 # an ACK moved it past 0xFFFFFF-0
    assert (w.retransmits, w.rto) == (3, 1)


def test_a_nak_for_a_psn_not_yet_sent_explains_nothing() -> None:
    w = WireCounts(WINDOW)
    t = sends(w, range(4), 0)
    w.on_ack(4, AETH_SYNDROME_NAK_PSN_SEQ, t)          # the next PSN: nothing to resend
    sends(w, [2, 3], t + 1000)
    assert (w.naks_rcvd, w.nak_gobacks, w.rto) == (1, 0, 1)


@pytest.mark.parametrize("outgoing_src", [RANK, "10.0.9.9"])
def test_host_counter_tells_qps_apart_by_peer_and_by_destination_qpn(outgoing_src: str) -> None:
    c = HostWireCounter(RANK, WINDOW)
    c.register(0x11, SWITCH, 0x100)             # two QPs of one rank, two switch groups
    c.register(0x12, SWITCH, 0x101)
    for p in range(4):
        c.on_frame(request(p, dqpn=0x100, src=outgoing_src), True, p * 1000)
        c.on_frame(request(p, dqpn=0x101), True, p * 1000)
    c.on_frame(ack(1, AETH_SYNDROME_NAK_PSN_SEQ, dqpn=0x12), False, 5000)
    c.on_frame(request(1, dqpn=0x101), True, 6000)
    c.on_frame(request(2, dqpn=0x100, src=outgoing_src), True, 6000)
    # frames the host received are never its requests; unknown peers count nowhere
    c.on_frame(request(0, dqpn=0x100, src=SWITCH, dst=RANK), False, 7000)
    c.on_frame(request(0, dqpn=0x777), True, 7000)
    a, b = c.qps[0x11], c.qps[0x12]
    assert (b.retransmits, b.naks_rcvd, b.nak_gobacks, b.rto) == (1, 1, 1, 0)
    if outgoing_src == RANK:
        assert (a.tx_pkts, a.retransmits, a.rto) == (5, 1, 1)
    else:                                       # not this host's address: not its request
        assert (a.tx_pkts, a.retransmits) == (0, 0)
