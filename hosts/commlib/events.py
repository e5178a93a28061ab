"""Event sinks for CommLib's step events (dicts with CLOCK_MONOTONIC ns times)."""

from __future__ import annotations

import json
import os
from typing import IO, Any

__all__ = ["JsonlSink"]


class JsonlSink:
    """Appends one JSON object per line; usable as a Communicator's `event_sink`."""

    def __init__(self, path: str | os.PathLike[str], extra: dict[str, Any] | None = None) -> None:
        self._f: IO[str] = open(path, "a", buffering=1)  # closed by close()
        self.extra = dict(extra or {})

    def __call__(self, event: dict[str, Any]) -> None:
        self._f.write(json.dumps({**self.extra, **event}, separators=(",", ":")) + "\n")

    def close(self) -> None:
        self._f.close()

    def __enter__(self) -> JsonlSink:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
