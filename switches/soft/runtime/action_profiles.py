"""Action profiles and action selectors (v1model ``action_profile``,
``action_selector``), as BMv2 models them (src/bm_sim/action_profile.cpp).

A profile holds members (an action with its data) and, with a selector,
groups of members. A table whose ``implementation`` is the profile has
entries that name a member or a group instead of an action. A group's member
is chosen per packet by the selector's hash over the table's ``selector``
key fields: the fields packed MSB first (as ``hash()`` packs its data), the
algorithm's output taken modulo the group size, indexing the group's member
handles in increasing order (BMv2's ``GroupMgr::get_from_hash`` over a
sorted set).

Handles are the smallest free number, from 0, separately for members and
groups, as BMv2 allocates them. Errors carry BMv2's MatchErrorCode names.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable
from dataclasses import dataclass, field

from switches.soft.runtime.contract import ActionProfileInfo


class ActionProfileError(Exception):
    """A profile operation failed; ``code`` is BMv2's error name."""

    def __init__(self, code: str, detail: str = "") -> None:
        super().__init__(f"{code}: {detail}" if detail else code)
        self.code = code
        self.detail = detail


@dataclass
class Member:
    handle: int
    action: str
    args: tuple[int, ...]
    groups: set[int] = field(default_factory=set)  # groups this member is in


class _Handles:
    """Smallest free handle first."""

    def __init__(self) -> None:
        self._free: list[int] = []
        self._next = 0

    def take(self) -> int:
        if self._free:
            return heapq.heappop(self._free)
        h = self._next
        self._next += 1
        return h

    def give_back(self, h: int) -> None:
        heapq.heappush(self._free, h)


class ActionProfile:
    """Members and groups of one action profile or selector."""

    def __init__(self, info: ActionProfileInfo,
                 check_action: Callable[[str, tuple[int, ...]], tuple[int, ...]],
                 hash_fn: Callable[[str, list[tuple[int, int]]], int] | None = None) -> None:
        self.info = info
        self.name = info.name
        self.with_selector = info.selector_algo is not None
        self._check_action = check_action  # validates (action, args), returns masked args
        self._hash = hash_fn
        self.members: dict[int, Member] = {}
        self.groups: dict[int, list[int]] = {}  # handle -> member handles, increasing
        self._mbr_handles = _Handles()
        self._grp_handles = _Handles()
        # entries (of any table) pointing at a member / group: handle -> count
        self.member_refs: dict[int, int] = {}
        self.group_refs: dict[int, int] = {}

    # -- members ---------------------------------------------------------------
    def add_member(self, action: str, args: tuple[int, ...] | list[int]) -> int:
        if len(self.members) >= self.info.size:
            raise ActionProfileError("TABLE_FULL", f"action profile {self.name} holds at most "
                                     f"{self.info.size} members")
        a = self._check_action(action, tuple(args))
        h = self._mbr_handles.take()
        self.members[h] = Member(h, action, a)
        return h

    def member(self, handle: int) -> Member:
        m = self.members.get(handle)
        if m is None:
            raise ActionProfileError("INVALID_MBR_HANDLE",
                                     f"no member {handle} in action profile {self.name}")
        return m

    def modify_member(self, handle: int, action: str, args: tuple[int, ...] | list[int]) -> None:
        m = self.member(handle)
        m.args = self._check_action(action, tuple(args))
        m.action = action

    def delete_member(self, handle: int) -> None:
        m = self.member(handle)
        if self.member_refs.get(handle):
            raise ActionProfileError("MBR_STILL_USED",
                                     f"member {handle} is used by a table entry")
        if m.groups:
            raise ActionProfileError("MBR_STILL_USED",
                                     f"member {handle} is in group(s) {sorted(m.groups)}")
        del self.members[handle]
        self.member_refs.pop(handle, None)
        self._mbr_handles.give_back(handle)

    # -- groups ----------------------------------------------------------------
    def _need_selector(self) -> None:
        if not self.with_selector:
            raise ActionProfileError("NO_SELECTOR", f"action profile {self.name} has no "
                                     "selector (groups need an action_selector)")

    def create_group(self) -> int:
        self._need_selector()
        h = self._grp_handles.take()
        self.groups[h] = []
        return h

    def group(self, handle: int) -> list[int]:
        self._need_selector()
        g = self.groups.get(handle)
        if g is None:
            raise ActionProfileError("INVALID_GRP_HANDLE",
                                     f"no group {handle} in action profile {self.name}")
        return g

    def delete_group(self, handle: int) -> None:
        g = self.group(handle)
        if self.group_refs.get(handle):
            raise ActionProfileError("GRP_STILL_USED",
                                     f"group {handle} is used by a table entry")
        for mh in g:
            self.members[mh].groups.discard(handle)
        del self.groups[handle]
        self.group_refs.pop(handle, None)
        self._grp_handles.give_back(handle)

    def add_member_to_group(self, member: int, group: int) -> None:
        g = self.group(group)
        m = self.member(member)
        if member in m.groups:
            raise ActionProfileError("MBR_ALREADY_IN_GRP",
                                     f"member {member} is already in group {group}")
        m.groups.add(group)
        g.append(member)
        g.sort()

    def remove_member_from_group(self, member: int, group: int) -> None:
        g = self.group(group)
        m = self.member(member)
        if group not in m.groups:
            raise ActionProfileError("MBR_NOT_IN_GRP", f"member {member} is not in group {group}")
        m.groups.discard(group)
        g.remove(member)

    # -- per packet ------------------------------------------------------------
    def choose(self, group: int, selector: list[tuple[int, int]]) -> Member | None:
        """The member of ``group`` for a packet whose selector fields are
        ``selector`` ((value, width) pairs in key order); None if empty."""
        g = self.groups.get(group)
        if not g:
            return None
        if len(g) == 1:
            return self.members[g[0]]
        assert self._hash is not None and self.info.selector_algo is not None
        h = self._hash(self.info.selector_algo, selector)
        return self.members[g[h % len(g)]]

    def reset(self) -> None:
        """Forget every member and group (reset_state)."""
        self.members.clear()
        self.groups.clear()
        self.member_refs.clear()
        self.group_refs.clear()
        self._mbr_handles = _Handles()
        self._grp_handles = _Handles()
