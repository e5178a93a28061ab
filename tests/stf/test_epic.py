"""epic.p4 beyond its STF file: the generated includes and STF are current, and
every packet the switch rewrites carries an ICRC that scapy.contrib.roce (an
implementation independent of the project) computes the same way."""

from __future__ import annotations

import struct
import subprocess
import sys
from pathlib import Path

import pytest
from scapy.contrib import roce as scapy_roce
from scapy.layers.inet import IP, UDP
from scapy.packet import Raw

from switches.soft.compiler import compile_program
from switches.soft.runtime.switch import SoftSwitch
from switches.soft.stf import SoftStfTarget, run_stf
from switches.stf import parse_stf, run_commands

ROOT = Path(__file__).resolve().parents[2]
EPIC = ROOT / "switches" / "p4" / "epic.p4"


@pytest.mark.parametrize("script", ["gen_epic_p4.py", "gen_epic_stf.py"])
def test_generated_files_are_current(script: str) -> None:
    proc = subprocess.run([sys.executable, str(ROOT / "scripts" / script), "--check"],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr


def scapy_icrc(frame: bytes) -> int:
    """The ICRC scapy.contrib.roce computes for an Ethernet/IPv4/UDP/RoCE frame."""
    ip_b = frame[14:]
    ihl = (ip_b[0] & 0xF) * 4
    ip = IP(ip_b[:ihl])
    udp = ip_b[ihl: ihl + 8]
    roce = ip_b[ihl + 8:]
    op, flags, pkey, w1, w2 = struct.unpack("!BBHII", roce[:12])
    bth = scapy_roce.BTH(opcode=op, solicited=flags >> 7, migreq=(flags >> 6) & 1,
                         padcount=(flags >> 4) & 3, version=flags & 0xF, pkey=pkey,
                         dqpn=w1 & 0xFFFFFF, ackreq=w2 >> 31, psn=w2 & 0xFFFFFF)
    sport, dport = struct.unpack("!HH", udp[:4])
    pkt = IP(src=ip.src, dst=ip.dst, id=ip.id, flags=ip.flags, frag=ip.frag, ttl=ip.ttl,
             tos=ip.tos, proto=17) / UDP(sport=sport, dport=dport) / bth / Raw(roce[12:-4])
    return int.from_bytes(bytes(pkt)[-4:], "little")


def stf_outputs() -> list[bytes]:
    """Every frame epic.p4 emits for the packets of its STF test."""
    target = SoftStfTarget(SoftSwitch(compile_program(EPIC)))
    stf = ROOT / "switches" / "p4" / "tests" / "epic.stf"
    run_commands(parse_stf(stf.read_text(), str(stf)), target)
    return [f for frames in target.outputs().values() for f in frames]


def test_rewritten_packets_carry_the_icrc_scapy_computes() -> None:
    frames = stf_outputs()
    rewritten = [f for f in frames if f[26:30] == bytes([10, 255, 0, 1])]  # from the endpoint
    assert len(rewritten) >= 20
    kinds = {f[42] for f in rewritten}
    assert {0x00, 0x01, 0x02, 0x04, 0x05, 0x11, 0x81} <= kinds
    for f in rewritten:
        assert int.from_bytes(f[-4:], "little") == scapy_icrc(f), f.hex()


def test_a_wrong_icrc_is_detected() -> None:
    """The check above is not vacuous: one flipped payload bit changes scapy's ICRC."""
    f = bytearray(stf_outputs()[0])
    good = scapy_icrc(bytes(f))
    f[60] ^= 1
    assert scapy_icrc(bytes(f)) != good


def test_stf_passes_and_depends_on_the_window() -> None:
    stf = ROOT / "switches" / "p4" / "tests" / "epic.stf"
    assert run_stf(EPIC, stf).passed
    assert run_stf(EPIC, stf, defines={"EPIC_WINDOW_LOG2": "5"}).passed    # the default
    # compiled with another window (a -D define, as Topology.defines passes it)
    # the dual slot of PSN 2 is elsewhere: the clearing case fails
    for log2 in ("4", "7"):
        assert not run_stf(EPIC, stf, defines={"EPIC_WINDOW_LOG2": log2}).passed


def test_stf_of_a_wider_window_passes_on_the_program_compiled_for_it(tmp_path: Path) -> None:
    """The same cases written for W = 128 (the paper profile's window of
    epic-allreduce) pass on epic.p4 compiled with EPIC_WINDOW_LOG2=7."""
    proc = subprocess.run([sys.executable, str(ROOT / "scripts" / "gen_epic_stf.py"),
                           "--window-log2", "7"], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    stf = tmp_path / "epic.w128.stf"
    stf.write_text(proc.stdout)
    assert "PSN 386" in proc.stdout             # the dual-slot case at 2 + 3W
    assert run_stf(EPIC, stf, defines={"EPIC_WINDOW_LOG2": "7"}).passed
    assert not run_stf(EPIC, stf).passed
