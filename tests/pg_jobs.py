"""Job types for the shared-store tests (also loaded by the worker subprocesses).

Each ``record`` job writes one row per execution to the side table
``<schema>.executions`` (job id, process id), which is how the tests count
how often each job really ran.
"""

from __future__ import annotations

import asyncio
import os
from typing import Any

import attrs
import psycopg

from jobsched import AsyncJob, Job, hookimpl
from jobsched.hookspecs import Register

# One connection per event loop (each test has its own loop).
_conns: dict[tuple[int, str], psycopg.AsyncConnection[Any]] = {}
_locks: dict[int, asyncio.Lock] = {}


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
        conn = await _conn(self.dsn)
        await conn.execute(
            f'INSERT INTO "{self.schema}".executions (job_id, tag, pid) VALUES (%s, %s, %s)',
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
        conn = await _conn(self.dsn)
        sql = f'INSERT INTO "{self.schema}".spans (job_id, event) VALUES (%s, %s)'
        await conn.execute(sql, [self.job_id, "start"])
        if self.seconds:
            await asyncio.sleep(self.seconds)
        await conn.execute(sql, [self.job_id, "end"])
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
