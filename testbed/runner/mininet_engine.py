"""The real-time engine: the network brought up in Mininet, its switches
prioritised and configured, the hosts shaped and steered, the base RTT
measured, the phases run, and everything torn down, also when a step fails."""

from __future__ import annotations

import os
import signal
from pathlib import Path
from typing import TYPE_CHECKING

from switches.targets import TargetUnavailable
from testbed.agent_launcher import AgentLauncher
from testbed.experiment import RunPlan, repo_path
from testbed.fidelity import Verdict, evaluate_fidelity
from testbed.runner.agents import _Agent, _agent_env, _stop_agents
from testbed.runner.environment import REPO_ROOT, check_environment, switch_target
from testbed.runner.errors import RunError
from testbed.runner.options import RunOptions
from testbed.runner.phase import _run_phase
from testbed.runner.phase_retries import run_phase_until_faithful
from testbed.runner.priorities import _prioritise_switch, rt_priorities
from testbed.runner.progress import Progress
from testbed.runner.records import AppliedCommand, BaseRtt, Measured
from testbed.runner.switch_commands import _apply_commands
from testbed.runner.teardown import _force_teardown, _teardown_watchdog, _TeardownTimeout

if TYPE_CHECKING:
    from mininet.node import Host

# Set to 0: start every agent as a new interpreter, not forked by its host's
# launcher (hosts/agent_launcher.py), e.g. to compare the two.
LAUNCHER_ENV = "P4TB_AGENT_LAUNCHER"
# A host's line-rate qdisc may send this many full-size frames back to back
# after a late timer (testbed.net.shape_host): enough to keep the long-run rate
# through timer lateness of about a packet time, little enough that the switch
# sees no more than two frames bunched.
HOST_QDISC_BURST_FRAMES = 2


class MininetEngine:
    """Real time: namespaces, veths, switch daemons and agent processes."""

    name = "mininet"

    def check(self, plan: RunPlan, opts: RunOptions) -> None:
        check_environment(opts.target, opts.hosts)

    def execute(self, plan: RunPlan, run_dir: Path, opts: RunOptions, prog: Progress,
                applied: list[AppliedCommand], measured: Measured) -> None:
        _bring_up_and_run(plan, run_dir, opts, prog, applied, measured)

    def fidelity(self, run_dir: Path, plan: RunPlan, opts: RunOptions,
                 measured: Measured) -> Verdict:
        return evaluate_fidelity(run_dir, plan, switch_target(opts.target), opts.hosts)


def _bring_up_and_run(plan: RunPlan, run_dir: Path, opts: RunOptions, prog: Progress,
                      applied: list[AppliedCommand] | None = None,
                      measured: Measured | None = None) -> None:
    """Bring the network up, configure the switch, run the phases, tear down.
    ``applied`` collects every switch command and how it was applied."""
    from testbed.net import leaf_spine, running, star_router

    applied = [] if applied is None else applied
    topo = plan.topology
    fab = topo.fabric
    where = (f"a leaf-spine of {fab.leaves} leaves and {fab.spines} spines "
             f"({'ECMP' if fab.ecmp else 'static routes'}), {opts.target} switches"
             if fab else f"{opts.target} switch s1")
    prog.line(f"network: {topo.n_hosts} hosts around {where} running "
              f"{topo.program_label()}" + (" (pcap on)" if opts.pcap else ""))
    delay_us = 0.0
    if topo.network is not None:
        delay_us = topo.network.convert(plan.path_mtu()).link_delay_us
    target = opts.switch_target()
    backend = topo.backend if target.backends else "python"
    try:
        if fab is not None:
            net, switches, hosts, _addrs = leaf_spine(
                fab, repo_path(topo.program), log_dir=run_dir / "switch", pcap=opts.pcap,
                target=target, backend=backend, priority_queues=topo.priority_queues,
                host_provider=opts.hosts, defines=topo.defines_dict())
        else:
            net, sw, hosts, _addrs = star_router(
                topo.n_hosts, repo_path(topo.program), log_dir=run_dir / "switch",
                pcap=opts.pcap, priority_queues=topo.priority_queues, target=target,
                link_delay_us=delay_us, backend=backend, host_provider=opts.hosts,
                defines=topo.defines_dict())
            switches = {sw.name: sw}
    except TargetUnavailable as e:
        raise RunError(str(e)) from e
    agents: list[_Agent] = []
    launchers: dict[str, AgentLauncher] = {}
    failure: BaseException | None = None
    try:
        with _teardown_watchdog():
            with running(net):
                try:
                    prog.line("network up (switch control port" + (
                        "s " if fab else " ") + ", ".join(
                        f"{n} {one.control_port}" if fab else str(one.control_port)
                        for n, one in switches.items()) + ")")
                    if opts.hosts == "udp" and os.environ.get(LAUNCHER_ENV, "1") != "0":
                        # they import the agent while the switches are configured
                        (run_dir / "agents").mkdir(exist_ok=True)
                        for h in hosts:
                            launchers[h.name] = AgentLauncher(
                                h, run_dir / "agents" / f"{h.name}-launcher.log",
                                _agent_env(), REPO_ROOT, run=str(run_dir))
                    rt = rt_priorities(topo)
                    if topo.realtime:
                        prog.line(f"real-time priority (SCHED_FIFO): switch {rt.switch}, "
                                  f"sending agents {rt.sender}, receiving agents "
                                  f"{rt.receiver}")
                    elif topo.realtime_switches:
                        prog.line(f"real-time priority (SCHED_FIFO): switches {rt.switch}, "
                                  "agents normal")
                    for n, one in switches.items():
                        _prioritise_switch(one, target,
                                           topo.realtime or topo.realtime_switches, rt.switch)
                        _apply_commands(one.controller(),
                                        plan.network_commands() + topo.switch_commands.get(n, ()),
                                        target, topo.packet_bytes,
                                        f"topology ({n})" if fab else "topology", applied)
                    if topo.host_line_qdisc and topo.network is not None:
                        conv = topo.network.convert(plan.path_mtu())
                        from testbed.net import shape_host

                        burst = max(HOST_QDISC_BURST_FRAMES * conv.frame_bytes, 1514)
                        for h in hosts:
                            shape_host(h, conv.link_bps, burst)
                        prog.line(f"hosts: an HTB qdisc at {conv.link_bps / 1e6:g} Mb/s on "
                                  f"each host's interface (burst {burst} B)")
                    if (topo.host_line_qdisc and topo.network is not None) or opts.hosts == "rxe":
                        # The hosts' HTB qdisc (the runner's, or an rxe host's DCQCN
                        # shim's) and rxe's own tasks send from any CPU: keep each
                        # link's frames in order.
                        from testbed.net import keep_links_in_order

                        steered = keep_links_in_order(net)
                        prog.line(f"receive steering (RPS): each of {len(steered)} interfaces "
                                  f"to one CPU, so links keep their order")
                    if measured is not None and len(hosts) > 1:
                        measured["base_rtt"] = measure_base_rtt(hosts[0], hosts[-1])
                        prog.line(f"base RTT {hosts[0].name}-{hosts[-1].name}: "
                                  f"{measured['base_rtt']['min_ms']} ms (ping, minimum)")
                    retried = measured.setdefault("phase_retries", []) \
                        if measured is not None else []
                    for phase in plan.phases:
                        retried += run_phase_until_faithful(
                            phase, plan, run_dir, prog, opts,
                            lambda ph: _run_phase(ph, plan, run_dir, net, switches, prog, opts,
                                                  agents, applied, launchers))
                except BaseException as e:
                    failure = e
                    raise
                finally:
                    _stop_agents(agents)
                    for launcher in launchers.values():
                        launcher.close()
                    signal.setitimer(signal.ITIMER_REAL, opts.teardown_timeout_s)
    except _TeardownTimeout:
        # Mininet waits forever on a node shell that died under it (e.g. another
        # Mininet cleanup on this machine): remove what is left by hand.
        left = _force_teardown(net)
        msg = (f"network teardown hung for {opts.teardown_timeout_s:.0f} s (a Mininet node shell had "
               f"died: was another Mininet cleanup run on this machine?); removed by hand: "
               f"{', '.join(left) or 'nothing'}")
        if failure is not None and not isinstance(failure, _TeardownTimeout):
            raise RunError(f"{failure}\n{msg}") from failure
        raise RunError(msg) from None
    finally:
        _stop_agents(agents)  # normally done already; not if bring-up itself failed
        prog.line("network down")


def measure_base_rtt(a: Host, b: Host, count: int = 5) -> BaseRtt:
    """The smallest ping RTT from host ``a`` to host ``b`` (ms; None if no
    reply): propagation plus what the switch and the hosts add."""
    import re

    # rxe hosts share the initial namespace: the ping leaves by a's own link
    # (its policy route) only when bound to it; else it is answered locally.
    dev = f" -I {a.defaultIntf()}" if getattr(a, "rxe_device", None) else ""
    out = a.cmd(f"ping -n -q -c {count} -i 0.05 -W 5{dev} {b.IP()}")
    m = re.search(r"= ([\d.]+)/([\d.]+)/([\d.]+)/", out)
    return {"between": f"{a.name}-{b.name}", "pings": count,
            "min_ms": float(m.group(1)) if m else None,
            "avg_ms": float(m.group(2)) if m else None}
