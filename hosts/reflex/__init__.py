"""ReFlex hosts: flexible flows with bounded degradation (budgets, synchronized
probing, two priority classes by DSCP) and the comparison schemes."""

from hosts.reflex.flexible import Cycle, Decision, FlexibleFlow, FlexibleParams, Phase
from hosts.reflex.schemes import DSCP_HIGH, DSCP_LOW, SCHEMES, Scheme

__all__ = ["Cycle", "Decision", "FlexibleFlow", "FlexibleParams", "Phase", "SCHEMES", "Scheme",
           "DSCP_HIGH", "DSCP_LOW"]
