"""Operator actions on a single-owner file while no process owns it.

``jobsched jobs retry|requeue|cancel|purge``, ``jobsched schedules
pause|resume``, the dashboard and `Client` change the journal's rows as its
owner would have written them, and the next owner (``jobsched run`` on the
file again) restores them as it restores anything: a retried job runs, a
cancelled one's dependents are settled by their trigger rules. Each runs as
the owner for one transaction (`Database.as_owner`), which refuses while an
owner runs, naming it: a running owner keeps its jobs in memory and would
overwrite the change.

Every function runs in the store's thread, inside that transaction, on a
file migrated to this version first (`migrations.migrate_single_owner`).
"""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from typing import Any

from . import migrations
from .connection import TERMINAL, now
from .journal import PURGE, PURGE_CHUNK
from .operations import RETRYABLE

_UNFINISHED = ("pending", "running", "retry_wait")
_CHUNK = 500  # SQLite's limit on bound parameters, with room to spare


def _marks(values: Sequence[Any]) -> str:
    return ",".join("?" * len(values))


def retry(conn: sqlite3.Connection, job_ids: Sequence[str]) -> list[str]:
    """Move the failed, timed-out or cancelled ones of `job_ids` back to
    pending, due now, attempts from 0; the ids moved, in submit order.

    A job whose unique_key an unfinished job holds stays (the first of two
    such wins), as in the shared mode.
    """
    migrations.migrate_single_owner(conn)
    ids = list(dict.fromkeys(job_ids))
    found: list[tuple[int, str, Any]] = []
    for i in range(0, len(ids), _CHUNK):
        chunk = ids[i : i + _CHUNK]
        found += conn.execute(
            "SELECT seq, job_id, json_extract(options, '$.unique_key') FROM jobsched_jobs "
            f"WHERE job_id IN ({_marks(chunk)}) AND status IN ({_marks(RETRYABLE)})",
            [*chunk, *RETRYABLE],
        ).fetchall()
    held = {
        r[0]
        for r in conn.execute(
            "SELECT json_extract(options, '$.unique_key') FROM jobsched_jobs "
            f"WHERE status IN ({_marks(_UNFINISHED)}) "
            "AND json_extract(options, '$.unique_key') IS NOT NULL",
            _UNFINISHED,
        )
    }
    moved = []
    for _, job_id, unique_key in sorted(found):
        if unique_key is not None:
            if unique_key in held:
                continue
            held.add(unique_key)
        moved.append(job_id)
    conn.executemany(
        "UPDATE jobsched_jobs SET status = 'pending', attempts = 0, run_at = ?, "
        "finished_at = NULL, result = NULL, last_error = NULL, last_traceback = NULL "
        "WHERE job_id = ?",
        [(now(), job_id) for job_id in moved],
    )
    return moved


def requeue(conn: sqlite3.Connection, statuses: Sequence[str], type: str | None) -> list[str]:
    """`retry` every job in `statuses` (of `type`), in submit order."""
    wanted = [s for s in statuses if s in RETRYABLE]
    if not wanted:
        return []
    sql = f"SELECT job_id FROM jobsched_jobs WHERE status IN ({_marks(wanted)})"
    params: list[Any] = list(wanted)
    if type is not None:
        sql += " AND type = ?"
        params.append(type)
    return retry(conn, [r[0] for r in conn.execute(sql + " ORDER BY seq", params)])


def cancel(conn: sqlite3.Connection, job_id: str) -> bool:
    """Cancel an unfinished job (a running one is one its owner left when it
    stopped); False if unknown or finished. Its dependents are settled by
    their trigger rules when the next owner restores the file."""
    migrations.migrate_single_owner(conn)
    cur = conn.execute(
        "UPDATE jobsched_jobs SET status = 'cancelled', last_error = 'cancelled', "
        f"finished_at = ? WHERE job_id = ? AND status NOT IN ({_marks(TERMINAL)})",
        [now(), job_id, *TERMINAL],
    )
    return cur.rowcount > 0


def cancel_many(conn: sqlite3.Connection, job_ids: Sequence[str]) -> list[str]:
    """`cancel` each of `job_ids`; the ids cancelled, in the order given."""
    migrations.migrate_single_owner(conn)
    ids = list(dict.fromkeys(job_ids))
    done: set[str] = set()
    t = now()
    for i in range(0, len(ids), _CHUNK):
        chunk = ids[i : i + _CHUNK]
        done.update(
            r[0]
            for r in conn.execute(
                "UPDATE jobsched_jobs SET status = 'cancelled', last_error = 'cancelled', "
                f"finished_at = ? WHERE job_id IN ({_marks(chunk)}) "
                f"AND status NOT IN ({_marks(TERMINAL)}) RETURNING job_id",
                [t, *chunk, *TERMINAL],
            )
        )
    return [job_id for job_id in ids if job_id in done]


def delete_finished(conn: sqlite3.Connection, job_ids: Sequence[str]) -> list[str]:
    """Delete the terminal jobs of `job_ids` (as the owner's purge does: an
    upstream of an unfinished job stays); the ids deleted, in the order given."""
    migrations.migrate_single_owner(conn)
    ids = list(dict.fromkeys(job_ids))
    sql = PURGE.format(statuses=_marks(TERMINAL))
    gone: set[str] = set()
    for i in range(0, len(ids), PURGE_CHUNK):
        chunk = ids[i : i + PURGE_CHUNK]
        gone.update(
            r[0]
            for r in conn.execute(
                f"{sql} AND job_id IN ({_marks(chunk)}) RETURNING job_id",
                [*TERMINAL, float("inf"), *chunk],
            )
        )
    return [job_id for job_id in ids if job_id in gone]


def purge(conn: sqlite3.Connection, before: float, statuses: Sequence[str]) -> int:
    """Delete terminal jobs in `statuses` finished before `before` (as the
    owner's purge does: an upstream of an unfinished job stays); how many."""
    migrations.migrate_single_owner(conn)
    wanted = [s for s in statuses if s in TERMINAL]
    if not wanted:
        return 0
    return conn.execute(PURGE.format(statuses=_marks(wanted)), (*wanted, before)).rowcount


def set_schedule_paused(
    conn: sqlite3.Connection, schedule_id: str, paused: bool, next_run: float | None
) -> bool:
    """Pause or resume a schedule; False if unknown, ended or already so."""
    migrations.migrate_single_owner(conn)
    cur = conn.execute(
        "UPDATE jobsched_schedules SET paused = ?, next_run = coalesce(?, next_run) "
        "WHERE schedule_id = ? AND paused = ? AND active = 1",
        (int(paused), next_run, schedule_id, int(not paused)),
    )
    return cur.rowcount > 0
