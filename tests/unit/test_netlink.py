"""ground.netlink: errors that name the interface; look-ups need no privileges."""

from __future__ import annotations

import pytest

from ground.netlink import (
    NetlinkError,
    delete_link,
    link_names,
    set_link_up,
    set_permanent_neighbour,
)


def test_link_names_lists_this_namespace() -> None:
    assert "lo" in link_names()


def test_missing_interfaces_are_named_in_the_error() -> None:
    missing = "p4tb-nosuch0"
    assert missing not in link_names()
    assert delete_link(missing) is False          # nothing to delete is not an error
    with pytest.raises(NetlinkError, match=f"set interface {missing} up: no such interface"):
        set_link_up(missing)
    with pytest.raises(NetlinkError, match=f"neighbour 10.0.1.254 lladdr 02:00:00:00:00:01 on "
                                           f"{missing}: no interface {missing}"):
        set_permanent_neighbour("10.0.1.254", "02:00:00:00:00:01", missing)
