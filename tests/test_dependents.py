"""A job's downstream jobs as a query: ``dependents(job_id)``.

On both shared stores (`SharedStore.dependents`, through the dependencies'
primary key on ``upstream``), through `Client` and `BlockingClient` over
them, and in process (`JobScheduler.dependents`, which `LocalClient`
returns) on the memory store and on a SQLite file the scheduler owns. The
dashboard's use of it is tested in test_web_api.py.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from jobsched import (
    BlockingClient,
    Client,
    JobScheduler,
    JobStatus,
    LocalClient,
    Submission,
    UnknownJobError,
    build_job,
)
from jobsched.store import NewJob, Outcome
from kernel_support import Gate, Noop, join, until
from shared_support import Target
from store_support import Noop as StoredNoop
from store_support import jobs_plugin

pytestmark = pytest.mark.timeout(120)


def new(job_id: str, *deps: str, delay: float = 0.0) -> NewJob:
    now = time.time()
    return NewJob(
        job_id=job_id,
        type="noop",
        args={},
        options={"executor": "async"},
        run_at=now + delay,
        submitted_at=now,
        sort_key=(0.0,),
        depends_on=deps,
    )


@pytest.fixture
async def store(target: Target) -> AsyncIterator[Any]:
    opened = await target.open_store("worker-a")
    try:
        yield opened
    finally:
        await opened.close()


# ── the shared stores ──────────────────────────────────────────────────
async def test_a_store_lists_dependents_in_submit_order(store: Any) -> None:
    # Ids out of alphabetical order, so the order checked is the submit order.
    await store.insert([new("up"), new("z-first", "up"), new("other")])
    await store.insert([new("m-second", "up", "other"), new("a-third", "up")])
    await store.insert([new("below", "z-first")])
    assert await store.dependents("up") == ["z-first", "m-second", "a-third"]
    assert await store.dependents("other") == ["m-second"]
    assert await store.dependents("z-first") == ["below"]
    assert await store.dependents("below") == []


async def test_an_unknown_job_has_no_dependents_list(store: Any) -> None:
    await store.insert([new("up"), new("down", "up")])
    assert await store.dependents("nope") is None
    # An id that is only ever a dependent is still a job without dependents.
    assert await store.dependents("down") == []


async def test_dependents_of_every_status_are_listed_until_purged(store: Any) -> None:
    await store.insert([new("up", delay=3600), new("keep", "up"), new("drop", "up")])
    assert await store.request_cancel("drop") is True  # waiting: cancelled at once
    rows = {r.job_id: r.status for r in await store.jobs()}
    assert rows == {"up": "pending", "keep": "pending", "drop": "cancelled"}
    assert await store.dependents("up") == ["keep", "drop"]
    assert await store.purge(time.time() + 1, ["cancelled"]) == 1
    assert await store.dependents("up") == ["keep"]


async def test_a_dependent_inserted_after_its_upstream_ended_is_listed(store: Any) -> None:
    """Every dependency keeps its edge, not only the ones a job still waits for."""
    await store.insert([new("ok"), new("bad")])
    claimed, _ = await store.claim(10, "worker-a")
    assert {r.job_id for r in claimed} == {"ok", "bad"}
    outcomes = [Outcome(job_id="ok", status="completed"), Outcome(job_id="bad", status="failed")]
    assert sorted(await store.finish(outcomes, "worker-a")) == ["bad", "ok"]
    await store.insert([new("after-ok", "ok"), new("after-bad", "bad"), new("both", "ok", "bad")])
    rows = {r.job_id: r for r in await store.jobs()}
    assert (rows["after-ok"].status, rows["after-ok"].unmet) == ("pending", 0)
    assert rows["after-bad"].status == "cancelled" and rows["both"].status == "cancelled"
    assert await store.dependents("ok") == ["after-ok", "both"]
    assert await store.dependents("bad") == ["after-bad", "both"]
    both = await store.get("both")
    assert both is not None and both.depends_on == ("bad", "ok")


async def test_a_retried_job_cancelled_at_insert_waits_for_its_upstream_again(
    store: Any,
) -> None:
    """As one the cascade cancelled later does: its edge is kept, so a retry
    counts the upstream that did not complete."""
    await store.insert([new("bad")])
    await store.claim(10, "worker-a")
    await store.finish([Outcome(job_id="bad", status="failed")], "worker-a")
    await store.insert([new("after", "bad")])
    assert await store.retry(["after"]) == ["after"]
    row = await store.get("after")
    assert row is not None and (row.status, row.unmet) == ("pending", 1)
    assert await store.retry(["bad"]) == ["bad"]
    claimed, _ = await store.claim(10, "worker-a")
    assert [r.job_id for r in claimed] == ["bad"]
    await store.finish([Outcome(job_id="bad", status="completed")], "worker-a")
    claimed, _ = await store.claim(10, "worker-a")
    assert [r.job_id for r in claimed] == ["after"]


async def test_the_schema_indexes_dependencies_by_upstream(db_target: Target) -> None:
    """`dependents` needs no schema change: the dependencies' primary key
    starts with ``upstream`` on both databases, and the planner uses it."""
    store = await db_target.open_store("worker-a")
    try:
        if db_target.kind == "postgresql":
            async with store.connection() as conn:
                await conn.execute("SET LOCAL enable_seqscan = off")
                cur = await conn.execute(
                    f'EXPLAIN SELECT job_id FROM "{db_target.schema}".dependencies '
                    "WHERE upstream = %s",
                    ["x"],
                )
                plan = " ".join(next(iter(r.values())) for r in await cur.fetchall())
            assert "dependencies_pkey" in plan and "Index Cond: (upstream = " in plan
            return
        rows = await store.call(
            lambda conn: conn.execute(
                "EXPLAIN QUERY PLAN SELECT job_id FROM jobsched_shared_dependencies "
                "WHERE upstream = ?",
                ("x",),
            ).fetchall()
        )
        assert "USING PRIMARY KEY (upstream=?)" in " ".join(r[-1] for r in rows)
    finally:
        await store.close()


# ── Client and BlockingClient ──────────────────────────────────────────
def email(to: str) -> Any:
    return build_job("email", {"to": to, "subject": "hello", "latency": 0})


async def test_a_client_lists_a_jobs_dependents(target: Target) -> None:
    async with Client(target.url) as client:
        up = await client.submit(email("up@example.com"), delay=3600)
        first = await client.submit(email("a@example.com"), depends_on=[up])
        unrelated = await client.submit(email("b@example.com"))
        second, third = await client.submit_many(
            [
                Submission(email("c@example.com"), depends_on=[up, unrelated]),
                Submission(email("d@example.com"), depends_on=[up]),
            ]
        )
        assert await client.dependents(up) == [first, second, third]
        assert await client.dependents(unrelated) == [second]
        assert await client.dependents(third) == []
        with pytest.raises(UnknownJobError, match=r"unknown job 'job-nope' in "):
            await client.dependents("job-nope")


def test_a_blocking_client_lists_a_jobs_dependents(target: Target) -> None:
    with BlockingClient(target.url) as client:
        up = client.submit(email("up@example.com"))
        down = client.submit(email("down@example.com"), depends_on=[up])
        assert client.dependents(up) == [down]
        with pytest.raises(UnknownJobError, match="job-nope"):
            client.dependents("job-nope")


# ── in process: JobScheduler and LocalClient ───────────────────────────
async def test_in_memory_every_dependent_is_listed_met_or_not() -> None:
    async with JobScheduler(num_workers=2) as scheduler:
        client = LocalClient(scheduler)
        done = scheduler.submit(Noop("done"))
        await join(scheduler)
        gate = Gate("gate")
        running = scheduler.submit(gate)
        # Submitted after its upstream completed: it never waited for it.
        late = scheduler.submit(Noop("late"), depends_on=[done])
        waiting = scheduler.submit(Noop("waiting"), depends_on=[running, done])
        also = scheduler.submit(Noop("also"), depends_on=[running])
        assert await client.dependents(done) == [late, waiting]
        assert await client.dependents(running) == [waiting, also]
        assert scheduler.dependents(running) == (waiting, also)
        await until(lambda: gate.waiting, "the gate's attempt to start")
        gate.open()
        await join(scheduler)
        assert scheduler.get(also).status is JobStatus.COMPLETED
        # Still listed once everything has ended.
        assert await client.dependents(running) == [waiting, also]
        assert await client.dependents(also) == []


async def test_in_memory_an_unknown_job_is_an_unknown_job_error() -> None:
    async with JobScheduler(num_workers=1) as scheduler:
        with pytest.raises(UnknownJobError, match="job-nope"):
            await LocalClient(scheduler).dependents("job-nope")
        with pytest.raises(UnknownJobError, match="job-nope"):
            scheduler.dependents("job-nope")


async def test_in_memory_a_forgotten_job_leaves_the_lists() -> None:
    async with JobScheduler(num_workers=1, history_limit=2) as scheduler:
        gate = Gate("gate")
        up = scheduler.submit(gate)
        downs = [scheduler.submit(Noop(f"d{i}"), depends_on=[up]) for i in range(4)]
        for job_id in downs:
            assert scheduler.cancel(job_id)
        # The history keeps the last two finished jobs: the first two are forgotten.
        assert scheduler.dependents(up) == tuple(downs[2:])
        await until(lambda: gate.waiting, "the gate's attempt to start")
        gate.open()
        await join(scheduler)
        scheduler.submit(Noop("one"))
        scheduler.submit(Noop("two"))
        await join(scheduler)
        with pytest.raises(UnknownJobError):
            scheduler.dependents(up)


async def test_a_single_owner_sqlite_scheduler_restores_its_dependents(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path}/jobs.db"
    async with JobScheduler(store=url, plugins=[jobs_plugin]) as scheduler:
        up = scheduler.submit(StoredNoop(label="up"), delay=3600)
        first = scheduler.submit(StoredNoop(label="first"), depends_on=[up])
        second = scheduler.submit(StoredNoop(label="second"), depends_on=[up])
        await scheduler.flush()
    async with JobScheduler(store=url, plugins=[jobs_plugin]) as restarted:
        assert await LocalClient(restarted).dependents(up) == [first, second]
