"""The ``thread`` executor: runs ``job.run_sync()`` in a thread pool."""

from __future__ import annotations

import asyncio
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from jobsched import CancelToken, Job, hookimpl, progress_reporter, run_with_token
from jobsched.hookspecs import Register


class ThreadExecutor:
    """A lazily created thread pool as large as the scheduler's worker count.

    Python cannot kill a thread: a job that times out or is cancelled is
    recorded as such at once, and its `jobsched.cancel_token()` is set; the
    thread is free again when the job returns, which a job that polls its
    token does promptly. A job that never polls keeps its thread until it
    returns.
    """

    def __init__(self, workers: int = 4) -> None:
        self.max_workers = workers
        self._pool: ThreadPoolExecutor | None = None

    async def invoke(self, job: Job) -> Any:
        pool = self._pool
        if pool is None:
            pool = self._pool = ThreadPoolExecutor(
                max_workers=self.max_workers, thread_name_prefix="jobsched"
            )
        # The token also carries the job and its progress reporter: the
        # thread finds both through cancel_token(), for jobsched.progress().
        token = CancelToken(job, progress_reporter())
        try:
            return await asyncio.get_running_loop().run_in_executor(
                pool,
                run_with_token,
                token,
                job.run_sync,  # type: ignore[attr-defined]
            )
        except asyncio.CancelledError:
            # The scheduler cancelled the attempt (timeout or cancel(job_id)):
            # tell the job through its token. Catching it here costs less than
            # a done-callback, which the loop would schedule for every job.
            token.cancel()
            raise

    def shutdown(self) -> None:
        # Don't block the loop on stragglers (a timed-out job); drop work
        # that never started.
        if self._pool is not None:
            self._pool.shutdown(wait=False, cancel_futures=True)
            self._pool = None


@hookimpl
def jobsched_register_executors(register: Register) -> None:
    register("thread", ThreadExecutor)
