"""Timeline figures (matplotlib, Agg backend: no display needed).

:func:`flow_timeline` draws one phase as four stacked panels on the phase's
time axis (seconds since the common start): per-flow rate (delivered rate at
the receiver, solid; the DCQCN sender rate, dashed), the bottleneck queue
depth in packets (switch samples; RED thresholds as lines), CNPs
(cumulative count per flow, with a tick per CNP the sender received) and
retransmitted packets, and each sending QP's DCQCN trajectory (the agents'
``dcqcn`` events: Rc and Rt after every cut and increase, a marker per event
by kind and stage, alpha on the right axis).
"""

from __future__ import annotations

import multiprocessing as mp
import os
import threading
from collections.abc import Callable, Iterable, Mapping, Sequence
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

from testbed.timeline import PhaseData, counter_points, load_phase, rate_series  # noqa: E402

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

__all__ = ["flow_timeline", "dcqcn_panel", "collective_timeline", "run_plots", "typed_run_plots",
           "phase_timelines", "save_figure"]


P = TypeVar("P")


def save_figure(fig: Figure, out: Path, dpi: int = 110) -> Path:
    """Lay ``fig`` out tightly, write it to ``out`` (its folder made if
    missing) and close it; returns ``out``."""
    fig.tight_layout()
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=dpi)
    plt.close(fig)
    return out


def run_plots(run_dir: str | Path) -> tuple[Any, dict[str, Any], Path]:
    """What an experiment's ``plot`` starts from: pyplot (Agg), the run's saved
    parameters (plan.json ``params``) and its ``plots/`` directory (created)."""
    return typed_run_plots(run_dir, _saved_params)


def typed_run_plots(run_dir: str | Path,
                    load_params: Callable[[Path], P]) -> tuple[Any, P, Path]:
    """:func:`run_plots` with the parameters as ``load_params`` reads them
    from the run directory (an experiment's ``Params``, with the defaults
    older runs lack)."""
    out = Path(run_dir) / "plots"
    params = load_params(Path(run_dir))
    out.mkdir(parents=True, exist_ok=True)
    return plt, params, out


def _saved_params(run_dir: Path) -> dict[str, Any]:
    import json

    return dict(json.loads((run_dir / "plan.json").read_text())["params"])


def flow_timeline(data: PhaseData, out: Path, *, title: str, port: int | None,
                  line_rate_bps: float | None = None, thresholds: Sequence[float] = (),
                  queue_limit: int | None = None, rate_window_s: float = 0.1) -> Path:
    t0 = data.start_ns()
    fig, (ax_r, ax_q, ax_c, ax_d) = plt.subplots(4, 1, figsize=(9, 10.5), sharex=True)
    colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    for i, flow in enumerate(data.flows()):
        c = colors[i % len(colors)]
        rx = counter_points(data.flow_events(flow, "rx"), "rx_bytes", t0)
        ts, rs = rate_series(rx, rate_window_s)
        ax_r.plot(ts, [r * 8 / 1e6 for r in rs], color=c, label=f"{flow} delivered")
        rate = [((e["t_ns"] - t0) / 1e9, e["rc_bps"] / 1e6) for e in data.flow_events(flow, "rate")]
        if rate:
            ax_r.step([t for t, _ in rate], [r for _, r in rate], where="post", color=c,
                      linestyle="--", linewidth=0.9, label=f"{flow} DCQCN rate")
        cnps = [(e["t_ns"] - t0) / 1e9 for e in data.flow_events(flow, "cnp_rx")]
        if cnps:
            ax_c.step(cnps, range(1, len(cnps) + 1), where="post", color=c,
                      label=f"{flow} CNPs received")
            ax_c.plot(cnps, [0] * len(cnps), "|", color=c, markersize=10)
        for kind, key, style, what in (("retransmit", "packets", "-.", "packets retransmitted"),
                                       ("cnp_tx", "count", ":", "CNPs sent (receiver)")):
            pts = _running_total(data.flow_events(flow, kind), key, t0)
            if pts:
                ax_c.step([t for t, _ in pts], [v for _, v in pts], where="post", color=c,
                          linestyle=style, label=f"{flow} {what}")
    if line_rate_bps:
        ax_r.axhline(line_rate_bps / 1e6, color="grey", linewidth=0.8, linestyle=":",
                     label="bottleneck")
    ax_r.set_ylabel("rate (Mb/s)")
    ax_r.set_ylim(bottom=0)
    ax_r.legend(fontsize=7, loc="lower right")
    ax_r.set_title(title)
    if port is not None:
        pts = [((s["t_ns"] - t0) / 1e9, s["queues"].get(str(port), 0)) for s in data.switch]
        if pts:
            ax_q.step([t for t, _ in pts], [q for _, q in pts], where="post", color="black",
                      linewidth=0.9, label=f"port {port} queue (sampled)")
        for th, name in zip(thresholds, ("Kmin", "Kmax"), strict=False):
            ax_q.axhline(th, color="tab:orange", linestyle="--", linewidth=0.8, label=name)
        if queue_limit is not None:
            ax_q.axhline(queue_limit, color="tab:red", linestyle=":", linewidth=0.8,
                         label="queue limit")
        wm = (data.stats.get("qdepth_max") or {}).get(str(port))
        if wm is not None:
            ax_q.set_title(f"largest enqueue depth seen by the pipeline: {wm} packets",
                           fontsize=8)
        ax_q.legend(fontsize=7, loc="upper right")
    ax_q.set_ylabel("queue (packets)")
    ax_q.set_ylim(bottom=0)
    ax_c.set_ylabel("CNPs, retransmissions\n(cumulative)")
    ax_c.set_xlim(left=-0.1)
    if ax_c.get_legend_handles_labels()[0]:
        ax_c.legend(fontsize=7, loc="upper left")
    else:
        ax_c.text(0.5, 0.5, "no CNPs, no retransmissions", transform=ax_c.transAxes,
                  ha="center")
    dcqcn_panel(ax_d, data, t0, colors)
    ax_d.set_xlabel("time since start (s)")
    # fixed margins: the panels and labels are always the same, and
    # tight_layout would measure every tick label again (a third of the time)
    fig.subplots_adjust(left=0.09, right=0.93, bottom=0.05, top=0.97, hspace=0.2)
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=100)
    plt.close(fig)
    return out


def phase_timelines(run_dir: str | Path, phases: Iterable[tuple[str, str]], *,
                    port: int | None, line_rate_bps: float | None = None,
                    thresholds: Sequence[float] = (), queue_limit: int | None = None,
                    rate_window_s: float = 0.1, workers: int | None = None) -> list[Path]:
    """A :func:`flow_timeline` of each of a run's phases, all on the same
    bottleneck (``port``, its rate, RED thresholds and queue limit):
    ``phases`` gives each phase's name and its figure's title; the figures
    are ``plots/<phase>.png``, returned in the order of ``phases``.

    The figures are drawn by ``workers`` processes (default: one per CPU):
    the run is over, its network down, and a dozen figures take a few
    seconds each on one core."""
    jobs = [(str(run_dir), name, title, port, line_rate_bps, tuple(thresholds), queue_limit,
             rate_window_s) for name, title in phases]
    n = min(len(jobs), workers or os.cpu_count() or 1)
    # fork copies this process with matplotlib loaded (no second start-up),
    # safe only while no other thread could hold a lock at the fork
    if n > 1 and threading.active_count() == 1 and "fork" in mp.get_all_start_methods():
        with ProcessPoolExecutor(max_workers=n, mp_context=mp.get_context("fork")) as ex:
            return list(ex.map(_draw_phase, jobs))
    return [_draw_phase(job) for job in jobs]


def _draw_phase(job: tuple[str, str, str, int | None, float | None, tuple[float, ...],
                           int | None, float]) -> Path:
    run_dir, name, title, port, line_rate_bps, thresholds, queue_limit, rate_window_s = job
    return flow_timeline(load_phase(run_dir, name), Path(run_dir) / "plots" / f"{name}.png",
                         title=title, port=port, line_rate_bps=line_rate_bps,
                         thresholds=thresholds, queue_limit=queue_limit,
                         rate_window_s=rate_window_s)


# Marker per reaction-point event: cuts, then increases by stage.
_DCQCN_MARKERS = {"cut": ("v", "cut"), "fast_recovery": (".", "fast recovery"),
                  "additive": ("^", "additive increase"), "hyper": ("*", "hyper increase")}


def _running_total(events: Iterable[dict[str, Any]], key: str, t0: int
                   ) -> list[tuple[float, int]]:
    """(seconds since t0, the sum of ``key`` over the events so far), per event."""
    n = 0
    pts = []
    for e in events:
        n += e[key]
        pts.append(((e["t_ns"] - t0) / 1e9, n))
    return pts


def dcqcn_panel(ax: Axes, data: PhaseData, t0: int, colors: Sequence[str]) -> None:
    """Per sending QP: Rc (solid) and Rt (dotted) in Mb/s after every DCQCN event,
    one marker per event (cut, or increase by stage), alpha on a right axis."""
    ax_a = ax.twinx()
    any_events = False
    for i, flow in enumerate(data.flows()):
        evs = data.flow_events(flow, "dcqcn")
        if not evs:
            continue
        any_events = True
        c = colors[i % len(colors)]
        ts = [(e["t_ns"] - t0) / 1e9 for e in evs]
        ax.step(ts, [e["rc_bps"] / 1e6 for e in evs], where="post", color=c, linewidth=0.9,
                label=f"{flow} Rc")
        ax.step(ts, [e["rt_bps"] / 1e6 for e in evs], where="post", color=c, linewidth=0.8,
                linestyle=":", label=f"{flow} Rt")
        for key, (marker, name) in _DCQCN_MARKERS.items():
            sel = [(t, e["rc_bps"] / 1e6) for t, e in zip(ts, evs, strict=True)
                   if (e["kind"] == "cut") == (key == "cut") and e.get("stage", "cut") == key]
            if sel:
                ax.plot([t for t, _ in sel], [r for _, r in sel], marker, color=c,
                        markersize=6 if key == "cut" else 4, linestyle="none",
                        label=f"{flow} {name} ({len(sel)})")
        ax_a.plot(ts, [e["alpha"] for e in evs], color=c, linewidth=0.6, alpha=0.5,
                  linestyle="--")
    ax.set_ylabel("DCQCN rate (Mb/s)")
    ax.set_ylim(bottom=0)
    ax_a.set_ylabel("alpha (dashed)")
    ax_a.set_ylim(0, 1.05)
    if any_events:
        ax.legend(fontsize=6, loc="lower right", ncol=2)
    else:
        ax.text(0.5, 0.5, "no DCQCN cuts or increases", transform=ax.transAxes, ha="center")


def collective_timeline(data: PhaseData, out: Path, *, title: str) -> Path:
    """Ring steps per rank: a bar from step start to step end."""
    t0 = data.start_ns()
    # a step by (rank, seq, channel, step) -> its start (s)
    starts: dict[tuple[int | None, int | None, int | None, int | None], float] = {}
    fig, ax = plt.subplots(figsize=(9, 4))
    colors = {"RS": "tab:blue", "AG": "tab:green"}
    ranks = set()
    for e in data.all_events():
        key = (e.get("rank"), e.get("seq"), e.get("channel"), e.get("step"))
        if e.get("event") == "step_start":
            starts[key] = (e["t_ns"] - t0) / 1e9
        elif e.get("event") == "step_end" and key in starts:
            s = starts.pop(key)
            r = e["rank"]
            ranks.add(r)
            ax.barh(r, (e["t_ns"] - t0) / 1e9 - s, left=s, height=0.6,
                    color=colors.get(str(e.get("phase")), "grey"), edgecolor="white", linewidth=0.3)
    ax.set_yticks(sorted(ranks))
    ax.set_ylabel("rank")
    ax.set_xlabel("time since start (s)")
    ax.set_xlim(left=-0.05)
    ax.set_title(title + "  (blue: reduce-scatter steps, green: all-gather steps)", fontsize=9)
    return save_figure(fig, out, dpi=100)


def algbw_panel(ax: Axes, sizes_bytes: Sequence[int], algbw: Mapping[str, Sequence[float]],
                ideal_fraction: dict[str, float], labels: dict[str, str], link_mbps: float,
                *, title: str, title_size: float | None = None) -> None:
    """Algorithm throughput against message size, one line per scheme, each
    with its ideal (a fraction of ``link_mbps``) dotted in the same colour."""
    sizes_kib = [s / 1024 for s in sizes_bytes]
    for s, label in labels.items():
        line, = ax.plot(sizes_kib, algbw[s], marker="o", label=label)
        ax.axhline(ideal_fraction[s] * link_mbps, color=line.get_color(), linestyle=":",
                   linewidth=0.9)
    ax.set_xscale("log", base=2)
    ax.set_xlabel("message size (KiB)")
    ax.set_ylabel("algorithm throughput (Mb/s)")
    if title_size is None:
        ax.set_title(title)
    else:
        ax.set_title(title, fontsize=title_size)
    ax.grid(True, alpha=0.3)


def measured_beside_reference(ax: Axes, names: Sequence[str], measured: Sequence[float],
                              reference: Sequence[float], *, measured_label: str,
                              reference_label: str, title: str) -> None:
    """Paired bars: each measured figure beside its reference (the paper's
    value or a model's)."""
    xs = range(len(names))
    ax.bar([x - 0.2 for x in xs], measured, 0.4, label=measured_label)
    ax.bar([x + 0.2 for x in xs], reference, 0.4, label=reference_label)
    ax.set_title(title)
    ax.grid(True, axis="y", alpha=0.3)
