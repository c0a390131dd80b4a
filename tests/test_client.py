"""`Client` and `BlockingClient` end to end: a real ``jobsched worker`` process runs
what a client enqueued, on every store that several processes can share."""

from __future__ import annotations

import asyncio
import subprocess
import sys
import threading
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import attrs
import pytest

from jobsched import (
    Attempt,
    BlockingClient,
    Client,
    InvalidTransitionError,
    Job,
    JobFailedError,
    JobInfo,
    JobPage,
    JobPriority,
    JobStatus,
    PluginManager,
    Progress,
    ScheduleInfo,
    SchedulerError,
    Stats,
    Submission,
    UnknownJobError,
    UnknownScheduleError,
    build_job,
    hookimpl,
)
from worker_support import Worker, shared_store

pytestmark = pytest.mark.slow


@pytest.fixture(params=["postgresql", "sqlite"])
def store_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """A fresh store several processes share: a PostgreSQL schema or a SQLite file."""
    return shared_store(request, tmp_path)


@pytest.fixture
def worker(store_url: str) -> Iterator[Worker]:
    running = Worker(store_url)
    try:
        yield running
    finally:
        running.stop()


@pytest.fixture
async def client(store_url: str) -> AsyncIterator[Client]:
    async with Client(store_url) as opened:
        yield opened


def email(to: str, **options: object) -> Job:
    return build_job("email", {"to": to, "subject": "hello", "latency": 0}, **options)


def nap(name: str, seconds: float) -> Job:
    return build_job("sleep", {"name": name, "seconds": seconds})


async def until(check: object, what: str) -> None:
    """Poll a condition the test cannot be told about (a worker's progress)."""
    for _ in range(600):
        if await check():  # type: ignore[operator]
            return
        await asyncio.sleep(0.05)
    pytest.fail(f"timed out waiting for {what}")


# ── submitting and following ───────────────────────────────────────────
async def test_a_worker_process_runs_what_a_client_submits(client: Client, worker: Worker) -> None:
    job_id = await client.submit(email("a@example.com"), priority="high", name="greeting")
    done = await client.wait(job_id, timeout=60)
    assert isinstance(done, JobInfo) and done.done
    assert (done.status, done.result, done.attempts) == (
        JobStatus.COMPLETED,
        "sent to a@example.com",
        1,
    )
    assert (done.type, done.name, done.priority) == ("email", "greeting", JobPriority.HIGH)
    assert done.lease_owner is None and done.last_error is None
    assert done.submitted_by == client.identity
    assert done.started_at is not None and done.finished_at is not None
    assert done.submitted_at <= done.started_at <= done.finished_at
    # `get` adds the attempts (lists and waits leave them out: a query per job).
    got = await client.get(job_id)
    assert [(a.number, a.status, a.error) for a in got.history] == [(1, "completed", None)]
    assert got.history[0].worker == worker.identity
    assert attrs.evolve(got, history=()) == done


async def test_submit_many_stores_a_batch_with_dependencies_inside_it(
    client: Client, worker: Worker
) -> None:
    first = nap("first", 0.05)
    ids = await client.submit_many(
        [first, Submission(email("b@example.com"), depends_on=[first]), email("c@example.com")]
    )
    assert len(set(ids)) == 3
    first_done, second_done, third_done = await client.wait_many(ids, timeout=60)
    assert {first_done.status, second_done.status, third_done.status} == {JobStatus.COMPLETED}
    assert second_done.started_at is not None and first_done.finished_at is not None
    assert second_done.started_at >= first_done.finished_at  # it waited for its upstream
    later = await client.submit(email("d@example.com"), depends_on=[ids[0]])
    assert (await client.wait(later, timeout=60)).status is JobStatus.COMPLETED


async def test_a_failed_job_records_its_error(client: Client, worker: Worker) -> None:
    flaky = build_job("flaky-upload", {"path": "x.csv", "failures": 5})
    job_id = await client.submit(flaky, retry="none")
    failed = await client.wait(job_id, timeout=60)
    assert failed.status is JobStatus.FAILED and failed.attempts == 1
    assert failed.last_error is not None and "connection reset" in failed.last_error
    # Its dependents are cancelled with it, in the store.
    downstream = await client.submit(email("e@example.com"), depends_on=[job_id])
    assert (await client.get(downstream)).status is JobStatus.CANCELLED


async def test_cancel_stops_a_job_a_worker_is_running(client: Client, worker: Worker) -> None:
    job_id = await client.submit(nap("long", 3600), timeout=None)

    async def running() -> bool:
        return (await client.get(job_id)).status is JobStatus.RUNNING

    await until(running, "the worker to start the job")
    assert (await client.get(job_id)).lease_owner == worker.identity
    assert [j.job_id for j in await client.jobs(status="running")] == [job_id]
    assert await client.cancel(job_id) is True
    cancelled = await client.wait(job_id, timeout=60)
    assert cancelled.status is JobStatus.CANCELLED and cancelled.lease_owner is None
    assert await client.cancel(job_id) is False  # already finished


# ── without a worker: what the store decides alone ────────────────────
async def test_keys_unique_keys_and_cancel_of_a_waiting_job(client: Client) -> None:
    keyed = await client.submit(email("k@example.com"), key="report-2024")
    assert await client.submit(email("other@example.com"), key="report-2024") == keyed
    waiting = await client.submit(nap("nightly", 0), delay=3600, unique_key="nightly")
    assert await client.submit(nap("again", 0), unique_key="nightly") == waiting
    assert (await client.get(waiting)).status is JobStatus.PENDING
    assert await client.cancel(waiting) is True
    assert (await client.get(waiting)).status is JobStatus.CANCELLED
    # The unique key is free again once its job has finished.
    fresh = await client.submit(nap("fresh", 0), delay=3600, unique_key="nightly")
    assert fresh != waiting
    assert [j.job_id for j in await client.jobs()] == [keyed, waiting, fresh]
    assert [j.job_id for j in await client.jobs(status=["pending"], type="sleep")] == [fresh]
    assert [j.job_id for j in await client.jobs(limit=1)] == [keyed]
    assert [j.job_id for j in await client.jobs(status=JobStatus.CANCELLED)] == [waiting]


async def test_concurrent_submits_are_stored_in_one_insert(
    client: Client, monkeypatch: pytest.MonkeyPatch
) -> None:
    batches: list[int] = []
    insert = client.store.insert

    async def counting(rows: Any) -> Any:
        batches.append(len(rows))
        return await insert(rows)

    monkeypatch.setattr(client.store, "insert", counting)
    ids = await asyncio.gather(
        *(client.submit(email(f"{n}@example.com"), delay=3600) for n in range(50)),
        client.submit(email("same@example.com"), delay=3600, unique_key="once"),
        client.submit(email("same@example.com"), delay=3600, unique_key="once"),
    )
    assert batches == [52]
    assert len(set(ids)) == 51 and ids[50] == ids[51]  # the unique key still deduplicates
    stored = [j.job_id for j in await client.jobs()]
    assert stored == list(dict.fromkeys(ids))  # in the order submit was called
    assert [j.args["to"] for j in await client.jobs()][:3] == [f"{n}@example.com" for n in range(3)]


class _TraceEverything:
    """A plugin whose submit hook stamps every job it sees."""

    @staticmethod
    @hookimpl
    def jobsched_submit_hook() -> Any:
        def stamp(job: Job) -> None:
            job.traceparent = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"

        return stamp


async def test_submitting_leaves_the_callers_job_as_it_was(store_url: str) -> None:
    # A job submitted without options is read, not copied; one with options,
    # or with a submit hook that may change it, is copied: either way the
    # caller's object is never changed, and the store gets what was asked.
    plain, tuned, batched = email("a@example.com"), email("b@example.com"), email("c@example.com")

    def looks(jobs: tuple[Job, ...]) -> list[tuple[Any, ...]]:
        return [(j.priority, j.timeout, j.name, j.traceparent, j.seq) for j in jobs]

    before = looks((plain, tuned, batched))
    async with Client(store_url) as client:
        ids = [
            await client.submit(plain, delay=3600),
            await client.submit(tuned, delay=3600, priority="high", timeout=5, name="tuned"),
            *await client.submit_many([batched, Submission(plain, delay=3600)]),
        ]
        stored = [await client.get(job_id) for job_id in ids]
    assert looks((plain, tuned, batched)) == before
    default = "email a@example.com: hello"
    assert [s.name for s in stored] == [default, "tuned", "email c@example.com: hello", default]
    assert stored[1].priority is JobPriority.HIGH and stored[0].priority is JobPriority.MEDIUM
    hooked = PluginManager([_TraceEverything()])
    async with Client(store_url, plugins=hooked) as client:
        job_id = await client.submit(plain, delay=3600)
        many = await client.submit_many([batched])
        assert (await client.get(job_id)).options.get("traceparent", "").startswith("00-0af7")
        assert (await client.get(many[0])).options.get("traceparent", "").startswith("00-0af7")
    assert plain.traceparent is None and batched.traceparent is None


async def test_one_failing_submit_does_not_fail_the_others_stored_with_it(client: Client) -> None:
    good = await client.submit(email("first@example.com"), delay=3600)
    results = await asyncio.gather(
        client.submit(email("a@example.com"), delay=3600, depends_on=[good]),
        client.submit(email("b@example.com"), depends_on=["no-such-job"]),
        client.submit(email("c@example.com"), delay=3600),
        return_exceptions=True,
    )
    assert isinstance(results[1], UnknownJobError) and "no-such-job" in str(results[1])
    assert all(isinstance(r, str) for r in (results[0], results[2]))
    assert {j.args["to"] for j in await client.jobs()} == {
        "first@example.com",
        "a@example.com",
        "c@example.com",
    }


async def test_a_bad_option_is_refused_at_the_submit_call(client: Client) -> None:
    with pytest.raises(ValueError, match="unique_key"):
        await client.submit(email("x@example.com"), unique_key="")
    assert await client.jobs() == []


async def test_wait_raises_timeout_error_for_a_job_that_does_not_finish(
    client: Client,
) -> None:
    job_id = await client.submit(email("later@example.com"), delay=3600)
    with pytest.raises(TimeoutError, match=job_id):
        await client.wait(job_id, timeout=0.1)


async def test_unknown_ids_are_unknown_job_errors(client: Client) -> None:
    for call in (client.get, client.cancel, client.wait):
        with pytest.raises(UnknownJobError, match="job-nope"):
            await call("job-nope")
    with pytest.raises(UnknownJobError, match="unknown dependencies"):
        await client.submit(email("x@example.com"), depends_on=["job-nope"])
    assert await client.jobs() == []  # nothing was stored


async def test_jobs_that_are_not_data_are_refused_at_submit(client: Client) -> None:
    async def send() -> None:
        return None

    with pytest.raises(SchedulerError, match="a plain function cannot be stored"):
        await client.submit(send)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="priority must be one of"):
        await client.submit(email("x@example.com"), priority="urgent")
    with pytest.raises(ValueError, match="delay must be"):
        await client.submit(email("x@example.com"), delay=-1)
    with pytest.raises(ValueError, match="unknown status"):
        await client.jobs(status="done")
    assert await client.jobs() == []  # nothing was stored


async def test_a_client_that_is_not_open_says_so(store_url: str) -> None:
    client = Client(store_url)
    with pytest.raises(SchedulerError, match="is not open"):
        await client.submit(email("x@example.com"))
    async with client:
        pass
    with pytest.raises(SchedulerError, match="is closed"):
        await client.get("job-1")
    with pytest.raises(SchedulerError, match="is not a shared store"):
        Client("memory://")


# ── the blocking twin ──────────────────────────────────────────────────
def test_a_blocking_client_is_shared_by_threads(store_url: str, worker: Worker) -> None:
    results: dict[str, list[JobInfo]] = {}
    errors: list[BaseException] = []

    with BlockingClient(store_url) as client:

        def produce(name: str) -> None:
            try:
                ids = [client.submit(email(f"{name}{n}@example.com")) for n in range(5)]
                results[name] = [client.wait(job_id, timeout=60) for job_id in ids]
            except BaseException as exc:  # reported by the main thread
                errors.append(exc)

        threads = [threading.Thread(target=produce, args=(n,)) for n in ("a", "b")]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        assert errors == []
        assert len(client.jobs(status="completed")) == 10
        loop_thread = [t for t in threading.enumerate() if t.name == "jobsched-blocking-client"]
        assert len(loop_thread) == 1
    assert sorted(info.result for infos in results.values() for info in infos) == sorted(
        f"sent to {name}{n}@example.com" for name in "ab" for n in range(5)
    )
    assert not loop_thread[0].is_alive()  # closing stopped its thread
    with pytest.raises(SchedulerError, match="is closed"):
        client.submit(email("late@example.com"))
    client.close()  # twice is harmless


def test_a_blocking_client_reports_errors_in_the_calling_thread(store_url: str) -> None:
    with BlockingClient(store_url) as client:
        with pytest.raises(UnknownJobError):
            client.get("job-nope")
        with pytest.raises(TimeoutError):
            client.wait(client.submit(email("x@example.com"), delay=3600), timeout=0.1)
    never_opened = BlockingClient(store_url)
    with pytest.raises(SchedulerError, match="is not open"):
        never_opened.jobs()


async def test_a_schedule_added_by_a_client_fires_its_runs(client: Client, worker: Worker) -> None:
    schedule_id = await client.add_schedule(email("tick@example.com"), every=0.05, times=3)
    await client.wait_schedule(schedule_id, timeout=60)
    fired = await client.jobs(schedule=schedule_id)
    assert len(fired) == 3
    done = await client.wait_many([j.job_id for j in fired], timeout=60)
    assert {j.status for j in done} == {JobStatus.COMPLETED}
    # The same schedule again is the one that ended: it fires no more.
    again = await client.add_schedule(email("tick@example.com"), every=0.05, times=3)
    assert again == schedule_id
    await client.wait_schedule(schedule_id, timeout=60)
    assert len(await client.jobs(schedule=schedule_id)) == 3


def test_wait_is_woken_by_the_store_not_a_busy_loop(store_url: str, worker: Worker) -> None:
    with BlockingClient(store_url) as client:
        store = client.client.store
        reads = 0
        read_jobs = store.jobs

        async def counted(*args: object) -> object:
            nonlocal reads
            reads += 1
            return await read_jobs(*args)

        store.jobs = counted
        job_id = client.submit(nap("short", 0.3))
        assert client.wait(job_id, timeout=60).status is JobStatus.COMPLETED
    # One read before waiting, one per wake-up: a poll would read every few ms.
    assert reads <= 4


# ── results (issue 11) ─────────────────────────────────────────────────
async def test_result_returns_what_a_worker_process_computed(
    client: Client, worker: Worker
) -> None:
    job_id = await client.submit(email("r@example.com"))
    assert await client.result(job_id, timeout=60) == "sent to r@example.com"
    assert await client.result(job_id) == "sent to r@example.com", "a finished job at once"


async def test_result_raises_the_recorded_failure(client: Client, worker: Worker) -> None:
    flaky = build_job("flaky-upload", {"path": "x.csv", "failures": 5})
    failed_id = await client.submit(
        flaky, retry={"policy": "fixed", "max_retries": 1, "seconds": 0}
    )
    with pytest.raises(JobFailedError) as info:
        await client.result(failed_id, timeout=60)
    error = info.value
    assert (error.job_id, error.status, error.error_type) == (
        failed_id,
        "failed",
        "ConnectionError",
    )
    assert (error.message, error.attempts) == ("attempt 2: connection reset", 2)
    assert "ConnectionError: attempt 2: connection reset" in str(error)
    assert isinstance(error, SchedulerError)
    history = (await client.get(failed_id)).history
    assert [(a.number, a.status) for a in history] == [(1, "failed"), (2, "failed")]
    assert all(isinstance(a, Attempt) and a.worker == worker.identity for a in history)
    cancelled_id = await client.submit(email("c@example.com"), delay=3600)
    await client.cancel(cancelled_id)
    with pytest.raises(JobFailedError) as info:
        await client.result(cancelled_id, timeout=60)
    assert (info.value.status, info.value.error_type, info.value.attempts) == (
        "cancelled",
        "cancelled",
        0,
    )


async def test_result_times_out_and_knows_unknown_jobs(client: Client) -> None:
    waiting = await client.submit(email("later@example.com"), delay=3600)
    with pytest.raises(TimeoutError):
        await client.result(waiting, timeout=0.05)
    with pytest.raises(UnknownJobError):
        await client.result("job-nope", timeout=1)


def test_job_failed_error_reads_the_type_from_the_last_error() -> None:
    error = JobFailedError.from_job("j", "failed", "KeyError: 'x': missing", 3)
    assert (error.error_type, error.message, error.attempts) == ("KeyError", "'x': missing", 3)
    odd = JobFailedError.from_job("j", "failed", "something broke: badly", 1)
    assert (odd.error_type, odd.message) == ("Error", "something broke: badly")
    timed = JobFailedError.from_job("j", "timed_out", "timed out after 5s", 1)
    assert (timed.error_type, timed.message) == ("timed_out", "timed out after 5s")
    import pickle

    again = pickle.loads(pickle.dumps(error))
    assert (again.job_id, again.error_type, again.attempts) == ("j", "KeyError", 3)


async def test_result_ttl_and_keep_result_reach_the_store(client: Client, worker: Worker) -> None:
    short = await client.submit(email("s@example.com"), result_ttl=0)
    dropped = await client.submit(email("d@example.com"), keep_result=False)
    kept = await client.submit(email("k@example.com"))
    assert (await client.get(short)).options["result_ttl"] == 0.0
    assert (await client.get(dropped)).options["keep_result"] is False
    await client.wait_many([short, dropped, kept], timeout=60)
    assert await client.result(dropped) is None, "no result stored"
    info = await client.get(short)
    assert info.result == "sent to s@example.com" and info.result_expires is not None
    assert info.result_expires == pytest.approx(info.finished_at)
    # The reaper's call, driven here: the ttl has passed.
    assert await client.store.expire_results() == 1
    gone = await client.get(short)
    assert (gone.status, gone.result, gone.result_expires) == (JobStatus.COMPLETED, None, None)
    assert await client.result(kept) == "sent to k@example.com"
    assert (await client.get(kept)).result_expires is None
    with pytest.raises(ValueError, match="result_ttl"):
        await client.submit(email("x@example.com"), result_ttl=-1)
    with pytest.raises(ValueError, match="keep_result"):
        await client.submit(email("x@example.com"), keep_result="no")  # type: ignore[arg-type]


async def test_a_workers_default_result_ttl_and_retention(store_url: str, client: Client) -> None:
    first = Worker(store_url, "--result-ttl", "1h")
    try:
        old = await client.submit(email("old@example.com"))
        await client.wait(old, timeout=60)
        info = await client.get(old)
        assert info.result_expires == pytest.approx(info.finished_at + 3600)
    finally:
        first.stop()
    waiting = await client.submit(email("w@example.com"), delay=3600)
    # A worker purges, when it starts, what finished longer ago than its retention.
    second = Worker(store_url, "--retention", "0.001")
    try:

        async def purged() -> bool:
            return [j.job_id for j in await client.jobs()] == [waiting]

        await until(purged, "the reaper to purge the finished job")
    finally:
        second.stop()


@pytest.mark.parametrize(
    ("option", "value"),
    [
        ("--result-ttl", "soon"),
        ("--retention", "-1d"),
        ("--retention", "0"),
        ("--max-lease-expiries", "0"),
        ("--max-build-refusals", "0"),
    ],
)
def test_a_bad_retention_duration_exits_2(store_url: str, option: str, value: str) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "jobsched", "worker", "--store", store_url, option, value],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2
    assert option in done.stderr and len(done.stderr.strip().splitlines()) == 1


# ── browsing and progress ──────────────────────────────────────────────
async def test_page_stats_and_progress(client: Client, worker: Worker) -> None:
    done = await client.submit(email("p@example.com"), name="Newsletter")
    await client.wait(done, timeout=60)
    long = await client.submit(nap("long", 3600), timeout=None)

    async def running() -> bool:
        return (await client.get(long)).status is JobStatus.RUNNING

    await until(running, "the worker to start the long job")
    page = await client.page(q="newsletter")
    assert isinstance(page, JobPage) and [j.job_id for j in page.jobs] == [done]
    assert page.total == 1
    page = await client.page(limit=1)
    assert ([j.job_id for j in page.jobs], page.total) == ([long], 2)
    page = await client.page(status=["completed", "running"], type="sleep")
    assert [j.job_id for j in page.jobs] == [long]
    stats = await client.stats()
    assert isinstance(stats, Stats)
    assert (stats.counts["completed"], stats.counts["running"], stats.counts["failed"]) == (1, 1, 0)
    # Summed: the job may have completed in the minute before the one `stats` was taken in.
    assert len(stats.throughput) == 60 and sum(b.completed for b in stats.throughput) == 1
    assert [b.start for b in stats.throughput] == sorted(b.start for b in stats.throughput)
    assert stats.throughput[-1].start <= stats.at < stats.throughput[-1].start + 60
    assert [(w.worker, w.running) for w in stats.workers] == [(worker.identity, 1)]
    assert stats.limits == [] and stats.queue_paused is False
    # Progress as the worker's scheduler writes it (the store call it uses).
    await client.store.set_progress(
        [(long, {"done": 3, "total": 10, "message": "copying", "updated_at": 5.0})],
        worker.identity,
    )
    assert (await client.get(long)).progress == Progress(
        done=3.0, total=10.0, message="copying", updated_at=5.0
    )
    await client.cancel(long)
    await client.wait(long, timeout=60)
    for bad in ({"limit": 0}, {"limit": 1001}, {"offset": -1}, {"status": "sleeping"}):
        with pytest.raises(ValueError):
            await client.page(**bad)  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        await client.page(limit="5")  # type: ignore[arg-type]


async def test_wait_for_change_wakes_every_waiter(store_url: str, client: Client) -> None:
    async with Client(store_url) as other:
        await client.wait_for_change(0)  # the changes so far
        waiters = [asyncio.create_task(client.wait_for_change(60)) for _ in range(3)]
        await asyncio.sleep(0)
        await other.submit(email("change@example.com"))
        assert await asyncio.gather(*waiters) == [True, True, True]
    with pytest.raises(ValueError, match="timeout"):
        await client.wait_for_change(-1)


# ── operator actions ───────────────────────────────────────────────────
async def test_retry_runs_a_job_again_and_keeps_its_history(client: Client, worker: Worker) -> None:
    flaky = build_job("flaky-upload", {"path": "x.csv", "failures": 5})
    failed_id = await client.submit(flaky, retry="none")
    await client.wait(failed_id, timeout=60)
    assert (await client.retry(failed_id)).job_id == failed_id
    again = await client.wait(failed_id, timeout=60)
    assert again.status is JobStatus.FAILED and again.attempts == 1
    history = (await client.get(failed_id)).history
    assert [(a.number, a.status) for a in history] == [(1, "failed"), (1, "failed")]
    with pytest.raises(InvalidTransitionError, match="is pending"):
        await client.retry(await client.submit(email("x@example.com"), delay=3600))
    with pytest.raises(UnknownJobError):
        await client.retry("job-nope")
    # In bulk: the cancelled jobs run now.
    ids = [await client.submit(email(f"{n}@example.com"), delay=3600) for n in "ab"]
    for job_id in ids:
        await client.cancel(job_id)
    assert await client.requeue(status="cancelled") == ids
    assert [i.status for i in await client.wait_many(ids, timeout=60)] == [JobStatus.COMPLETED] * 2
    assert await client.requeue(status=["failed", "timed_out"], type="email") == []
    with pytest.raises(ValueError, match="not completed"):
        await client.requeue(status=["failed", "completed"])


async def test_retry_moves_a_job_back_to_pending_at_once(client: Client) -> None:
    # No worker: the job stays as retry left it.
    job_id = await client.submit(email("later@example.com"), delay=3600)
    await client.cancel(job_id)
    retried = await client.retry(job_id)
    assert (retried.status, retried.attempts, retried.finished_at, retried.last_error) == (
        JobStatus.PENDING,
        0,
        None,
        None,
    )
    assert retried.run_at <= (await client.stats()).at, "due now, not after its delay"
    with pytest.raises(InvalidTransitionError, match="only failed, timed_out or cancelled"):
        await client.retry(job_id)


async def test_purge_deletes_finished_jobs_only(client: Client, worker: Worker) -> None:
    done = await client.submit(email("x@example.com"))
    await client.wait(done, timeout=60)
    waiting = await client.submit(email("y@example.com"), delay=3600)
    assert await client.purge(older_than=3600) == 0, "too recent"
    assert await client.purge(older_than=0, status="failed") == 0
    assert await client.purge(older_than=0) == 1
    assert [j.job_id for j in await client.jobs()] == [waiting]
    with pytest.raises(ValueError, match="pending is not a finished status"):
        await client.purge(older_than=0, status=["completed", "pending"])
    with pytest.raises(ValueError, match="older_than"):
        await client.purge(older_than=-1)


async def test_schedules_are_paused_resumed_and_triggered(client: Client, worker: Worker) -> None:
    schedule_id = await client.add_schedule(email("s@example.com"), every=3600, start_in=3600)
    (info,) = await client.schedules()
    assert isinstance(info, ScheduleInfo)
    assert (info.schedule_id, info.type, info.paused, info.active) == (
        schedule_id,
        "email",
        False,
        True,
    )
    assert info.name == email("s@example.com").name
    assert info.next_run is not None and info.trigger["interval"] == 3600
    first_fire = info.next_run
    assert await client.pause_schedule(schedule_id) is True
    assert await client.pause_schedule(schedule_id) is False
    assert (await client.schedules())[0].paused is True
    # Triggering runs it once now, and leaves the next fire where it was.
    job_id = await client.trigger_schedule(schedule_id)
    assert await client.result(job_id, timeout=60) == "sent to s@example.com"
    (info,) = await client.schedules()
    assert (info.fired, info.last_job_id, info.next_run) == (1, job_id, first_fire)
    assert (await client.get(job_id)).schedule_id == schedule_id
    assert await client.resume_schedule(schedule_id) is True
    assert await client.resume_schedule(schedule_id) is False
    (info,) = await client.schedules()
    assert info.paused is False and info.next_run == first_fire, "its next period is ahead"
    for call in (client.pause_schedule, client.resume_schedule, client.trigger_schedule):
        with pytest.raises(UnknownScheduleError, match="sched-nope"):
            await call("sched-nope")


async def test_a_paused_queue_holds_new_jobs_until_resumed(client: Client, worker: Worker) -> None:
    assert await client.queue_paused() is False
    assert await client.pause_queue() is True
    assert await client.pause_queue() is False
    assert (await client.stats()).queue_paused is True
    job_id = await client.submit(email("q@example.com"))
    assert (await client.get(job_id)).status is JobStatus.PENDING
    assert await client.resume_queue() is True
    assert await client.resume_queue() is False
    assert await client.result(job_id, timeout=60) == "sent to q@example.com"


def test_the_blocking_client_mirrors_the_operator_api(store_url: str, worker: Worker) -> None:
    with BlockingClient(store_url) as client:
        job_id = client.submit(email("b@example.com"), result_ttl=60)
        assert client.result(job_id, timeout=60) == "sent to b@example.com"
        assert client.page(status="completed").total == 1
        assert client.stats().counts["completed"] == 1
        with pytest.raises(InvalidTransitionError):
            client.retry(job_id)
        assert client.requeue(status="failed") == []
        schedule_id = client.add_schedule(email("t@example.com"), every=3600, start_in=3600)
        assert [s.schedule_id for s in client.schedules()] == [schedule_id]
        assert client.pause_schedule(schedule_id) is True
        assert client.resume_schedule(schedule_id) is True
        triggered = client.trigger_schedule(schedule_id)
        assert client.result(triggered, timeout=60) == "sent to t@example.com"
        assert client.pause_queue() is True and client.queue_paused() is True
        assert client.resume_queue() is True and client.queue_paused() is False
        woken: list[bool] = []
        waiter = threading.Thread(target=lambda: woken.append(client.wait_for_change(60)))
        waiter.start()
        with BlockingClient(store_url) as other:
            # Each submit is a change; the waiter sees the first one after it began.
            while waiter.is_alive() and len(other.jobs()) < 50:
                other.submit(email("w@example.com"))
                waiter.join(0.2)
        waiter.join()
        assert woken == [True]
        assert client.purge(older_than=0, status="completed") >= 2
