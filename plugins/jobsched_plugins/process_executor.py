"""The ``process`` executor: runs ``job.run_sync()`` in a process pool."""

from __future__ import annotations

import asyncio
import os
from collections.abc import Awaitable
from concurrent.futures import ProcessPoolExecutor
from typing import Any

from jobsched import Job, hookimpl
from jobsched.hookspecs import Register


class ProcessExecutor:
    """A lazily created process pool, so a scheduler of async jobs never forks.

    The job is pickled into a worker process and only its return value comes
    back; state the job changes over there is lost. ProcessPoolExecutor cannot
    kill one task: a timed-out or cancelled job is abandoned, not stopped.
    """

    def __init__(self, workers: int = 2) -> None:
        self.max_workers = max(1, min(workers, os.cpu_count() or 1))
        self._pool: ProcessPoolExecutor | None = None

    def invoke(self, job: Job) -> Awaitable[Any]:
        pool = self._pool
        if pool is None:
            pool = self._pool = ProcessPoolExecutor(max_workers=self.max_workers)
        return asyncio.get_running_loop().run_in_executor(pool, job.run_sync)  # type: ignore[attr-defined]

    def shutdown(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=False, cancel_futures=True)
            self._pool = None


@hookimpl
def jobsched_register_executors(register: Register) -> None:
    register("process", ProcessExecutor)
