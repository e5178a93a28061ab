/*
 * IPv4 routing ingress shared by the L3 programs (control MyIngress, so its
 * tables keep the control-plane names MyIngress.ipv4_lpm / MyIngress.port_smac
 * in every program that includes it).
 *
 * Drops (mark_to_drop): parser errors (truncated packets, IPv4 options),
 * IPv4 header checksum errors, non-IPv4 frames, TTL <= 1 (would expire here),
 * and destinations without a route (the default action of ipv4_lpm).
 * A route sets the egress port and next-hop MAC and decrements the TTL; the
 * source MAC is then rewritten from port_smac (keyed by egress port) if that
 * port has an entry, else left as received.
 *
 * Control plane (simple_switch_CLI syntax):
 *   table_add MyIngress.ipv4_lpm MyIngress.set_nhop 10.0.1.0/24 => 00:00:00:00:01:01 1
 *   table_add MyIngress.ipv4_lpm MyIngress.set_nhop 10.0.0.0/8  => 00:00:00:00:00:fe 3
 *   table_add MyIngress.port_smac MyIngress.set_smac 1 => 02:00:00:00:00:01
 *
 * Requires headers.p4 / parser.p4 and the program's `struct metadata_t`.
 *
 * ECMP (a program that defines L3_ECMP before including this file): after a
 * route hit, the indirect table MyIngress.ecmp (longest prefix of the
 * destination, implementation the action selector MyIngress.ecmp_selector)
 * may replace the route's next hop: an entry names a group of members
 * set_ecmp_nhop(dmac, port), and the member is chosen by a crc16 hash of the
 * 5-tuple (IPv4 source and destination, protocol, UDP ports), so flows that
 * differ only in their UDP source port (RoCEv2's entropy, a new Symphony step
 * tag) can take different paths while a flow's packets keep one. Without an
 * ecmp entry the route's own next hop stands (a static route):
 *   act_prof_create_member MyIngress.ecmp_selector MyIngress.set_ecmp_nhop 02:00:00:00:01:03 3
 *   act_prof_create_member MyIngress.ecmp_selector MyIngress.set_ecmp_nhop 02:00:00:00:01:04 4
 *   act_prof_create_group MyIngress.ecmp_selector
 *   act_prof_add_member_to_group MyIngress.ecmp_selector 0 0
 *   act_prof_add_member_to_group MyIngress.ecmp_selector 1 0
 *   table_indirect_add_with_group MyIngress.ecmp 10.0.0.0/8 => 0
 * (or the controller's profile_member_set / profile_group_set / table_add_indirect).
 *
 * A program that needs more than routing in ingress (e.g. a queue choice)
 * defines, before including this file, L3_INGRESS_EXTRA_DECLS (actions and
 * tables declared in the control) and L3_INGRESS_EXTRA_APPLY (statements run
 * after a routed packet's port_smac), so the routing tables keep their names.
 */
#ifndef TESTBED_L3_INGRESS_P4
#define TESTBED_L3_INGRESS_P4

#ifndef L3_INGRESS_EXTRA_DECLS
#define L3_INGRESS_EXTRA_DECLS
#endif
#ifndef L3_INGRESS_EXTRA_APPLY
#define L3_INGRESS_EXTRA_APPLY
#endif

control MyIngress(inout headers_t hdr,
                  inout metadata_t meta,
                  inout standard_metadata_t standard_metadata) {
    action drop() {
        mark_to_drop(standard_metadata);
    }

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

#ifdef L3_ECMP
    /* ECMP_HASH: crc16 (default) or crc32. CRCs are linear: flows whose
     * 5-tuples differ in a few low bits (a step tag in the UDP source port)
     * can all land on a subset of the group under one polynomial and spread
     * under another. */
#ifndef ECMP_HASH
#define ECMP_HASH crc16
#endif
    action_selector(HashAlgorithm.ECMP_HASH, 32w1024, 32w16) ecmp_selector;

    action set_ecmp_nhop(bit<48> dmac, bit<9> port) {
        hdr.ethernet.dstAddr = dmac;
        standard_metadata.egress_spec = port;
    }

    table ecmp {
        key = {
            hdr.ipv4.dstAddr: lpm;
            hdr.ipv4.srcAddr: selector;
            hdr.ipv4.dstAddr: selector;
            hdr.ipv4.protocol: selector;
            hdr.udp.srcPort: selector;
            hdr.udp.dstPort: selector;
        }
        actions = {
            set_ecmp_nhop;
            NoAction;
        }
        implementation = ecmp_selector;
        size = 256;
    }
#endif

    L3_INGRESS_EXTRA_DECLS

    apply {
        if (standard_metadata.parser_error != error.NoError ||
                standard_metadata.checksum_error == 1 ||
                !hdr.ipv4.isValid() ||
                hdr.ipv4.ttl <= 1) {
            drop();
        } else if (ipv4_lpm.apply().hit) {
#ifdef L3_ECMP
            ecmp.apply();  /* before port_smac: the source MAC follows the chosen port */
#endif
            port_smac.apply();
            L3_INGRESS_EXTRA_APPLY
        }
    }
}

#endif  /* TESTBED_L3_INGRESS_P4 */
