"""Recursive-descent parser: preprocessed tokens -> ``ir.Program``.

Locations: a declaration's ``loc`` is its name; an expression's ``loc`` is
where the expression starts, except ``MemberExpr`` (the member name, so "no
field x" points at x) and ``CallExpr`` (its callee's location).  Statements
start at their first token.

Casts: ``(X) e`` is a cast when ``X`` is a base type or a type name declared
earlier (typedef, header, struct, enum, extern, ...) or a type parameter in
scope, and the token after ``)`` can start an expression.

Shapes later passes can rely on:
- ``a op= b`` (``+=`` etc.) is read as ``a = a op b`` (``a`` copied).
- ``e[b +: w]`` is ``SliceExpr(hi=b + (w - 1), lo=b)``.
- ``error.X`` is ``MemberExpr(PathExpr('error'), 'X')``; ``this`` is ``PathExpr('this')``.
- ``T {f = 1}`` is a ``StructExpr`` with ``type_name``; ``T {1, 2}`` is
  ``CastExpr(T, ListExpr)``.
- ``_`` is ``DontCareExpr`` (``TypeDontCare`` as a type argument).
- A select case with a tuple keyset ``(a, b)`` has a ``ListExpr`` keyset; a
  table entry always has one key expression per key element in ``keys``.
- ``ActionRef.name`` drops a leading ``.``.
- ``T(args) name;`` inside a block is an ``InstantiationDecl`` statement.
"""

from __future__ import annotations

import copy

from . import ir
from .lexer import Token, describe_char
from .source import Location, P4Error, P4Unsupported

# Binary operator precedence, higher binds tighter (P4_16 grammar).  Unlike C,
# the bitwise operators & ^ | bind tighter than comparisons: a & m == v is
# (a & m) == v.
_BIN_PREC = {
    "||": 1, "&&": 2, "==": 3, "!=": 3, "<": 4, ">": 4, "<=": 4, ">=": 4,
    "|": 5, "^": 6, "&": 7, "<<": 8, ">>": 8,
    "++": 9, "+": 9, "-": 9, "|+|": 9, "|-|": 9, "*": 10, "/": 10, "%": 10,
}
_OP_ASSIGN = {"+=": "+", "-=": "-", "*=": "*", "/=": "/", "%=": "%", "&=": "&",
              "|=": "|", "^=": "^", "<<=": "<<", "|+|=": "|+|", "|-|=": "|-|"}
_BASE_TYPE_KW = frozenset(("bit", "int", "varbit", "bool", "string", "tuple"))
# Tokens that can start an expression (used to tell a cast from a parenthesis).
_EXPR_START = frozenset(("ID", "INT", "STR", "BADNUM", "true", "false", "(", "!", "~", "-", "+",
                         "{", ".", "this", "error"))
_DIRECTIONS = frozenset(("in", "out", "inout"))


def _word(t: Token) -> bool:
    return t.kind == "ID" or (t.kind == t.text and t.text[:1].isalpha())


class Parser:
    def __init__(self, toks: list[Token]) -> None:
        self.toks = toks
        self.i = 0
        self.tok = toks[0]
        self.last = toks[0]
        self.type_names: set[str] = set()
        self.scopes: list[set[str]] = []

    # -- token helpers --------------------------------------------------------

    def advance(self) -> Token:
        t = self.tok
        if t.kind != "EOF":
            self.i += 1
            self.tok = self.toks[self.i]
        self.last = t
        return t

    def peek(self, k: int = 1) -> Token:
        j = self.i + k
        toks = self.toks
        return toks[j] if j < len(toks) else toks[-1]

    def accept(self, kind: str) -> Token | None:
        if self.tok.kind == kind:
            return self.advance()
        return None

    def error(self, what: str, ctx: str = "") -> P4Error:
        t = self.tok
        if t.kind == "BADNUM":
            return P4Error(t.loc, f"invalid integer literal '{t.text}'")
        if t.kind == "BADCHAR":
            return P4Error(t.loc, describe_char(t.text))
        ctx = f" {ctx}" if ctx else ""
        return P4Error(t.loc, f"expected {what}{ctx} but found {t.describe()}")

    def expect(self, kind: str, ctx: str = "") -> Token:
        if self.tok.kind == kind:
            return self.advance()
        raise self.error(f"'{kind}'", ctx)

    def expect_close(self, kind: str, open_tok: Token, what: str) -> Token:
        if self.tok.kind == kind:
            return self.advance()
        raise self.error(f"'{kind}'", f"to close the {what} opened at {open_tok.loc}")

    def expect_name(self, ctx: str = "") -> Token:
        if self.tok.kind == "ID":
            return self.advance()
        if self.tok.kind == "EOF" or not _word(self.tok):
            raise self.error("a name", ctx)
        raise P4Error(self.tok.loc, f"'{self.tok.text}' is a reserved keyword and cannot be "
                                    f"used as a name{(' ' + ctx) if ctx else ''}")

    def save(self) -> int:
        return self.i

    def restore(self, i: int) -> None:
        self.i = i
        self.tok = self.toks[i]

    def is_type(self, name: str) -> bool:
        if name in self.type_names:
            return True
        for s in self.scopes:
            if name in s:
                return True
        return False

    # -- program --------------------------------------------------------------

    def program(self) -> list[ir.Decl]:
        decls: list[ir.Decl] = []
        while self.tok.kind != "EOF":
            if self.tok.kind == ";":
                self.advance()
                continue
            if self.tok.kind == "}":
                raise P4Error(self.tok.loc, "unexpected '}' at top level (unbalanced braces?)")
            decls.append(self.declaration())
        return decls

    def declaration(self) -> ir.Decl:
        annos = self.annotations()
        t = self.tok
        k = t.kind
        if k == "const":
            return self.const_decl(annos)
        if k == "typedef":
            return self.typedef_decl(annos, False)
        if k == "ID" and t.value == "type" and self.peek().kind != "(":
            return self.typedef_decl(annos, True)
        if k in ("header", "header_union", "struct"):
            return self.struct_like(annos)
        if k == "enum":
            return self.enum_decl(annos)
        if k == "error" and self.peek().kind == "{":
            return self.ident_list_decl(annos, ir.ErrorDecl)
        if k == "match_kind":
            return self.ident_list_decl(annos, ir.MatchKindDecl)
        if k == "extern":
            return self.extern_decl(annos)
        if k == "action":
            return self.action_decl(annos)
        if k == "parser":
            return self.parser_decl(annos)
        if k == "control":
            return self.control_decl(annos)
        if k == "package":
            return self.package_decl(annos)
        if k == "table":
            raise P4Error(t.loc, "a table can only be declared inside a control")
        if k == "ID" or k == "." or k in _BASE_TYPE_KW or k == "void" or k == "error":
            return self.typed_decl(annos, top=True)
        raise self.error("a declaration")

    # -- annotations ----------------------------------------------------------

    def annotations(self) -> list[ir.Annotation]:
        if self.tok.kind != "@":
            return []
        res = []
        while self.tok.kind == "@":
            at = self.advance()
            if not _word(self.tok):
                raise self.error("an annotation name", "after '@'")
            name = self.advance().text
            body: list[Token] = []
            structured = False
            if name == "pragma" and not self.tok.nl and _word(self.tok):
                # '@pragma name body...': the rest of the line
                name = self.advance().text
                while not self.tok.nl and self.tok.kind != "EOF":
                    body.append(self.advance())
            elif self.tok.kind in ("(", "["):
                structured = self.tok.kind == "["
                open_tok = self.advance()
                close = "]" if structured else ")"
                depth = 0
                while True:
                    t = self.tok
                    if t.kind == "EOF":
                        raise self.error(f"'{close}'", f"to close the annotation opened at "
                                                       f"{open_tok.loc}")
                    if t.kind in ("(", "[", "{"):
                        depth += 1
                    elif t.kind in (")", "]", "}"):
                        if depth == 0:
                            if t.kind != close:
                                raise self.error(f"'{close}'", "to close the annotation "
                                                               f"opened at {open_tok.loc}")
                            self.advance()
                            break
                        depth -= 1
                    body.append(self.advance())
            raw = " ".join(b.text for b in body)
            args: list[ir.Expr] = []
            if body and not structured:
                args = self.annotation_args(body)
            res.append(ir.Annotation(loc=at.loc, name=name, args=args, raw=raw))
        return res

    def annotation_args(self, body: list[Token]) -> list[ir.Expr]:
        if len(body) == 1:
            b = body[0]
            if b.kind == "STR":
                return [ir.StringLit(loc=b.loc, value=str(b.value))]
            if b.kind == "INT":
                return [self.int_lit(b)]
        eof = Token("EOF", None, "", body[-1].file, body[-1].line, body[-1].col, True, True)
        saved = (self.toks, self.i, self.tok)
        self.toks = body + [eof]
        self.i = 0
        self.tok = self.toks[0]
        try:
            args = [self.expression()]
            while self.accept(","):
                args.append(self.expression())
            if self.tok.kind != "EOF":
                args = []
        except P4Error:
            args = []
        finally:
            self.toks, self.i, self.tok = saved
        return args

    # -- types ----------------------------------------------------------------

    def type_ref(self, ctx: str = "") -> ir.TypeRef:
        t = self.tok
        k = t.kind
        res: ir.TypeRef
        if k == "bit" or k == "int":
            self.advance()
            if self.tok.kind == "<":
                open_tok = self.advance()
                w = self.width_expr()
                self.expect_close(">", open_tok, f"'{k}<' type")
                res = ir.TypeBits(loc=t.loc, width=w, signed=k == "int")
            elif k == "bit":
                res = ir.TypeBits(loc=t.loc, width=ir.IntLit(loc=t.loc, value=1))
            else:
                res = ir.TypeInfInt(loc=t.loc)
        elif k == "varbit":
            self.advance()
            open_tok = self.expect("<", "after 'varbit'")
            w = self.width_expr()
            self.expect_close(">", open_tok, "'varbit<' type")
            res = ir.TypeVarbit(loc=t.loc, max_width=w)
        elif k == "bool":
            self.advance()
            res = ir.TypeBool(loc=t.loc)
        elif k == "string":
            self.advance()
            res = ir.TypeString(loc=t.loc)
        elif k == "void":
            self.advance()
            res = ir.TypeVoid(loc=t.loc)
        elif k == "error":
            self.advance()
            res = ir.TypeError_(loc=t.loc)
        elif k == "match_kind":
            self.advance()
            res = ir.TypeMatchKind(loc=t.loc)
        elif k == "tuple":
            self.advance()
            open_tok = self.expect("<", "after 'tuple'")
            elems = [] if self.tok.kind == ">" else [self.type_ref()]
            while elems and self.accept(","):
                elems.append(self.type_ref())
            self.expect_close(">", open_tok, "'tuple<' type")
            res = ir.TypeTuple(loc=t.loc, elems=elems)
        elif k == "ID" and t.value == "_":
            self.advance()
            res = ir.TypeDontCare(loc=t.loc)
        elif k == "ID" or (k == "." and self.peek().kind == "ID"):
            absolute = bool(self.accept("."))
            name = self.advance()
            base = ir.TypeName(loc=name.loc if not absolute else t.loc, name=str(name.value),
                               absolute=absolute)
            if self.tok.kind == "<":
                if not absolute and not self.is_type(str(name.value)):
                    # (else a misspelt bit<8> reads as 'expected a type, found 8')
                    raise P4Error(name.loc, f"undeclared type '{name.value}'")
                open_tok = self.advance()
                args = [self.type_arg()]
                while self.accept(","):
                    args.append(self.type_arg())
                self.expect_close(">", open_tok, "type argument list")
                res = ir.TypeSpecialized(loc=base.loc, base=base, args=args)
            else:
                res = base
        else:
            raise self.error("a type", ctx)
        while self.tok.kind == "[":
            open_tok = self.advance()
            size = self.expression()
            self.expect_close("]", open_tok, "header stack size")
            res = ir.TypeStack(loc=res.loc, elem=res, size=size)
        return res

    def type_arg(self) -> ir.TypeRef:
        return self.type_ref("as a type argument")

    def width_expr(self) -> ir.Expr:
        t = self.tok
        if t.kind == "INT" and self.peek().kind == ">":
            return self.int_lit(self.advance())
        if t.kind in ("INT", "(", "ID", "-", "BADNUM"):
            # Additive precedence and above: '>' closes the type, '>>' is not a shift.
            return self.binary(_BIN_PREC["+"])
        raise self.error("a width (integer or parenthesized expression)")

    def type_params(self) -> list[str]:
        if self.tok.kind != "<":
            return []
        open_tok = self.advance()
        names = [str(self.expect_name("in a type parameter list").value)]
        while self.accept(","):
            names.append(str(self.expect_name("in a type parameter list").value))
        self.expect_close(">", open_tok, "type parameter list")
        return names

    def params(self, ctx: str) -> list[ir.Param]:
        open_tok = self.expect("(", ctx)
        res: list[ir.Param] = []
        if self.accept(")"):
            return res
        while True:
            annos = self.annotations()
            start = self.tok
            direction = ""
            if start.kind in _DIRECTIONS:
                direction = self.advance().kind
            ty = self.type_ref("for a parameter")
            name = self.expect_name("for a parameter")
            default = None
            if self.accept("="):
                default = self.expression()
            res.append(ir.Param(loc=name.loc, direction=direction, type=ty, name=str(name.value),
                                default=default, annotations=annos))
            if self.accept(","):
                continue
            self.expect_close(")", open_tok, "parameter list")
            return res

    # -- simple declarations ----------------------------------------------------

    def const_decl(self, annos: list[ir.Annotation]) -> ir.ConstDecl:
        self.expect("const")
        ty = self.type_ref("after 'const'")
        name = self.expect_name("for the constant")
        self.expect("=", f"after the name of constant '{name.value}'")
        value = self.expression()
        self.expect(";", f"after the declaration of constant '{name.value}'")
        return ir.ConstDecl(loc=name.loc, name=str(name.value), annotations=annos, type=ty,
                            value=value)

    def typedef_decl(self, annos: list[ir.Annotation], newtype: bool) -> ir.TypedefDecl:
        kw = self.advance()
        if self.tok.kind in ("header", "header_union", "struct", "enum"):
            raise P4Unsupported(self.tok.loc, f"'{kw.text}' of an inline {self.tok.kind} "
                                              "declaration")
        ty = self.type_ref(f"after '{kw.text}'")
        name = self.expect_name(f"for the {kw.text}")
        self.expect(";", f"after the {kw.text} '{name.value}'")
        self.type_names.add(str(name.value))
        return ir.TypedefDecl(loc=name.loc, name=str(name.value), annotations=annos, type=ty,
                              is_newtype=newtype)

    def struct_like(self, annos: list[ir.Annotation]) -> ir.Decl:
        kw = self.advance()
        name = self.expect_name(f"after '{kw.kind}'")
        self.type_names.add(str(name.value))
        if self.tok.kind == "<":
            raise P4Unsupported(self.tok.loc, f"generic {kw.kind} declarations")
        open_tok = self.expect("{", f"after '{kw.kind} {name.value}'")
        fields: list[ir.StructField] = []
        while self.tok.kind != "}":
            if self.tok.kind == "EOF":
                self.expect_close("}", open_tok, f"{kw.kind} '{name.value}'")
            fannos = self.annotations()
            fty = self.type_ref(f"for a field of {kw.kind} '{name.value}'")
            fname = self.expect_name(f"for a field of {kw.kind} '{name.value}'")
            while self.tok.kind == "[":  # C-style array field 'T name[N];'
                open_b = self.advance()
                size = self.expression()
                self.expect_close("]", open_b, "array size")
                fty = ir.TypeStack(loc=fty.loc, elem=fty, size=size)
            self.expect(";", f"after field '{fname.value}'")
            fields.append(ir.StructField(loc=fname.loc, name=str(fname.value), type=fty,
                                         annotations=fannos))
        self.advance()
        cls = {"header": ir.HeaderDecl, "header_union": ir.HeaderUnionDecl,
               "struct": ir.StructDecl}[kw.kind]
        return cls(loc=name.loc, name=str(name.value), annotations=annos, fields=fields)

    def enum_decl(self, annos: list[ir.Annotation]) -> ir.EnumDecl:
        self.advance()
        underlying = None
        if self.tok.kind in ("bit", "int") or (self.tok.kind == "ID" and self.peek().kind == "ID"):
            underlying = self.type_ref()
        name = self.expect_name("for the enum")
        self.type_names.add(str(name.value))
        open_tok = self.expect("{", f"after 'enum {name.value}'")
        members: list[str] = []
        values: list[ir.Expr | None] = []
        while self.tok.kind != "}":
            self.annotations()
            m = self.expect_name(f"for a member of enum '{name.value}'")
            members.append(str(m.value))
            if self.accept("="):
                values.append(self.expression())
            else:
                values.append(None)
            if not self.accept(","):
                break
        self.expect_close("}", open_tok, f"enum '{name.value}'")
        if underlying is None and any(v is not None for v in values):
            raise P4Error(name.loc, f"enum '{name.value}' gives member values but has no "
                                    "underlying type (write 'enum bit<W> ...')")
        return ir.EnumDecl(loc=name.loc, name=str(name.value), annotations=annos,
                           members=members, underlying=underlying,
                           values=values if underlying is not None else [])

    def ident_list_decl(self, annos: list[ir.Annotation], cls: type) -> ir.Decl:
        kw = self.advance()
        open_tok = self.expect("{", f"after '{kw.kind}'")
        members: list[str] = []
        while self.tok.kind != "}":
            members.append(str(self.expect_name(f"in the {kw.kind} declaration").value))
            if not self.accept(","):
                break
        self.expect_close("}", open_tok, f"{kw.kind} declaration")
        return cls(loc=kw.loc, name=kw.kind, annotations=annos, members=members)  # type: ignore

    def package_decl(self, annos: list[ir.Annotation]) -> ir.PackageTypeDecl:
        self.advance()
        name = self.expect_name("after 'package'")
        self.type_names.add(str(name.value))
        tps = self.type_params()
        self.scopes.append(set(tps))
        try:
            ps = self.params(f"after 'package {name.value}'")
        finally:
            self.scopes.pop()
        self.expect(";", f"after the declaration of package '{name.value}'")
        return ir.PackageTypeDecl(loc=name.loc, name=str(name.value), annotations=annos,
                                  type_params=tps, params=ps)

    # -- externs ------------------------------------------------------------------

    def extern_decl(self, annos: list[ir.Annotation]) -> ir.Decl:
        self.advance()
        t = self.tok
        is_object = False
        if t.kind == "ID":
            nxt = self.peek()
            if nxt.kind == "{":
                is_object = True
            elif nxt.kind == "<":
                j = self.i + 2
                depth = 1
                toks = self.toks
                while j < len(toks) and depth:
                    kk = toks[j].kind
                    if kk == "<":
                        depth += 1
                    elif kk == ">":
                        depth -= 1
                    elif kk in (";", "{", "(", "EOF"):
                        break
                    j += 1
                is_object = depth == 0 and j < len(toks) and toks[j].kind == "{"
        if is_object:
            return self.extern_object(annos)
        ret = self.type_ref("after 'extern'")
        name = self.expect_name("for the extern function")
        tps = self.type_params()
        self.scopes.append(set(tps))
        try:
            ps = self.params(f"after extern function '{name.value}'")
        finally:
            self.scopes.pop()
        self.expect(";", f"after the declaration of extern function '{name.value}'")
        return ir.ExternFunctionDecl(loc=name.loc, name=str(name.value), annotations=annos,
                                     return_type=ret, type_params=tps, params=ps)

    def extern_object(self, annos: list[ir.Annotation]) -> ir.ExternDecl:
        name = self.advance()
        ename = str(name.value)
        self.type_names.add(ename)
        tps = self.type_params()
        self.scopes.append(set(tps))
        methods: list[ir.MethodDecl] = []
        try:
            open_tok = self.expect("{", f"after 'extern {ename}'")
            while self.tok.kind != "}":
                if self.tok.kind == "EOF":
                    self.expect_close("}", open_tok, f"extern '{ename}'")
                mannos = self.annotations()
                abstract = bool(self.accept("abstract"))
                if self.tok.kind == "ID" and self.tok.value == ename and self.peek().kind == "(":
                    mname = self.advance()
                    ps = self.params(f"after constructor '{ename}'")
                    self.expect(";", f"after the constructor of extern '{ename}'")
                    methods.append(ir.MethodDecl(loc=mname.loc, name=ename, annotations=mannos,
                                                 return_type=None, params=ps,
                                                 is_constructor=True))
                    continue
                ret = self.type_ref(f"for a method of extern '{ename}'")
                if not _word(self.tok):
                    raise self.error("a method name", f"in extern '{ename}'")
                mname = self.advance()
                mtps = self.type_params()
                self.scopes.append(set(mtps))
                try:
                    ps = self.params(f"after method '{mname.text}'")
                finally:
                    self.scopes.pop()
                self.expect(";", f"after the declaration of method '{mname.text}'")
                methods.append(ir.MethodDecl(loc=mname.loc, name=mname.text, annotations=mannos,
                                             return_type=ret, type_params=mtps, params=ps,
                                             is_abstract=abstract))
            self.advance()
        finally:
            self.scopes.pop()
        return ir.ExternDecl(loc=name.loc, name=ename, annotations=annos, type_params=tps,
                             methods=methods)

    # -- top-level / local declarations that start with a type -------------------

    def typed_decl(self, annos: list[ir.Annotation], top: bool) -> ir.Decl:
        """Instantiation ``T(args) n;``, function ``T f(...) {...}`` (top level) or
        variable ``T n [= e];`` (inside parsers and controls)."""
        ty = self.type_ref()
        if self.tok.kind == "(":
            args = self.arguments()
            name = self.expect_name("for the instance")
            if self.tok.kind == "=":
                raise P4Unsupported(self.tok.loc, "instantiations with an initializer block")
            self.expect(";", f"after the instantiation of '{name.value}'")
            return ir.InstantiationDecl(loc=name.loc, name=str(name.value), annotations=annos,
                                        type=ty, args=args)
        name = self.expect_name("after the type" if top else "for the variable")
        if top and self.tok.kind in ("(", "<"):
            tps = self.type_params()
            self.scopes.append(set(tps))
            try:
                ps = self.params(f"after function '{name.value}'")
                body = self.block()
            finally:
                self.scopes.pop()
            return ir.FunctionDecl(loc=name.loc, name=str(name.value), annotations=annos,
                                   return_type=ty, type_params=tps, params=ps, body=body)
        init = None
        if self.accept("="):
            init = self.expression()
        if top and self.tok.kind != ";":
            if isinstance(ty, ir.TypeName) and not self.is_type(ty.name) and \
                    self.tok.kind == "{":
                raise P4Error(ty.loc, f"'{ty.name}' is neither a declaration keyword nor a "
                                      "declared type")
            raise self.error("'(' or ';'", f"after '{name.value}'")
        self.expect(";", f"after the declaration of '{name.value}'")
        return ir.VarDecl(loc=name.loc, name=str(name.value), annotations=annos, type=ty,
                          init=init)

    # -- actions, functions ----------------------------------------------------------

    def action_decl(self, annos: list[ir.Annotation]) -> ir.ActionDecl:
        self.advance()
        name = self.expect_name("after 'action'")
        ps = self.params(f"after 'action {name.value}'")
        body = self.block()
        return ir.ActionDecl(loc=name.loc, name=str(name.value), annotations=annos, params=ps,
                             body=body)

    # -- parsers --------------------------------------------------------------------

    def parser_decl(self, annos: list[ir.Annotation]) -> ir.Decl:
        self.advance()
        name = self.expect_name("after 'parser'")
        pname = str(name.value)
        self.type_names.add(pname)
        tps = self.type_params()
        self.scopes.append(set(tps))
        try:
            ps = self.params(f"after 'parser {pname}'")
            if self.accept(";"):
                return ir.ParserTypeDecl(loc=name.loc, name=pname, annotations=annos,
                                         type_params=tps, params=ps)
            ctor = self.params("") if self.tok.kind == "(" else []
            open_tok = self.expect("{", f"or ';' after the parameters of parser '{pname}'")
            locals_: list[ir.Decl] = []
            states: list[ir.ParserState] = []
            while self.tok.kind != "}":
                if self.tok.kind == "EOF":
                    self.expect_close("}", open_tok, f"parser '{pname}'")
                lannos = self.annotations()
                t = self.tok
                if t.kind == "ID" and t.value == "state" and self.peek().kind == "ID":
                    states.append(self.parser_state(lannos))
                elif t.kind == "const":
                    locals_.append(self.const_decl(lannos))
                elif t.kind == "value_set":
                    locals_.append(self.value_set_decl(lannos))
                elif t.kind == "ID" or t.kind in _BASE_TYPE_KW or t.kind in (".", "error"):
                    locals_.append(self.typed_decl(lannos, top=False))
                else:
                    raise self.error("a state or a local declaration", f"in parser '{pname}'")
            self.advance()
        finally:
            self.scopes.pop()
        return ir.ParserDecl(loc=name.loc, name=pname, annotations=annos, type_params=tps,
                             params=ps, ctor_params=ctor, locals=locals_, states=states)

    def value_set_decl(self, annos: list[ir.Annotation]) -> ir.ValueSetDecl:
        self.advance()
        open_tok = self.expect("<", "after 'value_set'")
        ty = self.type_ref()
        self.expect_close(">", open_tok, "value_set type")
        popen = self.expect("(", "after 'value_set<...>'")
        size = self.expression()
        self.expect_close(")", popen, "value_set size")
        name = self.expect_name("for the value_set")
        self.expect(";", f"after the declaration of value_set '{name.value}'")
        return ir.ValueSetDecl(loc=name.loc, name=str(name.value), annotations=annos, type=ty,
                               size=size)

    def parser_state(self, annos: list[ir.Annotation]) -> ir.ParserState:
        self.advance()
        name = self.advance()
        sname = str(name.value)
        open_tok = self.expect("{", f"after 'state {sname}'")
        stmts: list[ir.Stmt] = []
        transition: ir.Transition | None = None
        while self.tok.kind != "}":
            if self.tok.kind == "transition":
                transition = self.transition()
                break
            if self.tok.kind == "EOF":
                break
            stmts.append(self.statement())
        self.expect_close("}", open_tok, f"state '{sname}'")
        return ir.ParserState(loc=name.loc, name=sname, annotations=annos, stmts=stmts,
                              transition=transition)

    def transition(self) -> ir.Transition:
        t = self.advance()
        if self.tok.kind == "select":
            self.advance()
            popen = self.expect("(", "after 'select'")
            exprs: list[ir.Expr] = []
            if self.tok.kind != ")":
                exprs.append(self.expression())
                while self.accept(","):
                    exprs.append(self.expression())
            self.expect_close(")", popen, "select expression list")
            bopen = self.expect("{", "after 'select(...)'")
            cases: list[ir.SelectCase] = []
            while self.tok.kind != "}":
                if self.tok.kind == "EOF":
                    self.expect_close("}", bopen, "select")
                start = self.tok
                keyset = self.keyset_or_tuple()
                self.expect(":", "after a select case keyset")
                st = self.expect_name("(the next state) after ':' in a select case")
                self.expect(";", f"after select case '{st.value}'")
                cases.append(ir.SelectCase(loc=start.loc, keyset=keyset, state=str(st.value)))
            self.advance()
            self.accept(";")
            return ir.SelectTransition(loc=t.loc, exprs=exprs, cases=cases)
        st = self.expect_name("(a state name or 'select') after 'transition'")
        self.expect(";", f"after 'transition {st.value}'")
        return ir.DirectTransition(loc=st.loc, state=str(st.value))

    def keyset(self) -> ir.Expr:
        t = self.tok
        if t.kind == "default":
            self.advance()
            return ir.DefaultExpr(loc=t.loc)
        if t.kind == "ID" and t.value == "_" and self.peek().kind in (",", ")", ":"):
            self.advance()
            return ir.DontCareExpr(loc=t.loc)
        e = self.expression()
        op = self.tok.kind
        if op == "&&&" or op == "..":
            self.advance()
            right = self.expression()
            e = ir.BinaryExpr(loc=t.loc, op=op, left=e, right=right)
        return e

    def keyset_or_tuple(self) -> ir.Expr:
        """A select keyset: ``(k1, k2)`` becomes a ListExpr, else a single keyset."""
        loc = self.tok.loc
        elems = self.keyset_list()
        if len(elems) == 1:
            return elems[0]
        return ir.ListExpr(loc=loc, elems=elems)

    def keyset_list(self) -> list[ir.Expr]:
        """``(k1, k2, ...)`` followed by ':' gives its elements; else one keyset."""
        if self.tok.kind == "(":
            saved = self.save()
            self.advance()
            try:
                elems = [self.keyset()]
                while self.accept(","):
                    elems.append(self.keyset())
                if self.tok.kind == ")" and self.peek().kind == ":":
                    self.advance()
                    return elems
            except P4Error:
                pass
            self.restore(saved)
        return [self.keyset()]

    # -- controls ---------------------------------------------------------------------

    def control_decl(self, annos: list[ir.Annotation]) -> ir.Decl:
        self.advance()
        name = self.expect_name("after 'control'")
        cname = str(name.value)
        self.type_names.add(cname)
        tps = self.type_params()
        self.scopes.append(set(tps))
        try:
            ps = self.params(f"after 'control {cname}'")
            if self.accept(";"):
                return ir.ControlTypeDecl(loc=name.loc, name=cname, annotations=annos,
                                          type_params=tps, params=ps)
            ctor = self.params("") if self.tok.kind == "(" else []
            open_tok = self.expect("{", f"or ';' after the parameters of control '{cname}'")
            locals_: list[ir.Decl] = []
            body: ir.BlockStmt | None = None
            while self.tok.kind != "}":
                if self.tok.kind == "EOF":
                    self.expect_close("}", open_tok, f"control '{cname}'")
                lannos = self.annotations()
                t = self.tok
                k = t.kind
                if k == "ID" and t.value == "apply" and self.peek().kind in ("{", "@"):
                    self.advance()
                    lannos += self.annotations()
                    body = self.block()
                    body.annotations = lannos + body.annotations
                    self.expect_close("}", open_tok, f"control '{cname}'")
                    break
                if k == "action":
                    locals_.append(self.action_decl(lannos))
                elif k == "table":
                    locals_.append(self.table_decl(lannos))
                elif k == "const":
                    locals_.append(self.const_decl(lannos))
                elif k == "ID" or k in _BASE_TYPE_KW or k in (".", "error"):
                    locals_.append(self.typed_decl(lannos, top=False))
                else:
                    raise self.error("a local declaration or 'apply'", f"in control '{cname}'")
            else:
                raise P4Error(self.tok.loc, f"control '{cname}' has no 'apply' block")
        finally:
            self.scopes.pop()
        return ir.ControlDecl(loc=name.loc, name=cname, annotations=annos, type_params=tps,
                              params=ps, ctor_params=ctor, locals=locals_, body=body)

    def table_decl(self, annos: list[ir.Annotation]) -> ir.TableDecl:
        self.advance()
        name = self.expect_name("after 'table'")
        tname = str(name.value)
        table = ir.TableDecl(loc=name.loc, name=tname, annotations=annos)
        open_tok = self.expect("{", f"after 'table {tname}'")
        while self.tok.kind != "}":
            if self.tok.kind == "EOF":
                self.expect_close("}", open_tok, f"table '{tname}'")
            pannos = self.annotations()
            is_const = bool(self.accept("const"))
            if not _word(self.tok):
                raise self.error("a table property", f"in table '{tname}'")
            prop = self.advance()
            pname = prop.text
            if pname in table.property_locs:
                raise P4Error(prop.loc, f"table '{tname}' has more than one '{pname}' property")
            table.property_locs[pname] = prop.loc
            if pannos:
                table.property_annotations[pname] = pannos
            self.expect("=", f"after table property '{pname}'")
            if pname == "key":
                table.keys = self.table_keys(tname)
            elif pname == "actions":
                table.actions = self.table_actions(tname)
            elif pname == "default_action":
                table.default_action = self.action_ref()
                table.default_action_const = is_const
                self.expect(";", "after the default_action")
            elif pname == "entries":
                table.entries = self.table_entries(tname)
                table.entries_const = is_const
            elif pname == "size":
                table.size = self.expression()
                self.expect(";", "after the table size")
            else:
                table.properties[pname] = self.expression()
                self.expect(";", f"after table property '{pname}'")
        self.advance()
        return table

    def table_keys(self, tname: str) -> list[ir.KeyElement]:
        open_tok = self.expect("{", "after 'key ='")
        keys: list[ir.KeyElement] = []
        while self.tok.kind != "}":
            if self.tok.kind == "EOF":
                self.expect_close("}", open_tok, f"key of table '{tname}'")
            annos = self.annotations()
            kstart = self.tok
            e = self.expression()
            self.expect(":", "after a key expression (then the match kind)")
            mk = self.expect_name("(the match kind) after ':' in a table key")
            annos += self.annotations()
            self.expect(";", f"after key element '{mk.value}'")
            keys.append(ir.KeyElement(loc=kstart.loc, expr=e, match_kind=str(mk.value),
                                      annotations=annos))
        self.advance()
        self.accept(";")
        return keys

    def table_actions(self, tname: str) -> list[ir.ActionRef]:
        open_tok = self.expect("{", "after 'actions ='")
        res: list[ir.ActionRef] = []
        while self.tok.kind != "}":
            if self.tok.kind == "EOF":
                self.expect_close("}", open_tok, f"actions of table '{tname}'")
            annos = self.annotations()
            ref = self.action_ref()
            ref.annotations = annos + ref.annotations
            res.append(ref)
            if self.tok.kind == ",":
                self.advance()
            elif self.tok.kind != "}":
                self.expect(";", f"after action '{ref.name}' in the actions list")
        self.advance()
        self.accept(";")
        return res

    def action_ref(self) -> ir.ActionRef:
        annos = self.annotations()
        start = self.tok
        self.accept(".")
        name = self.expect_name("(an action name)")
        args: list[ir.Argument] = []
        if self.tok.kind == "(":
            args = self.arguments()
        return ir.ActionRef(loc=start.loc if start.kind == "." else name.loc,
                            name=str(name.value), args=args, annotations=annos)

    def table_entries(self, tname: str) -> list[ir.TableEntry]:
        open_tok = self.expect("{", "after 'entries ='")
        res: list[ir.TableEntry] = []
        while self.tok.kind != "}":
            if self.tok.kind == "EOF":
                self.expect_close("}", open_tok, f"entries of table '{tname}'")
            annos = self.annotations()
            start = self.tok
            is_const = bool(self.accept("const"))
            priority = None
            if self.tok.kind == "ID" and self.tok.value == "priority" and \
                    self.peek().kind == "=":
                self.advance()
                self.advance()
                priority = self.expression()
                self.expect(":", "after the entry priority")
            keys = self.keyset_list()
            self.expect(":", "after the keys of a table entry")
            action = self.action_ref()
            annos += self.annotations()
            self.expect(";", "after a table entry")
            res.append(ir.TableEntry(loc=start.loc, keys=keys, action=action, priority=priority,
                                     is_const=is_const, annotations=annos))
        self.advance()
        self.accept(";")
        return res

    # -- statements --------------------------------------------------------------------

    def block(self) -> ir.BlockStmt:
        open_tok = self.expect("{", "to start a block")
        stmts: list[ir.Stmt] = []
        while self.tok.kind != "}":
            if self.tok.kind == "EOF":
                self.expect_close("}", open_tok, "block")
            stmts.append(self.statement())
        self.advance()
        return ir.BlockStmt(loc=open_tok.loc, stmts=stmts)

    def statement(self) -> ir.Stmt:
        annos = self.annotations() if self.tok.kind == "@" else []
        t = self.tok
        k = t.kind
        if k == "{":
            b = self.block()
            b.annotations = annos
            return b
        if k == "if":
            self.advance()
            popen = self.expect("(", "after 'if'")
            cond = self.expression()
            self.expect_close(")", popen, "'if' condition")
            then = self.statement()
            else_ = None
            if self.accept("else"):
                else_ = self.statement()
            return ir.IfStmt(loc=t.loc, cond=cond, then=then, else_=else_)
        if k == ";":
            self.advance()
            return ir.EmptyStmt(loc=t.loc)
        if k == "return":
            self.advance()
            value = None
            if self.tok.kind != ";":
                value = self.expression()
            self.expect(";", "after 'return'")
            return ir.ReturnStmt(loc=t.loc, value=value)
        if k == "exit":
            self.advance()
            self.expect(";", "after 'exit'")
            return ir.ExitStmt(loc=t.loc)
        if k == "switch":
            return self.switch_stmt()
        if k == "const":
            return self.const_decl(annos)
        if k in _BASE_TYPE_KW or (k == "error" and self.peek().kind == "ID"):
            return self.var_decl(annos)
        if k == "ID" or k == ".":
            # Declaration ``T x [= e];`` or an expression statement?
            saved = self.save()
            try:
                self.type_ref()
                is_decl = self.tok.kind == "ID" and self.peek().kind in ("=", ";")
            except P4Error:
                is_decl = False
            self.restore(saved)
            if is_decl:
                return self.var_decl(annos)
        if k == "ID":
            v = t.value
            if v == "for" and self.peek().kind == "(":
                return self.for_stmt()
            if (v == "break" or v == "continue") and self.peek().kind == ";":
                self.advance()
                self.advance()
                return ir.BreakStmt(loc=t.loc) if v == "break" else ir.ContinueStmt(loc=t.loc)
        if k in ("transition", "state"):
            raise P4Error(t.loc, f"'{t.text}' is only allowed in a parser state")
        if k in ("action", "table"):
            raise P4Error(t.loc, f"a {k} must be declared in the control's local "
                                 "declarations, not inside a block")
        return self.expr_stmt()

    def for_stmt(self) -> ir.Stmt:
        t = self.advance()
        popen = self.advance()
        # for (T v in coll) / for (v in coll)
        saved = self.save()
        self.annotations()
        ty: ir.TypeRef | None = None
        try:
            if self.tok.kind == "ID" and self.peek().kind == "in":
                var = self.advance()
            else:
                ty = self.type_ref()
                var = self.expect_name()
            is_in = self.tok.kind == "in"
        except P4Error:
            is_in = False
        if is_in:
            self.advance()
            coll = self.expression()
            if self.tok.kind == "..":
                self.advance()
                hi = self.expression()
                coll = ir.BinaryExpr(loc=coll.loc, op="..", left=coll, right=hi)
            self.expect_close(")", popen, "'for' header")
            body = self.statement()
            return ir.ForInStmt(loc=t.loc, var=str(var.value), type=ty, collection=coll,
                                body=body)
        self.restore(saved)
        init: list[ir.Stmt] = []
        while self.tok.kind != ";":
            init.append(self.simple_stmt())
            if not self.accept(","):
                break
        self.expect(";", "after the initialization of a 'for' loop")
        cond = None if self.tok.kind == ";" else self.expression()
        self.expect(";", "after the condition of a 'for' loop")
        update: list[ir.Stmt] = []
        while self.tok.kind != ")":
            update.append(self.simple_stmt())
            if not self.accept(","):
                break
        self.expect_close(")", popen, "'for' header")
        body = self.statement()
        return ir.ForStmt(loc=t.loc, init=init, cond=cond, update=update, body=body)

    def simple_stmt(self) -> ir.Stmt:
        """An assignment, call or variable declaration without its ';' (for headers)."""
        start = self.tok
        saved = self.save()
        try:
            ty = self.type_ref()
            if self.tok.kind == "ID" and self.peek().kind in ("=", ";", ",", ")"):
                name = self.advance()
                init = self.expression() if self.accept("=") else None
                return ir.VarDecl(loc=name.loc, name=str(name.value), type=ty, init=init)
        except P4Error:
            pass
        self.restore(saved)
        e = self.expression()
        k = self.tok.kind
        if k == "=":
            self.advance()
            return ir.AssignStmt(loc=start.loc, lhs=e, rhs=self.expression())
        op = _OP_ASSIGN.get(k)
        if op is not None:
            self.advance()
            rhs = self.expression()
            return ir.AssignStmt(loc=start.loc, lhs=e, rhs=ir.BinaryExpr(
                loc=start.loc, op=op, left=copy.deepcopy(e), right=rhs))
        if isinstance(e, ir.CallExpr):
            return ir.CallStmt(loc=start.loc, call=e)
        raise self.error("'='", "in a 'for' loop header")

    def var_decl(self, annos: list[ir.Annotation]) -> ir.VarDecl:
        ty = self.type_ref()
        name = self.expect_name("for the variable")
        init = None
        if self.accept("="):
            init = self.expression()
        self.expect(";", f"after the declaration of '{name.value}'")
        return ir.VarDecl(loc=name.loc, name=str(name.value), annotations=annos, type=ty,
                          init=init)

    def expr_stmt(self) -> ir.Stmt:
        start = self.tok
        e = self.expression()
        t = self.tok
        k = t.kind
        if k == "=":
            self.advance()
            rhs = self.expression()
            self.expect(";", "after the assignment")
            return ir.AssignStmt(loc=start.loc, lhs=e, rhs=rhs)
        op = _OP_ASSIGN.get(k)
        if op is None and k == ">" and self.peek().kind == ">=" and not self.peek().ws:
            self.advance()
            op = ">>"
        if op is not None:
            self.advance()
            rhs = self.expression()
            self.expect(";", "after the assignment")
            return ir.AssignStmt(loc=start.loc, lhs=e, rhs=ir.BinaryExpr(
                loc=start.loc, op=op, left=copy.deepcopy(e), right=rhs))
        if isinstance(e, ir.CallExpr):
            if k == "ID" and isinstance(e.func, ir.PathExpr):
                # 'T(args) name;' inside a block: an instantiation
                base = ir.TypeName(loc=e.func.loc, name=e.func.name, absolute=e.func.absolute)
                ty: ir.TypeRef = base
                if e.type_args:
                    ty = ir.TypeSpecialized(loc=base.loc, base=base, args=e.type_args)
                name = self.advance()
                self.expect(";", f"after the instantiation of '{name.value}'")
                return ir.InstantiationDecl(loc=name.loc, name=str(name.value), type=ty,
                                            args=e.args)
            self.expect(";", "after the call")
            return ir.CallStmt(loc=start.loc, call=e)
        if k == ";":
            raise P4Error(start.loc, "this expression is not a statement (expected an "
                                     "assignment or a call)")
        raise self.error("'=' or ';'", "after the expression")

    def switch_stmt(self) -> ir.SwitchStmt:
        t = self.advance()
        popen = self.expect("(", "after 'switch'")
        e = self.expression()
        self.expect_close(")", popen, "switch expression")
        bopen = self.expect("{", "after 'switch (...)'")
        cases: list[ir.SwitchCase] = []
        while self.tok.kind != "}":
            if self.tok.kind == "EOF":
                self.expect_close("}", bopen, "switch")
            lt = self.tok
            label: ir.Expr
            if lt.kind == "default":
                self.advance()
                label = ir.DefaultExpr(loc=lt.loc)
            else:
                label = self.expression()
            self.expect(":", "after a switch label")
            body = self.block() if self.tok.kind == "{" else None
            cases.append(ir.SwitchCase(loc=lt.loc, label=label, body=body))
        self.advance()
        return ir.SwitchStmt(loc=t.loc, expr=e, cases=cases)

    # -- expressions -------------------------------------------------------------------

    def expression(self) -> ir.Expr:
        start = self.tok.loc
        e = self.binary(1)
        if self.tok.kind == "?":
            self.advance()
            a = self.expression()
            self.expect(":", "in a conditional expression '?:'")
            b = self.expression()
            return ir.TernaryExpr(loc=start, cond=e, then=a, else_=b)
        return e

    def binary(self, min_prec: int) -> ir.Expr:
        start = self.tok.loc
        left = self.unary()
        prec_of = _BIN_PREC.get
        while True:
            t = self.tok
            op = t.kind
            two = False
            if op == ">":
                nxt = self.peek()
                if not nxt.ws and nxt.kind in (">", ">="):
                    if nxt.kind == ">=":  # '>>=' ends the expression
                        return left
                    op = ">>"
                    two = True
            p = prec_of(op)
            if p is None or p < min_prec:
                return left
            if (op == "+" or op == "-") and self.peek().kind == ":" and not self.peek().ws:
                return left  # 'base +: width' inside a slice
            self.advance()
            if two:
                self.advance()
            right = self.binary(p + 1)
            left = ir.BinaryExpr(loc=start, op=op, left=left, right=right)

    def unary(self) -> ir.Expr:
        t = self.tok
        k = t.kind
        if k in ("!", "~", "-", "+"):
            self.advance()
            e = self.unary()
            return ir.UnaryExpr(loc=t.loc, op=k, expr=e)
        if k == "(":
            nxt = self.peek()
            nk = nxt.kind
            if nk in _BASE_TYPE_KW or (nk in ("ID", ".") and (
                    self.is_type(str(nxt.value)) or (nk == "." and self.peek(2).kind == "ID"
                                                     and self.is_type(str(self.peek(2).value))))):
                saved = self.save()
                self.advance()
                try:
                    ty = self.type_ref()
                    ok = self.tok.kind == ")" and (nk in _BASE_TYPE_KW or
                                                   self.peek().kind in _EXPR_START)
                except P4Error:
                    if nk in _BASE_TYPE_KW:
                        raise
                    ok = False
                if ok:
                    self.advance()
                    e = self.unary()
                    return ir.CastExpr(loc=t.loc, to=ty, expr=e)
                self.restore(saved)
            self.advance()
            e = self.expression()
            self.expect_close(")", t, "parenthesized expression")
            return self.postfix(e, t.loc)
        return self.postfix(self.primary(), t.loc)

    def primary(self) -> ir.Expr:
        t = self.tok
        k = t.kind
        if k == "ID":
            self.advance()
            name = str(t.value)
            if name == "_":
                return ir.DontCareExpr(loc=t.loc)
            if self.tok.kind == "{" and self.is_type(name):
                ty = ir.TypeName(loc=t.loc, name=name)
                inner = self.brace_expr()
                if isinstance(inner, ir.StructExpr):
                    inner.type_name = ty
                    inner.loc = t.loc
                    return inner
                return ir.CastExpr(loc=t.loc, to=ty, expr=inner)
            return ir.PathExpr(loc=t.loc, name=name)
        if k == "INT":
            self.advance()
            return self.int_lit(t)
        if k == "STR":
            self.advance()
            return ir.StringLit(loc=t.loc, value=str(t.value))
        if k == "true" or k == "false":
            self.advance()
            return ir.BoolLit(loc=t.loc, value=k == "true")
        if k == "{":
            return self.brace_expr()
        if k == "." and self.peek().kind == "ID":
            self.advance()
            n = self.advance()
            return ir.PathExpr(loc=t.loc, name=str(n.value), absolute=True)
        if k == "this" or k == "error":
            self.advance()
            return ir.PathExpr(loc=t.loc, name=k)
        if k == "default":
            self.advance()
            return ir.DefaultExpr(loc=t.loc)
        if k == "BADNUM":
            raise P4Error(t.loc, f"invalid integer literal '{t.text}'")
        raise self.error("an expression")

    def int_lit(self, t: Token) -> ir.IntLit:
        lit: tuple[int, int | None, bool, int] = t.value  # type: ignore[assignment]
        value, width, signed, base = lit
        if width is not None and width == 0 and signed:
            raise P4Error(t.loc, f"invalid integer literal '{t.text}': int<0> has no values")
        return ir.IntLit(loc=t.loc, value=value, width=width, signed=signed, base=base)

    def brace_expr(self) -> ir.Expr:
        open_tok = self.advance()
        if self.tok.kind == "#" and self.peek().kind == "}":
            raise P4Unsupported(open_tok.loc, "the invalid header expression '{#}'")
        if self.tok.kind == "ID" and self.peek().kind == "=":
            fields: list[tuple[str, ir.Expr]] = []
            while self.tok.kind != "}":
                if self.tok.kind == "...":
                    raise P4Unsupported(self.tok.loc, "'...' in a structure expression")
                fname = self.expect_name("(a field name) in a structure expression")
                self.expect("=", f"after field '{fname.value}' in a structure expression")
                fields.append((str(fname.value), self.expression()))
                if not self.accept(","):
                    break
            self.expect_close("}", open_tok, "structure expression")
            return ir.StructExpr(loc=open_tok.loc, fields=fields)
        elems: list[ir.Expr] = []
        while self.tok.kind != "}":
            if self.tok.kind == "...":
                raise P4Unsupported(self.tok.loc, "'...' in a list expression")
            elems.append(self.expression())
            if not self.accept(","):
                break
        self.expect_close("}", open_tok, "list expression")
        return ir.ListExpr(loc=open_tok.loc, elems=elems)

    def postfix(self, e: ir.Expr, start: Location) -> ir.Expr:
        while True:
            t = self.tok
            k = t.kind
            if k == ".":
                self.advance()
                m = self.tok
                if not _word(m):
                    raise self.error("a member name", "after '.'")
                self.advance()
                e = ir.MemberExpr(loc=m.loc, expr=e, member=m.text)
            elif k == "(":
                args = self.arguments()
                e = ir.CallExpr(loc=e.loc, func=e, args=args)
            elif k == "[":
                self.advance()
                a = self.expression()
                if self.tok.kind in ("+", "-") and self.peek().kind == ":" and \
                        not self.peek().ws:
                    # e[base +: width] / e[base -: width]: an indexed part-select
                    up = self.advance().kind == "+"
                    self.advance()
                    w = self.expression()
                    self.expect_close("]", t, "bit slice")
                    one = ir.IntLit(loc=w.loc, value=1)
                    span = ir.BinaryExpr(loc=w.loc, op="-", left=w, right=one)
                    if up:
                        hi: ir.Expr = ir.BinaryExpr(loc=a.loc, op="+", left=a, right=span)
                        lo = copy.deepcopy(a)
                    else:
                        hi = a
                        lo = ir.BinaryExpr(loc=a.loc, op="-", left=copy.deepcopy(a),
                                           right=copy.deepcopy(span))
                    e = ir.SliceExpr(loc=start, expr=e, hi=hi, lo=lo)
                elif self.accept(":"):
                    b = self.expression()
                    self.expect_close("]", t, "bit slice")
                    e = ir.SliceExpr(loc=start, expr=e, hi=a, lo=b)
                else:
                    self.expect_close("]", t, "index")
                    e = ir.IndexExpr(loc=start, expr=e, index=a)
            elif k == "<" and isinstance(e, (ir.PathExpr, ir.MemberExpr)) and \
                    self.starts_type_arg(self.peek()):
                # f<T>(...) : a call with type arguments, else a comparison.
                saved = self.save()
                try:
                    self.advance()
                    targs = [self.type_arg()]
                    while self.accept(","):
                        targs.append(self.type_arg())
                    ok = self.tok.kind == ">" and self.peek().kind == "("
                except P4Error:
                    ok = False
                if not ok:
                    self.restore(saved)
                    return e
                self.advance()
                args = self.arguments()
                e = ir.CallExpr(loc=e.loc, func=e, type_args=targs, args=args)
            else:
                return e

    def starts_type_arg(self, t: Token) -> bool:
        """Can ``t`` start a type argument (so ``f < t`` may be ``f<t>(...)``)?"""
        k = t.kind
        if k in _BASE_TYPE_KW or k == "void" or k == "error":
            return True
        if k == "ID":
            return t.value == "_" or self.is_type(str(t.value))
        return k == "." and self.peek(2).kind == "ID" and self.is_type(str(self.peek(2).value))

    def arguments(self) -> list[ir.Argument]:
        open_tok = self.expect("(")
        args: list[ir.Argument] = []
        if self.accept(")"):
            return args
        while True:
            t = self.tok
            if t.kind == "ID" and self.peek().kind == "=":
                self.advance()
                self.advance()
                v = self.expression()
                args.append(ir.Argument(loc=t.loc, value=v, name=str(t.value)))
            else:
                v = self.expression()
                args.append(ir.Argument(loc=v.loc, value=v))
            if self.accept(","):
                continue
            self.expect_close(")", open_tok, "argument list")
            return args


def parse_tokens(toks: list[Token]) -> list[ir.Decl]:
    """Parse a preprocessed token list (ending with an EOF token)."""
    p = Parser(toks)
    try:
        return p.program()
    except RecursionError:
        raise P4Error(p.tok.loc, "expression or statement nested too deeply") from None


__all__ = ["Parser", "parse_tokens", "Location"]
