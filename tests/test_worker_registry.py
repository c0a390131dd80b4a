"""The worker registry (issue 23 item 6): every process that claims jobs from a
shared store keeps a heartbeat row; `Client.workers` reads them, `Stats.unserved`
counts the due jobs no live worker can run.

In one process on every shared store (PostgreSQL, shared SQLite, memory://);
a worker's time since its last heartbeat is driven by moving its row's
``last_seen`` back (`age`), never by sleeping.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import socket
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import attrs
import pytest

import pg_jobs
import registry_jobs
from jobsched import (
    WORKER_STATES,
    BlockingClient,
    Client,
    JobScheduler,
    LocalClient,
    PluginManager,
    WorkerRecord,
    __version__,
)
from jobsched.store import WORKER_RETENTION, BadRowError, WorkerRow
from shared_support import Target
from test_cli import assert_bad_input, jobsched


def sched(target: Target, **kwargs: Any) -> JobScheduler:
    return JobScheduler(
        store=target.url, shared=True, plugins=PluginManager([pg_jobs], autoload=False), **kwargs
    )


async def until(check: Callable[[], Awaitable[Any]], what: str) -> Any:
    """The first truthy value of `check()`, polled: a condition, not a time."""
    give_up = time.monotonic() + 30
    while not (value := await check()):
        if time.monotonic() > give_up:
            pytest.fail(f"never happened: {what}")
        await asyncio.sleep(0.01)
    return value


async def age(target: Target, store: Any, worker_id: str, seconds: float) -> None:
    """Move the worker's last heartbeat `seconds` back: as if it had been
    silent that long (`store` is open on the target)."""
    if target.kind == "memory":

        def back(queue: Any) -> None:
            row = queue.workers[worker_id]
            queue.workers[worker_id] = attrs.evolve(row, last_seen=row.last_seen - seconds)

        await store.call(back)
    elif target.kind == "postgresql":
        async with store.connection() as conn:
            await conn.execute(
                f'UPDATE "{target.schema}".workers SET last_seen = last_seen - %s '
                "WHERE worker_id = %s",
                [seconds, worker_id],
            )
    else:
        await store.call(
            lambda conn: conn.execute(
                "UPDATE jobsched_shared_workers SET last_seen = last_seen - ? WHERE worker_id = ?",
                (seconds, worker_id),
            )
        )


def one(workers: list[WorkerRecord], worker_id: str) -> WorkerRecord | None:
    return next((w for w in workers if w.worker_id == worker_id), None)


# ── a scheduler's own row ─────────────────────────────────────────────
async def test_a_scheduler_on_a_shared_store_is_registered_while_it_runs(
    target: Target, tmp_path: Path
) -> None:
    target = target.with_lease(0.3)  # a heartbeat every 0.1 s
    started, release = tmp_path / "started", tmp_path / "release"
    async with Client(target.url) as client:
        assert await client.workers() == []
        s = sched(target, num_workers=3)
        await s.start()
        me = s.kernel.backend.identity  # type: ignore[attr-defined]
        [w] = await client.workers()
        assert (w.worker_id, w.host, w.pid, dict(w.queues)) == (
            me,
            socket.gethostname(),
            os.getpid(),
            {"default": 3},
        )
        assert (w.version, w.state, w.running, w.lost) == (__version__, "idle", 0, False)
        assert {"record", "span", "registry_jobs.hold"} <= set(w.job_types)
        assert list(w.job_types) == sorted(w.job_types)
        assert w.started_at <= w.last_seen and w.seen_ago >= 0

        job_id = await client.submit(registry_jobs.hold.job(str(started), str(release)))
        busy = await until(lambda: _state(client, me, "live"), "the worker says it runs a job")
        assert busy.running == 1 and started.exists()

        # Stopping: it claims nothing more and says so while its job finishes.
        stopping = asyncio.create_task(s.stop())
        await until(lambda: _state(client, me, "draining"), "the worker says it drains")
        release.touch()
        await stopping
        # A clean stop deletes its row once its jobs are done.
        assert await client.workers() == []
        assert (await client.get(job_id)).result == "released"


async def _state(client: Client, worker_id: str, state: str) -> WorkerRecord | None:
    w = one(await client.workers(), worker_id)
    return w if w is not None and w.state == state else None


async def test_a_silent_worker_is_lost_after_its_lease_time_then_forgotten(
    target: Target,
) -> None:
    quiet = sched(target)  # lease 30 s: no heartbeat of its own during the test
    beating = sched(target.with_lease(0.3))
    async with Client(target.url) as client, quiet:
        store = await target.open_store()
        try:
            me = quiet.kernel.backend.identity  # type: ignore[attr-defined]
            assert [w.state for w in await client.workers()] == ["idle"]
            await age(target, store, me, 31)  # more than its lease: 3 heartbeats missed
            [w] = await client.workers()
            assert (w.state, w.lost) == ("lost", True) and w.seen_ago > 30
            # Lost rows stay for the retention; then any live worker's
            # heartbeat deletes them.
            async with beating:
                other = beating.kernel.backend.identity  # type: ignore[attr-defined]
                assert {w.worker_id: w.state for w in await client.workers()} == {
                    me: "lost",
                    other: "idle",
                }
                await age(target, store, me, WORKER_RETENTION)
                await until(
                    lambda: _gone(client, me), "a live worker's heartbeat forgets the lost one"
                )
        finally:
            await store.close()


async def _gone(client: Client, worker_id: str) -> bool:
    return one(await client.workers(), worker_id) is None


# ── jobs nobody can run ───────────────────────────────────────────────
def producer(target: Target) -> Client:
    """A client that knows a job type no worker here registers."""
    return Client(
        target.url, plugins=PluginManager([pg_jobs, registry_jobs.ProducerTypes()], autoload=False)
    )


async def test_due_jobs_of_a_type_no_live_worker_registered_wait_for_one(
    target: Target,
) -> None:
    async with producer(target) as client:
        # Paused, so that the worker below claims nothing: the jobs stay due.
        await client.pause_queue()
        for n in range(2):
            await client.submit(registry_jobs.Newer(n=n))
        await client.submit(registry_jobs.Newer(n=9), delay=3600)  # not due
        await client.submit(target.rec("r"))
        # No worker at all: every due job waits for one that knows its type.
        assert (await client.stats()).unserved == {"record": 1, "registry.newer": 2}
        s = sched(target)
        async with s:
            assert (await client.stats()).unserved == {"registry.newer": 2}
            me = s.kernel.backend.identity  # type: ignore[attr-defined]
            store = await target.open_store()
            try:
                await age(target, store, me, 31)  # lost: its types count no more
                assert (await client.stats()).unserved == {"record": 1, "registry.newer": 2}
            finally:
                await store.close()


# ── the registry's rows, as stores keep them ──────────────────────────
def row(worker_id: str, **changes: Any) -> WorkerRow:
    base = WorkerRow(
        worker_id=worker_id,
        host="h",
        pid=7,
        queues={"default": 2},
        job_types=["a", "b"],
        version="9.9",
        started_at=0.0,
        last_seen=0.0,
        lost_after=30.0,
        running=0,
        state="running",
    )
    return attrs.evolve(base, **changes)


async def test_each_store_stamps_heartbeats_keeps_started_at_and_forgets(
    target: Target,
) -> None:
    store = await target.open_store()
    try:
        await store.heartbeat(row("w1"), WORKER_RETENTION)
        [first], now = await store.workers()
        assert first.started_at == first.last_seen and abs(now - first.last_seen) < 60
        assert (first.queues, first.job_types, first.version) == ({"default": 2}, ["a", "b"], "9.9")
        await age(target, store, "w1", 5)
        await store.heartbeat(row("w1", running=3, state="draining"), WORKER_RETENTION)
        [again], _ = await store.workers()
        assert again.started_at == first.started_at  # kept from the first beat
        assert again.last_seen >= first.last_seen  # stamped again, 5 s after the aged one
        assert (again.running, again.state) == (3, "draining")
        # A beat forgets the rows older than the retention it is given, not its own.
        await store.heartbeat(row("w2"), WORKER_RETENTION)
        await age(target, store, "w1", 100)
        await store.heartbeat(row("w2"), 50)
        assert [w.worker_id for w in (await store.workers())[0]] == ["w2"]
        assert await store.forget_worker("w2") is True
        assert await store.forget_worker("w2") is False
        assert (await store.workers())[0] == []
    finally:
        await store.close()


async def test_a_registry_row_changed_by_hand_is_named(db_target: Target) -> None:
    target = db_target  # the memory store keeps rows as objects, not columns
    store = await target.open_store()
    try:
        await store.heartbeat(row("w1"), WORKER_RETENTION)
        if target.kind == "postgresql":
            async with store.connection() as conn:
                await conn.execute(
                    f'UPDATE "{target.schema}".workers SET queues = \'["x"]\'::jsonb'
                )
        else:
            await store.call(
                lambda conn: conn.execute("UPDATE jobsched_shared_workers SET state = 'odd'")
            )
        with pytest.raises(BadRowError, match=r"worker w1 cannot be read: its (queues|state) "):
            await store.workers()
    finally:
        await store.close()


# ── in process: the scheduler itself is the one worker ────────────────
async def test_local_client_shows_its_scheduler_as_the_one_worker() -> None:
    scheduler = JobScheduler(num_workers=2)
    client = LocalClient(scheduler)
    assert await client.workers() == []  # not started: no worker yet
    async with scheduler:
        [w] = await client.workers()
        assert (w.host, w.pid, dict(w.queues), w.version) == (
            socket.gethostname(),
            os.getpid(),
            {"default": 2},
            __version__,
        )
        assert (w.state, w.running, w.seen_ago, w.lost) == ("idle", 0, 0.0, False)
        assert w.worker_id == f"{w.host}:{w.pid}"
        assert "registry_jobs.hold" in w.job_types
        assert (await client.stats()).unserved == {}
        stopping = asyncio.create_task(scheduler.stop())
        await asyncio.sleep(0)
        assert [w.state for w in await client.workers()] == ["draining"]
        await stopping


def test_worker_states_are_the_documented_four() -> None:
    assert WORKER_STATES == ("live", "idle", "draining", "lost")


async def test_the_blocking_client_lists_workers(db_target: Target) -> None:
    def listed() -> list[WorkerRecord]:
        with BlockingClient(db_target.url) as client:
            return client.workers()

    s = sched(db_target)
    async with s:
        [w] = await asyncio.to_thread(listed)
        assert (w.worker_id, w.state) == (s.kernel.backend.identity, "idle")  # type: ignore[attr-defined]
    assert await asyncio.to_thread(listed) == []


# ── the command line ──────────────────────────────────────────────────
DOCS = Path(__file__).resolve().parents[1] / "docs"


@pytest.mark.slow  # two `jobsched status` processes beside a worker: about 5 s
async def test_jobsched_status_says_which_jobs_wait_for_a_worker(db_target: Target) -> None:
    async with producer(db_target) as client:
        await client.pause_queue()
        await client.submit(registry_jobs.Newer(n=1))
        async with sched(db_target):
            table = await asyncio.to_thread(jobsched, "status", "--store", db_target.url)
            document = await asyncio.to_thread(
                jobsched, "status", "--store", db_target.url, "--json"
            )
    assert table.returncode == 0, table.stderr
    assert (
        "1 due job of type 'registry.newer' waits for a worker: no live worker runs job type "
        "'registry.newer'" in " ".join(table.stdout.split())
    )
    assert json.loads(document.stdout)["waiting_for_worker"] == {"registry.newer": 1}


async def test_jobsched_workers_prints_the_documented_table(db_target: Target) -> None:
    s = sched(db_target, num_workers=3)
    async with s:
        table = await asyncio.to_thread(jobsched, "workers", "--store", db_target.url)
    assert table.returncode == 0 and table.stderr == "", table
    header, _, row, summary = table.stdout.strip().splitlines()
    doc = (DOCS / "cli.md").read_text().split("$ jobsched workers --store")[1]
    documented = doc.splitlines()[1]
    assert header.split() == documented.split()
    me = s.kernel.backend.identity  # type: ignore[attr-defined]
    assert row.split()[:6] == [me, socket.gethostname(), str(os.getpid()), "idle", "default=3", "0"]
    assert summary == "1 worker: 1 idle"
    assert re.search(r"^\d+ workers: 1 live, 1 lost$", doc, flags=re.M)


@pytest.mark.parametrize(
    ("store", "fragment"),
    [
        ("memory://", "is not a store several processes can share"),
        ("sqlite:///{tmp}/missing.db", "no such file"),
        ("nosuch://x", "unknown store"),
    ],
)
def test_jobsched_workers_bad_input_is_one_line(store: str, fragment: str, tmp_path: Path) -> None:
    url = store.format(tmp=tmp_path)
    assert_bad_input(jobsched("workers", "--store", url), fragment)
    assert not (tmp_path / "missing.db").exists()


async def test_unserved_types_look_at_a_bounded_head_of_the_due_jobs(target: Target) -> None:
    """The count walks the due jobs in claim order and stops after `scan` of
    them: a bounded read however long the backlog."""
    async with producer(target) as client:
        for n in range(3):
            await client.submit(registry_jobs.Newer(n=n))
        await client.submit(target.rec("r"))
        store = await target.open_store()
        try:
            assert await store.unserved_types([], 10) == {"registry.newer": 3, "record": 1}
            assert await store.unserved_types(["record"], 10) == {"registry.newer": 3}
            assert await store.unserved_types(["record"], 2) == {"registry.newer": 2}
            assert await store.unserved_types(["record", "registry.newer"], 10) == {}
        finally:
            await store.close()


async def test_a_worker_whose_heartbeat_fails_runs_on_and_says_why(
    target: Target, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The registry is advisory: a store refusing heartbeats (or the goodbye)
    costs the worker its row, never its jobs."""
    from jobsched.store import StoreError
    from kernel_support import captured_logs

    async def refuse(self: Any, *args: Any) -> Any:
        raise StoreError(f"{self.url}: the registry is down")

    kind = type(target.store())
    monkeypatch.setattr(kind, "heartbeat", refuse)
    monkeypatch.setattr(kind, "forget_worker", refuse)
    with captured_logs() as logs:
        async with producer(target) as client, sched(target):
            done = await client.wait(await client.submit(target.rec("r")), timeout=30)
            assert done.status.value == "completed"
            assert await client.workers() == []
    events = {(e["event"], e.get("error")) for e in logs if e["log_level"] == "warning"}
    assert (
        "could not write the worker's heartbeat",
        f"{target.url}: the registry is down",
    ) in events
    assert (
        "could not remove the worker's registry row",
        f"{target.url}: the registry is down",
    ) in events
