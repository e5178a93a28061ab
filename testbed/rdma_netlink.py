"""RDMA links through the kernel's RDMA netlink (NETLINK_RDMA, the nldev client), not `rdma`.

What iproute2's ``rdma link add/delete/show`` asks the kernel, asked here through
pyroute2's netlink classes, so that a failure arrives as :class:`RdmaNetlinkError`
naming the device, the netdev and the kernel's errno text instead of a tool's exit
status::

    add_rxe_link("rxe0", "eth0")        # rdma link add rxe0 type rxe netdev eth0
    devices()["rxe0"].netdev            # "eth0"
    delete_link("rxe0")                 # rdma link delete rxe0; False if there was none

The protocol (include/uapi/rdma/rdma_netlink.h; drivers/infiniband/core/nldev.c):
a message is a netlink header whose type is ``(RDMA_NL_NLDEV << 10) + op`` followed
directly by attributes (no family header). NEWLINK carries the device's name, the
link type and the netdev's name (NUL-terminated strings); DELLINK the device's index,
which is why a delete first dumps the devices (GET) to find it. The device dump has
no netdev: each port's (PORT_GET) has, when the netdev is in the caller's network
namespace. The socket opens only once the kernel's RDMA core (ib_core) is loaded;
``modprobe rdma_rxe`` loads it.

``python3 -m testbed.rdma_netlink {show,add,delete}`` does the same from a shell
(vm/guest-tests.sh uses it).
"""

from __future__ import annotations

import argparse
import errno
import os
import sys
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pyroute2.netlink import NLM_F_ACK, NLM_F_DUMP, NLM_F_REQUEST, nlmsg
from pyroute2.netlink.exceptions import NetlinkDumpInterrupted
from pyroute2.netlink.exceptions import NetlinkError as _PyrNetlinkError
from pyroute2.netlink.nlsocket import Marshal, NetlinkSocket

__all__ = ["NETLINK_RDMA", "RdmaDevice", "RdmaNetlinkError", "RdmaNetlinkSocket",
           "SocketFactory", "add_link", "add_rxe_link", "delete_link", "devices",
           "nldev_message", "nldev_type", "rdma_netlink_reason"]

# include/uapi/linux/netlink.h
NETLINK_RDMA = 20
# include/uapi/rdma/rdma_netlink.h: the clients (RDMA_NL_IWCM = 2, RSVD, LS, NLDEV)
RDMA_NL_NLDEV = 5
# enum rdma_nldev_command
RDMA_NLDEV_CMD_GET = 1           # one device, or a dump of all
RDMA_NLDEV_CMD_NEWLINK = 3
RDMA_NLDEV_CMD_DELLINK = 4
RDMA_NLDEV_CMD_PORT_GET = 5      # one port (DEV_INDEX + PORT_INDEX)
# enum rdma_nldev_attr ("don't change the order ... this is ABI")
RDMA_NLDEV_ATTR_DEV_INDEX = 1    # u32
RDMA_NLDEV_ATTR_DEV_NAME = 2     # NUL-terminated string
RDMA_NLDEV_ATTR_PORT_INDEX = 3   # u32: in a device's GET reply, its number of ports
RDMA_NLDEV_ATTR_NDEV_INDEX = 50  # u32
RDMA_NLDEV_ATTR_NDEV_NAME = 51   # NUL-terminated string
RDMA_NLDEV_ATTR_LINK_TYPE = 65   # NUL-terminated string

# A netdev's rxe device can take a moment to register under TCG; no answer at all
# means something is wrong, and waiting forever would hide it.
REPLY_TIMEOUT_S = 60.0


def nldev_type(op: int) -> int:
    """The netlink message type of nldev operation ``op``: RDMA_NL_GET_TYPE(client, op)."""
    return (RDMA_NL_NLDEV << 10) + op


class NldevMessage(nlmsg):  # type: ignore[misc]
    """An nldev request or reply: the netlink header, then attributes."""

    fields = ()
    # Only the attributes used here; the others (capabilities, GUIDs, ...) are
    # skipped when a reply is decoded.
    nla_map = (
        (RDMA_NLDEV_ATTR_DEV_INDEX, "RDMA_NLDEV_ATTR_DEV_INDEX", "uint32"),
        (RDMA_NLDEV_ATTR_DEV_NAME, "RDMA_NLDEV_ATTR_DEV_NAME", "asciiz"),
        (RDMA_NLDEV_ATTR_PORT_INDEX, "RDMA_NLDEV_ATTR_PORT_INDEX", "uint32"),
        (RDMA_NLDEV_ATTR_NDEV_INDEX, "RDMA_NLDEV_ATTR_NDEV_INDEX", "uint32"),
        (RDMA_NLDEV_ATTR_NDEV_NAME, "RDMA_NLDEV_ATTR_NDEV_NAME", "asciiz"),
        (RDMA_NLDEV_ATTR_LINK_TYPE, "RDMA_NLDEV_ATTR_LINK_TYPE", "asciiz"),
    )


class NldevMarshal(Marshal):  # type: ignore[misc]
    """Replies of the nldev client decode as :class:`NldevMessage` (errors and
    NLMSG_DONE as pyroute2's own)."""

    msg_map = {nldev_type(op): NldevMessage
               for op in (RDMA_NLDEV_CMD_GET, RDMA_NLDEV_CMD_NEWLINK,
                          RDMA_NLDEV_CMD_DELLINK, RDMA_NLDEV_CMD_PORT_GET)}


def nldev_message(op: int, attrs: Sequence[tuple[str, Any]], *, flags: int,
                  seq: int = 0, pid: int = 0) -> bytes:
    """The bytes of an nldev request (what the socket sends for it)."""
    msg = NldevMessage()
    msg["header"]["type"] = nldev_type(op)
    msg["header"]["flags"] = flags
    msg["header"]["sequence_number"] = seq
    msg["header"]["pid"] = pid
    msg["attrs"] = list(attrs)
    msg.encode()
    return bytes(msg.data)


class RdmaNetlinkError(RuntimeError):
    """An RDMA netlink request failed. The message is the request in `rdma` tool
    words and why, e.g. ``rdma link add rxe_h1 type rxe netdev h1-eth0: No such
    device``; ``code`` is the errno (None when the failure was not the kernel's
    answer), ``device``/``netdev`` the names involved."""

    def __init__(self, request: str, reason: str, *, code: int | None = None,
                 device: str | None = None, netdev: str | None = None) -> None:
        super().__init__(f"{request}: {reason}")
        self.request = request
        self.reason = reason
        self.code = code
        self.device = device
        self.netdev = netdev


@dataclass(frozen=True)
class RdmaDevice:
    """An RDMA device as the kernel reports it."""

    index: int
    name: str
    ports: int
    # (port, netdev name) in port order, for the ports whose netdev the kernel
    # reports: it does when the netdev is in this network namespace
    netdevs: tuple[tuple[int, str], ...] = ()

    @property
    def netdev(self) -> str | None:
        """The netdev of its lowest port that has one (an rxe device has one port)."""
        return self.netdevs[0][1] if self.netdevs else None


class RdmaNetlinkSocket(NetlinkSocket):  # type: ignore[misc]
    """A bound NETLINK_RDMA socket speaking the nldev client's messages."""

    def __init__(self) -> None:
        try:
            # No extended acks: pyroute2 0.7 would read an error's echoed request as
            # the acks' attributes. The errno is the kernel's whole answer here.
            super().__init__(family=NETLINK_RDMA)
        except OSError:
            # pyroute2 opened its control pipe before the socket failed
            for fd in (getattr(self, "_ctrl_read", None), getattr(self, "_ctrl_write", None)):
                if fd is not None:
                    os.close(fd)
            raise
        self.marshal = NldevMarshal()
        try:
            self.bind()
            self.settimeout(REPLY_TIMEOUT_S)
        except BaseException:
            self.close()
            raise


SocketFactory = Callable[[], Any]


def _socket_reason(e: OSError) -> str:
    text = f"cannot open a NETLINK_RDMA socket: {os.strerror(e.errno) if e.errno else e}"
    if e.errno == errno.EPROTONOSUPPORT:
        text += " (the kernel's RDMA core, ib_core, is not loaded: modprobe rdma_rxe)"
    return text


def _kernel_reason(e: _PyrNetlinkError) -> str:
    code = int(e.code)
    text = os.strerror(code)
    if code == errno.EPERM:
        text += " (needs CAP_NET_ADMIN: run as root)"
    return text


class _Session:
    """One request's socket: errors on opening, sending or receiving become
    :class:`RdmaNetlinkError` naming ``request``."""

    def __init__(self, open_socket: SocketFactory, request: str, *,
                 device: str | None, netdev: str | None = None) -> None:
        self.request, self.device, self.netdev = request, device, netdev
        try:
            self.sock = open_socket()
        except OSError as e:
            raise self.error(_socket_reason(e), code=e.errno) from e

    def error(self, reason: str, *, code: int | None = None,
              request: str | None = None) -> RdmaNetlinkError:
        return RdmaNetlinkError(request or self.request, reason, code=code,
                                device=self.device, netdev=self.netdev)

    def __enter__(self) -> _Session:
        return self

    def __exit__(self, *exc: object) -> None:
        self.sock.close()

    def ask(self, op: int, attrs: Iterable[tuple[str, Any]], flags: int,
            request: str | None = None) -> list[Any]:
        msg = NldevMessage()
        msg["attrs"] = list(attrs)
        try:
            return list(self.sock.nlm_request(msg, msg_type=nldev_type(op), msg_flags=flags))
        except NetlinkDumpInterrupted as e:
            raise self.error("the kernel's dump was interrupted (devices changed during it)",
                             request=request) from e
        except _PyrNetlinkError as e:
            raise self.error(_kernel_reason(e), code=int(e.code), request=request) from e
        except TimeoutError as e:
            raise self.error(f"no answer from the kernel in {REPLY_TIMEOUT_S:g} s",
                             request=request) from e
        except OSError as e:
            raise self.error(f"netlink: {os.strerror(e.errno) if e.errno else e}",
                             code=e.errno, request=request) from e


def _u32(msg: Any, name: str) -> int | None:
    value = msg.get_attr(name)
    return int(value) if value is not None else None


def _devices(s: _Session) -> dict[str, RdmaDevice]:
    found: list[tuple[int, str, int]] = []
    for msg in s.ask(RDMA_NLDEV_CMD_GET, [], NLM_F_REQUEST | NLM_F_DUMP):
        index = _u32(msg, "RDMA_NLDEV_ATTR_DEV_INDEX")
        name = msg.get_attr("RDMA_NLDEV_ATTR_DEV_NAME")
        if index is None or name is None:
            raise s.error(f"a device in the kernel's dump has no index or name: {msg}")
        found.append((index, str(name), _u32(msg, "RDMA_NLDEV_ATTR_PORT_INDEX") or 0))
    out = {}
    for index, name, ports in found:
        netdevs = []
        for port in range(1, ports + 1):
            try:
                replies = s.ask(RDMA_NLDEV_CMD_PORT_GET,
                                [("RDMA_NLDEV_ATTR_DEV_INDEX", index),
                                 ("RDMA_NLDEV_ATTR_PORT_INDEX", port)],
                                NLM_F_REQUEST, request=f"rdma link show {name}/{port}")
            except RdmaNetlinkError as e:
                if e.code in (errno.EINVAL, errno.ENODEV):
                    break           # the device went away since the dump
                raise
            for reply in replies:
                ndev = reply.get_attr("RDMA_NLDEV_ATTR_NDEV_NAME")
                if ndev is not None:
                    netdevs.append((port, str(ndev)))
        out[name] = RdmaDevice(index=index, name=name, ports=ports, netdevs=tuple(netdevs))
    return out


def devices(*, open_socket: SocketFactory = RdmaNetlinkSocket) -> dict[str, RdmaDevice]:
    """Every RDMA device by name, with the netdev of each port the kernel reports
    (``rdma link show``)."""
    with _Session(open_socket, "rdma link show", device=None) as s:
        return _devices(s)


def add_link(device: str, link_type: str, netdev: str, *,
             open_socket: SocketFactory = RdmaNetlinkSocket) -> None:
    """A new RDMA device ``device`` of driver ``link_type`` (rxe, siw) on ``netdev``
    (``rdma link add DEVICE type LINK_TYPE netdev NETDEV``)."""
    request = f"rdma link add {device} type {link_type} netdev {netdev}"
    with _Session(open_socket, request, device=device, netdev=netdev) as s:
        try:
            s.ask(RDMA_NLDEV_CMD_NEWLINK,
                  [("RDMA_NLDEV_ATTR_DEV_NAME", device),
                   ("RDMA_NLDEV_ATTR_LINK_TYPE", link_type),
                   ("RDMA_NLDEV_ATTR_NDEV_NAME", netdev)],
                  NLM_F_REQUEST | NLM_F_ACK)
        except RdmaNetlinkError as e:
            # The kernel answers an unknown link type (its module not loaded and
            # not loadable) with a bare EINVAL; say which module that would be.
            if e.code == errno.EINVAL and not Path(f"/sys/module/rdma_{link_type}").exists():
                raise s.error(f"{e.reason} (no rdma_{link_type} module loaded: "
                              f"modprobe rdma_{link_type})", code=e.code) from e
            raise


def add_rxe_link(device: str, netdev: str, *,
                 open_socket: SocketFactory = RdmaNetlinkSocket) -> None:
    """A soft-RoCE device ``device`` on ``netdev`` (``rdma link add DEVICE type rxe
    netdev NETDEV``); the rdma_rxe module must be loaded (or loadable by the kernel)."""
    add_link(device, "rxe", netdev, open_socket=open_socket)


def delete_link(device: str, *, open_socket: SocketFactory = RdmaNetlinkSocket) -> bool:
    """Delete RDMA device ``device`` (``rdma link delete DEVICE``); False if there
    was none by that name (an rxe device goes with its netdev)."""
    with _Session(open_socket, f"rdma link delete {device}", device=device) as s:
        found = _devices(s).get(device)
        if found is None:
            return False
        try:
            s.ask(RDMA_NLDEV_CMD_DELLINK, [("RDMA_NLDEV_ATTR_DEV_INDEX", found.index)],
                  NLM_F_REQUEST | NLM_F_ACK)
        except RdmaNetlinkError as e:
            # An unknown index is EINVAL too: gone between the dump and the delete
            if e.code == errno.EINVAL and device not in _devices(s):
                return False
            raise
    return True


def rdma_netlink_reason() -> str | None:
    """Why RDMA links cannot be made here through netlink (a NETLINK_RDMA socket
    does not open), or None. Ask once an RDMA driver is loaded: before, the RDMA
    core (ib_core, which rdma_rxe pulls in) is usually not there."""
    try:
        RdmaNetlinkSocket().close()
    except OSError as e:
        return _socket_reason(e)
    return None


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python3 -m testbed.rdma_netlink",
                                description="RDMA links through the kernel's RDMA netlink.")
    sub = p.add_subparsers(dest="cmd", required=True)
    sub.add_parser("show", help="the RDMA devices and their netdevs")
    a = sub.add_parser("add", help="a new RDMA device on a netdev")
    a.add_argument("device")
    a.add_argument("netdev")
    a.add_argument("--type", default="rxe", help="the link type (default rxe)")
    d = sub.add_parser("delete", help="delete an RDMA device")
    d.add_argument("device")
    args = p.parse_args(argv)
    try:
        if args.cmd == "show":
            for dev in sorted(devices().values(), key=lambda x: x.index):
                print(f"{dev.index}: {dev.name} ports {dev.ports} netdev {dev.netdev or '-'}")
        elif args.cmd == "add":
            add_link(args.device, args.type, args.netdev)
        elif not delete_link(args.device):
            print(f"rdma link delete {args.device}: no such RDMA device", file=sys.stderr)
            return 1
    except RdmaNetlinkError as e:
        print(e, file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
