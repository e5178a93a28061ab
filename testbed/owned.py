"""What the testbed made, recorded so that cleanup touches nothing else.

Every process that brings networks up (a run, a benchmark, a test) writes
one record file, ``<state dir>/<pid>-<start time>.json``, listing the
processes it started (node shells, which hold the Mininet hosts' network
namespaces; switch daemons; host agents) by pid and kernel start time, and
the interfaces it created in the root namespace by name and ifindex. The
start time and ifindex tell a recorded object from a later one that reuses
its pid or name. A clean teardown removes its entries again.

:func:`remove_recorded` removes what records list (by default only records
whose writer has died: a crashed run). Nothing here looks for processes by
name or deletes files: other programs on the machine (other people's
Mininet networks included) are never touched. The state directory is
``$P4TB_STATE_DIR``, or ``/run/p4-testbed``.
"""

from __future__ import annotations

import json
import os
import signal
import threading
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, TypedDict

from ground.netlink import NetlinkError, delete_link

if TYPE_CHECKING:
    from mininet.net import Mininet


class OwnedProcess(TypedDict):
    """A process a record lists: when it started (process_start_time: to tell
    it from a later process with its pid) and what it is."""
    start: int
    what: str

__all__ = ["STATE_DIR_ENV", "state_dir", "Record", "this_process_record", "record_network",
           "forget_network", "Cleanup", "remove_recorded", "live_entries", "record_files", "process_start_time"]

STATE_DIR_ENV = "P4TB_STATE_DIR"
DEFAULT_STATE_DIR = Path("/run/p4-testbed")
SHELL = "node shell"  # what a Mininet node's shell is recorded as


def state_dir() -> Path:
    return Path(os.environ.get(STATE_DIR_ENV) or DEFAULT_STATE_DIR)


def process_start_time(pid: int) -> int | None:
    """The kernel's start time of ``pid`` (clock ticks since boot), or None if it is gone."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    # the command name (field 2) may contain spaces and parentheses: split after the last ')'
    fields = stat[stat.rfind(")") + 2:].split()
    try:
        return int(fields[19])  # field 22 of proc(5)
    except (IndexError, ValueError):
        return None


def _alive(pid: int, start: int | None) -> bool:
    return start is not None and process_start_time(pid) == start


def _ifindex(name: str) -> int | None:
    try:
        return int(Path(f"/sys/class/net/{name}/ifindex").read_text())
    except (OSError, ValueError):
        return None


@dataclass
class Record:
    """One writer's record: what it made and still owns."""

    path: Path
    owner: int
    owner_start: int | None
    processes: dict[int, OwnedProcess] = field(default_factory=dict)  # by pid
    interfaces: dict[str, int] = field(default_factory=dict)            # name -> ifindex
    lock: threading.Lock = field(default_factory=threading.Lock, repr=False, compare=False)

    # -- writing ---------------------------------------------------------------
    def add_process(self, pid: int, what: str) -> None:
        start = process_start_time(pid)
        if start is None:
            return  # already gone: nothing to clean later
        with self.lock:
            self.processes[pid] = {"start": start, "what": what}
            self._save()

    def add_interfaces(self, names: Iterable[str]) -> None:
        with self.lock:
            for name in names:
                idx = _ifindex(name)
                if idx is not None:
                    self.interfaces[name] = idx
            self._save()

    def forget(self, pids: Iterable[int] = (), interfaces: Iterable[str] = ()) -> None:
        with self.lock:
            for pid in pids:
                self.processes.pop(pid, None)
            for name in interfaces:
                self.interfaces.pop(name, None)
            self._save()

    def _save(self) -> None:
        if not self.processes and not self.interfaces:
            self.path.unlink(missing_ok=True)
            return
        self.path.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.path.with_suffix(".tmp")
        tmp.write_text(json.dumps({
            "owner": self.owner, "owner_start": self.owner_start,
            "processes": {str(k): v for k, v in self.processes.items()},
            "interfaces": self.interfaces}, indent=1))
        os.replace(tmp, self.path)

    # -- reading ---------------------------------------------------------------
    @classmethod
    def load(cls, path: Path) -> Record:
        d = json.loads(path.read_text())
        return cls(path=path, owner=int(d["owner"]), owner_start=d.get("owner_start"),
                   processes={int(k): v for k, v in d.get("processes", {}).items()},
                   interfaces={str(k): int(v) for k, v in d.get("interfaces", {}).items()})

    @property
    def owner_alive(self) -> bool:
        return _alive(self.owner, self.owner_start)


_mine: Record | None = None
_mine_lock = threading.Lock()


def this_process_record() -> Record:
    """The record of the calling process (created on first use; a forked
    child gets its own)."""
    global _mine
    with _mine_lock:
        pid = os.getpid()
        if _mine is None or _mine.owner != pid:
            start = process_start_time(pid)
            _mine = Record(path=state_dir() / f"{pid}-{start}.json", owner=pid, owner_start=start)
        return _mine


def _net_parts(net: Mininet) -> tuple[list[tuple[int, str]], list[str]]:
    """(pid, what) of a Mininet network's node shells and switch daemons, and
    its switches' interfaces (the root-namespace ends of its links)."""
    procs: list[tuple[int, str]] = []
    intfs: list[str] = []
    for node in [*net.switches, *net.hosts]:
        shell = getattr(node, "shell", None)
        if shell is not None and shell.poll() is None:
            procs.append((shell.pid, f"{SHELL} {node.name}"))
        proc = getattr(node, "proc", None)
        if proc is not None and proc.poll() is None:
            procs.append((proc.pid, f"switch {node.name}"))
    for sw in net.switches:
        intfs += [i.name for i in sw.intfList() if i.name != "lo"]
    return procs, intfs


def record_network(net: Mininet) -> None:
    """Record a built (or started) Mininet network's processes and interfaces."""
    rec = this_process_record()
    procs, intfs = _net_parts(net)
    for pid, what in procs:
        if pid not in rec.processes:
            rec.add_process(pid, what)
    rec.add_interfaces(intfs)


def forget_network(net: Mininet) -> None:
    """Drop a stopped network's entries (whatever of it still exists is left
    recorded, so that cleanup finds it)."""
    rec = this_process_record()
    gone = [pid for pid, p in rec.processes.items() if not _alive(pid, p["start"])]
    names = [n for n, idx in rec.interfaces.items() if _ifindex(n) != idx]
    rec.forget(gone, names)


def live_entries(paths: Iterable[Path]) -> list[str]:
    """What the records in ``paths`` list that still exists."""
    out = []
    for path in paths:
        try:
            rec = Record.load(path)
        except (OSError, ValueError, KeyError, TypeError):
            continue
        out += [f"{p['what']} (pid {pid})" for pid, p in rec.processes.items()
                if _alive(pid, p["start"])]
        out += [f"interface {n}" for n, idx in rec.interfaces.items() if _ifindex(n) == idx]
    return out


@dataclass
class Cleanup:
    """What :func:`remove_recorded` did."""

    stopped: list[str] = field(default_factory=list)
    deleted: list[str] = field(default_factory=list)
    skipped_live_owners: list[int] = field(default_factory=list)
    records_removed: int = 0
    failed: list[str] = field(default_factory=list)     # what could not be removed, and why


def record_files() -> list[Path]:
    d = state_dir()
    return sorted(d.glob("*.json")) if d.is_dir() else []


def remove_recorded(paths: Iterable[Path] | None = None, *, include_live_owners: bool = False,
                    grace_s: float = 3.0) -> Cleanup:
    """Stop the processes and delete the interfaces that records list (all
    records, or ``paths``), skipping records whose writer still runs unless
    ``include_live_owners``. Only an object whose pid and start time (or name
    and ifindex) still match its record is touched."""
    out = Cleanup()
    todo: list[tuple[Record, int, OwnedProcess]] = []
    recs: list[Record] = []
    for path in (record_files() if paths is None else list(paths)):
        try:
            rec = Record.load(path)
        except (OSError, ValueError, KeyError, TypeError):
            continue
        if rec.owner != os.getpid() and rec.owner_alive and not include_live_owners:
            out.skipped_live_owners.append(rec.owner)
            continue
        recs.append(rec)
        todo += [(rec, pid, p) for pid, p in rec.processes.items() if _alive(pid, p["start"])]
    for _rec, pid, p in todo:
        if p["what"].startswith(SHELL):
            # an interactive shell ignores SIGTERM; Mininet hangs its group up
            # (the shell leads a session of its own: mnexec -d)
            try:
                if os.getpgid(pid) == pid:
                    os.killpg(pid, signal.SIGHUP)
                else:
                    _signal(pid, signal.SIGHUP)
            except (ProcessLookupError, PermissionError):
                pass
        else:
            _signal(pid, signal.SIGTERM)
    deadline = time.monotonic() + grace_s
    while time.monotonic() < deadline and any(_alive(pid, p["start"]) for _r, pid, p in todo):
        time.sleep(0.05)
    for _rec, pid, p in todo:
        if _alive(pid, p["start"]):
            _signal(pid, signal.SIGKILL)
        out.stopped.append(f"{p['what']} (pid {pid})")
    for rec in recs:
        for name, idx in rec.interfaces.items():
            if _ifindex(name) != idx:
                continue
            try:
                if delete_link(name):
                    out.deleted.append(name)
            except NetlinkError as e:
                out.failed.append(str(e))
        if rec.owner == os.getpid():
            rec = this_process_record()
            rec.forget(list(rec.processes), list(rec.interfaces))
        else:
            rec.path.unlink(missing_ok=True)
        out.records_removed += 1
    return out


def _signal(pid: int, sig: int) -> None:
    try:
        os.kill(pid, sig)
    except ProcessLookupError:
        pass
