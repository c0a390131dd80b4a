"""Retries worth making: ``retry_on``/``no_retry_on`` per task and per job (classes or
names, in job files too) and ``raise jobsched.Retry(delay=...)``, in this process
and in worker processes on SQLite and PostgreSQL."""

from __future__ import annotations

import sys
import types
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

import jobsched
from jobsched import (
    Client,
    FunctionJob,
    JobScheduler,
    JobSpecError,
    JobStatus,
    NonRetryableError,
    Retry,
    build_job,
)
from jobsched.jobfile import JobFileError, load_jobfile, run_jobfile
from task_examples import Transient, asks_for_retry, flaky
from test_tasks import TaskWorker
from worker_support import shared_store

FAST = {"policy": "fixed", "seconds": 0, "max_retries": 3}


async def run_one(job: jobsched.Job, **scheduler: Any) -> jobsched.Job:
    async with JobScheduler(**scheduler) as s:
        job_id = s.submit(job)
        await s.join()
    return s.get(job_id)


def counter(tmp_path: Path) -> str:
    return str(tmp_path / "attempts")


# ── retry_on / no_retry_on ─────────────────────────────────────────────
async def test_a_failure_in_retry_on_is_retried(tmp_path: Path) -> None:
    job = await run_one(flaky.job(counter(tmp_path), failures=2, error="transient"))
    assert (job.status, job.attempts, job.result) == (JobStatus.COMPLETED, 3, 3)


async def test_a_failure_not_in_retry_on_fails_at_once(tmp_path: Path) -> None:
    job = await run_one(flaky.job(counter(tmp_path), failures=2, error="value"))
    assert (job.status, job.attempts) == (JobStatus.FAILED, 1)
    assert job.last_error == ("ValueError: attempt 1 (not retried: ValueError is not in retry_on)")


async def test_no_retry_on_wins_over_retry_on(tmp_path: Path) -> None:
    job = flaky.options(no_retry_on=["task_examples.Transient"]).job(
        counter(tmp_path), failures=2, error="transient"
    )
    done = await run_one(job)
    assert (done.status, done.attempts) == (JobStatus.FAILED, 1)
    assert done.last_error == (
        "Transient: attempt 1 (not retried: task_examples.Transient is in no_retry_on)"
    )


async def test_a_name_matches_subclasses_too() -> None:
    def refused() -> None:
        raise ConnectionRefusedError("no")

    job = await run_one(FunctionJob(refused, retry=FAST, no_retry_on="OSError"))
    assert (job.status, job.attempts) == (JobStatus.FAILED, 1)
    assert job.last_error == "ConnectionRefusedError: no (not retried: OSError is in no_retry_on)"
    job = await run_one(FunctionJob(refused, retry=FAST, retry_on=[OSError]))
    assert (job.status, job.attempts) == (JobStatus.FAILED, 4)  # retried, every time


async def test_a_timeout_counts_as_timeout_error(virtual_clock: Any) -> None:
    async def hangs() -> None:
        await virtual_clock.sleep(100)

    async def run(**filters: Any) -> jobsched.Job:
        scheduler = JobScheduler(clock=virtual_clock)
        job_id = scheduler.submit(hangs, timeout=1, retry=FAST, **filters)
        async with scheduler:
            await virtual_clock.advance(10)
        return scheduler.get(job_id)

    retried = await run(retry_on=[TimeoutError])
    assert (retried.status, retried.attempts) == (JobStatus.TIMED_OUT, 4)
    refused = await run(retry_on=[ValueError])
    assert (refused.status, refused.attempts) == (JobStatus.TIMED_OUT, 1)
    assert refused.last_error == "timed out after 1s (not retried: TimeoutError is not in retry_on)"


async def test_non_retryable_errors_are_never_retried_whatever_the_filters() -> None:
    def gives_up() -> None:
        raise NonRetryableError("bad input")

    job = await run_one(FunctionJob(gives_up, retry=FAST, retry_on=[Exception]))
    assert (job.status, job.attempts, job.last_error) == (
        JobStatus.FAILED,
        1,
        "NonRetryableError: bad input",
    )


async def test_without_filters_every_exception_is_retried_as_before() -> None:
    def fails() -> None:
        raise KeyError("k")

    job = await run_one(FunctionJob(fails, retry=FAST))
    assert (job.status, job.attempts, job.last_error) == (JobStatus.FAILED, 4, "KeyError: 'k'")


# ── naming exceptions ──────────────────────────────────────────────────
def test_classes_become_names_and_names_are_kept() -> None:
    job = FunctionJob(len, "x", retry_on=[TimeoutError, Transient, "myapp.errors.Late"])
    assert job.retry_on == ("TimeoutError", "task_examples.Transient", "myapp.errors.Late")
    assert FunctionJob(len, "x", no_retry_on=KeyError).no_retry_on == ("KeyError",)


@pytest.fixture
def errors_module() -> Iterator[types.ModuleType]:
    module = types.ModuleType("loaded_errors")
    module.Late = type("Late", (Exception,), {})  # type: ignore[attr-defined]
    module.not_a_class = 42  # type: ignore[attr-defined]
    sys.modules["loaded_errors"] = module
    yield module
    del sys.modules["loaded_errors"]


@pytest.mark.parametrize(
    ("names", "error", "message"),
    [
        (
            ["TimeoutErorr"],
            ValueError,
            "retry_on: unknown exception class 'TimeoutErorr'; did you mean 'TimeoutError'",
        ),
        (["Exceptionz"], ValueError, "unknown exception class 'Exceptionz'; did you mean"),
        (["no such"], ValueError, "retry_on: 'no such' is not an exception class name"),
        (["a..B"], ValueError, "retry_on: 'a..B' is not an exception class name"),
        (
            ["loaded_errors.Early"],
            ValueError,
            "retry_on: unknown exception class 'loaded_errors.Early': module 'loaded_errors' "
            "has no 'Early'",
        ),
        (
            ["loaded_errors.not_a_class"],
            ValueError,
            "retry_on: 'loaded_errors.not_a_class' is 42, not an exception class",
        ),
        (["ValueError", 3], TypeError, "retry_on: 3 is neither an exception class nor a name"),
        ([int], TypeError, "retry_on: <class 'int'> is neither an exception class nor"),
        ({"ValueError": 1}, TypeError, "retry_on must be a list of exception classes or names"),
    ],
)
def test_a_bad_exception_name_is_refused_naming_it(
    errors_module: types.ModuleType, names: Any, error: type[Exception], message: str
) -> None:
    with pytest.raises(error) as caught:
        FunctionJob(len, "x", retry_on=names)
    assert message in str(caught.value)


def test_a_class_of_a_loaded_module_is_checked_and_of_another_module_kept(
    errors_module: types.ModuleType,
) -> None:
    job = FunctionJob(len, "x", retry_on=["loaded_errors.Late", "not_imported.Anything"])
    assert job.retry_on == ("loaded_errors.Late", "not_imported.Anything")


def test_build_job_takes_the_filters_as_options() -> None:
    job = build_job("examples.add", {"a": 1}, retry_on=["OSError"], no_retry_on="PermissionError")
    assert (job.retry_on, job.no_retry_on) == (("OSError",), ("PermissionError",))
    with pytest.raises(JobSpecError) as caught:
        build_job("examples.add", {"a": 1}, label="job 'x'", no_retry_on=["Oops"])
    assert str(caught.value).startswith("job 'x': no_retry_on: unknown exception class 'Oops'")


# ── job files ──────────────────────────────────────────────────────────
def jobfile(tmp_path: Path, keys: str) -> Path:
    path = tmp_path / "jobs.toml"
    path.write_text(
        f"""\
[[job]]
id = "flaky"
type = "task_examples.flaky"
args = {{ path = "{counter(tmp_path)}", failures = 2, error = "value" }}
{keys}
"""
    )
    return path


@pytest.mark.parametrize(
    ("keys", "status", "attempts"),
    [
        ("", "failed", 1),  # the task's retry_on = [Transient]
        ('retry_on = ["ValueError"]', "completed", 3),
        ('retry_on = "LookupError"\nno_retry_on = ["ValueError"]', "failed", 1),
    ],
)
async def test_a_job_file_sets_the_filters_of_a_job(
    tmp_path: Path, keys: str, status: str, attempts: int
) -> None:
    plugins = jobsched.default_plugin_manager()
    result = await run_jobfile(load_jobfile(jobfile(tmp_path, keys), plugins=plugins))
    (outcome,) = result.outcomes
    assert (outcome.status.value, outcome.attempts) == (status, attempts)


@pytest.mark.parametrize(
    ("keys", "message"),
    [
        (
            'retry_on = ["ValueEror"]',
            "jobs.toml:5: job 'flaky': retry_on: unknown exception class 'ValueEror'; "
            "did you mean 'ValueError'",
        ),
        (
            "no_retry_on = [1]",
            "jobs.toml:5: job 'flaky': no_retry_on must be an array of exception class names",
        ),
    ],
)
def test_a_job_file_with_a_bad_filter_is_refused_at_its_line(
    tmp_path: Path, keys: str, message: str
) -> None:
    with pytest.raises(JobFileError) as caught:
        load_jobfile(jobfile(tmp_path, keys), plugins=jobsched.default_plugin_manager())
    assert message in str(caught.value)


# ── raise Retry(delay=...) ─────────────────────────────────────────────
async def test_retry_asks_for_the_next_attempt_after_its_delay(virtual_clock: Any) -> None:
    starts: list[float] = []

    async def busy() -> int:
        starts.append(virtual_clock.now())
        if len(starts) < 3:
            raise Retry(delay=5, reason="busy")
        return len(starts)

    scheduler = JobScheduler(clock=virtual_clock)
    job_id = scheduler.submit(busy, retry=FAST)
    async with scheduler:
        await virtual_clock.advance(20)
    job = scheduler.get(job_id)
    assert (job.status, job.attempts, job.result) == (JobStatus.COMPLETED, 3, 3)
    assert starts == [0.0, 5.0, 10.0]  # the policy's own delay is 0


async def test_retry_counts_as_an_attempt_and_respects_max_retries(tmp_path: Path) -> None:
    job = await run_one(asks_for_retry.job(counter(tmp_path), failures=10, delay=0))
    assert (job.status, job.attempts) == (JobStatus.FAILED, 4)  # max_retries = 3
    assert job.last_error == "Retry: retry requested in 0s: attempt 4"
    none = await run_one(
        asks_for_retry.options(retry="none").job(counter(tmp_path) + "2", failures=1, delay=0)
    )
    assert (none.status, none.attempts) == (JobStatus.FAILED, 1)


async def test_retry_without_a_delay_waits_the_policys_delay(virtual_clock: Any) -> None:
    attempts: list[float] = []

    async def once() -> None:
        attempts.append(virtual_clock.now())
        if len(attempts) == 1:
            raise Retry(reason="not yet")

    scheduler = JobScheduler(clock=virtual_clock)
    job_id = scheduler.submit(once, retry={"policy": "fixed", "seconds": 7})
    async with scheduler:
        await virtual_clock.advance(10)
    assert scheduler.get(job_id).status is JobStatus.COMPLETED
    assert attempts == [0.0, 7.0]


async def test_retry_ignores_the_filters_the_job_asked() -> None:
    calls: list[int] = []

    def asks() -> None:
        calls.append(1)
        if len(calls) == 1:
            raise Retry(delay=0)

    job = await run_one(FunctionJob(asks, retry=FAST, no_retry_on=[Exception]))
    assert (job.status, job.attempts) == (JobStatus.COMPLETED, 2)


@pytest.mark.parametrize(
    ("delay", "message"),
    [
        (-1, "Retry(delay=) must be >= 0 and <= 31536000 seconds (MAX_DELAY, one year), got -1"),
        (float("nan"), "Retry(delay=) must be >= 0"),
        ("5", "Retry(delay=) must be a number of seconds, got string '5'"),
    ],
)
async def test_a_retry_with_a_bad_delay_fails_the_job_at_once(delay: Any, message: str) -> None:
    def asks() -> None:
        raise Retry(delay=delay)

    job = await run_one(FunctionJob(asks, retry=FAST))
    assert (job.status, job.attempts) == (JobStatus.FAILED, 1)
    assert job.last_error is not None
    assert f"(not retried: {message}" in job.last_error


def test_retry_says_what_it_asked_and_pickles() -> None:
    import pickle

    assert str(Retry(delay=5, reason="rate limited")) == "retry requested in 5s: rate limited"
    assert str(Retry()) == "retry requested after the retry policy's delay"
    again = pickle.loads(pickle.dumps(Retry(delay=2.5, reason="r")))
    assert (again.delay, again.reason) == (2.5, "r")


# ── across processes ───────────────────────────────────────────────────
@pytest.fixture(params=["postgresql", "sqlite"])
def store_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    return shared_store(request, tmp_path)


@pytest.fixture
def task_worker(store_url: str) -> Iterator[str]:
    worker = TaskWorker(store_url)
    try:
        yield store_url
    finally:
        worker.stop()


Submit = Callable[[str], jobsched.Job]


@pytest.mark.slow
@pytest.mark.parametrize(
    ("make", "status", "attempts", "error"),
    [
        (lambda path: flaky.job(path, 2, "transient"), JobStatus.COMPLETED, 3, None),
        (
            lambda path: flaky.job(path, 2, "value"),
            JobStatus.FAILED,
            1,
            "ValueError: attempt 1 (not retried: ValueError is not in retry_on)",
        ),
        (
            lambda path: flaky.options(retry_on=["ValueError"]).job(path, 2, "value"),
            JobStatus.COMPLETED,
            3,
            None,
        ),
        (
            lambda path: asks_for_retry.job(path, 10, 0),
            JobStatus.FAILED,
            4,
            "Retry: retry requested in 0s: attempt 4",
        ),
        (lambda path: asks_for_retry.job(path, 1, 0.2), JobStatus.COMPLETED, 2, None),
    ],
)
async def test_a_worker_process_applies_the_filters_and_retry(
    task_worker: str,
    tmp_path: Path,
    make: Submit,
    status: JobStatus,
    attempts: int,
    error: str | None,
) -> None:
    async with Client(task_worker) as client:
        info = await client.wait(await client.submit(make(counter(tmp_path))), timeout=60)
    assert (info.status, info.attempts) == (status, attempts), info.last_error
    if error is not None:
        assert info.last_error == error
