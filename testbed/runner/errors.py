"""How a run fails: :class:`RunError`, and :class:`RunTerminated` for a run
stopped by SIGTERM."""

from __future__ import annotations


class RunError(RuntimeError):
    """The run could not be done or failed; the message says what and where."""


class RunTerminated(RunError):
    """The run was stopped by SIGTERM (its network torn down): whoever runs
    several runs (``testbed run all``, ``testbed bench hosts``) stops too."""
