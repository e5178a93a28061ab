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
import socket
import struct
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hosts.commlib.epic import (
    MAX_RANKS,
    EpicEndpoint,
    EpicKind,
    group_count,
    group_kind,
)

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

    def __post_init__(self) -> None:
        n = len(self.members)
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


# Registers epic.p4 keeps per group: cleared before a run's groups are installed.
GROUP_REGISTERS = ("slot_psn", "slot_bitmap", "slot_count", "acks.acked")


def install_from_rendezvous(group: dict[str, Any], jobs: dict[str, Any],
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
    ep = EpicEndpoint(str(group["switch_ip"]), int(group["qpn"]), int(group["gid"]),
                      int(group.get("start_psn", 0)))
    groups = communicator_groups(ep, members, [infos[r]["qpns"] for r in sorted(ranks)],
                                 mgid_base=int(group.get("mgid", 1)))
    return [*(f"register_reset MyIngress.{r}" for r in GROUP_REGISTERS),
            *install_commands(groups, node_base)]


def communicator_nodes(size: int) -> int:
    """Multicast nodes the groups of one communicator of ``size`` ranks create:
    N (AllReduce) + N x (1 + N) (Reduce) + N x (N - 1 + 1) (Broadcast)."""
    return size + size * (size + 1) + size * size


def communicator_span(group: dict[str, Any], size: int) -> dict[str, range]:
    """The gids, QPNs and multicast groups one communicator's groups occupy."""
    k = group_count(size)
    mgid = int(group.get("mgid", 1))
    return {"gid": range(int(group["gid"]), int(group["gid"]) + k),
            "qpn": range(int(group["qpn"]), int(group["qpn"]) + k),
            "mgid": range(mgid, mgid + 2 * k)}


def _mac_bytes(mac: str) -> bytes:
    return bytes(int(b, 16) for b in mac.split(":"))


class SimSwitch:
    """epic.p4 (or another program) as a node of a SimWire.

    ``hosts`` maps each host IP to its switch port; the switch answers datagrams
    sent to ``addresses`` (the endpoint IPs). Host i's MAC is derived from its
    port (``host_mac``), the port's MAC likewise (``port_mac``)."""

    def __init__(self, wire: Any, addresses: Sequence[str], hosts: dict[str, int], *,
                 program: str | os.PathLike[str] = EPIC_P4, seed: int = 1) -> None:
        from switches.soft.compiler import compile_program
        from switches.soft.control.verbs import ControlPlane
        from switches.soft.runtime.switch import SoftSwitch

        self.wire = wire
        self.hosts = dict(hosts)
        self.sw = SoftSwitch(compile_program(program), now_us=lambda: wire.clock // 1000,
                             seed=seed)
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
        port = self.hosts.get(socket.inet_ntoa(ip_packet[12:16]))
        if port is None:
            return
        ip = bytearray(ip_packet)
        if ip[10:12] == b"\0\0":     # the sim leaves the header checksum to the NIC
            ip[10:12] = _csum16(bytes(ip[:20])).to_bytes(2, "big")
        frame = (_mac_bytes(self.port_mac(port)) + _mac_bytes(self.host_mac(port))
                 + b"\x08\x00" + bytes(ip))
        self.frames_in += 1
        with self.sw.lock:
            out = self.sw.process_sync(port, frame)
        for _, f in out:
            self.frames_out += 1
            if len(f) >= 42 and f[12:14] == b"\x08\x00":
                self.wire.inject(f[14:])


def _csum16(b: bytes) -> int:
    s = sum(struct.unpack(f"!{len(b) // 2}H", b))
    while s >> 16:
        s = (s & 0xFFFF) + (s >> 16)
    return ~s & 0xFFFF


__all__ = ["EPIC_P4", "GROUP_REGISTERS", "EpicGroup", "EpicMember", "SimSwitch",
           "communicator_groups", "communicator_nodes", "communicator_span", "install_commands"]
