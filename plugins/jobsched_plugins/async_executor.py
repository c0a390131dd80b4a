"""The ``async`` executor: runs ``job.run()`` on the event loop."""

from __future__ import annotations

from collections.abc import Awaitable
from typing import Any

from jobsched import Job, hookimpl
from jobsched.hookspecs import Register


class AsyncExecutor:
    """Awaits the job's coroutine inline, on the scheduler's own loop.

    A blocking call inside such a job stalls every job and the scheduler.
    """

    def __init__(self, workers: int = 1) -> None:
        self.workers = workers

    def invoke(self, job: Job) -> Awaitable[Any]:
        # The coroutine itself, not a wrapper: no extra frame per attempt.
        return job.run()  # type: ignore[attr-defined, no-any-return]

    def shutdown(self) -> None:
        pass


@hookimpl
def jobsched_register_executors(register: Register) -> None:
    register("async", AsyncExecutor)
