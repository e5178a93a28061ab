"""What this host has for rxe: pyverbs, rdma_rxe devices, their GIDs and counters.

Device discovery finds rxe devices in /sys/class/infiniband and reads each one's GID
table in one verbs query (sysfs's per-GID files, ports/<p>/{gids,gid_attrs}, where
pyverbs cannot): an rxe device (the one driver with a ``parent`` attribute: its netdev) with
a "RoCE v2" GID that is the IPv4-mapped address (::ffff:a.b.c.d) of the wanted
address or netdev. That GID's index is the ``sgid_index`` of every QP
(hosts.roce.rxe.qp_plans puts it in the address vector).

``rxe_unavailable_reason`` says why a context cannot be opened here (no pyverbs,
no device, no GID for the address) with the set-up that fixes it. The rxe UDP
socket and routes live in the initial network namespace (rxe_net.c uses
init_net), so Mininet hosts (one namespace each) cannot use rxe; the Vagrant VM
or a KVM/TCG guest with one rxe device per guest can (recent mainline adds
per-namespace rxe sockets, rxe_ns.c; not relied on here).

``import_pyverbs`` is the one place pyverbs is imported: the modules that build
pyverbs objects call it through this module at call time, so a test can stand a
fake in for it.
"""

from __future__ import annotations

import socket
from dataclasses import dataclass
from pathlib import Path

SYSFS_INFINIBAND = "/sys/class/infiniband"
NO_RXE_HINT = ("modprobe rdma_rxe; rdma link add rxe0 type rxe netdev {netdev}; "
               "note: rxe works only in the initial network namespace")


def ipv4_gid(ip: str) -> str:
    """The IPv4-mapped GID of ``ip`` as sysfs and pyverbs write it."""
    b = bytes(10) + b"\xff\xff" + socket.inet_aton(ip)
    return ":".join(b[i:i + 2].hex() for i in range(0, 16, 2))


def gid_ipv4(gid: str) -> str | None:
    """The IPv4 address of an IPv4-mapped GID, else None."""
    try:
        b = bytes.fromhex(gid.strip().replace(":", ""))
    except ValueError:
        return None
    if len(b) != 16 or b[:10] != bytes(10) or b[10:12] != b"\xff\xff":
        return None
    return socket.inet_ntoa(b[12:])



class RxeUnavailable(RuntimeError):
    """No usable rxe device (or no pyverbs); the message says what to do."""


@dataclass(frozen=True)
class RxeGid:
    index: int
    gid: str
    type: str               # "RoCE v2", "IB/RoCE v1"
    netdev: str | None
    ipv4: str | None


@dataclass(frozen=True)
class RxeDevice:
    name: str               # e.g. rxe0
    port: int
    netdev: str | None      # the parent netdev
    gid_index: int          # RoCE v2 IPv4-mapped GID used as sgid_index
    ipv4: str
    gids: tuple[RxeGid, ...] = ()


def _read(path: Path) -> str | None:
    try:
        return path.read_text().strip()
    except OSError:          # unused GID slots fail with EINVAL
        return None


def _is_rxe(dev: Path) -> bool:
    return (dev / "parent").is_file()      # rxe's own attribute: its netdev


GID_TYPE_NAMES = {0: "IB/RoCE v1", 1: "IB/RoCE v1", 2: "RoCE v2"}   # enum ibv_gid_type


def query_gid_table(device: str) -> list[tuple[int, RxeGid]] | None:
    """(port, gid) for every GID of ``device`` in one ibv_query_gid_table call, or
    None without pyverbs. sysfs has one file per GID slot (1024 for rxe) and a read
    of each: seconds on a real machine, about 100 s under an emulated CPU."""
    try:
        from pyverbs.device import Context as VerbsContext
    except ImportError:
        return None
    try:
        with VerbsContext(name=device) as vctx:
            ports = vctx.query_device().phys_port_cnt
            size = sum(vctx.query_port(p).gid_tbl_len for p in range(1, ports + 1))
            entries = vctx.query_gid_table(size)
    except Exception:           # pyverbs raises its own errors; sysfs is the fallback
        return None
    out = []
    for e in entries:
        text = e.gid_str()
        try:
            ndev: str | None = socket.if_indextoname(e.ndev_ifindex) if e.ndev_ifindex else None
        except OSError:
            ndev = None
        out.append((e.port_num, RxeGid(e.gid_index, text, GID_TYPE_NAMES.get(e.gid_type, ""),
                                       ndev, gid_ipv4(text))))
    return out


def scan_rxe_gids(sysfs_root: str = SYSFS_INFINIBAND) -> list[tuple[str, int, str | None, RxeGid]]:
    """(device, port, parent netdev, gid) for every non-zero GID of every rxe device.

    On the real sysfs the GIDs come from one verbs query per device (query_gid_table);
    the per-slot sysfs files are read only where that is not possible (and in tests,
    on a fake tree)."""
    out: list[tuple[str, int, str | None, RxeGid]] = []
    root = Path(sysfs_root)
    if not root.is_dir():
        return out
    for dev in sorted(root.iterdir()):
        if not _is_rxe(dev):
            continue
        parent = _read(dev / "parent")
        table = query_gid_table(dev.name) if sysfs_root == SYSFS_INFINIBAND else None
        if table is not None:
            out.extend((dev.name, port, parent, g) for port, g in table
                       if g.gid.replace(":", "").strip("0"))
            continue
        for port_dir in sorted((dev / "ports").glob("*")):
            if not port_dir.name.isdigit():
                continue
            gids = port_dir / "gids"
            for gfile in sorted(gids.glob("*"), key=lambda p: int(p.name) if p.name.isdigit()
                                else -1):
                if not gfile.name.isdigit():
                    continue
                text = _read(gfile)
                if not text or not text.replace(":", "").strip("0"):
                    continue
                i = int(gfile.name)
                attrs = port_dir / "gid_attrs"
                g = RxeGid(i, text, _read(attrs / "types" / str(i)) or "",
                           _read(attrs / "ndevs" / str(i)), gid_ipv4(text))
                out.append((dev.name, int(port_dir.name), parent, g))
    return out


def find_rxe_device(local_ip: str | None = None, netdev: str | None = None, *,
                    device: str | None = None,
                    sysfs_root: str = SYSFS_INFINIBAND) -> RxeDevice:
    """The rxe device and RoCE v2 GID for ``local_ip`` and/or ``netdev`` (first match
    if neither is given); RxeUnavailable with set-up instructions otherwise."""
    entries = scan_rxe_gids(sysfs_root)
    if device is not None:
        entries = [e for e in entries if e[0] == device]
    hint = NO_RXE_HINT.format(netdev=netdev or "eth0")
    if not entries:
        what = f" {device!r}" if device else ""
        raise RxeUnavailable(f"no rdma_rxe device{what}: {hint}")
    for name, port, parent, g in entries:
        if g.type != "RoCE v2" or g.ipv4 is None:
            continue
        if local_ip is not None and g.ipv4 != local_ip:
            continue
        if netdev is not None and netdev not in (g.netdev, parent):
            continue
        gids = tuple(e[3] for e in entries if e[0] == name and e[1] == port)
        return RxeDevice(name, port, parent, g.index, g.ipv4, gids)
    have: dict[str, list[str]] = {}
    for n, _, p, g in entries:
        ips = have.setdefault(f"{n} on {p}", [])
        if g.type == "RoCE v2" and g.ipv4 and g.ipv4 not in ips:
            ips.append(g.ipv4)
    found = "; ".join(f"{k}: {', '.join(v) or 'no IPv4 GID'}" for k, v in have.items())
    want = " ".join(x for x in (local_ip and f"address {local_ip}",
                                netdev and f"netdev {netdev}") if x)
    raise RxeUnavailable(f"no rdma_rxe device with a RoCE v2 IPv4 GID for {want or 'IPv4'} "
                         f"(found {found}): {hint}")


def read_hw_counters(dev: RxeDevice | None, sysfs_root: str = SYSFS_INFINIBAND) -> dict[str, int]:
    """The device port's hw_counters (rcvd_pkts, sent_pkts, retry_exceeded_err, ...)."""
    if dev is None:
        return {}
    out = {}
    for f in sorted((Path(sysfs_root) / dev.name / "ports" / str(dev.port) /
                     "hw_counters").glob("*")):
        v = _read(f)
        if v is not None and v.isdigit():
            out[f.name] = int(v)
    return out


def import_pyverbs():
    """The pyverbs modules (enums, addr, cq, device, mr, pd, qp, wr);
    RxeUnavailable, saying how to install it, where pyverbs is missing."""
    try:
        import pyverbs.enums as e
        from pyverbs import addr, cq, device, mr, pd, qp, wr
    except ImportError as ex:
        raise RxeUnavailable(f"pyverbs is not importable ({ex}): apt-get install "
                             "python3-pyverbs") from ex
    return e, addr, cq, device, mr, pd, qp, wr


def rxe_unavailable_reason(local_ip: str | None = None, netdev: str | None = None,
                           sysfs_root: str = SYSFS_INFINIBAND) -> str | None:
    """Why an RxeContext cannot be opened here (None: it can)."""
    try:
        import_pyverbs()
        find_rxe_device(local_ip, netdev, sysfs_root=sysfs_root)
    except RxeUnavailable as ex:
        return str(ex)
    return None

