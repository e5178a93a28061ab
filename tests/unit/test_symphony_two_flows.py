"""symphony-two-flows: the plan models the paper's prototype, and the analysis
computes FCTs and overlap from a run's timelines, which plot() draws."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from plot_checks import assert_plots

from experiments import symphony_two_flows as exp
from testbed.experiment import plan_to_dict


def test_scale_and_thresholds_follow_the_paper() -> None:
    p = exp.Params.quick()
    assert p.slowdown == 500                      # 10 Gb/s NICs on 20 Mb/s links
    assert (p.red_kmin_pkts, p.red_kmax_pkts) == (46, 92)   # 50 / 100 KB of 1082-byte frames
    plan = exp.plan(p)
    # RED is stated once, in KB, and converted by the modelled network
    net = plan.topology.network
    assert net is not None and net.red is not None
    assert (net.red.kmin.bytes, net.red.kmax.bytes, net.red.pmax) == (50_000, 100_000, 0.2)
    assert (net.link_gbps, net.slowdown) == (10, 500)
    cmds = plan.network_commands()
    assert "table_set_default MyEgress.ecn_config MyEgress.set_ecn_params 46 92 20" in cmds
    assert "set_port_rate_bps 20000000" in cmds and "set_queue_depth 256" in cmds
    assert not any("ecn_config" in c for c in plan.topology.commands)
    # k 0.01, tau 0.25, T_win and psn window 100 us x 500
    assert ("table_set_default MyEgress.symphony.config MyEgress.symphony.set_params "
            "10000 250000 50000 50000 8 8") in cmds


def test_the_full_profile_is_lossless_at_half_the_quick_profiles_rate() -> None:
    p = exp.Params()
    assert (p.link_mbps, p.slowdown, p.pfc) == (10, 1000, True)
    assert exp.Params.quick().pfc is False
    cmds = exp.plan(p).network_commands()
    assert "set_port_rate_bps 10000000" in cmds
    # XOFF 110 KB and XON 108 KB of 1082-byte frames, as the ring's full profile
    assert "set_pfc 102 100" in cmds


def test_phases_pair_the_schemes_over_the_offsets() -> None:
    p = exp.Params(flow_kb=1024, offsets="0,0.5,1", key_offset=0.5, seeds=2)
    phases = {ph.name: ph for ph in exp.plan(p).phases}
    assert len(phases) == 1 + 3 * 2 * 2 and "alone" in phases
    tracked = []
    for seed in range(2):
        for i, off in enumerate((0.0, 0.5, 1.0)):
            for scheme in exp.SCHEMES:
                ph = phases[exp.phase_name(scheme, i, seed)]
                senders = {f.flow: f for job in ph.jobs.values() for f in job.flows
                           if f.role == "sender"}
                a, b = senders["a"], senders["b"]
                assert (a.step, b.step) == (p.step_a, p.step_a + 1)
                assert a.first_psn == b.first_psn == 0 and a.count == b.count == 1
                assert b.start_delay_s == 0 and a.start_delay_s == pytest.approx(
                    off * p.standalone_s)
                assert a.job_id == b.job_id != 0
                registered = any(c.startswith("table_add MyEgress.symphony.jobs")
                                 for c in ph.commands)
                assert registered == (scheme == "symphony")
                if registered:
                    assert f"table_add MyEgress.symphony.jobs MyEgress.symphony.track " \
                           f"{a.job_id} =>" in ph.commands
                    tracked.append(a.job_id)
                # hosts that send no job id (rdma_rxe) get theirs from the switch
                assert [c.split()[-1] for c in ph.commands if "job_of_source.set_job" in c] \
                    == [str(a.job_id)] * 3
    assert len(set(tracked)) == len(tracked)    # a fresh job id per Symphony phase
    json.dumps(plan_to_dict(exp.plan(p)))      # the plan is plain data


@pytest.mark.parametrize("kw", [{"offsets": "0,2"}, {"key_offset": 0.25}, {"seeds": 0},
                                {"k": 5.0}, {"queue_pkts": 64}, {"queue_pkts": 92},
                                {"red_pmax": 0.0}, {"flow_kb": 0}])
def test_bad_params_are_refused(kw) -> None:
    with pytest.raises(ValueError):
        exp.Params(**kw)


def _write_phase(run: Path, name: str, flows: dict[str, tuple[float, int]]) -> None:
    """A phase directory whose timelines say: flow -> (completion time since the
    phase start at t = 10 s, CE-marked packets); start delays come from the plan."""
    d = run / "phases" / name
    d.mkdir(parents=True)
    t0 = 10_000_000_000
    for f, (end, ce) in flows.items():
        snd = [{"event": "start", "t_ns": t0},
               {"event": "flow_start", "t_ns": t0, "flow": f, "role": "sender"},
               {"event": "flow_end", "t_ns": t0, "flow": f, "role": "sender", "cnps_rcvd": 3,
                "sha256": "x", "qp": {}}]
        rcv = [{"event": "flow_start", "t_ns": t0, "flow": f, "role": "receiver"},
               {"event": "completion", "t_ns": t0 + int(end * 1e9), "flow": f,
                "role": "receiver"},
               {"event": "flow_end", "t_ns": t0, "flow": f, "role": "receiver",
                "bytes_ok": True, "sha256": "x", "qp": {"ce_pkts": ce}}]
        (d / f"snd{f}.events.jsonl").write_text("\n".join(json.dumps(e) for e in snd))
        (d / f"rcv{f}.events.jsonl").write_text("\n".join(json.dumps(e) for e in rcv))
    (d / "switch.jsonl").write_text("")


def _write_two_offset_run(tmp_path: Path) -> None:
    """Offsets 0 and 0.5 (the key one), one seed: Symphony lets A finish earlier."""
    p = exp.Params(flow_kb=1024, offsets="0,0.5", key_offset=0.5, seeds=1)
    plan = plan_to_dict(exp.plan(p))
    plan["params"] = {"flow_kb": 1024, "offsets": "0,0.5", "key_offset": 0.5, "seeds": 1}
    # The phases' own delays decide where A starts.
    for ph in plan["phases"]:
        for job in ph["jobs"].values():
            for f in job["flows"]:
                if f["flow"] == "a" and f["role"] == "sender":
                    f["start_delay_s"] = 0.0 if "-o0-" in ph["name"] else 1.0
    (tmp_path / "plan.json").write_text(json.dumps(plan))
    _write_phase(tmp_path, "alone", {"b": (2.0, 0)})
    _write_phase(tmp_path, "baseline-o0-s0", {"a": (4.0, 5), "b": (4.0, 5)})
    _write_phase(tmp_path, "symphony-o0-s0", {"a": (3.0, 1), "b": (4.0, 9)})
    _write_phase(tmp_path, "baseline-o1-s0", {"a": (4.0, 5), "b": (3.0, 5)})
    _write_phase(tmp_path, "symphony-o1-s0", {"a": (3.5, 1), "b": (3.6, 9)})


def test_analysis_of_fcts_overlap_and_changes(tmp_path: Path) -> None:
    _write_two_offset_run(tmp_path)
    res = exp.analyze(tmp_path)
    assert res.standalone_fct_s == 2.0
    key = res.key
    assert key.baseline.fct_a == 3.0 and key.baseline.fct_b == 3.0
    assert key.baseline.overlap == 2.0      # A from 1 s, B ends at 3 s
    assert key.symphony.fct_a == 2.5 and key.symphony.overlap == 2.5
    assert res.fct_a_change == pytest.approx(-1 / 6, abs=1e-4)
    assert res.fct_b_change == pytest.approx(0.2, abs=1e-4)
    assert res.overlap_change == pytest.approx(0.25, abs=1e-4)
    assert res.offsets[0].symphony.ce_b == 9
    assert res.paper["fct_a_change"] == pytest.approx(-0.1245, abs=1e-3)


def test_plots_are_pngs(tmp_path: Path) -> None:
    _write_two_offset_run(tmp_path)
    paths = exp.plot(tmp_path)
    assert_plots(paths, tmp_path, ["timelines.png", "offsets.png"])
