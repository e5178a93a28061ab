"""The project's own P4 programs pass their STF tests on the soft target.

Each ``switches/p4/tests/<program>[.<variant>].stf`` runs against
``switches/p4/<program>.p4``.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from switches.soft.stf import run_stf

ROOT = Path(__file__).resolve().parents[2]
P4_DIR = ROOT / "switches" / "p4"
STF_FILES = sorted((P4_DIR / "tests").glob("*.stf"))


def program_for(stf: Path) -> Path:
    return P4_DIR / (stf.name.split(".", 1)[0] + ".p4")


def describe(result) -> str:
    return "\n".join(str(m) for m in result.mismatches)


def test_every_program_has_stf_tests() -> None:
    programs = {p.stem for p in P4_DIR.glob("*.p4")}
    tested = {program_for(s).stem for s in STF_FILES}
    assert programs and programs <= tested, f"programs without STF tests: {programs - tested}"


@pytest.mark.parametrize("stf", STF_FILES, ids=[s.name for s in STF_FILES])
def test_stf_passes(stf: Path) -> None:
    p4 = program_for(stf)
    assert p4.exists(), f"{stf.name}: no program {p4.name}"
    result = run_stf(p4, stf)
    assert result.passed, describe(result)
    assert result.packets > 0


def test_stf_files_match_generator() -> None:
    """The checked-in .stf files are what scripts/gen_p4_stf.py produces."""
    proc = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "gen_p4_stf.py"), "--check"],
        capture_output=True, text=True, timeout=120,
    )
    assert proc.returncode == 0, proc.stderr


def _mutate(src: Path, dst: Path, pattern: str, repl) -> None:
    text = src.read_text()
    new, n = re.subn(pattern, repl, text, count=1, flags=re.MULTILINE)
    assert n == 1
    dst.write_text(new)


def test_wrong_ttl_expectation_fails(tmp_path: Path) -> None:
    src = P4_DIR / "tests" / "l3_router.stf"
    mutated = tmp_path / "l3_router.stf"
    # Expect TTL 64 (0x40) instead of the decremented 63 (0x3F) on the first output.
    _mutate(src, mutated, r"^(expect \d+ [0-9A-F]{44})3F", r"\g<1>40")
    result = run_stf(program_for(src), mutated)
    assert not result.passed
    assert result.mismatches


def test_missing_drop_expectation_fails(tmp_path: Path) -> None:
    """Expecting output for a packet the router must drop (no route) fails."""
    src = P4_DIR / "tests" / "l3_router.stf"
    mutated = tmp_path / "l3_router.stf"
    text = src.read_text()
    m = re.search(r"^packet 0 (\S+)\n#   -> dropped", text, flags=re.MULTILINE)
    assert m
    mutated.write_text(text.replace(m.group(0), f"packet 0 {m.group(1)}\nexpect 1 {m.group(1)}", 1))
    result = run_stf(program_for(src), mutated)
    assert not result.passed


def test_ecn_marking_expectation_is_checked(tmp_path: Path) -> None:
    """With the built-in ECN config an idle queue is not marked: the CE expectations
    of l3_ecn.stf (Kmin = Kmax = 0) must then fail."""
    src = P4_DIR / "tests" / "l3_ecn.stf"
    mutated = tmp_path / "l3_ecn.stf"
    _mutate(src, mutated, r"^setdefault MyEgress\.ecn_config .*$", "")
    result = run_stf(program_for(src), mutated)
    assert not result.passed
