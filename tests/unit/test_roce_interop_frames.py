"""The udp provider against RoCEv2 frames built independently of this package.

scapy's ``scapy.contrib.roce`` BTH computes the ICRC itself over the IPv4 header
the frame carries. The frames use what rdma_rxe and NICs send and Linux UDP
sockets do not: random IPv4 identifications, TOS 0 and a UDP checksum of 0.
They are injected on loopback through an IPPROTO_RAW socket (the kernel keeps a
non-zero identification and fills in only the IPv4 checksum), so they reach the
provider exactly as built. Corrupted copies must be dropped and counted.
"""

from __future__ import annotations

import random
import socket
import struct
import time
from collections.abc import Callable

import pytest

from hosts.roce import (
    Access,
    Context,
    QPState,
    RecvWR,
    Scale,
    SendWR,
    WCOpcode,
    WCStatus,
    WROpcode,
)

pytest.importorskip("scapy.contrib.roce")
from scapy.contrib.roce import AETH, BTH  # noqa: E402
from scapy.layers.inet import IP, UDP  # noqa: E402
from scapy.packet import Raw  # noqa: E402

LO = "127.0.0.1"
PEER_QPN = 0x0ABCDE
PEER_SPORT = 0xD1F3           # what rxe might pick (0xC000 | hash)
OP_SEND_ONLY_IMM = 0x05
OP_WRITE_FIRST, OP_WRITE_MIDDLE, OP_WRITE_LAST_IMM, OP_WRITE_ONLY = 0x06, 0x07, 0x09, 0x0A
OP_ACK = 0x11


class Host:
    """A udp-provider QP on 127.0.0.1 whose peer is this test: what the QP sends
    arrives at ``self.peer`` (a UDP socket), what the peer sends is injected raw."""

    def __init__(self, *, rq_psn: int, sq_psn: int = 0x10) -> None:
        from hosts.roce.udp_provider import UdpProvider

        try:
            self.inject_sock = socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_RAW)
        except PermissionError:
            pytest.skip("needs raw sockets (root)")
        self.rng = random.Random(7)
        self.ctx = Context(UdpProvider(LO, port=0), Scale())
        self.peer = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.peer.bind((LO, 0))
        self.peer.setblocking(False)
        pd = self.ctx.alloc_pd()
        self.mr = pd.reg_mr(bytearray(1 << 17), Access.LOCAL_WRITE | Access.REMOTE_WRITE)
        self.cq = self.ctx.create_cq()
        self.qp = pd.create_qp(self.cq)
        self.qp.modify(state=QPState.INIT)
        self.qp.modify(state=QPState.RTR, dest_ip=LO, dest_qp_num=PEER_QPN,
                       dest_port=self.peer.getsockname()[1], rq_psn=rq_psn, path_mtu=1024)
        self.qp.modify(state=QPState.RTS, sq_psn=sq_psn)
        self.ids: list[int] = []

    def close(self) -> None:
        self.ctx.close()
        self.peer.close()
        self.inject_sock.close()

    # -- frames built by scapy ---------------------------------------------------
    def frame(self, opcode: int, psn: int, body: bytes = b"", *, pad: int = 0,
              ackreq: bool = False) -> bytearray:
        ident = self.rng.randrange(1, 1 << 16)      # 0 would make the kernel pick one
        self.ids.append(ident)
        pkt = (IP(src=LO, dst=LO, id=ident, tos=0, flags="DF" if ident & 1 else 0, ttl=64)
               / UDP(sport=PEER_SPORT, dport=self.ctx.provider.port, chksum=0)
               / BTH(opcode=opcode, dqpn=self.qp.qp_num, psn=psn & 0xFFFFFF, padcount=pad,
                     ackreq=int(ackreq))
               / Raw(body + bytes(pad)))
        return bytearray(bytes(pkt))

    def write_body(self, offset: int, length: int, payload: bytes) -> bytes:
        reth = struct.pack("!QII", self.mr.addr + offset, self.mr.rkey, length)
        return reth + payload

    def inject(self, frame: bytes | bytearray) -> None:
        self.inject_sock.sendto(bytes(frame), (LO, 0))

    # -- driving the engine ------------------------------------------------------
    def run_until(self, cond: Callable[[], bool], timeout: float = 3.0) -> bool:
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            self.ctx.engine.run(timeout=0.002)
            if cond():
                return True
        return cond()

    def sent(self) -> list[bytes]:
        out = []
        while True:
            try:
                out.append(self.peer.recv(65536))
            except BlockingIOError:
                return out

    def acks(self) -> list[tuple[int, int, int]]:
        """(psn, syndrome, msn) of the ACKs the QP sent, parsed by scapy."""
        out = []
        for d in self.sent():
            b = BTH(d)
            if b.opcode == OP_ACK:
                a = AETH(bytes(b.payload))
                out.append((b.psn, a.syndrome, a.msn))
        return out


def corrupt_ident(f: bytearray) -> bytearray:
    g = bytearray(f)
    g[4] ^= 0x01                    # another identification: the ICRC covers it
    return g


def corrupt_payload(f: bytearray) -> bytearray:
    g = bytearray(f)
    g[-6] ^= 0x40
    return g


def corrupt_icrc(f: bytearray) -> bytearray:
    g = bytearray(f)
    g[-1] ^= 0xFF
    return g


def test_write_from_an_independent_sender_is_accepted_across_the_psn_wrap() -> None:
    h = Host(rq_psn=0xFFFFFE)
    try:
        data = bytes(h.rng.randrange(256) for _ in range(3 * 1024 + 1))
        frames = [
            h.frame(OP_WRITE_FIRST, 0xFFFFFE, h.write_body(0, len(data), data[:1024])),
            h.frame(OP_WRITE_MIDDLE, 0xFFFFFF, data[1024:2048]),
            h.frame(OP_WRITE_MIDDLE, 0x000000, data[2048:3072]),
            h.frame(OP_WRITE_LAST_IMM, 0x000001, struct.pack("!I", 0xC0FFEE) + data[3072:],
                    pad=3, ackreq=True),
        ]
        h.qp.post_recv(RecvWR(9, None))
        for f in frames:
            h.inject(f)
        assert h.run_until(lambda: len(h.cq) >= 1), h.ctx.engine.summary()
        wc = h.cq.poll(1)[0]
        assert (wc.status, wc.opcode, wc.byte_len, wc.imm_data) == (
            WCStatus.SUCCESS, WCOpcode.RECV_RDMA_WITH_IMM, len(data), 0xC0FFEE)
        assert bytes(h.mr.buf[:len(data)]) == data
        assert h.qp.epsn == 2 and h.ctx.engine.stats["icrc_drops"] == 0
        assert len(set(h.ids)) == 4                  # four different identifications
        assert h.run_until(lambda: bool(h.qp.stats["acks_sent"]))
        assert (1, 0x1F, 1) in h.acks()              # ACK of PSN 1, message 1
    finally:
        h.close()


@pytest.mark.parametrize("corrupt", [corrupt_ident, corrupt_payload, corrupt_icrc])
def test_corrupted_data_frames_are_dropped_and_counted(corrupt) -> None:
    h = Host(rq_psn=0x100)
    try:
        payload = b"\x5a" * 4
        h.qp.post_recv(RecvWR(1, h.mr.sge(0, 64)))
        good = h.frame(OP_SEND_ONLY_IMM, 0x100, struct.pack("!I", 77) + payload, ackreq=True)
        h.inject(corrupt(good))
        assert h.run_until(lambda: h.ctx.engine.stats["icrc_drops"] == 1)
        h.ctx.engine.run(timeout=0.05)
        assert h.qp.stats["rx_pkts"] == 0 and h.qp.epsn == 0x100 and not len(h.cq)
        h.inject(good)                               # the intact frame still gets in
        assert h.run_until(lambda: len(h.cq) >= 1)
        wc = h.cq.poll(1)[0]
        assert (wc.status, wc.opcode, wc.imm_data) == (WCStatus.SUCCESS, WCOpcode.RECV, 77)
        assert bytes(h.mr.buf[:4]) == payload
        assert h.ctx.engine.stats["icrc_drops"] == 1
    finally:
        h.close()


def test_acks_from_an_independent_responder_complete_sends() -> None:
    h = Host(rq_psn=0, sq_psn=0xFFFFFF)
    try:
        src = h.mr.buf[:1500]
        src[:] = bytes(range(256)) * 5 + bytes(220)
        h.qp.post_send(SendWR(1, WROpcode.RDMA_WRITE, h.mr.sge(0, 1500),
                              remote_addr=0x7000, rkey=0x55))
        assert h.run_until(lambda: h.qp.stats["tx_pkts"] >= 2)
        psns = [BTH(d).psn for d in h.sent() if BTH(d).opcode != OP_ACK]
        assert psns[:2] == [0xFFFFFF, 0x000000]      # the write spans the PSN wrap
        bad = h.frame(OP_ACK, 0, bytes(AETH(syndrome=0x1F, msn=1)))
        for corrupt in (corrupt_ident, corrupt_payload, corrupt_icrc):
            h.inject(corrupt(bad))
        assert h.run_until(lambda: h.ctx.engine.stats["icrc_drops"] == 3)
        assert not len(h.cq) and h.qp.stats["acks_rcvd"] == 0
        h.inject(h.frame(OP_ACK, 0, bytes(AETH(syndrome=0x1F, msn=1))))
        assert h.run_until(lambda: len(h.cq) >= 1)
        wc = h.cq.poll(1)[0]
        assert (wc.wr_id, wc.status, wc.opcode) == (1, WCStatus.SUCCESS, WCOpcode.RDMA_WRITE)
        assert h.qp.stats["acks_rcvd"] == 1
    finally:
        h.close()


def test_write_only_with_tos_zero_and_odd_length() -> None:
    h = Host(rq_psn=0x42)
    try:
        h.inject(h.frame(OP_WRITE_ONLY, 0x42, h.write_body(100, 1, b"\xee"), pad=3,
                         ackreq=True))
        assert h.run_until(lambda: h.qp.stats["rx_pkts"] == 1), h.ctx.engine.summary()
        assert h.mr.buf[100] == 0xEE and h.mr.buf[99] == 0 and h.mr.buf[101] == 0
        assert h.run_until(lambda: bool(h.qp.stats["acks_sent"]))
        assert (0x42, 0x1F, 1) in h.acks()
    finally:
        h.close()
