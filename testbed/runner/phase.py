"""One phase on the Mininet engine: its switch commands, its agents started
together and watched until every one is done (EPIC groups and late commands
installed on the way), the switch sampled, and ``switch_stats.json``
written."""

from __future__ import annotations

import dataclasses
import json
import time
from pathlib import Path
from typing import TYPE_CHECKING

from hosts.agent_spec import JobSpec, SpecError, agent_interpreter
from switches.controller.api import ControllerError
from testbed.agent_launcher import AgentLauncher
from testbed.cpu_usage import CpuSampler, format_cpu
from testbed.experiment import PhasePlan, RunPlan
from testbed.runner.agents import (
    _Agent,
    _failure_message,
    _make_realtime,
    _start_agent,
    _stop_agents,
)
from testbed.runner.errors import RunError
from testbed.runner.options import RunOptions
from testbed.runner.priorities import rt_priorities
from testbed.runner.progress import Progress
from testbed.runner.switch_commands import _apply_commands
from testbed.runner.switch_stats import (
    SwitchPoller,
    _switch_stats,
    merge_switch_stats,
    poll_file,
    read_registers,
)

if TYPE_CHECKING:
    from mininet.net import Mininet

    from switches.node import P4SwitchNode
    from testbed.runner.records import AppliedCommand
    from testbed.timeline import LateCommand, PhaseStats

# How often a phase reads its processes' CPU time (testbed.cpu_usage): a few
# file reads per process; the shares span the first to the last reading.
CPU_SAMPLE_S = 0.5


# rxe hosts run where rdma_rxe exists, here a guest VM, often on an emulated CPU
# (TCG): an agent takes about 20 s to start there and the switch runs several
# times slower, so a phase (and an agent) on rxe hosts gets this much more time
# before it counts as hung.
RXE_TIMEOUT_FACTOR = 3.0
RXE_SETUP_S = 60.0


def hang_timeout_s(timeout_s: float, provider: str) -> float:
    """A plan's phase or job timeout for hosts of ``provider``."""
    if provider == "rxe":
        return timeout_s * RXE_TIMEOUT_FACTOR + RXE_SETUP_S
    return timeout_s


def _phase_jobs(phase: PhasePlan, pdir: Path, provider: str = "udp") -> dict[str, JobSpec]:
    """The phase's specs with the run-time fields filled in (rendezvous, barrier,
    the hosts' provider)."""
    hosts = sorted(phase.jobs, key=lambda h: int(h[1:]) if h[1:].isdigit() else h)
    out = {}
    for rank, h in enumerate(hosts):
        job = phase.jobs[h]
        out[h] = dataclasses.replace(
            job, phase=phase.name, rendezvous_dir=str(pdir / "rendezvous"),
            barrier=(rank, len(hosts)),
            timeout_s=min(hang_timeout_s(job.timeout_s, provider),
                          hang_timeout_s(phase.timeout_s, provider)),
            provider=provider)
    return out


# A host qdisc's counters, reported as the phase's difference; its other
# figures as read at the end.
_QDISC_COUNTERS = ("sent_bytes", "sent_pkts", "dropped", "overlimits")


def _run_phase(phase: PhasePlan, plan: RunPlan, run_dir: Path, net: Mininet,
               switches: dict[str, P4SwitchNode], prog: Progress, opts: RunOptions,
               agents_out: list[_Agent], applied: list[AppliedCommand],
               launchers: dict[str, AgentLauncher] | None = None) -> PhaseStats:
    """Run ``phase`` on the network that is up; its statistics, also written
    to ``switch_stats.json``. ``agents_out`` holds its agents while they run
    (for whoever stops them on a failure)."""
    pdir = run_dir / "phases" / phase.name
    pdir.mkdir(parents=True, exist_ok=True)
    prog.line(f"phase {phase.name}: {len(phase.jobs)} agent(s)"
              + (f" - {phase.notes}" if phase.notes else ""))
    fabric = plan.topology.fabric is not None
    reg = plan.topology.qdepth_register
    unknown = sorted(set(phase.switch_commands) - set(switches))
    if unknown:
        raise RunError(f"phase {phase.name}: switch_commands for unknown switch(es) "
                       f"{', '.join(unknown)}; the network has {', '.join(sorted(switches))}")
    target = opts.switch_target()
    for name, one in switches.items():
        where = f"phase {phase.name}" + (f" ({name})" if fabric else "")
        _apply_commands(one.controller(),
                        (*phase.commands, *phase.switch_commands.get(name, ())), target,
                        plan.topology.packet_bytes, where, applied)
        if reg:
            _apply_commands(one.controller(), [f"register_reset {reg}"], target,
                            plan.topology.packet_bytes, where, applied)
        if target.reports_stats:
            one.cmd_cli("switch_lag_max_reset")    # the lag maximum of this phase alone
    sw = next(iter(switches.values()))
    ctl = sw.controller()
    befores = {n: _switch_stats(one, target) for n, one in switches.items()}
    pollers: list[SwitchPoller] = []
    if target.reports_stats:
        pollers = [SwitchPoller(one.control_port, pdir / poll_file(n, fabric),
                                plan.switch_poll_interval_s) for n, one in switches.items()]
    try:
        jobs = _phase_jobs(phase, pdir, opts.hosts)
    except SpecError as e:
        raise RunError(f"phase {phase.name}: {e}") from e
    qdiscs_before: dict[str, dict[str, int]] = {}
    if plan.topology.host_line_qdisc:
        from testbed.net import host_qdisc_stats

        qdiscs_before = {h: host_qdisc_stats(net.get(h)) for h in jobs}
    agents = []
    for h, spec in jobs.items():
        sp = pdir / f"{h}.spec.json"
        sp.write_text(spec.to_json())
        try:
            interp = agent_interpreter(spec)
        except SpecError as e:
            raise RunError(f"phase {phase.name}: {e}") from e
        agents.append(_Agent(h, net.get(h), sp, pdir / f"{h}.events.jsonl", pdir / f"{h}.log",
                             interp, realtime=plan.topology.realtime,
                             priorities=rt_priorities(plan.topology),
                             sends=any(f.role == "sender" for f in spec.flows)
                             or spec.collective is not None))
    agents_out[:] = agents
    for poller in pollers:
        poller.start()
    t_start = time.monotonic()
    cpu = CpuSampler()
    for n, one in switches.items():
        if one.proc is not None:
            cpu.add(n, one.proc.pid)
    try:
        for a in agents:
            _start_agent(a, (launchers or {}).get(a.host))
            if a.proc is not None:
                cpu.add(a.host, a.proc.pid)
        for a in agents:
            _make_realtime(a)
        cpu.sample()
        next_cpu = time.monotonic() + CPU_SAMPLE_S
        next_status = t_start + opts.status_interval_s
        phase_timeout_s = hang_timeout_s(phase.timeout_s, opts.hosts)
        deadline = t_start + phase_timeout_s + 10.0
        epic_pending = phase.epic_group is not None
        late_due = sorted(phase.late_commands)
        late_done: list[LateCommand] = []
        while True:
            if late_due:
                late_done += _apply_late(late_due, phase, plan, switches, agents, opts, applied, prog)
            if epic_pending and fabric:
                epic_pending = not _install_epic_tree(phase, plan, jobs, pdir, switches, opts,
                                                      applied, prog)
            elif epic_pending:
                from testbed.epic import (
                    communicator_nodes,
                    epic_group_spec,
                    install_from_rendezvous,
                )

                prior = sum(communicator_nodes(len(q.jobs))
                            for q in plan.phases[:plan.phases.index(phase)]
                            if q.epic_group is not None)
                lines = install_from_rendezvous(epic_group_spec(phase.epic_group or {}), jobs,
                                                pdir / "rendezvous" / "epic",
                                                node_base=prior)
                if lines is not None:
                    _apply_commands(ctl, lines, target, plan.topology.packet_bytes,
                                    f"phase {phase.name} (EPIC group)", applied)
                    (pdir / "rendezvous" / "epic" / "ready").write_text("ok\n")
                    prog.line(f"phase {phase.name}: EPIC group installed "
                              f"({len(jobs)} ranks)")
                    epic_pending = False
            for a in agents:
                if a.rc is None and a.proc is not None:
                    a.rc = a.proc.poll()
                    if a.rc is not None and a.rc != 0:
                        raise RunError(_failure_message(a, phase.name))
            if time.monotonic() >= next_cpu:
                cpu.sample()
                next_cpu = time.monotonic() + CPU_SAMPLE_S
            if all(a.rc == 0 for a in agents):
                cpu.sample()
                break
            for one in switches.values():
                if one.proc is None or one.proc.poll() is not None:
                    raise RunError(f"switch {one.name} exited during phase {phase.name!r}; "
                                   f"log {one.log_path}:\n{one.log_tail()}")
            now = time.monotonic()
            if now >= deadline:
                late = ", ".join(f"{a.host} ({a.status()})" for a in agents if a.rc is None)
                raise RunError(f"phase {phase.name!r} timed out after {phase_timeout_s:.0f} s; "
                               f"still running: {late}")
            if now >= next_status:
                prog.line(f"phase {phase.name}: " + ", ".join(f"{a.host} {a.status()}"
                                                              for a in agents))
                next_status = now + opts.status_interval_s
            time.sleep(0.05)
    finally:
        _stop_agents(agents)
        for poller in pollers:
            poller.stop()
    afters = {n: _switch_stats(one, target) for n, one in switches.items()}
    host_qdiscs: dict[str, dict[str, int]] = {}
    if plan.topology.host_line_qdisc:
        from testbed.net import host_qdisc_stats

        for h, q0 in qdiscs_before.items():
            q1 = host_qdisc_stats(net.get(h))
            host_qdiscs[h] = {k: v - q0.get(k, 0) if k in _QDISC_COUNTERS else v
                              for k, v in q1.items()}
    # the watermark and the observed registers, each switch's in one read
    names = ((reg,) if reg else ()) + plan.topology.observed_registers
    read: dict[str, dict[str, dict[str, int]]] = {}
    for n, one in switches.items():
        if names:
            try:
                read[n] = read_registers(one.controller(), names)
            except ControllerError as e:
                raise RunError(f"phase {phase.name}: reading register(s) {', '.join(names)} "
                               f"of {n} failed: {e}") from e
    qmaxes = {n: r[reg] for n, r in read.items()} if reg else {}
    observed = {n: {k: r[k] for k in plan.topology.observed_registers}
                for n, r in read.items()} if plan.topology.observed_registers else {}
    errors = [f"{n}: {p.error}" for n, p in zip(switches, pollers, strict=False) if p.error]
    stats: PhaseStats = {
        "late_commands": late_done,
        "poller_samples": sum(p.samples for p in pollers),
        "poller_error": "; ".join(errors) or None,
        "wall_s": time.monotonic() - t_start}
    if host_qdiscs:
        stats["host_qdiscs"] = host_qdiscs
    if observed:
        stats["registers"] = observed
    stats["cpu"] = cpu.result()
    if plan.topology.realtime:
        # which agents ran at real-time priority (or why one could not)
        stats["realtime_agents"] = {a.host: a.realtime or a.realtime_error for a in agents}
    if fabric:
        # pooled for the fidelity checks; every switch's own figures beside them
        stats.update({"before": merge_switch_stats(befores),
                      "after": merge_switch_stats(afters), "qdepth_max": None,
                      "switches": {n: {"before": befores[n], "after": afters[n],
                                       "qdepth_max": qmaxes.get(n) if reg else None}
                                   for n in switches}})
    else:
        # None: the program has no watermark register (nothing measured)
        stats.update({"before": befores[sw.name], "after": afters[sw.name],
                      "qdepth_max": qmaxes.get(sw.name) if reg else None})
    (pdir / "switch_stats.json").write_text(json.dumps(stats, indent=1, sort_keys=True))
    prog.line(f"phase {phase.name}: done in {stats['wall_s']:.1f} s ("
              + ", ".join(f"{a.host} ok" for a in agents) + ")")
    if stats["cpu"]["processes"]:
        prog.line(f"phase {phase.name}: CPU {format_cpu(stats['cpu'])}")
    return stats


def _install_epic_tree(phase: PhasePlan, plan: RunPlan, jobs: dict[str, JobSpec], pdir: Path,
                       switches: dict[str, P4SwitchNode], opts: RunOptions,
                       applied: list[AppliedCommand], prog: Progress) -> bool:
    """Install a fabric phase's EPIC aggregation tree (``epic_group["tree"]``) on
    every switch of it once the ranks reported their QPNs; False while some
    have not."""
    from testbed.epic import epic_group_spec, install_tree_from_rendezvous, tree_nodes

    fab = plan.topology.fabric
    assert fab is not None and phase.epic_group is not None
    prior: dict[str, int] = {}
    for q in plan.phases[:plan.phases.index(phase)]:
        if q.epic_group is not None:
            for n, k in tree_nodes(epic_group_spec(q.epic_group), fab, len(q.jobs)).items():
                prior[n] = prior.get(n, 0) + k
    try:
        lines = install_tree_from_rendezvous(epic_group_spec(phase.epic_group), jobs,
                                             pdir / "rendezvous" / "epic", fab, node_base=prior)
    except ValueError as e:
        raise RunError(f"phase {phase.name}: EPIC tree: {e}") from e
    if lines is None:
        return False
    for name, one in lines.items():
        _apply_commands(switches[name].controller(), one, opts.switch_target(),
                        plan.topology.packet_bytes, f"phase {phase.name} (EPIC tree, {name})",
                        applied)
    (pdir / "rendezvous" / "epic" / "ready").write_text("ok\n")
    prog.line(f"phase {phase.name}: EPIC tree installed on {', '.join(lines)} "
              f"({len(jobs)} ranks)")
    return True


def _apply_late(late: list[tuple[float, str]], phase: PhasePlan, plan: RunPlan,
                switches: dict[str, P4SwitchNode], agents: list[_Agent], opts: RunOptions,
                applied: list[AppliedCommand], prog: Progress) -> list[LateCommand]:
    """Apply (and remove from ``late``) the late commands that are due: their
    time counts from the agents' start barrier, once every agent passed it."""
    for a in agents:
        if a.start_ns is None:
            a._read_new_events()
    starts = [a.start_ns for a in agents]
    if any(t is None for t in starts):
        return []
    t0 = max(t for t in starts if t is not None)
    now = time.monotonic_ns()
    due = [(t, line) for t, line in late if now - t0 >= t * 1e9]
    if not due:
        return []
    del late[:len(due)]
    fabric = plan.topology.fabric is not None
    for name, one in switches.items():
        _apply_commands(one.controller(), [line for _t, line in due], opts.switch_target(),
                        plan.topology.packet_bytes,
                        f"phase {phase.name} +{due[-1][0]:g} s" + (f" ({name})" if fabric else ""),
                        applied)
    done = time.monotonic_ns()
    prog.line(f"phase {phase.name}: {len(due)} late command(s) applied "
              f"{(done - t0) / 1e9:.2f} s after the start")
    return [{"t_s": t, "line": line, "applied_ns": done, "start_ns": t0} for t, line in due]
