"""The README and the docs say what the code does: the experiments they list
exist, the benchmark records name their command, commit and machine and the
docs render them, the options they offer are accepted, and the README stays
a short guide (no run history, no commit hashes)."""

from __future__ import annotations

import json
import re
from pathlib import Path

from testbed.experiment import discover

REPO = Path(__file__).resolve().parents[2]
README = (REPO / "README.md").read_text()
ROADMAP = (REPO / "docs" / "roadmap.md").read_text()


def _section(text: str, title: str) -> str:
    start = text.index(f"\n## {title}\n")
    end = text.find("\n## ", start + 1)
    return text[start:end if end >= 0 else None]


def test_the_experiments_table_lists_exactly_the_experiments_that_exist() -> None:
    table = re.findall(r"^\| `([a-z0-9-]+)` \|", _section(README, "Experiments"), re.M)
    assert sorted(table) == sorted(discover()), "README's Experiments table vs testbed list"


def test_the_readme_is_a_short_guide_without_commit_hashes() -> None:
    assert len(README.splitlines()) <= 200
    hashes = re.findall(r"\b(?=[0-9a-f]*[a-f])(?=[0-9a-f]*[0-9])[0-9a-f]{7,40}\b", README)
    assert not hashes, f"commit hashes in README.md: {hashes}"
    assert "testbed report" in _section(README, "Reproducing the papers: one command")


def test_plans_are_kept_under_roadmap() -> None:
    roadmap = ROADMAP
    assert "not in the code yet" in roadmap
    # the roadmap names no experiment that exists already
    for name in discover():
        assert f"`{name}`" not in roadmap.split("beyond")[0], name


def test_rxe_hosts_are_offered_only_for_experiments_that_run_on_them() -> None:
    # an experiment runs on rxe hosts when it says so (HOST_PROVIDERS); the
    # runner refuses the others (testbed.runner.environment.check_hosts_supported)
    from testbed.experiment import load

    offered = re.findall(r"testbed run ([\w-]+)[^`\n]*--hosts rxe", README)
    assert offered, "the README shows no run on rxe hosts"
    for name in offered:
        assert "rxe" in load(name).HOST_PROVIDERS, name


def _measurements_page() -> str:
    import importlib.util

    spec = importlib.util.spec_from_file_location(
        "experiment_pages", REPO / "docs" / "hooks" / "experiment_pages.py")
    assert spec and spec.loader
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    page: str = mod.measurements_page()
    return page


def test_benchmark_records_name_command_commit_machine_and_the_docs_render_them() -> None:
    page = _measurements_page()
    refs = sorted(REPO.glob("results/reference/*.json"))
    records = [json.loads(p.read_text()) for p in refs]
    benches = [(p, r) for p, r in zip(refs, records, strict=True)
               if isinstance(r.get("results"), list)]
    assert benches, "no benchmark record in results/reference/"
    for path, rec in benches:
        ref = path.relative_to(REPO)
        assert {"command", "commit", "machine", "results"} <= set(rec), ref
        assert rec["command"] in page, f"{ref}: its command is not shown"
        assert rec["commit"][:12] in page, f"{ref}: its commit is not shown"
        if "total_s" in rec:      # a suite of runs (testbed run all): its times
            m, s = divmod(round(rec["total_s"]), 60)
            assert f"{m} min {s:02d} s" in page, f"{ref}: the total time differs"
            for r in rec["results"]:
                m, s = divmod(round(r["seconds"]), 60)
                row = re.search(rf"^\| {r['experiment']} \| (\d+:\d\d) \|", page, re.M)
                assert row and row.group(1) == f"{m}:{s:02d}", (ref, r["experiment"])
            continue
        for r in rec["results"]:
            row = re.search(rf"^\| `{r['backend']}` \| ([\d.]+) \|", page, re.M)
            assert row and float(row.group(1)) == round(r["mbps"]), (ref, r["backend"])


HASH = re.compile(r"\b(?=[0-9a-f]*[a-f])(?=[0-9a-f]*[0-9])[0-9a-f]{7,40}\b")
NOTES = ("experiments/README.md", "hosts/roce/README.md", "testbed/sim/README.md",
         "switches/p4/README.md", "switches/p4/EPIC.md", "switches/bmv2/README.md")


def test_the_notes_and_the_docs_carry_no_commit_hashes() -> None:
    pages = [REPO / n for n in NOTES] + sorted((REPO / "docs").rglob("*.md"))
    for page in pages:
        hashes = HASH.findall(page.read_text())
        assert not hashes, f"commit hashes in {page.relative_to(REPO)}: {hashes}"


def test_the_experiments_readme_is_an_index_of_the_experiments() -> None:
    text = (REPO / "experiments" / "README.md").read_text()
    assert len(text.splitlines()) <= 80, "experiments/README.md is an index; records go to the docs"
    rows = re.findall(r"^\| \[([a-z0-9-]+)\]\(([\w.]+)\) \|.*\]\(([^)]+)\) \|$", text, re.M)
    assert sorted(name for name, _, _ in rows) == sorted(discover())
    for name, module, analysis in rows:
        assert (REPO / "experiments" / module).exists(), module
        assert (REPO / "experiments" / analysis).resolve() == \
            REPO / "docs" / "experiments" / "analysis" / f"{name}.md", analysis


DOC_REF = re.compile(r'((?:[\w.-]+/)*(?:README|EPIC)\.md|docs/(?:[\w.-]+/)*[\w.-]+\.md)'
                     r'(?:,? "([^"\n]+)")?')


def test_comments_point_at_notes_and_docs_pages_that_exist() -> None:
    # A comment that sends the reader to a README or a docs page names a file
    # that exists, and a quoted section that the file has.
    for top in ("ground", "hosts", "switches", "testbed", "experiments", "scripts", "tests"):
        for src in sorted((REPO / top).rglob("*.py")):
            text = src.read_text()
            for m in DOC_REF.finditer(text):
                ref, section = m.group(1), m.group(2)
                found = [p for p in (src.parent / ref, REPO / ref) if p.is_file()]
                where = f"{src.relative_to(REPO)}: {ref}"
                assert found, f"{where} does not exist"
                if section:
                    assert section.lower() in found[0].read_text().lower(), \
                        f"{where} has no section {section!r}"
