"""cancel(job_id): queued jobs (lazy deletion), delayed and retry-waiting jobs, running ones."""

from __future__ import annotations

import asyncio
import contextlib
import os
import threading
from pathlib import Path

import pytest

from jobsched import AsyncJob, JobStatus, RetryPolicy
from jobsched.testing import VirtualClock
from kernel_support import (
    BlockedThreadJob,
    Gate,
    Noop,
    Scripted,
    make_scheduler,
    settle,
    until,
)

# A hang is a failure, not a stuck suite.
pytestmark = pytest.mark.timeout(30)

S = JobStatus


async def test_cancel_a_queued_job_is_immediate_and_lazy() -> None:
    scheduler, recorder = make_scheduler("fifo", num_workers=1)
    blocker = Gate("blocker")
    victim = Noop("victim")
    survivor = Noop("survivor")
    async with scheduler:
        scheduler.submit(blocker)
        scheduler.submit(victim)
        scheduler.submit(survivor)
        await settle()
        queued = len(scheduler.kernel.queues)
        assert scheduler.cancel(victim.job_id) is True
        assert victim.status is S.CANCELLED, "a queued job is cancelled at once"
        assert victim.last_error == "cancelled"
        assert len(scheduler.kernel.queues) == queued, "O(1): left in the heap, skipped when popped"
        blocker.open()
        await scheduler.join()
    assert victim.attempts == 0
    assert survivor.status is S.COMPLETED
    assert recorder.started() == [blocker.job_id, survivor.job_id]
    assert recorder.path(victim.job_id) == [S.PENDING, S.CANCELLED]
    assert len(scheduler.kernel.queues) == 0


async def test_cancel_before_start() -> None:
    scheduler, _ = make_scheduler()
    job = Noop()
    scheduler.submit(job)
    assert scheduler.cancel(job.job_id) is True
    async with scheduler:
        await scheduler.join()
    assert job.status is S.CANCELLED and job.attempts == 0


async def test_cancel_returns_false_for_unknown_and_finished_jobs() -> None:
    scheduler, _ = make_scheduler()
    done = Noop("done")
    failed = Scripted([RuntimeError("x")], retry=RetryPolicy(max_retries=0))
    queued = Noop("queued")
    assert scheduler.cancel("job-does-not-exist") is False
    scheduler.submit(queued)
    assert scheduler.cancel(queued.job_id) is True
    assert scheduler.cancel(queued.job_id) is False, "already cancelled"
    async with scheduler:
        scheduler.submit(done)
        scheduler.submit(failed)
        await scheduler.join()
        assert scheduler.cancel(done.job_id) is False
        assert scheduler.cancel(failed.job_id) is False
    assert done.status is S.COMPLETED, "cancel of a finished job changes nothing"
    assert failed.status is S.FAILED


async def test_cancel_a_delayed_job() -> None:
    clock = VirtualClock()
    scheduler, recorder = make_scheduler(clock=clock)
    job = Noop("later")
    async with scheduler:
        scheduler.submit(job, delay=5.0)
        assert scheduler.cancel(job.job_id) is True
        await scheduler.join()  # a cancelled delayed job does not keep join() waiting
        await clock.advance(5.0)  # its run time passes: skipped when promoted
        await settle()
    assert job.status is S.CANCELLED and job.attempts == 0
    assert recorder.path(job.job_id) == [S.PENDING, S.CANCELLED]
    assert len(scheduler.kernel.queues) == 0


async def test_cancel_a_job_waiting_to_retry() -> None:
    clock = VirtualClock()
    scheduler, recorder = make_scheduler(clock=clock)
    job = Scripted([RuntimeError("first"), "ok"], retry=RetryPolicy(jitter=False))
    async with scheduler:
        scheduler.submit(job)
        await settle()
        assert job.status is S.RETRY_WAIT
        assert scheduler.cancel(job.job_id) is True
        await clock.advance(10.0)
        await scheduler.join()
    assert job.status is S.CANCELLED and job.attempts == 1
    assert job.last_error == "cancelled"
    assert recorder.path(job.job_id) == [S.PENDING, S.RUNNING, S.RETRY_WAIT, S.CANCELLED]


async def test_cancel_a_running_async_job_lands_at_its_next_await() -> None:
    scheduler, recorder = make_scheduler()
    steps: list[str] = []

    class TwoStep(AsyncJob):
        async def run(self) -> str:
            steps.append("before")
            scheduler.cancel(self.job_id)  # cancel while running, before the next await
            steps.append("still running until the next await")
            try:
                await asyncio.sleep(0)
            except asyncio.CancelledError:
                steps.append("cancelled at the await")
                raise
            steps.append("never")
            return "never"

    job = TwoStep("two-step", retry=RetryPolicy(max_retries=3))
    async with scheduler:
        scheduler.submit(job)
        await scheduler.join()
    assert steps == ["before", "still running until the next await", "cancelled at the await"]
    assert job.status is S.CANCELLED
    assert job.attempts == 1, "a cancelled job is not retried"
    assert recorder.path(job.job_id) == [S.PENDING, S.RUNNING, S.CANCELLED]


async def test_cancel_a_running_async_job_from_outside() -> None:
    scheduler, _ = make_scheduler(num_workers=1)
    job = Gate("long", retry=RetryPolicy(max_retries=2))
    after = Noop("after")
    async with scheduler:
        scheduler.submit(job)
        scheduler.submit(after)
        await settle()
        assert job.status is S.RUNNING
        assert scheduler.cancel(job.job_id) is True
        assert scheduler.cancel(job.job_id) is True, "still RUNNING until the await unwinds"
        await scheduler.join()
    assert job.saw_cancel == 1
    assert job.status is S.CANCELLED
    assert after.status is S.COMPLETED, "the worker survived the cancel"
    assert scheduler.kernel.running == 0


async def test_a_job_that_swallows_the_cancel_is_still_cancelled() -> None:
    scheduler, _ = make_scheduler()

    class Stubborn(AsyncJob):
        async def run(self) -> str:
            with contextlib.suppress(asyncio.CancelledError):
                await asyncio.get_running_loop().create_future()
            return "ignored"

    job = Stubborn("stubborn", timeout=None)
    async with scheduler:
        scheduler.submit(job)
        await settle()
        scheduler.cancel(job.job_id)
        await scheduler.join()
        second = Noop()  # the worker task was uncancelled and still works
        scheduler.submit(second)
        await scheduler.join()
    assert job.status is S.CANCELLED and job.result is None
    assert second.status is S.COMPLETED


async def test_cancel_after_the_timeout_fired_but_before_it_was_handled() -> None:
    clock = VirtualClock()
    scheduler, recorder = make_scheduler(clock=clock)
    job = Gate("race", timeout=1.0, retry=RetryPolicy(max_retries=3))
    async with scheduler:
        scheduler.submit(job)
        await settle()
        clock.jump_nowait(1.0)  # the watchdog cancels the attempt...
        assert scheduler.cancel(job.job_id) is True  # ...and the user cancels too
        await scheduler.join()
    assert job.status is S.CANCELLED, "the explicit cancel wins over a retry"
    assert recorder.path(job.job_id) == [S.PENDING, S.RUNNING, S.CANCELLED]


async def test_cancel_a_running_thread_job_abandons_it() -> None:
    scheduler, recorder = make_scheduler(num_workers=2)
    release = threading.Event()
    job = BlockedThreadJob("parked", release, timeout=None, retry=RetryPolicy(max_retries=2))
    try:
        async with scheduler:
            scheduler.submit(job)
            await until(job.entered.is_set, "the thread job to start")
            assert scheduler.cancel(job.job_id) is True
            await scheduler.join()
            assert job.status is S.CANCELLED
            assert not job.returned.is_set(), "recorded CANCELLED while the thread still runs"
    finally:
        release.set()
    await until(job.returned.is_set, "the abandoned thread to return")
    assert job.status is S.CANCELLED and job.result is None and job.attempts == 1
    assert recorder.path(job.job_id) == [S.PENDING, S.RUNNING, S.CANCELLED]


def wait_for_file(path: str) -> int:
    """Process job: park until `path` exists (the test's release switch)."""
    import time

    for _ in range(3000):
        if os.path.exists(path):
            return os.getpid()
        time.sleep(0.01)
    raise TimeoutError(path)


async def test_cancel_a_running_process_job_abandons_it(tmp_path: Path) -> None:
    scheduler, recorder = make_scheduler(num_workers=1)
    release = tmp_path / "release"
    try:
        async with scheduler:
            job_id = scheduler.submit(wait_for_file, str(release), model="process", timeout=None)
            await until(lambda: scheduler.get(job_id).status is S.RUNNING, "the process job")
            assert scheduler.cancel(job_id) is True
            await scheduler.join()
            assert scheduler.get(job_id).status is S.CANCELLED
    finally:
        release.touch()
    assert recorder.path(job_id) == [S.PENDING, S.RUNNING, S.CANCELLED]
    assert scheduler.get(job_id).result is None
