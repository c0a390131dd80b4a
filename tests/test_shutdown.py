"""Graceful stop(cancel_running=...), refusing work after stop, start/stop hooks."""

from __future__ import annotations

import asyncio
import threading

import pytest

from jobsched import (
    BlockingJob,
    JobScheduler,
    JobStatus,
    PluginManager,
    RetryPolicy,
    SchedulerError,
    SchedulerStoppedError,
    hookimpl,
)
from jobsched.testing import VirtualClock
from kernel_support import Gate, Noop, Scripted, make_scheduler, settle, until

# A hang is a failure, not a stuck suite.
pytestmark = pytest.mark.timeout(30)

S = JobStatus


def other_tasks() -> set[asyncio.Task[object]]:
    """The tasks still running beside this one: a stopped scheduler leaves none."""
    return {t for t in asyncio.all_tasks() if t is not asyncio.current_task() and not t.done()}


async def test_stop_lets_the_running_job_finish_and_leaves_queued_jobs_pending() -> None:
    scheduler, recorder = make_scheduler("fifo", num_workers=1)
    running = Gate("running")
    queued = Noop("queued")
    await scheduler.start()
    scheduler.submit(running)
    scheduler.submit(queued)
    await settle()
    assert other_tasks() != set(), "the workers run"
    stopping = asyncio.create_task(scheduler.stop())
    await settle()
    assert not stopping.done(), "stop waits for the attempt in flight"
    with pytest.raises(SchedulerStoppedError, match="stopping"):
        scheduler.submit(Noop("too late"))
    running.open("finished")
    await asyncio.wait_for(stopping, 5)
    assert running.status is S.COMPLETED and running.result == "finished"
    assert queued.status is S.PENDING and queued.attempts == 0, "queued jobs are left PENDING"
    assert other_tasks() == set(), "every worker exited"
    assert recorder.started() == [running.job_id]


async def test_stop_with_cancel_running_cancels_the_attempts_in_flight() -> None:
    scheduler, recorder = make_scheduler("fifo", num_workers=2)
    first, second = Gate("first", retry=RetryPolicy(max_retries=3)), Gate("second")
    queued = Noop("queued")
    await scheduler.start()
    for job in (first, second, queued):
        scheduler.submit(job)
    await settle()
    await asyncio.wait_for(scheduler.stop(cancel_running=True), 5)
    assert first.status is S.CANCELLED and second.status is S.CANCELLED
    assert first.saw_cancel == second.saw_cancel == 1
    assert first.attempts == 1, "not retried"
    assert queued.status is S.PENDING
    assert recorder.path(first.job_id) == [S.PENDING, S.RUNNING, S.CANCELLED]
    assert scheduler.kernel.running == 0


async def test_a_job_failing_during_stop_is_not_retried() -> None:
    scheduler, _ = make_scheduler()
    job = Gate("last words", retry=RetryPolicy(max_retries=5, base_delay=0))
    await scheduler.start()
    scheduler.submit(job)
    await settle()
    stopping = asyncio.create_task(scheduler.stop())
    await settle()
    job.fail(ConnectionError("gone"))
    await asyncio.wait_for(stopping, 5)
    assert job.status is S.FAILED and job.attempts == 1
    assert job.last_error == "ConnectionError: gone"


async def test_stop_leaves_retry_waiting_and_delayed_jobs_and_disarms_timers() -> None:
    clock = VirtualClock()
    scheduler, _ = make_scheduler(clock=clock)
    waiting = Scripted([RuntimeError("x"), "ok"], retry=RetryPolicy(jitter=False))
    delayed = Noop("delayed", timeout=None)
    await scheduler.start()
    scheduler.submit(waiting)
    scheduler.submit(delayed, delay=30.0)
    await settle()
    assert waiting.status is S.RETRY_WAIT
    await scheduler.stop()
    assert clock.timer_times() == [], "no timer survives stop()"
    await clock.advance(100.0)
    await settle()
    assert waiting.status is S.RETRY_WAIT and waiting.attempts == 1
    assert delayed.status is S.PENDING and delayed.attempts == 0


class ThreadJob(BlockingJob):
    def __init__(self, release: threading.Event) -> None:
        super().__init__("thread", timeout=None)
        self.release = release
        self.entered = threading.Event()

    def run_sync(self) -> str:
        self.entered.set()
        self.release.wait(30)
        return "done"


async def test_graceful_stop_waits_for_a_thread_job() -> None:
    scheduler, _ = make_scheduler()
    release = threading.Event()
    job = ThreadJob(release)
    try:
        await scheduler.start()
        scheduler.submit(job)
        await until(job.entered.is_set, "the thread job to start")
        stopping = asyncio.create_task(scheduler.stop())
        await settle()
        assert not stopping.done()
    finally:
        release.set()
    await asyncio.wait_for(stopping, 5)
    assert job.status is S.COMPLETED and job.result == "done"


async def test_stop_with_cancel_running_abandons_a_thread_job() -> None:
    scheduler, _ = make_scheduler()
    release = threading.Event()
    job = ThreadJob(release)
    try:
        await scheduler.start()
        scheduler.submit(job)
        await until(job.entered.is_set, "the thread job to start")
        await asyncio.wait_for(scheduler.stop(cancel_running=True), 5)
        assert job.status is S.CANCELLED
    finally:
        release.set()


async def test_everything_is_refused_after_stop() -> None:
    scheduler, _ = make_scheduler()
    await scheduler.start()
    await scheduler.stop()
    job = Noop("refused")
    with pytest.raises(SchedulerStoppedError, match=job.job_id):
        scheduler.submit(job)
    with pytest.raises(SchedulerStoppedError):
        scheduler.submit(lambda: None)
    with pytest.raises(SchedulerStoppedError):
        scheduler.submit_threadsafe(Noop())
    with pytest.raises(SchedulerStoppedError):
        scheduler.schedule_recurring(Noop, 1.0)
    with pytest.raises(SchedulerStoppedError):
        await scheduler.start()
    assert scheduler.jobs() == []
    await scheduler.stop()  # a second stop is a no-op


async def test_stop_before_start_refuses_later_work() -> None:
    scheduler, _ = make_scheduler()
    await scheduler.stop()
    with pytest.raises(SchedulerStoppedError):
        scheduler.submit(Noop())
    with pytest.raises(SchedulerStoppedError):
        await scheduler.start()


async def test_start_twice_is_an_error() -> None:
    scheduler, _ = make_scheduler()
    await scheduler.start()
    try:
        with pytest.raises(SchedulerError, match="already started"):
            await scheduler.start()
    finally:
        await scheduler.stop()


async def test_leaving_the_context_with_an_error_cancels_running_jobs() -> None:
    scheduler, _ = make_scheduler()
    job = Gate("interrupted")
    with pytest.raises(KeyError, match="boom"):
        async with scheduler:
            scheduler.submit(job)
            await settle()
            raise KeyError("boom")
    assert job.status is S.CANCELLED


async def test_started_and_stopped_hooks_are_called_once() -> None:
    calls: list[tuple[str, object]] = []
    workers_done: list[bool] = []

    class Lifecycle:
        @hookimpl
        def jobsched_scheduler_started(self, scheduler: JobScheduler) -> None:
            calls.append(("started", scheduler))

        @hookimpl
        def jobsched_scheduler_stopped(self, scheduler: JobScheduler) -> None:
            workers_done.append(other_tasks() == set())
            calls.append(("stopped", scheduler))

    scheduler = JobScheduler(plugins=PluginManager([Lifecycle()], autoload=False))
    assert calls == []
    async with scheduler:
        assert calls == [("started", scheduler)]
    await scheduler.stop()
    assert calls == [("started", scheduler), ("stopped", scheduler)]
    assert workers_done == [True], "called after the workers exited"


async def test_concurrent_stops_tear_down_once_and_a_second_one_may_escalate() -> None:
    stopped: list[JobScheduler] = []

    class Hook:
        @hookimpl
        def jobsched_scheduler_stopped(self, scheduler: JobScheduler) -> None:
            stopped.append(scheduler)

    scheduler = JobScheduler(plugins=PluginManager([Hook()], autoload=False))
    job = Gate("long")
    await scheduler.start()
    scheduler.submit(job)
    await settle()
    graceful = asyncio.create_task(scheduler.stop())  # say, the context manager's
    await settle()
    assert not graceful.done(), "graceful: waiting for the running job"
    # say, a second Ctrl-C: cancel what runs, and wait for the same teardown
    await asyncio.wait_for(scheduler.stop(cancel_running=True), 5)
    assert graceful.done(), "the second stop() returns only once the scheduler has stopped"
    await graceful
    assert job.status is S.CANCELLED
    assert stopped == [scheduler], "one teardown, one stopped hook"
