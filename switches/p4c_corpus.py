"""Where p4c's public test corpus is: the P4_16 samples and their STF tests,
p4c's P4Info of them, and p4c's p4include/ (the oracle the soft target and
its tests are checked against).

One setting: the environment variable ``P4C_CORPUS`` names the corpus root,
the directory holding ``testdata/`` (a p4c checkout, or the copy CI uses).
Without it, the root is ``../shared/p4c-corpus`` next to the repository.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

CORPUS_ENV = "P4C_CORPUS"
REPO_ROOT = Path(__file__).resolve().parents[1]
DEFAULT_ROOT = REPO_ROOT.parent / "shared" / "p4c-corpus"

_INCLUDE = re.compile(r'^\s*#\s*include\s*([<"])([^>"]+)[>"]', re.MULTILINE)


def corpus_root() -> Path:
    """The corpus root: ``$P4C_CORPUS``, else ``../shared/p4c-corpus``."""
    env = os.environ.get(CORPUS_ENV)
    return Path(env) if env else DEFAULT_ROOT


def samples_dir(root: Path | None = None) -> Path:
    """``testdata/p4_16_samples``: the programs and their STF tests."""
    return (corpus_root() if root is None else root) / "testdata" / "p4_16_samples"


def outputs_dir(root: Path | None = None) -> Path:
    """``testdata/p4_16_samples_outputs``: p4c's outputs (P4Info) of the samples."""
    return (corpus_root() if root is None else root) / "testdata" / "p4_16_samples_outputs"


def missing_reason() -> str:
    """Why a test needing the corpus is skipped (when samples_dir() is absent)."""
    return (f"p4c corpus not found at {corpus_root()} (set {CORPUS_ENV} to the directory "
            "holding testdata/)")


def is_v1model(p4: Path, seen: set[Path] | None = None) -> bool:
    """True if the program (or a file it includes with quotes) includes v1model.p4."""
    seen = set() if seen is None else seen
    if p4 in seen or not p4.is_file():
        return False
    seen.add(p4)
    for kind, name in _INCLUDE.findall(p4.read_text(errors="replace")):
        if Path(name).name == "v1model.p4":
            return True
        if kind == '"' and is_v1model((p4.parent / name).resolve(), seen):
            return True
    return False


def v1model_stf_tests(samples: Path | None = None) -> list[tuple[Path, Path]]:
    """(program, STF test) of every v1model sample that has an STF test."""
    root = samples_dir() if samples is None else samples
    tests = []
    for stf in sorted(root.rglob("*.stf")):
        p4 = stf.with_suffix(".p4")
        if p4.is_file() and is_v1model(p4):
            tests.append((p4, stf))
    return tests
