"""Backend of the soft target's compiler: checked IR -> Python module source.

``generate(checked)`` (``pygen``) emits a module with ``INFO`` and
``make_program(rt)``; ``rtlib`` is the small support library that generated
modules import.  The generator is split by concern (``emitter``, ``headers``,
``expressions``, ``statements``, ``parsers``, ``tables``, and ``v1model`` for
the architecture); ``pygen`` describes the parts.  ``switches.soft.compiler`` drives parse -> check -> generate
and caches the result.  ``pygen`` is imported on first use, so that loading a
generated module (which imports ``rtlib``) does not need the compiler: a
data-path process may run on an interpreter that only runs generated code.
"""

from __future__ import annotations

from typing import Any

__all__ = ["generate"]


def generate(checked: Any, trace: bool = False) -> str:
    from .pygen import generate as _generate

    return _generate(checked, trace)
