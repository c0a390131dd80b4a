"""The virtual clock itself, and the pytest plugin that provides it."""

from __future__ import annotations

import asyncio
import subprocess
import sys
from datetime import datetime, timezone

import pytest

from jobsched import JobScheduler, JobStatus, RetryPolicy
from jobsched.testing import VirtualClock

pytest_plugins = ("pytester",)


async def test_timers_ring_in_order_with_the_clock_at_their_time() -> None:
    clock = VirtualClock(start=100.0)
    rang: list[tuple[str, float]] = []
    clock.call_at(105, lambda: rang.append(("b", clock.now())))
    clock.call_at(102, lambda: rang.append(("a", clock.now())))
    cancelled = clock.call_at(103, lambda: rang.append(("never", clock.now())))
    cancelled.cancel()
    clock.call_at(200, lambda: rang.append(("late", clock.now())))
    assert clock.pending == 3
    await clock.advance(10)
    assert rang == [("a", 102.0), ("b", 105.0)]
    assert clock.now() == 110.0
    assert clock.next_timer() == 200
    assert "pending=1" in repr(clock)


async def test_work_a_timer_sets_off_runs_before_the_next_timer() -> None:
    clock = VirtualClock()
    log: list[str] = []

    async def chain() -> None:
        log.append("task ran")
        await asyncio.sleep(0)
        log.append("task continued")

    tasks: list[asyncio.Future[None]] = []

    def first() -> None:
        log.append("timer 1")
        tasks.append(asyncio.ensure_future(chain()))

    clock.call_at(1, first)
    clock.call_at(2, lambda: log.append("timer 2"))
    await clock.advance(2)
    assert log == ["timer 1", "task ran", "task continued", "timer 2"]


async def test_sleep_and_jump() -> None:
    clock = VirtualClock()
    woke: list[float] = []

    async def sleeper(seconds: float) -> None:
        await clock.sleep(seconds)
        woke.append(clock.now())

    tasks = [asyncio.ensure_future(sleeper(s)) for s in (3, 1, 2)]
    await clock.advance(0)
    await clock.jump(10)  # a pause: every sleeper wakes late, at 10
    await asyncio.gather(*tasks)
    assert woke == [10.0, 10.0, 10.0]


async def test_wall_time_follows_monotonic_time_and_can_be_stepped() -> None:
    clock = VirtualClock(wall=datetime(2026, 3, 8, tzinfo=timezone.utc))
    assert clock.datetime().isoformat() == "2026-03-08T00:00:00+00:00"
    await clock.advance(90)
    assert clock.time() == datetime(2026, 3, 8, 0, 1, 30, tzinfo=timezone.utc).timestamp()
    clock.set_wall(0.0)
    assert (clock.time(), clock.now()) == (0.0, 90.0)


async def test_bad_use_is_refused() -> None:
    clock = VirtualClock(start=5.0)
    with pytest.raises(ValueError, match="cannot go back"):
        await clock.advance_to(1.0)
    with pytest.raises(ValueError, match="seconds >= 0"):
        await clock.advance(-1)
    with pytest.raises(ValueError, match="seconds >= 0"):
        await clock.jump(-1)
    with pytest.raises(ValueError, match="aware datetime"):
        VirtualClock(wall=datetime(2026, 1, 1))


async def test_settle_reports_a_task_that_never_waits() -> None:
    clock = VirtualClock()
    clock.max_settle_passes = 50

    async def spin() -> None:
        while True:
            await asyncio.sleep(0)

    task = asyncio.ensure_future(spin())
    with pytest.raises(RuntimeError, match="did not settle after 50 passes"):
        await clock.settle()
    task.cancel()


async def test_backoff_delays_in_microseconds(virtual_clock: VirtualClock) -> None:
    attempts: list[float] = []

    async def flaky() -> str:
        attempts.append(virtual_clock.now())
        if len(attempts) < 4:
            raise ConnectionError("down")
        return "up"

    scheduler = JobScheduler(clock=virtual_clock)
    retry = RetryPolicy(max_retries=5, base_delay=60, max_delay=3600, jitter=False)
    job_id = scheduler.submit(flaky, retry=retry, delay=30)
    async with scheduler:
        await virtual_clock.advance(3600)
    assert attempts == [30.0, 90.0, 210.0, 450.0]  # 30 s delay, then 60, 120, 240 backoff
    assert scheduler.get(job_id).status is JobStatus.COMPLETED


def test_the_pytest_plugin_provides_fixtures(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(
        """
        from jobsched.testing import VirtualClock

        async def test_uses_them(virtual_clock, virtual_scheduler):
            assert isinstance(virtual_clock, VirtualClock)
            scheduler = virtual_scheduler(num_workers=1)
            ran = []

            async def job():
                ran.append(virtual_clock.now())

            scheduler.submit(job, delay=3600)
            async with scheduler:
                await virtual_clock.advance(3600)
            assert ran == [3600.0]
        """
    )
    result = pytester.runpytest(
        "-p",
        "asyncio",
        "-o",
        "asyncio_mode=auto",
        "-o",
        "asyncio_default_fixture_loop_scope=function",
    )
    result.assert_outcomes(passed=1)


def test_the_fixtures_load_from_jobsched_testing_with_autoload_off(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The documented fallback: `pytest_plugins = ["jobsched.testing"]` in a conftest.
    monkeypatch.setenv("PYTEST_DISABLE_PLUGIN_AUTOLOAD", "1")
    pytester.makeconftest('pytest_plugins = ["jobsched.testing"]')
    pytester.makepyfile(
        """
        from jobsched import JobScheduler
        from jobsched.testing import VirtualClock

        def test_uses_them(virtual_clock, virtual_scheduler):
            assert isinstance(virtual_clock, VirtualClock)
            assert isinstance(virtual_scheduler(num_workers=1), JobScheduler)
        """
    )
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider")
    result.assert_outcomes(passed=1)


def test_jobsched_testing_imports_without_pytest() -> None:
    # A finder that refuses pytest stands in for an environment without it.
    code = (
        "import sys\n"
        "class NoPytest:\n"
        "    def find_spec(self, name, path=None, target=None):\n"
        "        if name == 'pytest' or name.startswith(('pytest.', '_pytest')):\n"
        "            raise ImportError('pytest is blocked in this test')\n"
        "sys.meta_path.insert(0, NoPytest())\n"
        "from jobsched.testing import VirtualClock\n"
        "import asyncio\n"
        "clock = VirtualClock()\n"
        "asyncio.run(clock.advance(5))\n"
        "assert clock.now() == 5.0\n"
        "assert not any(m == 'pytest' or m.startswith('_pytest') for m in sys.modules)\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False)
    assert proc.returncode == 0, proc.stderr


async def test_timer_times_lists_the_live_timers_earliest_first() -> None:
    clock = VirtualClock(start=10.0)
    clock.call_at(15, lambda: None)
    clock.call_at(12, lambda: None).cancel()
    clock.call_at(11, lambda: None)
    assert clock.timer_times() == [11.0, 15.0]
    await clock.advance(2)
    assert clock.timer_times() == [15.0]


async def test_jump_nowait_rings_the_overdue_timers_before_any_task_runs() -> None:
    clock = VirtualClock()
    log: list[str] = []

    async def reacts() -> None:
        log.append("task")

    def ring(name: str) -> None:
        log.append(f"{name}@{clock.now()}")
        asyncio.get_running_loop().create_task(reacts())

    clock.call_at(1, lambda: ring("a"))
    clock.call_at(2, lambda: ring("b"))
    clock.call_at(9, lambda: ring("later"))
    assert clock.jump_nowait(3) == 2
    assert log == ["a@3.0", "b@3.0"], "both rang late, at the new time, and no task ran yet"
    await clock.settle()
    assert log == ["a@3.0", "b@3.0", "task", "task"]
    assert clock.timer_times() == [9.0]
    with pytest.raises(ValueError, match="seconds >= 0"):
        clock.jump_nowait(-1)
