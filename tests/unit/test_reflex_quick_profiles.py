"""The ReFlex experiments' quick profiles are smoke runs of the paper's
mechanism: fewer points, seeds and bytes and a faster clock, never other
values for what the paper fixes (alpha, T_int, the probing cycle, the queues,
RED, DCQCN), and still the keys the paper's claims are about."""

from __future__ import annotations

import dataclasses

import pytest

from experiments import reflex_cases, reflex_partial, reflex_probing
from experiments._reflex_net import QUICK_LINK_MBPS, ReflexNetwork

# What the paper fixes (and the transport standing in for DCTCP): the quick
# profiles may not touch these.
MECHANISM = ("nic_gbps", "t_int_us", "warmup", "measure", "exploit", "queue_pkts",
             "ecn_k_pkts", "msg_bytes", "window", "path_mtu", "dcqcn_preset", "rto_us")


@pytest.mark.parametrize("mod", [reflex_cases, reflex_partial, reflex_probing],
                         ids=lambda m: m.NAME)
def test_quick_keeps_the_papers_mechanism(mod: object) -> None:
    quick, full = mod.Params.quick(), mod.Params()  # type: ignore[attr-defined]
    for f in MECHANISM:
        assert getattr(quick, f) == getattr(full, f), f
    assert quick.alpha == full.alpha
    assert quick.link_mbps == QUICK_LINK_MBPS and full.link_mbps == ReflexNetwork().link_mbps
    # Modelled time is the same; only the testbed's clock runs faster.
    assert quick.t_int_s * quick.link_bps == pytest.approx(full.t_int_s * full.link_bps)
    assert quick.seeds == 1 and full.seeds == 3
    fields = {f.name for f in dataclasses.fields(full)}
    assert set(MECHANISM) <= fields


def test_quick_runs_the_points_the_claims_judge() -> None:
    keys = {c.key for mod in (reflex_cases, reflex_partial, reflex_probing)
            for c in mod.CLAIMS}
    assert {k.split(".")[0] for k in keys if k.startswith("d")} == {"d3"}
    assert reflex_probing.Params.quick().exploit_list == [3]
    assert [reflex_partial.r_key(r) for r in reflex_partial.Params.quick().r_list] == [
        "r000", "r100"]
    assert {k.split(".")[0] for k in keys if k.startswith("r")} == {"r000", "r100"}
    # every scheme, as in the full profile: each claim of Fig. 3/4 is judged
    quick = reflex_cases.Params.quick().scheme_list
    assert quick == reflex_cases.Params().scheme_list
    assert {k.split(".")[1] for k in keys if k.startswith("schemes.")} <= set(quick)
