"""Helpers of the integration tests: running traffic.py inside Mininet hosts,
and running an experiment end to end and judging its fidelity verdict."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import pytest

TRAFFIC = str(Path(__file__).with_name("traffic.py"))
REPO = Path(__file__).resolve().parents[2]


def as_foreground_job() -> None:
    """``preexec_fn`` for a child that a test interrupts as Ctrl-C would: a
    terminal's foreground job has SIGINT at its default, but a test suite
    started in the background by a non-interactive shell inherits it ignored
    (and so would the child, which then never sees the Ctrl-C)."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def host_run(host: Any, *args: object) -> dict[str, Any]:
    """Run traffic.py in ``host`` and return its JSON line."""
    out = host.cmd(" ".join([sys.executable, TRAFFIC, *map(str, args)]))
    for line in reversed(out.strip().splitlines()):
        if line.startswith("{"):
            result: dict[str, Any] = json.loads(line)
            return result
    raise AssertionError(f"{host.name}: traffic.py {args} printed no result:\n{out}")


def host_start(host: Any, *args: object) -> Any:
    """Start traffic.py in ``host`` in the background; wait until it listens."""
    proc = host.popen([sys.executable, TRAFFIC, *map(str, args)], text=True)
    line = proc.stdout.readline()
    if '"listening"' not in line:
        proc.kill()
        raise AssertionError(f"{host.name}: {args} did not start: {line}{proc.stderr.read()}")
    return proc


def host_result(proc: Any, timeout: float = 30) -> dict[str, Any]:
    out, err = proc.communicate(timeout=timeout)
    for line in reversed(out.strip().splitlines()):
        if line.startswith("{"):
            result: dict[str, Any] = json.loads(line)
            return result
    raise AssertionError(f"no result: {out}{err}")


def wait_for(cond: Callable[[], bool], timeout: float, interval: float = 0.1) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if cond():
            return True
        time.sleep(interval)
    return cond()


# The opening of every not-faithful failure; the integration conftest reruns
# tests that fail with it (and only those).
OVERLOADED = "the machine was overloaded"


def assert_faithful(summary: dict[str, Any]) -> None:
    """Fail first, and say so, when a run was not faithful: its figures then
    measure an overloaded machine, not the code under test."""
    if not summary.get("fidelity_ok"):
        raise AssertionError(
            f"{OVERLOADED}: the run was not faithful, so its figures say "
            "nothing about the code (check `uptime` and rerun). Verdict: "
            + str(summary.get("fidelity_verdict", summary.get("fidelity"))))


def run_experiment(name: str, out: Path, *params: str, quick: bool = True,
                   timeout: float = 1500, options: Sequence[str] = ()) -> dict[str, Any]:
    """``testbed run NAME [--quick] [OPTION ...] [-p PARAM ...] --out OUT`` in
    a fresh interpreter; fails unless it succeeded, and returns its
    summary.json."""
    cmd = [sys.executable, "-m", "testbed.cli", "run", name, *(["--quick"] if quick else []),
           *options, *(a for p in params for a in ("-p", p)), "--out", str(out)]
    r = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, timeout=timeout)
    assert r.returncode == 0, r.stdout + r.stderr
    summary: dict[str, Any] = json.loads((out / "summary.json").read_text())
    return summary


def skip_without_rxe_hosts() -> None:
    """Skip the test where Mininet rdma_rxe hosts cannot run (no rdma_rxe on
    this machine's kernel; the guest VM runs it: vm/guest-tests.sh)."""
    from testbed.rxe_host import rxe_in_mininet_reason

    reason = rxe_in_mininet_reason()
    if reason is not None:
        pytest.skip(reason)


def run_on_rxe_hosts(name: str, out: Path, *params: str, quick: bool = False,
                     pcap: bool = False) -> dict[str, Any]:
    """:func:`run_experiment` with rdma_rxe hosts (``--hosts rxe``; ``pcap``:
    the switch's ports captured, ``--pcap``), after
    :func:`skip_without_rxe_hosts`; fails unless the run succeeded on rxe
    hosts, and returns its summary.json."""
    skip_without_rxe_hosts()
    summary = run_experiment(name, out, *params, quick=quick,
                             options=("--hosts", "rxe", *(["--pcap"] if pcap else [])))
    assert summary["ok"] and summary["hosts"] == "rxe"
    return summary


def xfail_unless_faithful(summary: dict[str, Any], name: str) -> None:
    """End the test as an expected failure, naming the verdict, when the
    fidelity verdict rejected the run: the timing figures checked after this
    call would measure the loaded machine, not the code. What must hold
    whatever the load (bit-exact results, keys, plots) is checked before it."""
    if not summary.get("fidelity_ok"):
        pytest.xfail(f"{name} was not faithful on this machine (docs/getting-started.md, "
                     f"'When a run is not faithful'): "
                     f"{summary.get('fidelity_verdict', summary.get('fidelity'))}")


def wire_counts_at_switch(run: Path, port_ifname: str, host_ip: str,
                          nak_window_ns: int) -> dict[str, int]:
    """A host's requester counts (hosts.roce.rxe.wire_counts.WireCounts, summed over its
    QPs) from the switch's capture of the port it hangs on (``--pcap``): what
    the port received from the host is what the host sent, what it sent the host
    is what the host received, each at its time there. A NAK counts for the QP
    that sent last, which is exact for hosts with one busy QP at a time (a rank
    in epic-loss)."""
    from hosts.roce.constants import OPS_DATA
    from hosts.roce.rxe.frames import parse_bth
    from hosts.roce.rxe.wire_counts import WireCounts
    from switches.soft.pcap import read_pcap

    frames = [(ts, f, True) for ts, f in read_pcap(run / "switch" / f"{port_ifname}_in.pcap")]
    frames += [(ts, f, False) for ts, f in read_pcap(run / "switch" / f"{port_ifname}_out.pcap")]
    frames.sort(key=lambda x: x[0])
    qps: dict[tuple[str, int], WireCounts] = {}
    last: WireCounts | None = None
    for ts, frame, sent in frames:
        t_ns = round(ts * 1e9)
        b = parse_bth(frame)
        if b is None:
            continue
        if sent and b.opcode in OPS_DATA and b.src_ip == host_ip:
            last = qps.setdefault((b.dst_ip, b.dqpn), WireCounts(nak_window_ns))
            last.on_request(b.psn, t_ns)
        elif not sent and b.syndrome is not None and b.dst_ip == host_ip and last is not None:
            last.on_ack(b.psn, b.syndrome, t_ns)
    total = {"retransmits": 0, "naks_rcvd": 0, "rto": 0, "wire_tx_pkts": 0}
    for w in qps.values():
        for k, v in w.counters().items():
            total[k] += v
    return total


def qp_counts(run: Path, host: str, keys: Sequence[str]) -> dict[str, int]:
    """The ``keys`` of a host's QP counters (its agents' ``pacer_report`` events),
    summed over every phase of the run."""
    total = dict.fromkeys(keys, 0)
    for phase in (run / "phases").iterdir():
        path = phase / f"{host}.events.jsonl"
        if not path.exists():
            continue
        for line in path.read_text().splitlines():
            e = json.loads(line)
            if e["event"] == "pacer_report":
                for k in keys:
                    total[k] += e["qp"][k]
    return total
