"""A thread call the scheduler gave up on (a timeout, a cancel) still runs: no
new attempt of its job starts beside it, and it does not clog the pool.

Thread jobs block on `threading.Event`s the tests set; time is a
`VirtualClock` in memory, and a tiny timeout on a job that cannot finish
before its event is set on the shared stores.
"""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path
from typing import Any

import httpx
import pytest

from jobsched import (
    BlockingJob,
    CpuBoundJob,
    JobScheduler,
    JobStatus,
    LocalClient,
    RetryPolicy,
    Task,
    task,
)
from jobsched.testing import VirtualClock
from jobsched.web import create_app
from jobsched_plugins.thread_executor import ThreadExecutor
from kernel_support import (
    NO_RETRY,
    BlockedThreadJob,
    captured_logs,
    join,
    make_scheduler,
    settle,
    until,
)
from shared_support import Target

pytestmark = pytest.mark.timeout(60)

S = JobStatus
RETRY_AT_ONCE = RetryPolicy(max_retries=3, base_delay=0, jitter=False)


class FirstCallHangs(BlockingJob):
    """Its first call blocks until `release` is set (ignoring its cancel token,
    as ``time.sleep(45)`` does); later calls return at once. Counts how many
    calls ran at the same time."""

    def __init__(self, name: str, release: threading.Event, **options: Any) -> None:
        super().__init__(name, **options)
        self.release = release
        self.entered = threading.Event()
        self.lock = threading.Lock()
        self.calls = 0
        self.running = 0
        self.most_at_once = 0

    def run_sync(self) -> str:
        with self.lock:
            self.calls += 1
            call = self.calls
            self.running += 1
            self.most_at_once = max(self.most_at_once, self.running)
        try:
            if call == 1:
                self.entered.set()
                self.release.wait(30)
                return "the first call, late"
            return f"call {call}"
        finally:
            with self.lock:
                self.running -= 1


async def test_a_timed_out_thread_job_is_retried_only_once_its_call_ended() -> None:
    clock = VirtualClock()
    scheduler, recorder = make_scheduler(clock=clock, num_workers=2)
    release = threading.Event()
    job = FirstCallHangs("sleeps", release, timeout=1.0, retry=RETRY_AT_ONCE)
    try:
        async with scheduler:
            job_id = scheduler.submit(job)
            await until(job.entered.is_set, "the first call to start")
            await clock.advance(1.0)  # the timeout
            await until(lambda: scheduler.kernel.running == 0, "the timeout to free the worker")
            await settle()
            assert job.status is S.RUNNING, "its call still runs: no retry yet"
            assert job.last_error == "timed out after 1.0s" and job.last_failure_timed_out
            assert job.calls == 1
            assert scheduler.abandoned_calls() == [job_id]
            release.set()
            await join(scheduler)
    finally:
        release.set()
    assert job.most_at_once == 1, "never two calls of the job at once"
    assert job.calls == 2
    assert job.status is S.COMPLETED
    assert job.result == "call 2", "the abandoned call's result is discarded"
    assert recorder.path(job_id) == [S.PENDING, S.RUNNING, S.RETRY_WAIT, S.RUNNING, S.COMPLETED]
    (first,) = scheduler.attempt_history(job_id)
    assert (first.number, first.status, first.error) == (1, S.TIMED_OUT, "timed out after 1.0s")
    assert scheduler.abandoned_calls() == []
    assert not recorder.problems


async def test_a_job_cancelled_while_it_waits_for_its_call_stays_cancelled() -> None:
    clock = VirtualClock()
    scheduler, recorder = make_scheduler(clock=clock, num_workers=1)
    release = threading.Event()
    job = FirstCallHangs("sleeps", release, timeout=1.0, retry=RETRY_AT_ONCE)
    try:
        async with scheduler:
            job_id = scheduler.submit(job)
            await until(job.entered.is_set, "the first call to start")
            await clock.advance(1.0)
            await until(lambda: scheduler.kernel.running == 0, "the timeout to free the worker")
            assert scheduler.cancel(job_id)
            assert job.status is S.CANCELLED
            release.set()
            await until(lambda: not scheduler.abandoned_calls(), "the call to end")
            await settle()
            await join(scheduler)
    finally:
        release.set()
    assert job.status is S.CANCELLED and job.calls == 1, "not retried once cancelled"
    assert recorder.path(job_id) == [S.PENDING, S.RUNNING, S.CANCELLED]


async def test_a_stop_hands_back_a_job_waiting_for_its_abandoned_call() -> None:
    clock = VirtualClock()
    scheduler, recorder = make_scheduler(clock=clock, num_workers=1)
    release = threading.Event()
    job = FirstCallHangs("sleeps", release, timeout=1.0, retry=RETRY_AT_ONCE)
    try:
        await scheduler.start()
        job_id = scheduler.submit(job)
        await until(job.entered.is_set, "the first call to start")
        await clock.advance(1.0)
        await until(lambda: scheduler.kernel.running == 0, "the timeout to free the worker")
        await scheduler.stop()  # does not wait for the call
        assert job.status is S.CANCELLED and job.last_error == "scheduler shut down"
        release.set()
        await until(lambda: not scheduler.abandoned_calls(), "the call to end")
    finally:
        release.set()
    assert job.calls == 1 and job.result is None
    assert recorder.path(job_id) == [S.PENDING, S.RUNNING, S.CANCELLED]


async def test_an_operator_retry_waits_for_the_cancelled_call_to_end() -> None:
    scheduler, recorder = make_scheduler(num_workers=2)
    release = threading.Event()
    job = FirstCallHangs("sleeps", release, retry=NO_RETRY)
    try:
        async with scheduler:
            job_id = scheduler.submit(job)
            await until(job.entered.is_set, "the first call to start")
            scheduler.cancel(job_id)
            await until(lambda: job.status is S.CANCELLED, "the cancel")
            scheduler.retry_job(job_id)
            await settle()
            assert job.status is S.PENDING, "waits for the abandoned call"
            assert job.calls == 1
            release.set()
            await join(scheduler)
    finally:
        release.set()
    assert job.status is S.COMPLETED and job.result == "call 2"
    assert job.most_at_once == 1
    assert recorder.path(job_id) == [
        S.PENDING,
        S.RUNNING,
        S.CANCELLED,
        S.PENDING,
        S.RUNNING,
        S.COMPLETED,
    ]


async def test_timed_out_without_retries_left_is_recorded_at_once() -> None:
    clock = VirtualClock()
    scheduler, _ = make_scheduler(clock=clock, num_workers=1)
    release = threading.Event()
    job = BlockedThreadJob("stuck", release, timeout=1.0, retry=NO_RETRY)
    try:
        async with scheduler:
            job_id = scheduler.submit(job)
            await until(job.entered.is_set, "the call to start")
            await clock.advance(1.0)
            await until(lambda: job.status.is_terminal, "the timeout")
            assert job.status is S.TIMED_OUT
            assert scheduler.abandoned_calls() == [job_id]
            release.set()
            await until(lambda: not scheduler.abandoned_calls(), "the call to end")
    finally:
        release.set()
    assert job.status is S.TIMED_OUT and job.result is None


class FirstCallWaitsForAFile(CpuBoundJob):
    """A process job whose first call waits until the file `release` exists;
    every call writes ``start``/``end`` lines to `log` (files cross processes)."""

    def __init__(self, name: str, log: str, release: str, **options: Any) -> None:
        super().__init__(name, **options)
        self.log = log
        self.release = release

    def run_sync(self) -> str:
        with open(self.log, "a+") as log:
            log.seek(0)
            first = not log.read()
            log.write("start\n")
        if first:
            while not os.path.exists(self.release):  # the test creates it
                time.sleep(0.005)
        with open(self.log, "a") as log:
            log.write("end\n")
        return "the first call, late" if first else "a later call"


async def test_a_timed_out_process_job_is_retried_only_once_its_call_ended(
    tmp_path: Path,
) -> None:
    clock = VirtualClock()
    scheduler, recorder = make_scheduler(clock=clock, num_workers=2)
    log, release = tmp_path / "calls.log", tmp_path / "release"
    job = FirstCallWaitsForAFile("waits", str(log), str(release), timeout=1.0, retry=RETRY_AT_ONCE)
    try:
        async with scheduler:
            job_id = scheduler.submit(job)
            await until(lambda: log.exists() and log.read_text() == "start\n", "the call", 30)
            with captured_logs() as logs:
                await clock.advance(1.0)
                await until(lambda: scheduler.kernel.running == 0, "the timeout to free the worker")
                await settle()
            (warning,) = [e for e in logs if e["event"].startswith("process job abandoned")]
            assert warning["job_id"] == job_id and warning["log_level"] == "warning"
            assert job.status is S.RUNNING, "its call still runs: no retry yet"
            assert scheduler.abandoned_calls() == [job_id]
            release.touch()
            await join(scheduler, 30)
    finally:
        release.touch()
    assert log.read_text().split() == ["start", "end", "start", "end"], "one call at a time"
    assert job.status is S.COMPLETED and job.result == "a later call"
    assert recorder.path(job_id) == [S.PENDING, S.RUNNING, S.RETRY_WAIT, S.RUNNING, S.COMPLETED]


# ── the pool ───────────────────────────────────────────────────────────
class Quick(BlockingJob):
    def run_sync(self) -> str:
        return "ran"


async def test_cancelled_thread_jobs_do_not_clog_the_pool() -> None:
    scheduler, _ = make_scheduler(num_workers=2)
    release = threading.Event()
    stuck = [BlockedThreadJob(f"stuck {i}", release, retry=NO_RETRY) for i in range(2)]
    try:
        async with scheduler, LocalClient(scheduler) as client:
            with captured_logs() as logs:
                ids = [scheduler.submit(job) for job in stuck]
                await until(lambda: all(j.entered.is_set() for j in stuck), "both calls to run")
                for job_id in ids:
                    scheduler.cancel(job_id)
                await until(lambda: all(j.status is S.CANCELLED for j in stuck), "the cancels")
            abandoned = [e for e in logs if e["event"].startswith("thread job abandoned")]
            assert sorted(e["job_id"] for e in abandoned) == sorted(ids)
            assert all(e["log_level"] == "warning" for e in abandoned)
            assert scheduler.abandoned_calls() == ids
            assert (await client.stats()).abandoned == 2
            later = [Quick(f"later {i}") for i in range(4)]
            for job in later:
                scheduler.submit(job)
            await join(scheduler)
            assert [job.status for job in later] == [S.COMPLETED] * 4, "threads replaced"
            assert all(job.status is S.CANCELLED for job in stuck)
            release.set()
            await until(lambda: not scheduler.abandoned_calls(), "the calls to end")
            assert (await client.stats()).abandoned == 0
    finally:
        release.set()


async def test_a_pool_full_of_abandoned_calls_fails_the_next_attempt_clearly() -> None:
    scheduler, recorder = make_scheduler(num_workers=1)  # room for 1 abandoned call
    release = threading.Event()
    stuck = [BlockedThreadJob(f"stuck {i}", release, retry=NO_RETRY) for i in range(2)]
    try:
        async with scheduler:
            ids = []
            for job in stuck:  # the second takes the thread that replaced the first
                ids.append(scheduler.submit(job))
                await until(job.entered.is_set, f"{job.name} to run")
                scheduler.cancel(ids[-1])
            refused = Quick("refused", retry=NO_RETRY)
            with captured_logs() as logs:
                refused_id = scheduler.submit(refused)
                await join(scheduler)
            assert refused.status is S.FAILED
            assert refused.last_error is not None
            assert refused.last_error.startswith(
                f"ThreadPoolExhaustedError: no free thread to start {refused_id}: "
                f"2 abandoned thread jobs still run ({ids[0]}, {ids[1]})"
            )
            (exhausted,) = [e for e in logs if e["event"] == "thread pool exhausted"]
            assert exhausted["stuck"] == ids and exhausted["log_level"] == "error"
            release.set()
            await until(lambda: not scheduler.abandoned_calls(), "the calls to end")
            after = Quick("after")
            scheduler.submit(after)
            await join(scheduler)
            assert after.status is S.COMPLETED
    finally:
        release.set()
    assert recorder.path(refused_id) == [S.PENDING, S.RUNNING, S.FAILED]


async def test_the_dashboard_of_an_in_process_scheduler_shows_abandoned_calls() -> None:
    release = threading.Event()
    stuck = BlockedThreadJob("stuck", release, retry=NO_RETRY)
    try:
        async with JobScheduler(num_workers=1) as scheduler:
            app = create_app(scheduler=scheduler, token="t0ken")
            transport = httpx.ASGITransport(app=app)
            async with httpx.AsyncClient(transport=transport, base_url="http://dash") as http:
                job_id = scheduler.submit(stuck)
                await until(stuck.entered.is_set, "the call to start")
                scheduler.cancel(job_id)
                # The worker notes the abandoned call once it handles the cancel.
                await until(lambda: job_id in scheduler.abandoned_calls(), "the call abandoned")
                stats = (await http.get("/api/stats")).json()
                overview = (await http.get("/")).text
    finally:
        release.set()
    assert stats["abandoned"] == 1
    assert "1 timed-out or cancelled call still running on a thread" in overview


def test_the_number_of_abandoned_calls_a_pool_holds_is_checked() -> None:
    assert ThreadExecutor(workers=3).max_abandoned == 3
    assert ThreadExecutor(workers=3, max_abandoned=0).max_abandoned == 0
    with pytest.raises(ValueError, match="max_abandoned must be >= 0, got -1"):
        ThreadExecutor(workers=3, max_abandoned=-1)
    with pytest.raises(TypeError, match=r"max_abandoned must be an integer, got 1\.5"):
        ThreadExecutor(workers=3, max_abandoned=1.5)  # type: ignore[arg-type]


# ── shared stores: the lease is kept while the abandoned call runs ─────
_released: dict[str, threading.Event] = {}
_calls: dict[str, list[str]] = {}
_calls_lock = threading.Lock()


@task(timeout=0.2, retry={"policy": "fixed", "seconds": 0, "max_retries": 3})
def hangs_first(tag: str) -> str:
    """The first call of each tag blocks until the test releases it."""
    with _calls_lock:
        calls = _calls.setdefault(tag, [])
        calls.append("start")
        first = len(calls) == 1
    try:
        if first:
            _released[tag].wait(30)
            return "late"
        return "retried"
    finally:
        with _calls_lock:
            calls.append("end")


async def test_a_worker_keeps_a_timed_out_job_until_its_call_ended(target: Target) -> None:
    tag = target.kind
    _released[tag] = threading.Event()
    assert isinstance(hangs_first, Task)
    scheduler = JobScheduler(store=target.url, shared=True, num_workers=2)
    probe = await target.open_store()
    try:
        async with scheduler:
            job_id = scheduler.submit(hangs_first.job(tag))
            await until(lambda: scheduler.abandoned_calls() == [job_id], "the timeout", 20)
            (row,) = await probe.jobs([job_id])
            assert (row.status, row.attempts) == ("running", 1), "still held: nobody retries it"
            assert _calls[tag] == ["start"]
            _released[tag].set()
            await until(lambda: _calls[tag][-1:] == ["end"] and len(_calls[tag]) == 4, "retry", 20)
            await scheduler.flush()
            await until(lambda: not scheduler.abandoned_calls(), "the call to be forgotten")
        (row,) = await probe.jobs([job_id])
    finally:
        _released[tag].set()
        await probe.close()
    assert _calls[tag] == ["start", "end", "start", "end"], "one call at a time"
    assert (row.status, row.attempts, row.result) == ("completed", 2, "retried")
