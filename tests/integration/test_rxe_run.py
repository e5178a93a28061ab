"""`testbed run roce-basics --hosts rxe --quick`, end to end, as a user runs it:
rdma_rxe hosts in Mininet, their agents on the rxe provider, and the DCQCN shim
(hosts.roce.rxe.dcqcn_shim). In the pair phase two senders share the switch's port
toward one receiver, the switch marks CE, the receiver's shim sends CNPs and the
senders' shims cut their QPs' rates (tc HTB classes), feeding DCQCN's byte
counter from those classes' counters; every phase delivers the bytes that
were sent. Skips where rxe hosts cannot run (no rdma_rxe: this
machine); the guest VM runs it (vm/guest-tests.sh).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from .helpers import run_on_rxe_hosts


def _events(run: Path, phase: str, host: str) -> list[dict]:
    text = (run / "phases" / phase / f"{host}.events.jsonl").read_text()
    return [json.loads(x) for x in text.splitlines()]


@pytest.mark.root
def test_quick_run_on_rxe_hosts_and_the_shim_slowing_senders_on_ce(tmp_path: Path) -> None:
    run = tmp_path / "run"
    summary = run_on_rxe_hosts("roce-basics", run, quick=True)
    for phase in ("single", "pair", "loss"):
        assert summary[phase]["bytes_ok"], phase
        assert (run / "plots" / f"{phase}.png").stat().st_size > 0
    pair = summary["pair"]
    assert pair["ce_marked_pkts"] > 0 and pair["cnps"] > 0
    line_bps = summary["params"]["bottleneck_mbps"] * 1e6
    for host, flow in (("h1", "pair-a"), ("h2", "pair-b")):
        evs = _events(run, "pair", host)
        cnps = [e for e in evs if e["event"] == "cnp_rx"]
        cuts = [e for e in evs if e["event"] == "dcqcn" and e["kind"] == "cut"]
        rates = [e["rc_bps"] for e in evs if e["event"] == "rate" and e["flow"] == flow]
        end = next(e for e in evs if e["event"] == "flow_end" and e["flow"] == flow)
        # the receiver's CNPs reached this sender's shim, and its rate was cut
        assert cnps and cuts, host
        assert min(rates) < 0.9 * line_bps, host
        assert end["cnps_rcvd"] == len(cnps)
        # DCQCN's byte counter followed the QP's HTB class (read at each CNP at least)
        bc = next(e for e in evs if e["event"] == "agent_end")["dcqcn_byte_counter"]
        assert bc["source"] == "htb_class" and bc["fallback"] is None, bc
        assert bc["reads"] >= 1 and bc["bytes"] > 0, bc
    # the receiver's shim counted the CE marks it answered
    rx = [e for e in _events(run, "pair", "h3") if e["event"] == "flow_end"]
    assert sum(e["qp"]["cnps_sent"] for e in rx) > 0
    assert summary["fidelity"]["checks"]["host_pacing_late_fraction"]["status"] == "not measured"
