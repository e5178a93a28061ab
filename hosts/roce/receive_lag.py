"""How long a host's received frames waited before its agent read them.

A NIC handles each frame as it arrives: it ACKs, and its notification point
sends a CNP, within a microsecond or so. A host agent reads its socket when it
gets the CPU, and a frame that waits there delays the ACK or CNP it causes:
the modelled network's congestion feedback arrives late (a starved receiver
also stalls its senders' windows, which then release all at once).

The udp provider reads the kernel's receive timestamp (``SO_TIMESTAMPNS``) of
the first frame of every batch it reads, the oldest one waiting, which costs
one ``recvmsg`` per batch (the kernel stamps frames for every socket once
one asks, after a short deferred step: frames before that are stamped when
read, age 0; an agent's setup outlasts it). From those it keeps:

- ``behind_ns``: how long the oldest unread frame was older than
  ``threshold_ns``. Between two reads at t0 and t1 whose second batch's
  oldest frame arrived at ts, the oldest unread frame was that one from
  max(t0, ts) on, so the time it was older than X is
  max(0, min(t1 - t0, (t1 - ts) - X)); these intervals do not overlap, so
  they add up to time (a backlogged receiver reads batch after batch of old
  frames, each of which counts only its own interval);
- the ages in powers-of-two buckets of nanoseconds (count and sum), the
  largest and when it was read, for the distribution.

The threshold is ``FEEDBACK_US`` of the modelled network's time (the DCQCN
notification point's 50 us between CNPs, Zhu et al. 2015: a CNP or ACK held
longer reaches its sender a feedback interval late), times the run's slowdown
(:func:`threshold_ns`). The fidelity verdict limits ``behind_ns`` as a share
of the time the agent ran (``host_receive_lag``, testbed.fidelity).
"""

from __future__ import annotations

from typing import Any

__all__ = ["ReceiveLag", "FEEDBACK_US", "threshold_ns"]

FEEDBACK_US = 50.0
_BUCKETS = 64


def threshold_ns(slowdown: float) -> int:
    """``FEEDBACK_US`` of the modelled network in wall-clock ns."""
    return round(FEEDBACK_US * 1000.0 * slowdown)


class ReceiveLag:
    """Ages (ns) of the oldest frame of each batch read, and the time behind."""

    def __init__(self) -> None:
        self.reset(0, 0)

    def reset(self, now_ns: int, behind_threshold_ns: int) -> None:
        """Start counting afresh: the agent's measured part begins at ``now_ns``."""
        self.threshold_ns = behind_threshold_ns
        self.start_ns = now_ns
        self.last_ns = now_ns           # the last read that returned frames
        self.behind_ns = 0
        self.batches = 0
        self.max_ns = 0
        self.max_at_ns = 0
        self.count = [0] * _BUCKETS
        self.sum_ns = [0] * _BUCKETS

    def record(self, age_ns: int, now_ns: int) -> None:
        """A batch read at ``now_ns`` (monotonic) whose first frame was ``age_ns`` old."""
        if age_ns < 0:      # the wall clock stepped back
            age_ns = 0
        over = min(now_ns - self.last_ns, age_ns - self.threshold_ns)
        if over > 0:
            self.behind_ns += over
        self.last_ns = now_ns
        b = age_ns.bit_length()
        self.count[b] += 1
        self.sum_ns[b] += age_ns
        self.batches += 1
        if age_ns > self.max_ns:
            self.max_ns = age_ns
            self.max_at_ns = now_ns

    def as_dict(self, now_ns: int) -> dict[str, Any]:
        return {"batches": self.batches, "span_ns": max(0, now_ns - self.start_ns),
                "threshold_ns": self.threshold_ns, "behind_ns": self.behind_ns,
                "max_ns": self.max_ns,
                "max_at_ns": self.max_at_ns,     # when that batch was read (monotonic)
                "mean_ns": round(sum(self.sum_ns) / self.batches) if self.batches else 0,
                # bit length -> [batches, sum of their ages in ns]
                "buckets": {str(b): [c, self.sum_ns[b]] for b, c in enumerate(self.count)
                            if c}}
