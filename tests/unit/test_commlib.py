"""Ring collectives over the RoCE transport on the simulated wire (all ranks in
one process, one loop): results against numpy, step tags and job id as seen on
the wire, step events, and behaviour under loss and congestion marking."""

from __future__ import annotations

from collections import defaultdict

import numpy as np
import pytest

from hosts.commlib import CommError, Communicator, ReduceOp, split
from hosts.roce import wire
from hosts.roce.constants import (
    AETH_KIND_ACK,
    AETH_KIND_MASK,
    OPS_LAST,
    OPS_ONLY,
    OPS_WRITE,
    Opcode,
    sport_step,
    tag_sport,
)
from hosts.roce.dcqcn import Dcqcn, DcqcnParams
from hosts.roce.pacing import Pacer
from hosts.roce.scale import Scale
from hosts.roce.sim import SimWire
from hosts.roce.verbs import Context

JOB = 42


def make_ring(
    n: int,
    channels: int,
    *,
    max_bytes: int = 1 << 16,
    scale: Scale | None = None,
    dcqcn: bool = False,
    comm_kw: dict | None = None,
    **wire_kw,
):
    w = SimWire(record=True, **wire_kw)
    events: list[dict] = []
    comms = []
    for r in range(n):
        kw = {}
        if dcqcn:
            sc = scale or Scale()
            kw = {
                "rate_controller_factory": lambda sc=sc: Dcqcn(DcqcnParams.for_scale(sc)),
                "pacer_factory": Pacer,
            }
        ctx = Context(w.provider(f"10.0.0.{r + 1}"), scale=scale or Scale(), **kw)
        comms.append(
            Communicator(
                ctx, r, n, JOB, channels=channels, max_bytes=max_bytes, event_sink=events.append,
                **(comm_kw or {}),
            )
        )
    infos = [c.local_info() for c in comms]
    for c in comms:
        c.connect(infos)
    return w, comms, events


def run_all(w: SimWire, ops, timeout: float = 30.0) -> None:
    assert w.run(until=lambda: all([o.progress() for o in ops]), timeout=timeout)


def data_packets(w: SimWire):
    """(time, src ip, sport, decoded packet) of every RDMA WRITE packet sent."""
    out = []
    for rec in w.records:
        p = wire.decode(rec.data)
        if p.opcode in OPS_WRITE:
            out.append((rec.time_ns, rec.src_ip, rec.sport, p))
    return out


@pytest.mark.parametrize("n", [4, 8])
@pytest.mark.parametrize("channels", [1, 2])
@pytest.mark.parametrize("dtype", [np.int32, np.int64])
def test_allreduce_integers_bit_exact(n: int, channels: int, dtype) -> None:
    w, comms, _ = make_ring(n, channels)
    rng = np.random.default_rng(n * 100 + channels)
    info = np.iinfo(dtype)
    # Large values so the sums wrap around: still bit-exact with numpy's wrapping sum.
    xs = [rng.integers(info.min // 2, info.max // 2, 1003, dtype=dtype) for _ in range(n)]
    ops = [c.start_all_reduce(x) for c, x in zip(comms, xs, strict=True)]
    run_all(w, ops)
    expect = np.sum(np.stack(xs), axis=0, dtype=dtype)
    for o in ops:
        res = o.result()
        assert res.dtype == dtype
        assert np.array_equal(res, expect)


def test_allreduce_float32_and_max() -> None:
    n = 4
    w, comms, _ = make_ring(n, 2)
    rng = np.random.default_rng(3)
    xs = [rng.standard_normal(777).astype(np.float32) for _ in range(n)]
    ops = [c.start_all_reduce(x) for c, x in zip(comms, xs, strict=True)]
    run_all(w, ops)
    for o in ops:
        np.testing.assert_allclose(o.result(), np.sum(xs, axis=0), rtol=1e-5, atol=1e-5)
    ops = [c.start_all_reduce(x, ReduceOp.MAX) for c, x in zip(comms, xs, strict=True)]
    run_all(w, ops)
    for o in ops:
        assert np.array_equal(o.result(), np.max(xs, axis=0))


@pytest.mark.parametrize("n", [4, 8])
@pytest.mark.parametrize("channels", [1, 2])
def test_reduce_scatter_and_all_gather(n: int, channels: int) -> None:
    w, comms, _ = make_ring(n, channels)
    rng = np.random.default_rng(n + channels)
    xs = [rng.integers(-(2**40), 2**40, 501, dtype=np.int64) for _ in range(n)]
    ops = [c.start_reduce_scatter(x) for c, x in zip(comms, xs, strict=True)]
    run_all(w, ops)
    total = np.sum(xs, axis=0)
    for r, o in enumerate(ops):
        off, ln = split(501, n)[r]
        assert np.array_equal(o.result(), total[off : off + ln])
    parts = [rng.integers(0, 2**31, 37, dtype=np.int32) for _ in range(n)]
    ops = [c.start_all_gather(p) for c, p in zip(comms, parts, strict=True)]
    run_all(w, ops)
    for o in ops:
        assert np.array_equal(o.result(), np.concatenate(parts))


def test_step_tags_and_job_id_on_the_wire() -> None:
    n, channels = 4, 2
    w, comms, _ = make_ring(n, channels)
    steps = 2 * (n - 1)
    xs = [np.arange(4000, dtype=np.int32) * (r + 1) for r in range(n)]  # multi-packet steps
    for _ in range(2):  # two collectives: step numbers keep counting
        ops = [c.start_all_reduce(x) for c, x in zip(comms, xs, strict=True)]
        run_all(w, ops)
    pkts = data_packets(w)
    assert pkts
    assert all(p.job_id == JOB for _, _, _, p in pkts)
    # Per sending QP (source ip, destination QP): the tags in wire order are the
    # steps 0, 1, ..., 2*steps-1, each a run of packets ending with the step's
    # last (immediate-carrying) packet.
    flows = defaultdict(list)
    for t, ip, sport, p in pkts:
        flows[(ip, p.dqpn)].append((t, sport, p))
    assert len(flows) == n * channels
    for seq in flows.values():
        tags = [sport_step(s) for _, s, _ in seq]
        assert all(s & 0xC000 == 0xC000 for _, s, _ in seq)
        runs = [tags[0]] + [b for a, b in zip(tags, tags[1:], strict=False) if b != a]
        assert runs == list(range(2 * steps))
        # Each step is one message: its last packet carries the immediate.
        ends = [sport_step(s) for _, s, p in seq if p.opcode in OPS_LAST | OPS_ONLY]
        assert ends == list(range(2 * steps))
        assert all(
            p.opcode in (Opcode.RDMA_WRITE_LAST_IMM, Opcode.RDMA_WRITE_ONLY_IMM)
            for _, _, p in seq
            if p.opcode in OPS_LAST | OPS_ONLY
        )


def test_retransmissions_keep_their_step_tag_under_loss() -> None:
    n = 4
    w, comms, _ = make_ring(n, 2, loss=0.03, reorder=0.02, seed=5)
    rng = np.random.default_rng(9)
    xs = [rng.integers(-(2**31), 2**31 - 1, 6000, dtype=np.int32) for _ in range(n)]
    ops = [c.start_all_reduce(x) for c, x in zip(comms, xs, strict=True)]
    run_all(w, ops, timeout=120)
    expect = np.sum(np.stack(xs), axis=0, dtype=np.int32)
    assert all(np.array_equal(o.result(), expect) for o in ops)
    assert w.counters["dropped"] > 0
    retx = sum(c.right[k][0].stats["retransmits"] for c in comms for k in range(2))
    assert retx > 0
    # Every transmission of a given PSN on a QP carries the same tag.
    tag_of: dict[tuple[str, int, int], int] = {}
    for _, ip, sport, p in data_packets(w):
        key = (ip, p.dqpn, p.psn)
        assert tag_of.setdefault(key, sport) == sport


def test_step_events_cover_every_step_and_channel() -> None:
    n, channels = 4, 2
    w, comms, events = make_ring(n, channels)
    xs = [np.ones(1000, dtype=np.int64) for _ in range(n)]
    ops = [c.start_all_reduce(x) for c, x in zip(comms, xs, strict=True)]
    run_all(w, ops)
    by = defaultdict(dict)
    for e in events:
        if e["event"] in ("step_start", "step_end"):
            assert e["job_id"] == JOB and e["collective"] == "all_reduce"
            by[(e["rank"], e["channel"], e["step"])][e["event"]] = e
    assert set(by) == {
        (r, c, s) for r in range(n) for c in range(channels) for s in range(2 * (n - 1))
    }
    for (r, c, s), d in by.items():
        st, en = d["step_start"], d["step_end"]
        assert st["phase"] == ("RS" if s < n - 1 else "AG")
        assert st["tag_step"] == s and en["tag_step"] == s
        assert st["t_ns"] <= en["send_done_ns"] <= en["t_ns"]
        assert en["recv_done_ns"] <= en["t_ns"]
        if s:  # a step starts only after the previous one ended
            assert st["t_ns"] >= by[(r, c, s - 1)]["step_end"]["t_ns"]
    ends = [e for e in events if e["event"] == "collective_end"]
    assert len(ends) == n and all(e["t_ns"] > e["t_start_ns"] for e in ends)


def test_dcqcn_reacts_to_ce_marks_during_a_collective() -> None:
    n = 4
    sc = Scale(slowdown=1000.0, nic_rate_bps=10e9)  # 10 Mb/s links
    w, comms, _ = make_ring(n, 1, scale=sc, dcqcn=True, ce=0.05, seed=2, max_bytes=1 << 18)
    xs = [np.full(40_000, r, dtype=np.int32) for r in range(n)]
    ops = [c.start_all_reduce(x) for c, x in zip(comms, xs, strict=True)]
    run_all(w, ops, timeout=600)
    assert all(np.array_equal(o.result(), np.full(40_000, 6, dtype=np.int32)) for o in ops)
    ccs = [c.right[0][0].rate_controller for c in comms]
    assert all(isinstance(cc, Dcqcn) for cc in ccs)
    assert sum(cc.stats.rate_cuts for cc in ccs) > 0
    pacers = [c.right[0][0].pacer for c in comms]
    assert all(p.bytes_sent > 0 for p in pacers)


def test_single_rank_and_errors() -> None:
    w, comms, _ = make_ring(1, 1)
    x = np.arange(10, dtype=np.int32)
    op = comms[0].start_all_reduce(x)
    assert op.progress() and np.array_equal(op.result(), x)
    w, comms, _ = make_ring(2, 1, max_bytes=64)
    with pytest.raises(CommError):
        comms[0].start_all_reduce(np.zeros(100, dtype=np.int32))
    with pytest.raises(TypeError):
        comms[0].start_all_reduce(np.zeros(4, dtype=np.int16))
    comms[0].start_all_reduce(np.zeros(4, dtype=np.int32))
    with pytest.raises(CommError):
        comms[0].start_all_reduce(np.zeros(4, dtype=np.int32))  # one at a time


def test_tag_sport_layout_matches_the_step() -> None:
    assert tag_sport(5) == 0xC005 and sport_step(tag_sport(16384 + 3)) == 3


def test_back_to_back_collectives_with_ranks_out_of_phase() -> None:
    # Packets to rank 0 are slow, so its neighbours finish each collective
    # earlier and start the next while rank 0 is still in the previous one.
    n = 4
    w, comms, _ = make_ring(n, 2)
    w.hook = lambda p, src, dst: 400_000 if dst == "10.0.0.1" else None
    rng = np.random.default_rng(11)
    xs = [rng.integers(-(2**31), 2**31 - 1, 3001, dtype=np.int32) for _ in range(n)]
    parts = [x[:50] for x in xs]
    program = [("ar", xs), ("ag", parts), ("rs", xs), ("ar", xs), ("ag", parts)]
    results: list[list] = [[] for _ in range(n)]
    current = [None] * n

    def drive() -> bool:
        for r, c in enumerate(comms):
            op = current[r]
            if op is not None and op.progress():
                results[r].append(op.result())
                op = current[r] = None
            if op is None and len(results[r]) < len(program):
                kind, data = program[len(results[r])]
                start = {
                    "ar": c.start_all_reduce,
                    "ag": c.start_all_gather,
                    "rs": c.start_reduce_scatter,
                }[kind]
                current[r] = start(data[r])
                current[r].progress()
        return all(len(res) == len(program) for res in results)

    assert w.run(until=drive, timeout=60)
    total = np.sum(np.stack(xs), axis=0, dtype=np.int32)
    for r in range(n):
        off, ln = split(3001, n)[r]
        expect = [total, np.concatenate(parts), total[off : off + ln], total, np.concatenate(parts)]
        for got, exp in zip(results[r], expect, strict=True):
            assert np.array_equal(got, exp)


def exact_all_reduce(w: SimWire, comms: list[Communicator], rng: np.random.Generator,
                     what: str = "") -> None:
    """One AllReduce of random int64 vectors on every rank; every rank's sum is exact."""
    xs = [rng.integers(-1000, 1000, 5000, dtype=np.int64) for _ in comms]
    ops = [c.start_all_reduce(x) for c, x in zip(comms, xs, strict=True)]
    run_all(w, ops)
    expected = np.sum(xs, axis=0)
    for o in ops:
        assert np.array_equal(o.result(), expected), what


@pytest.mark.parametrize("wire_kw", [{}, {"loss": 0.02, "seed": 3}], ids=["clean", "lossy"])
def test_step_psn_origin_starts_every_step_at_psn_0(wire_kw) -> None:
    """With step_psn_origin, each step's write is PSN 0.. on the wire (the PSN is
    the packet's position in its step), across collectives, and the sums stay exact."""
    n = 4
    w, comms, _ = make_ring(n, 2, comm_kw={"step_psn_origin": True}, **wire_kw)
    rng = np.random.default_rng(7)
    for _ in range(3):
        exact_all_reduce(w, comms, rng)
    psns: dict[tuple[str, int, int], set[int]] = defaultdict(set)
    firsts = []
    for _t, ip, sport, p in data_packets(w):
        psns[(ip, p.dqpn, sport_step(sport))].add(p.psn)
        if p.opcode in OPS_ONLY or p.opcode == Opcode.RDMA_WRITE_FIRST:
            firsts.append(p.psn)
    assert firsts and set(firsts) == {0}
    # every (sender, lane QP, step) carried PSNs 0..k-1 and nothing else
    assert len(psns) == 3 * 2 * (n - 1) * 2 * n
    for key, got in psns.items():
        assert got == set(range(len(got))), key
    if wire_kw:
        assert sum(q.stats["retransmits"] for c in comms for qs in c.right for q in qs) > 0


def test_step_psn_origin_connects_each_sending_lane_with_its_steps_port() -> None:
    """rdma_rxe fixes a QP's UDP source port (the step tag) at RTR: a sending lane
    is connected with the tag of the step it carries next, so no step changes
    the port of a connected QP, and each step's data still leaves from its tag."""
    n, iterations = 3, 3
    w, comms, _ = make_ring(n, 2, comm_kw={"step_psn_origin": True})
    retags = []
    for c in comms:
        for qp in (q for qs in c.right for q in qs):
            def spy(attr=None, _qp=qp, _modify=qp.modify, **kw):
                if "sport" in kw and "state" not in kw:
                    retags.append((_qp.qp_num, _qp.state.name, kw["sport"]))
                return _modify(attr, **kw)
            qp.modify = spy  # type: ignore[method-assign]
    rng = np.random.default_rng(11)
    for _ in range(iterations):
        exact_all_reduce(w, comms, rng)
    assert retags == []
    steps = {sport_step(sport) for _t, _ip, sport, _p in data_packets(w)}
    assert steps == set(range(iterations * 2 * (n - 1)))


@pytest.mark.parametrize("n", [2, 4])
def test_step_psn_origin_survives_a_lost_final_ack(n: int) -> None:
    """With step_psn_origin, the ACK of a step's last packet is lost once per
    step: the sender times out and retransmits the step's tail, and the
    receiver must still acknowledge it (it has the step's data), so the ring
    completes instead of stalling (a congested fabric drops such ACKs)."""
    w, comms, _ = make_ring(n, 2, comm_kw={"step_psn_origin": True})
    # (receiver ip, sender's QPN) -> the receiving lane's QPN: names the lane an ACK is from
    lane_of = {(f"10.0.0.{c.rank + 1}", q.dest_qp_num): q.qp_num
               for c in comms for qs in c.left for q in qs}
    armed: dict[tuple[str, int], int] = {}   # receiving lane -> its step's last PSN
    dropped = []

    def drop_final_ack(p: wire.Packet, src: str, dst: str) -> str | None:
        if p.opcode in OPS_WRITE and p.psn == 0:
            armed.pop((dst, p.dqpn), None)                      # a new step on the lane
        if p.opcode in (Opcode.RDMA_WRITE_LAST_IMM, Opcode.RDMA_WRITE_ONLY_IMM):
            armed.setdefault((dst, p.dqpn), p.psn)
        elif p.opcode == Opcode.ACK and p.aeth and p.aeth[0] & AETH_KIND_MASK == AETH_KIND_ACK:
            lane = (src, lane_of[(src, p.dqpn)])
            if armed.get(lane) == p.psn:
                armed[lane] = -1                                # once per step
                dropped.append(lane)
                return "drop"
        return None

    w.hook = drop_final_ack
    rng = np.random.default_rng(11)
    for _ in range(2):
        exact_all_reduce(w, comms, rng)
    # every step of every channel lost its final ACK once, and was recovered
    assert len(dropped) == 2 * 2 * (n - 1) * 2 * n
    assert sum(q.stats["rto"] for c in comms for qs in c.right for q in qs) >= len(dropped)


@pytest.mark.parametrize("n", [2, 3, 8])
@pytest.mark.parametrize("root", [0, -1])
def test_reduce_and_broadcast_chains_are_bit_exact(n: int, root: int) -> None:
    root %= n
    w, comms, events = make_ring(n, 1, max_bytes=1 << 14)
    rng = np.random.default_rng(n + root)
    info = np.iinfo(np.int32)
    xs = [rng.integers(info.min // 2, info.max // 2, 1001, dtype=np.int32) for _ in range(n)]
    ops = [c.start_reduce(x, root) for c, x in zip(comms, xs, strict=True)]
    run_all(w, ops)
    with np.errstate(over="ignore"):
        want = np.sum(xs, axis=0, dtype=np.int32)
    assert np.array_equal(ops[root].result(), want)
    ops = [c.start_broadcast(x if c.rank == root else np.zeros_like(x), root)
           for c, x in zip(comms, xs, strict=True)]
    run_all(w, ops)
    for o in ops:
        assert np.array_equal(o.result(), xs[root])
    # a pipelined chain: pieces + n - 2 steps, the root sends every piece once
    steps = [e for e in events if e["event"] == "step_start" and e["collective"] == "broadcast"]
    assert len(steps) == n * (8 * n + n - 2)
    sent = sum(e["bytes"] for e in steps if e["rank"] == root)
    assert sent == xs[root].nbytes


def test_reduce_of_int64_over_two_channels_and_a_barrier() -> None:
    w, comms, _ = make_ring(4, 2)
    xs = [np.full(37, r + 1, dtype=np.int64) for r in range(4)]
    ops = [c.start_reduce(x, 2) for c, x in zip(comms, xs, strict=True)]
    run_all(w, ops)
    assert np.array_equal(ops[2].result(), np.full(37, 10))
    ops = [c.start_barrier() for c in comms]
    run_all(w, ops)
    assert all(o.done for o in ops)
    with pytest.raises(ValueError, match="root 4"):
        comms[0].start_reduce(xs[0], root=4)


def test_a_broadcast_keeps_pieces_that_landed_before_the_rank_started() -> None:
    w, comms, _ = make_ring(3, 1)
    x = np.arange(300, dtype=np.int32)
    root_op = comms[0].start_broadcast(x, 0)
    # the root writes its first piece into rank 1 before rank 1 starts
    assert not w.run(until=lambda: root_op.progress() and False, timeout=0.05)
    ops = [root_op] + [c.start_broadcast(np.full(300, -1, np.int32), 0) for c in comms[1:]]
    run_all(w, ops)
    assert all(np.array_equal(o.result(), x) for o in ops)


def test_step_psn_origin_ignores_a_copy_of_a_step_that_arrives_late() -> None:
    """A copy of a step's first packet that reaches its receiver two and a half
    steps later (a priority queue held it while the step completed) must find
    the lane still in the step's state, which ignores it as a duplicate: a
    lane already reconnected to PSN 0 would take it for the start of a new
    write and put the stale data where the next write belongs."""
    n = 4
    w, comms, _ = make_ring(n, 1, comm_kw={"step_psn_origin": True})
    firsts: list[int] = []
    late: list[int] = []

    def watch(p: wire.Packet, src: str, dst: str) -> object:
        if dst != "10.0.0.2" or p.opcode != Opcode.RDMA_WRITE_FIRST:
            return None
        if plan["delay"] is None:
            firsts.append(w.clock)
            return None
        if not late:
            late.append(w.clock)
            return (0, plan["delay"])          # the packet now and a copy later
        return None

    plan: dict[str, int | None] = {"delay": None}
    w.hook = watch
    rng = np.random.default_rng(5)
    for i in range(2):
        exact_all_reduce(w, comms, rng, f"collective {i}")
        if i == 0:
            gaps = sorted(b - a for a, b in zip(firsts, firsts[1:], strict=False))
            # (the next step's write has completed by then, the one after not)
            plan["delay"] = int(2.5 * gaps[len(gaps) // 2])
    assert late, "no first packet was copied"
    copied = comms[1].left[0]
    assert sum(q.stats["dup_pkts"] for q in copied) == 1     # the copy, ignored


def test_a_phantom_communicator_keeps_no_data() -> None:
    """Phantom buffers stay untouched: what arrives is discarded, nothing is
    reduced, and there is no result to read; the packets are the real ones'."""
    import numpy as np

    from hosts.commlib import CommError

    w, comms, _ = make_ring(3, 1, comm_kw={"phantom": True})
    x = np.broadcast_to(np.zeros(1, dtype=np.int64), (4096,))
    ops = [c.start_all_reduce(x) for c in comms]
    run_all(w, ops)
    assert all(not any(bytes(c.work)) and not any(bytes(c.staging)) for c in comms)
    assert all(c.work_mr.discard_writes and c.staging_mr.discard_writes for c in comms)
    with pytest.raises(CommError, match="phantom"):
        ops[0].result()
    w2, real, _ = make_ring(3, 1)
    ops2 = [c.start_all_reduce(np.arange(4096, dtype=np.int64)) for c in real]
    run_all(w2, ops2)
    assert len(data_packets(w)) == len(data_packets(w2))


def test_a_collective_posts_its_first_step_when_it_starts() -> None:
    """The first step leaves at the start, not at the caller's next poll: a
    collective started right after another is not idle until something wakes
    its rank."""
    w, comms, events = make_ring(3, 1)
    ops = [c.start_all_reduce(np.arange(64, dtype=np.int32)) for c in comms]
    first = [e for e in events if e["event"] == "step_start"]
    assert len(first) == 3 and {e["t_ns"] for e in first} == {ops[0].t_start}


def test_a_step_overhead_delays_every_ring_step() -> None:
    """The host library's per-step overhead: each step's write leaves that much
    after the step became ready, so a latency-bound collective takes about
    2(N-1) overheads longer; the result is the same."""
    n, over = 4, 2_000_000
    xs = [np.full(64, r + 1, dtype=np.int32) for r in range(n)]

    def duration(comm_kw: dict) -> int:
        w, comms, _ = make_ring(n, 1, latency_ns=1000, comm_kw=comm_kw)
        ops = [c.start_all_reduce(x) for c, x in zip(comms, xs, strict=True)]
        run_all(w, ops)
        assert all(np.array_equal(o.result(), np.sum(xs, axis=0)) for o in ops)
        return max((o.t_end or 0) - o.t_start for o in ops)

    plain, slow = duration({}), duration({"step_overhead_ns": over})
    steps = 2 * (n - 1)
    assert slow - plain == pytest.approx(steps * over, rel=0.01)
    with pytest.raises(ValueError):
        make_ring(2, 1, comm_kw={"step_overhead_ns": -1})
