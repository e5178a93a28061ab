"""testbed.owned: cleanup removes only what the testbed recorded as its own."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from testbed.owned import (
    STATE_DIR_ENV,
    Record,
    process_start_time,
    remove_recorded,
    this_process_record,
)


def _sleeper() -> subprocess.Popen[bytes]:
    return subprocess.Popen(["sleep", "60"])


def _dead_owner() -> tuple[int, int]:
    """The pid and start time of a process that has exited."""
    p = subprocess.Popen([sys.executable, "-c", "import os, sys; print(os.getpid())"],
                         stdout=subprocess.PIPE, text=True)
    start = process_start_time(p.pid)
    assert start is not None
    p.communicate()
    return p.pid, start


def test_a_crashed_writers_processes_are_stopped_and_nothing_else(tmp_path: Path) -> None:
    recorded, unrecorded, reused = _sleeper(), _sleeper(), _sleeper()
    try:
        owner, owner_start = _dead_owner()
        path = tmp_path / f"{owner}-{owner_start}.json"
        start = process_start_time(reused.pid)
        assert start is not None
        path.write_text(json.dumps({
            "owner": owner, "owner_start": owner_start,
            "processes": {
                str(recorded.pid): {"start": process_start_time(recorded.pid),
                                    "what": "switch s1"},
                # the pid now belongs to another process (another start time)
                str(reused.pid): {"start": start - 1, "what": "host agent h1"}},
            "interfaces": {"lo": 999999}}))
        done = remove_recorded([path], grace_s=2)
        assert recorded.wait(timeout=5) is not None
        assert unrecorded.poll() is None and reused.poll() is None
        assert done.stopped == [f"switch s1 (pid {recorded.pid})"]
        assert done.deleted == []  # lo's ifindex is not the recorded one
        assert not path.exists() and done.records_removed == 1
    finally:
        for p in (recorded, unrecorded, reused):
            p.kill()
            p.wait()


def test_a_running_writers_record_is_left_alone(tmp_path: Path) -> None:
    owner = _sleeper()
    child = _sleeper()
    try:
        path = tmp_path / "rec.json"
        path.write_text(json.dumps({
            "owner": owner.pid, "owner_start": process_start_time(owner.pid),
            "processes": {str(child.pid): {"start": process_start_time(child.pid),
                                           "what": "switch s1"}},
            "interfaces": {}}))
        done = remove_recorded([path], grace_s=1)
        assert child.poll() is None and path.exists()
        assert done.skipped_live_owners == [owner.pid]
        remove_recorded([path], include_live_owners=True, grace_s=1)
        assert child.wait(timeout=5) is not None and not path.exists()
    finally:
        for p in (owner, child):
            p.kill()
            p.wait()


def test_the_record_follows_what_is_added_and_forgotten() -> None:
    rec = this_process_record()
    # the session keeps records in its own temporary directory (tests/conftest.py)
    assert rec.path.parent == Path(os.environ[STATE_DIR_ENV]) != Path("/run/p4-testbed")
    child = _sleeper()
    try:
        rec.add_process(child.pid, "host agent h1")
        saved = Record.load(rec.path)
        assert saved.processes[child.pid]["what"] == "host agent h1" and saved.owner_alive
        rec.forget([child.pid])
        assert not rec.path.exists()  # an empty record is no record
    finally:
        child.kill()
        child.wait()
