"""Workers claim only what they can run (issue 23): real ``jobsched worker``
processes with two versions of one task module, on PostgreSQL and SQLite.

The two releases are docs/reliability.md's (Rolling deploys): the old one
has ``deploy.greet(name, shout=False)``; the new one has ``deploy.greet(name,
punctuation="!")`` and a new task, ``deploy.report``. Each version is a
module written into its own folder, and each worker gets its folder on
PYTHONPATH (``--import deploy_tasks``), as two releases of an application
would be deployed.
"""

from __future__ import annotations

import asyncio
import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from jobsched import Client, JobInfo, JobStatus
from jobsched.store import NewJob, StoreContext
from jobsched_plugins.postgres_store import PostgresStore
from jobsched_plugins.sqlite_store import SQLiteStore
from worker_support import Log, shared_store, wait_started

DOC = Path(__file__).resolve().parent.parent / "docs" / "reliability.md"


def release_source(which: str) -> str:
    """docs/reliability.md's ``# file: deploy_tasks.py (WHICH release)`` block."""
    header = f"# file: deploy_tasks.py ({which} release)\n"
    (body,) = re.findall(r"```python\n(" + re.escape(header) + r".*?)```", DOC.read_text(), re.S)
    return body


def shown_in_doc() -> str:
    """The ``jobsched jobs show`` output docs/reliability.md prints for the refused job."""
    (body,) = re.findall(r"```text\n(old-args .*?)```", DOC.read_text(), re.S)
    return body


@pytest.fixture(params=["postgresql", "sqlite"])
def store_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    return shared_store(request, tmp_path)


def release(tmp_path: Path, name: str, source: str) -> Path:
    """A folder holding one version of the application's task module."""
    folder = tmp_path / name
    folder.mkdir()
    (folder / "deploy_tasks.py").write_text(source)
    return folder


class DeployedWorker:
    """``jobsched worker --import deploy_tasks`` with one release on its path."""

    def __init__(self, url: str, release: Path, *options: str) -> None:
        env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(release), *sys.path])}
        self.proc = subprocess.Popen(
            [
                *(sys.executable, "-m", "jobsched", "worker", "--store", url, "--workers=2"),
                *("--grace=0", "--import", "deploy_tasks", *options),
            ],
            env=env,
            stderr=subprocess.PIPE,
            text=True,
        )
        self.log = Log()
        self.identity = wait_started(self.proc, self.log)

    def refusals(self, job_id: str) -> list[str]:
        return [
            line for line in self.log.lines if "cannot build claimed job" in line and job_id in line
        ]

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        assert self.proc.wait(timeout=60) == 0


def job(job_id: str, kind: str, **args: Any) -> NewJob:
    now = time.time()
    return NewJob(
        job_id=job_id,
        type=kind,
        args=args,
        options={"name": job_id, "executor": "thread"},
        run_at=now,
        submitted_at=now,
        sort_key=(0.0,),
    )


async def opened(url: str) -> Any:
    store = PostgresStore(url) if url.startswith("postgresql") else SQLiteStore(url)
    await store.open(StoreContext(worker_id="deployer", shared=True))
    return store


async def until(client: Client, job_id: str, check: Callable[[JobInfo], bool]) -> JobInfo:
    """`job_id`'s record once `check` holds for it (woken by every change)."""

    async def watch() -> JobInfo:
        while True:
            info = await client.get(job_id)
            if check(info):
                return info
            await client.store.wait_changed(1.0)

    return await asyncio.wait_for(watch(), 60)


@pytest.mark.slow
async def test_a_rolling_deploy_fails_no_job_for_the_version_skew(
    store_url: str, tmp_path: Path
) -> None:
    old = release(tmp_path, "old", release_source("old"))
    new = release(tmp_path, "new", release_source("new"))
    store = await opened(store_url)
    try:
        async with Client(store_url) as client:
            # The old release runs alone; the new one's web app submits already.
            worker = DeployedWorker(store_url, old)
            try:
                await store.insert(
                    [
                        job("report", "deploy.report", n=21),  # a task only the new release has
                        job("new-args", "deploy.greet", name="b", punctuation="?"),
                        job("both", "deploy.greet", name="c"),
                    ]
                )
                both = await until(client, "both", lambda i: i.done)
                refused = await until(client, "new-args", lambda i: i.build_refusals == 1)
                # Its claims passed the new task by: never claimed, it waits.
                report = await client.get("report")
            finally:
                worker.stop()
            assert (both.status, both.result) == (JobStatus.COMPLETED, "old hello c")
            assert (report.status, report.attempts, report.build_refusals) == (
                JobStatus.PENDING,
                0,
                0,
            )
            # Handed back untouched: pending, no attempt counted, the reason kept.
            assert (refused.status, refused.attempts, refused.lease_owner) == (
                JobStatus.PENDING,
                0,
                None,
            )
            assert "unknown argument 'punctuation'" in (refused.last_refusal or "")
            assert len(worker.refusals("new-args")) == 1  # said once, never claimed again

            # The new release arrives: it runs what the old one could not, and
            # refuses a job only the old signature accepts.
            await store.insert([job("old-args", "deploy.greet", name="d", shout=True)])
            first = DeployedWorker(store_url, new, "--max-build-refusals=2")
            try:
                report = await until(client, "report", lambda i: i.done)
                greeted = await until(client, "new-args", lambda i: i.done)
                waiting = await until(client, "old-args", lambda i: i.build_refusals == 1)
            finally:
                first.stop()
            assert (report.status, report.result) == (JobStatus.COMPLETED, 42)
            assert (greeted.status, greeted.result) == (JobStatus.COMPLETED, "new hello b?")
            assert waiting.status is JobStatus.PENDING
            assert "unknown argument 'shout'" in (waiting.last_refusal or "")

            # A second worker of the new release refuses it too: the bound.
            second = DeployedWorker(store_url, new, "--max-build-refusals=2")
            try:
                failed = await until(client, "old-args", lambda i: i.done)
            finally:
                second.stop()
            assert (failed.status, failed.build_refusals) == (JobStatus.FAILED, 2)
            assert failed.last_error is not None
            assert failed.last_error.startswith(
                "JobSpecError: 2 worker processes could not build this 'deploy.greet' job"
            )
            assert "unknown argument 'shout'" in failed.last_error
            assert len(second.refusals("old-args")) == 1
    finally:
        await store.close()
    # What an operator reads, as docs/reliability.md shows it.
    shown = subprocess.run(
        [sys.executable, "-m", "jobsched", "jobs", "show", "old-args", "--store", store_url],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "COLUMNS": "1000"},
    )
    assert shown.returncode == 0, shown.stderr
    assert shown.stdout == shown_in_doc()
