"""The cooperative cancellation token of thread jobs."""

from __future__ import annotations

import asyncio
import threading

import pytest

from jobsched import (
    CancelToken,
    JobCancelledError,
    JobScheduler,
    JobStatus,
    RetryPolicy,
    cancel_token,
)


def test_outside_a_thread_job_the_token_is_never_set() -> None:
    token = cancel_token()
    assert not token.cancelled
    token.raise_if_cancelled()  # does nothing
    assert token.wait(0) is False


def test_token_basics() -> None:
    token = CancelToken()
    assert "cancelled=False" in repr(token)
    token.cancel("timed out")
    token.cancel("again")  # the first reason wins
    assert token.cancelled and token.wait(0)
    with pytest.raises(JobCancelledError, match="timed out"):
        token.raise_if_cancelled()


async def polling_job_scenario(cancel_by_timeout: bool) -> tuple[JobStatus, list[str], bool]:
    started = threading.Event()
    stopped = threading.Event()
    seen: list[str] = []

    def export() -> str:
        token = cancel_token()
        started.set()
        # An interruptible wait: returns as soon as the scheduler gives up.
        if token.wait(timeout=60):
            seen.append("cancelled")
            stopped.set()
            token.raise_if_cancelled()
        return "finished"

    scheduler = JobScheduler(num_workers=1)
    timeout = 0.05 if cancel_by_timeout else 60.0
    job_id = scheduler.submit(export, timeout=timeout, retry=RetryPolicy(max_retries=0))
    async with scheduler:
        await asyncio.get_running_loop().run_in_executor(None, started.wait, 30)
        if not cancel_by_timeout:
            scheduler.cancel(job_id)
        await scheduler.join()
        # The thread notices and returns: the pool thread is free again.
        freed = await asyncio.get_running_loop().run_in_executor(None, stopped.wait, 30)
    return scheduler.get(job_id).status, seen, freed


async def test_cancel_sets_the_token_of_a_running_thread_job() -> None:
    status, seen, freed = await polling_job_scenario(cancel_by_timeout=False)
    assert status is JobStatus.CANCELLED
    assert seen == ["cancelled"] and freed


async def test_timeout_sets_the_token_of_a_running_thread_job() -> None:
    status, seen, freed = await polling_job_scenario(cancel_by_timeout=True)
    assert status is JobStatus.TIMED_OUT
    assert seen == ["cancelled"] and freed


async def test_a_finished_thread_job_leaves_no_token_behind() -> None:
    tokens: list[CancelToken] = []

    def job() -> None:
        tokens.append(cancel_token())

    scheduler = JobScheduler(num_workers=1)
    scheduler.submit(job)
    async with scheduler:
        await scheduler.join()
    assert len(tokens) == 1 and not tokens[0].cancelled
    assert cancel_token() is not tokens[0]
