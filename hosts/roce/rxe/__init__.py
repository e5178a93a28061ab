"""rdma_rxe hosts: the verbs API of hosts.roce over the kernel's soft-RoCE, and
the DCQCN shim that does beside it what rxe does not.

One concern per module, each importing only those listed before it:

- ``sport``: the UDP source port (the flow tag) the kernel gives a QP, by its own
  arithmetic (QPN hash, flow label), and which kernels derive it from the flow label.
- ``device``: what this host has: pyverbs, rxe devices in sysfs, their RoCE v2
  GIDs and hw_counters; why a context cannot be opened here.
- ``qp_plans``: the QP state transitions (INIT, RTR, RTS) as plans of
  ibv_modify_qp calls, in libibverbs ABI values.
- ``pyverbs_objects``: pyverbs QP attributes and work requests built from plans
  and the project's WRs, the project's WCs from pyverbs completions.
- ``provider``: ``RxeContext`` and its PD, MR, CQ, QP and engine: the verbs API
  CommLib and the agent use.
- ``frames``: the RoCEv2 frames the DCQCN shim parses and sends, and its packet filter.
- ``wire_counts``: per-QP requester counts (retransmits, NAKs, timeouts) from the wire.
- ``dcqcn_points``: DCQCN's notification and reaction points and the byte counter
  fed by the QPs' HTB classes.
- ``dcqcn_shim``: ``RxeDcqcnShim``, the per-host socket and HTB shaper that run them.

Only ``provider`` and ``device`` (and the shim's socket and qdisc) need an rxe
host; the rest is pure logic the unit tests check without one. This package
imports none of its modules: import from the module that defines a name.
"""
