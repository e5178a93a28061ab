"""Run an STF command list against a target and judge it.

``run_commands(commands, target)`` executes ``switches.stf.syntax`` commands
in order on an ``StfTarget`` and returns the ``Verdict``'s ``StfResult``.
The engine does everything targets share: name resolution (exact, then
dot-suffix, then plain suffix, as p4c's runner matches names), key values
read by match kind (ternary and lpm values masked), priorities (an STF
priority: higher wins; entries without one rank below, earlier first),
action arguments checked against the action's parameters, entry ids for
``check_counter``. A target only sends, collects outputs and writes what the
engine resolved.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

from switches.stf.syntax import (
    ActionCall,
    Add,
    CheckCounter,
    CliCommand,
    Command,
    Expect,
    NoPacket,
    Packet,
    RemoveAll,
    SetDefault,
    StfError,
    StfSyntaxError,
    Wait,
    parse_int,
    parse_lpm,
    parse_range,
    parse_ternary,
)
from switches.stf.verdict import StfResult, Verdict

PRIO_GIVEN = 1 << 20  # rank of an entry with STF priority p: PRIO_GIVEN + p
PRIO_NONE = 1 << 19  # rank of the n-th entry without one: PRIO_NONE - n

if TYPE_CHECKING:  # (the data path may run on Python 3.9: no runtime union types)
    # exact -> int; lpm -> (value, prefix length); ternary/optional -> (value, mask);
    # range -> (lo, hi)
    Match = int | tuple[int, int]


@dataclass(frozen=True)
class KeyField:
    name: str
    kind: str  # exact, lpm, ternary, optional, range
    width: int


@dataclass(frozen=True)
class TableView:
    """What the engine needs to know of a table."""
    name: str
    keys: tuple[KeyField, ...]
    actions: tuple[str, ...]

    @property
    def needs_priority(self) -> bool:
        return any(k.kind in ("ternary", "optional", "range") for k in self.keys)


@dataclass(frozen=True)
class Entry:
    """A resolved ``add``: full names, one match per key (None where the STF
    line gives none: the key's wildcard), arguments in parameter order."""
    table: str
    matches: tuple[Match | None, ...]
    action: str
    args: tuple[tuple[str, int], ...]
    rank: int | None  # higher wins; None when the table has no priorities


class StfTarget(Protocol):
    """One switch under test, as the engine drives it."""

    # exceptions of the target's own API that mean "this command failed"
    command_errors: tuple[type[Exception], ...]

    def tables(self) -> Mapping[str, TableView]: ...
    def action_params(self, action: str) -> Sequence[tuple[str, int]]: ...
    def send(self, port: int, frame: bytes) -> None: ...
    def settle(self) -> None:
        """Return once everything sent so far has been processed."""
    def outputs(self) -> Mapping[int, Sequence[bytes]]: ...
    def add(self, entry: Entry) -> int:
        """Write the entry; returns its handle."""
    def set_default(self, table: str, action: str, args: tuple[tuple[str, int], ...]) -> None: ...
    def remove_all(self) -> None: ...
    def read_counter(self, name: str, index: int | tuple[str, int]) -> tuple[int, int]:
        """(packets, bytes) of counter ``name`` at ``index``, or of the
        direct counter of entry (table, handle)."""
    def cli(self, line: str) -> None: ...


def resolve_name(names: Sequence[str], wanted: str, what: str) -> str:
    """The one of ``names`` an STF file means by ``wanted``: exact, then
    dot-suffix, then plain suffix; StfError naming ``what`` otherwise."""
    if wanted in names:
        return wanted
    for cands in ([n for n in names if n.endswith("." + wanted)],
                  [n for n in names if n.endswith(wanted)]):
        if len(cands) == 1:
            return cands[0]
        if len(cands) > 1:
            raise StfError(f"{what} name '{wanted}' is ambiguous: {', '.join(sorted(cands))}")
    raise StfError(f"no {what} named '{wanted}'")


def key_index(table: TableView, name: str) -> int:
    """Index of the key an STF key name means: ``h$0`` is ``h[0]``, and
    ``h.$valid$`` / ``h.valid`` is ``h.isValid()``."""
    names = [k.name for k in table.keys]
    m = re.match(r"^(.*)\$([0-9]+)(.*)$", name)
    if m:
        name = f"{m.group(1)}[{m.group(2)}]{m.group(3)}"
    alts = [name]
    for suffix in (".$valid$", ".$valid", ".valid"):
        if name.endswith(suffix):
            base = name[:-len(suffix)]
            alts += [base + ".isValid()", base + ".$valid$"]
    for a in alts:
        if a in names:
            return names.index(a)
    for a in alts:
        cands = [i for i, n in enumerate(names) if n.endswith("." + a)]
        if len(cands) == 1:
            return cands[0]
    raise StfError(f"table {table.name} has no key field '{name}' "
                   f"(keys: {', '.join(names) or 'none'})")


def read_match(value: str, key: KeyField) -> Match:
    """An STF key value as the key's match kind reads it."""
    try:
        if key.kind == "lpm":
            return parse_lpm(value, key.width)
        if key.kind in ("ternary", "optional"):
            return parse_ternary(value, key.width)
        if key.kind == "range":
            return parse_range(value)
        return parse_int(value) & ((1 << key.width) - 1)
    except ValueError:
        raise StfError(f"'{value}' is not a {key.kind} value for key {key.name}") from None


def action_args(call: ActionCall, action: str,
                params: Sequence[tuple[str, int]]) -> tuple[tuple[str, int], ...]:
    given = dict(call.args)
    out = []
    for name, width in params:
        if name not in given:
            raise StfError(f"action {action} needs argument {name}")
        out.append((name, given.pop(name) & ((1 << width) - 1)))
    if given:
        raise StfError(f"action {action} has no parameter(s) {', '.join(given)}")
    return tuple(out)


class _Engine:
    def __init__(self, target: StfTarget) -> None:
        self.target = target
        self.verdict = Verdict()
        self.entry_ids: dict[str, tuple[str, int]] = {}
        self.unprioritized = 0

    def table(self, name: str) -> TableView:
        tables = self.target.tables()
        return tables[resolve_name(list(tables), name, "table")]

    def action(self, table: TableView, call: ActionCall) -> tuple[str, tuple[tuple[str, int], ...]]:
        action = resolve_name(list(table.actions), call.name, "action")
        return action, action_args(call, action, self.target.action_params(action))

    def resolve_add(self, cmd: Add) -> Entry:
        table = self.table(cmd.table)
        matches: list[Match | None] = [None] * len(table.keys)
        for km in cmd.keys:
            i = key_index(table, km.field)
            matches[i] = read_match(km.value, table.keys[i])
        action, args = self.action(table, cmd.action)
        rank = None
        if table.needs_priority:
            if cmd.priority is not None:
                rank = PRIO_GIVEN + cmd.priority
            else:
                self.unprioritized += 1
                rank = PRIO_NONE - self.unprioritized
        return Entry(table.name, tuple(matches), action, args, rank)

    def check_counter(self, cmd: CheckCounter) -> None:
        index: int | tuple[str, int]
        if isinstance(cmd.index, str):
            if cmd.index not in self.entry_ids:
                raise StfError(f"no entry has id {cmd.index}")
            index = self.entry_ids[cmd.index]
        else:
            index = cmd.index
        packets, nbytes = self.target.read_counter(cmd.counter, index)
        got = packets if cmd.kind == "packets" else nbytes
        want = cmd.value
        ok = {"==": got == want, "!=": got != want, "<=": got <= want, ">=": got >= want,
              "<": got < want, ">": got > want}[cmd.op]
        if not ok:
            shown = f"${cmd.index}" if isinstance(cmd.index, str) else cmd.index
            self.verdict.errors.append(f"check_counter {cmd.counter}({shown}): {cmd.kind} is "
                                       f"{got}, expected {cmd.op} {want}")

    def execute(self, cmd: Command) -> None:
        t = self.target
        if isinstance(cmd, Packet):
            self.verdict.packets += 1
            t.send(cmd.port, cmd.data)
        elif isinstance(cmd, Expect):
            self.verdict.expect(cmd)
        elif isinstance(cmd, NoPacket):
            t.settle()
            self.verdict.check_no_packet(cmd, t.outputs())
        elif isinstance(cmd, Wait):
            t.settle()
        elif isinstance(cmd, Add):
            entry = self.resolve_add(cmd)
            handle = t.add(entry)
            if cmd.entry_id is not None:
                self.entry_ids[cmd.entry_id] = (entry.table, handle)
        elif isinstance(cmd, SetDefault):
            table = self.table(cmd.table)
            action, args = self.action(table, cmd.action)
            t.set_default(table.name, action, args)
        elif isinstance(cmd, RemoveAll):
            t.remove_all()
        elif isinstance(cmd, CheckCounter):
            t.settle()
            self.check_counter(cmd)
        elif isinstance(cmd, CliCommand):
            t.cli(cmd.text)
        else:  # pragma: no cover - every command class is handled above
            raise StfError(f"unhandled command {type(cmd).__name__}")


def check_tables(commands: Sequence[Command], target: StfTarget,
                 filename: str = "<stf>") -> None:
    """Raise StfSyntaxError (``file:line: unknown table NAME``) for the first
    ``add`` or ``setdefault`` whose table the program does not have (or names
    ambiguously): the file does not fit the program, so none of it runs."""
    names = list(target.tables())
    for cmd in commands:
        if not isinstance(cmd, (Add, SetDefault)):
            continue
        if not any(n.endswith(cmd.table) for n in names):
            raise StfSyntaxError(filename, cmd.line, f"unknown table {cmd.table} (tables: "
                                                     f"{', '.join(sorted(names)) or 'none'})")
        try:
            resolve_name(names, cmd.table, "table")
        except StfError as e:   # ambiguous
            raise StfSyntaxError(filename, cmd.line, str(e)) from None


def run_commands(commands: Sequence[Command], target: StfTarget,
                 filename: str = "<stf>") -> StfResult:
    """Execute ``commands`` on ``target``; a command that fails is reported
    against its line and the run goes on. A table the program does not have
    stops the run before any command (StfSyntaxError naming ``filename``
    and the line: see ``check_tables``)."""
    check_tables(commands, target, filename)
    engine = _Engine(target)
    errors: tuple[type[Exception], ...] = (StfError, *target.command_errors)
    for cmd in commands:
        try:
            engine.execute(cmd)
        except errors as e:
            engine.verdict.error(cmd, e)
    target.settle()
    return engine.verdict.result(target.outputs())
