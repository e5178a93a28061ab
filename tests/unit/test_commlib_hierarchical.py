"""The 2D hierarchical ring AllReduce (hosts.commlib.hierarchical) on the
simulated wire: sums against numpy, the job's step tags on the wire as one
sequence, which hosts each dimension talks to, its events, phantom payloads
and its errors."""

from __future__ import annotations

from collections import defaultdict

import numpy as np
import pytest

from hosts.commlib import CommError
from hosts.commlib.hierarchical import HierarchicalCommunicator, check_dims
from hosts.roce import wire
from hosts.roce.constants import OPS_LAST, OPS_ONLY, OPS_WRITE, sport_step
from hosts.roce.scale import Scale
from hosts.roce.sim import SimWire
from hosts.roce.verbs import Context

JOB = 9


def make_2d(dims: tuple[int, int], channels: int = 1, *, max_bytes: int = 1 << 16,
            **comm_kw) -> tuple[SimWire, list[HierarchicalCommunicator], list[dict]]:
    n = dims[0] * dims[1]
    w = SimWire(record=True)
    events: list[dict] = []
    comms = [HierarchicalCommunicator(Context(w.provider(f"10.0.0.{r + 1}"), scale=Scale()),
                                      r, n, JOB, dims, channels=channels, max_bytes=max_bytes,
                                      event_sink=events.append, **comm_kw)
             for r in range(n)]
    infos = [c.local_info() for c in comms]
    for c in comms:
        c.connect(infos)
    return w, comms, events


def run_all(w: SimWire, ops, timeout: float = 60.0) -> None:
    assert w.run(until=lambda: all([o.progress() for o in ops]), timeout=timeout)


def writes(w: SimWire):
    """(src ip, dst ip, step tag, packet) of every RDMA WRITE packet sent."""
    out = []
    for rec in w.records:
        p = wire.decode(rec.data)
        if p.opcode in OPS_WRITE:
            out.append((rec.src_ip, rec.dst_ip, sport_step(rec.sport), p))
    return out


@pytest.mark.parametrize("dims", [(2, 2), (4, 2), (2, 3)])
@pytest.mark.parametrize("channels", [1, 2])
def test_a_2d_all_reduce_is_bit_exact(dims: tuple[int, int], channels: int) -> None:
    w, comms, _ = make_2d(dims, channels)
    rng = np.random.default_rng(dims[0] * 10 + dims[1] + channels)
    info = np.iinfo(np.int64)
    for count in (1003, 8, 1):      # not a multiple of the group size; fewer than it
        xs = [rng.integers(info.min // 4, info.max // 4, count, dtype=np.int64)
              for _ in comms]
        ops = [c.start_all_reduce(x) for c, x in zip(comms, xs, strict=True)]
        run_all(w, ops)
        want = np.sum(np.stack(xs), axis=0, dtype=np.int64)
        for o in ops:
            assert o.result().shape == (count,)
            assert np.array_equal(o.result(), want)


def test_the_jobs_steps_are_one_sequence_on_the_wire() -> None:
    """Group ring: tags 0..l-2 (ReduceScatter) and the last l-1 of each
    AllReduce (AllGather), only between hosts of one group; cross ring: the
    2(g-1) tags between them, only between hosts at the same position."""
    local, groups = 3, 2
    w, comms, _ = make_2d((local, groups), step_psn_origin=True)
    per = 2 * (local - 1) + 2 * (groups - 1)
    xs = [np.arange(3000, dtype=np.int32) * (r + 1) for r in range(len(comms))]
    for _ in range(2):
        run_all(w, [c.start_all_reduce(x) for c, x in zip(comms, xs, strict=True)])
    host = {f"10.0.0.{r + 1}": r for r in range(len(comms))}
    tags = defaultdict(set)
    for src, dst, tag, p in writes(w):
        assert p.job_id == JOB
        a, b = host[src], host[dst]
        i = tag % per
        if i < local - 1 or i >= local - 1 + 2 * (groups - 1):
            assert a // local == b // local and b == a // local * local + (a + 1) % local
            tags["group"].add(tag)
        else:
            assert a % local == b % local and b == (a + local) % len(comms)
            tags["cross"].add(tag)
    assert tags["group"] | tags["cross"] == set(range(2 * per))
    assert len(tags["cross"]) == 2 * 2 * (groups - 1)
    # each step is one write per sending QP, its last packet carrying the immediate
    ends = [tag for _s, _d, tag, p in writes(w) if p.opcode in OPS_LAST | OPS_ONLY]
    assert sorted(set(ends)) == list(range(2 * per))


def test_events_are_one_collective_per_rank() -> None:
    dims = (2, 3)
    w, comms, events = make_2d(dims, channels=2)
    n = len(comms)
    run_all(w, [c.start_all_reduce(np.ones(600, np.int64)) for c in comms])
    starts = [e for e in events if e["event"] == "collective_start"]
    ends = [e for e in events if e["event"] == "collective_end"]
    assert sorted(e["rank"] for e in starts) == sorted(e["rank"] for e in ends) == list(range(n))
    assert all(e["size"] == n and e["collective"] == "all_reduce" and e["seq"] == 0
               for e in starts + ends)
    steps: dict[tuple[int, int], list[tuple[int, str]]] = defaultdict(list)
    for e in events:
        if e["event"] == "step_start":
            assert e["seq"] == 0 and e["size"] == n and e["tag_step"] == e["step"]
            steps[(e["rank"], e["channel"])].append((e["step"], e["dim"]))
    per = 2 * (dims[0] - 1) + 2 * (dims[1] - 1)
    want = [(s, "cross" if dims[0] - 1 <= s < dims[0] - 1 + 2 * (dims[1] - 1) else "group")
            for s in range(per)]
    assert set(steps) == {(r, c) for r in range(n) for c in range(2)}
    assert all(v == want for v in steps.values())


def test_a_step_base_shifts_every_tag() -> None:
    w, comms, events = make_2d((2, 2), step_base=100)
    run_all(w, [c.start_all_reduce(np.ones(64, np.int32)) for c in comms])
    assert {tag for _s, _d, tag, _p in writes(w)} == set(range(100, 104))
    assert {e["tag_step"] - e["step"] for e in events if e["event"] == "step_end"} == {100}


def test_phantom_payloads_send_the_same_packets() -> None:
    def run(phantom: bool) -> list[tuple[str, str, int, int]]:
        w, comms, _ = make_2d((2, 2), phantom=phantom)
        if phantom:
            xs = [np.broadcast_to(np.zeros(1, np.int32), (5000,)) for _ in comms]
        else:
            xs = [np.ones(5000, np.int32) for _ in comms]
        ops = [c.start_all_reduce(x) for c, x in zip(comms, xs, strict=True)]
        run_all(w, ops)
        if phantom:
            with pytest.raises(CommError, match="phantom"):
                ops[0].result()
        return [(s, d, t, p.psn) for s, d, t, p in writes(w)]

    assert run(True) == run(False)


def test_a_barrier_and_the_collectives_a_2d_ring_does_not_run() -> None:
    w, comms, _ = make_2d((2, 2))
    run_all(w, [c.start_barrier() for c in comms])
    x = np.ones(8, np.int32)
    for start in (comms[0].start_reduce_scatter, comms[0].start_all_gather,
                  comms[0].start_reduce, comms[0].start_broadcast):
        with pytest.raises(CommError, match="2D ring runs all_reduce and barrier"):
            start(x)


def test_dims_must_multiply_to_the_job() -> None:
    assert check_dims(32, (8, 4)) == (8, 4)
    for size, dims, what in ((32, (8, 8), "not the job's 32"), (8, (8, 1), ">= 2"),
                             (8, (2, 2, 2), "two dimensions")):
        with pytest.raises(ValueError, match=what):
            check_dims(size, dims)
