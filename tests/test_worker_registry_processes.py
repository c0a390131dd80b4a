"""The worker registry across real ``jobsched worker`` processes, on shared
SQLite and PostgreSQL, read by ``jobsched workers`` and `Client.workers`.

Two workers appear with their pids; SIGTERM makes one drain (its job
finishes) and then leave the registry; a SIGKILLed one stays, is shown
lost once its last heartbeat is older than its lease time, and is deleted
by a live worker after the retention. Time since a heartbeat is moved by
changing the row's ``last_seen`` (`age`), never waited for.
"""

from __future__ import annotations

import asyncio
import json
import signal
from collections.abc import Iterator
from pathlib import Path

import pytest

import registry_jobs
from jobsched import Client, WorkerRecord
from jobsched.store import WORKER_RETENTION
from shared_support import Target
from test_cli import jobsched
from test_worker_registry import age, one, until
from worker_support import TESTS, Worker

pytestmark = pytest.mark.slow

LEASE = 1.0  # a heartbeat every 1/3 s


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
    worker = Worker(url, "--import", "registry_jobs", "--grace=60")
    workers.append(worker)
    return worker


async def cli_workers(url: str) -> list[dict[str, object]]:
    result = await asyncio.to_thread(jobsched, "workers", "--store", url, "--json", cwd=TESTS)
    assert result.returncode == 0 and result.stderr == "", result
    listed: list[dict[str, object]] = json.loads(result.stdout)
    return listed


async def test_workers_register_drain_leave_and_get_lost(
    db_target: Target, tmp_path: Path, workers: list[Worker]
) -> None:
    target = db_target.with_lease(LEASE)
    a, b = start(target.url, workers), start(target.url, workers)
    listed = {w["worker_id"]: w for w in await cli_workers(target.url)}
    assert set(listed) == {a.identity, b.identity}
    for worker in (a, b):
        row = listed[worker.identity]
        assert (row["pid"], row["state"], row["running"]) == (worker.proc.pid, "idle", 0)
        assert row["queues"] == {"default": 2}
        assert "registry_jobs.hold" in row["job_types"]  # type: ignore[operator]

    started, release = tmp_path / "started", tmp_path / "release"
    async with Client(target.url) as client:
        job_id = await client.submit(registry_jobs.hold.job(str(started), str(release)))
        owner = (await until(lambda: _running(client, job_id), "the job runs")).lease_owner
        busy, other = (a, b) if owner == a.identity else (b, a)
        await until(lambda: _state(client, busy.identity, "live"), "the busy worker is live")

        # SIGTERM: it claims nothing more and says so while its job finishes.
        busy.proc.send_signal(signal.SIGTERM)
        await until(lambda: _state(client, busy.identity, "draining"), "it drains")
        release.touch()
        assert await asyncio.to_thread(busy.proc.wait, 60) == 0
        assert (await client.get(job_id)).result == "released"
        assert [w.worker_id for w in await client.workers()] == [other.identity]

        # SIGKILL: no goodbye; the row stays, lost once older than the lease time.
        other.proc.kill()
        assert await asyncio.to_thread(other.proc.wait, 60) == -signal.SIGKILL
        store = await target.open_store()
        try:
            await age(target, store, other.identity, LEASE + 1)
            [w] = await client.workers()
            assert (w.worker_id, w.state, w.pid) == (other.identity, "lost", other.proc.pid)
            table = await asyncio.to_thread(jobsched, "workers", "--store", target.url, cwd=TESTS)
            assert table.returncode == 0
            assert "LOST" in table.stdout and "1 worker: 1 lost" in table.stdout

            # Kept for the retention; then a live worker's heartbeat deletes it.
            c = start(target.url, workers)
            assert {w.worker_id: w.state for w in await client.workers()} == {
                other.identity: "lost",
                c.identity: "idle",
            }
            await age(target, store, other.identity, WORKER_RETENTION)
            await until(lambda: _gone(client, other.identity), "the lost worker is forgotten")
            c.stop()
            assert await client.workers() == []
        finally:
            await store.close()


async def _running(client: Client, job_id: str) -> object:
    info = await client.get(job_id)
    return info if info.lease_owner is not None else None


async def _state(client: Client, worker_id: str, state: str) -> WorkerRecord | None:
    w = one(await client.workers(), worker_id)
    return w if w is not None and w.state == state else None


async def _gone(client: Client, worker_id: str) -> bool:
    return one(await client.workers(), worker_id) is None
