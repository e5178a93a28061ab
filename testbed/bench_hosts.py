"""Host benchmark: the highest link rate at which the RoCE hosts stay faithful.

One trial is a ``roce-basics`` run at one link rate (every link and NIC at
``rate``, time scaled as that experiment does; each host's frames serialised
by a line-rate qdisc with ``qdisc_ahead`` packets of run-ahead unless it is 0),
with only one of its phases:

- ``lone_qp``: the ``single`` phase, one QP of 64 KiB WRITEs, MTU 1024,
  through one soft switch. Faithful when the run's fidelity verdict is
  faithful, its goodput is at least ``MIN_LONE_GOODPUT`` of the line rate and
  the receiver saw no CE mark (one sender at the link rate builds no queue);
- ``pair``: the ``pair`` phase, two QPs sharing the bottleneck. Faithful when
  the verdict is faithful and both receivers got the right bytes.

Each trial moves about ``seconds`` of traffic at its rate. Where a PyPy JIT
runs the switch or the agents, a trial first runs a warm-up phase of about
``warmup_packets`` packets (both senders at once, outside the fidelity
verdict): compiling during the measured traffic stalled the switch for up
to 200 ms. :func:`search_max_rate`
finds the highest faithful rate: doubling from a start rate while trials
pass (halving while they fail), then bisecting (geometrically) between the
highest pass and the lowest fail until they are within ``resolution``. It
assumes a rate above a failing one fails too; one trial per rate, so on a
busy machine a run may stop lower than a quiet one would (the load average
before each trial is recorded). A benchmark, not a test: it prints figures.
"""

from __future__ import annotations

import math
import os
import platform
import tempfile
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Literal, TypedDict

__all__ = ["search_max_rate", "judge", "Trial", "hosts_bench", "machine_info", "format_report",
           "KINDS", "MIN_LONE_GOODPUT", "QDISC_AHEAD_PACKETS", "WARMUP_PACKETS", "warmup_msgs"]

KINDS = {"lone_qp": "single", "pair": "pair"}
# the report's key of each kind's highest faithful rate
_RATE_KEYS: dict[str, Literal["lone_qp_mbps", "pair_mbps"]] = {
    "lone_qp": "lone_qp_mbps", "pair": "pair_mbps"}
MIN_LONE_GOODPUT = 0.95
MSG_BYTES = 65536
PATH_MTU = 1024
# Packets a sender may keep in its line-rate qdisc (roce-basics
# host_qdisc_ahead_packets): a DCQCN cut then waits at most 16 packet times,
# 3.5 us in the modelled 40 Gb/s network. Measured: the lone QP's faithful
# rate more than doubles over pacing in Python alone (hosts/roce/README.md, "Speed").
QDISC_AHEAD_PACKETS = 16.0
# Packets through the switch before a trial's measured phase when a JIT runs
# it or the agents: the PyPy switch lagged 112-202 ms during a warm-up of
# 38 400 packets and at most 11-13 ms in the phase after it (100 Mb/s).
WARMUP_PACKETS = 30_000


def search_max_rate(faithful: Callable[[float], bool], *, start: float, floor: float,
                    ceiling: float, resolution: float = 0.1
                    ) -> tuple[float | None, list[tuple[float, bool]]]:
    """Highest rate in [floor, ceiling] at which ``faithful(rate)`` holds,
    within a factor 1 + ``resolution`` (None if even ``floor`` fails), and
    every (rate, verdict) tried, in order."""
    if not 0 < floor <= start <= ceiling:
        raise ValueError("need 0 < floor <= start <= ceiling")
    if resolution <= 0:
        raise ValueError("resolution must be positive")
    tried: list[tuple[float, bool]] = []

    def test(rate: float) -> bool:
        ok = bool(faithful(rate))
        tried.append((rate, ok))
        return ok

    lo: float | None
    hi: float | None
    if test(start):
        lo, hi = start, None
        while hi is None and lo < ceiling:
            nxt = min(lo * 2, ceiling)
            if test(nxt):
                lo = nxt
            else:
                hi = nxt
        if hi is None:
            return lo, tried
    else:
        lo, hi = None, start
        while lo is None and hi > floor:
            nxt = max(hi / 2, floor)
            if test(nxt):
                lo = nxt
            else:
                hi = nxt
        if lo is None:
            return None, tried
    while hi / lo > 1 + resolution:
        mid = math.sqrt(lo * hi)
        if test(mid):
            lo = mid
        else:
            hi = mid
    return lo, tried


def judge(kind: str, summary: dict[str, Any]) -> tuple[bool, list[str]]:
    """Whether a trial's run (its summary.json) was faithful, and why not."""
    why: list[str] = []
    if not summary.get("ok"):
        return False, [f"the run failed: {str(summary.get('error', 'unknown')).splitlines()[0]}"]
    if not summary.get("fidelity_ok"):
        why.append(f"fidelity: {summary.get('fidelity_verdict') or 'not faithful'}")
    if kind == "lone_qp":
        g = summary.get("single.goodput_fraction")
        if g is None or g < MIN_LONE_GOODPUT:
            why.append(f"goodput {g} of line rate (< {MIN_LONE_GOODPUT})")
        ce = summary.get("single.ce_marked_pkts")
        if ce:
            why.append(f"{ce} CE-marked packets with one sender")
    elif kind == "pair":
        if not summary.get("pair.bytes_ok"):
            why.append("a receiver's bytes differ from what was sent")
    else:
        raise ValueError(f"unknown trial kind {kind!r} (choose from {', '.join(KINDS)})")
    return not why, why


@dataclass
class Trial:
    kind: str
    rate_mbps: float
    faithful: bool
    why: list[str]
    run_dir: str
    load_before: float
    seconds: float
    # the run's figures of _FIGURES (its summary's flat keys)
    figures: dict[str, float | bool | None] = field(default_factory=dict)


def _messages(rate_mbps: float, seconds: float) -> int:
    from testbed.timeline import payload_efficiency

    payload_bps = rate_mbps * 1e6 * payload_efficiency(MSG_BYTES, PATH_MTU)
    return max(8, math.ceil(seconds * payload_bps / (8 * MSG_BYTES)))


_FIGURES = ("single.goodput_fraction", "single.ce_marked_pkts", "single.cnps",
            "single.max_queue_pkts", "pair.jain_index", "pair.utilization", "pair.cnps",
            "pair.max_queue_pkts", "fidelity_ok")


def warmup_msgs(switch_backend: str, interpreter: str, packets: int | None = None) -> int:
    """Messages per sender of a trial's warm-up phase: none unless PyPy runs
    the switch or the agents (``auto`` may pick it); ``packets`` (default
    WARMUP_PACKETS) in all, split over the two senders."""
    if packets is None:
        packets = WARMUP_PACKETS if "pypy" in (switch_backend, interpreter) or \
            interpreter == "auto" else 0
    if packets < 0:
        raise ValueError("warm-up packets must be >= 0")
    per_msg = -(-MSG_BYTES // PATH_MTU)
    return -(-packets // (2 * per_msg))


def run_trial(kind: str, rate_mbps: float, *, seconds: float, out_dir: Path,
              interpreter: str = "python", qdisc_ahead: float = 0.0,
              switch_backend: str = "python", warmup_packets: int | None = None,
              rx_holdoff_us: float = 0.0,
              echo: Callable[[str], None] | None = None) -> Trial:
    """One roce-basics run of ``kind``'s phase at ``rate_mbps`` (after a
    warm-up phase, see :func:`warmup_msgs`)."""
    from testbed.runner import RunError, RunOptions, RunTerminated, run

    if kind not in KINDS:
        raise ValueError(f"unknown trial kind {kind!r} (choose from {', '.join(KINDS)})")
    n = _messages(rate_mbps, seconds)
    overrides = {"bottleneck_mbps": f"{rate_mbps:g}", "phases": KINDS[kind],
                 "agent_interpreter": interpreter, "msg_bytes": str(MSG_BYTES),
                 "path_mtu": str(PATH_MTU), "host_qdisc_ahead_packets": f"{qdisc_ahead:g}",
                 "switch_backend": switch_backend, "host_rx_holdoff_us": f"{rx_holdoff_us:g}",
                 "warmup_msgs": str(warmup_msgs(switch_backend, interpreter, warmup_packets))}
    if kind == "lone_qp":
        overrides["single_msgs"] = str(n)
    else:
        overrides["pair_msgs"] = str(max(4, n // 2))   # two flows share the link
    run_dir = out_dir / f"{kind}-{rate_mbps:g}mbps"
    load = os.getloadavg()[0]
    try:
        summary = run("roce-basics", RunOptions(out=run_dir, overrides=overrides,
                                                echo=lambda _line: None))
    except RunTerminated:
        raise           # stopped by SIGTERM: not a trial's verdict, the search ends
    except RunError as e:
        summary = {"ok": False, "error": str(e)}
    ok, why = judge(kind, summary)
    t = Trial(kind, round(rate_mbps, 2), ok, why, str(run_dir), load, seconds,
              {k: summary.get(k) for k in _FIGURES if k in summary})
    if echo is not None:
        echo(format_trial(t))
    return t


def format_trial(t: Trial) -> str:
    verdict = "faithful" if t.faithful else "NOT faithful: " + "; ".join(t.why)
    figs = ", ".join(f"{k}={v}" for k, v in t.figures.items() if k != "fidelity_ok")
    return (f"  {t.kind:>7} at {t.rate_mbps:7.2f} Mb/s (load {t.load_before:.2f}): {verdict}"
            + (f" [{figs}]" if figs else ""))


class _MachineKeys(TypedDict):
    host: str
    cpus: int | None
    cpu_model: str | None
    kernel: str
    python: str


class MachineInfo(_MachineKeys, total=False):
    """The machine a benchmark ran on. The records that name the commit at
    their top take ``commit`` and ``dirty`` out; the load averages are
    now's (``load_avg_start``) and, in a report, its end's."""
    commit: str | None
    dirty: bool | None
    load_avg_start: list[float] | None
    load_avg_end: list[float] | None


class BenchSettings(TypedDict):
    start_mbps: float
    floor_mbps: float
    ceiling_mbps: float
    resolution: float
    seconds: float
    interpreter: str
    qdisc_ahead_packets: float
    switch_backend: str
    rx_holdoff_us: float
    warmup_msgs_per_sender: int
    msg_bytes: int
    path_mtu: int


class _ReportKeys(TypedDict):
    machine: MachineInfo
    out_dir: str
    settings: BenchSettings


class HostsBenchReport(_ReportKeys, total=False):
    """:func:`hosts_bench`'s report (JSON-able): the highest faithful rate of
    each kind searched, every trial (:class:`Trial` as a dict), the wall time."""
    lone_qp_mbps: float | None
    pair_mbps: float | None
    trials: list[dict[str, Any]]
    elapsed_s: float


def machine_info() -> MachineInfo:
    model = None
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    from testbed.runner import software_versions

    v = software_versions()
    return {"host": platform.node(), "cpus": os.cpu_count(), "cpu_model": model,
            "kernel": platform.release(), "python": platform.python_version(),
            "commit": v.get("git_rev"), "dirty": v.get("git_dirty"),
            "load_avg_start": [round(x, 2) for x in os.getloadavg()]}


def hosts_bench(kinds: tuple[str, ...] = ("lone_qp", "pair"), *, start_mbps: float = 25.0,
                floor_mbps: float = 1.0, ceiling_mbps: float = 800.0,
                resolution: float = 0.1, seconds: float = 3.0, interpreter: str = "python",
                qdisc_ahead: float = QDISC_AHEAD_PACKETS, switch_backend: str = "python",
                warmup_packets: int | None = None, rx_holdoff_us: float = 0.0,
                out_dir: Path | None = None, echo: Callable[[str], None] | None = None
                ) -> HostsBenchReport:
    """Search each kind's highest faithful rate; the report (JSON-able)."""
    for k in kinds:
        if k not in KINDS:
            raise ValueError(f"unknown trial kind {k!r} (choose from {', '.join(KINDS)})")
    out = Path(out_dir) if out_dir else Path(tempfile.mkdtemp(prefix="bench-hosts-"))
    out.mkdir(parents=True, exist_ok=True)
    report: HostsBenchReport = {"machine": machine_info(), "out_dir": str(out),
                                "settings": {"start_mbps": start_mbps, "floor_mbps": floor_mbps,
                                             "ceiling_mbps": ceiling_mbps,
                                             "resolution": resolution, "seconds": seconds,
                                             "interpreter": interpreter,
                                             "qdisc_ahead_packets": qdisc_ahead,
                                             "switch_backend": switch_backend,
                                             "rx_holdoff_us": rx_holdoff_us,
                                             "warmup_msgs_per_sender": warmup_msgs(
                                                 switch_backend, interpreter, warmup_packets),
                                             "msg_bytes": MSG_BYTES,
                                             "path_mtu": PATH_MTU}}
    trials: list[Trial] = []
    t0 = time.monotonic()
    for kind in kinds:
        def faithful(rate: float, kind: str = kind) -> bool:
            t = run_trial(kind, rate, seconds=seconds, out_dir=out, interpreter=interpreter,
                          qdisc_ahead=qdisc_ahead, switch_backend=switch_backend,
                          warmup_packets=warmup_packets, rx_holdoff_us=rx_holdoff_us,
                          echo=echo)
            trials.append(t)
            return t.faithful

        best, _ = search_max_rate(faithful, start=start_mbps, floor=floor_mbps,
                                  ceiling=ceiling_mbps, resolution=resolution)
        report[_RATE_KEYS[kind]] = None if best is None else round(best, 2)
    report["trials"] = [asdict(t) for t in trials]
    report["elapsed_s"] = round(time.monotonic() - t0, 1)
    report["machine"]["load_avg_end"] = [round(x, 2) for x in os.getloadavg()]
    return report


def format_report(rep: HostsBenchReport) -> str:
    m = rep["machine"]
    start, end = m.get("load_avg_start"), m.get("load_avg_end")
    lines = [f"machine: {m['host']}, {m['cpus']} CPUs ({m['cpu_model']}), kernel {m['kernel']}, "
             f"commit {str(m['commit'])[:12]}{' (dirty)' if m['dirty'] else ''}, load "
             f"{start[0] if start else None} -> {end[0] if end else None}"]
    for kind, key in _RATE_KEYS.items():
        if key in rep:
            v = rep[key]
            lines.append(f"{kind:>8}: {'none faithful' if v is None else f'{v:g} Mb/s'}")
    lines.append(f"runs: {rep['out_dir']} ({rep.get('elapsed_s')} s)")
    return "\n".join(lines)
