"""``testbed report`` end to end on a real run: it runs symphony-two-flows
(quick profile, about 30 s) into its own directory, judges the declared
claims on it and writes a page that renders in headless Chromium. The
verdicts depend on the machine (a run that was not faithful makes its claims
"not faithful"); what is checked is that every claim got one, with the run's
measured value, and that the page shows the run's figures and verdict."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from testbed.browser import HeadlessBrowser, find_chromium
from testbed.claims import NOT_MEASURED, STATUSES
from testbed.experiment import load

pytestmark = [pytest.mark.root, pytest.mark.usefixtures("no_leftovers")]

REPO = Path(__file__).resolve().parents[2]
NAME = "symphony-two-flows"


def test_report_runs_and_judges_a_quick_run(tmp_path: Path) -> None:
    out = tmp_path / "report"
    r = subprocess.run([sys.executable, "-m", "testbed.cli", "report", NAME, "--profile",
                        "quick", "--out", str(out)], cwd=REPO, capture_output=True, text=True,
                       timeout=900)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "[1/1] symphony-two-flows:" in r.stdout          # the suite's progress line
    run_dir = out / "runs" / NAME
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["ok"] and summary["quick"]
    suite = json.loads((out / "runs" / "suite.json").read_text())
    assert [x["experiment"] for x in suite["results"]] == [NAME]

    md = (out / "report.md").read_text()
    claims = load(NAME).CLAIMS
    for c in claims:
        row = next(line for line in md.splitlines()
                   if line.startswith(f"| {NAME} | {c.figure} | {c.says} |"))
        verdict = row.rsplit("|", 2)[-2].strip().strip("*")
        assert verdict in STATUSES and verdict != NOT_MEASURED, row
        assert c.fmt(summary[c.key]) in row, (row, summary[c.key])   # one seed: the key itself
    verdict = summary["fidelity_verdict"]
    assert verdict in md

    if find_chromium() is None:
        pytest.skip("Chromium is not installed (setup.sh installs it): page not loaded")
    with HeadlessBrowser() as b:
        b.open(out / "index.html")
        imgs = b.evaluate("Array.from(document.images).map(i => [i.getAttribute('src'), "
                          "i.complete && i.naturalWidth > 0])")
        rows = b.evaluate("document.querySelectorAll('#claims-table tr').length")
        requests = list(b.requests)
    assert sorted(src for src, _ in imgs) == [f"img/{NAME}/offsets.png",
                                              f"img/{NAME}/timelines.png"]
    assert all(ok for _, ok in imgs), imgs
    assert rows == len(claims) + 1
    assert all(u.startswith("file://") for u in requests), requests
