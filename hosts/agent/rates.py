"""The senders' rate controllers: DCQCN at the spec's scale (its parameters
from the spec's preset and overrides), or a fixed rate at the line rate.

Events:

- ``dcqcn`` (sender QP under DCQCN: every rate cut and every rate increase
  event, at the time the reaction point applied it: ``kind`` cut|increase,
  rc_bps, rt_bps, alpha; cuts also rc_before_bps and ``deferred`` (held to the
  end of a rate-reduce monitor period); increases also ``stage``
  fast_recovery|additive|hyper, ``source`` timer|bytes and both stage counters)
- ``cnp_rx`` (sender, each CNP, with the rate after it: LoggedRate)"""

from __future__ import annotations

from typing import Any

from hosts.agent.events import EventLog, now_ns
from hosts.agent_spec import JobSpec
from hosts.roce import Scale
from hosts.roce.dcqcn import DEFAULT_PRESET, Dcqcn, DcqcnEvent, DcqcnParams
from hosts.roce.rate import FixedRate, RateController


class LoggedRate:
    """A RateController that logs each CNP, then delegates."""

    def __init__(self, inner: RateController, log: EventLog, flow: str) -> None:
        self.inner = inner
        self.log = log
        self.flow = flow
        self.cnps = 0

    @property
    def rate_bps(self) -> float:
        return float(self.inner.rate_bps)

    def on_cnp(self, now: int) -> None:
        before = self.inner.rate_bps
        self.inner.on_cnp(now)
        self.cnps += 1
        self.log.emit("cnp_rx", t_ns=now, flow=self.flow, rate_before_bps=before,
                      rate_bps=self.inner.rate_bps)

    def on_bytes_sent(self, nbytes: int, now: int) -> None:
        self.inner.on_bytes_sent(nbytes, now)

    def bytes_to_increase(self) -> int | None:
        """The inner controller's (None for one without a byte counter)."""
        left = getattr(self.inner, "bytes_to_increase", None)
        return left() if callable(left) else None

    def next_deadline(self) -> int | None:
        d: int | None = self.inner.next_deadline()
        return d

    def on_timer(self, now: int) -> None:
        self.inner.on_timer(now)


def _dcqcn(spec: JobSpec, scale: Scale) -> DcqcnParams:
    d = spec.transport.dcqcn or {}
    return DcqcnParams.for_scale(scale, preset=d.get("preset", DEFAULT_PRESET),
                                 **dict(d.get("overrides", {})))


def make_rate_controller(spec: JobSpec, scale: Scale, log: EventLog | None = None,
                         flow: str = "") -> Dcqcn | FixedRate:
    """DCQCN for the spec's scale (its cuts and increases go to ``log`` as
    ``dcqcn`` events of ``flow``), or a fixed rate at the scale's line rate."""
    if spec.transport.dcqcn is None:
        return FixedRate(scale.line_rate_bps)
    trace = None
    if log is not None:
        def trace(ev: DcqcnEvent) -> None:
            log.emit("dcqcn", flow=flow, **ev)
    return Dcqcn(_dcqcn(spec, scale), now_ns(), on_event=trace)


def cnp_interval_ns(spec: JobSpec, scale: Scale) -> int:
    """The notification point's CNP interval: the spec's DCQCN preset's (the
    default preset's when DCQCN is off at the senders)."""
    return _dcqcn(spec, scale).cnp_interval_ns


def dcqcn_params(spec: JobSpec) -> dict[str, Any] | None:
    if spec.transport.dcqcn is None:
        return None
    return _dcqcn(spec, Scale(**spec.transport.scale)).as_dict()
