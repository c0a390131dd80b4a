"""The worker registry in a shared file: a heartbeat row per worker in
``jobsched_shared_workers`` (`WorkersRole`; postgres_store/workers.py in SQLite)."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Sequence

from jobsched.store import WORKER_COLUMNS, WorkerRow, checked_command, checked_worker, json_column

_COLUMNS = ", ".join(WORKER_COLUMNS)


def heartbeat(
    conn: sqlite3.Connection, worker: WorkerRow, forget_after: float, now: float
) -> str | None:
    """Upsert the worker's row stamped `now` (its request kept); delete the
    rows not seen for `forget_after` s; returns the row's request."""
    conn.execute(
        "DELETE FROM jobsched_shared_workers WHERE last_seen < ? AND worker_id <> ?",
        (now - forget_after, worker.worker_id),
    )
    (command,) = conn.execute(
        f"INSERT INTO jobsched_shared_workers ({_COLUMNS}) "
        """VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, NULL)
        ON CONFLICT (worker_id) DO UPDATE SET host = excluded.host, pid = excluded.pid,
            queues = excluded.queues, job_types = excluded.job_types,
            version = excluded.version, last_seen = excluded.last_seen,
            lost_after = excluded.lost_after, running = excluded.running,
            state = excluded.state
        RETURNING command""",
        (
            worker.worker_id,
            worker.host,
            worker.pid,
            json.dumps(worker.queues),
            json.dumps(worker.job_types),
            worker.version,
            now,
            now,
            worker.lost_after,
            worker.running,
            worker.state,
        ),
    ).fetchone()
    return checked_command(worker.worker_id, command)


def request_worker(conn: sqlite3.Connection, worker_id: str, command: str, now: float) -> bool:
    """Leave `command` on a live worker's row (``stop`` stays); False if unknown or lost."""
    cur = conn.execute(
        "UPDATE jobsched_shared_workers SET command = "
        "CASE WHEN command = 'stop' THEN 'stop' ELSE ? END "
        "WHERE worker_id = ? AND ? - last_seen <= lost_after",
        (command, worker_id, now),
    )
    return cur.rowcount > 0


def workers(conn: sqlite3.Connection) -> list[WorkerRow]:
    """Every worker's row, by id, checked (`BadRowError` for one changed by hand)."""
    rows = []
    for r in conn.execute(f"SELECT {_COLUMNS} FROM jobsched_shared_workers ORDER BY worker_id"):
        values = dict(zip(WORKER_COLUMNS, r, strict=True))
        for column in ("queues", "job_types"):
            values[column] = json_column("worker", values["worker_id"], column, values[column])
        rows.append(checked_worker(WorkerRow(**values)))
    return rows


def forget_worker(conn: sqlite3.Connection, worker_id: str) -> bool:
    """Delete a worker's row; False if there was none."""
    cur = conn.execute("DELETE FROM jobsched_shared_workers WHERE worker_id = ?", (worker_id,))
    return cur.rowcount > 0


def unserved_types(
    conn: sqlite3.Connection, known: Sequence[str], scan: int, now: float
) -> dict[str, int]:
    """Due jobs per job type not in `known`, among the first `scan` due jobs
    in claim order (the walks of both ready indexes, stopped there)."""
    marks = ", ".join("?" * len(known))
    return dict(
        conn.execute(
            "SELECT type, count(*) FROM ("
            "SELECT type, sort_key, seq FROM jobsched_shared_jobs "
            "INDEXED BY jobsched_shared_ready WHERE job_group IS NULL "
            "AND status IN ('pending', 'retry_wait') AND unmet = 0 AND run_at <= ? "
            "UNION ALL SELECT type, sort_key, seq FROM jobsched_shared_jobs "
            "INDEXED BY jobsched_shared_ready_group WHERE job_group IS NOT NULL "
            "AND status IN ('pending', 'retry_wait') AND unmet = 0 AND run_at <= ? "
            f"ORDER BY sort_key, seq LIMIT ?) WHERE type NOT IN ({marks}) GROUP BY type",
            (now, now, scan, *known),
        ).fetchall()
    )
