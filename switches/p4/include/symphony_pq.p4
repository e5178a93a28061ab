/*
 * Strict priority for lagging steps (the "PQ" scheme the Symphony paper
 * compares against in §2.3 and §4.3): the switch tracks each registered job's
 * slowest step as Symphony does (step_min, Algorithm 1 lines 3-10, without
 * psn_rec) and queues the job's data packets of steps at or behind step_min
 * in the high-priority queue, those of steps ahead of it in the low one. An
 * ingress control (the queue is chosen before the traffic manager), applied
 * after routing; it sets standard_metadata.priority.
 *
 * Which packets: as include/symphony.p4, RoCEv2 data requests (BTH opcodes
 * 0x00..0x0B) of a job with an entry in `jobs`. Their ACKs and NAKs, and the
 * CNPs, also go to the high queue: starving them would stall the lagging
 * step's own sender. Everything else (untracked jobs, job id 0, non-RoCE)
 * keeps priority 0, so with no job registered the switch queues as if it
 * had one queue per port.
 *
 * Step order: serial-number arithmetic modulo 2^14 (see include/symphony.p4).
 * Per registered job j, per data packet, in this order:
 *   first packet since registration (seen[j] == 0): step_min <- step;
 *   step-end packet (RDMA_WRITE_LAST*, _ONLY*) of a step at or after
 *     step_min: step_min <- step + 1;
 *   else step older than step_min: step_min <- step;
 *   priority: PQ_HIGH if step is not newer than step_min, else PQ_LOW.
 * The step-end packet itself, which ended the slowest step, goes high: it is
 * judged against step_min before its own update. Every update is an
 * assignment (idempotent under duplicates), and a step end only moves
 * step_min forward, as in Symphony.
 *
 * Control plane (names under the instance, e.g. MyIngress.lag_priority):
 *   table_add MyIngress.lag_priority.jobs MyIngress.lag_priority.track 7 =>
 *   register_write MyIngress.lag_priority.seen 7 0     (clear a job's state)
 *   register_read MyIngress.lag_priority.step_min 7
 * The program needs two priority queues per port (soft switch
 * --priority-queues 2): the higher number leaves first (strict priority).
 *
 * Include after headers.p4.
 */
#ifndef TESTBED_SYMPHONY_PQ_P4
#define TESTBED_SYMPHONY_PQ_P4

#include "headers.p4"

const bit<3>  PQ_LOW  = 0;
const bit<3>  PQ_HIGH = 1;
const int     PQ_JOBS = 256;                 // job ids are 8 bits
const bit<16> PQ_HALF_STEPS = 0x2000;        // 2^13: serial-number window

control SymphonyLagPriority(in headers_t hdr,
                            inout standard_metadata_t standard_metadata) {
    register<bit<1>>(PQ_JOBS) seen;
    register<bit<16>>(PQ_JOBS) step_min;

    action track() {
    }

    /* The jobs the control plane registered (job id -> track). */
    table jobs {
        key = {
            hdr.bth.job_id: exact;
        }
        actions = {
            track;
            NoAction;
        }
        size = PQ_JOBS;
        default_action = NoAction();
    }

    apply {
        if (!hdr.bth.isValid() || hdr.bth.job_id == JOB_ID_NONE) {
            return;
        }
        if (!jobs.apply().hit) {
            return;
        }
        if (hdr.bth.opcode > BTH_OP_RDMA_WRITE_ONLY_IMM) {
            /* ACK / NAK / CNP of a tracked job: never behind its data */
            standard_metadata.priority = PQ_HIGH;
            return;
        }
        bit<32> j = (bit<32>)hdr.bth.job_id;
        bit<16> step = hdr.udp.srcPort & TAG_STEP_MASK;
        bit<1> known;
        bit<16> smin;
        seen.read(known, j);
        if (known == 0) {
            smin = step;
            seen.write(j, 1);
        } else {
            step_min.read(smin, j);
        }
        bit<16> d = (step - smin) & TAG_STEP_MASK;
        if (d != 0 && d < PQ_HALF_STEPS) {
            standard_metadata.priority = PQ_LOW;
        } else {
            standard_metadata.priority = PQ_HIGH;
        }
        bool step_end = hdr.bth.opcode == BTH_OP_RDMA_WRITE_LAST ||
                        hdr.bth.opcode == BTH_OP_RDMA_WRITE_LAST_IMM ||
                        hdr.bth.opcode == BTH_OP_RDMA_WRITE_ONLY ||
                        hdr.bth.opcode == BTH_OP_RDMA_WRITE_ONLY_IMM;
        if (step_end) {
            if (d < PQ_HALF_STEPS) {
                smin = (step + 1) & TAG_STEP_MASK;
            }
        } else if (d >= PQ_HALF_STEPS) {
            smin = step;
        }
        step_min.write(j, smin);
    }
}

#endif  /* TESTBED_SYMPHONY_PQ_P4 */
