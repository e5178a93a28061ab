"""Was a run faithful? A three-valued judgement of every figure a run records.

Each check is ``pass``, ``fail`` or ``not measured``:

- ``not measured``: the target cannot measure it (BMv2 has no processing-lag,
  kernel-drop or queue-sampling statistics); the summary lists these with the
  reason, and they do not decide the verdict;
- ``fail``: the figure is over its limit, or the data that should be there is
  missing (a soft-switch run without lag samples, a run without sender
  reports): no data is no evidence of fidelity.

Warm-up phases (``PhasePlan.warmup``) are not measurements: their figures are
reported apart (``warmup``) and do not decide the verdict; the switch's lag
maximum is reset at the start of every phase, so a warm-up's worst lag does
not carry over.

The run is ``faithful`` only if no check failed. Checks (limits in
testbed.experiment.FidelityLimits):

- ``switch_lag_mean_us``, ``switch_lag_max_us``: how long frames waited in the
  kernel before the soft switch's pipeline took them;
- ``switch_kernel_drops``: frames the kernel dropped before the switch read them;
- ``switch_ingress_order``: frames a switch port received with a kernel
  receive time earlier than a frame it had read before (``rx_out_of_order``
  of the port statistics): the kernel delivered a link's frames out of
  order, which a wire never does, and a receiver's go-back-N pays for every
  such overtaking with a resend (e.g. per-CPU receive backlogs overtaking
  each other; the runner steers receive work by flow to prevent it);
- ``switch_arrival_timing``: the fraction of frames a soft switch's queues
  took later than the kernel had received them, by more than the frame's own
  time on the ingress link (``rx_behind_clock`` of the switch statistics):
  the frame reached the switch after a later-stamped one (another CPU's
  receive backlog delivered it late) had moved the queues' clock, so it
  entered bunched with the frames behind it, like a late packet of a host's
  pacer; limited as the hosts' lateness is (``arrivals_behind_clock_fraction``);
- ``switch_sampling``: the switch statistics poller ran without error and took samples;
- ``host_pacing_late_fraction``: per sender, packets sent later than allowed;
- ``host_receive_lag``: per agent, the share of the time it ran during which
  its oldest unread frame had waited longer than a feedback interval of the
  modelled network (50 us, times the slowdown; hosts/roce/receive_lag.py):
  a NIC ACKs and sends CNPs as frames arrive, a starved agent late, which
  delays the congestion feedback (udp hosts; rxe hosts' kernel receives);
- ``host_tx_drops``: datagrams a host's socket refused, or its line-rate
  qdisc dropped (``Topology.host_line_qdisc``);
- ``congestion_without_overload`` (not measured on a leaf-spine fabric): a
  port whose offered load (the sum of the
  line rates of the senders toward it, each capped by its flows' application
  rates) was at most its capacity got CE marks, or its queue reached
  ``uncongested_queue_pkts``. With offered load <= capacity a faithful
  emulation builds no standing queue, so such marks come from the emulator's
  jitter (late batches of packets), not from the modelled network.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from switches.targets import SOFT, Target
from testbed.cpu_usage import STEAL_SHOWN
from testbed.experiment import RunPlan

__all__ = ["PASS", "FAIL", "NOT_MEASURED", "evaluate_fidelity", "verdict_text", "offered_load",
           "rx_out_of_order", "arrivals_behind_clock"]

PASS, FAIL, NOT_MEASURED = "pass", "fail", "not measured"

# What BMv2 cannot report (simple_switch has no such statistics).
_SOFT_ONLY = "the {target} target reports no {what}"


def _check(status: str, value: Any, limit: Any, **extra: Any) -> dict[str, Any]:
    return {"status": status, "value": value, "limit": limit, **extra}


def _le(value: float, limit: float) -> str:
    return PASS if value <= limit else FAIL


@dataclass(frozen=True)
class _PortLoad:
    offered_bps: float
    capacity_bps: float | None
    senders: tuple[str, ...]


def _port_rates(plan: RunPlan, phase_commands: tuple[str, ...]) -> tuple[float | None,
                                                                         dict[int, float]]:
    """(default bps, per-port bps) that the plan's set_port_rate_bps lines set
    (topology lines, then the phase's)."""
    default: float | None = None
    per_port: dict[int, float] = {}
    for line in (*plan.network_commands(), *phase_commands):
        words = line.split()
        if len(words) < 2 or words[0] != "set_port_rate_bps":
            continue
        bps = float(words[1])
        if len(words) > 2:
            per_port[int(words[2], 0)] = bps
        else:
            default = bps
            per_port.clear()
    return default, per_port


def offered_load(plan: RunPlan, phase_name: str) -> dict[int, _PortLoad]:
    """Per switch port (= receiving host's index in the star topology): the
    most the phase's senders can offer toward it and the port's capacity."""
    from hosts.roce.scale import Scale
    from testbed.net import host_addr

    if plan.topology.fabric is not None:
        # CE marks at a receiver may come from any hop of a fabric (an uplink's
        # real congestion), so they say nothing about its last port's load
        return {}
    phase = next(p for p in plan.phases if p.name == phase_name)
    port_of_ip = {host_addr(i).ip: i for i in range(1, plan.topology.n_hosts + 1)}
    port_of_host = {f"h{i}": i for i in range(1, plan.topology.n_hosts + 1)}
    rank_host = {s.collective.rank: h for h, s in phase.jobs.items() if s.collective is not None}
    by_port: dict[int, dict[str, float]] = {}
    for host, spec in phase.jobs.items():
        line = Scale(**spec.transport.scale).line_rate_bps
        toward: dict[int, float] = {}
        for f in spec.flows:
            if f.role != "sender" or f.peer_ip not in port_of_ip:
                continue
            port = port_of_ip[f.peer_ip]
            toward[port] = toward.get(port, 0.0) + (f.rate_bps or line)
        c = spec.collective
        if c is not None and c.size > 1:  # a ring: rank r sends to rank r + 1
            right = rank_host.get((c.rank + 1) % c.size)
            if right in port_of_host:
                toward[port_of_host[right]] = line
        total = sum(toward.values())
        for port, bps in toward.items():
            # a NIC offers at most its line rate over all its flows
            share = bps if total <= line else bps * line / total
            by_port.setdefault(port, {})[host] = share
    default, per_port = _port_rates(plan, phase.commands)
    return {port: _PortLoad(sum(s.values()), per_port.get(port, default), tuple(sorted(s)))
            for port, s in sorted(by_port.items())}


def _ce_marks_toward(data: Any, plan: RunPlan, phase_name: str) -> dict[int, int]:
    """CE-marked packets the receivers counted, per receiving host's port."""
    from testbed.net import host_addr

    port_of_host = {host_addr(i).name: i for i in range(1, plan.topology.n_hosts + 1)}
    out: dict[int, int] = {}
    for e in data.all_events("flow_end") + data.all_events("qp_report"):
        if e.get("event") == "flow_end" and e.get("role") != "receiver":
            continue
        port = port_of_host.get(e.get("host", ""))
        if port is not None:
            out[port] = out.get(port, 0) + int(e.get("qp", {}).get("ce_pkts", 0))
    return out


def arrivals_behind_clock(stats: dict[str, Any]) -> tuple[int, int, int] | None:
    """(frames taken behind the queues' clock, frames received, largest shift
    in us) of a switch's statistics (or a fabric's pooled ones); None where
    they do not say (BMv2, a switch of an older version)."""
    if "rx_behind_clock" in stats:
        return (int(stats["rx_behind_clock"]), int(stats.get("rx_frames", 0)),
                int(stats.get("rx_behind_clock_max_us", 0)))
    sw = stats.get("switch")
    if not isinstance(sw, dict) or "rx_behind_clock" not in sw:
        return None
    return (sum(int(v) for v in sw["rx_behind_clock"].values()),
            sum(int(v) for v in sw.get("rx", {}).values()),
            max((int(v) for v in sw.get("rx_behind_clock_max_us", {}).values()), default=0))


def rx_out_of_order(stats: dict[str, Any]) -> int | None:
    """Frames a switch's ports (or a fabric's pooled switches) received out
    of order, from its statistics; None where they do not say (BMv2, a
    switch of an older version)."""
    if "rx_out_of_order" in stats:
        return int(stats["rx_out_of_order"])
    ports = stats.get("ports")
    if not ports:
        return None
    vals = [p.get("rx_out_of_order") for p in ports.values()]
    if any(v is None for v in vals):
        return None
    return sum(int(v) for v in vals)


def _max_queue(data: Any, port: int) -> int | None:
    """Largest queue depth seen on ``port``: sampled depths and the P4
    watermark register, None if neither was recorded."""
    seen = [s["queues"][str(port)] for s in data.switch if str(port) in s.get("queues", {})]
    reg = data.stats.get("qdepth_max")
    wm = None if reg is None else reg.get(str(port), 0)
    vals = seen + ([wm] if wm is not None else [])
    return max(vals) if vals else None


def evaluate_fidelity(run_dir: Path, plan: RunPlan, target: Target = SOFT,
                      hosts: str = "udp") -> dict[str, Any]:
    """Judge a finished run: every check's status, value and limit, the
    verdict, and what the target or the hosts could not measure (rxe hosts have
    no pacer: the kernel sends, tc HTB shapes)."""
    from testbed.timeline import load_phase

    lim = plan.fidelity
    # the switch checks need the daemon's statistics
    stats = target.reports_stats
    lag_sum = 0.0
    lag_n = 0
    lag_max = 0.0
    kdrops = 0
    out_of_order = 0
    order_known = True
    behind, behind_rx, behind_max = 0, 0, 0
    behind_known = True
    poll_samples = 0
    poll_errors: list[str] = []
    senders: list[dict[str, Any]] = []
    receivers: list[dict[str, Any]] = []
    host_reports = 0
    tx_drops = 0
    overload: list[dict[str, Any]] = []
    ports_judged = 0
    warmup: dict[str, Any] = {}
    for p in plan.phases:
        data = load_phase(run_dir, p.name)
        b, a = data.stats.get("before", {}), data.stats.get("after", {})
        if p.warmup:      # not a measurement: its figures apart, outside the verdict
            la = a.get("lag_us", {})
            warmup[p.name] = {"lag_max_us": la.get("max", 0),
                              "kernel_drops": a.get("kernel_drops", 0) - b.get("kernel_drops", 0)}
            continue
        phase_behind: dict[str, Any] = {}     # frames of this phase behind the queues' clock
        if a:
            lb, la = b.get("lag_us", {}), a.get("lag_us", {})
            n = la.get("samples", 0) - lb.get("samples", 0)
            s = la.get("mean", 0) * la.get("samples", 0) - lb.get("mean", 0) * lb.get("samples", 0)
            if n > 0:
                lag_sum += s
                lag_n += n
                lag_max = max(lag_max, la.get("max", 0))
            kdrops += a.get("kernel_drops", 0) - b.get("kernel_drops", 0)
            ooo_a, ooo_b = rx_out_of_order(a), rx_out_of_order(b)
            if ooo_a is None:
                order_known = False
            else:
                out_of_order += ooo_a - (ooo_b or 0)
            bc_a, bc_b = arrivals_behind_clock(a), arrivals_behind_clock(b)
            if bc_a is None:
                behind_known = False
            else:
                phase_behind = {"behind_clock_frames": bc_a[0] - (bc_b[0] if bc_b else 0)}
                behind += phase_behind["behind_clock_frames"]
                behind_rx += bc_a[1] - (bc_b[1] if bc_b else 0)
                behind_max = max(behind_max, bc_a[2])   # largest over the run so far
        cpu = data.stats.get("cpu") or {}
        poll_samples += int(data.stats.get("poller_samples", 0) or 0)
        if data.stats.get("poller_error"):
            poll_errors.append(f"{p.name}: {data.stats['poller_error']}")
        for e in data.all_events("flow_end"):
            host_reports += 1
            tx_drops += e.get("qp", {}).get("tx_drops", 0)
            if e.get("role") == "sender" and "pacer" in e:
                senders.append({"phase": p.name, "host": e["host"], "flow": e["flow"],
                                **e["pacer"]["lateness"], **_cpu_of(cpu, e["host"])})
        for e in data.all_events("pacer_report") + data.all_events("qp_report"):
            host_reports += 1
            tx_drops += e.get("qp", {}).get("tx_drops", 0)
            if e.get("pacer"):
                senders.append({"phase": p.name, "host": e["host"], "flow": e.get("flow", "?"),
                                **e["pacer"]["lateness"], **_cpu_of(cpu, e["host"])})
        receivers += [{**r, **_cpu_of(cpu, r["host"])}
                      for r in _receive_lags(data.all_events("agent_end"), p.name)]
        for q in (data.stats.get("host_qdiscs") or {}).values():
            tx_drops += int(q.get("dropped", 0))
        marks = _ce_marks_toward(data, plan, p.name)
        for port, load in offered_load(plan, p.name).items():
            if load.capacity_bps is None or load.offered_bps > load.capacity_bps * (1 + 1e-9):
                continue  # no rate set, or really overloaded: congestion is the model's
            ports_judged += 1
            q = _max_queue(data, port)
            ce = marks.get(port, 0)
            qbad = (lim.uncongested_queue_pkts is not None and q is not None
                    and q >= lim.uncongested_queue_pkts)
            if ce > 0 or qbad:
                overload.append({"phase": p.name, "port": port, "ce_marks": ce,
                                 "max_queue_pkts": q, "offered_bps": load.offered_bps,
                                 "capacity_bps": load.capacity_bps, "senders": list(load.senders),
                                 **_machine_of(cpu), **phase_behind})

    checks: dict[str, dict[str, Any]] = {}
    not_measured: dict[str, str] = {}

    def unmeasured(name: str, what: str, limit: Any) -> None:
        why = _SOFT_ONLY.format(target=target.name, what=what)
        checks[name] = _check(NOT_MEASURED, None, limit, why=why)
        not_measured[name] = why

    if stats:
        if lag_n == 0:
            why = "no lag samples: the switch's processing lag was not measured"
            checks["switch_lag_mean_us"] = _check(FAIL, None, lim.switch_lag_mean_us,
                                                  samples=0, why=why)
            checks["switch_lag_max_us"] = _check(FAIL, None, lim.switch_lag_max_us, why=why)
        else:
            mean = round(lag_sum / lag_n, 1)
            checks["switch_lag_mean_us"] = _check(_le(mean, lim.switch_lag_mean_us), mean,
                                                  lim.switch_lag_mean_us, samples=lag_n)
            checks["switch_lag_max_us"] = _check(_le(lag_max, lim.switch_lag_max_us), lag_max,
                                                 lim.switch_lag_max_us)
        checks["switch_kernel_drops"] = _check(_le(kdrops, lim.kernel_drops), kdrops,
                                               lim.kernel_drops)
        if order_known:
            checks["switch_ingress_order"] = _check(
                _le(out_of_order, lim.ingress_out_of_order), out_of_order,
                lim.ingress_out_of_order,
                why=("frames a switch port received out of order: the kernel, not the "
                     "modelled links, reordered them") if out_of_order else "")
        else:
            why = "the switch did not report frames received out of order (an older run)"
            checks["switch_ingress_order"] = _check(NOT_MEASURED, None,
                                                    lim.ingress_out_of_order, why=why)
            not_measured["switch_ingress_order"] = why
        if behind_known and behind_rx > 0:
            frac = behind / behind_rx
            checks["switch_arrival_timing"] = _check(
                _le(frac, lim.arrivals_behind_clock_fraction), round(frac, 5),
                lim.arrivals_behind_clock_fraction, frames=behind, received=behind_rx,
                max_shift_us=behind_max,
                why=("frames the switch's queues took later than they arrived (another "
                     "CPU delivered them after later frames): they entered bunched")
                if behind else "")
        else:
            why = ("the switch did not report arrival timing (an older run)" if not behind_known
                   else "the switch received no frames")
            checks["switch_arrival_timing"] = _check(
                NOT_MEASURED, None, lim.arrivals_behind_clock_fraction, why=why)
            not_measured["switch_arrival_timing"] = why
        if poll_errors or poll_samples == 0:
            checks["switch_sampling"] = _check(
                FAIL, poll_samples, ">= 1 sample, no error", errors=poll_errors,
                why="; ".join(poll_errors) or "the switch statistics were never sampled")
        else:
            checks["switch_sampling"] = _check(PASS, poll_samples, ">= 1 sample, no error")
    else:
        unmeasured("switch_lag_mean_us", "processing-lag statistics", lim.switch_lag_mean_us)
        unmeasured("switch_lag_max_us", "processing-lag statistics", lim.switch_lag_max_us)
        unmeasured("switch_kernel_drops", "kernel-drop statistics", lim.kernel_drops)
        unmeasured("switch_ingress_order", "receive-order statistics", lim.ingress_out_of_order)
        unmeasured("switch_arrival_timing", "arrival-timing statistics",
                   lim.arrivals_behind_clock_fraction)
        unmeasured("switch_sampling", "statistics to sample", ">= 1 sample")

    if hosts == "rxe":
        why = ("rxe hosts: the kernel sends and tc HTB shapes the host's link; there is no "
               "pacer whose lateness could be measured")
        checks["host_pacing_late_fraction"] = _check(NOT_MEASURED, None,
                                                     lim.pacing_late_fraction, why=why)
        not_measured["host_pacing_late_fraction"] = why
    elif not senders:
        checks["host_pacing_late_fraction"] = _check(
            FAIL, None, lim.pacing_late_fraction,
            why="no sender reported its pacing: the hosts' timing was not measured")
    else:
        worst = max(senders, key=lambda s: s["late_fraction"])
        for s in senders:
            s["status"] = _le(s["late_fraction"], lim.pacing_late_fraction)
        checks["host_pacing_late_fraction"] = _check(
            _le(worst["late_fraction"], lim.pacing_late_fraction), worst["late_fraction"],
            lim.pacing_late_fraction, worst=worst, per_sender=senders)
    if hosts == "rxe":
        why = "rxe hosts: the kernel receives, no agent's socket to wait in"
        checks["host_receive_lag"] = _check(NOT_MEASURED, None, lim.receive_behind_fraction,
                                            why=why)
        not_measured["host_receive_lag"] = why
    elif not receivers:
        why = "no agent reported its receive lag (an older run, or a provider without one)"
        checks["host_receive_lag"] = _check(NOT_MEASURED, None, lim.receive_behind_fraction,
                                            why=why)
        not_measured["host_receive_lag"] = why
    else:
        worst_r = max(receivers, key=lambda r: r["behind_fraction"])
        checks["host_receive_lag"] = _check(
            _le(worst_r["behind_fraction"], lim.receive_behind_fraction),
            worst_r["behind_fraction"], lim.receive_behind_fraction,
            worst=worst_r, per_agent=receivers,
            why=("an agent read its frames late for longer than the limit: its ACKs and "
                 "CNPs (the congestion feedback) left late") if worst_r["behind_fraction"]
            > lim.receive_behind_fraction else "")
    if host_reports == 0:
        checks["host_tx_drops"] = _check(FAIL, None, lim.host_tx_drops,
                                         why="no host reported its counters")
    else:
        checks["host_tx_drops"] = _check(_le(tx_drops, lim.host_tx_drops), tx_drops,
                                         lim.host_tx_drops)

    if ports_judged == 0:
        why = ("a leaf-spine fabric: a receiver's CE marks may come from any hop"
               if plan.topology.fabric is not None else
               "no port had a set rate and an offered load at most that rate "
               "(nothing to compare marks or queues with)")
        checks["congestion_without_overload"] = _check(NOT_MEASURED, None, 0, why=why)
        not_measured["congestion_without_overload"] = why
    else:
        worst_q = max((o["max_queue_pkts"] or 0 for o in overload), default=0)
        checks["congestion_without_overload"] = _check(
            FAIL if overload else PASS, sum(o["ce_marks"] for o in overload), 0,
            ports_judged=ports_judged, queue_limit_pkts=lim.uncongested_queue_pkts,
            max_queue_pkts=worst_q if overload else None, cases=overload,
            why=("CE marks or queue growth on a port whose offered load was at most its "
                 "capacity: queues built by the emulator's jitter, not by the modelled "
                 "network") if overload else "")
    failed = [k for k, c in checks.items() if c["status"] == FAIL]
    out = {"verdict": "not faithful" if failed else "faithful", "ok": not failed,
           "failed": failed, "not_measured": not_measured, "checks": checks,
           "warmup": warmup}
    out["text"] = verdict_text(out)
    return out


def _receive_lags(agent_ends: list[dict[str, Any]], phase: str) -> list[dict[str, Any]]:
    """Per agent that reported ``receive_lag``: the share of the time it ran
    during which its oldest unread frame was older than its threshold
    (hosts/roce/receive_lag.py: a feedback interval of the modelled network)."""
    out = []
    for e in agent_ends:
        rl = e.get("receive_lag")
        if not rl or "behind_ns" not in rl:
            continue
        span = rl.get("span_ns", 0)
        out.append({"phase": phase, "host": e.get("host", "?"),
                    "behind_fraction": round(rl["behind_ns"] / span, 5) if span > 0 else 0.0,
                    "behind_s": round(rl["behind_ns"] / 1e9, 4),
                    "threshold_us": round(rl.get("threshold_ns", 0) / 1e3, 1),
                    "max_us": round(rl.get("max_ns", 0) / 1e3, 1),
                    "mean_us": round(rl.get("mean_ns", 0) / 1e3, 1),
                    "batches": rl.get("batches", 0), "span_s": round(span / 1e9, 3)})
    return out


def _cpu_of(cpu: dict[str, Any], host: str) -> dict[str, Any]:
    """What the phase's CPU record (testbed.cpu_usage) says of ``host``: its
    share of a CPU, the share of the time it waited for one, and how busy the
    machine was; nothing if the phase has no record."""
    proc = cpu.get("processes", {}).get(host)
    if proc is None:
        return {}
    return {"cpu_share": proc["cpu_share"], "cpu_wait_share": proc["wait_share"],
            **_machine_of(cpu)}


def _machine_of(cpu: dict[str, Any]) -> dict[str, Any]:
    """How busy the phase's CPU record says the machine was, and how much of
    its CPU time the hypervisor held; nothing if the phase has no record."""
    if "machine" not in cpu:
        return {}
    out = {"machine_busy_share": cpu["machine"]["busy_share"]}
    if "steal_share" in cpu["machine"]:
        out["machine_steal_share"] = cpu["machine"]["steal_share"]
    return out


def _machine_text(c: dict[str, Any]) -> str:
    """``machine 52% busy, 15.1% of its CPU time stolen by the hypervisor``."""
    stolen = c.get("machine_steal_share", 0.0)
    return (f"machine {c['machine_busy_share']:.0%} busy"
            + (f", {stolen:.1%} of its CPU time stolen by the hypervisor"
               if stolen >= STEAL_SHOWN else ""))


def _who(worst: dict[str, Any]) -> str:
    """Which agent in which phase, and whether it got a CPU when it needed one."""
    text = f"{worst.get('host', '?')} in phase {worst.get('phase', '?')}"
    if "cpu_wait_share" in worst:
        text += f", which waited for a CPU {worst['cpu_wait_share']:.0%} of the time"
        if "machine_busy_share" in worst:
            text += f" ({_machine_text(worst)})"
    return text


def _describe(name: str, c: dict[str, Any]) -> str:
    if name == "congestion_without_overload" and c.get("cases"):
        o = c["cases"][0]
        more = f" (+{len(c['cases']) - 1} more)" if len(c["cases"]) > 1 else ""
        return (f"{name}: phase {o['phase']} port {o['port']}: {o['ce_marks']} CE marks, queue "
                f"up to {o['max_queue_pkts']} packets, with offered load "
                f"{o['offered_bps'] / 1e6:g} Mb/s <= capacity {o['capacity_bps'] / 1e6:g} Mb/s"
                + _congestion_context(o) + more)
    if c.get("value") is None:
        return f"{name}: {c.get('why', 'no data')}"
    v = c["value"]
    text = f"{name}: {f'{v:.4g}' if isinstance(v, float) else v} (limit {c['limit']})"
    if c.get("worst"):         # a per-agent check: which agent, and its CPU
        text += f": {_who(c['worst'])}"
    return text


def _congestion_context(case: dict[str, Any]) -> str:
    """What the phase's records say of the emulator while that queue built:
    frames that reached the switch after its queues' clock had passed their
    arrival (they enter bunched) and how busy the machine was."""
    parts = []
    if "behind_clock_frames" in case:
        parts.append(f"{case['behind_clock_frames']} frames entered the switch's queues "
                     "behind their clock")
    if "machine_busy_share" in case:
        parts.append(_machine_text(case))
    return f" ({'; '.join(parts)})" if parts else ""


def verdict_text(fid: dict[str, Any]) -> str:
    """One line: the verdict, the failed checks with their figures, and what
    was not measured."""
    checks = fid["checks"]
    text = fid["verdict"]
    if fid["failed"]:
        text += " - failed: " + "; ".join(_describe(k, checks[k]) for k in fid["failed"])
    if fid["not_measured"]:
        text += " - not measured: " + ", ".join(fid["not_measured"])
    return text
