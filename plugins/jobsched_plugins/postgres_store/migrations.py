"""The schema: the DDL of every version, and creating or migrating it.

The schema is created and migrated by jobsched itself (``schema_version``
table), one process at a time; a database whose schema is newer than this
code is refused.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from jobsched.store import SchemaTooNewError, StoreError

from .connection import Database, logger

if TYPE_CHECKING:
    import psycopg

#: The schema version this code writes; a database at a higher one is refused.
SCHEMA_VERSION = 19

# Each entry migrates from version i to i + 1. Never edit a released entry:
# append a new one, so every database walks the same path.
MIGRATIONS: list[list[str]] = [
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
    # 4: operating a deployment (issue 11): progress, result retention,
    # attempt history, paused schedules and a paused queue.
    [
        "ALTER TABLE {s}.jobs ADD COLUMN progress jsonb, ADD COLUMN result_expires float8",
        "ALTER TABLE {s}.schedules ADD COLUMN paused boolean NOT NULL DEFAULT false",
        # No foreign key: `finish` appends here on the hot path; `purge` deletes.
        """CREATE TABLE {s}.attempts (
            id bigserial PRIMARY KEY,
            job_id text NOT NULL,
            number integer NOT NULL,
            status text NOT NULL,
            error text,
            started_at float8,
            finished_at float8,
            worker text
        )""",
        "CREATE INDEX attempts_job ON {s}.attempts (job_id, id)",
        # A row means the queue is paused (claims take nothing).
        "CREATE TABLE {s}.paused (id integer PRIMARY KEY CHECK (id = 1))",
        # Throughput per minute and purges read finished jobs by time.
        "CREATE INDEX jobs_finished ON {s}.jobs (finished_at) WHERE finished_at IS NOT NULL",
        """CREATE INDEX jobs_result_expires ON {s}.jobs (result_expires)
            WHERE result_expires IS NOT NULL""",
    ],
    # 5: trigger rules kept with a job's dependencies (docs/tasks.md).
    [
        "ALTER TABLE {s}.jobs ADD COLUMN trigger_rule text NOT NULL DEFAULT 'all_success'",
    ],
    # 6 (issue 13): a leaner row to insert. Most jobs have no key and no unique
    # key, yet both indexes held an entry for each of them (a UNIQUE
    # constraint indexes NULLs too): partial indexes skip them, which cuts
    # the index entries an insert writes from four to two. Lookups by key
    # (`key = ANY(...)` implies NOT NULL) use them as before.
    [
        "ALTER TABLE {s}.jobs DROP CONSTRAINT jobs_key_key",
        "CREATE UNIQUE INDEX jobs_key ON {s}.jobs (key) WHERE key IS NOT NULL",
        "DROP INDEX {s}.jobs_unique",
        """CREATE UNIQUE INDEX jobs_unique ON {s}.jobs (unique_key)
            WHERE unique_key IS NOT NULL AND status IN ('pending', 'running', 'retry_wait')""",
    ],
    # 7: a job's own dependencies by its id (`get`'s depends_on, the purge's
    # cascade): the primary key (upstream, job_id) serves only the other way.
    [
        "CREATE INDEX dependencies_job ON {s}.dependencies (job_id)",
    ],
    # 8 (issue 21): the jobs per status, kept by triggers, so that the stats
    # (the dashboard reads them at every change) read a few rows instead of
    # counting the table. Each connection adds its changes to rows of its own
    # (its backend's pid): concurrent writers never wait on one counter.
    # Statement triggers: one claim or finish of a whole batch is one upsert.
    # `queries.stats` folds the rows of ended connections into shard 0.
    [
        """CREATE TABLE {s}.job_counts (
            status text NOT NULL,
            shard integer NOT NULL,
            n bigint NOT NULL,
            PRIMARY KEY (status, shard)
        )""",
        """CREATE FUNCTION {s}.count_inserted_jobs() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN
            INSERT INTO {s}.job_counts AS c (status, shard, n)
                SELECT status, pg_backend_pid(), count(*) FROM inserted
                GROUP BY status ORDER BY status
            ON CONFLICT (status, shard) DO UPDATE SET n = c.n + excluded.n;
            RETURN NULL;
        END $$""",
        """CREATE FUNCTION {s}.count_updated_jobs() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN
            INSERT INTO {s}.job_counts AS c (status, shard, n)
                SELECT status, pg_backend_pid(), sum(d) FROM (
                    SELECT status, 1 AS d FROM updated
                    UNION ALL SELECT status, -1 FROM replaced
                ) AS moved
                GROUP BY status HAVING sum(d) <> 0 ORDER BY status
            ON CONFLICT (status, shard) DO UPDATE SET n = c.n + excluded.n;
            RETURN NULL;
        END $$""",
        """CREATE FUNCTION {s}.count_deleted_jobs() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN
            INSERT INTO {s}.job_counts AS c (status, shard, n)
                SELECT status, pg_backend_pid(), -count(*) FROM deleted
                GROUP BY status ORDER BY status
            ON CONFLICT (status, shard) DO UPDATE SET n = c.n + excluded.n;
            RETURN NULL;
        END $$""",
        """CREATE TRIGGER jobs_counted_insert AFTER INSERT ON {s}.jobs
            REFERENCING NEW TABLE AS inserted
            FOR EACH STATEMENT EXECUTE FUNCTION {s}.count_inserted_jobs()""",
        """CREATE TRIGGER jobs_counted_update AFTER UPDATE ON {s}.jobs
            REFERENCING OLD TABLE AS replaced NEW TABLE AS updated
            FOR EACH STATEMENT EXECUTE FUNCTION {s}.count_updated_jobs()""",
        """CREATE TRIGGER jobs_counted_delete AFTER DELETE ON {s}.jobs
            REFERENCING OLD TABLE AS deleted
            FOR EACH STATEMENT EXECUTE FUNCTION {s}.count_deleted_jobs()""",
        # The job list, newest first (``ORDER BY seq DESC LIMIT``): a top-N
        # sort of the whole table without it, 0.8 s at 10^6 jobs.
        "CREATE INDEX jobs_seq ON {s}.jobs (seq)",
        # The jobs already there (the triggers lock the table until this commits).
        """INSERT INTO {s}.job_counts (status, shard, n)
            SELECT status, 0, count(*) FROM {s}.jobs GROUP BY status""",
    ],
    # 9 (issue 20): how many of a job's attempts ended by lease expiry; the
    # reaper fails a job at the bound instead of queueing it again.
    [
        "ALTER TABLE {s}.jobs ADD COLUMN lease_expiries integer NOT NULL DEFAULT 0",
    ],
    # 10 (issue 23): a failed attempt's traceback, on the job (its last
    # ended attempt's) and in its history.
    [
        "ALTER TABLE {s}.jobs ADD COLUMN last_traceback text",
        "ALTER TABLE {s}.attempts ADD COLUMN traceback text",
    ],
    # 11 (issue 23): the worker registry, a heartbeat row per worker
    # (`WorkersRole`); queues and job_types are JSON.
    [
        """CREATE TABLE {s}.workers (
            worker_id text PRIMARY KEY,
            host text NOT NULL,
            pid integer NOT NULL,
            queues jsonb NOT NULL,
            job_types jsonb NOT NULL,
            version text NOT NULL,
            started_at float8 NOT NULL,
            last_seen float8 NOT NULL,
            lost_after float8 NOT NULL,
            running integer NOT NULL,
            state text NOT NULL
        )""",
    ],
    # 12 (issue 23): workers that claimed a job and could not build it from
    # its stored arguments (another version of its type), the last one's
    # error, and who they were (a claim skips what its worker refused).
    [
        "ALTER TABLE {s}.jobs ADD COLUMN build_refusals integer NOT NULL DEFAULT 0",
        "ALTER TABLE {s}.jobs ADD COLUMN last_refusal text",
        "ALTER TABLE {s}.jobs ADD COLUMN refused_by text[] NOT NULL DEFAULT '{{}}'",
    ],
    # 13 (issue 23): named queues. Every job waits in a queue (the jobs
    # already stored: "default"); the ready index leads with it, so a claim
    # on one queue walks that queue's jobs in strategy order. A row of
    # `paused_queues` pauses one queue (`paused` still pauses them all).
    [
        "ALTER TABLE {s}.jobs ADD COLUMN queue text NOT NULL DEFAULT 'default'",
        "DROP INDEX {s}.jobs_ready",
        """CREATE INDEX jobs_ready ON {s}.jobs (queue, sort_key, seq)
            WHERE status IN ('pending', 'retry_wait') AND unmet = 0""",
        "CREATE TABLE {s}.paused_queues (queue text PRIMARY KEY)",
    ],
    # 14 (issue 23, tenant fairness): a job's group (the codec's ``group``
    # option, copied at insert) for the group limit and the claims' turns.
    # No job had one before: nothing to fill in. The ready jobs are split
    # between two indexes, both led by the queue (a claim walks its
    # worker's queues): `jobs_ready` keeps those without a group (every
    # job before this version: the plain claim walks it as before) and
    # `jobs_ready_group` those with one, by group, for the claims' turns;
    # a job is in one of them, so no job pays for a second ready index.
    [
        "ALTER TABLE {s}.jobs ADD COLUMN job_group text",
        "DROP INDEX {s}.jobs_ready",
        """CREATE INDEX jobs_ready ON {s}.jobs (queue, sort_key, seq)
            WHERE job_group IS NULL AND status IN ('pending', 'retry_wait') AND unmet = 0""",
        """CREATE INDEX jobs_ready_group ON {s}.jobs (queue, job_group, sort_key, seq)
            WHERE job_group IS NOT NULL AND status IN ('pending', 'retry_wait') AND unmet = 0""",
        # The group limit counts each group's running jobs.
        """CREATE INDEX jobs_running_group ON {s}.jobs (job_group)
            WHERE job_group IS NOT NULL AND status = 'running'""",
    ],
    # 15 (issue 24, operating workers): what an operator asked of a worker
    # (`WorkersRole.request_worker`: drain or stop), read back by the
    # worker's heartbeat.
    [
        "ALTER TABLE {s}.workers ADD COLUMN command text",
    ],
    # 16 (issue 24, the dashboard's schedules): a schedule's last runs, the
    # newest `limit` jobs it fired, read off an index by (schedule_id, seq)
    # instead of a scan of every job. Only fired jobs are in it.
    [
        """CREATE INDEX jobs_schedule ON {s}.jobs (schedule_id, seq)
            WHERE schedule_id IS NOT NULL""",
    ],
    # 17 (issue 24, the Overview): throughput history. Workers fold the
    # attempts they end in memory and add them on their lease-renewal
    # cadence, one statement per worker every few seconds (never a row per
    # finish), to a row per bucket at two steps (300 s kept a day, 3600 s a
    # week), with the counts of a log-scale duration histogram in d00..d20
    # (`jobsched.store.DURATION_BOUNDS`); reads never touch the jobs.
    [
        """CREATE TABLE {s}.history (
            step float8 NOT NULL,
            start float8 NOT NULL,
            queue text NOT NULL,
            type text NOT NULL,
            completed bigint NOT NULL DEFAULT 0,
            failed bigint NOT NULL DEFAULT 0,
            d00 bigint NOT NULL DEFAULT 0,
            d01 bigint NOT NULL DEFAULT 0,
            d02 bigint NOT NULL DEFAULT 0,
            d03 bigint NOT NULL DEFAULT 0,
            d04 bigint NOT NULL DEFAULT 0,
            d05 bigint NOT NULL DEFAULT 0,
            d06 bigint NOT NULL DEFAULT 0,
            d07 bigint NOT NULL DEFAULT 0,
            d08 bigint NOT NULL DEFAULT 0,
            d09 bigint NOT NULL DEFAULT 0,
            d10 bigint NOT NULL DEFAULT 0,
            d11 bigint NOT NULL DEFAULT 0,
            d12 bigint NOT NULL DEFAULT 0,
            d13 bigint NOT NULL DEFAULT 0,
            d14 bigint NOT NULL DEFAULT 0,
            d15 bigint NOT NULL DEFAULT 0,
            d16 bigint NOT NULL DEFAULT 0,
            d17 bigint NOT NULL DEFAULT 0,
            d18 bigint NOT NULL DEFAULT 0,
            d19 bigint NOT NULL DEFAULT 0,
            d20 bigint NOT NULL DEFAULT 0,
            PRIMARY KEY (step, start, queue, type)
        )""",
    ],
    # 18 (issue 25): the strategy key as bytes that sort as the key does
    # (`jobsched.store.pack_sort_key`). The ready indexes compared float8[]
    # arrays, element by element through the array type's machinery, on
    # every step of every insert's descent: about a third of a plain row's
    # cost at the server. A bytea compares by memcmp and its entry is a
    # third of the size. `sort_key(VARIADIC float8[])` is the same packing
    # in SQL, for producers in other languages (docs/postgres.md) and for
    # the stored rows, converted here in claim order's terms: the ready
    # indexes are rebuilt on the new keys by the ALTER.
    [
        """CREATE FUNCTION {s}.sort_key(VARIADIC key float8[]) RETURNS bytea
        LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE AS $$
            SELECT coalesce(string_agg(
                int8send(CASE WHEN b.bits < 0 THEN ~b.bits ELSE b.bits | (1::int8 << 63) END),
                ''::bytea ORDER BY e.n), ''::bytea)
            FROM unnest(key) WITH ORDINALITY AS e(x, n),
                LATERAL (SELECT ('x' || encode(float8send(e.x + 0.0), 'hex'))::bit(64)::int8)
                    AS b(bits)
        $$""",
        """ALTER TABLE {s}.jobs
            ALTER COLUMN sort_key TYPE bytea USING {s}.sort_key(VARIADIC sort_key)""",
    ],
    # 19 (issue 25, claims with groups): no index of the running jobs by
    # group. Every claim of a job with a group inserted an entry into it (a
    # text key under the database's collation, a few keys shared by
    # thousands of entries): about a quarter of such a claim's cost at the
    # server (8 of 36 µs per job, 4 queues x 100 groups). Its one reader,
    # the group limit's count under the limits' lock, reads the running
    # jobs as well through `jobs_leases` (every running job, as many as the
    # workers hold: what the index held, and the jobs without a group).
    [
        "DROP INDEX {s}.jobs_running_group",
    ],
]


def script(db: Database, since: int = 0) -> str:
    """The SQL `create_or_migrate` runs to bring the schema from version
    `since` (0: no schema yet) to `SCHEMA_VERSION`, as one transaction a DBA
    can read and apply (``jobsched store sql``); a store opened on the result
    finds nothing to migrate."""
    if isinstance(since, bool) or not isinstance(since, int) or not 0 <= since <= SCHEMA_VERSION:
        raise ValueError(
            f"--from {since!r}: a PostgreSQL schema version is 0 (none) to {SCHEMA_VERSION}"
        )
    from psycopg import sql

    def text(statement: str) -> str:
        return str(db.q(statement).as_string(None)).strip()

    lines = [
        f"-- jobsched PostgreSQL store, schema {db.schema}: version {since} to {SCHEMA_VERSION}.",
        f"-- Workers and clients are woken by NOTIFY on channel {db.channel}.",
        "BEGIN;",
        # As create_or_migrate: one migration at a time, the stores' included.
        f"SELECT pg_advisory_xact_lock(hashtext({sql.Literal(db.channel).as_string(None)}));",
    ]
    if since == 0:
        lines.append(text("CREATE SCHEMA IF NOT EXISTS {s}") + ";")
        lines.append(text("CREATE TABLE IF NOT EXISTS {s}.schema_version (version int)") + ";")
    for target in range(since + 1, SCHEMA_VERSION + 1):
        lines.append(f"-- version {target}")
        lines.extend(text(statement) + ";" for statement in MIGRATIONS[target - 1])
        lines.append(text(f"INSERT INTO {{s}}.schema_version (version) VALUES ({target})") + ";")
    lines.append("COMMIT;")
    return "\n".join(lines) + "\n"


async def create_or_migrate(db: Database) -> None:
    """Bring the store's schema to `SCHEMA_VERSION`, creating it if need be.

    Raises `StoreError` for a schema newer than this code, or for a schema of
    that name that holds tables but is not a jobsched store.
    """
    conn = await db.connect(autocommit=True)
    try:
        async with conn.transaction():
            # One process migrates at a time; the others wait, then see it done.
            await conn.execute("SELECT pg_advisory_xact_lock(hashtext(%s))", [db.channel])
            await _migrate(db, conn)
    finally:
        await conn.close()


async def check_readable(db: Database) -> None:
    """Refuse, naming it, a schema that is missing, foreign or too new; change nothing."""
    conn = await db.connect(autocommit=True)
    try:
        tables = await _tables(db, conn)
    finally:
        await conn.close()
    if not tables:
        raise StoreError(
            f"{db.url}: schema {db.schema!r} does not exist (no jobsched store there; "
            "check ?schema=NAME, or start a worker or a run to create it)"
        )
    if "schema_version" not in tables or "jobs" not in tables:
        raise StoreError(
            f"{db.url}: schema {db.schema!r} holds tables "
            f"({', '.join(sorted(tables))}) but is not a jobsched store"
        )
    refuse_newer(db, await schema_version(db))


async def schema_version(db: Database) -> int:
    """The version the database is at."""

    async def body(conn: psycopg.AsyncConnection[Any]) -> int:
        return await _version(db, conn)

    return await db.transaction(body)


async def _migrate(db: Database, conn: psycopg.AsyncConnection[Any]) -> None:
    tables = await _tables(db, conn)
    if tables and "schema_version" not in tables:
        raise StoreError(
            f"{db.url}: schema {db.schema!r} holds tables "
            f"({', '.join(sorted(tables))}) but is not a jobsched store; "
            "choose another with ?schema=NAME"
        )
    await conn.execute(db.q("CREATE SCHEMA IF NOT EXISTS {s}"))
    await conn.execute(db.q("CREATE TABLE IF NOT EXISTS {s}.schema_version (version int)"))
    version = await _version(db, conn)
    refuse_newer(db, version)
    for target in range(version + 1, SCHEMA_VERSION + 1):
        for statement in MIGRATIONS[target - 1]:
            await conn.execute(db.q(statement))
        await conn.execute(db.q("INSERT INTO {s}.schema_version (version) VALUES (%s)"), [target])
        logger.info("migrated postgres store", schema=db.schema, version=target)


async def _tables(db: Database, conn: psycopg.AsyncConnection[Any]) -> set[str]:
    cur = await conn.execute(
        "SELECT table_name FROM information_schema.tables WHERE table_schema = %s",
        [db.schema],
    )
    return {r["table_name"] for r in await cur.fetchall()}


async def _version(db: Database, conn: psycopg.AsyncConnection[Any]) -> int:
    cur = await conn.execute(db.q("SELECT max(version) AS v FROM {s}.schema_version"))
    row = await cur.fetchone()
    return int((row or {}).get("v") or 0)


def refuse_newer(db: Database, version: int) -> None:
    """`SchemaTooNewError` if `version` is newer than this code."""
    if version > SCHEMA_VERSION:
        raise SchemaTooNewError(
            f"{db.url}: schema {db.schema!r} is at version {version}, newer "
            f"than this jobsched understands ({SCHEMA_VERSION}); upgrade jobsched",
            version,
            SCHEMA_VERSION,
        )
