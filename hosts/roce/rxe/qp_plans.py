"""The QP state transitions an rxe QP makes, as plans of ibv_modify_qp calls.

A ``QPPlan`` is one ibv_modify_qp call: attribute values and mask names, in the
libibverbs ABI values below (enum ibv_*; tests compare them with pyverbs). Plans
are plain data, built and checked without a device or pyverbs;
hosts.roce.rxe.pyverbs_objects turns one into a pyverbs QPAttr.

Attribute mapping: INIT sets port, pkey index 0 and the access flags (local write,
remote write, remote read); RTR sets the address vector (GRH with dgid
::ffff:dest_ip, sgid_index, hop limit, traffic class = ECN bits, flow label),
path MTU, dest QPN, rq_psn, one responder resource and min RNR timer 12; RTS sets
sq_psn, the local ACK timeout (exponent t with 4.096 µs * 2**t >= timeout_ns, 14
by default), retry_cnt and rnr_retry. rxe always sends to UDP 4791 (``dest_port``
must be 4791). The flow label is what selects the QP's UDP source port
(hosts.roce.rxe.sport).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from hosts.roce.constants import PATH_MTUS, PSN_MASK
from hosts.roce.rxe.device import ipv4_gid
from hosts.roce.rxe.sport import FLOW_LABEL_MASK
from hosts.roce.verbs import Access, QPState, VerbsError, WROpcode

# libibverbs ABI values (enum ibv_*; tests compare them with pyverbs).
IBV_QPT_RC = 2
IBV_QPS = {QPState.RESET: 0, QPState.INIT: 1, QPState.RTR: 2, QPState.RTS: 3, QPState.ERR: 6}
IBV_QPS_SQD = 4
IBV_QP_MASK = {
    "STATE": 1, "ACCESS_FLAGS": 1 << 3, "PKEY_INDEX": 1 << 4, "PORT": 1 << 5, "AV": 1 << 7,
    "PATH_MTU": 1 << 8, "TIMEOUT": 1 << 9, "RETRY_CNT": 1 << 10, "RNR_RETRY": 1 << 11,
    "RQ_PSN": 1 << 12, "MAX_QP_RD_ATOMIC": 1 << 13, "MIN_RNR_TIMER": 1 << 15,
    "SQ_PSN": 1 << 16, "MAX_DEST_RD_ATOMIC": 1 << 17, "DEST_QPN": 1 << 20,
}
IBV_ACCESS = {Access.LOCAL_WRITE: 1, Access.REMOTE_WRITE: 2, Access.REMOTE_READ: 4}
IBV_MTU = {256: 1, 512: 2, 1024: 3, 2048: 4, 4096: 5}
IBV_WR = {WROpcode.RDMA_WRITE: 0, WROpcode.RDMA_WRITE_WITH_IMM: 1, WROpcode.SEND: 2,
          WROpcode.SEND_WITH_IMM: 3}
IBV_SEND_SIGNALED = 2
IBV_WC_WITH_IMM = 2
DEFAULT_TIMEOUT_EXP = 14          # 4.096 µs * 2**14 = 67 ms
MIN_RNR_TIMER = 12                # 0.64 ms (IBA encoding)
QP_ACCESS = Access.LOCAL_WRITE | Access.REMOTE_WRITE | Access.REMOTE_READ


def ibv_access(access: Access) -> int:
    out = 0
    for flag, bit in IBV_ACCESS.items():
        if access & flag:
            out |= bit
    return out


def ibv_mask(names) -> int:
    m = 0
    for n in names:
        m |= IBV_QP_MASK[n]
    return m


def ib_timeout_exp(timeout_ns: int | None) -> int:
    """Local ACK timeout exponent: the smallest t with 4.096 µs * 2**t >= timeout_ns."""
    if timeout_ns is None:
        return DEFAULT_TIMEOUT_EXP
    t = 1
    while (4096 << t) < timeout_ns and t < 31:
        t += 1
    return t



@dataclass(frozen=True)
class QPPlan:
    """One ibv_modify_qp call: attribute values and mask names. ``ah`` is the GRH
    address vector (dgid, sgid_index, flow_label, traffic_class, hop_limit, port_num)."""

    attrs: dict[str, int]
    mask: tuple[str, ...]
    ah: dict[str, Any] | None = None

    @property
    def mask_bits(self) -> int:
        return ibv_mask(self.mask)


def init_plan(port_num: int, access: Access = QP_ACCESS) -> QPPlan:
    return QPPlan({"qp_state": IBV_QPS[QPState.INIT], "pkey_index": 0, "port_num": port_num,
                   "qp_access_flags": ibv_access(access)},
                  ("STATE", "PKEY_INDEX", "PORT", "ACCESS_FLAGS"))


def av_plan(dest_ip: str, sgid_index: int, flow_label: int, traffic_class: int,
            hop_limit: int, port_num: int) -> dict[str, Any]:
    return {"dgid": ipv4_gid(dest_ip), "sgid_index": sgid_index,
            "flow_label": flow_label & FLOW_LABEL_MASK, "traffic_class": traffic_class & 0xFF,
            "hop_limit": hop_limit, "port_num": port_num}


def rtr_plan(*, dest_ip: str, dest_qp_num: int, rq_psn: int, path_mtu: int, sgid_index: int,
             flow_label: int, traffic_class: int, hop_limit: int, port_num: int) -> QPPlan:
    if path_mtu not in IBV_MTU:
        raise VerbsError(f"path_mtu must be one of {PATH_MTUS}")
    return QPPlan({"qp_state": IBV_QPS[QPState.RTR], "path_mtu": IBV_MTU[path_mtu],
                   "dest_qp_num": dest_qp_num & 0xFFFFFF, "rq_psn": rq_psn & PSN_MASK,
                   "max_dest_rd_atomic": 1, "min_rnr_timer": MIN_RNR_TIMER},
                  ("STATE", "AV", "PATH_MTU", "DEST_QPN", "RQ_PSN", "MAX_DEST_RD_ATOMIC",
                   "MIN_RNR_TIMER"),
                  av_plan(dest_ip, sgid_index, flow_label, traffic_class, hop_limit, port_num))


def rts_plan(*, sq_psn: int, timeout_ns: int | None, retry_cnt: int, rnr_retry: int) -> QPPlan:
    if not (0 <= retry_cnt <= 7 and 0 <= rnr_retry <= 7):
        raise VerbsError("retry_cnt and rnr_retry must be 0..7")
    return QPPlan({"qp_state": IBV_QPS[QPState.RTS], "sq_psn": sq_psn & PSN_MASK,
                   "timeout": ib_timeout_exp(timeout_ns), "retry_cnt": retry_cnt,
                   "rnr_retry": rnr_retry, "max_rd_atomic": 1},
                  ("STATE", "SQ_PSN", "TIMEOUT", "RETRY_CNT", "RNR_RETRY", "MAX_QP_RD_ATOMIC"))

