"""EPIC Mode-II on rdma_rxe ranks, end to end: `testbed run epic-allreduce --hosts
rxe` and `testbed run epic-primitives --hosts rxe` with three ranks through the
soft switch running epic.p4, `testbed run epic-tree --hosts rxe` with four
ranks under three switches (a leaf-spine of rxe hosts), and `testbed run
epic-loss --hosts rxe` with three ranks under loss. The
switch terminates every rank's QP (it adds the ranks' packets, multicasts the
sums rewritten to each rank's IP and QPN with a new ICRC, and reflects each
rank's ACKs to the rank), so unmodified rxe ranks accepting its packets is
what this checks: every result bit-exact in the EPIC phase and in the host
rings, and every frame the switch sent a rank carrying the ICRC that
scapy.contrib.roce computes (rxe drops any other). Skips where rxe hosts
cannot run (no rdma_rxe: this machine); the guest VM runs it
(vm/guest-tests.sh).
"""

from __future__ import annotations

import json
import struct
from pathlib import Path
from typing import Any

import pytest
from scapy.contrib import roce as scapy_roce
from scapy.layers.inet import IP, UDP
from scapy.packet import Raw
from scapy.utils import RawPcapReader

from hosts.agent.agent import rxe_ack_timeout_ns
from hosts.roce.scale import Scale

from .helpers import qp_counts, run_on_rxe_hosts, wire_counts_at_switch

RANKS = 3
SWITCH_IP = bytes([10, 255, 0, 1])      # experiments.epic_allreduce.ENDPOINT


def _scapy_icrc(frame: bytes) -> int:
    """The ICRC scapy.contrib.roce computes for an Ethernet/IPv4/UDP/RoCE frame
    (independent of the project's and the switch's code)."""
    ihl = (frame[14] & 0xF) * 4
    ip = IP(frame[14: 14 + ihl])
    sport, dport = struct.unpack("!HH", frame[14 + ihl: 18 + ihl])
    roce = frame[22 + ihl:]
    op, flags, pkey, w1, w2 = struct.unpack("!BBHII", roce[:12])
    bth = scapy_roce.BTH(opcode=op, solicited=flags >> 7, migreq=(flags >> 6) & 1,
                         padcount=(flags >> 4) & 3, version=flags & 0xF, pkey=pkey,
                         dqpn=w1 & 0xFFFFFF, ackreq=w2 >> 31, psn=w2 & 0xFFFFFF)
    pkt = (IP(src=ip.src, dst=ip.dst, id=ip.id, flags=ip.flags, frag=ip.frag, ttl=ip.ttl,
              tos=ip.tos, proto=17) / UDP(sport=sport, dport=dport) / bth / Raw(roce[12:-4]))
    return int.from_bytes(bytes(pkt)[-4:], "little")


def _check_schemes(summary: dict[str, Any], collectives: int, *schemes: str) -> None:
    """Each scheme ran its ``collectives`` collectives, all bit-exact, each at
    a positive algorithm bandwidth."""
    for scheme in schemes:
        res = summary["schemes"][scheme]
        assert res["bit_exact"] and res["collectives"] == collectives, scheme
        algbw = res["algbw"]    # per message size (a list) or per primitive (a dict)
        assert all(v > 0 for v in (algbw.values() if isinstance(algbw, dict) else algbw)), scheme


def _check_switch_frames(run: Path, min_data: int) -> None:
    """What the switch sent each rank: at least ``min_data`` data packets and
    some ACKs, all from the endpoint, rewritten to the rank, with a valid ICRC
    over the IPv4 header (its identification included) as it left the switch."""
    for port in range(1, RANKS + 1):
        frames = [f for f in _roce_frames(run / "switch" / f"s1-eth{port}_out.pcap")
                  if f[26:30] == SWITCH_IP]
        data = [f for f in frames if f[42] != 0x11]     # BTH opcode: not an ACK
        acks = [f for f in frames if f[42] == 0x11]
        assert len(data) >= min_data and acks, port
        assert all(f[30:34] == bytes([10, 0, port, 1]) for f in frames), port
        bad = [f.hex() for f in frames if int.from_bytes(f[-4:], "little") != _scapy_icrc(f)]
        assert not bad, bad[:2]


def _check_wire_counts(run: Path, summary: dict[str, Any], ranks: int = RANKS) -> dict[str, int]:
    """Each rank's shim counted its QPs' retransmissions, NAKs and timeouts from
    its interface (hosts.roce.rxe.wire_counts.WireCounts) as the switch's capture of
    the rank's port counts them; returns the counts summed over the ranks."""
    t = summary["transport"]
    # the shims' window (half the ACK timeout), the least of the run's transports
    window = min(rxe_ack_timeout_ns(Scale(slowdown=s["scale"]["slowdown"],
                                          nic_rate_bps=s["scale"]["nic_rate_bps"]),
                                    s["path_mtu"]) for s in t.get("per_spec", [t])) // 2
    total = {"retransmits": 0, "naks_rcvd": 0, "rto": 0}
    for r in range(1, ranks + 1):
        shim = qp_counts(run, f"h{r}", (*total, "wire_tx_pkts"))
        assert shim == wire_counts_at_switch(run, f"s1-eth{r}", f"10.0.{r}.1", window), r
        for k in total:
            total[k] += shim[k]
    return total


def _check_device_counts_acks(run: Path) -> None:
    """A rank's device counters over the EPIC phase count the ACKs its QP sent for
    the sums among its sent packets: sent_pkts is more than the data the rank
    uploaded, by no more than the ACKs it sent (the switch's capture of what
    arrived from the rank). So a rank's retransmissions are not sent_pkts minus
    its data (docs/experiments/analysis/epic-loss.md)."""
    for r in range(1, RANKS + 1):
        evs = [json.loads(x) for x in
               (run / "phases" / "epic" / f"h{r}.events.jsonl").read_text().splitlines()]
        sent = next(e for e in evs if e["event"] == "device_counters")["counters"]["sent_pkts"]
        frames = [f for f in _roce_frames(run / "switch" / f"s1-eth{r}_in.pcap")
                  if f[30:34] == SWITCH_IP]
        acks = sum(1 for f in frames if f[42] == 0x11)
        data = sum(1 for f in frames if f[42] not in (0x11, 0x81))    # not ACKs, CNPs
        assert acks > 0 and data < sent <= data + acks, (r, data, acks, sent)


def _roce_frames(pcap: Path) -> list[bytes]:
    """The RoCEv2 frames (IPv4, UDP to 4791) in ``pcap``."""
    out = []
    for frame, _meta in RawPcapReader(str(pcap)):
        if len(frame) < 58 or frame[12:14] != b"\x08\x00" or frame[23] != 17:
            continue
        udp = 14 + (frame[14] & 0xF) * 4
        if int.from_bytes(frame[udp + 2: udp + 4], "big") == 4791:
            out.append(frame)
    return out


@pytest.mark.root
def test_epic_allreduce_on_rxe_ranks_is_bit_exact_and_the_switch_icrc_valid(
        tmp_path: Path) -> None:
    run = tmp_path / "run"
    summary = run_on_rxe_hosts("epic-allreduce", run, f"ranks={RANKS}", "min_kib=4",
                               "max_kib=16", "iterations=1", "warmup_kib=0", pcap=True)
    assert summary["sizes"] == [4096, 16384]
    assert summary["bit_exact"]
    schemes = ("epic", "ring", "ring256")
    _check_schemes(summary, 2, *schemes)
    # rxe counts retransmissions per device; each rank's shim counts them per QP
    # from the wire, as the switch's capture does
    counts = _check_wire_counts(run, summary)
    assert sum(summary["schemes"][s]["retransmissions"] for s in schemes) == counts["retransmits"]
    # the results: 16 KiB = 64 packets, 4 KiB = 16, an announcement each
    _check_switch_frames(run, 16 + 64 + 2)
    _check_device_counts_acks(run)


@pytest.mark.root
def test_epic_primitives_on_rxe_ranks_are_bit_exact(tmp_path: Path) -> None:
    # Reduce, Broadcast, ReduceScatter, AllGather of 3 KiB (768 int32, an equal
    # share per rank) and two Barriers: the Reduce groups (a result for the root
    # alone, the root's ACKs to every rank) and the Broadcast groups (children's
    # ACKs aggregated with min, their RNR NAKs passed to the root)
    run = tmp_path / "run"
    summary = run_on_rxe_hosts("epic-primitives", run, f"ranks={RANKS}", "size_kib=3",
                               "iterations=1", "barriers=2", "warmup_kib=0", pcap=True)
    assert summary["bit_exact"]
    _check_schemes(summary, 6, "epic", "ring")
    assert len(summary["schemes"]["epic"]["barrier_ms"]) == 2
    # every rank received at least the data of the rounds it is not the root of
    _check_switch_frames(run, 3)


@pytest.mark.root
def test_epic_tree_on_rxe_ranks_is_bit_exact(tmp_path: Path) -> None:
    # The Tree-3-2 of epic-tree: four rxe ranks, two on each leaf switch, the
    # leaves' partial sums added at the root; rxe hosts on a leaf-spine sit in
    # the initial namespace, each on its own link to its leaf
    run = tmp_path / "run"
    summary = run_on_rxe_hosts("epic-tree", run, "min_kib=4", "max_kib=4", "iterations=1",
                               "float_kib=0", "barriers=1", "warmup_kib=0", pcap=True)
    assert summary["ranks"] == 4 and summary["bit_exact"]
    _check_schemes(summary, 2, "epic", "ring", "ring256")     # an AllReduce and a Barrier
    assert all(isinstance(summary["schemes"][s]["retransmissions"], int)
               for s in ("epic", "ring", "ring256"))
    # what each leaf sent its ranks: the root's sums copied down (4 KiB = 16
    # packets) and reflected ACKs, every frame with the ICRC scapy computes
    for leaf in (1, 2):
        for port in (1, 2):
            frames = _roce_frames(run / "switch" / f"leaf{leaf}-eth{port}_out.pcap")
            data = [f for f in frames if f[42] != 0x11]
            assert len(data) >= 16 and len(data) < len(frames), (leaf, port)
            bad = [f.hex() for f in frames
                   if int.from_bytes(f[-4:], "little") != _scapy_icrc(f)]
            assert not bad, bad[:2]


@pytest.mark.root
def test_epic_loss_on_rxe_ranks_counts_the_repairs_per_qp(tmp_path: Path) -> None:
    # Three rxe ranks under 5% loss per hop: go-back-N (rxe's) repairs every
    # loss, and each rank's shim counts its QP's retransmissions, NAKs and
    # timeouts on the wire as the udp provider would (rxe counts per device)
    run = tmp_path / "run"
    summary = run_on_rxe_hosts("epic-loss", run, f"ranks={RANKS}", "size_kib=8",
                               "iterations=1", "losses=0,0.05", "link_mbps=2",
                               "warmup_kib=0", pcap=True)
    assert summary["bit_exact"] and summary["bit_exact_per_loss"] == [True, True]
    assert summary["retransmissions"][0] == 0 and summary["retransmissions"][1] > 0
    counts = _check_wire_counts(run, summary)
    assert sum(summary["retransmissions"]) == counts["retransmits"]
    assert sum(summary["timeouts"]) == counts["rto"]
