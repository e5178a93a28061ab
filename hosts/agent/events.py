"""The agent's timeline and its clock.

Events are JSON lines ``{"event": ..., "t_ns": CLOCK_MONOTONIC ns, "host": ...}``
appended to the file the runner names (EventLog); CommLib's events, which
carry their own event and t_ns, go through EventLog.sink. Which module
writes which event is listed in each module's docstring (the package's
docstring has the index).

Every time an agent reads or logs comes from now_ns: CLOCK_MONOTONIC in an
agent's own process, or the simulated clock that the virtual-time engine
swaps in for all the agents it runs in one process (simulated_clock)."""

from __future__ import annotations

import contextlib
import json
import os
import time
from collections.abc import Callable, Iterator
from typing import IO, Any

# The agents' clock: CLOCK_MONOTONIC in an agent's own process (the Mininet
# engine); the virtual-time engine (testbed.sim) runs every agent of a run in
# one process on its simulated clock and swaps it in (simulated_clock).
_clock: Callable[[], int] = time.monotonic_ns


def now_ns() -> int:
    return _clock()


@contextlib.contextmanager
def simulated_clock(clock: Callable[[], int]) -> Iterator[None]:
    """Every agent of this process reads ``clock`` (ns) while the block runs."""
    global _clock
    before = _clock
    _clock = clock
    try:
        yield
    finally:
        _clock = before


class EventLog:
    """JSON lines with a CLOCK_MONOTONIC timestamp and the host name."""

    def __init__(self, path: str | os.PathLike[str], host: str, line_buffered: bool = True) -> None:
        # Line-buffered where the runner reads the file while the agent runs
        # (its progress lines); a simulated run reads it only afterwards.
        self._f: IO[str] = open(path, "a", buffering=1 if line_buffered else -1)  # closed by close()
        self.host = host

    def emit(self, event: str, **fields: Any) -> None:
        rec = {"event": event, "t_ns": fields.pop("t_ns", None) or now_ns(), "host": self.host}
        rec.update(fields)
        self._f.write(json.dumps(rec, separators=(",", ":"), default=_jsonable) + "\n")

    def sink(self, ev: dict[str, Any]) -> None:
        """CommLib's event sink: its events already carry event and t_ns."""
        self._f.write(json.dumps({"host": self.host, **ev}, separators=(",", ":"),
                                 default=_jsonable) + "\n")

    def close(self) -> None:
        self._f.close()


def _jsonable(x: object) -> int | float | str:
    item = getattr(x, "item", None)      # numpy scalars (collectives)
    if callable(item):
        v = item()
        if isinstance(v, (int, float)):
            return v
    return str(x)
