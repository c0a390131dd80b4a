"""Concurrency and rate limits that hold for the whole cluster (issue 6, item 3).

Two schedulers share one PostgreSQL schema (two processes as far as the store
can tell: separate connections, separate leases). Every wait synchronizes on
database state; nothing depends on how long anything takes.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import psycopg
import pytest

import pg_jobs
from jobsched import JobScheduler, PluginManager, StoreError
from jobsched_plugins.postgres_store import PostgresStore
from pg_support import base_dsn


def plugins() -> PluginManager:
    return PluginManager([pg_jobs], autoload=False)


@pytest.fixture
async def url(pg_schema: tuple[str, str]) -> AsyncIterator[str]:
    store = PostgresStore(pg_schema[0])
    await store.open()
    async with store.connection() as conn:
        await conn.execute(pg_jobs.executions_ddl(pg_schema[1]))
        await conn.execute(pg_jobs.spans_ddl(pg_schema[1]))
    await store.close()
    yield pg_schema[0]


async def until(what: str, check: Callable[[], Awaitable[Any]], timeout: float = 60.0) -> Any:
    """Poll `check` until it returns something truthy; fail after `timeout` seconds."""
    give_up = time.monotonic() + timeout
    while True:
        value = await check()
        if value:
            return value
        if time.monotonic() > give_up:
            pytest.fail(f"timed out waiting for {what}; last value {value!r}")
        await asyncio.sleep(0.02)


def span(schema: str, tag: str, seconds: float = 0.0) -> pg_jobs.Span:
    job = pg_jobs.Span(dsn=base_dsn(), schema=schema, tag=tag, seconds=seconds)
    job.timeout = None
    return job


def rec(schema: str, tag: str) -> pg_jobs.Record:
    return pg_jobs.Record(dsn=base_dsn(), schema=schema, tag=tag)


def spans(schema: str) -> list[tuple[str, str]]:
    with psycopg.connect(base_dsn()) as conn:
        return conn.execute(f'SELECT job_id, event FROM "{schema}".spans ORDER BY n').fetchall()


def most_at_once(events: list[tuple[str, str]]) -> int:
    running: set[str] = set()
    most = 0
    for job_id, event in events:
        if event == "start":
            running.add(job_id)
            most = max(most, len(running))
        else:
            running.discard(job_id)
    return most


def statuses(store: PostgresStore, ids: list[str]) -> Callable[[], Awaitable[list[str]]]:
    async def check() -> list[str]:
        return [r.status for r in await store.jobs(ids)]

    return check


@pytest.mark.parametrize(
    "limits",
    [{"job_types": {"span": 1}}, {"executors": {"async": 1}}],
    ids=["job-type", "executor"],
)
async def test_a_concurrency_limit_holds_across_processes(
    url: str, pg_schema: tuple[str, str], limits: dict[str, Any]
) -> None:
    schema = pg_schema[1]
    a = JobScheduler(store=url, num_workers=3, plugins=plugins(), limits=limits)
    b = JobScheduler(store=url, num_workers=3, plugins=plugins(), limits=limits)
    async with a, b:
        ids = [(a if i % 2 else b).submit(span(schema, f"s{i}", 0.01)) for i in range(8)]
        await a.join()
        await b.join()
        rows = await a.backend.store.jobs(ids)  # type: ignore[attr-defined]
    assert [r.status for r in rows] == ["completed"] * 8
    events = spans(schema)
    assert len(events) == 16
    assert most_at_once(events) == 1, events


async def test_jobs_held_back_by_a_limit_do_not_block_the_others(
    url: str, pg_schema: tuple[str, str]
) -> None:
    schema = pg_schema[1]
    limits = {"job_types": {"span": 1}}
    a = JobScheduler(store=url, num_workers=2, plugins=plugins(), limits=limits)
    b = JobScheduler(store=url, num_workers=2, plugins=plugins(), limits=limits)
    async with a, b:
        store = a.backend.store  # type: ignore[attr-defined]
        first = a.submit(span(schema, "long", 3600))
        second = b.submit(span(schema, "waits", 3600))
        records = [(a if i % 2 else b).submit(rec(schema, f"r{i}")) for i in range(6)]
        await until(
            "the unlimited jobs to finish",
            lambda: _all(statuses(store, records), "completed"),
        )
        await until("the first span to start", lambda: _has_start(schema))
        assert [r.status for r in await store.jobs([second])] == ["pending"]
        assert [e for e in spans(schema) if e[1] == "start"] == [(first, "start")]
        # Cancelling the running one frees the slot: the held-back one starts.
        a.cancel(first)
        await until("the second span to start", lambda: _started(schema, second))
        a.cancel(second)
        await a.join()
        await b.join()
        rows = {r.job_id: r.status for r in await store.jobs([first, second])}
    assert rows == {first: "cancelled", second: "cancelled"}
    # Cancelled mid-run, neither wrote an end: the second started only after the first ended.
    assert spans(schema) == [(first, "start"), (second, "start")]


async def _all(check: Callable[[], Awaitable[list[str]]], status: str) -> bool:
    return all(s == status for s in await check())


async def _has_start(schema: str) -> bool:
    return any(e == "start" for _, e in spans(schema))


async def _started(schema: str, job_id: str) -> bool:
    return (job_id, "start") in spans(schema)


async def test_a_rate_limit_holds_across_processes(url: str, pg_schema: tuple[str, str]) -> None:
    schema = pg_schema[1]
    limits = {"rates": {"record": {"rate": "1/h", "burst": 2}}}
    a = JobScheduler(store=url, num_workers=2, plugins=plugins(), limits=limits)
    b = JobScheduler(store=url, num_workers=2, plugins=plugins(), limits=limits)
    probe = PostgresStore(url)
    await probe.open()
    try:
        async with a, b:
            ids = [(a if i % 2 else b).submit(rec(schema, f"r{i}")) for i in range(5)]
            await a.flush()
            await b.flush()

            async def two_done() -> bool:
                got = await statuses(probe, ids)()
                return got.count("completed") == 2

            await until("the burst of two to run", two_done)
            # A third claimer finds no token either, and is told when the next one is due.
            rows, next_due = await probe.claim(10, "probe")
            assert rows == []
            assert next_due is not None and next_due > time.time() + 3000
            got = await statuses(probe, ids)()
            assert sorted(got) == ["completed"] * 2 + ["pending"] * 3
            for job_id in ids:
                a.cancel(job_id)
            await a.join()
            await b.join()
    finally:
        await probe.close()
    with psycopg.connect(base_dsn()) as conn:
        ran = conn.execute(f'SELECT count(*) FROM "{schema}".executions').fetchone()
    assert ran == (2,)


async def test_every_process_must_run_with_the_same_limits(url: str) -> None:
    a = JobScheduler(store=url, plugins=plugins(), limits={"job_types": {"span": 1}})
    b = JobScheduler(store=url, plugins=plugins(), limits={"job_types": {"span": 2}})
    c = JobScheduler(store=url, plugins=plugins())  # no limits: follows the cluster's
    async with a:
        with pytest.raises(StoreError, match="differ from the limits the cluster runs with"):
            await b.start()
        async with c:
            store = c.backend.store  # type: ignore[attr-defined]
            assert await store.sync_limits(None) == {
                "executors": {},
                "job_types": {"span": 1},
                "rates": {},
            }
            await store.set_limits(None)  # the explicit way to change them
            assert await store.sync_limits(None) is None


async def test_a_store_without_cluster_limits_refuses_limits() -> None:
    from jobsched._kernel import Kernel
    from jobsched.backends import SharedBackend

    class Plain:
        shared = durable = True

        async def open(self, context: Any) -> None:
            return None

        async def close(self) -> None:
            self.closed = True

    # A kernel on the shared backend, the store's missing calls notwithstanding:
    # JobScheduler would refuse such a store before the limits are looked at.
    store = Plain()
    backend = SharedBackend(store)
    Kernel(None, plugins=PluginManager(), backend=backend, limits={"job_types": {"x": 1}})
    with pytest.raises(Exception, match="cannot enforce limits across processes"):
        await backend.open()
    assert store.closed is True
