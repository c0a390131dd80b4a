"""The workers: each takes a job through the admission chain and runs its attempt.

One slot per worker holds the attempt it runs and its deadline; one
watchdog timer enforces every running job's timeout. An attempt that fails
is retried (RETRY_WAIT, then queued again or handed to the backend) or
ended through the kernel's `finish`.
"""

from __future__ import annotations

import asyncio
import math
import random
import sys
from collections.abc import Callable, Coroutine
from typing import TYPE_CHECKING, Any, cast

import structlog

from .. import _fork
from .._errors import SchedulerError
from .._fork import leave_forked_child
from .._options import MAX_DELAY
from .._progress import set_worker_reporter
from .._retry_filter import retry_verdict
from .._status import JobStatus
from ..store import storable_traceback
from .table import AttemptRecord

if TYPE_CHECKING:
    from .._clock import Clock, TimerHandle
    from .._job import Job
    from .executors import AbandonedCalls, Executors
    from .listeners import Listeners
    from .port import Backend
    from .progress import ProgressBoard
    from .queues import Queues
    from .table import JobTable

logger = structlog.get_logger("jobsched")

RUNNING = JobStatus.RUNNING
RETRY_WAIT = JobStatus.RETRY_WAIT
COMPLETED = JobStatus.COMPLETED
FAILED = JobStatus.FAILED
TIMED_OUT = JobStatus.TIMED_OUT
CANCELLED = JobStatus.CANCELLED
#: The error of an attempt a shutdown tore down.
SHUTDOWN = "scheduler shut down"

#: ``finish(job, status, error=...)``: the kernel ends a job (see `Kernel.finish`).
Finish = Callable[..., None]


class _WorkerReporter:
    """Where `jobsched.progress` reports go from the jobs one worker runs."""

    __slots__ = ("board", "slot")

    def __init__(self, board: ProgressBoard, slot: _Slot) -> None:
        self.board = board
        self.slot = slot

    def report_current(self, done: float, total: float | None, message: str | None) -> None:
        job = self.slot.job
        if job is None:
            raise SchedulerError("progress() called outside a running job")
        self.board.report(job, done, total, message)

    def report_threadsafe(
        self, job: Job, done: float, total: float | None, message: str | None
    ) -> None:
        self.board.report_threadsafe(job, done, total, message)


class _CancelCountingTask(asyncio.Task):  # type: ignore[type-arg]
    """A worker task for Python 3.10, whose tasks cannot say they are being cancelled.

    Counts cancel requests as 3.11's ``Task.cancelling()`` does, so that a
    job that raises ``CancelledError`` itself can be told from a worker
    being cancelled.
    """

    _requests = 0

    def cancel(self, msg: Any = None) -> bool:
        self._requests += 1
        return super().cancel(msg)

    def cancelling(self) -> int:
        return self._requests

    def uncancel(self) -> int:
        if self._requests > 0:
            self._requests -= 1
        return self._requests


def _start_worker(coro: Coroutine[Any, Any, None], name: str) -> asyncio.Task[None]:
    if sys.version_info >= (3, 11):
        return asyncio.create_task(coro, name=name)
    return _CancelCountingTask(coro, name=name)


class _Slot:
    """One worker and the attempt it is running, if any."""

    __slots__ = ("cancel_requested", "deadline", "expired", "job", "task")

    def __init__(self) -> None:
        self.job: Job | None = None
        self.task: asyncio.Task[None] | None = None
        self.deadline = math.inf
        self.expired = False  # the watchdog cancelled this attempt: a timeout
        self.cancel_requested = False  # cancel(job_id) cancelled this attempt


class Workers:
    """The kernel's workers, their slots, and what happens when an attempt ends."""

    def __init__(
        self,
        num_workers: int,
        *,
        table: JobTable,
        queues: Queues,
        listeners: Listeners,
        progress: ProgressBoard,
        executors: Executors,
        abandoned: AbandonedCalls,
        backend: Backend,
        clock: Clock,
        rng: random.Random,
        finish: Finish,
        transition: Callable[[Job, JobStatus], None],
        forget: Callable[[Job], None],
    ) -> None:
        self._table = table
        self._queues = queues
        self._listeners = listeners
        self._progress = progress
        self._executors = executors
        self._abandoned = abandoned
        self._backend = backend
        self._clock = clock
        self._rng = rng
        self._finish = finish
        self._transition = transition
        self._forget = forget
        self._slots = [_Slot() for _ in range(num_workers)]
        self._tasks: list[asyncio.Task[None]] = []
        self._running_count = 0
        self.peak_running = 0  # the most attempts ever in flight at once
        self._watchdog: TimerHandle | None = None
        self._watchdog_at = math.inf
        self._stopping = False

    @property
    def running(self) -> int:
        """Attempts in flight right now."""
        return self._running_count

    def start(self) -> None:
        """Start one task per worker on the running loop."""
        self._tasks = [
            _start_worker(self._worker(slot), f"jobsched-worker-{i}")
            for i, slot in enumerate(self._slots)
        ]

    def stop(self) -> None:
        """Workers exit once their attempt ends (`join` waits for that)."""
        self._stopping = True

    async def join(self) -> None:
        """Wait until every worker exited, then disarm the watchdog."""
        if self._tasks:
            await asyncio.gather(*self._tasks, return_exceptions=True)
        if self._watchdog is not None:
            self._watchdog.cancel()
            self._watchdog = None

    def cancel(self, job: Job) -> bool:
        """Cancel the attempt of `job` if a worker runs it; False if none does."""
        for slot in self._slots:
            if slot.job is job:
                self._cancel_attempt(slot)
                return True
        return False

    def hand_back_running(self) -> None:
        """Cancel the attempts in flight for a shutdown, which is not a cancel:
        the backend keeps them to run again (at-least-once, as after a crash)."""
        for slot in self._slots:
            if slot.job is not None and not slot.cancel_requested:
                if self._backend.interrupted(slot.job):
                    slot.job.handed_back = True  # listeners log a hand-back
                self._cancel_attempt(slot)

    def attempt_in(self, task: asyncio.Task[Any] | None) -> Job | None:
        """The job whose attempt worker task `task` is running, or None.

        It only reads, so a watchdog thread may ask it while the loop is
        blocked (``asyncio.current_task(loop)`` names the task that blocks it).
        """
        for slot in self._slots:
            if task is not None and slot.task is task:
                return slot.job
        return None

    def interrupt_running(self) -> None:
        """Tear down the attempts in flight as a shutdown would (after `stop` began).

        Their workers are cancelled; each job ends CANCELLED here ("scheduler
        shut down") and its backend keeps it to run again. This is what
        ``jobsched worker`` does when its grace period runs out.
        """
        for slot in self._slots:
            if slot.job is not None and slot.task is not None:
                slot.task.cancel()

    async def _worker(self, slot: _Slot) -> None:
        slot.task = asyncio.current_task()
        # Once per worker, not per job: async jobs find their reporter in the
        # worker task's context (tasks they create inherit it).
        set_worker_reporter(_WorkerReporter(self._progress, slot))
        queues = self._queues
        listeners = self._listeners
        progress = self._progress
        limiter = queues.limiter
        executors = self._executors
        now = self._clock.now
        inf = math.inf
        pop = queues.ready.pop
        started_in = _fork.pid  # a forked child's copy of this worker must not go on
        while not self._stopping:
            if queues.plain:  # queues.take(), inline: nothing can hold a job back
                job = pop()
                while job is not None and job.status.is_terminal:
                    job = pop()  # lazily deleted: cancelled while queued
            else:
                job = queues.take()
            if job is None:
                await queues.wait_for_work()
                continue
            # A queued job that is not terminal is PENDING or RETRY_WAIT, both
            # of which may move to RUNNING: no edge check needed.
            old = job.status
            job.status = RUNNING
            if listeners.running:
                listeners.notify_running(job, old)
                if job.status is not RUNNING:
                    continue  # cancelled by a listener on its way to RUNNING
            # The attempt runs inline in the worker task, and in this frame: a
            # task, or even a coroutine call, per attempt would cost more than
            # the rest of the job's path. Timeouts and cancel(job_id) cancel
            # the worker task while it awaits the attempt; the slot's flags say
            # which, so a TimeoutError the job raises itself stays an ordinary
            # failure. Whatever else the job raises, even CancelledError or
            # SystemExit, fails the job and not the worker.
            try:
                job.attempts += 1
                job.started_at = started = now()
                slot.job = job
                running = self._running_count = self._running_count + 1
                if running > self.peak_running:
                    self.peak_running = running
                timeout = job.timeout
                if timeout is not None:
                    slot.deadline = deadline = started + timeout
                    if deadline < self._watchdog_at:
                        self._arm_watchdog(deadline)
                try:
                    result = await executors[job.model].invoke(job)
                except asyncio.CancelledError as exc:
                    self._attempt_failed(job, slot, timeout, exc, cancelled_error=True)
                    continue
                except BaseException as exc:  # a job's SystemExit must not end the program
                    if _fork.pid != started_in:
                        leave_forked_child(started_in, job, exc)
                    self._attempt_failed(job, slot, timeout, exc)
                    continue
                if _fork.pid != started_in:
                    leave_forked_child(started_in, job, None)
                if slot.expired or slot.cancel_requested:
                    # Cancelled or timed out as it returned: that decision stands.
                    self._attempt_failed(job, slot, timeout, None)
                    continue
                # Completed: _release inline, the common path.
                if limiter is not None:
                    limiter.release(job)
                if progress.throttled:
                    progress.ended(job)
                slot.job = None
                slot.deadline = inf
                self._running_count -= 1
                job.result = result
                self._finish(job, COMPLETED)
            except asyncio.CancelledError:
                raise  # the worker itself is being torn down
            except Exception:  # a bug in our own bookkeeping
                logger.exception("worker crashed", job_id=job.job_id)

    def _attempt_failed(
        self,
        job: Job,
        slot: _Slot,
        timeout: float | None,
        error: BaseException | None,
        *,
        cancelled_error: bool = False,
    ) -> None:
        """An attempt ended other than by returning normally, or was cancelled
        or timed out by the kernel as it returned (`error` None)."""
        task: Any = slot.task  # cancelling()/uncancel(): 3.11's, or _CancelCountingTask's
        expired, cancelled = slot.expired, slot.cancel_requested
        if cancelled_error and not (expired or cancelled) and task.cancelling():
            # The worker itself is being cancelled (a shutdown, from outside
            # the kernel or `interrupt_running`): not a cancel of the job.
            self._release(slot)
            if self._backend.interrupted(job):
                job.handed_back = True  # listeners log a hand-back, not a cancel
            self._finish(job, CANCELLED, error=SHUTDOWN)
            raise error  # type: ignore[misc]
        if (expired or cancelled) and task.cancelling():
            task.uncancel()  # our cancel request was handled here
        self._release(slot)
        still_running = (
            self._abandoned.watch(job, self._executors[job.model])
            if (expired or cancelled)
            else None
        )
        if expired or cancelled:
            job.last_traceback = None  # this attempt raised nothing
        if cancelled:
            self._finish(job, CANCELLED, error=SHUTDOWN if job.handed_back else "cancelled")
        elif expired:
            retry, _, note = retry_verdict(None, job.retry_on, job.no_retry_on)
            message = f"timed out after {timeout}s{note}"
            if still_running is not None and retry and self._retries_left(job):
                # Its retry must not run beside the call still running: the
                # job stays RUNNING (its call is) until that call ends, and
                # its outcome then is this timeout, whatever the call returns.
                logger.warning(
                    "timed out; the retry waits for the abandoned call to end",
                    job_id=job.job_id,
                    attempt=job.attempts,
                )
                job.last_error = message
                job.last_failure_timed_out = True
                attempt = job.attempts
                self._abandoned.after(
                    job.job_id, lambda: self._timed_out_call_ended(job, attempt, message, retry)
                )
                return
            self._after_failure(job, message, retryable=retry, timed_out=True)
        elif error is not None:
            # Not CancelledError, SystemExit...: the job asked to stop, not to
            # be tried again; nor what the job's retry_on/no_retry_on rule out.
            retry, delay, note = retry_verdict(error, job.retry_on, job.no_retry_on)
            job.last_traceback = storable_traceback(error)
            self._after_failure(job, _describe_error(error) + note, retryable=retry, delay=delay)

    def _timed_out_call_ended(self, job: Job, attempt: int, message: str, retry: bool) -> None:
        """The call of `job`'s timed-out attempt ended: record the timeout now
        (a retry may start), unless the job was cancelled meanwhile."""
        if (
            job.status is RUNNING
            and job.attempts == attempt
            and self._table.find(job.job_id) is job
        ):
            self._after_failure(job, message, retryable=retry, timed_out=True)

    def _retries_left(self, job: Job) -> bool:
        """Whether a failure of `job`'s latest attempt would be retried (`_retry_wait`'s count)."""
        try:
            return not self._stopping and job.attempts <= job.retry.max_retries
        except Exception:  # a broken policy: `_retry_wait` says why
            return False

    def _release(self, slot: _Slot) -> None:
        job = cast("Job", slot.job)
        if self._queues.limiter is not None:
            self._queues.limiter.release(job)
        if self._progress.throttled:
            self._progress.ended(job)
        slot.job = None
        slot.deadline = math.inf
        slot.expired = slot.cancel_requested = False
        self._running_count -= 1

    def _cancel_attempt(self, slot: _Slot) -> None:
        if slot.cancel_requested or slot.task is None:
            return
        slot.cancel_requested = True
        if not slot.expired:
            slot.task.cancel()

    def _arm_watchdog(self, when: float) -> None:
        if self._watchdog is not None:
            self._watchdog.cancel()
        self._watchdog_at = when
        self._watchdog = self._clock.call_at(when, self._on_watchdog)

    def _on_watchdog(self) -> None:
        """Time out every attempt past its deadline, then re-arm for the next one."""
        self._watchdog = None
        self._watchdog_at = math.inf
        now = self._clock.now()
        earliest = math.inf
        for slot in self._slots:
            if slot.job is None or slot.expired:
                continue
            if slot.deadline <= now:
                slot.expired = True
                if not slot.cancel_requested and slot.task is not None:
                    slot.task.cancel()
            elif slot.deadline < earliest:
                earliest = slot.deadline
        if earliest < math.inf:
            self._arm_watchdog(earliest)

    def _after_failure(
        self,
        job: Job,
        error: str,
        *,
        retryable: bool = True,
        timed_out: bool = False,
        delay: float | None = None,
    ) -> None:
        job.last_error = error
        job.last_failure_timed_out = timed_out
        wait = None
        if retryable and not self._stopping:
            wait, error = self._retry_wait(job, error, delay)
        if wait is not None:
            # The failed attempt joins the job's history; the final one is
            # the job's own fields, so a job that never retries records nothing.
            now = self._clock.now()
            self._table.record_attempt(
                job.job_id,
                AttemptRecord(
                    job.attempts,
                    TIMED_OUT if timed_out else FAILED,
                    error,
                    job.started_at,
                    now,
                    job.last_traceback,
                ),
            )
            job.previous_run_at = job.run_at  # the failed attempt's due time, for listeners
            job.run_at = now + wait
            self._transition(job, RETRY_WAIT)
            if self._backend.retry(job):
                self._forget(job)  # the backend's now: another process may take it
            else:
                self._queues.enqueue(job)
        else:
            self._finish(job, TIMED_OUT if timed_out else FAILED, error=error)

    def _retry_wait(
        self, job: Job, error: str, delay: float | None = None
    ) -> tuple[float | None, str]:
        """Seconds until the failed job's next attempt (None: no more), and its error.

        `delay` (a `jobsched.Retry`'s) replaces the policy's delay, not its
        count. A retry policy that raises or asks for a wait that is not 0 to
        `MAX_DELAY` seconds ends the job, with the reason added to its error:
        the worker and the run go on.
        """
        policy = job.retry
        try:
            if job.attempts > policy.max_retries:
                return None, error
            wait = policy.delay(job.attempts, self._rng) if delay is None else delay
            if not 0 <= wait <= MAX_DELAY:  # also NaN
                raise ValueError(f"it asked to wait {wait!r}s; the most is {MAX_DELAY:.0f}s")
        except Exception as exc:
            return None, f"{error} (not retried: retry policy {policy!r} failed: {exc})"
        return wait, error


def _describe_error(error: BaseException) -> str:
    """``"ValueError: bad input"``; the bare type name when there is no message."""
    text = str(error)
    return f"{type(error).__name__}: {text}" if text else type(error).__name__
