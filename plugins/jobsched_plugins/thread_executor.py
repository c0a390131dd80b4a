"""The ``thread`` executor: runs ``job.run_sync()`` in a thread pool."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable
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
        loop = asyncio.get_running_loop()
        # Settled by the pool thread through call_soon_threadsafe: cheaper on
        # the loop thread than run_in_executor's chaining of two futures, and
        # loop-thread time is what thread jobs wait for (the GIL).
        done = loop.create_future()
        # The token also carries the job and its progress reporter: the
        # thread finds both through cancel_token(), for jobsched.progress().
        token = CancelToken(job, progress_reporter())
        work = pool.submit(
            _run_and_settle,
            loop,
            done,
            token,
            job.run_sync,  # type: ignore[attr-defined]
        )
        try:
            return await done
        except asyncio.CancelledError:
            # The scheduler cancelled the attempt (timeout or cancel(job_id)):
            # drop it if no thread took it yet, else tell the job through its
            # token. Catching it here costs less than a done-callback, which
            # the loop would schedule for every job.
            work.cancel()
            token.cancel()
            raise

    def shutdown(self) -> None:
        # Don't block the loop on stragglers (a timed-out job); drop work
        # that never started.
        if self._pool is not None:
            self._pool.shutdown(wait=False, cancel_futures=True)
            self._pool = None


def _run_and_settle(
    loop: asyncio.AbstractEventLoop,
    done: asyncio.Future[Any],
    token: CancelToken,
    fn: Callable[[], Any],
) -> None:
    """On a pool thread: run `fn` with `token` as its cancel token, then hand
    its result or exception (any, SystemExit included) to `done` on the loop."""
    settle: Callable[[asyncio.Future[Any], Any], None] = _succeed
    try:
        value = run_with_token(token, fn)
    except BaseException as exc:  # the attempt fails; the pool thread goes on
        settle, value = _fail, exc
    with contextlib.suppress(RuntimeError):  # the loop is closed: nobody waits
        loop.call_soon_threadsafe(settle, done, value)


def _succeed(done: asyncio.Future[Any], result: Any) -> None:
    if not done.done():  # cancelled meanwhile: the scheduler moved on
        done.set_result(result)


def _fail(done: asyncio.Future[Any], exc: BaseException) -> None:
    if not done.done():
        if isinstance(exc, StopIteration):  # a future refuses it, as a generator does
            error = RuntimeError(f"the job raised StopIteration({exc})")
            error.__cause__ = exc
            exc = error
        done.set_exception(exc)


@hookimpl
def jobsched_register_executors(register: Register) -> None:
    register("thread", ThreadExecutor)
