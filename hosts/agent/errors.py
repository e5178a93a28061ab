"""How an agent's job fails: AgentError, whose message is the reason (the
process prints it and logs it as an ``error`` event, hosts.agent.process)."""

from __future__ import annotations


class AgentError(RuntimeError):
    """The job failed; the message says why."""
