"""The plan's topology on the simulated clock: switches, hosts' NICs and links.

The same wiring and addressing as the Mininet engine's (testbed.net): a star
(host i on port i of ``s1``) or a leaf-spine (testbed.net.LeafSpine), the same
routes as control-plane lines, the same program on every switch. Every link
direction is a TxLine: a host's at its NIC's line rate, a switch port's at
the rate its traffic manager was given (``set_port_rate_bps``) or, where the
plan sets none, at the hosts' line rate.
"""

from __future__ import annotations

import zlib
from dataclasses import dataclass
from typing import TYPE_CHECKING

from testbed.experiment import RunPlan, repo_path
from testbed.net import HostAddr, host_addr, router_commands
from testbed.sim.host import SimNic
from testbed.sim.link import TxLine
from testbed.sim.loop import EventLoop
from testbed.sim.switch import SimSwitch

if TYPE_CHECKING:
    from switches.soft.runtime.contract import ProgramModule

__all__ = ["SimNetwork", "switch_seed", "HOST_LINKS"]

HOST_LINKS = ("wire", "veth")


def switch_seed(seed: int, name: str, phase: str = "") -> int:
    """A switch's own random stream (the P4 ``random`` extern), from the run's
    seed; with ``phase``, the stream that switch restarts with at that phase,
    so a phase draws the same whichever phases ran before it."""
    return zlib.crc32(f"{seed}/switch/{name}".encode() + (f"/phase/{phase}".encode()
                                                          if phase else b""))


@dataclass
class SimNetwork:
    loop: EventLoop
    switches: dict[str, SimSwitch]
    nics: dict[str, SimNic]
    addrs: list[HostAddr]
    lines: list[TxLine]
    route_commands: dict[str, list[str]]    # switch -> its routes (applied first)

    @classmethod
    def build(cls, plan: RunPlan, loop: EventLoop, host_bps: float, seed: int,
              program_module: ProgramModule, host_links: str = "wire") -> SimNetwork:
        """``host_links`` "wire": a host's frame reaches its switch when its
        last bit did (a NIC serialises it, the switch stores and forwards);
        "veth": when its first bit did, as over the Mininet engine's veths."""
        if host_links not in HOST_LINKS:
            raise ValueError(f"host_links must be one of {', '.join(HOST_LINKS)}, "
                             f"not {host_links!r}")
        topo = plan.topology
        fab = topo.fabric
        switches: dict[str, SimSwitch] = {}
        lines: list[TxLine] = []

        def make_switch(name: str) -> SimSwitch:
            sw = SimSwitch(name, loop, program_module, priority_queues=topo.priority_queues,
                           seed=switch_seed(seed, name), default_bps=host_bps)
            switches[name] = sw
            return sw

        def wire(a: SimSwitch, pa: int, b: SimSwitch, pb: int) -> None:
            la = TxLine(loop, host_bps, b.receiver(pb), name=f"{a.name}:{pa}->{b.name}:{pb}")
            lb = TxLine(loop, host_bps, a.receiver(pa), name=f"{b.name}:{pb}->{a.name}:{pa}")
            a.connect(pa, la)
            b.connect(pb, lb)
            lines.extend((la, lb))

        if fab is None:
            addrs = [host_addr(i) for i in range(1, topo.n_hosts + 1)]
            s1 = make_switch("s1")
            routes = {"s1": router_commands(addrs)}
            edge = {a.name: (s1, a.port) for a in addrs}
        else:
            addrs = fab.addrs()
            routes = fab.commands()
            for name in fab.leaf_names + fab.spine_names:
                make_switch(name)
            edge = {a.name: (switches[f"leaf{fab.leaf_of(i)}"], a.port)
                    for i, a in enumerate(addrs, start=1)}
            for li in range(1, fab.leaves + 1):
                for sp in range(1, fab.spines + 1):
                    wire(switches[f"leaf{li}"], fab.uplink_port(sp), switches[f"spine{sp}"], li)
        nics: dict[str, SimNic] = {}
        for a in addrs:
            sw, port = edge[a.name]
            nic = SimNic(loop, a.ip, a.mac, a.gateway_mac)
            nic.line = TxLine(loop, host_bps, sw.receiver(port), name=f"{a.name}->{sw.name}:{port}",
                              first_bit=host_links == "veth")
            down = TxLine(loop, host_bps, nic.deliver, name=f"{sw.name}:{port}->{a.name}")
            sw.connect(port, down)
            lines.extend((nic.line, down))
            nics[a.name] = nic
        return cls(loop, switches, nics, addrs, lines, routes)

    def packet_hops(self) -> int:
        """Frames put on every link so far (each crosses one hop)."""
        return sum(ln.frames for ln in self.lines)

    def queued(self) -> int:
        """Packets still in any switch's queues or delay lines."""
        return sum(s.sw.tm.total for s in self.switches.values())


def compile_plan_program(plan: RunPlan) -> ProgramModule:
    """The plan's P4 program, compiled by the soft target's compiler (cached)
    with the topology's preprocessor defines. Raises ValueError naming the
    program and the place if it does not compile (a syntax error, or an
    extern the soft switch lacks)."""
    from switches.soft.compiler import compile_program
    from switches.soft.frontend.source import P4Error

    try:
        return compile_program(repo_path(plan.topology.program),
                               defines=plan.topology.defines_dict() or None)
    except P4Error as e:
        raise ValueError(f"P4 program {plan.topology.program} does not compile for the "
                         f"soft switch: {e}") from None
