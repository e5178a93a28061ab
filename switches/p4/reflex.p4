/*
 * reflex: L3 routing with two egress queues per port chosen by DSCP, and a
 * hard ECN marking threshold per queue (ReFlex's switch).
 *
 * Queue choice (ingress, after routing): the table MyIngress.dscp_priority,
 * keyed by the IPv4 DSCP, sets standard_metadata.priority. Its default is
 * PRIO_HIGH (queue 1): unlisted DSCPs, regular flows, ACKs and CNPs go to the
 * high-priority queue. Hosts mark a flexible flow's packets with the DSCP
 * listed for PRIO_LOW (queue 0) while the flow is at low priority:
 *   table_add MyIngress.dscp_priority MyIngress.set_priority 8 => 0
 * (DSCP 8 is CS1, the conventional "lower effort" class.) Run the switch with
 * two priority queues per port (BMv2: --priority-queues 2).
 *
 * Scheduling between the two queues is the traffic manager's, not the
 * program's:
 *   - soft target: deficit round robin with weights low 10, high 90, as in the
 *     ReFlex paper: set_priority_weights <port> 10 90 (work-conserving: a
 *     queue alone gets the whole link);
 *   - BMv2 has only strict priority (the higher queue number first) with a
 *     packets/s cap per queue. The closest configuration caps the high queue
 *     at 90% of the link (set_queue_rate <pps> <port> 1): when both queues are
 *     backlogged the low queue gets at least the remaining 10%. Unlike DRR it
 *     is not work-conserving for the high queue (alone, it gets only 90%), and
 *     the cap counts packets, not bytes.
 *
 * ECN (egress): an ECN-capable (ECT(0)/ECT(1)) IPv4 packet is marked CE when
 * the depth of the queue it joined (standard_metadata.enq_qdepth, in packets,
 * per queue) is at least K: RED with a hard threshold, as in the paper (K 65
 * packets in a 466-packet queue, the DCTCP recommendation). Not-ECT packets
 * are never marked; CE stays CE. Configuration: the default action of the
 * keyless table MyEgress.ecn_config; built-in default K = 65:
 *   table_set_default MyEgress.ecn_config MyEgress.set_ecn_threshold 65
 *
 * Queue watermark: the register MyEgress.qdepth_max (indexed by egress port)
 * keeps the largest enq_qdepth seen on the port, either queue:
 *   register_read MyEgress.qdepth_max 3
 *
 * Routing is configured as for l3_router (see include/l3_ingress.p4).
 */
#include <core.p4>
#include <v1model.p4>

struct metadata_t {
}

const bit<3>  PRIO_LOW  = 0;
const bit<3>  PRIO_HIGH = 1;
const bit<19> ECN_DEFAULT_K = 65;

#define L3_INGRESS_EXTRA_DECLS                                  \
    action set_priority(bit<3> prio) {                          \
        standard_metadata.priority = prio;                      \
    }                                                           \
    table dscp_priority {                                       \
        key = {                                                 \
            hdr.ipv4.dscp: exact;                               \
        }                                                       \
        actions = {                                             \
            set_priority;                                       \
        }                                                       \
        size = 64;                                              \
        default_action = set_priority(PRIO_HIGH);               \
    }
#define L3_INGRESS_EXTRA_APPLY dscp_priority.apply();

#include "include/parser.p4"
#include "include/l3_ingress.p4"

control MyEgress(inout headers_t hdr,
                 inout metadata_t meta,
                 inout standard_metadata_t standard_metadata) {
    bit<32> cfg_k = 0;

    register<bit<32>>(512) qdepth_max;

    action set_ecn_threshold(bit<19> k) {
        cfg_k = (bit<32>)k;
    }

    table ecn_config {
        actions = {
            set_ecn_threshold;
        }
        default_action = set_ecn_threshold(ECN_DEFAULT_K);
    }

    apply {
        bit<32> q = (bit<32>)standard_metadata.enq_qdepth;
        bit<32> seen;
        qdepth_max.read(seen, (bit<32>)standard_metadata.egress_port);
        if (q > seen) {
            qdepth_max.write((bit<32>)standard_metadata.egress_port, q);
        }
        if (hdr.ipv4.isValid() &&
                (hdr.ipv4.ecn == ECN_ECT0 || hdr.ipv4.ecn == ECN_ECT1)) {
            ecn_config.apply();
            if (q >= cfg_k) {
                hdr.ipv4.ecn = ECN_CE;
            }
        }
    }
}

V1Switch(RoceParser(),
         Ipv4VerifyChecksum(),
         MyIngress(),
         MyEgress(),
         Ipv4ComputeChecksum(),
         RoceDeparser()) main;
