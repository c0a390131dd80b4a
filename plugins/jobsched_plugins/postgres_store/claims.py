"""Claims, leases and limits: taking due jobs in strategy order under the
cluster's limits, keeping and losing leases, writing outcomes (releasing or
cancelling dependents in the same transaction), and cancel requests.

Each call is one transaction (`Database.transaction`).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any

from jobsched.store import Outcome, SharedJobRow, StoreError

from .connection import FINISHED, NOW, TERMINAL, WORK, Database, logger

if TYPE_CHECKING:
    import psycopg


#: The connection outcomes are written on (`Database.transaction`'s lane).
OUTCOMES = "outcomes"


class LimitsSeen:
    """Whether the last claim found cluster limits stored: finishing a job then
    frees a limit's slot, so `finish` wakes the claimers a limit held back."""

    def __init__(self) -> None:
        self.found = False


async def claim(
    db: Database, limits: LimitsSeen, lease_seconds: float, n: int, owner: str
) -> tuple[list[SharedJobRow], float | None]:
    """Take up to `n` due jobs in strategy order with a lease for `owner`.

    Returns the rows (now ``running``, attempts counted) and, when fewer
    than `n` were due, the wall time the next waiting job becomes due
    (None if there is none), so the caller can sleep exactly that long.
    With cluster limits stored (`sync_limits`) the claim enforces them
    instead, in a transaction of its own (see `_claim_limited`).
    """
    if n <= 0:
        return [], None

    async def plain(conn: psycopg.AsyncConnection[Any]) -> list[SharedJobRow]:
        cur = await conn.execute(db.q(_CLAIM), [n, owner, lease_seconds])
        return [SharedJobRow.from_record(r) for r in await cur.fetchall()]

    # One statement on the autocommit connection (one round trip for a busy
    # queue); it claims nothing while limits are stored or the queue is
    # paused, which is asked only when it got fewer than `n`.
    rows = await db.statement(plain)
    rows.sort(key=lambda r: (r.sort_key, r.seq))
    limits.found = False
    if len(rows) == n:
        return rows, None

    async def rest(
        conn: psycopg.AsyncConnection[Any],
    ) -> tuple[list[SharedJobRow], float | None]:
        cur = await conn.execute(
            db.q(
                "SELECT min(run_at) AS t, "
                "(SELECT data FROM {s}.limits WHERE id = 1) AS limits, "
                "EXISTS (SELECT 1 FROM {s}.paused) AS paused FROM {s}.jobs "
                "WHERE status IN ('pending', 'retry_wait') AND unmet = 0"
            )
        )
        rec = await cur.fetchone()
        if rec is not None and rec["paused"]:
            return [], None  # resuming wakes every claimer
        if rec is not None and rec["limits"]:
            limits.found = True
            return await _claim_limited(
                db, conn, lease_seconds, n - len(rows), owner, rec["limits"]
            )
        return [], rec["t"] if rec else None

    more, next_due = await db.transaction(rest)
    return rows + more, next_due


# The plain claim: the first `n` due jobs in strategy order, locked without
# waiting for the ones other claimers hold.
_CLAIM = (
    "WITH now AS (SELECT "
    + NOW
    + """ AS t), picked AS (
    SELECT job_id FROM {s}.jobs
    WHERE status IN ('pending', 'retry_wait') AND unmet = 0
      AND run_at <= (SELECT t FROM now)
      AND NOT EXISTS (SELECT 1 FROM {s}.limits)
      AND NOT EXISTS (SELECT 1 FROM {s}.paused)
    ORDER BY sort_key, seq
    LIMIT %s FOR UPDATE SKIP LOCKED)
UPDATE {s}.jobs j SET status = 'running', attempts = j.attempts + 1,
    lease_owner = %s, lease_expires = (SELECT t FROM now) + %s,
    started_at = (SELECT t FROM now), progress = NULL
FROM picked WHERE j.job_id = picked.job_id
RETURNING j.*"""
)


async def _claim_limited(
    db: Database,
    conn: psycopg.AsyncConnection[Any],
    lease_seconds: float,
    n: int,
    owner: str,
    limits: dict[str, Any],
) -> tuple[list[SharedJobRow], float | None]:
    """The claim under cluster limits, inside the claim transaction.

    One transaction-level advisory lock per schema serializes the claims
    that check limits (every claimer needs every limited key, so a lock
    per key would serialize them just the same, with a deadlock risk), so
    two processes can never both take the last slot or the last token.
    Slots are counted from the ``running`` rows (a claimed job holds its
    slot until its outcome is written or its expired lease is reaped);
    rate tokens come from the GCRA buckets in ``rate_buckets``. A job at
    a limit is skipped, not waited for: the jobs behind it are claimed.
    """
    types: dict[str, int] = dict(limits.get("job_types") or {})
    executors: dict[str, int] = dict(limits.get("executors") or {})
    rates: dict[str, dict[str, float]] = dict(limits.get("rates") or {})
    await conn.execute("SELECT pg_advisory_xact_lock(hashtext(%s))", [db.channel + ":limits"])
    cur = await conn.execute("SELECT " + NOW + " AS t")
    now = float((await cur.fetchone())["t"])  # type: ignore[index]
    running_t = dict.fromkeys(types, 0)
    running_e = dict.fromkeys(executors, 0)
    if types or executors:
        cur = await conn.execute(
            db.q(
                """SELECT type, options->>'executor' AS exe, count(*)::int AS n
                FROM {s}.jobs WHERE status = 'running'
                  AND (type = ANY(%s) OR options->>'executor' = ANY(%s))
                GROUP BY 1, 2"""
            ),
            [list(types), list(executors)],
        )
        for r in await cur.fetchall():
            if r["type"] in running_t:
                running_t[r["type"]] += r["n"]
            if r["exe"] in running_e:
                running_e[r["exe"]] += r["n"]
    tats: dict[str, float] = {}
    if rates:
        cur = await conn.execute(
            db.q("SELECT job_type, tat FROM {s}.rate_buckets WHERE job_type = ANY(%s)"),
            [list(rates)],
        )
        tats = {r["job_type"]: r["tat"] for r in await cur.fetchall()}

    def token_at(kind: str) -> float:
        # GCRA: the next token is free at tat - tolerance (tat >= now).
        rate = rates[kind]
        interval = 1.0 / rate["per_second"]
        return max(tats.get(kind, now), now) - (rate["burst"] - 1) * interval

    def blocked() -> tuple[list[str], list[str]]:
        full_t = {t for t, lim in types.items() if running_t[t] >= lim}
        full_t |= {t for t in rates if token_at(t) > now + 1e-9}
        full_e = [e for e, lim in executors.items() if running_e[e] >= lim]
        return sorted(full_t), full_e

    taken: list[str] = []
    seen: list[str] = []
    # Each pass excludes the keys at their limit; a row skipped in a pass
    # means a key filled up during it, so the passes end.
    while len(taken) < n:
        full_t, full_e = blocked()
        cur = await conn.execute(
            db.q(
                """SELECT job_id, type, options->>'executor' AS exe FROM {s}.jobs
                WHERE status IN ('pending', 'retry_wait') AND unmet = 0 AND run_at <= %s
                  AND type <> ALL(%s) AND coalesce(options->>'executor', '') <> ALL(%s)
                  AND job_id <> ALL(%s)
                ORDER BY sort_key, seq
                LIMIT %s FOR UPDATE SKIP LOCKED"""
            ),
            [now, full_t, full_e, seen, n - len(taken)],
        )
        candidates = await cur.fetchall()
        if not candidates:
            break
        for r in candidates:
            seen.append(r["job_id"])
            kind, exe = r["type"], r["exe"]
            if kind in types and running_t[kind] >= types[kind]:
                continue
            if exe in executors and running_e[exe] >= executors[exe]:
                continue
            if kind in rates:
                if token_at(kind) > now + 1e-9:
                    continue
                tats[kind] = max(tats.get(kind, now), now) + 1.0 / rates[kind]["per_second"]
            if kind in types:
                running_t[kind] += 1
            if exe in executors:
                running_e[exe] += 1
            taken.append(r["job_id"])
            if len(taken) == n:
                break
    rows: list[SharedJobRow] = []
    if taken:
        cur = await conn.execute(
            db.q(
                """UPDATE {s}.jobs SET status = 'running', attempts = attempts + 1,
                    lease_owner = %s, lease_expires = %s, started_at = %s, progress = NULL
                WHERE job_id = ANY(%s) RETURNING *"""
            ),
            [owner, now + lease_seconds, now, taken],
        )
        rows = [SharedJobRow.from_record(r) for r in await cur.fetchall()]
        rows.sort(key=lambda r: (r.sort_key, r.seq))
    if tats:
        await conn.execute(
            db.q(
                """INSERT INTO {s}.rate_buckets (job_type, tat)
                SELECT * FROM unnest(%s::text[], %s::float8[])
                ON CONFLICT (job_type) DO UPDATE SET tat = excluded.tat"""
            ),
            [list(tats), list(tats.values())],
        )
    next_due = None
    if len(rows) < n:
        # Jobs held by a concurrency limit wake on the finish notification;
        # jobs held by a rate wake when their next token is due.
        full_t, full_e = blocked()
        cur = await conn.execute(
            db.q(
                """SELECT min(run_at) AS t FROM {s}.jobs
                WHERE status IN ('pending', 'retry_wait') AND unmet = 0
                  AND type <> ALL(%s) AND coalesce(options->>'executor', '') <> ALL(%s)"""
            ),
            [full_t, full_e],
        )
        rec = await cur.fetchone()
        due = [rec["t"]] if rec and rec["t"] is not None else []
        due += [token_at(t) for t in rates if t in full_t and token_at(t) > now]
        next_due = min(due) if due else None
    return rows, next_due


async def sync_limits(db: Database, data: dict[str, Any] | None) -> dict[str, Any] | None:
    """Agree on the cluster's limits; returns the limits in force.

    The first process that opens the queue with limits stores them.
    A process with limits that differ from the stored ones is refused
    (`StoreError` showing both): every process must run with the same
    limits, or none (it then follows the stored ones). Change them with
    `set_limits`.
    """

    async def body(conn: psycopg.AsyncConnection[Any]) -> dict[str, Any] | None:
        if data:
            await conn.execute(
                db.q(
                    "INSERT INTO {s}.limits (id, data) VALUES (1, %s::jsonb) "
                    "ON CONFLICT (id) DO NOTHING"
                ),
                [json.dumps(data)],
            )
        cur = await conn.execute(db.q("SELECT data FROM {s}.limits WHERE id = 1"))
        rec = await cur.fetchone()
        stored: dict[str, Any] | None = rec["data"] if rec else None
        if data and stored != data:
            raise StoreError(
                f"{db.url}: this process's limits {json.dumps(data, sort_keys=True)} "
                f"differ from the limits the cluster runs with "
                f"{json.dumps(stored, sort_keys=True)}; every process must use the same "
                "limits (or none); change them for all with PostgresStore.set_limits"
            )
        return stored

    return await db.transaction(body)


async def set_limits(db: Database, data: dict[str, Any] | None) -> None:
    """Replace the cluster's limits (None or empty: no limits)."""

    async def body(conn: psycopg.AsyncConnection[Any]) -> None:
        if data:
            await conn.execute(
                db.q(
                    "INSERT INTO {s}.limits (id, data) VALUES (1, %s::jsonb) "
                    "ON CONFLICT (id) DO UPDATE SET data = excluded.data"
                ),
                [json.dumps(data)],
            )
        else:
            await conn.execute(db.q("DELETE FROM {s}.limits"))
        await db.notify_work(conn)

    await db.transaction(body)


async def renew(db: Database, lease_seconds: float, job_ids: Iterable[str], owner: str) -> set[str]:
    """Extend `owner`'s leases on `job_ids`; returns the ids whose lease was lost."""
    ids = list(job_ids)
    if not ids:
        return set()

    async def body(conn: psycopg.AsyncConnection[Any]) -> set[str]:
        cur = await conn.execute(
            db.q(
                "UPDATE {s}.jobs SET lease_expires = " + NOW + " + %s "
                "WHERE job_id = ANY(%s) AND lease_owner = %s AND status = 'running' "
                "RETURNING job_id"
            ),
            [lease_seconds, ids, owner],
        )
        kept = {r["job_id"] for r in await cur.fetchall()}
        return set(ids) - kept

    return await db.transaction(body)


async def reap_expired(db: Database) -> int:
    """Put jobs whose lease expired (their process died) back in the queue."""

    async def body(conn: psycopg.AsyncConnection[Any]) -> int:
        # The attempts that ended with their process go to the history too.
        cur = await conn.execute(
            db.q(
                """WITH reaped AS (
                    UPDATE {s}.jobs j SET status = 'pending', lease_owner = NULL,
                        lease_expires = NULL
                    FROM (SELECT job_id, lease_owner FROM {s}.jobs
                        WHERE status = 'running' AND lease_expires < """
                + NOW
                + """ FOR UPDATE SKIP LOCKED) old
                    WHERE j.job_id = old.job_id
                    RETURNING j.job_id, j.attempts, j.started_at, old.lease_owner
                ), history AS (
                    INSERT INTO {s}.attempts (job_id, number, status, error, started_at,
                        finished_at, worker)
                    SELECT job_id, attempts, 'lease_expired',
                        'lease expired: its worker stopped renewing it', started_at, """
                + NOW
                + """, lease_owner FROM reaped
                )
                SELECT job_id, lease_owner FROM reaped"""
            )
        )
        reaped = await cur.fetchall()
        if reaped:
            await db.notify_work(conn)
            logger.warning("leases expired; jobs queued again", count=len(reaped))
        return len(reaped)

    return await db.transaction(body)


async def release(db: Database, job_ids: Iterable[str], owner: str) -> int:
    """Give back claimed jobs that never started (their attempt is not counted)."""
    ids = list(job_ids)
    if not ids:
        return 0

    async def body(conn: psycopg.AsyncConnection[Any]) -> int:
        cur = await conn.execute(
            db.q(
                """UPDATE {s}.jobs SET status = 'pending', lease_owner = NULL,
                    lease_expires = NULL, attempts = attempts - 1
                WHERE job_id = ANY(%s) AND lease_owner = %s AND status = 'running'
                RETURNING job_id"""
            ),
            [ids, owner],
        )
        count = len(await cur.fetchall())
        if count:
            await db.notify_work(conn)
        return count

    return await db.transaction(body)


async def finish(
    db: Database, limits: LimitsSeen, outcomes: Sequence[Outcome], owner: str
) -> list[str]:
    """Record attempts that ended, in one transaction; returns the ids written.

    Only jobs `owner` still holds are written (a job whose lease expired
    and was taken by another process belongs to that one now). Completed
    jobs release their dependents; failed, timed-out and cancelled ones
    cancel every job downstream, all in the same transaction.
    """
    if not outcomes:
        return []
    params = [
        [o.job_id for o in outcomes],
        [o.status for o in outcomes],
        [o.result for o in outcomes],  # JSON text already (Outcome.result)
        [o.error for o in outcomes],
        [o.run_at for o in outcomes],
        [o.result_ttl for o in outcomes],
        owner,
        owner,
    ]
    if not any(o.status in TERMINAL[1:] for o in outcomes):
        # Nothing to cascade: one statement on the autocommit connection
        # writes the outcomes, the history, releases the dependents and
        # notifies (one round trip instead of five).
        async def single(conn: psycopg.AsyncConnection[Any]) -> list[str]:
            cur = await conn.execute(
                db.q(_FINISH_RELEASE),
                [*params, db.channel, WORK, limits.found, db.channel, FINISHED],
            )
            rec = await cur.fetchone()
            return list(rec["written"]) if rec is not None else []

        return await db.statement(single, lane=OUTCOMES)

    async def body(conn: psycopg.AsyncConnection[Any]) -> list[str]:
        # One statement: the outcomes, and each written one in the history.
        cur = await conn.execute(db.q(_FINISH + "SELECT job_id, status FROM done"), params)
        written = await cur.fetchall()
        completed = [r["job_id"] for r in written if r["status"] == "completed"]
        broken = [r["job_id"] for r in written if r["status"] in TERMINAL[1:]]
        wake = any(r["status"] == "retry_wait" for r in written)
        if completed:
            cur = await conn.execute(
                db.q(
                    """UPDATE {s}.jobs j SET unmet = j.unmet - d.n
                    FROM (SELECT job_id, count(*)::int AS n FROM {s}.dependencies
                          WHERE upstream = ANY(%s) GROUP BY job_id) d
                    WHERE j.job_id = d.job_id AND j.status = 'pending'
                    RETURNING j.unmet"""
                ),
                [completed],
            )
            wake = wake or any(r["unmet"] == 0 for r in await cur.fetchall())
        if broken:
            await cascade(db, conn, broken)
        # A finished job frees a limit's slot: wake the claimers it held back.
        if wake or (written and limits.found):
            await db.notify_work(conn)
        if written:
            await db.notify_finished(conn)
        return [r["job_id"] for r in written]

    return await db.transaction(body, lane=OUTCOMES)


# The outcomes (only the jobs the owner still holds), and each written one in
# the history; `done` holds what was written.
_FINISH = (
    """WITH done AS (
    UPDATE {s}.jobs j SET status = u.status, result = u.result::jsonb,
        last_error = coalesce(u.error, j.last_error),
        run_at = coalesce(u.run_at, j.run_at),
        finished_at = CASE WHEN u.status = 'retry_wait' THEN NULL ELSE """
    + NOW
    + """ END,
        result_expires = CASE WHEN u.status = 'completed' AND u.ttl IS NOT NULL
            THEN """
    + NOW
    + """ + u.ttl END,
        lease_owner = NULL, lease_expires = NULL, cancel_requested = false
    FROM unnest(%s::text[], %s::text[], %s::text[], %s::text[], %s::float8[],
        %s::float8[]) AS u(job_id, status, result, error, run_at, ttl)
    WHERE j.job_id = u.job_id AND j.lease_owner = %s AND j.status = 'running'
    RETURNING j.job_id, j.status, j.attempts, u.error, j.started_at, j.finished_at
), history AS (
    INSERT INTO {s}.attempts (job_id, number, status, error, started_at,
        finished_at, worker)
    SELECT job_id, attempts, status, error, started_at, coalesce(finished_at, """
    + NOW
    + """), %s FROM done
)
"""
)

# `_FINISH` for outcomes that cancel nothing, in one statement: completed
# jobs release their dependents (`released`), and the notifications are
# sent from the result row's subqueries (each is evaluated once). A
# released job that is due, a retry, or (with limits) a freed slot wakes
# the claimers; any written outcome wakes the waiters.
_FINISH_RELEASE = (
    _FINISH[: _FINISH.rindex(")")]
    + """), released AS (
    UPDATE {s}.jobs j SET unmet = j.unmet - d.n
    FROM (SELECT job_id, count(*)::int AS n FROM {s}.dependencies
          WHERE upstream IN (SELECT job_id FROM done WHERE status = 'completed')
          GROUP BY job_id) d
    WHERE j.job_id = d.job_id AND j.status = 'pending'
    RETURNING j.unmet
)
SELECT
    (SELECT pg_notify(%s, %s) WHERE EXISTS (SELECT 1 FROM released WHERE unmet = 0)
        OR EXISTS (SELECT 1 FROM done WHERE status = 'retry_wait')
        OR (%s AND EXISTS (SELECT 1 FROM done))) AS work,
    (SELECT pg_notify(%s, %s) WHERE EXISTS (SELECT 1 FROM done)) AS finished,
    ARRAY(SELECT job_id FROM done) AS written"""
)


async def cascade(db: Database, conn: psycopg.AsyncConnection[Any], upstreams: list[str]) -> None:
    """Cancel every unfinished job downstream of `upstreams` (they can never run)."""
    await conn.execute(
        db.q(
            """WITH RECURSIVE down(job_id, cause) AS (
                SELECT d.job_id, d.upstream FROM {s}.dependencies d
                WHERE d.upstream = ANY(%s)
              UNION
                SELECT d.job_id, d.upstream FROM {s}.dependencies d
                JOIN down ON d.upstream = down.job_id)
            UPDATE {s}.jobs j
            SET status = 'cancelled', finished_at = """
            + NOW
            + """, last_error = 'upstream ' || c.cause || ' '
                || CASE WHEN c.cause = ANY(%s) THEN u.status ELSE 'cancelled' END
            FROM (SELECT DISTINCT ON (job_id) job_id, cause FROM down
                  ORDER BY job_id, cause) c
            JOIN {s}.jobs u ON u.job_id = c.cause
            WHERE j.job_id = c.job_id AND j.status IN ('pending', 'retry_wait')"""
        ),
        [upstreams, upstreams],
    )


async def request_cancel(db: Database, job_id: str) -> bool:
    """Cancel a job from any process; False if unknown or already finished.

    A waiting job is cancelled here and now (and its dependents with it);
    a running one is flagged and its owner is notified, which cancels the
    attempt and then writes CANCELLED itself.
    """

    async def body(conn: psycopg.AsyncConnection[Any]) -> bool:
        cur = await conn.execute(
            db.q("SELECT status FROM {s}.jobs WHERE job_id = %s FOR UPDATE"), [job_id]
        )
        row = await cur.fetchone()
        if row is None or row["status"] in TERMINAL:
            return False
        if row["status"] == "running":
            await conn.execute(
                db.q("UPDATE {s}.jobs SET cancel_requested = true WHERE job_id = %s"),
                [job_id],
            )
            await db.notify_cancel(conn, job_id)
            return True
        await conn.execute(
            db.q(
                "UPDATE {s}.jobs SET status = 'cancelled', last_error = 'cancelled', "
                "finished_at = " + NOW + " WHERE job_id = %s"
            ),
            [job_id],
        )
        await cascade(db, conn, [job_id])
        await db.notify_finished(conn)
        return True

    return await db.transaction(body)


async def cancel_requests(db: Database, owner: str) -> list[str]:
    """Jobs `owner` runs that someone asked to cancel (the safety net for NOTIFY)."""

    async def body(conn: psycopg.AsyncConnection[Any]) -> list[str]:
        cur = await conn.execute(
            db.q(
                "SELECT job_id FROM {s}.jobs WHERE lease_owner = %s "
                "AND status = 'running' AND cancel_requested"
            ),
            [owner],
        )
        return [r["job_id"] for r in await cur.fetchall()]

    return await db.transaction(body)
