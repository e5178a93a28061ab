"""Forwarding benchmark of the soft switch: h1 - s1 - h2, one TCP flow.

The shape of BMv2's stress test for simple_router: two hosts around one
switch running the L3 router (``switches/p4/l3_router.p4``), one TCP flow
(iperf3 if installed, else a Python socket pair) for N seconds. One run gives:

- ``mbps``: TCP goodput the receiver measured (what iperf reports);
- ``pps``: frames the switch received per second (both directions);
- ``cpu_s_per_mpkt``: CPU seconds of the switch process per million frames;
- and, for judging a run: Mb/s through the switch, socket drops, lag.

:func:`forwarding` repeats runs per backend and reports the median of each
figure (the machine may be shared; single runs vary). Needs root (Mininet).
A benchmark, not a test: figures depend on the machine and its load.
"""

from __future__ import annotations

import json
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, TypedDict

from ground.netlink import link_names
from testbed.net import P4_DIR, running, star_router

DEFAULT_PROGRAM = P4_DIR / "l3_router.p4"
SUMMARY_KEYS = ("backend", "pps", "mbps", "cpu_s_per_mpkt")


class _RunFigures(TypedDict):
    backend: str
    program: str            # the P4 program's file name
    seconds: float          # of measured transfer asked for
    tool: str               # "iperf3" or "python"
    elapsed_s: float
    packets: int            # frames the switch received
    pps: int
    mbps: float             # goodput the receiver measured
    mbps_through_switch: float
    switch_cpu_s: float
    cpu_s_per_mpkt: float | None
    kernel_drops: int       # frames lost at the switch's sockets
    lag_us_max: float
    lag_us_mean: float


class ForwardingRun(_RunFigures, total=False):
    """One run's figures (:func:`forwarding_run`)."""
    retransmits: int | None  # iperf3's count, when iperf3 sent


class ForwardingSummary(TypedDict):
    """Median figures of one backend's runs, under the keys of SUMMARY_KEYS."""
    backend: str
    pps: float | None
    mbps: float | None
    cpu_s_per_mpkt: float | None

PY_SINK = r"""
import socket, sys, time
s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("0.0.0.0", 5201)); s.listen(1); print("ready", flush=True)
c, _ = s.accept(); n = 0; t0 = time.monotonic()
while True:
    d = c.recv(1 << 16)
    if not d: break
    n += len(d)
print(n, time.monotonic() - t0, flush=True)
"""

PY_SOURCE = r"""
import socket, sys, time
c = socket.create_connection((sys.argv[1], 5201)); buf = bytes(1 << 16)
end = time.monotonic() + float(sys.argv[2]); n = 0
while time.monotonic() < end:
    c.sendall(buf); n += len(buf)
c.close(); print(n, flush=True)
"""


def default_tool() -> str:
    return "iperf3" if shutil.which("iperf3") else "python"


def _totals(stats: dict[str, Any]) -> tuple[int, int, float]:
    ports = stats["ports"].values()
    return (sum(p["rx_frames"] for p in ports), sum(p["rx_bytes"] for p in ports),
            float(stats["cpu_s"]))


def _wait_for_names(names: Sequence[str], timeout: float) -> None:
    """Wait while interfaces of another Mininet run hold the names this one
    needs (Mininet names are global to the machine)."""
    deadline = time.monotonic() + timeout
    while True:
        present = set(link_names())
        taken = [n for n in names if n in present]
        if not taken:
            return
        if time.monotonic() > deadline:
            raise RuntimeError(f"interfaces {', '.join(taken)} belong to another run "
                               f"(still there after {timeout:g} s)")
        time.sleep(1.0)


def forwarding_run(seconds: float = 5.0, program: str | Path = DEFAULT_PROGRAM,
                   tool: str | None = None, backend: str = "python",
                   warmup: float = 1.0) -> ForwardingRun:
    """One run: bring the network up, send traffic for ``warmup`` seconds
    (not measured), transfer for ``seconds``, tear the network down."""
    tool = tool or default_tool()
    program = Path(program)
    _wait_for_names(["s1-eth1", "s1-eth2", "h1-eth0", "h2-eth0"], timeout=600)
    log_dir = tempfile.mkdtemp(prefix="bench-softswitch-")
    net, sw, (h1, h2), (_a1, a2) = star_router(2, program, log_dir=log_dir, backend=backend)
    retransmits: int | None = None
    with running(net):
        ping = h1.cmd(f"ping -c 1 -W 2 {a2.ip}")
        if " 0% packet loss" not in ping:
            raise RuntimeError(f"no connectivity through the switch:\n{ping}\n"
                               f"log: {sw.log_path}")
        if warmup > 0:  # same for every backend; PyPy's JIT compiles the path here
            if tool == "iperf3":
                warm = h2.popen(["iperf3", "-s", "-1"])
                time.sleep(0.3)
                h1.cmd(f"iperf3 -c {a2.ip} -t {warmup} >/dev/null 2>&1")
                warm.wait(timeout=10)
            else:
                h1.cmd(f"ping -c 1000 -i 0.001 -q {a2.ip}")
        before = sw.stats()
        t0 = time.monotonic()
        if tool == "iperf3":
            server = h2.popen(["iperf3", "-s", "-1"])
            time.sleep(0.3)
            out = h1.cmd(f"iperf3 -c {a2.ip} -t {seconds} -J")
            server.wait(timeout=10)
            rep = json.loads(out[out.index("{"):])
            goodput = rep["end"]["sum_received"]["bits_per_second"] / 1e6
            retransmits = rep["end"]["sum_sent"].get("retransmits")
        else:
            server = h2.popen([sys.executable, "-c", PY_SINK], text=True)
            server.stdout.readline()
            source = h1.popen([sys.executable, "-c", PY_SOURCE, a2.ip, str(seconds)])
            source.communicate(timeout=seconds + 30)
            n, dt = server.communicate(timeout=30)[0].split()
            goodput = int(n) * 8 / float(dt) / 1e6
        elapsed = time.monotonic() - t0
        after = sw.stats()
    f0, b0, c0 = _totals(before)
    f1, b1, c1 = _totals(after)
    frames, nbytes, cpu = f1 - f0, b1 - b0, c1 - c0
    result: ForwardingRun = {
        "backend": backend, "program": program.name, "seconds": seconds, "tool": tool,
        "elapsed_s": round(elapsed, 3),
        "packets": frames,
        "pps": round(frames / elapsed),
        "mbps": round(goodput, 2),
        "mbps_through_switch": round(nbytes * 8 / elapsed / 1e6, 2),
        "switch_cpu_s": round(cpu, 3),
        "cpu_s_per_mpkt": round(cpu / frames * 1e6, 2) if frames else None,
        # Whether the switch kept up: frames lost at its sockets, and how long
        # frames waited in the kernel before being processed (whole run).
        "kernel_drops": after["kernel_drops"] - before["kernel_drops"],
        "lag_us_max": after["lag_us"]["max"],
        "lag_us_mean": after["lag_us"]["mean"],
    }
    if tool == "iperf3":
        result["retransmits"] = retransmits
    # the switch's log is kept only when the run failed (an exception above)
    shutil.rmtree(log_dir, ignore_errors=True)
    return result


def _median(values: Sequence[float | None]) -> float | None:
    vals = [v for v in values if v is not None]
    if not vals:
        return None
    m = statistics.median(vals)
    if all(isinstance(v, int) for v in vals):
        return int(round(m))
    return round(m, 2)


def summarize(backend: str, runs: Sequence[ForwardingRun]) -> ForwardingSummary:
    """Median figures of ``runs`` under the keys of SUMMARY_KEYS."""
    return {"backend": backend,
            "pps": _median([r["pps"] for r in runs]),
            "mbps": _median([r["mbps"] for r in runs]),
            "cpu_s_per_mpkt": _median([r["cpu_s_per_mpkt"] for r in runs])}


def forwarding(backends: Sequence[str] = ("python",), seconds: float = 5.0, runs: int = 3,
               program: str | Path = DEFAULT_PROGRAM, tool: str | None = None,
               warmup: float = 1.0, on_run: Callable[[ForwardingRun], None] | None = None,
               ) -> tuple[list[ForwardingSummary], list[ForwardingRun]]:
    """``runs`` runs per backend, interleaved (so a burst of load elsewhere
    does not hit one backend only): (summary per backend, every run)."""
    all_runs: list[ForwardingRun] = []
    by_backend: dict[str, list[ForwardingRun]] = {b: [] for b in backends}
    for _ in range(runs):
        for b in backends:
            r = forwarding_run(seconds, program, tool, b, warmup)
            by_backend[b].append(r)
            all_runs.append(r)
            if on_run is not None:
                on_run(r)
    return [summarize(b, by_backend[b]) for b in backends], all_runs


def format_run(r: ForwardingRun) -> str:
    return (f"  run {r['backend']:>6}: {r['mbps']:8.2f} Mb/s goodput, {r['pps']:6d} pkt/s, "
            f"{r['cpu_s_per_mpkt']} CPU s/Mpkt, {r['mbps_through_switch']:.1f} Mb/s through "
            f"switch, drops {r['kernel_drops']}, lag mean/max {r['lag_us_mean']}/"
            f"{r['lag_us_max']} us")


def format_summary(summary: Sequence[ForwardingSummary]) -> str:
    lines = [f"{'backend':>8} {'Mb/s':>9} {'pkt/s':>8} {'CPU s/Mpkt':>11}"]
    for s in summary:
        lines.append(f"{s['backend']:>8} {s['mbps']:>9} {s['pps']:>8} {s['cpu_s_per_mpkt']:>11}")
    return "\n".join(lines)
