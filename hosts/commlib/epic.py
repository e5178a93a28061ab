"""CommLib collectives over an EPIC Mode-II switch (switches/p4/EPIC.md).

A communicator of N ranks uses 2N+1 switch groups, one per primitive and
root (the paper's count: after a Reduce or a Broadcast the ranks' send and
receive PSNs no longer move together, so each needs QPs of its own). Group
``endpoint.gid + i`` with QPN ``endpoint.qpn + i`` (``group_index``) is

- i = 0: AllReduce (and Barrier): every rank sends, the switch adds the
  packets of equal PSN and multicasts the sum back to every rank;
- i = 1 + r: Reduce to root r: every rank sends, the sum goes to r alone,
  and r's ACKs go to every rank;
- i = 1 + N + r: Broadcast from root r: r sends, the switch copies each
  packet to the other ranks and sends r the oldest PSN they all ACKed.

Each rank holds one RC QP per group to the switch's endpoint (switch IP +
the group's QPN). Every collective is one or more *rounds* on one group: a
SEND with immediate (the announcement: op, root, group; payload = size),
then the data as SENDs of whole packets of ``ELEMS`` big-endian int32
values (path MTU ``PACKET_BYTES``). Only standard verbs are used (SEND,
SEND_WITH_IMM, RECV), so the code runs on any provider (udp, sim, rxe).

Flow control: at most two SEND work requests of ``chunk_pkts`` packets each
are outstanding, so a rank never has more than the switch's window W
(``window``, packets per rank in flight: ``1 << EPIC_WINDOW_LOG2`` of the
program the switch was compiled with, ``WINDOW`` by default) unacknowledged:
a NIC needs no special window for the switch's 2W slots. Because the switch
reflects the rank's own ACK of result p as the ACK of its upload p, a SEND
completes only when its sums came back.

Collectives (same signatures as the ring ``Communicator`` where it has them):

- ``all_reduce(x, op=SUM)``: int32 sums with int32 saturation (exact unless
  a sum leaves int32); float32/float64 as fixed point: a first round agrees
  on ``Σ_ranks max|x|`` (a ladder of scaled ceilings, one packet), then
  ``x * f`` with ``f = 0x7fffff80 / Σ max|x|`` is added as int32 and divided
  back. Error per element <= ``size / (2 f)`` (+ the float rounding of the
  division); ``fixed_point_bound(size, factor)`` gives it.
- ``reduce(x, root, op)``: one round on root's Reduce group (floats: the
  fixed-point agreement first, on the AllReduce group); the root returns the
  sum, the others None.
- ``broadcast(x, root)``: the root's bytes as int32 words on its Broadcast
  group: exact for any dtype.
- ``reduce_scatter(x, op)``: a Reduce of chunk i to rank i, for i = 0..N-1
  in turn (the paper's sequence).
- ``all_gather(x)``: a Broadcast from rank i of its ``x``, for i = 0..N-1 in
  turn (the paper's sequence): exact.
- ``barrier()``: an announcement alone on the AllReduce group (the switch
  releases it when every rank sent it).
"""

from __future__ import annotations

from collections.abc import Callable, Generator, Sequence
from dataclasses import dataclass
from enum import IntEnum
from typing import Any, TypedDict

import numpy as np

from hosts.commlib.communicator import CommError, EventSink
from hosts.commlib.reduce import ReduceOp
from hosts.commlib.schedule import split
from hosts.roce.constants import PSN_MASK, QPN_MASK, ROCE_UDP_PORT
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

__all__ = [
    "ELEMS", "PACKET_BYTES", "WINDOW", "MAX_WINDOW", "MAX_GROUPS", "MAX_RANKS",
    "FIXED_POINT_NUMERATOR", "check_window",
    "ANNOUNCE_BYTES", "EpicRankInfo", "EpicOp", "EpicKind", "EpicEndpoint", "EpicCommunicator", "EpicCollective",
    "group_count", "group_index", "group_kind",
    "announce_imm", "parse_announce_imm", "fixed_point_factor", "fixed_point_bound",
    "ladder_values", "ladder_sum",
]

# The P4 program's compile-time constants (switches/p4/epic.p4; a test keeps them equal).
ELEMS = 64                        # EPIC_ELEMS: int32 values per data packet
PACKET_BYTES = 4 * ELEMS          # the QP's path MTU
WINDOW = 32                       # 1 << EPIC_WINDOW_LOG2 (its default): packets in flight per rank
# The largest window a switch can have: its 2W slots per group are indexed by
# PSN mod 2W, which must divide the 24-bit PSN space so that PSN wrap-around
# keeps every rank's packet p in the same slot.
MAX_WINDOW = 1 << 23
MAX_GROUPS = 128                  # 1 << EPIC_MAX_GROUPS_LOG2
MAX_RANKS = 32                    # bits of a slot's arrival bitmap
ANNOUNCE_BYTES = 8                # the announcement's payload: size, 64-bit big-endian
FIXED_POINT_NUMERATOR = 0x7FFFFF80
INT32_MIN, INT32_MAX = -(2**31), 2**31 - 1

# Fixed-point agreement: element j of the ladder packet carries
# ceil(max|x| * 2**(LADDER_TOP - LADDER_STEP * j)), capped at LADDER_CAP so
# that the sum over up to MAX_RANKS ranks cannot saturate.
LADDER_TOP = 60
LADDER_STEP = 2
LADDER_CAP = 2**26


class EpicRankInfo(TypedDict):
    """What the controller needs to add a rank to its groups
    (``EpicCommunicator.local_info``, JSON): its QPN on every group."""

    rank: int
    ip: str
    qpn: int
    qpns: list[int]


class EpicOp(IntEnum):
    """Announcement operations (ImmDt bits 31..24; EPIC_OP_* in epic.p4)."""

    ALLREDUCE = 1
    REDUCE = 2
    BROADCAST = 3
    BARRIER = 4
    REDUCE_SCATTER = 5
    ALL_GATHER = 6


class EpicKind(IntEnum):
    """What a switch group runs (EPIC_KIND_* in epic.p4)."""

    ALLREDUCE = 0
    REDUCE = 1
    BROADCAST = 2


# The group each announced operation runs on.
_OP_KIND = {EpicOp.ALLREDUCE: EpicKind.ALLREDUCE, EpicOp.BARRIER: EpicKind.ALLREDUCE,
            EpicOp.REDUCE: EpicKind.REDUCE, EpicOp.REDUCE_SCATTER: EpicKind.REDUCE,
            EpicOp.BROADCAST: EpicKind.BROADCAST, EpicOp.ALL_GATHER: EpicKind.BROADCAST}


def check_window(window: int) -> int:
    """``window`` if it can be a switch's window (a power of two, 2..MAX_WINDOW:
    ``1 << EPIC_WINDOW_LOG2`` for EPIC_WINDOW_LOG2 1..23); ValueError otherwise."""
    if (isinstance(window, bool) or not isinstance(window, int)
            or not 2 <= window <= MAX_WINDOW or window & (window - 1)):
        raise ValueError(f"EPIC window {window!r} must be a power of two from 2 to "
                         f"{MAX_WINDOW} packets (1 << EPIC_WINDOW_LOG2 of the switch's "
                         "program, EPIC_WINDOW_LOG2 1..23)")
    return window


def group_count(size: int) -> int:
    """Switch groups a communicator of ``size`` ranks uses: 2N+1."""
    return 2 * size + 1


def group_index(kind: EpicKind, root: int, size: int) -> int:
    """Offset of a primitive's group from the communicator's first group."""
    if kind is EpicKind.ALLREDUCE:
        return 0
    return 1 + root + (size if kind is EpicKind.BROADCAST else 0)


def group_kind(index: int, size: int) -> tuple[EpicKind, int]:
    """(kind, root) of the group at ``index`` (the inverse of group_index)."""
    if index == 0:
        return EpicKind.ALLREDUCE, 0
    if 1 <= index <= size:
        return EpicKind.REDUCE, index - 1
    if size < index < group_count(size):
        return EpicKind.BROADCAST, index - 1 - size
    raise ValueError(f"group index {index} out of range for {size} ranks")


def announce_imm(op: EpicOp, root: int, gid: int) -> int:
    """ImmDt of an announcement: op << 24 | root << 16 | group."""
    if not 0 <= root < 256 or not 0 <= gid < 0x10000:
        raise ValueError(f"root {root} or group {gid} does not fit the announcement")
    return (int(op) << 24) | (root << 16) | gid


def parse_announce_imm(imm: int) -> tuple[EpicOp, int, int]:
    return EpicOp(imm >> 24), (imm >> 16) & 0xFF, imm & 0xFFFF


@dataclass(frozen=True)
class EpicEndpoint:
    """The switch side of a group: its IP, the group's QPN, the group id, and the
    PSN every QP of the group starts at."""

    switch_ip: str
    qpn: int
    gid: int
    start_psn: int = 0
    port: int = ROCE_UDP_PORT

    def __post_init__(self) -> None:
        if not 0 <= self.gid < MAX_GROUPS:
            raise ValueError(f"group id {self.gid} out of range 0..{MAX_GROUPS - 1}")
        if not 0 < self.qpn <= QPN_MASK:
            raise ValueError(f"endpoint QPN {self.qpn:#x} is not a 24-bit QPN")
        if not 0 <= self.start_psn <= PSN_MASK:
            raise ValueError(f"start PSN {self.start_psn} is not a 24-bit PSN")

    def offset(self, index: int) -> EpicEndpoint:
        """The endpoint of the communicator's group ``index`` (gid and QPN + index)."""
        return EpicEndpoint(self.switch_ip, self.qpn + index, self.gid + index,
                            self.start_psn, self.port)


def ladder_values(max_abs: float) -> np.ndarray:
    """One rank's ladder packet for the fixed-point agreement."""
    shifts = LADDER_TOP - LADDER_STEP * np.arange(ELEMS)
    v = np.ceil(np.float64(max_abs) * np.exp2(shifts.astype(np.float64)))
    return np.minimum(v, LADDER_CAP).astype(np.int32)


def ladder_sum(summed: np.ndarray) -> float:
    """An upper bound of Σ_ranks max|x| from the summed ladder packet (0.0 if all
    ranks had only zeros): the finest rung no rank capped."""
    for j in range(ELEMS):
        s = int(summed[j])
        if s < LADDER_CAP:
            return s / 2.0 ** (LADDER_TOP - LADDER_STEP * j)
    raise CommError("fixed-point agreement failed: every rung saturated")


def fixed_point_factor(sum_max_abs: float) -> float:
    """f = 0x7fffff80 / Σ_ranks max|x| (1.0 if every value is 0)."""
    return FIXED_POINT_NUMERATOR / sum_max_abs if sum_max_abs > 0 else 1.0


def fixed_point_bound(size: int, factor: float) -> float:
    """Largest absolute error of one summed element from fixed-point rounding."""
    return size / (2.0 * factor)


_Round = tuple[EpicOp, int, np.ndarray]          # op, root, int32 words (a rank's own)
# A plan yields rounds and is sent each round's result: the summed (or copied)
# words on ranks that receive them, None on ranks that only send.
_Plan = Generator[_Round, "np.ndarray | None", "np.ndarray | None"]  # (strings: runs on Python 3.9)


class EpicCommunicator:
    """One rank of a group aggregated by an EPIC Mode-II switch."""

    def __init__(
        self,
        ctx: Context,
        rank: int,
        size: int,
        endpoint: EpicEndpoint,
        *,
        max_bytes: int = 1 << 20,
        event_sink: EventSink | None = None,
        rate_controller_factory: Callable[[], RateController] | None = None,
        pacer_factory: Callable[[], Pacer | None] | None = None,
        window: int = WINDOW,
        chunk_pkts: int | None = None,
        timeout_s: float = 60.0,
        job_id: int = 0,
        qp_timeout_ns: int | None = None,
        phantom: bool = False,
        step_overhead_ns: int = 0,
    ) -> None:
        if not 0 < size <= MAX_RANKS:
            raise ValueError(f"group size {size} out of range 1..{MAX_RANKS}")
        if not 0 <= rank < size:
            raise ValueError(f"rank {rank} out of range for size {size}")
        last = endpoint.gid + group_count(size) - 1
        if last >= MAX_GROUPS or endpoint.qpn + group_count(size) - 1 > QPN_MASK:
            raise ValueError(f"{size} ranks need groups {endpoint.gid}..{last} (2N+1); "
                             f"the switch has {MAX_GROUPS}")
        # The switch's window W (packets per rank in flight): two SENDs of
        # chunk_pkts (default W/2) outstanding never exceed it.
        self.window = check_window(window)
        if chunk_pkts is None:
            chunk_pkts = window // 2
        if not 0 < chunk_pkts <= window // 2:
            raise ValueError(f"chunk_pkts must be in 1..{window // 2} (two in flight <= "
                             f"the window {window})")
        if step_overhead_ns < 0:
            raise ValueError("step_overhead_ns must be >= 0")
        self.ctx, self.rank, self.size, self.endpoint = ctx, rank, size, endpoint
        self.max_bytes = max_bytes
        self.event_sink = event_sink
        self.chunk_pkts = chunk_pkts
        self.timeout_s = timeout_s
        self.job_id = job_id
        # A rank's uploads are acknowledged only when every rank has sent them, so
        # its retransmission timer runs while it waits for the slowest rank; each
        # timeout resends what is in flight (the switch drops it as duplicates).
        # None: the context's RTO.
        self.qp_timeout_ns = qp_timeout_ns
        # Phantom payloads (as the ring's, hosts.commlib.communicator): the same
        # packets and timing without the data. The buffers are untouched
        # anonymous memory (the switch adds zeros), what comes back is
        # discarded, and a collective has no result. int32 AllReduce, Reduce,
        # Broadcast, ReduceScatter, AllGather and Barrier; no floats (their
        # fixed-point agreement needs the data).
        self.phantom = phantom
        # The host library's own time per step: each round's first send is
        # posted this long after the round became ready (a ring's per-step
        # overhead, paid once per round here).
        self.step_overhead_ns = step_overhead_ns
        # room for an AllGather of max_bytes, padded to whole packets
        words = -(-max(1, max_bytes) // 4)
        self._cap_words = -(-words // ELEMS) * ELEMS
        self.pd = ctx.alloc_pd()
        self.cq = ctx.create_cq()
        nbytes = ANNOUNCE_BYTES + 4 * self._cap_words
        buffer = payload_buffer(phantom)
        self._send = buffer(nbytes)
        # the receive buffer: one region for the round in progress, then room
        # for the rounds an AllGather posts its receives for in advance
        self._prepost_base = nbytes
        self._recv = buffer(2 * nbytes + size * (ANNOUNCE_BYTES + PACKET_BYTES))
        self._send_mr = self.pd.reg_mr(self._send, Access.LOCAL_WRITE)
        self._recv_mr = self.pd.reg_mr(self._recv, Access.LOCAL_WRITE)
        if phantom:
            self._recv_mr.discard_writes = True
        # one QP per group (group_index); qps[0], the AllReduce group's, is ``qp``
        self.qps = [self.pd.create_qp(
            self.cq, self.cq, job_id=job_id,
            rate_controller=rate_controller_factory() if rate_controller_factory else None,
            pacer=pacer_factory() if pacer_factory else None)
            for _ in range(group_count(size))]
        self.qp = self.qps[0]
        self.connected = False
        self.seq = 0
        self._active: EpicCollective | None = None

    # ---- set-up ----
    def local_info(self) -> EpicRankInfo:
        """What the controller needs to add this rank to the group (JSON-able)."""
        return {"rank": self.rank, "ip": self.ctx.local_ip, "qpn": self.qp.qp_num,
                "qpns": [q.qp_num for q in self.qps]}

    def connect(self) -> None:
        """Connect the QP to the switch endpoint (the controller must have installed
        the group before the first collective)."""
        for i, qp in enumerate(self.qps):
            ep = self.endpoint.offset(i)
            qp.modify(state=QPState.INIT)
            qp.modify(state=QPState.RTR, dest_ip=ep.switch_ip, dest_qp_num=ep.qpn,
                      dest_port=ep.port, rq_psn=ep.start_psn, path_mtu=PACKET_BYTES)
            rts: QPAttrs = {"state": QPState.RTS, "sq_psn": ep.start_psn}
            if self.qp_timeout_ns is not None:
                rts["timeout_ns"] = self.qp_timeout_ns
            qp.modify(**rts)
        self.connected = True

    def close(self) -> None:
        for qp in self.qps:
            qp.destroy()

    def _emit(self, ev: dict[str, Any]) -> None:
        if self.event_sink is not None:
            self.event_sink(ev)

    # ---- collectives ----
    def start_all_reduce(self, x: np.ndarray, op: ReduceOp = ReduceOp.SUM) -> EpicCollective:
        x = self._check(x, op)
        return self._start("all_reduce", x.nbytes, self._plan_sum(EpicOp.ALLREDUCE, 0, x))

    def start_reduce(self, x: np.ndarray, root: int = 0,
                     op: ReduceOp = ReduceOp.SUM) -> EpicCollective:
        x = self._check(x, op)
        self._check_root(root)

        return self._start("reduce", x.nbytes, self._plan_sum(EpicOp.REDUCE, root, x))

    def start_broadcast(self, x: np.ndarray, root: int = 0) -> EpicCollective:
        x = self._check(x, ReduceOp.SUM)
        self._check_root(root)

        def plan() -> _Plan:
            if self.rank == root:
                yield (EpicOp.BROADCAST, root, _as_words(x))
                return x.copy()
            out = yield (EpicOp.BROADCAST, root, np.zeros(x.nbytes // 4, np.int32))
            assert out is not None          # a child receives the root's words
            return _from_words(out, x.dtype, x.size)
        return self._start("broadcast", x.nbytes, plan())

    def start_all_gather(self, x: np.ndarray) -> EpicCollective:
        x = self._check(x, ReduceOp.SUM)

        w = x.nbytes // 4
        # Every rank but the root of a round receives it: all of them post their
        # receives now, since a round's root may start sending before a slower
        # rank has finished the round before (a SEND without a receive posted
        # costs an RNR NAK and the retry delay).
        prepost = [(EpicOp.ALL_GATHER, root, w) for root in range(self.size) if root != self.rank]

        def plan() -> _Plan:
            mine = _as_words(x)
            words = np.zeros(w * self.size, np.int32)
            for root in range(self.size):
                if root == self.rank:
                    yield (EpicOp.ALL_GATHER, root, mine)
                    words[root * w: (root + 1) * w] = mine
                else:
                    out = yield (EpicOp.ALL_GATHER, root, np.zeros(w, np.int32))
                    assert out is not None
                    words[root * w: (root + 1) * w] = out
            return _from_words(words, x.dtype, x.size * self.size)
        return self._start("all_gather", x.nbytes * self.size, plan(), prepost)

    def start_reduce_scatter(self, x: np.ndarray,
                             op: ReduceOp = ReduceOp.SUM) -> EpicCollective:
        x = self._check(x, op)

        def plan() -> _Plan:
            factor = yield from self._plan_factor(x)
            q = self._to_fixed(x, factor)
            mine: np.ndarray | None = None
            for root, (off, ln) in enumerate(split(x.size, self.size)):
                out = yield (EpicOp.REDUCE_SCATTER, root, q[off: off + ln])
                if root == self.rank:
                    mine = out
            assert mine is not None
            return self._from_fixed(mine, x.dtype, factor)
        return self._start("reduce_scatter", x.nbytes, plan())

    def start_barrier(self) -> EpicCollective:
        def plan() -> _Plan:
            yield (EpicOp.BARRIER, 0, np.zeros(0, np.int32))
            return None
        return self._start("barrier", 0, plan())

    def all_reduce(self, x: np.ndarray, op: ReduceOp = ReduceOp.SUM) -> np.ndarray:
        """Element-wise sum of `x` over all ranks; a new array."""
        out = self.wait(self.start_all_reduce(x, op))
        assert out is not None
        return out

    def reduce(self, x: np.ndarray, root: int = 0,
               op: ReduceOp = ReduceOp.SUM) -> np.ndarray | None:
        """The sum at `root` (None on the other ranks)."""
        return self.wait(self.start_reduce(x, root, op))

    def broadcast(self, x: np.ndarray, root: int = 0) -> np.ndarray:
        """`root`'s `x` on every rank (others pass an array of the same shape/dtype)."""
        out = self.wait(self.start_broadcast(x, root))
        assert out is not None
        return out

    def all_gather(self, x: np.ndarray) -> np.ndarray:
        """Every rank's `x` (all the same length), concatenated in rank order."""
        out = self.wait(self.start_all_gather(x))
        assert out is not None
        return out

    def reduce_scatter(self, x: np.ndarray, op: ReduceOp = ReduceOp.SUM) -> np.ndarray:
        """Chunk `rank` (of `size` near-equal chunks) of the sum of `x`."""
        out = self.wait(self.start_reduce_scatter(x, op))
        assert out is not None
        return out

    def barrier(self) -> None:
        self.wait(self.start_barrier())

    def wait(self, op: EpicCollective) -> np.ndarray | None:
        if not self.ctx.engine.run(until=op.progress, timeout=self.timeout_s):
            raise CommError(f"rank {self.rank}: {op.kind} #{op.seq} timed out "
                            f"({op.describe()})")
        return op.result()

    # ---- internals ----
    def _check(self, x: np.ndarray, op: ReduceOp) -> np.ndarray:
        if ReduceOp(op) is not ReduceOp.SUM:
            raise CommError(f"the EPIC switch adds; reduction {ReduceOp(op).value!r} "
                            "is not supported")
        if self.phantom:
            # only the size and type count (e.g. a zero-strided broadcast_to view)
            if x.dtype != np.dtype(np.int32):
                raise TypeError(f"phantom EPIC collectives add int32, not {x.dtype}")
            return x.reshape(-1)
        x = np.ascontiguousarray(x).reshape(-1)
        if x.dtype not in (np.dtype(np.int32), np.dtype(np.float32), np.dtype(np.float64)):
            raise TypeError(f"unsupported dtype {x.dtype} for EPIC collectives "
                            "(supported: int32, float32, float64)")
        return x

    def _check_root(self, root: int) -> None:
        if not 0 <= root < self.size:
            raise ValueError(f"root {root} out of range for size {self.size}")

    def _plan_sum(self, op: EpicOp, root: int, x: np.ndarray) -> _Plan:
        """The sum of ``x`` on op's group (None on ranks that do not receive it)."""
        factor = yield from self._plan_factor(x)
        out = yield (op, root, self._to_fixed(x, factor))
        return None if out is None else self._from_fixed(out, x.dtype, factor)

    def _plan_factor(self, x: np.ndarray) -> Generator[_Round, np.ndarray | None, float | None]:
        """The fixed-point factor every rank agrees on (one AllReduce round of the
        ladder packet); None for int32, which is added as it is."""
        if x.dtype == np.int32:
            return None
        if not np.all(np.isfinite(x)):
            raise CommError("fixed-point sums need finite values")
        max_abs = float(np.max(np.abs(x))) if x.size else 0.0
        summed = yield (EpicOp.ALLREDUCE, 0, ladder_values(max_abs))
        assert summed is not None       # every rank receives an AllReduce
        return fixed_point_factor(ladder_sum(summed))

    @staticmethod
    def _to_fixed(x: np.ndarray, factor: float | None) -> np.ndarray:
        if factor is None:
            return x
        q = np.clip(np.rint(x.astype(np.float64) * factor), INT32_MIN, INT32_MAX)
        return q.astype(np.int32)

    @staticmethod
    def _from_fixed(out: np.ndarray, dtype: np.dtype, factor: float | None) -> np.ndarray:
        if factor is None:
            return out
        return (out.astype(np.float64) / factor).astype(dtype)

    def _start(self, kind: str, nbytes: int, plan: _Plan,
               prepost: Sequence[tuple[EpicOp, int, int]] = ()) -> EpicCollective:
        if not self.connected:
            raise CommError("communicator is not connected")
        if self._active is not None and not self._active.done:
            raise CommError("a collective is already in progress on this communicator")
        if self.phantom and kind not in ("all_reduce", "barrier"):
            plan.close()
            raise CommError(f"phantom EPIC collectives are AllReduce and Barrier, not {kind}")
        c = EpicCollective(self, kind, nbytes, plan, prepost)
        self._active = c
        c.progress()
        return c


class EpicCollective:
    """One collective in progress on one rank; `progress()` -> True when done."""

    def __init__(self, comm: EpicCommunicator, kind: str, nbytes: int, plan: _Plan,
                 prepost: Sequence[tuple[EpicOp, int, int]] = ()) -> None:
        self.comm, self.kind, self.nbytes, self._plan = comm, kind, nbytes, plan
        # receives completed per QP, and the byte count each receive expects
        self._recv_by_qp: dict[int, int] = {}
        self._recv_lens: dict[int, list[int]] = {}
        # group index -> offset in comm._recv of the rounds posted in advance
        self._preposted: dict[int, int] = {}
        base = comm._prepost_base
        for op, root, words in prepost:
            index = group_index(_OP_KIND[op], root, comm.size)
            self._post_recvs(comm.qps[index], base, words)
            self._preposted[index] = base
            base += ANNOUNCE_BYTES + 4 * words + PACKET_BYTES
        if base > len(comm._recv):
            raise CommError(f"{kind} posts receives beyond the buffer; max_bytes is "
                            f"{comm.max_bytes}")
        self.seq = comm.seq
        comm.seq += 1
        self.done = False
        self._result: np.ndarray | None = None
        self.rounds = 0
        self.t_start = comm.ctx.engine.now_ns()
        self.t_end: int | None = None
        self._round: _Round | None = None
        comm._emit(self._base("collective_start") | {"t_ns": self.t_start, "bytes": nbytes})
        self._next(None, first=True)

    def _base(self, event: str) -> dict[str, Any]:
        c = self.comm
        return {"event": event, "job_id": c.job_id, "rank": c.rank, "size": c.size,
                "collective": self.kind, "seq": self.seq, "scheme": "epic"}

    def describe(self) -> str:
        return (f"round {self.rounds} on group {self._group}: {self._sent}/{self._n_sends} "
                f"sends posted, {self._send_done} done, {self._recv_done}/{self._n_recvs} "
                "results")

    def _next(self, summed: np.ndarray | None, first: bool = False) -> None:
        try:
            rnd = next(self._plan) if first else self._plan.send(summed)
        except StopIteration as stop:
            self._result = stop.value
            self.done = True
            self.t_end = self.comm.ctx.engine.now_ns()
            self.comm._emit(self._base("collective_end")
                            | {"t_ns": self.t_end, "t_start_ns": self.t_start})
            return
        self._begin_round(rnd)

    def _begin_round(self, rnd: _Round) -> None:
        comm = self.comm
        op, root, words = rnd
        kind = _OP_KIND[op]
        index = group_index(kind, root, comm.size)
        self._group = comm.endpoint.gid + index
        self._qp = comm.qps[index]
        # who sends and who receives on this group (see the module docstring)
        sends = kind is not EpicKind.BROADCAST or comm.rank == root
        self._receives = (kind is EpicKind.ALLREDUCE or (kind is EpicKind.REDUCE) == (
            comm.rank == root))
        n = words.size
        if n > comm._cap_words:
            raise CommError(f"{self.kind} needs {4 * n} bytes; max_bytes is {comm.max_bytes}")
        self._round = rnd
        self.rounds += 1
        npkts = -(-n // ELEMS)
        padded = npkts * ELEMS
        comm._send[:ANNOUNCE_BYTES] = (self.nbytes).to_bytes(8, "big")
        if not comm.phantom:        # (phantom: the buffer stays zeros, never written)
            data = np.frombuffer(comm._send, dtype=">i4", count=padded, offset=ANNOUNCE_BYTES)
            data[:n] = words
            data[n:] = 0
        self._chunks = _message_chunks(n, comm.chunk_pkts)
        self._words = n
        self._n_sends = len(self._chunks) if sends else 0
        self._n_recvs = len(self._chunks) if self._receives else 0
        self._sent = self._send_done = 0
        self._recv_base = self._preposted.pop(index, None)
        if self._receives and self._recv_base is None:
            # receive WQEs first: the sums can only come back after this rank's uploads
            self._recv_base = 0
            self._post_recvs(self._qp, 0, n)
        self._imm = announce_imm(op, root, self._group)
        self._post_sends()

    def _post_recvs(self, qp: QP, base: int, words: int) -> None:
        """Post the receives of one round of ``words`` on ``qp`` at ``base``."""
        chunks = _message_chunks(words, self.comm.chunk_pkts)
        self._recv_by_qp[qp.qp_num] = 0
        self._recv_lens[qp.qp_num] = [ln for _, ln in chunks]
        for i, (off, ln) in enumerate(chunks):
            qp.post_recv(RecvWR(wr_id=i, sge=self.comm._recv_mr.sge(base + off, ln)))

    @property
    def _recv_done(self) -> int:
        return self._recv_by_qp.get(self._qp.qp_num, 0) if self._receives else 0

    def _post_sends(self) -> None:
        comm = self.comm
        while self._sent < self._n_sends and self._sent - self._send_done < 2:
            i = self._sent
            off, ln = self._chunks[i]
            self._qp.post_send(SendWR(
                wr_id=i, opcode=WROpcode.SEND_WITH_IMM if i == 0 else WROpcode.SEND,
                sge=comm._send_mr.sge(off, ln), imm_data=self._imm if i == 0 else None),
                comm.step_overhead_ns if i == 0 else 0)
            self._sent += 1

    def progress(self) -> bool:
        if self.done:
            return True
        comm = self.comm
        for wc in comm.cq.poll(1024):
            if wc.status != WCStatus.SUCCESS:
                raise CommError(f"rank {comm.rank}: {self.kind} #{self.seq} work request "
                                f"{wc.wr_id} failed: {wc.status.name}")
            if wc.opcode == WCOpcode.RECV:
                ln = self._recv_lens[wc.qp_num][wc.wr_id]
                if wc.byte_len != ln:
                    raise CommError(f"rank {comm.rank}: result message {wc.wr_id} has "
                                    f"{wc.byte_len} bytes, expected {ln}")
                self._recv_by_qp[wc.qp_num] += 1
            else:
                self._send_done += 1
        self._post_sends()
        while (not self.done and self._send_done == self._n_sends
               and self._recv_done == self._n_recvs):
            out = None
            if self._receives and not comm.phantom:
                assert self._recv_base is not None
                out = np.frombuffer(comm._recv, dtype=">i4", count=self._words,
                                    offset=self._recv_base + ANNOUNCE_BYTES).astype(np.int32)
            self._next(out)
        return self.done

    def result(self) -> np.ndarray | None:
        if not self.done:
            raise CommError("collective not finished")
        return self._result


def _message_chunks(words: int, chunk_pkts: int) -> list[tuple[int, int]]:
    """(offset, length) of each SEND of a round of ``words`` int32 values: the
    announcement, then data chunks of ``chunk_pkts`` whole packets."""
    padded = -(-words // ELEMS) * ELEMS
    chunks = [(0, ANNOUNCE_BYTES)]
    step = chunk_pkts * PACKET_BYTES
    for off in range(0, padded * 4, step):
        chunks.append((ANNOUNCE_BYTES + off, min(step, padded * 4 - off)))
    return chunks


def _as_words(x: np.ndarray) -> np.ndarray:
    return np.frombuffer(x.tobytes(), dtype=np.int32)


def _from_words(words: np.ndarray, dtype: np.dtype, count: int) -> np.ndarray:
    return np.frombuffer(words.astype(np.int32).tobytes(), dtype=dtype, count=count).copy()

