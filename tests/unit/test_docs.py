"""The READMEs say what the code does: the experiments they list exist, the
benchmark figures name their command, commit, machine and saved JSON, and
the options they offer are accepted."""

from __future__ import annotations

import json
import re
from pathlib import Path

from testbed.experiment import discover

REPO = Path(__file__).resolve().parents[2]
README = (REPO / "README.md").read_text()


def _section(text: str, title: str) -> str:
    start = text.index(f"\n## {title}\n")
    end = text.find("\n## ", start + 1)
    return text[start:end if end >= 0 else None]


def test_the_experiments_table_lists_exactly_the_experiments_that_exist() -> None:
    table = re.findall(r"^\| `([a-z0-9-]+)` \|", _section(README, "Experiments"), re.M)
    assert sorted(table) == sorted(discover()), "README's Experiments table vs testbed list"


def test_plans_are_kept_under_roadmap() -> None:
    roadmap = _section(README, "Roadmap")
    assert "not in the code yet" in roadmap
    # the roadmap names no experiment that exists already
    for name in discover():
        assert f"`{name}`" not in roadmap.split("beyond")[0], name


def test_rxe_hosts_are_offered_only_for_experiments_that_run_on_them() -> None:
    # an experiment runs on rxe hosts when it says so (HOST_PROVIDERS); the
    # runner refuses the others (testbed.runner.check_hosts_supported)
    from testbed.experiment import load

    offered = re.findall(r"testbed run ([\w-]+)[^`\n]*--hosts rxe", README)
    assert offered, "the README shows no run on rxe hosts"
    for name in offered:
        assert "rxe" in getattr(load(name), "HOST_PROVIDERS", ()), name


def test_benchmark_figures_name_command_commit_machine_and_json() -> None:
    refs = sorted(set(re.findall(r"`(results/reference/[\w.-]+\.json)`", README)))
    assert refs, "the benchmark figures point at no saved JSON"
    for ref in refs:
        rec = json.loads((REPO / ref).read_text())
        assert {"command", "commit", "machine", "results"} <= set(rec), ref
        assert rec["command"] in README, f"{ref}: its command is not quoted"
        assert rec["commit"][:12] in README, f"{ref}: its commit is not quoted"
        if "total_s" in rec:      # a suite of runs (testbed run all): its times
            m, s = divmod(round(rec["total_s"]), 60)
            assert f"{m} min {s:02d} s" in README, f"{ref}: the total time differs"
            for r in rec["results"]:
                m, s = divmod(round(r["seconds"]), 60)
                row = re.search(rf"^\| {r['experiment']} \| (\d+:\d\d) \|", README, re.M)
                assert row and row.group(1) == f"{m}:{s:02d}", (ref, r["experiment"])
            continue
        runs = int(re.search(r"--runs (\d+)", rec["command"]).group(1))  # type: ignore[union-attr]
        assert f"medians of {runs} runs" in README, f"{ref}: the run count differs"
        for r in rec["results"]:
            row = re.search(rf"^\| `{r['backend']}` \| ([\d.]+) \|", README, re.M)
            assert row and float(row.group(1)) == round(r["mbps"]), (ref, r["backend"])
