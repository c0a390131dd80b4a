"""Drain and stop real ``jobsched worker`` processes, on shared SQLite and
PostgreSQL, with ``jobsched workers drain|stop ID`` (issue 24, item 1).

Done when a drained worker claims nothing more and exits when told to
stop. Proved by state, never by time: the drained worker says ``draining``
in the registry, finishes its job, and a job submitted after stays pending
(its process alive, a slot free) until a worker started later runs it;
told to stop, its process exits 0 and its row is gone.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import registry_jobs
from jobsched import Client, JobStatus
from shared_support import Target
from test_cli import assert_bad_input, jobsched
from test_worker_registry import age, one, until
from worker_support import TESTS, Worker

pytestmark = pytest.mark.slow

#: A heartbeat every 1/3 s: a shared SQLite file has no channel, so its
#: workers read a request at their next heartbeat.
LEASE = 1.0


@pytest.fixture
def workers() -> Iterator[list[Worker]]:
    """The worker processes a test started: killed if it left them running."""
    started: list[Worker] = []
    yield started
    for worker in started:
        if worker.proc.poll() is None:
            worker.proc.kill()
            worker.proc.wait()


def start(url: str, workers: list[Worker]) -> Worker:
    worker = Worker(url, "--import", "registry_jobs", "--grace=60", "--workers=1")
    workers.append(worker)
    return worker


async def cli(*args: str) -> Any:
    return await asyncio.to_thread(jobsched, "workers", *args, cwd=TESTS)


async def test_a_drained_worker_claims_nothing_more_and_exits_when_told_to_stop(
    db_target: Target, tmp_path: Path, workers: list[Worker]
) -> None:
    target = db_target.with_lease(LEASE)
    a = start(target.url, workers)
    release, later = tmp_path / "release", tmp_path / "later"
    async with Client(target.url) as client:
        held = await client.submit(registry_jobs.hold.job(str(tmp_path / "s1"), str(release)))
        await until(lambda: _running(client, held, a.identity), "the worker runs the job")

        drained = await cli("drain", a.identity, "--store", target.url)
        assert drained.returncode == 0 and drained.stderr == "", drained
        assert drained.stdout.startswith(f"asked worker {a.identity} to drain: ")
        w = await until(lambda: _state(client, a.identity, "draining"), "it says it drains")
        assert (w.command, w.running) == ("drain", 1)

        after = await client.submit(registry_jobs.hold.job(str(tmp_path / "s2"), str(later)))
        release.touch()
        assert (await client.wait(held, timeout=60)).result == "released"
        await until(lambda: _idle(client, a.identity), "its job done, it stays, draining")
        assert a.proc.poll() is None
        assert (await client.get(after)).status is JobStatus.PENDING

        b = start(target.url, workers)
        await until(lambda: _running(client, after, b.identity), "a later worker takes the job")
        later.touch()
        assert (await client.wait(after, timeout=60)).status is JobStatus.COMPLETED

        stopped = await cli("stop", a.identity, "--store", target.url, "--json")
        assert stopped.returncode == 0, stopped
        assert json.loads(stopped.stdout) == {"worker_id": a.identity, "command": "stop"}
        assert await asyncio.to_thread(a.proc.wait, 60) == 0
        assert "stopping: an operator asked (jobsched workers stop)" in "".join(a.log.lines)
        assert [w.worker_id for w in await client.workers()] == [b.identity]

        # Gone: a request to it is bad input, one line.
        assert_bad_input(
            await cli("drain", a.identity, "--store", target.url),
            f"unknown worker {a.identity!r}",
        )
        b.stop()


async def test_a_busy_worker_told_to_stop_finishes_its_job_first(
    db_target: Target, tmp_path: Path, workers: list[Worker]
) -> None:
    target = db_target.with_lease(LEASE)
    a = start(target.url, workers)
    release = tmp_path / "release"
    async with Client(target.url) as client:
        held = await client.submit(registry_jobs.hold.job(str(tmp_path / "s"), str(release)))
        await until(lambda: _running(client, held, a.identity), "the worker runs the job")
        stopped = await cli("stop", a.identity, "--store", target.url)
        assert stopped.returncode == 0, stopped
        w = await until(lambda: _state(client, a.identity, "draining"), "it drains first")
        assert (w.command, w.running) == ("stop", 1)
        assert a.proc.poll() is None  # warm: its job may finish
        release.touch()
        assert await asyncio.to_thread(a.proc.wait, 60) == 0
        info = await client.get(held)
        assert (info.status, info.result, info.attempts) == (JobStatus.COMPLETED, "released", 1)
        assert await client.workers() == []


async def test_an_unknown_or_lost_worker_is_bad_input(
    db_target: Target, workers: list[Worker]
) -> None:
    target = db_target
    a = start(target.url, workers)
    assert_bad_input(
        await cli("stop", "nowhere:1", "--store", target.url),
        "unknown worker 'nowhere:1'",
        "jobsched workers lists them",
    )
    a.proc.kill()  # no goodbye: its row stays, and goes lost once old enough
    await asyncio.to_thread(a.proc.wait, 60)
    store = await target.open_store()
    try:
        await age(target, store, a.identity, 3600)
        assert_bad_input(
            await cli("drain", a.identity, "--store", target.url),
            f"worker {a.identity!r} is lost",
        )
    finally:
        await store.close()
    async with Client(target.url) as client:
        assert one(await client.workers(), a.identity).command is None  # type: ignore[union-attr]


async def _state(client: Client, worker_id: str, state: str) -> Any:
    w = one(await client.workers(), worker_id)
    return w if w is not None and w.state == state else None


async def _idle(client: Client, worker_id: str) -> Any:
    w = await _state(client, worker_id, "draining")
    return w if w is not None and w.running == 0 else None


async def _running(client: Client, job_id: str, owner: str) -> Any:
    info = await client.get(job_id)
    return info if info.started_at is not None and info.lease_owner == owner else None


async def test_jobsched_workers_shows_the_request_beside_the_state(
    db_target: Target, workers: list[Worker]
) -> None:
    target = db_target  # acted on yet or not (PostgreSQL tells it at once), the table shows it
    a = start(target.url, workers)
    assert (await cli("drain", a.identity, "--store", target.url)).returncode == 0
    table = await cli("--store", target.url)
    assert table.returncode == 0, table
    [row] = [line for line in table.stdout.splitlines() if line.startswith(a.identity)]
    assert "(drain asked)" in row
