"""simple_switch_CLI verbs behind the controller API (:mod:`switches.controller.api`).

The table calls become ``table_add``/``table_modify``/... lines, with keys and
action parameters read from ``show_tables`` and ``table_show_actions``;
entries are found again by ``table_dump``. Priorities are turned into
simple_switch_CLI's smaller-wins numbers. Action profile members and groups
keep the caller's ids, mapped to the switch's handles here.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TypedDict

from switches.controller.api import (
    MAX_PRIO,
    Controller,
    ControllerError,
    KeyMatch,
    Match,
    Params,
    TableEntry,
    Value,
    lpm,
    resolve,
    to_int,
)


@dataclass
class _CliTable:
    name: str
    keys: list[tuple[str, str, int]]  # (name, kind, width)
    actions: dict[str, list[tuple[str, int]]] = field(default_factory=dict)

    @property
    def needs_priority(self) -> bool:
        return any(k in ("ternary", "range", "optional") for _, k, _ in self.keys)


class _DumpedKeys(TypedDict):
    handle: int
    match: list[KeyMatch]
    priority: int | None


# total=False rather than NotRequired: the simulator's PyPy is Python 3.9
class _DumpedEntry(_DumpedKeys, total=False):
    """One entry of a ``table_dump`` reply (an entry may name no action yet)."""

    action: str
    args: list[int]


class CliController(Controller):
    """simple_switch_CLI verbs sent through ``execute(line) -> str``: a running
    switch's CLI connection (:meth:`switches.targets.Target.cli_controller`
    opens one) or an in-process control plane.

    ``extensions`` are the verbs beyond simple_switch_CLI's that the switch
    takes (its target's); :meth:`set_port_rate_bps` and
    :meth:`set_priority_weights` are refused without theirs. ``on_close``
    releases the connection."""

    def __init__(self, execute: Callable[[str], str], *,
                 extensions: frozenset[str] = frozenset(),
                 on_close: Callable[[], None] | None = None) -> None:
        self._execute = execute
        self.extensions = extensions
        self._on_close = on_close
        self._tables: dict[str, _CliTable] | None = None
        # action profile -> the caller's member/group ids -> the switch's handles
        self._members: dict[str, dict[int, int]] = {}
        self._groups: dict[str, dict[int, tuple[int, list[int]]]] = {}

    def execute(self, line: str) -> str:
        """One simple_switch_CLI command; raises ControllerError on an error reply."""
        try:
            return self._execute(line)
        except ControllerError:
            raise
        except Exception as e:
            # the switch's reply to a rejected command (SwitchError over the
            # control port, CommandError in-process)
            if type(e).__name__ in ("SwitchError", "CommandError"):
                raise ControllerError(str(getattr(e, "message", e)), "CLI") from None
            raise

    # -- schema -------------------------------------------------------------
    def _schema(self) -> dict[str, _CliTable]:
        if self._tables is None:
            tables: dict[str, _CliTable] = {}
            for line in self.execute("show_tables").splitlines():
                m = re.match(r"(\S+)\s+\[.*mk=(.*)\]\s*$", line)
                if not m:
                    continue
                keys = [(n, k, int(w)) for n, k, w in
                        re.findall(r"([^,\s(]+)\((\w+),\s*(\d+)\)", m.group(2))]
                tables[m.group(1)] = _CliTable(m.group(1), keys)
            self._tables = tables
        return self._tables

    def _table(self, name: str) -> _CliTable:
        tables = self._schema()
        t = tables[resolve(list(tables), name, "table")]
        if not t.actions:
            for line in self.execute(f"table_show_actions {t.name}").splitlines():
                m = re.match(r"(\S+)\s+\[(.*)\]\s*$", line)
                if m:
                    t.actions[m.group(1)] = [(n, int(w)) for n, w in
                                             re.findall(r"([^,\s(]+)\((\d+)\)", m.group(2))]
        return t

    @staticmethod
    def _key_tokens(t: _CliTable, match: Match) -> list[str]:
        given = {resolve([k for k, _, _ in t.keys], k, "key"): v for k, v in match.items()}
        toks = []
        for name, kind, width in t.keys:
            v = given.get(name)
            full = (1 << width) - 1
            if kind == "exact":
                if v is None:
                    raise ControllerError(f"exact key {name} needs a value")
                toks.append(str(to_int(v, width)))
            elif kind == "lpm":
                val, plen = (0, 0) if v is None else lpm(v)
                toks.append(f"{to_int(val, width)}/{plen}")
            elif kind in ("ternary", "optional"):
                val, mask = (0, 0) if v is None else (v if isinstance(v, tuple) else (v, full))
                toks.append(f"{to_int(val, width)}&&&{to_int(mask, width)}")
            elif kind == "range":
                lo, hi = (0, full) if v is None else (v if isinstance(v, tuple) else (v, v))
                toks.append(f"{to_int(lo, width)}->{to_int(hi, width)}")
            else:
                toks.append("0")
        return toks

    def _action(self, t: _CliTable, action: str, params: Params | None) -> tuple[str, list[str]]:
        aname = resolve(list(t.actions), action, "action")
        plist = t.actions[aname]
        given = dict(params or {})
        vals = []
        for pname, width in plist:
            if pname not in given:
                raise ControllerError(f"action {aname} needs parameter {pname}")
            vals.append(str(to_int(given.pop(pname), width)))
        if given:
            raise ControllerError(f"action {aname} has no parameter(s) {', '.join(given)}")
        return aname, vals

    # -- tables --------------------------------------------------------------
    def table_add(self, table: str, match: Match, action: str,
                  params: Params | None = None, priority: int | None = None) -> None:
        t = self._table(table)
        aname, vals = self._action(t, action, params)
        line = f"table_add {t.name} {aname} {' '.join(self._key_tokens(t, match))} => {' '.join(vals)}"
        if t.needs_priority:
            if priority is None:
                raise ControllerError(f"table {t.name} needs a priority")
            line += f" {MAX_PRIO - priority}"
        self.execute(line.strip())

    def _handle(self, t: _CliTable, match: Match, priority: int | None) -> int:
        want = self._parse_keys(t, self._key_tokens(t, match))
        for e in self._dump(t):
            if e["match"] == want and (not t.needs_priority or priority is None
                                       or e["priority"] == MAX_PRIO - priority):
                return int(e["handle"])
        raise ControllerError(f"no entry with that key in {t.name}", "NOT_FOUND")

    def table_modify(self, table: str, match: Match, action: str,
                     params: Params | None = None, priority: int | None = None) -> None:
        t = self._table(table)
        aname, vals = self._action(t, action, params)
        h = self._handle(t, match, priority)
        self.execute(f"table_modify {t.name} {aname} {h} {' '.join(vals)}".strip())

    def action_params(self, table: str, action: str) -> tuple[str, list[str]]:
        t = self._table(table)
        aname = resolve(list(t.actions), action, "action")
        return aname, [p for p, _ in t.actions[aname]]

    def table_set_default(self, table: str, action: str,
                          params: Params | None = None) -> None:
        t = self._table(table)
        aname, vals = self._action(t, action, params)
        self.execute(f"table_set_default {t.name} {aname} {' '.join(vals)}".strip())

    def table_delete(self, table: str, match: Match, priority: int | None = None) -> None:
        t = self._table(table)
        self.execute(f"table_delete {t.name} {self._handle(t, match, priority)}")

    # -- action profiles ---------------------------------------------------------
    def _profile_action(self, action: str, params: Params | None) -> tuple[str, list[str]]:
        """An action of any table (a profile's actions are its tables')."""
        for t in self._schema().values():
            tt = self._table(t.name)
            try:
                resolve(list(tt.actions), action, "action")
            except ControllerError:
                continue
            return self._action(tt, action, params)
        raise ControllerError(f"no action named {action!r}")

    @staticmethod
    def _created(reply: str, what: str) -> int:
        m = re.search(rf"{what} has been created with handle (\d+)", reply)
        if not m:
            raise ControllerError(f"unexpected reply creating a {what.lower()}: {reply!r}")
        return int(m.group(1))

    def profile_member_set(self, profile: str, member: int, action: str,
                           params: Params | None = None) -> None:
        aname, vals = self._profile_action(action, params)
        members = self._members.setdefault(profile, {})
        if member in members:
            self.execute(f"act_prof_modify_member {profile} {aname} {members[member]} "
                         f"{' '.join(vals)}".strip())
            return
        reply = self.execute(f"act_prof_create_member {profile} {aname} {' '.join(vals)}".strip())
        members[member] = self._created(reply, "Member")

    def _member_handle(self, profile: str, member: int) -> int:
        h = self._members.get(profile, {}).get(member)
        if h is None:
            raise ControllerError(f"no member {member} in {profile} (profile_member_set "
                                  "it first)", "NOT_FOUND")
        return h

    def profile_member_delete(self, profile: str, member: int) -> None:
        self.execute(f"act_prof_delete_member {profile} {self._member_handle(profile, member)}")
        del self._members[profile][member]

    def profile_group_set(self, profile: str, group: int, members: list[int]) -> None:
        want = [self._member_handle(profile, m) for m in members]
        groups = self._groups.setdefault(profile, {})
        if group in groups:
            gh, have = groups[group]
        else:
            reply = self.execute(f"act_prof_create_group {profile}")
            gh, have = self._created(reply, "Group"), []
            groups[group] = (gh, have)
        for h in [h for h in want if h not in have]:
            self.execute(f"act_prof_add_member_to_group {profile} {h} {gh}")
        for h in [h for h in have if h not in want]:
            self.execute(f"act_prof_remove_member_from_group {profile} {h} {gh}")
        groups[group] = (gh, list(dict.fromkeys(want)))

    def profile_group_delete(self, profile: str, group: int) -> None:
        g = self._groups.get(profile, {}).get(group)
        if g is None:
            raise ControllerError(f"no group {group} in {profile}", "NOT_FOUND")
        self.execute(f"act_prof_delete_group {profile} {g[0]}")
        del self._groups[profile][group]

    def table_add_indirect(self, table: str, match: Match, *,
                           member: int | None = None, group: int | None = None,
                           priority: int | None = None) -> None:
        t = self._table(table)
        if (member is None) == (group is None):
            raise ControllerError("table_add_indirect takes one member or one group")
        prof = self._profile_of(t.name)
        keys = " ".join(self._key_tokens(t, match))
        if group is not None:
            g = self._groups.get(prof, {}).get(group)
            if g is None:
                raise ControllerError(f"no group {group} in {prof}", "NOT_FOUND")
            line = f"table_indirect_add_with_group {t.name} {keys} => {g[0]}"
        else:
            line = f"table_indirect_add {t.name} {keys} => {self._member_handle(prof, member or 0)}"
        if t.needs_priority:
            if priority is None:
                raise ControllerError(f"table {t.name} needs a priority")
            line += f" {MAX_PRIO - priority}"
        self.execute(line)

    def _profile_of(self, table: str) -> str:
        for line in self.execute("show_tables").splitlines():
            m = re.match(r"(\S+)\s+\[implementation=([^,]*),", line)
            if m and m.group(1) == table and m.group(2) != "None":
                # the caller's profile name may be a suffix: find the key used
                prof = m.group(2)
                for known in list(self._members) + list(self._groups):
                    if known == prof or prof.endswith("." + known):
                        return known
                return prof
        raise ControllerError(f"table {table} has no action profile")

    def _parse_keys(self, t: _CliTable, toks: list[str]) -> list[KeyMatch]:
        out: list[KeyMatch] = []
        for tok, (_, kind, width) in zip(toks, t.keys, strict=True):
            if kind == "lpm":
                v, p = tok.split("/")
                plen = int(p)
                mask = ((1 << plen) - 1) << (width - plen) if plen else 0
                out.append((int(v, 0) & mask, plen))
            elif kind in ("ternary", "optional"):
                v, m = tok.split("&&&")
                out.append((int(v, 0) & int(m, 0), int(m, 0)))
            elif kind == "range":
                lo, hi = tok.split("->")
                out.append((int(lo, 0), int(hi, 0)))
            else:
                out.append(int(tok, 0))
        return out

    def _dump(self, t: _CliTable) -> list[_DumpedEntry]:
        entries: list[_DumpedEntry] = []
        cur: _DumpedEntry | None = None
        for line in self.execute(f"table_dump {t.name}").splitlines():
            line = line.strip()
            m = re.match(r"Dumping entry (0x[0-9a-fA-F]+|\d+)", line)
            if m:
                cur = {"handle": int(m.group(1), 0), "match": [], "priority": None}
                entries.append(cur)
                continue
            if cur is None:
                continue
            m = re.match(r"\*\s*\S+\s*:\s*(EXACT|LPM|TERNARY|RANGE|VALID)\s+(.*)$", line)
            if m:
                kind, val = m.group(1), m.group(2).strip()
                if kind == "LPM":
                    v, p = val.split("/")
                    cur["match"].append((int(v, 16), int(p)))
                elif kind == "TERNARY":
                    v, msk = (x.strip() for x in val.split("&&&"))
                    cur["match"].append((int(v, 16), int(msk, 16)))
                elif kind == "RANGE":
                    lo, hi = (x.strip() for x in val.split("->"))
                    cur["match"].append((int(lo, 16), int(hi, 16)))
                else:
                    cur["match"].append(int(val, 16))
                continue
            m = re.match(r"Priority:\s*(\d+)", line)
            if m:
                cur["priority"] = int(m.group(1))
                continue
            m = re.match(r"Action entry:\s*(\S+)\s*-\s*(.*)$", line)
            if m:
                cur["action"] = m.group(1)
                args = [a.strip() for a in m.group(2).split(",") if a.strip()]
                cur["args"] = [int(a, 16) for a in args]
                cur = None
        return entries

    def table_entries(self, table: str) -> list[TableEntry]:
        t = self._table(table)
        out = []
        for e in self._dump(t):
            match: dict[str, KeyMatch] = {}
            for (name, kind, width), m in zip(t.keys, e["match"], strict=False):
                full = (1 << width) - 1
                # lpm, ternary (optional) and range keys are dumped as pairs
                if isinstance(m, tuple) and (
                        (kind == "lpm" and m[1] == 0) or (kind in ("ternary", "optional")
                                                          and m[1] == 0)
                        or (kind == "range" and m == (0, full))):
                    continue
                match[name] = m
            action = e.get("action", "")
            pnames = [p for p, _ in t.actions.get(action, [])]
            prio = e["priority"]
            out.append(TableEntry(t.name, match, action, dict(zip(pnames, e.get("args", []),
                                                                   strict=False)),
                                  MAX_PRIO - prio if t.needs_priority and prio is not None
                                  else None))
        return out

    # -- PRE -----------------------------------------------------------------
    def mc_group_set(self, group: int, ports: list[int], rid: int = 0) -> None:
        dump = self.execute("mc_dump")
        # drop the group's nodes, then the group, and rebuild it
        in_group = False
        for line in dump.splitlines():
            line = line.strip()
            m = re.match(r"mgrp\((\d+)\)", line)
            if m:
                in_group = int(m.group(1)) == group
                continue
            m = re.search(r"L1h=(\d+)", line)
            if m and in_group:
                self.execute(f"mc_node_dissociate {group} {m.group(1)}")
                self.execute(f"mc_node_destroy {m.group(1)}")
        if re.search(rf"mgrp\({group}\)", dump):
            self.execute(f"mc_mgrp_destroy {group}")
        self.execute(f"mc_mgrp_create {group}")
        out = self.execute(f"mc_node_create {rid} {' '.join(str(p) for p in ports)}")
        m = re.search(r"handle (\d+)", out)
        if not m:
            raise ControllerError(f"unexpected mc_node_create reply: {out!r}")
        self.execute(f"mc_node_associate {group} {m.group(1)}")

    def clone_session_set(self, session: int, port: int) -> None:
        try:
            self.execute(f"mirroring_delete {session}")
        except ControllerError:
            pass
        self.execute(f"mirroring_add {session} {port}")

    # -- externs -------------------------------------------------------------
    def register_read(self, register: str, index: int | None = None) -> int | list[int]:
        if index is None:
            out = self.execute(f"register_read {register}")
            return [int(x) for x in out.split("=", 1)[1].split(",") if x.strip()]
        out = self.execute(f"register_read {register} {index}")
        return int(out.rsplit("=", 1)[1])

    def register_write(self, register: str, index: int, value: Value) -> None:
        self.execute(f"register_write {register} {index} {to_int(value)}")

    def counter_read(self, counter: str, index: int) -> tuple[int, int]:
        out = self.execute(f"counter_read {counter} {index}")
        m = re.search(r"\((\d+) bytes, (\d+) packets\)", out)
        if not m:
            raise ControllerError(f"unexpected counter_read reply: {out!r}")
        return int(m.group(2)), int(m.group(1))

    # -- traffic manager ---------------------------------------------------------
    @staticmethod
    def _port_prio(port: int | None, priority: int | None) -> str:
        if priority is not None and port is None:
            raise ControllerError("a priority needs a port")
        return "".join(f" {x}" for x in (port, priority) if x is not None)

    def set_queue_depth(self, depth: int, port: int | None = None,
                        priority: int | None = None) -> None:
        self.execute(f"set_queue_depth {depth}{self._port_prio(port, priority)}")

    def set_queue_rate(self, pps: int, port: int | None = None,
                       priority: int | None = None) -> None:
        self.execute(f"set_queue_rate {pps}{self._port_prio(port, priority)}")

    def set_port_rate_bps(self, bps: int, port: int | None = None) -> None:
        if "set_port_rate_bps" not in self.extensions:
            super().set_port_rate_bps(bps, port)
        self.execute(f"set_port_rate_bps {bps}" + (f" {port}" if port is not None else ""))

    def set_priority_weights(self, port: int, weights: list[int] | None) -> None:
        if "set_priority_weights" not in self.extensions:
            super().set_priority_weights(port, weights)
        w = "strict" if weights is None else " ".join(str(x) for x in weights)
        self.execute(f"set_priority_weights {port} {w}")

    def close(self) -> None:
        if self._on_close is not None:
            self._on_close()


__all__ = ["CliController"]
