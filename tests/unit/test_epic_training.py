"""epic-training: the AllReduces of one training iteration, composed with the
computation as a delay. The workload's arithmetic (TP's per-layer
activations, DP's buckets), the paper profile's network, the iteration
model against hand-computed figures, bad parameters, and one short run on
the sim engine end to end."""

from __future__ import annotations

from pathlib import Path

import pytest

from experiments import epic_allreduce, epic_training
from experiments.epic_training import MODELS, PAPER, Params, iteration_model, plan
from testbed.experiment import has_profile, make_params
from testbed.summary import to_json

MiB = 1 << 20


def test_tp_and_dp_allreduces_follow_the_models_shapes() -> None:
    p = Params.paper()
    # OPT-350m: 8 sequences x 2048 tokens x 1024 hidden x 2 B = 32 MiB per layer
    # AllReduce; 4 per layer (2 forward, 2 back) x 24 layers x 256/8 micro-batches
    assert p.tp_message_bytes("opt-350m") == 32 * MiB
    assert p.tp_messages("opt-350m") == 4 * 24 * 32
    assert p.tp_message_bytes("gpt3-large") == 48 * MiB
    assert p.tp_message_bytes("llama-3.2-1b") == 64 * MiB
    assert p.tp_messages("llama-3.2-1b") == 4 * 16 * 32
    # DP: fp32 gradients in DDP's 25 MB buckets
    assert p.bucket_bytes == 25 * MiB
    assert p.dp_buckets("llama-3.2-1b") == pytest.approx(1.24e9 * 4 / (25 * MiB))
    assert p.sizes() == [25 * MiB, 32 * MiB, 48 * MiB, 64 * MiB]


def test_the_paper_profile_is_epic_allreduces_network() -> None:
    assert has_profile(epic_training, "paper")
    p = Params.paper()
    assert p.ranks == 8 and p.link_mbps == 100_000 and p.slowdown == 1
    assert p.payload == "phantom" and p.seq_len == 2048 and p.global_batch == 256
    assert p.nic_latency_us == epic_allreduce.HOST_LATENCY["nic_latency_us"]
    assert p.step_overhead_us == epic_allreduce.HOST_LATENCY["step_overhead_us"]
    assert p.window == 128
    rp = plan(p)
    assert [ph.name for ph in rp.phases] == ["warmup", "epic", "ring"]
    assert rp.topology.defines == (("EPIC_WINDOW_LOG2", "7"),)
    for ph in rp.phases[1:]:
        specs = [j.collective for j in ph.jobs.values()]
        assert len(specs) == 8
        for c in specs:
            assert c is not None
            assert c.counts == tuple(s // 4 for s in p.sizes()) and c.iterations == 2
            assert c.scheme == ("epic" if ph.name == "epic" else "ring")
            assert c.epic_window == (128 if ph.name == "epic" else c.epic_window)
        mtu = {j.transport.path_mtu for j in ph.jobs.values()}
        assert mtu == ({256} if ph.name == "epic" else {1024})


def test_the_iteration_is_compute_plus_the_allreduces() -> None:
    p = Params.paper()
    # EPIC 1 ms and the ring 2 ms per AllReduce of any size
    times = {"epic": dict.fromkeys(p.sizes(), 1e-3), "ring": dict.fromkeys(p.sizes(), 2e-3)}
    out = iteration_model(p, times)
    for m in MODELS:
        v = to_json(out[m])
        dp_epic = p.dp_buckets(m) * 1e-3
        compute = PAPER["iteration_s"][m]["dp"]["epic"] - dp_epic
        assert v["compute_s"] == pytest.approx(compute, abs=1e-6)
        tp_ring = compute + p.tp_messages(m) * 2e-3
        tp_epic = compute + p.tp_messages(m) * 1e-3
        assert v["tp"]["iteration_s"]["ring"] == pytest.approx(tp_ring, abs=1e-6)
        assert v["tp"]["speedup"] == pytest.approx(tp_ring / tp_epic, abs=1e-5)
        # DP with EPIC-II is the paper's by construction (its computation is the rest)
        assert v["dp"]["iteration_s"]["epic"] == pytest.approx(
            PAPER["iteration_s"][m]["dp"]["epic"], abs=1e-6)
        assert v["dp"]["speedup"] == pytest.approx((compute + 2 * dp_epic)
                                                   / (compute + dp_epic), abs=1e-5)


def test_an_allreduce_slower_than_the_papers_iteration_leaves_no_compute() -> None:
    p = Params.paper()
    times = {s: dict.fromkeys(p.sizes(), 1.0) for s in ("epic", "ring")}
    assert to_json(iteration_model(p, times)["opt-350m"]) == {"compute_s": None}


@pytest.mark.parametrize("bad, match", [
    ({"models": "gpt5"}, "models 'gpt5'"),
    ({"models": ""}, "models ''"),
    ({"micro_batch": 3}, "micro_batch 3 must divide global_batch 256"),
    ({"seq_len": 0}, "seq_len must be >= 1"),
    ({"payload": "ghost"}, "payload must be real or phantom"),
    ({"window_log2": 11}, "window_log2 must be 1..10"),
    ({"ranks": 1}, "ranks must be 2.."),
])
def test_bad_parameters_are_refused(bad: dict[str, object], match: str) -> None:
    with pytest.raises(ValueError, match=match):
        Params(**bad)  # type: ignore[arg-type]


def test_the_paper_table_and_claims_agree() -> None:
    assert PAPER["tp_speedup"]["opt-350m"] == pytest.approx(27.5 / 20.0, abs=1e-4)
    assert PAPER["tp_speedup_max"] == PAPER["tp_speedup"]["opt-350m"]
    assert PAPER["dp_gain"]["llama-3.2-1b"] == pytest.approx(24.8 / 24.5 - 1, abs=1e-4)
    keys = {c.key for c in epic_training.CLAIMS}
    assert keys == {"tp_speedup_max", "tp_speedup.llama-3.2-1b", "dp_gain.llama-3.2-1b"}


def test_a_short_run_on_the_sim_engine(tmp_path: Path) -> None:
    """The quick profile end to end: every AllReduce exact, EPIC-II faster than
    the ring at every size, each model's iteration composed."""
    from testbed.runner import RunOptions, run

    s = run("epic-training", RunOptions(quick=True, out=tmp_path / "t",
                                        engine="sim", echo=lambda _s: None,
                                        interpreter="cpython"))
    p = make_params(epic_training, True, {})
    assert s["fidelity_ok"] and s["bit_exact"] is True
    assert s["sizes"] == p.sizes()
    assert all(x > 1 for x in s["epic_over_ring"])
    assert set(s["tp_speedup"]) == set(MODELS)
    assert all(v > 1 for v in s["tp_speedup"].values())
    assert all(v > 0 for v in s["dp_gain"].values())
    assert s["tp_speedup_max"] == max(s["tp_speedup"].values())
