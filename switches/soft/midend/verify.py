"""Checks that a checked program honours the annotation contract.

Used by the tests and handy when debugging the backend: every expression
typed, every name resolved, no ``int``-typed value left in run-time code.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from typing import Any

from ..frontend import ir
from . import types as T

# Fields holding compile-time-only values (``int`` allowed) or back references.
_SKIP_FIELDS = {"type", "resolved", "decl", "annotations", "loc"}
_COMPILE_TIME = {
    (ir.SliceExpr, "hi"), (ir.SliceExpr, "lo"), (ir.TableDecl, "size"), (ir.TableDecl, "properties"),
    (ir.TableEntry, "priority"), (ir.ValueSetDecl, "size"), (ir.ConstDecl, "value"), (ir.Param, "default"),
    (ir.InstantiationDecl, "args"),
}


def _children(node: ir.Node) -> Iterator[tuple[str, Any]]:
    for f in dataclasses.fields(node):
        if f.name in _SKIP_FIELDS:
            continue
        yield f.name, getattr(node, f.name)


def _flatten(v: Any) -> Iterator[Any]:
    if isinstance(v, ir.Node):
        yield v
    elif isinstance(v, (list, tuple)):
        for x in v:
            yield from _flatten(x)
    elif isinstance(v, dict):
        for x in v.values():
            yield from _flatten(x)


def _int_param_expr(e: ir.Expr) -> bool:
    """An ``int`` value built from ``int`` constructor parameters and literals."""
    if isinstance(e, ir.IntLit):
        return True
    if isinstance(e, ir.PathExpr):
        return isinstance(e.decl, ir.Param)
    if isinstance(e, ir.UnaryExpr):
        return _int_param_expr(e.expr)
    if isinstance(e, ir.BinaryExpr):
        return _int_param_expr(e.left) and _int_param_expr(e.right)
    return False


def annotation_problems(program: ir.Program) -> list[str]:
    """Every place where the annotation contract is not met, as messages."""
    out: list[str] = []

    def visit(n: ir.Node, runtime: bool, generic: bool) -> None:
        if isinstance(n, (ir.ExternDecl, ir.ParserTypeDecl, ir.ControlTypeDecl, ir.PackageTypeDecl)) or (
                isinstance(n, (ir.ExternFunctionDecl, ir.MethodDecl)) and n.type_params):
            generic = True
        if isinstance(n, ir.TypeRef):
            if n.resolved is None:
                out.append(f"{n.loc}: unresolved type {type(n).__name__}")
            return
        if isinstance(n, ir.Expr):
            if n.type is None:
                out.append(f"{n.loc}: untyped {type(n).__name__}")
            elif runtime and isinstance(n.type, T.InfInt) and not _int_param_expr(n):
                out.append(f"{n.loc}: int-typed {type(n).__name__} in run-time code")
            if isinstance(n, ir.PathExpr) and n.decl is None:
                out.append(f"{n.loc}: unresolved name {n.name}")
            if isinstance(n, ir.IntLit) and isinstance(n.type, T.Bits) and n.width != n.type.width:
                out.append(f"{n.loc}: literal width {n.width} but type {n.type}")
        if isinstance(n, ir.ActionRef) and n.decl is None:
            out.append(f"{n.loc}: unresolved action {n.name}")
        if isinstance(n, ir.CastExpr) and n.expr.type == T.InfInt():
            runtime = False  # the explicit conversion of an ``int`` value (e.g. a constructor parameter)
        if isinstance(n, ir.CallExpr):
            ft = n.func.type
            params = ft.params if isinstance(ft, T.Callable) else []
            visit(n.func, runtime, generic)
            for i, a in enumerate(n.args):
                ptype = params[i][1] if i < len(params) else None
                visit(a.value, runtime and not isinstance(ptype, T.InfInt), generic)
            for t in n.type_args:
                visit(t, runtime, generic)
            return
        for fname, v in _children(n):
            rt = runtime and (type(n), fname) not in _COMPILE_TIME
            for c in _flatten(v):
                visit(c, rt, generic)

    for d in program.decls:
        visit(d, True, False)
    return out
