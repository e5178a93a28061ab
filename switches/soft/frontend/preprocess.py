"""The C-style preprocessor P4 programs rely on, working on tokens.

Each file is tokenized on its own, so every token keeps the file, line and
column it was written at, including tokens from included files.  Tokens that
come out of a macro body are placed at the macro's use site (the place a user
can fix).

Supported: ``#include <x>`` / ``#include "x"``, ``#define`` (object-like and
function-like, with ``#`` stringizing and ``##`` pasting), ``#undef``,
``#ifdef/#ifndef/#if/#elif/#else/#endif`` (``defined`` and C integer
expressions), ``#error``, ``#pragma once``.  Line markers (``#line``,
``# 1 "f"``), other ``#pragma``s and ``#warning`` are ignored.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

from .lexer import Token, eof_token, parse_int, tokenize
from .source import Location, P4Error

#: The project's own core.p4 / v1model.p4, searched after the user's dirs.
P4INCLUDE_DIR = str(Path(__file__).resolve().parent.parent / "p4include")

_MAX_INCLUDE_DEPTH = 100

# Token lists of files already read, keyed by (path, mtime, size): the same
# includes are read for every program.  Tokens are never mutated.
_LEX_CACHE: dict[tuple[str, int, int], tuple[list[Token], Token]] = {}


def _lex_file(path: str) -> tuple[list[Token], Token]:
    try:
        st = os.stat(path)
    except OSError as e:
        raise P4Error(Location(path, 0, 0), f"cannot read file: {e.strerror}") from None
    key = (path, st.st_mtime_ns, st.st_size)
    hit = _LEX_CACHE.get(key)
    if hit is not None:
        return hit
    try:
        with open(path, encoding="utf-8-sig", errors="surrogateescape") as f:
            text = f.read()
    except OSError as e:
        raise P4Error(Location(path, 0, 0), f"cannot read file: {e.strerror}") from None
    res = (tokenize(text, path), eof_token(path, text))
    if len(_LEX_CACHE) > 256:
        _LEX_CACHE.clear()
    _LEX_CACHE[key] = res
    return res


class Macro:
    __slots__ = ("name", "params", "body", "loc", "pastes")

    def __init__(self, name: str, params: list[str] | None, body: list[Token],
                 loc: Location) -> None:
        self.name = name
        self.params = params
        self.body = body
        self.loc = loc
        self.pastes = any(
            a.kind == "#" and b.kind == "#" and not b.ws for a, b in zip(body, body[1:], strict=False)
        )


def _join_text(toks: list[Token]) -> str:
    parts = []
    for k, t in enumerate(toks):
        if k and t.ws:
            parts.append(" ")
        parts.append(t.text)
    return "".join(parts)


class _CondFrame:
    __slots__ = ("parent", "taken", "else_seen", "loc")

    def __init__(self, parent: bool, taken: bool, loc: Location) -> None:
        self.parent = parent
        self.taken = taken
        self.else_seen = False
        self.loc = loc


class Preprocessor:
    """Expands one program.  ``files`` lists every file read, once each, in the
    order first read."""

    def __init__(self, include_dirs: tuple[str, ...] | list[str] = (),
                 defines: Mapping[str, object] | None = None) -> None:
        self.include_dirs = [str(d) for d in include_dirs]
        self.macros: dict[str, Macro] = {}
        self.files: list[str] = []
        self._once: set[str] = set()
        self._depth = 0
        for name, value in (defines or {}).items():
            text = "1" if value is None else str(value)
            loc = Location("<command line>", 0, 0)
            self.macros[name] = Macro(name, None, tokenize(text, "<command line>"), loc)

    # -- entry points -------------------------------------------------------

    def run_file(self, path: str) -> list[Token]:
        out: list[Token] = []
        eof = self._include(path, out)
        out.append(eof)
        return out

    def run_text(self, text: str, filename: str) -> list[Token]:
        out: list[Token] = []
        self.files.append(filename)
        toks = tokenize(text, filename)
        self._process(toks, filename, os.path.dirname(filename) or ".", out)
        out.append(eof_token(filename, text))
        return out

    # -- files --------------------------------------------------------------

    def _include(self, path: str, out: list[Token]) -> Token:
        if path not in self.files:
            self.files.append(path)
        toks, eof = _lex_file(path)
        self._process(toks, path, os.path.dirname(path) or ".", out)
        return eof

    def _resolve(self, name: str, quoted: bool, cur_dir: str) -> str | None:
        dirs = ([cur_dir] if quoted else []) + self.include_dirs + [P4INCLUDE_DIR]
        if os.path.isabs(name):
            return name if os.path.isfile(name) else None
        for d in dirs:
            cand = os.path.normpath(os.path.join(d, name))
            if os.path.isfile(cand):
                return cand
        return None

    # -- the main loop ------------------------------------------------------

    def _process(self, toks: list[Token], file: str, cur_dir: str, out: list[Token]) -> None:
        stack: list[_CondFrame] = []
        active = True
        macros = self.macros
        i = 0
        n = len(toks)
        while i < n:
            t = toks[i]
            kind = t.kind
            if kind == "#" and t.nl:
                j = i + 1
                while j < n and not toks[j].nl:
                    j += 1
                args = toks[i + 1:j]
                i = j
                if not args:
                    continue
                d = args[0]
                name = d.text
                rest = args[1:]
                if name in ("if", "ifdef", "ifndef"):
                    if not active:
                        cond = False
                    elif name == "if":
                        cond = self._eval_cond(d, rest)
                    else:
                        cond = (self._macro_name(d, rest) in macros) == (name == "ifdef")
                    stack.append(_CondFrame(active, cond, d.loc))
                    active = cond
                    continue
                if name in ("elif", "else", "endif"):
                    if not stack:
                        raise P4Error(d.loc, f"#{name} without matching #if")
                    top = stack[-1]
                    if name == "endif":
                        stack.pop()
                        active = top.parent
                        continue
                    if top.else_seen:
                        raise P4Error(d.loc, f"#{name} after #else")
                    if name == "else":
                        top.else_seen = True
                        active = top.parent and not top.taken
                    else:
                        active = top.parent and not top.taken and self._eval_cond(d, rest)
                    top.taken = top.taken or active
                    continue
                if not active:
                    continue
                if name == "define":
                    self._define(d, rest)
                elif name == "undef":
                    macros.pop(self._macro_name(d, rest), None)
                elif name == "include":
                    self._do_include(d, rest, cur_dir, out)
                elif name == "error":
                    raise P4Error(d.loc, f"#error {_join_text(rest)}".rstrip())
                elif name == "pragma":
                    if rest and rest[0].text == "once":
                        if file in self._once:
                            return
                        self._once.add(file)
                elif d.kind == "INT" or name in ("line", "warning", "ident"):
                    pass
                else:
                    raise P4Error(d.loc, f"unknown preprocessor directive '#{name}'")
                continue
            if not active:
                i += 1
                continue
            if kind == "ID" and t.value in macros:
                i = self._expand_into(toks, i, n, out, frozenset())
                continue
            out.append(t)
            i += 1
        if stack:
            raise P4Error(stack[-1].loc, "unterminated conditional directive (missing #endif)")

    # -- directives ---------------------------------------------------------

    @staticmethod
    def _macro_name(d: Token, rest: list[Token]) -> str:
        if not rest or not (rest[0].kind == "ID" or rest[0].text.isidentifier()):
            where = rest[0] if rest else d
            raise P4Error(where.loc, f"expected a macro name after '#{d.text}'")
        return rest[0].text

    def _define(self, d: Token, rest: list[Token]) -> None:
        name = self._macro_name(d, rest)
        params: list[str] | None = None
        body = rest[1:]
        if body and body[0].kind == "(" and not body[0].ws:
            params = []
            k = 1
            while True:
                if k >= len(body):
                    raise P4Error(body[0].loc, f"unterminated parameter list of macro '{name}'")
                p = body[k]
                if p.kind == ")" and not params:
                    k += 1
                    break
                if p.kind == "ID":
                    params.append(p.text)
                elif p.kind == "...":
                    params.append("__VA_ARGS__")
                else:
                    raise P4Error(p.loc, f"expected a parameter name in macro '{name}' "
                                         f"but found {p.describe()}")
                k += 1
                if k < len(body) and body[k].kind == ",":
                    k += 1
                    continue
                if k < len(body) and body[k].kind == ")":
                    k += 1
                    break
                where = body[k] if k < len(body) else p
                raise P4Error(where.loc, f"expected ',' or ')' in parameters of macro '{name}'")
            body = body[k:]
        self.macros[name] = Macro(name, params, body, rest[0].loc)

    def _do_include(self, d: Token, rest: list[Token], cur_dir: str, out: list[Token]) -> None:
        if rest and rest[0].kind == "ID" and rest[0].value in self.macros:
            tmp: list[Token] = []
            self._expand_into(rest, 0, len(rest), tmp, frozenset())
            rest = tmp + rest[1:]
        if rest and rest[0].kind == "STR":
            name, quoted = str(rest[0].value), True
        elif rest and rest[0].kind == "<":
            k = 1
            while k < len(rest) and rest[k].kind != ">":
                k += 1
            if k >= len(rest):
                raise P4Error(rest[0].loc, "expected '>' to end the #include file name")
            name, quoted = "".join(t.text for t in rest[1:k]), False
        else:
            raise P4Error(d.loc, "expected \"file\" or <file> after #include")
        path = self._resolve(name, quoted, cur_dir)
        if path is None:
            raise P4Error(d.loc, f"cannot find include file '{name}'")
        if path in self._once:
            return
        if self._depth >= _MAX_INCLUDE_DEPTH:
            raise P4Error(d.loc, f"#include nested too deeply (recursive include of '{name}'?)")
        self._depth += 1
        try:
            self._include(path, out)
        finally:
            self._depth -= 1

    # -- macro expansion ----------------------------------------------------

    def _expand_into(self, toks: list[Token], i: int, n: int, out: list[Token],
                     disabled: frozenset[str]) -> int:
        """Expand the macro named by ``toks[i]`` into ``out``; return the index
        after the invocation."""
        use = toks[i]
        m = self.macros[use.value]  # type: ignore[index]
        if m.params is None:
            body = [b.moved(use, use.ws if k == 0 else b.ws) for k, b in enumerate(m.body)]
            if m.pastes:
                body = self._paste(body)
            self._rescan(body, out, disabled | {m.name})
            return i + 1
        j = i + 1
        if j >= n or toks[j].kind != "(":
            out.append(use)
            return i + 1
        args: list[list[Token]] = [[]]
        depth = 0
        j += 1
        while True:
            if j >= n:
                raise P4Error(use.loc, f"unterminated argument list of macro '{m.name}'")
            a = toks[j]
            if a.kind == "#" and a.nl:  # a directive: the argument list never closed
                raise P4Error(use.loc, f"unterminated argument list of macro '{m.name}'")
            if a.kind == "(":
                depth += 1
            elif a.kind == ")":
                if depth == 0:
                    j += 1
                    break
                depth -= 1
            elif a.kind == "," and depth == 0 and not (
                    m.params and m.params[-1] == "__VA_ARGS__" and len(args) >= len(m.params)):
                args.append([])
                j += 1
                continue
            args[-1].append(a)
            j += 1
        if len(args) == 1 and not args[0] and not m.params:
            args = []
        if len(args) != len(m.params):
            raise P4Error(use.loc, f"macro '{m.name}' takes {len(m.params)} argument(s) "
                                   f"but {len(args)} were given")
        index = {p: k for k, p in enumerate(m.params)}
        body = m.body
        res: list[Token] = []
        k = 0
        nb = len(body)
        while k < nb:
            b = body[k]
            if b.kind == "#" and k + 1 < nb and body[k + 1].kind == "ID" \
                    and body[k + 1].value in index and not (k > 0 and body[k - 1].kind == "#"
                                                             and not b.ws) \
                    and not (k + 1 < nb and body[k + 1].kind == "#" and not body[k + 1].ws):
                arg = args[index[body[k + 1].value]]  # type: ignore[index]
                text = _join_text(arg)
                s = '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'
                res.append(Token("STR", text, s, use.file, use.line, use.col, use.nl, b.ws))
                k += 2
                continue
            if b.kind == "ID" and b.value in index:
                arg = args[index[b.value]]  # type: ignore[index]
                pasting = m.pastes and (
                    (k > 0 and body[k - 1].kind == "#")
                    or (k + 1 < nb and body[k + 1].kind == "#"))
                if pasting:
                    res.extend(arg)
                else:
                    tmp: list[Token] = []
                    self._rescan(arg, tmp, disabled)
                    res.extend(tmp)
                k += 1
                continue
            res.append(b.moved(use, use.ws if k == 0 else b.ws))
            k += 1
        if m.pastes:
            res = self._paste(res)
        self._rescan(res, out, disabled | {m.name})
        return j

    def _rescan(self, toks: list[Token], out: list[Token], disabled: frozenset[str]) -> None:
        macros = self.macros
        i = 0
        n = len(toks)
        while i < n:
            t = toks[i]
            if t.kind == "ID" and t.value in macros and t.value not in disabled:
                i = self._expand_into(toks, i, n, out, disabled)
            else:
                out.append(t)
                i += 1

    @staticmethod
    def _paste(toks: list[Token]) -> list[Token]:
        res: list[Token] = []
        k = 0
        while k < len(toks):
            t = toks[k]
            if (t.kind == "#" and k + 1 < len(toks) and toks[k + 1].kind == "#"
                    and not toks[k + 1].ws and res and k + 2 < len(toks)):
                left = res.pop()
                right = toks[k + 2]
                new = tokenize(left.text + right.text, left.file)
                if len(new) != 1:
                    raise P4Error(left.loc, f"pasting '{left.text}' and '{right.text}' "
                                            "does not give a valid token")
                res.append(new[0].moved(left, left.ws))
                k += 3
                continue
            res.append(t)
            k += 1
        return res

    # -- #if expressions ------------------------------------------------------

    def _eval_cond(self, d: Token, rest: list[Token]) -> bool:
        toks: list[Token] = []
        k = 0
        while k < len(rest):
            t = rest[k]
            if t.kind == "ID" and t.value == "defined":
                if k + 1 < len(rest) and rest[k + 1].kind == "(":
                    if not (k + 3 < len(rest) and rest[k + 3].kind == ")"):
                        raise P4Error(t.loc, "expected 'defined(NAME)'")
                    name = rest[k + 2].text
                    k += 4
                elif k + 1 < len(rest):
                    name = rest[k + 1].text
                    k += 2
                else:
                    raise P4Error(t.loc, "expected a macro name after 'defined'")
                toks.append(Token("INT", (1 if name in self.macros else 0, None, False, 10),
                                  "1", t.file, t.line, t.col, False, True))
                continue
            toks.append(t)
            k += 1
        expanded: list[Token] = []
        self._rescan(toks, expanded, frozenset())
        if not expanded:
            raise P4Error(d.loc, f"#{d.text} with no expression")
        ev = _CondEval(expanded, d)
        v = ev.expr()
        if ev.i < len(expanded):
            t = expanded[ev.i]
            raise P4Error(t.loc, f"unexpected {t.describe()} in #{d.text} expression")
        return v != 0


_BIN_PREC = {
    "||": 1, "&&": 2, "|": 3, "^": 4, "&": 5, "==": 6, "!=": 6,
    "<": 7, ">": 7, "<=": 7, ">=": 7, "<<": 8, ">>": 8,
    "+": 9, "-": 9, "*": 10, "/": 10, "%": 10,
}


class _CondEval:
    """Integer expressions of ``#if`` (C semantics; unknown names are 0)."""

    def __init__(self, toks: list[Token], d: Token) -> None:
        self.toks = toks
        self.i = 0
        self.d = d

    def _peek_op(self) -> str | None:
        if self.i >= len(self.toks):
            return None
        t = self.toks[self.i]
        if t.kind == ">" and self.i + 1 < len(self.toks) and self.toks[self.i + 1].kind == ">" \
                and not self.toks[self.i + 1].ws:
            return ">>"
        return t.kind

    def expr(self) -> int:
        c = self.binary(1)
        if self._peek_op() == "?":
            self.i += 1
            a = self.expr()
            self._expect(":")
            b = self.expr()
            return a if c else b
        return c

    def _expect(self, kind: str) -> None:
        if self.i >= len(self.toks) or self.toks[self.i].kind != kind:
            where = self.toks[self.i] if self.i < len(self.toks) else self.d
            raise P4Error(where.loc, f"expected '{kind}' in #{self.d.text} expression")
        self.i += 1

    def binary(self, min_prec: int) -> int:
        left = self.unary()
        while True:
            op = self._peek_op()
            prec = _BIN_PREC.get(op or "")
            if prec is None or prec < min_prec:
                return left
            self.i += 2 if op == ">>" else 1
            right = self.binary(prec + 1)
            left = self._apply(op or "", left, right)

    def _apply(self, op: str, a: int, b: int) -> int:
        if op in ("/", "%") and b == 0:
            raise P4Error(self.d.loc, f"division by zero in #{self.d.text} expression")
        r = {
            "||": lambda: int(bool(a) or bool(b)), "&&": lambda: int(bool(a) and bool(b)),
            "|": lambda: a | b, "^": lambda: a ^ b, "&": lambda: a & b,
            "==": lambda: int(a == b), "!=": lambda: int(a != b), "<": lambda: int(a < b),
            ">": lambda: int(a > b), "<=": lambda: int(a <= b), ">=": lambda: int(a >= b),
            "<<": lambda: a << b, ">>": lambda: a >> b, "+": lambda: a + b,
            "-": lambda: a - b, "*": lambda: a * b,
            "/": lambda: int(a / b), "%": lambda: a - int(a / b) * b,
        }[op]
        return r()

    def unary(self) -> int:
        if self.i >= len(self.toks):
            raise P4Error(self.d.loc, f"incomplete #{self.d.text} expression")
        t = self.toks[self.i]
        self.i += 1
        k = t.kind
        if k == "!":
            return int(not self.unary())
        if k == "-":
            return -self.unary()
        if k == "+":
            return self.unary()
        if k == "~":
            return ~self.unary()
        if k == "(":
            v = self.expr()
            self._expect(")")
            return v
        if k == "INT":
            return t.value[0]  # type: ignore[index]
        if k == "BADNUM":
            lit = parse_int(t.text.rstrip("uUlL"))
            if lit is None:
                raise P4Error(t.loc, f"invalid integer literal '{t.text}'")
            return lit[0]
        if k == "ID" or t.text.isidentifier():
            return 1 if t.text == "true" else 0
        raise P4Error(t.loc, f"unexpected {t.describe()} in #{self.d.text} expression")
