"""Python code generation for checked v1model programs.

``generate(checked)`` returns the source of a module defining ``INFO``
(contract.ProgramInfo) and ``make_program(rt) -> CompiledProgram``.

The generated code is specialized to the program: one class per header /
struct / union type, and one Python function per pipeline block in which
every action, function, table dispatch and nested control/parser is inlined,
so a packet runs straight-line code with no tree walking.  Values are Python
ints masked to their width after each operation that can overflow.

What one packet costs is kept small where it is paid per packet:
- scalar fields start as class attributes (creating a header or struct object
  stores nothing; an instance holds only what was written);
- a header whose fields fall into whole-byte units of at most 8 bytes is
  extracted and emitted with one precompiled ``struct`` format (shifts and
  masks only inside a unit), others through one big integer;
- csum16 over fixed-width data (verify/update_checksum, Checksum16) is
  computed inline as a sum of small integers reduced modulo 0xFFFF
  (``rtlib.csum16_int``), without building a list or bytes.

The generator is split by concern, as p4c's backends are; each part is a
class that builds on the previous one:

- ``emitter``: the buffer of generated lines;
- ``base``: program-wide state, control-plane naming, and the entry points
  through which the parts call each other;
- ``headers``: header/struct/union classes, extract and emit;
- ``expressions``: expressions, constants, lvalues and assignment;
- ``statements``: statements, calls, inlining of actions/functions/blocks;
- ``parsers``: parser state machines and packet_in;
- ``tables``: tables (INFO and the apply dispatch);
- ``v1model``: the architecture: its externs, pipeline and module layout.
"""

from __future__ import annotations

from typing import Any

from .v1model import V1ModelGen as Gen


def generate(checked: Any, trace: bool = False) -> str:
    """Python source of the module for a checked program (see module doc).
    ``trace``: the code also reports, per packet, the parser states it
    enters, the headers it extracts and emits and the tables it applies
    (``rt.trace``/``rt.trace_table``: the debug log); without it the
    generated code has no trace calls at all, so tracing costs nothing when
    off."""
    return Gen(checked, trace).generate()


__all__ = ["generate", "Gen"]
