"""P4Runtime byte strings, ids and the error type the server's helpers raise.

Byte strings follow what PI (the P4Runtime server of BMv2) accepts: a value
for a W-bit field may be given with any number of bytes as long as the
number fits in W bits (shorter strings are zero-extended, extra leading
zero bytes are ignored); anything wider is INVALID_ARGUMENT. Values sent
back are canonical: no leading zero bytes, zero is one 0x00 byte.
"""

from __future__ import annotations

import grpc


class P4RTError(Exception):
    """One failed P4Runtime operation: a canonical gRPC code and a message."""

    def __init__(self, code: grpc.StatusCode, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


def invalid(msg: str) -> P4RTError:
    return P4RTError(grpc.StatusCode.INVALID_ARGUMENT, msg)


def not_found(msg: str) -> P4RTError:
    return P4RTError(grpc.StatusCode.NOT_FOUND, msg)


def unimplemented(msg: str) -> P4RTError:
    return P4RTError(grpc.StatusCode.UNIMPLEMENTED, msg)


def code_number(code: grpc.StatusCode) -> int:
    """The google.rpc.Code number of a grpc.StatusCode."""
    return int(code.value[0])


def decode(data: bytes, width: int, what: str = "value") -> int:
    """The integer a P4Runtime byte string carries for a ``width``-bit field."""
    if not data:
        raise invalid(f"{what}: empty byte string")
    v = int.from_bytes(data, "big")
    if v >> width:
        raise invalid(f"{what}: byte string does not fit within {width} bits")
    return v


def encode(value: int, width: int | None = None) -> bytes:
    """Canonical byte string of ``value`` (masked to ``width`` bits if given)."""
    v = int(value)
    if width is not None:
        v &= (1 << width) - 1
    return v.to_bytes(max(1, (v.bit_length() + 7) // 8), "big")


def uint128(msg: object) -> int:
    """p4.v1.Uint128 -> int."""
    return (int(msg.high) << 64) | int(msg.low)  # type: ignore[attr-defined]


def set_uint128(msg: object, value: int) -> None:
    msg.high = (value >> 64) & ((1 << 64) - 1)  # type: ignore[attr-defined]
    msg.low = value & ((1 << 64) - 1)  # type: ignore[attr-defined]


def pack_fields(values: list[tuple[int, int]]) -> bytes:
    """``(value, width)`` pairs MSB first, padded with zero bits to whole bytes."""
    acc = 0
    nbits = 0
    for v, w in values:
        acc = (acc << w) | (int(v) & ((1 << w) - 1))
        nbits += w
    pad = (-nbits) % 8
    return (acc << pad).to_bytes((nbits + pad) // 8, "big")


def unpack_fields(data: bytes, widths: list[int]) -> list[int]:
    """Inverse of ``pack_fields`` for the leading bytes of ``data``."""
    nbits = sum(widths)
    nbytes = (nbits + 7) // 8
    acc = int.from_bytes(data[:nbytes], "big") >> (nbytes * 8 - nbits)
    out = []
    shift = nbits
    for w in widths:
        shift -= w
        out.append((acc >> shift) & ((1 << w) - 1))
    return out
