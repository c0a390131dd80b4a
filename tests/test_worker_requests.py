"""Operators' requests to workers (issue 24, item 1): drain and stop.

`WorkersRole.request_worker` leaves the request on the worker's registry
row; the worker's heartbeat statement returns it. Here: the store contract
on every shared store (memory://, SQLite, PostgreSQL) and schedulers in
this process; tests/test_worker_requests_processes.py drives real
``jobsched worker`` processes. Nothing here waits for a time: a worker's
silence is made by moving its row's ``last_seen`` back (`age`), and what a
worker did is read from the store's state.
"""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Any

import pytest
import structlog

import pg_jobs
import registry_jobs
from jobsched import (
    BlockingClient,
    Client,
    JobScheduler,
    JobStatus,
    LocalClient,
    PluginManager,
    SchedulerError,
    UnknownWorkerError,
)
from jobsched._codec import JobCodec
from jobsched.backends.schedules import schedule_row
from jobsched.store import WORKER_COMMANDS, WORKER_RETENTION, BadRowError
from shared_support import Target
from test_cli import assert_bad_input, jobsched
from test_worker_registry import age, one, row, sched, until


# ── the store contract ────────────────────────────────────────────────
async def test_a_request_is_left_on_the_row_and_returned_by_its_heartbeat(
    target: Target,
) -> None:
    store = await target.open_store()
    try:
        assert await store.heartbeat(row("w1"), WORKER_RETENTION) is None
        assert await store.request_worker("w1", "drain") is True
        [w], _ = await store.workers()
        assert w.command == "drain"
        # Every beat returns it (a worker that missed the answer reads it again),
        # and the worker's own row never clears it.
        assert await store.heartbeat(row("w1", state="draining"), WORKER_RETENTION) == "drain"
        assert await store.heartbeat(row("w1", state="draining"), WORKER_RETENTION) == "drain"
        # Requests escalate and never go back.
        assert await store.request_worker("w1", "stop") is True
        assert await store.heartbeat(row("w1"), WORKER_RETENTION) == "stop"
        assert await store.request_worker("w1", "drain") is True
        assert await store.heartbeat(row("w1"), WORKER_RETENTION) == "stop"
        # Another worker's row is not touched.
        assert await store.heartbeat(row("w2"), WORKER_RETENTION) is None
        # A row written afresh (after a clean stop) has no request.
        assert await store.forget_worker("w1") is True
        assert await store.heartbeat(row("w1"), WORKER_RETENTION) is None
    finally:
        await store.close()


async def test_a_request_to_an_unknown_or_lost_worker_is_refused(target: Target) -> None:
    store = await target.open_store()
    try:
        assert await store.request_worker("nobody", "drain") is False
        await store.heartbeat(row("w1", lost_after=30.0), WORKER_RETENTION)
        await age(target, store, "w1", 31)  # silent for longer than its lease time
        assert await store.request_worker("w1", "stop") is False
        [w], _ = await store.workers()
        assert w.command is None  # nothing written
        with pytest.raises(ValueError, match="unknown worker command 'pause': one of drain, stop"):
            await store.request_worker("w1", "pause")
    finally:
        await store.close()


def test_the_commands_are_drain_then_stop() -> None:
    assert WORKER_COMMANDS == ("drain", "stop")


async def test_a_request_changed_by_hand_is_named(db_target: Target) -> None:
    target = db_target  # the memory store keeps rows as objects, not columns
    store = await target.open_store()
    try:
        await store.heartbeat(row("w1"), WORKER_RETENTION)
        if target.kind == "postgresql":
            async with store.connection() as conn:
                await conn.execute(f"UPDATE \"{target.schema}\".workers SET command = 'halt'")
        else:
            await store.call(
                lambda conn: conn.execute("UPDATE jobsched_shared_workers SET command = 'halt'")
            )
        with pytest.raises(BadRowError, match=r"worker w1 cannot be read: its command "):
            await store.workers()
        with pytest.raises(BadRowError, match=r"worker w1 cannot be read: its command "):
            await store.heartbeat(row("w1"), WORKER_RETENTION)
    finally:
        await store.close()


async def test_a_single_owner_file_has_no_worker_to_ask(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'own.db'}"
    async with JobScheduler(store=url):
        pass  # the file is a single-owner one now
    async with Client(url) as client:
        with pytest.raises(UnknownWorkerError, match="unknown worker 'h:1'"):
            await client.drain_worker("h:1")


# ── a scheduler in this process, asked through the store ──────────────
def identity(s: JobScheduler) -> str:
    return str(s.kernel.backend.identity)  # type: ignore[attr-defined]


async def test_a_drained_worker_finishes_its_job_and_claims_nothing_more(
    target: Target, tmp_path: Path
) -> None:
    target = target.with_lease(0.3)  # a heartbeat every 0.1 s (SQLite has no channel)
    started, release = tmp_path / "started", tmp_path / "release"
    async with Client(target.url) as client:
        drained = sched(target, num_workers=1)
        await drained.start()
        me = identity(drained)
        held = await client.submit(registry_jobs.hold.job(str(started), str(release)))
        await until(lambda: _running(client, held, me), "the worker runs the held job")

        await client.drain_worker(me)
        w = await until(lambda: _state(client, me, "draining"), "the worker says it drains")
        assert (w.command, w.running) == ("drain", 1)
        later = tmp_path / "release-later"
        after = await client.submit(registry_jobs.hold.job(str(tmp_path / "s2"), str(later)))
        # It finishes its job, stays (heartbeating as draining, a free slot)
        # and claims nothing: the job submitted after the drain waits until
        # a worker started later takes it.
        release.touch()
        assert (await client.wait(held, timeout=30)).result == "released"
        idle = await until(lambda: _idle_draining(client, me), "it runs nothing, still there")
        assert idle.command == "drain"
        assert (await client.get(after)).status is JobStatus.PENDING

        other = sched(target, num_workers=1)
        async with other:
            await until(lambda: _running(client, after, identity(other)), "the other runs it")
            later.touch()
            assert (await client.wait(after, timeout=30)).status is JobStatus.COMPLETED
        # The stop request ends it: `wait_stop_asked` returns, its program stops it.
        await client.stop_worker(me)
        await asyncio.wait_for(drained.kernel.wait_stop_asked(), 30)
        await drained.stop()
        assert one(await client.workers(), me) is None


async def test_a_drained_worker_fires_no_schedule(target: Target) -> None:
    """A schedule due now, stored while the only worker is drained (straight
    into the store: a `Client` would serve it too), is fired by a worker
    started later, not by the drained one. (On memory:// a worker that is
    not drained sees the new schedule at once and fires it first; the
    databases' workers look for new schedules less often, so there the end
    state is what is checked.)"""
    target = target.with_lease(0.3)
    async with Client(target.url) as client:
        drained = sched(target)
        async with drained:
            me = identity(drained)
            await client.drain_worker(me)
            await until(lambda: _state(client, me, "draining"), "the worker drains")
            now = time.time()
            codec = JobCodec(PluginManager([pg_jobs], autoload=False))
            tick = schedule_row(codec, target.rec("tick"), every=3600, now=now, offset=0.0)
            store = await target.open_store()
            try:
                await store.add_schedule(tick)
            finally:
                await store.close()
            other = sched(target)
            async with other:
                runs = await until(lambda: client.jobs(schedule=tick.schedule_id), "it is fired")
                assert [run.submitted_by for run in runs] == [identity(other)]


async def test_a_drain_hands_back_the_claimed_jobs_not_started(
    target: Target, tmp_path: Path
) -> None:
    """A worker claims ahead of its slots; draining gives those jobs back at
    once, for other workers, instead of running them on its way out."""
    target = target.with_lease(0.3)
    release = tmp_path / "release"
    async with Client(target.url) as client:
        s = sched(target, num_workers=1)
        async with s:
            me = identity(s)
            first = await client.submit(registry_jobs.hold.job(str(tmp_path / "a"), str(release)))
            await until(lambda: _running(client, first, me), "the first job runs")
            second = await client.submit(registry_jobs.hold.job(str(tmp_path / "b"), str(release)))
            await until(lambda: _leased(client, second, me), "the second is claimed ahead")
            assert (await client.get(second)).status is JobStatus.RUNNING  # claimed: leased

            await client.drain_worker(me)
            back = await until(lambda: _leased(client, second, None), "the second goes back")
            assert back.status is JobStatus.PENDING and back.attempts == 0
            release.touch()
            assert (await client.wait(first, timeout=30)).status is JobStatus.COMPLETED
            assert (await client.get(second)).status is JobStatus.PENDING


@pytest.mark.parametrize("target", ["memory", "postgresql"], indirect=True)
async def test_a_store_that_tells_wakes_the_worker_at_once(target: Target) -> None:
    """With a lease of an hour a heartbeat comes every 20 minutes: a worker
    that drains within the test heard of the request through the store's
    channel (PostgreSQL's NOTIFY, memory:// in process). A SQLite file has
    none: its workers read a request at their next heartbeat (documented)."""
    target = target.with_lease(3600)
    async with Client(target.url) as client:
        s = sched(target)
        async with s:
            me = identity(s)
            await client.drain_worker(me)
            w = await until(lambda: _state(client, me, "draining"), "the worker drains")
            assert w.command == "drain"
            await client.stop_worker(me)
            await asyncio.wait_for(s.kernel.wait_stop_asked(), 30)


async def test_a_restarted_process_does_not_inherit_its_predecessors_request(
    target: Target,
) -> None:
    """A process with the identity of a dead one (a restarted container: same
    host, same pid) starts afresh: the old row's stop is not its."""
    store = await target.open_store()
    try:
        s = sched(target)
        me = s.kernel.backend.identity  # type: ignore[attr-defined]
        await store.heartbeat(row(me), WORKER_RETENTION)  # the predecessor's row
        assert await store.request_worker(me, "stop") is True
        async with s:
            [w], _ = await store.workers()
            assert (w.worker_id, w.command, w.state) == (me, None, "running")
            assert not s.kernel.backend.registration.asked  # type: ignore[attr-defined]
    finally:
        await store.close()


# ── what the clients say ──────────────────────────────────────────────
async def test_the_client_names_an_unknown_and_a_lost_worker(target: Target) -> None:
    async with Client(target.url) as client:
        with pytest.raises(UnknownWorkerError, match=r"unknown worker 'h:9' in .*jobsched workers"):
            await client.drain_worker("h:9")
        with pytest.raises(TypeError, match="a worker id is a non-empty string, got ''"):
            await client.stop_worker("")
        s = sched(target)
        async with s:
            me = identity(s)
            store = await target.open_store()
            try:
                await age(target, store, me, 3600)
                with pytest.raises(UnknownWorkerError, match=r"is lost \(no heartbeat for 3600s\)"):
                    await client.stop_worker(me)
            finally:
                await store.close()


async def test_the_blocking_client_drains_and_stops(db_target: Target) -> None:
    target = db_target.with_lease(0.3)
    s = sched(target)
    async with s:
        me = identity(s)

        def drain_then_stop() -> list[Any]:
            with BlockingClient(target.url) as client:
                client.drain_worker(me)
                client.stop_worker(me)
                with pytest.raises(UnknownWorkerError):
                    client.drain_worker("nobody")
                return [w.command for w in client.workers()]

        assert await asyncio.to_thread(drain_then_stop) == ["stop"]
        await asyncio.wait_for(s.kernel.wait_stop_asked(), 30)


async def test_a_local_client_refuses_in_one_line() -> None:
    scheduler = JobScheduler()
    client = LocalClient(scheduler)
    async with scheduler:
        [w] = await client.workers()
        for call in (client.drain_worker, client.stop_worker):
            with pytest.raises(SchedulerError, match="a LocalClient's scheduler runs in this") as e:
                await call(w.worker_id)
            assert "\n" not in str(e.value)
        assert [x.state for x in await client.workers()] == ["idle"]  # nothing changed


def test_the_command_line_names_what_is_missing(tmp_path: Path) -> None:
    assert_bad_input(jobsched("workers"), "jobsched workers needs --store URL")
    missing = jobsched("workers", "drain", "--store", f"sqlite:///{tmp_path / 'x.db'}")
    assert missing.returncode == 2 and "the following arguments are required: ID" in missing.stderr
    assert_bad_input(
        jobsched("workers", "stop", "h:1", "--store", "memory://"),
        "is not a store several processes can share",
    )


# ── helpers: conditions read from the store ───────────────────────────
async def _state(client: Client, worker_id: str, state: str) -> Any:
    w = one(await client.workers(), worker_id)
    return w if w is not None and w.state == state else None


async def _idle_draining(client: Client, worker_id: str) -> Any:
    w = await _state(client, worker_id, "draining")
    return w if w is not None and w.running == 0 else None


async def _running(client: Client, job_id: str, owner: str) -> Any:
    info = await client.get(job_id)
    return info if info.started_at is not None and info.lease_owner == owner else None


async def _leased(client: Client, job_id: str, owner: str | None) -> Any:
    info = await client.get(job_id)
    return info if info.lease_owner == owner else None


async def test_a_request_the_worker_could_not_act_on_is_retried_at_the_next_beat(
    target: Target, monkeypatch: pytest.MonkeyPatch
) -> None:
    from jobsched.backends.registration import Registration

    store = await target.open_store()
    try:
        await store.heartbeat(row("w1"), WORKER_RETENTION)
        await store.request_worker("w1", "drain")
        acted: list[str] = []

        async def act(command: str) -> None:
            acted.append(command)
            if len(acted) == 1:
                raise RuntimeError("the schedule server would not close")

        log = structlog.get_logger("test")
        reg = Registration(store, "w1", row=lambda: row("w1"), act=act, log=log)
        await reg.beat()  # fails to act: logged, not raised
        assert (acted, reg.asked) == (["drain"], None)
        await reg.beat()
        assert (acted, reg.asked) == (["drain", "drain"], "drain")
        await reg.beat()  # acted once: not again
        assert acted == ["drain", "drain"]
    finally:
        await store.close()
