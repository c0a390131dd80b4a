"""The ``sqlite`` store: every job in one SQLite file (stdlib ``sqlite3``, WAL mode).

URL: ``sqlite:///relative/path.db`` or ``sqlite:////absolute/path.db`` (the
SQLAlchemy convention: the path follows the third slash), with options as a
query string:

- ``timeout=5``: seconds to wait for a lock another connection holds.
- ``synchronous=full`` (default): a commit survives power loss (an fsync per
  batch); ``synchronous=normal``: a commit survives a crash of the process
  but not of the machine (WAL mode's usual setting, faster).

Every SQLite call runs in one dedicated writer thread, never on the event
loop, and in order. Each `write` is one transaction. One scheduler owns a
file at a time (a lock file ``<path>.lock`` held with ``flock``, released by
the OS if the process dies); ``jobsched status`` reads without it.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import sqlite3
import urllib.parse
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

from jobsched import hookimpl
from jobsched.hookspecs import Register
from jobsched.store import JobRow, ScheduleRow, Snapshot, StoreContext, StoreError, check_snapshot

fcntl: Any
try:
    import fcntl
except ImportError:  # Windows: no ownership lock (documented)
    fcntl = None

T = TypeVar("T")

#: The schema this code writes; a file with a newer one is refused.
SCHEMA_VERSION = 1

_SCHEMA = """
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

_JOB_COLUMNS = (
    "job_id, key, type, args, options, depends_on, status, attempts, run_at, "
    "submitted_at, finished_at, seq, result, last_error, schedule_id"
)
# What never changes after submit (type, args, ...) is written by the insert
# and left alone by the update.
_UPSERT_JOB = f"""
INSERT INTO jobsched_jobs ({_JOB_COLUMNS}) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)
ON CONFLICT (job_id) DO UPDATE SET
    status = excluded.status, attempts = excluded.attempts, run_at = excluded.run_at,
    finished_at = excluded.finished_at, result = excluded.result,
    last_error = excluded.last_error, schedule_id = excluded.schedule_id
"""
# A key is unique among the jobs a scheduler knows, not forever: once a job
# has left the scheduler's history its key may be submitted again. The new job
# takes the key; the old row stays, as history, without it.
_RELEASE_KEY = "UPDATE jobsched_jobs SET key = NULL WHERE key = ? AND job_id <> ?"
_SCHEDULE_COLUMNS = (
    "schedule_id, key, template, trigger, next_run, allow_overlap, active, "
    "last_job_id, fired, skipped"
)
_UPSERT_SCHEDULE = f"""
INSERT INTO jobsched_schedules ({_SCHEDULE_COLUMNS}) VALUES (?,?,?,?,?,?,?,?,?,?)
ON CONFLICT (schedule_id) DO UPDATE SET
    next_run = excluded.next_run, allow_overlap = excluded.allow_overlap,
    active = excluded.active, last_job_id = excluded.last_job_id,
    fired = excluded.fired, skipped = excluded.skipped
"""


def parse_url(url: str) -> tuple[str, dict[str, str]]:
    """``(path, options)`` of a ``sqlite:///path?option=value`` URL."""
    parts = urllib.parse.urlsplit(url)
    if parts.scheme != "sqlite":
        raise ValueError(f"not a sqlite URL: {url!r}")
    if parts.netloc:
        raise ValueError(
            f"sqlite URL {url!r} has a host ({parts.netloc!r}); write sqlite:///relative.db "
            "or sqlite:////absolute/path.db"
        )
    path = urllib.parse.unquote(parts.path)[1:]  # the path follows the third slash
    if not path or path == ":memory:":
        raise ValueError(
            f"sqlite URL {url!r} needs a file path: sqlite:///jobs.db (relative) or "
            "sqlite:////var/lib/jobs.db (absolute)"
        )
    options = dict(urllib.parse.parse_qsl(parts.query, keep_blank_values=True))
    unknown = set(options) - {"timeout", "synchronous"}
    if unknown:
        raise ValueError(
            f"sqlite URL {url!r}: unknown option(s) {', '.join(sorted(unknown))} "
            "(known: timeout, synchronous)"
        )
    return path, options


class SQLiteStore:
    """Jobs and schedules in one SQLite file; see the module docstring."""

    durable = True
    shared = False

    def __init__(self, url: str) -> None:
        self.url = url
        self.path, options = parse_url(url)
        try:
            self.timeout = float(options.get("timeout", "5"))
        except ValueError:
            raise ValueError(f"{url}: timeout must be a number of seconds") from None
        self.synchronous = options.get("synchronous", "full").upper()
        if self.synchronous not in ("FULL", "NORMAL"):
            raise ValueError(f"{url}: synchronous must be 'full' or 'normal'")
        self._thread: ThreadPoolExecutor | None = None
        self._conn: sqlite3.Connection | None = None
        self._lock_fd: int | None = None

    def __repr__(self) -> str:
        return f"SQLiteStore({self.url!r})"

    # ── the Store interface ────────────────────────────────────────────
    async def open(self, context: StoreContext) -> Snapshot:
        if self._thread is not None:
            raise StoreError(f"{self.url}: already open")
        # One thread for every call: sqlite3 connections belong to the thread
        # that made them, and one thread keeps writes in order.
        self._thread = ThreadPoolExecutor(1, thread_name_prefix="jobsched-sqlite")
        try:
            return await self._call(self._open_sync, context)
        except BaseException:
            self._thread.shutdown(wait=False)
            self._thread = None
            raise

    async def write(self, batch: Sequence[JobRow | ScheduleRow]) -> None:
        await self._call(self._write_sync, batch)

    async def close(self) -> None:
        if self._thread is None:
            return
        try:
            await self._call(self._close_sync)
        finally:
            self._thread.shutdown(wait=False)
            self._thread = None

    async def _call(self, fn: Callable[..., T], *args: Any) -> T:
        if self._thread is None:
            raise StoreError(f"{self.url}: the store is not open")
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._thread, fn, *args)

    # ── in the writer thread ───────────────────────────────────────────
    def _problem(self, exc: sqlite3.Error) -> str:
        name = getattr(exc, "sqlite_errorname", None)
        return f"{exc} ({name})" if name else str(exc)

    def _open_sync(self, context: StoreContext) -> Snapshot:
        path = self.path
        existed = os.path.exists(path)
        if context.readonly:
            if not existed:
                raise StoreError(f"{self.url}: no such file: {path}{self._hint()}")
        else:
            folder = os.path.dirname(os.path.abspath(path))
            if not os.path.isdir(folder):
                raise StoreError(f"{self.url}: folder {folder} does not exist{self._hint()}")
            self._take_ownership()
        conn = None
        try:
            conn = self._connect(context.readonly)
            # Read and check everything before the first write, so that a file
            # jobsched refuses is left exactly as it was.
            tables = self._check_schema(conn, context)
            snapshot = self._load(conn) if "jobsched_meta" in tables else Snapshot()
            check_snapshot(self.url, snapshot)
            if not context.readonly:
                self._claim(conn, tables, context)
        except BaseException as exc:
            if conn is not None:
                conn.close()
            self._release_ownership()
            if not existed and not context.readonly:
                self._remove_new_file()
            if isinstance(exc, sqlite3.Error):
                raise self._open_error(exc, context) from exc
            raise
        self._conn = conn
        return snapshot

    def _hint(self) -> str:
        """For a relative path: how to write the absolute one (a common slip)."""
        if os.path.isabs(self.path):
            return ""
        return (
            f" ({self.path} is relative to the current folder {os.getcwd()}; for the "
            f"absolute path /{self.path} write sqlite:////{self.path}, with four slashes)"
        )

    def _connect(self, readonly: bool) -> sqlite3.Connection:
        if readonly:
            target = "file:" + urllib.parse.quote(os.path.abspath(self.path)) + "?mode=ro"
            return sqlite3.connect(target, uri=True, timeout=self.timeout, isolation_level=None)
        return sqlite3.connect(self.path, timeout=self.timeout, isolation_level=None)

    def _remove_new_file(self) -> None:
        """Undo the creation of a store file whose first open failed (say, a full disk)."""
        for suffix in ("", "-wal", "-shm", "-journal"):
            with contextlib.suppress(OSError):
                os.remove(self.path + suffix)

    def _open_error(self, exc: sqlite3.Error, context: StoreContext) -> StoreError:
        """The one-line error for an open that SQLite refused."""
        path, problem = self.path, self._problem(exc)
        name = getattr(exc, "sqlite_errorname", "") or ""
        unchanged = "jobsched left it unchanged"
        if name.startswith(("SQLITE_BUSY", "SQLITE_LOCKED")) or "locked" in str(exc):
            return StoreError(
                f"{self.url}: {path} is locked by another connection (waited "
                f"{self.timeout:g}s): {problem}; {unchanged}"
            )
        if name == "SQLITE_FULL":
            return StoreError(
                f"{self.url}: the disk holding {path} is full: {problem}; {unchanged}"
            )
        if name.startswith(("SQLITE_READONLY", "SQLITE_CANTOPEN", "SQLITE_PERM")):
            folder = os.path.dirname(os.path.abspath(path))
            verb = "read" if context.readonly else "open"
            return StoreError(
                f"{self.url}: cannot {verb} {path}: {problem}; SQLite needs to create "
                f"{os.path.basename(path)}-wal and -shm beside it: can this user write to "
                f"{path} and to its folder {folder}? {unchanged}"
            )
        if name.startswith("SQLITE_IOERR"):
            return StoreError(f"{self.url}: I/O error on {path}: {problem}; {unchanged}")
        if name.startswith(("SQLITE_NOTADB", "SQLITE_CORRUPT")):
            return StoreError(
                f"{self.url}: {path} is not a usable SQLite database: {problem}; {unchanged}"
            )
        return StoreError(f"{self.url}: cannot open {path}: {problem}; {unchanged}")

    def _check_schema(self, conn: sqlite3.Connection, context: StoreContext) -> set[str]:
        """The file's tables, once it is known to be a jobsched store this code can read."""
        tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")}
        if "jobsched_meta" not in tables:
            if tables:
                raise StoreError(
                    f"{self.url}: {self.path} is not a jobsched database (it has tables "
                    f"{', '.join(sorted(tables))}); jobsched left it unchanged"
                )
            if context.readonly:
                raise StoreError(f"{self.url}: {self.path} is empty, not a jobsched store")
            return tables
        row = conn.execute(
            "SELECT value FROM jobsched_meta WHERE name = 'schema_version'"
        ).fetchone()
        version = int(row[0]) if row is not None and str(row[0]).isdigit() else None
        if version is None:
            raise StoreError(
                f"{self.url}: {self.path} has no valid jobsched schema version; "
                "jobsched left it unchanged"
            )
        if version > SCHEMA_VERSION:
            raise StoreError(
                f"{self.url}: {self.path} was written by a newer jobsched (schema "
                f"version {version}; this one understands up to {SCHEMA_VERSION}); "
                "upgrade jobsched. jobsched left it unchanged"
            )
        return tables

    def _claim(self, conn: sqlite3.Connection, tables: set[str], context: StoreContext) -> None:
        """Make the checked file ours: WAL mode, the schema on a new file, who opened it."""
        mode = conn.execute("PRAGMA journal_mode=WAL").fetchone()[0]
        if str(mode).lower() != "wal":
            raise StoreError(f"{self.url}: cannot switch {self.path} to WAL mode (got {mode!r})")
        conn.execute(f"PRAGMA synchronous={self.synchronous}")
        # One write at open: it creates the schema on a new file, records who
        # opened it, and fails now (not at the first batch) if another
        # connection holds the write lock or the disk is full.
        conn.execute("BEGIN IMMEDIATE")
        try:
            if "jobsched_meta" not in tables:
                for statement in _SCHEMA.split(";"):
                    if statement.strip():
                        conn.execute(statement)
                conn.execute(
                    "INSERT INTO jobsched_meta VALUES ('schema_version', ?)", (str(SCHEMA_VERSION),)
                )
            conn.execute(
                "INSERT OR REPLACE INTO jobsched_meta VALUES ('opened_by', ?)", (context.worker_id,)
            )
            conn.execute("COMMIT")
        except BaseException:
            if conn.in_transaction:
                conn.execute("ROLLBACK")
            raise

    def _load(self, conn: sqlite3.Connection) -> Snapshot:
        jobs = []
        for r in conn.execute(f"SELECT {_JOB_COLUMNS} FROM jobsched_jobs ORDER BY seq"):
            try:
                depends_on = json.loads(r[5])
                if not isinstance(depends_on, list):
                    raise TypeError("not a list of job ids")
            except (TypeError, ValueError) as exc:
                raise StoreError(
                    f"{self.url}: job {r[0]} has a broken depends_on column {r[5]!r}: {exc}; "
                    "jobsched left it unchanged"
                ) from None
            jobs.append(
                JobRow(
                    job_id=r[0],
                    key=r[1],
                    type=r[2],
                    args=r[3],
                    options=r[4],
                    depends_on=tuple(depends_on),
                    status=r[6],
                    attempts=r[7],
                    run_at=r[8],
                    submitted_at=r[9],
                    finished_at=r[10],
                    seq=r[11],
                    result=r[12],
                    last_error=r[13],
                    schedule_id=r[14],
                )
            )
        schedules = [
            ScheduleRow(
                schedule_id=r[0],
                key=r[1],
                template=r[2],
                trigger=r[3],
                next_run=r[4],
                allow_overlap=bool(r[5]),
                active=bool(r[6]),
                last_job_id=r[7],
                fired=r[8],
                skipped=r[9],
            )
            for r in conn.execute(f"SELECT {_SCHEDULE_COLUMNS} FROM jobsched_schedules")
        ]
        return Snapshot(jobs=jobs, schedules=schedules)

    def _write_sync(self, batch: Sequence[JobRow | ScheduleRow]) -> None:
        conn = self._conn
        if conn is None:
            raise StoreError(f"{self.url}: the store is not open")
        jobs = []
        keyed = []
        schedules = []
        for r in batch:
            if type(r) is JobRow:
                if r.key is not None:
                    keyed.append((r.key, r.job_id))
                jobs.append(
                    (
                        r.job_id,
                        r.key,
                        r.type,
                        r.args,
                        r.options,
                        json.dumps(r.depends_on) if r.depends_on else "[]",
                        r.status,
                        r.attempts,
                        r.run_at,
                        r.submitted_at,
                        r.finished_at,
                        r.seq,
                        r.result,
                        r.last_error,
                        r.schedule_id,
                    )
                )
            else:
                s: ScheduleRow = r  # type: ignore[assignment]
                schedules.append(
                    (
                        s.schedule_id,
                        s.key,
                        s.template,
                        s.trigger,
                        s.next_run,
                        int(s.allow_overlap),
                        int(s.active),
                        s.last_job_id,
                        s.fired,
                        s.skipped,
                    )
                )
        try:
            conn.execute("BEGIN IMMEDIATE")
            try:
                if keyed:
                    conn.executemany(_RELEASE_KEY, keyed)
                if jobs:
                    conn.executemany(_UPSERT_JOB, jobs)
                if schedules:
                    conn.executemany(_UPSERT_SCHEDULE, schedules)
                conn.execute("COMMIT")
            except BaseException:
                # SQLite may already have rolled back (a full disk does).
                if conn.in_transaction:
                    conn.execute("ROLLBACK")
                raise
        except sqlite3.Error as exc:
            raise StoreError(
                f"{self.url}: could not write {len(batch)} rows to {self.path}: "
                f"{self._problem(exc)}; the file keeps its last committed state"
            ) from exc

    def _close_sync(self) -> None:
        conn, self._conn = self._conn, None
        try:
            if conn is not None:
                conn.close()
        finally:
            self._release_ownership()

    # ── one scheduler per file ─────────────────────────────────────────
    def _take_ownership(self) -> None:
        if fcntl is None:
            return
        lock_path = self.path + ".lock"
        try:
            fd = os.open(lock_path, os.O_RDWR | os.O_CREAT, 0o644)
        except OSError as exc:
            raise self._lock_error(lock_path, exc) from None
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            owner = os.read(fd, 64).decode(errors="replace").strip() or "unknown"
            os.close(fd)
            raise StoreError(
                f"{self.url}: {self.path} is in use by another jobsched process (pid {owner}, "
                f"lock file {lock_path}); stop it first, or use another store file"
            ) from None
        try:
            pid = str(os.getpid()).encode()
            os.pwrite(fd, pid, 0)
            os.ftruncate(fd, len(pid))
        except OSError as exc:
            os.close(fd)
            raise self._lock_error(lock_path, exc) from None
        self._lock_fd = fd

    def _lock_error(self, lock_path: str, exc: OSError) -> StoreError:
        return StoreError(
            f"{self.url}: cannot write the lock file {lock_path}: {exc.strerror or exc} "
            f"(every jobsched run on {self.path} needs it, in the same folder); "
            "jobsched left the store unchanged"
        )

    def _release_ownership(self) -> None:
        fd, self._lock_fd = self._lock_fd, None
        if fd is not None:
            with contextlib.suppress(OSError):
                os.close(fd)  # closing the descriptor releases the flock


@hookimpl
def jobsched_register_stores(register: Register) -> None:
    register("sqlite", SQLiteStore)
