"""Unique jobs: a dedupe key returns the job that is still pending or running."""

from __future__ import annotations

import pytest

from jobsched import FunctionJob, JobScheduler, JobStatus, RetryPolicy
from jobsched.testing import VirtualClock


async def test_a_pending_key_returns_the_existing_job(virtual_clock: VirtualClock) -> None:
    ran = []

    async def sync_user(user: int) -> None:
        ran.append(user)
        await virtual_clock.sleep(1)

    scheduler = JobScheduler(clock=virtual_clock)
    first = scheduler.submit(sync_user, 1, unique_key="sync:1")
    assert scheduler.submit(sync_user, 1, unique_key="sync:1") == first
    assert scheduler.submit(FunctionJob(sync_user, 1), unique_key="sync:1") == first
    other = scheduler.submit(sync_user, 2, unique_key="sync:2")
    assert other != first
    assert len(scheduler.jobs()) == 2
    async with scheduler:
        await virtual_clock.advance(0)
        assert scheduler.get(first).status is JobStatus.RUNNING
        assert scheduler.submit(sync_user, 1, unique_key="sync:1") == first  # running
        await virtual_clock.advance(1)
        assert scheduler.get(first).status is JobStatus.COMPLETED
        again = scheduler.submit(sync_user, 1, unique_key="sync:1")  # the key is free
        assert again != first
        await virtual_clock.advance(1)
    assert ran == [1, 2, 1]


async def test_a_job_waiting_to_retry_still_holds_its_key(virtual_clock: VirtualClock) -> None:
    calls = []

    async def flaky() -> None:
        calls.append(virtual_clock.now())
        if len(calls) == 1:
            raise RuntimeError("first try fails")

    scheduler = JobScheduler(clock=virtual_clock)
    retry = RetryPolicy(max_retries=1, base_delay=10, jitter=False)
    job_id = scheduler.submit(flaky, retry=retry, unique_key="k")
    async with scheduler:
        await virtual_clock.advance(1)
        assert scheduler.get(job_id).status is JobStatus.RETRY_WAIT
        assert scheduler.submit(flaky, unique_key="k") == job_id
        await virtual_clock.advance(10)
    assert calls == [0.0, 10.0]


async def test_cancelling_or_failing_frees_the_key(virtual_clock: VirtualClock) -> None:
    async def boom() -> None:
        raise ValueError("no")

    scheduler = JobScheduler(clock=virtual_clock)
    cancelled = scheduler.submit(boom, unique_key="k")
    assert scheduler.cancel(cancelled)
    failing = scheduler.submit(boom, unique_key="k", retry=RetryPolicy(max_retries=0))
    assert failing != cancelled
    async with scheduler:
        await virtual_clock.advance(0)
        assert scheduler.get(failing).status is JobStatus.FAILED
        assert scheduler.submit(boom, unique_key="k", retry=RetryPolicy(max_retries=0)) != failing
        await virtual_clock.advance(0)


async def test_a_job_cancelled_by_its_upstream_frees_the_key(virtual_clock: VirtualClock) -> None:
    async def boom() -> None:
        raise ValueError("no")

    scheduler = JobScheduler(clock=virtual_clock)
    upstream = scheduler.submit(boom, retry=RetryPolicy(max_retries=0))
    async with scheduler:
        await virtual_clock.advance(0)
        downstream = scheduler.submit(boom, depends_on=[upstream], unique_key="k")
        assert scheduler.get(downstream).status is JobStatus.CANCELLED
        assert scheduler.submit(boom, unique_key="k") != downstream


def test_a_refused_submit_does_not_take_the_key() -> None:
    async def noop() -> None:
        pass

    scheduler = JobScheduler()
    with pytest.raises(ValueError, match="delay must be >= 0"):
        scheduler.submit(noop, delay=-1, unique_key="k")
    job_id = scheduler.submit(noop, unique_key="k")
    assert scheduler.get(job_id).status is JobStatus.PENDING
