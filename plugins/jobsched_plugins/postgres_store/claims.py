"""Claims, leases and limits: taking due jobs in strategy order under the
cluster's limits, keeping and losing leases, writing outcomes (releasing or
cancelling dependents in the same transaction), and cancel requests.

Each call is one transaction (`Database.transaction`), except a claim while
no limits are stored, the queue is not paused and no ready job of the
claim's queues has a group: one autocommit statement (`Database.statement`).

Jobs with a group (a tenant) are claimed in turns (`_TURNS`): the first
ready job of each group in strategy order, then the second of each, and so
on, so one group's backlog never holds the others back. The ready jobs are
split between two partial indexes, both led by the queue: ``jobs_ready``
(no group) and ``jobs_ready_group`` (by group), so a store without groups
claims as it always did and a grouped claim never walks one group's backlog
to find another's jobs.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
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
    And whether it found ready jobs with a group in its queues: the next
    claim then goes straight to the claim in turns, without first trying
    the plain one."""

    def __init__(self) -> None:
        self.found = False
        self.grouped = False
        #: How many groups had ready jobs then (how many jobs a group offers).
        self.groups = 0


def claimable(types: Sequence[str] | None, refuser: str) -> tuple[str, list[Any]]:
    """The WHERE terms (and their parameters) of what a worker can take: jobs
    of its `types` (None: any) that `refuser` did not refuse (`refuse`)."""
    if types is None:
        return " AND %s <> ALL(refused_by)", [refuser]
    return " AND %s <> ALL(refused_by) AND type = ANY(%s)", [refuser, list(types)]


def _claimable_named(types: Sequence[str] | None, refuser: str) -> dict[str, Any]:
    """`claimable`'s parameters for the statements with named ones (`_named`)."""
    return {"refuser": refuser, "types": None if types is None else list(types)}


def _named(template: str) -> tuple[str, str]:
    """`template` with its ``{terms}`` filled as `claimable`'s, by name
    (``%(refuser)s``, ``%(types)s``), untyped and typed."""
    terms = " AND %(refuser)s <> ALL(refused_by)"
    return (
        template.replace("{terms}", terms),
        template.replace("{terms}", terms + " AND type = ANY(%(types)s)"),
    )


async def claim(
    db: Database,
    limits: LimitsSeen,
    lease_seconds: float,
    n: int,
    owner: str,
    queues: Mapping[str, int] | None = None,
    types: Sequence[str] | None = None,
    refuser: str | None = None,
) -> tuple[list[SharedJobRow], float | None]:
    """Take up to `n` due jobs in strategy order with a lease for `owner`.

    `queues` maps each queue to take from to the most jobs to take from it
    (None: every queue, `n` in all). Only jobs of `types` (None: any) that
    `refuser` (default: `owner`) did not refuse are taken (`claimable`).
    Jobs with a group come in turns (`_TURNS`). Returns the rows (now
    ``running``, attempts counted) and, when fewer than `n` were due, the
    wall time the next waiting job this claim could take becomes due (None
    if there is none), so the caller can sleep exactly that long. With
    cluster limits stored (`sync_limits`) the claim enforces them instead,
    in a transaction of its own (see `_claim_limited`).
    """
    rooms = _rooms(n, queues)
    if n <= 0 or (rooms is not None and not rooms):
        return [], None
    names = None if rooms is None else list(rooms)
    who = owner if refuser is None else refuser
    term_params = claimable(types, who)[1]
    typed = types is not None
    named: dict[str, Any] = {"names": names, **_claimable_named(types, who)}

    async def plain(
        conn: psycopg.AsyncConnection[Any], n: int = n, rooms: dict[str, int] | None = rooms
    ) -> list[dict[str, Any]]:
        tail = [owner, lease_seconds, db.channel, CHANGED]
        if rooms is None:
            cur = await conn.execute(db.q(_CLAIM[typed]), [*term_params, n, *tail])
        elif len(rooms) == 1:
            [(queue, room)] = rooms.items()
            cur = await conn.execute(
                db.q(_CLAIM_QUEUE[typed]),
                [queue, queue, queue, *term_params, min(n, room), *tail],
            )
        else:
            cur = await conn.execute(
                db.q(_CLAIM_QUEUES[typed]),
                [list(rooms), list(rooms.values()), *term_params, n, *tail],
            )
        return await cur.fetchall()

    # One statement on the autocommit connection (one round trip for a busy
    # queue); it claims nothing while limits are stored or the queue is
    # paused, and nothing of a queue with ready grouped jobs, which is asked
    # only when it got fewer than `n`. While the last claim found groups,
    # the turns are tried first.
    skipped = limits.grouped
    if skipped:

        async def turns(conn: psycopg.AsyncConnection[Any]) -> list[dict[str, Any]]:
            params = _turns_params(db, lease_seconds, n, owner, limits.groups, rooms)
            cur = await conn.execute(
                db.q(_TURNS_CLAIM_FIRST[names is not None][typed]), {**params, **named}
            )
            return await cur.fetchall()

        taken = await db.statement(turns)
    else:
        taken = await db.statement(plain)
    limits.found = False
    if len(taken) == n:
        return await _readable(db, limits, taken, owner), None
    left = None
    if rooms is not None:
        left = dict(rooms)
        for r in taken:
            left[r["queue"]] -= 1

    async def flags(conn: psycopg.AsyncConnection[Any]) -> dict[str, Any]:
        cur = await conn.execute(db.q(_REST[typed]), named)
        rec: dict[str, Any] | None = await cur.fetchone()
        assert rec is not None  # one row, always
        return rec

    rec = await db.statement(flags)
    pairs = [(q, g) for q, g in rec["groups"] or ()]
    limits.grouped = rec["grouped"]
    limits.groups = len({g for _, g in pairs})
    more: list[dict[str, Any]] = []
    next_due = rec["t"]
    if rec["paused"]:
        next_due = None  # resuming wakes every claimer
    elif rec["limits"]:
        limits.found = True
        stored = checked_limits(rec["limits"])
        more, next_due = await db.transaction(
            lambda conn: _claim_limited(
                db,
                conn,
                lease_seconds,
                n - len(taken),
                owner,
                stored,
                left,
                named,
                typed,
                groups=pairs if rec["grouped"] else None,
            )
        )
    elif rec["grouped"]:
        more, next_due = await _claim_turns(
            db, lease_seconds, n - len(taken), owner, pairs, left, named, typed
        )
    elif skipped:  # the groups are gone: the plain claim after all
        more = await db.statement(lambda conn: plain(conn, n - len(taken), left))
        next_due = None if len(taken) + len(more) == n else (await db.statement(flags))["t"]
    return await _readable(db, limits, taken + more, owner), next_due


def _rooms(n: int, queues: Mapping[str, int] | None) -> dict[str, int] | None:
    """The queues to claim from with room for a job, each room at most `n`."""
    if queues is None:
        return None
    return {queue: min(n, room) for queue, room in queues.items() if room > 0}


async def _claim_turns(
    db: Database,
    lease_seconds: float,
    n: int,
    owner: str,
    pairs: list[tuple[str, str]],
    rooms: dict[str, int] | None,
    named: dict[str, Any],
    typed: bool,
) -> tuple[list[dict[str, Any]], float | None]:
    """The claim in turns without limits: autocommit statements (`_TURNS_CLAIM`),
    one unless a pass comes back short (small groups ran out: the next pass
    takes more of the others), and the next due time if fewer than `n` were due.
    `pairs` are the (queue, group) pairs with ready jobs in the claim's queues."""
    taken: list[dict[str, Any]] = []
    groups = len({g for _, g in pairs})
    left = None if rooms is None else dict(rooms)
    while len(taken) < n and (left is None or any(room > 0 for room in left.values())):
        params = _turns_params(db, lease_seconds, n - len(taken), owner, groups, left)
        params["gq"] = [q for q, _ in pairs]
        params["gg"] = [g for _, g in pairs]

        async def take(conn: psycopg.AsyncConnection[Any], params: dict[str, Any] = params) -> Any:
            cur = await conn.execute(
                db.q(_TURNS_CLAIM[named["names"] is not None][typed]), {**params, **named}
            )
            return await cur.fetchall()

        rows = await db.statement(take)
        taken += rows
        if not rows:
            break
        if left is not None:
            for r in rows:
                left[r["queue"]] -= 1
    next_due = None
    if len(taken) < n:

        async def due(conn: psycopg.AsyncConnection[Any]) -> Any:
            cur = await conn.execute(
                db.q(_NEXT_DUE[typed]),
                {"full_t": [], "full_e": [], "full_q": [], "full_g": [], **named},
            )
            return (await cur.fetchone())["t"]  # type: ignore[index]

        next_due = await db.statement(due)
    return taken, next_due


def _turns_params(
    db: Database,
    lease_seconds: float,
    n: int,
    owner: str,
    groups: int,
    rooms: dict[str, int] | None,
) -> dict[str, Any]:
    """`_TURNS_CLAIM`'s parameters, but the groups and the claim's filters,
    for `n` jobs from `groups` groups and at most `rooms` per queue."""
    return {
        "per": _per_group(groups + 1, n),
        "n": n,
        "rooms": None if rooms is None else json.dumps(rooms),
        "full_t": [],
        "full_e": [],
        "full_q": [],
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
# The first ready job with a group `where` says (None: there is none), read
# in the order of ``jobs_ready_group``: a probe of that index. (An EXISTS
# would let the planner pick a sequential scan, expecting a grouped job of
# the queue soon when other queues have many; it then reads the whole table
# when this queue has none.)
_FIRST_GROUPED = (
    "SELECT job_group FROM {{s}}.jobs WHERE "
    + _GROUPED_READY.replace("{", "{{")
    + " AND {where} ORDER BY queue, job_group LIMIT 1"
)
# The claim's queues (``%(names)s``, NULL: every queue) but the paused ones.
_IN_QUEUES = (
    "(%(names)s::text[] IS NULL OR queue = ANY(%(names)s))"
    " AND queue NOT IN (SELECT queue FROM {s}.paused_queues)"
)

# The (queue, group) pairs with ready jobs: a loose scan of
# ``jobs_ready_group`` (which leads with the queue), one probe per pair
# however many jobs each has.
_PAIRS_CTE = (
    """pairs AS (
    (SELECT queue AS q, job_group AS g FROM {s}.jobs WHERE """
    + _GROUPED_READY
    + """ ORDER BY queue, job_group LIMIT 1)
    UNION ALL
    SELECT nx.q, nx.g FROM pairs CROSS JOIN LATERAL (
        SELECT queue AS q, job_group AS g FROM {s}.jobs WHERE """
    + _GROUPED_READY
    + """ AND (queue, job_group) > (pairs.q, pairs.g)
        ORDER BY queue, job_group LIMIT 1) AS nx
)"""
)
# The pairs of the claim's queues, but the paused ones.
_OPEN_PAIRS = (
    "SELECT q, g FROM pairs WHERE (%(names)s::text[] IS NULL OR q = ANY(%(names)s))"
    " AND q NOT IN (SELECT queue FROM {s}.paused_queues)"
)

# When the plain claim took fewer than asked: the limits, the pause, the
# (queue, group) pairs with ready jobs in the claim's queues (then claims
# take turns) and, only when there are no limits, pause or groups, the next
# due time of what this claim could take. A CASE runs its subquery only
# when it is needed: a claim in turns or under limits computes its own
# next due time, and only when it took fewer than asked.
_REST = _named(
    """WITH RECURSIVE flags AS (SELECT (SELECT data FROM {s}.limits WHERE id = 1) AS limits,
    EXISTS (SELECT 1 FROM {s}.paused) AS paused,
    ("""
    + _FIRST_GROUPED.format(where=_IN_QUEUES)
    + """) IS NOT NULL AS grouped), """
    + _PAIRS_CTE
    + """
SELECT limits, paused, grouped,
    CASE WHEN grouped AND NOT paused THEN ARRAY(SELECT ARRAY[q, g] FROM ("""
    + _OPEN_PAIRS
    + """) AS open_pairs) END AS groups,
    CASE WHEN limits IS NULL AND NOT paused AND NOT grouped
        THEN (SELECT min(run_at) FROM {s}.jobs WHERE job_group IS NULL AND """
    + _READY
    + " AND "
    + _IN_QUEUES
    + """{terms}) END AS t
FROM flags"""
)

# The plain claim: the first `n` due jobs in strategy order, locked without
# waiting for the ones other claimers hold. Live views hear of it from the
# statement itself (no extra round trip): the uncorrelated subquery in the
# filter runs once and sends one "changed" NOTIFY if anything was picked, so
# an idle worker's empty claim sends nothing. (Wrapping the UPDATE in a CTE
# to test its RETURNING rows instead copies every claimed row once more.)
# It takes no job with a group, and nothing of a queue with ready grouped
# jobs: those are taken in turns (`_TURNS`).
#
# `claimable`'s terms end each walk's filter: their parameters come right
# before its LIMIT. Each statement comes untyped and typed (`[types is not None]`).
_CLAIM_HEAD = "WITH now AS (SELECT " + NOW + " AS t), "
_CLAIM_TAIL = """
UPDATE {s}.jobs j SET status = 'running', attempts = j.attempts + 1,
    lease_owner = %s, lease_expires = (SELECT t FROM now) + %s,
    started_at = (SELECT t FROM now), progress = NULL
FROM picked WHERE j.job_id = picked.job_id
    AND (SELECT count(pg_notify(%s, %s)) FROM (SELECT FROM picked LIMIT 1) AS one) = 1
RETURNING j.*"""


def _claim_statements(picked: str) -> tuple[str, str]:
    """The claim with `picked` (its ``{terms}`` filled), untyped and typed."""
    untyped, typed = (
        _CLAIM_HEAD + picked.replace("{terms}", claimable(kinds, "")[0]) + _CLAIM_TAIL
        for kinds in (None, ())
    )
    return untyped, typed


_CLAIM = _claim_statements(
    """picked AS (
    SELECT job_id FROM {s}.jobs
    WHERE job_group IS NULL AND status IN ('pending', 'retry_wait') AND unmet = 0
      AND run_at <= (SELECT t FROM now)
      AND NOT EXISTS (SELECT 1 FROM {s}.limits)
      AND NOT EXISTS (SELECT 1 FROM {s}.paused)
      AND ("""
    + _FIRST_GROUPED.format(where="queue NOT IN (SELECT queue FROM {s}.paused_queues)")
    + """) IS NULL
      AND queue NOT IN (SELECT queue FROM {s}.paused_queues){terms}
    ORDER BY sort_key, seq
    LIMIT %s FOR UPDATE SKIP LOCKED)"""
)
# One queue (a worker's usual case): the ready index leads with the queue,
# so this walks that queue's jobs in strategy order, as `_CLAIM` walks all.
_CLAIM_QUEUE = _claim_statements(
    """picked AS (
    SELECT job_id FROM {s}.jobs
    WHERE queue = %s AND job_group IS NULL AND status IN ('pending', 'retry_wait')
      AND unmet = 0 AND run_at <= (SELECT t FROM now)
      AND NOT EXISTS (SELECT 1 FROM {s}.limits)
      AND NOT EXISTS (SELECT 1 FROM {s}.paused)
      AND NOT EXISTS (SELECT 1 FROM {s}.paused_queues WHERE queue = %s)
      AND ("""
    + _FIRST_GROUPED.format(where="queue = %s")
    + """) IS NULL{terms}
    ORDER BY sort_key, seq
    LIMIT %s FOR UPDATE SKIP LOCKED)"""
)
# Several queues, each with its own room: one index walk per queue (each
# locking at most its room), then the best `n` of them in strategy order.
# Rows locked but not picked are unlocked when the statement ends.
_CLAIM_QUEUES = _claim_statements(
    """picked AS (
    SELECT p.job_id FROM unnest(%s::text[], %s::int[]) AS q(name, room)
    CROSS JOIN LATERAL (
        SELECT job_id, sort_key, seq FROM {s}.jobs
        WHERE queue = q.name AND job_group IS NULL AND status IN ('pending', 'retry_wait')
          AND unmet = 0 AND run_at <= (SELECT t FROM now){terms}
        ORDER BY sort_key, seq
        LIMIT q.room FOR UPDATE SKIP LOCKED) AS p
    WHERE NOT EXISTS (SELECT 1 FROM {s}.limits)
      AND NOT EXISTS (SELECT 1 FROM {s}.paused)
      AND NOT EXISTS (SELECT 1 FROM {s}.paused_queues pq WHERE pq.queue = q.name)
      AND ("""
    + _FIRST_GROUPED.format(where="queue = q.name")
    + """) IS NULL
    ORDER BY p.sort_key, p.seq
    LIMIT %s)"""
)

# What a claim under limits leaves out: the keys at their limit, the jobs
# it already read, and what its worker cannot take.
_HELD_BACK = """
  AND type <> ALL(%(full_t)s) AND coalesce(options->>'executor', '') <> ALL(%(full_e)s)
  AND queue <> ALL(%(full_q)s) AND job_id <> ALL(%(seen)s){terms}"""

# Ready jobs with no group of the claim's queues, in strategy order, but
# those held back.
_UNGROUPED = _named(
    """SELECT job_id, type, options->>'executor' AS exe, queue, job_group FROM {s}.jobs
WHERE job_group IS NULL AND """
    + _READY
    + " AND run_at <= %(now)s AND "
    + _IN_QUEUES
    + _HELD_BACK
    + """
ORDER BY sort_key, seq
LIMIT %(n)s FOR UPDATE SKIP LOCKED"""
)

# The first jobs without a group in the claim's queues: every queue's in
# strategy order, or (with queues named) each named queue's walk of its
# ready index, as `_CLAIM_QUEUES`; locked (`_turns_select` says why), none
# when ``{guard}`` says so.
_PLAIN_OFFER = {
    False: """SELECT job_id, type, options->>'executor' AS exe, queue, job_group, sort_key, seq
        FROM {s}.jobs WHERE job_group IS NULL AND """
    + _READY
    + " AND run_at <= %(now)s AND queue NOT IN (SELECT queue FROM {s}.paused_queues)"
    + _HELD_BACK
    + """{guard}
        ORDER BY sort_key, seq LIMIT %(n)s FOR UPDATE SKIP LOCKED""",
    True: """SELECT p.* FROM unnest(%(names)s::text[]) AS w(name) CROSS JOIN LATERAL (
        SELECT job_id, type, options->>'executor' AS exe, queue, job_group, sort_key, seq
        FROM {s}.jobs WHERE queue = w.name AND job_group IS NULL AND """
    + _READY
    + " AND run_at <= %(now)s"
    + _HELD_BACK
    + """
        ORDER BY sort_key, seq LIMIT %(n)s FOR UPDATE SKIP LOCKED) AS p
        WHERE NOT EXISTS (SELECT 1 FROM {s}.paused_queues pq WHERE pq.queue = w.name){guard}""",
}

# The open (queue, group) pairs a claim in turns is given (``%(gq)s``, ``%(gg)s``).
_GIVEN_GROUPS = "unnest(%(gq)s::text[], %(gg)s::text[]) AS open_groups(q, g)"
# What the first try of a claim in turns adds to its offers: none while
# limits are stored or every queue is paused (as `_CLAIM`). An uncorrelated
# test: the planner checks it once, before reading any pair.
_UNLIMITED = " AND NOT EXISTS (SELECT 1 FROM {s}.limits) AND NOT EXISTS (SELECT 1 FROM {s}.paused)"


def _turns_select(named_queues: bool, open_groups: str = _GIVEN_GROUPS, guard: str = "") -> str:
    """The claim in turns, when ready jobs have groups: each open (queue,
    group) pair's first `per` due jobs in strategy order (and the jobs
    without a group as one more group), numbered in turns per group, then
    the first `n` by (turn, strategy order) with at most each queue's room
    (``%(rooms)s``, JSON; NULL: `n`).

    Each pair's walk locks what it offers, skipping what other claimers
    hold (``FOR UPDATE SKIP LOCKED`` in the walk, as `_CLAIM_QUEUES`), so
    that claimers at once share out the groups' next jobs: were only the
    turns' winners locked, every claimer would offer the same first jobs of
    each group, and the second would find them all held and claim nothing.
    The offers not picked are unlocked when the statement (under limits,
    the claim's transaction) ends.

    A pair is spelled as a range of the index's first two columns, not as
    two equalities, so that the planner expects a large share of the index
    in it and walks the index in order, stopping after `per` jobs. With the
    equalities, once ANALYZE had seen small groups, it expected fewer jobs
    than `per` and fetched every job of each group to sort them (a bitmap
    scan: 5,000 rows read for a claim of 512 at 4 queues x 100 groups, 9.6
    ms instead of 0.8), however many jobs a group has by then. Partitions compare in byte order
    (``COLLATE "C"``): they need equality only, and the locale's comparison
    of the groups was most of the sorting's time.
    """
    return (
        """WITH offers AS (
    SELECT top.* FROM """
        + open_groups
        + """
    CROSS JOIN LATERAL (
        SELECT job_id, type, options->>'executor' AS exe, queue, job_group, sort_key, seq
        FROM {s}.jobs
        WHERE (queue, job_group) >= (open_groups.q, open_groups.g)
          AND (queue, job_group) <= (open_groups.q, open_groups.g) AND """
        + _GROUPED_READY
        + " AND run_at <= %(now)s"
        + _HELD_BACK
        + """
        ORDER BY queue, job_group, sort_key, seq LIMIT %(per)s FOR UPDATE SKIP LOCKED) AS top
    UNION ALL
    SELECT * FROM ("""
        + _PLAIN_OFFER[named_queues].replace("{guard}", guard)
        + """) AS plain_offer
), turns AS (
    SELECT *, row_number() OVER (PARTITION BY job_group COLLATE "C" ORDER BY sort_key, seq) AS turn
    FROM offers
), ranked AS (
    SELECT *, row_number() OVER (PARTITION BY queue COLLATE "C" ORDER BY turn, sort_key, seq) AS k,
        coalesce((%(rooms)s::jsonb ->> queue)::int, %(n)s) AS room
    FROM turns
)
SELECT job_id, type, exe, queue, job_group FROM ranked
WHERE k <= room
ORDER BY turn, sort_key, seq
LIMIT %(n)s"""
    )


_TURNS = {named_queues: _named(_turns_select(named_queues)) for named_queues in (False, True)}


def _turns_claim(select: str, ctes: str = "") -> str:
    """The claim in turns as one statement (no limits to check in between):
    the turns' first `n` (locked by their walks), marked running with one
    "changed" NOTIFY (as in `_CLAIM`). `ctes` come first (``name AS (...), ``)."""
    return (
        ("WITH RECURSIVE " + ctes if ctes else "WITH ")
        + "now AS (SELECT "
        + NOW
        + " AS t), picked AS ("
        + select.replace("%(now)s", "(SELECT t FROM now)")
        + """)
UPDATE {s}.jobs j SET status = 'running', attempts = j.attempts + 1,
    lease_owner = %(owner)s, lease_expires = (SELECT t FROM now) + %(lease)s,
    started_at = (SELECT t FROM now), progress = NULL
FROM picked WHERE j.job_id = picked.job_id
    AND (SELECT count(pg_notify(%(channel)s, %(changed)s))
        FROM (SELECT FROM picked LIMIT 1) AS one) = 1
RETURNING j.*"""
    )


_TURNS_CLAIM = {
    named_queues: tuple(_turns_claim(select) for select in _TURNS[named_queues])
    for named_queues in (False, True)
}
# The first try of a claimer whose last claim found groups: `_TURNS_CLAIM`
# reading the open pairs itself (`_PAIRS_CTE`) and offering nothing while
# limits are stored or every queue is paused (`_UNLIMITED`), one statement.
# `per` comes from the number of groups that last claim found.
_TURNS_CLAIM_FIRST = {
    named_queues: tuple(
        _turns_claim(select, _PAIRS_CTE + ", ")
        for select in _named(
            _turns_select(
                named_queues, "(" + _OPEN_PAIRS + _UNLIMITED + ") AS open_groups", _UNLIMITED
            )
        )
    )
    for named_queues in (False, True)
}

# The next due time of the jobs no limit holds back in the claim's queues
# (each ready index alone).
_NEXT_DUE = _named(
    """SELECT least(
    (SELECT min(run_at) FROM {s}.jobs WHERE job_group IS NULL AND """
    + _READY
    + " AND "
    + _IN_QUEUES
    + """
        AND type <> ALL(%(full_t)s) AND coalesce(options->>'executor', '') <> ALL(%(full_e)s)
        AND queue <> ALL(%(full_q)s){terms}),
    (SELECT min(run_at) FROM {s}.jobs WHERE """
    + _GROUPED_READY
    + " AND "
    + _IN_QUEUES
    + """
        AND job_group <> ALL(%(full_g)s)
        AND type <> ALL(%(full_t)s) AND coalesce(options->>'executor', '') <> ALL(%(full_e)s)
        AND queue <> ALL(%(full_q)s){terms})
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
    rooms: dict[str, int] | None,
    named: dict[str, Any],
    typed: bool,
    *,
    groups: list[tuple[str, str]] | None,
) -> tuple[list[dict[str, Any]], float | None]:
    """The claim under cluster limits, inside the claim transaction.

    `rooms` is what is left of the claim's room per queue (None: any queue);
    `named` has the claim's queues and `claimable`'s parameters by name
    (`_named`), `typed` whether it names job types.

    One transaction-level advisory lock per schema serializes the claims
    that check limits (every claimer needs every limited key, so a lock
    per key would serialize them just the same, with a deadlock risk), so
    two processes can never both take the last slot or the last token.
    Slots are counted from the ``running`` rows (a claimed job holds its
    slot until its outcome is written or its expired lease is reaped);
    rate tokens come from the GCRA buckets in ``rate_buckets``. A job at
    a limit is skipped, not waited for: the jobs behind it are claimed.
    With `groups` (the (queue, group) pairs with ready jobs in the claim's
    queues; None when no ready job there has one) the candidates come in
    turns (`_TURNS`), else in strategy order.
    """
    types: dict[str, int] = dict(limits.get("job_types") or {})
    executors: dict[str, int] = dict(limits.get("executors") or {})
    rates: dict[str, dict[str, float]] = dict(limits.get("rates") or {})
    queue_caps: dict[str, int] = dict(limits.get("queues") or {})
    group_limit: int | None = limits.get("group")
    await conn.execute("SELECT pg_advisory_xact_lock(hashtext(%s))", [db.channel + ":limits"])
    cur = await conn.execute("SELECT " + NOW + " AS t")
    now = float((await cur.fetchone())["t"])  # type: ignore[index]
    running_t = dict.fromkeys(types, 0)
    running_e = dict.fromkeys(executors, 0)
    running_q = dict.fromkeys(queue_caps, 0)
    running_g: dict[str, int] = {}
    if types or executors or queue_caps:
        cur = await conn.execute(
            db.q(
                """SELECT type, options->>'executor' AS exe, queue, count(*)::int AS n
                FROM {s}.jobs WHERE status = 'running'
                  AND (type = ANY(%s) OR options->>'executor' = ANY(%s) OR queue = ANY(%s))
                GROUP BY 1, 2, 3"""
            ),
            [list(types), list(executors), list(queue_caps)],
        )
        for r in await cur.fetchall():
            if r["type"] in running_t:
                running_t[r["type"]] += r["n"]
            if r["exe"] in running_e:
                running_e[r["exe"]] += r["n"]
            if r["queue"] in running_q:
                running_q[r["queue"]] += r["n"]
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
        full_q = [q for q, lim in queue_caps.items() if running_q[q] >= lim]
        if rooms is not None:
            full_q += [q for q, room in rooms.items() if room <= 0]
        return {
            "full_t": sorted(full_t),
            "full_e": [e for e, lim in executors.items() if running_e[e] >= lim],
            "full_q": full_q,
            "full_g": [g for g, c in running_g.items() if group_limit and c >= group_limit],
        }

    named_queues = named["names"] is not None
    taken: list[str] = []
    seen: list[str] = []
    # Each pass excludes the keys at their limit; a row skipped in a pass
    # means a key filled up during it, so the passes end.
    while len(taken) < n:
        params: dict[str, Any] = {
            **named,
            **blocked(),
            "now": now,
            "seen": seen,
            "n": n - len(taken),
            "rooms": None if rooms is None else json.dumps(rooms),
        }
        if groups is not None:
            full_g = set(params["full_g"])
            open_pairs = [(q, g) for q, g in groups if g not in full_g]
            params["gq"] = [q for q, _ in open_pairs]
            params["gg"] = [g for _, g in open_pairs]
            params["per"] = _per_group(len({g for _, g in open_pairs}) + 1, n - len(taken))
            statement = _TURNS[named_queues][typed]
        else:
            statement = _UNGROUPED[typed]
        cur = await conn.execute(db.q(statement), params)
        candidates = await cur.fetchall()
        if not candidates:
            break
        for r in candidates:
            seen.append(r["job_id"])
            kind, exe, queue, group = r["type"], r["exe"], r["queue"], r["job_group"]
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
                if token_at(kind) > now + 1e-9:
                    continue
                tats[kind] = max(tats.get(kind, now), now) + 1.0 / rates[kind]["per_second"]
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
        cur = await conn.execute(db.q(_NEXT_DUE[typed]), {**named, **full})
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


async def refuse(
    db: Database, refusals: Sequence[tuple[str, str]], owner: str, refuser: str, bound: int
) -> list[str]:
    """Hand back claimed jobs `owner` cannot build, counting the refusal
    (`SharedStore.refuse`); returns the ids that reached `bound`, left
    running for `owner` to fail."""
    if not refusals:
        return []
    ids = [job_id for job_id, _ in refusals]
    errors = [error for _, error in refusals]

    async def body(conn: psycopg.AsyncConnection[Any]) -> list[str]:
        cur = await conn.execute(
            db.q(
                """UPDATE {s}.jobs j SET build_refusals = j.build_refusals + 1,
                    last_refusal = u.error,
                    refused_by = array_append(j.refused_by, %s::text),
                    status = CASE WHEN j.build_refusals + 1 >= %s
                        THEN j.status ELSE 'pending' END,
                    lease_owner = CASE WHEN j.build_refusals + 1 >= %s
                        THEN j.lease_owner END,
                    lease_expires = CASE WHEN j.build_refusals + 1 >= %s
                        THEN j.lease_expires END,
                    attempts = CASE WHEN j.build_refusals + 1 >= %s
                        THEN j.attempts ELSE j.attempts - 1 END
                FROM unnest(%s::text[], %s::text[]) AS u(job_id, error)
                WHERE j.job_id = u.job_id AND j.lease_owner = %s AND j.status = 'running'
                RETURNING j.job_id, j.status"""
            ),
            [refuser, bound, bound, bound, bound, ids, errors, owner],
        )
        done = await cur.fetchall()
        if any(r["status"] == "pending" for r in done):
            await db.notify_work(conn)
        return [r["job_id"] for r in done if r["status"] == "running"]

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
# The jobs are read by their ids (the primary key) and never scanned: left
# to its estimates, a planner without fresh statistics hashes the ready jobs
# instead, a scan of the table after every finish.
_WAITING = """
WITH d AS MATERIALIZED (
    SELECT job_id, upstream FROM {s}.dependencies WHERE upstream = ANY(%s)
)
SELECT j.job_id, j.trigger_rule, j.unmet, d.upstream
FROM d JOIN {s}.jobs j ON j.job_id = d.job_id
WHERE j.job_id = ANY(ARRAY(SELECT job_id FROM d)) AND j.status = 'pending' AND j.unmet > 0
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
