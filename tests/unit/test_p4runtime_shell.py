"""p4runtime-shell (its own virtualenv, pointed at by P4RUNTIME_SH_VENV)
pushes the router program to the soft switch's P4Runtime server and installs
an L3 route; the switch then forwards by it."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("p4.v1.p4runtime_pb2", reason="P4Runtime tests need the optional "
                    "'p4runtime' extra (pip install -e '.[p4runtime]')")

from test_p4runtime_support import L3_ROUTER, Rig, ipv4_frame  # noqa: E402

from switches.soft.p4info import write_program_p4info  # noqa: E402

# setup.sh builds this isolated environment (p4runtime-shell pins old
# protobuf/ipython versions that must not enter the project's own .venv).
DEFAULT_VENV = Path(__file__).resolve().parents[2] / ".venv-p4runtime-shell"
VENV = os.environ.get("P4RUNTIME_SH_VENV", "") or (str(DEFAULT_VENV) if DEFAULT_VENV.exists() else "")

SCRIPT = r'''
import sys

import p4runtime_sh.shell as sh

addr, p4info, device_config = sys.argv[1:4]
sh.setup(device_id=1, grpc_addr=addr, election_id=(0, 1),
         config=sh.FwdPipeConfig(p4info, device_config), verbose=False)
te = sh.TableEntry("MyIngress.ipv4_lpm")(action="MyIngress.set_nhop")
te.match["hdr.ipv4.dstAddr"] = "10.0.1.0/24"
te.action["dmac"] = "00:00:00:00:01:01"
te.action["port"] = "2"
te.insert()
print("COUNT", sum(1 for _ in sh.TableEntry("MyIngress.ipv4_lpm").read()))
try:
    te.insert()
except Exception as exc:
    print("DUPLICATE", exc)
sh.teardown()
'''


def _python() -> Path:
    return Path(VENV) / ("Scripts" if sys.platform == "win32" else "bin") / "python"


@pytest.mark.skipif(not VENV or not _python().exists(),
                    reason="no p4runtime-shell environment: run ./setup.sh (it builds "
                           ".venv-p4runtime-shell) or set P4RUNTIME_SH_VENV")
def test_p4runtime_shell_sets_pipeline_and_installs_route(tmp_path: Path) -> None:
    rig = Rig(L3_ROUTER)
    try:
        p4info = tmp_path / "l3_router.p4info.txt"
        write_program_p4info(L3_ROUTER, p4info)
        script = tmp_path / "shell_l3.py"
        script.write_text(SCRIPT)
        # device config = the program's P4 source, compiled by the switch
        proc = subprocess.run([str(_python()), str(script), rig.handle.address, str(p4info),
                               str(L3_ROUTER)], capture_output=True, text=True, timeout=120)
        assert proc.returncode == 0, proc.stderr
        assert "COUNT 1" in proc.stdout
        assert "ALREADY_EXISTS" in proc.stdout
        assert [p for p, _ in rig.send(1, ipv4_frame("10.0.1.7"))] == [2]
    finally:
        rig.close()
