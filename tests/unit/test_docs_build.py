"""The docs site builds with warnings as errors (broken links, missing pages,
an experiment without its page or its conclusions), and the tutorial's
experiment runs as the tutorial says."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from testbed.experiment import discover

REPO = Path(__file__).resolve().parents[2]


@pytest.mark.slow
def test_mkdocs_build_strict(tmp_path: Path) -> None:
    for module in ("mkdocs", "material", "mkdocs_click", "mkdocstrings", "mkdocstrings_handlers.python"):
        pytest.importorskip(module, reason="the docs extra is not installed (pip install -e '.[docs]')")
    site = tmp_path / "site"
    done = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--config-file",
         str(REPO / "mkdocs.yml"), "--site-dir", str(site)],
        cwd=REPO, capture_output=True, text=True, timeout=300,
        env={**os.environ, "NO_MKDOCS_2_WARNING": "1"})
    assert done.returncode == 0, done.stderr[-4000:]
    assert (site / "index.html").exists()
    for name in discover():
        page = site / "experiments" / name / "index.html"
        assert page.exists(), f"no page for experiment {name}"
        html = page.read_text()
        assert "Parameters" in html and "Conclusions" in html, name
    cli = (site / "reference" / "cli" / "index.html").read_text()
    assert "testbed run" in cli and "--engine" in cli


def test_the_tutorial_experiment_runs_on_the_sim_engine(tmp_path: Path,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    import experiments
    from testbed.runner import RunOptions, run

    # as the tutorial says: the module, named in the registry
    spec = importlib.util.spec_from_file_location("incast", REPO / "docs" / "tutorial" / "incast.py")
    assert spec is not None and spec.loader is not None
    incast = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, "incast", incast)   # for its dataclasses
    spec.loader.exec_module(incast)
    monkeypatch.setitem(experiments.REGISTRY, "incast", incast)
    assert "incast" in discover()
    summary = run("incast", RunOptions(quick=True, engine="sim", out=tmp_path / "run",
                                       echo=lambda _line: None))
    assert summary["fidelity_ok"], summary["fidelity_verdict"]
    assert summary["incast.bytes_ok"] is True
    assert summary["incast.jain_index"] > 0.9
    saved = json.loads((tmp_path / "run" / "summary.json").read_text())
    assert saved["plots"] == ["plots/incast.png"]
