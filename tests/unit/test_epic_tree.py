"""EPIC over a multi-switch tree: the controller's aggregation tree (the
paper's Tree-3-2: root S0, leaves S1 and S2 with two ranks each) programs one
epic.p4 per switch, and unmodified CommLib ranks run AllReduce and Barrier
through it on the simulated wire, whose impairments hit the links between
the switches too."""

from __future__ import annotations

import numpy as np
import pytest

from hosts.commlib.epic import EpicCommunicator, EpicEndpoint, fixed_point_bound, fixed_point_factor
from hosts.roce.scale import Scale
from hosts.roce.sim import SimWire
from hosts.roce.verbs import Context
from testbed.epic import (
    AggregationTree,
    EpicGroup,
    EpicMember,
    SimSwitch,
    SwitchPort,
    TreeSwitch,
    fabric_link,
    fabric_tree,
    tree_nodes,
)
from testbed.net import LeafSpine

ROOT_IP, LEAF_IPS = "10.255.0.1", ("10.255.0.11", "10.255.0.12")
UPLINK = 3           # a leaf's port to the root; the root's port to leaf i is i
TREE_3_2 = AggregationTree(
    (TreeSwitch("s0", ROOT_IP), TreeSwitch("s1", LEAF_IPS[0], "s0"),
     TreeSwitch("s2", LEAF_IPS[1], "s0")),
    rank_switch=("s1", "s1", "s2", "s2"))

# EPIC_EV_* of epic.p4
EV_CONTRIBUTION, EV_COMPLETION, EV_RESENT, EV_UP, EV_UP_RESENT = 0, 1, 3, 10, 11


def link(a: str, b: str) -> SwitchPort:
    port = UPLINK if b == "s0" else int(b[1:])
    return SwitchPort(port, SimSwitch.port_mac(port))


def make_tree(*, max_bytes: int = 1 << 15, **wire_kw):
    w = SimWire(**wire_kw)
    ips = [f"10.0.{r + 1}.1" for r in range(4)]
    root = SimSwitch(w, [ROOT_IP], {LEAF_IPS[0]: 1, LEAF_IPS[1]: 2})
    leaves = [SimSwitch(w, [LEAF_IPS[i]], {ips[2 * i]: 1, ips[2 * i + 1]: 2, ROOT_IP: UPLINK})
              for i in range(2)]
    switches = {"s0": root, "s1": leaves[0], "s2": leaves[1]}
    comms = [EpicCommunicator(Context(w.provider(ip), scale=Scale()), r, 4,
                              EpicEndpoint(LEAF_IPS[r // 2], 0x100, 0), max_bytes=max_bytes)
             for r, ip in enumerate(ips)]
    members = [switches[TREE_3_2.rank_switch[c.rank]].member(c.rank, c.ctx.local_ip,
                                                             c.qp.qp_num) for c in comms]
    groups = TREE_3_2.groups(EpicEndpoint(ROOT_IP, 0x100, 0), members, link)
    for name, g in groups.items():
        for line in g.switch_commands():
            switches[name].command(line)
    for c in comms:
        c.connect()
    return w, switches, comms


def run(w: SimWire, ops, timeout: float = 120.0) -> list:
    assert w.run(until=lambda: all([o.progress() for o in ops]), timeout=timeout)
    return [o.result() for o in ops]


def events(sw: SimSwitch, index: int) -> int:
    return sw.sw.counter("MyIngress.epic_events").read(index)[1]


def test_allreduce_over_the_tree_is_bit_exact_and_aggregated_in_the_switches() -> None:
    w, sws, comms = make_tree()
    rng = np.random.default_rng(3)
    xs = [rng.integers(-(2**28), 2**28, 2000, dtype=np.int32) for _ in range(4)]
    res = run(w, [c.start_all_reduce(x) for c, x in zip(comms, xs, strict=True)])
    expect = np.sum(xs, axis=0, dtype=np.int32)
    assert all(r.dtype == np.int32 and np.array_equal(r, expect) for r in res)
    # 32 data packets + the announcement: each leaf adds its two ranks and sends
    # one partial sum up per PSN; the root adds the two leaves' and multicasts
    for leaf in ("s1", "s2"):
        assert events(sws[leaf], EV_CONTRIBUTION) == 2 * 33
        assert events(sws[leaf], EV_UP) == 33
        assert events(sws[leaf], EV_COMPLETION) == 33      # the parent's results, copied down
    assert events(sws["s0"], EV_CONTRIBUTION) == 2 * 33
    assert events(sws["s0"], EV_COMPLETION) == 33
    assert events(sws["s0"], EV_UP) == 0
    assert all(c.ctx.engine.stats["icrc_drops"] == 0 for c in comms)
    assert run(w, [c.start_barrier() for c in comms]) == [None] * 4


def test_float_allreduce_over_the_tree_within_the_fixed_point_bound() -> None:
    w, _, comms = make_tree()
    rng = np.random.default_rng(5)
    xs = [(rng.standard_normal(1500) * 10.0 ** rng.integers(-3, 4)).astype(np.float32)
          for _ in range(4)]
    res = run(w, [c.start_all_reduce(x) for c, x in zip(comms, xs, strict=True)])
    exact = np.sum(np.stack(xs).astype(np.float64), axis=0)
    factor = fixed_point_factor(sum(float(np.max(np.abs(x))) for x in xs))
    bound = fixed_point_bound(4, factor) + np.abs(exact) * 2.0**-23
    for r in res:
        assert r.dtype == np.float32
        assert np.all(np.abs(r.astype(np.float64) - exact) <= bound * 1.01)


@pytest.mark.parametrize("seed", [1, 2])
def test_loss_and_reordering_on_every_hop_are_repaired_end_to_end(seed: int) -> None:
    w, sws, comms = make_tree(loss=0.01, reorder=0.01, seed=seed)
    rng = np.random.default_rng(seed)
    for _ in range(2):
        xs = [rng.integers(-(2**20), 2**20, 3000, dtype=np.int32) for _ in range(4)]
        res = run(w, [c.start_all_reduce(x) for c, x in zip(comms, xs, strict=True)])
        assert all(np.array_equal(r, np.sum(xs, axis=0, dtype=np.int32)) for r in res)
        run(w, [c.start_barrier() for c in comms])
    assert w.counters["dropped"] > 0 and w.counters["reordered"] > 0
    # ranks resent: leaves answered from their slots or sent the partial sum up again
    assert sum(events(sws[s], EV_RESENT) + events(sws[s], EV_UP_RESENT)
               for s in ("s1", "s2")) > 0


def test_a_partial_sum_lost_between_the_switches_is_sent_up_again() -> None:
    w, sws, comms = make_tree()
    lost = []

    def drop_first_up(pkt, src_ip: str, dst_ip: str):
        # the first partial sum leaf s1 sends the root, once
        if src_ip == LEAF_IPS[0] and dst_ip == ROOT_IP and not lost:
            lost.append(pkt)
            return "drop"
        return None

    w.hook = drop_first_up
    xs = [np.full(300, r + 1, np.int32) for r in range(4)]
    res = run(w, [c.start_all_reduce(x) for c, x in zip(comms, xs, strict=True)])
    assert lost and all(np.array_equal(r, np.full(300, 10, np.int32)) for r in res)
    assert events(sws["s1"], EV_UP_RESENT) > 0      # the ranks' resends went up again


def test_the_tree_description_is_checked() -> None:
    s0 = TreeSwitch("s0", ROOT_IP)
    with pytest.raises(ValueError, match="exactly one root"):
        AggregationTree((s0, TreeSwitch("s1", LEAF_IPS[0])), ("s0", "s1"))
    with pytest.raises(ValueError, match="cycle"):
        AggregationTree((s0, TreeSwitch("s1", LEAF_IPS[0], "s2"),
                         TreeSwitch("s2", LEAF_IPS[1], "s1")), ("s0",))
    with pytest.raises(ValueError, match="not a switch of the tree"):
        AggregationTree((s0, TreeSwitch("s1", LEAF_IPS[0], "s9")), ("s1",))
    with pytest.raises(ValueError, match="unknown switch"):
        AggregationTree((s0,), ("s0", "s7"))
    with pytest.raises(ValueError, match="s2 has 0 children"):
        AggregationTree((s0, TreeSwitch("s1", LEAF_IPS[0], "s0"),
                         TreeSwitch("s2", LEAF_IPS[1], "s0")), ("s1", "s1"))
    m = EpicMember(0, "10.0.1.1", 0x11, 1, "00:00:00:00:00:01", "02:00:00:00:00:01")
    with pytest.raises(ValueError, match="ranks 0..N-1"):
        TREE_3_2.groups(EpicEndpoint(ROOT_IP, 0x100, 0), [m], link)
    from hosts.commlib.epic import EpicKind
    from testbed.epic import EpicParent
    with pytest.raises(ValueError, match="cannot span switches"):
        EpicGroup(EpicEndpoint(ROOT_IP, 0x100, 0), (m,), kind=EpicKind.REDUCE, ack_mgid=2,
                  parent=EpicParent(ROOT_IP, 0x100, 3, "02:00:00:00:00:01", "02:00:00:00:00:03"))
    assert TREE_3_2.depth() == 2 and TREE_3_2.root.name == "s0"


def test_a_leaf_spine_fabric_gives_the_tree_its_ports() -> None:
    fab = LeafSpine(leaves=2, spines=1, hosts_per_leaf=2, ecmp=False)
    group = {"gid": 0, "qpn": 0x100, "tree": {
        "spine1": {"ip": ROOT_IP}, "leaf1": {"ip": LEAF_IPS[0], "parent": "spine1"},
        "leaf2": {"ip": LEAF_IPS[1], "parent": "spine1"}}}
    tree = fabric_tree(group, fab)
    assert tree.rank_switch == ("leaf1", "leaf1", "leaf2", "leaf2")
    assert tree_nodes(group, fab, 4) == {"spine1": 2, "leaf1": 2, "leaf2": 2}
    ln = fabric_link(fab)
    assert ln("leaf2", "spine1").port == 3 and ln("spine1", "leaf2").port == 2
    lines = "\n".join(tree.groups(EpicEndpoint(ROOT_IP, 0x100, 0), [
        EpicMember(r, f"10.0.{r + 1}.1", 0x11, r % 2 + 1, "00:00:00:00:00:01",
                   "02:00:00:00:00:01") for r in range(4)], ln)["leaf2"].switch_commands())
    assert f"MyIngress.set_parent 0 => {ROOT_IP} 3" in lines
    assert f"{LeafSpine.port_mac('spine1', 2)} {LeafSpine.port_mac('leaf2', 3)} {ROOT_IP}" in lines
    with pytest.raises(ValueError, match="not in the fabric"):
        fabric_tree({"tree": {"spine7": {"ip": ROOT_IP}}}, fab)
    with pytest.raises(ValueError, match="not linked"):
        fabric_tree({"tree": {"leaf1": {"ip": ROOT_IP}, "leaf2": {"ip": LEAF_IPS[1],
                                                                  "parent": "leaf1"}}}, fab)
