"""Match engine: kinds, priorities, const entries, defaults, limits, handles."""

from __future__ import annotations

import pytest

from switches.soft.runtime.contract import ActionInfo, EntryInfo, KeyInfo, ParamInfo, TableInfo
from switches.soft.runtime.tables import Table, TableError, table_match_type

ACTIONS = {
    "NoAction": ActionInfo("NoAction"),
    "a": ActionInfo("a", [ParamInfo("x", 8)]),
    "b": ActionInfo("b", [ParamInfo("x", 8)]),
    "dflt": ActionInfo("dflt"),
}


def mk(keys: list[tuple[str, str, int]], **kw) -> Table:
    info = TableInfo("t", [KeyInfo(n, k, w) for n, k, w in keys], ["a", "b", "NoAction", "dflt"],
                     kw.pop("default_action", "NoAction"), kw.pop("default_args", []), **kw)
    return Table(info, ACTIONS)


def test_exact_hit_miss_and_default() -> None:
    t = mk([("k", "exact", 16)])
    h = t.add_entry([5], "a", [7])
    assert h == 0
    assert t.apply((5,)) == ("a", (7,), True)
    assert t.apply((6,)) == ("NoAction", (), False)
    t.set_default("b", [3])
    assert t.apply((6,)) == ("b", (3,), False)


def test_exact_multi_key_and_duplicate() -> None:
    t = mk([("k1", "exact", 8), ("k2", "exact", 1)])
    t.add_entry([1, 1], "a", [1])
    t.add_entry([1, 0], "a", [2])
    assert t.apply((1, 0))[1] == (2,)
    with pytest.raises(TableError) as ei:
        t.add_entry([1, 1], "b", [3])
    assert ei.value.code == "DUPLICATE_ENTRY"


def test_lpm_longest_prefix_wins_regardless_of_order() -> None:
    t = mk([("ip", "lpm", 32)])
    t.add_entry([(0x0A000000, 8)], "a", [8])
    t.add_entry([(0x0A000100, 24)], "a", [24])
    t.add_entry([(0, 0)], "a", [0])
    t.add_entry([(0x0A0001FF, 32)], "a", [32])
    assert t.apply((0x0A0001FF,))[1] == (32,)
    assert t.apply((0x0A0001FE,))[1] == (24,)
    assert t.apply((0x0A020304,))[1] == (8,)
    assert t.apply((0x0B000000,))[1] == (0,)


def test_lpm_value_is_masked_by_prefix() -> None:
    t = mk([("ip", "lpm", 32)])
    t.add_entry([(0x0A0001FF, 24)], "a", [1])  # host bits ignored
    assert t.apply((0x0A000107,)) == ("a", (1,), True)
    with pytest.raises(TableError) as ei:
        t.add_entry([(0x0A000100, 24)], "a", [2])
    assert ei.value.code == "DUPLICATE_ENTRY"


def test_lpm_with_exact_key() -> None:
    t = mk([("vrf", "exact", 8), ("ip", "lpm", 32)])
    t.add_entry([1, (0x0A000000, 8)], "a", [1])
    t.add_entry([2, (0x0A000000, 16)], "a", [2])
    assert t.apply((1, 0x0A000001))[1] == (1,)
    assert t.apply((2, 0x0A000001))[1] == (2,)
    assert t.apply((3, 0x0A000001))[2] is False


def test_ternary_smallest_priority_number_wins() -> None:
    t = mk([("k", "ternary", 16)])
    t.add_entry([(0x0800, 0xFFFF)], "a", [1], priority=10)
    t.add_entry([(0x0000, 0x0000)], "a", [2], priority=5)
    assert t.apply((0x0800,))[1] == (2,)
    t2 = mk([("k", "ternary", 16)])
    t2.add_entry([(0x0000, 0x0000)], "a", [2], priority=20)
    t2.add_entry([(0x0800, 0xFFFF)], "a", [1], priority=10)
    assert t2.apply((0x0800,))[1] == (1,)
    assert t2.apply((0x86DD,))[1] == (2,)


def test_ternary_tie_goes_to_first_added() -> None:
    t = mk([("k", "ternary", 8)])
    t.add_entry([(0x10, 0xF0)], "a", [1], priority=1)
    t.add_entry([(0x01, 0x0F)], "a", [2], priority=1)
    assert t.apply((0x11,))[1] == (1,)


def test_priority_table_requires_priority() -> None:
    t = mk([("k", "ternary", 8)])
    with pytest.raises(TableError):
        t.add_entry([(1, 0xFF)], "a", [1])


def test_range_and_optional_and_mixed() -> None:
    t = mk([("port", "range", 9), ("v", "optional", 1), ("e", "exact", 8)])
    t.add_entry([(1, 4), (1, 1), 7], "a", [1], priority=2)
    t.add_entry([(0, 511), (0, 0), 7], "a", [2], priority=3)
    assert t.apply((3, 1, 7))[1] == (1,)
    assert t.apply((3, 0, 7))[1] == (2,)   # optional mismatch -> wildcard entry
    assert t.apply((5, 1, 7))[1] == (2,)   # outside the range
    assert t.apply((5, 1, 8))[2] is False  # exact part differs
    with pytest.raises(TableError):
        t.add_entry([(5, 4), (0, 0), 7], "a", [1], priority=1)  # lo > hi


def test_two_lpm_keys_use_priorities() -> None:
    t = mk([("a", "lpm", 8), ("b", "lpm", 8)])
    assert t.needs_priority
    t.add_entry([(0x10, 4), (0, 0)], "a", [1], priority=2)
    t.add_entry([(0, 0), (0x20, 4)], "a", [2], priority=1)
    assert t.apply((0x1F, 0x2F))[1] == (2,)


def test_match_type_names() -> None:
    assert mk([("k", "exact", 8)]).match_type == "exact"
    assert mk([("k", "exact", 8), ("l", "lpm", 8)]).match_type == "lpm"
    assert mk([("k", "optional", 8), ("l", "lpm", 8)]).match_type == "ternary"
    assert table_match_type(mk([("k", "ternary", 8), ("r", "range", 8)]).info) == "range"


def test_size_limit_handles_reuse_and_delete() -> None:
    t = mk([("k", "exact", 8)], size=2)
    assert t.add_entry([1], "a", [1]) == 0
    assert t.add_entry([2], "a", [1]) == 1
    with pytest.raises(TableError) as ei:
        t.add_entry([3], "a", [1])
    assert ei.value.code == "TABLE_FULL"
    t.delete_entry(0)
    assert t.apply((1,))[2] is False
    assert t.add_entry([3], "a", [1]) == 0  # smallest free handle
    with pytest.raises(TableError) as ei:
        t.delete_entry(9)
    assert ei.value.code == "INVALID_HANDLE"


def test_modify_and_clear() -> None:
    t = mk([("k", "exact", 8)])
    h = t.add_entry([1], "a", [1])
    t.modify_entry(h, "b", [9])
    assert t.apply((1,)) == ("b", (9,), True)
    t.clear()
    assert t.num_entries() == 0


def test_action_checks() -> None:
    t = mk([("k", "exact", 8)], default_only_actions=["dflt"], table_only_actions=["b"])
    with pytest.raises(TableError):
        t.add_entry([1], "nope", [])
    with pytest.raises(TableError):
        t.add_entry([1], "a", [])  # wrong arity
    with pytest.raises(TableError):
        t.add_entry([1], "dflt", [])  # @defaultonly
    with pytest.raises(TableError):
        t.set_default("b", [1])  # @tableonly
    t.set_default("dflt", [])
    assert t.apply((1,)) == ("dflt", (), False)


def test_const_default_action() -> None:
    t = mk([("k", "exact", 8)], default_action="a", default_args=[4], default_const=True)
    with pytest.raises(TableError) as ei:
        t.set_default("b", [1])
    assert ei.value.code == "DEFAULT_ACTION_IS_CONST"
    assert t.apply((0,)) == ("a", (4,), False)


def test_const_entries_source_order_wins_and_are_immutable() -> None:
    entries = [EntryInfo([(0x10, 0xF0)], "a", [1]), EntryInfo([(0x00, 0x00)], "a", [2])]
    t = mk([("k", "ternary", 8)], entries=entries, entries_const=True)
    assert t.apply((0x12,))[1] == (1,)
    assert t.apply((0x22,))[1] == (2,)
    with pytest.raises(TableError) as ei:
        t.add_entry([(0, 0)], "a", [3], priority=1)
    assert ei.value.code == "IMMUTABLE_TABLE_ENTRIES"
    with pytest.raises(TableError):
        t.delete_entry(0)


@pytest.mark.parametrize("largest_wins,expect", [(True, 2), (False, 1)])
def test_const_entries_explicit_priorities(largest_wins: bool, expect: int) -> None:
    entries = [EntryInfo([(0x10, 0xF0)], "a", [1], priority=1),
               EntryInfo([(0x00, 0x00)], "a", [2], priority=5)]
    t = mk([("k", "ternary", 8)], entries=entries, entries_const=True,
           largest_priority_wins=largest_wins)
    assert t.apply((0x12,))[1] == (expect,)


def test_direct_counter_counts_hits_with_current_length() -> None:
    t = mk([("k", "exact", 8)], direct_counter="c")
    h = t.add_entry([1], "a", [1])
    t.current_length = 100
    t.apply((1,))
    t.apply((1,))
    t.apply((2,))
    e = t.get_entry(h)
    assert (e.packets, e.bytes) == (2, 200)


def test_direct_meter_uses_last_hit_entry() -> None:
    clock = [0]
    info = TableInfo("t", [KeyInfo("k", "exact", 8)], ["a"], "a", [0], direct_meter="m")
    t = Table(info, ACTIONS, meter_kind="packets", now_us=lambda: clock[0])
    h = t.add_entry([1], "a", [1])
    t.get_entry(h).meter.set_rates([(0.000001, 1), (0.000002, 2)])
    t.apply((1,))
    colors = [t.direct_meter_color(64) for _ in range(3)]
    assert colors == [0, 1, 2]
    t.apply((9,))  # miss: no entry, GREEN
    assert t.direct_meter_color(64) == 0


def test_large_priority_table_matches_linear_reference() -> None:
    import random
    rng = random.Random(7)
    t = mk([("a", "ternary", 8), ("r", "range", 8), ("e", "exact", 4)], size=4096)
    handles = []
    for i in range(300):
        mask = rng.choice([0x00, 0xF0, 0x0F, 0xFF, 0xC3])
        lo = rng.randrange(256)
        hi = rng.randrange(lo, 256)
        try:
            h = t.add_entry([(rng.randrange(256), mask), (lo, hi), rng.randrange(16)], "a", [i],
                            priority=rng.randrange(50))
        except TableError:
            continue
        handles.append(h)
    for h in handles[::3]:
        t.delete_entry(h)

    def reference(key: tuple[int, int, int]) -> object:
        best = None
        for e in t.entries.values():
            if e.matches_key(key) and (best is None or (e.priority, e.seq) < (best.priority,
                                                                               best.seq)):
                best = e
        return best

    for _ in range(2000):
        key = (rng.randrange(256), rng.randrange(256), rng.randrange(16))
        assert t.lookup(key) is reference(key)
