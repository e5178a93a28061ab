"""Scapy layers for the testbed's RoCEv2 traffic (tests, pcaps, debugging).

The layers' fields are ground.wire's declarations (BTH, RETH, AETH, ImmDt),
field for field and by the same names (the BTH's byte 4 is ``job_id``, as
the testbed uses it), so a pcap shows what the hosts and switches build; the
ICRC is ground.wire.icrc's. CNP's 16 reserved bytes are a layer too.
Importing this module makes UDP port 4791 dissect as this module's ``BTH``
(replacing scapy.contrib.roce's binding).
"""

from __future__ import annotations

from scapy.contrib import roce as _scapy_roce
from scapy.fields import BitEnumField, BitField, FCSField, StrFixedLenField, XBitField
from scapy.layers.inet import IP, UDP
from scapy.packet import Packet, Raw, bind_layers, split_layers

from ground.wire import roce as _roce
from ground.wire.icrc import ICRC, ICRC_LEN, icrc, icrc_of_ipv4, pseudo_header
from ground.wire.ipv4 import IP_PROTO_UDP
from ground.wire.layout import Bytes, Header
from ground.wire.roce import (
    CNP_BTH_BYTE4,
    CNP_RESERVED_BYTES,
    OPS_WITH_IMM,
    OPS_WITH_RETH,
    ROCE_UDP_PORT,
    Opcode,
)

_OPCODE_NAMES = {int(op): op.name for op in Opcode}
# how scapy shows a field (the layout is the declaration's)
_ENUMS = {"opcode": _OPCODE_NAMES}
_HEX = frozenset({"pkey", "dqpn", "va", "rkey", "syndrome", "msn", "imm"})


def scapy_fields(h: Header) -> list:
    """Scapy fields for header ``h``, one per declared field."""
    out: list = []
    for f in h.fields:
        if isinstance(f, Bytes):
            out.append(StrFixedLenField(f.name, f.default or bytes(f.size), f.size))
        elif f.name in _ENUMS:
            out.append(BitEnumField(f.name, f.default, f.bits, _ENUMS[f.name]))
        elif f.name in _HEX:
            out.append(XBitField(f.name, f.default, f.bits))
        else:
            out.append(BitField(f.name, f.default, f.bits))
    return out


class BTH(Packet):
    """Base Transport Header, with the packet's ICRC as its trailer (computed on
    build when left None; IPv4 only)."""

    name = "BTH"
    fields_desc = [*scapy_fields(_roce.BTH), FCSField("icrc", None, fmt=ICRC.struct.format)]

    def compute_icrc(self, p: bytes) -> bytes:
        udp = self.underlayer
        ip = udp.underlayer if isinstance(udp, UDP) else None
        if not isinstance(udp, UDP) or not isinstance(ip, IP):
            return bytes(ICRC_LEN)
        pseudo = pseudo_header(ip.src, ip.dst, udp.sport, len(p), udp.dport, ident=ip.id,
                               flags=int(ip.flags), frag_offset=ip.frag or 0,
                               proto=ip.proto or IP_PROTO_UDP)
        return ICRC.pack(icrc(pseudo, p[:-ICRC_LEN]))

    def post_build(self, p: bytes, pay: bytes) -> bytes:
        p += pay
        if self.icrc is None:
            p = p[:-ICRC_LEN] + self.compute_icrc(p)
        return p


class RETH(Packet):
    name = "RETH"
    fields_desc = scapy_fields(_roce.RETH)

    def guess_payload_class(self, payload: bytes):
        bth = self.underlayer
        if isinstance(bth, BTH) and bth.opcode in OPS_WITH_IMM:
            return ImmDt
        return Raw


class AETH(Packet):
    name = "AETH"
    fields_desc = scapy_fields(_roce.AETH)


class ImmDt(Packet):
    name = "ImmDt"
    fields_desc = scapy_fields(_roce.IMMDT)


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
    return icrc_of_ipv4(raw) == ICRC.unpack(raw, len(raw) - ICRC_LEN)[0]


split_layers(UDP, _scapy_roce.BTH, dport=ROCE_UDP_PORT)
bind_layers(UDP, BTH, dport=ROCE_UDP_PORT)
for _op in OPS_WITH_RETH:
    bind_layers(BTH, RETH, opcode=int(_op))
for _op in OPS_WITH_IMM - OPS_WITH_RETH:
    bind_layers(BTH, ImmDt, opcode=int(_op))
bind_layers(BTH, AETH, opcode=int(Opcode.ACK))
bind_layers(BTH, CNP, opcode=int(Opcode.CNP))

