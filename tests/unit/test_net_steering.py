"""Receive steering (testbed.net.keep_links_in_order): every switch port and
host interface hands its frames to one CPU's backlog, the interfaces taking
the CPUs in turn; root-namespace nodes through sysfs, namespaced hosts from
their own shells; failures name the node."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import pytest

from testbed.net import keep_links_in_order, rps_mask


@dataclass
class _Intf:
    name: str


@dataclass
class _Node:
    name: str
    intfs: list[str]
    inNamespace: bool   # noqa: N815 (Mininet's attribute)
    reply: str = "rc=0"
    commands: list[str] = field(default_factory=list)

    def intfList(self) -> list[_Intf]:   # noqa: N802 (Mininet's method)
        return [_Intf(n) for n in self.intfs]

    def cmd(self, command: str) -> str:
        self.commands.append(command)
        return self.reply


@dataclass
class _Net:
    switches: list[_Node]
    hosts: list[_Node]


def _sysfs(root: Path, names: list[str], queues: int = 1) -> Path:
    for n in names:
        for q in range(queues):
            d = root / n / "queues" / f"rx-{q}"
            d.mkdir(parents=True)
            (d / "rps_cpus").write_text("0\n")
    return root


def test_rps_mask_covers_the_cpus_in_words_of_32() -> None:
    assert rps_mask([0, 1]) == "3"
    assert rps_mask([1]) == "2"
    assert rps_mask(range(8)) == "ff"
    assert rps_mask([0, 33]) == "2,00000001"
    with pytest.raises(ValueError, match="no CPU"):
        rps_mask([])
    with pytest.raises(ValueError, match=">= 0"):
        rps_mask([-1])


def test_each_interface_gets_one_cpu_in_turn(tmp_path: Path) -> None:
    sysfs = _sysfs(tmp_path, ["s1-eth1", "s1-eth2", "s1-eth3"], queues=2)
    s1 = _Node("s1", ["lo", "s1-eth1", "s1-eth2", "s1-eth3"], inNamespace=False)
    h1 = _Node("h1", ["h1-eth0"], inNamespace=True)
    h2 = _Node("h2", ["h2-eth0"], inNamespace=True)
    done = keep_links_in_order(_Net([s1], [h1, h2]), cpus=[0, 1], sysfs=sysfs)
    assert done == {"s1-eth1": 0, "s1-eth2": 1, "s1-eth3": 0, "h1-eth0": 1, "h2-eth0": 0}
    for n, mask in (("s1-eth1", "1"), ("s1-eth2", "2"), ("s1-eth3", "1")):
        for q in ("rx-0", "rx-1"):   # every receive queue of the interface
            assert (sysfs / n / "queues" / q / "rps_cpus").read_text() == mask + "\n"
    # a namespaced host's interfaces are set from its own shell (its own /sys),
    # in a subshell, so a failure does not end the host's shell
    assert h1.commands == ["( for q in /sys/class/net/h1-eth0/queues/rx-*; do "
                           "echo 2 > $q/rps_cpus || exit 1; done ) 2>&1; echo rc=$?"]
    assert "echo 1 > $q/rps_cpus" in h2.commands[0]


def test_a_node_that_cannot_be_set_is_named(tmp_path: Path) -> None:
    s1 = _Node("s1", ["s1-eth9"], inNamespace=False)
    with pytest.raises(RuntimeError, match=r"s1.*no receive queue of s1-eth9"):
        keep_links_in_order(_Net([s1], []), cpus=[0], sysfs=_sysfs(tmp_path, []))
    h2 = _Node("h2", ["h2-eth0"], inNamespace=True,
               reply="bash: /sys/class/net/h2-eth0/queues/rx-0/rps_cpus: Permission denied\nrc=1")
    with pytest.raises(RuntimeError, match=r"h2.*h2-eth0.*Permission denied"):
        keep_links_in_order(_Net([], [h2]), cpus=[0], sysfs=tmp_path)
    with pytest.raises(ValueError, match="no CPU"):
        keep_links_in_order(_Net([], []), cpus=[])
