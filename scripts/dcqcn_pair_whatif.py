#!/usr/bin/env python3
"""What-if: two DCQCN senders through one RED-marking queue, without an emulator.

A packet-level model of roce-basics' ``pair`` phase: two paced senders (the
project's ``Dcqcn`` reaction point, scaled as the experiment scales it) share
one FIFO at the link rate; RED marks on the enqueue depth (linear from Kmin to
Pmax at Kmax, always above Kmax); the receiver's notification point sends at
most one CNP per flow per the preset's interval, arriving ``--cnp-delay-ms``
later. Prints, per seed, Jain's index of the two flows' delivered rates over
the second half of the time both were active (as roce-basics computes it), the
CNPs and the rates, then the mean. The model has no host or switch jitter: it
shows what the algorithm and its parameters do, not what the emulation did.

    .venv/bin/python scripts/dcqcn_pair_whatif.py --preset connectx [--nic-gbps 40]
        [--link-mbps 4] [--msgs 30] [--seeds 10] [--set rpg_ai_rate=10 ...]
"""

from __future__ import annotations

import argparse
import heapq
import random
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from hosts.roce.dcqcn import PRESETS, Dcqcn, DcqcnParams  # noqa: E402

FRAME_BYTES = 1082          # average frame of 64 KiB WRITEs at MTU 1024
PKTS_PER_MSG = 64


def run_pair(params: DcqcnParams, *, msgs: int, seed: int, kmin: int, kmax: int, pmax: float,
             cnp_delay_s: float) -> tuple[float, int, list[float], int]:
    """(Jain's index, CNPs, second-half rates in Mb/s, the deepest queue in
    packets met by an arriving packet) of one seeded run (the queue is unbounded)."""
    rng = random.Random(seed)
    link = params.line_rate_bps
    ccs = [Dcqcn(params, 0), Dcqcn(params, 0)]
    total = msgs * PKTS_PER_MSG
    sent = [0, 0]
    delivered: list[list[float]] = [[], []]
    last_cnp: list[float | None] = [None, None]
    cnps = 0
    queued = 0
    max_queued = 0
    busy_until = 0.0
    events: list[tuple[float, int, int, int]] = [(0.0, 0, 0, 0), (0.0, 0, 1, 0)]
    while events:
        t, kind, flow, marked = heapq.heappop(events)
        now_ns = int(t * 1e9)
        if kind == 0:                                   # a sender's next packet
            if sent[flow] >= total:
                continue
            cc = ccs[flow]
            cc.on_timer(now_ns)
            mark = queued >= kmax or (queued > kmin and
                                      rng.random() < pmax * (queued - kmin) / (kmax - kmin))
            max_queued = max(max_queued, queued)
            queued += 1
            busy_until = max(busy_until, t) + FRAME_BYTES * 8 / link
            heapq.heappush(events, (busy_until, 1, flow, int(mark)))
            cc.on_bytes_sent(FRAME_BYTES, now_ns)
            sent[flow] += 1
            heapq.heappush(events, (t + FRAME_BYTES * 8 / cc.rate_bps, 0, flow, 0))
        elif kind == 1:                                 # it leaves the queue
            queued -= 1
            delivered[flow].append(t)
            last = last_cnp[flow]
            if marked and (last is None or t - last >= params.cnp_interval_s):
                last_cnp[flow] = t
                heapq.heappush(events, (t + cnp_delay_s, 2, flow, 0))
        else:                                           # a CNP reaches the sender
            ccs[flow].on_cnp(now_ns)
            cnps += 1
    end = min(d[-1] for d in delivered)
    mid = end / 2
    counts = [sum(1 for x in d if mid <= x <= end) for d in delivered]
    jain = sum(counts) ** 2 / (2 * sum(c * c for c in counts))
    rates = [c * FRAME_BYTES * 8 / (end - mid) / 1e6 for c in counts]
    return jain, cnps, rates, max_queued


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--preset", choices=sorted(PRESETS), default="connectx")
    ap.add_argument("--nic-gbps", type=float, default=40.0, help="emulated NIC rate")
    ap.add_argument("--link-mbps", type=float, default=4.0, help="testbed link rate")
    ap.add_argument("--msgs", type=int, default=30, help="64 KiB messages per flow")
    ap.add_argument("--seeds", type=int, default=10)
    ap.add_argument("--kmin", type=int, default=4)
    ap.add_argument("--kmax", type=int, default=16)
    ap.add_argument("--pmax", type=float, default=0.2)
    ap.add_argument("--cnp-delay-ms", type=float, default=0.5)
    ap.add_argument("--set", action="append", default=[], metavar="NAME=VALUE",
                    help="override a preset parameter (the preset's own names)")
    a = ap.parse_args()
    overrides = {}
    for item in a.set:
        name, sep, value = item.partition("=")
        if not sep:
            ap.error(f"--set {item!r}: expected NAME=VALUE")
        overrides[name] = float(value)
    slowdown = a.nic_gbps * 1e9 / (a.link_mbps * 1e6)
    try:
        params = DcqcnParams.scaled(a.link_mbps * 1e6, slowdown, a.preset, **overrides)
    except ValueError as e:
        ap.error(str(e))
    print(f"preset {a.preset} {overrides or ''} nic {a.nic_gbps:g} Gb/s, link "
          f"{a.link_mbps:g} Mb/s (slowdown {slowdown:g}), {a.msgs} x 64 KiB per flow")
    js, queues = [], []
    for seed in range(1, a.seeds + 1):
        jain, cnps, rates, max_q = run_pair(params, msgs=a.msgs, seed=seed, kmin=a.kmin, kmax=a.kmax,
                                     pmax=a.pmax, cnp_delay_s=a.cnp_delay_ms / 1e3)
        js.append(jain)
        queues.append(max_q)
        print(f"seed {seed:2d}: jain {jain:.4f}  cnps {cnps:4d}  rates "
              f"{rates[0]:.2f} / {rates[1]:.2f} Mb/s  max queue {max_q} pkts")
    mean = sum(js) / len(js)
    print(f"jain mean {mean:.4f}  min {min(js):.4f}  max {max(js):.4f}  "
          f">= 0.95 in {sum(j >= 0.95 for j in js)}/{len(js)}")
    print(f"max queue (packets at enqueue) mean {sum(queues) / len(queues):.1f}  "
          f"min {min(queues)}  max {max(queues)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
