/*
 * The shared v1model parser, deparser and IPv4 checksum controls.
 *
 * Parse graph: ethernet -> (0x0800) ipv4 -> (unfragmented or first fragment,
 * protocol 17) udp -> (dst port 4791) bth -> by opcode:
 *   RDMA_WRITE_FIRST, RDMA_WRITE_ONLY          -> reth
 *   RDMA_WRITE_ONLY_IMM                         -> reth -> immdt
 *   SEND_LAST_IMM, SEND_ONLY_IMM, RDMA_WRITE_LAST_IMM -> immdt
 *   ACK                                         -> aeth
 * Everything after the last parsed header (payload, ICRC) stays payload.
 *
 * IPv4 headers with options (ihl != 5) or version != 4 end parsing with
 * error.IPv4HeaderUnsupported; a packet too short for a header ends it with
 * error.PacketTooShort. In v1model the packet still reaches ingress, with
 * standard_metadata.parser_error set: programs decide (the L3 ingress drops).
 *
 * The including program must declare `struct metadata_t` (its own user
 * metadata; may be empty) before including this file, because the parser and
 * the checksum controls must use the same metadata type as the rest of the
 * pipeline.
 */
#ifndef TESTBED_PARSER_P4
#define TESTBED_PARSER_P4

#include "headers.p4"

error { IPv4HeaderUnsupported }

parser RoceParser(packet_in packet,
                  out headers_t hdr,
                  inout metadata_t meta,
                  inout standard_metadata_t standard_metadata) {
    state start {
        transition parse_ethernet;
    }

    state parse_ethernet {
        packet.extract(hdr.ethernet);
        transition select(hdr.ethernet.etherType) {
            ETHERTYPE_IPV4: parse_ipv4;
            default: accept;
        }
    }

    state parse_ipv4 {
        packet.extract(hdr.ipv4);
        verify(hdr.ipv4.version == 4 && hdr.ipv4.ihl == 5, error.IPv4HeaderUnsupported);
        /* Only the first fragment carries the UDP header. */
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

    state parse_bth {
        packet.extract(hdr.bth);
        transition select(hdr.bth.opcode) {
            BTH_OP_RDMA_WRITE_FIRST: parse_reth;
            BTH_OP_RDMA_WRITE_ONLY: parse_reth;
            BTH_OP_RDMA_WRITE_ONLY_IMM: parse_reth;
            BTH_OP_SEND_LAST_IMM: parse_immdt;
            BTH_OP_SEND_ONLY_IMM: parse_immdt;
            BTH_OP_RDMA_WRITE_LAST_IMM: parse_immdt;
            BTH_OP_ACK: parse_aeth;
            default: accept;
        }
    }

    state parse_reth {
        packet.extract(hdr.reth);
        transition select(hdr.bth.opcode) {
            BTH_OP_RDMA_WRITE_ONLY_IMM: parse_immdt;
            default: accept;
        }
    }

    state parse_immdt {
        packet.extract(hdr.immdt);
        transition accept;
    }

    state parse_aeth {
        packet.extract(hdr.aeth);
        transition accept;
    }
}

/* Sets standard_metadata.checksum_error when the IPv4 header checksum is wrong. */
control Ipv4VerifyChecksum(inout headers_t hdr, inout metadata_t meta) {
    apply {
        verify_checksum(hdr.ipv4.isValid(),
            { hdr.ipv4.version, hdr.ipv4.ihl, hdr.ipv4.dscp, hdr.ipv4.ecn,
              hdr.ipv4.totalLen, hdr.ipv4.identification, hdr.ipv4.flags,
              hdr.ipv4.fragOffset, hdr.ipv4.ttl, hdr.ipv4.protocol,
              hdr.ipv4.srcAddr, hdr.ipv4.dstAddr },
            hdr.ipv4.hdrChecksum, HashAlgorithm.csum16);
    }
}

/* Recomputes the IPv4 header checksum after TTL/ECN/address rewrites.
 * (RoCEv2's ICRC masks TTL, TOS and the IPv4 checksum, so it stays valid.) */
control Ipv4ComputeChecksum(inout headers_t hdr, inout metadata_t meta) {
    apply {
        update_checksum(hdr.ipv4.isValid(),
            { hdr.ipv4.version, hdr.ipv4.ihl, hdr.ipv4.dscp, hdr.ipv4.ecn,
              hdr.ipv4.totalLen, hdr.ipv4.identification, hdr.ipv4.flags,
              hdr.ipv4.fragOffset, hdr.ipv4.ttl, hdr.ipv4.protocol,
              hdr.ipv4.srcAddr, hdr.ipv4.dstAddr },
            hdr.ipv4.hdrChecksum, HashAlgorithm.csum16);
    }
}

control RoceDeparser(packet_out packet, in headers_t hdr) {
    apply {
        packet.emit(hdr.ethernet);
        packet.emit(hdr.ipv4);
        packet.emit(hdr.udp);
        packet.emit(hdr.bth);
        packet.emit(hdr.reth);
        packet.emit(hdr.aeth);
        packet.emit(hdr.immdt);
    }
}

#endif  /* TESTBED_PARSER_P4 */
