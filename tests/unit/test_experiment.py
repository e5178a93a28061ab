"""Experiment framework and analysis helpers: parameters, plans as data, timeline
parsing, Jain's index, goodput, and roce-basics' analysis on synthetic timelines."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

import pytest
from plot_checks import assert_plots

from experiments import ring_allreduce, roce_basics
from hosts.agent_spec import JobSpec, message_wire_bytes
from switches.targets import target_of
from testbed.experiment import (
    ExperimentError,
    discover,
    load,
    make_params,
    param_docs,
    params_to_dict,
    plan_to_dict,
)
from testbed.summary import results_json
from testbed.timeline import (
    goodput_fraction,
    jain_index,
    payload_efficiency,
    rate_series,
    read_jsonl,
    value_at,
    window_rate,
)

# ---------------------------------------------------------------------------
# numbers


def test_jain_index() -> None:
    assert jain_index([3.0, 3.0]) == pytest.approx(1.0)
    assert jain_index([5.0, 0.0]) == pytest.approx(0.5)
    assert jain_index([1.0, 0.0, 0.0, 0.0]) == pytest.approx(0.25)
    assert jain_index([1.0, 2.0]) == pytest.approx(9 / 10)
    assert jain_index([]) == 0.0 and jain_index([0.0, 0.0]) == 0.0
    with pytest.raises(ValueError):
        jain_index([1.0, -1.0])


def test_counter_interpolation_and_window_rates() -> None:
    pts = [(0.0, 0.0), (1.0, 100.0), (2.0, 100.0), (4.0, 500.0)]
    assert value_at(pts, -1) == 0.0 and value_at(pts, 9) == 500.0
    assert value_at(pts, 0.5) == pytest.approx(50.0)
    assert value_at(pts, 3.0) == pytest.approx(300.0)
    assert window_rate(pts, 0.0, 1.0) == pytest.approx(100.0)
    assert window_rate(pts, 1.0, 2.0) == 0.0
    assert window_rate(pts, 2.0, 4.0) == pytest.approx(200.0)
    with pytest.raises(ValueError):
        window_rate(pts, 2.0, 2.0)
    ts, rs = rate_series(pts, window=1.0, step=1.0)
    assert ts == [1.0, 2.0, 3.0, 4.0]
    assert rs == pytest.approx([100.0, 0.0, 200.0, 200.0])


def test_goodput_counts_every_header_byte() -> None:
    # 64 packets of 1024 B payload: Ethernet+IPv4+UDP (42) + BTH (12) + ICRC (4) each,
    # plus RETH (16) in the first and ImmDt (4) in the last.
    assert message_wire_bytes(65536, 1024) == 65536 + 64 * 58 + 16 + 4
    assert message_wire_bytes(5, 1024) == 5 + 3 + 58 + 16 + 4  # payload padded to 4
    eff = payload_efficiency(65536, 1024)
    assert eff == pytest.approx(65536 / 69268)
    # A link of 8 Mb/s busy for 2 s carries 2 MB of frames, 2 MB x eff of payload.
    full = 8e6 / 8 * 2.0 * eff
    assert goodput_fraction(full, 2.0, 8e6, 65536, 1024) == pytest.approx(1.0)
    assert goodput_fraction(full / 2, 2.0, 8e6, 65536, 1024) == pytest.approx(0.5)
    with pytest.raises(ValueError):
        goodput_fraction(1, 0.0, 8e6, 65536, 1024)


def test_jsonl_reader_skips_only_a_torn_last_line(tmp_path: Path) -> None:
    f = tmp_path / "e.jsonl"
    f.write_text('{"event": "a", "t_ns": 1}\n{"event": "b", "t_ns": 2}\n{"event": "c", "t_')
    assert [e["event"] for e in read_jsonl(f)] == ["a", "b"]
    f.write_text('{"event": "a"}\nnot json\n{"event": "b"}\n')
    with pytest.raises(ValueError, match="e.jsonl:2"):
        read_jsonl(f)
    assert read_jsonl(tmp_path / "missing.jsonl") == []


# ---------------------------------------------------------------------------
# experiments as data


def test_experiments_are_discovered_by_name() -> None:
    exps = discover()
    assert {"roce-basics", "ring-allreduce"} <= set(exps)
    assert load("roce-basics") is roce_basics and load("ring_allreduce") is ring_allreduce
    with pytest.raises(ExperimentError, match="unknown experiment 'nope'.*roce-basics"):
        load("nope")


def test_every_experiment_module_is_in_the_registry() -> None:
    # a module of the experiments package with a NAME that the registry
    # forgot would never be listed or run
    import importlib
    import pkgutil

    import experiments

    named = {}
    for m in pkgutil.iter_modules(experiments.__path__):
        if not m.name.startswith("_"):
            mod = importlib.import_module(f"experiments.{m.name}")
            named[mod.NAME] = mod
    assert named == experiments.REGISTRY
    assert discover() == dict(sorted(named.items()))


def test_the_testbed_does_not_import_the_experiments() -> None:
    # the registry comes through an entry point, not an import: the testbed
    # is the framework, the experiments are what it runs
    import ast

    root = Path(__file__).resolve().parents[2]
    for path in sorted((root / "testbed").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            names = ([a.name for a in node.names] if isinstance(node, ast.Import)
                     else [node.module or ""] if isinstance(node, ast.ImportFrom) else [])
            assert not any(n == "experiments" or n.startswith("experiments.") for n in names), \
                f"{path.relative_to(root)}:{node.lineno} imports {names}"


class _Point:
    def __init__(self, value: str, registry: dict[str, Any]) -> None:
        self.value, self._registry = value, registry

    def load(self) -> dict[str, Any]:
        return self._registry


def test_registries_that_contradict_themselves_are_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    import importlib.metadata

    def points(*registries: dict[str, Any]) -> None:
        found = [_Point(f"pkg{i}:REGISTRY", r) for i, r in enumerate(registries)]
        monkeypatch.setattr(importlib.metadata, "entry_points", lambda group: found)

    points()
    with pytest.raises(ExperimentError, match="no experiments registered.*pip install -e"):
        discover()
    points({"ring": roce_basics})
    with pytest.raises(ExperimentError, match="'ring' names a module whose NAME is 'roce-basics'"):
        discover()
    other = type(roce_basics)("other")
    other.NAME = "roce-basics"  # type: ignore[attr-defined]
    points({"roce-basics": roce_basics}, {"roce-basics": other})
    with pytest.raises(ExperimentError, match="'roce-basics' is registered twice"):
        discover()
    points({"roce-basics": roce_basics}, {"ring-allreduce": ring_allreduce})
    assert list(discover()) == ["ring-allreduce", "roce-basics"]


def test_parameters_quick_profile_and_overrides() -> None:
    full = make_params(roce_basics)
    quick = make_params(roce_basics, quick=True)
    assert quick.bottleneck_mbps < full.bottleneck_mbps and quick.single_msgs < full.single_msgs
    p = make_params(roce_basics, quick=True,
                    overrides={"bottleneck_mbps": "2.5", "loss_per_10k": "0x10",
                               "dcqcn_preset": "zhu2015"})
    assert (p.bottleneck_mbps, p.loss_per_10k, p.dcqcn_preset) == (2.5, 16, "zhu2015")
    assert make_params(roce_basics, overrides={"dcqcn_preset": "nic"}).dcqcn_preset == "connectx"
    with pytest.raises(ValueError, match="unknown DCQCN preset 'fast'"):
        make_params(roce_basics, overrides={"dcqcn_preset": "fast"})
    assert p.single_msgs == quick.single_msgs
    with pytest.raises(ExperimentError, match="no parameter 'speed'"):
        make_params(roce_basics, overrides={"speed": "1"})
    with pytest.raises(ExperimentError, match="not a int"):
        make_params(roce_basics, overrides={"queue_depth": "deep"})
    with pytest.raises(ExperimentError, match="bad parameters"):
        make_params(roce_basics, overrides={"ecn_kmax": "100"})  # above the queue depth


def test_every_experiment_parameter_has_a_meaning() -> None:
    """``testbed run NAME --help`` shows each parameter's meaning and unit,
    declared with the field (testbed.experiment.param)."""
    missing, multiline = [], []
    for name, mod in discover().items():
        docs = param_docs(mod)
        assert [d.name for d in docs] == [f.name for f in dataclasses.fields(mod.Params)]
        for d in docs:
            if not d.meaning.strip():
                missing.append(f"{name}: {d.name}")
            if "\n" in d.meaning + d.unit:
                multiline.append(f"{name}: {d.name}")
    assert not missing, "parameters without a meaning (declare them with param()): " + \
        ", ".join(missing)
    assert not multiline, "meanings and units are one line: " + ", ".join(multiline)


def test_a_subclass_keeps_the_meaning_of_a_default_it_changes() -> None:
    from experiments import symphony_two_jobs
    from experiments._symphony_net import SymphonyNetwork

    docs = {d.name: d for d in param_docs(symphony_two_jobs)}
    link = docs["link_mbps"]
    assert link.full == 2.0 and link.unit == "Mb/s"
    assert link.meaning == dataclasses.fields(SymphonyNetwork)[0].metadata["meaning"]
    assert docs["hosts_per_leaf"].full == 4 and docs["hosts_per_leaf"].quick == 2


def test_roce_basics_plan_is_plain_data() -> None:
    p = roce_basics.Params.quick()
    plan = roce_basics.plan(p)
    d = json.loads(json.dumps(plan_to_dict(plan)))
    assert d["topology"]["n_hosts"] == 3
    assert "set_port_rate_bps 4000000" in d["switch_commands"]
    assert "set_queue_depth 64" in d["switch_commands"]
    assert any("set_ecn_params 4 16 20" in c for c in d["switch_commands"])
    assert d["network"]["testbed"]["kmin_pkts"] == 4
    assert [ph["name"] for ph in d["phases"]] == ["single", "pair", "loss"]
    loss = d["phases"][2]
    assert loss["commands"] == ["table_set_default MyEgress.link_loss MyEgress.set_loss 100"]
    pair = d["phases"][1]
    assert sorted(pair["jobs"]) == ["h1", "h2", "h3"]
    h3 = JobSpec.from_dict(pair["jobs"]["h3"])
    assert [f.role for f in h3.flows] == ["receiver", "receiver"]
    assert {f.peer_ip for f in h3.flows} == {"10.0.1.1", "10.0.2.1"}
    h1 = JobSpec.from_dict(pair["jobs"]["h1"])
    # The host NIC runs at the link rate: the scale's line rate is the bottleneck.
    from hosts.roce import Scale

    assert Scale(**h1.transport.scale).line_rate_bps == pytest.approx(4e6)
    assert h1.flows[0].peer_ip == "10.0.3.1"


def test_ring_allreduce_plan_places_one_rank_per_host() -> None:
    plan = ring_allreduce.plan(ring_allreduce.Params(ranks=5))
    jobs = plan.phases[0].jobs
    assert sorted(jobs, key=lambda h: int(h[1:])) == [f"h{i}" for i in range(1, 6)]
    assert [jobs[f"h{i + 1}"].collective.rank for i in range(5)] == list(range(5))  # type: ignore[union-attr]
    assert plan.topology.n_hosts == 5


# ---------------------------------------------------------------------------
# roce-basics analysis on synthetic timelines


def test_roce_basics_analysis(tmp_path: Path) -> None:
    p = roce_basics.Params.quick()
    write_roce_basics_run(tmp_path, p, single_goodput=0.97,
                          pair_rates_mbps=((2.0, 2.0), (2.4, 1.2)), pair_queue_max=22)
    r = results_json(roce_basics.analyze(tmp_path))
    assert r["single"]["goodput_fraction"] == pytest.approx(0.97, abs=2e-3)
    assert r["single"]["bytes_ok"] is True
    # Jain over the second half only: rates 2.4 and 1.2 there (equal before).
    assert r["pair"]["jain_index"] == pytest.approx(0.9, abs=5e-3)
    assert r["pair"]["rates_mbps"] == pytest.approx([2.4, 1.2], abs=0.02)
    assert r["pair"]["max_queue_pkts"] == 22 and r["pair"]["queue_limit_pkts"] == 64
    assert r["pair"]["bounded_queue"] is True
    assert r["loss"]["bytes_ok"] is True and r["loss"]["retransmissions"] == 17
    assert r["loss"]["switch_drops"] == {"egress_drop_port": 11}


def test_roce_basics_analysis_catches_corrupt_data(tmp_path: Path) -> None:
    p = roce_basics.Params.quick()
    write_roce_basics_run(tmp_path, p, loss_sha_mismatch=True)
    assert results_json(roce_basics.analyze(tmp_path))["loss"]["bytes_ok"] is False


def test_roce_basics_plots_are_pngs(tmp_path: Path) -> None:
    write_roce_basics_run(tmp_path, roce_basics.Params.quick())
    assert_plots(roce_basics.plot(tmp_path), tmp_path, ["single.png", "pair.png", "loss.png"])


# ---------------------------------------------------------------------------
# synthetic run directories (also used by test_runner.py)

T0 = 5_000_000_000  # CLOCK_MONOTONIC ns of the common start


def _ns(t: float) -> int:
    return T0 + int(round(t * 1e9))


def _flow_events(flow: str, sender: str, receiver: str, msg_bytes: int, msgs: int,
                 segments: list[tuple[float, float]], sha_mismatch: bool = False,
                 retransmits: int = 0, ce_pkts: int = 0) -> dict[str, list[dict[str, Any]]]:
    """Events of one flow delivering at piecewise-constant rates: ``segments`` are
    (duration_s, Mb/s) from t=0; the flow ends when ``msgs`` messages arrived."""
    total = msg_bytes * msgs
    rx, comps = [], []
    t, got, k, dt = 0.0, 0.0, 1, 0.005
    seg_end = 0.0
    for dur, mbps in segments:
        seg_end += dur
        while t < seg_end - 1e-12 and got < total:
            step = min(dt, seg_end - t)
            nxt = min(total, got + mbps * 1e6 / 8 * step)
            while k <= msgs and nxt >= k * msg_bytes - 1e-6:
                frac = (k * msg_bytes - got) / (nxt - got) if nxt > got else 0
                comps.append({"event": "completion", "t_ns": _ns(t + frac * step), "host": receiver,
                              "flow": flow, "role": "receiver", "index": k - 1,
                              "bytes": msg_bytes})
                k += 1
            t += step
            got = nxt
            rx.append({"event": "rx", "t_ns": _ns(t), "host": receiver, "flow": flow,
                       "rx_bytes": int(got)})
    assert got >= total - 1, "segments too short for the flow"
    end = comps[-1]["t_ns"]
    sha = "ab" * 32
    lat = {"sends": 100, "late_sends": 1, "late_fraction": 0.01, "late_threshold_s": 0.002,
           "mean_s": 1e-4, "p99_s": 1e-3, "max_s": 2e-3}
    s_ev = [
        {"event": "flow_start", "t_ns": T0, "host": sender, "flow": flow, "role": "sender"},
        {"event": "flow_end", "t_ns": end + 1000, "host": sender, "flow": flow, "role": "sender",
         "bytes": total, "sha256": sha, "cnps_rcvd": 3, "pacer": {"lateness": lat},
         "qp": {"retransmits": retransmits, "naks_rcvd": 2, "rto": 0, "tx_pkts": 1000,
                "tx_drops": 0}},
    ]
    r_ev = [{"event": "flow_start", "t_ns": T0, "host": receiver, "flow": flow,
             "role": "receiver"}, *rx, *comps,
            {"event": "flow_end", "t_ns": end, "host": receiver, "flow": flow, "role": "receiver",
             "bytes": total, "bytes_ok": True, "sha256": "cd" * 32 if sha_mismatch else sha,
             "qp": {"ce_pkts": ce_pkts, "rx_bytes": total, "tx_drops": 0}}]
    return {sender: s_ev, receiver: r_ev}


def _switch_stats(port_drops: int = 0, qmax: int = 2, drops: dict[str, int] | None = None,
                  lag: tuple[int, int, int, int] = (100, 10, 200, 30),
                  kernel_drops: int = 0, poller_samples: int = 60,
                  poller_error: str | None = None, out_of_order: int | None = 0,
                  behind_clock: int | None = 0,
                  host_qdiscs: dict[str, dict[str, int]] | None = None) -> dict[str, Any]:
    """``out_of_order``: frames port 1 received out of order during the
    phase (None: a switch that does not count them); ``behind_clock``: frames
    of port 1, of the phase's 1000, the queues took behind their clock (None:
    a switch that does not count them)."""
    def snap(mean: int, samples: int, qd: int, dr: dict[str, int], kd: int,
             ooo: int | None, rx: int, behind: int | None) -> dict[str, Any]:
        ports = {n: {"rx_frames": 100} if ooo is None else
                 {"rx_frames": 100, "rx_out_of_order": ooo if n == "1" else 0}
                 for n in ("1", "2", "3")}
        sw: dict[str, Any] = {"drops": dr, "queues": {"3": {"queues": [{"depth": 0,
                                                                          "drops": qd}]}},
                              "rx": {"1": rx, "3": rx // 10}}
        if behind is not None:
            sw["rx_behind_clock"] = {"1": behind} if behind else {}
            sw["rx_behind_clock_max_us"] = {"1": 2000} if behind else {}
        return {"lag_us": {"mean": mean, "samples": samples, "max": 900}, "kernel_drops": kd,
                "ports": ports, "switch": sw}

    return {"before": snap(lag[0], lag[1], 0, {}, 0, None if out_of_order is None else 7,
                           1000, None if behind_clock is None else 5),
            "after": snap(lag[2], lag[3], port_drops, drops or {}, kernel_drops,
                          None if out_of_order is None else 7 + out_of_order, 1909,
                          None if behind_clock is None else 5 + behind_clock),
            "qdepth_max": {"3": qmax}, "poller_samples": poller_samples,
            "poller_error": poller_error,
            **({"host_qdiscs": host_qdiscs} if host_qdiscs is not None else {})}


def _agent_end(host: str, t_ns: int, stall_ms: float) -> dict[str, Any]:
    from hosts.roce.receive_lag import ReceiveLag, threshold_ns

    lag = ReceiveLag()
    lag.reset(T0, threshold_ns(10.0))     # 0.5 ms
    stall = int(stall_ms * 1e6)
    before = max(T0, t_ns - stall)          # prompt reads until the stall began
    for i in range(1, 1000):
        lag.record(20_000, T0 + i * (before - T0) // 1000)
    lag.record(stall, t_ns)
    return {"event": "agent_end", "t_ns": t_ns, "host": host, "ok": True,
            "receive_lag": lag.as_dict(t_ns)}


def write_roce_basics_run(run_dir: Path, p: Any, *, single_goodput: float = 0.99,
                          pair_rates_mbps: tuple[tuple[float, float], ...] = ((2.0, 2.0),),
                          pair_queue_max: int = 10, loss_sha_mismatch: bool = False,
                          switch_kwargs: dict[str, Any] | None = None,
                          ce_marks: dict[str, int] | None = None, single_queue_max: int = 2,
                          target: str = "soft", receive_stall_ms: float = 1.0) -> None:
    """A run directory as testbed.runner writes it, with made-up timelines.
    ``receive_stall_ms``: each agent read its frames within 20 us but at its
    end left its oldest frame waiting this long (behind a 0.5 ms threshold).
    ``ce_marks``: CE-marked packets each phase's receivers count (default:
    only the congested pair phase has marks). ``target="bmv2"``: what a BMv2
    run saves (no switch samples or counters)."""
    marks = {"pair": 5} if ce_marks is None else ce_marks
    plan = roce_basics.plan(p)
    (run_dir / "plan.json").write_text(json.dumps(
        {"experiment": roce_basics.NAME, "params": params_to_dict(p), **plan_to_dict(plan)}))
    eff = payload_efficiency(p.msg_bytes, p.path_mtu)
    mbps = p.bottleneck_mbps * eff * single_goodput
    phases: dict[str, dict[str, list[dict[str, Any]]]] = {
        "single": _flow_events("single", "h1", "h3", p.msg_bytes, p.single_msgs, [(100.0, mbps)],
                               ce_pkts=marks.get("single", 0)),
        "loss": _flow_events("loss", "h1", "h3", p.msg_bytes, p.loss_msgs, [(100.0, 3.5)],
                             sha_mismatch=loss_sha_mismatch, retransmits=17,
                             ce_pkts=marks.get("loss", 0)),
    }
    # Pair: each (a, b) rate pair holds for an equal share of the time both are active.
    per_flow = p.msg_bytes * p.pair_msgs * 8 / 1e6
    seg = min(per_flow / sum(r[i] for r in pair_rates_mbps) for i in (0, 1))
    pair: dict[str, list[dict[str, Any]]] = {}
    for i, (flow, host) in enumerate((("pair-a", "h1"), ("pair-b", "h2"))):
        segs = [(seg, r[i]) for r in pair_rates_mbps] + [(100.0, 4.0)]
        for h, evs in _flow_events(flow, host, "h3", p.msg_bytes, p.pair_msgs, segs,
                                   ce_pkts=marks.get("pair", 0)).items():
            pair.setdefault(h, []).extend(evs)
    phases["pair"] = pair
    for name, by_host in phases.items():
        d = run_dir / "phases" / name
        d.mkdir(parents=True)
        for host, evs in by_host.items():
            evs = [{"event": "start", "t_ns": T0, "host": host}, *evs,
                   _agent_end(host, max(e["t_ns"] for e in evs) + 1, receive_stall_ms)]
            (d / f"{host}.events.jsonl").write_text(
                "".join(json.dumps(e) + "\n" for e in sorted(evs, key=lambda e: e["t_ns"])))
        qmax = {"pair": pair_queue_max, "single": single_queue_max}.get(name, 2)
        if not target_of(target).reports_stats:  # BMv2: the P4 watermark register only
            (d / "switch_stats.json").write_text(json.dumps(
                {"before": {}, "after": {}, "qdepth_max": {"3": qmax}, "poller_samples": 0,
                 "poller_error": None}))
            continue
        drops = {"egress_drop_port": 11} if name == "loss" else {}
        (d / "switch_stats.json").write_text(json.dumps(
            _switch_stats(qmax=qmax, drops=drops, **(switch_kwargs or {}))))
        (d / "switch.jsonl").write_text("".join(
            json.dumps({"t_ns": _ns(t / 10), "queues": {"3": (t % 7) if name == "pair" else 1}})
            + "\n" for t in range(60)))

