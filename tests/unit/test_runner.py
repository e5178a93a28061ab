"""The runner's parts that need no network: fidelity verdicts, switch samples,
summary keys, environment checks and the run / list / plot commands."""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from test_experiment import write_roce_basics_run

from experiments import roce_basics
from switches.controller.api import ControllerError
from switches.targets import BMV2, SOFT, target_of
from testbed.cli import doctor_report
from testbed.cli import main as cli_main
from testbed.runner import (
    RunError,
    check_environment,
    evaluate_fidelity,
    flatten_keys,
    replot,
)
from testbed.summary import results_json


def _fidelity(tmp_path: Path, target: str = "soft", params: dict | None = None,
              run: dict | None = None, **switch_kwargs: object) -> dict:
    import dataclasses

    p = dataclasses.replace(roce_basics.Params.quick(), **(params or {}))
    write_roce_basics_run(tmp_path, p, switch_kwargs=switch_kwargs, target=target, **(run or {}))
    return evaluate_fidelity(tmp_path, roce_basics.plan(p), target_of(target))


def test_fidelity_ok_records_the_numbers(tmp_path: Path) -> None:
    f = _fidelity(tmp_path)
    assert f["verdict"] == "faithful" and f["ok"] is True and f["failed"] == []
    assert f["not_measured"] == {}
    c = f["checks"]
    assert {x["status"] for x in c.values()} == {"pass"}
    # Each phase: lag mean 100 us over 10 samples before, 200 us over 30 after:
    # the phase's own 20 samples averaged 250 us.
    assert c["switch_lag_mean_us"]["value"] == pytest.approx(250.0)
    assert c["switch_lag_mean_us"]["samples"] == 60
    assert c["switch_lag_max_us"]["value"] == 900
    assert c["switch_kernel_drops"]["value"] == 0
    assert c["switch_sampling"]["value"] == 180
    assert c["host_pacing_late_fraction"]["value"] == pytest.approx(0.01)
    assert len(c["host_pacing_late_fraction"]["per_sender"]) == 4  # single, pair-a/b, loss
    # single and loss (one sender at the link rate) are judged; pair overloads port 3
    assert c["congestion_without_overload"]["ports_judged"] == 2


def test_fidelity_flags_a_switch_that_did_not_keep_up(tmp_path: Path) -> None:
    f = _fidelity(tmp_path, kernel_drops=3)
    assert f["ok"] is False and f["checks"]["switch_kernel_drops"]["value"] == 9
    assert f["failed"] == ["switch_kernel_drops"]
    other = tmp_path / "other"
    other.mkdir()
    f = _fidelity(other, lag=(100, 10, 5000, 30))
    assert f["verdict"] == "not faithful"
    assert f["checks"]["switch_lag_mean_us"]["status"] == "fail"
    assert "switch_lag_mean_us" in f["text"]


def test_frames_a_switch_port_received_out_of_order_make_a_run_unfaithful(
        tmp_path: Path) -> None:
    f = _fidelity(tmp_path)
    c = f["checks"]["switch_ingress_order"]
    assert f["ok"] and c["status"] == "pass" and c["value"] == 0     # 7 before, 7 after
    other = tmp_path / "other"
    other.mkdir()
    f = _fidelity(other, out_of_order=4)
    assert f["failed"] == ["switch_ingress_order"]
    assert f["checks"]["switch_ingress_order"]["value"] == 12      # 4 in each of three phases
    assert "switch_ingress_order: 12 (limit 0)" in f["text"]
    older = tmp_path / "older"
    older.mkdir()
    f = _fidelity(older, out_of_order=None)       # a switch that did not count them
    assert f["ok"] and "switch_ingress_order" in f["not_measured"]
    bmv2 = tmp_path / "bmv2"
    bmv2.mkdir()
    assert "switch_ingress_order" in _fidelity(bmv2, target="bmv2")["not_measured"]


def test_frames_taken_behind_the_switch_clock_are_limited_like_late_sends(
        tmp_path: Path) -> None:
    # Each phase received 909 frames (1000 -> 1909 on port 1, 100 -> 190 on 3).
    f = _fidelity(tmp_path, behind_clock=20)      # 20 of 999 per phase: 2%
    c = f["checks"]["switch_arrival_timing"]
    assert f["ok"] and c["status"] == "pass"
    assert c["value"] == pytest.approx(20 / 999, abs=1e-5) and c["frames"] == 60
    assert c["received"] == 2997 and c["max_shift_us"] == 2000
    other = tmp_path / "other"
    other.mkdir()
    f = _fidelity(other, behind_clock=60)         # 6% of the frames: bunched like late sends
    assert f["failed"] == ["switch_arrival_timing"]
    assert "switch_arrival_timing: 0.06006 (limit 0.05)" in f["text"]
    older = tmp_path / "older"
    older.mkdir()
    f = _fidelity(older, behind_clock=None)       # a switch that did not count them
    assert f["ok"] and "switch_arrival_timing" in f["not_measured"]
    bmv2 = tmp_path / "bmv2"
    bmv2.mkdir()
    assert "switch_arrival_timing" in _fidelity(bmv2, target="bmv2")["not_measured"]


def test_a_fabric_pools_its_switches_frames_out_of_order() -> None:
    from testbed.runner.switch_stats import merge_switch_stats

    def sw(ooo: int | None) -> dict[str, Any]:
        port = {"rx_frames": 5} if ooo is None else {"rx_frames": 5, "rx_out_of_order": ooo}
        return {"lag_us": {"samples": 1, "mean": 1, "max": 1}, "kernel_drops": 0,
                "ports": {"1": port, "2": dict(port)}}

    assert merge_switch_stats({"leaf1": sw(1), "spine1": sw(2)})["rx_out_of_order"] == 6
    assert "rx_out_of_order" not in merge_switch_stats({"leaf1": sw(1), "spine1": sw(None)})


def test_a_fabric_pools_its_switches_frames_behind_the_clock() -> None:
    from testbed.fidelity import arrivals_behind_clock
    from testbed.runner.switch_stats import merge_switch_stats

    def sw(behind: dict[str, int] | None, max_us: int = 0) -> dict[str, Any]:
        s: dict[str, Any] = {"rx": {"1": 100, "2": 50}}
        if behind is not None:
            s["rx_behind_clock"] = behind
            s["rx_behind_clock_max_us"] = {p: max_us for p in behind}
        return {"lag_us": {"samples": 1, "mean": 1, "max": 1}, "kernel_drops": 0, "switch": s}

    merged = merge_switch_stats({"leaf1": sw({"1": 3}, 700), "spine1": sw({"2": 1, "1": 2}, 900)})
    assert arrivals_behind_clock(merged) == (6, 300, 900)
    assert "rx_behind_clock" not in merge_switch_stats({"leaf1": sw({"1": 3}),
                                                        "spine1": sw(None)})


def test_frames_a_host_qdisc_dropped_make_a_run_unfaithful(tmp_path: Path) -> None:
    sent = {"sent_bytes": 10**6, "sent_pkts": 900, "overlimits": 50}
    f = _fidelity(tmp_path, host_qdiscs={"h1": {**sent, "dropped": 0},
                                         "h3": {**sent, "dropped": 0}})
    assert f["ok"] is True and f["checks"]["host_tx_drops"]["value"] == 0
    other = tmp_path / "other"
    other.mkdir()
    f = _fidelity(other, host_qdiscs={"h1": {**sent, "dropped": 2}})
    assert f["failed"] == ["host_tx_drops"]
    assert f["checks"]["host_tx_drops"]["value"] == 6      # 2 in each of three phases


def test_a_soft_run_without_lag_samples_is_not_faithful(tmp_path: Path) -> None:
    f = _fidelity(tmp_path, lag=(0, 0, 0, 0))
    assert f["verdict"] == "not faithful"
    c = f["checks"]["switch_lag_mean_us"]
    assert c["status"] == "fail" and c["value"] is None and "no lag samples" in c["why"]


def test_a_run_without_sender_reports_is_not_faithful(tmp_path: Path) -> None:
    import json

    f = _fidelity(tmp_path)
    assert f["ok"]
    for events in tmp_path.glob("phases/*/*.events.jsonl"):
        evs = [json.loads(x) for x in events.read_text().splitlines()]
        for e in evs:
            e.pop("pacer", None)
        events.write_text("".join(json.dumps(e) + "\n" for e in evs))
    f = evaluate_fidelity(tmp_path, roce_basics.plan(roce_basics.Params.quick()))
    c = f["checks"]["host_pacing_late_fraction"]
    assert f["verdict"] == "not faithful" and c["status"] == "fail" and c["value"] is None


def test_the_switch_poller_is_judged(tmp_path: Path) -> None:
    f = _fidelity(tmp_path, poller_error="ConnectionResetError: gone")
    c = f["checks"]["switch_sampling"]
    assert f["ok"] is False and c["status"] == "fail" and "gone" in c["why"]
    other = tmp_path / "other"
    other.mkdir()
    f = _fidelity(other, poller_samples=0)
    assert f["failed"] == ["switch_sampling"]


def test_bmv2_switch_checks_are_not_measured_not_passed(tmp_path: Path) -> None:
    f = _fidelity(tmp_path, target="bmv2")
    for name in ("switch_lag_mean_us", "switch_lag_max_us", "switch_kernel_drops",
                 "switch_sampling"):
        c = f["checks"][name]
        assert c["status"] == "not measured" and c["value"] is None, (name, c)
        assert "bmv2" in f["not_measured"][name]
    # the host checks and the watermark register still decide
    assert f["verdict"] == "faithful"
    assert "not measured: switch_lag_mean_us" in f["text"]
    r = results_json(roce_basics.analyze(tmp_path))
    assert r["pair"]["queue_drops"] is None and r["pair"]["max_queue_sampled_pkts"] is None
    assert r["pair"]["max_queue_pkts"] == 10  # from the P4 register


def test_marks_on_a_port_that_was_not_overloaded_make_a_run_unfaithful(tmp_path: Path) -> None:
    # The observed case: a lone QP at 40 Mb/s drew CE marks from a 14-packet queue.
    f = _fidelity(tmp_path, params={"bottleneck_mbps": 40.0},
                  run={"ce_marks": {"pair": 5, "single": 7}, "single_queue_max": 14})
    c = f["checks"]["congestion_without_overload"]
    assert f["verdict"] == "not faithful" and f["failed"] == ["congestion_without_overload"]
    case = c["cases"][0]
    assert (case["phase"], case["port"], case["ce_marks"], case["max_queue_pkts"]) == \
        ("single", 3, 7, 14)
    assert case["offered_bps"] == pytest.approx(40e6) == case["capacity_bps"]
    assert "congestion_without_overload: phase single port 3: 7 CE marks" in f["text"]
    # The case says what the emulator did meanwhile, so that a failure in CI
    # shows whether the switch took frames late or the hypervisor held the CPUs.
    assert "(0 frames entered the switch's queues behind their clock)" in f["text"]
    late = tmp_path / "late"
    late.mkdir()
    write_roce_basics_run(late, dataclasses.replace(roce_basics.Params.quick(),
                                                    bottleneck_mbps=40.0),
                          switch_kwargs={"behind_clock": 12},
                          ce_marks={"single": 1}, single_queue_max=8)
    stats_path = late / "phases" / "single" / "switch_stats.json"
    stats = json.loads(stats_path.read_text())
    stats["cpu"] = {"processes": {}, "cpus": 2,
                    "machine": {"busy_share": 0.61, "softirq_share": 0.02, "seconds": 3.0,
                                "steal_share": 0.213}}
    stats_path.write_text(json.dumps(stats))
    f = evaluate_fidelity(late, roce_basics.plan(dataclasses.replace(
        roce_basics.Params.quick(), bottleneck_mbps=40.0)))
    case = f["checks"]["congestion_without_overload"]["cases"][0]
    assert (case["behind_clock_frames"], case["machine_steal_share"]) == (12, 0.213)
    assert ("1 CE marks, queue up to 8 packets, with offered load 40 Mb/s <= capacity 40 Mb/s "
            "(12 frames entered the switch's queues behind their clock; machine 61% busy, "
            "21.3% of its CPU time stolen by the hypervisor)") in f["text"]
    # A queue above Kmin without marks is caught too; marks where two QPs overload
    # the port (pair) are the model's congestion, not a fidelity failure.
    other = tmp_path / "other"
    other.mkdir()
    f = _fidelity(other, run={"ce_marks": {"pair": 50}, "single_queue_max": 5})
    assert f["failed"] == ["congestion_without_overload"]
    assert [x["phase"] for x in f["checks"]["congestion_without_overload"]["cases"]] == ["single"]


def test_flat_dotted_keys() -> None:
    flat = flatten_keys({"single": {"goodput_fraction": 0.99, "x": {"y": 1}, "l": [1]},
                     "fidelity_ok": True})
    assert flat == {"single.goodput_fraction": 0.99, "single.x.y": 1, "fidelity_ok": True}


def test_missing_targets_and_providers_are_clear_errors() -> None:
    rep = doctor_report()
    if not rep["targets"]["bmv2"]:
        with pytest.raises(RunError, match="bmv2.*not installed here.*testbed doctor"):
            check_environment("bmv2", "udp", need_network=False)
    if not rep["providers"]["rxe"]:
        with pytest.raises(RunError, match="rxe is not available here.*testbed doctor"):
            check_environment("soft", "rxe", need_network=False)
    check_environment("soft", "udp", need_network=False)
    with pytest.raises(RunError, match="unknown target"):
        check_environment("tofino", "udp", need_network=False)


def test_cli_list_shows_experiments_and_parameters() -> None:
    r = CliRunner().invoke(cli_main, ["list", "--params"])
    assert r.exit_code == 0, r.output
    assert "roce-basics" in r.output and "ring-allreduce" in r.output
    row = next(line for line in r.output.splitlines() if line.split()[:1] == ["bottleneck_mbps"])
    assert row.split()[1:5] == ["8.0", "4.0", "-", "Mb/s"] and "host NIC" in row


def test_cli_run_rejects_unknown_experiments_and_parameters(tmp_path: Path) -> None:
    r = CliRunner().invoke(cli_main, ["run", "nope", "--out", str(tmp_path / "x")])
    assert r.exit_code == 2 and "unknown experiment 'nope'" in r.output
    r = CliRunner().invoke(cli_main, ["run", "roce-basics", "-p", "warp=9"])
    assert r.exit_code == 2 and "no parameter 'warp'" in r.output
    r = CliRunner().invoke(cli_main, ["run", "roce-basics", "-p", "oops"])
    assert r.exit_code == 2 and "NAME=VALUE" in r.output
    assert not (tmp_path / "x").exists()


def test_cli_run_on_bmv2_without_it_says_so(tmp_path: Path) -> None:
    if doctor_report()["targets"]["bmv2"]:
        pytest.skip("BMv2 is installed here")
    r = CliRunner().invoke(cli_main, ["run", "roce-basics", "--quick", "--target", "bmv2",
                                      "--out", str(tmp_path / "x")])
    assert r.exit_code == 1
    assert "bmv2" in r.output and "not installed here" in r.output
    assert not (tmp_path / "x").exists()


def test_cli_plot_redraws_a_saved_run(tmp_path: Path) -> None:
    write_roce_basics_run(tmp_path, roce_basics.Params.quick())
    r = CliRunner().invoke(cli_main, ["plot", str(tmp_path)])
    assert r.exit_code == 0, r.output
    for name in ("single", "pair", "loss"):
        assert f"plots/{name}.png" in r.output
        assert (tmp_path / "plots" / f"{name}.png").stat().st_size > 10_000
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(RunError, match="not a run directory"):
        replot(empty)
    r = CliRunner().invoke(cli_main, ["plot", str(empty)])
    assert r.exit_code == 1


def test_summary_json_of_the_plan_round_trips(tmp_path: Path) -> None:
    write_roce_basics_run(tmp_path, roce_basics.Params.quick())
    plan = json.loads((tmp_path / "plan.json").read_text())
    assert plan["experiment"] == "roce-basics"
    assert plan["params"] == json.loads(json.dumps(roce_basics.Params.quick().__dict__))


@pytest.fixture(scope="module")
def l3_ecn() -> object:
    from switches.soft.compiler import compile_program

    return compile_program(Path(__file__).resolve().parents[2] / "switches/p4/l3_ecn.p4")


def _recording_cli(program: object, target: str,
                   priority_queues: int = 1) -> tuple[list[str], object]:
    """A CliController of ``target`` over an in-process soft switch running
    ``program``, recording every line it sends."""
    from switches.soft.control.verbs import ControlPlane
    from switches.soft.runtime.switch import SoftSwitch
    control = ControlPlane(SoftSwitch(program, priority_queues=priority_queues))
    lines: list[str] = []

    def execute(line: str) -> str:
        lines.append(line)
        return str(control.execute(line))

    return lines, target_of(target).cli_controller(execute=execute)


def _config_lines(sent: list[str]) -> list[str]:
    return [ln for ln in sent if not ln.startswith(("show_tables", "table_show_actions"))]


def test_switch_commands_on_the_soft_target_use_its_rate_extension(l3_ecn: object) -> None:
    from testbed.runner.switch_commands import apply_switch_command

    sent, ctl = _recording_cli(l3_ecn, "soft")
    recs = [apply_switch_command(ctl, line, SOFT, 1082) for line in (
        "set_port_rate_bps 4000000", "set_queue_depth 64",
        "table_set_default ecn_config set_ecn_params 4 16 0x14",
        "register_reset MyEgress.qdepth_max")]
    assert _config_lines(sent) == [
        "set_port_rate_bps 4000000", "set_queue_depth 64",
        "table_set_default MyEgress.ecn_config MyEgress.set_ecn_params 4 16 20",
        "register_reset MyEgress.qdepth_max"]
    assert [r["via"] for r in recs] == ["set_port_rate_bps", "set_queue_depth",
                                        "table_set_default", "cli"]


def test_switch_commands_on_bmv2_turn_the_bit_rate_into_a_packet_rate(l3_ecn: object) -> None:
    from testbed.runner.switch_commands import apply_switch_command, bps_to_pps

    sent, ctl = _recording_cli(l3_ecn, "bmv2")
    rec = apply_switch_command(ctl, "set_port_rate_bps 4000000", BMV2, 1082)
    # 4 Mb/s of 1082-byte frames: 462 frames per second
    assert sent == ["set_queue_rate 462"]
    assert rec["via"] == "set_queue_rate" and rec["pps"] == 462 and rec["bps"] == 4_000_000
    assert rec["packet_bytes"] == 1082 and "approximation" in rec["note"]
    apply_switch_command(ctl, "set_port_rate_bps 8000000 3", BMV2, 1000)
    apply_switch_command(ctl, "set_queue_depth 64 3 0", BMV2, 1000)
    assert sent[1:] == ["set_queue_rate 1000 3", "set_queue_depth 64 3 0"]
    assert bps_to_pps(100, 1500) == 1  # never zero: BMv2 would stop the queue
    with pytest.raises(ControllerError, match="not a number"):
        apply_switch_command(ctl, "set_queue_depth lots", BMV2, 1000)
    with pytest.raises(ControllerError, match="takes 3 value"):
        apply_switch_command(ctl, "table_set_default ecn_config set_ecn_params 4 16", BMV2, 1)
    # the extension itself is refused by BMv2's CLI controller
    with pytest.raises(ControllerError, match="soft-switch extension"):
        ctl.set_port_rate_bps(1000)  # type: ignore[attr-defined]
    # PFC has no BMv2 counterpart: refused with the reason, nothing sent
    n = len(sent)
    with pytest.raises(ControllerError, match="set_pfc: priority flow control is a soft-switch"):
        apply_switch_command(ctl, "set_pfc 102 100", BMV2, 1082)
    assert len(sent) == n


def test_set_pfc_goes_to_the_soft_switch(l3_ecn: object) -> None:
    from testbed.runner.switch_commands import apply_switch_command

    sent, ctl = _recording_cli(l3_ecn, "soft")
    assert apply_switch_command(ctl, "set_pfc 102 100", SOFT, 1082)["via"] == "cli"
    assert _config_lines(sent) == ["set_pfc 102 100"]


def test_summary_records_how_the_port_rate_was_set() -> None:
    from testbed.runner.records import _port_rate_record

    assert _port_rate_record([{"line": "set_queue_depth 64", "via": "set_queue_depth"}]) is None
    rec = _port_rate_record([{"where": "topology", "line": "set_port_rate_bps 4000000",
                              "via": "set_queue_rate", "bps": 4000000, "pps": 462,
                              "port": None, "packet_bytes": 1082, "note": "approximation"}])
    assert rec == {"via": "set_queue_rate", "bps": 4000000, "pps": 462, "port": None,
                   "packet_bytes": 1082, "note": "approximation"}


def test_priority_weights_are_drr_on_soft_and_a_rate_cap_on_bmv2(l3_ecn: object) -> None:
    from testbed.runner import RunError
    from testbed.runner.switch_commands import _apply_commands, apply_switch_command

    sent, ctl = _recording_cli(l3_ecn, "soft", priority_queues=2)
    rec = apply_switch_command(ctl, "set_priority_weights 3 10 90", SOFT, 1000)
    assert sent == ["set_priority_weights 3 10 90"] and rec["via"] == "cli"

    sent, ctl = _recording_cli(l3_ecn, "bmv2", priority_queues=2)
    applied: list[dict] = []
    _apply_commands(ctl, ["set_port_rate_bps 8000000", "set_priority_weights 3 10 90"],
                    BMV2, 1000, "topology", applied)
    # the high queue (priority 1, weight 90) is capped at 90% of 8 Mb/s of 1000-byte frames
    assert sent == ["set_queue_rate 1000", "set_queue_rate 900 3 1"]
    assert applied[1]["via"] == "set_queue_rate" and "strict priority" in applied[1]["note"]
    with pytest.raises(RunError, match="needs an earlier set_port_rate_bps"):
        _apply_commands(ctl, ["set_priority_weights 3 10 90"], BMV2, 1000, "topology", [])
    with pytest.raises(ControllerError, match="positive weight"):
        apply_switch_command(ctl, "set_priority_weights 3 0 90", SOFT, 1000)


def test_late_commands_wait_for_every_agents_start_then_go_to_every_switch(
        l3_ecn: object, tmp_path: Path) -> None:
    import time
    from types import SimpleNamespace

    from hosts.agent_spec import FlowSpec, JobSpec
    from testbed.experiment import ExperimentError, PhasePlan
    from testbed.runner import RunOptions
    from testbed.runner.agents import _Agent
    from testbed.runner.phase import _apply_late
    from testbed.runner.progress import Progress

    sent_a, ctl_a = _recording_cli(l3_ecn, "soft")
    sent_b, ctl_b = _recording_cli(l3_ecn, "soft")
    switches = {"leaf1": SimpleNamespace(controller=lambda: ctl_a),
                "leaf2": SimpleNamespace(controller=lambda: ctl_b)}
    topo = SimpleNamespace(fabric=object(), packet_bytes=1082)
    plan = SimpleNamespace(topology=topo)
    opts = RunOptions(target="soft")
    job = JobSpec(host="h1", ip="10.0.1.1", flows=(FlowSpec(
        flow="f", role="sender", peer_ip="10.0.2.1", msg_bytes=4096, count=1),))
    phase = PhasePlan("p", {"h1": job}, late_commands=(
        (0.0, "register_reset MyEgress.qdepth_max"), (3600.0, "set_queue_depth 9")))
    agents = [_Agent(h, None, tmp_path / f"{h}.spec", tmp_path / f"{h}.ev", tmp_path / f"{h}.log")
              for h in ("h1", "h2")]
    agents[0].events_path.write_text(json.dumps({"event": "start", "t_ns": 5}) + "\n")
    late = sorted(phase.late_commands)
    applied: list[dict] = []
    prog = Progress(lambda _m: None, tmp_path / "progress.log")
    # h2 has not passed the barrier: nothing is due yet
    assert _apply_late(late, phase, plan, switches, agents, opts, applied, prog) == []
    agents[1].events_path.write_text(
        json.dumps({"event": "start", "t_ns": time.monotonic_ns()}) + "\n")
    done = _apply_late(late, phase, plan, switches, agents, opts, applied, prog)
    assert [d["line"] for d in done] == ["register_reset MyEgress.qdepth_max"]
    assert done[0]["applied_ns"] >= done[0]["start_ns"] == agents[1].start_ns
    assert "register_reset MyEgress.qdepth_max" in sent_a and sent_a == sent_b
    assert [a["where"] for a in applied] == ["phase p +0 s (leaf1)", "phase p +0 s (leaf2)"]
    assert late == [(3600.0, "set_queue_depth 9")]     # the later one stays pending
    with pytest.raises(ExperimentError):
        PhasePlan("p", {"h1": job}, late_commands=((-1.0, "x"),))


def test_experiments_say_whether_they_run_on_rxe_hosts() -> None:
    import types

    from testbed.experiment import discover, load
    from testbed.runner import RunError
    from testbed.runner.environment import check_hosts_supported

    for name in discover():
        mod = load(name)
        check_hosts_supported(mod, "udp")          # every experiment runs on udp hosts
        assert "rxe" in mod.HOST_PROVIDERS, name   # and on rxe hosts, wherever rxe exists
        check_hosts_supported(mod, "rxe")
    # one that did not would be refused, saying what it runs on
    udp_only = types.SimpleNamespace(NAME="x", HOST_PROVIDERS=("udp",))
    with pytest.raises(RunError, match="x does not run on rxe hosts; it runs with --hosts udp"):
        check_hosts_supported(udp_only, "rxe")  # type: ignore[arg-type]


def test_job_specs_of_rxe_hosts() -> None:
    import sys

    from hosts.agent_spec import FlowSpec, JobSpec, SpecError, agent_interpreter

    flow = (FlowSpec(flow="f", role="sender", peer_ip="10.0.3.1", msg_bytes=4096, count=1),)
    spec = JobSpec(host="h1", ip="10.0.1.1", flows=flow, provider="rxe", interpreter="auto")
    assert JobSpec.from_json(spec.to_json()).provider == "rxe"
    assert agent_interpreter(spec) == sys.executable      # pyverbs: never pypy
    with pytest.raises(SpecError, match="pyverbs"):
        JobSpec(host="h1", ip="10.0.1.1", flows=flow, provider="rxe", interpreter="pypy")
    with pytest.raises(SpecError, match="provider 'ib'"):
        JobSpec(host="h1", ip="10.0.1.1", flows=flow, provider="ib")


def test_rxe_hosts_run_a_plan_without_the_runners_host_qdisc() -> None:
    import dataclasses

    from experiments import reflex_cases, symphony_ring
    from testbed.runner.environment import plan_for_hosts

    shaped = roce_basics.plan(dataclasses.replace(roce_basics.Params.quick(),
                                                  host_qdisc_ahead_packets=4.0))
    assert plan_for_hosts(shaped, "udp") is shaped
    # an rxe host's DCQCN shim installs the host's HTB itself
    on_rxe = plan_for_hosts(shaped, "rxe")
    assert shaped.topology.host_line_qdisc and not on_rxe.topology.host_line_qdisc
    assert on_rxe.phases == shaped.phases
    reflex = reflex_cases.plan(reflex_cases.Params.quick())
    assert not plan_for_hosts(reflex, "rxe").topology.host_line_qdisc
    plain = roce_basics.plan(roce_basics.Params.quick())
    assert plan_for_hosts(plain, "rxe") is plain
    fabric = symphony_ring.plan(symphony_ring.Params.quick())
    assert fabric.topology.fabric is not None
    assert plan_for_hosts(fabric, "rxe") is fabric   # rxe hosts on a leaf-spine: each on its leaf


def test_a_plan_whose_hosts_obey_pfc_is_refused_on_rxe_hosts_before_the_network() -> None:
    """symphony-ring's full profile runs the lossless fabric: rxe hosts would
    not stop at a pause, so the run is refused up front, saying what to do."""
    from experiments import symphony_ring
    from testbed.runner import RunError
    from testbed.runner.environment import plan_for_hosts

    lossless = symphony_ring.plan(symphony_ring.Params(seeds=1, schemes="baseline"))
    assert plan_for_hosts(lossless, "udp") is lossless
    with pytest.raises(RunError, match="pfc=false"):
        plan_for_hosts(lossless, "rxe")


class _LocalNode:
    """A stand-in Mininet node whose popen runs in this namespace."""

    def popen(self, args: list[str], **kw: Any) -> subprocess.Popen[bytes]:
        return subprocess.Popen(["sleep", "30"], **kw)


@pytest.mark.parametrize("agents_first", [False, True])
@pytest.mark.parametrize("sends", [True, False])
def test_realtime_agents_run_sched_fifo_senders_above_receivers(
        tmp_path: Path, sends: bool, agents_first: bool) -> None:
    from testbed.experiment import Topology
    from testbed.owned import this_process_record
    from testbed.runner import agents, priorities

    topo = Topology(n_hosts=2, program="switches/p4/l3_router.p4", realtime=True,
                    realtime_agents_first=agents_first)
    prio = priorities.rt_priorities(topo)
    a = agents._Agent("h1", _LocalNode(), tmp_path / "s.json", tmp_path / "e.jsonl",
                      tmp_path / "log", realtime=True, priorities=prio, sends=sends)
    agents._start_agent(a)
    assert a.proc is not None
    try:
        # started at normal priority; real-time once the phase's agents all are
        assert os.sched_getscheduler(a.proc.pid) == os.SCHED_OTHER
        agents._make_realtime(a)
        if os.geteuid() != 0:   # no real-time budget: said, and the run goes on
            assert not a.realtime and a.realtime_error
            return
        assert a.realtime and os.sched_getscheduler(a.proc.pid) == os.SCHED_FIFO
        assert os.sched_getparam(a.proc.pid).sched_priority == (
            prio.sender if sends else prio.receiver)
        assert prio.receiver < prio.sender
        # the switch below both agents, or above both
        assert (prio.switch < prio.receiver) if agents_first else (prio.switch > prio.sender)
    finally:
        a.proc.kill()
        a.proc.wait()
        this_process_record().forget([a.proc.pid])


@pytest.mark.parametrize("realtime", [True, False])
def test_soft_switch_runs_above_the_agents(realtime: bool) -> None:
    """The switch daemon stands for hardware: nice -10 always, and SCHED_FIFO
    above every real-time agent when the topology asks (realtime_switches,
    the default)."""
    from types import SimpleNamespace

    from testbed.experiment import Topology
    from testbed.runner import priorities

    assert Topology(n_hosts=2, program="switches/p4/l3_router.p4").realtime_switches
    proc = subprocess.Popen(["sleep", "30"])
    try:
        priorities._prioritise_switch(SimpleNamespace(proc=proc), SOFT, realtime)
        if os.geteuid() != 0:   # not root: the run goes on at normal priority
            return
        assert os.getpriority(os.PRIO_PROCESS, proc.pid) == priorities.SWITCH_NICE
        if realtime:
            assert os.sched_getscheduler(proc.pid) == os.SCHED_FIFO
            assert os.sched_getparam(proc.pid).sched_priority == priorities.SWITCH_RT_PRIORITY
        else:
            assert os.sched_getscheduler(proc.pid) == os.SCHED_OTHER
    finally:
        proc.kill()
        proc.wait()



def test_agents_first_needs_realtime_agents() -> None:
    from testbed.experiment import ExperimentError, Topology

    with pytest.raises(ExperimentError, match="realtime_agents_first needs realtime"):
        Topology(n_hosts=2, program="switches/p4/l3_router.p4", realtime_agents_first=True)


def test_an_agent_that_read_its_frames_late_makes_a_run_unfaithful(tmp_path: Path) -> None:
    f = _fidelity(tmp_path)               # one 1 ms wait per agent and phase: 0.5 ms behind
    c = f["checks"]["host_receive_lag"]
    assert f["ok"] and c["status"] == "pass" and len(c["per_agent"]) == 7  # every agent
    assert c["worst"]["threshold_us"] == 500.0 and c["worst"]["behind_s"] == 0.0005
    # a wait as long as a tenth of the longest agent's run, beyond the threshold
    span_s = max(a["span_s"] for a in c["per_agent"])
    stall = {"receive_stall_ms": 0.5 + 100 * span_s}
    stalled = tmp_path / "stalled"
    stalled.mkdir()
    f = _fidelity(stalled, run=stall)
    c = f["checks"]["host_receive_lag"]
    assert f["failed"] == ["host_receive_lag"]
    assert c["value"] >= 0.1 and c["worst"]["max_us"] >= 100 * span_s * 1e3
    assert "host_receive_lag: " in f["text"]
    # The phase's CPU record says whether that agent got a CPU when it needed one.
    w = c["worst"]
    assert f"host_receive_lag: {c['value']:.4g} (limit 0.05): {w['host']} in phase " \
        f"{w['phase']}" in f["text"] and "waited for a CPU" not in f["text"]
    stats_path = stalled / "phases" / w["phase"] / "switch_stats.json"
    stats = json.loads(stats_path.read_text())
    stats["cpu"] = {"processes": {w["host"]: {"cpu_share": 0.24, "wait_share": 0.71,
                                              "seconds": 3.0}},
                    "machine": {"busy_share": 0.94, "softirq_share": 0.2, "seconds": 3.0},
                    "cpus": 2}
    stats_path.write_text(json.dumps(stats))
    f = evaluate_fidelity(stalled, roce_basics.plan(roce_basics.Params.quick()))
    assert f["checks"]["host_receive_lag"]["worst"]["cpu_wait_share"] == 0.71
    assert (f"{w['host']} in phase {w['phase']}, which waited for a CPU 71% of the time "
            "(machine 94% busy)") in f["text"]
    # time the hypervisor held the machine's CPUs is named too: it makes every
    # process late though none of them waited on a run queue
    stats["cpu"]["machine"]["steal_share"] = 0.052
    stats_path.write_text(json.dumps(stats))
    f = evaluate_fidelity(stalled, roce_basics.plan(roce_basics.Params.quick()))
    assert "(machine 94% busy, 5.2% of its CPU time stolen by the hypervisor)" in f["text"]
    # rxe hosts: the kernel receives, nothing of the agents' to judge
    rxe = tmp_path / "rxe"
    rxe.mkdir()
    p = roce_basics.Params.quick()
    write_roce_basics_run(rxe, p, **stall)
    f = evaluate_fidelity(rxe, roce_basics.plan(p), SOFT, hosts="rxe")
    assert "host_receive_lag" in f["not_measured"]


def _phase_tries(tmp_path: Path, outcomes: list[str], retries: int,
                 phase_name: str = "single") -> tuple[list[dict[str, Any]], Path, list[str]]:
    """Runs one roce-basics phase through run_phase_until_faithful, each try
    writing the phase as a faithful ("good") or unfaithful ("bad": kernel
    drops at the switch) run would; returns the records, the run directory
    and the progress lines."""
    import shutil

    from testbed.runner import RunOptions
    from testbed.runner.phase_retries import run_phase_until_faithful
    from testbed.runner.progress import Progress

    p = roce_basics.Params.quick()
    plan = roce_basics.plan(p)
    written = {"good": tmp_path / "good", "bad": tmp_path / "bad"}
    for d in written.values():
        d.mkdir(parents=True)
    write_roce_basics_run(written["good"], p)
    write_roce_basics_run(written["bad"], p, switch_kwargs={"kernel_drops": 3})
    run_dir = tmp_path / "run"
    (run_dir / "phases").mkdir(parents=True)
    tries: list[str] = []

    def run_once(ph: Any) -> None:
        tries.append(outcomes[len(tries)])
        shutil.copytree(written[tries[-1]] / "phases" / ph.name, run_dir / "phases" / ph.name)

    lines: list[str] = []
    phase = next(ph for ph in plan.phases if ph.name == phase_name)
    records = run_phase_until_faithful(phase, plan, run_dir, Progress(lines.append,
                                                                      tmp_path / "progress.log"),
                                       RunOptions(phase_retries=retries), run_once)
    assert len(tries) == 1 + len(records)
    return records, run_dir, lines


def test_an_unfaithful_phase_is_set_aside_and_run_again(tmp_path: Path) -> None:
    records, run_dir, lines = _phase_tries(tmp_path, ["bad", "bad", "good"], retries=3)
    assert [(r["phase"], r["try"]) for r in records] == [("single", 1), ("single", 2)]
    assert "switch_kernel_drops: 3 (limit 0)" in records[0]["verdict"]
    # the tries set aside keep their data; the phase analysed is the faithful one
    for r in records:
        kept = json.loads((run_dir / r["kept"] / "switch_stats.json").read_text())
        assert kept["after"]["kernel_drops"] == 3
    assert sorted(x.name for x in (run_dir / "phases-unfaithful").iterdir()) == \
        ["single.try1", "single.try2"]
    now = json.loads((run_dir / "phases" / "single" / "switch_stats.json").read_text())
    assert now["after"]["kernel_drops"] == 0
    assert any("phase single: try 1 not faithful" in x and "(retry 1 of 3)" in x for x in lines)
    assert lines[-1].endswith("] phase single: try 3 faithful")


def test_phase_retries_stop_at_their_limit_and_are_off_by_default(tmp_path: Path) -> None:
    records, run_dir, lines = _phase_tries(tmp_path / "a", ["bad", "bad", "bad"], retries=2)
    assert len(records) == 2           # the last try stands, unfaithful, for the verdict
    assert "] phase single: try 3 not faithful - failed: switch_kernel_drops" in lines[-1]
    assert lines[-1].endswith("no retry left, it stands")
    stats = json.loads((run_dir / "phases" / "single" / "switch_stats.json").read_text())
    assert stats["after"]["kernel_drops"] == 3
    records, run_dir, _ = _phase_tries(tmp_path / "b", ["bad"], retries=0)
    assert records == [] and not (run_dir / "phases-unfaithful").exists()


def test_the_cli_refuses_a_negative_phase_retry_limit(tmp_path: Path) -> None:
    r = CliRunner().invoke(cli_main, ["run", "roce-basics", "--phase-retries", "-1",
                                      "--out", str(tmp_path / "x")])
    assert r.exit_code == 2 and "--phase-retries" in r.output


# Commands that add what a second application would find already there.
_ADDS = ("table_add", "mc_mgrp_create", "mc_node_create", "act_prof_create_member")


@pytest.mark.parametrize("quick", [True, False])
def test_every_phase_that_can_be_retried_can_apply_its_commands_again(quick: bool) -> None:
    """--phase-retries applies a phase's commands again: a phase that adds a
    table entry must first clear that table, or its second try fails with a
    duplicate entry instead of measuring."""
    from testbed.experiment import discover, make_params
    from testbed.runner.phase_retries import phase_retriable

    for name, mod in discover().items():
        for ph in mod.plan(make_params(mod, quick, {})).phases:
            if not phase_retriable(ph):
                continue
            cleared: set[str] = set()
            for line in (*ph.commands, *(x for v in ph.switch_commands.values() for x in v),
                         *(x for _t, x in ph.late_commands)):
                verb, target = (line.split() + [""])[:2]
                if verb == "table_clear":
                    cleared.add(target)
                assert verb not in _ADDS or target in cleared, (name, ph.name, line)
