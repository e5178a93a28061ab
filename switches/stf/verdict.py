"""The verdict of an STF run, the same for every target.

As p4c's BMv2 runner judges (backends/bmv2/bmv2stf.py ``checkOutputs``):
each port must output exactly as many packets as it has expects, in order;
an ``expect <port>`` without data stands for one packet of any content; a
port with output and no expect fails. A ``no_packet`` line additionally
checks, when it is reached, that no port has produced more packets than the
expects before it allow.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from switches.stf.syntax import Command, Expect


@dataclass
class StfResult:
    passed: bool
    packets: int
    mismatches: list[str] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return {"passed": self.passed, "packets": self.packets, "mismatches": self.mismatches}


def compare_packet(expected: str, got: bytes) -> str | None:
    """None if ``got`` matches the expectation (hex nibbles, ``*`` don't-care,
    optional trailing ``$`` for the exact length), else a readable diff."""
    exp = "".join(expected.split()).upper()
    exact = exp.endswith("$")
    if exact:
        exp = exp[:-1]
    rec = got.hex().upper()
    problems = []
    if len(rec) < len(exp):
        problems.append(f"too short: {len(rec) // 2} bytes, expected "
                        f"{'exactly' if exact else 'at least'} {len(exp) / 2:g}")
    elif exact and len(rec) > len(exp):
        problems.append(f"too long: {len(rec) // 2} bytes, expected exactly {len(exp) / 2:g}")
    diffs = [i for i, c in enumerate(exp) if c != "*" and (i >= len(rec) or rec[i] != c)]
    if not problems and not diffs:
        return None
    if diffs:
        problems.append(f"{len(diffs)} nibble(s) differ, first at byte {diffs[0] // 2}")
    bad_nibbles = set(diffs)
    marks = []
    for b in range(0, max(len(exp), len(rec)), 2):
        bad = b in bad_nibbles or b + 1 in bad_nibbles or b >= len(rec) or \
            (exact and b >= len(exp))
        marks.append("^^" if bad else "  ")

    def spaced(s: str) -> str:
        return " ".join(s[i:i + 2] for i in range(0, len(s), 2))
    return ("; ".join(problems) + "\n"
            + f"    expected: {spaced(exp)}{' $' if exact else ''}\n"
            + f"    got:      {spaced(rec)}\n"
            + f"              {' '.join(marks).rstrip()}")


class Mask:
    """An expected packet with don't-care bits, as ptf's ``Mask``: start from
    the exact bytes, mark fields don't-care by bit offset and width.

        m = Mask(expected)
        m.dont_care(8 * 22, 8)       # IPv4 TTL
        m.dont_care(8 * 24, 16)      # IPv4 header checksum
        m.compare(got)               # None, or a diff naming the differing bytes
        m.pattern()                  # as an STF expect: a nibble with any
                                     # don't-care bit becomes '*'
    """

    def __init__(self, expected: bytes, exact_length: bool = True) -> None:
        self.expected = bytes(expected)
        self.care = bytearray(b"\xff" * len(expected))
        self.exact_length = exact_length

    def dont_care(self, offset_bits: int, width_bits: int) -> Mask:
        if offset_bits < 0 or width_bits < 0 or offset_bits + width_bits > 8 * len(self.expected):
            raise ValueError(f"bits {offset_bits}..{offset_bits + width_bits - 1} are outside "
                             f"the {len(self.expected)}-byte packet")
        for bit in range(offset_bits, offset_bits + width_bits):
            self.care[bit // 8] &= ~(0x80 >> (bit % 8)) & 0xFF
        return self

    def compare(self, got: bytes) -> str | None:
        """None if ``got`` matches on every bit cared about, else a diff."""
        bad = [i for i, (e, c) in enumerate(zip(self.expected, self.care, strict=True))
               if i >= len(got) or (got[i] ^ e) & c]
        short = len(got) < len(self.expected)
        long = self.exact_length and len(got) > len(self.expected)
        if not bad and not short and not long:
            return None
        problems = []
        if short or long:
            problems.append(f"{len(got)} bytes, expected {len(self.expected)}")
        shown = [i for i in bad if i < len(got)]
        if shown:
            problems.append(f"{len(shown)} byte(s) differ where cared about, first at byte "
                            f"{shown[0]}: got {got[shown[0]]:02X}, expected "
                            f"{self.expected[shown[0]]:02X} (mask {self.care[shown[0]]:02X})")
        return "; ".join(problems)

    def pattern(self) -> str:
        out = []
        for e, c in zip(self.expected, self.care, strict=True):
            for shift in (4, 0):
                out.append(f"{(e >> shift) & 0xF:X}" if (c >> shift) & 0xF == 0xF else "*")
        return "".join(out) + ("$" if self.exact_length else "")


class Verdict:
    """Expectations and errors gathered while a test runs; ``result(outputs)``
    judges the outputs per port at the end."""

    def __init__(self) -> None:
        self.expects: dict[int, list[str | None]] = {}
        self.errors: list[str] = []
        self.packets = 0

    def expect(self, cmd: Expect) -> None:
        self.expects.setdefault(cmd.port, []).append(cmd.pattern)

    def error(self, cmd: Command, message: object) -> None:
        self.errors.append(f"line {cmd.line}: {cmd.text}: {message}")

    def check_no_packet(self, cmd: Command, outputs: Mapping[int, Sequence[bytes]]) -> None:
        """``no_packet``: outputs so far beyond the expects so far fail."""
        for port in sorted(outputs):
            extra = len(outputs[port]) - len(self.expects.get(port, []))
            if extra > 0:
                self.error(cmd, f"port {port} produced {extra} packet(s) more than expected "
                                f"so far")

    def mismatches(self, outputs: Mapping[int, Sequence[bytes]]) -> list[str]:
        out = list(self.errors)
        for port in sorted(set(outputs) | set(self.expects)):
            got = outputs.get(port, [])
            exp = self.expects.get(port, [])
            for i in range(max(len(got), len(exp))):
                if i >= len(exp):
                    out.append(f"port {port}: unexpected packet #{i}: {got[i].hex().upper()}")
                elif i >= len(got):
                    what = exp[i] if exp[i] is not None else "(any content)"
                    out.append(f"port {port}: expected packet #{i} not received: {what}")
                else:
                    pattern = exp[i]
                    d = compare_packet(pattern, got[i]) if pattern is not None else None
                    if d is not None:
                        out.append(f"port {port}: packet #{i} differs: {d}")
            if len(got) != len(exp):
                out.append(f"port {port}: expected {len(exp)} packet(s), got {len(got)}")
        return out

    def result(self, outputs: Mapping[int, Sequence[bytes]]) -> StfResult:
        m = self.mismatches(outputs)
        return StfResult(passed=not m, packets=self.packets, mismatches=m)
