"""Classic libpcap files (microsecond timestamps, Ethernet link type).

The daemon keeps one writer per port and direction, named like BMv2's
``--pcap`` output: ``<ifname>_in.pcap`` and ``<ifname>_out.pcap``.
"""

from __future__ import annotations

import os
import struct
import time
from typing import BinaryIO

PCAP_MAGIC = 0xA1B2C3D4
LINKTYPE_ETHERNET = 1
SNAPLEN = 65535


class PcapWriter:
    def __init__(self, path: str | os.PathLike[str], *, snaplen: int = SNAPLEN) -> None:
        self.path = os.fspath(path)
        self.snaplen = snaplen
        self._f: BinaryIO = open(self.path, "wb")  # noqa: SIM115 - closed in close()
        self._f.write(struct.pack("<IHHiIII", PCAP_MAGIC, 2, 4, 0, 0, snaplen, LINKTYPE_ETHERNET))
        self.count = 0

    def write(self, frame: bytes, ts: float | None = None) -> None:
        """Append one frame; ``ts`` is wall-clock seconds (now if omitted)."""
        if ts is None:
            ts = time.time()
        sec = int(ts)
        usec = int((ts - sec) * 1_000_000)
        data = frame[: self.snaplen]
        self._f.write(struct.pack("<IIII", sec, usec, len(data), len(frame)))
        self._f.write(data)
        self.count += 1

    def flush(self) -> None:
        self._f.flush()

    def close(self) -> None:
        if not self._f.closed:
            self._f.close()


def read_pcap(path: str | os.PathLike[str]) -> list[tuple[float, bytes]]:
    """All (timestamp, frame) records of a file written by :class:`PcapWriter`."""
    out: list[tuple[float, bytes]] = []
    with open(path, "rb") as f:
        head = f.read(24)
        if len(head) < 24:
            raise ValueError(f"{path}: not a pcap file (too short)")
        magic = struct.unpack("<I", head[:4])[0]
        if magic == PCAP_MAGIC:
            endian = "<"
        elif magic == 0xD4C3B2A1:
            endian = ">"
        else:
            raise ValueError(f"{path}: not a pcap file (magic {magic:#x})")
        while True:
            rec = f.read(16)
            if len(rec) < 16:
                break
            sec, usec, incl, _orig = struct.unpack(endian + "IIII", rec)
            out.append((sec + usec / 1e6, f.read(incl)))
    return out
