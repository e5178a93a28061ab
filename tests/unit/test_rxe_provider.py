"""The rxe provider: the kernel's source-port rules, device discovery on a fake
sysfs tree, the verbs attribute mapping and pyverbs objects built from it (no
device needed), and a loopback RDMA WRITE / SEND_WITH_IMM where an rxe device exists."""

from __future__ import annotations

import ctypes
import socket
import time
from pathlib import Path

import pytest

from hosts.roce import Access, QPState, RecvWR, SendWR, VerbsError, WCOpcode, WCStatus, WROpcode
from hosts.roce.constants import tag_sport
from hosts.roce.rxe import device as rxe_device
from hosts.roce.rxe.device import (
    RxeUnavailable,
    find_rxe_device,
    gid_ipv4,
    ipv4_gid,
    read_hw_counters,
    rxe_unavailable_reason,
)
from hosts.roce.rxe.provider import RxeContext, RxeEngine
from hosts.roce.rxe.pyverbs_objects import (
    buffer_address,
    imm_from_wire,
    imm_to_wire,
    make_qp_attr,
    make_recv_wr,
    make_send_wr,
    wc_from_verbs,
)
from hosts.roce.rxe.qp_plans import (
    IBV_ACCESS,
    IBV_MTU,
    IBV_QP_MASK,
    IBV_QPS,
    IBV_QPS_SQD,
    IBV_QPT_RC,
    IBV_SEND_SIGNALED,
    IBV_WC_WITH_IMM,
    IBV_WR,
    ib_timeout_exp,
    ibv_access,
    init_plan,
    rtr_plan,
    rts_plan,
)
from hosts.roce.rxe.sport import (
    FLOW_LABEL_MASK,
    flow_label_for_sport,
    flow_label_to_sport,
    kernel_has_flow_label_sport,
    rdma_calc_flow_label,
    rdma_udp_sport,
    rxe_qpn_sport,
    rxe_sport,
)
from hosts.roce.verbs import SGE

try:
    import pyverbs.enums as E
except ImportError:
    E = None
needs_pyverbs = pytest.mark.skipif(E is None, reason="pyverbs missing (apt-get install "
                                   "python3-pyverbs)")


# -- source port rules ---------------------------------------------------------------

@pytest.mark.parametrize("qpn, sport", [(0x1, 0xD872), (0x11, 0xDF94), (0x12, 0xF806),
                                        (0x1234, 0xFD8B), (0xFFFFFF, 0xF94D)])
def test_creation_port_is_the_qpn_hash(qpn, sport):
    # 0xC000 + (((qpn * 0x61C88647) mod 2**32) >> 18), worked out by hand for qpn 1:
    # 0x61C88647 >> 18 = 0x1872
    assert rxe_qpn_sport(qpn) == sport
    assert rxe_sport(qpn) == sport                       # no address vector yet
    assert rxe_sport(qpn, 0x22, flow_label_rule=False) == sport   # kernels < 5.17


@pytest.mark.parametrize("lq, rq, fl, sport", [(0x11, 0x12, 0x132, 0xC132),
                                             (0x1234, 0x5678, 0x60002, 0xC01A),
                                             (0xFFFFFF, 0xFFFFFF, 0xFFF1E, 0xFF21)])
def test_zero_flow_label_is_derived_from_both_qpns(lq, rq, fl, sport):
    # v = lq * rq; v ^= v >> 20; v ^= v >> 40 (0x1234 * 0x5678 = 0x6260060 -> 0x60002)
    assert rdma_calc_flow_label(lq, rq) == rdma_calc_flow_label(rq, lq) == fl
    assert rdma_udp_sport(0, lq, rq) == rxe_sport(lq, rq) == sport


def test_flow_label_folds_into_the_port():
    assert flow_label_to_sport(0x00005) == 0xC005
    assert flow_label_to_sport(0x4001) == 0xC000          # 1 ^ (0x4000 >> 14)
    assert flow_label_to_sport(0xFFFFF) == 0xC000 | (0x3FFF ^ 0x3F)


def test_every_tag_port_has_a_flow_label_that_selects_it():
    for sport in range(0xC000, 0x10000):
        fl = flow_label_for_sport(sport)
        assert 0 < fl <= FLOW_LABEL_MASK
        assert rdma_udp_sport(fl, 0x11, 0x12) == sport
    assert rxe_sport(0x11, 0x12, flow_label_for_sport(tag_sport(9))) == tag_sport(9)
    for bad in (0, 4791, 0xBFFF, 0x10000):
        with pytest.raises(VerbsError):
            flow_label_for_sport(bad)


@pytest.mark.parametrize("release, has", [("5.15.0-91-generic", False), ("5.16.20", False),
                                          ("5.17.0", True), ("6.1.0-18-amd64", True),
                                          ("4.19.0-26-amd64", False), ("6.18.44-fc-v657", True),
                                          ("10.0", True), ("garbage", False)])
def test_kernel_version_decides_the_flow_label_rule(release, has):
    assert kernel_has_flow_label_sport(release) is has


# -- discovery ---------------------------------------------------------------------

def _gid(root: Path, dev: str, port: int, i: int, gid: str, typ: str | None,
         ndev: str | None) -> None:
    p = root / dev / "ports" / str(port)
    for sub in ("gids", "gid_attrs/types", "gid_attrs/ndevs", "hw_counters"):
        (p / sub).mkdir(parents=True, exist_ok=True)
    (p / "gids" / str(i)).write_text(gid + "\n")
    if typ is not None:
        (p / "gid_attrs" / "types" / str(i)).write_text(typ + "\n")
    if ndev is not None:
        (p / "gid_attrs" / "ndevs" / str(i)).write_text(ndev + "\n")


ZERO = "0000:0000:0000:0000:0000:0000:0000:0000"
LINK_LOCAL = "fe80:0000:0000:0000:5054:00ff:fe12:3456"


@pytest.fixture()
def sysfs(tmp_path: Path) -> Path:
    root = tmp_path / "infiniband"
    # rxe0 on eth1 with 10.0.0.1: link-local v1/v2 GIDs, then the IPv4 GID as v1 and v2
    (root / "rxe0").mkdir(parents=True)
    (root / "rxe0" / "parent").write_text("eth1\n")
    _gid(root, "rxe0", 1, 0, LINK_LOCAL, "IB/RoCE v1", "eth1")
    _gid(root, "rxe0", 1, 1, LINK_LOCAL, "RoCE v2", "eth1")
    _gid(root, "rxe0", 1, 2, ipv4_gid("10.0.0.1"), "IB/RoCE v1", "eth1")
    _gid(root, "rxe0", 1, 3, ipv4_gid("10.0.0.1"), "RoCE v2", "eth1")
    _gid(root, "rxe0", 1, 4, ZERO, None, None)                    # unused slot
    (root / "rxe0" / "ports" / "1" / "hw_counters" / "sent_pkts").write_text("12\n")
    (root / "rxe0" / "ports" / "1" / "hw_counters" / "rcvd_pkts").write_text("7\n")
    # a hardware RoCE device (no 'parent'): never picked
    (root / "mlx5_0").mkdir()
    _gid(root, "mlx5_0", 1, 3, ipv4_gid("10.0.0.9"), "RoCE v2", "ens1")
    # rxe1 on eth2 with 10.0.1.1 at GID index 5
    (root / "rxe1").mkdir()
    (root / "rxe1" / "parent").write_text("eth2\n")
    _gid(root, "rxe1", 1, 5, ipv4_gid("10.0.1.1"), "RoCE v2", "eth2")
    return root


def test_gid_text_conversions():
    assert ipv4_gid("10.0.0.1") == "0000:0000:0000:0000:0000:ffff:0a00:0001"
    assert gid_ipv4("0000:0000:0000:0000:0000:ffff:0a00:0001") == "10.0.0.1"
    assert gid_ipv4(LINK_LOCAL) is None and gid_ipv4("zz") is None


def test_discovery_picks_the_roce_v2_ipv4_gid(sysfs):
    d = find_rxe_device("10.0.0.1", sysfs_root=str(sysfs))
    assert (d.name, d.port, d.netdev, d.gid_index, d.ipv4) == ("rxe0", 1, "eth1", 3, "10.0.0.1")
    assert {g.index for g in d.gids} == {0, 1, 2, 3}              # the zero GID is skipped
    assert find_rxe_device(netdev="eth2", sysfs_root=str(sysfs)).gid_index == 5
    assert find_rxe_device(sysfs_root=str(sysfs)).name == "rxe0"
    assert find_rxe_device(device="rxe1", sysfs_root=str(sysfs)).ipv4 == "10.0.1.1"
    assert read_hw_counters(d, str(sysfs)) == {"rcvd_pkts": 7, "sent_pkts": 12}


def test_discovery_errors_say_how_to_create_the_device(sysfs, tmp_path):
    with pytest.raises(RxeUnavailable) as ex:
        find_rxe_device(sysfs_root=str(tmp_path / "none"))
    assert str(ex.value) == ("no rdma_rxe device: modprobe rdma_rxe; rdma link add rxe0 type "
                             "rxe netdev eth0; note: rxe works only in the initial network "
                             "namespace")
    with pytest.raises(RxeUnavailable) as ex:
        find_rxe_device("10.0.0.9", netdev="ens1", sysfs_root=str(sysfs))  # the mlx5 one
    msg = str(ex.value)
    assert "10.0.0.9" in msg and "rxe0 on eth1: 10.0.0.1" in msg and "netdev ens1" in msg
    assert "rxe1 on eth2: 10.0.1.1" in msg and "mlx5" not in msg
    assert rxe_unavailable_reason("10.9.9.9", sysfs_root=str(sysfs)) is not None


# -- attribute mapping -----------------------------------------------------------------

def test_timeout_exponent_is_the_smallest_that_covers_the_timeout():
    assert ib_timeout_exp(None) == 14
    assert ib_timeout_exp(8192) == 1                  # 4.096 µs * 2
    assert ib_timeout_exp(8193) == 2
    assert ib_timeout_exp(67_108_864) == 14           # 4096 * 2**14 ns
    assert ib_timeout_exp(10**15) == 31


def test_qp_plans_carry_the_transition_attributes():
    p = init_plan(1)
    assert p.attrs == {"qp_state": 1, "pkey_index": 0, "port_num": 1, "qp_access_flags": 7}
    assert p.mask_bits == 1 | 8 | 16 | 32
    p = rtr_plan(dest_ip="10.0.0.2", dest_qp_num=0x1234, rq_psn=0x1FFFFFF, path_mtu=2048,
                 sgid_index=3, flow_label=flow_label_for_sport(tag_sport(5)),
                 traffic_class=2, hop_limit=64, port_num=1)
    assert p.attrs["qp_state"] == 2 and p.attrs["path_mtu"] == 4
    assert p.attrs["dest_qp_num"] == 0x1234 and p.attrs["rq_psn"] == 0xFFFFFF
    assert p.ah == {"dgid": "0000:0000:0000:0000:0000:ffff:0a00:0002", "sgid_index": 3,
                    "flow_label": 5, "traffic_class": 2, "hop_limit": 64, "port_num": 1}
    assert set(p.mask) == {"STATE", "AV", "PATH_MTU", "DEST_QPN", "RQ_PSN",
                           "MAX_DEST_RD_ATOMIC", "MIN_RNR_TIMER"}
    p = rts_plan(sq_psn=0x1000005, timeout_ns=None, retry_cnt=7, rnr_retry=7)
    assert p.attrs == {"qp_state": 3, "sq_psn": 5, "timeout": 14, "retry_cnt": 7,
                       "rnr_retry": 7, "max_rd_atomic": 1}
    with pytest.raises(VerbsError):
        rtr_plan(dest_ip="10.0.0.2", dest_qp_num=1, rq_psn=0, path_mtu=1500, sgid_index=0,
                 flow_label=0, traffic_class=0, hop_limit=64, port_num=1)
    with pytest.raises(VerbsError):
        rts_plan(sq_psn=0, timeout_ns=None, retry_cnt=8, rnr_retry=7)
    assert ibv_access(Access.LOCAL_WRITE | Access.REMOTE_WRITE) == 3


def test_immediate_data_is_big_endian_on_the_wire():
    raw = imm_to_wire(0x01020304)
    assert raw.to_bytes(4, __import__("sys").byteorder) == b"\x01\x02\x03\x04"
    assert imm_from_wire(raw) == 0x01020304
    assert imm_from_wire(imm_to_wire(0xFFFFFFFF)) == 0xFFFFFFFF


def test_buffer_address_is_the_memory_the_nic_reads():
    buf = bytearray(b"abcdef")
    addr, n, pin = buffer_address(buf)
    assert n == 6 and ctypes.string_at(addr + 2, 3) == b"cde"
    with pytest.raises(BufferError):
        buf.extend(b"x")                  # pinned while registered
    with pytest.raises(VerbsError):
        buffer_address(b"readonly")
    del pin


# -- pyverbs objects (the library, no device) --------------------------------------------

@needs_pyverbs
def test_abi_constants_match_libibverbs():
    assert IBV_QPT_RC == E.IBV_QPT_RC and IBV_QPS_SQD == E.IBV_QPS_SQD
    for st, v in IBV_QPS.items():
        assert getattr(E, "IBV_QPS_" + st.name) == v
    for name, bit in IBV_QP_MASK.items():
        assert getattr(E, "IBV_QP_" + name) == bit
    for flag, bit in IBV_ACCESS.items():
        assert getattr(E, "IBV_ACCESS_" + flag.name) == bit
    for mtu, v in IBV_MTU.items():
        assert getattr(E, f"IBV_MTU_{mtu}") == v
    for op, v in IBV_WR.items():
        assert getattr(E, "IBV_WR_" + op.name) == v
    assert IBV_SEND_SIGNALED == E.IBV_SEND_SIGNALED and IBV_WC_WITH_IMM == E.IBV_WC_WITH_IMM
    for st in WCStatus:
        assert getattr(E, "IBV_WC_" + st.name) == st
    assert (E.IBV_WC_SEND, E.IBV_WC_RDMA_WRITE, E.IBV_WC_RECV, E.IBV_WC_RECV_RDMA_WITH_IMM) == (
        WCOpcode.SEND, WCOpcode.RDMA_WRITE, WCOpcode.RECV, WCOpcode.RECV_RDMA_WITH_IMM)


@needs_pyverbs
def test_rtr_plan_becomes_a_pyverbs_qp_attr():
    p = rtr_plan(dest_ip="10.0.0.2", dest_qp_num=0x33, rq_psn=77, path_mtu=4096,
                 sgid_index=3, flow_label=flow_label_for_sport(0xC000), traffic_class=2,
                 hop_limit=9, port_num=1)
    a = make_qp_attr(p)
    assert (a.qp_state, a.path_mtu, a.dest_qp_num, a.rq_psn) == (E.IBV_QPS_RTR, E.IBV_MTU_4096,
                                                                  0x33, 77)
    assert (a.max_dest_rd_atomic, a.min_rnr_timer) == (1, 12)
    ah = a.ah_attr
    assert (ah.is_global, ah.port_num, ah.sgid_index, ah.flow_label, ah.traffic_class,
            ah.hop_limit) == (1, 1, 3, 0x4001, 2, 9)
    assert str(ah.dgid) == "0000:0000:0000:0000:0000:ffff:0a00:0002"
    assert p.mask_bits == (E.IBV_QP_STATE | E.IBV_QP_AV | E.IBV_QP_PATH_MTU | E.IBV_QP_DEST_QPN
                           | E.IBV_QP_RQ_PSN | E.IBV_QP_MAX_DEST_RD_ATOMIC
                           | E.IBV_QP_MIN_RNR_TIMER)
    r = make_qp_attr(rts_plan(sq_psn=5, timeout_ns=100_000, retry_cnt=3, rnr_retry=7))
    assert (r.qp_state, r.sq_psn, r.timeout, r.retry_cnt, r.rnr_retry, r.max_rd_atomic) == (
        E.IBV_QPS_RTS, 5, 5, 3, 7, 1)


@needs_pyverbs
def test_send_and_recv_wrs_become_pyverbs_wrs():
    w = make_send_wr(SendWR(9, WROpcode.RDMA_WRITE_WITH_IMM, SGE(0x1000, 64, 0x55),
                            remote_addr=0x2000, rkey=0x77, imm_data=0x01020304))
    assert (w.wr_id, w.opcode, w.num_sge, w.send_flags) == (9, E.IBV_WR_RDMA_WRITE_WITH_IMM, 1,
                                                            E.IBV_SEND_SIGNALED)
    assert w.imm_data == imm_to_wire(0x01020304)
    w = make_send_wr(SendWR(3, WROpcode.SEND, None, signaled=False))
    assert (w.opcode, w.num_sge, w.send_flags) == (E.IBV_WR_SEND, 0, 0)
    w = make_send_wr(SendWR(4, WROpcode.SEND_WITH_IMM, SGE(0x10, 0, 1), imm_data=5))
    assert (w.opcode, w.num_sge) == (E.IBV_WR_SEND_WITH_IMM, 0)
    r = make_recv_wr(RecvWR(11, SGE(0x3000, 128, 0x9)))
    assert (r.wr_id, r.num_sge) == (11, 1)
    assert make_recv_wr(RecvWR(12, None)).num_sge == 0


@needs_pyverbs
def test_completions_become_project_wcs():
    from pyverbs.cq import WC as VWC
    t0 = time.monotonic_ns()
    wc = wc_from_verbs(VWC(wr_id=5, status=0, opcode=E.IBV_WC_RECV_RDMA_WITH_IMM,
                           byte_len=10, imm_data=imm_to_wire(0xCAFE0001), qp_num=0x11,
                           wc_flags=E.IBV_WC_WITH_IMM), 0x12, time.monotonic_ns())
    assert (wc.wr_id, wc.status, wc.opcode, wc.byte_len, wc.imm_data, wc.qp_num, wc.src_qp) == (
        5, WCStatus.SUCCESS, WCOpcode.RECV_RDMA_WITH_IMM, 10, 0xCAFE0001, 0x11, 0x12)
    assert t0 <= wc.timestamp_ns <= time.monotonic_ns()
    wc = wc_from_verbs(VWC(wr_id=6, status=E.IBV_WC_RETRY_EXC_ERR, opcode=E.IBV_WC_RDMA_WRITE,
                           imm_data=3, qp_num=1), 2, 0)
    assert (wc.status, wc.opcode, wc.imm_data) == (WCStatus.RETRY_EXC_ERR, WCOpcode.RDMA_WRITE,
                                                   None)


# -- a real device -------------------------------------------------------------------

def _device_reason() -> str | None:
    return rxe_unavailable_reason()


@pytest.fixture()
def rxe_ctx():
    reason = _device_reason()
    if reason is not None:
        pytest.skip(reason)
    ctx = RxeContext()
    yield ctx
    ctx.close()


def _loop_pair(ctx, size):
    from hosts.roce import connect_pair
    pd = ctx.alloc_pd()
    src = bytearray((i * 7 + 1) % 251 for i in range(size))
    ma = pd.reg_mr(src, Access.LOCAL_WRITE)
    mb = pd.reg_mr(bytearray(size), Access.LOCAL_WRITE | Access.REMOTE_WRITE)
    ca, cb = ctx.create_cq(), ctx.create_cq()
    qa = pd.create_qp(ca, sport=tag_sport(3), job_id=1)
    qb = pd.create_qp(cb, sport=tag_sport(4))
    connect_pair(qa, qb, psn_a=0xFFFFF0, psn_b=7, path_mtu=1024)
    return src, ma, mb, ca, cb, qa, qb


def test_loopback_rdma_write_through_rxe(rxe_ctx):
    size = 256 * 1024
    src, ma, mb, ca, cb, qa, qb = _loop_pair(rxe_ctx, size)
    assert qa.state == QPState.RTS and qa.sport == (tag_sport(3) if rxe_ctx.flow_label_rule
                                                     else rxe_qpn_sport(qa.qp_num))
    qa.post_send(SendWR(1, WROpcode.RDMA_WRITE, ma.sge(), remote_addr=mb.addr, rkey=mb.rkey))
    wcs = ca.wait(1, timeout=10)
    assert [(w.wr_id, w.status, w.opcode, w.byte_len) for w in wcs] == [
        (1, WCStatus.SUCCESS, WCOpcode.RDMA_WRITE, size)]
    assert bytes(mb.buf) == bytes(src)


def test_loopback_send_with_imm_through_rxe(rxe_ctx):
    src, ma, mb, ca, cb, qa, qb = _loop_pair(rxe_ctx, 8192)
    qb.post_recv(RecvWR(21, mb.sge(0, 8192)))
    t0 = time.monotonic_ns()
    qa.post_send(SendWR(2, WROpcode.SEND_WITH_IMM, ma.sge(0, 5000), imm_data=0xDEADBEEF))
    rx = cb.wait(1, timeout=10)
    tx = ca.wait(1, timeout=10)
    assert [(w.wr_id, w.status, w.opcode) for w in tx] == [(2, WCStatus.SUCCESS, WCOpcode.SEND)]
    assert [(w.wr_id, w.status, w.opcode, w.byte_len, w.imm_data, w.qp_num, w.src_qp)
            for w in rx] == [(21, WCStatus.SUCCESS, WCOpcode.RECV, 5000, 0xDEADBEEF,
                              qb.qp_num, qa.qp_num)]
    assert t0 <= rx[0].timestamp_ns <= time.monotonic_ns()
    assert bytes(mb.buf[:5000]) == bytes(src[:5000])
    assert socket.inet_aton(rxe_ctx.local_ip)


# -- the glue over a stand-in for the device objects (real pyverbs attribute/WR types) --

class _FakeVerbs:
    """Records what RxeContext asks of libibverbs; completions are queued by hand."""

    def __init__(self):
        import pyverbs.addr as addr
        import pyverbs.qp as real_qp
        import pyverbs.wr as wr
        calls = self.calls = []
        wcs = self.wcs = []
        qpns = iter(range(0x11, 0x100))
        keys = iter(range(0x100, 0x1000))

        class Context:
            def __init__(self, name):
                self.name = name

            def query_device(self):
                return type("A", (), {"max_cqe": 32767})()

            def close(self):
                calls.append(("close_ctx",))

        class PD:
            def __init__(self, ctx):
                self.ctx = ctx

        class MR:
            def __init__(self, pd, length, access, address):
                self.lkey = self.rkey = next(keys)
                calls.append(("reg_mr", length, access, address))

            def close(self):
                calls.append(("dereg",))

        class CQ:
            def __init__(self, ctx, cqe, cq_context, channel, vector):
                self.cqe = cqe

            def poll(self, n):
                got = [w for w in wcs[:n]]
                del wcs[:n]
                return len(got), got

        class QP:
            def __init__(self, pd, init):
                self.qp_num = next(qpns)
                self.draining = 0

            def modify(self, attr, mask):
                ah = attr.ah_attr if mask & IBV_QP_MASK["AV"] else None
                calls.append(("modify", self.qp_num, attr.qp_state, mask,
                              ah.flow_label if ah else None))
                if attr.qp_state == IBV_QPS_SQD and mask == IBV_QP_MASK["STATE"]:
                    self.draining = 2          # drained after two queries

            def query(self, mask):
                self.draining = max(0, self.draining - 1)
                return type("A", (), {"sq_draining": self.draining, "sq_psn": 1,
                                      "rq_psn": 2})(), None

            def post_send(self, w):
                calls.append(("send", self.qp_num, w.wr_id, w.opcode, w.num_sge))

            def post_recv(self, w):
                calls.append(("recv", self.qp_num, w.wr_id, w.num_sge))

            def close(self):
                calls.append(("destroy", self.qp_num))

        class QPCap:
            def __init__(self, **kw):
                self.kw = kw

        class QPInitAttr:
            def __init__(self, **kw):
                self.kw = kw

        self.modules = (E, addr, type("cq", (), {"CQ": CQ}), type("device", (), {"Context": Context}),
                        type("mr", (), {"MR": MR}), type("pd", (), {"PD": PD}),
                        type("qp", (), {"QP": QP, "QPCap": QPCap, "QPInitAttr": QPInitAttr,
                                        "QPAttr": real_qp.QPAttr}), wr)


@pytest.fixture()
def fake(sysfs, monkeypatch):
    if E is None:
        pytest.skip("pyverbs missing (apt-get install python3-pyverbs)")
    f = _FakeVerbs()
    monkeypatch.setattr(rxe_device, "import_pyverbs", lambda: f.modules)
    f.sysfs = str(sysfs)
    return f


def _fake_pair(fake, **ctx_kw):
    from hosts.roce import connect_pair
    ctx = RxeContext("10.0.0.1", sysfs_root=fake.sysfs, sport_rule="flow_label", **ctx_kw)
    pd = ctx.alloc_pd()
    cq = ctx.create_cq()
    qa = pd.create_qp(cq, sport=tag_sport(3), job_id=2)
    qb = pd.create_qp(cq)
    connect_pair(qa, qb, psn_a=5, psn_b=6, path_mtu=2048)
    return ctx, pd, cq, qa, qb


def test_a_qp_reconnected_with_a_new_port_tells_the_context_of_its_reset(fake):
    # a Symphony ring's lane: reset, then connected again from INIT with the port
    # of the step it carries next (rxe fixes the port at RTR); the shim's wire
    # counts hear of the reset (the QP's PSNs start over)
    ctx, pd, cq, qa, qb = _fake_pair(fake)
    resets: list[int] = []
    ctx.on_qp_reset = resets.append
    qa.modify(state=QPState.RESET)
    qa.modify(state=QPState.INIT)
    qa.modify(state=QPState.RTR, dest_ip="10.0.0.1", dest_qp_num=qb.qp_num, rq_psn=0,
              sport=tag_sport(9))
    qa.modify(state=QPState.RTS, sq_psn=0)
    assert resets == [qa.qp_num]
    assert qa.sport == tag_sport(9) and qa.stats["retags_ignored"] == 0


def test_a_qps_dscp_goes_to_whoever_writes_it_on_the_wire(fake):
    # rxe sends the context's traffic class in every packet of a QP; another DSCP
    # (a ReFlex flow's priority) is the DCQCN shim's to write, told by on_qp_dscp
    ctx, pd, cq, qa, qb = _fake_pair(fake)
    assert qa.dscp == 0
    with pytest.raises(VerbsError, match="DSCP 8 needs the DCQCN shim"):
        qa.dscp = 8
    assert qa.dscp == 0
    told: list[tuple[int, int | None]] = []
    ctx.on_qp_dscp = lambda qpn, dscp: told.append((qpn, dscp))
    qa.dscp = 8
    qa.dscp = 8                         # no change: nothing to tell
    qa.dscp = 0                         # the context's own: no rewrite
    with pytest.raises(VerbsError, match="out of range"):
        qa.dscp = 64
    assert told == [(qa.qp_num, 8), (qa.qp_num, None)] and qa.dscp == 0


def test_connect_maps_states_and_pins_the_requested_port(fake):
    ctx, pd, cq, qa, qb = _fake_pair(fake)
    assert ctx.local_ip == "10.0.0.1" and ctx.provider.port == 4791
    mods = [c for c in fake.calls if c[0] == "modify" and c[1] == qa.qp_num]
    assert [(st, fl) for _, _, st, _, fl in mods] == [(1, None), (2, 0x0003), (3, None)]
    assert [m for *_, m, _ in mods] == [init_plan(1).mask_bits,
                                        rtr_plan(dest_ip="1.1.1.1", dest_qp_num=1, rq_psn=0,
                                                 path_mtu=1024, sgid_index=0, flow_label=0,
                                                 traffic_class=0, hop_limit=1,
                                                 port_num=1).mask_bits,
                                        rts_plan(sq_psn=0, timeout_ns=None, retry_cnt=0,
                                                 rnr_retry=0).mask_bits]
    assert qa.sport == tag_sport(3)
    assert qb.sport == rdma_udp_sport(0, qb.qp_num, qa.qp_num)   # no tag: the kernel's
    assert (qa.state, qa.dest_qp_num, qa.path_mtu) == (QPState.RTS, qb.qp_num, 2048)
    with pytest.raises(VerbsError):
        qa.modify(path_mtu=1024)                     # fixed once connected
    with pytest.raises(VerbsError):
        pd.create_qp(cq).modify(state=QPState.INIT, dest_port=5000)


def test_retag_policies(fake):
    ctx, pd, cq, qa, qb = _fake_pair(fake)               # retag="ignore"
    qa.modify(sport=tag_sport(4))
    assert qa.sport == tag_sport(3) and qa.requested_sport == tag_sport(4)
    assert qa.stats["retags_ignored"] == 1
    ctx.retag = "error"
    with pytest.raises(VerbsError):
        qa.modify(sport=tag_sport(4))
    ctx.retag = "sqd"
    fake.calls.clear()
    qa.modify(sport=tag_sport(9))
    mods = [(st, m, fl) for k, q, st, m, fl in fake.calls if k == "modify"]
    assert mods == [(IBV_QPS_SQD, IBV_QP_MASK["STATE"], None),
                    (IBV_QPS_SQD, IBV_QP_MASK["STATE"] | IBV_QP_MASK["AV"], 9),
                    (3, IBV_QP_MASK["STATE"], None)]
    assert qa.sport == tag_sport(9) and qa.stats["retags"] == 1
    ctx.flow_label_rule = False                          # kernel < 5.17: QPN hash only
    assert qa.sport == rxe_qpn_sport(qa.qp_num)
    with pytest.raises(VerbsError):
        qa.modify(sport=tag_sport(10))


def test_wr_tag_retags_in_sqd_mode_and_is_counted_otherwise(fake):
    ctx, pd, cq, qa, qb = _fake_pair(fake, retag="sqd")
    mr = pd.reg_mr(bytearray(4096), Access.LOCAL_WRITE | Access.REMOTE_WRITE)
    fake.calls.clear()
    qa.post_send(SendWR(1, WROpcode.RDMA_WRITE_WITH_IMM, mr.sge(0, 100), remote_addr=mr.addr,
                        rkey=mr.rkey, imm_data=1, sport=tag_sport(12)))
    kinds = [c[0] for c in fake.calls]
    assert kinds == ["modify", "modify", "modify", "send"] and qa.sport == tag_sport(12)
    assert fake.calls[-1] == ("send", qa.qp_num, 1, E.IBV_WR_RDMA_WRITE_WITH_IMM, 1)
    ctx.retag = "ignore"
    qa.post_send(SendWR(2, WROpcode.RDMA_WRITE_WITH_IMM, None, remote_addr=mr.addr,
                        rkey=mr.rkey, imm_data=2, sport=tag_sport(13)))
    assert qa.stats["wr_tags_ignored"] == 1 and fake.calls[-1][-1] == 0   # zero-length: no SGE
    assert qa.outstanding == 2


def test_completions_are_polled_into_the_cq(fake):
    from pyverbs.cq import WC as VWC
    ctx, pd, cq, qa, qb = _fake_pair(fake)
    qb.post_recv(RecvWR(7, None))
    qa.post_send(SendWR(1, WROpcode.RDMA_WRITE_WITH_IMM, None, imm_data=0xABCD, rkey=1))
    fake.wcs += [VWC(wr_id=1, status=0, opcode=E.IBV_WC_RDMA_WRITE, qp_num=qa.qp_num),
                 VWC(wr_id=7, status=0, opcode=E.IBV_WC_RECV_RDMA_WITH_IMM, qp_num=qb.qp_num,
                     imm_data=imm_to_wire(0xABCD), wc_flags=E.IBV_WC_WITH_IMM)]
    assert ctx.engine.run(until=lambda: len(cq) >= 2, timeout=1.0)
    got = cq.wait(2, timeout=1.0)
    assert [(w.wr_id, w.opcode, w.imm_data, w.src_qp) for w in got] == [
        (1, WCOpcode.RDMA_WRITE, None, qb.qp_num), (7, WCOpcode.RECV_RDMA_WITH_IMM, 0xABCD,
                                                    qa.qp_num)]
    assert qa.outstanding == 0
    assert not ctx.engine.run(until=lambda: False, timeout=0.01)
    s = ctx.engine.summary()
    assert s["sent_pkts"] == 12 and s["send_wrs"] == 1 and s["recv_wrs"] == 1
    ctx.close()
    assert ("destroy", qa.qp_num) in fake.calls and fake.calls[-1] == ("close_ctx",)


def test_epic_collectives_use_only_what_the_rxe_provider_offers(fake):
    """EpicCommunicator on RxeContext (stand-in device): the QP goes to the switch
    endpoint, receives are posted before the announcement and the data SENDs, at
    most two SENDs are outstanding, and the sums the NIC wrote are the result."""
    import numpy as np
    from pyverbs.cq import WC as VWC

    from hosts.commlib.epic import ANNOUNCE_BYTES, EpicCommunicator, EpicEndpoint

    ctx = RxeContext("10.0.0.1", sysfs_root=fake.sysfs, sport_rule="flow_label")
    comm = EpicCommunicator(ctx, 0, 2, EpicEndpoint("10.255.0.1", 0x100, 0), max_bytes=1 << 14,
                            chunk_pkts=2)
    comm.connect()
    qpn = comm.qp.qp_num
    assert (comm.qp.state, comm.qp.dest_qp_num, comm.qp.path_mtu) == (QPState.RTS, 0x100, 256)
    x = np.arange(600, dtype=np.int32)                  # 10 packets of 64 int32: 5 SENDs
    op = comm.start_all_reduce(x)
    posted = [c for c in fake.calls if c[0] in ("send", "recv") and c[1] == qpn]
    assert [c[0] for c in posted] == ["recv"] * 6 + ["send"] * 2     # then the window is full
    assert [c[3] for c in posted if c[0] == "send"] == [E.IBV_WR_SEND_WITH_IMM, E.IBV_WR_SEND]
    # the switch's sums, as the NIC would have written them (big-endian int32)
    comm._recv[ANNOUNCE_BYTES: ANNOUNCE_BYTES + 2400] = (2 * x).astype(">i4").tobytes()
    lens = [ANNOUNCE_BYTES, 512, 512, 512, 512, 512]
    for i in range(6):
        fake.wcs.append(VWC(wr_id=i, status=0, opcode=E.IBV_WC_SEND, qp_num=qpn))
        fake.wcs.append(VWC(wr_id=i, status=0, opcode=E.IBV_WC_RECV, byte_len=lens[i],
                            qp_num=qpn))
        op.progress()
    assert op.done
    assert np.array_equal(op.result(), 2 * x)
    sends = [c for c in fake.calls if c[0] == "send" and c[1] == qpn]
    assert len(sends) == 6


def test_the_rxe_engine_answers_what_the_agent_loop_asks_of_every_engine():
    """An agent waits on its engine's next deadline and, to know whether to
    poll for it, the earliest paced send (hosts.roce.verbs.Engine): rxe has
    neither, the kernel sends and tc paces."""
    from hosts.roce.verbs import Engine

    eng = RxeEngine(object())       # (the context is only kept)
    for attr in ("next_deadline", "progress", "run", "summary"):
        assert callable(getattr(eng, attr)) and callable(getattr(Engine, attr)), attr
    assert eng.next_deadline() is None and eng.exact_at is None
