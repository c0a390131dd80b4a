"""Operator actions: retrying and requeueing jobs, purging old ones, expiring
results, progress, the queue's pause flag, and pausing or triggering
schedules. Each call is one transaction (`Database.transaction`) or one
statement (`Database.statement`).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from jobsched.store import NewJob

from .claims import settle
from .connection import CHANGED, NOW, TERMINAL, Database
from .schedules import insert_fired

if TYPE_CHECKING:
    import psycopg

RETRYABLE = ["failed", "timed_out", "cancelled"]

# Back to pending: attempts 0, run now, everything of the last run cleared; a
# job that waits for others counts the ones not completed again (with a
# trigger rule other than all_success, the ones not finished). Of several
# jobs with one unique key the first (in submit order) wins, and none is
# moved while another unfinished job holds the key.
_RETRY = (
    """
WITH locked AS (
    SELECT job_id, unique_key, seq FROM {s}.jobs c
    WHERE c.job_id = ANY(%s) AND c.status = ANY(%s)
      AND (c.unique_key IS NULL OR NOT EXISTS (
          SELECT 1 FROM {s}.jobs o WHERE o.unique_key = c.unique_key
            AND o.status IN ('pending', 'running', 'retry_wait')))
    FOR UPDATE
), picked AS (
    SELECT DISTINCT ON (coalesce(unique_key, job_id)) job_id FROM locked
    ORDER BY coalesce(unique_key, job_id), seq
), moved AS (
    UPDATE {s}.jobs j SET status = 'pending', attempts = 0, run_at = """
    + NOW
    + """,
        lease_owner = NULL, lease_expires = NULL, cancel_requested = false,
        started_at = NULL, finished_at = NULL, result = NULL, result_expires = NULL,
        progress = NULL, last_error = NULL, last_traceback = NULL, lease_expiries = 0,
        build_refusals = 0, last_refusal = NULL, refused_by = '{{}}',
        unmet = (SELECT count(*) FROM {s}.dependencies d JOIN {s}.jobs u
                 ON u.job_id = d.upstream
                 WHERE d.job_id = j.job_id AND u.status <> 'completed'
                   AND (j.trigger_rule = 'all_success'
                     OR u.status NOT IN ('failed', 'timed_out', 'cancelled')))
    FROM picked WHERE j.job_id = picked.job_id
    RETURNING j.job_id, j.seq
)
SELECT job_id FROM moved ORDER BY seq
"""
)


async def retry(db: Database, job_ids: Sequence[str]) -> list[str]:
    """Failed, timed-out or cancelled jobs of `job_ids` back to pending; the ids moved."""
    ids = list(dict.fromkeys(job_ids))
    if not ids:
        return []
    return await _retry(db, ids, RETRYABLE)


async def requeue(db: Database, statuses: Sequence[str], type: str | None) -> list[str]:
    """`retry` every job in `statuses` of job type `type`, in submit order."""
    wanted = [s for s in statuses if s in RETRYABLE]
    if not wanted:
        return []

    async def body(conn: psycopg.AsyncConnection[Any]) -> list[str]:
        cur = await conn.execute(
            db.q(
                "SELECT job_id FROM {s}.jobs WHERE status = ANY(%s) "
                "AND (%s::text IS NULL OR type = %s) ORDER BY seq"
            ),
            [wanted, type, type],
        )
        ids = [r["job_id"] for r in await cur.fetchall()]
        return await _retry_in(db, conn, ids, wanted)

    return await db.transaction(body)


async def _retry(db: Database, ids: list[str], statuses: list[str]) -> list[str]:
    return await db.transaction(lambda conn: _retry_in(db, conn, ids, statuses))


async def _retry_in(
    db: Database, conn: psycopg.AsyncConnection[Any], ids: list[str], statuses: list[str]
) -> list[str]:
    if not ids:
        return []
    cur = await conn.execute(db.q(_RETRY), [ids, statuses])
    moved = [r["job_id"] for r in await cur.fetchall()]
    if moved:
        await db.notify_work(conn)
    return moved


async def purge(db: Database, before: float, statuses: Sequence[str]) -> int:
    """Delete terminal jobs in `statuses` finished before `before`, with their
    dependency edges (by the foreign key) and history; how many jobs. Live
    views hear of it (one NOTIFY from the statement) when it deleted any."""
    wanted = [s for s in statuses if s in ("completed", *RETRYABLE)]
    if not wanted:
        return 0

    async def body(conn: psycopg.AsyncConnection[Any]) -> int:
        cur = await conn.execute(
            db.q(
                """WITH gone AS (
                    DELETE FROM {s}.jobs WHERE status = ANY(%s) AND finished_at < %s
                    RETURNING job_id
                ), history AS (
                    DELETE FROM {s}.attempts a USING gone WHERE a.job_id = gone.job_id
                )
                SELECT count(*)::int AS n,
                    (SELECT pg_notify(%s, %s) WHERE EXISTS (SELECT 1 FROM gone)) AS note
                FROM gone"""
            ),
            [wanted, before, db.channel, CHANGED],
        )
        rec = await cur.fetchone()
        return int(rec["n"]) if rec else 0

    return await db.transaction(body)


async def request_cancel_many(db: Database, job_ids: Sequence[str]) -> list[str]:
    """`claims.request_cancel` for a batch, in one transaction: the waiting
    jobs cancelled with one statement (then their dependents settled), the
    running ones flagged with another and their owners notified; the ids
    cancelled or flagged, in the order given. Rows are locked in id order, so
    two batches that share jobs cannot deadlock."""
    ids = list(dict.fromkeys(job_ids))
    if not ids:
        return []

    async def body(conn: psycopg.AsyncConnection[Any]) -> list[str]:
        cur = await conn.execute(
            db.q(
                "SELECT job_id, status FROM {s}.jobs WHERE job_id = ANY(%s) "
                "AND status <> ALL(%s) ORDER BY job_id FOR UPDATE"
            ),
            [ids, list(TERMINAL)],
        )
        found = {r["job_id"]: r["status"] for r in await cur.fetchall()}
        running = [j for j, status in found.items() if status == "running"]
        waiting = [j for j, status in found.items() if status != "running"]
        if running:
            await conn.execute(
                db.q("UPDATE {s}.jobs SET cancel_requested = true WHERE job_id = ANY(%s)"),
                [running],
            )
            await db.notify_cancels(conn, running)
        if waiting:
            await conn.execute(
                db.q(
                    "UPDATE {s}.jobs SET status = 'cancelled', last_error = 'cancelled', "
                    "finished_at = " + NOW + " WHERE job_id = ANY(%s)"
                ),
                [waiting],
            )
            if await settle(db, conn, [(job_id, "cancelled") for job_id in waiting]):
                await db.notify_work(conn)
            await db.notify_finished(conn)
        return [job_id for job_id in ids if job_id in found]

    return await db.transaction(body)


async def delete_finished(db: Database, job_ids: Sequence[str]) -> list[str]:
    """Delete the terminal jobs of `job_ids` with their dependency edges (by
    the foreign key) and history, in one statement; the ids deleted, in the
    order given. Live views hear of it (one NOTIFY) when it deleted any."""
    ids = list(dict.fromkeys(job_ids))
    if not ids:
        return []

    async def body(conn: psycopg.AsyncConnection[Any]) -> list[str]:
        cur = await conn.execute(
            db.q(
                """WITH gone AS (
                    DELETE FROM {s}.jobs WHERE job_id = ANY(%s) AND status = ANY(%s)
                    RETURNING job_id
                ), history AS (
                    DELETE FROM {s}.attempts a USING gone WHERE a.job_id = gone.job_id
                ), note AS (
                    SELECT pg_notify(%s, %s) WHERE EXISTS (SELECT 1 FROM gone)
                )
                SELECT job_id, (SELECT count(*) FROM note) AS noted FROM gone"""
            ),
            [ids, list(TERMINAL), db.channel, CHANGED],
        )
        gone = {r["job_id"] for r in await cur.fetchall()}
        return [job_id for job_id in ids if job_id in gone]

    return await db.transaction(body)


async def expire_results(db: Database) -> int:
    """Remove the results whose time is up; how many. Live views hear of it
    (one NOTIFY from the statement) when it removed any."""

    async def body(conn: psycopg.AsyncConnection[Any]) -> int:
        cur = await conn.execute(
            db.q(
                "WITH gone AS (UPDATE {s}.jobs SET result = NULL, result_expires = NULL "
                "WHERE result_expires <= " + NOW + " RETURNING 1) "
                "SELECT count(*)::int AS n, "
                "(SELECT pg_notify(%s, %s) WHERE EXISTS (SELECT 1 FROM gone)) AS note FROM gone"
            ),
            [db.channel, CHANGED],
        )
        rec = await cur.fetchone()
        return int(rec["n"]) if rec else 0

    return await db.statement(body)


async def set_progress(
    db: Database, updates: Sequence[tuple[str, dict[str, Any]]], owner: str
) -> None:
    """Store the progress of the jobs `owner` still runs, in one statement that
    also tells live views (NOTIFY) when it wrote any."""
    if not updates:
        return

    async def body(conn: psycopg.AsyncConnection[Any]) -> None:
        await conn.execute(
            db.q(
                """WITH written AS (
                    UPDATE {s}.jobs j SET progress = u.progress::jsonb
                    FROM unnest(%s::text[], %s::text[]) AS u(job_id, progress)
                    WHERE j.job_id = u.job_id AND j.lease_owner = %s AND j.status = 'running'
                    RETURNING 1
                )
                SELECT pg_notify(%s, %s) WHERE EXISTS (SELECT 1 FROM written)"""
            ),
            [
                [job_id for job_id, _ in updates],
                [json.dumps(data, allow_nan=False) for _, data in updates],
                owner,
                db.channel,
                CHANGED,
            ],
        )

    await db.statement(body)


async def set_queue_paused(db: Database, paused: bool, queue: str | None = None) -> bool:
    """Set the pause flag of every queue (`queue` None) or of one; False if
    it already was so. Resuming wakes every claimer."""

    async def body(conn: psycopg.AsyncConnection[Any]) -> bool:
        if queue is not None:
            if paused:
                cur = await conn.execute(
                    db.q(
                        "INSERT INTO {s}.paused_queues (queue) VALUES (%s) ON CONFLICT DO NOTHING"
                    ),
                    [queue],
                )
            else:
                cur = await conn.execute(
                    db.q("DELETE FROM {s}.paused_queues WHERE queue = %s"), [queue]
                )
        elif paused:
            cur = await conn.execute(
                db.q("INSERT INTO {s}.paused (id) VALUES (1) ON CONFLICT (id) DO NOTHING")
            )
        else:
            cur = await conn.execute(db.q("DELETE FROM {s}.paused"))
        changed = cur.rowcount > 0
        if changed:
            await db.notify_work(conn)
        return changed

    return await db.transaction(body)


async def set_schedule_paused(
    db: Database, schedule_id: str, paused: bool, next_run: float | None
) -> bool:
    """Pause or resume a schedule; False if unknown or already so."""

    async def body(conn: psycopg.AsyncConnection[Any]) -> bool:
        cur = await conn.execute(
            db.q(
                "UPDATE {s}.schedules SET paused = %s, next_run = coalesce(%s, next_run) "
                "WHERE schedule_id = %s AND paused = %s"
            ),
            [paused, next_run, schedule_id, not paused],
        )
        return cur.rowcount > 0

    return await db.transaction(body)


async def trigger_schedule(db: Database, schedule_id: str, job: NewJob) -> bool:
    """Insert `job` for the schedule now, counted as fired; False if unknown."""

    async def body(conn: psycopg.AsyncConnection[Any]) -> bool:
        cur = await conn.execute(
            db.q(
                "UPDATE {s}.schedules SET fired = fired + 1, last_job_id = %s "
                "WHERE schedule_id = %s RETURNING 1"
            ),
            [job.job_id, schedule_id],
        )
        if await cur.fetchone() is None:
            return False
        await insert_fired(db, conn, schedule_id, job)
        await db.notify_work(conn)
        return True

    return await db.transaction(body)
