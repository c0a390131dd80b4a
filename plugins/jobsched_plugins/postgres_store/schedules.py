"""Recurring schedules shared by every process: each period fires once."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from jobsched.store import NewJob, SharedJobRow, SharedScheduleRow, StoreError, pack_sort_key

from .connection import TERMINAL, Database, to_json
from .rows import job_row, schedule_row

if TYPE_CHECKING:
    import psycopg


async def add_schedule(db: Database, schedule: SharedScheduleRow) -> SharedScheduleRow:
    """Create the schedule unless it exists; returns the stored one.

    Several processes registering the same schedule id share one schedule.
    """

    async def body(conn: psycopg.AsyncConnection[Any]) -> SharedScheduleRow:
        await conn.execute(
            db.q(
                """INSERT INTO {s}.schedules (schedule_id, type, args, options, trigger,
                    next_run, allow_overlap, active)
                VALUES (%s, %s, %s::jsonb, %s::jsonb, %s::jsonb, %s, %s, true)
                ON CONFLICT (schedule_id) DO UPDATE SET active = true"""
            ),
            [
                schedule.schedule_id,
                schedule.type,
                to_json(schedule.args),
                to_json(schedule.options),
                to_json(schedule.trigger),
                schedule.next_run,
                schedule.allow_overlap,
            ],
        )
        return await _get_schedule(db, conn, schedule.schedule_id)

    return await db.transaction(body)


async def _get_schedule(
    db: Database, conn: psycopg.AsyncConnection[Any], schedule_id: str
) -> SharedScheduleRow:
    cur = await conn.execute(
        db.q("SELECT * FROM {s}.schedules WHERE schedule_id = %s"), [schedule_id]
    )
    rec = await cur.fetchone()
    if rec is None:
        raise StoreError(f"unknown schedule {schedule_id!r}")
    return schedule_row(rec)


async def get_schedule(db: Database, schedule_id: str) -> SharedScheduleRow:
    """The schedule as stored now."""
    return await db.transaction(lambda conn: _get_schedule(db, conn, schedule_id))


async def fire_schedule(
    db: Database, schedule_id: str, expected_next: float, new_next: float, job: NewJob
) -> bool:
    """Fire the period due at `expected_next` exactly once across processes.

    A compare-and-set on ``next_run``: only the process that moves it from
    `expected_next` to `new_next` inserts `job` (in the same transaction);
    every other process sees False. Without ``allow_overlap`` the period is
    skipped (but still consumed) while the previous job is unfinished.
    """

    async def body(conn: psycopg.AsyncConnection[Any]) -> bool:
        cur = await conn.execute(
            db.q(
                """UPDATE {s}.schedules SET next_run = %s
                WHERE schedule_id = %s AND next_run = %s AND active AND NOT paused
                RETURNING allow_overlap, last_job_id"""
            ),
            [new_next, schedule_id, expected_next],
        )
        won = await cur.fetchone()
        if won is None:
            return False
        if not won["allow_overlap"] and won["last_job_id"] is not None:
            cur = await conn.execute(
                db.q("SELECT status FROM {s}.jobs WHERE job_id = %s"),
                [won["last_job_id"]],
            )
            previous = await cur.fetchone()
            if previous is not None and previous["status"] not in TERMINAL:
                await conn.execute(
                    db.q("UPDATE {s}.schedules SET skipped = skipped + 1 WHERE schedule_id = %s"),
                    [schedule_id],
                )
                return True
        await insert_fired(db, conn, schedule_id, job)
        await conn.execute(
            db.q(
                # A schedule with `times` ends with its last run, for everyone.
                """UPDATE {s}.schedules SET fired = fired + 1, last_job_id = %s,
                    next_run = CASE WHEN trigger ? 'times'
                        AND fired + 1 >= (trigger->>'times')::bigint
                        THEN 'Infinity'::float8 ELSE next_run END
                WHERE schedule_id = %s"""
            ),
            [job.job_id, schedule_id],
        )
        await db.notify_work(conn)
        return True

    return await db.transaction(body)


async def insert_fired(
    db: Database, conn: psycopg.AsyncConnection[Any], schedule_id: str, job: NewJob
) -> None:
    """Insert the job a schedule fires (pending, no dependencies)."""
    await conn.execute(
        db.q(
            """INSERT INTO {s}.jobs (job_id, type, args, options, status, run_at,
                submitted_at, sort_key, schedule_id, submitted_by, queue, job_group)
            VALUES (%s, %s, %s::jsonb, %s::jsonb, 'pending', %s, %s, %s, %s, %s, %s, %s)"""
        ),
        [
            job.job_id,
            job.type,
            to_json(job.args),
            to_json(job.options),
            job.run_at,
            job.submitted_at,
            pack_sort_key(job.sort_key),
            schedule_id,
            job.submitted_by,
            job.queue,
            job.options.get("group"),
        ],
    )


async def schedules(db: Database) -> list[SharedScheduleRow]:
    """Every schedule, by id."""

    async def body(conn: psycopg.AsyncConnection[Any]) -> list[SharedScheduleRow]:
        cur = await conn.execute(db.q("SELECT * FROM {s}.schedules ORDER BY schedule_id"))
        return [schedule_row(r) for r in await cur.fetchall()]

    return await db.transaction(body)


async def deactivate_schedule(db: Database, schedule_id: str) -> bool:
    """Stop a schedule for every process; False if unknown or already stopped."""

    async def body(conn: psycopg.AsyncConnection[Any]) -> bool:
        cur = await conn.execute(
            db.q(
                "UPDATE {s}.schedules SET active = false "
                "WHERE schedule_id = %s AND active RETURNING 1"
            ),
            [schedule_id],
        )
        return await cur.fetchone() is not None

    return await db.transaction(body)


async def schedule_jobs(
    db: Database, schedule_id: str, limit: int | None = None
) -> list[SharedJobRow]:
    """The jobs a schedule fired, in the order they were fired; with `limit`,
    the last `limit` of them (newest first through ``jobs_schedule``, then
    turned around)."""

    async def body(conn: psycopg.AsyncConnection[Any]) -> list[SharedJobRow]:
        if limit is None:
            cur = await conn.execute(
                db.q("SELECT * FROM {s}.jobs WHERE schedule_id = %s ORDER BY seq"),
                [schedule_id],
            )
            return [job_row(r) for r in await cur.fetchall()]
        cur = await conn.execute(
            db.q("SELECT * FROM {s}.jobs WHERE schedule_id = %s ORDER BY seq DESC LIMIT %s"),
            [schedule_id, limit],
        )
        return [job_row(r) for r in await cur.fetchall()][::-1]

    return await db.transaction(body)
