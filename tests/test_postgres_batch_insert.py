"""The postgres store inserts a batch in one statement: keys, unique keys and
dependencies (inside the batch and on stored jobs) come out exactly as if the
jobs had been inserted one by one."""

from __future__ import annotations

import time
import uuid
from collections.abc import AsyncIterator, Iterator
from typing import Any

import attrs
import psycopg
import pytest

from jobsched import StoreError
from jobsched.store import JobKind, NewJob, PlainNewJobs
from jobsched_plugins.postgres_store import PostgresStore
from pg_support import base_dsn, with_query


@pytest.fixture
def second_schema() -> Iterator[str]:
    """A second fresh schema's store URL (the one-by-one reference)."""
    schema = f"t_{uuid.uuid4().hex[:12]}"
    try:
        yield with_query(base_dsn(), schema=schema)
    finally:
        with psycopg.connect(base_dsn(), autocommit=True) as conn:
            conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')


@pytest.fixture
async def stores(pg_schema: tuple[str, str], second_schema: str) -> AsyncIterator[list[Any]]:
    """Two fresh stores holding the same stored jobs: batch, and one by one."""
    opened = [PostgresStore(pg_schema[0]), PostgresStore(second_schema)]
    for store in opened:
        await store.open()
        await store.insert(
            [
                job("done"),
                job("bad"),
                job("waiting"),
                job("keyed", key="K-stored"),
                job("holder", unique_key="U-held"),
                job("was-holder", unique_key="U-freed"),
            ]
        )
        async with store.connection() as conn:
            await conn.execute(
                store.db.q(
                    "UPDATE {s}.jobs SET status = CASE job_id WHEN 'bad' THEN 'failed' "
                    "ELSE 'completed' END, finished_at = 1 "
                    "WHERE job_id IN ('done', 'bad', 'was-holder')"
                )
            )
    try:
        yield opened
    finally:
        for store in opened:
            await store.close()


def job(
    job_id: str,
    *,
    key: str | None = None,
    unique_key: str | None = None,
    deps: tuple[str, ...] = (),
) -> NewJob:
    now = time.time()
    return NewJob(
        job_id=job_id,
        key=key,
        unique_key=unique_key,
        type="noop",
        args={"n": job_id},
        run_at=now,
        submitted_at=now,
        sort_key=(0.0, float("inf")) if job_id.endswith("7") else (0.0, 1.5),
        depends_on=deps,
    )


def mixed_batch(prefix: str, n: int, *, stored_deps: bool) -> list[NewJob]:
    """Every collision a batch can have, in a pattern over its jobs."""
    jobs = []
    for i in range(n):
        key = unique_key = None
        deps: list[str] = []
        if i % 7 == 0:
            key = f"{prefix}K{i // 14}"  # pairs of jobs share a key
        if i % 11 == 0:
            key = "K-stored"  # resumes the stored job
        if i % 5 == 0:
            unique_key = f"{prefix}U{i % 3}"  # deduplicated inside the batch
        if i % 13 == 0:
            unique_key = "U-held"  # held by a stored unfinished job
        if i % 17 == 0:
            unique_key = "U-freed"  # its stored holder has finished
        if i % 3 == 0 and i:
            deps.append(f"{prefix}{i - 1}")  # maybe resolved to another job
        if i % 10 == 0 and i:
            deps += [f"{prefix}{i - 2}", f"{prefix}{i - 2}"]  # the same one twice
        if stored_deps:
            if i % 4 == 0:
                deps.append("done")
            if i % 6 == 0:
                deps.append("bad")  # cancels it, and what waits for it
            if i % 9 == 0:
                deps.append("waiting")
        jobs.append(job(f"{prefix}{i}", key=key, unique_key=unique_key, deps=tuple(deps)))
    return jobs


async def contents(store: PostgresStore) -> tuple[list[Any], list[Any]]:
    async with store.connection() as conn:
        cur = await conn.execute(
            store.db.q(
                "SELECT job_id, key, unique_key, status, unmet, last_error, sort_key, "
                "finished_at IS NOT NULL AS finished FROM {s}.jobs ORDER BY seq"
            )
        )
        jobs = [tuple(r.values()) for r in await cur.fetchall()]
        cur = await conn.execute(
            store.db.q("SELECT job_id, upstream FROM {s}.dependencies ORDER BY 1, 2")
        )
        return jobs, [tuple(r.values()) for r in await cur.fetchall()]


@pytest.mark.parametrize("stored_deps", [False, True], ids=["in-batch-deps", "stored-deps"])
async def test_a_big_batch_is_stored_as_one_by_one_inserts_would(
    stores: list[Any], stored_deps: bool
) -> None:
    batched, one_by_one = stores
    jobs = mixed_batch("j", 400, stored_deps=stored_deps)
    ids = await batched.insert(jobs)
    # One by one, a job names an earlier one by the id its insert returned.
    expected: list[str] = []
    resolved: dict[str, str] = {}
    for j in jobs:
        deps = tuple(resolved.get(d, d) for d in j.depends_on)
        (job_id,) = await one_by_one.insert([attrs.evolve(j, depends_on=deps)])
        resolved[j.job_id] = job_id
        expected.append(job_id)
    assert ids == expected
    assert await contents(batched) == await contents(one_by_one)
    # Spot checks of what "as one by one" means.
    assert ids[11] == ids[22] == "keyed"  # key known to the store: resumed
    assert ids[21] == ids[14] == "j14"  # the second job with a key resolves to the first
    assert ids[13] == "holder"  # unique key held by an unfinished stored job
    assert ids[17] == "j17"  # the stored holder finished: the key is free again
    rows = {r.job_id: r for r in await batched.jobs()}
    if stored_deps:
        assert rows["j6"].status == "cancelled" and rows["j6"].last_error == "upstream bad failed"
        assert rows["j20"].last_error == "upstream j18 cancelled"  # j18 waits for "bad"
        assert rows["j8"].status == "pending"  # "done" completed: nothing to wait for
    else:
        assert all(r.status == "pending" for r in rows.values() if r.job_id.startswith("j"))


async def test_a_batch_resolves_to_jobs_of_an_earlier_batch(stores: list[Any]) -> None:
    batched, _ = stores
    first = await batched.insert(mixed_batch("a", 50, stored_deps=False))
    again = await batched.insert(mixed_batch("a", 50, stored_deps=False))
    assert again == first  # the same ids: every job resumed, nothing duplicated
    assert len(await batched.jobs()) == 6 + len(set(first) - {"keyed", "holder"})


async def test_an_unknown_dependency_stores_nothing_of_the_batch(stores: list[Any]) -> None:
    batched, _ = stores
    with pytest.raises(StoreError, match="unknown dependencies: \\['nope'\\]"):
        await batched.insert([job("x1"), job("x2", deps=("x1", "nope"))])
    assert {r.job_id for r in await batched.jobs()} == {
        "done",
        "bad",
        "waiting",
        "keyed",
        "holder",
        "was-holder",
    }


async def test_a_dependency_named_twice_is_waited_for_once(stores: list[Any]) -> None:
    # It was counted twice in `unmet` but stored once: the job never became due.
    batched, _ = stores
    await batched.insert([job("twice", deps=("waiting", "waiting"))])
    (row,) = (await contents(batched))[0][-1:]
    assert row[0] == "twice" and row[4] == 1


async def test_a_plain_batch_is_copied_as_inserting_it_would_store_it(
    stores: list[Any],
) -> None:
    # No keys and no dependencies: the COPY path (COPY_AT_LEAST jobs or more);
    # the reference store gets the same jobs in batches below that size.
    from jobsched_plugins.postgres_store.submit import COPY_AT_LEAST

    copied, inserted = stores
    jobs = [
        attrs.evolve(
            job(f"p{i}"),
            args={"n": i, "text": 'quote " tab \t newline \n backslash \\'},
            options={"name": f"p{i}", "executor": "async"},
            schedule_id="sched" if i % 2 else None,
            submitted_by="tester",
        )
        for i in range(COPY_AT_LEAST * 2)
    ]
    assert await copied.insert(jobs) == [j.job_id for j in jobs]
    for i in range(0, len(jobs), COPY_AT_LEAST // 2):
        await inserted.insert(jobs[i : i + COPY_AT_LEAST // 2])
    assert await contents(copied) == await contents(inserted)
    ids = [j.job_id for j in jobs]
    assert [
        (r.args, r.options, r.schedule_id, r.submitted_by, r.sort_key, r.run_at)
        for r in await copied.jobs(ids)
    ] == [
        (r.args, r.options, r.schedule_id, r.submitted_by, r.sort_key, r.run_at)
        for r in await inserted.jobs(ids)
    ]
    row = await copied.get("p7")
    assert row is not None and row.sort_key == (0.0, float("inf"))
    assert row.args["text"] == 'quote " tab \t newline \n backslash \\'


def plain_jobs(job_ids: list[str]) -> PlainNewJobs:
    """Jobs of three kinds (one with what COPY escapes), as a client
    submits jobs without options."""
    kinds = [
        JobKind(
            type="noop",
            args={"text": 'quote " tab \t newline \n backslash \\'},
            options={"name": "odd", "executor": "async"},
            sort_key=(0.0, 1.5),
            queue="default",
        ),
        JobKind(
            type="noop",
            args={},
            options={"name": "plain", "executor": "async", "queue": "mail", "group": "g"},
            sort_key=(0.0, float("inf")),
            queue="mail",
        ),
        JobKind(type="other", args={"n": 1}, options={}, sort_key=(-1.0,), queue="default"),
    ]
    return PlainNewJobs(
        job_ids,
        [kinds[i % 7 % 3] for i in range(len(job_ids))],
        as_given,
        submitted_at=time.time(),
        submitted_by="tester",
    )


def as_given(kind: JobKind) -> JobKind:
    return kind


async def test_plain_new_jobs_are_copied_as_the_new_jobs_they_stand_for(
    stores: list[Any],
) -> None:
    from jobsched_plugins.postgres_store.submit import COPY_AT_LEAST

    copied, inserted = stores
    jobs = plain_jobs([f"k{i}" for i in range(COPY_AT_LEAST * 2)])
    assert await copied.insert(jobs) == jobs.job_ids
    await inserted.insert(list(jobs))  # each one a NewJob
    assert await contents(copied) == await contents(inserted)
    assert [attrs.evolve(r, seq=0) for r in await copied.jobs(jobs.job_ids)] == [
        attrs.evolve(r, seq=0) for r in await inserted.jobs(jobs.job_ids)
    ]


def test_plain_new_jobs_read_as_new_jobs() -> None:
    jobs = plain_jobs([f"n{i}" for i in range(10)])
    second = jobs[1]
    assert second == NewJob(
        job_id="n1",
        type="noop",
        args={},
        options={"name": "plain", "executor": "async", "queue": "mail", "group": "g"},
        run_at=jobs.submitted_at,
        submitted_at=jobs.submitted_at,
        sort_key=(0.0, float("inf")),
        submitted_by="tester",
        queue="mail",
    )
    assert second.options is not jobs.kinds[1].options  # a store may keep it
    assert [j.job_id for j in jobs[2:5]] == ["n2", "n3", "n4"]
    assert isinstance(jobs[2:5], PlainNewJobs)


def test_plain_new_jobs_work_out_kinds_up_to_the_slice_read() -> None:
    given = plain_jobs([f"n{i}" for i in range(10)])
    asked: list[int] = []

    def kind_of(i: int) -> JobKind:
        asked.append(i)
        return given.kinds[i]

    jobs = PlainNewJobs(given.job_ids, range(10), kind_of, submitted_at=1.0, submitted_by="tester")
    assert jobs[2:4].kinds == given.kinds[2:4]
    assert asked == [0, 1, 2, 3]
    assert [j.job_id for j in jobs] == given.job_ids
    assert asked == list(range(10))  # each one once


async def test_plain_new_jobs_refused_while_copied_store_nothing(stores: list[Any]) -> None:
    from jobsched_plugins.postgres_store.submit import COPY_AT_LEAST

    copied, _ = stores
    given = plain_jobs([f"z{i}" for i in range(COPY_AT_LEAST * 8)])

    def kind_of(i: int) -> JobKind:
        if i == len(given) - 1:
            raise ValueError("not storable")
        return given.kinds[i]

    jobs = PlainNewJobs(
        given.job_ids, range(len(given)), kind_of, submitted_at=1.0, submitted_by="tester"
    )
    with pytest.raises(ValueError, match="not storable"):
        await copied.insert(jobs)
    assert not [r for r in await copied.jobs() if r.job_id.startswith("z")]
    await copied.insert(given)  # the connection is usable again
    assert len([r for r in await copied.jobs() if r.job_id.startswith("z")]) == len(given)


async def test_plain_new_jobs_with_an_id_already_stored_resolve_it(stores: list[Any]) -> None:
    from jobsched_plugins.postgres_store.submit import COPY_AT_LEAST

    copied, _ = stores
    # The COPY fails on the stored id; the batch is then planned with it.
    job_ids = [f"q{i}" for i in range(COPY_AT_LEAST)]
    job_ids[3] = "done"
    jobs = plain_jobs(job_ids)
    assert await copied.insert(jobs) == jobs.job_ids
    rows = {r.job_id: r for r in await copied.jobs()}
    assert rows["done"].status == "completed"  # the stored job, untouched
    assert len(rows) == 6 + COPY_AT_LEAST - 1


async def test_a_plain_batch_with_an_id_already_stored_resolves_it(stores: list[Any]) -> None:
    # The COPY fails on the stored id; the batch is then planned with it, as
    # inserting it would be, and nothing is stored twice.
    from jobsched_plugins.postgres_store.submit import COPY_AT_LEAST

    copied, _ = stores
    jobs = [job("done")] + [job(f"q{i}") for i in range(COPY_AT_LEAST)]
    assert await copied.insert(jobs) == [j.job_id for j in jobs]
    rows = {r.job_id: r for r in await copied.jobs()}
    assert rows["done"].status == "completed"  # the stored job, untouched
    assert len(rows) == 6 + COPY_AT_LEAST


async def test_a_plain_batch_that_cannot_be_stored_names_why(stores: list[Any]) -> None:
    from jobsched_plugins.postgres_store.submit import COPY_AT_LEAST

    copied, _ = stores
    jobs = [job(f"r{i}") for i in range(COPY_AT_LEAST)]
    jobs[5] = attrs.evolve(jobs[5], args={"when": object()})
    with pytest.raises(StoreError, match="not JSON, so it cannot be stored"):
        await copied.insert(jobs)
    assert not [r for r in await copied.jobs() if r.job_id.startswith("r")]
