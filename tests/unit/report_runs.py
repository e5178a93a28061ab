"""Run directories in testbed.runner's format for the report's tests: a
summary.json as the runner writes it (results nested and as flat dotted
keys, the fidelity record, versions, duration, plots) and real PNG figures,
with the measured values the test chooses for each declared claim."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

from testbed.claims import Claim  # noqa: E402
from testbed.runner import flatten_keys  # noqa: E402

VERSIONS = {"python": "3.11.2", "pypy": "7.3.11 (Python 3.9.16)", "kernel": "6.1.0-test",
            "machine": "x86_64", "cpus": 2, "git_rev": "0123456789abcdef" * 2 + "01234567",
            "git_dirty": False}


def nested(values: dict[str, Any]) -> dict[str, Any]:
    """{"a.b": 1} -> {"a": {"b": 1}} (as an experiment's analyze returns them)."""
    out: dict[str, Any] = {}
    for key, v in values.items():
        node = out
        *parents, last = key.split(".")
        for p in parents:
            node = node.setdefault(p, {})
        node[last] = v
    return out


def claim_values(claims: tuple[Claim, ...], value: Callable[[Claim], float | list[float]]
                 ) -> dict[str, Any]:
    """Each claim's key (or its per-seed key, for a list) set to ``value(claim)``."""
    out: dict[str, Any] = {}
    for c in claims:
        v = value(c)
        if isinstance(v, list):
            out[c.per_seed or c.key] = v
            out[c.key] = sum(v) / len(v)
        else:
            out[c.key] = v
    return out


def write_plot(path: Path, title: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fig, ax = plt.subplots(figsize=(4, 2.5))
    ax.plot([0, 1, 2, 3], [0, 1, 0.5, 1.5], marker="o")
    ax.set_title(title)
    fig.tight_layout()
    fig.savefig(path, dpi=60)
    plt.close(fig)


def write_run(run_dir: Path, experiment: str, values: dict[str, Any], *, faithful: bool = True,
              quick: bool = True, ok: bool = True, plots: tuple[str, ...] = ("timeline.png",),
              duration_s: float = 42.0, error: str | None = None,
              overrides: dict[str, str] | None = None, profile: str | None = None,
              params: dict[str, Any] | None = None) -> Path:
    """A finished (or, with ``ok=False``, failed) run of ``experiment`` whose
    results are ``values`` (dotted keys); ``profile`` (default: quick or full by
    ``quick``) and ``params`` as the runner records them."""
    run_dir.mkdir(parents=True)
    results = nested(values)
    failed = [] if faithful else ["host_pacing_late_fraction"]
    text = "faithful" if faithful else (
        "not faithful - failed: host_pacing_late_fraction: 0.08 (limit 0.05)")
    summary: dict[str, Any] = {
        "experiment": experiment, "ok": ok, "quick": quick, "target": "soft", "hosts": "udp",
        "profile": profile or ("quick" if quick else "full"),
        "pcap": False, "run_dir": str(run_dir), "started": "2026-11-30T12:00:00+00:00",
        "params": params or {}, "overrides": overrides or {}, "versions": dict(VERSIONS),
        "duration_s": duration_s,
    }
    if ok:
        summary.update(results)
        summary.update(flatten_keys(results))
        summary["fidelity"] = {"verdict": "faithful" if faithful else "not faithful",
                               "ok": faithful, "failed": failed, "not_measured": {},
                               "checks": {}, "warmup": {}, "text": text}
        summary["fidelity_ok"] = faithful
        summary["fidelity_verdict"] = text
        summary["plots"] = [f"plots/{p}" for p in plots]
        for p in plots:
            write_plot(run_dir / "plots" / p, f"{experiment} {p}")
    else:
        summary["error"] = error or "run failed: agent h1 exited with status 1"
    (run_dir / "summary.json").write_text(json.dumps(summary, indent=1))
    return run_dir
