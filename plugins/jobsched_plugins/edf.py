"""The ``edf`` strategy: earliest deadline first."""

from __future__ import annotations

import math

from jobsched import Job, SchedulingStrategy, SortKey, hookimpl
from jobsched.hookspecs import Register


class EarliestDeadlineFirstStrategy(SchedulingStrategy):
    """Earliest deadline first; jobs without a deadline go last, by priority."""

    def key(self, job: Job) -> SortKey:
        deadline = job.deadline if job.deadline is not None else math.inf
        return (deadline, -job.priority, job.seq)


@hookimpl
def jobsched_register_strategies(register: Register) -> None:
    register("edf", EarliestDeadlineFirstStrategy)
