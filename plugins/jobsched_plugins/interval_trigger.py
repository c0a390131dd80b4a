"""The ``interval`` trigger: the reference design's fixed-rate schedule, as a plugin.

``schedule_recurring(factory, 5.0)`` builds the same trigger directly.
"""

from __future__ import annotations

from jobsched import IntervalTrigger, hookimpl
from jobsched.hookspecs import Register


@hookimpl
def jobsched_register_triggers(register: Register) -> None:
    register("interval", IntervalTrigger)
