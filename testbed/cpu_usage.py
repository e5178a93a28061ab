"""Who had the CPUs during a phase, and who waited for one.

When a run is not faithful on a small machine, the question is which
process did not get a CPU in time: the switch, a sending agent, a receiving
one. The kernel keeps, per task, the time it ran and the time it was ready
but waited on a run queue (``/proc/<pid>/schedstat``, nanoseconds), and for
the machine the time its CPUs spent busy, idle, in soft interrupts (the
kernel's forwarding work over the veth links) and stolen (a virtual
machine's CPUs held by its hypervisor for other guests: every process is
late then, though none waited on a run queue; ``/proc/stat``). A
:class:`CpuSampler` reads both while a phase runs and keeps each process's
first and last reading (a process that has exited keeps its last), so
:meth:`CpuSampler.result` gives, per process, the share of one CPU it ran
and the share of the time it waited for one, and the machine's busy,
soft-interrupt and stolen shares of all its CPUs.

A process's figures are the sums over its threads.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass
from typing import TypedDict

__all__ = ["CpuSampler", "read_schedstat", "read_machine", "read_cpus", "format_cpu", "STEAL_SHOWN",
           "CpuRecord"]

# Stolen shares from this on are named in a phase's CPU line and the verdict.
STEAL_SHOWN = 0.001

_PROC = "/proc"


class ProcessCpu(TypedDict):
    """A process's share of one CPU, and of the time it waited for one."""

    cpu_share: float
    wait_share: float
    seconds: float


class MachineCpu(TypedDict):
    """How busy the machine was: all its CPUs' busy, soft-interrupt and stolen shares."""

    busy_share: float
    softirq_share: float
    steal_share: float
    seconds: float


class CpuRecord(TypedDict, total=False):
    """A phase's CPU record (:meth:`CpuSampler.result`); the simulator's has
    only an empty ``processes``."""

    processes: dict[str, ProcessCpu]
    cpus: int
    machine: MachineCpu


@dataclass(frozen=True)
class _Reading:
    t_ns: int
    run_ns: int
    wait_ns: int


@dataclass(frozen=True)
class _Machine:
    t_ns: int
    total: int        # clock ticks, all CPUs
    idle: int         # idle + iowait
    softirq: int
    steal: int        # held by the hypervisor (counted in total, not in idle)


def read_schedstat(pid: int, proc: str = _PROC) -> tuple[int, int] | None:
    """(ns on a CPU, ns waiting on a run queue) of ``pid``, summed over its
    threads; None if it is gone or the kernel keeps no scheduler statistics."""
    try:
        tids = os.listdir(f"{proc}/{pid}/task")
    except OSError:
        return None
    run = wait = 0
    seen = False
    for tid in tids:
        try:
            with open(f"{proc}/{pid}/task/{tid}/schedstat") as f:
                fields = f.read().split()
            run += int(fields[0])
            wait += int(fields[1])
            seen = True
        except (OSError, ValueError, IndexError):
            continue        # a thread that just ended
    return (run, wait) if seen else None


def read_cpus(proc: str = _PROC) -> dict[str, tuple[int, int, int, int]]:
    """Per line of /proc/stat that counts CPU time ("cpu" for all CPUs,
    "cpu0", "cpu1", ... for each): (total, idle, softirq, steal) clock
    ticks since boot; empty if the file cannot be read."""
    out: dict[str, tuple[int, int, int, int]] = {}
    try:
        with open(f"{proc}/stat") as f:
            for line in f:
                if not line.startswith("cpu"):
                    break           # the CPU lines come first
                v = line.split()
                # user nice system idle iowait irq softirq steal [guest guest_nice]:
                # guest time is already counted in user and nice
                ticks = [int(x) for x in v[1:9]]
                if len(ticks) < 8:
                    continue
                out[v[0]] = (sum(ticks), ticks[3] + ticks[4], ticks[6], ticks[7])
    except (OSError, ValueError):
        return {}
    return out


def read_machine(proc: str = _PROC) -> tuple[int, int, int, int] | None:
    """(total, idle, softirq, steal) clock ticks of all CPUs since boot, from
    /proc/stat."""
    return read_cpus(proc).get("cpu")


class CpuSampler:
    """Readings of named processes and of the machine; :meth:`sample` as often
    as the caller likes (each reading is a few small file reads)."""

    def __init__(self, proc: str = _PROC) -> None:
        self._proc = proc
        self._pids: dict[str, int] = {}
        self._first: dict[str, _Reading] = {}
        self._last: dict[str, _Reading] = {}
        self._m_first: _Machine | None = None
        self._m_last: _Machine | None = None
        self.cpus = os.cpu_count() or 1

    def add(self, name: str, pid: int) -> None:
        if name in self._pids and self._pids[name] != pid:
            raise ValueError(f"cpu sampler: {name!r} is already process {self._pids[name]}")
        self._pids[name] = pid

    def sample(self) -> None:
        now = time.monotonic_ns()
        for name, pid in self._pids.items():
            r = read_schedstat(pid, self._proc)
            if r is None:
                continue        # gone: its last reading stands
            reading = _Reading(now, r[0], r[1])
            self._first.setdefault(name, reading)
            self._last[name] = reading
        m = read_machine(self._proc)
        if m is not None:
            mr = _Machine(now, *m)
            if self._m_first is None:
                self._m_first = mr
            self._m_last = mr

    def result(self) -> CpuRecord:
        """Per process: ``cpu_share`` (of one CPU; a process whose threads run at
        once can have more) and ``wait_share`` (of the
        time, ready but not running) over ``seconds`` between its first and
        last reading; ``machine``: ``busy_share`` (stolen time included),
        ``softirq_share`` and ``steal_share`` of all ``cpus``. Processes read
        fewer than twice are left out."""
        procs: dict[str, ProcessCpu] = {}
        for name, a in self._first.items():
            b = self._last[name]
            span = b.t_ns - a.t_ns
            if span <= 0:
                continue
            procs[name] = {"cpu_share": round((b.run_ns - a.run_ns) / span, 4),
                           "wait_share": round((b.wait_ns - a.wait_ns) / span, 4),
                           "seconds": round(span / 1e9, 3)}
        out: CpuRecord = {"processes": procs, "cpus": self.cpus}
        m0, m1 = self._m_first, self._m_last
        if m0 is not None and m1 is not None and m1.total > m0.total:
            total = m1.total - m0.total
            out["machine"] = {"busy_share": round(1 - (m1.idle - m0.idle) / total, 4),
                              "softirq_share": round((m1.softirq - m0.softirq) / total, 4),
                              "steal_share": round((m1.steal - m0.steal) / total, 4),
                              "seconds": round((m1.t_ns - m0.t_ns) / 1e9, 3)}
        return out


def format_cpu(result: CpuRecord) -> str:
    """One line: each process's CPU share and wait, then the machine's load."""
    parts = [f"{name} {p['cpu_share']:.0%}" + (f" (waited {p['wait_share']:.0%})"
                                                 if p["wait_share"] >= 0.005 else "")
             for name, p in result.get("processes", {}).items()]
    m = result.get("machine")
    if m is not None:
        stolen = m.get("steal_share", 0.0)
        parts.append(f"machine {m['busy_share']:.0%} busy of {result['cpus']} CPUs "
                     f"({m['softirq_share']:.0%} soft interrupts"
                     + (f", {stolen:.1%} stolen by the hypervisor"
                        if stolen >= STEAL_SHOWN else "")
                     + ")")
    return ", ".join(parts)
