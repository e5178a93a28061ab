"""One CommLib collective rank (_Collective): its communicator (a ring's, or
EPIC's through the switch), the collectives of its schedule one after
another, each result checked against what every rank can recompute
(hosts.agent.expectations).

Events:

- CommLib's ``collective_start`` / ``step_start`` / ``step_end`` /
  ``collective_end``, and ``collective_check`` (ok: bit-exact, sha256)
- ``pacer_report`` / ``qp_report`` (each sending / receiving QP's counters,
  pacing lateness and DCQCN state at the end, or when it timed out), after
  ``device_counters`` on an rxe host"""

from __future__ import annotations

from typing import TYPE_CHECKING, cast

from hosts.agent.errors import AgentError
from hosts.agent.exchange import Offer
from hosts.agent.expectations import CollectiveExpectation
from hosts.agent.rates import make_rate_controller
from hosts.agent.work import AgentServices
from hosts.agent_spec import CollectiveSpec
from hosts.roce.dcqcn import Dcqcn
from hosts.roce.rate import FixedRate

if TYPE_CHECKING:
    import numpy as np

    from hosts.agent.exchange import ConnectionInfo
    from hosts.commlib.communicator import CollectiveOp, Communicator, RankInfo
    from hosts.commlib.epic import EpicCollective, EpicCommunicator
    from hosts.commlib.hierarchical import (
        HierarchicalCommunicator,
        HierarchicalOp,
        HierarchicalRankInfo,
    )
    from hosts.roce.verbs import QP


# A rank makes its collectives' inputs and expected results before the start
# barrier up to this much memory (the largest profile: 24 MiB), the rest at
# each collective's start.
PRECOMPUTE_BUDGET_BYTES = 256 << 20


class _Collective:
    def __init__(self, agent: AgentServices, spec: CollectiveSpec) -> None:
        import numpy as np

        from hosts.commlib.hierarchical import make_ring

        self.agent = agent
        self.spec = spec
        self.schedule = spec.schedule()
        itemsize = np.dtype(spec.dtype).itemsize
        n = max(c * (spec.size if op == "all_gather" else 1) for op, c in spec.sequence())
        scale = agent.scale
        channel = iter(range(1 << 30))      # the factory is called once per channel, in order

        def rate_controller() -> Dcqcn | FixedRate:
            return make_rate_controller(agent.spec, scale, agent.log,
                                        f"rank{spec.rank}-ch{next(channel)}")

        self.comm: Communicator | HierarchicalCommunicator | EpicCommunicator
        if spec.scheme == "epic":
            # connected once the controller installed its group (connect)
            self.comm = self._epic_comm(n * itemsize)
        else:
            # connected once every rank's connection data is known (connect);
            # one ring of all ranks, or a 2D ring of spec.dims
            self.comm = make_ring(
                agent.ctx, spec.rank, spec.size, spec.job_id, spec.dims,
                channels=spec.channels, max_bytes=n * itemsize, event_sink=agent.log.sink,
                rate_controller_factory=rate_controller,
                pacer_factory=agent.make_pacer,
                path_mtu=agent.spec.transport.path_mtu, timeout_s=agent.spec.timeout_s,
                step_psn_origin=spec.step_psn_origin, step_base=spec.step_base,
                phantom=spec.payload == "phantom",
                step_overhead_ns=scale.latency_ns(spec.step_overhead_us))
        self.iteration = 0
        self.op: CollectiveOp | HierarchicalOp | EpicCollective | None = None
        self.done = False
        self.ok = True
        # Every collective's input and expected result, made now, before the
        # start barrier. Made at a collective's boundary (every rank's input
        # drawn again, their sum, two sha256s) they took the CPU at the
        # agents' real-time priority beside the rings' traffic, on every rank
        # of a job at once: symphony-two-jobs' 2 MiB AllReduces, 19 ms
        # (median) between a collective's end and its check, now 0.8 ms.
        budget = PRECOMPUTE_BUDGET_BYTES
        self._ready: dict[int, CollectiveExpectation] = {}
        # (phantom payloads have nothing to expect)
        for i in range(len(self.schedule) if spec.payload == "real" else 0):
            budget -= 2 * n * itemsize
            if budget < 0:
                break           # the rest at their boundaries, as before
            self._ready[i] = CollectiveExpectation.make(spec, i)

        self._current: CollectiveExpectation | None = None

    @property
    def exchange(self) -> tuple[str, str]:
        """The (group, tag) of the rank's exchange of connection data."""
        if self.spec.scheme == "epic":
            return "epic", f"gid{cast('EpicCommunicator', self.comm).endpoint.gid}"
        return "collective", f"commlib-job{self.spec.job_id}"

    def offer(self) -> Offer:
        """The rank's connection data: for a ring, exchanged with the other ranks;
        for EPIC, handed to the controller, which installs the switch's group
        from every rank's (testbed.epic.install_from_rendezvous)."""
        return Offer(*self.exchange, self.spec.rank, self.spec.size, self.comm.local_info())

    def connect(self, infos: list[ConnectionInfo]) -> None:
        from hosts.commlib.epic import EpicCommunicator
        from hosts.commlib.hierarchical import HierarchicalCommunicator

        comm = self.comm
        if isinstance(comm, EpicCommunicator):
            comm.connect()     # the switch's group is installed: nothing to learn
        elif isinstance(comm, HierarchicalCommunicator):
            comm.connect(cast("list[HierarchicalRankInfo]", infos))
        else:
            comm.connect(cast("list[RankInfo]", infos))

    def _expected(self, iteration: int) -> CollectiveExpectation:
        return self._ready.pop(iteration, None) or CollectiveExpectation.make(self.spec, iteration)

    def _epic_comm(self, max_bytes: int) -> EpicCommunicator:
        """The rank's EPIC communicator, not yet connected (its QP per group)."""
        from hosts.commlib.epic import EpicCommunicator, EpicEndpoint

        spec, agent = self.spec, self.agent
        e = spec.epic or {}
        ep = EpicEndpoint(str(e["switch_ip"]), int(e["qpn"]), int(e["gid"]),
                          int(e.get("start_psn", 0)))
        scale = agent.scale
        return EpicCommunicator(
            agent.ctx, spec.rank, spec.size, ep, max_bytes=max_bytes,
            event_sink=agent.log.sink, job_id=spec.job_id,
            rate_controller_factory=lambda: make_rate_controller(
                agent.spec, scale, agent.log, f"rank{spec.rank}-epic"),
            pacer_factory=agent.make_pacer, timeout_s=agent.spec.timeout_s,
            window=spec.epic_window, phantom=spec.payload == "phantom",
            step_overhead_ns=scale.latency_ns(spec.step_overhead_us))

    def start(self, t: int) -> None:
        self._start_next()

    def _start_next(self) -> None:
        spec = self.spec
        op, count = spec.sequence()[self.iteration]
        phantom = spec.payload == "phantom"
        self._current = None if phantom else self._expected(self.iteration)
        if op == "barrier":
            self.op = self.comm.start_barrier()
            return
        if self._current is None:
            # phantom: the size and type of the input, without its memory
            import numpy as np

            x: np.ndarray = np.broadcast_to(np.zeros(1, dtype=spec.dtype), (count,))
        else:
            given, self._current.x = self._current.x, None     # the communicator's now
            assert given is not None        # made with the expectation, handed over once
            x = given
        if op in ("reduce", "broadcast"):
            start_rooted = {"reduce": self.comm.start_reduce,
                            "broadcast": self.comm.start_broadcast}[op]
            self.op = start_rooted(x, root=spec.root)
            return
        start = {"all_reduce": self.comm.start_all_reduce,
                 "reduce_scatter": self.comm.start_reduce_scatter,
                 "all_gather": self.comm.start_all_gather}[op]
        self.op = start(x)

    def step(self, now: int) -> None:
        if self.done or self.op is None:
            return
        if not self.op.progress():
            return
        import numpy as np

        op = self.spec.sequence()[self.iteration][0]
        exp = self._current
        if self.spec.payload == "phantom":
            # nothing to check: say so (ok None), so no analysis counts it as checked
            self.agent.log.emit("collective_check", iteration=self.iteration, op=op,
                                rank=self.spec.rank, size=self.spec.size, ok=None,
                                payload="phantom")
            self._advance()
            return
        assert exp is not None
        want, bound = exp.want, exp.bound
        # a rank that receives nothing has nothing to check (the ring's
        # non-root Reduce ranks hold partial sums, EPIC's hold None)
        got = self.op.result() if want is not None else None
        ok, got_sha = exp.judge(got)
        self.agent.log.emit("collective_check", iteration=self.iteration, op=op,
                            rank=self.spec.rank, size=self.spec.size, ok=ok,
                            sha256=got_sha, expected_sha256=exp.sha256)
        if not ok:
            assert want is not None
            if got is None or got.shape != want.shape:
                bad = -1
            elif bound is None:
                bad = int(np.count_nonzero(got != want))
            else:
                bad = int(np.count_nonzero(np.abs(got.astype(np.float64) - want) > bound))
            what = "is not bit-exact" if bound is None else "exceeds the fixed-point bound"
            raise AgentError(f"rank {self.spec.rank}: {op} iteration {self.iteration} "
                             f"{what} ({bad} elements differ)")
        self._advance()

    def _advance(self) -> None:
        self.iteration += 1
        if self.iteration >= len(self.schedule):
            self.done = True
            if self.agent.shim is None:
                self._report()
            # on an rxe host the report waits for the end of the phase
            # (Agent.run: the shim's settle), as frames may still leave
        else:
            self._start_next()

    def _report(self) -> None:
        """Per sending QP: counters, pacing lateness, DCQCN state (fidelity, CNPs);
        on an rxe host also the device's counters over the phase (all QPs: rxe
        counts per device)."""
        if self.agent.shim is not None:
            self.agent.log.emit("device_counters", counters=self.agent.rxe_device_counters())
        if self.spec.scheme == "epic":
            # one report per group QP that sent (AllReduce: the first alone)
            for i, qp in enumerate(cast("EpicCommunicator", self.comm).qps):
                # the udp provider counts a QP's packets, rxe's only its work requests
                if i and not qp.stats.get("tx_pkts", qp.stats.get("send_wrs", 0)):
                    continue
                self._pacer_report(f"rank{self.spec.rank}-epic" + (f"-g{i}" if i else ""), qp)
            return
        # a 2D ring reports each dimension's QPs under its name
        ring_comm = cast("Communicator | HierarchicalCommunicator", self.comm)
        for dim, ring in ring_comm.rings:
            rank = f"rank{self.spec.rank}" + (f"-{dim}" if dim else "")
            for c, lanes in enumerate(ring.right):
                for lane, qp in enumerate(lanes):
                    self._pacer_report(f"{rank}-ch{c}" + (f"-lane{lane}" if lane else ""), qp)
            for c, lanes in enumerate(ring.left):
                for lane, qp in enumerate(lanes):
                    self.agent.log.emit("qp_report", flow=f"{rank}-left{c}"
                                        + (f"-lane{lane}" if lane else ""),
                                        qp=self.agent.qp_stats(qp))

    def _pacer_report(self, flow: str, qp: QP) -> None:
        """A sending QP's counters, its pacer's lateness and its DCQCN state."""
        report = getattr(qp.pacer, "report", None)
        state = getattr(qp.rate_controller, "state", None)
        self.agent.log.emit("pacer_report", flow=flow, qp=self.agent.qp_stats(qp),
                            pacer=report() if callable(report) else None,
                            dcqcn=state() if callable(state) else None)

    def sample(self, now: int) -> None:
        pass

    def progress(self) -> tuple[int, int]:
        return self.iteration, len(self.schedule)
