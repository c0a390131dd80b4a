"""The ``aging`` strategy: priority that grows with waiting time, bounding starvation.

The class is core's (`jobsched.AgingPriorityStrategy`), so the facade offers it without
importing a plugin; this module registers it by name, and re-exports it for
code that imports it from here.
"""

from __future__ import annotations

from jobsched import AgingPriorityStrategy, hookimpl
from jobsched.hookspecs import Register

__all__ = ["AgingPriorityStrategy", "jobsched_register_strategies"]


@hookimpl
def jobsched_register_strategies(register: Register) -> None:
    register("aging", AgingPriorityStrategy)
