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
Expectations, value syntax and the verdict are the soft runner's
(:mod:`switches.soft.stf`). Not supported: ``check_counter``, ``remove``.
"""

from __future__ import annotations

import os
import re
import socket
import subprocess
import tempfile
import threading
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from switches.bmv2.compile import ToolMissing, compile_bmv2
from switches.bmv2.control import p4runtime_controller, push_pipeline
from switches.bmv2.launch import (
    NO_THRIFT_MARK,
    SWITCH_EXE,
    SWITCH_MISSING,
    free_port,
    launch,
    stop_process,
    switch_command,
    wait_listening,
)
from switches.soft.stf import (
    STF_ACTION_RE,
    StfError,
    StfResult,
    StfRunner,
    parse_stf_int,
    parse_stf_lpm,
    parse_stf_ternary,
    resolve_stf_name,
)

ETH_P_ALL = 0x0003
PACKET_OUTGOING = 4
QUIET_S = 0.5  # no frame for this long: the switch is done with what it got
SETTLE_MAX_S = 10.0
PRIO_GIVEN = 1 << 20  # STF priorities (higher wins) sit above the entries without one
PRIO_NONE = 1 << 19  # entries without a priority: earlier ones win


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

    def close(self) -> None:
        self._stop.set()
        for t in self._threads:
            t.join(1)
        for s in self.socks.values():
            s.close()


def _ip(*args: str) -> None:
    subprocess.run(["ip", *args], check=True, capture_output=True, text=True)


def _make_veths(ports: Sequence[int], tag: str) -> dict[int, tuple[str, str]]:
    """(switch end, host end) per port, up, without IPv6 (no stray ND frames)."""
    pairs: dict[int, tuple[str, str]] = {}
    try:
        for p in ports:
            sw_end, host_end = f"{tag}s{p}", f"{tag}h{p}"
            _ip("link", "add", sw_end, "type", "veth", "peer", "name", host_end)
            pairs[p] = (sw_end, host_end)
            for end in (sw_end, host_end):
                Path(f"/proc/sys/net/ipv6/conf/{end}/disable_ipv6").write_text("1\n")
                _ip("link", "set", end, "up")
    except BaseException:
        _del_veths(pairs)
        raise
    return pairs


def _del_veths(pairs: Mapping[int, tuple[str, str]]) -> None:
    for sw_end, _ in pairs.values():
        subprocess.run(["ip", "link", "del", sw_end], capture_output=True)


def stf_ports(text: str) -> list[int]:
    """The ports a test sends to or expects on."""
    ports = set()
    for raw in text.splitlines():
        m = re.match(r"\s*(packet|expect)\s+(\d+)", raw.split("#", 1)[0], re.IGNORECASE)
        if m:
            ports.add(int(m.group(2)))
    return sorted(ports)


class _Bmv2Control:
    """STF control commands as P4Runtime writes (tables) or CLI lines."""

    def __init__(self, ctl: Any) -> None:
        self.ctl = ctl
        self.tables = {t.preamble.name: t for t in ctl.p4info.tables}
        self.actions = {a.preamble.id: a for a in ctl.p4info.actions}
        self._noprio = 0

    def _table(self, name: str) -> Any:
        return self.tables[resolve_stf_name(list(self.tables), name.strip('"'), "table")]

    def _action(self, table: Any, name: str) -> str:
        allowed = {r.id for r in table.action_refs}
        names = [a.preamble.name for i, a in self.actions.items() if i in allowed]
        return resolve_stf_name(names, name.strip('"'), "action")

    @staticmethod
    def _args(text: str) -> dict[str, int]:
        out = {}
        for part in [p for p in text.split(",") if p.strip()]:
            k, sep, v = part.partition(":")
            if not sep:
                raise StfError(f"action argument '{part.strip()}' is not <name>:<value>")
            out[k.strip()] = parse_stf_int(v)
        return out

    def add(self, text: str) -> None:
        m = STF_ACTION_RE.search(text)
        if not m:
            raise StfError("add needs an action call <action>(<args>)")
        head = text[:m.start()].split()
        if not head:
            raise StfError("add needs a table name")
        table = self._table(head[0])
        toks = head[1:]
        prio = None
        if toks and re.fullmatch(r"[0-9]+", toks[0]):
            prio = int(toks[0])
            toks = toks[1:]
        fields = {f.name: f for f in table.match_fields}
        match: dict[str, Any] = {}
        for tok in toks:
            kname, sep, val = tok.rpartition(":")
            if not sep:
                raise StfError(f"key '{tok}' is not <field>:<value>")
            f = fields[resolve_stf_name(list(fields), kname.strip('"'), "key field")]
            kind = f.match_type  # p4info MatchType: 2 exact 3 lpm 4 ternary 5 range 6 optional
            if kind == 3:
                match[f.name] = parse_stf_lpm(val, f.bitwidth)
            elif kind in (4, 6):
                v, mask = parse_stf_ternary(val, f.bitwidth)
                match[f.name] = (v & mask, mask) if kind == 4 else v
            elif kind == 5:
                lo, _, hi = val.partition("->")
                match[f.name] = (parse_stf_int(lo), parse_stf_int(hi or lo))
            else:
                match[f.name] = parse_stf_int(val)
        needs_prio = any(f.match_type in (4, 5, 6) for f in table.match_fields)
        p4rt_prio = None
        if needs_prio:
            if prio is not None:
                p4rt_prio = PRIO_GIVEN + prio
            else:
                self._noprio += 1
                p4rt_prio = PRIO_NONE - self._noprio
        action = self._action(table, m.group(1))
        self.ctl.table_add(table.preamble.name, match, action, self._args(m.group(2)),
                           priority=p4rt_prio)

    def setdefault(self, text: str) -> None:
        m = STF_ACTION_RE.search(text)
        head = text[:m.start()].split() if m else []
        if not m or len(head) != 1:
            raise StfError("setdefault <table> <action>(<args>)")
        table = self._table(head[0])
        action = self._action(table, m.group(1))
        self.ctl.table_set_default(table.preamble.name, action, self._args(m.group(2)))

    def cli(self, line: str) -> None:
        if self.ctl.cli is None:
            raise StfError("this BMv2 build has no Thrift server for CLI commands")
        self.ctl.cli.execute(line)


def run_stf_bmv2(p4_path: str | os.PathLike[str], stf_path: str | os.PathLike[str], *,
                 include_dirs: Sequence[str] = (), build_dir: str | None = None,
                 log_dir: str | None = None, ready_timeout: float = 60.0) -> StfResult:
    """Run one STF test against BMv2 (root). Raises ToolMissing without BMv2,
    P4cError when p4c rejects the program, Bmv2StartError when the switch
    does not come up; mismatches and bad STF lines are in the result."""
    import shutil

    exe = shutil.which(SWITCH_EXE)
    if exe is None:
        raise ToolMissing(SWITCH_MISSING)
    text = Path(stf_path).read_text()
    work = Path(log_dir or tempfile.mkdtemp(prefix="bmv2-stf-"))
    work.mkdir(parents=True, exist_ok=True)
    json_path, p4info_path = compile_bmv2(p4_path, build_dir or work / "build", include_dirs)
    ports = stf_ports(text)
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
        ctl = p4runtime_controller(grpc_port, p4info_path, 0,
                                   thrift if "thrift" in opened else None)
        push_pipeline(ctl, p4info_path, json_path)
        wire = _Wire({p: host for p, (_, host) in pairs.items()})
        return _run(text, wire, _Bmv2Control(ctl))
    finally:
        if wire is not None:
            wire.close()
        if ctl is not None:
            ctl.close()
        stop_process(proc)
        _del_veths(pairs)


def _run(text: str, wire: _Wire, control: _Bmv2Control) -> StfResult:
    from testbed.controller import ControllerError

    verdict = StfRunner(None)  # its expectations and verdict; the switch is BMv2
    sent_since_settle = False
    for n, raw in enumerate(text.splitlines(), 1):
        line = raw.split("#", 1)[0].strip()
        if not line:
            continue
        verb, rest = (line.split(None, 1) + [""])[:2]
        v = verb.lower()
        try:
            if v == "packet":
                port_s, data = (rest.split(None, 1) + [""])[:2]
                try:
                    frame = bytes.fromhex("".join(data.split()))
                except ValueError:
                    raise StfError(f"invalid packet data '{data}'") from None
                wire.send(int(port_s), frame)
                verdict.packets += 1
                sent_since_settle = True
            elif v == "expect":
                verdict.command(line)
            elif v in ("wait", "no_packet"):
                wire.settle()
                sent_since_settle = False
            elif v in ("check_counter", "remove"):
                raise StfError(f"{v} is not supported on BMv2 by this runner")
            else:
                if sent_since_settle:  # the packets before it see the old state
                    wire.settle()
                    sent_since_settle = False
                if v == "add":
                    control.add(rest)
                elif v == "setdefault":
                    control.setdefault(rest)
                else:
                    control.cli(line)
        except (StfError, ControllerError, ValueError, KeyError) as e:
            verdict.errors.append(f"line {n}: {line}: {e}")
    wire.settle()
    with wire._lock:
        verdict.outputs = {p: list(f) for p, f in wire.received.items()}
    mismatches = verdict.mismatches()
    return StfResult(not mismatches, verdict.packets, mismatches)


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
    except (ToolMissing, P4cError, Bmv2StartError, OSError, subprocess.CalledProcessError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    for m in result.mismatches:
        print(m)
    print(f"{'PASS' if result.passed else 'FAIL'}: {args.stf} ({result.packets} packets)")
    return 0 if result.passed else 1


if __name__ == "__main__":
    raise SystemExit(main())


__all__ = ["main", "run_stf_bmv2", "stf_ports"]
