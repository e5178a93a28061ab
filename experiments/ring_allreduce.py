"""CommLib Ring AllReduce of integers over N ranks through one P4 switch; bit-exact check.

Topology: ``ranks`` hosts around one soft switch running
``switches/p4/l3_ecn.p4`` (routing + ECN marking, no loss); every switch port
runs at ``link_mbps`` and every host NIC too. Rank r runs on host h(r+1) as a
host agent with a CommLib communicator (one ring, ``channels`` QP pairs per
neighbour, DCQCN on every sending QP); the ranks exchange connection data
through files (CommLib's FileRendezvous) and start together.

Each rank's input of iteration i is a pure function of (seed, rank, i), so
every rank computes the exact expected sum itself and checks its result bit
for bit (integer sums wrap identically in any order).

Results: ``allreduce.bit_exact`` (every rank, every iteration, equal to the
expected sum and all ranks' results identical), ``allreduce.ranks``,
``allreduce.iterations``, ``allreduce.mean_s`` (collective time, slowest rank),
``allreduce.algbw_mbps`` (bytes reduced per rank / mean time) and
``allreduce.busbw_mbps`` (x 2(n-1)/n, the ring's traffic per link).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from hosts.agent_spec import CollectiveSpec, JobSpec, TransportSpec
from testbed.experiment import FidelityLimits, PhasePlan, RunPlan, Topology, param
from testbed.net import host_addr
from testbed.summary import Summary
from testbed.timeline import load_phase

NAME = "ring-allreduce"
HOST_PROVIDERS = ("udp", "rxe")   # rxe: one sending QP per rank and channel
PROGRAM = "switches/p4/l3_ecn.p4"
HEADLINE = ("allreduce.bit_exact", "allreduce.ranks", "allreduce.iterations", "allreduce.mean_s",
            "allreduce.busbw_mbps")
# a check of the testbed itself: no paper claim
CLAIMS = ()
REFERENCE: dict[str, float] = {}


@dataclass(frozen=True)
class Params:
    ranks: int = param(8, "hosts in the ring, one rank each", "ranks")
    count: int = param(65536, "elements each rank reduces", "elements")
    dtype: str = param("int64", "element type: int64 or int32")
    iterations: int = param(3, "AllReduces in a row", "collectives")
    channels: int = param(1, "parallel rings, each with its own QPs and its share of every "
                             "step", "rings")
    link_mbps: float = param(4.0, "rate of every link and host NIC; the switch carries ranks "
                                  "x this", "Mb/s")
    slowdown: float = param(1000.0, "time dilation: the modelled NICs run at link_mbps x "
                                    "slowdown and every transport timer is this much longer")
    seed: int = param(1, "seed of the ranks' input data")
    path_mtu: int = param(1024, "RoCE path MTU: payload per packet", "bytes")
    # phantom is for sizes whose buffers would not fit in memory
    # (hosts/commlib/communicator.py)
    payload: str = param("real", "real (every result checked bit for bit) or phantom (the "
                                 "same packets and timing without the data)")

    @classmethod
    def quick(cls) -> Params:
        return cls(ranks=4, count=8192, iterations=2, link_mbps=2.0)

    def __post_init__(self) -> None:
        if not 2 <= self.ranks <= 64:
            raise ValueError("ranks must be 2..64")
        if self.payload not in ("real", "phantom"):
            raise ValueError(f"payload must be real or phantom, not {self.payload!r}")


def plan(p: Params) -> RunPlan:
    t = TransportSpec(scale={"slowdown": p.slowdown, "nic_rate_bps": p.link_mbps * 1e6 * p.slowdown},
                      dcqcn={"preset": "zhu2015"}, path_mtu=p.path_mtu)
    jobs = {}
    for r in range(p.ranks):
        h = host_addr(r + 1)
        jobs[h.name] = JobSpec(
            host=h.name, ip=h.ip, transport=t,
            collective=CollectiveSpec(rank=r, size=p.ranks, job_id=1, op="all_reduce",
                                      dtype=p.dtype, count=p.count, iterations=p.iterations,
                                      channels=p.channels, seed=p.seed, payload=p.payload))
    itemsize = 8 if p.dtype == "int64" else 4
    per_rank_wire = 2 * (p.ranks - 1) / p.ranks * p.count * itemsize * p.iterations * 1.1
    timeout = 3 * per_rank_wire * 8 / (p.link_mbps * 1e6) + 30
    topo = Topology(n_hosts=p.ranks, program=PROGRAM, qdepth_register="MyEgress.qdepth_max",
                    commands=(f"set_port_rate_bps {int(p.link_mbps * 1e6)}",))
    phase = PhasePlan("allreduce", jobs, timeout_s=timeout,
                      notes=f"{p.ranks} ranks, {p.iterations} x AllReduce of {p.count} {p.dtype}")
    return RunPlan(topology=topo, phases=(phase,), fidelity=FidelityLimits(),
                   info={"link_bps": p.link_mbps * 1e6})


@dataclass(frozen=True)
class AllReduceResult:
    bit_exact: bool | None      # None for phantom payloads (not checked)
    ranks: int
    iterations: int
    checks: int
    mean_s: float
    algbw_mbps: float
    busbw_mbps: float
    steps: int
    cnps: int
    retransmissions: int | None  # None where the hosts count none per QP (rxe hosts)


@dataclass(frozen=True)
class Results(Summary):
    allreduce: AllReduceResult


def analyze(run_dir: Path) -> Results:
    p = Params(**json.loads((Path(run_dir) / "plan.json").read_text())["params"])
    data = load_phase(run_dir, "allreduce")
    checks = data.all_events("collective_check")
    by_iter: dict[int, set[str | None]] = {}
    for e in checks:
        by_iter.setdefault(e["iteration"], set()).add(e.get("sha256"))
    complete = len(checks) == p.ranks * p.iterations
    # phantom payloads are not checked: no verdict either way
    bit_exact = None if p.payload == "phantom" else (
        complete and all(e["ok"] for e in checks) and all(len(v) == 1 for v in by_iter.values()))
    durations: dict[int, float] = {}
    for e in data.all_events("collective_end"):
        d = (e["t_ns"] - e["t_start_ns"]) / 1e9
        durations[e["seq"]] = max(durations.get(e["seq"], 0.0), d)
    mean_s = sum(durations.values()) / len(durations) if durations else 0.0
    nbytes = p.count * (8 if p.dtype == "int64" else 4)
    algbw = nbytes * 8 / mean_s / 1e6 if mean_s else 0.0
    steps = data.all_events("step_end")
    reports = data.all_events("pacer_report")
    return Results(AllReduceResult(
        bit_exact=bit_exact,
        ranks=p.ranks,
        iterations=len(by_iter),
        checks=len(checks),
        mean_s=round(mean_s, 4),
        algbw_mbps=round(algbw, 4),
        busbw_mbps=round(algbw * 2 * (p.ranks - 1) / p.ranks, 4),
        steps=len(steps),
        cnps=sum(e["qp"]["cnps_rcvd"] for e in reports),
        retransmissions=(sum(e["qp"]["retransmits"] for e in reports)
                         if all("retransmits" in e["qp"] for e in reports) else None),
    ))


def plot(run_dir: Path) -> list[Path]:
    from testbed.plotting import collective_timeline

    data = load_phase(run_dir, "allreduce")
    n = len(data.events)
    return [collective_timeline(data, Path(run_dir) / "plots" / "allreduce.png",
                                title=f"{NAME}: {n} ranks, ring steps per rank")]
