"""Whether this machine can run an experiment as asked (root, Mininet, the
switch target, the host provider, the profile's engine), the plan as the
chosen hosts run it, and what a run records of the machine (software
versions) and where it writes by default."""

from __future__ import annotations

import dataclasses
import datetime as _dt
import importlib.metadata
import os
import platform
import subprocess
from pathlib import Path
from typing import Any

from hosts.agent_spec import SpecError
from switches.targets import Target, target_of
from testbed.doctor import doctor_report
from testbed.experiment import PROFILE_ENGINES, Experiment, ExperimentError, RunPlan, profile_params
from testbed.runner.errors import RunError

REPO_ROOT = Path(__file__).resolve().parents[2]


def switch_target(name: str) -> Target:
    """The switch target called ``name``; RunError naming the known ones."""
    try:
        return target_of(name)
    except ValueError as e:
        raise RunError(str(e)) from None


def check_environment(target: str, hosts: str, *, need_network: bool = True) -> None:
    """Raise RunError unless this machine can run ``target`` with ``hosts``."""
    rep = doctor_report()
    tgt = switch_target(target)
    if hosts not in ("udp", "rxe"):
        raise RunError(f"unknown host provider {hosts!r} (udp or rxe)")
    if not rep["targets"][tgt.name]:
        detail = rep["targets_detail"].get(tgt.name)
        why = detail["reason"] if detail else ""
        raise RunError(f"target {tgt.name} is not installed here: "
                       + (why or "simple_switch_grpc and p4c not found")
                       + "; see `testbed doctor`, or use --target soft")
    if hosts == "rxe":
        if not rep.get("rxe_hosts"):
            why = rep.get("rxe_hosts_reason", "")
            raise RunError("hosts rxe is not available here: " + (why or "no rdma_rxe")
                           + "; see `testbed doctor`, or use --hosts udp")
    if need_network:
        if not rep["root"]:
            raise RunError("a run needs root (Mininet network namespaces)")
        if not rep["mininet"]:
            raise RunError("a run needs Mininet (apt-get install mininet)")


def check_hosts_supported(mod: Experiment, hosts: str) -> None:
    """Raise RunError unless experiment ``mod`` runs on ``hosts``: an experiment
    lists the providers it runs on in ``HOST_PROVIDERS``."""
    supported = tuple(mod.HOST_PROVIDERS)
    if hosts in supported:
        return
    raise RunError(f"{mod.NAME} does not run on {hosts} hosts; it runs with --hosts "
                   f"{' or '.join(supported)}")


def plan_for_hosts(plan: RunPlan, hosts: str) -> RunPlan:
    """The plan as hosts of provider ``hosts`` run it. An rxe host's DCQCN shim
    installs the host's line-rate HTB and its QPs' classes itself
    (hosts/roce/rxe/dcqcn_shim.py), so the runner's line qdisc on the hosts
    (``host_line_qdisc``, for udp hosts' pacers) is left out. Every job is
    checked for the provider (JobSpec's own checks, e.g. rxe hosts obey no
    PFC pause) before any network comes up, not when its phase starts."""
    for phase in plan.phases:
        for job in phase.jobs.values():
            try:
                dataclasses.replace(job, provider=hosts)
            except SpecError as e:
                raise RunError(f"phase {phase.name}: {e}") from e
    if hosts != "rxe" or not plan.topology.host_line_qdisc:
        return plan
    return dataclasses.replace(plan, topology=dataclasses.replace(plan.topology,
                                                                  host_line_qdisc=False))


def default_out_dir(name: str) -> Path:
    stamp = _dt.datetime.now().strftime("%Y%m%d-%H%M%S")
    return REPO_ROOT / "results" / f"{name}-{stamp}"


def software_versions() -> dict[str, Any]:
    def git(*args: str) -> str | None:
        try:
            r = subprocess.run(["git", "-C", str(REPO_ROOT), *args], capture_output=True,
                               text=True, timeout=10)
        except (OSError, subprocess.TimeoutExpired):
            return None
        return r.stdout.strip() if r.returncode == 0 else None

    out: dict[str, Any] = {
        "python": platform.python_version(),
        "pypy": pypy_version(),
        "kernel": platform.release(),
        "machine": platform.machine(),
        "cpus": os.cpu_count(),
        "git_rev": git("rev-parse", "HEAD"),
        "git_dirty": bool(git("status", "--porcelain", "--untracked-files=no")),
    }
    for dist in ("numpy", "matplotlib", "click", "scapy"):
        try:
            out[dist] = importlib.metadata.version(dist)
        except importlib.metadata.PackageNotFoundError:
            out[dist] = None
    out["mininet"] = _mininet_version()
    return out


def _mininet_version() -> str | None:
    """Debian's mininet is not a pip distribution; it carries its own VERSION,
    read from its source so that recording it does not load Mininet (the
    virtual-time engine runs without it)."""
    import importlib.util
    import re

    spec = importlib.util.find_spec("mininet")    # (a submodule's would import the package)
    if spec is None or spec.origin is None:
        return None
    try:
        net = Path(spec.origin).parent / "net.py"
        m = re.search(r'^VERSION\s*=\s*"([^"]+)"', net.read_text(), re.M)
    except OSError:
        return None
    return m.group(1) if m else None


def pypy_version() -> str | None:
    """The version of the PyPy the pypy backends run ("7.3.11 (Python 3.9.16)"),
    None if none is installed."""
    from switches.soft.backends import interpreter

    try:
        exe = interpreter("pypy")
        r = subprocess.run([exe, "-c", "import sys, platform; print('%d.%d.%d' % "
                            "sys.pypy_version_info[:3], '(Python', platform.python_version()"
                            " + ')')"], capture_output=True, text=True, timeout=20)
    except (FileNotFoundError, OSError, subprocess.TimeoutExpired):
        return None
    return (r.stdout.strip() or None) if r.returncode == 0 else None


def check_profile(mod: Experiment, profile: str, engine: str) -> None:
    """Raise ExperimentError unless experiment ``mod`` has ``profile`` and the
    profile runs on ``engine``."""
    profile_params(mod, profile)        # (raises for an unknown or missing profile)
    engines = PROFILE_ENGINES[profile]
    if engines is not None and engine not in engines:
        raise ExperimentError(f"the {profile} profile runs on the virtual-time engine only "
                              f"(--engine sim), not on {engine}: the paper's networks are "
                              "far beyond what this machine emulates in real time")
