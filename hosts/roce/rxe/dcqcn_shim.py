"""DCQCN for rdma_rxe hosts: a notification point and a reaction point beside the kernel.

rxe ignores ECN: a CE-marked packet makes no CNP and a CNP slows nothing. This
shim does, per host, what a RoCE NIC's DCQCN does, with the same code and
presets as the udp provider (hosts/roce/dcqcn.py). :class:`RxeDcqcnShim` is the
part that touches the host's interface; its logic lives in the modules below
it, all pure (no rxe, no root):

- hosts.roce.rxe.frames: parsing RoCEv2 frames, the packet filter, CNP frames;
- hosts.roce.rxe.dcqcn_points: the notification and reaction points and the
  byte counter fed by the QPs' HTB classes;
- hosts.roce.rxe.wire_counts: per-QP requester counts from the wire.

- **Notification point.** An AF_PACKET socket on the host's interface, with a
  classic BPF filter that passes only arriving RoCEv2 packets (IPv4, UDP to
  4791) that are CE-marked or are CNPs. For a CE-marked packet to one of the
  host's QPs it sends a CNP to the QP's peer, a whole frame written to the
  same socket.
- **Reaction point.** A CNP to one of the host's QPs goes to that QP's rate
  controller (``Dcqcn``), whose timers the agent drives. The rate is enforced
  on the host's egress by tc HTB (netlink, pyroute2; hosts.roce.shaping): a
  root class at the NIC's line rate, a default class for everything else
  (ACKs, CNPs) and one class per sending QP whose rate and ceiling are the
  QP's DCQCN rate, chosen by a u32 filter on the QP's peer: the destination
  address and the BTH's destination QP of its requests (a QP's UDP source port
  is its step tag, which a Symphony ring changes per step).
  rxe holds at most a bounded number of its skbs in flight per QP, so a QP
  slowed by its class waits instead of losing packets in the qdisc.
- **Byte counter.** Each sending QP's HTB class counts the bytes it sent
  (hosts.roce.rxe.dcqcn_points.ClassByteCounter); if the classes cannot be
  read, the agent counts the wire bytes of completed messages instead
  (``byte_counter_report`` says which).

- **DSCP per QP, changed as it runs** (:meth:`RxeDcqcnShim.set_dscp`). rxe
  puts the QP's traffic class (set at RTR) in every packet's TOS byte; a
  NIC marks per packet. The QP's u32 filter then also carries tc's pedit
  (the TOS byte's DSCP bits, ECN kept) and csum (the IPv4 header checksum)
  actions, swapped whole by one netlink request when the DSCP changes.
  The ICRC masks the TOS byte, so the receiver accepts the packets. ReFlex's
  flexible flows move between the switch's priority queues this way.

- **Per-QP packet counts from the wire** (``count_wire``): the filter passes
  every RoCEv2 frame, arriving and leaving, and each goes to the host's
  hosts.roce.rxe.wire_counts.HostWireCounter.
"""

from __future__ import annotations

import socket
import time
from typing import Any

from hosts.roce.rxe.dcqcn_points import (
    ClassByteCounter,
    NotificationPoint,
    RateController,
    ReactionPoint,
    ShimError,
)
from hosts.roce.rxe.frames import SNAP_BYTES, Bth, arrival_of, cnp_frame, parse_bth, roce_filter
from hosts.roce.rxe.wire_counts import HostWireCounter
from hosts.roce.shaping import HtbShaper, htb_rate_bytes
from hosts.roce.sockets import (
    SO_TIMESTAMPNS,
    TIMESTAMP_CMSG_SPACE,
    attach_filter,
    kernel_time_ns,
    set_buffer,
)

__all__ = ["RxeDcqcnShim", "SETTLE_S"]

ETH_P_ALL = 0x0003
PACKET_OUTGOING = 4
WIRE_RCVBUF = 8 << 20       # the socket's buffer when it counts every frame
# How long, at the end, the shim waits for the host's qdisc to send what it holds:
# a few frames at DCQCN's floor (80 kb/s at slowdown 500: 0.1 s a frame).
SETTLE_S = 2.0



class RxeDcqcnShim:
    """The per-host shim: the socket (notification and reaction point) and the
    HTB shaper on ``ifname``. Register the host's QPs once they are connected
    (:meth:`register_qp`), then call :meth:`poll` often and :meth:`close` at the end."""

    def __init__(self, *, ifname: str, local_ip: str, local_mac: str, gateway_mac: str,
                 line_rate_bps: float, cnp_interval_ns: int, burst_bytes: int,
                 count_wire: bool = False, nak_window_ns: int = 0) -> None:
        self.ifname, self.local_ip = ifname, local_ip
        self.local_mac, self.gateway_mac = local_mac, gateway_mac
        self.np = NotificationPoint(cnp_interval_ns)
        self.rp = ReactionPoint()
        self.wire = HostWireCounter(local_ip, nak_window_ns) if count_wire else None
        self.sock = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(ETH_P_ALL))
        try:
            attach_filter(self.sock, roce_filter(every_roce_frame=count_wire))
            if count_wire:
                # every frame of the host queues here between two polls, and an
                # agent under TCG sometimes stops for 0.1-0.3 s: a lost frame
                # would be a miscount
                set_buffer(self.sock, socket.SO_RCVBUF, WIRE_RCVBUF)
                # each frame's kernel time: a NAK's go-back is told from the
                # timer's by how soon it follows, whenever the agent polls
                self.sock.setsockopt(socket.SOL_SOCKET, SO_TIMESTAMPNS, 1)
            self.sock.bind((ifname, 0))
            self.sock.setblocking(False)
            self.shaper = HtbShaper(ifname, line_rate_bps, burst_bytes)
        except OSError as e:
            self.sock.close()
            raise ShimError(f"packet socket on {ifname}: {e}") from e
        except BaseException:
            self.sock.close()
            raise
        self.frames = 0
        self.cnp_tx_errors = 0
        self.byte_counter = ClassByteCounter(self.rp, self.shaper)
        self._arrived: list[Bth] = []      # read, not yet polled
        self._dscp: dict[int, int | None] = {}     # local QPN -> the DSCP its requests get

    def fileno(self) -> int:
        return self.sock.fileno()

    def register_qp(self, local_qpn: int, remote_ip: str, remote_qpn: int,
                    rc: RateController | None) -> None:
        """A connected QP: its CE-marked arrivals make CNPs to (remote_ip, remote_qpn);
        with a rate controller, its requests to that peer run at the controller's
        rate, whatever UDP source port (step tag) they carry."""
        self.np.register(local_qpn, remote_ip, remote_qpn)
        if self.wire is not None:
            self.wire.register(local_qpn, remote_ip, remote_qpn)
        if rc is not None:
            cid = self.rp.register(local_qpn, remote_ip, remote_qpn, rc)
            self.shaper.add_qp(cid, remote_ip, remote_qpn, htb_rate_bytes(rc.rate_bps))
            self.rp.qps[local_qpn].applied_bytes = htb_rate_bytes(rc.rate_bps)
            if self._dscp.get(local_qpn) is not None:
                self.shaper.set_qp_dscp(cid, self._dscp[local_qpn])

    def set_dscp(self, local_qpn: int, dscp: int | None) -> None:
        """Send the requests of QP ``local_qpn`` with DSCP ``dscp`` from now on
        (None: the traffic class the QP itself puts in them). rxe sets one
        traffic class per QP; the QP's filter on the host's egress rewrites
        it (hosts.roce.shaping.HtbShaper.set_qp_dscp). Before the QP is
        registered this is remembered and applied when it is."""
        if dscp is not None and not 0 <= dscp <= 63:
            raise ShimError(f"QP {local_qpn:#x}: DSCP {dscp} out of range (6 bits)")
        if self._dscp.get(local_qpn) == dscp:
            return
        self._dscp[local_qpn] = dscp
        q = self.rp.qps.get(local_qpn)
        if q is not None:
            self.shaper.set_qp_dscp(q.class_id, dscp)

    def poll(self, now_ns: int) -> None:
        """Read what arrived, send CNPs, feed the byte counters, run the
        controllers' timers, apply rates."""
        self._drain()
        got, self._arrived = self._arrived, []
        arrivals = [a for a in map(arrival_of, got)
                    if a is not None and a.dst_ip == self.local_ip]
        td = self.rp.next_deadline()
        self.byte_counter.read_if_due(now_ns, events=(td is not None and td <= now_ns) or any(
            a.kind == "cnp" and a.dqpn in self.rp.qps for a in arrivals))
        for a in arrivals:
            if a.kind == "ce":
                to = self.np.on_ce(a, now_ns)
                if to is not None:
                    self._send_cnp(*to)
            else:
                self.rp.on_cnp(a, now_ns)
        self.rp.on_timers(now_ns)
        for cid, b in self.rp.changed():
            self.shaper.set_rate(cid, b)

    @property
    def bytes_from_completions(self) -> bool:
        """Whether the caller must feed the byte counters from completed messages
        (the class counters could not be read: ``byte_counter.fallback`` says why)."""
        return self.byte_counter.fallback is not None

    def byte_counter_report(self) -> dict[str, Any]:
        """Where DCQCN's byte counters came from: ``source`` "htb_class" or
        "completions" (with ``fallback``, why), the class-counter reads and the
        bytes they fed."""
        bc = self.byte_counter
        return {"source": "completions" if bc.fallback is not None else "htb_class",
                "fallback": bc.fallback, "reads": bc.reads, "bytes": bc.bytes_fed}

    def next_deadline(self) -> int | None:
        ds = [d for d in (self.rp.next_deadline(), self.byte_counter.next_read_ns())
              if d is not None]
        return min(ds) if ds else None

    def qp_restarted(self, local_qpn: int) -> None:
        """QP ``local_qpn`` was reset to be connected again: its wire counts take
        the frames read so far as its previous connection's, the next ones as
        the new one's (its PSNs start over)."""
        if self.wire is not None:
            self._drain()
            self.wire.restart(local_qpn)

    def settle(self, timeout_s: float = SETTLE_S) -> bool:
        """Wait until the QPs' classes on the host's egress hold no packet (at
        most ``timeout_s``), then read what the socket holds, so that the wire
        counts include the requests that left after the work's last completion
        (retransmissions the timer queued before a late ACK). Whether the
        classes emptied; with no wire counts, nothing to wait for (True)."""
        from pyroute2.netlink.exceptions import NetlinkError

        if self.wire is None:
            return True
        try:
            empty = self.shaper.wait_until_sent(self.shaper.qp_classes, timeout_s)
        except (NetlinkError, OSError) as e:
            raise ShimError(f"tc class backlog on {self.ifname}: {e}") from e
        self._drain()
        return empty

    def _drain(self) -> None:
        """Read the RoCEv2 frames the socket holds, each parsed once: arrivals are
        kept for :meth:`poll`; with ``count_wire`` every frame, the host's own
        too, goes to the wire counts at once."""
        wire = self.wire
        while True:
            try:
                if wire is None:
                    data, addr = self.sock.recvfrom(SNAP_BYTES)
                else:
                    data, anc, _flags, addr = self.sock.recvmsg(SNAP_BYTES, TIMESTAMP_CMSG_SPACE)
            except BlockingIOError:
                return
            outgoing = addr[2] == PACKET_OUTGOING
            if not outgoing:
                self.frames += 1
            elif wire is None:
                continue        # this host's own CNPs
            b = parse_bth(data)
            if b is None:
                continue
            if wire is not None:
                t = kernel_time_ns(anc)
                wire.on_bth(b, outgoing, time.time_ns() if t is None else t)
            if not outgoing:
                self._arrived.append(b)

    def _send_cnp(self, remote_ip: str, remote_qpn: int) -> None:
        frame = cnp_frame(src_mac=self.local_mac, dst_mac=self.gateway_mac, src_ip=self.local_ip,
                          dst_ip=remote_ip, dqpn=remote_qpn)
        try:
            self.sock.send(frame)
        except OSError:
            self.cnp_tx_errors += 1

    def qp_counters(self, local_qpn: int) -> dict[str, int]:
        """ce_pkts and cnps_sent (notification point), cnps_rcvd (reaction point);
        with ``count_wire`` also the QP's WireCounts (retransmits, naks_rcvd, rto,
        wire_tx_pkts)."""
        n = self.np.qps.get(local_qpn)
        r = self.rp.qps.get(local_qpn)
        out = {"ce_pkts": n.ce_pkts if n else 0, "cnps_sent": n.cnps_sent if n else 0,
               "cnps_rcvd": r.cnps if r else 0}
        w = self.wire.qps.get(local_qpn) if self.wire is not None else None
        if w is not None:
            out.update(w.counters())
        return out

    def close(self) -> None:
        try:
            self.shaper.close()
        finally:
            self.sock.close()

