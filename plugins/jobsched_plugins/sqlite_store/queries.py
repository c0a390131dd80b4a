"""Reading a shared file's jobs: one, several, counts, and as a `Snapshot`.

Every function runs in the store's thread, inside the caller's transaction.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Sequence
from typing import Any

import attrs

from jobsched.store import (
    AttemptRow,
    BadRowError,
    JobRow,
    QueueStatsRow,
    SharedJobRow,
    SharedScheduleRow,
    Snapshot,
    StoreStats,
    bad_column,
    checked_shared_job,
    checked_shared_schedule,
    json_column,
    queue_rows,
    unpack_sort_key,
)

from .connection import TERMINAL

#: The columns of schema version 2 (what ``jobsched status`` reads, so it
#: reads a file no process has migrated yet).
BASE_JOB_COLUMNS = (
    "job_id, key, type, args, options, status, attempts, run_at, submitted_at, seq, "
    "sort_key, unmet, lease_owner, lease_expires, cancel_requested, result, last_error, "
    "schedule_id, submitted_by, started_at, finished_at, unique_key"
)
JOB_COLUMNS = (
    BASE_JOB_COLUMNS + ", progress, result_expires, trigger_rule, lease_expiries, last_traceback, "
    "build_refusals, last_refusal, refused_by, queue, job_group"
)
SCHEDULE_COLUMNS = (
    "schedule_id, type, args, options, trigger, next_run, allow_overlap, active, "
    "last_job_id, fired, skipped, paused"
)
ATTEMPT_COLUMNS = "number, status, error, started_at, finished_at, worker, traceback"


_SCALARS = (str, int, float, bool, type(None))
# JSON object text -> its value, for objects of scalars only (a job's
# options, most jobs' arguments): a claim decodes the same few texts for
# every job. Each caller gets its own copy.
_decoded: dict[str, dict[str, Any]] = {}


def _object(text: str) -> Any:
    """`json.loads(text)`, a fresh value each call."""
    cached = _decoded.get(text)
    if cached is not None:
        return dict(cached)
    value = json.loads(text)
    if type(value) is dict and all(type(v) in _SCALARS for v in value.values()):
        if len(_decoded) >= 1024:
            _decoded.clear()  # arguments may all differ: stay bounded
        _decoded[text] = value
        return dict(value)
    return value


#: SQLite keeps flags as integers; anything else is left as found, for the
#: row's check to name.
_FLAGS: dict[Any, bool] = {0: False, 1: True}


#: What the columns after `BASE_JOB_COLUMNS` hold in a file from before
#: them (``jobsched status`` reads a file no process has migrated yet).
_LATER_COLUMNS = (None, None, "all_success", 0, None, 0, None, None, "default", None)
_JOB_COLUMN_COUNT = JOB_COLUMNS.count(",") + 1


def job_row(r: Sequence[Any]) -> SharedJobRow:
    """A row selected with `JOB_COLUMNS` (or `BASE_JOB_COLUMNS` and some of
    the later ones) as a `SharedJobRow`: every column decoded and checked
    here (a `BadRowError` names the job and the column)."""
    if len(r) < _JOB_COLUMN_COUNT:
        r = (*r, *_LATER_COLUMNS[len(r) - _JOB_COLUMN_COUNT :])
    progress, refused_by = r[22], r[29]
    try:
        row = SharedJobRow(
            job_id=r[0],
            key=r[1],
            type=r[2],
            args=_object(r[3]),
            options=_object(r[4]),
            status=r[5],
            attempts=r[6],
            run_at=r[7],
            submitted_at=r[8],
            seq=r[9],
            sort_key=unpack_sort_key(r[10]),
            unmet=r[11],
            lease_owner=r[12],
            lease_expires=r[13],
            cancel_requested=_FLAGS.get(r[14], r[14]),
            result=None if r[15] is None else json.loads(r[15]),
            last_error=r[16],
            schedule_id=r[17],
            submitted_by=r[18],
            started_at=r[19],
            finished_at=r[20],
            unique_key=r[21],
            progress=None if progress is None else json.loads(progress),
            result_expires=r[23],
            trigger_rule=r[24],
            lease_expiries=r[25],
            last_traceback=r[26],
            build_refusals=r[27],
            last_refusal=r[28],
            refused_by=() if refused_by is None else _refusers(r[0], refused_by),
            queue=r[30],
            job_group=r[31],
        )
    except (TypeError, ValueError, OverflowError):
        raise _undecodable(r) from None
    return checked_shared_job(row)


_JSON_JOB_COLUMNS = (
    (3, "args"),
    (4, "options"),
    (15, "result"),
    (22, "progress"),
    (29, "refused_by"),
)


def _refusers(job_id: Any, text: Any) -> tuple[Any, ...]:
    """The ``refused_by`` column: NULL or a JSON list (of refusers' names)."""
    if text is None:
        return ()
    value = json.loads(text)
    if type(value) is not list:
        raise bad_column("job", job_id, "refused_by", text, "a JSON list")
    return tuple(value)


def _undecodable(r: Sequence[Any]) -> BadRowError:
    """Which column of a job row `job_row` could not decode."""
    for i, column in _JSON_JOB_COLUMNS:
        if i < len(r):
            try:
                json_column("job", r[0], column, r[i])
            except BadRowError as exc:
                return exc
    return bad_column("job", r[0], "sort_key", r[10], "a packed strategy key")


def schedule_row(r: Sequence[Any]) -> SharedScheduleRow:
    """A row selected with `SCHEDULE_COLUMNS` as a `SharedScheduleRow`, checked
    as `job_row` checks jobs."""
    return checked_shared_schedule(
        SharedScheduleRow(
            schedule_id=r[0],
            type=r[1],
            args=json_column("recurring schedule", r[0], "args", r[2]),
            options=json_column("recurring schedule", r[0], "options", r[3]),
            trigger=json_column("recurring schedule", r[0], "trigger", r[4]),
            next_run=r[5],
            allow_overlap=_FLAGS.get(r[6], r[6]),
            active=_FLAGS.get(r[7], r[7]),
            last_job_id=r[8],
            fired=r[9],
            skipped=r[10],
            paused=_FLAGS.get(r[11], r[11]),
        )
    )


def _in(ids: Sequence[str]) -> str:
    return ",".join("?" * len(ids))


def get(conn: sqlite3.Connection, job_id: str) -> SharedJobRow | None:
    """One job with its attempt history and dependencies, or None."""
    r = conn.execute(
        f"SELECT {JOB_COLUMNS} FROM jobsched_shared_jobs WHERE job_id = ?", (job_id,)
    ).fetchone()
    if r is None:
        return None
    history = tuple(
        AttemptRow(
            number=a[0],
            status=a[1],
            error=a[2],
            started_at=a[3],
            finished_at=a[4],
            worker=a[5],
            traceback=a[6],
        )
        for a in conn.execute(
            f"SELECT {ATTEMPT_COLUMNS} FROM jobsched_shared_attempts WHERE job_id = ? ORDER BY id",
            (job_id,),
        )
    )
    depends_on = tuple(
        d[0]
        for d in conn.execute(
            "SELECT upstream FROM jobsched_shared_dependencies WHERE job_id = ? ORDER BY upstream",
            (job_id,),
        )
    )
    return checked_shared_job(attrs.evolve(job_row(r), history=history, depends_on=depends_on))


def dependents(conn: sqlite3.Connection, job_id: str) -> list[str] | None:
    """The ids of the jobs that depend on `job_id`, in submit order; None if unknown.

    The dependencies' primary key (``upstream, job_id``) finds the edges, and
    the jobs' unique ``job_id`` their order, without reading other rows.
    """
    known = conn.execute("SELECT 1 FROM jobsched_shared_jobs WHERE job_id = ?", (job_id,))
    if known.fetchone() is None:
        return None
    return [
        r[0]
        for r in conn.execute(
            "SELECT d.job_id FROM jobsched_shared_dependencies d "
            "JOIN jobsched_shared_jobs j ON j.job_id = d.job_id "
            "WHERE d.upstream = ? ORDER BY j.seq",
            (job_id,),
        )
    ]


def dependents_of(conn: sqlite3.Connection, job_ids: Sequence[str]) -> dict[str, list[str]]:
    """`dependents` of each of `job_ids` that exists, through the same
    indexes, 500 ids a statement (SQLite's limit on bound parameters)."""
    ids = list(dict.fromkeys(job_ids))
    found: dict[str, list[str]] = {}
    edges: list[tuple[int, str, str]] = []
    for i in range(0, len(ids), 500):
        chunk = ids[i : i + 500]
        known = conn.execute(
            f"SELECT job_id FROM jobsched_shared_jobs WHERE job_id IN ({_in(chunk)})", chunk
        )
        found.update((r[0], []) for r in known)
        edges += conn.execute(
            "SELECT j.seq, d.upstream, d.job_id FROM jobsched_shared_dependencies d "
            "JOIN jobsched_shared_jobs j ON j.job_id = d.job_id "
            f"WHERE d.upstream IN ({_in(chunk)})",
            chunk,
        ).fetchall()
    for _, upstream, job_id in sorted(edges):
        found.setdefault(upstream, []).append(job_id)
    return found


def jobs(
    conn: sqlite3.Connection,
    job_ids: Sequence[str] | None = None,
    columns: str = JOB_COLUMNS,
) -> list[SharedJobRow]:
    if job_ids is None:
        cur = conn.execute(f"SELECT {columns} FROM jobsched_shared_jobs ORDER BY seq")
        return [job_row(r) for r in cur]
    rows: list[SharedJobRow] = []
    ids = list(job_ids)
    for i in range(0, len(ids), 500):  # SQLite's limit on bound parameters
        chunk = ids[i : i + 500]
        cur = conn.execute(
            f"SELECT {JOB_COLUMNS} FROM jobsched_shared_jobs WHERE job_id IN ({_in(chunk)})",
            chunk,
        )
        rows += [job_row(r) for r in cur]
    rows.sort(key=lambda r: r.seq)
    return rows


def kept_counts(conn: sqlite3.Connection) -> dict[str, int]:
    """How many jobs are in each status, from the counters kept since schema
    version 7: a few rows, however many jobs."""
    return dict(conn.execute("SELECT status, n FROM jobsched_shared_counts"))


def add_counts(conn: sqlite3.Connection, changes: dict[str, int]) -> None:
    """Add so many jobs per status (fewer, where negative) to the kept counts.

    Every INSERT into the jobs table calls this in its transaction, and so
    do the claim (pending to running) and the finish (running to completed);
    the other status changes and deletes are counted by triggers (migrations
    versions 7 and 16).
    """
    conn.executemany(
        "INSERT INTO jobsched_shared_counts (status, n) VALUES (?, ?) "
        "ON CONFLICT (status) DO UPDATE SET n = n + excluded.n",
        [(status, n) for status, n in changes.items() if n],
    )


def unfinished(conn: sqlite3.Connection, job_ids: Sequence[str]) -> int:
    return sum(1 for r in jobs(conn, job_ids) if r.status not in TERMINAL)


def snapshot(conn: sqlite3.Connection) -> Snapshot:
    """A shared file's jobs as `JobRow` objects, for ``jobsched status``."""
    deps: dict[str, list[str]] = {}
    for job_id, upstream in conn.execute(
        "SELECT job_id, upstream FROM jobsched_shared_dependencies"
    ):
        deps.setdefault(job_id, []).append(upstream)
    # A file no process has migrated to version 4 yet has no rules: all default.
    rules: dict[str, str] = {}
    if any(r[1] == "trigger_rule" for r in conn.execute("PRAGMA table_info(jobsched_shared_jobs)")):
        rules = dict(
            conn.execute(
                "SELECT job_id, trigger_rule FROM jobsched_shared_jobs "
                "WHERE trigger_rule <> 'all_success'"
            ).fetchall()
        )
    rows = [
        JobRow(
            job_id=r.job_id,
            type=r.type,
            status=r.status,
            run_at=r.run_at,
            submitted_at=r.submitted_at,
            seq=r.seq,
            key=r.key,
            args=json.dumps(r.args),
            options=json.dumps(r.options),
            # key=str: a tampered id is named by the row's check, not a crash here.
            depends_on=tuple(sorted(deps.get(r.job_id, ()), key=str)),
            attempts=r.attempts,
            finished_at=r.finished_at,
            result=None if r.result is None else json.dumps(r.result),
            last_error=r.last_error,
            schedule_id=r.schedule_id,
            trigger_rule=rules.get(r.job_id, "all_success"),
        )
        for r in jobs(conn, columns=BASE_JOB_COLUMNS)
    ]
    return Snapshot(jobs=rows)


def status_and_type_filter(
    statuses: Sequence[str] | None, type: str | None
) -> tuple[list[str], list[Any]]:
    """The WHERE terms and parameters of a page's status and type filters
    (None: any); the shared and the single-owner tables name them alike."""
    where: list[str] = []
    params: list[Any] = []
    if statuses is not None:
        where.append(f"status IN ({_in(statuses)})")
        params += statuses
    if type is not None:
        where.append("type = ?")
        params.append(type)
    return where, params


def text_filter(text: str) -> tuple[str, list[Any]]:
    """The WHERE term and parameters of a page's text search (the job's id,
    type, arguments or name; both modes' tables name them alike)."""
    # instr, not LIKE: the text is taken literally (no % or _ wildcards).
    term = (
        "(instr(lower(job_id), ?) OR instr(lower(type), ?) OR instr(lower(args), ?) "
        "OR instr(lower(coalesce(json_extract(options, '$.name'), '')), ?))"
    )
    return term, [text.lower()] * 4


def page(
    conn: sqlite3.Connection,
    statuses: Sequence[str] | None,
    type: str | None,
    text: str | None,
    limit: int,
    offset: int,
) -> tuple[list[SharedJobRow], int]:
    """One page of matching jobs, newest first, and how many match."""
    where, params = status_and_type_filter(statuses, type)
    if text:
        term, values = text_filter(text)
        where.append(term)
        params += values
    clause = f" WHERE {' AND '.join(where)}" if where else ""
    if type is None and not text:  # by status alone: the kept counts say how many
        found = kept_counts(conn)
        total = sum(n for status, n in found.items() if statuses is None or status in statuses)
    else:
        total = conn.execute(
            f"SELECT count(*) FROM jobsched_shared_jobs{clause}", params
        ).fetchone()[0]
    cur = conn.execute(
        f"SELECT {JOB_COLUMNS} FROM jobsched_shared_jobs{clause} ORDER BY seq DESC "
        "LIMIT ? OFFSET ?",
        [*params, limit, offset],
    )
    return [job_row(r) for r in cur], int(total)


def finished_by_minute(
    conn: sqlite3.Connection, table: str, since: float
) -> list[tuple[float, str, int]]:
    """How many jobs of `table` ended in each status, per minute since `since`
    (the shared and the single-owner tables name these columns alike)."""
    return [
        (float(minute), status, n)
        for minute, status, n in conn.execute(
            "SELECT CAST(finished_at / 60 AS INTEGER) * 60, status, count(*) "
            f"FROM {table} WHERE finished_at >= ? "
            "AND status IN ('completed', 'failed', 'timed_out', 'cancelled') GROUP BY 1, 2",
            (since,),
        )
    ]


def running_by_type_and_executor(
    conn: sqlite3.Connection, table: str
) -> tuple[dict[str, int], dict[str, int]]:
    """How many jobs of `table` run, by job type and by executor."""
    running_types: dict[str, int] = {}
    running_executors: dict[str, int] = {}
    for kind, executor, n in conn.execute(
        f"SELECT type, json_extract(options, '$.executor'), count(*) FROM {table} "
        "WHERE status = 'running' GROUP BY 1, 2"
    ):
        running_types[kind] = running_types.get(kind, 0) + n
        if executor is not None:
            running_executors[executor] = running_executors.get(executor, 0) + n
    return running_types, running_executors


def stats(conn: sqlite3.Connection, since: float, at: float) -> StoreStats:
    """The queue at a glance (see `SharedStore.stats`), read in the caller's transaction."""
    leases = [
        (owner, n, expires)
        for owner, n, expires in conn.execute(
            "SELECT lease_owner, count(*), max(lease_expires) FROM jobsched_shared_jobs "
            "WHERE status = 'running' AND lease_owner IS NOT NULL GROUP BY 1 ORDER BY 1"
        )
    ]
    running_types, running_executors = running_by_type_and_executor(conn, "jobsched_shared_jobs")
    return StoreStats(
        counts=kept_counts(conn),
        finished=finished_by_minute(conn, "jobsched_shared_jobs", since),
        leases=leases,
        running_types=running_types,
        running_executors=running_executors,
        limits=stored_limits(conn),
        rate_tats=dict(conn.execute("SELECT job_type, tat FROM jobsched_shared_rate_buckets")),
        queue_paused=queue_paused(conn),
        at=at,
        running_queues=dict(
            conn.execute(
                "SELECT queue, count(*) FROM jobsched_shared_jobs WHERE status = 'running' "
                "GROUP BY 1"
            )
        ),
    )


def stored_limits(conn: sqlite3.Connection) -> dict[str, Any] | None:
    """The cluster's limits (`SharedStore.sync_limits`), None without any."""
    r = conn.execute("SELECT data FROM jobsched_shared_limits WHERE id = 1").fetchone()
    if r is None:
        return None
    data = json_column("limits row", 1, "data", r[0])
    if type(data) is not dict:
        raise bad_column("limits row", 1, "data", r[0], "a JSON object")
    return data


def queue_paused(conn: sqlite3.Connection, queue: str | None = None) -> bool:
    """Whether every queue is paused (a row in ``jobsched_shared_paused``), or
    with `queue`, that queue on its own (``jobsched_shared_paused_queues``)."""
    if queue is None:
        return conn.execute("SELECT 1 FROM jobsched_shared_paused").fetchone() is not None
    found = conn.execute(
        "SELECT 1 FROM jobsched_shared_paused_queues WHERE queue = ?", (queue,)
    ).fetchone()
    return found is not None


def paused_queues(conn: sqlite3.Connection) -> set[str]:
    """The queues paused on their own."""
    return {r[0] for r in conn.execute("SELECT queue FROM jobsched_shared_paused_queues")}


def queue_stats(conn: sqlite3.Connection, since: float, at: float) -> list[QueueStatsRow]:
    """Each queue at a glance (`SharedStore.queue_stats`), in the caller's
    transaction: the unfinished jobs and those finished since `since`."""
    found = {
        queue: {"ready": ready, "oldest": oldest, "running": running, "finished": finished}
        for queue, ready, oldest, running, finished in conn.execute(
            """SELECT queue,
                sum(status IN ('pending', 'retry_wait') AND unmet = 0 AND run_at <= :at),
                min(CASE WHEN status IN ('pending', 'retry_wait') AND unmet = 0
                    AND run_at <= :at THEN run_at END),
                sum(status = 'running'),
                sum(finished_at >= :since
                    AND status IN ('completed', 'failed', 'timed_out', 'cancelled'))
            FROM jobsched_shared_jobs
            WHERE status IN ('pending', 'retry_wait', 'running') OR finished_at >= :since
            GROUP BY queue""",
            {"at": at, "since": since},
        )
    }
    return queue_rows(found, paused_queues(conn))
