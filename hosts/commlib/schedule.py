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
    "channel_chunks",
]


class Collective(StrEnum):
    REDUCE_SCATTER = "reduce_scatter"
    ALL_GATHER = "all_gather"
    ALL_REDUCE = "all_reduce"


class Phase(StrEnum):
    REDUCE_SCATTER = "RS"
    ALL_GATHER = "AG"


@dataclass(frozen=True)
class RingStep:
    """One ring step of one rank: local step index within the collective."""

    step: int
    phase: Phase
    send_chunk: int
    recv_chunk: int

    @property
    def reduces(self) -> bool:
        return self.phase is Phase.REDUCE_SCATTER


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


def num_steps(collective: Collective, size: int) -> int:
    if size < 1:
        raise ValueError("size must be >= 1")
    per_phase = size - 1
    return 2 * per_phase if collective is Collective.ALL_REDUCE else per_phase


def ring_steps(collective: Collective, rank: int, size: int) -> list[RingStep]:
    """The steps rank `rank` runs, in order."""
    if not 0 <= rank < size:
        raise ValueError(f"rank {rank} out of range for size {size}")
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
    """[channel][chunk] -> (offset, length) in elements of the whole buffer."""
    chunks = split(count, size)
    out: list[list[tuple[int, int]]] = [[] for _ in range(channels)]
    for c_off, c_len in chunks:
        for c, (o, n) in enumerate(split(c_len, channels)):
            out[c].append((c_off + o, n))
    return out
