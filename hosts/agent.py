"""Host agent: runs one job spec inside a Mininet host and writes its timeline.

    python -m hosts.agent --spec job.json --events out.jsonl

The spec (hosts.agent_spec.JobSpec) lists queue pairs to drive (senders
posting RDMA WRITE_WITH_IMM messages under DCQCN and a token-bucket pacer, or
the receivers they land at) and/or a CommLib collective rank. Set-up, in order:
create QPs and buffers, exchange connection data with each peer through files
in the spec's ``rendezvous_dir`` (hosts.commlib.FileRendezvous), meet every
agent of the phase at a start barrier (all start at the same CLOCK_MONOTONIC
instant), run, then keep answering the network (late ACKs, retransmissions)
until every agent of the phase has finished: a done barrier.

Events are JSON lines ``{"event": ..., "t_ns": CLOCK_MONOTONIC ns, "host": ...}``:

- ``agent_start`` (pid, spec, interpreter), ``setup_done``, ``jit_warmup`` (PyPy:
  packets run through a loopback QP pair first, hosts.roce.warmup), ``start``
  (the common start time),
  ``agent_end`` (ok, engine counters), ``error`` (message)
- ``flow_start`` / ``flow_end`` (per flow; flow_end has the QP counters, the
  pacer's lateness report, the DCQCN state, sha256 of the buffer and, for
  receivers, ``bytes_ok``: the buffer equals what the sender sent; a phantom
  payload's has ``payload: phantom`` in their place)
- ``completion`` (one per message: flow, role, index, bytes)
- ``rate`` (sender, every ``sample_interval_us``: rc_bps, rt_bps, alpha,
  tx_bytes, retransmits, pacing lateness so far), ``rx`` (receiver, same
  period: rx_bytes = payload delivered in order, ce_pkts, cnps_sent)
- ``dcqcn`` (sender QP under DCQCN: every rate cut and every rate increase
  event, at the time the reaction point applied it: ``kind`` cut|increase,
  rc_bps, rt_bps, alpha; cuts also rc_before_bps and ``deferred`` (held to the
  end of a rate-reduce monitor period); increases also ``stage``
  fast_recovery|additive|hyper, ``source`` timer|bytes and both stage counters)
- ``priority`` (a ReFlex flexible sender switched priority: low, budgets, fair
  share); its ``rate`` samples also carry dscp, low, b_alpha, b_r,
  fair_share_bps and delivered
- ``cnp_rx`` (sender, each CNP, with the rate after it), ``cnp_tx`` (receiver,
  CNPs sent since the last check), ``retransmit`` (sender: packets resent,
  RTOs and NAKs since the last check)
- CommLib's ``collective_start`` / ``step_start`` / ``step_end`` /
  ``collective_end``, and ``collective_check`` (ok: bit-exact, sha256)
- ``pacer_report`` / ``qp_report`` (collective: each sending / receiving QP's
  counters, pacing lateness and DCQCN state at the end, or when it timed out)
- ``progress`` (done / total, every ``progress_interval_s``; the runner shows it)
- ``profiling`` (path): the agent runs under cProfile, as ``P4TB_AGENT_PROFILE``
  asks (see PROFILE_ENV)

Exit status: 0 success; 1 the job failed (a work request failed, a timeout,
data did not verify; the reason is on stderr and in an ``error`` event); 2 the
spec is invalid or unreadable; 3 the agent's parent (the runner) is gone.
"""

from __future__ import annotations

import argparse
import contextlib
import ctypes
import gc
import hashlib
import json
import mmap
import os
import platform
import select
import signal
import socket
import sys
import time
import traceback
import zlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any, Protocol

from hosts.agent_spec import CollectiveSpec, FlowSpec, JobSpec, SpecError, message_wire_bytes
from hosts.commlib import FileRendezvous
from hosts.reflex import Cycle, FlexibleFlow, FlexibleParams
from hosts.roce import Scale
from hosts.roce.constants import ROCE_UDP_PORT, tag_sport
from hosts.roce.dcqcn import DEFAULT_PRESET, Dcqcn, DcqcnParams
from hosts.roce.pacing import DEFAULT_BURST_BYTES, HostLine, Pacer
from hosts.roce.rate import FixedRate
from hosts.roce.receive_lag import threshold_ns as receive_lag_threshold_ns
from hosts.roce.verbs import (
    CQ,
    MR,
    QP,
    Access,
    Context,
    QPState,
    RecvWR,
    SendWR,
    VerbsError,
    WCOpcode,
    WCStatus,
    WROpcode,
    lazy_zeros,
    wait_exactly,
)
from hosts.roce.warmup import jit_present, warm_up

if TYPE_CHECKING:
    import numpy as np

    from hosts.commlib.epic import EpicCommunicator

__all__ = ["main", "AgentError", "EventLog", "FLOW_PATTERN_PERIOD", "flow_pattern",
           "matches_pattern", "collective_input", "CollectiveExpectation"]

PR_SET_PDEATHSIG = 1
# Immediate-data flag of the last message of a flow that ends early (partial
# delivery); the low bits keep the message index.
FINAL_IMM = 1 << 31
# Where receivers mark their finished flows (in the rendezvous dir), and how
# often a sender with stop_after looks.
FINISHED_DIR = "finished"
STOP_CHECK_NS = 20_000_000
# How often a connection pool (FlowSpec.arrivals_s) looks for retransmissions
# and CNPs sent, to log them.
POOL_COUNTERS_NS = 5_000_000
PR_SET_TIMERSLACK = 29


class AgentError(RuntimeError):
    """The job failed; the message says why."""


# The agents' clock: CLOCK_MONOTONIC in an agent's own process (the Mininet
# engine); the virtual-time engine (testbed.sim) runs every agent of a run in
# one process on its simulated clock and swaps it in (simulated_clock).
_clock: Callable[[], int] = time.monotonic_ns


def now_ns() -> int:
    return _clock()


@contextlib.contextmanager
def simulated_clock(clock: Callable[[], int]) -> Iterator[None]:
    """Every agent of this process reads ``clock`` (ns) while the block runs."""
    global _clock
    before = _clock
    _clock = clock
    try:
        yield
    finally:
        _clock = before


class EventLog:
    """JSON lines with a CLOCK_MONOTONIC timestamp and the host name."""

    def __init__(self, path: str | os.PathLike[str], host: str, line_buffered: bool = True) -> None:
        # Line-buffered where the runner reads the file while the agent runs
        # (its progress lines); a simulated run reads it only afterwards.
        self._f: IO[str] = open(path, "a", buffering=1 if line_buffered else -1)  # closed by close()
        self.host = host

    def emit(self, event: str, **fields: Any) -> None:
        rec = {"event": event, "t_ns": fields.pop("t_ns", None) or now_ns(), "host": self.host}
        rec.update(fields)
        self._f.write(json.dumps(rec, separators=(",", ":"), default=_jsonable) + "\n")

    def sink(self, ev: dict[str, Any]) -> None:
        """CommLib's event sink: its events already carry event and t_ns."""
        self._f.write(json.dumps({"host": self.host, **ev}, separators=(",", ":"),
                                 default=_jsonable) + "\n")

    def close(self) -> None:
        self._f.close()


def _jsonable(x: Any) -> Any:
    item = getattr(x, "item", None)      # numpy scalars (collectives)
    if callable(item):
        v = item()
        if isinstance(v, (int, float)):
            return v
    return str(x)


# ---------------------------------------------------------------------------
# data every side can recompute


# The pattern repeats with this period, a prime number of bytes: a 487 MB
# flow's pattern costs one 16 MiB SHAKE-128 digest and copies (70 ms) instead
# of a digest as long as the flow (1.9 s, and as long again at the receiver to
# check it). Packets sit at multiples of the path MTU (at most 4096, a power of
# two, coprime to the period), so a packet written at the wrong place matches
# only if it moved by a multiple of 1024 periods, 16 GiB, more than a flow
# may carry (MAX_FLOW_BYTES); a shift by part of a packet never matches.
FLOW_PATTERN_PERIOD = 16_777_259


def _pattern_block(spec: FlowSpec) -> bytes:
    """One period of a flow's pattern (shorter for a shorter flow)."""
    n = min(spec.total_bytes, FLOW_PATTERN_PERIOD)
    return hashlib.shake_128(b"flow-pattern/%d" % spec.seed).digest(n)


def flow_pattern(spec: FlowSpec) -> bytearray:
    """The bytes a flow's sender sends (both ends derive them from the seed):
    SHAKE-128 of the seed, the same on every interpreter an agent runs on,
    repeated every FLOW_PATTERN_PERIOD bytes."""
    block = _pattern_block(spec)
    n = spec.total_bytes
    buf = bytearray(n)
    view = memoryview(buf)
    for off in range(0, n, len(block) or 1):
        k = min(len(block), n - off)
        view[off:off + k] = block if k == len(block) else block[:k]
    return buf


def matches_pattern(buf: bytes | bytearray | mmap.mmap, spec: FlowSpec, n: int) -> bool:
    """Whether the first ``n`` bytes of ``buf`` are the first ``n`` of the
    flow's pattern, compared a period at a time against the one period held
    (a flow may be gigabytes: no second copy of it is built)."""
    if len(buf) < n or n > spec.total_bytes:
        return False
    block = _pattern_block(spec)
    view = memoryview(buf)
    period = len(block) or 1
    # bytes == bytes compares with memcmp; a memoryview comparison goes
    # element by element, ten times slower
    return all(view[off:off + min(period, n - off)].tobytes()
               == (block if n - off >= period else block[:n - off])
               for off in range(0, n, period))


def _earliest(a: int | None, b: int | None) -> int | None:
    """The earlier of two optional times."""
    if a is None:
        return b
    return a if b is None or a <= b else b


def _log_flow_ends(works: list[Any]) -> None:
    """Log the finished flows' flow_end events (each once)."""
    for w in works:
        fin = getattr(w, "finalize", None)
        if fin is not None:
            fin()


def flow_buffer(spec: FlowSpec) -> bytearray | mmap.mmap:
    """A flow end's registered memory: the sender's pattern, the receiver's
    zeroed landing buffer, or for a phantom payload untouched anonymous
    memory at either end (its sizes without its bytes)."""
    if spec.payload == "phantom":
        return lazy_zeros(spec.total_bytes)
    return flow_pattern(spec) if spec.role == "sender" else bytearray(spec.total_bytes)


def register_flow_buffer(pd: Any, spec: FlowSpec, buf: bytearray | mmap.mmap) -> MR:
    """``buf`` registered for the flow end: the sender's for local reads, the
    receiver's for remote writes too, which a phantom payload's discards."""
    if spec.role == "sender":
        return pd.reg_mr(buf, Access.LOCAL_WRITE)
    mr = pd.reg_mr(buf, Access.LOCAL_WRITE | Access.REMOTE_WRITE)
    if spec.payload == "phantom":
        mr.discard_writes = True
    return mr


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


def collective_input(spec: CollectiveSpec, rank: int, iteration: int) -> np.ndarray:
    """Rank ``rank``'s input of ``iteration``: small integers of the spec's dtype
    (sums of up to 1024 ranks stay inside int32, so EPIC's saturating adds are exact)."""
    import numpy as np

    rng = np.random.default_rng([spec.seed, rank, iteration])
    count = spec.schedule()[iteration]
    if spec.dtype == "float32":
        return (rng.standard_normal(count) * 1000.0).astype(np.float32)
    return rng.integers(-(1 << 20), 1 << 20, count, dtype=np.dtype(spec.dtype))


def collective_inputs(spec: CollectiveSpec, iteration: int) -> list[np.ndarray]:
    """Every rank's input of ``iteration``, by rank."""
    return [collective_input(spec, r, iteration) for r in range(spec.size)]


def collective_expected(spec: CollectiveSpec, iteration: int,
                        inputs: list[np.ndarray] | None = None) -> np.ndarray | None:
    """What rank ``spec.rank`` must hold after collective ``iteration``: None
    where it receives nothing (a Reduce's other ranks, a Barrier).
    ``inputs``: collective_inputs(spec, iteration), if already drawn."""
    import numpy as np

    from hosts.commlib import split

    op, count = spec.sequence()[iteration]
    if op == "barrier" or (op == "reduce" and spec.rank != spec.root):
        return None
    xs = inputs if inputs is not None else collective_inputs(spec, iteration)
    if op == "all_gather":
        return np.concatenate(xs)
    if op == "broadcast":
        return xs[spec.root]
    if spec.dtype == "float32":           # the exact sum; collective_bound says how near
        exact = np.sum(np.stack(xs).astype(np.float64), axis=0)
        if op == "reduce_scatter":
            off, ln = split(count, spec.size)[spec.rank]
            return exact[off: off + ln]
        return exact
    total = np.zeros(count, dtype=np.dtype(spec.dtype))
    with np.errstate(over="ignore"):
        for x in xs:
            np.add(total, x, out=total)  # wraps exactly as CommLib's sums do
    if op == "reduce_scatter":
        off, ln = split(count, spec.size)[spec.rank]
        return total[off: off + ln]
    return total


def collective_bound(spec: CollectiveSpec, iteration: int, exact: np.ndarray,
                     inputs: list[np.ndarray] | None = None) -> np.ndarray | None:
    """The largest error a float32 sum through EPIC may have per element (the
    fixed-point rounding of every rank, hosts.commlib.epic.fixed_point_bound,
    plus float32 rounding); None where the result must be bit-exact.
    ``inputs``: collective_inputs(spec, iteration), if already drawn."""
    op, _count = spec.sequence()[iteration]
    if spec.dtype != "float32" or op in ("all_gather", "broadcast", "barrier"):
        return None
    import numpy as np

    from hosts.commlib.epic import fixed_point_bound, fixed_point_factor

    xs = inputs if inputs is not None else collective_inputs(spec, iteration)
    maxima = sum(float(np.max(np.abs(x))) for x in xs)
    # the ranks agree on a factor from an upper bound of the maxima (within 2^-24)
    bound = fixed_point_bound(spec.size, fixed_point_factor(maxima)) * (1 + 2.0**-20)
    return bound + np.abs(exact) * 2.0**-23


# A rank makes its collectives' inputs and expected results before the start
# barrier up to this much memory (the largest profile: 24 MiB), the rest at
# each collective's start.
PRECOMPUTE_BUDGET_BYTES = 256 << 20


@dataclass
class CollectiveExpectation:
    """One collective of a rank: its input (None once handed over, or for a
    Barrier), the result it must hold, the float tolerance and the result's
    sha256 (None where it receives nothing)."""

    x: np.ndarray | None
    want: np.ndarray | None
    bound: np.ndarray | None
    sha256: str | None

    @classmethod
    def make(cls, spec: CollectiveSpec, iteration: int) -> CollectiveExpectation:
        op = spec.sequence()[iteration][0]
        if op == "barrier":
            return cls(None, None, None, None)
        if op == "reduce" and spec.rank != spec.root:       # receives nothing
            return cls(collective_input(spec, spec.rank, iteration), None, None, None)
        xs = collective_inputs(spec, iteration)     # drawn once for all three
        want = collective_expected(spec, iteration, xs)
        assert want is not None
        x = xs[spec.rank]
        if x is want:       # a Broadcast's root: the communicator gets its own copy
            x = x.copy()
        return cls(x, want, collective_bound(spec, iteration, want, xs),
                   hashlib.sha256(want.tobytes()).hexdigest())

    def judge(self, got: np.ndarray | None) -> tuple[bool, str | None]:
        """Whether ``got`` is the result (bit-exact, or within the float
        bound), and its sha256."""
        import numpy as np

        want, bound = self.want, self.bound
        if want is None:
            return True, None
        if got is None:
            return False, None
        if bound is not None:
            ok = (got.dtype == np.float32 and got.shape == want.shape
                  and bool(np.all(np.abs(got.astype(np.float64) - want) <= bound)))
        else:
            ok = got.dtype == want.dtype and np.array_equal(got, want)
        # a bit-exact result's hash is the expected one's, made beforehand
        return ok, (self.sha256 if ok and bound is None
                    else hashlib.sha256(got.tobytes()).hexdigest())


# ---------------------------------------------------------------------------
# rate controller wrapper: CNP events with their exact time


class LoggedRate:
    """A RateController that logs each CNP, then delegates."""

    def __init__(self, inner: Any, log: EventLog, flow: str) -> None:
        self.inner = inner
        self.log = log
        self.flow = flow
        self.cnps = 0

    @property
    def rate_bps(self) -> float:
        return float(self.inner.rate_bps)

    def on_cnp(self, now: int) -> None:
        before = self.inner.rate_bps
        self.inner.on_cnp(now)
        self.cnps += 1
        self.log.emit("cnp_rx", t_ns=now, flow=self.flow, rate_before_bps=before,
                      rate_bps=self.inner.rate_bps)

    def on_bytes_sent(self, nbytes: int, now: int) -> None:
        self.inner.on_bytes_sent(nbytes, now)

    def bytes_to_increase(self) -> int | None:
        """The inner controller's (None for one without a byte counter)."""
        left = getattr(self.inner, "bytes_to_increase", None)
        return left() if callable(left) else None

    def next_deadline(self) -> int | None:
        d: int | None = self.inner.next_deadline()
        return d

    def on_timer(self, now: int) -> None:
        self.inner.on_timer(now)


def _dcqcn(spec: JobSpec, scale: Scale) -> DcqcnParams:
    d = spec.transport.dcqcn or {}
    return DcqcnParams.for_scale(scale, preset=d.get("preset", DEFAULT_PRESET),
                                 **dict(d.get("overrides", {})))


def make_rate_controller(spec: JobSpec, scale: Scale, log: EventLog | None = None,
                         flow: str = "") -> Any:
    """DCQCN for the spec's scale (its cuts and increases go to ``log`` as
    ``dcqcn`` events of ``flow``), or a fixed rate at the scale's line rate."""
    if spec.transport.dcqcn is None:
        return FixedRate(scale.line_rate_bps)
    trace = None
    if log is not None:
        def trace(ev: dict[str, Any]) -> None:
            log.emit("dcqcn", flow=flow, **ev)
    return Dcqcn(_dcqcn(spec, scale), now_ns(), on_event=trace)


def cnp_interval_ns(spec: JobSpec, scale: Scale) -> int:
    """The notification point's CNP interval: the spec's DCQCN preset's (the
    default preset's when DCQCN is off at the senders)."""
    return _dcqcn(spec, scale).cnp_interval_ns


def dcqcn_params(spec: JobSpec) -> dict[str, Any] | None:
    if spec.transport.dcqcn is None:
        return None
    return _dcqcn(spec, Scale(**spec.transport.scale)).as_dict()


# ---------------------------------------------------------------------------
# flows


def _set_qp_dscp(qp: QP, dscp: int, flow: str) -> None:
    """The DSCP of the QP's next packets (an rxe host's shim rewrites it on the
    wire, hosts.roce.rxe_dcqcn.RxeDcqcnShim.set_dscp)."""
    from hosts.roce.shaping import ShapingError

    try:
        qp.dscp = dscp
    except (ShapingError, VerbsError) as e:
        raise AgentError(f"flow {flow}: DSCP {dscp}: {e}") from e


class _Flow:
    """One QP end and its application loop."""

    def __init__(self, agent: Agent, spec: FlowSpec) -> None:
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
        self.peer: dict[str, Any] = {}
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

    def info(self) -> dict[str, Any]:
        return {"ip": self.agent.spec.ip, "port": ROCE_UDP_PORT, "qpn": self.qp.qp_num,
                "psn": self.psn, "addr": self.mr.addr, "rkey": self.mr.rkey,
                "total_bytes": self.spec.total_bytes, "role": self.spec.role}

    def connect(self, peer: dict[str, Any]) -> None:
        if int(peer["total_bytes"]) != self.spec.total_bytes or peer["role"] == self.spec.role:
            raise AgentError(f"flow {self.name}: the peer's spec does not match "
                             f"(peer {peer['role']} of {peer['total_bytes']} bytes)")
        if peer["ip"] != self.spec.peer_ip:
            raise AgentError(f"flow {self.name}: peer is {peer['ip']}, spec says {self.spec.peer_ip}")
        self.peer = peer
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
                remote_addr=int(self.peer["addr"]) + i * s.msg_bytes,
                rkey=int(self.peer["rkey"]), imm_data=i | (FINAL_IMM if final else 0)))
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
                    # rxe: the QP's HTB class counts its bytes (hosts.roce.rxe_dcqcn);
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

    def finalize(self) -> None:
        end, self._end = self._end, None
        if end is not None:
            end.log()

    def progress(self) -> tuple[int, int]:
        return self.completed, self.end_count


class _MessagePool:
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

    def __init__(self, agent: Agent, spec: FlowSpec) -> None:
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
        self.peer: dict[str, Any] = {}
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

    def info(self) -> dict[str, Any]:
        return {"ip": self.agent.spec.ip, "port": ROCE_UDP_PORT,
                "qpns": [qp.qp_num for qp in self.qps], "psns": self.psns,
                "addr": self.mr.addr, "rkey": self.mr.rkey,
                "total_bytes": self.spec.total_bytes, "role": self.spec.role}

    def connect(self, peer: dict[str, Any]) -> None:
        if (int(peer["total_bytes"]) != self.spec.total_bytes or peer["role"] == self.spec.role
                or len(peer.get("qpns", ())) != len(self.qps)):
            raise AgentError(f"flow {self.name}: the peer's spec does not match (peer "
                             f"{peer['role']} of {peer['total_bytes']} bytes over "
                             f"{len(peer.get('qpns', ()))} connections)")
        if peer["ip"] != self.spec.peer_ip:
            raise AgentError(f"flow {self.name}: peer is {peer['ip']}, spec says {self.spec.peer_ip}")
        self.peer = peer
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
                remote_addr=int(self.peer["addr"]) + self.offsets[i],
                rkey=int(self.peer["rkey"]), imm_data=i))
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
        and the shim: hosts.agent.Agent.rxe_qp_stats)."""
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

    def finalize(self) -> None:
        end, self._end = self._end, None
        if end is not None:
            end.log()

    def progress(self) -> tuple[int, int]:
        return self.completed, self.end_count


# ---------------------------------------------------------------------------
# collective


@dataclass(frozen=True)
class Offer:
    """One agent's part of an exchange of connection data before the start:
    ``rank`` of ``size`` parties contribute ``info`` under ``group``/``tag``
    and each gets every party's, in rank order (a flow's two ends, a ring's
    ranks). The Mininet engine exchanges offers through files in the
    rendezvous directory; the virtual-time engine hands them over in memory."""

    group: str
    tag: str
    rank: int
    size: int
    info: Any


class _Collective:
    def __init__(self, agent: Agent, spec: CollectiveSpec) -> None:
        import numpy as np

        from hosts.commlib.hierarchical import make_ring

        self.agent = agent
        self.spec = spec
        self.schedule = spec.schedule()
        itemsize = np.dtype(spec.dtype).itemsize
        n = max(c * (spec.size if op == "all_gather" else 1) for op, c in spec.sequence())
        scale = agent.scale
        channel = iter(range(1 << 30))      # the factory is called once per channel, in order

        def rate_controller() -> Any:
            return make_rate_controller(agent.spec, scale, agent.log,
                                        f"rank{spec.rank}-ch{next(channel)}")

        self.comm: Any
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
        self.op: Any = None
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
            return "epic", f"gid{self.comm.endpoint.gid}"
        return "collective", f"commlib-job{self.spec.job_id}"

    def offer(self) -> Offer:
        """The rank's connection data: for a ring, exchanged with the other ranks;
        for EPIC, handed to the controller, which installs the switch's group
        from every rank's (testbed.epic.install_from_rendezvous)."""
        return Offer(*self.exchange, self.spec.rank, self.spec.size, self.comm.local_info())

    def connect(self, infos: list[Any]) -> None:
        if self.spec.scheme == "epic":
            self.comm.connect()     # the switch's group is installed: nothing to learn
        else:
            self.comm.connect(infos)

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

            x: Any = np.broadcast_to(np.zeros(1, dtype=spec.dtype), (count,))
        else:
            x, self._current.x = self._current.x, None     # the communicator's now
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
            for i, qp in enumerate(self.comm.qps):
                # the udp provider counts a QP's packets, rxe's only its work requests
                if i and not qp.stats.get("tx_pkts", qp.stats.get("send_wrs", 0)):
                    continue
                report = getattr(qp.pacer, "report", None)
                state = getattr(qp.rate_controller, "state", None)
                self.agent.log.emit("pacer_report", flow=f"rank{self.spec.rank}-epic"
                                    + (f"-g{i}" if i else ""), qp=self.agent.qp_stats(qp),
                                    pacer=report() if callable(report) else None,
                                    dcqcn=state() if callable(state) else None)
            return
        # a 2D ring reports each dimension's QPs under its name
        rings = getattr(self.comm, "rings", (("", self.comm),))
        for dim, ring in rings:
            rank = f"rank{self.spec.rank}" + (f"-{dim}" if dim else "")
            for c, lanes in enumerate(ring.right):
                for lane, qp in enumerate(lanes):
                    report = getattr(qp.pacer, "report", None)
                    state = getattr(qp.rate_controller, "state", None)
                    self.agent.log.emit("pacer_report", flow=f"{rank}-ch{c}"
                                        + (f"-lane{lane}" if lane else ""),
                                        qp=self.agent.qp_stats(qp),
                                        pacer=report() if callable(report) else None,
                                        dcqcn=state() if callable(state) else None)
            for c, lanes in enumerate(ring.left):
                for lane, qp in enumerate(lanes):
                    self.agent.log.emit("qp_report", flow=f"{rank}-left{c}"
                                        + (f"-lane{lane}" if lane else ""),
                                        qp=self.agent.qp_stats(qp))

    def sample(self, now: int) -> None:
        pass

    def progress(self) -> tuple[int, int]:
        return self.iteration, len(self.schedule)


# ---------------------------------------------------------------------------
# the agent


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
        self.shaper: Any = None      # udp hosts with a line qdisc: the QPs' HTB classes
        self._host_line = (HostLine(self.scale.line_rate_bps, now_ns())
                           if spec.transport.qdisc_ahead_packets else None)
        self._pause: Any = None      # hosts.roce.pfc.HostPause, with transport.pfc
        self.ctx: Any
        self.provider: Any
        self._device_base: dict[str, int] = {}
        self.works: list[Any] = []
        self._done_barrier: DoneBarrier | None = None
        self._deadline = 0
        self._rx_lag: Any = None
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
        the host's egress to the NIC's line rate (hosts.roce.rxe_dcqcn)."""
        from hosts.roce.rxe_dcqcn import RxeDcqcnShim, ShimError
        from hosts.roce.rxe_provider import RxeContext, RxeUnavailable

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
                ifname=ifname, local_ip=spec.ip, local_mac=_link_mac(ifname),
                gateway_mac=_gateway_mac(ifname), line_rate_bps=self.scale.line_rate_bps,
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
        from hosts.roce.rxe_dcqcn import ShimError
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
        from hosts.roce.rxe_provider import read_hw_counters

        self._device_base = read_hw_counters(self.ctx.device)

    def rxe_stats(self, flow: _Flow, final: bool) -> dict[str, int]:
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
            from hosts.roce.rxe_provider import read_hw_counters

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
        from hosts.roce.rxe_provider import read_hw_counters

        now = read_hw_counters(self.ctx.device)
        return {k: v - self._device_base.get(k, 0) for k, v in now.items()
                if k != "lifespan"}     # lifespan: the counters' cache time, not a count

    def qp_stats(self, qp: Any) -> dict[str, int]:
        """A collective QP's counters: the udp provider's own; on rxe, the
        provider's work-request counts, the shim's CE and CNP counts, and its
        counts from the wire (retransmits, naks_rcvd, rto: rxe counts packets per
        device only; hosts.roce.rxe_dcqcn.WireCounts)."""
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

    def _host_pause(self) -> Any:
        """The host's PFC state, shared by its senders (transport.pfc)."""
        if self._pause is None and self.spec.transport.pfc:
            from hosts.roce.pfc import HostPause, PauseError

            try:
                sim_sock = getattr(self.provider, "pause_socket", None)
                if sim_sock is not None:     # a simulated NIC hands its pause frames over
                    self._pause = HostPause(self.spec.ip, self.scale.line_rate_bps,
                                            sock=sim_sock(), clock=now_ns)
                else:
                    self._pause = HostPause(_ifname_of(self.spec.ip), self.scale.line_rate_bps,
                                            receive_lag=self.provider.receive_lag)
            except PauseError as e:
                raise AgentError(f"host {self.spec.host}: {e}") from e
            # a pause frame (an XON) wakes the agent, as it reaches a NIC at once
            self.provider.watch(self._pause)
        return self._pause

    def _host_shaper(self) -> Any:
        if self.shaper is None:
            from hosts.roce.shaping import HtbShaper

            t = self.spec.transport
            self.shaper = HtbShaper(_ifname_of(self.spec.ip), self.scale.line_rate_bps,
                                    int(DEFAULT_BURST_BYTES * t.pacer_burst_packets),
                                    own_root=False)
        return self.shaper

    def run(self) -> None:
        """The agent in its own process: exchange connection data and meet the
        phase's other agents through files in the rendezvous directory, run
        until every agent is done, waiting on the provider in between."""
        spec = self.spec
        offers = self.prepare()
        gathered: dict[tuple[str, str], list[Any]] = {}
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

    def connect(self, gathered: dict[tuple[str, str], list[Any]]) -> None:
        """Connect every QP from the exchanges' results ((group, tag) -> every
        party's info, in rank order), then what must happen before the start."""
        spec = self.spec
        for w in self.works:
            if isinstance(w, _Collective):
                w.connect(gathered[w.exchange])
            else:
                w.connect(gathered[("flows", w.name)][1 if w.sender else 0])
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
            from hosts.roce.rxe_dcqcn import ShimError

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


def _link_mac(ifname: str) -> str:
    try:
        return Path(f"/sys/class/net/{ifname}/address").read_text().strip()
    except OSError as e:
        raise AgentError(f"interface {ifname}: cannot read its MAC address: {e}") from e


def _ifname_of(ip: str) -> str:
    """The interface holding address ``ip`` (a Mininet host's one link)."""
    from pyroute2 import IPRoute

    with IPRoute() as ipr:
        idx = [a["index"] for a in ipr.get_addr(family=socket.AF_INET, address=ip)]
        names = [ipr.get_links(i)[0].get_attr("IFLA_IFNAME") for i in idx[:1]]
    if not names:
        raise AgentError(f"no interface holds {ip}")
    return str(names[0])


def _gateway_mac(ifname: str) -> str:
    """The MAC of the permanent neighbour on ``ifname``: an rxe host's gateway
    (testbed.rxe_host.RxeHost installs exactly one)."""
    from pyroute2 import IPRoute

    NUD_PERMANENT = 0x80
    with IPRoute() as ipr:
        idx = ipr.link_lookup(ifname=ifname)
        macs = [n.get_attr("NDA_LLADDR") for n in ipr.get_neighbours(ifindex=idx[0])
                if n["state"] & NUD_PERMANENT] if idx else []
    macs = [m for m in macs if m]
    if len(macs) != 1:
        raise AgentError(f"interface {ifname}: expected one permanent neighbour (the "
                         f"gateway), found {len(macs)}")
    return str(macs[0])


def _die_with_parent() -> bool:
    """Ask for SIGTERM when the runner dies; False if it is already gone. Also
    asks for exact timer wake-ups: the default 50 us slack would make every
    paced packet late."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(PR_SET_PDEATHSIG, signal.SIGTERM)
        libc.prctl(PR_SET_TIMERSLACK, 1)
    except (OSError, AttributeError):
        pass
    return os.getppid() != 1


def _on_sigterm(signum: int, _frame: Any) -> None:
    raise AgentError(f"stopped by signal {signal.Signals(signum).name}")


def _fail(log: EventLog, host: str, msg: str) -> int:
    log.emit("error", message=msg)
    print(f"agent {host}: error: {msg}", file=sys.stderr)
    return 1


def _freeze_heap() -> None:
    """Leave what start-up made (modules, numpy, the spec, the agent's
    buffers: most of the heap) out of the cyclic GC's full collections. Each
    of those scanned it all and stopped the agent for 5 to 16 ms, several
    packet times of a paced sender at a few Mb/s (symphony-ring: 1 to 2 % of
    every flow's sends late from them alone)."""
    freeze = getattr(gc, "freeze", None)     # CPython 3.7+; PyPy has none
    if freeze is not None:
        gc.collect()
        freeze()


# Set to a directory: every agent runs under cProfile and writes
# <phase>-<host>.pstats there (``python -m pstats`` reads it). For finding
# where an agent's time goes, not for results: the profiler costs each call
# several times its own time, so such a run rarely keeps up with its clock.
PROFILE_ENV = "P4TB_AGENT_PROFILE"


def _run_profiled(agent: Agent, spec: JobSpec, log: EventLog) -> None:
    import cProfile

    out = Path(os.environ[PROFILE_ENV]) / f"{spec.phase}-{spec.host}.pstats"
    log.emit("profiling", path=str(out))
    prof = cProfile.Profile()
    try:
        prof.runcall(agent.run)
    finally:
        with contextlib.suppress(OSError):
            out.parent.mkdir(parents=True, exist_ok=True)
            prof.dump_stats(str(out))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m hosts.agent",
                                 description="Run a job spec in this host; write JSONL events.")
    ap.add_argument("--spec", required=True, help="job spec (JSON, hosts.agent_spec.JobSpec)")
    ap.add_argument("--events", required=True, help="write events here (JSON lines, appended)")
    args = ap.parse_args(argv)
    if not _die_with_parent():
        print("agent: the process that started this agent is gone", file=sys.stderr)
        return 3
    signal.signal(signal.SIGTERM, _on_sigterm)
    try:
        spec = JobSpec.from_json(Path(args.spec).read_text())
    except OSError as e:
        print(f"agent: cannot read spec {args.spec}: {e.strerror}", file=sys.stderr)
        return 2
    except SpecError as e:
        print(f"agent: invalid spec {args.spec}: {e}", file=sys.stderr)
        return 2
    log = EventLog(args.events, spec.host)
    log.emit("agent_start", pid=os.getpid(), phase=spec.phase, spec=spec.to_dict(),
             interpreter=f"{platform.python_implementation()} {platform.python_version()}")
    agent: Agent | None = None
    try:
        agent = Agent(spec, log)
        _freeze_heap()
        if os.environ.get(PROFILE_ENV):
            _run_profiled(agent, spec, log)
        else:
            agent.run()
        return 0
    except AgentError as e:
        return _fail(log, spec.host, str(e))
    except KeyboardInterrupt:
        return _fail(log, spec.host, "interrupted")
    except Exception as e:  # a bug or an OS error: keep the traceback in the log
        traceback.print_exc(file=sys.stderr)
        return _fail(log, spec.host, f"{type(e).__name__}: {e}")
    finally:
        if agent is not None:
            agent.close()
        log.close()


if __name__ == "__main__":
    sys.exit(main())
