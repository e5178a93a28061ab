"""The soft switch as a process: ``python -m switches.soft.daemon``.

Arguments follow BMv2's simple_switch where they overlap::

    python -m switches.soft.daemon --program router.p4 -i 1@s1-eth1 -i 2@s1-eth2 \\
        --control-port 9090 --log s1.log --ready-file s1.ready

The data path is one thread: it polls the port sockets, hands each frame to
the switch and transmits whatever the traffic manager releases, sleeping no
longer than the next queued release (rate-limited queues). A second thread
serves the control line protocol on loopback; commands run under the
switch's lock so they never interleave with a packet.

``--backend pypy`` runs the data path under PyPy: this process (CPython)
compiles the program, writes the generated module to a file and replaces
itself (same pid) with ``pypy3 -m switches.soft.daemon ... --generated FILE``
(see ``switches.soft.backends``). ``--backend python`` (the default) runs
everything here.

Timestamps are CLOCK_MONOTONIC microseconds, the clock every process of a
Mininet run shares.

``--grpc-port N`` also serves P4Runtime (``switches.soft.control.
p4runtime_server``) for ``--device-id``, with packet-in/out on
``--cpu-port``; it needs the ``p4runtime`` extra and ``--backend python``.

Besides the simple_switch_CLI verbs, the control server answers
``switch_stats`` with JSON: the pipeline's counters (``switch``), per-port
socket counters (``ports``; ``kernel_drops`` are frames the kernel dropped
because the switch did not read them in time), ``lag_us`` (how long frames
waited in the kernel before being processed, sampled once per batch),
``cpu_s`` and ``uptime_s``. Together they tell whether the switch kept up.
``switch_sample`` answers the few of them a timeline samples many times a
second (queue depths and drops per port, byte counters, drops, ``lag_us``,
``kernel_drops``): all of ``switch_stats``, 50 times a second, took about
0.9 ms a request in reflex-cases (about a tenth of the switch's Python
time), much of it under the lock its data path needs. ``switch_lag_max_reset`` restarts the lag maximum (the mean and
sample count keep counting), so a run can report the worst lag of each phase.

Exit codes: 0 clean shutdown, 2 bad arguments or missing files, 3 the P4
program did not compile, 4 a port could not be opened, 5 a --cli-file
command failed, 1 anything else.
"""

from __future__ import annotations

import argparse
import gc
import json
import logging
import os
import select
import signal
import sys
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from switches.soft.backends import (
    BACKENDS,
    daemon_interpreter_args,
    install_compat,
    interpreter,
    load_generated,
    write_generated,
)
from switches.soft.control.server import CommandFailed, ControlServer
from switches.soft.control.verbs import CommandError, ControlPlane
from switches.soft.pcap import PcapWriter
from switches.soft.ports import (
    SOCKET_BUFFER,
    Port,
    PortError,
    if_index,
    parse_interface_spec,
)
from switches.soft.runtime.contract import ProgramModule
from switches.soft.runtime.switch import SoftSwitch

if TYPE_CHECKING:  # (needs the optional p4runtime packages at run time)
    from switches.soft.control.p4runtime_server import P4RuntimeHandle

log = logging.getLogger("softswitch")

RECV_BATCH = 64
IDLE_POLL_MS = 500
FINE_WAIT_US = 2000
MAX_READ_ROUNDS = 32     # reads before the loop looks at its stop flag and the clock
# SwitchDaemon.release_by_clock. Measured with a lone QP (64 KiB WRITEs, CPython,
# 16 packets ahead in the hosts' qdisc), 1000 against 0: at 48 and 64 Mb/s
# 6 of 7 trials faithful against 4 of 7, queues behind the lone sender at
# most 4 packets against up to 15, frames behind the queues' clock 0-0.13%
# against 0.04-0.3% (hosts/roce/README.md, "Speed").
RELEASE_MARGIN_US = 1000
STATS_COMMAND = "switch_stats"
SAMPLE_COMMAND = "switch_sample"
LAG_MAX_RESET_COMMAND = "switch_lag_max_reset"


def now_us() -> int:
    return time.clock_gettime_ns(time.CLOCK_MONOTONIC) // 1000


class StartupError(Exception):
    def __init__(self, code: int, message: str) -> None:
        super().__init__(message)
        self.code = code


def build_arg_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m switches.soft.daemon",
        description="Run a P4_16 v1model program on raw network interfaces.",
    )
    p.add_argument("--program", required=True, help="P4_16 source file (v1model)")
    p.add_argument("-I", "--include", action="append", default=[], dest="include_dirs",
                   help="extra include directory for the P4 preprocessor")
    p.add_argument("-D", "--define", action="append", default=[], dest="defines",
                   help="preprocessor define NAME[=VALUE]")
    p.add_argument("-i", "--interface", action="append", default=[], dest="interfaces",
                   metavar="PORT@IFNAME", help="attach interface IFNAME as switch port PORT")
    p.add_argument("--control-port", type=int, default=9090,
                   help="TCP port of the control server on 127.0.0.1 (0: any free port)")
    p.add_argument("--log", help="log file (default: stderr)")
    p.add_argument("--log-level", default="info", choices=["debug", "info", "warning"],
                   help="debug: also a per-packet trace in the order of BMv2's -L debug "
                        "(parser states, tables hit/miss and actions, egress port and queue)")
    p.add_argument("--pcap-dir", help="write <ifname>_in.pcap / <ifname>_out.pcap here")
    p.add_argument("--priority-queues", type=int, default=1,
                   help="egress queues per port, strict priority (as simple_switch)")
    p.add_argument("--socket-buffer", type=int, default=SOCKET_BUFFER, metavar="BYTES",
                   help="receive/send buffer per port socket; frames beyond it are dropped "
                        "by the kernel (counted as kernel_drops)")
    p.add_argument("--cli-file", help="control commands to apply before any traffic")
    p.add_argument("--ready-file",
                   help="written (JSON: pid, control_port, grpc_port) once ports and control "
                        "server (and P4Runtime server) are up")
    p.add_argument("--grpc-port", type=int, default=None, metavar="PORT",
                   help="also serve P4Runtime on 127.0.0.1:PORT (0: any free port; off by "
                        "default; needs pip install -e '.[p4runtime]')")
    p.add_argument("--device-id", type=int, default=0,
                   help="P4Runtime device id (as simple_switch_grpc's --device-id)")
    p.add_argument("--cpu-port", type=int, default=None, metavar="PORT",
                   help="the port P4Runtime packet-in/out use (no interface may have it)")
    p.add_argument("--backend", default="python", choices=BACKENDS,
                   help="interpreter of the data path (default python: this one)")
    p.add_argument("--release-margin-us", type=int, default=RELEASE_MARGIN_US, metavar="US",
                   help="release the queues by the clock this long ago, so frames that "
                        "waited in a receive backlog up to that long still enter them at "
                        f"their arrival time (default {RELEASE_MARGIN_US}; 0: by the clock)")
    p.add_argument("--generated", help=argparse.SUPPRESS)  # set when re-executed by --backend
    return p


class SwitchDaemon:
    """Owns the switch, its ports, pcap writers and control server."""

    def __init__(self, switch: SoftSwitch, ports: list[Port], pcap_dir: str | None = None,
                 release_margin_us: int = 0) -> None:
        self.switch = switch
        # see release_by_clock
        if release_margin_us < 0:
            raise ValueError("release_margin_us must be >= 0")
        self.release_margin_us = release_margin_us
        self.control = ControlPlane(switch)
        self.ports: dict[int, Port] = {p.number: p for p in ports}
        self.pcaps_in: dict[int, PcapWriter] = {}
        self.pcaps_out: dict[int, PcapWriter] = {}
        if pcap_dir:
            os.makedirs(pcap_dir, exist_ok=True)
            for p in ports:
                self.pcaps_in[p.number] = PcapWriter(Path(pcap_dir) / f"{p.ifname}_in.pcap")
                self.pcaps_out[p.number] = PcapWriter(Path(pcap_dir) / f"{p.ifname}_out.pcap")
        self.server: ControlServer | None = None
        self.rx_errors = 0  # frames the pipeline raised on
        self.tx_no_port = 0  # frames for a port with no interface
        self.started_us = now_us()
        # CLOCK_REALTIME - CLOCK_MONOTONIC (ns), to put the kernel's receive
        # stamps on the switch's clock; refreshed at most every second
        self._wall_minus_mono = 0
        self._offset_checked_ns: int | None = None
        # Processing lag: how long the last frame of a batch waited in the
        # kernel before the pipeline had handled it (sampled once per batch).
        self.lag_max_us = 0
        self.lag_sum_us = 0
        self.lag_samples = 0
        # Frames that arrived less than half their own time on a link of the
        # port's rate after the previous one: the sender (or its kernel)
        # bunched them; a NIC never does. Per port, with the smallest gap.
        self.ingress_bunched: dict[int, int] = {}
        self.ingress_min_gap_ns: dict[int, int] = {}
        self._last_arrival_ns: dict[int, int] = {}
        # Frames read but not yet replayed: later than a port's unread backlog.
        self._held: list[tuple[int, int, bytes]] = []
        self._stop = threading.Event()
        self._wake_r, self._wake_w = os.pipe()
        os.set_blocking(self._wake_r, False)
        os.set_blocking(self._wake_w, False)

    # -- control -----------------------------------------------------------
    def execute(self, line: str) -> str:
        """One control command, under the switch lock."""
        verb = line.split()[0]
        if verb == SAMPLE_COMMAND:
            return json.dumps(self.sample(), separators=(",", ":"))
        if verb == STATS_COMMAND:
            return json.dumps(self.stats(), sort_keys=True)
        if verb == LAG_MAX_RESET_COMMAND:
            self.lag_max_us = 0
            return ""
        with self.switch.lock:
            try:
                return str(self.control.execute(line))
            except CommandError as e:
                raise CommandFailed(str(e)) from e

    def stats(self) -> dict[str, Any]:
        with self.switch.lock:
            sw = self.switch.stats()
        kernel_drops = self._kernel_drops()
        return {
            "switch": _jsonable(sw),
            "ports": {
                str(n): {"ifname": p.ifname, **vars(p.stats)} for n, p in sorted(self.ports.items())
            },
            "lag_us": self._lag_us(),
            "kernel_drops": kernel_drops,
            "ingress_bunched": {str(k): v for k, v in sorted(self.ingress_bunched.items())},
            "ingress_min_gap_ns": {str(k): v for k, v in sorted(self.ingress_min_gap_ns.items())},
            "rx_errors": self.rx_errors,
            "tx_no_port": self.tx_no_port,
            "uptime_s": (now_us() - self.started_us) / 1e6,
            "cpu_s": sum(os.times()[:2]),
        }

    def sample(self) -> dict[str, Any]:
        """What a timeline of the switch needs (``switch_sample``): per port the
        depth of its queues together and their drops, the byte counters and
        drops of the pipeline, the processing lag and the kernel's drops."""
        sw = self.switch
        with sw.lock:
            queues: dict[str, int] = {}
            queue_drops: dict[str, int] = {}
            for number, tm_port in sw.tm.ports.items():
                queues[str(number)] = sum(len(q.items) for q in tm_port.queues)
                queue_drops[str(number)] = sum(q.drops for q in tm_port.queues)
            out: dict[str, Any] = {
                "queues": queues, "queue_drops": queue_drops,
                "tx_bytes": {str(n): b for n, b in sw.tx_bytes.items()},
                "rx_bytes": {str(n): b for n, b in sw.rx_bytes.items()},
                "drops": dict(sw.drops)}
        out["kernel_drops"] = self._kernel_drops()
        out["lag_us"] = self._lag_us()
        return out

    def _lag_us(self) -> dict[str, int]:
        return {"max": self.lag_max_us, "samples": self.lag_samples,
                "mean": round(self.lag_sum_us / self.lag_samples) if self.lag_samples else 0}

    def _kernel_drops(self) -> int:
        """Frames the kernel dropped on all ports so far (each read resets the
        kernel's count, so it is added to the port's)."""
        for p in self.ports.values():
            p.update_kernel_drops()
        return sum(p.stats.kernel_drops for p in self.ports.values())

    def start_control(self, port: int) -> int:
        self.server = ControlServer(self.execute, port=port, log=log)
        self.server.start()
        return self.server.port

    # -- data path ---------------------------------------------------------
    def wake(self) -> None:
        """Make the data path look at the traffic manager now (a packet was
        injected from another thread, e.g. a P4Runtime packet-out)."""
        try:
            os.write(self._wake_w, b"w")
        except OSError:
            pass  # the pipe is full: the data path wakes anyway

    def stop(self) -> None:
        self._stop.set()
        try:
            os.write(self._wake_w, b"x")
        except OSError:
            pass

    def run(self) -> None:
        poller = select.poll()
        by_fd: dict[int, Port] = {}
        for port in self.ports.values():
            poller.register(port.fileno(), select.POLLIN)
            by_fd[port.fileno()] = port
        poller.register(self._wake_r, select.POLLIN)
        all_fds = [*by_fd, self._wake_r]
        sw = self.switch
        lock = sw.lock
        stop = self._stop
        last_flush = time.monotonic()
        margin = self.release_margin_us
        while not stop.is_set():
            with lock:
                nxt = sw.next_release_us()
            wait_us = IDLE_POLL_MS * 1000 if nxt is None else min(nxt + margin - now_us(),
                                                                  IDLE_POLL_MS * 1000)
            if 0 < wait_us < FINE_WAIT_US:
                # poll() counts in milliseconds; a rate-limited queue needs
                # finer release times, which select() can wait for.
                fds, _, _ = select.select(all_fds, [], [], wait_us / 1e6)
                if not fds:
                    events = []
                else:
                    events = poller.poll(0)
            else:
                events = poller.poll(max(0, wait_us // 1000))
            readable: list[Port] = []
            for fd, ev in events:
                maybe_port = by_fd.get(fd)
                if maybe_port is None:
                    try:
                        os.read(self._wake_r, 64)
                    except OSError:
                        pass
                    continue
                port = maybe_port
                if ev & (select.POLLERR | select.POLLNVAL | select.POLLHUP):
                    poller.unregister(fd)
                    all_fds.remove(fd)
                    del by_fd[fd]
                    if _interface_exists(port.ifname):
                        log.error("port %d (%s): socket error (poll %#x); port stopped",
                                  port.number, port.ifname, ev)
                    else:  # normal while Mininet tears links down before switches
                        log.info("port %d: interface %s was removed", port.number, port.ifname)
                    continue
                readable.append(port)
            # Read what is waiting, replay it in arrival order (forward_at:
            # how late the switch read it does not change the modelled
            # queues), and release by the clock only once nothing is waiting,
            # by the time just before the last look: a frame arriving after
            # it (the switch may be descheduled right then) keeps its time.
            rounds = 0
            while True:
                if readable:
                    if rounds >= MAX_READ_ROUNDS:
                        break
                    rounds += 1
                    self._replay(readable)
                checked = now_us()
                readable = [by_fd[fd] for fd, ev in poller.poll(0)
                            if fd in by_fd and ev == select.POLLIN]
                if not readable:
                    break
            if readable:
                continue        # a backlog remains: read it before releasing by the clock
            if self._held:
                self._replay([])    # nothing waits any more: the held frames are the latest
            out = self.release_by_clock(checked)
            if out:
                self._send(out)
            if (self.pcaps_in or self.pcaps_out) and time.monotonic() - last_flush > 1.0:
                last_flush = time.monotonic()
                for w in (*self.pcaps_in.values(), *self.pcaps_out.values()):
                    w.flush()

    def release_by_clock(self, checked_us: int) -> list[tuple[int, bytes]]:
        """What the queues release by ``checked_us`` (the time of the last
        look at the sockets, which found nothing waiting) less the release
        margin. A frame is stamped when the sending side hands it to the
        receive backlog of one CPU (the links are kept in order), and the
        switch sees it only once that CPU has run the backlog, which waits
        while a real-time agent or the switch holds it. Released by the time
        of the look, the queues' clock, which never runs back, would pass
        such a frame's stamp: it would enter the queues late, bunched with
        the next (a queue the wire never had, at a lone sender's line rate
        CE marks). Released by a margin earlier, every frame that waited
        less than the margin enters at its own time; what leaves the switch
        leaves the margin later."""
        with self.switch.lock:
            return self.switch.release_until(checked_us - self.release_margin_us)

    def _clock_offset_ns(self) -> int:
        """CLOCK_REALTIME minus CLOCK_MONOTONIC, read from the tightest of three
        brackets and kept for a second: read afresh for every batch, a read
        interrupted between its two clocks put frames of consecutive batches
        microseconds off each other's arrival times."""
        mono = time.monotonic_ns()
        checked = self._offset_checked_ns
        if checked is None or mono - checked >= 1_000_000_000:
            best = None
            for _ in range(3):
                m0 = time.monotonic_ns()
                wall = time.time_ns()
                m1 = time.monotonic_ns()
                if best is None or m1 - m0 < best[0]:
                    best = (m1 - m0, wall - (m0 + m1) // 2)
            assert best is not None
            self._wall_minus_mono = best[1]
            self._offset_checked_ns = mono
        return self._wall_minus_mono

    def _replay(self, ports: list[Port]) -> None:
        """Read every port in ``ports`` and run the frames through the switch
        in order of their kernel receive times, each at its arrival time."""
        sw = self.switch
        wall_minus_mono = self._clock_offset_ns()
        frames = self._held
        had_held = bool(frames)
        self._held = []
        # A port that filled its batch may hold more frames, arrived before
        # the later frames of the other ports: those wait for the next read
        # (the horizon), else the queues' clock, which never runs back, would
        # move the unread frames to a later time and bunch them.
        horizon: int | None = None
        for port in ports:
            number = port.number
            got = port.recv_stamped(RECV_BATCH)
            if len(got) >= RECV_BATCH and got[-1][0]:
                last = got[-1][0]
                horizon = last if horizon is None else min(horizon, last)
            frames.extend((ts, number, data) for ts, data in got)
        if not frames:
            return
        if len(ports) > 1 or had_held:
            frames.sort(key=_arrival)
        if horizon is not None:
            keep = len(frames)
            while keep and frames[keep - 1][0] > horizon:
                keep -= 1
            frames, self._held = frames[:keep], frames[keep:]
        self._note_gaps(frames)
        pcaps_in = self.pcaps_in
        with sw.lock:
            for ts, number, frame in frames:
                pin = pcaps_in.get(number)
                if pin is not None:
                    # stamped when it arrived, not when the pipeline got to it
                    pin.write(frame, ts / 1e9 if ts else None)
                try:
                    if ts:
                        out = sw.forward_at(number, frame, (ts - wall_minus_mono) // 1000)
                    else:
                        out = sw.forward(number, frame)
                except Exception:
                    self.rx_errors += 1
                    if self.rx_errors <= 10:
                        log.exception("pipeline failed on a %d-byte frame from port %d",
                                      len(frame), number)
                    out = sw.dequeue_ready()
                if out:
                    self._send(out)
        ts = frames[-1][0]
        if ts:
            # processing lag: how long the batch's last frame waited in the kernel
            lag = max(0, (time.time_ns() - ts) // 1000)
            if lag > self.lag_max_us:
                self.lag_max_us = lag
            self.lag_sum_us += lag
            self.lag_samples += 1

    def _note_gaps(self, frames: list[tuple[int, int, bytes]]) -> None:
        last = self._last_arrival_ns
        ports = self.switch.tm.ports
        for ts, number, frame in frames:
            prev = last.get(number)
            last[number] = ts
            if prev is None or not ts:
                continue
            gap = ts - prev
            if gap < self.ingress_min_gap_ns.get(number, gap + 1):
                self.ingress_min_gap_ns[number] = gap
            p = ports.get(number)
            if p is not None and p.rate_bps > 0 and gap * p.rate_bps < len(frame) * 4e9:
                self.ingress_bunched[number] = self.ingress_bunched.get(number, 0) + 1

    def _send(self, out: list[tuple[int, bytes]]) -> None:
        for port_no, frame in out:
            port = self.ports.get(port_no)
            if port is None:
                self.tx_no_port += 1
                continue
            pout = self.pcaps_out.get(port_no)
            if pout is None:
                port.send(frame)
                continue
            # stamped before it leaves: whatever answers it comes later
            sent = time.time()
            port.send(frame)
            pout.write(frame, sent)

    def close(self) -> None:
        if self.server is not None:
            self.server.close()
        for port in self.ports.values():
            port.close()
        for w in (*self.pcaps_in.values(), *self.pcaps_out.values()):
            w.close()
        for fd in (self._wake_r, self._wake_w):
            try:
                os.close(fd)
            except OSError:
                pass


def _arrival(frame: tuple[int, int, bytes]) -> int:
    return frame[0]


def _interface_exists(ifname: str) -> bool:
    try:
        if_index(ifname)
    except OSError:
        return False
    return True


def _jsonable(x: Any) -> Any:
    if isinstance(x, dict):
        return {str(k): _jsonable(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [_jsonable(v) for v in x]
    if isinstance(x, (int, float, str, bool)) or x is None:
        return x
    if hasattr(x, "__dict__"):
        return _jsonable(vars(x))
    return str(x)


def _setup_logging(path: str | None, level: str) -> None:
    handler: logging.Handler
    handler = logging.FileHandler(path) if path else logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(message)s"))
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(getattr(logging, level.upper()))


def _defines(args: argparse.Namespace) -> dict[str, str] | None:
    """The ``-D NAME[=VALUE]`` options as preprocessor defines (a bare name means 1)."""
    defines: dict[str, str] = {}
    for d in args.defines:
        name, _, value = d.partition("=")
        defines[name] = value or "1"
    return defines or None


def _compile(args: argparse.Namespace) -> ProgramModule:
    if not os.path.isfile(args.program):
        raise StartupError(2, f"P4 program not found: {args.program}")
    from switches.soft.compiler import compile_program
    from switches.soft.frontend.source import P4Error

    try:
        return compile_program(args.program, include_dirs=tuple(args.include_dirs),
                               defines=_defines(args), trace=args.log_level == "debug")
    except P4Error as e:
        raise StartupError(3, f"compile error: {e}") from e


def _exec_backend(args: argparse.Namespace, argv: Sequence[str]) -> None:
    """Compile here, then become the data-path process of ``args.backend``."""
    t0 = time.monotonic()
    module = _compile(args)
    log.info("compiled %s in %.2f s", args.program, time.monotonic() - t0)
    try:
        exe = interpreter(args.backend)
    except FileNotFoundError as e:
        raise StartupError(2, str(e)) from e
    path = write_generated(module)
    root = str(Path(__file__).resolve().parents[2])
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (root, env.get("PYTHONPATH", "")) if p)
    cmd = [exe, *daemon_interpreter_args(args.backend), "-m", "switches.soft.daemon", *argv,
           "--generated", path]
    log.info("backend %s: running the data path under %s", args.backend, exe)
    logging.shutdown()
    try:
        os.execve(exe, cmd, env)
    except OSError as e:
        raise StartupError(2, f"cannot run {exe}: {e.strerror}") from e


def load_switch(args: argparse.Namespace) -> SoftSwitch:
    """Compile ``args.program`` (or load ``--generated``) and build the switch."""
    t0 = time.monotonic()
    module: ProgramModule
    if args.generated:
        install_compat()
        module = load_generated(args.generated)
    else:
        module = _compile(args)
    log.info("%s %s in %.2f s (backend %s, %s)", "loaded" if args.generated else "compiled",
             args.program, time.monotonic() - t0, args.backend, sys.version.split()[0])
    # --log-level debug: the per-packet trace (runtime/trace.py), BMv2's -L debug
    return SoftSwitch(module, priority_queues=args.priority_queues, now_us=now_us,
                      log=logging.getLogger("softswitch.pipeline"),
                      trace=args.log_level == "debug")


def _apply_cli_file(daemon: SwitchDaemon, path: str) -> None:
    try:
        lines = Path(path).read_text().splitlines()
    except OSError as e:
        raise StartupError(2, f"cannot read --cli-file {path}: {e.strerror}") from e
    for n, raw in enumerate(lines, 1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        try:
            reply = daemon.execute(line)
        except CommandFailed as e:
            raise StartupError(5, f"{path}:{n}: command {line!r} failed: {e}") from e
        log.debug("cli %s -> %s", line, reply)


def _start_p4runtime(args: argparse.Namespace, daemon: SwitchDaemon) -> P4RuntimeHandle | None:
    """The P4Runtime server of ``--grpc-port`` (its handle), or None."""
    if args.grpc_port is None:
        return None
    try:
        from switches.soft.control.p4runtime_server import start_p4runtime_server
    except ImportError as e:
        raise StartupError(2, f"--grpc-port needs pip install -e '.[p4runtime]' ({e})") from e
    try:
        return start_p4runtime_server(
            daemon.switch, f"127.0.0.1:{args.grpc_port}", device_id=args.device_id,
            cpu_port=args.cpu_port, program_path=args.program,
            include_dirs=args.include_dirs, defines=_defines(args), wake=daemon.wake)
    except OSError as e:
        raise StartupError(2, f"cannot serve P4Runtime on 127.0.0.1:{args.grpc_port}: {e}") from e


def _write_ready(path: str, info: dict[str, Any]) -> None:
    tmp = f"{path}.tmp{os.getpid()}"
    with open(tmp, "w") as f:
        json.dump(info, f)
    os.replace(tmp, path)


# With P4TB_SWITCH_PROFILE=DIR in its environment the data path runs under
# cProfile and writes DIR/switch-<pid>.pstats when it stops (``python -m
# pstats`` reads it): for finding where the switch's time goes, not for
# results, since the profiler costs each call several times its own time.
PROFILE_ENV = "P4TB_SWITCH_PROFILE"


def _run_profiled(daemon: SwitchDaemon, out_dir: Path) -> None:
    import cProfile

    prof = cProfile.Profile()
    try:
        prof.runcall(daemon.run)
    finally:
        out = out_dir / f"switch-{os.getpid()}.pstats"
        try:
            out_dir.mkdir(parents=True, exist_ok=True)
            prof.dump_stats(str(out))
            log.info("profile of the data path: %s", out)
        except OSError as e:
            log.error("could not write the profile %s: %s", out, e)


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    args = build_arg_parser().parse_args(argv)
    _setup_logging(args.log, args.log_level)
    daemon: SwitchDaemon | None = None
    ports: list[Port] = []
    p4rt: P4RuntimeHandle | None = None

    def on_signal(signum: int, _frame: Any) -> None:
        log.info("signal %s: shutting down", signal.Signals(signum).name)
        if daemon is not None:
            daemon.stop()
        else:
            raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    try:
        try:
            specs = [parse_interface_spec(s) for s in args.interfaces]
        except ValueError as e:
            raise StartupError(2, str(e)) from e
        if len({n for n, _ in specs}) != len(specs):
            raise StartupError(2, "the same port number is given twice")
        if args.priority_queues < 1 or args.priority_queues > 8:
            raise StartupError(2, "--priority-queues must be 1..8")
        if args.release_margin_us < 0:
            raise StartupError(2, "--release-margin-us must be >= 0")
        if args.grpc_port is not None and args.backend != "python":
            raise StartupError(2, "--grpc-port needs --backend python (the P4Runtime "
                                  "server runs in the data path's process)")
        if args.cpu_port is not None and any(n == args.cpu_port for n, _ in specs):
            raise StartupError(2, f"--cpu-port {args.cpu_port} is also an interface's port")
        log.info("soft switch pid %d: program %s, ports %s", os.getpid(), args.program,
                 ", ".join(f"{n}@{i}" for n, i in specs) or "none")
        if args.backend != "python" and not args.generated:
            _exec_backend(args, argv)  # does not return
        switch = load_switch(args)
        try:
            for number, ifname in specs:
                ports.append(Port(number, ifname, buffer_bytes=args.socket_buffer))
        except PortError as e:
            raise StartupError(4, str(e)) from e
        daemon = SwitchDaemon(switch, ports, args.pcap_dir,
                              release_margin_us=args.release_margin_us)
        if args.cli_file:
            _apply_cli_file(daemon, args.cli_file)
        try:
            cport = daemon.start_control(args.control_port)
        except OSError as e:
            raise StartupError(2, f"cannot listen on 127.0.0.1:{args.control_port}: {e.strerror}") from e
        log.info("control server on 127.0.0.1:%d", cport)
        p4rt = _start_p4runtime(args, daemon)
        if args.ready_file:
            _write_ready(args.ready_file, {"pid": os.getpid(), "control_port": cport,
                                           "grpc_port": p4rt.port if p4rt else None,
                                           "ports": {str(n): i for n, i in specs}})
        if hasattr(gc, "freeze"):   # CPython: full collections skip the start-up heap
            gc.collect()            # (program, tables), a few ms of data-path stop each
            gc.freeze()
        if os.environ.get(PROFILE_ENV):
            _run_profiled(daemon, Path(os.environ[PROFILE_ENV]))
        else:
            daemon.run()
    except StartupError as e:
        if p4rt is not None:
            p4rt.stop()
        log.error("%s", e)
        if args.log:  # also where a launcher that only watches stderr sees it
            print(f"softswitch: {e}", file=sys.stderr)
        for p in ports:
            p.close()
        if daemon is not None:
            daemon.close()
        return e.code
    except KeyboardInterrupt:
        log.info("interrupted during startup")
        for p in ports:
            p.close()
        return 1
    except Exception as e:
        log.exception("soft switch failed")
        if p4rt is not None:
            p4rt.stop()
        if args.log:
            print(f"softswitch: failed: {type(e).__name__}: {e} (see {args.log})", file=sys.stderr)
        if daemon is not None:
            daemon.close()
        return 1
    if p4rt is not None:
        p4rt.stop()
    try:
        log.info("stats at exit: %s", json.dumps(daemon.stats(), sort_keys=True))
    except Exception:
        log.exception("could not collect stats at exit")
    daemon.close()
    log.info("stopped")
    return 0


if __name__ == "__main__":
    sys.exit(main())
