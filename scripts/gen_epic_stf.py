#!/usr/bin/env python3
"""Generate switches/p4/tests/epic.stf and epic.tree.stf, the STF tests of epic.p4.

Packets are built with scapy, their ICRCs by scapy.contrib.roce (not by the
project's own RoCE code), and every expected sum by this script's own
saturating int32 addition in arrival order. So the test checks the program's
aggregation, rewrites and ICRC against an independent reference:

    .venv/bin/python scripts/gen_epic_stf.py            # rewrite the .stf file
    .venv/bin/python scripts/gen_epic_stf.py --check    # fail if it is stale
"""

from __future__ import annotations

import argparse
import struct
import sys
from dataclasses import dataclass
from pathlib import Path

from scapy.contrib import roce as scapy_roce
from scapy.layers.inet import IP, UDP
from scapy.layers.l2 import Ether
from scapy.packet import Raw

OUT = Path(__file__).resolve().parent.parent / "switches" / "p4" / "tests" / "epic.stf"

ELEMS = 64                     # epic.p4's EPIC_ELEMS
WINDOW = 32                    # epic.p4's W (EPIC_WINDOW_LOG2 = 5)
ENDPOINT_IP = "10.255.0.1"
ENDPOINT_QPN = 0x100
GID = 0
MGID = 1
SPORT = 0xC000
INT_MIN, INT_MAX = -(2**31), 2**31 - 1

# Event counter indices (epic.p4 EPIC_EV_*).
EV = {"contribution": 0, "completion": 1, "dup_pending": 2, "resent": 3, "stale": 4,
      "reflected": 5, "not_member": 6, "bad": 7, "ack_held": 8, "ack_up": 9, "up": 10,
      "up_resent": 11, "parent_dup": 12}

# Group kinds (epic.p4 EPIC_KIND_*) and the two single-primitive groups of the test:
# a Reduce to rank 2 and a Broadcast from rank 0, each with its own endpoint QPN
# and its own QPN at every rank (rank r: base + r).
KIND_ALLREDUCE, KIND_REDUCE, KIND_BROADCAST = 0, 1, 2
OP_REDUCE, OP_BROADCAST = 2, 3


@dataclass(frozen=True)
class Group:
    gid: int
    endpoint_qpn: int
    kind: int
    root: int
    mgid: int
    ack_mgid: int
    rank_qpn_base: int


REDUCE = Group(1, 0x101, KIND_REDUCE, 2, 2, 3, 0x21)
BCAST = Group(2, 0x102, KIND_BROADCAST, 0, 4, 5, 0x31)

OP_SEND_FIRST, OP_SEND_MIDDLE, OP_SEND_LAST, OP_SEND_ONLY, OP_SEND_ONLY_IMM = 0, 1, 2, 4, 5
OP_ACK, OP_CNP = 0x11, 0x81
OP_ALLREDUCE = 1


@dataclass(frozen=True)
class Rank:
    rank: int
    port: int
    ip: str
    mac: str
    qpn: int

    @property
    def switch_mac(self) -> str:
        return f"02:00:00:00:00:{self.port:02x}"

    @property
    def rid(self) -> int:
        return (GID << 5) | self.rank


RANKS = [Rank(r, r + 1, f"10.0.{r + 1}.1", f"00:00:00:00:00:{r + 1:02x}", 0x11 + r)
         for r in range(3)]
OUTSIDER = Rank(9, 4, "10.0.4.1", "00:00:00:00:00:04", 0x11)


def sat_add(a: int, b: int) -> int:
    return max(INT_MIN, min(INT_MAX, a + b))


def values(seed: int) -> list[int]:
    """Deterministic int32 values (a small LCG, so no RNG library is involved)."""
    out, x = [], seed
    for _ in range(ELEMS):
        x = (x * 1103515245 + 12345) % 2**31
        out.append((x % 2**31) - 2**30)
    return out


def payload(vals: list[int]) -> bytes:
    return struct.pack(f"!{len(vals)}i", *vals)


def frame(src: Rank | None, dst: Rank | None, bth: scapy_roce.BTH, body: bytes,
          *, udp_checksum: int | None = None, tos: int = 2) -> bytes:
    """A frame from rank ``src`` to the endpoint, or (src None) from the endpoint to
    ``dst`` as the switch must emit it; ICRC by scapy.contrib.roce."""
    if src is not None:
        eth = Ether(dst=src.switch_mac, src=src.mac)
        ip = IP(src=src.ip, dst=ENDPOINT_IP, id=0, flags="DF", ttl=64, tos=tos)
    else:
        assert dst is not None
        eth = Ether(dst=dst.mac, src=dst.switch_mac)
        ip = IP(src=ENDPOINT_IP, dst=dst.ip, id=0, flags="DF", ttl=64, tos=tos)
    udp = UDP(sport=SPORT, dport=4791)
    if udp_checksum is not None:
        udp.chksum = udp_checksum
    pkt = eth / ip / udp / bth
    if body:
        pkt = pkt / Raw(body)
    return bytes(pkt)


def data_bth(opcode: int, qpn: int, psn: int, ackreq: int = 0) -> scapy_roce.BTH:
    return scapy_roce.BTH(opcode=opcode, dqpn=qpn, psn=psn, ackreq=ackreq)


def upload(r: Rank, psn: int, vals: list[int], opcode: int = OP_SEND_ONLY) -> bytes:
    return frame(r, None, data_bth(opcode, ENDPOINT_QPN, psn, 1), payload(vals))


def result(dst: Rank, psn: int, vals: list[int], opcode: int = OP_SEND_ONLY) -> bytes:
    return frame(None, dst, data_bth(opcode, dst.qpn, psn, 1), payload(vals), udp_checksum=0)


class Stf:
    def __init__(self) -> None:
        self.lines: list[str] = []

    def comment(self, text: str) -> None:
        self.lines += ["", *(f"# {t}" for t in text.splitlines())]

    def cmd(self, line: str) -> None:
        self.lines.append(line)

    def packet(self, port: int, data: bytes) -> None:
        self.lines.append(f"packet {port} {data.hex().upper()}")

    def expect(self, port: int, data: bytes) -> None:
        self.lines.append(f"expect {port} {data.hex().upper()} $")

    def dropped(self) -> None:
        self.lines.append("#   -> dropped")

    def render(self) -> str:
        return "\n".join(self.lines) + "\n"


def setup(s: Stf) -> None:
    s.cmd(f"add MyIngress.epic_group hdr.ipv4.dstAddr:{ip_hex(ENDPOINT_IP)} "
          f"hdr.bth.dqpn:{ENDPOINT_QPN:#x} "
          f"MyIngress.set_group(gid:{GID}, degree:{len(RANKS)}, kind:{KIND_ALLREDUCE}, "
          f"root:0, mgid:{MGID}, ack_mgid:0)")
    for r in RANKS:
        s.cmd(f"add MyIngress.epic_member meta.gid:{GID} hdr.ipv4.srcAddr:{ip_hex(r.ip)} "
              f"MyIngress.set_member(rank:{r.rank})")
        s.cmd(f"add MyEgress.epic_rank_addr meta.rid:{r.rid} MyEgress.set_rank_addr("
              f"dmac:{mac_hex(r.mac)}, smac:{mac_hex(r.switch_mac)}, ip:{ip_hex(r.ip)}, "
              f"qpn:{r.qpn:#x})")
    # ordinary routing, to show that other traffic still passes
    for r in RANKS:
        s.cmd(f"add MyIngress.ipv4_lpm hdr.ipv4.dstAddr:{ip_hex(r.ip)}/32 "
              f"MyIngress.set_nhop(dmac:{mac_hex(r.mac)}, port:{r.port})")
    s.cmd(f"mc_mgrp_create {MGID}")
    for r in RANKS:
        s.cmd(f"mc_node_create {r.rid} {r.port}")
        s.cmd(f"mc_node_associate {MGID} {r.rank}")


def setup_group(s: Stf, g: Group, node: int) -> int:
    """Install a Reduce or Broadcast group; returns the next multicast node handle."""
    s.cmd(f"add MyIngress.epic_group hdr.ipv4.dstAddr:{ip_hex(ENDPOINT_IP)} "
          f"hdr.bth.dqpn:{g.endpoint_qpn:#x} MyIngress.set_group(gid:{g.gid}, "
          f"degree:{len(RANKS)}, kind:{g.kind}, root:{g.root}, mgid:{g.mgid}, "
          f"ack_mgid:{g.ack_mgid})")
    for r in RANKS:
        s.cmd(f"add MyIngress.epic_member meta.gid:{g.gid} hdr.ipv4.srcAddr:{ip_hex(r.ip)} "
              f"MyIngress.set_member(rank:{r.rank})")
        s.cmd(f"add MyEgress.epic_rank_addr meta.rid:{(g.gid << 5) | r.rank} "
              f"MyEgress.set_rank_addr(dmac:{mac_hex(r.mac)}, smac:{mac_hex(r.switch_mac)}, "
              f"ip:{ip_hex(r.ip)}, qpn:{g.rank_qpn_base + r.rank:#x})")
    everyone = [r.rank for r in RANKS]
    others = [r for r in everyone if r != g.root]
    pre = ([(g.mgid, [g.root]), (g.ack_mgid, everyone)] if g.kind == KIND_REDUCE
           else [(g.mgid, others), (g.ack_mgid, [g.root])])
    for mgid, ranks in pre:
        s.cmd(f"mc_mgrp_create {mgid}")
        for rank in ranks:
            s.cmd(f"mc_node_create {(g.gid << 5) | rank} {RANKS[rank].port}")
            s.cmd(f"mc_node_associate {mgid} {node}")
            node += 1
    return node


def g_upload(g: Group, r: Rank, psn: int, vals: list[int]) -> bytes:
    return frame(r, None, data_bth(OP_SEND_ONLY, g.endpoint_qpn, psn, 1), payload(vals))


def g_result(g: Group, dst: Rank, psn: int, vals: list[int]) -> bytes:
    return frame(None, dst, data_bth(OP_SEND_ONLY, g.rank_qpn_base + dst.rank, psn, 1),
                 payload(vals), udp_checksum=0)


def g_ack(g: Group, src: Rank | None, dst: Rank | None, psn: int, syndrome: int = 0x1F,
          msn: int = 1) -> bytes:
    """An ACK/NAK from rank ``src`` to the group's endpoint, or from the endpoint
    to ``dst`` (src None)."""
    qpn = g.endpoint_qpn if src is not None else g.rank_qpn_base + (dst.rank if dst else 0)
    return frame(src, dst, scapy_roce.BTH(opcode=OP_ACK, dqpn=qpn, psn=psn)
                 / scapy_roce.AETH(syndrome=syndrome, msn=msn), b"",
                 udp_checksum=None if src is not None else 0, tos=0)


def native_primitives(s: Stf) -> None:
    """The Reduce and Broadcast groups' own paths."""
    root = RANKS[REDUCE.root]
    s.comment(f"Reduce to rank {root.rank} (group {REDUCE.gid}, endpoint QPN "
              f"{REDUCE.endpoint_qpn:#x}): every rank uploads PSN 0;\nthe sum goes to the "
              "root alone")
    c = [values(500 + r) for r in range(len(RANKS))]
    for k, r in enumerate(RANKS):
        s.packet(r.port, g_upload(REDUCE, r, 0, c[r.rank]))
        if k < len(RANKS) - 1:
            s.dropped()
    total = aggregate(c)
    s.expect(root.port, g_result(REDUCE, root, 0, total))
    s.comment("the root's ACK of result 0 acknowledges every rank's upload 0: it goes to "
              "all three,\neach on its own QP")
    s.packet(root.port, g_ack(REDUCE, root, None, 0))
    for r in RANKS:
        s.expect(r.port, g_ack(REDUCE, None, r, 0))
    s.comment("a rank whose ACK was lost resends its upload: the completed slot answers "
              "the root\n(whose re-ACK reaches every rank), not the sender")
    s.packet(RANKS[0].port, g_upload(REDUCE, RANKS[0], 0, c[0]))
    s.expect(root.port, g_result(REDUCE, root, 0, total))
    s.comment("a Reduce announcement that names another root is dropped")
    imm = (OP_REDUCE << 24) | (0 << 16) | REDUCE.gid
    s.packet(RANKS[0].port, frame(RANKS[0], None,
                                  data_bth(OP_SEND_ONLY_IMM, REDUCE.endpoint_qpn, 1, 1),
                                  struct.pack("!IQ", imm, 256)))
    s.dropped()
    s.cmd(f"check_counter MyIngress.epic_events({EV['bad']}) packets == 2")

    src = RANKS[BCAST.root]
    kids = [r for r in RANKS if r.rank != BCAST.root]
    s.comment(f"Broadcast from rank {src.rank} (group {BCAST.gid}, endpoint QPN "
              f"{BCAST.endpoint_qpn:#x}): each of the root's packets\ngoes to the other "
              "ranks unchanged but for the addresses, nothing is added")
    for psn in (0, 1):
        v = values(600 + psn)
        s.packet(src.port, g_upload(BCAST, src, psn, v))
        for kid in kids:
            s.expect(kid.port, g_result(BCAST, kid, psn, v))
    s.comment("only the root sends in a Broadcast group")
    s.packet(kids[0].port, g_upload(BCAST, kids[0], 0, values(1)))
    s.dropped()
    s.cmd(f"check_counter MyIngress.epic_events({EV['bad']}) packets == 3")
    s.comment(f"rank {kids[0].rank} ACKs PSN 1: held until every child acknowledged "
              "something")
    s.packet(kids[0].port, g_ack(BCAST, kids[0], None, 1))
    s.dropped()
    s.cmd(f"check_counter MyIngress.epic_events({EV['ack_held']}) packets == 1")
    s.comment(f"rank {kids[1].rank} ACKs PSN 0: the root gets the oldest, PSN 0")
    s.packet(kids[1].port, g_ack(BCAST, kids[1], None, 0, msn=5))
    s.expect(src.port, g_ack(BCAST, None, src, 0, msn=5))
    s.comment(f"rank {kids[1].rank} NAKs (sequence error, expects PSN 1): it has PSN 0, "
              "so the root\nis asked to resend from PSN 1")
    s.packet(kids[1].port, g_ack(BCAST, kids[1], None, 1, syndrome=0x60))
    s.expect(src.port, g_ack(BCAST, None, src, 1, syndrome=0x60))
    s.comment(f"rank {kids[1].rank} ACKs PSN 1: now both children have it")
    s.packet(kids[1].port, g_ack(BCAST, kids[1], None, 1))
    s.expect(src.port, g_ack(BCAST, None, src, 1))
    s.comment(f"a late re-ACK of PSN 0 from rank {kids[0].rank} does not move its "
              "acknowledgement back")
    s.packet(kids[0].port, g_ack(BCAST, kids[0], None, 0))
    s.expect(src.port, g_ack(BCAST, None, src, 1, msn=1))
    s.cmd(f"check_counter MyIngress.epic_events({EV['ack_up']}) packets == 4")


def ip_hex(ip: str) -> str:
    a, b, c, d = (int(x) for x in ip.split("."))
    return f"0x{(a << 24) | (b << 16) | (c << 8) | d:08x}"


def mac_hex(mac: str) -> str:
    return "0x" + mac.replace(":", "")


def aggregate(contribs: list[list[int]]) -> list[int]:
    acc = list(contribs[0])
    for c in contribs[1:]:
        acc = [sat_add(a, b) for a, b in zip(acc, c, strict=True)]
    return acc


def complete_slot(s: Stf, psn: int, contribs: list[list[int]], opcode: int = OP_SEND_ONLY,
                  order: list[int] | None = None) -> list[int]:
    """Every rank uploads ``psn`` (in ``order``); the last one completes the slot."""
    order = order or list(range(len(RANKS)))
    for k, i in enumerate(order):
        s.packet(RANKS[i].port, upload(RANKS[i], psn, contribs[i], opcode))
        if k < len(order) - 1:
            s.dropped()
    total = aggregate([contribs[i] for i in order])
    for dst in RANKS:
        s.expect(dst.port, result(dst, psn, total, opcode))
    return total


def build(window: int = WINDOW) -> str:
    """epic.stf for a switch of window ``window`` (the program's default: the
    checked-in file; another: epic.p4 compiled with -D EPIC_WINDOW_LOG2)."""
    s = Stf()
    s.cmd("# epic.p4: Mode-II aggregation of three ranks (ports 1-3) at endpoint "
          f"{ENDPOINT_IP} QPN {ENDPOINT_QPN:#x}:")
    s.cmd("# completion and multicast, saturation, duplicates before and after completion,")
    s.cmd("# dual-slot clearing, stale PSNs, the announcement, ACK/NAK/CNP reflection,")
    s.cmd("# non-members, routing of other traffic; a Reduce group (result to the root,")
    s.cmd("# the root's ACKs to all) and a Broadcast group (the root's packets to the others,")
    s.cmd("# their ACKs aggregated with min). Expected ICRCs from scapy.contrib.roce.")
    s.cmd("# Generated by scripts/gen_epic_stf.py; edit the script, not this file.")
    s.comment("set-up: the group, its members, their addresses and the multicast group")
    setup(s)

    contribs = [values(11 * (r + 1)) for r in range(len(RANKS))]
    # saturating positions: +max + 1, min + -1, and a sum that only the last rank
    # brings back into range (saturation is sticky, as on Tofino)
    contribs[0][0], contribs[1][0], contribs[2][0] = INT_MAX, 1, 5
    contribs[0][1], contribs[1][1], contribs[2][1] = INT_MIN, -1, 0
    contribs[0][2], contribs[1][2], contribs[2][2] = 2**30, 2**30, -(2**30)
    s.comment("PSN 0: ranks 0 and 1 are held, rank 2 completes the slot: the sum "
              "(saturated at int32\nlimits) is multicast to all three with each "
              "rank's MAC, IP and QPN and a new ICRC")
    total0 = complete_slot(s, 0, contribs)
    s.cmd(f"check_counter MyIngress.epic_events({EV['completion']}) packets == 1")

    s.comment("PSN 1: rank 0 uploads twice before completion: the duplicate is dropped "
              "and not\nadded twice")
    c1 = [values(100 + r) for r in range(len(RANKS))]
    s.packet(RANKS[0].port, upload(RANKS[0], 1, c1[0]))
    s.dropped()
    s.packet(RANKS[0].port, upload(RANKS[0], 1, c1[0]))
    s.dropped()
    s.cmd(f"check_counter MyIngress.epic_events({EV['dup_pending']}) packets == 1")
    s.packet(RANKS[1].port, upload(RANKS[1], 1, c1[1]))
    s.dropped()
    s.packet(RANKS[2].port, upload(RANKS[2], 1, c1[2]))
    total1 = aggregate(c1)
    for r in RANKS:
        s.expect(r.port, result(r, 1, total1))

    s.comment("a late duplicate of completed PSN 0 from rank 1 gets the result again, "
              "alone")
    s.packet(RANKS[1].port, upload(RANKS[1], 0, contribs[1]))
    s.expect(RANKS[1].port, result(RANKS[1], 0, total0))
    s.cmd(f"check_counter MyIngress.epic_events({EV['resent']}) packets == 1")

    s.comment(f"dual-slot clearing: PSN {2 + 3 * window} leaves a contribution in slot "
              f"{2 + window} (a stale\nuse); completing PSN 2 clears slot {2 + window} "
              f"for PSN {2 + window}, whose sum then holds only\nPSN {2 + window}'s "
              "contributions")
    s.packet(RANKS[0].port, upload(RANKS[0], 2 + 3 * window, values(999)))
    s.dropped()
    complete_slot(s, 2, [values(200 + r) for r in range(len(RANKS))], order=[2, 0, 1])
    complete_slot(s, 2 + window, [values(300 + r) for r in range(len(RANKS))])

    s.comment(f"a PSN that is not its slot's is dropped: slot 0 serves PSN 0 until PSN "
              f"{window} completes,\nso PSN {2 * window}, which maps to slot 0, is stale")
    s.packet(RANKS[0].port, upload(RANKS[0], 2 * window, values(5)))
    s.dropped()
    s.cmd(f"check_counter MyIngress.epic_events({EV['stale']}) packets == 1")

    s.comment("multi-packet SEND: FIRST, MIDDLE and LAST packets aggregate the same way "
              "and keep\ntheir opcodes")
    for psn, op in ((3, OP_SEND_FIRST), (4, OP_SEND_MIDDLE), (5, OP_SEND_LAST)):
        complete_slot(s, psn, [values(psn * 10 + r) for r in range(len(RANKS))], opcode=op)

    s.comment("the announcement (SEND_ONLY_IMM: op ALLREDUCE, root 0, group 0; 8-byte "
              "size) is\nheld until every rank sent it, then multicast unchanged "
              "but for the addresses")
    imm = (OP_ALLREDUCE << 24) | (0 << 16) | GID
    size = struct.pack("!Q", 4096)
    for k, r in enumerate(RANKS):
        s.packet(r.port, frame(r, None, data_bth(OP_SEND_ONLY_IMM, ENDPOINT_QPN, 6, 1),
                               struct.pack("!I", imm) + size))
        if k < len(RANKS) - 1:
            s.dropped()
    for r in RANKS:
        s.expect(r.port, frame(None, r, data_bth(OP_SEND_ONLY_IMM, r.qpn, 6, 1),
                               struct.pack("!I", imm) + size, udp_checksum=0))

    s.comment("an announcement naming another group is dropped")
    bad_imm = (OP_ALLREDUCE << 24) | 3
    s.packet(RANKS[0].port, frame(RANKS[0], None, data_bth(OP_SEND_ONLY_IMM, ENDPOINT_QPN, 7, 1),
                                  struct.pack("!I", bad_imm) + size))
    s.dropped()
    s.cmd(f"check_counter MyIngress.epic_events({EV['bad']}) packets == 1")

    s.comment("ACK reflection: rank 1's ACK of result PSN 5 goes back to rank 1's QP as "
              "the ACK\nof its upload 5; a NAK (PSN sequence error) and a CNP likewise")
    for syndrome, psn in ((0x1F, 5), (0x60, 4)):
        aeth = scapy_roce.AETH(syndrome=syndrome, msn=3)
        s.packet(RANKS[1].port, frame(RANKS[1], None,
                                      scapy_roce.BTH(opcode=OP_ACK, dqpn=ENDPOINT_QPN, psn=psn)
                                      / aeth, b"", tos=0))
        s.expect(RANKS[1].port, frame(None, RANKS[1],
                                      scapy_roce.BTH(opcode=OP_ACK, dqpn=RANKS[1].qpn, psn=psn)
                                      / aeth, b"", udp_checksum=0, tos=0))
    cnp = scapy_roce.BTH(opcode=OP_CNP, becn=1, dqpn=ENDPOINT_QPN) / Raw(bytes(16))
    s.packet(RANKS[2].port, frame(RANKS[2], None, cnp, b"", tos=0))
    s.expect(RANKS[2].port, frame(None, RANKS[2],
                                  scapy_roce.BTH(opcode=OP_CNP, becn=1, dqpn=RANKS[2].qpn)
                                  / Raw(bytes(16)), b"", udp_checksum=0, tos=0))
    s.cmd(f"check_counter MyIngress.epic_events({EV['reflected']}) packets == 3")

    s.comment("a host outside the group cannot contribute")
    s.packet(OUTSIDER.port, upload(OUTSIDER, 8, values(1)))
    s.dropped()
    s.cmd(f"check_counter MyIngress.epic_events({EV['not_member']}) packets == 1")

    s.comment("other traffic is routed: a RoCE packet from rank 0 to rank 2 (TTL 64 -> 63)")
    plain = Ether(dst=RANKS[0].switch_mac, src=RANKS[0].mac) / IP(
        src=RANKS[0].ip, dst=RANKS[2].ip, id=0, flags="DF", ttl=64) / UDP(
        sport=SPORT, dport=4791) / data_bth(OP_SEND_ONLY, 0x11, 9) / Raw(payload(values(7)))
    s.packet(RANKS[0].port, bytes(plain))
    routed = plain.copy()
    routed[Ether].dst = RANKS[2].mac
    routed[IP].ttl = 63
    routed[IP].chksum = None
    s.expect(RANKS[2].port, bytes(routed))
    # 8 completed slots of 3 contributions, plus the stale use of slot 34
    s.cmd(f"check_counter MyIngress.epic_events({EV['contribution']}) packets == 25")
    s.cmd(f"check_counter MyIngress.epic_events({EV['completion']}) packets == 8")

    s.comment("the single-primitive groups (one per primitive and root, as in the paper)")
    node = setup_group(s, REDUCE, len(RANKS))
    setup_group(s, BCAST, node)
    native_primitives(s)
    return s.render()


# ---------------------------------------------------------------------------
# The multi-switch tree (epic.tree.stf): one switch is the leaf of one tree
# group and the root of another. As the leaf of group TREE_LEAF_GID (endpoint
# LEAF_IP, QPN TREE_QPN) its children are two ranks on ports 1 and 2 and its
# parent is the root switch's endpoint ROOT_IP on port 3; as the root of group
# TREE_ROOT_GID its children are two leaf switches' endpoints on ports 4 and 5.
OUT_TREE = OUT.with_name("epic.tree.stf")
LEAF_IP, ROOT_IP = "10.255.0.11", "10.255.0.1"
TREE_LEAF_GID, TREE_ROOT_GID = 4, 5
TREE_QPN = 0x200                  # every switch's endpoint QPN of the tree group
PARENT_PORT = 3
LEAF_MGID, ROOT_MGID = 8, 9


@dataclass(frozen=True)
class Node:
    """One end of a tree edge: a rank or a switch endpoint, on a switch port."""

    index: int                    # child index at its parent (its member number)
    port: int
    ip: str
    mac: str
    qpn: int

    @property
    def switch_mac(self) -> str:
        return f"02:00:00:00:00:{self.port:02x}"


TREE_RANKS = [Node(r, r + 1, f"10.0.{r + 1}.1", f"00:00:00:00:00:{r + 1:02x}", 0x41 + r)
              for r in range(2)]
PARENT = Node(0, PARENT_PORT, ROOT_IP, "02:00:00:00:01:01", TREE_QPN)
LEAVES = [Node(i, 4 + i, f"10.255.0.{11 + i}", f"02:00:00:00:{2 + i:02x}:01", TREE_QPN)
          for i in range(2)]


def tree_frame(src_ip: str, src_mac: str, dst: Node, bth: scapy_roce.BTH, body: bytes,
               *, udp_checksum: int | None = None, tos: int = 2) -> bytes:
    """A frame to ``dst`` from ``src_ip`` (MACs as on ``dst``'s link); ICRC by
    scapy.contrib.roce."""
    eth = Ether(dst=dst.mac, src=src_mac)
    ip = IP(src=src_ip, dst=dst.ip, id=0, flags="DF", ttl=64, tos=tos)
    udp = UDP(sport=SPORT, dport=4791)
    if udp_checksum is not None:
        udp.chksum = udp_checksum
    pkt = eth / ip / udp / bth
    if body:
        pkt = pkt / Raw(body)
    return bytes(pkt)


def to_switch(src: Node, switch_ip: str, psn: int, body: bytes,
              opcode: int = OP_SEND_ONLY) -> bytes:
    """What ``src`` (a rank or a child switch) sends to the switch endpoint ``switch_ip``."""
    eth = Ether(dst=src.switch_mac, src=src.mac)
    ip = IP(src=src.ip, dst=switch_ip, id=0, flags="DF", ttl=64, tos=2)
    return bytes(eth / ip / UDP(sport=SPORT, dport=4791, chksum=0)
                 / data_bth(opcode, TREE_QPN, psn, 1) / Raw(body))


def from_switch(switch_ip: str, dst: Node, psn: int, body: bytes,
                opcode: int = OP_SEND_ONLY) -> bytes:
    """What the switch endpoint ``switch_ip`` must send to ``dst``."""
    return tree_frame(switch_ip, dst.switch_mac, dst, data_bth(opcode, dst.qpn, psn, 1),
                      body, udp_checksum=0)


def from_parent(psn: int, body: bytes, opcode: int = OP_SEND_ONLY) -> bytes:
    """The parent's result as it arrives at the leaf on its uplink."""
    eth = Ether(dst=PARENT.switch_mac, src=PARENT.mac)
    ip = IP(src=ROOT_IP, dst=LEAF_IP, id=0, flags="DF", ttl=64, tos=2)
    return bytes(eth / ip / UDP(sport=SPORT, dport=4791, chksum=0)
                 / data_bth(opcode, TREE_QPN, psn, 1) / Raw(body))


def tree_setup(s: Stf) -> None:
    s.cmd(f"add MyIngress.epic_group hdr.ipv4.dstAddr:{ip_hex(LEAF_IP)} "
          f"hdr.bth.dqpn:{TREE_QPN:#x} MyIngress.set_group(gid:{TREE_LEAF_GID}, "
          f"degree:{len(TREE_RANKS)}, kind:{KIND_ALLREDUCE}, root:0, mgid:{LEAF_MGID}, "
          "ack_mgid:0)")
    s.cmd(f"add MyIngress.epic_parent meta.gid:{TREE_LEAF_GID} "
          f"MyIngress.set_parent(ip:{ip_hex(ROOT_IP)}, port:{PARENT_PORT})")
    s.cmd(f"add MyEgress.epic_parent_addr meta.gid:{TREE_LEAF_GID} MyEgress.set_rank_addr("
          f"dmac:{mac_hex(PARENT.mac)}, smac:{mac_hex(PARENT.switch_mac)}, "
          f"ip:{ip_hex(ROOT_IP)}, qpn:{TREE_QPN:#x})")
    s.cmd(f"add MyIngress.epic_group hdr.ipv4.dstAddr:{ip_hex(ROOT_IP)} "
          f"hdr.bth.dqpn:{TREE_QPN:#x} MyIngress.set_group(gid:{TREE_ROOT_GID}, "
          f"degree:{len(LEAVES)}, kind:{KIND_ALLREDUCE}, root:0, mgid:{ROOT_MGID}, "
          "ack_mgid:0)")
    node = 0
    for gid, mgid, children in ((TREE_LEAF_GID, LEAF_MGID, TREE_RANKS),
                                (TREE_ROOT_GID, ROOT_MGID, LEAVES)):
        for c in children:
            s.cmd(f"add MyIngress.epic_member meta.gid:{gid} hdr.ipv4.srcAddr:{ip_hex(c.ip)} "
                  f"MyIngress.set_member(rank:{c.index})")
            s.cmd(f"add MyEgress.epic_rank_addr meta.rid:{(gid << 5) | c.index} "
                  f"MyEgress.set_rank_addr(dmac:{mac_hex(c.mac)}, smac:{mac_hex(c.switch_mac)}, "
                  f"ip:{ip_hex(c.ip)}, qpn:{c.qpn:#x})")
        s.cmd(f"mc_mgrp_create {mgid}")
        for c in children:
            s.cmd(f"mc_node_create {(gid << 5) | c.index} {c.port}")
            s.cmd(f"mc_node_associate {mgid} {node}")
            node += 1


def build_tree(window: int = WINDOW) -> str:
    """epic.tree.stf for a switch of window ``window`` (as build)."""
    s = Stf()
    s.cmd("# epic.p4 in a multi-switch tree (the paper's Tree-3-2 roles): as the leaf of")
    s.cmd(f"# group {TREE_LEAF_GID} (endpoint {LEAF_IP}, ranks on ports 1-2, parent "
          f"{ROOT_IP} on port {PARENT_PORT}) it sends")
    s.cmd("# the partial sum up and multicasts the parent's result down; as the root of")
    s.cmd(f"# group {TREE_ROOT_GID} (endpoint {ROOT_IP}, leaf switches on ports 4-5) it adds "
          "the leaves' sums.")
    s.cmd("# Expected ICRCs from scapy.contrib.roce. Generated by scripts/gen_epic_stf.py.")
    s.comment("set-up: the leaf group with its parent, the root group, their multicast groups")
    tree_setup(s)
    r0, r1 = TREE_RANKS

    s.comment("leaf, PSN 0: rank 0 is held; rank 1 completes the slot: the partial sum goes "
              "up to the\nparent's endpoint (its IP and QPN, the leaf's IP as the source, a "
              "new ICRC), not down")
    c0 = [values(700 + r) for r in range(2)]
    s.packet(r0.port, to_switch(r0, LEAF_IP, 0, payload(c0[0])))
    s.dropped()
    s.packet(r1.port, to_switch(r1, LEAF_IP, 0, payload(c0[1])))
    part0 = aggregate(c0)
    s.expect(PARENT_PORT, from_switch(LEAF_IP, PARENT, 0, payload(part0)))
    s.cmd(f"check_counter MyIngress.epic_events({EV['up']}) packets == 1")
    s.cmd(f"check_counter MyIngress.epic_events({EV['completion']}) packets == 0")

    s.comment("rank 0 resends PSN 0 before the result came down (its result or the partial "
              "sum may be\nlost): the stored partial sum goes up again, nothing is added")
    s.packet(r0.port, to_switch(r0, LEAF_IP, 0, payload(c0[0])))
    s.expect(PARENT_PORT, from_switch(LEAF_IP, PARENT, 0, payload(part0)))
    s.cmd(f"check_counter MyIngress.epic_events({EV['up_resent']}) packets == 1")

    s.comment("the parent's result for PSN 0 (the whole tree's sum) is multicast to both "
              "ranks, each\nwith its MAC, IP and QPN")
    total0 = aggregate([part0, values(799)])
    s.packet(PARENT_PORT, from_parent(0, payload(total0)))
    for r in TREE_RANKS:
        s.expect(r.port, from_switch(LEAF_IP, r, 0, payload(total0)))
    s.comment("a second copy of the result (answering the resend above) is dropped: the "
              "ranks have it")
    s.packet(PARENT_PORT, from_parent(0, payload(total0)))
    s.dropped()
    s.cmd(f"check_counter MyIngress.epic_events({EV['parent_dup']}) packets == 1")

    s.comment("a late duplicate of PSN 0 from rank 1 gets the tree's result, which the leaf "
              "kept,\nnot its partial sum")
    s.packet(r1.port, to_switch(r1, LEAF_IP, 0, payload(c0[1])))
    s.expect(r1.port, from_switch(LEAF_IP, r1, 0, payload(total0)))
    s.cmd(f"check_counter MyIngress.epic_events({EV['resent']}) packets == 1")

    s.comment("PSN 1: rank 0 twice before completion: the duplicate is dropped, not added "
              "twice,\nand the multi-packet opcode is kept on the way up")
    c1 = [values(710 + r) for r in range(2)]
    s.packet(r0.port, to_switch(r0, LEAF_IP, 1, payload(c1[0]), OP_SEND_FIRST))
    s.dropped()
    s.packet(r0.port, to_switch(r0, LEAF_IP, 1, payload(c1[0]), OP_SEND_FIRST))
    s.dropped()
    s.cmd(f"check_counter MyIngress.epic_events({EV['dup_pending']}) packets == 1")
    s.packet(r1.port, to_switch(r1, LEAF_IP, 1, payload(c1[1]), OP_SEND_FIRST))
    s.expect(PARENT_PORT, from_switch(LEAF_IP, PARENT, 1, payload(aggregate(c1)),
                                      OP_SEND_FIRST))

    s.comment("a result from the parent for a PSN that is not its slot's is dropped")
    s.packet(PARENT_PORT, from_parent(1 + 2 * window, payload(values(1))))
    s.dropped()
    s.cmd(f"check_counter MyIngress.epic_events({EV['stale']}) packets == 1")

    s.comment("the announcement goes up like data once both ranks sent it, and comes back "
              "down")
    imm = (OP_ALLREDUCE << 24) | TREE_LEAF_GID
    ann = struct.pack("!IQ", imm, 1 << 20)
    s.packet(r0.port, to_switch(r0, LEAF_IP, 2, ann, OP_SEND_ONLY_IMM))
    s.dropped()
    s.packet(r1.port, to_switch(r1, LEAF_IP, 2, ann, OP_SEND_ONLY_IMM))
    s.expect(PARENT_PORT, from_switch(LEAF_IP, PARENT, 2, ann, OP_SEND_ONLY_IMM))
    s.packet(PARENT_PORT, from_parent(2, ann, OP_SEND_ONLY_IMM))
    for r in TREE_RANKS:
        s.expect(r.port, from_switch(LEAF_IP, r, 2, ann, OP_SEND_ONLY_IMM))

    s.comment("ACK reflection at the leaf: rank 0's ACK of result 0 goes back to rank 0's "
              "QP (its\nupload 0 is delivered end to end); nothing goes up")
    aeth = scapy_roce.AETH(syndrome=0x1F, msn=2)
    s.packet(r0.port, tree_frame(r0.ip, r0.mac, Node(0, r0.port, LEAF_IP, r0.switch_mac, 0),
                                 scapy_roce.BTH(opcode=OP_ACK, dqpn=TREE_QPN, psn=0) / aeth,
                                 b"", tos=0))
    s.expect(r0.port, tree_frame(LEAF_IP, r0.switch_mac, r0,
                                 scapy_roce.BTH(opcode=OP_ACK, dqpn=r0.qpn, psn=0) / aeth, b"",
                                 udp_checksum=0, tos=0))
    s.cmd(f"check_counter MyIngress.epic_events({EV['reflected']}) packets == 1")

    s1, s2 = LEAVES
    s.comment(f"root (group {TREE_ROOT_GID}): the two leaves' partial sums of PSN 0 complete "
              "the slot; the\nsum goes down to both leaf endpoints (their IPs and QPN, the "
              "root's IP as the source)")
    p = [values(800 + i) for i in range(2)]
    p[0][0], p[1][0] = INT_MAX, 9        # saturating, as a flat sum of the same values
    s.packet(s1.port, to_switch(s1, ROOT_IP, 0, payload(p[0])))
    s.dropped()
    s.packet(s2.port, to_switch(s2, ROOT_IP, 0, payload(p[1])))
    total = aggregate(p)
    for leaf in LEAVES:
        s.expect(leaf.port, from_switch(ROOT_IP, leaf, 0, payload(total)))
    s.comment("a leaf that sends its partial sum again (a rank below resent) gets the "
              "result alone")
    s.packet(s1.port, to_switch(s1, ROOT_IP, 0, payload(p[0])))
    s.expect(s1.port, from_switch(ROOT_IP, s1, 0, payload(total)))
    s.comment("the root sends no partial sum up: it has no parent")
    s.cmd(f"check_counter MyIngress.epic_events({EV['up']}) packets == 3")
    s.cmd(f"check_counter MyIngress.epic_events({EV['resent']}) packets == 2")
    s.cmd(f"check_counter MyIngress.epic_events({EV['completion']}) packets == 3")
    return s.render()



def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--check", action="store_true", help="fail if the file is stale")
    ap.add_argument("--window-log2", type=int, metavar="N",
                    help="print the flat test for a switch of window 2**N (epic.p4 compiled "
                         "with -D EPIC_WINDOW_LOG2=N) instead of writing the files")
    args = ap.parse_args(argv)
    if args.window_log2 is not None:
        if not 1 <= args.window_log2 <= 22:
            ap.error("--window-log2 must be 1..22")
        sys.stdout.write(build(1 << args.window_log2))
        return 0
    outputs = {OUT: build(), OUT_TREE: build_tree()}
    if args.check:
        stale = [str(p) for p, text in outputs.items()
                 if not p.exists() or p.read_text() != text]
        if stale:
            print(f"{', '.join(stale)} stale: run scripts/gen_epic_stf.py", file=sys.stderr)
            return 1
        return 0
    for p, text in outputs.items():
        p.write_text(text)
        print(f"wrote {p}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
