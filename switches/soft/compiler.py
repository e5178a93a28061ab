"""The soft target's P4 compiler driver: P4 source -> Python module.

``compile_program(path)`` parses, checks and generates a Python module (see
``switches.soft.backend.pygen``), executes it and returns it: the module has
``INFO`` (contract.ProgramInfo), ``make_program(rt)`` and ``SOURCE`` (the
generated text).

Generated source is cached in ``$XDG_CACHE_HOME/p4testbed/`` (default
``~/.cache/p4testbed/``). The cache key covers the main file, the include
directories, the defines and the compiler's own sources; the cached record
lists every file the preprocessor read with its hash, so an edited include
also misses the cache.

Command line: ``python -m switches.soft.compiler prog.p4 [-o out.py]
[-I dir] [-D NAME[=VALUE]]`` writes the generated module.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import sys
import types
from collections.abc import Iterable, Mapping
from pathlib import Path

from .backends import load_source
from .frontend.source import Location, P4Error, P4Unsupported

_SOFT_DIR = Path(__file__).resolve().parent
_compiler_hash: str | None = None


def compiler_version() -> str:
    """Hash of the compiler's own sources (frontend, midend, backend, includes):
    a change to any of them invalidates cached output."""
    global _compiler_hash
    if _compiler_hash is None:
        h = hashlib.sha256()
        files: list[Path] = [Path(__file__).resolve()]
        for sub, pat in (("frontend", "*.py"), ("midend", "**/*.py"), ("backend", "*.py"),
                         ("p4include", "*.p4"), ("runtime", "contract.py")):
            files += sorted((_SOFT_DIR / sub).glob(pat))
        for f in files:
            h.update(str(f.relative_to(_SOFT_DIR)).encode())
            h.update(f.read_bytes())
        _compiler_hash = h.hexdigest()
    return _compiler_hash


def cache_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "p4testbed"


def _file_hash(path: str) -> str | None:
    try:
        return hashlib.sha256(Path(path).read_bytes()).hexdigest()
    except OSError:
        return None


def _request_key(path: str, include_dirs: tuple[str, ...],
                 defines: Mapping[str, object] | None, trace: bool = False) -> str:
    h = hashlib.sha256()
    h.update(compiler_version().encode())
    if trace:
        h.update(b"trace")
    h.update(os.path.abspath(path).encode())
    h.update(Path(path).read_bytes())
    h.update(json.dumps([os.path.abspath(d) for d in include_dirs]).encode())
    h.update(json.dumps(sorted((str(k), str(v)) for k, v in (defines or {}).items())).encode())
    return h.hexdigest()


def _cache_lookup(key: str) -> str | None:
    p = cache_dir() / f"{key}.json"
    try:
        rec = json.loads(p.read_text())
    except (OSError, ValueError):
        return None
    for f, digest in rec.get("files", {}).items():
        if _file_hash(f) != digest:
            return None
    src = rec.get("source")
    return src if isinstance(src, str) else None


def _cache_store(key: str, files: Iterable[str], source: str) -> None:
    d = cache_dir()
    try:
        d.mkdir(parents=True, exist_ok=True)
        rec = {"files": {f: _file_hash(f) for f in files if os.path.isfile(f)}, "source": source}
        tmp = d / f".{key}.{os.getpid()}.tmp"
        tmp.write_text(json.dumps(rec))
        os.replace(tmp, d / f"{key}.json")
    except OSError:
        pass  # a read-only cache only costs time


def generate_source(path: str | os.PathLike[str], include_dirs: Iterable[str | os.PathLike[str]] = (),
                    defines: Mapping[str, object] | None = None,
                    trace: bool = False) -> tuple[str, list[str]]:
    """Run the compiler (no cache): (generated source, files read).
    ``trace``: generate the per-packet trace calls (``--log-level debug``)."""
    from .backend.pygen import generate
    from .frontend import parse_file
    from .midend import check

    prog = parse_file(path, include_dirs, defines)
    checked = check(prog)
    return generate(checked, trace), list(prog.files)


def compile_program(path: str | os.PathLike[str], include_dirs: Iterable[str | os.PathLike[str]] = (),
                    defines: Mapping[str, object] | None = None,
                    use_cache: bool = True, trace: bool = False) -> types.ModuleType:
    """Compile the P4 program at ``path`` to a loaded module (``INFO``,
    ``make_program``, ``SOURCE``); raises ``P4Error`` on errors. ``trace``:
    with per-packet trace calls (for a switch logging at debug level)."""
    p = os.fspath(path)
    if not os.path.isfile(p):
        raise P4Error(Location(p, 0, 0), "no such P4 source file")
    incs = tuple(os.fspath(d) for d in include_dirs)
    key = _request_key(p, incs, defines, trace)
    source = _cache_lookup(key) if use_cache else None
    if source is None:
        source, files = generate_source(p, incs, defines, trace)
        if use_cache:
            _cache_store(key, files, source)
    stem = Path(p).stem
    return load_source(source, f"p4prog_{stem.replace('-', '_')}")


def add_preprocessor_options(ap: argparse.ArgumentParser) -> None:
    """A command line's ``-I DIR`` (``include``) and ``-D NAME[=VALUE]``
    (``define``) options, both repeatable."""
    ap.add_argument("-I", dest="include", action="append", default=[], help="include directory")
    ap.add_argument("-D", dest="define", action="append", default=[], help="NAME[=VALUE]")


def option_defines(options: Iterable[str]) -> dict[str, object]:
    """``-D NAME[=VALUE]`` options as defines (a bare name, or an empty
    value, defines the name with no value)."""
    defines: dict[str, object] = {}
    for d in options:
        k, _, v = d.partition("=")
        defines[k] = v if v else None
    return defines


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m switches.soft.compiler",
                                 description="Compile a P4_16 v1model program to Python.")
    ap.add_argument("program")
    ap.add_argument("-o", "--output", help="write the generated module here (default: stdout)")
    add_preprocessor_options(ap)
    a = ap.parse_args(argv)
    try:
        source, _ = generate_source(a.program, a.include, option_defines(a.define))
    except P4Error as e:
        print(str(e), file=sys.stderr)
        return 1
    if a.output:
        Path(a.output).write_text(source)
    else:
        sys.stdout.write(source)
    return 0


__all__ = ["compile_program", "generate_source", "load_source", "compiler_version",
           "cache_dir", "add_preprocessor_options", "option_defines", "P4Error", "P4Unsupported"]

if __name__ == "__main__":
    sys.exit(main())
