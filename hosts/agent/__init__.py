"""Host agent: runs one job spec inside a Mininet host and writes its timeline.

    python -m hosts.agent --spec job.json --events out.jsonl

The spec (hosts.agent_spec.JobSpec) lists queue pairs to drive (senders
posting RDMA WRITE_WITH_IMM messages under DCQCN and a token-bucket pacer, or
the receivers they land at) and/or a CommLib collective rank. Set-up, in order:
create QPs and buffers, exchange connection data with each peer through files
in the spec's ``rendezvous_dir`` (hosts.commlib.FileRendezvous), meet every
agent of the phase at a start barrier (all start at the same CLOCK_MONOTONIC
instant), run, then keep answering the network (late ACKs, retransmissions)
until every agent of the phase has finished: a done barrier.

One module per concern; each imports only modules above it in this list:

- ``errors``: AgentError, how a job fails
- ``events``: the timeline (EventLog) and the agents' clock (now_ns,
  simulated_clock)
- ``patterns``: the bytes a flow carries, which both ends derive from its seed
- ``expectations``: a collective rank's inputs and the results it must hold
- ``rates``: the senders' rate controllers (DCQCN or a fixed rate)
- ``work``: what a flow, a message pool or a collective rank uses of its agent
- ``flow``: one flow end and its application loop, and its ``flow_end`` record
- ``message_pool``: a flow of messages arriving on their own schedule over
  several connections
- ``exchange``: Offer, an agent's part of the exchange of connection data
- ``collective``: a CommLib collective rank (a ring's or EPIC's)
- ``interfaces``: the host's network interface (addresses, MACs)
- ``agent``: Agent, which drives the work from set-up to the done barrier
- ``process``: the agent as a process (main, signals, profiling, exit status);
  ``__main__`` runs it

Events are JSON lines ``{"event": ..., "t_ns": CLOCK_MONOTONIC ns, "host": ...}``
(events.EventLog); the module that writes an event describes its fields:

- process: ``agent_start``, ``error``, ``profiling``
- agent: ``setup_done``, ``jit_warmup``, ``start``, ``progress``,
  ``work_done``, ``agent_end``
- flow (and message_pool): ``flow_start``, ``flow_end``, ``completion``,
  ``rate``, ``rx``, ``priority``, ``partial_end``, ``stop_after``,
  ``cnp_tx``, ``retransmit``
- rates: ``dcqcn``, ``cnp_rx``
- collective: CommLib's ``collective_start`` / ``step_start`` / ``step_end``
  / ``collective_end``, ``collective_check``, ``pacer_report`` /
  ``qp_report``, ``device_counters``

Exit status: 0 success; 1 the job failed; 2 the spec is invalid or
unreadable; 3 the agent's parent (the runner) is gone (hosts.agent.process).

The names below are re-exported for callers that import them from the package.
"""

from __future__ import annotations

from hosts.agent.agent import Agent, DoneBarrier, rxe_ack_timeout_ns
from hosts.agent.errors import AgentError
from hosts.agent.events import EventLog, now_ns, simulated_clock
from hosts.agent.expectations import (
    CollectiveExpectation,
    collective_bound,
    collective_expected,
    collective_input,
    collective_inputs,
)
from hosts.agent.patterns import (
    FLOW_PATTERN_PERIOD,
    flow_buffer,
    flow_pattern,
    matches_pattern,
    register_flow_buffer,
)
from hosts.agent.process import main
from hosts.agent.rates import cnp_interval_ns, dcqcn_params, make_rate_controller

__all__ = ["main", "Agent", "AgentError", "DoneBarrier", "EventLog", "now_ns",
           "simulated_clock", "FLOW_PATTERN_PERIOD", "flow_pattern", "matches_pattern",
           "flow_buffer", "register_flow_buffer", "collective_input", "collective_inputs",
           "collective_expected", "collective_bound", "CollectiveExpectation",
           "make_rate_controller", "cnp_interval_ns", "dcqcn_params", "rxe_ack_timeout_ns"]
