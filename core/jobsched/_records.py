"""What the operator API returns: `JobInfo`, `JobPage`, `Stats`, `QueueInfo`,
`ScheduleInfo` and their parts, with the checks of the query arguments every client applies
the same way."""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Iterable, Mapping
from typing import Any

import attrs

from ._errors import JobFailedError
from ._options import DEFAULT_QUEUE, check_queue, to_priority
from ._status import JobPriority, JobStatus
from .backends.schedules import ended, overdue
from .store import (
    FOLD_STEP,
    AttemptRow,
    BacklogRow,
    HistoryRead,
    QueueStatsRow,
    SharedJobRow,
    SharedScheduleRow,
    StoreStats,
    WorkerRow,
    percentile,
    sum_durations,
)

#: Minutes of throughput `Stats` reports (`Stats.throughput`).
THROUGHPUT_MINUTES = 60
#: The statuses `retry` and `requeue` take a job from.
RETRYABLE = frozenset({"failed", "timed_out", "cancelled"})
TERMINAL_STATUSES = frozenset({"completed", "failed", "timed_out", "cancelled"})


@attrs.frozen(kw_only=True)
class Progress:
    """What a running job last reported with `jobsched.progress` (`JobInfo.progress`)."""

    #: Work done so far, in the job's own unit.
    done: float
    #: The whole work in that unit, None if unknown.
    total: float | None
    message: str | None
    #: When it was reported, wall clock.
    updated_at: float

    @classmethod
    def from_data(cls, data: Mapping[str, Any] | None) -> Progress | None:
        """The record of a store's progress mapping (None stays None)."""
        if not data:
            return None
        total = data.get("total")
        return cls(
            done=float(data.get("done") or 0.0),
            total=None if total is None else float(total),
            message=data.get("message"),
            updated_at=float(data.get("updated_at") or 0.0),
        )


@attrs.frozen(kw_only=True)
class Attempt:
    """One ended attempt of a job (`JobInfo.history`)."""

    #: 1 for the first attempt (a retried job counts from 1 again).
    number: int
    #: How it ended: ``completed``, ``failed``, ``timed_out``, ``cancelled``,
    #: ``handed_back`` (its worker shut down and gave the job back to run
    #: again) or ``lease_expired`` (its worker died; the job was queued
    #: again). A store's older rows may read ``retry_wait``: it failed and
    #: another attempt followed.
    status: str
    error: str | None
    started_at: float | None
    finished_at: float | None
    #: The worker that ran it (``host:pid:random``).
    worker: str | None
    #: The formatted traceback of the exception it raised (the child's, for a
    #: ``process`` or ``subprocess`` job), None if it raised none. At most
    #: `jobsched.store.TRACEBACK_LIMIT` characters: a longer one is cut in the
    #: middle, at a line ``[... N characters cut ...]``.
    traceback: str | None = None

    @classmethod
    def from_row(cls, row: AttemptRow) -> Attempt:
        """The public record of a store's attempt row."""
        return cls(
            number=row.number,
            status=row.status,
            error=row.error,
            started_at=row.started_at,
            finished_at=row.finished_at,
            worker=row.worker,
            traceback=row.traceback,
        )


@attrs.frozen(kw_only=True)
class JobInfo:
    """A job as the store holds it now: what `Client.get`, `jobs` and `wait` return.

    Times are wall-clock epoch seconds (None until they happen).
    """

    job_id: str
    #: The registered job-type name and the arguments it is built from.
    type: str
    args: Mapping[str, Any]
    status: JobStatus
    name: str | None
    priority: JobPriority
    #: Attempts started so far (a retried job has more than one).
    attempts: int
    #: The last attempt's error ("ConnectionError: ..."), None if it had none
    #: (a completed job has none: an earlier attempt's error is in `history`).
    last_error: str | None
    #: What a COMPLETED job returned (JSON; a result that is not JSON is stored as
    #: a mapping with its repr). None once expired (`result_expires`).
    result: Any
    #: The worker holding the job while it runs (``host:pid``) and until when.
    lease_owner: str | None
    lease_expires: float | None
    key: str | None
    unique_key: str | None
    #: The recurring schedule that fired it, if any.
    schedule_id: str | None
    #: Who submitted it (a client's or a worker's identity).
    submitted_by: str | None
    submitted_at: float
    #: When it may start (after `delay`, or when its retry backoff ends).
    run_at: float
    started_at: float | None
    finished_at: float | None
    #: What the job last reported with `jobsched.progress`, None if nothing.
    progress: Progress | None = None
    #: Its ended attempts, oldest first (`get` fills it; lists leave it empty).
    history: tuple[Attempt, ...] = ()
    #: The jobs it waits (or waited) for (`get` fills it; lists leave it empty).
    #: The jobs that wait for it: `Client.dependents`.
    depends_on: tuple[str, ...] = ()
    #: When it runs given how `depends_on` end: ``"all_success"`` (the
    #: default), ``"all_done"``, ``"one_success"``, ``"one_failed"`` or
    #: ``"none_failed"`` (docs/tasks.md).
    trigger_rule: str = "all_success"
    #: Its stored options (``name``, ``executor``, ``priority``, ``timeout``,
    #: ``retry``, ``result_ttl``, ...: spelled as the codec stores them).
    options: Mapping[str, Any] = attrs.field(factory=dict)
    #: When its result is removed (its ``result_ttl``), None if it is kept.
    result_expires: float | None = None
    #: The traceback of its last failed attempt's exception (as
    #: `Attempt.traceback`), None if that attempt raised none or the job completed.
    traceback: str | None = None
    #: How many worker processes claimed it and could not build it from its
    #: stored arguments (they run another version of its job type), and the
    #: last one's error; it waits for a worker that can, and fails once
    #: ``max_build_refusals`` refused it (docs/reliability.md). Shared stores only.
    build_refusals: int = 0
    last_refusal: str | None = None
    #: The queue it waits in (docs/queues.md).
    queue: str = DEFAULT_QUEUE
    #: The group it was submitted with (a tenant: docs/limits.md), None if none.
    group: str | None = None

    @property
    def done(self) -> bool:
        """Whether the job reached a terminal status (it will not run again)."""
        return self.status.is_terminal

    @classmethod
    def from_row(cls, row: SharedJobRow) -> JobInfo:
        """The public record of a shared store's row."""
        priority = row.options.get("priority")
        group = row.options.get("group")
        return cls(
            job_id=row.job_id,
            type=row.type,
            args=row.args,
            status=JobStatus(row.status),
            name=row.options.get("name"),
            priority=JobPriority.MEDIUM if priority is None else to_priority(priority),
            attempts=row.attempts,
            # A row stored before completions cleared it may still hold one.
            last_error=None if row.status == "completed" else row.last_error,
            result=row.result,
            lease_owner=row.lease_owner,
            lease_expires=row.lease_expires,
            key=row.key,
            unique_key=row.unique_key,
            schedule_id=row.schedule_id,
            submitted_by=row.submitted_by,
            submitted_at=row.submitted_at,
            run_at=row.run_at,
            started_at=row.started_at,
            finished_at=row.finished_at,
            progress=Progress.from_data(row.progress),
            history=tuple(Attempt.from_row(a) for a in row.history),
            depends_on=tuple(row.depends_on),
            trigger_rule=row.trigger_rule,
            options=row.options,
            result_expires=row.result_expires,
            traceback=None if row.status == "completed" else row.last_traceback,
            build_refusals=row.build_refusals,
            last_refusal=row.last_refusal,
            queue=row.queue,
            group=group if isinstance(group, str) else None,
        )


@attrs.frozen(kw_only=True)
class JobPage:
    """One page of `Client.page`: the jobs (newest first) and how many match in all."""

    jobs: list[JobInfo]
    total: int


@attrs.frozen(kw_only=True)
class ThroughputBucket:
    """Jobs that ended in one minute (`Stats.throughput`)."""

    #: The minute's start, wall clock (a multiple of 60).
    start: float
    completed: int
    #: Failed and timed-out jobs.
    failed: int


@attrs.frozen(kw_only=True)
class WorkerInfo:
    """A worker holding leases on running jobs (`Stats.workers`)."""

    worker: str
    #: How many jobs it runs.
    running: int
    #: The latest of its leases' expiry times.
    lease_expires: float | None


#: A registered worker's state (`WorkerRecord.state`): running jobs, running
#: none, stopping (claims nothing new, finishes what it runs), or not heard
#: of for longer than its bound (died, stalled or cut off from the store).
WORKER_STATES = ("live", "idle", "draining", "lost")


@attrs.frozen(kw_only=True)
class WorkerRecord:
    """A worker as the registry knows it (`Client.workers`): its heartbeat row
    and what it means now."""

    #: Its lease owner identity (``host:pid``): what its leases and attempts name.
    worker_id: str
    host: str
    pid: int
    #: Each queue it claims from, with how many jobs it runs from it at once.
    queues: Mapping[str, int]
    #: The job types it registered (can build and run), sorted.
    job_types: tuple[str, ...]
    #: Its jobsched version.
    version: str
    #: When it started and when it last wrote its heartbeat (wall clock, the store's).
    started_at: float
    last_seen: float
    #: Jobs it ran at its last heartbeat.
    running: int
    #: One of `WORKER_STATES`: ``live`` (running jobs), ``idle`` (running
    #: none), ``draining`` (stopping) or ``lost`` (no heartbeat for longer
    #: than its lease time; its row goes after `WORKER_RETENTION` seconds).
    state: str
    #: Seconds since its last heartbeat, by the store's clock.
    seen_ago: float
    #: What an operator asked of it (`Client.drain_worker`, `Client.stop_worker`):
    #: ``"drain"``, ``"stop"`` or None. It acts on it at its next heartbeat
    #: (its state is ``draining`` from then on; a stopped one leaves).
    command: str | None = None

    @property
    def lost(self) -> bool:
        return self.state == "lost"

    @classmethod
    def from_row(cls, row: WorkerRow, now: float) -> WorkerRecord:
        """The record of a registry row read at `now` (the store's clock)."""
        ago = max(now - row.last_seen, 0.0)
        if ago > row.lost_after:
            state = "lost"
        elif row.state == "draining":
            state = "draining"
        else:
            state = "live" if row.running else "idle"
        return cls(
            worker_id=row.worker_id,
            host=row.host,
            pid=row.pid,
            queues=dict(row.queues),
            job_types=tuple(row.job_types),
            version=row.version,
            started_at=row.started_at,
            last_seen=row.last_seen,
            running=row.running,
            state=state,
            seen_ago=ago,
            command=row.command,
        )


def served_types(workers: Iterable[WorkerRecord]) -> list[str]:
    """The job types some worker that is not lost registered, sorted."""
    return sorted({t for w in workers if not w.lost for t in w.job_types})


@attrs.frozen(kw_only=True)
class LimitUse:
    """One cluster limit and how much of it is used now (`Stats.limits`)."""

    #: ``"executor"``, ``"job_type"``, ``"queue"`` or ``"rate"``.
    kind: str
    #: The executor, job type or queue it limits.
    name: str
    #: Most running jobs (a rate: its burst).
    limit: int
    #: Running jobs now (a rate: tokens of the burst in use).
    in_use: int


@attrs.frozen(kw_only=True)
class Stats:
    """The queue at a glance (`Client.stats`)."""

    #: Jobs per status, every status present (0 when none).
    counts: dict[str, int]
    #: One bucket per minute over the last hour, oldest first (60, zeros included).
    throughput: list[ThroughputBucket]
    workers: list[WorkerInfo]
    limits: list[LimitUse]
    queue_paused: bool
    #: When the store was read (its clock).
    at: float
    #: Calls a timeout or cancel gave up on that still run on a thread or pool
    #: process (`JobScheduler.abandoned_calls`): `LocalClient` counts its
    #: scheduler's; None from a `Client`, which cannot see the workers' threads.
    abandoned: int | None = None
    #: Due jobs that wait for a worker that knows their type, per job type:
    #: no live worker in the registry registered it (`Client.workers`).
    #: Always empty in process (`LocalClient`): a scheduler refuses a job it
    #: cannot build when it is submitted.
    unserved: Mapping[str, int] = attrs.field(factory=dict)

    @classmethod
    def from_store(cls, raw: StoreStats, unserved: Mapping[str, int] | None = None) -> Stats:
        """The record of a shared store's statistics (`SharedStore.stats`),
        its throughput buckets following the store's clock."""
        last = math.floor(raw.at / 60) * 60.0
        starts = [last - 60.0 * i for i in range(THROUGHPUT_MINUTES - 1, -1, -1)]
        completed = dict.fromkeys(starts, 0)
        failed = dict.fromkeys(starts, 0)
        for minute, status, n in raw.finished:
            if status == "completed" and minute in completed:
                completed[minute] += n
            elif status in ("failed", "timed_out") and minute in failed:
                failed[minute] += n
        counts = {s.value: 0 for s in JobStatus}
        counts.update(raw.counts)
        return cls(
            counts=counts,
            throughput=[
                ThroughputBucket(start=m, completed=completed[m], failed=failed[m]) for m in starts
            ],
            workers=[
                WorkerInfo(worker=owner, running=n, lease_expires=expires)
                for owner, n, expires in sorted(raw.leases)
            ],
            limits=_limit_uses(raw),
            queue_paused=raw.queue_paused,
            at=raw.at,
            unserved=dict(sorted((unserved or {}).items())),
        )


@attrs.frozen(kw_only=True)
class QueueInfo:
    """One queue at a glance (`Client.queues`)."""

    name: str
    #: Jobs ready to run now (pending or waiting to retry, due, not waiting
    #: for dependencies).
    depth: int
    #: Seconds the oldest of those has been ready (None: none is).
    oldest_age: float | None
    running: int
    #: Jobs of the queue that finished in the last minute.
    throughput: int
    #: Paused on its own (`Client.pause_queue` with its name); a pause of
    #: every queue is `Stats.queue_paused`.
    paused: bool

    @classmethod
    def from_row(cls, row: QueueStatsRow, at: float) -> QueueInfo:
        """The record of a store's `QueueStatsRow` read at `at` (its clock)."""
        oldest = row.oldest_run_at
        return cls(
            name=row.queue,
            depth=row.ready,
            oldest_age=None if oldest is None else max(0.0, at - oldest),
            running=row.running,
            throughput=row.finished,
            paused=row.paused,
        )


#: The most jobs `OperatorAPI.schedule_runs` returns for one schedule.
MAX_SCHEDULE_RUNS = 100


#: The windows `Client.history` takes, each with the step of its buckets:
#: 5-minute buckets for the last hour and day, hourly ones for the week.
HISTORY_WINDOWS: dict[str, tuple[float, float]] = {
    "1h": (3600.0, FOLD_STEP),
    "24h": (86_400.0, FOLD_STEP),
    "7d": (7 * 86_400.0, 3600.0),
}


@attrs.frozen(kw_only=True)
class HistoryBucket:
    """The attempts that ended in one bucket of time (`History.buckets`)."""

    #: The bucket's start, wall clock (a multiple of `History.step`).
    start: float
    #: Attempts that returned.
    completed: int
    #: Attempts that raised or timed out, retried after or not.
    failed: int


@attrs.frozen(kw_only=True)
class TypeStats:
    """One job type over a window (`History.types`)."""

    type: str
    #: Unfinished jobs now: pending or waiting to retry, and running.
    queued: int
    running: int
    #: How long its oldest due job has waited now, in seconds (None: none is due).
    backlog_age: float | None
    #: Attempts that ended in the window, how many failed (raised or timed
    #: out), the share that failed (None: none ended) and their durations'
    #: median and 95th percentile (seconds).
    completed: int
    failed: int
    failure_rate: float | None
    p50: float | None
    p95: float | None


@attrs.frozen(kw_only=True)
class QueueBacklog:
    """One queue's backlog now (`History.queues`): its queued and running jobs
    (of the history's job type, if it has one) and its oldest due job's wait."""

    name: str
    queued: int
    running: int
    #: How long its oldest due job has waited now, in seconds (None: none is due).
    backlog_age: float | None


@attrs.frozen(kw_only=True)
class History:
    """Throughput over a window, per job type, and the backlog now (`Client.history`).

    Counts are of ended *attempts* (a job retried twice counts three), as
    workers recorded them: folded in memory and written on their lease
    renewal (a lag of at most ``lease_seconds / 3``; an in-process
    scheduler's are counted at once). Durations come from a fixed log-scale
    histogram (`jobsched.store.DURATION_BOUNDS`, 1 ms to 2000 s), a
    percentile interpolated inside its bucket as Prometheus'
    ``histogram_quantile`` does: exact to within its bucket's bounds.
    """

    #: The window asked for (``"1h"``, ``"24h"`` or ``"7d"``) and the size
    #: of its buckets in seconds (300, or 3600 for ``"7d"``).
    window: str
    step: float
    #: The filters it was read with (None: all).
    type: str | None
    queue: str | None
    #: Every bucket of the window, oldest first, empty ones included (the
    #: last one is the bucket now under way).
    buckets: list[HistoryBucket]
    #: The window's totals (see `TypeStats`).
    completed: int
    failed: int
    failure_rate: float | None
    p50: float | None
    p95: float | None
    #: How long the oldest due job (of `type`, in `queue`) has waited now,
    #: in seconds; None if no job is due.
    backlog_age: float | None
    #: Each job type with queued or running jobs now or attempts in the
    #: window, by name.
    types: list[TypeStats]
    #: Each queue with queued or running jobs now (of `type`), by name.
    queues: list[QueueBacklog]
    #: When it was read (the store's clock).
    at: float

    @classmethod
    def from_rows(
        cls,
        window: str,
        read: HistoryRead,
        backlog: Iterable[BacklogRow],
        at: float,
        *,
        type: str | None = None,
        queue: str | None = None,
    ) -> History:
        """The record of a store's history (`HistoryRole.history`: per bucket
        and per job type, read for `window`, one of `HISTORY_WINDOWS`) and
        backlog (`HistoryRole.backlog`), read at `at`."""
        step = HISTORY_WINDOWS[window][1]
        first = window_start(window, at)
        starts = [first + step * i for i in range(round((at - first) // step) + 1)]
        counts = {start: (completed, failed) for start, completed, failed in read[0]}
        ended = {row.type: row for row in read[1] if type is None or row.type == type}
        waiting = [b for b in backlog if type is None or b.type == type]
        per_type = _backlog_by(waiting, lambda b: b.type)
        types = []
        for name in sorted({*ended, *per_type}):
            queued, running, oldest = per_type.get(name, (0, 0, None))
            row = ended.get(name)
            completed, failed = (row.completed, row.failed) if row else (0, 0)
            durations = row.durations if row else ()
            types.append(
                TypeStats(
                    type=name,
                    queued=queued,
                    running=running,
                    backlog_age=_age(oldest, at),
                    completed=completed,
                    failed=failed,
                    failure_rate=_rate(completed, failed),
                    p50=percentile(durations, 0.5),
                    p95=percentile(durations, 0.95),
                )
            )
        durations = sum_durations(ended.values())
        completed = sum(t.completed for t in types)
        failed = sum(t.failed for t in types)
        due = [b.oldest_due for b in waiting if b.oldest_due is not None]
        return cls(
            window=window,
            step=step,
            type=type,
            queue=queue,
            buckets=[
                HistoryBucket(
                    start=s, completed=counts.get(s, (0, 0))[0], failed=counts.get(s, (0, 0))[1]
                )
                for s in starts
            ],
            completed=completed,
            failed=failed,
            failure_rate=_rate(completed, failed),
            p50=percentile(durations, 0.5),
            p95=percentile(durations, 0.95),
            backlog_age=_age(min(due) if due else None, at),
            types=types,
            queues=[
                QueueBacklog(name=name, queued=q, running=r, backlog_age=_age(o, at))
                for name, (q, r, o) in sorted(_backlog_by(waiting, lambda b: b.queue).items())
            ],
            at=at,
        )


def window_start(window: str, at: float) -> float:
    """The start of the first bucket of `window` read at `at`: a window is
    its span's worth of whole buckets, the last one the bucket under way
    (what `History.buckets` holds and the store is asked for)."""
    span, step = HISTORY_WINDOWS[window]
    return math.floor(at / step) * step - (round(span / step) - 1) * step


def check_history_query(window: Any, type: Any, queue: Any) -> tuple[float, str | None]:
    """The arguments of a ``history`` call checked (as every client checks
    them); returns the window's step in seconds and the queue's name."""
    if not isinstance(window, str) or window not in HISTORY_WINDOWS:
        raise ValueError(f"window must be one of {', '.join(HISTORY_WINDOWS)}, got {window!r}")
    if type is not None and not isinstance(type, str):
        raise TypeError(f"type must be a string, got {type!r}")
    return HISTORY_WINDOWS[window][1], None if queue is None else check_queue(queue)


def _backlog_by(
    rows: Iterable[BacklogRow], key: Callable[[BacklogRow], str]
) -> dict[str, tuple[int, int, float | None]]:
    """Backlog rows summed by `key`: ``(queued, running, oldest due run_at)``."""
    found: dict[str, tuple[int, int, float | None]] = {}
    for b in rows:
        queued, running, oldest = found.get(key(b), (0, 0, None))
        if b.oldest_due is not None and (oldest is None or b.oldest_due < oldest):
            oldest = b.oldest_due
        found[key(b)] = (queued + b.queued, running + b.running, oldest)
    return found


def _rate(completed: int, failed: int) -> float | None:
    ended = completed + failed
    return failed / ended if ended else None


def _age(oldest: float | None, at: float) -> float | None:
    return None if oldest is None else max(0.0, at - oldest)


@attrs.frozen(kw_only=True)
class ScheduleInfo:
    """A recurring schedule as the store holds it (`Client.schedules`)."""

    schedule_id: str
    #: The fired job's name (``options["name"]``).
    name: str | None
    #: The fired job's registered type.
    type: str
    #: When it fires: ``{"interval": seconds, "origin": ...}`` or a wall-clock
    #: trigger such as ``{"cron": "0 2 * * *", "tz": "UTC"}``.
    trigger: Mapping[str, Any]
    #: Its next fire time, wall clock; None once it has ended.
    next_run: float | None
    paused: bool
    #: False once cancelled or ended.
    active: bool
    fired: int
    skipped: int
    last_job_id: str | None
    #: Its next fire is more than `OVERDUE_AFTER` (10) seconds in the past and
    #: it has not fired: no process serves it (no
    #: worker runs, or none has its job type installed). Never for a paused or
    #: ended schedule.
    overdue: bool = False
    #: The fired job's JSON arguments (empty when the schedule's job is not
    #: data: an in-process schedule of a plain function).
    args: Mapping[str, Any] = attrs.field(factory=dict)
    #: The fired job's queue.
    queue: str = DEFAULT_QUEUE

    @classmethod
    def from_row(cls, row: SharedScheduleRow, now: float | None = None) -> ScheduleInfo:
        """The public record of a shared store's schedule row, read at `now`
        (wall clock; default: now)."""
        return cls(
            schedule_id=row.schedule_id,
            name=row.options.get("name"),
            type=row.type,
            trigger=row.trigger,
            next_run=None if ended(row) else row.next_run,
            paused=row.paused,
            active=row.active,
            fired=row.fired,
            skipped=row.skipped,
            last_job_id=row.last_job_id,
            overdue=overdue(row, time.time() if now is None else now),
            args=row.args,
            queue=row.options.get("queue", DEFAULT_QUEUE),
        )


def check_count(what: str, value: Any, *, low: int, high: int | None = None) -> None:
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"{what} must be an integer, got {value!r}")
    if value < low or (high is not None and value > high):
        bound = f"between {low} and {high}" if high is not None else f">= {low}"
        raise ValueError(f"{what} must be {bound}, got {value!r}")


def check_seconds(what: str, value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise TypeError(f"{what} must be a number of seconds, got {value!r}")
    if not (value >= 0 and math.isfinite(value)):
        raise ValueError(f"{what} must be a finite number of seconds >= 0, got {value!r}")
    return float(value)


def wanted_statuses(
    status: JobStatus | str | Iterable[JobStatus | str] | None,
) -> frozenset[str] | None:
    """The status values `status` names (one status or several; None: any),
    or a `ValueError` naming an unknown one."""
    if status is None:
        return None
    given = [status] if isinstance(status, JobStatus | str) else list(status)
    known = {s.value for s in JobStatus}
    values = set()
    for one in given:
        value = one.value if isinstance(one, JobStatus) else one
        if value not in known:
            raise ValueError(f"unknown status {one!r} (statuses: {', '.join(sorted(known))})")
        values.add(value)
    return frozenset(values)


def check_page_query(
    status: JobStatus | str | Iterable[JobStatus | str] | None,
    type: str | None,
    q: str | None,
    limit: int,
    offset: int,
) -> frozenset[str] | None:
    """The arguments of a ``page`` call checked (as every client checks them);
    returns the status values wanted."""
    wanted = wanted_statuses(status)
    check_count("limit", limit, low=1, high=1000)
    check_count("offset", offset, low=0)
    for what, value in (("type", type), ("q", q)):
        if value is not None and not isinstance(value, str):
            raise TypeError(f"{what} must be a string, got {value!r}")
    return wanted


def check_requeue(
    status: JobStatus | str | Iterable[JobStatus | str], type: str | None
) -> frozenset[str]:
    """The arguments of a ``requeue`` call checked; returns the status values wanted."""
    wanted = wanted_statuses(status) or frozenset()
    wrong = sorted(wanted - RETRYABLE)
    if wrong or not wanted:
        raise ValueError(
            f"requeue takes failed, timed_out or cancelled jobs, not {', '.join(wrong) or 'none'}"
        )
    if type is not None and not isinstance(type, str):
        raise TypeError(f"type must be a string, got {type!r}")
    return wanted


def check_purge(
    older_than: float, status: JobStatus | str | Iterable[JobStatus | str] | None
) -> tuple[float, frozenset[str]]:
    """The arguments of a ``purge`` call checked: the seconds, and the
    (terminal) status values wanted, all of them for None."""
    seconds = check_seconds("older_than", older_than)
    wanted = wanted_statuses(status) or TERMINAL_STATUSES
    wrong = sorted(wanted - TERMINAL_STATUSES)
    if wrong:
        raise ValueError(
            f"purge deletes finished jobs only; {', '.join(wrong)} is not a finished status "
            f"(finished: {', '.join(sorted(TERMINAL_STATUSES))})"
        )
    return seconds, wanted


def finished_result(info: JobInfo) -> Any:
    """A finished job's result, or `JobFailedError` if it did not complete."""
    if info.status is JobStatus.COMPLETED:
        return info.result
    raise JobFailedError.from_job(info.job_id, info.status.value, info.last_error, info.attempts)


def _limit_uses(raw: StoreStats) -> list[LimitUse]:
    """Each stored limit with what uses it now."""
    data = raw.limits or {}
    uses = [
        LimitUse(kind=kind, name=name, limit=int(limit), in_use=running.get(name, 0))
        for kind, key, running in (
            ("executor", "executors", raw.running_executors),
            ("job_type", "job_types", raw.running_types),
            ("queue", "queues", raw.running_queues),
        )
        for name, limit in sorted((data.get(key) or {}).items())
    ]
    for name, rate in sorted((data.get("rates") or {}).items()):
        burst = int(rate["burst"])
        interval = 1.0 / float(rate["per_second"])
        # GCRA: the bucket is `ahead` seconds of tokens in debt.
        ahead = max(raw.rate_tats.get(name, raw.at) - raw.at, 0.0)
        used = min(burst, math.ceil(ahead / interval - 1e-9))
        uses.append(LimitUse(kind="rate", name=name, limit=burst, in_use=max(used, 0)))
    return uses
