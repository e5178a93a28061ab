"""The runner's parts that need no network: fidelity verdicts, switch samples,
summary keys, environment checks and the run / list / plot commands."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner
from test_experiment import write_roce_basics_run

from experiments import roce_basics
from testbed.cli import doctor_report
from testbed.cli import main as cli_main
from testbed.runner import (
    RunError,
    _flatten,
    check_environment,
    evaluate_fidelity,
    replot,
    switch_sample,
)


def _fidelity(tmp_path: Path, **switch_kwargs: object) -> dict:
    p = roce_basics.Params.quick()
    write_roce_basics_run(tmp_path, p, switch_kwargs=switch_kwargs)
    return evaluate_fidelity(tmp_path, roce_basics.plan(p))


def test_fidelity_ok_records_the_numbers(tmp_path: Path) -> None:
    f = _fidelity(tmp_path)
    assert f["ok"] is True
    c = f["checks"]
    # Each phase: lag mean 100 us over 10 samples before, 200 us over 30 after:
    # the phase's own 20 samples averaged 250 us.
    assert c["switch_lag_mean_us"]["value"] == pytest.approx(250.0)
    assert f["switch_lag_samples"] == 60
    assert c["switch_lag_max_us"]["value"] == 900
    assert c["switch_kernel_drops"]["value"] == 0
    assert c["host_pacing_late_fraction"]["value"] == pytest.approx(0.01)
    assert len(f["senders"]) == 4  # single, pair-a, pair-b, loss


def test_fidelity_flags_a_switch_that_did_not_keep_up(tmp_path: Path) -> None:
    f = _fidelity(tmp_path, kernel_drops=3)
    assert f["ok"] is False and f["checks"]["switch_kernel_drops"]["value"] == 9
    other = tmp_path / "other"
    other.mkdir()
    f = _fidelity(other, lag=(100, 10, 5000, 30))
    assert f["ok"] is False
    assert f["checks"]["switch_lag_mean_us"]["ok"] is False


def test_switch_sample_keeps_what_timelines_need() -> None:
    stats = {"switch": {"queues": {"3": {"queues": [{"depth": 4, "drops": 1},
                                                    {"depth": 2, "drops": 0}]}},
                        "tx_bytes": {"3": 1000}, "rx_bytes": {}, "drops": {"tm_full": 1}},
             "lag_us": {"mean": 10, "max": 20, "samples": 3}, "kernel_drops": 0, "cpu_s": 1.0}
    s = switch_sample(stats, 123)
    assert s == {"t_ns": 123, "queues": {"3": 6}, "queue_drops": {"3": 1},
                 "tx_bytes": {"3": 1000}, "rx_bytes": {}, "drops": {"tm_full": 1},
                 "lag_us": {"mean": 10, "max": 20, "samples": 3}, "kernel_drops": 0}


def test_flat_dotted_keys() -> None:
    flat = _flatten({"single": {"goodput_fraction": 0.99, "x": {"y": 1}, "l": [1]},
                     "fidelity_ok": True})
    assert flat == {"single.goodput_fraction": 0.99, "single.x.y": 1, "fidelity_ok": True}


def test_missing_targets_and_providers_are_clear_errors() -> None:
    rep = doctor_report()
    if not rep["targets"]["bmv2"]:
        with pytest.raises(RunError, match="bmv2.*not installed here.*testbed doctor"):
            check_environment("bmv2", "udp", need_network=False)
    if not rep["providers"]["rxe"]:
        with pytest.raises(RunError, match="rxe is not available here.*testbed doctor"):
            check_environment("soft", "rxe", need_network=False)
    check_environment("soft", "udp", need_network=False)
    with pytest.raises(RunError, match="unknown target"):
        check_environment("tofino", "udp", need_network=False)


def test_cli_list_shows_experiments_and_parameters() -> None:
    r = CliRunner().invoke(cli_main, ["list", "--params"])
    assert r.exit_code == 0, r.output
    assert "roce-basics" in r.output and "ring-allreduce" in r.output
    assert "bottleneck_mbps = 8.0  (quick: 4.0)" in r.output


def test_cli_run_rejects_unknown_experiments_and_parameters(tmp_path: Path) -> None:
    r = CliRunner().invoke(cli_main, ["run", "nope", "--out", str(tmp_path / "x")])
    assert r.exit_code == 2 and "unknown experiment 'nope'" in r.output
    r = CliRunner().invoke(cli_main, ["run", "roce-basics", "-p", "warp=9"])
    assert r.exit_code == 2 and "no parameter 'warp'" in r.output
    r = CliRunner().invoke(cli_main, ["run", "roce-basics", "-p", "oops"])
    assert r.exit_code == 2 and "NAME=VALUE" in r.output
    assert not (tmp_path / "x").exists()


def test_cli_run_on_bmv2_without_it_says_so(tmp_path: Path) -> None:
    if doctor_report()["targets"]["bmv2"]:
        pytest.skip("BMv2 is installed here")
    r = CliRunner().invoke(cli_main, ["run", "roce-basics", "--quick", "--target", "bmv2",
                                      "--out", str(tmp_path / "x")])
    assert r.exit_code == 1
    assert "bmv2" in r.output and "not installed here" in r.output
    assert not (tmp_path / "x").exists()


def test_cli_plot_redraws_a_saved_run(tmp_path: Path) -> None:
    write_roce_basics_run(tmp_path, roce_basics.Params.quick())
    r = CliRunner().invoke(cli_main, ["plot", str(tmp_path)])
    assert r.exit_code == 0, r.output
    for name in ("single", "pair", "loss"):
        assert f"plots/{name}.png" in r.output
        assert (tmp_path / "plots" / f"{name}.png").stat().st_size > 10_000
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(RunError, match="not a run directory"):
        replot(empty)
    r = CliRunner().invoke(cli_main, ["plot", str(empty)])
    assert r.exit_code == 1


def test_summary_json_of_the_plan_round_trips(tmp_path: Path) -> None:
    write_roce_basics_run(tmp_path, roce_basics.Params.quick())
    plan = json.loads((tmp_path / "plan.json").read_text())
    assert plan["experiment"] == "roce-basics"
    assert plan["params"] == json.loads(json.dumps(roce_basics.Params.quick().__dict__))
