"""Throughput history in a shared file: ``jobsched_shared_history`` (`HistoryRole`;
postgres_store/history.py in SQLite)."""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence

from jobsched.store import (
    DURATION_COLUMNS,
    HISTORY_KEEP,
    BacklogRow,
    HistoryRead,
    HistoryRow,
    rows_per_step,
)

_COUNTS = ("completed", "failed", *DURATION_COLUMNS)
_ADD = (
    f"INSERT INTO jobsched_shared_history (step, start, queue, type, {', '.join(_COUNTS)}) "
    f"VALUES (?, ?, ?, ?, {', '.join('?' * len(_COUNTS))}) "
    "ON CONFLICT (step, start, queue, type) DO UPDATE SET "
    + ", ".join(f"{c} = {c} + excluded.{c}" for c in _COUNTS)
)
_SUMS = ", ".join(f"sum({c})" for c in _COUNTS)


def add_history(conn: sqlite3.Connection, rows: Sequence[HistoryRow], now: float) -> None:
    """Add folded rows to both steps' rows; delete those kept long enough (in
    the caller's write transaction, which serializes writers)."""
    conn.executemany(
        _ADD,
        [
            (r.step, r.start, r.queue, r.type, r.completed, r.failed, *r.durations)
            for r in rows_per_step(rows)
        ],
    )
    for step, keep in HISTORY_KEEP.items():
        conn.execute(
            "DELETE FROM jobsched_shared_history WHERE step = ? AND start <= ?",
            (step, now - keep - step),
        )


def history(
    conn: sqlite3.Connection, step: float, since: float, type: str | None, queue: str | None
) -> HistoryRead:
    """The rows of `step` since `since` (of `type`, `queue`): per bucket,
    then per job type (in the caller's transaction)."""
    where = ["step = ?", "start >= ?"]
    params: list[object] = [step, since]
    if type is not None:
        where.append("type = ?")
        params.append(type)
    if queue is not None:
        where.append("queue = ?")
        params.append(queue)
    clause = " AND ".join(where)
    # By start: the primary key's order, no sort; two sums, no histogram.
    buckets = [
        (float(start), int(completed), int(failed))
        for start, completed, failed in conn.execute(
            "SELECT start, sum(completed), sum(failed) FROM jobsched_shared_history "
            f"WHERE {clause} GROUP BY start ORDER BY start",
            params,
        )
    ]
    types = [
        HistoryRow(
            step=step,
            start=since,
            queue=queue or "*",
            type=r[0],
            completed=int(r[1]),
            failed=int(r[2]),
            durations=tuple(int(n) for n in r[3:]),
        )
        for r in conn.execute(
            f"SELECT type, {_SUMS} FROM jobsched_shared_history "
            f"WHERE {clause} GROUP BY type ORDER BY type",
            params,
        )
    ]
    return buckets, types


def backlog(conn: sqlite3.Connection, queue: str | None, at: float) -> list[BacklogRow]:
    """Each job type's ready and running jobs per queue (or of `queue`): the
    ready jobs through the two ready indexes, the running ones through the
    leases' (the cost follows the backlog, not the finished jobs)."""
    of_queue = "" if queue is None else " AND queue = :queue"
    ready = (
        "SELECT queue, type, run_at FROM jobsched_shared_jobs INDEXED BY {index} "
        "WHERE job_group IS {group} AND status IN ('pending', 'retry_wait') AND unmet = 0"
        + of_queue
    )
    params: dict[str, object] = {"at": at, "queue": queue}
    waiting: dict[tuple[str, str], tuple[int, float | None]] = {
        (name, kind): (int(queued), None if oldest is None else float(oldest))
        for name, kind, queued, oldest in conn.execute(
            "SELECT queue, type, count(*), min(CASE WHEN run_at <= :at THEN run_at END) FROM ("
            + ready.format(index="jobsched_shared_ready", group="NULL")
            + " UNION ALL "
            + ready.format(index="jobsched_shared_ready_group", group="NOT NULL")
            + ") GROUP BY queue, type",
            params,
        )
    }
    running: dict[tuple[str, str], int] = {
        (name, kind): int(n)
        for name, kind, n in conn.execute(
            "SELECT queue, type, count(*) FROM jobsched_shared_jobs "
            "INDEXED BY jobsched_shared_leases "
            f"WHERE status = 'running'{of_queue} GROUP BY queue, type",
            params,
        )
    }
    return [
        BacklogRow(
            queue=key[0],
            type=key[1],
            queued=waiting.get(key, (0, None))[0],
            running=running.get(key, 0),
            oldest_due=waiting.get(key, (0, None))[1],
        )
        for key in sorted({*waiting, *running})
    ]
