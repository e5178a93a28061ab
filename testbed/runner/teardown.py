"""A Mininet teardown that hangs: a watchdog that cuts it, and what is left
removed by hand."""

from __future__ import annotations

import signal
from collections.abc import Iterator
from contextlib import contextmanager
from types import FrameType
from typing import TYPE_CHECKING

from ground.netlink import NetlinkError, delete_link

if TYPE_CHECKING:
    from mininet.net import Mininet


class _TeardownTimeout(Exception):
    """The teardown ran past its time (raised by the watchdog's SIGALRM)."""


@contextmanager
def _teardown_watchdog() -> Iterator[None]:
    """SIGALRM (armed when the run leaves the network's block) raises
    _TeardownTimeout, so a hung teardown cannot hang the run."""
    def handler(_signum: int, _frame: FrameType | None) -> None:
        raise _TeardownTimeout()

    try:
        old = signal.signal(signal.SIGALRM, handler)
    except ValueError:  # not the main thread: no watchdog
        yield
        return
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)


def _force_teardown(net: Mininet) -> list[str]:
    """Stop the switch daemons, kill the node shells, delete the run's veths."""
    done = []
    for node in [*net.switches, *net.hosts]:
        stop = getattr(node, "stop_daemon", None)     # a switches.node.P4SwitchNode
        if callable(stop) and getattr(node, "proc", None) is not None:
            stop()
            done.append(f"{node.name} daemon")
        shell = getattr(node, "shell", None)
        if shell is not None and shell.poll() is None:
            shell.kill()
            done.append(f"{node.name} shell")
        if shell is not None:
            shell.wait()
    for node in net.switches:
        for intf in node.intfList():
            try:
                if intf.name != "lo" and delete_link(intf.name):
                    done.append(intf.name)
            except NetlinkError as e:
                done.append(f"not {intf.name} ({e})")
    return done
