"""The one controller API experiments use, for the soft switch and for BMv2.

    ctl = P4RuntimeController("127.0.0.1:9559", "router.p4info.txt", device_id=1,
                              cli=SOFT.cli_controller(9090))
    ctl.table_add("ipv4_lpm", {"hdr.ipv4.dstAddr": ("10.0.1.0", 24)}, "set_nhop",
                  {"dmac": "00:00:00:00:01:01", "port": 1})
    ctl.set_queue_rate(1000, port=1)

or, over the switch's simple_switch_CLI verbs only (``SOFT`` and ``BMV2``
are :mod:`switches.targets`' targets, which know how their CLI is reached)::

    ctl = SOFT.cli_controller(9090)   # soft switch control port
    ctl = BMV2.cli_controller(9090)   # simple_switch_CLI --thrift-port 9090

This module holds what both backends share: :class:`Controller` (the API),
:class:`ControllerError`, :class:`TableEntry` and the value forms. The
backends are :mod:`switches.controller.cli` and
:mod:`switches.controller.p4runtime`.

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
import re
from abc import ABC, abstractmethod
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Union

MAX_PRIO = (1 << 31) - 1

# The aliases are written with typing.Union: the simulator's PyPy (Python
# 3.9) imports this module, and `X | Y` between classes needs 3.10.
# A value in one of the forms the API takes (see the module docstring).
Value = Union[int, str, bytes, bytearray]  # noqa: UP007
# A key's match as given: a value (exact, optional; lpm "v/len") or a pair (lpm
# (v, prefix_len), ternary (v, mask), range (lo, hi)); None is a wildcard.
MatchValue = Union[Value, tuple[Value, Value]]  # noqa: UP007
Match = Mapping[str, Union[MatchValue, None]]  # noqa: UP007
Params = Mapping[str, Value]
# A key's match as read back: an int, or an int pair (lpm, ternary, range).
KeyMatch = Union[int, tuple[int, int]]  # noqa: UP007


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
    match: dict[str, KeyMatch]
    action: str
    params: dict[str, int] = field(default_factory=dict)
    priority: int | None = None
    counter: tuple[int, int] | None = None  # (packets, bytes) of a direct counter


def to_int(value: MatchValue | None, width: int | None = None) -> int:
    """An int from the value forms the API accepts (a pair or None is refused)."""
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


def lpm(v: MatchValue) -> tuple[Value, int]:
    """(value, prefix length) of an lpm match given either way."""
    if isinstance(v, tuple):
        return v[0], int(v[1])
    if isinstance(v, str) and "/" in v:
        a, p = v.split("/", 1)
        return a, int(p)
    raise ControllerError(f"lpm match {v!r}: give (value, prefix_len) or 'value/len'")


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
    def table_add(self, table: str, match: Match, action: str,
                  params: Params | None = None, priority: int | None = None) -> None: ...

    @abstractmethod
    def table_modify(self, table: str, match: Match, action: str,
                     params: Params | None = None, priority: int | None = None) -> None: ...

    @abstractmethod
    def table_set_default(self, table: str, action: str,
                          params: Params | None = None) -> None: ...

    @abstractmethod
    def action_params(self, table: str, action: str) -> tuple[str, list[str]]:
        """(full action name, its parameter names in order) of an action of
        ``table``: turns positional values (simple_switch_CLI lines) into
        the ``params`` dict the table calls take."""

    @abstractmethod
    def table_delete(self, table: str, match: Match,
                     priority: int | None = None) -> None: ...

    @abstractmethod
    def table_entries(self, table: str) -> list[TableEntry]: ...

    # -- action profiles and selectors ------------------------------------------
    @abstractmethod
    def profile_member_set(self, profile: str, member: int, action: str,
                           params: Params | None = None) -> None:
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
    def table_add_indirect(self, table: str, match: Match, *,
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
    def register_write(self, register: str, index: int, value: Value) -> None: ...

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


__all__ = ["MAX_PRIO", "Controller", "ControllerError", "KeyMatch", "Match", "MatchValue",
           "Params", "TableEntry", "Value", "lpm", "resolve", "to_int"]
