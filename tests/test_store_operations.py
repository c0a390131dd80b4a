"""The operator calls of `SharedStore` (issue 11), on both shared stores.

Each test runs on a fresh PostgreSQL schema and on a fresh SQLite file in
shared mode (`target`): paged listing, stats, attempt history, retry and
requeue, purge, result expiry, progress, the queue's pause flag, and
schedules that are listed, paused, resumed and triggered.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import math
import sqlite3
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

import pg_jobs
from jobsched import Client, Limits, PluginManager, Rate
from jobsched._codec import JobCodec
from jobsched.backends.schedules import schedule_row, serve
from jobsched.store import (
    SHARED_STORE_MEMBERS,
    NewJob,
    Outcome,
    SharedScheduleRow,
    StoreContext,
)
from jobsched_plugins.sqlite_store import SQLiteStore
from jobsched_plugins.sqlite_store import migrations as sqlite_migrations
from shared_support import Target

OWNER = "worker-a"


def new(
    job_id: str,
    *,
    type: str = "noop",
    args: dict[str, Any] | None = None,
    name: str | None = None,
    deps: tuple[str, ...] = (),
    unique_key: str | None = None,
    delay: float = 0.0,
) -> NewJob:
    now = time.time()
    options: dict[str, Any] = {"executor": "async"}
    if name is not None:
        options["name"] = name
    return NewJob(
        job_id=job_id,
        type=type,
        args={"n": job_id} if args is None else args,
        options=options,
        run_at=now + delay,
        submitted_at=now,
        sort_key=(0.0,),
        depends_on=deps,
        unique_key=unique_key,
    )


@pytest.fixture
async def store(target: Target) -> AsyncIterator[Any]:
    opened = await target.open_store(OWNER)
    try:
        yield opened
    finally:
        await opened.close()


async def run(store: Any, *outcomes: Outcome, owner: str = OWNER) -> list[str]:
    """Claim every due job for `owner` and write `outcomes` for them."""
    claimed, _ = await store.claim(100, owner)
    assert {o.job_id for o in outcomes} <= {r.job_id for r in claimed}
    return list(await store.finish(list(outcomes), owner))


async def statuses(store: Any) -> dict[str, str]:
    return {r.job_id: r.status for r in await store.jobs()}


async def attempt_rows(target: Target, store: Any, job_id: str) -> int:
    """How many history rows the store keeps for `job_id` (read behind its back)."""
    if target.kind == "memory":
        return int(await store.call(lambda queue: len(queue.history.get(job_id, ()))))
    if target.kind == "postgresql":
        async with store.connection() as conn:
            cur = await conn.execute(
                f'SELECT count(*) AS n FROM "{target.schema}".attempts WHERE job_id = %s',
                [job_id],
            )
            return int((await cur.fetchone())["n"])
    return int(
        await store.call(
            lambda conn: conn.execute(
                "SELECT count(*) FROM jobsched_shared_attempts WHERE job_id = ?", (job_id,)
            ).fetchone()[0]
        )
    )


def test_the_contract_lists_every_operator_call() -> None:
    for name in (
        "page",
        "stats",
        "retry",
        "requeue",
        "purge",
        "expire_results",
        "set_progress",
        "wait_changed",
        "set_queue_paused",
        "queue_paused",
        "schedules",
        "set_schedule_paused",
        "trigger_schedule",
    ):
        assert name in SHARED_STORE_MEMBERS


# ── listing ────────────────────────────────────────────────────────────
async def test_page_filters_counts_and_lists_newest_first(store: Any) -> None:
    await store.insert(
        [
            new("a-1", type="email", name="Welcome Mail", args={"to": "x@corp"}),
            new("a-2", type="email", args={"to": "Boss@Corp"}),
            new("b-3", type="report", args={"note": "100% done_now"}),
        ]
    )
    rows, total = await store.page(None, None, None, 50, 0)
    assert ([r.job_id for r in rows], total) == (["b-3", "a-2", "a-1"], 3)
    assert all(r.history == () for r in rows), "lists leave the history out"
    rows, total = await store.page(None, None, None, 1, 1)
    assert ([r.job_id for r in rows], total) == (["a-2"], 3)
    rows, total = await store.page(None, None, None, 10, 5)
    assert (rows, total) == ([], 3)
    rows, total = await store.page(None, "email", None, 10, 0)
    assert ([r.job_id for r in rows], total) == (["a-2", "a-1"], 2)
    rows, total = await store.page(["running", "failed"], None, None, 10, 0)
    assert (rows, total) == ([], 0)
    # The text matches the id, the name, the type or the arguments, in any case.
    for text, expected in [
        ("A-1", ["a-1"]),
        ("welcome", ["a-1"]),
        ("REPORT", ["b-3"]),
        ("boss@corp", ["a-2"]),
        ("corp", ["a-2", "a-1"]),
        ("% done_", ["b-3"]),  # taken literally: no LIKE wildcards
        ("_", ["b-3"]),
        ("nothing", []),
    ]:
        rows, total = await store.page(None, None, text, 10, 0)
        assert ([r.job_id for r in rows], total) == (expected, len(expected)), text
    await run(store, Outcome(job_id="a-1", status="failed", error="ValueError: no"))
    rows, total = await store.page(["failed"], "email", "a-", 10, 0)
    assert ([r.job_id for r in rows], total) == (["a-1"], 1)


async def test_stats_reads_counts_throughput_leases_limits_and_the_pause_flag(
    store: Any, target: Target
) -> None:
    await store.set_limits(
        {"executors": {"async": 5}, "rates": {"email": {"per_second": 1.0, "burst": 2}}}
    )
    await store.insert([new(f"j{i}", type="email" if i < 2 else "noop") for i in range(5)])
    claimed, _ = await store.claim(3, OWNER)
    await store.finish(
        [
            Outcome(job_id=claimed[0].job_id, status="completed", result="1"),
            Outcome(job_id=claimed[1].job_id, status="failed", error="E: x"),
        ],
        OWNER,
    )
    since = (math.floor(time.time() / 60) - 59) * 60.0
    stats = await store.stats(since)
    assert stats.counts == {"completed": 1, "failed": 1, "running": 1, "pending": 2}
    assert abs(stats.at - time.time()) < 60
    minute = math.floor(stats.at / 60) * 60.0
    assert sorted(stats.finished) == [(minute, "completed", 1), (minute, "failed", 1)]
    assert [(owner, n) for owner, n, _ in stats.leases] == [(OWNER, 1)]
    assert stats.leases[0][2] is not None and stats.leases[0][2] > stats.at
    assert stats.running_executors == {"async": 1}
    assert sum(stats.running_types.values()) == 1
    assert stats.limits is not None and stats.limits["executors"] == {"async": 5}
    assert set(stats.rate_tats) <= {"email"}
    assert stats.queue_paused is False
    # Nothing finished before `since` is counted.
    later = await store.stats(stats.at + 120)
    assert later.finished == []


# ── attempt history ────────────────────────────────────────────────────
async def test_finish_records_each_ended_attempt_for_its_owner_only(store: Any) -> None:
    await store.insert([new("up"), new("down", deps=("up",))])
    await run(store, Outcome(job_id="up", status="retry_wait", error="E: 1", run_at=0.0))
    # Another process's outcome for a job it does not hold is ignored, history too.
    await store.claim(1, OWNER)
    assert await store.finish([Outcome(job_id="up", status="completed")], "intruder") == []
    assert await store.finish([Outcome(job_id="up", status="completed", result="7")], OWNER)
    row = await store.get("up")
    assert [(a.number, a.status, a.error, a.worker) for a in row.history] == [
        (1, "retry_wait", "E: 1", OWNER),
        (2, "completed", None, OWNER),
    ]
    first, second = row.history
    assert first.started_at <= first.finished_at <= second.started_at <= second.finished_at
    assert second.finished_at == pytest.approx(row.finished_at)
    assert (await store.get("down")).depends_on == ("up",)
    assert (await store.get("up")).depends_on == ()


# ── retry and requeue ──────────────────────────────────────────────────
async def test_retry_runs_an_ended_job_again_and_keeps_its_history(
    store: Any, target: Target
) -> None:
    await store.insert([new("bad"), new("good"), new("waiting", delay=3600)])
    claimed, _ = await store.claim(5, OWNER)
    assert {r.job_id for r in claimed} == {"bad", "good"}
    await store.set_progress([("bad", {"done": 1, "total": 2})], OWNER)
    await store.finish(
        [
            Outcome(job_id="bad", status="failed", error="ValueError: boom"),
            Outcome(job_id="good", status="completed", result="1"),
        ],
        OWNER,
    )
    # Unknown ids and jobs in other statuses are left as they are.
    assert await store.retry(["good", "waiting", "nope"]) == []
    assert await statuses(store) == {"bad": "failed", "good": "completed", "waiting": "pending"}
    await store.wait(0)  # take any earlier wake-up
    assert await store.retry(["bad", "bad"]) == ["bad"]
    assert await store.wait(5) is True, "a retried job wakes the claimers"
    row = await store.get("bad")
    assert (row.status, row.attempts, row.last_error, row.result) == ("pending", 0, None, None)
    assert (row.finished_at, row.started_at, row.lease_owner, row.progress) == (
        None,
        None,
        None,
        None,
    )
    assert row.run_at <= time.time()
    claimed, _ = await store.claim(5, OWNER)
    assert [r.job_id for r in claimed] == ["bad"] and claimed[0].attempts == 1
    await store.finish([Outcome(job_id="bad", status="completed", result="2")], OWNER)
    row = await store.get("bad")
    assert [(a.number, a.status) for a in row.history] == [(1, "failed"), (1, "completed")]
    assert await attempt_rows(target, store, "bad") == 2


async def test_a_retried_job_waits_for_its_unfinished_dependencies_again(store: Any) -> None:
    await store.insert([new("up"), new("down", deps=("up",))])
    await run(store, Outcome(job_id="up", status="failed", error="E: x"))
    assert (await store.get("down")).last_error == "upstream up failed"
    assert await store.retry(["down"]) == ["down"]
    assert (await store.get("down")).unmet == 1
    claimed, _ = await store.claim(5, OWNER)
    assert claimed == [], "its dependency has not completed"
    assert await store.retry(["up"]) == ["up"]
    await run(store, Outcome(job_id="up", status="completed"))
    claimed, _ = await store.claim(5, OWNER)
    assert [r.job_id for r in claimed] == ["down"]


async def test_retry_never_makes_two_unfinished_jobs_share_a_unique_key(store: Any) -> None:
    await store.insert([new("one", unique_key="k")])
    await run(store, Outcome(job_id="one", status="failed", error="E: x"))
    await store.insert([new("two", unique_key="k")])
    await run(store, Outcome(job_id="two", status="failed", error="E: x"))
    # Both hold "k": the first in submit order wins.
    assert await store.requeue(["failed"], None) == ["one"]
    assert await statuses(store) == {"one": "pending", "two": "failed"}
    assert await store.retry(["two"]) == [], "'one' holds the key now"


async def test_requeue_takes_the_statuses_and_type_asked_for_in_submit_order(
    store: Any,
) -> None:
    await store.insert(
        [new("f1", type="a"), new("t1", type="a"), new("c1", type="b"), new("f2", type="b")]
    )
    await store.request_cancel("c1")
    claimed, _ = await store.claim(5, OWNER)
    assert {r.job_id for r in claimed} == {"f1", "t1", "f2"}
    await store.finish(
        [
            Outcome(job_id="f1", status="failed", error="E: 1"),
            Outcome(job_id="t1", status="timed_out", error="timed out"),
            Outcome(job_id="f2", status="failed", error="E: 2"),
        ],
        OWNER,
    )
    assert await store.requeue(["completed", "running"], None) == []
    assert await store.requeue(["failed"], "b") == ["f2"]
    assert await store.requeue(["timed_out", "cancelled", "failed"], None) == ["f1", "t1", "c1"]
    assert set((await statuses(store)).values()) == {"pending"}


# ── purge and result expiry ────────────────────────────────────────────
async def test_purge_deletes_old_finished_jobs_with_their_history_and_edges(
    store: Any, target: Target
) -> None:
    await store.insert([new("done"), new("bad"), new("open"), new("after", deps=("done",))])
    claimed, _ = await store.claim(2, OWNER)
    assert {r.job_id for r in claimed} == {"done", "bad"}
    await store.finish(
        [
            Outcome(job_id="done", status="completed", result="1"),
            Outcome(job_id="bad", status="failed", error="E: x"),
        ],
        OWNER,
    )
    # Finished after the cut-off: kept.
    assert await store.purge(time.time() - 3600, ["completed", "failed"]) == 0
    # Only the statuses asked for, never an unfinished job.
    assert await store.purge(time.time() + 1, ["completed", "running", "pending"]) == 1
    assert await statuses(store) == {"bad": "failed", "open": "pending", "after": "pending"}
    assert await attempt_rows(target, store, "done") == 0
    assert (await store.get("after")).depends_on == ()
    assert await store.purge(time.time() + 1, ["failed", "timed_out", "cancelled"]) == 1
    assert await attempt_rows(target, store, "bad") == 0
    assert set(await statuses(store)) == {"open", "after"}
    assert await store.purge(time.time() + 1, []) == 0


async def test_expire_results_removes_only_results_whose_time_is_up(store: Any) -> None:
    await store.insert([new("short"), new("long"), new("kept"), new("failed")])
    await run(
        store,
        Outcome(job_id="short", status="completed", result='"s"', result_ttl=0.0),
        Outcome(job_id="long", status="completed", result='"l"', result_ttl=3600.0),
        Outcome(job_id="kept", status="completed", result='"k"'),
        Outcome(job_id="failed", status="failed", error="E: x", result_ttl=0.0),
    )
    long = await store.get("long")
    assert long.result_expires == pytest.approx(long.finished_at + 3600.0)
    assert (await store.get("failed")).result_expires is None, "only results expire"
    assert await store.expire_results() == 1
    short = await store.get("short")
    assert (short.status, short.result, short.result_expires) == ("completed", None, None)
    assert (await store.get("long")).result == "l"
    assert (await store.get("kept")).result == "k"
    assert await store.expire_results() == 0


# ── progress ───────────────────────────────────────────────────────────
async def test_progress_is_written_in_batches_for_the_owners_running_jobs_only(
    store: Any,
) -> None:
    await store.insert([new("a"), new("b"), new("c", delay=3600)])
    await store.claim(2, OWNER)
    at = time.time()
    await store.set_progress(
        [
            ("a", {"done": 1, "total": 4, "message": "one", "updated_at": at}),
            ("b", {"done": 2.5, "total": None, "message": None, "updated_at": at}),
            ("c", {"done": 9, "total": None, "message": None, "updated_at": at}),
            ("nope", {"done": 9, "total": None, "message": None, "updated_at": at}),
        ],
        OWNER,
    )
    await store.set_progress([("a", {"done": 3})], "intruder")
    await store.set_progress([], OWNER)
    assert (await store.get("a")).progress == {
        "done": 1,
        "total": 4,
        "message": "one",
        "updated_at": at,
    }
    assert (await store.get("b")).progress["done"] == 2.5
    assert (await store.get("c")).progress is None, "not running"
    # The last value stays when the attempt ends; the next attempt starts afresh.
    await store.finish([Outcome(job_id="a", status="retry_wait", error="E", run_at=0.0)], OWNER)
    assert (await store.get("a")).progress["done"] == 1
    claimed, _ = await store.claim(5, OWNER)
    assert [r.job_id for r in claimed] == ["a"] and claimed[0].progress is None


async def test_progress_wakes_the_live_views_of_other_processes(store: Any, target: Target) -> None:
    other = await target.open_store("viewer")
    try:
        await store.insert([new("a")])
        await store.claim(1, OWNER)
        await other.wait_changed(0)  # earlier changes
        waiter = asyncio.create_task(other.wait_changed(30))
        await asyncio.sleep(0)
        await store.set_progress([("a", {"done": 1})], OWNER)
        assert await waiter is True
    finally:
        await other.close()


# ── the queue's pause flag ─────────────────────────────────────────────
async def test_a_paused_queue_claims_nothing_and_running_jobs_still_finish(
    store: Any, target: Target
) -> None:
    other = await target.open_store("worker-b")
    try:
        await store.insert([new("running"), new("waiting")])
        claimed, _ = await store.claim(1, OWNER)
        assert await store.queue_paused() is False
        assert await store.set_queue_paused(True) is True
        assert await store.set_queue_paused(True) is False
        assert await other.queue_paused() is True, "for every process"
        assert await other.claim(5, "worker-b") == ([], None)
        assert await store.finish([Outcome(job_id=claimed[0].job_id, status="completed")], OWNER)
        assert (await store.stats(0.0)).queue_paused is True
        await other.wait(0)
        waiter = asyncio.create_task(other.wait(30))
        await asyncio.sleep(0)
        assert await store.set_queue_paused(False) is True
        assert await waiter is True, "resuming wakes the claimers"
        assert await store.set_queue_paused(False) is False
        rows, _ = await other.claim(5, "worker-b")
        assert [r.job_id for r in rows] == ["waiting"]
    finally:
        await other.close()


async def test_a_paused_queue_claims_nothing_under_limits_either(store: Any) -> None:
    await store.set_limits({"job_types": {"noop": 5}})
    await store.insert([new("a")])
    await store.set_queue_paused(True)
    assert await store.claim(5, OWNER) == ([], None)
    await store.set_queue_paused(False)
    rows, _ = await store.claim(5, OWNER)
    assert [r.job_id for r in rows] == ["a"]


# ── schedules ──────────────────────────────────────────────────────────
def schedule(schedule_id: str = "sched-1", next_run: float | None = None) -> SharedScheduleRow:
    return SharedScheduleRow(
        schedule_id=schedule_id,
        type="noop",
        args={"n": "tick"},
        options={"name": "tick", "executor": "async"},
        trigger={"interval": 60.0, "origin": 1000.0},
        next_run=time.time() + 60 if next_run is None else next_run,
        allow_overlap=True,
    )


def fired(job_id: str) -> NewJob:
    return new(job_id)


async def test_schedules_are_listed_paused_and_resumed(store: Any) -> None:
    await store.add_schedule(schedule("sched-b"))
    await store.add_schedule(schedule("sched-a", next_run=0.0))
    listed = await store.schedules()
    assert [s.schedule_id for s in listed] == ["sched-a", "sched-b"]
    assert [s.paused for s in listed] == [False, False]
    assert await store.set_schedule_paused("sched-a", True) is True
    assert await store.set_schedule_paused("sched-a", True) is False
    assert await store.set_schedule_paused("unknown", True) is False
    assert (await store.get_schedule("sched-a")).paused is True
    # A paused schedule does not fire, whoever tries.
    assert await store.fire_schedule("sched-a", 0.0, 60.0, fired("f1")) is False
    assert await store.jobs() == []
    assert await store.set_schedule_paused("sched-a", False, 5000.0) is True
    assert await store.set_schedule_paused("sched-a", False) is False
    resumed = await store.get_schedule("sched-a")
    assert (resumed.paused, resumed.next_run) == (False, 5000.0)
    assert await store.fire_schedule("sched-a", 5000.0, 5060.0, fired("f2")) is True
    # Without a next_run, resuming keeps the stored one.
    await store.set_schedule_paused("sched-b", True)
    before = (await store.get_schedule("sched-b")).next_run
    await store.set_schedule_paused("sched-b", False)
    assert (await store.get_schedule("sched-b")).next_run == before


async def test_trigger_submits_once_now_without_moving_the_next_fire(store: Any) -> None:
    stored = await store.add_schedule(schedule())
    await store.set_schedule_paused(stored.schedule_id, True)
    assert await store.trigger_schedule(stored.schedule_id, fired("manual")) is True
    after = await store.get_schedule(stored.schedule_id)
    assert (after.next_run, after.fired, after.last_job_id) == (stored.next_run, 1, "manual")
    assert after.paused is True, "a paused schedule may be triggered and stays paused"
    job = await store.get("manual")
    assert (job.status, job.schedule_id) == ("pending", stored.schedule_id)
    assert [r.job_id for r in await store.schedule_jobs(stored.schedule_id)] == ["manual"]
    assert await store.trigger_schedule("unknown", fired("ghost")) is False
    assert await store.get("ghost") is None


async def test_concurrent_fires_and_a_trigger_submit_one_job_each(
    store: Any, target: Target
) -> None:
    stored = await store.add_schedule(schedule(next_run=100.0))
    others = [await target.open_store(f"p{i}") for i in range(3)]
    try:
        results = await asyncio.gather(
            *(
                s.fire_schedule(stored.schedule_id, 100.0, 160.0, fired(f"fire-{i}"))
                for i, s in enumerate(others)
            ),
            store.trigger_schedule(stored.schedule_id, fired("manual")),
        )
    finally:
        for s in others:
            await s.close()
    assert sorted(results) == [False, False, True, True]
    after = await store.get_schedule(stored.schedule_id)
    assert (after.next_run, after.fired) == (160.0, 2)
    jobs = [r.job_id for r in await store.schedule_jobs(stored.schedule_id)]
    assert len(jobs) == 2 and "manual" in jobs


# ── schema versions ────────────────────────────────────────────────────
async def test_a_shared_file_of_the_previous_version_is_migrated_on_open(tmp_path: Path) -> None:
    path = tmp_path / "old.db"
    with contextlib.closing(sqlite3.connect(path)) as conn:
        for statement in sqlite_migrations.SHARED_SCHEMA.split(";"):
            if statement.strip():
                conn.execute(statement)
        conn.execute("INSERT INTO jobsched_meta VALUES ('schema_version', '2')")
        conn.execute("INSERT INTO jobsched_meta VALUES ('mode', 'shared')")
        conn.execute(
            "INSERT INTO jobsched_shared_jobs (job_id, type, args, options, status, run_at, "
            "submitted_at, sort_key) VALUES ('old', 'noop', '{}', '{}', 'completed', 0, 0, x'')"
        )
        conn.commit()
    url = f"sqlite:///{path}"
    # `jobsched status` reads a file nobody migrated yet, and changes nothing.
    reader = SQLiteStore(url)
    snapshot = await reader.open(StoreContext(worker_id="status", readonly=True))
    await reader.close()
    assert [row.job_id for row in snapshot.jobs] == ["old"]
    store = SQLiteStore(url)
    await store.open(StoreContext(worker_id="w", shared=True))
    try:
        version = await store.call(
            lambda conn: conn.execute(
                "SELECT value FROM jobsched_meta WHERE name = 'schema_version'"
            ).fetchone()[0]
        )
        assert version == str(sqlite_migrations.SCHEMA_VERSION) == "16"
        # Version 5: a job's own dependencies are read by an index.
        plan = await store.call(
            lambda conn: conn.execute(
                "EXPLAIN QUERY PLAN SELECT upstream FROM jobsched_shared_dependencies "
                "WHERE job_id = 'old'"
            ).fetchall()
        )
        assert "jobsched_shared_dependencies_job" in str(plan)
        row = await store.get("old")
        assert (row.status, row.progress, row.result_expires, row.history) == (
            "completed",
            None,
            None,
            (),
        )
        assert await store.queue_paused() is False
        assert row.trigger_rule == "all_success"  # version 4 gave old jobs the default
        assert row.lease_expiries == 0  # version 8 counts from 0
        assert row.last_traceback is None  # version 9 adds it, empty
        # version 11: nobody refused it
        assert (row.build_refusals, row.last_refusal, row.refused_by) == (0, None, ())
        assert await store.history(300.0, 0.0, None, None) == ([], [])  # version 15: none kept yet
    finally:
        await store.close()
    # Opening again migrates nothing more.
    again = SQLiteStore(url)
    await again.open(StoreContext(worker_id="w2", shared=True))
    await again.close()


def test_progress_is_stored_as_json(tmp_path: Path) -> None:
    # What another tool reading the file finds.
    async def body() -> str:
        store = SQLiteStore(f"sqlite:///{tmp_path}/p.db")
        await store.open(StoreContext(worker_id=OWNER, shared=True))
        try:
            await store.insert([new("a")])
            await store.claim(1, OWNER)
            await store.set_progress([("a", {"done": 1, "message": "é"})], OWNER)
            return str(
                await store.call(
                    lambda conn: conn.execute(
                        "SELECT progress FROM jobsched_shared_jobs"
                    ).fetchone()[0]
                )
            )
        finally:
            await store.close()

    assert json.loads(asyncio.run(body())) == {"done": 1, "message": "é"}


# ── serving a paused schedule ──────────────────────────────────────────
class Spy:
    """A store that counts the schedule calls `serve` makes."""

    def __init__(self, store: Any) -> None:
        self.store = store
        self.reads = 0
        self.fires = 0
        self.read = asyncio.Event()

    def __getattr__(self, name: str) -> Any:
        return getattr(self.store, name)

    async def get_schedule(self, schedule_id: str) -> SharedScheduleRow:
        self.reads += 1
        self.read.set()
        return await self.store.get_schedule(schedule_id)  # type: ignore[no-any-return]

    async def fire_schedule(self, *args: Any) -> bool:
        self.fires += 1
        return await self.store.fire_schedule(*args)  # type: ignore[no-any-return]


async def test_serve_fires_nothing_while_a_schedule_is_paused(store: Any, target: Target) -> None:
    plugins = PluginManager([pg_jobs], autoload=False)
    codec = JobCodec(plugins)
    now = time.time()
    row = schedule_row(codec, target.rec("tick"), every=60, now=now - 120, offset=0.0)
    stored = await store.add_schedule(row)
    assert stored.next_run < now, "a period is due"
    await store.set_schedule_paused(stored.schedule_id, True)
    spy = Spy(store)
    serving = asyncio.create_task(
        serve(
            spy,
            await store.get_schedule(stored.schedule_id),
            codec=codec,
            strategy_key=lambda job: (0.0,),
            submitted_by="server",
            job_id_suffix="s",
            retry_pause=0.01,
        )
    )
    try:
        while spy.reads < 3:  # it looked at the paused schedule again and again
            spy.read.clear()
            await asyncio.wait_for(spy.read.wait(), 30)
        assert spy.fires == 0 and await store.schedule_jobs(stored.schedule_id) == []
        await store.set_schedule_paused(stored.schedule_id, False, time.time())
        for _ in range(3000):  # the serving task fires it soon after
            if await store.schedule_jobs(stored.schedule_id):
                break
            await asyncio.sleep(0.01)
        assert len(await store.schedule_jobs(stored.schedule_id)) == 1
        assert (await store.get_schedule(stored.schedule_id)).fired == 1
    finally:
        serving.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await serving


# ── what Client.stats makes of a store's stats ────────────────────────
async def test_client_stats_report_each_limits_use(target: Target) -> None:
    limits = Limits(
        executors={"async": 3},
        job_types={"noop": 2},
        rates={"email": Rate(per_second=1.0, burst=4)},
    )
    async with Client(
        target.url, plugins=PluginManager([pg_jobs], autoload=False), limits=limits
    ) as client:
        store = client.store
        await store.insert([new("a"), new("b", type="email"), new("c", type="email")])
        claimed, _ = await store.claim(5, OWNER)
        assert len(claimed) == 3
        stats = await client.stats()
    uses = {(u.kind, u.name): (u.limit, u.in_use) for u in stats.limits}
    assert uses == {
        ("executor", "async"): (3, 3),
        ("job_type", "noop"): (2, 1),
        ("rate", "email"): (4, 2),
    }
    assert [(w.worker, w.running) for w in stats.workers] == [(OWNER, 3)]
    assert sum(b.completed + b.failed for b in stats.throughput) == 0
    assert stats.counts["running"] == 3 and stats.counts["pending"] == 0


async def test_an_attempt_whose_worker_died_is_in_the_history(store: Any, target: Target) -> None:
    await store.insert([new("a")])
    await store.claim(1, "dead-worker")
    await target.expire_lease(store, "a")
    assert await store.reap_expired() == 1
    assert await store.reap_expired() == 0
    row = await store.get("a")
    assert row.status == "pending"
    assert [(a.number, a.status, a.worker) for a in row.history] == [
        (1, "lease_expired", "dead-worker")
    ]
    assert row.history[0].error == "lease expired: its worker stopped renewing it"


async def test_a_client_closes_even_when_a_wake_up_swallows_its_cancel() -> None:
    # Python 3.11's asyncio.wait_for returns instead of raising when the cancel
    # arrives as the awaited event is set: the client's watchers must still end.
    from store_support import FakeSharedStore

    class Swallowing(FakeSharedStore):
        async def wait_finished(self, timeout: float) -> bool:
            try:
                await asyncio.sleep(timeout)
            except asyncio.CancelledError:
                return True  # what wait_for does in that race
            return False

        wait_changed = wait_finished

    client = Client(Swallowing())
    await client.open()
    assert await client.wait_for_change(0) is False
    await asyncio.wait_for(client.close(), 30)
