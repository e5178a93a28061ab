#!/usr/bin/env python3
"""What a host agent costs in CPU per packet: a sender and a receiver agent on loopback.

Runs two real agents (``python -m hosts.agent``) on two 127/8 addresses, one
flow of 64 KiB RDMA WRITEs at ``--mbps`` (the modelled NIC is 10 Gb/s, so
the slowdown is 10 000 / mbps), no switch and no qdisc: the pacer alone
spaces the packets. After ``--settle`` seconds it reads each agent's CPU for
``--seconds`` (testbed.cpu_usage: time on a CPU and waiting for one; user
and system time and context switches from /proc) and prints the CPU per
data packet. ``--floor`` first measures the least a wake-up costs here: a
loop that sleeps in select() until a datagram arrives, at the same packet
rate. A benchmark, not a test: figures vary with the machine and its load.
No root needed.

    .venv/bin/python scripts/bench_agent_cpu.py --mbps 40 [--interpreter pypy3]
        [--seconds 5] [--floor] [--json]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Literal

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from hosts.agent_spec import FlowSpec, JobSpec, TransportSpec  # noqa: E402
from hosts.roce.constants import DEFAULT_PATH_MTU  # noqa: E402
from testbed.cpu_usage import CpuSampler  # noqa: E402

NIC_BPS = 10e9
MSG_BYTES = 65536
WIRE_BYTES = 1082            # a full data packet at MTU 1024, Ethernet to ICRC

_FLOOR = """
import select, socket, sys, time
r = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
r.bind(("127.0.0.1", 0))
r.setblocking(False)
print(r.getsockname()[1], flush=True)
n = 0
end = time.monotonic() + float(sys.argv[1])
while time.monotonic() < end:
    select.select((r,), (), (), 0.01)
    try:
        while True:
            r.recv(2048)
            n += 1
    except BlockingIOError:
        pass
print(n, flush=True)
"""


def _proc_times(pid: int) -> dict[str, float]:
    """User and system seconds and context switches of ``pid`` so far."""
    tick = os.sysconf("SC_CLK_TCK")
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    out = {"user_s": int(fields[11]) / tick, "system_s": int(fields[12]) / tick}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(("voluntary_ctxt_switches", "nonvoluntary_ctxt_switches")):
            k, v = line.split(":")
            out[k] = int(v)
    return out


def agents(mbps: float, interpreter: str, settle_s: float, seconds: float) -> dict[str, Any]:
    pps = mbps * 1e6 / 8 / WIRE_BYTES
    count = int((settle_s + seconds + 5) * mbps * 1e6 / 8 / MSG_BYTES) + 8
    rng = random.Random()
    a, b = rng.randrange(1, 250), rng.randrange(1, 250)
    ips = [f"127.{a}.{b}.1", f"127.{a}.{b}.2"]
    transport = TransportSpec(scale={"slowdown": NIC_BPS / (mbps * 1e6), "nic_rate_bps": NIC_BPS},
                              dcqcn={"preset": "zhu2015"}, path_mtu=DEFAULT_PATH_MTU,
                              sample_interval_us=20_000)

    def flow(role: Literal["sender", "receiver"], peer: str) -> FlowSpec:
        return FlowSpec(flow="f", role=role, peer_ip=peer, msg_bytes=MSG_BYTES, count=count,
                        window=8, seed=1)

    tmp = Path(tempfile.mkdtemp(prefix="p4tb-agent-cpu-"))
    rdv = str(tmp / "rdv")
    specs = [JobSpec(host="sender", ip=ips[0], flows=(flow("sender", ips[1]),),
                     transport=transport, timeout_s=120, rendezvous_dir=rdv, barrier=(0, 2)),
             JobSpec(host="receiver", ip=ips[1], flows=(flow("receiver", ips[0]),),
                     transport=transport, timeout_s=120, rendezvous_dir=rdv, barrier=(1, 2))]
    procs: list[subprocess.Popen[bytes]] = []
    try:
        for s in specs:
            (tmp / f"{s.host}.json").write_text(s.to_json())
            procs.append(subprocess.Popen(
                [interpreter, "-m", "hosts.agent", "--spec", str(tmp / f"{s.host}.json"),
                 "--events", str(tmp / f"{s.host}.jsonl")], cwd=REPO,
                env={**os.environ, "PYTHONPATH": str(REPO)}, stdout=subprocess.DEVNULL,
                stderr=subprocess.PIPE))
        time.sleep(settle_s)        # set-up, PyPy's warm-up, the flow under way
        cpu = CpuSampler()
        for s, p in zip(specs, procs, strict=True):
            cpu.add(s.host, p.pid)
        before = [_proc_times(p.pid) for p in procs]
        cpu.sample()
        time.sleep(seconds)
        cpu.sample()
        after = [_proc_times(p.pid) for p in procs]
        shares = cpu.result()["processes"]
        out: dict[str, Any] = {"mbps": mbps, "packets_per_s": round(pps), "interpreter":
                               interpreter, "seconds": seconds}
        for s, t0, t1 in zip(specs, before, after, strict=True):
            d = {k: t1[k] - t0[k] for k in t0}
            out[s.host] = {
                **shares.get(s.host, {}),
                "cpu_us_per_packet": round((d["user_s"] + d["system_s"]) / seconds / pps * 1e6, 1),
                "user_us_per_packet": round(d["user_s"] / seconds / pps * 1e6, 1),
                "system_us_per_packet": round(d["system_s"] / seconds / pps * 1e6, 1),
                "wakeups_per_packet": round(d["voluntary_ctxt_switches"] / seconds / pps, 2)}
        for p in procs:
            _out, err = p.communicate(timeout=120)
            if p.returncode:
                raise SystemExit(f"an agent failed (exit {p.returncode}): "
                                 f"{err.decode(errors='replace')[-2000:]}")
        return out
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()
        shutil.rmtree(tmp, ignore_errors=True)


def floor(mbps: float, interpreter: str, seconds: float) -> dict[str, Any]:
    """CPU per datagram of a process that only wakes for it and reads it."""
    import socket

    pps = mbps * 1e6 / 8 / WIRE_BYTES
    rx = subprocess.Popen([interpreter, "-c", _FLOOR, str(seconds + 1)], stdout=subprocess.PIPE,
                          text=True)
    try:
        assert rx.stdout is not None
        port = int(rx.stdout.readline())
        tx = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        payload = b"x" * (WIRE_BYTES - 42)
        t0 = _proc_times(rx.pid)
        start = time.monotonic()
        sent = 0
        while time.monotonic() - start < seconds:
            due = start + sent / pps
            while time.monotonic() < due:
                pass
            tx.sendto(payload, ("127.0.0.1", port))
            sent += 1
        t1 = _proc_times(rx.pid)
        tx.close()
        received = int(rx.stdout.readline())
    finally:
        rx.wait(timeout=30)
    busy = t1["user_s"] - t0["user_s"] + t1["system_s"] - t0["system_s"]
    return {"packets_per_s": round(pps), "received": received,
            "cpu_us_per_packet": round(busy / sent * 1e6, 1),
            "user_us_per_packet": round((t1["user_s"] - t0["user_s"]) / sent * 1e6, 1),
            "wakeups_per_packet": round((t1["voluntary_ctxt_switches"]
                                         - t0["voluntary_ctxt_switches"]) / sent, 2)}


def main() -> None:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--mbps", type=float, default=40.0, help="link rate (default 40)")
    ap.add_argument("--interpreter", default=sys.executable,
                    help="what runs the agents (default: this Python; e.g. pypy3)")
    ap.add_argument("--settle", type=float, default=6.0, help="seconds before measuring")
    ap.add_argument("--seconds", type=float, default=5.0, help="seconds measured")
    ap.add_argument("--floor", action="store_true", help="also the bare wake-up cost")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    if args.mbps <= 0 or args.seconds <= 0 or args.settle < 0:
        ap.error("--mbps and --seconds must be positive, --settle not negative")
    exe = shutil.which(args.interpreter) or args.interpreter
    if not os.access(exe, os.X_OK):
        ap.error(f"--interpreter {args.interpreter}: not an executable")
    result: dict[str, Any] = {"agents": agents(args.mbps, exe, args.settle, args.seconds)}
    if args.floor:
        result["floor"] = floor(args.mbps, exe, args.seconds)
    if args.json:
        print(json.dumps(result, indent=1))
        return
    r = result["agents"]
    print(f"{r['mbps']:g} Mb/s ({r['packets_per_s']} packets/s), agents on {exe}:")
    for host in ("sender", "receiver"):
        h = r[host]
        print(f"  {host:8s} {h.get('cpu_share', 0):.0%} of a CPU (waited "
              f"{h.get('wait_share', 0):.0%}): {h['cpu_us_per_packet']} us per packet "
              f"(user {h['user_us_per_packet']}, system {h['system_us_per_packet']}), "
              f"{h['wakeups_per_packet']} wake-ups per packet")
    if "floor" in result:
        f = result["floor"]
        print(f"  floor: a process that only wakes and reads: {f['cpu_us_per_packet']} us per "
              f"packet (user {f['user_us_per_packet']}), {f['wakeups_per_packet']} wake-ups "
              "per packet")


if __name__ == "__main__":
    main()
