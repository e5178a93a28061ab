"""The parts of ``summary.json`` made from the plan and what the run
measured (the modelled network and base RTT, the transport, how the port
rate was set), the results as flat dotted keys, the results line of the
progress log, and JSON files written whole or not at all."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from testbed.experiment import RunPlan


def _network_record(plan: RunPlan, measured: dict[str, Any]) -> dict[str, Any]:
    """The modelled network, its conversion, and the base RTT measured and
    modelled, both also in packet times (full frames at the path MTU)."""
    net = plan.topology.network
    rtt = dict(measured.get("base_rtt") or {})
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


def _write_json(path: Path, obj: Any) -> None:
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(obj, indent=2, sort_keys=False, default=str))
    os.replace(tmp, path)


def _port_rate_record(applied: list[dict[str, Any]]) -> dict[str, Any] | None:
    """How the plan's port rate was set (soft: set_port_rate_bps; BMv2:
    set_queue_rate in pps, an approximation), or None if it set none."""
    recs = [r for r in applied if r.get("line", "").startswith("set_port_rate_bps")]
    if not recs:
        return None
    keep = ("via", "bps", "pps", "port", "packet_bytes", "note")
    out = {k: recs[-1][k] for k in keep if k in recs[-1]}
    if len(recs) > 1:
        out["all"] = [{k: r[k] for k in keep if k in r} for r in recs]
    return out


def _verdict_line(summary: dict[str, Any], results: dict[str, Any],
                  headline: tuple[str, ...] = ()) -> str:
    flat = flatten_keys({k: v for k, v in results.items() if k != "fidelity_ok"})
    keys = [k for k in headline if k in flat] or [k for k in flat if k.count(".") == 1]
    shown = ", ".join(f"{k}={_fmt(flat[k])}" for k in keys)
    return f"results: {shown}; fidelity: {summary['fidelity']['text']}"


def _fmt(v: Any) -> str:
    return f"{v:.4g}" if isinstance(v, float) else str(v)
