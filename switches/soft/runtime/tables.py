"""Match-action tables: the match engine behind ``TableRuntime.apply``.

Match kinds: exact, lpm, ternary, range, optional, and any mix of them.
A table whose keys are all exact uses one dict; exact keys plus one lpm key
use one dict per prefix length (longest first); a table with any ternary,
range or optional key (or more than one lpm key) is a priority table: the
entry with the smallest priority number wins (simple_switch_CLI's rule),
ties go to the entry added first. ``selector`` keys take no part in
matching: a table with an action profile or selector (``implementation``)
has entries naming a member or group of it (runtime/action_profiles.py).

Entries are named by handles (the smallest free number, as BMv2 reuses
them). Const entries from the P4 source are installed first; in source
order earlier entries win unless priorities say otherwise
(``TableInfo.largest_priority_wins`` says which way P4 priorities go).
Each entry carries its direct counter cells and its direct meter.
"""

from __future__ import annotations

import bisect
import heapq
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from switches.soft.runtime.action_profiles import ActionProfile, ActionProfileError
from switches.soft.runtime.contract import ActionInfo, EntryInfo, TableInfo
from switches.soft.runtime.externs import GREEN, Meter


class TableError(Exception):
    """A table operation failed; ``code`` is BMv2's error name."""

    def __init__(self, code: str, detail: str = "") -> None:
        super().__init__(f"{code}: {detail}" if detail else code)
        self.code = code
        self.detail = detail


_LINEAR_MAX = 8  # priority tables up to this size are scanned linearly
PRIORITY_KINDS = frozenset({"ternary", "range", "optional"})
_MAX_PRIO = (1 << 31) - 1


def table_match_type(info: TableInfo) -> str:
    """The table-level match type simple_switch_CLI reports: range beats
    ternary (optional counts as ternary) beats lpm beats exact."""
    kinds = {k.match_kind for k in info.keys}
    if "range" in kinds:
        return "range"
    if kinds & {"ternary", "optional"}:
        return "ternary"
    if "lpm" in kinds:
        return "lpm"
    return "exact"


@dataclass
class Entry:
    handle: int
    matches: list[Any]  # normalized per key, see Table.normalize_match
    action: str
    args: tuple[int, ...]
    priority: int  # smaller wins; -1 for exact/lpm tables
    seq: int  # insertion order (tie break)
    const: bool = False
    packets: int = 0
    bytes: int = 0
    meter: Meter | None = None
    # indirect tables: the action profile member or group the entry names
    member: int | None = None
    group: int | None = None
    # precomputed for priority tables
    _masks: tuple[int, ...] = ()
    _values: tuple[int, ...] = ()
    _ranges: tuple[tuple[int, int, int], ...] = ()  # (key index, lo, hi)

    def matches_key(self, key: tuple[int, ...]) -> bool:
        masks = self._masks
        values = self._values
        for i in range(len(masks)):
            if (key[i] & masks[i]) != values[i]:
                return False
        for i, lo, hi in self._ranges:
            if not lo <= key[i] <= hi:
                return False
        return True


def _order(e: Entry) -> tuple[int, int]:
    return (e.priority, e.seq)


class Table:
    """One P4 table instance (implements contract.TableRuntime)."""

    def __init__(self, info: TableInfo, actions: dict[str, ActionInfo],
                 meter_kind: str | None = None,
                 now_us: Callable[[], int] | None = None,
                 profile: ActionProfile | None = None) -> None:
        self.info = info
        self.profile = profile  # the implementation of an indirect table
        self.name = info.name
        self.actions = actions
        self.keys = info.keys
        self.widths = [k.width for k in info.keys]
        self.kinds = [k.match_kind for k in info.keys]
        self.match_type = table_match_type(info)
        self.has_counter = info.direct_counter is not None
        self.meter_kind = meter_kind if info.direct_meter is not None else None
        self._now = now_us or (lambda: 0)
        lpm_count = self.kinds.count("lpm")
        if any(k in PRIORITY_KINDS for k in self.kinds) or lpm_count > 1:
            self.mode = "priority"
        elif lpm_count == 1:
            self.mode = "lpm"
        else:
            self.mode = "exact"
        self.needs_priority = self.mode == "priority"
        self._lpm_index = self.kinds.index("lpm") if self.mode == "lpm" else -1
        self.entries: dict[int, Entry] = {}
        self._free: list[int] = []
        self._next_handle = 0
        self._seq = 0
        self._exact: dict[tuple[int, ...], Entry] = {}
        self._lpm: dict[int, dict[tuple[int, ...], Entry]] = {}
        self._lpm_lens: list[int] = []  # descending
        # tables with a single lpm key: [(prefix mask, {masked value: entry})],
        # longest prefix first (a view of _lpm for lookups)
        self._lpm1: list[tuple[int, dict[int, Entry]]] | None = (
            [] if self.mode == "lpm" and len(self.keys) == 1 else None)
        self._lpm1_of: dict[int, dict[int, Entry]] = {}
        # the per-packet entry point, specialized to the table's mode
        if self.mode == "exact":
            self.apply = self._apply_exact  # type: ignore[method-assign,assignment]
        elif self._lpm1 is not None:
            self.apply = self._apply_lpm1  # type: ignore[method-assign,assignment]
        if profile is not None:
            self.apply = self._apply_indirect  # type: ignore[method-assign,assignment]
        # indirect tables: the member or group a miss uses (None: the P4 default)
        self.default_member: int | None = None
        self.default_group: int | None = None
        self._sorted: list[Entry] = []  # priority tables: best first
        self._prio_keys: set[tuple[int, tuple[Any, ...]]] = set()
        # tuple-space search for larger priority tables: one dict per mask tuple,
        # masked key -> entries of that mask, best first
        self._groups: dict[tuple[int, ...], dict[tuple[int, ...], list[Entry]]] = {}
        self.default_action = info.default_action
        self.default_args = tuple(info.default_args)
        self.last_hit: Entry | None = None
        self._install_const_entries(info.entries)

    # -- lookup -------------------------------------------------------------
    def apply(self, key: tuple[int, ...],
              selector: list[tuple[int, int]] | None = None) -> tuple[str, tuple[int, ...], bool]:
        # (exact tables and tables with one lpm key get a shorter apply, below)
        e = self.lookup(key)
        self.last_hit = e
        if e is None:
            return self.default_action, self.default_args, False
        if self.has_counter:
            e.packets += 1
            e.bytes += self.current_length
        return e.action, e.args, True

    def _apply_indirect(self, key: tuple[int, ...], selector: list[tuple[int, int]] | None = None
                        ) -> tuple[str, tuple[int, ...], bool]:
        """Indirect tables: the entry (or the default) names a member, or a
        group whose member the selector chooses."""
        e = self.lookup(key)
        self.last_hit = e
        prof = self.profile
        assert prof is not None
        if e is None:
            mh, gh = self.default_member, self.default_group
            hit = False
        else:
            if self.has_counter:
                e.packets += 1
                e.bytes += self.current_length
            mh, gh = e.member, e.group
            hit = True
        m = None
        if gh is not None:
            m = prof.choose(gh, selector or [])
        elif mh is not None:
            m = prof.members.get(mh)
        if m is None:  # no default member, or an emptied group: the P4 default
            return self.default_action, self.default_args, hit
        return m.action, m.args, hit

    def _apply_exact(self, key: tuple[int, ...]) -> tuple[str, tuple[int, ...], bool]:
        e = self._exact.get(key)
        self.last_hit = e
        if e is None:
            return self.default_action, self.default_args, False
        if self.has_counter:
            e.packets += 1
            e.bytes += self.current_length
        return e.action, e.args, True

    def _apply_lpm1(self, key: tuple[int, ...]) -> tuple[str, tuple[int, ...], bool]:
        v = key[0]
        for mask, by_value in self._lpm1:  # type: ignore[union-attr]
            e = by_value.get(v & mask)
            if e is not None:
                self.last_hit = e
                if self.has_counter:
                    e.packets += 1
                    e.bytes += self.current_length
                return e.action, e.args, True
        self.last_hit = None
        return self.default_action, self.default_args, False

    # set by the switch before each packet's pipeline (bytes for direct counters)
    current_length: int = 0

    def lookup(self, key: tuple[int, ...]) -> Entry | None:
        if self.mode == "exact":
            return self._exact.get(tuple(key))
        if self._lpm1 is not None:  # one lpm key: per prefix length, masked value -> entry
            v = key[0]
            for mask, by_value in self._lpm1:
                e = by_value.get(v & mask)
                if e is not None:
                    return e
            return None
        if self.mode == "lpm":
            i = self._lpm_index
            w = self.widths[i]
            k = list(key)
            v = k[i]
            for plen in self._lpm_lens:
                k[i] = v & (((1 << plen) - 1) << (w - plen)) if plen else 0
                e = self._lpm[plen].get(tuple(k))
                if e is not None:
                    return e
            return None
        if len(self._sorted) <= _LINEAR_MAX:
            for e in self._sorted:
                if e.matches_key(key):
                    return e
            return None
        best: Entry | None = None
        for masks, d in self._groups.items():
            cands = d.get(tuple([k & m for k, m in zip(key, masks, strict=True)]))
            if cands:
                for e in cands:
                    if best is not None and (e.priority, e.seq) >= (best.priority, best.seq):
                        break
                    if e.matches_key(key):
                        best = e
                        break
        return best

    def direct_meter_color(self, packet_length: int) -> int:
        e = self.last_hit
        if e is None or e.meter is None:
            return GREEN
        return e.meter.execute(packet_length, self._now())

    # -- entries ------------------------------------------------------------
    def normalize_match(self, i: int, m: Any) -> Any:
        """Canonical form of key ``i``'s match: exact -> int, lpm -> (v, plen),
        ternary/optional -> (v, mask), range -> (lo, hi); values masked to the
        key width, and lpm/ternary values masked by their prefix/mask."""
        kind = self.kinds[i]
        w = self.widths[i]
        full = (1 << w) - 1
        if kind in ("exact", "selector"):
            if isinstance(m, tuple):
                m = m[0]
            return int(m) & full
        if kind == "lpm":
            v, plen = (m, w) if not isinstance(m, tuple) else m
            if not 0 <= plen <= w:
                raise TableError("BAD_MATCH_KEY", f"prefix length {plen} out of range for "
                                 f"{w}-bit key {self.keys[i].name}")
            mask = ((1 << plen) - 1) << (w - plen) if plen else 0
            return (int(v) & mask, plen)
        if kind in ("ternary", "optional"):
            v, mask = (m, full) if not isinstance(m, tuple) else m
            mask = int(mask) & full
            if kind == "optional" and mask not in (0, full):
                raise TableError("BAD_MATCH_KEY", f"optional key {self.keys[i].name} takes a "
                                 "value or a wildcard, not a partial mask")
            return (int(v) & mask, mask)
        if kind == "range":
            lo, hi = (m, m) if not isinstance(m, tuple) else m
            lo, hi = int(lo) & full, int(hi) & full
            if lo > hi:
                raise TableError("BAD_MATCH_KEY", f"range start {lo} above end {hi} for key "
                                 f"{self.keys[i].name}")
            return (lo, hi)
        raise TableError("BAD_MATCH_KEY", f"unknown match kind {kind}")

    def _check_action(self, action: str, args: tuple[int, ...], for_default: bool) -> tuple[int, ...]:
        if action not in self.info.actions:
            raise TableError("INVALID_ACTION_NAME", f"table {self.name} has no action {action}")
        if for_default and action in self.info.table_only_actions:
            raise TableError("INVALID_ACTION_NAME", f"action {action} is @tableonly in {self.name}")
        if not for_default and action in self.info.default_only_actions:
            raise TableError("INVALID_ACTION_NAME",
                             f"action {action} is @defaultonly in {self.name}")
        ainfo = self.actions.get(action)
        params = ainfo.params if ainfo is not None else []
        if len(args) != len(params):
            raise TableError("INVALID_ACTION_NAME", f"action {action} needs {len(params)} "
                             f"parameters, got {len(args)}")
        return tuple(int(a) & ((1 << p.width) - 1) for a, p in zip(args, params, strict=False))

    def _alloc_handle(self) -> int:
        if self._free:
            return heapq.heappop(self._free)
        h = self._next_handle
        self._next_handle += 1
        return h

    def _index_key(self, e: Entry) -> tuple[int, ...]:
        if self.mode == "exact":
            return tuple(e.matches)
        return tuple(m[0] if i == self._lpm_index else m for i, m in enumerate(e.matches))

    def add_entry(self, matches: list[Any], action: str, args: list[int] | tuple[int, ...],
                  priority: int | None = None, *, const: bool = False,
                  _seq: int | None = None, member: int | None = None,
                  group: int | None = None) -> int:
        """Add an entry; ``priority`` is simple_switch_CLI's (smaller wins).
        Entries of an indirect table name a ``member`` or a ``group`` of its
        action profile instead of an action (``action`` is then ignored)."""
        if (self.profile is None) != (member is None and group is None):
            raise TableError("WRONG_TABLE_TYPE",
                             f"table {self.name} is {'in' if self.profile else ''}direct: "
                             f"entries name {'a member or group' if self.profile else 'an action'}")
        if len(matches) != len(self.keys):
            raise TableError("BAD_MATCH_KEY", f"table {self.name} needs {len(self.keys)} key "
                             f"fields, got {len(matches)}")
        if self.info.entries_const and not const:
            raise TableError("IMMUTABLE_TABLE_ENTRIES", f"table {self.name} has const entries")
        norm = [self.normalize_match(i, m) for i, m in enumerate(matches)]
        if self.profile is None:
            args_t = self._check_action(action, tuple(args), for_default=False)
        else:
            action, args_t = "", ()
            self._check_ref(member, group)
        if len(self.entries) >= self.info.size:
            raise TableError("TABLE_FULL", f"table {self.name} holds at most {self.info.size} "
                             "entries")
        if self.needs_priority:
            if priority is None:
                raise TableError("BAD_MATCH_KEY", f"table {self.name} needs a priority")
            prio = int(priority)
        else:
            prio = -1
        seq = self._seq if _seq is None else _seq
        self._seq += 1
        e = Entry(handle=-1, matches=norm, action=action, args=args_t, priority=prio, seq=seq,
                  const=const, member=member, group=group)
        if self.mode == "priority":
            if (prio, tuple(norm)) in self._prio_keys:
                raise TableError("DUPLICATE_ENTRY", "an entry with the same key and priority "
                                 "exists")
            masks, values, ranges = [], [], []
            for i, (kind, m) in enumerate(zip(self.kinds, norm, strict=False)):
                w = self.widths[i]
                full = (1 << w) - 1
                if kind == "exact":
                    masks.append(full)
                    values.append(m)
                elif kind == "lpm":
                    v, plen = m
                    masks.append(((1 << plen) - 1) << (w - plen) if plen else 0)
                    values.append(v)
                elif kind in ("ternary", "optional"):
                    masks.append(m[1])
                    values.append(m[0])
                elif kind == "range":
                    masks.append(0)
                    values.append(0)
                    ranges.append((i, m[0], m[1]))
                else:  # selector
                    masks.append(0)
                    values.append(0)
            e._masks, e._values, e._ranges = tuple(masks), tuple(values), tuple(ranges)
        elif self.mode == "exact":
            if tuple(norm) in self._exact:
                raise TableError("DUPLICATE_ENTRY", f"key already in table {self.name} (entry "
                                 f"{self._exact[tuple(norm)].handle})")
        else:
            plen = norm[self._lpm_index][1]
            if self._index_key(e) in self._lpm.get(plen, {}):
                raise TableError("DUPLICATE_ENTRY", f"key already in table {self.name}")
        e.handle = self._alloc_handle()
        self._ref(e, 1)
        if self.meter_kind is not None:
            e.meter = Meter(self.meter_kind)
        self.entries[e.handle] = e
        if self.mode == "exact":
            self._exact[tuple(norm)] = e
        elif self.mode == "lpm":
            plen = norm[self._lpm_index][1]
            d = self._lpm.get(plen)
            if d is None:
                d = self._lpm[plen] = {}
                self._lpm_lens = sorted(self._lpm, reverse=True)
            d[self._index_key(e)] = e
            if self._lpm1 is not None:
                d1 = self._lpm1_of.get(plen)
                if d1 is None:
                    d1 = self._lpm1_of[plen] = {}
                    self._rebuild_lpm1()
                d1[norm[0][0]] = e
        else:
            bisect.insort(self._sorted, e, key=_order)
            self._prio_keys.add((prio, tuple(norm)))
            bucket = self._groups.setdefault(e._masks, {}).setdefault(e._values, [])
            bisect.insort(bucket, e, key=_order)
        return e.handle

    def _rebuild_lpm1(self) -> None:
        if self._lpm1 is None:
            return
        w = self.widths[0]
        self._lpm1 = [((((1 << plen) - 1) << (w - plen)) if plen else 0, self._lpm1_of[plen])
                      for plen in sorted(self._lpm1_of, reverse=True)]

    def get_entry(self, handle: int) -> Entry:
        e = self.entries.get(handle)
        if e is None:
            raise TableError("INVALID_HANDLE", f"no entry with handle {handle} in {self.name}")
        return e

    def modify_entry(self, handle: int, action: str, args: list[int] | tuple[int, ...]) -> None:
        e = self.get_entry(handle)
        if e.const:
            raise TableError("IMMUTABLE_TABLE_ENTRIES", f"entry {handle} of {self.name} is const")
        e.args = self._check_action(action, tuple(args), for_default=False)
        e.action = action

    def delete_entry(self, handle: int) -> None:
        e = self.get_entry(handle)
        if e.const:
            raise TableError("IMMUTABLE_TABLE_ENTRIES", f"entry {handle} of {self.name} is const")
        self._remove(e)

    def _remove(self, e: Entry) -> None:
        del self.entries[e.handle]
        self._ref(e, -1)
        heapq.heappush(self._free, e.handle)
        if self.mode == "exact":
            del self._exact[tuple(e.matches)]
        elif self.mode == "lpm":
            plen = e.matches[self._lpm_index][1]
            d = self._lpm[plen]
            del d[self._index_key(e)]
            if self._lpm1 is not None:
                d1 = self._lpm1_of[plen]
                del d1[e.matches[0][0]]
                if not d1:
                    del self._lpm1_of[plen]
                    self._rebuild_lpm1()
            if not d:
                del self._lpm[plen]
                self._lpm_lens = sorted(self._lpm, reverse=True)
        else:
            self._sorted.remove(e)
            self._prio_keys.discard((e.priority, tuple(e.matches)))
            group = self._groups[e._masks]
            bucket = group[e._values]
            bucket.remove(e)
            if not bucket:
                del group[e._values]
                if not group:
                    del self._groups[e._masks]
        if self.last_hit is e:
            self.last_hit = None

    def clear(self) -> None:
        """Remove every entry that is not const (the default entry stays)."""
        for e in list(self.entries.values()):
            if not e.const:
                self._remove(e)

    # -- indirect tables -----------------------------------------------------------
    def _check_ref(self, member: int | None, group: int | None) -> None:
        prof = self.profile
        assert prof is not None
        if (member is None) == (group is None):
            raise TableError("BAD_ACTION_DATA", "name one member or one group")
        try:
            if member is not None:
                prof.member(member)
            else:
                assert group is not None
                if not prof.group(group):
                    raise TableError("EMPTY_GRP", f"group {group} has no members")
        except ActionProfileError as err:
            raise TableError(err.code, err.detail) from None

    def _ref(self, e: Entry, n: int) -> None:
        prof = self.profile
        if prof is None:
            return
        if e.member is not None:
            prof.member_refs[e.member] = prof.member_refs.get(e.member, 0) + n
        if e.group is not None:
            prof.group_refs[e.group] = prof.group_refs.get(e.group, 0) + n

    def modify_indirect(self, handle: int, member: int | None = None,
                        group: int | None = None) -> None:
        """Point entry ``handle`` of an indirect table at another member or group."""
        if self.profile is None:
            raise TableError("WRONG_TABLE_TYPE", f"table {self.name} is direct")
        e = self.get_entry(handle)
        if e.const:
            raise TableError("IMMUTABLE_TABLE_ENTRIES", f"entry {handle} of {self.name} is const")
        self._check_ref(member, group)
        self._ref(e, -1)
        e.member, e.group = member, group
        self._ref(e, 1)

    def set_default_indirect(self, member: int | None = None, group: int | None = None) -> None:
        """The member or group an indirect table's miss uses."""
        if self.profile is None:
            raise TableError("WRONG_TABLE_TYPE", f"table {self.name} is direct")
        self._check_ref(member, group)
        self.default_member, self.default_group = member, group

    def set_default(self, action: str, args: list[int] | tuple[int, ...]) -> None:
        if self.info.default_const and (action != self.info.default_action
                                        or tuple(args) != tuple(self.info.default_args)):
            raise TableError("DEFAULT_ACTION_IS_CONST",
                             f"the default action of {self.name} is const")
        self.default_args = self._check_action(action, tuple(args), for_default=True)
        self.default_action = action

    def reset_default(self) -> None:
        self.default_member = self.default_group = None
        self.default_action = self.info.default_action
        self.default_args = tuple(self.info.default_args)

    def num_entries(self) -> int:
        return len(self.entries)

    def sorted_entries(self) -> list[Entry]:
        return sorted(self.entries.values(), key=lambda e: e.handle)

    def reset_counters(self) -> None:
        for e in self.entries.values():
            e.packets = 0
            e.bytes = 0

    # -- const entries ----------------------------------------------------------
    def _install_const_entries(self, entries: list[EntryInfo]) -> None:
        if not entries:
            return
        n = len(entries)
        for idx, ent in enumerate(entries):
            if self.needs_priority:
                if ent.priority is None:
                    prio = idx + 1  # earlier entries win
                elif self.info.largest_priority_wins:
                    prio = _MAX_PRIO - int(ent.priority)
                else:
                    prio = int(ent.priority)
            else:
                prio = None
            # const entries may repeat a key (the first one wins); skip duplicates
            try:
                self.add_entry(list(ent.matches), ent.action, list(ent.args), prio,
                               const=self.info.entries_const, _seq=idx - n)
            except TableError as err:
                if err.code != "DUPLICATE_ENTRY":
                    raise
