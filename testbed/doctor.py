"""What this machine offers to the testbed (``testbed doctor``), for the CLI
and for the runner's checks before a run."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from typing import TypedDict

__all__ = ["doctor_report", "DoctorReport", "TargetDetail", "ProviderDetail"]


class TargetDetail(TypedDict):
    available: bool
    reason: str                 # what is missing, when not available
    versions: dict[str, str]    # tool -> version or path


class ProviderDetail(TypedDict):
    available: bool
    reason: str
    devices: str                # rxe's devices, comma-separated


class DoctorReport(TypedDict):
    """:func:`doctor_report` (``testbed doctor --json``)."""
    targets: dict[str, bool]
    targets_detail: dict[str, TargetDetail]
    providers: dict[str, bool]
    providers_detail: dict[str, ProviderDetail]
    rxe_hosts: bool             # Mininet hosts with rdma_rxe devices (testbed.rxe_host)
    rxe_hosts_reason: str
    mininet: bool
    root: bool
    can_run_network: bool
    engines: dict[str, bool]    # testbed run --engine
    ns3: bool
    p4runtime: bool
    p4runtime_shell: bool
    tools: dict[str, bool]
    python: str


def _importable(*modules: str) -> bool:
    import importlib

    try:
        for m in modules:
            importlib.import_module(m)
    except Exception:  # an extra with broken pins fails with more than ImportError
        return False
    return True


def doctor_report() -> DoctorReport:
    """What this machine offers to the testbed (targets, host providers, tools).

    ``targets``/``providers`` map names to booleans; ``*_detail`` add the
    reason a target or provider is missing and the tool versions found."""
    from testbed.targets import available_providers, available_targets

    try:
        import mininet.net  # noqa: F401

        mininet_ok = shutil.which("mnexec") is not None
    except ImportError:
        mininet_ok = False
    tools = {t: shutil.which(t) is not None for t in
             ("simple_switch_grpc", "simple_switch_CLI", "simple_switch", "p4c", "p4c-bm2-ss",
              "iperf3", "tshark", "ethtool", "ping")}
    root = os.geteuid() == 0
    targets = available_targets()
    providers = available_providers()
    try:
        from testbed.rxe_host import rxe_in_mininet_reason

        rxe_hosts_why = rxe_in_mininet_reason()
    except ImportError as e:           # no Mininet
        rxe_hosts_why = f"testbed.rxe_host does not import: {e}"
    return {
        "targets": {n: a.available for n, a in targets.items()},
        "targets_detail": {n: {"available": a.available, "reason": a.reason,
                               "versions": a.versions} for n, a in targets.items()},
        "providers": {n: a.available for n, a in providers.items()},
        "providers_detail": {n: {"available": a.available, "reason": a.reason,
                                 "devices": a.versions.get("devices", "")}
                             for n, a in providers.items()},
        # Mininet hosts in the initial namespace with an rdma_rxe device each
        # (testbed.rxe_host); rxe needs no pre-made device for them.
        "rxe_hosts": rxe_hosts_why is None,
        "rxe_hosts_reason": rxe_hosts_why or "",
        "mininet": mininet_ok,
        "root": root,
        "can_run_network": mininet_ok and root,
        # the engines (testbed run --engine): virtual time needs nothing more
        "engines": {"mininet": mininet_ok and root, "sim": True},
        "ns3": _importable_spec("ns"),      # testbed bench sim's reference figure
        "p4runtime": _importable("grpc", "google.protobuf", "p4.v1.p4runtime_pb2",
                                 "p4.config.v1.p4info_pb2"),
        # setup.sh keeps p4runtime-shell in an environment of its own (old pins)
        "p4runtime_shell": _importable("p4runtime_sh") or _shell_venv_has_p4runtime_sh(),
        "tools": tools,
        "python": sys.version.split()[0],
    }


def _importable_spec(name: str) -> bool:
    """Whether ``name`` is installed, without importing it (ns-3's bindings
    take seconds to load)."""
    import importlib.util

    return importlib.util.find_spec(name) is not None


def _shell_venv_has_p4runtime_sh() -> bool:
    from testbed.net import REPO_ROOT

    py = REPO_ROOT / ".venv-p4runtime-shell" / "bin" / "python"
    if not py.exists():
        return False
    try:
        r = subprocess.run([str(py), "-c", "import p4runtime_sh"], capture_output=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return False
    return r.returncode == 0
