"""Shared mode in one process: schedulers sharing one queue, in PostgreSQL and in SQLite."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

import pg_jobs
from jobsched import (
    Client,
    JobFailedError,
    JobScheduler,
    JobStatus,
    PluginManager,
    RetryPolicy,
    SchedulerError,
)
from shared_support import Target


def plugins() -> PluginManager:
    return PluginManager([pg_jobs], autoload=False)


def sched(target: Target, **kwargs: Any) -> JobScheduler:
    """One process of the cluster (a scheduler in shared mode on the target store)."""
    return JobScheduler(store=target.url, shared=True, plugins=plugins(), **kwargs)


def rec(target: Target, tag: str, seconds: float = 0.0, **options: object) -> pg_jobs.Record:
    job = target.rec(tag, seconds)
    for k, v in options.items():
        setattr(job, k, v)
    return job


async def test_jobs_submitted_anywhere_run_once_somewhere(target: Target) -> None:
    a = sched(target, num_workers=2)
    b = sched(target, num_workers=2)
    async with a, b:
        ids = [a.submit(rec(target, f"t{i}")) for i in range(50)]
        await a.join()
        rows = await a.kernel.backend.store.jobs(ids)  # type: ignore[attr-defined]
    assert [r.status for r in rows] == ["completed"] * 50
    assert all(r.result == {"tag": f"t{i}"} for i, r in enumerate(rows))
    done = target.executions()
    assert sorted(j for j, _, _ in done) == sorted(ids)


async def test_dependencies_and_failure_cascade_across_processes(target: Target) -> None:
    a = sched(target, num_workers=1)
    b = sched(target, num_workers=1)
    async with a, b:
        up = a.submit(rec(target, "up"))
        # Another process can depend only on a job the store already has.
        await a.flush()
        down = b.submit(rec(target, "down"), depends_on=[up])
        await b.flush()
        fail = pg_jobs.Fail()
        fail.retry = RetryPolicy(max_retries=0)
        bad = a.submit(fail)
        after_bad = a.submit(rec(target, "never"), depends_on=[bad])
        await a.join()
        await b.join()
        rows = {r.job_id: r for r in await a.kernel.backend.store.jobs()}  # type: ignore[attr-defined]
    assert rows[up].status == rows[down].status == "completed"
    assert rows[bad].status == "failed" and rows[bad].attempts == 1
    assert rows[after_bad].status == "cancelled"
    assert rows[after_bad].last_error == f"upstream {bad} failed"
    assert [t for _, t, _ in target.executions()] == ["up", "down"]


async def test_a_function_job_is_refused_at_submit(target: Target) -> None:
    async def fn() -> None:
        return None

    a = sched(target)
    async with a:
        with pytest.raises(SchedulerError, match="a plain function cannot be stored"):
            a.submit(fn)


async def test_cancel_on_one_process_stops_the_job_running_on_another(target: Target) -> None:
    b = sched(target, num_workers=1)
    started = asyncio.Event()
    b.add_listener(lambda job, old, new: new is JobStatus.RUNNING and started.set())
    await b.start()
    async with Client(target.url, plugins=plugins()) as a:  # a submits; b runs
        job_id = await a.submit(rec(target, "long", seconds=3600, timeout=None))
        await started.wait()
        assert b.get(job_id).status is JobStatus.RUNNING
        assert await a.cancel(job_id) is True
        assert (await a.wait(job_id)).status is JobStatus.CANCELLED
    assert b.get(job_id).status is JobStatus.CANCELLED
    await b.stop()


async def test_retries_and_delays_go_through_the_store(target: Target) -> None:
    from jobsched_plugins.fixed_retry import FixedRetryPolicy

    a = sched(target, num_workers=2)
    b = sched(target, num_workers=2)
    async with a, b:
        fail = pg_jobs.Fail(message="nope")
        fail.retry = FixedRetryPolicy(max_retries=2, seconds=0.05)
        bad = a.submit(fail)
        later = a.submit(rec(target, "later"), delay=0.2)
        await a.join()
        rows = {r.job_id: r for r in await a.kernel.backend.store.jobs()}  # type: ignore[attr-defined]
    assert (rows[bad].status, rows[bad].attempts) == ("failed", 3)
    assert rows[bad].last_error == "RuntimeError: nope"
    assert rows[later].status == "completed"
    # Started no earlier than its due time (wall clock, as stored).
    assert rows[later].started_at is not None
    assert rows[later].started_at >= rows[later].submitted_at + 0.2


async def test_a_job_no_type_here_fits_waits_and_one_that_cannot_be_built_is_refused(
    target: Target,
) -> None:
    import time

    from jobsched.store import NewJob

    a = sched(target, num_workers=1, max_build_refusals=1)
    async with a:
        store = a.kernel.backend.store  # type: ignore[attr-defined]
        now = time.time()
        await store.insert(
            [
                NewJob(
                    job_id=job_id,
                    type=kind,
                    args=args,
                    run_at=now,
                    submitted_at=now,
                    sort_key=(0.0,),
                )
                for job_id, kind, args in (
                    ("ghost", "no-such-type", {}),
                    ("bad-args", "record", {"nope": 1}),
                )
            ]
        )
        after = a.submit(rec(target, "after"))
        await a.join()  # "after" ran: the claims passed both rows by

        async def refused() -> Any:
            while True:
                row = await store.get("bad-args")
                if row.status == "failed":
                    return row
                await store.wait_finished(5)

        bad = await asyncio.wait_for(refused(), 60)
        ghost = await store.get("ghost")
    # No worker knows its type: never claimed, it waits for one that does.
    assert (ghost.status, ghost.attempts, ghost.build_refusals) == ("pending", 0, 0)
    # Its type is known, its arguments do not fit: refused, and with a bound
    # of one refusal, failed, saying which type and why.
    assert (bad.build_refusals, len(bad.refused_by)) == (1, 1)
    assert "unknown argument 'nope'" in bad.last_refusal
    assert bad.last_error.startswith(
        "JobSpecError: 1 worker process could not build this 'record' job"
    )
    assert bad.last_error.endswith(bad.last_refusal)
    # Its type is a real one, as for any other failure (not "Error").
    failure = JobFailedError.from_job(bad.job_id, bad.status, bad.last_error, bad.attempts)
    assert failure.error_type == "JobSpecError"
    assert [tag for _, tag, _ in target.executions()] == ["after"]
    assert after


async def test_jobs_that_cannot_be_data_are_refused_at_submit(target: Target) -> None:
    from jobsched import AsyncJob

    class Unregistered(AsyncJob):
        async def run(self) -> None:
            return None

    a = sched(target)
    async with a:
        with pytest.raises(SchedulerError, match="is not a registered job type"):
            a.submit(Unregistered("x"))
        job = rec(target, "t")
        job.retry = object()  # type: ignore[assignment]
        with pytest.raises(SchedulerError, match="retry policy"):
            a.submit(job)


async def test_unique_key_holds_across_processes(target: Target) -> None:
    async with (
        Client(target.url, plugins=plugins()) as a,
        Client(target.url, plugins=plugins()) as b,
    ):
        first = await a.submit(rec(target, "one"), unique_key="nightly")
        second = await b.submit(rec(target, "two"), unique_key="nightly")
        rows = await a.jobs()
    assert first == second and [r.job_id for r in rows] == [first]


async def test_cron_schedule_served_by_three_schedulers_fires_once_per_period(
    target: Target,
) -> None:
    every_second = {"cron": "* * * * * *"}  # six fields: seconds first
    procs = [sched(target, num_workers=1) for _ in range(3)]
    for p in procs:
        await p.start()
    try:
        ids = {
            p.schedule_recurring(lambda: rec(target, "tick"), trigger=every_second) for p in procs
        }
        assert len(ids) == 1  # three registrations, one shared schedule
        store = procs[0].kernel.backend.store  # type: ignore[attr-defined]

        async def three_done() -> list[object]:
            while True:
                rows = [r for r in await store.jobs() if r.status == "completed"]
                if len(rows) >= 3:
                    return rows
                await store.wait_finished(5)

        await asyncio.wait_for(three_done(), 60)
        assert procs[1].cancel_recurring(ids.pop()) is True
    finally:
        for p in procs:
            await p.stop()
    rows = [r for r in await stored_rows(target) if r.schedule_id is not None]
    periods = [r.options["scheduled_for"] for r in rows]
    assert len(periods) == len(set(periods))  # no second fired twice
    assert all(p == int(p) for p in periods)  # on the cron grid (whole seconds)
    with pytest.raises(SchedulerError, match="does not support misfire_grace_time"):
        sched(target).schedule_recurring(lambda: rec(target, "x"), 5, jitter=1.0)
    with pytest.raises(TypeError, match="pass the trigger as a mapping"):
        sched(target).schedule_recurring(
            lambda: rec(target, "x"),
            trigger=object(),  # type: ignore[arg-type]
        )


async def stored_rows(target: Target) -> list[Any]:
    store = await target.open_store()
    try:
        return list(await store.jobs())
    finally:
        await store.close()


async def test_a_refused_job_waits_and_its_refuser_does_not_claim_it_again(
    target: Target,
) -> None:
    import time

    from jobsched.store import NewJob

    a = sched(target, num_workers=1)
    async with a:
        store = a.kernel.backend.store  # type: ignore[attr-defined]
        now = time.time()
        await store.insert(
            [
                NewJob(
                    job_id="bad-args",
                    type="record",
                    args={"nope": 1},
                    run_at=now,
                    submitted_at=now,
                    sort_key=(0.0,),
                )
            ]
        )
        # Woken by every job that follows, it never takes the refused one again.
        for n in range(3):
            a.submit(rec(target, f"after-{n}"))
            await a.join()
    # Read once the scheduler stopped: its refusal is written by then.
    probe = await target.open_store()
    try:
        row = await probe.get("bad-args")
    finally:
        await probe.close()
    assert (row.status, row.attempts, row.lease_owner) == ("pending", 0, None)
    assert (row.build_refusals, len(row.refused_by)) == (1, 1)
    assert row.last_error is None and "unknown argument 'nope'" in row.last_refusal


def test_max_build_refusals_is_checked_and_needs_a_shared_store(target: Target) -> None:
    with pytest.raises(ValueError, match="max_build_refusals must be a whole number"):
        sched(target, max_build_refusals=0)
    with pytest.raises(ValueError, match="bounds the claims of a shared store; this scheduler"):
        JobScheduler(max_build_refusals=3)
