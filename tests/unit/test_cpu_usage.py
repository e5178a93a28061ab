"""Per-phase CPU accounting: each process's CPU share and run-queue wait, the machine's load."""

from __future__ import annotations

import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from testbed import cpu_usage
from testbed.cpu_usage import CpuSampler, format_cpu, read_cpus, read_machine, read_schedstat


def _fake_proc(root: Path, tasks: dict[int, dict[int, tuple[int, int]]],
               stat: tuple[int, ...]) -> None:
    for pid, threads in tasks.items():
        for tid, (run, wait) in threads.items():
            d = root / str(pid) / "task" / str(tid)
            d.mkdir(parents=True, exist_ok=True)
            (d / "schedstat").write_text(f"{run} {wait} 7\n")
    (root / "stat").write_text("cpu  " + " ".join(map(str, stat)) + "\ncpu0 1 2 3\n")


def test_shares_come_from_the_first_and_last_reading(tmp_path: Path,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    clock = iter([1_000_000_000, 3_000_000_000, 5_000_000_000])
    monkeypatch.setattr(cpu_usage.time, "monotonic_ns", lambda: next(clock))
    s = CpuSampler(proc=str(tmp_path))
    s.add("s1", 10)
    s.add("h3", 11)
    # user nice system idle iowait irq softirq steal
    _fake_proc(tmp_path, {10: {10: (0, 0), 12: (100, 0)}, 11: {11: (0, 0)}},
               (100, 0, 0, 100, 0, 0, 0, 0))
    s.sample()
    # s1's two threads ran 1.5 s of the 2 s; h3 ran 0.4 s and waited 1.2 s
    _fake_proc(tmp_path, {10: {10: (1_000_000_000, 0), 12: (500_000_100, 0)},
                          11: {11: (400_000_000, 1_200_000_000)}},
               (250, 0, 50, 130, 10, 0, 60, 12))
    s.sample()
    # h3 exits: its last reading stands; the machine goes on
    shutil.rmtree(tmp_path / "11")
    _fake_proc(tmp_path, {}, (400, 0, 100, 200, 20, 0, 80, 18))
    s.sample()
    r = s.result()
    assert r["processes"]["s1"] == {"cpu_share": 0.375, "wait_share": 0.0, "seconds": 4.0}
    assert r["processes"]["h3"] == {"cpu_share": 0.2, "wait_share": 0.6, "seconds": 2.0}
    # ticks: total 200 -> 818 (618), idle+iowait 100 -> 220 (120), softirq 0 -> 80,
    # steal 0 -> 18 (the hypervisor's, busy from the guest's side)
    assert r["machine"] == {"busy_share": 0.8058, "softirq_share": 0.1294,
                            "steal_share": 0.0291, "seconds": 4.0}
    line = format_cpu(r)
    assert line.startswith("s1 38%, h3 20% (waited 60%), machine 81% busy of ")
    assert "(13% soft interrupts, 2.9% stolen by the hypervisor)" in line


def test_a_process_read_once_or_never_is_left_out(tmp_path: Path) -> None:
    s = CpuSampler(proc=str(tmp_path))
    s.add("h1", 5)
    _fake_proc(tmp_path, {5: {5: (1, 1)}}, (1, 0, 0, 1, 0, 0, 0, 0))
    s.sample()
    s.add("h2", 6)             # never there
    s.sample()                 # the same counters: h1 did not run
    r = s.result()
    assert "h2" not in r["processes"]
    assert r["processes"]["h1"]["cpu_share"] == 0
    assert read_schedstat(6, str(tmp_path)) is None
    with pytest.raises(ValueError, match="already process 5"):
        s.add("h1", 7)


def test_malformed_proc_files_read_as_not_measured(tmp_path: Path) -> None:
    (tmp_path / "stat").write_text("intr 1 2 3\n")
    assert read_machine(str(tmp_path)) is None
    d = tmp_path / "9" / "task" / "9"
    d.mkdir(parents=True)
    (d / "schedstat").write_text("garbage\n")
    assert read_schedstat(9, str(tmp_path)) is None
    s = CpuSampler(proc=str(tmp_path))
    s.add("x", 9)
    s.sample()
    s.sample()
    assert s.result() == {"processes": {}, "cpus": s.cpus}
    assert format_cpu(s.result()) == ""


@pytest.mark.skipif(read_schedstat(1) is None, reason="the kernel keeps no scheduler statistics")
def test_a_busy_process_and_an_idle_one_on_this_machine() -> None:
    spin = subprocess.Popen([sys.executable, "-c",
                             "import time\nend = time.monotonic() + 1.2\n"
                             "while time.monotonic() < end: pass"])
    idle = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(1.2)"])
    try:
        time.sleep(0.2)         # past the interpreters' start-up
        s = CpuSampler()
        s.add("spin", spin.pid)
        s.add("idle", idle.pid)
        s.sample()
        time.sleep(0.6)
        s.sample()
    finally:
        spin.wait()
        idle.wait()
    r = s.result()
    busy, rest = r["processes"]["spin"], r["processes"]["idle"]
    # the spinner ran or waited for a CPU all the time (a loaded machine
    # moves time from the first to the second); the sleeper did neither
    assert busy["cpu_share"] + busy["wait_share"] > 0.85
    assert rest["cpu_share"] + rest["wait_share"] < 0.05
    assert 0 < r["machine"]["busy_share"] <= 1


def test_each_cpu_is_read_apart_from_the_machine(tmp_path: Path) -> None:
    # user nice system idle iowait irq softirq steal guest guest_nice
    (tmp_path / "stat").write_text(
        "cpu  10 0 10 70 10 0 5 5 0 0\n"
        "cpu0 6 0 4 30 5 0 3 2 0 0\n"
        "cpu1 4 0 6 40 5 0 2 3 0 0\n"
        "intr 1 2 3\n")
    cpus = read_cpus(str(tmp_path))
    assert cpus == {"cpu": (110, 80, 5, 5), "cpu0": (50, 35, 3, 2), "cpu1": (60, 45, 2, 3)}
    assert read_machine(str(tmp_path)) == cpus["cpu"]
    (tmp_path / "stat").write_text("cpu0 1 2\n")        # cut short
    assert read_cpus(str(tmp_path)) == {}
