"""The shared-store tests run against every shared store: PostgreSQL, SQLite
and the in-memory fake.

`target` is parametrized over ``postgresql`` (a throw-away schema, skipped
without ``JOBSCHED_TEST_POSTGRES_DSN``), ``sqlite`` (an absolute file in
the test's tmp_path, opened in shared mode) and ``memory`` (``memory://NAME``,
a queue this process alone sees: tests that run workers in other processes
take `db_target`, the two databases). A `Target` gives the store URL,
the test jobs (which record each execution in a side table: in the schema
for PostgreSQL, in a second SQLite file for SQLite) and what they recorded.
"""

from __future__ import annotations

import contextlib
import sqlite3
import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest

import pg_jobs
from jobsched.store import StoreContext
from jobsched_plugins.memory_queue import SharedMemoryStore
from jobsched_plugins.postgres_store import PostgresStore
from jobsched_plugins.sqlite_store import SQLiteStore
from pg_support import base_dsn, with_query

DATABASES = ["postgresql", "sqlite"]
SHARED_STORES = [*DATABASES, "memory"]


class Target:
    """One shared store under test, and the side tables its test jobs write."""

    def __init__(self, kind: str, url: str, schema: str, side: str) -> None:
        self.kind = kind
        self.url = url
        #: PostgreSQL: the schema of the store and of the side tables.
        self.schema = schema
        #: Where the test jobs record: a libpq DSN, or ``sqlite:PATH``.
        self.side = side

    def with_lease(self, seconds: float) -> Target:
        if self.kind == "memory":
            url = f"{self.url}?lease={seconds}"
        elif self.kind == "postgresql":
            url = with_query(self.url, lease=str(seconds))
        else:
            url = f"{self.url}?lease={seconds}"
        return Target(self.kind, url, self.schema, self.side)

    def store(self) -> Any:
        """A store object for `url` (not open)."""
        if self.kind == "memory":
            return SharedMemoryStore(self.url)
        return PostgresStore(self.url) if self.kind == "postgresql" else SQLiteStore(self.url)

    async def open_store(self, owner: str = "probe") -> Any:
        """A store for `url`, opened in shared mode: another process's view."""
        store = self.store()
        await store.open(StoreContext(worker_id=owner, shared=True))
        return store

    def rec(self, tag: str, seconds: float = 0.0) -> pg_jobs.Record:
        return pg_jobs.Record(dsn=self.side, schema=self.schema, tag=tag, seconds=seconds)

    def span(self, tag: str, seconds: float = 0.0) -> pg_jobs.Span:
        job = pg_jobs.Span(dsn=self.side, schema=self.schema, tag=tag, seconds=seconds)
        job.timeout = None
        return job

    def executions(self) -> list[tuple[str, str, int]]:
        return self._select("SELECT job_id, tag, pid FROM {}executions ORDER BY n")

    def spans(self) -> list[tuple[str, str]]:
        return self._select("SELECT job_id, event FROM {}spans ORDER BY n")

    def _select(self, sql: str) -> list[Any]:
        if self.kind == "postgresql":
            with psycopg.connect(self.side) as conn:
                return [tuple(r) for r in conn.execute(sql.format(f'"{self.schema}".'))]
        path = self.side.removeprefix("sqlite:")
        with contextlib.closing(sqlite3.connect(path, timeout=60)) as conn:
            return [tuple(r) for r in conn.execute(sql.format(""))]

    async def expire_lease(self, store: Any, job_id: str) -> None:
        """Make `job_id`'s lease long expired (its owner died long ago)."""
        if self.kind == "memory":
            await store.call(lambda queue: queue.job(job_id, lease_expires=0))
        elif self.kind == "postgresql":
            async with store.connection() as conn:
                await conn.execute(
                    f'UPDATE "{self.schema}".jobs SET lease_expires = 0 WHERE job_id = %s',
                    [job_id],
                )
        else:
            await store.call(
                lambda conn: conn.execute(
                    "UPDATE jobsched_shared_jobs SET lease_expires = 0 WHERE job_id = ?",
                    (job_id,),
                )
            )

    async def steal_lease(self, store: Any, job_ids: list[str], owner: str) -> None:
        """Make `owner` hold the running jobs `job_ids` (their lease expired, another
        process reaped and claimed them), all in one step: nobody else can take them."""
        far = 4e9  # a lease that never runs out during a test
        if self.kind == "memory":

            def steal(queue: Any) -> None:
                for job_id in job_ids:
                    row = queue.jobs[job_id]
                    if row.status == "running":
                        queue.job(
                            job_id, lease_owner=owner, lease_expires=far, attempts=row.attempts + 1
                        )

            await store.call(steal)
        elif self.kind == "postgresql":
            async with store.connection() as conn:
                await conn.execute(
                    f'UPDATE "{self.schema}".jobs SET lease_owner = %s, lease_expires = %s, '
                    "attempts = attempts + 1 WHERE job_id = ANY(%s) AND status = 'running'",
                    [owner, far, job_ids],
                )
        else:
            marks = ", ".join("?" * len(job_ids))
            await store.call(
                lambda conn: conn.execute(
                    "UPDATE jobsched_shared_jobs SET lease_owner = ?, lease_expires = ?, "
                    f"attempts = attempts + 1 WHERE job_id IN ({marks}) AND status = 'running'",
                    (owner, far, *job_ids),
                )
            )


def _sqlite_target(tmp_path: Path) -> Iterator[Target]:
    side = tmp_path / "side.db"
    with contextlib.closing(sqlite3.connect(side)) as conn:
        conn.execute("PRAGMA journal_mode=WAL")
        conn.executescript(pg_jobs.SQLITE_SIDE_TABLES)
    yield Target("sqlite", f"sqlite:///{tmp_path}/jobs.db", "", f"sqlite:{side}")


def _memory_target(tmp_path: Path) -> Iterator[Target]:
    side = tmp_path / "side.db"
    with contextlib.closing(sqlite3.connect(side)) as conn:
        conn.execute("PRAGMA journal_mode=WAL")
        conn.executescript(pg_jobs.SQLITE_SIDE_TABLES)
    yield Target("memory", f"memory://{uuid.uuid4().hex}", "", f"sqlite:{side}")


@pytest.fixture(params=SHARED_STORES)
async def target(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Target]:
    """A fresh shared store of each kind, with the test jobs' side tables."""
    async for t in _target(request, tmp_path):
        yield t


@pytest.fixture(params=DATABASES)
async def db_target(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Target]:
    """`target` of the two databases only: for tests whose workers run in other processes."""
    async for t in _target(request, tmp_path):
        yield t


async def _target(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Target]:
    if request.param == "sqlite":
        for t in _sqlite_target(tmp_path):
            yield t
        return
    if request.param == "memory":
        for t in _memory_target(tmp_path):
            yield t
        return
    pg_schema: tuple[str, str] = request.getfixturevalue("pg_schema")
    url, schema = pg_schema
    store = PostgresStore(url)
    await store.open()
    async with store.connection() as conn:
        await conn.execute(pg_jobs.executions_ddl(schema))
        await conn.execute(pg_jobs.spans_ddl(schema))
    await store.close()
    yield Target("postgresql", url, schema, base_dsn())
