"""The leaf-spine fabric's routes (testbed.net.LeafSpine): every host reaches
every other host through its leaf, one spine and the far leaf; ECMP groups
name every uplink; static routes name one spine."""

from __future__ import annotations

import pytest

from testbed.net import LeafSpine


def _tables(lines: list[str]) -> tuple[dict[str, tuple[str, int]], dict[str, list[int]]]:
    """(ipv4_lpm /32 routes: ip -> (dmac, port), ecmp: ip -> the group's ports)."""
    routes: dict[str, tuple[str, int]] = {}
    members: list[int] = []
    group: list[int] = []
    ecmp: dict[str, list[int]] = {}
    for ln in lines:
        w = ln.split()
        if w[:2] == ["table_add", "MyIngress.ipv4_lpm"]:
            routes[w[3].removesuffix("/32")] = (w[5], int(w[6]))
        elif w[0] == "act_prof_create_member":
            members.append(int(w[4]))
        elif w[0] == "act_prof_add_member_to_group":
            group.append(members[int(w[2])])
        elif w[0] == "table_indirect_add_with_group":
            assert w[4] == "0"
            ecmp[w[2].removesuffix("/32")] = group
    return routes, ecmp


def _walk(f: LeafSpine, src: int, dst: int, pick: int) -> list[str]:
    """The switches a packet from ``src`` to ``dst`` crosses; ``pick`` chooses
    the ECMP member (as a hash would). Returns the path, ending with the host."""
    tables = {n: _tables(lines) for n, lines in f.commands().items()}
    ip = f.addrs()[dst - 1].ip
    node, path = f"leaf{f.leaf_of(src)}", []
    for _ in range(5):
        path.append(node)
        routes, ecmp = tables[node]
        dmac, port = routes[ip]
        if ip in ecmp:
            port = ecmp[ip][pick % len(ecmp[ip])]
        if node.startswith("spine"):
            node = f"leaf{port}"
        elif port > f.hosts_per_leaf:
            node = f"spine{port - f.hosts_per_leaf}"
        else:
            host = (int(node[4:]) - 1) * f.hosts_per_leaf + port
            assert dmac == f.addrs()[host - 1].mac
            path.append(f"h{host}")
            return path
    raise AssertionError(f"h{src} -> h{dst}: loop {path}")


@pytest.mark.parametrize("fabric", [LeafSpine(2, 2, 2), LeafSpine(3, 4, 3),
                                    LeafSpine(4, 2, 1, ecmp=False)])
def test_every_host_reaches_every_other(fabric: LeafSpine) -> None:
    for src in range(1, fabric.n_hosts + 1):
        for dst in range(1, fabric.n_hosts + 1):
            if src == dst:
                continue
            spines_used = set()
            for pick in range(fabric.spines):
                path = _walk(fabric, src, dst, pick)
                assert path[-1] == f"h{dst}"
                if fabric.leaf_of(src) == fabric.leaf_of(dst):
                    assert path == [f"leaf{fabric.leaf_of(src)}", f"h{dst}"]
                else:
                    assert len(path) == 4 and path[1].startswith("spine")
                    spines_used.add(path[1])
            if fabric.leaf_of(src) != fabric.leaf_of(dst):
                # ECMP: every spine is a member; static: always the same one
                want = (set(fabric.spine_names) if fabric.ecmp
                        else {f"spine{fabric.static_spine(dst)}"})
                assert spines_used == want


def test_ports_and_errors() -> None:
    f = LeafSpine(leaves=2, spines=3, hosts_per_leaf=4)
    assert [f.leaf_of(i) for i in (1, 4, 5, 8)] == [1, 1, 2, 2]
    assert [f.host_port(i) for i in (1, 4, 5, 8)] == [1, 4, 1, 4]
    assert f.uplink_port(1) == 5 and f.uplink_port(3) == 7
    assert f.addrs()[4].ip == "10.0.5.1" and f.addrs()[4].port == 1
    with pytest.raises(ValueError, match="hosts 1..8"):
        f.leaf_of(9)
    with pytest.raises(ValueError, match="leaves"):
        LeafSpine(leaves=0)
    with pytest.raises(ValueError, match="250"):
        LeafSpine(leaves=64, spines=1, hosts_per_leaf=4)
