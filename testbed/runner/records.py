"""The parts of ``summary.json`` made from the plan and what the run
measured (the modelled network and base RTT, the transport, how the port
rate was set), the results as flat dotted keys, the results line of the
progress log, and JSON files written whole or not at all."""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, TypedDict

from testbed.experiment import RunPlan

if TYPE_CHECKING:   # (the PyPy child, Python 3.9, imports this module: typing's 3.11 names)
    from typing import NotRequired, Required

    from testbed.fidelity import Verdict


class AppliedCommand(TypedDict, total=False):
    """One control-plane line as it was applied (summary.json's
    ``switch_config.applied``): where, the line, and how (``via``); a port
    rate or a queue cap also with its figures (on BMv2 as an approximation,
    ``note``)."""

    where: str
    line: Required[str]
    via: str
    bps: float
    pps: float
    port: int | None
    priority: int
    packet_bytes: int
    note: str


class PortRateRecord(TypedDict, total=False):
    """How the plan's port rate was set (summary.json's ``switch_config.port_rate``)."""

    via: str
    bps: float
    pps: float
    port: int | None
    packet_bytes: int
    note: str
    all: list[PortRateRecord]


class BaseRtt(TypedDict):
    """The smallest ping RTT between the first and the last host (Mininet engine)."""

    between: str
    pings: int
    min_ms: float | None
    avg_ms: float | None


# An unfaithful try of a phase, set aside (``--phase-retries``): the phase,
# the try's number (1: its first run), its verdict and where it was kept.
PhaseRetry = TypedDict("PhaseRetry", {"phase": str, "try": int, "verdict": str, "kept": str})


class SimPhase(TypedDict):
    """What a simulated phase measured of the engine (testbed.sim.engine.PhaseResult)."""

    name: str
    start_ns: int
    end_ns: int
    polls: int
    events: int


class SimRecord(TypedDict):
    """What a simulated run measured of itself (summary.json's ``sim``); the
    wall-clock figures are the runner's, added after the run."""

    engine: str
    seed: int
    host_links: str
    sim_s: float
    events: int
    packet_hops: int
    host_line_bps: float
    interpreter: str
    phases: list[SimPhase]
    wall_s: NotRequired[float]
    packet_hops_per_s: NotRequired[int | None]
    events_per_s: NotRequired[int | None]


class Measured(TypedDict, total=False):
    """What an engine measured beside the timelines, for the summary: the
    base RTT (Mininet), the phases' unfaithful tries, the simulator's own
    record and verdict."""

    base_rtt: BaseRtt
    phase_retries: list[PhaseRetry]
    sim: SimRecord
    sim_fidelity: Verdict


def _network_record(plan: RunPlan, measured: Measured) -> dict[str, Any]:
    """The modelled network, its conversion, and the base RTT measured and
    modelled, both also in packet times (full frames at the path MTU)."""
    net = plan.topology.network
    rtt: dict[str, Any] = dict(measured.get("base_rtt") or {})
    if net is None:
        return {"modelled": None, "base_rtt": rtt or None}
    rec = net.record(plan.path_mtu())
    pkt_us = rec["testbed"]["packet_time_us"]
    rtt.update(modelled_us=rec["modelled"]["base_rtt_us"],
               modelled_pkts=round(rec["modelled"]["base_rtt_pkts"], 2),
               measured_pkts=(round(rtt["min_ms"] * 1e3 / pkt_us, 2)
                              if rtt.get("min_ms") is not None else None),
               note="modelled: propagation only (4 links); measured: ping's minimum, which "
                    "adds the switch's and the hosts' processing and the pings' serialization")
    rec["base_rtt"] = rtt
    return rec


def _transport_record(plan: RunPlan) -> dict[str, Any]:
    from hosts.agent.rates import dcqcn_params
    from hosts.roce import Scale

    seen: dict[str, dict[str, Any]] = {}
    for p in plan.phases:
        for spec in p.jobs.values():
            t = spec.transport
            rec = {"scale": Scale(**t.scale).timers(), "dcqcn": dcqcn_params(spec),
                   "path_mtu": t.path_mtu, "sample_interval_us": t.sample_interval_us,
                   "pacer_burst_packets": t.pacer_burst_packets,
                   "late_threshold_packets": t.late_threshold_packets}
            seen.setdefault(json.dumps(rec, sort_keys=True), rec)
    recs = list(seen.values())
    if len(recs) == 1:
        return recs[0]
    return {"per_spec": recs}


def flatten_keys(d: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    """Nested results as flat dotted keys of their scalars (lists are left out)."""
    out: dict[str, Any] = {}
    for k, v in d.items():
        key = f"{prefix}{k}"
        if isinstance(v, dict):
            out.update(flatten_keys(v, key + "."))
        elif isinstance(v, (int, float, str, bool)) or v is None:
            out[key] = v
    return out


def _write_json(path: Path, obj: Mapping[str, object]) -> None:
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(obj, indent=2, sort_keys=False, default=str))
    os.replace(tmp, path)


def _port_rate_record(applied: list[AppliedCommand]) -> PortRateRecord | None:
    """How the plan's port rate was set (soft: set_port_rate_bps; BMv2:
    set_queue_rate in pps, an approximation), or None if it set none."""
    recs = [r for r in applied if r.get("line", "").startswith("set_port_rate_bps")]
    if not recs:
        return None
    out = _port_rate_of(recs[-1])
    if len(recs) > 1:
        out["all"] = [_port_rate_of(r) for r in recs]
    return out


# What a port-rate line's record keeps, in its order.
_PORT_RATE_KEYS: tuple[Literal["via", "bps", "pps", "port", "packet_bytes", "note"], ...] = (
    "via", "bps", "pps", "port", "packet_bytes", "note")


def _port_rate_of(rec: AppliedCommand) -> PortRateRecord:
    """A port-rate line's record without its line and where it was applied."""
    out = PortRateRecord()
    for key in _PORT_RATE_KEYS:
        if key in rec:
            out[key] = rec[key]
    return out


def _verdict_line(summary: dict[str, Any], results: dict[str, Any],
                  headline: tuple[str, ...] = ()) -> str:
    flat = flatten_keys({k: v for k, v in results.items() if k != "fidelity_ok"})
    keys = [k for k in headline if k in flat] or [k for k in flat if k.count(".") == 1]
    shown = ", ".join(f"{k}={_fmt(flat[k])}" for k in keys)
    return f"results: {shown}; fidelity: {summary['fidelity']['text']}"


def _fmt(v: float | str | bool | None) -> str:
    return f"{v:.4g}" if isinstance(v, float) else str(v)
