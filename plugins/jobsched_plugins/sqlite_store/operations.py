"""Operator actions on a shared file (postgres_store/operations.py in SQLite):
retrying and requeueing jobs, purging old ones, expiring results, progress,
the queue's pause flag, and pausing or triggering schedules.

Every function runs in the store's thread, inside the caller's transaction.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Sequence
from typing import Any

from jobsched.store import NewJob

from .claims import settle
from .connection import TERMINAL, now
from .schedules import insert_fired

RETRYABLE = ("failed", "timed_out", "cancelled")
_UNFINISHED = "('pending', 'running', 'retry_wait')"
_CHUNK = 500  # SQLite's limit on bound parameters, with room to spare


def _in(values: Sequence[Any]) -> str:
    return ",".join("?" * len(values))


def retry(conn: sqlite3.Connection, job_ids: Sequence[str]) -> list[str]:
    """Move the failed, timed-out or cancelled ones of `job_ids` back to pending."""
    # Two jobs of one unique key cannot both be unfinished: the first wins.
    candidates: list[str] = []
    keys: set[str] = set()
    ids = list(dict.fromkeys(job_ids))
    for i in range(0, len(ids), _CHUNK):
        chunk = ids[i : i + _CHUNK]
        for job_id, unique_key in conn.execute(
            f"SELECT job_id, unique_key FROM jobsched_shared_jobs WHERE job_id IN ({_in(chunk)}) "
            f"AND status IN ({_in(RETRYABLE)}) ORDER BY seq",
            [*chunk, *RETRYABLE],
        ):
            if unique_key is not None:
                if unique_key in keys:
                    continue
                keys.add(unique_key)
            candidates.append(job_id)
    moved: list[str] = []
    t = now()
    for i in range(0, len(candidates), _CHUNK):
        chunk = candidates[i : i + _CHUNK]
        cur = conn.execute(
            f"""UPDATE jobsched_shared_jobs SET status = 'pending', attempts = 0, run_at = ?,
                lease_owner = NULL, lease_expires = NULL, cancel_requested = 0,
                started_at = NULL, finished_at = NULL, result = NULL, result_expires = NULL,
                progress = NULL, last_error = NULL, last_traceback = NULL, lease_expiries = 0,
                build_refusals = 0, last_refusal = NULL, refused_by = NULL,
                unmet = (SELECT count(*) FROM jobsched_shared_dependencies d
                    JOIN jobsched_shared_jobs u ON u.job_id = d.upstream
                    WHERE d.job_id = jobsched_shared_jobs.job_id AND (u.status <> 'completed'
                      AND (jobsched_shared_jobs.trigger_rule = 'all_success'
                        OR u.status NOT IN ('failed', 'timed_out', 'cancelled'))))
            WHERE job_id IN ({_in(chunk)})
              AND (unique_key IS NULL OR NOT EXISTS (
                SELECT 1 FROM jobsched_shared_jobs o WHERE o.unique_key =
                    jobsched_shared_jobs.unique_key AND o.status IN {_UNFINISHED}))
            RETURNING job_id, seq""",
            [t, *chunk],
        )
        moved += [job_id for job_id, _ in sorted(cur.fetchall(), key=lambda r: r[1])]
    return moved


def requeue(conn: sqlite3.Connection, statuses: Sequence[str], type: str | None) -> list[str]:
    """`retry` every job in `statuses` (of `type`), in submit order."""
    wanted = [s for s in statuses if s in RETRYABLE]
    if not wanted:
        return []
    sql = f"SELECT job_id FROM jobsched_shared_jobs WHERE status IN ({_in(wanted)})"
    params: list[Any] = list(wanted)
    if type is not None:
        sql += " AND type = ?"
        params.append(type)
    ids = [r[0] for r in conn.execute(sql + " ORDER BY seq", params)]
    return retry(conn, ids)


def purge(conn: sqlite3.Connection, before: float, statuses: Sequence[str]) -> int:
    """Delete terminal jobs in `statuses` finished before `before`, with their
    dependency edges and history; how many jobs."""
    wanted = [s for s in statuses if s in ("completed", *RETRYABLE)]
    if not wanted:
        return 0
    ids = [
        r[0]
        for r in conn.execute(
            f"DELETE FROM jobsched_shared_jobs WHERE status IN ({_in(wanted)}) "
            "AND finished_at < ? RETURNING job_id",
            [*wanted, before],
        )
    ]
    for i in range(0, len(ids), _CHUNK):
        chunk = ids[i : i + _CHUNK]
        conn.execute(
            f"DELETE FROM jobsched_shared_dependencies WHERE job_id IN ({_in(chunk)}) "
            f"OR upstream IN ({_in(chunk)})",
            [*chunk, *chunk],
        )
        conn.execute(f"DELETE FROM jobsched_shared_attempts WHERE job_id IN ({_in(chunk)})", chunk)
    return len(ids)


def request_cancel_many(
    conn: sqlite3.Connection, job_ids: Sequence[str]
) -> tuple[list[str], list[tuple[str, str | None]]]:
    """Cancel each of `job_ids` (`claims.request_cancel`, for a batch):
    ``(done, running)``, the ids cancelled or flagged in the order given and,
    of those, the running ones with their lease owner."""
    ids = list(dict.fromkeys(job_ids))
    found: dict[str, tuple[str, str | None]] = {}
    for i in range(0, len(ids), _CHUNK):
        chunk = ids[i : i + _CHUNK]
        for job_id, status, owner in conn.execute(
            "SELECT job_id, status, lease_owner FROM jobsched_shared_jobs "
            f"WHERE job_id IN ({_in(chunk)}) AND status NOT IN ({_in(TERMINAL)})",
            [*chunk, *TERMINAL],
        ):
            found[job_id] = (status, owner)
    running = [(j, owner) for j, (status, owner) in found.items() if status == "running"]
    waiting = [j for j, (status, _) in found.items() if status != "running"]
    t = now()
    for i in range(0, len(running), _CHUNK):
        chunk = [j for j, _ in running[i : i + _CHUNK]]
        conn.execute(
            f"UPDATE jobsched_shared_jobs SET cancel_requested = 1 WHERE job_id IN ({_in(chunk)})",
            chunk,
        )
    for i in range(0, len(waiting), _CHUNK):
        chunk = waiting[i : i + _CHUNK]
        conn.execute(
            "UPDATE jobsched_shared_jobs SET status = 'cancelled', last_error = 'cancelled', "
            f"finished_at = ? WHERE job_id IN ({_in(chunk)})",
            [t, *chunk],
        )
    if waiting:
        settle(conn, [(job_id, "cancelled") for job_id in waiting], t)
    return [job_id for job_id in ids if job_id in found], running


def delete_finished(conn: sqlite3.Connection, job_ids: Sequence[str]) -> list[str]:
    """Delete the terminal jobs of `job_ids` with their dependency edges and
    history; the ids deleted, in the order given."""
    ids = list(dict.fromkeys(job_ids))
    gone: set[str] = set()
    for i in range(0, len(ids), _CHUNK):
        chunk = ids[i : i + _CHUNK]
        deleted = [
            r[0]
            for r in conn.execute(
                f"DELETE FROM jobsched_shared_jobs WHERE job_id IN ({_in(chunk)}) "
                f"AND status IN ({_in(TERMINAL)}) RETURNING job_id",
                [*chunk, *TERMINAL],
            )
        ]
        if deleted:
            conn.execute(
                f"DELETE FROM jobsched_shared_dependencies WHERE job_id IN ({_in(deleted)}) "
                f"OR upstream IN ({_in(deleted)})",
                [*deleted, *deleted],
            )
            conn.execute(
                f"DELETE FROM jobsched_shared_attempts WHERE job_id IN ({_in(deleted)})", deleted
            )
        gone.update(deleted)
    return [job_id for job_id in ids if job_id in gone]


def expire_results(conn: sqlite3.Connection) -> int:
    """Remove the results whose time is up; how many."""
    cur = conn.execute(
        "UPDATE jobsched_shared_jobs SET result = NULL, result_expires = NULL "
        "WHERE result_expires <= ?",
        (now(),),
    )
    return cur.rowcount


def set_progress(
    conn: sqlite3.Connection, updates: Sequence[tuple[str, dict[str, Any]]], owner: str
) -> int:
    """Store the progress of the jobs `owner` still runs; how many rows were written."""
    before = conn.total_changes
    conn.executemany(
        "UPDATE jobsched_shared_jobs SET progress = ? "
        "WHERE job_id = ? AND lease_owner = ? AND status = 'running'",
        [(json.dumps(data, allow_nan=False), job_id, owner) for job_id, data in updates],
    )
    return conn.total_changes - before


def set_queue_paused(conn: sqlite3.Connection, paused: bool, queue: str | None = None) -> bool:
    """Set the pause flag of every queue (`queue` None) or of one; False if it
    already was so."""
    if queue is not None:
        if paused:
            cur = conn.execute(
                "INSERT OR IGNORE INTO jobsched_shared_paused_queues (queue) VALUES (?)", (queue,)
            )
        else:
            cur = conn.execute(
                "DELETE FROM jobsched_shared_paused_queues WHERE queue = ?", (queue,)
            )
        return cur.rowcount > 0
    if paused:
        cur = conn.execute("INSERT OR IGNORE INTO jobsched_shared_paused (id) VALUES (1)")
    else:
        cur = conn.execute("DELETE FROM jobsched_shared_paused")
    return cur.rowcount > 0


def set_schedule_paused(
    conn: sqlite3.Connection, schedule_id: str, paused: bool, next_run: float | None
) -> bool:
    """Pause or resume a schedule; False if unknown or already so."""
    cur = conn.execute(
        "UPDATE jobsched_shared_schedules SET paused = ?, next_run = coalesce(?, next_run) "
        "WHERE schedule_id = ? AND paused = ?",
        (int(paused), next_run, schedule_id, int(not paused)),
    )
    return cur.rowcount > 0


def trigger_schedule(conn: sqlite3.Connection, schedule_id: str, job: NewJob) -> bool:
    """Insert `job` for the schedule now, counted as fired; False if unknown."""
    known = conn.execute(
        "SELECT 1 FROM jobsched_shared_schedules WHERE schedule_id = ?", (schedule_id,)
    ).fetchone()
    if known is None:
        return False
    insert_fired(conn, schedule_id, job)
    conn.execute(
        "UPDATE jobsched_shared_schedules SET fired = fired + 1, last_job_id = ? "
        "WHERE schedule_id = ?",
        (job.job_id, schedule_id),
    )
    return True
