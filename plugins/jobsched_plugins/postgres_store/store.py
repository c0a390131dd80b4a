"""The ``postgres`` store: several jobsched processes on several hosts share one queue.

``JobScheduler(store="postgresql://user@host/db")``. Jobs are rows (registered
type name + JSON arguments, never pickles). A process takes the next due jobs
with ``SELECT ... FOR UPDATE SKIP LOCKED`` in the strategy's order (the
strategy key is stored as a sortable ``float8[]``) and holds a lease on each,
renewed while the job runs. A process that dies stops renewing; once its
leases expire any process puts those jobs back (attempt count kept):
at-least-once. Dependencies are resolved in the database, in the same
transaction that finishes the upstream. Idle processes wake on
``LISTEN/NOTIFY``; a slow poll is only the safety net.

The schema is created and migrated by jobsched itself (``schema_version``
table); a database whose schema is newer than this code is refused. Every
object lives in one PostgreSQL schema, ``jobsched`` unless the URL says
``?schema=NAME``, so several independent queues can share one database.

Needs the ``postgres`` extra: ``pip install 'jobsched[postgres]'`` (psycopg 3).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import math
import re
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Sequence
from typing import Any, TypeVar
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

import structlog

from jobsched import (
    NewJob,
    Outcome,
    SharedJobRow,
    SharedScheduleRow,
    Snapshot,
    StoreContext,
    StoreError,
    hookimpl,
)
from jobsched.hookspecs import Register

try:
    import psycopg
    from psycopg import sql
    from psycopg.rows import dict_row
except ImportError:  # pragma: no cover - exercised only without the extra
    psycopg = None  # type: ignore[assignment]

logger = structlog.get_logger("jobsched.postgres")

T = TypeVar("T")

#: The schema version this code writes; a database at a higher one is refused.
SCHEMA_VERSION = 3

TERMINAL = ("completed", "failed", "timed_out", "cancelled")
WAITING = ("pending", "retry_wait")

_SCHEMA_NAME = re.compile(r"^[a-z_][a-z0-9_]{0,40}$")

# Each entry migrates from version i to i + 1. Never edit a released entry:
# append a new one, so every database walks the same path.
_MIGRATIONS: list[list[str]] = [
    [
        """CREATE TABLE {s}.jobs (
            job_id text PRIMARY KEY,
            key text UNIQUE,
            type text NOT NULL,
            args jsonb NOT NULL,
            options jsonb NOT NULL,
            status text NOT NULL,
            attempts integer NOT NULL DEFAULT 0,
            run_at float8 NOT NULL,
            submitted_at float8 NOT NULL,
            seq bigserial NOT NULL,
            sort_key float8[] NOT NULL,
            unmet integer NOT NULL DEFAULT 0,
            lease_owner text,
            lease_expires float8,
            cancel_requested boolean NOT NULL DEFAULT false,
            result jsonb,
            last_error text,
            schedule_id text,
            submitted_by text,
            started_at float8,
            finished_at float8
        )""",
        # The claim query walks this index in strategy order.
        """CREATE INDEX jobs_ready ON {s}.jobs (sort_key, seq)
            WHERE status IN ('pending', 'retry_wait') AND unmet = 0""",
        "CREATE INDEX jobs_leases ON {s}.jobs (lease_expires) WHERE status = 'running'",
        """CREATE TABLE {s}.dependencies (
            job_id text NOT NULL REFERENCES {s}.jobs ON DELETE CASCADE,
            upstream text NOT NULL REFERENCES {s}.jobs ON DELETE CASCADE,
            PRIMARY KEY (upstream, job_id)
        )""",
        """CREATE TABLE {s}.schedules (
            schedule_id text PRIMARY KEY,
            type text NOT NULL,
            args jsonb NOT NULL,
            options jsonb NOT NULL,
            trigger jsonb NOT NULL,
            next_run float8 NOT NULL,
            allow_overlap boolean NOT NULL DEFAULT false,
            active boolean NOT NULL DEFAULT true,
            last_job_id text,
            fired bigint NOT NULL DEFAULT 0,
            skipped bigint NOT NULL DEFAULT 0
        )""",
    ],
    # 2: unique jobs for the whole cluster: one unfinished job per unique_key.
    [
        "ALTER TABLE {s}.jobs ADD COLUMN unique_key text",
        """CREATE UNIQUE INDEX jobs_unique ON {s}.jobs (unique_key)
            WHERE status IN ('pending', 'running', 'retry_wait')""",
    ],
    # 3: concurrency and rate limits for the whole cluster (docs/limits.md).
    [
        "CREATE TABLE {s}.limits (id integer PRIMARY KEY CHECK (id = 1), data jsonb NOT NULL)",
        "CREATE TABLE {s}.rate_buckets (job_type text PRIMARY KEY, tat float8 NOT NULL)",
        "CREATE INDEX jobs_running_type ON {s}.jobs (type) WHERE status = 'running'",
    ],
]

_NOW = "extract(epoch FROM clock_timestamp())::float8"


def to_json(value: Any) -> str:
    """`value` as JSON; a value JSON cannot hold becomes its repr plus a note."""
    try:
        return json.dumps(value, allow_nan=False)
    except (TypeError, ValueError):
        return json.dumps({"repr": repr(value), "note": "result was not JSON-encodable"})


def redact(url: str) -> str:
    """The URL without its password, for messages and logs."""
    parts = urlsplit(url)
    if parts.password is None:
        return url
    netloc = parts.netloc.replace(f":{parts.password}@", ":***@")
    return urlunsplit(parts._replace(netloc=netloc))


def parse_url(url: str) -> tuple[str, str, dict[str, str]]:
    """Split a store URL into (libpq DSN, schema, jobsched options).

    jobsched's own query parameters (``schema``, ``lease``) are removed; the
    rest (``sslmode``, ...) are passed on to libpq.
    """
    parts = urlsplit(url)
    if parts.scheme not in ("postgresql", "postgres"):
        raise StoreError(f"{redact(url)}: not a postgresql:// URL")
    query = dict(parse_qsl(parts.query))
    schema = query.pop("schema", "jobsched")
    ours = {k: query.pop(k) for k in ("lease",) if k in query}
    if not _SCHEMA_NAME.match(schema):
        raise StoreError(
            f"{redact(url)}: schema {schema!r} must be a lower-case identifier "
            "(letters, digits, underscore; at most 41 characters)"
        )
    dsn = urlunsplit(parts._replace(scheme="postgresql", query=urlencode(query)))
    return dsn, schema, ours


class PostgresStore:
    """A shared, durable job store in PostgreSQL (see the module docstring).

    `url` is ``postgresql://user:password@host:port/db[?schema=NAME&lease=SECONDS]``.
    Every method is a coroutine run on the caller's event loop; a lost
    connection (server restart, ``pg_terminate_backend``) is re-opened and the
    operation retried. Every write is idempotent or guarded by the lease
    owner, so a retry after a commit whose answer was lost does no harm.
    """

    durable = True
    shared = True

    def __init__(self, url: str, *, lease_seconds: float | None = None) -> None:
        if psycopg is None:
            raise StoreError("the postgres store needs psycopg 3: pip install 'jobsched[postgres]'")
        #: The URL with its password masked (the store API's `url`, for messages).
        self.url = redact(url)
        self.dsn, self.schema, options = parse_url(url)
        lease = lease_seconds if lease_seconds is not None else float(options.get("lease", 30))
        if not lease > 0:
            raise StoreError(f"{redact(url)}: lease must be a positive number of seconds")
        self.lease_seconds = lease
        self.channel = f"jobsched_{self.schema}"
        self._conn: psycopg.AsyncConnection[Any] | None = None
        self._conn_lock = asyncio.Lock()
        self._listener: asyncio.Task[None] | None = None
        self._listening = asyncio.Event()
        self._work = asyncio.Event()
        self._finished = asyncio.Event()
        self._closed = False
        self.reconnects = 0
        #: The last claim found cluster limits (finishing a job then wakes claimers).
        self._limited = False
        #: Called with a job id when any process asks to cancel it (loop thread).
        self.on_cancel: Callable[[str], None] | None = None
        #: Called when new work may be due (loop thread).
        self.on_work: Callable[[], None] | None = None
        #: Called after the listener (re)connects: notifications may have been missed.
        self.on_resync: Callable[[], None] | None = None

    def __repr__(self) -> str:
        return f"PostgresStore({self.url!r})"

    # ── Connections ─────────────────────────────────────────────────
    def _q(self, text: str) -> sql.Composed:
        return sql.SQL(text).format(s=sql.Identifier(self.schema))

    async def _connect(self, **kwargs: Any) -> psycopg.AsyncConnection[Any]:
        try:
            return await psycopg.AsyncConnection.connect(self.dsn, row_factory=dict_row, **kwargs)
        except psycopg.OperationalError as exc:
            raise StoreError(f"cannot connect to {self.url}: {exc}".strip()) from exc

    async def _tx(self, body: Callable[[psycopg.AsyncConnection[Any]], Awaitable[T]]) -> T:
        """Run `body` in one transaction, reconnecting and retrying if the link drops."""
        delay = 0.05
        for attempt in range(30):
            if self._closed:
                raise StoreError(f"{self!r} is closed")
            async with self._conn_lock:
                try:
                    if self._conn is None or self._conn.closed:
                        self._conn = await psycopg.AsyncConnection.connect(
                            self.dsn, row_factory=dict_row
                        )
                    async with self._conn.transaction():
                        return await body(self._conn)
                except psycopg.OperationalError as exc:
                    # InterfaceError-like states leave the connection unusable: drop it.
                    if self._conn is not None:
                        with contextlib.suppress(Exception):
                            await self._conn.close()
                    self._conn = None
                    if attempt == 29:
                        raise StoreError(f"{self.url}: giving up: {exc}") from exc
                    self.reconnects += 1
                    logger.warning("postgres connection lost, reconnecting", error=str(exc))
            await asyncio.sleep(delay)
            delay = min(delay * 2, 2.0)
        raise AssertionError("unreachable")

    # ── Lifecycle ───────────────────────────────────────────────────
    @property
    def closed(self) -> bool:
        """True once `close` was called."""
        return self._closed

    async def open(self, context: StoreContext | None = None) -> Snapshot:
        """Create or migrate the schema, then start listening for notifications.

        Raises `StoreError` for a schema newer than this code, or for a schema
        of that name that holds tables but is not a jobsched store. Returns an
        empty `Snapshot`: in shared mode nothing is restored into a process;
        the jobs stay in the database and are claimed from there.

        With ``context.readonly`` (``jobsched status``) nothing is created,
        migrated or listened to: a schema that does not exist or is not a
        jobsched store is refused with a `StoreError` naming it.
        """
        if context is not None and context.readonly:
            await self._check_readable()
            return Snapshot()
        conn = await self._connect(autocommit=True)
        try:
            async with conn.transaction():
                # One process migrates at a time; the others wait, then see it done.
                await conn.execute("SELECT pg_advisory_xact_lock(hashtext(%s))", [self.channel])
                await self._migrate(conn)
        finally:
            await conn.close()
        self._listener = asyncio.create_task(self._listen(), name=f"{self.channel}-listen")
        await self._listening.wait()
        return Snapshot()

    async def _check_readable(self) -> None:
        conn = await self._connect(autocommit=True)
        try:
            cur = await conn.execute(
                "SELECT table_name FROM information_schema.tables WHERE table_schema = %s",
                [self.schema],
            )
            tables = {r["table_name"] for r in await cur.fetchall()}
        finally:
            await conn.close()
        if not tables:
            raise StoreError(
                f"{self.url}: schema {self.schema!r} does not exist (no jobsched store there; "
                "check ?schema=NAME, or start a worker or a run to create it)"
            )
        if "schema_version" not in tables or "jobs" not in tables:
            raise StoreError(
                f"{self.url}: schema {self.schema!r} holds tables "
                f"({', '.join(sorted(tables))}) but is not a jobsched store"
            )
        version = await self.schema_version()
        if version > SCHEMA_VERSION:
            raise StoreError(
                f"{self.url}: schema {self.schema!r} is at version {version}, newer "
                f"than this jobsched understands ({SCHEMA_VERSION}); upgrade jobsched"
            )

    async def _migrate(self, conn: psycopg.AsyncConnection[Any]) -> None:
        cur = await conn.execute(
            "SELECT table_name FROM information_schema.tables WHERE table_schema = %s",
            [self.schema],
        )
        tables = {r["table_name"] for r in await cur.fetchall()}
        if tables and "schema_version" not in tables:
            raise StoreError(
                f"{self.url}: schema {self.schema!r} holds tables "
                f"({', '.join(sorted(tables))}) but is not a jobsched store; "
                "choose another with ?schema=NAME"
            )
        await conn.execute(self._q("CREATE SCHEMA IF NOT EXISTS {s}"))
        await conn.execute(self._q("CREATE TABLE IF NOT EXISTS {s}.schema_version (version int)"))
        cur = await conn.execute(self._q("SELECT max(version) AS v FROM {s}.schema_version"))
        row = await cur.fetchone()
        version = (row or {}).get("v") or 0
        if version > SCHEMA_VERSION:
            raise StoreError(
                f"{self.url}: schema {self.schema!r} is at version {version}, newer "
                f"than this jobsched understands ({SCHEMA_VERSION}); upgrade jobsched"
            )
        for target in range(version + 1, SCHEMA_VERSION + 1):
            for statement in _MIGRATIONS[target - 1]:
                await conn.execute(self._q(statement))
            await conn.execute(
                self._q("INSERT INTO {s}.schema_version (version) VALUES (%s)"), [target]
            )
            logger.info("migrated postgres store", schema=self.schema, version=target)

    async def schema_version(self) -> int:
        """The version the database is at."""

        async def body(conn: psycopg.AsyncConnection[Any]) -> int:
            cur = await conn.execute(self._q("SELECT max(version) AS v FROM {s}.schema_version"))
            row = await cur.fetchone()
            return int((row or {}).get("v") or 0)

        return await self._tx(body)

    async def close(self) -> None:
        """Stop listening and close the connections."""
        self._closed = True
        if self._listener is not None:
            self._listener.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._listener
            self._listener = None
        async with self._conn_lock:
            if self._conn is not None:
                await self._conn.close()
                self._conn = None

    # ── Notifications ───────────────────────────────────────────────
    async def _listen(self) -> None:
        """Hold a dedicated LISTEN connection; re-open it whenever it drops."""
        delay = 0.05
        while not self._closed:
            conn: psycopg.AsyncConnection[Any] | None = None
            try:
                conn = await self._connect(autocommit=True)
                await conn.execute(sql.SQL("LISTEN {}").format(sql.Identifier(self.channel)))
                delay = 0.05
                # Anything could have happened while we were not listening.
                self._work.set()
                self._finished.set()
                if self.on_resync is not None and self._listening.is_set():
                    self.on_resync()
                self._listening.set()
                async for note in conn.notifies():
                    self._dispatch(note.payload)
            except (psycopg.OperationalError, StoreError) as exc:
                if self.closed:
                    return
                self.reconnects += 1
                logger.warning("postgres listener lost, reconnecting", error=str(exc))
                await asyncio.sleep(delay)
                delay = min(delay * 2, 2.0)
            finally:
                if conn is not None:
                    with contextlib.suppress(Exception):
                        await conn.close()

    def _dispatch(self, payload: str) -> None:
        if payload == "w":
            self._work.set()
            if self.on_work is not None:
                self.on_work()
        elif payload == "f":
            self._finished.set()
        elif payload.startswith("c:") and self.on_cancel is not None:
            self.on_cancel(payload[2:])

    async def wait(self, timeout: float) -> bool:
        """Wait until new work may be due (a NOTIFY) or `timeout`; True if notified."""
        return await _wait_event(self._work, timeout)

    async def wait_finished(self, timeout: float) -> bool:
        """Wait until some job may have finished, or `timeout`; True if notified."""
        return await _wait_event(self._finished, timeout)

    # ── Submitting ──────────────────────────────────────────────────
    async def insert(self, jobs: Sequence[NewJob]) -> list[str]:
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
                    self._q("SELECT job_id, status FROM {s}.jobs WHERE job_id = ANY(%s)"),
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
                    self._q(
                        """INSERT INTO {s}.jobs (job_id, key, type, args, options, status,
                            run_at, submitted_at, sort_key, unmet, last_error, schedule_id,
                            submitted_by, unique_key, finished_at)
                        VALUES (%s, %s, %s, %s::jsonb, %s::jsonb, %s, %s, %s, %s, %s, %s,
                            %s, %s, %s, CASE WHEN %s = 'cancelled' THEN """
                        + _NOW
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
                        self._q(
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
                        self._q(
                            "INSERT INTO {s}.dependencies (job_id, upstream) "
                            "SELECT %s, unnest(%s::text[]) ON CONFLICT DO NOTHING"
                        ),
                        [job.job_id, unmet],
                    )
            if ready:
                await self._notify(conn, "w")
            return ids

        return await self._tx(body)

    async def _notify(self, conn: psycopg.AsyncConnection[Any], payload: str) -> None:
        await conn.execute("SELECT pg_notify(%s, %s)", [self.channel, payload])

    # ── Claiming and leases ─────────────────────────────────────────
    async def claim(self, n: int, owner: str) -> tuple[list[SharedJobRow], float | None]:
        """Take up to `n` due jobs in strategy order with a lease for `owner`.

        Returns the rows (now ``running``, attempts counted) and, when fewer
        than `n` were due, the wall time the next waiting job becomes due
        (None if there is none), so the caller can sleep exactly that long.
        With cluster limits stored (`sync_limits`) the claim also enforces
        them, in the same transaction (see `_claim_limited`).
        """
        if n <= 0:
            return [], None

        async def body(
            conn: psycopg.AsyncConnection[Any],
        ) -> tuple[list[SharedJobRow], float | None]:
            # The plain claim claims nothing while limits are stored; whether
            # they are is asked only when it got fewer than `n` (no extra round
            # trip for a busy queue without limits).
            cur = await conn.execute(
                self._q(
                    "WITH now AS (SELECT " + _NOW + " AS t), "
                    """picked AS (
                        SELECT job_id FROM {s}.jobs
                        WHERE status IN ('pending', 'retry_wait') AND unmet = 0
                          AND run_at <= (SELECT t FROM now)
                          AND NOT EXISTS (SELECT 1 FROM {s}.limits)
                        ORDER BY sort_key, seq
                        LIMIT %s FOR UPDATE SKIP LOCKED)
                    UPDATE {s}.jobs j SET status = 'running', attempts = j.attempts + 1,
                        lease_owner = %s, lease_expires = (SELECT t FROM now) + %s,
                        started_at = (SELECT t FROM now)
                    FROM picked WHERE j.job_id = picked.job_id
                    RETURNING j.*"""
                ),
                [n, owner, self.lease_seconds],
            )
            rows = [SharedJobRow.from_record(r) for r in await cur.fetchall()]
            rows.sort(key=lambda r: (r.sort_key, r.seq))
            next_due = None
            self._limited = False
            if len(rows) < n:
                cur = await conn.execute(
                    self._q(
                        "SELECT min(run_at) AS t, "
                        "(SELECT data FROM {s}.limits WHERE id = 1) AS limits FROM {s}.jobs "
                        "WHERE status IN ('pending', 'retry_wait') AND unmet = 0"
                    )
                )
                rec = await cur.fetchone()
                if rec is not None and rec["limits"]:
                    self._limited = True
                    return await self._claim_limited(conn, n, owner, rec["limits"])
                next_due = rec["t"] if rec else None
            return rows, next_due

        return await self._tx(body)

    async def _claim_limited(
        self, conn: psycopg.AsyncConnection[Any], n: int, owner: str, limits: dict[str, Any]
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
        await conn.execute("SELECT pg_advisory_xact_lock(hashtext(%s))", [self.channel + ":limits"])
        cur = await conn.execute("SELECT " + _NOW + " AS t")
        now = float((await cur.fetchone())["t"])  # type: ignore[index]
        running_t = dict.fromkeys(types, 0)
        running_e = dict.fromkeys(executors, 0)
        if types or executors:
            cur = await conn.execute(
                self._q(
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
                self._q("SELECT job_type, tat FROM {s}.rate_buckets WHERE job_type = ANY(%s)"),
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
                self._q(
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
                self._q(
                    """UPDATE {s}.jobs SET status = 'running', attempts = attempts + 1,
                        lease_owner = %s, lease_expires = %s, started_at = %s
                    WHERE job_id = ANY(%s) RETURNING *"""
                ),
                [owner, now + self.lease_seconds, now, taken],
            )
            rows = [SharedJobRow.from_record(r) for r in await cur.fetchall()]
            rows.sort(key=lambda r: (r.sort_key, r.seq))
        if tats:
            await conn.execute(
                self._q(
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
                self._q(
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

    # ── Cluster limits ──────────────────────────────────────────────
    async def sync_limits(self, data: dict[str, Any] | None) -> dict[str, Any] | None:
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
                    self._q(
                        "INSERT INTO {s}.limits (id, data) VALUES (1, %s::jsonb) "
                        "ON CONFLICT (id) DO NOTHING"
                    ),
                    [json.dumps(data)],
                )
            cur = await conn.execute(self._q("SELECT data FROM {s}.limits WHERE id = 1"))
            rec = await cur.fetchone()
            stored: dict[str, Any] | None = rec["data"] if rec else None
            if data and stored != data:
                raise StoreError(
                    f"{self.url}: this process's limits {json.dumps(data, sort_keys=True)} "
                    f"differ from the limits the cluster runs with "
                    f"{json.dumps(stored, sort_keys=True)}; every process must use the same "
                    "limits (or none); change them for all with PostgresStore.set_limits"
                )
            return stored

        return await self._tx(body)

    async def set_limits(self, data: dict[str, Any] | None) -> None:
        """Replace the cluster's limits (None or empty: no limits)."""

        async def body(conn: psycopg.AsyncConnection[Any]) -> None:
            if data:
                await conn.execute(
                    self._q(
                        "INSERT INTO {s}.limits (id, data) VALUES (1, %s::jsonb) "
                        "ON CONFLICT (id) DO UPDATE SET data = excluded.data"
                    ),
                    [json.dumps(data)],
                )
            else:
                await conn.execute(self._q("DELETE FROM {s}.limits"))
            await self._notify(conn, "w")

        await self._tx(body)

    async def renew(self, job_ids: Iterable[str], owner: str) -> set[str]:
        """Extend `owner`'s leases on `job_ids`; returns the ids whose lease was lost."""
        ids = list(job_ids)
        if not ids:
            return set()

        async def body(conn: psycopg.AsyncConnection[Any]) -> set[str]:
            cur = await conn.execute(
                self._q(
                    "UPDATE {s}.jobs SET lease_expires = " + _NOW + " + %s "
                    "WHERE job_id = ANY(%s) AND lease_owner = %s AND status = 'running' "
                    "RETURNING job_id"
                ),
                [self.lease_seconds, ids, owner],
            )
            kept = {r["job_id"] for r in await cur.fetchall()}
            return set(ids) - kept

        return await self._tx(body)

    async def reap_expired(self) -> int:
        """Put jobs whose lease expired (their process died) back in the queue."""

        async def body(conn: psycopg.AsyncConnection[Any]) -> int:
            cur = await conn.execute(
                self._q(
                    """UPDATE {s}.jobs SET status = 'pending', lease_owner = NULL,
                        lease_expires = NULL
                    WHERE job_id IN (SELECT job_id FROM {s}.jobs
                        WHERE status = 'running' AND lease_expires < """
                    + _NOW
                    + """ FOR UPDATE SKIP LOCKED)
                    RETURNING job_id, lease_owner"""
                )
            )
            reaped = await cur.fetchall()
            if reaped:
                await self._notify(conn, "w")
                logger.warning("leases expired; jobs queued again", count=len(reaped))
            return len(reaped)

        return await self._tx(body)

    async def release(self, job_ids: Iterable[str], owner: str) -> int:
        """Give back claimed jobs that never started (their attempt is not counted)."""
        ids = list(job_ids)
        if not ids:
            return 0

        async def body(conn: psycopg.AsyncConnection[Any]) -> int:
            cur = await conn.execute(
                self._q(
                    """UPDATE {s}.jobs SET status = 'pending', lease_owner = NULL,
                        lease_expires = NULL, attempts = attempts - 1
                    WHERE job_id = ANY(%s) AND lease_owner = %s AND status = 'running'
                    RETURNING job_id"""
                ),
                [ids, owner],
            )
            count = len(await cur.fetchall())
            if count:
                await self._notify(conn, "w")
            return count

        return await self._tx(body)

    async def finish(self, outcomes: Sequence[Outcome], owner: str) -> list[str]:
        """Record attempts that ended, in one transaction; returns the ids written.

        Only jobs `owner` still holds are written (a job whose lease expired
        and was taken by another process belongs to that one now). Completed
        jobs release their dependents; failed, timed-out and cancelled ones
        cancel every job downstream, all in the same transaction.
        """
        if not outcomes:
            return []

        async def body(conn: psycopg.AsyncConnection[Any]) -> list[str]:
            cur = await conn.execute(
                self._q(
                    """UPDATE {s}.jobs j SET status = u.status, result = u.result::jsonb,
                        last_error = coalesce(u.error, j.last_error),
                        run_at = coalesce(u.run_at, j.run_at),
                        finished_at = CASE WHEN u.status = 'retry_wait' THEN NULL ELSE """
                    + _NOW
                    + """ END,
                        lease_owner = NULL, lease_expires = NULL, cancel_requested = false
                    FROM unnest(%s::text[], %s::text[], %s::text[], %s::text[], %s::float8[])
                        AS u(job_id, status, result, error, run_at)
                    WHERE j.job_id = u.job_id AND j.lease_owner = %s AND j.status = 'running'
                    RETURNING j.job_id, j.status"""
                ),
                [
                    [o.job_id for o in outcomes],
                    [o.status for o in outcomes],
                    [None if o.result is None else to_json(o.result) for o in outcomes],
                    [o.error for o in outcomes],
                    [o.run_at for o in outcomes],
                    owner,
                ],
            )
            written = await cur.fetchall()
            completed = [r["job_id"] for r in written if r["status"] == "completed"]
            broken = [r["job_id"] for r in written if r["status"] in TERMINAL[1:]]
            wake = any(r["status"] == "retry_wait" for r in written)
            if completed:
                cur = await conn.execute(
                    self._q(
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
                await self._cascade(conn, broken)
            # A finished job frees a limit's slot: wake the claimers it held back.
            if wake or (written and self._limited):
                await self._notify(conn, "w")
            if written:
                await self._notify(conn, "f")
            return [r["job_id"] for r in written]

        return await self._tx(body)

    async def _cascade(self, conn: psycopg.AsyncConnection[Any], upstreams: list[str]) -> None:
        """Cancel every unfinished job downstream of `upstreams` (they can never run)."""
        await conn.execute(
            self._q(
                """WITH RECURSIVE down(job_id, cause) AS (
                    SELECT d.job_id, d.upstream FROM {s}.dependencies d
                    WHERE d.upstream = ANY(%s)
                  UNION
                    SELECT d.job_id, d.upstream FROM {s}.dependencies d
                    JOIN down ON d.upstream = down.job_id)
                UPDATE {s}.jobs j
                SET status = 'cancelled', finished_at = """
                + _NOW
                + """, last_error = 'upstream ' || c.cause || ' '
                    || CASE WHEN c.cause = ANY(%s) THEN u.status ELSE 'cancelled' END
                FROM (SELECT DISTINCT ON (job_id) job_id, cause FROM down
                      ORDER BY job_id, cause) c
                JOIN {s}.jobs u ON u.job_id = c.cause
                WHERE j.job_id = c.job_id AND j.status IN ('pending', 'retry_wait')"""
            ),
            [upstreams, upstreams],
        )

    # ── Cancellation ────────────────────────────────────────────────
    async def request_cancel(self, job_id: str) -> bool:
        """Cancel a job from any process; False if unknown or already finished.

        A waiting job is cancelled here and now (and its dependents with it);
        a running one is flagged and its owner is notified, which cancels the
        attempt and then writes CANCELLED itself.
        """

        async def body(conn: psycopg.AsyncConnection[Any]) -> bool:
            cur = await conn.execute(
                self._q("SELECT status FROM {s}.jobs WHERE job_id = %s FOR UPDATE"), [job_id]
            )
            row = await cur.fetchone()
            if row is None or row["status"] in TERMINAL:
                return False
            if row["status"] == "running":
                await conn.execute(
                    self._q("UPDATE {s}.jobs SET cancel_requested = true WHERE job_id = %s"),
                    [job_id],
                )
                await self._notify(conn, f"c:{job_id}")
                return True
            await conn.execute(
                self._q(
                    "UPDATE {s}.jobs SET status = 'cancelled', last_error = 'cancelled', "
                    "finished_at = " + _NOW + " WHERE job_id = %s"
                ),
                [job_id],
            )
            await self._cascade(conn, [job_id])
            await self._notify(conn, "f")
            return True

        return await self._tx(body)

    async def cancel_requests(self, owner: str) -> list[str]:
        """Jobs `owner` runs that someone asked to cancel (the safety net for NOTIFY)."""

        async def body(conn: psycopg.AsyncConnection[Any]) -> list[str]:
            cur = await conn.execute(
                self._q(
                    "SELECT job_id FROM {s}.jobs WHERE lease_owner = %s "
                    "AND status = 'running' AND cancel_requested"
                ),
                [owner],
            )
            return [r["job_id"] for r in await cur.fetchall()]

        return await self._tx(body)

    # ── Schedules ───────────────────────────────────────────────────
    async def add_schedule(self, schedule: SharedScheduleRow) -> SharedScheduleRow:
        """Create the schedule unless it exists; returns the stored one.

        Several processes registering the same schedule id share one schedule.
        """

        async def body(conn: psycopg.AsyncConnection[Any]) -> SharedScheduleRow:
            await conn.execute(
                self._q(
                    """INSERT INTO {s}.schedules (schedule_id, type, args, options, trigger,
                        next_run, allow_overlap, active)
                    VALUES (%s, %s, %s::jsonb, %s::jsonb, %s::jsonb, %s, %s, true)
                    ON CONFLICT (schedule_id) DO UPDATE SET active = true"""
                ),
                [
                    schedule.schedule_id,
                    schedule.type,
                    to_json(schedule.args),
                    to_json(schedule.options),
                    to_json(schedule.trigger),
                    schedule.next_run,
                    schedule.allow_overlap,
                ],
            )
            return await self._get_schedule(conn, schedule.schedule_id)

        return await self._tx(body)

    async def _get_schedule(
        self, conn: psycopg.AsyncConnection[Any], schedule_id: str
    ) -> SharedScheduleRow:
        cur = await conn.execute(
            self._q("SELECT * FROM {s}.schedules WHERE schedule_id = %s"), [schedule_id]
        )
        rec = await cur.fetchone()
        if rec is None:
            raise StoreError(f"unknown schedule {schedule_id!r}")
        return SharedScheduleRow(**rec)

    async def get_schedule(self, schedule_id: str) -> SharedScheduleRow:
        """The schedule as stored now."""
        return await self._tx(lambda conn: self._get_schedule(conn, schedule_id))

    async def fire_schedule(
        self, schedule_id: str, expected_next: float, new_next: float, job: NewJob
    ) -> bool:
        """Fire the period due at `expected_next` exactly once across processes.

        A compare-and-set on ``next_run``: only the process that moves it from
        `expected_next` to `new_next` inserts `job` (in the same transaction);
        every other process sees False. Without ``allow_overlap`` the period is
        skipped (but still consumed) while the previous job is unfinished.
        """

        async def body(conn: psycopg.AsyncConnection[Any]) -> bool:
            cur = await conn.execute(
                self._q(
                    """UPDATE {s}.schedules SET next_run = %s
                    WHERE schedule_id = %s AND next_run = %s AND active
                    RETURNING allow_overlap, last_job_id"""
                ),
                [new_next, schedule_id, expected_next],
            )
            won = await cur.fetchone()
            if won is None:
                return False
            if not won["allow_overlap"] and won["last_job_id"] is not None:
                cur = await conn.execute(
                    self._q("SELECT status FROM {s}.jobs WHERE job_id = %s"),
                    [won["last_job_id"]],
                )
                previous = await cur.fetchone()
                if previous is not None and previous["status"] not in TERMINAL:
                    await conn.execute(
                        self._q(
                            "UPDATE {s}.schedules SET skipped = skipped + 1 WHERE schedule_id = %s"
                        ),
                        [schedule_id],
                    )
                    return True
            await conn.execute(
                self._q(
                    """INSERT INTO {s}.jobs (job_id, type, args, options, status, run_at,
                        submitted_at, sort_key, schedule_id, submitted_by)
                    VALUES (%s, %s, %s::jsonb, %s::jsonb, 'pending', %s, %s, %s, %s, %s)"""
                ),
                [
                    job.job_id,
                    job.type,
                    to_json(job.args),
                    to_json(job.options),
                    job.run_at,
                    job.submitted_at,
                    [float(x) for x in job.sort_key],
                    schedule_id,
                    job.submitted_by,
                ],
            )
            await conn.execute(
                self._q(
                    # A schedule with `times` ends with its last run, for everyone.
                    """UPDATE {s}.schedules SET fired = fired + 1, last_job_id = %s,
                        next_run = CASE WHEN trigger ? 'times'
                            AND fired + 1 >= (trigger->>'times')::bigint
                            THEN 'Infinity'::float8 ELSE next_run END
                    WHERE schedule_id = %s"""
                ),
                [job.job_id, schedule_id],
            )
            await self._notify(conn, "w")
            return True

        return await self._tx(body)

    async def deactivate_schedule(self, schedule_id: str) -> bool:
        """Stop a schedule for every process; False if unknown or already stopped."""

        async def body(conn: psycopg.AsyncConnection[Any]) -> bool:
            cur = await conn.execute(
                self._q(
                    "UPDATE {s}.schedules SET active = false "
                    "WHERE schedule_id = %s AND active RETURNING 1"
                ),
                [schedule_id],
            )
            return await cur.fetchone() is not None

        return await self._tx(body)

    # ── Reading ─────────────────────────────────────────────────────
    async def schedule_jobs(self, schedule_id: str) -> list[SharedJobRow]:
        """The jobs a schedule fired, in the order they were fired."""

        async def body(conn: psycopg.AsyncConnection[Any]) -> list[SharedJobRow]:
            cur = await conn.execute(
                self._q("SELECT * FROM {s}.jobs WHERE schedule_id = %s ORDER BY seq"),
                [schedule_id],
            )
            return [SharedJobRow.from_record(r) for r in await cur.fetchall()]

        return await self._tx(body)

    async def get(self, job_id: str) -> SharedJobRow | None:
        """One job, or None."""

        async def body(conn: psycopg.AsyncConnection[Any]) -> SharedJobRow | None:
            cur = await conn.execute(self._q("SELECT * FROM {s}.jobs WHERE job_id = %s"), [job_id])
            rec = await cur.fetchone()
            return None if rec is None else SharedJobRow.from_record(rec)

        return await self._tx(body)

    async def jobs(self, job_ids: Sequence[str] | None = None) -> list[SharedJobRow]:
        """Every job (or those with `job_ids`), in submit order."""

        async def body(conn: psycopg.AsyncConnection[Any]) -> list[SharedJobRow]:
            if job_ids is None:
                cur = await conn.execute(self._q("SELECT * FROM {s}.jobs ORDER BY seq"))
            else:
                cur = await conn.execute(
                    self._q("SELECT * FROM {s}.jobs WHERE job_id = ANY(%s) ORDER BY seq"),
                    [list(job_ids)],
                )
            return [SharedJobRow.from_record(r) for r in await cur.fetchall()]

        return await self._tx(body)

    async def counts(self) -> dict[str, int]:
        """How many jobs are in each status."""

        async def body(conn: psycopg.AsyncConnection[Any]) -> dict[str, int]:
            cur = await conn.execute(
                self._q("SELECT status, count(*)::int AS n FROM {s}.jobs GROUP BY status")
            )
            return {r["status"]: r["n"] for r in await cur.fetchall()}

        return await self._tx(body)

    async def unfinished(self, job_ids: Sequence[str]) -> int:
        """How many of `job_ids` are not terminal yet."""

        async def body(conn: psycopg.AsyncConnection[Any]) -> int:
            cur = await conn.execute(
                self._q(
                    "SELECT count(*)::int AS n FROM {s}.jobs WHERE job_id = ANY(%s) "
                    "AND status NOT IN ('completed', 'failed', 'timed_out', 'cancelled')"
                ),
                [list(job_ids)],
            )
            rec = await cur.fetchone()
            return int(rec["n"]) if rec else 0

        return await self._tx(body)

    @contextlib.asynccontextmanager
    async def connection(self) -> AsyncIterator[psycopg.AsyncConnection[Any]]:
        """A transaction on the store's connection (for tools and tests)."""
        async with self._conn_lock:
            if self._conn is None or self._conn.closed:
                self._conn = await self._connect()
            async with self._conn.transaction():
                yield self._conn


async def _wait_event(event: asyncio.Event, timeout: float) -> bool:
    if not event.is_set() and timeout > 0 and math.isfinite(timeout):
        with contextlib.suppress(asyncio.TimeoutError):
            await asyncio.wait_for(event.wait(), timeout)
    elif not event.is_set() and timeout > 0:
        await event.wait()
    notified = event.is_set()
    event.clear()
    return notified


@hookimpl
def jobsched_register_stores(register: Register) -> None:
    register("postgresql", PostgresStore)
    register("postgres", PostgresStore)
