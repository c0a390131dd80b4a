"""Bulk actions from Python: `retry_many`, `cancel_many` and `purge_many`.

On a `Client` of every shared store (memory, SQLite in shared mode,
PostgreSQL: the `target` fixture), on a `Client` of a single-owner SQLite
file while no owner runs, and on a `LocalClient` of a scheduler in this
process (memory, and a SQLite file it owns). Each returns the ids it acted
on, in the order given, and leaves the others alone.
"""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Any

import pytest

from jobsched import (
    BlockingClient,
    Client,
    JobScheduler,
    JobStatus,
    LocalClient,
    UnknownJobError,
)
from jobsched.store import NewJob, Outcome
from kernel_support import Gate, join, settle, until
from shared_support import Target
from store_support import Fail, jobs_plugin
from store_support import Noop as StoredNoop

SEED = "seed-worker"


def new(job_id: str, *, deps: tuple[str, ...] = (), delay: float = 0.0) -> NewJob:
    now = time.time()
    return NewJob(
        job_id=job_id,
        type="noop",
        args={"n": job_id},
        options={"executor": "async"},
        run_at=now + delay,
        submitted_at=now,
        sort_key=(0.0,),
        depends_on=deps,
    )


async def seed(target: Target, ended: dict[str, str], *, running: tuple[str, ...] = ()) -> Any:
    """Jobs that ended in the given statuses, jobs left running (claimed by
    `SEED`), a pending job ``wait`` (due in an hour) and ``down``, which waits
    for it; returns the open store (the caller closes it)."""
    store = await target.open_store(SEED)
    await store.insert([new(job_id) for job_id in [*ended, *running]])
    claimed, _ = await store.claim(100, SEED)
    assert len(claimed) == len(ended) + len(running)
    outcomes = [Outcome(job_id=j, status=s, error=f"E: {j}") for j, s in ended.items()]
    await store.finish(outcomes, SEED)
    await store.insert([new("wait", delay=3600), new("down", deps=("wait",))])
    return store


async def statuses(client: Any) -> dict[str, str]:
    return {info.job_id: info.status.value for info in await client.jobs()}


ENDED = {
    "f-1": "failed",
    "t-1": "timed_out",
    "c-1": "cancelled",
    "f-2": "failed",
    "ok": "completed",
}


async def test_retry_many_retries_the_ended_jobs_it_may_and_leaves_the_rest(
    target: Target,
) -> None:
    store = await seed(target, ENDED, running=("run",))
    try:
        async with Client(target.url) as client:
            given = ["f-2", "ok", "nope", "run", "t-1", "wait", "f-1", "f-2", "c-1"]
            assert await client.retry_many(given) == ["f-2", "t-1", "f-1", "c-1"]
            now = await statuses(client)
            assert {j: now[j] for j in ("f-1", "f-2", "t-1", "c-1")} == dict.fromkeys(
                ("f-1", "f-2", "t-1", "c-1"), "pending"
            )
            assert (now["ok"], now["run"], now["wait"]) == ("completed", "running", "pending")
            assert (await client.get("f-1")).attempts == 0
            # Nothing left to retry: nothing acted on, no error.
            assert await client.retry_many(["f-1", "ok"]) == []
            assert await client.retry_many([]) == []
    finally:
        await store.close()


async def test_cancel_many_cancels_waiting_jobs_and_flags_running_ones(target: Target) -> None:
    store = await seed(target, {"ok": "completed"}, running=("run",))
    try:
        async with Client(target.url) as client:
            done = await client.cancel_many(["ok", "wait", "run", "nope", "wait"])
            assert done == ["wait", "run"]
            wait, down, run = [await client.get(j) for j in ("wait", "down", "run")]
            assert (wait.status, wait.last_error) == (JobStatus.CANCELLED, "cancelled")
            # Its dependent is settled in the same transaction, as a single cancel does.
            assert down.status is JobStatus.CANCELLED
            assert down.last_error == "upstream wait cancelled"
            # A running job is its worker's to stop: it is asked to.
            assert run.status is JobStatus.RUNNING
            assert await store.cancel_requests(SEED) == ["run"]
            assert await client.cancel_many(["ok", "wait", "down"]) == []
    finally:
        await store.close()


async def test_cancel_many_of_a_job_and_its_dependent_cancels_both_itself(target: Target) -> None:
    store = await seed(target, {})
    try:
        async with Client(target.url) as client:
            assert await client.cancel_many(["down", "wait"]) == ["down", "wait"]
            assert (await client.get("down")).last_error == "cancelled"
    finally:
        await store.close()


async def test_purge_many_deletes_finished_jobs_only(target: Target) -> None:
    store = await seed(target, ENDED, running=("run",))
    try:
        async with Client(target.url) as client:
            given = ["ok", "run", "wait", "down", "f-1", "nope", "c-1", "ok"]
            assert await client.purge_many(given) == ["ok", "f-1", "c-1"]
            with pytest.raises(UnknownJobError):
                await client.get("f-1")
            assert set(await statuses(client)) == {"f-2", "t-1", "run", "wait", "down"}
            assert (await client.stats()).counts.get("completed", 0) == 0
            assert await client.purge_many(["ok", "run"]) == []
    finally:
        await store.close()


@pytest.mark.parametrize("method", ["retry_many", "cancel_many", "purge_many"])
async def test_bad_ids_are_refused_before_anything_changes(target: Target, method: str) -> None:
    store = await seed(target, ENDED)
    try:
        async with Client(target.url) as client:
            call = getattr(client, method)
            with pytest.raises(TypeError, match=rf"{method} takes a collection of job ids"):
                await call("f-1")
            with pytest.raises(TypeError, match="a job id is a string, got integer 7"):
                await call(["f-1", 7])
            with pytest.raises(ValueError, match="NUL"):
                await call(["f-1", "a\x00b"])
            assert (await client.get("f-1")).status is JobStatus.FAILED
    finally:
        await store.close()


async def test_a_blocking_client_has_them_as_plain_calls(tmp_path: Path) -> None:
    target = Target("sqlite", f"sqlite:///{tmp_path}/jobs.db", "", "")
    store = await seed(target, ENDED)
    await store.close()

    def operate() -> tuple[list[str], list[str], list[str]]:
        with BlockingClient(target.url) as client:
            return (
                client.retry_many(["f-1", "ok"]),
                client.cancel_many(["wait", "ok"]),
                client.purge_many(["ok", "down", "c-1"]),
            )

    assert await asyncio.to_thread(operate) == (["f-1"], ["wait"], ["ok", "down", "c-1"])


# ── a single-owner SQLite file, while no owner runs ─────────────────────
async def test_on_a_single_owner_file_while_no_owner_runs(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path}/owned.db"
    async with JobScheduler(store=url, plugins=[jobs_plugin]) as scheduler:
        failed = [scheduler.submit(Fail(message=str(n))) for n in range(3)]
        done = scheduler.submit(StoredNoop())
        await join(scheduler)
        later = scheduler.submit(StoredNoop(), delay=3600)
    async with Client(url, plugins=_plugins()) as client:
        assert await client.retry_many([done, *failed[:2], "nope"]) == failed[:2]
        assert await client.cancel_many([done, later]) == [later]
        assert await client.purge_many([failed[0], later, failed[2], done]) == [
            later,
            failed[2],
            done,
        ]
        assert {i.job_id: i.status.value for i in await client.jobs()} == {
            failed[0]: "pending",
            failed[1]: "pending",
        }


def _plugins() -> Any:
    from jobsched import PluginManager

    return PluginManager([jobs_plugin])


# ── LocalClient: a scheduler in this process ───────────────────────────
async def test_local_client_bulk_actions_on_the_memory_store() -> None:
    async with JobScheduler() as scheduler:
        client = LocalClient(scheduler)
        failed = [scheduler.submit(Fail(message=str(n))) for n in range(3)]
        ok = scheduler.submit(StoredNoop())
        await join(scheduler)
        gate = Gate("held")
        held = scheduler.submit(gate)
        await until(lambda: gate.waiting, "the gate to start")
        later = scheduler.submit(StoredNoop(), delay=3600)
        after = scheduler.submit(StoredNoop(), depends_on=[later])
        assert await client.retry_many([ok, failed[2], "nope", failed[0], held]) == [
            failed[2],
            failed[0],
        ]
        assert (await client.get(failed[2])).status is JobStatus.PENDING
        assert await client.cancel_many([ok, after, later, held, "nope"]) == [after, later, held]
        await settle()
        assert (await client.get(after)).last_error == "cancelled"
        assert (await client.get(held)).status is JobStatus.CANCELLED
        for job_id in (failed[2], failed[0]):
            await client.wait(job_id, timeout=10)
        assert await client.purge_many([ok, failed[1], "nope", held]) == [ok, failed[1], held]
        with pytest.raises(UnknownJobError):
            await client.get(ok)
        with pytest.raises(TypeError, match="purge_many takes a collection of job ids"):
            await client.purge_many(ok)


async def test_local_client_purge_many_deletes_them_from_a_file_it_owns(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path}/jobs.db"
    async with JobScheduler(store=url, plugins=[jobs_plugin]) as scheduler:
        client = LocalClient(scheduler)
        failed = [scheduler.submit(Fail(message=str(n))) for n in range(3)]
        await join(scheduler)
        await scheduler.flush()  # a job whose end is not kept yet is not purged yet
        assert await client.purge_many([failed[1], failed[2]]) == [failed[1], failed[2]]
        await scheduler.flush()
    async with JobScheduler(store=url, plugins=[jobs_plugin]) as restarted:
        # Exactly those: the older failed job stays.
        assert [i.job_id for i in await LocalClient(restarted).jobs()] == [failed[0]]
