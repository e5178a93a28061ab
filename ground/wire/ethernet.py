"""Ethernet II: the frame header every other format here rides in."""

from __future__ import annotations

from ground.wire.layout import Bytes, Field, Header

__all__ = ["ETHERNET", "ETH_HLEN", "ETHERTYPE_IPV4", "ETHERTYPE_MAC_CONTROL", "mac_bytes"]

ETHERTYPE_IPV4 = 0x0800
ETHERTYPE_MAC_CONTROL = 0x8808        # PAUSE and PFC (ground.wire.pause)

ETHERNET = Header("Ethernet", Bytes("dst", 6), Bytes("src", 6), Field("ethertype", 16))
ETH_HLEN = ETHERNET.size


def mac_bytes(mac: str | bytes) -> bytes:
    """A MAC address as its 6 bytes ("02:00:00:00:00:01", or the bytes themselves)."""
    b = mac if isinstance(mac, bytes) else bytes.fromhex(mac.replace(":", ""))
    if len(b) != 6:
        raise ValueError(f"not a MAC address: {mac!r}")
    return b
