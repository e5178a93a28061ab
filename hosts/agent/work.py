"""What a flow, a message pool or a collective rank uses of the agent that
drives it (AgentServices, which hosts.agent.agent.Agent provides), so that
their modules need not import the agent's."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Protocol

from hosts.agent.events import EventLog
from hosts.agent_spec import FlowSpec, JobSpec
from hosts.roce import Scale
from hosts.roce.pacing import Pacer
from hosts.roce.verbs import QP


class FlowCounts(Protocol):
    """What the agent reads of a flow to count an rxe QP's traffic."""

    @property
    def spec(self) -> FlowSpec: ...

    @property
    def qp(self) -> QP: ...

    @property
    def completed(self) -> int: ...


class AgentServices(Protocol):
    """The agent as its work sees it: the job, its scale and timeline, the
    verbs context and (rxe) DCQCN shim, the rendezvous directory, pacers and
    the QPs' counters."""

    @property
    def spec(self) -> JobSpec: ...

    @property
    def scale(self) -> Scale: ...

    @property
    def log(self) -> EventLog: ...

    @property
    def ctx(self) -> Any: ...

    @property
    def shim(self) -> Any: ...

    @property
    def rdv(self) -> Path: ...

    def make_pacer(self) -> Pacer | None: ...

    def rxe_stats(self, flow: FlowCounts, final: bool) -> dict[str, int]: ...

    def rxe_qp_stats(self, qp: QP, s: FlowSpec, completed: int,
                     device: bool = False, sizes: list[int] | None = None) -> dict[str, int]: ...

    def rxe_device_counters(self) -> dict[str, int]: ...

    def qp_stats(self, qp: Any) -> dict[str, int]: ...
