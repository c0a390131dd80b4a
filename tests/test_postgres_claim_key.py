"""The claim key (schema version 15): the strategy's key packed into bytes
that sort as the key does, the SQL function that packs it the same way, and
the migration that converts a version 17 store's keys without moving a job
in claim order, on every built-in strategy."""

from __future__ import annotations

import math
import random
import time
from typing import Any

import psycopg
import pytest
from psycopg import sql

from jobsched import (
    AgingPriorityStrategy,
    EarliestDeadlineFirstStrategy,
    FIFOStrategy,
    PriorityStrategy,
    SchedulingStrategy,
)
from jobsched._codec import sort_key
from jobsched.store import NewJob, pack_sort_key, unpack_sort_key
from jobsched_plugins.postgres_store import SCHEMA_VERSION, PostgresStore
from jobsched_plugins.postgres_store.migrations import MIGRATIONS
from kernel_support import Noop
from pg_support import base_dsn

INF = math.inf

#: Numbers whose order packing must keep: both signs, both zeros, the
#: smallest and largest doubles, and the infinities.
EDGES = [
    -INF,
    -1.7976931348623157e308,
    -1e9,
    -2.0,
    -1.0,
    -5e-324,
    -0.0,
    0.0,
    5e-324,
    1e-300,
    1.0,
    2.0,
    1.7e9,
    1.7976931348623157e308,
    INF,
]


def test_packed_keys_sort_as_the_tuples_do() -> None:
    rng = random.Random(25)
    keys = [(x,) for x in EDGES]
    keys += [(rng.choice(EDGES), rng.choice(EDGES)) for _ in range(300)]
    keys += [(rng.uniform(-1e10, 1e10), rng.choice(EDGES), 0.0) for _ in range(300)]
    assert sorted(keys) == sorted(keys, key=pack_sort_key)
    for key in keys:
        assert unpack_sort_key(pack_sort_key(key)) == key
        assert len(pack_sort_key(key)) == 8 * len(key)
    assert pack_sort_key((-0.0,)) == pack_sort_key((0.0,))  # they are equal keys


@pytest.mark.parametrize("bad", [b"\x00" * 7, b"\x00" * 9, bytearray(8), "x" * 8, None])
def test_unpacking_refuses_what_packing_cannot_make(bad: Any) -> None:
    with pytest.raises(ValueError, match="is not a packed strategy key"):
        unpack_sort_key(bad)


def strategies() -> dict[str, SchedulingStrategy]:
    return {
        "fifo": FIFOStrategy(),
        "priority": PriorityStrategy(),
        "aging": AgingPriorityStrategy(age_rate=0.5),
        "edf": EarliestDeadlineFirstStrategy(),
    }


def keys_of(strategy: SchedulingStrategy, n: int) -> list[tuple[float, ...]]:
    """The keys `strategy` gives n jobs of mixed priorities, submit times and
    deadlines (none for some), ties included."""
    rng = random.Random(n)
    now = 1.7e9
    keys = []
    for i in range(n):
        job = Noop(f"j{i}")
        job.priority = rng.choice([0, 1, 2, 3])
        if rng.random() < 0.6:
            job.deadline = rng.choice([-50.0, 0.0, 10.0, 10.0, 3600.5])
        submitted = now + rng.choice([0.0, 0.25, 1.0, 1.0, 7.5, -3.0])
        keys.append(sort_key(strategy.key, job, submitted_at=submitted, offset=0.0))
    return keys


def version_17_store(schema: str, rows: list[tuple[str, tuple[float, ...]]]) -> None:
    """A schema at version 17 holding `rows` (id, key) as that version wrote
    them (keys as float8[]), inserted in that order (their seq)."""
    with psycopg.connect(base_dsn(), autocommit=True) as conn:
        conn.execute(f'CREATE SCHEMA "{schema}"')
        conn.execute(f'CREATE TABLE "{schema}".schema_version (version int)')
        for version, statements in enumerate(MIGRATIONS[:17], start=1):
            for statement in statements:
                conn.execute(sql.SQL(statement).format(s=sql.Identifier(schema)))
            conn.execute(f'INSERT INTO "{schema}".schema_version VALUES ({version})')
        with conn.cursor() as cur:
            cur.executemany(
                f'INSERT INTO "{schema}".jobs (job_id, type, args, options, status, run_at, '
                "submitted_at, sort_key) VALUES (%s, 'noop', '{}', '{}', 'pending', 0, 0, %s)",
                [(job_id, list(key)) for job_id, key in rows],
            )


async def claim_order(store: PostgresStore) -> list[str]:
    """Every job's id, claimed one at a time."""
    order = []
    while True:
        rows, _ = await store.claim(1, "w")
        if not rows:
            return order
        order.extend(r.job_id for r in rows)


@pytest.mark.parametrize("name", ["fifo", "priority", "aging", "edf"])
async def test_a_version_17_store_claims_in_the_same_order_after_the_migration(
    pg_schema: tuple[str, str], name: str
) -> None:
    url, schema = pg_schema
    keys = keys_of(strategies()[name], 60)
    rows = [(f"old{i}", key) for i, key in enumerate(keys)]
    version_17_store(schema, rows)
    with psycopg.connect(base_dsn(), autocommit=True) as conn:
        before = [
            r[0]
            for r in conn.execute(
                f'SELECT job_id FROM "{schema}".jobs ORDER BY sort_key, seq'
            ).fetchall()
        ]
    # What version 17 claimed in: the key, then the submit order.
    assert before == [job_id for job_id, _ in sorted(rows, key=lambda r: (r[1], int(r[0][3:])))]
    store = PostgresStore(url)
    await store.open()
    try:
        assert await store.schema_version() == SCHEMA_VERSION
        stored = {r.job_id: r.sort_key for r in await store.jobs([job_id for job_id, _ in rows])}
        assert stored == dict(rows)  # each key converted, unchanged
        # Jobs inserted now, with the same keys, fall in line with the old ones.
        now = time.time()
        await store.insert(
            [
                NewJob(
                    job_id=f"new{i}",
                    type="noop",
                    args={},
                    run_at=now,
                    submitted_at=now,
                    sort_key=key,
                )
                for i, key in enumerate(keys)
            ]
        )
        expected = sorted(
            [(key, 0, i, f"old{i}") for i, key in enumerate(keys)]
            + [(key, 1, i, f"new{i}") for i, key in enumerate(keys)]
        )
        assert await claim_order(store) == [job_id for *_, job_id in expected]
    finally:
        await store.close()


async def test_the_schemas_function_packs_as_python_does(pg_schema: tuple[str, str]) -> None:
    pg_store = PostgresStore(pg_schema[0])
    await pg_store.open()
    rng = random.Random(15)
    keys = [(x,) for x in EDGES] + [(rng.choice(EDGES), rng.choice(EDGES)) for _ in range(50)]
    keys.append(())
    async with pg_store.connection() as conn:
        for key in keys:
            cur = await conn.execute(
                pg_store.db.q("SELECT {s}.sort_key(VARIADIC %s::float8[]) AS k"), [list(key)]
            )
            row = await cur.fetchone()
            assert row is not None and row["k"] == pack_sort_key(key), key
    await pg_store.close()


async def test_copy_spells_every_field_back_as_given(pg_schema: tuple[str, str]) -> None:
    # A batch big enough for COPY, whose rows _copy spells itself: text with
    # COPY's special characters, JSON with backslashes, shared and unshared
    # fields, every strategy's kind of key.
    from jobsched_plugins.postgres_store.submit import COPY_AT_LEAST

    odd = ["plain", "tab\there", "new\nline", "back\\slash", "cr\rhere", "\\N", "ünï \\t"]
    now = time.time()
    jobs = [
        NewJob(
            job_id=f"{odd[i % len(odd)]}-{i}",
            type=odd[(i + 1) % len(odd)],
            args={"text": odd[i % len(odd)], "n": i} if i % 2 else {},
            options={"name": odd[(i + 2) % len(odd)], "executor": "async"}
            | ({"group": odd[i % len(odd)]} if i % 3 == 0 else {}),
            run_at=now + i,
            submitted_at=now,
            sort_key=[(0.0,), (-2.0, 0.0), (-(1 - 0.1 * now), 0.0), (INF, -1.0, 0.0)][i % 4],
            submitted_by=odd[(i + 3) % len(odd)] if i % 5 else None,
            queue=odd[(i + 4) % len(odd)],
        )
        for i in range(COPY_AT_LEAST + 7)
    ]
    store = PostgresStore(pg_schema[0])
    await store.open()
    try:
        assert await store.insert(jobs) == [job.job_id for job in jobs]
        stored = {r.job_id: r for r in await store.jobs()}
        for job in jobs:
            row = stored[job.job_id]
            assert (row.type, row.args, row.options, row.run_at, row.sort_key) == (
                job.type,
                job.args,
                job.options,
                job.run_at,
                job.sort_key,
            )
            assert (row.submitted_by, row.queue, row.job_group, row.status) == (
                job.submitted_by,
                job.queue,
                job.options.get("group"),
                "pending",
            )
    finally:
        await store.close()
