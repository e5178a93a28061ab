"""Traffic tools the integration tests run inside Mininet hosts.

    python traffic.py tcp-sink PORT
    python traffic.py tcp-source IP PORT NBYTES
    python traffic.py udp-sink PORT IDLE_S
    python traffic.py udp-source IP PORT COUNT SIZE TOS [PPS]
    python traffic.py udp-flows IP PORT FLOWS COUNT SPORT0 TOS
    python traffic.py roce-tagged IP JOB STEP PSN COUNT OPCODE TOS
    python traffic.py garbage IFNAME COUNT SEED

Each prints one JSON line with what it did or saw.
"""

from __future__ import annotations

import hashlib
import json
import random
import socket
import sys
import time


def pattern(n: int) -> bytes:
    """Deterministic, non-repeating-looking payload of n bytes."""
    out = bytearray()
    block = 0
    while len(out) < n:
        out += hashlib.sha256(block.to_bytes(8, "big")).digest()
        block += 1
    return bytes(out[:n])


def tcp_sink(port: int) -> None:
    srv = socket.socket()
    srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    srv.bind(("0.0.0.0", port))
    srv.listen(1)
    srv.settimeout(20)
    print(json.dumps({"listening": port}), flush=True)
    conn, _ = srv.accept()
    conn.settimeout(20)
    h = hashlib.sha256()
    total = 0
    while True:
        data = conn.recv(1 << 16)
        if not data:
            break
        h.update(data)
        total += len(data)
    print(json.dumps({"bytes": total, "sha256": h.hexdigest()}), flush=True)
    conn.close()


def tcp_source(ip: str, port: int, nbytes: int) -> None:
    data = pattern(nbytes)
    t0 = time.monotonic()
    s = socket.create_connection((ip, port), timeout=20)
    s.sendall(data)
    s.shutdown(socket.SHUT_WR)
    s.recv(1)  # wait for the sink to close: all bytes were delivered
    s.close()
    print(json.dumps({"bytes": nbytes, "sha256": hashlib.sha256(data).hexdigest(),
                      "seconds": time.monotonic() - t0}), flush=True)


def udp_sink(port: int, idle: float) -> None:
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4 << 20)
    s.setsockopt(socket.IPPROTO_IP, socket.IP_RECVTOS, 1)
    s.bind(("0.0.0.0", port))
    s.settimeout(idle)
    print(json.dumps({"listening": port}), flush=True)
    counts = {"0": 0, "1": 0, "2": 0, "3": 0}
    t_first = t_last = 0.0
    first = True
    while True:
        try:
            _data, anc, _flags, _addr = s.recvmsg(2048, socket.CMSG_SPACE(4))
        except TimeoutError:
            if first:  # nothing yet: give the sender a moment longer
                first = False
                continue
            break
        first = False
        t_last = time.monotonic()
        if not t_first:
            t_first = t_last
        tos = 0
        for level, typ, val in anc:
            if level == socket.IPPROTO_IP and typ == socket.IP_TOS:
                tos = val[0]
        counts[str(tos & 3)] += 1
    print(json.dumps({"received": sum(counts.values()), "ecn": counts,
                      "span_s": t_last - t_first}), flush=True)


def udp_source(ip: str, port: int, count: int, size: int, tos: int, pps: float) -> None:
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.setsockopt(socket.IPPROTO_IP, socket.IP_TOS, tos)
    payload = bytes(size)
    gap = 1.0 / pps if pps > 0 else 0.0
    t0 = time.monotonic()
    sent = 0
    for i in range(count):
        if gap:
            delay = t0 + i * gap - time.monotonic()
            if delay > 0:
                time.sleep(delay)
        try:
            s.sendto(payload, (ip, port))
            sent += 1
        except OSError:
            pass
    print(json.dumps({"sent": sent, "seconds": time.monotonic() - t0}), flush=True)


def udp_flows(ip: str, port: int, flows: int, count: int, sport0: int, tos: int) -> None:
    """``count`` datagrams from each of ``flows`` source ports sport0, sport0+1, ...
    (one 5-tuple each), paced gently so that no switch queue overflows."""
    sent = 0
    for f in range(flows):
        s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        s.setsockopt(socket.IPPROTO_IP, socket.IP_TOS, tos)
        s.bind(("0.0.0.0", sport0 + f))
        for _ in range(count):
            s.sendto(bytes(64), (ip, port))
            sent += 1
            time.sleep(0.002)
        s.close()
    print(json.dumps({"sent": sent}), flush=True)


def roce_tagged(ip: str, job: int, step: int, psn: int, count: int, opcode: int,
                tos: int) -> None:
    """``count`` RoCEv2 requests of Symphony job ``job`` at ``step`` (UDP source
    port 0xC000 | step) with PSNs psn, psn+1, ...: BTH (job id in byte 4), 16
    bytes of payload and an ICRC stand-in (the switch never reads it)."""
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.setsockopt(socket.IPPROTO_IP, socket.IP_TOS, tos)
    s.bind(("0.0.0.0", 0xC000 | (step & 0x3FFF)))
    for i in range(count):
        bth = (bytes([opcode, 0]) + (0xFFFF).to_bytes(2, "big") + bytes([job])
               + (0x111).to_bytes(3, "big") + bytes([0]) + (psn + i).to_bytes(3, "big"))
        s.sendto(bth + b"\x5a" * 16 + bytes.fromhex("a1b2c3d4"), (ip, 4791))
        time.sleep(0.005)
    print(json.dumps({"sent": count}), flush=True)


def garbage(ifname: str, count: int, seed: int) -> None:
    """Random frames of 1..300 bytes, plus truncated IPv4/UDP frames (those
    shorter than an Ethernet header are refused by the kernel: ``failed``)."""
    rng = random.Random(seed)
    s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW)
    s.bind((ifname, 0))
    base = bytes.fromhex(
        "020000000001" "000000000001" "0800"
        "45000030000100004011" "0000" "0a000101" "0a000201"
        "04d2162e001c0000") + bytes(20)
    sent = failed = 0
    for i in range(count):
        if i % 3 == 0:
            frame = base[: rng.randrange(1, len(base))]
        elif i % 3 == 1:
            frame = rng.randbytes(rng.randrange(1, 300))
        else:  # valid-looking Ethernet/IPv4 start, random rest
            frame = base[:14] + bytes([0x45]) + rng.randbytes(rng.randrange(0, 80))
        try:
            s.send(frame)
            sent += 1
        except OSError:
            failed += 1
        if i % 200 == 199:
            time.sleep(0.005)  # let the socket buffers drain
    print(json.dumps({"sent": sent, "failed": failed}), flush=True)


def main(argv: list[str]) -> None:
    cmd, args = argv[0], argv[1:]
    if cmd == "tcp-sink":
        tcp_sink(int(args[0]))
    elif cmd == "tcp-source":
        tcp_source(args[0], int(args[1]), int(args[2]))
    elif cmd == "udp-sink":
        udp_sink(int(args[0]), float(args[1]))
    elif cmd == "udp-source":
        udp_source(args[0], int(args[1]), int(args[2]), int(args[3]), int(args[4], 0),
                   float(args[5]) if len(args) > 5 else 0.0)
    elif cmd == "udp-flows":
        udp_flows(args[0], int(args[1]), int(args[2]), int(args[3]), int(args[4]),
                  int(args[5], 0))
    elif cmd == "roce-tagged":
        roce_tagged(args[0], int(args[1]), int(args[2]), int(args[3]), int(args[4]),
                    int(args[5], 0), int(args[6], 0))
    elif cmd == "garbage":
        garbage(args[0], int(args[1]), int(args[2]))
    else:
        raise SystemExit(f"unknown command {cmd}")


if __name__ == "__main__":
    main(sys.argv[1:])
