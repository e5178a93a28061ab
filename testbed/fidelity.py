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

The run is ``faithful`` only if no check failed. Each check is a function of
the run's figures (``CHECKS``, read once from its phases) returning its
findings; the checks (limits in testbed.experiment.FidelityLimits):

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

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypedDict

from switches.targets import SOFT, Target
from testbed.cpu_usage import STEAL_SHOWN, CpuRecord
from testbed.experiment import FidelityLimits, RunPlan

if TYPE_CHECKING:   # (the PyPy child, Python 3.9, imports this module: typing's 3.11 names)
    from typing import NotRequired, Required, Unpack

    from testbed.timeline import PhaseData, SwitchCounters

    # A check's figure or limit: a number, a limit in words (">= 1 sample"),
    # or None where there is no figure.
    Figure = float | str | None

__all__ = ["PASS", "FAIL", "NOT_MEASURED", "evaluate_fidelity", "verdict_text", "offered_load",
           "rx_out_of_order", "arrivals_behind_clock", "Check", "Verdict"]

PASS, FAIL, NOT_MEASURED = "pass", "fail", "not measured"

# What BMv2 cannot report (simple_switch has no such statistics).
_SOFT_ONLY = "the {target} target reports no {what}"


class _MachineShares(TypedDict, total=False):
    """How busy the machine was in a phase (_machine_of)."""

    machine_busy_share: float
    machine_steal_share: float


class _CpuShares(_MachineShares, total=False):
    """What a phase's CPU record says of one host (_cpu_of)."""

    cpu_share: float
    cpu_wait_share: float


class SenderLateness(_CpuShares, total=False):
    """A sender's pacing lateness (hosts.roce.pacing's ``lateness``), where and
    how it ran, and the check's status of it."""

    phase: str
    host: str
    flow: str
    sends: int
    late_sends: int
    late_fraction: float
    late_threshold_s: float
    mean_s: float
    p99_s: float
    max_s: float
    status: str


class ReceiveLag(_CpuShares, total=False):
    """An agent's receive lag (hosts/roce/receive_lag.py), in the verdict's units."""

    phase: str
    host: str
    behind_fraction: float
    behind_s: float
    threshold_us: float
    max_us: float
    mean_us: float
    batches: int
    span_s: float


class _PhaseBehind(TypedDict, total=False):
    """A phase's frames taken behind the switch queues' clock, where the switch says."""

    behind_clock_frames: int


class CongestionCase(_MachineShares, _PhaseBehind, total=False):
    """A port that marked or queued with an offered load at most its capacity."""

    phase: str
    port: int
    ce_marks: int
    max_queue_pkts: int | None
    offered_bps: float
    capacity_bps: float
    senders: list[str]


class _Warmup(TypedDict):
    lag_max_us: float
    kernel_drops: int


class _CheckExtra(TypedDict, total=False):
    """What a check records beside its status, value and limit."""

    why: str
    samples: int
    frames: int
    received: int
    max_shift_us: int
    errors: list[str]
    worst: SenderLateness | ReceiveLag
    per_sender: list[SenderLateness]
    per_agent: list[ReceiveLag]
    ports_judged: int
    queue_limit_pkts: int | None
    max_queue_pkts: int | None
    cases: list[CongestionCase]
    sent: int
    arrived: int
    events: int


class Check(_CheckExtra, total=False):
    """One check's record in the verdict."""

    status: Required[str]
    value: Required[Figure]
    limit: Required[Figure]


class Verdict(TypedDict):
    """A run's fidelity verdict (summary.json's ``fidelity``); the simulator's
    (testbed.sim.engine.sim_fidelity) names its engine and has no warm-ups."""

    engine: NotRequired[str]
    verdict: str
    ok: bool
    failed: list[str]
    not_measured: dict[str, str]
    checks: dict[str, Check]
    warmup: NotRequired[dict[str, _Warmup]]
    text: NotRequired[str]


def _check(status: str, value: Figure, limit: Figure, **extra: Unpack[_CheckExtra]) -> Check:
    return Check(status=status, value=value, limit=limit, **extra)


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


def _ce_marks_toward(data: PhaseData, plan: RunPlan, phase_name: str) -> dict[int, int]:
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


def arrivals_behind_clock(stats: SwitchCounters) -> tuple[int, int, int] | None:
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


def rx_out_of_order(stats: SwitchCounters) -> int | None:
    """Frames a switch's ports (or a fabric's pooled switches) received out
    of order, from its statistics; None where they do not say (BMv2, a
    switch of an older version)."""
    if "rx_out_of_order" in stats:
        return int(stats["rx_out_of_order"])
    ports = stats.get("ports")
    if not ports:
        return None
    vals = [p.get("rx_out_of_order") for p in ports.values()]
    known = [v for v in vals if v is not None]
    if len(known) < len(vals):
        return None
    return sum(int(v) for v in known)


def _max_queue(data: PhaseData, port: int) -> int | None:
    """Largest queue depth seen on ``port``: sampled depths and the P4
    watermark register, None if neither was recorded."""
    seen = [s["queues"][str(port)] for s in data.switch if str(port) in s.get("queues", {})]
    reg = data.stats.get("qdepth_max")
    wm = None if reg is None else reg.get(str(port), 0)
    vals = seen + ([wm] if wm is not None else [])
    return max(vals) if vals else None


# A check's finding: the check's name and its record (_check's shape).
Finding = tuple[str, Check]


@dataclass
class _RunFigures:
    """What the checks judge: a run's figures summed over its measured phases
    (warm-ups apart), read once, with what decides whether each was measured."""

    limits: FidelityLimits
    target: Target
    hosts: str
    fabric: bool
    lag_sum: float = 0.0
    lag_n: int = 0
    lag_max: float = 0.0
    kdrops: int = 0
    out_of_order: int = 0
    order_known: bool = True
    behind: int = 0
    behind_rx: int = 0
    behind_max: int = 0
    behind_known: bool = True
    poll_samples: int = 0
    poll_errors: list[str] = field(default_factory=list)
    senders: list[SenderLateness] = field(default_factory=list)
    receivers: list[ReceiveLag] = field(default_factory=list)
    host_reports: int = 0
    tx_drops: int = 0
    overload: list[CongestionCase] = field(default_factory=list)
    ports_judged: int = 0
    warmup: dict[str, _Warmup] = field(default_factory=dict)


def _gather(run_dir: Path, plan: RunPlan, target: Target, hosts: str) -> _RunFigures:
    """The run's figures, read phase by phase: the measured phases summed,
    each warm-up's apart."""
    from testbed.timeline import load_phase

    r = _RunFigures(plan.fidelity, target, hosts, plan.topology.fabric is not None)
    for p in plan.phases:
        data = load_phase(run_dir, p.name)
        b, a = data.stats.get("before", {}), data.stats.get("after", {})
        if p.warmup:      # not a measurement: its figures apart, outside the verdict
            la = a.get("lag_us", {})
            r.warmup[p.name] = {"lag_max_us": la.get("max", 0),
                                "kernel_drops": a.get("kernel_drops", 0)
                                - b.get("kernel_drops", 0)}
            continue
        phase_behind = _add_switch_figures(r, b, a) if a else {}
        cpu = data.stats.get("cpu") or {}
        _add_host_figures(r, data, p.name, cpu)
        _add_congestion_cases(r, data, plan, p.name, cpu, phase_behind)
    return r


def _add_switch_figures(r: _RunFigures, b: SwitchCounters, a: SwitchCounters) -> _PhaseBehind:
    """Add a phase's switch statistics (before and after it); returns the
    phase's frames behind the queues' clock where the switch says."""
    lb, la = b.get("lag_us", {}), a.get("lag_us", {})
    n = la.get("samples", 0) - lb.get("samples", 0)
    s = la.get("mean", 0) * la.get("samples", 0) - lb.get("mean", 0) * lb.get("samples", 0)
    if n > 0:
        r.lag_sum += s
        r.lag_n += n
        r.lag_max = max(r.lag_max, la.get("max", 0))
    r.kdrops += a.get("kernel_drops", 0) - b.get("kernel_drops", 0)
    ooo_a, ooo_b = rx_out_of_order(a), rx_out_of_order(b)
    if ooo_a is None:
        r.order_known = False
    else:
        r.out_of_order += ooo_a - (ooo_b or 0)
    bc_a, bc_b = arrivals_behind_clock(a), arrivals_behind_clock(b)
    if bc_a is None:
        r.behind_known = False
        return {}
    frames = bc_a[0] - (bc_b[0] if bc_b else 0)
    phase_behind = _PhaseBehind(behind_clock_frames=frames)
    r.behind += frames
    r.behind_rx += bc_a[1] - (bc_b[1] if bc_b else 0)
    r.behind_max = max(r.behind_max, bc_a[2])   # largest over the run so far
    return phase_behind


def _add_host_figures(r: _RunFigures, data: PhaseData, phase: str, cpu: CpuRecord) -> None:
    """Add a phase's sampling, and its hosts' reports: pacing, receive lag, drops."""
    r.poll_samples += int(data.stats.get("poller_samples", 0) or 0)
    if data.stats.get("poller_error"):
        r.poll_errors.append(f"{phase}: {data.stats['poller_error']}")
    for e in data.all_events("flow_end"):
        r.host_reports += 1
        r.tx_drops += e.get("qp", {}).get("tx_drops", 0)
        if e.get("role") == "sender" and "pacer" in e:
            r.senders.append({"phase": phase, "host": e["host"], "flow": e["flow"],
                              **e["pacer"]["lateness"], **_cpu_of(cpu, e["host"])})
    for e in data.all_events("pacer_report") + data.all_events("qp_report"):
        r.host_reports += 1
        r.tx_drops += e.get("qp", {}).get("tx_drops", 0)
        if e.get("pacer"):
            r.senders.append({"phase": phase, "host": e["host"], "flow": e.get("flow", "?"),
                              **e["pacer"]["lateness"], **_cpu_of(cpu, e["host"])})
    r.receivers += [{**x, **_cpu_of(cpu, x["host"])}
                    for x in _receive_lags(data.all_events("agent_end"), phase)]
    for q in (data.stats.get("host_qdiscs") or {}).values():
        r.tx_drops += int(q.get("dropped", 0))


def _add_congestion_cases(r: _RunFigures, data: PhaseData, plan: RunPlan, phase: str,
                          cpu: CpuRecord, phase_behind: _PhaseBehind) -> None:
    """Add the phase's ports whose offered load was at most their rate, and
    those of them that marked or queued anyway."""
    lim = r.limits
    marks = _ce_marks_toward(data, plan, phase)
    for port, load in offered_load(plan, phase).items():
        if load.capacity_bps is None or load.offered_bps > load.capacity_bps * (1 + 1e-9):
            continue  # no rate set, or really overloaded: congestion is the model's
        r.ports_judged += 1
        q = _max_queue(data, port)
        ce = marks.get(port, 0)
        qbad = (lim.uncongested_queue_pkts is not None and q is not None
                and q >= lim.uncongested_queue_pkts)
        if ce > 0 or qbad:
            r.overload.append({"phase": phase, "port": port, "ce_marks": ce,
                               "max_queue_pkts": q, "offered_bps": load.offered_bps,
                               "capacity_bps": load.capacity_bps, "senders": list(load.senders),
                               **_machine_of(cpu), **phase_behind})


def _not_reported(r: _RunFigures, name: str, what: str, limit: Figure) -> Finding:
    """A switch check the target cannot measure (BMv2)."""
    return name, _check(NOT_MEASURED, None, limit,
                        why=_SOFT_ONLY.format(target=r.target.name, what=what))


def _not_measured(name: str, limit: Figure, why: str) -> Finding:
    return name, _check(NOT_MEASURED, None, limit, why=why)


# ---------------------------------------------------------------------------
# the checks, in the verdict's order


def _switch_lag(r: _RunFigures) -> list[Finding]:
    lim = r.limits
    if not r.target.reports_stats:
        return [_not_reported(r, "switch_lag_mean_us", "processing-lag statistics",
                              lim.switch_lag_mean_us),
                _not_reported(r, "switch_lag_max_us", "processing-lag statistics",
                              lim.switch_lag_max_us)]
    if r.lag_n == 0:
        why = "no lag samples: the switch's processing lag was not measured"
        return [("switch_lag_mean_us", _check(FAIL, None, lim.switch_lag_mean_us, samples=0,
                                              why=why)),
                ("switch_lag_max_us", _check(FAIL, None, lim.switch_lag_max_us, why=why))]
    mean = round(r.lag_sum / r.lag_n, 1)
    return [("switch_lag_mean_us", _check(_le(mean, lim.switch_lag_mean_us), mean,
                                          lim.switch_lag_mean_us, samples=r.lag_n)),
            ("switch_lag_max_us", _check(_le(r.lag_max, lim.switch_lag_max_us), r.lag_max,
                                         lim.switch_lag_max_us))]


def _switch_kernel_drops(r: _RunFigures) -> list[Finding]:
    lim = r.limits
    if not r.target.reports_stats:
        return [_not_reported(r, "switch_kernel_drops", "kernel-drop statistics",
                              lim.kernel_drops)]
    return [("switch_kernel_drops", _check(_le(r.kdrops, lim.kernel_drops), r.kdrops,
                                           lim.kernel_drops))]


def _switch_ingress_order(r: _RunFigures) -> list[Finding]:
    lim = r.limits
    if not r.target.reports_stats:
        return [_not_reported(r, "switch_ingress_order", "receive-order statistics",
                              lim.ingress_out_of_order)]
    if not r.order_known:
        return [_not_measured("switch_ingress_order", lim.ingress_out_of_order,
                              "the switch did not report frames received out of order "
                              "(an older run)")]
    return [("switch_ingress_order", _check(
        _le(r.out_of_order, lim.ingress_out_of_order), r.out_of_order,
        lim.ingress_out_of_order,
        why=("frames a switch port received out of order: the kernel, not the "
             "modelled links, reordered them") if r.out_of_order else ""))]


def _switch_arrival_timing(r: _RunFigures) -> list[Finding]:
    lim = r.limits
    if not r.target.reports_stats:
        return [_not_reported(r, "switch_arrival_timing", "arrival-timing statistics",
                              lim.arrivals_behind_clock_fraction)]
    if not (r.behind_known and r.behind_rx > 0):
        return [_not_measured("switch_arrival_timing", lim.arrivals_behind_clock_fraction,
                              "the switch did not report arrival timing (an older run)"
                              if not r.behind_known else "the switch received no frames")]
    frac = r.behind / r.behind_rx
    return [("switch_arrival_timing", _check(
        _le(frac, lim.arrivals_behind_clock_fraction), round(frac, 5),
        lim.arrivals_behind_clock_fraction, frames=r.behind, received=r.behind_rx,
        max_shift_us=r.behind_max,
        why=("frames the switch's queues took later than they arrived (another "
             "CPU delivered them after later frames): they entered bunched")
        if r.behind else ""))]


def _switch_sampling(r: _RunFigures) -> list[Finding]:
    if not r.target.reports_stats:
        return [_not_reported(r, "switch_sampling", "statistics to sample", ">= 1 sample")]
    if r.poll_errors or r.poll_samples == 0:
        return [("switch_sampling", _check(
            FAIL, r.poll_samples, ">= 1 sample, no error", errors=r.poll_errors,
            why="; ".join(r.poll_errors) or "the switch statistics were never sampled"))]
    return [("switch_sampling", _check(PASS, r.poll_samples, ">= 1 sample, no error"))]


def _host_pacing(r: _RunFigures) -> list[Finding]:
    limit = r.limits.pacing_late_fraction
    if r.hosts == "rxe":
        return [_not_measured("host_pacing_late_fraction", limit,
                              "rxe hosts: the kernel sends and tc HTB shapes the host's link; "
                              "there is no pacer whose lateness could be measured")]
    if not r.senders:
        return [("host_pacing_late_fraction", _check(
            FAIL, None, limit,
            why="no sender reported its pacing: the hosts' timing was not measured"))]
    worst = max(r.senders, key=lambda s: s["late_fraction"])
    for s in r.senders:
        s["status"] = _le(s["late_fraction"], limit)
    return [("host_pacing_late_fraction", _check(
        _le(worst["late_fraction"], limit), worst["late_fraction"], limit,
        worst=worst, per_sender=r.senders))]


def _host_receive_lag(r: _RunFigures) -> list[Finding]:
    limit = r.limits.receive_behind_fraction
    if r.hosts == "rxe":
        return [_not_measured("host_receive_lag", limit,
                              "rxe hosts: the kernel receives, no agent's socket to wait in")]
    if not r.receivers:
        return [_not_measured("host_receive_lag", limit,
                              "no agent reported its receive lag (an older run, or a provider "
                              "without one)")]
    worst = max(r.receivers, key=lambda x: x["behind_fraction"])
    return [("host_receive_lag", _check(
        _le(worst["behind_fraction"], limit), worst["behind_fraction"], limit,
        worst=worst, per_agent=r.receivers,
        why=("an agent read its frames late for longer than the limit: its ACKs and "
             "CNPs (the congestion feedback) left late")
        if worst["behind_fraction"] > limit else ""))]


def _host_tx_drops(r: _RunFigures) -> list[Finding]:
    limit = r.limits.host_tx_drops
    if r.host_reports == 0:
        return [("host_tx_drops", _check(FAIL, None, limit,
                                         why="no host reported its counters"))]
    return [("host_tx_drops", _check(_le(r.tx_drops, limit), r.tx_drops, limit))]


def _congestion_without_overload(r: _RunFigures) -> list[Finding]:
    if r.ports_judged == 0:
        return [_not_measured("congestion_without_overload", 0,
                              "a leaf-spine fabric: a receiver's CE marks may come from any hop"
                              if r.fabric else
                              "no port had a set rate and an offered load at most that rate "
                              "(nothing to compare marks or queues with)")]
    worst_q = max((o["max_queue_pkts"] or 0 for o in r.overload), default=0)
    return [("congestion_without_overload", _check(
        FAIL if r.overload else PASS, sum(o["ce_marks"] for o in r.overload), 0,
        ports_judged=r.ports_judged, queue_limit_pkts=r.limits.uncongested_queue_pkts,
        max_queue_pkts=worst_q if r.overload else None, cases=r.overload,
        why=("CE marks or queue growth on a port whose offered load was at most its "
             "capacity: queues built by the emulator's jitter, not by the modelled "
             "network") if r.overload else ""))]


# The verdict's checks, each judging the run's figures on its own; their
# findings appear in this order in ``checks``, ``failed`` and the text.
CHECKS: tuple[Callable[[_RunFigures], list[Finding]], ...] = (
    _switch_lag, _switch_kernel_drops, _switch_ingress_order, _switch_arrival_timing,
    _switch_sampling, _host_pacing, _host_receive_lag, _host_tx_drops,
    _congestion_without_overload)


def evaluate_fidelity(run_dir: Path, plan: RunPlan, target: Target = SOFT,
                      hosts: str = "udp") -> Verdict:
    """Judge a finished run: every check's status, value and limit, the
    verdict, and what the target or the hosts could not measure (rxe hosts have
    no pacer: the kernel sends, tc HTB shapes)."""
    figures = _gather(run_dir, plan, target, hosts)
    checks = {name: rec for check in CHECKS for name, rec in check(figures)}
    failed = [k for k, c in checks.items() if c["status"] == FAIL]
    not_measured = {k: c["why"] for k, c in checks.items() if c["status"] == NOT_MEASURED}
    out: Verdict = {"verdict": "not faithful" if failed else "faithful", "ok": not failed,
           "failed": failed, "not_measured": not_measured, "checks": checks,
           "warmup": figures.warmup}
    out["text"] = verdict_text(out)
    return out


def _receive_lags(agent_ends: list[dict[str, Any]], phase: str) -> list[ReceiveLag]:
    """Per agent that reported ``receive_lag``: the share of the time it ran
    during which its oldest unread frame was older than its threshold
    (hosts/roce/receive_lag.py: a feedback interval of the modelled network)."""
    out: list[ReceiveLag] = []
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


def _cpu_of(cpu: CpuRecord, host: str) -> _CpuShares:
    """What the phase's CPU record (testbed.cpu_usage) says of ``host``: its
    share of a CPU, the share of the time it waited for one, and how busy the
    machine was; nothing if the phase has no record."""
    proc = cpu.get("processes", {}).get(host)
    if proc is None:
        return {}
    return {"cpu_share": proc["cpu_share"], "cpu_wait_share": proc["wait_share"],
            **_machine_of(cpu)}


def _machine_of(cpu: CpuRecord) -> _MachineShares:
    """How busy the phase's CPU record says the machine was, and how much of
    its CPU time the hypervisor held; nothing if the phase has no record."""
    if "machine" not in cpu:
        return {}
    out: _MachineShares = {"machine_busy_share": cpu["machine"]["busy_share"]}
    if "steal_share" in cpu["machine"]:
        out["machine_steal_share"] = cpu["machine"]["steal_share"]
    return out


def _machine_text(c: _MachineShares) -> str:
    """``machine 52% busy, 15.1% of its CPU time stolen by the hypervisor``."""
    stolen = c.get("machine_steal_share", 0.0)
    return (f"machine {c['machine_busy_share']:.0%} busy"
            + (f", {stolen:.1%} of its CPU time stolen by the hypervisor"
               if stolen >= STEAL_SHOWN else ""))


def _who(worst: SenderLateness | ReceiveLag) -> str:
    """Which agent in which phase, and whether it got a CPU when it needed one."""
    text = f"{worst.get('host', '?')} in phase {worst.get('phase', '?')}"
    if "cpu_wait_share" in worst:
        text += f", which waited for a CPU {worst['cpu_wait_share']:.0%} of the time"
        if "machine_busy_share" in worst:
            text += f" ({_machine_text(worst)})"
    return text


def _describe(name: str, c: Check) -> str:
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


def _congestion_context(case: CongestionCase) -> str:
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


def verdict_text(fid: Verdict) -> str:
    """One line: the verdict, the failed checks with their figures, and what
    was not measured."""
    checks = fid["checks"]
    text = fid["verdict"]
    if fid["failed"]:
        text += " - failed: " + "; ".join(_describe(k, checks[k]) for k in fid["failed"])
    if fid["not_measured"]:
        text += " - not measured: " + ", ".join(fid["not_measured"])
    return text
