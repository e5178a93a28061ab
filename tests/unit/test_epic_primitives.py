"""epic-primitives as data: its plan (one sequence of primitives per scheme on
one communicator), the ideal model, and the analysis of a recorded run."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from experiments import epic_primitives as ex
from testbed.claims import lookup
from testbed.summary import results_json


def test_plan_runs_the_same_sequence_through_the_switch_and_the_host_ring() -> None:
    p = ex.Params.quick()
    plan = ex.plan(p)
    assert [ph.name for ph in plan.phases] == ["warmup", "epic", "ring"]
    _, epic, ring = plan.phases
    assert epic.epic_group and ring.epic_group is None
    a, b = epic.jobs["h3"].collective, ring.jobs["h3"].collective
    assert a is not None and b is not None
    assert a.scheme == "epic" and b.scheme == "ring" and a.sequence() == b.sequence()
    assert [op for op, _ in a.sequence()] == [
        "reduce", "broadcast", "reduce_scatter", "all_gather"] + ["barrier"] * p.barriers
    words = p.size_kib * 256
    assert [c for _, c in a.sequence()][:4] == [words, words, words, words // p.ranks]
    assert {ph.name: next(iter(ph.jobs.values())).transport.path_mtu
            for ph in plan.phases} == {"warmup": 256, "epic": 256, "ring": 1024}


def test_params_are_checked() -> None:
    with pytest.raises(ValueError, match="root"):
        ex.Params(root=8)
    with pytest.raises(ValueError, match="split evenly"):
        ex.Params(ranks=3, size_kib=1)
    with pytest.raises(ValueError, match="ranks"):
        ex.Params(ranks=16)


def test_ideal_model() -> None:
    epic = ex.ideal_fraction("reduce", "epic", 8)
    assert epic == pytest.approx(256 / 314)
    # a chain of 8 pieces per rank: 64 pieces take 70 piece times
    assert ex.ideal_fraction("broadcast", "ring", 8) == pytest.approx(1024 / 1082 * 64 / 70)
    # a ring sends (N-1)/N of the message per rank
    assert ex.ideal_fraction("all_gather", "ring", 8) == pytest.approx(1024 / 1082 * 8 / 7)


def _write_phase(d: Path, p: ex.Params, scheme: str, seconds: dict[str, float]) -> None:
    seq = [op for op, _ in p.sequence() for _ in range(p.iterations)]
    pdir = d / "phases" / scheme
    pdir.mkdir(parents=True)
    for r in range(p.ranks):
        lines = []
        t = 1_000_000_000
        for i, op in enumerate(seq):
            # rank r enters r us late; the collective ends together for all
            start = t + r * 1000
            end = t + int(seconds[op] * 1e9)
            lines.append({"event": "collective_end", "seq": i, "t_start_ns": start, "t_ns": end})
            lines.append({"event": "collective_check", "iteration": i, "op": op, "ok": True,
                          "t_ns": end})
            t = end
        (pdir / f"h{r + 1}.events.jsonl").write_text(
            "\n".join(json.dumps(e) for e in lines) + "\n")


def test_analysis_of_a_recorded_run(tmp_path: Path) -> None:
    p = ex.Params(ranks=4, size_kib=16, iterations=2, barriers=3, warmup_kib=0)
    (tmp_path / "plan.json").write_text(json.dumps({"params": p.__dict__, "phases": []}))
    msg = 16 * 1024 * 8 / 0.5e6      # the message's time at the link rate
    _write_phase(tmp_path, p, "epic", {"reduce": msg, "broadcast": msg, "reduce_scatter": msg,
                                       "all_gather": msg, "barrier": 0.004})
    _write_phase(tmp_path, p, "ring", {"reduce": msg, "broadcast": 2 * msg,
                                       "reduce_scatter": msg / 2, "all_gather": msg,
                                       "barrier": 0.040})
    s = results_json(ex.analyze(tmp_path))
    assert s["bit_exact"] is True
    assert s["link_fraction"]["reduce"]["epic"] == pytest.approx(1.0, rel=1e-3)
    assert s["ratio_broadcast"] == pytest.approx(2.0, rel=1e-3)
    assert s["ratio_reduce_scatter"] == pytest.approx(0.5, rel=1e-3)
    assert s["ratio_reduce"] == pytest.approx(1.0, rel=1e-3)
    # the barrier is timed from the last rank entering (3 us late) to the end
    assert s["barrier_ms"]["epic"] == pytest.approx(4.0 - 0.003, abs=1e-3)
    assert s["barrier_ratio"] == pytest.approx((40 - 0.003) / (4 - 0.003), rel=1e-3)
    for c in ex.CLAIMS:
        assert lookup(s, c.key) is not None and c.paper == ex.PAPER[c.key]
