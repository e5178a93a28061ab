"""The project's own P4 programs check cleanly and meet the annotation contract."""

from __future__ import annotations

from pathlib import Path

import pytest

from switches.soft.frontend import parse_file
from switches.soft.midend import check
from switches.soft.midend.verify import annotation_problems

P4_DIR = Path(__file__).resolve().parents[2] / "switches" / "p4"
PROGRAMS = sorted(P4_DIR.glob("*.p4"))


@pytest.mark.parametrize("path", PROGRAMS, ids=[p.name for p in PROGRAMS])
def test_program_checks_and_is_fully_annotated(path: Path) -> None:
    prog = parse_file(str(path), include_dirs=(str(P4_DIR / "include"),))
    cp = check(prog)
    assert set(cp.blocks) == {"parser", "verify_checksum", "ingress", "egress", "compute_checksum", "deparser"}
    assert annotation_problems(prog) == []


def test_there_are_programs_to_check() -> None:
    assert PROGRAMS, f"no P4 programs found in {P4_DIR}"
