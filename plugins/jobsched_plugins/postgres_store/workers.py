"""The worker registry: a heartbeat row per worker in ``{s}.workers`` (`WorkersRole`)."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from jobsched.store import WORKER_COLUMNS, WorkerRow, checked_command, checked_worker

from .connection import NOW, REQUEST, Database

if TYPE_CHECKING:
    import psycopg

_COLUMNS = ", ".join(WORKER_COLUMNS)


async def heartbeat(db: Database, worker: WorkerRow, forget_after: float) -> str | None:
    """Upsert the worker's row stamped with the server's clock (its request
    kept), and delete the rows not seen for `forget_after` seconds, in one
    statement; returns the row's request."""

    async def body(conn: psycopg.AsyncConnection[Any]) -> str | None:
        cur = await conn.execute(
            db.q(
                "WITH t AS (SELECT "
                + NOW
                + """ AS now),
                gone AS (DELETE FROM {s}.workers
                    WHERE last_seen < (SELECT now FROM t) - %s AND worker_id <> %s)
                INSERT INTO {s}.workers ("""
                + _COLUMNS
                + """) SELECT %s, %s, %s, %s::jsonb, %s::jsonb, %s, t.now, t.now, %s, %s, %s, NULL
                FROM t
                ON CONFLICT (worker_id) DO UPDATE SET host = excluded.host,
                    pid = excluded.pid, queues = excluded.queues,
                    job_types = excluded.job_types, version = excluded.version,
                    last_seen = excluded.last_seen, lost_after = excluded.lost_after,
                    running = excluded.running, state = excluded.state
                RETURNING command"""
            ),
            [
                forget_after,
                worker.worker_id,
                worker.worker_id,
                worker.host,
                worker.pid,
                json.dumps(worker.queues),
                json.dumps(worker.job_types),
                worker.version,
                worker.lost_after,
                worker.running,
                worker.state,
            ],
        )
        record = await cur.fetchone()
        assert record is not None  # an upsert returns its row
        return checked_command(worker.worker_id, record["command"])

    return await db.statement(body)


async def request_worker(db: Database, worker_id: str, command: str) -> bool:
    """Leave `command` on a live worker's row (``stop`` stays over ``drain``)
    and NOTIFY it, in one statement; False if unknown or lost."""

    async def body(conn: psycopg.AsyncConnection[Any]) -> bool:
        cur = await conn.execute(
            db.q(
                """WITH asked AS (UPDATE {s}.workers SET command =
                    CASE WHEN command = 'stop' THEN 'stop' ELSE %s END
                    WHERE worker_id = %s AND """
                + NOW
                + """ - last_seen <= lost_after RETURNING worker_id)
                SELECT count(*)::int AS n,
                    (SELECT count(pg_notify(%s, %s)) FROM asked) AS note FROM asked"""
            ),
            [command, worker_id, db.channel, REQUEST + worker_id],
        )
        record = await cur.fetchone()
        return record is not None and record["n"] > 0

    return await db.statement(body)


async def workers(db: Database) -> tuple[list[WorkerRow], float]:
    """Every worker's row, by id, and the server's clock."""

    async def body(conn: psycopg.AsyncConnection[Any]) -> tuple[list[WorkerRow], float]:
        cur = await conn.execute(
            db.q(
                "SELECT "
                + _COLUMNS
                + ", "
                + NOW
                + " AS now FROM {s}.workers UNION ALL SELECT "
                + ", ".join("NULL" for _ in WORKER_COLUMNS)
                + ", "
                + NOW
                + " ORDER BY worker_id NULLS LAST"
            )
        )
        records = await cur.fetchall()
        now = float(records[-1]["now"])
        return [worker_row(r) for r in records[:-1]], now

    return await db.statement(body)


def worker_row(r: dict[str, Any]) -> WorkerRow:
    """A registry row as read (jsonb columns come decoded), checked."""
    return checked_worker(WorkerRow(**{k: r[k] for k in WORKER_COLUMNS}))


async def forget_worker(db: Database, worker_id: str) -> bool:
    """Delete a worker's row; False if there was none."""

    async def body(conn: psycopg.AsyncConnection[Any]) -> bool:
        cur = await conn.execute(db.q("DELETE FROM {s}.workers WHERE worker_id = %s"), [worker_id])
        return cur.rowcount > 0

    return await db.statement(body)


async def unserved_types(db: Database, known: Sequence[str], scan: int) -> dict[str, int]:
    """Due jobs per job type not in `known`, among the first `scan` due jobs
    in claim order (the claim's walk of ``jobs_ready``, stopped there)."""

    async def body(conn: psycopg.AsyncConnection[Any]) -> dict[str, int]:
        cur = await conn.execute(
            db.q(
                """SELECT type, count(*)::int AS n FROM (
                    SELECT type FROM {s}.jobs
                    WHERE status IN ('pending', 'retry_wait') AND unmet = 0 AND run_at <= """
                + NOW
                + """ ORDER BY sort_key, seq LIMIT %s
                ) AS due WHERE NOT (type = ANY(%s)) GROUP BY type"""
            ),
            [scan, list(known)],
        )
        return {r["type"]: r["n"] for r in await cur.fetchall()}

    return await db.statement(body)
