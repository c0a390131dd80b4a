"""Tenant fairness across real worker processes (issue 23, item 4), on
PostgreSQL and on one shared SQLite file: a small tenant's jobs all start
while most of a big tenant's backlog waits, with a group limit and without one.

Deterministic: every job is stored before any worker starts, so the claims'
turns alone decide the order (with strategy order only, tenant B's ten jobs
would run after all of A's). Every wait is on database state, never a sleep.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest

import pg_jobs
from jobsched import Client, PluginManager, Submission
from shared_support import Target
from test_postgres_cluster import Cluster

pytestmark = pytest.mark.slow  # worker processes: about 30 s for the four cases

A_JOBS = 200
B_JOBS = 10


@pytest.fixture
def target(db_target: Target) -> Target:
    """The workers are processes of their own: the databases only."""
    return db_target


@pytest.fixture
async def cluster(target: Target) -> AsyncIterator[Cluster]:
    cluster = Cluster(target.with_lease(10))
    try:
        yield cluster
    finally:
        for proc in cluster.procs:
            if proc.poll() is None:
                proc.kill()
                proc.wait()


def most_at_once(events: list[tuple[str, str]], ids: set[str]) -> int:
    """The most jobs of `ids` running at once, by their start and end rows."""
    running: set[str] = set()
    most = 0
    for job_id, event in events:
        if job_id not in ids:
            continue
        if event == "start":
            running.add(job_id)
            most = max(most, len(running))
        else:
            running.discard(job_id)
    return most


@pytest.mark.parametrize("limits", [None, {"group": 2}], ids=["turns-only", "group-limit"])
async def test_a_small_tenant_finishes_before_a_big_tenants_backlog_drains(
    target: Target, cluster: Cluster, limits: dict[str, Any] | None
) -> None:
    plugins = PluginManager([pg_jobs], autoload=False)
    async with Client(target.url, plugins=plugins) as client:
        if limits is not None:
            await client.store.set_limits(limits)
        # Tenant A's backlog first, then tenant B's ten: same priority, so
        # strategy order alone would run every job of A before B's first.
        a_ids = await client.submit_many(
            [Submission(target.span(f"a{i}"), group="tenant-a") for i in range(A_JOBS)]
        )
        b_ids = await client.submit_many(
            [Submission(target.span(f"b{i}"), group="tenant-b") for i in range(B_JOBS)]
        )
        for _ in range(2):
            cluster.start(workers=4)
        cluster.wait_ready()
        jobs = await client.wait_many([*a_ids, *b_ids], timeout=120)
    cluster.stop()
    assert {j.status.value for j in jobs} == {"completed"}
    assert {j.group for j in jobs[:A_JOBS]} == {"tenant-a"}
    # B took every other turn: when its last job started, most of A's
    # backlog was still waiting (strategy order alone would leave none).
    # Start times, which the claims set: a finish also waits for the job's
    # own write to the shared file, which a busy file can hold up.
    b_started = max(j.started_at or 0.0 for j in jobs[A_JOBS:])
    a_left = sum(1 for j in jobs[:A_JOBS] if (j.started_at or 0.0) > b_started)
    assert a_left >= A_JOBS // 2, (a_left, b_started)
    events = target.spans()
    assert len(events) == 2 * (A_JOBS + B_JOBS)
    if limits is not None:
        # Never more than two of a tenant's jobs at once, across both processes.
        assert most_at_once(events, set(a_ids)) == 2
        assert most_at_once(events, set(b_ids)) <= 2
