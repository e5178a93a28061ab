"""Packet replication engine (multicast groups, nodes) and mirroring sessions.

As in BMv2's simple PRE: a multicast group holds nodes in association
order; a node has a replication id (rid) and a port set; replication walks
the group's nodes in order and each node's ports in ascending order, one
replica per (node, port) carrying ``egress_rid = rid``. Node handles are the
smallest free number. Mirroring (clone) sessions send a copy to one port
and/or one multicast group.
"""

from __future__ import annotations

import heapq
from dataclasses import dataclass, field

MAX_MIRROR_SESSION_ID = (1 << 15) - 1


class PreError(Exception):
    """A PRE or mirroring operation failed; ``code`` is BMv2's error name."""

    def __init__(self, code: str, detail: str = "") -> None:
        super().__init__(f"{code}: {detail}" if detail else code)
        self.code = code
        self.detail = detail


@dataclass
class McNode:
    handle: int
    rid: int
    ports: list[int]
    mgid: int | None = None


@dataclass
class McGroup:
    mgid: int
    nodes: list[int] = field(default_factory=list)  # node handles in association order


class ReplicationEngine:
    def __init__(self, max_groups: int = 1 << 16, max_nodes: int = 1 << 16) -> None:
        self.max_groups = max_groups
        self.max_nodes = max_nodes
        self.groups: dict[int, McGroup] = {}
        self.nodes: dict[int, McNode] = {}
        self._free: list[int] = []
        self._next = 0

    def mgrp_create(self, mgid: int) -> None:
        if not 0 <= mgid < (1 << 16):
            raise PreError("INVALID_MGID", f"multicast group id {mgid} is not a 16-bit value")
        if mgid in self.groups:
            return  # BMv2 accepts re-creating a group and keeps it
        if len(self.groups) >= self.max_groups:
            raise PreError("TABLE_FULL", "too many multicast groups")
        self.groups[mgid] = McGroup(mgid)

    def mgrp_destroy(self, mgid: int) -> None:
        g = self.groups.pop(mgid, None)
        if g is None:
            return
        for h in g.nodes:
            node = self.nodes.get(h)
            if node is not None:
                node.mgid = None

    def node_create(self, rid: int, ports: list[int]) -> int:
        if len(self.nodes) >= self.max_nodes:
            raise PreError("TABLE_FULL", "too many multicast nodes")
        ports = _check_ports(ports)
        h = heapq.heappop(self._free) if self._free else self._next
        if h == self._next:
            self._next += 1
        self.nodes[h] = McNode(h, rid, ports)
        return h

    def _node(self, handle: int) -> McNode:
        node = self.nodes.get(handle)
        if node is None:
            raise PreError("INVALID_L1_HANDLE", f"no multicast node with handle {handle}")
        return node

    def _group(self, mgid: int) -> McGroup:
        g = self.groups.get(mgid)
        if g is None:
            raise PreError("INVALID_MGRP_HANDLE", f"no multicast group {mgid}")
        return g

    def node_update(self, handle: int, ports: list[int]) -> None:
        self._node(handle).ports = _check_ports(ports)

    def node_associate(self, mgid: int, handle: int) -> None:
        node = self._node(handle)
        g = self._group(mgid)
        if node.mgid is not None:
            raise PreError("ERROR", f"node {handle} is already associated with group {node.mgid}")
        g.nodes.append(handle)
        node.mgid = mgid

    def node_dissociate(self, mgid: int, handle: int) -> None:
        node = self._node(handle)
        g = self._group(mgid)
        if handle not in g.nodes:
            raise PreError("ERROR", f"node {handle} is not associated with group {mgid}")
        g.nodes.remove(handle)
        node.mgid = None

    def node_destroy(self, handle: int) -> None:
        node = self._node(handle)
        if node.mgid is not None and node.mgid in self.groups:
            g = self.groups[node.mgid]
            if handle in g.nodes:
                g.nodes.remove(handle)
        del self.nodes[handle]
        heapq.heappush(self._free, handle)

    def replicate(self, mgid: int) -> list[tuple[int, int]]:
        """(egress_port, rid) per replica, in BMv2's order; [] for an unknown group."""
        g = self.groups.get(mgid)
        if g is None:
            return []
        out = []
        for h in g.nodes:
            node = self.nodes[h]
            for p in node.ports:
                out.append((p, node.rid))
        return out

    def reset(self) -> None:
        self.groups.clear()
        self.nodes.clear()
        self._free = []
        self._next = 0


def _check_ports(ports: list[int]) -> list[int]:
    out = sorted(set(int(p) for p in ports))
    if len(out) != len(ports):
        raise PreError("ERROR", "duplicate port number in port list")
    for p in out:
        if p < 0:
            raise PreError("ERROR", f"invalid port number {p}")
    return out


@dataclass
class MirrorSession:
    session_id: int
    port: int | None = None
    mgid: int | None = None


class MirroringSessions:
    def __init__(self) -> None:
        self.sessions: dict[int, MirrorSession] = {}

    @staticmethod
    def _check_id(sid: int) -> None:
        if not 0 <= sid <= MAX_MIRROR_SESSION_ID:
            raise PreError("INVALID_MIRROR_ID",
                           f"mirror id {sid} out of range 0..{MAX_MIRROR_SESSION_ID}")

    def add(self, sid: int, port: int | None = None, mgid: int | None = None) -> None:
        self._check_id(sid)
        self.sessions[sid] = MirrorSession(sid, port, mgid)

    def delete(self, sid: int) -> None:
        self._check_id(sid)
        if self.sessions.pop(sid, None) is None:
            raise PreError("SESSION_NOT_FOUND", f"no mirroring session {sid}")

    def get(self, sid: int) -> MirrorSession | None:
        return self.sessions.get(sid)

    def reset(self) -> None:
        self.sessions.clear()
