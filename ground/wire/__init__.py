"""The wire formats, each declared once (ground.wire.layout.Header): Ethernet,
MAC control PAUSE/PFC, IPv4, UDP, RoCEv2's BTH, RETH, AETH and ImmDt, and the
ICRC. Hosts, switches, the simulator and the scapy dissectors build and parse
frames with these declarations; none of them spells a field layout of its own.

| module | formats |
| --- | --- |
| ``layout`` | the declaration: fields -> struct, pack, unpack, getters, positions |
| ``ethernet`` | Ethernet II |
| ``pause`` | MAC control PAUSE (802.3x) and PFC (802.1Qbb) |
| ``ipv4`` | IPv4 and its header checksum |
| ``udp`` | UDP |
| ``roce`` | BTH, RETH, AETH, ImmDt; the opcodes and which headers each carries |
| ``icrc`` | the ICRC and its pseudo-header |
"""
