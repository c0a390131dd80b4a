"""What a `LocalClient` reports about its scheduler's work: `stats`,
`history`, `workers` and `queues`, read from the scheduler itself.

`LocalStats` owns the numbers a store would keep for a `Client`: the
throughput history of the scheduler (`_Recorder`, counted in memory from the
first `LocalClient` made for it on, and shared by every later one) and the
reads that fold the scheduler's jobs into `Stats`, `History`,
`WorkerRecord` and `QueueInfo` records.
"""

from __future__ import annotations

import math
import os
import socket
import weakref
from typing import TYPE_CHECKING, Any

from ._job import FunctionJob, Job
from ._limits import job_type_of
from ._records import (
    THROUGHPUT_MINUTES,
    History,
    LimitUse,
    QueueInfo,
    Stats,
    ThroughputBucket,
    WorkerInfo,
    WorkerRecord,
    check_history_query,
    window_start,
)
from ._status import JobStatus
from ._version import __version__
from .store import BacklogRow, HistoryFold, HistoryRead, HistoryTable, queue_rows

if TYPE_CHECKING:
    from ._scheduler import JobScheduler

_FAILED = (JobStatus.FAILED, JobStatus.TIMED_OUT)
_RUNNING = JobStatus.RUNNING
_COMPLETED = JobStatus.COMPLETED
_CANCELLED = JobStatus.CANCELLED


class _Recorder:
    """The throughput history of one scheduler, in memory: what a worker
    keeps in a store (`jobsched.store.HistoryFold`, `HistoryTable`).

    Made by the scheduler's first `LocalClient` (every later one shares it),
    it starts from the finished jobs the scheduler remembers (their last
    attempts) and then counts every attempt that ends, in a transition
    listener (a dict update per attempt); `read` folds what it counted into
    the table first.
    """

    def __init__(self, scheduler: JobScheduler) -> None:
        kernel = scheduler.kernel
        self._clock = kernel.clock
        self._offset = self._clock.time() - self._clock.now()
        # Weakly: `_recorders` holds this while the scheduler lives, and a
        # strong path back to it would keep the scheduler alive forever.
        self._kernel = weakref.ref(kernel)
        self._names: dict[type, str] = {}
        self.fold = HistoryFold()
        self.table = HistoryTable()
        for job in scheduler.jobs():
            started, finished = job.started_at, job.finished_at
            if started is None or finished is None or job.status not in (_COMPLETED, *_FAILED):
                continue
            self.fold.add(
                finished + self._offset,
                job.queue,
                self.type_name(job),
                job.status is _COMPLETED,
                finished - started,
            )
        scheduler.add_listener(self._on_transition)

    def type_name(self, job: Job) -> str:
        cls = type(job)
        if cls is FunctionJob:
            return job_type_of(job)
        name = self._names.get(cls)
        if name is None:
            kernel = self._kernel()
            registered = kernel.registered_types() if kernel is not None else None
            name = self._names[cls] = job_type_of(job, registered)
        return name

    def _on_transition(self, job: Job, old: JobStatus, new: JobStatus) -> None:
        if old is not _RUNNING or new is _RUNNING or new is _CANCELLED or job.started_at is None:
            return
        now = self._clock.now()
        self.fold.add(
            now + self._offset,
            job.queue,
            self.type_name(job),
            new is _COMPLETED,
            now - job.started_at,
        )

    def read(self, step: float, since: float, type: str | None, queue: str | None) -> HistoryRead:
        """`HistoryRole.history` over this scheduler's attempts."""
        if self.fold:
            self.table.add(self.fold.take(), self._clock.time())
        return self.table.read(step, since, type, queue)


#: Each scheduler's history, made by its first LocalClient.
_recorders: weakref.WeakKeyDictionary[JobScheduler, _Recorder] = weakref.WeakKeyDictionary()


class LocalStats:
    """The numbers of one `LocalClient`'s scheduler: the `LocalClient`
    methods of the same names, which delegate here (their docstrings there
    are the contract). `offset` turns the kernel's monotonic times into wall
    time, as the client's records do. The scheduler's `_Recorder` is made
    by its first `LocalStats` and shared by every later one."""

    def __init__(self, scheduler: JobScheduler, offset: float) -> None:
        self.scheduler = scheduler
        self._offset = offset
        recorder = _recorders.get(scheduler)
        if recorder is None:
            recorder = _recorders[scheduler] = _Recorder(scheduler)
        self._recorder = recorder

    def stats(self) -> Stats:
        """`LocalClient.stats`."""
        scheduler = self.scheduler
        clock = scheduler.kernel.clock
        now = clock.time()
        offset = self._offset
        counts = {s.value: 0 for s in JobStatus}
        last = math.floor(now / 60) * 60.0
        first = last - 60.0 * (THROUGHPUT_MINUTES - 1)
        completed = [0] * THROUGHPUT_MINUTES
        failed = [0] * THROUGHPUT_MINUTES
        for job in scheduler.jobs():
            status = job.status
            counts[status.value] += 1
            if job.finished_at is None or not status.is_terminal:
                continue
            minute = int((job.finished_at + offset - first) // 60)
            if 0 <= minute < THROUGHPUT_MINUTES:
                if status is JobStatus.COMPLETED:
                    completed[minute] += 1
                elif status in _FAILED:
                    failed[minute] += 1
        running = scheduler.kernel.running
        return Stats(
            counts=counts,
            throughput=[
                ThroughputBucket(start=first + 60.0 * i, completed=completed[i], failed=failed[i])
                for i in range(THROUGHPUT_MINUTES)
            ],
            workers=[WorkerInfo(worker="local", running=running, lease_expires=None)]
            if running
            else [],
            limits=self._limit_uses(),
            queue_paused=scheduler.queue_paused,
            at=now,
            abandoned=len(scheduler.abandoned_calls()),
        )

    def history(self, window: str, type: str | None, queue: str | None) -> History:
        """`LocalClient.history`."""
        step, name = check_history_query(window, type, queue)
        scheduler = self.scheduler
        now_mono, now = scheduler.kernel.clock.now(), scheduler.kernel.clock.time()
        found: dict[tuple[str, str], list[Any]] = {}
        for job in scheduler.jobs():
            status = job.status
            if status.is_terminal or (name is not None and job.queue != name):
                continue
            if status is not _RUNNING and scheduler.waiting_on(job.job_id):
                continue  # waiting for its dependencies: not queued yet
            rec = found.setdefault((job.queue, self._recorder.type_name(job)), [0, 0, None])
            if status is _RUNNING:
                rec[1] += 1
                continue
            rec[0] += 1
            if job.run_at <= now_mono:
                due = job.run_at + self._offset
                rec[2] = due if rec[2] is None else min(rec[2], due)
        backlog = [
            BacklogRow(queue=key[0], type=key[1], queued=r[0], running=r[1], oldest_due=r[2])
            for key, r in sorted(found.items())
        ]
        read = self._recorder.read(step, window_start(window, now), type, name)
        return History.from_rows(window, read, backlog, now, type=type, queue=name)

    def workers(self) -> list[WorkerRecord]:
        """`LocalClient.workers`."""
        kernel = self.scheduler.kernel
        started = kernel.started_at
        if started is None:
            return []
        running = kernel.running
        state = "draining" if kernel.stopping else "live" if running else "idle"
        host, pid = socket.gethostname(), os.getpid()
        return [
            WorkerRecord(
                worker_id=f"{host}:{pid}",
                host=host,
                pid=pid,
                queues={"default": kernel.num_workers},
                job_types=tuple(kernel.plugins.names("job_types")),
                version=__version__,
                started_at=started,
                last_seen=kernel.clock.time(),
                running=running,
                state=state,
                seen_ago=0.0,
            )
        ]

    def _limit_uses(self) -> list[LimitUse]:
        limiter = self.scheduler.limiter
        if limiter is None:
            return []
        limits = limiter.limits
        uses = [
            LimitUse(kind="executor", name=name, limit=n, in_use=limiter.running(executor=name))
            for name, n in sorted(limits.executors.items())
        ]
        uses += [
            LimitUse(kind="job_type", name=name, limit=n, in_use=limiter.running(job_type=name))
            for name, n in sorted(limits.job_types.items())
        ]
        uses += [
            LimitUse(kind="queue", name=name, limit=n, in_use=limiter.running(queue=name))
            for name, n in sorted(limits.queues.items())
        ]
        uses += [
            LimitUse(kind="rate", name=name, limit=rate.burst, in_use=0)
            for name, rate in sorted(limits.rates.items())
        ]
        return uses

    def queues(self) -> list[QueueInfo]:
        """`LocalClient.queues`."""
        scheduler = self.scheduler
        clock = scheduler.kernel.clock
        now_mono, now = clock.now(), clock.time()
        paused = set(scheduler.paused_queues)
        found: dict[str, dict[str, Any]] = {
            name: {"ready": 0, "oldest": None, "running": 0, "finished": 0}
            for name in (*scheduler.queues, *paused)
        }
        for job in scheduler.jobs():
            rec = found.setdefault(
                job.queue, {"ready": 0, "oldest": None, "running": 0, "finished": 0}
            )
            status = job.status
            if status is JobStatus.RUNNING:
                rec["running"] += 1
            elif status.is_terminal:
                if job.finished_at is not None and job.finished_at >= now_mono - 60.0:
                    rec["finished"] += 1
            elif (
                status in (JobStatus.PENDING, JobStatus.RETRY_WAIT)
                and job.run_at <= now_mono
                and not scheduler.waiting_on(job.job_id)
            ):
                rec["ready"] += 1
                ready_at = job.run_at + self._offset
                oldest = rec["oldest"]
                rec["oldest"] = ready_at if oldest is None else min(oldest, ready_at)
        return [QueueInfo.from_row(row, now) for row in queue_rows(found, paused)]
