"""The ``process`` executor: runs ``job.run_sync()`` in a process pool."""

from __future__ import annotations

import asyncio
import os
import pickle
from collections.abc import Awaitable
from concurrent.futures import ProcessPoolExecutor
from typing import Any

from jobsched import Job, NotPicklableError, hookimpl
from jobsched.hookspecs import Register


class ProcessExecutor:
    """A lazily created process pool, so a scheduler of async jobs never forks.

    The job is pickled into a worker process and only its return value comes
    back; state the job changes over there is lost. ProcessPoolExecutor cannot
    kill one task: a timed-out or cancelled job is abandoned, not stopped.
    A job, arguments or result that cannot be pickled fails the attempt with
    `NotPicklableError`, which is not retried: no retry can fix it.
    """

    def __init__(self, workers: int = 2) -> None:
        self.max_workers = max(1, min(workers, os.cpu_count() or 1))
        self._pool: ProcessPoolExecutor | None = None

    def invoke(self, job: Job) -> Awaitable[Any]:
        # Pickled here, not in the pool's feeder thread: there a pickling
        # error comes back looking like any error the job might raise.
        try:
            payload = pickle.dumps(job)
        except Exception as exc:
            raise NotPicklableError(
                f"{job!r} cannot run on the process executor: it is not picklable "
                f"({type(exc).__name__}: {exc})"
            ) from exc
        pool = self._pool
        if pool is None:
            pool = self._pool = ProcessPoolExecutor(max_workers=self.max_workers)
        return asyncio.get_running_loop().run_in_executor(pool, run_pickled, payload)

    def shutdown(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=False, cancel_futures=True)
            self._pool = None


def run_pickled(payload: bytes) -> Any:
    """In the worker process: unpickle the job, run it, check its result can go back."""
    try:
        job = pickle.loads(payload)
    except Exception as exc:
        raise NotPicklableError(
            f"the job cannot be unpickled in the worker process ({type(exc).__name__}: {exc}); "
            "its class and function must be importable by module and name"
        ) from None
    result = job.run_sync()
    # Pickled once more to check it: a result the pool cannot send back would
    # otherwise fail with an error that looks like the job's own.
    try:
        pickle.dumps(result)
    except Exception as exc:
        raise NotPicklableError(
            f"{job!r} returned a result that cannot be pickled back ({type(exc).__name__}: {exc})"
        ) from None
    return result


@hookimpl
def jobsched_register_executors(register: Register) -> None:
    register("process", ProcessExecutor)
