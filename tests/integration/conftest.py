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
    """Fails the test if it leaves daemons, node shells or interfaces behind.
    What it left is then removed through the testbed's own records
    (testbed.owned): things that existed before the test are not its own."""
    from testbed.net import leftovers
    from testbed.owned import record_files, remove_recorded, this_process_record

    before = set(leftovers())
    records_before = set(record_files()) - {this_process_record().path}
    yield
    left: list[str] = []
    for _ in range(20):  # the kernel removes veths and reaps asynchronously
        left = [x for x in leftovers() if x not in before]
        if not left:
            return
        time.sleep(0.1)
    mine = [p for p in record_files() if p not in records_before]
    done = remove_recorded(mine, include_live_owners=True)
    pytest.fail(f"the test left: {left}; removed from its records: "
                f"{done.stopped + done.deleted}")
