#!/usr/bin/env python3
"""Forwarding throughput of the soft switch: h1 - s1 - h2, one TCP flow.

Builds the two-host network around a soft switch running the L3 router,
installs routes, runs a TCP transfer (iperf3 if installed, else a Python
socket pair) for N seconds and prints, from the switch's own counters:
packets/s and Mb/s through the switch, and the switch process's CPU seconds
per million packets. Needs root. A benchmark, not a test: figures vary with
the machine and its load.

    sudo .venv/bin/python scripts/bench_forwarding.py --seconds 5 [--json]
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from testbed.net import P4_DIR, running, star_router  # noqa: E402

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


def _totals(stats: dict[str, Any]) -> tuple[int, int, float]:
    ports = stats["ports"].values()
    return (sum(p["rx_frames"] for p in ports), sum(p["rx_bytes"] for p in ports),
            float(stats["cpu_s"]))


def bench(seconds: float, program: Path, tool: str) -> dict[str, Any]:
    log_dir = tempfile.mkdtemp(prefix="bench-softswitch-")
    net, sw, (h1, h2), (_a1, a2) = star_router(2, program, log_dir=log_dir)
    result: dict[str, Any] = {"program": program.name, "seconds": seconds, "tool": tool,
                              "log_dir": log_dir}
    with running(net):
        ping = h1.cmd(f"ping -c 1 -W 2 {a2.ip}")
        if " 0% packet loss" not in ping:
            raise SystemExit(f"no connectivity through the switch:\n{ping}\nlog: {sw.log_path}")
        before = sw.stats()
        t0 = time.monotonic()
        if tool == "iperf3":
            server = h2.popen(["iperf3", "-s", "-1"])
            time.sleep(0.3)
            out = h1.cmd(f"iperf3 -c {a2.ip} -t {seconds} -J")
            server.wait(timeout=10)
            rep = json.loads(out[out.index("{"):])
            result["goodput_mbps"] = rep["end"]["sum_received"]["bits_per_second"] / 1e6
            result["retransmits"] = rep["end"]["sum_sent"].get("retransmits")
        else:
            server = h2.popen([sys.executable, "-c", PY_SINK], text=True)
            server.stdout.readline()
            source = h1.popen([sys.executable, "-c", PY_SOURCE, a2.ip, str(seconds)])
            source.communicate(timeout=seconds + 30)
            n, dt = server.communicate(timeout=30)[0].split()
            result["goodput_mbps"] = int(n) * 8 / float(dt) / 1e6
        elapsed = time.monotonic() - t0
        after = sw.stats()
    f0, b0, c0 = _totals(before)
    f1, b1, c1 = _totals(after)
    frames, nbytes, cpu = f1 - f0, b1 - b0, c1 - c0
    result.update({
        "elapsed_s": round(elapsed, 3),
        "packets": frames,
        "packets_per_s": round(frames / elapsed),
        "mbps_through_switch": round(nbytes * 8 / elapsed / 1e6, 2),
        "switch_cpu_s": round(cpu, 3),
        "cpu_s_per_million_packets": round(cpu / frames * 1e6, 2) if frames else None,
        "goodput_mbps": round(result["goodput_mbps"], 2),
        # Whether the switch kept up: frames lost at its sockets, and how long
        # frames waited in the kernel before being processed (whole run).
        "kernel_drops": after["kernel_drops"] - before["kernel_drops"],
        "lag_us_max": after["lag_us"]["max"],
        "lag_us_mean": after["lag_us"]["mean"],
    })
    return result


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seconds", type=float, default=5.0)
    ap.add_argument("--program", type=Path, default=P4_DIR / "l3_router.p4")
    ap.add_argument("--tool", choices=["iperf3", "python"],
                    default="iperf3" if shutil.which("iperf3") else "python")
    ap.add_argument("--json", action="store_true", help="print one JSON object")
    args = ap.parse_args()
    r = bench(args.seconds, args.program, args.tool)
    if args.json:
        print(json.dumps(r, indent=2))
        return
    print(f"program           : {r['program']}  ({r['tool']}, {r['seconds']} s)")
    print(f"packets/s (switch): {r['packets_per_s']}")
    print(f"Mb/s (switch)     : {r['mbps_through_switch']}")
    print(f"TCP goodput Mb/s  : {r['goodput_mbps']}")
    print(f"CPU s / M packets : {r['cpu_s_per_million_packets']}")
    print(f"socket drops      : {r['kernel_drops']}")
    print(f"lag us mean / max : {r['lag_us_mean']} / {r['lag_us_max']}")


if __name__ == "__main__":
    main()
