"""Two rxe hosts (testbed.rxe_host.RxeHost: the initial namespace, an rdma_rxe
device each) exchange RC WRITE with immediate and SEND with immediate through
the soft switch. The switch's port counters prove the packets crossed it
instead of being delivered locally. Skips where rxe hosts cannot run (no
rdma_rxe: this machine); the guest VM runs it (vm/guest-tests.sh).
"""

from __future__ import annotations

import hashlib
import subprocess
from pathlib import Path

import pytest

from hosts.roce import Access, RecvWR, SendWR, WCOpcode, WCStatus, WROpcode, connect_pair
from testbed.rxe_host import rxe_device_name

from .helpers import skip_without_rxe_hosts


def _rules() -> str:
    return subprocess.run(["ip", "rule", "show"], capture_output=True, text=True).stdout


@pytest.mark.root
def test_write_and_send_with_immediate_between_rxe_hosts_through_the_switch(
        tmp_path: Path) -> None:
    skip_without_rxe_hosts()
    from hosts.roce.rxe.provider import RxeContext
    from testbed.net import running, star_router

    rules_before = _rules()
    net, sw, hosts, addrs = star_router(2, log_dir=tmp_path / "sw", host_provider="rxe")
    with running(net):
        ca = RxeContext(addrs[0].ip, device=rxe_device_name("h1"))
        cb = RxeContext(addrs[1].ip, device=rxe_device_name("h2"))
        try:
            size = 64 * 1024
            src = bytearray((i * 13 + 5) % 251 for i in range(size))
            pa, pb = ca.alloc_pd(), cb.alloc_pd()
            ma = pa.reg_mr(src, Access.LOCAL_WRITE)
            mb = pb.reg_mr(bytearray(size), Access.LOCAL_WRITE | Access.REMOTE_WRITE)
            mr_recv = pb.reg_mr(bytearray(4096), Access.LOCAL_WRITE)
            cqa, cqb = ca.create_cq(), cb.create_cq()
            qa, qb = pa.create_qp(cqa), pb.create_qp(cqb)
            connect_pair(qa, qb, psn_a=0xFFFFF0, psn_b=11, path_mtu=1024)
            before = sw.stats()["ports"]
            qb.post_recv(RecvWR(1, mr_recv.sge()))
            qb.post_recv(RecvWR(2, mr_recv.sge()))
            qa.post_send(SendWR(7, WROpcode.RDMA_WRITE_WITH_IMM, ma.sge(), remote_addr=mb.addr,
                                rkey=mb.rkey, imm_data=0x1234))
            qa.post_send(SendWR(8, WROpcode.SEND_WITH_IMM, ma.sge(0, 4096), imm_data=0x5678))
            wa = cqa.wait(2, timeout=30)
            wb = cqb.wait(2, timeout=30)
            assert [w.status for w in wa] == [WCStatus.SUCCESS] * 2, wa
            assert [(w.status, w.opcode, w.imm_data) for w in wb] == [
                (WCStatus.SUCCESS, WCOpcode.RECV_RDMA_WITH_IMM, 0x1234),
                (WCStatus.SUCCESS, WCOpcode.RECV, 0x5678)]
            assert hashlib.sha256(bytes(mb.buf)).digest() == hashlib.sha256(src).digest()
            assert bytes(mr_recv.buf) == bytes(src[:4096])
            after = sw.stats()["ports"]
            # 64 data packets of the WRITE and 4 of the SEND went into port 1 and out of
            # port 2; their ACKs the other way.
            assert after["1"]["rx_frames"] - before["1"]["rx_frames"] >= 68
            assert after["2"]["tx_frames"] - before["2"]["tx_frames"] >= 68
            assert after["2"]["rx_frames"] - before["2"]["rx_frames"] >= 1
        finally:
            ca.close()
            cb.close()
    assert _rules() == rules_before, "the rxe hosts' routing rules were left behind"
    assert "h1-eth0" not in subprocess.run(["ip", "-o", "link"], capture_output=True,
                                           text=True).stdout
