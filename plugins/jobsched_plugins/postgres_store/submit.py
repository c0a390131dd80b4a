"""Submitting: inserting jobs and their dependencies."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from jobsched.store import NewJob, StoreError

from .connection import NOW, TERMINAL, Database, to_json

if TYPE_CHECKING:
    import psycopg


async def insert(db: Database, jobs: Sequence[NewJob]) -> list[str]:
    """Insert jobs and their dependencies in one transaction; returns their ids.

    A job whose `key` already exists is not inserted again: the existing
    job's id is returned in its place (that is how a job file resumes).
    A dependency on a job that failed or was cancelled cancels the new job.
    """
    if not jobs:
        return []
    known = {job.job_id for job in jobs}

    async def body(conn: psycopg.AsyncConnection[Any]) -> list[str]:
        upstreams = sorted({d for job in jobs for d in job.depends_on} - known)
        done: dict[str, str] = {}
        if upstreams:
            cur = await conn.execute(
                db.q("SELECT job_id, status FROM {s}.jobs WHERE job_id = ANY(%s)"),
                [upstreams],
            )
            done = {r["job_id"]: r["status"] for r in await cur.fetchall()}
            missing = [d for d in upstreams if d not in done]
            if missing:
                raise StoreError(f"unknown dependencies: {missing}")
        ids: list[str] = []
        ready = False
        statuses = dict(done)
        alias: dict[str, str] = {}  # id in this batch -> id of the job its key resumed
        for job in jobs:
            depends_on = [alias.get(d, d) for d in job.depends_on]
            unmet = [d for d in depends_on if statuses.get(d) != "completed"]
            broken = [d for d in depends_on if statuses.get(d) in TERMINAL and d in unmet]
            status = "cancelled" if broken else "pending"
            error = f"upstream {broken[0]} {statuses[broken[0]]}" if broken else None
            cur = await conn.execute(
                db.q(
                    """INSERT INTO {s}.jobs (job_id, key, type, args, options, status,
                        run_at, submitted_at, sort_key, unmet, last_error, schedule_id,
                        submitted_by, unique_key, finished_at)
                    VALUES (%s, %s, %s, %s::jsonb, %s::jsonb, %s, %s, %s, %s, %s, %s,
                        %s, %s, %s, CASE WHEN %s = 'cancelled' THEN """
                    + NOW
                    + """ END)
                    ON CONFLICT DO NOTHING RETURNING job_id"""
                ),
                [
                    job.job_id,
                    job.key,
                    job.type,
                    to_json(job.args),
                    to_json(job.options),
                    status,
                    job.run_at,
                    job.submitted_at,
                    [float(x) for x in job.sort_key],
                    0 if broken else len(unmet),
                    error,
                    job.schedule_id,
                    job.submitted_by,
                    job.unique_key,
                    status,
                ],
            )
            inserted = await cur.fetchone()
            if inserted is None:
                # Its key or id exists (resume, don't duplicate), or an
                # unfinished job has its unique_key (deduplicate).
                cur = await conn.execute(
                    db.q(
                        "SELECT job_id, status FROM {s}.jobs WHERE key = %s OR job_id = %s "
                        "OR (unique_key = %s AND status IN ('pending', 'running', "
                        "'retry_wait')) LIMIT 1"
                    ),
                    [job.key, job.job_id, job.unique_key],
                )
                existing = await cur.fetchone()
                assert existing is not None
                ids.append(existing["job_id"])
                alias[job.job_id] = existing["job_id"]
                statuses[existing["job_id"]] = existing["status"]
                continue
            ids.append(job.job_id)
            statuses[job.job_id] = status
            if status == "pending" and not unmet:
                ready = True
            if unmet and not broken:
                await conn.execute(
                    db.q(
                        "INSERT INTO {s}.dependencies (job_id, upstream) "
                        "SELECT %s, unnest(%s::text[]) ON CONFLICT DO NOTHING"
                    ),
                    [job.job_id, unmet],
                )
        if ready:
            await db.notify_work(conn)
        return ids

    return await db.transaction(body)
