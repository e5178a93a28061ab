/*
 * epic: EPIC Mode-II (connection translated) in-network aggregation for
 * unmodified RoCEv2 hosts, on top of IPv4 routing. The wire protocol it
 * implements is specified in switches/p4/EPIC.md; in short:
 *
 *   - every rank of a group holds one RC QP connected to the switch's
 *     endpoint: the switch IP plus the group's QPN (table epic_group); all
 *     QPs of a group start at the same PSN, in both directions;
 *   - data packets are SEND packets (FIRST/MIDDLE/LAST/ONLY) whose payload is
 *     exactly EPIC_ELEMS big-endian int32 values (path MTU 4 * EPIC_ELEMS);
 *     a SEND_ONLY_IMM with an 8-byte payload is the collective's
 *     announcement (ImmDt = op << 24 | root << 16 | group, payload = size in
 *     bytes); it goes through the slots like a data packet without values,
 *     so it doubles as a barrier;
 *   - packet PSN p of every rank lands in slot p mod 2W of the group
 *     (W = EPIC_WINDOW, the ranks' send window in packets). Per slot: the PSN
 *     it serves, a per-rank arrival bitmap, a degree counter, and one sum
 *     register array per element position (include/epic_elems.p4). Packets
 *     are dropped until every rank has contributed; the last contribution
 *     carries the sum, which is multicast (PRE group of the collective group)
 *     and rewritten per replica (egress_rid -> the rank's MAC, IP and QPN);
 *   - completing slot p clears its dual slot (p + W) mod 2W for PSN p + W.
 *     That is safe: a rank sends p only after its upload p - W was
 *     acknowledged, i.e. after it received result p - W, so once every rank
 *     sent p nobody needs result p - W any more;
 *   - a retransmission of a rank's contribution to a completed slot gets the
 *     result back (that rank alone); one to an incomplete slot that already
 *     counted it is dropped; a packet whose PSN is not the slot's is dropped
 *     (old or ahead: go-back-N repairs it);
 *   - ACKs, NAKs and CNPs a rank sends to the endpoint are reflected to that
 *     rank's own QP: its ACK of result p acknowledges its upload p;
 *   - a group runs one primitive with one root (set_group's kind and root;
 *     2N+1 groups per N ranks): AllReduce as above; Reduce adds the same way
 *     but sends the sum to the root alone and the root's ACKs to every rank;
 *     Broadcast copies the root's packets to the other ranks and sends the
 *     root the oldest PSN every child acknowledged (include/epic_acks.p4);
 *   - multi-switch trees (AllReduce groups): a switch whose group has a
 *     parent (table epic_parent, the controller's aggregation tree) sends a
 *     complete slot's sum up to the parent's endpoint (MyEgress.
 *     epic_parent_addr: its MAC, IP and QPN; the source IP is this switch's
 *     endpoint) instead of multicasting it; the parent counts it as one
 *     child's contribution (its members are the child switches' IPs). The
 *     parent's result comes back, is kept in the slot and multicast to the
 *     children; a child's resend before it came sends the partial sum up
 *     again, one after it gets the kept result. The root has no parent and
 *     multicasts; ACKs are reflected by the first switch, as on one switch;
 *   - every packet the switch rewrites gets a new ICRC, computed here with
 *     crc32 over the fields RoCEv2 covers (LRH ones, IPv4 with TOS/TTL/
 *     checksum masked, UDP with checksum masked, BTH with Resv8a masked, the
 *     rest of the packet), stored least significant byte first.
 *
 * Everything else is routed like l3_router (tables MyIngress.ipv4_lpm and
 * MyIngress.port_smac, see include/l3_ingress.p4). Random loss per link, in
 * each direction: MyIngress.link_loss drops packets arriving on any port (the
 * links into the switch), MyEgress.link_loss (as in l3_ecn) packets leaving
 * (the links out of it, each replica on its own):
 *   table_set_default MyIngress.link_loss MyIngress.set_loss <per_10k>
 *
 * Control plane for AllReduce group 0 (kind 0, root 0, mgid 1, no ack_mgid) =
 * ranks 10.0.1.1 (port 1, QPN 0x11) and 10.0.2.1 (port 2, QPN 0x11) at
 * endpoint 10.255.0.1 QPN 0x100 (rid = gid << 5 | rank; testbed.epic makes
 * the lines of all 2N+1 groups):
 *   table_add MyIngress.epic_group MyIngress.set_group 10.255.0.1 0x100 => 0 2 0 0 1 0
 *   table_add MyIngress.epic_member MyIngress.set_member 0 10.0.1.1 => 0
 *   table_add MyIngress.epic_member MyIngress.set_member 0 10.0.2.1 => 1
 *   table_add MyEgress.epic_rank_addr MyEgress.set_rank_addr 0 => 00:00:00:00:00:01 02:00:00:00:00:01 10.0.1.1 0x11
 *   table_add MyEgress.epic_rank_addr MyEgress.set_rank_addr 1 => 00:00:00:00:00:02 02:00:00:00:00:02 10.0.2.1 0x11
 *   mc_mgrp_create 1
 *   mc_node_create 0 1
 *   mc_node_create 1 2
 *   mc_node_associate 1 0
 *   mc_node_associate 1 1
 * The counter MyIngress.epic_events counts what happened to endpoint packets
 * (indices EPIC_EV_*).
 */
#include <core.p4>
#include <v1model.p4>

#ifndef EPIC_ELEMS
#define EPIC_ELEMS 64            /* int32 values per data packet (256 B) */
#endif
#ifndef EPIC_WINDOW_LOG2
#define EPIC_WINDOW_LOG2 5       /* W = 32 packets per rank in flight */
#endif
#ifndef EPIC_MAX_GROUPS_LOG2
#define EPIC_MAX_GROUPS_LOG2 7   /* 128 groups: 2N+1 per communicator of N ranks */
#endif
#define EPIC_WINDOW (1 << EPIC_WINDOW_LOG2)
#define EPIC_SLOTS_LOG2 (EPIC_WINDOW_LOG2 + 1)
#define EPIC_SLOT_COUNT (1 << (EPIC_SLOTS_LOG2 + EPIC_MAX_GROUPS_LOG2))

#include "include/headers.p4"

const bit<2> EPIC_SUM_FIRST = 0;
const bit<2> EPIC_SUM_ADD = 1;
const bit<2> EPIC_SUM_LOAD = 2;

/* The slot tag: the PSN the slot serves, valid once bit 24 is set. */
const bit<32> EPIC_TAG_VALID = 0x01000000;
const bit<32> EPIC_SLOT_MASK = (1 << EPIC_SLOTS_LOG2) - 1;

/* IPv4 total lengths of the endpoint's packet kinds (IPv4 20 + UDP 8 + BTH 12
 * + ... + ICRC 4). */
const bit<16> EPIC_DATA_IPLEN = 44 + 4 * EPIC_ELEMS;
const bit<16> EPIC_ANN_IPLEN = 56;    /* + ImmDt 4 + size 8 */
const bit<16> EPIC_ACK_IPLEN = 48;    /* + AETH 4 */
const bit<16> EPIC_CNP_IPLEN = 60;    /* + 16 reserved bytes */

/* Announcement operations (ImmDt bits 31..24). */
const bit<8> EPIC_OP_ALLREDUCE = 1;
const bit<8> EPIC_OP_REDUCE = 2;
const bit<8> EPIC_OP_BROADCAST = 3;
const bit<8> EPIC_OP_BARRIER = 4;
const bit<8> EPIC_OP_REDUCE_SCATTER = 5;
const bit<8> EPIC_OP_ALL_GATHER = 6;

/* What a group runs (set_group's kind). A group serves one primitive with one
 * root: after a Reduce or a Broadcast the ranks' send and receive PSNs no
 * longer move together, so every primitive and root has its own group and
 * QPs (2N+1 groups for N ranks, as in the paper). */
const bit<8> EPIC_KIND_ALLREDUCE = 0;   /* sum to every rank (also Barrier) */
const bit<8> EPIC_KIND_REDUCE = 1;      /* sum to the root only */
const bit<8> EPIC_KIND_BROADCAST = 2;   /* the root's packets to every other rank */

/* Indices of MyIngress.epic_events. */
const bit<32> EPIC_EV_CONTRIBUTION = 0;   /* counted into a slot */
const bit<32> EPIC_EV_COMPLETION = 1;     /* slot complete: result multicast */
const bit<32> EPIC_EV_DUP_PENDING = 2;    /* already counted, slot incomplete: dropped */
const bit<32> EPIC_EV_RESENT = 3;         /* slot complete: result sent to the sender */
const bit<32> EPIC_EV_STALE = 4;          /* PSN is not the slot's: dropped */
const bit<32> EPIC_EV_REFLECTED = 5;      /* ACK/NAK/CNP reflected */
const bit<32> EPIC_EV_NOT_MEMBER = 6;     /* sender is not in the group: dropped */
const bit<32> EPIC_EV_BAD = 7;            /* not a packet the endpoint takes: dropped */
const bit<32> EPIC_EV_ACK_HELD = 8;       /* Broadcast: a child's ACK that moves nothing yet */
const bit<32> EPIC_EV_ACK_UP = 9;         /* Broadcast: the children's oldest ACK sent to the root */
const bit<32> EPIC_EV_UP = 10;            /* tree: a slot's partial sum sent to the parent */
const bit<32> EPIC_EV_UP_RESENT = 11;     /* tree: a child resent, the result is missing: sent up again */
const bit<32> EPIC_EV_PARENT_DUP = 12;    /* tree: the parent's result for a slot that has it: dropped */

const bit<32> EPIC_INSTANCE_REPLICATION = 5;
const bit<16> LOSS_DEFAULT_PER_10K = 0;

header epic_ann_t {
    bit<64> size;            /* bytes of the collective's buffer */
}

header epic_cnp_t {
    bit<128> resv;
}

header epic_icrc_t {
    bit<32> crc;
}

#include "include/epic_data.p4"

struct epic_headers_t {
    ethernet_t  ethernet;
    ipv4_t      ipv4;
    udp_t       udp;
    bth_t       bth;
    aeth_t      aeth;
    immdt_t     immdt;
    epic_ann_t  ann;
    epic_cnp_t  cnp;
    epic_data_t data;
    epic_icrc_t icrc;
}

struct metadata_t {
    bit<8>  gid;
    bit<8>  degree;
    bit<8>  kind;
    bit<8>  root;
    bit<16> mgid;
    bit<16> ack_mgid;
    bit<8>  rank;
    bit<16> rid;
    bit<32> switch_ip;
    bit<1>  rewrite;
    bit<1>  has_parent;      /* tree: the group has a parent switch (epic_parent) */
    bit<32> parent_ip;
    bit<9>  parent_port;
    bit<1>  up;              /* tree: this packet goes to the parent */
}

/* LRH ones, masked IPv4 and UDP headers, BTH with Resv8a masked: the start
 * of every ICRC (the packet's own fields after the BTH follow). */
#define EPIC_ICRC_PREFIX \
    64w0xFFFFFFFFFFFFFFFF, \
    hdr.ipv4.version, hdr.ipv4.ihl, 8w0xFF, hdr.ipv4.totalLen, \
    hdr.ipv4.identification, hdr.ipv4.flags, hdr.ipv4.fragOffset, \
    8w0xFF, hdr.ipv4.protocol, 16w0xFFFF, hdr.ipv4.srcAddr, hdr.ipv4.dstAddr, \
    hdr.udp.srcPort, hdr.udp.dstPort, hdr.udp.len, 16w0xFFFF, \
    hdr.bth.opcode, hdr.bth.se, hdr.bth.migreq, hdr.bth.padcnt, hdr.bth.tver, \
    hdr.bth.pkey, 8w0xFF, hdr.bth.dqpn, hdr.bth.ackreq, hdr.bth.resv7, hdr.bth.psn

#include "include/epic_sums.p4"
#include "include/epic_acks.p4"

error { IPv4HeaderUnsupported }

parser EpicParser(packet_in packet,
                  out epic_headers_t hdr,
                  inout metadata_t meta,
                  inout standard_metadata_t standard_metadata) {
    state start {
        packet.extract(hdr.ethernet);
        transition select(hdr.ethernet.etherType) {
            ETHERTYPE_IPV4: parse_ipv4;
            default: accept;
        }
    }

    state parse_ipv4 {
        packet.extract(hdr.ipv4);
        verify(hdr.ipv4.version == 4 && hdr.ipv4.ihl == 5, error.IPv4HeaderUnsupported);
        transition select(hdr.ipv4.fragOffset, hdr.ipv4.protocol) {
            (0, IP_PROTO_UDP): parse_udp;
            default: accept;
        }
    }

    state parse_udp {
        packet.extract(hdr.udp);
        transition select(hdr.udp.dstPort) {
            ROCE_UDP_PORT: parse_bth;
            default: accept;
        }
    }

    /* Only packets of exactly an endpoint packet's length are taken apart;
     * other RoCE traffic is routed as it is. */
    state parse_bth {
        packet.extract(hdr.bth);
        transition select(hdr.bth.opcode, hdr.ipv4.totalLen) {
            (BTH_OP_SEND_FIRST, EPIC_DATA_IPLEN): parse_data;
            (BTH_OP_SEND_MIDDLE, EPIC_DATA_IPLEN): parse_data;
            (BTH_OP_SEND_LAST, EPIC_DATA_IPLEN): parse_data;
            (BTH_OP_SEND_ONLY, EPIC_DATA_IPLEN): parse_data;
            (BTH_OP_SEND_ONLY_IMM, EPIC_ANN_IPLEN): parse_ann;
            (BTH_OP_ACK, EPIC_ACK_IPLEN): parse_aeth;
            (BTH_OP_CNP, EPIC_CNP_IPLEN): parse_cnp;
            default: accept;
        }
    }

    state parse_data {
        packet.extract(hdr.data);
        transition parse_icrc;
    }

    state parse_ann {
        packet.extract(hdr.immdt);
        packet.extract(hdr.ann);
        transition parse_icrc;
    }

    state parse_aeth {
        packet.extract(hdr.aeth);
        transition parse_icrc;
    }

    state parse_cnp {
        packet.extract(hdr.cnp);
        transition parse_icrc;
    }

    state parse_icrc {
        packet.extract(hdr.icrc);
        transition accept;
    }
}

control EpicVerifyChecksum(inout epic_headers_t hdr, inout metadata_t meta) {
    apply {
        verify_checksum(hdr.ipv4.isValid(),
            { hdr.ipv4.version, hdr.ipv4.ihl, hdr.ipv4.dscp, hdr.ipv4.ecn,
              hdr.ipv4.totalLen, hdr.ipv4.identification, hdr.ipv4.flags,
              hdr.ipv4.fragOffset, hdr.ipv4.ttl, hdr.ipv4.protocol,
              hdr.ipv4.srcAddr, hdr.ipv4.dstAddr },
            hdr.ipv4.hdrChecksum, HashAlgorithm.csum16);
    }
}

control MyIngress(inout epic_headers_t hdr,
                  inout metadata_t meta,
                  inout standard_metadata_t standard_metadata) {
    register<bit<32>>(EPIC_SLOT_COUNT) slot_psn;      /* EPIC_TAG_VALID | PSN */
    register<bit<32>>(EPIC_SLOT_COUNT) slot_bitmap;   /* bit r: rank r counted */
    register<bit<8>>(EPIC_SLOT_COUNT) slot_count;     /* degree counter */
    register<bit<32>>(1 << EPIC_MAX_GROUPS_LOG2) group_announce;       /* last ImmDt */
    register<bit<64>>(1 << EPIC_MAX_GROUPS_LOG2) group_announce_size;  /* its size */
    counter(13, CounterType.packets) epic_events;

    EpicSums() sums;
    EpicAckMin() acks;

    bit<16> cfg_loss = 0;

    action drop() {
        mark_to_drop(standard_metadata);
    }

    /* loss on the link into the switch (per 10 000 packets, any port) */
    action set_loss(bit<16> per_10k) {
        cfg_loss = per_10k;
    }

    table link_loss {
        actions = {
            set_loss;
        }
        default_action = set_loss(LOSS_DEFAULT_PER_10K);
    }

    /* ---- IPv4 routing (the tables of include/l3_ingress.p4) ---- */
    action set_nhop(bit<48> dmac, bit<9> port) {
        hdr.ethernet.dstAddr = dmac;
        standard_metadata.egress_spec = port;
        hdr.ipv4.ttl = hdr.ipv4.ttl - 1;
    }

    table ipv4_lpm {
        key = {
            hdr.ipv4.dstAddr: lpm;
        }
        actions = {
            set_nhop;
            drop;
        }
        size = 1024;
        default_action = drop();
    }

    action set_smac(bit<48> smac) {
        hdr.ethernet.srcAddr = smac;
    }

    table port_smac {
        key = {
            standard_metadata.egress_spec: exact;
        }
        actions = {
            set_smac;
            NoAction;
        }
        size = 512;
        default_action = NoAction();
    }

    /* ---- the aggregation endpoint ---- */
    /* mgid: where results go (AllReduce: every rank; Reduce: the root;
     * Broadcast: every rank but the root). ack_mgid: where the root's ACKs go
     * (Reduce: every rank) or the children's aggregated ACK (Broadcast: the
     * root); unused for AllReduce, whose ACKs go back to their sender. */
    action set_group(bit<8> gid, bit<8> degree, bit<8> kind, bit<8> root,
                     bit<16> mgid, bit<16> ack_mgid) {
        meta.gid = gid;
        meta.degree = degree;
        meta.kind = kind;
        meta.root = root;
        meta.mgid = mgid;
        meta.ack_mgid = ack_mgid;
    }

    table epic_group {
        key = {
            hdr.ipv4.dstAddr: exact;
            hdr.bth.dqpn: exact;
        }
        actions = {
            set_group;
            NoAction;
        }
        size = 1 << EPIC_MAX_GROUPS_LOG2;
        default_action = NoAction();
    }

    action set_member(bit<8> rank) {
        meta.rank = rank;
    }

    table epic_member {
        key = {
            meta.gid: exact;
            hdr.ipv4.srcAddr: exact;
        }
        actions = {
            set_member;
            NoAction;
        }
        size = 32 << EPIC_MAX_GROUPS_LOG2;
        default_action = NoAction();
    }

    /* Send this packet back to its sender (rewritten in egress). */
    action to_sender() {
        standard_metadata.egress_spec = standard_metadata.ingress_port;
        meta.rewrite = 1;
    }

    /* Replicate this packet to a PRE group (each copy rewritten in egress). */
    action to_group(bit<16> grp) {
        standard_metadata.mcast_grp = grp;
        meta.rewrite = 1;
    }

    /* Multi-switch tree: an AllReduce group whose switch is not the tree's root
     * has a parent, the next switch up, reached on ``port`` at endpoint ``ip``
     * (the parent's QPN for the group is in MyEgress.epic_parent_addr). Its
     * children (ranks or switches) are its members; a complete slot's sum goes
     * up, the parent's result comes down and is multicast to the children. */
    action set_parent(bit<32> ip, bit<9> port) {
        meta.has_parent = 1;
        meta.parent_ip = ip;
        meta.parent_port = port;
    }

    table epic_parent {
        key = {
            meta.gid: exact;
        }
        actions = {
            set_parent;
            NoAction;
        }
        size = 1 << EPIC_MAX_GROUPS_LOG2;
        default_action = NoAction();
    }

    /* Send this packet to the parent switch (rewritten in egress). */
    action to_parent() {
        standard_metadata.egress_spec = meta.parent_port;
        meta.rewrite = 1;
        meta.up = 1;
    }

    apply {
        link_loss.apply();
        if (cfg_loss != 0) {
            bit<16> lr;
            random<bit<16>>(lr, 16w0, 16w9999);
            if (lr < cfg_loss) {
                drop();
                return;
            }
        }
        if (standard_metadata.parser_error != error.NoError ||
                standard_metadata.checksum_error == 1 ||
                !hdr.ipv4.isValid()) {
            drop();
            return;
        }
        if (!hdr.bth.isValid() || !epic_group.apply().hit) {
            if (hdr.ipv4.ttl <= 1) {
                drop();
            } else if (ipv4_lpm.apply().hit) {
                port_smac.apply();
            }
            return;
        }
        drop();   /* endpoint packets leave only where a case below says so */
        if (meta.kind == EPIC_KIND_ALLREDUCE) {
            epic_parent.apply();
        }
        bool from_parent = meta.has_parent == 1 && hdr.ipv4.srcAddr == meta.parent_ip;
        if (!from_parent && !epic_member.apply().hit) {
            epic_events.count(EPIC_EV_NOT_MEMBER);
            return;
        }
        meta.rid = ((bit<16>)meta.gid << 5) | (bit<16>)meta.rank;
        meta.switch_ip = hdr.ipv4.dstAddr;
        bool from_root = meta.rank == meta.root;
        if (hdr.aeth.isValid() || hdr.cnp.isValid()) {
            if (from_parent) {
                /* a parent switch sends results only; nobody below ACKs it */
                epic_events.count(EPIC_EV_BAD);
                return;
            }
            if (meta.kind == EPIC_KIND_REDUCE && from_root) {
                /* the root's ACK of result p acknowledges every rank's upload p */
                to_group(meta.ack_mgid);
            } else if (meta.kind == EPIC_KIND_BROADCAST && !from_root) {
                if (hdr.cnp.isValid()) {
                    to_group(meta.ack_mgid);    /* congestion towards a child: the root slows */
                } else {
                    /* The root's packet p is delivered once every child acknowledged
                     * it: send the root the oldest acknowledged PSN. A NAK of PSN e
                     * acknowledges e - 1 and asks for a resend from the oldest + 1. */
                    bool is_ack = hdr.aeth.syndrome[7:5] == 0;
                    bit<24> got = is_ack ? hdr.bth.psn : hdr.bth.psn - 1;
                    bit<1> complete;
                    bit<24> oldest;
                    acks.apply((bit<32>)meta.gid << 5, meta.rank, meta.degree, meta.root,
                               got, complete, oldest);
                    if (complete == 0) {
                        epic_events.count(EPIC_EV_ACK_HELD);
                        return;
                    }
                    hdr.bth.psn = is_ack ? oldest : oldest + 1;
                    to_group(meta.ack_mgid);
                    epic_events.count(EPIC_EV_ACK_UP);
                    return;
                }
            } else {
                to_sender();
            }
            epic_events.count(EPIC_EV_REFLECTED);
            return;
        }
        if (!hdr.data.isValid() && !hdr.ann.isValid()) {
            epic_events.count(EPIC_EV_BAD);
            return;
        }
        if (hdr.ann.isValid()) {
            bit<8> op = hdr.immdt.imm[31:24];
            bool op_ok = false;
            if (meta.kind == EPIC_KIND_ALLREDUCE) {
                op_ok = op == EPIC_OP_ALLREDUCE || op == EPIC_OP_BARRIER;
            } else if (meta.kind == EPIC_KIND_REDUCE) {
                op_ok = op == EPIC_OP_REDUCE || op == EPIC_OP_REDUCE_SCATTER;
            } else if (meta.kind == EPIC_KIND_BROADCAST) {
                op_ok = op == EPIC_OP_BROADCAST || op == EPIC_OP_ALL_GATHER;
            }
            if (hdr.immdt.imm[15:0] != (bit<16>)meta.gid || !op_ok ||
                    (meta.kind != EPIC_KIND_ALLREDUCE && hdr.immdt.imm[23:16] != meta.root)) {
                epic_events.count(EPIC_EV_BAD);
                return;
            }
            group_announce.write((bit<32>)meta.gid, hdr.immdt.imm);
            group_announce_size.write((bit<32>)meta.gid, hdr.ann.size);
        }
        if (meta.kind == EPIC_KIND_BROADCAST) {
            /* nothing to add: the root's packets (first sends and resends alike)
             * go to every child; only the root sends in a Broadcast group */
            if (!from_root) {
                epic_events.count(EPIC_EV_BAD);
                return;
            }
            to_group(meta.mgid);
            epic_events.count(EPIC_EV_COMPLETION);
            return;
        }

        bit<32> base = (bit<32>)meta.gid << EPIC_SLOTS_LOG2;
        bit<32> slot = base | ((bit<32>)hdr.bth.psn & EPIC_SLOT_MASK);
        bit<24> dual_psn = hdr.bth.psn + EPIC_WINDOW;
        bit<32> dual = base | ((bit<32>)dual_psn & EPIC_SLOT_MASK);
        bit<32> tag;
        bit<32> bitmap = 0;
        bit<8> count = 0;
        /* the counter of a slot whose result is here: with a parent, the
         * children's N contributions plus the parent's result */
        bit<8> done = meta.degree + (bit<8>)meta.has_parent;
        slot_psn.read(tag, slot);
        if (from_parent) {
            /* the parent's result for PSN p: this switch sent p's partial sum
             * up, so the slot serves p and holds all N contributions */
            if (tag & EPIC_TAG_VALID == 0 || tag[23:0] != hdr.bth.psn) {
                epic_events.count(EPIC_EV_STALE);
                return;
            }
            slot_count.read(count, slot);
            if (count != meta.degree) {
                /* already multicast (a copy answering another child's resend) */
                epic_events.count(EPIC_EV_PARENT_DUP);
                return;
            }
            if (hdr.data.isValid()) {
                sums.apply(hdr.data, slot, EPIC_SUM_FIRST);   /* kept for resends */
            }
            slot_count.write(slot, done);
            to_group(meta.mgid);
            epic_events.count(EPIC_EV_COMPLETION);
            return;
        }
        if (tag & EPIC_TAG_VALID == 0) {
            /* first use of the slot since the group was set up */
            tag = EPIC_TAG_VALID | (bit<32>)hdr.bth.psn;
            slot_psn.write(slot, tag);
            slot_bitmap.write(slot, 0);
            slot_count.write(slot, 0);
        } else {
            slot_bitmap.read(bitmap, slot);
            slot_count.read(count, slot);
        }
        if (tag[23:0] != hdr.bth.psn) {
            epic_events.count(EPIC_EV_STALE);
            return;
        }
        if (count == done) {
            /* complete: the sender lost its result (or its ACK); answer it */
            if (hdr.data.isValid()) {
                sums.apply(hdr.data, slot, EPIC_SUM_LOAD);
            }
            if (meta.kind == EPIC_KIND_REDUCE) {
                /* only the root receives results; its re-ACK, sent to every
                 * rank, acknowledges the sender's upload again */
                to_group(meta.mgid);
            } else {
                to_sender();
            }
            epic_events.count(EPIC_EV_RESENT);
            return;
        }
        if (count == meta.degree) {
            /* tree: sent up, no result yet; the child's resend means the
             * partial sum (or the result on its way down) may be lost */
            if (hdr.data.isValid()) {
                sums.apply(hdr.data, slot, EPIC_SUM_LOAD);
            }
            to_parent();
            epic_events.count(EPIC_EV_UP_RESENT);
            return;
        }
        bit<32> me = 32w1 << meta.rank;
        if (bitmap & me != 0) {
            epic_events.count(EPIC_EV_DUP_PENDING);
            return;
        }
        if (hdr.data.isValid()) {
            sums.apply(hdr.data, slot, count == 0 ? EPIC_SUM_FIRST : EPIC_SUM_ADD);
        }
        count = count + 1;
        slot_bitmap.write(slot, bitmap | me);
        slot_count.write(slot, count);
        epic_events.count(EPIC_EV_CONTRIBUTION);
        if (count == meta.degree) {
            slot_psn.write(dual, EPIC_TAG_VALID | (bit<32>)dual_psn);
            slot_bitmap.write(dual, 0);
            slot_count.write(dual, 0);
            if (meta.has_parent == 1) {
                to_parent();
                epic_events.count(EPIC_EV_UP);
            } else {
                to_group(meta.mgid);
                epic_events.count(EPIC_EV_COMPLETION);
            }
        }
    }
}

control MyEgress(inout epic_headers_t hdr,
                 inout metadata_t meta,
                 inout standard_metadata_t standard_metadata) {
    bit<16> cfg_loss = 0;

    EpicDataIcrc() data_icrc;

    action set_loss(bit<16> per_10k) {
        cfg_loss = per_10k;
    }

    table link_loss {
        actions = {
            set_loss;
        }
        default_action = set_loss(LOSS_DEFAULT_PER_10K);
    }

    action drop() {
        mark_to_drop(standard_metadata);
    }

    action set_rank_addr(bit<48> dmac, bit<48> smac, bit<32> ip, bit<24> qpn) {
        hdr.ethernet.dstAddr = dmac;
        hdr.ethernet.srcAddr = smac;
        hdr.ipv4.dstAddr = ip;
        hdr.bth.dqpn = qpn;
    }

    table epic_rank_addr {
        key = {
            meta.rid: exact;
        }
        actions = {
            set_rank_addr;
            drop;
        }
        size = 32 << EPIC_MAX_GROUPS_LOG2;
        default_action = drop();
    }

    /* tree: the parent switch's endpoint of a group (MAC of its port, this
     * port's MAC, its IP, its QPN for the group) */
    table epic_parent_addr {
        key = {
            meta.gid: exact;
        }
        actions = {
            set_rank_addr;
            drop;
        }
        size = 1 << EPIC_MAX_GROUPS_LOG2;
        default_action = drop();
    }

    apply {
        link_loss.apply();
        if (cfg_loss != 0) {
            bit<16> lr;
            random<bit<16>>(lr, 16w0, 16w9999);
            if (lr < cfg_loss) {
                drop();
                return;
            }
        }
        if (meta.rewrite == 0) {
            return;
        }
        if (meta.up == 1) {
            if (!epic_parent_addr.apply().hit) {
                return;
            }
        } else {
            if (standard_metadata.instance_type == EPIC_INSTANCE_REPLICATION) {
                meta.rid = standard_metadata.egress_rid;
            }
            if (!epic_rank_addr.apply().hit) {
                return;
            }
        }
        hdr.ipv4.srcAddr = meta.switch_ip;
        hdr.ipv4.ttl = 64;
        hdr.udp.checksum = 0;    /* optional in IPv4; the ICRC protects the payload */
        bit<32> crc = 0;
        if (hdr.data.isValid()) {
            data_icrc.apply(hdr, crc);
        } else if (hdr.ann.isValid()) {
            hash(crc, HashAlgorithm.crc32, 32w0,
                 { EPIC_ICRC_PREFIX, hdr.immdt.imm, hdr.ann.size }, 64w0x100000000);
        } else if (hdr.aeth.isValid()) {
            hash(crc, HashAlgorithm.crc32, 32w0,
                 { EPIC_ICRC_PREFIX, hdr.aeth.syndrome, hdr.aeth.msn }, 64w0x100000000);
        } else if (hdr.cnp.isValid()) {
            hash(crc, HashAlgorithm.crc32, 32w0,
                 { EPIC_ICRC_PREFIX, hdr.cnp.resv }, 64w0x100000000);
        }
        /* the ICRC goes on the wire least significant byte first */
        hdr.icrc.crc = crc[7:0] ++ crc[15:8] ++ crc[23:16] ++ crc[31:24];
    }
}

control EpicComputeChecksum(inout epic_headers_t hdr, inout metadata_t meta) {
    apply {
        update_checksum(hdr.ipv4.isValid(),
            { hdr.ipv4.version, hdr.ipv4.ihl, hdr.ipv4.dscp, hdr.ipv4.ecn,
              hdr.ipv4.totalLen, hdr.ipv4.identification, hdr.ipv4.flags,
              hdr.ipv4.fragOffset, hdr.ipv4.ttl, hdr.ipv4.protocol,
              hdr.ipv4.srcAddr, hdr.ipv4.dstAddr },
            hdr.ipv4.hdrChecksum, HashAlgorithm.csum16);
    }
}

control EpicDeparser(packet_out packet, in epic_headers_t hdr) {
    apply {
        packet.emit(hdr.ethernet);
        packet.emit(hdr.ipv4);
        packet.emit(hdr.udp);
        packet.emit(hdr.bth);
        packet.emit(hdr.aeth);
        packet.emit(hdr.immdt);
        packet.emit(hdr.ann);
        packet.emit(hdr.cnp);
        packet.emit(hdr.data);
        packet.emit(hdr.icrc);
    }
}

V1Switch(EpicParser(),
         EpicVerifyChecksum(),
         MyIngress(),
         MyEgress(),
         EpicComputeChecksum(),
         EpicDeparser()) main;
