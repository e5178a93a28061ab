"""Several runs in sequence (``testbed run all``, ``testbed report``): each into
its own directory, failures recorded without stopping the rest, one progress
display."""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any

import pytest

from testbed.runner import RunError, RunOptions
from testbed.suite import SuiteProgress, format_table, run_suite


def fake_runner(fail: set[str]) -> Any:
    calls: list[tuple[str, Path | None]] = []

    def runner(name: str, opts: RunOptions) -> dict[str, Any]:
        calls.append((name, opts.out))
        opts.echo(f"[   0.1s] {name}: phase one")
        if name in fail:
            raise RunError(f"agent h1 of {name} exited with status 1\ntail of its log")
        return {"duration_s": 1.0, "fidelity_ok": name != "b",
                "fidelity_verdict": "faithful" if name != "b" else "not faithful - x"}

    runner.calls = calls  # type: ignore[attr-defined]
    return runner


def test_every_run_goes_to_its_own_directory_and_failures_do_not_stop_the_rest(
        tmp_path: Path) -> None:
    runner = fake_runner({"c"})
    out = io.StringIO()
    runs = run_suite(["a", "b", "c", "d"], tmp_path, RunOptions(quick=True),
                     progress=SuiteProgress(4, out, live=False), runner=runner)
    assert [c[0] for c in runner.calls] == ["a", "b", "c", "d"]
    assert [c[1] for c in runner.calls] == [tmp_path / n for n in "abcd"]
    assert [(r.name, r.ok, r.fidelity_ok) for r in runs] == [
        ("a", True, True), ("b", True, False), ("c", False, None), ("d", True, True)]
    assert "exited with status 1" in runs[2].error
    text = out.getvalue()
    # the runs' own lines carry which run of how many
    assert "[3/4 c 0:00 | all 0:00] [   0.1s] c: phase one" in text
    assert "[2/4] b: 0:00, NOT faithful" in text
    assert "[3/4] c: 0:00, FAILED: agent h1 of c exited with status 1\n" in text
    table = format_table(runs, 75.0)
    assert "b" in table and "NOT faithful: not faithful - x" in table
    assert "total" in table and "1:15" in table


def test_repeats_are_numbered_and_a_terminal_gets_one_line_rewritten(tmp_path: Path) -> None:
    runner = fake_runner(set())
    out = io.StringIO()
    runs = run_suite(["a"], tmp_path, RunOptions(), repeat=2,
                     progress=SuiteProgress(2, out, live=True), runner=runner)
    assert [c[1] for c in runner.calls] == [tmp_path / "a-1", tmp_path / "a-2"]
    assert len(runs) == 2
    text = out.getvalue()
    assert "\r\x1b[K[1/2 a #1" in text and "\r\x1b[K[2/2 a #2" in text
    # only the finished runs' lines end lines
    assert text.count("\n") == 2
    with pytest.raises(ValueError, match="repeat"):
        run_suite(["a"], tmp_path, RunOptions(), repeat=0, runner=runner)


def test_the_record_has_command_commit_machine_and_every_runs_time(tmp_path: Path) -> None:
    import json

    from testbed.suite import write_record

    runs = run_suite(["a", "b"], tmp_path, RunOptions(),
                     progress=SuiteProgress(2, io.StringIO(), live=False),
                     runner=fake_runner({"b"}))
    rec = write_record(tmp_path / "suite.json", runs, 123.4, "testbed run all --quick",
                       (0.5, 1.0, 1.5))
    assert json.loads((tmp_path / "suite.json").read_text()) == rec
    assert rec["command"] == "testbed run all --quick" and rec["total_s"] == 123.4
    assert {"cpus", "kernel", "python", "load_avg_end"} <= set(rec["machine"])
    assert rec["machine"]["load_avg_start"] == [0.5, 1.0, 1.5]
    assert [(r["experiment"], r["ok"]) for r in rec["results"]] == [("a", True), ("b", False)]
    assert "exited with status 1" in rec["results"][1]["error"]


def test_a_run_stopped_by_sigterm_stops_the_suite(tmp_path: Path) -> None:
    from testbed.runner import RunTerminated

    calls: list[str] = []

    def runner(name: str, opts: RunOptions) -> dict[str, Any]:
        calls.append(name)
        if name == "b":
            raise RunTerminated("run terminated by signal SIGTERM; network torn down")
        return {"fidelity_ok": True, "fidelity_verdict": "faithful"}

    with pytest.raises(RunTerminated, match="SIGTERM"):
        run_suite(["a", "b", "c"], tmp_path, RunOptions(),
                  progress=SuiteProgress(3, io.StringIO(), live=False), runner=runner)
    assert calls == ["a", "b"]


def test_a_trial_stopped_by_sigterm_ends_the_host_benchmark(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import testbed.runner
    from testbed.bench_hosts import hosts_bench
    from testbed.runner import RunTerminated

    tried: list[str] = []

    def fake_run(name: str, opts: RunOptions) -> dict[str, Any]:
        tried.append(opts.overrides["bottleneck_mbps"])
        if len(tried) == 2:
            raise RunTerminated("run terminated by signal SIGTERM; network torn down")
        raise RunError("the agents failed")     # a failed trial: the search goes on

    monkeypatch.setattr(testbed.runner, "run", fake_run)
    with pytest.raises(RunTerminated):
        hosts_bench(("lone_qp",), start_mbps=8, out_dir=tmp_path)
    assert tried == ["8", "4"]
