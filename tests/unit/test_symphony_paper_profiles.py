"""The Symphony experiments' paper profiles: the paper's network declared once
(experiments/_symphony_net.py: PAPER_NETWORK against §4.1 and Table 1, its
layout on the leaf-spine for 32 and 128 nodes), each profile's values and
what it cuts, the payload (real or phantom) reaching every rank, and a
phantom run reporting no bit-exactness."""

from __future__ import annotations

import dataclasses
import json
import types
from pathlib import Path
from typing import Any

import pytest
from ring_runs import write_plan, write_ring_phase

from experiments import symphony_ring, symphony_sweep, symphony_two_jobs
from experiments._symphony_net import (
    PAPER_NETWORK,
    PaperFabric,
    SymphonyNetwork,
    SymphonyRing,
    paper_fabric,
    paper_ring_kwargs,
)
from testbed.experiment import RunPlan, ScaledDown, has_profile, scale_record, scaled_down_from
from testbed.summary import results_json

PROFILED = (symphony_ring, symphony_sweep, symphony_two_jobs)


def test_paper_network_is_section_4_1_and_table_1() -> None:
    n = PAPER_NETWORK
    assert (n["link_gbps"], n["tors"], n["spines"], n["nodes"]) == (10.0, 4, 4, 32)
    assert n["max_nodes"] == 128 and n["chunk_mb"] == 8 and n["runs"] == 20
    assert n["ring_dims"] == "8x4"
    assert (n["red_kmin_kb"], n["red_kmax_kb"], n["red_pmax"]) == (50.0, 100.0, 0.2)
    assert (n["tau"], n["t_win_us"], n["k"]) == (0.25, 100.0, 0.01)
    assert n["ecmp"] == "5-tuple" and n["dcqcn_preset"] == "hpcc" and n["pfc"] is True


def test_the_networks_defaults_are_the_papers() -> None:
    d = SymphonyNetwork()
    assert (d.red_kmin_kb, d.red_kmax_kb, d.red_pmax) == (
        PAPER_NETWORK["red_kmin_kb"], PAPER_NETWORK["red_kmax_kb"], PAPER_NETWORK["red_pmax"])
    assert (d.k, d.tau, d.t_win_us) == (
        PAPER_NETWORK["k"], PAPER_NETWORK["tau"], PAPER_NETWORK["t_win_us"])


@pytest.mark.parametrize(("nodes", "leaves"), [(32, 8), (128, 32)])
def test_paper_fabric_lays_out_one_spine_group_at_1_to_1(nodes: int, leaves: int) -> None:
    f = paper_fabric(nodes)
    assert f == PaperFabric(leaves=leaves, hosts_per_leaf=4, spines=4)
    assert f.nodes == nodes and f.ports == 8
    # not oversubscribed: a leaf's uplinks (one per spine) carry its hosts' rate
    assert f.spines >= f.hosts_per_leaf


@pytest.mark.parametrize("nodes", [30, 4, 256, 0])
def test_paper_fabric_refuses_what_it_cannot_lay_out(nodes: int) -> None:
    with pytest.raises(ValueError, match=f"^paper_fabric: {nodes} nodes: .*multiple of 4 "
                                         r"nodes .* from 8 to 128$") as e:
        paper_fabric(nodes)
    assert "\n" not in str(e.value)


@pytest.mark.parametrize("nodes", [32, 128])
def test_paper_ring_kwargs_are_hpccs_buffers_on_the_layout(nodes: int) -> None:
    kw = paper_ring_kwargs(nodes)
    r = SymphonyRing(**kw)
    assert r.link_mbps == 10_000 and r.slowdown == 1.0 and r.pfc
    assert r.leaves * r.hosts_per_leaf == nodes and r.spines == 4
    assert r.dcqcn_preset == "hpcc"
    # HPCC's 3.2 MB buffer at 10 Gb/s, in frames; XOFF at buffer / (8 + a leaf's 8 ports)
    assert r.queue_pkts * 1082 <= 3.2e6 < (r.queue_pkts + 1) * 1082
    assert r.pfc_xoff_kb == 200.0 and r.pfc_xon_kb == 197.0


@pytest.mark.parametrize(("mod", "nodes"), [(symphony_ring, 32), (symphony_sweep, 32),
                                            (symphony_two_jobs, 128)])
def test_every_symphony_paper_profile_runs_the_one_network(mod: types.ModuleType,
                                                          nodes: int) -> None:
    p = mod.Params.paper()
    assert has_profile(mod, "paper")
    assert {k: getattr(p, k) for k in paper_ring_kwargs(nodes)} == paper_ring_kwargs(nodes)
    assert p.payload == "phantom" and p.warmup_kb == 0 and p.iterations == 1
    assert p.fabric.n_hosts == nodes and p.fabric.ecmp


def test_symphony_sweeps_paper_profile_is_fig_8_cut() -> None:
    p = symphony_sweep.Params.paper()
    # Fig. 8a, 8b and 8c in one run, each axis at its default points
    assert p.axes == ["k", "chunk", "imbalance"]
    assert p.values_of("k") == [1e-4, 1e-3, 1e-2, 0.1]
    assert p.values_of("chunk") == [128, 256, 512, 1024]
    assert p.values_of("imbalance") == [1.1, 1.3, 1.5, 1.7]
    assert p.ranks == 32 and (p.leaves, p.hosts_per_leaf) == (8, 4)
    assert p.chunk_kb == 512 and p.seeds == 1
    # §4.6: the k and chunk axes on Table 1's 2D ring, the imbalance on
    # multiple 1D rings, every hop across a spine
    for axis in ("k", "chunk"):
        assert all(p.point(v, axis).dims == (8, 4) and p.point(v, axis).ring_layout == "local"
                   for v in p.values_of(axis))
    imb = [p.point(v, "imbalance") for v in p.values_of("imbalance")]
    assert all(pt.dims == () and pt.ring_layout == "across" and pt.channels == 2
               and pt.variant == "imbalance" for pt in imb)
    assert [pt.chunk_kb for pt in imb] == [512] * 4
    assert p.point(0.1, "k").theoretical_cct_s == pytest.approx(0.0275, abs=5e-5)
    assert p.point(1024, "chunk").theoretical_cct_s == pytest.approx(0.055, abs=1e-4)
    cuts = scaled_down_from(symphony_sweep)
    assert {k: c.paper for k, c in cuts.items()} == {"leaves": 32, "chunk_kb": 8192,
                                                    "seeds": 20}
    assert all(isinstance(c, ScaledDown) and c.reason for c in cuts.values())
    rec = scale_record(symphony_sweep, "paper", p)
    assert rec is not None and rec["leaves"]["run"] == 8 and rec["chunk_kb"]["run"] == 512
    plan = symphony_sweep.plan(p)
    assert [ph.name for ph in plan.phases] == (
        ["k-baseline-p0-s0"] + [f"k-symphony-p{i}-s0" for i in range(4)]
        + [f"{axis}-{scheme}-p{i}-s0" for axis in ("chunk", "imbalance") for i in range(4)
           for scheme in ("baseline", "symphony")])
    # ECMP for k and the chunk size; the imbalance phases clear it on every
    # leaf (static routes) and slow leaf1's uplink to spine1
    assert plan.topology.fabric is not None and plan.topology.fabric.ecmp
    by_name = {ph.name: ph for ph in plan.phases}
    assert all(not ph.switch_commands for ph in plan.phases if ph.name[0] in "kc")
    imb_cmds = by_name["imbalance-symphony-p3-s0"].switch_commands
    assert sorted(imb_cmds) == [f"leaf{i}" for i in range(1, 9)]
    assert all(imb_cmds[f"leaf{i}"] == ("table_clear MyIngress.ecmp",) for i in range(2, 9))
    assert imb_cmds["leaf1"] == ("table_clear MyIngress.ecmp",
                                 f"set_port_rate_bps {round(10e9 / 1.7)} 5")


def test_symphony_two_jobs_paper_profile_is_section_4_5_cut() -> None:
    p = symphony_two_jobs.Params.paper()
    assert p.ranks == 64 and (p.leaves, p.hosts_per_leaf, p.spines) == (32, 4, 4)
    assert p.chunk_kb == 256 and p.seeds == 1
    # job B joins where the paper's does: 500 ms into job A's AllReduce of 8 MB chunks
    at_8mb = dataclasses.replace(p, chunk_kb=8192)
    assert at_8mb.delay_b_s == pytest.approx(0.5)
    assert p.delay_b_s == pytest.approx(0.5 * p.job_wire_s / at_8mb.job_wire_s)
    cuts = scaled_down_from(symphony_two_jobs)
    assert {k: c.paper for k, c in cuts.items()} == {"chunk_kb": 8192, "seeds": 50}
    rec = scale_record(symphony_two_jobs, "paper", p)
    assert rec is not None and rec["chunk_kb"]["run"] == 256 and rec["seeds"]["run"] == 1
    hosts = symphony_two_jobs.job_hosts(p, "a") + symphony_two_jobs.job_hosts(p, "b")
    assert sorted(hosts) == list(range(1, 129))


def test_the_phase_notes_give_job_bs_delay() -> None:
    p = symphony_two_jobs.Params.paper()
    notes = [ph.notes for ph in symphony_two_jobs.plan(p).phases]
    assert p.delay_b_s == pytest.approx(0.0156, abs=5e-5)
    assert "b (id 2, 0.0156 s later)" in notes[0] and "b (id 4, 0.0156 s later)" in notes[1]


def _payloads(plan: RunPlan) -> dict[str, set[str]]:
    return {ph.name: {s.collective.payload for s in ph.jobs.values()
                      if s.collective is not None} for ph in plan.phases}


@pytest.mark.parametrize("mod", PROFILED)
@pytest.mark.parametrize("payload", ["real", "phantom"])
def test_the_payload_reaches_every_rank(mod: types.ModuleType, payload: str) -> None:
    p = dataclasses.replace(mod.Params.quick(), payload=payload)
    got = _payloads(mod.plan(p))
    assert got and all(v == {payload} for v in got.values()), got
    # and at the paper's scale, which runs phantom payloads
    assert all(v == {"phantom"} for v in _payloads(mod.plan(mod.Params.paper())).values())


def _as_phantom(run_dir: Path) -> None:
    """The run's result checks as a phantom rank records them (ok None)."""
    for path in run_dir.glob("phases/*/*.events.jsonl"):
        evs = [json.loads(line) for line in path.read_text().splitlines()]
        path.write_text("".join(json.dumps(dict(e, ok=None, payload="phantom")
                                           if e["event"] == "collective_check" else e) + "\n"
                                for e in evs))


def _two_jobs_run(run_dir: Path, payload: str) -> Any:
    p = dataclasses.replace(symphony_two_jobs.Params.quick(), payload=payload)
    write_plan(run_dir, symphony_two_jobs, p)
    for scheme in symphony_two_jobs.SCHEMES:
        for job, start in zip(symphony_two_jobs.JOBS, (0.0, 0.5), strict=True):
            write_ring_phase(run_dir, symphony_two_jobs.phase_name(scheme, 0),
                             symphony_two_jobs.job_hosts(p, job), iterations=p.iterations,
                             channels=p.channels, start_s=start)
    return results_json(symphony_two_jobs.analyze(run_dir))


def _sweep_run(run_dir: Path, payload: str) -> Any:
    p = dataclasses.replace(symphony_sweep.Params.quick(), payload=payload)
    write_plan(run_dir, symphony_sweep, p)
    for i, v in enumerate(p.value_list):
        pt = p.point(v)
        for scheme in ("baseline", "symphony"):
            name = symphony_sweep.phase_name(scheme, i, 0)
            if scheme == "baseline" and i > 0:
                continue                # k points share the first baseline
            write_ring_phase(run_dir, name, symphony_ring.ring_order(pt),
                             iterations=pt.iterations, channels=pt.channels)
    return results_json(symphony_sweep.analyze(run_dir))


@pytest.mark.parametrize("make_run", [_two_jobs_run, _sweep_run])
def test_a_phantom_run_reports_no_bit_exactness(tmp_path: Path, make_run: Any) -> None:
    assert make_run(tmp_path / "real", "real")["bit_exact"] is True
    phantom = tmp_path / "phantom"
    make_run(phantom, "phantom")
    _as_phantom(phantom)
    analyze = (symphony_two_jobs if make_run is _two_jobs_run else symphony_sweep).analyze
    assert "bit_exact" not in results_json(analyze(phantom))


def _uplinks_per_leaf(hash_fn: Any) -> dict[int, int]:
    """How many of its 4 uplinks each leaf's ring flows use over a 32-node
    AllReduce's 62 step tags (ranks across the leaves, both ring directions),
    as the switch's selector picks a member: the hash modulo the group size."""
    import ipaddress

    from hosts.roce.constants import ROCE_UDP_PORT, tag_sport

    p = dataclasses.replace(symphony_ring.Params.paper(), ring_layout="across", ring_dims="")
    order = symphony_ring.ring_order(p)
    used: dict[int, set[int]] = {}
    for r, src in enumerate(order):
        for dst in (order[(r + 1) % len(order)], order[r - 1]):
            for step in range(62):
                key = (ipaddress.IPv4Address(f"10.0.{src}.1").packed
                       + ipaddress.IPv4Address(f"10.0.{dst}.1").packed + bytes([17])
                       + tag_sport(step).to_bytes(2, "big") + ROCE_UDP_PORT.to_bytes(2, "big"))
                used.setdefault(p.fabric.leaf_of(src), set()).add(hash_fn(key) % 4)
    return {leaf: len(members) for leaf, members in sorted(used.items())}


def test_the_paper_profiles_hash_ecmp_with_crc32_since_crc16_leaves_uplinks_idle() -> None:
    from switches.soft.runtime.externs import crc16, crc32

    # crc16 is linear and the tags differ in low bits only: some leaves never
    # use half their uplinks, whatever the step
    assert sorted(_uplinks_per_leaf(crc16).values()) == [2, 2, 2, 4, 4, 4, 4, 4]
    assert set(_uplinks_per_leaf(crc32).values()) == {4}
    assert PAPER_NETWORK["ecmp_hash"] == "crc32"
    for mod in PROFILED:
        p = mod.Params.paper()
        assert p.ecmp_hash == "crc32", mod.NAME
        assert p.defines == (("ECMP_HASH", "crc32"),)
        assert mod.plan(p).topology.defines == (("ECMP_HASH", "crc32"),), mod.NAME
    # the quick and full profiles compile what they always did
    for p in (symphony_ring.Params(), symphony_ring.Params.quick()):
        assert p.ecmp_hash == "crc16" and symphony_ring.plan(p).topology.defines == ()
    with pytest.raises(ValueError, match="ecmp_hash 'md5': one of crc16, crc32"):
        symphony_ring.Params(ecmp_hash="md5")


def test_the_ecmp_hash_define_reaches_the_compiled_selector() -> None:
    from switches.soft.compiler import compile_program
    from testbed.experiment import repo_path

    for algo in ("crc16", "crc32"):
        info = compile_program(repo_path(symphony_ring.PROGRAM),
                               defines={"ECMP_HASH": algo}).INFO
        assert info.action_profiles["MyIngress.ecmp_selector"].selector_algo == algo
