"""The reproduction report: every paper claim beside what the runs measured.

:func:`build` takes run directories (fresh from ``testbed report`` or reused),
judges every claim the experiments declare (testbed.claims) and gathers the
provenance; :func:`write` renders ``index.html`` (one file, inline style, no
scripts, images under ``img/``) and ``report.md`` with the same content.

Which runs are judged: the finished runs of an experiment with claims, of
one profile (quick, full or paper). With ``profile`` given, runs of the other
profiles are left out; without it, an experiment is judged on its paper-profile
runs if it has any, else on its full-profile runs if it has any, else on its
quick ones. Left-out and failed runs are listed, never dropped silently; so are
the runs that were not faithful (testbed.claims says how they count).

Each experiment's section also lists its scale against the paper's: every
parameter whose judged runs differ from the paper profile's value (or, where
that profile cuts it, from the paper's own, with the reason); an experiment
without a paper profile says so.
"""

from __future__ import annotations

import dataclasses
import datetime as _dt
import fnmatch
import html
import json
import os
import platform
import shutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from testbed.claims import (
    NOT_FAITHFUL,
    NOT_MEASURED,
    NOT_REPRODUCED,
    REPRODUCED,
    STATUSES,
    Claim,
    ClaimResult,
    RunValues,
    evaluate,
    sample_values,
)
from testbed.experiment import Experiment

__all__ = ["ReportError", "RunRecord", "FigureSection", "ExperimentSection", "Report",
           "load_run", "collect_runs", "experiments_with_claims", "build", "write"]


class ReportError(ValueError):
    """Bad input to the report (a directory that is no run, a bad summary.json)."""


@dataclass
class RunRecord:
    """A run directory and its summary.json."""

    path: Path
    summary: dict[str, Any]
    label: str = ""
    note: str = ""        # how its results were obtained, when not as recorded

    @property
    def experiment(self) -> str:
        return str(self.summary.get("experiment", "?"))

    @property
    def finished(self) -> bool:
        return bool(self.summary.get("ok"))

    @property
    def faithful(self) -> bool:
        return self.finished and bool(self.summary.get("fidelity_ok"))

    @property
    def profile(self) -> str:
        from testbed.experiment import PROFILES

        p = self.summary.get("profile")
        if p in PROFILES:
            return str(p)
        return "quick" if self.summary.get("quick") else "full"   # (runs before profiles)

    @property
    def verdict(self) -> str:
        if not self.finished:
            return "failed: " + str(self.summary.get("error") or "no result")
        return str(self.summary.get("fidelity_verdict") or "no fidelity verdict recorded")

    @property
    def duration_s(self) -> float | None:
        d = self.summary.get("duration_s")
        return float(d) if isinstance(d, (int, float)) else None

    @property
    def commit(self) -> str:
        v = self.summary.get("versions") or {}
        rev = str(v.get("git_rev") or "unknown")[:12]
        return rev + (" (dirty)" if v.get("git_dirty") else "")

    @property
    def overrides(self) -> dict[str, str]:
        """The run's ``-p NAME=VALUE`` (its summary's, as RunOptions.overrides)."""
        return dict(self.summary.get("overrides") or {})

    def plot_files(self) -> list[Path]:
        """The run's figures that exist, in the order the run listed them."""
        listed = [self.path / p for p in self.summary.get("plots") or []]
        if not listed:
            listed = sorted((self.path / "plots").glob("*.png"))
        return [p for p in listed if p.is_file()]


def reanalysed(run: RunRecord, experiments: dict[str, Experiment]) -> RunRecord:
    """The run with its results analysed again by the current code (its
    timelines are saved), so claims on keys added since it ran can be judged.
    The fidelity verdict stays as recorded (and an experiment's own fidelity
    conditions, if the new analysis finds them failed, make it not faithful).
    If the analysis fails, the recorded results are used and the note says so."""
    from testbed.runner import flatten_keys
    from testbed.summary import results_json

    mod = experiments.get(run.experiment)
    if mod is None or not run.finished:
        return run
    try:
        results = results_json(mod.analyze(run.path))
    except Exception as e:  # an old run the current analysis cannot read
        return RunRecord(run.path, run.summary, run.label,
                         f"re-analysis failed ({type(e).__name__}: {e}): recorded results used")
    summary = {**run.summary, **results, **flatten_keys(results)}
    summary["fidelity_ok"] = bool(run.summary.get("fidelity_ok")) and bool(
        results.get("fidelity_ok", True))
    return RunRecord(run.path, summary, run.label, "re-analysed by the current code")


def load_run(path: Path) -> RunRecord:
    f = Path(path) / "summary.json"
    try:
        summary = json.loads(f.read_text())
    except FileNotFoundError:
        raise ReportError(f"{path}: no summary.json (not a run directory)") from None
    except (OSError, json.JSONDecodeError) as e:
        raise ReportError(f"{f}: unreadable: {e}") from e
    if not isinstance(summary, dict) or not isinstance(summary.get("experiment"), str):
        raise ReportError(f"{f}: not a run summary (no 'experiment')")
    return RunRecord(Path(path), summary)


def collect_runs(dirs: list[Path]) -> list[RunRecord]:
    """The runs in ``dirs``: each is a run directory or a directory of them
    (e.g. a ``testbed run all`` root or ``results/``), searched two levels deep."""
    runs: list[RunRecord] = []
    for d in dirs:
        d = Path(d)
        if not d.is_dir():
            raise ReportError(f"{d}: not a directory")
        if (d / "summary.json").exists():
            runs.append(load_run(d))
            continue
        found = sorted({p.parent for p in [*d.glob("*/summary.json"), *d.glob("*/*/summary.json")]})
        if not found:
            raise ReportError(f"{d}: no run directory (with a summary.json) in it")
        runs.extend(load_run(p) for p in found)
    seen: dict[Path, RunRecord] = {}
    for r in runs:
        seen.setdefault(r.path.resolve(), r)
    out = list(seen.values())
    _label(out)
    return out


def _label(runs: list[RunRecord]) -> None:
    """Unique short names for the runs (their directory names, numbered if repeated)."""
    count: dict[str, int] = {}
    for r in runs:
        base = r.path.name or r.experiment
        count[base] = count.get(base, 0) + 1
        r.label = base if count[base] == 1 else f"{base}~{count[base]}"


def experiments_with_claims(profile: str | None = None) -> dict[str, Experiment]:
    """The experiments that declare claims (with ``profile``: and have that profile)."""
    from testbed.experiment import discover, has_profile

    return {n: m for n, m in discover().items() if m.CLAIMS
            and (profile is None or has_profile(m, profile))}


# ---------------------------------------------------------------------------
# building


@dataclass
class FigureSection:
    figure: str
    results: list[ClaimResult]
    plots: list[tuple[RunRecord, Path]]          # (run, its figure file)


@dataclass
class ExperimentSection:
    name: str
    title: str
    figures: list[FigureSection]
    runs: list[RunRecord]                        # judged (finished or failed)
    left_out: list[tuple[RunRecord, str]] = field(default_factory=list)
    # the judged runs' scale against the paper's: one line, and per parameter
    # that differs [parameter, the runs' value, the paper's, why]
    scale: str = ""
    scale_rows: list[list[str]] = field(default_factory=list)

    @property
    def duration_s(self) -> float:
        return sum(r.duration_s or 0.0 for r in self.runs)


@dataclass
class Report:
    created: str
    command: str
    profile: str | None
    provenance: list[tuple[str, str]]
    sections: list[ExperimentSection]
    other_runs: list[RunRecord]                  # of experiments that declare no claims
    without_claims: list[str]                    # experiments that declare none
    not_named: list[str] = field(default_factory=list)  # with claims, left out of this report
    # with claims but no paper profile (a report of the paper profile leaves them out)
    without_paper_profile: list[str] = field(default_factory=list)

    @property
    def results(self) -> list[tuple[str, ClaimResult]]:
        return [(s.name, r) for s in self.sections for f in s.figures for r in f.results]

    @property
    def all_runs(self) -> list[RunRecord]:
        return [r for s in self.sections for r in s.runs] + self.other_runs

    def counts(self) -> dict[str, int]:
        out = dict.fromkeys(STATUSES, 0)
        for _, r in self.results:
            out[r.status] += 1
        return out


def _choose_profile(runs: list[RunRecord], profile: str | None
                    ) -> tuple[list[RunRecord], list[tuple[RunRecord, str]]]:
    want = profile or next((p for p in ("paper", "full") if any(r.profile == p for r in runs)),
                           "quick")
    why = (f"{{}} profile; this report is of the {want} profile" if profile else
           f"{{}} profile; runs of the {want} profile exist and are judged")
    keep = [r for r in runs if r.profile == want]
    return keep, [(r, why.format(r.profile)) for r in runs if r.profile != want]


def _plots_for(claims: list[Claim], run: RunRecord) -> list[Path]:
    files = run.plot_files()
    patterns = [p for c in claims for p in c.plots]
    if not patterns:
        return files
    out: list[Path] = []
    for pat in patterns:
        for f in files:
            if fnmatch.fnmatch(f.name, pat) and f not in out:
                out.append(f)
    return out


def _shown(v: object) -> str:
    """A parameter's value (of any type) as the report shows it."""
    return f"{v:g}" if isinstance(v, float) else str(v)


def scale_against_paper(mod: Experiment, runs: list[RunRecord]
                        ) -> tuple[str, list[list[str]]]:
    """The runs' scale against the paper's: a one-line summary and, per
    parameter whose runs differ from the paper's value, [parameter, the runs'
    value(s), the paper's, why] (the paper's value: the paper profile's, or
    the paper's own where the profile cuts it)."""
    from testbed.experiment import has_profile, scaled_down_from

    if not has_profile(mod, "paper"):
        return "no paper profile: the testbed's own scale", []
    paper = mod.Params.paper()
    cuts = scaled_down_from(mod)
    recorded = [r.summary.get("params") or {} for r in runs if r.finished]
    if not recorded:
        return "no finished run", []
    profiles = sorted({r.profile for r in runs if r.finished})
    rows = []
    for f in dataclasses.fields(mod.Params):
        want = cuts[f.name].paper if f.name in cuts else getattr(paper, f.name)
        # a run made before the parameter existed ran at its default
        default = None if f.default is dataclasses.MISSING else f.default
        seen = list(dict.fromkeys(_shown(p.get(f.name, default)) for p in recorded))
        if seen == [_shown(want)]:
            continue
        if f.name in cuts and seen == [_shown(getattr(paper, f.name))]:
            why = "the paper profile runs less: " + cuts[f.name].reason
        else:
            why = ("set on the command line" if any(f.name in (r.overrides or {}) for r in runs)
                   else f"the {'/'.join(profiles)} profile's value")
        rows.append([f.name, ", ".join(seen), _shown(want), why])
    if not rows:
        return "the paper's (every parameter at the paper's value)", []
    which = "/".join(profiles)
    names = ", ".join(r[0] for r in rows)
    if profiles == ["paper"]:
        return f"paper profile, not the paper's in {names}", rows
    return f"{which} profile: {len(rows)} parameter(s) differ from the paper's", rows


def _section(name: str, mod: Experiment, runs: list[RunRecord],
             profile: str | None) -> ExperimentSection:
    from testbed.experiment import describe

    judged, left_out = _choose_profile(runs, profile)
    finished = [r for r in judged if r.finished]
    failed = [r for r in judged if not r.finished]
    claims: tuple[Claim, ...] = tuple(mod.CLAIMS)
    figures: list[FigureSection] = []
    for fig in dict.fromkeys(c.figure for c in claims):
        results = []
        for c in (c for c in claims if c.figure == fig):
            res = evaluate(c, [RunValues(r.label, r.faithful, sample_values(r.summary, c),
                                         r.verdict) for r in finished])
            if res.status == NOT_MEASURED and failed:
                res.why += "; failed: " + "; ".join(f"{r.label}: {r.verdict}" for r in failed)
            results.append(res)
        fig_claims = [c for c in claims if c.figure == fig]
        # the figures of the runs that measured the figure's claims (a run of
        # one axis of a sweep does not measure another axis's), else every run's
        measured = [r for r in finished if any(sample_values(r.summary, c) for c in fig_claims)]
        plots = [(r, p) for r in (measured or finished) for p in _plots_for(fig_claims, r)]
        figures.append(FigureSection(fig, results, plots))
    scale, scale_rows = scale_against_paper(mod, judged)
    return ExperimentSection(name, describe(mod), figures, judged, left_out, scale, scale_rows)


def provenance(runs: list[RunRecord]) -> list[tuple[str, str]]:
    """The header's rows: this checkout and machine, and what the runs recorded."""
    from testbed.bench_hosts import machine_info
    from testbed.runner import pypy_version

    m = machine_info()

    def recorded(key: str) -> str:
        vals = sorted({str((r.summary.get("versions") or {}).get(key)) for r in runs
                       if (r.summary.get("versions") or {}).get(key) is not None})
        return ", ".join(vals) or "not recorded"

    def of_runs(key: str) -> str:
        return ", ".join(sorted({str(r.summary.get(key)) for r in runs
                                 if r.summary.get(key) is not None})) or "-"

    commits = sorted({r.commit for r in runs})
    return [
        ("project commit (this report)",
         f"{str(m.get('commit') or 'unknown')[:12]}{' (dirty)' if m.get('dirty') else ''}"),
        ("commits of the runs", ", ".join(commits) or "-"),
        ("machine", f"{m.get('cpus')} cores ({m.get('cpu_model') or 'unknown CPU'}), "
                    f"{platform.system()} {m.get('kernel')}, {platform.machine()}"),
        ("Python / PyPy", f"{m.get('python')} / {pypy_version() or 'not installed'}"),
        ("recorded by the runs", f"kernel {recorded('kernel')}; cores {recorded('cpus')}; "
                                 f"Python {recorded('python')}; PyPy {recorded('pypy')}"),
        ("engine", ", ".join(sorted({str(r.summary.get("engine", "mininet")) for r in runs}))
         or "-"),
        ("target (switch)", of_runs("target")),
        ("hosts (RoCE provider)", of_runs("hosts")),
        ("load average when the report was written",
         ", ".join(f"{x:.2f}" for x in os.getloadavg())),
        ("run time, all runs", _dur(sum(r.duration_s or 0.0 for r in runs))),
    ]


def build(runs: list[RunRecord], *, profile: str | None = None, command: str = "",
          experiments: dict[str, Experiment] | None = None,
          reanalyse: bool = True) -> Report:
    """Judge every declared claim over ``runs`` (see the module doc), each
    analysed again by the current code unless ``reanalyse`` is False."""
    from testbed.experiment import discover, has_profile

    if profile not in (None, "quick", "full", "paper"):
        raise ReportError(f"profile must be quick, full or paper, not {profile!r}")
    if experiments is None:
        experiments = experiments_with_claims(profile)
    _label(runs)
    if reanalyse:
        runs = [reanalysed(r, experiments) for r in runs]
    sections = [_section(n, m, [r for r in runs if r.experiment == n], profile)
                for n, m in experiments.items()]
    others = [r for r in runs if r.experiment not in experiments]
    created = _dt.datetime.now().astimezone().isoformat(timespec="seconds")
    every = discover()
    left = [n for n, m in every.items() if m.CLAIMS and n not in experiments]
    no_paper = [n for n in left if profile == "paper" and not has_profile(every[n], "paper")]
    return Report(created, command, profile, provenance(runs), sections, others,
                  [n for n, m in every.items() if not m.CLAIMS],
                  [n for n in left if n not in no_paper], no_paper)


# ---------------------------------------------------------------------------
# rendering

_STATUS_CLASS = {REPRODUCED: "ok", NOT_REPRODUCED: "bad", NOT_FAITHFUL: "unf",
                 NOT_MEASURED: "none"}

_CSS = """
body{font-family:system-ui,sans-serif;max-width:1200px;margin:1.5em auto;padding:0 1em;
color:#222;line-height:1.4}
h1{font-size:1.6em;margin-bottom:.2em}h2{border-bottom:1px solid #ccc;padding-bottom:.2em;
margin-top:1.8em}h3{margin-top:1.4em}
table{border-collapse:collapse;margin:.6em 0;font-size:.92em}
th,td{border:1px solid #ccc;padding:.25em .5em;text-align:left;vertical-align:top}
th{background:#f3f3f3}
.status{font-weight:600;white-space:nowrap;padding:.1em .4em;border-radius:3px}
.ok{background:#d8f0d8;color:#145214}.bad{background:#f7d6d6;color:#7a1010}
.unf{background:#fbe7c6;color:#7a4a00}.none{background:#e6e6e6;color:#444}
.plots{display:flex;flex-wrap:wrap;gap:1em}
figure{margin:0;border:1px solid #ddd;padding:.4em;background:#fff;max-width:560px}
figure img{width:100%;height:auto;display:block}
figcaption{font-size:.85em;color:#555;margin-top:.3em}
code{background:#f5f5f5;padding:0 .2em}
.small{font-size:.85em;color:#555}
td.fig{white-space:nowrap}
"""


def _e(x: object) -> str:
    """Any value as HTML text."""
    return html.escape(str(x))


def _dur(s: float | None) -> str:
    if s is None:
        return "-"
    m, sec = divmod(int(round(s)), 60)
    return f"{m} min {sec:02d} s" if m else f"{sec} s"


def _status(status: str) -> str:
    return f'<span class="status {_STATUS_CLASS[status]}">{_e(status)}</span>'


def _yes_no(v: bool | None) -> str:
    return "-" if v is None else ("yes" if v else "no")


def _anchor(*parts: str) -> str:
    return "-".join("".join(ch if ch.isalnum() else "-" for ch in p.lower()) for p in parts)


def _copy_images(report: Report, out: Path) -> dict[Path, str]:
    """Copy every figure under out/img/<run label>/; source -> relative path."""
    rel: dict[Path, str] = {}
    for s in report.sections:
        for f in s.figures:
            for run, src in f.plots:
                if src in rel:
                    continue
                dst = out / "img" / _anchor(run.label) / src.name
                dst.parent.mkdir(parents=True, exist_ok=True)
                shutil.copyfile(src, dst)
                rel[src] = dst.relative_to(out).as_posix()
    return rel


def _claim_rows(f: FigureSection) -> list[list[str]]:
    rows = []
    for r in f.results:
        c = r.claim
        rows.append([c.says, f"`{c.key}`", c.paper_text(), r.measured_text(), c.describe_rule(),
                     _yes_no(r.direction_ok), _yes_no(r.size_ok), r.status,
                     r.why or ("judged on " + ", ".join(r.judged) if r.judged else "")])
    return rows


_CLAIM_HEAD = ["claim", "key", "paper", "measured (mean ± sd, n, range)", "agreement rule",
               "direction agrees", "size agrees", "verdict", "why / runs judged"]


def _html(report: Report, images: dict[Path, str]) -> str:
    h: list[str] = []
    c = report.counts()
    h.append("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
             "<meta name=\"viewport\" content=\"width=device-width\">"
             "<title>Reproduction report</title>"
             f"<style>{_CSS}</style></head><body>")
    h.append("<h1>Reproduction report: the papers' claims beside the testbed's runs</h1>")
    h.append(f"<p class=\"small\">Written {_e(report.created)}"
             + (f" by <code>{_e(report.command)}</code>" if report.command else "")
             + f"; profile: {_e(report.profile or 'as the runs were made')}.</p>")
    h.append("<p id=\"totals\">" + ", ".join(f"{_status(s)} {n}" for s, n in c.items())
             + f" of {sum(c.values())} claims.</p>")
    h.append("<h2 id=\"provenance\">Provenance</h2><table id=\"provenance-table\">")
    for k, v in report.provenance:
        h.append(f"<tr><th>{_e(k)}</th><td>{_e(v)}</td></tr>")
    h.append("</table>")
    h.append("<h3>Experiments</h3><table id=\"experiments-table\"><tr><th>experiment</th>"
             "<th>runs judged</th><th>faithful</th><th>time (sum of runs)</th><th>claims</th>"
             "<th>scale against the paper's</th></tr>")
    for s in report.sections:
        fin = [r for r in s.runs if r.finished]
        h.append(f"<tr><td><a href=\"#{_anchor('exp', s.name)}\">{_e(s.name)}</a></td>"
                 f"<td>{len(s.runs)}</td><td>{sum(r.faithful for r in fin)}</td>"
                 f"<td>{_e(_dur(s.duration_s))}</td>"
                 f"<td>{sum(len(f.results) for f in s.figures)}</td><td>{_e(s.scale)}</td></tr>")
    h.append("</table>")
    if report.without_claims:
        h.append("<p class=\"small\">Experiments that declare no paper claims (not judged): "
                 + ", ".join(f"<code>{_e(n)}</code>" for n in report.without_claims) + ".</p>")
    if report.not_named:
        h.append("<p class=\"small\">Experiments with claims not in this report (not named): "
                 + ", ".join(f"<code>{_e(n)}</code>" for n in report.not_named) + ".</p>")
    if report.without_paper_profile:
        h.append("<p class=\"small\">Experiments with claims but no paper profile (not run at "
                 "the paper's scale, not in this report): "
                 + ", ".join(f"<code>{_e(n)}</code>" for n in report.without_paper_profile)
                 + ".</p>")

    h.append("<h2 id=\"claims\">Claims</h2><table id=\"claims-table\"><tr><th>experiment</th>"
             "<th>figure</th><th>claim</th><th>paper</th><th>measured</th><th>verdict</th></tr>")
    for s in report.sections:
        for f in s.figures:
            for r in f.results:
                h.append(f"<tr><td>{_e(s.name)}</td><td class=\"fig\">"
                         f"<a href=\"#{_anchor(s.name, f.figure)}\">"
                         f"{_e(f.figure)}</a></td><td>{_e(r.claim.says)}</td>"
                         f"<td>{_e(r.claim.paper_text())}</td>"
                         f"<td>{_e(r.measured_text())}</td><td>{_status(r.status)}</td></tr>")
    h.append("</table>")

    for s in report.sections:
        h.append(f"<h2 id=\"{_anchor('exp', s.name)}\">{_e(s.name)}</h2><p>{_e(s.title)}</p>")
        for f in s.figures:
            h.append(f"<section class=\"figure\"><h3 id=\"{_anchor(s.name, f.figure)}\">"
                     f"{_e(f.figure)}</h3><table class=\"claims\"><tr>"
                     + "".join(f"<th>{_e(x)}</th>" for x in _CLAIM_HEAD) + "</tr>")
            for row in _claim_rows(f):
                cells = [_e(x) for x in row]
                cells[1] = f"<code>{_e(row[1].strip('`'))}</code>"
                cells[7] = _status(row[7])
                h.append("<tr>" + "".join(f"<td>{x}</td>" for x in cells) + "</tr>")
            h.append("</table>")
            if f.plots:
                h.append("<div class=\"plots\">")
                for run, src in f.plots:
                    cap = (f"{f.figure}: {src.name} of run {run.label} "
                           f"({'faithful' if run.faithful else 'NOT faithful'})")
                    h.append(f"<figure><img src=\"{_e(images[src])}\" alt=\"{_e(cap)}\" "
                             f"loading=\"eager\"><figcaption>{_e(cap)}</figcaption></figure>")
                h.append("</div>")
            else:
                h.append("<p class=\"small\">No figures: no finished run.</p>")
            h.append("</section>")
        h.append(f"<h3>Scale of {_e(s.name)} against the paper's</h3>")
        h.append(f"<p class=\"scale\">{_e(s.scale)}.</p>")
        if s.scale_rows:
            h.append("<table class=\"scale\"><tr>" + "".join(f"<th>{_e(x)}</th>"
                                                           for x in _SCALE_HEAD) + "</tr>")
            h += ["<tr>" + "".join(f"<td>{_e(x)}</td>" for x in row) + "</tr>"
                  for row in s.scale_rows]
            h.append("</table>")
        h.append(f"<h3>Runs of {_e(s.name)}</h3>")
        h.append(_runs_table_html(s.runs, s.left_out))

    unf = [r for r in report.all_runs if not r.faithful]
    h.append("<h2 id=\"unfaithful\">Runs that were not faithful or failed</h2>")
    if unf:
        h.append("<p>Their figures are not results: a claim is judged on faithful runs "
                 "only, and is <em>not faithful</em> where none was.</p><ul id=\"unfaithful-list\">")
        for run in unf:
            h.append(f"<li><b>{_e(run.experiment)}</b> <code>{_e(run.label)}</code>: "
                     f"{_e(run.verdict)}</li>")
        h.append("</ul>")
    else:
        h.append("<p id=\"unfaithful-list\">None: every run was faithful.</p>")
    if report.other_runs:
        h.append("<h2 id=\"other-runs\">Other runs (experiments without claims)</h2>")
        h.append(_runs_table_html(report.other_runs, []))
    h.append("</body></html>\n")
    return "\n".join(h)


def _run_row(r: RunRecord) -> list[str]:
    ov = " ".join(f"{k}={v}" for k, v in r.overrides.items())
    return [r.label, r.profile + (f" ({ov})" if ov else ""),
            str(r.summary.get("engine", "mininet")), str(r.summary.get("target", "-")),
            str(r.summary.get("hosts", "-")), r.commit, _dur(r.duration_s), r.verdict,
            r.note or "as recorded"]


_RUN_HEAD = ["run", "profile", "engine", "target", "hosts", "commit", "time",
             "fidelity verdict", "results"]
_SCALE_HEAD = ["parameter", "runs", "paper", "why"]


def _runs_table_html(runs: list[RunRecord], left_out: list[tuple[RunRecord, str]]) -> str:
    if not runs and not left_out:
        return "<p class=\"small\">No run.</p>"
    out = ["<table class=\"runs\"><tr>" + "".join(f"<th>{x}</th>" for x in _RUN_HEAD) + "</tr>"]
    for r in runs:
        cls = "ok" if r.faithful else ("unf" if r.finished else "bad")
        cells = [f"<td>{_e(x)}</td>" for x in _run_row(r)]
        cells[-2] = f"<td class=\"{cls}\">{_e(r.verdict)}</td>"
        out.append("<tr>" + "".join(cells) + "</tr>")
    out.append("</table>")
    if left_out:
        out.append("<p class=\"small\">Left out: " + "; ".join(
            f"<code>{_e(r.label)}</code> ({_e(why)})" for r, why in left_out) + "</p>")
    return "\n".join(out)


def _md_table(head: list[str], rows: list[list[str]]) -> list[str]:
    def cell(x: str) -> str:
        return x.replace("|", "\\|").replace("\n", " ")

    return (["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
            + ["| " + " | ".join(cell(x) for x in row) + " |" for row in rows])


def _markdown(report: Report, images: dict[Path, str]) -> str:
    m: list[str] = ["# Reproduction report: the papers' claims beside the testbed's runs", ""]
    m.append(f"Written {report.created}" + (f" by `{report.command}`" if report.command else "")
             + f"; profile: {report.profile or 'as the runs were made'}.")
    m.append("")
    m.append(", ".join(f"**{s}** {n}" for s, n in report.counts().items())
             + f" of {len(report.results)} claims.")
    m += ["", "## Provenance", ""]
    m += _md_table(["", ""], [[k, v] for k, v in report.provenance])
    m += ["", "### Experiments", ""]
    m += _md_table(["experiment", "runs judged", "faithful", "time (sum of runs)", "claims",
                    "scale against the paper's"],
                   [[s.name, str(len(s.runs)), str(sum(r.faithful for r in s.runs)),
                     _dur(s.duration_s), str(sum(len(f.results) for f in s.figures)), s.scale]
                    for s in report.sections])
    if report.without_claims:
        m += ["", "Experiments that declare no paper claims (not judged): "
              + ", ".join(f"`{n}`" for n in report.without_claims) + "."]
    if report.not_named:
        m += ["", "Experiments with claims not in this report (not named): "
              + ", ".join(f"`{n}`" for n in report.not_named) + "."]
    if report.without_paper_profile:
        m += ["", "Experiments with claims but no paper profile (not run at the paper's scale, "
              "not in this report): "
              + ", ".join(f"`{n}`" for n in report.without_paper_profile) + "."]
    m += ["", "## Claims", ""]
    m += _md_table(["experiment", "figure", "claim", "paper", "measured", "verdict"],
                   [[s.name, f.figure, r.claim.says, r.claim.paper_text(),
                     r.measured_text(), f"**{r.status}**"]
                    for s in report.sections for f in s.figures for r in f.results])
    for s in report.sections:
        m += ["", f"## {s.name}", "", s.title]
        for f in s.figures:
            m += ["", f"### {f.figure}", ""]
            m += _md_table(_CLAIM_HEAD, [row[:7] + [f"**{row[7]}**"] + row[8:]
                                         for row in _claim_rows(f)])
            m.append("")
            for run, src in f.plots:
                cap = (f"{f.figure}: {src.name} of run {run.label} "
                       f"({'faithful' if run.faithful else 'NOT faithful'})")
                m += [f"![{cap}]({images[src]})", ""]
        m += ["", f"### Scale of {s.name} against the paper's", "", s.scale + "."]
        if s.scale_rows:
            m += [""] + _md_table(_SCALE_HEAD, s.scale_rows)
        m += ["", f"### Runs of {s.name}", ""]
        m += _md_table(_RUN_HEAD, [_run_row(r) for r in s.runs]) if s.runs else ["No run."]
        if s.left_out:
            m += ["", "Left out: " + "; ".join(f"`{r.label}` ({why})" for r, why in s.left_out)]
    m += ["", "## Runs that were not faithful or failed", ""]
    unf = [r for r in report.all_runs if not r.faithful]
    m += [f"- **{r.experiment}** `{r.label}`: {r.verdict}" for r in unf] or [
        "None: every run was faithful."]
    if report.other_runs:
        m += ["", "## Other runs (experiments without claims)", ""]
        m += _md_table(_RUN_HEAD, [_run_row(r) for r in report.other_runs])
    return "\n".join(m) + "\n"


def write(report: Report, out: Path) -> tuple[Path, Path]:
    """Write ``out/index.html``, ``out/report.md`` and ``out/img/``."""
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    images = _copy_images(report, out)
    index = out / "index.html"
    index.write_text(_html(report, images))
    md = out / "report.md"
    md.write_text(_markdown(report, images))
    return index, md
