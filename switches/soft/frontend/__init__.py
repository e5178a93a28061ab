"""P4_16 frontend of the soft target: preprocessor, lexer and parser.

``parse_file`` / ``parse_string`` return an ``ir.Program`` whose nodes carry
the file, line and column they were written at (also inside included files).
Syntax errors raise ``P4Error``; valid but unimplemented syntax raises
``P4Unsupported``.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING

from .preprocess import P4INCLUDE_DIR, Preprocessor
from .source import Location, P4Error, P4Unsupported

if TYPE_CHECKING:
    from . import ir


def _prog(pp: Preprocessor, toks: list) -> ir.Program:
    # The IR and the parser load on first parse: a process that only runs
    # compiled programs (the simulator under PyPy) never needs them.
    from . import ir
    from .parser import parse_tokens

    decls = parse_tokens(toks)
    loc = toks[0].loc if toks else Location(pp.files[0] if pp.files else "<unknown>", 1, 1)
    return ir.Program(loc=loc, decls=decls, files=list(pp.files))


def parse_file(path: str | os.PathLike[str], include_dirs: Iterable[str | os.PathLike[str]] = (),
               defines: Mapping[str, object] | None = None) -> ir.Program:
    """Preprocess and parse the P4 program at ``path``.

    ``#include "x"`` looks in the including file's directory, then
    ``include_dirs``, then the soft target's own p4include (core.p4,
    v1model.p4); ``#include <x>`` skips the first.  ``defines`` are
    ``-D``-style macros (a value of None means 1)."""
    p = os.fspath(path)
    if not os.path.isfile(p):
        raise P4Error(Location(p, 0, 0), "no such P4 source file")
    pp = Preprocessor(tuple(os.fspath(d) for d in include_dirs), defines)
    toks = pp.run_file(p)
    return _prog(pp, toks)


def parse_string(text: str, filename: str = "<string>",
                 include_dirs: Iterable[str | os.PathLike[str]] = (),
                 defines: Mapping[str, object] | None = None) -> ir.Program:
    """Like ``parse_file`` for program text; ``filename`` is used in locations
    and its directory for quoted includes."""
    pp = Preprocessor(tuple(os.fspath(d) for d in include_dirs), defines)
    toks = pp.run_text(text, filename)
    return _prog(pp, toks)


__all__ = ["parse_file", "parse_string", "P4Error", "P4Unsupported", "Location",
           "P4INCLUDE_DIR"]
