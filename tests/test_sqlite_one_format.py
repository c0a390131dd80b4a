"""One SQLite format: whatever wrote a file, every tool opens it.

A single-owner file (``jobsched run --store``, ``JobScheduler(store=...)``)
opens in a `Client` (and so in ``jobsched web`` and ``jobsched jobs``) for
reads, and for operator actions while no owner runs: the next owner restores
them. While one runs, an action is refused naming its host:pid. A shared file
opens in a scheduler left to choose its mode. The files in tests/sqlite_files/
were written by an earlier jobsched.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import sqlite3
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from jobsched import Client, JobScheduler, JobStatus, LocalClient, StoreError, build_job
from jobsched.store import StoreOwnedError
from jobsched.web import create_app
from jobsched_plugins.sqlite_store import SCHEMA_VERSION, SQLiteStore, migrations
from test_cli import jobsched
from test_web_browser import Process
from web_support import serving

FILES = Path(__file__).resolve().parent / "sqlite_files"
ME = f"{socket.gethostname()}:{os.getpid()}"


def copied(tmp_path: Path, name: str) -> str:
    """A copy of one of tests/sqlite_files/ (never changed in place), as a URL."""
    shutil.copy(FILES / name, tmp_path / name)
    return f"sqlite:///{tmp_path / name}"


def schema_version(url: str) -> int:
    path = url.removeprefix("sqlite:///")
    with sqlite3.connect(path) as conn:
        row = conn.execute("SELECT value FROM jobsched_meta WHERE name = 'schema_version'")
        return int(row.fetchone()[0])


@pytest.mark.parametrize("name", ["single-owner.db", "shared.db"])
async def test_a_client_reads_a_file_of_either_mode(tmp_path: Path, name: str) -> None:
    url = copied(tmp_path, name)
    async with Client(url) as client:
        by_key = {info.key: info for info in await client.jobs()}
        assert {"hello", "dead", "notify"} <= set(by_key)
        dead, notify = by_key["dead"], by_key["notify"]
        assert by_key["hello"].status is JobStatus.COMPLETED
        assert dead.status is JobStatus.FAILED
        assert notify.status is JobStatus.CANCELLED
        assert (await client.get(notify.job_id)).depends_on == (dead.job_id,)
        assert await client.dependents(dead.job_id) == [notify.job_id]
        assert await client.dependents_of([dead.job_id, notify.job_id, "job-nope"]) == {
            dead.job_id: [notify.job_id],
            notify.job_id: [],
        }
        page = await client.page(q="broken.csv")
        assert [info.job_id for info in page.jobs] == [dead.job_id] and page.total == 1
        page = await client.page(status="cancelled")
        assert [info.job_id for info in page.jobs] == [notify.job_id]
        stats = await client.stats()
        assert stats.counts["failed"] == 1 and stats.counts["cancelled"] == 1
        assert not stats.queue_paused
    if name == "single-owner.db":  # not its owner: reading wrote nothing, not even a migration
        assert (tmp_path / name).read_bytes() == (FILES / name).read_bytes()


async def test_an_action_on_a_file_no_one_runs_is_picked_up_by_its_next_owner(
    tmp_path: Path,
) -> None:
    url = copied(tmp_path, "single-owner.db")
    async with Client(url) as client:
        dead = next(info for info in await client.jobs() if info.key == "dead")
        retried = await client.retry(dead.job_id)
        assert retried.status is JobStatus.PENDING and retried.attempts == 0
        schedules = await client.schedules()
        assert [s.name for s in schedules] == ["heartbeat"] and not schedules[0].active
    assert schema_version(url) == SCHEMA_VERSION  # migrated by the action
    # The next owner restores the retried job and runs it (it fails again: 99 failures).
    async with JobScheduler(store=url) as owner:
        await owner.join()
        again = owner.get(dead.job_id)
        assert again.status is JobStatus.FAILED and again.attempts == 1
    async with Client(url) as client:
        # Cancel and purge too; a job already finished is not cancelled again.
        assert not await client.cancel(dead.job_id)
        assert await client.purge(older_than=0) == 5


async def test_an_action_while_the_owner_runs_is_refused_naming_it(tmp_path: Path) -> None:
    url = copied(tmp_path, "single-owner.db")
    async with Client(url) as client:
        dead = next(info for info in await client.jobs() if info.key == "dead")
        await client.retry(dead.job_id)
        async with JobScheduler(store=url):
            # Reads go on while it runs, and see what it writes: it restored
            # the retried job and ran it.
            info = await client.wait(dead.job_id)
            assert info.status is JobStatus.FAILED and info.attempts == 1
            with pytest.raises(StoreOwnedError, match=rf"running jobsched process \({ME}\)") as e:
                await client.retry(dead.job_id)
            assert e.value.owner == ME
            with pytest.raises(StoreError, match="let it finish \\(or stop it\\) and try again"):
                await client.requeue(status="failed")
        assert (await client.retry(dead.job_id)).status is JobStatus.PENDING


async def test_what_only_the_owner_does_is_refused_in_one_line(tmp_path: Path) -> None:
    url = copied(tmp_path, "single-owner.db")
    async with Client(url) as client:
        for action, what in (
            (client.pause_queue(), "pausing the queue"),
            (client.trigger_schedule("sched-1"), "triggering a schedule"),
        ):
            with pytest.raises(StoreError, match=f"single-owner file.*{what} is for that process"):
                await action


async def test_a_worker_still_refuses_a_single_owner_file(tmp_path: Path) -> None:
    url = copied(tmp_path, "single-owner.db")
    with pytest.raises(StoreError, match=r"is a single-owner store .*the shared mode cannot open"):
        await JobScheduler(store=url, shared=True).start()


async def test_a_scheduler_shares_a_shared_file(tmp_path: Path) -> None:
    url = copied(tmp_path, "shared.db")
    assert SQLiteStore(url).shared
    async with Client(url) as client:
        dead = next(info for info in await client.jobs() if info.key == "dead")
        await client.retry(dead.job_id)
        async with JobScheduler(store=url) as scheduler:  # shared: it claims from the file
            info = await client.wait(dead.job_id)
            assert info.status is JobStatus.FAILED and info.attempts == 1
            assert scheduler.get(dead.job_id).status is JobStatus.FAILED


@pytest.mark.slow
async def test_a_lock_file_left_by_a_crash_names_no_owner(tmp_path: Path) -> None:
    url = copied(tmp_path, "single-owner.db")
    owner = subprocess.Popen(
        [
            sys.executable,
            "-c",
            textwrap.dedent(
                f"""
                import asyncio, sys
                from jobsched import JobScheduler
                async def main():
                    async with JobScheduler(store={url!r}):
                        print("owning", flush=True)
                        await asyncio.sleep(3600)
                asyncio.run(main())
                """
            ),
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert owner.stdout is not None
        assert owner.stdout.readline() == "owning\n"
        async with Client(url) as client:
            dead = next(info for info in await client.jobs() if info.key == "dead")
            with pytest.raises(StoreOwnedError, match=f":{owner.pid}\\), which alone writes"):
                await client.retry(dead.job_id)
            owner.send_signal(signal.SIGKILL)
            owner.wait()
            # Its host:pid is still in the lock file; the lock died with it.
            assert str(owner.pid) in (tmp_path / "single-owner.db.lock").read_text()
            assert (await client.retry(dead.job_id)).status is JobStatus.PENDING
    finally:
        if owner.poll() is None:
            owner.kill()
            owner.wait()


async def test_a_file_of_schema_version_1_is_read_as_it_is_and_migrated_by_an_action(
    tmp_path: Path,
) -> None:
    path = tmp_path / "v1.db"
    with contextlib.closing(sqlite3.connect(path, isolation_level=None)) as conn:
        migrations.create(conn, migrations.SINGLE_OWNER)  # what a first jobsched wrote
        conn.execute(
            "INSERT INTO jobsched_jobs (job_id, key, type, args, options, depends_on, status, "
            "attempts, run_at, submitted_at, finished_at, seq, result, last_error, schedule_id) "
            """VALUES ('job-1', 'dead', 'flaky-upload', '{"path": "x", "failures": 99}', """
            """'{"name": "dead", "retry": {"policy": "none"}}', '[]', 'failed', 1, 0, 0, 1, 1, """
            "NULL, 'boom', NULL)"
        )
    url = f"sqlite:///{path}"
    async with Client(url) as client:
        assert (await client.get("job-1")).trigger_rule == "all_success"  # not a column yet
        assert schema_version(url) == 1
        assert (await client.retry("job-1")).status is JobStatus.PENDING
    assert schema_version(url) == SCHEMA_VERSION
    async with JobScheduler(store=url) as owner:  # which restores it, and runs it
        await owner.join()
        assert owner.get("job-1").status is JobStatus.FAILED


@pytest.mark.slow
def test_jobsched_run_on_a_shared_file_submits_its_jobs_for_the_workers(tmp_path: Path) -> None:
    url = copied(tmp_path, "shared.db")
    shutil.copy(FILES / "jobs.toml", tmp_path / "jobs.toml")
    worker = Process(["worker", "--store", url, "--grace=0"], {**os.environ}, "scheduler started")
    try:
        worker.wait_ready()
        ran = jobsched("run", "jobs.toml", "--store", url, cwd=tmp_path, timeout=120)
    finally:
        worker.stop()
    assert ran.returncode == 1, ran.stderr  # dead failed, notify was cancelled with it
    assert "5 jobs in" in ran.stdout and "run by `jobsched worker` processes" in ran.stdout


async def test_schedules_pause_and_jobs_requeue_while_no_owner_runs(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'jobs.db'}"
    email = {"to": "ops@corp", "subject": "hourly"}
    async with JobScheduler(store=url) as owner:
        schedule_id = owner.schedule_recurring(
            lambda: build_job("email", email), 3600.0, start_in=3600.0, key="hourly"
        )
        upload = build_job("flaky-upload", {"path": "x", "failures": 99}, retry="none")
        failed = owner.submit(upload)
        await owner.join()
    async with Client(url) as client:
        assert await client.pause_schedule(schedule_id)
        assert not await client.pause_schedule(schedule_id)  # paused already
        assert [s.paused for s in await client.schedules()] == [True]
        assert await client.requeue(status="failed", type="flaky-upload") == [failed]
        assert await client.requeue(status="failed") == []
    # The next owner restores the schedule paused (and runs the requeued job).
    async with JobScheduler(store=url) as owner:
        (restored,) = await LocalClient(owner).schedules()
        assert restored.schedule_id == schedule_id and restored.paused
        await owner.join()
    async with Client(url) as client:
        assert await client.resume_schedule(schedule_id)
        assert [s.paused for s in await client.schedules()] == [False]
        assert (await client.get(failed)).attempts == 1  # it ran again


async def test_the_job_page_of_a_single_owner_file_says_it_keeps_no_attempt_history(
    tmp_path: Path,
) -> None:
    url = copied(tmp_path, "single-owner.db")
    async with Client(url) as client:
        dead = {info.key: info for info in await client.jobs()}["dead"]
    assert dead.status is JobStatus.FAILED and dead.attempts == 1 and dead.history == ()
    async with serving(create_app(url)) as http:
        page = await http.get(f"/jobs/{dead.job_id}")
    assert page.status_code == 200, page.text
    assert "This store keeps no attempt history" in page.text
    assert "No attempt has ended yet" not in page.text
