"""The one controller API experiments use, for the soft switch and for BMv2.

    ctl = P4RuntimeController("127.0.0.1:9559", "router.p4info.txt", device_id=1,
                              cli=CliController(9090))
    ctl.table_add("ipv4_lpm", {"hdr.ipv4.dstAddr": ("10.0.1.0", 24)}, "set_nhop",
                  {"dmac": "00:00:00:00:01:01", "port": 1})
    ctl.set_queue_rate(1000, port=1)

or, over the switch's simple_switch_CLI verbs only::

    ctl = CliController(9090)               # soft switch control port
    ctl = CliController(9090, target="bmv2")  # simple_switch_CLI --thrift-port 9090

Names (tables, actions, keys, parameters, registers, counters) are the
control-plane names or any unique dot-separated suffix of them.

Values: ints, ``"a.b.c.d"`` (IPv4), ``"aa:bb:cc:dd:ee:ff"`` (MAC), IPv6
strings, ``"0x.."`` hex, or bytes. Matches by kind: exact ``v``; lpm
``(v, prefix_len)`` or ``"v/len"``; ternary ``(v, mask)``; range
``(lo, hi)``; optional ``v``. A ternary, lpm, range or optional key left out
of the dict (or given as None) is a wildcard.

Priorities follow P4Runtime: the larger number wins (the CLI backend turns
them into simple_switch_CLI's smaller-wins numbers and back).

Action profiles and selectors (ECMP): ``profile_member_set(profile, member,
action, params)`` creates or changes a member, ``profile_group_set(profile,
group, members)`` creates or replaces a selector's group, and
``table_add_indirect(table, match, member=... | group=...)`` adds an entry
naming one of them. Member and group numbers are the caller's (P4Runtime's
ids); the CLI backend maps them to the switch's handles.

Queue settings and the soft target's extensions (``set_port_rate_bps``,
``set_priority_weights``) go through the CLI: ``P4RuntimeController`` needs
``cli=`` for them. Registers go through P4Runtime on the soft switch; on
BMv2 (whose P4Runtime server has no registers) they fall back to ``cli``.
"""

from __future__ import annotations

import ipaddress
import os
import queue
import re
import shutil
import subprocess
import threading
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

MAX_PRIO = (1 << 31) - 1


class ControllerError(Exception):
    """A control operation failed; ``code`` is the P4Runtime/CLI error name when known."""

    def __init__(self, message: str, code: str = "") -> None:
        super().__init__(message)
        self.code = code


@dataclass
class TableEntry:
    """One entry as ``table_entries`` returns it (values as ints; lpm
    ``(v, plen)``, ternary ``(v, mask)``, range ``(lo, hi)``; wildcard keys
    are left out of ``match``)."""

    table: str
    match: dict[str, Any]
    action: str
    params: dict[str, int] = field(default_factory=dict)
    priority: int | None = None
    counter: tuple[int, int] | None = None  # (packets, bytes) of a direct counter


def to_int(value: Any, width: int | None = None) -> int:
    """An int from the value forms the API accepts."""
    if isinstance(value, bool):
        v = int(value)
    elif isinstance(value, int):
        v = value
    elif isinstance(value, (bytes, bytearray)):
        v = int.from_bytes(value, "big")
    elif isinstance(value, str):
        s = value.strip()
        if re.fullmatch(r"\d+\.\d+\.\d+\.\d+", s):
            v = int(ipaddress.IPv4Address(s))
        elif re.fullmatch(r"[0-9a-fA-F]{1,2}(:[0-9a-fA-F]{1,2}){5}", s):
            v = int.from_bytes(bytes(int(p, 16) for p in s.split(":")), "big")
        elif ":" in s:
            v = int(ipaddress.IPv6Address(s))
        else:
            v = int(s, 0)
    else:
        raise ControllerError(f"cannot use {value!r} as a value")
    if v < 0:
        raise ControllerError(f"negative value {value!r}")
    if width is not None and v >> width:
        raise ControllerError(f"value {value!r} does not fit in {width} bits")
    return v


def resolve(names: list[str], wanted: str, what: str) -> str:
    if wanted in names:
        return wanted
    cands = [n for n in names if n.endswith("." + wanted)]
    if len(cands) == 1:
        return cands[0]
    if cands:
        raise ControllerError(f"ambiguous {what} name {wanted!r}: {', '.join(sorted(cands))}")
    raise ControllerError(f"no {what} named {wanted!r}")


class Controller(ABC):
    """What every target offers (see the module docstring for value forms)."""

    @abstractmethod
    def table_add(self, table: str, match: dict[str, Any], action: str,
                  params: dict[str, Any] | None = None, priority: int | None = None) -> None: ...

    @abstractmethod
    def table_modify(self, table: str, match: dict[str, Any], action: str,
                     params: dict[str, Any] | None = None, priority: int | None = None) -> None: ...

    @abstractmethod
    def table_set_default(self, table: str, action: str,
                          params: dict[str, Any] | None = None) -> None: ...

    @abstractmethod
    def action_params(self, table: str, action: str) -> tuple[str, list[str]]:
        """(full action name, its parameter names in order) of an action of
        ``table``: turns positional values (simple_switch_CLI lines) into
        the ``params`` dict the table calls take."""

    @abstractmethod
    def table_delete(self, table: str, match: dict[str, Any],
                     priority: int | None = None) -> None: ...

    @abstractmethod
    def table_entries(self, table: str) -> list[TableEntry]: ...

    # -- action profiles and selectors ------------------------------------------
    @abstractmethod
    def profile_member_set(self, profile: str, member: int, action: str,
                           params: dict[str, Any] | None = None) -> None:
        """Create member ``member`` of an action profile/selector, or change
        its action if it exists."""

    @abstractmethod
    def profile_member_delete(self, profile: str, member: int) -> None: ...

    @abstractmethod
    def profile_group_set(self, profile: str, group: int, members: list[int]) -> None:
        """Create group ``group`` of an action selector with ``members``, or
        replace the members of an existing one."""

    @abstractmethod
    def profile_group_delete(self, profile: str, group: int) -> None: ...

    @abstractmethod
    def table_add_indirect(self, table: str, match: dict[str, Any], *,
                           member: int | None = None, group: int | None = None,
                           priority: int | None = None) -> None:
        """An entry of a table with an action profile/selector naming one
        ``member`` or one ``group``."""

    @abstractmethod
    def mc_group_set(self, group: int, ports: list[int], rid: int = 0) -> None:
        """Create or replace multicast group ``group`` (one replica per port)."""

    @abstractmethod
    def clone_session_set(self, session: int, port: int) -> None:
        """Create or replace clone (mirroring) session ``session`` to ``port``."""

    @abstractmethod
    def register_read(self, register: str, index: int | None = None) -> int | list[int]: ...

    @abstractmethod
    def register_write(self, register: str, index: int, value: Any) -> None: ...

    @abstractmethod
    def counter_read(self, counter: str, index: int) -> tuple[int, int]:
        """(packets, bytes)."""

    @abstractmethod
    def set_queue_depth(self, depth: int, port: int | None = None,
                        priority: int | None = None) -> None: ...

    @abstractmethod
    def set_queue_rate(self, pps: int, port: int | None = None,
                       priority: int | None = None) -> None: ...

    def set_port_rate_bps(self, bps: int, port: int | None = None) -> None:
        raise ControllerError("set_port_rate_bps is a soft-switch extension")

    def set_priority_weights(self, port: int, weights: list[int] | None) -> None:
        raise ControllerError("set_priority_weights is a soft-switch extension")

    def close(self) -> None:  # noqa: B027 - most backends hold nothing to release
        """Release connections (the switch keeps its state)."""

    def __enter__(self) -> Controller:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


# ---------------------------------------------------------------------------
# simple_switch_CLI verbs


@dataclass
class _CliTable:
    name: str
    keys: list[tuple[str, str, int]]  # (name, kind, width)
    actions: dict[str, list[tuple[str, int]]] = field(default_factory=dict)

    @property
    def needs_priority(self) -> bool:
        return any(k in ("ternary", "range", "optional") for _, k, _ in self.keys)


class CliController(Controller):
    """simple_switch_CLI verbs over the soft switch's control port
    (``target="soft"``) or BMv2's Thrift port (``target="bmv2"``: runs
    ``simple_switch_CLI --thrift-port``), or any ``execute(line) -> str``."""

    def __init__(self, port: int | None = None, *, target: str = "soft",
                 host: str = "127.0.0.1",
                 execute: Callable[[str], str] | None = None) -> None:
        self.target = target
        self._client: Any = None
        if execute is not None:
            self._execute = execute
        elif target == "soft":
            if port is None:
                raise ControllerError("CliController needs the switch's control port")
            from switches.soft.control.client import SwitchClient

            self._client = SwitchClient(port, host)
            self._execute = self._client.execute
        elif target == "bmv2":
            if port is None:
                raise ControllerError("CliController needs BMv2's thrift port")
            self._execute = _Bmv2Cli(port, host).execute
        else:
            raise ControllerError(f"unknown target {target!r} (soft or bmv2)")
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
    def _key_tokens(t: _CliTable, match: dict[str, Any]) -> list[str]:
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
                val, plen = (0, 0) if v is None else _lpm(v)
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

    def _action(self, t: _CliTable, action: str, params: dict[str, Any] | None) -> tuple[str, list[str]]:
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
    def table_add(self, table: str, match: dict[str, Any], action: str,
                  params: dict[str, Any] | None = None, priority: int | None = None) -> None:
        t = self._table(table)
        aname, vals = self._action(t, action, params)
        line = f"table_add {t.name} {aname} {' '.join(self._key_tokens(t, match))} => {' '.join(vals)}"
        if t.needs_priority:
            if priority is None:
                raise ControllerError(f"table {t.name} needs a priority")
            line += f" {MAX_PRIO - priority}"
        self.execute(line.strip())

    def _handle(self, t: _CliTable, match: dict[str, Any], priority: int | None) -> int:
        want = self._parse_keys(t, self._key_tokens(t, match))
        for e in self._dump(t):
            if e["match"] == want and (not t.needs_priority or priority is None
                                       or e["priority"] == MAX_PRIO - priority):
                return int(e["handle"])
        raise ControllerError(f"no entry with that key in {t.name}", "NOT_FOUND")

    def table_modify(self, table: str, match: dict[str, Any], action: str,
                     params: dict[str, Any] | None = None, priority: int | None = None) -> None:
        t = self._table(table)
        aname, vals = self._action(t, action, params)
        h = self._handle(t, match, priority)
        self.execute(f"table_modify {t.name} {aname} {h} {' '.join(vals)}".strip())

    def action_params(self, table: str, action: str) -> tuple[str, list[str]]:
        t = self._table(table)
        aname = resolve(list(t.actions), action, "action")
        return aname, [p for p, _ in t.actions[aname]]

    def table_set_default(self, table: str, action: str,
                          params: dict[str, Any] | None = None) -> None:
        t = self._table(table)
        aname, vals = self._action(t, action, params)
        self.execute(f"table_set_default {t.name} {aname} {' '.join(vals)}".strip())

    def table_delete(self, table: str, match: dict[str, Any], priority: int | None = None) -> None:
        t = self._table(table)
        self.execute(f"table_delete {t.name} {self._handle(t, match, priority)}")

    # -- action profiles ---------------------------------------------------------
    def _profile_action(self, action: str, params: dict[str, Any] | None) -> tuple[str, list[str]]:
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
                           params: dict[str, Any] | None = None) -> None:
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

    def table_add_indirect(self, table: str, match: dict[str, Any], *,
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

    def _parse_keys(self, t: _CliTable, toks: list[str]) -> list[Any]:
        out: list[Any] = []
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

    def _dump(self, t: _CliTable) -> list[dict[str, Any]]:
        entries: list[dict[str, Any]] = []
        cur: dict[str, Any] | None = None
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
            match: dict[str, Any] = {}
            for (name, kind, width), m in zip(t.keys, e["match"], strict=False):
                full = (1 << width) - 1
                if (kind == "lpm" and m[1] == 0) or (kind in ("ternary", "optional") and m[1] == 0) \
                        or (kind == "range" and m == (0, full)):
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

    def register_write(self, register: str, index: int, value: Any) -> None:
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
        if self.target != "soft":
            super().set_port_rate_bps(bps, port)
        self.execute(f"set_port_rate_bps {bps}" + (f" {port}" if port is not None else ""))

    def set_priority_weights(self, port: int, weights: list[int] | None) -> None:
        if self.target != "soft":
            super().set_priority_weights(port, weights)
        w = "strict" if weights is None else " ".join(str(x) for x in weights)
        self.execute(f"set_priority_weights {port} {w}")

    def close(self) -> None:
        if self._client is not None:
            self._client.close()


def _lpm(v: Any) -> tuple[Any, int]:
    if isinstance(v, tuple):
        return v[0], int(v[1])
    if isinstance(v, str) and "/" in v:
        a, p = v.split("/", 1)
        return a, int(p)
    raise ControllerError(f"lpm match {v!r}: give (value, prefix_len) or 'value/len'")


class _Bmv2Cli:
    """simple_switch_CLI --thrift-port, one process per command."""

    def __init__(self, port: int, host: str) -> None:
        self.port = port
        self.host = host
        exe = shutil.which("simple_switch_CLI")
        if exe is None:
            raise ControllerError("simple_switch_CLI is not installed")
        self.exe: str = exe

    def execute(self, line: str) -> str:
        p = subprocess.run([self.exe, "--thrift-port", str(self.port), "--thrift-ip", self.host],
                           input=line + "\n", capture_output=True, text=True, timeout=60)
        out = p.stdout.replace("RuntimeCmd: ", "").strip()
        lines = [ln for ln in out.splitlines() if not ln.startswith("Obtaining JSON")
                 and not ln.startswith("Control utility for runtime P4 table manipulation")]
        text = "\n".join(lines).strip()
        if p.returncode != 0 or re.search(r"^(Error|Invalid|.*Exception)", text, re.M):
            raise ControllerError(text or p.stderr.strip(), "CLI")
        return text


# ---------------------------------------------------------------------------
# P4Runtime


class P4RuntimeController(Controller):
    """A P4Runtime client (primary for ``device_id`` with ``election_id``).

    ``p4info``: a P4Info message, a path to a text/binary P4Info file, or
    None to fetch it from the switch. ``cli``: a CliController for queue
    settings (and BMv2 registers). Packet I/O: ``packet_out``/``packet_in``;
    digests: ``digest_enable``/``digest_lists``.
    """

    def __init__(self, address: str, p4info: Any = None, device_id: int = 0,
                 election_id: int = 1, cli: CliController | None = None,
                 timeout: float = 10.0) -> None:
        try:
            import grpc
            from p4.v1 import p4runtime_pb2, p4runtime_pb2_grpc
        except ImportError as e:
            raise ControllerError("P4RuntimeController needs the optional dependencies: "
                                  "pip install -e '.[p4runtime]'") from e
        self._grpc = grpc
        self.pb = p4runtime_pb2
        self.address = address
        self.device_id = device_id
        self.election_id = election_id
        self.cli = cli
        self.timeout = timeout
        self.channel = grpc.insecure_channel(address)
        self.stub = p4runtime_pb2_grpc.P4RuntimeStub(self.channel)
        self._requests: queue.Queue[Any] = queue.Queue()
        self._arb: queue.Queue[Any] = queue.Queue()
        self.packets_in: queue.Queue[Any] = queue.Queue()
        self.digests_in: queue.Queue[Any] = queue.Queue()
        self.stream_errors: list[Any] = []
        self._stream = self.stub.StreamChannel(self._request_iter())
        self._reader = threading.Thread(target=self._read_stream, daemon=True)
        self._reader.start()
        req = p4runtime_pb2.StreamMessageRequest()
        req.arbitration.device_id = device_id
        req.arbitration.election_id.high = election_id >> 64
        req.arbitration.election_id.low = election_id & ((1 << 64) - 1)
        self._requests.put(req)
        try:
            arb = self._arb.get(timeout=timeout)
        except queue.Empty:
            self.close()
            raise ControllerError(f"no arbitration answer from {address}") from None
        if isinstance(arb, Exception):
            self.close()
            raise ControllerError(f"stream to {address} failed: {arb}") from None
        if arb.status.code != 0:
            self.close()
            raise ControllerError(f"not primary for device {device_id} on {address}: "
                                  f"{arb.status.message}", "PERMISSION_DENIED")
        self._load_p4info(p4info)

    # -- stream ----------------------------------------------------------------
    def _request_iter(self) -> Iterator[Any]:
        while True:
            r = self._requests.get()
            if r is None:
                return
            yield r

    def _read_stream(self) -> None:
        try:
            for resp in self._stream:
                kind = resp.WhichOneof("update")
                if kind == "arbitration":
                    self._arb.put(resp.arbitration)
                elif kind == "packet":
                    self.packets_in.put(resp.packet)
                elif kind == "digest":
                    self.digests_in.put(resp.digest)
                elif kind == "error":
                    self.stream_errors.append(resp.error)
        except self._grpc.RpcError as e:
            self._arb.put(e)

    # -- P4Info ----------------------------------------------------------------
    def _load_p4info(self, p4info: Any) -> None:
        if p4info is None:
            resp = self.stub.GetForwardingPipelineConfig(self.pb.GetForwardingPipelineConfigRequest(
                device_id=self.device_id, response_type=2))
            p4info = resp.config.p4info
        elif isinstance(p4info, (str, os.PathLike)):
            from switches.soft.p4info import load_p4info

            p4info = load_p4info(p4info)
        self.p4info = p4info
        self._names: dict[str, dict[str, Any]] = {}
        for kind in ("tables", "actions", "counters", "direct_counters", "meters",
                     "direct_meters", "registers", "digests", "controller_packet_metadata",
                     "action_profiles"):
            self._names[kind] = {e.preamble.name: e for e in getattr(p4info, kind)}

    def _get(self, kind: str, name: str) -> Any:
        d = self._names[kind]
        return d[resolve(list(d), name, kind.rstrip("s").replace("_", " "))]

    def set_pipeline_config(self, p4info: Any, device_config: bytes,
                            action: str = "VERIFY_AND_COMMIT") -> None:
        """SetForwardingPipelineConfig for any target: ``p4info`` (a P4Info
        message or a path to a text/binary P4Info file) with the target's
        opaque ``device_config`` (BMv2: the bmv2 JSON p4c wrote; soft: see
        :meth:`set_forwarding_pipeline`). ``action`` is the request's action
        name (VERIFY_AND_COMMIT, VERIFY, VERIFY_AND_SAVE, COMMIT,
        RECONCILE_AND_COMMIT). This controller uses ``p4info`` afterwards,
        unless the action only verifies."""
        if isinstance(p4info, (str, os.PathLike)):
            from switches.soft.p4info import load_p4info

            p4info = load_p4info(p4info)
        kinds = self.pb.SetForwardingPipelineConfigRequest.Action
        try:
            act = kinds.Value(action)
        except ValueError:
            raise ControllerError(f"unknown pipeline action {action!r} (one of "
                                  f"{', '.join(n for n in kinds.keys() if n != 'UNSPECIFIED')})"
                                  ) from None
        req = self.pb.SetForwardingPipelineConfigRequest(device_id=self.device_id, action=act)
        req.election_id.low = self.election_id & ((1 << 64) - 1)
        req.election_id.high = self.election_id >> 64
        req.config.p4info.CopyFrom(p4info)
        req.config.p4_device_config = bytes(device_config)
        self._call(self.stub.SetForwardingPipelineConfig, req)
        if action not in ("VERIFY", "VERIFY_AND_SAVE"):
            self._load_p4info(p4info)

    def set_forwarding_pipeline(self, program: str, p4info: Any = None,
                                include_dirs: list[str] | None = None) -> None:
        """Replace the soft switch's program: ``program`` is a path on the
        switch's host; the P4Info is built here unless given."""
        import json

        from switches.soft.p4info import p4info_for_program

        if p4info is None:
            p4info = p4info_for_program(program, include_dirs or ())
        cfg: dict[str, Any] = {"program": os.path.abspath(program)}
        if include_dirs:
            cfg["include_dirs"] = [os.path.abspath(d) for d in include_dirs]
        self.set_pipeline_config(p4info, json.dumps(cfg).encode())

    # -- RPC helpers -------------------------------------------------------------
    def _call(self, fn: Callable[[Any], Any], req: Any) -> Any:
        try:
            return fn(req)
        except self._grpc.RpcError as e:
            raise self._error(e) from None

    def _error(self, e: Any) -> ControllerError:
        msg = e.details() or str(e)
        code = e.code().name if e.code() else ""
        for k, v in e.trailing_metadata() or ():
            if k == "grpc-status-details-bin":
                from google.rpc import status_pb2

                st = status_pb2.Status.FromString(v)
                for d in st.details:
                    err = self.pb.Error()
                    d.Unpack(err)
                    if err.canonical_code:
                        code = next((c.name for c in self._grpc.StatusCode
                                     if c.value[0] == err.canonical_code), code)
                        msg = err.message
                        break
        return ControllerError(msg, code)

    def _write(self, *updates: Any) -> None:
        req = self.pb.WriteRequest(device_id=self.device_id)
        req.election_id.low = self.election_id & ((1 << 64) - 1)
        req.election_id.high = self.election_id >> 64
        req.updates.extend(updates)
        self._call(self.stub.Write, req)

    def _read(self, *entities: Any) -> list[Any]:
        req = self.pb.ReadRequest(device_id=self.device_id)
        req.entities.extend(entities)
        try:
            out = []
            for resp in self.stub.Read(req):
                out.extend(resp.entities)
            return out
        except self._grpc.RpcError as e:
            raise self._error(e) from None

    @staticmethod
    def _bytes(v: int) -> bytes:
        return v.to_bytes(max(1, (v.bit_length() + 7) // 8), "big")

    # -- tables --------------------------------------------------------------
    def _table_entry(self, table: str, match: dict[str, Any] | None, priority: int | None) -> tuple[Any, Any]:
        t = self._get("tables", table)
        te = self.pb.TableEntry(table_id=t.preamble.id)
        if match is None:
            return t, te
        fields = {m.name: m for m in t.match_fields}
        given = {resolve(list(fields), k, "match field"): v for k, v in match.items()}
        for name, mf in fields.items():
            v = given.get(name)
            w = mf.bitwidth
            full = (1 << w) - 1
            kind = mf.match_type
            if kind == 2:  # EXACT
                if v is None:
                    raise ControllerError(f"exact match field {name} needs a value")
                te.match.add(field_id=mf.id).exact.value = self._bytes(to_int(v, w))
            elif v is None:
                continue
            elif kind == 3:  # LPM
                val, plen = _lpm(v)
                if plen == 0:
                    continue
                iv = to_int(val, w) & (((1 << plen) - 1) << (w - plen))
                fm = te.match.add(field_id=mf.id)
                fm.lpm.value = self._bytes(iv)
                fm.lpm.prefix_len = plen
            elif kind == 4:  # TERNARY
                val, mask = v if isinstance(v, tuple) else (v, full)
                m = to_int(mask, w)
                if m == 0:
                    continue
                fm = te.match.add(field_id=mf.id)
                fm.ternary.value = self._bytes(to_int(val, w) & m)
                fm.ternary.mask = self._bytes(m)
            elif kind == 5:  # RANGE
                lo, hi = v if isinstance(v, tuple) else (v, v)
                lo_i, hi_i = to_int(lo, w), to_int(hi, w)
                if lo_i == 0 and hi_i == full:
                    continue
                fm = te.match.add(field_id=mf.id)
                fm.range.low = self._bytes(lo_i)
                fm.range.high = self._bytes(hi_i)
            elif kind == 6:  # OPTIONAL
                te.match.add(field_id=mf.id).optional.value = self._bytes(to_int(v, w))
        if any(m.match_type in (4, 5, 6) for m in t.match_fields):
            if priority is None:
                raise ControllerError(f"table {t.preamble.name} needs a priority")
            te.priority = priority
        return t, te

    def _set_action(self, t: Any, te: Any, action: str, params: dict[str, Any] | None) -> None:
        self._fill_action(te.action.action, {r.id for r in t.action_refs}, action, params)

    def _fill_action(self, msg: Any, allowed: set[int], action: str,
                     params: dict[str, Any] | None) -> None:
        """A p4.v1.Action: one of the ``allowed`` action ids, with its parameters."""
        acts = {a.preamble.name: a for a in self.p4info.actions if a.preamble.id in allowed}
        a = acts[resolve(list(acts), action, "action")]
        given = dict(params or {})
        msg.action_id = a.preamble.id
        for p in a.params:
            if p.name not in given:
                raise ControllerError(f"action {a.preamble.name} needs parameter {p.name}")
            msg.params.add(param_id=p.id, value=self._bytes(to_int(given.pop(p.name), p.bitwidth)))
        if given:
            raise ControllerError(f"action {a.preamble.name} has no parameter(s) "
                                  f"{', '.join(given)}")

    # -- action profiles and selectors -------------------------------------------
    def _profile_actions(self, ap: Any) -> set[int]:
        tables = {t.preamble.id: t for t in self.p4info.tables}
        return {r.id for tid in ap.table_ids if tid in tables for r in tables[tid].action_refs
                if r.scope != 2}  # not DEFAULT_ONLY

    def _exists(self, **entity: Any) -> bool:
        try:
            return bool(self._read(self.pb.Entity(**entity)))
        except ControllerError as e:
            if e.code == "NOT_FOUND":
                return False
            raise

    def profile_member_set(self, profile: str, member: int, action: str,
                           params: dict[str, Any] | None = None) -> None:
        ap = self._get("action_profiles", profile)
        m = self.pb.ActionProfileMember(action_profile_id=ap.preamble.id, member_id=member)
        probe = self.pb.ActionProfileMember(action_profile_id=ap.preamble.id, member_id=member)
        self._fill_action(m.action, self._profile_actions(ap), action, params)
        kind = "MODIFY" if self._exists(action_profile_member=probe) else "INSERT"
        self._write(self._update(kind, action_profile_member=m))

    def profile_member_delete(self, profile: str, member: int) -> None:
        ap = self._get("action_profiles", profile)
        m = self.pb.ActionProfileMember(action_profile_id=ap.preamble.id, member_id=member)
        self._write(self._update("DELETE", action_profile_member=m))

    def profile_group_set(self, profile: str, group: int, members: list[int]) -> None:
        ap = self._get("action_profiles", profile)
        g = self.pb.ActionProfileGroup(action_profile_id=ap.preamble.id, group_id=group)
        probe = self.pb.ActionProfileGroup(action_profile_id=ap.preamble.id, group_id=group)
        for mid in dict.fromkeys(members):
            g.members.add(member_id=mid, weight=1)
        kind = "MODIFY" if self._exists(action_profile_group=probe) else "INSERT"
        self._write(self._update(kind, action_profile_group=g))

    def profile_group_delete(self, profile: str, group: int) -> None:
        ap = self._get("action_profiles", profile)
        g = self.pb.ActionProfileGroup(action_profile_id=ap.preamble.id, group_id=group)
        self._write(self._update("DELETE", action_profile_group=g))

    def table_add_indirect(self, table: str, match: dict[str, Any], *,
                           member: int | None = None, group: int | None = None,
                           priority: int | None = None) -> None:
        if (member is None) == (group is None):
            raise ControllerError("table_add_indirect takes one member or one group")
        _, te = self._table_entry(table, match, priority)
        if group is not None:
            te.action.action_profile_group_id = group
        else:
            te.action.action_profile_member_id = member or 0
        self._write(self._update("INSERT", table_entry=te))

    def _update(self, kind: str, **entity: Any) -> Any:
        return self.pb.Update(type=getattr(self.pb.Update, kind), entity=self.pb.Entity(**entity))

    def table_add(self, table: str, match: dict[str, Any], action: str,
                  params: dict[str, Any] | None = None, priority: int | None = None) -> None:
        t, te = self._table_entry(table, match, priority)
        self._set_action(t, te, action, params)
        self._write(self._update("INSERT", table_entry=te))

    def table_modify(self, table: str, match: dict[str, Any], action: str,
                     params: dict[str, Any] | None = None, priority: int | None = None) -> None:
        t, te = self._table_entry(table, match, priority)
        self._set_action(t, te, action, params)
        self._write(self._update("MODIFY", table_entry=te))

    def action_params(self, table: str, action: str) -> tuple[str, list[str]]:
        t = self._get("tables", table)
        allowed = {r.id for r in t.action_refs}
        acts = {a.preamble.name: a for a in self.p4info.actions if a.preamble.id in allowed}
        a = acts[resolve(list(acts), action, "action")]
        return a.preamble.name, [p.name for p in a.params]

    def table_set_default(self, table: str, action: str,
                          params: dict[str, Any] | None = None) -> None:
        t, te = self._table_entry(table, None, None)
        te.is_default_action = True
        self._set_action(t, te, action, params)
        self._write(self._update("MODIFY", table_entry=te))

    def table_reset_default(self, table: str) -> None:
        _, te = self._table_entry(table, None, None)
        te.is_default_action = True
        self._write(self._update("MODIFY", table_entry=te))

    def table_delete(self, table: str, match: dict[str, Any], priority: int | None = None) -> None:
        _, te = self._table_entry(table, match, priority)
        self._write(self._update("DELETE", table_entry=te))

    def table_entries(self, table: str) -> list[TableEntry]:
        t, te = self._table_entry(table, None, None)
        if t.direct_resource_ids:
            te.counter_data.SetInParent()
        fields = {m.id: m for m in t.match_fields}
        actions = {a.preamble.id: a for a in self.p4info.actions}
        dc = {c.preamble.id for c in self.p4info.direct_counters}
        has_counter = any(r in dc for r in t.direct_resource_ids)
        out = []
        for ent in self._read(self.pb.Entity(table_entry=te)):
            e = ent.table_entry
            match: dict[str, Any] = {}
            for fm in e.match:
                mf = fields[fm.field_id]
                which = fm.WhichOneof("field_match_type")
                if which == "exact":
                    match[mf.name] = int.from_bytes(fm.exact.value, "big")
                elif which == "lpm":
                    match[mf.name] = (int.from_bytes(fm.lpm.value, "big"), fm.lpm.prefix_len)
                elif which == "ternary":
                    match[mf.name] = (int.from_bytes(fm.ternary.value, "big"),
                                      int.from_bytes(fm.ternary.mask, "big"))
                elif which == "range":
                    match[mf.name] = (int.from_bytes(fm.range.low, "big"),
                                      int.from_bytes(fm.range.high, "big"))
                elif which == "optional":
                    match[mf.name] = int.from_bytes(fm.optional.value, "big")
            a = actions.get(e.action.action.action_id)
            pnames = {p.id: p.name for p in a.params} if a is not None else {}
            params = {pnames.get(p.param_id, str(p.param_id)): int.from_bytes(p.value, "big")
                      for p in e.action.action.params}
            out.append(TableEntry(
                t.preamble.name, match, a.preamble.name if a is not None else "", params,
                e.priority or None,
                (e.counter_data.packet_count, e.counter_data.byte_count) if has_counter
                else None))
        return out

    # -- PRE --------------------------------------------------------------------
    def mc_group_set(self, group: int, ports: list[int], rid: int = 0) -> None:
        pre = self.pb.PacketReplicationEngineEntry()
        pre.multicast_group_entry.multicast_group_id = group
        for p in ports:
            pre.multicast_group_entry.replicas.add(egress_port=p, instance=rid)
        self._upsert(packet_replication_engine_entry=pre)

    def clone_session_set(self, session: int, port: int) -> None:
        pre = self.pb.PacketReplicationEngineEntry()
        pre.clone_session_entry.session_id = session
        pre.clone_session_entry.replicas.add(egress_port=port)
        self._upsert(packet_replication_engine_entry=pre)

    def _upsert(self, **entity: Any) -> None:
        try:
            self._write(self._update("INSERT", **entity))
        except ControllerError as e:
            if e.code != "ALREADY_EXISTS":
                raise
            self._write(self._update("MODIFY", **entity))

    # -- externs ----------------------------------------------------------------
    def register_read(self, register: str, index: int | None = None) -> int | list[int]:
        r = self._get("registers", register)
        re_ = self.pb.RegisterEntry(register_id=r.preamble.id)
        if index is not None:
            re_.index.index = index
        try:
            got = self._read(self.pb.Entity(register_entry=re_))
        except ControllerError as e:
            if e.code == "UNIMPLEMENTED" and self.cli is not None:
                return self.cli.register_read(r.preamble.name, index)
            raise
        vals = {x.register_entry.index.index: int.from_bytes(x.register_entry.data.bitstring,
                                                             "big") for x in got}
        if index is not None:
            return vals[index]
        return [vals[i] for i in sorted(vals)]

    def register_write(self, register: str, index: int, value: Any) -> None:
        r = self._get("registers", register)
        re_ = self.pb.RegisterEntry(register_id=r.preamble.id)
        re_.index.index = index
        re_.data.bitstring = self._bytes(to_int(value, r.type_spec.bitstring.bit.bitwidth or None))
        try:
            self._write(self._update("MODIFY", register_entry=re_))
        except ControllerError as e:
            if e.code == "UNIMPLEMENTED" and self.cli is not None:
                self.cli.register_write(r.preamble.name, index, value)
                return
            raise

    def counter_read(self, counter: str, index: int) -> tuple[int, int]:
        c = self._get("counters", counter)
        ce = self.pb.CounterEntry(counter_id=c.preamble.id)
        ce.index.index = index
        got = self._read(self.pb.Entity(counter_entry=ce))
        d = got[0].counter_entry.data
        return d.packet_count, d.byte_count

    # -- packet I/O and digests ---------------------------------------------------
    def packet_out(self, payload: bytes, **metadata: Any) -> None:
        """Send ``payload`` into the switch through its CPU port with the
        packet_out controller-header fields given by name."""
        req = self.pb.StreamMessageRequest()
        req.packet.payload = payload
        hdr = self._names["controller_packet_metadata"].get("packet_out")
        for m in (hdr.metadata if hdr is not None else []):
            req.packet.metadata.add(metadata_id=m.id,
                                    value=self._bytes(to_int(metadata.pop(m.name, 0), m.bitwidth)))
        if metadata:
            raise ControllerError(f"no packet_out field(s) {', '.join(metadata)}")
        self._requests.put(req)

    def packet_in(self, timeout: float | None = None) -> tuple[bytes, dict[str, int]]:
        """The next packet the switch sent to the controller: (payload, metadata by name)."""
        try:
            p = self.packets_in.get(timeout=timeout)
        except queue.Empty:
            raise ControllerError("no packet-in", "TIMEOUT") from None
        hdr = self._names["controller_packet_metadata"].get("packet_in")
        names = {m.id: m.name for m in hdr.metadata} if hdr is not None else {}
        return p.payload, {names.get(m.metadata_id, str(m.metadata_id)):
                           int.from_bytes(m.value, "big") for m in p.metadata}

    def digest_enable(self, digest: str, max_timeout_ns: int = 0, max_list_size: int = 1,
                      ack_timeout_ns: int = 0) -> None:
        d = self._get("digests", digest)
        de = self.pb.DigestEntry(digest_id=d.preamble.id)
        de.config.max_timeout_ns = max_timeout_ns
        de.config.max_list_size = max_list_size
        de.config.ack_timeout_ns = ack_timeout_ns
        self._upsert(digest_entry=de)

    def digest_list(self, timeout: float | None = None, ack: bool = True) -> tuple[str, list[list[int]]]:
        """The next DigestList: (digest name, one list of member values per digest)."""
        try:
            dl = self.digests_in.get(timeout=timeout)
        except queue.Empty:
            raise ControllerError("no digest", "TIMEOUT") from None
        if ack:
            req = self.pb.StreamMessageRequest()
            req.digest_ack.digest_id = dl.digest_id
            req.digest_ack.list_id = dl.list_id
            self._requests.put(req)
        name = next((n for n, d in self._names["digests"].items()
                     if d.preamble.id == dl.digest_id), str(dl.digest_id))
        return name, [[int.from_bytes(m.bitstring, "big") for m in d.struct.members]
                      for d in dl.data]

    # -- through the CLI ---------------------------------------------------------
    def _need_cli(self, what: str) -> CliController:
        if self.cli is None:
            raise ControllerError(f"{what} needs a CLI connection (P4RuntimeController(cli=...))")
        return self.cli

    def set_queue_depth(self, depth: int, port: int | None = None,
                        priority: int | None = None) -> None:
        self._need_cli("set_queue_depth").set_queue_depth(depth, port, priority)

    def set_queue_rate(self, pps: int, port: int | None = None,
                       priority: int | None = None) -> None:
        self._need_cli("set_queue_rate").set_queue_rate(pps, port, priority)

    def set_port_rate_bps(self, bps: int, port: int | None = None) -> None:
        self._need_cli("set_port_rate_bps").set_port_rate_bps(bps, port)

    def set_priority_weights(self, port: int, weights: list[int] | None) -> None:
        self._need_cli("set_priority_weights").set_priority_weights(port, weights)

    def close(self) -> None:
        self._requests.put(None)
        try:
            self._stream.cancel()
        except Exception:
            pass
        self.channel.close()
        if self.cli is not None:
            self.cli.close()


__all__ = ["Controller", "CliController", "P4RuntimeController", "TableEntry",
           "ControllerError", "to_int"]
