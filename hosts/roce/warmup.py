"""Warming PyPy's JIT up on the transport before measured traffic.

Under PyPy the per-packet code (post, pace, ICRC, send, receive, ACK,
complete, DCQCN bookkeeping) runs interpreted, several times slower, until
the JIT has compiled it: about 20 000 packets. A host agent that started its
measured flows cold would pace late for the first second of every phase.
:func:`warm_up` runs the same code first: a QP pair in this process over the
host's loopback (its own sockets, on 127.0.0.1, so no testbed link carries
it), RDMA WRITE_WITH_IMM messages of the run's size and MTU, paced by the
same token bucket under a DCQCN reaction point, until ``packets`` have been
delivered or ``max_s`` has passed. Under CPython there is nothing to warm.
"""

from __future__ import annotations

import platform
import time
from typing import Any

from hosts.roce.dcqcn import Dcqcn, DcqcnParams
from hosts.roce.pacing import DEFAULT_BURST_BYTES, Pacer
from hosts.roce.verbs import Access, Context, RecvWR, SendWR, WCStatus, WROpcode, connect_pair

__all__ = ["warm_up", "jit_present", "WARMUP_PACKETS"]

WARMUP_PACKETS = 30_000
# Fast enough to finish in well under a second once compiled, slow enough
# that the loopback socket never overflows (the window is bounded anyway).
WARMUP_RATE_BPS = 2e9
_WINDOW = 4


def jit_present() -> bool:
    return platform.python_implementation() == "PyPy"


def warm_up(msg_bytes: int, path_mtu: int, packets: int = WARMUP_PACKETS,
            max_s: float = 5.0, burst_bytes: int = 2 * DEFAULT_BURST_BYTES) -> dict[str, Any]:
    """Run ``packets`` packets through a loopback QP pair; what was done."""
    from hosts.roce.udp_provider import UdpProvider

    t0 = time.monotonic_ns()
    prov = UdpProvider("127.0.0.1", port=0)
    ctx = Context(prov)
    try:
        pd = ctx.alloc_pd()
        cq_s, cq_r = ctx.create_cq(), ctx.create_cq()
        src = bytearray(msg_bytes * _WINDOW)
        dst = bytearray(msg_bytes * _WINDOW)
        mr_s = pd.reg_mr(src, Access.LOCAL_WRITE)
        mr_r = pd.reg_mr(dst, Access.LOCAL_WRITE | Access.REMOTE_WRITE)
        rc = Dcqcn(DcqcnParams.scaled(WARMUP_RATE_BPS), t0)
        pacer = Pacer(rate_bps=WARMUP_RATE_BPS, burst_bytes=burst_bytes, now_ns=t0)
        qs = pd.create_qp(cq_s, cq_s, rate_controller=rc, pacer=pacer)
        qr = pd.create_qp(cq_r, cq_r)
        connect_pair(qs, qr, path_mtu=path_mtu)
        per_msg = max(1, -(-msg_bytes // path_mtu))
        msgs = max(1, packets // per_msg)
        for i in range(min(_WINDOW, msgs)):
            qr.post_recv(RecvWR(wr_id=i))
        posted = done = 0
        end = t0 + int(max_s * 1e9)
        engine = ctx.engine
        while done < msgs and time.monotonic_ns() < end:
            while posted < msgs and posted - done < _WINDOW:
                slot = posted % _WINDOW
                qs.post_send(SendWR(
                    wr_id=posted, opcode=WROpcode.RDMA_WRITE_WITH_IMM,
                    sge=mr_s.sge(slot * msg_bytes, msg_bytes),
                    remote_addr=mr_r.addr + slot * msg_bytes, rkey=mr_r.rkey, imm_data=posted))
                posted += 1
            engine.progress()
            for wc in cq_r.poll(len(cq_r)):
                qr.post_recv(RecvWR(wr_id=wc.wr_id))   # one receive per message landed
            done += sum(1 for wc in cq_s.poll(len(cq_s)) if wc.status == WCStatus.SUCCESS)
            if qs.state != qr.state:
                break       # a QP went to the error state: stop, the run will tell
            dl = engine.next_deadline()
            if dl is not None:
                prov.wait(min(dl, end))
        return {"packets": qs.stats["tx_pkts"], "messages": done,
                "seconds": round((time.monotonic_ns() - t0) / 1e9, 3)}
    finally:
        ctx.close()
