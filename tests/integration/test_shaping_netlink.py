"""A QP class's rate changes through the hand-built rtnetlink message
(hosts.roce.shaping.HtbClassSetter) leave the kernel's HTB class as pyroute2's
full encoder does, an rxe QP's u32 filter sends its requests, and only
them, to its class, and the DCQCN shim rewrites a QP's DSCP on that filter
(the rewrite itself where the kernel has tc's pedit and csum actions: the
guest VM's). Runs in a network namespace of its own (``unshare -n``):
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


def _in_own_netns(tmp_path: Path, name: str, script: str) -> dict:
    """Run ``script`` (given the checkout's path) in a network namespace of its
    own; the JSON its last line prints."""
    if shutil.which("unshare") is None or shutil.which("tc") is None:
        pytest.skip("needs unshare and tc (util-linux, iproute2)")
    path = tmp_path / name
    path.write_text(script)
    res = subprocess.run(["unshare", "-n", sys.executable, str(path), str(REPO)],
                         capture_output=True, text=True, timeout=60)
    assert res.returncode == 0, res.stderr
    return json.loads(res.stdout.strip().splitlines()[-1])


def test_rate_change_matches_pyroute2(tmp_path: Path) -> None:
    got = _in_own_netns(tmp_path, "htb_change.py", _SCRIPT)
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


_QP_FILTER_SCRIPT = r"""
import json, socket, subprocess, sys, time
sys.path.insert(0, sys.argv[1])
from hosts.roce.shaping import DEFAULT_CLASS, HtbShaper, htb_rate_bytes, qp_class_id
subprocess.run("ip link add a0 type veth peer name b0 && ip link set a0 up && ip link set b0 up"
               " && ip addr add 10.0.1.1/8 dev a0"
               " && ip neigh add 10.0.3.1 lladdr 02:00:00:00:00:02 dev a0 nud permanent"
               " && ip neigh add 10.0.4.1 lladdr 02:00:00:00:00:02 dev a0 nud permanent",
               shell=True, check=True)
sh = HtbShaper("a0", 40e6, 2164)
a, b = qp_class_id(0), qp_class_id(1)
sh.add_qp(a, "10.0.3.1", 0x101, htb_rate_bytes(40e6))
sh.add_qp(b, "10.0.3.1", 0x102, htb_rate_bytes(40e6))
base = sh.class_bytes()
socks = {}

def send(dst, dqpn, opcode, sport):
    # through the IP stack, as rxe sends (ip_local_out): a UDP socket per port
    if sport not in socks:
        socks[sport] = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        socks[sport].bind(("10.0.1.1", sport))
    bth = bytes([opcode, 0, 0xFF, 0xFF, 0]) + dqpn.to_bytes(3, "big") + bytes(4)
    payload = bth + bytes(64)
    socks[sport].sendto(payload, (dst, 4791))
    return 14 + 20 + 8 + len(payload)

sent = {"a": 0, "b": 0, "default": 0}
for dst, dqpn, op, sport, cls in [
        ("10.0.3.1", 0x101, 0x0A, 0xC00A, "a"),        # QP a's request, step 10's port
        ("10.0.3.1", 0x101, 0x0A, 0xC00B, "a"),        # ... and step 11's: still a's
        ("10.0.3.1", 0x102, 0x0A, 0xC00A, "b"),        # QP b's, on a's port
        ("10.0.3.1", 0x201, 0x11, 0xC00A, "default"),  # an ACK of another QP, same port
        ("10.0.4.1", 0x101, 0x0A, 0xC00A, "default"),  # the same QPN at another host
        ] * 3:
    sent[cls] += send(dst, dqpn, op, sport)
time.sleep(0.2)
got = sh.class_bytes()
sh.close()
print(json.dumps({"sent": sent, "a": got[a] - base.get(a, 0), "b": got[b] - base.get(b, 0),
                  "default": got[DEFAULT_CLASS] - base.get(DEFAULT_CLASS, 0)}))
"""


def test_an_rxe_qps_class_takes_its_requests_whatever_their_source_port(
        tmp_path: Path) -> None:
    # the shim's u32 filter picks a QP's class by the QP its requests go to (address
    # and BTH destination QP): a Symphony ring's QP changes its port (its step tag)
    # per step, and the host's ACKs for another QP may leave from the same port
    got = _in_own_netns(tmp_path, "qp_filter.py", _QP_FILTER_SCRIPT)
    assert got["sent"]["a"] > 0 and got["sent"]["b"] > 0
    # the kernel's class counters count each frame (its Ethernet header on); the
    # default class may also carry the interface's own (IPv6 neighbour discovery)
    assert (got["a"], got["b"]) == (got["sent"]["a"], got["sent"]["b"])
    assert got["default"] >= got["sent"]["default"]


# A host's link (a0, 10.0.1.1) toward a gateway whose address the peer's
# (10.0.3.1) resolves to, and the rxe host's DCQCN shim on it.
_SHIM_PRELUDE = r"""
import json, socket, subprocess, sys, time
sys.path.insert(0, sys.argv[1])
from hosts.roce.rate import FixedRate
from hosts.roce.rxe.dcqcn_points import ShimError
from hosts.roce.rxe.dcqcn_shim import RxeDcqcnShim
from hosts.roce.shaping import qp_class_id
subprocess.run("ip link add a0 type veth peer name b0 && ip link set a0 up && ip link set b0 up"
               " && ip addr add 10.0.1.1/8 dev a0"
               " && ip neigh add 10.0.3.1 lladdr 02:00:00:00:00:02 dev a0 nud permanent",
               shell=True, check=True)
SHIM = dict(ifname="a0", local_ip="10.0.1.1", local_mac="02:00:00:00:00:01",
            gateway_mac="02:00:00:00:00:02", line_rate_bps=40e6, cnp_interval_ns=50_000,
            burst_bytes=2164)
"""

_DSCP_SCRIPT = _SHIM_PRELUDE + r"""
with_actions = sys.argv[2] == "1"
shim = RxeDcqcnShim(**SHIM)
qa, qb = 0x11, 0x12                          # local QPs, sending to QPs 0x101 and 0x102
if with_actions:
    shim.set_dscp(qa, 8)                     # before the QP is registered: kept for it
shim.register_qp(qa, "10.0.3.1", 0x101, FixedRate(40e6))
shim.register_qp(qb, "10.0.3.1", 0x102, FixedRate(40e6))
a, b = qp_class_id(0), qp_class_id(1)
cap = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(0x0800))
cap.bind(("b0", 0))
cap.settimeout(0.5)
tx = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
tx.setsockopt(socket.IPPROTO_IP, socket.IP_TOS, 0x02)         # ECT(0), DSCP 0: as rxe sends
tx.bind(("10.0.1.1", 0xC00A))

def checksum_ok(hdr):
    s = sum(int.from_bytes(hdr[i:i + 2], "big") for i in range(0, len(hdr), 2))
    while s >> 16:
        s = (s & 0xFFFF) + (s >> 16)
    return s == 0xFFFF

def round_of(label):
    for dqpn in (0x101, 0x102):
        bth = bytes([0x0A, 0, 0xFF, 0xFF, 0]) + dqpn.to_bytes(3, "big") + bytes(4)
        tx.sendto(bth + bytes(64), ("10.0.3.1", 4791))
    seen = []
    try:
        while len(seen) < 2:
            f = cap.recv(2048)
            ip = f[14:34]
            if ip[9] != 17 or int.from_bytes(f[36:38], "big") != 4791:
                continue
            seen.append({"round": label, "dqpn": int.from_bytes(f[47:50], "big"),
                         "tos": ip[1], "checksum_ok": checksum_ok(ip)})
    except TimeoutError:
        pass
    return seen

base = shim.shaper.class_bytes()
frames = round_of("registered")
errors = []
if with_actions:
    shim.set_dscp(qa, 46)
    frames += round_of("dscp 46")
shim.set_dscp(qa, None)                      # back to what the QP sends: no actions
frames += round_of("none")
for bad in (lambda: shim.set_dscp(qa, 64), lambda: shim.shaper.set_qp_dscp(0x10077, 8)):
    try:
        bad()
        errors.append("")
    except ShimError as e:
        errors.append(str(e))
got = shim.shaper.class_bytes()
shim.close()
print(json.dumps({"frames": frames, "errors": errors,
                  "a": got[a] - base.get(a, 0), "b": got[b] - base.get(b, 0)}))
"""


def _kernel_has_dscp_actions() -> bool:
    """Whether this kernel has tc's pedit and csum actions (built in or as modules)."""
    import gzip
    import platform

    try:
        config = gzip.open("/proc/config.gz", "rt").read()
        return all(f"CONFIG_NET_ACT_{k}=y" in config or f"CONFIG_NET_ACT_{k}=m" in config
                   for k in ("PEDIT", "CSUM"))
    except OSError:
        pass
    mods = Path("/lib/modules") / platform.release()
    listed = "".join((mods / f).read_text() for f in ("modules.dep", "modules.builtin")
                     if (mods / f).exists())
    return "act_pedit.ko" in listed and "act_csum.ko" in listed


def _dscp_run(tmp_path: Path, with_actions: bool) -> dict:
    path = tmp_path / "dscp.py"
    path.write_text(_DSCP_SCRIPT)
    if shutil.which("unshare") is None or shutil.which("tc") is None:
        pytest.skip("needs unshare and tc (util-linux, iproute2)")
    res = subprocess.run(["unshare", "-n", sys.executable, str(path), str(REPO),
                          "1" if with_actions else "0"],
                         capture_output=True, text=True, timeout=60)
    assert res.returncode == 0, res.stderr
    return json.loads(res.stdout.strip().splitlines()[-1])


def test_an_rxe_qps_filter_changes_in_place_and_keeps_its_class(tmp_path: Path) -> None:
    # the shim's filter change without actions (the QP's own DSCP): the same
    # handle, the same match, the same class; bad requests are named
    got = _dscp_run(tmp_path, with_actions=False)
    frames = got["frames"]
    assert sorted((f["round"], f["dqpn"]) for f in frames) == [
        ("none", 0x101), ("none", 0x102), ("registered", 0x101), ("registered", 0x102)]
    assert all(f["tos"] == 0x02 and f["checksum_ok"] for f in frames)
    assert got["a"] == got["b"] > 0                   # both classes took both rounds' frames
    assert "QP 0x11: DSCP 64 out of range" in got["errors"][0]
    assert "no rxe QP filter to class 1:77" in got["errors"][1]


def test_an_rxe_qps_dscp_is_rewritten_on_its_filter_ecn_kept(tmp_path: Path) -> None:
    # ReFlex on rxe: a flexible flow's QP changes priority by the DSCP the shim
    # writes on its filter (tc pedit + csum), also when asked before the QP is
    # registered; the other QP's packets are untouched
    if not _kernel_has_dscp_actions():
        pytest.skip("this kernel has no tc pedit/csum actions (CONFIG_NET_ACT_PEDIT, "
                    "CONFIG_NET_ACT_CSUM); the guest VM's has")
    got = _dscp_run(tmp_path, with_actions=True)
    tos = {(f["round"], f["dqpn"]): f["tos"] for f in got["frames"]}
    assert tos == {("registered", 0x101): (8 << 2) | 0x02, ("registered", 0x102): 0x02,
                   ("dscp 46", 0x101): (46 << 2) | 0x02, ("dscp 46", 0x102): 0x02,
                   ("none", 0x101): 0x02, ("none", 0x102): 0x02}, got
    assert all(f["checksum_ok"] for f in got["frames"])   # csum: the receiver takes them
    assert got["a"] == got["b"] > 0                        # and the class still counts them
    assert "no rxe QP filter to class 1:77" in got["errors"][1]


_SETTLE_SCRIPT = _SHIM_PRELUDE + r"""
shim = RxeDcqcnShim(**SHIM, count_wire=True, nak_window_ns=1_000_000)
shim.register_qp(0x11, "10.0.3.1", 0x101, FixedRate(80e3))     # DCQCN's floor at slowdown 500
tx = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
tx.bind(("10.0.1.1", 0xC00A))
n = 6
for psn in range(n):
    bth = bytes([0x0A, 0, 0xFF, 0xFF, 0, 0, 0x01, 0x01]) + psn.to_bytes(4, "big")
    tx.sendto(bth + bytes(1000), ("10.0.3.1", 4791))
shim.poll(0)
queued = shim.shaper.queued_packets(shim.shaper.qp_classes)
before = shim.qp_counters(0x11)["wire_tx_pkts"]
settled = shim.settle(timeout_s=5.0)
after = shim.qp_counters(0x11)
shim.close()
print(json.dumps({"n": n, "queued": queued, "before": before, "settled": settled,
                  "after": after}))
"""


def test_the_shims_settle_counts_what_the_qdisc_still_held(tmp_path: Path) -> None:
    # At DCQCN's floor rate the QP's class holds most of a burst of requests
    # after the sender is done; the wire counts read at that moment miss them,
    # and settle waits for the class to send them, then counts them.
    got = _in_own_netns(tmp_path, "settle.py", _SETTLE_SCRIPT)
    assert got["queued"] > 0 and got["before"] < got["n"], got
    assert got["settled"] is True
    assert got["after"]["wire_tx_pkts"] == got["n"]
    assert got["after"]["retransmits"] == 0
