"""What lets host agents run faster: the PyPy interpreter choice, the JIT
warm-up, early timer wake-ups, and byte views that PyPy can send from."""

from __future__ import annotations

import array
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from hosts.agent_spec import (
    AGENT_PYPY_ENV,
    CollectiveSpec,
    FlowSpec,
    JobSpec,
    SpecError,
    agent_interpreter,
)
from hosts.roce import Access, Context, Scale
from hosts.roce import udp_provider as udp
from hosts.roce.sim import SimWire
from hosts.roce.warmup import warm_up

REPO = Path(__file__).resolve().parents[2]


def _job(interpreter: str = "python", collective: bool = False) -> JobSpec:
    flows = () if collective else (FlowSpec("f", "sender", "10.0.0.3", 4096, 2),)
    coll = CollectiveSpec(rank=0, size=2) if collective else None
    return JobSpec(host="h1", ip="10.0.0.1", flows=flows, collective=coll,
                   interpreter=interpreter)


def test_interpreter_choice(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    fake = tmp_path / "pypy3"
    fake.write_text("")
    monkeypatch.setenv(AGENT_PYPY_ENV, str(fake))
    assert agent_interpreter(_job("python")) == sys.executable
    assert agent_interpreter(_job("pypy")) == str(fake)
    assert agent_interpreter(_job("auto")) == str(fake)
    # a collective needs numpy: auto keeps it on the runner's interpreter
    assert agent_interpreter(_job("auto", collective=True)) == sys.executable


def test_interpreter_missing_or_invalid(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(AGENT_PYPY_ENV, raising=False)
    monkeypatch.setattr(shutil, "which", lambda name: None)
    with pytest.raises(SpecError, match="needs pypy3"):
        agent_interpreter(_job("pypy"))
    assert agent_interpreter(_job("auto")) == sys.executable
    with pytest.raises(SpecError, match="interpreter 'jython'"):
        _job("jython")
    with pytest.raises(SpecError, match="needs numpy"):
        _job("pypy", collective=True)
    # the field round-trips through the saved spec
    assert JobSpec.from_json(_job("auto").to_json()).interpreter == "auto"


needs_pypy = pytest.mark.skipif(shutil.which("pypy3") is None, reason="pypy3 is not installed")


def _under_pypy(code: str) -> list[str]:
    """What ``code`` prints under pypy3 with the repository importable, split
    into words; the run must succeed."""
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    out = subprocess.run(["pypy3", "-c", code], capture_output=True, text=True, env=env,
                         cwd=REPO, timeout=120)
    assert out.returncode == 0, out.stderr
    return out.stdout.split()


@needs_pypy
def test_flow_agent_imports_under_pypy() -> None:
    """The agent, the udp provider and the warm-up load on PyPy (Python 3.9,
    no numpy), and the flow pattern is the same there as here."""
    from hosts.agent.patterns import flow_pattern

    spec = FlowSpec("f", "sender", "10.0.0.3", 1000, 3, seed=7)
    code = ("import hashlib, sys; import hosts.agent, hosts.roce.udp_provider, "
            "hosts.roce.warmup; from hosts.agent_spec import FlowSpec; from hosts.agent.patterns import flow_pattern; "
            "s = FlowSpec('f', 'sender', '10.0.0.3', 1000, 3, seed=7); "
            "print(hashlib.sha256(flow_pattern(s)).hexdigest(), 'numpy' in sys.modules)")
    digest, numpy_loaded = _under_pypy(code)
    import hashlib

    assert digest == hashlib.sha256(flow_pattern(spec)).hexdigest()
    assert numpy_loaded == "False"


@needs_pypy
def test_a_shaped_qp_sends_under_pypy() -> None:
    """A QP paced by its HTB class sends from a socket carrying the class as
    its packet priority; PyPy 3.9's socket module has no SO_PRIORITY, which
    once crashed every PyPy agent on a shaped host at its first packet."""
    code = ("import socket; from hosts.roce.udp_provider import UdpProvider, SO_PRIORITY; "
            "p = UdpProvider('127.0.0.1', port=0); r = socket.socket(socket.AF_INET, "
            "socket.SOCK_DGRAM); r.bind(('127.0.0.1', 0)); p.open_port(49152); "
            "ok = p.send(49152, '127.0.0.1', r.getsockname()[1], [b'x' * 64], 0, priority=5); "
            "s = p._tx_prio[(49152, 5)]; "
            "print(ok, s.getsockopt(socket.SOL_SOCKET, SO_PRIORITY), len(r.recv(2048)))")
    assert _under_pypy(code) == ["True", "5", "64"]


def test_warm_up_delivers_messages() -> None:
    done = warm_up(8192, 1024, packets=64, max_s=20.0)
    assert done["messages"] == 8        # 64 packets of 1024 B = 8 messages of 8 KiB
    assert done["packets"] >= 64


def test_wake_lead_tracks_the_overshoot_quantile() -> None:
    prov = udp.UdpProvider("127.0.0.1", port=0)
    try:
        prov.wake_lead_ns = 0
        # overshoots of 10 us and 50 us, one in ten at 50: the lead settles
        # between them (near the 90th percentile), never beyond its bound
        for i in range(20_000):
            prov._track_overshoot(50_000 if i % 10 == 0 else 10_000)
        assert 10_000 <= prov.wake_lead_ns <= 50_000
        for _ in range(10_000):
            prov._track_overshoot(10_000_000)
        assert prov.wake_lead_ns == udp.MAX_WAKE_LEAD_NS
        for _ in range(10_000):
            prov._track_overshoot(0)
        assert prov.wake_lead_ns == 0
    finally:
        prov.close()


def test_wait_returns_at_the_deadline_or_on_data() -> None:
    import time

    a = udp.UdpProvider("127.0.0.1", port=0)
    b = udp.UdpProvider("127.0.0.1", port=0)
    try:
        dl = time.monotonic_ns() + 2_000_000
        a.wait(dl)
        assert time.monotonic_ns() >= dl          # never returns early on a timeout
        b.open_port(50001)
        b.send(50001, "127.0.0.1", a.port, (b"x" * 40,), 0)
        t0 = time.monotonic_ns()
        a.wait(t0 + 10_000_000_000)               # returns on the datagram, not in 10 s
        assert a.recv(4)
    finally:
        a.close()
        b.close()


def test_mr_views_any_buffer_as_bytes() -> None:
    wire = SimWire()
    ctx = Context(wire.provider("10.0.0.1"), Scale())
    pd = ctx.alloc_pd()
    buf = bytearray(64)
    mr = pd.reg_mr(buf, Access.LOCAL_WRITE)
    mr.buf[3:5] = b"ab"
    assert buf[3:5] == b"ab" and mr.buf.format == "B"
    words = array.array("i", range(8))      # other item formats are still seen as bytes
    mr2 = pd.reg_mr(words, Access.LOCAL_WRITE)
    assert mr2.length == 32 and mr2.buf.format == "B"
    mr2.buf[0:4] = b"\x07\x00\x00\x00"
    assert words[0] == 7
