"""MAC control PAUSE (IEEE 802.3x) and priority flow control (IEEE 802.1Qbb).

A pause frame is a MAC control frame (EtherType 0x8808) to the reserved
address 01:80:C2:00:00:01. After the Ethernet header come a MAC control
opcode and its body: PAUSE (opcode 0x0001) has one timer for the whole
link; PFC (opcode 0x0101) has a class-enable vector (bit c: the frame's timer
for class c applies) and eight timers, one per class. Timers count quanta of
512 bit times of the link the frame arrives on; a timer of 0 ends a pause
(XON). Frames are padded to Ethernet's 60-byte minimum (without the FCS,
which the kernel adds).
"""

from __future__ import annotations

from ground.wire.ethernet import ETHERNET, ETHERTYPE_MAC_CONTROL
from ground.wire.layout import Field, Header

__all__ = ["MAC_CONTROL", "PAUSE", "PFC", "PFC_DST", "OPCODE_PAUSE", "OPCODE_PFC",
           "MAX_QUANTA", "QUANTUM_BITS", "CLASSES", "ALL_CLASSES", "MIN_FRAME",
           "PauseFormatError", "pfc_frame", "is_pause", "parse_pause", "pause_us"]

PFC_DST = bytes.fromhex("0180c2000001")
OPCODE_PAUSE = 0x0001                 # 802.3x: one timer for the whole link
OPCODE_PFC = 0x0101                   # 802.1Qbb: a timer per class
MAX_QUANTA = 0xFFFF
QUANTUM_BITS = 512                    # a quantum is 512 bit times of the link
CLASSES = 8
ALL_CLASSES = (1 << CLASSES) - 1
MIN_FRAME = 60

# the opcode alone: what tells PAUSE from PFC
MAC_CONTROL = Header("MAC control", Field("opcode", 16))
PAUSE = Header("PAUSE", Field("opcode", 16, OPCODE_PAUSE), Field("quanta", 16))
PFC = Header("PFC", Field("opcode", 16, OPCODE_PFC), Field("class_enable", 16),
             *(Field(f"quanta{c}", 16) for c in range(CLASSES)))

_ETHERTYPE = ETHERNET.position("ethertype")
_TYPE_HI, _TYPE_LO = ETHERTYPE_MAC_CONTROL >> 8, ETHERTYPE_MAC_CONTROL & 0xFF
_BODY = ETHERNET.size
_PFC_FRAME = _BODY + PFC.size
_PAUSE_FRAME = _BODY + PAUSE.size


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
    frame = (ETHERNET.pack(PFC_DST, src_mac, ETHERTYPE_MAC_CONTROL)
             + PFC.pack(OPCODE_PFC, vector, *timers))
    return frame + bytes(MIN_FRAME - len(frame))


def is_pause(frame: bytes | bytearray | memoryview) -> bool:
    """Whether ``frame`` is a MAC control frame (what a MAC consumes)."""
    t = _ETHERTYPE.offset
    return len(frame) >= _BODY and frame[t] == _TYPE_HI and frame[t + 1] == _TYPE_LO


def parse_pause(frame: bytes | bytearray | memoryview) -> dict[int, int]:
    """The timers of a PFC or PAUSE frame: class -> quanta for the enabled
    classes (a PAUSE frame's one timer applies to every class)."""
    if len(frame) < _PAUSE_FRAME or not is_pause(frame):
        raise PauseFormatError(f"not a MAC control frame ({len(frame)} bytes)")
    (opcode,) = MAC_CONTROL.unpack(frame, _BODY)
    if opcode == OPCODE_PAUSE:
        quanta: int = PAUSE.unpack(frame, _BODY)[1]
        return dict.fromkeys(range(CLASSES), quanta)
    if opcode != OPCODE_PFC:
        raise PauseFormatError(f"MAC control opcode {opcode:#06x} is not PAUSE or PFC")
    if len(frame) < _PFC_FRAME:
        raise PauseFormatError(f"a PFC frame needs {_PFC_FRAME} bytes, got {len(frame)}")
    fields = PFC.unpack(frame, _BODY)
    vector, timers = fields[1], fields[2:]
    return {c: timers[c] for c in range(CLASSES) if vector >> c & 1}


def pause_us(quanta: int, rate_bps: float) -> float:
    """How long ``quanta`` pause a link of ``rate_bps`` (microseconds)."""
    return quanta * QUANTUM_BITS * 1e6 / rate_bps
