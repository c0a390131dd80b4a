"""A dependency that completes while a job depending on it is being inserted.

The insert reads its dependencies' statuses, the finish releases the
dependents it finds: run concurrently under READ COMMITTED, neither saw the
other and the new job waited forever for a dependency long completed. The
insert now locks the dependencies it reads (``FOR SHARE``), so it waits for
a finish under way and reads its outcome. The test holds a finish open in a
second connection and checks that the insert waits for it, then counts the
dependency as met.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

import psycopg
import pytest

from jobsched.store import NewJob, Outcome, StoreContext
from jobsched_plugins.postgres_store import PostgresStore
from pg_support import base_dsn

pytestmark = pytest.mark.timeout(120)


def job(job_id: str, deps: tuple[str, ...] = ()) -> NewJob:
    now = time.time()
    return NewJob(
        job_id=job_id,
        key=None,
        type="noop",
        args={},
        run_at=now,
        submitted_at=now,
        sort_key=(0.0,),
        depends_on=deps,
    )


async def waiting_on_a_lock(schema: str) -> bool:
    async with await psycopg.AsyncConnection.connect(base_dsn(), autocommit=True) as conn:
        cur = await conn.execute(
            "SELECT count(*) FROM pg_stat_activity "
            "WHERE application_name = %s AND wait_event_type = 'Lock'",
            [schema],
        )
        row: Any = await cur.fetchone()
        return bool(row[0])


async def test_an_insert_waits_for_a_finish_under_way_and_sees_it(
    pg_schema: tuple[str, str],
) -> None:
    url, schema = pg_schema
    store = PostgresStore(url)
    await store.open(StoreContext(worker_id="probe", shared=True))
    try:
        await store.insert([job("upstream")])
        async with await psycopg.AsyncConnection.connect(base_dsn()) as finisher:
            # A finish under way: the upstream completed, not committed yet.
            await finisher.execute(
                f"UPDATE \"{schema}\".jobs SET status = 'completed', finished_at = %s "
                "WHERE job_id = 'upstream'",
                [time.time()],
            )
            insert = asyncio.create_task(store.insert([job("downstream", ("upstream",))]))
            for _ in range(1200):  # the insert must block on the upstream's row
                if await waiting_on_a_lock(schema) or insert.done():
                    break
                await asyncio.sleep(0.05)
            assert not insert.done(), "the insert did not wait for the finish under way"
            await finisher.commit()
        await asyncio.wait_for(insert, timeout=60)
        row = await store.get("downstream")
        assert row is not None and row.status == "pending" and row.unmet == 0
    finally:
        await store.close()


async def test_a_finish_that_waits_for_an_insert_releases_the_job_it_inserted(
    pg_schema: tuple[str, str],
) -> None:
    # The other order: an insert holds the upstream FOR SHARE and has found
    # it running, so its new dependent waits for it (unmet 1). The finish
    # blocks on that lock; once the insert commits, the finish must see the
    # new dependent and release it (a statement whose snapshot predates the
    # insert would not, and the dependent would wait forever).
    url, schema = pg_schema
    store = PostgresStore(url)
    await store.open(StoreContext(worker_id="w1", shared=True))
    try:
        await store.insert([job("upstream")])
        rows, _ = await store.claim(1, "w1")
        assert [r.job_id for r in rows] == ["upstream"]
        async with await psycopg.AsyncConnection.connect(base_dsn()) as inserter:
            await inserter.execute(
                f"SELECT status FROM \"{schema}\".jobs WHERE job_id = 'upstream' FOR SHARE"
            )
            await inserter.execute(
                f'INSERT INTO "{schema}".jobs (job_id, type, args, options, status, run_at, '
                "submitted_at, sort_key, unmet) VALUES "
                "('downstream', 'noop', '{}', '{}', 'pending', 0, 0, "
                f'"{schema}".sort_key(0), 1)'
            )
            await inserter.execute(
                f'INSERT INTO "{schema}".dependencies (job_id, upstream) '
                "VALUES ('downstream', 'upstream')"
            )
            finish = asyncio.create_task(
                store.finish([Outcome(job_id="upstream", status="completed", result="1")], "w1")
            )
            for _ in range(1200):  # the finish must block on the upstream's row
                if await waiting_on_a_lock(schema) or finish.done():
                    break
                await asyncio.sleep(0.05)
            assert not finish.done(), "the finish did not wait for the insert under way"
            await inserter.commit()
        assert await asyncio.wait_for(finish, timeout=60) == ["upstream"]
        row = await store.get("downstream")
        assert row is not None and row.status == "pending" and row.unmet == 0
    finally:
        await store.close()
