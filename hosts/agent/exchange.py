"""The exchange of connection data before the start: Offer, one agent's part
of it (a flow's two ends, a ring's ranks, an EPIC rank and the controller)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


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
    info: Any
