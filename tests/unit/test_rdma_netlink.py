"""testbed.rdma_netlink: the nldev messages byte by byte, replies decoded, kernel errors
named; a stand-in kernel behind pyroute2's own socket code answers here (this
machine's kernel has no RDMA core), and the real kernel is asked last.

The expected bytes are written out from include/uapi/rdma/rdma_netlink.h and
include/uapi/linux/netlink.h: a 16-byte nlmsghdr (length, type, flags, seq, pid;
host byte order, little-endian here), type = (RDMA_NL_NLDEV 5 << 10) + op, then
attributes (u16 length without padding, u16 type, value, zeros to a multiple of 4).
"""

from __future__ import annotations

import errno
import os
import struct
import sys
from collections.abc import Callable
from typing import Any

import pytest

from testbed.rdma_netlink import (
    RdmaDevice,
    RdmaNetlinkError,
    RdmaNetlinkSocket,
    add_link,
    add_rxe_link,
    delete_link,
    devices,
    nldev_message,
)

pytestmark = pytest.mark.skipif(sys.byteorder != "little",
                                reason="the hand-written layouts are little-endian")

NLMSG_ERROR, NLMSG_DONE = 2, 3
NLM_F_MULTI = 0x2
TYPE_GET, TYPE_NEWLINK, TYPE_DELLINK, TYPE_PORT_GET = 0x1401, 0x1403, 0x1404, 0x1405

# rdma link add rxe_h1 type rxe netdev h1-eth0: 16 + 12 + 8 + 12 = 48 bytes
NEWLINK_RXE_H1 = bytes.fromhex(
    "30000000" "0314" "0500" "04030201" "11000000"   # len 48, 5<<10|3, REQUEST|ACK, seq, pid
    "0b000200" "7278655f683100" "00"                 # DEV_NAME(2) "rxe_h1\0": len 11, 1 pad
    "08004100" "72786500"                            # LINK_TYPE(65) "rxe\0": len 8, no pad
    "0c003300" "68312d6574683000")                   # NDEV_NAME(51) "h1-eth0\0": len 12
# rdma link delete (device index 7): 16 + 8 bytes
DELLINK_7 = bytes.fromhex(
    "18000000" "0414" "0500" "04030201" "11000000"   # len 24, 5<<10|4, REQUEST|ACK
    "08000100" "07000000")                           # DEV_INDEX(1) u32 7
# the device dump request: header only
GET_DUMP = bytes.fromhex("10000000" "0114" "0103" "04030201" "11000000")  # REQUEST|DUMP 0x301


def test_newlink_bytes_match_the_uapi_layout() -> None:
    assert nldev_message(3, [("RDMA_NLDEV_ATTR_DEV_NAME", "rxe_h1"),
                             ("RDMA_NLDEV_ATTR_LINK_TYPE", "rxe"),
                             ("RDMA_NLDEV_ATTR_NDEV_NAME", "h1-eth0")],
                         flags=0x5, seq=0x01020304, pid=0x11) == NEWLINK_RXE_H1


def test_a_name_of_four_characters_gets_three_bytes_of_padding() -> None:
    got = nldev_message(3, [("RDMA_NLDEV_ATTR_DEV_NAME", "rxe0")], flags=0x5)
    assert got == bytes.fromhex("1c000000" "0314" "0500" "00000000" "00000000"
                                "09000200" "7278653000" "000000")


def test_dellink_and_dump_bytes_match_the_uapi_layout() -> None:
    assert nldev_message(4, [("RDMA_NLDEV_ATTR_DEV_INDEX", 7)], flags=0x5, seq=0x01020304,
                         pid=0x11) == DELLINK_7
    assert nldev_message(1, [], flags=0x301, seq=0x01020304, pid=0x11) == GET_DUMP


# --- a stand-in kernel under pyroute2's socket code ------------------------------


def _attr(kind: int, value: bytes) -> bytes:
    return struct.pack("<HH", 4 + len(value), kind) + value + b"\0" * (-len(value) % 4)


def _u32(kind: int, v: int) -> bytes:
    return _attr(kind, struct.pack("<I", v))


def _str(kind: int, s: str) -> bytes:
    return _attr(kind, s.encode() + b"\0")


def _msg(kind: int, flags: int, seq: int, pid: int, body: bytes) -> bytes:
    return struct.pack("<IHHII", 16 + len(body), kind, flags, seq, pid) + body


def _attrs(request: bytes) -> dict[int, bytes]:
    out, off = {}, 16
    while off + 4 <= len(request):
        length, kind = struct.unpack_from("<HH", request, off)
        out[kind] = request[off + 4:off + length]
        off += (length + 3) & ~3
    return out


class StandInKernel:
    """The socket pyroute2 talks to: records each datagram sent and queues the
    datagrams ``answer(request)`` returns for it."""

    def __init__(self, answer: Callable[[bytes], list[bytes]]) -> None:
        self.answer = answer
        self.sent: list[bytes] = []
        self.pending: list[bytes] = []
        self.closed = False

    def bind(self, addr: tuple[int, int]) -> None:
        pass

    def settimeout(self, t: float) -> None:
        pass

    def sendto(self, data: bytes, addr: Any) -> int:
        self.sent.append(bytes(data))
        self.pending.extend(self.answer(bytes(data)))
        return len(data)

    def recv(self, bufsize: int, flags: int = 0) -> bytes:
        if not self.pending:
            raise TimeoutError("timed out")
        return self.pending.pop(0)

    def close(self) -> None:
        self.closed = True


def _socket_on(kernel: StandInKernel) -> type[RdmaNetlinkSocket]:
    class OnStandIn(RdmaNetlinkSocket):
        def post_init(self) -> None:        # instead of socket(AF_NETLINK, ..., 20)
            self._sock = kernel
            self.sendto_gate = self._gate
    return OnStandIn


def _error(request: bytes, code: int) -> bytes:
    """NLMSG_ERROR as the kernel sends it without NETLINK_CAP_ACK: -errno, then the
    whole request."""
    seq, pid = struct.unpack_from("<II", request, 8)
    return _msg(NLMSG_ERROR, 0, seq, pid, struct.pack("<i", -code) + request)


def _ack(request: bytes) -> bytes:
    seq, pid = struct.unpack_from("<II", request, 8)
    return _msg(NLMSG_ERROR, 0, seq, pid, struct.pack("<i", 0) + request[:16])


class TwoDevices:
    """rxe_h1 (index 7) on h1-eth0; mlx_b (index 9, two ports) whose port 1 netdev is
    in another namespace (no NDEV attributes) and port 2 on ens2."""

    def __init__(self) -> None:
        self.deleted: list[int] = []
        self.dellink_error = 0

    def __call__(self, request: bytes) -> list[bytes]:
        _, kind, flags, seq, pid = struct.unpack_from("<IHHII", request)
        a = _attrs(request)
        if kind == TYPE_GET:
            assert flags == 0x301, hex(flags)
            pad_then_caps = _attr(0, b"") + _attr(4, struct.pack("<Q", 0x1234))
            h1 = (_u32(1, 7) + _str(2, "rxe_h1") + _u32(3, 1) + pad_then_caps
                  + _str(5, "1.0"))                        # FW_VERSION: not in the map
            b = _u32(1, 9) + _str(2, "mlx_b") + _u32(3, 2) + pad_then_caps
            # the kernel may put several messages of a dump in one datagram
            return [_msg(TYPE_GET, NLM_F_MULTI, seq, pid, h1)
                    + _msg(TYPE_GET, NLM_F_MULTI, seq, pid, b),
                    _msg(NLMSG_DONE, NLM_F_MULTI, seq, pid, struct.pack("<i", 0))]
        if kind == TYPE_PORT_GET:
            index, port = struct.unpack("<I", a[1])[0], struct.unpack("<I", a[3])[0]
            body = _u32(1, index) + _u32(3, port) + _attr(12, b"\x04")   # PORT_STATE u8
            ndev = {(7, 1): (3, "h1-eth0"), (9, 2): (5, "ens2")}.get((index, port))
            if ndev:
                body += _u32(50, ndev[0]) + _str(51, ndev[1])
            return [_msg(TYPE_GET, 0, seq, pid, body)]      # the doit answers as GET
        if kind == TYPE_DELLINK:
            if self.dellink_error:
                return [_error(request, self.dellink_error)]
            self.deleted.append(struct.unpack("<I", a[1])[0])
            return [_ack(request)]
        raise AssertionError(f"unexpected request type {kind:#x}")


def test_a_hand_built_device_dump_decodes_to_names_indexes_and_netdevs() -> None:
    kernel = StandInKernel(TwoDevices())
    got = devices(open_socket=_socket_on(kernel))
    assert got == {"rxe_h1": RdmaDevice(7, "rxe_h1", 1, ((1, "h1-eth0"),)),
                   "mlx_b": RdmaDevice(9, "mlx_b", 2, ((2, "ens2"),))}
    assert got["rxe_h1"].netdev == "h1-eth0" and got["mlx_b"].netdev == "ens2"
    # the dump, then one port query per port: (7, 1), (9, 1), (9, 2)
    assert [struct.unpack_from("<H", s, 4)[0] for s in kernel.sent] == [
        TYPE_GET, TYPE_PORT_GET, TYPE_PORT_GET, TYPE_PORT_GET]
    assert [(_attrs(s)[1], _attrs(s)[3]) for s in kernel.sent[1:]] == [
        (struct.pack("<I", i), struct.pack("<I", p)) for i, p in ((7, 1), (9, 1), (9, 2))]
    assert kernel.closed


def _same_but_seq_pid(sent: bytes, expected: bytes) -> bool:
    return sent[:8] == expected[:8] and sent[16:] == expected[16:]


def test_add_sends_the_newlink_bytes_and_an_ack_is_success() -> None:
    kernel = StandInKernel(lambda req: [_ack(req)])
    add_rxe_link("rxe_h1", "h1-eth0", open_socket=_socket_on(kernel))
    assert len(kernel.sent) == 1 and _same_but_seq_pid(kernel.sent[0], NEWLINK_RXE_H1)


def test_enodev_from_the_kernel_is_the_typed_error_naming_device_and_netdev() -> None:
    kernel = StandInKernel(lambda req: [_error(req, errno.ENODEV)])
    with pytest.raises(RdmaNetlinkError) as ex:
        add_rxe_link("rxe_h1", "h1-eth0", open_socket=_socket_on(kernel))
    assert str(ex.value) == "rdma link add rxe_h1 type rxe netdev h1-eth0: No such device"
    assert (ex.value.code, ex.value.device, ex.value.netdev) == (
        errno.ENODEV, "rxe_h1", "h1-eth0")
    assert kernel.closed


def test_einval_for_an_unknown_link_type_names_its_module() -> None:
    kernel = StandInKernel(lambda req: [_error(req, errno.EINVAL)])
    with pytest.raises(RdmaNetlinkError, match=(
            r"^rdma link add x0 type nosuchtype netdev eth9: Invalid argument "
            r"\(no rdma_nosuchtype module loaded: modprobe rdma_nosuchtype\)$")):
        add_link("x0", "nosuchtype", "eth9", open_socket=_socket_on(kernel))


def test_eperm_says_what_is_needed() -> None:
    kernel = StandInKernel(lambda req: [_error(req, errno.EPERM)])
    with pytest.raises(RdmaNetlinkError, match=r"^rdma link add r0 type rxe netdev e0: "
                                               r"Operation not permitted \(needs CAP_NET_ADMIN"):
        add_rxe_link("r0", "e0", open_socket=_socket_on(kernel))


def test_no_answer_is_an_error_naming_the_request() -> None:
    kernel = StandInKernel(lambda req: [])
    with pytest.raises(RdmaNetlinkError, match=r"^rdma link add r0 type rxe netdev e0: no answer"):
        add_rxe_link("r0", "e0", open_socket=_socket_on(kernel))


def test_delete_finds_the_index_by_name_and_sends_dellink() -> None:
    answer = TwoDevices()
    kernel = StandInKernel(answer)
    assert delete_link("rxe_h1", open_socket=_socket_on(kernel)) is True
    assert answer.deleted == [7]
    assert _same_but_seq_pid(kernel.sent[-1], DELLINK_7)


def test_delete_of_a_missing_device_is_false_and_sends_no_dellink() -> None:
    answer = TwoDevices()
    kernel = StandInKernel(answer)
    assert delete_link("rxe_gone", open_socket=_socket_on(kernel)) is False
    assert TYPE_DELLINK not in [struct.unpack_from("<H", s, 4)[0] for s in kernel.sent]


def test_a_refused_delete_of_a_listed_device_is_the_typed_error() -> None:
    answer = TwoDevices()
    answer.dellink_error = errno.EINVAL          # e.g. a NIC's device: no user unregister
    with pytest.raises(RdmaNetlinkError, match=r"^rdma link delete mlx_b: Invalid argument$"):
        delete_link("mlx_b", open_socket=_socket_on(StandInKernel(answer)))


def test_a_socket_that_cannot_open_is_the_typed_error() -> None:
    def no_rdma_core() -> Any:
        raise OSError(errno.EPROTONOSUPPORT, os.strerror(errno.EPROTONOSUPPORT))

    with pytest.raises(RdmaNetlinkError) as ex:
        add_rxe_link("rxe_h1", "h1-eth0", open_socket=no_rdma_core)
    assert str(ex.value) == (
        "rdma link add rxe_h1 type rxe netdev h1-eth0: cannot open a NETLINK_RDMA socket: "
        "Protocol not supported (the kernel's RDMA core, ib_core, is not loaded: "
        "modprobe rdma_rxe)")
    assert ex.value.code == errno.EPROTONOSUPPORT


# --- this machine's kernel ------------------------------------------------------


def test_this_kernel_answers_with_the_typed_error_not_a_crash() -> None:
    """Here (no RDMA core) the socket does not open; in the guest (rdma_rxe) the
    kernel answers ENODEV for the missing netdev; without root EPERM."""
    missing = "p4tb-nosuch0"
    with pytest.raises(RdmaNetlinkError) as ex:
        add_rxe_link("p4tb-rxt0", missing)
    assert str(ex.value).startswith(f"rdma link add p4tb-rxt0 type rxe netdev {missing}: ")
    assert ex.value.code in (errno.EPROTONOSUPPORT, errno.ENODEV, errno.EPERM), ex.value
    assert (ex.value.device, ex.value.netdev) == ("p4tb-rxt0", missing)
    try:
        listed = devices()
    except RdmaNetlinkError as e:
        assert str(e).startswith("rdma link show: cannot open a NETLINK_RDMA socket"), e
    else:
        assert "p4tb-rxt0" not in listed
        assert delete_link("p4tb-rxt0") is False


def test_failed_opens_leave_no_descriptors_behind() -> None:
    try:
        RdmaNetlinkSocket().close()
    except OSError:
        pass
    else:
        pytest.skip("this kernel has NETLINK_RDMA: the socket opens")
    before = len(os.listdir("/proc/self/fd"))
    for _ in range(20):
        with pytest.raises(OSError):
            RdmaNetlinkSocket()
    assert len(os.listdir("/proc/self/fd")) == before


def test_an_interrupted_dump_is_the_typed_error() -> None:
    def interrupted(request: bytes) -> list[bytes]:
        seq, pid = struct.unpack_from("<II", request, 8)
        one = _u32(1, 7) + _str(2, "rxe_h1") + _u32(3, 1)
        return [_msg(TYPE_GET, NLM_F_MULTI | 0x10, seq, pid, one),      # NLM_F_DUMP_INTR
                _msg(NLMSG_DONE, NLM_F_MULTI, seq, pid, struct.pack("<i", 0))]

    with pytest.raises(RdmaNetlinkError, match=r"^rdma link show: the kernel's dump was "
                                               r"interrupted"):
        devices(open_socket=_socket_on(StandInKernel(interrupted)))
