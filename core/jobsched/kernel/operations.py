"""Operator actions on the kernel's jobs: retry, purge, expire results, and the reaper."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Protocol

from .._errors import InvalidTransitionError, SchedulerStoppedError
from .._limits import job_type_of
from .._status import JobStatus

if TYPE_CHECKING:
    from collections.abc import Sequence

    from .._clock import Clock, TimerHandle
    from .._job import Job
    from .executors import AbandonedCalls
    from .graph import DependencyGraph
    from .listeners import Listeners
    from .progress import ProgressBoard
    from .queues import Queues
    from .table import JobTable

PENDING = JobStatus.PENDING
COMPLETED = JobStatus.COMPLETED
FAILED = JobStatus.FAILED
TIMED_OUT = JobStatus.TIMED_OUT
CANCELLED = JobStatus.CANCELLED

#: The statuses `Operations.retry_job` takes a job out of.
RETRYABLE = (FAILED, TIMED_OUT, CANCELLED)


class OperationHooks(Protocol):
    """What operator actions tell the backend (that part of `Backend`)."""

    def retried(self, job: Job) -> None: ...

    def purged(
        self,
        job_ids: Sequence[str],
        before: float,
        statuses: Sequence[JobStatus],
        *,
        exact: bool = False,
    ) -> None: ...

    def results_expired(self, jobs: Sequence[Job]) -> None: ...


class Operations:
    """Retry, purge and result expiry over the kernel's collaborators, and the
    reaper timer that applies `result_ttl` and `retention` away from the job path."""

    def __init__(
        self,
        *,
        table: JobTable,
        graph: DependencyGraph,
        queues: Queues,
        listeners: Listeners,
        progress: ProgressBoard,
        abandoned: AbandonedCalls,
        hooks: OperationHooks,
        clock: Clock,
        registered_types: Callable[[], dict[type, str]],
        result_ttl: float | None,
        retention: float | None,
    ) -> None:
        self._table = table
        self._graph = graph
        self._queues = queues
        self._listeners = listeners
        self._progress = progress
        self._abandoned = abandoned
        self._hooks = hooks
        self._clock = clock
        self._registered_types = registered_types
        self.result_ttl = result_ttl
        self.retention = retention
        self._reaper: TimerHandle | None = None
        self._reap_wanted = False  # a job brought its own result settings
        self._running = False
        self._closed = False

    # ── lifecycle ─────────────────────────────────────────────────────
    def start(self) -> None:
        """Arm the reaper if anything asks for it."""
        self._running = True
        if self.result_ttl is not None or self.retention is not None or self._reap_wanted:
            self._arm_reaper()

    def stop(self) -> None:
        """Refuse retries and disarm the reaper (a stop began)."""
        self._running = False
        self._closed = True

    def close(self) -> None:
        """Disarm the reaper (the workers exited)."""
        if self._reaper is not None:
            self._reaper.cancel()
            self._reaper = None

    def need_reaper(self) -> None:
        """A job has its own result settings: make sure the reaper runs."""
        self._reap_wanted = True
        if self._reaper is None and self._running:
            self._arm_reaper()

    # ── actions ───────────────────────────────────────────────────────
    def retry_job(self, job_id: str) -> Job:
        """Run a failed, timed-out or cancelled job again; returns it, PENDING.

        Its attempts start again from 0 and its last error and result are
        cleared; the attempt that ended it is kept in `attempt_history`. It
        is queued at once, whatever it depended on, unless the call of its
        last attempt still runs (an abandoned thread or process call): then
        it stays PENDING until that call has returned. A job in any other
        status raises `InvalidTransitionError` naming it; an id the
        scheduler does not know (or no longer remembers) `UnknownJobError`.
        """
        if self._closed:
            raise SchedulerStoppedError(f"scheduler is stopping; {job_id} was not retried")
        job = self._table.get(job_id)
        status = job.status
        if status not in RETRYABLE:
            raise InvalidTransitionError(
                f"{job_id} is {status.value}: only a failed, timed_out or cancelled job "
                "can be retried"
            )
        self._hooks.retried(job)  # may refuse (a shared store's job): nothing changed yet
        self._table.reopened(job, status)
        # A job cancelled while queued may still sit in a queue (lazy deletion):
        # take that entry out, or the job would be run twice.
        self._queues.remove(job)
        job.attempts = 0
        job.last_error = job.last_traceback = None
        job.last_failure_timed_out = False
        job.result = None
        job.started_at = job.finished_at = None
        job.run_at = self._clock.now()
        job.status = PENDING
        if self._listeners.every:
            self._listeners.notify(job, status, PENDING)
        if job_id in self._abandoned:
            # Its last call still runs on a thread: the new attempt waits for its end.
            self._abandoned.after(job_id, lambda: self._enqueue_if_pending(job))
        else:
            self._queues.enqueue(job)
        return job

    def retry_jobs(
        self, statuses: Iterable[JobStatus | str] = (FAILED,), job_type: str | None = None
    ) -> list[str]:
        """`retry_job` every job in `statuses` (failed, timed_out, cancelled) of
        `job_type` (its `jobsched.job_type_of` name; None: any); returns their
        ids in submit order. Any other status raises `ValueError`."""
        wanted = statuses_of(statuses, RETRYABLE, "retried (requeued)")
        registered = self._registered_types()
        chosen = [
            job
            for job in self._table.jobs.values()
            if job.status in wanted
            and (job_type is None or job_type_of(job, registered) == job_type)
        ]
        chosen.sort(key=lambda job: job.seq)
        return [self.retry_job(job.job_id).job_id for job in chosen]

    def purge(self, older_than: float, statuses: Iterable[JobStatus | str] | None = None) -> int:
        """Forget terminal jobs that finished more than `older_than` seconds ago.

        `statuses` (default: every terminal one) must all be terminal, else
        `ValueError`; unfinished jobs are never purged. A durable store
        deletes them too (a one-owner store also the older ones it keeps
        beyond the history). Returns how many jobs the scheduler forgot.
        """
        if isinstance(older_than, bool) or not isinstance(older_than, int | float):
            raise TypeError(f"older_than must be a number of seconds, got {older_than!r}")
        if not older_than >= 0:
            raise ValueError(f"older_than must be >= 0 seconds, got {older_than!r}")
        terminal = tuple(s for s in JobStatus if s.is_terminal)
        wanted = terminal if statuses is None else statuses_of(statuses, terminal, "purged")
        before = self._clock.now() - older_than
        jobs = self._table.jobs
        unreleased = self._graph.unreleased
        gone = [
            job_id
            for job_id in self._table.finished
            if (job := jobs.get(job_id)) is not None
            and job.status in wanted
            and job.finished_at is not None
            and job.finished_at <= before
            and job_id not in unreleased
        ]
        self._table.drop_finished(gone)
        for job_id in gone:
            self._graph.forget(job_id)
            self._progress.forget(job_id)
        self._hooks.purged(gone, before, wanted)
        return len(gone)

    def purge_jobs(self, job_ids: Iterable[str]) -> list[str]:
        """Forget the terminal jobs of `job_ids` (an operator chose them);
        returns the ids forgotten, in the order given.

        Unfinished jobs, ids the scheduler does not know, and a job whose
        end the store has not kept yet (its dependents still wait for that)
        are left alone, as `purge` leaves them. A durable store deletes
        exactly these jobs too.
        """
        jobs = self._table.jobs
        unreleased = self._graph.unreleased
        finished = set(self._table.finished)
        gone = [
            job_id
            for job_id in dict.fromkeys(job_ids)
            if job_id in finished
            and (job := jobs.get(job_id)) is not None
            and job.status.is_terminal
            and job_id not in unreleased
        ]
        if not gone:
            return []
        self._table.drop_finished(gone)
        for job_id in gone:
            self._graph.forget(job_id)
            self._progress.forget(job_id)
        terminal = tuple(s for s in JobStatus if s.is_terminal)
        self._hooks.purged(gone, self._clock.now(), terminal, exact=True)
        return gone

    def expire_results(self) -> int:
        """Drop the results of completed jobs past their time to keep them; returns how many.

        A job's time is `result_ttl_of` it. The scheduler calls this from a
        timer, armed when it has a `result_ttl` or `retention`, or once a job
        is submitted with ``result_ttl=`` or ``keep_result=``; a job type's own
        defaults alone arm nothing (that would cost every submit a check):
        call it yourself then.
        """
        now = self._clock.now()
        jobs = self._table.jobs
        expired: list[Job] = []
        for job_id in self._table.finished:
            job = jobs.get(job_id)
            if job is None or job.status is not COMPLETED or job.result is None:
                continue
            ttl = self.result_ttl_of(job)
            if ttl is not None and job.finished_at is not None and job.finished_at + ttl <= now:
                job.result = None
                expired.append(job)
        if expired:
            self._hooks.results_expired(expired)
        return len(expired)

    def result_ttl_of(self, job: Job) -> float | None:
        """Seconds `job`'s result is kept after it finished (None: as long as
        the job is remembered): 0 with ``keep_result=False``, else the job's
        ``result_ttl``, else the scheduler's."""
        if not job.keep_result:
            return 0.0
        return self.result_ttl if job.result_ttl is None else job.result_ttl

    # ── internals ─────────────────────────────────────────────────────
    def _enqueue_if_pending(self, job: Job) -> None:
        if job.status is PENDING and self._table.find(job.job_id) is job:
            self._queues.enqueue(job)

    def _arm_reaper(self) -> None:
        # A timer, never the job path: often enough that nothing outlives its
        # time by much (a quarter of the shortest setting), at most once a second.
        settings = [s for s in (self.result_ttl, self.retention) if s is not None]
        period = min(60.0, max(1.0, min(settings, default=60.0) / 4))
        self._reaper = self._clock.call_at(self._clock.now() + period, self._reap)

    def _reap(self) -> None:
        """Drop expired results, purge jobs past `retention`, and re-arm."""
        self._reaper = None
        if not self._running:
            return
        self.expire_results()
        if self.retention is not None:
            self.purge(self.retention)
        self._arm_reaper()


def statuses_of(
    statuses: Iterable[JobStatus | str], allowed: tuple[JobStatus, ...], what: str
) -> tuple[JobStatus, ...]:
    """`statuses` as members of `allowed`; `ValueError` naming any other."""
    if isinstance(statuses, JobStatus | str):
        statuses = (statuses,)
    found: list[JobStatus] = []
    for given in statuses:
        try:
            status = JobStatus(given)
        except ValueError:
            status = None
        if status not in allowed:
            names = ", ".join(s.value for s in allowed)
            raise ValueError(f"status {given!r} cannot be {what}: use one of {names}")
        found.append(status)
    return tuple(found)
