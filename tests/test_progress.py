"""`jobsched.progress()`: from every executor, throttled, to listeners, the
``jobsched_job_progress`` hook, `LocalClient` and a shared store's `Client`."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import attrs
import pytest

import jobsched
import progress_jobs  # module-level functions: picklable for the process executors
from jobsched import (
    AsyncJob,
    Client,
    JobScheduler,
    JobStatus,
    LocalClient,
    ProgressThrottle,
    SchedulerError,
    hookimpl,
    progress,
    progress_sender,
)
from jobsched.testing import VirtualClock
from kernel_support import Gate, join, until
from worker_support import shared_store


# ── the throttle, on a fake clock ──────────────────────────────────────
class FakeTimers:
    """`ProgressThrottle`'s `now` and `later`, moved by hand."""

    def __init__(self) -> None:
        self.t = 0.0
        self.armed: list[tuple[float, Callable[[], None], list[bool]]] = []

    def now(self) -> float:
        return self.t

    def later(self, delay: float, fn: Callable[[], None]) -> Any:
        cancelled = [False]
        self.armed.append((self.t + delay, fn, cancelled))

        class Handle:
            def cancel(self) -> None:
                cancelled[0] = True

        return Handle()

    def advance(self, seconds: float) -> None:
        self.t += seconds
        due = [a for a in self.armed if a[0] <= self.t]
        self.armed = [a for a in self.armed if a[0] > self.t]
        for _, fn, cancelled in due:
            if not cancelled[0]:
                fn()


def test_the_throttle_sends_at_most_once_per_interval_and_never_loses_the_latest() -> None:
    timers = FakeTimers()
    sent: list[int] = []
    throttle = ProgressThrottle(sent.append, timers.now, timers.later)
    throttle.update(1)  # the first goes at once
    assert sent == [1]
    for value in range(2, 100):  # a burst within the same instant
        throttle.update(value)
    assert sent == [1]
    assert len(timers.armed) == 1 and timers.armed[0][0] == 0.25
    timers.advance(0.1)
    throttle.update(100)
    timers.advance(0.15)  # t = 0.25: the timer sends the latest
    assert sent == [1, 100]
    timers.advance(1.0)
    throttle.update(101)  # a quiet interval later: at once again
    assert sent == [1, 100, 101]
    throttle.update(102)
    throttle.flush()  # the attempt ends: what waits goes now, the timer is off
    assert sent == [1, 100, 101, 102]
    timers.advance(1.0)
    assert sent == [1, 100, 101, 102]
    throttle.flush()  # nothing waiting: nothing sent
    assert sent == [1, 100, 101, 102]


def test_progress_sender_sends_the_first_and_last_reports_and_throttles_the_rest() -> None:
    sent: list[tuple[Any, ...]] = []
    started = time.monotonic()
    with progress_sender(lambda *value: sent.append(value)) as reported:
        assert not reported()
        for i in range(1, 1001):
            progress(i, 1000, "working")
        assert reported()
    elapsed = time.monotonic() - started
    assert sent[0] == (1, 1000, "working") and sent[-1] == (1000, 1000, "working")
    # At most one per started 0.25 s window, plus the first and the final flush.
    assert len(sent) <= 2 + int(elapsed / 0.25) + 1
    with pytest.raises(SchedulerError, match="outside a running job"):
        progress(1)  # the sender is gone with the block


# ── calling it wrong ───────────────────────────────────────────────────
async def test_progress_outside_a_running_job_raises() -> None:
    with pytest.raises(SchedulerError, match=r"progress\(\) called outside a running job"):
        progress(1, 2)
    errors: list[BaseException] = []

    def in_a_thread() -> None:
        try:
            progress(1)
        except BaseException as exc:
            errors.append(exc)

    thread = threading.Thread(target=in_a_thread)
    thread.start()
    thread.join()
    assert [type(e) for e in errors] == [SchedulerError]


@pytest.mark.parametrize(
    ("args", "error", "culprit"),
    [
        (("1",), TypeError, "done"),
        ((True,), TypeError, "done"),
        ((float("inf"),), TypeError, "done"),
        ((1, "2"), TypeError, "total"),
        ((-1,), ValueError, "done and total"),
        ((1, -2), ValueError, "done and total"),
        ((1, 2, 3), TypeError, "message"),
    ],
)
def test_progress_refuses_bad_values_naming_them(
    args: tuple[Any, ...], error: type, culprit: str
) -> None:
    with pytest.raises(error, match=culprit):
        progress(*args)


# ── from every executor ────────────────────────────────────────────────
class Recorder:
    """A ``jobsched_job_progress`` plugin taking only some of the arguments."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, float, float | None]] = []

    @hookimpl
    def jobsched_job_progress(self, job: Any, done: float, total: float | None) -> None:
        self.calls.append((job.job_id, done, total))


async def steps_async(n: int) -> int:
    for i in range(1, n + 1):
        progress(i, n, f"step {i}")
        await asyncio.sleep(0)
    return n


def steps_thread(n: int) -> int:
    for i in range(1, n + 1):
        progress(i, n, f"step {i}")
    return n


@pytest.mark.parametrize("model", ["async", "thread", "process", "subprocess"])
async def test_progress_from_each_executor_reaches_the_hook_and_the_job(model: str) -> None:
    recorder = Recorder()
    scheduler = JobScheduler(plugins=[recorder])
    fn: Any = {
        "async": steps_async,
        "thread": steps_thread,
        "process": progress_jobs.steps,
        "subprocess": progress_jobs.steps,
    }[model]
    async with scheduler:
        job_id = scheduler.submit(fn, 5, model=model, timeout=60)
        await join(scheduler, limit=60)
        job = scheduler.get(job_id)
        assert job.status is JobStatus.COMPLETED, job.last_error
        kept = scheduler.job_progress(job_id)
        assert kept is not None and (kept.done, kept.total, kept.message) == (5, 5, "step 5")
        info = await LocalClient(scheduler).get(job_id)
        assert info.progress is not None and info.progress.done == 5
    # The last report always arrives (when the attempt ends at the latest), in order.
    assert recorder.calls[-1] == (job_id, 5, 5)
    dones = [done for _, done, _ in recorder.calls]
    assert dones == sorted(set(dones)) and len(dones) <= 5
    if model == "async":  # on the loop, the first report goes at once
        assert recorder.calls[0] == (job_id, 1, 5)


async def test_progress_inside_tasks_an_async_job_starts() -> None:
    async def fan_out() -> None:
        async def part(i: int) -> None:
            progress(i, 3)

        await asyncio.gather(*(part(i) for i in range(1, 4)))

    scheduler = JobScheduler()
    async with scheduler:
        job_id = scheduler.submit(fan_out)
        await join(scheduler)
    assert scheduler.get(job_id).status is JobStatus.COMPLETED
    assert scheduler.job_progress(job_id) is not None


async def test_a_failing_job_keeps_its_last_progress() -> None:
    async def half_then_fail() -> None:
        progress(50, 100, "half way")
        raise RuntimeError("boom")

    scheduler = JobScheduler()
    async with scheduler:
        job_id = scheduler.submit(half_then_fail, retry="none")
        await join(scheduler)
    kept = scheduler.job_progress(job_id)
    assert scheduler.get(job_id).status is JobStatus.FAILED
    assert kept is not None and (kept.done, kept.total, kept.message) == (50, 100, "half way")


# ── throttling in the scheduler, on the virtual clock ─────────────────
class Reporter(AsyncJob):
    """Reports `burst` values, waits for the test, reports once more."""

    def __init__(self, burst: int) -> None:
        super().__init__("reporter", timeout=None, retry="none")
        self.burst = burst
        self.proceed = asyncio.Event()
        self.reported = asyncio.Event()

    async def run(self) -> None:
        for i in range(1, self.burst + 1):
            progress(i, 100)
        self.reported.set()
        await self.proceed.wait()
        progress(100, 100, "done")


async def test_the_scheduler_passes_on_four_reports_a_second_per_job(
    virtual_clock: VirtualClock,
) -> None:
    scheduler = JobScheduler(clock=virtual_clock)
    seen: list[tuple[str, float]] = []
    scheduler.add_progress_listener(lambda job, done, total, message: seen.append((job.name, done)))
    job = Reporter(burst=50)
    async with scheduler:
        scheduler.submit(job)
        await until(job.reported.is_set, "the burst")
        assert seen == [("reporter", 1)]  # the rest waits for the interval
        assert scheduler.job_progress(job.job_id).done == 50  # type: ignore[union-attr]
        await virtual_clock.advance(0.25)
        assert seen == [("reporter", 1), ("reporter", 50)]
        await virtual_clock.advance(0.1)
        job.proceed.set()
        await join(scheduler)
    # Too soon for the interval: sent when the attempt ended, not lost.
    assert seen == [("reporter", 1), ("reporter", 50), ("reporter", 100)]


async def test_a_scheduler_with_no_progress_listener_only_keeps_the_value() -> None:
    scheduler = JobScheduler(plugins=jobsched.PluginManager([], autoload=False))
    async with scheduler:
        job_id = scheduler.submit(steps_async, 3)
        await join(scheduler)
    assert scheduler.job_progress(job_id) is not None


async def test_a_listener_that_raises_is_logged_and_the_others_still_run() -> None:
    scheduler = JobScheduler()
    seen: list[float] = []

    def broken(job: Any, done: float, total: Any, message: Any) -> None:
        raise RuntimeError("listener bug")

    scheduler.add_progress_listener(broken)
    scheduler.add_progress_listener(lambda job, done, total, message: seen.append(done))
    async with scheduler:
        job_id = scheduler.submit(steps_async, 2)
        await join(scheduler)
    assert scheduler.get(job_id).status is JobStatus.COMPLETED
    assert seen and seen[-1] == 2
    scheduler.remove_progress_listener(broken)


async def test_a_thread_report_after_its_attempt_ended_is_dropped() -> None:
    scheduler = JobScheduler()
    gate = Gate(name="after")
    async with scheduler:
        job_id = scheduler.submit(gate)
        await until(lambda: gate.waiting, "the job to start")
        job = scheduler.get(job_id)
        gate.open()
        await join(scheduler)
        scheduler.kernel.progress.report_threadsafe(job, 1, 2, "late")
        await asyncio.sleep(0)
        await asyncio.sleep(0)
    assert scheduler.job_progress(job_id) is None


# ── through a shared store, read back by a Client ─────────────────────
RELEASE: dict[str, asyncio.Event] = {}


@attrs.define(slots=True, eq=False, repr=False)
class Halfway(AsyncJob):
    """Reports 1 of 4, waits for the test, reports 4 of 4."""

    tag: str

    async def run(self) -> str:
        progress(1, 4, "started")
        await RELEASE[self.tag].wait()
        progress(4, 4, "finished")
        return self.tag


class halfway_plugin:
    @staticmethod
    @hookimpl
    def jobsched_register_job_types(register: Callable[[str, Any], None]) -> None:
        register("halfway", Halfway)


@pytest.fixture(params=["sqlite", "postgresql"])
def store_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """A fresh shared store: a SQLite file, or a PostgreSQL schema."""
    return shared_store(request, tmp_path)


async def test_progress_is_written_to_a_shared_store_and_read_by_a_client(store_url: str) -> None:
    RELEASE["one"] = asyncio.Event()
    worker = JobScheduler(store=store_url, shared=True, plugins=[halfway_plugin])
    async with worker, Client(store_url) as client:
        job_id = worker.submit(Halfway(tag="one"))
        await worker.flush()
        job_id = worker.resolve(job_id)

        async def reported() -> Any:
            return (await client.get(job_id)).progress

        for _ in range(1000):  # the worker writes it in its next batch
            if await reported() is not None:
                break
            await asyncio.sleep(0.01)
        first = await reported()
        assert first is not None and (first.done, first.total, first.message) == (1, 4, "started")
        # `status --json` of a shared store shows it too.
        status = await asyncio.to_thread(
            subprocess.run,
            [sys.executable, "-m", "jobsched", "status", "--store", store_url, "--json"],
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert status.returncode == 0, status.stderr
        (row,) = [r for r in json.loads(status.stdout)["jobs"] if r["job_id"] == job_id]
        assert {k: row["progress"][k] for k in ("done", "total", "message")} == {
            "done": 1,
            "total": 4,
            "message": "started",
        }
        RELEASE["one"].set()
        info = await client.wait(job_id, timeout=30)
    assert info.status is JobStatus.COMPLETED
    assert info.progress is not None
    assert (info.progress.done, info.progress.total, info.progress.message) == (4, 4, "finished")


@attrs.define(slots=True, eq=False, repr=False)
class NulProgress(AsyncJob):
    """Reports a message no PostgreSQL text can hold."""

    async def run(self) -> None:
        progress(1, 1, "half\x00way")


class nul_progress_plugin:
    @staticmethod
    @hookimpl
    def jobsched_register_job_types(register: Callable[[str, Any], None]) -> None:
        register("nul-progress", NulProgress)


async def test_a_progress_message_holding_a_nul_is_stored_escaped_on_every_store(
    store_url: str,
) -> None:
    worker = JobScheduler(store=store_url, shared=True, plugins=[nul_progress_plugin])
    async with worker, Client(store_url) as client:
        job_id = worker.submit(NulProgress())
        await worker.flush()
        info = await client.wait(worker.resolve(job_id), timeout=30)
    assert info.status is JobStatus.COMPLETED
    assert info.progress is not None and info.progress.message == "half\\x00way"
