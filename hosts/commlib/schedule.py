"""Ring collective schedules: which chunk each rank sends and receives at each
step. Pure data, no I/O, so the plan can be checked on its own.

A buffer of `count` elements is split into `size` contiguous chunks (chunk j
is what rank j owns after a ReduceScatter, as in NCCL), and each chunk into
`channels` contiguous pieces: channel c moves piece c of every chunk, on its
own ring (its own QP pair). Rank r sends to r+1 and receives from r-1 (mod size).

ReduceScatter (size-1 steps), rank r ends owning the reduced chunk r:
    step s: send chunk (r-s-1) % n, receive chunk (r-s-2) % n and reduce it in.
AllGather (size-1 steps), rank r starts owning chunk r:
    step s: send chunk (r-s) % n, receive chunk (r-s-1) % n (a copy).
AllReduce = ReduceScatter then AllGather: 2(size-1) steps, numbered on.

Reduce and Broadcast (to / from a root) are pipelined chains along the same
ring, as NCCL runs them: the buffer is cut into `pieces` chunks, and the rank
at chain position j (Broadcast: j = (r - root) % n, the root first; Reduce:
j = (r - root - 1) % n, the root last) sends piece s - j at step s and
receives piece s - j + 1 from its left neighbour (Reduce: and adds its own
values in before passing it on): pieces + size - 2 steps. A step a rank has
nothing to send or receive in has `None` for that chunk (the ring still
moves an empty write, so every step stays one write per rank).
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

__all__ = [
    "Collective",
    "Phase",
    "RingStep",
    "split",
    "ring_steps",
    "num_steps",
    "chain_steps",
    "chunk_count",
    "pipeline_pieces",
    "channel_chunks",
    "PIPELINE_PIECES_PER_RANK",
]


class Collective(StrEnum):
    REDUCE_SCATTER = "reduce_scatter"
    ALL_GATHER = "all_gather"
    ALL_REDUCE = "all_reduce"
    REDUCE = "reduce"
    BROADCAST = "broadcast"


class Phase(StrEnum):
    REDUCE_SCATTER = "RS"
    ALL_GATHER = "AG"
    REDUCE = "RD"        # a Reduce chain's step: received data is added in
    BROADCAST = "BC"     # a Broadcast chain's step: received data is copied


# Chunks a Reduce or Broadcast chain cuts the buffer into, per rank: the
# chain's fill and drain cost (size - 2) of pieces + size - 2 steps.
PIPELINE_PIECES_PER_RANK = 8


@dataclass(frozen=True)
class RingStep:
    """One ring step of one rank: local step index within the collective."""

    step: int
    phase: Phase
    send_chunk: int | None
    recv_chunk: int | None

    @property
    def reduces(self) -> bool:
        return self.phase in (Phase.REDUCE_SCATTER, Phase.REDUCE)


def split(count: int, parts: int) -> list[tuple[int, int]]:
    """(offset, length) of `parts` near-equal contiguous pieces of `count`
    elements; the first `count % parts` pieces get one more element."""
    if parts < 1 or count < 0:
        raise ValueError("parts must be >= 1 and count >= 0")
    base, extra = divmod(count, parts)
    out = []
    off = 0
    for i in range(parts):
        n = base + (1 if i < extra else 0)
        out.append((off, n))
        off += n
    return out


def pipeline_pieces(size: int) -> int:
    """Chunks of a Reduce or Broadcast chain over `size` ranks."""
    return PIPELINE_PIECES_PER_RANK * size


def chunk_count(collective: Collective, size: int) -> int:
    """Chunks the buffer is cut into: one per rank, or a chain's pieces."""
    if collective in (Collective.REDUCE, Collective.BROADCAST):
        return pipeline_pieces(size)
    return size


def num_steps(collective: Collective, size: int) -> int:
    if size < 1:
        raise ValueError("size must be >= 1")
    per_phase = size - 1
    if collective in (Collective.REDUCE, Collective.BROADCAST):
        return pipeline_pieces(size) + size - 2 if size > 1 else 0
    return 2 * per_phase if collective is Collective.ALL_REDUCE else per_phase


def chain_steps(collective: Collective, rank: int, size: int, root: int) -> list[RingStep]:
    """The steps of a Reduce (to `root`) or Broadcast (from `root`) chain."""
    if not 0 <= root < size:
        raise ValueError(f"root {root} out of range for size {size}")
    n, pieces = size, pipeline_pieces(size)
    if collective is Collective.BROADCAST:
        j, phase = (rank - root) % n, Phase.BROADCAST
    elif collective is Collective.REDUCE:
        j, phase = (rank - root - 1) % n, Phase.REDUCE
    else:
        raise ValueError(f"{collective.value} is not a chain collective")

    def piece(p: int, ok: bool) -> int | None:
        return p if ok and 0 <= p < pieces else None

    return [RingStep(s, phase, piece(s - j, j < n - 1), piece(s - j + 1, j >= 1))
            for s in range(num_steps(collective, n))]


def ring_steps(collective: Collective, rank: int, size: int, root: int = 0) -> list[RingStep]:
    """The steps rank `rank` runs, in order (`root`: of a Reduce or Broadcast)."""
    if not 0 <= rank < size:
        raise ValueError(f"rank {rank} out of range for size {size}")
    if collective in (Collective.REDUCE, Collective.BROADCAST):
        return chain_steps(collective, rank, size, root)
    n = size
    rs = [
        RingStep(s, Phase.REDUCE_SCATTER, (rank - s - 1) % n, (rank - s - 2) % n)
        for s in range(n - 1)
    ]
    ag = [RingStep(s, Phase.ALL_GATHER, (rank - s) % n, (rank - s - 1) % n) for s in range(n - 1)]
    if collective is Collective.REDUCE_SCATTER:
        return rs
    if collective is Collective.ALL_GATHER:
        return ag
    return rs + [RingStep(s.step + n - 1, s.phase, s.send_chunk, s.recv_chunk) for s in ag]


def channel_chunks(count: int, size: int, channels: int) -> list[list[tuple[int, int]]]:
    """Where each channel's share of each ring chunk lies in the buffer.

    The buffer of ``count`` elements is cut into ``size`` chunks (one per rank,
    `split`), and each chunk into ``channels`` parts. The result is indexed
    ``result[channel][chunk]`` and holds ``(offset, length)``, both in elements
    of the whole buffer.
    """
    chunks = split(count, size)
    out: list[list[tuple[int, int]]] = [[] for _ in range(channels)]
    for c_off, c_len in chunks:
        for c, (o, n) in enumerate(split(c_len, channels)):
            out[c].append((c_off + o, n))
    return out
