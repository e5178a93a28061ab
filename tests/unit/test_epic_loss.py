"""epic-loss as data: its phases (own switch groups, loss set in both P4
tables), the paper's model, and the analysis of a recorded run."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from experiments import epic_loss as ex
from hosts.commlib.epic import group_count
from testbed.summary import results_json


def test_every_loss_is_a_phase_with_its_own_groups_and_both_loss_tables() -> None:
    p = ex.Params()
    plan = ex.plan(p)
    assert [ph.name for ph in plan.phases] == [
        "warmup", "loss-0", "loss-0.001", "loss-0.002", "loss-0.005", "loss-0.01"]
    gids = [ph.epic_group["gid"] for ph in plan.phases if ph.epic_group]
    assert gids == [i * group_count(8) for i in range(6)]
    assert plan.phases[-1].commands == (
        "table_set_default MyIngress.link_loss MyIngress.set_loss 100",
        "table_set_default MyEgress.link_loss MyEgress.set_loss 100")
    assert plan.phases[0].warmup and plan.phases[0].commands[0].endswith(" 0")
    # a lossy phase may wait out retransmission timeouts: a longer limit
    assert plan.phases[-1].timeout_s > plan.phases[1].timeout_s


def test_params_are_checked() -> None:
    with pytest.raises(ValueError, match="1/10000"):
        ex.Params(losses="0,0.00015")
    with pytest.raises(ValueError, match="switch groups"):
        ex.Params(losses="0,0.001,0.002,0.003,0.004,0.005,0.01")
    with pytest.raises(ValueError, match="comma-separated"):
        ex.Params(losses="0,x")


def test_model_is_the_papers() -> None:
    assert ex.model_relative(0.01, 8) == pytest.approx(0.99 ** 14)
    assert ex.PAPER["relative_at_1pct"] == pytest.approx(0.8687, abs=1e-4)
    assert ex.model_relative(0.0, 8) == 1.0


def test_analysis_of_a_recorded_run(tmp_path: Path) -> None:
    p = ex.Params(ranks=2, size_kib=4, iterations=1, losses="0,0.01", warmup_kib=0)
    (tmp_path / "plan.json").write_text(json.dumps({"params": p.__dict__, "phases": []}))
    for loss, seconds, rtos in ((0.0, 1.0, 0), (0.01, 4.0, 3)):
        d = tmp_path / "phases" / ex.phase_name(loss)
        d.mkdir(parents=True)
        for h in (1, 2):
            evs = [{"event": "collective_end", "seq": 0, "t_start_ns": 0,
                    "t_ns": int(seconds * 1e9)},
                   {"event": "collective_check", "iteration": 0, "ok": True, "sha256": "s",
                    "t_ns": 1},
                   {"event": "pacer_report", "t_ns": 2, "qp": {"retransmits": 2 * rtos,
                                                                "rto": rtos, "naks_rcvd": 1}}]
            (d / f"h{h}.events.jsonl").write_text("\n".join(map(json.dumps, evs)) + "\n")
    s = results_json(ex.analyze(tmp_path))
    assert s["relative"] == pytest.approx([1.0, 0.25], abs=1e-3)
    assert s["relative_at_1pct"] == pytest.approx(0.25, abs=1e-3)
    assert s["bit_exact"] is True and s["timeouts"] == [0, 6]
    assert s["model"][1] == pytest.approx(0.99 ** 2, abs=1e-4)


def test_quick_runs_the_claims_loss_on_faster_links_with_the_papers_timeout() -> None:
    q, full = ex.Params.quick(), ex.Params()
    assert q.loss_list() == [0.0, 0.01] and q.ranks == full.ranks == 8
    # the same modelled NIC and timeout; a timeout takes a quarter of the wall time
    assert q.nic_gbps == full.nic_gbps == 100.0
    assert q.link_mbps == 4 * full.link_mbps
