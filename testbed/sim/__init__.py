"""The virtual-time engine: a RunPlan on one simulated clock, in one process
(``testbed run NAME --engine sim``; see testbed.sim.engine)."""
