"""Incast: N senders into one receiver through one P4 switch, DCQCN against RED marks.

Topology: ``senders`` + 1 hosts around one soft switch running
``switches/p4/l3_ecn.p4``; hosts h1..hN each send one flow of ``msgs`` RDMA
WRITE_WITH_IMM messages of ``msg_kib`` KiB to the last host. Every link and
NIC runs at ``link_mbps``, the modelled NIC at ``nic_gbps``, so the time
scale is nic_gbps / link_mbps.

Results: ``incast.jain_index`` (Jain's index of the flows' goodputs),
``incast.goodputs_mbps``, ``incast.max_queue_pkts`` (the switch's watermark
toward the receiver) and ``incast.bytes_ok`` (every receiver's bytes checked).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hosts.agent_spec import FlowSpec, JobSpec, TransportSpec
from testbed.claims import Claim
from testbed.experiment import PhasePlan, RunPlan, Topology
from testbed.modelled import ModelledNetwork, Red, packets
from testbed.net import host_addr
from testbed.timeline import jain_index, load_phase

# --8<-- [start:registry]
NAME = "incast"
HOST_PROVIDERS = ("udp",)
PROGRAM = "switches/p4/l3_ecn.p4"
HEADLINE = ("incast.jain_index", "incast.max_queue_pkts", "incast.bytes_ok")

REFERENCE = {"incast.jain_index": 1.0}     # what fair sharing would give
CLAIMS = (
    Claim("Fairness", "the senders share the bottleneck fairly",
          key="incast.jain_index", paper=REFERENCE["incast.jain_index"],
          direction="above", versus=0.5, abs_tol=0.05, plots=("incast.png",)),
)
# --8<-- [end:registry]


# --8<-- [start:params]
@dataclass(frozen=True)
class Params:
    senders: int = 3
    msgs: int = 60                 # messages per flow
    msg_kib: int = 64
    link_mbps: float = 8.0         # every link and host NIC
    nic_gbps: float = 40.0         # the modelled NIC; sets the time scale

    @classmethod
    def quick(cls) -> Params:
        return cls(senders=2, msgs=20, link_mbps=4.0)

    def __post_init__(self) -> None:
        if not 2 <= self.senders <= 16:
            raise ValueError("senders must be 2..16")

    @property
    def slowdown(self) -> float:
        return self.nic_gbps * 1e3 / self.link_mbps
# --8<-- [end:params]


# --8<-- [start:plan]
def plan(p: Params) -> RunPlan:
    receiver = host_addr(p.senders + 1)
    transport = TransportSpec(
        scale={"slowdown": p.slowdown, "nic_rate_bps": p.nic_gbps * 1e9},
        dcqcn={"preset": "zhu2015"})
    jobs: dict[str, JobSpec] = {}
    rx_flows = []
    for i in range(1, p.senders + 1):
        h = host_addr(i)
        size, name = p.msg_kib * 1024, f"f{i}"
        jobs[h.name] = JobSpec(host=h.name, ip=h.ip, transport=transport, flows=(
            FlowSpec(flow=name, role="sender", peer_ip=receiver.ip, msg_bytes=size,
                     count=p.msgs, seed=i),))
        rx_flows.append(FlowSpec(flow=name, role="receiver", peer_ip=h.ip, msg_bytes=size,
                                 count=p.msgs, seed=i))
    jobs[receiver.name] = JobSpec(host=receiver.name, ip=receiver.ip, transport=transport,
                                  flows=tuple(rx_flows))
    network = ModelledNetwork(
        link_gbps=p.nic_gbps, slowdown=p.slowdown, buffer=packets(64),
        red=Red(kmin=packets(4), kmax=packets(16), pmax=0.2,
                command="table_set_default MyEgress.ecn_config MyEgress.set_ecn_params "
                        "{kmin} {kmax} {pmax_percent}"))
    topo = Topology(n_hosts=p.senders + 1, program=PROGRAM, network=network,
                    qdepth_register="MyEgress.qdepth_max")
    wire_s = p.senders * p.msgs * p.msg_kib * 1024 * 8 / (p.link_mbps * 1e6)
    phase = PhasePlan("incast", jobs, timeout_s=3 * wire_s + 30,
                      watch_ports=(receiver.port,),
                      notes=f"{p.senders} senders -> {receiver.name}")
    return RunPlan(topology=topo, phases=(phase,))
# --8<-- [end:plan]


# --8<-- [start:analyze]
def analyze(run_dir: Path) -> dict[str, Any]:
    saved = json.loads((Path(run_dir) / "plan.json").read_text())
    p = Params(**saved["params"])
    data = load_phase(run_dir, "incast")
    goodputs, ok = [], True
    for i in range(1, p.senders + 1):
        rx = data.flow_end(f"f{i}", "receiver")
        start = data.flow_start(f"f{i}", "sender")["t_ns"]
        goodputs.append(rx["bytes"] * 8 / ((rx["t_ns"] - start) / 1e9) / 1e6)
        ok = ok and bool(rx.get("bytes_ok"))
    port = str(host_addr(p.senders + 1).port)
    return {"incast": {
        "jain_index": round(jain_index(goodputs), 4),
        "goodputs_mbps": [round(g, 3) for g in goodputs],
        "max_queue_pkts": (data.stats.get("qdepth_max") or {}).get(port),
        "bytes_ok": ok,
    }}
# --8<-- [end:analyze]


# --8<-- [start:plot]
def plot(run_dir: Path) -> list[Path]:
    from testbed.plotting import flow_timeline

    data = load_phase(run_dir, "incast")
    port = int(data.plan["watch_ports"][0]) if data.plan.get("watch_ports") else None
    out = Path(run_dir) / "plots" / "incast.png"
    return [flow_timeline(data, out, title=f"{NAME}: {len(data.flows())} flows", port=port)]
# --8<-- [end:plot]
