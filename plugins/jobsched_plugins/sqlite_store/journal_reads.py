"""Reading a single-owner file a page at a time (``jobsched status``).

The shared mode's reads (`queries.page`, `counts`, `schedules`) over the
journal's tables, returning the same rows, so a reader pages through a file
of either mode the same way and never holds more than a page. The rows read
are checked as a restore checks them (`check_snapshot`): one changed by hand
is a `StoreError` naming it. Every function runs in the store's thread,
inside the caller's transaction.
"""

from __future__ import annotations

import json
import math
import sqlite3
from collections.abc import Sequence
from typing import Any

from jobsched.store import (
    JobRow,
    ScheduleRow,
    SharedJobRow,
    SharedScheduleRow,
    Snapshot,
    StoreError,
    check_snapshot,
)

_COLUMNS = (
    "job_id, key, type, args, options, depends_on, status, attempts, run_at, submitted_at, "
    "finished_at, seq, result, last_error, schedule_id"
)
_SCHEDULE_COLUMNS = (
    "schedule_id, key, template, trigger, next_run, allow_overlap, active, last_job_id, "
    "fired, skipped"
)
# SQLite stores a flag as 0/1; anything else was written by hand and is
# handed to check_snapshot as it is, which refuses it naming the schedule.
_FLAGS = {0: False, 1: True}


def _has_column(conn: sqlite3.Connection, table: str, column: str) -> bool:
    return any(r[1] == column for r in conn.execute(f"PRAGMA table_info({table})"))


def _decoded(url: str, what: str, column: str, text: str | None, default: Any) -> Any:
    """A JSON column's value, or a `StoreError` naming the row and the column."""
    if text is None or text == "":
        return default
    try:
        return json.loads(text)
    except ValueError as exc:
        raise StoreError(
            f"{url}: {what} has a column that is not JSON ({column}: {exc}); "
            "jobsched left it unchanged"
        ) from None


def _mapping(url: str, what: str, column: str, text: str) -> dict[str, Any]:
    value = _decoded(url, what, column, text, {})
    if not isinstance(value, dict):
        raise StoreError(
            f"{url}: {what} has a column that is not a JSON object ({column}: {text[:80]!r}); "
            "jobsched left it unchanged"
        )
    return value


def page(
    conn: sqlite3.Connection,
    url: str,
    statuses: Sequence[str] | None,
    type: str | None,
    limit: int,
    offset: int,
) -> tuple[list[SharedJobRow], int]:
    """One page of matching jobs, newest first, and how many match."""
    where: list[str] = []
    params: list[Any] = []
    if statuses is not None:
        where.append(f"status IN ({','.join('?' * len(statuses))})")
        params += statuses
    if type is not None:
        where.append("type = ?")
        params.append(type)
    clause = f" WHERE {' AND '.join(where)}" if where else ""
    total = conn.execute(f"SELECT count(*) FROM jobsched_jobs{clause}", params).fetchone()[0]
    rule = "trigger_rule" if _has_column(conn, "jobsched_jobs", "trigger_rule") else "NULL"
    found = [
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
            trigger_rule=r[15] or "all_success",
        )
        for r in conn.execute(
            f"SELECT {_COLUMNS}, {rule} FROM jobsched_jobs{clause} ORDER BY seq DESC "
            "LIMIT ? OFFSET ?",
            [*params, limit, offset],
        )
    ]
    # The rows shown are checked as a restore checks them (in submit order,
    # as a restore reads them), and named.
    check_snapshot(url, Snapshot(jobs=found[::-1]))
    return [_shared(url, row) for row in found], int(total)


def _depends_on(url: str, job_id: str, text: str) -> tuple[str, ...]:
    value = _decoded(url, f"job {job_id}", "depends_on", text, [])
    if not isinstance(value, list):
        raise StoreError(
            f"{url}: job {job_id} has a column that is not a list of job ids "
            f"(depends_on: {text[:80]!r}); jobsched left it unchanged"
        )
    return tuple(value)


def _shared(url: str, row: JobRow) -> SharedJobRow:
    """A checked journal row as the shared mode reads its own."""
    what = f"job {row.job_id}"
    return SharedJobRow(
        job_id=row.job_id,
        key=row.key,
        type=row.type,
        args=_mapping(url, what, "args", row.args),
        options=_mapping(url, what, "options", row.options),
        status=row.status,
        attempts=row.attempts,
        run_at=row.run_at,
        submitted_at=row.submitted_at,
        seq=row.seq,
        sort_key=(),
        unmet=0,
        lease_owner=None,
        lease_expires=None,
        cancel_requested=False,
        result=_decoded(url, what, "result", row.result, None),
        last_error=row.last_error,
        schedule_id=row.schedule_id,
        submitted_by=None,
        started_at=None,
        finished_at=row.finished_at,
        trigger_rule=row.trigger_rule,
    )


def counts(conn: sqlite3.Connection) -> dict[str, int]:
    """How many jobs are in each status (one pass over the jobs, nothing held)."""
    return dict(conn.execute("SELECT status, count(*) FROM jobsched_jobs GROUP BY status"))


def schedules(conn: sqlite3.Connection, url: str) -> list[SharedScheduleRow]:
    """Every recurring schedule, by id, as the shared mode reads its own."""
    paused = "paused" if _has_column(conn, "jobsched_schedules", "paused") else "0"
    rows = [
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
            f"SELECT {_SCHEDULE_COLUMNS}, {paused} FROM jobsched_schedules ORDER BY schedule_id"
        )
    ]
    check_snapshot(url, Snapshot(schedules=rows))
    found = []
    for row in rows:
        what = f"recurring schedule {row.schedule_id}"
        # The job each fire submits ("" until the schedule first fires).
        template = _mapping(url, what, "template", row.template)
        # {"trigger": {...}, "timebase": ...}: its trigger is what a shared row holds.
        described = _mapping(url, what, "trigger", row.trigger)
        trigger = described.get("trigger")
        found.append(
            SharedScheduleRow(
                schedule_id=row.schedule_id,
                type=str(template.get("type", "")),
                args=dict(template.get("args") or {}),
                options=dict(template.get("options") or {}),
                trigger=trigger if isinstance(trigger, dict) else described,
                # 0.0 once the trigger is exhausted; a shared row says inf.
                next_run=row.next_run or math.inf,
                allow_overlap=row.allow_overlap,
                active=row.active,
                last_job_id=row.last_job_id,
                fired=row.fired,
                skipped=row.skipped,
                paused=row.paused,
            )
        )
    return found
