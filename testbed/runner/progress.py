"""What a run tells its user as it goes: :class:`Progress` writes timestamped
lines to the terminal and ``progress.log``; the tails of an agent's log and
timeline feed the message of an agent that failed."""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import IO, Any


class Progress:
    def __init__(self, echo: Callable[[str], None], log_path: Path) -> None:
        self.t0 = time.monotonic()
        self.echo = echo
        self._log: IO[str] = open(log_path, "a", buffering=1)  # closed by close()

    def line(self, msg: str) -> None:
        text = f"[{time.monotonic() - self.t0:6.1f}s] {msg}"
        self._log.write(text + "\n")
        self.echo(text)

    @property
    def elapsed(self) -> float:
        return time.monotonic() - self.t0

    def close(self) -> None:
        self._log.close()


def _tail(path: Path, lines: int = 15) -> str:
    try:
        text = path.read_text(errors="replace")
    except OSError:
        return "(no log)"
    tail = text.splitlines()[-lines:]
    return "\n".join(tail) if tail else "(log is empty)"


def _last_events(path: Path, nbytes: int = 8192) -> list[dict[str, Any]]:
    try:
        with open(path, "rb") as f:
            f.seek(0, os.SEEK_END)
            size = f.tell()
            f.seek(max(0, size - nbytes))
            data = f.read().decode(errors="replace")
    except OSError:
        return []
    out = []
    for line in data.splitlines()[1 if size > nbytes else 0:]:
        try:
            out.append(json.loads(line))
        except json.JSONDecodeError:
            continue
    return out
