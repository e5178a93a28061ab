#!/usr/bin/env python3
"""Why did a switch lag? Set a run's switch lags beside stall_watchdog's record.

For every rise of a soft switch's worst processing lag (``lag_us.max`` of
``phases*/<phase>/switch-<name>.jsonl``) to ``--min-ms`` or more: the frame
was taken after the previous statistics sample, having waited that lag, so
the window runs from the lag before the previous sample to the sample that
reported it. For that window it prints:

- the late wake-ups of ``scripts/stall_watchdog.py``'s per-CPU watchers
  (``--stalls``): a CPU that even a SCHED_FIFO 99 process pinned to it
  could not have was held by the hypervisor (its stolen time shows it) or
  the kernel (e.g. its fair server, which runs normal tasks starved for
  about a second for 50 ms above every real-time task);
- with ``--trace``: the ms each soft switch, the agents and ksoftirqd ran
  and waited runnable, and each CPU's stolen, softirq and idle ms. A switch
  that waited runnable while the agents ran was starved by them; the ms
  run in a window add up to at most the window times the CPUs, so a
  process "running" far more than its share of the frames it forwarded
  was charged time its CPU did not give it.

    .venv/bin/python scripts/explain_lags.py results/symphony-sweep-X \\
        --stalls stalls.jsonl --trace sched.jsonl
"""

from __future__ import annotations

import argparse
import bisect
import json
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any


def _lines(path: Path) -> Iterator[dict[str, Any]]:
    with open(path) as f:
        for n, line in enumerate(f, 1):
            if not line.strip():
                continue
            try:
                yield json.loads(line)
            except json.JSONDecodeError as e:
                raise SystemExit(f"{path}:{n}: not JSON ({e.msg})") from None


def lag_rises(run: Path, min_us: float) -> Iterator[tuple[str, str, int, int, float]]:
    """(phase directory, switch, window start ns, window end ns, lag us)."""
    dirs = sorted(run.glob("phases/*/")) + sorted(run.glob("phases-unfaithful/*/"))
    for d in dirs:
        for f in sorted(d.glob("switch-*.jsonl")):
            prev_t, prev_max = None, 0.0
            for s in _lines(f):
                lag_max = float(s.get("lag_us", {}).get("max", 0))
                if prev_t is not None and lag_max > prev_max and lag_max >= min_us:
                    yield (f"{d.parent.name}/{d.name}", f.stem.removeprefix("switch-"),
                           prev_t - int(lag_max * 1000), s["t_ns"], lag_max)
                prev_t, prev_max = s["t_ns"], lag_max


def _within(rows: list[dict[str, Any]], times: list[int], t0: int, t1: int
            ) -> list[dict[str, Any]]:
    return rows[bisect.bisect_left(times, t0):bisect.bisect_right(times, t1)]


def _sums(rows: list[dict[str, Any]], key: str) -> dict[str, list[float]]:
    out: dict[str, list[float]] = {}
    for r in rows:
        for name, values in r.get(key, {}).items():
            acc = out.setdefault(name, [0.0] * len(values))
            for i, v in enumerate(values):
                acc[i] += v
    return {k: [round(v) for v in vs] for k, vs in sorted(out.items())}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("run", type=Path, help="the run directory (its phases/)")
    ap.add_argument("--stalls", type=Path, help="stall_watchdog.py's --out file")
    ap.add_argument("--trace", type=Path, help="stall_watchdog.py's --trace file")
    ap.add_argument("--min-ms", type=float, default=30.0, help="lags to explain (default 30)")
    args = ap.parse_args(argv)
    if not (args.run / "phases").is_dir():
        ap.error(f"{args.run}: no phases/ directory (not a run directory)")
    for p in (args.stalls, args.trace):
        if p is not None and not p.is_file():
            ap.error(f"{p}: no such file")
    stalls = sorted(_lines(args.stalls), key=lambda r: r["t_ns"]) if args.stalls else []
    stall_t = [r["t_ns"] for r in stalls]
    trace = list(_lines(args.trace)) if args.trace else []
    trace_t = [r["t_ns"] for r in trace]
    found = 0
    for phase, switch, t0, t1, lag_us in lag_rises(args.run, args.min_ms * 1000):
        found += 1
        print(f"{phase} {switch}: lag {lag_us / 1000:.1f} ms, window {(t1 - t0) / 1e6:.0f} ms "
              f"ending at {t1 / 1e9:.3f} s")
        if args.stalls:
            # a late wake-up's stall ended at its t_ns and began late_ms earlier
            late = [r for r in _within(stalls, stall_t, t0, t1 + int(100e6))
                    if r["t_ns"] - r["late_ms"] * 1e6 <= t1]
            print("  watchers late: " + (", ".join(
                f"cpu{r.get('cpu', '?')} {r['late_ms']} ms at {r['t_ns'] / 1e9:.3f} s "
                f"(stolen {sum(r['stolen_ms'].values()):.0f} ms)" for r in late) or "none"))
        if args.trace:
            rows = _within(trace, trace_t, t0, t1)
            ran = _sums(rows, "ran_waited_ms")
            cpus = _sums(rows, "cpu")
            print(f"  ran, waited ms: {ran}")
            print(f"  per CPU stolen, softirq, idle ms: {cpus}")
            first = bisect.bisect_left(trace_t, t0)
            if rows and first > 0:
                # each row covers the time since the one before it
                have = (rows[-1]["t_ns"] - trace_t[first - 1]) / 1e6 * len(rows[0]["cpu"])
                used = sum(v[0] for v in ran.values()) + sum(sum(v) for v in cpus.values())
                print(f"  the CPUs had {have:.0f} ms: the traced processes ran, time was "
                      f"stolen, in softirq or idle for {used:.0f}, the rest (other "
                      f"processes, the kernel) {have - used:.0f}")
    if not found:
        print(f"no switch lag of {args.min_ms} ms or more in {args.run}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
