"""The ``fixed`` retry policy: the same wait before every retry."""

from __future__ import annotations

import random

import attrs

from jobsched import hookimpl
from jobsched.contracts import retry_count, retry_delay
from jobsched.hookspecs import Register


@attrs.frozen
class FixedRetryPolicy:
    """Retry up to `max_retries` times, waiting `seconds` before each retry."""

    max_retries: int = attrs.field(default=3, validator=retry_count)
    seconds: float = attrs.field(default=1.0, validator=retry_delay)

    def delay(self, attempt: int, rng: random.Random) -> float:
        return self.seconds


@hookimpl
def jobsched_register_retry_policies(register: Register) -> None:
    register("fixed", FixedRetryPolicy)
