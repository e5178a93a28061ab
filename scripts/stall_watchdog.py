#!/usr/bin/env python3
"""Who stopped the machine: a real-time watchdog to run beside an experiment.

Runs at SCHED_FIFO 99 (above every switch and agent of a run), sleeps
``--period-ms`` at a time and, whenever it wakes later than ``--late-ms``
past its period, writes a JSON line: its CLOCK_MONOTONIC time in ns (the
clock of the switches' and agents' timelines), how late it woke, and the
time each CPU had stolen by the hypervisor in that gap (/proc/stat, in ms).

A wake-up late by tens of ms with as much stolen time on every CPU is the
hypervisor holding the guest; one late with little stolen time is the
kernel itself (real-time throttling also stops this process); a switch
that lagged while this woke on time was held by something of the run.
Needs root (real-time priority). Stop it with Ctrl-C.

    sudo .venv/bin/python scripts/stall_watchdog.py --out stalls.jsonl
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time

USER_HZ = os.sysconf("SC_CLK_TCK")


def steal_ms() -> dict[str, float]:
    """Stolen time per CPU since boot, in ms (/proc/stat's 8th field)."""
    out: dict[str, float] = {}
    with open("/proc/stat") as f:
        for line in f:
            if line.startswith("cpu") and line[3] != " ":
                fields = line.split()
                out[fields[0]] = int(fields[8]) * 1000.0 / USER_HZ
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True, help="JSON lines file (appended)")
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
    with open(args.out, "a") as out:
        prev_t, prev = time.monotonic_ns(), steal_ms()
        try:
            while True:
                time.sleep(args.period_ms / 1000)
                t, cur = time.monotonic_ns(), steal_ms()
                late = (t - prev_t) / 1e6 - args.period_ms
                if late > args.late_ms:
                    out.write(json.dumps({
                        "t_ns": t, "late_ms": round(late, 1),
                        "stolen_ms": {c: round(cur[c] - prev.get(c, cur[c]), 1) for c in cur},
                    }) + "\n")
                    out.flush()
                prev_t, prev = t, cur
        except KeyboardInterrupt:
            return 0


if __name__ == "__main__":
    sys.exit(main())
