"""The ``testbed`` command line."""

from __future__ import annotations

import dataclasses
import json
import os
import sys
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, Any, TextIO

import click

if TYPE_CHECKING:
    from testbed.experiment import Experiment, ParamDoc
    from testbed.runner.options import RunOptions

from switches.targets import TARGETS
from testbed.doctor import ProviderDetail, TargetDetail, doctor_report


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
def main() -> None:
    """Testbed for in-network ML collectives on P4 switches."""


# ---------------------------------------------------------------------------
# compile


def _parse_defines(defines: tuple[str, ...]) -> dict[str, str] | None:
    out: dict[str, str] = {}
    for d in defines:
        name, _, value = d.partition("=")
        out[name] = value or "1"
    return out or None


@main.command("compile")
@click.argument("program", type=click.Path(exists=True, dir_okay=False))
@click.option("-o", "--output", type=click.Path(dir_okay=False), help="write the generated Python here")
@click.option("-I", "--include", "include_dirs", multiple=True, help="include directory")
@click.option("-D", "--define", "defines", multiple=True, help="preprocessor define NAME[=VALUE]")
def compile_cmd(program: str, output: str | None, include_dirs: tuple[str, ...],
                defines: tuple[str, ...]) -> None:
    """Compile PROGRAM (P4_16, v1model) for the soft target; errors as file:line:col."""
    from switches.soft.compiler import compile_program
    from switches.soft.frontend.source import P4Error

    try:
        module = compile_program(program, include_dirs=include_dirs, defines=_parse_defines(defines))
    except P4Error as e:
        click.echo(str(e), err=True)
        sys.exit(1)
    info = getattr(module, "INFO", None)
    if output:
        source = _module_source(module)
        if source is None:
            click.echo("error: the compiled module carries no source text to write", err=True)
            sys.exit(1)
        try:
            Path(output).write_text(source)
        except OSError as e:
            click.echo(f"error: cannot write {output}: {e.strerror or e}", err=True)
            sys.exit(1)
        click.echo(f"wrote {output}")
    if info is not None:
        click.echo(f"{program}: ok ({len(info.tables)} tables, {len(info.actions)} actions, "
                   f"{len(info.registers)} registers, {len(info.counters)} counters, "
                   f"{len(info.meters)} meters)")


def _module_source(module: ModuleType) -> str | None:
    for attr in ("__source__", "SOURCE", "source"):
        text = getattr(module, attr, None)
        if isinstance(text, str):
            return text
    path = getattr(module, "__file__", None)
    if path and os.path.isfile(path):
        return Path(path).read_text()
    return None


# ---------------------------------------------------------------------------
# stf


@main.command("stf")
@click.argument("program", type=click.Path(exists=True, dir_okay=False))
@click.argument("test", type=click.Path(exists=True, dir_okay=False))
@click.option("--json", "as_json", is_flag=True, help="print the result as JSON")
def stf_cmd(program: str, test: str, as_json: bool) -> None:
    """Run the STF test TEST against PROGRAM on the soft target.

    Exit status: 0 pass, 1 mismatch (each one printed), 2 compile or STF error.
    """
    from switches.soft import stf

    sys.exit(stf.main([program, test, *(["--json"] if as_json else [])]))


# ---------------------------------------------------------------------------
# switch-cli


@main.command("switch-cli")
@click.option("--port", "--thrift-port", "-p", "port", type=int, required=True,
              help="the switch's control port (--thrift-port as in simple_switch_CLI)")
@click.option("--host", default="127.0.0.1", show_default=True)
@click.option("--keep-going", "-k", is_flag=True, help="go on after a failing command")
@click.option("--quiet", "-q", is_flag=True, help="print only errors")
@click.argument("file", type=click.File("r"), required=False)
def switch_cli_cmd(port: int, host: str, keep_going: bool, quiet: bool,
                   file: TextIO | None) -> None:
    """Send simple_switch_CLI commands from FILE (or stdin) to a soft switch."""
    from switches.soft.control.client import SwitchClient, SwitchConnectionError, SwitchError

    src = file if file is not None else sys.stdin
    failed = 0
    try:
        with SwitchClient(port, host=host) as client:
            for n, raw in enumerate(src, 1):
                line = raw.strip()
                if not line or line.startswith("#"):
                    continue
                try:
                    reply = client.execute(line)
                except SwitchError as e:
                    failed += 1
                    click.echo(f"line {n}: {line}\nError: {e.message}", err=True)
                    if not keep_going:
                        sys.exit(1)
                    continue
                if not quiet and reply:
                    click.echo(reply)
    except SwitchConnectionError as e:
        click.echo(f"error: {e}", err=True)
        sys.exit(2)
    sys.exit(1 if failed else 0)


# ---------------------------------------------------------------------------
# experiments: list, run, plot


def _shown(value: object) -> str:
    """A parameter's value (of any type) as ``-p NAME=VALUE`` takes it."""
    if value is None:
        return "none"
    if value == "":
        return '""'
    return str(value)


_Row = tuple[str, str, str, str, str, str]
_PARAMS_HEADER: _Row = ("PARAMETER", "DEFAULT", "QUICK", "PAPER", "UNIT", "MEANING")
_VALUE_COLUMN_MAX = 10     # a longer value pushes the rest of its row right


def _paper_shown(d: ParamDoc) -> str:
    """A parameter's paper-profile value ("-" without one; "*" where the
    profile runs less than the paper's value, ``--help`` says what)."""
    if not d.has_paper:
        return "-"
    return _shown(d.paper) + ("*" if d.scaled_down is not None else "")


def _params_rows(mod: Experiment) -> list[_Row]:
    """(name, default, quick, paper, unit, meaning) of each of experiment ``mod``'s
    parameters."""
    from testbed.experiment import param_docs

    return [(d.name, _shown(d.full), _shown(d.quick), _paper_shown(d), d.unit or "-",
             d.meaning) for d in param_docs(mod)]


def _column_widths(rows: Sequence[_Row]) -> list[int]:
    widths = [max(len(r[i]) for r in rows) for i in range(len(_PARAMS_HEADER) - 1)]
    return [min(w, _VALUE_COLUMN_MAX) if i in (1, 2, 3) else w for i, w in enumerate(widths)]


def _table_lines(rows: Sequence[_Row], widths: Sequence[int], indent: str = "  ") -> list[str]:
    """``rows`` in columns of ``widths`` (the last column unbounded); a cell
    wider than its column pushes the rest of its row right."""
    out = []
    for row in rows:
        line, edge = indent, len(indent)
        for cell, w in zip(row[:-1], widths, strict=True):
            edge += w + 2
            line += cell
            line += " " * max(2, edge - len(line))
        out.append(line + row[-1])
    return out


@main.command("list")
@click.option("--params", "show_params", is_flag=True, help="also show each parameter's "
              "default, quick and paper values, unit and meaning (paper: '-' where the "
              "experiment has no paper profile, '*' where it runs less than the paper)")
def list_cmd(show_params: bool) -> None:
    """List the experiments (``testbed run NAME``)."""
    from testbed.experiment import describe, discover

    exps = discover()
    if not show_params:
        for name, mod in exps.items():
            click.echo(f"{name:<20} {describe(mod)}")
        return
    rows = {name: _params_rows(mod) for name, mod in exps.items()}
    widths = _column_widths([_PARAMS_HEADER] + [r for rs in rows.values() for r in rs])
    click.echo(_table_lines([_PARAMS_HEADER], widths)[0])
    for name, mod in exps.items():
        click.echo(f"{name}: {describe(mod)}")
        for line in _table_lines(rows[name], widths):
            click.echo(line)


class _RunCommand(click.Command):
    """``testbed run``: with NAME, ``--help`` also lists that experiment's
    parameters (what ``-p NAME=VALUE`` sets)."""

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        if not ctx.resilient_parsing and set(args) & set(ctx.help_option_names):
            try:   # NAME as given, before the eager --help prints and exits
                opts, _, _ = self.make_parser(ctx).parse_args(args=list(args))
            except click.UsageError:
                opts = {}
            ctx.meta["testbed.run.name"] = opts.get("name")
        return super().parse_args(ctx, args)

    def format_help(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        super().format_help(ctx, formatter)
        name = ctx.meta.get("testbed.run.name")
        if not isinstance(name, str) or name == "all":
            return
        from testbed.experiment import ExperimentError, load

        try:
            mod = load(name)
        except ExperimentError as e:
            formatter.write_paragraph()
            formatter.write_text(str(e))
            return
        from testbed.experiment import has_profile, param_docs

        paper = has_profile(mod, "paper")
        with formatter.section(f"Parameters of {mod.NAME} (-p NAME=VALUE)"):
            formatter.write_text(
                "Each with its meaning [unit], its default (the full profile's) and its "
                "value in the quick profile (--profile quick)"
                + (" and the paper profile (--profile paper; where it runs less than the "
                   "paper, the paper's value and why)." if paper else
                   "; this experiment has no paper profile."))
            formatter.write_paragraph()
            rows = []
            for d, (pname, full, quick, paper_v, unit, meaning) in zip(
                    param_docs(mod), _params_rows(mod), strict=True):
                text = f"{meaning}{f' [{unit}]' if unit != '-' else ''}; default {full}, " \
                       f"quick {quick}"
                if paper:
                    text += f", paper {paper_v.rstrip('*')}"
                    if d.scaled_down is not None:
                        text += (f" (the paper's: {_shown(d.scaled_down.paper)}; "
                                 f"{d.scaled_down.reason})")
                rows.append((pname, text))
            formatter.write_dl(rows)


_PROFILE_HELP = ("the experiment's parameters: quick (short), full (the default) or paper "
                 "(the paper's own scale; --engine sim only, and only the experiments that "
                 "declare one)")


def _profile_of(quick: bool, profile: str | None) -> str:
    """--profile, with --quick as --profile quick."""
    if quick and profile not in (None, "quick"):
        raise click.UsageError(f"--quick is --profile quick: not with --profile {profile}")
    return profile or ("quick" if quick else "full")


def _check_profile_engine(profile: str, engine: str) -> None:
    """One line and exit 2 if ``profile`` cannot run on ``engine``."""
    from testbed.experiment import PROFILE_ENGINES

    engines = PROFILE_ENGINES[profile]
    if engines is not None and engine not in engines:
        click.echo(f"error: --profile {profile} runs on the virtual-time engine only: add "
                   "--engine sim", err=True)
        sys.exit(2)


@main.command("run", cls=_RunCommand)
@click.argument("name")
@click.option("--profile", type=click.Choice(["quick", "full", "paper"]), default=None,
              help=_PROFILE_HELP)
@click.option("--quick", is_flag=True, help="the same as --profile quick")
@click.option("--target", type=click.Choice(list(TARGETS)), default="soft", show_default=True,
              help="switch target")
@click.option("--hosts", "hosts_provider", type=click.Choice(["udp", "rxe"]), default="udp",
              show_default=True, help="host RoCE provider")
@click.option("--out", type=click.Path(file_okay=False, path_type=Path),
              help="run directory (default: results/NAME-TIMESTAMP/)")
@click.option("--pcap", is_flag=True, help="write pcaps of every switch port")
@click.option("-p", "--param", "params", multiple=True, metavar="NAME=VALUE",
              help="override a parameter (`testbed run NAME --help` lists NAME's)")
@click.option("--phase-retries", type=click.IntRange(0, 10), default=0, show_default=True,
              help="run a phase again, up to N times, when its own fidelity verdict fails "
                   "(the unfaithful tries are kept apart and listed in summary.json)")
@click.option("--engine", type=click.Choice(["mininet", "sim"]), default="mininet",
              show_default=True,
              help="mininet: real time, namespaces and processes (root); sim: virtual time "
                   "in one process, at the plan's own rates, deterministic (no root)")
@click.option("--seed", type=int, default=1, show_default=True,
              help="--engine sim: the run's seed (its switches' random streams)")
@click.option("--host-links", type=click.Choice(["wire", "veth"]), default="wire",
              show_default=True,
              help="--engine sim: a host's frame reaches the switch with its last bit "
                   "(wire: the NIC serialises it) or its first (veth: as on Mininet)")
@click.option("--interpreter", type=click.Choice(["auto", "pypy", "cpython"]), default="auto",
              show_default=True,
              help="--engine sim: run the simulation under PyPy (2-3x faster; set up by "
                   "./setup.sh as .venv-pypy) or CPython; auto: PyPy where set up")
def run_cmd(name: str, profile: str | None, quick: bool, target: str, hosts_provider: str,
            out: Path | None, pcap: bool, params: tuple[str, ...], phase_retries: int,
            engine: str, seed: int, host_links: str, interpreter: str) -> None:
    """Run experiment NAME in Mininet (or in virtual time with --engine sim);
    results, timelines and plots go to --out.

    NAME "all" runs every experiment in sequence with one progress display,
    each into its own directory under --out (default: results/all-TIMESTAMP/).

    Exit status: 0 done (summary.json has the results and the fidelity
    verdict; for "all": every run finished), 1 the run failed (the message
    says where), 2 bad arguments, 130 interrupted.
    """
    from hosts.agent_spec import SpecError
    from testbed.experiment import ExperimentError
    from testbed.runner import RunError, RunOptions, run

    chosen = _profile_of(quick, profile)
    _check_profile_engine(chosen, engine)
    _check_out_dir(out)
    overrides = {}
    for item in params:
        k, sep, v = item.partition("=")
        if not sep:
            raise click.BadParameter(f"{item!r} is not NAME=VALUE", param_hint="--param")
        overrides[k.strip()] = v.strip()
    opts = RunOptions(quick=chosen == "quick", profile=chosen, target=target,
                      hosts=hosts_provider, out=out, pcap=pcap,
                      overrides=overrides, echo=lambda s: click.echo(s),
                      phase_retries=phase_retries, engine=engine, seed=seed,
                      host_links=host_links, interpreter=interpreter)
    if name == "all":
        if overrides:
            raise click.UsageError("-p/--param sets one experiment's parameters: not with 'all'")
        _run_all(opts)
        return
    try:
        summary = run(name, opts)
    except ExperimentError as e:
        click.echo(f"error: {e}", err=True)
        sys.exit(2)
    except SpecError as e:   # the plan's jobs, from parameters Params itself accepted
        given = "".join(f" -p {item}" for item in params)
        click.echo(f"error: {name}{given}: these parameters make a job the hosts cannot "
                   f"run: {e}", err=True)
        sys.exit(2)
    except RunError as e:
        click.echo(f"error: {e}", err=True)
        sys.exit(1)
    except KeyboardInterrupt:
        click.echo("interrupted: " + ("the run directory's summary.json says so"
                                      if engine == "sim" else "network torn down"), err=True)
        sys.exit(130)
    click.echo(f"summary: {Path(summary['run_dir']) / 'summary.json'}")
    for p in summary.get("plots", []):
        click.echo(f"plot: {Path(summary['run_dir']) / p}")
    if not summary.get("fidelity_ok"):
        click.echo("WARNING: this run is NOT FAITHFUL, so its figures are not results: the "
                   "machine did not keep up with the emulation (overloaded, or its CPUs "
                   "were held by the hypervisor: the verdict names the time stolen). "
                   "Verdict: " + summary.get("fidelity_verdict", "?"), err=True)


def _stamp() -> str:
    import datetime as dt

    return dt.datetime.now().strftime("%Y%m%d-%H%M%S")


def _check_out_dir(path: Path | str | None) -> None:
    """Exit 2 with one line unless directory ``path`` (an --out) can be
    created, with its parents, and written, before anything starts. Leaves nothing behind: the
    directories it had to create are removed again."""
    if path is None:
        return
    import errno
    import tempfile

    path = Path(path)
    created: list[Path] = []
    doing = "create"
    try:
        if path.exists() and not path.is_dir():
            raise NotADirectoryError(errno.ENOTDIR, os.strerror(errno.ENOTDIR))
        missing = []
        p = path
        while not p.exists() and p != p.parent:
            missing.append(p)
            p = p.parent
        for d in reversed(missing):
            d.mkdir()
            created.append(d)
        doing = "write in"
        with tempfile.TemporaryFile(dir=path):
            pass
    except OSError as e:
        click.echo(f"error: --out {path}: cannot {doing} the directory: "
                   f"{e.strerror or e}", err=True)
        sys.exit(2)
    finally:
        for d in reversed(created):
            try:
                d.rmdir()
            except OSError:
                pass


def _check_can_run(opts: RunOptions) -> None:
    from testbed.runner import RunError, check_environment

    if opts.engine == "sim":
        return          # each run checks its own plan; the machine needs nothing
    try:
        check_environment(opts.target, opts.hosts)
    except RunError as e:
        click.echo(f"error: {e}", err=True)
        sys.exit(1)


@contextmanager
def _stopped_runs_exit(after: str = "") -> Iterator[None]:
    """Exit as a stopped command when a command of several runs is stopped:
    Ctrl-C (130) or SIGTERM during a run (RunTerminated, 143); ``after``
    is added to the message."""
    from testbed.runner import RunTerminated

    try:
        yield
    except KeyboardInterrupt:
        click.echo(f"\ninterrupted: network torn down{after}", err=True)
        sys.exit(130)
    except RunTerminated as e:
        click.echo(f"\nstopped: {e}{after}", err=True)
        sys.exit(143)


def _run_all(opts: RunOptions) -> None:
    from testbed.experiment import discover, has_profile
    from testbed.runner import REPO_ROOT
    from testbed.suite import SuiteProgress, format_table, run_suite, write_record

    _check_can_run(opts)
    profile = opts.profile_name()
    names = [n for n, m in discover().items() if has_profile(m, profile)]
    root = Path(opts.out) if opts.out else REPO_ROOT / "results" / f"all-{_stamp()}"
    if root.exists() and any(root.iterdir()):
        click.echo(f"error: output directory {root} exists and is not empty", err=True)
        sys.exit(2)
    prog = SuiteProgress(len(names))
    load_start = os.getloadavg()
    click.echo(f"running {len(names)} experiments"
               f"{f' ({profile} profile)' if profile != 'full' else ''} "
               f"into {root}: {', '.join(names)}")
    with _stopped_runs_exit():
        runs = run_suite(names, root, opts, progress=prog)
    click.echo(format_table(runs, prog.elapsed))
    write_record(root / "suite.json", runs, prog.elapsed,
                 "testbed run all" + (f" --profile {profile}" if profile != "full" else ""),
                 load_start)
    click.echo(f"times and verdicts: {root / 'suite.json'}")
    click.echo(f"report: testbed report --reuse {root}")
    if not all(r.ok for r in runs):
        sys.exit(1)


# ---------------------------------------------------------------------------
# report


@main.command("validate")
@click.argument("names", nargs=-1)
@click.option("--mininet-runs", type=click.IntRange(1, 20), default=1, show_default=True,
              help="Mininet runs per experiment (a spread needs about 4)")
@click.option("--sim-seeds", type=click.IntRange(1, 50), default=4, show_default=True,
              help="virtual-time runs per experiment, seeds 1..N")
@click.option("--full", is_flag=True, help="the full profiles (default: quick)")
@click.option("--host-links", type=click.Choice(["wire", "veth"]), default="wire",
              show_default=True, help="the simulated runs' host links (see `testbed run --help`)")
@click.option("--reuse-mininet", type=click.Path(exists=True, file_okay=False, path_type=Path),
              help="take the Mininet runs from an earlier validation's directory")
@click.option("--out", type=click.Path(file_okay=False, path_type=Path),
              help="output directory (default: results/validate-TIMESTAMP/)")
def validate_cmd(names: tuple[str, ...], mininet_runs: int, sim_seeds: int, full: bool,
                 host_links: str, reuse_mininet: Path | None, out: Path | None) -> None:
    """Run the same plans on the Mininet and the virtual-time engines and compare
    their figures (OUT/validation.md, OUT/validation.json; every run under OUT/runs/).

    NAMES default to every experiment with figures to compare. The Mininet
    runs need root. Exit status: 0 every figure agrees, 1 some differ or were
    not measured, 2 bad arguments."""
    from testbed.runner import REPO_ROOT, RunOptions
    from testbed.validate import FIGURES, markdown, validate

    chosen = list(names) or list(FIGURES)
    unknown = [n for n in chosen if n not in FIGURES]
    if unknown:
        raise click.UsageError(f"{', '.join(unknown)}: no figures to compare "
                               f"(known: {', '.join(FIGURES)})")
    _check_out_dir(out)
    out_dir = out or REPO_ROOT / "results" / f"validate-{_stamp()}"
    if out_dir.exists() and any(out_dir.iterdir()):
        click.echo(f"error: output directory {out_dir} exists and is not empty", err=True)
        sys.exit(2)
    if reuse_mininet is None:
        _check_can_run(RunOptions())
    with _stopped_runs_exit("; no comparison written"):
        val = validate(chosen, out_dir, mininet_runs=mininet_runs, sim_seeds=sim_seeds,
                       quick=not full, host_links=host_links, echo=lambda s: click.echo(s),
                       reuse_mininet=reuse_mininet)
    click.echo(markdown(val))
    click.echo(f"comparison: {out_dir / 'validation.md'}")
    if not all(c.verdict == "agrees" for c in val.comparisons):
        sys.exit(1)


@main.command("report")
@click.argument("names", nargs=-1)
@click.option("--profile", type=click.Choice(["quick", "full", "paper"]), default=None,
              help="the profile of new runs (default quick) and of the runs judged; paper: "
                   "the experiments with a paper profile, at the paper's scale (--engine sim)")
@click.option("--reuse", "reuse", multiple=True,
              type=click.Path(exists=True, file_okay=False, path_type=Path),
              help="judge these run directories (or directories of them) instead of "
                   "running; repeatable")
@click.option("--run-missing", is_flag=True,
              help="with --reuse: also run the experiments none of the reused runs covers")
@click.option("--repeat", type=click.IntRange(1, 20), default=1, show_default=True,
              help="runs per experiment (their spread is reported)")
@click.option("--out", type=click.Path(file_okay=False, path_type=Path),
              help="report directory (default: results/report-TIMESTAMP/)")
@click.option("--target", type=click.Choice(list(TARGETS)), default="soft", show_default=True)
@click.option("--hosts", "hosts_provider", type=click.Choice(["udp", "rxe"]), default="udp",
              show_default=True)
@click.option("--no-reanalyse", is_flag=True,
              help="judge reused runs on the results they recorded (default: analyse their "
                   "saved timelines again with the current code)")
@click.option("--engine", type=click.Choice(["mininet", "sim"]), default="mininet",
              show_default=True, help="the engine of new runs (see `testbed run --help`)")
@click.option("--seed", type=int, default=1, show_default=True,
              help="--engine sim: the first run's seed; repeated runs take the next ones")
@click.option("--interpreter", type=click.Choice(["auto", "pypy", "cpython"]), default="auto",
              show_default=True, help="--engine sim: PyPy or CPython (see `testbed run --help`)")
@click.option("--jobs", type=int, default=1, show_default=True, metavar="N",
              help="--engine sim: run N of the report's runs at a time, each in a process of "
                   "its own on this machine")
@click.option("--scheduler", metavar="ADDRESS",
              help="--engine sim: run the report's runs on the workers of this Dask distributed "
                   "scheduler (e.g. tcp://host:8786; pip install -e '.[cluster]'); the workers "
                   "must see --out at the same path")
def report_cmd(names: tuple[str, ...], profile: str | None, reuse: tuple[Path, ...],
               run_missing: bool, repeat: int, out: Path | None, target: str,
               hosts_provider: str, no_reanalyse: bool, engine: str, seed: int,
               interpreter: str, jobs: int, scheduler: str | None) -> None:
    """Reproduce the papers' claims and write a report beside them.

    Runs every experiment that declares paper claims (or NAMES only), or
    judges the runs given with --reuse, and writes OUT/index.html (one
    offline page plus img/) and OUT/report.md: per claim the paper's value,
    the measured mean and spread, and reproduced / not reproduced / not
    faithful / not measured; the runs' plots by figure; every run's fidelity
    verdict; provenance. New runs go to OUT/runs/.

    The runs are independent: with --engine sim, --jobs N runs N at a time
    on this machine and --scheduler ADDRESS on a Dask cluster; the files are
    the same whichever process writes them. A run whose process or worker
    fails (not the run itself) is run once more, then reported as failed.

    Exit status: 0 written, 1 a run or the report failed, 2 bad arguments,
    130 interrupted.
    """
    import shlex

    from testbed.report import (
        ReportError,
        build,
        collect_runs,
        experiments_with_claims,
        write,
    )
    from testbed.runner import REPO_ROOT, RunOptions
    from testbed.suite import (
        SuiteError,
        SuiteProgress,
        connect,
        format_table,
        run_suite,
        write_record,
    )

    if jobs < 1:
        click.echo(f"error: --jobs {jobs}: the number of runs at a time is 1 or more", err=True)
        sys.exit(2)
    parallel = f"--scheduler {scheduler}" if scheduler else f"--jobs {jobs}" if jobs > 1 else ""
    if parallel and engine != "sim":
        click.echo(f"error: {parallel}: parallel runs are for --engine sim (a Mininet run "
                   "needs the whole machine, and root)", err=True)
        sys.exit(2)
    if scheduler and jobs > 1:
        click.echo(f"error: --jobs {jobs} and --scheduler: give one (on a cluster its workers "
                   "set how many runs go at a time)", err=True)
        sys.exit(2)
    claimed = experiments_with_claims(profile)
    unknown = [n for n in names if n not in claimed]
    if unknown:
        with_profile = f" and a {profile} profile" if profile == "paper" else ""
        raise click.UsageError(f"{', '.join(unknown)}: no such experiment with paper claims"
                               f"{with_profile} (with them: {', '.join(claimed) or 'none'})")
    chosen = {n: claimed[n] for n in (names or claimed)}
    if run_missing and not reuse:
        raise click.UsageError("--run-missing goes with --reuse")
    _check_out_dir(out)
    out_dir = Path(out) if out else REPO_ROOT / "results" / f"report-{_stamp()}"
    if out_dir.exists() and any(out_dir.iterdir()):
        click.echo(f"error: output directory {out_dir} exists and is not empty", err=True)
        sys.exit(2)
    try:
        runs = collect_runs(list(reuse)) if reuse else []
    except ReportError as e:
        click.echo(f"error: {e}", err=True)
        sys.exit(2)
    covered = {r.experiment for r in runs}
    to_run = [n for n in chosen if not reuse or (run_missing and n not in covered)]
    failed = False
    if to_run:
        _check_profile_engine(profile or "quick", engine)
        opts = RunOptions(quick=(profile or "quick") == "quick", profile=profile or "quick",
                          target=target, hosts=hosts_provider, engine=engine, seed=seed,
                          interpreter=interpreter)
        _check_can_run(opts)
        client = None
        if scheduler:
            try:
                client = connect(scheduler)
            except SuiteError as e:
                click.echo(f"error: --scheduler: {e}", err=True)
                sys.exit(2)
        where = (f" on the Dask scheduler at {scheduler}" if scheduler else
                 f", {jobs} at a time" if jobs > 1 else "")
        prog = SuiteProgress(len(to_run) * repeat)
        load_start = os.getloadavg()
        click.echo(f"running {', '.join(to_run)} ({profile or 'quick'} profile"
                   f"{f', {repeat} runs each' if repeat > 1 else ''}) into {out_dir / 'runs'}"
                   + where)
        try:
            with _stopped_runs_exit("; no report written"):
                done = run_suite(to_run, out_dir / "runs", opts, repeat=repeat, progress=prog,
                                 jobs=jobs, client=client)
        finally:
            if client is not None:
                client.close()
        click.echo(format_table(done, prog.elapsed))
        write_record(out_dir / "runs" / "suite.json", done, prog.elapsed,
                     f"testbed report --profile {profile or 'quick'}"
                     + (f" {parallel}" if parallel else ""), load_start)
        failed = not all(r.ok for r in done)
        try:
            runs += collect_runs([out_dir / "runs"])
        except ReportError as e:   # no run got as far as its summary: the report says so
            click.echo(f"warning: {e}", err=True)
    runs = [r for r in runs if r.experiment in chosen or not names]
    command = "testbed report " + " ".join(shlex.quote(a) for a in sys.argv[2:])
    try:
        rep = build(runs, profile=profile, command=command.strip(),
                    experiments=chosen, reanalyse=not no_reanalyse)
        index, md = write(rep, out_dir)
    except (ReportError, OSError) as e:
        click.echo(f"error: {e}", err=True)
        sys.exit(1)
    counts = ", ".join(f"{s} {n}" for s, n in rep.counts().items())
    click.echo(f"claims: {counts}")
    click.echo(f"report: {index}\nmarkdown: {md}")
    if failed:
        sys.exit(1)


@main.command("plot")
@click.argument("run_dir", type=click.Path(exists=True, file_okay=False, path_type=Path))
def plot_cmd(run_dir: Path) -> None:
    """Re-draw the figures of the run in RUN_DIR from its saved timelines."""
    from testbed.runner import RunError, replot

    try:
        paths = replot(run_dir)
    except RunError as e:
        click.echo(f"error: {e}", err=True)
        sys.exit(1)
    for p in paths:
        click.echo(f"plot: {p}")


# ---------------------------------------------------------------------------
# clean


@main.command("clean")
@click.option("--all", "include_live", is_flag=True,
              help="also what runs that are still going made (stops them)")
def clean_cmd(include_live: bool) -> None:
    """Remove what a crashed run left: the processes (node shells, switch
    daemons, host agents) and links the testbed recorded as its own
    (testbed.owned). Nothing else is touched: no process is found by name and
    no file is removed."""
    if os.geteuid() != 0:
        click.echo("error: testbed clean needs root", err=True)
        sys.exit(1)
    from testbed.net import leftovers
    from testbed.owned import remove_recorded, state_dir

    done = remove_recorded(include_live_owners=include_live)
    click.echo(f"records of finished runs cleaned: {done.records_removed} (in {state_dir()})")
    click.echo(f"processes stopped: {len(done.stopped)}")
    for what in done.stopped:
        click.echo(f"  {what}")
    click.echo(f"interfaces deleted: {len(done.deleted)}" + "".join(
        f"\n  {n}" for n in done.deleted))
    for why in done.failed:
        click.echo(f"not removed: {why}")
    for owner in sorted(set(done.skipped_live_owners)):
        click.echo(f"left alone: the network of process {owner}, which is still running "
                   "(--all stops it too)")
    rest = leftovers()
    if rest:
        click.echo("not recorded as the testbed's, so left alone (remove them by hand if "
                   "they are yours):")
        for item in rest:
            click.echo(f"  {item}")


# ---------------------------------------------------------------------------
# doctor


@main.command("doctor")
@click.option("--json", "as_json", is_flag=True)
def doctor_cmd(as_json: bool) -> None:
    """Show which targets and providers this machine can run."""
    r = doctor_report()
    if as_json:
        click.echo(json.dumps(r, indent=2))
        return

    def yn(v: bool) -> str:
        return "yes" if v else "no"

    def why(detail: TargetDetail, own: str) -> str:
        if detail["available"]:
            # a version under the target's own name is no tool's (the soft
            # target's "built in", already in its row's label)
            return "".join(f"\n{'':<4}{k}: {v}" for k, v in detail["versions"].items()
                           if k != own)
        return f"  ({detail['reason']})"

    def why_not(detail: ProviderDetail) -> str:
        if detail["available"]:
            return f"  ({detail['devices']})" if detail["devices"] else ""
        return f"  ({detail['reason']})"

    td, pd = r["targets_detail"], r["providers_detail"]
    rows = [
        (f"target {name} ({t.runs})", r["targets"][name], why(td[name], name))
        for name, t in TARGETS.items()
    ] + [
        ("provider udp (userspace RoCEv2)", r["providers"]["udp"], ""),
        ("provider rxe (rdma_rxe + pyverbs)", r["providers"]["rxe"], why_not(pd["rxe"])),
        ("rxe hosts in Mininet (initial namespace)", r["rxe_hosts"],
         f"  ({r['rxe_hosts_reason']})" if r["rxe_hosts_reason"] else ""),
        ("engine mininet (real time: root + Mininet)", r["engines"]["mininet"], ""),
        ("engine sim (virtual time, no root)", r["engines"]["sim"], ""),
        ("mininet", r["mininet"], ""),
        ("root", r["root"], ""),
        ("p4runtime extra (pip install -e '.[p4runtime]')", r["p4runtime"], ""),
        ("p4runtime-shell (here or .venv-p4runtime-shell)", r["p4runtime_shell"], ""),
        ("ns3 (pip install '.[bench]', for bench sim)", r["ns3"], ""),
    ] + [(f"  tool {tool}", present, "") for tool, present in r["tools"].items()]
    for label, value, note in rows:
        click.echo(f"{label:<48} {yn(value)}{note}")
    if not r["can_run_network"]:
        click.echo("network runs need root and Mininet (apt-get install mininet); "
                   "--engine sim runs without either")


# ---------------------------------------------------------------------------
# vm


@main.group("vm")
def vm_group() -> None:
    """A Debian guest VM (qemu) for what this kernel lacks, such as rdma_rxe."""


@vm_group.command("build")
@click.option("--force", is_flag=True, help="rebuild even if the recipe's image is cached")
def vm_build_cmd(force: bool) -> None:
    """Build the guest image (mmdebstrap), cached by the hash of its recipe."""
    from testbed.vm import VMError, build_image, cache_dir

    try:
        img = build_image(force=force)
    except VMError as e:
        click.echo(f"error: {e}", err=True)
        sys.exit(1)
    click.echo(str(img.dir))
    click.echo(f"(cache: {cache_dir()}; set P4TB_VM_CACHE to move it)", err=True)


@vm_group.command("run", context_settings={"ignore_unknown_options": True})
@click.option("--timeout", type=float, default=1800.0, show_default=True,
              help="seconds before the guest is stopped (exit code 124)")
@click.option("--accel", type=click.Choice(["auto", "kvm", "tcg"]), default="auto",
              show_default=True, help="auto: KVM if it boots a kernel here, else TCG")
@click.option("--memory", "memory_mib", type=click.IntRange(512, 65536), default=2048,
              show_default=True, help="guest memory, MiB")
@click.option("--cpus", type=click.IntRange(1, 64), default=2, show_default=True)
@click.option("--boot-log", is_flag=True, help="also print the guest's boot messages")
@click.argument("command", nargs=-1, required=True, type=click.UNPROCESSED)
def vm_run_cmd(timeout: float, accel: str, memory_mib: int, cpus: int, boot_log: bool,
               command: tuple[str, ...]) -> None:
    """Run COMMAND in the guest, in the shared checkout, and exit with its exit code.

    \b
    testbed vm run -- pytest -q tests/unit/test_rxe_provider.py
    testbed vm run -- testbed run roce-basics --hosts rxe --quick
    """
    from testbed.net import SoftSignal
    from testbed.vm import VMError, run_in_guest

    try:
        res = run_in_guest(list(command), timeout=timeout, accel=accel, memory_mib=memory_mib,
                           cpus=cpus,
                           boot_log=(lambda line: click.echo(line, err=True)) if boot_log
                           else None)
    except VMError as e:
        click.echo(f"error: {e}", err=True)
        sys.exit(1)
    except KeyboardInterrupt:
        click.echo("vm run: interrupted; the guest is stopped", err=True)
        sys.exit(130)
    except SoftSignal:
        click.echo("vm run: terminated; the guest is stopped", err=True)
        sys.exit(143)
    boot = f", boot {res.boot_seconds:.0f} s" if res.boot_seconds is not None else ""
    click.echo(f"vm run: exit {res.exit_code} after {res.seconds:.0f} s ({res.accel}{boot})",
               err=True)
    sys.exit(res.exit_code)


# ---------------------------------------------------------------------------
# bench


@main.group("bench")
def bench_group() -> None:
    """Benchmarks (they print figures; they are not tests)."""


@bench_group.command("forwarding")
@click.option("--backend", "backends", multiple=True,
              help="data-path backend: python (default) or pypy; repeat for several, "
                   "'all' for every installed one")
@click.option("--seconds", type=float, default=5.0, show_default=True,
              help="length of each measured TCP transfer")
@click.option("--runs", type=int, default=3, show_default=True,
              help="runs per backend; the median is reported")
@click.option("--program", type=click.Path(exists=True, dir_okay=False), default=None,
              help="P4 program (default switches/p4/l3_router.p4)")
@click.option("--json", "as_json", is_flag=True,
              help="print a JSON list: backend, pps, mbps, cpu_s_per_mpkt")
def bench_forwarding_cmd(backends: tuple[str, ...], seconds: float, runs: int,
                         program: str | None, as_json: bool) -> None:
    """h1 - s1 - h2 through the soft switch (L3 router), one iperf3 TCP flow:
    median TCP goodput (Mb/s), packets/s and switch CPU s per million packets."""
    from switches.soft.backends import BACKENDS, backend_available

    chosen = list(backends) or ["python"]
    if "all" in chosen:
        chosen = [b for b in BACKENDS if backend_available(b)]
    for b in chosen:
        if b not in BACKENDS:
            raise click.UsageError(f"unknown backend {b!r} (choose from {', '.join(BACKENDS)})")
        if not backend_available(b):
            raise click.ClickException(f"backend {b}: its interpreter is not installed "
                                       "(pypy: apt-get install pypy3)")
    if os.geteuid() != 0:
        raise click.ClickException("the benchmark builds a Mininet network: run as root")
    if runs < 1 or seconds <= 0:
        raise click.UsageError("--runs and --seconds must be positive")
    from testbed.bench import DEFAULT_PROGRAM, format_run, format_summary, forwarding

    summary, _ = forwarding(chosen, seconds, runs, program or DEFAULT_PROGRAM,
                            on_run=lambda r: click.echo(format_run(r), err=True))
    if as_json:
        click.echo(json.dumps(summary, indent=2))
    else:
        click.echo(format_summary(summary))


@bench_group.command("sim")
@click.option("--ranks", default="8,32", show_default=True,
              help="comma-separated rank counts (8, 32, 128: leaf-spines of 4, 8 or 16 "
                   "hosts per leaf)")
@click.option("--chunk-kib", type=click.IntRange(min=1), default=64, show_default=True,
              help="KiB per rank and ring step")
@click.option("--link-gbps", type=click.FloatRange(min=0.001), default=10.0, show_default=True,
              help="every link's and NIC's rate")
@click.option("--payload", type=click.Choice(["real", "phantom"]), default="real",
              show_default=True,
              help="real: every byte kept and the result checked; phantom: the same packets "
                   "without the data (what large sizes need)")
@click.option("--interpreter", "interpreters", multiple=True,
              type=click.Choice(["cpython", "pypy"]),
              help="run under this interpreter (repeatable; default: CPython, and PyPy "
                   "where ./setup.sh set it up)")
@click.option("--ns3/--no-ns3", default=True, show_default=True,
              help="also time ns-3's UDP flood through a 3-hop chain (pip install ns3)")
@click.option("--json", "as_json", is_flag=True, help="print the figures as JSON")
def bench_sim_cmd(ranks: str, chunk_kib: int, link_gbps: float, payload: str,
                  interpreters: tuple[str, ...], ns3: bool, as_json: bool) -> None:
    """The virtual-time engine's speed: Ring AllReduce on a leaf-spine of soft switches
    (symphony.p4, ECMP), packet-hops and events per wall second, wall time and peak
    memory per size, beside ns-3's packet-hops per second in the same run."""
    from testbed.sim.bench import fabric_for, measure_subprocess
    from testbed.sim.pypy import InterpreterError, choose, find_pypy

    try:
        sizes = [int(r) for r in ranks.split(",") if r.strip()]
        for n in sizes:
            fabric_for(n)
    except ValueError as e:
        raise click.BadParameter(str(e), param_hint="--ranks") from None
    wanted = interpreters or (("cpython", "pypy") if find_pypy() else ("cpython",))
    try:
        exes = [choose(i) or sys.executable for i in dict.fromkeys(wanted)]
    except InterpreterError as e:
        raise click.BadParameter(str(e), param_hint="--interpreter") from None
    from testbed.bench_hosts import machine_info

    machine = machine_info()
    command = (f"testbed bench sim --ranks {ranks} --chunk-kib {chunk_kib} "
               f"--link-gbps {link_gbps:g} --payload {payload}"
               + "".join(f" --interpreter {i}" for i in interpreters)
               + ("" if ns3 else " --no-ns3") + (" --json" if as_json else ""))
    # the record results/reference keeps: what ran, on which commit and machine
    figures: dict[str, Any] = {"command": command, "commit": machine.pop("commit"),
                               "dirty": machine.pop("dirty"), "machine": machine,
                               "sim": [], "ns3": None}
    for n in sizes:
        for exe in exes:
            try:
                fig = measure_subprocess(n, link_gbps, chunk_kib, payload, interpreter=exe)
            except RuntimeError as e:
                raise click.ClickException(str(e)) from None
            figures["sim"].append(dataclasses.asdict(fig))
            click.echo(fig.line(), err=as_json)
    if ns3:
        from testbed.sim.ns3_reference import Ns3Unavailable, ns3_available, udp_flood_subprocess

        if not ns3_available():
            click.echo("ns-3: not installed (pip install ns3, or '.[bench]'); no reference "
                       "figure", err=True)
        else:
            hops = max((f["packet_hops"] for f in figures["sim"]), default=200_000)
            try:
                ref = udp_flood_subprocess(hops=3, rate_bps=link_gbps * 1e9,
                                           packets=max(10_000, hops // 3))
            except (Ns3Unavailable, RuntimeError) as e:
                raise click.ClickException(f"ns-3 reference: {e}") from None
            figures["ns3"] = dataclasses.asdict(ref)
            click.echo(f"ns-3 {ref.ns3_version}: UDP flood, {ref.hops}-hop chain at "
                       f"{link_gbps:g} Gb/s, {ref.packets:,} packets: "
                       f"{ref.packet_hops_per_s:,.0f} packet-hops/s", err=as_json)
    if as_json:
        click.echo(json.dumps(figures, indent=2))


@bench_group.command("hosts")
@click.option("--only", type=click.Choice(["lone_qp", "pair"]), default=None,
              help="search one case only (default: both)")
@click.option("--start", "start_mbps", type=float, default=25.0, show_default=True,
              help="first link rate tried (Mb/s)")
@click.option("--ceiling", "ceiling_mbps", type=float, default=800.0, show_default=True,
              help="highest link rate tried (Mb/s)")
@click.option("--floor", "floor_mbps", type=float, default=1.0, show_default=True,
              help="lowest link rate tried (Mb/s)")
@click.option("--resolution", type=float, default=0.1, show_default=True,
              help="stop when the highest pass and lowest fail are within this fraction")
@click.option("--seconds", type=float, default=3.0, show_default=True,
              help="traffic per trial, in seconds at the trial's rate")
@click.option("--interpreter", type=click.Choice(["python", "pypy", "auto"]), default="python",
              show_default=True, help="what runs the host agents")
@click.option("--qdisc-ahead", "qdisc_ahead", type=float, default=16.0, show_default=True,
              help="packets a sender may keep in its interface's line-rate qdisc "
                   "(0: no qdisc, the pacer alone spaces the frames)")
@click.option("--switch-backend", type=click.Choice(["python", "pypy"]), default="python",
              show_default=True, help="the soft switch's data path")
@click.option("--rx-holdoff-us", "rx_holdoff_us", type=click.FloatRange(min=0), default=0.0,
              show_default=True,
              help="us of the modelled network a received frame waits at most before "
                   "it wakes a host's agent (0: every frame wakes it)")
@click.option("--warmup-packets", type=click.IntRange(min=0), default=None,
              help="packets of a warm-up phase before each trial's measured one "
                   "(default: 30000 when PyPy runs the switch or the agents, else 0)")
@click.option("--out", "out_dir", type=click.Path(file_okay=False), default=None,
              help="keep every trial's run directory here (default: a new /tmp directory)")
@click.option("--json", "as_json", is_flag=True,
              help="print JSON: lone_qp_mbps, pair_mbps, every trial, the machine")
def bench_hosts_cmd(only: str | None, start_mbps: float, ceiling_mbps: float, floor_mbps: float,
                    resolution: float, seconds: float, interpreter: str, qdisc_ahead: float,
                    switch_backend: str, rx_holdoff_us: float, warmup_packets: int | None,
                    out_dir: str | None, as_json: bool) -> None:
    """The highest link rate at which one QP alone, and two QPs sharing a
    bottleneck, stay faithful through one soft switch (roce-basics trials:
    64 KiB WRITEs, MTU 1024), found by a search over rates."""
    if os.geteuid() != 0:
        raise click.ClickException("the benchmark builds Mininet networks: run as root")
    if not 0 < floor_mbps <= start_mbps <= ceiling_mbps:
        raise click.UsageError("need 0 < --floor <= --start <= --ceiling")
    if resolution <= 0 or seconds <= 0:
        raise click.UsageError("--resolution and --seconds must be positive")
    _check_out_dir(out_dir)
    from testbed.bench_hosts import format_report, hosts_bench

    kinds = (only,) if only else ("lone_qp", "pair")
    with _stopped_runs_exit():
        rep = hosts_bench(kinds, start_mbps=start_mbps, floor_mbps=floor_mbps,
                          ceiling_mbps=ceiling_mbps, resolution=resolution, seconds=seconds,
                          interpreter=interpreter, qdisc_ahead=qdisc_ahead,
                          switch_backend=switch_backend, warmup_packets=warmup_packets,
                          rx_holdoff_us=rx_holdoff_us, out_dir=Path(out_dir) if out_dir else None,
                          echo=lambda line: click.echo(line, err=True))
    if as_json:
        click.echo(json.dumps(rep, indent=2))
    else:
        click.echo(format_report(rep))


if __name__ == "__main__":
    main()
