"""The schema of both modes, and which mode a file is in.

A store file is in one mode for its whole life, written in ``jobsched_meta``
when jobsched creates it:

- single-owner (``schema_version`` 1, no ``mode`` row): the journal tables
  ``jobsched_jobs`` and ``jobsched_schedules``, written by one process
  (`SINGLE_OWNER_MIGRATIONS` take it further; the versions it skips are
  the shared mode's);
- shared (``schema_version`` 2, ``mode = 'shared'``): the ``jobsched_shared_*``
  tables, claimed from by several processes. Version 2 makes a jobsched
  from before the shared mode refuse such a file ("newer jobsched") instead
  of misreading it.

Every tool reads a file of either mode (journal_reads serves the
single-owner tables as the shared ones are read). A single owner refuses a
shared file, and a worker a single-owner one, naming both: the tables
differ, and each would overwrite what the other is doing. A scheduler left
to choose (`peek_mode`) follows the file's mode instead.
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
import urllib.parse

from jobsched.store import SchemaTooNewError, StoreError

#: The highest schema version this code understands.
SCHEMA_VERSION = 16
SINGLE_OWNER_VERSION = 1
#: The version `SHARED_SCHEMA` creates; `SHARED_MIGRATIONS` take it further.
SHARED_VERSION = 2

SINGLE_OWNER = "single-owner"
SHARED = "shared"

SINGLE_OWNER_SCHEMA = """
CREATE TABLE jobsched_meta (
    name TEXT PRIMARY KEY,
    value TEXT NOT NULL
) WITHOUT ROWID;
CREATE TABLE jobsched_jobs (
    job_id TEXT PRIMARY KEY,
    key TEXT,
    type TEXT NOT NULL,
    args TEXT NOT NULL,
    options TEXT NOT NULL,
    depends_on TEXT NOT NULL,
    status TEXT NOT NULL,
    attempts INTEGER NOT NULL,
    run_at REAL NOT NULL,
    submitted_at REAL NOT NULL,
    finished_at REAL,
    seq INTEGER NOT NULL,
    result TEXT,
    last_error TEXT,
    schedule_id TEXT
) WITHOUT ROWID;
CREATE TABLE jobsched_schedules (
    schedule_id TEXT PRIMARY KEY,
    key TEXT UNIQUE,
    template TEXT NOT NULL,
    trigger TEXT NOT NULL,
    next_run REAL NOT NULL,
    allow_overlap INTEGER NOT NULL,
    active INTEGER NOT NULL,
    last_job_id TEXT,
    fired INTEGER NOT NULL,
    skipped INTEGER NOT NULL
) WITHOUT ROWID;
-- Partial: most jobs have no key, and an index entry per NULL costs every insert.
CREATE UNIQUE INDEX jobsched_jobs_key ON jobsched_jobs (key) WHERE key IS NOT NULL;
"""

# One unfinished job per unique_key. Only jobs that have one are in it: an
# entry per job without one cost a third of an insert, and a claim and a
# finish each moved it (`lean_unique_index` brings older files to it).
UNIQUE_INDEX = """CREATE UNIQUE INDEX jobsched_shared_unique ON jobsched_shared_jobs (unique_key)
    WHERE unique_key IS NOT NULL AND status IN ('pending', 'running', 'retry_wait')"""

# The PostgreSQL store's tables (postgres_store/migrations.py), in SQLite:
# JSON as TEXT, the strategy key as an order-preserving BLOB
# (jobsched.store.pack_sort_key), submit order as the rowid.
SHARED_SCHEMA = f"""
CREATE TABLE jobsched_meta (
    name TEXT PRIMARY KEY,
    value TEXT NOT NULL
) WITHOUT ROWID;
CREATE TABLE jobsched_shared_jobs (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    job_id TEXT NOT NULL UNIQUE,
    key TEXT UNIQUE,
    type TEXT NOT NULL,
    args TEXT NOT NULL,
    options TEXT NOT NULL,
    status TEXT NOT NULL,
    attempts INTEGER NOT NULL DEFAULT 0,
    run_at REAL NOT NULL,
    submitted_at REAL NOT NULL,
    sort_key BLOB NOT NULL,
    unmet INTEGER NOT NULL DEFAULT 0,
    lease_owner TEXT,
    lease_expires REAL,
    cancel_requested INTEGER NOT NULL DEFAULT 0,
    result TEXT,
    last_error TEXT,
    schedule_id TEXT,
    submitted_by TEXT,
    started_at REAL,
    finished_at REAL,
    unique_key TEXT
);
-- The claim walks this index in strategy order.
CREATE INDEX jobsched_shared_ready ON jobsched_shared_jobs (sort_key, seq)
    WHERE status IN ('pending', 'retry_wait') AND unmet = 0;
CREATE INDEX jobsched_shared_leases ON jobsched_shared_jobs (lease_expires)
    WHERE status = 'running';
CREATE INDEX jobsched_shared_schedule ON jobsched_shared_jobs (schedule_id)
    WHERE schedule_id IS NOT NULL;
-- One unfinished job per unique_key, for every process.
{UNIQUE_INDEX};
CREATE TABLE jobsched_shared_dependencies (
    job_id TEXT NOT NULL,
    upstream TEXT NOT NULL,
    PRIMARY KEY (upstream, job_id)
) WITHOUT ROWID;
CREATE TABLE jobsched_shared_schedules (
    schedule_id TEXT PRIMARY KEY,
    type TEXT NOT NULL,
    args TEXT NOT NULL,
    options TEXT NOT NULL,
    trigger TEXT NOT NULL,
    next_run REAL NOT NULL,
    allow_overlap INTEGER NOT NULL DEFAULT 0,
    active INTEGER NOT NULL DEFAULT 1,
    last_job_id TEXT,
    fired INTEGER NOT NULL DEFAULT 0,
    skipped INTEGER NOT NULL DEFAULT 0
) WITHOUT ROWID;
CREATE TABLE jobsched_shared_limits (
    id INTEGER PRIMARY KEY CHECK (id = 1),
    data TEXT NOT NULL
);
CREATE TABLE jobsched_shared_rate_buckets (
    job_type TEXT PRIMARY KEY,
    tat REAL NOT NULL
) WITHOUT ROWID;
"""

# Each entry migrates a shared file to its version (from the one before).
# Never edit a released entry: append a new one, so every file walks the
# same path (a new file is created at SHARED_VERSION and migrated too).
SHARED_MIGRATIONS: dict[int, list[str]] = {
    # 3: operating a deployment (issue 11): progress, result retention,
    # attempt history, paused schedules and a paused queue.
    3: [
        "ALTER TABLE jobsched_shared_jobs ADD COLUMN progress TEXT",
        "ALTER TABLE jobsched_shared_jobs ADD COLUMN result_expires REAL",
        "ALTER TABLE jobsched_shared_schedules ADD COLUMN paused INTEGER NOT NULL DEFAULT 0",
        """CREATE TABLE jobsched_shared_attempts (
            id INTEGER PRIMARY KEY AUTOINCREMENT,
            job_id TEXT NOT NULL,
            number INTEGER NOT NULL,
            status TEXT NOT NULL,
            error TEXT,
            started_at REAL,
            finished_at REAL,
            worker TEXT
        )""",
        "CREATE INDEX jobsched_shared_attempts_job ON jobsched_shared_attempts (job_id, id)",
        # A row means the queue is paused (claims take nothing).
        "CREATE TABLE jobsched_shared_paused (id INTEGER PRIMARY KEY CHECK (id = 1))",
        # Throughput per minute and purges read finished jobs by time.
        """CREATE INDEX jobsched_shared_finished ON jobsched_shared_jobs (finished_at)
            WHERE finished_at IS NOT NULL""",
        """CREATE INDEX jobsched_shared_expires ON jobsched_shared_jobs (result_expires)
            WHERE result_expires IS NOT NULL""",
    ],
    # 4: trigger rules kept with a job's dependencies (docs/tasks.md).
    4: [
        "ALTER TABLE jobsched_shared_jobs ADD COLUMN trigger_rule TEXT NOT NULL "
        "DEFAULT 'all_success'",
    ],
    # 5: a job's own dependencies by its id (`get`'s depends_on, purges): the
    # primary key (upstream, job_id) serves only the other direction.
    5: [
        "CREATE INDEX jobsched_shared_dependencies_job ON jobsched_shared_dependencies (job_id)",
    ],
    # 7 (issue 21): the jobs per status, kept, so that the stats (the
    # dashboard reads them at every change) read a few rows instead of
    # counting the table. One writer at a time: one row per status. Triggers
    # count status changes and deletes; inserts count themselves
    # (`queries.add_counts`): any trigger on INSERT, even one that does
    # nothing, made each inserted row cost about 10 µs more (measured).
    7: [
        """CREATE TABLE jobsched_shared_counts (
            status TEXT PRIMARY KEY,
            n INTEGER NOT NULL
        ) WITHOUT ROWID""",
        """INSERT INTO jobsched_shared_counts (status, n)
            SELECT status, count(*) FROM jobsched_shared_jobs GROUP BY status""",
        """CREATE TRIGGER jobsched_shared_counted_update AFTER UPDATE OF status
            ON jobsched_shared_jobs WHEN OLD.status IS NOT NEW.status
        BEGIN
            UPDATE jobsched_shared_counts SET n = n - 1 WHERE status = OLD.status;
            INSERT INTO jobsched_shared_counts (status, n) VALUES (NEW.status, 1)
                ON CONFLICT (status) DO UPDATE SET n = n + 1;
        END""",
        """CREATE TRIGGER jobsched_shared_counted_delete AFTER DELETE ON jobsched_shared_jobs
        BEGIN
            UPDATE jobsched_shared_counts SET n = n - 1 WHERE status = OLD.status;
        END""",
    ],
    # 8 (issue 20): how many of a job's attempts ended by lease expiry; the
    # reaper fails a job at the bound instead of queueing it again.
    8: [
        "ALTER TABLE jobsched_shared_jobs ADD COLUMN lease_expiries INTEGER NOT NULL DEFAULT 0",
    ],
    # 9 (issue 23): a failed attempt's traceback, on the job (its last
    # failed attempt's) and in its history.
    9: [
        "ALTER TABLE jobsched_shared_jobs ADD COLUMN last_traceback TEXT",
        "ALTER TABLE jobsched_shared_attempts ADD COLUMN traceback TEXT",
    ],
    # 10 (issue 23): the worker registry, a heartbeat row per worker
    # (`WorkersRole`); queues and job_types are JSON text.
    10: [
        """CREATE TABLE jobsched_shared_workers (
            worker_id TEXT PRIMARY KEY,
            host TEXT NOT NULL,
            pid INTEGER NOT NULL,
            queues TEXT NOT NULL,
            job_types TEXT NOT NULL,
            version TEXT NOT NULL,
            started_at REAL NOT NULL,
            last_seen REAL NOT NULL,
            lost_after REAL NOT NULL,
            running INTEGER NOT NULL,
            state TEXT NOT NULL
        ) WITHOUT ROWID""",
    ],
    # 11 (issue 23): workers that claimed a job and could not build it from
    # its stored arguments (another version of its type), the last one's
    # error, and who they were (a JSON list: a claim skips what its worker
    # refused).
    11: [
        "ALTER TABLE jobsched_shared_jobs ADD COLUMN build_refusals INTEGER NOT NULL DEFAULT 0",
        "ALTER TABLE jobsched_shared_jobs ADD COLUMN last_refusal TEXT",
        "ALTER TABLE jobsched_shared_jobs ADD COLUMN refused_by TEXT",
    ],
    # 12 (issue 23): named queues. Every job waits in a queue (the jobs
    # already stored: "default"); the ready index leads with it, so a claim
    # on one queue walks that queue's jobs in strategy order. A row of
    # `paused_queues` pauses one queue (`paused` still pauses them all).
    12: [
        "ALTER TABLE jobsched_shared_jobs ADD COLUMN queue TEXT NOT NULL DEFAULT 'default'",
        "DROP INDEX jobsched_shared_ready",
        """CREATE INDEX jobsched_shared_ready ON jobsched_shared_jobs (queue, sort_key, seq)
            WHERE status IN ('pending', 'retry_wait') AND unmet = 0""",
        """CREATE TABLE jobsched_shared_paused_queues (
            queue TEXT PRIMARY KEY
        ) WITHOUT ROWID""",
    ],
    # 13 (issue 23, tenant fairness): a job's group (the codec's ``group``
    # option, copied at insert) for the group limit and the claims' turns.
    # The ready jobs are split between two indexes, as in PostgreSQL, both
    # led by the queue: those without a group (every job before: the plain
    # claim walks it as before) and those with one, by group.
    13: [
        "ALTER TABLE jobsched_shared_jobs ADD COLUMN job_group TEXT",
        "DROP INDEX jobsched_shared_ready",
        """CREATE INDEX jobsched_shared_ready ON jobsched_shared_jobs (queue, sort_key, seq)
            WHERE job_group IS NULL AND status IN ('pending', 'retry_wait') AND unmet = 0""",
        """CREATE INDEX jobsched_shared_ready_group
            ON jobsched_shared_jobs (queue, job_group, sort_key, seq)
            WHERE job_group IS NOT NULL AND status IN ('pending', 'retry_wait') AND unmet = 0""",
    ],
    # 14 (issue 24, operating workers): what an operator asked of a worker
    # (`WorkersRole.request_worker`: drain or stop), read back by the
    # worker's heartbeat.
    14: [
        "ALTER TABLE jobsched_shared_workers ADD COLUMN command TEXT",
    ],
    # 15 (issue 24, the Overview): throughput history. Workers add the
    # attempts they ended, folded per 5 minutes, queue and job type, to a
    # row per bucket at two steps (300 s kept a day, 3600 s a week), with
    # the counts of a log-scale duration histogram in d00..d20
    # (`jobsched.store.DURATION_BOUNDS`); reads never touch the jobs.
    15: [
        """CREATE TABLE jobsched_shared_history (
            step REAL NOT NULL,
            start REAL NOT NULL,
            queue TEXT NOT NULL,
            type TEXT NOT NULL,
            completed INTEGER NOT NULL DEFAULT 0,
            failed INTEGER NOT NULL DEFAULT 0,
            d00 INTEGER NOT NULL DEFAULT 0,
            d01 INTEGER NOT NULL DEFAULT 0,
            d02 INTEGER NOT NULL DEFAULT 0,
            d03 INTEGER NOT NULL DEFAULT 0,
            d04 INTEGER NOT NULL DEFAULT 0,
            d05 INTEGER NOT NULL DEFAULT 0,
            d06 INTEGER NOT NULL DEFAULT 0,
            d07 INTEGER NOT NULL DEFAULT 0,
            d08 INTEGER NOT NULL DEFAULT 0,
            d09 INTEGER NOT NULL DEFAULT 0,
            d10 INTEGER NOT NULL DEFAULT 0,
            d11 INTEGER NOT NULL DEFAULT 0,
            d12 INTEGER NOT NULL DEFAULT 0,
            d13 INTEGER NOT NULL DEFAULT 0,
            d14 INTEGER NOT NULL DEFAULT 0,
            d15 INTEGER NOT NULL DEFAULT 0,
            d16 INTEGER NOT NULL DEFAULT 0,
            d17 INTEGER NOT NULL DEFAULT 0,
            d18 INTEGER NOT NULL DEFAULT 0,
            d19 INTEGER NOT NULL DEFAULT 0,
            d20 INTEGER NOT NULL DEFAULT 0,
            PRIMARY KEY (step, start, queue, type)
        ) WITHOUT ROWID""",
    ],
    # 16 (issue 25, shared SQLite's throughput): the status counters'
    # trigger leaves out a job's two commonest moves, pending to running (a
    # claim) and running to completed (a finish), which the claim and the
    # finish count once per batch (`queries.add_counts`): the trigger's two
    # statements ran for every row, about 1.5 µs of each job's claim and
    # finish together.
    16: [
        "DROP TRIGGER jobsched_shared_counted_update",
        """CREATE TRIGGER jobsched_shared_counted_update AFTER UPDATE OF status
            ON jobsched_shared_jobs WHEN OLD.status IS NOT NEW.status
            AND NOT (OLD.status = 'pending' AND NEW.status = 'running')
            AND NOT (OLD.status = 'running' AND NEW.status = 'completed')
        BEGIN
            UPDATE jobsched_shared_counts SET n = n - 1 WHERE status = OLD.status;
            INSERT INTO jobsched_shared_counts (status, n) VALUES (NEW.status, 1)
                ON CONFLICT (status) DO UPDATE SET n = n + 1;
        END""",
    ],
}

# The same for a single-owner file: a file at version 1 walks the versions
# listed here (none for 2, 3, 5, 7, 8 and 10 to 16: a journaled job keeps
# its queue and group in its options, and its owner registers no worker).
SINGLE_OWNER_MIGRATIONS: dict[int, list[str]] = {
    # 4: a restored job waiting for its upstreams keeps its trigger rule.
    4: [
        "ALTER TABLE jobsched_jobs ADD COLUMN trigger_rule TEXT NOT NULL DEFAULT 'all_success'",
    ],
    # 6: an operator's pause survives a restart (shared files have had it since 3).
    6: [
        "ALTER TABLE jobsched_schedules ADD COLUMN paused INTEGER NOT NULL DEFAULT 0",
    ],
    # 9 (issue 23): the traceback of a job's last failed attempt.
    9: [
        "ALTER TABLE jobsched_jobs ADD COLUMN last_traceback TEXT",
    ],
}


def lean_unique_index(conn: sqlite3.Connection) -> None:
    """Give a shared file the `UNIQUE_INDEX` of this version (in the caller's
    write transaction). The same rule as the index files had before, so no
    schema version: a jobsched of either kind reads a file with either."""
    r = conn.execute(
        "SELECT sql FROM sqlite_master WHERE type = 'index' AND name = 'jobsched_shared_unique'"
    ).fetchone()
    if r is not None and "unique_key IS NOT NULL" not in r[0]:
        conn.execute("DROP INDEX jobsched_shared_unique")
        conn.execute(UNIQUE_INDEX)


def migrate_shared(conn: sqlite3.Connection) -> None:
    """Bring a shared file to `SCHEMA_VERSION` (inside the caller's write transaction)."""
    lean_unique_index(conn)
    _migrate(conn, SHARED_MIGRATIONS, SHARED_VERSION)


def migrate_single_owner(conn: sqlite3.Connection) -> None:
    """Bring a single-owner file to `SCHEMA_VERSION` (inside the caller's write transaction)."""
    _migrate(conn, SINGLE_OWNER_MIGRATIONS, SINGLE_OWNER_VERSION)


def _migrate(conn: sqlite3.Connection, steps: dict[int, list[str]], first: int) -> None:
    raw = conn.execute("SELECT value FROM jobsched_meta WHERE name = 'schema_version'").fetchone()
    version = int(raw[0]) if raw is not None else first
    for target in range(version + 1, SCHEMA_VERSION + 1):
        for statement in steps.get(target, ()):
            conn.execute(statement)
        conn.execute(
            "UPDATE jobsched_meta SET value = ? WHERE name = 'schema_version'", (str(target),)
        )


_USED_BY = {
    SINGLE_OWNER: "single-owner store (jobsched run --store, JobScheduler(store=...))",
    SHARED: "shared store (jobsched worker, Client, JobScheduler(store=..., shared=True))",
}


def file_mode(
    conn: sqlite3.Connection, url: str, path: str, *, readonly: bool
) -> tuple[str | None, set[str]]:
    """``(mode, tables)`` of a file this code can read; mode None for a new, empty file."""
    tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")}
    if "jobsched_meta" not in tables:
        tables.discard("sqlite_sequence")
        if tables:
            raise StoreError(
                f"{url}: {path} is not a jobsched database (it has tables "
                f"{', '.join(sorted(tables))}); jobsched left it unchanged"
            )
        if readonly:
            raise StoreError(f"{url}: {path} is empty, not a jobsched store")
        return None, tables
    meta = dict(conn.execute("SELECT name, value FROM jobsched_meta").fetchall())
    raw = meta.get("schema_version")
    version = int(raw) if raw is not None and str(raw).isdigit() else None
    if version is None:
        raise StoreError(
            f"{url}: {path} has no valid jobsched schema version; jobsched left it unchanged"
        )
    if version > SCHEMA_VERSION:
        raise SchemaTooNewError(
            f"{url}: {path} was written by a newer jobsched (schema "
            f"version {version}; this one understands up to {SCHEMA_VERSION}); "
            "upgrade jobsched. jobsched left it unchanged",
            version,
            SCHEMA_VERSION,
        )
    return (SHARED if meta.get("mode") == SHARED else SINGLE_OWNER), tables


def peek_mode(path: str) -> str | None:
    """The mode of the jobsched file at `path`, or None (no such file, not
    one, or unreadable now: opening it says why). Reads without locking or
    creating anything."""
    if not os.path.isfile(path):
        return None
    target = "file:" + urllib.parse.quote(os.path.abspath(path)) + "?mode=ro"
    try:
        with contextlib.closing(sqlite3.connect(target, uri=True, timeout=1.0)) as conn:
            r = conn.execute("SELECT value FROM jobsched_meta WHERE name = 'mode'").fetchone()
            if r is None:
                conn.execute("SELECT 1 FROM jobsched_meta").fetchone()
    except sqlite3.Error:
        return None
    return SHARED if r is not None and r[0] == SHARED else SINGLE_OWNER


def refuse_other_mode(url: str, path: str, found: str | None, wanted: str) -> None:
    """A `StoreError` naming both modes if the file is in the other one."""
    if found is None or found == wanted:
        return
    raise StoreError(
        f"{url}: {path} is a {_USED_BY[found]}; the {wanted} mode cannot open it "
        f"(its tables and its owners differ). Open it as a {found} store, or give the "
        f"{wanted} mode another file. jobsched left it unchanged"
    )


def create(conn: sqlite3.Connection, mode: str) -> None:
    """Create the schema of `mode` in a new file (inside the caller's transaction)."""
    schema, version = (
        (SHARED_SCHEMA, SHARED_VERSION) if mode == SHARED else (SINGLE_OWNER_SCHEMA, 1)
    )
    for statement in schema.split(";"):
        if statement.strip():
            conn.execute(statement)
    conn.execute("INSERT INTO jobsched_meta VALUES ('schema_version', ?)", (str(version),))
    if mode == SHARED:
        conn.execute("INSERT INTO jobsched_meta VALUES ('mode', ?)", (SHARED,))


def shared_script(since: int = 0) -> str:
    """The SQL that brings a shared file from version `since` (0: a new,
    empty file) to `SCHEMA_VERSION`, as `create` and `migrate_shared` do,
    for ``sqlite3 FILE < script`` (``jobsched store sql --store sqlite:///...``)."""
    valid = since == 0 or (
        not isinstance(since, bool)
        and isinstance(since, int)
        and SHARED_VERSION <= since <= SCHEMA_VERSION
    )
    if not valid:
        raise ValueError(
            f"--from {since!r}: a shared SQLite file's schema version is 0 (a new file) "
            f"or {SHARED_VERSION} to {SCHEMA_VERSION}"
        )
    lines = [
        f"-- jobsched shared SQLite store: version {since} to {SCHEMA_VERSION}.",
        "PRAGMA journal_mode=WAL;",
        "BEGIN IMMEDIATE;",
    ]
    if since == 0:
        lines.extend(s.strip() + ";" for s in SHARED_SCHEMA.split(";") if s.strip())
        lines.append(f"INSERT INTO jobsched_meta VALUES ('schema_version', '{SHARED_VERSION}');")
        lines.append(f"INSERT INTO jobsched_meta VALUES ('mode', '{SHARED}');")
    for target in range(max(since, SHARED_VERSION) + 1, SCHEMA_VERSION + 1):
        lines.append(f"-- version {target}")
        lines.extend(statement.strip() + ";" for statement in SHARED_MIGRATIONS.get(target, ()))
        lines.append(f"UPDATE jobsched_meta SET value = '{target}' WHERE name = 'schema_version';")
    lines.append("COMMIT;")
    return "\n".join(lines) + "\n"
