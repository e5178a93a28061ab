"""The soft switch's statistics during a phase: a thread sampling them into
``switch.jsonl`` (``switch-<name>.jsonl`` per switch of a fabric), the
figures read before and after, and a fabric's switches pooled as one for
the fidelity checks."""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path
from typing import TYPE_CHECKING

from switches.targets import Target
from testbed.fidelity import arrivals_behind_clock, rx_out_of_order

if TYPE_CHECKING:
    from switches.controller.api import Controller
    from switches.node import P4SwitchNode
    from testbed.timeline import SwitchCounters


class SwitchPoller(threading.Thread):
    """Samples the switch (``switch_sample``, switches/soft/daemon.py) every
    ``interval`` s into a JSONL file, each line with its time ``t_ns``."""

    def __init__(self, control_port: int, path: Path, interval: float) -> None:
        super().__init__(name="switch-poller", daemon=True)
        self.port = control_port
        self.path = path
        self.interval = interval
        self.stop_event = threading.Event()
        self.error: str | None = None
        self.samples = 0

    def run(self) -> None:
        from switches.soft.control.client import SwitchClient
        from switches.soft.daemon import SAMPLE_COMMAND

        client = SwitchClient(self.port, timeout=5.0)
        try:
            with open(self.path, "a", buffering=1) as f:
                while not self.stop_event.is_set():
                    t0 = time.monotonic_ns()
                    sample = json.loads(client.execute(SAMPLE_COMMAND))
                    t1 = time.monotonic_ns()
                    f.write(json.dumps({"t_ns": (t0 + t1) // 2, **sample},
                                       separators=(",", ":")) + "\n")
                    self.samples += 1
                    self.stop_event.wait(self.interval)
        except Exception as e:  # the switch went away: the main loop reports it
            self.error = f"{type(e).__name__}: {e}"
        finally:
            client.close()

    def stop(self) -> None:
        self.stop_event.set()
        self.join(timeout=5)


def read_registers(ctl: Controller, names: tuple[str, ...]) -> dict[str, dict[str, int]]:
    """Each whole register of ``names``: its non-zero entries by index (a
    ControllerError names the register that could not be read)."""
    out: dict[str, dict[str, int]] = {}
    for name in names:
        values = ctl.register_read(name)
        assert isinstance(values, list)         # a whole register (no index)
        out[name] = {str(i): v for i, v in enumerate(values) if v}
    return out


def _switch_stats(sw: P4SwitchNode, target: Target) -> SwitchCounters:
    """The switch's statistics; a target that reports none (BMv2) gives {}."""
    if not target.reports_stats:
        return {}
    result: SwitchCounters = sw.stats()
    return result


def merge_switch_stats(per_switch: dict[str, SwitchCounters]) -> SwitchCounters:
    """The statistics of a fabric's switches as one switch's, for the fidelity
    checks: processing-lag samples pooled (count, weighted mean, maximum),
    kernel drops, frames received out of order and frames taken behind the
    queues' clock summed; per-port figures stay per switch."""
    n = sum(s.get("lag_us", {}).get("samples", 0) for s in per_switch.values())
    total = sum(s.get("lag_us", {}).get("mean", 0) * s.get("lag_us", {}).get("samples", 0)
                for s in per_switch.values())
    if not any(per_switch.values()):
        return {}
    merged: SwitchCounters = {
        "lag_us": {"samples": n, "mean": total / n if n else 0.0,
                   "max": max((s.get("lag_us", {}).get("max", 0)
                               for s in per_switch.values()), default=0)},
        "kernel_drops": sum(s.get("kernel_drops", 0) for s in per_switch.values())}
    ooo = [rx_out_of_order(s) for s in per_switch.values()]
    if ooo and all(v is not None for v in ooo):
        merged["rx_out_of_order"] = sum(v for v in ooo if v is not None)
    behind = [arrivals_behind_clock(s) for s in per_switch.values()]
    if behind and all(b is not None for b in behind):
        known = [b for b in behind if b is not None]
        merged["rx_behind_clock"] = sum(b[0] for b in known)
        merged["rx_frames"] = sum(b[1] for b in known)
        merged["rx_behind_clock_max_us"] = max(b[2] for b in known)
    return merged


def poll_file(switch: str, fabric: bool) -> str:
    """A phase's statistics samples of ``switch``: ``switch.jsonl`` for the one
    switch of a star, ``switch-<name>.jsonl`` per switch of a fabric."""
    return f"switch-{switch}.jsonl" if fabric else "switch.jsonl"
