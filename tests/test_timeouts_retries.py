"""Per-job timeouts, retries with capped exponential backoff and full jitter, NonRetryableError.

Time is a `VirtualClock`: the tests move it by hand and check the scheduler
waits exactly as long as the policy says, with no wall-clock thresholds.
"""

from __future__ import annotations

import asyncio
import random
import threading

import attrs
import pytest

from jobsched import AsyncJob, JobStatus, NonRetryableError, RetryPolicy
from jobsched.testing import VirtualClock
from kernel_support import (
    NO_RETRY,
    BlockedThreadJob,
    Gate,
    Noop,
    Scripted,
    builtin_plugins,
    make_scheduler,
    settle,
    until,
)

# A hang is a failure, not a stuck suite.
pytestmark = pytest.mark.timeout(30)

S = JobStatus


# ── RetryPolicy.delay math ─────────────────────────────────────────────
def test_retry_policy_defaults_are_the_references() -> None:
    policy = RetryPolicy()
    assert (policy.max_retries, policy.base_delay, policy.max_delay, policy.jitter) == (
        3,
        1.0,
        60.0,
        True,
    )


@pytest.mark.parametrize(
    ("base", "cap", "expected"),
    [
        (1.0, 60.0, [1.0, 2.0, 4.0, 8.0, 16.0, 32.0, 60.0, 60.0]),
        (0.5, 3.0, [0.5, 1.0, 2.0, 3.0, 3.0, 3.0, 3.0, 3.0]),
        (2.0, 1.0, [1.0] * 8),  # a cap below the base caps the very first retry
        (0.0, 10.0, [0.0] * 8),
    ],
)
def test_delay_without_jitter_is_the_capped_exponential(
    base: float, cap: float, expected: list[float]
) -> None:
    policy = RetryPolicy(max_retries=8, base_delay=base, max_delay=cap, jitter=False)
    rng = random.Random(0)
    state = rng.getstate()
    assert [policy.delay(a, rng) for a in range(1, 9)] == expected
    assert rng.getstate() == state, "no jitter, no random draws"


@pytest.mark.parametrize("seed", [0, 1, 7, 2024])
def test_delay_with_full_jitter_is_uniform_up_to_the_cap(seed: int) -> None:
    policy = RetryPolicy(max_retries=10, base_delay=0.25, max_delay=5.0, jitter=True)
    rng, mirror = random.Random(seed), random.Random(seed)
    for attempt in range(1, 11):
        cap = min(5.0, 0.25 * 2 ** (attempt - 1))
        delay = policy.delay(attempt, rng)
        assert delay == mirror.uniform(0, cap)
        assert 0.0 <= delay <= cap


@pytest.mark.parametrize("field", ["max_retries", "base_delay", "max_delay"])
def test_negative_retry_settings_are_refused_by_name(field: str) -> None:
    with pytest.raises(ValueError, match=field):
        RetryPolicy(**{field: -1})


def test_retry_policy_is_a_frozen_value() -> None:
    policy = RetryPolicy(max_retries=1)
    with pytest.raises(attrs.exceptions.FrozenInstanceError):
        policy.max_retries = 5  # type: ignore[misc]
    assert policy == RetryPolicy(max_retries=1)
    assert hash(policy) == hash(RetryPolicy(max_retries=1))


# ── the scheduler waits the backoff ────────────────────────────────────
async def test_scheduler_waits_each_jittered_backoff_exactly() -> None:
    clock = VirtualClock()
    policy = RetryPolicy(max_retries=3, base_delay=1.0, max_delay=60.0, jitter=True)
    scheduler, recorder = make_scheduler(clock=clock, rng=random.Random(42))
    mirror = random.Random(42)
    job = Scripted([ConnectionError("reset")] * 4, "flaky", retry=policy)
    async with scheduler:
        scheduler.submit(job)
        await settle()
        for attempt in (1, 2, 3):
            assert job.status is S.RETRY_WAIT
            assert job.attempts == attempt
            backoff = mirror.uniform(0, min(60.0, 2.0 ** (attempt - 1)))
            assert job.run_at == clock.now() + backoff
            assert clock.timer_times() == [job.run_at]
            await clock.advance_to(job.run_at - 1e-6)
            await settle()
            assert job.status is S.RETRY_WAIT and job.attempts == attempt, "retried too early"
            await clock.advance_to(job.run_at)
            await settle()
        await scheduler.join()
    assert job.status is S.FAILED
    assert job.attempts == 4
    assert job.last_error == "ConnectionError: reset"
    assert recorder.path(job.job_id) == [S.PENDING] + [S.RUNNING, S.RETRY_WAIT] * 3 + [
        S.RUNNING,
        S.FAILED,
    ]


async def test_backoff_is_capped_by_max_delay() -> None:
    clock = VirtualClock()
    policy = RetryPolicy(max_retries=4, base_delay=1.0, max_delay=3.0, jitter=False)
    scheduler, _ = make_scheduler(clock=clock)
    job = Scripted([OSError("x")] * 4 + ["ok"], retry=policy)
    waits = []
    async with scheduler:
        scheduler.submit(job)
        await settle()
        while job.status is S.RETRY_WAIT:
            waits.append(job.run_at - clock.now())
            await clock.advance_to(job.run_at)
            await settle()
        await scheduler.join()
    assert waits == [1.0, 2.0, 3.0, 3.0]
    assert job.status is S.COMPLETED and job.result == 5


async def test_flaky_job_succeeds_within_its_retries() -> None:
    clock = VirtualClock()
    scheduler, recorder = make_scheduler(clock=clock)
    fast = RetryPolicy(max_retries=3, base_delay=0.5, jitter=False)
    job = Scripted([ConnectionError("1"), ConnectionError("2"), "ok"], retry=fast)
    async with scheduler:
        scheduler.submit(job)
        await settle()
        await clock.advance(0.5)
        await settle()
        await clock.advance(1.0)
        await scheduler.join()
    assert job.status is S.COMPLETED
    assert job.result == 3 and job.attempts == 3
    assert job.last_error == "ConnectionError: 2", "the last failure stays visible"
    assert recorder.problems == []


async def test_zero_backoff_retries_at_once() -> None:
    scheduler, _ = make_scheduler(clock=VirtualClock())
    job = Scripted([RuntimeError("a"), RuntimeError("b"), "ok"], retry=RetryPolicy(base_delay=0))
    async with scheduler:
        scheduler.submit(job)
        await scheduler.join()
    assert job.status is S.COMPLETED and job.attempts == 3


async def test_retries_wait_in_the_delayed_heap_without_holding_a_worker() -> None:
    clock = VirtualClock()
    scheduler, recorder = make_scheduler("fifo", clock=clock, num_workers=1)
    flaky = Scripted([RuntimeError("down"), "ok"], "flaky", retry=RetryPolicy(jitter=False))
    other = Noop("other")
    async with scheduler:
        scheduler.submit(flaky)
        scheduler.submit(other)
        await settle()
        assert other.status is S.COMPLETED, "the only worker is free during the backoff"
        await clock.advance(1.0)
        await scheduler.join()
    assert recorder.started() == [flaky.job_id, other.job_id, flaky.job_id]


async def test_non_retryable_error_fails_at_once() -> None:
    class Fatal(NonRetryableError):
        pass

    scheduler, recorder = make_scheduler(clock=VirtualClock())
    plain = Scripted([NonRetryableError("bad input")], retry=RetryPolicy(max_retries=5))
    sub = Scripted([Fatal("schema")], retry=RetryPolicy(max_retries=5))
    async with scheduler:
        scheduler.submit(plain)
        scheduler.submit(sub)
        await scheduler.join()
    assert plain.status is S.FAILED and plain.attempts == 1
    assert plain.last_error == "NonRetryableError: bad input"
    assert sub.status is S.FAILED and sub.attempts == 1
    assert recorder.path(plain.job_id) == [S.PENDING, S.RUNNING, S.FAILED]


async def test_non_retryable_error_after_some_retries() -> None:
    clock = VirtualClock()
    scheduler, _ = make_scheduler(clock=clock)
    job = Scripted([OSError("x"), NonRetryableError("stop")], retry=RetryPolicy(jitter=False))
    async with scheduler:
        scheduler.submit(job)
        await settle()
        await clock.advance(1.0)
        await scheduler.join()
    assert job.status is S.FAILED and job.attempts == 2


async def test_retry_policies_by_name() -> None:
    plugins = builtin_plugins()
    fixed = plugins.resolve("retry_policies", "fixed")(max_retries=2, seconds=5.0)
    none = plugins.resolve("retry_policies", "none")()
    assert plugins.resolve("retry_policies", "exponential") is RetryPolicy
    assert none.max_retries == 0
    clock = VirtualClock()
    scheduler, _ = make_scheduler(clock=clock)
    steady = Scripted([OSError("x"), OSError("y"), "ok"], retry=fixed)
    once = Scripted([OSError("z"), "ok"], retry=none)
    async with scheduler:
        scheduler.submit(steady)
        scheduler.submit(once)
        await settle()
        for _ in range(2):
            assert steady.run_at - clock.now() == 5.0
            await clock.advance(5.0)
            await settle()
        await scheduler.join()
    assert steady.status is S.COMPLETED and steady.attempts == 3
    assert once.status is S.FAILED and once.attempts == 1


# ── timeouts ───────────────────────────────────────────────────────────
async def test_timeout_with_no_retries_left_is_timed_out() -> None:
    clock = VirtualClock()
    scheduler, recorder = make_scheduler(clock=clock)
    job = Gate("slow", timeout=2.0)
    async with scheduler:
        scheduler.submit(job)
        await settle()
        assert clock.timer_times() == [clock.now() + 2.0]  # the watchdog
        await clock.advance(1.5)
        await settle()
        assert job.status is S.RUNNING
        await clock.advance(0.5)
        await settle()
        assert job.status is S.TIMED_OUT
        await scheduler.join()
    assert job.saw_cancel == 1, "the attempt is cancelled at its await"
    assert job.last_error == "timed out after 2.0s"
    assert job.attempts == 1
    assert recorder.path(job.job_id) == [S.PENDING, S.RUNNING, S.TIMED_OUT]


async def test_timed_out_job_with_retries_left_goes_to_retry_wait() -> None:
    clock = VirtualClock()
    scheduler, recorder = make_scheduler(clock=clock)
    job = Scripted(["hang", "ok"], timeout=1.0, retry=RetryPolicy(max_retries=1, jitter=False))
    async with scheduler:
        scheduler.submit(job)
        await settle()
        await clock.advance(1.0)
        await settle()
        assert job.status is S.RETRY_WAIT
        assert job.last_error == "timed out after 1.0s"
        await clock.advance(1.0)  # the backoff
        await scheduler.join()
    assert job.status is S.COMPLETED and job.result == 2
    assert recorder.path(job.job_id) == [
        S.PENDING,
        S.RUNNING,
        S.RETRY_WAIT,
        S.RUNNING,
        S.COMPLETED,
    ]


async def test_last_attempt_timing_out_is_timed_out_and_an_earlier_timeout_is_not() -> None:
    clock = VirtualClock()
    scheduler, _ = make_scheduler(clock=clock)
    policy = RetryPolicy(max_retries=1, base_delay=1.0, jitter=False)
    timed_out = Scripted(["hang", "hang"], "twice", timeout=1.0, retry=policy)
    failed = Scripted(["hang", RuntimeError("then broke")], "mixed", timeout=1.0, retry=policy)
    async with scheduler:
        scheduler.submit(timed_out)
        scheduler.submit(failed)
        await settle()
        await clock.advance(1.0)  # first attempts time out
        await settle()
        await clock.advance(1.0)  # backoff over, second attempts start
        await settle()
        await clock.advance(1.0)  # the second "hang" times out
        await scheduler.join()
    assert timed_out.status is S.TIMED_OUT and timed_out.attempts == 2
    assert failed.status is S.FAILED and failed.attempts == 2
    assert failed.last_error == "RuntimeError: then broke"


async def test_job_raising_timeout_error_itself_is_an_ordinary_failure() -> None:
    clock = VirtualClock()
    scheduler, recorder = make_scheduler(clock=clock)
    raises = Scripted([TimeoutError("upstream API timed out")], timeout=5.0, retry=NO_RETRY)
    retried = Scripted([TimeoutError("once"), "ok"], timeout=5.0, retry=RetryPolicy(base_delay=0))

    class OwnWaitFor(AsyncJob):
        async def run(self) -> None:
            never = asyncio.get_running_loop().create_future()
            await asyncio.wait_for(never, timeout=0)  # the job's own timeout expires

    own = OwnWaitFor("own wait_for", timeout=5.0, retry=NO_RETRY)
    async with scheduler:
        for job in (raises, retried, own):
            scheduler.submit(job)
        await scheduler.join()
    assert raises.status is S.FAILED
    assert raises.last_error == "TimeoutError: upstream API timed out"
    assert own.status is S.FAILED
    assert own.last_error is not None and own.last_error.startswith("TimeoutError")
    assert retried.status is S.COMPLETED and retried.attempts == 2, "retried like any failure"
    assert S.TIMED_OUT not in {new for _, _, new in recorder.events}


async def test_a_job_that_swallows_the_cancel_still_times_out() -> None:
    clock = VirtualClock()
    scheduler, _ = make_scheduler(clock=clock)

    class Stubborn(AsyncJob):
        async def run(self) -> str:
            try:
                await asyncio.get_running_loop().create_future()
            except asyncio.CancelledError:
                return "pretend all is well"
            return "unreachable"

    job = Stubborn("stubborn", timeout=1.0, retry=NO_RETRY)
    after = Noop("after")
    async with scheduler:
        scheduler.submit(job)
        scheduler.submit(after)
        await settle()
        await clock.advance(1.0)
        await scheduler.join()
    assert job.status is S.TIMED_OUT
    assert job.result is None
    assert after.status is S.COMPLETED, "the worker survived and carried on"


async def test_one_watchdog_timer_serves_every_running_job() -> None:
    clock = VirtualClock()
    t0 = clock.now()
    scheduler, _ = make_scheduler(clock=clock, num_workers=3)
    jobs = {t: Gate(f"t{t}", timeout=float(t)) for t in (3, 1, 2)}
    async with scheduler:
        for job in jobs.values():
            scheduler.submit(job)
        await settle()
        assert clock.timer_times() == [t0 + 1.0], "one timer, at the earliest deadline"
        for t in (1, 2, 3):
            await clock.advance(1.0)
            await settle()
            assert [j.status for k, j in sorted(jobs.items()) if k <= t] == [S.TIMED_OUT] * t
            assert all(j.status is S.RUNNING for k, j in jobs.items() if k > t)
        await scheduler.join()
    assert clock.timer_times() == []


async def test_a_job_finishing_in_time_is_not_timed_out_later() -> None:
    clock = VirtualClock()
    scheduler, _ = make_scheduler(clock=clock, num_workers=1)
    quick = Gate("quick", timeout=2.0)
    next_job = Gate("next", timeout=2.0)
    async with scheduler:
        scheduler.submit(quick)
        scheduler.submit(next_job)
        await settle()
        await clock.advance(1.0)
        quick.open("in time")
        await settle()
        assert next_job.status is S.RUNNING
        await clock.advance(
            1.0
        )  # the first job's deadline: the stale watchdog must not fire on "next"
        await settle()
        assert quick.status is S.COMPLETED and quick.result == "in time"
        assert next_job.status is S.RUNNING
        await clock.advance(1.0)  # next's own deadline
        await scheduler.join()
    assert next_job.status is S.TIMED_OUT


async def test_thread_job_timeout_abandons_the_thread() -> None:
    clock = VirtualClock()
    scheduler, recorder = make_scheduler(clock=clock, num_workers=2)
    release = threading.Event()
    job = BlockedThreadJob("stuck", release, timeout=1.0, retry=NO_RETRY)
    after = Noop("after")
    try:
        async with scheduler:
            scheduler.submit(job)
            await until(job.entered.is_set, "the thread job to start")
            await clock.advance(1.0)
            await until(lambda: job.status.is_terminal, "the timeout to be recorded")
            assert job.status is S.TIMED_OUT
            assert not job.returned.is_set(), "recorded while the thread still runs"
            scheduler.submit(after)
            await scheduler.join()
            assert after.status is S.COMPLETED
    finally:
        release.set()
    await until(job.returned.is_set, "the abandoned thread to return")
    assert job.status is S.TIMED_OUT and job.result is None
    assert recorder.path(job.job_id) == [S.PENDING, S.RUNNING, S.TIMED_OUT]
