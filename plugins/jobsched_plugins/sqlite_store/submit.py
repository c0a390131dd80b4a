"""Submitting: inserting jobs and their dependencies (postgres_store/submit.py in SQLite)."""

from __future__ import annotations

import os
import sqlite3
from collections.abc import Callable, Sequence
from typing import Any

from jobsched import UnknownJobError
from jobsched.store import NewJob, StoreError, pack_sort_key, settle_at_insert

from .connection import now, to_json
from .queries import add_counts

_INSERT = """
INSERT INTO jobsched_shared_jobs (job_id, key, type, args, options, status, run_at,
    submitted_at, sort_key, unmet, last_error, schedule_id, submitted_by, unique_key,
    finished_at, trigger_rule, queue, job_group)
VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
ON CONFLICT DO NOTHING
"""


def insert(
    conn: sqlite3.Connection,
    jobs: Sequence[NewJob],
    unknown: Callable[[str], Exception] = StoreError,
) -> tuple[list[str], bool]:
    """Insert jobs and their dependencies; ``(their ids, whether one is ready now)``.

    A job whose `key` (or id) already exists, or whose `unique_key` an
    unfinished job holds, is not inserted: the existing job's id is returned
    in its place. Dependencies that already ended are settled by the job's
    trigger rule (`settle_at_insert`): it may be due at once, or cancelled.
    An unknown dependency refuses the whole batch (`unknown` makes the error).
    """
    if not any(job.depends_on for job in jobs):
        inserted = _insert_independent(conn, jobs)
        if inserted is not None:
            return inserted, True
    known = {job.job_id for job in jobs}
    upstreams = sorted({d for job in jobs for d in job.depends_on} - known)
    statuses: dict[str, str] = {}
    for upstream in upstreams:
        r = conn.execute(
            "SELECT status FROM jobsched_shared_jobs WHERE job_id = ?", (upstream,)
        ).fetchone()
        if r is not None:
            statuses[upstream] = r[0]
    missing = [d for d in upstreams if d not in statuses]
    if missing:
        raise unknown(f"unknown dependencies: {missing}")
    ids: list[str] = []
    ready = False
    alias: dict[str, str] = {}  # id in this batch -> id of the job its key resumed
    added = {"pending": 0, "cancelled": 0}
    for job in jobs:
        depends_on = list(dict.fromkeys(alias.get(d, d) for d in job.depends_on))
        _, unmet, error = settle_at_insert(job.trigger_rule, depends_on, statuses)
        broken = error is not None
        status = "cancelled" if broken else "pending"
        cur = conn.execute(
            _INSERT,
            (
                job.job_id,
                job.key,
                job.type,
                to_json(job.args),
                to_json(job.options),
                status,
                job.run_at,
                job.submitted_at,
                pack_sort_key(job.sort_key),
                unmet,
                error,
                job.schedule_id,
                job.submitted_by,
                job.unique_key,
                now() if broken else None,
                job.trigger_rule,
                job.queue,
                job.options.get("group"),
            ),
        )
        if cur.rowcount == 0:
            # Its key or id exists (resume, don't duplicate), or an
            # unfinished job has its unique_key (deduplicate).
            existing = conn.execute(
                "SELECT job_id, status FROM jobsched_shared_jobs WHERE key = ? OR job_id = ? "
                "OR (unique_key = ? AND status IN ('pending', 'running', 'retry_wait')) "
                "LIMIT 1",
                (job.key, job.job_id, job.unique_key),
            ).fetchone()
            assert existing is not None
            ids.append(existing[0])
            alias[job.job_id] = existing[0]
            statuses[existing[0]] = existing[1]
            continue
        ids.append(job.job_id)
        statuses[job.job_id] = status
        added[status] += 1
        if status == "pending" and not unmet:
            ready = True
        if depends_on:
            # An edge for every dependency, ended or not: `dependents` lists the
            # job under each, `get` names them all. Settling reads only the
            # dependents still waiting (pending, unmet > 0).
            conn.executemany(
                "INSERT OR IGNORE INTO jobsched_shared_dependencies (job_id, upstream) "
                "VALUES (?, ?)",
                [(job.job_id, d) for d in sorted(depends_on)],
            )
    add_counts(conn, added)
    return ids, ready


def _insert_independent(conn: sqlite3.Connection, jobs: Sequence[NewJob]) -> list[str] | None:
    """The common batch, no dependencies: one ``executemany`` for all rows.

    Their ids if every row was inserted; None, with nothing inserted, if a
    key, id or unique_key made SQLite skip one (resuming or deduplicating
    needs `insert`'s row-by-row walk, which says which job each id is).
    """
    options_json: dict[tuple[Any, ...], str] = {}  # a batch's jobs share a few options

    def options(value: dict[str, Any]) -> str:
        try:
            cache_key = tuple(value.items())
            text = options_json.get(cache_key)
        except TypeError:  # a nested value (a retry policy): not hashable
            return to_json(value)
        if text is None:
            text = options_json[cache_key] = to_json(value)
        return text

    rows = [
        (
            job.job_id,
            job.key,
            job.type,
            to_json(job.args),
            options(job.options),
            "pending",
            job.run_at,
            job.submitted_at,
            pack_sort_key(job.sort_key),
            0,
            None,
            job.schedule_id,
            job.submitted_by,
            job.unique_key,
            None,
            job.trigger_rule,
            job.queue,
            job.options.get("group"),
        )
        for job in jobs
    ]
    # (An error rolls back the caller's whole transaction, this with it.)
    conn.execute("SAVEPOINT jobsched_insert")
    # executemany sums the rows changed: a skipped row makes it short.
    complete = conn.executemany(_INSERT, rows).rowcount == len(rows)
    if complete:
        add_counts(conn, {"pending": len(rows)})
    else:
        conn.execute("ROLLBACK TO jobsched_insert")
    conn.execute("RELEASE jobsched_insert")
    return [job.job_id for job in jobs] if complete else None


def insert_in_transaction(conn: Any, jobs: Sequence[NewJob], *, url: str, path: str) -> list[str]:
    """Insert `jobs` on the application's `conn`, in its transaction
    (``Client.submit(conn=...)``), which this never commits or rolls back.

    Other processes see them at its commit, by their poll of ``PRAGMA
    data_version``, as any commit to the file; a rollback leaves nothing.
    `conn` must be an ``sqlite3.Connection`` on the store's file (`path`) in
    a transaction, or one that opens one itself (the ``sqlite3`` module's
    default: the transaction is begun here, as its next INSERT would).
    """
    if not isinstance(conn, sqlite3.Connection):
        what = f"{type(conn).__module__}.{type(conn).__qualname__}"
        raise StoreError(
            f"{url}: conn= is a {what}; this store takes an sqlite3.Connection on its file {path}"
        )
    try:
        files = [r[2] for r in conn.execute("PRAGMA database_list") if r[1] == "main"]
        on = files[0] if files else ""
        if not on or not os.path.exists(on) or not os.path.samefile(on, path):
            raise StoreError(
                f"{url}: conn= is a connection to {on or 'an in-memory database'!s}, "
                f"not to this store's file {path}"
            )
        if not conn.in_transaction:
            if getattr(conn, "autocommit", -1) is True or conn.isolation_level is None:
                raise StoreError(
                    f"{url}: conn= is in autocommit mode outside a transaction, so the jobs "
                    "would be committed at once, not with the application's work: "
                    'open a transaction (conn.execute("BEGIN")) or submit without conn='
                )
            conn.execute(f"BEGIN {conn.isolation_level}")
        ids, _ = insert(conn, jobs, UnknownJobError)
    except sqlite3.Error as exc:
        raise StoreError(
            f"{url}: could not insert in the caller's transaction on {path}: {exc}"
        ) from exc
    return ids
