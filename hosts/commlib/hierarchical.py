"""A 2D hierarchical ring AllReduce: the collective of Symphony's simulations
(paper §4.1, Table 1: "2D ring, 8 x 4" over 32 nodes), as Astra-Sim runs a
ring AllReduce on a two-dimensional logical topology.

``size = local x groups`` ranks; rank r is position ``r % local`` of group
``r // local`` (a group is the ranks of one leaf, or of neighbouring
leaves, when ranks are laid out leaf by leaf). One AllReduce of N elements:

1. ReduceScatter around the rank's group (``local - 1`` steps of N / local):
   the rank holds its group's sum of chunk ``r % local``;
2. AllReduce of that chunk around the ring of the ranks at the same
   position in every group (``2 (groups - 1)`` steps of N / size): the
   chunk summed over all ranks;
3. AllGather around the group (``local - 1`` steps of N / local).

Each rank moves 2 N (size - 1) / size bytes, as in one ring over all ranks,
in 2 (local - 1) + 2 (groups - 1) steps instead of 2 (size - 1). Each
dimension is a plain ``Communicator`` (its own QPs, lanes and buffers);
they run one after the other, never together.

The job is one job to the network: both rings carry the job's id, and their
steps are numbered on the wire as one sequence (the group ring's
ReduceScatter 0 .. local - 2, the cross ring's AllReduce after it, the
group ring's AllGather after that; the next AllReduce continues the count).
That is what a Symphony switch tracks: the job's slowest step and how far
ahead of it each packet is (switches/p4/include/symphony.p4).

Events: the step events of both rings, as one collective of this rank
(global ``rank`` and ``size``, ``seq`` of this communicator, ``step`` in
the sequence above) with ``dim`` "group" or "cross"; the dimensions' own
``collective_start`` and ``collective_end`` are not passed on, this
communicator emits its own.

The buffer is padded with zeros to a multiple of ``local`` elements (at most
``local - 1`` of them), so every group chunk is the same size.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Final, TypedDict

import numpy as np

from hosts.commlib.communicator import (
    CollectiveOp,
    CommError,
    Communicator,
    EventSink,
    JobRingOptions,
    RankInfo,
    RingOptions,
)
from hosts.commlib.reduce import ReduceOp
from hosts.roce.verbs import Context

if TYPE_CHECKING:
    from typing import Unpack

__all__ = ["HierarchicalCommunicator", "HierarchicalOp", "HierarchicalRankInfo", "check_dims"]

GROUP: Final = "group"
CROSS: Final = "cross"


class HierarchicalRankInfo(TypedDict):
    """A rank's connection data for both dimensions (JSON)."""

    rank: int
    group: RankInfo
    cross: RankInfo


def check_dims(size: int, dims: tuple[int, ...]) -> tuple[int, int]:
    """(local, groups) of a 2D ring over ``size`` ranks; ValueError says why not."""
    if len(dims) != 2:
        raise ValueError(f"a 2D ring has two dimensions, not {len(dims)} ({dims})")
    local, groups = dims
    if local < 2 or groups < 2:
        raise ValueError(f"2D ring {local} x {groups}: each dimension needs >= 2 ranks")
    if local * groups != size:
        raise ValueError(f"2D ring {local} x {groups} is {local * groups} ranks, "
                         f"not the job's {size}")
    return local, groups


class HierarchicalCommunicator:
    """One rank of a 2D ring of ``dims = (local, groups)``; the keyword
    arguments are the dimensions' ``Communicator``'s (channels, rate
    controllers, pacers, path MTU, step_psn_origin, phantom, step overhead)."""

    def __init__(self, ctx: Context, rank: int, size: int, job_id: int,
                 dims: tuple[int, ...], *, max_bytes: int = 1 << 20,
                 event_sink: EventSink | None = None, step_base: int = 0,
                 **kw: Unpack[RingOptions]) -> None:
        if not 0 <= rank < size:
            raise ValueError(f"rank {rank} out of range for size {size}")
        self.local, self.groups = check_dims(size, dims)
        self.ctx, self.rank, self.size, self.job_id = ctx, rank, size, job_id
        self.event_sink = event_sink
        self.step_base = step_base
        # steps of one AllReduce: the group's ReduceScatter, the cross ring's
        # AllReduce, the group's AllGather
        self._rs = self.local - 1
        self._cross = 2 * (self.groups - 1)
        self.steps_per_all_reduce = 2 * self._rs + self._cross
        pos, group = rank % self.local, rank // self.local
        self.group = Communicator(ctx, pos, self.local, job_id, max_bytes=max_bytes,
                                  event_sink=self._pass_on(GROUP),
                                  wire_step=self._group_wire_step, **kw)
        cross_bytes = -(-max_bytes // self.local)
        self.cross = Communicator(ctx, group, self.groups, job_id, max_bytes=cross_bytes,
                                  event_sink=self._pass_on(CROSS),
                                  wire_step=self._cross_wire_step, **kw)
        self.seq = 0
        self.connected = False
        self._active: HierarchicalOp | None = None
        # the running collective's seq and its running stage's first step
        self._seq_now, self._offset = -1, 0

    @property
    def phantom(self) -> bool:
        return self.group.phantom

    @property
    def timeout_s(self) -> float:
        return self.group.timeout_s

    @property
    def rings(self) -> tuple[tuple[str, Communicator], ...]:
        """The two dimensions, named (for the agent's per-QP reports)."""
        return ((GROUP, self.group), (CROSS, self.cross))

    # ---- step numbers on the wire ----
    def _group_wire_step(self, own: int) -> int:
        q, i = divmod(own, 2 * self._rs)
        return self.step_base + q * self.steps_per_all_reduce + (
            i if i < self._rs else i + self._cross)

    def _cross_wire_step(self, own: int) -> int:
        q, i = divmod(own, self._cross)
        return self.step_base + q * self.steps_per_all_reduce + self._rs + i

    # ---- set-up ----
    def local_info(self) -> HierarchicalRankInfo:
        return {"rank": self.rank, GROUP: self.group.local_info(),
                CROSS: self.cross.local_info()}

    def connect(self, infos: list[HierarchicalRankInfo]) -> None:
        """Connect both dimensions given every rank's ``local_info()``, in rank order."""
        if len(infos) != self.size or any(int(i["rank"]) != k for k, i in enumerate(infos)):
            raise CommError("connect needs every rank's info, in rank order")
        if any(GROUP not in i or CROSS not in i for i in infos):
            raise CommError("every rank of a 2D ring must run a 2D ring (no group/cross info)")
        first = self.rank - self.rank % self.local
        self.group.connect([infos[first + p][GROUP] for p in range(self.local)])
        pos = self.rank % self.local
        self.cross.connect([infos[g * self.local + pos][CROSS] for g in range(self.groups)])
        self.connected = True

    def close(self) -> None:
        self.group.close()
        self.cross.close()

    # ---- events ----
    def _emit(self, ev: dict[str, Any]) -> None:
        if self.event_sink is not None:
            self.event_sink(ev)

    def _pass_on(self, dim: str) -> EventSink:
        def sink(ev: dict[str, Any]) -> None:
            if ev["event"] in ("collective_start", "collective_end"):
                return
            self._emit(ev | {"rank": self.rank, "size": self.size,
                             "collective": "all_reduce", "seq": self._seq_now,
                             "step": self._offset + ev["step"], "dim": dim})
        return sink

    # ---- collectives ----
    def start_all_reduce(self, x: np.ndarray, op: ReduceOp = ReduceOp.SUM) -> HierarchicalOp:
        if not self.connected:
            raise CommError("communicator is not connected")
        if self._active is not None and not self._active.done:
            raise CommError("a collective is already in progress on this communicator")
        o = HierarchicalOp(self, x, op)
        self._active = o
        o.progress()
        return o

    def start_barrier(self) -> HierarchicalOp:
        """A Barrier as NCCL runs one: an AllReduce of a single element."""
        return self.start_all_reduce(np.zeros(1, np.int32))

    def all_reduce(self, x: np.ndarray, op: ReduceOp = ReduceOp.SUM) -> np.ndarray:
        return self.wait(self.start_all_reduce(x, op))

    def barrier(self) -> None:
        self.wait(self.start_barrier())

    def wait(self, op: HierarchicalOp) -> np.ndarray:
        if not self.ctx.engine.run(until=op.progress, timeout=self.timeout_s):
            raise CommError(f"rank {self.rank}: 2D all_reduce #{op.seq} timed out "
                            f"in its {op.stage_name} stage")
        return op.result()

    def _unsupported(self, name: str) -> CommError:
        return CommError(f"a 2D ring runs all_reduce and barrier, not {name}")

    def start_reduce_scatter(self, x: np.ndarray, op: ReduceOp = ReduceOp.SUM) -> CollectiveOp:
        raise self._unsupported("reduce_scatter")

    def start_all_gather(self, x: np.ndarray) -> CollectiveOp:
        raise self._unsupported("all_gather")

    def start_reduce(self, x: np.ndarray, root: int = 0,
                     op: ReduceOp = ReduceOp.SUM) -> CollectiveOp:
        raise self._unsupported("reduce")

    def start_broadcast(self, x: np.ndarray, root: int = 0) -> CollectiveOp:
        raise self._unsupported("broadcast")


class HierarchicalOp:
    """One 2D AllReduce in progress on one rank; ``progress()`` -> True when done."""

    STAGES = ("group reduce-scatter", "cross all-reduce", "group all-gather")

    def __init__(self, comm: HierarchicalCommunicator, x: np.ndarray, op: ReduceOp) -> None:
        self.comm, self.op = comm, ReduceOp(op)
        x = x.reshape(-1) if comm.phantom else np.ascontiguousarray(x).reshape(-1)
        self.dtype = x.dtype
        self.count = x.size
        padded = -(-x.size // comm.local) * comm.local
        self.chunk = padded // comm.local
        if comm.phantom:
            self.x: np.ndarray = np.broadcast_to(np.zeros(1, x.dtype), (padded,))
        else:
            self.x = np.zeros(padded, x.dtype)
            self.x[: x.size] = x
        self.seq = comm.seq
        comm.seq += 1
        self.stage = 0
        self.done = False
        self._out: np.ndarray | None = None
        self.t_start = comm.ctx.engine.now_ns()
        self.t_end: int | None = None
        comm._emit(self._base("collective_start")
                   | {"t_ns": self.t_start, "bytes": x.size * x.dtype.itemsize})
        self._sub = self._begin(0, self.x)

    @property
    def kind(self) -> str:
        return "all_reduce"

    @property
    def stage_name(self) -> str:
        return self.STAGES[min(self.stage, 2)]

    def _base(self, event: str) -> dict[str, Any]:
        c = self.comm
        return {"event": event, "job_id": c.job_id, "rank": c.rank, "size": c.size,
                "collective": "all_reduce", "seq": self.seq, "dims": [c.local, c.groups]}

    def _begin(self, stage: int, data: np.ndarray) -> CollectiveOp:
        c = self.comm
        self.stage = stage
        c._seq_now, c._offset = self.seq, (0, c._rs, c._rs + c._cross)[stage]
        if stage == 0:
            return c.group.start_reduce_scatter(data, self.op)
        if stage == 1:
            return c.cross.start_all_reduce(data, self.op)
        return c.group.start_all_gather(data)

    def _stage_result(self, sub: CollectiveOp) -> np.ndarray:
        if self.comm.phantom:
            return np.broadcast_to(np.zeros(1, self.dtype), (self.chunk,))
        return sub.result()

    def progress(self) -> bool:
        if self.done:
            return True
        while self._sub.progress():
            if self.stage == 2:
                if not self.comm.phantom:
                    self._out = self._sub.result()[: self.count]
                self.done = True
                self.t_end = self.comm.ctx.engine.now_ns()
                self.comm._emit(self._base("collective_end")
                                | {"t_ns": self.t_end, "t_start_ns": self.t_start})
                return True
            self._sub = self._begin(self.stage + 1, self._stage_result(self._sub))
        return False

    def result(self) -> np.ndarray:
        if not self.done:
            raise CommError("collective not finished")
        if self.comm.phantom or self._out is None:
            raise CommError("a collective of phantom payloads has no result")
        return self._out


def make_ring(ctx: Context, rank: int, size: int, job_id: int, dims: tuple[int, ...],
              **kw: Unpack[JobRingOptions]) -> Communicator | HierarchicalCommunicator:
    """A 1D ring (``dims`` empty) or a 2D ring of ``dims``."""
    if dims:
        return HierarchicalCommunicator(ctx, rank, size, job_id, dims, **kw)
    return Communicator(ctx, rank, size, job_id, **kw)

