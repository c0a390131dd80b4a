"""Opening a file (in either mode), and the single-owner mode's journal.

In the single-owner mode one scheduler owns the file: `open` returns every
job and schedule to restore; `write` stores a batch of full rows in one
transaction. One scheduler owns a file at a time (a lock file
``<path>.lock`` held with ``flock``, released by the OS if the process
dies); ``jobsched status`` reads without it.
"""

from __future__ import annotations

import json
import operator
import os
import sqlite3
from collections.abc import Sequence
from typing import Any

from jobsched.store import (
    BadRowError,
    JobRow,
    PurgeRow,
    ScheduleRow,
    Snapshot,
    StoreContext,
    StoreError,
    check_snapshot,
)

from . import migrations, queries
from .connection import Database

_JOB_COLUMNS = (
    "job_id, key, type, args, options, depends_on, status, attempts, run_at, "
    "submitted_at, finished_at, seq, result, last_error, schedule_id, trigger_rule, "
    "last_traceback"
)
# The write binds a row's attributes in this order, read in one C call
# (`_job_values`), with the depends_on JSON appended last.
_BOUND = (
    "job_id, key, type, args, options, status, attempts, run_at, "
    "submitted_at, finished_at, seq, result, last_error, schedule_id, trigger_rule, "
    "last_traceback"
)
_job_values = operator.attrgetter(*_BOUND.split(", "))
_NO_DEPENDENCIES = ("[]",)
# What never changes after submit (type, args, ...) is written by the insert
# and left alone by the update.
_UPSERT_JOB = f"""
INSERT INTO jobsched_jobs ({_BOUND}, depends_on) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)
ON CONFLICT (job_id) DO UPDATE SET
    status = excluded.status, attempts = excluded.attempts, run_at = excluded.run_at,
    finished_at = excluded.finished_at, result = excluded.result,
    last_error = excluded.last_error, last_traceback = excluded.last_traceback,
    -- A job written again without its schedule (a retried job, an expired
    -- result) keeps the one it was fired by: a schedule is never taken away.
    schedule_id = coalesce(excluded.schedule_id, jobsched_jobs.schedule_id)
"""
# A key is unique among the jobs a scheduler knows, not forever: once a job
# has left the scheduler's history its key may be submitted again. The new job
# takes the key; the old row stays, as history, without it.
_RELEASE_KEY = "UPDATE jobsched_jobs SET key = NULL WHERE key = ? AND job_id <> ?"
_SCHEDULE_COLUMNS = (
    "schedule_id, key, template, trigger, next_run, allow_overlap, active, "
    "last_job_id, fired, skipped, paused"
)
_UPSERT_SCHEDULE = f"""
INSERT INTO jobsched_schedules ({_SCHEDULE_COLUMNS}) VALUES (?,?,?,?,?,?,?,?,?,?,?)
ON CONFLICT (schedule_id) DO UPDATE SET
    next_run = excluded.next_run, allow_overlap = excluded.allow_overlap,
    active = excluded.active, last_job_id = excluded.last_job_id,
    fired = excluded.fired, skipped = excluded.skipped, paused = excluded.paused
"""
# SQLite stores the flag as 0/1; anything else was written by hand and is
# handed to check_snapshot as it is, which refuses it naming the schedule.
_FLAGS = {0: False, 1: True}


def open_file(db: Database, context: StoreContext, mode: str) -> tuple[Snapshot, str]:
    """Open the file in `mode` (in the store's thread); the rows to restore and the mode.

    Read and check everything before the first write, so that a file
    jobsched refuses is left exactly as it was. Readonly (``jobsched
    status``) reads a file of either mode; a shared file's jobs come back as
    `JobRow` objects. An operator (`Client`) opens a file of either mode,
    and a single-owner one without taking it (no rows, no write).
    """
    path = db.path
    existed = os.path.exists(path)
    if context.readonly:
        if not existed:
            raise StoreError(f"{db.url}: no such file: {path}{db.hint()}")
    else:
        folder = os.path.dirname(os.path.abspath(path))
        if not os.path.isdir(folder):
            raise StoreError(f"{db.url}: folder {folder} does not exist{db.hint()}")
        if mode == migrations.SINGLE_OWNER:
            db.take_ownership()
    conn = None
    try:
        conn = db.connect(context.readonly)
        found, _ = migrations.file_mode(conn, db.url, path, readonly=context.readonly)
        # A reader, or an operator (`Client`) on a single-owner file, reads
        # the file in its mode; an operator's writes borrow the ownership
        # (`Database.as_owner`). Nothing is written at open.
        operator = context.operator and found == migrations.SINGLE_OWNER
        if context.readonly or operator:
            mode = found or mode
        else:
            migrations.refuse_other_mode(db.url, path, found, mode)
        if operator or found is None or (context.readonly and not context.load):
            snapshot = Snapshot()
        elif found == migrations.SHARED:
            snapshot = queries.snapshot(conn) if context.readonly else Snapshot()
        else:
            snapshot = load(conn, db.url)
        check_snapshot(db.url, snapshot)
        if not context.readonly and not operator:
            _claim(db, conn, context, create=found is None, mode=mode)
    except BaseException as exc:
        if conn is not None:
            conn.close()
        db.release_ownership()
        if not existed and not context.readonly:
            db.remove_new_file()
        if isinstance(exc, sqlite3.Error):
            raise db.open_error(exc, context.readonly) from exc
        if isinstance(exc, BadRowError):
            raise exc.in_store(db.url) from None
        raise
    db.conn = conn
    return snapshot, mode


def _claim(
    db: Database, conn: sqlite3.Connection, context: StoreContext, *, create: bool, mode: str
) -> None:
    """Make the checked file ours: WAL mode, the schema on a new file, who opened it."""
    db.use_wal(conn)
    # One write at open: it creates the schema on a new file, records who
    # opened it, and fails now (not at the first batch) if another
    # connection holds the write lock or the disk is full.
    conn.execute("BEGIN IMMEDIATE")
    try:
        if create:
            # Another process may have created it since we looked (shared mode).
            found, _ = migrations.file_mode(conn, db.url, db.path, readonly=False)
            migrations.refuse_other_mode(db.url, db.path, found, mode)
            if found is None:
                migrations.create(conn, mode)
        if mode == migrations.SHARED:
            migrations.migrate_shared(conn)
        else:
            migrations.migrate_single_owner(conn)
        conn.execute(
            "INSERT OR REPLACE INTO jobsched_meta VALUES ('opened_by', ?)", (context.worker_id,)
        )
        conn.execute("COMMIT")
    except BaseException:
        if conn.in_transaction:
            conn.execute("ROLLBACK")
        raise


def load(conn: sqlite3.Connection, url: str) -> Snapshot:
    """Every job and schedule of a single-owner file."""
    return Snapshot(jobs=job_rows(conn, url, "ORDER BY seq"), schedules=schedule_rows(conn))


def job_rows(
    conn: sqlite3.Connection, url: str, tail: str = "", params: Sequence[Any] = ()
) -> list[JobRow]:
    """The jobs ``SELECT ... FROM jobsched_jobs {tail}`` finds (`tail`: a
    filter, an order, a limit, bound to `params`), read as a restore reads
    them; a broken ``depends_on`` is a `StoreError` naming the job."""
    columns = _JOB_COLUMNS
    if not has_column(conn, "jobsched_jobs", "trigger_rule"):
        # A file from before version 4, read before it is migrated (or
        # readonly, never migrated): every job has the default rule.
        columns = columns.replace("trigger_rule", "'all_success'")
    if not has_column(conn, "jobsched_jobs", "last_traceback"):
        columns = columns.replace("last_traceback", "NULL")  # before version 9
    return [
        JobRow(
            job_id=r[0],
            key=r[1],
            type=r[2],
            args=r[3],
            options=r[4],
            depends_on=_depends_on(url, r[0], r[5]),
            status=r[6],
            attempts=r[7],
            run_at=r[8],
            submitted_at=r[9],
            finished_at=r[10],
            seq=r[11],
            result=r[12],
            last_error=r[13],
            schedule_id=r[14],
            trigger_rule=r[15],
            last_traceback=r[16],
        )
        for r in conn.execute(f"SELECT {columns} FROM jobsched_jobs {tail}", params)
    ]


def _depends_on(url: str, job_id: str, text: Any) -> tuple[str, ...]:
    try:
        depends_on = json.loads(text)
        if not isinstance(depends_on, list):
            raise TypeError("not a list of job ids")
    except (TypeError, ValueError) as exc:
        raise StoreError(
            f"{url}: job {job_id} has a broken depends_on column {text!r}: {exc}; "
            "jobsched left it unchanged"
        ) from None
    return tuple(depends_on)


def schedule_rows(conn: sqlite3.Connection) -> list[ScheduleRow]:
    """Every recurring schedule of a single-owner file, by id."""
    schedule_columns = _SCHEDULE_COLUMNS
    if not has_column(conn, "jobsched_schedules", "paused"):
        # A file from before version 6: nothing was kept paused.
        schedule_columns = schedule_columns.replace("paused", "0")
    return [
        ScheduleRow(
            schedule_id=r[0],
            key=r[1],
            template=r[2],
            trigger=r[3],
            next_run=r[4],
            allow_overlap=_FLAGS.get(r[5], r[5]),
            active=_FLAGS.get(r[6], r[6]),
            last_job_id=r[7],
            fired=r[8],
            skipped=r[9],
            paused=_FLAGS.get(r[10], r[10]),
        )
        for r in conn.execute(
            f"SELECT {schedule_columns} FROM jobsched_schedules ORDER BY schedule_id"
        )
    ]


def has_column(conn: sqlite3.Connection, table: str, column: str) -> bool:
    """Whether a (possibly older, unmigrated) file's `table` has `column`."""
    return any(r[1] == column for r in conn.execute(f"PRAGMA table_info({table})"))


#: Ids per statement of a purge by id (SQLite's bound parameters, with room to spare).
PURGE_CHUNK = 500
# A purge spares an upstream of an unfinished job: restoring that job needs it.
PURGE = """
DELETE FROM jobsched_jobs
WHERE status IN ({statuses}) AND finished_at IS NOT NULL AND finished_at <= ?
  AND job_id NOT IN (
    SELECT d.value FROM jobsched_jobs AS j, json_each(j.depends_on) AS d
    WHERE j.status IN ('pending', 'running', 'retry_wait')
  )
"""


def write(db: Database, batch: Sequence[JobRow | ScheduleRow | PurgeRow]) -> None:
    """One transaction holding the full current state of each row (in the store's thread)."""
    jobs = []
    keyed = []
    schedules = []
    purges: list[PurgeRow] = []
    for r in batch:
        if type(r) is JobRow:
            if r.key is not None:
                keyed.append((r.key, r.job_id))
            if r.depends_on:
                jobs.append((*_job_values(r), json.dumps(list(r.depends_on))))
            else:
                jobs.append(_job_values(r) + _NO_DEPENDENCIES)
        elif type(r) is PurgeRow:
            purges.append(r)
        else:
            s: ScheduleRow = r  # type: ignore[assignment]
            schedules.append(
                (
                    s.schedule_id,
                    s.key,
                    s.template,
                    s.trigger,
                    s.next_run,
                    int(s.allow_overlap),
                    int(s.active),
                    s.last_job_id,
                    s.fired,
                    s.skipped,
                    int(s.paused),
                )
            )

    def body(conn: sqlite3.Connection) -> None:
        if keyed:
            conn.executemany(_RELEASE_KEY, keyed)
        if jobs:
            conn.executemany(_UPSERT_JOB, jobs)
        if schedules:
            conn.executemany(_UPSERT_SCHEDULE, schedules)
        for purge in purges:
            marks = ",".join("?" * len(purge.statuses))
            sql = PURGE.format(statuses=marks)
            params = (*purge.statuses, purge.before)
            if purge.job_ids is None:
                conn.execute(sql, params)
                continue
            for i in range(0, len(purge.job_ids), PURGE_CHUNK):
                chunk = purge.job_ids[i : i + PURGE_CHUNK]
                conn.execute(
                    f"{sql} AND job_id IN ({','.join('?' * len(chunk))})", (*params, *chunk)
                )

    db.in_transaction(body, f"write {len(batch)} rows to")
