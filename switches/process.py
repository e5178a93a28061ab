"""A switch's daemon process: start with its output in a log, stop, read the
log's last lines. Shared by the Mininet switch nodes (:mod:`switches.node`)
and BMv2's STF runner; no Mininet here."""

from __future__ import annotations

import ctypes
import os
import signal
import subprocess
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path

PR_SET_PDEATHSIG = 1


def die_with_parent() -> None:
    """``preexec_fn`` of a daemon: SIGTERM when its parent dies, its own process group."""
    # The switch must not outlive the test or run that started it, even one
    # killed without a chance to clean up.
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(PR_SET_PDEATHSIG, signal.SIGTERM)
    except (OSError, AttributeError):
        pass
    os.setpgrp()  # Ctrl-C reaches the parent only, which stops us in order


def launch(cmd: Sequence[str], out_path: str | os.PathLike[str],
           env: Mapping[str, str] | None = None,
           cwd: str | os.PathLike[str] | None = None) -> subprocess.Popen[bytes]:
    """Start ``cmd`` with stdout and stderr appended to ``out_path``."""
    with open(out_path, "ab") as out:
        return subprocess.Popen(list(cmd), stdin=subprocess.DEVNULL, stdout=out,
                                stderr=subprocess.STDOUT, preexec_fn=die_with_parent,
                                env=dict(env) if env is not None else None,
                                cwd=str(cwd) if cwd is not None else None)


def stop_process(proc: subprocess.Popen[bytes] | None, timeout: float = 5.0) -> int | None:
    """SIGTERM, then SIGKILL after ``timeout``; the process is reaped either way."""
    if proc is None:
        return None
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
    return proc.returncode


def tail(paths: Iterable[str | os.PathLike[str]], lines: int = 20) -> str:
    """The last lines of each file that exists, headed by its name."""
    parts = []
    for path in paths:
        try:
            text = Path(path).read_text(errors="replace")
        except OSError:
            continue
        body = "\n".join(text.splitlines()[-lines:]) or "(empty)"
        parts.append(f"--- {path}\n{body}")
    return "\n".join(parts) or "(no log written)"


__all__ = ["die_with_parent", "launch", "stop_process", "tail"]
