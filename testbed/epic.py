"""Controller side of EPIC groups, and epic.p4 on the simulated wire.

- ``EpicGroup`` / ``EpicMember``: a group as the controller knows it (the
  endpoint, what it runs, each rank's address, port and QPN) -> the
  simple_switch_CLI lines that install it on epic.p4 (switches/p4/EPIC.md),
  on either target. ``communicator_groups``: the 2N+1 groups of one
  communicator (AllReduce, a Reduce and a Broadcast group per root).
- ``SimSwitch``: the soft switch running epic.p4 in-process as one node of a
  ``hosts.roce.sim.SimWire``: every datagram sent to one of its addresses
  becomes an Ethernet/IPv4/UDP frame on the port of its sender, goes through
  the P4 pipeline, and what the program emits goes back onto the wire. Tests
  and what-if runs use it to run unmodified CommLib ranks against the real
  P4 program without Mininet.
"""

from __future__ import annotations

import json
import os
import re
import socket
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypedDict

from ground.wire.ethernet import ETH_HLEN, ETHERNET, ETHERTYPE_IPV4, mac_bytes
from ground.wire.ipv4 import IPV4, IPV4_HLEN, with_checksum
from ground.wire.udp import UDP_HLEN
from hosts.commlib.epic import (
    MAX_RANKS,
    EpicEndpoint,
    EpicKind,
    check_window,
    group_count,
    group_kind,
)

if TYPE_CHECKING:
    from hosts.agent_spec import JobSpec
    from hosts.roce.sim import SimWire
    from testbed.net import LeafSpine

P4_DIR = Path(__file__).resolve().parents[1] / "switches" / "p4"
EPIC_P4 = P4_DIR / "epic.p4"

@dataclass(frozen=True)
class EpicMember:
    rank: int
    ip: str
    qpn: int
    port: int          # switch port towards the rank
    mac: str           # the rank's MAC
    switch_mac: str    # the switch port's MAC


@dataclass(frozen=True)
class EpicParent:
    """A tree group's parent: the next switch up, as the child switch sees it."""

    ip: str            # the parent's endpoint IP
    qpn: int           # the parent's QPN for the group
    port: int          # the child switch's port towards the parent
    mac: str           # the MAC of the parent's port on that link
    switch_mac: str    # the MAC of the child's port on that link


@dataclass(frozen=True)
class EpicGroup:
    """One switch group. ``mgid``: the PRE group results go to (AllReduce: every
    rank; Reduce: the root; Broadcast: every rank but the root); ``ack_mgid``:
    the PRE group of the root's ACKs (Reduce: every rank) or the children's
    aggregated ACK (Broadcast: the root); AllReduce has none (0)."""

    endpoint: EpicEndpoint
    members: tuple[EpicMember, ...]
    mgid: int = 1
    kind: EpicKind = EpicKind.ALLREDUCE
    root: int = 0
    ack_mgid: int = 0
    # In a multi-switch tree, the parent of a switch that is not the root: a
    # complete slot's sum goes to it, its result comes back and is multicast.
    parent: EpicParent | None = None

    def __post_init__(self) -> None:
        n = len(self.members)
        if self.parent is not None and self.kind is not EpicKind.ALLREDUCE:
            raise ValueError(f"a {self.kind.name} group cannot span switches: only AllReduce "
                             "groups (AllReduce, Barrier) have a parent")
        if not 0 < n <= MAX_RANKS:
            raise ValueError(f"a group has 1..{MAX_RANKS} ranks, not {n}")
        if sorted(m.rank for m in self.members) != list(range(n)):
            raise ValueError("group members must be ranks 0..N-1, each once")
        if not 0 < self.mgid < 0x10000:
            raise ValueError(f"multicast group {self.mgid} out of range 1..65535")
        if not 0 <= self.root < n:
            raise ValueError(f"root {self.root} is not a rank of the {n}-rank group")
        if self.kind is not EpicKind.ALLREDUCE and not (
                0 < self.ack_mgid < 0x10000 and self.ack_mgid != self.mgid):
            raise ValueError(f"a {self.kind.name} group needs an ACK multicast group "
                             f"(1..65535, not {self.mgid}), not {self.ack_mgid}")

    def rid(self, rank: int) -> int:
        """Replication id of a rank's copy (gid << 5 | rank, as epic.p4 computes it)."""
        return (self.endpoint.gid << 5) | rank

    def pre_groups(self) -> list[tuple[int, list[int]]]:
        """(mgid, ranks) of the group's multicast groups."""
        ranks = list(range(len(self.members)))
        others = [r for r in ranks if r != self.root]
        if self.kind is EpicKind.ALLREDUCE:
            return [(self.mgid, ranks)]
        if self.kind is EpicKind.REDUCE:
            return [(self.mgid, [self.root]), (self.ack_mgid, ranks)]
        return [(self.mgid, others), (self.ack_mgid, [self.root])]

    def node_count(self) -> int:
        """Multicast nodes ``switch_commands`` creates."""
        return sum(len(r) for _, r in self.pre_groups())

    def switch_commands(self, node_base: int = 0) -> list[str]:
        """The lines that install the group. ``node_base``: multicast node handles
        the switch already gave out (handles are assigned in creation order)."""
        ep = self.endpoint
        cmds = [f"table_add MyIngress.epic_group MyIngress.set_group {ep.switch_ip} "
                f"{ep.qpn:#x} => {ep.gid} {len(self.members)} {int(self.kind)} {self.root} "
                f"{self.mgid} {self.ack_mgid}"]
        if self.parent is not None:
            up = self.parent
            cmds.append(f"table_add MyIngress.epic_parent MyIngress.set_parent {ep.gid} => "
                        f"{up.ip} {up.port}")
            cmds.append(f"table_add MyEgress.epic_parent_addr MyEgress.set_rank_addr {ep.gid} => "
                        f"{up.mac} {up.switch_mac} {up.ip} {up.qpn:#x}")
        by_rank = sorted(self.members, key=lambda m: m.rank)
        for m in by_rank:
            cmds.append(f"table_add MyIngress.epic_member MyIngress.set_member {ep.gid} "
                        f"{m.ip} => {m.rank}")
            cmds.append(f"table_add MyEgress.epic_rank_addr MyEgress.set_rank_addr "
                        f"{self.rid(m.rank)} => {m.mac} {m.switch_mac} {m.ip} {m.qpn:#x}")
        node = node_base
        for mgid, ranks in self.pre_groups():
            cmds.append(f"mc_mgrp_create {mgid}")
            for r in ranks:
                cmds.append(f"mc_node_create {self.rid(r)} {by_rank[r].port}")
                cmds.append(f"mc_node_associate {mgid} {node}")
                node += 1
        return cmds


def communicator_groups(endpoint: EpicEndpoint, members: Sequence[EpicMember],
                        qpns: Sequence[Sequence[int]], mgid_base: int = 1) -> list[EpicGroup]:
    """The 2N+1 groups of one communicator (hosts.commlib.epic.group_index):
    group i at ``endpoint.offset(i)``, rank r's QPN ``qpns[r][i]``, multicast
    groups ``mgid_base + 2i`` (results) and ``+ 2i + 1`` (ACKs)."""
    n = len(members)
    if len(qpns) != n or any(len(q) != group_count(n) for q in qpns):
        raise ValueError(f"each of the {n} ranks must report {group_count(n)} QPNs "
                         "(one per group)")
    groups = []
    for i in range(group_count(n)):
        kind, root = group_kind(i, n)
        ms = tuple(EpicMember(m.rank, m.ip, int(qpns[m.rank][i]), m.port, m.mac, m.switch_mac)
                   for m in members)
        groups.append(EpicGroup(endpoint.offset(i), ms, mgid=mgid_base + 2 * i, kind=kind,
                                root=root,
                                ack_mgid=0 if kind is EpicKind.ALLREDUCE else mgid_base + 2 * i + 1))
    return groups


def install_commands(groups: Sequence[EpicGroup], node_base: int = 0) -> list[str]:
    """The lines that install ``groups`` (created in order from ``node_base``)."""
    out: list[str] = []
    for g in groups:
        out += g.switch_commands(node_base)
        node_base += g.node_count()
    return out


@dataclass(frozen=True)
class TreeSwitch:
    """A switch of an aggregation tree: its name, its endpoint IP (what the
    ranks below it and its child switches address), its parent (None: the root)."""

    name: str
    ip: str
    parent: str | None = None


@dataclass(frozen=True)
class SwitchPort:
    """One end of a switch-to-switch link: the port number and its MAC."""

    port: int
    mac: str


@dataclass(frozen=True)
class AggregationTree:
    """The controller's description of one AllReduce group's aggregation tree
    (the paper's IncTree): the switches and who is whose parent, and the
    switch each rank hangs on (``rank_switch[r]``). Ranks and child switches
    are a switch's children; a switch adds what its children send, sends the
    sum to its parent, and the root multicasts the result, which every switch
    copies down to its children. Every switch serves the group with the same
    gid and QPN at its own IP (the ranks' endpoint is their switch's)."""

    switches: tuple[TreeSwitch, ...]
    rank_switch: tuple[str, ...]

    def __post_init__(self) -> None:
        names = [s.name for s in self.switches]
        if len(set(names)) != len(names):
            raise ValueError(f"aggregation tree: switch names repeat: {names}")
        ips = [s.ip for s in self.switches]
        if len(set(ips)) != len(ips):
            raise ValueError(f"aggregation tree: switch IPs repeat: {ips}")
        roots = [s.name for s in self.switches if s.parent is None]
        if len(roots) != 1:
            raise ValueError(f"aggregation tree: needs exactly one root (a switch without "
                             f"parent), has {roots or 'none'}")
        for s in self.switches:
            if s.parent is not None and s.parent not in names:
                raise ValueError(f"aggregation tree: {s.name}'s parent {s.parent!r} is not "
                                 f"a switch of the tree ({', '.join(names)})")
        by = self.by_name()
        for s in self.switches:        # every switch must reach the root
            seen, cur = {s.name}, s
            while cur.parent is not None:
                if cur.parent in seen:
                    raise ValueError(f"aggregation tree: {s.name}'s parents form a cycle")
                seen.add(cur.parent)
                cur = by[cur.parent]
        if not 0 < len(self.rank_switch) <= MAX_RANKS * len(self.switches):
            raise ValueError(f"aggregation tree: {len(self.rank_switch)} ranks")
        unknown = sorted(set(self.rank_switch) - set(names))
        if unknown:
            raise ValueError(f"aggregation tree: ranks hang on unknown switch(es) "
                             f"{', '.join(unknown)}")
        for s in self.switches:
            n = len(self.children(s.name))
            if not 0 < n <= MAX_RANKS:
                raise ValueError(f"aggregation tree: switch {s.name} has {n} children "
                                 f"(ranks and switches); 1..{MAX_RANKS}")

    def by_name(self) -> dict[str, TreeSwitch]:
        return {s.name: s for s in self.switches}

    @property
    def root(self) -> TreeSwitch:
        return next(s for s in self.switches if s.parent is None)

    def children(self, name: str) -> list[int | str]:
        """A switch's children in member order: its ranks (ascending), then its
        child switches (in the order the tree lists them)."""
        ranks: list[int | str] = [r for r, sw in enumerate(self.rank_switch) if sw == name]
        return ranks + [s.name for s in self.switches if s.parent == name]

    def depth(self) -> int:
        """Levels of switches (1: one switch)."""
        by = self.by_name()

        def up(s: TreeSwitch) -> int:
            return 1 if s.parent is None else 1 + up(by[s.parent])
        return max(up(s) for s in self.switches)

    def groups(self, endpoint: EpicEndpoint, ranks: Sequence[EpicMember],
               link: Callable[[str, str], SwitchPort], mgid: int = 1) -> dict[str, EpicGroup]:
        """Every switch's AllReduce group (switch name -> group; install each with
        its ``switch_commands`` on that switch). ``endpoint``: gid, QPN and start
        PSN of the group (its IP is ignored: each switch's is its own);
        ``ranks[r]``: rank r as its switch sees it (IP, QPN, port, MACs);
        ``link(a, b)``: switch a's port towards switch b."""
        if sorted(m.rank for m in ranks) != list(range(len(self.rank_switch))):
            raise ValueError(f"the tree has {len(self.rank_switch)} ranks; members must be "
                             "ranks 0..N-1, each once")
        by_rank = {m.rank: m for m in ranks}
        by = self.by_name()
        out = {}
        for s in self.switches:
            members = []
            for i, c in enumerate(self.children(s.name)):
                if isinstance(c, int):
                    m = by_rank[c]
                    members.append(EpicMember(i, m.ip, m.qpn, m.port, m.mac, m.switch_mac))
                else:
                    down, up = link(s.name, c), link(c, s.name)
                    members.append(EpicMember(i, by[c].ip, endpoint.qpn, down.port, up.mac,
                                              down.mac))
            parent = None
            if s.parent is not None:
                up, down = link(s.name, s.parent), link(s.parent, s.name)
                parent = EpicParent(by[s.parent].ip, endpoint.qpn, up.port, down.mac, up.mac)
            ep = EpicEndpoint(s.ip, endpoint.qpn, endpoint.gid, endpoint.start_psn,
                              endpoint.port)
            out[s.name] = EpicGroup(ep, tuple(members), mgid=mgid, parent=parent)
        return out


class TreeSwitchSpec(TypedDict, total=False):
    ip: str                 # the switch's endpoint IP
    parent: str | None      # the next switch up; None at the root


class EpicGroupSpec(TypedDict, total=False):
    """A phase's EPIC group (``PhasePlan.epic_group``) as the functions here
    read it; :func:`epic_group_spec` reads one from the phase's dict."""
    switch_ip: str          # the group's endpoint (one switch)
    qpn: int                # the first group's QPN and gid
    gid: int
    start_psn: int          # default 0
    mgid: int               # the first multicast group; default 1
    tree: dict[str, TreeSwitchSpec]   # on a fabric: switch name -> its place in the tree
    ranks: int              # how many ranks the tree spans (default: every host)


def epic_group_spec(group: Mapping[str, Any]) -> EpicGroupSpec:
    """The fields of a phase's ``epic_group`` (its experiment's dict) the
    functions here use, as their types (the tree as given: fabric_tree
    checks it)."""
    spec: EpicGroupSpec = {}
    if "switch_ip" in group:
        spec["switch_ip"] = str(group["switch_ip"])
    for key in ("qpn", "gid", "start_psn", "mgid", "ranks"):
        if key in group:
            spec[key] = int(group[key])
    if "tree" in group:
        spec["tree"] = group["tree"]
    return spec


def fabric_tree(group: Mapping[str, Any], fabric: LeafSpine) -> AggregationTree:
    """The aggregation tree a phase's ``epic_group["tree"]`` describes on a
    leaf-spine fabric: ``{switch name: {"ip": ..., "parent": name or None}}``
    over the fabric's switches; host i's rank hangs on its leaf (ranks are
    numbered as the hosts, rank r = host r + 1)."""
    return _fabric_tree(epic_group_spec(group), fabric)


def _fabric_tree(group: EpicGroupSpec, fabric: LeafSpine) -> AggregationTree:
    desc = group.get("tree")
    if not isinstance(desc, dict) or not desc:
        raise ValueError("epic_group['tree'] must map switch names to {'ip', 'parent'}")
    known = set(fabric.leaf_names + fabric.spine_names)
    unknown = sorted(set(desc) - known)
    if unknown:
        raise ValueError(f"aggregation tree: {', '.join(unknown)} not in the fabric "
                         f"({', '.join(sorted(known))})")
    switches = []
    for name, d in desc.items():
        if not isinstance(d, dict) or "ip" not in d:
            raise ValueError(f"aggregation tree: switch {name} needs an 'ip'")
        parent = d.get("parent")
        if parent is not None and name.startswith("leaf") == str(parent).startswith("leaf"):
            raise ValueError(f"aggregation tree: {name} and its parent {parent} are not "
                             "linked in a leaf-spine (a leaf's parent is a spine or vice versa)")
        switches.append(TreeSwitch(name, str(d["ip"]), None if parent is None else str(parent)))
    ranks = tuple(f"leaf{fabric.leaf_of(h)}" for h in range(1, fabric.n_hosts + 1))
    return AggregationTree(tuple(switches), ranks[:group.get("ranks", len(ranks))])


def fabric_link(fabric: LeafSpine) -> Callable[[str, str], SwitchPort]:
    """``link(a, b)`` of a leaf-spine: switch a's port towards switch b."""
    def link(a: str, b: str) -> SwitchPort:
        leaf, spine = (a, b) if a.startswith("leaf") else (b, a)
        li, si = int(leaf[4:]), int(spine[5:])
        port = fabric.uplink_port(si) if a == leaf else li
        return SwitchPort(port, fabric.port_mac(a, port))
    return link


def install_tree_from_rendezvous(group: EpicGroupSpec, jobs: dict[str, JobSpec], directory: Path,
                                 fabric: LeafSpine, node_base: dict[str, int] | None = None
                                 ) -> dict[str, list[str]] | None:
    """Switch name -> the lines that install a phase's tree AllReduce group on
    ``fabric`` (``group["tree"]``, see ``fabric_tree``), once every rank has
    written ``rank<r>.json`` into ``directory``; None while some are missing.
    Rank r must run on host r + 1 and address its leaf's endpoint IP.
    ``node_base``: multicast nodes earlier groups created, per switch."""
    tree = _fabric_tree({**group, "ranks": len(jobs)}, fabric)
    by = tree.by_name()
    colls = {h: spec.collective for h, spec in jobs.items() if spec.collective}
    ranks = {c.rank: h for h, c in colls.items()}
    if sorted(ranks) != list(range(len(tree.rank_switch))):
        raise ValueError(f"the tree phase's ranks must be 0..{len(tree.rank_switch) - 1}")
    infos = {}
    for r, h in ranks.items():
        if h != f"h{r + 1}":
            raise ValueError(f"rank {r} runs on {h}; in a tree phase rank r runs on h{r + 1}")
        want = by[tree.rank_switch[r]].ip
        got = (colls[h].epic or {}).get("switch_ip")
        if got != want:
            raise ValueError(f"rank {r} addresses {got}; its switch {tree.rank_switch[r]}'s "
                             f"endpoint is {want}")
        f = directory / f"rank{r}.json"
        if not f.exists():
            return None
        infos[r] = json.loads(f.read_text())
    addrs = fabric.addrs()
    members = []
    for r in sorted(ranks):
        a = addrs[r]
        if infos[r].get("ip") != a.ip:
            raise ValueError(f"rank {r} reports IP {infos[r].get('ip')}, host {a.name} is {a.ip}")
        members.append(EpicMember(r, a.ip, int(infos[r]["qpn"]), a.port, a.mac, a.gateway_mac))
    ep = EpicEndpoint(tree.root.ip, group["qpn"], group["gid"], group.get("start_psn", 0))
    groups = tree.groups(ep, members, fabric_link(fabric), mgid=group.get("mgid", 1))
    base = node_base or {}
    return {name: [*(f"register_reset MyIngress.{r}" for r in GROUP_REGISTERS),
                   *g.switch_commands(base.get(name, 0))]
            for name, g in groups.items()}


def tree_nodes(group: EpicGroupSpec, fabric: LeafSpine, ranks: int) -> dict[str, int]:
    """Multicast nodes a tree group creates, per switch (one per child)."""
    tree = _fabric_tree({**group, "ranks": ranks}, fabric)
    return {s.name: len(tree.children(s.name)) for s in tree.switches}


# Registers epic.p4 keeps per group: cleared before a run's groups are installed.
GROUP_REGISTERS = ("slot_psn", "slot_bitmap", "slot_count", "acks.acked")


def install_from_rendezvous(group: EpicGroupSpec, jobs: dict[str, JobSpec],
                            directory: Path, node_base: int = 0) -> list[str] | None:
    """The switch lines for a phase's EPIC communicator (its 2N+1 groups) once
    every rank has written ``rank<r>.json`` (its ``EpicCommunicator.local_info()``)
    into ``directory``; None while some are missing. ``jobs`` are the phase's
    JobSpecs by host name (host hI is on switch port I, addresses as
    testbed.net.host_addr); ``node_base``: multicast nodes earlier groups of
    the run created (``communicator_nodes``)."""
    from testbed.net import host_addr

    ranks = {spec.collective.rank: h for h, spec in jobs.items() if spec.collective}
    infos = {}
    for r in ranks:
        f = directory / f"rank{r}.json"
        if not f.exists():
            return None
        infos[r] = json.loads(f.read_text())
        if not isinstance(infos[r].get("qpns"), list):
            raise ValueError(f"rank {r}'s report {f} has no 'qpns' list (one QPN per group)")
    members = []
    for r, h in sorted(ranks.items()):
        a = host_addr(int(h[1:]))
        if infos[r]["ip"] != a.ip:
            raise ValueError(f"rank {r} reports IP {infos[r]['ip']}, host {h} is {a.ip}")
        members.append(EpicMember(r, a.ip, int(infos[r]["qpn"]), a.port, a.mac, a.gateway_mac))
    ep = EpicEndpoint(group["switch_ip"], group["qpn"], group["gid"], group.get("start_psn", 0))
    groups = communicator_groups(ep, members, [infos[r]["qpns"] for r in sorted(ranks)],
                                 mgid_base=group.get("mgid", 1))
    return [*(f"register_reset MyIngress.{r}" for r in GROUP_REGISTERS),
            *install_commands(groups, node_base)]


def communicator_nodes(size: int) -> int:
    """Multicast nodes the groups of one communicator of ``size`` ranks create:
    N (AllReduce) + N x (1 + N) (Reduce) + N x (N - 1 + 1) (Broadcast)."""
    return size + size * (size + 1) + size * size


def communicator_span(group: Mapping[str, Any], size: int) -> dict[str, range]:
    """The gids, QPNs and multicast groups one communicator's groups occupy
    (``group``: a phase's ``epic_group``)."""
    spec = epic_group_spec(group)
    k = group_count(size)
    mgid = spec.get("mgid", 1)
    return {"gid": range(spec["gid"], spec["gid"] + k),
            "qpn": range(spec["qpn"], spec["qpn"] + k),
            "mgid": range(mgid, mgid + 2 * k)}


# The preprocessor define of epic.p4 that sizes the switch's window W (packets
# per rank in flight; 2W slots per group): Topology.defines sets it, and the
# ranks' CollectiveSpec.epic_window must be the same W.
WINDOW_DEFINE = "EPIC_WINDOW_LOG2"
_DEFAULT_WINDOW = re.compile(rf"^\s*#\s*define\s+{WINDOW_DEFINE}\s+(\d+)\b", re.M)


def window_defines(window_log2: int) -> tuple[tuple[str, str], ...]:
    """Topology.defines that compile epic.p4 with a window of ``1 << window_log2``
    packets per rank (ValueError if that is not a window: check_window)."""
    if isinstance(window_log2, bool) or not isinstance(window_log2, int) or window_log2 < 1:
        raise ValueError(f"{WINDOW_DEFINE} {window_log2!r} must be an integer >= 1")
    check_window(1 << window_log2)
    return ((WINDOW_DEFINE, str(window_log2)),)


def program_window(program: str | os.PathLike[str],
                   defines: Mapping[str, str] | None = None) -> int | None:
    """The window W (packets per rank in flight) of ``program`` compiled with
    ``defines``: ``1 << EPIC_WINDOW_LOG2`` from the defines, else from the
    program's own ``#define``; None if the program has no such define (not
    an EPIC program). ValueError if the defined value is not a plain integer."""
    value = (defines or {}).get(WINDOW_DEFINE)
    if value is None:
        try:
            m = _DEFAULT_WINDOW.search(Path(program).read_text())
        except OSError:
            return None
        if m is None:
            return None
        value = m.group(1)
    if not value.strip().isdigit():
        raise ValueError(f"{WINDOW_DEFINE}={value!r}: the window's log2 must be a plain "
                         "integer")
    return 1 << int(value)


_ip_src = IPV4.getter("src")
_ip_checksum = IPV4.getter("checksum")
_ethertype = ETHERNET.getter("ethertype")


class SimSwitch:
    """epic.p4 (or another program) as a node of a SimWire.

    ``hosts`` maps each host IP to its switch port; the switch answers datagrams
    sent to ``addresses`` (the endpoint IPs). Host i's MAC is derived from its
    port (``host_mac``), the port's MAC likewise (``port_mac``). ``defines``
    are the program's preprocessor defines (e.g. ``{"EPIC_WINDOW_LOG2": "7"}``)."""

    def __init__(self, wire: SimWire, addresses: Sequence[str], hosts: dict[str, int], *,
                 program: str | os.PathLike[str] = EPIC_P4, seed: int = 1,
                 defines: Mapping[str, str] | None = None) -> None:
        from switches.soft.compiler import compile_program
        from switches.soft.control.verbs import ControlPlane
        from switches.soft.runtime.switch import SoftSwitch

        self.wire = wire
        self.hosts = dict(hosts)
        self.sw = SoftSwitch(compile_program(program, defines=defines or None),
                             now_us=lambda: wire.clock // 1000, seed=seed)
        self.control = ControlPlane(self.sw)
        self.frames_in = 0
        self.frames_out = 0
        for a in addresses:
            wire.attach(a, self._on_packet)

    @staticmethod
    def host_mac(port: int) -> str:
        return f"00:00:00:00:{port // 256:02x}:{port % 256:02x}"

    @staticmethod
    def port_mac(port: int) -> str:
        return f"02:00:00:00:{port // 256:02x}:{port % 256:02x}"

    def member(self, rank: int, ip: str, qpn: int) -> EpicMember:
        port = self.hosts[ip]
        return EpicMember(rank, ip, qpn, port, self.host_mac(port), self.port_mac(port))

    def command(self, line: str) -> str:
        with self.sw.lock:
            return self.control.execute(line)

    def _on_packet(self, ip_packet: bytes) -> None:
        port = self.hosts.get(socket.inet_ntoa(_ip_src(ip_packet)))
        if port is None:
            return
        ip = bytes(ip_packet)
        if _ip_checksum(ip) == 0:     # the sim leaves the header checksum to the NIC
            ip = with_checksum(ip[:IPV4_HLEN]) + ip[IPV4_HLEN:]
        frame = (ETHERNET.pack(mac_bytes(self.port_mac(port)), mac_bytes(self.host_mac(port)),
                               ETHERTYPE_IPV4) + ip)
        self.frames_in += 1
        with self.sw.lock:
            out = self.sw.process_sync(port, frame)
        for _, f in out:
            self.frames_out += 1
            if (len(f) >= ETH_HLEN + IPV4_HLEN + UDP_HLEN
                    and _ethertype(f) == ETHERTYPE_IPV4):
                self.wire.inject(f[ETH_HLEN:])


__all__ = ["EPIC_P4", "GROUP_REGISTERS", "WINDOW_DEFINE", "AggregationTree", "EpicGroup",
           "EpicGroupSpec", "TreeSwitchSpec", "epic_group_spec",
           "EpicMember", "EpicParent", "SimSwitch", "SwitchPort", "TreeSwitch",
           "communicator_groups", "communicator_nodes", "communicator_span", "fabric_link",
           "fabric_tree", "install_commands", "install_tree_from_rendezvous", "program_window",
           "tree_nodes", "window_defines"]
