"""Reading jobs: one, several, or how many are in each status."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from jobsched.store import QueueStatsRow, SharedJobRow, StoreStats, queue_rows

from .connection import NOW, Database
from .rows import checked_limits, job_row

if TYPE_CHECKING:
    import psycopg


async def get(db: Database, job_id: str) -> SharedJobRow | None:
    """One job with its attempt history and dependencies, or None."""

    async def body(conn: psycopg.AsyncConnection[Any]) -> SharedJobRow | None:
        cur = await conn.execute(
            db.q(
                """SELECT j.*,
                    (SELECT coalesce(array_agg(upstream ORDER BY upstream), '{{}}')
                     FROM {s}.dependencies WHERE job_id = j.job_id) AS depends_on,
                    (SELECT coalesce(json_agg(json_build_array(number, status, error,
                        started_at, finished_at, worker, traceback) ORDER BY id), '[]')
                     FROM {s}.attempts WHERE job_id = j.job_id) AS history
                FROM {s}.jobs j WHERE j.job_id = %s"""
            ),
            [job_id],
        )
        rec = await cur.fetchone()
        if rec is None:
            return None
        return job_row(rec)

    return await db.transaction(body)


async def dependents(db: Database, job_id: str) -> list[str] | None:
    """The ids of the jobs that depend on `job_id`, in submit order; None if unknown.

    One statement: the job's own row tells an unknown id from one without
    dependents, and the dependencies' primary key (``upstream, job_id``)
    finds the edges without reading the others.
    """

    async def body(conn: psycopg.AsyncConnection[Any]) -> list[str] | None:
        cur = await conn.execute(
            db.q(
                """SELECT (SELECT coalesce(array_agg(d.job_id ORDER BY j.seq), '{{}}')
                     FROM {s}.dependencies d JOIN {s}.jobs j ON j.job_id = d.job_id
                     WHERE d.upstream = f.job_id) AS ids
                FROM {s}.jobs f WHERE f.job_id = %s"""
            ),
            [job_id],
        )
        rec = await cur.fetchone()
        return None if rec is None else list(rec["ids"])

    return await db.transaction(body)


async def page(
    db: Database,
    statuses: Sequence[str] | None,
    type: str | None,
    text: str | None,
    limit: int,
    offset: int,
) -> tuple[list[SharedJobRow], int]:
    """One page of matching jobs, newest first, and how many match."""
    where: list[str] = []
    params: list[Any] = []
    if statuses is not None:
        where.append("status = ANY(%s)")
        params.append(list(statuses))
    if type is not None:
        where.append("type = %s")
        params.append(type)
    if text:
        # strpos, not LIKE: the text is taken literally (no % or _ wildcards).
        where.append(
            "(strpos(lower(job_id), %s) > 0 OR strpos(lower(type), %s) > 0 "
            "OR strpos(lower(args::text), %s) > 0 "
            "OR strpos(lower(coalesce(options->>'name', '')), %s) > 0)"
        )
        params += [text.lower()] * 4
    clause = (" WHERE " + " AND ".join(where)) if where else ""

    async def body(conn: psycopg.AsyncConnection[Any]) -> tuple[list[SharedJobRow], int]:
        if type is None and not text:  # by status alone: the kept counts say how many
            counts = await _kept_counts(db, conn)
            total = sum(n for status, n in counts.items() if statuses is None or status in statuses)
        else:
            cur = await conn.execute(
                db.q("SELECT count(*)::int AS n FROM {s}.jobs" + clause), params
            )
            total = (await cur.fetchone() or {"n": 0})["n"]
        cur = await conn.execute(
            db.q("SELECT * FROM {s}.jobs" + clause + " ORDER BY seq DESC LIMIT %s OFFSET %s"),
            [*params, limit, offset],
        )
        return [job_row(r) for r in await cur.fetchall()], int(total)

    return await db.transaction(body)


async def stats(db: Database, since: float) -> StoreStats:
    """The queue at a glance (see `SharedStore.stats`), in one transaction."""

    async def body(conn: psycopg.AsyncConnection[Any]) -> StoreStats:
        cur = await conn.execute(
            db.q(
                "SELECT "
                + NOW
                + """ AS at,
                    EXISTS (SELECT 1 FROM {s}.paused) AS paused,
                    (SELECT data FROM {s}.limits WHERE id = 1) AS limits,
                    (SELECT coalesce(json_object_agg(job_type, tat), '{{}}')
                     FROM {s}.rate_buckets) AS tats"""
            )
        )
        head = await cur.fetchone()
        assert head is not None
        cur = await conn.execute(
            db.q(
                """SELECT floor(finished_at / 60) * 60 AS minute, status, count(*)::int AS n
                FROM {s}.jobs WHERE finished_at >= %s
                  AND status IN ('completed', 'failed', 'timed_out', 'cancelled')
                GROUP BY 1, 2"""
            ),
            [since],
        )
        finished = [(float(r["minute"]), r["status"], r["n"]) for r in await cur.fetchall()]
        cur = await conn.execute(
            db.q(
                """SELECT type, options->>'executor' AS exe, lease_owner, queue,
                    count(*)::int AS n, max(lease_expires) AS expires
                FROM {s}.jobs WHERE status = 'running' GROUP BY 1, 2, 3, 4"""
            )
        )
        running_queues: dict[str, int] = {}
        running_types: dict[str, int] = {}
        running_executors: dict[str, int] = {}
        leases: dict[str, tuple[int, float | None]] = {}
        for r in await cur.fetchall():
            n = r["n"]
            running_types[r["type"]] = running_types.get(r["type"], 0) + n
            running_queues[r["queue"]] = running_queues.get(r["queue"], 0) + n
            if r["exe"] is not None:
                running_executors[r["exe"]] = running_executors.get(r["exe"], 0) + n
            if r["lease_owner"] is not None:
                count, expires = leases.get(r["lease_owner"], (0, None))
                latest = r["expires"] if expires is None else max(expires, r["expires"] or 0.0)
                leases[r["lease_owner"]] = (count + n, latest)
        return StoreStats(
            counts=await _kept_counts(db, conn),
            finished=finished,
            leases=[(owner, n, exp) for owner, (n, exp) in sorted(leases.items())],
            running_types=running_types,
            running_executors=running_executors,
            limits=None if head["limits"] is None else checked_limits(head["limits"]),
            rate_tats={k: float(v) for k, v in head["tats"].items()},
            queue_paused=bool(head["paused"]),
            at=float(head["at"]),
            running_queues=running_queues,
        )

    return await db.transaction(body)


#: How many counter rows `_kept_counts` lets pile up before it folds those of
#: ended connections into shard 0 (7 statuses of a few dozen connections).
_FOLD_AT = 256


async def _kept_counts(db: Database, conn: psycopg.AsyncConnection[Any]) -> dict[str, int]:
    """How many jobs are in each status, from the counters the triggers keep
    (migration 8): a few rows, however many jobs. Once the rows of
    connections that have ended pile up, they are folded into shard 0 (by one
    process at a time; a counter moves whole, so no count is lost)."""
    cur = await conn.execute(
        db.q(
            "SELECT status, sum(n)::bigint AS n, count(*)::int AS r FROM {s}.job_counts GROUP BY 1"
        )
    )
    rows = await cur.fetchall()
    if sum(r["r"] for r in rows) > _FOLD_AT:
        await conn.execute(
            db.q(
                """WITH folded AS (
                    DELETE FROM {s}.job_counts
                    WHERE shard <> 0 AND shard NOT IN (SELECT pid FROM pg_stat_activity)
                      AND pg_try_advisory_xact_lock(hashtext(%s))
                    RETURNING status, n
                )
                INSERT INTO {s}.job_counts AS c (status, shard, n)
                SELECT status, 0, sum(n) FROM folded GROUP BY status ORDER BY status
                ON CONFLICT (status, shard) DO UPDATE SET n = c.n + excluded.n"""
            ),
            [db.channel + ":counts"],
        )
    return {r["status"]: int(r["n"]) for r in rows}


async def queue_paused(db: Database, queue: str | None = None) -> bool:
    """Whether every queue is paused (`queue` None), or that queue on its own."""

    async def body(conn: psycopg.AsyncConnection[Any]) -> bool:
        if queue is None:
            cur = await conn.execute(db.q("SELECT EXISTS (SELECT 1 FROM {s}.paused) AS p"))
        else:
            cur = await conn.execute(
                db.q("SELECT EXISTS (SELECT 1 FROM {s}.paused_queues WHERE queue = %s) AS p"),
                [queue],
            )
        rec = await cur.fetchone()
        return bool(rec and rec["p"])

    return await db.transaction(body)


async def queue_stats(db: Database, since: float) -> list[QueueStatsRow]:
    """Each queue at a glance (`SharedStore.queue_stats`), in one transaction.

    Reads the unfinished jobs and the ones finished since `since` (the
    ready and finished-time indexes), grouped by queue.
    """

    async def body(conn: psycopg.AsyncConnection[Any]) -> list[QueueStatsRow]:
        cur = await conn.execute(
            db.q(
                """WITH now AS (SELECT """
                + NOW
                + """ AS t)
                SELECT queue,
                    count(*) FILTER (WHERE ready)::int AS ready,
                    min(run_at) FILTER (WHERE ready) AS oldest,
                    count(*) FILTER (WHERE status = 'running')::int AS running,
                    count(*) FILTER (WHERE finished_at >= %s
                        AND status IN ('completed', 'failed', 'timed_out', 'cancelled'))::int
                        AS finished
                FROM (SELECT queue, status, run_at, finished_at,
                        status IN ('pending', 'retry_wait') AND unmet = 0
                            AND run_at <= (SELECT t FROM now) AS ready
                    FROM {s}.jobs
                    WHERE status IN ('pending', 'retry_wait', 'running')
                       OR finished_at >= %s) AS j
                GROUP BY queue"""
            ),
            [since, since],
        )
        found = {r["queue"]: r for r in await cur.fetchall()}
        cur = await conn.execute(db.q("SELECT queue FROM {s}.paused_queues"))
        paused = {r["queue"] for r in await cur.fetchall()}
        return queue_rows(found, paused)

    return await db.transaction(body)


async def dependents_of(db: Database, job_ids: Sequence[str]) -> dict[str, list[str]]:
    """`dependents` of each of `job_ids` that exists, in one transaction: the
    dependencies' primary key (``upstream, job_id``) finds every edge."""

    async def body(conn: psycopg.AsyncConnection[Any]) -> dict[str, list[str]]:
        ids = list(dict.fromkeys(job_ids))
        cur = await conn.execute(db.q("SELECT job_id FROM {s}.jobs WHERE job_id = ANY(%s)"), [ids])
        found: dict[str, list[str]] = {r["job_id"]: [] for r in await cur.fetchall()}
        cur = await conn.execute(
            db.q(
                """SELECT d.upstream, d.job_id FROM {s}.dependencies d
                JOIN {s}.jobs j ON j.job_id = d.job_id
                WHERE d.upstream = ANY(%s) ORDER BY j.seq"""
            ),
            [ids],
        )
        for rec in await cur.fetchall():
            found.setdefault(rec["upstream"], []).append(rec["job_id"])
        return found

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
        return [job_row(r) for r in await cur.fetchall()]

    return await db.transaction(body)


async def counts(db: Database) -> dict[str, int]:
    """How many jobs are in each status (the kept counts: a few rows)."""

    async def body(conn: psycopg.AsyncConnection[Any]) -> dict[str, int]:
        return {status: n for status, n in (await _kept_counts(db, conn)).items() if n}

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
