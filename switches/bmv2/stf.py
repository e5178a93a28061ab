"""The project's STF tests on BMv2: the same files the soft target runs
(``switches/p4/tests/*.stf``), so both targets are held to one expectation.

    result = run_stf_bmv2("switches/p4/l3_router.p4", "switches/p4/tests/l3_router.stf")

Needs root: each STF port becomes a veth pair in the root namespace, the
switch (``simple_switch_grpc --no-p4``) on one end, this process injecting
and capturing frames on the other through packet sockets. The program goes
in over P4Runtime as on a Mininet node; ``add``/``setdefault`` become
P4Runtime writes, other simple_switch_CLI verbs go through the CLI. BMv2
forwards asynchronously, so a control command after packets waits until the
outputs settle, and the verdict is taken once no frame came for a while.
Syntax, names, value forms and the verdict are :mod:`switches.stf`'s, as on
the soft target. Not supported: ``check_counter``, ``remove``.
"""

from __future__ import annotations

import os
import socket
import subprocess
import tempfile
import threading
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from ground.netlink import NetlinkError, add_veth, delete_link, set_link_up
from switches.bmv2.compile import ToolMissing, compile_bmv2
from switches.bmv2.control import load_p4c_p4info, push_pipeline
from switches.bmv2.launch import (
    NO_THRIFT_MARK,
    SWITCH_EXE,
    SWITCH_MISSING,
    free_port,
    switch_command,
    wait_listening,
)
from switches.controller.api import ControllerError
from switches.controller.p4runtime import P4RuntimeController
from switches.process import launch, stop_process
from switches.stf.engine import Entry, KeyField, TableView, run_commands
from switches.stf.syntax import StfError, StfSyntaxError, parse_stf, stf_ports
from switches.stf.verdict import StfResult
from switches.targets import BMV2

ETH_P_ALL = 0x0003
PACKET_OUTGOING = 4
QUIET_S = 0.5  # no frame for this long: the switch is done with what it got
SETTLE_MAX_S = 10.0


class _Wire:
    """Packet sockets on the host ends of the veth pairs, with a reader thread."""

    def __init__(self, ends: Mapping[int, str]) -> None:
        self.socks: dict[int, socket.socket] = {}
        for port, ifname in ends.items():
            s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(ETH_P_ALL))
            s.bind((ifname, 0))
            s.settimeout(0.1)
            self.socks[port] = s
        self.received: dict[int, list[bytes]] = {}
        self.last_rx = time.monotonic()
        self.last_tx = 0.0
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._threads = [threading.Thread(target=self._read, args=(p, s), daemon=True)
                         for p, s in self.socks.items()]
        for t in self._threads:
            t.start()

    def _read(self, port: int, s: socket.socket) -> None:
        while not self._stop.is_set():
            try:
                frame, addr = s.recvfrom(65535)
            except TimeoutError:
                continue
            except OSError:
                return
            if addr[2] == PACKET_OUTGOING:  # what we sent into the switch
                continue
            with self._lock:
                self.received.setdefault(port, []).append(frame)
                self.last_rx = time.monotonic()

    def send(self, port: int, frame: bytes) -> None:
        if port not in self.socks:
            raise StfError(f"no port {port}")
        self.socks[port].send(frame)
        self.last_tx = time.monotonic()

    def settle(self, quiet: float = QUIET_S, limit: float = SETTLE_MAX_S) -> None:
        """Wait until no frame arrived for ``quiet`` seconds after the last send."""
        deadline = time.monotonic() + limit
        while time.monotonic() < deadline:
            now = time.monotonic()
            if now - max(self.last_rx, self.last_tx) >= quiet:
                return
            time.sleep(0.02)

    def snapshot(self) -> dict[int, list[bytes]]:
        """The frames received so far, per port."""
        with self._lock:
            return {p: list(f) for p, f in self.received.items()}

    def close(self) -> None:
        self._stop.set()
        for t in self._threads:
            t.join(1)
        for s in self.socks.values():
            s.close()


def _make_veths(ports: Sequence[int], tag: str) -> dict[int, tuple[str, str]]:
    """(switch end, host end) per port, up, without IPv6 (no stray ND frames)."""
    pairs: dict[int, tuple[str, str]] = {}
    try:
        for p in ports:
            sw_end, host_end = f"{tag}s{p}", f"{tag}h{p}"
            add_veth(sw_end, host_end)
            pairs[p] = (sw_end, host_end)
            for end in (sw_end, host_end):
                Path(f"/proc/sys/net/ipv6/conf/{end}/disable_ipv6").write_text("1\n")
                set_link_up(end)
    except BaseException:
        _del_veths(pairs)
        raise
    return pairs


def _del_veths(pairs: Mapping[int, tuple[str, str]]) -> None:
    for sw_end, _ in pairs.values():
        try:
            delete_link(sw_end)
        except NetlinkError:
            pass            # cleanup: the other pairs still go


_MATCH_KINDS = {2: "exact", 3: "lpm", 4: "ternary", 5: "range", 6: "optional"}  # p4info MatchType


class Bmv2StfTarget:
    """BMv2 as an STF target: frames over the veth pairs, entries as
    P4Runtime writes, other simple_switch_CLI verbs through the CLI. BMv2
    forwards asynchronously: a control command after packets first waits
    until the outputs settle, so those packets see the old state."""

    def __init__(self, ctl: P4RuntimeController, wire: _Wire) -> None:
        self.command_errors: tuple[type[Exception], ...] = (ControllerError, KeyError,
                                                            ValueError)
        self.ctl = ctl
        self.wire = wire
        self._sent = False  # packets sent since the outputs last settled
        self._entries = 0
        actions = {a.preamble.id: a for a in ctl.p4info.actions}
        self._params = {a.preamble.name: [(p.name, p.bitwidth) for p in a.params]
                        for a in ctl.p4info.actions}
        self._views = {
            t.preamble.name: TableView(
                t.preamble.name,
                tuple(KeyField(f.name, _MATCH_KINDS.get(f.match_type, "exact"), f.bitwidth)
                      for f in t.match_fields),
                tuple(actions[r.id].preamble.name for r in t.action_refs if r.id in actions))
            for t in ctl.p4info.tables}

    def tables(self) -> Mapping[str, TableView]:
        return self._views

    def action_params(self, action: str) -> Sequence[tuple[str, int]]:
        return self._params.get(action, [])

    def send(self, port: int, frame: bytes) -> None:
        self.wire.send(port, frame)
        self._sent = True

    def settle(self) -> None:
        self.wire.settle()
        self._sent = False

    def _before_control(self) -> None:
        if self._sent:
            self.settle()

    def outputs(self) -> Mapping[int, Sequence[bytes]]:
        return self.wire.snapshot()

    def add(self, entry: Entry) -> int:
        self._before_control()
        view = self._views[entry.table]
        match: dict[str, Any] = {}
        for key, m in zip(view.keys, entry.matches, strict=True):
            if m is None:
                continue  # not given: P4Runtime's don't-care (omitted field)
            if key.kind == "optional":
                assert isinstance(m, tuple)
                if m[1]:
                    match[key.name] = m[0]
            else:
                match[key.name] = m
        self.ctl.table_add(entry.table, match, entry.action, dict(entry.args),
                           priority=entry.rank)
        self._entries += 1
        return self._entries

    def set_default(self, table: str, action: str, args: tuple[tuple[str, int], ...]) -> None:
        self._before_control()
        self.ctl.table_set_default(table, action, dict(args))

    def remove_all(self) -> None:
        raise StfError("remove is not supported on BMv2 by this runner")

    def read_counter(self, name: str, index: int | tuple[str, int]) -> tuple[int, int]:
        raise StfError("check_counter is not supported on BMv2 by this runner")

    def cli(self, line: str) -> None:
        self._before_control()
        if self.ctl.cli is None:
            raise StfError("this BMv2 build has no Thrift server for CLI commands")
        self.ctl.cli.execute(line)


def run_stf_bmv2(p4_path: str | os.PathLike[str], stf_path: str | os.PathLike[str], *,
                 include_dirs: Sequence[str] = (), build_dir: str | None = None,
                 log_dir: str | None = None, ready_timeout: float = 60.0) -> StfResult:
    """Run one STF test against BMv2 (root). Raises ToolMissing without BMv2,
    P4cError when p4c rejects the program, Bmv2StartError when the switch
    does not come up, StfSyntaxError when a line is not STF or names a table
    the program does not have; mismatches are in the result."""
    import shutil

    exe = shutil.which(SWITCH_EXE)
    if exe is None:
        raise ToolMissing(SWITCH_MISSING)
    commands = parse_stf(Path(stf_path).read_text(), str(stf_path))
    work = Path(log_dir or tempfile.mkdtemp(prefix="bmv2-stf-"))
    work.mkdir(parents=True, exist_ok=True)
    json_path, p4info_path = compile_bmv2(p4_path, build_dir or work / "build", include_dirs)
    ports = stf_ports(commands)
    tag = f"t{os.getpid() % 100000}"
    pairs = _make_veths(ports, tag)
    proc = None
    ctl = None
    wire = None
    log_file = str(work / "switch.log")
    out_file = str(work / "switch.out")
    try:
        thrift, grpc_port = free_port(), free_port()
        cmd = switch_command(exe, [(p, sw) for p, (sw, _) in pairs.items()], device_id=0,
                             thrift_port=thrift, grpc_port=grpc_port, log_file=log_file)
        proc = launch(cmd, out_file)
        logs = [log_file, log_file + ".txt", out_file]
        opened = wait_listening(proc, {"grpc": grpc_port, "thrift": thrift}, ready_timeout,
                                f"simple_switch_grpc for {stf_path}", logs,
                                optional={"thrift": NO_THRIFT_MARK})
        ctl = BMV2.p4runtime_controller(grpc_port, load_p4c_p4info(p4info_path), 0,
                                        thrift if "thrift" in opened else None)
        push_pipeline(ctl, p4info_path, json_path)
        wire = _Wire({p: host for p, (_, host) in pairs.items()})
        return run_commands(commands, Bmv2StfTarget(ctl, wire), str(stf_path))
    finally:
        if wire is not None:
            wire.close()
        if ctl is not None:
            ctl.close()
        stop_process(proc)
        _del_veths(pairs)


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m switches.bmv2.stf prog.p4 test.stf [-I dir]`` (root): 0 pass,
    1 mismatch (each printed), 2 the test could not run."""
    import argparse
    import sys

    from switches.bmv2.compile import P4cError
    from switches.bmv2.launch import Bmv2StartError

    ap = argparse.ArgumentParser(prog="python -m switches.bmv2.stf",
                                 description="Run an STF test against BMv2.")
    ap.add_argument("program")
    ap.add_argument("stf")
    ap.add_argument("-I", dest="include_dirs", action="append", default=[])
    ap.add_argument("--log-dir", help="switch logs (default: a new temporary directory)")
    args = ap.parse_args(argv)
    try:
        result = run_stf_bmv2(args.program, args.stf, include_dirs=args.include_dirs,
                              log_dir=args.log_dir)
    except (StfSyntaxError, ToolMissing, P4cError, Bmv2StartError, OSError,
            subprocess.CalledProcessError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    for m in result.mismatches:
        print(m)
    print(f"{'PASS' if result.passed else 'FAIL'}: {args.stf} ({result.packets} packets)")
    return 0 if result.passed else 1


if __name__ == "__main__":
    raise SystemExit(main())


__all__ = ["Bmv2StfTarget", "main", "run_stf_bmv2"]
