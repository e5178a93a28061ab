"""symphony.p4 on a two-tier leaf-spine of soft switches: ECMP spreads flows
over the spines by their 5-tuple, static routes keep one spine, and
Symphony's marking follows the job across the fabric."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from testbed.net import P4_DIR, LeafSpine, leaf_spine, running
from testbed.symphony import JobIdAllocator, SymphonyParams

from .helpers import host_result, host_run, host_start

pytestmark = [pytest.mark.root, pytest.mark.usefixtures("no_leftovers")]

PROGRAM = P4_DIR / "symphony.p4"
FLOWS, PER_FLOW = 32, 4


def _spine_frames(switches: dict[str, Any], fabric: LeafSpine, leaf: int) -> list[int]:
    """Frames each spine received from ``leaf``."""
    return [switches[n].stats()["ports"][str(leaf)]["rx_frames"] for n in fabric.spine_names]


def _flows(h_src: Any, h_dst: Any, dst_ip: str, sport0: int) -> dict[str, Any]:
    sink = host_start(h_dst, "udp-sink", 6000, 1.0)
    try:
        host_run(h_src, "udp-flows", dst_ip, 6000, FLOWS, PER_FLOW, sport0, "0x00")
        return host_result(sink)
    finally:
        sink.kill()
        sink.wait()


def _tagged(h_src: Any, h_dst: Any, dst_ip: str, job: int, step: int, psn: int,
            count: int) -> dict[str, int]:
    """ECN code points of ``count`` ECT(0) RoCE write packets as they arrived."""
    sink = host_start(h_dst, "udp-sink", 4791, 1.0)
    try:
        host_run(h_src, "roce-tagged", dst_ip, job, step, psn, count, "0x07", "0x02")
        got = host_result(sink)
    finally:
        sink.kill()
        sink.wait()
    assert got["received"] == count, got
    return {k: int(v) for k, v in got["ecn"].items()}


@pytest.mark.parametrize("ecmp", [True, False], ids=["ecmp", "static"])
def test_flows_spread_over_spines_and_symphony_marks_per_job(tmp_path: Path,
                                                             ecmp: bool) -> None:
    fabric = LeafSpine(leaves=2, spines=2, hosts_per_leaf=2, ecmp=ecmp)
    net, switches, hosts, addrs = leaf_spine(fabric, PROGRAM, log_dir=tmp_path)
    h1, h2, h3, _h4 = hosts
    with running(net):
        # within a leaf: no spine sees it
        ping = h1.cmd(f"ping -c 2 -i 0.2 -W 2 {addrs[1].ip}")
        assert " 0% packet loss" in ping and "ttl=63" in ping, ping
        # across the fabric: leaf, spine, leaf (TTL 64 - 3)
        ping = h1.cmd(f"ping -c 2 -i 0.2 -W 2 {addrs[2].ip}")
        assert " 0% packet loss" in ping and "ttl=61" in ping, ping

        before = _spine_frames(switches, fabric, 1)
        got = _flows(h1, h3, addrs[2].ip, 20000)
        assert got["received"] == FLOWS * PER_FLOW, got
        carried = [a - b for a, b in zip(_spine_frames(switches, fabric, 1), before,
                                         strict=True)]
        assert sum(carried) == FLOWS * PER_FLOW, carried   # the L3 program drops the rest
        if ecmp:
            # 32 five-tuples hashed over 2 spines: each gets a fair share
            # (binomial(32, 1/2) is below 8 with probability 0.001) ...
            assert min(carried) >= 8 * PER_FLOW, carried
            # ... and a flow keeps its spine: per-spine counts are whole flows
            assert all(c % PER_FLOW == 0 for c in carried), carried
        else:
            static = fabric.static_spine(3) - 1
            assert carried[static] == FLOWS * PER_FLOW, carried

        # Symphony: one job id registered on every switch of the fabric, k = 1
        # (a packet ahead of step_min with psn >= psn_rec is marked with P = 1),
        # windows that do not end during the test.
        alloc = JobIdAllocator({n: sw.controller() for n, sw in switches.items()})
        alloc.configure(SymphonyParams(k=1.0, t_win_us=1e9, psn_window_us=1e9))
        job = alloc.allocate(list(switches), name="fabric")
        assert _tagged(h1, h3, addrs[2].ip, job, 100, 0, 12)["3"] == 0   # step_min 100
        ahead = _tagged(h1, h3, addrs[2].ip, job, 101, 40, 6)           # ahead, psn > psn_rec
        assert ahead["3"] == 6, ahead
        # an untracked job's step ahead is left alone; so is the tracked job
        # once its lagging step ended (WRITE_LAST moves step_min to 101)
        assert _tagged(h1, h3, addrs[2].ip, 200, 101, 40, 6)["3"] == 0
        host_run(h1, "roce-tagged", addrs[2].ip, job, 100, 12, 1, "0x08", "0x02")
        assert _tagged(h1, h3, addrs[2].ip, job, 101, 50, 6)["3"] == 0
        # the leaves saw every packet of the job; the marks are counted per job id
        marks = {n: switches[n].controller().register_read("MyEgress.symphony.marks", job)
                 for n in fabric.leaf_names}
        assert all(m >= 6 for m in marks.values()), marks
        alloc.release(job)
        assert _tagged(h1, h3, addrs[2].ip, job, 102, 60, 6)["3"] == 0
