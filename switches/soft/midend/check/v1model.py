"""v1model's rules: ``main`` is a V1Switch instantiation with its six blocks,
and its header and metadata types are structs."""

from __future__ import annotations

from dataclasses import dataclass

from ...frontend import ir
from ...frontend.source import P4Error
from .. import types

V1SWITCH_ROLES = ("parser", "verify_checksum", "ingress", "egress",
                  "compute_checksum", "deparser")


@dataclass
class V1SwitchMain:
    main: ir.InstantiationDecl
    blocks: dict[str, ir.ParserDecl | ir.ControlDecl]  # role -> block given to V1Switch
    block_args: dict[str, dict[str, ir.Expr]]  # role -> constructor parameter -> value
    hdr_type: types.StructLike
    meta_type: types.StructLike


def v1switch_main(program: ir.Program) -> V1SwitchMain:
    """The checked program's ``main``, taken apart by V1Switch role."""
    mains = [d for d in program.decls if isinstance(d, ir.InstantiationDecl) and d.name == "main"]
    if not mains:
        last = program.decls[-1].loc if program.decls else program.loc
        raise P4Error(last, "the program has no 'main' declaration (expected a V1Switch instantiation)")
    main = mains[0]
    mt = main.type.resolved
    if not isinstance(mt, types.Block) or mt.kind != "package" or mt.name != "V1Switch":
        raise P4Error(main.loc, f"'main' must be a V1Switch instantiation, not {mt}")
    blocks: dict[str, ir.ParserDecl | ir.ControlDecl] = {}
    block_args: dict[str, dict[str, ir.Expr]] = {}
    for role, a in zip(V1SWITCH_ROLES, main.args, strict=False):
        v = a.value
        if isinstance(v, ir.CallExpr) and isinstance(v.func, ir.PathExpr):
            decl = v.func.decl
            args = v.args
        else:  # a PathExpr to a parser/control instance
            assert isinstance(v, ir.PathExpr) and isinstance(v.decl, ir.InstantiationDecl)
            inst = v.decl
            decl = inst.type.resolved.decl
            args = inst.args
        blocks[role] = decl
        block_args[role] = {p.name: arg.value for p, arg in zip(decl.ctor_params, args, strict=False)}
    if len(blocks) != len(V1SWITCH_ROLES):
        raise P4Error(main.loc, f"V1Switch needs {len(V1SWITCH_ROLES)} arguments, got {len(blocks)}")
    h, m = (list(mt.type_args) + [None, None])[:2]
    for name, t in (("headers", h), ("metadata", m)):
        if not isinstance(t, types.StructLike):
            raise P4Error(main.loc, f"the {name} type of V1Switch must be a struct, not {t}")
    assert isinstance(h, types.StructLike) and isinstance(m, types.StructLike)
    return V1SwitchMain(main, blocks, block_args, h, m)
