"""State shared by every part of the code generator: the program, naming of
control-plane objects, runtime bindings, and the entry points through which
one concern (expressions, statements, parsers, tables, externs) calls another."""

from __future__ import annotations

from abc import ABCMeta, abstractmethod
from typing import Any

from ..frontend import ir
from ..frontend.source import Location, P4Error
from ..midend import types as T
from ..runtime.contract import (
    ActionProfileInfo,
    ProgramInfo,
    TableInfo,
)
from .common import (
    CORE_ERRORS,
    annotation_str,
)
from .emitter import Emitter


class GenBase(Emitter, metaclass=ABCMeta):
    """Program-wide state and naming; the parts' entry points into each other."""

    def __init__(self, checked: Any, trace: bool = False) -> None:
        super().__init__()
        self.checked = checked
        self.trace = trace  # emit per-packet trace calls (see pygen.generate)
        self.trace_parser = "parser"  # BMv2's name of the (one, flattened) parser
        self.program: ir.Program = checked.program
        self.env: dict[int, str] = {}
        self.classes: dict[str, str] = {}  # struct-like type name -> class name
        self.class_decls: dict[str, T.StructLike] = {}
        self.class_src: list[str] = []
        self.bindings: list[str] = []  # make_program lines binding runtime objects
        self.bound: dict[tuple[str, str], str] = {}
        self.prefix = ""
        # return targets: [result var, 'break'|'return', loop-exit flag, loop depth]
        self.ret: list[list[Any]] = []
        self.pkt: str | None = None  # parser packet variable names active
        self.out_var: str | None = None  # deparser output list
        self.toplevel_actions: set[int] = set()
        self.action_prefix: dict[int, str] = {}
        self.direct_meter_table: dict[str, str] = {}
        self.field_lists: dict[int, list[tuple[str, str, T.P4Type]]] = {}
        name = self.program.files[0] if self.program.files else "program"
        stem = name.rsplit("/", 1)[-1]
        if stem.endswith(".p4"):
            stem = stem[:-3]
        self.info = ProgramInfo(name=stem)
        self.errors = self._collect_errors()
        self.info.errors = list(self.errors)
        self.decl_by_name: dict[str, Any] = {}
        self.top_params: dict[str, str] = {}
        self.override: dict[int, str] = {}
        self.inst_alias: dict[int, tuple[Any, str]] = {}
        self.anon: dict[tuple[int, str], ir.InstantiationDecl] = {}
        self.toplevel_ids = {id(d) for d in self.program.decls}
        for d in self.program.decls:
            if isinstance(d, ir.ActionDecl):
                self.toplevel_actions.add(id(d))
            if isinstance(d, ir.Decl):
                self.decl_by_name.setdefault(d.name, d)

    # -- program-wide facts --------------------------------------------------

    def _collect_errors(self) -> list[str]:
        errs: list[str] = []
        for d in self.program.decls:
            if isinstance(d, ir.ErrorDecl):
                for m in d.members:
                    if m not in errs:
                        errs.append(m)
        rest = [e for e in errs if e not in CORE_ERRORS]
        return CORE_ERRORS + rest

    def error_value(self, name: str, loc: Location) -> int:
        try:
            return self.errors.index(name)
        except ValueError:
            raise P4Error(loc, f"unknown error '{name}'") from None

    def trace_line(self, msg: str) -> None:
        """A trace call (debug log line ``msg``, a Python expression) if tracing."""
        if self.trace:
            self.w(f"_trace(st, {msg})")

    # -- naming --------------------------------------------------------------

    def cp_name(self, decl: Any, prefix: str | None = None) -> str:
        """Control-plane name of a declaration inside the current control."""
        prefix = self.prefix if prefix is None else prefix
        n = annotation_str(getattr(decl, "annotations", []), "name")
        if n is not None:
            if n.startswith("."):
                return n[1:]
            return f"{prefix}.{n}" if prefix else n
        return f"{prefix}.{decl.name}" if prefix else decl.name

    def action_name(self, decl: ir.ActionDecl) -> str:
        if id(decl) in self.toplevel_actions:
            n = annotation_str(decl.annotations, "name")
            return (n[1:] if n and n.startswith(".") else n) if n else decl.name
        p = self.action_prefix.get(id(decl), self.prefix)
        return self.cp_name(decl, p)

    def inst_name(self, d: Any) -> str:
        """Control-plane name of an instance (top-level ones have no prefix)."""
        return self.cp_name(d, "" if id(d) in self.toplevel_ids else None)

    def bind_runtime(self, kind: str, name: str) -> str:
        key = (kind, name)
        v = self.bound.get(key)
        if v is None:
            v = self.fresh(f"{kind}_{name.rsplit('.', 1)[-1]}")
            self.bindings.append(f"{v} = rt.{kind}({name!r})")
            self.bound[key] = v
        return v

    # -- entry points into later parts (defined there) -----------------------
    # Each part calls the others through these; the class that combines all
    # parts (v1model.V1ModelGen) inherits the definitions.

    @abstractmethod
    def ex(self, e: ir.Expr) -> str:
        """Python code of the value of expression ``e`` (expressions)."""

    @abstractmethod
    def lv(self, e: ir.Expr) -> str:
        """Python code of lvalue ``e`` (expressions)."""

    @abstractmethod
    def union_fixup(self, lhs: ir.Expr, L: str) -> None:
        """Invalidate the siblings of a union member that became valid (expressions)."""

    @abstractmethod
    def call(self, ce: ir.CallExpr, want: bool) -> str | None:
        """Code of a call; its value if it has one (statements)."""

    @abstractmethod
    def is_table_apply(self, ce: ir.CallExpr) -> bool:
        """Whether ``ce`` is ``t.apply()`` of a table (statements)."""

    @abstractmethod
    def packet_in_method(self, m: str, ce: ir.CallExpr) -> str | None:
        """A packet_in method call in a parser (parsers)."""

    @abstractmethod
    def verify_call(self, ce: ir.CallExpr) -> None:
        """core.p4's ``verify()`` in a parser (parsers)."""

    @abstractmethod
    def state_machine(self, d: ir.ParserDecl) -> None:
        """A parser's states as a loop (parsers)."""

    @abstractmethod
    def register_table(self, d: ir.TableDecl) -> TableInfo:
        """Describe table ``d`` in INFO (tables)."""

    @abstractmethod
    def table_apply_call(self, ce: ir.CallExpr) -> tuple[str, str]:
        """Apply a table: (action-run code, hit code) (tables)."""

    @abstractmethod
    def bind_instance(self, d: ir.InstantiationDecl) -> str:
        """Runtime object of an extern instance (architecture)."""

    @abstractmethod
    def extern_method(self, base: ir.Expr, bt: T.Extern, m: str, ce: ir.CallExpr,
                      want: bool) -> str | None:
        """A method call on an architecture extern (architecture)."""

    @abstractmethod
    def table_implementation(self, impl: ir.Expr, table: ir.TableDecl,
                             table_name: str) -> ActionProfileInfo:
        """The action profile/selector a table's ``implementation`` names (architecture)."""

    @abstractmethod
    def extern_function(self, name: str, ce: ir.CallExpr, want: bool) -> str | None:
        """A call of an architecture extern function (architecture)."""
