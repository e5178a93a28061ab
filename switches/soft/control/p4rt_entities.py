"""P4Runtime entities on the soft switch: Write updates and Read queries.

Callers hold ``switch.lock``. Every function raises ``P4RTError`` with the
code a PI (BMv2) user gets for the same mistake:
- unknown table/action/counter/... id, unknown or missing match field or
  parameter, a value wider than its field, malformed LPM/ternary/range:
  INVALID_ARGUMENT ("Invalid P4 id" for ids, as PI);
- INSERT of an existing entry: ALREADY_EXISTS; MODIFY/DELETE of a missing
  one: NOT_FOUND; a full table: RESOURCE_EXHAUSTED;
- @defaultonly action in an entry, @tableonly action as default, a const
  default action, writes to a const table: PERMISSION_DENIED;
- an index beyond an array: OUT_OF_RANGE; a multicast group id in the
  range reserved for clone sessions: OUT_OF_RANGE.

P4Runtime priorities (larger wins) map to the table's own (smaller wins) as
``2**31 - 1 - priority``. Clone sessions with one replica use a mirroring
session to that port; with several, a multicast group ``0x8000 | session``
(group ids from 0x8000 up are therefore reserved).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, TypeAlias

import grpc
from p4.v1 import p4runtime_pb2 as pb

from switches.soft.control.p4rt_codec import (
    P4RTError,
    decode,
    encode,
    invalid,
    not_found,
    unimplemented,
)
from switches.soft.control.p4rt_pipeline import (
    SCOPE_DEFAULT_ONLY,
    SCOPE_TABLE_ONLY,
    ActionMeta,
    ExternMeta,
    OneShot,
    Pipeline,
    ProfileMeta,
    TableMeta,
)
from switches.soft.runtime.action_profiles import ActionProfile, ActionProfileError
from switches.soft.runtime.externs import Meter
from switches.soft.runtime.pre import PreError
from switches.soft.runtime.tables import Entry, Table, TableError

if TYPE_CHECKING:
    from google.protobuf.internal.containers import RepeatedCompositeFieldContainer

    from switches.soft.runtime.switch import SoftSwitch

MAX_PRIO = (1 << 31) - 1
RESERVED_MGID = 0x8000
INSERT, MODIFY, DELETE = pb.Update.INSERT, pb.Update.MODIFY, pb.Update.DELETE

# One key's match in the switch's form: a value (exact, selector) or a pair
# (lpm: value and prefix length; ternary, optional: value and mask; range: low
# and high); see Table.normalize_match.
KeyMatch = int | tuple[int, int]
# the entries of the indexed externs: an optional index, else every cell
IndexedEntry: TypeAlias = "pb.CounterEntry | pb.MeterEntry | pb.RegisterEntry"

_TABLE_ERRORS = {
    "TABLE_FULL": grpc.StatusCode.RESOURCE_EXHAUSTED,
    "DUPLICATE_ENTRY": grpc.StatusCode.ALREADY_EXISTS,
    "IMMUTABLE_TABLE_ENTRIES": grpc.StatusCode.PERMISSION_DENIED,
    "DEFAULT_ACTION_IS_CONST": grpc.StatusCode.PERMISSION_DENIED,
    "INVALID_HANDLE": grpc.StatusCode.NOT_FOUND,
}


_PROFILE_ERRORS = {
    "TABLE_FULL": grpc.StatusCode.RESOURCE_EXHAUSTED,
    "INVALID_MBR_HANDLE": grpc.StatusCode.NOT_FOUND,
    "INVALID_GRP_HANDLE": grpc.StatusCode.NOT_FOUND,
    "MBR_STILL_USED": grpc.StatusCode.FAILED_PRECONDITION,
    "GRP_STILL_USED": grpc.StatusCode.FAILED_PRECONDITION,
    "EMPTY_GRP": grpc.StatusCode.INVALID_ARGUMENT,
}


def _profile_error(e: TableError | ActionProfileError) -> P4RTError:
    return P4RTError(_PROFILE_ERRORS.get(e.code, _TABLE_ERRORS.get(
        e.code, grpc.StatusCode.INVALID_ARGUMENT)), str(e))


def _table_error(e: TableError) -> P4RTError:
    return P4RTError(_TABLE_ERRORS.get(e.code, grpc.StatusCode.INVALID_ARGUMENT), str(e))


def _permission(msg: str) -> P4RTError:
    return P4RTError(grpc.StatusCode.PERMISSION_DENIED, msg)


def _out_of_range(msg: str) -> P4RTError:
    return P4RTError(grpc.StatusCode.OUT_OF_RANGE, msg)


# ---------------------------------------------------------------------------
# table entries


def _matches(tm: TableMeta, te: pb.TableEntry) -> list[KeyMatch]:
    """The switch-form match list for ``te`` (don't-care for omitted fields)."""
    keys = tm.info.keys
    out: list[KeyMatch] = []
    for k in keys:
        full = (1 << k.width) - 1
        dont_care: dict[str, KeyMatch] = {"exact": 0, "selector": 0, "lpm": (0, 0),
                                          "ternary": (0, 0), "optional": (0, 0),
                                          "range": (0, full)}
        out.append(dont_care.get(k.match_kind, 0))
    seen: set[int] = set()
    for fm in te.match:
        f = tm.fields_by_id.get(fm.field_id)
        if f is None:
            raise invalid(f"Unknown field id {fm.field_id} in match key of {tm.name}")
        if fm.field_id in seen:
            raise invalid(f"Duplicate field id {fm.field_id} in match key of {tm.name}")
        seen.add(fm.field_id)
        which = fm.WhichOneof("field_match_type")
        w = f.width
        what = f"match field {f.name}"
        if which != f.kind:
            raise invalid(f"Invalid match type for {f.name}: {which}, expected {f.kind}")
        if which == "exact":
            out[f.key_index] = decode(fm.exact.value, w, what)
        elif which == "lpm":
            v = decode(fm.lpm.value, w, what)
            plen = fm.lpm.prefix_len
            if plen < 0 or plen > w:
                raise invalid(f"Prefix length {plen} out of range for {what} ({w} bits)")
            if plen == 0:
                raise invalid(f"Invalid representation of 'don't care' LPM match for {f.name}, "
                              "omit the match field instead of using a prefix length of 0")
            if v & ((1 << (w - plen)) - 1):
                raise invalid(f"Invalid LPM value for {f.name}, incorrect number of trailing "
                              "zeros")
            out[f.key_index] = (v, plen)
        elif which == "ternary":
            v = decode(fm.ternary.value, w, what)
            m = decode(fm.ternary.mask, w, f"mask of {f.name}")
            if m == 0:
                raise invalid(f"Invalid representation of 'don't care' ternary match for "
                              f"{f.name}, omit the match field instead of using a 0 mask")
            if v & ~m:
                raise invalid(f"Invalid ternary value for {f.name}, make sure value & mask "
                              "== value")
            out[f.key_index] = (v, m)
        elif which == "range":
            lo = decode(fm.range.low, w, f"low of {f.name}")
            hi = decode(fm.range.high, w, f"high of {f.name}")
            if lo == 0 and hi == (1 << w) - 1:
                raise invalid(f"Invalid representation of 'don't care' range match for "
                              f"{f.name}, omit the match field instead")
            if lo > hi:
                raise invalid(f"Invalid range value for {f.name}, make sure low <= high")
            out[f.key_index] = (lo, hi)
        elif which == "optional":
            out[f.key_index] = (decode(fm.optional.value, w, what), (1 << w) - 1)
        else:
            raise unimplemented(f"match type {which} is not supported")
    for f in tm.fields:
        if f.id not in seen and f.kind == "exact":
            raise invalid(f"Missing exact match field {f.name} in match key of {tm.name}")
    return out


def _priority(tm: TableMeta, table: Table, te: pb.TableEntry, matches: list[KeyMatch]
              ) -> int | None:
    if tm.needs_priority:
        if te.priority <= 0:
            raise invalid(f"Table {tm.name} needs a positive priority (ternary, range or "
                          "optional match)")
        return MAX_PRIO - te.priority
    if te.priority != 0:
        raise invalid(f"Non-zero priority for table {tm.name}, which has no ternary, range or "
                      "optional match field")
    if table.needs_priority:  # several lpm keys: longer prefixes win
        total = sum(k.width for k in tm.info.keys)
        got = sum(m[1] for m, k in zip(matches, tm.info.keys, strict=False)
                  if k.match_kind == "lpm" and isinstance(m, tuple))
        return total - got
    return None


def find_entry(table: Table, matches: list[KeyMatch], prio: int | None) -> Entry | None:
    norm = [table.normalize_match(i, m) for i, m in enumerate(matches)]
    if table.mode == "exact":
        e = table.lookup(tuple(norm))
        return e
    want_prio = -1 if prio is None else prio
    for e in table.entries.values():
        if e.matches == norm and (table.mode != "priority" or e.priority == want_prio):
            return e
    return None


def _action_of(pipe: Pipeline, tm: TableMeta, action: pb.TableAction, default: bool
               ) -> tuple[str, list[int]]:
    which = action.WhichOneof("type")
    if which is None:
        raise invalid(f"Table entry for {tm.name} has no action")
    if which != "action":
        raise invalid(f"Table {tm.name} has no action profile: its entries take an action")
    a = action.action
    meta = pipe.actions.get(a.action_id)
    if meta is None:
        raise invalid(f"Invalid P4 id {a.action_id}: not an action")
    scope = tm.scopes.get(a.action_id)
    if scope is None:
        raise invalid(f"Invalid action for table: {meta.name} is not an action of {tm.name}")
    if scope == SCOPE_TABLE_ONLY and default:
        raise _permission(f"Cannot use TABLE_ONLY action {meta.name} as default action")
    if scope == SCOPE_DEFAULT_ONLY and not default:
        raise _permission(f"Cannot use DEFAULT_ONLY action {meta.name} in table entry")
    return meta.name, action_args(meta, a.params)


def action_args(meta: ActionMeta, params: Iterable[pb.Action.Param]) -> list[int]:
    args = [0] * len(meta.params)
    seen: set[int] = set()
    for p in params:
        got = meta.params_by_id.get(p.param_id)
        if got is None:
            raise invalid(f"Unknown parameter id {p.param_id} for action {meta.name}")
        if p.param_id in seen:
            raise invalid(f"Duplicate parameter id {p.param_id} for action {meta.name}")
        seen.add(p.param_id)
        i, pm = got
        args[i] = decode(p.value, pm.width, f"parameter {pm.name} of {meta.name}")
    if len(seen) != len(meta.params):
        missing = [pm.name for pm in meta.params if pm.id not in seen]
        raise invalid(f"Missing parameter(s) {', '.join(missing)} for action {meta.name}")
    return args


def write_table_entry(pipe: Pipeline, sw: SoftSwitch, utype: int, te: pb.TableEntry) -> None:
    tm = pipe.table(te.table_id)
    table = sw.tables[tm.name]
    if te.HasField("time_since_last_hit"):
        raise invalid("time_since_last_hit must not be set in a WriteRequest")
    if te.idle_timeout_ns:
        raise unimplemented(f"table {tm.name} does not support idle timeout")
    if te.is_default_action:
        if utype != MODIFY:
            raise invalid("The default entry can only be modified (MODIFY), not inserted or "
                          "deleted")
        if len(te.match) or te.priority:
            raise invalid("The default entry must have no match key and priority 0")
        if tm.const_default:
            raise _permission(f"Cannot set / reset default action for table {tm.name} which "
                              "has a const default action")
        try:
            if not te.HasField("action"):
                table.reset_default()
            else:
                name, args = _action_of(pipe, tm, te.action, default=True)
                table.set_default(name, args)
        except TableError as e:
            raise _table_error(e) from None
        return
    matches = _matches(tm, te)
    prio = _priority(tm, table, te, matches)
    try:
        existing = find_entry(table, matches, prio)
    except TableError as e:
        raise _table_error(e) from None
    if utype == INSERT:
        if tm.is_const:
            raise _permission(f"Table {tm.name} has const entries: no INSERT")
        if existing is not None:
            raise P4RTError(grpc.StatusCode.ALREADY_EXISTS,
                            "Match entry exists, use MODIFY if you wish to change action")
        handle = _entry_action(pipe, sw, tm, te.action).add(table, matches, prio)
        _apply_direct(tm, table.entries[handle], te)
    elif utype == MODIFY:
        if existing is None:
            raise not_found(f"Cannot find match entry in {tm.name}")
        ap = pipe.profile_of_table(tm)
        if ap is None and existing.const:
            if te.HasField("action"):
                raise _permission(f"Cannot change the action of a const entry of {tm.name}")
            _apply_direct(tm, existing, te)
            return
        _entry_action(pipe, sw, tm, te.action).modify(table, existing.handle)
        _apply_direct(tm, existing, te)
    elif utype == DELETE:
        if tm.is_const:
            raise _permission(f"Table {tm.name} has const entries: no DELETE")
        if existing is None:
            raise not_found(f"Cannot find match entry in {tm.name}")
        try:
            table.delete_entry(existing.handle)
        except TableError as e:
            raise _table_error(e) from None
        ap = pipe.profile_of_table(tm)
        if ap is not None:
            _drop_oneshot(sw.action_profiles[ap.name], ap.oneshots.pop((tm.name, existing.handle),
                                                                       None))
    else:
        raise invalid("Invalid update type")


@dataclass
class _DirectAction:
    """The action a direct table's entry names."""

    name: str
    args: list[int]

    def add(self, table: Table, matches: list[KeyMatch], prio: int | None) -> int:
        try:
            return table.add_entry(matches, self.name, self.args, prio)
        except TableError as e:
            raise _table_error(e) from None

    def modify(self, table: Table, handle: int) -> None:
        try:
            table.modify_entry(handle, self.name, self.args)
        except TableError as e:
            raise _table_error(e) from None


@dataclass
class _IndirectAction:
    """What an indirect table's entry names: a member, a group, or a one-shot
    action set (made into a group, kept in ``ap.oneshots`` while the entry
    lives; dropped again if the table refuses the entry)."""

    table_name: str  # the key of ``ap.oneshots``
    ap: ProfileMeta
    prof: ActionProfile
    member: int | None
    group: int | None
    oneshot: OneShot | None

    def add(self, table: Table, matches: list[KeyMatch], prio: int | None) -> int:
        try:
            handle = table.add_entry(matches, "", (), prio, member=self.member, group=self.group)
        except TableError as e:
            _drop_oneshot(self.prof, self.oneshot)
            raise _profile_error(e) from None
        if self.oneshot is not None:
            self.ap.oneshots[(self.table_name, handle)] = self.oneshot
        return handle

    def modify(self, table: Table, handle: int) -> None:
        try:
            table.modify_indirect(handle, member=self.member, group=self.group)
        except TableError as e:
            _drop_oneshot(self.prof, self.oneshot)
            raise _profile_error(e) from None
        _drop_oneshot(self.prof, self.ap.oneshots.pop((self.table_name, handle), None))
        if self.oneshot is not None:
            self.ap.oneshots[(self.table_name, handle)] = self.oneshot


def _entry_action(pipe: Pipeline, sw: SoftSwitch, tm: TableMeta, action: pb.TableAction
                  ) -> _DirectAction | _IndirectAction:
    """The action of an entry to insert or modify in table ``tm``."""
    ap = pipe.profile_of_table(tm)
    if ap is None:
        return _DirectAction(*_action_of(pipe, tm, action, default=False))
    prof = sw.action_profiles[ap.name]
    return _IndirectAction(tm.name, ap, prof, *_indirect_ref(pipe, tm, ap, prof, action))


# ---------------------------------------------------------------------------
# action profiles and selectors (indirect tables)


def _profile(pipe: Pipeline, sw: SoftSwitch, profile_id: int) -> tuple[ProfileMeta, ActionProfile]:
    ap = pipe.profile(profile_id)
    return ap, sw.action_profiles[ap.name]


def _member_action(pipe: Pipeline, prof: ActionProfile, action: pb.Action) -> tuple[str, list[int]]:
    meta = pipe.actions.get(action.action_id)
    if meta is None:
        raise invalid(f"Invalid P4 id {action.action_id}: not an action")
    if meta.name not in prof.info.actions:
        raise invalid(f"Invalid action for action profile {prof.name}: {meta.name}")
    return meta.name, action_args(meta, action.params)


def _weight(w: int, where: str) -> None:
    # BMv2 groups are sets of members: each member once, with weight 1
    if w > 1:
        raise unimplemented(f"{where}: member weights other than 1 are not supported")
    if w < 0:
        raise invalid(f"{where}: negative weight")


def write_action_profile_member(pipe: Pipeline, sw: SoftSwitch, utype: int,
                                m: pb.ActionProfileMember) -> None:
    ap, prof = _profile(pipe, sw, m.action_profile_id)
    h = ap.members.get(m.member_id)
    try:
        if utype == INSERT:
            if h is not None:
                raise P4RTError(grpc.StatusCode.ALREADY_EXISTS,
                                f"Member {m.member_id} exists in {ap.name}")
            name, args = _member_action(pipe, prof, m.action)
            ap.members[m.member_id] = prof.add_member(name, args)
        elif h is None:
            raise not_found(f"No member {m.member_id} in {ap.name}")
        elif utype == MODIFY:
            name, args = _member_action(pipe, prof, m.action)
            prof.modify_member(h, name, args)
        elif utype == DELETE:
            prof.delete_member(h)
            del ap.members[m.member_id]
        else:
            raise invalid("Invalid update type")
    except ActionProfileError as e:
        raise _profile_error(e) from None


def _wanted_profiles(pipe: Pipeline, profile_id: int) -> list[ProfileMeta]:
    """The profiles a read names: all of them for id 0 (P4Runtime's wildcard)."""
    if profile_id == 0:
        return list(pipe.action_profiles.values())
    return [pipe.profile(profile_id)]


def _wanted_handles(pipe: Pipeline, sw: SoftSwitch, profile_id: int, wanted: int,
                    groups: bool) -> Iterator[tuple[ProfileMeta, ActionProfile, int, int]]:
    """(profile, its runtime profile, P4Runtime id, runtime handle) of the
    members (or ``groups``) a read names, by id; ``wanted`` 0: all of them."""
    for ap in _wanted_profiles(pipe, profile_id):
        prof = sw.action_profiles[ap.name]
        for pid, h in sorted((ap.groups if groups else ap.members).items()):
            if not wanted or pid == wanted:
                yield ap, prof, pid, h


def read_action_profile_members(pipe: Pipeline, sw: SoftSwitch, want: pb.ActionProfileMember
                                ) -> Iterator[pb.Entity]:
    for ap, prof, mid, h in _wanted_handles(pipe, sw, want.action_profile_id, want.member_id,
                                            groups=False):
        m = prof.members.get(h)
        if m is None:
            continue
        out = pb.ActionProfileMember(action_profile_id=ap.id, member_id=mid)
        _set_action(pipe, out, m.action, m.args)
        yield pb.Entity(action_profile_member=out)


def _set_group_members(ap: ProfileMeta, prof: ActionProfile, gh: int,
                       g: pb.ActionProfileGroup) -> None:
    want: list[int] = []
    for gm in g.members:
        _weight(gm.weight, f"group {g.group_id} of {ap.name}")
        h = ap.members.get(gm.member_id)
        if h is None:
            raise not_found(f"No member {gm.member_id} in {ap.name}")
        if h in want:
            raise invalid(f"Member {gm.member_id} appears twice in group {g.group_id}")
        want.append(h)
    if g.max_size and len(want) > g.max_size:
        raise P4RTError(grpc.StatusCode.RESOURCE_EXHAUSTED,
                        f"Group {g.group_id} has {len(want)} members, max_size {g.max_size}")
    have = list(prof.group(gh))
    for h in want:
        if h not in have:
            prof.add_member_to_group(h, gh)
    for h in have:
        if h not in want:
            prof.remove_member_from_group(h, gh)


def write_action_profile_group(pipe: Pipeline, sw: SoftSwitch, utype: int,
                               g: pb.ActionProfileGroup) -> None:
    ap, prof = _profile(pipe, sw, g.action_profile_id)
    if not prof.with_selector:
        raise invalid(f"Action profile {ap.name} has no selector: it has no groups")
    gh = ap.groups.get(g.group_id)
    try:
        if utype == INSERT:
            if gh is not None:
                raise P4RTError(grpc.StatusCode.ALREADY_EXISTS,
                                f"Group {g.group_id} exists in {ap.name}")
            gh = prof.create_group()
            try:
                _set_group_members(ap, prof, gh, g)
            except (P4RTError, ActionProfileError):
                prof.delete_group(gh)
                raise
            ap.groups[g.group_id] = gh
        elif gh is None:
            raise not_found(f"No group {g.group_id} in {ap.name}")
        elif utype == MODIFY:
            _set_group_members(ap, prof, gh, g)
        elif utype == DELETE:
            prof.delete_group(gh)
            del ap.groups[g.group_id]
        else:
            raise invalid("Invalid update type")
    except ActionProfileError as e:
        raise _profile_error(e) from None


def read_action_profile_groups(pipe: Pipeline, sw: SoftSwitch, want: pb.ActionProfileGroup
                               ) -> Iterator[pb.Entity]:
    for ap, prof, gid, gh in _wanted_handles(pipe, sw, want.action_profile_id, want.group_id,
                                             groups=True):
        members = prof.groups.get(gh)
        if members is None:
            continue
        out = pb.ActionProfileGroup(action_profile_id=ap.id, group_id=gid)
        for h in members:
            mid = ap.member_id(h)
            if mid is not None:
                out.members.add(member_id=mid, weight=1)
        yield pb.Entity(action_profile_group=out)


def _indirect_ref(pipe: Pipeline, tm: TableMeta, ap: ProfileMeta, prof: ActionProfile,
                  action: pb.TableAction) -> tuple[int | None, int | None, OneShot | None]:
    """(member handle, group handle, one-shot record) an entry's action names.
    A one-shot action set becomes a group of fresh members, as PI does."""
    which = action.WhichOneof("type")
    if which == "action_profile_member_id":
        h = ap.members.get(action.action_profile_member_id)
        if h is None:
            raise not_found(f"No member {action.action_profile_member_id} in {ap.name}")
        return h, None, None
    if which == "action_profile_group_id":
        h = ap.groups.get(action.action_profile_group_id)
        if h is None:
            raise not_found(f"No group {action.action_profile_group_id} in {ap.name}")
        return None, h, None
    if which == "action_profile_action_set":
        if not prof.with_selector:
            raise invalid(f"Table {tm.name}: a one-shot action set needs an action selector")
        acts = action.action_profile_action_set.action_profile_actions
        if not acts:
            raise invalid(f"Table {tm.name}: empty one-shot action set")
        made: list[int] = []
        gh = None
        try:
            for a in acts:
                _weight(a.weight, f"one-shot action set of {tm.name}")
                name, args = _member_action(pipe, prof, a.action)
                made.append(prof.add_member(name, args))
            gh = prof.create_group()
            for h in made:
                prof.add_member_to_group(h, gh)
        except (P4RTError, ActionProfileError) as e:
            _drop_made(prof, gh, made)
            if isinstance(e, ActionProfileError):
                raise _profile_error(e) from None
            raise
        saved = pb.ActionProfileActionSet()
        saved.CopyFrom(action.action_profile_action_set)
        return None, gh, OneShot(gh, made, saved)
    if which == "action":
        raise invalid(f"Table {tm.name} has action profile {ap.name}: entries name a member, "
                      "a group or a one-shot action set")
    raise invalid(f"Table entry for {tm.name} has no action")


def _drop_made(prof: ActionProfile, gh: int | None, members: list[int]) -> None:
    if gh is not None:
        prof.delete_group(gh)
    for h in members:
        prof.delete_member(h)


def _drop_oneshot(prof: ActionProfile, rec: OneShot | None) -> None:
    if rec is not None:
        _drop_made(prof, rec.group, rec.members)


def _apply_direct(tm: TableMeta, e: Entry, te: pb.TableEntry) -> None:
    if te.HasField("counter_data"):
        if tm.direct_counter is None:
            raise invalid(f"Table {tm.name} has no direct counter")
        e.packets = te.counter_data.packet_count
        e.bytes = te.counter_data.byte_count
    if te.HasField("meter_config"):
        if tm.direct_meter is None or e.meter is None:
            raise invalid(f"Table {tm.name} has no direct meter")
        _set_meter(e.meter, te.meter_config)
    if te.HasField("meter_counter_data"):
        raise unimplemented("meter_counter_data is not supported")


def _entry_matches(tm: TableMeta, e: Entry) -> list[pb.FieldMatch]:
    out = []
    for f in tm.fields:
        m = e.matches[f.key_index]
        w = f.width
        full = (1 << w) - 1
        fm = pb.FieldMatch(field_id=f.id)
        if f.kind == "exact":
            fm.exact.value = encode(m)
        elif f.kind == "lpm":
            if m[1] == 0:
                continue
            fm.lpm.value = encode(m[0])
            fm.lpm.prefix_len = m[1]
        elif f.kind == "ternary":
            if m[1] == 0:
                continue
            fm.ternary.value = encode(m[0])
            fm.ternary.mask = encode(m[1])
        elif f.kind == "optional":
            if m[1] == 0:
                continue
            fm.optional.value = encode(m[0])
        elif f.kind == "range":
            if m[0] == 0 and m[1] == full:
                continue
            fm.range.low = encode(m[0])
            fm.range.high = encode(m[1])
        out.append(fm)
    return out


def _set_action(pipe: Pipeline, msg: pb.TableAction | pb.ActionProfileMember, name: str,
                args: tuple[int, ...] | list[int]) -> None:
    meta = pipe.action_by_name.get(name)
    if meta is None:
        return
    msg.action.action_id = meta.id
    for pm, v in zip(meta.params, args, strict=False):
        msg.action.params.add(param_id=pm.id, value=encode(v, pm.width))


def _entry_msg(pipe: Pipeline, tm: TableMeta, table: Table, e: Entry, want: pb.TableEntry
               ) -> pb.TableEntry:
    out = pb.TableEntry(table_id=tm.id)
    out.match.extend(_entry_matches(tm, e))
    ap = pipe.profile_of_table(tm) if (e.member is not None or e.group is not None) else None
    if ap is not None:
        rec = ap.oneshots.get((tm.name, e.handle))
        if rec is not None:
            out.action.action_profile_action_set.CopyFrom(rec.actions)
        elif e.group is not None:
            out.action.action_profile_group_id = ap.group_id(e.group) or 0
        elif e.member is not None:
            out.action.action_profile_member_id = ap.member_id(e.member) or 0
    else:
        _set_action(pipe, out.action, e.action, e.args)
    if tm.needs_priority:
        out.priority = MAX_PRIO - e.priority
    if e.const:
        out.is_const = True
    if want.HasField("counter_data") and tm.direct_counter is not None:
        out.counter_data.packet_count = e.packets
        out.counter_data.byte_count = e.bytes
    if want.HasField("meter_config") and e.meter is not None and e.meter.configured:
        _meter_config(e.meter, out.meter_config)
    return out


def read_table_entries(pipe: Pipeline, sw: SoftSwitch, want: pb.TableEntry) -> Iterator[pb.Entity]:
    if want.table_id == 0:
        metas = list(pipe.tables.values())
    else:
        metas = [pipe.table(want.table_id)]
    for tm in metas:
        table = sw.tables[tm.name]
        if want.is_default_action:
            out = pb.TableEntry(table_id=tm.id, is_default_action=True)
            _set_action(pipe, out.action, table.default_action, table.default_args)
            if want.HasField("counter_data") and tm.direct_counter is not None:
                out.counter_data.SetInParent()
            yield pb.Entity(table_entry=out)
            continue
        if len(want.match):
            matches = _matches(tm, want)
            prio = _priority(tm, table, want, matches)
            try:
                e = find_entry(table, matches, prio)
            except TableError as err:
                raise _table_error(err) from None
            if e is not None:
                yield pb.Entity(table_entry=_entry_msg(pipe, tm, table, e, want))
            continue
        for e in table.sorted_entries():
            if want.priority and (not tm.needs_priority
                                  or MAX_PRIO - e.priority != want.priority):
                continue
            yield pb.Entity(table_entry=_entry_msg(pipe, tm, table, e, want))


# ---------------------------------------------------------------------------
# direct counters and meters


def _direct_target(pipe: Pipeline, sw: SoftSwitch, te: pb.TableEntry, kind: str
                   ) -> tuple[TableMeta, Entry]:
    tm = pipe.table(te.table_id)
    if (tm.direct_counter if kind == "counter" else tm.direct_meter) is None:
        raise invalid(f"Table {tm.name} has no direct {kind}")
    if te.is_default_action:
        raise unimplemented(f"direct {kind} of the default entry is not supported")
    table = sw.tables[tm.name]
    matches = _matches(tm, te)
    prio = _priority(tm, table, te, matches)
    try:
        e = find_entry(table, matches, prio)
    except TableError as err:
        raise _table_error(err) from None
    if e is None:
        raise not_found(f"Cannot find match entry in {tm.name}")
    return tm, e


def write_direct_counter(pipe: Pipeline, sw: SoftSwitch, utype: int,
                         dc: pb.DirectCounterEntry) -> None:
    if utype != MODIFY:
        raise invalid("DirectCounterEntry only supports MODIFY")
    _, e = _direct_target(pipe, sw, dc.table_entry, "counter")
    if dc.HasField("data"):
        e.packets = dc.data.packet_count
        e.bytes = dc.data.byte_count


def write_direct_meter(pipe: Pipeline, sw: SoftSwitch, utype: int,
                       dm: pb.DirectMeterEntry) -> None:
    if utype != MODIFY:
        raise invalid("DirectMeterEntry only supports MODIFY")
    _, e = _direct_target(pipe, sw, dm.table_entry, "meter")
    if dm.HasField("counter_data"):
        raise unimplemented("meter counter data is not supported")
    if e.meter is not None:
        if dm.HasField("config"):
            _set_meter(e.meter, dm.config)
        else:
            e.meter.reset()


def _direct_tables(pipe: Pipeline, te: pb.TableEntry, kind: str) -> list[TableMeta]:
    if te.table_id == 0:
        return [t for t in pipe.tables.values()
                if (t.direct_counter if kind == "counter" else t.direct_meter) is not None]
    tm = pipe.table(te.table_id)
    if (tm.direct_counter if kind == "counter" else tm.direct_meter) is None:
        raise invalid(f"Table {tm.name} has no direct {kind}")
    return [tm]


def read_direct_counters(pipe: Pipeline, sw: SoftSwitch, want: pb.DirectCounterEntry
                         ) -> Iterator[pb.Entity]:
    te = want.table_entry
    if te.table_id and len(te.match):
        tm, e = _direct_target(pipe, sw, te, "counter")
        out = pb.DirectCounterEntry()
        out.table_entry.CopyFrom(_entry_msg(pipe, tm, sw.tables[tm.name], e, pb.TableEntry()))
        out.data.packet_count, out.data.byte_count = e.packets, e.bytes
        yield pb.Entity(direct_counter_entry=out)
        return
    for tm in _direct_tables(pipe, te, "counter"):
        table = sw.tables[tm.name]
        for e in table.sorted_entries():
            out = pb.DirectCounterEntry()
            out.table_entry.CopyFrom(_entry_msg(pipe, tm, table, e, pb.TableEntry()))
            out.data.packet_count, out.data.byte_count = e.packets, e.bytes
            yield pb.Entity(direct_counter_entry=out)


def read_direct_meters(pipe: Pipeline, sw: SoftSwitch, want: pb.DirectMeterEntry
                       ) -> Iterator[pb.Entity]:
    te = want.table_entry
    if te.table_id and len(te.match):
        tm, e = _direct_target(pipe, sw, te, "meter")
        pairs = [(tm, e)]
    else:
        pairs = [(tm, e) for tm in _direct_tables(pipe, te, "meter")
                 for e in sw.tables[tm.name].sorted_entries()]
    for tm, e in pairs:
        out = pb.DirectMeterEntry()
        out.table_entry.CopyFrom(_entry_msg(pipe, tm, sw.tables[tm.name], e, pb.TableEntry()))
        if e.meter is not None and e.meter.configured:
            _meter_config(e.meter, out.config)
        yield pb.Entity(direct_meter_entry=out)


# ---------------------------------------------------------------------------
# indexed externs


def _index_range(meta: ExternMeta, entry: IndexedEntry, what: str) -> range:
    if not entry.HasField("index"):
        return range(meta.size)
    i = entry.index.index
    if i < 0:
        raise invalid(f"Negative index {i} for {what} {meta.name}")
    if i >= meta.size:
        raise _out_of_range(f"Index {i} out of range for {what} {meta.name} (size {meta.size})")
    return range(i, i + 1)


def _extern(table: dict[int, ExternMeta], xid: int, what: str,
            direct: dict[int, ExternMeta] | None = None) -> ExternMeta:
    meta = table.get(xid)
    if meta is None:
        if direct is not None and xid in direct:
            raise invalid(f"Cannot use {what.capitalize()}Entry with a direct {what}")
        raise invalid(f"Invalid P4 id {xid}: not a {what}")
    return meta


def _read_cells(table: dict[int, ExternMeta], xid: int, want: IndexedEntry, what: str,
                direct: dict[int, ExternMeta] | None = None
                ) -> Iterator[tuple[ExternMeta, int]]:
    """(extern, index) pairs a read asks for: id 0 means every cell of every extern."""
    if xid == 0:
        for meta in list(table.values()):
            for i in range(meta.size):
                yield meta, i
        return
    meta = _extern(table, xid, what, direct)
    for i in _index_range(meta, want, what):
        yield meta, i


def write_counter(pipe: Pipeline, sw: SoftSwitch, utype: int, ce: pb.CounterEntry) -> None:
    if utype != MODIFY:
        raise invalid("CounterEntry only supports MODIFY")
    meta = _extern(pipe.counters, ce.counter_id, "counter", pipe.direct_counters)
    arr = sw.counters[meta.name]
    if not ce.HasField("data"):
        return
    for i in _index_range(meta, ce, "counter"):
        arr.write(i, ce.data.packet_count, ce.data.byte_count)


def read_counters(pipe: Pipeline, sw: SoftSwitch, want: pb.CounterEntry) -> Iterator[pb.Entity]:
    for meta, i in _read_cells(pipe.counters, want.counter_id, want, "counter",
                               pipe.direct_counters):
        arr = sw.counters[meta.name]
        out = pb.CounterEntry(counter_id=meta.id)
        out.index.index = i
        out.data.byte_count = arr.bytes[i]
        out.data.packet_count = arr.packets[i]
        yield pb.Entity(counter_entry=out)


def _set_meter(meter: Meter, cfg: pb.MeterConfig) -> None:
    if cfg.cir < 0 or cfg.pir < 0 or cfg.cburst < 0 or cfg.pburst < 0:
        raise invalid("Meter rates and bursts must not be negative")
    if cfg.cir > cfg.pir:
        raise invalid("Meter committed rate (cir) above peak rate (pir)")
    # the soft meter counts units per microsecond; P4Runtime gives units per second
    meter.set_rates([(cfg.cir / 1e6, int(cfg.cburst)), (cfg.pir / 1e6, int(cfg.pburst))])


def _meter_config(meter: Meter, out: pb.MeterConfig) -> None:
    (cr, cb), (pr, pb_) = meter.rates
    out.cir = round(cr * 1e6)
    out.cburst = cb
    out.pir = round(pr * 1e6)
    out.pburst = pb_


def write_meter(pipe: Pipeline, sw: SoftSwitch, utype: int, me: pb.MeterEntry) -> None:
    if utype != MODIFY:
        raise invalid("MeterEntry only supports MODIFY")
    meta = _extern(pipe.meters, me.meter_id, "meter", pipe.direct_meters)
    if me.HasField("counter_data"):
        raise unimplemented("meter counter data is not supported")
    arr = sw.meters[meta.name]
    for i in _index_range(meta, me, "meter"):
        if me.HasField("config"):
            _set_meter(arr.meters[i], me.config)
        else:
            arr.meters[i].reset()


def read_meters(pipe: Pipeline, sw: SoftSwitch, want: pb.MeterEntry) -> Iterator[pb.Entity]:
    for meta, i in _read_cells(pipe.meters, want.meter_id, want, "meter", pipe.direct_meters):
        out = pb.MeterEntry(meter_id=meta.id)
        out.index.index = i
        m = sw.meters[meta.name].meters[i]
        if m.configured:
            _meter_config(m, out.config)
        yield pb.Entity(meter_entry=out)


def write_register(pipe: Pipeline, sw: SoftSwitch, utype: int, re_: pb.RegisterEntry) -> None:
    if utype != MODIFY:
        raise invalid("RegisterEntry only supports MODIFY")
    meta = _extern(pipe.registers, re_.register_id, "register")
    which = re_.data.WhichOneof("data")
    if which != "bitstring":
        raise invalid(f"Register {meta.name} holds bit<{meta.width}> values: data must be a "
                      "bitstring")
    v = decode(re_.data.bitstring, meta.width, f"value of register {meta.name}")
    arr = sw.registers[meta.name]
    for i in _index_range(meta, re_, "register"):
        arr.values[i] = v


def read_registers(pipe: Pipeline, sw: SoftSwitch, want: pb.RegisterEntry
                   ) -> Iterator[pb.Entity]:
    for meta, i in _read_cells(pipe.registers, want.register_id, want, "register"):
        out = pb.RegisterEntry(register_id=meta.id)
        out.index.index = i
        out.data.bitstring = encode(sw.registers[meta.name].values[i], meta.width)
        yield pb.Entity(register_entry=out)


# ---------------------------------------------------------------------------
# packet replication engine


def _replicas(replicas: Iterable[pb.Replica], what: str) -> list[tuple[int, int]]:
    out: list[tuple[int, int]] = []
    for r in replicas:
        if r.WhichOneof("port_kind") == "port":
            if not r.port or len(r.port) > 4:
                raise invalid(f"{what}: replica port must be 1 to 4 bytes")
            port = int.from_bytes(r.port, "big")
        else:
            port = r.egress_port
        pair = (port, r.instance)
        if pair in out:
            raise invalid(f"{what}: duplicate replica (port {port}, instance {r.instance})")
        out.append(pair)
    return out


def _install_group(sw: SoftSwitch, mgid: int, reps: list[tuple[int, int]]) -> None:
    pre = sw.pre
    pre.mgrp_create(mgid)
    by_rid: dict[int, list[int]] = {}
    for port, rid in reps:
        by_rid.setdefault(rid, []).append(port)
    for rid, ports in by_rid.items():
        h = pre.node_create(rid, ports)
        pre.node_associate(mgid, h)


def _remove_group(sw: SoftSwitch, mgid: int) -> None:
    pre = sw.pre
    g = pre.groups.get(mgid)
    if g is None:
        return
    for h in list(g.nodes):
        pre.node_destroy(h)
    pre.mgrp_destroy(mgid)


def _group_replicas(sw: SoftSwitch, mgid: int,
                    out: RepeatedCompositeFieldContainer[pb.Replica]) -> None:
    for port, rid in sw.pre.replicate(mgid):
        out.add(egress_port=port, instance=rid)


def write_pre(pipe: Pipeline, sw: SoftSwitch, utype: int,
              pre_e: pb.PacketReplicationEngineEntry) -> None:
    which = pre_e.WhichOneof("type")
    try:
        if which == "multicast_group_entry":
            _write_mc(sw, utype, pre_e.multicast_group_entry)
        elif which == "clone_session_entry":
            _write_clone(sw, utype, pre_e.clone_session_entry)
        else:
            raise invalid("PacketReplicationEngineEntry without an entry")
    except PreError as e:
        raise invalid(f"Invalid PRE operation ({e.code}): {e.detail}") from None


def _write_mc(sw: SoftSwitch, utype: int, g: pb.MulticastGroupEntry) -> None:
    mgid = g.multicast_group_id
    if mgid == 0:
        raise invalid("0 is not a valid group id")
    if mgid >= RESERVED_MGID:
        raise _out_of_range(f"Group id {mgid} is too high (ids from {RESERVED_MGID:#x} are "
                            "reserved for clone sessions)")
    exists = mgid in sw.pre.groups
    if utype == INSERT:
        if exists:
            raise P4RTError(grpc.StatusCode.ALREADY_EXISTS, f"Multicast group {mgid} exists")
        _install_group(sw, mgid, _replicas(g.replicas, f"multicast group {mgid}"))
    elif utype == MODIFY:
        if not exists:
            raise not_found(f"Multicast group {mgid} does not exist")
        reps = _replicas(g.replicas, f"multicast group {mgid}")
        _remove_group(sw, mgid)
        _install_group(sw, mgid, reps)
    elif utype == DELETE:
        if not exists:
            raise not_found(f"Multicast group {mgid} does not exist")
        _remove_group(sw, mgid)
    else:
        raise invalid("Invalid update type")


def _write_clone(sw: SoftSwitch, utype: int, c: pb.CloneSessionEntry) -> None:
    sid = c.session_id
    if sid == 0:
        raise invalid("0 is not a valid session id")
    if sid >= RESERVED_MGID:
        raise _out_of_range(f"Clone session id {sid} is too high (at most {RESERVED_MGID - 1})")
    if c.packet_length_bytes:
        raise unimplemented("truncation of clones (packet_length_bytes) is not supported")
    exists = sw.mirrors.get(sid) is not None
    if utype == INSERT and exists:
        raise P4RTError(grpc.StatusCode.ALREADY_EXISTS, f"Clone session {sid} exists")
    if utype in (MODIFY, DELETE) and not exists:
        raise not_found(f"Clone session {sid} does not exist")
    if utype not in (INSERT, MODIFY, DELETE):
        raise invalid("Invalid update type")
    reps = [] if utype == DELETE else _replicas(c.replicas, f"clone session {sid}")
    _remove_group(sw, RESERVED_MGID | sid)
    if utype == DELETE:
        sw.mirrors.delete(sid)
        return
    if len(reps) == 1 and reps[0][1] == 0:
        sw.mirrors.add(sid, port=reps[0][0])
    elif not reps:
        sw.mirrors.add(sid)
    else:
        _install_group(sw, RESERVED_MGID | sid, reps)
        sw.mirrors.add(sid, mgid=RESERVED_MGID | sid)


def read_pre(pipe: Pipeline, sw: SoftSwitch, want: pb.PacketReplicationEngineEntry
             ) -> Iterator[pb.Entity]:
    which = want.WhichOneof("type")
    if which == "multicast_group_entry":
        mgid = want.multicast_group_entry.multicast_group_id
        if mgid >= RESERVED_MGID:
            raise _out_of_range(f"Group id {mgid} is too high")
        ids = [mgid] if mgid else sorted(g for g in sw.pre.groups if g < RESERVED_MGID)
        for m in ids:
            if m not in sw.pre.groups:
                continue
            out = pb.PacketReplicationEngineEntry()
            out.multicast_group_entry.multicast_group_id = m
            _group_replicas(sw, m, out.multicast_group_entry.replicas)
            yield pb.Entity(packet_replication_engine_entry=out)
    elif which == "clone_session_entry":
        sid = want.clone_session_entry.session_id
        sids = [sid] if sid else sorted(s for s in sw.mirrors.sessions if s != 0)
        for s in sids:
            sess = sw.mirrors.get(s)
            if sess is None:
                continue
            out = pb.PacketReplicationEngineEntry()
            ce = out.clone_session_entry
            ce.session_id = s
            if sess.port is not None:
                ce.replicas.add(egress_port=sess.port, instance=0)
            if sess.mgid is not None:
                _group_replicas(sw, sess.mgid, ce.replicas)
            yield pb.Entity(packet_replication_engine_entry=out)
    else:
        raise invalid("PacketReplicationEngineEntry read needs multicast_group_entry or "
                      "clone_session_entry")
