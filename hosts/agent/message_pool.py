"""A flow whose messages arrive on their own schedule (``FlowSpec.arrivals_s``)
over several long-lived connections (_MessagePool); how it posts and what it
logs is in the class's docstring."""

from __future__ import annotations

import zlib
from typing import Any, TypedDict

from hosts.agent.errors import AgentError
from hosts.agent.flow import _EndsOnce, _FlowEnd, _set_qp_dscp
from hosts.agent.patterns import flow_buffer, register_flow_buffer
from hosts.agent.rates import LoggedRate, make_rate_controller
from hosts.agent.work import AgentServices
from hosts.agent_spec import FlowSpec
from hosts.roce.constants import ROCE_UDP_PORT, tag_sport
from hosts.roce.pacing import Pacer
from hosts.roce.verbs import CQ, MR, QP, QPState, RecvWR, SendWR, WCOpcode, WCStatus, WROpcode

# How often a connection pool (FlowSpec.arrivals_s) looks for retransmissions
# and CNPs sent, to log them.
POOL_COUNTERS_NS = 5_000_000


class PoolEndInfo(TypedDict):
    """What a message pool's other end needs to connect to this one (JSON):
    its QPs (one per connection) and their first PSNs, its buffer, and what
    it must agree with."""

    ip: str
    port: int
    qpns: list[int]
    psns: list[int]
    addr: int
    rkey: int
    total_bytes: int
    role: str


class _MessagePool(_EndsOnce):
    """A flow whose messages arrive on their own schedule (``FlowSpec.arrivals_s``)
    over ``qps`` long-lived connections, as an application reuses its RDMA
    connections for short requests instead of connecting once per request.

    The connections share one PD and one buffer: message i always occupies
    the same bytes at both ends (its ``offsets[i]`` on, ``msg_sizes`` or
    ``msg_bytes`` long) and carries i in its
    immediate data, so the receiver needs no map of which connection took it.
    Each connection has its own DCQCN rate controller and pacer (a NIC's per-QP
    rate limiter): a message inherits its connection's rate state. The sender
    posts message i at its arrival on the free connection idle longest (its
    DCQCN rate has had the longest to recover), or, if every connection is
    busy, FIFO when one frees (``waited``). Events: ``completion`` per message
    (index, ``qp``: the connection), ``rate`` / ``rx`` samples summed over the
    connections, at the end a ``pacer_report`` (sender) or ``qp_report``
    (receiver) per connection, named ``<flow>.q<k>``, and ``flow_end`` (its
    ``qp`` empty: the counters are in the per-connection reports)."""

    def __init__(self, agent: AgentServices, spec: FlowSpec) -> None:
        self._end: _FlowEnd | None = None     # flow_end, logged after the phase
        self.agent = agent
        self.spec = spec
        self.name = spec.flow
        self.sender = spec.role == "sender"
        ctx = agent.ctx
        self.pd = ctx.alloc_pd()
        self.cq: CQ = ctx.create_cq()
        self.rcs: list[LoggedRate] = []
        self.pacers: list[Pacer | None] = []
        self.qps: list[QP] = []
        self.buf = flow_buffer(spec)
        self.mr: MR = register_flow_buffer(self.pd, spec, self.buf)
        for _k in range(spec.qps):
            if self.sender:
                rc = LoggedRate(make_rate_controller(agent.spec, agent.scale, agent.log,
                                                     self.name), agent.log, self.name)
                pacer = agent.make_pacer()
                qp = self.pd.create_qp(self.cq, self.cq, sport=tag_sport(spec.step),
                                       job_id=spec.job_id, rate_controller=rc, pacer=pacer)
                _set_qp_dscp(qp, spec.dscp, self.name)
                self.rcs.append(rc)
                self.pacers.append(pacer)
            else:
                qp = self.pd.create_qp(self.cq, self.cq, sport=tag_sport(spec.step),
                                       job_id=spec.job_id)
            self.qps.append(qp)
        self.index_of = {qp.qp_num: k for k, qp in enumerate(self.qps)}
        self.completed_on = [0] * spec.qps       # messages completed per connection
        self.sizes_on: list[list[int]] = [[] for _ in range(spec.qps)]   # and their sizes
        self.offsets = [0] * spec.count
        for i in range(1, spec.count):
            self.offsets[i] = self.offsets[i - 1] + spec.message_bytes(i - 1)
        self.delivered = 0
        self.psns = [zlib.crc32(f"{spec.flow}/{spec.role}/{spec.seed}/{k}".encode()) & 0xFFFFFF
                     for k in range(spec.qps)]
        # the peer's buffer (connect)
        self.peer_addr = 0
        self.peer_rkey = 0
        self.completed = 0
        self.end_count = spec.count
        self.done = False
        self.t_start = 0
        self.arrive_ns: list[int] = []
        self.next_msg = 0                    # the next message to post
        self.busy: dict[int, int] = {}       # connection -> its outstanding message
        self.idle_since = [0] * spec.qps
        self.received: set[int] = set()
        self.waited = 0                      # messages that found every connection busy
        self.wait_max_ns = 0
        self.post_late_max_ns = 0            # a free connection, but the agent posted late
        self._waited_to = 0                  # messages below this index waited
        self._next_counters_ns = 0
        self._seen = {"cnps_sent": 0, "retransmits": 0, "rto": 0, "naks_rcvd": 0}

    def info(self) -> PoolEndInfo:
        return {"ip": self.agent.spec.ip, "port": ROCE_UDP_PORT,
                "qpns": [qp.qp_num for qp in self.qps], "psns": self.psns,
                "addr": self.mr.addr, "rkey": self.mr.rkey,
                "total_bytes": self.spec.total_bytes, "role": self.spec.role}

    def connect(self, peer: PoolEndInfo) -> None:
        if (int(peer["total_bytes"]) != self.spec.total_bytes or peer["role"] == self.spec.role
                or len(peer.get("qpns", ())) != len(self.qps)):
            raise AgentError(f"flow {self.name}: the peer's spec does not match (peer "
                             f"{peer['role']} of {peer['total_bytes']} bytes over "
                             f"{len(peer.get('qpns', ()))} connections)")
        if peer["ip"] != self.spec.peer_ip:
            raise AgentError(f"flow {self.name}: peer is {peer['ip']}, spec says {self.spec.peer_ip}")
        self.peer_addr, self.peer_rkey = int(peer["addr"]), int(peer["rkey"])
        mtu = self.agent.spec.transport.path_mtu
        for k, qp in enumerate(self.qps):
            qp.modify(state=QPState.INIT)
            qp.modify(state=QPState.RTR, dest_ip=peer["ip"], dest_qp_num=int(peer["qpns"][k]),
                      dest_port=int(peer["port"]), rq_psn=int(peer["psns"][k]), path_mtu=mtu)
            qp.modify(state=QPState.RTS, sq_psn=self.psns[k])
            if not self.sender:
                # any message may land on any connection
                for i in range(self.spec.count):
                    qp.post_recv(RecvWR(wr_id=i))

    def start(self, t: int) -> None:
        self.t_start = t
        self.idle_since = [t] * len(self.qps)
        self.arrive_ns = [t + int(a * 1e9) for a in self.spec.arrivals_s]
        self.agent.log.emit("flow_start", t_ns=t, flow=self.name, role=self.spec.role,
                            qpn=self.qps[0].qp_num, qpns=[qp.qp_num for qp in self.qps],
                            peer_ip=self.spec.peer_ip, msg_bytes=self.spec.msg_bytes,
                            count=self.spec.count, sport=self.qps[0].sport,
                            job_id=self.spec.job_id, psn=self.psns[0])
        if self.sender:
            self._post_due(t)

    def _post_due(self, now: int) -> None:
        s = self.spec
        while self.next_msg < s.count and self.arrive_ns[self.next_msg] <= now:
            i = self.next_msg
            free = [k for k in range(len(self.qps)) if k not in self.busy]
            if not free:
                # every message that has arrived by now waits (counted once)
                j = max(i, self._waited_to)
                while j < s.count and self.arrive_ns[j] <= now:
                    j += 1
                self.waited += j - max(i, self._waited_to)
                self._waited_to = j
                return
            k = min(free, key=lambda j: self.idle_since[j])
            lag = now - self.arrive_ns[i]
            if i < self._waited_to:
                self.wait_max_ns = max(self.wait_max_ns, lag)
            else:
                self.post_late_max_ns = max(self.post_late_max_ns, lag)
            self.qps[k].post_send(SendWR(
                wr_id=i, opcode=WROpcode.RDMA_WRITE_WITH_IMM,
                sge=self.mr.sge(self.offsets[i], s.message_bytes(i)),
                remote_addr=self.peer_addr + self.offsets[i],
                rkey=self.peer_rkey, imm_data=i))
            self.busy[k] = i
            self.next_msg += 1

    def next_wake(self, now: int) -> int | None:
        """The next message's arrival, while a connection is free to take it
        (a busy pool wakes on a completion)."""
        if (not self.sender or self.done or self.next_msg >= self.spec.count
                or len(self.busy) == len(self.qps)):
            return None
        return max(now, self.arrive_ns[self.next_msg])

    def step(self, now: int) -> None:
        if self.done:
            return
        if len(self.cq):
            for wc in self.cq.poll(len(self.cq)):
                k = self.index_of.get(wc.qp_num, -1)
                if wc.status != WCStatus.SUCCESS:
                    raise AgentError(f"flow {self.name}: {self.spec.role} work request "
                                     f"{wc.wr_id} on connection {k} failed: {wc.status.name}")
                if self.sender and wc.opcode == WCOpcode.RDMA_WRITE:
                    self.busy.pop(k, None)
                    self.idle_since[k] = wc.timestamp_ns
                    index = wc.wr_id
                elif not self.sender and wc.opcode == WCOpcode.RECV_RDMA_WITH_IMM:
                    index = wc.imm_data or 0
                    if index in self.received or index >= self.spec.count:
                        raise AgentError(f"flow {self.name}: message {index} arrived twice "
                                         "or out of range")
                    self.received.add(index)
                else:
                    continue
                self.completed += 1
                self.completed_on[k] += 1
                self.sizes_on[k].append(self.spec.message_bytes(index))
                self.delivered += self.spec.message_bytes(index)
                self.agent.log.emit("completion", t_ns=wc.timestamp_ns, flow=self.name,
                                    role=self.spec.role, index=index, qp=k, bytes=wc.byte_len)
        if now >= self._next_counters_ns or self.completed >= self.end_count:
            # every few ms, not every pass: summing the connections' counters
            # on each pass of the per-packet loop costs the pacers' precision
            self._next_counters_ns = now + POOL_COUNTERS_NS
            self._counters(now)
        if self.completed >= self.end_count:
            self._finish(now)
        elif self.sender:
            self._post_due(now)

    def _stats(self, k: int) -> dict[str, int]:
        """Connection ``k``'s counters (an rxe QP's from its completed messages
        and the shim: hosts.agent.agent.Agent.rxe_qp_stats)."""
        qp = self.qps[k]
        if self.agent.shim is None:
            return qp.stats
        return self.agent.rxe_qp_stats(qp, self.spec, self.completed_on[k],
                                       sizes=self.sizes_on[k] if self.spec.msg_sizes else None)

    def _sum(self, key: str) -> int:
        return sum(int(self._stats(k).get(key, 0)) for k in range(len(self.qps)))

    def _counters(self, now: int) -> None:
        seen = self._seen
        if self.sender:
            d = {k: self._sum(k) - seen[k] for k in ("retransmits", "rto", "naks_rcvd")}
            if any(d.values()):
                self.agent.log.emit("retransmit", t_ns=now, flow=self.name,
                                    packets=d["retransmits"], rto=d["rto"], naks=d["naks_rcvd"])
                for k, v in d.items():
                    seen[k] += v
        else:
            n = self._sum("cnps_sent") - seen["cnps_sent"]
            if n:
                self.agent.log.emit("cnp_tx", t_ns=now, flow=self.name, count=n)
                seen["cnps_sent"] += n

    def sample(self, now: int) -> None:
        if self.sender:
            busy = [self.rcs[k].rate_bps for k in self.busy]
            # the slowest busy connection's DCQCN rate, or what an idle pool offers
            rc = min(busy) if busy else max(rc.rate_bps for rc in self.rcs)
            lat = [p.lateness for p in self.pacers if p is not None]
            pacing = ({"late_sends": sum(x.late_sends for x in lat),
                       "sends": sum(x.sends for x in lat),
                       "late_max_s": max(x.max_s for x in lat)} if lat else {})
            self.agent.log.emit("rate", t_ns=now, flow=self.name, rc_bps=rc,
                                tx_bytes=self._sum("tx_bytes"), tx_pkts=self._sum("tx_pkts"),
                                retransmits=self._sum("retransmits"), completed=self.completed,
                                busy=len(self.busy), dscp=self.spec.dscp, **pacing)
        else:
            self.agent.log.emit("rx", t_ns=now, flow=self.name, rx_bytes=self._sum("rx_bytes"),
                                rx_pkts=self._sum("rx_pkts"), ce_pkts=self._sum("ce_pkts"),
                                cnps_sent=self._sum("cnps_sent"), completed=self.completed)

    def _finish(self, now: int) -> None:
        self.done = True
        self.sample(now)
        log = self.agent.log
        for k in range(len(self.qps)):
            if self.sender:
                pacer = self.pacers[k]
                state = getattr(self.rcs[k].inner, "state", None)
                log.emit("pacer_report", t_ns=now, flow=f"{self.name}.q{k}", qp=dict(self._stats(k)),
                         pacer=pacer.report() if pacer is not None else None,
                         dcqcn=state() if callable(state) else None, cnps_rcvd=self.rcs[k].cnps)
            else:
                log.emit("qp_report", t_ns=now, flow=f"{self.name}.q{k}", qp=dict(self._stats(k)))
        extra: dict[str, Any] = {}
        if self.sender:
            extra["pool"] = {"qps": len(self.qps), "waited": self.waited,
                             "wait_max_s": self.wait_max_ns / 1e9,
                             "post_late_max_s": self.post_late_max_ns / 1e9}
        delivered = self.delivered
        self._end = _FlowEnd(log, self.buf, len(self.buf),
                             None if self.sender else self.spec,
                             dict(t_ns=now, flow=self.name, role=self.spec.role,
                                  bytes=delivered, count=self.completed,
                                  t_start_ns=self.t_start,
                                  duration_s=(now - self.t_start) / 1e9, qp={}, **extra),
                             phantom=self.spec.payload == "phantom")
