"""jobsched-shortest: a worked jobsched plugin.

Installing this distribution adds, to every scheduler composed with the
installed plugins:

- the ``shortest-first`` strategy: jobs with the smallest ``estimated_seconds``
  attribute run first (jobs without one run last), in submit order among equals;
- the ``linear`` retry policy: wait ``step * attempt`` seconds after a failed
  attempt, at most ``max_retries`` times;
- a transition listener that counts job transitions by new status in
  `TRANSITIONS`.
"""

from __future__ import annotations

import math
import random
from collections import Counter

import attrs

from jobsched import Job, JobStatus, hookimpl
from jobsched.contracts import Register, SchedulingStrategy, SortKey

#: How many transitions into each status the listener has seen, by status value.
TRANSITIONS: Counter[str] = Counter()


class ShortestFirst(SchedulingStrategy):
    """Smallest ``estimated_seconds`` first; jobs without an estimate go last.

    The key is computed once, when the job becomes runnable: it depends only on
    the job, never on the clock or on other jobs. Every key has the same
    length and ends with ``job.seq``, which breaks ties in submit order.
    """

    def key(self, job: Job) -> SortKey:
        return (getattr(job, "estimated_seconds", math.inf), job.seq)


@attrs.frozen
class LinearRetry:
    """Retry `max_retries` times, waiting ``step * attempt`` seconds before each."""

    max_retries: int = attrs.field(default=3, validator=attrs.validators.ge(0))
    step: float = attrs.field(default=1.0, validator=attrs.validators.ge(0))

    def delay(self, attempt: int, rng: random.Random) -> float:
        """Seconds to wait after the 1-based `attempt` failed (`rng` is unused)."""
        return self.step * attempt


@hookimpl
def jobsched_register_strategies(register: Register) -> None:
    register("shortest-first", ShortestFirst)


@hookimpl
def jobsched_register_retry_policies(register: Register) -> None:
    register("linear", LinearRetry)


@hookimpl
def jobsched_job_transition(job: Job, old: JobStatus, new: JobStatus) -> None:
    # Taking all three arguments, in this order, lets the scheduler call this
    # function directly; a subset works too but goes through an adapter.
    TRANSITIONS[new.value] += 1
