"""A small L2/L3 v1model program written directly in Python against
runtime/contract.py: the test double the runtime tests drive.

Parser: ethernet, then ipv4 when etherType == 0x0800. Ingress:
``MyIngress.ipv4_lpm`` (lpm on dstAddr) when IPv4 is valid, else
``MyIngress.dmac`` (exact on dstAddr); ``MyIngress.acl`` (ternary on
etherType + range on ingress_port) may drop. Per-packet specials keyed by the
last byte of the source MAC:
  0x01 clone I2E to session 5 (field list 0 preserves meta.tag)
  0x02 resubmit once (field list 0)
  0x03 recirculate once from egress (field list 0)
  0x04 clone E2E to session 6
  0x05 mark_to_drop in egress
  0x06 set standard_metadata.priority from the source MAC's 5th byte
  0x07 emit a digest
Egress records what it saw in ``program.egress_log``; it writes the
instance type into the second-to-last byte of the source MAC so outputs show it.
"""

from __future__ import annotations

from typing import Any

from switches.soft.runtime.contract import (
    ActionInfo,
    CounterInfo,
    DigestInfo,
    EntryInfo,
    KeyInfo,
    MeterInfo,
    PacketState,
    ParamInfo,
    ProgramInfo,
    RegisterInfo,
    TableInfo,
)

SM_FIELDS = [
    "ingress_port", "egress_spec", "egress_port", "instance_type", "packet_length",
    "enq_timestamp", "enq_qdepth", "deq_timedelta", "deq_qdepth",
    "ingress_global_timestamp", "egress_global_timestamp", "mcast_grp", "egress_rid",
    "checksum_error", "parser_error", "priority",
]

ETH = [("dstAddr", 48), ("srcAddr", 48), ("etherType", 16)]
IPV4 = [("version", 4), ("ihl", 4), ("diffserv", 8), ("totalLen", 16), ("identification", 16),
        ("flags", 3), ("fragOffset", 13), ("ttl", 8), ("protocol", 8), ("hdrChecksum", 16),
        ("srcAddr", 32), ("dstAddr", 32)]


class Header:
    def __init__(self, fields: list[tuple[str, int]]) -> None:
        self._fields = fields
        self._valid = False
        for n, _ in fields:
            setattr(self, n, 0)

    def isValid(self) -> bool:
        return self._valid

    def setValid(self) -> None:
        self._valid = True

    def setInvalid(self) -> None:
        self._valid = False

    def nbytes(self) -> int:
        return sum(w for _, w in self._fields) // 8

    def extract(self, data: bytes, off: int) -> int:
        n = self.nbytes()
        v = int.from_bytes(data[off:off + n], "big")
        shift = n * 8
        for name, w in self._fields:
            shift -= w
            setattr(self, name, (v >> shift) & ((1 << w) - 1))
        self._valid = True
        return off + n

    def emit(self) -> bytes:
        v = 0
        for name, w in self._fields:
            v = (v << w) | (getattr(self, name) & ((1 << w) - 1))
        return v.to_bytes(self.nbytes(), "big")

    def copy(self) -> Header:
        h = Header(self._fields)
        h._valid = self._valid
        for n, _ in self._fields:
            setattr(h, n, getattr(self, n))
        return h


class Struct:
    def __init__(self, names: list[str]) -> None:
        self._names = names
        for n in names:
            setattr(self, n, 0)

    def copy(self) -> Struct:
        s = Struct(self._names)
        for n in self._names:
            setattr(s, n, getattr(self, n))
        return s


class Headers:
    def __init__(self) -> None:
        self.ethernet = Header(ETH)
        self.ipv4 = Header(IPV4)

    def copy(self) -> Headers:
        h = Headers()
        h.ethernet = self.ethernet.copy()
        h.ipv4 = self.ipv4.copy()
        return h


def _actions() -> dict[str, ActionInfo]:
    return {
        "NoAction": ActionInfo("NoAction"),
        "MyIngress.drop": ActionInfo("MyIngress.drop"),
        "MyIngress.ipv4_forward": ActionInfo("MyIngress.ipv4_forward",
                                             [ParamInfo("dstAddr", 48), ParamInfo("port", 9)]),
        "MyIngress.forward": ActionInfo("MyIngress.forward", [ParamInfo("port", 9)]),
        "MyIngress.set_mcast": ActionInfo("MyIngress.set_mcast", [ParamInfo("grp", 16)]),
        "MyIngress.set_tag": ActionInfo("MyIngress.set_tag", [ParamInfo("tag", 8)]),
    }


def make_info(name: str = "l2l3", *, acl_entries: list[EntryInfo] | None = None,
              acl_largest_wins: bool = True, lpm_size: int = 1024) -> ProgramInfo:
    tables = {
        "MyIngress.ipv4_lpm": TableInfo(
            "MyIngress.ipv4_lpm", [KeyInfo("hdr.ipv4.dstAddr", "lpm", 32)],
            ["MyIngress.ipv4_forward", "MyIngress.set_mcast", "MyIngress.drop", "NoAction"],
            "MyIngress.drop", [], size=lpm_size, direct_counter="MyIngress.lpm_hits",
            direct_meter="MyIngress.lpm_meter"),
        "MyIngress.dmac": TableInfo(
            "MyIngress.dmac", [KeyInfo("hdr.ethernet.dstAddr", "exact", 48)],
            ["MyIngress.forward", "MyIngress.set_mcast", "MyIngress.drop", "NoAction"],
            "NoAction", []),
        "MyIngress.acl": TableInfo(
            "MyIngress.acl", [KeyInfo("hdr.ethernet.etherType", "ternary", 16),
                              KeyInfo("standard_metadata.ingress_port", "range", 9),
                              KeyInfo("hdr.ipv4.isValid()", "optional", 1)],
            ["MyIngress.drop", "MyIngress.set_tag", "NoAction"], "NoAction", [],
            entries=acl_entries or [], entries_const=bool(acl_entries),
            largest_priority_wins=acl_largest_wins),
        "MyIngress.const_def": TableInfo(
            "MyIngress.const_def", [KeyInfo("hdr.ethernet.etherType", "exact", 16)],
            ["MyIngress.set_tag", "NoAction"], "NoAction", [], default_const=True,
            default_only_actions=["NoAction"]),
    }
    return ProgramInfo(
        name=name, tables=tables, actions=_actions(),
        registers={"MyIngress.last_len": RegisterInfo("MyIngress.last_len", 16, 8)},
        counters={"MyIngress.rx_count": CounterInfo("MyIngress.rx_count", 8, "packets_and_bytes"),
                  "MyIngress.lpm_hits": CounterInfo("MyIngress.lpm_hits", 0, "packets_and_bytes",
                                                    direct_table="MyIngress.ipv4_lpm")},
        meters={"MyIngress.port_meter": MeterInfo("MyIngress.port_meter", 8, "packets"),
                "MyIngress.lpm_meter": MeterInfo("MyIngress.lpm_meter", 0, "bytes",
                                                 direct_table="MyIngress.ipv4_lpm")},
        digests={"learn_t": DigestInfo("learn_t", [ParamInfo("srcAddr", 48),
                                                   ParamInfo("port", 9)])},
        errors=["NoError", "PacketTooShort", "NoMatch", "StackOutOfBounds",
                "HeaderTooShort", "ParserTimeout", "ParserInvalidArgument"],
    )


INFO = make_info()


class L2L3Program:
    def __init__(self, rt: Any, info: ProgramInfo) -> None:
        self.rt = rt
        self.info = info
        self.t_lpm = rt.table("MyIngress.ipv4_lpm")
        self.t_dmac = rt.table("MyIngress.dmac")
        self.t_acl = rt.table("MyIngress.acl")
        self.t_const = rt.table("MyIngress.const_def")
        self.r_len = rt.register("MyIngress.last_len")
        self.c_rx = rt.counter("MyIngress.rx_count")
        self.m_port = rt.meter("MyIngress.port_meter")
        self.egress_log: list[dict[str, Any]] = []
        self.ingress_log: list[dict[str, Any]] = []
        self.colors: list[int] = []
        self.raise_in_ingress = False

    # -- contract ---------------------------------------------------------------
    def new_state(self) -> PacketState:
        return PacketState(Headers(), Struct(["tag", "resubmitted", "recirculated"]),
                           Struct(SM_FIELDS))

    def parse(self, st: PacketState, packet: bytes) -> None:
        hdr = st.hdr
        hdr.ethernet.setInvalid()
        hdr.ipv4.setInvalid()
        if len(packet) < 14:
            st.sm.parser_error = 1  # PacketTooShort
            st.payload = b""
            return
        off = hdr.ethernet.extract(packet, 0)
        if hdr.ethernet.etherType == 0x0800:
            if len(packet) < off + 20:
                st.sm.parser_error = 1
                st.payload = packet[off:]
                return
            off = hdr.ipv4.extract(packet, off)
        st.payload = packet[off:]

    def _ipv4_csum_data(self, ip: Header) -> list[tuple[int, int]]:
        return [(getattr(ip, n), w) for n, w in IPV4 if n != "hdrChecksum"]

    def verify_checksum(self, st: PacketState) -> None:
        ip = st.hdr.ipv4
        if ip.isValid():
            # ones' complement over the full header including the checksum is 0
            data = [(getattr(ip, n), w) for n, w in IPV4]
            if self.rt.checksum("csum16", data) != 0:
                st.sm.checksum_error = 1

    def ingress(self, st: PacketState) -> None:
        rt = self.rt
        sm, hdr, meta = st.sm, st.hdr, st.meta
        if self.raise_in_ingress:
            raise RuntimeError("boom")
        self.ingress_log.append({n: getattr(sm, n) for n in SM_FIELDS} | {"tag": meta.tag})
        self.c_rx.count(sm.ingress_port, sm.packet_length)
        self.r_len.write(sm.ingress_port, sm.packet_length)
        self.colors.append(self.m_port.execute(sm.ingress_port, sm.packet_length))
        if hdr.ipv4.isValid():
            action, args, hit = self.t_lpm.apply((hdr.ipv4.dstAddr,))
            if action == "MyIngress.ipv4_forward":
                hdr.ethernet.dstAddr = args[0]
                sm.egress_spec = args[1]
                hdr.ipv4.ttl = (hdr.ipv4.ttl - 1) & 0xFF
            elif action == "MyIngress.set_mcast":
                sm.mcast_grp = args[0]
            elif action == "MyIngress.drop":
                rt.mark_to_drop(sm)
            if hit:
                self.colors.append(rt.direct_meter_read("MyIngress.ipv4_lpm", sm.packet_length))
        else:
            action, args, hit = self.t_dmac.apply((hdr.ethernet.dstAddr,))
            if action == "MyIngress.forward":
                sm.egress_spec = args[0]
            elif action == "MyIngress.set_mcast":
                sm.mcast_grp = args[0]
            elif action == "MyIngress.drop":
                rt.mark_to_drop(sm)
        action, args, hit = self.t_acl.apply((hdr.ethernet.etherType, sm.ingress_port,
                                              int(hdr.ipv4.isValid())))
        if action == "MyIngress.drop":
            rt.mark_to_drop(sm)
        elif action == "MyIngress.set_tag":
            meta.tag = args[0]
        special = hdr.ethernet.srcAddr & 0xFF
        if special == 0x01:
            meta.tag = 0x11
            st.clone_session = 5
            st.clone_type = 0
            st.clone_field_list = 0
        elif special == 0x02 and sm.instance_type != 6:
            meta.tag = 0x22
            st.resubmit_field_list = 0
        elif special == 0x06:
            sm.priority = (hdr.ethernet.srcAddr >> 8) & 0x7
        elif special == 0x07:
            st.digest = (1, "learn_t", {"srcAddr": hdr.ethernet.srcAddr,
                                        "port": sm.ingress_port})

    def egress(self, st: PacketState) -> None:
        sm, hdr, meta = st.sm, st.hdr, st.meta
        self.egress_log.append({n: getattr(sm, n) for n in SM_FIELDS} | {"tag": meta.tag})
        special = hdr.ethernet.srcAddr & 0xFF
        if special == 0x03 and meta.tag != 0x33:  # preserved across the recirculation
            meta.tag = 0x33
            st.recirculate_field_list = 0
        elif special == 0x04 and sm.instance_type != 2:
            meta.tag = 0x44
            st.clone_session = 6
            st.clone_type = 1
            st.clone_field_list = 0
        elif special == 0x05:
            self.rt.mark_to_drop(sm)
        # make the instance type visible in the output
        hdr.ethernet.srcAddr = (hdr.ethernet.srcAddr & ~0xFF00) | ((sm.instance_type & 0xFF) << 8)

    def compute_checksum(self, st: PacketState) -> None:
        ip = st.hdr.ipv4
        if ip.isValid():
            ip.hdrChecksum = self.rt.checksum("csum16", self._ipv4_csum_data(ip))

    def deparse(self, st: PacketState) -> bytes:
        out = b""
        if st.hdr.ethernet.isValid():
            out += st.hdr.ethernet.emit()
        if st.hdr.ipv4.isValid():
            out += st.hdr.ipv4.emit()
        return out + st.payload

    def copy_state(self, st: PacketState) -> PacketState:
        return PacketState(st.hdr.copy(), st.meta.copy(), st.sm.copy(), st.payload)

    def field_list(self, st: PacketState, index: int) -> dict[str, Any]:
        if index == 0:
            return {"meta.tag": st.meta.tag}
        return {}

    def restore_field_list(self, st: PacketState, values: dict[str, Any]) -> None:
        if "meta.tag" in values:
            st.meta.tag = values["meta.tag"]


def make_program(rt: Any) -> L2L3Program:
    return L2L3Program(rt, INFO)


class Module:
    """A program module built around a custom ProgramInfo."""

    def __init__(self, info: ProgramInfo) -> None:
        self.INFO = info

    def make_program(self, rt: Any) -> L2L3Program:
        return L2L3Program(rt, self.INFO)


# ---------------------------------------------------------------------------
# frame builders shared by the runtime tests


def mac(s: str) -> int:
    return int(s.replace(":", ""), 16)


def ipv4_frame(dst_ip: str, src_mac: int = 0x020000000000, dst_mac: int = 0x0200000000FF,
               ttl: int = 64, payload: bytes = b"payload!") -> bytes:
    ip = Header(IPV4)
    ip.version, ip.ihl, ip.totalLen, ip.ttl, ip.protocol = 4, 5, 20 + len(payload), ttl, 17
    ip.srcAddr = 0x0A000001
    ip.dstAddr = int.from_bytes(bytes(int(x) for x in dst_ip.split(".")), "big")
    from switches.soft.runtime.externs import csum16, pack_bits
    ip.hdrChecksum = csum16(pack_bits([(getattr(ip, n), w) for n, w in IPV4
                                       if n != "hdrChecksum"]))
    eth = dst_mac.to_bytes(6, "big") + src_mac.to_bytes(6, "big") + b"\x08\x00"
    return eth + ip.emit() + payload


def l2_frame(dst_mac: int, src_mac: int = 0x020000000000, ethertype: int = 0x88B5,
             payload: bytes = b"\x00" * 46) -> bytes:
    return dst_mac.to_bytes(6, "big") + src_mac.to_bytes(6, "big") + \
        ethertype.to_bytes(2, "big") + payload


class FakeClock:
    def __init__(self, t: int = 1_000_000) -> None:
        self.t = t

    def __call__(self) -> int:
        return self.t

    def advance(self, us: int) -> None:
        self.t += us


# ---------------------------------------------------------------------------
# tests of the double itself (so the runtime tests rest on a correct program)


def test_double_parse_deparse_roundtrip() -> None:
    class Rt:
        def __getattr__(self, name: str) -> Any:
            return lambda *a, **k: None

    p = L2L3Program(Rt(), INFO)
    frame = ipv4_frame("10.0.1.1")
    st = p.new_state()
    p.parse(st, frame)
    assert st.hdr.ipv4.isValid() and st.hdr.ipv4.dstAddr == 0x0A000101
    assert p.deparse(st) == frame


def test_double_ipv4_frame_has_valid_checksum() -> None:
    from switches.soft.runtime.externs import csum16
    frame = ipv4_frame("10.0.1.1")
    assert csum16(frame[14:34]) == 0
