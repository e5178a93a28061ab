"""The command line's help: ``testbed run NAME --help`` and ``testbed list
--params`` show every parameter's meaning, unit, default and quick value."""

from __future__ import annotations

import pytest
from click.testing import CliRunner

from experiments import roce_basics
from testbed.cli import main
from testbed.experiment import discover, param_docs


def _bare(text: str) -> str:
    """``text`` without whitespace: the help wraps lines (and at hyphens)."""
    return "".join(text.split())


# ---------------------------------------------------------------------------
# help


def test_run_help_lists_the_experiments_parameters() -> None:
    r = CliRunner().invoke(main, ["run", "roce-basics", "--help"])
    assert r.exit_code == 0, r.output
    assert "Usage:" in r.output and "--engine" in r.output    # the command's own help
    assert "Parameters of roce-basics (-p NAME=VALUE)" in r.output
    out = _bare(r.output)
    for d in param_docs(roce_basics):
        assert _bare(f"{d.name} {d.meaning}") in out, d.name
    single = next(d for d in param_docs(roce_basics) if d.name == "single_msgs")
    assert (single.full, single.quick) == (120, 30)
    assert _bare(f"single_msgs {single.meaning} [messages]; default 120, quick 30") in out


def test_run_help_finds_the_name_among_options() -> None:
    r = CliRunner().invoke(main, ["run", "--quick", "-p", "window=2", "--engine", "sim",
                                  "ring-allreduce", "-h"])
    assert r.exit_code == 0, r.output
    assert "Parameters of ring-allreduce" in r.output
    assert _bare("payload real (every result checked bit for bit)") in _bare(r.output)


@pytest.mark.parametrize("args", [["run", "--help"], ["run", "all", "--help"]])
def test_run_help_without_one_experiment_has_no_parameters(args: list[str]) -> None:
    r = CliRunner().invoke(main, args)
    assert r.exit_code == 0, r.output
    assert "Usage:" in r.output and "Parameters of" not in r.output


def test_run_help_of_an_unknown_experiment_says_so() -> None:
    r = CliRunner().invoke(main, ["run", "nope", "--help"])
    assert r.exit_code == 0, r.output
    assert "Usage:" in r.output and "unknown experiment 'nope'" in r.output


def test_list_params_is_one_table_of_every_parameter() -> None:
    r = CliRunner().invoke(main, ["list", "--params"])
    assert r.exit_code == 0, r.output
    lines = r.output.splitlines()
    assert lines[0].split() == ["PARAMETER", "DEFAULT", "QUICK", "UNIT", "MEANING"]
    meaning_at = lines[0].index("MEANING")
    exps = discover()
    for name, mod in exps.items():
        start = lines.index(next(line for line in lines if line.startswith(f"{name}: ")))
        rows = lines[start + 1:start + 1 + len(param_docs(mod))]
        for d, row in zip(param_docs(mod), rows, strict=True):
            assert row.split()[0] == d.name
            assert row.endswith(d.meaning)
            if len(str(d.full)) < 10 and len(str(d.quick)) < 10:   # aligned columns
                assert row[meaning_at:] == d.meaning
