"""pyverbs objects from the project's plans and work requests, and back.

``make_qp_attr`` turns a QPPlan (hosts.roce.rxe.qp_plans) into a pyverbs QPAttr,
``make_send_wr`` / ``make_recv_wr`` turn the project's SendWR / RecvWR into
pyverbs ones, ``wc_from_verbs`` turns a pyverbs completion into the project's
``WC``; no device is needed to build them. Immediate data is put on the wire
big-endian, as the UDP provider does (``imm_to_wire`` / ``imm_from_wire``).
``buffer_address`` pins a Python buffer for memory registration.
"""

from __future__ import annotations

import ctypes
import sys
from typing import Any

from hosts.roce.rxe import device as rxe_device
from hosts.roce.rxe.qp_plans import IBV_SEND_SIGNALED, IBV_WC_WITH_IMM, IBV_WR, QPPlan
from hosts.roce.verbs import WC, RecvWR, SendWR, VerbsError, WCOpcode, WCStatus, WROpcode


def imm_to_wire(imm: int) -> int:
    """Value for ibv_send_wr.imm_data (a big-endian field) carrying ``imm``."""
    return int.from_bytes((imm & 0xFFFFFFFF).to_bytes(4, "big"), sys.byteorder)


def imm_from_wire(raw: int) -> int:
    return int.from_bytes((raw & 0xFFFFFFFF).to_bytes(4, sys.byteorder), "big")



def make_qp_attr(plan: QPPlan):
    """A pyverbs QPAttr carrying ``plan`` (mask: ``plan.mask_bits``)."""
    e, addr, _cq, _dev, _mr, _pd, qpm, _wr = rxe_device.import_pyverbs()
    a = qpm.QPAttr()
    for k, v in plan.attrs.items():
        setattr(a, k, v)
    if plan.ah is not None:
        ah = plan.ah
        gr = addr.GlobalRoute(dgid=addr.GID(ah["dgid"]), flow_label=ah["flow_label"],
                              sgid_index=ah["sgid_index"], hop_limit=ah["hop_limit"],
                              traffic_class=ah["traffic_class"])
        a.ah_attr = addr.AHAttr(port_num=ah["port_num"], is_global=1, gr=gr)
    return a


def make_send_wr(wr: SendWR):
    """The pyverbs SendWR of ``wr`` (immediate data big-endian on the wire)."""
    _e, _addr, _cq, _dev, _mr, _pd, _qp, wrm = rxe_device.import_pyverbs()
    op = WROpcode(wr.opcode)
    sge = wr.sge
    s = wrm.SGE(sge.addr, sge.length, sge.lkey) if sge is not None and sge.length else \
        wrm.SGE(0, 0, 0)
    imm = imm_to_wire(wr.imm_data) if wr.imm_data is not None else 0
    out = wrm.SendWR(wr_id=wr.wr_id, opcode=IBV_WR[op], num_sge=1, imm_data=imm, sg=[s],
                     send_flags=IBV_SEND_SIGNALED if wr.signaled else 0)
    if sge is None or not sge.length:
        out.num_sge = 0              # pyverbs wants an SGE object; the kernel gets none
    if op in (WROpcode.RDMA_WRITE, WROpcode.RDMA_WRITE_WITH_IMM):
        out.set_wr_rdma(wr.rkey, wr.remote_addr)
    return out


def make_recv_wr(wr: RecvWR):
    _e, _addr, _cq, _dev, _mr, _pd, _qp, wrm = rxe_device.import_pyverbs()
    sge = wr.sge
    s = wrm.SGE(sge.addr, sge.length, sge.lkey) if sge is not None and sge.length else \
        wrm.SGE(0, 0, 0)
    out = wrm.RecvWR(wr_id=wr.wr_id, num_sge=1, sg=[s])
    if sge is None or not sge.length:
        out.num_sge = 0
    return out


def wc_from_verbs(w, src_qp: int, now_ns: int) -> WC:
    """A project WC from a pyverbs WC (imm_data back to host order)."""
    try:
        status = WCStatus(w.status)
    except ValueError:
        status = WCStatus.GENERAL_ERR
    try:
        op = WCOpcode(w.opcode)
    except ValueError:       # undefined for some error completions
        op = WCOpcode.RECV if w.opcode >= 128 else WCOpcode.SEND
    imm = imm_from_wire(w.imm_data) if w.wc_flags & IBV_WC_WITH_IMM else None
    return WC(w.wr_id, status, op, w.byte_len, imm, w.qp_num, src_qp, now_ns)


def buffer_address(buf) -> tuple[int, int, Any]:
    """(address, length, pin) of a writable contiguous buffer; keep ``pin`` alive
    while the memory is registered (it also stops a bytearray from resizing)."""
    mv = memoryview(buf).cast("B")
    if mv.readonly:
        raise VerbsError("MR buffer must be writable")
    n = len(mv)
    if n == 0:
        raise VerbsError("cannot register an empty buffer")
    pin = (ctypes.c_char * n).from_buffer(mv)
    return ctypes.addressof(pin), n, pin

