"""The daemon's record of frames that arrived closer together than their
port's link could have carried them (what a NIC never sends)."""

from __future__ import annotations

import test_runtime_support as prog
from test_runtime_support import FakeClock, l2_frame

from switches.soft.control.verbs import ControlPlane
from switches.soft.daemon import SwitchDaemon
from switches.soft.runtime.switch import SoftSwitch

FRAME = l2_frame(0x0A0B0C0D0E0F)          # 60 bytes: 100 us at 4.8 Mb/s


def test_bunched_arrivals_are_counted_per_port() -> None:
    sw = SoftSwitch(prog, now_us=FakeClock())
    ControlPlane(sw).execute(f"set_port_rate_bps {len(FRAME) * 8 * 10_000} 1")
    d = SwitchDaemon(sw, [])
    try:
        us = 1000
        # port 1: one packet time apart, then 10 us (bunched), then 60 us (fine)
        d._note_gaps([(t * us, 1, FRAME) for t in (0, 100, 200, 210, 270)])
        # port 2 has no rate: gaps recorded, nothing judged
        d._note_gaps([(t * us, 2, FRAME) for t in (0, 1)])
        st = d.stats()
        assert st["ingress_bunched"] == {"1": 1}
        assert st["ingress_min_gap_ns"] == {"1": 10 * us, "2": 1 * us}
    finally:
        d.close()
