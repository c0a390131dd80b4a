"""A process that lost its leases (paused, stalled) must not run what it no longer owns.

Issue 15: a worker paused past its lease used to start the jobs it had
prefetched although another process had completed them meanwhile, and
logged "lease lost" for each every renewal until they ended. Now a claimed
job starts only while its lease is sure to be alive, an attempt whose lease
the renewer finds lost is stopped, a lost prefetched job is dropped, each
said once. These tests drive one scheduler in this process (the lease's age
is measured on the scheduler's clock, so a `VirtualClock` can pause it);
tests/test_zombie_lease_processes.py does the same to real worker processes
with SIGSTOP.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from typing import Any

import pytest

import pg_jobs
from jobsched import JobScheduler, JobStatus, PluginManager
from jobsched.testing import VirtualClock
from kernel_support import captured_logs
from shared_support import Target


def lease_lost(logs: list[dict[str, Any]], job_id: str) -> list[dict[str, Any]]:
    return [e for e in logs if e["event"] == "lease lost" and e.get("job_id") == job_id]


async def until(what: str, check: Callable[[], Awaitable[Any]], timeout: float = 60.0) -> Any:
    """Poll `check` until it returns something truthy; `timeout` only fails a hung test."""
    give_up = time.monotonic() + timeout
    while not (value := await check()):
        if time.monotonic() > give_up:
            pytest.fail(f"timed out waiting for {what}")
        await asyncio.sleep(0.01)
    return value


class CountingRenewals:
    """Wraps a store's `renew` to count the renewals a scheduler made."""

    def __init__(self, store: Any) -> None:
        self.count = 0
        self._renew = store.renew
        store.renew = self

    async def __call__(self, job_ids: Any, owner: str) -> set[str]:
        try:
            return await self._renew(job_ids, owner)  # type: ignore[no-any-return]
        finally:
            self.count += 1


def long_job(target: Target, tag: str) -> pg_jobs.Record:
    job = target.rec(tag, seconds=3600)
    job.timeout = None
    return job


async def test_a_claim_whose_lease_may_have_expired_is_handed_back_unstarted(
    target: Target,
) -> None:
    # The renewer renews every lease/3 = 200 s of real time: never during this
    # test, so the lease's age is what the virtual clock says.
    target = target.with_lease(600)
    clock = VirtualClock()
    a = JobScheduler(
        store=target.url,
        shared=True,
        num_workers=1,
        clock=clock,
        plugins=PluginManager([pg_jobs], autoload=False),
    )
    probe = await target.open_store()
    try:
        with captured_logs() as logs:
            async with a:
                busy = a.submit(long_job(target, "busy"))
                queued = a.submit(target.rec("queued"))
                await a.flush()

                async def claimed_both() -> bool:
                    rows = {r.job_id: r for r in await probe.jobs()}
                    return (
                        a.kernel.backend.leases_held == 2  # type: ignore[attr-defined]
                        and rows[busy].status == rows[queued].status == "running"
                        and len(target.executions()) == 1
                    )

                await until("one job running, one prefetched", claimed_both)
                # The process is paused for as long as the lease: when it goes
                # on, the prefetched claim may be someone else's already.
                await clock.jump(600)
                a.cancel(busy)  # frees the only worker, which takes `queued` next

                async def handed_back_and_run_again() -> bool:
                    row = await probe.get(queued)
                    return row is not None and row.status == "completed"

                await until("the job to be handed back, then run", handed_back_and_run_again)
                await a.join()
        rows = {r.job_id: r for r in await probe.jobs()}
    finally:
        await probe.close()
    # Not started when its lease was in doubt: released (its claim's attempt
    # uncounted), claimed afresh and run once.
    assert rows[queued].attempts == 1
    assert [job for job, _, _ in target.executions()] == [busy, queued]
    (said,) = lease_lost(logs, queued)
    assert said["action"] == "not started"
    assert said["reason"] == "lease not renewed for 600.0s (it lasts 600s)"
    assert rows[busy].status == "cancelled" and not lease_lost(logs, busy)


async def test_lost_leases_stop_the_attempt_drop_the_prefetched_job_and_say_so_once(
    target: Target,
) -> None:
    target = target.with_lease(1.5)  # renewals every 0.5 s
    store = target.store()
    renewals = CountingRenewals(store)
    a = JobScheduler(
        store=store,
        shared=True,
        num_workers=1,
        plugins=PluginManager([pg_jobs], autoload=False),
    )
    probe = await target.open_store()
    try:
        with captured_logs() as logs:
            async with a:
                running = a.submit(long_job(target, "running"))
                prefetched = a.submit(long_job(target, "prefetched"))
                await a.flush()

                async def claimed_both() -> bool:
                    rows = await probe.jobs()
                    return (
                        a.kernel.backend.leases_held == 2  # type: ignore[attr-defined]
                        and {r.status for r in rows} == {"running"}
                        and len(target.executions()) == 1
                    )

                await until("one job running, one prefetched", claimed_both)
                # Both leases expired and another process reaped and claimed the jobs.
                await target.steal_lease(probe, [running, prefetched], "other")

                async def stopped() -> bool:
                    return a.get(running).status is JobStatus.CANCELLED

                await until("the attempt to be stopped", stopped)
                after = renewals.count

                async def renewed_twice_more() -> bool:
                    return renewals.count >= after + 2

                await until("two more renewals", renewed_twice_more)
                assert a.kernel.backend.leases_held == 0  # type: ignore[attr-defined]
                rows = {r.job_id: r for r in await probe.jobs()}
                # Its end was not written over the new owner's lease.
                assert {(r.status, r.lease_owner) for r in rows.values()} == {("running", "other")}
        # The worker is free again and the prefetched job was dropped, not run.
        assert [job for job, _, _ in target.executions()] == [running]
    finally:
        await probe.close()
    (said_running,) = lease_lost(logs, running)
    (said_prefetched,) = lease_lost(logs, prefetched)
    assert said_running["action"] == "attempt stopped"
    assert said_prefetched["action"] == "not started"
    assert said_running["reason"] == said_prefetched["reason"] == "renewal found the lease taken"


async def test_a_job_claimed_again_while_its_lost_attempt_still_runs_here_is_handed_back(
    target: Target,
) -> None:
    """Its lost attempt's result must never be written over the new claim."""
    target = target.with_lease(600)  # no renewal during the test
    a = JobScheduler(
        store=target.url,
        shared=True,
        num_workers=1,
        plugins=PluginManager([pg_jobs], autoload=False),
    )
    probe = await target.open_store()
    try:
        with captured_logs() as logs:
            async with a:
                job = a.submit(long_job(target, "job"))
                await a.flush()

                async def running() -> bool:
                    return len(target.executions()) == 1

                await until("the job to run", running)
                first = a.get(job)
                # Its lease expired unnoticed, it was reaped: pending again, and
                # this process (the only one) claims it while the attempt runs.
                await target.expire_lease(probe, job)
                assert await probe.reap_expired() == 1
                a.kernel.backend.store.on_work()  # type: ignore[attr-defined]

                async def stopped() -> bool:
                    return first.status is JobStatus.CANCELLED

                await until("the lost attempt to be stopped", stopped)

                async def claimed_afresh() -> bool:
                    return len(target.executions()) == 2

                # Handed back, then claimed again once the lost attempt ended.
                await until("the job to run again", claimed_afresh)
                a.cancel(job)
                await a.join()
    finally:
        await probe.close()
    (said,) = lease_lost(logs, job)
    assert said["action"] == "attempt stopped"
    assert said["reason"] == "claimed again while its earlier attempt is here"
