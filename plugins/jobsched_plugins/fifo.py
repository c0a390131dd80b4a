"""The ``fifo`` strategy: submit order, no starvation, no prioritisation.

The class is core's (`jobsched.FIFOStrategy`), so the facade offers it without
importing a plugin; this module registers it by name, and re-exports it for
code that imports it from here.
"""

from __future__ import annotations

from jobsched import FIFOStrategy, hookimpl
from jobsched.hookspecs import Register

__all__ = ["FIFOStrategy", "jobsched_register_strategies"]


@hookimpl
def jobsched_register_strategies(register: Register) -> None:
    register("fifo", FIFOStrategy)
