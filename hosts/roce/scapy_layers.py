"""Scapy layers for the testbed's RoCEv2 traffic (tests, pcaps, debugging).

Builds on scapy.contrib.roce (its AETH layer and opcode names) and adds RETH,
ImmDt and CNP, with the BTH's byte 4 shown as ``job_id`` as the testbed uses it.
Importing this module makes UDP port 4791 dissect as this module's ``BTH``
(replacing scapy.contrib.roce's binding).
"""

from __future__ import annotations

import socket
import struct

from scapy.contrib import roce as _scapy_roce
from scapy.fields import (
    BitField,
    ByteEnumField,
    ByteField,
    FCSField,
    IntField,
    StrFixedLenField,
    XBitField,
    XIntField,
    XLongField,
    XShortField,
)
from scapy.layers.inet import IP, UDP
from scapy.packet import Packet, Raw, bind_layers, split_layers

from hosts.roce import wire
from hosts.roce.constants import (
    CNP_BTH_BYTE4,
    CNP_RESERVED_BYTES,
    ICRC_LEN,
    IP_PROTO_UDP,
    OPS_WITH_IMM,
    OPS_WITH_RETH,
    ROCE_UDP_PORT,
    Opcode,
)

AETH = _scapy_roce.AETH
_OPCODE_NAMES = {int(op): op.name for op in Opcode}


class BTH(_scapy_roce.BTH):
    """Base Transport Header; byte 4 is the testbed's job id. The ICRC is computed
    on build when left None (IPv4 only)."""

    name = "BTH"
    fields_desc = [
        ByteEnumField("opcode", 0, _OPCODE_NAMES),
        BitField("solicited", 0, 1),
        BitField("migreq", 0, 1),
        BitField("padcount", 0, 2),
        BitField("version", 0, 4),
        XShortField("pkey", 0xFFFF),
        ByteField("job_id", 0),
        XBitField("dqpn", 0, 24),
        BitField("ackreq", 0, 1),
        BitField("resv7", 0, 7),
        BitField("psn", 0, 24),
        FCSField("icrc", None, fmt="<I"),
    ]

    def compute_icrc(self, p: bytes) -> bytes:
        udp = self.underlayer
        ip = udp.underlayer if isinstance(udp, UDP) else None
        if not isinstance(udp, UDP) or not isinstance(ip, IP):
            return b"\x00" * ICRC_LEN
        roce_len = len(p)
        flags_frag = (int(ip.flags) << 13) | (ip.frag or 0)
        pseudo = struct.pack("!8sBBHHHBBH4s4sHHHH", b"\xff" * 8, 0x45, 0xFF,
                             28 + roce_len, ip.id, flags_frag, 0xFF, ip.proto or IP_PROTO_UDP,
                             0xFFFF, socket.inet_aton(ip.src), socket.inet_aton(ip.dst),
                             udp.sport, udp.dport, 8 + roce_len, 0xFFFF)
        return wire.ICRC.pack(wire.icrc(pseudo, p[:-ICRC_LEN]))

    def post_build(self, p: bytes, pay: bytes) -> bytes:
        p += pay
        if self.icrc is None:
            p = p[:-ICRC_LEN] + self.compute_icrc(p)
        return p


class RETH(Packet):
    name = "RETH"
    fields_desc = [XLongField("va", 0), XIntField("rkey", 0), IntField("dma_len", 0)]

    def guess_payload_class(self, payload: bytes):
        bth = self.underlayer
        if isinstance(bth, BTH) and bth.opcode in OPS_WITH_IMM:
            return ImmDt
        return Raw


class ImmDt(Packet):
    name = "ImmDt"
    fields_desc = [XIntField("imm", 0)]


class CNP(Packet):
    """The 16 reserved bytes that follow a CNP's BTH."""

    name = "CNP"
    fields_desc = [StrFixedLenField("reserved", b"\x00" * CNP_RESERVED_BYTES,
                                    CNP_RESERVED_BYTES)]


def cnp(dqpn: int) -> Packet:
    """BTH / CNP as the testbed sends it (BECN set in byte 4, PSN 0)."""
    return BTH(opcode=Opcode.CNP, job_id=CNP_BTH_BYTE4, dqpn=dqpn) / CNP()


def icrc_ok(pkt: Packet) -> bool:
    """True if an IPv4/UDP/BTH packet's trailing ICRC is correct."""
    raw = bytes(pkt[IP])
    return wire.icrc_of_ipv4(raw) == wire.ICRC.unpack(raw[-ICRC_LEN:])[0]


BTH.payload_guess = []    # do not inherit scapy.contrib.roce's bindings (CNPPadding)
split_layers(UDP, _scapy_roce.BTH, dport=ROCE_UDP_PORT)
bind_layers(UDP, BTH, dport=ROCE_UDP_PORT)
for _op in OPS_WITH_RETH:
    bind_layers(BTH, RETH, opcode=int(_op))
for _op in OPS_WITH_IMM - OPS_WITH_RETH:
    bind_layers(BTH, ImmDt, opcode=int(_op))
bind_layers(BTH, AETH, opcode=int(Opcode.ACK))
bind_layers(BTH, CNP, opcode=int(Opcode.CNP))

