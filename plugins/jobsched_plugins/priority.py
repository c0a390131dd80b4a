"""The ``priority`` strategy: highest priority first, FIFO within a priority."""

from __future__ import annotations

from jobsched import Job, SchedulingStrategy, SortKey, hookimpl
from jobsched.hookspecs import Register


class PriorityStrategy(SchedulingStrategy):
    """Highest priority first, FIFO within a priority. Low priority can starve."""

    def key(self, job: Job) -> SortKey:
        return (-job.priority, job.seq)


@hookimpl
def jobsched_register_strategies(register: Register) -> None:
    register("priority", PriorityStrategy)
