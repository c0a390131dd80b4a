"""Recurring schedules shared by every process: each period fires once
(postgres_store/schedules.py in SQLite). Every function runs in the store's
thread, inside the caller's transaction."""

from __future__ import annotations

import sqlite3

from jobsched.store import NewJob, SharedJobRow, SharedScheduleRow, StoreError, pack_sort_key

from .connection import TERMINAL, to_json
from .queries import JOB_COLUMNS, SCHEDULE_COLUMNS, add_counts, job_row, schedule_row


def add_schedule(conn: sqlite3.Connection, schedule: SharedScheduleRow) -> SharedScheduleRow:
    """Create the schedule unless it exists; returns the stored one."""
    conn.execute(
        """INSERT INTO jobsched_shared_schedules (schedule_id, type, args, options, trigger,
            next_run, allow_overlap, active)
        VALUES (?, ?, ?, ?, ?, ?, ?, 1)
        ON CONFLICT (schedule_id) DO UPDATE SET active = 1""",
        (
            schedule.schedule_id,
            schedule.type,
            to_json(schedule.args),
            to_json(schedule.options),
            to_json(schedule.trigger),
            schedule.next_run,
            int(schedule.allow_overlap),
        ),
    )
    return get_schedule(conn, schedule.schedule_id)


def get_schedule(conn: sqlite3.Connection, schedule_id: str) -> SharedScheduleRow:
    r = conn.execute(
        f"SELECT {SCHEDULE_COLUMNS} FROM jobsched_shared_schedules WHERE schedule_id = ?",
        (schedule_id,),
    ).fetchone()
    if r is None:
        raise StoreError(f"unknown schedule {schedule_id!r}")
    return schedule_row(r)


def fire_schedule(
    conn: sqlite3.Connection, schedule_id: str, expected_next: float, new_next: float, job: NewJob
) -> bool:
    """Fire the period due at `expected_next` exactly once across processes.

    A compare-and-set on ``next_run``: only the process that moves it from
    `expected_next` to `new_next` inserts `job` (in the same transaction);
    every other process sees False. Without ``allow_overlap`` the period is
    skipped (but still consumed) while the previous job is unfinished.
    """
    won = conn.execute(
        """UPDATE jobsched_shared_schedules SET next_run = ?
        WHERE schedule_id = ? AND next_run = ? AND active AND NOT paused
        RETURNING allow_overlap, last_job_id""",
        (new_next, schedule_id, expected_next),
    ).fetchone()
    if won is None:
        return False
    allow_overlap, last_job_id = won
    if not allow_overlap and last_job_id is not None:
        previous = conn.execute(
            "SELECT status FROM jobsched_shared_jobs WHERE job_id = ?", (last_job_id,)
        ).fetchone()
        if previous is not None and previous[0] not in TERMINAL:
            conn.execute(
                "UPDATE jobsched_shared_schedules SET skipped = skipped + 1 WHERE schedule_id = ?",
                (schedule_id,),
            )
            return True
    insert_fired(conn, schedule_id, job)
    # A schedule with `times` ends with its last run, for everyone.
    conn.execute(
        """UPDATE jobsched_shared_schedules SET fired = fired + 1, last_job_id = ?,
            next_run = CASE WHEN json_extract(trigger, '$.times') IS NOT NULL
                AND fired + 1 >= json_extract(trigger, '$.times')
                THEN 9e999 ELSE next_run END
        WHERE schedule_id = ?""",
        (job.job_id, schedule_id),
    )
    return True


def insert_fired(conn: sqlite3.Connection, schedule_id: str, job: NewJob) -> None:
    """Insert the job a schedule fires (pending, no dependencies)."""
    conn.execute(
        """INSERT INTO jobsched_shared_jobs (job_id, type, args, options, status, run_at,
            submitted_at, sort_key, schedule_id, submitted_by, queue, job_group)
        VALUES (?, ?, ?, ?, 'pending', ?, ?, ?, ?, ?, ?, ?)""",
        (
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
        ),
    )
    add_counts(conn, {"pending": 1})


def schedules(conn: sqlite3.Connection) -> list[SharedScheduleRow]:
    """Every schedule, by id."""
    cur = conn.execute(
        f"SELECT {SCHEDULE_COLUMNS} FROM jobsched_shared_schedules ORDER BY schedule_id"
    )
    return [schedule_row(r) for r in cur]


def deactivate_schedule(conn: sqlite3.Connection, schedule_id: str) -> bool:
    """Stop a schedule for every process; False if unknown or already stopped."""
    cur = conn.execute(
        "UPDATE jobsched_shared_schedules SET active = 0 WHERE schedule_id = ? AND active",
        (schedule_id,),
    )
    return cur.rowcount > 0


def schedule_jobs(
    conn: sqlite3.Connection, schedule_id: str, limit: int | None = None
) -> list[SharedJobRow]:
    """The jobs a schedule fired, in the order they were fired; with `limit`,
    the last `limit` of them. ``jobsched_shared_schedule`` holds the rowid
    (``seq``) after ``schedule_id``, so the newest come first off the index."""
    if limit is None:
        cur = conn.execute(
            f"SELECT {JOB_COLUMNS} FROM jobsched_shared_jobs WHERE schedule_id = ? ORDER BY seq",
            (schedule_id,),
        )
        return [job_row(r) for r in cur]
    cur = conn.execute(
        f"SELECT {JOB_COLUMNS} FROM jobsched_shared_jobs WHERE schedule_id = ? "
        "ORDER BY seq DESC LIMIT ?",
        (schedule_id, limit),
    )
    return [job_row(r) for r in cur][::-1]
