"""Session-wide guards: the suite keeps its records to itself and leaves the
machine's other files and processes alone.

``P4TB_STATE_DIR`` points the testbed's records of what it made
(testbed.owned) into the session's temporary directory, for this process and
every run it starts. Two bystanders exist for the whole session: a log file
in /tmp and a process whose name looks like a Mininet node shell (what a
cleanup that kills by name, or Mininet's own cleanup, would remove). The
session fails if either is gone at the end.
"""

from __future__ import annotations

import os
import subprocess
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from testbed.owned import STATE_DIR_ENV


@pytest.fixture(scope="session", autouse=True)
def _testbed_state_dir(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    old = os.environ.get(STATE_DIR_ENV)
    path = tmp_path_factory.mktemp("testbed-state")
    os.environ[STATE_DIR_ENV] = str(path)
    yield path
    if old is None:
        os.environ.pop(STATE_DIR_ENV, None)
    else:
        os.environ[STATE_DIR_ENV] = old


@pytest.fixture(scope="session", autouse=True)
def _bystanders_survive() -> Iterator[None]:
    tag = f"p4tb-bystander-{uuid.uuid4().hex[:12]}"
    log = Path("/tmp") / f"{tag}.log"
    log.write_text("a log another program is writing\n")
    # a process the testbed did not start, named like a Mininet node shell
    proc = subprocess.Popen([f"mininet:{tag}", "3600"], executable="sleep",
                            stdin=subprocess.DEVNULL)
    try:
        yield
        harmed = []
        if not log.exists():
            harmed.append(f"the file {log} was deleted")
        if proc.poll() is not None:
            harmed.append(f"the process {proc.pid} (mininet:{tag}) was killed ({proc.returncode})")
        assert not harmed, "the test suite harmed what it does not own: " + "; ".join(harmed)
    finally:
        log.unlink(missing_ok=True)
        if proc.poll() is None:
            proc.kill()
        proc.wait()
