"""Throughput history (issue 24, the Overview): ended attempts counted per
bucket, queue and job type with a duration histogram, kept by every shared
store at two steps (`HistoryRole`), folded in memory by workers and by an
in-process scheduler's `LocalClient`, read by `Client.history`.

The store contract runs on PostgreSQL, shared SQLite and memory://; times
are the store's and rows are written with the starts a test picks, so no
test sleeps or depends on how long anything took.
"""

from __future__ import annotations

import asyncio
import gc
import itertools
import math
import re
import subprocess
import sys
import time
import weakref
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import attrs
import pytest

import pg_jobs
from jobsched import (
    HISTORY_WINDOWS,
    BlockingClient,
    Client,
    History,
    JobScheduler,
    JobStatus,
    LocalClient,
    PluginManager,
    RetryPolicy,
)
from jobsched.store import (
    DURATION_BOUNDS,
    DURATION_SLOTS,
    FOLD_STEP,
    HISTORY_KEEP,
    BacklogRow,
    HistoryFold,
    HistoryRow,
    HistoryTable,
    duration_slot,
    percentile,
)
from shared_support import Target

PLUGINS = PluginManager([pg_jobs], autoload=False)
FIXED = {"policy": "fixed", "seconds": 0, "max_retries": 1}


def hist(**slots: int) -> tuple[int, ...]:
    """A histogram with `n` attempts in the slot of each ``s<seconds>`` given
    (``s0_015=3``: three attempts of 15 ms)."""
    counts = [0] * DURATION_SLOTS
    for name, n in slots.items():
        counts[duration_slot(float(name[1:].replace("_", ".")))] += n
    return tuple(counts)


def row(start: float, queue: str, type: str, ok: int, bad: int, **slots: int) -> HistoryRow:
    durations = hist(**slots) if slots else hist(s0_015=ok + bad)
    return HistoryRow(
        step=FOLD_STEP,
        start=start,
        queue=queue,
        type=type,
        completed=ok,
        failed=bad,
        durations=durations,
    )


async def until(check: Callable[[], Awaitable[Any]], what: str) -> Any:
    """The first truthy value of `check()`, polled: a condition, not a time."""
    give_up = time.monotonic() + 30
    while not (value := await check()):
        if time.monotonic() > give_up:
            pytest.fail(f"never happened: {what}")
        await asyncio.sleep(0.01)
    return value


# ── the histogram and the fold ─────────────────────────────────────────
def test_a_percentile_interpolates_inside_its_bucket_as_prometheus_does() -> None:
    assert percentile(hist(), 0.5) is None
    # 100 attempts of 10-20 ms: ranks spread evenly over the bucket.
    assert percentile(hist(s0_015=100), 0.5) == pytest.approx(0.015)
    assert percentile(hist(s0_015=100), 0.95) == pytest.approx(0.0195)
    # 90 fast ones (0-1 ms) and 10 slow ones (1-2 s): the median is fast,
    # the 95th percentile halfway through the slow ones' bucket.
    mixed = hist(s0_0005=90, s1_5=10)
    assert percentile(mixed, 0.5) == pytest.approx(0.001 * 50 / 90)
    assert percentile(mixed, 0.95) == pytest.approx(1.5)
    # Longer than every bound: the last bound, never infinity.
    assert percentile(hist(s9000=3), 0.5) == DURATION_BOUNDS[-1]
    # Bounds are inclusive: an attempt of exactly 1 s is in the (0.5, 1] bucket.
    assert duration_slot(1.0) == DURATION_BOUNDS.index(1.0)


def test_the_fold_counts_by_bucket_queue_and_type_and_gives_back_what_failed() -> None:
    fold = HistoryFold()
    assert not fold
    t = 1_800_000_000.0  # a multiple of 300
    fold.add(t + 10, "default", "email", True, 0.015)
    fold.add(t + 299, "default", "email", False, 0.015)
    fold.add(t + 300, "default", "email", True, 0.015)  # the next bucket
    fold.add(t + 10, "bulk", "email", True, 3.0)
    rows = fold.take()
    assert not fold and fold.take() == []
    assert [(r.start, r.queue, r.completed, r.failed) for r in rows] == [
        (t, "bulk", 1, 0),
        (t, "default", 1, 1),
        (t + 300, "default", 1, 0),
    ]
    assert rows[1].durations == hist(s0_015=2)
    fold.merge(rows)
    fold.add(t + 20, "default", "email", True, 0.015)
    assert fold.take()[1] == row(t, "default", "email", 2, 1)


def test_the_memory_table_keeps_each_step_as_long_as_its_keep() -> None:
    t = 1_800_000_000.0
    hour = t - t % 3600
    table = HistoryTable()
    table.add([row(t, "default", "a", 2, 0), row(t + 300, "default", "a", 1, 1)], now=t + 600)
    buckets, [a] = table.read(3600.0, 0.0, None, None)
    assert buckets == [(hour, 3, 1)] and (a.type, a.completed, a.failed) == ("a", 3, 1)
    assert table.read(300.0, 0.0, None, None)[0] == [(t, 2, 0), (t + 300, 1, 1)]
    # A day later the 5-minute rows are gone, the hourly one is kept a week.
    table.prune(t + HISTORY_KEEP[300.0] + 600)
    assert table.read(300.0, 0.0, None, None) == ([], [])
    assert table.read(3600.0, 0.0, None, None)[0] == [(hour, 3, 1)]
    table.prune(t + HISTORY_KEEP[3600.0] + 3600)
    assert table.read(3600.0, 0.0, None, None) == ([], [])


def summary(read: Any) -> tuple[list[tuple[float, int, int]], list[tuple[str, str, int, int]]]:
    """A store's history read as plain tuples: the buckets, and each type's
    ``(type, queue, completed, failed)``."""
    buckets, types = read
    return buckets, [(r.type, r.queue, r.completed, r.failed) for r in types]


# ── the store contract, on every shared store ──────────────────────────
async def test_flushes_add_up_at_both_steps_and_reads_filter(target: Target) -> None:
    store = await target.open_store()
    try:
        now = time.time()
        t = math.floor(now / 3600) * 3600.0  # two 5-minute buckets of this hour
        if t + 300 > now:
            t -= 3600.0
        # Two workers flush the same keys: the counts add up, never replace.
        await store.add_history([row(t, "default", "email", 3, 1), row(t, "bulk", "email", 5, 0)])
        await store.add_history(
            [
                row(t, "default", "email", 1, 0),
                row(t + 300, "default", "email", 0, 2, s1_5=2),
                row(t, "default", "report", 4, 0),
            ]
        )
        five = await store.history(300.0, t - 1, None, None)
        assert summary(five) == (
            [(t, 13, 1), (t + 300, 0, 2)],  # both queues, both types, both flushes
            [("email", "*", 9, 3), ("report", "*", 4, 0)],
        )
        email, report = five[1]
        assert (email.step, email.start) == (300.0, t - 1)
        assert email.durations == tuple(
            a + b for a, b in zip(hist(s0_015=10), hist(s1_5=2), strict=True)
        )
        assert report.durations == hist(s0_015=4)
        # The hourly rows hold the same attempts, in one bucket.
        assert summary(await store.history(3600.0, t - 1, None, None)) == (
            [(t, 13, 3)],
            [("email", "*", 9, 3), ("report", "*", 4, 0)],
        )
        # Filters: one type, one queue, a later start.
        assert summary(await store.history(300.0, t - 1, "email", "bulk")) == (
            [(t, 5, 0)],
            [("email", "bulk", 5, 0)],
        )
        assert summary(await store.history(300.0, t - 1, "email", "default")) == (
            [(t, 4, 1), (t + 300, 0, 2)],
            [("email", "default", 4, 3)],
        )
        assert summary(await store.history(300.0, t + 1, None, None)) == (
            [(t + 300, 0, 2)],
            [("email", "*", 0, 2)],
        )
        assert await store.history(300.0, t - 1, "nope", None) == ([], [])
        assert await store.history(300.0, t - 1, None, "nope") == ([], [])
    finally:
        await store.close()


async def test_rows_older_than_their_keep_go_in_the_flush(target: Target) -> None:
    store = await target.open_store()
    try:
        now = time.time()
        two_days = math.floor((now - 2 * 86_400) / 3600) * 3600.0
        eight_days = math.floor((now - 8 * 86_400) / 3600) * 3600.0
        await store.add_history(
            [row(two_days, "default", "a", 1, 0), row(eight_days, "default", "a", 1, 0)]
        )
        # Two days old: past the day of 5-minute rows, within the week of hourly ones.
        assert await store.history(300.0, 0.0, None, None) == ([], [])
        assert (await store.history(3600.0, 0.0, None, None))[0] == [(two_days, 1, 0)]
        if target.kind == "memory":
            return  # its rows are objects: HistoryTable's own test ages them
        # Rows already kept go too, once past their keep (moved back by hand).
        now_bucket = math.floor(now / 300) * 300.0
        await store.add_history([row(now_bucket, "default", "a", 1, 0)])
        await _age_history(target, store, 6 * 86_400)
        await store.add_history([row(now_bucket, "default", "b", 1, 0)])
        hourly = await store.history(3600.0, 0.0, None, None)
        assert [r.type for r in hourly[1]] == ["a", "b"]  # the aged "a" row of now, and "b"
        assert [r.type for r in (await store.history(300.0, 0.0, None, None))[1]] == ["b"]
    finally:
        await store.close()


async def _age_history(target: Target, store: Any, seconds: float) -> None:
    """Move every kept history row `seconds` back (as if flushed that long ago)."""
    if target.kind == "postgresql":
        async with store.connection() as conn:
            await conn.execute(
                f'UPDATE "{target.schema}".history SET start = start - %s', [seconds]
            )
    else:
        await store.call(
            lambda conn: conn.execute(
                "UPDATE jobsched_shared_history SET start = start - ?", (seconds,)
            )
        )


async def test_a_row_a_worker_cannot_have_folded_is_refused_whole(target: Target) -> None:
    store = await target.open_store()
    try:
        t = math.floor(time.time() / 300) * 300.0
        good = row(t, "default", "a", 1, 0)
        for bad in (
            HistoryRow(
                step=3600.0, start=t, queue="q", type="a", completed=1, failed=0,
                durations=hist(s0_015=1),
            ),
            HistoryRow(
                step=FOLD_STEP, start=t + 1, queue="q", type="a", completed=1, failed=0,
                durations=hist(s0_015=1),
            ),
            HistoryRow(
                step=FOLD_STEP, start=t, queue="q", type="a", completed=2, failed=0,
                durations=hist(s0_015=1),
            ),
        ):  # fmt: skip
            with pytest.raises(ValueError, match="not a 300-second history row"):
                await store.add_history([good, bad])
        assert await store.history(300.0, 0.0, None, None) == ([], [])
    finally:
        await store.close()


async def test_the_backlog_counts_queued_and_running_jobs_per_type(target: Target) -> None:
    async with Client(target.url, plugins=PLUGINS) as client:
        first = await client.submit(target.rec("a"))
        await client.submit(target.rec("b"), queue="bulk")
        await client.submit(target.rec("c"), delay=3600)  # queued, not due
        await client.submit(pg_jobs.Fail(), depends_on=[first])  # waits for its upstream
        await client.submit(pg_jobs.Fail(), queue="bulk", delay=3600)
        store = await target.open_store()
        try:
            [claimed], _ = await store.claim(1, "w1", {"default": 1})
            assert claimed.job_id == first
            rows, at = await store.backlog(None)
            assert abs(at - time.time()) < 60
            # By queue and type; the job waiting for its dependency is not queued yet.
            assert [(r.queue, r.type, r.queued, r.running) for r in rows] == [
                ("bulk", "fail", 1, 0),
                ("bulk", "record", 1, 0),
                ("default", "record", 1, 1),
            ]
            bulk_fail, bulk_record, default_record = rows
            assert bulk_fail.oldest_due is None  # queued, but not due for an hour
            assert bulk_record.oldest_due is not None and bulk_record.oldest_due <= at
            assert default_record.oldest_due is None  # its one queued job is delayed
            bulk, _ = await store.backlog("bulk")
            assert bulk == [bulk_fail, bulk_record]
            assert (await store.backlog("nope"))[0] == []
        finally:
            await store.close()


# ── workers fold and flush; Client.history reads ──────────────────────
async def test_a_worker_flushes_its_attempts_and_the_client_reads_them(target: Target) -> None:
    target = target.with_lease(0.3)  # a flush every 0.1 s
    scheduler = JobScheduler(
        store=target.url, shared=True, plugins=PLUGINS, queues={"default": 2, "bulk": 1}
    )
    async with Client(target.url, plugins=PLUGINS) as client:
        await scheduler.start()
        try:
            ok = [await client.submit(target.rec(f"r{i}")) for i in range(5)]
            bad = await client.submit(pg_jobs.Fail(), retry=FIXED, queue="bulk")
            for job_id in ok:
                assert (await client.wait(job_id, timeout=30)).status is JobStatus.COMPLETED
            assert (await client.wait(bad, timeout=30)).status is JobStatus.FAILED

            async def flushed() -> History | None:
                h = await client.history(window="1h")
                return h if h.completed + h.failed == 7 else None

            h = await until(flushed, "the worker flushed its attempts")
        finally:
            await scheduler.stop()
        assert (h.window, h.step, len(h.buckets)) == ("1h", 300.0, 12)
        assert (h.completed, h.failed) == (5, 2)  # both attempts of the failing job
        assert h.failure_rate == pytest.approx(2 / 7)
        assert h.p50 is not None and h.p95 is not None and h.p50 <= h.p95
        assert sum(b.completed for b in h.buckets) == 5
        assert [(t.type, t.completed, t.failed, t.queued) for t in h.types] == [
            ("fail", 0, 2, 0),
            ("record", 5, 0, 0),
        ]
        assert h.types[0].failure_rate == 1.0 and h.backlog_age is None
        # Filters: the queue "bulk" holds the failing job alone.
        bulk = await client.history(window="24h", queue="bulk")
        assert (bulk.queue, bulk.completed, bulk.failed, len(bulk.buckets)) == ("bulk", 0, 2, 288)
        only = await client.history(window="7d", type="record")
        assert (only.step, len(only.buckets), only.completed, only.failed) == (3600.0, 168, 5, 0)
        assert [t.type for t in only.types] == ["record"]
        # A backlog: a due job no worker runs now.
        waiting = await client.submit(target.rec("late"))
        later = await client.history(window="1h")
        assert later.backlog_age is not None and later.backlog_age >= 0
        assert [(t.type, t.queued) for t in later.types] == [("fail", 0), ("record", 1)]
        [default] = later.queues
        assert (default.name, default.queued, default.running) == ("default", 1, 0)
        assert default.backlog_age is not None
        assert (await client.history(window="1h", queue="bulk")).queues == []
        assert (await client.history(window="1h", type="fail")).queues == []
        assert (await client.get(waiting)).status is JobStatus.PENDING


async def test_a_stopping_worker_flushes_what_it_folded(target: Target) -> None:
    # A lease of an hour: no renewal flushes during the test, only the stop.
    target = target.with_lease(3600)
    scheduler = JobScheduler(store=target.url, shared=True, plugins=PLUGINS)
    async with Client(target.url, plugins=PLUGINS) as client:
        await scheduler.start()
        job_id = await client.submit(target.rec("x"))
        await client.wait(job_id, timeout=30)
        assert (await client.history(window="1h")).completed == 0  # not flushed yet
        await scheduler.stop()
        h = await client.history(window="1h")
        assert (h.completed, h.failed, [t.type for t in h.types]) == (1, 0, ["record"])


async def test_a_flush_the_store_refuses_is_kept_for_the_next(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    url = f"memory://{tmp_path.name}-flush?lease=3600"
    scheduler = JobScheduler(store=url, shared=True, plugins=PLUGINS)
    async with Client(url, plugins=PLUGINS) as client:
        await scheduler.start()
        try:
            job_id = await client.submit(pg_jobs.Fail(), retry=RetryPolicy(max_retries=0))
            await client.wait(job_id, timeout=30)
            backend: Any = scheduler.kernel.backend
            store = backend.store
            real = store.add_history

            async def down(rows: Any) -> None:
                raise OSError("store down")

            store.add_history = down
            await backend.flush_history()  # never raises
            assert (await client.history(window="1h")).failed == 0
            store.add_history = real
            await backend.flush_history()
            assert (await client.history(window="1h")).failed == 1
        finally:
            await scheduler.stop()


def test_the_blocking_client_reads_the_history(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'jobs.db'}"
    with BlockingClient(url, plugins=PLUGINS) as client:
        h = client.history(window="7d", queue="default")
        assert (h.window, h.queue, h.completed, h.types, h.backlog_age) == (
            "7d",
            "default",
            0,
            [],
            None,
        )
        assert all(b.completed == b.failed == 0 for b in h.buckets)
        # Buckets end with the one under way, a step apart.
        assert h.buckets[-1].start <= h.at < h.buckets[-1].start + h.step
        assert {b2.start - b1.start for b1, b2 in itertools.pairwise(h.buckets)} == {3600.0}


# ── in process: LocalClient keeps the history in memory ───────────────
async def test_local_client_counts_its_schedulers_attempts_at_once() -> None:
    async def ok() -> int:
        return 1

    async def bad() -> None:
        raise RuntimeError("no")

    async with JobScheduler(queues={"default": 2, "bulk": 1}) as scheduler:
        done = [scheduler.submit(ok) for _ in range(3)]
        await scheduler.join()
        # Made after those ran: it starts from the finished jobs the scheduler remembers.
        client = LocalClient(scheduler)
        h = await client.history(window="1h")
        assert (h.completed, h.failed) == (3, 0) and len(done) == 3
        scheduler.submit(bad, retry=RetryPolicy(max_retries=1, base_delay=0.0), queue="bulk")
        await scheduler.join()
        h = await client.history(window="24h")
        assert (h.completed, h.failed) == (3, 2)  # every attempt, without a lag
        names = [t.type for t in h.types]
        assert len(names) == 2 and any(n.endswith("bad") for n in names)
        bulk = await client.history(window="1h", queue="bulk")
        assert (bulk.completed, bulk.failed) == (0, 2)
        # A second client shares the first one's history.
        second = await LocalClient(scheduler).history(window="1h")
        assert (second.completed, second.failed) == (3, 2)
        # A backlog: a job waiting for its delay is queued, not due.
        scheduler.submit(ok, delay=3600)
        waiting = await client.history(window="1h")
        assert waiting.backlog_age is None
        assert sum(t.queued for t in waiting.types) == 1


def test_the_windows_are_the_documented_three() -> None:
    assert HISTORY_WINDOWS == {
        "1h": (3600.0, 300.0),
        "24h": (86_400.0, 300.0),
        "7d": (604_800.0, 3600.0),
    }


def test_the_docs_example_prints_what_the_page_says() -> None:
    doc = (Path(__file__).resolve().parent.parent / "docs" / "client.md").read_text()
    section = doc.split("### Throughput history", 1)[1]
    code, expected = re.findall(r"```(?:python|text)\n(.*?)```", section, flags=re.S)[:2]
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout == expected


def test_the_record_sums_the_backlog_per_type_and_per_queue() -> None:
    at = 1_800_000_000.0
    backlog = [
        BacklogRow(queue="bulk", type="a", queued=2, running=1, oldest_due=at - 30),
        BacklogRow(queue="default", type="a", queued=1, running=0, oldest_due=at - 90),
        BacklogRow(queue="default", type="b", queued=4, running=2, oldest_due=None),
    ]
    ended = [attrs.evolve(row(at - 600, "*", "a", 3, 1), start=at - 3600)]
    h = History.from_rows("1h", ([(at - 600, 3, 1)], ended), backlog, at)
    assert [(t.type, t.queued, t.running, t.backlog_age, t.completed) for t in h.types] == [
        ("a", 3, 1, 90.0, 3),
        ("b", 4, 2, None, 0),
    ]
    assert [(q.name, q.queued, q.running, q.backlog_age) for q in h.queues] == [
        ("bulk", 2, 1, 30.0),
        ("default", 5, 2, 90.0),
    ]
    assert h.backlog_age == 90.0
    assert [(b.start, b.completed) for b in h.buckets if b.completed] == [(at - 600, 3)]
    # A type filter narrows the backlog too.
    only_b = History.from_rows("1h", ([], []), backlog, at, type="b")
    assert [q.name for q in only_b.queues] == ["default"] and only_b.backlog_age is None


async def test_a_schedulers_history_goes_with_it() -> None:
    # The history is kept per scheduler while it lives, not after.
    async with JobScheduler() as scheduler:
        LocalClient(scheduler)
    gone = weakref.ref(scheduler)
    del scheduler
    gc.collect()
    assert gone() is None


async def test_workers_flushing_the_same_keys_at_once_lose_no_count(target: Target) -> None:
    # Each of 3 workers flushes the same 8 keys 10 times, concurrently, its
    # rows in another order: the store upserts in one key order (no deadlock)
    # and adds every count (no update lost).
    t = math.floor(time.time() / 300) * 300.0
    keys = [(q, k) for q in ("a", "b") for k in ("w", "x", "y", "z")]
    stores = [await target.open_store(f"w{i}") for i in range(3)]
    try:

        async def worker(i: int, store: Any) -> None:
            order = keys[i:] + keys[:i]
            for _ in range(10):
                await store.add_history([row(t, q, k, 1, 1) for q, k in order])

        await asyncio.gather(*(worker(i, store) for i, store in enumerate(stores)))
        buckets, types = await stores[0].history(300.0, t, None, None)
        assert buckets == [(t, 3 * 10 * 8, 3 * 10 * 8)]
        assert [(r.type, r.completed, r.failed) for r in types] == [
            (k, 60, 60) for k in ("w", "x", "y", "z")
        ]
        assert types[0].durations == hist(s0_015=120)
    finally:
        for store in stores:
            await store.close()
