"""Several worker PROCESSES sharing one queue, in PostgreSQL or in one SQLite
file (issue 6, item 5; issue 10, item 3).

Every wait synchronizes on database state (polled), never on a fixed sleep;
`until` fails the test with what it saw if the state is not reached in 60 s.
"""

from __future__ import annotations

import asyncio
import itertools
import os
import signal
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from jobsched.store import NewJob
from pg_support import terminate_backends
from shared_support import Target


@pytest.fixture
def target(db_target: Target) -> Target:
    """The cluster's workers are processes of their own:
    the databases only (a memory store is seen by one process)."""
    return db_target


pytestmark = pytest.mark.slow
HERE = Path(__file__).parent


async def until(what: str, check: Callable[[], Awaitable[Any]], timeout: float = 60.0) -> Any:
    """Poll `check` until it returns something truthy; fail after `timeout` seconds."""
    give_up = time.monotonic() + timeout
    while True:
        value = await check()
        if value:
            return value
        if time.monotonic() > give_up:
            pytest.fail(f"timed out waiting for {what}; last value {value!r}")
        await asyncio.sleep(0.02)


class Cluster:
    """Worker subprocesses on one store schema."""

    def __init__(self, target: Target) -> None:
        self.target = target
        self.url = target.url
        self.schema = target.schema
        self.procs: list[subprocess.Popen[str]] = []
        self.identity: dict[int, str] = {}

    def start(self, workers: int, schedule: float | None = None) -> subprocess.Popen[str]:
        env = {
            **os.environ,
            "PYTHONPATH": os.pathsep.join([str(HERE), os.environ.get("PYTHONPATH", "")]),
            "PG_JOBS_DSN": self.target.side,
            "PG_JOBS_SCHEMA": self.target.schema,
        }
        args = [sys.executable, str(HERE / "pg_worker.py"), self.url, str(workers)]
        if schedule is not None:
            args.append(str(schedule))
        proc = subprocess.Popen(args, env=env, stdout=subprocess.PIPE, text=True)
        self.procs.append(proc)
        return proc

    def wait_ready(self) -> None:
        for proc in self.procs:
            if proc.pid in self.identity:
                continue
            assert proc.stdout is not None
            line = proc.stdout.readline()
            assert line.startswith("ready "), f"worker {proc.pid} said {line!r}"
            self.identity[proc.pid] = line.split()[1]

    def stop(self) -> None:
        for proc in self.procs:
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
        for proc in self.procs:
            proc.wait(timeout=60)
            assert proc.returncode in (0, -signal.SIGKILL), proc.returncode


@pytest.fixture
async def setup(target: Target) -> AsyncIterator[tuple[Cluster, Any]]:
    # A dead worker's jobs come back after ~3 s; live workers renew every second,
    # so a busy CI machine does not make a live worker lose its leases.
    target = target.with_lease(3)
    store = await target.open_store()
    cluster = Cluster(target)
    try:
        yield cluster, store
    finally:
        for proc in cluster.procs:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
        await store.close()


def record_rows(
    target: Target,
    n: int,
    *,
    seconds: float = 0.0,
    prio: Callable[[int], int] | None = None,
    delay: float = 0.0,
) -> Iterator[NewJob]:
    now = time.time()
    for i in range(n):
        p = prio(i) if prio else 1
        yield NewJob(
            job_id=f"r{i:05d}",
            type="record",
            args={"dsn": target.side, "schema": target.schema, "tag": f"{p}", "seconds": seconds},
            options={"priority": p, "retry": {"policy": "none"}},
            run_at=now + delay,
            submitted_at=now,
            sort_key=(-p, 0.0),
        )


async def test_kill_9_midway_loses_nothing_and_reruns_only_in_flight_jobs(
    setup: tuple[Cluster, Any],
) -> None:
    cluster, store = setup
    await store.insert(list(record_rows(cluster.target, 2000, seconds=0.02)))
    for _ in range(4):
        cluster.start(workers=4)
    cluster.wait_ready()
    victim = cluster.procs[1]
    owner = cluster.identity[victim.pid]

    async def victim_busy_midway() -> set[str]:
        done = len(cluster.target.executions())
        if done < 500:
            return set()
        return {
            r.job_id for r in await store.jobs() if r.lease_owner == owner and r.status == "running"
        }

    await until("the victim to be running jobs midway", victim_busy_midway)
    victim.kill()  # SIGKILL: no cleanup, leases left behind
    victim.wait()
    in_flight = {r.job_id for r in await store.jobs() if r.lease_owner == owner}
    assert in_flight

    async def all_done() -> bool:
        return (await store.counts()).get("completed") == 2000

    await until("all 2000 jobs to complete", all_done)
    cluster.stop()
    rows = await store.jobs()
    assert {r.status for r in rows} == {"completed"}
    runs: dict[str, list[int]] = {}
    for job_id, _, pid in cluster.target.executions():
        runs.setdefault(job_id, []).append(pid)
    assert set(runs) == {r.job_id for r in rows}
    ran_twice = {job_id for job_id, pids in runs.items() if len(pids) > 1}
    # Only jobs the killed process held when it died ran again, and only once
    # more, elsewhere; no completed job ever ran a second time.
    assert ran_twice <= in_flight
    for job_id in ran_twice:
        first, *again = runs[job_id]
        assert first == victim.pid and len(again) == 1 and again[0] != victim.pid
    assert all(len(pids) == 1 for job_id, pids in runs.items() if job_id not in in_flight)
    reclaimed = [r for r in rows if r.job_id in in_flight]
    assert all(
        r.attempts >= 2 or r.job_id not in runs or len(runs[r.job_id]) == 1 for r in reclaimed
    )
    assert victim.pid not in {pid for pids in runs.values() for pid in pids[1:]}


async def test_recurring_schedule_served_by_three_processes_fires_once_per_period(
    setup: tuple[Cluster, Any],
) -> None:
    cluster, store = setup
    interval = 0.2
    for _ in range(3):
        cluster.start(workers=2, schedule=interval)
    cluster.wait_ready()

    async def fired_enough() -> list[Any]:
        rows = [r for r in await store.jobs() if r.schedule_id is not None]
        return rows if len([r for r in rows if r.status == "completed"]) >= 8 else []

    await until("8 periods to fire", fired_enough)
    cluster.stop()
    rows = [r for r in await store.jobs() if r.schedule_id is not None]
    assert len({r.schedule_id for r in rows}) == 1  # three registrations, one schedule
    periods = [r.options["scheduled_for"] for r in rows]
    assert len(periods) == len(set(periods))  # no period fired twice
    # On the grid first + k * interval (to the float resolution of epoch seconds).
    steps = {round((b - a) / interval, 4) for a, b in itertools.pairwise(periods)}
    assert all(s >= 1 and s == int(s) for s in steps), steps
    schedule = await store.get_schedule(rows[0].schedule_id)
    assert schedule.fired + schedule.skipped >= len(rows) and schedule.fired == len(rows)
    ran = [job_id for job_id, _, _ in cluster.target.executions()]
    assert len(ran) == len(set(ran))
    submitters = {r.submitted_by for r in rows}
    assert submitters <= set(cluster.identity.values())


async def test_cancel_from_another_process_stops_a_running_job(
    setup: tuple[Cluster, Any],
) -> None:
    cluster, store = setup
    await store.insert(list(record_rows(cluster.target, 1, seconds=3600)))
    cluster.start(workers=1)
    cluster.wait_ready()

    async def running() -> bool:
        row = await store.get("r00000")
        return row is not None and row.status == "running" and bool(cluster.target.executions())

    await until("the job to run", running)
    assert await store.request_cancel("r00000") is True

    async def cancelled() -> Any:
        row = await store.get("r00000")
        return row if row is not None and row.status == "cancelled" else None

    row = await until("the job to be cancelled on the worker", cancelled)
    assert row.last_error == "cancelled" and row.lease_owner is None
    cluster.stop()


async def test_priority_order_holds_across_two_processes(
    setup: tuple[Cluster, Any],
) -> None:
    cluster, store = setup
    # Interleaved LOW (0) and HIGH (2) jobs: FIFO would alternate them.
    await store.insert(
        list(record_rows(cluster.target, 40, seconds=0.01, prio=lambda i: 2 * (i % 2)))
    )
    for _ in range(2):
        cluster.start(workers=1)
    cluster.wait_ready()

    async def all_done() -> bool:
        return (await store.counts()).get("completed") == 40

    await until("all jobs to complete", all_done)
    cluster.stop()
    runs = cluster.target.executions()
    by_pid: dict[int, list[int]] = {}
    for _, tag, pid in runs:
        by_pid.setdefault(pid, []).append(int(tag))
    assert len(by_pid) == 2  # both processes took part
    for order in by_pid.values():
        assert order == sorted(order, reverse=True), order  # each: all HIGH, then LOW
    rows = sorted(await store.jobs(), key=lambda r: r.started_at or 0)
    first_low = min(r.started_at for r in rows if r.options["priority"] == 0)
    highs_before = [r for r in rows if r.options["priority"] == 2 and r.started_at < first_low]
    assert len(highs_before) >= 20 - 2  # at most one prefetched HIGH per process overlaps


async def test_worker_survives_its_connections_being_terminated(
    setup: tuple[Cluster, Any],
) -> None:
    cluster, store = setup
    if cluster.target.kind != "postgresql":
        # Terminating a server's connections means nothing for a SQLite file.
        pytest.skip("a PostgreSQL server's connections")
    await store.insert(list(record_rows(cluster.target, 300, seconds=0.005)))
    cluster.start(workers=2)
    cluster.wait_ready()

    async def some_done() -> bool:
        return len(cluster.target.executions()) >= 50

    await until("the worker to be busy", some_done)
    assert terminate_backends(cluster.schema) >= 2  # the worker's query + LISTEN links

    async def all_done() -> bool:
        return (await store.counts()).get("completed") == 300

    await until("all jobs to complete after the reconnect", all_done)
    # Nothing lost, nothing run twice, and the worker is still listening:
    # a new job is picked up through NOTIFY.
    await store.insert(
        [
            NewJob(
                job_id="late",
                type="record",
                args={"dsn": cluster.target.side, "schema": cluster.schema, "tag": "late"},
                run_at=time.time(),
                submitted_at=time.time(),
                sort_key=(0.0,),
            )
        ]
    )

    async def late_done() -> bool:
        row = await store.get("late")
        return row is not None and row.status == "completed"

    await until("a job submitted after the reconnect", late_done)
    cluster.stop()
    ran = [job_id for job_id, _, _ in cluster.target.executions()]
    assert len(ran) == 301 and len(set(ran)) == 301


async def test_worker_processes_follow_the_stored_limits(
    setup: tuple[Cluster, Any],
) -> None:
    """Plain `run_worker` processes (no limits of their own) obey the cluster's limits."""
    cluster, store = setup
    schema = cluster.schema
    await store.sync_limits({"executors": {}, "job_types": {"span": 1}, "rates": {}})
    now = time.time()
    await store.insert(
        [
            NewJob(
                job_id=f"s{i:02d}",
                type="span",
                args={"dsn": cluster.target.side, "schema": schema, "tag": str(i), "seconds": 0.01},
                options={"retry": {"policy": "none"}, "executor": "async"},
                run_at=now,
                submitted_at=now,
                sort_key=(0.0,),
            )
            for i in range(12)
        ]
    )
    for _ in range(2):
        cluster.start(workers=3)
    cluster.wait_ready()

    async def all_done() -> bool:
        return all(r.status == "completed" for r in await store.jobs())

    await until("every span to complete", all_done)
    cluster.stop()
    events = cluster.target.spans()
    assert len(events) == 24
    running: set[str] = set()
    for job_id, event in events:
        if event == "start":
            assert not running, f"{job_id} started while {running} ran"
            running.add(job_id)
        else:
            running.discard(job_id)
