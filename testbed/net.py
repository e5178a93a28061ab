"""Bringing P4 switch networks up and down in Mininet, and checking nothing is left.

:func:`star_router` builds N hosts around one switch (the soft target or
BMv2: switches.targets) that runs an L3
program (``switches/p4/l3_router.p4`` or ``l3_ecn.p4``): host i is
``10.0.i.1/24`` on switch port i, its gateway ``10.0.i.254`` is the switch
port's MAC (a static neighbour entry, since the L3 programs drop ARP).
:func:`leaf_spine` builds a two-tier fabric of such switches (:class:`LeafSpine`:
static routes or ECMP over the spines).
:func:`running` starts a network and guarantees it is stopped again, also on
Ctrl-C or SIGTERM.
"""

from __future__ import annotations

import os
import re
import signal
from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from types import FrameType
from typing import TYPE_CHECKING, Any

from ground.netlink import link_names, set_permanent_neighbour
from switches.bmv2.launch import BMV2_NODE_ENV
from switches.targets import SOFT, Target

if TYPE_CHECKING:
    from mininet.net import Mininet
    from mininet.node import Host

    from switches.node import P4SwitchNode

REPO_ROOT = Path(__file__).resolve().parents[1]
P4_DIR = REPO_ROOT / "switches" / "p4"


@dataclass(frozen=True)
class HostAddr:
    name: str
    port: int
    ip: str  # without prefix length
    mac: str
    gateway_ip: str
    gateway_mac: str  # the switch port's MAC as the host sees it


def host_addr(i: int) -> HostAddr:
    return HostAddr(
        name=f"h{i}", port=i, ip=f"10.0.{i}.1", mac=f"00:00:00:00:{i // 256:02x}:{i % 256:02x}",
        gateway_ip=f"10.0.{i}.254", gateway_mac=f"02:00:00:00:{i // 256:02x}:{i % 256:02x}",
    )


def router_commands(hosts: Sequence[HostAddr]) -> list[str]:
    """simple_switch_CLI commands routing between the hosts of :func:`star_router`."""
    cmds = []
    for h in hosts:
        cmds.append(f"table_add MyIngress.ipv4_lpm MyIngress.set_nhop {h.ip}/32 => {h.mac} {h.port}")
        cmds.append(f"table_add MyIngress.port_smac MyIngress.set_smac {h.port} => {h.gateway_mac}")
    return cmds


class SoftSignal(BaseException):
    """SIGTERM turned into an exception so that ``finally`` blocks run. A
    BaseException, as KeyboardInterrupt is: code that contains a packet's or
    a run's failures (``except Exception``, the soft switch's data path)
    must not swallow it."""


@contextmanager
def sigterm_raises() -> Iterator[None]:
    """SIGTERM raises SoftSignal inside the block (in the main thread), so
    its ``finally`` blocks tear down what it built."""
    def handler(signum: int, _frame: FrameType | None) -> None:
        raise SoftSignal(f"signal {signal.Signals(signum).name}")

    try:
        old = signal.signal(signal.SIGTERM, handler)
    except ValueError:  # not the main thread: leave signals alone
        yield
        return
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, old)


@contextmanager
def running(net: Mininet) -> Iterator[Mininet]:
    """Start ``net``; stop it however the block is left (error, Ctrl-C, SIGTERM)."""
    from testbed.owned import forget_network, record_network

    with sigterm_raises():
        try:
            record_network(net)  # what exists before start (node shells, links)
            net.start()
            record_network(net)  # and the switch daemons
            yield net
        finally:
            # A second Ctrl-C must not abandon the teardown half way.
            old_int = signal.signal(signal.SIGINT, signal.SIG_IGN)
            try:
                net.stop()
                forget_network(net)
            finally:
                signal.signal(signal.SIGINT, old_int)


def shape_host(host: Host, rate_bps: float, burst_bytes: int) -> str:
    """Serialise ``host``'s frames at ``rate_bps``, as a NIC's serialiser does:
    an HTB qdisc at the root of its interface, with a class at the line rate
    and the default class under it (hosts/roce/shaping.py). The host's agent
    adds one class per sending QP, at the QP's DCQCN rate, so the kernel's
    hrtimers space the frames, not the sender's wake-ups. HTB counts each
    frame's length from the Ethernet header, as the transport and the switch
    do. ``burst_bytes`` (at least one frame of the interface's MTU) is how
    much a late timer may catch up at once. Returns the interface's name;
    raises RuntimeError with tc's message if the qdisc did not take."""
    from hosts.roce.shaping import tc_commands

    intf = host.defaultIntf()
    mtu_frame = int(getattr(intf, "mtu", None) or 1500) + 14
    if rate_bps <= 0:
        raise ValueError(f"shape_host({host.name}): rate must be positive, not {rate_bps}")
    if burst_bytes < mtu_frame:
        raise ValueError(f"shape_host({host.name}): burst {burst_bytes} B is smaller than "
                         f"one {mtu_frame} B frame of {intf}")
    for cmd in tc_commands(str(intf), rate_bps, int(burst_bytes)):
        out = host.cmd(f"{cmd} 2>&1").strip()
        if out and not out.startswith("Warning"):
            raise RuntimeError(f"shape_host({host.name}): `{cmd}` failed: {out}")
    shown = host.cmd(f"tc class show dev {intf}")
    if shown.count("htb") < 2:
        raise RuntimeError(f"shape_host({host.name}): tc could not add the HTB classes on "
                           f"{intf}: {shown.strip()}")
    return str(intf)


def rps_mask(cpus: Iterable[int]) -> str:
    """``rps_cpus``'s format for the CPU numbers ``cpus``: hex words of 32
    CPUs, most significant first, comma-separated (``3`` for CPUs 0 and 1)."""
    bits = 0
    for c in cpus:
        if c < 0:
            raise ValueError(f"rps_mask: CPU numbers are >= 0, got {c}")
        bits |= 1 << c
    if not bits:
        raise ValueError("rps_mask: no CPU")
    words = []
    while bits:
        words.append(bits & 0xFFFFFFFF)
        bits >>= 32
    return ",".join([f"{words[-1]:x}"] + [f"{w:08x}" for w in reversed(words[:-1])])


def keep_links_in_order(net: Mininet, cpus: Iterable[int] | None = None,
                        sysfs: Path = Path("/sys/class/net")) -> dict[str, int]:
    """Hand every interface's received frames (switch ports and hosts) to one
    CPU's backlog (RPS, the interfaces taking ``cpus`` in turn; default the
    CPUs this process may use), so a link delivers its frames in the order
    they were sent, as a wire does. Without it a veth hands each frame to the
    backlog of the CPU that sent it; a host's HTB qdisc sends from whichever
    CPU its timer fires on, and while a real-time process held one CPU its
    backlog waited (ksoftirqd is not real-time), so later frames of a flow
    overtook earlier ones through the other CPU by up to ~30 ms, and every
    overtaking cost a go-back-N round (docs/architecture.md, "On a small
    machine").
    One CPU per interface rather than one per flow: frames of different flows
    on one link stay in order too (the verdict's ``switch_ingress_order``).
    Root-namespace nodes are written in ``sysfs``; a namespaced host from its
    own shell, whose /sys Mininet mounted for its namespace (the runner's
    shows only the initial namespace's interfaces). Returns each interface's
    CPU; raises RuntimeError naming the node if one fails."""
    order = sorted(os.sched_getaffinity(0)) if cpus is None else list(cpus)
    if not order:
        raise ValueError("keep_links_in_order: no CPU")
    done: dict[str, int] = {}
    for node in (*net.switches, *net.hosts):
        names = [i.name for i in node.intfList() if i.name != "lo"]
        if not names:
            continue
        cpu = {n: order[(len(done) + k) % len(order)] for k, n in enumerate(names)}
        if not getattr(node, "inNamespace", False):
            for name in names:
                queues = sorted((sysfs / name / "queues").glob("rx-*"))
                if not queues:
                    raise RuntimeError(f"keep_links_in_order({node.name}): no receive queue "
                                       f"of {name} under {sysfs}")
                for q in queues:
                    (q / "rps_cpus").write_text(rps_mask([cpu[name]]) + "\n")
        else:
            writes = " && ".join(f"for q in /sys/class/net/{n}/queues/rx-*; do "
                                 f"echo {rps_mask([cpu[n]])} > $q/rps_cpus || exit 1; done"
                                 for n in names)
            out = node.cmd(f"( {writes} ) 2>&1; echo rc=$?").strip()
            if not out.endswith("rc=0"):
                raise RuntimeError(f"keep_links_in_order({node.name}): setting rps_cpus on "
                                   f"{', '.join(names)} failed: {out}")
        done.update(cpu)
    return done


def host_qdisc_stats(host: Host) -> dict[str, int]:
    """Sent bytes and packets, drops, overlimits and backlog of the root qdisc
    on ``host``'s interface (``tc -s``), or {} if tc shows none."""
    out = host.cmd(f"tc -s qdisc show dev {host.defaultIntf()}")
    m = re.search(r"Sent (\d+) bytes (\d+) pkt \(dropped (\d+), overlimits (\d+)", out)
    if m is None:
        return {}
    st = {"sent_bytes": int(m[1]), "sent_pkts": int(m[2]), "dropped": int(m[3]),
          "overlimits": int(m[4])}
    b = re.search(r"backlog (\d+)b (\d+)p", out)
    if b is not None:
        st["backlog_bytes"], st["backlog_pkts"] = int(b[1]), int(b[2])
    return st


def star_router(
    n_hosts: int = 2,
    program: str | os.PathLike[str] = P4_DIR / "l3_router.p4",
    *,
    log_dir: str | os.PathLike[str] | None = None,
    pcap: bool = False,
    priority_queues: int = 1,
    extra_commands: Sequence[str] = (),
    install_routes: bool = True,
    ready_timeout: float = 120.0,
    backend: str = "python",
    target: Target = SOFT,
    link_delay_us: float = 0.0,
    host_provider: str = "udp",
    defines: Mapping[str, str] | None = None,
    **switch_params: Any,
) -> tuple[Mininet, P4SwitchNode, list[Host], list[HostAddr]]:
    """(net, switch, hosts, addresses) for N hosts around one switch of
    ``target`` (switches.targets; raises switches.targets.TargetUnavailable
    when it cannot run here); not started. ``backend`` is the soft target's
    data path (``switches.soft.backends``); ``switch_params`` go to the
    switch class (e.g. BMv2's ``build_dir``). The routes and
    ``extra_commands`` are simple_switch_CLI lines both targets accept.

    ``link_delay_us`` is every link's one-way propagation delay. A target with
    the ``set_port_delay_us`` verb (the soft one) folds both links of a
    host-to-host path into the switch's egress port (twice the delay); on
    BMv2 Mininet delays each link in each direction (netem, which the kernel
    must have: sch_netem).

    ``host_provider`` "rxe" makes every host a testbed.rxe_host.RxeHost (the
    initial namespace, an rdma_rxe device on its link); "udp" (the default)
    makes namespaced hosts.

    ``defines`` (name -> value) are the program's preprocessor defines, for
    either target (the soft switch's compiler or p4c, ``-D NAME=VALUE``)."""
    # Mininet, and the nodes built on it, are needed only once a network is built
    from mininet.link import Link
    from mininet.net import Mininet

    from switches.node import P4Host

    cls = target.switch_class()
    _backend_param(target, backend, switch_params)
    if defines:
        switch_params["defines"] = dict(defines)
    addrs = [host_addr(i) for i in range(1, n_hosts + 1)]
    if link_delay_us < 0:
        raise ValueError("link_delay_us must be >= 0")
    cmds = (router_commands(addrs) if install_routes else []) + list(extra_commands)
    link_opts: dict[str, type[Link] | str] = {}    # addLink's: TCLink and its delay
    if link_delay_us and target.has_verb("set_port_delay_us"):
        cmds.append(f"set_port_delay_us {round(2 * link_delay_us)}")
    elif link_delay_us:
        from mininet.link import TCLink

        link_opts = {"cls": TCLink, "delay": f"{link_delay_us:g}us"}
    net = Mininet(controller=None, switch=cls, host=P4Host, link=Link,
                  autoSetMacs=False, build=False)
    sw = net.addSwitch("s1", program=str(program), log_dir=log_dir, pcap=pcap,
                       priority_queues=priority_queues, cli_commands=cmds,
                       ready_timeout=ready_timeout, **switch_params)
    _check_host_provider(host_provider)
    hosts = []
    for a in addrs:
        h = _add_host(net, a, host_provider)
        net.addLink(h, sw, port2=a.port, **link_opts)
        hosts.append(h)
    _build(net, hosts, addrs, host_provider)
    return net, sw, hosts, addrs


def _backend_param(target: Target, backend: str, switch_params: dict[str, Any]) -> None:
    """Pass ``backend`` to a switch whose data path has one to choose."""
    if target.backends:
        switch_params["backend"] = backend
    elif backend != "python":
        raise ValueError(f"backend {backend!r} is a soft-target option (target {target.name})")


def _check_host_provider(host_provider: str) -> None:
    if host_provider not in ("udp", "rxe"):
        raise ValueError(f"host_provider must be udp or rxe, not {host_provider!r}")


def _add_host(net: Mininet, a: HostAddr, host_provider: str) -> Host:
    """Host ``a``: a namespaced Mininet host (udp), or an rxe host in the
    initial namespace (testbed.rxe_host.RxeHost: a /32 on its own link and
    policy routing through its gateway)."""
    if host_provider == "rxe":
        from testbed.rxe_host import RxeHost

        return net.addHost(a.name, cls=RxeHost, ip=f"{a.ip}/32", mac=a.mac,
                           gateway=(a.gateway_ip, a.gateway_mac))
    return net.addHost(a.name, ip=f"{a.ip}/24", mac=a.mac, defaultRoute=f"via {a.gateway_ip}")


def _build(net: Mininet, hosts: list[Host], addrs: list[HostAddr], host_provider: str) -> None:
    """Build ``net``, record what it made (testbed.owned) and give each
    namespaced host a permanent neighbour entry for its gateway (an rxe host
    sets its own in RxeHost.config)."""
    net.build()
    from testbed.owned import record_network

    record_network(net)
    if host_provider == "rxe":
        return
    for h, a in zip(hosts, addrs, strict=True):
        set_permanent_neighbour(a.gateway_ip, a.gateway_mac, str(h.defaultIntf()),
                                netns_pid=h.pid)


# ---------------------------------------------------------------------------
# leaf-spine


@dataclass(frozen=True)
class LeafSpine:
    """A two-tier leaf-spine: ``leaves`` leaf switches (``leaf1``...), each
    with ``hosts_per_leaf`` hosts on ports 1..H and one uplink to every spine
    (``spine1``...) on port H + s; spine port l goes to leaf l. Hosts are
    numbered across the fabric, leaf by leaf: host i is ``host_addr(i)``'s
    10.0.i.1 (the addressing of :func:`star_router`) on port
    ``host_port(i)`` of ``leaf_of(i)``.

    Routing (the L3 programs' tables, simple_switch_CLI lines from
    :meth:`commands`): a leaf routes its own hosts directly and every other
    host up a static spine (``static_spine``: destinations round-robin over
    the spines); a spine routes every host down to its leaf. With ``ecmp`` a
    leaf also has one action-selector group over all its uplinks
    (MyIngress.ecmp, include/l3_ingress.p4) and an ecmp entry per remote host
    naming it, so each 5-tuple (a RoCE QP's UDP source port, a Symphony step
    tag) hashes to one spine instead of taking the static one."""

    leaves: int = 2
    spines: int = 2
    hosts_per_leaf: int = 2
    ecmp: bool = True

    def __post_init__(self) -> None:
        if not 1 <= self.leaves <= 64 or not 1 <= self.spines <= 64:
            raise ValueError(f"leaf-spine: leaves ({self.leaves}) and spines ({self.spines}) "
                             "must be 1..64")
        if not 1 <= self.hosts_per_leaf or self.hosts_per_leaf + self.spines > 255:
            raise ValueError(f"leaf-spine: hosts_per_leaf ({self.hosts_per_leaf}) + spines "
                             f"({self.spines}) ports must fit 1..255 per leaf")
        if self.n_hosts > 250:
            raise ValueError(f"leaf-spine: {self.n_hosts} hosts; at most 250")

    @property
    def n_hosts(self) -> int:
        return self.leaves * self.hosts_per_leaf

    @property
    def leaf_names(self) -> list[str]:
        return [f"leaf{i}" for i in range(1, self.leaves + 1)]

    @property
    def spine_names(self) -> list[str]:
        return [f"spine{i}" for i in range(1, self.spines + 1)]

    def leaf_of(self, host: int) -> int:
        """The leaf (1-based) of host ``host`` (1-based)."""
        self._check_host(host)
        return (host - 1) // self.hosts_per_leaf + 1

    def host_port(self, host: int) -> int:
        self._check_host(host)
        return (host - 1) % self.hosts_per_leaf + 1

    def uplink_port(self, spine: int) -> int:
        """A leaf's port toward ``spine`` (1-based)."""
        return self.hosts_per_leaf + spine

    def static_spine(self, host: int) -> int:
        """The spine that static routes (no ECMP) send traffic to ``host`` over."""
        self._check_host(host)
        return (host - 1) % self.spines + 1

    def addrs(self) -> list[HostAddr]:
        """Every host's address, as on its leaf (``port`` is the leaf's port)."""
        out = []
        for i in range(1, self.n_hosts + 1):
            a = host_addr(i)
            out.append(HostAddr(name=a.name, port=self.host_port(i), ip=a.ip, mac=a.mac,
                                gateway_ip=a.gateway_ip, gateway_mac=a.gateway_mac))
        return out

    @staticmethod
    def port_mac(switch: str, port: int) -> str:
        """The MAC of a fabric port (leaf uplinks, spine ports)."""
        kind, num = (1, int(switch[4:])) if switch.startswith("leaf") else (2, int(switch[5:]))
        return f"02:{kind:02x}:00:{num:02x}:00:{port:02x}"

    def commands(self) -> dict[str, list[str]]:
        """Switch name -> the simple_switch_CLI lines that route the fabric."""
        out: dict[str, list[str]] = {}
        addrs = self.addrs()
        for li, leaf in enumerate(self.leaf_names, start=1):
            lines = []
            for i, a in enumerate(addrs, start=1):
                if self.leaf_of(i) == li:
                    lines.append(f"table_add MyIngress.ipv4_lpm MyIngress.set_nhop {a.ip}/32 "
                                 f"=> {a.mac} {a.port}")
                    lines.append(f"table_add MyIngress.port_smac MyIngress.set_smac {a.port} "
                                 f"=> {a.gateway_mac}")
                else:
                    sp = self.static_spine(i)
                    lines.append(f"table_add MyIngress.ipv4_lpm MyIngress.set_nhop {a.ip}/32 "
                                 f"=> {self.port_mac(f'spine{sp}', li)} {self.uplink_port(sp)}")
            for sp in range(1, self.spines + 1):
                port = self.uplink_port(sp)
                lines.append(f"table_add MyIngress.port_smac MyIngress.set_smac {port} "
                             f"=> {self.port_mac(leaf, port)}")
            if self.ecmp:
                # members 0..S-1 (one per uplink) and group 0: BMv2's handle order
                for sp in range(1, self.spines + 1):
                    lines.append("act_prof_create_member MyIngress.ecmp_selector "
                                 f"MyIngress.set_ecmp_nhop {self.port_mac(f'spine{sp}', li)} "
                                 f"{self.uplink_port(sp)}")
                lines.append("act_prof_create_group MyIngress.ecmp_selector")
                lines += [f"act_prof_add_member_to_group MyIngress.ecmp_selector {m} 0"
                          for m in range(self.spines)]
                lines += [f"table_indirect_add_with_group MyIngress.ecmp {a.ip}/32 => 0"
                          for i, a in enumerate(addrs, start=1) if self.leaf_of(i) != li]
            out[leaf] = lines
        for spine in self.spine_names:
            lines = []
            for i, a in enumerate(addrs, start=1):
                li = self.leaf_of(i)
                lines.append(f"table_add MyIngress.ipv4_lpm MyIngress.set_nhop {a.ip}/32 "
                             f"=> {self.port_mac(f'leaf{li}', self.uplink_port(int(spine[5:])))}"
                             f" {li}")
            lines += [f"table_add MyIngress.port_smac MyIngress.set_smac {li} "
                      f"=> {self.port_mac(spine, li)}" for li in range(1, self.leaves + 1)]
            out[spine] = lines
        return out

    def _check_host(self, host: int) -> None:
        if not 1 <= host <= self.n_hosts:
            raise ValueError(f"host {host}: the leaf-spine has hosts 1..{self.n_hosts}")


def leaf_spine(
    fabric: LeafSpine,
    program: str | os.PathLike[str] = P4_DIR / "symphony.p4",
    *,
    log_dir: str | os.PathLike[str] | None = None,
    pcap: bool = False,
    extra_commands: Sequence[str] = (),
    ready_timeout: float = 120.0,
    backend: str = "python",
    target: Target = SOFT,
    host_provider: str = "udp",
    defines: Mapping[str, str] | None = None,
    **switch_params: Any,
) -> tuple[Mininet, dict[str, P4SwitchNode], list[Host], list[HostAddr]]:
    """(net, switches by name, hosts, addresses) of ``fabric``; not started.
    Every switch runs ``program`` (an L3 program; with ``fabric.ecmp`` one
    that defines L3_ECMP, such as symphony.p4) with the fabric's routes, then
    ``extra_commands``. Links have no delay. ``host_provider`` as in
    :func:`star_router`: rxe hosts sit in the initial namespace, each on its
    own link to its leaf, so the fabric's links between switches carry no
    addresses and touch no host's routing. ``defines`` as in
    :func:`star_router`."""
    # Mininet, and the nodes built on it, are needed only once a network is built
    from mininet.link import Link
    from mininet.net import Mininet

    from switches.node import P4Host

    _check_host_provider(host_provider)
    cls = target.switch_class()
    _backend_param(target, backend, switch_params)
    if defines:
        switch_params["defines"] = dict(defines)
    net = Mininet(controller=None, switch=cls, host=P4Host, link=Link,
                  autoSetMacs=False, build=False)
    switches: dict[str, P4SwitchNode] = {}
    for name, lines in fabric.commands().items():
        switches[name] = net.addSwitch(name, program=str(program), log_dir=log_dir, pcap=pcap,
                                       cli_commands=lines + list(extra_commands),
                                       ready_timeout=ready_timeout, **switch_params)
    addrs = fabric.addrs()
    hosts = []
    for i, a in enumerate(addrs, start=1):
        h = _add_host(net, a, host_provider)
        net.addLink(h, switches[f"leaf{fabric.leaf_of(i)}"], port2=a.port)
        hosts.append(h)
    for li in range(1, fabric.leaves + 1):
        for sp in range(1, fabric.spines + 1):
            net.addLink(switches[f"leaf{li}"], switches[f"spine{sp}"],
                        port1=fabric.uplink_port(sp), port2=li)
    _build(net, hosts, addrs, host_provider)
    return net, switches, hosts, addrs


# ---------------------------------------------------------------------------
# leftovers


_MININET_INTF = re.compile(r"^[a-z]+\d+-eth\d+$")


# BMV2_NODE_ENV (switches.bmv2.launch) marks every simple_switch_grpc the BMv2
# node starts, so that leftovers() and `testbed clean` find exactly those.


def _proc_argv(pid_dir: Path) -> list[str] | None:
    try:
        argv = (pid_dir / "cmdline").read_bytes().split(b"\0")
    except OSError:
        return None
    return [a.decode(errors="replace") for a in argv if a]


def bmv2_switch_pids() -> list[int]:
    """simple_switch_grpc processes started by the BMv2 node (they carry
    BMV2_NODE_ENV in their environment; reading it needs root)."""
    pids = []
    mark = BMV2_NODE_ENV.encode() + b"="
    me = os.getpid()
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == me:
            continue
        try:
            env = (entry / "environ").read_bytes().split(b"\0")
        except OSError:
            continue
        if any(v.startswith(mark) for v in env):
            pids.append(int(entry.name))
    return sorted(pids)


def leftovers() -> list[str]:
    """What a finished run left behind: soft switch daemons, simple_switch_grpc
    processes of the BMv2 node, Mininet node shells, and interfaces named like
    Mininet's (``<node>-eth<n>``, e.g. ``s1-eth2``)."""
    found: list[str] = []
    me = os.getpid()
    bmv2 = set(bmv2_switch_pids())
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == me:
            continue
        words = _proc_argv(entry)
        if words is None:
            continue
        if "switches.soft.daemon" in words[:4] or int(entry.name) in bmv2:
            found.append(f"process {entry.name}: {' '.join(words)}")
        elif any(w.startswith("mininet:") for w in words):
            found.append(f"process {entry.name}: {' '.join(words)}")
    for name in link_names():
        if _MININET_INTF.match(name):
            found.append(f"interface {name}")
    return found
