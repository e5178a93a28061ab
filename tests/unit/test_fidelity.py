"""The fidelity verdict as a list of checks (testbed.fidelity.CHECKS): what a
check finds reaches the verdict, its text and its lists, in the checks' order.
The checks' own figures are tested on synthetic runs in test_runner.py."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from test_experiment import write_roce_basics_run

from experiments import roce_basics
from switches.targets import SOFT
from testbed import fidelity
from testbed.fidelity import FAIL, NOT_MEASURED, PASS, evaluate_fidelity

# every finding of a faithful soft-switch run on udp hosts, in the verdict's order
ORDER = ["switch_lag_mean_us", "switch_lag_max_us", "switch_kernel_drops",
         "switch_ingress_order", "switch_arrival_timing", "switch_sampling",
         "host_pacing_late_fraction", "host_receive_lag", "host_tx_drops",
         "congestion_without_overload"]


@pytest.fixture(scope="module")
def faithful_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    run_dir = tmp_path_factory.mktemp("faithful")
    write_roce_basics_run(run_dir, roce_basics.Params.quick())
    return run_dir


def _judge(run_dir: Path) -> dict[str, Any]:
    return evaluate_fidelity(run_dir, roce_basics.plan(roce_basics.Params.quick()))


def _as(status: str, check: Callable[..., list[fidelity.Finding]]) -> Callable[..., Any]:
    """``check`` with every finding of it turned to ``status``."""
    def judged(figures: Any) -> list[fidelity.Finding]:
        return [(name, {**rec, "status": status, "why": f"{name} made {status}"})
                for name, rec in check(figures)]
    return judged


def test_a_faithful_run_has_every_check_pass_in_order(faithful_run: Path) -> None:
    f = _judge(faithful_run)
    assert list(f["checks"]) == ORDER
    assert {c["status"] for c in f["checks"].values()} == {PASS}
    assert f["text"] == "faithful"


@pytest.mark.parametrize("index", range(len(fidelity.CHECKS)))
def test_a_checks_failure_reaches_the_verdict(faithful_run: Path, index: int,
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    check = fidelity.CHECKS[index]
    plan = roce_basics.plan(roce_basics.Params.quick())
    own = [name for name, _rec in check(fidelity._gather(faithful_run, plan, SOFT, "udp"))]
    checks = list(fidelity.CHECKS)
    checks[index] = _as(FAIL, check)
    monkeypatch.setattr(fidelity, "CHECKS", tuple(checks))
    f = _judge(faithful_run)
    assert own and f["failed"] == own            # this check's findings alone
    assert f["verdict"] == "not faithful" and f["ok"] is False
    assert f["text"].startswith("not faithful - failed: " + own[0] + ": ")
    assert all(f"{n}: " in f["text"] for n in own) and f["not_measured"] == {}
    assert list(f["checks"]) == ORDER            # the others still judged, in place


def test_a_check_that_could_not_measure_is_listed_and_does_not_decide(
        faithful_run: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(fidelity, "CHECKS", tuple(
        _as(NOT_MEASURED, c) if c is fidelity.CHECKS[-1] else c for c in fidelity.CHECKS))
    f = _judge(faithful_run)
    assert f["ok"] and f["failed"] == []
    assert f["not_measured"] == {
        "congestion_without_overload": "congestion_without_overload made not measured"}
    assert f["text"] == "faithful - not measured: congestion_without_overload"


def test_every_check_failing_lists_them_in_the_verdicts_order(
        faithful_run: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(fidelity, "CHECKS", tuple(_as(FAIL, c) for c in fidelity.CHECKS))
    f = _judge(faithful_run)
    assert f["failed"] == ORDER
    assert f["text"].index("switch_lag_mean_us: ") < f["text"].index("host_tx_drops: ")
