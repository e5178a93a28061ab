#!/usr/bin/env python3
"""Who stopped the machine: a real-time watchdog to run beside an experiment.

One process per CPU, each pinned to its CPU at SCHED_FIFO 99 (above every
switch and agent of a run), sleeps ``--period-ms`` at a time and, whenever
it wakes later than ``--late-ms`` past its period, writes a JSON line: its
CLOCK_MONOTONIC time in ns (the clock of the switches' and agents'
timelines), its CPU, how late it woke, and the time each CPU had stolen by
the hypervisor in that gap (/proc/stat, in ms).

Nothing of a run at real-time priority can hold a CPU from these: a late
wake-up means the hypervisor held that CPU (its stolen time shows it) or
the kernel did, e.g. its fair server (Linux 6.12 on), which runs normal
tasks that real-time ones starved for about a second for 50 ms above
every real-time task: a FIFO 50 busy loop beside a normal one on one CPU
made its watcher wake about 50 ms late every second, nothing stolen. A
switch that lagged while the watcher of every CPU woke on time was held by
something of the run.

With ``--trace FILE`` it also writes, every period, where the CPUs went:
per CPU the ms stolen, spent in softirq and idle; per soft switch (named
by its first interface's node) and for the host agents together (every
other real-time process) the ms their real-time threads ran and the ms
they waited runnable (/proc/<pid>/task/*/schedstat), the same for their
other threads ("<name> (other threads)") and for the kernel's ksoftirqd
threads. A switch that lagged while it waited runnable was starved (by
what ran instead); one that neither ran nor waited had no frame to read
(the kernel had not delivered them).

Needs root (real-time priority). Stop it with Ctrl-C or SIGTERM.

    sudo .venv/bin/python scripts/stall_watchdog.py --out stalls.jsonl --trace sched.jsonl
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import signal
import sys
import time
from pathlib import Path
from typing import TextIO

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from testbed.cpu_usage import read_cpus  # noqa: E402

USER_HZ = os.sysconf("SC_CLK_TCK")
RESCAN_NS = 500_000_000          # how often the traced processes are looked up again
# switches.soft.node.DAEMON_MODULE; not imported, since that module loads
# Mininet, and this process runs at real-time priority beside a run
_SWITCH_MODULE = "switches.soft.daemon"


def cpu_ms() -> dict[str, tuple[float, float, float]]:
    """Per CPU since boot, in ms: (stolen, softirq, idle) (/proc/stat)."""
    k = 1000.0 / USER_HZ
    return {cpu: (steal * k, softirq * k, idle * k)
            for cpu, (_, idle, softirq, steal) in read_cpus().items() if cpu != "cpu"}


def _argv(pid: str) -> list[str]:
    try:
        raw = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return []
    return raw.decode(errors="replace").split("\0")


def _policy(path: str) -> int:
    """The scheduling policy of a task (field 41 of its ``stat`` file under
    ``path``, /proc/<pid> or /proc/<pid>/task/<tid>; 1 = SCHED_FIFO)."""
    try:
        stat = Path(f"{path}/stat").read_text()
    except OSError:
        return -1
    return int(stat.rsplit(")", 1)[1].split()[38])


def _switch_name(argv: list[str]) -> str | None:
    """A soft switch daemon's node (``leaf1`` from ``-i leaf1-eth1``)."""
    if _SWITCH_MODULE not in argv[:4]:
        return None
    for flag, value in zip(argv, argv[1:], strict=False):
        if flag in ("-i", "--interface"):
            return value.split("=")[-1].split("@")[-1].rsplit("-eth", 1)[0]
    return "switch"


def traced_tasks(me: int) -> dict[str, list[str]]:
    """Group -> the schedstat files of its threads: each soft switch, the
    host agents (every other SCHED_FIFO process but this one) and ksoftirqd.
    A switch's or the agents' threads that are not real-time (control,
    statistics) form a group of their own, "<name> (other threads)": the
    kernel may run those above every real-time task for a while (the fair
    server), so they are told apart."""
    groups: dict[str, list[str]] = {}
    for entry in os.scandir("/proc"):
        pid = entry.name
        if not pid.isdigit() or int(pid) == me:
            continue
        argv = _argv(pid)
        name = _switch_name(argv)
        if name is None:
            if not argv or argv == [""]:
                try:
                    comm = Path(f"/proc/{pid}/comm").read_text().strip()
                except OSError:
                    continue
                if comm.startswith("ksoftirqd/"):
                    name = "ksoftirqd"
            elif _policy(f"/proc/{pid}") == 1:
                name = "agents"
        if name is None:
            continue
        try:
            tids = os.listdir(f"/proc/{pid}/task")
        except OSError:
            continue
        for t in tids:
            task = f"/proc/{pid}/task/{t}"
            group = (name if name == "ksoftirqd" or _policy(task) == 1
                     else f"{name} (other threads)")
            groups.setdefault(group, []).append(f"{task}/schedstat")
    return groups


def thread_ms(groups: dict[str, list[str]]) -> dict[str, tuple[float, float]]:
    """schedstat file -> (ms run, ms waited runnable) since its thread started."""
    out: dict[str, tuple[float, float]] = {}
    for files in groups.values():
        for path in files:
            try:
                with open(path) as f:
                    r, w, _ = f.read().split()
            except (OSError, ValueError):
                continue      # the thread ended
            out[path] = (int(r) / 1e6, int(w) / 1e6)
    return out


def group_delta(groups: dict[str, list[str]], cur: dict[str, tuple[float, float]],
                prev: dict[str, tuple[float, float]]) -> dict[str, list[float]]:
    """Group -> [ms run, ms waited] since ``prev``, over its threads that were
    there both times."""
    out: dict[str, list[float]] = {}
    for name, files in groups.items():
        run = wait = 0.0
        for path in files:
            if path in cur and path in prev:
                run += cur[path][0] - prev[path][0]
                wait += cur[path][1] - prev[path][1]
        out[name] = [round(run, 1), round(wait, 1)]
    return out


def cpu_delta(cur: dict[str, tuple[float, float, float]],
              prev: dict[str, tuple[float, float, float]]) -> dict[str, list[float]]:
    return {c: [round(a - b, 1) for a, b in zip(v, prev[c], strict=True)]
            for c, v in cur.items() if c in prev}


def watch_cpu(cpu: int, out_path: str, period_ms: float, late_ms: float) -> None:
    """Sleep on ``cpu`` alone, ``period_ms`` at a time, and log every late wake-up."""
    os.sched_setaffinity(0, {cpu})
    with open(out_path, "a") as out:
        prev_t, prev_cpu = time.monotonic_ns(), cpu_ms()
        while True:
            time.sleep(period_ms / 1000)
            t, cur_cpu = time.monotonic_ns(), cpu_ms()
            late = (t - prev_t) / 1e6 - period_ms
            if late > late_ms:
                out.write(json.dumps({
                    "t_ns": t, "cpu": cpu, "late_ms": round(late, 1),
                    "stolen_ms": {c: v[0] for c, v in cpu_delta(cur_cpu, prev_cpu).items()},
                }) + "\n")
                out.flush()
            prev_t, prev_cpu = t, cur_cpu


def write_trace(trace: TextIO, period_ms: float) -> None:
    """Every ``period_ms``: the CPUs' and the traced processes' ms (module doc)."""
    me = os.getpid()
    groups = traced_tasks(me)
    scanned = time.monotonic_ns()
    prev_cpu, prev_tasks = cpu_ms(), thread_ms(groups)
    while True:
        time.sleep(period_ms / 1000)
        t, cur_cpu, tasks = time.monotonic_ns(), cpu_ms(), thread_ms(groups)
        trace.write(json.dumps({"t_ns": t, "cpu": cpu_delta(cur_cpu, prev_cpu),
                                "ran_waited_ms": group_delta(groups, tasks, prev_tasks)})
                    + "\n")
        if t - scanned >= RESCAN_NS:
            groups, scanned = traced_tasks(me), t
            tasks = thread_ms(groups)
        prev_cpu, prev_tasks = cur_cpu, tasks


def _fork_watcher(cpu: int, args: argparse.Namespace) -> int:
    pid = os.fork()
    if pid == 0:
        code = 0
        try:
            watch_cpu(cpu, args.out, args.period_ms, args.late_ms)
        except KeyboardInterrupt:
            pass
        except BaseException:
            code = 1
        os._exit(code)
    return pid


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--out", required=True, help="JSON lines file of late wake-ups (appended)")
    ap.add_argument("--trace", help="JSON lines file of where the CPUs went, every period "
                                    "(appended)")
    ap.add_argument("--period-ms", type=float, default=5.0)
    ap.add_argument("--late-ms", type=float, default=10.0)
    args = ap.parse_args(argv)
    if args.period_ms <= 0 or args.late_ms <= 0:
        ap.error("--period-ms and --late-ms must be positive")
    try:
        os.sched_setscheduler(0, os.SCHED_FIFO, os.sched_param(99))
    except PermissionError:
        print("stall_watchdog: real-time priority needs root", file=sys.stderr)
        return 2
    signal.signal(signal.SIGTERM, signal.default_int_handler)
    open(args.out, "a").close()       # a bad path fails here, not in a child
    children: list[int] = []
    try:
        for cpu in sorted(os.sched_getaffinity(0)):
            # one by one: a fork that fails leaves the ones made to be stopped
            children.append(_fork_watcher(cpu, args))
        if args.trace:
            with open(args.trace, "a") as trace:
                write_trace(trace, args.period_ms)
        else:
            while True:
                signal.pause()
    except KeyboardInterrupt:
        return 0
    finally:
        # a second Ctrl-C or SIGTERM (timeout(1) signals the process and its
        # group) must not cut the stopping of the watchers short
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        for pid in children:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGTERM)
        for pid in children:
            with contextlib.suppress(ChildProcessError):
                os.waitpid(pid, 0)
    return 0


if __name__ == "__main__":
    sys.exit(main())
