/*
 * Shared wire-format declarations for the testbed's P4_16 (v1model) programs:
 * Ethernet, IPv4, UDP and the RoCEv2 transport headers (BTH, RETH, AETH, ImmDt),
 * plus the constants every program and the hosts agree on.
 *
 * The RoCE constants below (UDP port, opcodes, tag layout) are the P4 copy of the
 * Python definitions in hosts/roce/; a test parses this file with the soft
 * target's frontend and checks that both agree. The opcode constants are named
 * BTH_OP_<NAME>, where <NAME> is the opcode's name on the Python side.
 *
 * Job and step tags (how Symphony-style programs see which collective step a
 * packet belongs to):
 *   - job id: BTH byte 4 (IBA "Resv8a"; later IBA revisions put FECN/BECN in its
 *     top bits, which RoCEv2 does not use because congestion is signalled with
 *     IP ECN). The testbed's hosts carry the job id there, field bth.job_id.
 *     The ICRC masks this byte, so setting it does not change the ICRC.
 *     Job id 0 means "not part of a tagged job": such packets carry no step.
 *     CNPs (opcode BTH_OP_CNP) set BECN (0x40) in this byte: no job id there.
 *   - step index: the UDP source port. Its top 2 bits are fixed to 0b11 so the
 *     port stays in the dynamic range 0xC000-0xFFFF that RoCEv2 senders use for
 *     flow entropy; the low 14 bits carry the step (0..16383):
 *         udp.srcPort = TAG_SPORT_FIXED | (step & TAG_STEP_MASK)
 *         step        = udp.srcPort & TAG_STEP_MASK      (if bth.job_id != 0)
 *
 * Include after <core.p4> and <v1model.p4>.
 */
#ifndef TESTBED_HEADERS_P4
#define TESTBED_HEADERS_P4

/* ---- L2/L3/L4 constants ---- */
const bit<16> ETHERTYPE_IPV4 = 0x0800;
const bit<8>  IP_PROTO_UDP   = 17;
const bit<16> ROCE_UDP_PORT  = 4791;

/* IPv4 ECN codepoints (RFC 3168). RoCEv2 senders use ECT(0). */
const bit<2> ECN_NOT_ECT = 0;
const bit<2> ECN_ECT1    = 1;
const bit<2> ECN_ECT0    = 2;
const bit<2> ECN_CE      = 3;

/* ---- BTH opcodes: Reliable Connection (transport bits 000) and CNP ---- */
const bit<8> BTH_OP_SEND_FIRST           = 0x00;
const bit<8> BTH_OP_SEND_MIDDLE          = 0x01;
const bit<8> BTH_OP_SEND_LAST            = 0x02;
const bit<8> BTH_OP_SEND_LAST_IMM        = 0x03;
const bit<8> BTH_OP_SEND_ONLY            = 0x04;
const bit<8> BTH_OP_SEND_ONLY_IMM        = 0x05;
const bit<8> BTH_OP_RDMA_WRITE_FIRST     = 0x06;
const bit<8> BTH_OP_RDMA_WRITE_MIDDLE    = 0x07;
const bit<8> BTH_OP_RDMA_WRITE_LAST      = 0x08;
const bit<8> BTH_OP_RDMA_WRITE_LAST_IMM  = 0x09;
const bit<8> BTH_OP_RDMA_WRITE_ONLY      = 0x0A;
const bit<8> BTH_OP_RDMA_WRITE_ONLY_IMM  = 0x0B;
const bit<8> BTH_OP_ACK                  = 0x11;
const bit<8> BTH_OP_CNP                  = 0x81;

/* AETH syndromes used by the testbed: positive ACK (credit field all ones,
 * "no credit information") and NAK for a PSN sequence error. */
const bit<8> AETH_SYNDROME_ACK         = 0x1F;
const bit<8> AETH_SYNDROME_NAK_PSN_SEQ = 0x60;

/* ---- Tag layout (see the comment at the top) ---- */
const bit<16> TAG_SPORT_FIXED      = 0xC000;  // value of the fixed bits
const bit<16> TAG_SPORT_FIXED_MASK = 0xC000;  // which bits are fixed
const bit<16> TAG_STEP_MASK        = 0x3FFF;  // the step index bits
const int     TAG_STEP_BITS        = 14;
const bit<8>  JOB_ID_NONE          = 0;       // untagged traffic

/* ---- Headers ---- */
header ethernet_t {
    bit<48> dstAddr;
    bit<48> srcAddr;
    bit<16> etherType;
}

/* The 8-bit TOS byte is split into DSCP and ECN so programs can mark CE. */
header ipv4_t {
    bit<4>  version;
    bit<4>  ihl;
    bit<6>  dscp;
    bit<2>  ecn;
    bit<16> totalLen;
    bit<16> identification;
    bit<3>  flags;
    bit<13> fragOffset;
    bit<8>  ttl;
    bit<8>  protocol;
    bit<16> hdrChecksum;
    bit<32> srcAddr;
    bit<32> dstAddr;
}

header udp_t {
    bit<16> srcPort;
    bit<16> dstPort;
    bit<16> len;
    bit<16> checksum;
}

/* Base Transport Header, 12 bytes. */
header bth_t {
    bit<8>  opcode;
    bit<1>  se;       // solicited event
    bit<1>  migreq;
    bit<2>  padcnt;   // pad bytes before the ICRC
    bit<4>  tver;
    bit<16> pkey;
    bit<8>  job_id;   // IBA Resv8a: the testbed's job id (0 = untagged)
    bit<24> dqpn;     // destination QP number
    bit<1>  ackreq;
    bit<7>  resv7;
    bit<24> psn;
}

/* RDMA Extended Transport Header (RDMA WRITE FIRST/ONLY), 16 bytes. */
header reth_t {
    bit<64> va;
    bit<32> rkey;
    bit<32> dma_len;
}

/* ACK Extended Transport Header, 4 bytes. */
header aeth_t {
    bit<8>  syndrome;
    bit<24> msn;
}

/* Immediate data (the *_IMM opcodes), 4 bytes. */
header immdt_t {
    bit<32> imm;
}

struct headers_t {
    ethernet_t ethernet;
    ipv4_t     ipv4;
    udp_t      udp;
    bth_t      bth;
    reth_t     reth;
    aeth_t     aeth;
    immdt_t    immdt;
}

#endif  /* TESTBED_HEADERS_P4 */
