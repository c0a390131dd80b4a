"""`JournalBackend`: a durable store owned by one process (SQLite).

The kernel keeps its own queues; the journal keeps the store in step with
them. Every state change marks its job dirty (a plain callable on the
transition path), and one writer task turns the dirty set into a batch of rows
and writes it, one batch at a time, so a slow store makes batches bigger
instead of making the scheduler wait. The codec (`_codec.JobCodec`) turns jobs
into row data and back; `restore` rebuilds the kernel's queues and schedules
from the store's snapshot in ``start()``.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, cast

import attrs
import structlog

from .._codec import JobCodec
from .._errors import SchedulerError, UnknownJobError
from .._job import new_job_id, reserve_job_ids
from .._jobtypes import JobSpecError
from .._recurring import (
    IntervalTrigger,
    RecurringSchedule,
    build_trigger,
    reserve_schedule_ids,
)
from .._status import JobStatus
from .._submission import Submission
from .._trigger_rules import ALL_SUCCESS, Upstreams
from ..store import (
    JobRow,
    PurgeRow,
    ScheduleRow,
    Snapshot,
    Store,
    StoreContext,
    StoreError,
    check_snapshot,
    decode_result,
    encode_json,
    encode_result,
    new_worker_id,
)
from .local import LocalBackend

if TYPE_CHECKING:
    from .._clock import Clock
    from .._job import Job
    from .._plugins import PluginManager
    from ..kernel.port import KernelPort

logger = structlog.get_logger("jobsched.store")

COMPLETED = JobStatus.COMPLETED
RUNNING = JobStatus.RUNNING


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
    trigger_rule: str = ALL_SUCCESS


@attrs.define
class _ScheduleStatic:
    key: str | None
    template: str
    trigger: str


@attrs.define
class _Batch:
    rows: list[JobRow | ScheduleRow | PurgeRow]
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

    def __init__(self, kernel: KernelPort, store: Store, clock: Clock) -> None:
        self.kernel = kernel
        self.store = store
        self.codec = JobCodec(kernel.plugins)
        self._clock = clock
        self._dirty: dict[str, Job] = {}
        self._dirty_schedules: dict[str, RecurringSchedule] = {}
        self._purges: list[PurgeRow] = []
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
        trigger_rule: str = ALL_SUCCESS,
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
            options = f"{options[:-1]},{encode_json('unique_key')}:{encode_json(unique_key)}}}"
        if self.id_floor and job.status is JobStatus.PENDING and not job.attempts:
            number = _id_number(job.job_id)
            if 0 < number <= self.id_floor and self.kernel.find(job.job_id) is not job:
                job.job_id = new_job_id()
        if self.kernel.find(job.job_id) is not None:
            raise SchedulerError(f"{job.job_id} was already submitted")
        self._static[job.job_id] = _Static(
            key, type_name, args, options, tuple(sorted(deps)) if deps else (), None, trigger_rule
        )
        self.mark(job)

    def forget(self, job: Job) -> None:
        """Undo `admit` for a job the kernel refused after all."""
        if self.kernel.find(job.job_id) is not job:
            self._static.pop(job.job_id, None)
            self._dirty.pop(job.job_id, None)

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
                f'{{"type":{encode_json(static.type)},'
                f'"args":{static.args},"options":{static.options}}}'
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
            trigger = encode_json(description)
        except (TypeError, ValueError) as exc:
            raise JobSpecError(f"the trigger {spec!r} is not JSON: {exc}") from None
        self._schedule_static[sched.schedule_id] = _ScheduleStatic(key, "", trigger)
        self.mark_schedule(sched)

    def finished(self, job_id: str, status: JobStatus) -> None:
        """Hold the release of `job_id`'s dependents until its state is committed."""
        if self._interrupted and job_id in self._interrupted:
            return  # its dependents wait for the run after the restart
        self._held[job_id] = status

    def interrupt(self, job: Job) -> None:
        """This running job is being torn down by a shutdown, not cancelled.

        Nothing more is recorded about it: the store keeps it RUNNING, so the
        next start runs it again, exactly as after a crash.
        """
        self._interrupted.setdefault(job.job_id, job.last_error)

    def retried(self, job: Job) -> None:
        """A terminal job runs again: keep writing its row (`Operations.retry_job`)."""
        if job.job_id in self._static:
            return  # its terminal state is not written yet: what is known stays
        type_name, args, options = self.codec.describe(job, self._offset())
        # Its stored row keeps what never changes (an update leaves type,
        # arguments and dependencies alone); the static part serves new stores.
        self._static[job.job_id] = _Static(
            self.kernel.key_of(job.job_id), type_name, args, options, ()
        )

    def results_expired(self, jobs: Iterable[Job]) -> None:
        """Write these completed jobs again, their results dropped (`Operations.expire_results`).

        A terminal job's row is never written otherwise, so its static part
        is described again, as for `retried`; the store's upsert leaves what
        never changes alone.
        """
        offset = self._offset()
        for job in jobs:
            if job.job_id not in self._static:
                try:
                    type_name, args, options = self.codec.describe(job, offset)
                except JobSpecError as exc:
                    # Every stored job was described once; should one no longer
                    # be, its row keeps the result, and the reaper goes on.
                    logger.warning(
                        "expired result kept in the store",
                        store=self.store.url,
                        job_id=job.job_id,
                        error=str(exc),
                    )
                    continue
                self._static[job.job_id] = _Static(
                    self.kernel.key_of(job.job_id), type_name, args, options, ()
                )
            self.mark(job)

    def purge(
        self,
        before: float,
        statuses: Iterable[JobStatus],
        job_ids: tuple[str, ...] | None = None,
    ) -> None:
        """Delete finished jobs from the store with the next batch (see
        `PurgeRow`; `job_ids`: those alone)."""
        self._purges.append(
            PurgeRow(
                before=before + self._offset(),
                statuses=tuple(s.value for s in statuses),
                job_ids=job_ids,
            )
        )
        if not self._woken:
            self._woken = True
            self._wake.set()  # type: ignore[union-attr]

    def discard_changes(self) -> None:
        """Forget every change not written yet (a restore that failed half-way)."""
        self._dirty.clear()
        self._dirty_schedules.clear()

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
                row.key,
                row.type,
                row.args,
                row.options,
                tuple(row.depends_on),
                row.schedule_id,
                row.trigger_rule,
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
        if self._dirty or self._dirty_schedules or self._held or self._purges:
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
        rows: list[JobRow | ScheduleRow | PurgeRow] = []
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
                    # A completed job's record has no error (a retried one's
                    # Job keeps its last failure, as the reference design's).
                    None if status is COMPLETED else last_error,
                    s.schedule_id,
                    s.trigger_rule,
                    None if status is COMPLETED else job.last_traceback,
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
                    paused=sched.paused,
                )
            )
        if self._purges:
            rows.extend(self._purges)
            self._purges = []
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
        self._purges[:0] = [row for row in batch.rows if type(row) is PurgeRow]

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
            if not (self._dirty or self._dirty_schedules or self._held or self._purges):
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
                if job.status.is_terminal and job_id not in self._dirty:
                    static.pop(job_id, None)  # a terminal row is never written again
            if batch.finished:
                self.kernel.release_committed(batch.finished)
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


# ── the backend ────────────────────────────────────────────────────────
class JournalBackend(LocalBackend):
    """A durable store owned by this process: the kernel's queues, journaled.

    Submits made before ``start()`` are checked and deferred: ``start()``
    restores the stored jobs first (their ids, keys and dependencies), then
    accepts them in submit order.
    """

    def __init__(self, store: Store) -> None:
        super().__init__(store)
        self.store: Store = store
        self._journal: Journal | None = None
        # Submits made before start(), accepted once the store is restored.
        self._deferred: list[Submission] = []

    @property
    def journal(self) -> Journal:
        assert self._journal is not None, "the backend is not bound to a kernel yet"
        return self._journal

    def bind(self, kernel: KernelPort) -> None:
        super().bind(kernel)
        journal = self._journal = Journal(kernel, self.store, kernel.clock)
        # Marking dirty rides on the transition listeners: no new branch there.
        self.listener = journal.mark
        self.admit = self._admit
        self.finished = journal.finished

    def _admit(
        self,
        job: Job,
        delay: float,
        depends_on: Sequence[str],
        key: str | None,
        unique_key: str | None,
        trigger_rule: str = ALL_SUCCESS,
    ) -> str | None:
        journal = self.journal
        if not journal.opened:
            return self._defer(job, delay, depends_on, unique_key, key, trigger_rule)
        # Refuses a job that cannot be stored as data; may renumber a job
        # built before the store's ids were known.
        journal.admit(job, key, depends_on, unique_key, trigger_rule)
        return None

    def _defer(
        self,
        job: Job,
        delay: float,
        depends_on: Sequence[str],
        unique_key: str | None,
        key: str | None,
        trigger_rule: str = ALL_SUCCESS,
    ) -> str:
        """A submit before `start()`: accepted once the store is restored.

        What can be checked now is: the job must be storable as data, its
        dependencies submitted, its arguments valid.
        """
        if any(d.job is job for d in self._deferred):
            raise SchedulerError(f"{job.job_id} was already submitted")
        self.journal.codec.describe(job, 0.0)  # raises if it is not data
        known = {d.job.job_id for d in self._deferred}
        unknown = sorted(d for d in depends_on if d not in known)
        if unknown:
            raise UnknownJobError(f"{job.job_id}: unknown dependencies: {unknown}")
        self._deferred.append(
            Submission(
                job,
                delay=delay,
                depends_on=tuple(depends_on),
                key=key,
                unique_key=unique_key,
                trigger_rule=trigger_rule,
            )
        )
        return job.job_id

    def _submit_deferred(self) -> None:
        # In submit order. A job may get a new id if a restored job has its
        # id (job.job_id is updated); dependencies follow the renaming.
        renamed: dict[str, str] = {}
        deferred, self._deferred = self._deferred, []
        for item in deferred:
            job = item.job
            old_id = job.job_id
            # A submit names its dependencies by id (`_defer`).
            deps = cast("Sequence[str]", item.depends_on)
            new_id = self.kernel.submit(
                job,
                delay=item.delay,
                depends_on=tuple(renamed.get(d, d) for d in deps),
                unique_key=item.unique_key,
                key=item.key,
                trigger_rule=item.trigger_rule,
            )
            if new_id != old_id:
                renamed[old_id] = new_id

    def refused(self, job: Job) -> None:
        self.journal.forget(job)

    def interrupted(self, job: Job) -> bool:
        self.journal.interrupt(job)
        return True  # the file keeps it running: the next start runs it again

    def retried(self, job: Job) -> None:
        self.journal.retried(job)

    def purged(
        self,
        job_ids: Sequence[str],
        before: float,
        statuses: Sequence[JobStatus],
        *,
        exact: bool = False,
    ) -> None:
        self.journal.purge(before, statuses, tuple(job_ids) if exact else None)

    def results_expired(self, jobs: Sequence[Job]) -> None:
        self.journal.results_expired(jobs)

    def schedule_added(self, sched: RecurringSchedule, spec: Any, key: str | None) -> None:
        self.journal.admit_schedule(sched, spec, key)

    def schedule_changed(self, sched: RecurringSchedule) -> None:
        self.journal.mark_schedule(sched)

    def schedule_fired(self, sched: RecurringSchedule, job_id: str) -> None:
        self.journal.tag_schedule(job_id, sched.schedule_id)

    async def open(self) -> None:
        """Open the store, restore what it holds, then accept the deferred submits.

        Every row is checked before anything is restored: a row that cannot
        be rebuilt (changed by hand, its job type is gone, its arguments no
        longer fit) fails ``start()`` with a `StoreError` naming the store,
        the job and the problem, and the store is closed untouched.
        """
        journal = self.journal
        snapshot = await journal.open(StoreContext(worker_id=new_worker_id()))
        try:
            check_snapshot(self.store.url, snapshot)
            restore(self.kernel, journal, snapshot)
        except BaseException:
            # Nothing was written: the writer only writes what is marked dirty,
            # and a failed restore marks nothing before it raises.
            journal.discard_changes()
            await journal.close()
            raise
        self._submit_deferred()

    async def close(self) -> BaseException | None:
        return await self.journal.close()  # writes what is still dirty

    async def flush(self) -> None:
        await self.journal.flush()


# ── restore: the kernel's queues and schedules from a snapshot ─────────
def restore(kernel: KernelPort, journal: Journal, snapshot: Snapshot) -> None:
    """Rebuild `kernel`'s jobs, queues and schedules from what the store holds."""
    codec = journal.codec
    clock = kernel.clock
    offset = clock.time() - clock.now()
    url = journal.store.url
    rows = sorted(snapshot.jobs, key=lambda r: r.seq)
    by_id = {row.job_id: row for row in rows}
    history_limit = kernel.history_limit
    terminal_rows = [r for r in rows if JobStatus(r.status).is_terminal]
    keep_history = {r.job_id for r in terminal_rows[len(terminal_rows) - history_limit :]}
    if history_limit == 0:
        keep_history = set()

    # 1. Build every job first, so a bad row fails start() with nothing changed.
    built: list[tuple[JobRow, Job, str | None]] = []
    for row in rows:
        terminal = JobStatus(row.status).is_terminal
        if terminal and row.job_id not in keep_history:
            continue
        try:
            options = json.loads(row.options)
            unique_key = options.pop("unique_key", None)
            job = codec.build(
                row.type,
                json.loads(row.args),
                options,
                offset,
                f"job {row.job_id}",
            )
        except (JobSpecError, ValueError) as exc:
            if terminal:
                continue  # history only: never runs again, so it need not be rebuilt
            raise StoreError(
                f"{url}: job {row.job_id} ({row.status}) cannot be restored: {exc}. "
                "The store was left unchanged."
            ) from None
        built.append((row, job, None if terminal else unique_key))
    schedules = []
    ended: list[ScheduleRow] = []
    for srow in snapshot.schedules:
        if not srow.active:
            if srow.key is not None:
                # An ended schedule's key still resolves: scheduling it again
                # must not start it over.
                ended.append(srow)
            continue
        try:
            template = json.loads(srow.template) if srow.template else None
            described = json.loads(srow.trigger)
            trigger = _build_trigger(described["trigger"], kernel.plugins)
            if trigger.timebase != described["timebase"]:
                raise JobSpecError(
                    f"its trigger now counts {trigger.timebase} time, not "
                    f"{described['timebase']} time as when it was stored"
                )
            if template is not None:
                # Build one job now: a broken template fails start(), not a timer later.
                codec.build(
                    template["type"],
                    template["args"],
                    template["options"],
                    offset,
                    f"schedule {srow.schedule_id}",
                )
        except (SchedulerError, ValueError, KeyError, TypeError) as exc:
            raise StoreError(
                f"{url}: recurring schedule {srow.schedule_id} cannot be restored: {exc}. "
                "The store was left unchanged."
            ) from None
        schedules.append((srow, template, described, trigger))

    # 2. Install them: ids, statuses and times exactly as stored. Upstreams
    # come first (lower seq), so a dependent sees its upstream's restored state.
    cascade: list[tuple[Job, str]] = []
    for row, job, unique_key in built:
        job.job_id = row.job_id
        status = JobStatus(row.status)
        interrupted = status is JobStatus.RUNNING
        if interrupted:
            status = JobStatus.PENDING  # at-least-once: it runs again
        job.status = status
        job.attempts = row.attempts
        job.last_error = row.last_error
        job.last_traceback = row.last_traceback
        job.seq = row.seq
        job.submitted_at = row.submitted_at - offset
        job.run_at = row.run_at - offset
        if row.finished_at is not None:
            job.finished_at = row.finished_at - offset
        if row.result is not None:
            job.result = decode_result(row.result)
        unmet: set[str] = set()
        if not status.is_terminal and row.trigger_rule != ALL_SUCCESS:
            cancelled = _unmet_by_rule(row, by_id, unmet)
            if cancelled is not None:
                cascade.append((job, cancelled))
        elif not status.is_terminal:
            failed_upstream = None
            for dep in row.depends_on:
                dep_row = by_id.get(dep)
                dep_status = JobStatus(dep_row.status) if dep_row is not None else None
                if dep_status is COMPLETED:
                    continue
                if dep_status is None:
                    failed_upstream = f"upstream {dep} is missing from the store"
                elif dep_status.is_terminal:
                    failed_upstream = f"upstream {dep} {dep_status.value}"
                unmet.add(dep)
            if failed_upstream is not None:
                cascade.append((job, failed_upstream))
        journal.restored(row)
        kernel.restore(
            job,
            key=row.key,
            unique_key=unique_key,
            unmet=unmet,
            depends_on=row.depends_on,
            trigger_rule=row.trigger_rule,
        )
        if interrupted:
            journal.mark(job)  # the store says RUNNING; say PENDING until it runs
    # Ids of history that was not rebuilt are still taken. Its keys are not
    # known: a key is known as long as its job is (see JobScheduler.submit).
    for row in rows:
        journal.id_floor = max(journal.id_floor, _id_number(row.job_id))
    reserve_job_ids(journal.id_floor)
    for job, error in cascade:
        kernel.cancel_restored(job, error)

    # 3. Schedules resume from their stored next fire time, on their trigger's
    # grid: fires missed while the process was down come due at once, and the
    # schedule's coalesce policy folds them (one run, by default).
    for srow in ended:
        kernel.restore_schedule(None, srow.schedule_id, srow.key)
    for srow, template, described, trigger in schedules:
        first = srow.next_run if trigger.timebase == "wall" else srow.next_run - offset
        sched = RecurringSchedule(
            _template_factory(codec, template, offset, f"schedule {srow.schedule_id}"),
            None,
            first,
            srow.allow_overlap,
            trigger=trigger,
            misfire_grace_time=described.get("misfire_grace_time"),
            coalesce=described.get("coalesce", "one"),
            jitter=described.get("jitter", 0.0),
            name=described.get("name"),
        )
        sched.schedule_id = srow.schedule_id
        sched.last_job_id = srow.last_job_id
        if srow.last_job_id is not None:
            sched.recent.append(srow.last_job_id)
        sched.fired = srow.fired
        sched.skipped = srow.skipped
        # The kernel arms only unpaused schedules at start; `resume_schedule`
        # then fires at the next period after now, as for one paused in memory.
        sched.paused = srow.paused
        kernel.restore_schedule(sched, sched.schedule_id, srow.key)
        journal.restored_schedule(srow)
    floor = max((schedule_number(s.schedule_id) for s in snapshot.schedules), default=0)
    reserve_schedule_ids(floor)


def _unmet_by_rule(row: JobRow, by_id: Mapping[str, JobRow], unmet: set[str]) -> str | None:
    """Settle a restored job's ended upstreams by its trigger rule, as the
    kernel would have: fills `unmet` with the ones it still waits for (none
    once the rule released it) and returns why it is cancelled, or None.

    Each rule's decision only grows more certain as upstreams end, so
    settling them all again after a restart decides as the kernel did.
    """
    deps = sorted(set(row.depends_on))
    missing = [d for d in deps if d not in by_id]
    if missing:
        return f"upstream {missing[0]} is missing from the store"
    upstreams = Upstreams(row.trigger_rule, len(deps))
    for dep in deps:
        dep_status = JobStatus(by_id[dep].status)
        if not dep_status.is_terminal:
            unmet.add(dep)
            continue
        run, reason = upstreams.settle(dep, dep_status)
        if run is False:
            unmet.clear()
            return reason
        if run:
            unmet.clear()
            return None
    return None


def _build_trigger(spec: Any, plugins: PluginManager) -> Any:
    """A trigger from its stored mapping, through the trigger plugins."""
    if not isinstance(spec, dict):
        raise JobSpecError(f"a stored trigger must be a mapping, got {spec!r}")
    if set(spec) == {"interval"}:
        return IntervalTrigger(spec["interval"])  # the kernel's own: no plugin needed
    return build_trigger(spec, lambda name: plugins.resolve("triggers", name))


def _template_factory(
    codec: JobCodec, template: Mapping[str, Any] | None, offset: float, label: str
) -> Callable[[], Job]:
    if template is None:

        def unknown() -> Job:
            raise JobSpecError(
                f"{label} was stored before it first fired, so the job it fires is not "
                "known; schedule it again with its key to give it a factory"
            )

        return unknown
    type_name, args, options = template["type"], template["args"], template["options"]

    def factory() -> Job:
        return codec.build(type_name, args, options, offset, f"job of {label}")

    return factory


def schedule_number(schedule_id: str) -> int:
    """N for a kernel schedule id ``sched-N``, else 0."""
    prefix, _, number = schedule_id.partition("-")
    return int(number) if prefix == "sched" and number.isdigit() else 0
