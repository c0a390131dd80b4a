"""Issue 9, kernel items: jobs that raise anything, options as the job file spells
them, keyword arguments named like options, errors no retry can fix, bounds.

Async work runs on the virtual clock; thread and process work is awaited with
`until`, whose time limit only guards against a hang.
"""

from __future__ import annotations

import asyncio
import json
import math
import random
import subprocess
import sys
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

import jobsched.kernel.workers as workers
from jobsched import (
    AsyncJob,
    BadArgumentsError,
    JobPriority,
    JobScheduler,
    JobSpecError,
    JobStatus,
    NotPicklableError,
    RetryPolicy,
    build_job,
)
from jobsched._options import MAX_DELAY, MAX_RETRIES, MAX_WORKERS
from jobsched.testing import VirtualClock
from jobsched_plugins.fixed_retry import FixedRetryPolicy
from kernel_support import until

# A hang is a failure, not a stuck suite.
pytestmark = pytest.mark.timeout(60)

S = JobStatus
MakeScheduler = Callable[..., JobScheduler]


async def ok() -> str:
    return "ok"


class Halt(BaseException):
    """Not an Exception: what a careless job might raise."""


# ── Defect 2: a job that raises CancelledError or a BaseException ──────
@pytest.mark.parametrize(
    ("raised", "error"),
    [
        (asyncio.CancelledError(), "CancelledError"),
        (asyncio.CancelledError("by hand"), "CancelledError: by hand"),
        (Halt("stop"), "Halt: stop"),
        (GeneratorExit(), "GeneratorExit"),
    ],
)
async def test_a_job_raising_a_base_exception_fails_and_the_worker_runs_the_next_job(
    virtual_clock: VirtualClock,
    virtual_scheduler: MakeScheduler,
    raised: BaseException,
    error: str,
) -> None:
    async def rude() -> None:
        raise raised

    scheduler = virtual_scheduler(num_workers=1)
    async with scheduler:
        bad = scheduler.submit(rude, timeout=5)
        nxt = scheduler.submit(ok)
        await virtual_clock.settle()
        assert scheduler.get(bad).status is S.FAILED
        assert scheduler.get(bad).last_error == error
        assert scheduler.get(bad).attempts == 1, "it asked to stop: not retried"
        assert scheduler.get(nxt).status is S.COMPLETED
        await scheduler.join()


async def test_after_a_job_raised_cancelled_error_the_next_jobs_timeout_still_fires(
    virtual_clock: VirtualClock, virtual_scheduler: MakeScheduler
) -> None:
    async def rude() -> None:
        raise asyncio.CancelledError

    async def slow() -> None:
        await virtual_clock.sleep(3600)

    scheduler = virtual_scheduler(num_workers=1)
    async with scheduler:
        scheduler.submit(rude)
        stuck = scheduler.submit(slow, timeout=5, retry="none")
        await virtual_clock.advance(5)
        assert scheduler.get(stuck).status is S.TIMED_OUT
        assert scheduler.get(stuck).last_error == "timed out after 5s"


def _start_counting_worker(coro: Any, name: str) -> asyncio.Task[None]:
    return workers._CancelCountingTask(coro, name=name)


@pytest.fixture(params=["native", "python-3.10"])
def worker_tasks(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Run a test with 3.11's Task.cancelling(), and with the 3.10 stand-in."""
    if request.param == "python-3.10":
        monkeypatch.setattr(workers, "_start_worker", _start_counting_worker)
    return str(request.param)


async def test_our_own_cancels_still_cancel_and_time_out(
    worker_tasks: str, virtual_clock: VirtualClock, virtual_scheduler: MakeScheduler
) -> None:
    async def rude() -> None:
        raise asyncio.CancelledError

    async def slow() -> None:
        await virtual_clock.sleep(3600)

    scheduler = virtual_scheduler(num_workers=1)
    async with scheduler:
        own = scheduler.submit(rude)
        cancelled = scheduler.submit(slow, timeout=60)
        timed_out = scheduler.submit(slow, timeout=5, retry="none")
        after = scheduler.submit(ok)
        await virtual_clock.advance(1)
        assert scheduler.get(own).status is S.FAILED
        assert scheduler.cancel(cancelled)
        await virtual_clock.advance(5)
        assert scheduler.get(cancelled).status is S.CANCELLED
        assert scheduler.get(timed_out).status is S.TIMED_OUT
        assert scheduler.get(after).status is S.COMPLETED
        (worker,) = [t for t in asyncio.all_tasks() if t.get_name() == "jobsched-worker-0"]
        assert worker.cancelling() == 0, "every cancel request of ours was taken back"  # type: ignore[attr-defined]


async def test_a_worker_cancelled_from_outside_still_ends_as_before(
    worker_tasks: str, virtual_clock: VirtualClock, virtual_scheduler: MakeScheduler
) -> None:
    async def slow() -> None:
        await virtual_clock.sleep(3600)

    scheduler = virtual_scheduler(num_workers=1)
    async with scheduler:
        job_id = scheduler.submit(slow)
        await virtual_clock.settle()
        (worker,) = [t for t in asyncio.all_tasks() if t.get_name() == "jobsched-worker-0"]
        worker.cancel()  # what asyncio.run does to tasks left running at exit
        await virtual_clock.settle()
        assert worker.cancelled()
        assert scheduler.get(job_id).status is S.CANCELLED
        assert scheduler.get(job_id).last_error == "scheduler shut down"


_HOST = """
import asyncio, json, sys
from jobsched import JobScheduler


def thread_exit():
    raise SystemExit(3)


def thread_interrupt():
    raise KeyboardInterrupt


def process_exit():
    raise SystemExit(4)


def process_interrupt():
    raise KeyboardInterrupt("in a child")


async def async_exit():
    raise SystemExit(5)


async def async_interrupt():
    raise KeyboardInterrupt


def ok():
    return "ok"


async def main():
    async with JobScheduler(num_workers=1) as scheduler:
        ids = [scheduler.submit(fn) for fn in (async_exit, async_interrupt, thread_exit,
                                               thread_interrupt)]
        ids += [scheduler.submit(fn, model="process") for fn in (process_exit,
                                                                 process_interrupt)]
        ids.append(scheduler.submit(ok))
        await scheduler.join()
    jobs = [scheduler.get(i) for i in ids]
    print(json.dumps([[j.name, j.status.value, j.attempts, j.last_error] for j in jobs]))


if __name__ == "__main__":
    asyncio.run(main())
    print("host still running")
"""


def test_system_exit_and_keyboard_interrupt_from_jobs_do_not_end_the_host(
    tmp_path: Path,
) -> None:
    script = tmp_path / "host.py"
    script.write_text(_HOST)
    proc = subprocess.run(
        [sys.executable, str(script)],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=tmp_path,
    )
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert lines[-1] == "host still running"
    assert json.loads(lines[-2]) == [
        ["async_exit", "failed", 1, "SystemExit: 5"],
        ["async_interrupt", "failed", 1, "KeyboardInterrupt"],
        ["thread_exit", "failed", 1, "SystemExit: 3"],
        ["thread_interrupt", "failed", 1, "KeyboardInterrupt"],
        ["process_exit", "failed", 1, "SystemExit: 4"],
        ["process_interrupt", "failed", 1, "KeyboardInterrupt: in a child"],
        ["ok", "completed", 1, None],
    ]


# ── Defect 3: the job file's spellings in the Python API ──────────────
async def failing() -> None:
    raise ValueError("no")


async def test_retry_none_fails_once_instead_of_crashing_the_worker(
    virtual_clock: VirtualClock, virtual_scheduler: MakeScheduler
) -> None:
    scheduler = virtual_scheduler(num_workers=1)
    async with scheduler:
        bad = scheduler.submit(failing, retry="none")
        nxt = scheduler.submit(ok)
        await virtual_clock.settle()
        assert scheduler.get(bad).status is S.FAILED
        assert scheduler.get(bad).attempts == 1
        assert scheduler.get(bad).last_error == "ValueError: no"
        assert scheduler.get(nxt).status is S.COMPLETED


async def test_a_retry_table_is_the_job_files(
    virtual_clock: VirtualClock, virtual_scheduler: MakeScheduler
) -> None:
    scheduler = virtual_scheduler()
    async with scheduler:
        job_id = scheduler.submit(
            failing, retry={"policy": "fixed", "max_retries": 2, "seconds": 10}
        )
        job = scheduler.get(job_id)
        assert job.retry == FixedRetryPolicy(max_retries=2, seconds=10)
        await virtual_clock.advance(9)
        assert (job.status, job.attempts) == (S.RETRY_WAIT, 1)
        await virtual_clock.advance(11)
        assert (job.status, job.attempts) == (S.FAILED, 3)
        # A table without a policy configures the default one, as in a job file.
        other = scheduler.get(scheduler.submit(failing, retry={"max_retries": 0}))
        assert other.retry == RetryPolicy(max_retries=0)


async def test_priority_names_and_timeout_false_are_accepted(
    virtual_scheduler: MakeScheduler,
) -> None:
    scheduler = virtual_scheduler()
    low = scheduler.get(scheduler.submit(ok, priority="low", timeout=False))
    high = scheduler.get(scheduler.submit(ok, priority="HIGH", timeout=None))
    three = scheduler.get(scheduler.submit(ok, priority=3, timeout=2))
    assert (low.priority, low.timeout) == (JobPriority.LOW, None)
    assert (high.priority, high.timeout) == (JobPriority.HIGH, None)
    assert (three.priority, three.timeout) == (JobPriority.CRITICAL, 2)


class Ping(AsyncJob):
    async def run(self) -> str:
        return "pong"


async def test_a_job_object_built_with_a_policy_name_gets_the_policy_at_submit(
    virtual_scheduler: MakeScheduler,
) -> None:
    scheduler = virtual_scheduler()
    job = Ping("ping", retry="fixed", priority="critical")
    scheduler.submit(job)
    assert job.retry == FixedRetryPolicy()
    assert job.priority is JobPriority.CRITICAL


@pytest.mark.parametrize(
    ("options", "error", "message"),
    [
        ({"retry": "nnone"}, ValueError, "unknown retry policy 'nnone'; did you mean 'none'"),
        ({"retry": "linear"}, ValueError, "(registered: exponential, fixed, none)"),
        ({"retry": {"policy": "fixed", "second": 1}}, ValueError, "did you mean 'seconds'"),
        ({"retry": 3}, TypeError, 'a registered policy name such as "none"'),
        ({"retry": None}, TypeError, "retry must be a retry policy"),
        ({"priority": "urgent"}, ValueError, "one of low, medium, high, critical (or 0-3)"),
        ({"priority": 7}, ValueError, "one of low, medium, high, critical (or 0-3)"),
        ({"priority": True}, ValueError, "one of low, medium, high, critical"),
        ({"timeout": "5"}, ValueError, "positive number of seconds, got string '5'"),
        ({"timeout": True}, ValueError, "(None or False: no timeout)"),
        ({"timeout": -1}, ValueError, "positive number of seconds"),
        ({"timeout": math.nan}, ValueError, "positive number of seconds"),
    ],
)
def test_wrong_spellings_are_refused_at_submit_with_what_is_valid(
    virtual_scheduler: MakeScheduler,
    options: dict[str, Any],
    error: type[Exception],
    message: str,
) -> None:
    scheduler = virtual_scheduler()
    with pytest.raises(error) as info:
        scheduler.submit(failing, **options)
    assert message in str(info.value)
    assert scheduler.jobs() == [], "nothing was queued"


def test_the_job_file_path_uses_the_same_conversions() -> None:
    job = build_job(
        "sleep", {"name": "s", "seconds": 0}, priority="LOW", timeout=False, retry="none"
    )
    assert (job.priority, job.timeout, job.retry.max_retries) == (JobPriority.LOW, None, 0)
    with pytest.raises(JobSpecError, match="timeout must be a positive number of seconds"):
        build_job("sleep", {"name": "s", "seconds": 0}, timeout=True)


# ── Defect 4: keyword arguments named like an option ──────────────────
def connect(host: str, timeout: float = 10) -> tuple[str, float]:
    return host, timeout


def fetch(url: str, *, key: str | None = None) -> str:
    return f"{url}#{key}"


def anything(*args: Any, **kwargs: Any) -> dict[str, Any]:
    return kwargs


@pytest.mark.parametrize(
    ("fn", "args", "kwargs", "parameter"),
    [
        (connect, ("db",), {"timeout": 3}, "timeout"),
        (connect, ("db",), {}, "timeout"),
        (fetch, ("u",), {"key": "k"}, "key"),
        (asyncio.sleep, (), {"delay": 1}, "delay"),
    ],
)
def test_a_function_with_a_parameter_named_like_an_option_is_refused(
    virtual_scheduler: MakeScheduler,
    fn: Callable[..., Any],
    args: tuple[Any, ...],
    kwargs: dict[str, Any],
    parameter: str,
) -> None:
    scheduler = virtual_scheduler()
    with pytest.raises(TypeError) as info:
        scheduler.submit(fn, *args, **kwargs)
    text = str(info.value)
    assert f"parameter named {parameter!r}" in text
    assert f"kwargs={{{parameter!r}: ...}}" in text, "names the way out"
    assert scheduler.jobs() == []


async def test_submits_own_keywords_are_refused_only_when_given(
    virtual_clock: VirtualClock, virtual_scheduler: MakeScheduler
) -> None:
    # asyncio.sleep(delay, result=None): nothing given to submit is ambiguous.
    scheduler = virtual_scheduler()
    async with scheduler:
        job_id = scheduler.submit(asyncio.sleep, 0, "slept")
        await virtual_clock.settle()
    assert scheduler.get(job_id).result == "slept"


async def test_kwargs_go_to_the_function_and_options_stay_the_jobs(
    virtual_clock: VirtualClock, virtual_scheduler: MakeScheduler
) -> None:
    scheduler = virtual_scheduler()
    async with scheduler:
        job_id = scheduler.submit(connect, "db", kwargs={"timeout": 3}, timeout=5)
        keyed = scheduler.submit(fetch, "u", kwargs={"key": "k"}, key="external")
        await until(lambda: all(j.status.is_terminal for j in scheduler.jobs()), "the jobs")
    job = scheduler.get(job_id)
    assert job.timeout == 5
    assert job.result == ("db", 3)
    assert scheduler.get(keyed).result == "u#k"
    assert scheduler.lookup("external") == keyed


async def test_a_function_taking_only_var_kwargs_is_not_refused(
    virtual_scheduler: MakeScheduler,
) -> None:
    scheduler = virtual_scheduler()
    async with scheduler:
        job_id = scheduler.submit(anything, 1, timeout=5, other=2)
        await until(lambda: scheduler.get(job_id).status.is_terminal, "the thread job")
    assert scheduler.get(job_id).timeout == 5
    assert scheduler.get(job_id).result == {"other": 2}, "the option never reaches it"


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda s: s.submit(connect, "db", kwargs={"timeout": 3}, port=1), "['port']"),
        (lambda s: s.submit(connect, "db", kwargs=[("timeout", 3)]), "kwargs must be a mapping"),
        (lambda s: s.submit(Ping("p"), kwargs={}), "already a job"),
    ],
)
def test_kwargs_misuse_is_refused(
    virtual_scheduler: MakeScheduler, call: Callable[[JobScheduler], Any], message: str
) -> None:
    scheduler = virtual_scheduler()
    with pytest.raises(TypeError) as info:
        call(scheduler)
    assert message in str(info.value)


async def test_submit_threadsafe_follows_the_same_rules() -> None:
    scheduler = JobScheduler(num_workers=1)
    async with scheduler:
        with pytest.raises(TypeError, match="parameter named 'timeout'"):
            scheduler.submit_threadsafe(connect, "db", timeout=3)
        with pytest.raises(ValueError, match="did you mean 'none'"):
            scheduler.submit_threadsafe(failing, retry="nnone")
        job_id = scheduler.submit_threadsafe(connect, "db", kwargs={"timeout": 3}, timeout=5)
        await until(lambda: job_id in {j.job_id for j in scheduler.jobs()}, "the submit")
        await scheduler.join()
    assert scheduler.get(job_id).result == ("db", 3)
    assert scheduler.get(job_id).timeout == 5


# ── Weakness: errors no retry can fix fail at once ────────────────────
def test_arguments_that_cannot_bind_are_refused_at_submit(
    virtual_scheduler: MakeScheduler,
) -> None:
    scheduler = virtual_scheduler()
    with pytest.raises(TypeError, match=r"add\(\) cannot take these arguments: missing a"):
        scheduler.submit(add, 1)
    with pytest.raises(TypeError, match="cannot take these arguments"):
        scheduler.submit(connect, "db", kwargs={"port": 1})
    assert scheduler.jobs() == []


def return_a_lock() -> threading.Lock:
    return threading.Lock()


def add(a: int, b: int) -> int:
    return a + b


async def test_a_call_that_cannot_bind_fails_after_one_attempt(
    virtual_scheduler: MakeScheduler,
) -> None:
    scheduler = virtual_scheduler()
    async with scheduler:
        # max has no signature to check at submit: the call itself says it.
        job_id = scheduler.submit(max)
        job = scheduler.get(job_id)
        await until(lambda: job.status.is_terminal or job.status is S.RETRY_WAIT, "the attempt")
    assert job.status is S.FAILED
    assert job.attempts == 1
    assert job.last_error is not None
    assert job.last_error.startswith("BadArgumentsError: max expected at least 1 argument")


def test_an_error_inside_the_function_is_not_taken_for_bad_arguments() -> None:
    from jobsched import FunctionJob

    def inner_type_error() -> None:
        len(5)  # type: ignore[arg-type]

    job = FunctionJob(inner_type_error)
    with pytest.raises(TypeError) as info:
        job.run_sync()
    assert not isinstance(info.value, BadArgumentsError), "retryable, as before"


@pytest.mark.parametrize(
    ("fn", "args", "message"),
    [
        (add, (1, lambda: 2), "cannot run on the process executor: it is not picklable"),
        (return_a_lock, (), "returned a result that cannot be pickled back"),
    ],
)
async def test_pickling_errors_of_process_jobs_fail_after_one_attempt(
    virtual_scheduler: MakeScheduler,
    fn: Callable[..., Any],
    args: tuple[Any, ...],
    message: str,
) -> None:
    scheduler = virtual_scheduler()
    async with scheduler:
        job = scheduler.get(scheduler.submit(fn, *args, model="process"))
        await until(lambda: job.status.is_terminal or job.status is S.RETRY_WAIT, "the attempt", 30)
    assert job.status is S.FAILED
    assert job.attempts == 1, "default retries, none used"
    assert job.last_error is not None
    assert job.last_error.startswith("NotPicklableError: ")
    assert message in job.last_error


def test_not_picklable_and_bad_arguments_are_non_retryable() -> None:
    from jobsched import NonRetryableError

    assert issubclass(NotPicklableError, NonRetryableError)
    assert issubclass(BadArgumentsError, NonRetryableError)
    assert issubclass(BadArgumentsError, TypeError)


# ── Weakness: bounds on the Python API ────────────────────────────────
@pytest.mark.parametrize(
    ("make", "message"),
    [
        (lambda: RetryPolicy(max_retries=2.5), "max_retries must be an integer, got float 2.5"),
        (lambda: RetryPolicy(max_retries=1e9), "max_retries must be an integer"),
        (lambda: RetryPolicy(max_retries=True), "max_retries must be an integer"),
        (lambda: RetryPolicy(max_retries=MAX_RETRIES + 1), f"<= {MAX_RETRIES} (MAX_RETRIES)"),
        (lambda: RetryPolicy(base_delay=1e308), "<= 31536000 seconds (MAX_DELAY, one year)"),
        (lambda: RetryPolicy(max_delay=math.inf), "<= 31536000 seconds"),
        (lambda: RetryPolicy(base_delay=math.nan), "base_delay must be >= 0"),
        (lambda: FixedRetryPolicy(seconds=1e308), "seconds must be >= 0 and <= 31536000"),
        (lambda: FixedRetryPolicy(max_retries=2.5), "max_retries must be an integer"),
        (lambda: JobScheduler(num_workers=100_000), f"from 1 to {MAX_WORKERS} (MAX_WORKERS)"),
        (lambda: JobScheduler(num_workers=True), "num_workers must be an integer"),
        (lambda: JobScheduler(num_workers=0), "num_workers must be an integer from 1"),
    ],
)
def test_numbers_past_their_bound_are_refused_naming_it(
    make: Callable[[], Any], message: str
) -> None:
    with pytest.raises(ValueError) as info:
        make()
    assert message in str(info.value)


@pytest.mark.parametrize("delay", [1e308, math.inf, math.nan, MAX_DELAY + 1, -1, "5"])
def test_a_delay_past_a_year_or_not_a_number_is_refused(
    virtual_scheduler: MakeScheduler, delay: Any
) -> None:
    scheduler = virtual_scheduler()
    with pytest.raises(ValueError, match="delay must be"):
        scheduler.submit(ok, delay=delay)
    with pytest.raises(ValueError, match="seconds must be"):
        scheduler.submit(ok, retry={"policy": "fixed", "seconds": delay})
    assert scheduler.jobs() == []


def test_the_bounds_themselves_are_accepted(virtual_scheduler: MakeScheduler) -> None:
    assert JobScheduler(num_workers=MAX_WORKERS).num_workers == MAX_WORKERS
    assert RetryPolicy(max_retries=MAX_RETRIES, max_delay=MAX_DELAY).max_retries == MAX_RETRIES
    scheduler = virtual_scheduler()
    job = scheduler.get(scheduler.submit(ok, delay=MAX_DELAY))
    assert job.run_at == MAX_DELAY


class OddPolicy:
    """A third-party policy: the kernel checks what it can of it."""

    def __init__(self, max_retries: Any, wait: Any) -> None:
        self.max_retries = max_retries
        self.wait = wait

    def delay(self, attempt: int, rng: random.Random) -> float:
        if isinstance(self.wait, BaseException):
            raise self.wait
        return self.wait  # type: ignore[no-any-return]

    def __repr__(self) -> str:
        return "OddPolicy()"


def test_a_policy_object_with_a_bad_max_retries_is_refused() -> None:
    with pytest.raises(ValueError, match=r"OddPolicy: max_retries must be an integer"):
        Ping("p", retry=OddPolicy(2.5, 1.0))


@pytest.mark.parametrize(
    ("wait", "why"),
    [
        (math.inf, "it asked to wait infs; the most is 31536000s"),
        (RuntimeError("policy bug"), "policy bug"),
    ],
)
async def test_a_policy_asking_for_a_wait_past_the_bound_ends_the_job_not_the_worker(
    virtual_clock: VirtualClock, virtual_scheduler: MakeScheduler, wait: Any, why: str
) -> None:
    scheduler = virtual_scheduler(num_workers=1)
    async with scheduler:
        bad = scheduler.get(scheduler.submit(failing, retry=OddPolicy(3, wait)))
        nxt = scheduler.get(scheduler.submit(ok))
        await virtual_clock.settle()
    assert bad.status is S.FAILED
    assert bad.last_error == (
        f"ValueError: no (not retried: retry policy OddPolicy() failed: {why})"
    )
    assert nxt.status is S.COMPLETED
