"""Symphony on rdma_rxe hosts, end to end: `testbed run symphony-two-flows --hosts
rxe`. rxe sends BTH byte 4 (the job id) as 0 and fixes a QP's UDP source port
from its flow label at RTR, so what this checks is what makes Symphony work with
unmodified rxe senders: each flow's packets leave the host with the step of its
QP in the source port and no job id, the switch writes the phase's job id into
them (MyIngress.job_of_source), and the receiving rxe host accepts the rewritten
packets (the ICRC masks that byte): every flow delivers its bytes. The
switch's marks reach the senders' DCQCN shims as CNPs. Skips where rxe hosts
cannot run (no rdma_rxe: this machine); the guest VM runs it
(vm/guest-tests.sh).
"""

from __future__ import annotations

import struct
from collections import Counter, defaultdict
from pathlib import Path

from hosts.roce.constants import OPS_DATA, tag_sport
from hosts.roce.rxe.frames import parse_bth
from switches.soft.pcap import read_pcap

from .helpers import qp_counts, run_on_rxe_hosts

STEP_A = 10          # experiments.symphony_two_flows: A carries step k, B step k + 1


def _data_frames(path: Path) -> list[tuple[str, int, int, int, int]]:
    """(source IP, UDP source port, BTH byte 4 (the job id), destination QP, PSN)
    of every RoCE data frame in a capture (its IPv4 header has no options, as
    rxe's and the switches' have not)."""
    out = []
    for _ts, f in read_pcap(path):
        b = parse_bth(f)
        if b is not None and b.opcode in OPS_DATA:
            out.append((b.src_ip, struct.unpack_from("!H", f, 34)[0], f[46], b.dqpn, b.psn))
    return out


def test_symphony_two_flows_on_rxe_hosts_gets_the_job_id_from_the_switch(
        tmp_path: Path) -> None:
    run = tmp_path / "run"
    # k = 1 (the paper's is 0.01): B's packets ahead of A's are then marked with
    # certainty, which makes the mechanism's effect on rxe hosts a sure thing in
    # a run this short; this checks the mechanism, it reproduces no figure
    summary = run_on_rxe_hosts("symphony-two-flows", run, "link_mbps=4", "pfc=false",
                               "flow_kb=256", "offsets=0", "key_offset=0", "seeds=1", f"step_a={STEP_A}",
                               "k=1", pcap=True)
    base, sym = summary["key"]["baseline"], summary["key"]["symphony"]
    assert base["bytes_ok"] and sym["bytes_ok"]
    # Symphony's marks of the step ahead (B) reached B's shim as CNPs
    assert sym["ce_b"] > 0 and sym["cnps_b"] > 0, sym
    # the hosts sent every data frame untagged, each flow from its step's port
    sent = {h: _data_frames(run / "switch" / f"s1-eth{h}_in.pcap") for h in (1, 2)}
    assert {(s, j) for _ip, s, j, *_ in sent[1]} == {(tag_sport(STEP_A), 0)}
    assert {(s, j) for _ip, s, j, *_ in sent[2]} == {(tag_sport(STEP_A + 1), 0)}
    # toward the receiver each carries its phase's job id: B alone (255, not
    # tracked), then the baseline's and Symphony's fresh ids (1 and 2)
    jobs = Counter((ip, j) for ip, _s, j, *_ in _data_frames(run / "switch" / "s1-eth3_out.pcap"))
    assert {j for _ip, j in jobs} == {255, 1, 2}
    for ip, job in (("10.0.2.1", 255), ("10.0.1.1", 1), ("10.0.2.1", 1), ("10.0.1.1", 2),
                    ("10.0.2.1", 2)):
        assert jobs[(ip, job)] >= 256, (ip, job)          # 256 KiB: 256 packets at least


def _retransmissions_at_switch(run: Path, ip: str, ports: list[str]) -> int:
    """Data frames from ``ip`` the switches sent on ``ports`` beyond the first copy
    of each PSN of each use of a lane QP, a use being one (phase's job id, QP,
    step tag): what a go-back-N requester counts as retransmissions."""
    psns: dict[tuple[int, int, int], list[int]] = defaultdict(list)
    for port in ports:
        for src, sport, job, dqpn, psn in _data_frames(run / "switch" / f"{port}_out.pcap"):
            if src == ip:
                psns[(job, dqpn, sport)].append(psn)
    return sum(len(v) - len(set(v)) for v in psns.values())


def test_symphony_ring_on_rxe_ranks_tags_each_step_and_is_bit_exact(tmp_path: Path) -> None:
    # Four rxe ranks on a leaf-spine (two per leaf), two rings each: every step
    # of a rank's ring leaves from a lane QP connected with that step's tag (its
    # UDP source port, fixed by rxe at RTR) and PSN 0, so each lane is reset and
    # connected again per step; the shim's wire counts take that as a new
    # connection, not as a go-back. The switch writes the job id rxe does not send.
    run = tmp_path / "run"
    iterations, ranks = 2, 4
    summary = run_on_rxe_hosts("symphony-ring", run, "hosts_per_leaf=2", "chunk_kb=16",
                               f"iterations={iterations}", "seeds=1",
                               "schemes=baseline,symphony", "warmup_kb=0", "pfc=false",
                               pcap=True)
    assert summary["bit_exact"] is True
    # rxe sends from any CPU: the runner's receive steering keeps every link in order
    assert summary["fidelity"]["checks"]["switch_ingress_order"]["value"] == 0
    jobs = {1, 2}           # the phases' job ids (symphony_ring.plan counts from 1)
    steps = iterations * 2 * (ranks - 1)      # per phase: both start at tag 0 (one seed)
    ports = [f"leaf{(h - 1) // 2 + 1}-eth{(h - 1) % 2 + 1}" for h in range(1, ranks + 1)]
    for h in range(1, ranks + 1):
        sent = _data_frames(run / "switch" / f"{ports[h - 1]}_in.pcap")
        assert {j for _ip, _s, j, *_ in sent} == {0}, h                     # rxe: no job id
        assert {s for _ip, s, *_ in sent} == {tag_sport(i) for i in range(steps)}, h
        got = _data_frames(run / "switch" / f"{ports[h - 1]}_out.pcap")
        assert got and {j for _ip, _s, j, *_ in got} == jobs, h           # written by the switch
        # The shim counted every data frame the rank sent, and as retransmissions
        # only the copies the switches carried again within one step's use of a
        # lane: a lane's PSNs starting over in the next step are none.
        counts = qp_counts(run, f"h{h}", ("retransmits", "wire_tx_pkts"))
        assert counts == {"retransmits": _retransmissions_at_switch(run, f"10.0.{h}.1", ports),
                          "wire_tx_pkts": len(sent)}, h


def test_a_2d_ring_on_rxe_ranks_tags_its_steps_as_one_sequence(tmp_path: Path) -> None:
    # A 2 x 2 ring (a group per leaf): each rank's group and cross lanes are
    # connected with the tags of the job's one step sequence (rxe fixes a QP's
    # source port at RTR), so every step leaves from its own tag.
    run = tmp_path / "run"
    iterations, ranks = 2, 4
    summary = run_on_rxe_hosts("symphony-ring", run, "hosts_per_leaf=2", "chunk_kb=16",
                               f"iterations={iterations}", "seeds=1", "ring_layout=local",
                               "ring_dims=2x2", "schemes=baseline,symphony", "warmup_kb=0",
                               "pfc=false", pcap=True)
    assert summary["bit_exact"] is True
    steps = iterations * (2 * (2 - 1) + 2 * (2 - 1))
    ports = [f"leaf{(h - 1) // 2 + 1}-eth{(h - 1) % 2 + 1}" for h in range(1, ranks + 1)]
    for h in range(1, ranks + 1):
        sent = _data_frames(run / "switch" / f"{ports[h - 1]}_in.pcap")
        assert {s for _ip, s, *_ in sent} == {tag_sport(i) for i in range(steps)}, h
