"""The exchange of connection data before the start: Offer, one agent's part
of it (a flow's two ends, a ring's ranks, an EPIC rank and the controller)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from typing import TypeAlias

    from hosts.agent.flow import FlowEndInfo
    from hosts.agent.message_pool import PoolEndInfo
    from hosts.commlib.communicator import RankInfo
    from hosts.commlib.epic import EpicRankInfo
    from hosts.commlib.hierarchical import HierarchicalRankInfo

    # One party's connection data: a flow's or a message pool's end, a ring's
    # rank (1D or 2D), an EPIC rank (an annotation only: PyPy 3.9, which runs
    # flow agents, has no X | Y of classes and no CommLib).
    ConnectionInfo: TypeAlias = (FlowEndInfo | PoolEndInfo | RankInfo | HierarchicalRankInfo
                                 | EpicRankInfo)


@dataclass(frozen=True)
class Offer:
    """One agent's part of an exchange of connection data before the start:
    ``rank`` of ``size`` parties contribute ``info`` under ``group``/``tag``
    and each gets every party's, in rank order (a flow's two ends, a ring's
    ranks). The Mininet engine exchanges offers through files in the
    rendezvous directory; the virtual-time engine hands them over in memory."""

    group: str
    tag: str
    rank: int
    size: int
    info: ConnectionInfo
