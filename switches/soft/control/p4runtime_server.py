"""P4Runtime (gRPC, p4.v1) service for a SoftSwitch.

    handle = start_p4runtime_server(switch, "127.0.0.1:9559", device_id=1,
                                    cpu_port=255, program_path="prog.p4")
    ...
    handle.stop()

The switch's running program is the initial forwarding pipeline, with the
P4Info ``switches.soft.p4info`` builds for it (ids as p4c assigns them;
controller headers need ``program_path``). A controller may replace it with
SetForwardingPipelineConfig; ``p4_device_config`` is then the P4_16 source
of the new program or JSON ``{"program": "<path>"}`` (see
``p4rt_pipeline``), compiled by the soft target.

Served:
- StreamChannel: arbitration per (device id, role) with election ids as the
  P4Runtime spec says (the highest election id ever seen is primary; an
  unset election id is a backup for good; every change is announced to the
  role's clients with status OK / ALREADY_EXISTS / NOT_FOUND); packet-out
  (primary only) injected as arriving on ``cpu_port`` with the
  ``@controller_header("packet_out")`` fields prepended; frames the switch
  sends to ``cpu_port`` become PacketIn to the primaries, the leading
  ``@controller_header("packet_in")`` bytes turned into metadata; DigestList
  for digests enabled with a DigestEntry (buffering by max_list_size /
  max_timeout_ns, duplicates held back until acked or ack_timeout_ns);
  StreamError for bad packet-outs and acks.
- Write (primary only; CONTINUE_ON_ERROR batches, failures reported per
  update as p4.v1.Error details with status UNKNOWN) and Read of table
  entries (all match kinds, priorities, default entries, const entries,
  direct counter/meter data), counters, direct counters, meters, direct
  meters, registers (read and write: an addition to what BMv2 offers),
  multicast groups, clone sessions and digest configs. Error codes follow
  PI (see ``p4rt_entities``).
- SetForwardingPipelineConfig (VERIFY, VERIFY_AND_SAVE, VERIFY_AND_COMMIT
  and COMMIT start the new program from a clean state; RECONCILE_AND_COMMIT
  keeps multicast groups and clone sessions, the table entries and changed
  defaults (every one must fit a table and action of the same name and
  shape in the new program, else INVALID_ARGUMENT and nothing changes) and
  the registers, counters and meter rates whose name and shape still fit),
  GetForwardingPipelineConfig, Capabilities.

Switch state is only touched with ``switch.lock`` held. Writes after
VERIFY_AND_SAVE still act on the committed program until COMMIT. Not
supported (UNIMPLEMENTED): action profiles/selectors, idle timeouts,
ROLLBACK_ON_ERROR / DATAPLANE_ATOMIC batches, role.config, value sets,
ExternEntry, meter counter data, truncating clone sessions.

With p4runtime-shell (``pip install p4runtime-shell`` in its own
environment; it needs protobuf 3.20)::

    python -m switches.soft.p4info prog.p4 -o prog.p4info.txt
    python -m p4runtime_sh --grpc-addr 127.0.0.1:9559 --device-id 1 \
        --election-id 0,1 --config prog.p4info.txt,prog.p4

(the device config file is the P4 source itself, or a JSON file
``{"program": "/abs/path/prog.p4"}``).
"""

from __future__ import annotations

import logging
import os
import queue
import shutil
import tempfile
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from concurrent import futures
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from switches.soft.p4info import require_p4runtime

require_p4runtime()

import grpc  # noqa: E402
from google.rpc import code_pb2, status_pb2  # noqa: E402
from p4.v1 import p4runtime_pb2 as pb  # noqa: E402
from p4.v1 import p4runtime_pb2_grpc  # noqa: E402

from switches.soft.control import p4rt_entities as ent  # noqa: E402
from switches.soft.control.p4rt_codec import (  # noqa: E402
    P4RTError,
    code_number,
    decode,
    encode,
    invalid,
    not_found,
    pack_fields,
    set_uint128,
    uint128,
    unimplemented,
    unpack_fields,
)
from switches.soft.control.p4rt_pipeline import (  # noqa: E402
    PROJECT_P4_DIR,
    LoadedProgram,
    Pipeline,
    load_device_config,
    pipeline_for,
)
from switches.soft.runtime.pre import MirroringSessions, ReplicationEngine  # noqa: E402
from switches.soft.runtime.tables import Entry  # noqa: E402

if TYPE_CHECKING:
    from p4.config.v1 import p4info_pb2

    from switches.soft.runtime.switch import SoftSwitch

log = logging.getLogger("softswitch.p4runtime")

API_VERSION = "1.4.1"
PACKET_IN_QUEUE_MAX = 10000
READ_CHUNK = 5000


class _End:
    """The end of a stream's output (``_END``, its one instance)."""


_END = _End()
# entity oneof name -> (writer(pipe, switch, update type, message),
# reader(pipe, switch, message)); digests are handled by the service itself (it holds
# their per-stream state)
_ENTITIES: dict[str, tuple[Callable[[Pipeline, SoftSwitch, int, Any], None],
                           Callable[[Pipeline, SoftSwitch, Any], Iterator[pb.Entity]]]] = {
    "table_entry": (ent.write_table_entry, ent.read_table_entries),
    "counter_entry": (ent.write_counter, ent.read_counters),
    "direct_counter_entry": (ent.write_direct_counter, ent.read_direct_counters),
    "meter_entry": (ent.write_meter, ent.read_meters),
    "direct_meter_entry": (ent.write_direct_meter, ent.read_direct_meters),
    "register_entry": (ent.write_register, ent.read_registers),
    "packet_replication_engine_entry": (ent.write_pre, ent.read_pre),
    "action_profile_member": (ent.write_action_profile_member, ent.read_action_profile_members),
    "action_profile_group": (ent.write_action_profile_group, ent.read_action_profile_groups),
}


class _Status(grpc.Status):
    def __init__(self, code: grpc.StatusCode, details: str,
                 trailing_metadata: tuple[tuple[str, bytes], ...] = ()) -> None:
        self.code = code
        self.details = details
        self.trailing_metadata = trailing_metadata


# ---------------------------------------------------------------------------
# stream clients and arbitration


@dataclass(eq=False)
class _Client:
    peer: str
    # StreamMessageResponses, then _END; an _Abort ends the stream with its status
    out: queue.Queue[pb.StreamMessageResponse | _Abort | _End] = field(
        default_factory=queue.Queue)
    device_id: int | None = None
    role: str = ""
    election_id: int | None = None
    arbitrated: bool = False
    dropped: int = 0

    def send(self, msg: pb.StreamMessageResponse) -> None:
        if self.out.qsize() >= PACKET_IN_QUEUE_MAX:
            self.dropped += 1
            return
        self.out.put(msg)


@dataclass
class _Role:
    clients: list[_Client] = field(default_factory=list)
    past: int | None = None  # highest election id ever seen
    primary: _Client | None = None
    config: Any = None  # role.config (Any) last given by a primary


class _Abort(Exception):
    def __init__(self, code: grpc.StatusCode, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


# ---------------------------------------------------------------------------
# digests


@dataclass
class _DigestState:
    config: pb.DigestEntry.Config
    buffer: list[tuple[int, ...]] = field(default_factory=list)
    first_ns: int = 0
    cache: dict[int, tuple[int, set[tuple[int, ...]]]] = field(default_factory=dict)
    next_list_id: int = 1


class P4RuntimeService(p4runtime_pb2_grpc.P4RuntimeServicer):
    """The P4Runtime servicer for one SoftSwitch (one device)."""

    def __init__(self, switch: SoftSwitch, device_id: int = 0, *, cpu_port: int | None = None,
                 program_path: str | None = None, include_dirs: Iterable[str] = (),
                 defines: Mapping[str, object] | None = None,
                 p4info: p4info_pb2.P4Info | None = None,
                 wake: Callable[[], None] | None = None, workdir: str | None = None,
                 initial_pipeline: bool = True) -> None:
        self.sw = switch
        self.device_id = device_id
        self.cpu_port = cpu_port
        self.wake = wake
        include_dirs = list(include_dirs)
        incs = list(include_dirs)
        if program_path:
            incs.append(os.path.dirname(os.path.abspath(program_path)))
        incs.append(str(PROJECT_P4_DIR))
        self.include_dirs = incs
        # programs pushed as source text are compiled from files here
        self._own_workdir = workdir is None
        self.workdir = workdir or tempfile.mkdtemp(prefix="p4rt-")
        self._arb_lock = threading.Lock()
        self._roles: dict[str, _Role] = {}
        self._digest_lock = threading.Condition()
        self._digests: dict[int, _DigestState] = {}
        self._saved: Pipeline | None = None
        self._stopping = False
        self.stats = {"packet_in": 0, "packet_out": 0, "packet_in_dropped": 0,
                      "digest_lists": 0, "digests_dropped": 0}

        # the running program is the initial pipeline
        with switch.lock:
            module = switch.module
        headers = []
        device_config = b""
        if program_path:
            import json

            from switches.soft.p4info import program_controller_headers
            headers = program_controller_headers(program_path, include_dirs, defines)
            cfg: dict[str, str | list[str] | dict[str, object]] = {
                "program": os.path.abspath(program_path)}
            if include_dirs:
                cfg["include_dirs"] = [os.path.abspath(d) for d in include_dirs]
            if defines:
                cfg["defines"] = {k: v for k, v in defines.items()}
            device_config = json.dumps(cfg).encode()
        loaded = LoadedProgram(module, headers, program_path or module.INFO.name)
        self.pipe: Pipeline | None = (pipeline_for(p4info, loaded, device_config)
                                      if initial_pipeline else None)

        with switch.lock:
            self._prev_digest_handler = switch.digest_handler
            switch.digest_handler = self._on_digest
            if cpu_port is not None:
                switch.set_port_handler(cpu_port, self._on_cpu_frame)
        self._timer = threading.Thread(target=self._digest_timer, name="p4rt-digests",
                                       daemon=True)
        self._timer.start()

    def close(self) -> None:
        self._stopping = True
        with self.sw.lock:
            if self.sw.digest_handler == self._on_digest:
                self.sw.digest_handler = self._prev_digest_handler
            if self.cpu_port is not None:
                self.sw.set_port_handler(self.cpu_port, None)
        with self._digest_lock:
            self._digest_lock.notify_all()
        with self._arb_lock:
            for role in self._roles.values():
                for c in role.clients:
                    c.out.put(_END)
        if self._own_workdir:
            shutil.rmtree(self.workdir, ignore_errors=True)

    # ------------------------------------------------------------------
    # common checks

    def _check_device(self, device_id: int) -> None:
        if device_id != self.device_id:
            raise P4RTError(grpc.StatusCode.NOT_FOUND, f"Unknown device id {device_id} (this "
                            f"switch is device {self.device_id})")

    def _check_primary(self, role: str, election: pb.Uint128, has_election: bool) -> None:
        with self._arb_lock:
            r = self._roles.get(role)
            primary = r.primary if r is not None else None
            if (primary is None or not has_election
                    or primary.election_id != uint128(election)):
                raise P4RTError(grpc.StatusCode.PERMISSION_DENIED, "Not primary")

    @staticmethod
    def _abort(context: grpc.ServicerContext, err: P4RTError) -> None:
        context.abort(err.code, err.message)

    # ------------------------------------------------------------------
    # Write / Read

    def Write(self, request: pb.WriteRequest, context: grpc.ServicerContext
              ) -> pb.WriteResponse:
        try:
            self._check_device(request.device_id)
            self._check_primary(request.role, request.election_id,
                                request.HasField("election_id"))
            if self.pipe is None:
                raise P4RTError(grpc.StatusCode.FAILED_PRECONDITION,
                                "No forwarding pipeline config set")
            if request.atomicity != pb.WriteRequest.CONTINUE_ON_ERROR:
                raise unimplemented("Only CONTINUE_ON_ERROR atomicity is supported")
        except P4RTError as e:
            self._abort(context, e)
        errors: list[P4RTError | None] = []
        with self.sw.lock:
            pipe = self.pipe
            assert pipe is not None
            for u in request.updates:
                try:
                    self._write_one(pipe, u)
                    errors.append(None)
                except P4RTError as e:
                    errors.append(e)
                except Exception as exc:  # never let a bad request take the server down
                    log.exception("write failed")
                    errors.append(P4RTError(grpc.StatusCode.INTERNAL,
                                            f"{type(exc).__name__}: {exc}"))
        failed = [x for x in errors if x is not None]
        if failed:
            st = status_pb2.Status(code=code_pb2.UNKNOWN, message="Write failure.")
            for x in errors:
                err = pb.Error(canonical_code=code_pb2.OK)
                if x is not None:
                    err.canonical_code = code_number(x.code)
                    err.message = x.message
                    err.space = "p4testbed-soft"
                st.details.add().Pack(err)
            first = failed[0]
            context.abort_with_status(_Status(
                grpc.StatusCode.UNKNOWN, f"Write failure: {first.message}",
                (("grpc-status-details-bin", st.SerializeToString()),)))
        return pb.WriteResponse()

    def _write_one(self, pipe: Pipeline, u: pb.Update) -> None:
        if u.type not in (ent.INSERT, ent.MODIFY, ent.DELETE):
            raise invalid("Update type is not set")
        which = u.entity.WhichOneof("entity")
        if which == "digest_entry":
            self._write_digest(pipe, u.type, u.entity.digest_entry)
            return
        if which is None:
            raise invalid("Update has no entity")
        handlers = _ENTITIES.get(which)
        if handlers is None:
            raise unimplemented(f"{which} is not supported by the soft target")
        handlers[0](pipe, self.sw, u.type, getattr(u.entity, which))

    def Read(self, request: pb.ReadRequest, context: grpc.ServicerContext
             ) -> Iterator[pb.ReadResponse]:
        try:
            self._check_device(request.device_id)
            if self.pipe is None:
                raise P4RTError(grpc.StatusCode.FAILED_PRECONDITION,
                                "No forwarding pipeline config set")
            entities: list[pb.Entity] = []
            with self.sw.lock:
                pipe = self.pipe
                for e in request.entities:
                    entities.extend(self._read_one(pipe, e))
        except P4RTError as e:
            self._abort(context, e)
            return
        except Exception as e:
            log.exception("read failed")
            context.abort(grpc.StatusCode.INTERNAL, f"{type(e).__name__}: {e}")
            return
        for i in range(0, max(1, len(entities)), READ_CHUNK):
            yield pb.ReadResponse(entities=entities[i:i + READ_CHUNK])

    def _read_one(self, pipe: Pipeline, e: pb.Entity) -> Iterable[pb.Entity]:
        which = e.WhichOneof("entity")
        if which == "digest_entry":
            return self._read_digests(pipe, e.digest_entry)
        if which is None:
            raise invalid("Read entity is not set")
        handlers = _ENTITIES.get(which)
        if handlers is None:
            raise unimplemented(f"{which} is not supported by the soft target")
        return handlers[1](pipe, self.sw, getattr(e, which))

    # ------------------------------------------------------------------
    # pipeline config

    def SetForwardingPipelineConfig(self, request: pb.SetForwardingPipelineConfigRequest,
                                    context: grpc.ServicerContext
                                    ) -> pb.SetForwardingPipelineConfigResponse:
        try:
            self._check_device(request.device_id)
            self._check_primary(request.role, request.election_id,
                                request.HasField("election_id"))
            self._set_pipeline(request)
        except P4RTError as e:
            self._abort(context, e)
        except Exception as e:
            log.exception("SetForwardingPipelineConfig failed")
            context.abort(grpc.StatusCode.INTERNAL, f"{type(e).__name__}: {e}")
        return pb.SetForwardingPipelineConfigResponse()

    def _candidate(self, config: pb.ForwardingPipelineConfig) -> Pipeline:
        loaded = load_device_config(config.p4_device_config, self.include_dirs, self.workdir,
                                    trace=self.sw.tracer is not None)
        cookie = config.cookie.cookie if config.HasField("cookie") else None
        p4info = config.p4info if config.HasField("p4info") else None
        return pipeline_for(p4info, loaded, bytes(config.p4_device_config), cookie)

    def _set_pipeline(self, request: pb.SetForwardingPipelineConfigRequest) -> None:
        A = pb.SetForwardingPipelineConfigRequest
        action = request.action
        if action == A.COMMIT:
            if request.HasField("config"):
                raise invalid("COMMIT takes no config (it commits the saved one)")
            if self._saved is None:
                raise not_found("No saved forwarding pipeline config to commit")
            self._commit(self._saved, reconcile=False)
            self._saved = None
            return
        if action not in (A.VERIFY, A.VERIFY_AND_SAVE, A.VERIFY_AND_COMMIT,
                          A.RECONCILE_AND_COMMIT):
            raise invalid("Invalid SetForwardingPipelineConfig action")
        if not request.HasField("config"):
            raise invalid("No forwarding pipeline config given")
        cand = self._candidate(request.config)  # compiles outside the switch lock
        if action == A.VERIFY:
            return
        if action == A.VERIFY_AND_SAVE:
            self._saved = cand
            return
        self._commit(cand, reconcile=action == A.RECONCILE_AND_COMMIT)
        self._saved = None

    def _commit(self, cand: Pipeline, reconcile: bool) -> None:
        sw = self.sw
        with sw.lock:
            snap = _snapshot(sw, cand) if reconcile else None
            pre, mirrors = sw.pre, sw.mirrors
            if snap is not None:  # load_program empties these: keep the objects aside
                sw.pre, sw.mirrors = ReplicationEngine(), MirroringSessions()
            sw.load_program(cand.module)
            if snap is not None:
                sw.pre, sw.mirrors = pre, mirrors
                _restore(sw, snap)
            self.pipe = cand
            with self._digest_lock:
                self._digests.clear()
        log.info("forwarding pipeline replaced by %s", cand.info.name)

    def GetForwardingPipelineConfig(self, request: pb.GetForwardingPipelineConfigRequest,
                                    context: grpc.ServicerContext
                                    ) -> pb.GetForwardingPipelineConfigResponse:
        try:
            self._check_device(request.device_id)
        except P4RTError as e:
            self._abort(context, e)
        resp = pb.GetForwardingPipelineConfigResponse()
        pipe = self.pipe
        if pipe is None:
            return resp
        R = pb.GetForwardingPipelineConfigRequest
        rt = request.response_type
        cfg = resp.config
        if pipe.cookie is not None:
            cfg.cookie.cookie = pipe.cookie
        if rt in (R.ALL, R.P4INFO_AND_COOKIE):
            cfg.p4info.CopyFrom(pipe.p4info)
        if rt in (R.ALL, R.DEVICE_CONFIG_AND_COOKIE):
            cfg.p4_device_config = pipe.device_config
        cfg.SetInParent()
        return resp

    def Capabilities(self, request: pb.CapabilitiesRequest, context: grpc.ServicerContext
                     ) -> pb.CapabilitiesResponse:
        return pb.CapabilitiesResponse(p4runtime_api_version=API_VERSION)

    # ------------------------------------------------------------------
    # stream channel

    def StreamChannel(self, request_iterator: Iterator[pb.StreamMessageRequest],
                      context: grpc.ServicerContext) -> Iterator[pb.StreamMessageResponse]:
        client = _Client(peer=context.peer())
        reader = threading.Thread(target=self._read_stream, args=(client, request_iterator),
                                  name="p4rt-stream", daemon=True)
        context.add_callback(lambda: client.out.put(_END))
        reader.start()
        try:
            while True:
                item = client.out.get()
                if item is _END:
                    break
                if isinstance(item, _Abort):
                    context.abort(item.code, item.message)
                yield item
        finally:
            self._drop_client(client)

    def _read_stream(self, client: _Client, requests: Iterator[pb.StreamMessageRequest]) -> None:
        try:
            for req in requests:
                if self._stopping:
                    break
                try:
                    self._stream_message(client, req)
                except _Abort as a:
                    client.out.put(a)
                    return
                except Exception:
                    log.exception("stream message failed")
        except grpc.RpcError:
            pass  # the client went away
        except Exception:
            log.exception("stream reader failed")
        client.out.put(_END)

    def _stream_message(self, client: _Client, req: pb.StreamMessageRequest) -> None:
        which = req.WhichOneof("update")
        if which == "arbitration":
            self._arbitrate(client, req.arbitration)
        elif which == "packet":
            self._packet_out(client, req.packet)
        elif which == "digest_ack":
            self._digest_ack(client, req.digest_ack)
        elif which == "other":
            err = pb.StreamError(canonical_code=code_pb2.UNIMPLEMENTED,
                                 message="'other' stream messages are not supported")
            err.other.SetInParent()
            client.send(pb.StreamMessageResponse(error=err))

    def _arbitrate(self, client: _Client, arb: pb.MasterArbitrationUpdate) -> None:
        role_name = arb.role.name
        if arb.role.HasField("config"):
            raise _Abort(grpc.StatusCode.INVALID_ARGUMENT,
                         "role.config is not supported (every role has full access)")
        eid = uint128(arb.election_id) if arb.HasField("election_id") else None
        with self._arb_lock:
            if not client.arbitrated:
                if arb.device_id != self.device_id:
                    raise _Abort(grpc.StatusCode.NOT_FOUND, f"Unknown device id {arb.device_id}")
            else:
                if arb.device_id != client.device_id:
                    raise _Abort(grpc.StatusCode.FAILED_PRECONDITION,
                                 "device_id differs from the one of this stream")
                if role_name != client.role:
                    raise _Abort(grpc.StatusCode.FAILED_PRECONDITION,
                                 "role differs from the one of this stream")
            role = self._roles.setdefault(role_name, _Role())
            if eid is not None and any(c is not client and c.election_id == eid
                                       for c in role.clients):
                raise _Abort(grpc.StatusCode.INVALID_ARGUMENT,
                             f"Election id {eid} is used by another controller")
            if not client.arbitrated:
                client.arbitrated = True
                client.device_id = arb.device_id
                client.role = role_name
                role.clients.append(client)
            client.election_id = eid
            was_primary = role.primary is client
            if eid is not None and (role.past is None or eid >= role.past):
                role.past = eid
                role.primary = client
                self._notify(role, role_name, role.clients)
            else:
                if was_primary:
                    role.primary = None
                    self._notify(role, role_name, role.clients)
                else:
                    self._notify(role, role_name, [client])

    def _notify(self, role: _Role, role_name: str, clients: list[_Client]) -> None:
        for c in clients:
            m = pb.MasterArbitrationUpdate(device_id=self.device_id)
            m.role.name = role_name
            if role.config is not None:
                m.role.config.CopyFrom(role.config)
            if role.past is not None:
                set_uint128(m.election_id, role.past)
            if role.primary is c:
                m.status.code = code_pb2.OK
                m.status.message = "primary"
            elif role.primary is not None:
                m.status.code = code_pb2.ALREADY_EXISTS
                m.status.message = "backup (there is a primary)"
            else:
                m.status.code = code_pb2.NOT_FOUND
                m.status.message = "backup (no primary)"
            c.send(pb.StreamMessageResponse(arbitration=m))

    def _drop_client(self, client: _Client) -> None:
        with self._arb_lock:
            role = self._roles.get(client.role)
            if role is None or client not in role.clients:
                return
            role.clients.remove(client)
            if role.primary is client:
                role.primary = None
                self._notify(role, client.role, role.clients)

    def _primaries(self) -> list[_Client]:
        with self._arb_lock:
            return [r.primary for r in self._roles.values() if r.primary is not None]

    # -- packet I/O ---------------------------------------------------------

    def _stream_error(self, client: _Client, code: grpc.StatusCode, msg: str,
                      packet: pb.PacketOut | None = None,
                      ack: pb.DigestListAck | None = None) -> None:
        err = pb.StreamError(canonical_code=code_number(code), message=msg)
        if packet is not None:
            err.packet_out.packet_out.CopyFrom(packet)
        if ack is not None:
            err.digest_list_ack.digest_list_ack.CopyFrom(ack)
        client.send(pb.StreamMessageResponse(error=err))

    def _packet_out(self, client: _Client, pkt: pb.PacketOut) -> None:
        with self._arb_lock:
            role = self._roles.get(client.role)
            is_primary = role is not None and role.primary is client
        if not is_primary:
            self._stream_error(client, grpc.StatusCode.PERMISSION_DENIED,
                               "Only the primary controller may send packets", packet=pkt)
            return
        if self.cpu_port is None:
            self._stream_error(client, grpc.StatusCode.FAILED_PRECONDITION,
                               "The switch has no CPU port (start the server with cpu_port)",
                               packet=pkt)
            return
        pipe = self.pipe
        frame = bytes(pkt.payload)
        meta = pipe.packet_out if pipe is not None else None
        try:
            if meta is not None:
                given: dict[int, bytes] = {}
                for m in pkt.metadata:
                    if m.metadata_id in given:
                        raise invalid(f"Duplicate metadata id {m.metadata_id}")
                    given[m.metadata_id] = m.value
                known = {mid for mid, _, _ in meta.fields}
                extra = set(given) - known
                if extra:
                    raise invalid(f"Unknown packet_out metadata id(s) {sorted(extra)}")
                values = []
                for mid, name, width in meta.fields:
                    if mid not in given:
                        raise invalid(f"Missing packet_out metadata {name} (id {mid})")
                    values.append((decode(given[mid], width, f"packet_out metadata {name}"),
                                   width))
                frame = pack_fields(values) + frame
            elif len(pkt.metadata):
                raise invalid("The program has no @controller_header(\"packet_out\") header")
        except P4RTError as e:
            self._stream_error(client, e.code, e.message, packet=pkt)
            return
        with self.sw.lock:
            self.sw.receive(self.cpu_port, frame)
        self.stats["packet_out"] += 1
        if self.wake is not None:
            try:
                self.wake()
            except Exception:
                log.exception("wake callback failed")

    def _on_cpu_frame(self, frame: bytes) -> None:
        """Frames the switch sends to the CPU port (called with switch.lock held)."""
        pipe = self.pipe
        msg = pb.PacketIn()
        meta = pipe.packet_in if pipe is not None else None
        if meta is not None and len(frame) >= meta.nbytes:
            vals = unpack_fields(frame, [w for _, _, w in meta.fields])
            for (mid, _, width), v in zip(meta.fields, vals, strict=True):
                msg.metadata.add(metadata_id=mid, value=encode(v, width))
            msg.payload = frame[meta.nbytes:]
        else:
            msg.payload = frame
        prims = self._primaries()
        if not prims:
            self.stats["packet_in_dropped"] += 1
            return
        resp = pb.StreamMessageResponse(packet=msg)
        for c in prims:
            c.send(resp)
        self.stats["packet_in"] += 1

    # -- digests -------------------------------------------------------------

    def _write_digest(self, pipe: Pipeline, utype: int, de: pb.DigestEntry) -> None:
        meta = pipe.digests.get(de.digest_id)
        if meta is None:
            raise invalid(f"Invalid P4 id {de.digest_id}: not a digest")
        with self._digest_lock:
            exists = de.digest_id in self._digests
            if utype == ent.INSERT:
                if exists:
                    raise P4RTError(grpc.StatusCode.ALREADY_EXISTS,
                                    f"Digest {meta.name} is already configured")
                self._digests[de.digest_id] = _DigestState(_copy_config(de.config))
            elif utype == ent.MODIFY:
                if not exists:
                    raise not_found(f"Digest {meta.name} is not configured")
                self._digests[de.digest_id].config = _copy_config(de.config)
            else:
                if not exists:
                    raise not_found(f"Digest {meta.name} is not configured")
                del self._digests[de.digest_id]
            self._digest_lock.notify_all()

    def _read_digests(self, pipe: Pipeline, want: pb.DigestEntry) -> list[pb.Entity]:
        if want.digest_id and want.digest_id not in pipe.digests:
            raise invalid(f"Invalid P4 id {want.digest_id}: not a digest")
        out = []
        with self._digest_lock:
            for did, st in sorted(self._digests.items()):
                if want.digest_id and did != want.digest_id:
                    continue
                e = pb.DigestEntry(digest_id=did)
                e.config.CopyFrom(st.config)
                out.append(pb.Entity(digest_entry=e))
        return out

    def _on_digest(self, receiver: int, type_name: str, values: dict[str, int]) -> None:
        """Digest from the data path (called with switch.lock held)."""
        prev = self._prev_digest_handler
        if prev is not None:
            try:
                prev(receiver, type_name, values)
            except Exception:
                log.exception("digest handler failed")
        pipe = self.pipe
        meta = pipe.digest_by_name.get(type_name) if pipe is not None else None
        if meta is None:
            return
        key = tuple(int(values.get(n, 0)) & ((1 << w) - 1) for n, w in meta.fields)
        with self._digest_lock:
            st = self._digests.get(meta.id)
            if st is None:
                return
            if key in st.buffer or any(key in keys for _, keys in st.cache.values()):
                return
            if not st.buffer:
                st.first_ns = time.monotonic_ns()
            st.buffer.append(key)
            cfg = st.config
            full = cfg.max_list_size > 0 and len(st.buffer) >= cfg.max_list_size
            if full or cfg.max_timeout_ns <= 0:
                self._flush_digest(meta.id, st)
            else:
                self._digest_lock.notify_all()

    def _flush_digest(self, digest_id: int, st: _DigestState) -> None:
        """Send the buffer as one DigestList (``_digest_lock`` held)."""
        if not st.buffer:
            return
        pipe = self.pipe
        meta = pipe.digests.get(digest_id) if pipe is not None else None
        keys = st.buffer
        st.buffer = []
        if meta is None:
            return
        list_id = st.next_list_id
        st.next_list_id += 1
        dl = pb.DigestList(digest_id=digest_id, list_id=list_id, timestamp=time.time_ns())
        for key in keys:
            data = dl.data.add()
            for (_, width), v in zip(meta.fields, key, strict=True):
                data.struct.members.add(bitstring=encode(v, width))
        if st.config.ack_timeout_ns > 0:
            st.cache[list_id] = (time.monotonic_ns() + st.config.ack_timeout_ns, set(keys))
        prims = self._primaries()
        if not prims:
            self.stats["digests_dropped"] += len(keys)
            return
        resp = pb.StreamMessageResponse(digest=dl)
        for c in prims:
            c.send(resp)
        self.stats["digest_lists"] += 1

    def _digest_ack(self, client: _Client, ack: pb.DigestListAck) -> None:
        with self._digest_lock:
            st = self._digests.get(ack.digest_id)
            if st is None:
                pipe = self.pipe
                known = pipe is not None and ack.digest_id in pipe.digests
                msg = (f"Digest {ack.digest_id} is not configured" if known
                       else f"Unknown digest id {ack.digest_id}")
                self._stream_error(client, grpc.StatusCode.INVALID_ARGUMENT, msg, ack=ack)
                return
            st.cache.pop(ack.list_id, None)

    def _digest_timer(self) -> None:
        with self._digest_lock:
            while not self._stopping:
                now = time.monotonic_ns()
                wait_ns = 1_000_000_000
                for did, st in list(self._digests.items()):
                    for lid, (deadline, _) in list(st.cache.items()):
                        if deadline <= now:
                            del st.cache[lid]
                        else:
                            wait_ns = min(wait_ns, deadline - now)
                    if st.buffer:
                        due = st.first_ns + st.config.max_timeout_ns
                        if due <= now:
                            self._flush_digest(did, st)
                        else:
                            wait_ns = min(wait_ns, due - now)
                self._digest_lock.wait(max(wait_ns, 100_000) / 1e9)


def _copy_config(cfg: pb.DigestEntry.Config) -> pb.DigestEntry.Config:
    c = pb.DigestEntry.Config()
    c.CopyFrom(cfg)
    return c


# ---------------------------------------------------------------------------
# reconcile: carry state over to a new program


@dataclass
class _Snapshot:
    """The running state a new program keeps (RECONCILE_AND_COMMIT), by name."""

    # entries (not const) and the changed default action (name, arguments), if any
    tables: dict[str, tuple[list[Entry], tuple[str, tuple[int, ...]] | None]]
    registers: dict[str, list[int]]
    counters: dict[str, tuple[list[int], list[int]]]  # packets, bytes
    meters: dict[str, list[list[tuple[float, int]] | None]]  # rates, None if not set


def _snapshot(sw: SoftSwitch, cand: Pipeline) -> _Snapshot:
    """What of the running state the new program can keep; raises P4RTError
    (INVALID_ARGUMENT) naming the first thing it cannot."""
    new = cand.info
    tables: dict[str, tuple[list[Entry], tuple[str, tuple[int, ...]] | None]] = {}
    for name, t in sw.tables.items():
        entries = [e for e in t.sorted_entries() if not e.const]
        changed_default = (t.default_action, t.default_args) != (t.info.default_action,
                                                                 tuple(t.info.default_args))
        if not entries and not changed_default:
            continue
        nt = new.tables.get(name)
        if nt is None or [(k.match_kind, k.width) for k in nt.keys] != \
                [(k.match_kind, k.width) for k in t.info.keys]:
            raise invalid(f"RECONCILE_AND_COMMIT: table {name} has entries but the new program "
                          "has no table of that name and key")
        used = [e.action for e in entries] + ([t.default_action] if changed_default else [])
        for a in used:
            na = new.actions.get(a)
            oa = sw.info.actions.get(a)
            if a not in nt.actions or na is None or oa is None or \
                    [p.width for p in na.params] != [p.width for p in oa.params]:
                raise invalid(f"RECONCILE_AND_COMMIT: action {a} used in table {name} does not "
                              "exist with the same parameters in the new program")
        tables[name] = (entries, (t.default_action, t.default_args) if changed_default else None)
    regs = {}
    for name, r in sw.registers.items():
        nr = new.registers.get(name)
        if nr is not None and nr.width == r.width:
            regs[name] = list(r.values[:nr.size])
    counters = {}
    for name, c in sw.counters.items():
        nc = new.counters.get(name)
        if nc is not None and not nc.direct_table:
            counters[name] = (list(c.packets[:nc.size]), list(c.bytes[:nc.size]))
    meters = {}
    for name, m in sw.meters.items():
        nm = new.meters.get(name)
        if nm is not None and not nm.direct_table:
            meters[name] = [list(x.rates) if x.configured else None for x in m.meters[:nm.size]]
    return _Snapshot(tables, regs, counters, meters)


def _restore(sw: SoftSwitch, snap: _Snapshot) -> None:
    for name, (entries, default) in snap.tables.items():
        t = sw.tables[name]
        for e in entries:
            prio = e.priority if t.needs_priority else None
            h = t.add_entry(list(e.matches), e.action, list(e.args), prio)
            ne = t.entries[h]
            ne.packets, ne.bytes = e.packets, e.bytes
            if e.meter is not None and ne.meter is not None and e.meter.configured:
                ne.meter.set_rates(list(e.meter.rates))
        if default is not None:
            t.set_default(default[0], list(default[1]))
    for name, vals in snap.registers.items():
        sw.registers[name].values[:len(vals)] = vals
    for name, (pk, by) in snap.counters.items():
        c = sw.counters[name]
        c.packets[:len(pk)] = pk
        c.bytes[:len(by)] = by
    for name, rates in snap.meters.items():
        for m, r in zip(sw.meters[name].meters, rates, strict=False):
            if r is not None:
                m.set_rates(r)


# ---------------------------------------------------------------------------
# server


class P4RuntimeHandle:
    """A running P4Runtime server: ``address``, ``port``, ``service``, ``stop()``."""

    def __init__(self, server: grpc.Server, service: P4RuntimeService, address: str,
                 port: int) -> None:
        self.server = server
        self.service = service
        self.address = address
        self.port = port

    def stop(self, grace: float | None = 1.0) -> None:
        self.service.close()
        self.server.stop(grace).wait(5)


def start_p4runtime_server(switch: SoftSwitch, address: str = "127.0.0.1:9559",
                           device_id: int = 0, *, cpu_port: int | None = None,
                           program_path: str | None = None, include_dirs: Iterable[str] = (),
                           defines: Mapping[str, object] | None = None,
                 p4info: p4info_pb2.P4Info | None = None,
                           wake: Callable[[], None] | None = None,
                           initial_pipeline: bool = True,
                           max_workers: int = 32) -> P4RuntimeHandle:
    """Serve P4Runtime for ``switch`` on ``address`` (host:port; port 0 picks a
    free one, see ``handle.port``).

    ``cpu_port``: the switch port that is the controller's (packet-in/out);
    None disables packet I/O. ``program_path`` (+ include_dirs/defines): the
    source of the running program, for its controller headers and as the
    device config GetForwardingPipelineConfig returns. ``p4info``: a P4Info
    message to use instead of the one built from the program (e.g. p4c's).
    ``wake``: called after a packet-out was handed to the switch, so a data
    path that sleeps between packets drains the traffic manager at once.
    ``initial_pipeline=False``: behave like BMv2's simple_switch_grpc started
    without a P4Info: Read/Write answer FAILED_PRECONDITION until a controller
    calls SetForwardingPipelineConfig (the switch keeps forwarding with its
    program meanwhile). Every open StreamChannel holds one of the
    ``max_workers`` threads.
    """
    service = P4RuntimeService(switch, device_id, cpu_port=cpu_port, program_path=program_path,
                               include_dirs=include_dirs, defines=defines, p4info=p4info,
                               wake=wake, initial_pipeline=initial_pipeline)
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=max_workers,
                                                    thread_name_prefix="p4rt"),
                         options=[("grpc.max_receive_message_length", 64 << 20),
                                  ("grpc.max_send_message_length", 64 << 20)])
    p4runtime_pb2_grpc.add_P4RuntimeServicer_to_server(service, server)
    port = server.add_insecure_port(address)
    if port == 0:
        service.close()
        raise OSError(f"cannot listen on {address}")
    server.start()
    host = address.rsplit(":", 1)[0]
    log.info("P4Runtime server for device %d on %s:%d", device_id, host, port)
    return P4RuntimeHandle(server, service, f"{host}:{port}", port)


__all__ = ["start_p4runtime_server", "P4RuntimeHandle", "P4RuntimeService", "API_VERSION"]
