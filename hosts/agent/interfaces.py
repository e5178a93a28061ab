"""The host's network interface as the kernel knows it: the interface that
holds an address, its MAC, its gateway's MAC (an rxe host's DCQCN shim, PFC
and the HTB shaper need them; a simulated host needs none)."""

from __future__ import annotations

import socket
from pathlib import Path

from hosts.agent.errors import AgentError


def link_mac(ifname: str) -> str:
    try:
        return Path(f"/sys/class/net/{ifname}/address").read_text().strip()
    except OSError as e:
        raise AgentError(f"interface {ifname}: cannot read its MAC address: {e}") from e


def ifname_of(ip: str) -> str:
    """The interface holding address ``ip`` (a Mininet host's one link)."""
    from pyroute2 import IPRoute

    with IPRoute() as ipr:
        idx = [a["index"] for a in ipr.get_addr(family=socket.AF_INET, address=ip)]
        names = [ipr.get_links(i)[0].get_attr("IFLA_IFNAME") for i in idx[:1]]
    if not names:
        raise AgentError(f"no interface holds {ip}")
    return str(names[0])


def gateway_mac(ifname: str) -> str:
    """The MAC of the permanent neighbour on ``ifname``: an rxe host's gateway
    (testbed.rxe_host.RxeHost installs exactly one)."""
    from pyroute2 import IPRoute

    NUD_PERMANENT = 0x80
    with IPRoute() as ipr:
        idx = ipr.link_lookup(ifname=ifname)
        macs = [n.get_attr("NDA_LLADDR") for n in ipr.get_neighbours(ifindex=idx[0])
                if n["state"] & NUD_PERMANENT] if idx else []
    macs = [m for m in macs if m]
    if len(macs) != 1:
        raise AgentError(f"interface {ifname}: expected one permanent neighbour (the "
                         f"gateway), found {len(macs)}")
    return str(macs[0])
