"""Links of the initial network namespace through netlink (pyroute2), not `ip`.

Errors arrive as :class:`NetlinkError` whose message names the interface and
what was asked, instead of an `ip` exit status to decode. A Mininet host's
namespace has no name: :func:`set_permanent_neighbour` reaches it through the
host shell's ``/proc/<pid>/ns/net``.
"""

from __future__ import annotations

import errno
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

__all__ = ["NetlinkError", "link_names", "delete_link", "set_link_up", "add_veth",
           "set_permanent_neighbour"]

NUD_PERMANENT = 0x80


class NetlinkError(RuntimeError):
    """A netlink request failed; the message names the object and the request."""


@contextmanager
def _route(netns_pid: int | None = None) -> Iterator[Any]:
    """Netlink in this namespace, or in the one of process ``netns_pid``."""
    if netns_pid is None:
        from pyroute2 import IPRoute

        with IPRoute() as ipr:
            yield ipr
        return
    from pyroute2 import NetNS

    ns = NetNS(f"/proc/{netns_pid}/ns/net", flags=0)   # flags 0: never create one
    try:
        yield ns
    finally:
        ns.close()


def _fail(what: str, e: Exception) -> NetlinkError:
    code = getattr(e, "code", None)
    text = errno.errorcode.get(code, str(code)) if isinstance(code, int) else ""
    return NetlinkError(f"{what}: {text + ' ' if text else ''}{e}")


def link_names() -> list[str]:
    """Every interface's name in this namespace."""
    with _route() as ipr:
        return [str(link.get_attr("IFLA_IFNAME")) for link in ipr.get_links()]


def _index(ipr: Any, name: str) -> int | None:
    found = ipr.link_lookup(ifname=name)
    return int(found[0]) if found else None


def delete_link(name: str) -> bool:
    """Delete interface ``name`` (a veth takes its peer along); False if there was
    none by that name."""
    from pyroute2.netlink.exceptions import NetlinkError as _Nl

    with _route() as ipr:
        idx = _index(ipr, name)
        if idx is None:
            return False
        try:
            ipr.link("del", index=idx)
        except _Nl as e:
            if e.code == errno.ENODEV:      # gone between the look-up and the delete
                return False
            raise _fail(f"delete interface {name}", e) from e
    return True


def set_link_up(name: str) -> None:
    from pyroute2.netlink.exceptions import NetlinkError as _Nl

    with _route() as ipr:
        idx = _index(ipr, name)
        if idx is None:
            raise NetlinkError(f"set interface {name} up: no such interface")
        try:
            ipr.link("set", index=idx, state="up")
        except _Nl as e:
            raise _fail(f"set interface {name} up", e) from e


def add_veth(name: str, peer: str) -> None:
    """A veth pair ``name`` <-> ``peer`` (both down)."""
    from pyroute2.netlink.exceptions import NetlinkError as _Nl

    with _route() as ipr:
        try:
            ipr.link("add", ifname=name, kind="veth", peer={"ifname": peer})
        except _Nl as e:
            raise _fail(f"add veth {name} <-> {peer}", e) from e


def set_permanent_neighbour(ip: str, mac: str, ifname: str, *,
                            netns_pid: int | None = None) -> None:
    """A permanent ARP entry ``ip`` -> ``mac`` on ``ifname`` (replacing any), in
    this namespace or in the one of process ``netns_pid`` (a Mininet host's shell)."""
    from pyroute2.netlink.exceptions import NetlinkError as _Nl

    where = f" (namespace of pid {netns_pid})" if netns_pid is not None else ""
    what = f"neighbour {ip} lladdr {mac} on {ifname}{where}"
    with _route(netns_pid) as ipr:
        idx = _index(ipr, ifname)
        if idx is None:
            raise NetlinkError(f"{what}: no interface {ifname}")
        try:
            ipr.neigh("replace", dst=ip, lladdr=mac, ifindex=idx, state=NUD_PERMANENT)
        except _Nl as e:
            raise _fail(what, e) from e
