"""The ``aging`` strategy: priority that grows with waiting time, bounding starvation."""

from __future__ import annotations

from jobsched import Job, SchedulingStrategy, SortKey, hookimpl
from jobsched.hookspecs import Register


class AgingPriorityStrategy(SchedulingStrategy):
    """Priority with aging, which bounds starvation.

    ``effective(now) = priority + age_rate * (now - submitted_at)``. Every
    waiting job ages at the same rate, so comparing two jobs at any `now` gives
    the same answer as comparing ``priority - age_rate * submitted_at``: a
    time-invariant heap key. With ``age_rate=0.1`` a LOW job outranks a newly
    submitted HIGH one after waiting 20 s (2 levels at 0.1 per second).
    """

    def __init__(self, age_rate: float = 0.1) -> None:
        if not age_rate > 0:
            raise ValueError(f"age_rate must be positive, got {age_rate!r}")
        self.age_rate = age_rate

    def key(self, job: Job) -> SortKey:
        return (-(job.priority - self.age_rate * job.submitted_at), job.seq)


@hookimpl
def jobsched_register_strategies(register: Register) -> None:
    register("aging", AgingPriorityStrategy)
