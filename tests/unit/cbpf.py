"""A classic-BPF interpreter for the socket filters the hosts attach."""

from __future__ import annotations

import struct


def run_cbpf(prog: list[tuple[int, int, int, int]], pkt: bytes) -> int:
    """A classic-BPF interpreter for the instructions the shim's filter uses:
    the bytes the kernel would pass to the socket (0 = dropped)."""
    a = x = 0
    pc = 0
    while True:
        code, jt, jf, k = prog[pc]
        pc += 1
        if code == 0x28:
            if k + 2 > len(pkt):
                return 0
            a = struct.unpack_from("!H", pkt, k)[0]
        elif code == 0x30:
            if k >= len(pkt):
                return 0
            a = pkt[k]
        elif code == 0xB1:
            x = (pkt[k] & 0x0F) * 4
        elif code == 0x48:
            if x + k + 2 > len(pkt):
                return 0
            a = struct.unpack_from("!H", pkt, x + k)[0]
        elif code == 0x50:
            if x + k >= len(pkt):
                return 0
            a = pkt[x + k]
        elif code == 0x54:
            a &= k
        elif code == 0x15:
            pc += jt if a == k else jf
        elif code == 0x45:
            pc += jt if a & k else jf
        elif code == 0x06:
            return min(k, len(pkt))
        else:
            raise AssertionError(f"unexpected BPF opcode {code:#x}")
