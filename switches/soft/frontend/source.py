"""Source locations and the one error type every compiler pass raises.

Every diagnostic the soft target prints has the form ``file:line:col: message``
so editors and CI logs can jump to it.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Location:
    """A position in a P4 source file (1-based line and column)."""

    file: str
    line: int
    col: int

    def __str__(self) -> str:
        return f"{self.file}:{self.line}:{self.col}"


UNKNOWN = Location("<unknown>", 0, 0)


class P4Error(Exception):
    """A compile error in a P4 program, tied to the place it was found."""

    def __init__(self, loc: Location | None, message: str) -> None:
        self.loc = loc or UNKNOWN
        self.message = message
        super().__init__(f"{self.loc}: {message}")


class P4Unsupported(P4Error):
    """A valid P4 construct that the soft target does not implement."""

    def __init__(self, loc: Location | None, what: str) -> None:
        super().__init__(loc, f"unsupported by the soft target: {what}")
