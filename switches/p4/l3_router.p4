/*
 * l3_router: IPv4 longest-prefix-match router (v1model).
 *
 * Ingress (include/l3_ingress.p4): ipv4_lpm picks the next hop (egress port,
 * destination MAC) and decrements the TTL; port_smac optionally rewrites the
 * source MAC per egress port. Dropped: parser errors (truncated frames, IPv4
 * options), bad IPv4 checksums, non-IPv4 frames, TTL <= 1, no route.
 * The IPv4 checksum is verified on the way in and recomputed on the way out.
 * RoCEv2 headers are parsed (include/parser.p4) and re-emitted unchanged.
 *
 * Control-plane setup (simple_switch_CLI), e.g. for a host 10.0.1.1 on port 1
 * and a default route towards port 3:
 *   table_add MyIngress.ipv4_lpm MyIngress.set_nhop 10.0.1.1/32 => 00:00:00:00:01:01 1
 *   table_add MyIngress.ipv4_lpm MyIngress.set_nhop 0.0.0.0/0   => 00:00:00:00:03:fe 3
 *   table_add MyIngress.port_smac MyIngress.set_smac 1 => 02:00:00:00:00:01
 *   table_add MyIngress.port_smac MyIngress.set_smac 3 => 02:00:00:00:00:03
 * Unrouted destinations are dropped (default action MyIngress.drop).
 */
#include <core.p4>
#include <v1model.p4>

struct metadata_t {
}

#include "include/parser.p4"
#include "include/l3_ingress.p4"

control MyEgress(inout headers_t hdr,
                 inout metadata_t meta,
                 inout standard_metadata_t standard_metadata) {
    apply {
    }
}

V1Switch(RoceParser(),
         Ipv4VerifyChecksum(),
         MyIngress(),
         MyEgress(),
         Ipv4ComputeChecksum(),
         RoceDeparser()) main;
