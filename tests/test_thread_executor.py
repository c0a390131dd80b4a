"""The thread executor hands each attempt's outcome back to the loop itself:
results, any exception, cancellation before and after a pool thread took it."""

from __future__ import annotations

import asyncio
import threading
from typing import Any

import pytest

from jobsched import BlockingJob, JobStatus, cancel_token
from jobsched_plugins.thread_executor import ThreadExecutor, ThreadPoolExhaustedError
from kernel_support import BlockedThreadJob, join, make_scheduler, until

pytestmark = pytest.mark.timeout(30)


class Raises(BlockingJob):
    def __init__(self, name: str, exc: BaseException) -> None:
        super().__init__(name, retry="none")
        self.exc = exc

    def run_sync(self) -> Any:
        raise self.exc


class Returns(BlockingJob):
    def __init__(self, name: str, value: Any) -> None:
        super().__init__(name)
        self.value = value
        self.ran = threading.Event()

    def run_sync(self) -> Any:
        self.ran.set()
        return self.value


async def test_results_and_every_kind_of_exception_come_back() -> None:
    scheduler, _ = make_scheduler(num_workers=2)
    async with scheduler:
        ok = scheduler.submit(Returns("ok", {"answer": 42}))
        bad = scheduler.submit(Raises("bad", ValueError("no good")))
        stop = scheduler.submit(Raises("stop", StopIteration("early")))
        leave = scheduler.submit(Raises("leave", SystemExit(3)))
        after = scheduler.submit(Returns("after", 1))
        await join(scheduler)
    assert scheduler.get(ok).result == {"answer": 42}
    assert scheduler.get(bad).status is JobStatus.FAILED
    assert scheduler.get(bad).last_error == "ValueError: no good"
    stopped = scheduler.get(stop)
    assert stopped.status is JobStatus.FAILED, "a future cannot hold StopIteration: wrapped"
    assert stopped.last_error == "RuntimeError: the job raised StopIteration(early)"
    assert scheduler.get(leave).status is JobStatus.FAILED, "SystemExit fails the job only"
    assert scheduler.get(after).status is JobStatus.COMPLETED


async def test_an_attempt_with_no_free_thread_is_refused_not_queued() -> None:
    executor = ThreadExecutor(workers=1, max_abandoned=0)
    release = threading.Event()
    blocker = BlockedThreadJob("blocker", release)
    waiting = Returns("waiting", "never")
    try:
        first = asyncio.ensure_future(executor.invoke(blocker))
        await until(blocker.entered.is_set, "the blocker to take the only thread")
        with pytest.raises(ThreadPoolExhaustedError, match="all 1 threads of the pool are busy"):
            await executor.invoke(waiting)
        release.set()
        assert await first == "finished late"
        assert await executor.invoke(Returns("then", "ran")) == "ran", "the thread is free again"
    finally:
        release.set()
        executor.shutdown()
    assert not waiting.ran.is_set()


async def test_a_cancelled_running_attempt_sets_its_token() -> None:
    executor = ThreadExecutor(workers=1)
    seen = threading.Event()
    started = threading.Event()

    class Polls(BlockingJob):
        def run_sync(self) -> str:
            started.set()
            token = cancel_token()
            token.wait(20)
            if token.cancelled:
                seen.set()
            return "stopped"

    try:
        attempt = asyncio.ensure_future(executor.invoke(Polls("polls")))
        await until(started.is_set, "the job to start on its thread")
        attempt.cancel()
        with pytest.raises(asyncio.CancelledError):
            await attempt
        await until(seen.is_set, "the job to see its token set")
    finally:
        executor.shutdown()
