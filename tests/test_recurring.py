"""Recurring schedules on the virtual clock: intervals, cron, dates, misfires, coalescing."""

from __future__ import annotations

import random
from datetime import datetime, timezone
from typing import Any
from zoneinfo import ZoneInfo

import pytest

from jobsched import (
    FunctionJob,
    JobScheduler,
    JobStatus,
    PluginManager,
    RecurringSchedule,
    hookimpl,
)
from jobsched._recurring import MAX_CATCH_UP
from jobsched.testing import VirtualClock
from jobsched_plugins.cron_trigger import CronTrigger
from jobsched_plugins.date_trigger import DateTrigger

UTC = timezone.utc
NY = ZoneInfo("America/New_York")


class Recorder:
    """A job factory whose jobs record when (virtual monotonic and wall time) they ran."""

    def __init__(self, clock: VirtualClock, takes: float = 0.0) -> None:
        self.clock = clock
        self.takes = takes
        self.started: list[float] = []
        self.walls: list[datetime] = []

    def __call__(self) -> FunctionJob:
        return FunctionJob(self.run, name="tick", timeout=None)

    async def run(self) -> None:
        self.started.append(self.clock.now())
        self.walls.append(self.clock.datetime(UTC))
        if self.takes:
            await self.clock.sleep(self.takes)


# ── interval: the reference design's schedule, unchanged ────────────────


async def test_interval_fires_at_a_fixed_rate_without_drift(virtual_clock: VirtualClock) -> None:
    rec = Recorder(virtual_clock, takes=3.0)
    scheduler = JobScheduler(clock=virtual_clock, num_workers=2)
    sid = scheduler.schedule_recurring(rec, 10.0)
    async with scheduler:
        await virtual_clock.advance(45)
        assert rec.started == [0.0, 10.0, 20.0, 30.0, 40.0]
        sched = scheduler.recurring()[0]
        assert (sched.fired, sched.skipped, sched.interval) == (5, 0, 10.0)
        assert scheduler.cancel_recurring(sid)
        assert not scheduler.cancel_recurring(sid)
        await virtual_clock.advance(100)
    assert len(rec.started) == 5


async def test_interval_start_in_delays_the_first_fire(virtual_clock: VirtualClock) -> None:
    rec = Recorder(virtual_clock)
    scheduler = JobScheduler(clock=virtual_clock)
    scheduler.schedule_recurring(rec, 10.0, start_in=5.0)
    async with scheduler:
        await virtual_clock.advance(30)
    assert rec.started == [5.0, 15.0, 25.0]


async def test_overlap_guard_skips_a_fire_while_the_previous_job_runs(
    virtual_clock: VirtualClock,
) -> None:
    rec = Recorder(virtual_clock, takes=15.0)
    scheduler = JobScheduler(clock=virtual_clock, num_workers=4)
    scheduler.schedule_recurring(rec, 10.0)
    await scheduler.start()
    await virtual_clock.advance(45)
    # A job sleeping on the virtual clock ends only when the clock moves: cancel it.
    await scheduler.stop(cancel_running=True)
    # 0 runs until 15: the fire at 10 is skipped; 20 runs until 35: 30 is skipped.
    assert rec.started == [0.0, 20.0, 40.0]
    assert scheduler.recurring()[0].skipped == 2


async def test_allow_overlap_runs_every_fire(virtual_clock: VirtualClock) -> None:
    rec = Recorder(virtual_clock, takes=15.0)
    scheduler = JobScheduler(clock=virtual_clock, num_workers=4)
    scheduler.schedule_recurring(rec, 10.0, allow_overlap=True)
    await scheduler.start()
    await virtual_clock.advance(35)
    assert rec.started == [0.0, 10.0, 20.0, 30.0]
    assert scheduler.kernel.running == 1  # the fire at 30 (20 ended at 35)
    await scheduler.stop(cancel_running=True)


# ── coalescing after a pause, misfire grace time ─────────────────────────


async def paused_schedule(clock: VirtualClock, **options: Any) -> tuple[Recorder, JobScheduler]:
    rec = Recorder(clock)
    scheduler = JobScheduler(clock=clock, num_workers=4)
    scheduler.schedule_recurring(rec, 10.0, allow_overlap=True, **options)
    await scheduler.start()
    await clock.advance(5)  # the fire at 0 runs on time
    await clock.jump(30)  # paused from 5 to 35: fires at 10, 20, 30 are missed
    return rec, scheduler


async def test_coalesce_one_runs_once_for_every_missed_fire(virtual_clock: VirtualClock) -> None:
    rec, scheduler = await paused_schedule(virtual_clock)
    sched = scheduler.recurring()[0]
    assert rec.started == [0.0, 35.0]
    assert (sched.fired, sched.coalesced, sched.misfired) == (2, 2, 0)
    await virtual_clock.advance(10)  # back on the grid: 40, not 45
    assert rec.started == [0.0, 35.0, 40.0]
    await scheduler.stop()


async def test_coalesce_all_runs_every_missed_fire(virtual_clock: VirtualClock) -> None:
    rec, scheduler = await paused_schedule(virtual_clock, coalesce="all")
    assert rec.started == [0.0, 35.0, 35.0, 35.0]
    assert scheduler.recurring()[0].fired == 4
    await scheduler.stop()


async def test_coalesce_none_skips_missed_fires_and_reports_them(
    virtual_clock: VirtualClock,
) -> None:
    rec, scheduler = await paused_schedule(virtual_clock, coalesce="none")
    sched = scheduler.recurring()[0]
    assert rec.started == [0.0]
    assert sched.misfired == 3
    await virtual_clock.advance(10)
    assert rec.started == [0.0, 40.0]  # an on-time fire runs again
    await scheduler.stop()


async def test_fire_later_than_the_grace_time_is_skipped_and_reported(
    virtual_clock: VirtualClock,
) -> None:
    reported: list[tuple[str, float, float, int]] = []

    class Alerts:
        @hookimpl
        def jobsched_schedule_misfired(
            self, schedule: Any, fire_time: float, lateness: float, fires: int
        ) -> None:
            reported.append((schedule.schedule_id, fire_time, lateness, fires))

    plugins = PluginManager([Alerts()], autoload=False)
    rec = Recorder(virtual_clock)
    scheduler = JobScheduler(clock=virtual_clock, plugins=plugins)
    sid = scheduler.schedule_recurring(rec, 10.0, misfire_grace_time=2.0)
    async with scheduler:
        await virtual_clock.advance(5)
        await virtual_clock.jump(30)  # latest missed fire (30) is 5 s late at 35
        sched = scheduler.recurring()[0]
        assert rec.started == [0.0]
        assert sched.misfired == 3
        assert sched.coalesced == 0  # skipped, not folded into a run
        assert sched.last_misfire == (30.0, 5.0)
        assert reported == [(sid, 30.0, 5.0, 3)]
        await virtual_clock.advance(10)
    assert rec.started == [0.0, 40.0]


async def test_fire_within_the_grace_time_runs(virtual_clock: VirtualClock) -> None:
    rec, scheduler = await paused_schedule(virtual_clock, misfire_grace_time=5.0)
    assert rec.started == [0.0, 35.0]
    await scheduler.stop()


async def test_coalesce_all_with_grace_runs_only_the_fires_still_in_grace(
    virtual_clock: VirtualClock,
) -> None:
    rec, scheduler = await paused_schedule(virtual_clock, coalesce="all", misfire_grace_time=16.0)
    # at 35: fire 10 is 25 s late (skipped), 20 is 15 s and 30 is 5 s late (run)
    assert rec.started == [0.0, 35.0, 35.0]
    assert scheduler.recurring()[0].misfired == 1
    await scheduler.stop()


async def test_a_paused_interval_schedule_skips_a_million_fires_in_o1(
    virtual_clock: VirtualClock,
) -> None:
    rec = Recorder(virtual_clock)
    scheduler = JobScheduler(clock=virtual_clock)
    scheduler.schedule_recurring(rec, 0.001)
    async with scheduler:
        await virtual_clock.jump(1000.0005)
        sched = scheduler.recurring()[0]
        assert sched.coalesced == 1_000_000
        assert sched.next_fire == pytest.approx(1000.001)
    assert len(rec.started) == 1


async def test_coalesce_all_catches_up_at_most_max_catch_up_fires(
    virtual_clock: VirtualClock,
) -> None:
    rec = Recorder(virtual_clock)
    scheduler = JobScheduler(clock=virtual_clock, num_workers=8)
    scheduler.schedule_recurring(rec, 0.001, coalesce="all", allow_overlap=True)
    async with scheduler:
        await virtual_clock.jump(10.0005)  # 10,001 fires came due
        sched = scheduler.recurring()[0]
        assert sched.fired == MAX_CATCH_UP
        assert sched.next_fire == pytest.approx(10.001)  # back on the grid
    assert len(rec.started) == MAX_CATCH_UP


def test_the_reference_designs_schedule_object_still_works() -> None:
    sched = RecurringSchedule(noop_factory, 10.0, 100.0, allow_overlap=True)
    assert (sched.interval, sched.next_run, sched.allow_overlap) == (10.0, 100.0, True)
    assert sched.advance(135.0) == 3  # fires at 100, 110, 120, 130: three coalesced
    assert sched.next_run == 140.0
    assert "every 10.0s" in repr(sched)
    assert sched.describe()["next_run"] == 140.0
    with pytest.raises(ValueError, match="interval must be a positive number"):
        RecurringSchedule(noop_factory, 0, 0.0)
    with pytest.raises(TypeError, match="an interval or a trigger, not both"):
        RecurringSchedule(noop_factory, 1.0, trigger=CronTrigger("* * * * *"))


async def test_jitter_delays_each_run_by_at_most_jitter(virtual_clock: VirtualClock) -> None:
    rec = Recorder(virtual_clock)
    scheduler = JobScheduler(clock=virtual_clock, rng=random.Random(7))
    scheduler.schedule_recurring(rec, 60.0, jitter=10.0, allow_overlap=True)
    async with scheduler:
        await virtual_clock.advance(600)
    assert len(rec.started) == 10
    offsets = [start - 60 * i for i, start in enumerate(rec.started)]
    assert all(0 <= o <= 10 for o in offsets)
    assert len(set(offsets)) == 10  # really random, not a constant delay


# ── cron and date triggers in a running scheduler ────────────────────────


async def test_cron_in_new_york_across_spring_forward() -> None:
    clock = VirtualClock(wall=datetime(2026, 3, 6, 12, tzinfo=NY))
    rec = Recorder(clock)
    scheduler = JobScheduler(clock=clock)
    scheduler.schedule_recurring(rec, trigger=CronTrigger("0 2 * * *", tz="America/New_York"))
    async with scheduler:
        await clock.advance(4 * 86400)
    assert [w.astimezone(NY).strftime("%m-%d %H:%M %Z") for w in rec.walls] == [
        "03-07 02:00 EST",
        "03-08 03:00 EDT",  # 02:00 does not exist: shifted to the jump
        "03-09 02:00 EDT",
        "03-10 02:00 EDT",
    ]


async def test_cron_in_new_york_across_fall_back_with_a_mapping_spec() -> None:
    clock = VirtualClock(wall=datetime(2026, 10, 30, 12, tzinfo=NY))
    rec = Recorder(clock)
    scheduler = JobScheduler(clock=clock)
    scheduler.schedule_recurring(
        rec, trigger={"cron": "0 2 * * *", "tz": "America/New_York", "overlap": "both"}
    )
    async with scheduler:
        await clock.advance(3 * 86400)
    assert [w.isoformat() for w in rec.walls] == [
        "2026-10-31T06:00:00+00:00",  # 02:00 EDT
        "2026-11-01T07:00:00+00:00",  # 02:00 EST: once, 25 hours later
        "2026-11-02T07:00:00+00:00",
    ]


async def test_cron_in_berlin_runs_both_occurrences_of_the_repeated_hour() -> None:
    clock = VirtualClock(wall=datetime(2026, 10, 24, 12, tzinfo=UTC))
    rec = Recorder(clock)
    scheduler = JobScheduler(clock=clock)
    scheduler.schedule_recurring(
        rec, trigger=CronTrigger("30 2 * * *", tz="Europe/Berlin", overlap="both")
    )
    async with scheduler:
        await clock.advance(2 * 86400)
    assert [w.strftime("%m-%d %H:%M") for w in rec.walls] == [
        "10-25 00:30",  # 02:30 CEST
        "10-25 01:30",  # 02:30 CET
        "10-26 01:30",
    ]


async def test_cron_timer_that_rings_early_after_a_wall_clock_step_waits(
    virtual_clock: VirtualClock,
) -> None:
    rec = Recorder(virtual_clock)
    scheduler = JobScheduler(clock=virtual_clock)
    scheduler.schedule_recurring(rec, trigger=CronTrigger("0 * * * *"))  # hourly, UTC
    async with scheduler:
        await virtual_clock.advance(1800)
        virtual_clock.set_wall(virtual_clock.time() - 600)  # NTP steps the clock back
        await virtual_clock.advance(1800)  # the timer rings at wall 00:50
        assert rec.started == []
        await virtual_clock.advance(600)  # wall 01:00
        assert rec.walls == [datetime(2026, 1, 1, 1, tzinfo=UTC)]


async def test_date_trigger_runs_once_and_the_schedule_ends(virtual_clock: VirtualClock) -> None:
    rec = Recorder(virtual_clock)
    scheduler = JobScheduler(clock=virtual_clock)
    sid = scheduler.schedule_recurring(rec, trigger=DateTrigger("2026-01-01T00:10:00+00:00"))
    async with scheduler:
        await virtual_clock.advance(3600)
        assert rec.started == [600.0]
        assert scheduler.recurring() == []
        assert not scheduler.cancel_recurring(sid)


async def test_date_in_the_past_beyond_grace_never_runs(virtual_clock: VirtualClock) -> None:
    rec = Recorder(virtual_clock)
    scheduler = JobScheduler(clock=virtual_clock)
    scheduler.schedule_recurring(
        rec, trigger={"date": "2025-12-31T23:00:00+00:00"}, misfire_grace_time=60
    )
    async with scheduler:
        await virtual_clock.advance(10)
    assert rec.started == []


async def test_a_broken_factory_does_not_stop_the_schedule(virtual_clock: VirtualClock) -> None:
    calls = []

    def factory() -> FunctionJob:
        calls.append(virtual_clock.now())
        if len(calls) == 2:
            raise RuntimeError("boom")

        async def ok() -> None:
            pass

        return FunctionJob(ok)

    scheduler = JobScheduler(clock=virtual_clock)
    scheduler.schedule_recurring(factory, 1.0)
    async with scheduler:
        await virtual_clock.advance(2.5)
    assert calls == [0.0, 1.0, 2.0]
    assert scheduler.recurring()[0].fired == 2
    assert all(j.status is JobStatus.COMPLETED for j in scheduler.jobs())


# ── bad input ────────────────────────────────────────────────────────────


def noop_factory() -> FunctionJob:
    async def noop() -> None:
        pass

    return FunctionJob(noop)


@pytest.mark.parametrize(
    ("args", "kwargs", "error", "message"),
    [
        ((), {}, TypeError, "needs an interval or a trigger"),
        ((5.0,), {"trigger": {"cron": "* * * * *"}}, TypeError, "not both"),
        ((), {"trigger": {"cron": "* * * * *"}, "start_in": 5}, TypeError, "start_in"),
        ((0,), {}, ValueError, "interval must be a positive number"),
        ((-1,), {}, ValueError, "interval must be a positive number"),
        ((1,), {"coalesce": "some"}, ValueError, "coalesce must be one of"),
        ((1,), {"misfire_grace_time": -1}, ValueError, "misfire_grace_time"),
        ((1,), {"jitter": -1}, ValueError, "jitter"),
        ((), {"trigger": {"crom": "* * * * *"}}, ValueError, "exactly one key must name a trigger"),
        ((), {"trigger": {"cron": "* * * * *", "zone": "UTC"}}, ValueError, "zone"),
        ((), {"trigger": {"cron": "bad"}}, ValueError, "invalid cron expression 'bad'"),
        ((), {"trigger": object()}, TypeError, "has no first_fire"),
    ],
)
def test_bad_schedules_are_refused_with_a_clear_error(
    args: tuple[Any, ...], kwargs: dict[str, Any], error: type[Exception], message: str
) -> None:
    scheduler = JobScheduler()
    with pytest.raises(error, match=message):
        scheduler.schedule_recurring(noop_factory, *args, **kwargs)
    assert scheduler.recurring() == []


def test_trigger_plugins_are_registered_by_name() -> None:
    scheduler = JobScheduler()
    assert {"interval", "cron", "date"} <= set(scheduler.plugins.names("triggers"))
