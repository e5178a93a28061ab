"""RC transport over the simulated wire: segmentation, completions, loss recovery,
reordering, duplication, PSN wrap, retry exhaustion, CNPs, ICRC drops."""

from __future__ import annotations

import pytest

from hosts.roce import (
    Access,
    Context,
    FixedRate,
    QPState,
    RecvWR,
    Scale,
    SendWR,
    SimWire,
    VerbsError,
    WCOpcode,
    WCStatus,
    WROpcode,
    connect_pair,
)
from hosts.roce import wire as W
from hosts.roce.constants import ECN_ECT0, ECN_NOT_ECT, OPS_DATA, Opcode
from hosts.roce.provider import MAX_WAKE_LEAD_NS
from hosts.roce.verbs import wait_exactly

A_IP, B_IP = "10.0.0.1", "10.0.0.2"
MTU = 1024


class Pair:
    """Two hosts on a simulated wire with one connected QP each (a -> b)."""

    def __init__(self, *, size=64 * 1024, psn_a=0, psn_b=0, scale=None, rc_a=None,
                 retry_cnt=7, cnp_interval_ns=None, **wire_kw):
        wire_kw.setdefault("record", True)
        self.wire = SimWire(**wire_kw)
        scale = scale or Scale()
        self.A = Context(self.wire.provider(A_IP), scale,
                         rate_controller_factory=lambda: FixedRate(1e9))
        self.B = Context(self.wire.provider(B_IP), scale, cnp_interval_ns=cnp_interval_ns,
                         rate_controller_factory=lambda: FixedRate(1e9))
        pa, pb = self.A.alloc_pd(), self.B.alloc_pd()
        self.src = bytearray((i * 7 + 3) % 251 for i in range(size))
        self.ma = pa.reg_mr(self.src, Access.LOCAL_WRITE)
        self.mb = pb.reg_mr(bytearray(size), Access.LOCAL_WRITE | Access.REMOTE_WRITE)
        self.ca, self.cb = self.A.create_cq(), self.B.create_cq()
        self.qa = pa.create_qp(self.ca, job_id=4, rate_controller=rc_a)
        self.qb = pb.create_qp(self.cb, job_id=4)
        connect_pair(self.qa, self.qb, psn_a=psn_a, psn_b=psn_b, path_mtu=MTU,
                     retry_cnt=retry_cnt)

    def write(self, wr_id=1, offset=0, length=None, remote_offset=0, imm=None):
        length = len(self.src) - offset if length is None else length
        op = WROpcode.RDMA_WRITE if imm is None else WROpcode.RDMA_WRITE_WITH_IMM
        self.qa.post_send(SendWR(wr_id, op, self.ma.sge(offset, length),
                                 remote_addr=self.mb.addr + remote_offset, rkey=self.mb.rkey,
                                 imm_data=imm))

    def run_until_wc(self, n_a=1, n_b=0, timeout=20.0):
        ok = self.wire.run(lambda: len(self.ca) >= n_a and len(self.cb) >= n_b, timeout)
        assert ok, f"no completion: a={self.qa.stats} b={self.qb.stats}"
        return self.ca.poll(100), self.cb.poll(100)

    def data_records(self, src=A_IP):
        out = []
        for r in self.wire.records:
            p = W.decode(r.data)
            if r.src_ip == src and p.opcode in OPS_DATA:
                out.append((r, p))
        return out


def drop_psns(psns, times=1):
    """Hook dropping the first ``times`` transmissions of each data packet in ``psns``."""
    left = {p: times for p in psns}

    def hook(p, src, dst):
        if p.opcode in OPS_DATA and left.get(p.psn, 0) > 0:
            left[p.psn] -= 1
            return "drop"
        return None
    return hook


def test_multi_mtu_write_is_segmented_and_lands_exactly():
    t = Pair(size=10 * MTU + 300)
    t.mb.buf[:] = b"\xee" * len(t.mb.buf)
    length = 5 * MTU + 123
    t.write(wr_id=77, offset=100, length=length, remote_offset=4000)
    wa, wb = t.run_until_wc()
    assert [(w.wr_id, w.status, w.opcode, w.byte_len) for w in wa] == [
        (77, WCStatus.SUCCESS, WCOpcode.RDMA_WRITE, length)]
    assert wb == []      # a plain WRITE consumes no receive WQE
    assert bytes(t.mb.buf[4000:4000 + length]) == bytes(t.src[100:100 + length])
    assert bytes(t.mb.buf[:4000]) == b"\xee" * 4000
    assert bytes(t.mb.buf[4000 + length:]) == b"\xee" * (len(t.mb.buf) - 4000 - length)
    pkts = t.data_records()
    assert [p.opcode for _, p in pkts] == [Opcode.RDMA_WRITE_FIRST] + \
        [Opcode.RDMA_WRITE_MIDDLE] * 4 + [Opcode.RDMA_WRITE_LAST]
    assert [len(p.payload) for _, p in pkts] == [MTU] * 5 + [123]
    assert pkts[0][1].reth == (t.mb.addr + 4000, t.mb.rkey, length)
    assert all(p.reth is None for _, p in pkts[1:])
    assert [p.psn for _, p in pkts] == list(range(6))
    assert pkts[-1][1].ackreq and not pkts[0][1].ackreq
    assert all(p.job_id == 4 and p.dqpn == t.qb.qp_num for _, p in pkts)
    assert all(r.ecn == ECN_ECT0 and r.sport == t.qa.sport for r, _ in pkts)
    acks = [W.decode(r.data) for r in t.wire.records if r.src_ip == B_IP]
    assert acks and all(a.opcode == Opcode.ACK for a in acks)
    assert acks[-1].psn == 5 and acks[-1].aeth == (0x1F, 1)


def test_write_with_imm_and_send_completions():
    t = Pair(size=8 * MTU)
    rmr = t.qb.pd.reg_mr(bytearray(4 * MTU), Access.LOCAL_WRITE)
    t.qb.post_recv(RecvWR(501, None))               # consumed by WRITE_WITH_IMM
    t.qb.post_recv(RecvWR(502, rmr.sge()))          # SEND_WITH_IMM
    t.qb.post_recv(RecvWR(503, rmr.sge(MTU * 3)))   # SEND (one MTU)
    t.write(wr_id=1, length=3 * MTU + 8, imm=0xCAFEF00D)
    t.qa.post_send(SendWR(2, WROpcode.SEND_WITH_IMM, t.ma.sge(8, 2 * MTU + 500),
                          imm_data=0x01020304))
    t.qa.post_send(SendWR(3, WROpcode.SEND, t.ma.sge(0, 100)))
    wa, wb = t.run_until_wc(3, 3)
    assert [(w.wr_id, w.opcode, w.status) for w in wa] == [
        (1, WCOpcode.RDMA_WRITE, WCStatus.SUCCESS), (2, WCOpcode.SEND, WCStatus.SUCCESS),
        (3, WCOpcode.SEND, WCStatus.SUCCESS)]
    assert [(w.wr_id, w.opcode, w.byte_len, w.imm_data) for w in wb] == [
        (501, WCOpcode.RECV_RDMA_WITH_IMM, 3 * MTU + 8, 0xCAFEF00D),
        (502, WCOpcode.RECV, 2 * MTU + 500, 0x01020304),
        (503, WCOpcode.RECV, 100, None)]
    assert all(w.qp_num == t.qb.qp_num and w.src_qp == t.qa.qp_num for w in wb)
    assert bytes(t.mb.buf[:3 * MTU + 8]) == bytes(t.src[:3 * MTU + 8])
    assert bytes(rmr.buf[:2 * MTU + 500]) == bytes(t.src[8:8 + 2 * MTU + 500])
    assert bytes(rmr.buf[3 * MTU:3 * MTU + 100]) == bytes(t.src[:100])
    ops = [p.opcode for _, p in t.data_records()]
    assert ops == [Opcode.RDMA_WRITE_FIRST, Opcode.RDMA_WRITE_MIDDLE, Opcode.RDMA_WRITE_MIDDLE,
                   Opcode.RDMA_WRITE_LAST_IMM, Opcode.SEND_FIRST, Opcode.SEND_MIDDLE,
                   Opcode.SEND_LAST_IMM, Opcode.SEND_ONLY]
    assert wa[0].timestamp_ns <= wa[1].timestamp_ns <= wa[2].timestamp_ns


def test_lost_packet_is_naked_once_and_go_back_n_recovers():
    t = Pair(size=20 * MTU)
    t.wire.hook = drop_psns({3})
    t.write()
    wa, _ = t.run_until_wc()
    assert wa[0].status == WCStatus.SUCCESS
    assert bytes(t.mb.buf) == bytes(t.src)
    assert t.qb.stats["naks_sent"] == 1          # one NAK for the gap, not one per packet
    assert t.qb.stats["out_of_seq"] >= 2
    assert t.qa.stats["naks_rcvd"] == 1 and t.qa.stats["rto"] == 0
    psns = [p.psn for _, p in t.data_records()]
    first_retx = psns.index(3, 4)                # go-back-N: resend from PSN 3 on
    assert psns[first_retx:first_retx + 3] == [3, 4, 5]
    nak = [W.decode(r.data) for r in t.wire.records if r.src_ip == B_IP
           if W.decode(r.data).aeth[0] == 0x60]
    assert len(nak) == 1 and nak[0].psn == 3


def test_lost_tail_is_recovered_by_timeout():
    t = Pair(size=4 * MTU)
    t.wire.hook = drop_psns({3})                 # the last packet: no later packet reveals it
    t.write()
    wa, _ = t.run_until_wc()
    assert wa[0].status == WCStatus.SUCCESS
    assert bytes(t.mb.buf) == bytes(t.src)
    assert t.qa.stats["rto"] == 1 and t.qb.stats["naks_sent"] == 0
    send_times = [r.time_ns for r, p in t.data_records() if p.psn == 3]
    assert send_times[1] - send_times[0] >= t.A.scale.rto_ns


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_random_loss_reordering_duplication_data_exact(seed):
    t = Pair(size=96 * MTU + 17, seed=seed, loss=0.05, reorder=0.05, dup=0.05, record=False)
    t.qb.post_recv(RecvWR(9, None))
    t.write(imm=seed)
    wa, wb = t.run_until_wc(1, 1, timeout=60)
    assert wa[0].status == WCStatus.SUCCESS and wb[0].imm_data == seed
    assert bytes(t.mb.buf) == bytes(t.src)
    assert t.wire.counters["dropped"] > 0 and t.wire.counters["reordered"] > 0
    assert t.wire.counters["duplicated"] > 0
    assert len(wb) == 1


def test_reordered_packets_are_naked_and_data_exact():
    t = Pair(size=16 * MTU)
    t.wire.hook = lambda p, s, d: 200_000 if p.opcode in OPS_DATA and p.psn == 2 and \
        p.psn not in seen and not seen.add(p.psn) else None
    seen: set[int] = set()
    t.write()
    wa, _ = t.run_until_wc()
    assert wa[0].status == WCStatus.SUCCESS
    assert bytes(t.mb.buf) == bytes(t.src)
    assert t.qb.stats["out_of_seq"] > 0 and t.qb.stats["naks_sent"] == 1


def test_duplicates_are_reacked_not_reapplied():
    t = Pair(size=4 * MTU)
    rmr = t.qb.pd.reg_mr(bytearray(4 * MTU), Access.LOCAL_WRITE)
    t.qb.post_recv(RecvWR(1, rmr.sge()))
    t.qb.post_recv(RecvWR(2, rmr.sge()))
    t.wire.hook = lambda p, s, d: "dup" if p.opcode in OPS_DATA else None
    t.qa.post_send(SendWR(10, WROpcode.SEND, t.ma.sge(0, 3 * MTU)))
    wa, wb = t.run_until_wc(1, 1)
    t.wire.run(timeout=0.01)
    assert [w.wr_id for w in wa] == [10]
    assert [w.wr_id for w in t.cb.poll(10)] == [] and [w.wr_id for w in wb] == [1]
    assert t.qb.stats["dup_pkts"] == 3 and t.qb.stats["rx_pkts"] == 3
    assert t.qb.stats["acks_sent"] >= 2           # duplicates trigger a re-ACK
    # the second receive WQE is still there for the next message
    t.wire.hook = None
    t.qa.post_send(SendWR(11, WROpcode.SEND, t.ma.sge(5, 10)))
    wa, wb = t.run_until_wc(1, 1)
    assert [w.wr_id for w in wb] == [2] and bytes(rmr.buf[:10]) == bytes(t.src[5:15])


def test_write_duplicate_after_local_change_is_not_reapplied():
    t = Pair(size=2 * MTU)
    # the only data packet arrives on time and again 5 ms later
    t.wire.hook = lambda p, s, d: [0, 5_000_000] if p.opcode in OPS_DATA else None
    t.write(length=100)
    t.run_until_wc()
    assert t.qb.stats["dup_pkts"] == 0 and bytes(t.mb.buf[:100]) == bytes(t.src[:100])
    t.mb.buf[:100] = b"\x00" * 100                 # the application reuses the buffer
    t.wire.run(timeout=0.02)                       # the late duplicate arrives now
    assert t.qb.stats["dup_pkts"] == 1
    assert bytes(t.mb.buf[:100]) == b"\x00" * 100


def test_psn_wraps_around_2_pow_24():
    start = (1 << 24) - 3
    t = Pair(size=8 * MTU, psn_a=start, psn_b=start)
    t.wire.hook = drop_psns({1})                   # lose a packet after the wrap
    t.write()
    wa, _ = t.run_until_wc()
    assert wa[0].status == WCStatus.SUCCESS and bytes(t.mb.buf) == bytes(t.src)
    psns = [p.psn for _, p in t.data_records()]
    assert psns[:5] == [start, start + 1, start + 2, 0, 1]
    assert t.qb.stats["naks_sent"] == 1
    assert t.qa.sq_psn == (start + 8) & 0xFFFFFF == t.qb.epsn


def test_retry_exhaustion_completes_with_error_and_flushes():
    t = Pair(size=4 * MTU, retry_cnt=2)
    t.wire.hook = lambda p, s, d: "drop" if p.opcode in OPS_DATA else None
    t.write(wr_id=1, length=MTU)
    t.write(wr_id=2, length=MTU)
    wa, _ = t.run_until_wc(2)
    assert [(w.wr_id, w.status) for w in wa] == [(1, WCStatus.RETRY_EXC_ERR),
                                                 (2, WCStatus.WR_FLUSH_ERR)]
    assert t.qa.state == QPState.ERR and t.qa.stats["rto"] == 3
    t.write(wr_id=3, length=10)                    # posting in ERR flushes at once
    assert [(w.wr_id, w.status) for w in t.ca.poll(5)] == [(3, WCStatus.WR_FLUSH_ERR)]


def test_retry_cnt_7_retries_forever_as_on_infiniband():
    t = Pair(size=4 * MTU, retry_cnt=7)
    dropping = [True]
    t.wire.hook = lambda p, s, d: "drop" if dropping[0] and p.opcode in OPS_DATA else None
    t.write(wr_id=1, length=MTU)
    t.wire.run(lambda: t.qa.stats["rto"] >= 20, timeout=60)
    assert t.qa.stats["rto"] >= 20 and t.qa.state == QPState.RTS and not len(t.ca)
    dropping[0] = False
    wa, _ = t.run_until_wc(1)
    assert [(w.wr_id, w.status) for w in wa] == [(1, WCStatus.SUCCESS)]


@pytest.mark.parametrize("field", ["retry_cnt", "rnr_retry"])
def test_retry_counts_beyond_7_are_refused(field):
    t = Pair(size=MTU)
    with pytest.raises(VerbsError, match=field):
        t.qa.modify(**{field: 8})


class RecordingRate(FixedRate):
    def __init__(self, rate_bps=20e6):
        super().__init__(rate_bps)
        self.cnp_times: list[int] = []
        self.sent = 0

    def on_cnp(self, now_ns):
        self.cnp_times.append(now_ns)

    def on_bytes_sent(self, n, now_ns):
        self.sent += n


def test_cnp_on_ce_is_rate_limited_per_interval():
    rc = RecordingRate()
    interval = 10_000_000                          # 10 ms
    t = Pair(size=256 * MTU, ce=1.0, cnp_interval_ns=interval, rc_a=rc, record=True)
    t.write()
    t.run_until_wc(timeout=60)
    assert bytes(t.mb.buf) == bytes(t.src)
    data = t.data_records()
    duration = data[-1][0].time_ns - data[0][0].time_ns
    assert duration > 5 * interval                 # the test spans several intervals
    cnps = [(r, W.decode(r.data)) for r in t.wire.records if r.src_ip == B_IP
            and W.decode(r.data).opcode == Opcode.CNP]
    assert 5 <= len(cnps) <= duration // interval + 1
    gaps = [b[0].time_ns - a[0].time_ns for a, b in zip(cnps, cnps[1:], strict=False)]
    assert min(gaps) >= interval
    assert all(p.dqpn == t.qa.qp_num and r.ecn == ECN_NOT_ECT for r, p in cnps)
    assert len(rc.cnp_times) == len(cnps) == t.qa.stats["cnps_rcvd"]
    assert rc.sent == t.qa.stats["tx_bytes"] > len(t.src)


def test_no_cnp_without_ce():
    t = Pair(size=32 * MTU)
    t.write()
    t.run_until_wc()
    assert t.qb.stats["cnps_sent"] == 0


def test_fixed_rate_paces_the_sender():
    rate = 10e6
    t = Pair(size=64 * MTU, rc_a=FixedRate(rate))
    t.write()
    t.run_until_wc(timeout=60)
    data = t.data_records()
    span = data[-1][0].time_ns - data[0][0].time_ns
    expect = sum(len(r.data) + 42 for r, _ in data[:-1]) * 8 / rate * 1e9
    assert 0.98 * expect <= span <= 1.02 * expect


def test_bad_icrc_is_counted_and_dropped():
    t = Pair(size=6 * MTU)
    left = [1]
    t.wire.hook = lambda p, s, d: "corrupt" if p.opcode in OPS_DATA and p.psn == 2 and \
        left and left.pop() else None
    t.write()
    wa, _ = t.run_until_wc()
    assert wa[0].status == WCStatus.SUCCESS and bytes(t.mb.buf) == bytes(t.src)
    assert t.B.engine.stats["icrc_drops"] == 1
    assert t.qb.stats["naks_sent"] == 1            # the corrupted packet counts as lost


def test_icrc_check_can_be_disabled():
    t = Pair(size=MTU)
    t.B.check_icrc = False          # e.g. a switch rewrites headers without fixing the ICRC
    t.wire.hook = lambda p, s, d: "corrupt" if p.opcode in OPS_DATA else None
    t.write(length=100)
    t.run_until_wc()
    assert t.B.engine.stats["icrc_drops"] == 0 and t.qb.stats["rx_pkts"] == 1


def test_send_without_receive_wqe_gets_rnr_nak_then_completes():
    t = Pair(size=2 * MTU)
    rmr = t.qb.pd.reg_mr(bytearray(MTU), Access.LOCAL_WRITE)
    t.qa.post_send(SendWR(1, WROpcode.SEND, t.ma.sge(0, 64)))
    t.wire.run(lambda: t.qb.stats["rnr_naks_sent"] >= 2, timeout=1)
    assert len(t.ca) == 0
    t.qb.post_recv(RecvWR(8, rmr.sge()))
    wa, wb = t.run_until_wc(1, 1)
    assert wa[0].status == WCStatus.SUCCESS and wb[0].byte_len == 64
    assert t.qa.stats["rnr_naks_rcvd"] >= 2


def test_bad_rkey_gives_remote_access_error():
    t = Pair(size=MTU)
    t.qa.post_send(SendWR(1, WROpcode.RDMA_WRITE, t.ma.sge(0, 10),
                          remote_addr=t.mb.addr, rkey=t.mb.rkey + 99))
    wa, _ = t.run_until_wc()
    assert wa[0].status == WCStatus.REM_ACCESS_ERR and t.qa.state == QPState.ERR
    assert t.qb.state == QPState.ERR


def test_out_of_range_write_gives_remote_access_error():
    t = Pair(size=MTU)
    t.qa.post_send(SendWR(1, WROpcode.RDMA_WRITE, t.ma.sge(0, 10),
                          remote_addr=t.mb.addr + MTU - 5, rkey=t.mb.rkey))
    wa, _ = t.run_until_wc()
    assert wa[0].status == WCStatus.REM_ACCESS_ERR


def test_qp_state_machine_rejects_invalid_use():
    w = SimWire()
    ctx = Context(w.provider("10.9.9.9"))
    pd = ctx.alloc_pd()
    cq = ctx.create_cq()
    qp = pd.create_qp(cq)
    mr = pd.reg_mr(bytearray(10))
    assert qp.state == QPState.RESET
    with pytest.raises(VerbsError):
        qp.modify(state=QPState.RTS)
    with pytest.raises(VerbsError):
        qp.post_send(SendWR(1, WROpcode.SEND, mr.sge()))
    qp.modify(state=QPState.INIT)
    with pytest.raises(VerbsError):
        qp.modify(state=QPState.RTR)                   # no destination
    qp.modify(state=QPState.RTR, dest_ip="10.9.9.8", dest_qp_num=5)
    with pytest.raises(VerbsError):
        qp.post_send(SendWR(1, WROpcode.SEND, mr.sge()))   # RTR cannot send
    qp.modify(state=QPState.RTS, path_mtu=4096, job_id=7)
    with pytest.raises(VerbsError):
        qp.modify(path_mtu=1000)
    with pytest.raises(VerbsError):
        qp.post_send(SendWR(1, WROpcode.SEND_WITH_IMM, mr.sge()))   # no imm_data
    qp.modify(state=QPState.RESET)
    assert qp.state == QPState.RESET


def test_retagging_changes_the_source_port_on_the_wire():
    t = Pair(size=2 * MTU)
    t.write(wr_id=1, length=10)
    t.run_until_wc()
    t.qa.modify(sport=0xC000 | 5, job_id=9)
    t.write(wr_id=2, length=10)
    t.run_until_wc()
    recs = t.data_records()
    assert [(r.sport, p.job_id) for r, p in recs] == [(0xC000, 4), (0xC005, 9)]
    assert bytes(t.mb.buf[:10]) == bytes(t.src[:10])


def test_acks_are_coalesced():
    t = Pair(size=64 * MTU)
    t.write()
    t.run_until_wc()
    every = t.A.scale.ack_every_pkts
    assert 64 // every <= t.qb.stats["acks_sent"] <= 64 // every + 1
    assert t.qa.stats["acks_rcvd"] == t.qb.stats["acks_sent"]


def test_delayed_ack_covers_packets_before_a_lost_tail():
    t = Pair(size=8 * MTU, scale=Scale(max_inflight_pkts=8, ack_every_pkts=64))
    t.wire.hook = drop_psns({7})
    t.write()
    wa, _ = t.run_until_wc()
    assert wa[0].status == WCStatus.SUCCESS and bytes(t.mb.buf) == bytes(t.src)
    # the delayed ACK acknowledged PSNs 0..6, so the timeout resends only PSN 7
    assert t.qa.stats["rto"] == 1 and t.qa.stats["retransmits"] == 1


class TimerRate(FixedRate):
    """Halves the rate on a CNP and restores it ``hold_ns`` later."""

    def __init__(self, rate_bps, hold_ns):
        super().__init__(rate_bps)
        self.base, self.hold = rate_bps, hold_ns
        self.deadline = None
        self.fired: list[tuple[int, int]] = []

    def on_cnp(self, now_ns):
        self._rate = self.base / 2
        self.deadline = now_ns + self.hold

    def next_deadline(self):
        return self.deadline

    def on_timer(self, now_ns):
        self.fired.append((self.deadline, now_ns))
        self._rate = self.base
        self.deadline = None


def test_rate_controller_timers_and_rate_changes_are_honoured():
    rc = TimerRate(10e6, hold_ns=3_000_000)
    t = Pair(size=64 * MTU, rc_a=rc, cnp_interval_ns=100_000_000)
    marked = []
    t.wire.hook = lambda p, s, d: "ce" if p.opcode in OPS_DATA and p.psn == 10 and \
        not marked and not marked.append(1) else None
    t.write()
    t.run_until_wc(timeout=60)
    assert t.qa.stats["cnps_rcvd"] == 1
    assert len(rc.fired) == 1 and rc.fired[0][0] == rc.fired[0][1]   # fired exactly on time
    times = [r.time_ns for r, _ in t.data_records()]
    gaps = [b - a for a, b in zip(times, times[1:], strict=False)]
    full = (MTU + 12 + 4 + 42) * 8 / 10e6 * 1e9
    assert max(gaps) == pytest.approx(2 * full, rel=0.02)   # half rate while held
    assert min(gaps[:5]) == pytest.approx(full, rel=0.02)


def test_scale_derives_every_timer_and_reports_them():
    s = Scale(slowdown=500.0, rto_us=200.0, floor_ms=2.0)
    assert s.line_rate_bps == 100e9 / 500
    assert s.rto_ns == 100_000_000
    assert s.ack_delay_ns == 2_000_000          # 1 ms scaled, raised to the floor
    rep = s.timers()
    assert rep["rto_ns"] == s.rto_ns and rep["slowdown"] == 500.0
    with pytest.raises(ValueError):
        Scale(slowdown=0)


def test_nic_latency_and_a_posting_delay_hold_requests_in_order():
    """A posted WR's first packet leaves the NIC's latency (plus the poster's
    own delay) later; requests still leave in posting order, and a latency is
    not raised to the timers' floor."""
    scale = Scale(nic_latency_us=3.0, floor_ms=5.0)         # 3 ms at slowdown 1000
    assert scale.nic_latency_ns == 3_000_000 and scale.timers()["nic_latency_ns"] == 3_000_000
    t = Pair(size=3 * MTU, scale=scale)
    t0 = t.wire.clock
    t.write(wr_id=1, length=MTU)
    t.qa.post_send(SendWR(2, WROpcode.RDMA_WRITE, t.ma.sge(MTU, MTU),
                          remote_addr=t.mb.addr + MTU, rkey=t.mb.rkey), delay_ns=5_000_000)
    t.write(wr_id=3, offset=2 * MTU, length=MTU, remote_offset=2 * MTU)
    wa, _ = t.run_until_wc(n_a=3)
    assert [w.wr_id for w in wa] == [1, 2, 3] and bytes(t.mb.buf) == bytes(t.src)
    sent = [r.time_ns - t0 for r, _p in t.data_records()]
    assert len(sent) == 3
    assert sent[0] == 3_000_000                        # the NIC's latency
    assert sent[1] == 8_000_000                        # + the poster's 5 ms
    assert sent[2] >= sent[1]                          # behind the one ahead of it
    with pytest.raises(ValueError):
        Scale(nic_latency_us=-1.0)


def test_recorded_wire_writes_a_pcap_scapy_dissects(tmp_path):
    from scapy.utils import rdpcap

    from hosts.roce import scapy_layers as L
    t = Pair(size=3 * MTU)
    t.write(imm=5)
    t.qb.post_recv(RecvWR(1, None))
    t.run_until_wc(1, 1)
    n = t.wire.write_pcap(str(tmp_path / "x.pcap"))
    pkts = rdpcap(str(tmp_path / "x.pcap"))
    assert len(pkts) == n == len(t.wire.records)
    ops = [p[L.BTH].opcode for p in pkts]
    assert ops[:3] == [Opcode.RDMA_WRITE_FIRST, Opcode.RDMA_WRITE_MIDDLE,
                       Opcode.RDMA_WRITE_LAST_IMM] and Opcode.ACK in ops
    assert all(L.icrc_ok(p) for p in pkts)
    assert pkts[2][L.ImmDt].imm == 5


def test_engine_summary_adds_up_qps():
    t = Pair(size=8 * MTU)
    t.write()
    t.run_until_wc()
    sa = t.A.engine.summary()
    assert sa["tx_pkts"] == 8 and sa["acks_rcvd"] == t.qa.stats["acks_rcvd"]
    assert t.B.engine.summary()["rx_bytes"] == 8 * MTU


def test_refused_datagrams_are_sent_later_not_lost():
    t = Pair(size=8 * MTU)
    prov = t.A.provider
    real_send = prov.send
    refusals = [3]

    def send(sport, dst, dport, parts, ecn, dscp=0, priority=0):   # the socket buffer is full
        if ecn == ECN_ECT0 and refusals[0] and len(t.data_records()) == 2:
            refusals[0] -= 1
            return False
        return real_send(sport, dst, dport, parts, ecn, dscp, priority)
    prov.send = send
    t.write()
    wa, _ = t.run_until_wc()
    assert wa[0].status == WCStatus.SUCCESS and bytes(t.mb.buf) == bytes(t.src)
    assert refusals[0] == 0 and t.qa.stats["tx_drops"] == 3
    assert t.qa.stats["retransmits"] == 0 and t.qa.stats["rto"] == 0
    assert [p.psn for _, p in t.data_records()] == list(range(8))


def test_both_directions_at_once_with_loss():
    t = Pair(size=32 * MTU, loss=0.1, seed=7, record=False)
    back = bytearray(b"\x00" * len(t.src))
    mback = t.qa.pd.reg_mr(back, Access.LOCAL_WRITE | Access.REMOTE_WRITE)
    t.write()
    # a zero-length WRITE (no SGE) is a valid one-packet message
    t.qb.post_send(SendWR(9, WROpcode.RDMA_WRITE, None, remote_addr=mback.addr,
                          rkey=mback.rkey))
    src_b = t.qb.pd.reg_mr(bytearray(reversed(t.src)))
    t.qb.post_send(SendWR(10, WROpcode.RDMA_WRITE, src_b.sge(), remote_addr=mback.addr,
                          rkey=mback.rkey))
    wa, wb = t.run_until_wc(1, 2, timeout=60)
    assert [w.status for w in wa + wb] == [WCStatus.SUCCESS] * 3
    assert bytes(t.mb.buf) == bytes(t.src) and bytes(back) == bytes(reversed(t.src))
    assert t.wire.counters["dropped"] > 0


def test_ring_of_three_hosts_sharing_cqs():
    w = SimWire(loss=0.02, seed=3, reorder=0.02)
    ips = ["10.0.0.1", "10.0.0.2", "10.0.0.3"]
    ctxs = [Context(w.provider(ip)) for ip in ips]
    n = 20 * MTU + 8
    hosts = []
    for i, c in enumerate(ctxs):
        pd = c.alloc_pd()
        cq = c.create_cq()
        src = pd.reg_mr(bytearray(((i + 1) * k) % 256 for k in range(n)))
        dst = pd.reg_mr(bytearray(n), Access.LOCAL_WRITE | Access.REMOTE_WRITE)
        hosts.append(dict(pd=pd, cq=cq, src=src, dst=dst,
                          to_next=pd.create_qp(cq, sport=0xC000 | i, job_id=1),
                          from_prev=pd.create_qp(cq, sport=0xC000 | i, job_id=1)))
    for i in range(3):
        connect_pair(hosts[i]["to_next"], hosts[(i + 1) % 3]["from_prev"])
    for i, h in enumerate(hosts):
        nxt = hosts[(i + 1) % 3]
        nxt["from_prev"].post_recv(RecvWR(100 + i, None))
        h["to_next"].post_send(SendWR(i, WROpcode.RDMA_WRITE_WITH_IMM, h["src"].sge(),
                                      remote_addr=nxt["dst"].addr, rkey=nxt["dst"].rkey,
                                      imm_data=i))
    assert w.run(lambda: all(len(h["cq"]) >= 2 for h in hosts), timeout=60)
    for i, h in enumerate(hosts):
        wcs = h["cq"].poll(10)
        assert sorted((c.opcode, c.imm_data) for c in wcs) == [
            (WCOpcode.RDMA_WRITE, None), (WCOpcode.RECV_RDMA_WITH_IMM, (i - 1) % 3)]
        prev = hosts[(i - 1) % 3]
        assert bytes(h["dst"].buf) == bytes(prev["src"].buf)


@pytest.mark.parametrize("seed", [11, 12])
def test_heavy_loss_still_delivers_exactly(seed):
    t = Pair(size=24 * MTU + 5, loss=0.2, seed=seed, record=False, retry_cnt=7)
    t.qb.post_recv(RecvWR(1, None))
    t.write(imm=3)
    wa, wb = t.run_until_wc(1, 1, timeout=600)
    assert wa[0].status == WCStatus.SUCCESS and wb[0].imm_data == 3
    assert bytes(t.mb.buf) == bytes(t.src)


def test_cq_wait_and_engine_run_drive_a_simulated_wire():
    # Application code written against CQ.wait / Engine.run works on the simulated
    # wire too: waiting advances the shared fake clock and the other engines.
    t = Pair(size=16 * MTU, loss=0.05, seed=5)
    t.qb.post_recv(RecvWR(4, None))
    t.write(imm=8)
    wa = t.ca.wait(1, timeout=30)
    assert [(w.wr_id, w.status) for w in wa] == [(1, WCStatus.SUCCESS)]
    assert t.B.engine.run(until=lambda: len(t.cb) > 0, timeout=30)
    assert t.cb.poll(1)[0].imm_data == 8 and bytes(t.mb.buf) == bytes(t.src)
    before = t.wire.clock
    assert t.cb.wait(1, timeout=0.5) == []          # nothing more comes: times out
    assert t.wire.clock - before >= 500_000_000


def test_idle_qps_are_not_ticked_while_others_work(monkeypatch):
    """The engine ticks a QP when something happened to it or its own timer is
    due, not on every pass: a rank's idle QPs cost nothing while one QP
    transfers (with a loss, so go-back-N and the RTO run too)."""
    from hosts.roce.verbs import QP

    ticks: dict[int, int] = {}
    tick = QP._tick

    def counting_tick(self, now):
        ticks[id(self)] = ticks.get(id(self), 0) + 1
        tick(self, now)

    monkeypatch.setattr(QP, "_tick", counting_tick)
    t = Pair(size=64 * MTU)
    t.wire.hook = drop_psns([10, 63])
    pa, pb = t.ma.pd, t.mb.pd
    idle = []
    for _ in range(30):
        qa, qb = pa.create_qp(t.ca, job_id=4), pb.create_qp(t.cb, job_id=4)
        connect_pair(qa, qb, path_mtu=MTU)
        idle += [qa, qb]
    t.write()
    wa, _ = t.run_until_wc()
    assert wa[0].status == WCStatus.SUCCESS and bytes(t.mb.buf) == bytes(t.src)
    assert t.qa.stats["retransmits"] >= 2
    assert ticks[id(t.qa)] > 64 and ticks[id(t.qb)] > 10
    assert max(ticks.get(id(q), 0) for q in idle) <= 1   # once, after connect_pair


def test_only_a_paced_send_is_an_exact_deadline():
    """The engine says which deadline must be met to the microsecond: a
    sender's next paced packet is; a receiver's ACK coalescing timer (and
    the RTO, RNR and DCQCN timers, milliseconds once scaled) is not, and the
    host waits for it without polling."""
    t = Pair(size=64 * MTU, rc_a=FixedRate(10e6))
    t.write()
    assert t.wire.run(lambda: t.qb.stats["rx_pkts"] >= 2, 5)
    a, b = t.A.engine, t.B.engine
    dl = a.next_deadline()
    assert dl is not None and a.exact_at == dl and wait_exactly(dl, a.exact_at)
    dl = b.next_deadline()
    assert dl == t.qb._ack_deadline is not None
    assert b.exact_at is None and not wait_exactly(dl, b.exact_at)
    # a timer just before a paced send: waited for exactly, so that a late
    # wake-up for the timer does not make the send late
    assert wait_exactly(dl, dl + MAX_WAKE_LEAD_NS)
    assert not wait_exactly(dl, dl + MAX_WAKE_LEAD_NS + 1)
