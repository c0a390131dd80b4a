"""Stores: the plugin API that makes jobs durable.

A store keeps every job's state as *data* (its registered type name, JSON
arguments and options, status, attempts, times, result) so a scheduler can
rebuild its queues after a restart. Stores are plugins registered by URL
scheme (``jobsched_register_stores``); ``JobScheduler(store="sqlite:///jobs.db")``
resolves the scheme once, when the scheduler is composed.

The kernel talks to a store through three calls: `Store.open` (once, in
``start()``: returns a `Snapshot` to restore), `Store.write` (a batch of rows,
one transaction) and `Store.close`; the journal (`_journal.py`) batches state
changes into those writes and `_restore.py` rebuilds the queues. A *shared*
store (several processes on one queue) adds the calls of `SharedStore`, used by
the kernel's shared mode (`_shared.py`). See docs/durability.md.
"""

from __future__ import annotations

import json
import math
import os
import socket
import uuid
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

import attrs
import structlog

from ._errors import PluginError, SchedulerError
from ._status import JobStatus

if TYPE_CHECKING:
    from ._plugins import PluginManager

logger = structlog.get_logger("jobsched.store")

COMPLETED = JobStatus.COMPLETED
RUNNING = JobStatus.RUNNING


# ── errors ─────────────────────────────────────────────────────────────
class StoreError(SchedulerError):
    """A store could not be opened, read or written.

    The message names the store (file or DSN) and the problem. A store that
    raises this has left its data as it was before the failed call.
    """


# ── rows: what a store keeps ───────────────────────────────────────────
# Rows are mutable slotted classes, not frozen ones, built positionally by
# the journal: it builds thousands per second, and a frozen or keyword-only
# attrs __init__ costs two to three times more. Build them with keywords
# anywhere else.
@attrs.define
class JobRow:
    """One job's full current state, as data.

    JSON columns (`args`, `options`, `result`) are JSON *text*: encoded once
    on the scheduler's side, so a store writes them as they are (a TEXT or
    JSONB column) and never re-encodes. Times are wall-clock epoch seconds:
    monotonic times mean nothing after a restart or on another host.
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
    #: JSON object text: the options that differ from a job's defaults (name,
    #: priority, timeout, retry {policy, ...}, deadline as wall-clock time).
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
    #: Shared stores only: the strategy key as sortable numbers (wall-clock based).
    sort_key: tuple[float, ...] | None = None
    #: Shared stores only: the worker holding the job and until when (wall clock).
    lease_owner: str | None = None
    lease_expires: float | None = None


@attrs.define(kw_only=True)
class ScheduleRow:
    """A recurring schedule: the job it fires, its trigger, its next fire time."""

    schedule_id: str
    key: str | None = None
    #: JSON text ``{"type": ..., "args": {...}, "options": {...}}``: the job each fire submits.
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


@attrs.frozen(kw_only=True)
class Snapshot:
    """What `Store.open` returns: the rows to restore.

    A local store returns every job (terminal ones are history: never run
    again, but dependents and ``jobsched status`` need them) and every schedule.
    """

    jobs: Sequence[JobRow] = ()
    schedules: Sequence[ScheduleRow] = ()


@attrs.frozen(kw_only=True)
class StoreContext:
    """What the kernel tells a store when it opens it."""

    #: Unique per scheduler instance (``host:pid:random``); shared stores use it
    #: as the lease owner.
    worker_id: str
    #: Open for reading only (``jobsched status``): create nothing, lock nothing.
    readonly: bool = False
    #: Opened by the shared backend (several processes on one queue; the
    #: `SharedStore` calls follow). A store that can run either way (SQLite)
    #: opens its shared mode; a store that is only shared ignores it.
    shared: bool = False


_STATUSES = frozenset(s.value for s in JobStatus)


def _is_time(value: object) -> bool:
    return type(value) in (int, float) and math.isfinite(value)  # type: ignore[arg-type]


def _is_count(value: object) -> bool:
    return type(value) is int and value >= 0


def _is_text(value: object) -> bool:
    return value is None or type(value) is str


_TIME_TYPES = (int, float)
_TEXT_OR_NONE = (str, type(None))
_isfinite = math.isfinite


def _is_json(text: str) -> bool:
    try:
        json.loads(text)
    except ValueError:
        return False
    return True


def _job_row_problem(row: JobRow) -> str | None:
    """What is wrong with one stored job on its own, or None."""
    # The common case first, in one expression: a store may hold many rows.
    if (
        row.status in _STATUSES
        and type(row.run_at) in _TIME_TYPES
        and _isfinite(row.run_at)
        and type(row.submitted_at) in _TIME_TYPES
        and _isfinite(row.submitted_at)
        and (row.finished_at is None or _is_time(row.finished_at))
        and type(row.attempts) is int
        and row.attempts >= 0
        and type(row.seq) is int
        and row.seq >= 0
        and type(row.job_id) is str
        and type(row.type) is str
        and type(row.args) is str
        and type(row.options) is str
        and type(row.key) in _TEXT_OR_NONE
        and type(row.last_error) in _TEXT_OR_NONE
        and type(row.schedule_id) in _TEXT_OR_NONE
        and type(row.depends_on) is tuple
        and all(type(d) is str for d in row.depends_on)
        and (row.result is None or (type(row.result) is str and _is_json(row.result)))
    ):
        return None
    if row.status not in _STATUSES:
        return f"status {row.status!r} is not one of {', '.join(sorted(_STATUSES))}"
    for column in ("run_at", "submitted_at"):
        if not _is_time(getattr(row, column)):
            return f"{column} {_short(getattr(row, column))} is not a time"
    if row.finished_at is not None and not _is_time(row.finished_at):
        return f"finished_at {_short(row.finished_at)} is not a time"
    for column in ("attempts", "seq"):
        if not _is_count(getattr(row, column)):
            return f"{column} {_short(getattr(row, column))} is not a count"
    for column in ("job_id", "type", "args", "options"):
        if type(getattr(row, column)) is not str:
            return f"{column} {_short(getattr(row, column))} is not text"
    for column in ("key", "result", "last_error", "schedule_id"):
        if not _is_text(getattr(row, column)):
            return f"{column} {_short(getattr(row, column))} is not text"
    if row.result is not None and not _is_json(row.result):
        return f"result {_short(row.result)} is not JSON"
    if not isinstance(row.depends_on, tuple | list) or not all(
        type(d) is str for d in row.depends_on
    ):
        return f"depends_on {_short(row.depends_on)} is not a list of job ids"
    return None


def _dependency_cycle(jobs: Sequence[JobRow]) -> list[str] | None:
    """A dependency cycle among these jobs (``[a, b, a]``), or None.

    The kernel makes cycles impossible (a job may only depend on jobs
    submitted before it), so one in a store was put there by hand, and its
    jobs would wait for each other forever.
    """
    deps = {row.job_id: row.depends_on for row in jobs if row.depends_on}
    done: set[str] = set()
    for start in deps:
        if start in done:
            continue
        # Depth-first, iterative: a long chain must not hit the recursion limit.
        path = [start]
        on_path = {start}
        todo = [iter(deps[start])]
        while todo:
            dep = next(todo[-1], None)
            if dep is None:
                todo.pop()
                finished = path.pop()
                on_path.discard(finished)
                done.add(finished)
                continue
            if dep in on_path:
                return [*path[path.index(dep) :], dep]
            if dep in done or dep not in deps:
                continue
            path.append(dep)
            on_path.add(dep)
            todo.append(iter(deps[dep]))
    return None


def _schedule_row_problem(row: ScheduleRow) -> str | None:
    if not _is_time(row.next_run):
        return f"next_run {_short(row.next_run)} is not a time"
    for column in ("fired", "skipped"):
        if not _is_count(getattr(row, column)):
            return f"{column} {_short(getattr(row, column))} is not a count"
    for column in ("trigger", "template"):
        value = getattr(row, column)
        if type(value) is not str:
            return f"{column} {_short(value)} is not text"
        if value or column == "trigger":  # a template is "" until the first fire
            try:
                json.loads(value)
            except ValueError:
                return f"{column} {_short(value)} is not JSON"
    return None


def _short(value: object) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def check_snapshot(url: str, snapshot: Snapshot) -> None:
    """Refuse a snapshot holding a row that could not be restored or shown.

    A row changed by hand (or by a broken store) - an unknown status, a time
    that is not a number, a result that is not JSON, a dependency on itself
    or a dependency cycle - raises `StoreError` naming the store and the row,
    before anything is restored. A store may call this in ``open`` before it
    writes anything, to leave such a file untouched.
    """
    for row in snapshot.jobs:
        _refuse_job(url, row, _job_row_problem(row))
    cycle = _dependency_cycle(snapshot.jobs)
    if cycle is not None:
        shown = cycle if len(cycle) <= 6 else [*cycle[:3], "...", *cycle[-2:]]
        where = (
            "it depends on itself"
            if len(cycle) == 2
            else f"it is in a dependency cycle ({' -> '.join(shown)})"
        )
        raise StoreError(
            f"{url}: job {cycle[0]} cannot be restored: {where}, so it could never run; "
            "jobsched left the store unchanged"
        )
    for srow in snapshot.schedules:
        wrong = _schedule_row_problem(srow)
        if wrong is not None:
            raise StoreError(
                f"{url}: recurring schedule {srow.schedule_id} cannot be restored: "
                f"{wrong}; jobsched left the store unchanged"
            )


def _refuse_job(url: str, row: JobRow, problem: str | None) -> None:
    if problem is not None:
        raise StoreError(
            f"{url}: job {row.job_id} cannot be restored: {problem}; "
            "jobsched left the store unchanged"
        )


def new_worker_id() -> str:
    """A worker id unique across hosts and restarts."""
    return f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"


# ── rows of a shared store (several processes on one queue) ───────────
@attrs.frozen(kw_only=True)
class NewJob:
    """A job to insert: what to run (type + JSON args) and how (options)."""

    job_id: str
    type: str
    args: dict[str, Any]
    options: dict[str, Any] = attrs.field(factory=dict)
    key: str | None = None
    run_at: float  # wall-clock epoch seconds
    submitted_at: float
    sort_key: tuple[float, ...]
    depends_on: tuple[str, ...] = ()
    schedule_id: str | None = None
    submitted_by: str | None = None
    #: While a job with this key is unfinished, inserting another is a no-op.
    unique_key: str | None = None


@attrs.frozen(kw_only=True)
class SharedJobRow:
    """A job as a shared store holds it (times are wall-clock epoch seconds)."""

    job_id: str
    key: str | None
    type: str
    args: dict[str, Any]
    options: dict[str, Any]
    status: str
    attempts: int
    run_at: float
    submitted_at: float
    seq: int
    sort_key: tuple[float, ...]
    unmet: int
    lease_owner: str | None
    lease_expires: float | None
    cancel_requested: bool
    result: Any
    last_error: str | None
    schedule_id: str | None
    submitted_by: str | None
    started_at: float | None
    finished_at: float | None
    unique_key: str | None = None

    @classmethod
    def from_record(cls, rec: dict[str, Any]) -> SharedJobRow:
        rec = dict(rec)
        rec["sort_key"] = tuple(rec["sort_key"])
        return cls(**rec)


@attrs.frozen(kw_only=True)
class Outcome:
    """How a claimed job's attempt ended, written by a shared store's ``finish``.

    `status` is ``retry_wait`` (with `run_at`, the wall time of the retry) or
    a terminal status.
    """

    job_id: str
    status: str
    result: Any = None
    error: str | None = None
    run_at: float | None = None


@attrs.frozen(kw_only=True)
class SharedScheduleRow:
    """A recurring schedule shared by every process (fires once per period)."""

    schedule_id: str
    type: str
    args: dict[str, Any]
    options: dict[str, Any]
    trigger: dict[str, Any]
    next_run: float
    allow_overlap: bool = False
    active: bool = True
    last_job_id: str | None = None
    fired: int = 0
    skipped: int = 0


# ── the plugin interface ───────────────────────────────────────────────
@runtime_checkable
class Store(Protocol):
    """A job store, built by a plugin's factory as ``factory(url)``.

    Attributes:

    - ``url``: the URL it was built from (with any password masked), used in
      every error message.
    - ``durable``: False means the kernel does no store work at all (the
      ``memory`` store); True means every state change is written.
    - ``shared``: several scheduler processes use one queue (PostgreSQL).
      A shared store also implements `SharedStore`.

    Calls, all made from the scheduler's event-loop thread, never two at once:

    - ``open(context)`` once, in ``start()``: create or migrate the schema;
      refuse a newer schema, a file or database that is not a jobsched store,
      or one another scheduler owns, with a `StoreError` naming it; return the
      rows to restore. A store must not change any data when open fails.
    - ``write(batch)``: one transaction holding the full current state of
      each row in `batch` (upserts, `JobRow` and `ScheduleRow` mixed, in the
      order the kernel made them dirty); never called on a shared store, which
      needs none. All or nothing: on failure raise
      `StoreError` with nothing written. A blocking driver must run off the
      loop thread (sqlite uses one writer thread, which also keeps order).
    - ``close()``: after the last write.
    """

    url: str
    durable: bool
    shared: bool

    async def open(self, context: StoreContext) -> Snapshot: ...

    async def write(self, batch: Sequence[JobRow | ScheduleRow]) -> None: ...

    async def close(self) -> None: ...


@runtime_checkable
class SharedStore(Store, Protocol):
    """The calls a shared store (``shared = True``, several processes on one
    queue) adds; the kernel's shared mode (core/jobsched/_shared.py) uses them
    instead of its local heaps and of the journal, with the row types
    `NewJob`, `SharedJobRow`, `Outcome` and `SharedScheduleRow`. The postgres
    store (jobsched_plugins.postgres_store) is the reference implementation.

    - ``insert(jobs)``: new jobs and their dependencies, one transaction.
    - ``claim(n, owner) -> (rows, next_due)``: take up to `n` due jobs in
      strategy order (``sort_key``, then the store's own submit order),
      locking them (``FOR UPDATE SKIP LOCKED``), setting a lease and counting
      the attempt; `next_due` is when the next waiting job becomes due.
    - ``renew(job_ids, owner) -> lost``: extend `owner`'s leases.
    - ``reap_expired()``: re-queue jobs whose lease expired (owner died).
    - ``release(job_ids, owner)``: give back claimed jobs that never started.
    - ``finish(outcomes, owner)``: write ended attempts; releasing or
      cancelling dependents happens in the same transaction.
    - ``wait(timeout) -> bool``: return when another process may have made
      work due (``LISTEN/NOTIFY``) or after `timeout` seconds.
    - ``request_cancel(job_id) -> bool``; ``cancel_requests(owner)`` (the
      safety net for a lost notification); ``on_cancel``/``on_work``
      callbacks the kernel sets.
    - ``add_schedule(row)``, ``get_schedule(id)``, ``deactivate_schedule(id)``
      and ``fire_schedule(schedule_id, expected_next, new_next, job) -> bool``:
      a compare-and-set of the next fire time that inserts the job in the same
      transaction, so one period fires once across processes.
    """

    lease_seconds: float

    async def insert(self, jobs: Sequence[Any]) -> list[str]: ...

    async def claim(self, n: int, owner: str) -> tuple[list[Any], float | None]: ...

    async def renew(self, job_ids: Iterable[str], owner: str) -> set[str]: ...

    async def finish(self, outcomes: Sequence[Any], owner: str) -> list[str]: ...

    async def wait(self, timeout: float) -> bool: ...

    async def request_cancel(self, job_id: str) -> bool: ...

    async def fire_schedule(
        self, schedule_id: str, expected_next: float, new_next: float, job: Any
    ) -> bool: ...


def offers_shared(store: object) -> bool:
    """Whether `store` implements the calls of `SharedStore` (it can be shared)."""
    return all(
        callable(getattr(store, name, None))
        for name in ("insert", "claim", "renew", "finish", "request_cancel", "fire_schedule")
    )


def resolve_store(store: Store | str | None, plugins: PluginManager) -> Store | None:
    """The store a scheduler was given: an instance, a URL, or None (memory, no store)."""
    if store is None:
        return None
    if isinstance(store, str):
        scheme = store.partition(":")[0]
        if not scheme:
            raise PluginError(f"store URL {store!r} has no scheme (e.g. sqlite:///jobs.db)")
        try:
            factory = plugins.resolve("stores", scheme)
        except PluginError as exc:
            raise PluginError(f"store {store!r}: {exc}") from None
        try:
            built = factory(store)
        except (StoreError, ValueError) as exc:
            raise StoreError(str(exc)) from exc
        store = built
    # A shared store is never written in batches: it has no `write` to check.
    needed = ["url", "durable", "shared", "open", "close"]
    if not getattr(store, "shared", False):
        needed.append("write")
    missing = [name for name in needed if not hasattr(store, name)]
    if missing:
        raise TypeError(f"{store!r} is not a store: it lacks {', '.join(missing)}")
    return store  # type: ignore[return-value]


async def read_store(url: str, plugins: PluginManager) -> Snapshot | None:
    """Everything a store holds, read without taking it over (``jobsched status``).

    None for a store that is not durable (it holds nothing).
    """
    store = resolve_store(url, plugins)
    assert store is not None
    if not store.durable:
        return None
    snapshot = await store.open(StoreContext(worker_id=new_worker_id(), readonly=True))
    await store.close()
    check_snapshot(store.url, snapshot)
    return snapshot
