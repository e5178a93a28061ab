"""Stateful v1model externs and the hash/checksum algorithms, BMv2-compatible.

- Registers: values masked to the register width; an out-of-bounds index is
  logged, reads return 0 and writes are ignored.
- Counters: packets, bytes, or both per cell.
- Meters: BMv2's two-rate three-colour meter. Rates are given committed
  first, then peak, each as ``(units per microsecond, burst units)``; until
  configured a meter returns GREEN (0). A packet that finds the peak bucket
  short is RED (2), else one that finds the committed bucket short is
  YELLOW (1). Both buckets start full when rates are set.
- Hashes: the data list is packed MSB first into a bit string which is
  zero-padded at the end to a whole number of bytes (what BMv2's field-list
  builder produces), then fed to the algorithm. ``crc16`` is BMv2's
  (polynomial 0x8005, reflected in and out, init 0, no final xor, i.e.
  CRC-16/ARC); ``crc32`` is the standard reflected 0x04C11DB7; the
  ``*_custom`` variants start with the same parameters; ``csum16`` is the
  Internet ones' complement checksum; ``xor16`` folds big-endian 16-bit
  words; ``identity`` takes the first 8 bytes as an integer.
"""

from __future__ import annotations

import logging
import random as _random
import struct as _struct
import zlib
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

log = logging.getLogger("softswitch.externs")

GREEN, YELLOW, RED = 0, 1, 2


# ---------------------------------------------------------------------------
# Data packing and hash algorithms


def pack_bits(data: list[tuple[int, int]]) -> bytes:
    """Concatenate ``(value, width)`` pairs MSB first; pad with zero bits at
    the end up to a byte boundary."""
    # Whole bytes leave the accumulator as soon as it holds 64 bits, so it
    # never grows into a long integer (hashes over whole packets stay cheap).
    out = bytearray()
    acc = 0
    nbits = 0
    for value, width in data:
        acc = (acc << width) | (value & ((1 << width) - 1))
        nbits += width
        if nbits >= 64:
            rem = nbits & 7
            out += (acc >> rem).to_bytes((nbits - rem) >> 3, "big")
            acc &= (1 << rem) - 1
            nbits = rem
    pad = (-nbits) % 8
    if nbits:
        out += (acc << pad).to_bytes((nbits + pad) >> 3, "big")
    return bytes(out)


def _reflect(value: int, nbits: int) -> int:
    out = 0
    for _ in range(nbits):
        out = (out << 1) | (value & 1)
        value >>= 1
    return out


@dataclass
class CrcConfig:
    width: int
    poly: int
    init: int
    xor_out: int
    refin: bool
    refout: bool
    table: list[int] = field(default_factory=list, repr=False)

    def __post_init__(self) -> None:
        self.rebuild()

    def rebuild(self) -> None:
        # MSB-first table; reflected input is handled by reflecting each byte.
        w = self.width
        top = 1 << (w - 1)
        mask = (1 << w) - 1
        tbl = []
        for b in range(256):
            r = b << (w - 8)
            for _ in range(8):
                r = ((r << 1) ^ self.poly) if r & top else (r << 1)
                r &= mask
            tbl.append(r)
        self.table = tbl

    def compute(self, buf: bytes) -> int:
        w = self.width
        mask = (1 << w) - 1
        shift = w - 8
        tbl = self.table
        r = self.init
        if self.refin:
            for byte in buf:
                r = (tbl[_REFLECT8[byte] ^ (r >> shift)] ^ (r << 8)) & mask
        else:
            for byte in buf:
                r = (tbl[byte ^ (r >> shift)] ^ (r << 8)) & mask
        if self.refout:
            r = _reflect(r, w)
        return r ^ self.xor_out


_REFLECT8 = [_reflect(i, 8) for i in range(256)]

def crc16_default() -> CrcConfig:
    return CrcConfig(16, 0x8005, 0x0000, 0x0000, True, True)


def crc32_default() -> CrcConfig:
    return CrcConfig(32, 0x04C11DB7, 0xFFFFFFFF, 0xFFFFFFFF, True, True)


_CRC16 = crc16_default()
_CRC32 = crc32_default()


def crc16(buf: bytes) -> int:
    return _CRC16.compute(buf)


def crc32(buf: bytes) -> int:
    # zlib's CRC-32 has exactly these parameters and runs in C: programs that
    # hash whole packets (RoCE ICRC) stay fast
    return zlib.crc32(buf)


def csum16(buf: bytes) -> int:
    """Internet checksum (RFC 1071): ones' complement of the ones' complement
    sum of big-endian 16-bit words, an odd last byte padded with zero."""
    if len(buf) % 2:
        buf = buf + b"\x00"
    s = sum(_struct.unpack(f">{len(buf) // 2}H", buf))
    while s >> 16:
        s = (s & 0xFFFF) + (s >> 16)
    return (~s) & 0xFFFF


def xor16(buf: bytes) -> int:
    if len(buf) % 2:
        buf = buf + b"\x00"
    r = 0
    for w in _struct.unpack(f">{len(buf) // 2}H", buf):
        r ^= w
    return r


def identity(buf: bytes) -> int:
    return int.from_bytes(buf[:8], "big") if buf else 0


# Algorithms whose value depends on the data alone (not "random", nor the
# custom CRCs a control plane may re-parameterize): their results may be memoized.
_PURE = frozenset({"crc16", "crc32", "csum16", "xor16", "identity"})
_MEMO_MAX = 1 << 16


class HashEngine:
    """Named algorithms with per-switch state (custom CRC parameters, RNG)."""

    def __init__(self, rng: _random.Random | None = None) -> None:
        self.rng = rng or _random.Random()
        self.crc16_custom = crc16_default()
        self.crc32_custom = crc32_default()
        self.custom: dict[str, CrcConfig] = {}  # named calculations (set_calculations)
        # (algorithm, fields) -> hash, for the algorithms without state
        self._memo: dict[tuple[str, tuple[tuple[int, int], ...]], int] = {}
        self._algos: dict[str, Callable[[bytes], int]] = {
            "crc16": crc16,
            "crc32": crc32,
            "crc16_custom": self.crc16_custom.compute,
            "crc32_custom": self.crc32_custom.compute,
            "csum16": csum16,
            "xor16": xor16,
            "identity": identity,
            "random": lambda _buf: self.rng.getrandbits(32),
        }

    def set_calculations(self, calculations: dict[str, str]) -> None:
        """The program's custom-CRC calculations (name -> crc16_custom or
        crc32_custom), each with parameters of its own, starting from the
        defaults; calculations of a previous program are forgotten."""
        for name in self.custom:
            self._algos.pop(name, None)
        self.custom = {}
        for name, algo in calculations.items():
            cfg = crc16_default() if algo == "crc16_custom" else crc32_default()
            self.custom[name] = cfg
            self._algos[name] = cfg.compute

    def names(self) -> list[str]:
        return sorted(self._algos)

    def compute(self, algo: str, data: list[tuple[int, int]]) -> int:
        pure = algo in _PURE and algo not in self.custom
        if pure:
            # a flow's packets hash the same fields (ECMP, selectors): its
            # hash is computed once
            key = (algo, tuple(data))
            h = self._memo.get(key)
            if h is not None:
                return h
        fn = self._algos.get(algo)
        if fn is None:
            raise ValueError(f"unknown hash algorithm {algo!r}")
        h = fn(pack_bits(data))
        if pure:
            if len(self._memo) >= _MEMO_MAX:
                self._memo.clear()
            self._memo[key] = h
        return h

    def hash(self, algo: str, base: int, data: list[tuple[int, int]], max_: int) -> int:
        h = self.compute(algo, data)
        if max_ == 0:
            return base
        return base + (h % max_)


# ---------------------------------------------------------------------------
# Registers, counters, meters


class RegisterArray:
    def __init__(self, name: str, width: int, size: int) -> None:
        self.name = name
        self.width = width
        self.size = size
        self.mask = (1 << width) - 1
        self.values = [0] * size

    def read(self, index: int) -> int:
        if 0 <= index < self.size:
            return self.values[index]
        log.error("register %s: read index %d out of bounds (size %d)", self.name, index, self.size)
        return 0

    def write(self, index: int, value: int) -> None:
        if 0 <= index < self.size:
            self.values[index] = int(value) & self.mask
        else:
            log.error("register %s: write index %d out of bounds (size %d)",
                      self.name, index, self.size)

    def reset(self) -> None:
        self.values = [0] * self.size


class CounterArray:
    def __init__(self, name: str, size: int, kind: str) -> None:
        self.name = name
        self.size = size
        self.kind = kind
        self.packets = [0] * size
        self.bytes = [0] * size

    def count(self, index: int, packet_length: int) -> None:
        if 0 <= index < self.size:
            self.packets[index] += 1
            self.bytes[index] += packet_length
        else:
            log.error("counter %s: index %d out of bounds (size %d)", self.name, index, self.size)

    def read(self, index: int) -> tuple[int, int]:
        """(bytes, packets), like simple_switch_CLI prints them."""
        if not 0 <= index < self.size:
            raise IndexError(index)
        return self.bytes[index], self.packets[index]

    def write(self, index: int, packets: int, nbytes: int) -> None:
        if not 0 <= index < self.size:
            raise IndexError(index)
        self.packets[index] = packets
        self.bytes[index] = nbytes

    def reset(self) -> None:
        self.packets = [0] * self.size
        self.bytes = [0] * self.size


class MeterError(Exception):
    pass


class Meter:
    """One trTCM instance (two rates), BMv2's token arithmetic."""

    __slots__ = ("kind", "rates", "configured", "_tokens", "_last")

    def __init__(self, kind: str) -> None:
        self.kind = kind
        self.rates: list[tuple[float, int]] = []  # as configured: committed, peak
        self.configured = False
        self._tokens: list[int] = []
        self._last: list[int] = []

    def set_rates(self, rates: list[tuple[float, int]]) -> None:
        if len(rates) != 2:
            raise MeterError(f"expected 2 rates, got {len(rates)}")
        if rates[0][0] > rates[1][0]:
            raise MeterError("INVALID_INFO_RATE_VALUE (committed rate above peak rate)")
        self.rates = [(float(r), int(b)) for r, b in rates]
        self._tokens = [b for _, b in self.rates]
        self._last = [-1, -1]
        self.configured = True

    def reset(self) -> None:
        self.rates = []
        self.configured = False

    def execute(self, length: int, now_us: int) -> int:
        if not self.configured:
            return GREEN
        units = 1 if self.kind == "packets" else length
        # Peak bucket first (RED), then committed (YELLOW), as BMv2 does.
        for i, color in ((1, RED), (0, YELLOW)):
            rate, burst = self.rates[i]
            since = int(now_us * rate)
            if self._last[i] < 0:
                self._last[i] = since
            new = since - self._last[i]
            self._last[i] = since
            self._tokens[i] = min(self._tokens[i] + new, burst)
            if self._tokens[i] < units:
                return color
            self._tokens[i] -= units
        return GREEN


class MeterArray:
    def __init__(self, name: str, size: int, kind: str, now_us: Callable[[], int]) -> None:
        self.name = name
        self.size = size
        self.kind = kind
        self._now = now_us
        self.meters = [Meter(kind) for _ in range(size)]

    def execute(self, index: int, packet_length: int) -> int:
        if 0 <= index < self.size:
            return self.meters[index].execute(packet_length, self._now())
        log.error("meter %s: index %d out of bounds (size %d)", self.name, index, self.size)
        return GREEN

    def set_rates(self, index: int, rates: list[tuple[float, int]]) -> None:
        if not 0 <= index < self.size:
            raise IndexError(index)
        self.meters[index].set_rates(rates)

    def set_all_rates(self, rates: list[tuple[float, int]]) -> None:
        for m in self.meters:
            m.set_rates(rates)

    def get_rates(self, index: int) -> list[tuple[float, int]]:
        if not 0 <= index < self.size:
            raise IndexError(index)
        return list(self.meters[index].rates)

    def reset(self) -> None:
        for m in self.meters:
            m.reset()


# ---------------------------------------------------------------------------
# log_msg


def format_log_msg(fmt: str, args: list[Any]) -> str:
    """BMv2's log_msg: each ``{...}`` takes the next argument (decimal);
    ``\\{`` and ``\\}`` are literal braces. A placeholder without an
    argument is left as written."""
    out = []
    i = 0
    ai = 0
    n = len(fmt)
    while i < n:
        c = fmt[i]
        if c == "\\" and i + 1 < n and fmt[i + 1] in "{}":
            out.append(fmt[i + 1])
            i += 2
            continue
        if c == "{":
            j = i + 1
            while j < n and not (fmt[j] == "}" and fmt[j - 1] != "\\"):
                j += 1
            if j < n:
                if ai < len(args):
                    a = args[ai]
                    out.append(str(int(a)) if isinstance(a, bool) else str(a))
                    ai += 1
                else:
                    out.append(fmt[i:j + 1])
                i = j + 1
                continue
        out.append(c)
        i += 1
    return "".join(out)
