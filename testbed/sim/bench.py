"""Speed of the virtual-time engine: Ring AllReduce on a leaf-spine at 10 Gb/s.

``testbed bench sim`` runs, for each rank count, one AllReduce of
``chunk_kib`` per rank and ring step over a two-tier leaf-spine of soft
switches running symphony.p4 (ECMP over the spines), NICs and links at
``link_gbps``, every transport timer at its model value (no slowdown), each
size in a child process of its own so that its peak memory is its own. It
prints packet-hops and events per wall second, wall time and peak memory, and,
in the same run, ns-3's figure for a plain UDP flood through a 3-hop chain of
the same rate (testbed.sim.ns3_reference; stock ns-3 has no RoCE), the speed
to compare against. These are measurements, not tests.
"""

from __future__ import annotations

import json
import resource
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path

from hosts.agent_spec import CollectiveSpec, JobSpec, TransportSpec
from testbed.experiment import FidelityLimits, PhasePlan, RunPlan, Topology
from testbed.net import LeafSpine

__all__ = ["SimFigure", "ring_plan", "fabric_for", "measure", "measure_subprocess"]

PROGRAM = "switches/p4/symphony.p4"


@dataclass(frozen=True)
class SimFigure:
    ranks: int
    leaves: int
    spines: int
    link_gbps: float
    chunk_kib: int
    interpreter: str
    sim_s: float               # simulated seconds
    wall_s: float              # wall time of the simulation alone (no set-up, no analysis)
    events: int
    packet_hops: int
    packet_hops_per_s: float
    events_per_s: float
    peak_rss_mib: float        # the child process's peak resident memory
    payload: str               # "real" (checked bit for bit) or "phantom" (hosts.commlib)
    bit_exact: bool | None     # None: phantom payloads are not checked
    cct_s: float               # the AllReduce's completion time, simulated

    def line(self) -> str:
        return (f"sim  {self.ranks:4d} ranks ({self.leaves}x{self.spines} leaf-spine, "
                f"{self.link_gbps:g} Gb/s, {self.chunk_kib} KiB chunks, {self.payload} payload, "
                f"{self.interpreter}): "
                f"{self.packet_hops_per_s:,.0f} packet-hops/s, {self.events_per_s:,.0f} events/s, "
                f"{self.packet_hops:,} packet-hops in {self.wall_s:.1f} s wall "
                f"({self.sim_s * 1e3:.3f} ms simulated, CCT {self.cct_s * 1e3:.3f} ms), "
                f"peak {self.peak_rss_mib:.0f} MiB, bit-exact {self.bit_exact}")


def fabric_for(ranks: int) -> LeafSpine:
    """Leaves of 8 hosts (4 at 8 ranks), as many spines as leaves."""
    per_leaf = 4 if ranks <= 8 else 8 if ranks <= 32 else 16
    if ranks % per_leaf:
        raise ValueError(f"{ranks} ranks do not fill leaves of {per_leaf} hosts")
    leaves = ranks // per_leaf
    return LeafSpine(leaves=leaves, spines=leaves, hosts_per_leaf=per_leaf, ecmp=True)


def ring_plan(ranks: int, link_gbps: float = 10.0, chunk_kib: int = 64,
              path_mtu: int = 1024, payload: str = "real") -> RunPlan:
    """One Ring AllReduce of ``chunk_kib`` KiB per rank and step (int64) on
    ``fabric_for(ranks)``, every link at ``link_gbps``, DCQCN (ConnectX
    preset) at its own time constants."""
    fab = fabric_for(ranks)
    t = TransportSpec(scale={"slowdown": 1.0, "nic_rate_bps": link_gbps * 1e9,
                             "floor_ms": 0.0},
                      dcqcn={"preset": "connectx"}, path_mtu=path_mtu)
    count = chunk_kib * 1024 * ranks // 8
    jobs = {}
    for a in fab.addrs():
        r = int(a.name[1:]) - 1
        jobs[a.name] = JobSpec(host=a.name, ip=a.ip, transport=t,
                               collective=CollectiveSpec(rank=r, size=ranks, job_id=1,
                                                         op="all_reduce", dtype="int64",
                                                         count=count, iterations=1, seed=7,
                                                         payload=payload))
    topo = Topology(n_hosts=ranks, program=PROGRAM, fabric=fab,
                    commands=(f"set_port_rate_bps {int(link_gbps * 1e9)}",
                              "set_queue_depth 1000"))
    return RunPlan(topology=topo, phases=(PhasePlan("allreduce", jobs, timeout_s=60.0),),
                   fidelity=FidelityLimits(), switch_poll_interval_s=1e-3)


def measure(ranks: int, link_gbps: float = 10.0, chunk_kib: int = 64,
            payload: str = "real", program_path: str | None = None) -> SimFigure:
    """Run the plan here; the figure (peak memory: this process's).
    ``program_path``: the generated P4 module, compiled elsewhere (PyPy)."""
    from switches.soft.backends import load_generated
    from switches.targets import SOFT
    from testbed.runner.switch_commands import _apply_commands
    from testbed.sim.engine import SimRun, _interpreter
    from testbed.sim.switch import SimSwitch
    from testbed.timeline import load_phase

    plan = ring_plan(ranks, link_gbps, chunk_kib, payload=payload)
    program = load_generated(program_path) if program_path else None
    with tempfile.TemporaryDirectory(prefix="p4tb-bench-sim-") as d:
        def apply(sw: SimSwitch, lines: list[str], where: str) -> None:
            _apply_commands(sw.controller(), lines, SOFT,
                            plan.topology.packet_bytes, where, [])

        sim = SimRun(plan, Path(d), apply=apply, program=program)
        t0 = time.perf_counter()
        sim.run()
        wall = time.perf_counter() - t0
        data = load_phase(Path(d), "allreduce")
        checks = data.all_events("collective_check")
        ends = data.all_events("collective_end")
        cct = max((e["t_ns"] - e["t_start_ns"] for e in ends), default=0) / 1e9
        rec = sim.record()
    fab = plan.topology.fabric
    assert fab is not None
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    return SimFigure(ranks=ranks, leaves=fab.leaves, spines=fab.spines, link_gbps=link_gbps,
                     chunk_kib=chunk_kib, interpreter=_interpreter(), sim_s=rec["sim_s"],
                     wall_s=round(wall, 3), events=rec["events"],
                     packet_hops=rec["packet_hops"],
                     packet_hops_per_s=round(rec["packet_hops"] / wall),
                     events_per_s=round(rec["events"] / wall), peak_rss_mib=round(peak, 1),
                     payload=payload,
                     bit_exact=None if payload == "phantom" else
                     len(checks) == ranks and all(e["ok"] for e in checks),
                     cct_s=cct)


def measure_subprocess(ranks: int, link_gbps: float = 10.0, chunk_kib: int = 64,
                       payload: str = "real", interpreter: str | None = None,
                       timeout_s: float = 3600) -> SimFigure:
    """``measure`` in a child process (its own peak memory), under
    ``interpreter`` (default: this one); the program is compiled here."""
    from switches.soft.backends import write_generated
    from testbed.sim.network import compile_plan_program
    from testbed.sim.pypy import child_env

    root = str(Path(__file__).resolve().parents[2])
    generated = write_generated(compile_plan_program(ring_plan(8)))
    env = child_env()
    r = subprocess.run([interpreter or sys.executable, "-m", "testbed.sim.bench", str(ranks),
                        str(link_gbps), str(chunk_kib), payload, generated],
                       capture_output=True, text=True,
                       timeout=timeout_s, env=env, cwd=root)
    if r.returncode != 0:
        tail = "\n".join(r.stderr.strip().splitlines()[-5:])
        raise RuntimeError(f"bench sim at {ranks} ranks failed (exit {r.returncode}): {tail}")
    return SimFigure(**json.loads(r.stdout.strip().splitlines()[-1]))


def main(argv: list[str] | None = None) -> int:
    from switches.soft.backends import install_compat

    install_compat()  # (PyPy 3.9)
    args = sys.argv[1:] if argv is None else argv
    fig = measure(int(args[0]), float(args[1]), int(args[2]), args[3] if len(args) > 3 else "real",
                  args[4] if len(args) > 4 else None)
    print(json.dumps(asdict(fig)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
