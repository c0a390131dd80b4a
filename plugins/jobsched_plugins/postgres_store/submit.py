"""Submitting: inserting jobs and their dependencies, a batch in one statement.

The batch is planned in Python (which job resumes a stored one through its
key, which one is deduplicated by its unique key, which ones wait or are
cancelled by their dependencies) and written by one ``INSERT ... SELECT FROM
unnest(...)`` that also inserts the dependencies and notifies the workers.

A batch that depends on no stored job is first tried without reading
anything: on the autocommit connection that statement is the whole
transaction, one round trip. If a stored job holds one of its ids, keys or
unique keys, the plain INSERT fails with a unique violation and nothing is
written; the batch is then planned again from a read of those jobs, in one
transaction with the insert (also the path of a batch with stored
dependencies). A job another process inserts between that read and the
insert makes it fail the same way, and it is planned again.

A big batch without keys, unique keys or dependencies (what most submitters
send) has nothing to plan: it is written with ``COPY``, a transaction of its
own, then a NOTIFY, which the server stores about twice as fast. An id a
stored job holds fails it the same way, and it is then planned like any batch.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

import attrs

from jobsched.store import (
    JobKind,
    NewJob,
    PlainNewJobs,
    StoreError,
    pack_sort_key,
    settle_at_insert,
)

from .connection import CHANGED, NOW, WORK, Database, to_json

if TYPE_CHECKING:
    import psycopg
    from psycopg import sql

#: Statuses of an unfinished job: the ones a unique key is held in.
_UNFINISHED = ("pending", "running", "retry_wait")

# How often a batch is planned again because another process inserted a job
# it collides with in the meantime (each retry sees that job, so one is
# almost always enough).
_ATTEMPTS = 5

# The batch travels as one JSON document (json.dumps is far cheaper than
# adapting fifteen arrays); `upstreams` lists the dependencies it inserts.
_INSERT = (
    """
WITH batch AS MATERIALIZED (
    SELECT * FROM json_to_recordset(%s::json)
        AS t(job_id text, key text, type text, args jsonb, options jsonb, status text,
            run_at float8, submitted_at float8, sort_key bytea, upstreams text[],
            last_error text, schedule_id text, submitted_by text, unique_key text, ord bigint,
            unmet int, trigger_rule text, queue text)
), new AS (
    INSERT INTO {s}.jobs (job_id, key, type, args, options, status, run_at,
        submitted_at, sort_key, unmet, last_error, schedule_id, submitted_by,
        unique_key, finished_at, trigger_rule, queue, job_group)
    SELECT job_id, key, type, args, options, status, run_at, submitted_at, sort_key,
        unmet, last_error, schedule_id, submitted_by, unique_key,
        CASE WHEN status = 'cancelled' THEN """
    + NOW
    + """ END, trigger_rule, queue, options->>'group'
    FROM batch
    ORDER BY ord  -- seq follows the batch order
    RETURNING 1
), dependencies AS (
    INSERT INTO {s}.dependencies (job_id, upstream)
    SELECT job_id, unnest(upstreams) FROM batch
)
SELECT pg_notify(%s, CASE WHEN %s THEN %s ELSE %s END) WHERE %s"""
)

#: A batch of at least this many jobs without keys or dependencies is
#: written with COPY: the server parses rows faster than `json_to_recordset`
#: (about three times here), which outweighs COPY's extra round trip.
COPY_AT_LEAST = 64

# The fields a batch's jobs mostly share come last (see `_copy`).
_COPY = """COPY {s}.jobs (job_id, args, options, run_at, submitted_at,
    sort_key, type, schedule_id, submitted_by, queue, job_group, status) FROM STDIN"""

# FOR SHARE: a dependency that finishes while the batch is planned either
# waits for the batch's commit (and then finds its new dependents to settle)
# or has committed first (and is read as finished). Without it, a job that
# completes between this read and the commit leaves its new dependent waiting
# for it forever.
_LOOKUP = """
SELECT job_id, key, unique_key, status FROM {s}.jobs
WHERE job_id = ANY(%s) OR key = ANY(%s)
    OR (unique_key = ANY(%s) AND status IN ('pending', 'running', 'retry_wait'))
FOR SHARE
"""


@attrs.define
class _Stored:
    """What the database holds that bears on a batch (from `_LOOKUP`)."""

    #: job id -> status, for the batch's stored dependencies and every stored
    #: job one of the batch's ids, keys or unique keys names.
    status: dict[str, str] = attrs.field(factory=dict)
    by_key: dict[str, str] = attrs.field(factory=dict)
    #: unique key -> the unfinished job holding it.
    by_unique_key: dict[str, str] = attrs.field(factory=dict)


@attrs.define
class _Plan:
    """The rows one batch inserts, and the id each of its jobs answers with."""

    ids: list[str] = attrs.field(factory=list)
    #: (job, its status, every job it depends on (an edge each, ended or
    #: not: `dependents` lists it under each), how many it counts as unmet
    #: (0 once its trigger rule released it), its error if cancelled at once)
    rows: list[tuple[NewJob, str, list[str], int, str | None]] = attrs.field(factory=list)
    ready: bool = False


async def insert(db: Database, jobs: Sequence[NewJob]) -> list[str]:
    """Insert jobs and their dependencies in one transaction; returns their ids.

    A job whose `key` (or id) already exists, or whose `unique_key` an
    unfinished job holds, is not inserted: the existing job's id is returned
    in its place (that is how a job file resumes). Dependencies that already
    ended are settled by the job's trigger rule (`settle_at_insert`): it may
    be due at once, or cancelled. An unknown dependency refuses the whole
    batch (`StoreError`).
    """
    if not jobs:
        return []
    if len(jobs) >= COPY_AT_LEAST and (
        isinstance(jobs, PlainNewJobs)
        or not any(
            job.depends_on or job.key is not None or job.unique_key is not None for job in jobs
        )
    ):
        # Nothing to plan: every job is a new pending row (an id a stored
        # job holds fails the COPY, and the batch takes the informed path,
        # which is also where a retry after a lost NOTIFY ends: every id
        # resolves to its stored job).
        try:
            await db.statement(lambda conn: _copy(db, conn, jobs))
            if isinstance(jobs, PlainNewJobs):
                return list(jobs.job_ids)
            return [job.job_id for job in jobs]
        except _unique_violation():
            pass
    in_batch = {job.job_id for job in jobs}
    upstreams = sorted({d for job in jobs for d in job.depends_on} - in_batch)
    if not upstreams:
        plan = _plan(jobs, _Stored())

        async def optimistic(conn: psycopg.AsyncConnection[Any]) -> None:
            await _write(db, conn, plan)

        try:
            await db.statement(optimistic)
            return plan.ids
        except _unique_violation():
            pass  # a stored job holds one of its ids or keys: plan with it

    async def informed(conn: psycopg.AsyncConnection[Any]) -> list[str]:
        stored = await _lookup(db, conn, jobs, upstreams)
        plan = _plan(jobs, stored)
        await _write(db, conn, plan)
        return plan.ids

    for attempt in range(_ATTEMPTS):
        try:
            return await db.transaction(informed)
        except _unique_violation():
            if attempt == _ATTEMPTS - 1:
                raise
    raise AssertionError("unreachable")


def _unique_violation() -> type[Exception]:
    import psycopg

    return psycopg.errors.UniqueViolation


async def _lookup(
    db: Database, conn: psycopg.AsyncConnection[Any], jobs: Sequence[NewJob], upstreams: list[str]
) -> _Stored:
    """The stored jobs the batch depends on or collides with; refuses unknown dependencies."""
    cur = await conn.execute(*_lookup_statement(db, jobs, upstreams))
    return _stored(await cur.fetchall(), upstreams, StoreError)


def _lookup_statement(
    db: Database, jobs: Sequence[NewJob], upstreams: list[str]
) -> tuple[sql.Composed, list[Any]]:
    return db.q(_LOOKUP), [
        [job.job_id for job in jobs] + upstreams,
        [job.key for job in jobs if job.key is not None],
        [job.unique_key for job in jobs if job.unique_key is not None],
    ]


def _stored(
    rows: list[dict[str, Any]], upstreams: list[str], unknown: Callable[[str], Exception]
) -> _Stored:
    """What `_LOOKUP` found; `unknown` makes the error for a missing dependency."""
    stored = _Stored()
    for row in rows:
        stored.status[row["job_id"]] = row["status"]
        if row["key"] is not None:
            stored.by_key[row["key"]] = row["job_id"]
        if row["unique_key"] is not None and row["status"] in _UNFINISHED:
            stored.by_unique_key[row["unique_key"]] = row["job_id"]
    missing = [d for d in upstreams if d not in stored.status]
    if missing:
        raise unknown(f"unknown dependencies: {missing}")
    return stored


def _plan(jobs: Sequence[NewJob], stored: _Stored) -> _Plan:
    """Decide, in batch order, what each job becomes, as inserting them one by
    one would: the jobs of the batch see the ones before them."""
    plan = _Plan()
    statuses = dict(stored.status)
    by_key = dict(stored.by_key)
    by_unique_key = dict(stored.by_unique_key)
    alias: dict[str, str] = {}  # id in this batch -> id of the job it resolved to
    for job in jobs:
        depends_on = list(dict.fromkeys(alias.get(d, d) for d in job.depends_on))
        _, unmet, error = settle_at_insert(job.trigger_rule, depends_on, statuses)
        broken = error is not None
        status = "cancelled" if broken else "pending"
        existing = (
            (by_key.get(job.key) if job.key is not None else None)
            or (job.job_id if job.job_id in statuses else None)
            or (
                by_unique_key.get(job.unique_key)
                if job.unique_key is not None and status == "pending"
                else None
            )
        )
        if existing is not None:
            # Its key or id exists (resume, don't duplicate), or an
            # unfinished job has its unique_key (deduplicate).
            plan.ids.append(existing)
            alias[job.job_id] = existing
            continue
        plan.ids.append(job.job_id)
        plan.rows.append((job, status, depends_on, unmet, error))
        statuses[job.job_id] = status
        if job.key is not None:
            by_key[job.key] = job.job_id
        if job.unique_key is not None and status == "pending":
            by_unique_key[job.unique_key] = job.job_id
        if not broken and not unmet:
            plan.ready = True
    return plan


async def _write(db: Database, conn: psycopg.AsyncConnection[Any], plan: _Plan) -> None:
    """One statement: the planned jobs, their dependencies and one NOTIFY.

    "New work" if a job may be claimed (due now or later: a claimer sleeping
    until its next due job learns of an earlier one), else "changed" for the
    live views (dependents still waiting, jobs cancelled at once); none if
    every job resolved to a stored one.
    """
    await conn.execute(*_insert_statement(db, plan))


def _insert_statement(db: Database, plan: _Plan) -> tuple[sql.Composed, list[Any]]:
    notify = [db.channel, plan.ready, WORK, CHANGED, bool(plan.rows)]
    return db.q(_INSERT), [_batch_json(plan), *notify]


async def _copy(db: Database, conn: psycopg.AsyncConnection[Any], jobs: Sequence[NewJob]) -> None:
    """COPY `jobs` as new pending rows, then wake the workers.

    On an autocommit connection: the COPY is a transaction of its own (no
    BEGIN and COMMIT round trips), and the NOTIFY follows its commit.

    The rows are spelled here in COPY's text format, a chunk at a time: the
    fields a batch's jobs share (key, type, options, queue...) are spelled
    once per distinct value, where psycopg's `write_row` adapts every field
    of every row. `PlainNewJobs` name what their jobs share (`JobKind`):
    all but the id is spelled once per kind.
    """
    options_text = _JsonCache()
    shared: dict[tuple[Any, ...], str] = {}  # the last fields, by their values
    tails: dict[JobKind, str] = {}  # all but the id, by kind
    lines: list[str] = []
    cur = conn.cursor()
    async with cur.copy(db.q(_COPY)) as copy:
        for start in range(0, len(jobs), _COPY_CHUNK):
            # A chunk at a time: the server stores one while the next is spelled
            # (and a PlainNewJobs' slice described).
            chunk = jobs[start : start + _COPY_CHUNK]
            if isinstance(chunk, PlainNewJobs):
                _plain_copy_lines(chunk, lines, tails, shared, options_text)
            else:
                _copy_lines(chunk, lines, shared, options_text)
            await copy.write("".join(lines))
            lines.clear()
    await db.notify_work(conn)


#: Rows spelled per write of `_copy` (about psycopg's 32 KiB send buffer).
_COPY_CHUNK = 200


def _copy_lines(
    jobs: Sequence[NewJob],
    lines: list[str],
    shared: dict[tuple[Any, ...], str],
    options_text: _JsonCache,
) -> None:
    """Append the COPY lines of `jobs`; `shared` caches the fields jobs share."""
    times: dict[float, str] = {}
    for job in jobs:
        options = job.options
        same = (job.sort_key, job.type, job.schedule_id, job.submitted_by, job.queue)
        group = options.get("group")
        try:
            tail = shared[same, group]
        except KeyError:
            tail = shared[same, group] = "\t".join(
                (
                    # bytea's hex input, its backslash escaped for COPY.
                    "\\\\x" + pack_sort_key(job.sort_key).hex(),
                    *(_copy_text(v) for v in (job.type, job.schedule_id, job.submitted_by)),
                    _copy_text(job.queue),
                    _copy_text(group),
                    "pending",
                )
            )
        args = "{}" if not job.args else _copy_json(_dumps(job.args))
        # A batch's jobs mostly share their times (one submit's `now`).
        run_at = times.get(job.run_at) or times.setdefault(job.run_at, _float_text(job.run_at))
        submitted_at = times.get(job.submitted_at) or times.setdefault(
            job.submitted_at, _float_text(job.submitted_at)
        )
        lines.append(
            f"{_copy_text(job.job_id)}\t{args}\t{_copy_json(options_text(options))}\t"
            f"{run_at}\t{submitted_at}\t{tail}\n"
        )


def _plain_copy_lines(
    jobs: PlainNewJobs,
    lines: list[str],
    tails: dict[JobKind, str],
    shared: dict[tuple[Any, ...], str],
    options_text: _JsonCache,
) -> None:
    """`_copy_lines` for `PlainNewJobs`: a kind's first job is spelled as
    any job is, and the others of its kind take all of its line but the id."""
    job_ids = jobs.job_ids
    for i, kind in enumerate(jobs.kinds):
        tail = tails.get(kind)
        if tail is None:
            first: list[str] = []
            _copy_lines([jobs[i]], first, shared, options_text)
            tail = tails[kind] = first[0].partition("\t")[2]
        lines.append(f"{_copy_text(job_ids[i])}\t{tail}")


#: What COPY's text format escapes in a field.
_COPY_ESCAPES = str.maketrans({"\\": "\\\\", "\t": "\\t", "\n": "\\n", "\r": "\\r"})


def _copy_text(value: str | None) -> str:
    """A text field (None: NULL) for COPY's text format."""
    if value is None:
        return "\\N"
    if "\\" in value or "\t" in value or "\n" in value or "\r" in value:
        return value.translate(_COPY_ESCAPES)
    return value


def _copy_json(text: str) -> str:
    """JSON text for COPY's text format (JSON escapes control characters itself)."""
    return text.replace("\\", "\\\\") if "\\" in text else text


class _JsonCache:
    """JSON text of option dicts, computed once per distinct dict in a batch
    (a batch's jobs mostly share their options)."""

    def __init__(self) -> None:
        self._texts: dict[tuple[tuple[str, Any], ...], str] = {}

    def __call__(self, value: dict[str, Any]) -> str:
        try:
            key = tuple(value.items())
            text = self._texts.get(key)
        except TypeError:  # an unhashable value (a retry policy's fields)
            return _dumps(value)
        if text is None:
            text = self._texts[key] = _dumps(value)
        return text


def _dumps(value: Any) -> str:
    try:
        return json.dumps(value, allow_nan=False)
    except (TypeError, ValueError):
        return to_json(value)  # raises StoreError naming what cannot be stored


def _batch_json(plan: _Plan) -> str:
    records = [
        {
            "job_id": job.job_id,
            "key": job.key,
            "type": job.type,
            "args": job.args,
            "options": job.options,
            "status": status,
            "run_at": job.run_at,
            "submitted_at": job.submitted_at,
            # bytea's hex input (JSON holds no bytes).
            "sort_key": "\\x" + pack_sort_key(job.sort_key).hex(),
            "upstreams": upstreams,
            "last_error": error,
            "schedule_id": job.schedule_id,
            "submitted_by": job.submitted_by,
            "unique_key": job.unique_key,
            "ord": ord,
            "unmet": unmet,
            "trigger_rule": job.trigger_rule,
            "queue": job.queue,
        }
        for ord, (job, status, upstreams, unmet, error) in enumerate(plan.rows)
    ]
    try:
        return json.dumps(records, allow_nan=False)
    except (TypeError, ValueError):
        # Name what cannot be stored (to_json raises StoreError saying so).
        for job, *_ in plan.rows:
            to_json(job.args)
            to_json(job.options)
            to_json([job.run_at, job.submitted_at])
        raise


def _float_text(x: float) -> str:
    """A float as PostgreSQL's float8 input reads it."""
    if math.isfinite(x):
        return repr(x)
    if math.isnan(x):
        return "NaN"
    return "Infinity" if x > 0 else "-Infinity"


class InTransaction:
    """One try at inserting a batch on a connection of the application's, in
    its transaction (``Client.submit(conn=...)``, `in_transaction`): the
    statements of `insert`'s informed path, as data for a sync or an async
    driver to send. Its read first (when `reads`), then its INSERT, whose
    NOTIFY reaches the workers when that transaction commits.
    """

    #: How often a batch is planned again after a unique violation.
    attempts = _ATTEMPTS

    def __init__(self, db: Database, jobs: Sequence[NewJob]) -> None:
        self.db = db
        self.jobs = jobs
        in_batch = {job.job_id for job in jobs}
        self.upstreams = sorted({d for job in jobs for d in job.depends_on} - in_batch)
        #: Keys or unique keys: another transaction may insert the same ones meanwhile.
        self.racy = any(job.key is not None or job.unique_key is not None for job in jobs)
        #: The answer, once `write` planned the batch.
        self.ids: list[str] = []

    @property
    def reads(self) -> bool:
        """Whether the batch depends on stored jobs or may collide with one
        (a batch of fresh random ids without keys cannot)."""
        return self.racy or bool(self.upstreams)

    def lookup(self) -> tuple[sql.Composed, list[Any]]:
        """The read of the stored jobs the batch names (``FOR SHARE``)."""
        return _lookup_statement(self.db, self.jobs, self.upstreams)

    def write(
        self, found: list[dict[str, Any]], unknown: Callable[[str], Exception]
    ) -> tuple[sql.Composed, list[Any]] | None:
        """The INSERT, planned with what `lookup` `found`; None if every job
        resolved to a stored one. An unknown dependency raises `unknown`."""
        plan = _plan(self.jobs, _stored(found, self.upstreams, unknown))
        self.ids = plan.ids
        return _insert_statement(self.db, plan) if plan.rows else None
