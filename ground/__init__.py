"""The ground floor: what every package may use.

Nothing here imports the project's other packages (switches, hosts, testbed,
experiments), so switches and hosts can use it without reaching up into the
testbed, and share what both need without importing each other.

- :mod:`ground.netlink`: links and neighbours of a network namespace (pyroute2).
- :mod:`ground.wire`: each wire format declared once (Ethernet, PAUSE/PFC,
  IPv4, UDP, RoCEv2's BTH, RETH, AETH and ImmDt, the ICRC), to build and to
  parse frames with.
"""
