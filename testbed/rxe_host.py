"""Mininet hosts with a soft-RoCE (rdma_rxe) device: nodes in the initial network namespace.

rdma_rxe works only in the initial network namespace on every released kernel,
so an rxe host is a Mininet node there (``inNamespace=False``) with its own veth
to the switch and an rxe device on that veth. Two such hosts share one routing
table and one set of local addresses; without more, a packet from one to the
other would be delivered locally and never reach the switch. What keeps it on
the wire (all through netlink, pyroute2):

- the host's address is a /32 on its own interface: a lookup made for that
  interface as output (rxe sets the flow's oif to its netdev) skips the local
  routes of the other hosts' interfaces, whose next hops are other devices;
- ``ip rule`` by oif and by iif into a table of the interface's own: a route
  to the gateway on the link and the default route through it;
- a permanent neighbour entry for the gateway (the switch's port MAC);
- accept_local on the interface (arriving packets carry a source address that
  is local here) and reverse-path filtering off (its reverse path is local).

The rxe device itself is made and deleted through the kernel's RDMA netlink
(testbed.rdma_netlink, also pyroute2), so a failure names the device and the
netdev with the kernel's errno text.

Set up in :meth:`RxeHost.config`, undone in :meth:`RxeHost.terminate` (the
veth, its addresses, routes and rxe device go with the link; the rules, which
name the interface, and the machine-wide rp_filter are restored here).
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path
from typing import Any

from mininet.log import warn
from mininet.node import Host

from switches.node import offload_off_command

__all__ = ["RxeHost", "RxeHostError", "rxe_in_mininet_reason", "rxe_device_name"]

RULE_PRIORITY_BASE = 10000       # below the main table's 32766, above local's 0
TABLE_BASE = 10000               # table = base + ifindex: unique per interface
SYSCTL = Path("/proc/sys/net")
RT_SCOPE_LINK = 253
NUD_PERMANENT = 0x80


class RxeHostError(RuntimeError):
    """An rxe host cannot be set up; the message names the host and the object."""


def rxe_device_name(host: str) -> str:
    return f"rxe-{host}"


def rxe_in_mininet_reason() -> str | None:
    """Why Mininet rxe hosts cannot run here, or None: root, pyroute2 (routing and
    the RDMA netlink), pyverbs, rdma_rxe loadable and, once it is loaded, a
    NETLINK_RDMA socket that opens."""
    import os

    if os.geteuid() != 0:
        return "rxe hosts need root (rdma links, policy routing)"
    try:
        import pyroute2  # noqa: F401
    except ImportError:
        return "pyroute2 missing (apt-get install python3-pyroute2)"
    try:
        import pyverbs  # noqa: F401
    except ImportError:
        return "pyverbs missing (apt-get install python3-pyverbs)"
    try:
        from testbed.rdma_netlink import rdma_netlink_reason
    except ImportError as e:        # a pyroute2 without the netlink classes used
        return f"testbed.rdma_netlink does not import: {e}"
    if not Path("/sys/module/rdma_rxe").exists():
        modprobe = _modprobe()
        if modprobe is None:
            return ("rdma_rxe is not loaded and modprobe is missing (apt-get install kmod; "
                    "or use the guest VM: testbed vm run)")
        # -n: whether the module is there, without loading it
        r = subprocess.run([modprobe, "-n", "rdma_rxe"], capture_output=True, text=True)
        if r.returncode != 0:
            return ("this kernel has no rdma_rxe module (use the guest VM: testbed vm run -- "
                    "testbed run ... --hosts rxe)")
        return None             # the RDMA core comes with it; its socket cannot open before
    return rdma_netlink_reason()


def _modprobe() -> str | None:
    return shutil.which("modprobe") or next(
        (p for p in ("/usr/sbin/modprobe", "/sbin/modprobe") if Path(p).exists()), None)


def _write_sysctl(key: str, value: str) -> str:
    """Set net.<key> (a path below /proc/sys/net); returns the old value."""
    path = SYSCTL / key
    try:
        old = path.read_text().strip()
        path.write_text(value)
    except OSError as e:
        raise RxeHostError(f"sysctl net.{key.replace('/', '.')} = {value}: {e}") from e
    return old


class RxeHost(Host):
    """A Mininet host in the initial namespace with an rdma_rxe device on its link.

    ``ip`` is the host's address (any prefix length given is replaced by /32);
    ``gateway=(ip, mac)`` is the switch port's address and MAC. Each rxe host
    needs a gateway: its traffic leaves only through the switch."""

    rp_filter_saved: str | None = None      # net.ipv4.conf.all.rp_filter before the first host
    rp_filter_users = 0

    def __init__(self, name: str, gateway: tuple[str, str] | None = None,
                 **params: Any) -> None:
        if gateway is None:
            raise RxeHostError(f"rxe host {name}: needs gateway=(ip, mac) of its switch port")
        self.gateway_ip, self.gateway_mac = gateway
        self.rxe_device: str | None = None
        self._rules: list[dict[str, int | str]] = []    # ip rule's arguments
        self._uses_rp_filter = False
        super().__init__(name, inNamespace=False, **params)

    # Mininet calls config() once the links exist.
    def config(self, mac: str | None = None, ip: str | None = None, defaultRoute: Any = None,
               lo: str = "up", **_params: Any) -> dict[str, Any]:
        if defaultRoute is not None:
            raise RxeHostError(f"rxe host {self.name}: no default route in the initial "
                               "namespace (it would be the machine's); give gateway=")
        if ip is None:
            raise RxeHostError(f"rxe host {self.name}: needs an IPv4 address")
        intf = self.defaultIntf()
        if intf is None:
            raise RxeHostError(f"rxe host {self.name}: has no link")
        addr = ip.split("/")[0]
        if mac:
            intf.setMAC(mac)
        self.cmd(offload_off_command(intf.name))
        self._netlink_setup(intf.name, addr)
        intf.ip, intf.prefixLen = addr, 32
        self._add_rxe(intf.name)
        return {"ip": f"{addr}/32", "mac": mac}

    def _netlink_setup(self, ifname: str, addr: str) -> None:
        from pyroute2 import IPRoute
        from pyroute2.netlink.exceptions import NetlinkError

        _write_sysctl(f"ipv6/conf/{ifname}/disable_ipv6", "1")
        _write_sysctl(f"ipv4/conf/{ifname}/accept_local", "1")
        _write_sysctl(f"ipv4/conf/{ifname}/rp_filter", "0")
        # The effective rp_filter is the larger of "all" and the interface's.
        if RxeHost.rp_filter_users == 0:
            old = _write_sysctl("ipv4/conf/all/rp_filter", "0")
            RxeHost.rp_filter_saved = old
        RxeHost.rp_filter_users += 1
        self._uses_rp_filter = True
        step = ""
        with IPRoute() as ipr:
            try:
                step = f"interface {ifname}"
                found = ipr.link_lookup(ifname=ifname)
                if not found:
                    raise RxeHostError(f"rxe host {self.name}: no interface {ifname}")
                idx = found[0]
                table = TABLE_BASE + idx
                step = f"address {addr}/32 on {ifname}"
                ipr.addr("add", index=idx, address=addr, prefixlen=32)
                step = f"link {ifname} up"
                ipr.link("set", index=idx, state="up")
                step = f"route {self.gateway_ip}/32 dev {ifname} table {table}"
                ipr.route("add", dst=self.gateway_ip, dst_len=32, oif=idx, table=table,
                          scope=RT_SCOPE_LINK, prefsrc=addr)
                step = f"default route via {self.gateway_ip} table {table}"
                ipr.route("add", dst="0.0.0.0", dst_len=0, gateway=self.gateway_ip, oif=idx,
                          table=table, prefsrc=addr)
                step = f"neighbour {self.gateway_ip} lladdr {self.gateway_mac} dev {ifname}"
                ipr.neigh("replace", dst=self.gateway_ip, lladdr=self.gateway_mac,
                          ifindex=idx, state=NUD_PERMANENT)
                for key in ("oifname", "iifname"):
                    rule = {"table": table, "priority": RULE_PRIORITY_BASE + idx, key: ifname}
                    step = f"rule {key[:3]} {ifname} lookup {table}"
                    ipr.rule("add", **rule)
                    self._rules.append(rule)
            except NetlinkError as e:
                raise RxeHostError(f"rxe host {self.name}: {step}: {e}") from e

    def _add_rxe(self, ifname: str) -> None:
        from testbed.rdma_netlink import RdmaNetlinkError, add_rxe_link

        dev = rxe_device_name(self.name)
        modprobe = _modprobe()
        if not Path("/sys/module/rdma_rxe").exists() and modprobe is not None:
            subprocess.run([modprobe, "rdma_rxe"], capture_output=True)
        try:
            add_rxe_link(dev, ifname)
        except RdmaNetlinkError as e:
            raise RxeHostError(f"rxe host {self.name}: {e}") from e
        self.rxe_device = dev

    def terminate(self) -> None:
        try:
            self._undo()
        finally:
            super().terminate()

    def _undo(self) -> None:
        from testbed.rdma_netlink import RdmaNetlinkError, delete_link

        if self.rxe_device is not None:
            # Gone already (False) if the link was deleted first: rxe follows its netdev.
            try:
                delete_link(self.rxe_device)
            except RdmaNetlinkError as e:
                # Said, not raised: Mininet's stop() terminates the hosts in a loop
                # that an exception would cut short, leaving the others' rules behind.
                warn(f"rxe host {self.name}: {e}\n")
            self.rxe_device = None
        if self._rules:
            from pyroute2 import IPRoute
            from pyroute2.netlink.exceptions import NetlinkError

            with IPRoute() as ipr:
                for rule in self._rules:
                    try:
                        ipr.rule("del", **rule)
                    except NetlinkError:
                        pass            # already gone
            self._rules = []
        if self._uses_rp_filter:
            self._uses_rp_filter = False
            RxeHost.rp_filter_users -= 1
            if RxeHost.rp_filter_users == 0 and RxeHost.rp_filter_saved is not None:
                _write_sysctl("ipv4/conf/all/rp_filter", RxeHost.rp_filter_saved)
                RxeHost.rp_filter_saved = None
