"""Switch targets and host providers this machine can run.

    cls = switch_class("bmv2")      # BMv2Switch, or TargetUnavailable saying why
    net.addSwitch("s1", cls=cls, program="switches/p4/l3_router.p4")

``available_targets()`` and ``available_providers()`` feed ``testbed doctor``.
The soft target is always there; BMv2 needs simple_switch_grpc,
simple_switch_CLI and a P4 compiler for it (p4c, or p4c-bm2-ss) on PATH.
The udp provider is always there; rxe needs an rdma_rxe device and pyverbs.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

TARGETS = ("soft", "bmv2")
PROVIDERS = ("udp", "rxe")
BMV2_TOOLS = ("simple_switch_grpc", "simple_switch_CLI", "p4c")
BMV2_HINT = ("BMv2 runs in the Vagrant VM (vagrant up), or install p4lang's packages "
             "p4lang-bmv2 and p4lang-p4c")


class TargetUnavailable(RuntimeError):
    """The requested target or provider cannot run on this machine."""


@dataclass
class Availability:
    """Whether a target or provider can run here, and why not."""

    name: str
    available: bool
    reason: str = ""  # what is missing, when not available
    versions: dict[str, str] = field(default_factory=dict)  # tool -> version or path


def tool_version(exe: str, timeout: float = 5.0) -> str:
    """The first line of ``exe --version`` mentioning a version, else its path."""
    path = shutil.which(exe)
    if path is None:
        return ""
    try:
        p = subprocess.run([path, "--version"], capture_output=True, text=True,
                           timeout=timeout, stdin=subprocess.DEVNULL)
        for line in (p.stdout + p.stderr).splitlines():
            if re.search(r"\d+\.\d+", line):
                return line.strip()
    except (OSError, subprocess.SubprocessError):
        pass
    return path


def _bmv2() -> Availability:
    found = {t: shutil.which(t) for t in BMV2_TOOLS}
    if found["p4c"] is None and shutil.which("p4c-bm2-ss") is not None:
        found["p4c"] = shutil.which("p4c-bm2-ss")
    missing = [t for t, p in found.items() if p is None]
    if missing:
        return Availability("bmv2", False, f"{', '.join(missing)} not on PATH: {BMV2_HINT}")
    versions = {t: (tool_version(t) if t != "simple_switch_CLI" else str(p))
                for t, p in found.items() if p is not None}
    if not shutil.which("p4c"):
        versions["p4c"] = tool_version("p4c-bm2-ss")
    return Availability("bmv2", True, versions=versions)


def available_targets() -> dict[str, Availability]:
    """Every switch target, available or not (with the reason)."""
    return {"soft": Availability("soft", True, versions={"soft": "built in"}),
            "bmv2": _bmv2()}


SYSFS_INFINIBAND = "/sys/class/infiniband"


def rxe_devices(sysfs_root: str = SYSFS_INFINIBAND) -> list[str]:
    """RDMA devices of the rdma_rxe (soft RoCE) driver: the ones with a
    ``parent`` attribute (their netdev)."""
    root = Path(sysfs_root)
    if not root.is_dir():
        return []
    return sorted(d.name for d in root.iterdir() if (d / "parent").is_file())


def available_providers(sysfs_root: str = SYSFS_INFINIBAND) -> dict[str, Availability]:
    """Every host RoCE provider, available or not (with the reason). rxe's
    verdict is the rxe provider's own (a RoCE v2 IPv4 GID and pyverbs)."""
    rxe = rxe_devices(sysfs_root)
    try:
        from hosts.roce.rxe_provider import rxe_unavailable_reason
    except ImportError as e:
        why: str | None = f"the rxe provider does not import: {e}"
    else:
        why = rxe_unavailable_reason(sysfs_root=sysfs_root)
    return {"udp": Availability("udp", True),
            "rxe": Availability("rxe", why is None, why or "",
                                {"devices": ",".join(rxe)} if rxe else {})}


def switch_class(target: str) -> type:
    """The Mininet switch class of ``target`` ("soft" or "bmv2"); raises
    TargetUnavailable (with what is missing) when it cannot run here."""
    if target == "soft":
        from switches.soft.node import SoftP4Switch

        return SoftP4Switch
    if target == "bmv2":
        avail = _bmv2()
        if not avail.available:
            raise TargetUnavailable(f"target bmv2: {avail.reason}")
        from switches.bmv2.node import BMv2Switch

        return BMv2Switch
    raise TargetUnavailable(f"unknown target {target!r} (choose from {', '.join(TARGETS)})")


__all__ = ["Availability", "PROVIDERS", "TARGETS", "TargetUnavailable", "available_providers",
           "available_targets", "rxe_devices", "switch_class", "tool_version"]
