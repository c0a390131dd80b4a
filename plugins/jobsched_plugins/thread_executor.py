"""The ``thread`` executor: runs ``job.run_sync()`` in a thread pool."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import structlog

from jobsched import CancelToken, Job, SchedulerError, hookimpl, progress_reporter, run_with_token
from jobsched.hookspecs import Register

logger = structlog.get_logger("jobsched.thread")


class ThreadPoolExhaustedError(SchedulerError):
    """No pool thread is free: abandoned calls hold them all (the attempt never started)."""


class ThreadExecutor:
    """A lazily created thread pool: a thread for each of the scheduler's
    workers, and one more for each abandoned call, up to `max_abandoned`.

    Python cannot kill a thread: a job that times out or is cancelled is
    recorded as such at once, and its `jobsched.cancel_token()` is set; the
    thread is free again when the job returns, which a job that polls its
    token does promptly. Until then the call is *abandoned*: it is logged,
    counted (`abandoned`), and its thread is replaced, so the next jobs
    start at once. With `max_abandoned` calls abandoned and every thread
    busy, an attempt fails at once with `ThreadPoolExhaustedError` naming
    the stuck jobs, instead of waiting for a thread while shown running.
    """

    def __init__(self, workers: int = 4, *, max_abandoned: int | None = None) -> None:
        if max_abandoned is None:
            max_abandoned = workers
        if isinstance(max_abandoned, bool) or not isinstance(max_abandoned, int):
            raise TypeError(f"max_abandoned must be an integer, got {max_abandoned!r}")
        if max_abandoned < 0:
            raise ValueError(f"max_abandoned must be >= 0, got {max_abandoned!r}")
        self.max_workers = workers
        self.max_abandoned = max_abandoned
        self._pool: ThreadPoolExecutor | None = None
        # Calls submitted and not ended (running, abandoned or about to start),
        # counted on the loop thread: the pool has a free thread while this is
        # below its size.
        self._busy = 0
        # Abandoned calls that still run: their token -> (the job, a future
        # settled when the call ends). Insertion order: oldest first.
        self._abandoned: dict[CancelToken, tuple[Job, asyncio.Future[None]]] = {}

    async def invoke(self, job: Job) -> Any:
        pool = self._pool
        if pool is None:
            pool = self._pool = ThreadPoolExecutor(
                max_workers=self.max_workers + self.max_abandoned, thread_name_prefix="jobsched"
            )
        if self._busy >= self.max_workers + self.max_abandoned:
            raise self._exhausted(job)
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
            self._ended,
            done,
            token,
            job.run_sync,  # type: ignore[attr-defined]
        )
        self._busy += 1
        try:
            return await done
        except asyncio.CancelledError:
            # The scheduler cancelled the attempt (timeout or cancel(job_id)):
            # drop it if no thread took it yet, else tell the job through its
            # token. Catching it here costs less than a done-callback, which
            # the loop would schedule for every job.
            if work.cancel():
                self._busy -= 1
            else:
                token.cancel()
                if not work.done():  # the call goes on: abandoned
                    self._abandon(job, token, loop)
            raise

    def _abandon(self, job: Job, token: CancelToken, loop: asyncio.AbstractEventLoop) -> None:
        self._abandoned[token] = (job, loop.create_future())
        logger.warning(
            "thread job abandoned: its call still runs",
            job_id=job.job_id,
            job=job.name,
            abandoned=len(self._abandoned),
            max_abandoned=self.max_abandoned,
            hint="poll jobsched.cancel_token() in the job, or run it on the subprocess executor",
        )

    def _ended(self, token: CancelToken) -> None:
        """On the loop: a call ended (its thread is free again)."""
        self._busy -= 1
        if self._abandoned:
            entry = self._abandoned.pop(token, None)
            if entry is not None:
                job, ended = entry
                logger.info("abandoned thread job ended", job_id=job.job_id, job=job.name)
                if not ended.done():
                    ended.set_result(None)

    def _exhausted(self, job: Job) -> ThreadPoolExhaustedError:
        stuck = self.abandoned()
        size = self.max_workers + self.max_abandoned
        logger.error(
            "thread pool exhausted",
            job_id=job.job_id,
            threads=size,
            abandoned=len(stuck),
            stuck=stuck,
        )
        if not stuck:
            return ThreadPoolExhaustedError(
                f"no free thread to start {job.job_id}: all {size} threads of the pool are busy"
            )
        shown = ", ".join(stuck[:10]) + (f" and {len(stuck) - 10} more" if len(stuck) > 10 else "")
        return ThreadPoolExhaustedError(
            f"no free thread to start {job.job_id}: {len(stuck)} abandoned thread jobs "
            f"still run ({shown}) and the pool holds at most {self.max_abandoned} of them "
            f"beside its {self.max_workers} workers; make those jobs poll "
            "jobsched.cancel_token(), or run them on the subprocess executor"
        )

    def still_running(self, job: Job) -> asyncio.Future[None] | None:
        """A future done once `job`'s abandoned call ends; None if none runs."""
        for abandoned, ended in reversed(self._abandoned.values()):
            if abandoned is job:
                return ended
        return None

    def abandoned(self) -> list[str]:
        """The ids of the jobs whose abandoned calls still run, oldest first."""
        return [job.job_id for job, _ in self._abandoned.values()]

    def shutdown(self) -> None:
        # Don't block the loop on stragglers (a timed-out job); drop work
        # that never started.
        if self._pool is not None:
            self._pool.shutdown(wait=False, cancel_futures=True)
            self._pool = None


def _run_and_settle(
    loop: asyncio.AbstractEventLoop,
    ended: Callable[[CancelToken], None],
    done: asyncio.Future[Any],
    token: CancelToken,
    fn: Callable[[], Any],
) -> None:
    """On a pool thread: run `fn` with `token` as its cancel token, then hand
    its result or exception (any, SystemExit included) to `done` on the loop,
    and tell the executor (`ended`) that the call is over."""
    settle: Callable[..., None] = _succeed
    try:
        value = run_with_token(token, fn)
    except BaseException as exc:  # the attempt fails; the pool thread goes on
        settle, value = _fail, exc
    with contextlib.suppress(RuntimeError):  # the loop is closed: nobody waits
        loop.call_soon_threadsafe(settle, ended, done, token, value)


def _succeed(
    ended: Callable[[CancelToken], None], done: asyncio.Future[Any], token: CancelToken, result: Any
) -> None:
    ended(token)
    if not done.done():  # cancelled meanwhile: the scheduler moved on
        done.set_result(result)


def _fail(
    ended: Callable[[CancelToken], None],
    done: asyncio.Future[Any],
    token: CancelToken,
    exc: BaseException,
) -> None:
    ended(token)
    if not done.done():
        if isinstance(exc, StopIteration):  # a future refuses it, as a generator does
            error = RuntimeError(f"the job raised StopIteration({exc})")
            error.__cause__ = exc
            exc = error
        done.set_exception(exc)


@hookimpl
def jobsched_register_executors(register: Register) -> None:
    register("thread", ThreadExecutor)
