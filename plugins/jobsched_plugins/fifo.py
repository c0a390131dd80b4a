"""The ``fifo`` strategy: submit order, no starvation, no prioritisation."""

from __future__ import annotations

from jobsched import Job, SchedulingStrategy, SortKey, hookimpl
from jobsched.hookspecs import Register


class FIFOStrategy(SchedulingStrategy):
    """Submit order. No starvation, no prioritisation."""

    def key(self, job: Job) -> SortKey:
        return (job.seq,)


@hookimpl
def jobsched_register_strategies(register: Register) -> None:
    register("fifo", FIFOStrategy)
