"""A report's runs in parallel: ``--jobs N`` processes on this machine or
the workers of a Dask scheduler (``--scheduler``) write the same run
directories as one run after the other; a run whose process or worker
fails is run once more, then reported as failed; Ctrl-C stops every run
and leaves no process behind; bad options are one line and exit 2."""

from __future__ import annotations

import io
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from proc_tree import descendants_of

from testbed.cli import main as cli_main
from testbed.report import collect_runs
from testbed.runner import RunOptions
from testbed.sim.pypy import find_pypy
from testbed.suite import SuiteProgress, run_suite, write_record

REPO = Path(__file__).resolve().parents[2]
# the two quickest experiments with claims on the virtual-time engine (a few s each)
QUICK_SET = ["epic-loss", "epic-tree"]
# runs that outlast the signal: QUICK_SET's take 3-4 s on the sim engine and
# could finish between the test's look at them and its signal
LONG_SET = ["reflex-cases", "reflex-workload"]
# what differs between two runs of the same plan: where and when they ran
WALL_CLOCK = {"run_dir", "started", "duration_s"}
SIM_WALL_CLOCK = {"wall_s", "packet_hops_per_s", "events_per_s"}

try:
    import distributed
except ImportError:          # the cluster extra is not installed
    distributed = None
needs_dask = pytest.mark.skipif(distributed is None,
                                reason="no Dask distributed (pip install -e '.[cluster]')")


def _report(out: Path, *extra: str) -> Path:
    r = CliRunner().invoke(cli_main, ["report", *QUICK_SET, "--engine", "sim", "--interpreter",
                                      "cpython", "--out", str(out), *extra])
    assert r.exit_code == 0, r.output
    return out


def _run_files(report: Path) -> dict[str, Any]:
    """Every file of the report's runs, as compared: summary.json without its
    wall-clock fields, progress.log (wall times) and suite.json left out."""
    out: dict[str, Any] = {}
    for p in sorted((report / "runs").rglob("*")):
        rel = str(p.relative_to(report / "runs"))
        if not p.is_file() or p.name in ("progress.log", "suite.json"):
            continue
        if p.name == "summary.json":
            s = {k: v for k, v in json.loads(p.read_text()).items() if k not in WALL_CLOCK}
            s["sim"] = {k: v for k, v in s["sim"].items() if k not in SIM_WALL_CLOCK}
            out[rel] = s
        else:
            out[rel] = p.read_bytes()
    return out


def _claims(report: Path) -> str:
    md = (report / "report.md").read_text()
    return md[md.index("## Claims"):md.index(f"## {QUICK_SET[0]}")]


@pytest.fixture(scope="module")
def one_at_a_time(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return _report(tmp_path_factory.mktemp("jobs") / "one")


def test_two_jobs_write_the_same_runs_as_one(one_at_a_time: Path, tmp_path: Path) -> None:
    two = _report(tmp_path / "two", "--jobs", "2")
    files = _run_files(one_at_a_time)
    assert {f.split("/")[0] for f in files} == set(QUICK_SET)
    assert any(f.endswith(".png") for f in files) and any(f.endswith(".jsonl") for f in files)
    assert _run_files(two) == files
    assert _claims(two) == _claims(one_at_a_time)
    rec = json.loads((two / "runs" / "suite.json").read_text())
    assert rec["command"].endswith("--jobs 2")
    assert [(r["experiment"], r["ok"], r["attempts"]) for r in rec["results"]] == [
        (n, True, 1) for n in QUICK_SET]


# ---------------------------------------------------------------------------
# a run whose process fails


def _flaky(tmp: Path) -> Any:
    """A runner: "raises" always raises; "dies-once" loses its process the
    first time (where it runs in a process of its own; raises otherwise);
    "elsewhere" finishes without writing here; every other run writes a
    finished run directory. Self-contained, so that Dask can ship it to a
    worker."""
    here = os.getpid()

    def runner(name: str, opts: RunOptions) -> dict[str, Any]:
        opts.echo("[   0.1s] phase one")
        if name == "raises":
            raise RuntimeError(f"{name}: the worker ran out of memory")
        if name == "elsewhere":      # as a worker that does not share the file system
            return {"ok": True, "fidelity_ok": True}
        if name == "dies-once" and not (tmp / "died").exists():
            (tmp / "died").touch()
            if os.getpid() != here:
                os._exit(9)
            raise OSError("lost its file system")
        assert opts.out is not None
        opts.out.mkdir(parents=True)
        summary = {"experiment": name, "ok": True, "quick": True, "fidelity_ok": True,
                   "fidelity_verdict": "faithful", "run_dir": str(opts.out)}
        (opts.out / "summary.json").write_text(json.dumps(summary))
        return summary

    return runner


def _check_flaky_suite(root: Path, runs: list[Any], text: str) -> None:
    assert [(r.name, r.ok, r.attempts) for r in runs] == [
        ("fine", True, 1), ("raises", False, 2), ("dies-once", True, 2)]
    assert runs[1].error == "RuntimeError: raises: the worker ran out of memory (tried 2 times)"
    assert "[2/3] raises: RuntimeError: raises: the worker ran out of memory; running it " \
           "again" in text
    assert "[2/3] raises: 0:00, FAILED: RuntimeError" in text
    assert "[3/3] dies-once:" in text and "running it again" in text
    # the failed run is in the report, as failed, with why
    recorded = {r.experiment: r for r in collect_runs([root])}
    assert sorted(recorded) == ["dies-once", "fine", "raises"]
    assert not recorded["raises"].finished
    assert recorded["raises"].verdict == f"failed: {runs[1].error}"
    assert recorded["raises"].profile == "quick"
    rec = write_record(root / "suite.json", runs, 1.0, "testbed report --jobs 2")
    assert [r["attempts"] for r in rec["results"]] == [1, 2, 2]


@pytest.mark.parametrize("jobs", [1, 2])
def test_a_run_whose_process_fails_is_run_again_once_then_reported(
        tmp_path: Path, jobs: int) -> None:
    out = io.StringIO()
    runs = run_suite(["fine", "raises", "dies-once"], tmp_path / "runs", RunOptions(quick=True),
                     progress=SuiteProgress(3, out, live=False), runner=_flaky(tmp_path),
                     jobs=jobs)
    text = out.getvalue()
    _check_flaky_suite(tmp_path / "runs", runs, text)
    if jobs > 1:   # a process of its own: lost, then run again
        assert "[3/3] dies-once: its process exited (status 9) without a result; " \
               "running it again" in text
        assert "[1/3 fine 0:00 | all 0:00] [   0.1s] phase one" in text   # its lines, relayed


# ---------------------------------------------------------------------------
# Ctrl-C and SIGTERM


def _gone(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] == "Z"
    except OSError:
        return True


@pytest.mark.parametrize(("sig", "status", "says", "sigint"), [
    (signal.SIGINT, 130, "interrupted", signal.SIG_DFL),
    (signal.SIGTERM, 143, "stopped", signal.SIG_DFL),
    # started as a shell's background job: SIGINT ignored, which the runs the
    # report stops with SIGINT must not inherit
    (signal.SIGTERM, 143, "stopped", signal.SIG_IGN)])
def test_a_stopped_report_stops_every_run_and_leaves_no_process(
        tmp_path: Path, sig: signal.Signals, status: int, says: str,
        sigint: signal.Handlers) -> None:
    """The parallel runs (and their PyPy children where PyPy is set up) are
    stopped with the command; each run's summary.json says so."""
    out = tmp_path / "rep"
    env = dict(os.environ, PYTHONPATH=str(REPO), MPLCONFIGDIR=str(tmp_path / "mpl"))
    # SIGINT as given (SIG_DFL: as from a terminal, even where pytest itself
    # runs as a shell's background job, which inherits SIGINT ignored)
    proc = subprocess.Popen([sys.executable, "-m", "testbed.cli", "report", *LONG_SET,
                             "--engine", "sim", "--jobs", "2", "--out", str(out)],
                            env=env, cwd=tmp_path, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, sigint))
    deadline = time.monotonic() + 120
    while len(list(out.glob("runs/*/phases"))) < 2:
        assert time.monotonic() < deadline and proc.poll() is None, "the runs never started"
        time.sleep(0.1)
    started = descendants_of(proc.pid)
    assert len(started) >= 2
    proc.send_signal(sig)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == status, err
    assert f"{says}: " in err and "no report written" in err
    assert [p for p in started if not _gone(p)] == []
    for name in LONG_SET:
        summary = json.loads((out / "runs" / name / "summary.json").read_text())
        assert summary["ok"] is False and summary["error"] == "interrupted (Ctrl-C)", name


@pytest.mark.skipif(find_pypy() is None, reason="no PyPy with numpy (./setup.sh makes .venv-pypy)")
def test_parallel_runs_each_have_their_own_pypy_child(tmp_path: Path) -> None:
    runs = run_suite(["ring-allreduce"], tmp_path, RunOptions(quick=True, engine="sim",
                                                              interpreter="pypy"),
                     repeat=2, jobs=2, progress=SuiteProgress(2, io.StringIO(), live=False))
    assert [(r.ok, r.fidelity_ok) for r in runs] == [(True, True)] * 2
    for k in (1, 2):
        sim = json.loads((tmp_path / f"ring-allreduce-{k}" / "summary.json").read_text())["sim"]
        assert sim["interpreter"].startswith("PyPy") and sim["seed"] == k


# ---------------------------------------------------------------------------
# bad options


@pytest.mark.parametrize(("args", "says"), [
    (["--jobs", "0"], "error: --jobs 0: the number of runs at a time is 1 or more"),
    (["--jobs", "-2"], "error: --jobs -2: the number of runs at a time is 1 or more"),
    (["--jobs", "2"], "error: --jobs 2: parallel runs are for --engine sim"),
    (["--scheduler", "tcp://127.0.0.1:1"],
     "error: --scheduler tcp://127.0.0.1:1: parallel runs are for --engine sim"),
    (["--engine", "sim", "--jobs", "2", "--scheduler", "tcp://127.0.0.1:1"],
     "error: --jobs 2 and --scheduler: give one"),
])
def test_bad_parallel_options_are_one_line_and_exit_2(
        tmp_path: Path, args: list[str], says: str) -> None:
    r = CliRunner().invoke(cli_main, ["report", "epic-loss", "--out", str(tmp_path / "x"), *args])
    assert r.exit_code == 2 and len(r.output.strip().splitlines()) == 1, r.output
    assert r.output.startswith(says), r.output
    assert not (tmp_path / "x").exists()


def test_a_scheduler_that_cannot_be_reached_is_named(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import testbed.suite

    monkeypatch.setattr(testbed.suite, "CONNECT_TIMEOUT_S", 0.5)
    for address, says in [("tcp://127.0.0.1:1", "no Dask scheduler reachable at"),
                          ("127.0.0.1", "is not a scheduler's address")]:
        r = CliRunner().invoke(cli_main, ["report", "epic-loss", "--engine", "sim",
                                          "--scheduler", address, "--out", str(tmp_path / "x")])
        assert r.exit_code == 2 and len(r.output.strip().splitlines()) == 1, r.output
        assert r.output.startswith("error: --scheduler: "), r.output
        if distributed is None:
            assert "distributed package is not installed" in r.output
        else:
            assert f"{says} {address}" in r.output or f"{address} {says}" in r.output


# ---------------------------------------------------------------------------
# Dask (last: its in-process cluster leaves threads in this process)


@pytest.fixture(scope="module")
def cluster() -> Iterator[Any]:
    """A scheduler and one worker with one thread, in this process."""
    assert distributed is not None
    with distributed.LocalCluster(n_workers=1, threads_per_worker=1, processes=False,
                                  dashboard_address=":0") as c:
        yield c


@needs_dask
def test_a_dask_cluster_writes_the_same_runs_as_one_process(
        one_at_a_time: Path, cluster: Any, tmp_path: Path) -> None:
    dask = _report(tmp_path / "dask", "--scheduler", cluster.scheduler_address)
    assert _run_files(dask) == _run_files(one_at_a_time)
    assert _claims(dask) == _claims(one_at_a_time)


@needs_dask
def test_a_run_that_fails_on_dask_is_run_again_once_then_reported(
        cluster: Any, tmp_path: Path) -> None:
    from testbed.suite import connect

    out = io.StringIO()
    client = connect(cluster.scheduler_address)
    try:
        runs = run_suite(["fine", "raises", "dies-once"], tmp_path / "runs",
                         RunOptions(quick=True), progress=SuiteProgress(3, out, live=False),
                         runner=_flaky(tmp_path), client=client)
        # a run whose directory this machine does not see is a failed run here
        [elsewhere] = run_suite(["elsewhere"], tmp_path / "other", RunOptions(quick=True),
                                progress=SuiteProgress(1, io.StringIO(), live=False),
                                runner=_flaky(tmp_path), client=client)
    finally:
        client.close()
    _check_flaky_suite(tmp_path / "runs", runs, out.getvalue())
    assert "[3/3] dies-once: OSError: lost its file system; running it again" in out.getvalue()
    assert not elsewhere.ok and "where this machine does not see it" in elsewhere.error
    [recorded] = collect_runs([tmp_path / "other"])
    assert not recorded.finished and "does not see it" in recorded.verdict


@needs_dask
def test_a_lost_dask_worker_s_run_is_run_again(tmp_path: Path) -> None:
    """A worker process that dies under its run: the run goes to another."""
    import dask

    with dask.config.set({"distributed.scheduler.allowed-failures": 0}), \
            distributed.LocalCluster(n_workers=1, threads_per_worker=1, processes=True,
                                     dashboard_address=":0") as c:
        from testbed.suite import connect

        out = io.StringIO()
        client = connect(c.scheduler_address)
        try:
            runs = run_suite(["dies-once"], tmp_path / "runs", RunOptions(quick=True),
                             progress=SuiteProgress(1, out, live=False),
                             runner=_flaky(tmp_path), client=client)
        finally:
            client.close()
    assert [(r.ok, r.attempts) for r in runs] == [(True, 2)]
    assert "[1/1] dies-once: KilledWorker" in out.getvalue()
