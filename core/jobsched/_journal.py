"""The journal: batching a scheduler's state changes into store writes.

Every state change marks its job dirty (a plain callable on the transition
path), and one writer task turns the dirty set into a batch of rows and writes
it, one batch at a time, so a slow store makes batches bigger instead of making
the scheduler wait. The codec (`_codec.JobCodec`) turns jobs into row data.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

import attrs
import structlog

from ._codec import JobCodec, encode_result
from ._errors import SchedulerError
from ._jobtypes import JobSpecError
from ._status import JobStatus
from .store import JobRow, ScheduleRow, Snapshot, Store, StoreContext, StoreError

if TYPE_CHECKING:
    from ._clock import Clock
    from ._job import Job
    from ._recurring import RecurringSchedule
    from ._scheduler import JobScheduler

logger = structlog.get_logger("jobsched.store")

COMPLETED = JobStatus.COMPLETED
RUNNING = JobStatus.RUNNING


# One encoder for everything: json.dumps with options builds a new one per call.
_encode = json.JSONEncoder(allow_nan=False, separators=(",", ":")).encode


# ── the journal: batching state changes into store writes ──────────────
@attrs.define
class _Static:
    """What never changes after submit, encoded once."""

    key: str | None
    type: str
    args: str
    options: str
    depends_on: tuple[str, ...]
    schedule_id: str | None = None


@attrs.define
class _ScheduleStatic:
    key: str | None
    template: str
    trigger: str


@attrs.define
class _Batch:
    rows: list[JobRow | ScheduleRow]
    jobs: dict[str, Job]
    schedules: dict[str, RecurringSchedule]
    finished: dict[str, JobStatus]
    generation: int


class Journal:
    """Marks jobs dirty, batches them, and writes the batches in order.

    Owned by the scheduler's loop thread. `mark` is compiled into the
    transition path (it is a listener), so it must stay a dict insert. One
    writer task takes everything dirty, serializes it on the loop (the state
    *now*, so a job that changed three times since the last batch is one row),
    and awaits `Store.write`; changes made meanwhile accumulate in the next
    batch (back-pressure without blocking).

    Durable before visible: a job that finished is *held* until the batch
    holding its terminal state is committed; only then does the scheduler
    release (or cancel) its dependents.
    """

    def __init__(self, scheduler: JobScheduler, store: Store, clock: Clock) -> None:
        self.scheduler = scheduler
        self.store = store
        self.codec = JobCodec(scheduler.plugins)
        self._clock = clock
        self._dirty: dict[str, Job] = {}
        self._dirty_schedules: dict[str, RecurringSchedule] = {}
        self._static: dict[str, _Static] = {}
        self._schedule_static: dict[str, _ScheduleStatic] = {}
        self._held: dict[str, JobStatus] = {}  # finished, terminal state not yet taken
        # Torn down by stop(): left RUNNING in the store; job id -> its last error then.
        self._interrupted: dict[str, str | None] = {}
        self._inflight: _Batch | None = None
        self._woken = False
        self._wake: asyncio.Event | None = None
        self._closing: asyncio.Event | None = None
        self._task: asyncio.Task[None] | None = None
        self._generation = 0  # batches taken
        self._committed = 0  # generation of the last committed batch
        self._waiters: list[tuple[int, asyncio.Future[None]]] = []
        self.id_floor = 0  # job ids job-1..job-<floor> exist in the store
        self.opened = False
        self.error: StoreError | None = None

    # ── called by the kernel ───────────────────────────────────────────
    def mark(self, job: Job, old: object = None, new: object = None) -> None:
        """Note that `job` changed; it is written with the next batch."""
        if self._interrupted and job.job_id in self._interrupted:
            return
        self._dirty[job.job_id] = job
        if not self._woken:
            self._woken = True
            self._wake.set()  # type: ignore[union-attr]

    def mark_schedule(self, sched: RecurringSchedule) -> None:
        self._dirty_schedules[sched.schedule_id] = sched
        if not self._woken:
            self._woken = True
            self._wake.set()  # type: ignore[union-attr]

    def admit(
        self,
        job: Job,
        key: str | None,
        deps: Iterable[str] | None,
        unique_key: str | None = None,
    ) -> None:
        """Check a job can be stored, before the kernel accepts it.

        Raises `JobSpecError` if it cannot be described as data. A job built
        before the store was opened may carry an id a restored job already
        has; it gets a fresh id here (submit returns the id).
        """
        # The scheduler defers submits made before the store is opened.
        assert self.opened, "admit() before the store was opened"
        type_name, args, options = self.codec.describe(job, self._offset())
        if unique_key is not None:
            # Kept with the options (never "{}": the name is always there), so
            # the dedupe survives a restart while the job is unfinished.
            options = f"{options[:-1]},{_encode('unique_key')}:{_encode(unique_key)}}}"
        if self.id_floor and job.status is JobStatus.PENDING and not job.attempts:
            number = _id_number(job.job_id)
            if 0 < number <= self.id_floor and self.scheduler._jobs.get(job.job_id) is not job:
                from ._job import new_job_id

                job.job_id = new_job_id()
        self._static[job.job_id] = _Static(
            key, type_name, args, options, tuple(sorted(deps)) if deps else ()
        )

    def forget(self, job: Job) -> None:
        """Undo `admit` for a job the kernel refused after all."""
        self._static.pop(job.job_id, None)

    def tag_schedule(self, job_id: str, schedule_id: str) -> None:
        """`job_id` was fired by `schedule_id`: it becomes the schedule's template.

        The template is what a restored schedule fires when nobody schedules
        it again; taking it from the jobs actually fired means the factory is
        never called just to look at its job.
        """
        static = self._static.get(job_id)
        if static is None:
            return
        static.schedule_id = schedule_id
        sstatic = self._schedule_static.get(schedule_id)
        if sstatic is not None:
            sstatic.template = (
                f'{{"type":{_encode(static.type)},"args":{static.args},"options":{static.options}}}'
            )

    def admit_schedule(
        self, sched: RecurringSchedule, spec: Mapping[str, Any] | object, key: str | None
    ) -> None:
        """Start keeping a new schedule (its template comes with its first fire).

        `spec` is how the trigger was given: ``{"interval": seconds}``, a
        job-file style mapping (``{"cron": "0 2 * * *", "tz": ...}``), or a
        trigger object, which cannot be stored (only its mapping can).
        """
        if not self.opened:
            raise SchedulerError(
                f"start() the scheduler before scheduling: with a durable store "
                f"({self.store.url}) start() restores the stored schedules first"
            )
        if not isinstance(spec, Mapping):
            raise JobSpecError(
                f"a durable store keeps schedules as data, and the trigger {spec!r} is an "
                "object: give it as a mapping such as {'cron': '0 2 * * *', 'tz': 'UTC'}"
            )
        description = {
            "trigger": dict(spec),
            "timebase": sched.trigger.timebase,
            "misfire_grace_time": sched.misfire_grace_time,
            "coalesce": sched.coalesce,
            "jitter": sched.jitter,
            "name": sched.name,
        }
        try:
            trigger = _encode(description)
        except (TypeError, ValueError) as exc:
            raise JobSpecError(f"the trigger {spec!r} is not JSON: {exc}") from None
        self._schedule_static[sched.schedule_id] = _ScheduleStatic(key, "", trigger)
        self.mark_schedule(sched)

    def finished(self, job_id: str, status: JobStatus) -> None:
        """Hold the release of `job_id`'s dependents until its state is committed."""
        if self._interrupted and job_id in self._interrupted:
            return  # its dependents wait for the run after the restart
        self._held[job_id] = status

    def interrupt(self, job_ids: Iterable[str]) -> None:
        """These running jobs are being torn down by a shutdown, not cancelled.

        Nothing more is recorded about them: the store keeps them RUNNING, so
        the next start runs them again, exactly as after a crash.
        """
        jobs = self.scheduler._jobs
        for job_id in job_ids:
            self._interrupted[job_id] = jobs[job_id].last_error

    def uncommitted(self, job_ids: Iterable[str]) -> set[str]:
        """Which of these finished jobs' terminal states are not committed yet."""
        inflight = self._inflight.finished if self._inflight is not None else {}
        return {j for j in job_ids if j in self._held or j in inflight}

    # ── lifecycle ──────────────────────────────────────────────────────
    async def open(self, context: StoreContext) -> Snapshot:
        self._wake = asyncio.Event()
        self._closing = asyncio.Event()
        snapshot = await self.store.open(context)
        self.opened = True
        self._task = asyncio.get_running_loop().create_task(
            self._writer(), name="jobsched-store-writer"
        )
        return snapshot

    def restored(self, row: JobRow) -> None:
        """Remember the static part of a job loaded from the store."""
        if not JobStatus(row.status).is_terminal:
            self._static[row.job_id] = _Static(
                row.key, row.type, row.args, row.options, tuple(row.depends_on), row.schedule_id
            )
        self.id_floor = max(self.id_floor, _id_number(row.job_id))

    def restored_schedule(self, row: ScheduleRow) -> None:
        self._schedule_static[row.schedule_id] = _ScheduleStatic(row.key, row.template, row.trigger)

    async def flush(self) -> None:
        """Return once every change made so far is committed.

        Raises the `StoreError` of a write that fails meanwhile (the writer
        keeps retrying it in the background).
        """
        if self._task is None:
            return
        if self._dirty or self._dirty_schedules or self._held:
            target = self._generation + 1
        elif self._inflight is not None:
            target = self._generation
        else:
            return
        future = asyncio.get_running_loop().create_future()
        self._waiters.append((target, future))
        await future

    async def close(self) -> StoreError | None:
        """Write everything still dirty, stop the writer, close the store.

        Returns the error of a final write that failed (the store then holds
        the last committed state), else None.
        """
        if self._task is None:
            return None
        self._closing.set()  # type: ignore[union-attr]
        self._wake.set()  # type: ignore[union-attr]
        await self._task
        self._task = None
        error = self.error
        try:
            await self.store.close()
        except Exception as exc:
            error = error or _as_store_error(self.store, exc, "close")
        return error

    # ── the writer task ────────────────────────────────────────────────
    def _offset(self) -> float:
        """Add to a monotonic time to get wall-clock time."""
        return self._clock.time() - self._clock.now()

    def _take(self) -> _Batch:
        dirty, self._dirty = self._dirty, {}
        schedules, self._dirty_schedules = self._dirty_schedules, {}
        finished, self._held = self._held, {}
        offset = self._offset()
        rows: list[JobRow | ScheduleRow] = []
        static = self._static
        interrupted = self._interrupted
        for job_id, job in dirty.items():
            s = static[job_id]
            status = job.status
            finished_at = job.finished_at
            last_error = job.last_error
            if interrupted and job_id in interrupted:
                # Torn down by a shutdown: stored as it was when it was interrupted.
                status, finished_at, last_error = RUNNING, None, interrupted[job_id]
            rows.append(
                JobRow(  # positional: see JobRow
                    job_id,
                    s.type,
                    status.value,
                    job.run_at + offset,
                    job.submitted_at + offset,
                    job.seq,
                    s.key,
                    s.args,
                    s.options,
                    s.depends_on,
                    job.attempts,
                    None if finished_at is None else finished_at + offset,
                    encode_result(job.result) if status is COMPLETED else None,
                    last_error,
                    s.schedule_id,
                )
            )
        for schedule_id, sched in schedules.items():
            ss = self._schedule_static[schedule_id]
            fire = sched.next_fire
            if fire is not None and not sched.wall_clock:
                fire += offset
            rows.append(
                ScheduleRow(
                    schedule_id=schedule_id,
                    key=ss.key,
                    template=ss.template,
                    trigger=ss.trigger,
                    next_run=0.0 if fire is None else fire,
                    allow_overlap=sched.allow_overlap,
                    active=sched.active and fire is not None,
                    last_job_id=sched.last_job_id,
                    fired=sched.fired,
                    skipped=sched.skipped,
                )
            )
        self._generation += 1
        return _Batch(rows, dirty, schedules, finished, self._generation)

    def _requeue(self, batch: _Batch) -> None:
        # Newer marks win: the batch's jobs are serialized again from their
        # current state, so merging only restores membership.
        batch.jobs.update(self._dirty)
        self._dirty = batch.jobs
        batch.schedules.update(self._dirty_schedules)
        self._dirty_schedules = batch.schedules
        batch.finished.update(self._held)
        self._held = batch.finished

    def _settle_waiters(self, error: BaseException | None = None) -> None:
        keep = []
        for target, future in self._waiters:
            if future.done():
                continue
            if error is not None:
                future.set_exception(error)
            elif target <= self._committed:
                future.set_result(None)
            else:
                keep.append((target, future))
        self._waiters = keep

    async def _writer(self) -> None:
        wake, closing = self._wake, self._closing
        assert wake is not None and closing is not None
        backoff = 0.0
        while True:
            if not (self._dirty or self._dirty_schedules or self._held):
                self._settle_waiters()
                if closing.is_set():
                    return
                self._woken = False
                wake.clear()
                await wake.wait()
                continue
            # Let the tasks woken by the same burst run first: a job submitted,
            # run and finished in one burst becomes one row instead of three.
            await asyncio.sleep(0)
            batch = self._inflight = self._take()
            try:
                await self.store.write(batch.rows)
            except Exception as exc:
                self._inflight = None
                self._requeue(batch)
                self.error = _as_store_error(self.store, exc, f"write {len(batch.rows)} rows")
                # Whoever waits in flush() learns now; the writer keeps retrying.
                self._settle_waiters(self.error)
                if closing.is_set():
                    return
                backoff = min(max(backoff * 2, 0.05), 5.0)
                logger.error(
                    "store write failed; retrying",
                    store=self.store.url,
                    error=str(self.error),
                    retry_in=backoff,
                )
                with contextlib.suppress(asyncio.TimeoutError):
                    await asyncio.wait_for(closing.wait(), backoff)
                continue
            self._inflight = None
            self.error = None
            backoff = 0.0
            self._committed = batch.generation
            static = self._static
            for job_id, job in batch.jobs.items():
                if job.status._terminal and job_id not in self._dirty:
                    static.pop(job_id, None)  # a terminal row is never written again
            if batch.finished:
                self.scheduler._release_committed(batch.finished)
            self._settle_waiters()


def _as_store_error(store: Store, exc: BaseException, what: str) -> StoreError:
    if isinstance(exc, StoreError):
        return exc
    return StoreError(f"{store.url}: could not {what}: {type(exc).__name__}: {exc}")


def _id_number(job_id: str) -> int:
    """N for a kernel id ``job-N``, else 0."""
    prefix, _, number = job_id.partition("-")
    if prefix == "job" and number.isdigit():
        return int(number)
    return 0
