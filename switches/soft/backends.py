"""Data-path backends of the soft switch: which interpreter runs the pipeline.

- ``python`` (the default, the most robust): the generated module runs in
  the same CPython process that compiled it.
- ``pypy``: the compiler still runs on CPython (it needs 3.10+); the
  generated source is written to a file and the data path (the daemon, or an
  STF run) runs under PyPy (``pypy3``, Python 3.9), whose JIT runs the
  generated per-packet code about three times faster. Only generated code,
  ``backend.rtlib``, the runtime, the control plane and the daemon are
  loaded there, never the compiler.

API::

    BACKENDS                          # ("python", "pypy")
    check_backend(name) -> str        # ValueError naming the choices if unknown
    interpreter(name) -> str          # executable for a data-path process
    daemon_interpreter_args(name)     # its options for a switch daemon (PyPy's JIT)
    backend_available(name) -> bool   # is that interpreter installed?
    write_generated(module) -> str    # generated source of a compiled module as a file
    load_generated(path) -> module    # load such a file (no compiler needed)
    load_source(source, name)         # execute generated source as a module
    install_compat()                  # what a 3.9 interpreter lacks (call first)
"""

from __future__ import annotations

import hashlib
import linecache
import os
import shutil
import sys
import tempfile
import types
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from switches.soft.runtime.contract import ProgramModule

BACKENDS = ("python", "pypy")
PYPY_ENV = "SOFTSWITCH_PYPY"  # overrides the PyPy executable (default: pypy3 on PATH)
# PyPy's JIT for a switch daemon: compile a loop after 131 runs (default
# 1039), a function after 163 (1619) and a side exit after 20 failures (200).
# With the defaults a fabric switch forwarding a few hundred packets a second
# per path went on compiling for the first ~20 s of traffic, each compilation
# stopping its data path for up to ~55 ms (epic-tree's three switches;
# symphony-ring's switches lagged up to 61 ms after a 64 KiB warm-up). Lower
# thresholds move that into the first seconds, the experiments' warm-up phases:
# symphony-ring --quick's measured phases then lagged at most 5-39 ms.
PYPY_DAEMON_JIT = "threshold=131,function_threshold=163,trace_eagerness=20"


def check_backend(name: str) -> str:
    if name not in BACKENDS:
        raise ValueError(f"unknown backend {name!r} (choose from {', '.join(BACKENDS)})")
    return name


def interpreter(name: str) -> str:
    """The executable that runs a data-path process of backend ``name``."""
    check_backend(name)
    if name == "python":
        return sys.executable
    exe = os.environ.get(PYPY_ENV) or shutil.which("pypy3")
    if not exe:
        raise FileNotFoundError("backend 'pypy' needs pypy3 (apt-get install pypy3, "
                                f"or set {PYPY_ENV})")
    return exe


def daemon_interpreter_args(name: str) -> list[str]:
    """Interpreter options for a switch daemon's data path of backend ``name``."""
    return ["--jit", PYPY_DAEMON_JIT] if check_backend(name) == "pypy" else []


def backend_available(name: str) -> bool:
    try:
        interpreter(name)
    except (FileNotFoundError, ValueError):
        return False
    return True


def write_generated(module: ProgramModule, directory: str | None = None) -> str:
    """Write ``module.SOURCE`` to a file named by its hash (reused if present),
    in ``directory`` (default: ``generated/`` in the compiler's cache)."""
    source: str = module.SOURCE
    digest = hashlib.sha256(source.encode()).hexdigest()[:24]
    if directory is None:
        from switches.soft.compiler import cache_dir  # (runs where the compiler runs)
        directory = str(cache_dir() / "generated")
    d = directory
    try:
        os.makedirs(d, mode=0o700, exist_ok=True)
    except OSError:  # no writable cache: a private temporary directory
        d = tempfile.mkdtemp(prefix="p4gen-")
    name = getattr(module, "__name__", "p4prog") or "p4prog"
    path = os.path.join(d, f"{name}-{digest}.py")
    if not os.path.exists(path):
        tmp = f"{path}.{os.getpid()}.tmp"
        with open(tmp, "w") as f:
            f.write(source)
        os.replace(tmp, path)
    return path


def load_generated(path: str, name: str | None = None) -> types.ModuleType:
    """Load a generated program module from ``path`` (as load_source)."""
    with open(path) as f:
        source = f.read()
    if name is None:
        base = os.path.basename(path)
        name = base.rsplit("-", 1)[0] if "-" in base else base[:-3]
    return load_source(source, name)


def load_source(source: str, name: str) -> types.ModuleType:
    """Execute generated source as a module named ``name`` (its tracebacks
    show the generated lines)."""
    mod = types.ModuleType(name)
    filename = f"<p4gen:{name}>"
    linecache.cache[filename] = (len(source), None, source.splitlines(True), filename)
    mod.__file__ = filename
    mod.SOURCE = source  # type: ignore[attr-defined]
    exec(compile(source, filename, "exec"), mod.__dict__)
    return mod


def install_compat() -> None:
    """Let the runtime and control plane run on Python 3.9 (PyPy): ``zip``
    accepts ``strict`` and ``bisect.insort`` accepts ``key`` (3.10 features),
    and ``enum.StrEnum`` exists (3.11; the collectives' names), where the
    interpreter lacks them. A no-op on 3.11 and later."""
    import bisect
    import builtins
    import enum

    if not hasattr(enum, "StrEnum"):
        class StrEnum(str, enum.Enum):  # noqa: UP042 (the backport of enum.StrEnum)
            """A str whose str() and format() are its value, as 3.11's."""

            def __str__(self) -> str:
                return str(self.value)

            def __format__(self, spec: str) -> str:
                return str(self.value).__format__(spec)

        enum.StrEnum = StrEnum  # type: ignore[misc,assignment]

    try:
        zip((), strict=True)
    except TypeError:
        plain_zip = builtins.zip

        def zip_(*iterables: Any, strict: bool = False) -> Any:
            if not strict:
                return plain_zip(*iterables)
            lists = [list(it) for it in iterables]
            if len({len(x) for x in lists}) > 1:
                raise ValueError("zip() arguments have different lengths")
            return plain_zip(*lists)

        builtins.zip = zip_  # type: ignore[assignment,misc]

    try:
        bisect.insort([], 0, key=None)  # type: ignore[call-arg]
        return
    except TypeError:
        pass
    plain_insort = bisect.insort_right

    def insort(a: list[Any], x: Any, lo: int = 0, hi: int | None = None, *,
               key: Any = None) -> None:
        if key is None:
            plain_insort(a, x, lo, len(a) if hi is None else hi)
            return
        kx = key(x)
        hi = len(a) if hi is None else hi
        while lo < hi:
            mid = (lo + hi) // 2
            if kx < key(a[mid]):
                hi = mid
            else:
                lo = mid + 1
        a.insert(lo, x)

    bisect.insort = insort  # type: ignore[assignment]
    bisect.insort_right = insort  # type: ignore[assignment]
