"""The soft switch with its data path on PyPy (``--backend pypy``) forwards real
traffic like the default backend: same routing, same control plane."""

from __future__ import annotations

from pathlib import Path

import pytest

from switches.soft.backends import backend_available
from testbed.net import P4_DIR, running, star_router

from .helpers import host_result, host_run, host_start

pytestmark = [
    pytest.mark.root,
    pytest.mark.usefixtures("no_leftovers"),
    pytest.mark.skipif(not backend_available("pypy"), reason="pypy3 is not installed"),
]


def test_pypy_backend_routes_tcp_and_answers_control(tmp_path: Path) -> None:
    net, sw, (h1, h2), (_a1, a2) = star_router(2, P4_DIR / "l3_router.p4", log_dir=tmp_path,
                                               backend="pypy")
    with running(net):
        # The daemon re-executed itself under PyPy (same pid as the node started).
        exe = Path(f"/proc/{sw.pid_of_daemon}/exe").resolve().name
        assert exe.startswith("pypy"), exe
        ping = h1.cmd(f"ping -c 3 -i 0.2 -W 2 {a2.ip}")
        assert " 0% packet loss" in ping and "ttl=63" in ping, ping
        sink = host_start(h2, "tcp-sink", 5001)
        try:
            sent = host_run(h1, "tcp-source", a2.ip, 5001, 2_000_000)
            got = host_result(sink)
        finally:
            sink.kill()
            sink.wait()
        assert got == {"bytes": 2_000_000, "sha256": sent["sha256"]}
        assert "0a000201/32" in sw.cmd_cli("table_dump MyIngress.ipv4_lpm")
        stats = sw.stats()
        assert stats["ports"]["2"]["tx_frames"] > 1000
        assert stats["switch"]["drops"].get("exception", 0) == 0
    assert "backend pypy" in (tmp_path / "s1.log").read_text()
