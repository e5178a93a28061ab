"""`testbed clean` after a crashed run: it removes that run's node shells,
daemons and links (found through the run's record) and nothing else; a log
file in /tmp and processes named like the testbed's survive."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
import uuid
from pathlib import Path

import pytest

from testbed.net import P4_DIR, REPO_ROOT, leftovers

pytestmark = [pytest.mark.root]


def _crashed_network(tmp_path: Path) -> int:
    """Bring a network up in a child process, start a host agent stand-in in
    it and SIGKILL the child (no teardown); the stand-in's pid."""
    script = tmp_path / "crash.py"
    script.write_text(textwrap.dedent(f"""\
        import sys, time
        sys.path.insert(0, {str(REPO_ROOT)!r})
        from testbed.net import running, star_router
        from testbed.owned import this_process_record
        net, sw, hosts, _ = star_router(2, {str(P4_DIR / "l3_router.p4")!r},
                                        log_dir={str(tmp_path)!r})
        with running(net):
            # started as the runner starts a host agent: it outlives a crashed
            # runner and keeps its host's namespace, and so the link, alive
            agent = hosts[0].popen(["sleep", "120"])
            this_process_record().add_process(agent.pid, "host agent h1")
            print("UP", agent.pid, flush=True)
            time.sleep(120)
        """))
    proc = subprocess.Popen([sys.executable, str(script)], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, cwd=str(REPO_ROOT),
                            start_new_session=True)
    assert proc.stdout is not None
    try:
        line = proc.stdout.readline()
    finally:
        proc.send_signal(signal.SIGKILL)
        _, err = proc.communicate()
    assert line.startswith("UP"), f"the network did not come up:\n{err[-3000:]}"
    return int(line.split()[1])


def test_clean_removes_a_crashed_run_and_nothing_else(tmp_path: Path) -> None:
    tag = f"p4tb-keep-{uuid.uuid4().hex[:12]}"
    log = Path("/tmp") / f"{tag}.log"
    log.write_text("still being written\n")
    bystanders = [
        # named like a Mininet node shell
        subprocess.Popen([f"mininet:{tag}", "600"], executable="sleep"),
        # argv like a soft switch daemon's and a host agent's
        subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)", "-m",
                          "switches.soft.daemon"]),
        subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)", "-m",
                          "hosts.agent"]),
    ]
    before = set(leftovers())
    try:
        agent = _crashed_network(tmp_path)
        time.sleep(0.5)
        crashed = set(leftovers()) - before
        assert "interface s1-eth1" in crashed, crashed
        r = subprocess.run([sys.executable, "-m", "testbed.cli", "clean"], cwd=REPO_ROOT,
                           capture_output=True, text=True, timeout=60, env=os.environ.copy())
        assert r.returncode == 0, r.stdout + r.stderr
        assert "records of finished runs cleaned: 1" in r.stdout, r.stdout
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline and set(leftovers()) - before:
            time.sleep(0.1)
        assert not set(leftovers()) - before, r.stdout
        assert f"host agent h1 (pid {agent})" in r.stdout and not Path(f"/proc/{agent}").exists()
        assert log.read_text() == "still being written\n"
        assert [p.poll() for p in bystanders] == [None, None, None]
    finally:
        log.unlink(missing_ok=True)
        for p in bystanders:
            p.kill()
            p.wait()
