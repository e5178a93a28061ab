"""Support code imported by every generated program module.

Kept small: generated code is specialized per program, these are the few
pieces that are the same for all programs (control-flow exceptions, header
stacks, the inline checksum's last step, the CompiledProgram shell). It also
runs on the PyPy data path (Python 3.9): no newer language features here.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ..runtime.contract import PacketState, ProgramInfo


class P4Exit(Exception):
    """``exit``: unwinds to the end of the current pipeline block."""


EXIT = P4Exit()


class ParserError(Exception):
    """A parser error; ``code`` is the P4 ``error`` value (contract numbering)."""

    __slots__ = ("code",)

    def __init__(self, code: int) -> None:
        super().__init__(code)
        self.code = code


class P4AssertionError(Exception):
    """A failed v1model ``assert``/``assume`` (BMv2 aborts the switch)."""


class HeaderStack:
    """``T[n]``: elements are generated header (or union) objects."""

    __slots__ = ("e", "nextIndex", "size")

    def __init__(self, elems: list[Any]) -> None:
        self.e = elems
        self.nextIndex = 0
        self.size = len(elems)

    def _copy(self) -> HeaderStack:
        s = HeaderStack([x._copy() for x in self.e])
        s.nextIndex = self.nextIndex
        return s

    def _set(self, o: HeaderStack) -> None:
        e, oe = self.e, o.e
        for i in range(min(len(e), len(oe))):  # no zip: this also runs on Python 3.9
            e[i]._set(oe[i])
        self.nextIndex = o.nextIndex

    def _eq(self, o: HeaderStack) -> bool:
        e, oe = self.e, o.e
        return all(e[i]._eq(oe[i]) for i in range(min(len(e), len(oe))))

    def push_front(self, n: int) -> None:
        e = self.e
        size = len(e)
        for i in range(size - 1, -1, -1):
            if i >= n:
                e[i]._set(e[i - n])
            else:
                e[i].setInvalid()
        self.nextIndex = min(size, self.nextIndex + n)

    def pop_front(self, n: int) -> None:
        e = self.e
        size = len(e)
        for i in range(size):
            if i + n < size:
                e[i]._set(e[i + n])
            else:
                e[i].setInvalid()
        self.nextIndex = max(0, self.nextIndex - n)

    def __repr__(self) -> str:
        return f"HeaderStack({self.e!r}, nextIndex={self.nextIndex})"


def stack_index(stack: HeaderStack, i: int) -> Any:
    """Element ``i`` of a stack read with a run-time index; out of range
    reads give an invalid scratch header, as BMv2 does not fault on them."""
    if 0 <= i < stack.size:
        return stack.e[i]
    return stack.e[0].__class__()


def stack_index_p(stack: HeaderStack, i: int) -> Any:
    """Element ``i`` read in a parser: out of range is error.StackOutOfBounds."""
    if 0 <= i < stack.size:
        return stack.e[i]
    raise ParserError(3)


def csum16_int(v: int) -> int:
    """Internet checksum of data given as ``v``, a non-negative integer equal
    modulo 0xFFFF to the data's value (its 16-bit big-endian words) and zero
    only if the data is: the ones' complement sum of the words is ``v``
    modulo 0xFFFF (2**16 is 1 modulo 0xFFFF), written as 0xFFFF rather than
    0 unless every word is zero."""
    r = v % 0xFFFF
    if r == 0 and v:
        r = 0xFFFF
    return 0xFFFF ^ r


class Program:
    """The CompiledProgram returned by a generated ``make_program``."""

    def __init__(self, info: ProgramInfo, **fns: Callable[..., Any]) -> None:
        self.info = info
        for k, v in fns.items():
            setattr(self, k, v)


__all__ = [
    "P4Exit", "EXIT", "ParserError", "P4AssertionError", "HeaderStack",
    "stack_index", "stack_index_p", "Program", "PacketState", "csum16_int",
]
