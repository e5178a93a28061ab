"""What the experiments' plot tests check of the figures ``plot`` wrote."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path


def assert_plots(paths: Sequence[Path], run_dir: Path, names: Sequence[str]) -> None:
    """``paths`` are the figures ``names``, in that order, in the run's
    ``plots/`` directory, each a PNG of more than 10 kB (axes with lines
    drawn on them, not an empty canvas)."""
    assert [x.name for x in paths] == list(names)
    for x in paths:
        assert x.parent == run_dir / "plots", x
        assert x.read_bytes()[:4] == b"\x89PNG" and x.stat().st_size > 10_000, x
