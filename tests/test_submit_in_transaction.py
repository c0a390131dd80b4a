"""``Client.submit(conn=...)``: jobs inserted in the application's own
transaction, on PostgreSQL (psycopg sync and async, SQLAlchemy sync and
async) and on a shared SQLite file (``sqlite3``). A commit stores them and
wakes the workers; a rollback leaves no job and wakes nobody."""

from __future__ import annotations

import os
import re
import sqlite3
import subprocess
import sys
import threading
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest
import sqlalchemy
from sqlalchemy.ext.asyncio import AsyncSession, create_async_engine
from sqlalchemy.orm import Session

from jobsched import (
    BlockingClient,
    Client,
    Job,
    JobScheduler,
    JobStatus,
    LocalClient,
    SchedulerError,
    StoreError,
    Submission,
    UnknownJobError,
    build_job,
)
from test_client_docs import project, worker  # noqa: F401 - fixtures


def email(to: str) -> Job:
    return build_job("email", {"to": to, "subject": "hello", "latency": 0})


def plain_dsn(url: str) -> str:
    """The libpq DSN of a store URL (without jobsched's own parameters)."""
    return url.split("?")[0]


@pytest.fixture
async def pg(pg_schema: tuple[str, str]) -> AsyncIterator[tuple[Client, str, str]]:
    """(an open Client, the database's DSN, the NOTIFY channel)."""
    url, schema = pg_schema
    async with Client(url) as client:
        yield client, plain_dsn(url), f"jobsched_{schema}"


@pytest.fixture
def listener(pg: tuple[Client, str, str]) -> Iterator[psycopg.Connection[Any]]:
    """A connection LISTENing on the store's channel, as a worker does."""
    _, dsn, channel = pg
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(f'LISTEN "{channel}"')
        yield conn


def first_notification(listener: psycopg.Connection[Any], dsn: str, channel: str) -> str:
    """The first payload the listener receives from now on, after sending a
    sentinel of our own: "sentinel" if nothing else was notified before it."""
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute("SELECT pg_notify(%s, 'sentinel')", [channel])
    note = next(listener.notifies(timeout=30))
    return note.payload


# ── PostgreSQL: commit and rollback ────────────────────────────────────
async def test_a_committed_job_wakes_a_waiting_worker_that_runs_it(
    pg: tuple[Client, str, str], pg_schema: tuple[str, str]
) -> None:
    client, dsn, _ = pg
    async with JobScheduler(store=pg_schema[0], shared=True):
        async with await psycopg.AsyncConnection.connect(dsn) as conn:
            await conn.execute("CREATE TEMP TABLE orders (id int)")
            await conn.execute("INSERT INTO orders VALUES (1)")
            job_id = await client.submit(email("a@example.com"), conn=conn)
            # Not visible outside the transaction until it commits.
            assert await client.jobs() == []
            await conn.commit()
        done = await client.wait(job_id, timeout=30)
    assert (done.status, done.result) == (JobStatus.COMPLETED, "sent to a@example.com")
    assert done.submitted_by == client.identity


async def test_a_rollback_leaves_no_job_and_notifies_nobody(
    pg: tuple[Client, str, str], listener: psycopg.Connection[Any]
) -> None:
    client, dsn, channel = pg
    async with await psycopg.AsyncConnection.connect(dsn) as conn:
        await client.submit(email("a@example.com"), conn=conn)
        await client.submit_many([email("b@example.com")], conn=conn)
        await conn.rollback()
    assert first_notification(listener, dsn, channel) == "sentinel"
    assert await client.jobs() == []
    # The same submit, committed, is the first thing the listener hears.
    async with await psycopg.AsyncConnection.connect(dsn) as conn:
        job_id = await client.submit(email("a@example.com"), conn=conn)
        await conn.commit()
    assert next(listener.notifies(timeout=30)).payload == "w"
    assert [info.job_id for info in await client.jobs()] == [job_id]


async def test_a_sync_psycopg_connection_in_an_async_client_and_a_blocking_client(
    pg: tuple[Client, str, str], pg_schema: tuple[str, str]
) -> None:
    client, dsn, _ = pg
    with psycopg.connect(dsn) as conn:
        first = await client.submit(email("a@example.com"), conn=conn)
        with BlockingClient(pg_schema[0]) as blocking:
            second, third = blocking.submit_many(
                [email("b@example.com"), Submission(email("c@example.com"), depends_on=[first])],
                conn=conn,
            )
            fourth = blocking.submit(email("d@example.com"), conn=conn, priority="high")
        conn.commit()
    infos = {info.job_id: info for info in await client.jobs()}
    assert list(infos) == [first, second, third, fourth]
    assert (await client.get(third)).depends_on == (first,)
    assert infos[fourth].priority.name == "HIGH"


async def test_a_blocking_client_in_a_rolled_back_transaction_stores_nothing(
    pg: tuple[Client, str, str], pg_schema: tuple[str, str], listener: psycopg.Connection[Any]
) -> None:
    client, dsn, channel = pg
    with BlockingClient(pg_schema[0]) as blocking, psycopg.connect(dsn) as conn:
        with conn.transaction(force_rollback=True):
            blocking.submit(email("a@example.com"), conn=conn)
        assert first_notification(listener, dsn, channel) == "sentinel"
    assert await client.jobs() == []


# ── PostgreSQL: SQLAlchemy ─────────────────────────────────────────────
def sqlalchemy_url(dsn: str, driver: str = "psycopg") -> str:
    return dsn.replace("postgresql://", f"postgresql+{driver}://", 1)


async def test_sqlalchemy_connections_and_sessions(
    pg: tuple[Client, str, str], pg_schema: tuple[str, str]
) -> None:
    client, dsn, _ = pg
    engine = sqlalchemy.create_engine(sqlalchemy_url(dsn))
    try:
        with engine.connect() as conn:  # commit as you go: submit begins it
            kept = await client.submit(email("conn@example.com"), conn=conn)
            conn.commit()
        with engine.connect() as conn:
            await client.submit(email("dropped@example.com"), conn=conn)
            conn.rollback()
        with Session(engine) as session, session.begin():
            in_session = await client.submit(email("session@example.com"), conn=session)
        with BlockingClient(pg_schema[0]) as blocking, Session(engine) as session:
            with session.begin():
                from_blocking = blocking.submit(email("blocking@example.com"), conn=session)
            with session.begin():
                blocking.submit_many([email("rolled@example.com")], conn=session)
                session.rollback()
    finally:
        engine.dispose()
    async_engine = create_async_engine(sqlalchemy_url(dsn))
    try:
        async with AsyncSession(async_engine) as session:
            async with session.begin():
                in_async = await client.submit(email("async@example.com"), conn=session)
            async with session.begin():
                await client.submit(email("rolled@example.com"), conn=session)
                await session.rollback()
        async with async_engine.connect() as conn:
            on_async_conn = await client.submit(email("aconn@example.com"), conn=conn)
            await conn.commit()
            with (
                BlockingClient(pg_schema[0]) as blocking,
                pytest.raises(
                    StoreError, match=r"AsyncConnection \(async\): give it to an async Client"
                ),
            ):
                blocking.submit(email("a@example.com"), conn=conn)
    finally:
        await async_engine.dispose()
    stored = [info.job_id for info in await client.jobs()]
    assert stored == [kept, in_session, from_blocking, in_async, on_async_conn]


async def test_an_sqlalchemy_connection_on_another_driver_is_refused(
    pg: tuple[Client, str, str],
) -> None:
    client, _, _ = pg
    engine = sqlalchemy.create_engine("sqlite://")
    with engine.connect() as conn, pytest.raises(StoreError, match=r"sqlite\+pysqlite"):
        await client.submit(email("a@example.com"), conn=conn)


# ── PostgreSQL: keys, unique keys and dependencies in the transaction ────
async def test_dependencies_keys_and_unique_keys_inside_the_transaction(
    pg: tuple[Client, str, str],
) -> None:
    client, dsn, _ = pg
    stored_unique = await client.submit(email("held@example.com"), unique_key="U-stored")
    stored_key = await client.submit(email("keyed@example.com"), key="K-stored")
    async with await psycopg.AsyncConnection.connect(dsn) as conn:
        upstream = await client.submit(email("a@example.com"), conn=conn)
        downstream = await client.submit(email("b@example.com"), conn=conn, depends_on=[upstream])
        first = await client.submit(email("c@example.com"), conn=conn, unique_key="U-new")
        again = await client.submit(email("c@example.com"), conn=conn, unique_key="U-new")
        held = await client.submit(email("d@example.com"), conn=conn, unique_key="U-stored")
        resumed = await client.submit(email("e@example.com"), conn=conn, key="K-stored")
        batch = await client.submit_many(
            [email("f@example.com"), Submission(email("g@example.com"), key="K-new")], conn=conn
        )
        await conn.commit()
    assert again == first
    assert (held, resumed) == (stored_unique, stored_key)
    assert (await client.get(downstream)).depends_on == (upstream,)
    assert await client.dependents(upstream) == [downstream]
    ids = [info.job_id for info in await client.jobs()]
    assert ids == [stored_unique, stored_key, upstream, downstream, first, *batch]


async def test_a_job_keeps_its_queue_and_group_inside_the_transaction(
    pg: tuple[Client, str, str],
) -> None:
    client, dsn, _ = pg
    async with await psycopg.AsyncConnection.connect(dsn) as conn:
        job_id = await client.submit(
            email("t@example.com"), conn=conn, queue="emails", group="tenant-1"
        )
        await conn.commit()
    info = await client.get(job_id)
    assert (info.queue, info.group) == ("emails", "tenant-1")


def test_a_blocking_submit_on_sqlite_keeps_its_queue_and_group(tmp_path: Path) -> None:
    path = tmp_path / "jobs.db"
    with BlockingClient(f"sqlite:///{path}") as client:
        with sqlite3.connect(path) as conn:  # commits on leaving
            job_id = client.submit(
                email("t@example.com"), conn=conn, queue="emails", group="tenant-1"
            )
        info = client.get(job_id)
        assert (info.queue, info.group) == ("emails", "tenant-1")


async def test_a_unique_key_taken_by_a_concurrent_transaction_resolves_to_its_job(
    pg: tuple[Client, str, str], pg_schema: tuple[str, str]
) -> None:
    """The second transaction's INSERT waits on the first's uncommitted row,
    fails when it commits, and is planned again in its savepoint: it answers
    with the first's job and its own transaction goes on."""
    client, dsn, _ = pg
    answer: list[str] = []
    with psycopg.connect(dsn) as first, psycopg.connect(dsn) as second:
        taken = await client.submit(email("a@example.com"), conn=first, unique_key="U")
        second_pid = second.info.backend_pid

        def submit_second() -> None:
            with BlockingClient(pg_schema[0]) as blocking:
                answer.append(blocking.submit(email("b@example.com"), conn=second, unique_key="U"))

        thread = threading.Thread(target=submit_second)
        thread.start()
        with psycopg.connect(dsn, autocommit=True) as watch:
            # Until its INSERT waits on the first's row (or the thread failed).
            while (
                thread.is_alive()
                and not watch.execute(
                    "SELECT wait_event_type = 'Lock' FROM pg_stat_activity WHERE pid = %s",
                    [second_pid],
                ).fetchone()[0]
            ):
                watch.execute("SELECT pg_sleep(0.01)")
        first.commit()
        thread.join(30)
        assert answer == [taken]
        second.execute("SELECT 1")  # its transaction is still usable
        second.commit()
    assert [info.job_id for info in await client.jobs()] == [taken]


# ── PostgreSQL: errors ─────────────────────────────────────────────────
async def test_an_unknown_dependency_refuses_the_submit_and_spares_the_transaction(
    pg: tuple[Client, str, str],
) -> None:
    client, dsn, _ = pg
    async with await psycopg.AsyncConnection.connect(dsn) as conn:
        with pytest.raises(UnknownJobError, match="unknown dependencies: \\['job-nope'\\]"):
            await client.submit(email("a@example.com"), conn=conn, depends_on=["job-nope"])
        with pytest.raises(UnknownJobError, match="job-nope"):
            await client.submit(email("a@example.com"), conn=conn, depends_on=["job-nope"], key="K")
        with pytest.raises(ValueError, match="priority"):
            await client.submit(email("a@example.com"), conn=conn, priority="urgent")
        kept = await client.submit(email("b@example.com"), conn=conn)
        await conn.commit()
    assert [info.job_id for info in await client.jobs()] == [kept]


async def test_connections_that_cannot_take_the_jobs_are_refused(
    pg: tuple[Client, str, str], pg_schema: tuple[str, str], tmp_path: Path
) -> None:
    client, dsn, _ = pg
    schema = pg_schema[1]
    with (
        sqlite3.connect(tmp_path / "other.db") as other,
        pytest.raises(
            StoreError, match=r"conn= is a sqlite3\.Connection; this store takes a psycopg 3"
        ),
    ):
        await client.submit(email("a@example.com"), conn=other)
    with (
        psycopg.connect(dsn, autocommit=True) as auto,
        pytest.raises(StoreError, match="autocommit mode outside a transaction"),
    ):
        await client.submit(email("a@example.com"), conn=auto)
    with psycopg.connect(dsn) as failed:
        with pytest.raises(psycopg.errors.DivisionByZero):
            failed.execute("SELECT 1/0")
        with pytest.raises(StoreError, match="in a failed transaction"):
            await client.submit(email("a@example.com"), conn=failed)
    elsewhere = dsn.rsplit("/", 1)[0] + "/postgres"
    with (
        psycopg.connect(elsewhere) as conn,
        pytest.raises(
            StoreError, match="connected to database 'postgres', not this store's 'test'"
        ),
    ):
        await client.submit(email("a@example.com"), conn=conn)
    async with Client(f"{dsn}?schema=t_dropped_{schema}") as gone:
        with psycopg.connect(dsn, autocommit=True) as admin:
            admin.execute(f'DROP SCHEMA "t_dropped_{schema}" CASCADE')
        with (
            psycopg.connect(dsn) as conn,
            pytest.raises(StoreError, match=f"has no jobsched schema 't_dropped_{schema}'"),
        ):
            await gone.submit(email("a@example.com"), conn=conn)
    async with await psycopg.AsyncConnection.connect(dsn) as aconn:
        with (
            BlockingClient(pg_schema[0]) as blocking,
            pytest.raises(StoreError, match=r"\(async\): give it to an async Client"),
        ):
            blocking.submit(email("a@example.com"), conn=aconn)
    assert await client.jobs() == []


async def test_in_process_clients_refuse_a_connection(tmp_path: Path) -> None:
    async with Client("memory://txenqueue") as client:
        with (
            sqlite3.connect(tmp_path / "x.db") as conn,
            pytest.raises(
                SchedulerError, match="memory://txenqueue: this store cannot insert in the caller"
            ),
        ):
            await client.submit(email("a@example.com"), conn=conn)
        assert await client.jobs() == []
    async with JobScheduler() as scheduler, LocalClient(scheduler) as local:
        with sqlite3.connect(tmp_path / "x.db") as conn:
            with pytest.raises(SchedulerError, match=r"in-process scheduler .* cannot insert"):
                await local.submit(email("a@example.com"), conn=conn)
            with pytest.raises(SchedulerError, match="in-process scheduler"):
                await local.submit_many([email("a@example.com")], conn=conn)


# ── shared SQLite ──────────────────────────────────────────────────────
@pytest.fixture
async def lite(tmp_path: Path) -> AsyncIterator[tuple[Client, str, Path]]:
    path = tmp_path / "jobs.db"
    url = f"sqlite:///{path}"
    async with Client(url) as client:
        yield client, url, path


async def test_sqlite_commit_runs_and_rollback_leaves_nothing(
    lite: tuple[Client, str, Path],
) -> None:
    client, url, path = lite
    async with JobScheduler(store=url, shared=True):
        conn = sqlite3.connect(path)  # the sqlite3 module opens the transaction
        try:
            conn.execute("CREATE TABLE orders (id INTEGER)")
            conn.commit()
            conn.execute("INSERT INTO orders VALUES (1)")
            dropped = await client.submit(email("dropped@example.com"), conn=conn)
            conn.rollback()
            conn.execute("INSERT INTO orders VALUES (2)")
            upstream = await client.submit(email("a@example.com"), conn=conn)
            downstream, again = await client.submit_many(
                [
                    Submission(email("b@example.com"), depends_on=[upstream], unique_key="U"),
                    Submission(email("c@example.com"), unique_key="U"),
                ],
                conn=conn,
            )
            conn.commit()
        finally:
            conn.close()
        done = await client.wait(downstream, timeout=30)
    assert done.status is JobStatus.COMPLETED and again == downstream
    assert [info.job_id for info in await client.jobs()] == [upstream, downstream]
    with pytest.raises(UnknownJobError):
        await client.get(dropped)


def test_sqlite_blocking_client_and_refusals(tmp_path: Path) -> None:
    path = tmp_path / "jobs.db"
    url = f"sqlite:///{path}"
    with BlockingClient(url) as client:
        with sqlite3.connect(path) as conn:  # commits on leaving
            job_id = client.submit(email("a@example.com"), conn=conn)
            with pytest.raises(UnknownJobError, match="unknown dependencies"):
                client.submit(email("b@example.com"), conn=conn, depends_on=["job-nope"])
        assert [info.job_id for info in client.jobs()] == [job_id]
        other = sqlite3.connect(tmp_path / "other.db")
        memory = sqlite3.connect(":memory:")
        auto = sqlite3.connect(path, isolation_level=None)
        try:
            with pytest.raises(StoreError, match=r"other\.db, not to this store's file"):
                client.submit(email("a@example.com"), conn=other)
            with pytest.raises(StoreError, match="an in-memory database"):
                client.submit(email("a@example.com"), conn=memory)
            with pytest.raises(StoreError, match="autocommit mode outside a transaction"):
                client.submit(email("a@example.com"), conn=auto)
            with pytest.raises(StoreError, match=r"conn= is a builtins\.object; this store"):
                client.submit(email("a@example.com"), conn=object())
        finally:
            for conn in (other, memory, auto):
                conn.close()
        assert len(client.jobs()) == 1


# ── docs/client.md's example ───────────────────────────────────────────
def orders_example() -> tuple[str, str]:
    """docs/client.md's ``# file: orders.py`` block and the output it prints."""
    text = (Path(__file__).resolve().parent.parent / "docs" / "client.md").read_text()
    ((code, output),) = re.findall(
        r"```python\n(# file: orders\.py\n.*?)```\n\n```text\n(.*?)```", text, flags=re.S
    )
    return code, output


def test_the_client_page_example_commits_the_order_and_its_email(
    worker: str,  # noqa: F811 - the fixture imported above
    project: Path,  # noqa: F811 - the fixture imported above
    pg_schema: tuple[str, str],
) -> None:
    url, schema = pg_schema
    dsn = plain_dsn(url)
    code, output = orders_example()
    code = code.replace('"postgresql://app@db/shop"', repr(dsn))
    code = code.replace("?schema=jobsched", f"?schema={schema}")
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(f'CREATE TABLE "{schema}".orders (email text)')
    done = subprocess.run(
        [sys.executable, "-c", code],
        cwd=project,
        capture_output=True,
        text=True,
        timeout=120,
        # The application's tables are in the test's schema, not in public.
        env={**os.environ, "PGOPTIONS": f"-c search_path={schema}"},
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout == output
    with psycopg.connect(dsn) as conn:
        rows = conn.execute(f'SELECT email FROM "{schema}".orders').fetchall()
    assert rows == [("ada@example.com",)]
