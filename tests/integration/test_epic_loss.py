"""epic-loss --quick in Mininet: AllReduces through epic.p4 with 1 % random
loss on every link into and out of the switch stay bit-exact (the hosts'
go-back-N repairs every loss end to end), and are slower than without; and
the counts rxe hosts take from the wire (hosts.roce.rxe.wire_counts.WireCounts)
agree with the udp provider's own."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import numpy as np
import pytest

from hosts.agent.expectations import collective_input
from hosts.agent_spec import CollectiveSpec

from .helpers import qp_counts, run_experiment, wire_counts_at_switch, xfail_unless_faithful

pytestmark = [pytest.mark.root, pytest.mark.usefixtures("no_leftovers")]


def test_epic_loss_quick(tmp_path: Path) -> None:
    out = tmp_path / "run"
    s = run_experiment("epic-loss", out, timeout=2400, options=("--pcap",))
    p = s["params"]
    assert s["losses"] == [0.0, 0.01]
    spec = CollectiveSpec(rank=0, size=p["ranks"], dtype="int32", count=p["size_kib"] * 256,
                          iterations=p["iterations"], seed=p["seed"])
    for loss in s["losses"]:
        got: dict[int, set[str]] = {}
        for h in range(1, p["ranks"] + 1):
            path = out / "phases" / f"loss-{loss:g}" / f"h{h}.events.jsonl"
            for line in path.read_text().splitlines():
                e = json.loads(line)
                if e["event"] == "collective_check":
                    got.setdefault(e["iteration"], set()).add(e["sha256"])
        assert sorted(got) == list(range(p["iterations"])), loss
        for it, shas in got.items():
            total = np.sum([collective_input(spec, r, it) for r in range(p["ranks"])], axis=0,
                           dtype=np.int32)
            assert shas == {hashlib.sha256(total.tobytes()).hexdigest()}, (loss, it)
    assert s["bit_exact"] is True and s["bit_exact_per_loss"] == [True, True]
    # the switch did drop: the ranks retransmitted under loss, not without
    assert s["retransmissions"][0] == 0 and s["retransmissions"][1] > 0
    assert s["relative"][0] == 1.0 and s["model"][1] == pytest.approx(0.99 ** 14, abs=1e-4)
    assert (out / "plots" / "loss.png").stat().st_size > 5000
    # Each rank's go-back-N traffic, counted from the switch's capture of its
    # port as an rxe host's shim counts it on its interface, gives the udp
    # provider's own counts, summed over the rank's phases: where the capture
    # holds every frame (no frame dropped by the switch's socket or a host's
    # qdisc; else the run is not faithful, below).
    checks = s["fidelity"]["checks"]
    complete = all(checks[c]["value"] == 0 for c in ("switch_kernel_drops", "host_tx_drops"))
    for h in range(1, p["ranks"] + 1 if complete else 1):
        own = qp_counts(out, f"h{h}", ("retransmits", "naks_rcvd", "rto", "tx_pkts"))
        wire = wire_counts_at_switch(out, f"s1-eth{h}", f"10.0.{h}.1",
                                     s["transport"]["scale"]["rto_ns"] // 2)
        assert wire == {"retransmits": own["retransmits"], "naks_rcvd": own["naks_rcvd"],
                        "rto": own["rto"], "wire_tx_pkts": own["tx_pkts"]}, h
    xfail_unless_faithful(s, "epic-loss")
    assert 0 < s["relative_at_1pct"] < 1.0
