"""Claims, leases and limits (postgres_store/claims.py in SQLite): taking due
jobs in strategy order under the cluster's limits, keeping and losing leases,
writing outcomes (releasing or cancelling dependents in the same
transaction), and cancel requests.

Every function runs in the store's thread inside the caller's ``BEGIN
IMMEDIATE`` transaction: it holds the file's write lock, so no other process
claims, finishes or counts a limit's slots until it commits. That is what
PostgreSQL's ``FOR UPDATE SKIP LOCKED`` and advisory lock do there.

Jobs with a group (a tenant) are claimed in turns, as in PostgreSQL: the
first ready job of each group in strategy order, then the second of each,
and so on. The ready jobs are split between two partial indexes (no group;
by queue and group), both led by the queue, so a file without groups claims
as it always did.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Mapping, Sequence
from typing import Any, cast

from jobsched.store import (
    BadRowError,
    Outcome,
    SharedJobRow,
    StoreError,
    lease_expired_error,
    settle_dependent,
)

from .connection import TERMINAL, logger, now
from .queries import JOB_COLUMNS, add_counts, job_row, paused_queues, queue_paused, stored_limits

_DUE = "status IN ('pending', 'retry_wait') AND unmet = 0"
# Each of the two ready indexes' predicates (`migrations`, version 13).
_PLAIN_DUE = "job_group IS NULL AND " + _DUE
_GROUPED_DUE = "job_group IS NOT NULL AND " + _DUE


def _in(values: Sequence[Any]) -> str:
    return ",".join("?" * len(values))


def _take(
    conn: sqlite3.Connection,
    job_ids: list[Any],
    owner: str,
    lease_seconds: float,
    t: float,
    column: str = "job_id",
) -> list[SharedJobRow]:
    """Mark `job_ids` running under `owner`'s lease; their rows, in strategy order.

    `column` says what `job_ids` are: ``job_id``, or ``seq`` (the rowid: one
    B-tree fewer to search per job).

    A row that cannot be read (changed by hand) is not returned: its job
    fails here, in the claim's transaction, its error naming the column
    (`fail_unreadable`), and the others are claimed as usual.
    """
    if not job_ids:
        return []
    marks = _in(job_ids)
    # The status counters' trigger leaves pending to running to the claim
    # (migrations, version 16): counted here once.
    pending = conn.execute(
        f"SELECT count(*) FROM jobsched_shared_jobs WHERE {column} IN ({marks}) "
        "AND status = 'pending'",
        job_ids,
    ).fetchone()[0]
    add_counts(conn, {"pending": -pending, "running": pending})
    conn.execute(
        f"""UPDATE jobsched_shared_jobs SET status = 'running', attempts = attempts + 1,
            lease_owner = ?, lease_expires = ?, started_at = ?, progress = NULL
        WHERE {column} IN ({marks})""",
        [owner, t + lease_seconds, t, *job_ids],
    )
    # Read back in strategy order: cheaper than the UPDATE's RETURNING (which
    # keeps every row it returns in a table of its own first) and a sort here.
    cur = conn.execute(
        f"SELECT {JOB_COLUMNS} FROM jobsched_shared_jobs WHERE {column} IN ({marks}) "
        "ORDER BY sort_key, seq",
        job_ids,
    )
    rows: list[SharedJobRow] = []
    unreadable: list[BadRowError] = []
    for r in cur:
        try:
            rows.append(job_row(r))
        except BadRowError as exc:
            unreadable.append(exc)
    if unreadable:
        fail_unreadable(conn, unreadable, owner)
    return rows


def fail_unreadable(conn: sqlite3.Connection, errors: Sequence[BadRowError], owner: str) -> None:
    """Fail claimed jobs whose rows cannot be read: running one would guess
    at what it was meant to do, and handing it back would claim it forever."""
    for exc in errors:
        logger.error("claimed job cannot be read; failed", job_id=exc.row_id, error=str(exc))
    # Each by its id as stored: an id tampered into a BLOB is matched as it is.
    finish(
        conn,
        [
            Outcome(job_id=cast(str, e.row_id), status="failed", error=f"BadRowError: {e}")
            for e in errors
        ],
        owner,
    )


def claimable(types: Sequence[str] | None, refuser: str) -> tuple[str, list[Any]]:
    """The WHERE terms (and their parameters) of what a worker can take: jobs
    of its `types` (None: any) that `refuser` did not refuse (`refuse`)."""
    terms = (
        " AND (refused_by IS NULL OR NOT EXISTS "
        "(SELECT 1 FROM json_each(refused_by) WHERE value = ?))"
    )
    if types is None:
        return terms, [refuser]
    return f"{terms} AND type IN ({_in(types)})", [refuser, *types]


def claim(
    conn: sqlite3.Connection,
    lease_seconds: float,
    n: int,
    owner: str,
    queues: Mapping[str, int] | None = None,
    types: Sequence[str] | None = None,
    refuser: str | None = None,
) -> tuple[list[SharedJobRow], float | None, bool]:
    """Take up to `n` due jobs in strategy order with a lease for `owner`,
    from `queues` (each with the most jobs to take from it; None: every queue).

    Only jobs of `types` (None: any) that `refuser` (default: `owner`) did
    not refuse are taken (`claimable`). Returns the rows (now ``running``,
    attempts counted), the wall time the next waiting job this claim could
    take becomes due when fewer than `n` were (None if none), and whether
    cluster limits are stored (finishing a job then frees a slot).
    """
    t = now()
    if queue_paused(conn):
        return [], None, False
    filters = claimable(types, owner if refuser is None else refuser)
    terms, term_params = filters
    held = sorted(paused_queues(conn))
    rooms = None
    if queues is not None:
        rooms = {q: min(n, room) for q, room in queues.items() if room > 0 and q not in held}
        if not rooms:
            return [], None, False
    names = list(rooms) if rooms is not None else None
    limits = stored_limits(conn)
    # One probe of an index that is empty while no ready job has a group.
    grouped = conn.execute(
        f"SELECT EXISTS (SELECT 1 FROM jobsched_shared_jobs WHERE {_GROUPED_DUE} "
        + _queue_filter(names, held)
        + ")",
        [*(names or ()), *held],
    ).fetchone()[0]
    if limits or grouped:
        rows, next_due = _claim_limited(
            conn, lease_seconds, n, owner, limits or {}, t, rooms, held, filters, bool(grouped)
        )
        return rows, next_due, bool(limits)
    # Each queue's jobs walked in strategy order on the ready index (which
    # leads with the queue), the best `n` of them taken: one statement.
    if rooms is None:
        sql = (
            f"SELECT seq FROM jobsched_shared_jobs WHERE {_PLAIN_DUE} AND run_at <= ? "
            f"AND queue NOT IN ({_in(held)}){terms} ORDER BY sort_key, seq LIMIT ?"
        )
        params: list[Any] = [t, *held, *term_params, n]
    else:
        walks = " UNION ALL ".join(
            f"SELECT * FROM (SELECT sort_key, seq FROM jobsched_shared_jobs "
            f"WHERE queue = ? AND {_PLAIN_DUE} AND run_at <= ?{terms} "
            "ORDER BY sort_key, seq LIMIT ?)"
            for _ in rooms
        )
        sql = f"SELECT seq FROM ({walks}) ORDER BY sort_key, seq LIMIT ?"
        params = [v for q, room in rooms.items() for v in (q, t, *term_params, room)] + [n]
    picked = [r[0] for r in conn.execute(sql, params)]
    rows = _take(conn, picked, owner, lease_seconds, t, "seq")
    next_due = None
    if len(rows) < n:
        next_due = conn.execute(
            f"SELECT min(run_at) FROM jobsched_shared_jobs WHERE {_PLAIN_DUE} "
            + _queue_filter(names, held)
            + terms,
            [*(names or ()), *held, *term_params],
        ).fetchone()[0]
    return rows, next_due, False


def _queue_filter(names: list[str] | None, held: Sequence[str]) -> str:
    """The condition on ``queue``: one of `names` (None: any) and not `held`."""
    clause = f"AND queue NOT IN ({_in(held)})"
    if names is not None:
        clause = f"AND queue IN ({_in(names)}) " + clause
    return clause


def _claim_limited(
    conn: sqlite3.Connection,
    lease_seconds: float,
    n: int,
    owner: str,
    limits: dict[str, Any],
    t: float,
    rooms: dict[str, int] | None,
    held: Sequence[str],
    filters: tuple[str, list[Any]],
    grouped: bool,
) -> tuple[list[SharedJobRow], float | None]:
    """The claim under cluster limits, or in turns (the PostgreSQL store's
    rules, see there), from the queues of `rooms` (each with the most jobs
    to take; None: every queue) except the `held` (paused) ones, of the
    jobs that pass `filters` (`claimable`'s terms and parameters).

    Slots are counted from the ``running`` rows (a claimed job holds its
    slot until its outcome is written or its expired lease is reaped);
    rate tokens come from the GCRA buckets in ``rate_buckets``. A job at a
    limit is skipped, not waited for: the jobs behind it are claimed. When
    `grouped` (a ready job of these queues has a group) the jobs come in
    turns (`_turns`), else in strategy order.
    """
    types: dict[str, int] = dict(limits.get("job_types") or {})
    executors: dict[str, int] = dict(limits.get("executors") or {})
    rates: dict[str, dict[str, float]] = dict(limits.get("rates") or {})
    queue_caps: dict[str, int] = dict(limits.get("queues") or {})
    group_limit: int | None = limits.get("group")
    running_t = dict.fromkeys(types, 0)
    running_e = dict.fromkeys(executors, 0)
    running_q = dict.fromkeys(queue_caps, 0)
    running_g: dict[str, int] = {}
    if group_limit:
        running_g = dict(
            conn.execute(
                "SELECT job_group, count(*) FROM jobsched_shared_jobs "
                "WHERE status = 'running' AND job_group IS NOT NULL GROUP BY 1"
            ).fetchall()
        )
    if types or executors or queue_caps:
        cur = conn.execute(
            "SELECT type, json_extract(options, '$.executor'), queue, count(*) "
            "FROM jobsched_shared_jobs WHERE status = 'running' GROUP BY 1, 2, 3"
        )
        for kind, exe, queue, count in cur:
            if kind in running_t:
                running_t[kind] += count
            if exe in running_e:
                running_e[exe] += count
            if queue in running_q:
                running_q[queue] += count
    tats: dict[str, float] = {}
    if rates:
        cur = conn.execute(
            f"SELECT job_type, tat FROM jobsched_shared_rate_buckets "
            f"WHERE job_type IN ({_in(list(rates))})",
            list(rates),
        )
        tats = dict(cur.fetchall())

    def token_at(kind: str) -> float:
        # GCRA: the next token is free at tat - tolerance (tat >= now).
        rate = rates[kind]
        interval = 1.0 / rate["per_second"]
        return max(tats.get(kind, t), t) - (rate["burst"] - 1) * interval

    def blocked() -> tuple[list[str], list[str]]:
        full_t = {k for k, lim in types.items() if running_t[k] >= lim}
        full_t |= {k for k in rates if token_at(k) > t + 1e-9}
        full_e = [e for e, lim in executors.items() if running_e[e] >= lim]
        return sorted(full_t), full_e

    terms, term_params = filters
    names = None if rooms is None else list(rooms)

    def due_query(
        full_t: list[str], full_e: list[str], *, select: str, ready: str = _PLAIN_DUE
    ) -> tuple[str, list[Any]]:
        full_q = [q for q, lim in queue_caps.items() if running_q[q] >= lim]
        return (
            f"SELECT {select} FROM jobsched_shared_jobs WHERE {ready} "
            f"AND type NOT IN ({_in(full_t)}) "
            f"AND coalesce(json_extract(options, '$.executor'), '') NOT IN ({_in(full_e)}) "
            f"AND queue NOT IN ({_in(full_q)}) " + _queue_filter(names, held) + terms,
            [*full_t, *full_e, *full_q, *(names or ()), *held, *term_params],
        )

    def full_groups() -> set[str]:
        return {g for g, c in running_g.items() if group_limit and c >= group_limit}

    taken: list[str] = []
    full_t, full_e = blocked()
    walk: Any
    if grouped:
        sql, params = due_query(full_t, full_e, select=_TURN_COLUMNS, ready=_GROUPED_DUE)
        plain = due_query(full_t, full_e, select=_TURN_COLUMNS)
        walk = _turns(conn, (sql, params), plain, t, n, full_groups(), names, held)
    else:
        sql, params = due_query(full_t, full_e, select=_TURN_COLUMNS)
        # One walk in strategy order: the write lock is ours, so nothing moves under it.
        walk = conn.execute(sql + " AND run_at <= ? ORDER BY sort_key, seq", [*params, t])
    for job_id, kind, exe, queue, group, *_ in walk:
        if kind in types and running_t[kind] >= types[kind]:
            continue
        if exe in executors and running_e[exe] >= executors[exe]:
            continue
        if queue in queue_caps and running_q[queue] >= queue_caps[queue]:
            continue
        if rooms is not None and rooms[queue] <= 0:
            continue
        if group_limit and group is not None and running_g.get(group, 0) >= group_limit:
            continue
        if kind in rates:
            if token_at(kind) > t + 1e-9:
                continue
            tats[kind] = max(tats.get(kind, t), t) + 1.0 / rates[kind]["per_second"]
        if kind in types:
            running_t[kind] += 1
        if exe in executors:
            running_e[exe] += 1
        if queue in queue_caps:
            running_q[queue] += 1
        if rooms is not None:
            rooms[queue] -= 1
        if group_limit and group is not None:
            running_g[group] = running_g.get(group, 0) + 1
        taken.append(job_id)
        if len(taken) == n:
            break
    if not grouped:
        walk.close()
    rows = _take(conn, taken, owner, lease_seconds, t)
    if tats:
        conn.executemany(
            "INSERT INTO jobsched_shared_rate_buckets (job_type, tat) VALUES (?, ?) "
            "ON CONFLICT (job_type) DO UPDATE SET tat = excluded.tat",
            list(tats.items()),
        )
    next_due = None
    if len(rows) < n:
        # Jobs held by a concurrency limit wake on a finish; jobs held by a
        # rate wake when their next token is due.
        full_t, full_e = blocked()
        sql, params = due_query(full_t, full_e, select="min(run_at)")
        due = [conn.execute(sql, params).fetchone()[0]]
        full_g = sorted(full_groups())
        sql, params = due_query(full_t, full_e, select="min(run_at)", ready=_GROUPED_DUE)
        sql += f" AND job_group NOT IN ({_in(full_g)})"
        due.append(conn.execute(sql, [*params, *full_g]).fetchone()[0])
        due = [d for d in due if d is not None]
        due += [token_at(k) for k in rates if k in full_t and token_at(k) > t]
        next_due = min(due) if due else None
    return rows, next_due


# What a claim under limits or in turns reads of each candidate.
_TURN_COLUMNS = "job_id, type, json_extract(options, '$.executor'), queue, job_group, sort_key, seq"

# The (queue, group) pairs with ready jobs, as a recursive CTE: a loose scan
# of the group index (which leads with the queue), a few probes per pair
# however many jobs each has: the queue's next group, else the next queue's
# first. (A row value ``(queue, job_group) > (?, ?)`` would seek on the
# queue alone, reading every earlier group's jobs of that queue again.)
_NEXT_GROUP = (
    f"(SELECT job_group FROM jobsched_shared_jobs WHERE {_GROUPED_DUE} "
    "AND queue = pairs.queue AND job_group > pairs.name ORDER BY job_group LIMIT 1)"
)
_NEXT_QUEUE = (
    f"(SELECT queue FROM jobsched_shared_jobs WHERE {_GROUPED_DUE} "
    "AND queue > pairs.queue ORDER BY queue LIMIT 1)"
)
_PAIRS_CTE = f"""WITH RECURSIVE pairs(queue, name) AS (
    SELECT * FROM (SELECT queue, job_group FROM jobsched_shared_jobs WHERE {_GROUPED_DUE}
        ORDER BY queue, job_group LIMIT 1)
    UNION ALL
    SELECT CASE WHEN {_NEXT_GROUP} IS NOT NULL THEN pairs.queue ELSE {_NEXT_QUEUE} END,
        coalesce({_NEXT_GROUP}, (SELECT job_group FROM jobsched_shared_jobs
            WHERE {_GROUPED_DUE} AND queue = {_NEXT_QUEUE} ORDER BY job_group LIMIT 1))
    FROM pairs WHERE pairs.name IS NOT NULL
)"""


def _turns(
    conn: sqlite3.Connection,
    grouped_query: tuple[str, list[Any]],
    plain_query: tuple[str, list[Any]],
    t: float,
    n: int,
    full: set[str],
    names: list[str] | None,
    held: Sequence[str],
) -> list[tuple[Any, ...]]:
    """The due jobs the queries select in turns: each group's first job in
    strategy order, then each one's second, ... (the jobs without a group
    take their turns as one more group); groups in `full` (at the group
    limit) left out. `grouped_query` selects the ready jobs with a group,
    `plain_query` those without (both `_TURN_COLUMNS`, filtered by the
    claim's queues and terms); `names` and `held` are the claim's queues
    (None: any) and the paused ones.

    Three statements, however many groups: the (queue, group) pairs with
    ready jobs in the claim's queues (`_PAIRS_CTE`), every open pair's
    first jobs (a correlated subquery per pair, on the group index) and the
    first jobs without a group. Each group offers its fair share of `n`
    plus one; if that makes fewer than `n`, the groups that had more offer
    up to `n`.
    """
    sql, params = grouped_query
    full_list = sorted(full)
    pairs = [
        (queue, name)
        for queue, name in conn.execute(
            f"{_PAIRS_CTE} SELECT queue, name FROM pairs WHERE name IS NOT NULL "
            f"AND name NOT IN ({_in(full_list)}) " + _queue_filter(names, held),
            [*full_list, *(names or ()), *held],
        )
    ]
    order = " AND run_at <= ? ORDER BY sort_key, seq LIMIT ?"
    per = -(-n // (len({name for _, name in pairs}) + 1)) + 1
    # The ids of one pair's first jobs, read where its rows are.
    first = sql.replace(f"SELECT {_TURN_COLUMNS} FROM", "SELECT job_id FROM", 1).replace(
        _GROUPED_DUE, _GROUPED_DUE + " AND queue = g.queue AND job_group = g.name", 1
    )
    columns = (
        "j.job_id, j.type, json_extract(j.options, '$.executor'), j.queue, j.job_group, "
        "j.sort_key, j.seq"
    )

    def offers(limit: int, only: list[tuple[str, str]]) -> dict[str | None, list[Any]]:
        if not only:
            return {}
        rows = conn.execute(
            f"SELECT {columns} FROM (SELECT json_extract(value, '$[0]') AS queue, "
            "json_extract(value, '$[1]') AS name FROM json_each(?)) g "
            f"JOIN jobsched_shared_jobs j ON j.job_id IN ({first}{order})",
            [json.dumps(only), *params, t, limit],
        ).fetchall()
        offered: dict[str | None, list[Any]] = {}
        for row in rows:
            offered.setdefault(row[4], []).append(row)
        return offered

    offered = offers(per, pairs)
    plain_sql, plain_params = plain_query
    offered[None] = conn.execute(plain_sql + order, [*plain_params, t, per]).fetchall()
    if sum(len(rows) for rows in offered.values()) < n:
        more = [(q, g) for q, g in pairs if len(offered.get(g, ())) >= per]
        offered.update(offers(n, more))
        if len(offered[None]) == per:
            offered[None] = conn.execute(plain_sql + order, [*plain_params, t, n]).fetchall()
    candidates: list[tuple[int, Any, int, tuple[Any, ...]]] = []
    for rows in offered.values():
        rows.sort(key=lambda r: (r[5], r[6]))
        for turn, row in enumerate(rows):
            candidates.append((turn, row[5], row[6], row))
    candidates.sort(key=lambda c: c[:3])
    return [c[3] for c in candidates]


def sync_limits(
    conn: sqlite3.Connection, url: str, data: dict[str, Any] | None
) -> dict[str, Any] | None:
    """Agree on the cluster's limits (see `SQLiteStore.sync_limits`)."""
    if data:
        conn.execute(
            "INSERT INTO jobsched_shared_limits (id, data) VALUES (1, ?) "
            "ON CONFLICT (id) DO NOTHING",
            (json.dumps(data),),
        )
    stored = stored_limits(conn)
    if data and stored != data:
        raise StoreError(
            f"{url}: this process's limits {json.dumps(data, sort_keys=True)} "
            f"differ from the limits the cluster runs with "
            f"{json.dumps(stored, sort_keys=True)}; every process must use the same "
            "limits (or none); change them for all with SQLiteStore.set_limits"
        )
    return stored


def set_limits(conn: sqlite3.Connection, data: dict[str, Any] | None) -> None:
    if data:
        conn.execute(
            "INSERT INTO jobsched_shared_limits (id, data) VALUES (1, ?) "
            "ON CONFLICT (id) DO UPDATE SET data = excluded.data",
            (json.dumps(data),),
        )
    else:
        conn.execute("DELETE FROM jobsched_shared_limits")


def renew(
    conn: sqlite3.Connection, lease_seconds: float, job_ids: list[str], owner: str
) -> set[str]:
    """Extend `owner`'s leases on `job_ids`; returns the ids whose lease was lost."""
    kept: set[str] = set()
    for i in range(0, len(job_ids), 500):
        chunk = job_ids[i : i + 500]
        cur = conn.execute(
            f"UPDATE jobsched_shared_jobs SET lease_expires = ? WHERE job_id IN ({_in(chunk)}) "
            "AND lease_owner = ? AND status = 'running' RETURNING job_id",
            [now() + lease_seconds, *chunk, owner],
        )
        kept |= {r[0] for r in cur}
    return set(job_ids) - kept


def reap_expired(conn: sqlite3.Connection, max_expiries: int) -> tuple[int, int]:
    """Put jobs whose lease expired (their process died) back in the queue; the
    attempts that ended so go to the history. A job whose lease expired
    `max_expiries` times fails instead, and settles its dependents.
    Returns ``(reaped, failed)``."""
    t = now()
    expired = conn.execute(
        "SELECT job_id, attempts, started_at, lease_owner, lease_expiries + 1 "
        "FROM jobsched_shared_jobs WHERE status = 'running' AND lease_expires < ?",
        (t,),
    ).fetchall()
    if not expired:
        return 0, 0
    requeued = [(count, job_id) for job_id, _, _, _, count in expired if count < max_expiries]
    failed = {
        job_id: lease_expired_error(count, max_expiries)
        for job_id, _, _, _, count in expired
        if count >= max_expiries
    }
    conn.executemany(
        "UPDATE jobsched_shared_jobs SET status = 'pending', lease_owner = NULL, "
        "lease_expires = NULL, lease_expiries = ? WHERE job_id = ?",
        requeued,
    )
    conn.executemany(
        "UPDATE jobsched_shared_jobs SET status = 'failed', lease_owner = NULL, "
        "lease_expires = NULL, lease_expiries = lease_expiries + 1, finished_at = ?, "
        "last_error = ? WHERE job_id = ?",
        [(t, error, job_id) for job_id, error in failed.items()],
    )
    conn.executemany(
        "INSERT INTO jobsched_shared_attempts (job_id, number, status, error, started_at, "
        "finished_at, worker) VALUES (?, ?, 'lease_expired', ?, ?, ?, ?)",
        [
            (
                job_id,
                attempts,
                failed.get(job_id, "lease expired: its worker stopped renewing it"),
                started,
                t,
                owner,
            )
            for job_id, attempts, started, owner, _ in expired
        ],
    )
    if failed:
        settle(conn, [(job_id, "failed") for job_id in failed], t)
    return len(expired), len(failed)


def release(conn: sqlite3.Connection, job_ids: list[str], owner: str) -> int:
    """Give back claimed jobs that never started (their attempt is not counted)."""
    count = 0
    for i in range(0, len(job_ids), 500):
        chunk = job_ids[i : i + 500]
        cur = conn.execute(
            "UPDATE jobsched_shared_jobs SET status = 'pending', lease_owner = NULL, "
            f"lease_expires = NULL, attempts = attempts - 1 WHERE job_id IN ({_in(chunk)}) "
            "AND lease_owner = ? AND status = 'running' RETURNING job_id",
            [*chunk, owner],
        )
        count += len(cur.fetchall())
    return count


def refuse(
    conn: sqlite3.Connection,
    refusals: Sequence[tuple[str, str]],
    owner: str,
    refuser: str,
    bound: int,
) -> tuple[list[str], bool]:
    """Hand back claimed jobs `owner` cannot build, counting the refusal
    (`SharedStore.refuse`): ``(the ids that reached `bound`, left running
    for `owner` to fail; whether a job is pending again)``."""
    at_bound: list[str] = []
    released = False
    for job_id, error in refusals:
        r = conn.execute(
            "UPDATE jobsched_shared_jobs SET build_refusals = build_refusals + 1, "
            "last_refusal = ?, refused_by = json_insert(coalesce(refused_by, '[]'), '$[#]', ?) "
            "WHERE job_id = ? AND lease_owner = ? AND status = 'running' "
            "RETURNING build_refusals",
            (error, refuser, job_id, owner),
        ).fetchone()
        if r is None:
            continue
        if r[0] >= bound:
            at_bound.append(job_id)
            continue
        conn.execute(
            "UPDATE jobsched_shared_jobs SET status = 'pending', lease_owner = NULL, "
            "lease_expires = NULL, attempts = attempts - 1 WHERE job_id = ?",
            (job_id,),
        )
        released = True
    return at_bound, released


# The outcomes of a batch, as rows of ``o_id, o_result, o_status, o_error,
# o_traceback, o_run_at, o_expires, o_attempt`` (the history's status), come
# from one of three sources. Each value from one JSON array of rows:
_EACH_OUTCOME = (
    "SELECT json_extract(value, '$[0]') AS o_id, json_extract(value, '$[1]') AS o_result, "
    "json_extract(value, '$[2]') AS o_status, json_extract(value, '$[3]') AS o_error, "
    "json_extract(value, '$[4]') AS o_traceback, json_extract(value, '$[5]') AS o_run_at, "
    "json_extract(value, '$[6]') AS o_expires, json_extract(value, '$[7]') AS o_attempt "
    "FROM json_each(:rows)"
)
# Outcomes that share every value but their job and result (a batch of jobs
# that completed, as a rule): only ``[job_id, result]`` rows come from JSON,
# the rest are parameters. Taking every value of every job out of JSON was
# about a third of a finish's SQLite work.
_SHARED_OUTCOMES = (
    "SELECT json_extract(value, '$[0]') AS o_id, json_extract(value, '$[1]') AS o_result, "
    ":status AS o_status, :error AS o_error, :traceback AS o_traceback, :run_at AS o_run_at, "
    ":expires AS o_expires, :attempt AS o_attempt FROM json_each(:rows)"
)
# One outcome, every value a parameter: for what JSON cannot carry (an id a
# hand tampered into a BLOB, which a claim fails as it is stored; an infinite
# time).
_ONE_OUTCOME = (
    "SELECT :id AS o_id, :result AS o_result, :status AS o_status, :error AS o_error, "
    ":traceback AS o_traceback, :run_at AS o_run_at, :expires AS o_expires, "
    ":attempt AS o_attempt"
)
#: The parameters of an outcome's values, besides its job and result (`_values`).
_VALUE_NAMES = ("status", "error", "traceback", "run_at", "expires", "attempt")

# Each attempt that ended, numbered and timed from its job's row while
# `owner` holds it (the write lock is ours: nothing changes it meanwhile).
_HISTORY = """INSERT INTO jobsched_shared_attempts (job_id, number, status, error, started_at,
    finished_at, worker, traceback)
SELECT job_id, attempts, o_attempt, o_error, started_at, :t, :owner, o_traceback
FROM ({source}) JOIN jobsched_shared_jobs ON job_id = o_id
WHERE lease_owner = :owner AND status = 'running'"""
# Then the jobs, a batch in one statement: a statement in a transaction that
# fires the status counters' trigger keeps a statement journal of the pages
# it touches, and a statement per job paid that (about 7 µs of a 12 µs
# finish) once per job.
_FINISH = """UPDATE jobsched_shared_jobs SET status = o_status, result = o_result,
    last_error = CASE WHEN o_status = 'completed' THEN NULL
        ELSE coalesce(o_error, last_error) END,
    last_traceback = o_traceback, run_at = coalesce(o_run_at, run_at),
    finished_at = CASE WHEN o_status = 'retry_wait' THEN NULL ELSE :t END,
    result_expires = o_expires, lease_owner = NULL, lease_expires = NULL,
    cancel_requested = 0
FROM ({source}) WHERE job_id = o_id AND lease_owner = :owner AND status = 'running'
RETURNING job_id"""

_BY_SOURCE = {
    source: (_HISTORY.format(source=source), _FINISH.format(source=source))
    for source in (_EACH_OUTCOME, _SHARED_OUTCOMES, _ONE_OUTCOME)
}

# The JSON of a batch keeps every text as it is (`ensure_ascii=False`): a
# lone surrogate then fails to bind, as a parameter would, instead of
# becoming an escape SQLite would store as invalid UTF-8.
_encode_rows = json.JSONEncoder(ensure_ascii=False, allow_nan=False).encode


def _as_json(rows: list[list[Any]]) -> str | None:
    """`rows` as one JSON array, or None when JSON cannot carry one of them."""
    try:
        return _encode_rows(rows)
    except (TypeError, ValueError):
        return None


def _values(o: Outcome, t: float) -> tuple[Any, ...]:
    """What `o` writes besides its job and result (`_VALUE_NAMES`)."""
    expires = None
    if o.result_ttl is not None and o.status == "completed":
        expires = t + o.result_ttl
    return (o.status, o.error, o.traceback, o.run_at, expires, o.attempt or o.status)


def _write(conn: sqlite3.Connection, source: str, params: dict[str, Any]) -> list[Any]:
    """The history and the jobs of the outcomes `source` reads; the ids written."""
    history, jobs = _BY_SOURCE[source]
    conn.execute(history, params)
    return [r[0] for r in conn.execute(jobs, params)]


def finish(
    conn: sqlite3.Connection, outcomes: Sequence[Outcome], owner: str
) -> tuple[list[str], bool]:
    """Record attempts that ended; ``(the ids written, whether work became due)``.

    Only jobs `owner` still holds are written (a job whose lease expired and
    was taken by another process belongs to that one now), each once (its
    first outcome). Terminal jobs settle their dependents by their trigger
    rules (`settle`), in the caller's transaction.

    The most outcomes that share their values (`_values`) are written by one
    pair of statements (`_SHARED_OUTCOMES`), the others by another
    (`_EACH_OUTCOME`), 500 at a time; what JSON cannot carry, one by one.
    """
    t = now()
    first: dict[str, Outcome] = {}
    for o in outcomes:
        first.setdefault(o.job_id, o)
    if not first:
        return [], False
    groups: dict[tuple[Any, ...], list[Outcome]] = {}
    for o in first.values():
        groups.setdefault(_values(o, t), []).append(o)
    common = max(groups, key=lambda values: len(groups[values]))
    base = {"t": t, "owner": owner}
    done: list[Any] = []
    alone: list[tuple[Outcome, tuple[Any, ...]]] = []
    if len(groups[common]) > 1:
        shared = groups.pop(common)
        params = {**base, **dict(zip(_VALUE_NAMES, common, strict=True))}
        for i in range(0, len(shared), 500):
            chunk = shared[i : i + 500]
            text = _as_json([[o.job_id, o.result] for o in chunk])
            if text is None:
                alone += [(o, common) for o in chunk]
            else:
                done += _write(conn, _SHARED_OUTCOMES, {**params, "rows": text})
    others = [(o, values) for values, group in groups.items() for o in group]
    for i in range(0, len(others), 500):
        part = others[i : i + 500]
        text = _as_json([[o.job_id, o.result, *values] for o, values in part])
        if text is None:
            alone += part
        else:
            done += _write(conn, _EACH_OUTCOME, {**base, "rows": text})
    for o, values in alone:
        params = {**base, **dict(zip(_VALUE_NAMES, values, strict=True))}
        done += _write(conn, _ONE_OUTCOME, {**params, "id": o.job_id, "result": o.result})
    if not done:
        return [], False
    held = set(done)
    written = [(o.job_id, o.status) for o in first.values() if o.job_id in held]
    # Running to completed is counted here, not by the trigger (version 16).
    completed = sum(status == "completed" for _, status in written)
    add_counts(conn, {"running": -completed, "completed": completed})
    ended = [(job_id, status) for job_id, status in written if status in TERMINAL]
    wake = any(status == "retry_wait" for _, status in written)
    if ended:
        wake = settle(conn, ended, t) or wake
    return [job_id for job_id, _ in written], wake


def settle(conn: sqlite3.Connection, ended: list[tuple[str, str]], t: float) -> bool:
    """Settle the waiting dependents of jobs that just ended, by their trigger
    rules (`settle_dependent`); a dependent cancelled so settles its own
    dependents as ``cancelled``, and so on downstream. True if one was released.

    Only dependents still waiting (pending, ``unmet > 0``) are settled: one
    its rule released early is not touched by its other upstreams.
    """
    # Most files hold no dependencies: one probe instead of one per job.
    if conn.execute("SELECT NOT EXISTS (SELECT 1 FROM jobsched_shared_dependencies)").fetchone()[0]:
        return False
    released = False
    # Level by level: each level's dependents see all of its ends at once.
    while ended:
        upstreams = [u for u, _ in ended]
        rows = []
        # In chunks: a SQLite build may bind as few as 32,766 parameters in a
        # statement (SQLITE_MAX_VARIABLE_NUMBER; Debian's allows 250,000).
        for i in range(0, len(upstreams), 500):
            chunk = upstreams[i : i + 500]
            rows += conn.execute(
                f"""SELECT j.job_id, j.trigger_rule, j.unmet, d.upstream
                FROM jobsched_shared_dependencies d
                JOIN jobsched_shared_jobs j ON j.job_id = d.job_id
                WHERE d.upstream IN ({_in(chunk)}) AND j.status = 'pending' AND j.unmet > 0""",
                chunk,
            ).fetchall()
        rows.sort(key=lambda r: r[0])  # by dependent, as one statement ordered them
        order = {u: i for i, (u, _) in enumerate(ended)}
        status_of = dict(ended)
        waiting: dict[str, tuple[str, int, list[str]]] = {}
        for job_id, rule, unmet, upstream in rows:
            waiting.setdefault(job_id, (rule, unmet, []))[2].append(upstream)
        ended = []
        for job_id, (rule, unmet, ups) in waiting.items():
            ups.sort(key=order.__getitem__)
            run, left, reason = settle_dependent(rule, unmet, [(u, status_of[u]) for u in ups])
            if run is False:
                conn.execute(
                    "UPDATE jobsched_shared_jobs SET status = 'cancelled', finished_at = ?, "
                    "last_error = ? WHERE job_id = ?",
                    (t, reason, job_id),
                )
                ended.append((job_id, "cancelled"))
            else:
                conn.execute(
                    "UPDATE jobsched_shared_jobs SET unmet = ? WHERE job_id = ?", (left, job_id)
                )
                released = released or run is True
    return released


def request_cancel(conn: sqlite3.Connection, job_id: str) -> tuple[bool, str | None]:
    """Cancel a job from any process: ``(done, owner)``; done False if unknown or finished.

    A waiting job is cancelled here and now (and its dependents with it); a
    running one is flagged, and `owner` (its lease holder) cancels the
    attempt when it sees the flag, then writes CANCELLED itself.
    """
    r = conn.execute(
        "SELECT status, lease_owner FROM jobsched_shared_jobs WHERE job_id = ?", (job_id,)
    ).fetchone()
    if r is None or r[0] in TERMINAL:
        return False, None
    if r[0] == "running":
        conn.execute(
            "UPDATE jobsched_shared_jobs SET cancel_requested = 1 WHERE job_id = ?", (job_id,)
        )
        return True, r[1]
    t = now()
    conn.execute(
        "UPDATE jobsched_shared_jobs SET status = 'cancelled', last_error = 'cancelled', "
        "finished_at = ? WHERE job_id = ?",
        (t, job_id),
    )
    settle(conn, [(job_id, "cancelled")], t)
    return True, None


def cancel_requests(conn: sqlite3.Connection, owner: str) -> list[str]:
    """Jobs `owner` runs that someone asked to cancel."""
    cur = conn.execute(
        "SELECT job_id FROM jobsched_shared_jobs WHERE lease_owner = ? "
        "AND status = 'running' AND cancel_requested = 1",
        (owner,),
    )
    return [r[0] for r in cur]
