"""The ground floor: helpers over the kernel that every package may use.

Nothing here imports the project's other packages (switches, hosts, testbed,
experiments), so switches and hosts can use it without reaching up into the
testbed.

- :mod:`ground.netlink`: links and neighbours of a network namespace (pyroute2).
"""
