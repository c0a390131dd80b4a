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
    SharedJobRow,
    SharedScheduleRow,
    Snapshot,
    StoreError,
    check_snapshot,
)

from .journal import job_rows, schedule_rows
from .queries import status_and_type_filter


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
    where, params = status_and_type_filter(statuses, type)
    clause = f" WHERE {' AND '.join(where)}" if where else ""
    total = conn.execute(f"SELECT count(*) FROM jobsched_jobs{clause}", params).fetchone()[0]
    found = job_rows(
        conn, url, f"{clause} ORDER BY seq DESC LIMIT ? OFFSET ?", [*params, limit, offset]
    )
    # The rows shown are checked as a restore checks them (in submit order,
    # as a restore reads them), and named.
    check_snapshot(url, Snapshot(jobs=found[::-1]))
    return [_shared(url, row) for row in found], int(total)


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
    rows = schedule_rows(conn)
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
