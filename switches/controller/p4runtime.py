"""A P4Runtime client behind the controller API (:mod:`switches.controller.api`),
for any target with a P4Runtime server (the soft switch's, BMv2's).

Tables, action profiles, the PRE, registers, counters, packet I/O and digests
go over gRPC; queue settings (and, on BMv2, registers) go through the
:class:`~switches.controller.cli.CliController` given as ``cli``.
"""

from __future__ import annotations

import json
import os
import queue
import threading
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any, TypeVar

from switches.controller.api import (
    Controller,
    ControllerError,
    KeyMatch,
    Match,
    Params,
    TableEntry,
    Value,
    lpm,
    resolve,
    to_int,
)
from switches.controller.cli import CliController

if TYPE_CHECKING:
    import grpc
    from google.protobuf.message import Message
    from p4.config.v1 import p4info_pb2
    from p4.v1 import p4runtime_pb2 as pb

_Req = TypeVar("_Req")
_Resp = TypeVar("_Resp")


class P4RuntimeController(Controller):
    """A P4Runtime client (primary for ``device_id`` with ``election_id``).

    ``p4info``: a P4Info message, a path to a text/binary P4Info file, or
    None to fetch it from the switch. ``cli``: a CliController for queue
    settings (and BMv2 registers). Packet I/O: ``packet_out``/``packet_in``;
    digests: ``digest_enable``/``digest_lists``.
    """

    def __init__(self, address: str,
                 p4info: p4info_pb2.P4Info | str | os.PathLike[str] | None = None,
                 device_id: int = 0,
                 election_id: int = 1, cli: CliController | None = None,
                 timeout: float = 10.0) -> None:
        try:
            import grpc
            from p4.v1 import p4runtime_pb2, p4runtime_pb2_grpc
        except ImportError as e:
            raise ControllerError("P4RuntimeController needs the optional dependencies: "
                                  "pip install -e '.[p4runtime]'") from e
        self._grpc = grpc
        self.pb = p4runtime_pb2
        self.address = address
        self.device_id = device_id
        self.election_id = election_id
        self.cli = cli
        self.timeout = timeout
        self.channel = grpc.insecure_channel(address)
        self.stub = p4runtime_pb2_grpc.P4RuntimeStub(self.channel)
        self._requests: queue.Queue[pb.StreamMessageRequest | None] = queue.Queue()
        self._arb: queue.Queue[pb.MasterArbitrationUpdate | grpc.RpcError] = queue.Queue()
        self.packets_in: queue.Queue[pb.PacketIn] = queue.Queue()
        self.digests_in: queue.Queue[pb.DigestList] = queue.Queue()
        self.stream_errors: list[pb.StreamError] = []
        self._stream = self.stub.StreamChannel(self._request_iter())
        self._reader = threading.Thread(target=self._read_stream, daemon=True)
        self._reader.start()
        req = p4runtime_pb2.StreamMessageRequest()
        req.arbitration.device_id = device_id
        req.arbitration.election_id.high = election_id >> 64
        req.arbitration.election_id.low = election_id & ((1 << 64) - 1)
        self._requests.put(req)
        try:
            arb = self._arb.get(timeout=timeout)
        except queue.Empty:
            self.close()
            raise ControllerError(f"no arbitration answer from {address}") from None
        if isinstance(arb, Exception):
            self.close()
            raise ControllerError(f"stream to {address} failed: {arb}") from None
        if arb.status.code != 0:
            self.close()
            raise ControllerError(f"not primary for device {device_id} on {address}: "
                                  f"{arb.status.message}", "PERMISSION_DENIED")
        self._load_p4info(p4info)

    # -- stream ----------------------------------------------------------------
    def _request_iter(self) -> Iterator[pb.StreamMessageRequest]:
        while True:
            r = self._requests.get()
            if r is None:
                return
            yield r

    def _read_stream(self) -> None:
        try:
            for resp in self._stream:
                kind = resp.WhichOneof("update")
                if kind == "arbitration":
                    self._arb.put(resp.arbitration)
                elif kind == "packet":
                    self.packets_in.put(resp.packet)
                elif kind == "digest":
                    self.digests_in.put(resp.digest)
                elif kind == "error":
                    self.stream_errors.append(resp.error)
        except self._grpc.RpcError as e:
            self._arb.put(e)

    # -- P4Info ----------------------------------------------------------------
    def _load_p4info(self, p4info: p4info_pb2.P4Info | str | os.PathLike[str] | None) -> None:
        info: p4info_pb2.P4Info
        if p4info is None:
            resp = self.stub.GetForwardingPipelineConfig(self.pb.GetForwardingPipelineConfigRequest(
                device_id=self.device_id, response_type=2))
            info = resp.config.p4info
        elif isinstance(p4info, (str, os.PathLike)):
            # here, as grpc above: P4Info needs protobuf, the p4runtime extra
            from switches.soft.p4info import load_p4info

            info = load_p4info(p4info)
        else:
            info = p4info
        self.p4info = info
        # kind -> name -> its P4Info message (p4info_pb2.Table, .Action, ...)
        self._names: dict[str, dict[str, Any]] = {}
        for kind in ("tables", "actions", "counters", "direct_counters", "meters",
                     "direct_meters", "registers", "digests", "controller_packet_metadata",
                     "action_profiles"):
            self._names[kind] = {e.preamble.name: e for e in getattr(info, kind)}

    def _get(self, kind: str, name: str) -> Any:
        d = self._names[kind]
        return d[resolve(list(d), name, kind.rstrip("s").replace("_", " "))]

    def set_pipeline_config(self, p4info: p4info_pb2.P4Info | str | os.PathLike[str],
                            device_config: bytes,
                            action: str = "VERIFY_AND_COMMIT") -> None:
        """SetForwardingPipelineConfig for any target: ``p4info`` (a P4Info
        message or a path to a text/binary P4Info file) with the target's
        opaque ``device_config`` (BMv2: the bmv2 JSON p4c wrote; soft: see
        :meth:`set_forwarding_pipeline`). ``action`` is the request's action
        name (VERIFY_AND_COMMIT, VERIFY, VERIFY_AND_SAVE, COMMIT,
        RECONCILE_AND_COMMIT). This controller uses ``p4info`` afterwards,
        unless the action only verifies."""
        if isinstance(p4info, (str, os.PathLike)):
            from switches.soft.p4info import load_p4info  # protobuf: see _load_p4info

            p4info = load_p4info(p4info)
        kinds = self.pb.SetForwardingPipelineConfigRequest.Action
        try:
            act = kinds.Value(action)
        except ValueError:
            raise ControllerError(f"unknown pipeline action {action!r} (one of "
                                  f"{', '.join(n for n in kinds.keys() if n != 'UNSPECIFIED')})"
                                  ) from None
        req = self.pb.SetForwardingPipelineConfigRequest(device_id=self.device_id, action=act)
        req.election_id.low = self.election_id & ((1 << 64) - 1)
        req.election_id.high = self.election_id >> 64
        req.config.p4info.CopyFrom(p4info)
        req.config.p4_device_config = bytes(device_config)
        self._call(self.stub.SetForwardingPipelineConfig, req)
        if action not in ("VERIFY", "VERIFY_AND_SAVE"):
            self._load_p4info(p4info)

    def set_forwarding_pipeline(self, program: str, p4info: p4info_pb2.P4Info | None = None,
                                include_dirs: list[str] | None = None) -> None:
        """Replace the soft switch's program: ``program`` is a path on the
        switch's host; the P4Info is built here unless given."""
        from switches.soft.p4info import p4info_for_program  # protobuf: see _load_p4info

        if p4info is None:
            p4info = p4info_for_program(program, include_dirs or ())
        cfg: dict[str, str | list[str]] = {"program": os.path.abspath(program)}
        if include_dirs:
            cfg["include_dirs"] = [os.path.abspath(d) for d in include_dirs]
        self.set_pipeline_config(p4info, json.dumps(cfg).encode())

    # -- RPC helpers -------------------------------------------------------------
    def _call(self, fn: Callable[[_Req], _Resp], req: _Req) -> _Resp:
        try:
            return fn(req)
        except self._grpc.RpcError as e:
            raise self._error(e) from None

    def _error(self, e: grpc.Call) -> ControllerError:
        # ``e``: the RpcError a call raised, which is also the call (grpc.Call)
        msg = e.details() or str(e)
        code = e.code().name if e.code() else ""
        for k, v in e.trailing_metadata() or ():
            if k == "grpc-status-details-bin":
                from google.rpc import status_pb2

                st = status_pb2.Status.FromString(v)
                for d in st.details:
                    err = self.pb.Error()
                    d.Unpack(err)
                    if err.canonical_code:
                        code = next((c.name for c in self._grpc.StatusCode
                                     if c.value[0] == err.canonical_code), code)
                        msg = err.message
                        break
        return ControllerError(msg, code)

    def _write(self, *updates: pb.Update) -> None:
        req = self.pb.WriteRequest(device_id=self.device_id)
        req.election_id.low = self.election_id & ((1 << 64) - 1)
        req.election_id.high = self.election_id >> 64
        req.updates.extend(updates)
        self._call(self.stub.Write, req)

    def _read(self, *entities: pb.Entity) -> list[pb.Entity]:
        req = self.pb.ReadRequest(device_id=self.device_id)
        req.entities.extend(entities)
        try:
            out = []
            for resp in self.stub.Read(req):
                out.extend(resp.entities)
            return out
        except self._grpc.RpcError as e:
            raise self._error(e) from None

    @staticmethod
    def _bytes(v: int) -> bytes:
        return v.to_bytes(max(1, (v.bit_length() + 7) // 8), "big")

    # -- tables --------------------------------------------------------------
    def _table_entry(self, table: str, match: Match | None, priority: int | None
                     ) -> tuple[p4info_pb2.Table, pb.TableEntry]:
        t = self._get("tables", table)
        te = self.pb.TableEntry(table_id=t.preamble.id)
        if match is None:
            return t, te
        fields = {m.name: m for m in t.match_fields}
        given = {resolve(list(fields), k, "match field"): v for k, v in match.items()}
        for name, mf in fields.items():
            v = given.get(name)
            w = mf.bitwidth
            full = (1 << w) - 1
            kind = mf.match_type
            if kind == 2:  # EXACT
                if v is None:
                    raise ControllerError(f"exact match field {name} needs a value")
                te.match.add(field_id=mf.id).exact.value = self._bytes(to_int(v, w))
            elif v is None:
                continue
            elif kind == 3:  # LPM
                val, plen = lpm(v)
                if plen == 0:
                    continue
                iv = to_int(val, w) & (((1 << plen) - 1) << (w - plen))
                fm = te.match.add(field_id=mf.id)
                fm.lpm.value = self._bytes(iv)
                fm.lpm.prefix_len = plen
            elif kind == 4:  # TERNARY
                val, mask = v if isinstance(v, tuple) else (v, full)
                m = to_int(mask, w)
                if m == 0:
                    continue
                fm = te.match.add(field_id=mf.id)
                fm.ternary.value = self._bytes(to_int(val, w) & m)
                fm.ternary.mask = self._bytes(m)
            elif kind == 5:  # RANGE
                lo, hi = v if isinstance(v, tuple) else (v, v)
                lo_i, hi_i = to_int(lo, w), to_int(hi, w)
                if lo_i == 0 and hi_i == full:
                    continue
                fm = te.match.add(field_id=mf.id)
                fm.range.low = self._bytes(lo_i)
                fm.range.high = self._bytes(hi_i)
            elif kind == 6:  # OPTIONAL
                te.match.add(field_id=mf.id).optional.value = self._bytes(to_int(v, w))
        if any(m.match_type in (4, 5, 6) for m in t.match_fields):
            if priority is None:
                raise ControllerError(f"table {t.preamble.name} needs a priority")
            te.priority = priority
        return t, te

    def _set_action(self, t: p4info_pb2.Table, te: pb.TableEntry, action: str,
                    params: Params | None) -> None:
        self._fill_action(te.action.action, {r.id for r in t.action_refs}, action, params)

    def _fill_action(self, msg: pb.Action, allowed: set[int], action: str,
                     params: Params | None) -> None:
        """A p4.v1.Action: one of the ``allowed`` action ids, with its parameters."""
        acts = {a.preamble.name: a for a in self.p4info.actions if a.preamble.id in allowed}
        a = acts[resolve(list(acts), action, "action")]
        given = dict(params or {})
        msg.action_id = a.preamble.id
        for p in a.params:
            if p.name not in given:
                raise ControllerError(f"action {a.preamble.name} needs parameter {p.name}")
            msg.params.add(param_id=p.id, value=self._bytes(to_int(given.pop(p.name), p.bitwidth)))
        if given:
            raise ControllerError(f"action {a.preamble.name} has no parameter(s) "
                                  f"{', '.join(given)}")

    # -- action profiles and selectors -------------------------------------------
    def _profile_actions(self, ap: p4info_pb2.ActionProfile) -> set[int]:
        tables = {t.preamble.id: t for t in self.p4info.tables}
        return {r.id for tid in ap.table_ids if tid in tables for r in tables[tid].action_refs
                if r.scope != 2}  # not DEFAULT_ONLY

    def _exists(self, **entity: Message) -> bool:
        try:
            return bool(self._read(self.pb.Entity(**entity)))
        except ControllerError as e:
            if e.code == "NOT_FOUND":
                return False
            raise

    def profile_member_set(self, profile: str, member: int, action: str,
                           params: Params | None = None) -> None:
        ap = self._get("action_profiles", profile)
        m = self.pb.ActionProfileMember(action_profile_id=ap.preamble.id, member_id=member)
        probe = self.pb.ActionProfileMember(action_profile_id=ap.preamble.id, member_id=member)
        self._fill_action(m.action, self._profile_actions(ap), action, params)
        kind = "MODIFY" if self._exists(action_profile_member=probe) else "INSERT"
        self._write(self._update(kind, action_profile_member=m))

    def profile_member_delete(self, profile: str, member: int) -> None:
        ap = self._get("action_profiles", profile)
        m = self.pb.ActionProfileMember(action_profile_id=ap.preamble.id, member_id=member)
        self._write(self._update("DELETE", action_profile_member=m))

    def profile_group_set(self, profile: str, group: int, members: list[int]) -> None:
        ap = self._get("action_profiles", profile)
        g = self.pb.ActionProfileGroup(action_profile_id=ap.preamble.id, group_id=group)
        probe = self.pb.ActionProfileGroup(action_profile_id=ap.preamble.id, group_id=group)
        for mid in dict.fromkeys(members):
            g.members.add(member_id=mid, weight=1)
        kind = "MODIFY" if self._exists(action_profile_group=probe) else "INSERT"
        self._write(self._update(kind, action_profile_group=g))

    def profile_group_delete(self, profile: str, group: int) -> None:
        ap = self._get("action_profiles", profile)
        g = self.pb.ActionProfileGroup(action_profile_id=ap.preamble.id, group_id=group)
        self._write(self._update("DELETE", action_profile_group=g))

    def table_add_indirect(self, table: str, match: Match, *,
                           member: int | None = None, group: int | None = None,
                           priority: int | None = None) -> None:
        if (member is None) == (group is None):
            raise ControllerError("table_add_indirect takes one member or one group")
        _, te = self._table_entry(table, match, priority)
        if group is not None:
            te.action.action_profile_group_id = group
        else:
            te.action.action_profile_member_id = member or 0
        self._write(self._update("INSERT", table_entry=te))

    def _update(self, kind: str, **entity: Message) -> pb.Update:
        return self.pb.Update(type=getattr(self.pb.Update, kind), entity=self.pb.Entity(**entity))

    def table_add(self, table: str, match: Match, action: str,
                  params: Params | None = None, priority: int | None = None) -> None:
        t, te = self._table_entry(table, match, priority)
        self._set_action(t, te, action, params)
        self._write(self._update("INSERT", table_entry=te))

    def table_modify(self, table: str, match: Match, action: str,
                     params: Params | None = None, priority: int | None = None) -> None:
        t, te = self._table_entry(table, match, priority)
        self._set_action(t, te, action, params)
        self._write(self._update("MODIFY", table_entry=te))

    def action_params(self, table: str, action: str) -> tuple[str, list[str]]:
        t = self._get("tables", table)
        allowed = {r.id for r in t.action_refs}
        acts = {a.preamble.name: a for a in self.p4info.actions if a.preamble.id in allowed}
        a = acts[resolve(list(acts), action, "action")]
        return a.preamble.name, [p.name for p in a.params]

    def table_set_default(self, table: str, action: str,
                          params: Params | None = None) -> None:
        t, te = self._table_entry(table, None, None)
        te.is_default_action = True
        self._set_action(t, te, action, params)
        self._write(self._update("MODIFY", table_entry=te))

    def table_reset_default(self, table: str) -> None:
        _, te = self._table_entry(table, None, None)
        te.is_default_action = True
        self._write(self._update("MODIFY", table_entry=te))

    def table_delete(self, table: str, match: Match, priority: int | None = None) -> None:
        _, te = self._table_entry(table, match, priority)
        self._write(self._update("DELETE", table_entry=te))

    def table_entries(self, table: str) -> list[TableEntry]:
        t, te = self._table_entry(table, None, None)
        if t.direct_resource_ids:
            te.counter_data.SetInParent()
        fields = {m.id: m for m in t.match_fields}
        actions = {a.preamble.id: a for a in self.p4info.actions}
        dc = {c.preamble.id for c in self.p4info.direct_counters}
        has_counter = any(r in dc for r in t.direct_resource_ids)
        out = []
        for ent in self._read(self.pb.Entity(table_entry=te)):
            e = ent.table_entry
            match: dict[str, KeyMatch] = {}
            for fm in e.match:
                mf = fields[fm.field_id]
                which = fm.WhichOneof("field_match_type")
                if which == "exact":
                    match[mf.name] = int.from_bytes(fm.exact.value, "big")
                elif which == "lpm":
                    match[mf.name] = (int.from_bytes(fm.lpm.value, "big"), fm.lpm.prefix_len)
                elif which == "ternary":
                    match[mf.name] = (int.from_bytes(fm.ternary.value, "big"),
                                      int.from_bytes(fm.ternary.mask, "big"))
                elif which == "range":
                    match[mf.name] = (int.from_bytes(fm.range.low, "big"),
                                      int.from_bytes(fm.range.high, "big"))
                elif which == "optional":
                    match[mf.name] = int.from_bytes(fm.optional.value, "big")
            a = actions.get(e.action.action.action_id)
            pnames = {p.id: p.name for p in a.params} if a is not None else {}
            params = {pnames.get(p.param_id, str(p.param_id)): int.from_bytes(p.value, "big")
                      for p in e.action.action.params}
            out.append(TableEntry(
                t.preamble.name, match, a.preamble.name if a is not None else "", params,
                e.priority or None,
                (e.counter_data.packet_count, e.counter_data.byte_count) if has_counter
                else None))
        return out

    # -- PRE --------------------------------------------------------------------
    def mc_group_set(self, group: int, ports: list[int], rid: int = 0) -> None:
        pre = self.pb.PacketReplicationEngineEntry()
        pre.multicast_group_entry.multicast_group_id = group
        for p in ports:
            pre.multicast_group_entry.replicas.add(egress_port=p, instance=rid)
        self._upsert(packet_replication_engine_entry=pre)

    def clone_session_set(self, session: int, port: int) -> None:
        pre = self.pb.PacketReplicationEngineEntry()
        pre.clone_session_entry.session_id = session
        pre.clone_session_entry.replicas.add(egress_port=port)
        self._upsert(packet_replication_engine_entry=pre)

    def _upsert(self, **entity: Message) -> None:
        try:
            self._write(self._update("INSERT", **entity))
        except ControllerError as e:
            if e.code != "ALREADY_EXISTS":
                raise
            self._write(self._update("MODIFY", **entity))

    # -- externs ----------------------------------------------------------------
    def register_read(self, register: str, index: int | None = None) -> int | list[int]:
        r = self._get("registers", register)
        re_ = self.pb.RegisterEntry(register_id=r.preamble.id)
        if index is not None:
            re_.index.index = index
        try:
            got = self._read(self.pb.Entity(register_entry=re_))
        except ControllerError as e:
            if e.code == "UNIMPLEMENTED" and self.cli is not None:
                return self.cli.register_read(r.preamble.name, index)
            raise
        vals = {x.register_entry.index.index: int.from_bytes(x.register_entry.data.bitstring,
                                                             "big") for x in got}
        if index is not None:
            return vals[index]
        return [vals[i] for i in sorted(vals)]

    def register_write(self, register: str, index: int, value: Value) -> None:
        r = self._get("registers", register)
        re_ = self.pb.RegisterEntry(register_id=r.preamble.id)
        re_.index.index = index
        re_.data.bitstring = self._bytes(to_int(value, r.type_spec.bitstring.bit.bitwidth or None))
        try:
            self._write(self._update("MODIFY", register_entry=re_))
        except ControllerError as e:
            if e.code == "UNIMPLEMENTED" and self.cli is not None:
                self.cli.register_write(r.preamble.name, index, value)
                return
            raise

    def counter_read(self, counter: str, index: int) -> tuple[int, int]:
        c = self._get("counters", counter)
        ce = self.pb.CounterEntry(counter_id=c.preamble.id)
        ce.index.index = index
        got = self._read(self.pb.Entity(counter_entry=ce))
        d = got[0].counter_entry.data
        return d.packet_count, d.byte_count

    # -- packet I/O and digests ---------------------------------------------------
    def packet_out(self, payload: bytes, **metadata: Value) -> None:
        """Send ``payload`` into the switch through its CPU port with the
        packet_out controller-header fields given by name."""
        req = self.pb.StreamMessageRequest()
        req.packet.payload = payload
        hdr = self._names["controller_packet_metadata"].get("packet_out")
        for m in (hdr.metadata if hdr is not None else []):
            req.packet.metadata.add(metadata_id=m.id,
                                    value=self._bytes(to_int(metadata.pop(m.name, 0), m.bitwidth)))
        if metadata:
            raise ControllerError(f"no packet_out field(s) {', '.join(metadata)}")
        self._requests.put(req)

    def packet_in(self, timeout: float | None = None) -> tuple[bytes, dict[str, int]]:
        """The next packet the switch sent to the controller: (payload, metadata by name)."""
        try:
            p = self.packets_in.get(timeout=timeout)
        except queue.Empty:
            raise ControllerError("no packet-in", "TIMEOUT") from None
        hdr = self._names["controller_packet_metadata"].get("packet_in")
        names = {m.id: m.name for m in hdr.metadata} if hdr is not None else {}
        return p.payload, {names.get(m.metadata_id, str(m.metadata_id)):
                           int.from_bytes(m.value, "big") for m in p.metadata}

    def digest_enable(self, digest: str, max_timeout_ns: int = 0, max_list_size: int = 1,
                      ack_timeout_ns: int = 0) -> None:
        d = self._get("digests", digest)
        de = self.pb.DigestEntry(digest_id=d.preamble.id)
        de.config.max_timeout_ns = max_timeout_ns
        de.config.max_list_size = max_list_size
        de.config.ack_timeout_ns = ack_timeout_ns
        self._upsert(digest_entry=de)

    def digest_list(self, timeout: float | None = None, ack: bool = True) -> tuple[str, list[list[int]]]:
        """The next DigestList: (digest name, one list of member values per digest)."""
        try:
            dl = self.digests_in.get(timeout=timeout)
        except queue.Empty:
            raise ControllerError("no digest", "TIMEOUT") from None
        if ack:
            req = self.pb.StreamMessageRequest()
            req.digest_ack.digest_id = dl.digest_id
            req.digest_ack.list_id = dl.list_id
            self._requests.put(req)
        name = next((n for n, d in self._names["digests"].items()
                     if d.preamble.id == dl.digest_id), str(dl.digest_id))
        return name, [[int.from_bytes(m.bitstring, "big") for m in d.struct.members]
                      for d in dl.data]

    # -- through the CLI ---------------------------------------------------------
    def _need_cli(self, what: str) -> CliController:
        if self.cli is None:
            raise ControllerError(f"{what} needs a CLI connection (P4RuntimeController(cli=...))")
        return self.cli

    def set_queue_depth(self, depth: int, port: int | None = None,
                        priority: int | None = None) -> None:
        self._need_cli("set_queue_depth").set_queue_depth(depth, port, priority)

    def set_queue_rate(self, pps: int, port: int | None = None,
                       priority: int | None = None) -> None:
        self._need_cli("set_queue_rate").set_queue_rate(pps, port, priority)

    def set_port_rate_bps(self, bps: int, port: int | None = None) -> None:
        self._need_cli("set_port_rate_bps").set_port_rate_bps(bps, port)

    def set_priority_weights(self, port: int, weights: list[int] | None) -> None:
        self._need_cli("set_priority_weights").set_priority_weights(port, weights)

    def close(self) -> None:
        self._requests.put(None)
        try:
            self._stream.cancel()
        except Exception:
            pass
        self.channel.close()
        if self.cli is not None:
            self.cli.close()


__all__ = ["P4RuntimeController"]
