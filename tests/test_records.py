"""What a job's records say (issue 21, item 16), on every store.

A completed job has no error (an earlier attempt's stays in its history);
the history says how each attempt ended (failed, timed out, handed back),
not the job's status; a job a shutdown hands back to its store is logged as
handed back, not cancelled.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import attrs
import pytest

from jobsched import (
    AsyncJob,
    Client,
    JobInfo,
    JobScheduler,
    JobStatus,
    LocalClient,
    hookimpl,
)
from jobsched.store import read_store
from jobsched_plugins import structlog_listener
from jobsched_plugins.fixed_retry import FixedRetryPolicy

STORES = ["memory", "single-owner", "shared-sqlite", "postgresql"]
#: Set when a `Hold` job starts (per test).
STARTED: dict[str, asyncio.Event] = {}


@attrs.define(slots=True, eq=False, repr=False)
class Uneven(AsyncJob):
    """Fails its first run, stalls past its timeout in the second, returns 7 in
    the third (runs counted in a file, so every process agrees)."""

    log: str

    async def run(self) -> int:
        path = Path(self.log)
        with path.open("a") as f:
            f.write("run\n")
        runs = len(path.read_text().split())
        if runs == 1:
            raise ValueError("first run fails")
        if runs == 2:
            await asyncio.Event().wait()  # until the timeout ends it
        return 7


@attrs.define(slots=True, eq=False, repr=False)
class Hold(AsyncJob):
    """Says it started, then runs until it is torn down."""

    tag: str

    async def run(self) -> None:
        STARTED[self.tag].set()
        await asyncio.Event().wait()


class records_plugin:
    @staticmethod
    @hookimpl
    def jobsched_register_job_types(register: Callable[[str, Any], None]) -> None:
        register("uneven", Uneven)
        register("hold", Hold)


@attrs.define
class Store:
    kind: str
    url: str | None

    @property
    def shared(self) -> bool:
        return self.kind in ("shared-sqlite", "postgresql")

    def scheduler(self) -> JobScheduler:
        return JobScheduler(
            store=self.url, shared=self.shared or None, plugins=[records_plugin], num_workers=1
        )

    async def info(self, scheduler: JobScheduler, job_id: str, *, ended: bool = False) -> JobInfo:
        """The job as an operator reads it (a Client on a shared store, else a
        LocalClient), once it has ended if `ended`."""
        if not self.shared:
            local = LocalClient(scheduler)
            if ended:
                await local.wait(job_id, timeout=30)
            return await local.get(job_id)
        assert self.url is not None
        async with Client(self.url) as client:
            if ended:
                await client.wait(job_id, timeout=30)
            return await client.get(job_id)


@pytest.fixture(params=STORES)
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Store:
    if request.param == "memory":
        return Store("memory", None)
    if request.param == "postgresql":
        return Store("postgresql", request.getfixturevalue("pg_schema")[0])
    return Store(request.param, f"sqlite:///{tmp_path / 'jobs.db'}")


@pytest.fixture
async def running(store: Store) -> AsyncIterator[JobScheduler]:
    scheduler = store.scheduler()
    await scheduler.start()
    try:
        yield scheduler
    finally:
        await scheduler.stop(cancel_running=True)


async def test_a_completed_job_has_no_error_and_its_history_says_how_attempts_ended(
    store: Store, running: JobScheduler, tmp_path: Path
) -> None:
    job = Uneven(log=str(tmp_path / "runs.log"))
    job.retry = FixedRetryPolicy(max_retries=3, seconds=0)
    job.timeout = 0.5
    job_id = running.submit(job)
    await running.flush()  # stored: a Client sees it
    info = await store.info(running, job_id, ended=True)
    assert (info.status, info.result, info.attempts) == (JobStatus.COMPLETED, 7, 3)
    assert info.last_error is None
    ended = [(a.number, a.status, a.error) for a in info.history[:2]]
    assert ended == [
        (1, "failed", "ValueError: first run fails"),
        (2, "timed_out", "timed out after 0.5s"),
    ]
    if store.shared:  # the stored row says so too
        assert store.url is not None
        async with Client(store.url) as client:
            row = await client.store.get(job_id)
        assert row is not None and (row.status, row.last_error) == ("completed", None)
    if store.kind == "single-owner":  # the file says so too
        await running.stop()
        assert store.url is not None
        snapshot = await read_store(store.url, running.plugins)
        assert snapshot is not None
        [row] = [r for r in snapshot.jobs if r.job_id == job_id]
        assert (row.status, row.last_error) == ("completed", None)


class Recorder:
    """Stands in for the structlog listener's logger: what it logs."""

    def __init__(self) -> None:
        self.events: list[tuple[str, dict[str, Any]]] = []

    def info(self, event: str, **fields: Any) -> None:
        self.events.append((event, fields))


async def test_a_job_handed_back_at_shutdown_is_not_logged_or_recorded_as_cancelled(
    store: Store, running: JobScheduler, monkeypatch: pytest.MonkeyPatch
) -> None:
    log = Recorder()
    monkeypatch.setattr(structlog_listener, "logger", log)
    running.add_listener(structlog_listener.log_transition)
    STARTED["h"] = asyncio.Event()
    job_id = running.submit(Hold(tag="h"))
    await asyncio.wait_for(STARTED["h"].wait(), 30)
    await running.stop(cancel_running=True)
    ended = [(event, f) for event, f in log.events if f["job_id"] == job_id]
    last_event, last = ended[-1]
    if store.kind == "memory":  # nothing keeps it: stop(cancel_running=True) cancels it
        assert (last_event, last["new"]) == ("job.transition", "cancelled")
        return
    assert (last_event, last["old"], last["attempt"], last["reason"]) == (
        "job.handed_back",
        "running",
        1,
        "scheduler shut down",
    )
    assert not any(f.get("new") == "cancelled" for _, f in ended)
    if store.shared:
        info = await store.info(running, job_id)
        assert (info.status, [a.status for a in info.history]) == (
            JobStatus.RETRY_WAIT,
            ["handed_back"],
        )
    else:  # the file keeps it running: the next start runs it again
        assert store.url is not None
        snapshot = await read_store(store.url, running.plugins)
        assert snapshot is not None
        assert [r.status for r in snapshot.jobs if r.job_id == job_id] == ["running"]
