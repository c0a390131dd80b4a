"""Reading a single-owner file as the shared mode reads its own
(``jobsched status``, ``jobsched web``, ``jobsched jobs``, `Client`).

The shared mode's reads (`queries.get`, `page`, `stats`, ...) over the
journal's tables, returning the same rows, so a reader sees a file of either
mode the same way and never holds more than a page. The rows read are
checked as a restore checks them (`check_snapshot`): one changed by hand is
a `StoreError` naming it. Every function runs in the store's thread, inside
the caller's transaction.
"""

from __future__ import annotations

import json
import math
import sqlite3
from collections.abc import Mapping, Sequence
from typing import Any

from jobsched.store import (
    JobRow,
    QueueStatsRow,
    SharedJobRow,
    SharedScheduleRow,
    Snapshot,
    StoreError,
    StoreStats,
    check_snapshot,
    queue_rows,
)

from .connection import TERMINAL
from .journal import job_rows, schedule_rows
from .queries import (
    finished_by_minute,
    running_by_type_and_executor,
    status_and_type_filter,
    text_filter,
)


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
    total = conn.execute(f"SELECT count(*) FROM jobsched_jobs{clause}", params).fetchone()[0]
    found = _checked(
        url,
        job_rows(
            conn, url, f"{clause} ORDER BY seq DESC LIMIT ? OFFSET ?", [*params, limit, offset]
        ),
    )
    return found, int(total)


def _checked(url: str, newest_first: list[JobRow]) -> list[SharedJobRow]:
    """Rows to show, checked as a restore checks them (in submit order, as a
    restore reads them), and named."""
    check_snapshot(url, Snapshot(jobs=newest_first[::-1]))
    return [_shared(url, row) for row in newest_first]


def get(conn: sqlite3.Connection, url: str, job_id: str) -> SharedJobRow | None:
    """One job with its dependencies, or None (a journal keeps no attempt history)."""
    found = _checked(url, job_rows(conn, url, "WHERE job_id = ?", [job_id]))
    return found[0] if found else None


def jobs(conn: sqlite3.Connection, url: str, job_ids: Sequence[str] | None) -> list[SharedJobRow]:
    """Every job (or those with `job_ids`), in submit order."""
    if job_ids is None:
        return _checked(url, job_rows(conn, url, "ORDER BY seq DESC"))[::-1]
    found: list[SharedJobRow] = []
    ids = list(job_ids)
    for i in range(0, len(ids), 500):  # SQLite's limit on bound parameters
        chunk = ids[i : i + 500]
        marks = ",".join("?" * len(chunk))
        found += _checked(url, job_rows(conn, url, f"WHERE job_id IN ({marks})", chunk))
    found.sort(key=lambda row: row.seq)
    return found


def dependents(conn: sqlite3.Connection, job_id: str) -> list[str] | None:
    """The ids of the jobs that depend on `job_id`, in submit order; None if unknown."""
    if conn.execute("SELECT 1 FROM jobsched_jobs WHERE job_id = ?", (job_id,)).fetchone() is None:
        return None
    return [
        r[0]
        for r in conn.execute(
            "SELECT j.job_id FROM jobsched_jobs AS j, json_each(j.depends_on) AS d "
            "WHERE d.value = ? ORDER BY j.seq",
            (job_id,),
        )
    ]


def dependents_of(conn: sqlite3.Connection, job_ids: Sequence[str]) -> dict[str, list[str]]:
    """`dependents` of each of `job_ids` that exists: one walk of the jobs'
    ``depends_on`` lists per 500 ids (a journal has no edge table)."""
    ids = list(dict.fromkeys(job_ids))
    found: dict[str, list[str]] = {}
    edges: list[tuple[int, str, str]] = []
    for i in range(0, len(ids), 500):  # SQLite's limit on bound parameters
        chunk = ids[i : i + 500]
        marks = ",".join("?" * len(chunk))
        known = conn.execute(f"SELECT job_id FROM jobsched_jobs WHERE job_id IN ({marks})", chunk)
        found.update((r[0], []) for r in known)
        edges += conn.execute(
            "SELECT j.seq, d.value, j.job_id FROM jobsched_jobs AS j, json_each(j.depends_on) AS d "
            f"WHERE d.value IN ({marks})",
            chunk,
        ).fetchall()
    for _, upstream, job_id in sorted(edges):
        found.setdefault(upstream, []).append(job_id)
    return found


def unfinished(conn: sqlite3.Connection, job_ids: Sequence[str]) -> int:
    """How many of `job_ids` are not terminal yet."""
    n = 0
    ids = list(job_ids)
    for i in range(0, len(ids), 500):
        chunk = ids[i : i + 500]
        n += conn.execute(
            f"SELECT count(*) FROM jobsched_jobs WHERE job_id IN ({','.join('?' * len(chunk))}) "
            f"AND status NOT IN ({','.join('?' * len(TERMINAL))})",
            [*chunk, *TERMINAL],
        ).fetchone()[0]
    return int(n)


def schedule_jobs(
    conn: sqlite3.Connection, url: str, schedule_id: str, limit: int | None = None
) -> list[SharedJobRow]:
    """The jobs a schedule fired, in the order they were fired (the last `limit`)."""
    where = "WHERE schedule_id = ? ORDER BY seq DESC"
    params: list[Any] = [schedule_id]
    if limit is not None:
        where += " LIMIT ?"
        params.append(limit)
    return _checked(url, job_rows(conn, url, where, params))[::-1]


def stats(conn: sqlite3.Connection, since: float, at: float) -> StoreStats:
    """The queue at a glance, as `queries.stats` reads a shared file: a
    journal holds no leases, limits' use or pause flag (its owner keeps
    them in memory)."""
    running_types, running_executors = running_by_type_and_executor(conn, "jobsched_jobs")
    return StoreStats(
        counts=counts(conn),
        finished=finished_by_minute(conn, "jobsched_jobs", since),
        leases=[],
        running_types=running_types,
        running_executors=running_executors,
        limits=None,
        rate_tats={},
        queue_paused=False,
        at=at,
    )


def _shared(url: str, row: JobRow) -> SharedJobRow:
    """A checked journal row as the shared mode reads its own."""
    what = f"job {row.job_id}"
    options = _mapping(url, what, "options", row.options)
    # The journal keeps it with the options; a shared row, in a column.
    unique_key = options.pop("unique_key", None)
    return SharedJobRow(
        job_id=row.job_id,
        key=row.key,
        type=row.type,
        args=_mapping(url, what, "args", row.args),
        options=options,
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
        unique_key=unique_key if isinstance(unique_key, str) else None,
        depends_on=row.depends_on,
        trigger_rule=row.trigger_rule,
        last_traceback=row.last_traceback,
        queue=_queue_of(options),
    )


def _queue_of(options: Mapping[str, Any]) -> str:
    """The queue a journaled job names in its options (default: "default")."""
    queue = options.get("queue", "default")
    return queue if isinstance(queue, str) and queue else "default"


def queue_stats(conn: sqlite3.Connection, since: float, at: float) -> list[QueueStatsRow]:
    """Each queue at a glance, as `queries.queue_stats` reads a shared file
    (a journal has no pause flags: its owner keeps them in memory)."""
    found: dict[str, dict[str, Any]] = {}
    for options, status, run_at, finished_at in conn.execute(
        "SELECT options, status, run_at, finished_at FROM jobsched_jobs "
        "WHERE status IN ('pending', 'retry_wait', 'running') OR finished_at >= ?",
        (since,),
    ):
        try:
            queue = _queue_of(json.loads(options))
        except (TypeError, ValueError, AttributeError):
            queue = "default"
        rec = found.setdefault(queue, {"ready": 0, "oldest": None, "running": 0, "finished": 0})
        if status in ("pending", "retry_wait") and run_at <= at:
            rec["ready"] += 1
            rec["oldest"] = run_at if rec["oldest"] is None else min(rec["oldest"], run_at)
        elif status == "running":
            rec["running"] += 1
        elif finished_at is not None and finished_at >= since:
            rec["finished"] += 1
    return queue_rows(found, ())


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
