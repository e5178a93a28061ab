"""Controller side of Symphony (switches/p4/symphony.p4): parameters and job ids.

- ``SymphonyParams``: the paper's control parameters in the modelled network's
  units (k, tau, T_win and the psn window in us, N_warmup, N_sample) -> the
  switch's ``set_params`` values for a run whose time is dilated by
  ``slowdown`` (times x slowdown; k and tau as parts per million).
- ``JobIdAllocator``: the paper's control plane (§3.5). A job asks for an id;
  the allocator picks a free one (1..255: BTH byte 4, 0 means untagged),
  clears that id's state on every switch of the job's path and registers it
  there (``MyEgress.symphony.jobs``), so those switches start tracking the
  job's steps at its first packet. ``release`` unregisters the id and frees it.
- ``job_commands`` / ``config_command``: the same as simple_switch_CLI lines,
  for run plans that configure switches before any traffic;
  ``pq_job_commands``: a job registered for the paper's strict-priority
  comparison (PQ) instead.
- ``tracking_cleared``: no job registered, where each phase starts.
- ``source_job_commands``: which job each host of a phase runs, for hosts
  that send no job id (rdma_rxe sends BTH byte 4 as 0): the first switch
  writes the id into their packets (``MyIngress.job_of_source``). Hosts that
  tag their own packets are unaffected.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from hosts.agent_spec import JobSpec
from switches.controller.api import Controller

INSTANCE = "MyEgress.symphony"
JOBS_TABLE = f"{INSTANCE}.jobs"
TRACK_ACTION = f"{INSTANCE}.track"
CONFIG_TABLE = f"{INSTANCE}.config"
CONFIG_ACTION = f"{INSTANCE}.set_params"
JOB_KEY = "hdr.bth.job_id"
# Per-job registers of include/symphony.p4; all zero = "no packet seen yet".
JOB_REGISTERS = ("seen", "step_min", "psn_rec", "psn_win_start", "alpha", "cnt_total",
                 "cnt_op", "win_start", "marks")
# The PQ comparison's step tracking in the ingress (include/symphony_pq.p4).
PQ_INSTANCE = "MyIngress.lag_priority"
PQ_REGISTERS = ("seen", "step_min")
# Hosts that send no job id: source address -> job id (switches/p4/symphony.p4)
SOURCE_TABLE = "MyIngress.job_of_source.by_source"
SOURCE_ACTION = "MyIngress.job_of_source.set_job"
JOB_IDS = range(1, 256)
PPM = 1_000_000
_U32 = (1 << 32) - 1


class SymphonyError(ValueError):
    """A Symphony control-plane request that cannot be done (the message says why)."""


@dataclass(frozen=True)
class SymphonyParams:
    """Symphony's parameters in the modelled network's time (paper §4.1:
    k = 0.01, tau = 0.25, T_win = 100 us, psn_rec reset every 100 us). The
    paper gives no N_warmup or N_sample; 8 packets each are this testbed's."""

    k: float = 0.01
    tau: float = 0.25
    t_win_us: float = 100.0
    psn_window_us: float = 100.0
    n_warmup: int = 8
    n_sample: int = 8

    def __post_init__(self) -> None:
        if not (self.k == 0 or 1 / PPM <= self.k <= 1):
            raise SymphonyError(f"k = {self.k}: must be in [1e-6, 1] (or 0: never mark)")
        if not 0 <= self.tau <= 1:
            raise SymphonyError(f"tau = {self.tau}: must be in [0, 1]")
        if self.t_win_us < 0 or self.psn_window_us < 0:
            raise SymphonyError("t_win_us and psn_window_us must be >= 0")
        if not 0 <= self.n_warmup <= _U32 or not 0 <= self.n_sample <= _U32:
            raise SymphonyError("n_warmup and n_sample must fit 32 bits")

    def switch_values(self, slowdown: float = 1.0) -> dict[str, int]:
        """``set_params`` arguments for a run with time dilated by ``slowdown``."""
        if slowdown <= 0:
            raise SymphonyError(f"slowdown = {slowdown}: must be positive")
        t_win = round(self.t_win_us * slowdown)
        psn_win = round(self.psn_window_us * slowdown)
        if max(t_win, psn_win) > _U32:
            raise SymphonyError(f"windows of {max(t_win, psn_win)} us do not fit 32 bits")
        return {"k_ppm": round(self.k * PPM), "tau_ppm": round(self.tau * PPM),
                "t_win_us": t_win, "psn_window_us": psn_win,
                "n_warmup": self.n_warmup, "n_sample": self.n_sample}


def config_command(params: SymphonyParams, slowdown: float = 1.0) -> str:
    v = params.switch_values(slowdown)
    return f"table_set_default {CONFIG_TABLE} {CONFIG_ACTION} " + " ".join(
        str(v[k]) for k in ("k_ppm", "tau_ppm", "t_win_us", "psn_window_us", "n_warmup",
                            "n_sample"))


def _check_id(job_id: int) -> None:
    if job_id not in JOB_IDS:
        raise SymphonyError(f"job id {job_id}: must be 1..255 (0 is untagged traffic)")


def tracking_cleared() -> list[str]:
    """Lines that unregister every job, Symphony's and the PQ comparison's,
    on one switch. A phase's commands start with them, then register the
    phase's own jobs: an earlier phase's registration cannot track this
    phase's packets, and the phase can be run again (``testbed run
    --phase-retries``) without adding an entry twice."""
    return [f"table_clear {JOBS_TABLE}", f"table_clear {PQ_INSTANCE}.jobs"]


def job_commands(job_id: int) -> list[str]:
    """Lines that clear ``job_id``'s state and register it on one switch."""
    _check_id(job_id)
    return [f"register_write {INSTANCE}.{r} {job_id} 0" for r in JOB_REGISTERS] + [
        f"table_add {JOBS_TABLE} {TRACK_ACTION} {job_id} =>"]


def pq_job_commands(job_id: int) -> list[str]:
    """Lines that clear ``job_id``'s state in the strict-priority comparison
    (include/symphony_pq.p4: lagging steps' data in the high queue) and
    register it there on one switch, instead of Symphony."""
    _check_id(job_id)
    return [f"register_write {PQ_INSTANCE}.{r} {job_id} 0" for r in PQ_REGISTERS] + [
        f"table_add {PQ_INSTANCE}.jobs {PQ_INSTANCE}.track {job_id} =>"]


def host_jobs(jobs: Mapping[str, JobSpec]) -> dict[str, int]:
    """The job id each host of a phase runs (``jobs``: host -> its JobSpec):
    its collective's, else its flows' (0, untagged, is left out). A host runs
    one job: the switch tells jobs apart by the packets' source address."""
    out: dict[str, int] = {}
    for host, spec in jobs.items():
        ids = {f.job_id for f in spec.flows}
        if spec.collective is not None:
            ids.add(spec.collective.job_id)
        ids.discard(0)
        if len(ids) > 1:
            raise SymphonyError(f"host {host} ({spec.ip}) runs jobs {sorted(ids)}: a switch "
                                "that writes job ids by source address needs one job per host")
        if ids:
            out[spec.ip] = ids.pop()
    return out


def source_job_commands(jobs: Mapping[str, JobSpec]) -> list[str]:
    """Lines that make one switch write each host's job id (:func:`host_jobs`)
    into the host's untagged packets, replacing the previous phase's mapping."""
    lines = [f"table_clear {SOURCE_TABLE}"]
    for ip, job_id in sorted(host_jobs(jobs).items()):
        _check_id(job_id)
        lines.append(f"table_add {SOURCE_TABLE} {SOURCE_ACTION} {ip} => {job_id}")
    return lines


class JobIdAllocator:
    """Hands out Symphony job ids and programs the switches on each job's path.

    ``switches``: switch name -> its controller (switches.controller)."""

    def __init__(self, switches: Mapping[str, Controller]) -> None:
        if not switches:
            raise SymphonyError("a job-id allocator needs at least one switch")
        self.switches = dict(switches)
        self._paths: dict[int, tuple[str, ...]] = {}
        self._names: dict[int, str] = {}

    def configure(self, params: SymphonyParams, slowdown: float = 1.0) -> None:
        """Set Symphony's parameters on every switch."""
        values = params.switch_values(slowdown)
        for ctl in self.switches.values():
            ctl.table_set_default(CONFIG_TABLE, CONFIG_ACTION, values)

    @property
    def jobs(self) -> dict[int, tuple[str, tuple[str, ...]]]:
        """Allocated ids -> (job name, path)."""
        return {j: (self._names[j], p) for j, p in sorted(self._paths.items())}

    def allocate(self, path: Sequence[str], name: str = "") -> int:
        """The lowest free id, registered (with cleared state) on every switch of
        ``path``; raises SymphonyError for an empty path, an unknown switch or
        when all 255 ids are taken."""
        hops = tuple(dict.fromkeys(path))
        if not hops:
            raise SymphonyError(f"job {name!r}: empty path")
        unknown = [s for s in hops if s not in self.switches]
        if unknown:
            raise SymphonyError(f"job {name!r}: unknown switch(es) {', '.join(unknown)}; "
                                f"known: {', '.join(sorted(self.switches))}")
        free = next((j for j in JOB_IDS if j not in self._paths), None)
        if free is None:
            raise SymphonyError(f"job {name!r}: all {len(JOB_IDS)} job ids are in use")
        done: list[str] = []
        try:
            for sw in hops:
                self._program(self.switches[sw], free)
                done.append(sw)
        except Exception:
            for sw in done:  # leave no switch tracking an id nobody holds
                self.switches[sw].table_delete(JOBS_TABLE, {JOB_KEY: free})
            raise
        self._paths[free] = hops
        self._names[free] = name
        return free

    def release(self, job_id: int) -> None:
        """Unregister ``job_id`` on its switches (its packets pass untouched
        from then on), clear its state there and free the id."""
        _check_id(job_id)
        if job_id not in self._paths:
            raise SymphonyError(f"job id {job_id} is not allocated")
        for sw in self._paths[job_id]:
            ctl = self.switches[sw]
            ctl.table_delete(JOBS_TABLE, {JOB_KEY: job_id})
            self._clear(ctl, job_id)
        del self._paths[job_id]
        del self._names[job_id]

    @staticmethod
    def _clear(ctl: Controller, job_id: int) -> None:
        for r in JOB_REGISTERS:
            ctl.register_write(f"{INSTANCE}.{r}", job_id, 0)

    def _program(self, ctl: Controller, job_id: int) -> None:
        self._clear(ctl, job_id)
        ctl.table_add(JOBS_TABLE, {JOB_KEY: job_id}, TRACK_ACTION)
