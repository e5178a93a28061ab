#!/usr/bin/env python3
"""Run p4c's v1model STF tests (testdata/p4_16_samples) on the soft target.

Every ``X.stf`` whose program ``X.p4`` is a v1model program is run through
``switches.soft.stf.run_stf`` in its own subprocess (with a timeout), a few in
parallel. Prints PASS/FAIL per test and two totals:
  (a) tests whose .stf needs no ``add`` (no control-plane table entries),
  (b) all v1model tests.
The corpus is read in place; nothing from it is copied into the repository.

    .venv/bin/python scripts/p4c_corpus.py [--corpus ROOT] [--filter SUBSTR]
        [--only-failures] [--json] [--jobs 2] [--timeout 60] [--backend pypy]

ROOT is the corpus root (the directory holding testdata/: a p4c checkout or
a copy); it defaults to $P4C_CORPUS, else ../shared/p4c-corpus next to the
repository (see switches/p4c_corpus.py).
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from switches.p4c_corpus import CORPUS_ENV, corpus_root, samples_dir, v1model_stf_tests  # noqa: E402

_ADD = re.compile(r"^\s*add\s", re.MULTILINE)


@dataclass
class Outcome:
    name: str
    needs_add: bool
    status: str  # pass, fail, compile-error, unsupported, crash, timeout
    detail: str = ""
    packets: int = 0
    seconds: float = 0.0

    @property
    def passed(self) -> bool:
        return self.status == "pass"


def run_one(p4: str, stf: str, backend: str = "python") -> int:
    """Child process: run one test, print one JSON line, exit 0."""
    out: dict[str, object] = {"status": "crash", "detail": "", "packets": 0}
    try:
        from switches.soft.frontend.source import P4Error, P4Unsupported
        from switches.soft.stf import run_stf

        try:
            res = run_stf(Path(p4), Path(stf), backend=backend)
        except P4Unsupported as e:
            out.update(status="unsupported", detail=str(e))
        except P4Error as e:
            out.update(status="compile-error", detail=str(e))
        else:
            out["packets"] = int(getattr(res, "packets", 0))
            if res.passed:
                out["status"] = "pass"
            else:
                out["status"] = "fail"
                out["detail"] = "; ".join(str(m) for m in list(res.mismatches)[:3])
    except Exception as e:  # noqa: BLE001 - any crash is one test's result
        out.update(status="crash", detail=f"{type(e).__name__}: {e}")
    print(json.dumps(out))
    return 0


def run_test(p4: Path, stf: Path, corpus: Path, timeout: float,
             backend: str = "python") -> Outcome:
    name = str(stf.relative_to(corpus).with_suffix(""))
    needs_add = bool(_ADD.search(stf.read_text(errors="replace")))
    t0 = time.monotonic()
    try:
        proc = subprocess.run(
            [sys.executable, str(Path(__file__).resolve()), "--run-one", str(p4), str(stf),
             "--backend", backend],
            capture_output=True, text=True, timeout=timeout, cwd=str(ROOT),
        )
    except subprocess.TimeoutExpired:
        return Outcome(name, needs_add, "timeout", f"> {timeout:g} s", 0, time.monotonic() - t0)
    dt = time.monotonic() - t0
    lines = proc.stdout.strip().splitlines()
    try:
        res = json.loads(lines[-1])
    except (IndexError, json.JSONDecodeError):
        tail = (proc.stderr.strip().splitlines() or ["no output"])[-1]
        return Outcome(name, needs_add, "crash", f"exit {proc.returncode}: {tail}", 0, dt)
    return Outcome(name, needs_add, res["status"], res["detail"], res["packets"], dt)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description="Run p4c's v1model STF corpus on the soft target.")
    ap.add_argument("--corpus", type=Path, default=None, metavar="ROOT",
                    help=f"corpus root, holding testdata/ (default: ${CORPUS_ENV}, else "
                         f"{corpus_root()})")
    ap.add_argument("--filter", dest="substr", help="only tests whose path contains SUBSTR")
    ap.add_argument("--only-failures", action="store_true", help="print only failing tests")
    ap.add_argument("--json", action="store_true", help="print a JSON summary instead of text")
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--timeout", type=float, default=60.0, help="seconds per test")
    ap.add_argument("--backend", default="python",
                    help="data-path backend the tests run on (python, pypy)")
    ap.add_argument("--run-one", nargs=2, metavar=("P4", "STF"), help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.run_one:
        return run_one(args.run_one[0], args.run_one[1], backend=args.backend)

    corpus = samples_dir(args.corpus).resolve()
    if not corpus.is_dir():
        ap.error(f"corpus samples not found: {corpus} (give --corpus or set {CORPUS_ENV} "
                 "to the directory holding testdata/)")
    tests = [(p4, stf) for p4, stf in v1model_stf_tests(corpus)
             if not args.substr or args.substr in str(stf.relative_to(corpus))]
    outcomes: list[Outcome] = []
    with ThreadPoolExecutor(max_workers=max(1, args.jobs)) as pool:
        futures = [pool.submit(run_test, p4, stf, corpus, args.timeout, args.backend)
                   for p4, stf in tests]
        for fut in futures:
            o = fut.result()
            outcomes.append(o)
            if not args.json and not (args.only_failures and o.passed):
                line = f"{'PASS' if o.passed else 'FAIL'} {o.name}"
                if not o.passed:
                    line += f" [{o.status}] {o.detail}"[:300]
                print(line, flush=True)

    no_add = [o for o in outcomes if not o.needs_add]
    summary = {
        "corpus": str(corpus),
        "backend": args.backend,
        "no_add": {"passed": sum(o.passed for o in no_add), "total": len(no_add)},
        "all": {"passed": sum(o.passed for o in outcomes), "total": len(outcomes)},
        "by_status": {s: sum(o.status == s for o in outcomes)
                      for s in sorted({o.status for o in outcomes})},
        "tests": [asdict(o) | {"seconds": round(o.seconds, 2)} for o in outcomes
                  if not (args.only_failures and o.passed)],
    }
    if args.json:
        print(json.dumps(summary, indent=2))
    else:
        print(f"(a) v1model tests without table entries (no 'add'): "
              f"{summary['no_add']['passed']}/{summary['no_add']['total']} pass")
        print(f"(b) all v1model tests: {summary['all']['passed']}/{summary['all']['total']} pass")
        print("by status: " + ", ".join(f"{k} {v}" for k, v in summary["by_status"].items()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
