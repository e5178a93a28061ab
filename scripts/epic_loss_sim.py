#!/usr/bin/env python3
"""What-if: EPIC Mode-II AllReduce under random loss, on the simulated wire.

N unmodified RC ranks (hosts/commlib/epic.py) and epic.p4 running in-process
(testbed.epic.SimSwitch) on hosts.roce.sim.SimWire, which drops each
datagram with probability ``loss`` on every hop (rank -> switch and switch ->
rank), 10 us per hop. Each rank's NIC is paced at the scale's line rate
(100 Gb/s / slowdown; the transport's timers x slowdown); the wire itself
has no bandwidth limit, so throughput falls only through loss recovery
(go-back-N from the hosts: a lost upload stalls its slot for every rank).
Prints, per loss rate, the algorithm throughput relative to the loss-free
run, next to the paper's Mode-II model X / B = r^(2(H-1)(D-1)) with r = 1 -
loss, H = 2 (one switch), D = N; and whether every result was bit-exact.

    .venv/bin/python scripts/epic_loss_sim.py [--ranks 8] [--kib 256] [--loss 0,0.001,0.005,0.01]
                                              [--slowdown 1000]
"""

from __future__ import annotations

import argparse
import sys

import numpy as np

from hosts.commlib.epic import EpicCommunicator, EpicEndpoint
from hosts.roce.scale import Scale
from hosts.roce.sim import SimWire
from hosts.roce.verbs import Context
from testbed.epic import EpicGroup, SimSwitch

SWITCH_IP = "10.255.0.1"


def run(ranks: int, nbytes: int, loss: float, iterations: int, seed: int,
        slowdown: float) -> tuple[float, bool, int]:
    """(simulated seconds for ``iterations`` AllReduces, all bit-exact, the
    ranks' retransmission timeouts)."""
    w = SimWire(loss=loss, seed=seed)
    ips = [f"10.0.{r + 1}.1" for r in range(ranks)]
    sw = SimSwitch(w, [SWITCH_IP], {ip: r + 1 for r, ip in enumerate(ips)})
    ep = EpicEndpoint(SWITCH_IP, 0x100, 0)
    scale = Scale(slowdown=slowdown)
    comms = [EpicCommunicator(Context(w.provider(ip), scale=scale), r, ranks, ep,
                              max_bytes=nbytes) for r, ip in enumerate(ips)]
    for line in EpicGroup(ep, tuple(sw.member(c.rank, ip, c.qp.qp_num)
                                    for c, ip in zip(comms, ips, strict=True))).switch_commands():
        sw.command(line)
    for c in comms:
        c.connect()
    rng = np.random.default_rng(seed)
    ok = True
    t0 = w.clock
    for _ in range(iterations):
        xs = [rng.integers(-(2**20), 2**20, nbytes // 4, dtype=np.int32) for _ in range(ranks)]
        ops = [c.start_all_reduce(x) for c, x in zip(comms, xs, strict=True)]

        def done(ops: list = ops) -> bool:
            return all([o.progress() for o in ops])

        if not w.run(until=done, timeout=600):
            raise RuntimeError(f"loss {loss}: AllReduce did not finish in 600 simulated s")
        want = np.sum(xs, axis=0, dtype=np.int32)
        ok = ok and all(np.array_equal(np.asarray(o.result()), want) for o in ops)
    return (w.clock - t0) / 1e9, ok, sum(c.qp.stats["rto"] for c in comms)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ranks", type=int, default=8)
    ap.add_argument("--kib", type=int, default=256, help="AllReduce size per rank (KiB)")
    ap.add_argument("--iterations", type=int, default=3)
    ap.add_argument("--loss", default="0,0.001,0.002,0.005,0.01",
                    help="comma-separated loss probabilities per hop")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--slowdown", type=float, default=1000.0,
                    help="the 100 Gb/s NIC's slowdown (1000: 100 Mb/s, timers x 1000)")
    args = ap.parse_args(argv)
    try:
        losses = [float(v) for v in args.loss.split(",")]
    except ValueError:
        ap.error(f"--loss: {args.loss!r} is not a comma-separated list of numbers")
    if any(not 0 <= v < 1 for v in losses) or not 2 <= args.ranks <= 32 or args.kib < 1:
        ap.error("loss must be in [0, 1), ranks in 2..32, kib >= 1")
    nbytes = args.kib * 1024
    base = None
    exponent = 2 * (2 - 1) * (args.ranks - 1)
    print(f"{args.ranks} ranks, AllReduce of {args.kib} KiB x {args.iterations}, links at "
          f"{100e3 / args.slowdown:g} Mb/s; model X/B = r^{exponent}")
    print(f"{'loss':>7} {'sim s':>9} {'algbw Mb/s':>11} {'X/X0':>7} {'model':>7} "
          f"{'RTOs':>5} bit-exact")
    for loss in losses:
        t, ok, rtos = run(args.ranks, nbytes, loss, args.iterations, args.seed, args.slowdown)
        algbw = nbytes * 8 * args.iterations / t / 1e6
        base = base or algbw
        model = (1 - loss) ** exponent
        print(f"{loss:>7.4f} {t:>9.4f} {algbw:>11.2f} {algbw / base:>7.3f} {model:>7.3f} "
              f"{rtos:>5} {'yes' if ok else 'NO'}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
