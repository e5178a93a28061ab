"""The verbs API of hosts.roce over the kernel's soft-RoCE (rdma_rxe) through pyverbs.

``RxeContext`` / ``RxePD`` / ``RxeMR`` / ``RxeCQ`` / ``RxeQP`` take the same calls as
hosts.roce.verbs (``alloc_pd``, ``create_cq``, ``reg_mr``, ``create_qp``,
``modify(state=..., dest_ip=..., ...)``, ``post_send(SendWR)``, ``post_recv(RecvWR)``,
``cq.poll``/``cq.wait``, ``ctx.engine.run``) and return the same ``WC`` objects, so
``connect_pair`` and CommLib run on them. The kernel does the transport: the engine
only polls completions, and ``WC.timestamp_ns`` is CLOCK_MONOTONIC when the
completion was polled (rxe has no completion timestamps).

Set-up (root, initial network namespace)::

    apt-get install python3-pyverbs          # rdma-core, libibverbs, the rxe provider
    modprobe rdma_rxe
    rdma link add rxe0 type rxe netdev eth0  # or: python3 -m testbed.rdma_netlink add rxe0 eth0
    ctx = RxeContext("10.0.0.1")             # or RxeContext(netdev="eth0")

Device discovery finds rxe devices in /sys/class/infiniband and reads each one's GID
table in one verbs query (sysfs's per-GID files, ports/<p>/{gids,gid_attrs}, where
pyverbs cannot): an rxe device (the one driver with a ``parent`` attribute: its netdev) with
a "RoCE v2" GID that is the IPv4-mapped address (::ffff:a.b.c.d) of the wanted
address or netdev. That GID's index is the ``sgid_index`` of every QP.

Attribute mapping: INIT sets port, pkey index 0 and the access flags (local write,
remote write, remote read); RTR sets the address vector (GRH with dgid
::ffff:dest_ip, sgid_index, hop limit, traffic class = ECN bits, flow label),
path MTU, dest QPN, rq_psn, one responder resource and min RNR timer 12; RTS sets
sq_psn, the local ACK timeout (exponent t with 4.096 µs * 2**t >= timeout_ns, 14
by default), retry_cnt and rnr_retry. rxe always sends to UDP 4791 (``dest_port``
must be 4791). Immediate data is put on the wire big-endian, as the UDP provider does.

UDP source port (the flow tag)
------------------------------
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

Rule 2 makes the port selectable: this provider puts ``flow_label_for_sport(sport)``
(``sport & 0x3FFF``, or 0x4001 for 0xC000) in the GRH, so on kernels >= 5.17 the
QP's wire port is exactly its requested ``sport`` (``tag_sport(step)``) from RTR on.
Requests and the QP's ACKs both use it. It cannot change per packet or per WR:
the address vector may only be modified in SQD. What ``qp.modify(sport=...)`` on an
RTS QP (and a ``SendWR.sport`` different from the QP's) does is the context's
``retag`` setting:

- ``"ignore"`` (default): recorded in ``qp.requested_sport`` and counted
  (``qp.stats``), the wire keeps the QP's port; CommLib runs unchanged.
- ``"error"``: VerbsError.
- ``"sqd"``: RTS -> SQD, wait until the send queue has drained (every posted WR
  completed), SQD -> SQD with the new flow label, SQD -> RTS. Needs rule 2 (kernel
  >= 5.17) and costs a drain per retag - the same wait CommLib makes before a step.

``qp.sport`` is the port the kernel uses (by the rules above; ``sport_rule``
"auto" decides rule 2 from the running kernel's version). BTH byte 4 (the job id)
is always 0 from rxe: ``job_id`` is recorded, not sent.

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

rxe ignores ECN: it sends the traffic class's ECN bits (ECT(0) by default here) on
every packet, ACKs included, but a CE mark makes no CNP and there is no DCQCN, so
marking slows nothing. The rxe UDP socket and routes live in the initial network
namespace (rxe_net.c uses init_net), so Mininet hosts (one namespace each) cannot
use rxe; the Vagrant VM or a KVM/TCG guest with one rxe device per guest can
(recent mainline adds per-namespace rxe sockets, rxe_ns.c; not relied on here).
"""

from __future__ import annotations

import ctypes
import os
import re
import socket
import sys
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from types import SimpleNamespace
from typing import TYPE_CHECKING, Any

from hosts.roce.constants import ECN_ECT0, PATH_MTUS, PSN_MASK, ROCE_UDP_PORT
from hosts.roce.scale import Scale
from hosts.roce.verbs import (
    WC,
    Access,
    MRBase,
    QPAttr,
    QPAttrs,
    QPState,
    RecvWR,
    SendWR,
    VerbsError,
    WCOpcode,
    WCStatus,
    WROpcode,
    modify_request,
)

if TYPE_CHECKING:
    from typing import Unpack

SYSFS_INFINIBAND = "/sys/class/infiniband"
NO_RXE_HINT = ("modprobe rdma_rxe; rdma link add rxe0 type rxe netdev {netdev}; "
               "note: rxe works only in the initial network namespace")

# ---------------------------------------------------------------------------
# The kernel's source-port rules (see the module docstring).
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


# ---------------------------------------------------------------------------
# libibverbs ABI values used below (enum ibv_*; tests compare them with pyverbs).
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


def ipv4_gid(ip: str) -> str:
    """The IPv4-mapped GID of ``ip`` as sysfs and pyverbs write it."""
    b = bytes(10) + b"\xff\xff" + socket.inet_aton(ip)
    return ":".join(b[i:i + 2].hex() for i in range(0, 16, 2))


def gid_ipv4(gid: str) -> str | None:
    """The IPv4 address of an IPv4-mapped GID, else None."""
    try:
        b = bytes.fromhex(gid.strip().replace(":", ""))
    except ValueError:
        return None
    if len(b) != 16 or b[:10] != bytes(10) or b[10:12] != b"\xff\xff":
        return None
    return socket.inet_ntoa(b[12:])


def imm_to_wire(imm: int) -> int:
    """Value for ibv_send_wr.imm_data (a big-endian field) carrying ``imm``."""
    return int.from_bytes((imm & 0xFFFFFFFF).to_bytes(4, "big"), sys.byteorder)


def imm_from_wire(raw: int) -> int:
    return int.from_bytes((raw & 0xFFFFFFFF).to_bytes(4, sys.byteorder), "big")


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


# ---------------------------------------------------------------------------
# Device discovery.

class RxeUnavailable(RuntimeError):
    """No usable rxe device (or no pyverbs); the message says what to do."""


@dataclass(frozen=True)
class RxeGid:
    index: int
    gid: str
    type: str               # "RoCE v2", "IB/RoCE v1"
    netdev: str | None
    ipv4: str | None


@dataclass(frozen=True)
class RxeDevice:
    name: str               # e.g. rxe0
    port: int
    netdev: str | None      # the parent netdev
    gid_index: int          # RoCE v2 IPv4-mapped GID used as sgid_index
    ipv4: str
    gids: tuple[RxeGid, ...] = ()


def _read(path: Path) -> str | None:
    try:
        return path.read_text().strip()
    except OSError:          # unused GID slots fail with EINVAL
        return None


def _is_rxe(dev: Path) -> bool:
    return (dev / "parent").is_file()      # rxe's own attribute: its netdev


GID_TYPE_NAMES = {0: "IB/RoCE v1", 1: "IB/RoCE v1", 2: "RoCE v2"}   # enum ibv_gid_type


def query_gid_table(device: str) -> list[tuple[int, RxeGid]] | None:
    """(port, gid) for every GID of ``device`` in one ibv_query_gid_table call, or
    None without pyverbs. sysfs has one file per GID slot (1024 for rxe) and a read
    of each: seconds on a real machine, about 100 s under an emulated CPU."""
    try:
        from pyverbs.device import Context as VerbsContext
    except ImportError:
        return None
    try:
        with VerbsContext(name=device) as vctx:
            ports = vctx.query_device().phys_port_cnt
            size = sum(vctx.query_port(p).gid_tbl_len for p in range(1, ports + 1))
            entries = vctx.query_gid_table(size)
    except Exception:           # pyverbs raises its own errors; sysfs is the fallback
        return None
    out = []
    for e in entries:
        text = e.gid_str()
        try:
            ndev: str | None = socket.if_indextoname(e.ndev_ifindex) if e.ndev_ifindex else None
        except OSError:
            ndev = None
        out.append((e.port_num, RxeGid(e.gid_index, text, GID_TYPE_NAMES.get(e.gid_type, ""),
                                       ndev, gid_ipv4(text))))
    return out


def scan_rxe_gids(sysfs_root: str = SYSFS_INFINIBAND) -> list[tuple[str, int, str | None, RxeGid]]:
    """(device, port, parent netdev, gid) for every non-zero GID of every rxe device.

    On the real sysfs the GIDs come from one verbs query per device (query_gid_table);
    the per-slot sysfs files are read only where that is not possible (and in tests,
    on a fake tree)."""
    out: list[tuple[str, int, str | None, RxeGid]] = []
    root = Path(sysfs_root)
    if not root.is_dir():
        return out
    for dev in sorted(root.iterdir()):
        if not _is_rxe(dev):
            continue
        parent = _read(dev / "parent")
        table = query_gid_table(dev.name) if sysfs_root == SYSFS_INFINIBAND else None
        if table is not None:
            out.extend((dev.name, port, parent, g) for port, g in table
                       if g.gid.replace(":", "").strip("0"))
            continue
        for port_dir in sorted((dev / "ports").glob("*")):
            if not port_dir.name.isdigit():
                continue
            gids = port_dir / "gids"
            for gfile in sorted(gids.glob("*"), key=lambda p: int(p.name) if p.name.isdigit()
                                else -1):
                if not gfile.name.isdigit():
                    continue
                text = _read(gfile)
                if not text or not text.replace(":", "").strip("0"):
                    continue
                i = int(gfile.name)
                attrs = port_dir / "gid_attrs"
                g = RxeGid(i, text, _read(attrs / "types" / str(i)) or "",
                           _read(attrs / "ndevs" / str(i)), gid_ipv4(text))
                out.append((dev.name, int(port_dir.name), parent, g))
    return out


def find_rxe_device(local_ip: str | None = None, netdev: str | None = None, *,
                    device: str | None = None,
                    sysfs_root: str = SYSFS_INFINIBAND) -> RxeDevice:
    """The rxe device and RoCE v2 GID for ``local_ip`` and/or ``netdev`` (first match
    if neither is given); RxeUnavailable with set-up instructions otherwise."""
    entries = scan_rxe_gids(sysfs_root)
    if device is not None:
        entries = [e for e in entries if e[0] == device]
    hint = NO_RXE_HINT.format(netdev=netdev or "eth0")
    if not entries:
        what = f" {device!r}" if device else ""
        raise RxeUnavailable(f"no rdma_rxe device{what}: {hint}")
    for name, port, parent, g in entries:
        if g.type != "RoCE v2" or g.ipv4 is None:
            continue
        if local_ip is not None and g.ipv4 != local_ip:
            continue
        if netdev is not None and netdev not in (g.netdev, parent):
            continue
        gids = tuple(e[3] for e in entries if e[0] == name and e[1] == port)
        return RxeDevice(name, port, parent, g.index, g.ipv4, gids)
    have: dict[str, list[str]] = {}
    for n, _, p, g in entries:
        ips = have.setdefault(f"{n} on {p}", [])
        if g.type == "RoCE v2" and g.ipv4 and g.ipv4 not in ips:
            ips.append(g.ipv4)
    found = "; ".join(f"{k}: {', '.join(v) or 'no IPv4 GID'}" for k, v in have.items())
    want = " ".join(x for x in (local_ip and f"address {local_ip}",
                                netdev and f"netdev {netdev}") if x)
    raise RxeUnavailable(f"no rdma_rxe device with a RoCE v2 IPv4 GID for {want or 'IPv4'} "
                         f"(found {found}): {hint}")


def read_hw_counters(dev: RxeDevice | None, sysfs_root: str = SYSFS_INFINIBAND) -> dict[str, int]:
    """The device port's hw_counters (rcvd_pkts, sent_pkts, retry_exceeded_err, ...)."""
    if dev is None:
        return {}
    out = {}
    for f in sorted((Path(sysfs_root) / dev.name / "ports" / str(dev.port) /
                     "hw_counters").glob("*")):
        v = _read(f)
        if v is not None and v.isdigit():
            out[f.name] = int(v)
    return out


def _import_pyverbs():
    try:
        import pyverbs.enums as e
        from pyverbs import addr, cq, device, mr, pd, qp, wr
    except ImportError as ex:
        raise RxeUnavailable(f"pyverbs is not importable ({ex}): apt-get install "
                             "python3-pyverbs") from ex
    return e, addr, cq, device, mr, pd, qp, wr


def rxe_unavailable_reason(local_ip: str | None = None, netdev: str | None = None,
                           sysfs_root: str = SYSFS_INFINIBAND) -> str | None:
    """Why an RxeContext cannot be opened here (None: it can)."""
    try:
        _import_pyverbs()
        find_rxe_device(local_ip, netdev, sysfs_root=sysfs_root)
    except RxeUnavailable as ex:
        return str(ex)
    return None


# ---------------------------------------------------------------------------
# pyverbs objects from plans (no device needed to build them).

def make_qp_attr(plan: QPPlan):
    """A pyverbs QPAttr carrying ``plan`` (mask: ``plan.mask_bits``)."""
    e, addr, _cq, _dev, _mr, _pd, qpm, _wr = _import_pyverbs()
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
    _e, _addr, _cq, _dev, _mr, _pd, _qp, wrm = _import_pyverbs()
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
    _e, _addr, _cq, _dev, _mr, _pd, _qp, wrm = _import_pyverbs()
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


# ---------------------------------------------------------------------------
# The verbs objects.

class RxeProvider:
    """What CommLib and the agent read from ``ctx.provider``: address, port, clock."""

    def __init__(self, device: RxeDevice) -> None:
        self.device = device
        self.local_ip = device.ipv4
        self.port = ROCE_UDP_PORT

    @staticmethod
    def now_ns() -> int:
        return time.monotonic_ns()

    def close(self) -> None:
        pass


class RxeMR(MRBase):
    def __init__(self, pd: RxePD, buf, access: Access) -> None:
        self.pd = pd
        addr, n, pin = buffer_address(buf)
        self._pin = pin
        self.buf = memoryview(buf).cast("B")
        self.length = n
        self.access = Access(access)
        self.addr = addr
        self._mr = pd.ctx._v.mr.MR(pd._pd, n, ibv_access(self.access), address=addr)
        self.lkey = self._mr.lkey
        self.rkey = self._mr.rkey
        self.valid = True

    def dereg(self) -> None:
        if self.valid:
            self.valid = False
            self._mr.close()


class RxePD:
    def __init__(self, ctx: RxeContext) -> None:
        self.ctx = ctx
        self._pd = ctx._v.pd.PD(ctx._verbs)

    def reg_mr(self, buf, access: Access = Access.LOCAL_WRITE) -> RxeMR:
        return RxeMR(self, buf, access)

    def create_qp(self, send_cq: RxeCQ, recv_cq: RxeCQ | None = None, *,
                  sport: int | None = None, job_id: int = 0, rate_controller=None,
                  pacer=None, max_send_wr: int = 512, max_recv_wr: int = 1024) -> RxeQP:
        """``rate_controller``/``pacer`` are kept for API parity; rxe has no rate
        control, so they are not used."""
        return RxeQP(self, send_cq, recv_cq or send_cq, sport=sport, job_id=job_id,
                     rate_controller=rate_controller, pacer=pacer,
                     max_send_wr=max_send_wr, max_recv_wr=max_recv_wr)


class RxeCQ:
    def __init__(self, ctx: RxeContext, depth: int) -> None:
        self.ctx = ctx
        self.depth = depth
        self._cq = ctx._v.cq.CQ(ctx._verbs, depth, None, None, 0)
        self._q: deque[WC] = deque()
        self.overflows = 0

    def _fill(self) -> None:
        ctx = self.ctx
        while True:
            n, wcs = self._cq.poll(64)
            if n <= 0:
                return
            now = time.monotonic_ns()
            for w in wcs[:n]:
                qp = ctx._qps.get(w.qp_num)
                wc = wc_from_verbs(w, qp.dest_qp_num if qp else 0, now)
                if qp is not None and wc.opcode in (WCOpcode.SEND, WCOpcode.RDMA_WRITE):
                    qp._outstanding = max(0, qp._outstanding - 1)
                self._q.append(wc)

    def __len__(self) -> int:
        self._fill()
        return len(self._q)

    def poll(self, num_entries: int = 1) -> list[WC]:
        self._fill()
        q = self._q
        return [q.popleft() for _ in range(min(num_entries, len(q)))]

    def wait(self, num_entries: int = 1, timeout: float | None = None) -> list[WC]:
        self.ctx.engine.run(until=lambda: len(self) >= num_entries, timeout=timeout)
        return self.poll(num_entries)


# the attributes an rxe QP keeps as modify gives them
_KEPT_AS_GIVEN = frozenset(("dest_ip", "dest_qp_num", "path_mtu", "timeout_ns", "retry_cnt",
                            "rnr_retry", "job_id", "max_inflight"))


class RxeQP:
    """An RC QP on the rxe device; see the module docstring for tags and ports."""

    def __init__(self, pd: RxePD, send_cq: RxeCQ, recv_cq: RxeCQ, *, sport: int | None,
                 job_id: int, rate_controller, pacer, max_send_wr: int,
                 max_recv_wr: int) -> None:
        if not 0 <= job_id <= 0xFF:
            raise VerbsError("job_id must fit 8 bits")
        if sport is not None:
            flow_label_for_sport(sport)          # validates the range
        ctx = pd.ctx
        self.ctx, self.pd, self.engine = ctx, pd, ctx.engine
        self.send_cq, self.recv_cq = send_cq, recv_cq
        v = ctx._v
        cap = v.qp.QPCap(max_send_wr=max_send_wr, max_recv_wr=max_recv_wr, max_send_sge=1,
                         max_recv_sge=1)
        init = v.qp.QPInitAttr(qp_type=IBV_QPT_RC, scq=send_cq._cq, rcq=recv_cq._cq, cap=cap,
                               sq_sig_all=0)
        self._qp = v.qp.QP(pd._pd, init)
        self.qp_num: int = self._qp.qp_num
        self.state = QPState.RESET
        self.dest_ip = "0.0.0.0"
        self.dest_qp_num = 0
        self.dest_port = ROCE_UDP_PORT
        self.path_mtu = 1024
        self.timeout_ns: int | None = ctx.timeout_ns
        self.retry_cnt = 7
        self.rnr_retry = 7
        self.requested_sport = sport
        self.job_id = job_id                 # recorded: rxe sends BTH byte 4 as 0
        self.max_inflight = 0                # recorded: rxe keeps its own window
        self.rate_controller, self.pacer = rate_controller, pacer
        self._rq_psn = 0
        self._sq_psn = 0
        self._flow_label = 0
        self._has_av = False
        self._outstanding = 0
        self._dscp = ctx.traffic_class >> 2
        self.stats: dict[str, int] = dict.fromkeys((
            "send_wrs", "recv_wrs", "retags", "retags_ignored", "wr_tags_ignored"), 0)
        ctx._qps[self.qp_num] = self

    # -- tags --------------------------------------------------------------------
    @property
    def sport(self) -> int:
        """The UDP source port rxe uses for this QP now."""
        return rxe_sport(self.qp_num, self.dest_qp_num if self._has_av else None,
                         self._flow_label, flow_label_rule=self.ctx.flow_label_rule)

    @property
    def dscp(self) -> int:
        """The DSCP of the requests this QP sends. rxe puts its context's
        traffic class in every packet; another DSCP, at any time, is written
        on the host's egress by the DCQCN shim (``ctx.on_qp_dscp``,
        hosts.roce.rxe_dcqcn.RxeDcqcnShim.set_dscp), whose QP filter does it."""
        return self._dscp

    @dscp.setter
    def dscp(self, value: int) -> None:
        if not 0 <= value <= 63:
            raise VerbsError(f"QP {self.qp_num:#x}: DSCP {value} out of range (6 bits)")
        if value == self._dscp:
            return
        native = self.ctx.traffic_class >> 2
        hook = self.ctx.on_qp_dscp
        if hook is None:
            raise VerbsError(f"QP {self.qp_num:#x}: rxe sends every packet with its context's "
                             f"traffic class (DSCP {native}); DSCP {value} needs the DCQCN "
                             "shim's egress filter (hosts.roce.rxe_dcqcn)")
        hook(self.qp_num, None if value == native else value)
        self._dscp = value

    @property
    def outstanding(self) -> int:
        """Signaled send WRs posted and not yet polled as completed."""
        return self._outstanding

    @property
    def sq_psn(self) -> int:
        return self._query().sq_psn

    @property
    def epsn(self) -> int:
        return self._query().rq_psn

    def _query(self):
        attr, _init = self._qp.query(IBV_QP_MASK["STATE"] | IBV_QP_MASK["SQ_PSN"]
                                     | IBV_QP_MASK["RQ_PSN"])
        return attr

    def _av(self) -> dict[str, Any]:
        c = self.ctx
        return av_plan(self.dest_ip, c.device.gid_index, self._flow_label, c.traffic_class,
                       c.hop_limit, c.device.port)

    def _modify(self, plan: QPPlan) -> None:
        try:
            self._qp.modify(make_qp_attr(plan), plan.mask_bits)
        except Exception as ex:   # PyverbsRDMAError: the kernel refused
            raise VerbsError(f"QP {self.qp_num:#x}: ibv_modify_qp {plan.mask} failed: {ex}") \
                from ex

    def _retag(self, sport: int) -> None:
        if sport == self.sport:
            return
        mode = self.ctx.retag
        if mode == "error":
            raise VerbsError("rxe fixes a QP's source port at RTR (retag='error')")
        if mode == "ignore" or not self._has_av or self.state != QPState.RTS:
            self.requested_sport = sport         # "sqd" on an RTR QP: applied at RTS
            if mode == "ignore" and self._has_av:
                self.stats["retags_ignored"] += 1
            return
        if not self.ctx.flow_label_rule:
            raise VerbsError("this kernel derives the rxe source port from the QPN only "
                             "(< 5.17): the port cannot be changed")
        self._drain_to_sqd()
        self._flow_label = flow_label_for_sport(sport)
        self.requested_sport = sport
        sqd = IBV_QPS_SQD
        self._modify(QPPlan({"qp_state": sqd}, ("STATE", "AV"), self._av()))
        self._modify(QPPlan({"qp_state": IBV_QPS[QPState.RTS]}, ("STATE",)))
        self.stats["retags"] += 1

    def _drain_to_sqd(self, timeout: float = 10.0) -> None:
        self._modify(QPPlan({"qp_state": IBV_QPS_SQD}, ("STATE",)))
        end = time.monotonic() + timeout
        while True:
            attr, _ = self._qp.query(IBV_QP_MASK["STATE"])
            if not attr.sq_draining:
                return
            if time.monotonic() > end:
                raise VerbsError(f"QP {self.qp_num:#x}: send queue did not drain")
            self.engine.progress()
            time.sleep(50e-6)

    # -- state -------------------------------------------------------------------
    def modify(self, attr: QPAttr | None = None, **kw: Unpack[QPAttrs]) -> None:
        """As verbs.QP.modify. Before RTR anything may change; on an RTR/RTS QP only
        ``sport`` (see ``retag``), ``job_id`` and ``max_inflight`` (recorded)."""
        cur = self.state
        vals, new = modify_request(cur, attr, kw)
        if "job_id" in vals and not 0 <= vals["job_id"] <= 0xFF:
            raise VerbsError("job_id must fit 8 bits")
        if vals.get("dest_port", ROCE_UDP_PORT) != ROCE_UDP_PORT:
            raise VerbsError("rxe always sends to UDP port 4791")
        if "path_mtu" in vals and vals["path_mtu"] not in PATH_MTUS:
            raise VerbsError(f"path_mtu must be one of {PATH_MTUS}")
        if "sport" in vals:
            flow_label_for_sport(vals["sport"])
        connected = cur in (QPState.RTR, QPState.RTS) and new not in (QPState.RESET,
                                                                       QPState.ERR)
        fixed = {"dest_ip", "dest_qp_num", "rq_psn", "path_mtu"} if connected else set()
        if cur == QPState.RTS and new != QPState.RESET:
            fixed |= {"sq_psn", "timeout_ns", "retry_cnt", "rnr_retry"}
        bad = sorted(fixed & vals.keys())
        if bad:
            raise VerbsError(f"rxe cannot change {', '.join(bad)} in state {cur.name}")
        for k, v in vals.items():
            if k in _KEPT_AS_GIVEN:
                setattr(self, k, v)
        if "rq_psn" in vals:
            self._rq_psn = vals["rq_psn"]
        if "sq_psn" in vals:
            self._sq_psn = vals["sq_psn"]
        if "sport" in vals:
            if connected:
                self._retag(vals["sport"])
            else:
                self.requested_sport = vals["sport"]
        if new is None:
            return
        if new in (QPState.RESET, QPState.ERR):
            self._modify(QPPlan({"qp_state": IBV_QPS[new]}, ("STATE",)))
            if new == QPState.RESET:
                self._has_av = False
                self._outstanding = 0
                if self.ctx.on_qp_reset is not None:
                    self.ctx.on_qp_reset(self.qp_num)
        elif new == QPState.INIT and cur == QPState.RESET:
            self._modify(init_plan(self.ctx.device.port))
        elif new == QPState.RTR:
            if self.dest_ip == "0.0.0.0":
                raise VerbsError("INIT -> RTR needs dest_ip and dest_qp_num")
            rs = self.requested_sport
            self._flow_label = flow_label_for_sport(rs) if rs is not None else 0
            c = self.ctx
            self._modify(rtr_plan(dest_ip=self.dest_ip, dest_qp_num=self.dest_qp_num,
                                  rq_psn=self._rq_psn, path_mtu=self.path_mtu,
                                  sgid_index=c.device.gid_index, flow_label=self._flow_label,
                                  traffic_class=c.traffic_class, hop_limit=c.hop_limit,
                                  port_num=c.device.port))
            self._has_av = True
        elif new == QPState.RTS and cur == QPState.RTR:
            self._modify(rts_plan(sq_psn=self._sq_psn, timeout_ns=self.timeout_ns,
                                  retry_cnt=self.retry_cnt, rnr_retry=self.rnr_retry))
            self.state = new
            rs = self.requested_sport
            if self.ctx.retag == "sqd" and rs is not None and rs != self.sport:
                self._retag(rs)
        self.state = new

    def destroy(self) -> None:
        if self.ctx._qps.pop(self.qp_num, None) is not None:
            self._qp.close()

    # -- posting -----------------------------------------------------------------
    def post_send(self, wr: SendWR, delay_ns: int = 0) -> None:
        if delay_ns:
            raise VerbsError("rdma_rxe posts a work request at once: no delay_ns (a host "
                             "library's per-step overhead is modelled by the udp provider)")
        if self.state in (QPState.RESET, QPState.INIT, QPState.RTR):
            raise VerbsError(f"post_send in state {self.state.name}")
        op = WROpcode(wr.opcode)
        if op in (WROpcode.RDMA_WRITE_WITH_IMM, WROpcode.SEND_WITH_IMM) and wr.imm_data is None:
            raise VerbsError("*_WITH_IMM needs imm_data")
        if wr.job_id is not None and not 0 <= wr.job_id <= 0xFF:
            raise VerbsError("SendWR.job_id must fit 8 bits")
        if wr.sport is not None and wr.sport != self.sport and self.state == QPState.RTS:
            flow_label_for_sport(wr.sport)
            if self.ctx.retag == "ignore":
                self.stats["wr_tags_ignored"] += 1
            else:
                self._retag(wr.sport)
        swr = make_send_wr(wr)
        try:
            self._qp.post_send(swr)
        except Exception as ex:
            raise VerbsError(f"QP {self.qp_num:#x}: ibv_post_send failed: {ex}") from ex
        self.stats["send_wrs"] += 1
        if wr.signaled:
            self._outstanding += 1

    def post_recv(self, wr: RecvWR) -> None:
        if self.state == QPState.RESET:
            raise VerbsError("post_recv in state RESET")
        try:
            self._qp.post_recv(make_recv_wr(wr))
        except Exception as ex:
            raise VerbsError(f"QP {self.qp_num:#x}: ibv_post_recv failed: {ex}") from ex
        self.stats["recv_wrs"] += 1


class RxeEngine:
    """Progress for an rxe context: the kernel moves the data, this polls the CQs."""

    def __init__(self, ctx: RxeContext) -> None:
        self.ctx = ctx
        self.now_ns = time.monotonic_ns
        self.stats: dict[str, int] = {}
        # no paced send of its own to meet (hosts.roce.verbs.Engine.exact_at):
        # the kernel sends, tc paces
        self.exact_at: int | None = None

    def progress(self) -> None:
        for cq in self.ctx._cqs:
            cq._fill()

    def next_deadline(self) -> int | None:
        return None

    def run(self, until: Callable[[], bool] | None = None, timeout: float | None = None) -> bool:
        """Poll until ``until()`` holds (True) or ``timeout`` s pass (False); without
        either, one pass. Spins for ``ctx.spin_us`` after progress, then sleeps in
        growing steps up to 1 ms."""
        end = None if timeout is None else time.monotonic_ns() + int(timeout * 1e9)
        idle_since = time.monotonic_ns()
        nap = 10e-6
        while True:
            self.progress()
            if until is not None and until():
                return True
            if until is None and end is None:
                return False
            now = time.monotonic_ns()
            if end is not None and now >= end:
                return False
            if now - idle_since > self.ctx.spin_us * 1000:
                time.sleep(nap)
                nap = min(nap * 2, 1e-3)

    def summary(self) -> dict[str, int]:
        """The device's hw_counters plus the sum of all QPs' counters."""
        out = read_hw_counters(self.ctx.device, self.ctx.sysfs_root)
        for qp in self.ctx._qps.values():
            for k, v in qp.stats.items():
                out[k] = out.get(k, 0) + v
        return out

    def timers(self) -> dict[str, float | int]:
        return {}


class RxeContext:
    """An rxe device opened through pyverbs.

    ``local_ip``/``netdev``/``device`` select the device and GID (see
    ``find_rxe_device``). ``traffic_class`` goes into every packet's IP TOS (ECT(0)
    by default, so switches can mark CE). ``retag``: "ignore", "error" or "sqd"
    (module docstring). ``sport_rule``: "auto" (from the kernel version),
    "flow_label" (>= 5.17) or "qpn_hash". ``timeout_ns``: the local ACK timeout of
    its QPs unless a modify sets one (None: exponent 14, 67 ms). ``on_qp_reset``,
    if set, is called with a QP's number whenever it is reset (its PSNs will
    start over: a Symphony ring's lanes, per step); ``on_qp_dscp`` whenever a
    QP's ``dscp`` changes (see RxeQP.dscp)."""

    def __init__(self, local_ip: str | None = None, *, netdev: str | None = None,
                 device: str | None = None, scale: Scale | None = None,
                 traffic_class: int = ECN_ECT0, hop_limit: int = 64, retag: str = "ignore",
                 sport_rule: str = "auto", spin_us: float = 200.0,
                 sysfs_root: str = SYSFS_INFINIBAND, timeout_ns: int | None = None) -> None:
        if retag not in ("ignore", "error", "sqd"):
            raise ValueError("retag must be 'ignore', 'error' or 'sqd'")
        if sport_rule not in ("auto", "flow_label", "qpn_hash"):
            raise ValueError("sport_rule must be 'auto', 'flow_label' or 'qpn_hash'")
        e, addr, cq, dev, mr, pd, qp, wr = _import_pyverbs()
        self._v: Any = SimpleNamespace(enums=e, addr=addr, cq=cq, device=dev, mr=mr, pd=pd,
                                       qp=qp, wr=wr)
        self.device = find_rxe_device(local_ip, netdev, device=device, sysfs_root=sysfs_root)
        self.sysfs_root = sysfs_root
        self.scale = scale or Scale()
        self.traffic_class = traffic_class
        self.hop_limit = hop_limit
        self.retag = retag
        self.spin_us = spin_us
        self.timeout_ns = timeout_ns
        self.flow_label_rule = (kernel_has_flow_label_sport() if sport_rule == "auto"
                                else sport_rule == "flow_label")
        self.provider = RxeProvider(self.device)
        try:
            self._verbs = dev.Context(name=self.device.name)
        except Exception as ex:
            raise RxeUnavailable(f"cannot open {self.device.name}: {ex}") from ex
        self._max_cqe = int(self._verbs.query_device().max_cqe)
        self._qps: dict[int, RxeQP] = {}
        self._cqs: list[RxeCQ] = []
        self.engine = RxeEngine(self)
        self.on_qp_reset: Callable[[int], None] | None = None
        # Set by whoever rewrites a QP's DSCP on the wire (the DCQCN shim):
        # called with the QP's number and the DSCP (None: the context's own).
        self.on_qp_dscp: Callable[[int, int | None], None] | None = None

    @property
    def local_ip(self) -> str:
        return self.device.ipv4

    def alloc_pd(self) -> RxePD:
        return RxePD(self)

    def create_cq(self, depth: int = 1 << 16) -> RxeCQ:
        cq = RxeCQ(self, max(1, min(depth, self._max_cqe)))
        self._cqs.append(cq)
        return cq

    def close(self) -> None:
        for q in list(self._qps.values()):
            q.destroy()
        self._verbs.close()
        self.provider.close()
