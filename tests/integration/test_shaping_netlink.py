"""A QP class's rate changes through the hand-built rtnetlink message
(hosts.roce.shaping.HtbClassSetter) leave the kernel's HTB class as pyroute2's
full encoder does. Runs in a network namespace of its own (``unshare -n``):
nothing outside it is touched."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.root

REPO = Path(__file__).resolve().parents[2]

_SCRIPT = r"""
import json, subprocess, sys
sys.path.insert(0, sys.argv[1])
from hosts.roce.shaping import (ROOT_CLASS, HtbShaper, ShapingError, htb_rate_bytes,
                                tc_commands)
subprocess.run("ip link add a0 type veth peer name b0 && ip link set a0 up", shell=True,
               check=True)
for c in tc_commands("a0", 40e6, 2164):
    subprocess.run(c, shell=True, check=True)
sh = HtbShaper("a0", 40e6, 2164, own_root=False)
cid = sh.new_qp_class(40e6).class_id

def parms():
    for m in sh._ipr.get_classes(index=sh.index):
        if m["handle"] == cid:
            o = m.get_attr("TCA_OPTIONS").get_attr("TCA_HTB_PARMS")
            return {k: o[k] for k in ("rate", "ceil", "buffer", "cbuffer", "quantum", "prio")}

out = []
for bps in (13.3e6, 40e6, 2.5e6, 1e5, 80e6):
    b = htb_rate_bytes(bps)
    sh._class("change-class", cid, min(b, sh.line), parent=ROOT_CLASS, rate_bytes=16)
    by_pyroute2 = parms()
    sh.set_rate(cid, b + 800)           # elsewhere first, so the next change is seen
    sh.set_rate(cid, b)
    out.append({"bps": bps, "pyroute2": by_pyroute2, "raw": parms()})
try:
    sh._setter.set(0x10077, ROOT_CLASS, 16, 1000)
    error = ""
except ShapingError as e:
    error = str(e)
sh.close()
print(json.dumps({"changes": out, "error": error}))
"""


def test_rate_change_matches_pyroute2(tmp_path: Path) -> None:
    if shutil.which("unshare") is None or shutil.which("tc") is None:
        pytest.skip("needs unshare and tc (util-linux, iproute2)")
    script = tmp_path / "htb_change.py"
    script.write_text(_SCRIPT)
    res = subprocess.run(["unshare", "-n", sys.executable, str(script), str(REPO)],
                         capture_output=True, text=True, timeout=60)
    assert res.returncode == 0, res.stderr
    got = json.loads(res.stdout.strip().splitlines()[-1])
    for c in got["changes"]:
        old, new = c["pyroute2"], c["raw"]
        # the ceiling is the QP's rate, capped at the line (40 Mb/s); the rate is HTB's floor
        assert new["ceil"] == min(round(c["bps"] / 8), 5_000_000), c
        assert new["rate"] == old["rate"] == 16
        assert new["quantum"] == old["quantum"] and new["prio"] == old["prio"]
        assert new["buffer"] == old["buffer"]
        # the burst's time at the ceiling in 64 ns ticks; pyroute2 first truncates
        # that time to whole microseconds (less than 15.625 ticks)
        assert 0 <= new["cbuffer"] - old["cbuffer"] < 16, c
    assert "htb class 1:77" in got["error"] and "ENOENT" in got["error"]
