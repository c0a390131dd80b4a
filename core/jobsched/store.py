"""The store contracts: what a third party implements to keep jobs durable.

A store keeps every job as *data* (its registered type name, JSON arguments
and options, status, attempts, times, result), never as a pickle, so that a
scheduler can rebuild its queues after a restart and other processes can run
the jobs. A store is a plugin registered by URL scheme::

    @hookimpl
    def jobsched_register_stores(register):
        register("mystore", MyStore)  # MyStore(url) builds one

``JobScheduler(store="mystore://...")`` resolves the scheme once, when the
scheduler is composed. There are two contracts, both built on `StoreBase`
(``url``, ``durable``, ``shared``, ``open``, ``close``):

- `Store`: **one owner**. One scheduler process owns the store (the SQLite
  file of ``jobsched run --store``); it keeps its queues in memory and writes
  every state change through `Store.write`, in batches of `JobRow` and
  `ScheduleRow` upserts. On restart `Store.open` returns a `Snapshot` of every
  row and the scheduler restores from it.
- `SharedStore`: **many processes on one queue** (PostgreSQL). No process
  keeps a queue of its own: jobs are inserted (`NewJob`), claimed in strategy
  order under a lease (`SharedJobRow`), finished (`Outcome`), and recurring
  schedules (`SharedScheduleRow`) fire once per period for the whole cluster.

Conventions every method follows:

- Times are **wall-clock epoch seconds** (``time.time()``): monotonic times
  mean nothing after a restart or on another host. A shared store stamps
  leases and finish times with one clock for every process (PostgreSQL uses
  the server's).
- Job arguments, options and results are JSON. One-owner rows carry them as
  JSON *text*, encoded once by the scheduler (write them as they are); shared
  rows carry decoded JSON values (dicts), except `Outcome.result`, which is
  JSON text. A result JSON cannot hold arrives as
  ``{"$repr": repr(result), "$note": why}``. The options' keys and spellings
  are fixed by the scheduler's codec (see `NewJob.options`).
- Every call is made on the scheduler's event loop. A store built on a
  blocking driver runs it off the loop (a thread).
- Every failure is a `StoreError` whose message names the store (`url`) and
  the problem; the call changed nothing (each call is one transaction). A
  stored row that cannot be read (changed by hand) is a `BadRowError` naming
  the row and the column; a store a newer jobsched migrated is a
  `SchemaTooNewError` naming both versions.

The SQLite store (``jobsched_plugins.sqlite_store``) implements `Store`; the
PostgreSQL store (``jobsched_plugins.postgres_store``) implements
`SharedStore`. docs/durability.md is the guide.
"""

from __future__ import annotations

import json
import math
import os
import socket
import uuid
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, Protocol, runtime_checkable

import attrs

from ._errors import BadRowError, PluginError, SchemaTooNewError, StoreError, StoreOwnedError
from ._status import JobStatus
from ._trigger_rules import ALL_SUCCESS, TRIGGER_RULES, Upstreams, check_trigger_rule

__all__ = [
    "MAX_LEASE_EXPIRIES",
    "TRIGGER_RULES",
    "AttemptRow",
    "BadRowError",
    "JobRow",
    "LimitsData",
    "NewJob",
    "Outcome",
    "PurgeRow",
    "ScheduleRow",
    "SchemaTooNewError",
    "SharedJobRow",
    "SharedScheduleRow",
    "SharedStore",
    "Snapshot",
    "Store",
    "StoreBase",
    "StoreContext",
    "StoreError",
    "StoreOwnedError",
    "StoreReader",
    "StoreStats",
    "Upstreams",
    "as_shared_store",
    "as_store",
    "as_store_reader",
    "bad_column",
    "check_max_lease_expiries",
    "check_snapshot",
    "check_trigger_rule",
    "checked_shared_job",
    "checked_shared_schedule",
    "decode_result",
    "encode_json",
    "encode_result",
    "json_column",
    "lease_expired_error",
    "new_worker_id",
    "read_store",
    "resolve_store",
    "result_as_json",
    "settle_at_insert",
    "settle_dependent",
    "storable_text",
]


#: JSON text as stores keep it: compact, no NaN or infinity. One encoder for
#: everything (``json.dumps`` with options builds a new one per call).
encode_json = json.JSONEncoder(allow_nan=False, separators=(",", ":")).encode


# ── results: how every store keeps one ─────────────────────────────────
def encode_result(result: Any) -> str | None:
    """A result as JSON text (None stays None).

    A result JSON cannot hold (a set, an object, NaN) is stored as
    ``{"$repr": repr(result), "$note": "not JSON-encodable: <why>"}``: the
    job still completed, and its result can still be read. So is a result
    whose text not every store can keep: a NUL character (``\\x00``) or a
    lone surrogate, which PostgreSQL refuses (``$note`` ``"not storable:
    ..."``); every store keeps the same thing.
    """
    if result is None:
        return None
    try:
        text = encode_json(result)
    except (TypeError, ValueError) as exc:
        return _described(result, f"not JSON-encodable: {exc}")
    # \u0000 and \udXXX escapes are rare: only then is the value walked.
    if "\\u0000" in text or "\\ud" in text:
        found = _unstorable_char(result)
        if found is not None:
            return _described(result, f"not storable: its text holds {found}")
    return text


def _described(result: Any, note: str) -> str:
    return encode_json({"$repr": storable_text(repr(result)), "$note": note})


def _unstorable_char(value: Any) -> str | None:
    """What in a JSON value's strings no store can be trusted to keep, or None."""
    if isinstance(value, str):
        if "\x00" in value:
            return "a NUL character (\\x00)"
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            return "a lone surrogate (not Unicode text)"
        return None
    if isinstance(value, dict):
        for key, item in value.items():
            found = _unstorable_char(key) or _unstorable_char(item)
            if found is not None:
                return found
    elif isinstance(value, list | tuple):
        for item in value:
            found = _unstorable_char(item)
            if found is not None:
                return found
    return None


def storable_text(text: str | None) -> str | None:
    """Text every store keeps as it is: a NUL character becomes the four
    characters ``\\x00`` and a lone surrogate its ``\\udXXX`` escape (no
    PostgreSQL text can hold either). Other text is returned unchanged.
    """
    if text is None:
        return None
    if "\x00" in text:
        text = text.replace("\x00", "\\x00")
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        text = text.encode("utf-8", "backslashreplace").decode("utf-8")
    return text


def decode_result(text: str | None) -> Any:
    """The stored result: the JSON value `encode_result` wrote (None for None)."""
    return None if text is None else json.loads(text)


def result_as_json(result: Any) -> Any:
    """A result as the JSON value a store would give back (for ``--json`` output)."""
    return decode_result(encode_result(result))


# ── trigger rules: how a shared store settles a job's dependencies ─────
_TERMINAL = frozenset(("completed", "failed", "timed_out", "cancelled"))


def settle_at_insert(
    rule: str, depends_on: Sequence[str], statuses: Mapping[str, str]
) -> tuple[list[str], int, str | None]:
    """A new job's dependencies settled by its trigger rule (`SharedStore.insert`).

    `statuses` gives each dependency's status now (``"pending"`` for one
    inserted earlier in the batch). Returns ``(waits_for, unmet, error)``:
    the dependencies still unfinished, how many it still waits for (0: due
    now, released by its rule), and the reason it is cancelled at once (None
    if it is not; when it is, `waits_for` is empty). The
    ended dependencies are settled in `depends_on` order, with `Upstreams`.
    An unknown `rule` is a `ValueError` naming it (`check_trigger_rule`).
    """
    if rule == ALL_SUCCESS:
        # Equivalent to the general case below, without building Upstreams.
        unmet = [d for d in depends_on if statuses.get(d) != "completed"]
        broken = [d for d in unmet if statuses.get(d) in _TERMINAL]
        if broken:
            return [], 0, f"upstream {broken[0]} {statuses[broken[0]]}"
        return unmet, len(unmet), None
    waits_for = [d for d in depends_on if statuses.get(d) not in _TERMINAL]
    upstreams = Upstreams(check_trigger_rule(rule), len(depends_on))
    for d in depends_on:
        status = statuses.get(d)
        if status not in _TERMINAL:
            continue
        run, reason = upstreams.settle(d, JobStatus(status))
        if run is False:
            return [], 0, reason
        if run:
            return waits_for, 0, None
    return waits_for, len(waits_for), None


def settle_dependent(
    rule: str, unmet: int, ended: Iterable[tuple[str, str]]
) -> tuple[bool | None, int, str]:
    """A waiting dependent after some of its upstreams ended (`SharedStore.finish`).

    `unmet` is how many upstreams it waited for (more than 0: a dependent at
    0 was released and is never settled again); `ended` is ``(upstream,
    status)`` for each of its upstreams that just reached a terminal status,
    in the order they did. Returns ``(True, 0, "")``: release it;
    ``(False, 0, reason)``: cancel it with `reason` (the upstreams it still
    waited for no longer matter, and it settles its own dependents as
    ``cancelled``); ``(None, unmet_left, "")``: it waits for the others.
    """
    upstreams = Upstreams(rule, unmet)
    for upstream, status in ended:
        run, reason = upstreams.settle(upstream, JobStatus(status))
        if run is not None:
            return run, 0, reason
    return None, upstreams.waiting, ""


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
    """

    before: float
    statuses: tuple[str, ...]


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


#: A cluster's limits as a shared store keeps them (JSON): ``{"executors":
#: {name: max running}, "job_types": {type: max running}, "rates": {type:
#: {"per_second": float, "burst": int}}}``. See docs/limits.md.
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


def check_max_lease_expiries(value: Any) -> int:
    """`value` as a bound on lease expiries: an int of at least 1."""
    if type(value) is not int or value < 1:
        raise ValueError(f"max_lease_expiries must be a whole number of at least 1, got {value!r}")
    return value


# ── the contracts ──────────────────────────────────────────────────────
class StoreBase(Protocol):
    """What every store has; built by a plugin's factory as ``factory(url)``."""

    #: The URL it was built from, password masked: every error message names it.
    url: str
    #: False means the scheduler does no store work at all (the ``memory``
    #: store); True means every job is kept in the store.
    durable: bool
    #: The store's own preference: True runs the scheduler in shared mode
    #: (`SharedStore`, several processes on one queue), False in one-owner mode
    #: (`Store`). A store may implement both contracts.
    shared: bool

    async def open(self, context: StoreContext) -> Snapshot:
        """Called once, first: create or migrate the schema and take the store.

        Refuse, with a `StoreError` naming it, a schema newer than this code, a
        file or database that is not a jobsched store, or (one-owner stores) a
        store another scheduler owns; change no data when refusing. With
        ``context.readonly`` create, migrate and lock nothing (a missing store
        is an error). Returns the rows to restore (`Snapshot`; empty for a
        shared store, and for a readonly open without ``context.load``).
        """
        ...

    async def close(self) -> None:
        """Called once, last (also after a failed `open`): release everything."""
        ...


@runtime_checkable
class Store(StoreBase, Protocol):
    """A store with **one owner**: one scheduler process keeps the queues in
    memory and journals every change here (the SQLite store)."""

    async def write(self, batch: Sequence[JobRow | ScheduleRow | PurgeRow]) -> None:
        """Upsert `batch` in **one transaction**: all rows or none.

        A `PurgeRow` (an operator purged finished jobs) deletes the rows it
        describes, after the batch's other rows are written.

        Each row is the full current state of its job or schedule, keyed by
        ``job_id`` / ``schedule_id``; rows come in the order the scheduler
        changed them, `JobRow` and `ScheduleRow` mixed. Writes are never
        concurrent (the next one starts after this one returned). On failure
        raise `StoreError` with nothing written; the scheduler retries the
        same state later.
        """
        ...


@runtime_checkable
class SharedStore(StoreBase, Protocol):
    """A store **several processes share** as one queue (PostgreSQL).

    Each method is one transaction, safe to call from many processes at once;
    a call that fails raises `StoreError` and changed nothing. Writes that may
    be retried after a lost answer (a dropped connection) must do no harm
    when repeated: guard them by the lease owner or make them idempotent.
    Wake-ups between processes (a NOTIFY, a file watch, a short poll) are the
    store's business: they reach the scheduler through `wait`,
    `wait_finished` and the three callbacks.
    """

    #: How long a claim's lease lasts, in seconds. The scheduler renews the
    #: leases it holds every ``lease_seconds / 3``; a lease not renewed in
    #: time (its process died) expires and `reap_expired` queues the job again.
    lease_seconds: float
    #: Callbacks the scheduler sets after `open` (None until then). Call them
    #: on the event loop thread, never from inside a store call's transaction.
    #: ``on_work()``: new work may be due (a job inserted, released, finished).
    on_work: Callable[[], None] | None
    #: ``on_cancel(job_id)``: some process asked to cancel this running job.
    on_cancel: Callable[[str], None] | None
    #: ``on_resync()``: notifications may have been missed (a reconnect).
    on_resync: Callable[[], None] | None

    # ── submitting ─────────────────────────────────────────────────────
    async def insert(self, jobs: Sequence[NewJob]) -> list[str]:
        """Insert `jobs` and their dependencies in one transaction.

        Keep an edge for every dependency, ended or not: `get` returns them
        as ``depends_on`` and `dependents` reads them by upstream.

        Returns one id per job, in order: the job's own, or, when the job was
        deduplicated, the id of the stored job that took its place (a job
        with its `NewJob.key` exists, or an unfinished job has its
        `NewJob.unique_key`; a later job in the batch that depends on it then
        depends on that job). Dependencies that already ended are settled
        by the job's `NewJob.trigger_rule` (`Upstreams`), in ``depends_on``
        order: a job its rule releases (for ``all_success``: every dependency
        completed) is pending at once, and one its rule can no longer meet is
        cancelled with the reason `Upstreams.settle` gives (for
        ``all_success``: ``last_error`` ``"upstream ID STATUS"``). An
        unknown dependency raises `StoreError` and inserts nothing. Wakes
        waiting processes (`wait`) when a job is due now.
        """
        ...

    # ── claims and leases ──────────────────────────────────────────────
    async def claim(self, n: int, owner: str) -> tuple[list[SharedJobRow], float | None]:
        """Take up to `n` due jobs for `owner`, in strategy order.

        Due means pending or retry_wait, released by its dependencies
        (``unmet`` 0: for ``all_success``, every one completed; see
        `NewJob.trigger_rule`), and ``run_at <= now``. Order is ascending
        ``(sort_key, seq)``. No job is claimed by two processes (lock rows,
        e.g. ``FOR UPDATE SKIP LOCKED``, or serialize claims). Each claimed
        job becomes ``running`` with ``attempts + 1``, ``started_at = now``,
        ``lease_owner = owner`` and ``lease_expires = now + lease_seconds``.
        With cluster limits stored (`sync_limits`) jobs at a limit are
        skipped, not waited for. While the queue is paused
        (`set_queue_paused`) nothing is claimed and the next due time is
        None; checking the flag costs no extra round trip.

        Returns the claimed rows (in claim order) and, when fewer than `n`
        were due, the wall time the next waiting job becomes due (None if
        none), so the caller can sleep until then. A claimed row that cannot
        be read (changed by hand: `checked_shared_job` raises `BadRowError`)
        is not returned: its job is failed with that error, as `finish`
        would write it, and the other rows are returned.
        """
        ...

    async def renew(self, job_ids: Iterable[str], owner: str) -> set[str]:
        """Extend `owner`'s leases on `job_ids` to ``now + lease_seconds``.

        Returns the ids whose lease `owner` no longer holds (expired and
        reaped, or finished elsewhere): their attempt may run twice.
        """
        ...

    async def reap_expired(self, max_expiries: int = MAX_LEASE_EXPIRIES) -> int:
        """Queue again (``pending``, lease cleared, attempts kept) every running
        job whose lease expired: its process died. Each such attempt goes to
        the job's history with status ``lease_expired`` (worker: the old
        owner), and counts in the job's ``lease_expiries``. A job whose
        count reaches `max_expiries` is not queued again: it ends ``failed``
        (``last_error`` ``"lease expired N times: ..."``, the same text in its
        history entry) and settles its dependents as `finish` does, so that
        a job that kills or blocks every worker that runs it cannot walk the
        cluster. `retry` sets the count back to 0. Returns how many were
        reaped."""
        ...

    async def release(self, job_ids: Iterable[str], owner: str) -> int:
        """Give back jobs `owner` claimed but never started (shutting down):
        ``pending`` again, lease cleared, the claim's attempt uncounted.
        Returns how many were released."""
        ...

    async def finish(self, outcomes: Sequence[Outcome], owner: str) -> list[str]:
        """Write ended attempts in one transaction; returns the ids written.

        Only jobs still ``running`` under `owner`'s lease are written (an
        expired lease means the job belongs to someone else now); the others
        are ignored. Sets status, result, error (when given), ``run_at`` (for
        retry_wait) and ``finished_at = now`` (terminal), clears the lease
        and the cancel request. In the same transaction each terminal job
        settles its waiting dependents by their trigger rule (`Upstreams`):
        one fewer unmet dependency each, released (``unmet`` 0) or cancelled
        with the reason `Upstreams.settle` gives (for ``all_success``, any
        end but completed: ``last_error`` ``"upstream ID STATUS"``); a
        dependent cancelled so settles its own dependents as ``cancelled``,
        and so on downstream. A dependent its rule released early is not
        touched by its other upstreams. Also in the same
        transaction, with one statement for the batch, each written outcome
        is appended to the job's history (`AttemptRow`, worker `owner`), and
        a completed job with `Outcome.result_ttl` gets ``result_expires``.
        Wakes waiting processes.
        """
        ...

    # ── wake-ups ───────────────────────────────────────────────────────
    async def wait(self, timeout: float) -> bool:
        """Return when another process may have made work due, or after
        `timeout` seconds (``inf``: no limit). True if woken, False on timeout."""
        ...

    async def wait_finished(self, timeout: float) -> bool:
        """Return when some job may have finished, or after `timeout` seconds.
        True if woken, False on timeout."""
        ...

    # ── cancelling ─────────────────────────────────────────────────────
    async def request_cancel(self, job_id: str) -> bool:
        """Cancel a job from any process; False if unknown or already finished.

        A waiting job is cancelled at once (``last_error`` ``"cancelled"``),
        and settles its dependents as `finish` does. A running one is flagged
        (``cancel_requested``) and its owner told (its ``on_cancel``); the
        owner stops the attempt and writes the outcome itself.
        """
        ...

    async def cancel_requests(self, owner: str) -> list[str]:
        """Ids of the jobs `owner` runs that someone asked to cancel (the
        scheduler polls this as a safety net for a lost ``on_cancel``)."""
        ...

    # ── cluster limits ─────────────────────────────────────────────────
    async def sync_limits(self, data: LimitsData | None) -> LimitsData | None:
        """Agree on the cluster's limits when a process opens the store.

        The first process with limits stores them; a process with `data`
        that differs from the stored limits is refused (`StoreError` showing
        both); a process without limits (None) follows the stored ones.
        Returns the limits in force (None: none).
        """
        ...

    async def set_limits(self, data: LimitsData | None) -> None:
        """Replace the cluster's limits (None or empty: no limits); wakes the
        waiting processes."""
        ...

    # ── recurring schedules ────────────────────────────────────────────
    async def add_schedule(self, schedule: SharedScheduleRow) -> SharedScheduleRow:
        """Create the schedule unless its id exists (then make it active
        again and keep its stored state); returns the schedule as stored."""
        ...

    async def get_schedule(self, schedule_id: str) -> SharedScheduleRow:
        """The schedule as stored now; `StoreError` if unknown."""
        ...

    async def fire_schedule(
        self, schedule_id: str, expected_next: float, new_next: float, job: NewJob
    ) -> bool:
        """Fire the period due at `expected_next` exactly once across processes.

        A compare-and-set: only if the active schedule's ``next_run`` is still
        `expected_next`, set it to `new_next` and, in the same transaction,
        insert `job` (as `insert` would) and count it (``fired + 1``,
        ``last_job_id``). If ``allow_overlap`` is false and the previous job
        is unfinished, the period is consumed but skipped (``skipped + 1``, no
        job). When the trigger's ``times`` is reached, set ``next_run`` to
        ``inf``. A paused schedule (`set_schedule_paused`) does not fire.
        Returns False if another process fired it first or the schedule is
        paused (nothing changed), True otherwise.
        """
        ...

    async def deactivate_schedule(self, schedule_id: str) -> bool:
        """Stop a schedule for every process; False if unknown or already stopped."""
        ...

    async def schedule_jobs(self, schedule_id: str) -> list[SharedJobRow]:
        """The jobs a schedule fired, in ``seq`` order (empty for an unknown schedule)."""
        ...

    # ── reading ────────────────────────────────────────────────────────
    async def get(self, job_id: str) -> SharedJobRow | None:
        """The job with this id as stored now (with its ``history`` and
        ``depends_on``), or None if there is none."""
        ...

    async def jobs(self, job_ids: Sequence[str] | None = None) -> list[SharedJobRow]:
        """Every job (or those of `job_ids` that exist), in ``seq`` order."""
        ...

    async def dependents(self, job_id: str) -> list[str] | None:
        """The ids of the jobs inserted to depend on `job_id` (its downstream
        jobs, waiting or not, ended or not), in ``seq`` order; None if no job
        has this id.

        One indexed read (the dependencies by ``upstream``), whatever the
        store holds: the dashboard's job page calls it. A dependent purged
        since is not listed.
        """
        ...

    async def counts(self) -> dict[str, int]:
        """How many jobs are in each status (statuses with none are left out).

        Cheap however many jobs the store holds: a shared store keeps the
        counts (``jobsched status`` and the stats read them).
        """
        ...

    async def unfinished(self, job_ids: Sequence[str]) -> int:
        """How many of `job_ids` exist and are not terminal yet."""
        ...

    async def page(
        self,
        statuses: Sequence[str] | None,
        type: str | None,
        text: str | None,
        limit: int,
        offset: int,
    ) -> tuple[list[SharedJobRow], int]:
        """One page of jobs, newest first (descending ``seq``), and how many match.

        Only jobs in `statuses` (None: any), of job type `type` (None: any)
        and, with `text`, whose id, name (``options["name"]``), type or
        arguments' JSON contain it, case-insensitively. Skips `offset`
        matching jobs and returns at most `limit`; the total counts every
        matching job. Rows come without ``history`` and ``depends_on``.
        """
        ...

    async def stats(self, since: float) -> StoreStats:
        """Counts, jobs finished per minute since `since` (wall clock), lease
        holders, running jobs per limit key, limits and the queue's pause flag,
        read in one transaction (`StoreStats`)."""
        ...

    # ── operator actions ───────────────────────────────────────────────
    async def retry(self, job_ids: Sequence[str]) -> list[str]:
        """Run failed, timed-out or cancelled jobs again; returns the ids moved.

        Each job of `job_ids` that is in one of those statuses becomes
        ``pending`` with ``attempts`` 0, ``run_at`` now, no lease,
        ``finished_at``, result, ``result_expires``, progress or cancel request;
        its history stays. A job that waits for dependencies counts the ones
        not completed again (``unmet``; with a trigger rule other than
        ``all_success``, the ones not finished: it runs once they have).
        Other ids (unknown, another status, or a job whose ``unique_key``
        another unfinished job holds now) are left as they are and not
        returned. Wakes waiting processes.
        """
        ...

    async def requeue(self, statuses: Sequence[str], type: str | None) -> list[str]:
        """`retry` every job in `statuses` (a subset of failed, timed_out and
        cancelled) of job type `type` (None: any); returns the ids moved, in
        ``seq`` order."""
        ...

    async def purge(self, before: float, statuses: Sequence[str]) -> int:
        """Delete the jobs in `statuses` (terminal ones only) that finished
        before `before` (wall clock), with their dependency edges and attempt
        history; returns how many jobs were deleted. Unfinished jobs are never
        deleted."""
        ...

    async def expire_results(self) -> int:
        """Remove every result whose ``result_expires`` has passed (the job
        stays, its result None); returns how many. Called by a reaper, never on
        the hot path."""
        ...

    async def set_progress(self, updates: Sequence[tuple[str, dict[str, Any]]], owner: str) -> None:
        """Store the progress of running jobs, in one statement.

        Each update is ``(job_id, {"done", "total", "message", "updated_at"})``;
        only jobs still ``running`` under `owner`'s lease are written (others
        are ignored: the attempt has ended or belongs to someone else).
        Wakes `wait_changed` waiters.
        """
        ...

    async def wait_changed(self, timeout: float) -> bool:
        """Return when some job may have changed (submitted, claimed, finished,
        retried, progressed, purged), or after `timeout` seconds. True if
        woken. For live views: it should cost the hot path no round trip (the
        PostgreSQL store sends a claim's notification from the claiming
        statement; the SQLite store's poll sees every commit)."""
        ...

    # ── the queue's pause flag ─────────────────────────────────────────
    async def set_queue_paused(self, paused: bool) -> bool:
        """Pause or resume claiming for the whole cluster; False if it already was.

        While paused `claim` returns no job (and no next due time); running
        jobs finish. Resuming wakes waiting processes.
        """
        ...

    async def queue_paused(self) -> bool:
        """Whether claiming is paused (`set_queue_paused`)."""
        ...

    # ── schedules: operator actions ────────────────────────────────────
    async def schedules(self) -> list[SharedScheduleRow]:
        """Every schedule (active or not), ordered by id."""
        ...

    async def set_schedule_paused(
        self, schedule_id: str, paused: bool, next_run: float | None = None
    ) -> bool:
        """Pause or resume a schedule; False if unknown or already so.

        A paused schedule does not fire (`fire_schedule` returns False for it).
        Resuming sets ``next_run`` to `next_run` when given (the caller
        computes the next period after now from the trigger).
        """
        ...

    async def trigger_schedule(self, schedule_id: str, job: NewJob) -> bool:
        """Insert `job` for the schedule now, once, without moving ``next_run``;
        counts it as fired (``fired + 1``, ``last_job_id``). Paused schedules
        may be triggered. False (nothing inserted) if the schedule is unknown."""
        ...


@runtime_checkable
class StoreReader(StoreBase, Protocol):
    """What ``jobsched status`` reads from a durable store, a page at a time.

    Every shared store offers it (these are `SharedStore` methods); a
    one-owner store may too (the SQLite file, in either mode), opened with
    ``StoreContext(readonly=True, load=False)``. None of these reads more
    than a page of jobs into memory, however many the store holds.
    """

    async def page(
        self,
        statuses: Sequence[str] | None,
        type: str | None,
        text: str | None,
        limit: int,
        offset: int,
    ) -> tuple[list[SharedJobRow], int]:
        """One page of jobs, newest first, and how many match (`SharedStore.page`;
        a one-owner store may refuse `text` with a `StoreError`)."""
        ...

    async def counts(self) -> dict[str, int]:
        """How many jobs are in each status (`SharedStore.counts`), cheaply."""
        ...

    async def schedules(self) -> list[SharedScheduleRow]:
        """Every recurring schedule, by id (`SharedStore.schedules`)."""
        ...


# The members each contract adds, for the checks below (tests keep them equal
# to the protocols).
BASE_MEMBERS = ("url", "durable", "shared", "open", "close")
STORE_MEMBERS = (*BASE_MEMBERS, "write")
READER_MEMBERS = (*BASE_MEMBERS, "page", "counts", "schedules")
SHARED_STORE_MEMBERS = (
    *BASE_MEMBERS,
    "lease_seconds",
    "on_work",
    "on_cancel",
    "on_resync",
    "insert",
    "claim",
    "renew",
    "reap_expired",
    "release",
    "finish",
    "wait",
    "wait_finished",
    "request_cancel",
    "cancel_requests",
    "sync_limits",
    "set_limits",
    "add_schedule",
    "get_schedule",
    "fire_schedule",
    "deactivate_schedule",
    "schedule_jobs",
    "get",
    "jobs",
    "dependents",
    "counts",
    "unfinished",
    "page",
    "stats",
    "retry",
    "requeue",
    "purge",
    "expire_results",
    "set_progress",
    "wait_changed",
    "set_queue_paused",
    "queue_paused",
    "schedules",
    "set_schedule_paused",
    "trigger_schedule",
)


# ── checking what a store returned ─────────────────────────────────────
_STATUSES = frozenset(s.value for s in JobStatus)


def _is_time(value: object) -> bool:
    return type(value) in (int, float) and math.isfinite(value)  # type: ignore[arg-type]


def _is_count(value: object) -> bool:
    return type(value) is int and value >= 0


def _is_flag(value: object) -> bool:
    return type(value) is bool


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
        and row.args[:1] == "{"
        and type(row.options) is str
        and row.options[:1] == "{"
        and type(row.key) in _TEXT_OR_NONE
        and type(row.last_error) in _TEXT_OR_NONE
        and type(row.schedule_id) in _TEXT_OR_NONE
        and type(row.depends_on) is tuple
        and all(type(d) is str for d in row.depends_on)
        and row.trigger_rule in TRIGGER_RULES
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
    for column in ("args", "options"):
        # JSON text as the scheduler writes it: compact, so an object starts
        # with "{" (a full decode waits for the restore, which names the job).
        if not getattr(row, column).startswith("{"):
            return f"{column} {_short(getattr(row, column))} is not a JSON object"
    for column in ("key", "result", "last_error", "schedule_id"):
        if not _is_text(getattr(row, column)):
            return f"{column} {_short(getattr(row, column))} is not text"
    if row.result is not None and not _is_json(row.result):
        return f"result {_short(row.result)} is not JSON"
    if not isinstance(row.depends_on, tuple | list) or not all(
        type(d) is str for d in row.depends_on
    ):
        return f"depends_on {_short(row.depends_on)} is not a list of job ids"
    if row.trigger_rule not in TRIGGER_RULES:
        return f"trigger_rule {_short(row.trigger_rule)} is not one of {', '.join(TRIGGER_RULES)}"
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
    if type(row.schedule_id) is not str:
        return f"schedule_id {_short(row.schedule_id)} is not text"
    for column in ("key", "last_job_id"):
        if not _is_text(getattr(row, column)):
            return f"{column} {_short(getattr(row, column))} is not text"
    if not _is_time(row.next_run):
        return f"next_run {_short(row.next_run)} is not a time"
    for column in ("allow_overlap", "active", "paused"):
        if not _is_flag(getattr(row, column)):
            return f"{column} {_short(getattr(row, column))} is not a flag"
    for column in ("fired", "skipped"):
        if not _is_count(getattr(row, column)):
            return f"{column} {_short(getattr(row, column))} is not a count"
    for column in ("trigger", "template"):
        value = getattr(row, column)
        if type(value) is not str:
            return f"{column} {_short(value)} is not text"
        if value or column == "trigger":  # a template is "" until the first fire
            try:
                decoded = json.loads(value)
            except ValueError:
                return f"{column} {_short(value)} is not JSON"
            if type(decoded) is not dict or (
                column == "trigger" and type(decoded.get("trigger")) is not dict
            ):
                return f"{column} {_short(value)} is not a JSON object as jobsched writes it"
    return None


# ── reading a shared store's rows: each column checked, in one place ───
def _is_time_or_none(value: object) -> bool:
    return value is None or _is_time(value)


def _is_number(value: object) -> bool:
    # Infinity included (a schedule's next run once it has ended, EDF's "no
    # deadline" in a sort key); NaN orders nothing.
    return type(value) in (int, float) and not math.isnan(value)  # type: ignore[arg-type]


def _is_id(value: object) -> bool:
    return type(value) is str and value != ""


def _is_object(value: object) -> bool:
    return type(value) is dict


def _is_object_or_none(value: object) -> bool:
    return value is None or type(value) is dict


def _is_status(value: object) -> bool:
    return type(value) is str and value in _STATUSES


def _is_rule(value: object) -> bool:
    return type(value) is str and value in TRIGGER_RULES


def _is_sort_key(value: object) -> bool:
    return type(value) is tuple and all(_is_number(x) for x in value)


def _are_ids(value: object) -> bool:
    return type(value) is tuple and all(_is_id(x) for x in value)


_Check = tuple[str, Callable[[Any], bool], str]
_SHARED_JOB_CHECKS: tuple[_Check, ...] = (
    ("job_id", _is_id, "a job id"),
    ("key", _is_text, "text"),
    ("type", _is_id, "a job type name"),
    ("args", _is_object, "a JSON object"),
    ("options", _is_object, "a JSON object"),
    ("status", _is_status, f"one of {', '.join(sorted(_STATUSES))}"),
    ("attempts", _is_count, "a count"),
    ("run_at", _is_time, "a time"),
    ("submitted_at", _is_time, "a time"),
    ("seq", _is_count, "a count"),
    ("sort_key", _is_sort_key, "a list of numbers"),
    ("unmet", _is_count, "a count"),
    ("lease_owner", _is_text, "text"),
    ("lease_expires", _is_time_or_none, "a time"),
    ("cancel_requested", _is_flag, "a flag"),
    ("last_error", _is_text, "text"),
    ("schedule_id", _is_text, "text"),
    ("submitted_by", _is_text, "text"),
    ("started_at", _is_time_or_none, "a time"),
    ("finished_at", _is_time_or_none, "a time"),
    ("unique_key", _is_text, "text"),
    ("progress", _is_object_or_none, "a JSON object"),
    ("result_expires", _is_time_or_none, "a time"),
    ("depends_on", _are_ids, "a list of job ids"),
    ("trigger_rule", _is_rule, f"one of {', '.join(TRIGGER_RULES)}"),
)
_ATTEMPT_CHECKS: tuple[_Check, ...] = (
    ("number", _is_count, "a count"),
    ("status", _is_id, "text"),
    ("error", _is_text, "text"),
    ("started_at", _is_time_or_none, "a time"),
    ("finished_at", _is_time_or_none, "a time"),
    ("worker", _is_text, "text"),
)
_SHARED_SCHEDULE_CHECKS: tuple[_Check, ...] = (
    ("schedule_id", _is_id, "a schedule id"),
    ("type", _is_id, "a job type name"),
    ("args", _is_object, "a JSON object"),
    ("options", _is_object, "a JSON object"),
    ("trigger", _is_object, "a JSON object"),
    ("next_run", _is_number, "a time"),
    ("allow_overlap", _is_flag, "a flag"),
    ("active", _is_flag, "a flag"),
    ("last_job_id", _is_text, "text"),
    ("fired", _is_count, "a count"),
    ("skipped", _is_count, "a count"),
    ("paused", _is_flag, "a flag"),
)


def bad_column(what: str, row_id: object, column: str, value: object, expected: str) -> BadRowError:
    """The `BadRowError` of a column that holds `value` where `expected` belongs."""
    return BadRowError(what, row_id, column, f"{_short(value)} is not {expected}")


def json_column(what: str, row_id: object, column: str, text: object) -> Any:
    """The value of a column a store keeps as JSON text (None stays None);
    `BadRowError` naming the row and the column if it is not JSON."""
    if text is None:
        return None
    if type(text) is not str:
        raise bad_column(what, row_id, column, text, "JSON text")
    try:
        return json.loads(text)
    except ValueError:
        raise bad_column(what, row_id, column, text, "JSON") from None


def _check(
    what: str, row_id: object, row: object, checks: tuple[_Check, ...], within: str = ""
) -> None:
    for column, test, expected in checks:
        value = getattr(row, column)
        if not test(value):
            raise bad_column(what, row_id, within + column, value, expected)


def checked_shared_job(row: SharedJobRow) -> SharedJobRow:
    """`row` if every column holds what `SharedJobRow` says, else a
    `BadRowError` naming the job and the column.

    A shared store passes every job row it reads through this (a row changed
    by hand must be named, never crash a reader or stall a worker). Only a
    completed job's `result` may be any JSON value.
    """
    # The common case first, in one expression: every claim reads its rows here.
    if (
        type(row.job_id) is str
        and row.job_id
        and type(row.type) is str
        and row.type
        and type(row.args) is dict
        and type(row.options) is dict
        and type(row.status) is str
        and row.status in _STATUSES
        and type(row.attempts) is int
        and row.attempts >= 0
        and type(row.run_at) in _TIME_TYPES
        and _isfinite(row.run_at)
        and type(row.submitted_at) in _TIME_TYPES
        and _isfinite(row.submitted_at)
        and type(row.seq) is int
        and row.seq >= 0
        and type(row.unmet) is int
        and row.unmet >= 0
        and type(row.sort_key) is tuple
        and all(type(x) in _TIME_TYPES and x == x for x in row.sort_key)  # x == x: not NaN
        and type(row.key) in _TEXT_OR_NONE
        and type(row.lease_owner) in _TEXT_OR_NONE
        and type(row.last_error) in _TEXT_OR_NONE
        and type(row.schedule_id) in _TEXT_OR_NONE
        and type(row.submitted_by) in _TEXT_OR_NONE
        and type(row.unique_key) in _TEXT_OR_NONE
        and (row.lease_expires is None or _is_time(row.lease_expires))
        and (row.started_at is None or _is_time(row.started_at))
        and (row.finished_at is None or _is_time(row.finished_at))
        and (row.result_expires is None or _is_time(row.result_expires))
        and type(row.cancel_requested) is bool
        and (row.progress is None or type(row.progress) is dict)
        and type(row.trigger_rule) is str
        and row.trigger_rule in TRIGGER_RULES
        and type(row.depends_on) is tuple
        and not row.depends_on
        and not row.history
    ):
        return row
    _check("job", row.job_id, row, _SHARED_JOB_CHECKS)
    for attempt in row.history:
        _check("job", row.job_id, attempt, _ATTEMPT_CHECKS, "attempt history's ")
    return row


def checked_shared_schedule(row: SharedScheduleRow) -> SharedScheduleRow:
    """`row` if every column holds what `SharedScheduleRow` says, else a
    `BadRowError` naming the schedule and the column."""
    _check("recurring schedule", row.schedule_id, row, _SHARED_SCHEDULE_CHECKS)
    return row


def _short(value: object) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def check_snapshot(url: str, snapshot: Snapshot) -> None:
    """Refuse a snapshot holding a row that could not be restored or shown.

    A row changed by hand (or by a broken store) - an unknown status, a time
    that is not a number, a result that is not JSON, an unknown trigger
    rule, a dependency on itself or a dependency cycle - raises `StoreError`
    naming the store and the row, before anything is restored. A store may
    call this in ``open`` before it writes anything, to leave such a file
    untouched.
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
    """A worker id unique across hosts and restarts (``host:pid:random``)."""
    return f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"


# ── finding a store ────────────────────────────────────────────────────
class StoreFactories(Protocol):
    """Where store factories are found by URL scheme (a `jobsched.PluginManager`)."""

    def resolve(self, kind: str, name: str) -> Any: ...


def _lacking(store: object, members: Sequence[str]) -> list[str]:
    return [name for name in members if not hasattr(store, name)]


def resolve_store(
    store: StoreBase | str | None, plugins: StoreFactories
) -> Store | SharedStore | None:
    """The store a scheduler was given: an instance, a URL, or None (memory, no store).

    A URL is built by the factory registered for its scheme. The result is
    checked against the contract it prefers (`SharedStore` when ``shared``,
    else `Store`); a `TypeError` names what it lacks.
    """
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
            store = factory(store)
        except (StoreError, ValueError) as exc:
            raise StoreError(str(exc)) from exc
    missing = _lacking(store, BASE_MEMBERS)
    if missing:
        raise TypeError(f"{store!r} is not a store: it lacks {', '.join(missing)}")
    if getattr(store, "shared", False):
        return as_shared_store(store)
    return as_store(store)


def offers_shared(store: object) -> bool:
    """Whether `store` implements `SharedStore` (several processes can share it)."""
    return not _lacking(store, SHARED_STORE_MEMBERS)


def as_store(store: object) -> Store:
    """`store` as a one-owner `Store`; `TypeError` naming what it lacks."""
    missing = _lacking(store, STORE_MEMBERS)
    if missing:
        raise TypeError(f"{store!r} is not a one-owner store: it lacks {', '.join(missing)}")
    return store  # type: ignore[return-value]


def as_shared_store(store: object) -> SharedStore:
    """`store` as a `SharedStore`; `TypeError` naming what it lacks."""
    missing = _lacking(store, SHARED_STORE_MEMBERS)
    if missing:
        raise TypeError(f"{store!r} is not a shared store: it lacks {', '.join(missing)}")
    return store  # type: ignore[return-value]


def as_store_reader(store: object) -> StoreReader:
    """`store` as a `StoreReader`; `TypeError` naming what it lacks."""
    missing = _lacking(store, READER_MEMBERS)
    if missing:
        raise TypeError(f"{store!r} cannot be read a page at a time: it lacks {', '.join(missing)}")
    return store  # type: ignore[return-value]


async def read_store(url: str, plugins: StoreFactories) -> Snapshot | None:
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
