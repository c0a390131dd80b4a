"""Reading jobs: one, several, or how many are in each status."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from jobsched.store import SharedJobRow

from .connection import Database

if TYPE_CHECKING:
    import psycopg


async def get(db: Database, job_id: str) -> SharedJobRow | None:
    """One job, or None."""

    async def body(conn: psycopg.AsyncConnection[Any]) -> SharedJobRow | None:
        cur = await conn.execute(db.q("SELECT * FROM {s}.jobs WHERE job_id = %s"), [job_id])
        rec = await cur.fetchone()
        return None if rec is None else SharedJobRow.from_record(rec)

    return await db.transaction(body)


async def jobs(db: Database, job_ids: Sequence[str] | None = None) -> list[SharedJobRow]:
    """Every job (or those with `job_ids`), in submit order."""

    async def body(conn: psycopg.AsyncConnection[Any]) -> list[SharedJobRow]:
        if job_ids is None:
            cur = await conn.execute(db.q("SELECT * FROM {s}.jobs ORDER BY seq"))
        else:
            cur = await conn.execute(
                db.q("SELECT * FROM {s}.jobs WHERE job_id = ANY(%s) ORDER BY seq"),
                [list(job_ids)],
            )
        return [SharedJobRow.from_record(r) for r in await cur.fetchall()]

    return await db.transaction(body)


async def counts(db: Database) -> dict[str, int]:
    """How many jobs are in each status."""

    async def body(conn: psycopg.AsyncConnection[Any]) -> dict[str, int]:
        cur = await conn.execute(
            db.q("SELECT status, count(*)::int AS n FROM {s}.jobs GROUP BY status")
        )
        return {r["status"]: r["n"] for r in await cur.fetchall()}

    return await db.transaction(body)


async def unfinished(db: Database, job_ids: Sequence[str]) -> int:
    """How many of `job_ids` are not terminal yet."""

    async def body(conn: psycopg.AsyncConnection[Any]) -> int:
        cur = await conn.execute(
            db.q(
                "SELECT count(*)::int AS n FROM {s}.jobs WHERE job_id = ANY(%s) "
                "AND status NOT IN ('completed', 'failed', 'timed_out', 'cancelled')"
            ),
            [list(job_ids)],
        )
        rec = await cur.fetchone()
        return int(rec["n"]) if rec else 0

    return await db.transaction(body)
