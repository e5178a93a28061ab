"""Ring schedules executed step by step with numpy in lockstep: the plan alone
must produce NCCL's results (rank r owns reduced chunk r after ReduceScatter)."""

from __future__ import annotations

import numpy as np
import pytest

from hosts.commlib.schedule import (
    Collective,
    Phase,
    channel_chunks,
    num_steps,
    ring_steps,
    split,
)


def run_plan(coll: Collective, bufs: list[np.ndarray], channels: int) -> list[np.ndarray]:
    """Every rank sends its piece to r+1 at each step; all steps in lockstep."""
    n = len(bufs)
    count = bufs[0].size
    layout = channel_chunks(count, n, channels)
    plans = [ring_steps(coll, r, n) for r in range(n)]
    bufs = [b.copy() for b in bufs]
    for i in range(num_steps(coll, n)):
        msgs = []
        for r in range(n):
            st = plans[r][i]
            assert st.step == i
            for c in range(channels):
                off, ln = layout[c][st.send_chunk]
                msgs.append(((r + 1) % n, c, st.send_chunk, bufs[r][off : off + ln].copy()))
        for dst, c, chunk, data in msgs:
            st = plans[dst][i]
            assert st.recv_chunk == chunk  # what the receiver expects is what arrives
            off, ln = layout[c][chunk]
            if st.reduces:
                bufs[dst][off : off + ln] += data
            else:
                bufs[dst][off : off + ln] = data
    return bufs


@pytest.mark.parametrize("n", [2, 3, 4, 8])
@pytest.mark.parametrize("channels", [1, 2, 3])
def test_allreduce_plan_sums_everything(n: int, channels: int) -> None:
    rng = np.random.default_rng(n * 10 + channels)
    count = 101  # not a multiple of n * channels
    bufs = [rng.integers(-(2**31), 2**31, count, dtype=np.int64) for _ in range(n)]
    out = run_plan(Collective.ALL_REDUCE, bufs, channels)
    expect = np.sum(bufs, axis=0)
    for r in range(n):
        assert np.array_equal(out[r], expect)


@pytest.mark.parametrize("n", [2, 4, 8])
def test_reduce_scatter_plan_leaves_chunk_r_on_rank_r(n: int) -> None:
    rng = np.random.default_rng(n)
    bufs = [rng.integers(0, 1000, 64, dtype=np.int32) for _ in range(n)]
    out = run_plan(Collective.REDUCE_SCATTER, bufs, 2)
    expect = np.sum(bufs, axis=0)
    for r, (off, ln) in enumerate(split(64, n)):
        assert np.array_equal(out[r][off : off + ln], expect[off : off + ln])


@pytest.mark.parametrize("n", [2, 4, 8])
def test_all_gather_plan_distributes_every_chunk(n: int) -> None:
    chunks = split(40, n)
    bufs = []
    for r in range(n):
        b = np.full(40, -1, dtype=np.int32)
        off, ln = chunks[r]
        b[off : off + ln] = r
        bufs.append(b)
    out = run_plan(Collective.ALL_GATHER, bufs, 2)
    expect = np.concatenate([np.full(ln, r, dtype=np.int32) for r, (_, ln) in enumerate(chunks)])
    for r in range(n):
        assert np.array_equal(out[r], expect)


def test_step_numbering_and_phases() -> None:
    steps = ring_steps(Collective.ALL_REDUCE, 1, 4)
    assert [s.step for s in steps] == list(range(6))
    assert [s.phase for s in steps] == [Phase.REDUCE_SCATTER] * 3 + [Phase.ALL_GATHER] * 3
    # Rank 1 of 4: RS sends chunks 0, 3, 2 and ends owning 1; AG sends 1, 0, 3.
    assert [s.send_chunk for s in steps] == [0, 3, 2, 1, 0, 3]
    assert num_steps(Collective.ALL_GATHER, 4) == 3
    assert ring_steps(Collective.ALL_REDUCE, 0, 1) == []


def test_split_and_layout() -> None:
    assert split(10, 4) == [(0, 3), (3, 3), (6, 2), (8, 2)]
    layout = channel_chunks(10, 2, 2)  # chunks (0,5),(5,5); pieces per channel
    assert layout == [[(0, 3), (5, 3)], [(3, 2), (8, 2)]]
    with pytest.raises(ValueError):
        ring_steps(Collective.ALL_REDUCE, 4, 4)


@pytest.mark.parametrize("n", [2, 3, 5])
@pytest.mark.parametrize("root", [0, 1])
def test_chains_pass_every_piece_along_the_ring_once(n: int, root: int) -> None:
    from hosts.commlib.schedule import chain_steps, pipeline_pieces

    pieces = pipeline_pieces(n)
    for kind in (Collective.REDUCE, Collective.BROADCAST):
        plans = {r: chain_steps(kind, r, n, root) for r in range(n)}
        for r, plan in plans.items():
            right = plans[(r + 1) % n]
            # what r sends at step s is what its right neighbour receives at s
            assert [st.send_chunk for st in plan] == [st.recv_chunk for st in right]
            sent = [st.send_chunk for st in plan if st.send_chunk is not None]
            # the chain's end (Broadcast: left of the root; Reduce: the root) sends nothing
            end = (root - 1) % n if kind is Collective.BROADCAST else root
            assert sent == ([] if r == end else list(range(pieces)))
