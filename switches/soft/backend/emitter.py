"""The emitter: an indented buffer of generated Python lines."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from ..frontend import ir
from .common import (
    ident,
)


class Emitter:
    """Generated lines, the current indentation and fresh local names."""

    def __init__(self) -> None:
        self.buf: list[str] = []
        self.ind = 0
        self.n = 0

    # -- output helpers ------------------------------------------------------

    def w(self, line: str) -> None:
        self.buf.append("    " * self.ind + line)

    def fresh(self, base: str = "t") -> str:
        self.n += 1
        return f"{ident(base)}_{self.n}"

    @contextmanager
    def indent(self) -> Iterator[None]:
        self.ind += 1
        n0 = len(self.buf)
        try:
            yield
        finally:
            if not self.code_since(n0):
                self.w("pass")
            self.ind -= 1

    def code_since(self, n0: int) -> bool:
        return any(not ln.lstrip().startswith("#") for ln in self.buf[n0:])

    @contextmanager
    def capture(self) -> Iterator[list[str]]:
        saved = self.buf
        self.buf = []
        out = self.buf
        try:
            yield out
        finally:
            self.buf = saved

    def splice(self, lines: list[str], extra: int = 0) -> None:
        pad = "    " * extra
        self.buf.extend(pad + ln for ln in lines)

    def comment(self, node: ir.Node, what: str = "") -> None:
        loc = node.loc
        if loc is not None and loc.line:
            self.w(f"# {what}{' ' if what else ''}{loc.file.rsplit('/', 1)[-1]}:{loc.line}")

