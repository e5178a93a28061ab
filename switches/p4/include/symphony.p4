/*
 * Symphony: per-job step-progress tracking and selective ECN marking
 * (Algorithm 1 of the Symphony paper), as a v1model control that a program's
 * egress applies to every dequeued packet. It returns `mark`: the program ORs
 * it with its RED mark and sets CE only on ECN-capable packets.
 *
 * Which packets: RoCEv2 requests that carry data (BTH opcodes SEND_* and
 * RDMA_WRITE_*, 0x00..0x0B) of a job whose id (bth.job_id, BTH byte 4) has an
 * entry in `jobs`. Everything else (non-RoCE, ACK/NAK, CNP, job id 0 and jobs
 * the control plane has not registered) is left alone: no state change, no mark.
 *
 * Inputs: step = udp.srcPort & 0x3FFF (14 bits), psn = bth.psn.
 *
 * PSN as progress: every step's flow starts at PSN 0 (the sender uses a QP
 * whose send PSN starts at 0 for that step), so a packet's PSN is the number
 * of packets its flow sent in the step before it, and psn / psn_rec compares
 * how far two flows got into their steps.
 *
 * Step order: steps are compared with serial-number arithmetic modulo 2^14
 * (RFC 1982): with d = (a - b) mod 2^14, a is newer than b when 0 < d < 2^13,
 * older when d >= 2^13. So step 0 follows 16383.
 *
 * Per job j (registers indexed by job id), per packet, in this order:
 *   0. first packet since the job was registered (seen[j] == 0): step_min <-
 *      step, psn_rec <- 0, alpha <- 1, both windows start now.
 *   1. alpha window (T_win): if now - win_start >= T_win, the window ends:
 *      when Cnt_total > N_sample, alpha <- alpha + 1 if Cnt_op >= tau * Cnt_total
 *      (as Cnt_op * 10^6 >= tau_ppm * Cnt_total) else max(1, alpha - 1);
 *      then Cnt_total, Cnt_op <- 0 and the next window starts now.
 *      (Below N_sample samples alpha keeps its value.) alpha saturates at
 *      SYMPHONY_ALPHA_MAX, the width of its register.
 *   2. UpdateTrafficStats: Cnt_total += 1; Cnt_op += 1 if step is newer than
 *      step_min (outpacing).
 *   3. psn window: if now - psn_win_start >= psn_window, psn_rec <- 0 and the
 *      window starts now (psn_rec is a max over the current window).
 *   4. Algorithm 1, lines 3-10:
 *        step-end packet (RDMA_WRITE_LAST, _LAST_WITH_IMM, _ONLY, _ONLY_WITH_IMM)
 *          of a step at or after step_min: step_min <- step + 1, psn_rec <- 0;
 *          of an older step: nothing (see idempotence);
 *        else step older than step_min: step_min <- step, psn_rec <- psn;
 *        else step == step_min: psn_rec <- max(psn_rec, psn).
 *   5. Lines 11-17: no mark if step is not newer than step_min or
 *      psn_rec <= N_warmup; else mark with P = min(1, k * alpha * psn / psn_rec),
 *      without a division: with r uniform in [0, 10^6),
 *          mark  <=>  r * psn_rec < k_ppm * alpha * psn
 *      (k_ppm = k * 10^6), i.e. P = min(1, ceil(10^6 k alpha psn / psn_rec) / 10^6).
 *
 * Idempotence: every update is an assignment or a max, so a duplicate of a
 * packet leaves the state as its first copy did. A step-end packet only moves
 * step_min forward; a retransmitted or duplicated end of a step that is
 * already behind step_min would otherwise reset psn_rec and drag step_min back.
 *
 * Control plane (names under the instance, e.g. MyEgress.symphony):
 *   table_add MyEgress.symphony.jobs MyEgress.symphony.track 7 =>
 *   register_reset / register_write MyEgress.symphony.seen ...   (per-job state)
 *   table_set_default MyEgress.symphony.config MyEgress.symphony.set_params \
 *       k_ppm tau_ppm t_win_us psn_window_us n_warmup n_sample
 * Built-in defaults are the paper's: k = 0.01, tau = 0.25, T_win = 100 us,
 * psn window 100 us, plus N_warmup = 8 and N_sample = 8 packets (the paper
 * gives no values). Times are in the switch's microseconds: a run with time
 * dilated by a slowdown factor sets them multiplied by it.
 *
 * Observation registers (per job): alpha, step_min, psn_rec, marks (packets
 * Symphony decided to mark, ECT or not).
 *
 * Include after headers.p4.
 */
#ifndef TESTBED_SYMPHONY_P4
#define TESTBED_SYMPHONY_P4

#include "headers.p4"

const int     SYMPHONY_JOBS            = 256;       // job ids are 8 bits
const bit<32> SYMPHONY_DEFAULT_K_PPM   = 10000;     // k = 0.01
const bit<32> SYMPHONY_DEFAULT_TAU_PPM = 250000;    // tau = 0.25
const bit<32> SYMPHONY_DEFAULT_T_WIN   = 100;       // us
const bit<32> SYMPHONY_DEFAULT_PSN_WIN = 100;       // us
const bit<32> SYMPHONY_DEFAULT_WARMUP  = 8;         // packets
const bit<32> SYMPHONY_DEFAULT_SAMPLE  = 8;         // packets
const bit<32> SYMPHONY_ALPHA_MAX       = 65535;
const bit<32> SYMPHONY_PPM             = 1000000;
const bit<16> SYMPHONY_HALF_STEPS      = 0x2000;    // 2^13: serial-number window

/* Job ids for hosts that cannot put one in their packets: rdma_rxe sends BTH
 * byte 4 as 0. The control plane maps a host's address to the job it runs
 * (one job per host), and the first switch writes that id into the host's
 * untagged packets, data and ACKs alike, so every later stage and switch sees
 * a tagged packet. The ICRC masks that byte (IBA Resv8a), so the receiving NIC
 * still accepts the packet. Packets that carry a job id keep it. */
const int SYMPHONY_JOB_HOSTS = 1024;

control SymphonyJobOfSource(inout headers_t hdr) {
    action set_job(bit<8> job_id) {
        hdr.bth.job_id = job_id;
    }

    table by_source {
        key = {
            hdr.ipv4.srcAddr: exact;
        }
        actions = {
            set_job;
            NoAction;
        }
        size = SYMPHONY_JOB_HOSTS;
        default_action = NoAction();
    }

    apply {
        if (hdr.bth.isValid() && hdr.bth.job_id == JOB_ID_NONE) {
            by_source.apply();
        }
    }
}

control SymphonyMarker(in headers_t hdr,
                       in standard_metadata_t standard_metadata,
                       out bool mark) {
    register<bit<1>>(SYMPHONY_JOBS) seen;
    register<bit<16>>(SYMPHONY_JOBS) step_min;
    register<bit<32>>(SYMPHONY_JOBS) psn_rec;
    register<bit<48>>(SYMPHONY_JOBS) psn_win_start;
    register<bit<32>>(SYMPHONY_JOBS) alpha;
    register<bit<32>>(SYMPHONY_JOBS) cnt_total;
    register<bit<32>>(SYMPHONY_JOBS) cnt_op;
    register<bit<48>>(SYMPHONY_JOBS) win_start;
    register<bit<32>>(SYMPHONY_JOBS) marks;

    bit<32> cfg_k = 0;
    bit<32> cfg_tau = 0;
    bit<48> cfg_t_win = 0;
    bit<48> cfg_psn_win = 0;
    bit<32> cfg_warmup = 0;
    bit<32> cfg_sample = 0;

    action set_params(bit<32> k_ppm, bit<32> tau_ppm, bit<32> t_win_us,
                      bit<32> psn_window_us, bit<32> n_warmup, bit<32> n_sample) {
        cfg_k = k_ppm;
        cfg_tau = tau_ppm;
        cfg_t_win = (bit<48>)t_win_us;
        cfg_psn_win = (bit<48>)psn_window_us;
        cfg_warmup = n_warmup;
        cfg_sample = n_sample;
    }

    table config {
        actions = {
            set_params;
        }
        default_action = set_params(SYMPHONY_DEFAULT_K_PPM, SYMPHONY_DEFAULT_TAU_PPM,
                                    SYMPHONY_DEFAULT_T_WIN, SYMPHONY_DEFAULT_PSN_WIN,
                                    SYMPHONY_DEFAULT_WARMUP, SYMPHONY_DEFAULT_SAMPLE);
    }

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
        size = SYMPHONY_JOBS;
        default_action = NoAction();
    }

    apply {
        mark = false;
        if (!hdr.bth.isValid() || hdr.bth.job_id == JOB_ID_NONE ||
                hdr.bth.opcode > BTH_OP_RDMA_WRITE_ONLY_IMM) {
            return;
        }
        if (!jobs.apply().hit) {
            return;
        }
        config.apply();

        bit<32> j = (bit<32>)hdr.bth.job_id;
        bit<16> step = hdr.udp.srcPort & TAG_STEP_MASK;
        bit<32> psn = (bit<32>)hdr.bth.psn;
        bit<48> now = standard_metadata.egress_global_timestamp;

        bit<1> known;
        bit<16> smin;
        bit<32> rec;
        bit<48> pwin;
        bit<32> a;
        bit<32> total;
        bit<32> op;
        bit<48> win;
        seen.read(known, j);
        if (known == 0) {
            smin = step;
            rec = 0;
            pwin = now;
            a = 1;
            total = 0;
            op = 0;
            win = now;
            seen.write(j, 1);
        } else {
            step_min.read(smin, j);
            psn_rec.read(rec, j);
            psn_win_start.read(pwin, j);
            alpha.read(a, j);
            cnt_total.read(total, j);
            cnt_op.read(op, j);
            win_start.read(win, j);
        }

        /* 1. alpha, once per T_win. */
        if (now - win >= cfg_t_win) {
            if (total > cfg_sample) {
                if ((bit<64>)op * (bit<64>)SYMPHONY_PPM >= (bit<64>)cfg_tau * (bit<64>)total) {
                    if (a < SYMPHONY_ALPHA_MAX) {
                        a = a + 1;
                    }
                } else if (a > 1) {
                    a = a - 1;
                }
            }
            total = 0;
            op = 0;
            win = now;
        }

        /* 2. UpdateTrafficStats, against step_min before this packet. */
        bit<16> d_old = (step - smin) & TAG_STEP_MASK;
        total = total + 1;
        if (d_old != 0 && d_old < SYMPHONY_HALF_STEPS) {
            op = op + 1;
        }

        /* 3. psn_rec is the max over the current psn window. */
        if (now - pwin >= cfg_psn_win) {
            rec = 0;
            pwin = now;
        }

        /* 4. Algorithm 1, lines 3-10. */
        bool step_end = hdr.bth.opcode == BTH_OP_RDMA_WRITE_LAST ||
                        hdr.bth.opcode == BTH_OP_RDMA_WRITE_LAST_IMM ||
                        hdr.bth.opcode == BTH_OP_RDMA_WRITE_ONLY ||
                        hdr.bth.opcode == BTH_OP_RDMA_WRITE_ONLY_IMM;
        if (step_end) {
            if (d_old < SYMPHONY_HALF_STEPS) {
                smin = (step + 1) & TAG_STEP_MASK;
                rec = 0;
            }
        } else if (d_old >= SYMPHONY_HALF_STEPS) {
            smin = step;
            rec = psn;
        } else if (d_old == 0) {
            if (psn > rec) {
                rec = psn;
            }
        }

        /* 5. Lines 11-17, against the updated state. */
        bit<16> d = (step - smin) & TAG_STEP_MASK;
        if (d != 0 && d < SYMPHONY_HALF_STEPS && rec > cfg_warmup) {
            bit<32> r;
            random<bit<32>>(r, 32w0, SYMPHONY_PPM - 1);
            if ((bit<64>)r * (bit<64>)rec <
                    (bit<64>)cfg_k * (bit<64>)a * (bit<64>)psn) {
                mark = true;
                bit<32> m;
                marks.read(m, j);
                marks.write(j, m + 1);
            }
        }

        step_min.write(j, smin);
        psn_rec.write(j, rec);
        psn_win_start.write(j, pwin);
        alpha.write(j, a);
        cnt_total.write(j, total);
        cnt_op.write(j, op);
        win_start.write(j, win);
    }
}

#endif  /* TESTBED_SYMPHONY_P4 */
