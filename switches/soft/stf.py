"""STF tests on the soft switch: the executor of ``switches.stf`` for it.

``run_stf(p4_path, stf_path) -> StfResult`` compiles the program and runs
the test against a fresh switch. Packets are processed synchronously (each
goes through ingress, the traffic manager and egress before the next
command), so ``wait`` has nothing to wait for. Syntax, names, value forms
and the verdict are :mod:`switches.stf`'s, shared with the BMv2 runner.

``main(argv)`` is the command-line entry (``python -m switches.soft.stf
prog.p4 test.stf [--json]``): prints a readable diff and returns 0 if the
test passed, 1 if it failed, 2 if it could not run (the program does not
compile, the file is unreadable, or a line is not STF or names a table the
program does not have: ``file:line:``).
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

from switches.soft.control.verbs import CommandError, ControlPlane
from switches.soft.runtime.contract import ProgramModule
from switches.soft.runtime.switch import SoftSwitch
from switches.soft.runtime.tables import TableError
from switches.stf.engine import Entry, KeyField, TableView, resolve_name, run_commands
from switches.stf.syntax import StfError, parse_stf
from switches.stf.verdict import StfResult

# the runtime's priorities: smaller wins; the engine's ranks: higher wins
_RANK_CEILING = 1 << 21


class SoftStfTarget:
    """The soft switch as an STF target (switches.stf.engine.StfTarget)."""

    command_errors: tuple[type[Exception], ...] = (CommandError, TableError, ValueError)

    def __init__(self, switch: SoftSwitch) -> None:
        self.sw = switch
        self.control = ControlPlane(switch)
        self._outputs: dict[int, list[bytes]] = {}
        self._views = {name: TableView(name, tuple(KeyField(k.name, k.match_kind, k.width)
                                                   for k in t.keys),
                                       tuple(t.info.actions))
                       for name, t in switch.tables.items()}

    def tables(self) -> Mapping[str, TableView]:
        return self._views

    def action_params(self, action: str) -> Sequence[tuple[str, int]]:
        info = self.sw.info.actions.get(action)
        return [(p.name, p.width) for p in info.params] if info is not None else []

    def send(self, port: int, frame: bytes) -> None:
        errors_before = self.sw.drops["exception"]
        for p, out in self.sw.process_sync(port, frame):
            self._outputs.setdefault(p, []).append(out)
        if self.sw.drops["exception"] != errors_before:
            raise StfError(f"the pipeline raised an exception: {self.sw.last_error}")

    def settle(self) -> None:
        pass  # processing is synchronous: everything sent is done

    def outputs(self) -> Mapping[int, Sequence[bytes]]:
        return self._outputs

    def add(self, entry: Entry) -> int:
        table = self.sw.tables[entry.table]
        matches: list[object] = []
        for m, k in zip(entry.matches, table.keys, strict=True):
            if m is not None:
                matches.append(m)
            elif k.match_kind in ("lpm", "ternary", "optional"):
                matches.append((0, 0))  # not given: matches anything, as p4c's runner
            elif k.match_kind == "range":
                matches.append((0, (1 << k.width) - 1))
            else:
                matches.append(0)
        prio = None if entry.rank is None else _RANK_CEILING - entry.rank
        return table.add_entry(matches, entry.action, [v for _, v in entry.args], prio)

    def set_default(self, table: str, action: str, args: tuple[tuple[str, int], ...]) -> None:
        self.sw.tables[table].set_default(action, [v for _, v in args])

    def remove_all(self) -> None:
        for t in self.sw.tables.values():
            t.clear()

    def read_counter(self, name: str, index: int | tuple[str, int]) -> tuple[int, int]:
        full = resolve_name(list(self.sw.info.counters), name, "counter")
        direct = self.sw.info.counters[full].direct_table
        if direct:
            handle = index[1] if isinstance(index, tuple) else index
            e = self.sw.tables[direct].get_entry(handle)
            return e.packets, e.bytes
        if isinstance(index, tuple):
            raise StfError(f"counter {full} is not a direct counter: give an index")
        nbytes, packets = self.sw.counters[full].read(index)
        return packets, nbytes

    def cli(self, line: str) -> None:
        self.control.execute(line)


def run_stf_text(module: ProgramModule, text: str, filename: str = "<stf>",
                 switch_factory: Callable[[ProgramModule], SoftSwitch] | None = None
                 ) -> StfResult:
    """Run STF ``text`` against a compiled program module (StfSyntaxError if
    a line is not STF or names a table the program does not have)."""
    commands = parse_stf(text, filename)
    sw = SoftSwitch(module) if switch_factory is None else switch_factory(module)
    return run_commands(commands, SoftStfTarget(sw), filename)


def run_stf(p4_path: str | Path, stf_path: str | Path, backend: str = "python",
            timeout: float | None = None,
            defines: Mapping[str, str] | None = None) -> StfResult:
    """Compile ``p4_path`` (includes from its directory; ``defines``: its
    preprocessor defines, name -> value) and run ``stf_path`` on data-path
    ``backend`` (see ``switches.soft.backends``; anything but ``python`` runs
    in a subprocess of that backend's interpreter, which may take ``timeout``
    seconds). Raises StfSyntaxError before compiling when the file is not STF."""
    from switches.soft.backends import check_backend
    from switches.soft.compiler import compile_program
    check_backend(backend)
    p4_path = Path(p4_path)
    text = Path(stf_path).read_text()
    parse_stf(text, str(stf_path))
    module = compile_program(str(p4_path), include_dirs=[str(p4_path.parent)],
                             defines=defines or None)
    if backend == "python":
        return run_stf_text(module, text, str(stf_path))
    return _run_stf_subprocess(backend, module, Path(stf_path), timeout)


def _run_stf_subprocess(backend: str, module: ProgramModule, stf_path: Path,
                        timeout: float | None) -> StfResult:
    import os
    import subprocess

    from switches.soft.backends import interpreter, write_generated
    root = str(Path(__file__).resolve().parents[2])
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (root, env.get("PYTHONPATH", "")) if p)
    cmd = [interpreter(backend), "-m", "switches.soft.stf", "--generated",
           write_generated(module), str(stf_path), "--json"]
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=root,
                          timeout=timeout, check=False)
    lines = proc.stdout.strip().splitlines()
    try:
        rec = json.loads(lines[-1])
    except (IndexError, ValueError):
        raise StfError(f"backend {backend}: STF run failed (exit {proc.returncode}): "
                       f"{proc.stderr.strip()[-2000:]}") from None
    if proc.returncode == 2:
        raise StfError(f"backend {backend}: {'; '.join(rec.get('mismatches', []))}")
    return StfResult(passed=bool(rec["passed"]), packets=int(rec["packets"]),
                     mismatches=list(rec["mismatches"]))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="stf", description="Run an STF test on the soft switch")
    ap.add_argument("p4", nargs="?", help="P4_16 v1model program")
    ap.add_argument("stf", help="STF test file")
    ap.add_argument("--json", action="store_true", help="print the result as JSON")
    ap.add_argument("--backend", default="python", help="data-path backend (python, pypy)")
    ap.add_argument("--generated", metavar="FILE",
                    help="run an already generated program module instead of compiling P4 "
                         "(what a non-default backend's subprocess does)")
    a = ap.parse_args(argv)
    if (a.p4 is None) == (a.generated is None):
        ap.error("give either a P4 program or --generated FILE")
    try:
        if a.generated:
            from switches.soft.backends import install_compat, load_generated
            install_compat()
            res = run_stf_text(load_generated(a.generated), Path(a.stf).read_text(), a.stf)
        else:
            res = (run_stf(a.p4, a.stf) if a.backend == "python"
                   else run_stf(a.p4, a.stf, backend=a.backend))
    except Exception as e:  # STF syntax, compile errors and unreadable files
        if a.json:
            print(json.dumps({"passed": False, "packets": 0, "mismatches": [str(e)]}))
        else:
            print(f"error: {e}", file=sys.stderr)
        return 2
    if a.json:
        print(json.dumps(res.to_json()))
    else:
        for m in res.mismatches:
            print(f"*** {m}")
        print(f"{'PASS' if res.passed else 'FAIL'}: {a.stf} ({res.packets} packets)")
    return 0 if res.passed else 1


if __name__ == "__main__":
    sys.exit(main())
