"""`testbed run roce-basics` end to end in Mininet: acceptance thresholds, plots,
a killed host agent, and pcaps that Wireshark dissects as RoCE with valid ICRCs."""

from __future__ import annotations

import json
import os
import shutil
import signal
import struct
import subprocess
import sys
import time
import zlib
from pathlib import Path

import pytest

from switches.soft.pcap import read_pcap

from .helpers import as_foreground_job, assert_faithful

pytestmark = [pytest.mark.root, pytest.mark.usefixtures("no_leftovers")]

REPO = Path(__file__).resolve().parents[2]


def run_cli(*args: str, timeout: float = 150) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "testbed.cli", *args], cwd=REPO,
                          capture_output=True, text=True, timeout=timeout)


def agent_processes(run_dir: Path) -> list[str]:
    """Host agents, and agent launchers, of the run in ``run_dir`` still
    running (other people's agents on this machine are none of this test's
    business); a forked agent has its launcher's command line."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            argv = (entry / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if ({b"hosts.agent", b"hosts.agent_launcher"} & set(argv[:4])
                and any(str(run_dir).encode() in a for a in argv)):
            found.append(f"{entry.name}: {b' '.join(argv).decode(errors='replace')}")
    return found


def is_png(p: Path) -> bool:
    return p.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and p.stat().st_size > 10_000


@pytest.mark.parametrize("preset", ["zhu2015", "connectx"])
def test_quick_run_meets_the_acceptance_thresholds(tmp_path: Path, preset: str) -> None:
    out = tmp_path / "run"
    r = run_cli("run", "roce-basics", "--quick", "--out", str(out), "-p", f"dcqcn_preset={preset}")
    assert r.returncode == 0, r.stdout + r.stderr
    s = json.loads((out / "summary.json").read_text())
    assert s["ok"] is True and s["experiment"] == "roce-basics"
    assert_faithful(s)
    assert s["single"]["goodput_fraction"] >= 0.95, s["single"]
    assert s["single.goodput_fraction"] == s["single"]["goodput_fraction"]
    pair = s["pair"]
    assert pair["bytes_ok"] is True
    if preset == "zhu2015":
        # The paper's few large cuts: fair and well inside the 64-packet buffer
        # (scripts/dcqcn_pair_whatif.py, 20 seeds without jitter: Jain >= 0.996,
        # queue 19-33 packets).
        assert pair["jain_index"] >= 0.95, pair
        assert pair["max_queue_pkts"] < pair["queue_limit_pkts"], pair
        assert pair["queue_drops"] == 0
    else:
        # mlx5 defaults: a sawtooth of small cuts every 40 ms with Rt kept at
        # the line rate. The same jitter-free model, 60 seeds: Jain 0.932-1.0
        # (mean 0.986), queue peaks 37-66 packets, so the 64-packet buffer
        # can overflow and go-back-N must repair it (hosts/roce/README.md).
        assert pair["jain_index"] >= 0.90, pair
        assert pair["max_queue_pkts"] > s["params"]["ecn_kmax"], pair
        if pair["queue_drops"]:
            assert pair["retransmissions"] > 0, pair
    # The pair really congested the bottleneck: marks, CNPs, a queue above Kmin.
    assert pair["cnps"] > 0 and pair["max_queue_pkts"] >= s["params"]["ecn_kmin"]
    assert s["loss"]["bytes_ok"] is True
    assert s["loss"]["retransmissions"] > 0, "1% loss but nothing was retransmitted"
    # What the run must record to be reproducible.
    assert s["params"]["bottleneck_mbps"] == 4.0
    assert {"python", "kernel", "git_rev"} <= set(s["versions"])
    assert s["transport"]["dcqcn"]["rate_increase_period_s"] > 0
    assert s["transport"]["dcqcn"]["preset"] == preset
    # Every cut and increase of the pair's reaction points is in the timelines.
    from testbed.timeline import load_phase
    pair = load_phase(out, "pair")
    cuts = [e for e in pair.all_events("dcqcn") if e["kind"] == "cut"]
    assert cuts and {e["flow"] for e in cuts} <= {"pair-a", "pair-b"}
    if preset == "zhu2015":         # no monitor period: every CNP cuts
        assert len(cuts) == s["pair"]["cnps"]
    else:                           # CNPs within 4 us (x slowdown) share one cut
        assert len(cuts) <= s["pair"]["cnps"]
    assert s["transport"]["scale"]["rto_ns"] > 0
    for name in ("single", "pair", "loss"):
        assert is_png(out / "plots" / f"{name}.png")
        assert (out / "phases" / name / "switch.jsonl").stat().st_size > 0
    # Progress: one line per phase and the elapsed time.
    for name in ("single", "pair", "loss"):
        assert f"] phase {name}: done in" in r.stdout
    # Who had the CPUs: the switch and every agent of the phase, the machine.
    cpu = json.loads((out / "phases" / "single" / "switch_stats.json").read_text())["cpu"]
    assert {"s1", "h1", "h3"} <= set(cpu["processes"]), cpu
    for p in cpu["processes"].values():
        assert 0 <= p["cpu_share"] <= cpu["cpus"] and 0 <= p["wait_share"] <= cpu["cpus"], cpu
    assert cpu["processes"]["h1"]["cpu_share"] > 0
    assert 0 < cpu["machine"]["busy_share"] <= 1
    assert "] phase single: CPU s1 " in r.stdout
    assert agent_processes(out) == []


def test_hosts_serialised_by_a_line_rate_qdisc(tmp_path: Path) -> None:
    """With host_qdisc_ahead_packets, each host's interface has an HTB at the
    line rate and every sending QP its own class there: the lone sender keeps
    packets queued in it (run-ahead), the two senders of the pair see their
    DCQCN cuts applied to their classes, the kernel sends their data through
    them, and the run stays faithful."""
    out = tmp_path / "run"
    r = run_cli("run", "roce-basics", "--out", str(out), "-p", "bottleneck_mbps=10",
                "-p", "phases=single,pair", "-p", "single_msgs=40", "-p", "pair_msgs=40",
                "-p", "host_qdisc_ahead_packets=8", "--phase-retries", "2")
    assert r.returncode == 0, r.stdout + r.stderr
    assert "an HTB qdisc at 10 Mb/s on each host's interface" in r.stdout
    s = json.loads((out / "summary.json").read_text())
    # A phase the machine disturbed ran again; its try is kept apart, with why.
    for retry in s["phase_retries"]:
        assert retry["verdict"].startswith("not faithful"), retry
        assert (out / retry["kept"] / "switch_stats.json").is_file(), retry
    assert_faithful(s)
    stats = json.loads((out / "phases" / "single" / "switch_stats.json").read_text())
    sent = stats["host_qdiscs"]["h1"]
    assert sent["dropped"] == 0 and sent["sent_pkts"] >= 40 * 64, sent
    from testbed.timeline import load_phase
    ends = [e for e in load_phase(out, "single").all_events("flow_end") if e["role"] == "sender"]
    assert ends and ends[0]["pacer"]["ahead_sends"] > 0.9 * 40 * 64, ends[0]["pacer"]
    assert ends[0]["pacer"]["shaped"]["sent_bytes"] >= ends[0]["qp"]["tx_bytes"] - 64 * 1100
    pair = [e for e in load_phase(out, "pair").all_events("flow_end") if e["role"] == "sender"]
    assert len(pair) == 2
    for e in pair:
        shaped = e["pacer"]["shaped"]
        # Every byte went through the QP's own class (the last few frames may
        # still be counted as the phase ends), and DCQCN's cuts reached it.
        assert shaped["class"].startswith("1:"), shaped
        assert shaped["rate_changes"] >= min(1, e["qp"]["cnps_rcvd"]), (shaped, e["qp"])
        assert shaped["sent_bytes"] >= 0.9 * e["qp"]["tx_bytes"], (shaped, e["qp"])
    assert s["pair"]["cnps"] >= 1 and max(e["pacer"]["shaped"]["rate_changes"] for e in pair) >= 1
    if s["single"]["goodput_fraction"] < 0.95:
        # Known gap (hosts/roce/README.md, "Speed"): the verdict does not see a
        # sender that lets the line-rate qdisc run dry, so a faithful run can
        # still fall short (0.886 once with the former TBF, in a clean-clone
        # run at load ~2).
        pytest.xfail(f"line-rate qdisc run short of 0.95 goodput: {s['single']}")


def test_a_killed_host_agent_fails_the_run_and_leaves_nothing(tmp_path: Path) -> None:
    out = tmp_path / "run"
    proc = subprocess.Popen(
        [sys.executable, "-m", "testbed.cli", "run", "roce-basics", "--quick", "--out", str(out),
         "-p", "single_msgs=400"],
        cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        events = out / "phases" / "single" / "h1.events.jsonl"
        deadline = time.monotonic() + 60
        pid = None
        while time.monotonic() < deadline and proc.poll() is None:
            if events.exists():
                lines = events.read_text().splitlines()
                if any('"event":"start"' in ln for ln in lines):
                    pid = json.loads(lines[0])["pid"]
                    break
            time.sleep(0.1)
        assert pid is not None, "the sender never started"
        os.kill(pid, signal.SIGKILL)
        stdout, stderr = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 1, stdout + stderr
    assert "host h1: agent was killed by SIGKILL in phase 'single'" in stderr, stderr
    assert "h1.log" in stderr
    s = json.loads((out / "summary.json").read_text())
    assert s["ok"] is False and "host h1" in s["error"]
    assert agent_processes(out) == []


def test_ctrl_c_stops_the_run_and_leaves_nothing(tmp_path: Path) -> None:
    out = tmp_path / "run"
    proc = subprocess.Popen(
        [sys.executable, "-m", "testbed.cli", "run", "roce-basics", "--quick", "--out", str(out),
         "-p", "single_msgs=400"],
        cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        preexec_fn=as_foreground_job)
    try:
        events = out / "phases" / "single" / "h3.events.jsonl"
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and proc.poll() is None:
            if events.exists() and '"event":"start"' in events.read_text():
                break
            time.sleep(0.1)
        proc.send_signal(signal.SIGINT)
        stdout, stderr = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 130, stdout + stderr
    assert "interrupted" in stderr
    s = json.loads((out / "summary.json").read_text())
    assert s["ok"] is False and "interrupted" in s["error"]
    assert agent_processes(out) == []


def _icrc_ok(frame: bytes) -> bool:
    """RoCEv2 ICRC check written from the specification: CRC-32 over 8 bytes of
    ones (LRH), the IPv4 header with TOS, TTL and checksum set to ones, the UDP
    header with its checksum set to ones, the BTH with its reserved byte 4 set
    to ones, and the rest up to the ICRC, which follows least significant byte
    first."""
    ip = bytearray(frame[14:])
    ihl = (ip[0] & 0x0F) * 4
    total = struct.unpack("!H", ip[2:4])[0]
    ip = ip[:total]
    masked = bytearray(ip[: len(ip) - 4])
    masked[1] = 0xFF
    masked[8] = 0xFF
    masked[10:12] = b"\xff\xff"
    masked[ihl + 6: ihl + 8] = b"\xff\xff"
    masked[ihl + 8 + 4] = 0xFF
    crc = zlib.crc32(b"\xff" * 8 + bytes(masked))
    return crc == struct.unpack("<I", ip[-4:])[0]


def _tshark_fields(pcap: Path, *fields: str) -> list[list[str]]:
    # not ICMP: a port-unreachable that quotes a late RoCE frame (its peer's
    # socket closed at the end of the run) also dissects as InfiniBand
    cmd = ["tshark", "-r", str(pcap), "-Y", "infiniband && !icmp", "-T", "fields"]
    for f in fields:
        cmd += ["-e", f]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    return [line.split("\t") for line in r.stdout.splitlines()]


def test_pcap_of_a_run_dissects_as_roce_with_valid_icrc(tmp_path: Path) -> None:
    if shutil.which("tshark") is None:
        pytest.skip("tshark is not installed (apt-get install tshark)")
    out = tmp_path / "run"
    r = run_cli("run", "roce-basics", "--quick", "--pcap", "--out", str(out),
                "-p", "single_msgs=2", "-p", "pair_msgs=6", "-p", "loss_msgs=3")
    assert r.returncode == 0, r.stdout + r.stderr
    pcaps = sorted((out / "switch").glob("*.pcap"))
    assert len(pcaps) == 6  # in and out of 3 ports
    opcodes: set[int] = set()
    checked = 0
    for pcap in pcaps:
        frames = [f for _t, f in read_pcap(pcap)]
        roce = [f for f in frames if f[12:14] == b"\x08\x00" and f[23] == 17
                and f[36:38] == (4791).to_bytes(2, "big")]
        assert roce, f"{pcap.name}: no RoCEv2 frames"
        rows = _tshark_fields(pcap, "frame.number", "infiniband.bth.opcode",
                              "infiniband.bth.destqp", "infiniband.invariant.crc")
        # Every UDP/4791 frame is dissected as InfiniBand (BTH and ICRC found).
        assert len(rows) == len(roce), pcap.name
        for row, frame in zip(rows, roce, strict=True):
            op = int(row[1], 0)
            opcodes.add(op)
            if row[3] or op != 0x81:  # Wireshark 4.0 shows no ICRC for CNPs (opcode unknown)
                assert int(row[3], 16) == struct.unpack("!I", frame[-4:])[0]
            assert _icrc_ok(frame), f"{pcap.name} frame {row[0]}: bad ICRC"
            checked += 1
    # RDMA WRITE First / Middle / Last-with-Imm, ACK and CNP all went through.
    assert {0x06, 0x07, 0x09, 0x11, 0x81} <= opcodes, sorted(opcodes)
    assert checked > 1000
    # Wireshark versions that verify the ICRC themselves expose a status field.
    fields = subprocess.run(["tshark", "-G", "fields"], capture_output=True, text=True).stdout
    if "infiniband.invariant.crc.status" in fields:
        for pcap in pcaps:
            bad = _tshark_fields(pcap, "infiniband.invariant.crc.status")
            assert all(row[0] != "0" for row in bad), f"{pcap.name}: tshark reports a bad ICRC"
