"""Progress: the latest report of every job, and the throttled listeners it feeds."""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING

import structlog

from .._progress import ProgressThrottle
from .._status import JobStatus

if TYPE_CHECKING:
    from .._clock import Clock
    from .._job import Job
    from .._plugins import ProgressListener
    from .table import JobTable

logger = structlog.get_logger("jobsched")

RUNNING = JobStatus.RUNNING

#: ``listener(job, done, total, message)``: see `ProgressBoard.add_listener`.
JobProgressListener = Callable[["Job", float, "float | None", "str | None"], None]


class JobProgress(tuple):  # type: ignore[type-arg]
    """A job's latest progress report: ``(done, total, message, updated_at)``.

    `updated_at` is wall-clock epoch seconds (the clock's ``time()``).
    """

    __slots__ = ()

    def __new__(
        cls, done: float, total: float | None, message: str | None, updated_at: float
    ) -> JobProgress:
        return tuple.__new__(cls, (done, total, message, updated_at))

    done = property(lambda self: self[0], doc="how much is done")
    total = property(lambda self: self[1], doc="out of how much (None: unknown)")
    message = property(lambda self: self[2], doc="what it is doing")
    updated_at = property(lambda self: self[3], doc="when it was reported (wall clock)")


class ProgressBoard:
    """The progress running jobs report: kept at once, passed on throttled.

    Only jobs that report progress have an entry: the plain job path never
    touches it. `throttled` (jobs whose throttle may hold a value) is public
    for the worker to test when an attempt ends.
    """

    def __init__(
        self, table: JobTable, clock: Clock, listeners: tuple[ProgressListener, ...]
    ) -> None:
        self._table = table
        self._clock = clock
        self._fixed = listeners  # the plugins' and the backend's
        self._user: list[JobProgressListener] = []
        self._listeners: tuple[ProgressListener, ...] = listeners
        #: Job id -> its latest report (kept after the attempt ends).
        self.reports: dict[str, JobProgress] = {}
        self.throttled: dict[str, ProgressThrottle] = {}
        self._thread_reports: dict[str, tuple[Job, float, float | None, str | None]] = {}
        self._thread_reports_lock = threading.Lock()
        self._loop: asyncio.AbstractEventLoop | None = None

    def bind_loop(self, loop: asyncio.AbstractEventLoop) -> None:
        """The loop reports from other threads cross to (set by ``start()``)."""
        self._loop = loop

    def add_listener(self, listener: JobProgressListener) -> None:
        """Called as ``listener(job, done, total, message)`` when a running job
        reports progress (`jobsched.progress`), throttled to at most 4 calls a
        second per job, the latest report always included. On the loop thread;
        one that raises is logged and skipped.
        """
        self._user.append(listener)
        self._listeners = self._fixed + tuple(self._user)

    def remove_listener(self, listener: JobProgressListener) -> None:
        """Stop calling a listener `add_listener` added."""
        self._user.remove(listener)
        self._listeners = self._fixed + tuple(self._user)

    def latest(self, job_id: str) -> JobProgress | None:
        """The latest progress the job reported (kept after it ends), or None."""
        return self.reports.get(job_id)

    def report(self, job: Job, done: float, total: float | None, message: str | None) -> None:
        """`job` reported progress (on the loop thread).

        Kept at once (`latest`); passed to the listeners through the job's
        throttle. A report for an attempt that has ended is dropped.
        """
        job_id = job.job_id
        if job.status is not RUNNING or self._table.jobs.get(job_id) is not job:
            return
        value = self.reports[job_id] = JobProgress(done, total, message, self._clock.time())
        if not self._listeners:
            return
        throttle = self.throttled.get(job_id)
        if throttle is None:
            clock = self._clock
            throttle = self.throttled[job_id] = ProgressThrottle(
                lambda value: self._publish(job, value),
                clock.now,
                lambda delay, fn: clock.call_at(clock.now() + delay, fn),
            )
        throttle.update(value)

    def report_threadsafe(
        self, job: Job, done: float, total: float | None, message: str | None
    ) -> None:
        """`report` from any thread: the latest report of each job crosses to
        the loop, one hand-over in flight at a time."""
        loop = self._loop
        if loop is None:
            return
        with self._thread_reports_lock:
            first = not self._thread_reports
            self._thread_reports[job.job_id] = (job, done, total, message)
        if first:
            with contextlib.suppress(RuntimeError):  # the loop is closed: nobody listens
                loop.call_soon_threadsafe(self._take_thread_reports)

    def ended(self, job: Job) -> None:
        """The attempt of `job` ends: what its throttle holds is passed on now."""
        throttle = self.throttled.pop(job.job_id, None)
        if throttle is not None:
            throttle.flush()

    def forget(self, job_id: str) -> None:
        """`job_id` left the table."""
        self.reports.pop(job_id, None)

    def _take_thread_reports(self) -> None:
        with self._thread_reports_lock:
            reports, self._thread_reports = self._thread_reports, {}
        for job, done, total, message in reports.values():
            self.report(job, done, total, message)

    def _publish(self, job: Job, value: JobProgress) -> None:
        done, total, message = value[0], value[1], value[2]
        for listener in self._listeners:
            try:
                listener(job, done, total, message)
            except Exception:
                logger.exception(
                    "progress listener failed", job_id=job.job_id, listener=repr(listener)
                )
