"""The virtual-time engine under PyPy: the same SimRun, in a child process.

The simulator spends its time in plain Python (the generated P4 pipeline,
the traffic manager, the RoCE stack, the event loop), which PyPy's JIT runs
two to three times faster than CPython (``testbed bench sim``). The runner
stays on CPython (click, matplotlib, the P4 compiler); only the phases run
in the child:

- the parent compiles the plan's P4 program and writes the generated module
  to a file (switches.soft.backends.write_generated): the compiler needs
  Python 3.10+, Debian's PyPy is Python 3.9;
- the child (``python -m testbed.sim.pypy``) backports the few newer
  features the simulated path uses (backends.install_compat), reads the plan
  (pickled) on stdin, runs every phase into the run directory with the
  runner's own driver (testbed.sim.driver.run_phases), and reports on a pipe
  of its own: progress lines, then the run's record, its fidelity
  verdict, the switch commands it applied and the error that stopped it;
- results are the same under both interpreters (a test compares the run
  directories); the interpreter is recorded in summary.json's ``sim``.

PyPy is used where ``.venv-pypy`` (made by setup.sh, with numpy) exists, or
at the path in ``$TESTBED_SIM_PYPY``; ``--interpreter`` chooses explicitly.
"""

from __future__ import annotations

import json
import os
import pickle
import signal
import subprocess
import sys
import tempfile
from collections.abc import Callable
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING, Any

from testbed.sim.driver import FAULT, SimOutcome

if TYPE_CHECKING:
    from testbed.experiment import RunPlan

INTERPRETERS = ("auto", "pypy", "cpython")
PYPY_ENV = "TESTBED_SIM_PYPY"  # a PyPy executable with numpy, instead of .venv-pypy
_ROOT = Path(__file__).resolve().parents[2]


class InterpreterError(ValueError):
    """The interpreter asked for cannot run the simulation here."""


@cache
def find_pypy() -> str | None:
    """A PyPy that can run the simulation (numpy importable), or None."""
    exe = os.environ.get(PYPY_ENV) or str(_ROOT / ".venv-pypy" / "bin" / "python")
    if not os.access(exe, os.X_OK):
        return None
    try:
        r = subprocess.run([exe, "-c", "import platform, numpy; "
                            "print(platform.python_implementation())"],
                           capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return exe if r.returncode == 0 and r.stdout.strip() == "PyPy" else None


def choose(interpreter: str) -> str | None:
    """The executable to run the simulation in, or None for this process
    (CPython). ``auto``: PyPy where it is set up."""
    if interpreter not in INTERPRETERS:
        raise InterpreterError(f"unknown interpreter {interpreter!r} "
                               f"(choose from {', '.join(INTERPRETERS)})")
    if interpreter == "cpython":
        return None
    exe = find_pypy()
    if exe is None and interpreter == "pypy":
        raise InterpreterError(
            "--interpreter pypy: no PyPy with numpy found (./setup.sh makes .venv-pypy; "
            f"or set {PYPY_ENV} to a PyPy executable that imports numpy)")
    return exe


# PyPy's young generation: the simulation allocates a few short-lived objects
# per packet (frames, headers, events); a nursery of 64 MB instead of the
# default (about 1 MB: the L2 cache) takes a sixth off its CPU time
# (results/reference/sim-bench-pypy.json) for some 130 MB more memory.
GC_NURSERY = "64MB"


def child_env() -> dict[str, str]:
    """The environment of a simulation child: this checkout first on its
    path, PyPy's nursery at GC_NURSERY unless the caller chose one."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(_ROOT), env.get("PYTHONPATH", "")) if p)
    env.setdefault("PYPY_GC_NURSERY", GC_NURSERY)
    return env


def run_in_child(exe: str, plan: RunPlan, run_dir: Path, *, seed: int, host_links: str,
                 packet_bytes: int, program_path: str,
                 line: Callable[[str], None]) -> SimOutcome:
    """Run every phase of ``plan`` under ``exe``; progress goes to ``line``.
    A child that dies without reporting raises RuntimeError with its last
    words; Ctrl-C or SIGTERM here stops the child too."""
    job = pickle.dumps({"plan": plan, "run_dir": str(run_dir.resolve()), "seed": seed,
                        "host_links": host_links, "packet_bytes": packet_bytes,
                        "program_path": program_path})
    errors = tempfile.TemporaryFile()  # the child's stderr, whose tail names a crash
    rfd, wfd = os.pipe()
    try:
        child = subprocess.Popen([exe, "-m", "testbed.sim.pypy", str(wfd)],
                                 stdin=subprocess.PIPE, stderr=errors,
                                 pass_fds=(wfd,), env=child_env(), cwd=str(_ROOT))
    finally:
        os.close(wfd)
    outcome: SimOutcome | None = None
    stderr_text = ""
    try:
        assert child.stdin is not None
        child.stdin.write(job)
        child.stdin.close()
        with os.fdopen(rfd, "r") as reports:
            for raw in reports:
                msg = json.loads(raw)
                if "line" in msg:
                    line(msg["line"])
                elif "done" in msg:
                    outcome = SimOutcome(**msg["done"])
        child.wait()
        errors.seek(0)
        stderr_text = errors.read().decode(errors="replace")
    finally:
        errors.close()
        if child.poll() is None:  # interrupted here: the child stops as well
            child.send_signal(signal.SIGTERM)
            try:
                child.wait(timeout=10)
            except subprocess.TimeoutExpired:
                child.kill()
                child.wait()
    if outcome is None:
        raise RuntimeError(f"the simulation under {exe} ended (exit {child.returncode}) "
                           "without a report: " + " | ".join(stderr_text.splitlines()[-5:]))
    if outcome.error and outcome.error.startswith(FAULT):
        sys.stderr.write(stderr_text)  # the child's traceback
    return outcome


def _child(report_fd: int) -> int:
    from switches.soft.backends import install_compat

    install_compat()  # before anything imports hosts (enum.StrEnum, zip(strict=))
    import traceback

    from switches.soft.backends import load_generated
    from testbed.sim.driver import run_phases

    reports = os.fdopen(report_fd, "w")

    def report(**msg: Any) -> None:
        reports.write(json.dumps(msg) + "\n")
        reports.flush()

    job = pickle.loads(sys.stdin.buffer.read())
    out = run_phases(job["plan"], Path(job["run_dir"]), seed=job["seed"],
                     host_links=job["host_links"], packet_bytes=job["packet_bytes"],
                     load_program=lambda: load_generated(job["program_path"]),
                     line=lambda m: report(line=m))
    e = out.exception
    if e is not None and out.error and out.error.startswith(FAULT):
        traceback.print_exception(type(e), e, e.__traceback__)  # (3.9's signature)
    report(done=out.report())
    if e is not None and not isinstance(e, (Exception, KeyboardInterrupt)):
        raise e  # reported, and still the child's end (SystemExit and the like)
    return 130 if out.interrupted else 0


if __name__ == "__main__":
    sys.exit(_child(int(sys.argv[1])))
