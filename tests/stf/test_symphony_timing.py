"""symphony.p4's time windows and marking probability on the soft switch.

STF runs use the wall clock and an unseeded random source, so the STF files
keep windows from ending and marking probabilities at 0 or 1. Here a frozen,
hand-advanced clock and a seeded switch check the alpha window (T_win, tau,
N_sample, floor at 1), the psn window, and that the marking probability is
min(1, k * alpha * psn / psn_rec).
"""

from __future__ import annotations

import struct
from pathlib import Path

import pytest
from scapy.layers.inet import IP, UDP
from scapy.layers.l2 import Ether
from scapy.packet import Raw

from switches.soft.compiler import compile_program
from switches.soft.control.verbs import ControlPlane
from switches.soft.runtime.switch import SoftSwitch

P4 = Path(__file__).resolve().parents[2] / "switches" / "p4" / "symphony.p4"
JOB = 7
WRITE_MIDDLE = 0x07
N_PROB = 1500  # packets per probability estimate: 4 sigma <= 0.05


@pytest.fixture(scope="module")
def program():
    return compile_program(P4)


class Rig:
    def __init__(self, program, *, k_ppm: int, t_win: int, psn_win: int,
                 n_warmup: int = 8, n_sample: int = 8, seed: int = 3) -> None:
        self.now = 0
        self.sw = SoftSwitch(program, now_us=lambda: self.now, seed=seed)
        self.control = ControlPlane(self.sw)
        for line in (
            "table_add MyIngress.ipv4_lpm MyIngress.set_nhop 10.0.0.0/8 => 00:00:00:00:0a:01 1",
            f"table_add MyEgress.symphony.jobs MyEgress.symphony.track {JOB} =>",
            f"table_set_default MyEgress.symphony.config MyEgress.symphony.set_params "
            f"{k_ppm} 250000 {t_win} {psn_win} {n_warmup} {n_sample}",
        ):
            self.control.execute(line)

    def send(self, step: int, psn: int, at: int | None = None) -> bool:
        """Send one ECT(0) WRITE_MIDDLE of JOB; True if it left marked CE."""
        if at is not None:
            self.now = at
        bth = struct.pack("!BBHB", WRITE_MIDDLE, 0, 0xFFFF, JOB) + (0x11).to_bytes(3, "big") \
            + b"\0" + psn.to_bytes(3, "big")
        frame = bytes(Ether(dst="02:00:00:00:00:00", src="00:00:00:00:00:01")
                      / IP(src="10.0.0.1", dst="10.1.2.3", tos=0x02)
                      / UDP(sport=0xC000 | step, dport=4791, chksum=0)
                      / Raw(bth + b"x" * 16 + b"\0" * 4))
        out = self.sw.process_sync(0, frame)
        assert len(out) == 1
        return Ether(out[0][1])[IP].tos & 3 == 3

    def reg(self, name: str) -> int:
        return self.sw.register(f"MyEgress.symphony.{name}").read(JOB)


def window(rig: Rig, start: int, outpacing: int, total: int) -> None:
    """One T_win window from `start`: `total` packets, the first `outpacing` of
    them one step ahead of step_min 3 (psn 0 so they are never marked)."""
    for i in range(total):
        rig.send(4 if i < outpacing else 3, 0 if i < outpacing else 20, at=start + i)


def test_alpha_moves_once_per_window_by_the_tau_test(program) -> None:
    rig = Rig(program, k_ppm=10000, t_win=100, psn_win=1 << 30)
    rig.send(3, 20, at=0)                     # first packet: alpha 1, window starts at 0
    assert rig.reg("alpha") == 1
    window(rig, 1, outpacing=25, total=99)    # with the first packet: 25 of 100
    assert rig.reg("alpha") == 1              # the window has not ended yet
    window(rig, 100, outpacing=24, total=100)  # first packet at 100 ends window 1
    assert rig.reg("alpha") == 2              # 25 >= 0.25 * 100: +1
    window(rig, 200, outpacing=0, total=100)  # ends window 2: 24 < 25: -1
    assert rig.reg("alpha") == 1
    window(rig, 300, outpacing=100, total=100)
    assert rig.reg("alpha") == 1              # 0 outpacing: floor at 1
    window(rig, 400, outpacing=100, total=100)
    assert rig.reg("alpha") == 2
    window(rig, 500, outpacing=8, total=8)    # ends a window of 100 outpacing: +1
    assert rig.reg("alpha") == 3
    window(rig, 600, outpacing=0, total=10)   # 8 samples <= N_sample: no update
    assert rig.reg("alpha") == 3
    rig.send(3, 20, at=700)                   # 10 samples, none outpacing: -1
    assert rig.reg("alpha") == 2


def test_psn_rec_is_a_max_over_the_psn_window(program) -> None:
    rig = Rig(program, k_ppm=1_000_000, t_win=1 << 30, psn_win=100)
    rig.send(3, 50, at=0)
    rig.send(3, 30, at=40)
    assert rig.reg("psn_rec") == 50
    assert rig.send(4, 60, at=99)             # psn >= psn_rec, k = 1: P = 1
    assert not rig.send(4, 60, at=100)        # window ended: psn_rec 0 <= N_warmup
    assert rig.reg("psn_rec") == 0
    rig.send(3, 10, at=120)
    assert rig.reg("psn_rec") == 10           # the new window's max, not 50
    assert rig.send(4, 60, at=130)
    assert rig.reg("step_min") == 3


def marked_fraction(rig: Rig, step: int, psn: int, n: int) -> float:
    return sum(rig.send(step, psn) for _ in range(n)) / n


@pytest.mark.parametrize(("alpha", "psn", "expected"), [
    (1, 200, 0.02),    # k * 1 * 200/100
    (20, 50, 0.10),    # k * 20 * 50/100
    (20, 200, 0.40),   # k * 20 * 200/100
    (80, 200, 1.0),    # min(1, 1.6)
])
def test_marking_probability_is_k_alpha_delta(program, alpha: int, psn: int,
                                              expected: float) -> None:
    rig = Rig(program, k_ppm=10000, t_win=1 << 30, psn_win=1 << 30)
    rig.send(3, 100, at=0)                    # step_min 3, psn_rec 100
    rig.sw.register("MyEgress.symphony.alpha").write(JOB, alpha)
    frac = marked_fraction(rig, 4, psn, N_PROB)
    assert abs(frac - expected) <= max(0.02, 4 * (expected * (1 - expected) / N_PROB) ** 0.5)
    assert rig.reg("marks") == round(frac * N_PROB)
    assert rig.reg("alpha") == alpha          # no window ended: alpha unchanged


def test_registered_job_state_is_cleared_by_writing_zero(program) -> None:
    """What the controller does on allocation: a zeroed job starts afresh at
    its first packet, whatever step the previous owner of the id reached."""
    rig = Rig(program, k_ppm=1_000_000, t_win=1 << 30, psn_win=1 << 30)
    rig.send(9000, 50, at=0)
    assert rig.send(9001, 60)
    for name in ("seen", "step_min", "psn_rec", "alpha", "cnt_total", "cnt_op", "marks"):
        rig.sw.register(f"MyEgress.symphony.{name}").write(JOB, 0)
    assert not rig.send(2, 60)                # first packet again: step_min 2
    assert rig.reg("step_min") == 2 and rig.reg("alpha") == 1
