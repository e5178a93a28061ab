"""What the transport engine needs from a packet I/O provider (udp, sim)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol, Union

# One received datagram: the whole IPv4 packet (IPv4 header, UDP header, RoCE
# packet) exactly as it arrived. The ICRC covers the IPv4 identification and flags,
# which a NIC sets as it likes, so the receiver needs the header it was sent with.
# (typing.Union: the alias is evaluated at import, and agents also run on
# PyPy, Python 3.9, where `X | Y` of types does not exist.)
Datagram = Union[bytes, bytearray, memoryview]  # noqa: UP007

# The most a provider's ``wait`` ends early to poll for an exact deadline.
# A wait for a timer that ends within this of an exact deadline is exact too
# (hosts.roce.verbs.wait_exactly): the timer's plain sleep may overshoot by
# tens of us, which must not make the send due just after it late.
MAX_WAKE_LEAD_NS = 200_000


class Provider(Protocol):
    local_ip: str

    def now_ns(self) -> int:
        """CLOCK_MONOTONIC (or the simulated clock), ns."""
        ...

    def open_port(self, sport: int) -> None:
        """A QP starts sending from UDP source port ``sport`` (reference counted)."""
        ...

    def close_port(self, sport: int) -> None:
        ...

    def send(self, sport: int, dst_ip: str, dst_port: int,
             parts: Sequence[bytes | memoryview], ecn: int, dscp: int = 0,
             priority: int = 0) -> bool:
        """Send the concatenation of ``parts`` as one datagram with IP ECN bits
        ``ecn`` and DSCP ``dscp``, and (non-zero) the kernel's packet priority
        ``priority``, which picks the QP's HTB class on a shaped host
        (hosts/roce/shaping.py); False if it was dropped locally (socket
        buffer full)."""
        ...

    def recv(self, max_pkts: int) -> list[Datagram]:
        """IPv4 packets to the local RoCE port received so far (nonblocking), at most
        ``max_pkts``, each with its IPv4 and UDP headers as they arrived."""
        ...

    def wait(self, deadline_ns: int | None, exact: bool = True) -> None:
        """Block until a datagram may be readable or ``deadline_ns`` (None:
        forever). ``exact``: the deadline is a paced send, to be met as closely
        as the provider can; otherwise a timer that may run late."""
        ...

    def close(self) -> None:
        ...
