"""Job types for the shared-store tests (also loaded by the worker subprocesses).

Each ``record`` job writes one row per execution to the side table
``<schema>.executions`` (job id, process id), which is how the tests count
how often each job really ran. With a `dsn` of ``sqlite:PATH`` (the SQLite
runs of the shared-store tests) the side tables are in the SQLite file PATH.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import sqlite3
from typing import Any

import attrs
import psycopg

from jobsched import AsyncJob, Job, hookimpl
from jobsched.hookspecs import Register

# One connection per event loop (each test has its own loop).
_conns: dict[tuple[int, str], psycopg.AsyncConnection[Any]] = {}
_locks: dict[int, asyncio.Lock] = {}


def _sqlite_insert(path: str, sql: str, params: list[Any]) -> None:
    with contextlib.closing(sqlite3.connect(path, timeout=60, isolation_level=None)) as conn:
        conn.execute(sql, params)


async def _record(dsn: str, schema: str, table: str, columns: str, params: list[Any]) -> None:
    """One row into the side table `table`, in PostgreSQL or in a SQLite file."""
    marks = ", ".join(["?"] * len(params))
    if dsn.startswith("sqlite:"):
        sql = f"INSERT INTO {table} ({columns}) VALUES ({marks})"
        await asyncio.to_thread(_sqlite_insert, dsn.removeprefix("sqlite:"), sql, params)
        return
    conn = await _conn(dsn)
    await conn.execute(
        f'INSERT INTO "{schema}".{table} ({columns}) VALUES ({marks.replace("?", "%s")})',
        params,
    )


async def _conn(dsn: str) -> psycopg.AsyncConnection[Any]:
    loop = id(asyncio.get_running_loop())
    async with _locks.setdefault(loop, asyncio.Lock()):
        conn = _conns.get((loop, dsn))
        if conn is None or conn.closed:
            conn = await psycopg.AsyncConnection.connect(dsn, autocommit=True)
            _conns[loop, dsn] = conn
        return conn


@attrs.define(eq=False)
class Record(AsyncJob):
    """Record the execution, then hold for `seconds` (0: none)."""

    dsn: str
    schema: str
    tag: str = ""
    seconds: float = 0.0

    def __attrs_post_init__(self) -> None:
        Job.__init__(self, f"record-{self.tag}")

    async def run(self) -> Any:
        await _record(
            self.dsn,
            self.schema,
            "executions",
            "job_id, tag, pid",
            [self.job_id, self.tag, os.getpid()],
        )
        if self.seconds:
            await asyncio.sleep(self.seconds)
        return {"tag": self.tag}


@attrs.define(eq=False)
class Span(AsyncJob):
    """Write a 'start' row, hold for `seconds`, write an 'end' row (limits tests)."""

    dsn: str
    schema: str
    tag: str = ""
    seconds: float = 0.0

    def __attrs_post_init__(self) -> None:
        Job.__init__(self, f"span-{self.tag}")

    async def run(self) -> Any:
        await _record(self.dsn, self.schema, "spans", "job_id, event", [self.job_id, "start"])
        if self.seconds:
            await asyncio.sleep(self.seconds)
        await _record(self.dsn, self.schema, "spans", "job_id, event", [self.job_id, "end"])
        return {"tag": self.tag}


@attrs.define(eq=False)
class Fail(AsyncJob):
    """Always fails (to test retries and cascades)."""

    message: str = "boom"

    def __attrs_post_init__(self) -> None:
        Job.__init__(self, "fail")

    async def run(self) -> Any:
        raise RuntimeError(self.message)


@hookimpl
def jobsched_register_job_types(register: Register) -> None:
    register("record", Record)
    register("fail", Fail)
    register("span", Span)


def executions_ddl(schema: str) -> str:
    return (
        f'CREATE TABLE IF NOT EXISTS "{schema}".executions ('
        "n bigserial PRIMARY KEY, job_id text NOT NULL, tag text, pid int NOT NULL)"
    )


def spans_ddl(schema: str) -> str:
    return (
        f'CREATE TABLE IF NOT EXISTS "{schema}".spans ('
        "n bigserial PRIMARY KEY, job_id text NOT NULL, event text NOT NULL)"
    )


SQLITE_SIDE_TABLES = """
CREATE TABLE IF NOT EXISTS executions (
    n INTEGER PRIMARY KEY AUTOINCREMENT, job_id TEXT NOT NULL, tag TEXT, pid INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS spans (
    n INTEGER PRIMARY KEY AUTOINCREMENT, job_id TEXT NOT NULL, event TEXT NOT NULL);
"""
