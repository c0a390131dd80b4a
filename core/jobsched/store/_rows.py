"""The rows stores keep and return: a one-owner store's and a shared store's."""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterator, Mapping, Sequence
from typing import Any, overload

import attrs

from .._trigger_rules import ALL_SUCCESS


# ── rows of a one-owner store ──────────────────────────────────────────
# Rows are mutable slotted classes, not frozen ones, built positionally by
# the journal: it builds thousands per second, and a frozen or keyword-only
# attrs __init__ costs two to three times more. Build them with keywords
# anywhere else.
@attrs.define
class JobRow:
    """One job's full current state, as data (a one-owner store's row).

    JSON columns (`args`, `options`, `result`) are JSON *text*: encoded once
    on the scheduler's side, so a store writes them as they are (a TEXT or
    JSONB column) and never re-encodes. Times are wall-clock epoch seconds.
    """

    job_id: str
    #: The registered job-type name.
    type: str
    #: A `JobStatus` value: "pending", "running", "retry_wait", "completed", ...
    status: str
    #: Earliest start (first run, or end of a retry backoff), wall clock.
    run_at: float
    submitted_at: float
    #: Submit order: the strategies' tie-breaker, kept across restarts.
    seq: int
    #: External id (a job file's id), unique per store; None for jobs without one.
    key: str | None = None
    #: JSON object text: the job type's arguments.
    args: str = "{}"
    #: JSON object text: the job's options, spelled as in `NewJob.options`. A
    #: one-owner store also finds ``unique_key`` here (see `NewJob.unique_key`).
    options: str = "{}"
    #: Ids of the jobs this one waits for.
    depends_on: tuple[str, ...] = ()
    attempts: int = 0
    finished_at: float | None = None
    #: JSON text of a COMPLETED job's result; a result JSON cannot encode is
    #: stored as ``{"$repr": repr(result), "$note": why}``.
    result: str | None = None
    last_error: str | None = None
    #: The recurring schedule that fired this job, if any.
    schedule_id: str | None = None
    #: When it runs, given how the jobs of `depends_on` ended: one of
    #: `TRIGGER_RULES` (see `NewJob.trigger_rule`). Kept so that a restored
    #: job still waiting for its upstreams waits by its rule.
    trigger_rule: str = ALL_SUCCESS
    #: The traceback of its last failed attempt's exception (`storable_traceback`).
    last_traceback: str | None = None


@attrs.define(kw_only=True)
class ScheduleRow:
    """A recurring schedule of a one-owner store: the job it fires, its trigger,
    its next fire time."""

    schedule_id: str
    key: str | None = None
    #: JSON text ``{"type": ..., "args": {...}, "options": {...}}``: the job each
    #: fire submits ("" until the schedule first fires).
    template: str
    #: JSON text describing when it fires: ``{"trigger": {"interval": 5.0}`` or
    #: ``{"cron": "0 2 * * *", "tz": "UTC"}``, ``"timebase": "monotonic"|"wall",
    #: "misfire_grace_time", "coalesce", "jitter", "name"}``.
    trigger: str
    #: Next fire time, wall clock (0.0 once the trigger is exhausted).
    next_run: float
    allow_overlap: bool = False
    active: bool = True
    last_job_id: str | None = None
    fired: int = 0
    skipped: int = 0
    #: Paused by an operator (``pause_schedule``): a restored paused schedule
    #: does not fire until it is resumed.
    paused: bool = False


@attrs.frozen(kw_only=True)
class PurgeRow:
    """In a one-owner store's batch: delete finished jobs (``Kernel.purge``).

    Delete every job whose status is in `statuses` (terminal ones) and that
    finished at or before `before` (wall clock), except a job an unfinished
    job depends on (its dependent would lose its upstream on restore). The
    batch's `JobRow` and `ScheduleRow` rows are written first.

    With `job_ids` (an operator purged those jobs by id: ``purge_jobs``),
    only the jobs of `job_ids` among those are deleted: a one-owner store
    must honour it, or it deletes more than the operator chose.
    """

    before: float
    statuses: tuple[str, ...]
    job_ids: tuple[str, ...] | None = None


@attrs.frozen(kw_only=True)
class Snapshot:
    """What `StoreBase.open` returns: the rows to restore.

    A one-owner store returns every job (terminal ones are history: never run
    again, but dependents and ``jobsched status`` need them) and every
    schedule. A shared store returns an empty snapshot: its jobs stay in the
    store and are claimed from there.
    """

    jobs: Sequence[JobRow] = ()
    schedules: Sequence[ScheduleRow] = ()


@attrs.frozen(kw_only=True)
class StoreContext:
    """What the scheduler tells a store when it opens it."""

    #: Unique per scheduler instance (``host:pid:random``); shared stores see
    #: it as the lease owner.
    worker_id: str
    #: Open for reading only (``jobsched status``): create, migrate and lock nothing.
    readonly: bool = False
    #: With `readonly`: False to only check that the store exists and can be
    #: read (``jobsched web``), without reading its jobs into the `Snapshot`.
    load: bool = True
    #: Opened by the shared backend (several processes on one queue; the
    #: `SharedStore` calls follow). A store that implements both contracts
    #: (SQLite) opens its shared mode; a store that is only shared ignores it.
    shared: bool = False
    #: With `shared`: opened by a `Client`, which submits, reads and operates
    #: but never claims. A store whose single owner writes a file (SQLite's
    #: journal) may then open that file for reads and operator actions.
    operator: bool = False


# ── rows of a shared store (several processes on one queue) ───────────
@attrs.frozen(kw_only=True)
class NewJob:
    """A job to insert into a shared store (`SharedStore.insert`).

    Built by the scheduler's codec from a job and the submit options; a store
    keeps every field as given.
    """

    #: Unique across processes and restarts (the submitter adds a random part).
    job_id: str
    #: The registered job-type name.
    type: str
    #: The job type's arguments (JSON values).
    args: dict[str, Any]
    #: The job's options (JSON values). ``name`` (str) and ``executor`` (the
    #: name of the executor that runs it, e.g. ``"async"``; a store counts
    #: executor limits by it) are always present; ``priority`` (``"low"``,
    #: ``"medium"``, ``"high"`` or ``"critical"``), ``timeout`` (seconds per
    #: attempt, or null for none), ``retry`` (``{"policy": NAME, ...fields}``)
    #: and ``deadline`` (wall-clock seconds) only when they differ from a job's
    #: defaults (medium, 30.0, the default policy, none). A job a recurring
    #: schedule fired also has ``scheduled_for`` (the period's wall time).
    options: dict[str, Any] = attrs.field(factory=dict)
    #: External id (``FILE#ID`` for a job file's job): while a job with this key
    #: exists (in any status), inserting another returns that job's id instead.
    key: str | None = None
    #: Earliest start, wall clock.
    run_at: float
    #: When it was submitted, wall clock.
    submitted_at: float
    #: The strategy's key as numbers (computed with wall-clock times): claims
    #: take jobs in ascending ``(sort_key, seq)`` order, where ``seq`` is the
    #: store's own insertion counter.
    sort_key: tuple[float, ...]
    #: Jobs it waits for; each must exist (in the store or earlier in the batch).
    depends_on: tuple[str, ...] = ()
    #: The schedule that fired it.
    schedule_id: str | None = None
    #: Who submitted it (the submitting process's identity), for operators.
    submitted_by: str | None = None
    #: While an unfinished job (pending, running or retry_wait) has this key,
    #: inserting another returns that job's id instead.
    unique_key: str | None = None
    #: When it runs, given how the jobs of `depends_on` end: ``all_success``
    #: (every one completed; cancelled as soon as one did not), ``all_done``,
    #: ``one_success``, ``one_failed`` or ``none_failed`` (`TRIGGER_RULES`).
    #: A store decides with `Upstreams`: each upstream that ends is settled
    #: once, in `SharedStore.insert` for one already ended and in
    #: `SharedStore.finish` / `SharedStore.request_cancel` for the others.
    trigger_rule: str = ALL_SUCCESS
    #: The queue it waits in (also ``options["queue"]`` unless ``"default"``):
    #: `SharedStore.claim` takes only the jobs of the queues it is asked for.
    queue: str = "default"


@attrs.frozen(kw_only=True, eq=False)
class JobKind:
    """What jobs submitted alike share of their `NewJob`: one object for all
    of a batch's jobs of one type, arguments, options and strategy key
    (compared by identity: a store may cache what it spells from one)."""

    type: str
    args: dict[str, Any]
    options: dict[str, Any]
    sort_key: tuple[float, ...]
    queue: str


class PlainNewJobs(Sequence[NewJob]):
    """A batch of `NewJob`s submitted without options (no key, unique key,
    dependency or delay) at one time by one submitter: per job only its id
    and its `JobKind`, which alike jobs share.

    Every store reads it as the `NewJob`s it stands for (each built on
    access, with dicts of its own); a store may instead read `job_ids`,
    `kinds`, `submitted_at` and `submitted_by` to spell each kind's fields
    once (the PostgreSQL store's `COPY` does).

    A job's kind is worked out when the job is first read: `kind_of(job)`
    for each of `jobs`, in order; it raises for a job that cannot be stored,
    refusing the batch. A slice works out the kinds up to its end only, so
    a store writing a slice at a time keeps the database busy with one
    while the next is worked out; anything else works them all out first.
    """

    __slots__ = ("_jobs", "_kind_of", "_kinds", "job_ids", "submitted_at", "submitted_by")

    def __init__(
        self,
        job_ids: Sequence[str],
        jobs: Sequence[Any],
        kind_of: Callable[[Any], JobKind],
        *,
        submitted_at: float,
        submitted_by: str | None,
    ) -> None:
        if len(job_ids) != len(jobs):
            raise ValueError(f"{len(job_ids)} job ids for {len(jobs)} jobs")
        self.job_ids = job_ids
        self._jobs = jobs
        self._kind_of = kind_of
        self._kinds: list[JobKind] = []  # of the first jobs, as read so far
        #: Also every job's `run_at` (submitted without a delay).
        self.submitted_at = submitted_at
        self.submitted_by = submitted_by

    @property
    def kinds(self) -> Sequence[JobKind]:
        """Each job's kind (all of them worked out)."""
        return self._kinds_to(len(self._jobs))

    def _kinds_to(self, end: int) -> list[JobKind]:
        kinds = self._kinds
        if len(kinds) < end:
            kinds.extend(map(self._kind_of, self._jobs[len(kinds) : end]))
        return kinds

    def __len__(self) -> int:
        return len(self.job_ids)

    @overload
    def __getitem__(self, index: int) -> NewJob: ...
    @overload
    def __getitem__(self, index: slice) -> PlainNewJobs: ...
    def __getitem__(self, index: int | slice) -> NewJob | PlainNewJobs:
        if isinstance(index, slice):
            _, stop, step = index.indices(len(self))
            kinds = self._kinds_to(stop if step > 0 else len(self))[index]
            return PlainNewJobs(
                self.job_ids[index],
                kinds,
                _same_kind,
                submitted_at=self.submitted_at,
                submitted_by=self.submitted_by,
            )
        return self._new_job(self.job_ids[index], self.kinds[index])

    def __iter__(self) -> Iterator[NewJob]:
        return map(self._new_job, self.job_ids, self.kinds)

    def _new_job(self, job_id: str, kind: JobKind) -> NewJob:
        return NewJob(
            job_id=job_id,
            type=kind.type,
            args=dict(kind.args),
            options=dict(kind.options),
            run_at=self.submitted_at,
            submitted_at=self.submitted_at,
            sort_key=kind.sort_key,
            submitted_by=self.submitted_by,
            queue=kind.queue,
        )

    def __repr__(self) -> str:
        return f"PlainNewJobs({len(self)} jobs, submitted_by={self.submitted_by!r})"


def _same_kind(kind: JobKind) -> JobKind:
    """`kind_of` for jobs given as their kinds (a slice's, worked out already)."""
    return kind


@attrs.frozen(kw_only=True)
class SharedJobRow:
    """A job as a shared store holds it (times are wall-clock epoch seconds)."""

    job_id: str
    key: str | None
    type: str
    #: Decoded JSON, as inserted (`NewJob.args`, `NewJob.options`).
    args: dict[str, Any]
    options: dict[str, Any]
    #: A `JobStatus` value.
    status: str
    #: Attempts started, counted by `SharedStore.claim`.
    attempts: int
    run_at: float
    submitted_at: float
    #: The store's insertion order: unique, increasing (the claim tie-breaker).
    seq: int
    sort_key: tuple[float, ...]
    #: How many of its dependencies it still waits for (0: it may be claimed;
    #: a job its trigger rule released early has 0 too).
    unmet: int
    #: The process holding the job's lease, and until when (None unless running).
    lease_owner: str | None
    lease_expires: float | None
    #: Someone asked to cancel it while it was running (`SharedStore.request_cancel`).
    cancel_requested: bool
    #: The decoded JSON of a completed job's result (see `Outcome.result`), else None.
    result: Any
    last_error: str | None
    schedule_id: str | None
    submitted_by: str | None
    started_at: float | None
    finished_at: float | None
    unique_key: str | None = None
    #: The running job's last reported progress (`SharedStore.set_progress`):
    #: ``{"done", "total", "message", "updated_at"}``; None if it reported none.
    progress: dict[str, Any] | None = None
    #: When a completed job's result is removed (`SharedStore.expire_results`);
    #: None: kept until the job is purged.
    result_expires: float | None = None
    #: Ended attempts, oldest first. Filled by `SharedStore.get` only (lists
    #: leave it empty: reading every job's history would cost a query per page).
    history: tuple[AttemptRow, ...] = ()
    #: The jobs it waits for (or waited for). Filled by `SharedStore.get` only.
    depends_on: tuple[str, ...] = ()
    #: Its trigger rule, as inserted (`NewJob.trigger_rule`).
    trigger_rule: str = ALL_SUCCESS
    #: How many of its attempts ended by lease expiry (`SharedStore.reap_expired`).
    lease_expiries: int = 0
    #: The traceback of its last ended attempt's exception (`Outcome.traceback`),
    #: None if that attempt raised none.
    last_traceback: str | None = None
    #: How many worker processes claimed it and could not build it from its
    #: stored arguments (`SharedStore.refuse`: they run another version of
    #: its job type), and the last one's error. Each refuser is in
    #: `refused_by` (the ``refuser`` it gave), and claims no more for it.
    build_refusals: int = 0
    last_refusal: str | None = None
    refused_by: tuple[str, ...] = ()
    #: The queue it waits in (`NewJob.queue`).
    queue: str = "default"
    #: Its group (its ``group`` option, kept in a column of its own for the
    #: claims: the group limit and the turns), None if it has none.
    job_group: str | None = None

    @classmethod
    def from_record(cls, rec: dict[str, Any]) -> SharedJobRow:
        """A row from a mapping of column name to value (a database record)."""
        rec = dict(rec)
        rec["sort_key"] = tuple(rec["sort_key"])
        return cls(**rec)


@attrs.frozen(kw_only=True)
class AttemptRow:
    """One ended attempt of a job, as `SharedStore.finish` records it.

    A retried job (`SharedStore.retry`) counts attempts from 1 again; its
    earlier attempts stay in the history.
    """

    #: The job's attempt count when it ended (1 for the first).
    number: int
    #: How it ended (the attempt, not the job): ``completed``, ``failed``,
    #: ``timed_out``, ``cancelled``, ``handed_back`` (its worker shut down and
    #: gave the job back to run again) or ``lease_expired`` (its worker died;
    #: `SharedStore.reap_expired` queued the job again). Rows written before
    #: attempts said so may read ``retry_wait``: it failed and another
    #: attempt followed.
    status: str
    #: The attempt's error (``"ValueError: ..."``), None if it had none.
    error: str | None
    started_at: float | None
    finished_at: float | None
    #: The process that ran it (the lease owner).
    worker: str | None
    #: The traceback of the exception it raised (`Outcome.traceback`), if any.
    traceback: str | None = None


@attrs.frozen(kw_only=True)
class StoreStats:
    """What `SharedStore.stats` returns: one consistent look at the queue."""

    #: Jobs per status (statuses with none are left out).
    counts: dict[str, int]
    #: ``(minute, status, n)``: how many jobs reached a terminal `status` in
    #: the minute starting at `minute` (a multiple of 60, wall clock), for the
    #: minutes since the `since` given to `stats`.
    finished: list[tuple[float, str, int]]
    #: ``(owner, running, latest lease expiry)`` per process holding leases.
    leases: list[tuple[str, int, float | None]]
    #: Running jobs per job type and per executor (``options["executor"]``).
    running_types: dict[str, int]
    running_executors: dict[str, int]
    #: The cluster's limits (`SharedStore.sync_limits`), None without any.
    limits: LimitsData | None
    #: Rate limits' GCRA state: job type -> theoretical arrival time.
    rate_tats: dict[str, float]
    queue_paused: bool
    #: The store's clock when it looked.
    at: float
    #: Running jobs per queue (for the queue limits' use).
    running_queues: dict[str, int] = attrs.field(factory=dict)


@attrs.frozen(kw_only=True)
class QueueStatsRow:
    """One queue at a glance (`InspectRole.queue_stats`)."""

    queue: str
    #: Jobs ready to run now: pending or retry_wait, released by their
    #: dependencies, their ``run_at`` passed.
    ready: int
    #: The earliest ``run_at`` of those (wall clock): its age is how long the
    #: oldest ready job has waited. None when none is ready.
    oldest_run_at: float | None
    running: int
    #: Jobs of the queue that reached a terminal status since the `since`
    #: given to `queue_stats`.
    finished: int
    #: Paused on its own (`set_queue_paused` with this queue); a pause of
    #: every queue is `StoreStats.queue_paused`.
    paused: bool


def queue_rows(
    found: Mapping[str, Mapping[str, Any]], paused: Collection[str]
) -> list[QueueStatsRow]:
    """`QueueStatsRow`s by name from a store's per-queue counts (``ready``,
    ``oldest``, ``running``, ``finished`` by queue) and its paused queues;
    ``"default"`` is always listed."""
    rows = []
    for queue in sorted({"default", *found, *paused}):
        rec = found.get(queue)
        rows.append(
            QueueStatsRow(
                queue=queue,
                ready=int(rec["ready"]) if rec else 0,
                oldest_run_at=None
                if rec is None or rec["oldest"] is None
                else float(rec["oldest"]),
                running=int(rec["running"]) if rec else 0,
                finished=int(rec["finished"]) if rec else 0,
                paused=queue in paused,
            )
        )
    return rows


@attrs.frozen(kw_only=True)
class Outcome:
    """How a claimed job's attempt ended (`SharedStore.finish`).

    `status` is ``retry_wait`` (with `run_at`, the wall time of the next
    attempt) or a terminal status: ``completed``, ``failed``, ``timed_out``,
    ``cancelled``.
    """

    job_id: str
    status: str
    #: JSON text of a completed job's result (encoded by the scheduler; a
    #: result JSON cannot hold is ``{"$repr": ..., "$note": ...}``), else None.
    result: str | None = None
    #: The attempt's error; None keeps the job's previous one (a completed
    #: job has none: its earlier attempts' errors stay in its history).
    error: str | None = None
    run_at: float | None = None
    #: Seconds a completed job's result is kept: the store sets
    #: ``result_expires = now + result_ttl`` (its own clock), and
    #: `SharedStore.expire_results` removes the result after that. None: kept.
    result_ttl: float | None = None
    #: How the attempt ended, for the job's history (`AttemptRow.status`), when
    #: `status` does not say it: a ``retry_wait`` job's attempt ``failed``,
    #: ``timed_out`` or was ``handed_back`` (a shutdown). None: `status`.
    attempt: str | None = None
    #: The traceback of the exception the attempt raised (`storable_traceback`),
    #: None if it raised none. It becomes the job's ``last_traceback`` and its
    #: history row's ``traceback``.
    traceback: str | None = None


@attrs.frozen(kw_only=True)
class SharedScheduleRow:
    """A recurring schedule shared by every process (fires once per period)."""

    #: Derived from the job and the trigger: every process that registers the
    #: same schedule gets the same id, and so serves the same schedule.
    schedule_id: str
    #: The job each fire submits: type, args and options as in `NewJob`.
    type: str
    args: dict[str, Any]
    options: dict[str, Any]
    #: When it fires: ``{"interval": seconds}`` or a wall-clock trigger mapping
    #: (``{"cron": "0 2 * * *", "tz": "UTC"}``); ``"times": N`` ends it after N
    #: fires (the store counts them in `SharedStore.fire_schedule`), ``"key"``
    #: only tells schedules apart, ``"origin"`` is an interval's first fire
    #: (fire k is at ``origin + k * interval``).
    trigger: dict[str, Any]
    #: The next period's fire time, wall clock; ``inf`` once it has ended.
    next_run: float
    allow_overlap: bool = False
    active: bool = True
    last_job_id: str | None = None
    fired: int = 0
    skipped: int = 0
    #: Paused by an operator (`SharedStore.set_schedule_paused`): it does not
    #: fire until resumed.
    paused: bool = False


@attrs.frozen(kw_only=True)
class WorkerRow:
    """One worker's heartbeat row in the registry (`WorkersRole`).

    Every process that claims jobs from a shared store (``jobsched worker``,
    a `JobScheduler` on a shared store) keeps one, written on its lease
    renewal cadence, and deletes it when it stops cleanly.
    """

    #: The worker's lease owner identity (``host:pid``; ``host:pid/N`` for a
    #: second scheduler in a process): what its leases and attempts name.
    worker_id: str
    host: str
    pid: int
    #: Each queue it claims from, with how many jobs it runs from it at once.
    queues: dict[str, int]
    #: The job type names it has registered, sorted: what it can build.
    job_types: list[str]
    #: Its jobsched version.
    version: str
    #: When it started, and when it last wrote its row (wall clock, the
    #: store's clock: `WorkersRole.heartbeat` stamps both).
    started_at: float
    last_seen: float
    #: Seconds after `last_seen` past which the worker counts as lost (it
    #: stopped heartbeating: died, stalled or cut off); its lease time.
    lost_after: float
    #: Jobs it runs now.
    running: int
    #: ``"running"``, or ``"draining"`` once it is stopping or an operator
    #: asked it to drain: it claims no new job and finishes the ones it runs.
    state: str
    #: What an operator asked of it (`WorkersRole.request_worker`): ``"drain"``
    #: (claim nothing more, stay), ``"stop"`` (drain, then exit), or None.
    #: The store keeps it; the worker's own writes never set it.
    command: str | None = None


#: A registry row's columns, in `WorkerRow`'s field order: every store
#: names its ``workers`` table's columns after them.
WORKER_COLUMNS: tuple[str, ...] = tuple(field.name for field in attrs.fields(WorkerRow))

#: What an operator may ask of a worker (`WorkersRole.request_worker`), in
#: the order they escalate: a later request never takes a worker back down.
WORKER_COMMANDS = ("drain", "stop")


def check_worker_command(command: object) -> str:
    """`command` if it is one of `WORKER_COMMANDS`, else `ValueError` naming it."""
    if command not in WORKER_COMMANDS:
        raise ValueError(f"unknown worker command {command!r}: one of {', '.join(WORKER_COMMANDS)}")
    return str(command)


#: Seconds a lost worker's row is kept (shown marked lost) before a live
#: worker's heartbeat deletes it (`WorkersRole.heartbeat`'s ``forget_after``).
WORKER_RETENTION = 3600.0


#: How many due jobs, in claim order, `WorkersRole.unserved_types` looks at
#: for jobs no live worker can run: `Client.stats` stays a bounded read
#: however long the backlog (the counts are exact up to that many due jobs).
UNSERVED_SCAN = 10_000


#: A cluster's limits as a shared store keeps them (JSON): ``{"executors":
#: {name: max running}, "job_types": {type: max running}, "rates": {type:
#: {"per_second": float, "burst": int}}, "group": max running per job group}``
#: (``group`` only when set). See docs/limits.md.
LimitsData = dict[str, Any]


#: How many times a job's lease may expire before `SharedStore.reap_expired`
#: fails it instead of queueing it again (``jobsched worker --max-lease-expiries``).
MAX_LEASE_EXPIRIES = 3


def lease_expired_error(count: int | str, bound: int) -> str:
    """The error of a job failed by `SharedStore.reap_expired` (every store says
    the same); a store that builds it in SQL passes a placeholder as `count`."""
    return (
        f"lease expired {count} times: its worker stopped renewing it each time "
        f"(died, stalled or blocked); not run again (max_lease_expiries={bound})"
    )


#: How many worker processes may refuse a job (claim it and fail to build it
#: from its stored arguments: version skew in a rolling deploy) before it
#: fails (``jobsched worker --max-build-refusals``; `SharedStore.refuse`).
MAX_BUILD_REFUSALS = 5


def build_refused_error(type_name: str, count: int, bound: int, error: str) -> str:
    """The error of a job failed because `count` workers refused to build it."""
    return (
        f"JobSpecError: {count} worker process{'' if count == 1 else 'es'} could not build "
        f"this {type_name!r} job "
        f"from its stored arguments; not claimed again (max_build_refusals={bound}); "
        f"the last said: {error}"
    )


def check_max_build_refusals(value: Any) -> int:
    """`value` as a bound on build refusals: an int of at least 1."""
    if type(value) is not int or value < 1:
        raise ValueError(f"max_build_refusals must be a whole number of at least 1, got {value!r}")
    return value


def check_max_lease_expiries(value: Any) -> int:
    """`value` as a bound on lease expiries: an int of at least 1."""
    if type(value) is not int or value < 1:
        raise ValueError(f"max_lease_expiries must be a whole number of at least 1, got {value!r}")
    return value
