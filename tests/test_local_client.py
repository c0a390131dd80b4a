"""`LocalClient`: `Client`'s operator API over a scheduler running in this process,
on the memory store and on a SQLite file the scheduler owns."""

from __future__ import annotations

import asyncio
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from jobsched import (
    AsyncJob,
    InvalidTransitionError,
    JobFailedError,
    JobInfo,
    JobPage,
    JobScheduler,
    JobStatus,
    LocalClient,
    ScheduleInfo,
    SchedulerError,
    Stats,
    Submission,
    UnknownJobError,
    UnknownScheduleError,
)
from jobsched.testing import VirtualClock
from kernel_support import Gate, Noop, join, settle, until
from store_support import Fail, jobs_plugin
from store_support import Noop as StoredNoop

COMPLETED, FAILED, PENDING = JobStatus.COMPLETED, JobStatus.FAILED, JobStatus.PENDING


async def add(a: int, b: int) -> int:
    return a + b


async def broken(message: str) -> None:
    raise ValueError(message)


class Flaky(AsyncJob):
    """Fails its first call, then returns "ok"."""

    def __init__(self) -> None:
        super().__init__("flaky", timeout=None, retry="none")
        self.calls = 0

    async def run(self) -> str:
        self.calls += 1
        if self.calls == 1:
            raise ConnectionError("first call fails")
        return "ok"


@pytest.fixture
async def scheduler() -> Any:
    async with JobScheduler("fifo", num_workers=2) as running:
        yield running


@pytest.fixture
async def client(scheduler: JobScheduler) -> Any:
    async with LocalClient(scheduler) as opened:
        yield opened


# ── reading ────────────────────────────────────────────────────────────
async def test_get_describes_a_function_job_by_name_and_reprs(
    scheduler: JobScheduler, client: LocalClient
) -> None:
    job_id = await client.submit(add, 2, b=3, key="sum")
    info = await client.wait(job_id, timeout=10)
    assert isinstance(info, JobInfo)
    assert (info.job_id, info.type, info.status, info.result) == (job_id, "add", COMPLETED, 5)
    assert info.args == {"args": ["2"], "kwargs": {"b": "3"}}
    assert info.key == "sum" and info.name == "add" and info.attempts == 1
    assert info.options["executor"] == "async"
    assert info.submitted_at <= info.started_at <= info.finished_at  # type: ignore[operator]
    assert info.history == () and info.progress is None and info.result_expires is None
    assert await client.get(job_id) == info


async def test_a_registered_job_type_is_described_as_the_store_would_keep_it() -> None:
    async with JobScheduler(plugins=[jobs_plugin]) as scheduler:
        client = LocalClient(scheduler)
        job_id = await client.submit(StoredNoop(label="x"))
        info = await client.wait(job_id, timeout=10)
    assert (info.type, dict(info.args)) == ("noop", {"label": "x"})
    assert dict(info.options) == {"name": "Noop", "executor": "async"}


async def test_unknown_ids_raise_unknown_job(client: LocalClient) -> None:
    for call in (client.get, client.wait, client.result, client.retry, client.cancel):
        with pytest.raises(UnknownJobError, match="job-nope"):
            await call("job-nope")


async def test_jobs_filters_by_status_and_type_in_submit_order(
    scheduler: JobScheduler, client: LocalClient
) -> None:
    ok = await client.submit(add, 1, 1)
    bad = await client.submit(broken, "x", retry="none")
    await join(scheduler)
    assert [i.job_id for i in await client.jobs()] == [ok, bad]
    assert [i.job_id for i in await client.jobs(status="failed")] == [bad]
    assert [i.job_id for i in await client.jobs(status=["failed", COMPLETED])] == [ok, bad]
    assert [i.job_id for i in await client.jobs(type="add")] == [ok]
    assert [i.job_id for i in await client.jobs(limit=1)] == [ok]
    with pytest.raises(ValueError, match="bogus"):
        await client.jobs(status="bogus")


async def test_page_is_newest_first_with_the_total_and_searches_text(
    scheduler: JobScheduler, client: LocalClient
) -> None:
    ids = [await client.submit(add, i, 100) for i in range(5)]
    special = await client.submit(broken, "<needle>", retry="none")
    await join(scheduler)
    page = await client.page(limit=2, offset=1)
    assert isinstance(page, JobPage)
    assert page.total == 6 and [i.job_id for i in page.jobs] == [ids[4], ids[3]]
    assert [i.job_id for i in (await client.page(q="NEEDLE")).jobs] == [special]
    assert [i.job_id for i in (await client.page(q=special.upper())).jobs] == [special]
    assert (await client.page(status="completed", type="add")).total == 5
    assert (await client.page(type="broken", status="completed")).total == 0
    for bad in ({"limit": 0}, {"limit": 1001}, {"offset": -1}):
        with pytest.raises(ValueError):
            await client.page(**bad)
    with pytest.raises(TypeError):
        await client.page(q=3)  # type: ignore[arg-type]


async def test_stats_counts_throughput_workers_and_limits() -> None:
    clock = VirtualClock()
    scheduler = JobScheduler(clock=clock, limits={"executors": {"async": 3}})
    client = LocalClient(scheduler)
    gate = Gate()
    async with scheduler:
        await client.submit(add, 1, 2)
        await client.submit(broken, "x", retry="none")
        await join(scheduler)
        await clock.advance(120)
        await client.submit(add, 3, 4)
        await client.submit(gate)
        await until(lambda: gate.waiting, "the gate to start")
        stats = await client.stats()
        assert isinstance(stats, Stats)
        assert stats.counts["completed"] == 2 and stats.counts["failed"] == 1
        assert stats.counts["running"] == 1 and set(stats.counts) == {s.value for s in JobStatus}
        assert len(stats.throughput) == 60
        assert [b.start for b in stats.throughput] == sorted(b.start for b in stats.throughput)
        assert sum(b.completed for b in stats.throughput) == 2
        assert sum(b.failed for b in stats.throughput) == 1
        assert stats.throughput[-1].completed == 1  # the minute of now
        assert [(w.worker, w.running) for w in stats.workers] == [("local", 1)]
        assert [(u.kind, u.name, u.limit, u.in_use) for u in stats.limits] == [
            ("executor", "async", 3, 1)
        ]
        assert stats.queue_paused is False and stats.at == clock.time()
        gate.open()
        await join(scheduler)


# ── results ────────────────────────────────────────────────────────────
async def test_result_returns_the_value_or_raises_the_failure(
    scheduler: JobScheduler, client: LocalClient
) -> None:
    ok = await client.submit(add, 20, 22)
    bad = await client.submit(broken, "no good", retry="none")
    assert await client.result(ok, timeout=10) == 42
    with pytest.raises(JobFailedError) as caught:
        await client.result(bad, timeout=10)
    error = caught.value
    assert (error.job_id, error.status, error.error_type, error.message, error.attempts) == (
        bad,
        "failed",
        "ValueError",
        "no good",
        1,
    )
    gate = Gate()
    waiting = await client.submit(gate)
    with pytest.raises(TimeoutError):
        await client.result(waiting, timeout=0.05)
    gate.open()
    assert await client.result(waiting, timeout=10) is None


async def test_a_result_past_its_ttl_reads_as_none() -> None:
    clock = VirtualClock()
    async with JobScheduler(clock=clock, result_ttl=60) as scheduler:
        client = LocalClient(scheduler)
        job_id = await client.submit(add, 1, 1)
        info = await client.wait(job_id, timeout=10)
        assert info.result == 2 and info.result_expires == info.finished_at + 60  # type: ignore[operator]
        await clock.advance(75)
        assert (await client.get(job_id)).result is None


async def test_a_job_submitted_with_its_own_result_settings_arms_the_reaper() -> None:
    clock = VirtualClock()
    async with JobScheduler(clock=clock) as scheduler:
        client = LocalClient(scheduler)
        assert clock.pending == 0  # no setting, no reaper
        dropped = await client.submit(add, 1, 1, keep_result=False)
        short = await client.submit(add, 2, 2, result_ttl=5)
        kept = await client.submit(add, 3, 3)
        assert await client.result(dropped, timeout=10) == 2  # until the reaper comes
        assert (await client.get(short)).result_expires is not None
        await clock.advance(60)
        assert [(await client.get(i)).result for i in (dropped, short, kept)] == [None, None, 6]
        assert (await client.get(kept)).result_expires is None
        assert scheduler.expire_results() == 0


async def test_retention_forgets_old_finished_jobs() -> None:
    clock = VirtualClock()
    async with JobScheduler(clock=clock, retention=100) as scheduler:
        client = LocalClient(scheduler)
        job_id = await client.submit(add, 1, 1)
        await client.wait(job_id, timeout=10)
        await clock.advance(99)
        assert (await client.get(job_id)).status is COMPLETED
        await clock.advance(30)
        with pytest.raises(UnknownJobError):
            await client.get(job_id)


# ── operator actions ───────────────────────────────────────────────────
async def test_retry_runs_it_again_and_keeps_the_history(
    scheduler: JobScheduler, client: LocalClient
) -> None:
    job_id = await client.submit(Flaky())
    failed = await client.wait(job_id, timeout=10)
    assert failed.status is FAILED and failed.history == ()
    retried = await client.retry(job_id)
    assert retried.status is PENDING and retried.attempts == 0
    assert [(a.number, a.status, a.error) for a in retried.history] == [
        (1, "failed", "ConnectionError: first call fails")
    ]
    done = await client.wait(job_id, timeout=10)
    assert done.status is COMPLETED and done.result == "ok" and len(done.history) == 1
    assert done.history[0].started_at is not None and done.history[0].worker is None
    with pytest.raises(InvalidTransitionError, match="is completed"):
        await client.retry(job_id)


async def test_requeue_and_purge(scheduler: JobScheduler, client: LocalClient) -> None:
    a = await client.submit(broken, "a", retry="none")
    b = await client.submit(broken, "b", retry="none")
    ok = await client.submit(add, 1, 1)
    await join(scheduler)
    assert await client.requeue(type="add") == []
    assert await client.requeue(status="failed", type="broken") == [a, b]
    await join(scheduler)
    with pytest.raises(ValueError, match="completed"):
        await client.requeue(status=["completed"])
    with pytest.raises(TypeError):
        await client.requeue(type=1)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="running"):
        await client.purge(older_than=0, status="running")
    assert await client.purge(older_than=3600) == 0
    assert await client.purge(older_than=0, status="completed") == 1
    assert [i.job_id for i in await client.jobs()] == [a, b]
    assert await client.purge(older_than=0) == 2
    assert await client.jobs() == []
    with pytest.raises(UnknownJobError):
        await client.get(ok)


async def test_cancel(scheduler: JobScheduler, client: LocalClient) -> None:
    gate = Gate()
    job_id = await client.submit(gate)
    await until(lambda: gate.waiting, "the gate to start")
    assert await client.cancel(job_id) is True
    info = await client.wait(job_id, timeout=10)
    assert info.status is JobStatus.CANCELLED
    assert await client.cancel(job_id) is False


async def test_a_paused_queue_starts_nothing_until_resumed(
    scheduler: JobScheduler, client: LocalClient
) -> None:
    gate = Gate()
    running = await client.submit(gate)
    await until(lambda: gate.waiting, "the gate to start")
    assert await client.pause_queue() is True
    assert await client.pause_queue() is False
    assert await client.queue_paused() is True
    queued = await client.submit(add, 1, 1)
    gate.open()
    assert (await client.wait(running, timeout=10)).status is COMPLETED
    await settle()
    assert (await client.get(queued)).status is PENDING
    assert (await client.stats()).queue_paused is True
    assert await client.resume_queue() is True
    assert await client.resume_queue() is False
    assert await client.result(queued, timeout=10) == 2


async def test_schedules_pause_resume_and_trigger() -> None:
    clock = VirtualClock()
    scheduler = JobScheduler(clock=clock)
    client = LocalClient(scheduler)
    sched_id = scheduler.schedule_recurring(Noop, 10, start_in=10, name="tick")
    async with scheduler:
        (info,) = await client.schedules()
        assert isinstance(info, ScheduleInfo)
        assert (info.schedule_id, info.name, info.trigger, info.paused, info.active) == (
            sched_id,
            "tick",
            {"interval": 10.0},
            False,
            True,
        )
        assert info.next_run == pytest.approx(clock.time() + 10)
        assert await client.pause_schedule(sched_id) is True
        assert await client.pause_schedule(sched_id) is False
        await clock.advance(35)
        assert (await client.schedules())[0].fired == 0
        job_id = await client.trigger_schedule(sched_id)
        assert (await client.result(job_id, timeout=10)) is None
        (info,) = await client.schedules()
        assert (info.fired, info.last_job_id, info.paused, info.type) == (1, job_id, True, "Noop")
        assert await client.resume_schedule(sched_id) is True
        assert await client.resume_schedule(sched_id) is False
        (info,) = await client.schedules()
        assert info.next_run == pytest.approx(clock.time() + 5)  # t=40 on the 10 s grid
        for action in (client.pause_schedule, client.resume_schedule, client.trigger_schedule):
            with pytest.raises(UnknownScheduleError, match="sched-nope"):
                await action("sched-nope")


# ── live views ─────────────────────────────────────────────────────────
async def test_wait_for_change_wakes_on_transitions_and_progress(
    scheduler: JobScheduler, client: LocalClient
) -> None:
    assert await client.wait_for_change(0) is False
    waiter = asyncio.ensure_future(client.wait_for_change(10))
    await settle(3)
    assert not waiter.done()
    await client.submit(add, 1, 1)
    assert await asyncio.wait_for(waiter, 10) is True
    with pytest.raises(ValueError, match="timeout"):
        await client.wait_for_change(-1)


async def test_closing_detaches_the_listeners_and_wakes_waiters(scheduler: JobScheduler) -> None:
    client = LocalClient(scheduler)
    waiter = asyncio.ensure_future(client.wait_for_change(10))
    await settle(3)
    await client.close()
    assert await asyncio.wait_for(waiter, 10) is True
    await client.close()  # twice is harmless


async def test_a_shared_store_scheduler_is_refused(tmp_path: Path) -> None:
    scheduler = JobScheduler(store=f"sqlite:///{tmp_path}/jobs.db", shared=True)
    with pytest.raises(SchedulerError, match=r"jobsched.Client"):
        LocalClient(scheduler)


# ── on a SQLite file the scheduler owns ────────────────────────────────
async def test_over_a_single_owner_sqlite_scheduler(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path}/jobs.db"
    async with JobScheduler(store=url, plugins=[jobs_plugin]) as scheduler:
        client = LocalClient(scheduler)
        bad = await client.submit(Fail(message="nope"))
        info = await client.wait(bad, timeout=10)
        assert (info.type, info.status, info.last_error) == (
            "fail",
            FAILED,
            "NonRetryableError: nope",
        )
        assert (await client.page(q="fail")).total == 1
    async with JobScheduler(store=url, plugins=[jobs_plugin]) as restarted:
        client = LocalClient(restarted)
        assert (await client.get(bad)).status is FAILED
        assert await client.purge(older_than=0) == 1
        await restarted.flush()
    async with JobScheduler(store=url, plugins=[jobs_plugin]) as again:
        assert await LocalClient(again).jobs() == []


async def test_submissions_with_options_are_kept_by_a_sqlite_file(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path}/jobs.db"
    first, second = StoredNoop(label="first"), StoredNoop(label="second")
    async with JobScheduler(store=url, plugins=[jobs_plugin]) as scheduler:
        client = LocalClient(scheduler)
        await client.pause_queue()
        ids = await client.submit_many(
            [
                first,
                Submission(second, depends_on=[first], priority="high", result_ttl=60),
                Submission(StoredNoop(label="later"), delay=3600, unique_key="u"),
            ]
        )
        assert second.priority.name == "MEDIUM" and second.result_ttl is None
        await scheduler.flush()
    # Before start() the scheduler defers submits, and checks them itself:
    # a later call may depend on a job deferred by an earlier one.
    restarted = JobScheduler(store=url, plugins=[jobs_plugin])
    early = LocalClient(restarted)
    upstream = await early.submit(StoredNoop(label="up"), priority="low")
    deferred = await early.submit(StoredNoop(label="after"), depends_on=[upstream])
    async with restarted:
        client = LocalClient(restarted)
        infos = await client.wait_many(ids[:2], timeout=10)
        assert [i.status for i in infos] == [COMPLETED, COMPLETED]
        assert (infos[1].priority.name, infos[1].depends_on) == ("HIGH", (ids[0],))
        assert infos[1].options["result_ttl"] == 60
        later = await client.get(ids[2])
        assert (later.status, later.unique_key, later.args) == (PENDING, "u", {"label": "later"})
        assert (await client.wait(deferred, timeout=10)).depends_on == (upstream,)
        assert (await client.get(upstream)).priority.name == "LOW"
        with pytest.raises(UnknownJobError, match="unknown dependencies"):
            await client.submit(StoredNoop(), depends_on=["job-999999"])


# ── docs/client.md ─────────────────────────────────────────────────────
def test_the_docs_example_prints_what_the_page_says() -> None:
    doc = (Path(__file__).resolve().parent.parent / "docs" / "client.md").read_text()
    section = doc.split("## In-process: `LocalClient`", 1)[1]
    code, expected = re.findall(r"```(?:python|text)\n(.*?)```", section, flags=re.S)[:2]
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout == expected


async def test_submit_many_takes_functions_and_wait_many_returns_in_order(
    client: LocalClient,
) -> None:
    async def answer() -> int:
        return 42

    first = Gate()
    ids = await client.submit_many([first, answer, Submission(Noop(), depends_on=[first])])
    assert ids[0] == first.job_id
    await until(lambda: first.waiting, "the gate to start")
    with pytest.raises(TimeoutError, match=re.escape(str([ids[0], ids[2]]))):
        await client.wait_many(ids, timeout=0)
    first.open("opened")
    infos = await client.wait_many([ids[2], ids[1], ids[0]], timeout=10)
    assert [i.job_id for i in infos] == [ids[2], ids[1], ids[0]]
    assert [i.result for i in infos] == [None, 42, "opened"]
    with pytest.raises(UnknownJobError, match="nope"):
        await client.wait_many([ids[0], "nope"])


async def test_a_job_object_is_queued_once(client: LocalClient) -> None:
    gate = Gate()
    await client.submit(gate, unique_key="one-at-a-time")
    await until(lambda: gate.waiting, "the gate to start")
    assert (await client.get(gate.job_id)).unique_key == "one-at-a-time"
    for again in (client.submit(gate), client.submit(gate, priority="high")):
        with pytest.raises(SchedulerError, match="already submitted"):
            await again
    with pytest.raises(SchedulerError, match="already submitted"):
        await client.submit_many([Noop(), gate])
    assert [info.job_id for info in await client.jobs()] == [gate.job_id]  # nothing queued
    gate.open()
    finished = await client.wait(gate.job_id, timeout=10)
    assert finished.unique_key is None  # the key is free once the job finished


async def test_cancel_schedule_stops_a_schedule(
    scheduler: JobScheduler, client: LocalClient
) -> None:
    sched_id = scheduler.schedule_recurring(Noop, 3600, start_in=3600, name="hourly")
    assert [s.schedule_id for s in await client.schedules()] == [sched_id]
    assert await client.cancel_schedule(sched_id) is True
    assert await client.schedules() == []
    assert await client.cancel_schedule(sched_id) is False
