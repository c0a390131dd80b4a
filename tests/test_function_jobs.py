"""Plain functions and coroutine functions as jobs, with every kernel feature."""

from __future__ import annotations

import asyncio
import functools
import os
import pickle
import threading

import pytest

from jobsched import (
    ConcurrencyModel,
    FunctionJob,
    JobPriority,
    JobStatus,
    NonRetryableError,
    PluginError,
    RetryPolicy,
)
from jobsched.testing import VirtualClock
from kernel_support import NO_RETRY, builtin_plugins, make_scheduler, settle, until

# A hang is a failure, not a stuck suite.
pytestmark = pytest.mark.timeout(30)

S = JobStatus


def whoami(tag: str, *, suffix: str = "") -> tuple[str, int, int]:
    """Module level, so the process executor can pickle it."""
    return (tag + suffix, os.getpid(), threading.get_ident())


def explode(message: str) -> None:
    raise ValueError(message)


async def async_whoami(tag: str) -> tuple[str, int, int]:
    await asyncio.sleep(0)
    return (tag, os.getpid(), threading.get_ident())


async def test_a_plain_function_runs_on_a_thread() -> None:
    scheduler, _ = make_scheduler()
    async with scheduler:
        job_id = scheduler.submit(whoami, "t", suffix="!")
        await scheduler.join()
    job = scheduler.get(job_id)
    assert isinstance(job, FunctionJob)
    assert job.model is ConcurrencyModel.THREAD
    assert job.name == "whoami"
    tag, pid, thread = job.result
    assert (tag, pid) == ("t!", os.getpid())
    assert thread != threading.get_ident(), "off the event-loop thread"


async def test_a_coroutine_function_runs_on_the_loop() -> None:
    scheduler, _ = make_scheduler()
    async with scheduler:
        job_id = scheduler.submit(async_whoami, "a")
        await scheduler.join()
    job = scheduler.get(job_id)
    assert job.model is ConcurrencyModel.ASYNC
    assert job.result == ("a", os.getpid(), threading.get_ident())


async def test_model_process_runs_a_module_level_function_in_another_process() -> None:
    scheduler, _ = make_scheduler()
    async with scheduler:
        ok = scheduler.submit(whoami, "p", model="process")
        bad = scheduler.submit(explode, "in a child", model="process", retry=NO_RETRY)
        await asyncio.wait_for(scheduler.join(), 30)
    job = scheduler.get(ok)
    assert job.status is S.COMPLETED
    assert job.model == ConcurrencyModel.PROCESS
    assert job.result[0] == "p"
    assert job.result[1] != os.getpid()
    assert scheduler.get(bad).status is S.FAILED
    assert scheduler.get(bad).last_error == "ValueError: in a child"


async def test_a_function_that_cannot_be_pickled_fails_clearly_in_process_mode() -> None:
    scheduler, _ = make_scheduler()
    async with scheduler:
        job_id = scheduler.submit(lambda: 1, model="process", retry=NO_RETRY)
        await asyncio.wait_for(scheduler.join(), 30)
    job = scheduler.get(job_id)
    assert job.status is S.FAILED
    assert job.last_error is not None and "lambda" in job.last_error


async def test_partials_and_async_callables_are_recognised() -> None:
    class Callable:
        async def __call__(self, x: int) -> int:
            return x * 3

    scheduler, _ = make_scheduler()
    async with scheduler:
        p = scheduler.submit(functools.partial(async_whoami, "partial"))
        c = scheduler.submit(Callable(), 5)
        s = scheduler.submit(functools.partial(whoami, "sync-partial"))
        await scheduler.join()
    assert scheduler.get(p).model is ConcurrencyModel.ASYNC
    assert scheduler.get(p).name == "async_whoami"
    assert scheduler.get(c).model is ConcurrencyModel.ASYNC and scheduler.get(c).result == 15
    assert scheduler.get(s).model is ConcurrencyModel.THREAD


async def test_job_options_are_taken_from_submit() -> None:
    scheduler, _ = make_scheduler()
    policy = RetryPolicy(max_retries=7)
    job_id = scheduler.submit(
        whoami,
        "x",
        name="custom",
        priority=JobPriority.CRITICAL,
        timeout=12.5,
        retry=policy,
        deadline=99.0,
    )
    job = scheduler.get(job_id)
    assert (job.name, job.priority, job.timeout, job.retry, job.deadline) == (
        "custom",
        JobPriority.CRITICAL,
        12.5,
        policy,
        99.0,
    )
    assert job.args == ("x",) and job.kwargs == {}  # type: ignore[attr-defined]
    async with scheduler:
        await scheduler.join()


async def test_build_a_function_job_directly_when_arguments_collide_with_submit() -> None:
    def wait(delay: float, depends_on: str) -> str:
        return f"{delay}/{depends_on}"

    scheduler, _ = make_scheduler()
    async with scheduler:
        job_id = scheduler.submit(FunctionJob(wait, delay=3.0, depends_on="x"))
        await scheduler.join()
    assert scheduler.get(job_id).result == "3.0/x"


def test_function_jobs_pickle() -> None:
    job = FunctionJob(whoami, "pickled", suffix="?", model="process")
    clone = pickle.loads(pickle.dumps(job))
    assert clone.run_sync()[0] == "pickled?"
    assert clone.job_id == job.job_id


# ── bad input ─────────────────────────────────────────────────────────
@pytest.mark.parametrize("model", ["thread", "process", ConcurrencyModel.THREAD])
def test_a_coroutine_function_on_a_pool_executor_is_refused(model: str) -> None:
    scheduler, _ = make_scheduler()
    with pytest.raises(ValueError, match="async_whoami is a coroutine function"):
        scheduler.submit(async_whoami, "x", model=model)
    assert scheduler.jobs() == []


@pytest.mark.parametrize("model", ["async", ConcurrencyModel.ASYNC])
def test_a_plain_function_on_the_loop_is_refused(model: str) -> None:
    scheduler, _ = make_scheduler()
    with pytest.raises(ValueError, match="whoami is not a coroutine function"):
        scheduler.submit(whoami, "x", model=model)


def test_unknown_executor_name_is_refused_with_the_known_names() -> None:
    scheduler, _ = make_scheduler()
    with pytest.raises(PluginError, match="unknown executor 'gpu'") as info:
        scheduler.submit(whoami, "x", model="gpu")
    known = builtin_plugins().names("executors")
    assert {"async", "process", "thread"} <= set(known)
    assert f"(registered: {', '.join(known)})" in str(info.value)
    assert scheduler.jobs() == []


def test_non_callables_and_arguments_for_a_job_are_refused() -> None:
    scheduler, _ = make_scheduler()
    with pytest.raises(TypeError, match="expected a Job or a callable"):
        scheduler.submit(42)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="already a job"):
        scheduler.submit(FunctionJob(whoami, "x"), "extra")
    # A job takes Client.submit's options (priority, timeout, retry, name), no others.
    with pytest.raises(TypeError, match=r"unexpected keyword arguments \['model'\]"):
        scheduler.submit(FunctionJob(whoami, "x"), model="thread")
    with pytest.raises(ValueError, match="timeout"):
        scheduler.submit(whoami, "x", timeout=0)


# ── kernel features work for function jobs ────────────────────────────
async def test_function_job_timeouts() -> None:
    clock = VirtualClock()
    scheduler, recorder = make_scheduler(clock=clock)
    release = threading.Event()

    async def forever() -> None:
        await asyncio.get_running_loop().create_future()

    def blocked() -> str:
        release.wait(30)
        return "late"

    try:
        async with scheduler:
            a = scheduler.submit(forever, timeout=2.0, retry=NO_RETRY)
            t = scheduler.submit(blocked, timeout=2.0, retry=NO_RETRY)
            await until(lambda: scheduler.kernel.running == 2, "both to start")
            await clock.advance(2.0)
            await until(lambda: scheduler.get(t).status.is_terminal, "the thread timeout")
            await scheduler.join()
    finally:
        release.set()
    assert scheduler.get(a).status is S.TIMED_OUT
    assert scheduler.get(t).status is S.TIMED_OUT
    assert recorder.path(a) == [S.PENDING, S.RUNNING, S.TIMED_OUT]


async def test_function_job_retries_and_non_retryable_errors() -> None:
    clock = VirtualClock()
    scheduler, _ = make_scheduler(clock=clock)
    calls = {"flaky": 0, "fatal": 0}

    async def flaky() -> str:
        calls["flaky"] += 1
        if calls["flaky"] < 3:
            raise ConnectionError("reset")
        return "ok"

    def fatal() -> None:
        calls["fatal"] += 1
        raise NonRetryableError("bad config")

    policy = RetryPolicy(max_retries=5, base_delay=1.0, jitter=False)
    async with scheduler:
        f = scheduler.submit(flaky, retry=policy)
        n = scheduler.submit(fatal, retry=policy)
        await until(lambda: scheduler.get(n).status.is_terminal, "the fatal job")
        await settle()
        assert scheduler.get(f).status is S.RETRY_WAIT
        await clock.advance(1.0)
        await settle()
        await clock.advance(2.0)
        await scheduler.join()
    assert scheduler.get(f).status is S.COMPLETED and scheduler.get(f).attempts == 3
    assert scheduler.get(n).status is S.FAILED and calls["fatal"] == 1


async def test_function_job_dependencies_and_cascade() -> None:
    scheduler, recorder = make_scheduler()
    order: list[str] = []

    async def step(label: str) -> str:
        order.append(label)
        return label

    def broken() -> None:
        raise RuntimeError("broken step")

    async with scheduler:
        a = scheduler.submit(step, "a")
        b = scheduler.submit(step, "b", depends_on=[a])
        c = scheduler.submit(step, "c", depends_on=[a, b])
        x = scheduler.submit(broken, retry=NO_RETRY)
        y = scheduler.submit(step, "y", depends_on=[x])
        await scheduler.join()
    assert order == ["a", "b", "c"]
    assert scheduler.get(c).result == "c"
    assert scheduler.get(y).status is S.CANCELLED
    assert scheduler.get(y).last_error == f"upstream {x} failed"
    assert recorder.problems == []


async def test_function_job_cancellation() -> None:
    scheduler, recorder = make_scheduler(num_workers=1)
    cancelled = asyncio.Event()

    async def long_running() -> None:
        try:
            await asyncio.get_running_loop().create_future()
        except asyncio.CancelledError:
            cancelled.set()
            raise

    async with scheduler:
        running = scheduler.submit(long_running, timeout=None)
        queued = scheduler.submit(whoami, "never")
        await settle()
        assert scheduler.cancel(queued) is True
        assert scheduler.cancel(running) is True
        await scheduler.join()
    assert cancelled.is_set()
    assert scheduler.get(running).status is S.CANCELLED
    assert scheduler.get(queued).status is S.CANCELLED
    assert recorder.path(queued) == [S.PENDING, S.CANCELLED]
