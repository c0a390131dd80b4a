"""The ``exponential`` retry policy: the reference's capped backoff with full jitter."""

from __future__ import annotations

from jobsched import RetryPolicy, hookimpl
from jobsched.hookspecs import Register


@hookimpl
def jobsched_register_retry_policies(register: Register) -> None:
    register("exponential", RetryPolicy)
