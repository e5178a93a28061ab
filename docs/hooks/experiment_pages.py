"""MkDocs hook: the pages that are generated from the code at build time.

- ``experiments/<name>.md``, one per experiment module (testbed.experiment.discover):
  its docstring, its ``Params`` (default = full profile, the quick profile's
  value and, where the module declares one, the paper profile's, with what it
  cuts; each field's meaning and unit, testbed.experiment.param_docs),
  ``REFERENCE``/``PAPER``, ``CLAIMS`` (testbed.claims.Claim), the plots
  its source names, and the hand-written conclusions from
  ``docs/experiments/analysis/<name>.md`` (an experiment without one is a
  warning, so ``mkdocs build --strict`` fails);
- ``experiments/index.md``: the table of experiments;
- ``reference/measurements.md``: the benchmark records of ``results/reference/``
  as tables;
- ``repo/...``: notes kept beside the code (testbed/sim/README.md,
  hosts/roce/README.md, ...), rendered as they are in the repository, with the
  images they show, so the hand-written pages can link to them.

A hook rather than mkdocs-gen-files: it needs no plugin, and it also fills the
navigation (``on_config``), so a new experiment module gets its page and its
menu entry without touching mkdocs.yml.
"""

from __future__ import annotations

import ast
import dataclasses
import json
import logging
import re
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from testbed.experiment import Experiment

log = logging.getLogger("mkdocs.hooks.experiment_pages")

ROOT = Path(__file__).resolve().parents[2]
ANALYSIS = ROOT / "docs" / "experiments" / "analysis"

# Notes kept beside the code, rendered under repo/<same path>.
REPO_NOTES = (
    "testbed/sim/README.md",
    "hosts/roce/README.md",
    "switches/p4/README.md",
    "switches/p4/EPIC.md",
    "switches/bmv2/README.md",
)
# Images those notes (and the pages) show, rendered under repo/<same path>.
REPO_IMAGES = (
    "results/reference/report-quick.png",
    "results/reference/rxe-roce-basics-pair.png",
    "results/reference/symphony-ring-full-cct.png",
)
# Benchmark records rendered on reference/measurements.md.
MEASUREMENTS = ("results/reference/forwarding-bench.json", "results/reference/run-all-quick.json",
                "results/reference/sim-bench-pypy.json", "results/reference/sim-bench-32-ranks-8mib.json")


def _experiments() -> dict[str, Experiment]:
    if str(ROOT) not in sys.path:
        sys.path.insert(0, str(ROOT))
    from testbed.experiment import discover

    return discover()


# ---------------------------------------------------------------------------
# formatting


def _cell(text: Any) -> str:
    """A value as a Markdown table cell."""
    return str(text).replace("|", "\\|").replace("\n", " ")


def _value(v: Any) -> str:
    if isinstance(v, float):
        return f"`{v:g}`"
    if isinstance(v, (dict, list, tuple)):
        return f"`{json.dumps(v, default=str)}`"
    return f"`{v!r}`" if isinstance(v, str) else f"`{v}`"


def docstring_markdown(doc: str) -> str:
    """A module docstring as Markdown: RST's ``code`` is Markdown's code too;
    a list that follows a paragraph line gets the blank line Markdown needs,
    and a list item's continuation lines are indented as Markdown nests them."""
    out: list[str] = []
    in_item = False
    for line in doc.strip("\n").splitlines():
        stripped = line.strip()
        if stripped.startswith("- "):
            if out and out[-1].strip() and not in_item:
                out.append("")
            in_item = True
            out.append(stripped)
            continue
        if not stripped:
            in_item = False
            out.append("")
            continue
        if in_item and line.startswith(" "):
            out.append("    " + stripped)
            continue
        if in_item:
            # a paragraph line right after a list: end the list first
            out.append("")
            in_item = False
        out.append(stripped)
    return "\n".join(out)


def plot_names(mod: Experiment) -> tuple[list[str], bool]:
    """The PNG names an experiment's source spells out (string constants and the
    claims' plots), and whether it draws one timeline per phase
    (testbed.plotting.phase_timelines: ``plots/<phase>.png``)."""
    src = Path(mod.__file__ or "").read_text()
    names: set[str] = set()
    for node in ast.walk(ast.parse(src)):
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            if re.fullmatch(r"[\w*.-]+\.png", node.value):
                names.add(node.value)
    for claim in mod.CLAIMS:
        names.update(claim.plots)
    return sorted(names), "phase_timelines" in src


def _against(v: Any, default: Any) -> str:
    """A profile's value: "same" where it keeps the default, else in bold."""
    return "same" if v == default else f"**{_value(v)}**"


def params_table(mod: Experiment) -> str:
    """Every parameter: type, default (full), quick and paper values (the
    paper column only where the module has a paper profile; "same" where a
    profile keeps the default; a star where the paper profile runs less
    than the paper), unit and meaning."""
    from testbed.experiment import param_docs

    docs = {d.name: d for d in param_docs(mod)}
    has_paper = any(d.has_paper for d in docs.values())
    head = ["parameter", "type", "default (full)", "quick"]
    if has_paper:
        head.append("paper")
    head += ["unit", "meaning"]
    rows = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for f in dataclasses.fields(mod.Params):
        d = docs[f.name]
        tp = f.type if isinstance(f.type, str) else getattr(f.type, "__name__", str(f.type))
        tp = tp.replace(" | ", " or ")
        cells = [f"`{f.name}`", f"`{tp}`", _value(d.full), _against(d.quick, d.full)]
        if has_paper:
            cells.append(_against(d.paper, d.full) + (" *" if d.scaled_down else ""))
        cells += [d.unit, d.meaning]
        rows.append("| " + " | ".join(_cell(c) for c in cells) + " |")
    return "\n".join(rows)


def paper_profile_section(mod: Experiment) -> list[str]:
    """What the paper profile runs, and what it cuts from the paper's scale."""
    from testbed.experiment import has_profile, scaled_down_from

    if not has_profile(mod, "paper"):
        return []
    name = mod.NAME
    out = ["## The paper profile", "",
           f"`testbed run {name} --engine sim --profile paper` runs the paper's own setup "
           "(the *paper* column above; virtual time only). "]
    cuts = scaled_down_from(mod)
    if not cuts:
        out[-1] += "It runs at the paper's full size: nothing is cut."
        return out + [""]
    out[-1] += ("Where the paper's full size would take more than about an hour here, it "
                "runs less (starred above), and each run's `summary.json` says so "
                "(`scaled_down_from`):")
    out += ["", "| parameter | paper profile | the paper's | why |", "|---|---|---|---|"]
    paper = mod.Params.paper()
    for k, v in cuts.items():
        out.append("| " + " | ".join(_cell(c) for c in (
            f"`{k}`", _value(getattr(paper, k)), _value(v.paper), v.reason)) + " |")
    return out + [""]


def reference_table(ref: dict[str, Any]) -> str:
    rows = ["| key | paper's value |", "|---|---|"]
    for k, v in ref.items():
        rows.append(f"| `{k}` | {_cell(_value(v))} |")
    return "\n".join(rows)


def claims_table(claims: tuple[Any, ...]) -> str:
    rows = ["| figure | the paper shows | measured by | paper | judged as |", "|---|---|---|---|---|"]
    for c in claims:
        key = f"`{c.key}`" + (f" (per seed: `{c.per_seed}`)" if c.per_seed else "")
        rows.append("| " + " | ".join(_cell(x) for x in (
            c.figure, c.says, key, c.paper_text(), c.describe_rule())) + " |")
    return "\n".join(rows)


def experiment_page(name: str, mod: Experiment) -> str:
    from testbed.experiment import describe

    doc = (mod.__doc__ or "").strip()
    first, _, rest = doc.partition("\n")
    rel = Path(mod.__file__ or "").resolve().relative_to(ROOT)
    parts = [f"# {name}", "", f"*{first.strip()}*", ""]
    from testbed.experiment import has_profile

    facts = [f"module `{rel}`", f"`testbed run {name} --quick`"]
    if has_profile(mod, "paper"):
        facts.append(f"`testbed run {name} --engine sim --profile paper`")
    program = getattr(mod, "PROGRAM", None)
    if program:
        facts.append(f"switch program `{program}`")
    providers = mod.HOST_PROVIDERS
    facts.append("hosts: " + ", ".join(f"`{p}`" for p in providers))
    parts += [" · ".join(facts), ""]
    parts += ["!!! note \"Generated from the code\"",
              f"    This page is built from `{rel}` when the docs are built; "
              "the conclusions at the end are written by hand "
              f"(`docs/experiments/analysis/{name}.md`).", ""]
    if rest.strip():
        parts += ["## What it runs", "", docstring_markdown(rest), ""]
    parts += ["## Parameters", "",
              "Set any of them with `-p NAME=VALUE`; the full profile is the default, "
              "`--quick` the short one"
              + (", `--profile paper` the paper's scale" if has_profile(mod, "paper") else "")
              + " (`testbed list --params` prints the same).", "",
              params_table(mod), ""]
    parts += paper_profile_section(mod)
    headline = mod.HEADLINE
    if headline:
        parts += ["## Headline results", "",
                  "The `summary.json` keys the run's last line prints:", "",
                  ", ".join(f"`{k}`" for k in headline), ""]
    if mod.REFERENCE:
        parts += ["## The paper's values", "", "`REFERENCE` in the module:", "",
                  reference_table(dict(mod.REFERENCE)), ""]
    claims = tuple(mod.CLAIMS)
    if claims:
        parts += ["## Claims judged by `testbed report`", "",
                  "Each claim is judged on the mean over the faithful runs "
                  "([how](../getting-started.md#the-paper-claims-and-the-report)).", "",
                  claims_table(claims), ""]
    else:
        parts += ["## Claims", "",
                  f"{name} declares no paper claims: its checks are acceptance figures, "
                  "and `testbed report` lists it as not judged.", ""]
    names, per_phase = plot_names(mod)
    if names or per_phase:
        parts += ["## Plots", "", "Under the run's `plots/`:", ""]
        parts += [f"- `{n}`" for n in names]
        if per_phase:
            parts.append("- `<phase>.png`: one timeline per phase (rates, the bottleneck "
                         "queue, CNPs, DCQCN)")
        parts.append("")
    analysis = ANALYSIS / f"{name}.md"
    if analysis.exists():
        parts += [analysis.read_text().rstrip(), ""]
    else:
        log.warning("experiment %s has no analysis page %s", name, analysis.relative_to(ROOT))
    assert describe(mod) == first.strip()
    return "\n".join(parts)


def experiments_index(exps: dict[str, Experiment]) -> str:
    from testbed.experiment import describe

    rows = ["| experiment | what it shows | paper claims |", "|---|---|---|"]
    for name, mod in exps.items():
        n = len(mod.CLAIMS)
        rows.append(f"| [{name}]({name}.md) | {_cell(describe(mod))} | {n or '-'} |")
    return "\n".join([
        "# Experiments", "",
        "One module per experiment in `experiments/`; each page below is generated from "
        "its module when the docs are built, with the conclusions drawn from the runs "
        "beside it. `testbed list` prints the same list, `testbed list --params` the "
        "parameters.", "",
        *rows, "",
        "How to write one: [Writing an experiment](../writing-an-experiment.md).", ""])


def _sim_bench_rows(rec: dict[str, Any]) -> list[str]:
    """``testbed bench sim --json``: one row per size and interpreter, then ns-3's figure."""
    rows = ["| ranks (leaf x spine) | chunk | payload | interpreter | packet-hops | wall | "
            "packet-hops/s | events/s | peak memory |", "|---|---|---|---|---|---|---|---|---|"]
    for f in rec["sim"]:
        rows.append(f"| {f['ranks']} ({f['leaves']} x {f['spines']}) | {f['chunk_kib']} KiB | "
                    f"{f['payload']} | {f['interpreter']} | {f['packet_hops']:,} | "
                    f"{f['wall_s']:.1f} s | **{f['packet_hops_per_s']:,}** | "
                    f"{f['events_per_s']:,} | {f['peak_rss_mib']:.0f} MiB |")
    ns3 = rec.get("ns3")
    if ns3:
        rows += ["", f"ns-3 {ns3['ns3_version']} in the same run, a UDP flood of "
                     f"{ns3['packets']:,} packets through a {ns3['hops']}-hop chain: "
                     f"**{round(ns3['packet_hops_per_s']):,}** packet-hops/s."]
    return rows + [""]


def measurements_page() -> str:
    parts = ["# Reference measurements", "",
             "Benchmark records kept in `results/reference/`, each made by the command it "
             "names, on the machine it describes; rendered here from the JSON when the docs "
             "are built.", ""]
    for rel in MEASUREMENTS:
        rec = json.loads((ROOT / rel).read_text())
        parts += [f"## `{Path(rel).name}`", "", f"Command: `{rec['command']}`", "",
                  f"Commit: `{rec['commit'][:12]}`" + (" (tree not clean)" if rec.get("dirty") else ""),
                  "", "Machine: " + _cell(", ".join(f"{k} {v}" for k, v in rec["machine"].items())),
                  ""]
        if "sim" in rec:
            parts += _sim_bench_rows(rec)
            continue
        results = rec["results"]
        if "total_s" in rec:
            m, s = divmod(round(rec["total_s"]), 60)
            parts += [f"Total: **{m} min {s:02d} s** of wall time.", "",
                      "| experiment | time (m:ss) | fidelity |", "|---|---|---|"]
            for r in results:
                m, s = divmod(round(r["seconds"]), 60)
                parts.append(f"| {r['experiment']} | {m}:{s:02d} | {_cell(r['verdict'])} |")
        else:
            parts += ["| backend | Mb/s | pkt/s through the switch | switch CPU s / Mpkt |",
                      "|---|---|---|---|"]
            for r in results:
                parts.append(f"| `{r['backend']}` | {round(r['mbps'])} | {r['pps']} | "
                             f"{r['cpu_s_per_mpkt']} |")
        parts.append("")
    return "\n".join(parts)


# ---------------------------------------------------------------------------
# MkDocs events


def on_config(config: Any) -> Any:
    """Put one navigation entry per experiment under "Experiments", and let
    snippets (the tutorial's code) resolve from the repository root whatever
    the working directory."""
    snippets = config["mdx_configs"].get("pymdownx.snippets")
    if snippets is not None:
        snippets["base_path"] = [str(ROOT)]
    exps = _experiments()
    entries: list[Any] = [{"Overview": "experiments/index.md"}]
    entries += [{name: f"experiments/{name}.md"} for name in exps]
    nav = config["nav"] or []
    for i, item in enumerate(nav):
        if isinstance(item, dict) and "Experiments" in item:
            nav[i] = {"Experiments": entries}
    return config


def on_page_content(html: str, page: Any, config: Any, files: Any) -> str:
    """mkdocs-click prints click 8.2+'s "no default" sentinel as a default
    (``Sentinel.UNSET``): show no default there, as ``--help`` does."""
    return html.replace("<code>Sentinel.UNSET</code>", "")


def on_files(files: Any, config: Any) -> Any:
    from mkdocs.structure.files import File

    exps = _experiments()
    for name, mod in exps.items():
        files.append(File.generated(config, f"experiments/{name}.md",
                                    content=experiment_page(name, mod)))
    files.append(File.generated(config, "experiments/index.md", content=experiments_index(exps)))
    files.append(File.generated(config, "reference/measurements.md", content=measurements_page()))
    for rel in REPO_NOTES:
        files.append(File.generated(config, f"repo/{rel}", content=(ROOT / rel).read_text()))
    for rel in REPO_IMAGES:
        files.append(File.generated(config, f"repo/{rel}", abs_src_path=str(ROOT / rel)))
    analyses = {p.stem for p in ANALYSIS.glob("*.md")}
    for stray in sorted(analyses - set(exps)):
        log.warning("docs/experiments/analysis/%s.md names no experiment", stray)
    return files
