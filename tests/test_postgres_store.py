"""The shared-store contract (claims, leases, DAG, cancel, schedules, unique keys)
on every shared store, and the postgres store's own parts (URLs, schema,
reconnects) against the real PostgreSQL."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from typing import Any

import attrs
import psycopg
import pytest
from psycopg import sql

from jobsched import StoreError
from jobsched.store import NewJob, Outcome, SharedScheduleRow, encode_result
from jobsched_plugins.postgres_store import (
    SCHEMA_VERSION,
    PostgresStore,
    parse_url,
    redact,
)
from jobsched_plugins.postgres_store.submit import COPY_AT_LEAST
from pg_support import base_dsn, terminate_backends, with_query
from shared_support import Target


def new(
    job_id: str,
    *,
    prio: float = 0.0,
    deps: tuple[str, ...] = (),
    delay: float = 0.0,
    key: str | None = None,
) -> NewJob:
    now = time.time()
    return NewJob(
        job_id=job_id,
        key=key,
        type="noop",
        args={"n": job_id},
        run_at=now + delay,
        submitted_at=now,
        sort_key=(prio,),
        depends_on=deps,
    )


@pytest.fixture
async def pg_store(pg_schema: tuple[str, str]) -> AsyncIterator[PostgresStore]:
    s = PostgresStore(pg_schema[0])
    await s.open()
    try:
        yield s
    finally:
        await s.close()


# The shared-store contract runs on every shared store (PostgreSQL, SQLite):
# `store` and `other` are two processes' views of one fresh store.
@pytest.fixture
async def store(target: Target) -> AsyncIterator[Any]:
    s = await target.open_store("one")
    try:
        yield s
    finally:
        await s.close()


@pytest.fixture
async def other(target: Target, store: Any) -> AsyncIterator[Any]:
    """A second process's view of the same store."""
    s = await target.open_store("other")
    try:
        yield s
    finally:
        await s.close()


async def statuses(store: Any) -> dict[str, str]:
    return {r.job_id: r.status for r in await store.jobs()}


# ── URL and schema ────────────────────────────────────────────────────
def test_url_parsing_keeps_libpq_options_and_takes_ours() -> None:
    dsn, schema, opts = parse_url("postgres://u:pw@h:5/db?schema=q1&lease=5&sslmode=disable")
    assert dsn == "postgresql://u:pw@h:5/db?sslmode=disable"
    assert schema == "q1"
    assert opts == {"lease": "5"}
    assert redact("postgresql://u:pw@h/db") == "postgresql://u:***@h/db"


def test_bad_urls_are_refused_by_name() -> None:
    with pytest.raises(StoreError, match="not a postgresql:// URL"):
        parse_url("mysql://h/db")
    with pytest.raises(StoreError, match=r"schema 'Bad-Name'"):
        parse_url("postgresql://h/db?schema=Bad-Name")
    with pytest.raises(StoreError, match="lease must be a positive"):
        PostgresStore("postgresql://h/db?lease=0")


async def test_open_creates_schema_and_is_idempotent(pg_schema: tuple[str, str]) -> None:
    for _ in range(2):
        s = PostgresStore(pg_schema[0])
        await s.open()
        assert await s.schema_version() == SCHEMA_VERSION
        await s.close()


async def test_a_jobs_own_dependencies_are_indexed(pg_schema: tuple[str, str]) -> None:
    # Version 7: `get` reads a job's dependencies by its id, purges delete by it.
    s = PostgresStore(pg_schema[0])
    await s.open()
    try:
        async with s.connection() as conn:
            cur = await conn.execute(
                "SELECT indexdef FROM pg_indexes WHERE schemaname = %s AND indexname = %s",
                [pg_schema[1], "dependencies_job"],
            )
            row = await cur.fetchone()
        assert row is not None and "(job_id)" in row["indexdef"]
    finally:
        await s.close()


async def test_concurrent_opens_migrate_once(pg_schema: tuple[str, str]) -> None:
    stores = [PostgresStore(pg_schema[0]) for _ in range(3)]
    await asyncio.gather(*(s.open() for s in stores))
    async with stores[0].connection() as conn:
        cur = await conn.execute(f'SELECT count(*) AS n FROM "{pg_schema[1]}".schema_version')
        assert (await cur.fetchone())["n"] == SCHEMA_VERSION
    for s in stores:
        await s.close()


async def test_newer_schema_is_refused(pg_store: PostgresStore, pg_schema: tuple[str, str]) -> None:
    async with pg_store.connection() as conn:
        await conn.execute(f'INSERT INTO "{pg_schema[1]}".schema_version VALUES (99)')
    s = PostgresStore(pg_schema[0])
    with pytest.raises(StoreError, match=r"version 99, newer than this jobsched understands"):
        await s.open()


async def test_foreign_schema_is_refused(pg_schema: tuple[str, str]) -> None:
    with psycopg.connect(base_dsn(), autocommit=True) as conn:
        conn.execute(f'CREATE SCHEMA "{pg_schema[1]}"')
        conn.execute(f'CREATE TABLE "{pg_schema[1]}".customers (id int)')
    with pytest.raises(StoreError, match=r"holds tables \(customers\) but is not a jobsched"):
        await PostgresStore(pg_schema[0]).open()


async def test_unreachable_server_is_a_clear_error() -> None:
    s = PostgresStore("postgresql://nobody:secret@127.0.0.1:1/none?connect_timeout=2")
    with pytest.raises(StoreError, match=r"cannot connect to postgresql://nobody:\*\*\*@"):
        await s.open()


# ── Claiming ──────────────────────────────────────────────────────────
async def test_claim_follows_sort_key_then_submit_order(store: Any) -> None:
    await store.insert([new("a", prio=0), new("b", prio=-2), new("c", prio=-2), new("d", prio=1)])
    rows, _ = await store.claim(3, "w1")
    assert [r.job_id for r in rows] == ["b", "c", "a"]
    assert all(r.status == "running" and r.attempts == 1 and r.lease_owner == "w1" for r in rows)
    assert all(r.lease_expires is not None and r.lease_expires > time.time() for r in rows)
    rows, next_due = await store.claim(5, "w1")
    assert [r.job_id for r in rows] == ["d"]
    assert next_due is None


async def test_concurrent_claims_never_share_a_job(store: Any, other: Any) -> None:
    await store.insert([new(f"j{i}") for i in range(200)])
    got: list[str] = []

    async def drain(s: PostgresStore, owner: str) -> None:
        while True:
            rows, _ = await s.claim(7, owner)
            if not rows:
                return
            got.extend(r.job_id for r in rows)

    await asyncio.gather(drain(store, "w1"), drain(other, "w2"))
    assert sorted(got) == sorted(f"j{i}" for i in range(200))


async def test_delayed_job_is_not_claimed_before_its_time(store: Any) -> None:
    await store.insert([new("later", delay=3600)])
    rows, next_due = await store.claim(1, "w1")
    assert rows == []
    assert next_due is not None and next_due > time.time() + 3000


async def test_release_gives_back_without_counting_an_attempt(store: Any) -> None:
    await store.insert([new("a")])
    await store.claim(1, "w1")
    assert await store.release(["a"], "w2") == 0  # not w2's to give back
    assert await store.release(["a"], "w1") == 1
    row = await store.get("a")
    assert row is not None and (row.status, row.attempts, row.lease_owner) == ("pending", 0, None)


# ── Leases ────────────────────────────────────────────────────────────
async def test_expired_lease_is_reaped_and_attempts_are_kept(store: Any, target: Target) -> None:
    await store.insert([new("a"), new("b")])
    await store.claim(2, "dead")
    assert await store.renew(["a", "b", "zzz"], "dead") == {"zzz"}
    assert await store.reap_expired() == 0  # leases still valid
    await target.expire_lease(store, "a")  # the owner died long ago
    assert await store.reap_expired() == 1
    assert await store.renew(["a", "b"], "dead") == {"a"}  # "a" is no longer its
    rows, _ = await store.claim(5, "alive")
    assert [(r.job_id, r.attempts) for r in rows] == [("a", 2)]
    # The dead owner's late result for "a" is ignored; the new owner's counts.
    assert await store.finish([Outcome(job_id="a", status="completed")], "dead") == []
    assert await store.finish([Outcome(job_id="a", status="completed")], "alive") == ["a"]


# ── Finishing, dependencies ───────────────────────────────────────────
async def test_completion_releases_dependents_in_the_same_transaction(store: Any) -> None:
    await store.insert([new("a"), new("b"), new("c", deps=("a", "b"))])
    rows, _ = await store.claim(5, "w")
    assert {r.job_id for r in rows} == {"a", "b"}
    await store.finish(
        [Outcome(job_id="a", status="completed", result=encode_result({"x": 1}))], "w"
    )
    assert (await store.claim(5, "w"))[0] == []  # c still waits for b
    await store.finish([Outcome(job_id="b", status="completed")], "w")
    rows, _ = await store.claim(5, "w")
    assert [r.job_id for r in rows] == ["c"]
    a = await store.get("a")
    assert a is not None and a.result == {"x": 1} and a.finished_at is not None


async def test_failure_cascades_transitively(store: Any) -> None:
    await store.insert([new("a"), new("b", deps=("a",)), new("c", deps=("b",)), new("x")])
    await store.claim(1, "w")
    await store.finish([Outcome(job_id="a", status="failed", error="boom")], "w")
    got = await store.jobs()
    by_id = {r.job_id: r for r in got}
    assert by_id["a"].status == "failed" and by_id["a"].last_error == "boom"
    assert by_id["b"].status == "cancelled" and by_id["b"].last_error == "upstream a failed"
    assert by_id["c"].status == "cancelled" and by_id["c"].last_error == "upstream b cancelled"
    assert by_id["x"].status == "pending"


async def test_dependency_on_finished_upstreams(store: Any) -> None:
    await store.insert([new("ok"), new("bad")])
    await store.claim(2, "w")
    await store.finish(
        [Outcome(job_id="ok", status="completed"), Outcome(job_id="bad", status="timed_out")], "w"
    )
    await store.insert([new("after-ok", deps=("ok",)), new("after-bad", deps=("ok", "bad"))])
    s = await statuses(store)
    assert s["after-ok"] == "pending" and s["after-bad"] == "cancelled"
    rows, _ = await store.claim(5, "w")
    assert [r.job_id for r in rows] == ["after-ok"]


async def test_unknown_dependency_inserts_nothing(store: Any) -> None:
    with pytest.raises(StoreError, match=r"unknown dependencies: \['ghost'\]"):
        await store.insert([new("a"), new("b", deps=("ghost",))])
    assert await store.jobs() == []


async def test_retry_wait_goes_back_with_its_due_time(store: Any) -> None:
    await store.insert([new("a")])
    await store.claim(1, "w")
    due = time.time() + 3600
    await store.finish([Outcome(job_id="a", status="retry_wait", error="E", run_at=due)], "w")
    row = await store.get("a")
    assert row is not None
    assert (row.status, row.run_at, row.last_error, row.attempts) == ("retry_wait", due, "E", 1)
    rows, next_due = await store.claim(1, "w")
    assert rows == [] and next_due == due


async def test_key_makes_insert_resume_instead_of_duplicating(store: Any) -> None:
    assert await store.insert([new("first", key="file:job1")]) == ["first"]
    assert await store.insert([new("second", key="file:job1")]) == ["first"]
    assert [r.job_id for r in await store.jobs()] == ["first"]


async def test_result_that_json_cannot_hold_is_kept_as_repr(store: Any) -> None:
    await store.insert([new("a")])
    await store.claim(1, "w")
    await store.finish([Outcome(job_id="a", status="completed", result=encode_result({1, 2}))], "w")
    row = await store.get("a")
    assert row is not None and row.result["$repr"] == "{1, 2}"
    assert row.result["$note"].startswith("not JSON-encodable")


# ── Notifications and cancellation ────────────────────────────────────
async def test_insert_wakes_a_waiting_process(store: Any, other: Any) -> None:
    await other.wait(0)  # consume the wake-up every fresh listener starts with
    waiter = asyncio.create_task(other.wait(60))
    await asyncio.sleep(0)
    await store.insert([new("a")])
    assert await waiter is True


async def test_a_finish_that_releases_a_job_wakes_claimers_and_waiters(
    store: Any, other: Any
) -> None:
    # One statement writes the outcome, releases the dependent and notifies.
    await store.insert([new("a"), new("b", deps=("a",))])
    await store.claim(1, "w")
    await other.wait(0)  # consume the wake-ups every fresh listener starts with
    await other.wait_finished(0)
    work = asyncio.create_task(other.wait(60))
    finished = asyncio.create_task(other.wait_finished(60))
    await asyncio.sleep(0)
    assert await store.finish([Outcome(job_id="a", status="completed")], "w") == ["a"]
    assert await work is True and await finished is True
    rows, _ = await other.claim(5, "w2")
    assert [r.job_id for r in rows] == ["b"]
    assert [(a.number, a.status) for a in (await store.get("a")).history] == [(1, "completed")]
    # An outcome the owner no longer holds is not written, and releases nothing.
    assert await store.finish([Outcome(job_id="b", status="completed")], "w") == []
    assert (await store.get("b")).status == "running"


async def test_cancel_of_a_running_job_reaches_its_owner(store: Any, other: Any) -> None:
    seen: asyncio.Queue[str] = asyncio.Queue()
    other.on_cancel = seen.put_nowait
    await store.insert([new("a"), new("b", deps=("a",))])
    await other.claim(1, "w2")
    assert await store.request_cancel("a") is True
    assert await asyncio.wait_for(seen.get(), 60) == "a"
    assert await other.cancel_requests("w2") == ["a"]
    await other.finish([Outcome(job_id="a", status="cancelled", error="cancelled")], "w2")
    assert await statuses(store) == {"a": "cancelled", "b": "cancelled"}
    assert await store.request_cancel("a") is False
    assert await store.request_cancel("nope") is False


async def test_cancel_of_a_waiting_job_is_immediate(store: Any) -> None:
    await store.insert([new("a"), new("b", deps=("a",))])
    assert await store.request_cancel("a") is True
    assert await statuses(store) == {"a": "cancelled", "b": "cancelled"}


# ── Schedules ─────────────────────────────────────────────────────────
async def test_schedule_period_fires_exactly_once(store: Any, other: Any) -> None:
    row = SharedScheduleRow(
        schedule_id="tick",
        type="noop",
        args={},
        options={},
        trigger={"interval": 10},
        next_run=1000.0,
    )
    assert (await store.add_schedule(row)).next_run == 1000.0
    assert (await other.add_schedule(attrs.evolve(row, next_run=5.0))).next_run == 1000.0
    results = await asyncio.gather(
        store.fire_schedule("tick", 1000.0, 1010.0, new("t1")),
        other.fire_schedule("tick", 1000.0, 1010.0, new("t1-other")),
    )
    assert sorted(results) == [False, True]
    stored = await store.get_schedule("tick")
    assert (stored.next_run, stored.fired) == (1010.0, 1)
    # No overlap: t1 is unfinished, so the next period is consumed but skipped.
    assert await store.fire_schedule("tick", 1010.0, 1020.0, new("t2")) is True
    stored = await store.get_schedule("tick")
    assert (stored.next_run, stored.fired, stored.skipped) == (1020.0, 1, 1)
    assert [r.schedule_id for r in await store.jobs()] == ["tick"]
    assert await store.deactivate_schedule("tick") is True
    assert await store.fire_schedule("tick", 1020.0, 1030.0, new("t3")) is False


# ── Losing the connection ─────────────────────────────────────────────
async def test_store_reconnects_after_its_backends_are_terminated(
    pg_store: PostgresStore, pg_schema: tuple[str, str]
) -> None:
    await pg_store.insert([new("a")])
    await pg_store.wait(0)
    assert terminate_backends(pg_schema[1]) == 2  # the query and the LISTEN connection
    rows, _ = await pg_store.claim(1, "w")  # reconnects and retries transparently
    assert [r.job_id for r in rows] == ["a"]
    # The listener comes back too, and says so with a wake-up.
    assert await pg_store.wait(60) is True
    await pg_store.wait(0)
    waiter = asyncio.create_task(pg_store.wait(60))
    other = PostgresStore(with_query(pg_schema[0]))
    await other.open()
    await other.insert([new("b")])
    assert await waiter is True
    await other.close()
    assert pg_store.reconnects >= 2
    # Outcomes go on a connection of their own: it comes back the same way.
    assert await pg_store.finish([Outcome(job_id="a", status="completed")], "w") == ["a"]
    before = pg_store.reconnects
    assert terminate_backends(pg_schema[1]) == 3  # queries, LISTEN and outcomes
    rows, _ = await pg_store.claim(1, "w")
    assert [r.job_id for r in rows] == ["b"]
    assert await pg_store.finish([Outcome(job_id="b", status="completed")], "w") == ["b"]
    assert pg_store.reconnects >= before + 2
    assert await statuses(pg_store) == {"a": "completed", "b": "completed"}


async def test_rows_read_back_as_the_store_api_wrote_them(pg_store: PostgresStore) -> None:
    # A job through its whole life (insert, claim, finish) and a schedule:
    # what `get`, `jobs`, `counts` and `get_schedule` return is what was written,
    # with JSON columns decoded and the lease let go.
    await pg_store.insert([attrs.evolve(new("k1"), options={"priority": 3}, key="K")])
    claimed, _ = await pg_store.claim(1, "w")
    assert [(r.job_id, r.status, r.attempts, r.lease_owner) for r in claimed] == [
        ("k1", "running", 1, "w")
    ]
    assert await pg_store.finish(
        [Outcome(job_id="k1", status="completed", result=encode_result({"ok": True}))], "w"
    )
    row = await pg_store.get("k1")
    assert row is not None
    assert (row.status, row.attempts, row.result, row.key) == ("completed", 1, {"ok": True}, "K")
    assert (row.args, row.options) == ({"n": "k1"}, {"priority": 3})
    assert (row.lease_owner, row.lease_expires, row.last_error) == (None, None, None)
    assert row.started_at is not None and row.finished_at is not None
    # `get` adds the attempt history; lists leave it out.
    assert [(a.number, a.status, a.worker) for a in row.history] == [(1, "completed", "w")]
    listed = attrs.evolve(row, history=())
    assert await pg_store.jobs() == [listed] and await pg_store.counts() == {"completed": 1}
    assert await pg_store.unfinished(["k1"]) == 0
    # The database holds real JSON, not strings of it (other tools read it too).
    async with pg_store.connection() as conn:
        cur = await conn.execute(
            sql.SQL("SELECT result->>'ok' AS ok FROM {}.jobs").format(
                sql.Identifier(pg_store.schema)
            )
        )
        assert await cur.fetchall() == [{"ok": "true"}]
    schedule = SharedScheduleRow(
        schedule_id="s1",
        type="noop",
        args={"n": 1},
        options={},
        trigger={"kind": "interval", "seconds": 5},
        next_run=10.0,
    )
    assert await pg_store.add_schedule(schedule) == schedule
    assert (await pg_store.get_schedule("s1")).trigger == {"kind": "interval", "seconds": 5}
    assert pg_store.durable and pg_store.shared
    masked = PostgresStore("postgresql://u:secret@localhost/db")
    assert "secret" not in masked.url and "***" in masked.url


async def test_a_version_1_store_is_migrated_to_the_current_version(
    pg_schema: tuple[str, str],
) -> None:
    from jobsched_plugins.postgres_store.migrations import MIGRATIONS

    schema = pg_schema[1]
    with psycopg.connect(base_dsn(), autocommit=True) as conn:
        conn.execute(f'CREATE SCHEMA "{schema}"')
        conn.execute(f'CREATE TABLE "{schema}".schema_version (version int)')
        for statement in MIGRATIONS[0]:
            conn.execute(statement.replace("{s}", f'"{schema}"'))
        conn.execute(f'INSERT INTO "{schema}".schema_version VALUES (1)')
        conn.execute(
            f'INSERT INTO "{schema}".jobs (job_id, type, args, options, status, run_at, '
            "submitted_at, sort_key) VALUES ('old', 'noop', '{}', '{}', 'pending', 0, 0, "
            "'{0}')"
        )
    s = PostgresStore(pg_schema[0])
    await s.open()
    try:
        assert await s.schema_version() == SCHEMA_VERSION
        row = await s.get("old")  # the data survived, with the new column empty
        assert row is not None and row.unique_key is None and row.status == "pending"
        assert row.sort_key == (0.0,)  # version 15 packs it, unchanged
        assert row.lease_expiries == 0  # version 9 counts from 0
        # version 12: nobody refused it
        assert (row.build_refusals, row.last_refusal, row.refused_by) == (0, None, ())
        assert row.queue == "default"  # version 13 puts stored jobs in the default queue
        assert await s.history(300.0, 0.0, None, None) == ([], [])  # version 17: no history yet
    finally:
        await s.close()


async def test_a_version_4_store_keeps_its_keys_with_partial_indexes(
    pg_schema: tuple[str, str],
) -> None:
    # Version 5 indexes only the jobs that have a key or a unique key; what
    # the store knows by them before the migration still deduplicates after.
    from jobsched_plugins.postgres_store.migrations import MIGRATIONS

    schema = pg_schema[1]
    with psycopg.connect(base_dsn(), autocommit=True) as conn:
        conn.execute(f'CREATE SCHEMA "{schema}"')
        conn.execute(f'CREATE TABLE "{schema}".schema_version (version int)')
        for version, statements in enumerate(MIGRATIONS[:4], start=1):
            for statement in statements:
                conn.execute(statement.replace("{s}", f'"{schema}"'))
            conn.execute(f'INSERT INTO "{schema}".schema_version VALUES ({version})')
    s = PostgresStore(pg_schema[0])
    try:
        with psycopg.connect(base_dsn(), autocommit=True) as conn:
            conn.execute(
                f'INSERT INTO "{schema}".jobs (job_id, key, unique_key, type, args, options, '
                "status, run_at, submitted_at, sort_key) VALUES "
                "('keyed', 'K', NULL, 'noop', '{}', '{}', 'pending', 0, 0, '{0}'), "
                "('held', NULL, 'U', 'noop', '{}', '{}', 'pending', 0, 0, '{0}')"
            )
        await s.open()
        assert await s.schema_version() == SCHEMA_VERSION
        with psycopg.connect(base_dsn(), autocommit=True) as conn:
            indexes = dict(
                conn.execute(
                    "SELECT indexname, indexdef FROM pg_indexes WHERE schemaname = %s",
                    [schema],
                ).fetchall()
            )
        assert "WHERE (key IS NOT NULL)" in indexes["jobs_key"]
        assert "unique_key IS NOT NULL" in indexes["jobs_unique"]
        assert "jobs_key_key" not in indexes
        assert await s.insert([attrs.evolve(new("again"), key="K")]) == ["keyed"]
        assert await s.insert([attrs.evolve(new("twice"), unique_key="U")]) == ["held"]
        assert await s.insert([new("plain1"), new("plain2")]) == ["plain1", "plain2"]
        with (
            pytest.raises(psycopg.errors.UniqueViolation),
            psycopg.connect(base_dsn(), autocommit=True) as conn,
        ):
            conn.execute(
                f'INSERT INTO "{schema}".jobs (job_id, key, type, args, options, '
                "status, run_at, submitted_at, sort_key) VALUES "
                f"('other', 'K', 'noop', '{{}}', '{{}}', 'pending', 0, 0, \"{schema}\".sort_key(0))"
            )
    finally:
        await s.close()


async def test_unique_key_allows_one_unfinished_job_in_the_whole_cluster(
    store: Any, other: Any
) -> None:
    def uniq(job_id: str) -> NewJob:
        return attrs.evolve(new(job_id), unique_key="report")

    got = await asyncio.gather(store.insert([uniq("u1")]), other.insert([uniq("u2")]))
    assert sorted(got) in (
        [["u1"], ["u1"]],
        [["u2"], ["u2"]],
    )
    winner = got[0][0]
    assert [r.job_id for r in await store.jobs()] == [winner]
    await store.claim(1, "w")
    assert await store.insert([uniq("u3")]) == [winner]  # running: still deduplicated
    await store.finish([Outcome(job_id=winner, status="completed")], "w")
    assert await store.insert([uniq("u3")]) == ["u3"]  # finished: the key is free again


async def test_a_read_only_open_creates_nothing_and_names_what_is_wrong(
    pg_schema: tuple[str, str],
) -> None:
    from jobsched.store import StoreContext

    readonly = StoreContext(worker_id="reader", readonly=True)
    reader = PostgresStore(pg_schema[0])
    with pytest.raises(StoreError, match=f"schema '{pg_schema[1]}' does not exist"):
        await reader.open(readonly)
    await reader.close()
    with psycopg.connect(base_dsn(), autocommit=True) as conn:
        assert conn.execute(
            "SELECT count(*) FROM information_schema.schemata WHERE schema_name = %s",
            [pg_schema[1]],
        ).fetchone() == (0,)
        conn.execute(f'CREATE SCHEMA "{pg_schema[1]}"')
        conn.execute(f'CREATE TABLE "{pg_schema[1]}".other (x int)')
    reader = PostgresStore(pg_schema[0])
    with pytest.raises(StoreError, match="but is not a jobsched store"):
        await reader.open(readonly)
    await reader.close()
    with psycopg.connect(base_dsn(), autocommit=True) as conn:
        conn.execute(f'DROP TABLE "{pg_schema[1]}".other')
    writer = PostgresStore(pg_schema[0])
    await writer.open()
    await writer.close()
    reader = PostgresStore(pg_schema[0])
    await reader.open(readonly)
    try:
        assert await reader.jobs() == []
        # Nothing listened to: a listener always starts with a wake-up.
        assert await reader.wait(0) is False
    finally:
        await reader.close()


# ── live views: every change sends a NOTIFY ───────────────────────────
@pytest.fixture
async def watcher(
    pg_schema: tuple[str, str], pg_store: PostgresStore
) -> AsyncIterator[PostgresStore]:
    """Another process's view of `pg_store`, woken only by NOTIFY."""
    s = PostgresStore(pg_schema[0])
    await s.open()
    try:
        # The listener's first LISTEN counts as a change (it may have missed some).
        assert await s.wait_changed(30) is True
        yield s
    finally:
        await s.close()


async def test_a_claim_wakes_the_live_views(
    pg_store: PostgresStore, watcher: PostgresStore
) -> None:
    await pg_store.insert([new("a")])
    assert await watcher.wait_changed(30) is True  # the insert's NOTIFY
    claimed, _ = await pg_store.claim(1, "w")
    assert [r.job_id for r in claimed] == ["a"]
    # Nothing but the claim changed since: its NOTIFY woke the watcher, not the timeout.
    assert await watcher.wait_changed(30) is True
    assert (await watcher.get("a")).status == "running"


class Heard:
    """The NOTIFY payloads of the store's channel, heard on a connection of
    the test's own; `until_marker` reads them up to a marker it sends itself
    (delivered after everything committed before it)."""

    def __init__(self, conn: psycopg.AsyncConnection[Any], channel: str) -> None:
        self.conn = conn
        self.channel = channel

    async def until_marker(self) -> list[str]:
        await self.conn.execute("SELECT pg_notify(%s, 'marker')", [self.channel])
        heard: list[str] = []
        async for note in self.conn.notifies(timeout=30):
            if note.payload == "marker":
                return heard
            heard.append(note.payload)
        raise AssertionError(f"the marker never came back; heard {heard}")


@pytest.fixture
async def heard(pg_schema: tuple[str, str], pg_store: PostgresStore) -> AsyncIterator[Heard]:
    conn = await psycopg.AsyncConnection.connect(base_dsn(), autocommit=True)
    try:
        channel = pg_store.db.channel
        await conn.execute(sql.SQL("LISTEN {}").format(sql.Identifier(channel)))
        yield Heard(conn, channel)
    finally:
        await conn.close()


async def test_a_claim_notifies_once_and_an_empty_claim_not_at_all(
    pg_store: PostgresStore, heard: Heard
) -> None:
    assert await pg_store.claim(4, "w") == ([], None)
    assert await heard.until_marker() == []
    await pg_store.insert([new(f"j{i}") for i in range(3)])
    assert await heard.until_marker() == ["w"]
    claimed, _ = await pg_store.claim(3, "w")
    assert len(claimed) == 3
    assert await heard.until_marker() == ["p"]  # one per claiming statement


async def test_a_claim_under_stored_limits_notifies_too(
    pg_store: PostgresStore, heard: Heard
) -> None:
    await pg_store.sync_limits({"job_types": {"noop": 1}})
    await pg_store.insert([new("a"), new("b")])
    assert await heard.until_marker() == ["w"]
    claimed, _ = await pg_store.claim(2, "w")
    assert [r.job_id for r in claimed] == ["a"]  # the limit holds the second
    assert await heard.until_marker() == ["p"]


async def test_inserts_notify_once_whatever_they_insert(
    pg_store: PostgresStore, heard: Heard
) -> None:
    await pg_store.insert([new("up")])
    # A delayed job wakes the claimers (one sleeping until its next due job
    # learns of an earlier one); a dependent still waiting wakes the live views.
    await pg_store.insert([new("later", delay=3600.0)])
    await pg_store.insert([new("down", deps=("up",))])
    assert await heard.until_marker() == ["w", "w", "p"]
    # A batch that inserts nothing new (its key is stored) sends nothing.
    await pg_store.insert([new("k1", key="k")])
    assert await heard.until_marker() == ["w"]
    assert await pg_store.insert([new("k2", key="k")]) == ["k1"]
    assert await heard.until_marker() == []
    # The COPY path of a big batch: one NOTIFY too.
    await pg_store.insert([new(f"bulk{i}") for i in range(COPY_AT_LEAST)])
    assert await heard.until_marker() == ["w"]


async def test_client_wait_for_change_wakes_on_a_claim_and_a_delayed_insert(
    pg_schema: tuple[str, str], pg_store: PostgresStore
) -> None:
    from jobsched import Client

    # Stored before the client listens: its NOTIFY never reaches the client.
    await pg_store.insert([new("a")])
    async with Client(pg_schema[0]) as client:
        # The client's first LISTEN counts as a change (it may have missed some).
        assert await client.wait_for_change(30) is True
        waiter = asyncio.create_task(client.wait_for_change(30))
        await asyncio.sleep(0)  # it waits before the claim is sent
        claimed, _ = await pg_store.claim(1, "w")
        assert [r.job_id for r in claimed] == ["a"]
        # Nothing else changed: the claim's NOTIFY woke it, not its timeout.
        assert await waiter is True
        assert (await client.get("a")).status.value == "running"

        waiter = asyncio.create_task(client.wait_for_change(30))
        await asyncio.sleep(0)
        await pg_store.insert([new("later", delay=3600.0)])
        assert await waiter is True
        assert (await client.get("later")).status.value == "pending"


async def test_a_purge_and_an_expiry_notify_only_when_they_change_something(
    pg_store: PostgresStore, heard: Heard
) -> None:
    await pg_store.insert([new("a"), new("b")])
    claimed, _ = await pg_store.claim(2, "w")
    assert len(claimed) == 2
    await pg_store.finish(
        [
            Outcome(job_id=j, status="completed", result=encode_result(1), result_ttl=0.0)
            for j in ("a", "b")
        ],
        "w",
    )
    assert await heard.until_marker() == ["w", "p", "f"]
    assert await pg_store.expire_results() == 2
    assert await heard.until_marker() == ["p"]
    assert await pg_store.expire_results() == 0
    assert await pg_store.purge(0.0, ["completed"]) == 0  # none finished before 1970
    assert await heard.until_marker() == []
    assert await pg_store.purge(time.time() + 60, ["completed"]) == 2
    assert await heard.until_marker() == ["p"]
