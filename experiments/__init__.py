"""The experiments of this repository, and their registry.

``REGISTRY`` names every experiment module by its ``NAME``; pyproject.toml
declares it under the entry-point group ``testbed.experiments``, which is how
the testbed finds it (``testbed.experiment.discover``). The annotation has mypy
check each module against the ``Experiment`` protocol. A new experiment is a
module here and one line below.
"""

from __future__ import annotations

from experiments import (
    epic_allreduce,
    epic_loss,
    epic_primitives,
    epic_training,
    epic_tree,
    reflex_cases,
    reflex_partial,
    reflex_probing,
    reflex_workload,
    ring_allreduce,
    roce_basics,
    symphony_job_stream,
    symphony_ring,
    symphony_sweep,
    symphony_two_flows,
    symphony_two_jobs,
)
from testbed.experiment import Experiment

_MODULES: tuple[Experiment, ...] = (
    roce_basics,
    ring_allreduce,
    symphony_two_flows,
    symphony_ring,
    symphony_sweep,
    symphony_two_jobs,
    symphony_job_stream,
    epic_allreduce,
    epic_primitives,
    epic_loss,
    epic_tree,
    epic_training,
    reflex_cases,
    reflex_partial,
    reflex_probing,
    reflex_workload,
)

REGISTRY: dict[str, Experiment] = {m.NAME: m for m in _MODULES}
