"""Per-work-request flow tags (SendWR.sport / SendWR.job_id): the tag is fixed when
the WR is posted and survives QP retags, retransmissions included."""

from __future__ import annotations

import time

import pytest

from hosts.roce import (
    Access,
    Context,
    FixedRate,
    QPState,
    Scale,
    SendWR,
    SimWire,
    VerbsError,
    WCStatus,
    WROpcode,
    connect_pair,
    tag_sport,
)
from hosts.roce import wire as W
from hosts.roce.constants import OPS_DATA
from hosts.roce.udp_provider import UdpProvider

A_IP, B_IP = "10.0.0.1", "10.0.0.2"
MTU = 1024


class Pair:
    def __init__(self, size=16 * MTU, **wire_kw):
        self.wire = SimWire(record=True, **wire_kw)
        scale = Scale()
        self.A = Context(self.wire.provider(A_IP), scale,
                         rate_controller_factory=lambda: FixedRate(1e9))
        self.B = Context(self.wire.provider(B_IP), scale,
                         rate_controller_factory=lambda: FixedRate(1e9))
        self.src = bytearray((i * 13 + 5) % 251 for i in range(size))
        self.ma = self.A.alloc_pd().reg_mr(self.src)
        self.mb = self.B.alloc_pd().reg_mr(bytearray(size),
                                           Access.LOCAL_WRITE | Access.REMOTE_WRITE)
        self.ca, self.cb = self.A.create_cq(), self.B.create_cq()
        self.qa = self.ma.pd.create_qp(self.ca, sport=tag_sport(1), job_id=3)
        self.qb = self.mb.pd.create_qp(self.cb, job_id=3)
        connect_pair(self.qa, self.qb, path_mtu=MTU)

    def write(self, wr_id, offset, length, **tag):
        self.qa.post_send(SendWR(wr_id, WROpcode.RDMA_WRITE, self.ma.sge(offset, length),
                                 remote_addr=self.mb.addr + offset, rkey=self.mb.rkey, **tag))

    def run(self, n, timeout=5.0):
        assert self.wire.run(lambda: len(self.ca) >= n, timeout), self.qa.stats
        return self.ca.poll(100)

    def data(self):
        """(sport, job_id, psn) of every data packet A put on the wire, in order."""
        out = []
        for r in self.wire.records:
            p = W.decode(r.data)
            if r.src_ip == A_IP and p.opcode in OPS_DATA:
                out.append((r.sport, p.job_id, p.psn))
        return out


def drop_first(psns):
    left = set(psns)

    def hook(p, src, dst):
        if p.opcode in OPS_DATA and p.psn in left:
            left.discard(p.psn)
            return "drop"
        return None
    return hook


def test_go_back_n_retransmissions_keep_the_wr_tag_after_a_retag():
    t = Pair()
    t.wire.hook = drop_first({2})
    t.write(1, 0, 8 * MTU, sport=tag_sport(7), job_id=9)          # PSNs 0..7
    t.qa.modify(sport=tag_sport(8), job_id=10)                     # retag before the NAK
    t.write(2, 8 * MTU, 4 * MTU)                                   # PSNs 8..11, QP's tag
    wcs = t.run(2)
    assert [(w.wr_id, w.status) for w in wcs] == [(1, WCStatus.SUCCESS), (2, WCStatus.SUCCESS)]
    assert bytes(t.mb.buf[:12 * MTU]) == bytes(t.src[:12 * MTU])
    assert t.qa.stats["retransmits"] > 0 and t.qa.stats["naks_rcvd"] == 1
    pkts = t.data()
    wr1 = [(s, j) for s, j, psn in pkts if psn < 8]
    wr2 = [(s, j) for s, j, psn in pkts if psn >= 8]
    assert len(wr1) > 8                                 # PSN 2.. were sent again
    assert set(wr1) == {(tag_sport(7), 9)}
    assert set(wr2) == {(tag_sport(8), 10)}


def test_timeout_retransmission_of_the_tail_keeps_the_wr_tag():
    t = Pair()
    t.wire.hook = drop_first({3})
    t.write(1, 0, 4 * MTU, sport=tag_sport(20), job_id=2)          # PSN 3 is the tail
    t.qa.modify(sport=tag_sport(21), job_id=4)
    wcs = t.run(1)
    assert wcs[0].status == WCStatus.SUCCESS and t.qa.stats["rto"] == 1
    pkts = t.data()
    assert [psn for _, _, psn in pkts] == [0, 1, 2, 3, 3]
    assert {(s, j) for s, j, _ in pkts} == {(tag_sport(20), 2)}


def test_packets_not_yet_sent_at_the_retag_still_carry_the_wr_tag():
    t = Pair()
    t.qa.modify(max_inflight=2)             # most of the WR leaves after the retag
    t.write(1, 0, 6 * MTU, sport=tag_sport(30))
    t.qa.modify(sport=tag_sport(31), job_id=5)
    t.run(1)
    pkts = t.data()
    assert len(pkts) == 6
    # the WR pinned only the port: its job id is the QP's when each packet leaves
    assert {s for s, _, _ in pkts} == {tag_sport(30)}
    assert pkts[0][1] == 3 and pkts[-1][1] == 5


def test_wr_without_tag_follows_the_qp_and_acks_keep_the_qp_tag():
    t = Pair()
    t.write(1, 0, 2 * MTU, job_id=6)        # job only: the port is the QP's
    t.run(1)
    assert {(s, j) for s, j, _ in t.data()} == {(tag_sport(1), 6)}
    acks = [r for r in t.wire.records if r.src_ip == B_IP]
    assert acks and {r.sport for r in acks} == {t.qb.sport}


def test_wr_source_ports_are_held_until_the_wr_leaves_the_queue():
    t = Pair()
    ports = t.A.provider.ports
    t.write(1, 0, 2 * MTU, sport=tag_sport(40))
    t.write(2, 0, 2 * MTU, sport=tag_sport(40))
    assert ports[tag_sport(40)] == 2
    t.run(2)
    assert tag_sport(40) not in ports and ports[tag_sport(1)] == 1


def test_flushed_and_destroyed_wrs_give_their_ports_back():
    t = Pair()
    t.qa.modify(retry_cnt=0, timeout_ns=50_000)
    t.wire.hook = lambda p, s, d: "drop" if p.opcode in OPS_DATA else None
    t.write(1, 0, MTU, sport=tag_sport(50))
    t.write(2, MTU, MTU, sport=tag_sport(51))
    wcs = t.run(2)
    assert [w.status for w in wcs] == [WCStatus.RETRY_EXC_ERR, WCStatus.WR_FLUSH_ERR]
    ports = t.A.provider.ports
    assert tag_sport(50) not in ports and tag_sport(51) not in ports
    t.qa.modify(state=QPState.RESET)               # RESET: the QP and its tag stay
    assert ports == {tag_sport(1): 1}
    qc = t.ma.pd.create_qp(t.ca, sport=tag_sport(60))
    connect_pair(qc, t.mb.pd.create_qp(t.cb), path_mtu=MTU)
    t.wire.hook = lambda p, s, d: "drop"
    qc.post_send(SendWR(3, WROpcode.RDMA_WRITE, t.ma.sge(0, MTU), remote_addr=t.mb.addr,
                        rkey=t.mb.rkey, sport=tag_sport(52)))
    assert ports[tag_sport(52)] == 1
    qc.destroy()
    t.qa.destroy()
    assert ports == {}


@pytest.mark.parametrize("tag", [{"sport": 0}, {"sport": 1 << 16}, {"job_id": 256},
                                 {"job_id": -1}])
def test_invalid_wr_tags_are_refused(tag):
    t = Pair()
    with pytest.raises(VerbsError):
        t.write(1, 0, MTU, **tag)
    assert t.qa.outstanding == 0 and set(t.A.provider.ports) == {tag_sport(1)}


def test_wr_tag_is_the_source_port_on_real_udp_sockets():
    A = Context(UdpProvider("127.0.0.1", port=0))
    B = Context(UdpProvider("127.0.0.1", port=0))
    try:
        ma = A.alloc_pd().reg_mr(bytearray(b"x" * 3000))
        mb = B.alloc_pd().reg_mr(bytearray(3000), Access.LOCAL_WRITE | Access.REMOTE_WRITE)
        ca, cb = A.create_cq(), B.create_cq()
        qa, qb = ma.pd.create_qp(ca), mb.pd.create_qp(cb)
        connect_pair(qa, qb, path_mtu=MTU)
        seen = []
        recv = B.provider.recv

        def spy(n):
            got = recv(n)
            seen.extend((int.from_bytes(d[20:22], "big"), W.decode(d[28:]).job_id)
                        for d in got)
            return got
        B.provider.recv = spy
        tag = tag_sport(0x1234)
        qa.post_send(SendWR(1, WROpcode.RDMA_WRITE, ma.sge(), remote_addr=mb.addr,
                            rkey=mb.rkey, sport=tag, job_id=77))
        qa.modify(sport=tag_sport(2))
        end = time.monotonic() + 5
        while not len(ca) and time.monotonic() < end:
            A.engine.progress()
            B.engine.progress()
        assert [w.status for w in ca.poll(4)] == [WCStatus.SUCCESS]
        assert seen == [(tag, 77)] * 3
        assert bytes(mb.buf) == bytes(ma.buf)
    finally:
        A.close()
        B.close()


def test_next_step_posted_before_the_previous_is_acked_keeps_both_tags():
    # what a pipelined ring does: step 5 and step 6 in flight at once, step 5 loses
    # a packet after step 6 started; go-back-N resends both, each with its own tag
    t = Pair(latency_ns=200_000)
    t.wire.hook = drop_first({3})
    t.write(1, 0, 4 * MTU, sport=tag_sport(5), job_id=1)           # PSNs 0..3
    t.write(2, 4 * MTU, 4 * MTU, sport=tag_sport(6), job_id=1)     # PSNs 4..7
    wcs = t.run(2)
    assert [w.status for w in wcs] == [WCStatus.SUCCESS] * 2
    assert bytes(t.mb.buf[:8 * MTU]) == bytes(t.src[:8 * MTU])
    pkts = t.data()
    assert len(pkts) > 8
    assert all(s == (tag_sport(5) if psn < 4 else tag_sport(6)) for s, _, psn in pkts)
    assert [psn for _, _, psn in pkts].count(3) == 2
