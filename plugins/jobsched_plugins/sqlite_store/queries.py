"""Reading a shared file's jobs: one, several, counts, and as a `Snapshot`.

Every function runs in the store's thread, inside the caller's transaction.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Sequence
from typing import Any

from jobsched.store import JobRow, SharedJobRow, SharedScheduleRow, Snapshot

from .connection import TERMINAL, unpack_sort_key

JOB_COLUMNS = (
    "job_id, key, type, args, options, status, attempts, run_at, submitted_at, seq, "
    "sort_key, unmet, lease_owner, lease_expires, cancel_requested, result, last_error, "
    "schedule_id, submitted_by, started_at, finished_at, unique_key"
)
SCHEDULE_COLUMNS = (
    "schedule_id, type, args, options, trigger, next_run, allow_overlap, active, "
    "last_job_id, fired, skipped"
)


def job_row(r: Sequence[Any]) -> SharedJobRow:
    """A row selected with `JOB_COLUMNS` as a `SharedJobRow`."""
    return SharedJobRow(
        job_id=r[0],
        key=r[1],
        type=r[2],
        args=json.loads(r[3]),
        options=json.loads(r[4]),
        status=r[5],
        attempts=r[6],
        run_at=r[7],
        submitted_at=r[8],
        seq=r[9],
        sort_key=unpack_sort_key(r[10]),
        unmet=r[11],
        lease_owner=r[12],
        lease_expires=r[13],
        cancel_requested=bool(r[14]),
        result=None if r[15] is None else json.loads(r[15]),
        last_error=r[16],
        schedule_id=r[17],
        submitted_by=r[18],
        started_at=r[19],
        finished_at=r[20],
        unique_key=r[21],
    )


def schedule_row(r: Sequence[Any]) -> SharedScheduleRow:
    """A row selected with `SCHEDULE_COLUMNS` as a `SharedScheduleRow`."""
    return SharedScheduleRow(
        schedule_id=r[0],
        type=r[1],
        args=json.loads(r[2]),
        options=json.loads(r[3]),
        trigger=json.loads(r[4]),
        next_run=r[5],
        allow_overlap=bool(r[6]),
        active=bool(r[7]),
        last_job_id=r[8],
        fired=r[9],
        skipped=r[10],
    )


def _in(ids: Sequence[str]) -> str:
    return ",".join("?" * len(ids))


def get(conn: sqlite3.Connection, job_id: str) -> SharedJobRow | None:
    r = conn.execute(
        f"SELECT {JOB_COLUMNS} FROM jobsched_shared_jobs WHERE job_id = ?", (job_id,)
    ).fetchone()
    return None if r is None else job_row(r)


def jobs(conn: sqlite3.Connection, job_ids: Sequence[str] | None = None) -> list[SharedJobRow]:
    if job_ids is None:
        cur = conn.execute(f"SELECT {JOB_COLUMNS} FROM jobsched_shared_jobs ORDER BY seq")
        return [job_row(r) for r in cur]
    rows: list[SharedJobRow] = []
    ids = list(job_ids)
    for i in range(0, len(ids), 500):  # SQLite's limit on bound parameters
        chunk = ids[i : i + 500]
        cur = conn.execute(
            f"SELECT {JOB_COLUMNS} FROM jobsched_shared_jobs WHERE job_id IN ({_in(chunk)})",
            chunk,
        )
        rows += [job_row(r) for r in cur]
    rows.sort(key=lambda r: r.seq)
    return rows


def counts(conn: sqlite3.Connection) -> dict[str, int]:
    cur = conn.execute("SELECT status, count(*) FROM jobsched_shared_jobs GROUP BY status")
    return {status: n for status, n in cur}


def unfinished(conn: sqlite3.Connection, job_ids: Sequence[str]) -> int:
    return sum(1 for r in jobs(conn, job_ids) if r.status not in TERMINAL)


def snapshot(conn: sqlite3.Connection) -> Snapshot:
    """A shared file's jobs as `JobRow` objects, for ``jobsched status``."""
    deps: dict[str, list[str]] = {}
    for job_id, upstream in conn.execute(
        "SELECT job_id, upstream FROM jobsched_shared_dependencies"
    ):
        deps.setdefault(job_id, []).append(upstream)
    rows = [
        JobRow(
            job_id=r.job_id,
            type=r.type,
            status=r.status,
            run_at=r.run_at,
            submitted_at=r.submitted_at,
            seq=r.seq,
            key=r.key,
            args=json.dumps(r.args),
            options=json.dumps(r.options),
            depends_on=tuple(sorted(deps.get(r.job_id, ()))),
            attempts=r.attempts,
            finished_at=r.finished_at,
            result=None if r.result is None else json.dumps(r.result),
            last_error=r.last_error,
            schedule_id=r.schedule_id,
        )
        for r in jobs(conn)
    ]
    return Snapshot(jobs=rows)
