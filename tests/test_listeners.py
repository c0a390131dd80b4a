"""Listeners, bounded history, the concurrency limit and submit_threadsafe."""

from __future__ import annotations

import asyncio
import threading

import pytest

from jobsched import (
    AsyncJob,
    BlockingJob,
    Job,
    JobScheduler,
    JobStatus,
    PluginError,
    PluginManager,
    SchedulerError,
    UnknownJobError,
    hookimpl,
)
from kernel_support import (
    Gate,
    Noop,
    Scripted,
    captured_logs,
    join,
    make_scheduler,
    settle,
    until,
)

# A hang is a failure, not a stuck suite.
pytestmark = pytest.mark.timeout(30)

S = JobStatus


# ── listeners ─────────────────────────────────────────────────────────
async def test_listeners_are_called_in_order_with_job_old_and_new() -> None:
    scheduler, _ = make_scheduler()
    calls: list[tuple[str, str, JobStatus, JobStatus]] = []
    scheduler.add_listener(lambda job, old, new: calls.append(("a", job.job_id, old, new)))
    scheduler.add_listener(lambda job, old, new: calls.append(("b", job.job_id, old, new)))
    job = Noop()
    async with scheduler:
        scheduler.submit(job)
        await scheduler.join()
    j = job.job_id
    assert calls == [
        ("a", j, S.PENDING, S.RUNNING),
        ("b", j, S.PENDING, S.RUNNING),
        ("a", j, S.RUNNING, S.COMPLETED),
        ("b", j, S.RUNNING, S.COMPLETED),
    ]


async def test_a_raising_listener_is_logged_and_isolated() -> None:
    scheduler, recorder = make_scheduler()
    seen_after: list[JobStatus] = []

    def broken(job: Job, old: JobStatus, new: JobStatus) -> None:
        raise RuntimeError("listener bug")

    scheduler.add_listener(broken)
    scheduler.add_listener(lambda job, old, new: seen_after.append(new))
    job = Noop(value="fine")
    with captured_logs() as logs:
        async with scheduler:
            scheduler.submit(job)
            await scheduler.join()
    assert job.status is S.COMPLETED and job.result == "fine"
    assert seen_after == [S.RUNNING, S.COMPLETED], "later listeners still run"
    assert recorder.path(job.job_id) == [S.PENDING, S.RUNNING, S.COMPLETED]
    failures = [e for e in logs if e["event"] == "listener failed"]
    assert len(failures) == 2
    assert all(e["job_id"] == job.job_id and e["log_level"] == "error" for e in failures)


async def test_plugin_listener_hooks_run_beside_added_listeners() -> None:
    heard: list[tuple[str, JobStatus]] = []

    class Audit:
        @hookimpl
        def jobsched_job_transition(self, job: Job, old: JobStatus, new: JobStatus) -> None:
            heard.append((job.name, new))

    class OnlyNew:  # a hookimpl may take only the arguments it needs
        @hookimpl
        def jobsched_job_transition(self, new: JobStatus) -> None:
            heard.append(("only-new", new))

    class Broken:
        @hookimpl
        def jobsched_job_transition(self, job: Job) -> None:
            raise ValueError("plugin listener bug")

    plugins = PluginManager([Broken(), Audit(), OnlyNew()], autoload=False)
    scheduler = JobScheduler(plugins=plugins)
    with captured_logs() as logs:
        async with scheduler:
            scheduler.submit(Noop("audited"))
            await scheduler.join()
    failures = [e for e in logs if e["event"] == "listener failed"]
    assert len(failures) == 2, "the broken plugin listener, once per transition"
    assert sorted(heard, key=str) == sorted(
        [
            ("audited", S.RUNNING),
            ("audited", S.COMPLETED),
            ("only-new", S.RUNNING),
            ("only-new", S.COMPLETED),
        ],
        key=str,
    )


async def test_listener_added_while_running_hears_later_transitions() -> None:
    scheduler, _ = make_scheduler()
    late: list[JobStatus] = []
    gate = Gate()
    async with scheduler:
        scheduler.submit(gate)
        await settle()
        scheduler.add_listener(lambda job, old, new: late.append(new))
        gate.open()
        await scheduler.join()
    assert late == [S.COMPLETED]


async def test_a_listener_added_for_some_statuses_hears_only_those() -> None:
    scheduler, _ = make_scheduler()
    every: list[tuple[str, JobStatus, JobStatus]] = []
    terminal: list[tuple[str, JobStatus, JobStatus]] = []
    retries: list[tuple[float | None, float | None, float]] = []
    scheduler.add_listener(lambda job, old, new: every.append((job.name, old, new)))
    scheduler.add_listener(
        lambda job, old, new: terminal.append((job.name, old, new)),
        statuses=(S.COMPLETED, S.FAILED, S.TIMED_OUT, S.CANCELLED),
    )

    def on_retry(job: Job, old: JobStatus, new: JobStatus) -> None:
        # run_at is the retry's due time by now; the failed attempt's is kept.
        retries.append((job.previous_run_at, job.started_at, job.run_at))

    scheduler.add_listener(on_retry, statuses=[S.RETRY_WAIT])
    flaky = Scripted([RuntimeError("once"), "ok"], name="flaky", retry={"max_retries": 1})
    async with scheduler:
        plain = Noop("plain")
        scheduler.submit(plain)
        scheduler.submit(flaky)
        first_due = flaky.run_at
        waiting = scheduler.submit(Noop("waits"), delay=3600)
        await until(lambda: flaky.status is S.COMPLETED, "the retried job completes")
        scheduler.cancel(waiting)
        await scheduler.join()
    assert sorted(terminal, key=str) == [
        ("flaky", S.RUNNING, S.COMPLETED),
        ("plain", S.RUNNING, S.COMPLETED),
        ("waits", S.PENDING, S.CANCELLED),
    ]
    # The default hears every transition, the starts and the retry included.
    assert sorted((name, new.value) for name, _, new in every) == [
        ("flaky", "completed"),
        ("flaky", "retry_wait"),
        ("flaky", "running"),
        ("flaky", "running"),
        ("plain", "completed"),
        ("plain", "running"),
        ("waits", "cancelled"),
    ]
    assert len(retries) == 1
    previous, started, retry_at = retries[0]
    assert previous == first_due
    assert plain.previous_run_at is None, "never retried"
    assert started is not None
    assert previous <= started <= retry_at


async def test_statuses_filter_applies_to_plugin_listener_hooks() -> None:
    heard: list[tuple[str, JobStatus]] = []

    class Failures:
        @hookimpl
        def jobsched_job_transition(self, job: Job, new: JobStatus) -> None:
            heard.append((job.name, new))

        jobsched_job_transition.statuses = (S.FAILED,)  # type: ignore[attr-defined]

    plugins = PluginManager([Failures()], autoload=False)
    scheduler = JobScheduler(plugins=plugins)
    async with scheduler:
        scheduler.submit(Noop("fine"))
        scheduler.submit(Scripted([RuntimeError("no")], name="broken", retry="none"))
        await scheduler.join()
    assert heard == [("broken", S.FAILED)]


@pytest.mark.parametrize(
    ("statuses", "message"),
    [
        ((), "statuses is empty"),
        ("completed", "statuses must be a collection of JobStatus members"),
        (S.COMPLETED, "statuses must be a collection of JobStatus members"),
        (("completed",), "statuses holds 'completed', not a JobStatus member"),
    ],
)
async def test_add_listener_refuses_bad_statuses(statuses: object, message: str) -> None:
    scheduler, _ = make_scheduler()

    def listener(job: Job, old: JobStatus, new: JobStatus) -> None:
        raise AssertionError("never added, never called")

    with pytest.raises((TypeError, ValueError), match=message):
        scheduler.add_listener(listener, statuses=statuses)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="was not added"):
        scheduler.remove_listener(listener)


async def test_a_plugin_listener_with_bad_statuses_is_refused_naming_it() -> None:
    class Bad:
        @hookimpl
        def jobsched_job_transition(self, new: JobStatus) -> None:
            raise AssertionError("never called")

        jobsched_job_transition.statuses = ("failed",)  # type: ignore[attr-defined]

    plugins = PluginManager([Bad()], autoload=False)
    with pytest.raises(PluginError, match="jobsched_job_transition: statuses holds 'failed'"):
        JobScheduler(plugins=plugins)


async def test_remove_listener_drops_a_filtered_listener() -> None:
    scheduler, _ = make_scheduler()
    heard: list[JobStatus] = []

    def listener(job: Job, old: JobStatus, new: JobStatus) -> None:
        heard.append(new)

    scheduler.add_listener(listener, statuses=(S.COMPLETED,))
    scheduler.remove_listener(listener)
    async with scheduler:
        scheduler.submit(Noop())
        await scheduler.join()
    assert heard == []


# ── bounded history ───────────────────────────────────────────────────
async def test_history_keeps_only_the_newest_finished_jobs() -> None:
    scheduler, _ = make_scheduler("fifo", num_workers=1, history_limit=3)
    gate = Gate("unfinished")
    jobs = [Noop(str(i)) for i in range(10)]
    async with scheduler:
        scheduler.submit(gate, delay=60)  # unfinished jobs are never evicted
        for job in jobs:
            scheduler.submit(job)
        await until(lambda: all(j.status is S.COMPLETED for j in jobs), "the ten jobs")
        known = {j.job_id for j in scheduler.jobs()}
        assert known == {gate.job_id} | {j.job_id for j in jobs[-3:]}
        with pytest.raises(UnknownJobError):
            scheduler.get(jobs[0].job_id)
        assert scheduler.get(jobs[-1].job_id) is jobs[-1]
        assert scheduler.cancel(jobs[0].job_id) is False, "forgotten jobs are unknown"
        scheduler.cancel(gate.job_id)
        await scheduler.join()
    assert len(scheduler.jobs()) == 3


async def test_history_limit_zero_forgets_finished_jobs_at_once() -> None:
    scheduler, _ = make_scheduler(history_limit=0)
    job = Noop()
    async with scheduler:
        scheduler.submit(job)
        await scheduler.join()
        assert scheduler.jobs() == []
        assert job.status is S.COMPLETED  # the caller's own reference still has the outcome
        with pytest.raises(UnknownJobError):
            scheduler.submit(Noop(), depends_on=[job.job_id])


# ── the concurrency limit ─────────────────────────────────────────────
class Busy(AsyncJob):
    """Counts concurrent runs across all instances and yields a few times."""

    active = 0
    most = 0

    async def run(self) -> None:
        Busy.active += 1
        Busy.most = max(Busy.most, Busy.active)
        for _ in range(3):
            await asyncio.sleep(0)
        Busy.active -= 1


@pytest.mark.parametrize("workers", [1, 3, 8])
async def test_peak_running_never_exceeds_num_workers_under_a_burst(workers: int) -> None:
    Busy.active = Busy.most = 0
    scheduler, recorder = make_scheduler(num_workers=workers)
    running = 0
    most = 0

    def count(job: Job, old: JobStatus, new: JobStatus) -> None:
        # No assert in here: the kernel logs and swallows a listener's exception.
        nonlocal running, most
        running += (new is S.RUNNING) - (old is S.RUNNING)
        most = max(most, running)

    scheduler.add_listener(count)
    async with scheduler:
        for i in range(200):
            scheduler.submit(Busy(f"busy-{i}"))
        await scheduler.join()
    assert scheduler.peak_running == workers, "a burst fills every worker, and no more"
    assert most == workers and Busy.most == workers
    assert recorder.problems == []
    assert scheduler.kernel.running == 0


class SleepyThread(BlockingJob):
    lock = threading.Lock()
    active = 0
    most = 0

    def run_sync(self) -> None:
        with SleepyThread.lock:
            SleepyThread.active += 1
            SleepyThread.most = max(SleepyThread.most, SleepyThread.active)
        threading.Event().wait(0.002)
        with SleepyThread.lock:
            SleepyThread.active -= 1


async def test_thread_jobs_respect_the_limit_too() -> None:
    SleepyThread.active = SleepyThread.most = 0
    scheduler, _ = make_scheduler(num_workers=2)
    async with scheduler:
        for i in range(30):
            scheduler.submit(SleepyThread(f"t{i}"))
        await asyncio.wait_for(scheduler.join(), 10)
    assert scheduler.peak_running <= 2
    assert SleepyThread.most <= 2


# ── submit_threadsafe ─────────────────────────────────────────────────
async def test_submit_threadsafe_from_many_threads() -> None:
    scheduler, recorder = make_scheduler(num_workers=4)
    loop_thread = threading.get_ident()
    ids: list[str] = []
    ids_lock = threading.Lock()

    def producer(n: int) -> None:
        for i in range(25):
            job_id = scheduler.submit_threadsafe(Noop(f"p{n}-{i}", value=(n, i)))
            with ids_lock:
                ids.append(job_id)

    def produce_all() -> None:
        assert threading.get_ident() != loop_thread
        threads = [threading.Thread(target=producer, args=(n,)) for n in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()

    async with scheduler:
        # Producers' call_soon_threadsafe callbacks are queued before this
        # coroutine is resumed, so every job is submitted by the time it is.
        await asyncio.to_thread(produce_all)
        await scheduler.join()
    assert len(ids) == len(set(ids)) == 100
    assert {j.job_id for j in scheduler.jobs()} == set(ids)
    assert all(scheduler.get(i).status is S.COMPLETED for i in ids)
    assert recorder.problems == []


async def test_submit_threadsafe_passes_delay_depends_on_and_function_arguments() -> None:
    scheduler, _ = make_scheduler()

    def add(a: int, b: int) -> int:
        return a + b

    async with scheduler:
        up = scheduler.submit(Noop("up"))
        ids = await asyncio.to_thread(
            lambda: (
                scheduler.submit_threadsafe(add, 2, 3, name="add", depends_on=[up]),
                scheduler.submit_threadsafe(Noop("delayed"), delay=0.0),
            )
        )
        await scheduler.join()
    assert scheduler.get(ids[0]).result == 5
    assert scheduler.get(ids[0]).name == "add"
    assert scheduler.get(ids[1]).status is S.COMPLETED


async def test_submit_threadsafe_errors() -> None:
    scheduler, _ = make_scheduler()
    with pytest.raises(SchedulerError, match="start"):
        scheduler.submit_threadsafe(Noop())  # not started: no loop to hand over to
    async with scheduler:
        with pytest.raises(TypeError, match="submit_threadsafe"):
            scheduler.submit_threadsafe(Noop(), 1)
        orphan = Noop("orphan")
        with captured_logs() as logs:
            await asyncio.to_thread(scheduler.submit_threadsafe, orphan, depends_on=["job-nope"])
            await settle()
        assert [e["event"] for e in logs] == ["threadsafe submit failed"]
        assert logs[0]["job_id"] == orphan.job_id
        with pytest.raises(UnknownJobError):
            scheduler.get(orphan.job_id)
        await scheduler.join()


async def test_listeners_may_call_back_into_the_scheduler() -> None:
    scheduler, recorder = make_scheduler()
    compensations: list[str] = []
    doomed = Gate("doomed")
    victim = Gate("victim")

    def react(job: Job, old: JobStatus, new: JobStatus) -> None:
        # Runs inside the kernel's own transition: submitting and cancelling
        # from here must leave the state consistent.
        if job is doomed and new is S.FAILED:
            compensations.append(scheduler.submit(Noop("compensate", value="undone")))
            scheduler.cancel(victim.job_id)

    scheduler.add_listener(react)
    async with scheduler:
        scheduler.submit(doomed)
        scheduler.submit(victim)
        await settle()
        doomed.fail(RuntimeError("boom"))
        await join(scheduler)
    (comp,) = compensations
    assert scheduler.get(comp).result == "undone"
    assert victim.status is S.CANCELLED and victim.saw_cancel == 1
    assert recorder.problems == []
