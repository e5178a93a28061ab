"""The profiles (quick, full, paper): the paper profile's declaration and what
it cuts, the command line (--profile, --quick as its alias, the refusal on
Mininet), the run's summary, and which experiments and runs a paper report
takes. No paper-scale run: a two-rank ring stands in for a paper profile."""

from __future__ import annotations

import json
import types
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from report_runs import claim_values, write_run

import testbed.experiment
import testbed.runner
from experiments import (
    epic_allreduce,
    ring_allreduce,
    roce_basics,
    symphony_ring,
    symphony_two_flows,
)
from experiments._symphony_net import PAPER_NETWORK
from testbed.claims import Claim
from testbed.cli import main
from testbed.experiment import (
    ExperimentError,
    ScaledDown,
    has_profile,
    load,
    make_params,
    param_docs,
    profiles_of,
    scale_record,
    scaled_down_from,
)
from testbed.report import build, collect_runs, experiments_with_claims
from testbed.runner import RunOptions, run


@dataclass(frozen=True)
class _TinyParams(ring_allreduce.Params):
    @classmethod
    def paper(cls) -> _TinyParams:
        return cls(ranks=2, count=256, iterations=1, link_mbps=1000.0, slowdown=1.0)

    @classmethod
    def scaled_down_from(cls) -> dict[str, ScaledDown]:
        return {"iterations": ScaledDown(20, "one AllReduce is exact in virtual time")}


def tiny_module(params: type = _TinyParams) -> types.ModuleType:
    """ring-allreduce with a paper profile of two ranks (and a declared cut)."""
    mod = types.ModuleType("tiny_paper")
    for k in ("plan", "analyze", "plot", "HEADLINE", "PROGRAM", "HOST_PROVIDERS", "CLAIMS",
              "REFERENCE"):
        setattr(mod, k, getattr(ring_allreduce, k))
    mod.NAME = "tiny-paper"
    mod.__doc__ = "A two-rank ring with a paper profile."
    mod.Params = params
    return mod


@pytest.fixture
def no_paper_experiment(monkeypatch: pytest.MonkeyPatch) -> str:
    """An experiment with a claim and no paper profile (ring-allreduce's
    parameters) among the discovered ones: its name. Made up, so that the
    tests do not depend on which real experiments still lack a paper profile."""
    mod = types.ModuleType("no_paper")
    for k in ("plan", "analyze", "plot", "HEADLINE", "PROGRAM"):
        setattr(mod, k, getattr(ring_allreduce, k))
    mod.NAME = "no-paper"
    mod.__doc__ = "A ring with a claim and no paper profile."
    mod.Params = ring_allreduce.Params
    mod.REFERENCE = {"allreduce.mean_s": 1.0}
    mod.CLAIMS = (Claim("Fig. 1", "made up", key="allreduce.mean_s", paper=1.0, rel_tol=0.1,
                        plots=("x.png",)),)
    assert not has_profile(mod, "paper")
    real = testbed.experiment.discover
    monkeypatch.setattr(testbed.experiment, "discover",
                        lambda: dict(sorted({**real(), mod.NAME: mod}.items())))
    return mod.NAME


def _one_error_line(r: Any) -> str:
    assert r.exit_code == 2, r.output
    assert "Traceback" not in r.output
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1, r.stderr
    return lines[0]


# ---------------------------------------------------------------------------
# the declaration


def test_the_paper_profile_is_declared_by_params_paper() -> None:
    mod = tiny_module()
    assert profiles_of(mod) == ("quick", "full", "paper")
    assert profiles_of(roce_basics) == ("quick", "full")
    assert has_profile(epic_allreduce, "paper")
    p = make_params(mod, profile="paper", overrides={"count": "512"})
    assert (p.ranks, p.count, p.iterations) == (2, 512, 1)
    assert make_params(mod, quick=True) == mod.Params.quick()     # the old call still works
    with pytest.raises(ExperimentError, match="roce-basics has no paper profile.*epic-allreduce"):
        make_params(roce_basics, profile="paper")
    with pytest.raises(ExperimentError, match="unknown profile 'huge'"):
        has_profile(roce_basics, "huge")


def test_what_the_paper_profile_cuts_is_checked_and_recorded() -> None:
    mod = tiny_module()
    cuts = scaled_down_from(mod)
    assert cuts == {"iterations": ScaledDown(20, "one AllReduce is exact in virtual time")}
    rec = scale_record(mod, "paper", mod.Params.paper())
    assert rec == {"iterations": {"paper": 20, "run": 1,
                                  "reason": "one AllReduce is exact in virtual time"}}
    assert scale_record(mod, "quick", mod.Params.quick()) is None
    assert scaled_down_from(roce_basics) == {}

    def with_cuts(c: dict[str, Any]) -> types.ModuleType:
        @dataclass(frozen=True)
        class P(_TinyParams):
            @classmethod
            def scaled_down_from(cls) -> dict[str, Any]:
                return c
        return tiny_module(P)

    with pytest.raises(ExperimentError, match="'speed', not a parameter"):
        scaled_down_from(with_cuts({"speed": ScaledDown(1, "x")}))
    with pytest.raises(ExperimentError, match="already runs the paper's 2"):
        scaled_down_from(with_cuts({"ranks": ScaledDown(2, "x")}))
    with pytest.raises(ExperimentError, match="ScaledDown with a reason"):
        scaled_down_from(with_cuts({"count": ScaledDown(4096, "")}))


def test_param_docs_carry_the_paper_values() -> None:
    docs = {d.name: d for d in param_docs(tiny_module())}
    assert docs["ranks"].has_paper and docs["ranks"].paper == 2
    assert docs["iterations"].scaled_down == ScaledDown(20, "one AllReduce is exact in "
                                                            "virtual time")
    assert docs["ranks"].scaled_down is None
    assert not any(d.has_paper for d in param_docs(roce_basics))
    epic = {d.name: d for d in param_docs(epic_allreduce)}
    assert epic["max_kib"].paper == 1 << 20 and epic["link_mbps"].paper == 100_000.0


# ---------------------------------------------------------------------------
# runs


def test_a_paper_run_records_its_profile_and_cuts(tmp_path: Path,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    mod = tiny_module()
    monkeypatch.setattr(testbed.runner, "load", lambda _name: mod)
    s = run("tiny-paper", RunOptions(profile="paper", engine="sim", interpreter="cpython",
                                     out=tmp_path / "r", echo=lambda _s: None))
    assert s["ok"] and s["profile"] == "paper" and s["quick"] is False
    assert s["params"]["ranks"] == 2 and s["allreduce"]["bit_exact"] is True
    assert s["scaled_down_from"] == {"iterations": {
        "paper": 20, "run": 1, "reason": "one AllReduce is exact in virtual time"}}
    saved = json.loads((tmp_path / "r" / "summary.json").read_text())
    assert saved["profile"] == "paper" and saved["scaled_down_from"] == s["scaled_down_from"]
    assert "tiny-paper (paper): output" in (tmp_path / "r" / "progress.log").read_text()


def test_the_quick_and_full_profiles_record_no_cuts(tmp_path: Path) -> None:
    s = run("ring-allreduce", RunOptions(quick=True, engine="sim", interpreter="cpython",
                                         out=tmp_path / "q", echo=lambda _s: None))
    assert s["profile"] == "quick" and s["quick"] is True and s["scaled_down_from"] is None


def test_the_paper_profile_is_refused_on_mininet_before_anything(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    mod = tiny_module()
    monkeypatch.setattr(testbed.runner, "load", lambda _name: mod)
    with pytest.raises(ExperimentError, match="virtual-time engine only"):
        run("tiny-paper", RunOptions(profile="paper", out=tmp_path / "m"))
    assert not (tmp_path / "m").exists()


# ---------------------------------------------------------------------------
# the command line


def test_profile_and_its_quick_alias_reach_the_run(tmp_path: Path,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[RunOptions] = []

    def fake_run(name: str, opts: RunOptions) -> dict[str, Any]:
        seen.append(opts)
        return {"run_dir": str(tmp_path), "fidelity_ok": True}

    monkeypatch.setattr(testbed.runner, "run", fake_run)
    for args, want in ((["--quick"], "quick"), (["--profile", "quick"], "quick"), ([], "full"),
                       (["--profile", "paper", "--engine", "sim"], "paper")):
        r = CliRunner().invoke(main, ["run", "epic-allreduce", *args])
        assert r.exit_code == 0, r.output
        assert seen[-1].profile_name() == want and seen[-1].quick == (want == "quick")
    r = CliRunner().invoke(main, ["run", "roce-basics", "--quick", "--profile", "full"])
    assert r.exit_code == 2 and "--quick is --profile quick" in r.output


def test_the_cli_refuses_a_paper_run_on_mininet_in_one_line() -> None:
    line = _one_error_line(CliRunner().invoke(main, ["run", "epic-allreduce", "--profile",
                                                     "paper"]))
    assert line == ("error: --profile paper runs on the virtual-time engine only: add "
                    "--engine sim")
    line = _one_error_line(CliRunner().invoke(main, ["run", "all", "--profile", "paper"]))
    assert "--engine sim" in line
    line = _one_error_line(CliRunner().invoke(main, ["run", "roce-basics", "--profile", "paper",
                                                     "--engine", "sim"]))
    assert line.startswith("error: roce-basics has no paper profile (experiments with one: ")


def test_help_and_list_show_the_paper_values() -> None:
    r = CliRunner().invoke(main, ["run", "epic-allreduce", "--help"])
    assert r.exit_code == 0, r.output
    text = " ".join(r.output.split())
    assert "default 1024, quick 64, paper 1048576" in text              # max_kib
    assert "and the paper profile (--profile paper" in text
    r = CliRunner().invoke(main, ["run", "roce-basics", "--help"])
    assert "this experiment has no paper profile" in " ".join(r.output.split())
    r = CliRunner().invoke(main, ["list", "--params"])
    assert r.exit_code == 0, r.output
    lines = r.output.splitlines()
    assert lines[0].split() == ["PARAMETER", "DEFAULT", "QUICK", "PAPER", "UNIT", "MEANING"]
    row = next(line.split() for line in lines if line.split()[:1] == ["link_mbps"]
               and "100000.0" in line)
    assert row[1:4] == ["0.5", "0.5", "100000.0"]
    basics = lines.index(next(line for line in lines if line.startswith("roce-basics: ")))
    assert lines[basics + 1].split()[3] == "-"                          # no paper profile


# ---------------------------------------------------------------------------
# the report


def _at_paper(c: Any) -> float:
    return float(c.paper)


def test_a_paper_report_takes_the_experiments_with_a_paper_profile(
        tmp_path: Path, no_paper_experiment: str) -> None:
    with_paper = experiments_with_claims("paper")
    assert {"epic-allreduce", "epic-loss", "epic-primitives", "epic-tree", "symphony-ring",
            "symphony-two-flows", "reflex-cases", "reflex-partial",
            "reflex-probing", "reflex-workload"} <= set(with_paper)
    assert all(has_profile(load(n), "paper") for n in with_paper)
    assert "symphony-two-flows" in experiments_with_claims()
    claims = epic_allreduce.CLAIMS
    paper = json.loads(json.dumps(epic_allreduce.Params.paper().__dict__))
    write_run(tmp_path / "runs" / "paper", "epic-allreduce", claim_values(claims, _at_paper),
              quick=False, profile="paper", params=paper)
    write_run(tmp_path / "runs" / "quick", "epic-allreduce", claim_values(claims, _at_paper),
              params=json.loads(json.dumps(epic_allreduce.Params.quick().__dict__)))
    runs = collect_runs([tmp_path / "runs"])
    rep = build(runs, reanalyse=False)          # no profile named: paper runs come first
    sec = next(s for s in rep.sections if s.name == "epic-allreduce")
    assert [r.label for r in sec.runs] == ["paper"]
    assert [(r.label, why) for r, why in sec.left_out] == [
        ("quick", "quick profile; runs of the paper profile exist and are judged")]
    assert sec.scale == "the paper's (every parameter at the paper's value)"
    rep = build(runs, profile="paper", reanalyse=False)
    assert [s.name for s in rep.sections] == list(with_paper)
    assert [s.name for s in rep.sections if s.runs] == ["epic-allreduce"]
    assert no_paper_experiment in rep.without_paper_profile and not rep.not_named
    rep = build(runs, profile="quick", reanalyse=False)
    sec = next(s for s in rep.sections if s.name == "epic-allreduce")
    assert sec.scale.startswith("quick profile: ") and "differ from the paper's" in sec.scale
    rows = {r[0]: r for r in sec.scale_rows}
    assert rows["link_mbps"][1:] == ["0.5", "100000", "the quick profile's value"]
    assert "ranks" not in rows                                  # 8, as in the paper


def test_the_report_lists_a_cut_with_its_reason(tmp_path: Path,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    base = epic_allreduce.Params

    @dataclass(frozen=True)
    class P(base):
        @classmethod
        def scaled_down_from(cls) -> dict[str, ScaledDown]:
            return {"max_kib": ScaledDown(1 << 20, "1 GB would take two hours here")}

        @classmethod
        def paper(cls) -> P:
            return cls(**{**base.paper().__dict__, "max_kib": 1 << 18})

    monkeypatch.setattr(epic_allreduce, "Params", P)
    params = json.loads(json.dumps(P.paper().__dict__))
    write_run(tmp_path / "p", "epic-allreduce", claim_values(epic_allreduce.CLAIMS, _at_paper),
              quick=False, profile="paper", params=params)
    rep = build(collect_runs([tmp_path / "p"]), profile="paper", reanalyse=False)
    sec = rep.sections[0]
    assert sec.scale == "paper profile, not the paper's in max_kib"
    assert sec.scale_rows == [["max_kib", "262144", "1048576", "the paper profile runs less: "
                               "1 GB would take two hours here"]]


def test_a_parameter_an_older_run_did_not_record_ran_at_its_default(tmp_path: Path) -> None:
    from experiments import reflex_partial

    params = json.loads(json.dumps(reflex_partial.Params.paper().__dict__))
    del params["dcqcn_overrides"]           # a run made before the parameter existed
    params["seeds"] = 3
    write_run(tmp_path / "p", "reflex-partial",
              claim_values(reflex_partial.CLAIMS, _at_paper), quick=False, profile="paper",
              params=params)
    rep = build(collect_runs([tmp_path / "p"]), profile="paper", reanalyse=False)
    sec = next(s for s in rep.sections if s.name == "reflex-partial")
    assert [r[0] for r in sec.scale_rows] == ["seeds"]


def test_the_report_command_with_the_paper_profile(tmp_path: Path,
                                                   no_paper_experiment: str) -> None:
    line = _one_error_line(CliRunner().invoke(main, ["report", "--profile", "paper", "--out",
                                                     str(tmp_path / "x")]))
    assert "--engine sim" in line
    r = CliRunner().invoke(main, ["report", no_paper_experiment, "--profile", "paper",
                                  "--engine", "sim", "--out", str(tmp_path / "y")])
    assert r.exit_code == 2 and "no such experiment with paper claims and a paper profile" \
        in r.output
    paper = json.loads(json.dumps(epic_allreduce.Params.paper().__dict__))
    write_run(tmp_path / "runs" / "epic", "epic-allreduce",
              claim_values(epic_allreduce.CLAIMS, _at_paper), quick=False, profile="paper",
              params=paper)
    out = tmp_path / "rep"
    r = CliRunner().invoke(main, ["report", "--profile", "paper", "--reuse",
                                  str(tmp_path / "runs"), "--out", str(out), "--no-reanalyse"])
    assert r.exit_code == 0, r.output
    md = (out / "report.md").read_text()
    assert "## epic-allreduce" in md and f"## {no_paper_experiment}" not in md
    assert "### Scale of epic-allreduce against the paper's" in md
    assert "no paper profile (not run at the paper's scale, not in this report): " in md
    assert f"`{no_paper_experiment}`" in md
    assert "scale against the paper's" in md
    assert "against the paper's" in (out / "index.html").read_text()


def test_symphony_rings_paper_profile_is_section_4_1() -> None:
    p = symphony_ring.Params.paper()
    assert p.ranks == PAPER_NETWORK["nodes"] == 32
    assert p.spines == 4 and p.leaves * p.hosts_per_leaf == 32
    # one spine group, not oversubscribed: a leaf's uplinks carry its hosts' rate
    assert p.spines >= p.hosts_per_leaf
    assert p.link_mbps == 10_000 and p.slowdown == 1.0
    assert p.chunk_kb == 8 * 1024 and p.payload == "phantom" and p.pfc
    assert (p.red_kmin_kb, p.red_kmax_kb, p.red_pmax) == (50.0, 100.0, 0.2)
    assert (p.tau, p.t_win_us, p.k) == (0.25, 100.0, 0.01)
    assert p.dcqcn_preset == "hpcc"
    # HPCC's 3.2 MB buffer at 10 Gb/s, in frames; XOFF at buffer / (8 + 8 ports)
    assert p.queue_pkts * 1082 <= 3.2e6 < (p.queue_pkts + 1) * 1082
    assert p.pfc_xoff_kb == 200.0 and p.pfc_xon_kb == 197.0
    # lossless: every other port of a leaf paused at XOFF fits one egress queue
    assert 7 * p.pfc_xoff_kb * 1000 < p.queue_pkts * 1082
    cuts = scaled_down_from(symphony_ring)
    assert set(cuts) == {"seeds", "schemes"} and cuts["seeds"].paper == 20
    plan = symphony_ring.plan(p)
    assert [ph.name for ph in plan.phases] == ["baseline-s0", "symphony-s0", "pq-s0"]


def test_symphony_two_flows_paper_profile_is_the_prototype() -> None:
    p = symphony_two_flows.Params.paper()
    assert p.link_mbps == 10_000 and p.slowdown == 1.0
    assert p.flow_bytes == 1 << 30 and p.dcqcn_preset == "connectx"
    assert p.key_offset in p.offset_list
    assert scaled_down_from(symphony_two_flows) == {}
    assert len(symphony_two_flows.plan(p).phases) == 1 + 2 * len(p.offset_list)
