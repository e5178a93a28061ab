"""UDP (RFC 768)."""

from __future__ import annotations

from ground.wire.layout import Field, Header

__all__ = ["UDP", "UDP_HLEN"]

UDP = Header("UDP", Field("sport", 16), Field("dport", 16), Field("length", 16),
             Field("checksum", 16))
UDP_HLEN = UDP.size
