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

The context finds its device and GID through hosts.roce.rxe.device, moves its QPs
through the plans of hosts.roce.rxe.qp_plans and builds pyverbs objects with
hosts.roce.rxe.pyverbs_objects.

Retagging. A QP's UDP source port is fixed at RTR by the kernel's rules
(hosts.roce.rxe.sport): on kernels >= 5.17 it is the QP's requested ``sport``.
It cannot change per packet or per WR: the address vector may only be modified
in SQD. What ``qp.modify(sport=...)`` on an RTS QP (and a ``SendWR.sport``
different from the QP's) does is the context's ``retag`` setting:

- ``"ignore"`` (default): recorded in ``qp.requested_sport`` and counted
  (``qp.stats``), the wire keeps the QP's port; CommLib runs unchanged.
- ``"error"``: VerbsError.
- ``"sqd"``: RTS -> SQD, wait until the send queue has drained (every posted WR
  completed), SQD -> SQD with the new flow label, SQD -> RTS. Needs rule 2 (kernel
  >= 5.17) and costs a drain per retag - the same wait CommLib makes before a step.

``qp.sport`` is the port the kernel uses (by the rules above; ``sport_rule``
"auto" decides rule 2 from the running kernel's version). BTH byte 4 (the job id)
is always 0 from rxe: ``job_id`` is recorded, not sent.

rxe ignores ECN: it sends the traffic class's ECN bits (ECT(0) by default here) on
every packet, ACKs included, but a CE mark makes no CNP and there is no DCQCN, so
marking slows nothing (the DCQCN shim, hosts.roce.rxe.dcqcn_shim, does what a
NIC would).
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable
from types import SimpleNamespace
from typing import TYPE_CHECKING, Any

from hosts.roce.constants import ECN_ECT0, PATH_MTUS, ROCE_UDP_PORT
from hosts.roce.rxe import device as rxe_device
from hosts.roce.rxe.device import (
    SYSFS_INFINIBAND,
    RxeDevice,
    RxeUnavailable,
    find_rxe_device,
    read_hw_counters,
)
from hosts.roce.rxe.pyverbs_objects import (
    buffer_address,
    make_qp_attr,
    make_recv_wr,
    make_send_wr,
    wc_from_verbs,
)
from hosts.roce.rxe.qp_plans import (
    IBV_QP_MASK,
    IBV_QPS,
    IBV_QPS_SQD,
    IBV_QPT_RC,
    QPPlan,
    av_plan,
    ibv_access,
    init_plan,
    rtr_plan,
    rts_plan,
)
from hosts.roce.rxe.sport import flow_label_for_sport, kernel_has_flow_label_sport, rxe_sport
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
    WROpcode,
    modify_request,
)

if TYPE_CHECKING:
    from typing import Unpack


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
    """An RC QP on the rxe device; see hosts.roce.rxe.sport for its port and the
    module docstring for retags."""

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
        hosts.roce.rxe.dcqcn_shim.RxeDcqcnShim.set_dscp), whose QP filter does it."""
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
                             "shim's egress filter (hosts.roce.rxe.dcqcn_shim)")
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
        e, addr, cq, dev, mr, pd, qp, wr = rxe_device.import_pyverbs()
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
