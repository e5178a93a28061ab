/*
 * l3_ecn: the l3_router plus a RED-style ECN marker in egress, as DCQCN
 * expects from switches.
 *
 * For an IPv4 packet that is ECN-capable (ECT(0) or ECT(1)), with q the depth
 * of its egress queue when it was enqueued (standard_metadata.enq_qdepth, in
 * packets):
 *     q <  Kmin          -> not marked
 *     Kmin <= q < Kmax   -> marked CE with probability Pmax * (q - Kmin) / (Kmax - Kmin)
 *     q >= Kmax          -> always marked CE
 * Not-ECT packets are never marked and CE stays CE. The IPv4 checksum is
 * recomputed after marking.
 *
 * Pmax is in percent (0..100). The probability is drawn with random() in
 * [0, 99] and compared without a division:
 *     mark  <=>  r * (Kmax - Kmin) < Pmax * (q - Kmin)
 * which marks with probability ceil(Pmax * (q - Kmin) / (Kmax - Kmin)) / 100.
 *
 * Configuration: the default action of the keyless table MyEgress.ecn_config.
 * Built-in default: Kmin 5, Kmax 20, Pmax 10. To change it:
 *   table_set_default MyEgress.ecn_config MyEgress.set_ecn_params 5 20 10
 * (arguments: kmin kmax pmax). Kmax <= Kmin gives a plain threshold: every
 * ECT packet with q >= Kmin is marked (Kmin 0, Kmax 0 marks every ECT packet).
 *
 * Lossy link emulation (so that it works the same on BMv2, which has no
 * netem): every packet leaving egress is dropped with probability
 * per_10k / 10000, drawn with random() in [0, 9999]. Configuration: the
 * default action of the keyless table MyEgress.link_loss; built-in default 0
 * (no loss). 1% loss on every port:
 *   table_set_default MyEgress.link_loss MyEgress.set_loss 100
 * A lost packet is not ECN-marked and not counted in qdepth_max.
 *
 * Queue watermark: the register MyEgress.qdepth_max (indexed by egress port)
 * keeps the largest enq_qdepth any packet saw on that port, so runs read an
 * exact maximum queue depth on either target:
 *   register_read MyEgress.qdepth_max 3
 *   register_reset MyEgress.qdepth_max
 *
 * Extra marker: a program that includes this one after defining
 * EGRESS_MARKER (instance name) and EGRESS_MARKER_TYPE (a control with
 * parameters (in headers_t, in standard_metadata_t, out bool mark)) gets that
 * control applied to every packet that survives the loss stage; its mark is
 * OR-ed with the RED mark on ECN-capable packets (symphony.p4 does this).
 *
 * Routing is configured as for l3_router (see include/l3_ingress.p4):
 *   table_add MyIngress.ipv4_lpm MyIngress.set_nhop 10.0.1.1/32 => 00:00:00:00:01:01 1
 *   table_add MyIngress.port_smac MyIngress.set_smac 1 => 02:00:00:00:00:01
 */
#include <core.p4>
#include <v1model.p4>

struct metadata_t {
}

#include "include/parser.p4"
#include "include/l3_ingress.p4"

const bit<19> ECN_DEFAULT_KMIN = 5;
const bit<19> ECN_DEFAULT_KMAX = 20;
const bit<8>  ECN_DEFAULT_PMAX = 10;
const bit<16> LOSS_DEFAULT_PER_10K = 0;

control MyEgress(inout headers_t hdr,
                 inout metadata_t meta,
                 inout standard_metadata_t standard_metadata) {
    bit<32> cfg_kmin = 0;
    bit<32> cfg_kmax = 0;
    bit<32> cfg_pmax = 0;
    bit<16> cfg_loss = 0;

    register<bit<32>>(512) qdepth_max;
#ifdef EGRESS_MARKER
    EGRESS_MARKER_TYPE() EGRESS_MARKER;
#endif

    action set_loss(bit<16> per_10k) {
        cfg_loss = per_10k;
    }

    table link_loss {
        actions = {
            set_loss;
        }
        default_action = set_loss(LOSS_DEFAULT_PER_10K);
    }

    action set_ecn_params(bit<19> kmin, bit<19> kmax, bit<8> pmax) {
        cfg_kmin = (bit<32>)kmin;
        cfg_kmax = (bit<32>)kmax;
        cfg_pmax = (bit<32>)pmax;
    }

    table ecn_config {
        actions = {
            set_ecn_params;
        }
        default_action = set_ecn_params(ECN_DEFAULT_KMIN, ECN_DEFAULT_KMAX, ECN_DEFAULT_PMAX);
    }

    action mark_ce() {
        hdr.ipv4.ecn = ECN_CE;
    }

    apply {
        link_loss.apply();
        if (cfg_loss != 0) {
            bit<16> lr;
            random<bit<16>>(lr, 16w0, 16w9999);
            if (lr < cfg_loss) {
                mark_to_drop(standard_metadata);
                return;
            }
        }
        bit<32> seen;
        qdepth_max.read(seen, (bit<32>)standard_metadata.egress_port);
        if ((bit<32>)standard_metadata.enq_qdepth > seen) {
            qdepth_max.write((bit<32>)standard_metadata.egress_port,
                             (bit<32>)standard_metadata.enq_qdepth);
        }
        bool extra_mark = false;
#ifdef EGRESS_MARKER
        EGRESS_MARKER.apply(hdr, standard_metadata, extra_mark);
#endif
        if (hdr.ipv4.isValid() &&
                (hdr.ipv4.ecn == ECN_ECT0 || hdr.ipv4.ecn == ECN_ECT1)) {
            ecn_config.apply();
            bit<32> q = (bit<32>)standard_metadata.enq_qdepth;
            bool red_mark = false;
            if (q >= cfg_kmax && q >= cfg_kmin) {
                red_mark = true;
            } else if (q >= cfg_kmin) {
                /* here Kmin <= q < Kmax, so Kmax - Kmin > 0 */
                bit<32> r;
                random<bit<32>>(r, 32w0, 32w99);
                if (r * (cfg_kmax - cfg_kmin) < cfg_pmax * (q - cfg_kmin)) {
                    red_mark = true;
                }
            }
            if (red_mark || extra_mark) {
                mark_ce();
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
