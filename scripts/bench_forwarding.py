#!/usr/bin/env python3
"""Forwarding throughput of the soft switch: h1 - s1 - h2, one TCP flow.

A thin wrapper around ``testbed.bench`` (also ``testbed bench forwarding``):
runs the benchmark per backend and prints the median Mb/s (TCP goodput),
packets/s through the switch and switch CPU seconds per million packets.
Needs root. A benchmark, not a test: figures vary with the machine and its load.

    sudo .venv/bin/python scripts/bench_forwarding.py --seconds 5 [--runs 3]
        [--backend python --backend pypy] [--json]
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from switches.soft.backends import BACKENDS  # noqa: E402
from testbed.bench import (  # noqa: E402
    DEFAULT_PROGRAM,
    format_run,
    format_summary,
    forwarding,
)


def main() -> None:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--seconds", type=float, default=5.0)
    ap.add_argument("--runs", type=int, default=3, help="runs per backend (median reported)")
    ap.add_argument("--backend", action="append", choices=BACKENDS,
                    help="data-path backend (repeat for several; default python)")
    ap.add_argument("--program", type=Path, default=DEFAULT_PROGRAM)
    ap.add_argument("--tool", choices=["iperf3", "python"], default=None)
    ap.add_argument("--json", action="store_true", help="print the summary as JSON")
    args = ap.parse_args()
    summary, _runs = forwarding(args.backend or ["python"], args.seconds, args.runs,
                                args.program, args.tool,
                                on_run=lambda r: print(format_run(r), file=sys.stderr))
    if args.json:
        print(json.dumps(summary, indent=2))
    else:
        print(format_summary(summary))


if __name__ == "__main__":
    main()
