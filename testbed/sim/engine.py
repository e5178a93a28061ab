"""The virtual-time engine: a RunPlan executed on one simulated clock, in one process.

What the Mininet engine brings up as namespaces, veths, switch daemons and
agent processes runs here as objects on one event loop (testbed.sim.loop):
the same compiled P4 program on the same soft-switch runtime and traffic
manager (testbed.sim.switch), the same RoCE stack, DCQCN and agents
(hosts.agent.agent.Agent, driven by testbed.sim.host), links with rate,
serialization and delay (testbed.sim.link). Links and timers run at the
plan's rates; every random choice comes from the run's seed and the plan's
own seeds; nothing on the simulated path reads a wall clock, so the same
plan, seed and code give byte-identical timelines.

It writes what the Mininet engine writes for the analysis: per phase the
agents' ``<host>.spec.json`` and ``<host>.events.jsonl`` (times in simulated
ns), ``switch.jsonl`` / ``switch-<name>.jsonl`` samples every
``switch_poll_interval_s`` of simulated time and ``switch_stats.json``.

What it cannot honour it refuses before the run (:func:`check_plan`): rxe
hosts. EPIC groups are installed as the Mininet engine's
controller installs them, from the ranks' reports, before the start.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from hosts.agent_spec import JobSpec, SpecError
from testbed.experiment import PhasePlan, RunPlan
from testbed.sim.host import MemoryDoneBarrier, SimHost
from testbed.sim.loop import EventLoop, SimError
from testbed.sim.network import SimNetwork, compile_plan_program, switch_seed
from testbed.sim.switch import SimSwitch

if TYPE_CHECKING:
    from hosts.agent import Agent, EventLog
    from hosts.agent.exchange import Offer
    from switches.soft.runtime.contract import ProgramModule
    from testbed.fidelity import Verdict
    from testbed.runner.records import SimPhase, SimRecord
    from testbed.timeline import LateCommand, PhaseStats

__all__ = ["SimRun", "SimUnsupported", "check_plan", "sim_fidelity"]

class SimUnsupported(ValueError):
    """The plan asks for something the virtual-time engine does not model."""


def check_plan(plan: RunPlan, hosts: str = "udp") -> None:
    """Refuse, before anything runs, a plan the engine cannot honour."""
    if hosts != "udp":
        raise SimUnsupported(f"--hosts {hosts}: the virtual-time engine runs the udp "
                             "provider's RoCE stack; rxe hosts need the Mininet engine "
                             "(a kernel with rdma_rxe)")


def host_line_bps(plan: RunPlan) -> float:
    """The hosts' NIC line rate (every job's transport scale must agree)."""
    from hosts.roce import Scale

    rates = {Scale(**s.transport.scale).line_rate_bps for p in plan.phases for s in p.jobs.values()}
    if len(rates) != 1:
        raise SimUnsupported(f"the hosts' line rates differ ({sorted(rates)} b/s): "
                             "the engine gives every NIC one rate")
    return rates.pop()


@dataclass
class PhaseResult:
    """What a phase measured of the engine itself."""

    name: str
    start_ns: int
    end_ns: int
    polls: int
    events: int

    def record(self) -> SimPhase:
        return {"name": self.name, "start_ns": self.start_ns, "end_ns": self.end_ns,
                "polls": self.polls, "events": self.events}


class SimRun:
    """One run of ``plan`` in ``run_dir``. ``apply(switch, lines, where)``
    applies control-plane lines to a switch (the runner's, so they are
    recorded as on the Mininet engine); ``line(msg)`` reports progress;
    ``wall`` (seconds, any base) is read only for progress reports, never on
    the simulated path, and may be None; ``program``: the plan's compiled P4
    module, if compiled elsewhere (testbed.sim.pypy)."""

    def __init__(self, plan: RunPlan, run_dir: Path, *, seed: int = 1,
                 host_links: str = "wire",
                 apply: Callable[[SimSwitch, list[str], str], None],
                 line: Callable[[str], None] = lambda _m: None,
                 wall: Callable[[], float] | None = None,
                 program: ProgramModule | None = None) -> None:
        check_plan(plan)
        self.plan = plan
        self.run_dir = run_dir
        self.seed = seed
        self.apply = apply
        self.line = line
        self.wall = wall
        self.loop = EventLoop()
        self.host_bps = host_line_bps(plan)
        self.host_links = host_links
        self.net = SimNetwork.build(plan, self.loop, self.host_bps, seed,
                                    program or compile_plan_program(plan), host_links)
        self.phases: list[PhaseResult] = []

    # -- the whole run -----------------------------------------------------------
    def run(self) -> None:
        from hosts.agent.events import simulated_clock

        plan, net = self.plan, self.net
        topo = plan.topology
        fab = topo.fabric is not None
        for name, sw in net.switches.items():
            self.apply(sw, net.route_commands[name], f"routes ({name})" if fab else "routes")
            self.apply(sw, [*plan.network_commands(), *topo.switch_commands.get(name, ())],
                       f"topology ({name})" if fab else "topology")
        loop = self.loop
        with simulated_clock(lambda: loop.now):
            for phase in plan.phases:
                self.phases.append(self._run_phase(phase))

    # -- one phase ---------------------------------------------------------------
    def _run_phase(self, phase: PhasePlan) -> PhaseResult:
        from hosts.agent.agent import Agent
        from hosts.agent.errors import AgentError
        from hosts.agent.events import EventLog
        from testbed.runner import RunError
        from testbed.runner.phase import _phase_jobs
        from testbed.runner.switch_stats import poll_file

        plan, net, loop = self.plan, self.net, self.loop
        fab = plan.topology.fabric is not None
        pdir = self.run_dir / "phases" / phase.name
        pdir.mkdir(parents=True, exist_ok=True)
        self.line(f"phase {phase.name}: {len(phase.jobs)} agent(s)"
                  + (f" - {phase.notes}" if phase.notes else ""))
        reg = plan.topology.qdepth_register
        for name, sw in net.switches.items():
            # each phase draws from its own stream: a phase of a run of seeds
            # 3-5 is the same as in a run of seeds 0-5
            sw.reseed(switch_seed(self.seed, name, phase.name))
            where = f"phase {phase.name}" + (f" ({name})" if fab else "")
            self.apply(sw, [*phase.commands, *phase.switch_commands.get(name, ())], where)
            if reg:
                self.apply(sw, [f"register_reset {reg}"], where)
        try:
            # the rendezvous directory relative to the run directory, so the
            # timelines (which hold the specs) do not depend on where it is
            jobs = {h: dataclasses.replace(_sim_job(s), rendezvous_dir=str(
                        Path("phases", phase.name, "rendezvous")))
                    for h, s in _phase_jobs(phase, pdir, "udp").items()}
        except SpecError as e:
            raise RunError(f"phase {phase.name}: {e}") from e
        befores = {n: sw.stats() for n, sw in net.switches.items()}
        start_ns, events0 = loop.now, loop.events
        logs: dict[str, EventLog] = {}
        agents: dict[str, Agent] = {}
        hosts: dict[str, SimHost] = {}
        errors: list[tuple[str, BaseException]] = []
        finished: list[str] = []
        try:
            for h, spec in jobs.items():
                (pdir / f"{h}.spec.json").write_text(spec.to_json())
                log = EventLog(pdir / f"{h}.events.jsonl", h, line_buffered=False)
                logs[h] = log
                log.emit("agent_start", pid=0, phase=spec.phase, spec=spec.to_dict(),
                         interpreter=_interpreter(), engine="sim")
                agents[h] = Agent(spec, log, provider=net.nics[h],
                                  rendezvous_dir=pdir / "rendezvous")
            # the exchanges of connection data, as the rendezvous files do it
            offers = {h: a.prepare() for h, a in agents.items()}
            gathered = _gather(offers, phase.name)
            if phase.epic_group is not None:
                self._install_epic(phase, jobs, gathered, pdir)
            for a in agents.values():
                a.connect(gathered)
        except (AgentError, SimError) as e:
            _close(agents, logs)
            raise RunError(f"phase {phase.name}: set-up failed: {e}") from e

        def done(host: SimHost) -> None:
            finished.append(host.name)
            if len(finished) == len(hosts):
                loop.stop()

        def failed(host: SimHost, e: BaseException) -> None:
            logs[host.name].emit("error", message=str(e))
            errors.append((host.name, e))
            loop.stop()

        shared: set[int] = set()
        t_ready = loop.now
        from testbed.net import SoftSignal

        for h, spec in jobs.items():
            hosts[h] = SimHost(h, loop, net.nics[h], agents[h], done, failed,
                               passthrough=(SoftSignal,))
            rank, size = spec.barrier
            hosts[h].begin(t_ready + int(spec.start_delay_s * 1e9),
                           MemoryDoneBarrier(shared, rank, size))
        active = [True]
        samples = [0]
        files = {n: open(pdir / poll_file(n, fab), "w") for n in net.switches}
        interval = max(1, int(plan.switch_poll_interval_s * 1e9))

        def sample(_: object) -> None:
            if not active[0]:
                return
            for n, sw in net.switches.items():
                files[n].write(json.dumps({"t_ns": loop.now, **sw.sample()},
                                          separators=(",", ":")) + "\n")
            samples[0] += 1
            loop.at(loop.now + interval, sample)
        loop.at(loop.now, sample)
        late_done: list[LateCommand] = []
        phase_fns: set[Callable[[object], None]] = {sample}
        for t_s, cmd in phase.late_commands:
            def late(_: object, t_s: float = t_s, cmd: str = cmd) -> None:
                if not active[0]:
                    return
                for n, sw in net.switches.items():
                    self.apply(sw, [cmd], f"phase {phase.name} +{t_s:g} s"
                               + (f" ({n})" if fab else ""))
                late_done.append({"t_s": t_s, "line": cmd, "applied_ns": loop.now,
                                  "start_ns": t_ready})
            phase_fns.add(late)
            loop.at(t_ready + int(t_s * 1e9), late)
        timeout_ns = int(phase.timeout_s * 1e9) + 10 * 1_000_000_000
        deadline = t_ready + timeout_ns
        progress = _Progress(self, phase.name, agents) if self.wall is not None else None
        try:
            loop.run(until_ns=deadline, on_batch=progress.report if progress else None)
        except SoftSignal:
            raise                   # SIGTERM: the runner stops, and so does a suite
        except Exception as e:
            raise RunError(f"phase {phase.name}: the simulation failed at "
                           f"{loop.now / 1e9:.6f} s: {type(e).__name__}: {e}") from e
        finally:
            active[0] = False
            for f in files.values():
                f.close()
        try:
            if errors:
                host, err = errors[0]
                raise RunError(f"phase {phase.name}: agent {host} failed at "
                               f"{loop.now / 1e9:.6f} s (simulated): {err}")
            if len(finished) < len(hosts):
                late_hosts = sorted(set(hosts) - set(finished))
                raise RunError(f"phase {phase.name!r} timed out after {phase.timeout_s:.0f} s "
                               f"of simulated time; still running: {', '.join(late_hosts)}")
            # what is still on the links or in the queues arrives with nobody
            # listening, as in the Mininet engine once its agents exit
            # (the agents' and the phase's own wake-ups go: they would only
            # move the clock on)
            gone = set(map(id, hosts.values()))
            loop.discard(lambda fn: fn in phase_fns or id(getattr(fn, "__self__", None)) in gone)
            loop.run()
        finally:
            _close(agents, logs)
        end_ns = loop.now
        afters = {n: sw.stats() for n, sw in net.switches.items()}
        # the watermark and the observed registers, each switch's in one read
        from testbed.runner.switch_stats import read_registers

        names = ((reg,) if reg else ()) + plan.topology.observed_registers
        read = {n: read_registers(sw.controller(), names) for n, sw in net.switches.items()}
        qmaxes = {n: r[reg] for n, r in read.items()} if reg else {}
        stats: PhaseStats = {
            "late_commands": late_done, "poller_samples": samples[0], "poller_error": None,
            "wall_s": None, "engine": "sim", "sim_s": (end_ns - start_ns) / 1e9,
            "events": loop.events - events0,
            "cpu": {"processes": {}}}
        if plan.topology.observed_registers:
            stats["registers"] = {n: {k: r[k] for k in plan.topology.observed_registers}
                                  for n, r in read.items()}
        if fab:
            from testbed.runner.switch_stats import merge_switch_stats

            stats.update({"before": merge_switch_stats(befores),
                          "after": merge_switch_stats(afters), "qdepth_max": None,
                          "switches": {n: {"before": befores[n], "after": afters[n],
                                           "qdepth_max": qmaxes.get(n) if reg else None}
                                       for n in net.switches}})
        else:
            stats.update({"before": befores["s1"], "after": afters["s1"],
                          "qdepth_max": qmaxes.get("s1") if reg else None})
        (pdir / "switch_stats.json").write_text(json.dumps(stats, indent=1, sort_keys=True))
        self.line(f"phase {phase.name}: done at {end_ns / 1e9:.6f} s simulated "
                  f"({(end_ns - start_ns) / 1e9:.6f} s in the phase, "
                  f"{loop.events - events0} events)")
        polls = sum(h.polls for h in hosts.values())
        return PhaseResult(phase.name, start_ns, end_ns, polls, loop.events - events0)

    def _install_epic(self, phase: PhasePlan, jobs: dict[str, JobSpec],
                      gathered: dict[tuple[str, str], list[Any]], pdir: Path) -> None:
        """What the Mininet engine's controller does once the ranks reported
        their QPs: the phase's EPIC groups, installed by the same code from the
        same rank files (testbed.epic)."""
        from testbed.epic import (
            communicator_nodes,
            epic_group_spec,
            install_from_rendezvous,
            install_tree_from_rendezvous,
            tree_nodes,
        )
        from testbed.runner import RunError

        plan, net = self.plan, self.net
        assert phase.epic_group is not None
        group = epic_group_spec(phase.epic_group)
        infos = [v for (g, _t), v in gathered.items() if g == "epic"]
        if len(infos) != 1:
            raise RunError(f"phase {phase.name}: {len(infos)} EPIC communicators; "
                           "a phase has one")
        d = pdir / "rendezvous" / "epic"
        d.mkdir(parents=True, exist_ok=True)
        for info in infos[0]:
            (d / f"rank{info['rank']}.json").write_text(json.dumps(info))
        earlier = [q for q in plan.phases[:plan.phases.index(phase)] if q.epic_group is not None]
        fab = plan.topology.fabric
        try:
            if fab is None:
                lines = install_from_rendezvous(group, jobs, d, node_base=sum(
                    communicator_nodes(len(q.jobs)) for q in earlier))
                by_switch = {"s1": lines} if lines is not None else None
            else:
                prior: dict[str, int] = {}
                for q in earlier:
                    assert q.epic_group is not None
                    for n, k in tree_nodes(epic_group_spec(q.epic_group), fab,
                                           len(q.jobs)).items():
                        prior[n] = prior.get(n, 0) + k
                by_switch = install_tree_from_rendezvous(group, jobs, d, fab, node_base=prior)
        except ValueError as e:
            raise RunError(f"phase {phase.name}: EPIC: {e}") from e
        if by_switch is None:
            raise RunError(f"phase {phase.name}: EPIC: not every rank reported its QPs")
        for name, lines in by_switch.items():
            self.apply(net.switches[name], list(lines or []),
                       f"phase {phase.name} (EPIC {'tree, ' + name if fab else 'group'})")
        (d / "ready").write_text("ok\n")
        self.line(f"phase {phase.name}: EPIC group installed ({len(jobs)} ranks"
                  + (f", {', '.join(by_switch)})" if fab else ")"))

    # -- what the run measured of itself ------------------------------------------
    def record(self) -> SimRecord:
        return {"engine": "sim", "seed": self.seed, "host_links": self.host_links,
                "sim_s": self.loop.now / 1e9,
                "events": self.loop.events, "packet_hops": self.net.packet_hops(),
                "host_line_bps": self.host_bps, "interpreter": _interpreter(),
                "phases": [p.record() for p in self.phases]}


def _sim_job(spec: JobSpec) -> JobSpec:
    """A job as the simulated host runs it, without two allowances the Mininet
    engine makes for real time: its NIC serialises every frame at the line
    rate, so the pacer needs no HTB class on a host interface to hand frames
    to ahead of their time (transport.qdisc_ahead_packets 0); and its timers
    need no floor (Scale.floor_ms, what a Python host can resolve in real
    time), so every timer is the model's value times the slowdown. At the
    emulation's slowdowns no model timer is below the floor anyway."""
    t = spec.transport
    scale = {**t.scale, "floor_ms": 0.0}
    return dataclasses.replace(spec, transport=dataclasses.replace(
        t, qdisc_ahead_packets=0, scale=scale))


def _gather(offers: dict[str, list[Offer]], phase: str) -> dict[tuple[str, str], list[Any]]:
    from testbed.runner import RunError

    groups: dict[tuple[str, str], dict[int, Any]] = {}
    sizes: dict[tuple[str, str], int] = {}
    for lst in offers.values():
        for o in lst:
            key = (o.group, o.tag)
            g = groups.setdefault(key, {})
            if o.rank in g:
                raise RunError(f"phase {phase}: two agents are rank {o.rank} of {key[0]} {key[1]}")
            # the data model of the file rendezvous (JSON)
            g[o.rank] = json.loads(json.dumps(o.info))
            sizes[key] = o.size
    out = {}
    for key, g in groups.items():
        missing = sorted(set(range(sizes[key])) - set(g))
        if missing:
            raise RunError(f"phase {phase}: {key[0]} {key[1]}: no agent is rank(s) "
                           f"{', '.join(map(str, missing))} of {sizes[key]}")
        out[key] = [g[r] for r in range(sizes[key])]
    return out


def _close(agents: dict[str, Agent], logs: dict[str, EventLog]) -> None:
    for a in agents.values():
        try:
            a.close()
        except Exception:   # closing must not hide the run's own error
            pass
    for log in logs.values():
        log.close()


def _interpreter() -> str:
    import platform

    return f"{platform.python_implementation()} {platform.python_version()}"


class _Progress:
    """A progress line every few wall seconds on long phases: simulated time
    reached, packet-hops per wall second, and an estimate of what is left
    from the agents' own progress."""

    EVERY_S = 5.0

    def __init__(self, run: SimRun, phase: str, agents: dict[str, Agent]) -> None:
        assert run.wall is not None
        self.run, self.phase, self.agents = run, phase, agents
        self.t0 = run.wall()
        self.hops0 = run.net.packet_hops()
        self.next = self.t0 + self.EVERY_S

    def report(self) -> None:
        wall = self.run.wall
        assert wall is not None
        now = wall()
        if now < self.next:
            return
        self.next = now + self.EVERY_S
        spent = now - self.t0
        hops = self.run.net.packet_hops() - self.hops0
        done = total = 0
        for a in self.agents.values():
            for w in a.works:
                d, t = w.progress()
                done += d
                total += t
        eta = ""
        if total and done:
            eta = f", about {spent * (total - done) / done:.0f} s left"
        self.run.line(f"phase {self.phase}: simulated {self.run.loop.now / 1e9:.6f} s, "
                      f"{hops / spent if spent > 0 else 0:,.0f} packet-hops/s, "
                      f"work {done}/{total}{eta}")


def sim_fidelity(run: SimRun) -> Verdict:
    """What a simulated run checked of itself, in the shape of
    testbed.fidelity's verdict: every frame put on a link arrived (a frame a
    queue or the program dropped is counted there), the queues drained by the
    end, the clock never ran back (the loop refuses such an event)."""
    from testbed.fidelity import FAIL, PASS, _check, verdict_text

    net = run.net
    sent = net.packet_hops()
    arrived = (sum(s.hops for s in net.switches.values())
               + sum(n.counters["rx_frames"] for n in net.nics.values()))
    queued = net.queued()
    checks = {
        "frames_accounted": _check(PASS if sent == arrived else FAIL, sent - arrived, 0,
                                   sent=sent, arrived=arrived,
                                   why="frames put on a link that never arrived"
                                   if sent != arrived else ""),
        "queues_drained": _check(PASS if queued == 0 else FAIL, queued, 0,
                                 why="packets left in the switches' queues at the end"
                                 if queued else ""),
        "clock_monotonic": _check(PASS, 0, 0, events=run.loop.events),
    }
    failed = [k for k, c in checks.items() if c["status"] == FAIL]
    fid: Verdict = {"engine": "sim", "checks": checks, "failed": failed,
                           "not_measured": {}, "ok": not failed,
                           "verdict": "faithful" if not failed else "not faithful"}
    fid["text"] = verdict_text(fid)
    return fid
