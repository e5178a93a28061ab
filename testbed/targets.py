"""What this machine can run: the switch targets and the host providers.

    available_targets()     # {"soft": Availability(...), "bmv2": ...}
    available_providers()   # {"udp": ..., "rxe": ...}

Both feed ``testbed doctor``. The targets themselves (and whether each can run
here) are :mod:`switches.targets`'. The udp provider is always there; rxe needs
an rdma_rxe device and pyverbs.
"""

from __future__ import annotations

from pathlib import Path

from switches.targets import Availability, available_targets

PROVIDERS = ("udp", "rxe")
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
    try:    # here: a provider that does not import is reported, not fatal
        from hosts.roce.rxe.device import rxe_unavailable_reason
    except ImportError as e:
        why: str | None = f"the rxe provider does not import: {e}"
    else:
        why = rxe_unavailable_reason(sysfs_root=sysfs_root)
    return {"udp": Availability("udp", True),
            "rxe": Availability("rxe", why is None, why or "",
                                {"devices": ",".join(rxe)} if rxe else {})}


__all__ = ["PROVIDERS", "available_providers", "available_targets", "rxe_devices"]
