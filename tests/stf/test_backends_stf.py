"""Every data-path backend gives the same STF results as the default one:
the project's STF tests, and a sample of p4c's corpus when it is present."""

from __future__ import annotations

from pathlib import Path

import pytest

from switches.p4c_corpus import missing_reason, samples_dir
from switches.soft.backends import BACKENDS, backend_available
from switches.soft.stf import run_stf

ROOT = Path(__file__).resolve().parents[2]
P4_DIR = ROOT / "switches" / "p4"
STF_FILES = sorted((P4_DIR / "tests").glob("*.stf"))
OTHER = [b for b in BACKENDS if b != "python"]
CORPUS = samples_dir()
# header stacks, unions, checksums, varbits, tables with entries, clone/recirculate,
# registers, resubmit: a spread of what the generated code and the runtime do
CORPUS_SAMPLE = ["issue1824-bmv2", "checksum-l4-bmv2", "header-stack-ops-bmv2",
                 "union-valid-bmv2", "v1model-special-ops-bmv2", "issue1049-bmv2",
                 "equality-varbit-bmv2", "ternary2-bmv2", "key-bmv2", "issue1814-1-bmv2"]


def _backend(name: str) -> object:
    return pytest.param(name, marks=pytest.mark.skipif(
        not backend_available(name), reason=f"backend {name}: interpreter not installed"))


@pytest.mark.parametrize("backend", [_backend(b) for b in OTHER])
@pytest.mark.parametrize("stf", STF_FILES, ids=[s.name for s in STF_FILES])
def test_project_stf_on_backend(stf: Path, backend: str) -> None:
    p4 = P4_DIR / (stf.name.split(".", 1)[0] + ".p4")
    result = run_stf(p4, stf, backend=backend, timeout=120)
    assert result.passed, "\n".join(result.mismatches)
    assert result.packets == run_stf(p4, stf).packets


@pytest.mark.parametrize("backend", [_backend(b) for b in OTHER])
def test_failing_stf_fails_on_backend(tmp_path: Path, backend: str) -> None:
    src = P4_DIR / "tests" / "l3_router.stf"
    bad = tmp_path / "l3_router.stf"
    bad.write_text(src.read_text() + "\npacket 0 00\nexpect 1 00\n")
    result = run_stf(P4_DIR / "l3_router.p4", bad, backend=backend, timeout=120)
    assert not result.passed and result.mismatches == run_stf(P4_DIR / "l3_router.p4",
                                                              bad).mismatches


@pytest.mark.skipif(not CORPUS.is_dir(), reason=missing_reason())
@pytest.mark.parametrize("backend", [_backend(b) for b in OTHER])
@pytest.mark.parametrize("name", CORPUS_SAMPLE)
def test_corpus_sample_on_backend(name: str, backend: str) -> None:
    p4, stf = CORPUS / f"{name}.p4", CORPUS / f"{name}.stf"
    if not (p4.is_file() and stf.is_file()):
        pytest.skip(f"{name} not in this corpus")
    expected = run_stf(p4, stf)
    got = run_stf(p4, stf, backend=backend, timeout=120)
    assert (got.passed, got.packets, got.mismatches) == (expected.passed, expected.packets,
                                                         expected.mismatches)
