"""Agent: one job spec on one host, and the done barrier it ends with.

The agent makes the flows' and the collective's QPs and buffers, exchanges
connection data, starts at the phase's common instant, polls its engine and
its work until every agent of the phase is done, then logs the final
reports. In its own process (the Mininet engine) ``Agent.run`` does it all,
meeting the other agents through files; the virtual-time engine
(testbed.sim) drives the same steps itself. On an rxe host it also runs the
DCQCN shim and counts the QPs' traffic under the udp provider's names.

Events:

- ``setup_done``, ``jit_warmup`` (PyPy: packets run through a loopback QP
  pair first, hosts.roce.warmup), ``start`` (the common start time)
- ``progress`` (done / total, every ``progress_interval_s``; the runner
  shows it), ``work_done`` (this agent's work finished)
- ``agent_end`` (ok, engine counters)"""

from __future__ import annotations

import contextlib
import json
import os
import select
import time
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, cast

from hosts.agent.collective import _Collective
from hosts.agent.errors import AgentError
from hosts.agent.events import EventLog, now_ns
from hosts.agent.exchange import Offer
from hosts.agent.flow import _Flow
from hosts.agent.interfaces import gateway_mac, ifname_of, link_mac
from hosts.agent.message_pool import _MessagePool
from hosts.agent.rates import cnp_interval_ns
from hosts.agent.work import FlowCounts
from hosts.agent_spec import FlowSpec, JobSpec, message_wire_bytes
from hosts.commlib import FileRendezvous
from hosts.roce import Scale
from hosts.roce.pacing import DEFAULT_BURST_BYTES, HostLine, Pacer
from hosts.roce.receive_lag import threshold_ns as receive_lag_threshold_ns
from hosts.roce.verbs import QP, Context, wait_exactly
from hosts.roce.warmup import jit_present, warm_up

if TYPE_CHECKING:
    from typing import TypeAlias

    from hosts.agent.exchange import ConnectionInfo
    from hosts.agent.flow import FlowEndInfo
    from hosts.agent.message_pool import PoolEndInfo
    from hosts.roce.pfc import HostPause
    from hosts.roce.receive_lag import ReceiveLag
    from hosts.roce.shaping import HtbShaper

    # What an agent drives: its flows, message pools and collective rank (an
    # annotation only: PyPy 3.9, which runs flow agents, has no X | Y of classes).
    Work: TypeAlias = _Flow | _MessagePool | _Collective


def _earliest(a: int | None, b: int | None) -> int | None:
    """The earlier of two optional times."""
    if a is None:
        return b
    return a if b is None or a <= b else b


def _log_flow_ends(works: Sequence[Work]) -> None:
    """Log the finished flows' flow_end events (each once)."""
    for w in works:
        fin = getattr(w, "finalize", None)
        if fin is not None:
            fin()


class _DoneBarrier:
    """Non-blocking: write my done file, then check whether everyone's is there."""

    def __init__(self, directory: Path, rank: int, size: int) -> None:
        self.dir = directory
        self.rank, self.size = rank, size
        self.dir.mkdir(parents=True, exist_ok=True)
        self.arrived = False

    def arrive(self) -> None:
        tmp = self.dir / f".done.{self.rank}.tmp"
        tmp.write_text(str(now_ns()))
        os.replace(tmp, self.dir / f"done.{self.rank}")
        self.arrived = True

    def complete(self) -> bool:
        return all((self.dir / f"done.{r}").exists() for r in range(self.size))


# An rxe host's completions are polled (no completion channel): the longest
# the agent sleeps without looking at its CQs.
RXE_POLL_NS = 5_000_000
# rxe device counters (hw_counters) a phase's flows report as deltas.
RXE_DEVICE_COUNTERS = ("sent_pkts", "rcvd_pkts", "rcvd_seq_err", "completer_retry_err",
                       "duplicate_request", "out_of_seq_request")


# rxe hands a QP's packets to the qdisc up to this many at a time
# (RXE_INFLIGHT_SKBS_PER_QP_HIGH), and its ACK timer runs from then.
RXE_INFLIGHT_SKBS = 64
# How far below the line rate (1/N) a QP's DCQCN class may drain that backlog
# before the timer fires spuriously.
RXE_TIMEOUT_RATE_FRACTION = 8


def rxe_ack_timeout_ns(scale: Scale, path_mtu: int) -> int:
    """The local ACK timeout of an rxe host's QPs: the scaled transport timeout, or
    longer: the HTB class holds up to RXE_INFLIGHT_SKBS full packets of a QP, which
    at 1/RXE_TIMEOUT_RATE_FRACTION of the line rate must drain before it fires."""
    frame_bits = message_wire_bytes(path_mtu, path_mtu, with_imm=False) * 8
    drain_s = RXE_INFLIGHT_SKBS * frame_bits * RXE_TIMEOUT_RATE_FRACTION / scale.line_rate_bps
    return max(scale.rto_ns, int(drain_s * 1e9))


class DoneBarrier(Protocol):
    """Where an agent says its work is done and learns when every agent of
    the phase is (it answers the network until then)."""

    arrived: bool

    def arrive(self) -> None: ...

    def complete(self) -> bool: ...


class Agent:
    """One job spec on one host. ``run`` drives it in its own process (the
    Mininet engine); the virtual-time engine drives the same steps itself:
    ``prepare`` / ``connect`` (the exchange of connection data), ``begin`` at
    the common start, ``poll`` whenever the host's clock reaches the time the
    previous poll asked for or a datagram arrives, ``finish``."""

    def __init__(self, spec: JobSpec, log: EventLog, provider: Any = None,
                 rendezvous_dir: Path | None = None) -> None:
        self.spec = spec
        self.log = log
        self.scale = Scale(**spec.transport.scale)
        # (a simulated run's specs name it relative to the run directory)
        self.rdv = rendezvous_dir or Path(spec.rendezvous_dir)
        self.shim: Any = None
        self.shaper: HtbShaper | None = None      # udp hosts with a line qdisc: the QPs' HTB classes
        self._host_line = (HostLine(self.scale.line_rate_bps, now_ns())
                           if spec.transport.qdisc_ahead_packets else None)
        self._pause: HostPause | None = None      # with transport.pfc
        self.ctx: Any
        self.provider: Any
        self._device_base: dict[str, int] = {}
        self.works: list[Work] = []
        self._done_barrier: DoneBarrier | None = None
        self._deadline = 0
        self._rx_lag: ReceiveLag | None = None
        self.wake_exact = True
        if provider is not None:      # a simulated host's NIC (testbed.sim)
            self.provider = provider
        elif spec.provider == "rxe":
            self._open_rxe()
            return
        else:
            from hosts.roce.udp_provider import UdpProvider

            self.provider = UdpProvider(spec.ip)
            self.provider.rx_holdoff_ns = round(spec.transport.rx_holdoff_us * 1000.0
                                                * self.scale.slowdown)
        self.ctx = Context(self.provider, self.scale,
                           cnp_interval_ns=cnp_interval_ns(spec, self.scale))

    def _open_rxe(self) -> None:
        """The host's rxe device (pyverbs) and its DCQCN shim, which also shapes
        the host's egress to the NIC's line rate (hosts.roce.rxe.dcqcn_shim)."""
        from hosts.roce.rxe.dcqcn_points import ShimError
        from hosts.roce.rxe.dcqcn_shim import RxeDcqcnShim
        from hosts.roce.rxe.device import RxeUnavailable
        from hosts.roce.rxe.provider import RxeContext

        spec, t = self.spec, self.spec.transport
        try:
            self.ctx = RxeContext(spec.ip, scale=self.scale,
                                  timeout_ns=rxe_ack_timeout_ns(self.scale, t.path_mtu))
        except RxeUnavailable as e:
            raise AgentError(f"rxe host {spec.host}: {e}") from e
        self.provider = self.ctx.provider
        ifname = self.ctx.device.netdev
        if ifname is None:
            raise AgentError(f"rxe device {self.ctx.device.name} has no netdev")
        try:
            self.shim = RxeDcqcnShim(
                ifname=ifname, local_ip=spec.ip, local_mac=link_mac(ifname),
                gateway_mac=gateway_mac(ifname), line_rate_bps=self.scale.line_rate_bps,
                cnp_interval_ns=cnp_interval_ns(spec, self.scale),
                burst_bytes=int(DEFAULT_BURST_BYTES * t.pacer_burst_packets),
                # a collective's rank has a QP per group or ring neighbour, which
                # rxe's per-device counters cannot tell apart: count per QP on the wire
                count_wire=spec.collective is not None,
                nak_window_ns=rxe_ack_timeout_ns(self.scale, t.path_mtu) // 2)
        except ShimError as e:
            self.ctx.close()
            raise AgentError(f"rxe host {spec.host}: DCQCN shim: {e}") from e
        self.ctx.on_qp_reset = self.shim.qp_restarted
        self.ctx.on_qp_dscp = self.shim.set_dscp

    def _register_rxe_qps(self) -> None:
        """Every connected QP with the shim (CNPs for its CE marks; its rate, when it
        has a rate controller), then the class and device counters' baselines."""
        from hosts.roce.rxe.dcqcn_points import ShimError
        from hosts.roce.verbs import QPState

        for qp in list(self.ctx._qps.values()):
            if qp.state in (QPState.RTR, QPState.RTS):
                try:
                    self.shim.register_qp(qp.qp_num, qp.dest_ip, qp.dest_qp_num,
                                          qp.rate_controller)
                except ShimError as e:
                    raise AgentError(f"rxe host {self.spec.host}: DCQCN shim: {e}") from e
        # The class counters' baseline, taken before the traffic (a process's first
        # dump is its slowest: 14 ms against 10 in the guest under TCG).
        self.shim.byte_counter.read(now_ns())
        from hosts.roce.rxe.device import read_hw_counters

        self._device_base = read_hw_counters(self.ctx.device)

    def rxe_stats(self, flow: FlowCounts, final: bool) -> dict[str, int]:
        """An rxe flow's counters under the udp provider's names. rxe counts per
        device, not per QP: packet counts come from the device's counters (at the
        end of the phase) when the flow is the host's only one of its role, else
        they are left out; byte counts are those of completed messages."""
        s = flow.spec
        alone = sum(1 for f in self.spec.flows if f.role == s.role) == 1 \
            and self.spec.collective is None and s.qps == 1
        return self.rxe_qp_stats(flow.qp, s, flow.completed, final and alone)

    def rxe_qp_stats(self, qp: QP, s: FlowSpec, completed: int,
                     device: bool = False, sizes: list[int] | None = None) -> dict[str, int]:
        """The counters of rxe QP ``qp`` of flow ``s`` under the udp provider's
        names, from its ``completed`` messages (of ``sizes`` each, if given, else
        ``msg_bytes``) and the shim; with ``device``,
        its packet counts from the device's counters over the phase (right only
        when the QP is the host's one QP of its role)."""
        sender = s.role == "sender"
        mtu = self.spec.transport.path_mtu
        if sizes is None:
            pkts = completed * max(1, -(-s.msg_bytes // mtu))
            wire, payload = completed * message_wire_bytes(s.msg_bytes, mtu), completed * s.msg_bytes
        else:
            pkts = sum(max(1, -(-b // mtu)) for b in sizes)
            wire, payload = sum(message_wire_bytes(b, mtu) for b in sizes), sum(sizes)
        st: dict[str, int] = dict(qp.stats)
        st.update(self.shim.qp_counters(qp.qp_num), acked_pkts=pkts if sender else 0,
                  tx_drops=0)
        if sender:
            st.update(tx_bytes=wire, tx_pkts=pkts,
                      retransmits=0, rto=0, naks_rcvd=0)
        else:
            st.update(rx_bytes=payload, rx_pkts=pkts)
        if device:
            from hosts.roce.rxe.device import read_hw_counters

            now = read_hw_counters(self.ctx.device)
            d = {k: now.get(k, 0) - self._device_base.get(k, 0) for k in RXE_DEVICE_COUNTERS}
            if sender:
                # The requester sends only data packets: beyond the messages' own
                # packets, each was sent again. rxe counts no timer expiries: rto is
                # the retries no NAK that moved the completer started (an estimate;
                # a NAK during a retry starts none).
                st.update(tx_pkts=d["sent_pkts"], retransmits=max(0, d["sent_pkts"] - pkts),
                          naks_rcvd=d["rcvd_seq_err"],
                          rto=max(0, d["completer_retry_err"] - d["rcvd_seq_err"]))
            else:
                st.update(rx_pkts=d["rcvd_pkts"], dup_pkts=d["duplicate_request"],
                          out_of_seq=d["out_of_seq_request"])
        st["device_counters"] = int(device)
        return st

    def rxe_device_counters(self) -> dict[str, int]:
        """The host's rxe device counters (every one the device has) since its QPs
        were connected: the phase's traffic of all of the host's QPs together."""
        from hosts.roce.rxe.device import read_hw_counters

        now = read_hw_counters(self.ctx.device)
        return {k: v - self._device_base.get(k, 0) for k, v in now.items()
                if k != "lifespan"}     # lifespan: the counters' cache time, not a count

    def qp_stats(self, qp: Any) -> dict[str, int]:
        """A collective QP's counters: the udp provider's own; on rxe, the
        provider's work-request counts, the shim's CE and CNP counts, and its
        counts from the wire (retransmits, naks_rcvd, rto: rxe counts packets per
        device only; hosts.roce.rxe.wire_counts.WireCounts)."""
        if self.shim is None:
            return dict(qp.stats)
        return {**qp.stats, **self.shim.qp_counters(qp.qp_num)}

    def _wait(self, deadline_ns: int, exact: bool = True) -> None:
        if self.shim is None:
            self.provider.wait(deadline_ns, exact=exact)
            return
        now = now_ns()
        until = min(deadline_ns, now + RXE_POLL_NS)
        if until > now:
            select.select((self.shim,), (), (), (until - now) / 1e9)

    def make_pacer(self) -> Pacer | None:
        if self.shim is not None:
            return None          # tc HTB on the host's link is the rxe host's NIC
        t = self.spec.transport
        burst = int(DEFAULT_BURST_BYTES * t.pacer_burst_packets)
        line = self.scale.line_rate_bps
        shaped = None
        if t.qdisc_ahead_packets:
            # The kernel spaces this QP's frames at its DCQCN rate (its own
            # HTB class on the host's interface, hosts/roce/shaping.py).
            from hosts.roce.shaping import ShapingError

            try:
                shaped = self._host_shaper().new_qp_class(line)
            except ShapingError as e:
                raise AgentError(f"host {self.spec.host}: {e}") from e
        # Lateness counts in packet times of a full-size packet, not of the bucket.
        return Pacer(rate_bps=line, burst_bytes=burst, now_ns=now_ns(),
                     late_threshold_packets=t.late_threshold_packets / t.pacer_burst_packets,
                     line_bps=line, ahead_bytes=int(DEFAULT_BURST_BYTES * t.qdisc_ahead_packets),
                     shaped=shaped, host_line=self._host_line, pause=self._host_pause())

    def _host_pause(self) -> HostPause | None:
        """The host's PFC state, shared by its senders (transport.pfc)."""
        if self._pause is None and self.spec.transport.pfc:
            from hosts.roce.pfc import HostPause, PauseError

            try:
                sim_sock = getattr(self.provider, "pause_socket", None)
                if sim_sock is not None:     # a simulated NIC hands its pause frames over
                    self._pause = HostPause(self.spec.ip, self.scale.line_rate_bps,
                                            sock=sim_sock(), clock=now_ns)
                else:
                    self._pause = HostPause(ifname_of(self.spec.ip), self.scale.line_rate_bps,
                                            receive_lag=self.provider.receive_lag)
            except PauseError as e:
                raise AgentError(f"host {self.spec.host}: {e}") from e
            # a pause frame (an XON) wakes the agent, as it reaches a NIC at once
            self.provider.watch(self._pause)
        return self._pause

    def _host_shaper(self) -> HtbShaper:
        if self.shaper is None:
            from hosts.roce.shaping import HtbShaper

            t = self.spec.transport
            self.shaper = HtbShaper(ifname_of(self.spec.ip), self.scale.line_rate_bps,
                                    int(DEFAULT_BURST_BYTES * t.pacer_burst_packets),
                                    own_root=False)
        return self.shaper

    def run(self) -> None:
        """The agent in its own process: exchange connection data and meet the
        phase's other agents through files in the rendezvous directory, run
        until every agent is done, waiting on the provider in between."""
        spec = self.spec
        offers = self.prepare()
        gathered: dict[tuple[str, str], list[ConnectionInfo]] = {}
        # Same order on every agent: pairwise exchanges cannot wait on each other.
        for o in offers:
            if o.group == "epic":
                self._epic_handshake(o)
                gathered[(o.group, o.tag)] = []
                continue
            gathered[(o.group, o.tag)] = FileRendezvous(
                self.rdv / o.group, o.rank, o.size, timeout=spec.timeout_s).allgather(o.info, o.tag)
        self.connect(gathered)
        b_rank, b_size = spec.barrier
        ready = FileRendezvous(self.rdv / "barrier", b_rank, b_size,
                               timeout=spec.timeout_s).allgather({"ready_ns": now_ns()}, "start")
        t0 = max(int(r["ready_ns"]) for r in ready) + int(spec.start_delay_s * 1e9)
        self.ctx.engine.run(until=lambda: now_ns() >= t0, timeout=max(0.0, (t0 - now_ns()) / 1e9))
        self.begin(t0, _DoneBarrier(self.rdv / "done", b_rank, b_size))
        while True:
            wake = self.poll()
            if wake is None:
                break
            if wake > now_ns():
                self._wait(wake, self.wake_exact)
        self.finish()

    def _epic_handshake(self, offer: Offer) -> None:
        """Tell the controller this rank's EPIC QPs (a file in the phase's
        rendezvous directory: rank<r>.json) and wait until it has installed
        the group (file ``ready``)."""
        d = self.rdv / "epic"
        d.mkdir(parents=True, exist_ok=True)
        tmp = d / f".rank{offer.rank}.tmp"
        tmp.write_text(json.dumps(offer.info))
        os.replace(tmp, d / f"rank{offer.rank}.json")
        deadline = time.monotonic() + self.spec.timeout_s
        while not (d / "ready").exists():
            if time.monotonic() > deadline:
                raise AgentError(f"rank {offer.rank}: the controller did not install EPIC "
                                 f"group {offer.tag} within {self.spec.timeout_s:.0f} s")
            time.sleep(0.02)

    def prepare(self) -> list[Offer]:
        """Make the flows' and the collective's QPs and buffers; what this agent
        contributes to the exchanges of connection data, in the order every
        agent makes them."""
        spec = self.spec
        self._deadline = now_ns() + int(spec.timeout_s * 1e9)
        flows: list[_Flow | _MessagePool] = [
            _MessagePool(self, f) if f.arrivals_s else _Flow(self, f)
            for f in sorted(spec.flows, key=lambda f: f.flow)]
        self.works = list(flows)
        offers = [Offer("flows", fl.name, 0 if fl.sender else 1, 2, fl.info()) for fl in flows]
        if spec.collective is not None:
            coll = _Collective(self, spec.collective)
            self.works.append(coll)
            offers.append(coll.offer())
        return offers

    def connect(self, gathered: dict[tuple[str, str], list[ConnectionInfo]]) -> None:
        """Connect every QP from the exchanges' results ((group, tag) -> every
        party's info, in rank order), then what must happen before the start."""
        spec = self.spec
        for w in self.works:
            if isinstance(w, _Collective):
                w.connect(gathered[w.exchange])
                continue
            # a flow's exchange has its two ends' info (their shape checked in connect)
            peer = gathered[("flows", w.name)][1 if w.sender else 0]
            if isinstance(w, _MessagePool):
                w.connect(cast("PoolEndInfo", peer))
            else:
                w.connect(cast("FlowEndInfo", peer))
        if self.shim is not None:
            self._register_rxe_qps()
        self.log.emit("setup_done", flows=[w.name for w in self.works
                                           if not isinstance(w, _Collective)],
                      collective=spec.collective is not None)
        if jit_present() and not getattr(self.provider, "simulated", False):
            # Compile the per-packet paths now, not during the measured traffic
            # (a simulated host has no traffic to be late for).
            msg = max((f.msg_bytes for f in spec.flows), default=65536)
            self.log.emit("jit_warmup", **warm_up(msg, spec.transport.path_mtu))

    def begin(self, t0: int, done_barrier: DoneBarrier) -> None:
        """Start the work at the phase's common instant ``t0``."""
        spec = self.spec
        # Logged at the common instant (the same on every agent), with how late
        # this agent woke up for it.
        self.log.emit("start", t_ns=t0, barrier=spec.barrier[1], late_ns=max(0, now_ns() - t0))
        # the udp provider's (an rxe engine has no provider: the kernel receives)
        self._rx_lag = getattr(getattr(self.ctx.engine, "provider", None), "receive_lag", None)
        if self._rx_lag is not None:
            self._rx_lag.reset(now_ns(), receive_lag_threshold_ns(self.ctx.scale.slowdown))
        for w in self.works:
            w.start(t0)
        self._done_barrier = done_barrier
        self._sample_ns = spec.transport.sample_interval_us * 1000
        self._prog_ns = int(spec.progress_interval_s * 1e9)
        self._next_sample = t0 + self._sample_ns
        self._next_prog = t0
        self._next_done_check = 0
        self.wake_exact = True

    def poll(self) -> int | None:
        """One pass: the engine's receive, timers and sends, then the work's;
        the time the next pass is due (``wake_exact``: whether it must be met
        exactly), or None once every agent of the phase is done."""
        spec = self.spec
        works = self.works
        engine = self.ctx.engine
        shim = self.shim
        done_barrier = self._done_barrier
        assert done_barrier is not None, "poll before begin"
        engine.progress()
        now = now_ns()
        if shim is not None:
            shim.poll(now)
        for w in works:
            w.step(now)
        if now >= self._next_sample:
            for w in works:
                if not w.done:
                    w.sample(now)
            self._next_sample = now + self._sample_ns
        if now >= self._next_prog:
            self.log.emit("progress", t_ns=now, done=sum(w.progress()[0] for w in works),
                          total=sum(w.progress()[1] for w in works))
            self._next_prog = now + self._prog_ns
        all_done = all(w.done for w in works)
        if all_done:
            if not done_barrier.arrived:
                done_barrier.arrive()
                self.log.emit("work_done", t_ns=now)
            if now >= self._next_done_check:
                if done_barrier.complete():
                    return None
                self._next_done_check = now + 20_000_000
        if now >= self._deadline:
            state = ", ".join(f"{getattr(w, 'name', 'collective')}: {w.progress()[0]}/"
                              f"{w.progress()[1]}" for w in works)
            # the flows that did finish keep their flow_end in the record
            # (a mismatch is in its bytes_ok; the timeout is the error)
            with contextlib.suppress(AgentError):
                _log_flow_ends(works)
            if all_done:
                raise AgentError(f"timed out after {spec.timeout_s:.0f} s waiting for the "
                                 "other agents of the phase to finish")
            for w in works:
                # the QPs' counters say where a ring stalled (an rxe host's
                # finished collectives have not reported yet either)
                if isinstance(w, _Collective) and (not w.done or shim is not None):
                    w._report()
            raise AgentError(f"timed out after {spec.timeout_s:.0f} s ({state})")
        # The engine's deadline, exact if it is a paced send; the
        # workload's own times (message posts, arrivals) are met exactly
        # too; bookkeeping (samples, progress, the done check) may run late.
        dl = engine.next_deadline()
        exact_at = engine.exact_at
        wake = min(self._next_sample, self._next_prog, self._deadline)
        if all_done:
            wake = min(wake, self._next_done_check)
        due: int | None = None
        for w in works:
            if isinstance(w, _Flow) and w.sender and not w.done:
                if w.spec.rate_bps or w.posted == 0:
                    due = _earliest(due, max(w.next_post_ns, now))
                due = _earliest(due, w.next_wake(now))
            elif isinstance(w, _MessagePool):
                due = _earliest(due, w.next_wake(now))
        exact_at = _earliest(exact_at, due)
        dl = _earliest(dl, due)
        if shim is not None:
            dl = _earliest(dl, shim.next_deadline())
        if dl is None or dl > wake:
            dl = wake
        self.wake_exact = wait_exactly(dl, exact_at)
        return dl

    def finish(self) -> None:
        """After every agent is done: the final reports and ``agent_end``."""
        spec, shim, works = self.spec, self.shim, self.works
        extra: dict[str, Any] = {}
        if shim is not None:
            # What the host's qdisc still holds leaves before the collectives'
            # QPs are counted: their wire counts are the frames they sent
            # (egress_settled false: the queues did not empty in time).
            from hosts.roce.rxe.dcqcn_points import ShimError

            try:
                extra["egress_settled"] = shim.settle()
            except ShimError as e:
                raise AgentError(f"rxe host {spec.host}: DCQCN shim: {e}") from e
            for w in works:
                if isinstance(w, _Collective):
                    w._report()
        # The flows' digests and byte checks, now that no agent measures.
        _log_flow_ends(works)
        if shim is not None:
            extra["dcqcn_byte_counter"] = shim.byte_counter_report()
        if self._rx_lag is not None:
            extra["receive_lag"] = self._rx_lag.as_dict(now_ns())
        if self._pause is not None:
            extra["pfc"] = self._pause.report()
        self.log.emit("agent_end", ok=True, engine=self.ctx.engine.summary(), **extra)

    def close(self) -> None:
        try:
            if self.shim is not None:
                self.shim.close()
            if self.shaper is not None:
                self.shaper.close()
            if self._pause is not None:
                self._pause.close()
        finally:
            try:
                self.ctx.close()
            except OSError:
                pass
