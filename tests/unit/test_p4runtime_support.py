"""Shared pieces of the P4Runtime tests: test programs, frames, a soft switch
with its gRPC server on a free loopback port, and a plain p4runtime_pb2 client."""

from __future__ import annotations

import queue
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

p4v1 = pytest.importorskip(
    "p4.v1.p4runtime_pb2",
    reason="P4Runtime tests need the optional 'p4runtime' extra (pip install -e '.[p4runtime]')")

import grpc  # noqa: E402
from google.rpc import status_pb2  # noqa: E402
from p4.v1 import p4runtime_pb2 as pb  # noqa: E402
from p4.v1 import p4runtime_pb2_grpc  # noqa: E402

from switches.soft.compiler import compile_program  # noqa: E402
from switches.soft.control.p4runtime_server import start_p4runtime_server  # noqa: E402
from switches.soft.runtime.externs import csum16  # noqa: E402
from switches.soft.runtime.switch import SoftSwitch  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
L3_ROUTER = ROOT / "switches" / "p4" / "l3_router.p4"
CPU_PORT = 255

# A small program with every kind of P4Runtime entity: controller headers,
# exact / ternary+range tables, @defaultonly / @tableonly, a direct counter,
# an indexed counter, a register, a meter, multicast and a digest.
CPU_P4 = r"""
#include <core.p4>
#include <v1model.p4>

const bit<9> CPU_PORT = 255;

@controller_header("packet_in")
header packet_in_t {
    bit<9> ingress_port;
    bit<7> _pad;
}

@controller_header("packet_out")
header packet_out_t {
    bit<9> egress_port;
    bit<7> _pad;
}

header ethernet_t {
    bit<48> dstAddr;
    bit<48> srcAddr;
    bit<16> etherType;
}

struct headers_t {
    packet_out_t packet_out;
    packet_in_t packet_in;
    ethernet_t ethernet;
}

struct learn_t {
    bit<48> srcAddr;
    bit<9> port;
}

struct metadata_t {
}

parser P(packet_in pkt, out headers_t hdr, inout metadata_t meta,
         inout standard_metadata_t sm) {
    state start {
        transition select(sm.ingress_port) {
            CPU_PORT: parse_packet_out;
            default: parse_ethernet;
        }
    }
    state parse_packet_out {
        pkt.extract(hdr.packet_out);
        transition parse_ethernet;
    }
    state parse_ethernet {
        pkt.extract(hdr.ethernet);
        transition accept;
    }
}

control VC(inout headers_t hdr, inout metadata_t meta) { apply { } }

control Ing(inout headers_t hdr, inout metadata_t meta, inout standard_metadata_t sm) {
    counter(8, CounterType.packets_and_bytes) port_pkts;
    register<bit<32>>(16) last_len;
    meter(4, MeterType.packets) port_meter;
    direct_counter(CounterType.packets_and_bytes) acl_hits;

    action to_cpu() { sm.egress_spec = CPU_PORT; }
    action fwd(bit<9> port) { sm.egress_spec = port; }
    action flood(bit<16> grp) { sm.mcast_grp = grp; }
    action drop() { mark_to_drop(sm); }
    action acl_permit() { acl_hits.count(); }

    table l2 {
        key = { hdr.ethernet.dstAddr: exact; }
        actions = { fwd; to_cpu; flood; drop; @defaultonly NoAction; }
        default_action = NoAction();
    }
    table acl {
        key = { hdr.ethernet.etherType: ternary; sm.ingress_port: range; }
        actions = { acl_permit; @tableonly drop; }
        counters = acl_hits;
        default_action = acl_permit();
    }
    apply {
        port_pkts.count((bit<32>)sm.ingress_port);
        last_len.write((bit<32>)sm.ingress_port, sm.packet_length);
        if (hdr.packet_out.isValid()) {
            sm.egress_spec = hdr.packet_out.egress_port;
            hdr.packet_out.setInvalid();
        } else {
            digest<learn_t>(1, {hdr.ethernet.srcAddr, sm.ingress_port});
            l2.apply();
            acl.apply();
        }
    }
}

control Egr(inout headers_t hdr, inout metadata_t meta, inout standard_metadata_t sm) {
    apply {
        if (sm.egress_port == CPU_PORT) {
            hdr.packet_in.setValid();
            hdr.packet_in.ingress_port = sm.ingress_port;
        }
    }
}

control CC(inout headers_t hdr, inout metadata_t meta) { apply { } }

control D(packet_out pkt, in headers_t hdr) {
    apply {
        pkt.emit(hdr.packet_in);
        pkt.emit(hdr.ethernet);
    }
}

V1Switch(P(), VC(), Ing(), Egr(), CC(), D()) main;
"""


def write_cpu_program(d: Path) -> Path:
    p = d / "cpu_prog.p4"
    p.write_text(CPU_P4)
    return p


def mac(s: str) -> bytes:
    return bytes(int(x, 16) for x in s.split(":"))


def eth_frame(dst: str, src: str = "02:00:00:00:00:01", ethertype: int = 0x88B5,
              payload: bytes = b"hello") -> bytes:
    return mac(dst) + mac(src) + ethertype.to_bytes(2, "big") + payload


def ipv4_frame(dst: str, src: str = "10.0.0.1", ttl: int = 64, payload: bytes = b"x" * 8) -> bytes:
    def ip(a: str) -> bytes:
        return bytes(int(x) for x in a.split("."))

    hdr = bytearray(b"\x45\x00" + (20 + len(payload)).to_bytes(2, "big") + b"\x00\x01\x00\x00"
                    + bytes([ttl, 17]) + b"\x00\x00" + ip(src) + ip(dst))
    hdr[10:12] = csum16(bytes(hdr)).to_bytes(2, "big")
    return mac("00:00:00:00:00:01") + mac("00:00:00:00:00:02") + b"\x08\x00" + bytes(hdr) + payload


# ---------------------------------------------------------------------------


class Stream:
    """One StreamChannel: send() requests, next() responses (with timeout)."""

    def __init__(self, stub: Any) -> None:
        self._req: queue.Queue[Any] = queue.Queue()
        self.responses: queue.Queue[Any] = queue.Queue()
        self.error: grpc.RpcError | None = None
        self._call = stub.StreamChannel(self._iter())
        self._t = threading.Thread(target=self._pump, daemon=True)
        self._t.start()

    def _iter(self) -> Iterator[Any]:
        while True:
            r = self._req.get()
            if r is None:
                return
            yield r

    def _pump(self) -> None:
        try:
            for r in self._call:
                self.responses.put(r)
        except grpc.RpcError as e:
            self.error = e
        self.responses.put(None)

    def send(self, req: Any) -> None:
        self._req.put(req)

    def arbitrate(self, device_id: int, election_id: int | None, role: str = "") -> None:
        m = pb.StreamMessageRequest()
        m.arbitration.device_id = device_id
        if role:
            m.arbitration.role.name = role
        if election_id is not None:
            m.arbitration.election_id.high = election_id >> 64
            m.arbitration.election_id.low = election_id & ((1 << 64) - 1)
        self.send(m)

    def next(self, kind: str | None = None, timeout: float = 5.0) -> Any:
        """The next response (of ``kind``: arbitration/packet/digest/error)."""
        while True:
            r = self.responses.get(timeout=timeout)
            if r is None:
                self.responses.put(None)
                raise AssertionError(f"stream ended: {self.error}")
            if kind is None or r.WhichOneof("update") == kind:
                return r

    def close(self) -> None:
        self._req.put(None)
        self._call.cancel()


class Rig:
    """A soft switch + its P4Runtime server + a client stub."""

    def __init__(self, program: Path, device_id: int = 1, cpu_port: int | None = CPU_PORT,
                 initial_pipeline: bool = True) -> None:
        self.module = compile_program(program)
        self.sw = SoftSwitch(self.module)
        self.tx: list[tuple[int, bytes]] = []
        self.handle = start_p4runtime_server(self.sw, "127.0.0.1:0", device_id=device_id,
                                             cpu_port=cpu_port, program_path=str(program),
                                             wake=self._drain,
                                             initial_pipeline=initial_pipeline)
        self.device_id = device_id
        self.channel = grpc.insecure_channel(self.handle.address)
        self.stub = p4runtime_pb2_grpc.P4RuntimeStub(self.channel)
        self.streams: list[Stream] = []
        self.p4info = self.stub.GetForwardingPipelineConfig(
            pb.GetForwardingPipelineConfigRequest(device_id=device_id)).config.p4info

    def _drain(self) -> None:
        with self.sw.lock:
            self.tx.extend(self.sw.dequeue_ready())

    def stream(self, election_id: int | None = 1, role: str = "",
               expect_primary: bool | None = True, device_id: int | None = None) -> Stream:
        s = Stream(self.stub)
        self.streams.append(s)
        s.arbitrate(self.device_id if device_id is None else device_id, election_id, role)
        if expect_primary is not None:
            r = s.next("arbitration")
            assert (r.arbitration.status.code == 0) == expect_primary, r
        return s

    def send(self, port: int, frame: bytes) -> list[tuple[int, bytes]]:
        with self.sw.lock:
            return self.sw.process_sync(port, frame)

    # -- ids ---------------------------------------------------------------
    def id(self, kind: str, name: str) -> int:
        for e in getattr(self.p4info, kind):
            if e.preamble.name == name or e.preamble.alias == name:
                return e.preamble.id
        raise KeyError(name)

    def field_id(self, table: str, field: str) -> int:
        for t in self.p4info.tables:
            if t.preamble.name == table or t.preamble.alias == table:
                for mf in t.match_fields:
                    if mf.name == field:
                        return mf.id
        raise KeyError(field)

    def param_id(self, action: str, param: str) -> int:
        for a in self.p4info.actions:
            if a.preamble.name == action or a.preamble.alias == action:
                for p in a.params:
                    if p.name == param:
                        return p.id
        raise KeyError(param)

    # -- writes ------------------------------------------------------------
    def write(self, *updates: Any, election_id: int = 1) -> None:
        req = pb.WriteRequest(device_id=self.device_id)
        req.election_id.low = election_id
        req.updates.extend(updates)
        self.stub.Write(req)

    def read(self, *entities: Any) -> list[Any]:
        req = pb.ReadRequest(device_id=self.device_id)
        req.entities.extend(entities)
        out = []
        for resp in self.stub.Read(req):
            out.extend(resp.entities)
        return out

    def close(self) -> None:
        for s in self.streams:
            s.close()
        self.channel.close()
        self.handle.stop(0)


def update(kind: int, **entity: Any) -> Any:
    return pb.Update(type=kind, entity=pb.Entity(**entity))


def write_errors(err: grpc.RpcError) -> list[tuple[int, str]]:
    """(canonical code, message) per update from a failed Write's status details."""
    for k, v in err.trailing_metadata() or ():
        if k == "grpc-status-details-bin":
            st = status_pb2.Status.FromString(v)
            out = []
            for d in st.details:
                e = pb.Error()
                d.Unpack(e)
                out.append((e.canonical_code, e.message))
            return out
    return []
