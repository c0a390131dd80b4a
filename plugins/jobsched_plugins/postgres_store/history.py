"""Throughput history: ``{s}.history`` (`HistoryRole`).

Workers add rows here on their lease-renewal cadence, one statement per
worker every ``lease_seconds / 3``, never a row per finished job: with a
dozen workers that is a few statements a second, each touching a row per
(step, bucket, queue, job type) they ended attempts of, in one key order
(no deadlock between them).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from jobsched.store import (
    DURATION_COLUMNS,
    DURATION_SLOTS,
    HISTORY_KEEP,
    BacklogRow,
    HistoryRead,
    HistoryRow,
    rows_per_step,
)

from .connection import NOW, Database

if TYPE_CHECKING:
    import psycopg

_COUNTS = ("completed", "failed", *DURATION_COLUMNS)
# The rows kept long enough (`HISTORY_KEEP`), a range of the primary key
# (step, start) per step: the delete reads no other row.
_OLD = " OR ".join(
    f"(step = {step!r} AND start <= (SELECT now FROM t) - {keep + step!r})"
    for step, keep in HISTORY_KEEP.items()
)
_ADD = (
    "WITH t AS (SELECT "
    + NOW
    + f""" AS now),
    pruned AS (DELETE FROM {{s}}.history WHERE {_OLD})
    INSERT INTO {{s}}.history AS h (step, start, queue, type, {", ".join(_COUNTS)})
    SELECT v.* FROM unnest(%s::float8[], %s::float8[], %s::text[], %s::text[], """
    + ", ".join(["%s::bigint[]"] * len(_COUNTS))
    + f""") AS v(step, start, queue, type, {", ".join(_COUNTS)})
    WHERE v.start + v.step > (SELECT now FROM t) - (CASE v.step """
    + " ".join(f"WHEN {step!r} THEN {keep!r}" for step, keep in HISTORY_KEEP.items())
    + """ END)
    ORDER BY v.step, v.start, v.queue, v.type
    ON CONFLICT (step, start, queue, type) DO UPDATE SET """
    + ", ".join(f"{c} = h.{c} + excluded.{c}" for c in _COUNTS)
)
_SUMS = ", ".join(f"sum({c})::bigint AS {c}" for c in _COUNTS)


async def add_history(db: Database, rows: Sequence[HistoryRow]) -> None:
    """Add folded rows to both steps' rows and delete those kept long enough,
    in one statement (its own transaction). Rows a step no longer keeps are
    left out, so no row is both deleted and updated."""
    stepped = rows_per_step(rows)
    if not stepped:
        return
    columns: list[list[Any]] = [
        [r.step for r in stepped],
        [r.start for r in stepped],
        [r.queue for r in stepped],
        [r.type for r in stepped],
        [r.completed for r in stepped],
        [r.failed for r in stepped],
    ]
    columns += [[r.durations[i] for r in stepped] for i in range(DURATION_SLOTS)]

    async def body(conn: psycopg.AsyncConnection[Any]) -> None:
        await conn.execute(db.q(_ADD), columns)

    await db.statement(body)


async def history(
    db: Database, step: float, since: float, type: str | None, queue: str | None
) -> HistoryRead:
    """The rows of `step` since `since` (of `type`, `queue`), per bucket and
    per job type: one statement (``GROUPING SETS``), one scan of the rows."""
    where = ["step = %s", "start >= %s"]
    params: list[Any] = [step, since]
    if type is not None:
        where.append("type = %s")
        params.append(type)
    if queue is not None:
        where.append("queue = %s")
        params.append(queue)

    async def body(conn: psycopg.AsyncConnection[Any]) -> HistoryRead:
        cur = await conn.execute(
            db.q(
                f"SELECT start, type, {_SUMS} FROM {{s}}.history WHERE "
                + " AND ".join(where)
                + " GROUP BY GROUPING SETS ((start), (type)) ORDER BY start, type"
            ),
            params,
        )
        buckets: list[tuple[float, int, int]] = []
        types: list[HistoryRow] = []
        for r in await cur.fetchall():
            if r["type"] is None:
                buckets.append((float(r["start"]), int(r["completed"]), int(r["failed"])))
            else:
                types.append(
                    HistoryRow(
                        step=step,
                        start=since,
                        queue=queue or "*",
                        type=r["type"],
                        completed=int(r["completed"]),
                        failed=int(r["failed"]),
                        durations=tuple(int(r[c]) for c in DURATION_COLUMNS),
                    )
                )
        return buckets, types

    return await db.transaction(body)


async def backlog(db: Database, queue: str | None) -> tuple[list[BacklogRow], float]:
    """Each job type's ready and running jobs per queue (or of `queue`), and
    the server's clock. The ready jobs are read through the two ready
    indexes (their predicates, spelled out, let the planner walk them), the
    running ones through `jobs_running_type`: the cost follows the backlog,
    not the table of finished jobs."""
    of_queue = "" if queue is None else " AND queue = %(queue)s"
    ready = (
        "SELECT queue, type, run_at FROM {s}.jobs WHERE job_group IS {group} "
        "AND status IN ('pending', 'retry_wait') AND unmet = 0" + of_queue
    )

    async def body(conn: psycopg.AsyncConnection[Any]) -> tuple[list[BacklogRow], float]:
        cur = await conn.execute(
            db.q(
                "WITH t AS (SELECT "
                + NOW
                + """ AS now),
                ready AS ("""
                + ready.replace("{group}", "NULL")
                + " UNION ALL "
                + ready.replace("{group}", "NOT NULL")
                + """),
                waiting AS (
                    SELECT queue, type, count(*)::int AS queued,
                        min(run_at) FILTER (WHERE run_at <= (SELECT now FROM t)) AS oldest
                    FROM ready GROUP BY queue, type),
                running AS (
                    SELECT queue, type, count(*)::int AS running FROM {s}.jobs
                    WHERE status = 'running'"""
                + of_queue
                + """ GROUP BY queue, type)
                SELECT coalesce(w.queue, r.queue) AS queue, coalesce(w.type, r.type) AS type,
                    coalesce(w.queued, 0) AS queued, coalesce(r.running, 0) AS running,
                    w.oldest, (SELECT now FROM t) AS at
                FROM waiting w FULL JOIN running r ON r.queue = w.queue AND r.type = w.type
                UNION ALL SELECT NULL, NULL, 0, 0, NULL, (SELECT now FROM t)
                ORDER BY queue NULLS LAST, type"""
            ),
            {"queue": queue},
        )
        found = await cur.fetchall()
        rows = [
            BacklogRow(
                queue=r["queue"],
                type=r["type"],
                queued=r["queued"],
                running=r["running"],
                oldest_due=None if r["oldest"] is None else float(r["oldest"]),
            )
            for r in found
            if r["type"] is not None
        ]
        return rows, float(found[-1]["at"])

    return await db.transaction(body)
