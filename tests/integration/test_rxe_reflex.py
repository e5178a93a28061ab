"""ReFlex on rdma_rxe hosts, end to end: `testbed run reflex-cases --hosts rxe`.
rxe puts one traffic class (set at RTR) in every packet of a QP, while a
flexible flow moves between the switch's two priority queues by its packets'
DSCP as it goes. What this checks is what makes ReFlex work with unmodified rxe
senders: the host's DCQCN shim writes the DSCP the flow's logic picks on the
QP's packets as they leave (tc pedit and csum on the QP's u32 filter), the
switch queues them by it, and the receiving rxe host accepts them (the ICRC
masks the TOS byte): every flow delivers its bytes. Skips where rxe hosts
cannot run (no rdma_rxe: this machine); the guest VM runs it
(vm/guest-tests.sh).
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

from hosts.reflex.schemes import DSCP_LOW
from hosts.roce.constants import OPS_DATA
from hosts.roce.rxe.frames import parse_bth
from switches.soft.pcap import read_pcap
from testbed.net import host_addr

from .helpers import run_on_rxe_hosts


def _dscps(path: Path) -> Counter[tuple[str, int]]:
    """(source IP, DSCP) of every RoCE data frame in a capture, counted."""
    out: Counter[tuple[str, int]] = Counter()
    for _ts, f in read_pcap(path):
        b = parse_bth(f)
        if b is not None and b.opcode in OPS_DATA:
            out[(b.src_ip, f[15] >> 2)] += 1
    return out


def _flow_ends(phase_dir: Path) -> list[dict]:
    ends = []
    for ev in phase_dir.glob("h*.events.jsonl"):
        ends += [e for e in map(json.loads, ev.read_text().splitlines())
                 if e.get("event") == "flow_end"]
    return ends


def test_reflex_on_rxe_hosts_moves_the_flexible_flow_by_its_dscp_on_the_wire(
        tmp_path: Path) -> None:
    run = tmp_path / "run"
    # The paper's network at 4 Mb/s (slowdown 2500) with a 0.2 ms probing
    # interval (paper: 5 ms), 0.5 s of wall time, and 16 KiB messages, so that
    # a cycle fits the guest's emulated CPU; this checks the mechanism, it
    # reproduces no figure. Case 1 has the flexible flow (h1) alone long
    # enough to build the budget it spends at low priority once the regular
    # flow (h2) arrives; under "absolute" the flexible flow is low throughout.
    summary = run_on_rxe_hosts("reflex-cases", run, "schemes=reflex,absolute", "seeds=1",
                               "link_mbps=4", "t_int_us=200", "msg_bytes=16384",
                               "case1_short_cycles=1", "case2_short_cycles=1", pcap=True)
    phases = run / "phases"
    for phase in ("case1-reflex", "case2-reflex", "case1-absolute", "case2-absolute"):
        ends = _flow_ends(phases / phase)
        got = {(e["flow"], e["role"]): e for e in ends}
        assert set(got) == {(f, r) for f in ("flex", "regular") for r in ("sender", "receiver")}
        for flow in ("flex", "regular"):
            assert got[(flow, "receiver")]["bytes_ok"], (phase, flow)
            assert got[(flow, "receiver")]["sha256"] == got[(flow, "sender")]["sha256"]
    flex = next(e for e in _flow_ends(phases / "case1-reflex")
                if e["flow"] == "flex" and e["role"] == "sender")
    assert flex["flexible"]["low_s"] > 0     # its logic went low at least once
    # On the wire: the flexible sender's packets at both priorities, the regular
    # sender's never low
    sent = _dscps(run / "switch" / "s1-eth1_in.pcap") + _dscps(run / "switch" / "s1-eth2_in.pcap")
    h1, h2 = host_addr(1).ip, host_addr(2).ip
    assert sent[(h1, 0)] > 0 and sent[(h1, DSCP_LOW)] > 0, sent
    assert sent[(h2, 0)] > 0 and sent[(h2, DSCP_LOW)] == 0, sent
    assert {d for (_ip, d) in sent} == {0, DSCP_LOW}, sent
    # toward the receiver, both senders' packets keep the DSCP they arrived with
    assert set(_dscps(run / "switch" / "s1-eth3_out.pcap")) == set(sent)
    assert summary["ok"] and summary["hosts"] == "rxe"


def test_reflex_workload_on_rxe_hosts_runs_its_connection_pools(tmp_path: Path) -> None:
    # Workloads 1 and 2, tiny: workload 1's flexible and regular flows, workload
    # 2's 100 kB regular flows as messages over pools of four rxe connections
    # per sender, each connection registered with the host's DCQCN shim; the
    # mechanism at work, no figure (workload 3's megabyte flows would take
    # minutes at 4 Mb/s)
    run = tmp_path / "run"
    summary = run_on_rxe_hosts("reflex-workload", run, "link_mbps=4", "t_int_us=200",
                               "msg_bytes=16384", "senders=2", "flexible_cycles=0.1", "flows=4",
                               "alphas=0.8", "rs=", "baselines=none", "seeds=1",
                               "w2_flexible=1", "workloads=1,2")
    phases = run / "phases"
    for phase in ("w1-none", "w1-reflex-a080", "w2-none", "w2-reflex-a080"):
        ends = _flow_ends(phases / phase)
        received = [e for e in ends if e["role"] == "receiver"]
        assert received and all(e["bytes_ok"] for e in received), phase
        assert len(received) == len([e for e in ends if e["role"] == "sender"]), phase
    # a pool's connections each report the messages they carried
    reports = []
    for ev in (phases / "w2-none").glob("h*.events.jsonl"):
        reports += [e for e in map(json.loads, ev.read_text().splitlines())
                    if e.get("event") == "pacer_report" and ".q" in e["flow"]]
    assert len(reports) >= 4 and sum(r["qp"]["tx_pkts"] for r in reports) > 0
    assert summary["ok"] and summary["hosts"] == "rxe"
