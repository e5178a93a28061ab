"""The transport over real kernel UDP sockets on 127.0.0.1 (two engines, two threads)."""

from __future__ import annotations

import threading

import pytest

from hosts.roce import (
    Access,
    Context,
    FixedRate,
    RecvWR,
    Scale,
    SendWR,
    WCOpcode,
    WCStatus,
    WROpcode,
    connect_pair,
)
from hosts.roce.constants import ECN_CE
from hosts.roce.udp_provider import UdpProvider

LO = "127.0.0.1"


def _pair(port_a, port_b, size, rate_bps, data_ecn_a=None):
    kw = {} if data_ecn_a is None else {"data_ecn": data_ecn_a}
    scale = Scale()
    A = Context(UdpProvider(LO, port=port_a, **kw), scale,
                rate_controller_factory=lambda: FixedRate(rate_bps))
    B = Context(UdpProvider(LO, port=port_b), scale)
    src = bytearray(i * 31 % 256 for i in range(size))
    ma = A.alloc_pd().reg_mr(src)
    mb = B.alloc_pd().reg_mr(bytearray(size), Access.LOCAL_WRITE | Access.REMOTE_WRITE)
    ca, cb = A.create_cq(), B.create_cq()
    qa = ma.pd.create_qp(ca, job_id=2)
    qb = mb.pd.create_qp(cb)
    connect_pair(qa, qb, psn_a=0xFFFF00, psn_b=0xFFFF00)
    return A, B, src, ma, mb, ca, cb, qa, qb


def _serve(ctx, stop):
    while not stop.is_set():
        ctx.engine.run(timeout=0.05)


def test_one_mib_rdma_write_over_loopback_udp():
    size = 1 << 20
    A, B, src, ma, mb, ca, cb, qa, qb = _pair(0, 0, size, 2e9)
    stop = threading.Event()
    th = threading.Thread(target=_serve, args=(B, stop))
    th.start()
    try:
        qb.post_recv(RecvWR(5, None))
        qa.post_send(SendWR(1, WROpcode.RDMA_WRITE_WITH_IMM, ma.sge(), remote_addr=mb.addr,
                            rkey=mb.rkey, imm_data=1234))
        wcs = ca.wait(1, timeout=20)
        assert [(w.wr_id, w.status) for w in wcs] == [(1, WCStatus.SUCCESS)], (
            qa.stats, qb.stats, A.engine.stats, B.engine.stats)
    finally:
        stop.set()
        th.join()
    wb = cb.poll(5)
    assert [(w.opcode, w.byte_len, w.imm_data) for w in wb] == [
        (WCOpcode.RECV_RDMA_WITH_IMM, size, 1234)]
    assert bytes(mb.buf) == bytes(src)
    assert A.engine.stats["icrc_drops"] == 0 and B.engine.stats["icrc_drops"] == 0
    assert qb.stats["rx_pkts"] == size // 1024
    A.close()
    B.close()


def test_ce_marked_datagrams_make_the_receiver_send_cnps():
    # The sender's sockets mark data CE themselves: this exercises IP_RECVTOS on the
    # receiver and the per-datagram Not-ECT of CNPs/ACKs.
    A, B, src, ma, mb, ca, cb, qa, qb = _pair(0, 0, 64 * 1024, 50e6, ECN_CE)
    stop = threading.Event()
    th = threading.Thread(target=_serve, args=(B, stop))
    th.start()
    try:
        qa.post_send(SendWR(1, WROpcode.RDMA_WRITE, ma.sge(), remote_addr=mb.addr,
                            rkey=mb.rkey))
        wcs = ca.wait(1, timeout=20)
        assert wcs and wcs[0].status == WCStatus.SUCCESS
    finally:
        stop.set()
        th.join()
    assert qb.stats["ce_pkts"] == 64
    assert qb.stats["cnps_sent"] >= 1 and qa.stats["cnps_rcvd"] == qb.stats["cnps_sent"]
    assert qa.rate_controller.cnps == qa.stats["cnps_rcvd"]
    A.close()
    B.close()


if __name__ == "__main__":   # pragma: no cover
    pytest.main([__file__, "-q"])


def test_icrc_is_valid_on_the_real_wire():
    """What the kernel actually sends (IP id, DF, TTL...) matches the ICRC rule."""
    import socket

    from ground.wire import icrc as I
    try:
        cap = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(0x0800))
    except (PermissionError, AttributeError):
        pytest.skip("needs a packet socket (root)")
    cap.bind(("lo", 0))
    cap.settimeout(2)
    A, B, src, ma, mb, ca, cb, qa, qb = _pair(0, 0, 8 * 1024, 1e9)
    ports = (A.provider.port, B.provider.port)
    try:
        qa.post_send(SendWR(1, WROpcode.RDMA_WRITE, ma.sge(), remote_addr=mb.addr,
                            rkey=mb.rkey))
        for _ in range(200):
            B.engine.progress()
            A.engine.progress()
            if len(ca):
                break
            B.engine.run(timeout=0.005)
        assert ca.poll(1)[0].status == WCStatus.SUCCESS
        seen = 0
        cap.setblocking(False)
        while True:
            try:
                frame = cap.recv(65536)
            except BlockingIOError:
                break
            ip = frame[14:]
            if ip[9] == 17 and int.from_bytes(ip[22:24], "big") in ports:
                assert ip[4:8] == b"\x00\x00\x40\x00"      # id 0, DF
                assert I.icrc_of_ipv4(ip) == I.ICRC.unpack(ip[-4:])[0]
                seen += 1
        assert seen >= 9        # 8 data packets and at least one ACK
    finally:
        cap.close()
        A.close()
        B.close()


def _tos_receiver():
    """A UDP socket on loopback that reports each datagram's TOS byte."""
    import socket

    rx = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    rx.bind((LO, 0))
    rx.setsockopt(socket.IPPROTO_IP, 13, 1)   # IP_RECVTOS
    rx.settimeout(2)
    return rx


def test_send_carries_the_dscp_beside_the_ecn_bits():
    """A per-datagram DSCP (a priority class) reaches the wire in the TOS byte."""
    from hosts.roce.constants import ECN_ECT0, ECN_NOT_ECT

    rx = _tos_receiver()
    prov = UdpProvider(LO, port=0)
    prov.open_port(0xC001)
    try:
        got = []
        for ecn, dscp in ((ECN_ECT0, 8), (ECN_ECT0, 0), (ECN_NOT_ECT, 46)):
            assert prov.send(0xC001, LO, rx.getsockname()[1], (b"x" * 8,), ecn, dscp)
            _, anc, _, _ = rx.recvmsg(64, 64)
            got += [c[2][0] for c in anc if c[1] in (1, 13)]   # IP_TOS
        assert got == [(8 << 2) | 2, 2, 46 << 2]
    finally:
        prov.close()
        rx.close()


def test_a_priority_sends_from_its_own_socket_on_the_same_port():
    """A shaped QP's data carries its HTB class as the kernel packet priority:
    it leaves from a socket of the same source port with SO_PRIORITY set, with
    the TOS it asked for; datagrams without a priority keep the plain socket,
    and closing the port closes both."""
    import socket

    from hosts.roce.constants import ECN_ECT0

    rx = _tos_receiver()
    prov = UdpProvider(LO, port=0)
    prov.open_port(0xC002)
    try:
        assert prov.send(0xC002, LO, rx.getsockname()[1], (b"y" * 8,), ECN_ECT0, 8, 0x10010)
        data, anc, _, src = rx.recvmsg(64, 64)
        assert data == b"y" * 8 and src[1] == 0xC002
        assert [c[2][0] for c in anc if c[1] in (1, 13)] == [(8 << 2) | 2]
        s = prov._tx_prio[(0xC002, 0x10010)]
        assert s.getsockopt(socket.SOL_SOCKET, socket.SO_PRIORITY) == 0x10010
        assert prov._tx[0xC002].getsockopt(socket.SOL_SOCKET, socket.SO_PRIORITY) == 0
        prov.close_port(0xC002)
        assert s.fileno() == -1 and not prov._tx_prio
    finally:
        prov.close()
        rx.close()


def test_only_an_exact_deadline_is_polled_for(monkeypatch):
    """Waiting for a timer is one sleep; waiting for a paced send ends early
    and polls the socket for the rest (the kernel's timer overshoot)."""
    import select as select_mod
    import time

    from hosts.roce import udp_provider

    calls = []
    real = select_mod.select

    def counting(r, w, x, timeout=None):
        calls.append(timeout)
        return real(r, w, x, timeout)

    monkeypatch.setattr(udp_provider.select, "select", counting)
    prov = UdpProvider(LO, port=0)
    try:
        prov.wait(time.monotonic_ns() + 2_000_000, exact=False)
        assert len(calls) == 1 and 0 < calls[0] <= 0.002
        calls.clear()
        prov.wake_lead_ns = 1_000_000
        prov.wait(time.monotonic_ns() + 2_000_000, exact=True)
        assert calls[0] <= 0.001 and len(calls) > 1 and calls[-1] == 0
    finally:
        prov.close()


class _Doorbell:
    """A watched source (as a host's PFC pause socket is): fileno() and drain()."""

    def __init__(self) -> None:
        import socket

        self.ours, self.theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_DGRAM)
        self.drained = 0

    def fileno(self) -> int:
        return self.ours.fileno()

    def drain(self) -> None:
        self.ours.recv(64)
        self.drained += 1

    def close(self) -> None:
        self.ours.close()
        self.theirs.close()


def test_a_receive_holdoff_reads_the_frames_of_its_interval_in_one_wake_up():
    """With rx_holdoff_ns a datagram does not end a wait until the holdoff
    has run from the previous wait's end; what arrived meanwhile is read in
    one batch. A deadline before that still ends the wait on time, and a
    watched source (a pause frame) at once; without a holdoff a datagram
    ends the wait at once."""
    import socket
    import time

    hold = 150_000_000
    prov = UdpProvider(LO, port=0)
    tx = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    bell = _Doorbell()
    try:
        prov.watch(bell)
        prov.rx_holdoff_ns = hold
        prov.wait(time.monotonic_ns(), exact=False)         # a wake-up: the holdoff starts
        woke = time.monotonic_ns()
        for i in range(3):
            tx.sendto(bytes([i]) * 40, (LO, prov.port))
        prov.wait(None)
        waited = time.monotonic_ns() - woke
        assert hold <= waited < hold + 100_000_000
        assert len(prov.recv(16)) == 3

        # a deadline inside the holdoff ends it on time, the frame still waits
        tx.sendto(b"d" * 40, (LO, prov.port))
        t0 = time.monotonic_ns()
        prov.wait(t0 + 20_000_000, exact=False)
        assert 19_000_000 <= time.monotonic_ns() - t0 < hold // 2

        # a watched source ends the holdoff at once, and is drained
        bell.theirs.send(b"x")
        t1 = time.monotonic_ns()
        prov.wait(None)
        assert time.monotonic_ns() - t1 < hold // 2 and bell.drained == 1

        # without a holdoff the waiting frame ends the wait at once
        prov.rx_holdoff_ns = 0
        t2 = time.monotonic_ns()
        prov.wait(t2 + 2 * hold, exact=False)
        assert time.monotonic_ns() - t2 < hold // 2
        assert len(prov.recv(16)) == 1
    finally:
        tx.close()
        bell.close()
        prov.close()
