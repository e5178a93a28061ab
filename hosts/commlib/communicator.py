"""Communicators and ring collectives over the RoCE transport (hosts.roce).

A `Communicator` is one rank of a job: `size` ranks in a ring, `channels`
parallel rings. Per channel a rank has two RC QPs: `right` sends the ring's data
to rank+1, `left` receives rank-1's data (and returns its ACKs). Connection data
(QPN, PSN, buffer address and rkey) is exchanged out of band (`rendezvous`).

Each rank registers two buffers: `work` (the collective's data, reduced in
place) and `staging` (where ReduceScatter pieces land before they are reduced),
each with two halves of `max_bytes` that consecutive collectives alternate
between (a left neighbour can be at most one collective ahead). Piece (channel
c, chunk j) has the same offset in both and in the peers' buffers, so the
sender computes the remote address itself. Every piece a step moves is written
exactly once per collective, and a ring neighbour only writes a chunk after
this rank's last use of it, so no step overwrites data still needed.

Each ring step of each channel is ONE RDMA WRITE_WITH_IMM (the immediate says
which collective and step it was, so the receiver knows the step's data is
complete). Before posting it the QPs are retagged: UDP source port
`tag_sport(step)` (hosts.roce.constants) and the job id in BTH byte 4. A step
ends when its write is acknowledged and the step's data from the left has
arrived (and been reduced); only then does the next step start. Waiting for the
acknowledgement also guarantees that no retransmission of step s leaves with
step s+1's tag.

Step numbers are per communicator and keep counting across collectives
(modulo 2**14 on the wire), so a step of the next collective never looks older
than a lagging step of the previous one.

PSN as progress (``step_psn_origin=True``, for Symphony switches; see
switches/p4/README.md): every step's write starts at PSN 0, so a packet's PSN
is its position in the step. An RC QP's PSNs run on across messages, so each
channel and direction has L = size + k QPs ("lanes"), k = max(1, size - 1);
step t uses lane t mod L, and a lane is reconnected with PSN 0 before its
next use, with the tag of the step it carries next (rdma_rxe fixes a QP's
UDP source port at RTR). The sender reconnects its end once its write is
acknowledged. The receiver reconnects its end of step t's lane only when
step t + k's data arrives: the left neighbour posts step t + 1 after step t's
write was acknowledged, so no retransmission of step t can follow. Until
then the lane keeps its state and answers a retransmission of step t's
tail (its final ACK was lost) with an ACK; a lane reconnected as soon as
step t arrived would expect PSN 0 again, ignore the retransmission and
stall the ring. Waiting k steps rather than one also lets copies of step t
that are still in the network drain first: a switch with priority queues
(Symphony's PQ scheme) can hold a first copy of step t's packets while
their retransmission overtakes it and completes the step, and a copy of
its first packet reaching a lane already reconnected to PSN 0 would start
a stale write there (seen as an AllReduce that was not bit-exact). Reuse is
safe even where the NIC acknowledges a write before the receiver's software
has seen it (rdma_rxe, in the kernel): a rank posts step s only after it
took step s - 1's data from its left neighbour, so around the ring, this
rank's post of step t + L follows its right neighbour's post of step
t + L - (size - 1), which followed that neighbour taking step t + L - size =
t + k, which reconnected its end of step t's lane. With size + 1 lanes
that held only where the receiver's software sends the acknowledgement
(the udp provider); on rdma_rxe a sender could reach a lane whose
receiving end was still connected for its previous step, which takes the
new step's first packets for duplicates (go-back retransmissions, timeouts).

Progress is explicit: `start_*` returns a `CollectiveOp` whose `progress()`
polls completions and posts what is ready (drive several ranks from one loop,
e.g. a simulated wire); `all_reduce`/`reduce_scatter`/`all_gather` run the
engine until done. `reduce` and `broadcast` are pipelined chains on the same
ring (hosts/commlib/schedule.py); `barrier` is an AllReduce of one element,
as NCCL's.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypedDict

import numpy as np

from hosts.commlib.reduce import ReduceOp, check_dtype, reduce_into
from hosts.commlib.rendezvous import Rendezvous
from hosts.commlib.schedule import (
    Collective,
    channel_chunks,
    chunk_count,
    num_steps,
    ring_steps,
    split,
)
from hosts.roce.constants import JOB_ID_MAX, PSN_MASK, ROCE_UDP_PORT, TAG_STEP_MASK, tag_sport
from hosts.roce.rate import Pacer, RateController
from hosts.roce.verbs import (
    QP,
    Access,
    Context,
    QPAttrs,
    QPState,
    RecvWR,
    SendWR,
    WCOpcode,
    WCStatus,
    WROpcode,
    payload_buffer,
)

if TYPE_CHECKING:
    from typing import Unpack

__all__ = ["Communicator", "CollectiveOp", "CommError", "EventSink", "RankInfo",
           "ChannelInfo", "Region", "RingOptions", "JobRingOptions", "CommOptions"]

EventSink = Callable[[dict[str, Any]], None]


class Region(TypedDict):
    """A registered buffer a peer writes to."""

    addr: int
    rkey: int


class ChannelInfo(TypedDict):
    """One channel's QPs (lane 0's QPN and the QPNs of every lane) and initial PSNs."""

    right_qpn: int
    right_psn: int
    left_qpn: int
    left_psn: int
    right_lanes: list[int]
    left_lanes: list[int]


class RankInfo(TypedDict):
    """What peers need to connect to a rank (``Communicator.local_info``, JSON)."""

    rank: int
    ip: str
    port: int
    work: Region
    staging: Region
    max_bytes: int
    channels: list[ChannelInfo]


class _Peer(TypedDict):
    """The far end of one lane's QP."""

    ip: str
    port: int
    qpn: int
    rq_psn: int
    sq_psn: int


class RingOptions(TypedDict, total=False):
    """``Communicator``'s keyword options that both dimensions of a 2D ring
    (hosts.commlib.hierarchical) take as given."""

    channels: int
    rate_controller_factory: Callable[[], RateController] | None
    pacer_factory: Callable[[], Pacer | None] | None
    path_mtu: int | None
    psn_base: int
    timeout_s: float
    step_psn_origin: bool
    phantom: bool
    step_overhead_ns: int


class JobRingOptions(RingOptions, total=False):
    """The keyword options of a job's ring, 1D or 2D (``make_ring``)."""

    max_bytes: int
    event_sink: EventSink | None
    step_base: int


class CommOptions(JobRingOptions, total=False):
    """All of ``Communicator``'s keyword options (as ``Communicator.init`` passes them on)."""

    wire_step: Callable[[int], int] | None

_RECV_DEPTH = 64  # receive WQEs kept posted per left QP (one per incoming step)


class CommError(RuntimeError):
    pass


def _same_step(step: int) -> int:
    return step


def _imm(seq: int, step: int) -> int:
    return ((seq & 0xFFFF) << 16) | (step & 0xFFFF)


class Communicator:
    """One rank of a ring communicator."""

    def __init__(
        self,
        ctx: Context,
        rank: int,
        size: int,
        job_id: int,
        *,
        channels: int = 1,
        max_bytes: int = 1 << 20,
        event_sink: EventSink | None = None,
        rate_controller_factory: Callable[[], RateController] | None = None,
        pacer_factory: Callable[[], Pacer | None] | None = None,
        path_mtu: int | None = None,
        psn_base: int = 0,
        step_base: int = 0,
        timeout_s: float = 60.0,
        step_psn_origin: bool = False,
        phantom: bool = False,
        step_overhead_ns: int = 0,
        wire_step: Callable[[int], int] | None = None,
    ) -> None:
        if not 0 <= rank < size:
            raise ValueError(f"rank {rank} out of range for size {size}")
        if not 0 <= job_id <= JOB_ID_MAX:
            raise ValueError("job_id must fit BTH's 8-bit field")
        if channels < 1:
            raise ValueError("channels must be >= 1")
        self.ctx = ctx
        self.rank, self.size, self.job_id, self.channels = rank, size, job_id, channels
        self.max_bytes = max_bytes
        self.event_sink = event_sink
        self.timeout_s = timeout_s
        self.path_mtu = path_mtu
        self.step_counter = step_base  # this communicator's next step (unmasked)
        # Its steps' numbers on the wire: the same by default; a ring that is
        # one dimension of a 2D ring (hosts.commlib.hierarchical) numbers its
        # steps among the other dimension's, so the job's steps count on as
        # one sequence. Lanes follow this communicator's own steps.
        self.wire_step: Callable[[int], int] = wire_step or _same_step
        self.seq = 0  # collectives started so far
        self.pd = ctx.alloc_pd()
        self.cq = ctx.create_cq()
        access = Access.LOCAL_WRITE | Access.REMOTE_WRITE
        # Phantom payloads: the same packets, steps and timing, but no data
        # kept. The buffers are anonymous memory that is never written (their
        # pages stay unallocated; reads see zeros), what arrives is discarded,
        # nothing is reduced and there is no result to check. For runs at a
        # scale where every rank's real buffers would not fit in memory.
        self.phantom = phantom
        # The host library's own time per ring step (e.g. NCCL's per-step
        # latency): each step's write is posted this long after the step became
        # ready (the QP holds it: hosts.roce.verbs.QP.post_send's delay_ns).
        if step_overhead_ns < 0:
            raise ValueError("step_overhead_ns must be >= 0")
        self.step_overhead_ns = step_overhead_ns
        # Two halves, used by alternate collectives: a neighbour that already
        # finished collective k may write k+1's data while we still finish k.
        buffer = payload_buffer(phantom)
        self.work = buffer(2 * max(1, max_bytes))
        self.staging = buffer(2 * max(1, max_bytes))
        self.work_mr = self.pd.reg_mr(self.work, access)
        self.staging_mr = self.pd.reg_mr(self.staging, access)
        if phantom:
            self.work_mr.discard_writes = self.staging_mr.discard_writes = True
        self.step_psn_origin = step_psn_origin
        # lanes and the receiver's reconnect lag (module docstring)
        self._reconnect_lag = max(1, size - 1)
        self.lanes = size + self._reconnect_lag if step_psn_origin else 1
        # right[c][lane] sends to rank+1, left[c][lane] receives from rank-1.
        self.right: list[list[QP]] = []
        self.left: list[list[QP]] = []
        self._psn: list[tuple[int, int]] = []
        sport = tag_sport(self.wire_step(step_base))
        for c in range(channels):
            self.right.append([
                self.pd.create_qp(
                    self.cq,
                    self.cq,
                    rate_controller=rate_controller_factory() if rate_controller_factory else None,
                    pacer=pacer_factory() if pacer_factory else None,
                    sport=sport,
                    job_id=job_id,
                )
                for _ in range(self.lanes)
            ])
            self.left.append([self.pd.create_qp(self.cq, self.cq, sport=sport, job_id=job_id)
                              for _ in range(self.lanes)])
            base = 0 if step_psn_origin else (psn_base + 2 * c) & PSN_MASK
            self._psn.append((base, 0 if step_psn_origin else (base + 1) & PSN_MASK))
        self._left_lane = {qp.qp_num: (c, lane) for c, qps in enumerate(self.left)
                           for lane, qp in enumerate(qps)}
        self._right_lane = {qp.qp_num: (c, lane) for c, qps in enumerate(self.right)
                            for lane, qp in enumerate(qps)}
        self._peers: dict[tuple[int, int, str], _Peer] = {}
        # (seq16, channel, step) -> completion time, filled by _poll.
        self._arrived: dict[tuple[int, int, int], int] = {}
        self._sent: dict[tuple[int, int, int], int] = {}
        self._recv_ids = 0
        # channel -> the left lanes of the last steps that arrived, oldest
        # first; the oldest is reconnected once _reconnect_lag later steps
        # have arrived (see the module docstring)
        self._left_used: dict[int, deque[int]] = {}
        # (channel, lane) -> the wire step (unmasked) the lane carries next: a
        # lane is connected with that step's tag, so a QP whose port is fixed
        # at RTR (rdma_rxe) sends each step from its own port
        self._lane_step: dict[tuple[int, int], int] = {}
        self.connected = False
        self._active: CollectiveOp | None = None

    @property
    def rings(self) -> tuple[tuple[str, Communicator], ...]:
        """Itself, unnamed (a 2D ring has two, named: hosts.commlib.hierarchical)."""
        return (("", self),)

    # ---- set-up ----
    def local_info(self) -> RankInfo:
        """What peers need to connect to this rank (JSON-able)."""
        return {
            "rank": self.rank,
            "ip": self.ctx.local_ip,
            "port": getattr(self.ctx.provider, "port", ROCE_UDP_PORT),
            "work": {"addr": self.work_mr.addr, "rkey": self.work_mr.rkey},
            "staging": {"addr": self.staging_mr.addr, "rkey": self.staging_mr.rkey},
            "max_bytes": self.max_bytes,
            "channels": [
                {
                    "right_qpn": self.right[c][0].qp_num,
                    "right_psn": self._psn[c][0],
                    "left_qpn": self.left[c][0].qp_num,
                    "left_psn": self._psn[c][1],
                    "right_lanes": [qp.qp_num for qp in self.right[c]],
                    "left_lanes": [qp.qp_num for qp in self.left[c]],
                }
                for c in range(self.channels)
            ],
        }

    def connect(self, infos: list[RankInfo]) -> None:
        """Bring every QP to RTS given all ranks' `local_info()`, in rank order."""
        n, r = self.size, self.rank
        if len(infos) != n or any(int(i["rank"]) != k for k, i in enumerate(infos)):
            raise CommError("connect needs every rank's info, in rank order")
        if any(len(i["channels"]) != self.channels for i in infos):
            raise CommError("ranks disagree on the number of channels")
        if n == 1:
            self.connected = True
            return
        right, left = infos[(r + 1) % n], infos[(r - 1) % n]
        self._right_info = right
        if self.lanes > 1:
            w = self.step_counter
            self._lane_step = {(c, lane): w + (lane - w) % self.lanes
                               for c in range(self.channels) for lane in range(self.lanes)}
        self.remote_max_bytes = int(right["max_bytes"])
        for c in range(self.channels):
            mine_r, mine_l = self._psn[c]
            rc, lc = right["channels"][c], left["channels"][c]
            r_lanes = rc.get("left_lanes", [rc["left_qpn"]])
            l_lanes = lc.get("right_lanes", [lc["right_qpn"]])
            if len(r_lanes) != self.lanes or len(l_lanes) != self.lanes:
                raise CommError("ranks disagree on step_psn_origin (lanes per channel)")
            for lane in range(self.lanes):
                self._peers[(c, lane, "right")] = {
                    "ip": right["ip"], "port": int(right.get("port", ROCE_UDP_PORT)),
                    "qpn": int(r_lanes[lane]), "rq_psn": int(rc["left_psn"]), "sq_psn": mine_r}
                self._peers[(c, lane, "left")] = {
                    "ip": left["ip"], "port": int(left.get("port", ROCE_UDP_PORT)),
                    "qpn": int(l_lanes[lane]), "rq_psn": int(lc["right_psn"]), "sq_psn": mine_l}
                self._connect(c, lane, "right")
                self._connect(c, lane, "left")
        self.connected = True

    def _connect(self, c: int, lane: int, side: str) -> None:
        """Bring one lane's QP (from any state) to RTS with its initial PSNs; a
        receiving QP gets its receive WQEs."""
        qp = (self.right if side == "right" else self.left)[c][lane]
        peer = self._peers[(c, lane, side)]
        if qp.state is not QPState.RESET:
            qp.modify(state=QPState.RESET)
        qp.modify(state=QPState.INIT)
        attrs: QPAttrs = {
            "state": QPState.RTR,
            "dest_ip": peer["ip"],
            "dest_qp_num": peer["qpn"],
            "dest_port": peer["port"],
            "rq_psn": peer["rq_psn"],
        }
        if self.path_mtu is not None:
            attrs["path_mtu"] = self.path_mtu
        if self.lanes > 1:
            # the next step's tag from RTR on; a sending lane is reconnected after
            # its write, so its next step is known (a receiving lane's ACKs may
            # carry an older tag until this rank posts that step)
            attrs["sport"] = tag_sport(self.wire_step(self._lane_step[(c, lane)]))
        qp.modify(**attrs)
        qp.modify(state=QPState.RTS, sq_psn=peer["sq_psn"])
        if side == "left":
            for _ in range(_RECV_DEPTH if self.lanes == 1 else 1):
                self._post_recv(qp)

    @classmethod
    def init(
        cls, ctx: Context, rank: int, size: int, job_id: int, rendezvous: Rendezvous,
        **kw: Unpack[CommOptions],
    ) -> Communicator:
        """Create, exchange connection data through `rendezvous`, connect."""
        comm = cls(ctx, rank, size, job_id, **kw)
        infos = rendezvous.allgather(comm.local_info(), tag=f"commlib-job{job_id}")
        comm.connect(infos)
        return comm

    def close(self) -> None:
        for qps in self.right + self.left:
            for qp in qps:
                qp.destroy()

    # ---- completions ----
    def _post_recv(self, qp: QP) -> None:
        self._recv_ids += 1
        qp.post_recv(RecvWR(wr_id=self._recv_ids))

    def _poll(self) -> None:
        for wc in self.cq.poll(1024):
            if wc.status != WCStatus.SUCCESS:
                raise CommError(
                    f"rank {self.rank}: work request {wc.wr_id:#x} failed: {wc.status.name}"
                )
            if wc.opcode == WCOpcode.RECV_RDMA_WITH_IMM:
                c, lane = self._left_lane[wc.qp_num]
                imm = wc.imm_data or 0
                self._arrived[(imm >> 16, c, imm & 0xFFFF)] = wc.timestamp_ns
                if self.lanes > 1:
                    # an earlier step's lane can now start again at PSN 0
                    used = self._left_used.setdefault(c, deque())
                    if len(used) >= self._reconnect_lag:
                        self._connect(c, used.popleft(), "left")
                    used.append(lane)
                else:
                    self._post_recv(self.left[c][0])
            elif wc.opcode == WCOpcode.RDMA_WRITE:
                seq, c, step = wc.wr_id >> 32, (wc.wr_id >> 16) & 0xFFFF, wc.wr_id & 0xFFFF
                self._sent[(seq & 0xFFFF, c, step)] = wc.timestamp_ns
                if self.lanes > 1:
                    self._connect(*self._right_lane[wc.qp_num], "right")

    def _emit(self, ev: dict[str, Any]) -> None:
        if self.event_sink is not None:
            self.event_sink(ev)

    # ---- collectives ----
    def start_all_reduce(self, x: np.ndarray, op: ReduceOp = ReduceOp.SUM) -> CollectiveOp:
        return self._start(Collective.ALL_REDUCE, x, op)

    def start_reduce_scatter(self, x: np.ndarray, op: ReduceOp = ReduceOp.SUM) -> CollectiveOp:
        return self._start(Collective.REDUCE_SCATTER, x, op)

    def start_all_gather(self, x: np.ndarray) -> CollectiveOp:
        return self._start(Collective.ALL_GATHER, x, ReduceOp.SUM)

    def start_reduce(self, x: np.ndarray, root: int = 0,
                     op: ReduceOp = ReduceOp.SUM) -> CollectiveOp:
        return self._start(Collective.REDUCE, x, op, root)

    def start_broadcast(self, x: np.ndarray, root: int = 0) -> CollectiveOp:
        return self._start(Collective.BROADCAST, x, ReduceOp.SUM, root)

    def start_barrier(self) -> CollectiveOp:
        """A Barrier as NCCL runs one: an AllReduce of a single element."""
        return self._start(Collective.ALL_REDUCE, np.zeros(1, np.int32), ReduceOp.SUM)

    def all_reduce(self, x: np.ndarray, op: ReduceOp = ReduceOp.SUM) -> np.ndarray:
        """Element-wise reduction of `x` over all ranks; a new array."""
        return self.wait(self.start_all_reduce(x, op))

    def reduce(self, x: np.ndarray, root: int = 0,
               op: ReduceOp = ReduceOp.SUM) -> np.ndarray | None:
        """The reduction of `x` at `root` (None on the other ranks)."""
        out = self.wait(self.start_reduce(x, root, op))
        return out if self.rank == root else None

    def broadcast(self, x: np.ndarray, root: int = 0) -> np.ndarray:
        """`root`'s `x` on every rank (others pass an array of the same shape/dtype)."""
        return self.wait(self.start_broadcast(x, root))

    def barrier(self) -> None:
        self.wait(self.start_barrier())

    def reduce_scatter(self, x: np.ndarray, op: ReduceOp = ReduceOp.SUM) -> np.ndarray:
        """Chunk `rank` (of `size` near-equal chunks) of the reduction of `x`."""
        return self.wait(self.start_reduce_scatter(x, op))

    def all_gather(self, x: np.ndarray) -> np.ndarray:
        """Every rank's `x` (all the same length), concatenated in rank order."""
        return self.wait(self.start_all_gather(x))

    def wait(self, op: CollectiveOp) -> np.ndarray:
        if not self.ctx.engine.run(until=op.progress, timeout=self.timeout_s):
            raise CommError(
                f"rank {self.rank}: {op.kind.value} #{op.seq} timed out at steps "
                f"{[ch.i for ch in op.chans]}"
            )
        return op.result()

    def _start(self, kind: Collective, x: np.ndarray, op: ReduceOp,
               root: int = 0) -> CollectiveOp:
        if not self.connected:
            raise CommError("communicator is not connected")
        if self._active is not None and not self._active.done:
            raise CommError("a collective is already in progress on this communicator")
        if not 0 <= root < self.size:
            raise ValueError(f"root {root} out of range for size {self.size}")
        o = CollectiveOp(self, kind, x, op, root)
        self._active = o
        o.progress()        # its first step leaves now, not at the caller's next poll
        return o


class _Chan:
    __slots__ = ("i", "posted", "t_start")

    def __init__(self) -> None:
        self.i = 0  # index of the step in progress
        self.posted = False
        self.t_start = 0


class CollectiveOp:
    """One collective in progress on one rank; `progress()` -> True when done.
    On a phantom communicator ``x`` gives only the size and type (e.g. a
    zero-strided ``np.broadcast_to`` view, which costs no memory)."""

    def __init__(self, comm: Communicator, kind: Collective, x: np.ndarray, op: ReduceOp,
                 root: int = 0) -> None:
        self.comm, self.kind, self.op, self.root = comm, kind, ReduceOp(op), root
        x = x.reshape(-1) if comm.phantom else np.ascontiguousarray(x).reshape(-1)
        self.dtype = check_dtype(x.dtype)
        n = comm.size
        self.in_count = x.size
        total = x.size * n if kind is Collective.ALL_GATHER else x.size
        nbytes = total * self.dtype.itemsize
        limit = min(comm.max_bytes, getattr(comm, "remote_max_bytes", comm.max_bytes))
        if nbytes > limit:
            raise CommError(f"{kind.value} of {nbytes} bytes exceeds max_bytes={limit}")
        self.count = total
        self.layout = channel_chunks(total, chunk_count(kind, n), comm.channels)
        self.plan = ring_steps(kind, comm.rank, n, root)
        self.seq = comm.seq
        comm.seq += 1
        self.step_base = comm.step_counter
        comm.step_counter += num_steps(kind, n)
        self.half = self.seq & 1
        base = self.half * comm.max_bytes
        self.base = base
        self.work = np.frombuffer(comm.work, dtype=self.dtype, count=total, offset=base)
        self.staging = np.frombuffer(comm.staging, dtype=self.dtype, count=total, offset=base)
        if comm.phantom:
            pass                # nothing to hold: the buffers stay untouched
        elif kind is Collective.ALL_GATHER:
            off, ln = split(total, n)[comm.rank]
            self.work[off : off + ln] = x
        elif kind is Collective.BROADCAST:
            # only the root's buffer is its input: the others' fills from the
            # left, whose first pieces may already have landed
            if comm.rank == root:
                self.work[:] = x
        else:
            self.work[:] = x
        self.chans = [_Chan() for _ in range(comm.channels)]
        self.done = False
        self.t_start = comm.ctx.engine.now_ns()
        self.t_end: int | None = None
        comm._emit(self._base("collective_start") | {"t_ns": self.t_start, "bytes": nbytes})

    def _base(self, event: str) -> dict[str, Any]:
        c = self.comm
        return {
            "event": event,
            "job_id": c.job_id,
            "rank": c.rank,
            "size": c.size,
            "collective": self.kind.value,
            "seq": self.seq,
        }

    def tag_step(self, i: int) -> int:
        """Step number carried on the wire for local step index i."""
        return self.comm.wire_step(self.step_base + i) & TAG_STEP_MASK

    def progress(self) -> bool:
        if self.done:
            return True
        comm = self.comm
        comm._poll()
        seq16 = self.seq & 0xFFFF
        finished = 0
        for c, ch in enumerate(self.chans):
            while ch.i < len(self.plan):
                st = self.plan[ch.i]
                if not ch.posted:
                    self._post(c, ch, st.step)
                key = (seq16, c, st.step)
                if key not in comm._sent or key not in comm._arrived:
                    break
                t_sent = comm._sent.pop(key)
                t_recv = comm._arrived.pop(key)
                off, ln = (0, 0) if st.recv_chunk is None else self.layout[c][st.recv_chunk]
                if st.reduces and ln and not comm.phantom:
                    reduce_into(self.work[off : off + ln], self.staging[off : off + ln], self.op)
                now = comm.ctx.engine.now_ns()
                comm._emit(
                    self._base("step_end")
                    | {
                        "channel": c,
                        "step": st.step,
                        "tag_step": self.tag_step(st.step),
                        "phase": st.phase.value,
                        "t_ns": now,
                        "t_start_ns": ch.t_start,
                        "send_done_ns": t_sent,
                        "recv_done_ns": t_recv,
                    }
                )
                ch.i += 1
                ch.posted = False
            if ch.i >= len(self.plan):
                finished += 1
        if finished == len(self.chans):
            self.done = True
            self.t_end = comm.ctx.engine.now_ns()
            comm._emit(
                self._base("collective_end") | {"t_ns": self.t_end, "t_start_ns": self.t_start}
            )
        return self.done

    def _post(self, c: int, ch: _Chan, step: int) -> None:
        comm = self.comm
        st = self.plan[step]
        tag = tag_sport(self.tag_step(step))
        lane = (self.step_base + step) % comm.lanes
        if comm.lanes > 1:
            comm._lane_step[(c, lane)] = self.step_base + step + comm.lanes
        r_qp, l_qp = comm.right[c][lane], comm.left[c][lane]
        if r_qp.sport != tag:
            r_qp.modify(sport=tag)
        if l_qp.sport != tag:
            l_qp.modify(sport=tag)  # our ACKs for this step carry the same tag
        # a chain step with nothing to pass on still sends an empty write: the
        # right neighbour's step waits for it
        off, ln = (0, 0) if st.send_chunk is None else self.layout[c][st.send_chunk]
        isz = self.dtype.itemsize
        peer = comm._right_info
        region = peer["staging"] if st.reduces else peer["work"]
        wr = SendWR(
            wr_id=((self.seq & 0xFFFF) << 32) | (c << 16) | step,
            opcode=WROpcode.RDMA_WRITE_WITH_IMM,
            sge=comm.work_mr.sge(self.base + off * isz, ln * isz) if ln else None,
            remote_addr=int(region["addr"]) + self.half * comm.remote_max_bytes + off * isz,
            rkey=int(region["rkey"]),
            imm_data=_imm(self.seq, step),
        )
        ch.t_start = comm.ctx.engine.now_ns()
        ch.posted = True
        comm._emit(
            self._base("step_start")
            | {
                "channel": c,
                "step": step,
                "tag_step": self.tag_step(step),
                "phase": st.phase.value,
                "t_ns": ch.t_start,
                "bytes": ln * isz,
                "send_chunk": st.send_chunk,
                "recv_chunk": st.recv_chunk,
            }
        )
        r_qp.post_send(wr, comm.step_overhead_ns)

    def result(self) -> np.ndarray:
        if not self.done:
            raise CommError("collective not finished")
        if self.comm.phantom:
            raise CommError("a collective of phantom payloads has no result")
        if self.kind is Collective.REDUCE_SCATTER:
            off, ln = split(self.count, self.comm.size)[self.comm.rank]
            return self.work[off : off + ln].copy()
        return self.work.copy()
