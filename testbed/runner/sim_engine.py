"""The virtual-time engine: the plan on one simulated clock (testbed.sim), in
this process or in a PyPy child, with its own fidelity verdict."""

from __future__ import annotations

import time
from pathlib import Path
from typing import TYPE_CHECKING

from testbed.experiment import RunPlan
from testbed.runner.errors import RunError
from testbed.runner.options import RunOptions
from testbed.runner.progress import Progress
from testbed.runner.records import AppliedCommand, Measured, SimRecord

if TYPE_CHECKING:
    from testbed.fidelity import Verdict


class SimEngine:
    """Virtual time: the plan on one simulated clock in this process (testbed.sim)."""

    name = "sim"

    def check(self, plan: RunPlan, opts: RunOptions) -> None:
        from testbed.sim.engine import SimUnsupported, check_plan

        if not opts.switch_target().virtual_time:
            raise RunError(f"--target {opts.target}: the virtual-time engine runs the soft "
                           "switch's runtime (BMv2 runs in real time: --engine mininet)")
        if opts.pcap:
            raise RunError("--pcap: the virtual-time engine writes no captures yet")
        try:
            check_plan(plan, opts.hosts)
        except SimUnsupported as e:
            raise RunError(f"--engine sim: {e}") from e

    def execute(self, plan: RunPlan, run_dir: Path, opts: RunOptions, prog: Progress,
                applied: list[AppliedCommand], measured: Measured) -> None:
        from testbed.sim.driver import run_phases
        from testbed.sim.engine import SimUnsupported, host_line_bps
        from testbed.sim.network import compile_plan_program
        from testbed.sim.pypy import InterpreterError, choose, run_in_child

        try:
            exe = choose(opts.interpreter)
            host_bps = host_line_bps(plan)
            program = compile_plan_program(plan)
        except (InterpreterError, SimUnsupported, ValueError) as e:
            raise RunError(f"--engine sim: {e}") from e
        topo = plan.topology
        fab = topo.fabric
        prog.line(f"network (simulated): {topo.n_hosts} hosts around "
                  + (f"a leaf-spine of {fab.leaves} leaves and {fab.spines} spines"
                     if fab else "switch s1")
                  + f" running {topo.program_label()}, NICs at "
                  f"{host_bps / 1e6:g} Mb/s, host links {opts.host_links}, seed {opts.seed}"
                  + (f", under PyPy ({exe})" if exe else ""))
        wall0 = time.monotonic()
        rec: SimRecord | None = None
        try:
            if exe is None:  # in this process
                out = run_phases(plan, run_dir, seed=opts.seed, host_links=opts.host_links,
                                 packet_bytes=topo.packet_bytes, load_program=lambda: program,
                                 line=prog.line, applied=applied)
            else:
                from switches.soft.backends import write_generated

                out = run_in_child(exe, plan, run_dir, seed=opts.seed,
                                   host_links=opts.host_links, packet_bytes=topo.packet_bytes,
                                   program_path=write_generated(program), line=prog.line)
                applied.extend(out.applied)
            rec = out.record
            if out.fidelity is not None:
                measured["sim_fidelity"] = out.fidelity
            out.reraise()
        finally:
            if rec is not None:
                wall = time.monotonic() - wall0
                rec.update({
                    "wall_s": round(wall, 3),
                    "packet_hops_per_s": round(rec["packet_hops"] / wall) if wall > 0 else None,
                    "events_per_s": round(rec["events"] / wall) if wall > 0 else None})
                measured["sim"] = rec
        assert rec is not None  # (a run without a record raised above)
        prog.line(f"simulated {rec['sim_s']:.6f} s in {rec['wall_s']:.1f} s of wall time: "
                  f"{rec['events']} events, {rec['packet_hops']} packet-hops "
                  f"({rec['packet_hops_per_s']} per wall second, {rec['interpreter']})")

    def fidelity(self, run_dir: Path, plan: RunPlan, opts: RunOptions,
                 measured: Measured) -> Verdict:
        return measured["sim_fidelity"]
