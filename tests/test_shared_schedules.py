"""Shared recurring schedules: one id and one grid for workers and clients.

A worker's ``schedule_recurring`` (a `JobScheduler` on a shared store) and a
``Client.add_schedule`` of the same job and trigger are ONE schedule: the
same id (the one stores written by earlier versions already hold), served by
both, firing once per period on the grid ``first + k * interval``.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest

import pg_jobs
from jobsched import Client, JobPriority, JobScheduler, PluginManager
from jobsched._codec import JobCodec
from jobsched.backends.schedules import next_fire, schedule_row
from jobsched.store import SharedScheduleRow
from shared_support import Target


def plugins() -> PluginManager:
    return PluginManager([pg_jobs], autoload=False)


def tick(tag: str = "tick") -> pg_jobs.Record:
    return pg_jobs.Record(dsn="sqlite:/nowhere", schema="", tag=tag)


def nightly() -> pg_jobs.Record:
    job = tick("nightly")
    job.priority = JobPriority.HIGH
    job.timeout = None
    return job


def no_triggers(name: str) -> Any:
    raise AssertionError(f"an interval schedule resolves no trigger plugin ({name})")


# The ids earlier versions gave these schedules (computed by the shared
# backend before this module existed): stores keep them, so they must not change.
TICK_EVERY_5 = "sched-bbc25db16a0fb110"
NIGHTLY_CRON_OVERLAP = "sched-1368d0887a8e26bc"
CRON_BERLIN = {"cron": "0 2 * * *", "tz": "Europe/Berlin"}


# ── the schedule id ────────────────────────────────────────────────────
async def test_a_worker_and_a_client_give_a_schedule_the_id_stores_already_hold(
    tmp_path: Any,
) -> None:
    url = f"sqlite:///{tmp_path}/jobs.db"
    worker = JobScheduler(store=url, shared=True, plugins=plugins())
    assert worker.schedule_recurring(tick, 5) == TICK_EVERY_5
    assert (
        worker.schedule_recurring(nightly, trigger=CRON_BERLIN, allow_overlap=True)
        == NIGHTLY_CRON_OVERLAP
    )
    async with Client(url, plugins=plugins()) as client:
        assert await client.add_schedule(tick(), every=5) == TICK_EVERY_5
        assert (
            await client.add_schedule(nightly(), trigger=CRON_BERLIN, allow_overlap=True)
            == NIGHTLY_CRON_OVERLAP
        )
        # `times` and `key` make other schedules of the same job and trigger.
        others = {
            await client.add_schedule(tick(), every=5, times=2),
            await client.add_schedule(tick(), every=5, key="file.toml#tick"),
        }
        await client.cancel_schedule(TICK_EVERY_5)
        for schedule_id in (NIGHTLY_CRON_OVERLAP, *others):
            await client.cancel_schedule(schedule_id)
    assert len(others | {TICK_EVERY_5}) == 3


def test_the_id_ignores_when_the_schedule_was_first_registered() -> None:
    codec = JobCodec(plugins())
    first = schedule_row(codec, tick(), every=5, now=1000.0, offset=0.0)
    later = schedule_row(codec, tick(), every=5, now=2000.5, offset=7.0)
    assert first.schedule_id == later.schedule_id == TICK_EVERY_5
    assert (first.next_run, first.trigger) == (1000.0, {"interval": 5, "origin": 1000.0})


# ── one schedule, served by a worker and a client ──────────────────────
async def test_a_worker_and_a_client_serve_one_schedule_that_fires_once_per_period(
    target: Target,
) -> None:
    interval = 0.25
    worker = JobScheduler(store=target.url, shared=True, plugins=plugins(), num_workers=2)
    async with worker, Client(target.url, plugins=plugins()) as client:
        from_worker = worker.schedule_recurring(lambda: target.rec("tick"), interval)
        from_client = await client.add_schedule(target.rec("tick"), every=interval)
        assert from_client == from_worker

        async def fired(count: int) -> None:
            while len(await client.jobs(schedule=from_client, status="completed")) < count:
                await asyncio.sleep(0.05)

        await asyncio.wait_for(fired(4), 60)
        assert await client.cancel_schedule(from_client)
        await client.wait_schedule(from_client, timeout=60)
        runs = await client.jobs(schedule=from_client)
        await client.wait_many([run.job_id for run in runs], timeout=60)
    store = await target.open_store()
    try:
        rows = await store.schedule_jobs(from_client)
    finally:
        await store.close()
    periods = [row.options["scheduled_for"] for row in rows]
    assert len(periods) == len(set(periods)) >= 4  # no period fired twice
    first = min(periods)
    for period in periods:  # every fire is on the grid first + k * interval
        k = round((period - first) / interval)
        assert period == pytest.approx(first + k * interval, abs=1e-6)
    executed = [job_id for job_id, tag, _ in target.executions() if tag == "tick"]
    assert sorted(executed) == sorted(run.job_id for run in runs)  # each ran once


# ── the grid (pure) ─────────────────────────────────────────────────────
def test_interval_fires_are_computed_on_the_grid_and_never_drift() -> None:
    origin = time.time()
    spec = {"interval": 0.1, "origin": origin}
    fire = origin
    for k in range(1, 20_001):
        fire = next_fire(spec, fire, fire, no_triggers)  # type: ignore[assignment]
        assert fire == origin + k * 0.1, f"fire {k} drifted by {fire - (origin + k * 0.1)}"


def test_missed_periods_coalesce_into_the_next_fire_on_the_grid() -> None:
    spec = {"interval": 10, "origin": 1000.0, "times": 5, "key": "k"}
    assert next_fire(spec, 1000.0, 1000.0, no_triggers) == 1010.0
    # Woken late, at 1047: periods 1010-1040 coalesce into this fire, the next is 1050.
    assert next_fire(spec, 1010.0, 1047.0, no_triggers) == 1050.0
    assert next_fire(spec, 1010.0, 1050.0, no_triggers) == 1060.0
    # A row stored before the origin was kept: the grid runs from its last fire.
    assert next_fire({"interval": 10}, 1003.0, 1004.0, no_triggers) == 1013.0


def test_a_wall_clock_trigger_fires_after_now() -> None:
    resolve = plugins_with_triggers().resolve
    spec = {"cron": "0 * * * *", "tz": "UTC"}  # hourly
    assert next_fire(spec, 3600.0, 3600.0, lambda n: resolve("triggers", n)) == 7200.0
    assert next_fire(spec, 3600.0, 4 * 3600.0 + 5, lambda n: resolve("triggers", n)) == 5 * 3600


def plugins_with_triggers() -> PluginManager:
    return PluginManager()


# ── the same bad input, the same error, from a worker and a client ────
@pytest.mark.parametrize(
    ("options", "error", "message"),
    [
        ({"every": 0}, ValueError, "interval must be a positive number of seconds"),
        ({"every": 5, "times": 0}, ValueError, "times must be an integer >= 1"),
        ({"every": 5, "start_in": -1}, ValueError, "start_in must be >= 0"),
        ({"trigger": object()}, TypeError, "pass the trigger as a mapping"),
        ({"trigger": {"date": "2000-01-01T00:00:00+00:00"}}, ValueError, "never fires"),
        ({"trigger": CRON_BERLIN, "start_in": 5}, TypeError, "start_in is for interval"),
        ({}, TypeError, r"an interval \(every=\) or a trigger=: exactly one"),
        ({"every": 5, "trigger": CRON_BERLIN}, TypeError, "exactly one"),
    ],
)
def test_bad_schedules_are_refused_with_one_clear_error(
    options: dict[str, Any], error: type[Exception], message: str
) -> None:
    with pytest.raises(error, match=message):
        codec = JobCodec(PluginManager([pg_jobs]))
        schedule_row(codec, tick(), now=time.time(), offset=0.0, **options)


def test_a_schedule_row_is_what_the_store_keeps() -> None:
    row = schedule_row(
        JobCodec(plugins()), tick(), every=5, start_in=2, times=3, key="f#t", now=10.0, offset=0.0
    )
    assert isinstance(row, SharedScheduleRow)
    assert row.next_run == 12.0
    assert row.trigger == {"interval": 5, "origin": 12.0, "times": 3, "key": "f#t"}
    assert (row.type, row.args["tag"], row.allow_overlap) == ("record", "tick", False)
