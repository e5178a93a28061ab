"""Job specs for the host agent (``python -m hosts.agent``): plain, typed data.

A :class:`JobSpec` says everything one agent does in one phase of a run: which
transport settings it uses (:class:`TransportSpec`: the scale setting, DCQCN
or a fixed rate, path MTU, how often to sample), which queue pairs it drives
(:class:`FlowSpec`, one per QP end: a sender posting RDMA WRITE_WITH_IMM
messages or the receiver they land at) and/or which collective rank it is
(:class:`CollectiveSpec`, a CommLib ring). Specs round-trip through JSON
(``to_json`` / ``from_json``), are validated on construction and are saved
into the run directory, so a run is described by what it saved.

Both ends of a flow carry the same ``flow`` name, sizes and seed: the sender
fills its buffer from the seed, the receiver checks what arrived against the
same bytes. Connection data (QPN, PSN, buffer address, rkey) is exchanged at
run time through files in ``rendezvous_dir`` (hosts.commlib.FileRendezvous).
"""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
import sys
from dataclasses import dataclass, field
from typing import Any, Literal

from hosts.roce.constants import (
    BTH_LEN,
    FRAME_OVERHEAD,
    ICRC_LEN,
    IMMDT_LEN,
    PATH_MTUS,
    RETH_LEN,
)

__all__ = [
    "TransportSpec",
    "FlowSpec",
    "CollectiveSpec",
    "JobSpec",
    "SpecError",
    "MAX_FLOW_BYTES",
    "message_wire_bytes",
    "agent_interpreter",
    "DTYPES",
    "COLLECTIVE_OPS",
    "EPIC_WINDOW",
    "INTERPRETERS",
    "PROVIDERS",
    "PAYLOADS",
]

# Integer types CommLib reduces (bit-exact sums); float32 through EPIC only (its
# fixed-point sums are checked against their error bound, hosts.commlib.epic).
DTYPES = ("int32", "int64", "float32")
COLLECTIVE_OPS = ("all_reduce", "reduce_scatter", "all_gather", "reduce", "broadcast",
                  "barrier")
# The EPIC switch's window (packets per rank in flight) unless a collective
# names its own: hosts.commlib.epic.WINDOW, the default of epic.p4's
# EPIC_WINDOW_LOG2 (a test keeps the three equal; this module stays free of
# numpy, which hosts.commlib needs).
EPIC_WINDOW = 32
# What runs an agent: "pypy" (pypy3: its JIT runs the per-packet transport
# several times faster), "python" (the runner's own interpreter), or "auto":
# pypy where installed, unless the job has a collective (CommLib needs numpy).
INTERPRETERS = ("auto", "pypy", "python")
PROVIDERS = ("udp", "rxe")
PAYLOADS = ("real", "phantom")     # FlowSpec.payload
AGENT_PYPY_ENV = "TESTBED_AGENT_PYPY"   # overrides the pypy3 executable


# The most bytes one flow carries. A message's index travels in its immediate
# data below the flag bit of a flow's last message (hosts.agent.FINAL_IMM, bit
# 31), and the transport refuses messages of 2^31 bytes or more: below 2^31
# bytes in total, every index and message fits at any message size. Nothing
# else is 32-bit (PSNs and MSNs wrap by design; buffer addresses and counters
# are Python ints). Memory is the other bound of a real payload: both ends hold
# the whole flow (the sender its data, the receiver its landing buffer), so a
# host needs about this much per flow it sends or receives (a phantom payload
# allocates none of it).
MAX_FLOW_BYTES = (1 << 31) - 1


class SpecError(ValueError):
    """A job spec that cannot be run (the message names the field)."""


def message_wire_bytes(msg_bytes: int, path_mtu: int, with_imm: bool = True) -> int:
    """The Ethernet frame bytes of one RDMA WRITE message (``WRITE_WITH_IMM`` when
    ``with_imm``) of ``msg_bytes``, sent once with ``path_mtu`` bytes of payload
    per packet.

    Every packet counts Ethernet + IPv4 + UDP + BTH + its payload + ICRC; the
    first packet adds the RETH, the last the ImmDt (``with_imm`` only) and the
    padding of its payload to a multiple of 4 bytes. No preamble, inter-frame
    gap or FCS: exactly the bytes a switch port's rate limiter counts.
    """
    npkts = max(1, -(-msg_bytes // path_mtu))
    last = msg_bytes - (npkts - 1) * path_mtu  # payload of the last packet
    total = npkts * (FRAME_OVERHEAD + BTH_LEN + ICRC_LEN) + RETH_LEN
    total += msg_bytes + (-last & 3)
    if with_imm:
        total += IMMDT_LEN
    return total


@dataclass(frozen=True)
class TransportSpec:
    """Transport settings of one agent (``scale``: hosts.roce.Scale fields)."""

    scale: dict[str, Any] = field(default_factory=dict)
    # None: a fixed rate at the scale's line rate. Else {"preset": "connectx" |
    # "zhu2015" | "hpcc" (default connectx), "overrides": {preset parameter: value in the
    # preset's own names and units, unscaled}} -> DcqcnParams.for_scale. The
    # receivers' notification point takes its CNP interval from the same preset.
    dcqcn: dict[str, Any] | None = None
    path_mtu: int = 1024
    sample_interval_us: int = 5000      # rate / rx samples of each flow
    late_threshold_packets: float = 1.0  # pacing lateness above this many packet times is "late"
    # Token bucket size in full-size packets: 1 loses every late wake-up's time for
    # good; 2 lets a sender catch up one packet time of lateness (bursts <= 2 packets).
    pacer_burst_packets: float = 2.0
    # > 0: the host's interface serialises at the line rate itself (an HTB qdisc,
    # testbed.net.shape_host) and each sending QP at its DCQCN rate (its own HTB
    # class, hosts/roce/shaping.py), so the pacer keeps up to this many
    # full-size packets queued there (hosts/roce/pacing.py, run-ahead mode).
    qdisc_ahead_packets: float = 0.0
    # The host's senders obey the PFC pause frames the switch sends to its
    # interface (hosts/roce/pfc.py; udp-provider hosts).
    pfc: bool = False
    # > 0: a received frame wakes the agent no sooner than this many us of the
    # modelled network after its previous wake-up, so it reads many frames
    # per wake-up (udp provider; hosts.roce.udp_provider.UdpProvider.wait).
    # ACKs and CNPs then leave up to this late; keep it well below the
    # verdict's feedback interval (hosts/roce/receive_lag.py, FEEDBACK_US).
    rx_holdoff_us: float = 0.0

    def __post_init__(self) -> None:
        if self.path_mtu not in PATH_MTUS:
            raise SpecError(f"transport.path_mtu must be one of {PATH_MTUS}")
        if self.pacer_burst_packets < 1:
            raise SpecError("transport.pacer_burst_packets must be >= 1")
        if self.qdisc_ahead_packets and self.qdisc_ahead_packets < self.pacer_burst_packets:
            raise SpecError("transport.qdisc_ahead_packets must be 0 (off) or at least "
                            "pacer_burst_packets")
        from hosts.roce.receive_lag import FEEDBACK_US

        if not 0 <= self.rx_holdoff_us < FEEDBACK_US:
            raise SpecError(f"transport.rx_holdoff_us must be in [0, {FEEDBACK_US:g}) us "
                            "(the feedback interval the fidelity verdict holds receivers to)")
        if self.sample_interval_us < 100:
            raise SpecError("transport.sample_interval_us must be >= 100")
        from hosts.roce.dcqcn import DEFAULT_PRESET, DcqcnParams
        from hosts.roce.scale import Scale

        try:
            scale = Scale(**self.scale)
        except (TypeError, ValueError) as e:
            raise SpecError(f"transport.scale: {e}") from e
        if self.dcqcn is not None:
            unknown = set(self.dcqcn) - {"preset", "overrides"}
            if unknown:
                raise SpecError(f"transport.dcqcn: unknown key(s) {sorted(unknown)} "
                                "(known: preset, overrides)")
            try:
                DcqcnParams.for_scale(scale, self.dcqcn.get("preset", DEFAULT_PRESET),
                                      **dict(self.dcqcn.get("overrides", {})))
            except (TypeError, ValueError) as e:
                raise SpecError(f"transport.dcqcn: {e}") from e


@dataclass(frozen=True)
class FlowSpec:
    """One end of an RC connection: ``count`` messages of ``msg_bytes`` each."""

    flow: str
    role: Literal["sender", "receiver"]
    peer_ip: str
    msg_bytes: int
    count: int
    window: int = 4                 # messages the sender keeps outstanding
    rate_bps: float | None = None   # application offered load; None = always backlogged
    seed: int = 0
    job_id: int = 0
    step: int = 0                   # flow tag: UDP source port tag_sport(step)
    start_delay_s: float = 0.0      # the sender posts its first message this long after the start
    dscp: int = 0                   # DSCP of the data packets (the switch's priority class)
    # The sender's first PSN. None: one derived from the flow's name (per flow
    # end, as real stacks pick them). 0 for flows a Symphony switch tracks:
    # their PSN is then the packet's position in the step (switches/p4/README.md).
    first_psn: int | None = None
    # A ReFlex flexible flow (sender only): {"alpha", "r", "t_int_us", "warmup",
    # "measure", "exploit", "low_dscp"}; its data packets carry ``low_dscp`` while
    # the flow is at low priority and ``dscp`` otherwise (hosts.reflex). With
    # r < 1 it may end early: the last message it posts carries the agent's
    # FINAL_IMM flag in its immediate data and the receiver ends there.
    flexible: dict[str, Any] | None = None
    # Sender only: once the receiver of the flow named here has everything, this
    # flow ends (its next message is its last, flagged as with r < 1), for a
    # flow whose later bytes would measure nothing. "" = run to ``count``.
    stop_after: str = ""
    # Messages that arrive on their own schedule, as an application's requests
    # do (one per message, seconds after the start, non-decreasing; count =
    # their number): message i is posted at its arrival on one of the flow's
    # ``qps`` connections that has nothing outstanding (the one idle longest),
    # or, when every connection is busy, as soon as one frees. () = the
    # messages are posted back to back on one QP, ``window`` at a time.
    arrivals_s: tuple[float, ...] = ()
    qps: int = 1                    # connections of a flow with arrivals_s
    # With arrivals_s: each message's own size (one per arrival; msg_bytes is
    # then their largest), for requests of varying size such as web-search
    # flows. () = every message msg_bytes.
    msg_sizes: tuple[int, ...] = ()
    # PAYLOADS: "real", the sender's pattern, checked by the receiver; or
    # "phantom", the same packets and timing without the data: both ends'
    # buffers are untouched anonymous memory (hosts.roce.verbs.lazy_zeros),
    # what arrives is counted but not stored, and the flow_end events carry
    # no digest and no bytes_ok. For flows whose bytes would not fit in memory.
    payload: str = "real"

    def __post_init__(self) -> None:
        if not self.flow or "/" in self.flow:
            raise SpecError(f"flow name {self.flow!r} must be non-empty without '/'")
        if self.payload not in PAYLOADS:
            raise SpecError(f"flow {self.flow}: payload {self.payload!r} unknown "
                            f"({', '.join(PAYLOADS)})")
        if not isinstance(self.arrivals_s, tuple):    # JSON gives a list
            object.__setattr__(self, "arrivals_s", tuple(self.arrivals_s))
        if not isinstance(self.msg_sizes, tuple):
            object.__setattr__(self, "msg_sizes", tuple(self.msg_sizes))
        if self.msg_sizes:
            self._check_sizes()
        if self.arrivals_s or self.qps != 1:
            self._check_arrivals()
        if self.stop_after and (self.role != "sender" or "/" in self.stop_after
                                or self.stop_after == self.flow):
            raise SpecError(f"flow {self.flow}: stop_after names another flow, on a sender")
        if self.start_delay_s < 0:
            raise SpecError(f"flow {self.flow}: start_delay_s must be >= 0")
        if not 0 <= self.dscp <= 63:
            raise SpecError(f"flow {self.flow}: dscp must be 0..63")
        if self.first_psn is not None and not 0 <= self.first_psn < 1 << 24:
            raise SpecError(f"flow {self.flow}: first_psn must be a 24-bit PSN")
        if self.flexible is not None:
            self._check_flexible()
        if self.role not in ("sender", "receiver"):
            raise SpecError(f"flow {self.flow}: role must be 'sender' or 'receiver'")
        if self.msg_bytes < 1 or self.count < 1 or self.window < 1:
            raise SpecError(f"flow {self.flow}: msg_bytes, count and window must be >= 1")
        if self.total_bytes > MAX_FLOW_BYTES:
            what = (str(self.total_bytes) if self.msg_sizes
                    else f"{self.msg_bytes} x {self.count}")
            raise SpecError(f"flow {self.flow}: {what} bytes, more "
                            f"than a flow may carry ({MAX_FLOW_BYTES} bytes: message "
                            "indexes and lengths are 31-bit)")
        if self.rate_bps is not None and self.rate_bps <= 0:
            raise SpecError(f"flow {self.flow}: rate_bps must be positive")
        if not 0 <= self.job_id <= 0xFF:
            raise SpecError(f"flow {self.flow}: job_id must fit 8 bits")

    def _check_arrivals(self) -> None:
        a = self.arrivals_s
        if not 1 <= self.qps <= 64:
            raise SpecError(f"flow {self.flow}: qps must be 1..64")
        if not a:
            raise SpecError(f"flow {self.flow}: qps > 1 needs arrivals_s (messages on "
                            "their own schedule)")
        if len(a) != self.count:
            raise SpecError(f"flow {self.flow}: {len(a)} arrivals_s for count {self.count} "
                            "messages (one arrival per message)")
        if a[0] < 0 or any(y < x for x, y in zip(a, a[1:], strict=False)):
            raise SpecError(f"flow {self.flow}: arrivals_s must be >= 0 and non-decreasing")
        if self.flexible is not None or self.rate_bps is not None or self.stop_after \
                or self.start_delay_s:
            raise SpecError(f"flow {self.flow}: arrivals_s sets when each message is posted: "
                            "no flexible, rate_bps, stop_after or start_delay_s with it")

    def _check_sizes(self) -> None:
        z = self.msg_sizes
        if not self.arrivals_s:
            raise SpecError(f"flow {self.flow}: msg_sizes needs arrivals_s (a pool's messages)")
        if len(z) != self.count or min(z) < 1 or max(z) != self.msg_bytes:
            raise SpecError(f"flow {self.flow}: msg_sizes must be {self.count} sizes >= 1, "
                            f"the largest equal to msg_bytes {self.msg_bytes}")

    def _check_flexible(self) -> None:
        f = dict(self.flexible or {})
        known = {"alpha", "r", "t_int_us", "warmup", "measure", "exploit", "low_dscp"}
        if unknown := set(f) - known:
            raise SpecError(f"flow {self.flow}: unknown flexible fields {sorted(unknown)}")
        if self.role != "sender":
            raise SpecError(f"flow {self.flow}: only a sender can be flexible")
        if "alpha" not in f or "t_int_us" not in f:
            raise SpecError(f"flow {self.flow}: flexible needs alpha and t_int_us")
        if self.count >= 1 << 31:
            raise SpecError(f"flow {self.flow}: a flexible flow has fewer than 2^31 messages")
        if not 0 <= int(f.get("low_dscp", 8)) <= 63:
            raise SpecError(f"flow {self.flow}: flexible.low_dscp must be 0..63")
        from hosts.reflex import Cycle, FlexibleParams

        try:
            FlexibleParams(alpha=float(f["alpha"]), r=float(f.get("r", 1.0)),
                           size=self.total_bytes)
            Cycle(t_int_ns=int(float(f["t_int_us"]) * 1000), warmup=int(f.get("warmup", 1)),
                  measure=int(f.get("measure", 1)), exploit=int(f.get("exploit", 3)))
        except ValueError as e:
            raise SpecError(f"flow {self.flow}: flexible: {e}") from e

    @property
    def total_bytes(self) -> int:
        return sum(self.msg_sizes) if self.msg_sizes else self.msg_bytes * self.count

    def message_bytes(self, i: int) -> int:
        """Message i's size."""
        return self.msg_sizes[i] if self.msg_sizes else self.msg_bytes


@dataclass(frozen=True)
class CollectiveSpec:
    """One CommLib rank running ``iterations`` collectives of ``count`` elements
    (or, with ``counts``, ``iterations`` collectives of each count in turn).

    Rank r's input of iteration i is a pure function of (seed, r, i), so every
    rank can compute the exact expected result and check it bit for bit.

    ``scheme`` "ring" runs the host ring collectives (``channels`` rings);
    "epic" runs them through an EPIC Mode-II switch (hosts.commlib.epic):
    ``epic`` = {"switch_ip", "qpn", "gid", "start_psn"} names the endpoint, and
    the rank waits for the controller to install the group (runner,
    ``PhasePlan.epic_group``) before connecting. EPIC adds int32, and float32
    as fixed point (checked within its error bound instead of bit for bit).
    ``epic_window`` is the switch's window W, packets per rank in flight
    (``1 << EPIC_WINDOW_LOG2`` of the program it runs: Topology.defines); the
    rank keeps at most W unacknowledged.

    ``ops`` runs a sequence of different collectives on one communicator
    instead: collective i of the sequence is ``ops[i]`` on ``counts[i]``
    elements, each run ``iterations`` times in a row (``root``: of reduce and
    broadcast; a barrier moves no data and ignores its count).

    ``dims`` = (local, groups) runs the ring's AllReduce as a 2D ring
    (hosts.commlib.hierarchical): ranks in groups of ``local`` consecutive
    ranks, ReduceScatter around each group, AllReduce across the groups,
    AllGather around each group; empty: one ring of all ranks."""

    rank: int
    size: int
    job_id: int = 1
    op: str = "all_reduce"
    dtype: str = "int64"
    count: int = 4096
    iterations: int = 1
    channels: int = 1
    seed: int = 0
    counts: tuple[int, ...] = ()
    scheme: Literal["ring", "epic"] = "ring"
    epic: dict[str, Any] | None = None
    epic_window: int = EPIC_WINDOW
    # Ring: every step's write starts at PSN 0 (one QP per lane; what a
    # Symphony switch reads as progress, hosts/commlib/communicator.py).
    step_psn_origin: bool = False
    # The first step number on the wire (steps count on from it, modulo 2**14):
    # a different base gives every step another UDP source port, so ECMP
    # hashes the job's flows onto other paths.
    step_base: int = 0
    ops: tuple[str, ...] = ()
    root: int = 0
    # "real": every byte exists and every result is checked bit for bit;
    # "phantom": the same packets and timing without the data (no buffers
    # kept, nothing reduced or checked: hosts.commlib.communicator), for runs
    # whose ranks' real buffers would not fit in memory. Through EPIC: int32
    # AllReduce and Barrier (the switch adds the zeros the packets carry).
    payload: str = "real"
    # The host library's own time per step, in us of the modelled NIC's time
    # (scaled by the transport's slowdown): each ring step's write, and each
    # EPIC round's first send, is posted this long after it became ready.
    step_overhead_us: float = 0.0
    dims: tuple[int, ...] = ()

    def __post_init__(self) -> None:
        if self.dims:
            from hosts.commlib.hierarchical import check_dims

            try:
                check_dims(self.size, self.dims)
            except ValueError as e:
                raise SpecError(f"collective.dims: {e}") from None
            if self.scheme != "ring":
                raise SpecError("collective.dims is a ring's: it needs scheme 'ring'")
            other = {op for op, _n in self.sequence()} - {"all_reduce", "barrier"}
            if other:
                raise SpecError(f"collective.dims: a 2D ring runs all_reduce and barrier, "
                                f"not {', '.join(sorted(other))}")
        if self.payload not in ("real", "phantom"):
            raise SpecError(f"collective.payload {self.payload!r} unknown (real, phantom)")
        if not self.step_overhead_us >= 0:
            raise SpecError("collective.step_overhead_us must be >= 0")
        if not 0 <= self.step_base <= 0x3FFF:
            raise SpecError(f"collective.step_base {self.step_base} must be 0..16383")
        if not 0 <= self.rank < self.size:
            raise SpecError(f"collective.rank {self.rank} out of range for size {self.size}")
        for op in (self.op, *self.ops):
            if op not in COLLECTIVE_OPS:
                raise SpecError(f"collective.op {op!r} unknown (known: "
                                f"{', '.join(COLLECTIVE_OPS)})")
        if self.ops and self.counts and len(self.counts) != len(self.ops):
            raise SpecError(f"collective.counts has {len(self.counts)} entries, ops "
                            f"{len(self.ops)}: give one count per op")
        if not 0 <= self.root < self.size:
            raise SpecError(f"collective.root {self.root} out of range for size {self.size}")
        if self.dtype not in DTYPES:
            raise SpecError(f"collective.dtype must be one of {DTYPES} (bit-exact checks)")
        if self.dtype == "float32" and self.scheme != "epic":
            raise SpecError("collective.dtype 'float32' runs through EPIC only (scheme 'epic'): "
                            "the ring's float sums are not bit-exact")
        if self.count < 1 or self.iterations < 1 or self.channels < 1:
            raise SpecError("collective.count, iterations and channels must be >= 1")
        if any(c < 1 for c in self.counts):
            raise SpecError("collective.counts must all be >= 1")
        if self.scheme not in ("ring", "epic"):
            raise SpecError(f"collective.scheme {self.scheme!r} unknown (ring, epic)")
        if self.scheme == "epic":
            if self.dtype not in ("int32", "float32"):
                raise SpecError("collective.scheme 'epic' adds int32 (and float32 as fixed "
                                "point): set dtype 'int32' or 'float32'")
            missing = {"switch_ip", "qpn", "gid"} - set(self.epic or {})
            if missing:
                raise SpecError(f"collective.epic needs {sorted(missing)}")
            ops = {op for op, _n in self.sequence()}
            if self.payload == "phantom" and (
                    self.dtype != "int32" or not ops <= {"all_reduce", "barrier"}):
                raise SpecError("collective.payload 'phantom' through EPIC runs int32 "
                                "AllReduce and Barrier only")
        w = self.epic_window
        if isinstance(w, bool) or not isinstance(w, int) or not 2 <= w <= 1 << 23 or w & (w - 1):
            raise SpecError(f"collective.epic_window {w!r} must be a power of two from 2 to "
                            f"{1 << 23} packets (1 << EPIC_WINDOW_LOG2 of the switch's program)")
        if self.scheme != "epic" and w != EPIC_WINDOW:
            raise SpecError("collective.epic_window is the EPIC switch's window: it needs "
                            "scheme 'epic'")

    def sequence(self) -> list[tuple[str, int]]:
        """(op, element count) of each collective, in order."""
        if self.ops:
            counts = self.counts or (self.count,) * len(self.ops)
            return [(op, c) for op, c in zip(self.ops, counts, strict=True)
                    for _ in range(self.iterations)]
        return [(self.op, c) for c in (self.counts or (self.count,))
                for _ in range(self.iterations)]

    def schedule(self) -> list[int]:
        """The element count of each collective, in order."""
        return [c for _, c in self.sequence()]


@dataclass(frozen=True)
class JobSpec:
    """What one agent runs in one phase."""

    host: str
    ip: str
    phase: str = "main"
    transport: TransportSpec = field(default_factory=TransportSpec)
    flows: tuple[FlowSpec, ...] = ()
    collective: CollectiveSpec | None = None
    rendezvous_dir: str = ""     # filled in by the runner
    barrier: tuple[int, int] = (0, 1)  # (rank, size) among the phase's agents: common start
    start_delay_s: float = 0.05  # after the barrier, everyone starts at max(ready) + this
    timeout_s: float = 60.0
    progress_interval_s: float = 0.5
    interpreter: str = "python"  # INTERPRETERS; see agent_interpreter
    # PROVIDERS: "udp" (the userspace transport, hosts.roce.udp_provider) or "rxe"
    # (the host's rdma_rxe device through pyverbs, with the DCQCN shim)
    provider: str = "udp"

    def __post_init__(self) -> None:
        if self.provider not in PROVIDERS:
            raise SpecError(f"job for {self.host}: provider {self.provider!r} is not one of "
                            f"{', '.join(PROVIDERS)}")
        if self.provider == "rxe" and self.transport.pfc:
            raise SpecError(f"job for {self.host}: transport.pfc needs udp-provider hosts "
                            "(an rxe host's senders are the kernel's; nothing of the "
                            "testbed's reads pause frames for them); an experiment's "
                            "-p pfc=false runs it lossy")
        if self.provider == "rxe" and (
                float(self.transport.scale.get("nic_latency_us", 0.0)) or (
                    self.collective is not None and self.collective.step_overhead_us)):
            raise SpecError(f"job for {self.host}: an rxe host's NIC and its posts are the "
                            "kernel's: no modelled nic_latency_us or step_overhead_us")
        phantom = next((f.flow for f in self.flows if f.payload == "phantom"), None)
        if self.provider == "rxe" and phantom is not None:
            raise SpecError(f"job for {self.host}: flow {phantom}: phantom payloads need "
                            "udp-provider hosts (an rxe host's kernel writes every byte into "
                            "real memory); run it with real payloads")
        if self.provider == "rxe" and self.interpreter == "pypy":
            raise SpecError(f"job for {self.host}: rxe hosts need pyverbs, which the pypy "
                            "interpreter lacks; use interpreter 'python' or 'auto'")
        if self.interpreter not in INTERPRETERS:
            raise SpecError(f"job for {self.host}: interpreter {self.interpreter!r} is not one "
                            f"of {', '.join(INTERPRETERS)}")
        if self.interpreter == "pypy" and self.collective is not None:
            raise SpecError(f"job for {self.host}: a collective needs numpy, which the pypy "
                            "interpreter lacks; use interpreter 'python' or 'auto'")
        if not self.flows and self.collective is None:
            raise SpecError(f"job for {self.host}: no flows and no collective")
        names = [f.flow for f in self.flows]
        if len(set(names)) != len(names):
            raise SpecError(f"job for {self.host}: a flow name appears twice")
        r, n = self.barrier
        if not 0 <= r < n:
            raise SpecError(f"job for {self.host}: barrier rank {r} out of range {n}")
        if self.timeout_s <= 0:
            raise SpecError("timeout_s must be positive")

    # -- JSON ------------------------------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), indent=2, sort_keys=True)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> JobSpec:
        try:
            d = dict(d)
            d["transport"] = TransportSpec(**d.get("transport", {}))
            d["flows"] = tuple(FlowSpec(**f) for f in d.get("flows", ()))
            c = d.get("collective")
            if c is not None:
                c = dict(c, **{k: tuple(c[k]) for k in ("counts", "ops", "dims") if k in c})
            d["collective"] = CollectiveSpec(**c) if c is not None else None
            if "barrier" in d:
                d["barrier"] = tuple(d["barrier"])
            return cls(**d)
        except TypeError as e:
            raise SpecError(f"bad job spec: {e}") from e

    @classmethod
    def from_json(cls, text: str) -> JobSpec:
        try:
            d = json.loads(text)
        except json.JSONDecodeError as e:
            raise SpecError(f"job spec is not JSON: {e}") from e
        if not isinstance(d, dict):
            raise SpecError("job spec must be a JSON object")
        return cls.from_dict(d)


def _pypy() -> str | None:
    return os.environ.get(AGENT_PYPY_ENV) or shutil.which("pypy3")


def agent_interpreter(spec: JobSpec) -> str:
    """The executable that runs ``spec``'s agent (see INTERPRETERS). Raises
    SpecError if the spec asks for pypy and none is installed."""
    if spec.interpreter == "python":
        return sys.executable
    exe = _pypy()
    if spec.interpreter == "pypy":
        if exe is None:
            raise SpecError(f"job for {spec.host}: interpreter 'pypy' needs pypy3 "
                            f"(apt-get install pypy3, or set {AGENT_PYPY_ENV})")
        return exe
    usable = spec.collective is None and spec.provider != "rxe"   # numpy, pyverbs
    return exe if exe is not None and usable else sys.executable
