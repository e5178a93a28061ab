"""Compiling the project's P4 programs for BMv2 with p4c.

    json_path, p4info_path = compile_bmv2("switches/p4/l3_router.p4", "build/bmv2")

runs ``p4c --target bmv2 --arch v1model --p4runtime-files <p4info.txt> -o
<dir> <program>`` (or ``p4c-bm2-ss``, the BMv2 back end alone, when the
``p4c`` driver is missing). Results are cached: a compile is skipped when the
program, every file it includes with ``#include "..."`` (quoted includes are
the project's own; ``<core.p4>``/``<v1model.p4>`` belong to the compiler,
whose identity is part of the key), the include directories, the defines and
the compiler binary are unchanged.

p4c reports positions as ``file(line):`` followed by the source line and a
caret line; :class:`P4cError` turns them into ``file:line:col: message``
(the column from the carets) and keeps p4c's full output.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import subprocess
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

P4C_MISSING = ("p4c not found: BMv2 runs in the Vagrant VM (vagrant up), "
               "or install p4lang's packages")
STAMP_SUFFIX = ".bmv2-build.json"
COMPILE_TIMEOUT = 600.0


class ToolMissing(RuntimeError):
    """A BMv2 tool (p4c, simple_switch_grpc, simple_switch_CLI) is not on PATH."""


@dataclass(frozen=True)
class P4cDiagnostic:
    """One error or warning of p4c, at a source position."""

    file: str
    line: int
    col: int
    severity: str  # "error" or "warning"
    message: str

    def __str__(self) -> str:
        return f"{self.file}:{self.line}:{self.col}: {self.severity}: {self.message}"


class P4cError(RuntimeError):
    """p4c rejected the program. ``str()`` starts with its errors as
    ``file:line:col: error: message``, then p4c's own output."""

    def __init__(self, program: str, command: Sequence[str], output: str,
                 returncode: int | None) -> None:
        self.program = program
        self.command = list(command)
        self.output = output
        self.returncode = returncode
        self.diagnostics = parse_p4c_output(output)
        errors = [d for d in self.diagnostics if d.severity == "error"] or self.diagnostics
        head = "\n".join(str(d) for d in errors)
        how = "timed out" if returncode is None else f"exit code {returncode}"
        summary = head or f"{program}: p4c failed ({how})"
        super().__init__(f"{summary}\n--- p4c output ({how}): {' '.join(self.command)}\n"
                         f"{output.rstrip()}")


_POS = re.compile(r"^(?P<file>[^\s()][^()]*?\.\w+)\((?P<line>\d+)\):?\s*(?P<rest>.*)$")
_SEVERITY = re.compile(r"(?:\[--W\w+=[\w-]+\]\s*)?(?P<sev>error|warning|fatal error)\s*:?\s*(?P<msg>.*)$",
                       re.IGNORECASE)


def parse_p4c_output(output: str) -> list[P4cDiagnostic]:
    """The positioned diagnostics in p4c's output (``file(line): ... error: msg``,
    then the source line and a ``^^^`` marker whose offset is the column)."""
    lines = output.splitlines()
    out: list[P4cDiagnostic] = []
    for i, text in enumerate(lines):
        m = _POS.match(text.rstrip())
        if not m:
            continue
        rest = m.group("rest")
        sm = _SEVERITY.search(rest)
        if sm:
            severity = "warning" if sm.group("sev").lower() == "warning" else "error"
            message = sm.group("msg").strip() or rest.strip()
        else:
            # A position with no severity word: a note continuing the
            # previous diagnostic (p4c prints the other side of a conflict so).
            severity, message = ("note", rest.strip())
        col = 1
        # The source line follows, then the caret marker under the span.
        for j in (i + 2, i + 1):
            if j < len(lines) and re.fullmatch(r"\s*\^+\s*", lines[j]):
                col = lines[j].index("^") + 1
                break
        if severity == "note" and out:
            continue
        out.append(P4cDiagnostic(m.group("file"), int(m.group("line")), col, severity, message))
    return out


def find_p4c() -> tuple[str, str]:
    """(path, kind) of the compiler: kind ``p4c`` (the driver) or ``p4c-bm2-ss``."""
    for kind in ("p4c", "p4c-bm2-ss"):
        path = shutil.which(kind)
        if path is not None:
            return path, kind
    raise ToolMissing(P4C_MISSING)


def p4c_command(compiler: str, kind: str, program: str, out_dir: str, json_path: str,
                p4info_path: str, include_dirs: Iterable[str] = (),
                defines: Mapping[str, str] | None = None) -> list[str]:
    """The p4c command line producing ``json_path`` and ``p4info_path``.

    The driver writes ``<out_dir>/<program stem>.json``; p4c-bm2-ss writes
    the file named by ``-o``."""
    cmd = [compiler]
    if kind == "p4c":
        cmd += ["--target", "bmv2", "--arch", "v1model", "--std", "p4-16"]
    else:
        cmd += ["--arch", "v1model", "--std", "p4-16"]
    for d in include_dirs:
        cmd += ["-I", str(d)]
    for name, value in (defines or {}).items():
        cmd += ["-D", f"{name}={value}" if value != "" else name]
    cmd += ["--p4runtime-files", p4info_path]
    cmd += ["-o", out_dir if kind == "p4c" else json_path, program]
    return cmd


_INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)


def _source_files(program: Path, include_dirs: Sequence[Path]) -> list[Path]:
    """The program and every file reachable through quoted includes."""
    seen: dict[Path, None] = {}
    todo = [program.resolve()]
    while todo:
        path = todo.pop()
        if path in seen:
            continue
        seen[path] = None
        try:
            text = path.read_text(errors="replace")
        except OSError:
            continue
        for name in _INCLUDE.findall(text):
            for base in (path.parent, *include_dirs):
                cand = (base / name)
                if cand.is_file():
                    todo.append(cand.resolve())
                    break
    return list(seen)


def source_hash(program: str | os.PathLike[str], include_dirs: Sequence[str] = (),
                defines: Mapping[str, str] | None = None, compiler: str = "") -> str:
    """The cache key of a compile: sources, flags and the compiler binary."""
    prog = Path(program)
    dirs = [Path(d).resolve() for d in include_dirs]
    h = hashlib.sha256()
    for path in sorted(_source_files(prog, dirs)):
        h.update(str(path).encode() + b"\0")
        try:
            h.update(path.read_bytes())
        except OSError:
            h.update(b"<missing>")
        h.update(b"\0")
    h.update(json.dumps([str(d) for d in dirs]).encode())
    h.update(json.dumps(sorted((defines or {}).items())).encode())
    if compiler:
        try:
            st = os.stat(compiler)
            h.update(f"{os.path.realpath(compiler)}:{st.st_size}:{st.st_mtime_ns}".encode())
        except OSError:
            h.update(compiler.encode())
    return h.hexdigest()


def compile_bmv2(program: str | os.PathLike[str], out_dir: str | os.PathLike[str],
                 include_dirs: Sequence[str | os.PathLike[str]] = (),
                 defines: Mapping[str, str] | None = None) -> tuple[str, str]:
    """Compile ``program`` for BMv2 simple_switch(_grpc): (bmv2 JSON path,
    P4Info text path), both in ``out_dir``. Raises :class:`ToolMissing`
    without p4c and :class:`P4cError` when p4c rejects the program."""
    prog = Path(program).resolve()
    if not prog.is_file():
        raise FileNotFoundError(f"P4 program not found: {program}")
    compiler, kind = find_p4c()
    out = Path(out_dir).resolve()
    out.mkdir(parents=True, exist_ok=True)
    dirs = [str(Path(d).resolve()) for d in include_dirs]
    json_path = out / f"{prog.stem}.json"
    p4info_path = out / f"{prog.stem}.p4info.txt"
    stamp = out / f"{prog.stem}{STAMP_SUFFIX}"
    key = source_hash(prog, dirs, defines, compiler)
    try:
        if (json.loads(stamp.read_text()).get("hash") == key and json_path.is_file()
                and p4info_path.is_file()):
            return str(json_path), str(p4info_path)
    except (OSError, ValueError, AttributeError):
        pass
    # No stamp while compiling: an interrupted compile is never taken as done.
    stamp.unlink(missing_ok=True)
    cmd = p4c_command(compiler, kind, str(prog), str(out), str(json_path), str(p4info_path),
                      dirs, defines)
    try:
        proc = subprocess.run(cmd, stdin=subprocess.DEVNULL, capture_output=True, text=True,
                              timeout=COMPILE_TIMEOUT)
    except subprocess.TimeoutExpired as e:
        partial = "".join(x.decode(errors="replace") if isinstance(x, bytes) else x
                          for x in (e.stdout or "", e.stderr or ""))
        raise P4cError(str(prog), cmd, partial, None) from None
    output = proc.stdout + proc.stderr
    if proc.returncode != 0:
        raise P4cError(str(prog), cmd, output, proc.returncode)
    missing = [str(p) for p in (json_path, p4info_path) if not p.is_file()]
    if missing:
        raise P4cError(str(prog), cmd, output + f"\n(p4c wrote no {', '.join(missing)})",
                       proc.returncode)
    stamp.write_text(json.dumps({"hash": key, "program": str(prog), "command": cmd}) + "\n")
    return str(json_path), str(p4info_path)


__all__ = ["P4C_MISSING", "P4cDiagnostic", "P4cError", "ToolMissing", "compile_bmv2",
           "find_p4c", "p4c_command", "parse_p4c_output", "source_hash"]
