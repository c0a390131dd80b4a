"""The ``priority`` strategy: highest priority first, FIFO within a priority.

The class is core's (`jobsched.PriorityStrategy`), so the facade offers it without
importing a plugin; this module registers it by name, and re-exports it for
code that imports it from here.
"""

from __future__ import annotations

from jobsched import PriorityStrategy, hookimpl
from jobsched.hookspecs import Register

__all__ = ["PriorityStrategy", "jobsched_register_strategies"]


@hookimpl
def jobsched_register_strategies(register: Register) -> None:
    register("priority", PriorityStrategy)
