"""STF files as a typed command list.

``parse_stf(text, filename)`` turns an STF file into one ``Command`` per
non-blank line, or raises ``StfSyntaxError`` (``file:line: message``) for the
first line that is not STF. The grammar is p4c's (tools/stf/stf_parser.py):

- ``packet <port> <hex>``: send a frame (hex may contain spaces);
- ``expect <port> <hex>[$]``: the port's next output; ``*`` is a don't-care
  nibble, a trailing ``$`` demands the exact length (else the output may be
  longer); ``expect <port>`` alone: one packet of any content on the port;
- ``no_packet``: the packets sent so far produce no output beyond the
  expects before this line;
- ``add <table> [<prio>] <key>:<value> ... <action>(<param>:<value>, ...) [= <id>]``,
  ``setdefault <table> <action>(...)``, ``remove all``, ``wait``,
  ``check_counter <name>(<index or $id>) [packets|bytes <op> <value>]``;
- the simple_switch_CLI verbs (``mc_*``, ``mirroring_*``, ``register_*``,
  ``counter_*``, ``meter_*``, ``act_prof_*``, ...): passed to the target as
  written.

Key values are kept as written; what they mean depends on the key's match
kind, which only the target knows (``switches.stf.engine`` reads them).
"""

from __future__ import annotations

import re
from dataclasses import dataclass


class StfError(Exception):
    """An STF command could not be carried out (reported against its line)."""


class StfSyntaxError(StfError):
    """A line is not STF, or names a table the program does not have;
    ``str()`` is ``file:line: message``."""

    def __init__(self, filename: str, line: int, message: str) -> None:
        super().__init__(f"{filename}:{line}: {message}")
        self.filename = filename
        self.line = line
        self.message = message


@dataclass(frozen=True)
class Command:
    line: int  # 1-based line number in the STF file
    text: str  # the line without its comment


@dataclass(frozen=True)
class Packet(Command):
    port: int
    data: bytes


@dataclass(frozen=True)
class Expect(Command):
    port: int
    pattern: str | None  # upper-case hex nibbles and '*', optional trailing '$'; None: any


@dataclass(frozen=True)
class NoPacket(Command):
    pass


@dataclass(frozen=True)
class KeyMatch:
    field: str
    value: str  # as written: meaning depends on the key's match kind


@dataclass(frozen=True)
class ActionCall:
    name: str
    args: tuple[tuple[str, int], ...]


@dataclass(frozen=True)
class Add(Command):
    table: str
    priority: int | None  # STF priority: higher wins
    keys: tuple[KeyMatch, ...]
    action: ActionCall
    entry_id: str | None  # ``= <id>``: name for check_counter $<id>


@dataclass(frozen=True)
class SetDefault(Command):
    table: str
    action: ActionCall


@dataclass(frozen=True)
class RemoveAll(Command):
    pass


@dataclass(frozen=True)
class Wait(Command):
    pass


@dataclass(frozen=True)
class CheckCounter(Command):
    counter: str
    index: int | str  # a number, or the id of an ``add ... = <id>`` entry
    kind: str  # 'packets' or 'bytes'
    op: str  # ==, !=, <, <=, >, >=
    value: int


@dataclass(frozen=True)
class CliCommand(Command):
    """A simple_switch_CLI command, passed to the target unchanged."""


# simple_switch_CLI's verbs (BMv2 runtime_CLI + simple_switch_CLI), and the
# soft target's two extensions: what an STF file may pass through.
CLI_VERBS = frozenset("""
act_prof_add_member_to_group act_prof_create_group act_prof_create_member
act_prof_delete_group act_prof_delete_member act_prof_dump act_prof_dump_group
act_prof_dump_member act_prof_modify_member act_prof_remove_member_from_group
counter_read counter_reset counter_write get_time_elapsed get_time_since_epoch
mc_dump mc_mgrp_create mc_mgrp_destroy mc_node_associate mc_node_create
mc_node_destroy mc_node_dissociate mc_node_update mc_set_lag_membership
meter_array_set_rates meter_get_rates meter_set_rates mirroring_add
mirroring_add_mc mirroring_delete mirroring_get register_read register_reset
register_write reset_state set_crc16_parameters set_crc32_parameters
set_queue_depth set_queue_rate show_actions show_ports show_tables
table_add table_clear table_delete table_dump table_dump_entry
table_dump_entry_from_key table_dump_group table_dump_member
table_indirect_add table_indirect_add_member_to_group
table_indirect_add_with_group table_indirect_create_group
table_indirect_create_member table_indirect_delete table_indirect_delete_group
table_indirect_delete_member table_indirect_modify_member
table_indirect_remove_member_from_group table_indirect_reset_default
table_indirect_set_default table_indirect_set_default_with_group table_info
table_modify table_num_entries table_reset_default table_set_default
table_show_actions set_port_rate_bps set_priority_weights
""".split())

_ACTION_RE = re.compile(r"([A-Za-z_$.\[\]0-9\"]+)\s*\((.*)\)\s*(?:=\s*(\S+))?\s*$")
_COUNTER_RE = re.compile(r"\s*([^\s(]+)\s*\(\s*([^)\s]+)\s*\)\s*(?:(packets|bytes)\s*"
                         r"(==|!=|<=|>=|<|>)\s*(\S+))?\s*", re.IGNORECASE)
_HEX_RE = re.compile(r"[0-9A-F*]*")


def parse_int(tok: str) -> int:
    """An STF number: ``0x``/``0b``/``0o`` prefixed, else decimal (a leading
    zero does not make it octal). Raises ValueError."""
    tok = tok.strip()
    if tok[:2].lower() in ("0x", "0b", "0o"):
        return int(tok, 0)
    return int(tok, 10)


def parse_ternary(tok: str, width: int) -> tuple[int, int]:
    """A ternary value as (value, mask), value masked: ``v&&&m``, or a
    prefixed number whose ``*`` digits are don't-care; a plain decimal is
    exact over ``width`` bits. Raises ValueError."""
    t = tok.lower()
    if "&&&" in t:
        vs, ms = t.split("&&&", 1)
        v, m = parse_int(vs), parse_int(ms)
        return v & m, m
    for prefix, bits, base in (("0x", 4, 16), ("0b", 1, 2), ("0o", 3, 8)):
        if t.startswith(prefix):
            v = m = 0
            for d in t[2:]:
                v <<= bits
                m <<= bits
                if d != "*":
                    v |= int(d, base)
                    m |= (1 << bits) - 1
            full = (1 << width) - 1
            return v & m & full, m & full
    return int(t, 10), (1 << width) - 1


def parse_lpm(tok: str, width: int) -> tuple[int, int]:
    """An lpm value as (value, prefix length), value masked to the prefix:
    ``v/len``, or a prefixed number whose trailing ``*`` digits are outside
    the prefix; a plain decimal is exact. Raises ValueError."""
    if "/" in tok:
        vs, ps = tok.split("/", 1)
        v, plen = parse_int(vs), int(ps, 0)
    else:
        t = tok.lower()
        bits = {"0x": 4, "0b": 1, "0o": 3}.get(t[:2])
        if bits is None:
            return int(t, 10), width
        digits = t[2:]
        plen = min((len(digits) - digits.count("*")) * bits, width)
        v = int(digits.replace("*", "0"), {4: 16, 1: 2, 3: 8}[bits])
    if not 0 <= plen <= width:
        raise ValueError(f"prefix length {plen} out of range for {width} bits")
    mask = ((1 << plen) - 1) << (width - plen) if plen else 0
    return v & mask, plen


def parse_range(tok: str) -> tuple[int, int]:
    """A range value ``lo->hi``, or one number (lo == hi). Raises ValueError."""
    lo, sep, hi = tok.partition("->")
    return parse_int(lo), parse_int(hi if sep else lo)


def _action_call(text: str, what: str, err: type[Exception]) -> tuple[str, ActionCall, str | None]:
    """(text before the call, the call, ``= id``) of an add/setdefault line."""
    m = _ACTION_RE.search(text)
    if not m:
        raise err(f"{what} needs an action call <action>(<param>:<value>, ...)")
    args = []
    for part in [p for p in m.group(2).split(",") if p.strip()]:
        name, sep, val = part.partition(":")
        if not sep:
            raise err(f"action argument '{part.strip()}' is not <name>:<value>")
        try:
            args.append((name.strip(), parse_int(val)))
        except ValueError:
            raise err(f"action argument '{part.strip()}': '{val.strip()}' is not a number"
                      ) from None
    return text[:m.start()], ActionCall(m.group(1).strip('"'), tuple(args)), m.group(3)


class _Fail(Exception):
    pass


def _port(tok: str) -> int:
    try:
        return int(tok, 0)
    except ValueError:
        raise _Fail(f"port '{tok}' is not a number") from None


def parse_line(line: int, text: str) -> Command | None:
    """One STF line (without its comment) as a command; None if blank.
    Raises _Fail with the reason when it is not STF."""
    text = text.strip()
    if not text:
        return None
    verb, _, rest = text.partition(" ")
    v = verb.lower()
    rest = rest.strip()
    if v == "packet":
        port_s, _, data = rest.partition(" ")
        if not port_s:
            raise _Fail("packet needs a port and the frame's bytes in hex")
        port = _port(port_s)
        try:
            frame = bytes.fromhex("".join(data.split()))
        except ValueError:
            raise _Fail(f"packet data is not hex: '{data.strip()}'") from None
        return Packet(line, text, port, frame)
    if v == "expect":
        port_s, _, data = rest.partition(" ")
        if not port_s:
            raise _Fail("expect needs a port")
        port = _port(port_s)
        pattern = "".join(data.split()).upper()
        exact = pattern.endswith("$")
        body = pattern[:-1] if exact else pattern
        if not _HEX_RE.fullmatch(body):
            bad = next(c for c in body if not re.match(r"[0-9A-F*]", c))
            raise _Fail(f"expect data has '{bad}': only hex digits, '*' and a final '$'")
        if exact and not body:
            raise _Fail("expect data '$' without bytes")
        return Expect(line, text, port, pattern or None)
    if v == "no_packet":
        if rest:
            raise _Fail("no_packet takes no arguments")
        return NoPacket(line, text)
    if v == "wait":
        if rest:
            raise _Fail("wait takes no arguments")
        return Wait(line, text)
    if v == "remove":
        if rest.lower() != "all":
            raise _Fail("remove takes 'all' (removing one entry is not supported)")
        return RemoveAll(line, text)
    if v == "add":
        head, action, entry_id = _action_call(rest, "add", _Fail)
        words = head.split()
        if not words:
            raise _Fail("add needs a table name")
        table, toks = words[0].strip('"'), words[1:]
        prio = None
        if toks and re.fullmatch(r"[0-9]+", toks[0]):
            prio = int(toks[0])
            toks = toks[1:]
        keys = []
        for tok in toks:
            name, sep, val = tok.rpartition(":")
            if not sep or not name or not val:
                raise _Fail(f"key '{tok}' is not <field>:<value>")
            keys.append(KeyMatch(name.strip('"'), val))
        return Add(line, text, table, prio, tuple(keys), action, entry_id)
    if v == "setdefault":
        head, action, entry_id = _action_call(rest, "setdefault", _Fail)
        words = head.split()
        if len(words) != 1 or entry_id is not None:
            raise _Fail("setdefault <table> <action>(<param>:<value>, ...)")
        return SetDefault(line, text, words[0].strip('"'), action)
    if v == "check_counter":
        m = _COUNTER_RE.fullmatch(rest)
        if not m:
            raise _Fail("check_counter <name>(<index or $id>) [packets|bytes <op> <value>]")
        name, idx_s, kind, op, val_s = m.groups()
        try:
            index: int | str = idx_s[1:] if idx_s.startswith("$") else parse_int(idx_s)
            value = parse_int(val_s) if val_s is not None else 0
        except ValueError as e:
            raise _Fail(f"check_counter: {e}") from None
        return CheckCounter(line, text, name, index, (kind or "packets").lower(), op or "==",
                            value)
    if v in CLI_VERBS:
        return CliCommand(line, text)
    raise _Fail(f"unknown command '{verb}'")


def parse_stf(text: str, filename: str = "<stf>") -> list[Command]:
    """Every command of an STF file, in order; raises StfSyntaxError at the
    first line that is not STF."""
    out: list[Command] = []
    for n, raw in enumerate(text.splitlines(), 1):
        try:
            cmd = parse_line(n, raw.split("#", 1)[0])
        except _Fail as e:
            raise StfSyntaxError(filename, n, str(e)) from None
        if cmd is not None:
            out.append(cmd)
    return out


def stf_ports(commands: list[Command]) -> list[int]:
    """The ports a test sends to or expects on."""
    return sorted({c.port for c in commands if isinstance(c, (Packet, Expect))})
