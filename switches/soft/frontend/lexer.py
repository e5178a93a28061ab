"""P4_16 lexer: source text -> list of tokens with exact source locations.

Design notes:
- ``>>`` is never produced: two ``>`` tokens are emitted and the second one
  has ``ws=False`` so the parser can tell ``a >> b`` (adjacent) from the end
  of nested type arguments ``bit<bit<8>>``.
- ``#`` is an ordinary token; the preprocessor recognises directives as a
  ``#`` token that starts a line (``nl=True``).  A backslash-newline is
  whitespace that does not end the line, so directives can be continued.
- Malformed integer literals become ``BADNUM`` tokens and stray characters
  ``BADCHAR`` tokens; they are reported by whoever consumes them, so that
  ``#include <1x.p4>`` and free-form annotation bodies still work.
"""

from __future__ import annotations

import re

from .source import Location, P4Error

# Words that can never be identifiers.  Soft keywords (apply, key, actions,
# entries, state, type, priority, list) are lexed as identifiers and
# recognised by the parser from context.
KEYWORDS = frozenset(
    """abstract action bit bool const control default else enum error exit
    extern false header header_union if in inout int match_kind out package
    parser return select string struct switch table this transition true
    tuple typedef value_set varbit void""".split()
)

_OPS = (
    "&&& |+|= |-|= |+| |-| <<= ... .. ++ << <= >= == != && || += -= *= /= %= &= |= ^= "
    "+ - * / % & | ^ ~ ! < > = ; , . : ? ( ) { } [ ] @ #"
).split()

_TOKEN_RE = re.compile(
    r"""
     ((?:[ \t\r\f\v\n]|\\\r?\n)+)            # 1 whitespace / line continuation
    |(//[^\n]*)                              # 2 line comment
    |(/\*.*?\*/)                             # 3 block comment
    |([A-Za-z_][A-Za-z0-9_]*)                # 4 word
    |([0-9][A-Za-z0-9_]*)                    # 5 number (validated below)
    |("(?:[^"\\]|\\.)*")                     # 6 string (may span lines)
    |("|/\*)                                 # 7 unterminated string / comment
    |("""
    + "|".join(re.escape(o) for o in sorted(_OPS, key=len, reverse=True))
    + r""")                                  # 8 operator
    """,
    re.X | re.S,
)

_INT_RE = re.compile(
    r"(?:([0-9]+)([ws]))?(0[xX][0-9a-fA-F_]+|0[oO][0-7_]+|0[dD][0-9_]+|0[bB][01_]+|[0-9][0-9_]*)\Z"
)
_BASES = {"x": 16, "X": 16, "o": 8, "O": 8, "d": 10, "D": 10, "b": 2, "B": 2}
_ESCAPES = {"n": "\n", "t": "\t", "r": "\r", '"': '"', "\\": "\\", "0": "\0"}


class Token:
    """One token.  ``kind`` is 'ID', 'INT', 'STR', 'BADNUM', 'BADCHAR', 'EOF', or the
    keyword / operator text itself.  ``value`` is the identifier name, the
    decoded string, or ``(value, width, signed, base)`` for integers.
    ``nl``: a newline precedes it in the same file (or it starts the file);
    ``ws``: whitespace or a comment precedes it."""

    __slots__ = ("kind", "value", "text", "file", "line", "col", "nl", "ws", "_loc")

    def __init__(self, kind: str, value: object, text: str, file: str, line: int, col: int,
                 nl: bool, ws: bool) -> None:
        self.kind = kind
        self.value = value
        self.text = text
        self.file = file
        self.line = line
        self.col = col
        self.nl = nl
        self.ws = ws
        self._loc: Location | None = None

    @property
    def loc(self) -> Location:
        loc = self._loc
        if loc is None:
            loc = self._loc = Location(self.file, self.line, self.col)
        return loc

    def moved(self, like: Token, ws: bool) -> Token:
        """A copy placed at ``like``'s location (macro expansion)."""
        t = Token(self.kind, self.value, self.text, like.file, like.line, like.col, like.nl, ws)
        t._loc = like._loc
        return t

    def describe(self) -> str:
        if self.kind == "EOF":
            return "end of file"
        return f"'{self.text}'"

    def __repr__(self) -> str:
        return f"Token({self.kind!r}, {self.text!r}, {self.file}:{self.line}:{self.col})"


def parse_int(text: str) -> tuple[int, int | None, bool, int] | None:
    """Decode a P4 integer literal (``8w0xFF``, ``4s3``, ``0b1_0``, ``42``)."""
    m = _INT_RE.match(text)
    if m is None:
        return None
    width_s, sign, digits = m.groups()
    digits = digits.replace("_", "")
    base = 10
    if len(digits) > 1 and digits[0] == "0" and digits[1] in _BASES:
        base = _BASES[digits[1]]
        digits = digits[2:]
        if not digits:
            return None
    value = int(digits, base)
    if width_s is None:
        return value, None, False, base
    return value, int(width_s), sign == "s", base


def _decode_string(body: str) -> str:
    if "\\" not in body:
        return body
    out = []
    i = 0
    n = len(body)
    while i < n:
        c = body[i]
        if c == "\\" and i + 1 < n:
            nxt = body[i + 1]
            if nxt == "\n":
                i += 2
                continue
            out.append(_ESCAPES.get(nxt, nxt))
            i += 2
        else:
            out.append(c)
            i += 1
    return "".join(out)


# Source files are decoded with "surrogateescape": a byte that is not UTF-8
# becomes one of these code points, so an error can name the byte.
_RAW_BYTE_RE = re.compile("[\udc80-\udcff]")


def describe_char(c: str) -> str:
    """An error message for a character no token can start with, naming its value."""
    o = ord(c)
    if 0xDC80 <= o <= 0xDCFF:
        return f"unexpected byte 0x{o - 0xDC00:02x} (not UTF-8 text)"
    if o < 0x80:
        return f"unexpected character '{c}' (0x{o:02x})" if c.isprintable() else \
            f"unexpected byte 0x{o:02x}"
    return f"unexpected character '{c}' (U+{o:04X}, bytes {c.encode().hex(' ')})"


def tokenize(text: str, file: str) -> list[Token]:
    """Split ``text`` (the contents of ``file``) into tokens, without an EOF token."""
    toks: list[Token] = []
    append = toks.append
    pos = 0
    n = len(text)
    line = 1
    line_start = 0
    nl = True
    ws = True
    match = _TOKEN_RE.match
    kw = KEYWORDS
    while pos < n:
        m = match(text, pos)
        if m is None:  # reported by the parser, unless inside an annotation body
            c = text[pos]
            append(Token("BADCHAR", c, c, file, line, pos - line_start + 1, nl, ws))
            nl = ws = False
            pos += 1
            continue
        g = m.lastindex or 0
        s = m.group(g)
        end = m.end()
        if g == 1:
            if "\n" in s:
                if s.count("\n") > s.count("\\\n") + s.count("\\\r\n"):
                    nl = True
                line += s.count("\n")
                line_start = pos + s.rfind("\n") + 1
            ws = True
            pos = end
            continue
        col = pos - line_start + 1
        if g == 8:
            append(Token(s, s, s, file, line, col, nl, ws))
        elif g == 4:
            append(Token(s if s in kw else "ID", s, s, file, line, col, nl, ws))
        elif g == 5:
            v = parse_int(s)
            append(Token("INT" if v is not None else "BADNUM", v, s, file, line, col, nl, ws))
        elif g == 2:
            ws = True
            pos = end
            continue
        elif g == 3:
            if "\n" in s:
                nl = True
                line += s.count("\n")
                line_start = pos + s.rfind("\n") + 1
            ws = True
            pos = end
            continue
        elif g == 6:
            bad = _RAW_BYTE_RE.search(s)
            if bad:  # a byte that is not UTF-8 text: reported, never carried along
                raise P4Error(Location(file, line, col + bad.start()), describe_char(bad.group()))
            append(Token("STR", _decode_string(s[1:-1]), s, file, line, col, nl, ws))
            if "\n" in s:  # escaped newline inside a string
                line += s.count("\n")
                line_start = pos + s.rfind("\n") + 1
        else:  # g == 7
            what = "string literal" if s == '"' else "comment"
            raise P4Error(Location(file, line, col), f"unterminated {what}")
        nl = False
        ws = False
        pos = end
    return toks


def eof_token(file: str, text: str) -> Token:
    """The EOF token for a file, placed just after its last character."""
    line = text.count("\n") + 1
    col = len(text) - (text.rfind("\n") + 1) + 1
    return Token("EOF", None, "", file, line, col, True, True)
