"""Experiments as data: what a run brings up and what each host runs.

An experiment is a module (those of this repository: ``experiments/``), named
in a registry that an installed package declares under the entry-point group
``testbed.experiments`` (``experiments.REGISTRY``), with (:class:`Experiment`):

- ``NAME`` (the CLI name, e.g. ``"roce-basics"``) and a docstring whose first
  line describes it;
- ``Params``: a frozen dataclass of typed parameters with defaults (the full
  profile) and a classmethod ``quick()`` (the short profile); each field is
  declared with ``param(default, meaning, unit)``, the one-line meaning and
  unit ``testbed run NAME --help`` and ``testbed list --params`` show (a
  subclass that only changes a default keeps its base's meaning);
- optionally a classmethod ``Params.paper()``: the paper's own setup (its
  topology, node count, link rate, buffers, sizes, durations, seeds), stated
  once in the paper's units next to ``PAPER``/``REFERENCE`` and converted
  there. It runs on the virtual-time engine only. Where the paper's full size
  would take more than about an hour of wall time here, the profile keeps the
  paper's network and rates, cuts a repetition count, a duration or the
  largest sizes, and says so in a classmethod ``Params.scaled_down_from()``:
  field -> ``ScaledDown(paper value, reason)``, recorded in the run's
  ``summary.json`` and the report;
- ``plan(params) -> RunPlan``: the topology, the switch configuration and the
  phases, each phase a set of job specs (hosts.agent_spec.JobSpec) by host;
- ``analyze(run_dir) -> Summary``: results from the saved timelines, a frozen
  dataclass of typed fields (testbed.summary: the ``HEADLINE`` keys and the
  other results, nested records for phases and schemes) that the runner turns
  into ``summary.json``'s keys in field order (testbed.summary.results_json);
- ``plot(run_dir) -> list[Path]``: PNG figures from the saved timelines;
- ``HOST_PROVIDERS``: the hosts it runs on ("udp", "rxe");
- ``HEADLINE``: the dotted result keys the run's last line shows;
- ``CLAIMS``: the paper's claims the run reproduces (testbed.claims.Claim;
  () for none), which ``testbed report`` judges, and ``REFERENCE``: the
  paper's values they take their numbers from ({} for none).

``RunPlan`` and everything in it is plain data: ``plan_to_dict`` writes it into
the run directory, and ``analyze``/``plot`` read only what a run saved, so a
run can be re-analysed and re-plotted later (``testbed plot DIR``).
"""

from __future__ import annotations

import dataclasses
import importlib.metadata
import re
import types
import typing
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol, TypeVar, cast

from hosts.agent_spec import JobSpec
from testbed.claims import Claim
from testbed.modelled import ModelledNetwork, NetworkError
from testbed.net import LeafSpine
from testbed.summary import Results

__all__ = [
    "Topology",
    "PhasePlan",
    "FidelityLimits",
    "RunPlan",
    "ExperimentError",
    "Experiment",
    "ENTRY_POINT_GROUP",
    "check_defines",
    "discover",
    "load",
    "make_params",
    "param",
    "param_docs",
    "ParamDoc",
    "PROFILES",
    "ScaledDown",
    "has_profile",
    "profiles_of",
    "scaled_down_from",
    "scale_record",
    "params_to_dict",
    "plan_to_dict",
]


class ExperimentError(ValueError):
    """An unknown experiment, a bad parameter, an inconsistent plan."""


@dataclass(frozen=True)
class Topology:
    """N hosts around one switch (testbed.net.star_router): host i is 10.0.i.1 on
    port i; or, with ``fabric``, N hosts on a leaf-spine (testbed.net.leaf_spine). ``commands`` are control-plane lines (simple_switch_CLI syntax,
    applied by testbed.runner.switch_commands.apply_switch_command) applied before any
    traffic, after the routes. ``packet_bytes`` is the typical frame size
    (Ethernet header to ICRC/payload end) that turns a bit rate
    (``set_port_rate_bps``) into the packet rate BMv2's ``set_queue_rate`` takes.
    ``defines`` are preprocessor defines ``(NAME, VALUE)`` the program is
    compiled with on every target and engine (``-D NAME=VALUE``: the soft
    switch's compiler, p4c for BMv2), e.g. a register size the program keeps
    behind ``#ifndef``."""

    n_hosts: int
    program: str                      # P4 source, relative to the repository root
    commands: tuple[str, ...] = ()
    priority_queues: int = 1
    # Register keeping the largest enq_qdepth per egress port (read after each
    # phase and reset before it), or None if the program has none.
    qdepth_register: str | None = None
    # Registers read from every switch after each phase (their non-zero
    # entries by index, in switch_stats.json's ``registers``): what a program
    # observes per job or port, e.g. Symphony's own marks.
    observed_registers: tuple[str, ...] = ()
    packet_bytes: int = 1500
    backend: str = "python"           # the soft target's data path (switches.soft.backends)
    # The modelled network (rate, delays, buffers, RED in the paper's units):
    # the runner converts it and applies it before ``commands``.
    network: ModelledNetwork | None = None
    # A leaf-spine fabric of switches that all run ``program`` (testbed.net.LeafSpine)
    # instead of one switch; ``commands`` then go to every switch.
    fabric: LeafSpine | None = None
    # Lines for one switch of a fabric only (switch name -> lines), applied
    # after the network's and ``commands``: e.g. one uplink's rate.
    switch_commands: dict[str, tuple[str, ...]] = field(default_factory=dict)
    # Each host's interface serialises its frames at the modelled link rate
    # with an HTB qdisc (testbed.net.shape_host), as a NIC does, and its agent
    # adds a class per sending QP at the QP's DCQCN rate: needs ``network``.
    host_line_qdisc: bool = False
    # Preprocessor defines of ``program``: (name, value) pairs, each name once.
    defines: tuple[tuple[str, str], ...] = ()
    # The host agents run at real-time priority (SCHED_FIFO; senders above
    # receivers, testbed.runner.priorities.SENDER_RT_PRIORITY) and the soft switch above them,
    # as the NICs and the switch they stand for run beside the machine's other
    # work: a paced sender then runs when it wakes for its next packet instead
    # of waiting on the run queue behind the switch and the receiver, which on
    # a 2-core machine made ReFlex's senders late for 5-14% of their packets
    # (docs/architecture.md, "On a small machine"). Everything else (the runner,
    # the kernel's softirq threads) shares what is left (the kernel keeps 5%
    # of each second for it).
    realtime: bool = False
    # The soft switches at real-time priority (SWITCH_RT_PRIORITY) even when
    # the agents are not: they stand for hardware, and a fabric is several
    # daemons beside the agents on two cores. Measured on symphony-ring
    # --quick: at normal priority (nice -10) the switches lagged 500-800 us
    # on average and up to 87 ms, their senders 14 % late; with this, 100-200
    # us and mostly under 40 ms, 7 % late. (All agents real-time too, with
    # ``realtime``, made that 8-25 %: many polling senders at one SCHED_FIFO
    # priority do not yield to each other.)
    realtime_switches: bool = True
    # With ``realtime``: the agents above the switches (senders, then
    # receivers, then the switches) instead of below them. A sender is late
    # when it misses its packet time, a switch only when it lags by 50 ms
    # (FidelityLimits), so where many agents share the cores with several
    # switches the agents go first: symphony-ring --quick (four CPython
    # switches, four ranks of ten QPs each) was then faithful, 1.2 % of
    # sends late at most and the switches' lag 29 ms at most, where with the
    # switches first 15-25 % of sends were late. Where senders poll at a high
    # packet rate (ReFlex at 40-60 Mb/s) they would starve the switch instead:
    # there the switch goes first (reflex-cases --quick: switch lag up to 119
    # ms with agents above it).
    realtime_agents_first: bool = False

    def __post_init__(self) -> None:
        if not 1 <= self.n_hosts <= 250:
            raise ExperimentError("n_hosts must be 1..250")
        if self.fabric is not None:
            if self.fabric.n_hosts != self.n_hosts:
                raise ExperimentError(f"n_hosts {self.n_hosts} differs from the fabric's "
                                      f"{self.fabric.n_hosts} hosts")
            if self.network is not None and self.network.link_delay_us:
                raise ExperimentError("a leaf-spine fabric has no link delay (link_delay_us 0)")
        if self.realtime_agents_first and not self.realtime:
            raise ExperimentError("realtime_agents_first needs realtime (the agents at "
                                  "real-time priority)")
        if self.host_line_qdisc and self.network is None:
            raise ExperimentError("host_line_qdisc needs the modelled network (its link rate)")
        names = (set(self.fabric.leaf_names + self.fabric.spine_names)
                 if self.fabric is not None else {"s1"})
        unknown = sorted(set(self.switch_commands) - names)
        if unknown:
            raise ExperimentError(f"switch_commands for unknown switch(es) {', '.join(unknown)}; "
                                  f"the topology has {', '.join(sorted(names))}")
        if self.packet_bytes <= 0:
            raise ExperimentError("packet_bytes must be positive")
        check_defines(self.defines)

    def defines_dict(self) -> dict[str, str]:
        """``defines`` as the compilers take them (name -> value)."""
        return dict(self.defines)

    def program_label(self) -> str:
        """The program's file name and its defines, for progress lines."""
        return " ".join([Path(self.program).name,
                         *(f"-D {n}={v}" for n, v in self.defines)])


_DEFINE_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
# A define's value: one preprocessor token or a plain expression of them,
# nothing that could end the line or start a comment or a string.
_DEFINE_VALUE = re.compile(r"[A-Za-z0-9_+\-*/%<>()&|^~. ]+")


def check_defines(defines: object) -> None:
    """Raise ExperimentError unless ``defines`` is a tuple of (name, value) string
    pairs, each name a C identifier given once and each value a non-empty
    plain preprocessor expression on one line (a flag is written "1": an
    empty value means 1 to p4c but nothing to the soft switch's compiler)."""
    if not isinstance(defines, tuple):
        raise ExperimentError(f"defines must be a tuple of (name, value) pairs, not "
                              f"{type(defines).__name__}")
    seen: set[str] = set()
    for d in defines:
        if not (isinstance(d, tuple) and len(d) == 2
                and all(isinstance(x, str) for x in d)):
            raise ExperimentError(f"define {d!r} is not a (name, value) pair of strings")
        name, value = d
        if not _DEFINE_NAME.fullmatch(name):
            raise ExperimentError(f"define name {name!r} is not an identifier")
        if name in seen:
            raise ExperimentError(f"define {name} is given twice")
        seen.add(name)
        if not _DEFINE_VALUE.fullmatch(value) or "//" in value or "/*" in value:
            raise ExperimentError(f"define {name}: value {value!r} is not a plain "
                                  "preprocessor expression")


@dataclass(frozen=True)
class PhasePlan:
    """One phase: switch commands, then every job started together."""

    name: str
    jobs: dict[str, JobSpec]          # host name -> what it runs
    commands: tuple[str, ...] = ()    # applied before the phase's agents start
    timeout_s: float = 60.0
    watch_ports: tuple[int, ...] = ()  # ports whose queue the plots show (the bottleneck)
    notes: str = ""
    # An EPIC group the runner installs once its ranks reported their QPNs
    # (testbed.epic.install_from_rendezvous): {"switch_ip", "qpn", "gid", "mgid"};
    # the jobs' ranks are the hosts in the group, by CollectiveSpec.rank. On a
    # fabric, "tree" describes the aggregation tree over its switches
    # (testbed.epic.fabric_tree) and each rank addresses its leaf's endpoint.
    epic_group: dict[str, Any] | None = None
    # A warm-up phase (e.g. to let the switch's JIT compile the hot paths before
    # measuring): run and recorded like the others, but its results are not
    # measurements and the fidelity verdict covers only the other phases
    # (summary.json fidelity.warmup has its numbers apart).
    warmup: bool = False
    # (seconds, line): control-plane lines applied to every switch that long
    # after the phase's agents passed their start barrier (their ``start``
    # event), e.g. a scheme switched on mid-run; the runner records when.
    late_commands: tuple[tuple[float, str], ...] = ()
    # Lines for one switch of a fabric only (switch name -> lines), applied
    # after ``commands`` (e.g. one uplink's rate in this phase).
    switch_commands: dict[str, tuple[str, ...]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not self.name or "/" in self.name:
            raise ExperimentError(f"phase name {self.name!r} must be non-empty without '/'")
        bad = [t for t, _line in self.late_commands if not t >= 0]
        if bad:
            raise ExperimentError(f"phase {self.name}: late_commands at {bad} s; "
                                  "times must be >= 0")
        if not self.jobs:
            raise ExperimentError(f"phase {self.name}: no jobs")
        for host, spec in self.jobs.items():
            if spec.host != host:
                raise ExperimentError(f"phase {self.name}: job for {host} says host={spec.host}")


@dataclass(frozen=True)
class FidelityLimits:
    """When a run counts as faithful (``fidelity_ok``; testbed.fidelity)."""

    switch_lag_mean_us: float = 1000.0   # mean wait of frames in the kernel before the pipeline
    switch_lag_max_us: float = 50_000.0  # worst sampled wait
    kernel_drops: int = 0                # frames the kernel dropped before the switch read them
    ingress_out_of_order: int = 0        # frames a switch port received out of order
    # frames the switch's queues took more than a frame time after they
    # arrived (a late CPU delivered them), as a fraction of those received:
    # bunched like a late pacer's packets, so limited alike
    arrivals_behind_clock_fraction: float = 0.05
    pacing_late_fraction: float = 0.05   # sends later than one packet time, per sender
    # share of the time an agent ran with its oldest unread frame older than a
    # feedback interval of the modelled network (hosts/roce/receive_lag.py)
    receive_behind_fraction: float = 0.05
    host_tx_drops: int = 0               # datagrams a host's socket refused
    # A port whose offered load is at most its rate must not queue this many
    # packets (None: judge its CE marks only); see testbed.fidelity.
    uncongested_queue_pkts: int | None = None


@dataclass(frozen=True)
class RunPlan:
    topology: Topology
    phases: tuple[PhasePlan, ...]
    fidelity: FidelityLimits = field(default_factory=FidelityLimits)
    switch_poll_interval_s: float = 0.02
    info: dict[str, Any] = field(default_factory=dict)  # experiment facts saved with the run

    def path_mtu(self) -> int:
        """The path MTU every host uses (a modelled network's bytes are
        converted to packets of this MTU's frames)."""
        mtus = {s.transport.path_mtu for p in self.phases for s in p.jobs.values()}
        if len(mtus) != 1:
            raise ExperimentError(f"the hosts use different path MTUs {sorted(mtus)}: "
                                  "a modelled network's buffers need one")
        return mtus.pop()

    def network_commands(self) -> tuple[str, ...]:
        """The switch lines of the modelled network (rate, queue depth, RED),
        then the topology's own."""
        net = self.topology.network
        if net is None:
            return self.topology.commands
        try:
            conv = net.convert(self.path_mtu())
        except NetworkError as e:
            raise ExperimentError(f"modelled network: {e}") from e
        return conv.commands + self.topology.commands

    def __post_init__(self) -> None:
        names = [p.name for p in self.phases]
        if not names or len(set(names)) != len(names):
            raise ExperimentError("a plan needs phases with distinct names")
        hosts = {f"h{i}" for i in range(1, self.topology.n_hosts + 1)}
        from testbed.epic import communicator_span

        # each phase's communicator occupies 2N+1 consecutive gids and QPNs and
        # twice as many multicast groups; no two phases may share one
        spans = [communicator_span(p.epic_group, len(p.jobs))
                 for p in self.phases if p.epic_group is not None]
        for key in ("gid", "mgid", "qpn"):
            used: set[int] = set()
            for sp in spans:
                if used & set(sp[key]):
                    raise ExperimentError(f"EPIC groups of a run need distinct {key}s: "
                                          f"{[(s[key].start, s[key].stop - 1) for s in spans]}")
                used |= set(sp[key])
        if spans:
            self._check_epic_window()
        fab = self.topology.fabric
        for p in self.phases:
            if p.epic_group is None:
                continue
            if fab is None and "tree" in p.epic_group:
                raise ExperimentError(f"phase {p.name}: an EPIC aggregation tree needs a "
                                      "leaf-spine fabric (Topology.fabric)")
            if fab is not None:
                from testbed.epic import fabric_tree

                try:
                    fabric_tree(p.epic_group | {"ranks": len(p.jobs)}, fab)
                except ValueError as e:
                    raise ExperimentError(f"phase {p.name}: {e}") from e
                ops = {op for s in p.jobs.values() if s.collective
                       for op, _n in s.collective.sequence()}
                if not ops <= {"all_reduce", "barrier"}:
                    raise ExperimentError(
                        f"phase {p.name}: over an EPIC tree only AllReduce and Barrier span "
                        f"switches, not {', '.join(sorted(ops - {'all_reduce', 'barrier'}))}")
        for p in self.phases:
            unknown = set(p.jobs) - hosts
            if unknown:
                raise ExperimentError(f"phase {p.name}: hosts {sorted(unknown)} not in the topology")
        self.network_commands()  # a network that cannot be converted is a plan error

    def _check_epic_window(self) -> None:
        """Every EPIC rank's window (CollectiveSpec.epic_window) is the window the
        switch's program is compiled with (EPIC_WINDOW_LOG2, Topology.defines):
        a rank with more packets in flight than the switch has slots for would
        have its packets dropped as stale and resend them without end."""
        from testbed.epic import WINDOW_DEFINE, program_window

        topo = self.topology
        try:
            w = program_window(repo_path(topo.program), topo.defines_dict())
        except ValueError as e:
            raise ExperimentError(str(e)) from e
        if w is None:
            return
        for p in self.phases:
            if p.epic_group is None:
                continue
            bad = sorted({s.collective.epic_window for s in p.jobs.values()
                          if s.collective is not None and s.collective.scheme == "epic"}
                         - {w})
            if bad:
                raise ExperimentError(
                    f"phase {p.name}: the ranks' EPIC window {bad} differs from the switch's "
                    f"{w} packets ({WINDOW_DEFINE} of {Path(topo.program).name}, set in "
                    "Topology.defines); give CollectiveSpec.epic_window the same")


# ---------------------------------------------------------------------------
# registry


class Experiment(Protocol):
    """What an experiment module provides (the module doc lists it). An
    experiment is a module, and mypy checks each against this protocol where
    ``experiments.REGISTRY`` names it."""

    @property
    def NAME(self) -> str: ...            # the CLI name, e.g. "roce-basics"
    @property
    def Params(self) -> type[Any]: ...    # the frozen dataclass of the parameters
    @property
    def HOST_PROVIDERS(self) -> tuple[str, ...]: ...   # "udp", "rxe"
    @property
    def HEADLINE(self) -> tuple[str, ...]: ...   # the dotted keys the run's last line shows
    @property
    def CLAIMS(self) -> tuple[Claim, ...]: ...   # the paper's claims it reproduces
    @property
    def REFERENCE(self) -> Mapping[str, Any]: ...  # the paper's values the claims take
    def plan(self, params: Any, /) -> RunPlan: ...
    def analyze(self, run_dir: Path, /) -> Results: ...
    def plot(self, run_dir: Path, /) -> list[Path]: ...


# The registries: each is a Mapping[str, Experiment] that an installed package
# names under this entry-point group (pyproject.toml), so that the testbed
# finds experiments without importing any package of them by name.
ENTRY_POINT_GROUP = "testbed.experiments"


def discover() -> dict[str, Experiment]:
    """Every registered experiment, by NAME."""
    found: dict[str, Experiment] = {}
    points = importlib.metadata.entry_points(group=ENTRY_POINT_GROUP)
    if not points:
        raise ExperimentError(f"no experiments registered (entry-point group "
                              f"{ENTRY_POINT_GROUP}): install the project, pip install -e .")
    for point in points:
        try:
            registry = point.load()
        except ImportError as e:
            raise ExperimentError(f"experiment registry {point.value}: {e}") from e
        for name, exp in registry.items():
            if getattr(exp, "NAME", None) != name:
                raise ExperimentError(f"experiment registry {point.value}: {name!r} names a "
                                      f"module whose NAME is {getattr(exp, 'NAME', None)!r}")
            if name in found and found[name] is not exp:
                raise ExperimentError(f"experiment {name!r} is registered twice "
                                      f"({point.value})")
            found[name] = exp
    return dict(sorted(found.items()))


def load(name: str) -> Experiment:
    exps = discover()
    mod = exps.get(name) or exps.get(name.replace("_", "-"))
    if mod is None:
        raise ExperimentError(f"unknown experiment {name!r} (known: {', '.join(exps) or 'none'})")
    return mod


def describe(mod: Experiment) -> str:
    doc = (mod.__doc__ or "").strip().splitlines()
    return doc[0] if doc else ""


# ---------------------------------------------------------------------------
# parameters

T = TypeVar("T")


def param(default: T, meaning: str, unit: str = "") -> T:
    """A ``Params`` field with its default, its one-line meaning and its unit
    ("" for a name, a flag or a plain number): what ``testbed run NAME
    --help`` shows. Typed as its default, so ``x: int = param(4, ...)`` checks."""
    return cast(T, field(default=default, metadata={"meaning": meaning, "unit": unit}))


@dataclass(frozen=True)
class ParamDoc:
    """One parameter of an experiment as the command line shows it."""

    name: str
    meaning: str         # "" if the field was declared without ``param``
    unit: str
    full: Any            # the default (full profile)
    quick: Any           # the quick profile's value
    paper: Any = None    # the paper profile's value (has_paper: the experiment has one)
    has_paper: bool = False
    scaled_down: ScaledDown | None = None   # the paper's value, where the profile cuts it


# ---------------------------------------------------------------------------
# profiles

PROFILES = ("quick", "full", "paper")
# The engines a profile runs on (None: every engine).
PROFILE_ENGINES: dict[str, tuple[str, ...] | None] = {"quick": None, "full": None,
                                                      "paper": ("sim",)}


@dataclass(frozen=True)
class ScaledDown:
    """A parameter the paper profile runs smaller than the paper did: the
    paper's value (in the parameter's own unit) and why it is cut (the wall
    time the paper's value would take here, say)."""

    paper: Any
    reason: str


def has_profile(mod: Experiment, profile: str) -> bool:
    """Whether experiment ``mod`` has profile ``profile`` (quick and full: every
    experiment; paper: those whose ``Params`` declare ``paper()``)."""
    if profile not in PROFILES:
        raise ExperimentError(f"unknown profile {profile!r} (profiles: {', '.join(PROFILES)})")
    return profile != "paper" or callable(getattr(mod.Params, "paper", None))


def profiles_of(mod: Experiment) -> tuple[str, ...]:
    return tuple(p for p in PROFILES if has_profile(mod, p))


def profile_params(mod: Experiment, profile: str) -> Any:
    """The experiment's parameters of ``profile``."""
    if not has_profile(mod, profile):
        with_paper = [n for n, m in discover().items() if has_profile(m, "paper")]
        raise ExperimentError(f"{mod.NAME} has no paper profile (experiments with one: "
                              f"{', '.join(with_paper) or 'none'})")
    cls = mod.Params
    return {"quick": cls.quick, "full": cls, "paper": getattr(cls, "paper", None)}[profile]()


def scaled_down_from(mod: Experiment) -> dict[str, ScaledDown]:
    """What the paper profile of ``mod`` cuts (``Params.scaled_down_from()``;
    {} where it runs at the paper's full size or has no paper profile),
    checked: each name a parameter, each paper value different from the
    profile's."""
    if not has_profile(mod, "paper"):
        return {}
    fn = getattr(mod.Params, "scaled_down_from", None)
    cuts: dict[str, ScaledDown] = dict(fn()) if callable(fn) else {}
    names = {f.name for f in dataclasses.fields(mod.Params)}
    paper = mod.Params.paper()
    for k, v in cuts.items():
        if k not in names:
            raise ExperimentError(f"{mod.NAME}: scaled_down_from names {k!r}, not a parameter")
        if not isinstance(v, ScaledDown) or not v.reason:
            raise ExperimentError(f"{mod.NAME}: scaled_down_from[{k!r}] must be a "
                                  "ScaledDown with a reason")
        if v.paper == getattr(paper, k):
            raise ExperimentError(f"{mod.NAME}: scaled_down_from[{k!r}]: the paper profile "
                                  f"already runs the paper's {v.paper!r}")
    return cuts


def scale_record(mod: Experiment, profile: str, params: Any) -> dict[str, Any] | None:
    """``summary.json``'s ``scaled_down_from`` of a run of ``profile`` with
    ``params``: for the paper profile, each parameter it cuts with the paper's
    value, the run's and the reason ({} where none is cut); None for the other
    profiles, which do not claim the paper's scale."""
    if profile != "paper":
        return None
    return {k: {"paper": v.paper, "run": getattr(params, k), "reason": v.reason}
            for k, v in scaled_down_from(mod).items()}


def _field_doc(cls: type, name: str) -> tuple[str, str]:
    """(meaning, unit) of field ``name``: from the nearest class in the MRO
    that declares it with ``param`` (a subclass may override the default alone)."""
    for klass in cls.__mro__:
        f = vars(klass).get("__dataclass_fields__", {}).get(name)
        if f is not None and "meaning" in f.metadata:
            return f.metadata["meaning"], f.metadata.get("unit", "")
    return "", ""


def param_docs(mod: Experiment) -> list[ParamDoc]:
    """Every parameter of experiment ``mod`` in declaration order, with its
    meaning, unit, default and quick value, and the paper profile's value
    (and the paper's, where the profile cuts it) if it has one."""
    cls = mod.Params
    full, quick = cls(), cls.quick()
    has_paper = has_profile(mod, "paper")
    paper = cls.paper() if has_paper else None
    cuts = scaled_down_from(mod)
    return [ParamDoc(f.name, *_field_doc(cls, f.name), getattr(full, f.name),
                     getattr(quick, f.name), getattr(paper, f.name, None), has_paper,
                     cuts.get(f.name))
            for f in dataclasses.fields(cls)]


def _coerce(value: str, tp: Any, name: str) -> Any:
    origin = typing.get_origin(tp)
    if origin in (typing.Union, types.UnionType):
        args = [a for a in typing.get_args(tp) if a is not type(None)]
        if value.lower() in ("none", "null"):
            return None
        return _coerce(value, args[0], name)
    try:
        if tp is bool:
            if value.lower() in ("1", "true", "yes", "on"):
                return True
            if value.lower() in ("0", "false", "no", "off"):
                return False
            raise ValueError(value)
        if tp is int:
            return int(value, 0)
        if tp is float:
            return float(value)
        if tp is str:
            return value
    except ValueError as e:
        raise ExperimentError(f"parameter {name}: {value!r} is not a {tp.__name__}") from e
    raise ExperimentError(f"parameter {name} of type {tp} cannot be set from the command line")


def make_params(mod: Experiment, quick: bool = False,
                overrides: dict[str, str] | None = None, *, profile: str | None = None) -> Any:
    """The experiment's parameters: those of ``profile`` (quick, full or paper;
    None: quick if ``quick``, else full), then overrides given as strings
    (``name=value`` on the command line), converted by type."""
    cls = mod.Params
    params = profile_params(mod, profile or ("quick" if quick else "full"))
    if overrides:
        hints = typing.get_type_hints(cls)
        names = {f.name for f in dataclasses.fields(cls)}
        changes = {}
        for k, v in overrides.items():
            if k not in names:
                raise ExperimentError(f"{mod.NAME} has no parameter {k!r} "
                                      f"(parameters: {', '.join(sorted(names))})")
            changes[k] = _coerce(v, hints[k], k)
        try:
            params = dataclasses.replace(params, **changes)
        except (TypeError, ValueError) as e:
            raise ExperimentError(f"{mod.NAME}: bad parameters: {e}") from e
    return params


def params_to_dict(params: Any) -> dict[str, Any]:
    return dataclasses.asdict(params)


def plan_to_dict(plan: RunPlan) -> dict[str, Any]:
    net = plan.topology.network
    return {
        "topology": dataclasses.asdict(plan.topology),
        # what the runner applies first: the modelled network, converted, then
        # the topology's own lines
        "switch_commands": list(plan.network_commands()),
        "network": net.record(plan.path_mtu()) if net is not None else None,
        "phases": [
            {"name": p.name, "commands": list(p.commands), "timeout_s": p.timeout_s,
             "watch_ports": list(p.watch_ports), "notes": p.notes,
             "epic_group": p.epic_group, "warmup": p.warmup,
             "late_commands": [[t, line] for t, line in p.late_commands],
             "per_switch_commands": {n: list(c) for n, c in p.switch_commands.items()},
             "jobs": {h: s.to_dict() for h, s in sorted(p.jobs.items())}}
            for p in plan.phases
        ],
        "fidelity": dataclasses.asdict(plan.fidelity),
        "switch_poll_interval_s": plan.switch_poll_interval_s,
        "info": plan.info,
    }


def repo_path(rel: str | Path) -> Path:
    p = Path(rel)
    return p if p.is_absolute() else Path(__file__).resolve().parents[1] / p
