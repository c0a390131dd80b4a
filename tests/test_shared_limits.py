"""Concurrency and rate limits that hold for the whole cluster (issue 6, item 3).

Two schedulers share one store, PostgreSQL or SQLite (two processes as far
as the store can tell: separate connections, separate leases). Every wait synchronizes on
database state; nothing depends on how long anything takes.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from typing import Any

import pytest

import pg_jobs
from jobsched import JobScheduler, PluginManager, StoreError
from shared_support import Target


def plugins() -> PluginManager:
    return PluginManager([pg_jobs], autoload=False)


def sched(target: Target, **kwargs: Any) -> JobScheduler:
    return JobScheduler(store=target.url, shared=True, plugins=plugins(), **kwargs)


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


def statuses(store: Any, ids: list[str]) -> Callable[[], Awaitable[list[str]]]:
    async def check() -> list[str]:
        return [r.status for r in await store.jobs(ids)]

    return check


@pytest.mark.parametrize(
    "limits",
    [{"job_types": {"span": 1}}, {"executors": {"async": 1}}],
    ids=["job-type", "executor"],
)
async def test_a_concurrency_limit_holds_across_processes(
    target: Target, limits: dict[str, Any]
) -> None:
    a = sched(target, num_workers=3, limits=limits)
    b = sched(target, num_workers=3, limits=limits)
    async with a, b:
        ids = [(a if i % 2 else b).submit(target.span(f"s{i}", 0.01)) for i in range(8)]
        await a.join()
        await b.join()
        rows = await a.kernel.backend.store.jobs(ids)  # type: ignore[attr-defined]
    assert [r.status for r in rows] == ["completed"] * 8
    events = target.spans()
    assert len(events) == 16
    assert most_at_once(events) == 1, events


async def test_jobs_held_back_by_a_limit_do_not_block_the_others(target: Target) -> None:
    limits = {"job_types": {"span": 1}}
    a = sched(target, num_workers=2, limits=limits)
    b = sched(target, num_workers=2, limits=limits)
    async with a, b:
        store = a.kernel.backend.store  # type: ignore[attr-defined]
        first = a.submit(target.span("long", 3600))
        await a.flush()  # stored before `second`: claimed first (submit order)
        second = b.submit(target.span("waits", 3600))
        records = [(a if i % 2 else b).submit(target.rec(f"r{i}")) for i in range(6)]
        await until(
            "the unlimited jobs to finish",
            lambda: _all(statuses(store, records), "completed", len(records)),
        )
        await until("the first span to start", lambda: _has_start(target))
        assert [r.status for r in await store.jobs([second])] == ["pending"]
        assert [e for e in target.spans() if e[1] == "start"] == [(first, "start")]
        # Cancelling the running one frees the slot: the held-back one starts.
        a.cancel(first)
        await until("the second span to start", lambda: _started(target, second))
        a.cancel(second)
        await a.join()
        await b.join()
        rows = {r.job_id: r.status for r in await store.jobs([first, second])}
    assert rows == {first: "cancelled", second: "cancelled"}
    # Cancelled mid-run, neither wrote an end: the second started only after the first ended.
    assert target.spans() == [(first, "start"), (second, "start")]


async def _all(check: Callable[[], Awaitable[list[str]]], status: str, count: int) -> bool:
    # Every row, not every row stored so far: the other scheduler's batch
    # (`second` among it) may not be written yet.
    found = await check()
    return len(found) == count and all(s == status for s in found)


async def _has_start(target: Target) -> bool:
    return any(e == "start" for _, e in target.spans())


async def _started(target: Target, job_id: str) -> bool:
    return (job_id, "start") in target.spans()


async def test_a_rate_limit_holds_across_processes(target: Target) -> None:
    limits = {"rates": {"record": {"rate": "1/h", "burst": 2}}}
    a = sched(target, num_workers=2, limits=limits)
    b = sched(target, num_workers=2, limits=limits)
    probe = await target.open_store()
    try:
        async with a, b:
            ids = [(a if i % 2 else b).submit(target.rec(f"r{i}")) for i in range(5)]
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
    assert len(target.executions()) == 2


async def test_every_process_must_run_with_the_same_limits(target: Target) -> None:
    a = sched(target, limits={"job_types": {"span": 1}})
    b = sched(target, limits={"job_types": {"span": 2}})
    c = sched(target)  # no limits: follows the cluster's
    async with a:
        with pytest.raises(StoreError, match="differ from the limits the cluster runs with"):
            await b.start()
        async with c:
            store = c.kernel.backend.store  # type: ignore[attr-defined]
            assert await store.sync_limits(None) == {
                "executors": {},
                "job_types": {"span": 1},
                "rates": {},
            }
            await store.set_limits(None)  # the explicit way to change them
            assert await store.sync_limits(None) is None


async def test_a_store_without_cluster_limits_refuses_limits() -> None:
    from jobsched.backends import SharedBackend
    from jobsched.kernel import Kernel

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
    limits = {"job_types": {"x": 1}}
    Kernel(None, plugins=PluginManager(), backend=backend, limits=limits, subject=JobScheduler())
    with pytest.raises(Exception, match="cannot enforce limits across processes"):
        await backend.open()
    assert store.closed is True
