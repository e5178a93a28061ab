/*
 * symphony: l3_ecn (L3 routing + RED ECN marking + optional loss + queue
 * watermark) with Symphony's selective ECN marking OR-ed into the RED mark.
 *
 * Symphony (include/symphony.p4) tracks, per job, the slowest step it sees
 * (step_min) and how far that step's flows got (psn_rec), and marks packets of
 * steps ahead of it with probability min(1, k * alpha * psn / psn_rec), so that
 * DCQCN slows the flows that run ahead and the lagging step gets bandwidth.
 * The job id is BTH byte 4, the step the low 14 bits of the UDP source port
 * (include/headers.p4). Hosts that send no job id (rdma_rxe: byte 4 is
 * always 0) get their job's id written into their packets by the first
 * switch, from MyIngress.job_of_source.by_source (source address -> job):
 *   table_add MyIngress.job_of_source.by_source \
 *       MyIngress.job_of_source.set_job 10.0.1.1 => 7
 *
 * Control plane: everything of l3_ecn.p4 (MyIngress.ipv4_lpm,
 * MyIngress.port_smac, MyEgress.ecn_config, MyEgress.link_loss,
 * MyEgress.qdepth_max), plus, under MyEgress.symphony:
 *   table_add MyEgress.symphony.jobs MyEgress.symphony.track 7 =>
 *   table_set_default MyEgress.symphony.config MyEgress.symphony.set_params \
 *       10000 250000 100 100 8 8
 *     (k_ppm tau_ppm t_win_us psn_window_us n_warmup n_sample)
 *   register_read MyEgress.symphony.alpha 7     (also step_min, psn_rec, marks)
 * ECMP over the 5-tuple (MyIngress.ecmp, MyIngress.ecmp_selector; see
 * include/l3_ingress.p4), so that a new step tag - a new UDP source port -
 * can take a new path through a leaf-spine, as in the paper.
 * A job's state is cleared by writing 0 at its index in every register
 * (the controller does this when it allocates the job id).
 *
 * The paper's PQ comparison (include/symphony_pq.p4), for jobs registered
 * in MyIngress.lag_priority.jobs instead: strict priority for the data of
 * lagging steps (queue 1), steps ahead of the slowest in queue 0; it needs
 * two priority queues per port. A job is registered in one of the two.
 */
#define EGRESS_MARKER_TYPE SymphonyMarker
#define EGRESS_MARKER symphony
#define L3_ECMP
#define L3_INGRESS_EXTRA_DECLS                                  \
    SymphonyJobOfSource() job_of_source;                        \
    SymphonyLagPriority() lag_priority;
#define L3_INGRESS_EXTRA_APPLY                                  \
    job_of_source.apply(hdr);                                   \
    lag_priority.apply(hdr, standard_metadata);

#include <core.p4>
#include <v1model.p4>
#include "include/headers.p4"
#include "include/symphony.p4"
#include "include/symphony_pq.p4"
#include "l3_ecn.p4"
