"""Name resolution, type checking/inference and constant folding.

Split by concern, each part a class that builds on the previous one:
``common`` (scopes, signatures, type variables), ``base`` (program-wide
state, type references), ``expressions``, ``statements``,
``declarations`` (types, externs, parsers, controls, tables, instances), and
``v1model`` (the architecture's rules: ``main`` is a well-formed V1Switch).

The checker walks the IR once, in declaration order (P4 requires declaration
before use), and rewrites it into the annotated form described in
``switches.soft.midend`` (the annotation contract).  Expression visitors
return a possibly new node which the caller stores back in place.

Diagnostics (each a ``P4Error`` at the offending node): undeclared names and
types; duplicate declarations (scopes, fields, parameters, states, error and
match_kind members, switch labels); unknown fields, methods, enum/error
members; type mismatches in assignments, initializers, arguments, returns,
keysets, switch labels and operands (widths, signedness, bool vs bit<1>);
argument count/name errors and uninferable generic arguments; out/inout
arguments and assignment targets that are not writable (constants, ``in``
and directionless parameters, non-lvalues); calls of non-callables; sized
literals that do not fit; invalid casts (width and signedness change at once,
new types other than to/from their base, non-serializable enums); non-bool
conditions; slice bounds; constant-only positions (widths, sizes, keysets,
entry keys, control-plane action arguments, constant initializers, switch
labels); table rules (match kinds, key types, actions listed for
default_action/entries, mask/range per match kind, lpm prefix masks,
property order); return/exit/break placement; parser states and select
arity; where tables, sub-blocks, actions, ``verify`` and stack
``next``/``last``/``lastIndex`` may be used; instantiation placement;
parameter and variable types; ``main`` being a well-formed V1Switch.
"""

from __future__ import annotations

from .common import CORE_ERRORS, MAX_WIDTH, Ctx, Scope, Sig, SigParam, TypeVar
from .declarations import DeclarationChecker
from .v1model import V1SWITCH_ROLES, V1SwitchMain, v1switch_main


class Checker(DeclarationChecker):
    """Checks and annotates a whole program: ``Checker(program).run()``."""


__all__ = ["CORE_ERRORS", "MAX_WIDTH", "V1SWITCH_ROLES", "Checker", "Ctx", "Scope", "Sig",
           "SigParam", "TypeVar", "V1SwitchMain", "v1switch_main"]
