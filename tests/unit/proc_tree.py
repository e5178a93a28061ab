"""The processes a test started, read from /proc (to check that none is left)."""

from __future__ import annotations

from pathlib import Path


def children_of(pid: int) -> list[int]:
    """The processes whose parent is ``pid``."""
    kids = []
    for d in Path("/proc").iterdir():
        if not d.name.isdigit():
            continue
        try:
            stat = (d / "stat").read_text()
        except OSError:
            continue
        if int(stat.rsplit(")", 1)[1].split()[1]) == pid:
            kids.append(int(d.name))
    return kids


def descendants_of(pid: int) -> list[int]:
    """Children, their children, and so on."""
    kids = children_of(pid)
    return kids + [g for k in kids for g in descendants_of(k)]
