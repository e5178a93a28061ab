"""The built docs in a real headless Chromium (Debian's ``chromium``, which
setup.sh installs): the site is built into a temporary directory, and the
home page, the architecture page and a generated experiment page load from
files, offline, with every image they show (the architecture drawing is an
SVG file, the experiment page's figure a PNG of ``results/reference``)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from testbed.browser import HeadlessBrowser, find_chromium

REPO = Path(__file__).resolve().parents[2]

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(find_chromium() is None,
                       reason="Chromium is not installed (setup.sh installs it)"),
]

PAGE_FACTS = """JSON.stringify({
  title: (document.querySelector('article h1') || {innerText: ''}).innerText,
  text: document.querySelector('article') ? document.querySelector('article').innerText.length : 0,
  images: Array.from(document.querySelectorAll('article img')).map(i => {
    const r = i.getBoundingClientRect();
    return {src: i.getAttribute('src'), ok: i.complete && i.naturalWidth > 0,
            natural: i.naturalWidth, w: r.width, h: r.height};
  }),
  tables: document.querySelectorAll('article table').length,
  styled: getComputedStyle(document.querySelector('.md-header')).position,
})"""

# page -> (its title, the images it must show, at least this many tables)
PAGES = {
    "index.html": ("P4 collectives testbed", ["img/architecture.svg"], 0),
    "architecture/index.html": ("Architecture", ["../img/architecture.svg"], 2),
    "experiments/symphony-ring/index.html": (
        "symphony-ring", ["../../repo/results/reference/symphony-ring-full-cct.png"], 3),
}


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    for module in ("mkdocs", "material", "mkdocs_click", "mkdocstrings", "mkdocstrings_handlers.python"):
        pytest.importorskip(module, reason="the docs extra is not installed (pip install -e '.[docs]')")
    out = tmp_path_factory.mktemp("docs") / "site"
    done = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--config-file",
         str(REPO / "mkdocs.yml"), "--site-dir", str(out)],
        cwd=REPO, capture_output=True, text=True, timeout=300,
        env={**os.environ, "NO_MKDOCS_2_WARNING": "1"})
    assert done.returncode == 0, done.stderr[-4000:]
    return out


@pytest.mark.parametrize("page", sorted(PAGES))
def test_a_docs_page_renders_offline_with_its_images(site: Path, page: str) -> None:
    title, images, tables = PAGES[page]
    with HeadlessBrowser(width=1200, height=900) as b:
        b.open(site / page)
        facts = json.loads(b.evaluate(PAGE_FACTS))
        shot = b.screenshot(width=1200, height=900)
        requests, errors = list(b.requests), list(b.console_errors)

    # Everything comes from the site's files (inline data: icons aside): no
    # font, script or diagram from the network.
    assert all(u.startswith(("file://", "data:")) for u in requests), requests
    # The search index is a script the search worker loads, which Chromium
    # refuses from file:// (mkdocs serve, or any web server, serves it).
    assert not [e for e in errors if "search" not in e], errors
    assert facts["title"].rstrip("¶").strip() == title
    assert facts["text"] > 500 and facts["styled"] in ("sticky", "fixed")
    assert facts["tables"] >= tables
    shown = {img["src"]: img for img in facts["images"]}
    for src in images:
        assert src in shown, f"{page} does not show {src}: {list(shown)}"
    for img in facts["images"]:
        assert img["ok"] and img["natural"] > 0, f"{page}: image did not load: {img}"
        assert img["w"] > 100 and img["h"] > 50, img
    assert shot[:8] == b"\x89PNG\r\n\x1a\n" and len(shot) > 20_000
