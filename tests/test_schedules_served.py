"""Stored schedules are served by the workers (issue 20 item 11), on both shared stores.

A schedule does not stop when the process that added it exits: every
``jobsched worker`` fires every stored schedule whose job type it has
(the per-period compare-and-set keeps several from firing one period
twice), and a schedule no process fires is flagged overdue in
`Client.schedules`, ``jobsched schedules list`` (and ``--json``) and the
dashboard. A worker without the job type leaves the schedule alone, so none
of its periods is consumed where its job cannot be built.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import pytest

import task_examples
from jobsched import Client, JobInfo, JobStatus, ScheduleInfo
from jobsched._codec import JobCodec
from jobsched.backends.schedules import OVERDUE_AFTER, overdue, schedule_row
from jobsched.store import SharedScheduleRow
from jobsched.web import create_app
from worker_support import TESTS, Worker, shared_store

pytestmark = pytest.mark.slow

EVERY = 0.5


@pytest.fixture(params=["postgresql", "sqlite"])
def store_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    return shared_store(request, tmp_path)


@pytest.fixture
async def client(store_url: str) -> AsyncIterator[Client]:
    async with Client(store_url) as opened:
        yield opened


def tick() -> task_examples.send_email:
    return task_examples.send_email.job("ops@example.com", subject="tick")


class TaskWorker(Worker):
    """``jobsched worker --import task_examples``: it has the schedule's job type."""

    def __init__(self, url: str) -> None:
        super().__init__(url, "--import", "task_examples")


def add_schedule_and_exit(url: str, every: float) -> str:
    """What a setup script does: add a schedule, then exit. Its id."""
    script = (
        "import asyncio, sys, task_examples\n"
        "from jobsched import Client\n"
        "async def main():\n"
        "    async with Client(sys.argv[1]) as client:\n"
        "        job = task_examples.send_email.job('ops@example.com', subject='tick')\n"
        "        print(await client.add_schedule(job, every=float(sys.argv[2])))\n"
        "asyncio.run(main())\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script, url, str(every)],
        cwd=TESTS,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout.split()[-1]


async def store_an_hour_ago(client: Client, every: float = 60.0) -> str:
    """The schedule a process added an hour ago and that nobody served since."""
    then = time.time() - 3600
    row = schedule_row(JobCodec(client.plugins), tick(), every=every, now=then, offset=0.0)
    await client.store.add_schedule(row)
    return row.schedule_id


async def schedule_info(client: Client, schedule_id: str) -> ScheduleInfo:
    (info,) = [i for i in await client.schedules() if i.schedule_id == schedule_id]
    return info


async def completed_runs(client: Client, schedule_id: str, count: int) -> list[JobInfo]:
    """Wait (woken by the store) until the schedule's jobs completed `count` times."""
    deadline = time.monotonic() + 90
    while True:
        fired = await client.jobs(schedule=schedule_id)
        done = [info for info in fired if info.status is JobStatus.COMPLETED]
        if len(done) >= count:
            return fired
        if time.monotonic() > deadline:
            pytest.fail(f"{len(done)} of {count} runs of {schedule_id} completed: {fired}")
        await client.wait_for_change(1.0)


def cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "jobsched", *args],
        cwd=TESTS,
        capture_output=True,
        text=True,
        timeout=120,
    )


async def test_workers_keep_firing_a_schedule_whose_process_exited(store_url: str) -> None:
    workers = [TaskWorker(store_url)]
    try:
        schedule_id = add_schedule_and_exit(store_url, EVERY)
        async with Client(store_url) as client:
            # The worker that ran already found the new schedule and fires it.
            first = await completed_runs(client, schedule_id, 2)
            assert {info.submitted_by for info in first} == {workers[0].identity}
            workers.append(TaskWorker(store_url))  # two serve it now
            fired = await completed_runs(client, schedule_id, len(first) + 4)
            info = await schedule_info(client, schedule_id)
            assert info.active and not info.overdue
    finally:
        for worker in workers:
            worker.stop()
    # Each period fired once however many workers serve it, on the schedule's
    # grid, and each job ran once.
    assert {info.submitted_by for info in fired} <= {w.identity for w in workers}
    periods = [info.options["scheduled_for"] for info in fired]
    assert len(set(periods)) == len(periods), periods
    steps = [(period - min(periods)) / EVERY for period in periods]
    assert all(abs(step - round(step)) < 1e-6 for step in steps), periods
    assert all(info.attempts == 1 for info in fired if info.status is JobStatus.COMPLETED)


async def test_a_schedule_nobody_fires_is_overdue_wherever_it_is_shown(
    client: Client, store_url: str
) -> None:
    late = await store_an_hour_ago(client)
    served = await client.add_schedule(tick(), every=3600, start_in=3600)  # in the future
    info = await schedule_info(client, late)
    assert info.overdue and info.active and not info.paused
    assert not (await schedule_info(client, served)).overdue

    listed = json.loads(cli("schedules", "list", "--json", "--store", store_url).stdout)
    assert {s["schedule_id"]: s["overdue"] for s in listed} == {late: True, served: False}
    table = cli("schedules", "list", "--store", store_url).stdout
    assert table.splitlines()[-1] == "2 schedules, 0 paused, 1 overdue"
    assert f"overdue: {late} was due at " in table
    assert "start a worker with job type 'task_examples.send_email' installed" in table

    transport = httpx.ASGITransport(app=create_app(client=client))
    async with httpx.AsyncClient(transport=transport, base_url="http://dash") as http:
        page = (await http.get("/schedules")).text
        api = (await http.get("/api/schedules")).json()["schedules"]
    row = page[page.index(f'data-schedule="{late}"') :]
    assert 'class="pill s-overdue"' in row[: row.index("</tr>")]
    assert {s["schedule_id"]: s["overdue"] for s in api} == {late: True, served: False}

    # Paused, it is not overdue: nobody is meant to fire it.
    await client.pause_schedule(late)
    assert not (await schedule_info(client, late)).overdue


async def test_a_worker_without_the_job_type_consumes_no_period(
    client: Client, store_url: str
) -> None:
    schedule_id = await store_an_hour_ago(client)
    before = await schedule_info(client, schedule_id)
    lacking = Worker(store_url)  # no --import task_examples
    try:
        line = lacking.log.wait_for(schedule_id)
        assert "not serving schedule: its job cannot be built here" in line
        assert "task_examples.send_email" in line
        # It looked and left the schedule alone: nothing fired, still due.
        after = await schedule_info(client, schedule_id)
        assert (after.fired, after.next_run, after.overdue) == (0, before.next_run, True)
        assert await client.jobs(schedule=schedule_id) == []
    finally:
        # (A worker that claims a job whose type it lacks fails it: a store's
        # workers need the job types they may claim, docs/triggers.md.)
        lacking.stop()
    able = TaskWorker(store_url)
    try:
        fired = await completed_runs(client, schedule_id, 1)
    finally:
        able.stop()
    # The missed hour coalesced into one fire, by the worker that has the type.
    assert [info.submitted_by for info in fired] == [able.identity]
    info = await schedule_info(client, schedule_id)
    assert info.fired == 1 and not info.overdue and info.next_run is not None
    assert info.next_run > time.time()


def test_overdue_is_a_due_fire_later_than_its_bound_of_an_active_unpaused_schedule() -> None:
    now = 1_000_000.0

    def row(next_run: float, **state: bool) -> SharedScheduleRow:
        return SharedScheduleRow(
            schedule_id="sched-x",
            type="t",
            args={},
            options={},
            trigger={"interval": 60},
            next_run=next_run,
            **state,
        )

    assert overdue(row(now - OVERDUE_AFTER - 1), now)
    assert not overdue(row(now - OVERDUE_AFTER + 1), now)  # being fired now
    assert not overdue(row(now + 60), now)
    assert not overdue(row(now - 3600, paused=True), now)
    assert not overdue(row(now - 3600, active=False), now)
    assert not overdue(row(float("inf")), now)  # its last period fired
    info = ScheduleInfo.from_row(row(now - 3600), now)
    assert info.overdue and info.next_run == now - 3600
