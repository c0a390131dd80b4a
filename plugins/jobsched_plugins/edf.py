"""The ``edf`` strategy: earliest deadline first.

The class is core's (`jobsched.EarliestDeadlineFirstStrategy`), so the facade offers it without
importing a plugin; this module registers it by name, and re-exports it for
code that imports it from here.
"""

from __future__ import annotations

from jobsched import EarliestDeadlineFirstStrategy, hookimpl
from jobsched.hookspecs import Register

__all__ = ["EarliestDeadlineFirstStrategy", "jobsched_register_strategies"]


@hookimpl
def jobsched_register_strategies(register: Register) -> None:
    register("edf", EarliestDeadlineFirstStrategy)
