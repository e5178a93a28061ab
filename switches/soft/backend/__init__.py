"""Backend of the soft target's compiler: checked IR -> Python module source.

``generate(checked)`` (``pygen``) emits a module with ``INFO`` and
``make_program(rt)``; ``rtlib`` is the small support library that generated
modules import.  ``switches.soft.compiler`` drives parse -> check -> generate
and caches the result.
"""

from .pygen import generate

__all__ = ["generate"]
