"""The reference's fixed-rate recurring schedule on a hand-driven clock: no drift, coalescing."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from jobsched import Job, JobScheduler, JobStatus, RecurringSchedule, SchedulerStoppedError
from jobsched.testing import VirtualClock
from kernel_support import Gate, Noop, captured_logs, make_scheduler, settle

# A hang is a failure, not a stuck suite.
pytestmark = pytest.mark.timeout(30)

S = JobStatus


class Factory:
    """Builds a fresh job per fire and keeps them all."""

    def __init__(self, make: Callable[[int], Job] | None = None) -> None:
        self.jobs: list[Job] = []
        # No timeout: no watchdog timer, so clock.timer_times() shows only the schedule.
        self._make = make or (lambda i: Noop(f"tick-{i}", timeout=None))

    def __call__(self) -> Job:
        job = self._make(len(self.jobs))
        self.jobs.append(job)
        return job


# ── RecurringSchedule on its own ──────────────────────────────────────
def test_advance_is_fixed_rate_and_coalesces() -> None:
    sched = RecurringSchedule(Factory(), 10.0, first_run=100.0)
    assert sched.advance(100.0) == 0
    assert sched.next_run == 110.0
    assert sched.advance(113.0) == 0, "3 s late: no fire missed"
    assert sched.next_run == 120.0, "from the scheduled time, not from now: no drift"
    assert sched.advance(155.0) == 3, "fires due at 120, 130, 140, 150: one fire, three missed"
    assert sched.next_run == 160.0
    assert sched.advance(160.0) == 0
    assert sched.next_run == 170.0


@pytest.mark.parametrize("interval", [0.0, -1.0])
def test_interval_must_be_positive(interval: float) -> None:
    with pytest.raises(ValueError, match="interval"):
        RecurringSchedule(Factory(), interval, first_run=0.0)
    with pytest.raises(ValueError, match="interval"):
        JobScheduler().schedule_recurring(Factory(), interval)


def test_bad_schedule_arguments() -> None:
    scheduler, _ = make_scheduler()
    with pytest.raises(ValueError, match="start_in"):
        scheduler.schedule_recurring(Factory(), 1.0, start_in=-1.0)
    with pytest.raises(TypeError, match="factory"):
        scheduler.schedule_recurring("not callable", 1.0)  # type: ignore[arg-type]
    assert scheduler.recurring() == []


# ── through the scheduler, on a fake clock ────────────────────────────
async def test_fires_at_a_fixed_rate_without_drift() -> None:
    clock = VirtualClock()
    t0 = clock.now()
    scheduler, _ = make_scheduler(clock=clock)
    factory = Factory()
    sched_id = scheduler.schedule_recurring(factory, 10.0, start_in=5.0)
    async with scheduler:
        await settle()
        assert factory.jobs == []
        await clock.advance(5.0)  # first fire at t0 + 5
        await settle()
        assert len(factory.jobs) == 1
        await clock.jump(13.0)  # woke 3 s late for the fire due at t0 + 15
        await settle()
        assert len(factory.jobs) == 2
        (sched,) = scheduler.recurring()
        assert sched.next_run == t0 + 25.0, "the lateness does not shift later fires"
        await clock.advance(7.0)  # exactly t0 + 25
        await settle()
        assert len(factory.jobs) == 3
        assert [j.submitted_at for j in factory.jobs] == [t0 + 5.0, t0 + 18.0, t0 + 25.0]
        assert scheduler.cancel_recurring(sched_id)
        await scheduler.join()
    assert all(j.status is S.COMPLETED for j in factory.jobs)


async def test_missed_fires_are_coalesced_into_one() -> None:
    clock = VirtualClock()
    t0 = clock.now()
    scheduler, _ = make_scheduler(clock=clock)
    factory = Factory()
    scheduler.schedule_recurring(factory, 1.0)
    async with scheduler:
        await clock.advance(0.0)  # the first fire, due at start
        await settle()
        assert len(factory.jobs) == 1
        await clock.jump(10.5)  # the loop was busy for ten intervals
        await settle()
        assert len(factory.jobs) == 2, "one fire for the whole gap, not a burst of ten"
        (sched,) = scheduler.recurring()
        assert sched.next_run == t0 + 11.0
        assert sched.fired == 2 and sched.skipped == 0
        await clock.advance(0.5)
        await settle()
        assert len(factory.jobs) == 3
        scheduler.cancel_recurring(sched.schedule_id)
        await scheduler.join()


async def test_overlap_guard_skips_fires_while_the_previous_job_runs() -> None:
    clock = VirtualClock()
    scheduler, _ = make_scheduler(clock=clock, num_workers=4)
    factory = Factory(lambda i: Gate(f"gate-{i}"))
    sched_id = scheduler.schedule_recurring(factory, 1.0)
    async with scheduler:
        await clock.advance(0.0)
        await settle()
        first = factory.jobs[0]
        assert first.status is S.RUNNING
        for _ in range(3):
            await clock.advance(1.0)
            await settle()
        assert factory.jobs == [first], "no overlap: fires skipped while it runs"
        (sched,) = scheduler.recurring()
        assert (sched.fired, sched.skipped) == (1, 3)
        first.open()
        await settle()
        await clock.advance(1.0)
        await settle()
        assert len(factory.jobs) == 2 and factory.jobs[1].status is S.RUNNING
        assert scheduler.cancel_recurring(sched_id)
        factory.jobs[1].open()
        await scheduler.join()


async def test_allow_overlap_fires_while_the_previous_job_runs() -> None:
    clock = VirtualClock()
    scheduler, _ = make_scheduler(clock=clock, num_workers=4)
    factory = Factory(lambda i: Gate(f"gate-{i}"))
    sched_id = scheduler.schedule_recurring(factory, 1.0, allow_overlap=True)
    async with scheduler:
        await clock.advance(0.0)
        await settle()
        for _ in range(2):
            await clock.advance(1.0)
            await settle()
        assert len(factory.jobs) == 3
        assert all(j.status is S.RUNNING for j in factory.jobs)
        assert scheduler.peak_running == 3
        scheduler.cancel_recurring(sched_id)
        for job in factory.jobs:
            job.open()  # type: ignore[attr-defined]
        await scheduler.join()


async def test_cancel_recurring_stops_future_fires() -> None:
    clock = VirtualClock()
    scheduler, _ = make_scheduler(clock=clock)
    factory = Factory()
    sched_id = scheduler.schedule_recurring(factory, 1.0)
    async with scheduler:
        await clock.advance(0.0)
        await settle()
        assert scheduler.cancel_recurring(sched_id) is True
        assert scheduler.cancel_recurring(sched_id) is False, "already cancelled"
        assert scheduler.cancel_recurring("sched-unknown") is False
        assert scheduler.recurring() == []
        assert clock.timer_times() == [], "its timer was cancelled"
        await clock.advance(100.0)
        await settle()
        await scheduler.join()
    assert len(factory.jobs) == 1


async def test_schedule_made_before_start_is_armed_at_start() -> None:
    clock = VirtualClock()
    scheduler, _ = make_scheduler(clock=clock)
    factory = Factory()
    scheduler.schedule_recurring(factory, 2.0, start_in=1.0)
    assert clock.timer_times() == []
    await clock.advance(5.0)  # time passes before start: nothing fires yet
    async with scheduler:
        await clock.advance(0.0)  # overdue: fires once at start
        await settle()
        assert len(factory.jobs) == 1
        (sched,) = scheduler.recurring()
        # Due at t0+1, +3 and +5: one fire for all three, and the next is t0+7.
        assert sched.next_run == clock.now() + 2.0
        assert (sched.fired, sched.skipped) == (1, 0)
        scheduler.cancel_recurring(sched.schedule_id)
        await scheduler.join()


async def test_a_broken_factory_is_logged_and_the_schedule_goes_on() -> None:
    clock = VirtualClock()
    scheduler, _ = make_scheduler(clock=clock)
    calls = []

    def flaky_factory() -> Job:
        calls.append(len(calls))
        if len(calls) == 1:
            raise RuntimeError("factory broke")
        return Noop("ok")

    sched_id = scheduler.schedule_recurring(flaky_factory, 1.0)
    async with scheduler:
        with captured_logs() as logs:
            await clock.advance(0.0)
            await settle()
        assert [e["event"] for e in logs] == ["recurring schedule failed to fire"]
        assert logs[0]["schedule_id"] == sched_id
        await clock.advance(1.0)
        await settle()
        assert len(calls) == 2
        (sched,) = scheduler.recurring()
        assert sched.fired == 1
        scheduler.cancel_recurring(sched_id)
        await scheduler.join()


async def test_stop_ends_schedules_and_schedule_after_stop_is_refused() -> None:
    clock = VirtualClock()
    scheduler, _ = make_scheduler(clock=clock)
    factory = Factory()
    scheduler.schedule_recurring(factory, 1.0)
    async with scheduler:
        await clock.advance(0.0)
        await settle()
        await scheduler.join()
    assert clock.timer_times() == []
    await clock.advance(10.0)
    assert len(factory.jobs) == 1
    with pytest.raises(SchedulerStoppedError):
        scheduler.schedule_recurring(factory, 1.0)


async def test_recurring_jobs_are_bounded_by_the_history() -> None:
    clock = VirtualClock()
    scheduler, _ = make_scheduler(clock=clock, history_limit=5)
    factory = Factory()
    sched_id = scheduler.schedule_recurring(factory, 1.0)
    async with scheduler:
        for _ in range(50):
            await clock.jump(1.0)  # the fire due at start coalesces into the first
            await settle()
        scheduler.cancel_recurring(sched_id)
        await scheduler.join()
    assert len(factory.jobs) == 50
    assert len(scheduler.jobs()) == 5, "a recurring job must not grow memory forever"
    assert [j.job_id for j in scheduler.jobs()] == [j.job_id for j in factory.jobs[-5:]]
