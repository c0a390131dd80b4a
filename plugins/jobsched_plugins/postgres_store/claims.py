"""Claims, leases and limits: taking due jobs in strategy order under the
cluster's limits, keeping and losing leases, writing outcomes (releasing or
cancelling dependents in the same transaction), and cancel requests.

Each call is one transaction (`Database.transaction`), except a claim while
no limits are stored, the queue is not paused and no ready job has a group:
one autocommit statement (`Database.statement`).

Jobs with a group (a tenant) are claimed in turns (`_TURNS`): the first
ready job of each group in strategy order, then the second of each, and so
on, so one group's backlog never holds the others back. The ready jobs are
split between two partial indexes, ``jobs_ready`` (no group) and
``jobs_ready_group`` (by group), so a store without groups claims as it
always did and a grouped claim never walks one group's backlog to find
another's jobs.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any

from jobsched.store import (
    BadRowError,
    Outcome,
    SharedJobRow,
    StoreError,
    check_max_lease_expiries,
    lease_expired_error,
    settle_dependent,
)

from .connection import CHANGED, FINISHED, NOW, TERMINAL, WORK, Database, logger
from .rows import checked_limits, job_row

if TYPE_CHECKING:
    import psycopg


#: The connection outcomes are written on (`Database.transaction`'s lane).
OUTCOMES = "outcomes"


class LimitsSeen:
    """Whether the last claim found cluster limits stored: finishing a job then
    frees a limit's slot, so `finish` wakes the claimers a limit held back.
    And whether it found ready jobs with a group: the next claim then goes
    straight to the claim in turns, without first trying the plain one."""

    def __init__(self) -> None:
        self.found = False
        self.grouped = False
        #: How many groups had ready jobs then (how many jobs a group offers).
        self.groups = 0


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

    async def plain(conn: psycopg.AsyncConnection[Any], n: int = n) -> list[dict[str, Any]]:
        cur = await conn.execute(db.q(_CLAIM), [n, owner, lease_seconds, db.channel, CHANGED])
        return await cur.fetchall()

    # One statement on the autocommit connection (one round trip for a busy
    # queue); it claims nothing while limits are stored, the queue is paused
    # or a ready job has a group, which is asked only when it got fewer than
    # `n`. While the last claim found groups, the turns are tried first.
    skipped = limits.grouped
    if skipped:

        async def turns(conn: psycopg.AsyncConnection[Any]) -> list[dict[str, Any]]:
            cur = await conn.execute(
                db.q(_TURNS_CLAIM_FIRST),
                _turns_params(db, lease_seconds, n, owner, limits.groups),
            )
            return await cur.fetchall()

        taken = await db.statement(turns)
    else:
        taken = await db.statement(plain)
    limits.found = False
    if len(taken) == n:
        return await _readable(db, limits, taken, owner), None

    async def flags(conn: psycopg.AsyncConnection[Any]) -> dict[str, Any]:
        cur = await conn.execute(db.q(_REST))
        rec: dict[str, Any] | None = await cur.fetchone()
        assert rec is not None  # one row, always
        return rec

    rec = await db.statement(flags)
    limits.grouped = rec["grouped"]
    limits.groups = len(rec["groups"] or ())
    more: list[dict[str, Any]] = []
    next_due = rec["t"]
    if rec["paused"]:
        next_due = None  # resuming wakes every claimer
    elif rec["limits"]:
        limits.found = True
        stored = checked_limits(rec["limits"])
        more, next_due = await db.transaction(
            lambda conn: _claim_limited(
                db, conn, lease_seconds, n - len(taken), owner, stored, groups=rec["groups"]
            )
        )
    elif rec["grouped"]:
        more, next_due = await _claim_turns(db, lease_seconds, n - len(taken), owner, rec["groups"])
    elif skipped:  # the groups are gone: the plain claim after all
        more = await db.statement(lambda conn: plain(conn, n - len(taken)))
        next_due = None if len(taken) + len(more) == n else (await db.statement(flags))["t"]
    return await _readable(db, limits, taken + more, owner), next_due


async def _claim_turns(
    db: Database, lease_seconds: float, n: int, owner: str, groups: list[str]
) -> tuple[list[dict[str, Any]], float | None]:
    """The claim in turns without limits: autocommit statements (`_TURNS_CLAIM`),
    one unless a pass comes back short (small groups ran out: the next pass
    takes more of the others), and the next due time if fewer than `n` were due."""
    taken: list[dict[str, Any]] = []
    while len(taken) < n:
        params = _turns_params(db, lease_seconds, n - len(taken), owner, len(groups))
        params["groups"] = groups

        async def take(conn: psycopg.AsyncConnection[Any], params: dict[str, Any] = params) -> Any:
            cur = await conn.execute(db.q(_TURNS_CLAIM), params)
            return await cur.fetchall()

        rows = await db.statement(take)
        taken += rows
        if not rows:
            break
    next_due = None
    if len(taken) < n:

        async def due(conn: psycopg.AsyncConnection[Any]) -> Any:
            cur = await conn.execute(db.q(_NEXT_DUE), {"full_t": [], "full_e": [], "full_g": []})
            return (await cur.fetchone())["t"]  # type: ignore[index]

        next_due = await db.statement(due)
    return taken, next_due


def _turns_params(
    db: Database, lease_seconds: float, n: int, owner: str, groups: int
) -> dict[str, Any]:
    """`_TURNS_CLAIM`'s parameters, but the groups, for `n` jobs from `groups` groups."""
    return {
        "per": _per_group(groups + 1, n),
        "n": n,
        "full_t": [],
        "full_e": [],
        "seen": [],
        "owner": owner,
        "lease": lease_seconds,
        "channel": db.channel,
        "changed": CHANGED,
    }


async def _readable(
    db: Database, limits: LimitsSeen, records: list[dict[str, Any]], owner: str
) -> list[SharedJobRow]:
    """The claimed records as rows, in strategy order.

    A record that cannot be read (changed by hand) is not returned: its job
    fails, its error naming the column. Running it would guess at what it
    was meant to do, and handing it back would claim it forever.
    """
    rows: list[SharedJobRow] = []
    unreadable: list[BadRowError] = []
    for rec in records:
        try:
            rows.append(job_row(rec))
        except BadRowError as exc:
            unreadable.append(exc.in_store(db.url))
    if unreadable:
        for bad in unreadable:
            logger.error("claimed job cannot be read; failed", job_id=bad.row_id, error=str(bad))
        failed = [
            Outcome(job_id=str(e.row_id), status="failed", error=f"BadRowError: {e}")
            for e in unreadable
        ]
        await finish(db, limits, failed, owner)
    rows.sort(key=lambda r: (r.sort_key, r.seq))
    return rows


_READY = "status IN ('pending', 'retry_wait') AND unmet = 0"
# The predicate of the ``jobs_ready_group`` index: ready jobs with a group.
# An EXISTS on it is one probe of an index that is empty while no ready
# job has a group (the plain claim's case).
_GROUPED_READY = "job_group IS NOT NULL AND " + _READY

# The groups with ready jobs: a loose scan of ``jobs_ready_group``, one
# probe per group however many jobs each has (a recursive CTE, then a NULL).
_GROUPS_CTE = (
    """groups AS (
    (SELECT job_group AS g FROM {s}.jobs WHERE """
    + _GROUPED_READY
    + """ ORDER BY job_group LIMIT 1)
    UNION ALL
    SELECT (SELECT job_group FROM {s}.jobs WHERE """
    + _GROUPED_READY
    + """ AND job_group > groups.g
        ORDER BY job_group LIMIT 1)
    FROM groups WHERE groups.g IS NOT NULL
)"""
)
_READY_GROUPS = "WITH RECURSIVE " + _GROUPS_CTE + " SELECT g FROM groups WHERE g IS NOT NULL"

# When the plain claim took fewer than asked: the limits, the pause, the
# groups with ready jobs (then claims take turns) and, only when there are
# no limits, pause or groups, the next due time. A CASE runs its subquery
# only when it is needed: a claim in turns or under limits computes its own
# next due time, and only when it took fewer than asked.
_REST = (
    """WITH flags AS (SELECT (SELECT data FROM {s}.limits WHERE id = 1) AS limits,
    EXISTS (SELECT 1 FROM {s}.paused) AS paused,
    EXISTS (SELECT 1 FROM {s}.jobs WHERE """
    + _GROUPED_READY
    + """) AS grouped)
SELECT limits, paused, grouped,
    CASE WHEN grouped AND NOT paused THEN ARRAY("""
    + _READY_GROUPS
    + """) END AS groups,
    CASE WHEN limits IS NULL AND NOT paused AND NOT grouped
        THEN (SELECT min(run_at) FROM {s}.jobs WHERE job_group IS NULL AND """
    + _READY
    + """) END AS t
FROM flags"""
)

# The plain claim: the first `n` due jobs in strategy order, locked without
# waiting for the ones other claimers hold. Live views hear of it from the
# statement itself (no extra round trip): the uncorrelated subquery in the
# filter runs once and sends one "changed" NOTIFY if anything was picked, so
# an idle worker's empty claim sends nothing. (Wrapping the UPDATE in a CTE
# to test its RETURNING rows instead copies every claimed row once more.)
_CLAIM = (
    "WITH now AS (SELECT "
    + NOW
    + """ AS t), picked AS (
    SELECT job_id FROM {s}.jobs
    WHERE status IN ('pending', 'retry_wait') AND unmet = 0
      AND run_at <= (SELECT t FROM now) AND job_group IS NULL
      AND NOT EXISTS (SELECT 1 FROM {s}.limits)
      AND NOT EXISTS (SELECT 1 FROM {s}.paused)
      AND NOT EXISTS (SELECT 1 FROM {s}.jobs WHERE """
    + _GROUPED_READY
    + """)
    ORDER BY sort_key, seq
    LIMIT %s FOR UPDATE SKIP LOCKED)
UPDATE {s}.jobs j SET status = 'running', attempts = j.attempts + 1,
    lease_owner = %s, lease_expires = (SELECT t FROM now) + %s,
    started_at = (SELECT t FROM now), progress = NULL
FROM picked WHERE j.job_id = picked.job_id
    AND (SELECT count(pg_notify(%s, %s)) FROM (SELECT FROM picked LIMIT 1) AS one) = 1
RETURNING j.*"""
)


# Ready jobs with no group, in strategy order, but those at a limit.
_UNGROUPED = (
    """SELECT job_id, type, options->>'executor' AS exe, job_group FROM {s}.jobs
WHERE job_group IS NULL AND """
    + _READY
    + """ AND run_at <= %(now)s
  AND type <> ALL(%(full_t)s) AND coalesce(options->>'executor', '') <> ALL(%(full_e)s)
  AND job_id <> ALL(%(seen)s)
ORDER BY sort_key, seq
LIMIT %(n)s FOR UPDATE SKIP LOCKED"""
)

# The claim in turns, when ready jobs have groups: each open group's first
# `per` due jobs in strategy order (and the jobs without a group as one more
# group), then the first `n` by (turn, strategy order), locked without
# waiting for the ones other claimers hold.
_TURNS = (
    """WITH turns AS (
    SELECT top.* FROM unnest(%(groups)s::text[]) AS open_groups(g) CROSS JOIN LATERAL (
        SELECT job_id, sort_key, seq, row_number() OVER (ORDER BY sort_key, seq) AS turn
        FROM (SELECT job_id, sort_key, seq FROM {s}.jobs
            WHERE job_group = open_groups.g AND """
    + _READY
    + """ AND run_at <= %(now)s
              AND type <> ALL(%(full_t)s)
              AND coalesce(options->>'executor', '') <> ALL(%(full_e)s)
              AND job_id <> ALL(%(seen)s)
            ORDER BY sort_key, seq LIMIT %(per)s) first) top
    UNION ALL
    SELECT job_id, sort_key, seq, row_number() OVER (ORDER BY sort_key, seq)
    FROM (SELECT job_id, sort_key, seq FROM {s}.jobs
        WHERE job_group IS NULL AND """
    + _READY
    + """ AND run_at <= %(now)s
          AND type <> ALL(%(full_t)s) AND coalesce(options->>'executor', '') <> ALL(%(full_e)s)
          AND job_id <> ALL(%(seen)s)
        ORDER BY sort_key, seq LIMIT %(n)s) first
)
SELECT j.job_id, j.type, j.options->>'executor' AS exe, j.job_group
FROM turns JOIN {s}.jobs j ON j.job_id = turns.job_id
WHERE j."""
    + _READY
    + """
ORDER BY turns.turn, turns.sort_key, turns.seq
LIMIT %(n)s FOR UPDATE OF j SKIP LOCKED"""
)

# The claim in turns as one statement (no limits to check in between): the
# turns' first `n`, locked, marked running with one "changed" NOTIFY (as in
# `_CLAIM`).
_TURNS_CLAIM = (
    "WITH now AS (SELECT "
    + NOW
    + " AS t), picked AS ("
    + _TURNS.replace("%(now)s", "(SELECT t FROM now)")
    + """)
UPDATE {s}.jobs j SET status = 'running', attempts = j.attempts + 1,
    lease_owner = %(owner)s, lease_expires = (SELECT t FROM now) + %(lease)s,
    started_at = (SELECT t FROM now), progress = NULL
FROM picked WHERE j.job_id = picked.job_id
    AND (SELECT count(pg_notify(%(channel)s, %(changed)s))
        FROM (SELECT FROM picked LIMIT 1) AS one) = 1
RETURNING j.*"""
)

# `_TURNS_CLAIM` that reads the groups itself and claims nothing while
# limits are stored or the queue is paused (as `_CLAIM`): the first try of a
# claimer whose last claim found groups, one statement. `per` comes from the
# number of groups that claim found.
_TURNS_CLAIM_FIRST = (
    _TURNS_CLAIM.replace("WITH now AS", "WITH RECURSIVE " + _GROUPS_CTE + ", now AS", 1)
    .replace(
        "unnest(%(groups)s::text[]) AS open_groups(g)",
        "(SELECT g FROM groups WHERE g IS NOT NULL) AS open_groups",
        1,
    )
    .replace(
        "\nORDER BY turns.turn",
        "\n  AND NOT EXISTS (SELECT 1 FROM {s}.limits) AND NOT EXISTS (SELECT 1 FROM {s}.paused)"
        "\nORDER BY turns.turn",
        1,
    )
)

# The next due time of the jobs no limit holds back (each ready index alone).
_NEXT_DUE = (
    """SELECT least(
    (SELECT min(run_at) FROM {s}.jobs WHERE job_group IS NULL AND """
    + _READY
    + """
        AND type <> ALL(%(full_t)s) AND coalesce(options->>'executor', '') <> ALL(%(full_e)s)),
    (SELECT min(run_at) FROM {s}.jobs WHERE """
    + _GROUPED_READY
    + """
        AND job_group <> ALL(%(full_g)s)
        AND type <> ALL(%(full_t)s) AND coalesce(options->>'executor', '') <> ALL(%(full_e)s))
) AS t"""
)


def _per_group(groups: int, n: int) -> int:
    """How many jobs each of `groups` offers a pass of a claim of `n` in
    turns: its fair share plus one, so a pass reads about n + groups index
    entries. A pass that comes back short (small groups) is followed by
    another, which takes more of the groups that have more."""
    return -(-n // groups) + 1


async def _claim_limited(
    db: Database,
    conn: psycopg.AsyncConnection[Any],
    lease_seconds: float,
    n: int,
    owner: str,
    limits: dict[str, Any],
    *,
    groups: list[str] | None,
) -> tuple[list[dict[str, Any]], float | None]:
    """The claim under cluster limits, or in turns, inside the claim transaction.

    With limits stored, one transaction-level advisory lock per schema
    serializes the claims (every claimer needs every limited key, so a lock
    per key would serialize them just the same, with a deadlock risk), so
    two processes can never both take the last slot or the last token.
    Slots are counted from the ``running`` rows (a claimed job holds its
    slot until its outcome is written or its expired lease is reaped);
    rate tokens come from the GCRA buckets in ``rate_buckets``. A job at
    a limit is skipped, not waited for: the jobs behind it are claimed.
    With `groups` (the groups with ready jobs; None when no ready job has
    one) the candidates come in turns (`_TURNS`), else in strategy order.
    """
    types: dict[str, int] = dict(limits.get("job_types") or {})
    executors: dict[str, int] = dict(limits.get("executors") or {})
    rates: dict[str, dict[str, float]] = dict(limits.get("rates") or {})
    group_limit: int | None = limits.get("group")
    await conn.execute("SELECT pg_advisory_xact_lock(hashtext(%s))", [db.channel + ":limits"])
    cur = await conn.execute("SELECT " + NOW + " AS t")
    now = float((await cur.fetchone())["t"])  # type: ignore[index]
    running_t = dict.fromkeys(types, 0)
    running_e = dict.fromkeys(executors, 0)
    running_g: dict[str, int] = {}
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
    if group_limit:
        cur = await conn.execute(
            db.q(
                """SELECT job_group, count(*)::int AS n FROM {s}.jobs
                WHERE job_group IS NOT NULL AND status = 'running' GROUP BY 1"""
            )
        )
        running_g = {r["job_group"]: r["n"] for r in await cur.fetchall()}
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

    def blocked() -> dict[str, list[str]]:
        full_t = {t for t, lim in types.items() if running_t[t] >= lim}
        full_t |= {t for t in rates if token_at(t) > now + 1e-9}
        return {
            "full_t": sorted(full_t),
            "full_e": [e for e, lim in executors.items() if running_e[e] >= lim],
            "full_g": [g for g, c in running_g.items() if group_limit and c >= group_limit],
        }

    grouped = groups is not None
    taken: list[str] = []
    seen: list[str] = []
    # Each pass excludes the keys at their limit; a row skipped in a pass
    # means a key filled up during it, so the passes end.
    while len(taken) < n:
        params: dict[str, Any] = {**blocked(), "now": now, "seen": seen, "n": n - len(taken)}
        if grouped:
            full_g = set(params["full_g"])
            params["groups"] = [g for g in groups or () if g not in full_g]
            params["per"] = _per_group(len(params["groups"]) + 1, n - len(taken))
        cur = await conn.execute(db.q(_TURNS if grouped else _UNGROUPED), params)
        candidates = await cur.fetchall()
        if not candidates:
            break
        for r in candidates:
            seen.append(r["job_id"])
            kind, exe, group = r["type"], r["exe"], r["job_group"]
            if kind in types and running_t[kind] >= types[kind]:
                continue
            if exe in executors and running_e[exe] >= executors[exe]:
                continue
            if group_limit and group is not None and running_g.get(group, 0) >= group_limit:
                continue
            if kind in rates:
                if token_at(kind) > now + 1e-9:
                    continue
                tats[kind] = max(tats.get(kind, now), now) + 1.0 / rates[kind]["per_second"]
            if kind in types:
                running_t[kind] += 1
            if exe in executors:
                running_e[exe] += 1
            if group_limit and group is not None:
                running_g[group] = running_g.get(group, 0) + 1
            taken.append(r["job_id"])
            if len(taken) == n:
                break
    rows: list[dict[str, Any]] = []
    if taken:
        cur = await conn.execute(
            db.q(
                # Something is claimed: one "changed" NOTIFY, from a
                # subquery that runs once (as in `_CLAIM`).
                """UPDATE {s}.jobs SET status = 'running', attempts = attempts + 1,
                    lease_owner = %s, lease_expires = %s, started_at = %s, progress = NULL
                WHERE job_id = ANY(%s) AND (SELECT count(pg_notify(%s, %s))) = 1
                RETURNING *"""
            ),
            [owner, now + lease_seconds, now, taken, db.channel, CHANGED],
        )
        rows = await cur.fetchall()
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
        full = blocked()
        cur = await conn.execute(db.q(_NEXT_DUE), full)
        rec = await cur.fetchone()
        due = [rec["t"]] if rec and rec["t"] is not None else []
        due += [token_at(t) for t in rates if t in full["full_t"] and token_at(t) > now]
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


async def reap_expired(db: Database, max_expiries: int) -> int:
    """Put jobs whose lease expired (their process died) back in the queue; a
    job whose lease expired `max_expiries` times fails instead, and settles
    its dependents."""
    check_max_lease_expiries(max_expiries)

    async def body(conn: psycopg.AsyncConnection[Any]) -> int:
        # The attempts that ended with their process go to the history too.
        cur = await conn.execute(
            db.q(
                """WITH reaped AS (
                    UPDATE {s}.jobs j SET lease_owner = NULL, lease_expires = NULL,
                        lease_expiries = j.lease_expiries + 1,
                        status = CASE WHEN j.lease_expiries + 1 >= %(bound)s
                            THEN 'failed' ELSE 'pending' END,
                        finished_at = CASE WHEN j.lease_expiries + 1 >= %(bound)s
                            THEN """
                + NOW
                + """ END,
                        last_error = CASE WHEN j.lease_expiries + 1 >= %(bound)s
                            THEN format(%(failed)s, j.lease_expiries + 1)
                            ELSE j.last_error END
                    FROM (SELECT job_id, lease_owner FROM {s}.jobs
                        WHERE status = 'running' AND lease_expires < """
                + NOW
                + """ FOR UPDATE SKIP LOCKED) old
                    WHERE j.job_id = old.job_id
                    RETURNING j.job_id, j.attempts, j.started_at, j.status, j.last_error,
                        old.lease_owner
                ), history AS (
                    INSERT INTO {s}.attempts (job_id, number, status, error, started_at,
                        finished_at, worker)
                    SELECT job_id, attempts, 'lease_expired',
                        CASE WHEN status = 'failed' THEN last_error
                            ELSE 'lease expired: its worker stopped renewing it' END,
                        started_at, """
                + NOW
                + """, lease_owner FROM reaped
                )
                SELECT job_id, status FROM reaped"""
            ),
            # PostgreSQL's format() puts the count where the text has %s.
            {"bound": max_expiries, "failed": lease_expired_error("%s", max_expiries)},
        )
        reaped = await cur.fetchall()
        failed = [(r["job_id"], "failed") for r in reaped if r["status"] == "failed"]
        if failed:
            await settle(db, conn, failed)
            await db.notify_finished(conn)
            logger.warning(
                "leases expired too often; jobs failed",
                job_ids=[job_id for job_id, _ in failed],
                max_lease_expiries=max_expiries,
            )
        if len(reaped) > len(failed):
            logger.warning("leases expired; jobs queued again", count=len(reaped) - len(failed))
        if reaped:
            await db.notify_work(conn)
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
    and was taken by another process belongs to that one now). Terminal
    jobs settle their dependents by their trigger rules (`settle`), in the
    same transaction.
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
        [o.attempt or o.status for o in outcomes],
        [o.traceback for o in outcomes],
        owner,
        owner,
    ]
    ended_ids = [o.job_id for o in outcomes if o.status in TERMINAL]

    async def body(conn: psycopg.AsyncConnection[Any]) -> list[str]:
        # Two statements in one round trip: the outcomes, the history and the
        # notifications; then the dependents waiting for the jobs that ended.
        # The second must be a statement of its own: a submit holding an
        # upstream FOR SHARE makes the first wait, and only a later snapshot
        # sees the dependent that submit inserted.
        async with conn.pipeline():
            cur = await conn.execute(
                db.q(_FINISH_NOTIFY),
                [*params, db.channel, WORK, limits.found, db.channel, FINISHED],
            )
            waiting = await conn.execute(db.q(_WAITING), [ended_ids]) if ended_ids else None
        written = await cur.fetchall()
        ended = [(r["job_id"], r["status"]) for r in written if r["status"] in TERMINAL]
        if ended and waiting is not None:
            first = [r for r in await waiting.fetchall() if r["upstream"] in dict(ended)]
            if await settle(db, conn, ended, first):
                await db.notify_work(conn)
        return [r["job_id"] for r in written]

    return await db.transaction(body, lane=OUTCOMES)


# The outcomes (only the jobs the owner still holds), and each written one in
# the history; `done` holds what was written.
_FINISH = (
    """WITH done AS (
    UPDATE {s}.jobs j SET status = u.status, result = u.result::jsonb,
        last_error = CASE WHEN u.status = 'completed' THEN NULL
            ELSE coalesce(u.error, j.last_error) END,
        last_traceback = u.traceback, run_at = coalesce(u.run_at, j.run_at),
        finished_at = CASE WHEN u.status = 'retry_wait' THEN NULL ELSE """
    + NOW
    + """ END,
        result_expires = CASE WHEN u.status = 'completed' AND u.ttl IS NOT NULL
            THEN """
    + NOW
    + """ + u.ttl END,
        lease_owner = NULL, lease_expires = NULL, cancel_requested = false
    FROM unnest(%s::text[], %s::text[], %s::text[], %s::text[], %s::float8[],
        %s::float8[], %s::text[], %s::text[])
        AS u(job_id, status, result, error, run_at, ttl, attempt, traceback)
    WHERE j.job_id = u.job_id AND j.lease_owner = %s AND j.status = 'running'
    RETURNING j.job_id, j.status, j.attempts, u.error, u.attempt, j.started_at, j.finished_at,
        u.traceback
), history AS (
    INSERT INTO {s}.attempts (job_id, number, status, error, started_at,
        finished_at, worker, traceback)
    SELECT job_id, attempts, attempt, error, started_at, coalesce(finished_at, """
    + NOW
    + """), %s, traceback FROM done
)
"""
)

# `_FINISH` with the notifications sent from the result rows' subqueries
# (each is evaluated once): a retry or (with limits) a freed slot wakes the
# claimers; any written outcome wakes the waiters. A released dependent wakes
# the claimers once `settle` has released it.
_FINISH_NOTIFY = (
    _FINISH
    + """SELECT done.job_id, done.status,
    (SELECT pg_notify(%s, %s) WHERE EXISTS (SELECT 1 FROM done WHERE status = 'retry_wait')
        OR (%s AND EXISTS (SELECT 1 FROM done))) AS work,
    (SELECT pg_notify(%s, %s) WHERE EXISTS (SELECT 1 FROM done)) AS finished
FROM done"""
)


# The dependents still waiting for one of the jobs that ended, locked (in
# id order: two finishers lock shared dependents in one order) so that two
# processes finishing two upstreams of one dependent settle it one after the
# other, the second seeing the first's ``unmet``. A dependent at ``unmet = 0``
# was released (or has no dependencies left) and is never settled again.
_WAITING = """
SELECT j.job_id, j.trigger_rule, j.unmet, d.upstream
FROM {s}.dependencies d JOIN {s}.jobs j ON j.job_id = d.job_id
WHERE d.upstream = ANY(%s) AND j.status = 'pending' AND j.unmet > 0
ORDER BY j.job_id
FOR UPDATE OF j
"""

_SETTLED = (
    """
UPDATE {s}.jobs j SET unmet = u.unmet,
    status = CASE WHEN u.error IS NULL THEN j.status ELSE 'cancelled' END,
    last_error = coalesce(u.error, j.last_error),
    finished_at = CASE WHEN u.error IS NULL THEN j.finished_at ELSE """
    + NOW
    + """ END
FROM unnest(%s::text[], %s::int[], %s::text[]) AS u(job_id, unmet, error)
WHERE j.job_id = u.job_id"""
)


async def settle(
    db: Database,
    conn: psycopg.AsyncConnection[Any],
    ended: list[tuple[str, str]],
    first: list[dict[str, Any]] | None = None,
) -> bool:
    """Settle the waiting dependents of jobs that just ended, by their trigger
    rules (`settle_dependent`); a dependent cancelled so settles its own
    dependents as ``cancelled``, and so on downstream. True if one was
    released. One round trip when no job waits for the ones that ended;
    none when the caller read them already (`first`, from `_WAITING`).
    """
    released = False
    while ended:
        if first is not None:
            rows, first = first, None
        else:
            cur = await conn.execute(db.q(_WAITING), [[u for u, _ in ended]])
            rows = await cur.fetchall()
        if not rows:
            break
        order = {u: i for i, (u, _) in enumerate(ended)}
        status_of = dict(ended)
        waiting: dict[str, tuple[str, int, list[str]]] = {}
        for r in rows:
            waiting.setdefault(r["job_id"], (r["trigger_rule"], r["unmet"], []))[2].append(
                r["upstream"]
            )
        ended = []
        ids: list[str] = []
        unmet: list[int] = []
        errors: list[str | None] = []
        for job_id, (rule, count, ups) in waiting.items():
            ups.sort(key=order.__getitem__)
            run, left, reason = settle_dependent(rule, count, [(u, status_of[u]) for u in ups])
            ids.append(job_id)
            unmet.append(left)
            errors.append(reason if run is False else None)
            if run is False:
                ended.append((job_id, "cancelled"))
            released = released or run is True
        await conn.execute(db.q(_SETTLED), [ids, unmet, errors])
    return released


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
        if await settle(db, conn, [(job_id, "cancelled")]):
            await db.notify_work(conn)
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
