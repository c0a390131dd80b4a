"""Bad input and faults: every one is a clear error naming the store and the
problem, and the data is left as it was."""

from __future__ import annotations

import asyncio
import os
import re
import socket
import sqlite3
from pathlib import Path

import pytest

from jobsched import (
    FunctionJob,
    JobScheduler,
    JobSpecError,
    JobStatus,
    PluginError,
    SchedulerError,
    StoreError,
    build_job,
)
from jobsched.backends import LocalBackend, SharedBackend
from jobsched.store import SHARED_STORE_MEMBERS, StoreContext
from jobsched_plugins.memory_store import MemoryStore
from jobsched_plugins.sqlite_store import SQLiteStore
from store_support import (
    Gone,
    Noop,
    Record,
    RecordingStore,
    gone_plugin,
    jobs_plugin,
    scheduler,
)


@pytest.fixture
def db(tmp_path: Path) -> Path:
    return tmp_path / "jobs.db"


def url_of(path: Path, query: str = "") -> str:
    return f"sqlite:///{path}{query}"


def job_rows(path: Path) -> list[tuple[object, ...]]:
    with sqlite3.connect(path) as conn:
        return conn.execute("SELECT * FROM jobsched_jobs ORDER BY seq").fetchall()


async def fill(path: Path, *jobs: object, extra: tuple[object, ...] = ()) -> list[str]:
    """Run these jobs to the end in a store at `path`; return their ids."""
    s = scheduler(url_of(path), extra=extra)
    await s.start()
    ids = [s.submit(job) for job in jobs]  # type: ignore[arg-type]
    await s.join()
    await s.stop()
    return ids


# ── store URLs ─────────────────────────────────────────────────────────
def test_an_unknown_store_scheme_lists_the_known_ones() -> None:
    with pytest.raises(PluginError, match=r"unknown store 'sqlit'.*did you mean 'sqlite'"):
        JobScheduler(store="sqlit:///x.db")


@pytest.mark.parametrize(
    ("url", "problem"),
    [
        ("sqlite://", "needs a file path"),
        ("sqlite:///:memory:", "needs a file path"),
        ("sqlite://host/x.db", "has a host"),
        ("sqlite:///x.db?fast=yes", "unknown option"),
        ("sqlite:///x.db?timeout=soon", "timeout must be a number"),
        ("sqlite:///x.db?synchronous=off", "synchronous must be"),
        ("memory:somewhere", "must be 'memory://'"),
        ("memory://queue?lease=0", "lease must be a number of seconds"),
        ("memory://queue?fast=yes", "unknown option 'fast'"),
        ("nourl", "has no scheme|unknown store"),
    ],
)
def test_bad_store_urls_are_refused_when_composing(url: str, problem: str) -> None:
    with pytest.raises((StoreError, PluginError), match=problem):
        JobScheduler(store=url)


def test_something_that_is_not_a_store_is_refused() -> None:
    with pytest.raises(TypeError, match="is not a store: it lacks"):
        JobScheduler(store=object())  # type: ignore[arg-type]


async def test_the_memory_store_costs_nothing() -> None:
    s = JobScheduler(store="memory://")
    assert isinstance(s.store, MemoryStore) and isinstance(s.kernel.backend, LocalBackend)
    # Nothing added to the per-job path: no listener, no submit or finish hook.
    assert (s.kernel.backend.listener, s.kernel.backend.admit, s.kernel.backend.finished) == (
        None,
        None,
        None,
    )
    async with s:
        job_id = s.submit(asyncio.sleep, 0)  # any job: nothing is stored
        await s.join()
        await s.flush()
    assert s.get(job_id).result is None


def test_a_shared_store_runs_on_the_shared_backend_without_a_journal() -> None:
    # Every member of the shared-store contract; the test calls none of them.
    members: dict[str, object] = dict.fromkeys(SHARED_STORE_MEMBERS)
    members.update(url="stub://", durable=True, shared=True)
    store = type("SharedStub", (), members)()
    s = scheduler(store)
    assert isinstance(s.kernel.backend, SharedBackend) and s.kernel.backend.store is store


def test_a_store_that_says_it_is_shared_must_keep_the_shared_contract() -> None:
    store = RecordingStore()
    store.shared = True  # type: ignore[misc]
    with pytest.raises(
        TypeError,
        match=r"not a shared store: it lacks the submit role \(insert\) and the queue role",
    ):
        scheduler(store)


# ── jobs a durable store cannot keep ───────────────────────────────────
async def test_jobs_that_are_not_data_are_refused_at_submit() -> None:
    store = RecordingStore()
    s = scheduler(store)
    await s.start()
    with pytest.raises(JobSpecError, match=r"a plain function cannot be stored"):
        s.submit(FunctionJob(asyncio.sleep, 0))
    with pytest.raises(
        JobSpecError, match=r"argument 'value' of job type 'record' is not a JSON value: <object"
    ):
        s.submit(Record("log", "tag", value=object()))
    odd_retry = Noop()
    odd_retry.retry = object()  # type: ignore[assignment]
    with pytest.raises(JobSpecError, match="not a registered retry policy"):
        s.submit(odd_retry)
    with pytest.raises(JobSpecError, match="Gone is not a registered job type"):
        s.submit(Gone())
    # Nothing refused was recorded, and the scheduler still works.
    ok = s.submit(Noop())
    await s.join()
    await s.stop()
    assert [r.job_id for r in store.jobs.values()] == [ok]


async def test_scheduling_before_start_is_refused_with_a_durable_store() -> None:
    s = scheduler(RecordingStore())
    with pytest.raises(SchedulerError, match=r"start\(\) the scheduler before scheduling"):
        s.schedule_recurring(Noop, 1.0)


async def test_a_submit_before_start_is_checked_at_once() -> None:
    s = scheduler(RecordingStore())
    with pytest.raises(JobSpecError, match="Gone is not a registered job type"):
        s.submit(Gone())
    with pytest.raises(SchedulerError, match="unknown dependencies"):
        s.submit(Noop(), depends_on=["job-999999"])
    job = Noop()
    s.submit(job)
    with pytest.raises(SchedulerError, match="already submitted"):
        s.submit(job)
    await s.start()
    await s.join()
    await s.stop()
    assert job.status is JobStatus.COMPLETED


async def test_an_unknown_dependency_leaves_nothing_behind() -> None:
    store = RecordingStore()
    s = scheduler(store)
    await s.start()
    job = Noop()
    with pytest.raises(SchedulerError, match="unknown dependencies"):
        s.submit(job, depends_on=["job-999999"])
    await s.stop()
    assert store.jobs == {}


# ── files that are not jobsched stores ─────────────────────────────────
async def test_a_corrupt_file_is_refused_and_left_as_it_was(db: Path) -> None:
    garbage = b"this is not a database\n" * 200
    db.write_bytes(garbage)
    s = scheduler(url_of(db))
    with pytest.raises(StoreError, match=rf"{db}.*not a usable SQLite database.*left it unchanged"):
        await s.start()
    assert db.read_bytes() == garbage
    assert not Path(f"{db}-wal").exists()
    await s.stop()  # stopping a scheduler that never started is fine


async def test_another_programs_database_is_refused_and_left_as_it_was(db: Path) -> None:
    with sqlite3.connect(db) as conn:
        conn.execute("CREATE TABLE users (name TEXT)")
        conn.execute("INSERT INTO users VALUES ('ada')")
    before = db.read_bytes()
    s = scheduler(url_of(db))
    with pytest.raises(
        StoreError, match=rf"{db} is not a jobsched database \(it has tables users\)"
    ):
        await s.start()
    assert db.read_bytes() == before  # not even switched to WAL mode
    with sqlite3.connect(db) as conn:
        assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "delete"


async def test_a_store_from_a_newer_jobsched_is_refused(db: Path) -> None:
    await fill(db, Noop())
    with sqlite3.connect(db) as conn:
        conn.execute("UPDATE jobsched_meta SET value = '99' WHERE name = 'schema_version'")
    rows = job_rows(db)
    s = scheduler(url_of(db))
    with pytest.raises(StoreError, match=r"newer jobsched \(schema version 99"):
        await s.start()
    assert job_rows(db) == rows


async def test_a_database_locked_by_another_connection(db: Path) -> None:
    await fill(db, Noop())
    rows = job_rows(db)
    other = sqlite3.connect(db, isolation_level=None)
    other.execute("BEGIN IMMEDIATE")  # holds the write lock, as a busy program would
    try:
        s = scheduler(url_of(db, "?timeout=0.05"))
        with pytest.raises(StoreError, match=rf"{db} is locked by another connection"):
            await s.start()
    finally:
        other.execute("ROLLBACK")
        other.close()
    assert job_rows(db) == rows
    # Once the lock is gone the same store opens.
    s = scheduler(url_of(db))
    await s.start()
    await s.stop()


async def test_one_store_file_serves_one_scheduler_at_a_time(db: Path) -> None:
    first = scheduler(url_of(db))
    await first.start()
    second = scheduler(url_of(db))
    # The lock names its owner as host:pid.
    owner = re.escape(f"({socket.gethostname()}:{os.getpid()},")
    with pytest.raises(StoreError, match=rf"in use by another jobsched process {owner}"):
        await second.start()
    # Reading (jobsched status) does not need the lock.
    reader = SQLiteStore(url_of(db))
    snapshot = await reader.open(StoreContext(worker_id="reader", readonly=True))
    await reader.close()
    assert snapshot.jobs == []
    await first.stop()
    await second.start()  # the lock was released with the first
    await second.stop()


async def test_reading_a_store_that_does_not_exist(db: Path) -> None:
    reader = SQLiteStore(url_of(db))
    with pytest.raises(StoreError, match=f"no such file: {db}"):
        await reader.open(StoreContext(worker_id="reader", readonly=True))
    assert not db.exists()


async def test_a_store_in_a_missing_folder(tmp_path: Path) -> None:
    s = scheduler(url_of(tmp_path / "nowhere" / "jobs.db"))
    with pytest.raises(StoreError, match=r"folder .*nowhere does not exist"):
        await s.start()


# ── rows that cannot be restored ───────────────────────────────────────
async def test_a_row_whose_job_type_was_uninstalled(db: Path) -> None:
    s = scheduler(url_of(db), extra=[gone_plugin])
    await s.start()
    pending = s.submit(Gone(), delay=3600)
    await s.flush()
    await s.stop()
    rows = job_rows(db)
    # The plugin that registered "gone" is uninstalled: start() says so.
    s2 = scheduler(url_of(db))
    with pytest.raises(StoreError) as caught:
        await s2.start()
    message = str(caught.value)
    assert str(db) in message and pending in message
    assert "unknown job type 'gone'" in message and "left unchanged" in message
    assert job_rows(db) == rows
    # With the plugin back, the job is there as it was.
    s3 = scheduler(url_of(db), extra=[gone_plugin])
    await s3.start()
    assert s3.get(pending).status.value == "pending"
    await s3.stop()


async def test_finished_rows_of_an_uninstalled_type_are_history_only(db: Path) -> None:
    [done] = await fill(db, Gone(), extra=(gone_plugin,))
    s = scheduler(url_of(db))
    await s.start()  # no error: a finished job never runs again
    assert done not in {j.job_id for j in s.jobs()}
    new = s.submit(Noop())
    assert new != done
    await s.join()
    await s.stop()
    assert len(job_rows(db)) == 2


async def test_a_row_whose_arguments_no_longer_fit(db: Path) -> None:
    s = scheduler(url_of(db))
    await s.start()
    job_id = s.submit(Noop("x"), delay=3600)
    await s.stop()
    with sqlite3.connect(db) as conn:
        conn.execute("UPDATE jobsched_jobs SET args = '{\"colour\": 1}'")
    s2 = scheduler(url_of(db))
    with pytest.raises(StoreError, match=rf"{job_id} \(pending\) cannot be restored.*'colour'"):
        await s2.start()


async def test_a_broken_depends_on_column(db: Path) -> None:
    s = scheduler(url_of(db))
    await s.start()
    s.submit(Noop(), delay=3600)
    await s.stop()
    with sqlite3.connect(db) as conn:
        conn.execute("UPDATE jobsched_jobs SET depends_on = 'not json'")
    with pytest.raises(StoreError, match="broken depends_on column"):
        await scheduler(url_of(db)).start()


# ── failing writes ─────────────────────────────────────────────────────
def fill_disk(conn: sqlite3.Connection) -> None:
    """Let the store's file grow no more (run with `SQLiteStore.call`)."""
    pages = conn.execute("PRAGMA page_count").fetchone()[0]
    conn.execute(f"PRAGMA max_page_count = {pages}")


def free_disk(conn: sqlite3.Connection) -> None:
    conn.execute("PRAGMA max_page_count = 1073741823")


async def test_a_full_disk_keeps_the_last_committed_state(db: Path, tmp_path: Path) -> None:
    store = SQLiteStore(url_of(db))
    s = scheduler(store)
    await s.start()
    first = s.submit(Noop("small"), delay=3600)
    await s.flush()
    committed = job_rows(db)
    await store.call(fill_disk)
    big = [s.submit(Record(str(tmp_path / "log"), "x" * 5000), delay=3600) for _ in range(20)]
    with pytest.raises(StoreError, match=rf"{db}: database or disk is full|could not write"):
        await s.flush()
    assert job_rows(db) == committed
    # The scheduler goes on; the writer retries, and succeeds once there is room.
    await store.call(free_disk)
    await s.flush()
    assert {r[0] for r in job_rows(db)} == {first, *big}
    await s.stop()


async def test_stop_reports_a_final_write_that_failed(db: Path) -> None:
    store = SQLiteStore(url_of(db))
    s = scheduler(store)
    await s.start()
    await s.flush()
    await store.call(fill_disk)
    s.submit(Noop("x" * 50_000), delay=3600)
    with pytest.raises(StoreError, match="database or disk is full"):
        await s.stop()
    assert job_rows(db) == []
    # The store is closed and unlocked: another scheduler can take over.
    s2 = scheduler(url_of(db))
    await s2.start()
    await s2.stop()


async def test_dependents_wait_while_the_store_cannot_commit() -> None:
    store = RecordingStore()
    s = scheduler(store)
    await s.start()
    await s.flush()
    store.fail = "disk full (simulated)"
    up = s.submit(Noop())
    down = s.submit(Noop(), depends_on=[up])
    with pytest.raises(StoreError, match="disk full"):
        await s.flush()
    assert s.get(up).status.value == "completed"
    assert s.get(down).status.value == "pending"  # its upstream is not durable yet
    store.fail = None
    await s.join()
    await s.stop()
    assert store.status(up) == store.status(down) == "completed"


async def test_build_job_jobs_are_stored_with_their_options(db: Path) -> None:
    s = scheduler(url_of(db))
    await s.start()
    job = build_job(
        "noop",
        {"label": "x"},
        plugins=s.plugins,
        priority="high",
        timeout=7,
        retry={"policy": "fixed", "seconds": 2},
    )
    job_id = s.submit(job, delay=3600)
    await s.stop()
    s2 = scheduler(url_of(db))
    await s2.start()
    restored = s2.get(job_id)
    assert (restored.label, restored.priority.name, restored.timeout) == ("x", "HIGH", 7.0)  # type: ignore[attr-defined]
    assert (restored.retry.max_retries, restored.retry.seconds) == (3, 2.0)  # type: ignore[attr-defined]
    await s2.stop()


def test_jobs_plugin_is_a_plugin() -> None:
    names = JobScheduler(plugins=[jobs_plugin]).plugins.names("job_types")
    assert {"noop", "record", "gate", "fail", "odd"} <= set(names)
