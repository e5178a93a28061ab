"""Per-phase timeline figures: drawn in worker processes or here, the same
files; and the phase data's per-kind, per-flow index follows its events."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from testbed.plotting import phase_timelines
from testbed.timeline import PhaseData, load_phase

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def _events(flow: str, rate_mbps: float) -> list[dict[str, Any]]:
    ms = 1_000_000
    evs: list[dict[str, Any]] = [{"event": "start", "t_ns": 0},
                                 {"event": "flow_start", "t_ns": 0, "flow": flow,
                                  "role": "sender"}]
    for k in range(1, 40):
        t = k * 10 * ms
        evs.append({"event": "rate", "t_ns": t, "flow": flow, "rc_bps": rate_mbps * 1e6})
        evs.append({"event": "rx", "t_ns": t, "flow": flow,
                    "rx_bytes": int(rate_mbps * 1e6 / 8 * t / 1e9)})
    evs.append({"event": "dcqcn", "t_ns": 200 * ms, "flow": flow, "kind": "cut",
                "rc_bps": rate_mbps * 5e5, "rt_bps": rate_mbps * 1e6, "alpha": 0.5})
    evs.append({"event": "cnp_rx", "t_ns": 199 * ms, "flow": flow})
    return evs


def _run_dir(tmp_path: Path, phases: list[str]) -> Path:
    for i, name in enumerate(phases):
        d = tmp_path / "phases" / name
        d.mkdir(parents=True)
        for h, flow in (("h1", "a"), ("h2", "b")):
            (d / f"{h}.events.jsonl").write_text(
                "".join(json.dumps(e) + "\n" for e in _events(flow, 10.0 * (i + 1))))
        (d / "switch.jsonl").write_text("".join(
            json.dumps({"t_ns": k * 10_000_000, "queues": {"3": k % 7}}) + "\n"
            for k in range(40)))
    return tmp_path


@pytest.mark.parametrize("workers", [1, 2])
def test_every_phase_gets_its_figure_in_order(tmp_path: Path, workers: int) -> None:
    phases = ["p1", "p2", "p3"]
    run = _run_dir(tmp_path, phases)
    outs = phase_timelines(run, [(p, f"phase {p}") for p in phases], port=3,
                           line_rate_bps=40e6, thresholds=(5,), queue_limit=20,
                           workers=workers)
    assert outs == [run / "plots" / f"{p}.png" for p in phases]
    for out in outs:
        assert out.read_bytes()[:8] == PNG_MAGIC


def test_a_missing_phase_is_an_error_from_a_worker_too(tmp_path: Path) -> None:
    run = _run_dir(tmp_path, ["p1"])
    with pytest.raises(FileNotFoundError, match="nope"):
        phase_timelines(run, [("p1", "one"), ("nope", "two")], port=3, workers=2)


def test_the_event_index_follows_the_events(tmp_path: Path) -> None:
    run = _run_dir(tmp_path, ["p1"])
    data = load_phase(run, "p1")
    assert [e["flow"] for e in data.all_events("flow_start")] == ["a", "b"]
    rates = data.flow_events("a", "rate")
    assert len(rates) == 39 and all(e["flow"] == "a" for e in rates)
    assert [e["t_ns"] for e in rates] == sorted(e["t_ns"] for e in rates)
    # events added after a first look are seen by the next one
    data.events["h3"] = [{"event": "rate", "t_ns": 5, "flow": "a", "rc_bps": 1.0}]
    assert data.flow_events("a", "rate")[0]["t_ns"] == 5
    data.events["h1"].append({"event": "rate", "t_ns": 10**12, "flow": "a", "rc_bps": 2.0})
    assert data.flow_events("a", "rate")[-1]["t_ns"] == 10**12
    # a caller may change the list it got without changing the data
    data.flow_events("a", "rate").clear()
    assert len(data.flow_events("a", "rate")) == 41
    assert PhaseData("x", tmp_path).flow_events("a", "rate") == []
