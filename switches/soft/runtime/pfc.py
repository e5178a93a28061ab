"""Priority flow control (IEEE 802.1Qbb): the MAC control frame, and the
per-ingress accounting a switch port uses to pause the hop before it.

A PFC frame is a MAC control frame (EtherType 0x8808, opcode 0x0101) to the
reserved address 01:80:C2:00:00:01, with a class-enable vector (bit c: the
frame's timer for class c applies) and eight timers in quanta of 512 bit
times of the link it arrives on. A timer of 0 ends a pause (XON); a switch
pauses with the largest timer and ends the pause with an XON once its buffer
has drained, rather than relying on the timer. The legacy 802.3x PAUSE
(opcode 0x0001, one timer for the whole link) is read too.

The format is declared once here; the hosts' side (hosts/roce/pfc.py, a NIC
that obeys pauses) reads frames with :func:`parse_pause`.

:class:`PfcIngress` is the switch's side: it counts, per (ingress port,
class), the packets held in the egress queues, and says when to send XOFF
(the count reached ``xoff``) and XON (it fell to ``xon``). The class of a
held packet is the egress queue priority the pipeline gave it.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field

ETH_P_PAUSE = 0x8808                  # MAC control
PFC_DST = bytes.fromhex("0180c2000001")
OPCODE_PAUSE = 0x0001                 # 802.3x: one timer for the whole link
OPCODE_PFC = 0x0101                   # 802.1Qbb: a timer per class
MAX_QUANTA = 0xFFFF
QUANTUM_BITS = 512                    # a quantum is 512 bit times of the link
CLASSES = 8
MIN_FRAME = 60                        # without the FCS, which the kernel adds
ALL_CLASSES = (1 << CLASSES) - 1

_PFC = struct.Struct("!6s6sHHH8H")    # dst, src, type, opcode, class vector, 8 timers
_PAUSE = struct.Struct("!6s6sHHH")    # dst, src, type, opcode, timer


class PauseFormatError(ValueError):
    """A MAC control frame that is not a pause frame this model reads."""


def pfc_frame(src_mac: bytes, quanta: dict[int, int]) -> bytes:
    """A PFC frame from ``src_mac`` with a timer per class in ``quanta``
    (class -> quanta; the classes named are the enabled ones)."""
    if len(src_mac) != 6:
        raise ValueError("src_mac must be 6 bytes")
    timers = [0] * CLASSES
    vector = 0
    for cls, q in quanta.items():
        if not 0 <= cls < CLASSES:
            raise ValueError(f"PFC class {cls} out of range 0..{CLASSES - 1}")
        if not 0 <= q <= MAX_QUANTA:
            raise ValueError(f"PFC timer {q} out of range 0..{MAX_QUANTA}")
        timers[cls] = q
        vector |= 1 << cls
    frame = _PFC.pack(PFC_DST, src_mac, ETH_P_PAUSE, OPCODE_PFC, vector, *timers)
    return frame + bytes(MIN_FRAME - len(frame))


def is_pause(frame: bytes | bytearray | memoryview) -> bool:
    """Whether ``frame`` is a MAC control frame (what a MAC consumes)."""
    return len(frame) >= 14 and frame[12] == 0x88 and frame[13] == 0x08


def parse_pause(frame: bytes | bytearray | memoryview) -> dict[int, int]:
    """The timers of a PFC or PAUSE frame: class -> quanta for the enabled
    classes (a PAUSE frame's one timer applies to every class)."""
    if len(frame) < _PAUSE.size or not is_pause(frame):
        raise PauseFormatError(f"not a MAC control frame ({len(frame)} bytes)")
    opcode = int.from_bytes(frame[14:16], "big")
    if opcode == OPCODE_PAUSE:
        q = int.from_bytes(frame[16:18], "big")
        return dict.fromkeys(range(CLASSES), q)
    if opcode != OPCODE_PFC:
        raise PauseFormatError(f"MAC control opcode {opcode:#06x} is not PAUSE or PFC")
    if len(frame) < _PFC.size:
        raise PauseFormatError(f"a PFC frame needs {_PFC.size} bytes, got {len(frame)}")
    fields = _PFC.unpack_from(bytes(frame[:_PFC.size]))
    vector, timers = fields[4], fields[5:]
    return {c: timers[c] for c in range(CLASSES) if vector >> c & 1}


def pause_us(quanta: int, rate_bps: float) -> float:
    """How long ``quanta`` pause a link of ``rate_bps`` (microseconds)."""
    return quanta * QUANTUM_BITS * 1e6 / rate_bps


@dataclass
class PfcIngress:
    """Per (ingress port, class) counts of held packets and the pause each
    has asked of the hop before it.

    ``xoff``: held packets at which the ingress pauses its class upstream;
    ``xon``: held packets at or below which it ends the pause. A pause still
    on is asked for again when a packet of that ingress and class arrives
    half a largest timer or more (on the ingress link's rate) after the last
    request: the hop before then was no longer paused (its timer ran out)."""

    xoff: int
    xon: int
    held: dict[tuple[int, int], int] = field(default_factory=dict)
    paused_at: dict[tuple[int, int], float] = field(default_factory=dict)  # last XOFF sent
    xoff_sent: dict[int, int] = field(default_factory=dict)   # per ingress port
    xon_sent: dict[int, int] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.xoff < 1 or not 0 <= self.xon < self.xoff:
            raise ValueError(f"PFC thresholds need xoff >= 1 and 0 <= xon < xoff "
                             f"(got xoff {self.xoff}, xon {self.xon})")

    def held_one(self, ingress: int, cls: int, now_us: float,
                 ingress_bps: float) -> int | None:
        """A packet of (ingress, cls) is held; the quanta to send to ingress
        (MAX_QUANTA: pause), or None. ``ingress_bps``: the ingress link's
        rate (0: unknown, a pause is then never asked for again)."""
        key = (ingress, cls)
        n = self.held.get(key, 0) + 1
        self.held[key] = n
        at = self.paused_at.get(key)
        if at is None:
            if n < self.xoff:
                return None
        elif ingress_bps <= 0 or now_us - at < pause_us(MAX_QUANTA, ingress_bps) / 2:
            return None
        self.paused_at[key] = now_us
        self.xoff_sent[ingress] = self.xoff_sent.get(ingress, 0) + 1
        return MAX_QUANTA

    def released_one(self, ingress: int, cls: int) -> int | None:
        """A packet of (ingress, cls) left its queue; 0 (XON) to send to
        ingress when that ends its pause, else None."""
        key = (ingress, cls)
        n = self.held.get(key, 0) - 1
        self.held[key] = max(0, n)
        if n <= self.xon and key in self.paused_at:
            del self.paused_at[key]
            self.xon_sent[ingress] = self.xon_sent.get(ingress, 0) + 1
            return 0
        return None

    def release_all(self) -> list[tuple[int, int]]:
        """Forget every held packet (queues cleared); the (ingress, class)
        pauses to end."""
        ended = sorted(self.paused_at)
        for ingress, _cls in ended:
            self.xon_sent[ingress] = self.xon_sent.get(ingress, 0) + 1
        self.held.clear()
        self.paused_at.clear()
        return ended

    def stats(self) -> dict[str, object]:
        return {"xoff": self.xoff, "xon": self.xon,
                "xoff_sent": {str(p): n for p, n in sorted(self.xoff_sent.items())},
                "xon_sent": {str(p): n for p, n in sorted(self.xon_sent.items())},
                "paused": sorted(f"{p}/{c}" for p, c in self.paused_at)}
