"""Restore: rebuilding a scheduler's queues and schedules from a store's snapshot."""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from ._codec import JobCodec, decode_result
from ._errors import SchedulerError
from ._jobtypes import JobSpecError
from ._journal import Journal, _id_number
from ._status import JobStatus
from .store import JobRow, Snapshot, StoreContext, StoreError, check_snapshot, new_worker_id

if TYPE_CHECKING:
    from ._job import Job
    from ._scheduler import JobScheduler

COMPLETED = JobStatus.COMPLETED
RUNNING = JobStatus.RUNNING


async def open_store(scheduler: JobScheduler) -> None:
    """Open the scheduler's store and restore what it holds.

    Every row is checked before anything is restored: a row that cannot be
    rebuilt (changed by hand, its job type is gone, its arguments no longer fit) fails
    ``start()`` with a `StoreError` naming the store, the job and the problem,
    and the store is closed untouched.
    """
    store = scheduler.store
    assert store is not None
    journal = scheduler._journal
    context = StoreContext(worker_id=new_worker_id())
    if journal is None:
        await store.open(context)
        return
    snapshot = await journal.open(context)
    try:
        check_snapshot(store.url, snapshot)
        _restore(scheduler, journal, snapshot)
    except BaseException:
        # Nothing was written: the writer only writes what is marked dirty,
        # and a failed restore marks nothing before it raises.
        journal._dirty.clear()
        journal._dirty_schedules.clear()
        await journal.close()
        raise


def _restore(scheduler: JobScheduler, journal: Journal, snapshot: Snapshot) -> None:
    from ._recurring import RecurringSchedule

    codec = journal.codec
    clock = scheduler._clock
    offset = clock.time() - clock.now()
    url = journal.store.url
    rows = sorted(snapshot.jobs, key=lambda r: r.seq)
    by_id = {row.job_id: row for row in rows}
    history_limit = scheduler._history_limit
    terminal_rows = [r for r in rows if JobStatus(r.status).is_terminal]
    keep_history = {r.job_id for r in terminal_rows[len(terminal_rows) - history_limit :]}
    if history_limit == 0:
        keep_history = set()

    # 1. Build every job first, so a bad row fails start() with nothing changed.
    built: list[tuple[JobRow, Job]] = []
    unique_keys: dict[str, str] = {}
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
            if unique_key is not None and not terminal:
                unique_keys[row.job_id] = unique_key
        except (JobSpecError, ValueError) as exc:
            if terminal:
                continue  # history only: never runs again, so it need not be rebuilt
            raise StoreError(
                f"{url}: job {row.job_id} ({row.status}) cannot be restored: {exc}. "
                "The store was left unchanged."
            ) from None
        built.append((row, job))
    schedules = []
    for srow in snapshot.schedules:
        if not srow.active:
            if srow.key is not None:
                # An ended schedule's key still resolves: scheduling it again
                # must not start it over.
                scheduler._schedule_keys[srow.key] = srow.schedule_id
            continue
        try:
            template = json.loads(srow.template) if srow.template else None
            described = json.loads(srow.trigger)
            trigger = _build_trigger(described["trigger"], scheduler)
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

    # 2. Install them: ids, statuses and times exactly as stored.
    jobs = scheduler._jobs
    seq = scheduler._seq
    for row, job in built:
        job.job_id = row.job_id
        status = JobStatus(row.status)
        interrupted = status is JobStatus.RUNNING
        if interrupted:
            status = JobStatus.PENDING  # at-least-once: it runs again
        job.status = status
        job.attempts = row.attempts
        job.last_error = row.last_error
        job.seq = row.seq
        job.submitted_at = row.submitted_at - offset
        job.run_at = row.run_at - offset
        if row.finished_at is not None:
            job.finished_at = row.finished_at - offset
        if row.result is not None:
            job.result = decode_result(row.result)
        jobs[row.job_id] = job
        if row.key is not None and row.key not in scheduler._keys:
            scheduler._keys[row.key] = row.job_id
            scheduler._key_of[row.job_id] = row.key
        unique_key = unique_keys.get(row.job_id)
        if unique_key is not None:
            scheduler._unique[unique_key] = row.job_id
            scheduler._unique_of[row.job_id] = unique_key
        seq = max(seq, row.seq + 1)
        journal.restored(row)
        if interrupted:
            journal.mark(job)  # the store says RUNNING; say PENDING until it runs
        if status.is_terminal:
            scheduler._remember_finished(row.job_id)
    # Ids of history that was not rebuilt are still taken. Its keys are not
    # known: a key is known as long as its job is (see JobScheduler.submit).
    for row in rows:
        journal.id_floor = max(journal.id_floor, _id_number(row.job_id))
    scheduler._seq = seq
    from ._job import reserve_job_ids

    reserve_job_ids(journal.id_floor)

    # 3. Queues and dependencies. Upstreams come first (lower seq), so a
    # dependent sees its upstream's restored state.
    cascade: list[tuple[Job, str]] = []
    for row, job in built:
        if job.status.is_terminal:
            continue
        scheduler._unfinished += 1
        scheduler._idle.clear()
        unmet = set()
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
        if unmet:
            scheduler._blocked[row.job_id] = unmet
            for dep in unmet:
                scheduler._dependents.setdefault(dep, []).append(row.job_id)
            continue
        scheduler._enqueue(job)
    for job, error in cascade:
        scheduler._finish(job, JobStatus.CANCELLED, error=error)

    # 4. Schedules resume from their stored next fire time, on their trigger's
    # grid: fires missed while the process was down come due at once, and the
    # schedule's coalesce policy folds them (one run, by default).
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
        sched.fired = srow.fired
        sched.skipped = srow.skipped
        scheduler._recurring[sched.schedule_id] = sched
        if srow.key is not None:
            scheduler._schedule_keys[srow.key] = sched.schedule_id
            scheduler._schedule_key_of[sched.schedule_id] = srow.key
        journal.restored_schedule(srow)
    floor = max((schedule_number(s.schedule_id) for s in snapshot.schedules), default=0)
    from ._recurring import reserve_schedule_ids

    reserve_schedule_ids(floor)


def _build_trigger(spec: Any, scheduler: JobScheduler) -> Any:
    """A trigger from its stored mapping, through the trigger plugins."""
    from ._recurring import IntervalTrigger, build_trigger

    if not isinstance(spec, dict):
        raise JobSpecError(f"a stored trigger must be a mapping, got {spec!r}")
    if set(spec) == {"interval"}:
        return IntervalTrigger(spec["interval"])  # the kernel's own: no plugin needed
    return build_trigger(spec, lambda name: scheduler.plugins.resolve("triggers", name))


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
