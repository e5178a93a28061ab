"""CPU priorities of a run's processes: the soft switch stands for hardware
(nice -10, SCHED_FIFO with Topology.realtime_switches); with
Topology.realtime the agents run SCHED_FIFO too, senders above receivers."""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import TYPE_CHECKING

from switches.targets import Target
from testbed.experiment import Topology

if TYPE_CHECKING:
    from switches.node import P4SwitchNode

SWITCH_NICE = -10
# SCHED_FIFO priorities with Topology.realtime, all above every normal
# process: receiving agents lowest, sending agents above them (a sender
# waiting behind a receiver's batch of packets was late again: 2-7.5% of its
# packets against 0.7-3.1%), the soft switch above both, since real-time
# agents would otherwise starve it (measured: switch lag up to 119 ms in
# reflex-cases --quick).
RECEIVER_RT_PRIORITY = 1
SENDER_RT_PRIORITY = 2
SWITCH_RT_PRIORITY = 3


@dataclass(frozen=True)
class RtPriorities:
    """SCHED_FIFO priorities of a run's processes."""

    switch: int
    sender: int
    receiver: int


SWITCH_FIRST = RtPriorities(SWITCH_RT_PRIORITY, SENDER_RT_PRIORITY, RECEIVER_RT_PRIORITY)
# Topology.realtime_agents_first: senders, then receivers, then the switches.
AGENTS_FIRST = RtPriorities(switch=1, sender=3, receiver=2)


def rt_priorities(topo: Topology) -> RtPriorities:
    return AGENTS_FIRST if topo.realtime_agents_first else SWITCH_FIRST


def _prioritise_switch(sw: P4SwitchNode, target: Target, realtime: bool = False,
                       priority: int = SWITCH_RT_PRIORITY) -> None:
    """Run the switch daemon of a ``prioritised`` target (the soft one) at
    nice SWITCH_NICE: it stands for hardware, so the host agents and whatever
    else runs on the machine must not starve it (its processing lag is part of
    every run's fidelity verdict). With ``realtime``
    (Topology.realtime_switches) it runs at SCHED_FIFO ``priority``."""
    proc = getattr(sw, "proc", None)
    if not target.prioritised or proc is None:
        return
    try:
        os.setpriority(os.PRIO_PROCESS, proc.pid, SWITCH_NICE)
        if realtime:
            os.sched_setscheduler(proc.pid, os.SCHED_FIFO, os.sched_param(priority))
    except OSError:     # not root: the run goes on at normal priority
        pass
