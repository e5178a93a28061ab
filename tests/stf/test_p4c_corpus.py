"""p4c's v1model STF tests (the conformance oracle) on the soft target: every
one passes, except the programs the soft target reports as unsupported."""

from __future__ import annotations

from pathlib import Path

import pytest

from switches.p4c_corpus import missing_reason, samples_dir, v1model_stf_tests
from switches.soft.frontend.source import P4Unsupported
from switches.soft.stf import run_stf

# declares its own extern function, which only a BMv2 built with it can run
UNSUPPORTED = {"extern-funcs-bmv2"}

TESTS = v1model_stf_tests() if samples_dir().is_dir() else []


@pytest.mark.skipif(not TESTS, reason=missing_reason())
def test_corpus_is_complete() -> None:
    # a partial copy would make the pass count below meaningless
    assert len(TESTS) >= 204


@pytest.mark.parametrize("p4, stf", TESTS, ids=[s.stem for _, s in TESTS])
def test_p4c_stf(p4: Path, stf: Path) -> None:
    if stf.stem in UNSUPPORTED:
        with pytest.raises(P4Unsupported):
            run_stf(p4, stf)
        return
    result = run_stf(p4, stf)
    assert result.passed, "\n".join(result.mismatches)
    assert result.packets > 0 or "packet" not in stf.read_text()
