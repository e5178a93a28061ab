"""The UDP source port (the flow tag) of an rxe QP, by the kernel's own arithmetic.

Linux rxe picks the source port itself (drivers/infiniband/sw/rxe):

1. at QP creation (rxe_qp.c, rxe_qp_init_req, every kernel since rxe appeared in
   4.8): ``sport = 0xC000 + (hash_32(qpn, 14) & 0x3FFF)`` where
   ``hash_32(v, 14) = ((v * 0x61C88647) mod 2**32) >> 18`` (include/linux/hash.h,
   the generic hash; x86 has no arch override): ``rxe_qpn_sport``.
2. since Linux 5.17 (commit 104f062fd1b9 "RDMA/rxe: Use the standard method to
   produce udp source port", rxe_verbs.c, rxe_modify_qp), every modify that carries
   an address vector with a GRH - INIT->RTR always does for RoCE - replaces it with
   ``rdma_get_udp_sport(flow_label, qpn, dest_qpn)`` (include/rdma/ib_verbs.h):
   a zero flow label becomes ``rdma_calc_flow_label(qpn, dest_qpn)`` (v = qpn *
   dest_qpn; v ^= v >> 20; v ^= v >> 40; 20 bits), then
   ``sport = 0xC000 | ((fl & 0x3FFF) ^ ((fl & 0xFC000) >> 14))``: ``rdma_udp_sport``.

Rule 2 makes the port selectable: the provider (hosts.roce.rxe.provider) puts
``flow_label_for_sport(sport)`` (``sport & 0x3FFF``, or 0x4001 for 0xC000) in the
GRH, so on kernels >= 5.17 the QP's wire port is exactly its requested ``sport``
(``tag_sport(step)``) from RTR on. Requests and the QP's ACKs both use it.
``rxe_sport`` is the port the kernel uses by these rules;
``kernel_has_flow_label_sport`` tells rule 2 from the running kernel's version.

How Symphony sees rxe traffic: match ipv4 + udp.dst_port 4791 as usual; the step is
``udp.src_port & 0x3FFF`` when the hosts run kernel >= 5.17 and set their QPs' tags
at RTR (a Symphony ring connects each lane again per step with its step's tag,
hosts.commlib.communicator; ``on_qp_reset`` tells the DCQCN shim of each reset);
the job id is not in the packet, so the first switch writes bth.job_id from the
source address (switches/p4/symphony.p4, MyIngress.job_of_source; the ICRC masks
that byte). Where the port carries no step (older
kernel, ``retag="ignore"``), a program counts steps per flow (ipv4.src_addr,
bth.dst_qp): each CommLib step is one RDMA WRITE_WITH_IMM per channel and
direction, so a RDMA_WRITE_LAST_IMM/ONLY_IMM packet whose PSN is newer than the
flow's last step end closes the step; packets with older PSNs are retransmissions
of earlier steps (their ImmDt carries collective and step: ``(seq << 16) | step``).

Pure arithmetic: no device, no pyverbs.
"""

from __future__ import annotations

import os
import re

from hosts.roce.verbs import VerbsError

RXE_SPORT_MIN = 0xC000
GOLDEN_RATIO_32 = 0x61C88647
FLOW_LABEL_MASK = 0xFFFFF
FLOW_LABEL_SPORT_SINCE = (5, 17)


def rxe_qpn_sport(qpn: int) -> int:
    """Source port rxe gives a QP at creation: 0xC000 + hash_32(qpn, 14)."""
    return RXE_SPORT_MIN + ((((qpn * GOLDEN_RATIO_32) & 0xFFFFFFFF) >> 18) & 0x3FFF)


def rdma_calc_flow_label(lqpn: int, rqpn: int) -> int:
    """The flow label the kernel derives from both QPNs when none is given."""
    v = (lqpn & 0xFFFFFF) * (rqpn & 0xFFFFFF)
    v ^= v >> 20
    v ^= v >> 40
    return v & FLOW_LABEL_MASK


def flow_label_to_sport(fl: int) -> int:
    low, high = fl & 0x3FFF, fl & 0xFC000
    return (low ^ (high >> 14)) | RXE_SPORT_MIN


def rdma_udp_sport(flow_label: int, lqpn: int, rqpn: int) -> int:
    """Source port after an address-vector modify on kernels >= 5.17."""
    fl = flow_label & FLOW_LABEL_MASK or rdma_calc_flow_label(lqpn, rqpn)
    return flow_label_to_sport(fl)


def flow_label_for_sport(sport: int) -> int:
    """A non-zero flow label that makes the kernel use ``sport`` (0xC000..0xFFFF)."""
    if not RXE_SPORT_MIN <= sport <= 0xFFFF:
        raise VerbsError(f"rxe source ports are 0xC000-0xFFFF, not {sport:#x}")
    return sport & 0x3FFF or 0x4001     # 0x4001: low 1 ^ (0x4000 >> 14) = 0


def rxe_sport(qpn: int, dest_qpn: int | None = None, flow_label: int = 0, *,
              flow_label_rule: bool = True) -> int:
    """The port rxe sends from: the QPN hash until the QP has an address vector
    (``dest_qpn`` None) or on kernels without the flow-label rule."""
    if dest_qpn is None or not flow_label_rule:
        return rxe_qpn_sport(qpn)
    return rdma_udp_sport(flow_label, qpn, dest_qpn)


def kernel_has_flow_label_sport(release: str | None = None) -> bool:
    """Whether a kernel release string ("6.1.0-18-amd64") has rule 2."""
    m = re.match(r"(\d+)\.(\d+)", release if release is not None else os.uname().release)
    return m is not None and (int(m[1]), int(m[2])) >= FLOW_LABEL_SPORT_SINCE

