/* An action selector spreading flows over members (the ECMP use), and a
 * plain action profile, for the indirect-table verbs of simple_switch_CLI.
 * Modelled on behavioral-model's
 * targets/simple_switch_grpc/tests/testdata/action_profile.p4: one exact
 * key, one 32-bit selector key hashed with crc16. */

#include <core.p4>
#include <v1model.p4>

header flow_t {
    bit<8>  tag;
    bit<32> entropy;
    bit<8>  mark;
}

struct headers_t { flow_t flow; }
struct meta_t { }

parser FlowParser(packet_in pkt, out headers_t h, inout meta_t m,
                  inout standard_metadata_t sm) {
    state start { pkt.extract(h.flow); transition accept; }
}

control NoVerify(inout headers_t h, inout meta_t m) { apply { } }

control FlowIngress(inout headers_t h, inout meta_t m, inout standard_metadata_t sm) {
    action_selector(HashAlgorithm.crc16, 32w128, 32w16) ecmp_sel;
    action_profile(32w16) marks;

    action send(bit<9> port) { sm.egress_spec = port; }
    action mark(bit<8> v) { h.flow.mark = v; }

    table ecmp {
        key = {
            h.flow.tag     : exact;
            h.flow.entropy : selector;
        }
        actions = { send; }
        implementation = ecmp_sel;
        size = 64;
    }

    table marker {
        key = { h.flow.tag : exact; }
        actions = { mark; NoAction; }
        implementation = marks;
        default_action = NoAction();
    }

    apply {
        sm.egress_spec = 9;
        ecmp.apply();
        marker.apply();
    }
}

control NoEgress(inout headers_t h, inout meta_t m, inout standard_metadata_t sm) { apply { } }
control NoUpdate(inout headers_t h, inout meta_t m) { apply { } }
control FlowDeparser(packet_out pkt, in headers_t h) { apply { pkt.emit(h.flow); } }

V1Switch(FlowParser(), NoVerify(), FlowIngress(), NoEgress(), NoUpdate(), FlowDeparser()) main;
