"""Data-path backends: selection, generated modules as files, and the daemon
running its data path on PyPy."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from switches.soft.backends import (
    BACKENDS,
    PYPY_DAEMON_JIT,
    backend_available,
    check_backend,
    interpreter,
    load_generated,
    write_generated,
)
from switches.soft.compiler import compile_program
from switches.soft.control.verbs import ControlPlane
from switches.soft.runtime.switch import SoftSwitch

ROOT = Path(__file__).resolve().parents[2]
L3 = ROOT / "switches" / "p4" / "l3_router.p4"
FRAME = bytes.fromhex(
    "000000000101" "000000000202" "0800"
    "4500001c0001000040110000" "0a000201" "0a000101"  # IPv4 (checksum 0: fixed below)
    "0001000200080000")
needs_pypy = pytest.mark.skipif(not backend_available("pypy"), reason="pypy3 not installed")


def _with_checksum(frame: bytes) -> bytes:
    from switches.soft.runtime.externs import csum16
    ip = bytearray(frame[14:34])
    ip[10:12] = csum16(bytes(ip)).to_bytes(2, "big")
    return frame[:14] + bytes(ip) + frame[34:]


def _route(sw: SoftSwitch) -> None:
    ControlPlane(sw).execute("table_add MyIngress.ipv4_lpm MyIngress.set_nhop 10.0.1.1/32 "
                       "=> 00:00:00:00:01:01 1")


def test_backend_names() -> None:
    assert BACKENDS[0] == "python" and "pypy" in BACKENDS
    assert check_backend("pypy") == "pypy"
    with pytest.raises(ValueError, match="python, pypy"):
        check_backend("cuda")
    assert interpreter("python") == sys.executable


def test_missing_pypy_is_reported(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("SOFTSWITCH_PYPY", raising=False)
    monkeypatch.setenv("PATH", "/nonexistent")
    assert not backend_available("pypy")
    with pytest.raises(FileNotFoundError, match="pypy3"):
        interpreter("pypy")


def test_generated_file_loads_and_forwards_like_the_compiled_module(tmp_path: Path) -> None:
    mod = compile_program(L3)
    path = write_generated(mod, str(tmp_path))
    assert write_generated(mod, str(tmp_path)) == path  # same source, same file
    loaded = load_generated(path)
    assert loaded.SOURCE == mod.SOURCE
    outs = []
    for m in (mod, loaded):
        sw = SoftSwitch(m)
        _route(sw)
        outs.append(sw.process_sync(2, _with_checksum(FRAME)))
    assert outs[0] == outs[1] and outs[0][0][0] == 1


@needs_pypy
def test_compat_gives_bisect_key_on_pypy() -> None:
    code = ("from switches.soft.backends import install_compat; install_compat(); "
            "import bisect; a = []\n"
            "for x in (5, 1, 3, 1): bisect.insort(a, x, key=lambda v: -v)\n"
            "print(a, list(zip((1, 2), (3, 4), strict=True)))")
    out = subprocess.run([interpreter("pypy"), "-c", code], capture_output=True, text=True,
                         cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)}, timeout=60)
    assert out.stdout.strip() == "[5, 3, 1, 1] [(1, 3), (2, 4)]", out.stderr


def _daemon(tmp_path: Path, *extra: str, env: dict[str, str] | None = None
            ) -> subprocess.Popen[str]:
    cmd = [sys.executable, "-m", "switches.soft.daemon", "--program", str(L3),
           "--control-port", "0", "--ready-file", str(tmp_path / "ready"),
           "--log", str(tmp_path / "log"), *extra]
    return subprocess.Popen(cmd, cwd=ROOT, text=True, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, env={**os.environ, **(env or {})})


def _ready(proc: subprocess.Popen[str], tmp_path: Path) -> dict[str, Any]:
    """The daemon's ready file, once it has written it (within a minute)."""
    deadline = time.monotonic() + 60
    while not (tmp_path / "ready").exists():
        assert proc.poll() is None, proc.communicate()
        assert time.monotonic() < deadline, "daemon not ready"
        time.sleep(0.05)
    info: dict[str, Any] = json.loads((tmp_path / "ready").read_text())
    return info


def test_daemon_exits_2_when_the_backend_cannot_run(tmp_path: Path) -> None:
    proc = _daemon(tmp_path, "--backend", "pypy",
                   env={"SOFTSWITCH_PYPY": str(tmp_path / "no-such-pypy")})
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 2
    assert "no-such-pypy" in err


@needs_pypy
def test_daemon_runs_its_data_path_on_pypy(tmp_path: Path) -> None:
    from switches.soft.control.client import SwitchClient

    proc = _daemon(tmp_path, "--backend", "pypy")
    try:
        info = _ready(proc, tmp_path)
        assert info["pid"] == proc.pid  # re-executed in place
        assert Path(f"/proc/{proc.pid}/exe").resolve().name.startswith("pypy")
        # with the JIT thresholds that keep compilations in the first seconds
        # (PyPy took them, or it would not have started)
        cmdline = Path(f"/proc/{proc.pid}/cmdline").read_bytes().split(b"\0")
        assert cmdline[1:3] == [b"--jit", PYPY_DAEMON_JIT.encode()]
        client = SwitchClient(info["control_port"])
        assert "Entry has been added" in client.execute(
            "table_add MyIngress.ipv4_lpm MyIngress.set_nhop 10.0.1.1/32 => 00:00:00:00:01:01 1")
        stats = json.loads(client.execute("switch_stats"))
        assert stats["switch"]["drops"] == {}
        client.close()
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.communicate(timeout=30)
    assert proc.returncode == 0
    assert "backend pypy" in (tmp_path / "log").read_text()


def test_daemon_profiles_its_data_path_when_asked(tmp_path: Path) -> None:
    """P4TB_SWITCH_PROFILE=DIR: the data path runs under cProfile and the
    profile is in DIR when the switch stops."""
    import pstats

    from switches.soft.daemon import PROFILE_ENV

    prof_dir = tmp_path / "prof"
    proc = _daemon(tmp_path, env={PROFILE_ENV: str(prof_dir)})
    try:
        _ready(proc, tmp_path)
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.communicate(timeout=30)
    assert proc.returncode == 0
    out = prof_dir / f"switch-{proc.pid}.pstats"
    funcs = {f[2] for f in pstats.Stats(str(out)).stats}   # type: ignore[attr-defined]
    assert "run" in funcs
