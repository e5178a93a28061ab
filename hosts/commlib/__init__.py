"""CommLib: communicators and ring collectives over the RoCE transport.

- `Communicator(ctx, rank, size, job_id, channels=C, max_bytes=..., event_sink=...)`
  with `local_info()` / `connect(infos)` or `Communicator.init(..., rendezvous)`;
  `all_reduce`, `reduce_scatter`, `all_gather`, `reduce`, `broadcast` (pipelined
  chains around the ring), `barrier` (blocking) and `start_*` (returning a
  `CollectiveOp` driven by `progress()`).
- `hierarchical`: `HierarchicalCommunicator(ctx, rank, size, job_id, dims=(local,
  groups))`, a 2D ring AllReduce (ReduceScatter in each group, AllReduce across
  the groups, AllGather in each group) whose steps count on as one job's.
- `epic`: `EpicCommunicator(ctx, rank, size, EpicEndpoint(...))`, the same
  collectives (plus reduce, broadcast, barrier) aggregated by an EPIC Mode-II
  switch (switches/p4/EPIC.md), over standard RC verbs only.
- Rendezvous for the out-of-band exchange: `TcpRendezvous`, `FileRendezvous`,
  `LocalRendezvous`.
- `schedule`: the ring plans (which chunk moves at which step), pure data.
- Step events (dicts, CLOCK_MONOTONIC ns) go to `event_sink`: `collective_start`,
  `step_start`, `step_end`, `collective_end`; `JsonlSink(path)` writes them as JSONL.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from hosts.commlib.events import JsonlSink
from hosts.commlib.rendezvous import (
    FileRendezvous,
    LocalRendezvous,
    Rendezvous,
    RendezvousError,
    TcpRendezvous,
)

if TYPE_CHECKING:
    from hosts.commlib.communicator import CollectiveOp, CommError, Communicator, EventSink
    from hosts.commlib.epic import EpicCollective, EpicCommunicator, EpicEndpoint, EpicOp
    from hosts.commlib.hierarchical import HierarchicalCommunicator, HierarchicalOp
    from hosts.commlib.reduce import ReduceOp
    from hosts.commlib.schedule import (
        Collective,
        Phase,
        RingStep,
        channel_chunks,
        ring_steps,
        split,
    )

# The communicators, the reductions (numpy) and the schedule (enum.StrEnum,
# 3.11) load on first use, so a flow-only host agent imports the rendezvous
# alone: it runs on PyPy (Python 3.9, no numpy).
_LAZY = {
    **dict.fromkeys(("CollectiveOp", "CommError", "Communicator", "EventSink"), "communicator"),
    **dict.fromkeys(("EpicCollective", "EpicCommunicator", "EpicEndpoint", "EpicOp"), "epic"),
    **dict.fromkeys(("HierarchicalCommunicator", "HierarchicalOp"), "hierarchical"),
    "ReduceOp": "reduce",
    **dict.fromkeys(("Collective", "Phase", "RingStep", "channel_chunks", "ring_steps",
                     "split"), "schedule"),
}


def __getattr__(name: str) -> Any:
    mod = _LAZY.get(name)
    if mod is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(f"{__name__}.{mod}"), name)
    globals()[name] = value
    return value


__all__ = [
    "Collective",
    "CollectiveOp",
    "CommError",
    "Communicator",
    "EpicCollective",
    "EpicCommunicator",
    "EpicEndpoint",
    "EpicOp",
    "EventSink",
    "FileRendezvous",
    "HierarchicalCommunicator",
    "HierarchicalOp",
    "JsonlSink",
    "LocalRendezvous",
    "Phase",
    "ReduceOp",
    "Rendezvous",
    "RendezvousError",
    "RingStep",
    "TcpRendezvous",
    "channel_chunks",
    "ring_steps",
    "split",
]
