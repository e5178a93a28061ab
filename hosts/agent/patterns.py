"""The data every side can recompute: the bytes a flow carries.

Both ends of a flow derive its payload from the spec's seed (flow_pattern),
so a receiver checks what landed (matches_pattern) without a copy from the
sender; flow_buffer and register_flow_buffer make a flow end's registered
memory (for a phantom payload, its sizes without its bytes)."""

from __future__ import annotations

import hashlib
import mmap
from typing import Any

from hosts.agent_spec import FlowSpec
from hosts.roce.verbs import MR, Access, lazy_zeros

# The pattern repeats with this period, a prime number of bytes: a 487 MB
# flow's pattern costs one 16 MiB SHAKE-128 digest and copies (70 ms) instead
# of a digest as long as the flow (1.9 s, and as long again at the receiver to
# check it). Packets sit at multiples of the path MTU (at most 4096, a power of
# two, coprime to the period), so a packet written at the wrong place matches
# only if it moved by a multiple of 1024 periods, 16 GiB, more than a flow
# may carry (MAX_FLOW_BYTES); a shift by part of a packet never matches.
FLOW_PATTERN_PERIOD = 16_777_259


def _pattern_block(spec: FlowSpec) -> bytes:
    """One period of a flow's pattern (shorter for a shorter flow)."""
    n = min(spec.total_bytes, FLOW_PATTERN_PERIOD)
    return hashlib.shake_128(b"flow-pattern/%d" % spec.seed).digest(n)


def flow_pattern(spec: FlowSpec) -> bytearray:
    """The bytes a flow's sender sends (both ends derive them from the seed):
    SHAKE-128 of the seed, the same on every interpreter an agent runs on,
    repeated every FLOW_PATTERN_PERIOD bytes."""
    block = _pattern_block(spec)
    n = spec.total_bytes
    buf = bytearray(n)
    view = memoryview(buf)
    for off in range(0, n, len(block) or 1):
        k = min(len(block), n - off)
        view[off:off + k] = block if k == len(block) else block[:k]
    return buf


def matches_pattern(buf: bytes | bytearray | mmap.mmap, spec: FlowSpec, n: int) -> bool:
    """Whether the first ``n`` bytes of ``buf`` are the first ``n`` of the
    flow's pattern, compared a period at a time against the one period held
    (a flow may be gigabytes: no second copy of it is built)."""
    if len(buf) < n or n > spec.total_bytes:
        return False
    block = _pattern_block(spec)
    view = memoryview(buf)
    period = len(block) or 1
    # bytes == bytes compares with memcmp; a memoryview comparison goes
    # element by element, ten times slower
    return all(view[off:off + min(period, n - off)].tobytes()
               == (block if n - off >= period else block[:n - off])
               for off in range(0, n, period))


def flow_buffer(spec: FlowSpec) -> bytearray | mmap.mmap:
    """A flow end's registered memory: the sender's pattern, the receiver's
    zeroed landing buffer, or for a phantom payload untouched anonymous
    memory at either end (its sizes without its bytes)."""
    if spec.payload == "phantom":
        return lazy_zeros(spec.total_bytes)
    return flow_pattern(spec) if spec.role == "sender" else bytearray(spec.total_bytes)


def register_flow_buffer(pd: Any, spec: FlowSpec, buf: bytearray | mmap.mmap) -> MR:
    """``buf`` registered for the flow end: the sender's for local reads, the
    receiver's for remote writes too, which a phantom payload's discards."""
    if spec.role == "sender":
        return pd.reg_mr(buf, Access.LOCAL_WRITE)
    mr = pd.reg_mr(buf, Access.LOCAL_WRITE | Access.REMOTE_WRITE)
    if spec.payload == "phantom":
        mr.discard_writes = True
    return mr
