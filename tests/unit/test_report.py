"""The reproduction report from run directories: which runs are judged, what
each claim shows, failed and unfaithful runs listed, the files written, and
the command's errors."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from click.testing import CliRunner
from report_runs import claim_values, write_run

from testbed.claims import NOT_FAITHFUL, NOT_MEASURED, NOT_REPRODUCED, REPRODUCED
from testbed.cli import main as cli_main
from testbed.report import ReportError, build, collect_runs, experiments_with_claims, write

EXPS = experiments_with_claims()
SYMPHONY = EXPS["symphony-two-flows"].CLAIMS


def at_paper(c):  # noqa: ANN001, ANN201 - a value that agrees with the claim
    return c.paper


def far_off(c):  # noqa: ANN001, ANN201 - the paper's direction, far beyond the tolerance
    return c.paper + (1 if c.paper >= 0 else -1) * (c.tolerance * 3 + 0.5)


def statuses(rep, name: str) -> list[str]:  # noqa: ANN001
    return [r.status for n, r in rep.results if n == name]


def test_every_declared_claim_is_in_the_report_even_without_runs(tmp_path: Path) -> None:
    rep = build([], reanalyse=False)
    declared = sum(len(m.CLAIMS) for m in EXPS.values())
    assert len(rep.results) == declared
    assert {r.status for _, r in rep.results} == {NOT_MEASURED}
    assert "roce-basics" in rep.without_claims


def test_claims_are_judged_per_experiment(tmp_path: Path) -> None:
    write_run(tmp_path / "sym", "symphony-two-flows", claim_values(SYMPHONY, at_paper),
              plots=("timelines.png", "offsets.png", "other.png"))
    epic = EXPS["epic-allreduce"].CLAIMS
    write_run(tmp_path / "epic", "epic-allreduce", claim_values(epic, far_off),
              plots=("allreduce_algbw.png",))
    rep = build(collect_runs([tmp_path]), reanalyse=False)
    assert statuses(rep, "symphony-two-flows") == [REPRODUCED] * len(SYMPHONY)
    assert statuses(rep, "epic-allreduce") == [NOT_REPRODUCED] * len(epic)
    assert set(statuses(rep, "reflex-cases")) == {NOT_MEASURED}
    sym = next(s for s in rep.sections if s.name == "symphony-two-flows")
    # the figures the claims name, not the run's others
    assert [p.name for _, p in sym.figures[0].plots] == ["timelines.png", "offsets.png"]


def test_a_figure_shows_the_plots_of_the_runs_that_measured_it(tmp_path: Path) -> None:
    """Runs of one axis of symphony-sweep each measure one figure's claim: a
    figure shows the plots of the runs with its key only."""
    sweep = EXPS["symphony-sweep"].CLAIMS
    for c in sweep:
        value = c.paper if c.paper is not None else c.versus + 0.1
        write_run(tmp_path / c.key, "symphony-sweep", {c.key: value},
                  plots=("normalized_cct.png",))
    rep = build(collect_runs([tmp_path]), reanalyse=False)
    assert statuses(rep, "symphony-sweep") == [REPRODUCED] * len(sweep)
    sec = next(s for s in rep.sections if s.name == "symphony-sweep")
    for fig in sec.figures:
        keys = {r.claim.key for r in fig.results}
        assert [(run.label, p.name) for run, p in fig.plots] == [
            (k, "normalized_cct.png") for k in sorted(keys)]


def test_seeds_of_several_runs_give_mean_and_spread(tmp_path: Path) -> None:
    seeds = {"fct_a_change": [-0.10, -0.14], "fct_b_change": [0.02, 0.04],
             "overlap_change": [-0.2, -0.2]}
    write_run(tmp_path / "a", "symphony-two-flows", claim_values(SYMPHONY, lambda c: seeds[c.key]))
    write_run(tmp_path / "b", "symphony-two-flows",
              claim_values(SYMPHONY, lambda c: [seeds[c.key][0]]))
    rep = build(collect_runs([tmp_path]), reanalyse=False)
    res = next(r for n, r in rep.results if r.claim.key == "fct_a_change")
    assert res.n == 3 and res.mean == pytest.approx(-0.34 / 3)
    assert res.sd is not None and res.sd > 0
    assert res.judged == ["a", "b"]


def test_unfaithful_and_failed_runs_are_listed_not_judged(tmp_path: Path) -> None:
    write_run(tmp_path / "busy", "symphony-two-flows", claim_values(SYMPHONY, at_paper),
              faithful=False)
    write_run(tmp_path / "broken", "reflex-partial", {}, ok=False,
              error="run failed: agent h2 exited with status 1")
    rep = build(collect_runs([tmp_path]), reanalyse=False)
    assert statuses(rep, "symphony-two-flows") == [NOT_FAITHFUL] * len(SYMPHONY)
    partial = [r for n, r in rep.results if n == "reflex-partial"]
    assert {r.status for r in partial} == {NOT_MEASURED}
    assert all("agent h2 exited" in r.why for r in partial)
    index, md = write(rep, tmp_path / "out")
    page = index.read_text()
    unf = page[page.index('id="unfaithful"'):]
    assert "busy" in unf and "host_pacing_late_fraction" in unf
    assert "broken" in unf and "agent h2 exited" in unf
    assert "## Runs that were not faithful or failed" in md.read_text()


def test_a_profile_is_judged_and_the_other_listed(tmp_path: Path) -> None:
    write_run(tmp_path / "q", "symphony-two-flows", claim_values(SYMPHONY, far_off), quick=True)
    write_run(tmp_path / "f", "symphony-two-flows", claim_values(SYMPHONY, at_paper), quick=False)
    runs = collect_runs([tmp_path])
    # without --profile, full runs win
    rep = build(runs, reanalyse=False)
    assert statuses(rep, "symphony-two-flows") == [REPRODUCED] * len(SYMPHONY)
    sym = next(s for s in rep.sections if s.name == "symphony-two-flows")
    assert [(r.label, why.split(";")[0]) for r, why in sym.left_out] == [("q", "quick profile")]
    rep = build(runs, profile="quick", reanalyse=False)
    assert statuses(rep, "symphony-two-flows") == [NOT_REPRODUCED] * len(SYMPHONY)


def test_the_page_and_markdown_carry_claims_plots_and_provenance(tmp_path: Path) -> None:
    write_run(tmp_path / "runs" / "sym", "symphony-two-flows", claim_values(SYMPHONY, at_paper),
              plots=("timelines.png", "offsets.png"), duration_s=83.0)
    rep = build(collect_runs([tmp_path / "runs"]), command="testbed report --reuse runs",
                reanalyse=False)
    index, md = write(rep, tmp_path / "out")
    page = index.read_text()
    assert "<script" not in page.lower() and "http://" not in page and "https://" not in page
    imgs = re.findall(r'<img src="([^"]+)"', page)
    assert imgs == ["img/sym/timelines.png", "img/sym/offsets.png"]
    assert all((tmp_path / "out" / i).stat().st_size > 1000 for i in imgs)
    # the plots sit under their figure's heading
    assert page.index("Fig. 9</h3>") < page.index(imgs[0])
    for text in ("0123456789ab", "6.1.0-test", "7.3.11", "1 min 23 s", "soft", "udp",
                 "-12.4%", REPRODUCED):
        assert text in page, text
    mdt = md.read_text()
    assert "![Fig. 9: timelines.png of run sym (faithful)](img/sym/timelines.png)" in mdt
    assert "| symphony-two-flows | Fig. 9 | the lagging step A" in mdt
    assert "1 min 23 s" in mdt


def test_reanalysis_that_fails_falls_back_to_the_recorded_results(tmp_path: Path) -> None:
    # a made-up run has no timelines: the current analysis cannot read it
    write_run(tmp_path / "sym", "symphony-two-flows", claim_values(SYMPHONY, at_paper))
    rep = build(collect_runs([tmp_path]))
    assert statuses(rep, "symphony-two-flows") == [REPRODUCED] * len(SYMPHONY)
    sym = next(s for s in rep.sections if s.name == "symphony-two-flows")
    assert "re-analysis failed" in sym.runs[0].note


def test_bad_run_directories_are_named(tmp_path: Path) -> None:
    (tmp_path / "empty").mkdir()
    with pytest.raises(ReportError, match="empty: no run directory"):
        collect_runs([tmp_path / "empty"])
    bad = tmp_path / "bad"
    bad.mkdir()
    (bad / "summary.json").write_text("{not json")
    with pytest.raises(ReportError, match="bad/summary.json: unreadable"):
        collect_runs([bad])
    (bad / "summary.json").write_text(json.dumps({"ok": True}))
    with pytest.raises(ReportError, match="not a run summary"):
        collect_runs([bad])


def test_the_report_command_reuses_runs_and_refuses_bad_input(tmp_path: Path) -> None:
    write_run(tmp_path / "runs" / "sym", "symphony-two-flows", claim_values(SYMPHONY, at_paper))
    out = tmp_path / "rep"
    r = CliRunner().invoke(cli_main, ["report", "--reuse", str(tmp_path / "runs"), "--out",
                                      str(out), "--no-reanalyse"])
    assert r.exit_code == 0, r.output
    assert f"reproduced {len(SYMPHONY)}" in r.output
    assert (out / "index.html").exists() and (out / "report.md").exists()
    # the output directory is never overwritten
    r = CliRunner().invoke(cli_main, ["report", "--reuse", str(tmp_path / "runs"), "--out",
                                      str(out)])
    assert r.exit_code == 2 and "not empty" in r.output
    r = CliRunner().invoke(cli_main, ["report", "roce-basics", "--reuse", str(tmp_path)])
    assert r.exit_code == 2 and "no such experiment with paper claims" in r.output
    r = CliRunner().invoke(cli_main, ["report", "--run-missing", "--out", str(tmp_path / "x")])
    assert r.exit_code == 2 and "--run-missing goes with --reuse" in r.output
    (tmp_path / "none").mkdir()
    r = CliRunner().invoke(cli_main, ["report", "--reuse", str(tmp_path / "none"), "--out",
                                      str(tmp_path / "y")])
    assert r.exit_code == 2 and "no run directory" in r.output


def test_run_all_takes_no_experiment_parameters() -> None:
    r = CliRunner().invoke(cli_main, ["run", "all", "--quick", "-p", "seeds=2"])
    assert r.exit_code == 2 and "not with 'all'" in r.output


def test_the_report_command_runs_what_is_missing_and_judges_it(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The path without --reuse, with the runner replaced by one that writes a
    run directory in the runner's format (the real one needs root and Mininet)."""
    import testbed.runner
    import testbed.suite

    ran: list[tuple[str, bool]] = []

    def fake_run(name: str, opts: testbed.runner.RunOptions) -> dict:
        ran.append((name, opts.quick))
        opts.echo("[   0.1s] phase alone: done")
        mod = EXPS[name]
        assert opts.out is not None
        write_run(opts.out, name, claim_values(mod.CLAIMS, at_paper), quick=opts.quick)
        return json.loads((opts.out / "summary.json").read_text())

    real_suite = testbed.suite.run_suite
    monkeypatch.setattr(testbed.runner, "check_environment", lambda *a, **k: None)
    monkeypatch.setattr(testbed.suite, "run_suite",
                        lambda *a, **k: real_suite(*a, **k, runner=fake_run))
    write_run(tmp_path / "old" / "sym", "symphony-two-flows", claim_values(SYMPHONY, far_off))
    out = tmp_path / "rep"
    r = CliRunner().invoke(cli_main, ["report", "symphony-two-flows", "epic-allreduce",
                                      "--reuse", str(tmp_path / "old"), "--run-missing",
                                      "--out", str(out), "--no-reanalyse"])
    assert r.exit_code == 0, r.output
    assert ran == [("epic-allreduce", True)]            # symphony's run was reused
    assert "[1/1] epic-allreduce:" in r.output
    rec = json.loads((out / "runs" / "suite.json").read_text())
    assert [x["experiment"] for x in rec["results"]] == ["epic-allreduce"]
    md = (out / "report.md").read_text()
    epic = EXPS["epic-allreduce"].CLAIMS
    assert f"reproduced {len(epic)}, not reproduced {len(SYMPHONY)}" in r.output
    assert "## reflex-cases" not in md                  # only the experiments named
    not_named = next(line for line in md.splitlines() if "not in this report (not named)" in line)
    assert "`reflex-cases`" in not_named and "`epic-allreduce`" not in not_named
    from testbed.experiment import discover

    without = ", ".join(f"`{n}`" for n in discover() if n not in EXPS)
    assert f"declare no paper claims (not judged): {without}." in md
