"""One flow end and its application loop (_Flow): a QP posting RDMA
WRITE_WITH_IMM messages under DCQCN and a token-bucket pacer, or the QP
they land at; and a finished flow's ``flow_end`` record (_FlowEnd), which
message pools use too.

Events:

- ``flow_start`` / ``flow_end`` (per flow; flow_end has the QP counters, the
  pacer's lateness report, the DCQCN state, sha256 of the buffer and, for
  receivers, ``bytes_ok``: the buffer equals what the sender sent; a phantom
  payload's has ``payload: phantom`` in their place)
- ``completion`` (one per message: flow, role, index, bytes)
- ``rate`` (sender, every ``sample_interval_us``: rc_bps, rt_bps, alpha,
  tx_bytes, retransmits, pacing lateness so far), ``rx`` (receiver, same
  period: rx_bytes = payload delivered in order, ce_pkts, cnps_sent)
- ``priority`` (a ReFlex flexible sender switched priority: low, budgets, fair
  share); its ``rate`` samples also carry dscp, low, b_alpha, b_r,
  fair_share_bps and delivered; ``partial_end`` (it ends before its last
  message)
- ``stop_after`` (a sender ends early: the flow its ``stop_after`` names was
  received in full)
- ``cnp_tx`` (receiver, CNPs sent since the last check), ``retransmit``
  (sender: packets resent, RTOs and NAKs since the last check)"""

from __future__ import annotations

import hashlib
import mmap
import zlib
from typing import Any, TypedDict

from hosts.agent.errors import AgentError
from hosts.agent.events import EventLog
from hosts.agent.patterns import flow_buffer, matches_pattern, register_flow_buffer
from hosts.agent.rates import LoggedRate, make_rate_controller
from hosts.agent.work import AgentServices
from hosts.agent_spec import FlowSpec, message_wire_bytes
from hosts.reflex import Cycle, FlexibleFlow, FlexibleParams
from hosts.roce.constants import ROCE_UDP_PORT, tag_sport
from hosts.roce.pacing import Pacer
from hosts.roce.verbs import (
    CQ,
    MR,
    QP,
    QPState,
    RecvWR,
    SendWR,
    VerbsError,
    WCOpcode,
    WCStatus,
    WROpcode,
)

# Immediate-data flag of the last message of a flow that ends early (partial
# delivery); the low bits keep the message index.
FINAL_IMM = 1 << 31
# Where receivers mark their finished flows (in the rendezvous dir), and how
# often a sender with stop_after looks.
FINISHED_DIR = "finished"
STOP_CHECK_NS = 20_000_000


class FlowEndInfo(TypedDict):
    """What a flow's other end needs to connect to this one (JSON): its QP,
    first PSN and buffer, and what it must agree with."""

    ip: str
    port: int
    qpn: int
    psn: int
    addr: int
    rkey: int
    total_bytes: int
    role: str


class _FlowEnd:
    """A finished flow's ``flow_end`` event, logged once the phase's agents
    are all done: its digest, and on the receiver the comparison with what
    was sent, hash hundreds of MB, which holds the CPU for a good part of a
    second; during the phase this agent would read no frame meanwhile (its
    ACKs and CNPs late, hosts/roce/receive_lag.py), and a real-time agent
    would starve the others. A phantom payload has neither: its event says
    ``payload: phantom``."""

    def __init__(self, log: EventLog, buf: bytearray | mmap.mmap, nbytes: int,
                 expect: FlowSpec | None, event: dict[str, Any], phantom: bool = False) -> None:
        self.events, self.buf, self.nbytes, self.expect, self.event = (
            log, buf, nbytes, expect, event)
        self.phantom = phantom

    def log(self) -> None:
        event, buf, n = self.event, self.buf, self.nbytes
        if self.phantom:
            self.events.emit("flow_end", **event, payload="phantom")
            return
        event["sha256"] = hashlib.sha256(memoryview(buf)[:n]).hexdigest()
        if self.expect is not None:
            event["bytes_ok"] = matches_pattern(buf, self.expect, n)
        self.events.emit("flow_end", **event)
        if self.expect is not None and not event["bytes_ok"]:
            raise AgentError(f"flow {event['flow']}: received bytes differ from what was sent")


class _EndsOnce:
    """What a flow and a message pool share at the end of a phase: the
    ``flow_end`` record they hold (``_end``), logged once by ``finalize``, and
    their progress, messages completed of those they will end after."""

    _end: _FlowEnd | None
    completed: int
    end_count: int

    def finalize(self) -> None:
        end, self._end = self._end, None
        if end is not None:
            end.log()

    def progress(self) -> tuple[int, int]:
        return self.completed, self.end_count


def _set_qp_dscp(qp: QP, dscp: int, flow: str) -> None:
    """The DSCP of the QP's next packets (an rxe host's shim rewrites it on the
    wire, hosts.roce.rxe.dcqcn_shim.RxeDcqcnShim.set_dscp)."""
    from hosts.roce.shaping import ShapingError

    try:
        qp.dscp = dscp
    except (ShapingError, VerbsError) as e:
        raise AgentError(f"flow {flow}: DSCP {dscp}: {e}") from e


class _Flow(_EndsOnce):
    """One QP end and its application loop."""

    def __init__(self, agent: AgentServices, spec: FlowSpec) -> None:
        self.agent = agent
        self.spec = spec
        self.name = spec.flow
        self._end: _FlowEnd | None = None     # flow_end, logged after the phase
        ctx = agent.ctx
        self.pd = ctx.alloc_pd()
        self.cq: CQ = ctx.create_cq()
        self.sender = spec.role == "sender"
        self.rc: LoggedRate | None = None
        self.pacer: Pacer | None = None
        self.buf = flow_buffer(spec)
        self.mr: MR = register_flow_buffer(self.pd, spec, self.buf)
        if self.sender:
            self.rc = LoggedRate(make_rate_controller(agent.spec, agent.scale, agent.log,
                                                      self.name), agent.log, self.name)
            self.pacer = agent.make_pacer()
            # rxe: the wire bytes of a message, for DCQCN's byte counter at completion
            self.msg_wire_bytes = message_wire_bytes(spec.msg_bytes,
                                                     agent.spec.transport.path_mtu)
            self.qp: QP = self.pd.create_qp(self.cq, self.cq, sport=tag_sport(spec.step),
                                            job_id=spec.job_id, rate_controller=self.rc,
                                            pacer=self.pacer)
        else:
            self.qp = self.pd.create_qp(self.cq, self.cq, sport=tag_sport(spec.step),
                                        job_id=spec.job_id)
        # A first PSN that differs per flow end (and is not 0), as real stacks
        # pick, unless the spec fixes the sender's (Symphony: 0).
        self.psn = zlib.crc32(f"{spec.flow}/{spec.role}/{spec.seed}".encode()) & 0xFFFFFF
        if self.sender and spec.first_psn is not None:
            self.psn = spec.first_psn
        # the peer's buffer (connect)
        self.peer_addr = 0
        self.peer_rkey = 0
        self.posted = 0
        self.completed = 0
        self.done = False
        self.t_start = 0
        self.t_end = 0
        self.next_post_ns = 0
        self._seen = {"cnps_sent": 0, "retransmits": 0, "rto": 0, "naks_rcvd": 0}
        self.flex: FlexibleFlow | None = None
        self.low_dscp = 0
        # Messages the flow ends with: count, or fewer when a flexible flow with
        # r < 1 ends early (its sender flags the last message it posts).
        self.end_count = spec.count
        self._next_flex_ns = 0
        self._next_stop_check_ns = 0
        if self.sender:
            _set_qp_dscp(self.qp, spec.dscp, self.name)

    def info(self) -> FlowEndInfo:
        return {"ip": self.agent.spec.ip, "port": ROCE_UDP_PORT, "qpn": self.qp.qp_num,
                "psn": self.psn, "addr": self.mr.addr, "rkey": self.mr.rkey,
                "total_bytes": self.spec.total_bytes, "role": self.spec.role}

    def connect(self, peer: FlowEndInfo) -> None:
        if int(peer["total_bytes"]) != self.spec.total_bytes or peer["role"] == self.spec.role:
            raise AgentError(f"flow {self.name}: the peer's spec does not match "
                             f"(peer {peer['role']} of {peer['total_bytes']} bytes)")
        if peer["ip"] != self.spec.peer_ip:
            raise AgentError(f"flow {self.name}: peer is {peer['ip']}, spec says {self.spec.peer_ip}")
        self.peer_addr, self.peer_rkey = int(peer["addr"]), int(peer["rkey"])
        qp = self.qp
        qp.modify(state=QPState.INIT)
        qp.modify(state=QPState.RTR, dest_ip=peer["ip"], dest_qp_num=int(peer["qpn"]),
                  dest_port=int(peer["port"]), rq_psn=int(peer["psn"]),
                  path_mtu=self.agent.spec.transport.path_mtu)
        qp.modify(state=QPState.RTS, sq_psn=self.psn)
        if not self.sender:
            for i in range(self.spec.count):
                qp.post_recv(RecvWR(wr_id=i))

    def start(self, t: int) -> None:
        self.t_start = t
        self.next_post_ns = t + int(self.spec.start_delay_s * 1e9)
        self.agent.log.emit("flow_start", t_ns=t, flow=self.name, role=self.spec.role,
                            qpn=self.qp.qp_num, peer_ip=self.spec.peer_ip,
                            msg_bytes=self.spec.msg_bytes, count=self.spec.count,
                            sport=self.qp.sport, job_id=self.spec.job_id, psn=self.psn)
        if self.sender:
            f = self.spec.flexible
            if f is not None:
                cycle = Cycle(t_int_ns=int(float(f["t_int_us"]) * 1000),
                              warmup=int(f.get("warmup", 1)), measure=int(f.get("measure", 1)),
                              exploit=int(f.get("exploit", 3)))
                self.flex = FlexibleFlow(FlexibleParams(alpha=float(f["alpha"]),
                                                        r=float(f.get("r", 1.0)),
                                                        size=self.spec.total_bytes),
                                         cycle, start_ns=self.next_post_ns)
                self.low_dscp = int(f.get("low_dscp", 8))
            self._post_more(t)

    def delivered_bytes(self) -> int:
        """Payload the receiver acknowledged: exact when the message size is a
        multiple of the path MTU (every packet full), else an upper bound. An
        rxe QP counts no acknowledged packets: there, the messages completed
        (each completes once all of it is acknowledged)."""
        if self.agent.shim is not None:
            return min(self.completed * self.spec.msg_bytes, self.spec.total_bytes)
        return min(self.qp.stats["acked_pkts"] * self.agent.spec.transport.path_mtu,
                   self.spec.total_bytes)

    def _flexible(self, now: int) -> None:
        """ReFlex: account the bytes delivered, pick the next packets' priority."""
        flex = self.flex
        assert flex is not None
        if now < flex.start_ns or now < self._next_flex_ns:
            return
        # A hundred updates per interval and one at every phase boundary: the
        # logic splits coarse updates at boundaries, so this loses nothing and
        # keeps the per-packet loop light.
        self._next_flex_ns = min(now + flex.cycle.t_int_ns // 100,
                                 flex.cycle.next_boundary(now))
        was_low = flex.low
        d = flex.update(now, self.delivered_bytes())
        if d.done and self.end_count == self.spec.count and self.posted < self.spec.count:
            # Partial delivery: what was delivered and what B_r gave up cover the
            # flow. The next message posted is the last, flagged for the receiver.
            self.end_count = self.posted + 1
            self.agent.log.emit("partial_end", t_ns=now, flow=self.name,
                                messages=self.end_count, skipped=flex.skipped,
                                delivered=self.delivered_bytes())
        if d.low != was_low:
            _set_qp_dscp(self.qp, self.low_dscp if d.low else self.spec.dscp, self.name)
            self.agent.log.emit("priority", t_ns=now, flow=self.name, low=d.low,
                                b_alpha=flex.b_alpha, b_r=flex.b_r,
                                fair_share_bps=flex.fair_share_bps)

    def next_wake(self, now: int) -> int | None:
        """When the flexible logic must look again (the next phase boundary)."""
        if self.flex is None or self.done:
            return None
        return max(now, self.flex.cycle.next_boundary(max(now, self.flex.start_ns - 1)))

    # -- application loop ------------------------------------------------------
    def _post_more(self, now: int) -> None:
        s = self.spec
        while (self.posted < self.end_count and self.posted - self.completed < s.window
               and now >= self.next_post_ns):
            i = self.posted
            final = i == self.end_count - 1 and self.end_count < s.count
            self.qp.post_send(SendWR(
                wr_id=i, opcode=WROpcode.RDMA_WRITE_WITH_IMM,
                sge=self.mr.sge(i * s.msg_bytes, s.msg_bytes),
                remote_addr=self.peer_addr + i * s.msg_bytes,
                rkey=self.peer_rkey, imm_data=i | (FINAL_IMM if final else 0)))
            self.posted += 1
            if s.rate_bps is not None:
                self.next_post_ns = self.t_start + int(self.posted * s.msg_bytes * 8e9 / s.rate_bps)

    def step(self, now: int) -> None:
        if self.done:
            return
        if len(self.cq):
            for wc in self.cq.poll(len(self.cq)):
                if wc.status != WCStatus.SUCCESS:
                    raise AgentError(f"flow {self.name}: {self.spec.role} work request "
                                     f"{wc.wr_id} failed: {wc.status.name} "
                                     f"(QP counters {self.qp.stats})")
                if self.sender and wc.opcode == WCOpcode.RDMA_WRITE:
                    self.completed += 1
                    # rxe: the QP's HTB class counts its bytes (hosts.roce.rxe.dcqcn_points);
                    # completed messages only when the class cannot be read
                    shim = self.agent.shim
                    if shim is not None and shim.bytes_from_completions and self.rc is not None:
                        self.rc.on_bytes_sent(self.msg_wire_bytes, wc.timestamp_ns)
                elif not self.sender and wc.opcode == WCOpcode.RECV_RDMA_WITH_IMM:
                    self.completed += 1
                    imm = wc.imm_data or 0
                    if imm & FINAL_IMM:   # the sender ended the flow early here
                        self.end_count = (imm & ~FINAL_IMM) + 1
                else:
                    continue
                self.agent.log.emit("completion", t_ns=wc.timestamp_ns, flow=self.name,
                                    role=self.spec.role, index=wc.wr_id if self.sender
                                    else (wc.imm_data or 0) & ~FINAL_IMM, bytes=wc.byte_len)
        self._counters(now)
        if self.completed >= self.end_count:
            self._finish(now)
        elif self.sender:
            if self.spec.stop_after and now >= self._next_stop_check_ns:
                self._next_stop_check_ns = now + STOP_CHECK_NS
                self._stop_if_finished(now)
            if self.flex is not None:
                self._flexible(now)
            self._post_more(now)

    def _stop_if_finished(self, now: int) -> None:
        """End after the next message once the flow ``stop_after`` names has
        been received in full (its receiver marks it in the rendezvous dir)."""
        s = self.spec
        if (self.end_count == s.count and self.posted < s.count
                and (self.agent.rdv / FINISHED_DIR / s.stop_after).exists()):
            self.end_count = self.posted + 1
            self.agent.log.emit("stop_after", t_ns=now, flow=self.name, after=s.stop_after,
                                messages=self.end_count)

    def stats(self, final: bool = False) -> dict[str, int]:
        """The QP's counters: the udp provider's own; on rxe, what the agent and
        the shim count (``final``: also the device's counters over the phase)."""
        if self.agent.shim is None:
            return self.qp.stats
        return self.agent.rxe_stats(self, final)

    def _counters(self, now: int) -> None:
        st = self.stats()
        seen = self._seen
        if self.sender:
            d = {k: st[k] - seen[k] for k in ("retransmits", "rto", "naks_rcvd")}
            if any(d.values()):
                self.agent.log.emit("retransmit", t_ns=now, flow=self.name, packets=d["retransmits"],
                                    rto=d["rto"], naks=d["naks_rcvd"])
                for k, v in d.items():
                    seen[k] += v
        else:
            n = st["cnps_sent"] - seen["cnps_sent"]
            if n:
                self.agent.log.emit("cnp_tx", t_ns=now, flow=self.name, count=n)
                seen["cnps_sent"] += n

    def sample(self, now: int) -> None:
        st = self.stats()
        if self.sender:
            assert self.rc is not None
            inner = self.rc.inner
            pacing: dict[str, Any] = {}
            if self.pacer is not None:
                lat = self.pacer.lateness
                pacing = {"late_sends": lat.late_sends, "sends": lat.sends,
                          "late_max_s": lat.max_s}
            self.agent.log.emit(
                "rate", t_ns=now, flow=self.name, rc_bps=self.rc.rate_bps,
                rt_bps=getattr(inner, "rt", self.rc.rate_bps), alpha=getattr(inner, "alpha", None),
                tx_bytes=st["tx_bytes"], tx_pkts=st["tx_pkts"], retransmits=st["retransmits"],
                completed=self.completed, dscp=getattr(self.qp, "dscp", 0), **pacing,
                **self._flex_state())
        else:
            self.agent.log.emit("rx", t_ns=now, flow=self.name, rx_bytes=st["rx_bytes"],
                                rx_pkts=st["rx_pkts"], ce_pkts=st["ce_pkts"],
                                cnps_sent=st["cnps_sent"], completed=self.completed)

    def _flex_state(self) -> dict[str, Any]:
        f = self.flex
        if f is None:
            return {}
        return {"low": f.low, "b_alpha": f.b_alpha, "b_r": f.b_r,
                "fair_share_bps": f.fair_share_bps, "delivered": self.delivered_bytes()}

    def _finish(self, now: int) -> None:
        self.done = True
        self.t_end = now
        self.sample(now)
        extra: dict[str, Any] = {}
        # A flow that ended early compares the messages it delivered.
        delivered = self.completed * self.spec.msg_bytes
        if self.sender:
            assert self.rc is not None
            if self.pacer is not None:     # rxe hosts have none: tc HTB paces
                extra["pacer"] = self.pacer.report()
            state = getattr(self.rc.inner, "state", None)
            extra["dcqcn"] = state() if callable(state) else None
            extra["cnps_rcvd"] = self.rc.cnps
            if self.flex is not None:
                extra["flexible"] = {"low_s": self.flex.low_ns / 1e9, **self._flex_state()}
        if self.end_count < self.spec.count:
            extra["partial"] = {"messages": self.end_count, "of": self.spec.count,
                                "delivered_fraction": self.end_count / self.spec.count}
        self._end = _FlowEnd(self.agent.log, self.buf, delivered,
                             None if self.sender else self.spec,
                             dict(t_ns=now, flow=self.name, role=self.spec.role,
                                  bytes=delivered, count=self.completed,
                                  t_start_ns=self.t_start,
                                  duration_s=(now - self.t_start) / 1e9,
                                  qp=dict(self.stats(final=True)), **extra),
                             phantom=self.spec.payload == "phantom")
        if not self.sender and self.agent.spec.rendezvous_dir:
            d = self.agent.rdv / FINISHED_DIR   # for the senders that stop after this flow
            d.mkdir(parents=True, exist_ok=True)
            (d / self.name).write_text(str(now))
