"""Userspace RoCEv2 Reliable Connection transport with a verbs-shaped API.

Wire bytes are real RoCEv2 (BTH/RETH/AETH/ImmDt/ICRC on UDP 4791), so P4
programs, scapy and Wireshark see ordinary RoCE traffic.

Modules
-------
constants   opcodes (``Opcode``), AETH syndromes, UDP port, ECN codepoints, tag
            layout: ``tag_sport(step) -> 0xC000 | step``, ``sport_step(sport)``;
            the job id travels in BTH byte 4 (``job_id``). The formats
            themselves are ground.wire's (ground/wire/roce.py); P4 copy:
            switches/p4/include/headers.p4.
wire        the RoCE packet codec (``encode_packet``, ``encode_cnp``, ``decode``),
            from ground.wire's BTH, RETH, AETH and ImmDt. The ICRC is
            ground.wire.icrc's (``icrc``, ``pseudo_header``, ``icrc_of_ipv4`` /
            ``icrc_ok_ipv4`` for whole IPv4 packets). Receivers check it over the
            IPv4 and UDP headers as they arrived (any identification, as rdma_rxe
            and NICs send); senders assume identification 0 and DF (what Linux
            sends from these sockets). A switch that rewrites covered fields must
            recompute the ICRC, or the receiving ``Context(check_icrc=False)``
            must be used.
scapy_layers  scapy layers (BTH with job_id, RETH, AETH, ImmDt, CNP) for tests/pcaps,
            their fields ground.wire's declarations.
scale       ``Scale``: one setting from which RTO, ACK coalescing... derive
            (``scale.ns(real_us)``, ``scale.timers()`` for run outputs); byte and
            packet counts are not scaled.
dcqcn       ``Dcqcn`` reaction point and ``DcqcnParams`` from the presets
            ``zhu2015``, ``connectx`` and ``hpcc`` (README.md, "DCQCN presets").
rate        ``RateController`` and ``Pacer`` protocols (DCQCN and pacers plug in),
            defaults ``FixedRate(rate_bps)`` and ``GapPacer()``.
verbs       Context, PD, MR, CQ, QP, work requests and completions, ``Engine``,
            ``connect_pair(qa, qb, psn_a=0, psn_b=0, **attrs)`` (both QPs in one
            process: tests, single-host setups).
provider    the ``Provider`` protocol an engine runs on (now_ns, open_port/close_port,
            send, recv, wait, close).
udp_provider  ``UdpProvider(local_ip, port=4791, data_ecn=ECT0)``: kernel UDP
            sockets (Mininet hosts); ``data_ecn`` replaces ECT(0) on data packets.
            Receives through a filtered raw IPv4 socket, to see each datagram's
            IPv4 header as it arrived (needs CAP_NET_RAW).
rxe.provider  ``RxeContext(local_ip=None, netdev=None, retag="ignore")``: the same
            Context/PD/MR/CQ/QP calls over pyverbs on a Linux rdma_rxe device (the
            kernel runs the transport; source ports, tags and limits: README.md).
sim         ``SimWire(latency_ns, seed, loss, dup, reorder, ce, corrupt, record)``:
            deterministic in-process wire with a fake clock; ``wire.provider(ip)``,
            ``wire.run(until, timeout)``, per-packet ``wire.hook``, ``wire.records``,
            ``wire.write_pcap(path)``.

Usage
-----
::

    from hosts.roce import *
    ctx = Context(UdpProvider("10.0.0.1"), scale=Scale())   # ctx.engine drives I/O
    # also: rate_controller_factory=..., pacer_factory=..., check_icrc=True,
    #       cnp_interval_ns=None (the DCQCN preset's, scaled)
    pd = ctx.alloc_pd()
    mr = pd.reg_mr(bytearray(1 << 20), Access.LOCAL_WRITE | Access.REMOTE_WRITE)
    cq = ctx.create_cq()
    qp = pd.create_qp(cq, cq, sport=tag_sport(0), job_id=1,
                      rate_controller=None, pacer=None)   # None -> context defaults
    qp.modify(state=QPState.INIT)
    qp.modify(state=QPState.RTR, dest_ip="10.0.0.2", dest_qp_num=peer_qpn, rq_psn=0)
    qp.modify(state=QPState.RTS, sq_psn=0)               # path_mtu 1024, retry_cnt 7
    qp.post_recv(RecvWR(wr_id=7, sge=mr.sge(0, 4096)))
    qp.post_send(SendWR(wr_id=1, opcode=WROpcode.RDMA_WRITE_WITH_IMM,
                        sge=mr.sge(0, 65536), remote_addr=peer_addr, rkey=peer_rkey,
                        imm_data=42))
    wcs = cq.poll(16)            # nonblocking; makes progress first
    wcs = cq.wait(1, timeout=2.0)  # runs the engine until >= 1 completion
    ctx.engine.run(until=lambda: done, timeout=5.0)
    qp.modify(sport=tag_sport(step))   # retag the flow (any state)
    qp.post_send(SendWR(..., sport=tag_sport(step + 1), job_id=1))  # or tag one WR

Objects
-------
- ``MR``: ``buf`` (memoryview), ``addr`` (virtual base, what remote_addr refers
  to), ``length``, ``lkey``, ``rkey``, ``sge(offset=0, length=None) -> SGE``.
- ``SendWR(wr_id, opcode: WROpcode, sge: SGE | None, remote_addr=0, rkey=0,
  imm_data: int | None = None, signaled=True, sport: int | None = None,
  job_id: int | None = None)``; WROpcode RDMA_WRITE,
  RDMA_WRITE_WITH_IMM, SEND, SEND_WITH_IMM. Data is read from the MR when each
  packet is (re)sent, as on a NIC: do not modify it before the completion.
  ``sport``/``job_id`` pin the WR's flow tag when it is posted: all its packets,
  retransmissions included, carry them whatever ``qp.modify(sport=...)`` does
  later (the source port stays open until the WR completes or is flushed).
  None (default): the packets carry the QP's tag at the time they are sent.
- ``RecvWR(wr_id, sge)`` consumed by SEND and RDMA_WRITE_WITH_IMM messages.
- ``WC``: wr_id, status (WCStatus), opcode (WCOpcode SEND, RDMA_WRITE, RECV,
  RECV_RDMA_WITH_IMM), byte_len, imm_data (int | None), qp_num, src_qp,
  timestamp_ns (CLOCK_MONOTONIC).
- ``QP`` attributes (``QPAttr`` fields or ``modify(**kw)``): state, dest_ip,
  dest_qp_num, rq_psn, sq_psn, path_mtu (256..4096, default 1024), timeout_ns
  (None -> scale.rto_ns), retry_cnt and rnr_retry (0..7, default 7; 7 means
  retry forever, as in InfiniBand, rdma_rxe and NICs: ``RETRY_FOREVER``),
  sport (the flow tag, default tag_sport(0)), job_id (0..255), max_inflight
  (unacknowledged packets, default scale.max_inflight_pkts), dest_port (the
  peer's UDP port, 4791; tests on one address override it). Also ``qp.qp_num``,
  ``qp.sq_psn``, ``qp.epsn``, ``qp.outstanding``, ``qp.destroy()``;
  ``qp.stats`` is a dict of counters; ``qp.rate_controller``, ``qp.pacer``.
  ``ctx.close()`` destroys the QPs and closes the provider; ``mr.dereg()``.
- Transport: 24-bit PSNs with wrap; responder ACKs at AckReq / message end /
  every ``scale.ack_every_pkts`` / after ``scale.ack_delay_ns``; duplicates
  re-ACKed, not re-applied; one NAK (PSN sequence error) per gap; go-back-N
  from the NAKed PSN; more than retry_cnt RTOs in a row (retry_cnt < 7) ->
  WCStatus.RETRY_EXC_ERR and QP ERR
  (other WRs flushed with WR_FLUSH_ERR); RNR NAK when no receive WQE.
- DCQCN notification point: data leaves with ECT(0); a CE-marked data packet
  makes the receiving QP send a CNP (opcode 0x81) to its peer QP, at most one
  per ``ctx.cnp_interval_ns`` (``Context(cnp_interval_ns=...)``; by default the
  default DCQCN preset's min_time_between_cnps, scaled); the peer calls its
  ``rate_controller.on_cnp``.
- Rate control: each QP has a ``RateController`` (``qp.rate_controller``) and a
  ``Pacer``; defaults come from ``Context(rate_controller_factory=...,
  pacer_factory=...)``, else ``FixedRate(scale.line_rate_bps)`` and ``GapPacer``.
  The engine calls ``next_deadline()`` on every pass (keep it cheap), ``on_timer``
  once it is due, ``on_bytes_sent`` for every data packet (retransmissions too;
  Ethernet frame bytes) and reads ``rate_bps`` before each packet.
- ``Engine``: ``run(until=None, timeout=None)``, ``progress()``, ``now_ns()``,
  ``next_deadline()``, ``stats`` (rx_datagrams, icrc_drops, malformed_drops,
  unknown_qp_drops), ``summary()`` (engine + all QP counters, incl. pacing
  lateness ``pacing_late_sum_ns``/``pacing_late_max_ns``), ``timers()``.
  One thread per Context; nothing here is thread-safe.
"""

from hosts.roce.constants import (
    RETRY_FOREVER,
    ROCE_UDP_PORT,
    Opcode,
    sport_step,
    tag_sport,
)
from hosts.roce.rate import FixedRate, GapPacer, Pacer, RateController
from hosts.roce.scale import Scale
from hosts.roce.sim import SimWire
from hosts.roce.verbs import (
    CQ,
    MR,
    PD,
    QP,
    SGE,
    WC,
    Access,
    Context,
    Engine,
    QPAttr,
    QPState,
    RecvWR,
    SendWR,
    VerbsError,
    WCOpcode,
    WCStatus,
    WROpcode,
    connect_pair,
)


def __getattr__(name: str):
    # The UDP provider is imported lazily: it is not needed by simulations.
    if name == "UdpProvider":
        from hosts.roce.udp_provider import UdpProvider
        return UdpProvider
    if name == "RxeContext":
        from hosts.roce.rxe.provider import RxeContext
        return RxeContext
    raise AttributeError(name)


__all__ = [
    "RETRY_FOREVER", "ROCE_UDP_PORT", "Opcode", "sport_step", "tag_sport", "FixedRate",
    "GapPacer", "Pacer",
    "RateController", "Scale", "SimWire", "CQ", "MR", "PD", "QP", "SGE", "WC", "Access",
    "Context", "Engine", "QPAttr", "QPState", "RecvWR", "SendWR", "VerbsError", "WCOpcode",
    "WCStatus", "WROpcode", "UdpProvider", "RxeContext", "connect_pair",
]
