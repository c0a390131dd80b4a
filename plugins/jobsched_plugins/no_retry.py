"""The ``none`` retry policy: the first failure is final."""

from __future__ import annotations

import random

import attrs

from jobsched import hookimpl
from jobsched.hookspecs import Register


@attrs.frozen
class NoRetryPolicy:
    """Never retry."""

    max_retries: int = attrs.field(default=0, init=False)

    def delay(self, attempt: int, rng: random.Random) -> float:
        return 0.0


@hookimpl
def jobsched_register_retry_policies(register: Register) -> None:
    register("none", NoRetryPolicy)
