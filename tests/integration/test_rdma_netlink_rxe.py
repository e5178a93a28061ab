"""testbed.rdma_netlink against a kernel with rdma_rxe: an rxe device made on a veth
end through NETLINK_RDMA appears in the device list bound to that netdev, goes
away when deleted, and a missing netdev is refused with the typed error naming
it. Skips where rdma_rxe cannot be loaded (this machine); the guest VM runs it
(vm/guest-tests.sh). Makes a veth: run under the net lock.
"""

from __future__ import annotations

import errno
import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from ground.netlink import add_veth, delete_link, link_names, set_link_up
from testbed.rdma_netlink import RdmaNetlinkError, add_rxe_link, devices
from testbed.rdma_netlink import delete_link as delete_rdma_link


def _rxe_reason() -> str | None:
    if os.geteuid() != 0:
        return "needs root (a veth, RDMA links)"
    if Path("/sys/module/rdma_rxe").exists():
        return None
    modprobe = shutil.which("modprobe") or "/usr/sbin/modprobe"
    if not Path(modprobe).exists():
        return "no rdma_rxe loaded and no modprobe (the guest VM has both)"
    r = subprocess.run([modprobe, "rdma_rxe"], capture_output=True, text=True)
    if r.returncode != 0:
        return f"no rdma_rxe kernel module here (the guest VM has it): {r.stderr.strip()}"
    return None


@pytest.fixture
def rxe_kernel() -> None:
    reason = _rxe_reason()
    if reason is not None:
        pytest.skip(reason)


@pytest.fixture
def veth_end(rxe_kernel: None) -> Iterator[str]:
    tag = os.getpid() % 100000
    name, peer = f"p4tb-rna{tag}", f"p4tb-rnb{tag}"
    add_veth(name, peer)
    try:
        set_link_up(name)
        set_link_up(peer)
        yield name
    finally:
        delete_link(name)
    assert name not in link_names()


@pytest.mark.root
def test_an_rxe_link_is_added_listed_and_deleted_through_netlink(veth_end: str) -> None:
    dev = f"rxnl{os.getpid() % 100000}"
    assert dev not in devices()
    add_rxe_link(dev, veth_end)
    try:
        listed = devices()
        found = listed[dev]
        assert found.netdev == veth_end, found
        assert found.ports == 1
        # indexes start at 0 and are the kernel's handle for DELLINK: one per device
        assert [d.index for d in listed.values()].count(found.index) == 1, listed
        # pyverbs and the rxe provider see the same device
        assert Path(f"/sys/class/infiniband/{dev}/parent").read_text().strip() == veth_end
    finally:
        deleted = delete_rdma_link(dev)
    assert deleted is True
    assert dev not in devices()
    assert not Path(f"/sys/class/infiniband/{dev}").exists()
    assert delete_rdma_link(dev) is False      # nothing to delete is not an error


@pytest.mark.root
def test_adding_on_a_missing_netdev_is_the_typed_error_naming_it(rxe_kernel: None) -> None:
    dev, missing = f"rxnm{os.getpid() % 100000}", "p4tb-nosuch0"
    assert missing not in link_names()
    with pytest.raises(RdmaNetlinkError) as ex:
        add_rxe_link(dev, missing)
    assert str(ex.value) == f"rdma link add {dev} type rxe netdev {missing}: No such device"
    assert (ex.value.code, ex.value.device, ex.value.netdev) == (errno.ENODEV, dev, missing)
    assert dev not in devices()
