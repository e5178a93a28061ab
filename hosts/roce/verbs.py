"""RoCEv2 Reliable Connection transport with a verbs-shaped API.

Context (a provider + its engine) -> PD -> MR / QP; CQs collect completions.
The engine is single-threaded: the application drives it with ``Engine.run``,
``Engine.progress`` or ``CQ.poll``/``CQ.wait``. PSNs are kept internally as
unbounded sequence numbers and put on the wire modulo 2**24, so wrap-around
needs no special cases.
"""

from __future__ import annotations

import itertools
import mmap
import socket
import zlib
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, fields
from enum import IntEnum, IntFlag
from typing import TYPE_CHECKING, TypedDict, cast

from ground.wire import icrc as _icrc
from ground.wire.ipv4 import IPV4
from ground.wire.roce import AETH, BTH, IMMDT, RETH
from hosts.roce import wire
from hosts.roce.constants import (
    AETH_KIND_MASK,
    AETH_KIND_NAK,
    AETH_KIND_RNR,
    AETH_SYNDROME_ACK,
    AETH_SYNDROME_NAK_INV_REQ,
    AETH_SYNDROME_NAK_PSN_SEQ,
    AETH_SYNDROME_NAK_REM_ACCESS,
    AETH_SYNDROME_RNR_NAK,
    BTH_LEN,
    CNP_BTH_BYTE4,
    CNP_RESERVED_BYTES,
    DEFAULT_PATH_MTU,
    ECN_CE,
    ECN_ECT0,
    ECN_NOT_ECT,
    FRAME_OVERHEAD,
    ICRC_LEN,
    OPS_FIRST,
    OPS_LAST,
    OPS_MIDDLE,
    OPS_ONLY,
    OPS_SEND,
    OPS_WITH_IMM,
    OPS_WRITE,
    PATH_MTUS,
    PSN_MASK,
    RETRY_FOREVER,
    ROCE_UDP_PORT,
    UDP_HDR_LEN,
    Opcode,
    psn_delta,
    tag_sport,
)
from hosts.roce.dcqcn import DcqcnParams
from hosts.roce.provider import MAX_WAKE_LEAD_NS, Provider
from hosts.roce.rate import FixedRate, GapPacer, Pacer, RateController
from hosts.roce.scale import Scale

if TYPE_CHECKING:
    from typing import Unpack

_icrc_pack = _icrc.ICRC.packer("icrc")
_icrc_after = _icrc.icrc_after
_icrc_ok_ipv4 = _icrc.icrc_ok_ipv4
# the BTHs the transport sends, each with the fields it sets (the rest default)
_bth_data = BTH.packer("opcode", "padcnt", "job_id", "dqpn", "ackreq", "psn")
_bth_ctrl = BTH.packer("opcode", "job_id", "dqpn", "psn")
_bth_dqpn = BTH.getter("dqpn")
# where a received datagram's IPv4 header length and ECN bits are (byte, shift, mask)
_ihl = IPV4.position("ihl").within(IPV4.offset("ihl"), 1)
_ecn = IPV4.position("ecn").within(IPV4.offset("ecn"), 1)
_IHL_AT, _IHL_SHIFT, _IHL_MASK = _ihl.offset, _ihl.shift, _ihl.mask
_ECN_AT, _ECN_SHIFT, _ECN_MASK = _ecn.offset, _ecn.shift, _ecn.mask
_reth = RETH.packer("va", "rkey", "dma_len")
_imm = IMMDT.packer("imm")
_aeth = AETH.packer("syndrome", "msn")
_PAD = (b"", b"\x00", b"\x00\x00", b"\x00\x00\x00")
_MAX_BURST = 64          # packets one QP sends per engine pass (fairness between QPs)
_RECV_BATCH = 64
_TX_RETRY_NS = 200_000   # wait after the kernel refused a datagram (full socket buffer)


class QPState(IntEnum):
    RESET = 0
    INIT = 1
    RTR = 2
    RTS = 3
    ERR = 6


class Access(IntFlag):
    LOCAL_WRITE = 1
    REMOTE_WRITE = 2
    REMOTE_READ = 4


class WROpcode(IntEnum):
    RDMA_WRITE = 0
    RDMA_WRITE_WITH_IMM = 1
    SEND = 2
    SEND_WITH_IMM = 3


class WCOpcode(IntEnum):
    SEND = 0
    RDMA_WRITE = 1
    RECV = 128
    RECV_RDMA_WITH_IMM = 129


class WCStatus(IntEnum):
    """Completion status; the values are libibverbs' (the rxe provider passes them on)."""

    SUCCESS = 0
    LOC_LEN_ERR = 1
    LOC_QP_OP_ERR = 2
    LOC_EEC_OP_ERR = 3
    LOC_PROT_ERR = 4
    WR_FLUSH_ERR = 5
    MW_BIND_ERR = 6
    BAD_RESP_ERR = 7
    LOC_ACCESS_ERR = 8
    REM_INV_REQ_ERR = 9
    REM_ACCESS_ERR = 10
    REM_OP_ERR = 11
    RETRY_EXC_ERR = 12
    RNR_RETRY_EXC_ERR = 13
    REM_INV_RD_REQ_ERR = 15
    REM_ABORT_ERR = 16
    FATAL_ERR = 19
    RESP_TIMEOUT_ERR = 20
    GENERAL_ERR = 21


@dataclass(frozen=True)
class SGE:
    addr: int
    length: int
    lkey: int


@dataclass
class SendWR:
    """A send work request. ``sport``/``job_id`` pin this WR's flow tag: every packet
    of it, retransmissions included, carries them whatever the QP is retagged to
    later. None: the packets carry the QP's ``sport``/``job_id`` when they leave."""

    wr_id: int
    opcode: WROpcode
    sge: SGE | None = None
    remote_addr: int = 0
    rkey: int = 0
    imm_data: int | None = None
    signaled: bool = True
    sport: int | None = None
    job_id: int | None = None


@dataclass
class RecvWR:
    wr_id: int
    sge: SGE | None = None


@dataclass
class WC:
    wr_id: int
    status: WCStatus
    opcode: WCOpcode
    byte_len: int
    imm_data: int | None
    qp_num: int
    src_qp: int
    timestamp_ns: int


@dataclass
class QPAttr:
    """Fields left None are not changed by ``QP.modify``."""

    state: QPState | None = None
    dest_ip: str | None = None
    dest_qp_num: int | None = None
    dest_port: int | None = None       # UDP port of the peer (4791; tests override)
    rq_psn: int | None = None
    sq_psn: int | None = None
    path_mtu: int | None = None
    timeout_ns: int | None = None
    retry_cnt: int | None = None
    rnr_retry: int | None = None
    sport: int | None = None
    job_id: int | None = None
    max_inflight: int | None = None


class QPAttrs(TypedDict, total=False):
    """``QPAttr``'s fields as ``QP.modify``'s keywords (and what a modify sets)."""

    state: QPState
    dest_ip: str
    dest_qp_num: int
    dest_port: int
    rq_psn: int
    sq_psn: int
    path_mtu: int
    timeout_ns: int
    retry_cnt: int
    rnr_retry: int
    sport: int
    job_id: int
    max_inflight: int


class VerbsError(ValueError):
    """An invalid verbs call (bad state, bad work request, ...)."""


_QP_TRANSITIONS = ((QPState.RESET, QPState.INIT), (QPState.INIT, QPState.INIT),
                   (QPState.INIT, QPState.RTR), (QPState.RTR, QPState.RTS),
                   (QPState.RTS, QPState.RTS))


def modify_request(cur: QPState, attr: QPAttr | None, kw: QPAttrs
                   ) -> tuple[QPAttrs, QPState | None]:
    """The fields a ``modify(attr, **kw)`` call sets (non-None, state popped) and the new
    state, checked against the QP state machine (RESET and ERR are always reachable).
    Shared by every provider's QP.modify."""
    if attr is None:
        attr = QPAttr(**kw)
    elif kw:
        raise VerbsError("give either a QPAttr or keywords")
    vals = cast("QPAttrs", {f.name: getattr(attr, f.name) for f in fields(attr)
                            if getattr(attr, f.name) is not None})
    new = vals.pop("state", None)
    if new is not None:
        new = QPState(new)
        if new not in (QPState.RESET, QPState.ERR) and (cur, new) not in _QP_TRANSITIONS:
            raise VerbsError(f"invalid QP transition {cur.name} -> {new.name}")
    return vals, new


# the attributes a QP keeps as modify gives them
_KEPT_AS_GIVEN = frozenset(("dest_ip", "dest_qp_num", "dest_port", "path_mtu", "timeout_ns",
                            "retry_cnt", "rnr_retry", "sport", "job_id", "max_inflight"))


def lazy_zeros(n: int) -> mmap.mmap:
    """``n`` writable bytes of anonymous memory that cost nothing until
    written: a phantom payload's buffer, which gives a flow or a collective
    its sizes and addresses while its pages stay unallocated (reads see the
    kernel's zero page)."""
    flags = mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS | getattr(mmap, "MAP_NORESERVE", 0)
    return mmap.mmap(-1, n, flags=flags)


def payload_buffer(phantom: bool) -> Callable[[int], bytearray | mmap.mmap]:
    """What makes a buffer of ``n`` bytes: zeroed bytes, or for phantom
    payloads (nothing kept, nothing read) ``lazy_zeros``."""
    return lazy_zeros if phantom else bytearray


class MRBase:
    """What every provider's MR shares: the SGE over a part of it."""

    addr: int
    length: int
    lkey: int

    def sge(self, offset: int = 0, length: int | None = None) -> SGE:
        if length is None:
            length = self.length - offset
        if offset < 0 or length < 0 or offset + length > self.length:
            raise VerbsError("SGE outside the MR")
        return SGE(self.addr + offset, length, self.lkey)


class MR(MRBase):
    """A registered buffer. ``addr`` is its virtual base address (what remote_addr and
    SGE.addr refer to); ``buf`` is a writable memoryview on the registered object.
    ``discard_writes``: what arrives for it is counted but not stored (a phantom
    payload that nothing reads, on a :func:`lazy_zeros` buffer)."""

    discard_writes = False

    def __init__(self, pd: PD, buf, access: Access, addr: int, key: int) -> None:
        mv = memoryview(buf)
        if mv.format != "B" or mv.ndim != 1:
            # Only when needed: PyPy copies the whole buffer whenever a slice of
            # a cast view is read (every packet sent from it).
            mv = mv.cast("B")
        if mv.readonly:
            raise VerbsError("MR buffer must be writable")
        self.pd = pd
        self.buf = mv
        self.length = len(mv)
        self.access = Access(access)
        self.addr = addr
        self.lkey = key
        self.rkey = key
        self.valid = True

    def dereg(self) -> None:
        self.valid = False
        self.pd.ctx._mrs.pop(self.lkey, None)


class PD:
    def __init__(self, ctx: Context) -> None:
        self.ctx = ctx

    def reg_mr(self, buf, access: Access = Access.LOCAL_WRITE) -> MR:
        return self.ctx._reg_mr(self, buf, access)

    def create_qp(self, send_cq: CQ, recv_cq: CQ | None = None, *, sport: int | None = None,
                  job_id: int = 0, rate_controller: RateController | None = None,
                  pacer: Pacer | None = None) -> QP:
        return QP(self, send_cq, recv_cq or send_cq, sport=tag_sport(0) if sport is None
                  else sport, job_id=job_id, rate_controller=rate_controller, pacer=pacer)


class CQ:
    def __init__(self, ctx: Context, depth: int = 1 << 16) -> None:
        self.ctx = ctx
        self.depth = depth
        self._q: deque[WC] = deque()
        self.overflows = 0

    def _push(self, wc: WC) -> None:
        if len(self._q) >= self.depth:
            self.overflows += 1
        self._q.append(wc)

    def __len__(self) -> int:
        return len(self._q)

    def poll(self, num_entries: int = 1) -> list[WC]:
        """Nonblocking: make progress, then return up to ``num_entries`` completions."""
        self.ctx.engine.progress()
        q = self._q
        n = min(num_entries, len(q))
        return [q.popleft() for _ in range(n)]

    def wait(self, num_entries: int = 1, timeout: float | None = None) -> list[WC]:
        """Run the engine until ``num_entries`` completions are queued (or timeout),
        then return what is queued (up to ``num_entries``)."""
        self.ctx.engine.run(until=lambda: len(self._q) >= num_entries, timeout=timeout)
        q = self._q
        return [q.popleft() for _ in range(min(num_entries, len(q)))]


class Context:
    """A device: a packet provider, its engine, and the memory keys."""

    def __init__(self, provider: Provider, scale: Scale | None = None, *,
                 rate_controller_factory: Callable[[], RateController] | None = None,
                 pacer_factory: Callable[[], Pacer] | None = None,
                 check_icrc: bool = True, cnp_interval_ns: int | None = None) -> None:
        self.provider = provider
        self.check_icrc = check_icrc     # False: accept packets whatever their ICRC
        self.scale = scale or Scale()
        # DCQCN notification point: at most one CNP per QP per this interval;
        # by default the default DCQCN preset's, scaled.
        if cnp_interval_ns is None:
            cnp_interval_ns = DcqcnParams.for_scale(self.scale).cnp_interval_ns
        if cnp_interval_ns < 0:
            raise VerbsError(f"cnp_interval_ns must be >= 0, got {cnp_interval_ns}")
        self.cnp_interval_ns = cnp_interval_ns
        self.rate_controller_factory = rate_controller_factory or (
            lambda: FixedRate(self.scale.line_rate_bps))
        self.pacer_factory = pacer_factory or GapPacer
        self.engine = Engine(self)
        self._mrs: dict[int, MR] = {}
        self._keys = itertools.count(0x100)
        self._next_va = 0x10000000

    @property
    def local_ip(self) -> str:
        return self.provider.local_ip

    def alloc_pd(self) -> PD:
        return PD(self)

    def create_cq(self, depth: int = 1 << 16) -> CQ:
        return CQ(self, depth)

    def _reg_mr(self, pd: PD, buf, access: Access) -> MR:
        key = next(self._keys)
        mr = MR(pd, buf, access, self._next_va, key)
        self._next_va += (mr.length + 0xFFF) & ~0xFFF or 0x1000
        self._mrs[key] = mr
        return mr

    def close(self) -> None:
        for qp in list(self.engine.qps.values()):
            qp.destroy()
        self.provider.close()


class _SendWQE:
    __slots__ = ("wr", "op", "mr", "off", "length", "first", "npkts", "mtu", "sport", "job_id")
    wr: SendWR
    op: WROpcode
    mr: MR | None
    off: int
    length: int
    first: int      # sequence number of its first packet
    npkts: int
    mtu: int
    sport: int | None       # the WR's own flow tag (None: the QP's, when sent)
    job_id: int | None


class _Responder:
    """Receive-side message in progress."""

    __slots__ = ("kind", "mr", "pos", "end", "wqe", "total")
    kind: str                  # "w" RDMA WRITE, "s" SEND
    mr: MR | None
    pos: int                   # next byte offset in mr.buf
    end: int
    wqe: RecvWR | None
    total: int


class QP:
    """A Reliable Connection queue pair."""

    def __init__(self, pd: PD, send_cq: CQ, recv_cq: CQ, *, sport: int, job_id: int,
                 rate_controller: RateController | None, pacer: Pacer | None) -> None:
        if not 0 <= job_id <= 0xFF or not 0 < sport <= 0xFFFF:
            raise VerbsError("job_id must fit 8 bits and sport be a UDP port")
        ctx = pd.ctx
        self.ctx = ctx
        self.pd = pd
        self.engine = ctx.engine
        self.send_cq = send_cq
        self.recv_cq = recv_cq
        self.qp_num = self.engine._alloc_qpn()
        self.state = QPState.RESET
        self.dest_ip = "0.0.0.0"
        self._dest_ip_b = bytes(4)
        self.dest_qp_num = 0
        self.dest_port = ROCE_UDP_PORT
        self.path_mtu = DEFAULT_PATH_MTU
        self.timeout_ns: int | None = None
        self.retry_cnt = RETRY_FOREVER
        self.rnr_retry = RETRY_FOREVER
        self.sport = sport
        self.job_id = job_id
        # DSCP of the data packets, read as each packet leaves: a sender may
        # change it between packets (a per-packet priority class).
        self.dscp = 0
        self.max_inflight = ctx.scale.max_inflight_pkts
        self.rate_controller = rate_controller or ctx.rate_controller_factory()
        self.pacer = pacer or ctx.pacer_factory()
        # Data packets name the pacer's HTB class when the kernel shapes this
        # QP's rate (hosts/roce/shaping.py); ACKs and CNPs never wait there.
        self._skb_priority = int(getattr(self.pacer, "skb_priority", 0))
        self._departure: Callable[[], int] | None = getattr(self.pacer, "departure_ns", None)
        self.stats: dict[str, int] = dict.fromkeys((
            "tx_pkts", "tx_bytes", "tx_drops", "retransmits", "rto", "naks_rcvd",
            "rnr_naks_rcvd", "acks_rcvd", "cnps_rcvd", "rx_pkts", "rx_bytes", "dup_pkts",
            "out_of_seq", "naks_sent", "rnr_naks_sent", "acks_sent", "cnps_sent",
            "ce_pkts", "paced_pkts", "pacing_late_sum_ns", "pacing_late_max_ns",
            "acked_pkts"), 0)
        self._pseudo_tx: dict[int, int] = {}   # (sport, length) -> CRC of the pseudo-header
        # The engine ticks a QP only when it was touched (a packet for it, a
        # posted WR, a modify) or its own next deadline (``_wake_at``, as of
        # its last tick) has come: a rank with tens of QPs, most idle at any
        # moment, otherwise spent most of its CPU ticking idle ones.
        self._touched = True
        self.engine._dirty = True
        self._wake_at: int | None = None
        # the next packet's send time when the pacer wants it met to the us
        # (the host then polls for it), else None: timers may run late
        self._exact_at: int | None = None
        self._reset_state()
        self.engine._add_qp(self)
        ctx.provider.open_port(sport)

    # -- state -----------------------------------------------------------------
    def _reset_state(self) -> None:
        for w in getattr(self, "_sq", ()):
            self._release(w)
        self._sq: deque[_SendWQE] = deque()
        self._sq_tail = 0        # sequence number the next posted packet gets
        self._snd_nxt = 0
        self._snd_una = 0
        self._snd_max = 0
        self._tx_idx = 0         # index in _sq of the WQE holding _snd_nxt
        self._rto_deadline: int | None = None
        self._retries = 0
        self._rnr_retries = 0
        self._rnr_until = 0
        self._pace_at: int | None = None
        # (first sequence number, time) of each posted WR whose first packet
        # may not leave before that time (the NIC's per-message latency and the
        # host's own delay, see post_send), in posting order; empty without them
        self._hold: deque[tuple[int, int]] = deque()
        self._built: tuple[int, bytes, memoryview | bytes, int | None] | None = None
        self._last_tx_ns = 0
        self._rq: deque[RecvWR] = deque()
        self._epsn = 0
        self._msn = 0
        self._nak_sent = False
        self._unacked = 0
        self._ack_now = False
        self._ack_deadline: int | None = None
        self._rx: _Responder | None = None
        self._last_cnp_ns: int | None = None

    @property
    def sq_psn(self) -> int:
        """PSN the next new packet will carry."""
        return self._sq_tail & PSN_MASK

    @property
    def epsn(self) -> int:
        """PSN the responder expects next."""
        return self._epsn & PSN_MASK

    @property
    def outstanding(self) -> int:
        """Posted send WRs not yet completed."""
        return len(self._sq)

    def modify(self, attr: QPAttr | None = None, **kw: Unpack[QPAttrs]) -> None:
        """Apply the non-None fields of ``attr`` / the keywords (QPAttr field names)."""
        self._touched = True
        self.engine._dirty = True
        cur = self.state
        vals, new = modify_request(cur, attr, kw)
        if new == QPState.RTR and "dest_ip" not in vals and self.dest_ip == "0.0.0.0":
            raise VerbsError("INIT -> RTR needs dest_ip and dest_qp_num")
        if "path_mtu" in vals and vals["path_mtu"] not in PATH_MTUS:
            raise VerbsError(f"path_mtu must be one of {PATH_MTUS}")
        if "job_id" in vals and not 0 <= vals["job_id"] <= 0xFF:
            raise VerbsError("job_id must fit 8 bits")
        if "sport" in vals and not 0 < vals["sport"] <= 0xFFFF:
            raise VerbsError("sport must be a UDP port")
        for k, n in (("retry_cnt", vals.get("retry_cnt")), ("rnr_retry", vals.get("rnr_retry"))):
            if n is not None and not 0 <= n <= RETRY_FOREVER:
                raise VerbsError(f"{k} must be 0..{RETRY_FOREVER} ({RETRY_FOREVER} = forever)")
        if "sport" in vals and vals["sport"] != self.sport:
            self.ctx.provider.open_port(vals["sport"])
            self.ctx.provider.close_port(self.sport)
        for k, v in vals.items():
            if k in _KEPT_AS_GIVEN:
                setattr(self, k, v)
        if "dest_ip" in vals:
            self._dest_ip_b = socket.inet_aton(self.dest_ip)
        self._pseudo_tx.clear()
        self._built = None
        if new == QPState.RESET:
            self._reset_state()
        if "rq_psn" in vals:
            self._epsn = vals["rq_psn"] & PSN_MASK
        if "sq_psn" in vals:
            if self._sq:
                raise VerbsError("cannot change sq_psn with outstanding work requests")
            s = vals["sq_psn"] & PSN_MASK
            self._sq_tail = self._snd_nxt = self._snd_una = self._snd_max = s
        if new is None:
            return
        if new == QPState.ERR and cur != QPState.ERR:
            self._to_error(None)
            return
        self.state = new

    def destroy(self) -> None:
        if self.qp_num in self.engine.qps:
            self.engine._remove_qp(self)
            for w in self._sq:
                self._release(w)
            self._sq.clear()
            self.ctx.provider.close_port(self.sport)

    def _release(self, w: _SendWQE) -> None:
        """A WQE leaves the send queue: give back the source port it held."""
        if w.sport is not None:
            self.ctx.provider.close_port(w.sport)
            w.sport = None

    # -- posting ---------------------------------------------------------------
    def _resolve(self, sge: SGE | None, need: Access) -> tuple[MR | None, int, int]:
        if sge is None or sge.length == 0:
            return None, 0, 0
        mr = self.ctx._mrs.get(sge.lkey)
        if mr is None or mr.pd is not self.pd:
            raise VerbsError(f"unknown lkey {sge.lkey:#x}")
        off = sge.addr - mr.addr
        if off < 0 or off + sge.length > mr.length:
            raise VerbsError("SGE outside its MR")
        if need and not mr.access & need:
            raise VerbsError("MR lacks LOCAL_WRITE access")
        return mr, off, sge.length

    def post_send(self, wr: SendWR, delay_ns: int = 0) -> None:
        """Post ``wr``. Its first packet leaves no sooner than ``delay_ns`` (the
        host's own work before the post, e.g. a collective library's per-step
        overhead) plus the NIC's per-message latency (``Scale.nic_latency_us``)
        after now; the NIC still sends its requests in order."""
        if self.state == QPState.ERR:
            self.send_cq._push(self._wc(wr.wr_id, WCStatus.WR_FLUSH_ERR, _wc_op(wr.opcode), 0))
            return
        if self.state != QPState.RTS:
            raise VerbsError(f"post_send in state {self.state.name}")
        op = WROpcode(wr.opcode)
        if op in (WROpcode.RDMA_WRITE_WITH_IMM, WROpcode.SEND_WITH_IMM) and wr.imm_data is None:
            raise VerbsError("*_WITH_IMM needs imm_data")
        if wr.sport is not None and not 0 < wr.sport <= 0xFFFF:
            raise VerbsError("SendWR.sport must be a UDP port")
        if wr.job_id is not None and not 0 <= wr.job_id <= 0xFF:
            raise VerbsError("SendWR.job_id must fit 8 bits")
        mr, off, length = self._resolve(wr.sge, Access(0))
        if length >= 1 << 31:
            raise VerbsError("message too long")
        w = _SendWQE()
        w.wr, w.op, w.mr, w.off, w.length, w.mtu = wr, op, mr, off, length, self.path_mtu
        w.npkts = max(1, -(-length // self.path_mtu))
        w.first = self._sq_tail
        w.sport, w.job_id = wr.sport, wr.job_id
        if w.sport is not None:
            self.ctx.provider.open_port(w.sport)   # held until the WQE leaves the queue
        self._sq_tail += w.npkts
        self._sq.append(w)
        self._touched = True
        self.engine._dirty = True
        now = self.engine.now_ns()
        hold = delay_ns + self.ctx.scale.nic_latency_ns
        if hold > 0:
            ready = now + hold
            if self._hold and self._hold[-1][1] > ready:
                ready = self._hold[-1][1]          # in order: never before the one ahead
            self._hold.append((w.first, ready))
        self._pump(now)

    def post_recv(self, wr: RecvWR) -> None:
        if self.state == QPState.ERR:
            self.recv_cq._push(self._wc(wr.wr_id, WCStatus.WR_FLUSH_ERR, WCOpcode.RECV, 0))
            return
        if self.state == QPState.RESET:
            raise VerbsError("post_recv in state RESET")
        self._resolve(wr.sge, Access.LOCAL_WRITE)
        self._rq.append(wr)
        self._touched = True
        self.engine._dirty = True

    def _wc(self, wr_id: int, status: WCStatus, op: WCOpcode, n: int,
            imm: int | None = None) -> WC:
        return WC(wr_id, status, op, n, imm, self.qp_num, self.dest_qp_num,
                  self.engine.now_ns())

    def _to_error(self, head_status: WCStatus | None) -> None:
        """Move to ERR: the head send WR completes with ``head_status``, the rest flush."""
        self.state = QPState.ERR
        sq, self._sq = self._sq, deque()
        for i, w in enumerate(sq):
            self._release(w)
            st = head_status if (i == 0 and head_status is not None) else WCStatus.WR_FLUSH_ERR
            self.send_cq._push(self._wc(w.wr.wr_id, st, _wc_op(w.op), 0))
        rx = self._rx
        if rx is not None and rx.wqe is not None:
            self.recv_cq._push(self._wc(rx.wqe.wr_id, WCStatus.WR_FLUSH_ERR, WCOpcode.RECV, 0))
        self._rx = None
        rq, self._rq = self._rq, deque()
        for r in rq:
            self.recv_cq._push(self._wc(r.wr_id, WCStatus.WR_FLUSH_ERR, WCOpcode.RECV, 0))
        self._rto_deadline = self._ack_deadline = self._pace_at = None
        self._hold.clear()
        self._ack_now = False

    # -- transmit --------------------------------------------------------------
    def _pseudo_crc(self, roce_len: int, sport: int) -> int:
        key = (sport << 32) | roce_len
        c = self._pseudo_tx.get(key)
        if c is None:
            if len(self._pseudo_tx) > 256:     # WR tags come and go: keep the cache small
                self._pseudo_tx.clear()
            c = zlib.crc32(_icrc.pseudo_header(self.engine._local_ip_b, self._dest_ip_b, sport,
                                               roce_len, self.dest_port))
            self._pseudo_tx[key] = c
        return c

    def _xmit(self, hdr: bytes, payload, ecn: int, sport: int | None = None,
              dscp: int = 0, priority: int = 0) -> bool:
        if sport is None:
            sport = self.sport
        pad = _PAD[-len(payload) & 3]
        roce_len = len(hdr) + len(payload) + len(pad) + ICRC_LEN
        crc = _icrc_after(self._pseudo_crc(roce_len, sport), hdr, payload, pad)
        ok = self.ctx.provider.send(sport, self.dest_ip, self.dest_port,
                                    (hdr, payload, pad + _icrc_pack(crc)), ecn, dscp,
                                    priority)
        if not ok:
            self.stats["tx_drops"] += 1
        return ok

    def _send_ctrl(self, syndrome: int, psn: int) -> None:
        hdr = (_bth_ctrl(Opcode.ACK, self.job_id, self.dest_qp_num, psn)
               + _aeth(syndrome, self._msn))
        self._xmit(hdr, b"", ECN_NOT_ECT)

    def _send_ack(self) -> None:
        self._send_ctrl(AETH_SYNDROME_ACK, self._epsn - 1)
        self.stats["acks_sent"] += 1
        self._unacked = 0
        self._ack_now = False
        self._ack_deadline = None

    def _send_cnp(self) -> None:
        hdr = _bth_ctrl(Opcode.CNP, CNP_BTH_BYTE4, self.dest_qp_num, 0)
        self._xmit(hdr, bytes(CNP_RESERVED_BYTES), ECN_NOT_ECT)
        self.stats["cnps_sent"] += 1

    def _packet(self, seq: int) -> tuple[bytes, memoryview | bytes, int | None]:
        """Header, payload and pinned source port (None: the QP's) of send-queue
        packet ``seq``."""
        sq = self._sq
        i = self._tx_idx
        if i >= len(sq) or not (sq[i].first <= seq < sq[i].first + sq[i].npkts):
            i += 1
            if i >= len(sq) or not (sq[i].first <= seq < sq[i].first + sq[i].npkts):
                i = 0
                while not (sq[i].first <= seq < sq[i].first + sq[i].npkts):
                    i += 1
            self._tx_idx = i
        w = sq[i]
        k = seq - w.first
        n = w.npkts
        off = k * w.mtu
        ln = min(w.mtu, w.length - off)
        mr = w.mr
        payload = mr.buf[w.off + off: w.off + off + ln] if ln > 0 and mr is not None else b""
        write = w.op <= WROpcode.RDMA_WRITE_WITH_IMM
        imm = w.op in (WROpcode.RDMA_WRITE_WITH_IMM, WROpcode.SEND_WITH_IMM)
        if n == 1:
            op = (Opcode.RDMA_WRITE_ONLY_IMM if imm else Opcode.RDMA_WRITE_ONLY) if write else (
                Opcode.SEND_ONLY_IMM if imm else Opcode.SEND_ONLY)
        elif k == 0:
            op = Opcode.RDMA_WRITE_FIRST if write else Opcode.SEND_FIRST
        elif k == n - 1:
            op = (Opcode.RDMA_WRITE_LAST_IMM if imm else Opcode.RDMA_WRITE_LAST) if write else (
                Opcode.SEND_LAST_IMM if imm else Opcode.SEND_LAST)
        else:
            op = Opcode.RDMA_WRITE_MIDDLE if write else Opcode.SEND_MIDDLE
        last = k == n - 1
        ackreq = last or (seq + 1 - self._snd_una >= self.max_inflight)
        job = self.job_id if w.job_id is None else w.job_id
        hdr = _bth_data(op, -ln & 3, job, self.dest_qp_num, ackreq, seq)
        if write and k == 0:
            hdr += _reth(w.wr.remote_addr, w.wr.rkey, w.length)
        if imm and last:
            hdr += _imm((w.wr.imm_data or 0) & 0xFFFFFFFF)
        return hdr, payload, w.sport

    def _pump(self, now: int) -> None:
        """Send what the window, RNR wait and pacer allow."""
        if self.state != QPState.RTS:
            return
        self._pace_at = None
        if now < self._rnr_until:
            return
        rc = self.rate_controller
        pacer = self.pacer
        st = self.stats
        sent = 0
        hold = self._hold
        while (self._snd_nxt < self._sq_tail and self._snd_nxt - self._snd_una < self.max_inflight
               and sent < _MAX_BURST):
            seq = self._snd_nxt
            if hold:
                while hold and hold[0][1] <= now:
                    hold.popleft()
                if hold and seq >= hold[0][0]:
                    self._pace_at = hold[0][1]     # its request is not ready yet
                    break
            built = self._built
            if built is not None and built[0] == seq:
                hdr, payload, wsport = built[1], built[2], built[3]
            else:
                hdr, payload, wsport = self._packet(seq)
            nbytes = len(hdr) + len(payload) + (-len(payload) & 3) + ICRC_LEN + FRAME_OVERHEAD
            rate = rc.rate_bps
            t = pacer.next_send_ns(nbytes, now, rate)
            if t > now:
                self._pace_at = t
                self._built = (seq, hdr, payload, wsport)   # reuse when the pacer allows it
                break
            if t > self._last_tx_ns:
                late = now - t
                st["paced_pkts"] += 1
                st["pacing_late_sum_ns"] += late
                if late > st["pacing_late_max_ns"]:
                    st["pacing_late_max_ns"] = late
            if not self._xmit(hdr, payload, ECN_ECT0, wsport, self.dscp, self._skb_priority):
                # the socket buffer is full: retry shortly rather than lose the packet
                self._pace_at = now + _TX_RETRY_NS
                break
            self._last_tx_ns = now
            pacer.on_sent(nbytes, now, rate)
            rc.on_bytes_sent(nbytes, now)
            st["tx_pkts"] += 1
            st["tx_bytes"] += nbytes
            if seq < self._snd_max:
                st["retransmits"] += 1
            self._snd_nxt = seq + 1
            if self._snd_nxt > self._snd_max:
                self._snd_max = self._snd_nxt
            if self._rto_deadline is None:
                self._rto_deadline = self._sent_by(now) + self._rto()
            sent += 1
        if sent == _MAX_BURST:
            self._pace_at = now

    def _rto(self) -> int:
        return self.timeout_ns if self.timeout_ns is not None else self.ctx.scale.rto_ns

    def _rewind(self, seq: int) -> None:
        self._snd_nxt = seq
        self._tx_idx = 0
        self._built = None

    # -- requester: ACK / NAK / CNP -------------------------------------------
    def _acked_through(self, psn: int) -> int | None:
        """Unbounded sequence number of ACKed PSN ``psn``, or None if out of range."""
        s = self._snd_una + psn_delta(psn - self._snd_una)
        if s < self._snd_una - 1 or s >= self._snd_max:
            return None
        return s

    def _complete_through(self, seq: int, now: int) -> None:
        """Everything up to ``seq`` inclusive is acknowledged."""
        if seq < self._snd_una:
            return
        sq = self._sq
        popped = 0
        while sq and sq[0].first + sq[0].npkts - 1 <= seq:
            w = sq.popleft()
            self._release(w)
            popped += 1
            if w.wr.signaled:
                self.send_cq._push(WC(w.wr.wr_id, WCStatus.SUCCESS, _wc_op(w.op), w.length,
                                      None, self.qp_num, self.dest_qp_num, now))
        self._tx_idx = max(0, self._tx_idx - popped)
        self.stats["acked_pkts"] += seq + 1 - self._snd_una
        self._snd_una = seq + 1
        if self._snd_nxt < self._snd_una:
            self._snd_nxt = self._snd_una
            self._tx_idx = 0
        self._retries = 0
        self._rnr_retries = 0
        self._rto_deadline = (self._sent_by(now) + self._rto() if self._snd_una < self._snd_max
                              else None)

    def _sent_by(self, now: int) -> int:
        """When the packets handed over so far have left the host: a NIC's
        retransmission timer runs from a packet's transmission, and frames a
        shaped QP keeps queued in the kernel (hosts/roce/pacing.py, run-ahead)
        leave up to that queue's drain time later."""
        d = self._departure
        return now if d is None else max(now, d())

    def _on_ack(self, p: wire.Packet, now: int) -> None:
        if self.state != QPState.RTS:
            return
        if p.aeth is None:
            return
        syn = p.aeth[0]
        kind = syn & AETH_KIND_MASK
        st = self.stats
        if kind == 0:
            st["acks_rcvd"] += 1
            s = self._acked_through(p.psn)
            if s is not None:
                self._complete_through(s, now)
            return
        # NAKs carry the PSN the responder expects: everything before it arrived.
        s = self._acked_through((p.psn - 1) & PSN_MASK)
        if s is None:
            return
        self._complete_through(s, now)
        if kind == AETH_KIND_RNR:
            st["rnr_naks_rcvd"] += 1
            if self.rnr_retry != RETRY_FOREVER:
                self._rnr_retries += 1
                if self._rnr_retries > self.rnr_retry:
                    self._to_error(WCStatus.RNR_RETRY_EXC_ERR)
                    return
            self._rnr_until = now + self.ctx.scale.rnr_delay_ns
            self._rewind(s + 1)
            self._rto_deadline = self._rnr_until + self._rto()
        elif syn == AETH_SYNDROME_NAK_PSN_SEQ:
            st["naks_rcvd"] += 1
            if s + 1 < self._snd_max:
                self._rewind(s + 1)
        elif kind == AETH_KIND_NAK:
            st["naks_rcvd"] += 1
            status = {AETH_SYNDROME_NAK_INV_REQ: WCStatus.REM_INV_REQ_ERR,
                      AETH_SYNDROME_NAK_REM_ACCESS: WCStatus.REM_ACCESS_ERR}.get(
                          syn, WCStatus.REM_OP_ERR)
            self._to_error(status)

    # -- responder -------------------------------------------------------------
    def _nak(self, syndrome: int) -> None:
        self._send_ctrl(syndrome, self._epsn)
        if syndrome & AETH_KIND_MASK == AETH_KIND_RNR:
            self.stats["rnr_naks_sent"] += 1
        else:
            self.stats["naks_sent"] += 1

    def _fatal_nak(self, syndrome: int) -> None:
        self._nak(syndrome)
        self._to_error(None)

    def _on_data(self, p: wire.Packet, ecn: int, now: int) -> None:
        if self.state not in (QPState.RTR, QPState.RTS):
            return
        st = self.stats
        if ecn == ECN_CE:
            st["ce_pkts"] += 1
            last = self._last_cnp_ns
            if last is None or now - last >= self.ctx.cnp_interval_ns:
                self._last_cnp_ns = now
                self._send_cnp()
        d = psn_delta(p.psn - self._epsn)
        if d < 0:
            st["dup_pkts"] += 1
            self._ack_now = True
            return
        if d > 0:
            st["out_of_seq"] += 1
            if not self._nak_sent:
                self._nak_sent = True
                self._nak(AETH_SYNDROME_NAK_PSN_SEQ)
            return
        op = p.opcode
        payload = p.payload
        n = len(payload)
        rx = self._rx
        is_first = op in OPS_FIRST or op in OPS_ONLY
        is_last = op in OPS_LAST or op in OPS_ONLY
        if is_first:
            if rx is not None:
                self._fatal_nak(AETH_SYNDROME_NAK_INV_REQ)
                return
            rx = _Responder()
            rx.wqe = None
            if op in OPS_WRITE:
                va, rkey, dma_len = p.reth or (0, 0, 0)
                mr = self.ctx._mrs.get(rkey)
                off = va - mr.addr if mr is not None else -1
                if dma_len == 0:          # zero-length writes check no key (IBA)
                    mr, off = None, 0
                elif (mr is None or mr.pd is not self.pd or not mr.access & Access.REMOTE_WRITE
                        or off < 0 or off + dma_len > mr.length):
                    self._fatal_nak(AETH_SYNDROME_NAK_REM_ACCESS)
                    return
                rx.kind, rx.mr, rx.pos, rx.end, rx.total = "w", mr, off, off + dma_len, dma_len
            else:
                rx.kind, rx.total = "s", 0
        elif op in OPS_MIDDLE or op in OPS_LAST:
            if rx is None or (rx.kind == "w") != (op in OPS_WRITE):
                self._fatal_nak(AETH_SYNDROME_NAK_INV_REQ)
                return
        else:
            self._fatal_nak(AETH_SYNDROME_NAK_INV_REQ)
            return
        needs_wqe = op in OPS_SEND and is_first or op in OPS_WITH_IMM and op in OPS_WRITE
        if needs_wqe and rx.wqe is None:
            if not self._rq:
                self._nak_sent = True
                self._nak(AETH_SYNDROME_RNR_NAK)
                return
        if rx.kind == "w":
            if rx.pos + n > rx.end or (is_last and rx.pos + n != rx.end):
                self._fatal_nak(AETH_SYNDROME_NAK_INV_REQ)
                return
            if n and rx.mr is not None and not rx.mr.discard_writes:
                rx.mr.buf[rx.pos: rx.pos + n] = payload
            rx.pos += n
        else:
            if rx.wqe is None:
                rx.wqe = self._rq[0]
                mr, off, length = self._resolve(rx.wqe.sge, Access(0))
                rx.mr, rx.pos, rx.end = mr, off, off + length
                self._rq.popleft()
            if rx.pos + n > rx.end:
                self.recv_cq._push(self._wc(rx.wqe.wr_id, WCStatus.LOC_LEN_ERR, WCOpcode.RECV, 0))
                rx.wqe = None
                self._fatal_nak(AETH_SYNDROME_NAK_INV_REQ)
                return
            if n and rx.mr is not None and not rx.mr.discard_writes:
                rx.mr.buf[rx.pos: rx.pos + n] = payload
            rx.pos += n
            rx.total += n
        self._rx = rx
        self._epsn += 1
        self._nak_sent = False
        st["rx_pkts"] += 1
        st["rx_bytes"] += n
        self._unacked += 1
        if is_last:
            self._msn = (self._msn + 1) & PSN_MASK
            self._rx = None
            if rx.kind == "s" and rx.wqe is not None:
                self.recv_cq._push(WC(rx.wqe.wr_id, WCStatus.SUCCESS, WCOpcode.RECV, rx.total,
                                      p.imm, self.qp_num, self.dest_qp_num, now))
            elif p.imm is not None:
                wqe = self._rq.popleft()
                self.recv_cq._push(WC(wqe.wr_id, WCStatus.SUCCESS, WCOpcode.RECV_RDMA_WITH_IMM,
                                      rx.total, p.imm, self.qp_num, self.dest_qp_num, now))
        if self._unacked >= self.ctx.scale.ack_every_pkts:
            self._send_ack()
        elif p.ackreq or is_last:
            self._ack_now = True
        elif self._ack_deadline is None:
            self._ack_deadline = now + self.ctx.scale.ack_delay_ns

    # -- timers ----------------------------------------------------------------
    def _tick(self, now: int) -> None:
        if self._ack_now or (self._ack_deadline is not None and now >= self._ack_deadline):
            if self.state in (QPState.RTR, QPState.RTS):
                self._send_ack()
        rc = self.rate_controller
        dl = rc.next_deadline()
        if dl is not None and now >= dl:
            rc.on_timer(now)
        if self.state != QPState.RTS:
            return
        if self._rto_deadline is not None and now >= self._rto_deadline:
            if self._snd_una >= self._snd_max:
                self._rto_deadline = None
            else:
                self._retries += 1
                self.stats["rto"] += 1
                if self.retry_cnt != RETRY_FOREVER and self._retries > self.retry_cnt:
                    self._to_error(WCStatus.RETRY_EXC_ERR)
                    return
                self._rewind(self._snd_una)
                self._rnr_until = 0
                self._rto_deadline = now + self._rto()
        self._pump(now)

    def _next_deadline(self) -> int | None:
        cands = [self._ack_deadline, self.rate_controller.next_deadline()]
        send_at = None
        if self.state == QPState.RTS:
            cands.append(self._rto_deadline)
            if self._snd_nxt < self._sq_tail and self._snd_nxt - self._snd_una < self.max_inflight:
                send_at = max(self._rnr_until, self._pace_at or 0)
                cands.append(send_at)
        if self._ack_now:
            cands.append(0)
        live = [c for c in cands if c is not None]
        # ACK, RTO, RNR and DCQCN timers are milliseconds long once scaled:
        # waking tens of us late costs them nothing. A paced send does.
        self._exact_at = (send_at if send_at is not None and send_at == self._pace_at
                          and getattr(self.pacer, "exact", True) else None)
        return min(live) if live else None


def wait_exactly(deadline_ns: int | None, exact_ns: int | None) -> bool:
    """Whether a wait until ``deadline_ns`` must end on time (Provider.wait's
    ``exact``): when an exact deadline ``exact_ns`` (a paced send, a message's
    post time) comes within MAX_WAKE_LEAD_NS of it."""
    return (exact_ns is not None and deadline_ns is not None
            and exact_ns <= deadline_ns + MAX_WAKE_LEAD_NS)


def _wc_op(op: WROpcode) -> WCOpcode:
    return WCOpcode.RDMA_WRITE if op <= WROpcode.RDMA_WRITE_WITH_IMM else WCOpcode.SEND


class Engine:
    """Single-threaded progress engine of one Context: receive, timers, transmit."""

    def __init__(self, ctx: Context) -> None:
        self.ctx = ctx
        self.provider = ctx.provider
        self.now_ns = ctx.provider.now_ns
        self._local_ip_b = socket.inet_aton(ctx.provider.local_ip)
        self.qps: dict[int, QP] = {}
        self._qp_list: list[QP] = []
        self._qpn = itertools.count(0x11)
        self.exact_at: int | None = None     # of the last next_deadline()
        bind = getattr(ctx.provider, "bind_engine", None)
        if bind is not None:    # the simulated wire drives all its engines on one clock
            bind(self)
        self.stats: dict[str, int] = dict.fromkeys((
            "rx_datagrams", "icrc_drops", "malformed_drops", "unknown_qp_drops"), 0)
        # A simulated host's agent passes twice per poll (its own pass, then
        # the CQ's): the second finds nothing to do unless a WR was posted or
        # a frame arrived in between. ``_settled_ns``: the instant of the
        # last pass that left nothing due then (-1: none); ``_dirty``: a QP
        # was touched since that pass began. Real-time providers never settle.
        pending = getattr(self.provider, "pending", None)
        self._can_settle = bool(getattr(self.provider, "simulated", False) and pending)
        # whether frames wait to be read (a simulated NIC's receive queue)
        self._frames_pending: Callable[[], bool] = pending or (lambda: True)
        self._settled_ns = -1
        self._dirty = False

    def _alloc_qpn(self) -> int:
        return next(self._qpn)

    def _add_qp(self, qp: QP) -> None:
        self.qps[qp.qp_num] = qp
        self._qp_list.append(qp)

    def _remove_qp(self, qp: QP) -> None:
        del self.qps[qp.qp_num]
        self._qp_list.remove(qp)

    def timers(self) -> dict[str, float | int]:
        return self.ctx.scale.timers()

    def summary(self) -> dict[str, int]:
        """Engine counters plus the sum (max for *_max_*) of all QPs' counters."""
        out = dict(self.stats)
        for qp in self._qp_list:
            for k, v in qp.stats.items():
                out[k] = max(out.get(k, 0), v) if "_max_" in k else out.get(k, 0) + v
        return out

    def _on_datagram(self, pkt, now: int) -> None:
        """One received IPv4 packet (headers as they arrived, see Provider.recv)."""
        st = self.stats
        st["rx_datagrams"] += 1
        n = len(pkt)
        # where the RoCE packet starts
        off = ((pkt[_IHL_AT] >> _IHL_SHIFT & _IHL_MASK) * 4 if n else 0) + UDP_HDR_LEN
        if n < off + BTH_LEN + ICRC_LEN:
            st["malformed_drops"] += 1
            return
        qp = self.qps.get(_bth_dqpn(pkt, off))
        if qp is None:
            st["unknown_qp_drops"] += 1
            return
        qp._touched = True
        mv = memoryview(pkt)
        if self.ctx.check_icrc and not _icrc_ok_ipv4(mv):
            st["icrc_drops"] += 1
            return
        ecn = pkt[_ECN_AT] >> _ECN_SHIFT & _ECN_MASK
        mv = mv[off:]
        try:
            p = wire.decode(mv)
        except wire.WireError:
            st["malformed_drops"] += 1
            return
        op = p.opcode
        if op == Opcode.ACK:
            qp._on_ack(p, now)
        elif op == Opcode.CNP:
            qp.stats["cnps_rcvd"] += 1
            qp.rate_controller.on_cnp(now)
        elif op <= Opcode.RDMA_WRITE_ONLY_IMM:
            qp._on_data(p, ecn, now)
        else:
            st["malformed_drops"] += 1

    def progress(self) -> None:
        """One pass: receive what is pending, fire due timers, transmit."""
        prov = self.provider
        now = prov.now_ns()
        if now == self._settled_ns and not self._dirty and not self._frames_pending():
            return      # this instant's pass left nothing due, and nothing came since
        # One bounded batch per pass, so a flooded receiver still gets to its timers
        # and ACKs; ACKs owed for the batch go out together below (coalescing).
        for pkt in prov.recv(_RECV_BATCH):
            self._on_datagram(pkt, now)
        now = prov.now_ns()
        self._dirty = False
        settled = self._can_settle
        for qp in self._qp_list:
            w = qp._wake_at
            if qp._touched or (w is not None and now >= w):
                qp._touched = False
                qp._tick(now)
                w = qp._wake_at = qp._next_deadline()
            if w is not None and w <= now:
                settled = False
        self._settled_ns = now if settled and not self._dirty else -1

    def next_deadline(self) -> int | None:
        """The earliest time a QP needs a pass. ``exact_at`` is then the
        earliest paced send, a time to meet without the kernel's timer
        overshoot (see :func:`wait_exactly`), or None; every other deadline is
        a timer that may run late."""
        best = None
        exact = None
        for qp in self._qp_list:
            if qp._touched:
                best = exact = 0
                continue
            d = qp._wake_at
            if d is not None and (best is None or d < best):
                best = d
            e = qp._exact_at
            if e is not None and (exact is None or e < exact):
                exact = e
        self.exact_at = exact
        return best

    def run(self, until: Callable[[], bool] | None = None, timeout: float | None = None) -> bool:
        """Make progress until ``until()`` is true (returns True) or ``timeout`` seconds
        pass (returns False). Without either, returns after one pass."""
        end = None if timeout is None else self.now_ns() + int(timeout * 1e9)
        while True:
            self.progress()
            if until is not None and until():
                return True
            if until is None and end is None:
                return False
            now = self.now_ns()
            if end is not None and now >= end:
                return False
            dl = self.next_deadline()
            if end is not None and (dl is None or dl > end):
                dl = end
            if dl is None or dl > now:
                self.provider.wait(dl, exact=wait_exactly(dl, self.exact_at))



def connect_pair(qa: QP, qb: QP, *, psn_a: int = 0, psn_b: int = 0, **attrs) -> None:
    """Bring two QPs of this process to RTS towards each other (tests, one-host
    setups). ``psn_a`` is the first PSN ``qa`` sends; ``attrs`` apply to both
    (e.g. path_mtu)."""
    port_a = getattr(qa.ctx.provider, "port", ROCE_UDP_PORT)
    port_b = getattr(qb.ctx.provider, "port", ROCE_UDP_PORT)
    for q, peer, sq, rq, dport in ((qa, qb, psn_a, psn_b, port_b), (qb, qa, psn_b, psn_a, port_a)):
        q.modify(state=QPState.INIT)
        q.modify(state=QPState.RTR, dest_ip=peer.ctx.local_ip, dest_qp_num=peer.qp_num,
                 dest_port=dport, rq_psn=rq, **attrs)
        q.modify(state=QPState.RTS, sq_psn=sq)
