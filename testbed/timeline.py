"""Reading a run's timelines and the analysis helpers experiments share.

A run directory (written by testbed.runner) holds, per phase,
``phases/<phase>/<host>.events.jsonl`` (the host agent's events) and
``phases/<phase>/switch.jsonl`` (switch samples: ``t_ns``, ``queues``
{port: depth}, ``tx_bytes`` {port: bytes}, ``lag_us``, ``kernel_drops``),
plus ``phases/<phase>/switch_stats.json`` (switch counters before and after
the phase, and the queue watermark per port). All times are CLOCK_MONOTONIC
nanoseconds, one time base for hosts and switch.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypedDict, cast

from hosts.agent_spec import message_wire_bytes

if TYPE_CHECKING:
    from testbed.cpu_usage import CpuRecord

__all__ = [
    "read_jsonl",
    "PhaseData",
    "PhaseStats",
    "SwitchCounters",
    "SwitchSample",
    "load_phase",
    "phase_names",
    "phase_losses",
    "PhaseLosses",
    "HostPauses",
    "jain_index",
    "value_at",
    "window_rate",
    "rate_series",
    "goodput_fraction",
    "payload_efficiency",
]


def read_jsonl(path: str | Path) -> list[dict[str, Any]]:
    """JSON objects, one per line; a torn last line (a killed writer) is skipped,
    a bad line elsewhere is an error."""
    p = Path(path)
    if not p.exists():
        return []
    lines = p.read_text(errors="replace").splitlines()
    out = []
    for i, line in enumerate(lines):
        if not line.strip():
            continue
        try:
            out.append(json.loads(line))
        except json.JSONDecodeError as e:
            if i == len(lines) - 1:
                break
            raise ValueError(f"{p}:{i + 1}: not JSON: {e}") from e
    return out


class SwitchSample(TypedDict, total=False):
    """A sample of a switch's queues and counters (a line of ``switch.jsonl``;
    the daemon's ``switch_sample``): per port (by its number as a string)
    the queue depth (packets), queue drops, bytes sent and received; the
    pipeline's drops by reason, kernel drops and processing lag."""

    t_ns: int
    queues: dict[str, int]
    queue_drops: dict[str, int]
    tx_bytes: dict[str, int]
    rx_bytes: dict[str, int]
    drops: dict[str, int]
    kernel_drops: int
    lag_us: LagFigures


class LagFigures(TypedDict, total=False):
    """A soft switch's processing lag (us): samples, their mean and maximum."""

    samples: int
    mean: float
    max: float


class PortCounters(TypedDict, total=False):
    """A switch port's receive counters (the daemon's ``ports``)."""

    frames: int
    bytes: int
    rx_out_of_order: int


class SwitchCounters(TypedDict, total=False):
    """A switch's statistics (the daemon's ``switch_stats``; a fabric's pooled,
    testbed.runner.switch_stats.merge_switch_stats); ``switch``: the
    pipeline's own counters, by the runtime's names. BMv2 reports none ({})."""

    switch: dict[str, Any]
    ports: dict[str, PortCounters]
    lag_us: LagFigures
    kernel_drops: int
    unconnected_tx: int
    rx_out_of_order: int
    rx_behind_clock: int
    rx_frames: int
    rx_behind_clock_max_us: int


class SwitchBeforeAfter(TypedDict):
    """One switch of a fabric in ``switch_stats.json``."""

    before: SwitchCounters
    after: SwitchCounters
    qdepth_max: dict[str, int] | None


class PhaseStats(TypedDict, total=False):
    """A phase's ``switch_stats.json``: the switch counters before and after
    it (a fabric's pooled, and per switch in ``switches``), the queue
    watermark per port, the statistics poller's samples and error, the CPU
    record and the hosts' line qdiscs (Mininet engine), the late commands."""

    before: SwitchCounters
    after: SwitchCounters
    qdepth_max: dict[str, int] | None
    switches: dict[str, SwitchBeforeAfter]
    late_commands: list[LateCommand]
    poller_samples: int
    poller_error: str | None
    wall_s: float | None
    engine: str
    sim_s: float
    events: int
    cpu: CpuRecord
    host_qdiscs: dict[str, dict[str, int]]
    realtime_agents: dict[str, bool | str]
    # Topology.observed_registers after the phase: switch -> register ->
    # index -> value (non-zero entries)
    registers: dict[str, dict[str, dict[str, int]]]


class LateCommand(TypedDict):
    """A control-plane line applied during a phase, and when."""

    t_s: float
    line: str
    applied_ns: int
    start_ns: int


@dataclass
class PhaseData:
    name: str
    dir: Path
    events: dict[str, list[dict[str, Any]]] = field(default_factory=dict)  # by host
    switch: list[SwitchSample] = field(default_factory=list)
    stats: PhaseStats = field(default_factory=lambda: PhaseStats())
    plan: dict[str, Any] = field(default_factory=dict)

    # events by kind, then by flow, each in time order: built on first use,
    # again whenever ``events`` changed (a figure asks per flow and kind, and
    # scanning a long phase's events each time cost seconds per figure)
    _index_of: tuple[tuple[str, int, int], ...] = field(default=(), init=False, repr=False,
                                                        compare=False)
    _by_kind: dict[Any, list[dict[str, Any]]] = field(default_factory=dict, init=False,
                                                      repr=False, compare=False)
    _by_flow: dict[Any, dict[Any, list[dict[str, Any]]]] = field(
        default_factory=dict, init=False, repr=False, compare=False)

    def _kinds(self) -> dict[Any, list[dict[str, Any]]]:
        key = tuple((h, id(es), len(es)) for h, es in self.events.items())
        if key != self._index_of:
            by_kind: dict[Any, list[dict[str, Any]]] = {}
            for es in self.events.values():
                for e in es:
                    by_kind.setdefault(e.get("event"), []).append(e)
            for evs in by_kind.values():
                evs.sort(key=lambda e: e["t_ns"])
            self._index_of, self._by_kind, self._by_flow = key, by_kind, {}
        return self._by_kind

    def all_events(self, kind: str | None = None) -> list[dict[str, Any]]:
        if kind is None:
            evs = [e for es in self.events.values() for e in es]
            return sorted(evs, key=lambda e: e["t_ns"])
        return list(self._kinds().get(kind, ()))

    def flow_events(self, flow: str, kind: str, role: str | None = None) -> list[dict[str, Any]]:
        kinds = self._kinds()
        flows = self._by_flow.get(kind)
        if flows is None:
            flows = self._by_flow[kind] = {}
            for e in kinds.get(kind, ()):
                flows.setdefault(e.get("flow"), []).append(e)
        evs = flows.get(flow, [])
        if role is None:
            return list(evs)
        return [e for e in evs if e.get("role", role) == role]

    def flow_end(self, flow: str, role: str) -> dict[str, Any]:
        for e in self.all_events("flow_end"):
            if e.get("flow") == flow and e.get("role") == role:
                return e
        raise KeyError(f"phase {self.name}: no flow_end of {role} of flow {flow}")

    def flow_start(self, flow: str, role: str) -> dict[str, Any]:
        for e in self.all_events("flow_start"):
            if e.get("flow") == flow and e.get("role") == role:
                return e
        raise KeyError(f"phase {self.name}: no flow_start of {role} of flow {flow}")

    def start_ns(self) -> int:
        starts = [e["t_ns"] for e in self.all_events("start")]
        if starts:
            return int(min(starts))
        evs = self.all_events()
        return int(evs[0]["t_ns"]) if evs else 0

    def flows(self) -> list[str]:
        return sorted({e["flow"] for e in self.all_events("flow_start")})


def phase_names(run_dir: str | Path) -> list[str]:
    plan = json.loads((Path(run_dir) / "plan.json").read_text())
    return [p["name"] for p in plan["phases"]]


def load_phase(run_dir: str | Path, phase: str) -> PhaseData:
    d = Path(run_dir) / "phases" / phase
    if not d.is_dir():
        raise FileNotFoundError(f"{d}: no such phase directory")
    data = PhaseData(phase, d)
    for f in sorted(d.glob("*.events.jsonl")):
        data.events[f.name.split(".")[0]] = read_jsonl(f)
    data.switch = cast(list[SwitchSample], read_jsonl(d / "switch.jsonl"))
    st = d / "switch_stats.json"
    if st.exists():
        data.stats = json.loads(st.read_text())
    plan = Path(run_dir) / "plan.json"
    if plan.exists():
        for p in json.loads(plan.read_text())["phases"]:
            if p["name"] == phase:
                data.plan = p
    return data


# ---------------------------------------------------------------------------
# numbers


class HostPauses(TypedDict):
    """The PFC pauses a host read: the XOFF frames and the time it was paused (s)."""

    xoffs: int
    paused_s: float


class PhaseLosses(TypedDict):
    """What :func:`phase_losses` reads off a phase, in its order."""

    tm_full: int
    pfc_xoff: int
    pfc_xon: int
    tx_pkts: int
    retransmits: int
    rto: int
    pfc_hosts: dict[str, HostPauses]


def phase_losses(data: PhaseData) -> PhaseLosses:
    """What a phase lost and how it recovered, over every switch of the run:
    tail drops at full queues (``tm_full``), PFC pauses the switches sent
    (``pfc_xoff``, ``pfc_xon``; soft target with PFC on), and from the hosts'
    QP reports the packets sent, retransmitted and the retransmission
    timeouts (each QP's final counters, from its ``pacer_report`` or
    ``qp_report``, else its flow's ``flow_end``); ``pfc_hosts``: per host
    that read pauses, the XOFFs it read and the time it was paused (s)."""
    stats = data.stats
    pairs = ([(v.get("before") or {}, v.get("after") or {})
              for v in stats["switches"].values()] if "switches" in stats
             else [(stats.get("before") or {}, stats.get("after") or {})])

    def grown(path: Sequence[str]) -> int:
        total = 0
        for before, after in pairs:
            for side, sign in ((after, 1), (before, -1)):
                v: Any = side.get("switch", {})
                for key in path:
                    v = v.get(key, {}) if isinstance(v, dict) else {}
                total += sign * (sum(v.values()) if isinstance(v, dict) else int(v or 0))
        return total

    # every QP's counters once: a collective's and a connection pool's QPs
    # report at the end (pacer_report: sending, qp_report: receiving), a
    # flow's QP in its flow_end
    reports = data.all_events("pacer_report") + data.all_events("qp_report")
    reported = {(e.get("host"), str(e.get("flow", "")).split(".q")[0]) for e in reports}
    qps = [e["qp"] for e in reports if isinstance(e.get("qp"), dict)] + [
        e["qp"] for e in data.all_events("flow_end")
        if isinstance(e.get("qp"), dict) and (e.get("host"), e.get("flow")) not in reported]
    hosts: dict[str, HostPauses] = {}
    for host, events in sorted(data.events.items()):
        for e in events:
            pfc = e.get("pfc") if e.get("event") == "agent_end" else None
            if pfc and pfc.get("frames"):
                hosts[host] = {"xoffs": pfc["xoffs"], "paused_s": round(pfc["paused_s"], 4)}
    return {"tm_full": grown(("drops", "tm_full")),
            "pfc_xoff": grown(("pfc", "xoff_sent")), "pfc_xon": grown(("pfc", "xon_sent")),
            "tx_pkts": sum(q.get("tx_pkts", 0) for q in qps),
            "retransmits": sum(q.get("retransmits", 0) for q in qps),
            "rto": sum(q.get("rto", 0) for q in qps),
            "pfc_hosts": hosts}


def jain_index(xs: Sequence[float]) -> float:
    """Jain's fairness index (sum x)^2 / (n sum x^2): 1 = equal shares, 1/n = one
    flow takes everything. Empty or all-zero input is 0."""
    n = len(xs)
    sq = sum(x * x for x in xs)
    if n == 0 or sq == 0:
        return 0.0
    if any(x < 0 for x in xs):
        raise ValueError("Jain's index is defined for non-negative shares")
    return sum(xs) ** 2 / (n * sq)


def value_at(points: Sequence[tuple[float, float]], t: float) -> float:
    """A cumulative counter at time t, linearly interpolated between samples
    (held flat outside them). ``points`` are (t, value) sorted by t."""
    if not points:
        raise ValueError("no samples")
    if t <= points[0][0]:
        return points[0][1]
    if t >= points[-1][0]:
        return points[-1][1]
    lo, hi = 0, len(points) - 1
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if points[mid][0] <= t:
            lo = mid
        else:
            hi = mid
    (t0, v0), (t1, v1) = points[lo], points[hi]
    if t1 == t0:
        return v1
    return v0 + (v1 - v0) * (t - t0) / (t1 - t0)


def window_rate(points: Sequence[tuple[float, float]], t0: float, t1: float) -> float:
    """Average rate of a cumulative counter over [t0, t1] (units per time unit)."""
    if t1 <= t0:
        raise ValueError("empty window")
    return (value_at(points, t1) - value_at(points, t0)) / (t1 - t0)


def rate_series(points: Sequence[tuple[float, float]], window: float,
                step: float | None = None) -> tuple[list[float], list[float]]:
    """(times, rates) of a cumulative counter, averaged over ``window`` and
    evaluated every ``step`` (default: window / 2); times are window ends."""
    if len(points) < 2 or window <= 0:
        return [], []
    step = step or window / 2
    t_first, t_last = points[0][0], points[-1][0]
    ts, rs = [], []
    t = t_first + window
    while t <= t_last + 1e-12:
        ts.append(t)
        rs.append(window_rate(points, t - window, t))
        t += step
    return ts, rs


def payload_efficiency(msg_bytes: int, path_mtu: int) -> float:
    """Payload bytes per frame byte of a WRITE_WITH_IMM message (Ethernet, IPv4,
    UDP, BTH/RETH/ImmDt, padding and ICRC counted; preamble, gap, FCS not,
    exactly what the switch's rate limiter counts)."""
    return msg_bytes / message_wire_bytes(msg_bytes, path_mtu)


def goodput_fraction(payload_bytes: float, duration_s: float, bottleneck_bps: float,
                     msg_bytes: int, path_mtu: int) -> float:
    """Delivered payload rate relative to the most payload the bottleneck can
    carry with these messages: payload / (duration * rate/8 * efficiency)."""
    if duration_s <= 0 or bottleneck_bps <= 0:
        raise ValueError("duration and bottleneck rate must be positive")
    best = bottleneck_bps / 8 * duration_s * payload_efficiency(msg_bytes, path_mtu)
    return payload_bytes / best


def counter_points(events: Iterable[dict[str, Any]], key: str,
                   t0_ns: int = 0) -> list[tuple[float, float]]:
    """(seconds since t0_ns, value) of a cumulative field of sample events."""
    pts = [((e["t_ns"] - t0_ns) / 1e9, float(e[key])) for e in events if key in e]
    pts.sort()
    return pts

