"""Running a loaded job file on a `JobScheduler` and reporting each job's outcome."""

from __future__ import annotations

import asyncio
import contextlib
import random
import re
import sys
import time
from collections import Counter
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import attrs

from .. import Job, JobScheduler, JobStatus, UnknownJobError, build_job
from ..backends import JournalBackend
from ..store import result_as_json
from ._model import JobFile, LimitsSettings, RecurringEntry

if TYPE_CHECKING:
    from .. import PluginManager

#: Exit codes of ``jobsched run`` (see docs/cli.md).
EXIT_OK, EXIT_JOB_FAILED, EXIT_BAD_INPUT, EXIT_INTERRUPTED = 0, 1, 2, 130
#: The status shown for a job that a stopped run left unfinished in a durable
#: store: not cancelled, the next run of the file runs it.
INTERRUPTED = "interrupted"
#: Every status a summary can show, in order.
SHOWN_STATUSES = (*(s.value for s in JobStatus), INTERRUPTED)
_JOB_ID = re.compile(r"\bjob-\d+\b")
#: The runner's history_limit: it keeps every job (it holds each one for the summary anyway).
_EVERY_JOB = sys.maxsize


@attrs.define(kw_only=True)
class JobOutcome:
    """How one job of the file ended: one row of the summary."""

    id: str
    type: str
    job_id: str
    status: JobStatus
    attempts: int
    duration: float | None  # first start to finish, seconds; None if it never ran
    result: Any
    error: str | None
    recurring: str | None = None  # the [[recurring]] id for a recurring run
    start_order: int | None = None  # 1 for the first job this run started; None if it did not
    # Stopped unfinished by Ctrl-C/SIGTERM while a durable store keeps it for the next run.
    will_run_again: bool = False

    @property
    def shown_status(self) -> str:
        """The status the summary shows: ``interrupted`` for a job the store will run again."""
        return INTERRUPTED if self.will_run_again else self.status.value

    def to_json(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "type": self.type,
            "job_id": self.job_id,
            "status": self.shown_status,
            "attempts": self.attempts,
            "duration": None if self.duration is None else round(self.duration, 6),
            "result": result_as_json(self.result) if self.status is JobStatus.COMPLETED else None,
            "error": self.error if self.status is not JobStatus.COMPLETED else None,
            "recurring": self.recurring,
            "start_order": self.start_order,
            "will_run_again": self.will_run_again,
        }


@attrs.define(kw_only=True)
class RunResult:
    """The outcome of a whole run: what ``jobsched run`` prints."""

    source: str
    strategy: str
    workers: int
    outcomes: list[JobOutcome]
    elapsed: float
    # The most jobs that ran at once; None when this process cannot know (jobs
    # run by `jobsched worker` processes on a shared store).
    peak_running: int | None
    interrupted: bool = False

    @property
    def ok(self) -> bool:
        """True when every job completed."""
        return not self.interrupted and all(o.status is JobStatus.COMPLETED for o in self.outcomes)

    @property
    def exit_code(self) -> int:
        if self.interrupted:
            return EXIT_INTERRUPTED
        return EXIT_OK if self.ok else EXIT_JOB_FAILED

    def counts(self) -> dict[str, int]:
        """Jobs per shown status (`JobOutcome.shown_status`), every one present (0 when none)."""
        found = Counter(o.shown_status for o in self.outcomes)
        return {status: found.get(status, 0) for status in SHOWN_STATUSES}

    def to_json(self) -> dict[str, Any]:
        """The stable ``run --json`` document (docs/cli.md)."""
        return {
            "file": self.source,
            "ok": self.ok,
            "exit_code": self.exit_code,
            "interrupted": self.interrupted,
            "elapsed": round(self.elapsed, 6),
            "strategy": self.strategy,
            "workers": self.workers,
            "peak_running": self.peak_running,
            "counts": self.counts(),
            "jobs": [o.to_json() for o in self.outcomes],
        }


class Progress:
    """Live counts of jobs by status, updated on the loop thread by a listener.

    Readers on other threads (a progress display) only read plain ints.
    """

    def __init__(self) -> None:
        self.counts: Counter[JobStatus] = Counter()
        self.started = time.monotonic()
        self.finished = False

    @property
    def elapsed(self) -> float:
        return time.monotonic() - self.started

    def snapshot(self) -> dict[str, int]:
        return {s.value: self.counts.get(s, 0) for s in JobStatus}


class _Tracked:
    __slots__ = ("entry_id", "first_start", "job", "recurring", "start_order", "type")

    def __init__(self, entry_id: str, type_: str, job: Job, recurring: str | None) -> None:
        self.entry_id = entry_id
        self.type = type_
        self.job = job
        self.recurring = recurring
        self.first_start: float | None = None
        self.start_order: int | None = None


async def run_jobfile(
    jobfile: JobFile,
    *,
    plugins: PluginManager | None = None,
    progress: Progress | None = None,
    stop: asyncio.Event | None = None,
    on_scheduler: Callable[[JobScheduler], None] | None = None,
    store: str | None = None,
) -> RunResult:
    """Run every job of `jobfile` to completion and return their outcomes.

    Jobs are submitted in ``jobfile.submit_order`` before the scheduler
    starts; recurring entries fire until their `times` or `until` is reached.
    Setting `stop` ends the run early: running jobs are cancelled and the
    result is marked interrupted.

    With a durable `store` (a URL such as ``sqlite:///jobs.db``) the
    scheduler starts first and restores what the store holds; then every
    entry is submitted with its id as the key, so a job the store already has
    (finished or not) is resumed, never added twice, and a recurring entry
    goes on from its stored count. Stopping early leaves unfinished jobs in
    the store for the next run instead of cancelling them.
    """
    settings = jobfile.scheduler
    limits: LimitsSettings | None = jobfile.tables.get("limits")
    scheduler = JobScheduler(
        settings.strategy,
        num_workers=settings.workers,
        rng=random.Random(settings.seed) if settings.seed is not None else None,
        plugins=plugins,
        store=store,
        limits=limits.limits() if limits is not None else None,
        # Never forget a job: the summary reports every job of the file, and a
        # rerun on a store resumes every key it holds, however many.
        history_limit=_EVERY_JOB,
        # Every queue its entries name: this scheduler is the one that runs them.
        queues=sorted(
            {"default"} | {e.queue for e in (*jobfile.jobs, *jobfile.recurring) if e.queue}
        ),
    )
    durable = isinstance(scheduler.kernel.backend, JournalBackend)
    plugins = scheduler.plugins
    if on_scheduler is not None:
        on_scheduler(scheduler)
    progress = progress or Progress()
    tracked: dict[str, _Tracked] = {}
    started = 0  # jobs of this run started so far: the start order
    now = time.monotonic

    def listen(job: Job, old: JobStatus, new: JobStatus) -> None:
        nonlocal started
        counts = progress.counts
        counts[old] -= 1
        counts[new] += 1
        if new is JobStatus.RUNNING:
            info = tracked.get(job.job_id)
            if info is not None and info.first_start is None:
                info.first_start = now()
                started += 1
                info.start_order = started

    scheduler.add_listener(listen)
    start = now()
    progress.started = start

    def track(entry_id: str, type_: str, job: Job, recurring: str | None = None) -> None:
        tracked[job.job_id] = _Tracked(entry_id, type_, job, recurring)
        progress.counts[job.status] += 1  # a restored job may be anywhere already

    if durable:
        # Restore first: the ids of the file's jobs are keys into the store.
        await scheduler.start()
    ids: dict[str, str] = {}
    for entry in jobfile.submit_order:
        args = jobfile.args_of(entry, lambda entry_id: scheduler.get(ids[entry_id]))
        job = build_job(
            entry.type, args, plugins=plugins, label=entry.label, **entry.job_options(start)
        )
        job_id = scheduler.submit(
            job,
            delay=entry.delay,
            depends_on=[ids[d] for d in entry.depends_on],
            unique_key=entry.unique_key,
            key=entry.id if durable else None,
            trigger_rule=entry.trigger_rule,
        )
        ids[entry.id] = job_id
        # A restored job stands for its entry; a job with the same unique_key
        # stands for it without being it (not tracked twice).
        if job_id == job.job_id or (durable and scheduler.lookup(entry.id) == job_id):
            track(entry.id, entry.type, scheduler.get(job_id))

    loop = asyncio.get_running_loop()
    timers: list[asyncio.TimerHandle] = []
    schedules_done: list[asyncio.Event] = []
    for rec in jobfile.recurring:
        schedules_done.append(
            _schedule(scheduler, rec, plugins, start, track, timers, loop, durable=durable)
        )
    for entry in jobfile.jobs:
        if entry.cancel_after == 0:
            scheduler.cancel(ids[entry.id])

    if not durable:
        await scheduler.start()
    for entry in jobfile.jobs:
        if entry.cancel_after:
            timers.append(loop.call_later(entry.cancel_after, scheduler.cancel, ids[entry.id]))
    interrupted = False
    left_in_store: set[str] = set()  # job ids an interrupted durable run leaves unfinished
    try:
        finished = asyncio.ensure_future(_finish(scheduler, schedules_done))
        waiters: set[asyncio.Future[Any]] = {finished}
        if stop is not None:
            waiters.add(asyncio.ensure_future(stop.wait()))
        await asyncio.wait(waiters, return_when=asyncio.FIRST_COMPLETED)
        if not finished.done():
            interrupted = True
            finished.cancel()
        for waiter in waiters:
            if not waiter.done():
                waiter.cancel()
    finally:
        for timer in timers:
            timer.cancel()
        for schedule in scheduler.recurring():
            scheduler.cancel_recurring(schedule.schedule_id)
        if interrupted and durable:
            # Unfinished jobs stay in the store for the next run (running ones
            # end CANCELLED here but stay RUNNING there): not cancelled.
            left_in_store = {i for i, t in tracked.items() if not t.job.status.is_terminal}
        elif interrupted:
            for job_id in list(tracked):
                scheduler.cancel(job_id)
        await scheduler.stop(cancel_running=interrupted)
        progress.finished = True

    order = {entry.id: i for i, entry in enumerate([*jobfile.jobs, *jobfile.recurring])}
    names = {t.job.job_id: t.entry_id for t in tracked.values()}

    def readable(error: str | None) -> str | None:
        # The kernel names upstream jobs by job id; the file's reader knows its own ids.
        if error is None:
            return None
        return _JOB_ID.sub(
            lambda m: repr(names[m.group(0)]) if m.group(0) in names else m.group(0), error
        )

    rows = sorted(
        tracked.values(),
        key=lambda t: (order[t.recurring or t.entry_id], t.job.seq),
    )
    outcomes = [
        JobOutcome(
            id=t.entry_id,
            type=t.type,
            job_id=t.job.job_id,
            status=t.job.status,
            attempts=t.job.attempts,
            duration=(
                t.job.finished_at - t.first_start
                if t.first_start is not None and t.job.finished_at is not None
                else None
            ),
            result=t.job.result,
            error=readable(t.job.last_error),
            recurring=t.recurring,
            start_order=t.start_order,
            will_run_again=t.job.job_id in left_in_store,
        )
        for t in rows
    ]
    return RunResult(
        source=jobfile.source,
        strategy=settings.strategy,
        workers=settings.workers,
        outcomes=outcomes,
        elapsed=now() - start,
        peak_running=scheduler.peak_running,
        interrupted=interrupted,
    )


async def _finish(scheduler: JobScheduler, schedules_done: list[asyncio.Event]) -> None:
    # join() alone could return between two fires of a schedule: wait for the
    # schedules to end first, then for the last jobs.
    for done in schedules_done:
        await done.wait()
    await scheduler.join()


def _schedule(
    scheduler: JobScheduler,
    rec: RecurringEntry,
    plugins: PluginManager,
    start: float,
    track: Callable[[str, str, Job, str | None], None],
    timers: list[asyncio.TimerHandle],
    loop: asyncio.AbstractEventLoop,
    *,
    durable: bool = False,
) -> asyncio.Event:
    done = asyncio.Event()
    fired = 0
    schedule_id = ""
    if durable:
        # Runs fired before a restart are in the store under "<id>#<n>".
        while True:
            job_id = scheduler.lookup(f"{rec.id}#{fired + 1}")
            if job_id is None:
                break
            fired += 1
            with contextlib.suppress(UnknownJobError):  # out of the bounded history
                track(f"{rec.id}#{fired}", rec.type, scheduler.get(job_id), rec.id)

    def end() -> None:
        scheduler.cancel_recurring(schedule_id)
        done.set()

    def factory() -> Job:
        nonlocal fired
        fired += 1
        job = build_job(
            rec.type, rec.args, plugins=plugins, label=rec.label, **rec.job_options(start)
        )
        track(f"{rec.id}#{fired}", rec.type, job, rec.id)
        if rec.times is not None and fired >= rec.times:
            end()
        return job

    options: dict[str, Any] = {
        "allow_overlap": rec.allow_overlap,
        "misfire_grace_time": rec.misfire_grace_time,
        "coalesce": rec.coalesce,
        "jitter": rec.jitter,
        "name": rec.id,
        "key": rec.id if durable else None,
    }
    if rec.trigger is not None:
        schedule_id = scheduler.schedule_recurring(factory, trigger=rec.trigger, **options)
    else:
        schedule_id = scheduler.schedule_recurring(
            factory, rec.every, start_in=rec.start_in, **options
        )
    if schedule_id not in {s.schedule_id for s in scheduler.recurring()} or (
        rec.times is not None and fired >= rec.times
    ):
        end()  # it ended before the restart
        return done
    if rec.until is not None:
        timers.append(loop.call_later(rec.until, end))
    return done
