"""What a run is asked to do: :class:`RunOptions`, the command line's flags
as one value, shared by every engine."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from switches.targets import Target
from testbed.runner.environment import switch_target


@dataclass
class RunOptions:
    quick: bool = False
    # "quick", "full" or "paper" (testbed.experiment.PROFILES); None: quick
    # or full by ``quick``. The paper profile runs on the sim engine only.
    profile: str | None = None
    target: str = "soft"
    hosts: str = "udp"
    out: Path | None = None
    pcap: bool = False
    overrides: dict[str, str] = field(default_factory=dict)
    echo: Callable[[str], None] = print
    status_interval_s: float = 2.0
    teardown_timeout_s: float = 60.0  # a longer teardown counts as hung (see _force_teardown)
    # Run a phase again, up to this many times, when its own fidelity verdict
    # fails (see run_phase_until_faithful); 0: every phase runs once.
    phase_retries: int = 0
    # "mininet" (real time: namespaces, processes) or "sim" (virtual time,
    # one process: testbed.sim); see ENGINES.
    engine: str = "mininet"
    # The virtual-time engine's seed (its switches' random streams); the
    # plan's own seeds (jobs, flows) are the plan's.
    seed: int = 1
    # The virtual-time engine's host links (testbed.sim.network.HOST_LINKS):
    # "wire" (a frame arrives with its last bit) or "veth" (with its first,
    # as on the Mininet engine).
    host_links: str = "wire"
    # The virtual-time engine's interpreter (testbed.sim.pypy.INTERPRETERS):
    # "auto" runs it under PyPy where set up, in this CPython otherwise.
    interpreter: str = "auto"

    def profile_name(self) -> str:
        """The run's profile: ``profile``, else quick or full by ``quick``."""
        return self.profile or ("quick" if self.quick else "full")

    def switch_target(self) -> Target:
        """The switch target ``target`` names; RunError naming the known ones."""
        return switch_target(self.target)
