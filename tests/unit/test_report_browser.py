"""The report page in a real headless Chromium (Debian's ``chromium``, which
setup.sh installs): built by ``testbed report --reuse`` from run directories
in the runner's format, it loads offline, every figure and table renders, and
the claims table has a row per declared claim with its verdict."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner
from report_runs import claim_values, write_run

from testbed.browser import HeadlessBrowser, find_chromium
from testbed.claims import STATUSES
from testbed.cli import main as cli_main
from testbed.report import experiments_with_claims

pytestmark = pytest.mark.skipif(find_chromium() is None,
                                reason="Chromium is not installed (setup.sh installs it)")

PAGE_FACTS = """JSON.stringify({
  scripts: document.scripts.length,
  images: Array.from(document.images).map(i => {
    const r = i.getBoundingClientRect();
    return {src: i.getAttribute('src'), ok: i.complete && i.naturalWidth > 0,
            w: r.width, h: r.height};
  }),
  figures: document.querySelectorAll('figure').length,
  tables: Array.from(document.querySelectorAll('table')).map(t => {
    const r = t.getBoundingClientRect();
    return {id: t.id, cls: t.className, rows: t.rows.length, w: r.width, h: r.height,
            shown: getComputedStyle(t).display !== 'none' && getComputedStyle(t).visibility !== 'hidden'};
  }),
  claimRows: Array.from(document.querySelectorAll('#claims-table tr')).slice(1).map(
    tr => tr.cells[tr.cells.length - 1].innerText.trim()),
  okColour: (() => { const s = document.querySelector('.status.ok');
                     return s ? getComputedStyle(s).backgroundColor : null; })(),
})"""


def _runs(root: Path) -> None:
    """A faithful run per experiment with claims (at the paper's values), an
    unfaithful one more for Symphony, and for ReFlex partial delivery only a
    failed one."""
    for name, mod in experiments_with_claims().items():
        if name == "reflex-partial":
            continue
        plots = tuple(dict.fromkeys(p.replace("*", "x") for c in mod.CLAIMS for p in c.plots))
        write_run(root / name, name, claim_values(mod.CLAIMS, lambda c: c.paper), plots=plots)
    sym = experiments_with_claims()["symphony-two-flows"].CLAIMS
    write_run(root / "symphony-busy", "symphony-two-flows",
              claim_values(sym, lambda c: c.paper), faithful=False, plots=("timelines.png",))
    write_run(root / "partial-failed", "reflex-partial", {}, ok=False)


def test_the_report_renders_offline_in_chromium(tmp_path: Path) -> None:
    _runs(tmp_path / "runs")
    out = tmp_path / "report"
    r = CliRunner().invoke(cli_main, ["report", "--reuse", str(tmp_path / "runs"),
                                      "--out", str(out), "--no-reanalyse"])
    assert r.exit_code == 0, r.output
    import json

    with HeadlessBrowser(width=1200, height=900) as b:
        b.open(out / "index.html")
        facts = json.loads(b.evaluate(PAGE_FACTS))
        shot = b.screenshot(width=1200, height=900)
        requests, errors = list(b.requests), list(b.console_errors)

    assert facts["scripts"] == 0
    assert requests and all(u.startswith("file://") for u in requests), requests
    assert not errors, errors
    imgs = facts["images"]
    assert len(imgs) >= len(experiments_with_claims()) and facts["figures"] == len(imgs)
    for img in imgs:
        assert img["ok"], f"image did not load: {img['src']}"
        assert img["w"] > 100 and img["h"] > 50, img
    tables = facts["tables"]
    ids = {t["id"] for t in tables}
    assert {"provenance-table", "experiments-table", "claims-table"} <= ids
    for t in tables:
        assert t["shown"] and t["rows"] >= 2 and t["w"] > 100 and t["h"] > 20, t
    declared = sum(len(m.CLAIMS) for m in experiments_with_claims().values())
    assert len(facts["claimRows"]) == declared
    assert set(facts["claimRows"]) <= set(STATUSES)
    assert "reproduced" in facts["claimRows"] and "not measured" in facts["claimRows"]
    assert facts["okColour"] not in (None, "rgba(0, 0, 0, 0)")   # the inline style applied
    assert shot[:8] == b"\x89PNG\r\n\x1a\n" and len(shot) > 20_000
