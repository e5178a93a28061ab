"""The udp-provider end of one interoperability case, run inside a network namespace.

    python -m tests.integration.interop_peer --ip 10.250.0.2 --role send|recv \
        --op SEND|SEND_WITH_IMM|RDMA_WRITE|RDMA_WRITE_WITH_IMM --size N --psn P

Talks JSON lines over stdin/stdout with the test (tests/integration/test_rxe_interop.py):
prints its QP's connection data, reads the far end's, brings the QP to RTS, then
either sends one message of ``size`` bytes (role send) or receives one (role
recv), and prints the completion, the bytes' SHA-256 and the engine counters.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
import time

from hosts.roce import Access, Context, QPState, RecvWR, Scale, SendWR, WCStatus, WROpcode
from hosts.roce.udp_provider import UdpProvider

IMM = 0x5EED0001


def pattern(size: int) -> bytes:
    return bytes((i * 131 + 7) % 251 for i in range(size))


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--ip", required=True)
    ap.add_argument("--role", choices=("send", "recv"), required=True)
    ap.add_argument("--op", choices=[o.name for o in WROpcode], required=True)
    ap.add_argument("--size", type=int, required=True)
    ap.add_argument("--psn", type=lambda s: int(s, 0), required=True)
    ap.add_argument("--timeout", type=float, default=20.0)
    a = ap.parse_args()
    ctx = Context(UdpProvider(a.ip), Scale())
    pd = ctx.alloc_pd()
    buf = bytearray(pattern(a.size)) if a.role == "send" else bytearray(a.size)
    mr = pd.reg_mr(buf, Access.LOCAL_WRITE | Access.REMOTE_WRITE)
    cq = ctx.create_cq()
    qp = pd.create_qp(cq)
    print(json.dumps({"qpn": qp.qp_num, "psn": a.psn, "addr": mr.addr, "rkey": mr.rkey}),
          flush=True)
    far = json.loads(sys.stdin.readline())
    qp.modify(state=QPState.INIT)
    qp.modify(state=QPState.RTR, dest_ip=far["ip"], dest_qp_num=far["qpn"], rq_psn=far["psn"],
              path_mtu=1024)
    qp.modify(state=QPState.RTS, sq_psn=a.psn)
    op = WROpcode[a.op]
    imm = IMM if op in (WROpcode.SEND_WITH_IMM, WROpcode.RDMA_WRITE_WITH_IMM) else None
    if a.role == "send":
        qp.post_send(SendWR(1, op, mr.sge(), remote_addr=far["addr"], rkey=far["rkey"],
                            imm_data=imm))
    elif op != WROpcode.RDMA_WRITE:
        qp.post_recv(RecvWR(2, mr.sge()))
    print(json.dumps({"ready": True}), flush=True)
    wc = None
    end = time.monotonic() + a.timeout
    if a.role == "recv" and op == WROpcode.RDMA_WRITE:
        # No receive completion for a plain WRITE: wait for the far end's word.
        import select
        while time.monotonic() < end:
            ctx.engine.run(timeout=0.01)
            if select.select([sys.stdin], [], [], 0)[0]:
                sys.stdin.readline()
                break
    else:
        got = cq.wait(1, timeout=a.timeout)
        wc = got[0] if got else None
        t_done = time.monotonic() + 0.2         # keep ACKing what the far end resends
        while time.monotonic() < t_done:
            ctx.engine.run(timeout=0.01)
    print(json.dumps({
        "wc": None if wc is None else {"status": WCStatus(wc.status).name,
                                       "opcode": int(wc.opcode), "byte_len": wc.byte_len,
                                       "imm": wc.imm_data},
        "sha256": hashlib.sha256(bytes(mr.buf)).hexdigest(),
        "engine": ctx.engine.summary()}), flush=True)
    ctx.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
