"""The prioritization schemes ReFlex is compared with, and ReFlex itself.

Each scheme says how the switch shares a port between its two queues
(``weights``: deficit round robin weights of the low and the high queue, or
None for strict priority) and where a flexible flow's packets go
(``flexible``: ``"high"`` always, ``"low"`` always, or ``"reflex"``: chosen by
its budget and the probing cycle). Regular flows always use the high queue.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

__all__ = ["Scheme", "SCHEMES", "DSCP_LOW", "DSCP_HIGH", "PRIO_LOW", "PRIO_HIGH"]

# DSCP -> queue, as configured in switches/p4/reflex.p4 (CS1 = "lower effort").
DSCP_LOW = 8
DSCP_HIGH = 0
PRIO_LOW = 0    # queue numbers: BMv2 serves the higher number first
PRIO_HIGH = 1


@dataclass(frozen=True)
class Scheme:
    name: str
    weights: tuple[int, int] | None   # (low, high) DRR weights; None = strict priority
    flexible: Literal["high", "low", "reflex"]
    description: str

    def switch_line(self, port: int) -> str:
        if self.weights is None:
            return f"set_priority_weights {port} strict"
        return f"set_priority_weights {port} {self.weights[0]} {self.weights[1]}"


SCHEMES: dict[str, Scheme] = {s.name: s for s in (
    Scheme("reflex", (10, 90), "reflex", "ReFlex: budgets and probing over DRR 90/10"),
    Scheme("none", (10, 90), "high", "no prioritization: every flow in the high queue"),
    Scheme("absolute", None, "low", "absolute priority: flexible flows in a strict low queue"),
    Scheme("weighted-9:1", (10, 90), "low", "weighted priority, regular 9x the weight"),
    Scheme("weighted-2:1", (1, 2), "low", "weighted priority, regular 2x the weight"),
    Scheme("weighted-10:9", (9, 10), "low", "weighted priority, regular 10/9 the weight"),
)}
