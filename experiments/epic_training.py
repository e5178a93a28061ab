"""EPIC-II in training: iteration time of tensor- and data-parallel training, compute as delays (EPIC's training table).

The EPIC paper trains GPT-3 Large, OPT-350m and Llama-3.2-1B on its 8 ranks
(context 2K, batch 256) and reports the iteration time with EPIC-II and with
NCCL's ring, for tensor parallelism across all 8 ranks (TP = 8: up to 1.38x
faster with EPIC) and data parallelism (DP = 8: about 1.2%). This experiment
runs, on the network of epic-allreduce (``ranks`` hosts on one soft switch
running ``switches/p4/epic.p4``, every port at ``link_mbps``), the AllReduces
one training iteration is made of, and composes the iteration from them with
the computation as a delay:

- **TP = 8** (Megatron-LM's layer split, Shoeybi et al. 2019): every
  transformer layer AllReduces its activations twice going forward and twice
  going back, each ``micro_batch x seq_len x hidden`` elements of
  ``activation_bytes``; ``global_batch / micro_batch`` micro-batches an
  iteration. Layers wait for their AllReduce (nothing overlaps it).
- **DP = 8** (PyTorch DDP): one AllReduce of the gradients,
  ``grad_bytes`` per parameter, in buckets of ``bucket_kib`` (DDP's 25 MB),
  taken here as not overlapped with the backward pass (an upper bound on what
  a faster AllReduce saves).

Each phase (``epic``: EPIC-II AllReduce, 256 B packets; ``ring``: CommLib's
Ring AllReduce at 1 KB packets, the paper's NCCL default) runs
``iterations`` AllReduces of each distinct message size the chosen models
need (the iteration's thousands of identical AllReduces are a repetition
count: their time is the measured mean, times the count). Times are in the
paper NIC's time (divided by the slowdown ``nic_gbps / link_mbps``).

Computation, per model: the paper's DP = 8 iteration time with EPIC-II, less
this run's DP communication with EPIC-II (the configuration where
communication is about 1% of the iteration, so the delay is almost all the
GPUs' time). The same delay stands for TP = 8's computation: the same
FLOPs on the same 8 GPUs (an assumption: TP's narrower matrices run no
faster). ``iteration = compute + communication`` per scheme; the speed-up is
the ring's iteration over EPIC-II's.

Keys (summary.json): ``sizes`` (bytes), ``collective_s`` (per scheme, the mean
AllReduce time per size, s), ``models`` (per model: ``compute_s``, and for
``tp`` and ``dp`` the AllReduces per iteration, their size, ``comm_s`` and
``iteration_s`` per scheme, ``speedup``), ``tp_speedup`` and ``dp_gain``
(per model), ``tp_speedup_max``, ``bit_exact``; ``paper`` holds the paper's
table (PAPER).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from experiments import epic_allreduce
from experiments.epic_allreduce import (
    SchemeResult,
    check_epic_ranks,
    scheme_results,
    sweep_plan,
)
from testbed.claims import Claim
from testbed.experiment import RunPlan, param
from testbed.summary import OMIT_IF_NONE, Summary

NAME = "epic-training"
HOST_PROVIDERS = epic_allreduce.HOST_PROVIDERS
SCHEMES = ("epic", "ring")
PARALLELISMS = ("tp", "dp")
HEADLINE = ("tp_speedup_max", "tp_speedup.opt-350m", "tp_speedup.llama-3.2-1b",
            "dp_gain.llama-3.2-1b", "bit_exact")


@dataclass(frozen=True)
class Model:
    """What the iteration's AllReduces need of a model: its size and shape."""

    title: str
    layers: int           # transformer layers
    hidden: int           # the hidden size (elements of one token's activations)
    params: float         # parameters (gradients of DP's AllReduce)
    source: str


# Public figures of the paper's three models.
MODELS: dict[str, Model] = {
    "gpt3-large": Model("GPT-3 Large", 24, 1536, 760e6,
                        "Brown et al. 2020, Table 2.1 (n_layers 24, d_model 1536, 760M)"),
    "opt-350m": Model("OPT-350m", 24, 1024, 331e6,
                      "Zhang et al. 2022, Table 1 (24 layers, d_model 1024; 331M parameters "
                      "as released)"),
    "llama-3.2-1b": Model("Llama-3.2-1B", 16, 2048, 1.24e9,
                          "Meta's model card and config (16 layers, hidden 2048, 1.24B)"),
}

# The paper's training table (iteration time in s; context 2K, batch 256; 8
# ranks: four servers of two RTX 3090 GPUs and two 100 GbE NICs, one switch).
PAPER: dict[str, Any] = {
    "ranks": 8,
    "nic_gbps": 100.0,
    "seq_len": 2048,
    "global_batch": 256,
    "iteration_s": {
        "gpt3-large": {"tp": {"epic": 28.3, "ring": 38.1}, "dp": {"epic": 16.7, "ring": 16.9}},
        "opt-350m": {"tp": {"epic": 20.0, "ring": 27.5}, "dp": {"epic": 12.2, "ring": 12.4}},
        "llama-3.2-1b": {"tp": {"epic": 35.1, "ring": 46.1},
                         "dp": {"epic": 24.5, "ring": 24.8}},
    },
}
PAPER["tp_speedup"] = {m: round(v["tp"]["ring"] / v["tp"]["epic"], 4)
                       for m, v in PAPER["iteration_s"].items()}
PAPER["dp_gain"] = {m: round(v["dp"]["ring"] / v["dp"]["epic"] - 1, 4)
                    for m, v in PAPER["iteration_s"].items()}
PAPER["tp_speedup_max"] = max(PAPER["tp_speedup"].values())           # OPT-350m, 1.375
REFERENCE = PAPER

# The workload the paper leaves open, each value from a public default:
# - activation_bytes 2: activations in 16-bit (mixed precision);
# - grad_bytes 4: DDP AllReduces the fp32 gradients mixed precision keeps;
# - bucket_kib 25600: DDP's default bucket_cap_mb = 25 (PyTorch);
# - micro_batch 8: the largest power of two whose activations fit an RTX
#   3090's 24 GB under TP = 8 for all three models, by Korthikanti et al.
#   2022's count (s b h (10 + 24/t + 5 a s / (h t)) bytes per layer, no
#   recomputation): 1.7-2.2 GB per sequence, 9-13 sequences beside the
#   weights and optimizer state.
WORKLOAD: dict[str, int] = {"activation_bytes": 2, "grad_bytes": 4, "bucket_kib": 25 * 1024,
                           "micro_batch": 8}

_PLOTS = ("iteration_time.png",)
CLAIMS = (
    Claim("Training table", "tensor-parallel training (TP = 8) runs up to 1.38x faster with "
          "EPIC-II (OPT-350m, 27.5 s against 20.0 s)", key="tp_speedup_max",
          paper=PAPER["tp_speedup_max"], direction="above", versus=1.0, rel_tol=0.10,
          plots=_PLOTS),
    Claim("Training table", "Llama-3.2-1B with TP = 8: 1.31x faster with EPIC-II (46.1 s "
          "against 35.1 s)", key="tp_speedup.llama-3.2-1b",
          paper=PAPER["tp_speedup"]["llama-3.2-1b"], direction="above", versus=1.0,
          rel_tol=0.10, plots=_PLOTS),
    Claim("Training table", "data-parallel training (DP = 8) gains about 1.2% (Llama-3.2-1B, "
          "24.8 s against 24.5 s)", key="dp_gain.llama-3.2-1b",
          paper=PAPER["dp_gain"]["llama-3.2-1b"], direction="above", versus=0.0,
          abs_tol=0.006, percent=True, plots=_PLOTS),
)


@dataclass(frozen=True)
class Params(epic_allreduce.EpicRates):
    models: str = param(",".join(MODELS), "the models trained, comma-separated (of "
                        + ", ".join(MODELS) + ")")
    seq_len: int = param(4, "tokens per sequence (the paper: 2048; smaller here, so that "
                            "the AllReduces fit the emulation's slow links)", "tokens")
    global_batch: int = param(PAPER["global_batch"], "sequences per iteration", "sequences")
    micro_batch: int = param(WORKLOAD["micro_batch"], "sequences per TP micro-batch (one "
                             "AllReduce carries its activations)", "sequences")
    activation_bytes: int = param(WORKLOAD["activation_bytes"], "bytes per activation "
                                  "element in TP's AllReduces", "B")
    grad_bytes: int = param(WORKLOAD["grad_bytes"], "bytes per parameter in DP's gradient "
                            "AllReduce", "B")
    bucket_kib: int = param(64, "DP's gradient bucket: one AllReduce (the paper profile: "
                                "DDP's 25 MB)", "KiB")
    iterations: int = param(2, "AllReduces per message size and scheme", "collectives")
    ranks: int = param(PAPER["ranks"], "hosts, one rank each: the TP and DP degree", "ranks")
    link_mbps: float = epic_allreduce.link_mbps_param()
    nic_gbps: float = epic_allreduce.nic_gbps_param(PAPER["nic_gbps"])
    warmup_kib: int = param(64, "one EPIC AllReduce of this size before measuring (0: none)",
                            "KiB")
    backend: str = epic_allreduce.backend_param()
    seed: int = epic_allreduce.seed_param()
    payload: str = epic_allreduce.payload_param()
    nic_latency_us: float = param(0.0, "the NIC's per-message latency (paper NIC's time)",
                                  "us")
    step_overhead_us: float = param(0.0, "the host library's time per ring step or EPIC "
                                         "round (paper NIC's time)", "us")
    window_log2: int = epic_allreduce.window_log2_param("")

    @classmethod
    def quick(cls) -> Params:
        return cls(seq_len=1, bucket_kib=16, iterations=1, warmup_kib=16)

    @classmethod
    def paper(cls) -> Params:
        """The paper's testbed and training runs: 8 ranks on one switch at 100 Gb/s
        (slowdown 1), context 2K, batch 256, DDP's 25 MB buckets, phantom
        payloads, epic-allreduce's host latencies (HOST_LATENCY) and its
        window sized to the path (W = 128). Every AllReduce size an iteration
        needs runs twice per scheme; the iteration's repetitions of them are
        counted, not run (a TP iteration of OPT-350m is 3 072 AllReduces of
        32 MiB: 96 GiB per scheme, about 6 h here)."""
        return cls(seq_len=PAPER["seq_len"], bucket_kib=WORKLOAD["bucket_kib"],
                   link_mbps=PAPER["nic_gbps"] * 1000.0, nic_gbps=PAPER["nic_gbps"],
                   warmup_kib=256, payload="phantom",
                   **epic_allreduce.paper_hosts(PAPER["nic_gbps"]))

    def __post_init__(self) -> None:
        unknown = [m for m in self.model_list if m not in MODELS]
        if unknown or not self.model_list:
            raise ValueError(f"models {self.models!r}: one or more of {', '.join(MODELS)}, "
                             "comma-separated")
        for name in ("seq_len", "global_batch", "micro_batch", "activation_bytes",
                     "grad_bytes", "bucket_kib", "iterations"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be >= 1, not {getattr(self, name)}")
        if self.global_batch % self.micro_batch:
            raise ValueError(f"micro_batch {self.micro_batch} must divide global_batch "
                             f"{self.global_batch}")
        if not 2 <= self.ranks <= epic_allreduce.MAX_RANKS:
            raise ValueError(f"ranks must be 2..{epic_allreduce.MAX_RANKS}")
        if self.link_mbps <= 0 or self.nic_gbps <= 0 or self.warmup_kib < 0:
            raise ValueError("link_mbps and nic_gbps must be positive, warmup_kib >= 0")
        check_epic_ranks(self.payload, self.nic_latency_us, self.step_overhead_us,
                         self.window_log2)

    @property
    def model_list(self) -> list[str]:
        return [m.strip() for m in self.models.split(",") if m.strip()]

    def tp_message_bytes(self, model: str) -> int:
        """One TP AllReduce: a micro-batch's activations of one layer."""
        return self.micro_batch * self.seq_len * MODELS[model].hidden * self.activation_bytes

    def tp_messages(self, model: str) -> int:
        """TP AllReduces per iteration: 2 forward and 2 backward per layer and
        micro-batch."""
        return 4 * MODELS[model].layers * (self.global_batch // self.micro_batch)

    @property
    def bucket_bytes(self) -> int:
        return self.bucket_kib * 1024

    def dp_buckets(self, model: str) -> float:
        """DP's bucket AllReduces per iteration (the last bucket's part counted
        as its share of a bucket's time)."""
        return MODELS[model].params * self.grad_bytes / self.bucket_bytes

    def sizes(self) -> list[int]:
        """The distinct AllReduce sizes (bytes) the models' iterations need."""
        return sorted({self.tp_message_bytes(m) for m in self.model_list} | {self.bucket_bytes})


def plan(p: Params) -> RunPlan:
    return sweep_plan(p, SCHEMES,
                      notes=f"{p.ranks} ranks, the AllReduces of {', '.join(p.model_list)}'s "
                            f"iterations: {', '.join(str(s) for s in p.sizes())} B, "
                            f"{p.iterations} each",
                      paper=PAPER, info={"workload": WORKLOAD})


@dataclass(frozen=True)
class ParallelIteration:
    """One parallelism's iteration of a model: its AllReduces, per scheme."""

    allreduces: float
    message_bytes: int
    comm_s: dict[str, float]
    iteration_s: dict[str, float]
    speedup: float               # ring / EPIC-II


@dataclass(frozen=True)
class ModelIteration:
    """A model's iteration; only ``compute_s`` (None) where the run's DP
    communication alone outlasts the paper's iteration."""

    compute_s: float | None
    tp: ParallelIteration | None = field(default=None, metadata=OMIT_IF_NONE)
    dp: ParallelIteration | None = field(default=None, metadata=OMIT_IF_NONE)


@dataclass(frozen=True)
class Workload:
    seq_len: int
    global_batch: int
    micro_batch: int
    activation_bytes: int
    grad_bytes: int
    bucket_bytes: int


@dataclass(frozen=True)
class Results(Summary):
    sizes: list[int]
    collective_s: dict[str, list[float]]      # scheme -> per size, the paper NIC's time
    epic_over_ring: list[float | None]
    models: dict[str, ModelIteration]
    tp_speedup: dict[str, float]
    dp_gain: dict[str, float]
    tp_speedup_max: float | None
    bit_exact: bool | None
    schemes: dict[str, SchemeResult]
    workload: Workload
    paper: Mapping[str, object]


def iteration_model(p: Params,
                    collective_s: dict[str, dict[int, float]]) -> dict[str, ModelIteration]:
    """Per model, the iteration composed from the AllReduce times (s, the
    paper NIC's time, per scheme and size): communication per parallelism and
    scheme, the computation delay, iteration times and speed-ups."""
    out: dict[str, ModelIteration] = {}
    for m in p.model_list:
        size = p.tp_message_bytes(m)
        tp_comm = {s: p.tp_messages(m) * collective_s[s][size] for s in SCHEMES}
        dp_comm = {s: p.dp_buckets(m) * collective_s[s][p.bucket_bytes] for s in SCHEMES}
        compute = PAPER["iteration_s"][m]["dp"]["epic"] - dp_comm["epic"]
        if compute <= 0:        # the run's DP communication alone outlasts the paper's
            out[m] = ModelIteration(None)
            continue
        out[m] = ModelIteration(round(compute, 6),
                                tp=_iteration(compute, tp_comm, p.tp_messages(m), size),
                                dp=_iteration(compute, dp_comm, p.dp_buckets(m), p.bucket_bytes))
    return out


def _iteration(compute: float, comm: dict[str, float], n: float,
               nbytes: int) -> ParallelIteration:
    it = {s: compute + comm[s] for s in SCHEMES}
    return ParallelIteration(allreduces=round(n, 3), message_bytes=nbytes,
                             comm_s={s: round(comm[s], 6) for s in SCHEMES},
                             iteration_s={s: round(it[s], 6) for s in SCHEMES},
                             speedup=round(it["ring"] / it["epic"], 5))


def analyze(run_dir: Path) -> Results:
    saved = json.loads((Path(run_dir) / "plan.json").read_text())
    p = Params(**saved["params"])
    sizes = p.sizes()
    res = {s: scheme_results(Path(run_dir), s, p) for s in SCHEMES}
    # the paper NIC's time: the run's clock divided by the slowdown
    collective_s = {s: {size: t / p.slowdown for size, t in zip(sizes, res[s].time_s, strict=True)}
                    for s in SCHEMES}
    measured = all(t > 0 for s in SCHEMES for t in collective_s[s].values())
    models = iteration_model(p, collective_s) if measured else {}
    done = {m: (v.tp, v.dp) for m, v in models.items() if v.tp is not None and v.dp is not None}
    tp = {m: t.speedup for m, (t, _d) in done.items()}
    return Results(
        sizes=sizes,
        collective_s={s: [round(collective_s[s][size], 9) for size in sizes]
                      for s in SCHEMES},
        epic_over_ring=[round(collective_s["ring"][size] / collective_s["epic"][size], 4)
                        if measured else None for size in sizes],
        models=models,
        tp_speedup=tp,
        dp_gain={m: round(d.speedup - 1, 5) for m, (_t, d) in done.items()},
        tp_speedup_max=max(tp.values()) if tp else None,
        bit_exact=None if p.payload == "phantom" else all(
            res[s].bit_exact for s in SCHEMES),
        schemes=res,
        workload=Workload(seq_len=p.seq_len, global_batch=p.global_batch,
                          micro_batch=p.micro_batch, activation_bytes=p.activation_bytes,
                          grad_bytes=p.grad_bytes, bucket_bytes=p.bucket_bytes),
        paper=PAPER,
    )


def _parallel(v: ModelIteration, par: str) -> ParallelIteration:
    it = v.tp if par == "tp" else v.dp
    if it is None:
        raise ValueError(f"no {par} iteration")
    return it


def plot(run_dir: Path) -> list[Path]:
    from testbed.plotting import run_plots, save_figure

    plt, _params, out = run_plots(run_dir)
    r = analyze(run_dir)
    done = {m: v for m, v in r.models.items() if v.tp is not None and v.dp is not None}
    fig, axes = plt.subplots(1, len(PARALLELISMS), figsize=(12, 4.5))
    colours = {"epic": "tab:blue", "ring": "tab:orange"}
    for ax, par in zip(axes, PARALLELISMS, strict=True):
        for i, m in enumerate(done):
            v = done[m]
            it = _parallel(v, par)
            for j, s in enumerate(SCHEMES):
                x = i + (j - 0.5) * 0.38
                ax.bar(x, v.compute_s, 0.18, color=colours[s], alpha=0.35,
                       label="compute (delay)" if i == j == 0 else None)
                ax.bar(x, it.comm_s[s], 0.18, bottom=v.compute_s, color=colours[s],
                       label=f"{s}: communication" if i == 0 else None)
                ax.bar(x + 0.19, PAPER["iteration_s"][m][par][s], 0.18, color=colours[s],
                       hatch="//", fill=False, edgecolor=colours[s],
                       label=f"{s}: the paper's iteration" if i == 0 else None)
        ax.set_xticks(range(len(done)), [MODELS[m].title for m in done])
        ax.set_ylabel("iteration time (s)")
        speedups = ", ".join(f"{MODELS[m].title} {_parallel(done[m], par).speedup:.3f}x"
                             for m in done)
        ax.set_title(f"{par.upper()} = {r.paper['ranks']}: ring / EPIC-II {speedups}",
                     fontsize=8)
        ax.grid(True, axis="y", alpha=0.3)
    axes[0].legend(fontsize=7)
    return [save_figure(fig, out / "iteration_time.png")]
