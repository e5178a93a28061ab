"""A udp-provider QP in a network namespace against a far end across a veth.

The far end is, per parameter, the Linux kernel's soft-RoCE (an rdma_rxe device
on the veth's end in the initial namespace: rxe works only there) or another
udp-provider QP (runs everywhere; it checks the harness and the provider's
own interoperability). Cases: SEND, SEND with immediate, RDMA WRITE and WRITE
with immediate; 1 B, 4 KiB, 64 KiB, and 64 KiB across the 2^24 PSN wrap; both
directions: 32 per far end. The rxe cases skip, with the reason, where the
kernel has no rdma_rxe or pyverbs is missing; the guest VM has both (CI runs
them there: `testbed vm run -- sh vm/guest-tests.sh`). The udp far end skips
where rxe devices exist (rdma_rxe then owns UDP port 4791 in the initial
namespace). Run under the net lock (it creates a namespace and a veth).
"""

from __future__ import annotations

import errno
import hashlib
import json
import os
import select
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from hosts.roce import Access, QPState, RecvWR, SendWR, WCOpcode, WCStatus, WROpcode
from testbed.targets import rxe_devices

from .interop_peer import IMM, pattern

REPO = Path(__file__).resolve().parents[2]
FAR_IP, NEAR_IP = "10.250.0.1", "10.250.0.2"
OPS = ["SEND", "SEND_WITH_IMM", "RDMA_WRITE", "RDMA_WRITE_WITH_IMM"]
SIZES = {"1B": (1, 0x000123), "4KiB": (4096, 0x4A0000), "64KiB": (65536, 0x100000),
         "64KiB-psn-wrap": (65536, 0xFFFFF8)}       # bytes, the sender's first PSN


def _run(*cmd: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    return subprocess.run(cmd, capture_output=True, text=True, check=check)


@pytest.fixture(scope="module")
def link() -> Iterator[dict[str, str]]:
    if os.geteuid() != 0:
        pytest.skip("needs root (a network namespace and a veth)")
    tag = f"{os.getpid() % 100000}"
    names = {"ns": f"p4tb-rxi{tag}", "far": f"rxia{tag}", "near": f"rxib{tag}"}
    try:
        _run("ip", "netns", "add", names["ns"])
        _run("ip", "link", "add", names["far"], "type", "veth", "peer", "name", names["near"])
        _run("ip", "link", "set", names["near"], "netns", names["ns"])
        _run("ip", "addr", "add", f"{FAR_IP}/30", "dev", names["far"])
        _run("ip", "link", "set", names["far"], "up")
        ns = ("ip", "-n", names["ns"])
        _run(*ns, "addr", "add", f"{NEAR_IP}/30", "dev", names["near"])
        _run(*ns, "link", "set", names["near"], "up")
        _run(*ns, "link", "set", "lo", "up")
        yield names
    finally:
        _run("ip", "link", "del", names["far"], check=False)
        _run("ip", "netns", "del", names["ns"], check=False)
        assert names["far"] not in _run("ip", "-o", "link", "show").stdout


@pytest.fixture(scope="module")
def rxe_device(link: dict[str, str]) -> Iterator[str]:
    try:
        import pyverbs  # noqa: F401
    except ImportError:
        pytest.skip("pyverbs missing (apt-get install python3-pyverbs)")
    if not Path("/sys/module/rdma_rxe").exists() and (
            shutil.which("modprobe") is None
            or _run("modprobe", "rdma_rxe", check=False).returncode != 0):
        pytest.skip("no rdma_rxe kernel module here (the guest VM has it)")
    from testbed.rdma_netlink import RdmaNetlinkError, add_rxe_link, delete_link

    dev = f"rxi{link['far'][4:]}"
    try:
        add_rxe_link(dev, link["far"])
    except RdmaNetlinkError as e:
        pytest.skip(str(e))
    try:
        yield dev
    finally:
        delete_link(dev)


def _far_context(kind: str, request: pytest.FixtureRequest, link: dict[str, str]) -> Any:
    if kind == "rxe":
        dev = request.getfixturevalue("rxe_device")
        from hosts.roce.rxe.provider import RxeContext
        return RxeContext(FAR_IP, device=dev)
    from hosts.roce import Context, Scale
    from hosts.roce.udp_provider import UdpProvider
    try:
        return Context(UdpProvider(FAR_IP), Scale())
    except OSError as e:
        # rdma_rxe's own UDP socket holds port 4791 in the initial namespace while
        # any rxe device exists (the guest VM): the udp far end cannot live there.
        if e.errno == errno.EADDRINUSE and rxe_devices():
            pytest.skip("UDP port 4791 is rdma_rxe's here (rxe devices exist); the udp far "
                        "end runs where rxe is not loaded")
        raise


class Peer:
    """The udp-provider end in the namespace (tests/integration/interop_peer.py)."""

    def __init__(self, ns: str, role: str, op: str, size: int, psn: int) -> None:
        self.p = subprocess.Popen(
            ["ip", "netns", "exec", ns, sys.executable, "-m", "tests.integration.interop_peer",
             "--ip", NEAR_IP, "--role", role, "--op", op, "--size", str(size),
             "--psn", hex(psn)], cwd=REPO, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
            stderr=subprocess.PIPE, text=True)

    def read(self, ctx: Any, timeout: float = 30.0) -> dict[str, Any]:
        """The peer's next line, driving the far end's engine meanwhile."""
        assert self.p.stdout is not None
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            if select.select([self.p.stdout], [], [], 0.005)[0]:
                line = self.p.stdout.readline()
                if not line:
                    break
                return dict(json.loads(line))
            ctx.engine.run(timeout=0.005)
        self.p.kill()
        raise AssertionError(f"the peer said nothing: {self.p.communicate()[1][-2000:]}")

    def write(self, obj: Any) -> None:
        assert self.p.stdin is not None
        self.p.stdin.write(json.dumps(obj) + "\n")
        self.p.stdin.flush()

    def close(self) -> None:
        try:
            self.p.wait(timeout=10)
        finally:
            if self.p.poll() is None:
                self.p.kill()
                self.p.wait()


@pytest.mark.root
@pytest.mark.parametrize("far", ["udp", "rxe"])
@pytest.mark.parametrize("size", list(SIZES))
@pytest.mark.parametrize("op", OPS)
@pytest.mark.parametrize("direction", ["to_far", "from_far"])
def test_operation_between_the_udp_provider_and_the_far_end(
        far: str, size: str, op: str, direction: str, link: dict[str, str],
        request: pytest.FixtureRequest) -> None:
    nbytes, send_psn = SIZES[size]
    recv_psn = 0x00A000
    ctx = _far_context(far, request, link)
    peer_sends = direction == "to_far"
    peer = Peer(link["ns"], "send" if peer_sends else "recv", op, nbytes,
                send_psn if peer_sends else recv_psn)
    try:
        near = peer.read(ctx)
        pd = ctx.alloc_pd()
        buf = bytearray(nbytes) if peer_sends else bytearray(pattern(nbytes))
        mr = pd.reg_mr(buf, Access.LOCAL_WRITE | Access.REMOTE_WRITE)
        cq = ctx.create_cq()
        qp = pd.create_qp(cq)
        far_psn = recv_psn if peer_sends else send_psn
        qp.modify(state=QPState.INIT)
        qp.modify(state=QPState.RTR, dest_ip=NEAR_IP, dest_qp_num=near["qpn"],
                  rq_psn=near["psn"], path_mtu=1024)
        qp.modify(state=QPState.RTS, sq_psn=far_psn)
        wop = WROpcode[op]
        with_imm = wop in (WROpcode.SEND_WITH_IMM, WROpcode.RDMA_WRITE_WITH_IMM)
        if peer_sends and wop != WROpcode.RDMA_WRITE:
            qp.post_recv(RecvWR(7, mr.sge()))
        peer.write({"ip": FAR_IP, "qpn": qp.qp_num, "psn": far_psn, "addr": mr.addr,
                    "rkey": mr.rkey})
        assert peer.read(ctx) == {"ready": True}
        want = hashlib.sha256(pattern(nbytes)).hexdigest()
        if peer_sends:
            res = peer.read(ctx)
            assert res["wc"]["status"] == "SUCCESS", res
            if wop != WROpcode.RDMA_WRITE:
                ctx.engine.run(until=lambda: len(cq) >= 1, timeout=10)
                wc = cq.poll(1)[0]
                assert (wc.status, wc.byte_len) == (WCStatus.SUCCESS, nbytes)
                assert wc.imm_data == (IMM if with_imm else None)
            assert hashlib.sha256(bytes(mr.buf)).hexdigest() == want
        else:
            qp.post_send(SendWR(1, wop, mr.sge(), remote_addr=near["addr"], rkey=near["rkey"],
                                imm_data=IMM if with_imm else None))
            ctx.engine.run(until=lambda: len(cq) >= 1, timeout=20)
            wcs = cq.poll(1)
            assert wcs and wcs[0].status == WCStatus.SUCCESS, (wcs, ctx.engine.summary())
            if wop == WROpcode.RDMA_WRITE:
                peer.write({"done": True})
            res = peer.read(ctx)
            if wop != WROpcode.RDMA_WRITE:
                assert res["wc"]["status"] == "SUCCESS" and res["wc"]["byte_len"] == nbytes
                assert res["wc"]["imm"] == (IMM if with_imm else None)
                assert res["wc"]["opcode"] == int(
                    WCOpcode.RECV_RDMA_WITH_IMM if wop == WROpcode.RDMA_WRITE_WITH_IMM
                    else WCOpcode.RECV)
            assert res["sha256"] == want
        assert res["engine"]["icrc_drops"] == 0, res["engine"]
    finally:
        peer.close()
        ctx.close()
