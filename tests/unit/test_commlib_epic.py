"""CommLib collectives over epic.p4: unmodified RC ranks on the simulated wire,
the real P4 program running in-process as the switch (testbed.epic.SimSwitch).
Results against numpy, for group sizes 2-8, under loss and reordering."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest

from hosts.commlib import CommError, ReduceOp, split
from hosts.commlib.epic import (
    ELEMS,
    MAX_GROUPS,
    MAX_WINDOW,
    WINDOW,
    EpicCommunicator,
    EpicEndpoint,
    EpicKind,
    EpicOp,
    fixed_point_bound,
    fixed_point_factor,
    group_index,
    ladder_sum,
    ladder_values,
)
from hosts.roce.scale import Scale
from hosts.roce.sim import SimWire
from hosts.roce.verbs import Context
from testbed.epic import EPIC_P4, SimSwitch, communicator_groups, install_commands

SWITCH_IP = "10.255.0.1"


def make_group(n: int, *, max_bytes: int = 1 << 15, comm_kw: dict | None = None,
               defines: dict[str, str] | None = None, scale: Scale | None = None, **wire_kw):
    w = SimWire(**wire_kw)
    ips = [f"10.0.{r + 1}.1" for r in range(n)]
    sw = SimSwitch(w, [SWITCH_IP], {ip: r + 1 for r, ip in enumerate(ips)}, defines=defines)
    ep = EpicEndpoint(SWITCH_IP, 0x100, 0)
    comms = [EpicCommunicator(Context(w.provider(ip), scale=scale or Scale()), r, n, ep,
                              max_bytes=max_bytes, **(comm_kw or {}))
             for r, ip in enumerate(ips)]
    members = [sw.member(c.rank, c.ctx.local_ip, c.qp.qp_num) for c in comms]
    groups = communicator_groups(ep, members, [c.local_info()["qpns"] for c in comms])
    for line in install_commands(groups):
        sw.command(line)
    for c in comms:
        c.connect()
    return w, sw, comms


def run(w: SimWire, ops, timeout: float = 120.0) -> list:
    assert w.run(until=lambda: all([o.progress() for o in ops]), timeout=timeout)
    return [o.result() for o in ops]


def events(sw: SimSwitch, index: int) -> int:
    """Packets counted at MyIngress.epic_events[index] (EPIC_EV_* in epic.p4)."""
    return sw.sw.counter("MyIngress.epic_events").read(index)[1]


def no_icrc_drops(comms) -> bool:
    return all(c.ctx.engine.stats["icrc_drops"] == 0 for c in comms)


@pytest.mark.parametrize("n", [2, 3, 5, 8])
def test_allreduce_int32_bit_exact(n: int) -> None:
    w, sw, comms = make_group(n)
    rng = np.random.default_rng(n)
    # 2000 elements: 32 packets, not a multiple of the packet size
    xs = [rng.integers(-(2**27), 2**27, 2000, dtype=np.int32) for _ in range(n)]
    res = run(w, [c.start_all_reduce(x) for c, x in zip(comms, xs, strict=True)])
    expect = np.sum(xs, axis=0, dtype=np.int32)
    for r in res:
        assert r.dtype == np.int32 and np.array_equal(r, expect)
    assert no_icrc_drops(comms)     # every result's ICRC (computed in P4) was accepted
    assert events(sw, 1) == 33      # completions: the announcement + 32 data packets


@pytest.mark.parametrize("n", [2, 4, 8])
def test_allreduce_float_within_fixed_point_bound(n: int) -> None:
    w, _, comms = make_group(n)
    rng = np.random.default_rng(10 + n)
    xs = [(rng.standard_normal(1500) * 10.0 ** rng.integers(-3, 4)).astype(np.float32)
          for _ in range(n)]
    res = run(w, [c.start_all_reduce(x) for c, x in zip(comms, xs, strict=True)])
    exact = np.sum(np.stack(xs).astype(np.float64), axis=0)
    factor = fixed_point_factor(sum(float(np.max(np.abs(x))) for x in xs))
    bound = fixed_point_bound(n, factor) + np.abs(exact) * 2.0**-23   # + float32 rounding
    for r in res:
        assert r.dtype == np.float32
        assert np.all(np.abs(r.astype(np.float64) - exact) <= bound * 1.01)


def test_fixed_point_agreement_bounds_the_sum_of_maxima() -> None:
    maxima = [3.5e-7, 12.25, 0.0, 7.0e5]
    summed = np.sum([ladder_values(m) for m in maxima], axis=0, dtype=np.int64)
    est = ladder_sum(summed)
    assert sum(maxima) <= est <= sum(maxima) * (1 + 1e-6)
    assert ladder_sum(np.zeros(ELEMS, np.int64)) == 0.0


def test_int32_sums_saturate() -> None:
    w, _, comms = make_group(3)
    big = np.array([2**31 - 10, -(2**31) + 10, 5], dtype=np.int32)
    res = run(w, [c.start_all_reduce(big) for c in comms])
    assert res[0].tolist() == [2**31 - 1, -(2**31), 15]


@pytest.mark.parametrize("n", [2, 3, 6, 8])
def test_primitives(n: int) -> None:
    w, _, comms = make_group(n)
    rng = np.random.default_rng(100 + n)
    xs = [rng.integers(-1000, 1000, 300, dtype=np.int32) for _ in range(n)]
    total = np.sum(xs, axis=0, dtype=np.int32)
    root = n - 1
    res = run(w, [c.start_reduce(x, root) for c, x in zip(comms, xs, strict=True)])
    assert np.array_equal(res[root], total) and all(r is None for r in res[:root])
    fl = [rng.standard_normal(77).astype(np.float64) for _ in range(n)]
    res = run(w, [c.start_broadcast(x, 1) for c, x in zip(comms, fl, strict=True)])
    assert all(np.array_equal(r, fl[1]) for r in res)         # exact: bits, not sums
    res = run(w, [c.start_all_gather(x) for c, x in zip(comms, fl, strict=True)])
    assert all(np.array_equal(r, np.concatenate(fl)) for r in res)
    res = run(w, [c.start_reduce_scatter(x) for c, x in zip(comms, xs, strict=True)])
    for r, out in enumerate(res):
        off, ln = split(300, n)[r]
        assert np.array_equal(out, total[off: off + ln])
    assert run(w, [c.start_barrier() for c in comms]) == [None] * n


def reduce_qp_rx(c: EpicCommunicator, root: int) -> int:
    """Packets rank ``c`` received on root's Reduce group."""
    return c.qps[group_index(EpicKind.REDUCE, root, c.size)].stats["rx_pkts"]


def test_reduce_sends_the_sum_to_the_root_alone() -> None:
    n, root = 4, 1
    w, sw, comms = make_group(n)
    rng = np.random.default_rng(7)
    xs = [rng.integers(-(2**20), 2**20, 1000, dtype=np.int32) for _ in range(n)]
    res = run(w, [c.start_reduce(x, root) for c, x in zip(comms, xs, strict=True)])
    assert np.array_equal(res[root], np.sum(xs, axis=0, dtype=np.int32))
    assert all(r is None for i, r in enumerate(res) if i != root)
    npkts = 1 + -(-1000 // ELEMS)           # the announcement + the data packets
    assert reduce_qp_rx(comms[root], root) == npkts
    assert all(reduce_qp_rx(c, root) == 0 for c in comms if c.rank != root)
    # every non-root rank's uploads were acknowledged by the root's ACKs alone
    assert all(c.qps[group_index(EpicKind.REDUCE, root, n)].stats["acks_rcvd"] > 0
               for c in comms)


@pytest.mark.parametrize("n", [2, 5])
def test_float_reduce_and_reduce_scatter_within_fixed_point_bound(n: int) -> None:
    w, _, comms = make_group(n)
    rng = np.random.default_rng(20 + n)
    xs = [rng.standard_normal(700).astype(np.float32) for _ in range(n)]
    exact = np.sum(np.stack(xs).astype(np.float64), axis=0)
    factor = fixed_point_factor(sum(float(np.max(np.abs(x))) for x in xs))
    bound = (fixed_point_bound(n, factor) + np.abs(exact) * 2.0**-23) * 1.01
    res = run(w, [c.start_reduce(x, 0) for c, x in zip(comms, xs, strict=True)])
    assert res[0].dtype == np.float32 and np.all(np.abs(res[0] - exact) <= bound)
    res = run(w, [c.start_reduce_scatter(x) for c, x in zip(comms, xs, strict=True)])
    for r, out in enumerate(res):
        off, ln = split(700, n)[r]
        assert np.all(np.abs(out - exact[off: off + ln]) <= bound[off: off + ln])


def test_broadcast_completes_at_the_root_only_when_every_child_has_it() -> None:
    """The children's ACKs are aggregated with min: a child that has not posted its
    receives yet (its RNR NAKs go to the root) holds the root back."""
    w, sw, comms = make_group(3)
    x = np.arange(500, dtype=np.int32)
    early = [comms[0].start_broadcast(x, 0), comms[1].start_broadcast(np.zeros_like(x), 0)]
    w.run(until=lambda: all([o.progress() for o in early]), timeout=Scale().rto_ns * 6e-9)
    assert not early[0].done
    assert comms[0].qps[group_index(EpicKind.BROADCAST, 0, 3)].stats["rnr_naks_rcvd"] > 0
    late = comms[2].start_broadcast(np.zeros_like(x), 0)
    res = run(w, early + [late])
    assert all(np.array_equal(r, x) for r in res)
    bq = group_index(EpicKind.BROADCAST, 0, 3)
    assert comms[0].qps[bq].stats["rx_pkts"] == 0      # the root receives nothing


def test_barrier_waits_for_every_rank() -> None:
    w, _, comms = make_group(3)
    early = [c.start_barrier() for c in comms[:2]]
    w.run(until=lambda: any([o.progress() for o in early]), timeout=Scale().rto_ns * 4e-9)
    assert not any(o.done for o in early)
    late = comms[2].start_barrier()
    run(w, early + [late])


def test_a_rank_late_by_many_timeouts_only_costs_retransmissions() -> None:
    w, sw, comms = make_group(2)
    early = comms[0].start_barrier()
    w.run(until=early.progress, timeout=Scale().rto_ns * 20e-9)
    assert not early.done and events(sw, 2) > 0     # retransmissions held as duplicates
    run(w, [early, comms[1].start_barrier()])


@pytest.mark.parametrize("n", [3, 8])
def test_all_primitives_under_loss_and_reordering(n: int) -> None:
    w, sw, comms = make_group(n, loss=0.01, reorder=0.01, seed=n)
    rng = np.random.default_rng(n)
    for it in range(2):
        xs = [rng.integers(-(2**20), 2**20, 3000, dtype=np.int32) for _ in range(n)]
        res = run(w, [c.start_all_reduce(x) for c, x in zip(comms, xs, strict=True)])
        assert all(np.array_equal(r, np.sum(xs, axis=0, dtype=np.int32)) for r in res)
        fs = [rng.standard_normal(1000).astype(np.float32) for _ in range(n)]
        res = run(w, [c.start_all_reduce(x) for c, x in zip(comms, fs, strict=True)])
        exact = np.sum(np.stack(fs).astype(np.float64), axis=0)
        factor = fixed_point_factor(sum(float(np.max(np.abs(x))) for x in fs))
        bound = fixed_point_bound(n, factor) + np.abs(exact) * 2.0**-23
        assert all(np.all(np.abs(r - exact) <= bound * 1.01) for r in res)
        res = run(w, [c.start_all_gather(x[:100]) for c, x in zip(comms, xs, strict=True)])
        assert all(np.array_equal(r, np.concatenate([x[:100] for x in xs])) for r in res)
        res = run(w, [c.start_broadcast(x, it) for c, x in zip(comms, fs, strict=True)])
        assert all(np.array_equal(r, fs[it]) for r in res)
        res = run(w, [c.start_reduce(x, n - 1 - it) for c, x in zip(comms, xs, strict=True)])
        assert np.array_equal(res[n - 1 - it], np.sum(xs, axis=0, dtype=np.int32))
        res = run(w, [c.start_reduce_scatter(x) for c, x in zip(comms, xs, strict=True)])
        for r, out in enumerate(res):
            off, ln = split(3000, n)[r]
            assert np.array_equal(out, np.sum(xs, axis=0, dtype=np.int32)[off: off + ln])
        run(w, [c.start_barrier() for c in comms])
    assert w.counters["dropped"] > 0 and w.counters["reordered"] > 0
    assert events(sw, 3) > 0        # retransmissions answered from completed slots
    assert no_icrc_drops(comms)


def test_bad_input_is_refused_clearly() -> None:
    _, _, comms = make_group(2)
    with pytest.raises(CommError, match="adds"):
        comms[0].start_all_reduce(np.zeros(4, np.int32), ReduceOp.MAX)
    with pytest.raises(TypeError, match="int64"):
        comms[0].start_all_reduce(np.zeros(4, np.int64))
    with pytest.raises(CommError, match="max_bytes"):
        comms[0].start_all_reduce(np.zeros(1 << 14, np.int32))
    with pytest.raises(ValueError, match="root"):
        comms[0].start_broadcast(np.zeros(4, np.int32), root=5)
    with pytest.raises(ValueError, match="group id"):
        EpicEndpoint(SWITCH_IP, 0x100, MAX_GROUPS)


def _in_flight(comms) -> int:
    """Packets posted and not yet acknowledged, the most of any rank's QP."""
    return max(q._snd_nxt - q._snd_una for c in comms for q in c.qps)


def run_counting_in_flight(w: SimWire, ops, comms) -> tuple[list, int]:
    most = [0]

    def done() -> bool:
        most[0] = max(most[0], _in_flight(comms))
        return all([o.progress() for o in ops])
    assert w.run(until=done, timeout=120.0)
    return [o.result() for o in ops], most[0]


@pytest.mark.parametrize("log2", [None, 7])
def test_a_larger_window_keeps_more_packets_in_flight(log2: int | None) -> None:
    """A switch compiled with EPIC_WINDOW_LOG2 = 7 (128 packets per rank) and
    ranks told so keep up to 128 packets in flight, not the default 32, and
    the sums stay exact over several turns of the switch's 2W slots."""
    window = WINDOW if log2 is None else 1 << log2
    n = 3
    # NICs at 100 Gb/s (slowdown 1) on a wire of 10 us: a round trip is worth
    # thousands of packets, so the window alone bounds what is in flight
    w, sw, comms = make_group(n, max_bytes=1 << 20, comm_kw={"window": window},
                              defines=None if log2 is None else {"EPIC_WINDOW_LOG2": str(log2)},
                              scale=Scale(slowdown=1.0))
    assert sw.sw.registers["MyIngress.slot_psn"].size == 2 * window * MAX_GROUPS
    assert all(c.window == window and c.chunk_pkts == window // 2 for c in comms)
    rng = np.random.default_rng(7)
    npkts = 5 * window + 3                      # 2.5 turns of the 2W slots
    xs = [rng.integers(-(2**27), 2**27, npkts * ELEMS, dtype=np.int32) for _ in range(n)]
    res, most = run_counting_in_flight(
        w, [c.start_all_reduce(x) for c, x in zip(comms, xs, strict=True)], comms)
    expect = np.sum(xs, axis=0, dtype=np.int32)
    assert all(np.array_equal(r, expect) for r in res)
    assert most == window                       # two SENDs of W/2: the whole window
    assert events(sw, 4) == 0                   # no packet fell outside its slot's window


def test_the_window_must_be_one_a_switch_can_have() -> None:
    w = SimWire()
    ctx = Context(w.provider("10.0.1.1"), scale=Scale())
    ep = EpicEndpoint(SWITCH_IP, 0x100, 0)
    for bad in (0, 1, 48, 3 * 64, 2 * MAX_WINDOW, True, 32.0):
        with pytest.raises(ValueError, match="power of two"):
            EpicCommunicator(ctx, 0, 2, ep, window=bad)
    with pytest.raises(ValueError, match="chunk_pkts must be in 1..64"):
        EpicCommunicator(ctx, 0, 2, ep, window=128, chunk_pkts=65)
    c = EpicCommunicator(ctx, 0, 2, ep, window=128, chunk_pkts=64)
    assert c.chunk_pkts == 64


def test_constants_match_the_p4_program() -> None:
    text = Path(EPIC_P4).read_text()

    def define(name: str) -> int:
        m = re.search(rf"#define {name} (\d+)", text)
        assert m, name
        return int(m.group(1))

    assert define("EPIC_ELEMS") == ELEMS
    assert 1 << define("EPIC_WINDOW_LOG2") == WINDOW
    from hosts.agent_spec import EPIC_WINDOW
    assert EPIC_WINDOW == WINDOW                # a spec's default window is the program's
    assert 1 << define("EPIC_MAX_GROUPS_LOG2") == MAX_GROUPS
    for op in EpicOp:
        m = re.search(rf"const bit<8> EPIC_OP_{op.name} = (\d+);", text)
        assert m and int(m.group(1)) == op.value, op


def test_all_gather_posts_every_rounds_receives_up_front() -> None:
    w, _, comms = make_group(4)
    xs = [np.full(700, r, np.int32) for r in range(4)]
    ops = [c.start_all_gather(x) for c, x in zip(comms, xs, strict=True)]
    # rank 3 does not look at its completions for a while: the Broadcasts of
    # the other roots must still find receives posted on its QPs (else: RNR NAKs)
    assert not w.run(until=lambda: all([o.progress() for o in ops[:3]]) and False, timeout=0.05)
    res = run(w, ops)
    assert all(np.array_equal(r, np.concatenate(xs)) for r in res)
    assert sum(q.stats["rnr_naks_sent"] for c in comms for q in c.qps) == 0


def test_loss_on_the_links_into_and_out_of_the_switch_is_repaired() -> None:
    w, sw, comms = make_group(4, max_bytes=1 << 16)
    # 1 % in each direction: the P4 program's tables, not the wire's loss
    sw.command("table_set_default MyIngress.link_loss MyIngress.set_loss 100")
    sw.command("table_set_default MyEgress.link_loss MyEgress.set_loss 100")
    rng = np.random.default_rng(7)
    xs = [rng.integers(-1000, 1000, 8000, dtype=np.int32) for _ in range(4)]
    res = run(w, [c.start_all_reduce(x) for c, x in zip(comms, xs, strict=True)], timeout=600)
    assert all(np.array_equal(r, np.sum(xs, axis=0, dtype=np.int32)) for r in res)
    assert sum(c.qp.stats["retransmits"] for c in comms) > 0     # losses did happen
    # every packet lost on the way in: nothing reaches the slots
    sw.command("table_set_default MyIngress.link_loss MyIngress.set_loss 10000")
    counted = events(sw, 0)
    ops = [c.start_barrier() for c in comms]
    assert not w.run(until=lambda: all([o.progress() for o in ops]), timeout=0.01)
    assert events(sw, 0) == counted


def test_phantom_allreduce_sends_the_same_packets_without_the_data() -> None:
    """Phantom EPIC AllReduce: the buffers stay untouched (the switch adds
    zeros), what comes back is discarded, there is no result; the switch
    completes the same slots and the ranks send the same packets as with data.
    Only AllReduce and Barrier run phantom."""
    n, count = 4, 5000
    w, sw, comms = make_group(n, comm_kw={"phantom": True})
    x = np.broadcast_to(np.zeros(1, dtype=np.int32), (count,))
    ops = [c.start_all_reduce(x) for c in comms]
    assert w.run(until=lambda: all([o.progress() for o in ops]), timeout=120)
    assert all(o.result() is None for o in ops)
    assert all(not any(bytes(c._send[8:])) and not any(bytes(c._recv)) for c in comms)
    assert all(c._recv_mr.discard_writes for c in comms)
    w2, sw2, real = make_group(n)
    run(w2, [c.start_all_reduce(np.ones(count, dtype=np.int32)) for c in real])
    assert events(sw, 1) == events(sw2, 1)
    assert ([c.qp.stats["tx_pkts"] for c in comms] == [c.qp.stats["tx_pkts"] for c in real])
    with pytest.raises(CommError, match="phantom"):
        comms[0].start_broadcast(x)
    with pytest.raises(TypeError, match="int32"):
        comms[0].start_all_reduce(np.broadcast_to(np.zeros(1, np.float32), (8,)))


def test_a_step_overhead_delays_each_round_once() -> None:
    """The host library's per-step overhead, paid once per EPIC round (an int32
    AllReduce is one round) however many packets it sends."""
    n, over = 3, 5_000_000
    x = [np.full(3000, r, dtype=np.int32) for r in range(n)]

    def duration(comm_kw: dict) -> int:
        w, _sw, comms = make_group(n, comm_kw=comm_kw, latency_ns=1000)
        ops = [c.start_all_reduce(v) for c, v in zip(comms, x, strict=True)]
        res = run(w, ops)
        assert all(np.array_equal(r, np.sum(x, axis=0, dtype=np.int32)) for r in res)
        return max((o.t_end or 0) - o.t_start for o in ops)

    assert duration({"step_overhead_ns": over}) - duration({}) == pytest.approx(over, rel=0.01)
