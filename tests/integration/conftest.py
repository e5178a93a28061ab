"""Shared fixtures of the integration tests (real packets through Mininet).

Tests marked ``root`` are skipped, with the reason, when not run as root or
without Mininet. Each of them must leave no daemon, node shell or veth.
"""

from __future__ import annotations

import os
import shutil
import time
from collections.abc import Iterator

import pytest


def network_skip_reason() -> str | None:
    if os.geteuid() != 0:
        return "needs root (network namespaces)"
    try:
        import mininet.net  # noqa: F401
    except ImportError:
        return "Mininet is not installed"
    if shutil.which("mnexec") is None:
        return "Mininet's mnexec is not on PATH"
    return None


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    reason = network_skip_reason()
    if reason is None:
        return
    for item in items:
        if item.get_closest_marker("root"):
            item.add_marker(pytest.mark.skip(reason=reason))


@pytest.fixture
def no_leftovers(request: pytest.FixtureRequest) -> Iterator[None]:
    """Fails the test if it leaves daemons, node shells or interfaces behind."""
    from testbed.net import leftovers

    before = leftovers()
    if before:
        pytest.fail(f"leftovers from before this test: {before}")
    yield
    left = []
    for _ in range(20):  # the kernel removes veths and reaps asynchronously
        left = leftovers()
        if not left:
            return
        time.sleep(0.1)
    from mininet.clean import cleanup

    cleanup()
    pytest.fail(f"the test left: {left}")


