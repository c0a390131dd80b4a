"""The SQLite store's fast paths (issue 13) keep its guarantees.

Group commit (writing transactions that wait for the store's thread share
one transaction, each undone alone if it fails), the one-statement insert of
a batch without dependencies (with the row-by-row walk when a key, id or
unique_key is already there), the batched finish, the unique index that
holds only jobs with a unique_key, and a feeder that claims further ahead
while jobs are shorter than a claim.
"""

from __future__ import annotations

import asyncio
import itertools
import sqlite3
import threading
import time
from pathlib import Path
from typing import Any

import attrs
import pytest

from jobsched import AsyncJob, JobScheduler, PluginManager, StoreError, hookimpl
from jobsched.store import NewJob, Outcome, StoreContext
from jobsched_plugins.sqlite_store import SQLiteStore

SHARED = StoreContext(worker_id="test", shared=True)


def new_job(job_id: str, **fields: Any) -> NewJob:
    now = time.time()
    fields.setdefault("run_at", now)
    fields.setdefault("args", {})
    return NewJob(job_id=job_id, type="noop", submitted_at=now, sort_key=(0.0,), **fields)


async def open_store(path: Path) -> SQLiteStore:
    store = SQLiteStore(f"sqlite:///{path}")
    await store.open(SHARED)
    return store


async def test_waiting_transactions_commit_together_and_each_fails_alone(
    tmp_path: Path,
) -> None:
    store = await open_store(tmp_path / "jobs.db")
    statements: list[str] = []
    gate = threading.Event()
    try:
        await store.call(lambda conn: conn.set_trace_callback(statements.append))

        async def release() -> None:
            gate.set()  # runs after the three inserts below queued their transactions

        results = await asyncio.gather(
            store.call(lambda conn: gate.wait()),  # holds the store's thread
            store.insert([new_job("a1"), new_job("a2")]),
            store.insert([new_job("b1", depends_on=("nowhere",))]),
            store.insert([new_job("c1")]),
            release(),
            return_exceptions=True,
        )
        await store.call(lambda conn: conn.set_trace_callback(None))
        _, a, b, c, _ = results
        assert (a, c) == (["a1", "a2"], ["c1"])
        assert isinstance(b, StoreError)
        assert "unknown dependencies: ['nowhere']" in str(b)
        # One transaction (so one fsync) for the three, each in its savepoint.
        assert statements.count("BEGIN IMMEDIATE") == 1
        assert statements.count("COMMIT") == 1
        assert statements.count("SAVEPOINT jobsched_call") == 3
        assert statements.count("ROLLBACK TO jobsched_call") == 1
        assert [r.job_id for r in await store.jobs()] == ["a1", "a2", "c1"]
    finally:
        gate.set()
        await store.close()


async def test_a_group_whose_commit_fails_fails_every_caller_and_stores_nothing(
    tmp_path: Path,
) -> None:
    store = await open_store(tmp_path / "jobs.db")
    gate = threading.Event()

    def refuse_commit(action: int, arg1: Any, *rest: Any) -> int:
        # COMMIT fails as a full disk would make it: after every body ran.
        if action == sqlite3.SQLITE_TRANSACTION and arg1 == "COMMIT":
            return sqlite3.SQLITE_DENY
        return sqlite3.SQLITE_OK

    try:
        await store.call(lambda conn: conn.set_authorizer(refuse_commit))

        async def release() -> None:
            gate.set()

        results = await asyncio.gather(
            store.call(lambda conn: gate.wait()),
            store.insert([new_job("a1")]),
            store.insert([new_job("b1")]),
            release(),
            return_exceptions=True,
        )
        # An allow-all authorizer, not None: Python 3.10 cannot unset one.
        await store.call(lambda conn: conn.set_authorizer(lambda *_: sqlite3.SQLITE_OK))
        for error in results[1:3]:
            assert isinstance(error, StoreError)
            assert "could not insert 1 jobs into" in str(error)
            assert "the file keeps its last committed state" in str(error)
        assert await store.jobs() == []
        # The connection is usable again: nothing was left half-done.
        assert await store.insert([new_job("c1")]) == ["c1"]
        assert [r.job_id for r in await store.jobs()] == ["c1"]
    finally:
        gate.set()
        await store.close()


async def test_a_batch_with_a_known_key_or_unique_key_resumes_instead_of_duplicating(
    tmp_path: Path,
) -> None:
    store = await open_store(tmp_path / "jobs.db")
    try:
        assert await store.insert([new_job("k1", key="nightly"), new_job("u1", unique_key="u")])
        ids = await store.insert(
            [
                new_job("n1"),
                new_job("k2", key="nightly"),  # a key the store knows
                new_job("u2", unique_key="u"),  # an unfinished job holds it
                new_job("n2"),
                new_job("k3", key="fresh"),
                new_job("k4", key="fresh"),  # the same key twice in one batch
            ]
        )
        assert ids == ["n1", "k1", "u1", "n2", "k3", "k3"]
        rows = await store.jobs()
        assert [r.job_id for r in rows] == ["k1", "u1", "n1", "n2", "k3"]
        # Nothing half-inserted by the one-statement attempt that fell back.
        assert len({r.seq for r in rows}) == 5
    finally:
        await store.close()


async def test_finish_writes_the_jobs_the_owner_holds_once_each(tmp_path: Path) -> None:
    store = await open_store(tmp_path / "jobs.db")
    try:
        await store.insert([new_job(f"j{i}") for i in range(4)])
        mine, _ = await store.claim(3, "me")
        theirs, _ = await store.claim(1, "them")
        assert [r.job_id for r in mine] == ["j0", "j1", "j2"]
        statements: list[str] = []
        await store.call(lambda conn: conn.set_trace_callback(statements.append))
        written = await store.finish(
            [
                Outcome(job_id="j0", status="completed", result="1"),
                Outcome(job_id="j1", status="failed", error="boom"),
                Outcome(job_id="j1", status="completed", result="2"),  # listed twice
                Outcome(job_id=theirs[0].job_id, status="completed"),  # not mine
            ],
            "me",
        )
        await store.call(lambda conn: conn.set_trace_callback(None))
        assert written == ["j0", "j1"]
        # A statement for the history and one for the jobs, per kind of
        # outcome: the completed ones (which share every value but their job
        # and result), then the rest (a trigger's work is traced as its
        # statement again, just after it).
        rows_written = ("UPDATE jobsched_shared_jobs", "INSERT INTO jobsched_shared_attempts")
        writes = [s.split()[0:3] for s in statements if s.startswith(rows_written)]
        assert [write for write, _ in itertools.groupby(writes)] == [
            ["INSERT", "INTO", "jobsched_shared_attempts"],
            ["UPDATE", "jobsched_shared_jobs", "SET"],
        ] * 2
        rows = {r.job_id: r for r in await store.jobs()}
        assert (rows["j0"].status, rows["j0"].result) == ("completed", 1)
        assert (rows["j1"].status, rows["j1"].last_error) == ("failed", "boom")
        assert (rows["j2"].status, rows["j2"].lease_owner) == ("running", "me")
        assert (rows["j3"].status, rows["j3"].lease_owner) == ("running", "them")
        history = (await store.get("j1")).history  # type: ignore[union-attr]
        assert [(a.number, a.status, a.worker) for a in history] == [(1, "failed", "me")]
    finally:
        await store.close()


async def test_outcomes_sharing_their_values_keep_their_own_results(tmp_path: Path) -> None:
    store = await open_store(tmp_path / "jobs.db")
    try:
        await store.insert([new_job(f"j{i}") for i in range(5)])
        await store.claim(5, "me")
        later = time.time() + 3600
        before = time.time()
        written = await store.finish(
            [
                Outcome(job_id="j0", status="completed", result="1"),
                Outcome(job_id="j1", status="completed", result="2", result_ttl=60.0),
                Outcome(job_id="j2", status="completed", result='"three"'),
                Outcome(
                    job_id="j3",
                    status="retry_wait",
                    run_at=later,
                    error="flaky",
                    attempt="failed",
                    traceback="Traceback: flaky",
                ),
                Outcome(job_id="j4", status="failed", error="boom"),
            ],
            "me",
        )
        assert written == ["j0", "j1", "j2", "j3", "j4"]
        rows = {r.job_id: r for r in await store.jobs()}
        assert [rows[f"j{i}"].result for i in range(3)] == [1, 2, "three"]
        assert rows["j0"].result_expires is None and rows["j2"].result_expires is None
        expires = rows["j1"].result_expires
        assert expires is not None and before + 60.0 <= expires <= time.time() + 60.0
        j3 = rows["j3"]
        assert (j3.status, j3.run_at, j3.last_error, j3.finished_at) == (
            "retry_wait",
            later,
            "flaky",
            None,
        )
        assert (rows["j4"].status, rows["j4"].last_error) == ("failed", "boom")
        for i, attempt in enumerate(["completed"] * 3 + ["failed", "failed"]):
            job = await store.get(f"j{i}")
            assert job is not None
            assert [(a.number, a.status, a.worker) for a in job.history] == [(1, attempt, "me")]
        j3_history = (await store.get("j3")).history  # type: ignore[union-attr]
        assert (j3_history[0].error, j3_history[0].traceback) == ("flaky", "Traceback: flaky")
        assert (await store.counts())["completed"] == 3
    finally:
        await store.close()


async def test_the_kept_counts_follow_claims_and_finishes(tmp_path: Path) -> None:
    # The trigger leaves pending -> running and running -> completed to the
    # claim and the finish (schema version 16), which count them per batch.
    store = await open_store(tmp_path / "jobs.db")

    def counted(conn: sqlite3.Connection) -> dict[str, int]:
        cur = conn.execute("SELECT status, count(*) FROM jobsched_shared_jobs GROUP BY status")
        return dict(cur.fetchall())

    async def kept() -> dict[str, int]:
        return {status: n for status, n in (await store.counts()).items() if n}

    try:
        await store.insert([new_job(f"j{i}") for i in range(6)])
        await store.claim(6, "me")
        assert await kept() == await store.call(counted) == {"running": 6}
        await store.finish(
            [
                Outcome(job_id="j0", status="completed"),
                Outcome(job_id="j1", status="failed", error="boom"),
                Outcome(job_id="j2", status="retry_wait", run_at=time.time() - 1),
            ],
            "me",
        )
        await store.release(["j3"], "me")
        claimed, _ = await store.claim(6, "me")  # one pending, one retry_wait
        assert sorted(r.job_id for r in claimed) == ["j2", "j3"]
        await store.finish([Outcome(job_id=j, status="completed") for j in ("j2", "j3")], "me")
        await store.finish([Outcome(job_id="j4", status="completed")], "them")  # not theirs
        expected = {"completed": 3, "failed": 1, "running": 2}
        assert await kept() == await store.call(counted) == expected
    finally:
        await store.close()


async def test_a_claimed_row_whose_id_was_tampered_into_a_blob_is_failed_as_stored(
    tmp_path: Path,
) -> None:
    store = await open_store(tmp_path / "jobs.db")
    try:
        await store.insert([new_job(f"j{i}") for i in range(3)])
        await store.call(
            lambda conn: conn.execute(
                "UPDATE jobsched_shared_jobs SET job_id = CAST(job_id AS BLOB) WHERE job_id = 'j1'"
            )
        )
        claimed, _ = await store.claim(3, "me")
        assert [r.job_id for r in claimed] == ["j0", "j2"]
        # Failed in the claim's transaction, under the id as stored, its attempt
        # in the history: JSON cannot carry a BLOB, so that row went on its own.
        failed = await store.call(
            lambda conn: conn.execute(
                "SELECT j.status, j.last_error, a.status, a.worker FROM jobsched_shared_jobs j "
                "JOIN jobsched_shared_attempts a ON a.job_id = j.job_id WHERE j.job_id = ?",
                (b"j1",),
            ).fetchall()
        )
        assert len(failed) == 1
        status, error, attempt, worker = failed[0]
        assert (status, attempt, worker) == ("failed", "failed", "me")
        assert error.startswith("BadRowError: ") and "job_id" in error
        # The others finish as a batch.
        done = [Outcome(job_id=r.job_id, status="completed") for r in claimed]
        assert await store.finish(done, "me") == ["j0", "j2"]
    finally:
        await store.close()


async def test_a_file_with_the_older_unique_index_gets_the_lean_one(tmp_path: Path) -> None:
    path = tmp_path / "jobs.db"
    await (await open_store(path)).close()
    with sqlite3.connect(path) as conn:  # as files written before issue 13 have it
        conn.execute("DROP INDEX jobsched_shared_unique")
        conn.execute(
            "CREATE UNIQUE INDEX jobsched_shared_unique ON jobsched_shared_jobs (unique_key) "
            "WHERE status IN ('pending', 'running', 'retry_wait')"
        )
    conn.close()
    store = await open_store(path)
    try:
        sql = await store.call(
            lambda conn: conn.execute(
                "SELECT sql FROM sqlite_master WHERE name = 'jobsched_shared_unique'"
            ).fetchone()[0]
        )
        assert "unique_key IS NOT NULL" in sql
        assert await store.insert([new_job("a", unique_key="u"), new_job("b")]) == ["a", "b"]
        assert await store.insert([new_job("c", unique_key="u")]) == ["a"]
        await store.claim(2, "me")
        await store.finish([Outcome(job_id="a", status="completed")], "me")
        # Finished: the unique_key is free again.
        assert await store.insert([new_job("d", unique_key="u")]) == ["d"]
    finally:
        await store.close()


# ── the feeder ──────────────────────────────────────────────────────────
@attrs.define
class Noop(AsyncJob):
    async def run(self) -> None:
        return None


class noop_jobs:
    @staticmethod
    @hookimpl
    def jobsched_register_job_types(register: Any) -> None:
        register("noop", Noop)


class CountingStore(SQLiteStore):
    """Records how many jobs each claim asked for."""

    def __init__(self, url: str) -> None:
        super().__init__(url)
        self.asked: list[int] = []

    async def claim(self, n: int, owner: str, queues: Any = None, **filters: Any) -> Any:
        self.asked.append(n)
        return await super().claim(n, owner, queues, **filters)


@pytest.mark.slow
async def test_claims_grow_while_jobs_are_shorter_than_a_claim(tmp_path: Path) -> None:
    store = CountingStore(f"sqlite:///{tmp_path / 'jobs.db'}")
    scheduler = JobScheduler(
        "fifo",
        num_workers=2,
        store=store,
        shared=True,
        plugins=PluginManager([noop_jobs], autoload=False),
    )
    await scheduler.start()
    try:
        for _ in range(600):
            scheduler.submit(Noop())
        await scheduler.join()
    finally:
        await scheduler.stop()
    # No-op jobs finish while a claim is on its way: the workers wait with
    # nothing queued, so the batches double from two per worker, never past
    # 64 per worker.
    assert max(store.asked) > 4
    assert max(store.asked) <= 64 * 2
    assert all(n > 0 for n in store.asked)
