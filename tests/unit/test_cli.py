"""The command line's help and its answers to bad input: ``testbed run NAME
--help`` and ``testbed list --params`` show every parameter's meaning, unit,
default and quick value; a bad parameter value, an output directory that
cannot be made and an STF file naming a table the program lacks each end in
one line on stderr and exit status 2, without a traceback."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from experiments import roce_basics
from testbed.cli import main
from testbed.experiment import discover, param_docs

REPO = Path(__file__).resolve().parents[2]


def _bare(text: str) -> str:
    """``text`` without whitespace: the help wraps lines (and at hyphens)."""
    return "".join(text.split())


def _one_error_line(r: Result) -> str:
    assert r.exit_code == 2, r.output
    assert isinstance(r.exception, SystemExit)
    assert "Traceback" not in r.output
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1, r.stderr
    return lines[0]


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
    assert lines[0].split() == ["PARAMETER", "DEFAULT", "QUICK", "PAPER", "UNIT", "MEANING"]
    meaning_at = lines[0].index("MEANING")
    exps = discover()
    for name, mod in exps.items():
        start = lines.index(next(line for line in lines if line.startswith(f"{name}: ")))
        rows = lines[start + 1:start + 1 + len(param_docs(mod))]
        for d, row in zip(param_docs(mod), rows, strict=True):
            assert row.split()[0] == d.name
            assert row.endswith(d.meaning)
            if all(len(str(v)) < 10 for v in (d.full, d.quick, d.paper)):  # aligned columns
                assert row[meaning_at:] == d.meaning


# ---------------------------------------------------------------------------
# bad input: one line, exit 2


def test_a_bad_parameter_value_names_the_parameter() -> None:
    line = _one_error_line(CliRunner().invoke(main, ["run", "roce-basics", "-p", "window=-4"]))
    assert line == "error: roce-basics: bad parameters: window must be >= 1"


def test_parameters_whose_jobs_cannot_run_are_named(tmp_path: Path) -> None:
    r = CliRunner().invoke(main, ["run", "ring-allreduce", "-p", "count=0", "--engine", "sim",
                                  "--out", str(tmp_path / "run")])
    line = _one_error_line(r)
    assert line.startswith("error: ring-allreduce -p count=0: ")
    assert "collective.count" in line
    assert not (tmp_path / "run").exists()


OUT_COMMANDS = [
    ["run", "roce-basics"],
    ["run", "roce-basics", "--engine", "sim", "--quick"],
    ["run", "all", "--quick"],
    ["report"],
    ["validate"],
    ["bench", "hosts"],
]


@pytest.mark.parametrize("command", OUT_COMMANDS, ids=lambda c: " ".join(c[:2]))
def test_an_output_directory_that_cannot_be_made_is_refused_first(
        command: list[str], tmp_path: Path) -> None:
    if command[0] == "bench" and os.geteuid() != 0:
        pytest.skip("testbed bench hosts checks for root first")
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    out = blocker / "run"
    line = _one_error_line(CliRunner().invoke(main, [*command, "--out", str(out)]))
    assert line == f"error: --out {out}: cannot create the directory: Not a directory"
    if Path("/proc/self").exists():
        line = _one_error_line(CliRunner().invoke(main, [*command, "--out", "/proc/forbidden"]))
        assert line.startswith("error: --out /proc/forbidden: cannot create the directory: ")


def test_checking_an_output_directory_leaves_nothing_behind(tmp_path: Path) -> None:
    out = tmp_path / "a" / "b"
    r = CliRunner().invoke(main, ["run", "roce-basics", "-p", "window=0", "--out", str(out)])
    assert r.exit_code == 2
    assert list(tmp_path.iterdir()) == []


def test_an_stf_table_the_program_lacks_is_named_with_file_and_line(tmp_path: Path) -> None:
    test = tmp_path / "t.stf"
    test.write_text("# a test\nadd no_such_table hdr.ipv4.dstAddr:0x0a000001 drop()\n"
                    "packet 0 00\n")
    r = CliRunner().invoke(main, ["stf", str(REPO / "switches/p4/l3_router.p4"), str(test)])
    line = _one_error_line(r)
    assert line.startswith(f"error: {test}:2: unknown table no_such_table (tables: ")
    assert "MyIngress.ipv4_lpm" in line
    assert r.stdout == ""
