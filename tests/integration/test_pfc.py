"""Priority flow control end to end: two senders at line rate into one
switch port (roce-basics' pair phase), with RED set so high that DCQCN never
acts. Without PFC the 64-packet queue overflows; with PFC the switch pauses
each sender's port and the hosts obey, so nothing is lost and the link stays
busy."""

from __future__ import annotations

from pathlib import Path

import pytest

from .helpers import assert_faithful, run_experiment

pytestmark = [pytest.mark.root, pytest.mark.usefixtures("no_leftovers")]

# RED far up the queue: only PFC (or the tail drop) can hold the incast back.
INCAST = ("phases=pair", "pair_msgs=20", "queue_depth=64", "ecn_kmin=48", "ecn_kmax=60")


def test_pfc_makes_an_incast_lossless_and_the_hosts_obey_it(tmp_path: Path) -> None:
    lossy = run_experiment("roce-basics", tmp_path / "lossy", *INCAST)
    assert lossy["pair"]["queue_drops"] > 0     # the control: it does overflow

    s = run_experiment("roce-basics", tmp_path / "pfc", *INCAST,
                       "pfc_xoff_pkts=8", "pfc_xon_pkts=6")
    pair = s["pair"]
    assert pair["bytes_ok"]
    assert s["network"]["testbed"]["pfc_xoff_pkts"] == 8
    assert_faithful(s)
    pfc = pair["pfc"]
    # the switch paused both senders' ports and ended each pause
    assert pfc["xoff_sent"] >= 2 and pfc["xon_sent"] >= 2
    for host in ("h1", "h2"):
        assert pfc["hosts"][host]["xoffs"] > 0 and pfc["hosts"][host]["paused_s"] > 0
    assert "h3" not in pfc["hosts"] or pfc["hosts"]["h3"]["xoffs"] == 0
    # lossless: no tail drop, no retransmission; and no ECN either
    assert pair["queue_drops"] == 0 and pair["retransmissions"] == 0
    assert pair["ce_marked_pkts"] == 0
    # each ingress holds at most XOFF plus what its sender had in flight
    assert pair["max_queue_pkts"] < 2 * (8 + 6)
    # the paused senders take turns: the link stays busy and shared
    assert pair["utilization"] > 0.85 and pair["jain_index"] > 0.95
