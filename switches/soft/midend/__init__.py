"""The soft target's midend: name resolution, type checking and constant folding.

``check(program)`` annotates the parsed ``ir.Program`` in place (replacing
expression nodes where it folds or converts) and returns a ``CheckedProgram``.
Errors raise ``P4Error`` (``file:line:col: message``) or ``P4Unsupported``.

Annotation contract (what the backend may rely on after ``check``):

- Every ``ir.Expr`` reachable from the program (except inside annotations,
  which are left as parsed) has ``.type`` set to a ``midend.types`` type.  Every ``TypeRef`` has ``.resolved``; typedefs are
  resolved away (``type`` new-types stay ``NewType``).  ``TypeBits.width``,
  ``TypeVarbit.max_width`` and ``TypeStack.size`` are replaced by ``IntLit``.
- Implicit conversions are explicit.  Where P4 converts implicitly (an unsized
  literal or ``int`` value where ``bit<W>``/``int<W>`` is expected: operands of
  binary operators, assignments, initializers, arguments, select keysets, table
  keys and entries, return values, switch labels) the checker substitutes a
  sized ``IntLit`` (``width``/``signed`` set, value wrapped into range) or wraps
  the expression in an ``ir.CastExpr`` (``.to.resolved`` and ``.type`` set).  A
  serializable enum used where its underlying ``bit<W>`` is expected is
  likewise wrapped in a ``CastExpr`` to the underlying type (folded to an
  ``IntLit`` when the operand is a member constant; P4 compilers accept this
  in assignments, comparisons and arithmetic, so the checker does too).
  After ``check`` no run-time expression has type ``InfInt``; the only
  ``InfInt`` nodes left are compile-time positions (``SliceExpr.hi``/``lo``,
  ``TypeBits.width`` and the like, table ``size``, entry ``priority``,
  ``push_front``/``pop_front`` counts, constructor arguments of ``int``
  parameters, table properties such as ``priority_delta``) and the operand
  of a ``CastExpr`` converting a non-constant ``int`` value - a reference to
  an ``int`` constructor parameter, possibly inside ``int`` arithmetic.
  Such ``int`` parameter expressions may also be compared (``n == 3`` is a
  ``Bool`` ``BinaryExpr`` over ``InfInt`` operands); they are evaluated with
  unbounded integers.
  ``switches.soft.midend.verify.annotation_problems(program)`` lists every
  violation of this contract (used by the tests).
- Constants are folded: references to ``const`` declarations of int/bit/bool/
  string type become ``IntLit``/``BoolLit``/``StringLit`` (const of
  error/enum type become ``MemberExpr`` ``error.X``/``E.X``; other consts -
  structs, tuples - stay ``PathExpr`` with ``decl`` the ``ConstDecl`` whose
  ``value`` is folded).  Arithmetic, comparisons, logic, concatenation,
  slices and casts of literals fold; a cast of a serializable enum member to
  bits folds to its value; ``minSizeInBits``/``minSizeInBytes``/
  ``maxSizeInBits``/``maxSizeInBytes`` (methods) and ``sizeInBits``/
  ``sizeInBytes`` fold; ``stack.size`` folds to ``bit<32>``.
  ``cond ? a : b`` with a constant condition folds to the chosen branch.
- ``PathExpr.decl`` is the declaration named (``ir.Param``, ``VarDecl``,
  ``ConstDecl``, ``ActionDecl``, ``FunctionDecl``, ``ExternFunctionDecl``
  (the chosen overload), ``TableDecl``, ``InstantiationDecl``,
  ``ValueSetDecl``, ``ParserDecl``/``ControlDecl``, ``EnumDecl``,
  ``ErrorDecl`` for ``error``) honouring scopes, shadowing and ``.x``.  A
  ``PathExpr`` naming a type has ``.type`` ``TypeOfType``.  ``ActionRef.decl``
  is the ``ActionDecl``.  Constructor parameters of parsers/controls are
  ``ir.Param`` (in ``ctor_params``); their values are at the instantiation.
- ``MemberExpr.type``: the field type; a ``types.Callable`` for methods
  (``isValid``/``setValid``/``setInvalid``, ``push_front``/``pop_front``,
  extern methods - with the extern's type arguments substituted -, parser/
  control/table ``apply``); ``ErrorType`` for ``error.X``; the ``Enum`` for
  ``E.X``; ``bit<32>`` for stack ``lastIndex``/``nextIndex``; the element
  header type for stack ``next``/``last``; ``Bool`` for ``t.apply().hit``/
  ``miss`` and ``ActionEnum`` for ``action_run``.  ``t.apply()`` has type
  ``ApplyResult``.
- ``CallExpr.args`` (and ``InstantiationDecl.args``, ``default_action``/
  entry ``ActionRef.args``) are in the callee's parameter order, one per
  parameter, each ``Argument.name`` set to its parameter's name (an
  ``ActionRef`` in a table's ``actions`` list has either no arguments or one
  per directional parameter); defaults filled in (the
  parameter's default expression), omitted ``@optional`` parameters are a
  ``DontCareExpr``.  ``CallExpr.type`` is the return type (``Void`` for
  statements).  ``CallExpr.type_args`` are resolved ``TypeRef`` s: for
  functions/extern functions the callee's type parameters in order (e.g.
  ``hash<O,T,D,M>``); for extern methods the extern instance's type
  arguments followed by the method's own (``register<T>.read`` -> [T],
  ``meter.execute_meter<T>`` -> [T]).  ``CallExpr.func`` is a ``PathExpr``
  (``decl`` the chosen overload) or a ``MemberExpr``.  ``_`` passed for an
  ``out`` argument is a ``DontCareExpr`` typed with the parameter type.
- Constructor calls (instantiation arguments, ``implementation =
  action_profile(128)``) have their arguments folded to literals.
  ``InstantiationDecl.type.resolved`` is ``Extern`` (type arguments inferred
  if omitted) or ``Block``; its ``args`` are reordered like a call's.
- Widths, stack sizes, value_set sizes (``ValueSetDecl.size``), table
  ``size`` and entry ``priority`` are ``IntLit``.
- Select keysets, switch labels and table entry keys: a value is converted to
  the key type; ``a &&& m`` / ``lo .. hi`` are ``BinaryExpr`` whose operands
  are converted to the key type (the mask of a serializable-enum key has the
  enum's underlying type) and whose ``.type`` is the key type;
  ``default``/``_`` have type ``DontCare``; a multi-key keyset is a
  ``ListExpr`` of type ``Tuple``.  A value set used as a keyset is a
  ``PathExpr`` (decl ``ValueSetDecl``, type the value set's element type).
  Switch labels on ``action_run`` are ``PathExpr`` with ``decl`` the action.
- ``ListExpr``/``StructExpr`` used as header/struct/tuple values get the
  target type and their elements are converted to the field types; a list
  passed to a generic parameter (``hash``/``digest``/checksum data) has type
  ``Tuple`` of its element types.
- ``for (T v in ...)`` loops: ``ForInStmt.decl`` is the loop variable's
  ``VarDecl`` (synthesized) or the existing variable's declaration.
- Inside generic declarations (externs, parser/control/package prototypes,
  generic extern functions) ``TypeRef.resolved`` may be a ``check.TypeVar``;
  nothing outside those declarations refers to a type variable.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ..frontend import ir
from ..frontend.source import P4Error, P4Unsupported
from . import types
from .check import Checker, v1switch_main

__all__ = ["check", "CheckedProgram", "P4Error", "P4Unsupported"]


@dataclass
class CheckedProgram:
    """Result of ``check``.

    - ``blocks``: role ('parser', 'verify_checksum', 'ingress', 'egress',
      'compute_checksum', 'deparser') -> ParserDecl/ControlDecl given to V1Switch.
    - ``block_args``: role -> {constructor parameter name: folded literal}.
    - ``hdr_type``/``meta_type``: the H and M of ``V1Switch<H, M>``.
    - ``errors``: error member names by value (core's 7 first).
    - ``enums``: enum name -> ``types.Enum`` (all enums, incl. v1model's).
    - ``match_kinds``: declared match kinds, in order.
    - ``instances``: every ``InstantiationDecl`` (extern, parser and control
      instances, top level and local), in declaration order.
    - ``tables``: every ``TableDecl``, in declaration order.
    """

    program: ir.Program
    main: ir.InstantiationDecl
    blocks: dict[str, ir.ParserDecl | ir.ControlDecl]
    hdr_type: types.StructLike  # a Struct (a Header is accepted too, as p4c does)
    meta_type: types.StructLike
    errors: list[str]
    enums: dict[str, types.Enum]
    match_kinds: list[str] = field(default_factory=list)
    block_args: dict[str, dict[str, ir.Expr]] = field(default_factory=dict)
    instances: list[ir.InstantiationDecl] = field(default_factory=list)
    tables: list[ir.TableDecl] = field(default_factory=list)


def check(program: ir.Program) -> CheckedProgram:
    """Check and annotate ``program`` (see the module docstring)."""
    c = Checker(program)
    c.run()
    v1 = v1switch_main(program)
    tables = [d for d in _walk_decls(program) if isinstance(d, ir.TableDecl)]
    return CheckedProgram(program=program, main=v1.main, blocks=v1.blocks, hdr_type=v1.hdr_type,
                          meta_type=v1.meta_type,
                          errors=list(c.errors), enums=dict(c.enums), match_kinds=list(c.match_kinds),
                          block_args=v1.block_args, instances=list(c.instances), tables=tables)


def _walk_decls(program: ir.Program):
    for d in program.decls:
        yield d
        if isinstance(d, (ir.ParserDecl, ir.ControlDecl)):
            yield from d.locals
